// SPDX-License-Identifier: MIT
/*
 * vhost/core/vu-proto.c: the front end's byte stream through the real reader,
 * vu_msg_read() on a non-blocking socketpair, then every payload decoder on
 * each message it accepts.
 *
 * Input: [num_queues][nfds][chunk][fd_chunk] stream...
 *   the stream is written in chunks of `chunk` bytes (0: at once), the
 *   reader runs after each chunk (a front end that dribbles), and chunk
 *   number fd_chunk carries nfds fds of /dev/null (up to 11, more than
 *   VU_MAX_FDS).  Every fd the reader hands over is checked and closed;
 *   any fd open afterwards that was not before is a leak (abort).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "fuzz-stream.h"
#include "vu-proto.h"

#define MAX_SENT_FDS 11u

static int devnull = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	FUZZ_CHECK(devnull >= 0);
	return 0;
}

static bool queue_ok(uint32_t index, unsigned int nq)
{
	return index < nq;
}

static void decode_all(const struct vu_msg *msg, unsigned int nq)
{
	struct vu_vring_state st;
	struct vu_vring_addr addr;
	struct vu_mem_table mt;
	struct vu_mem_desc md;
	struct vu_log_area log;
	struct vu_config_req cfg;
	struct vu_inflight_desc inf;
	uint32_t index;
	uint64_t u;
	bool has_fd;
	uint32_t r = msg->request;

	FUZZ_CHECK(msg->size <= VU_MAX_PAYLOAD && msg->nfds <= VU_MAX_FDS);
	FUZZ_CHECK(strcmp(vu_request_name(r), "UNKNOWN"));
	for (unsigned int i = 0; i < msg->nfds; i++)
		FUZZ_CHECK(fcntl(msg->fds[i], F_GETFD) >= 0);

	(void)vu_decode_u64(msg, &u);
	if (!vu_decode_vring_state(msg, &st) &&
	    (r == VU_SET_VRING_NUM || r == VU_SET_VRING_BASE || r == VU_GET_VRING_BASE ||
	     r == VU_SET_VRING_ENABLE))
		FUZZ_CHECK(queue_ok(st.index, nq));
	if (!vu_decode_vring_addr(msg, &addr) && r == VU_SET_VRING_ADDR)
		FUZZ_CHECK(queue_ok(addr.index, nq));
	if (!vu_decode_vring_fd(msg, &index, &has_fd) &&
	    (r == VU_SET_VRING_KICK || r == VU_SET_VRING_CALL || r == VU_SET_VRING_ERR)) {
		FUZZ_CHECK(queue_ok(index, nq));
		FUZZ_CHECK(msg->nfds == (has_fd ? 1u : 0u));
	}
	if (!vu_decode_mem_table(msg, &mt))
		FUZZ_CHECK(mt.nregions <= VU_MEM_TABLE_MAX_REGIONS && mt.nregions == msg->nfds);
	(void)vu_decode_mem_reg(msg, &md);
	(void)vu_decode_log_area(msg, &log);
	if (!vu_decode_config(msg, &cfg)) {
		FUZZ_CHECK(cfg.size <= VU_MAX_CONFIG_SIZE &&
			   (uint64_t)cfg.offset + cfg.size <= VU_MAX_CONFIG_SIZE);
		FUZZ_CHECK(cfg.data + cfg.size <= msg->payload + msg->size);
	}
	(void)vu_decode_inflight(msg, &inf);
}

/* Chunk fd_chunk of the stream carries nfds fds of /dev/null. */
static void send_chunk(int sock, const uint8_t *p, size_t n, unsigned int nfds)
{
	int fds[MAX_SENT_FDS];

	for (unsigned int i = 0; i < nfds; i++)
		fds[i] = devnull;
	fuzz_send(sock, p, n, fds, nfds);
}

/* Runs the reader until it wants more bytes (0) or gives up (<0). */
static int drain(int sock, struct vu_msg_reader *r, unsigned int nq)
{
	for (;;) {
		int ret = vu_msg_read(sock, r, nq);

		if (ret != 1)
			return ret;
		decode_all(&r->msg, nq);
		vu_msg_close_fds(&r->msg);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vu_msg_reader reader;
	unsigned int nq, nfds, chunk, fd_chunk;
	struct fuzz_fds fds_before;
	int sv[2];
	int ret = 0;

	if (size < 5 || size > 1 << 16)
		return 0;
	nq = 1 + data[0] % 8;
	nfds = data[1] % (MAX_SENT_FDS + 1);
	chunk = data[2];
	fd_chunk = data[3] % 8;
	data += 4, size -= 4;
	if (!chunk)
		chunk = (unsigned int)size;
	fuzz_fds_snapshot(&fds_before);
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
	vu_msg_reader_init(&reader);
	for (size_t off = 0, i = 0; ret >= 0 && off < size; off += chunk, i++) {
		size_t n = size - off < chunk ? size - off : chunk;

		send_chunk(sv[0], data + off, n, i == fd_chunk ? nfds : 0);
		ret = drain(sv[1], &reader, nq);
	}
	if (ret >= 0) {
		shutdown(sv[0], SHUT_WR);
		ret = drain(sv[1], &reader, nq);
		FUZZ_CHECK(ret < 0); /* EOF at the latest */
	}
	vu_msg_reader_reset(&reader);
	close(sv[0]);
	close(sv[1]);
	fuzz_fds_check_no_leak(&fds_before);
	return 0;
}

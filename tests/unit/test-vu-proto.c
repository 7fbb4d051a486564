// SPDX-License-Identifier: MIT
/*
 * Unit tests of vhost/core/vu-proto.c: the incremental message reader over a
 * socketpair, and the payload decoders.
 *
 * Sizes, fd rules and queue-index rules are written down here from QEMU's
 * docs/interop/vhost-user.rst and notes/vhost-daemon-spec.md, not from the
 * code under test.  Received fds are proved closed with pipe probes: the
 * test sends a pipe's write end, closes its own copy, and the read end sees
 * EOF only if no copy is left open anywhere in the process.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "vu-proto.h"
#include "fdpass.h"
#include "unit-common.h"

#define FUZZ_ITERATIONS 100000u
#define FUZZ_SEED 0x243f6a8885a308d3ull

#define HDR 12u
#define VERSION 0x1u
#define F_REPLY 0x4u
#define F_NEED_REPLY 0x8u
#define NOFD 0x100u

/* ---- the request table, as vhost-user.rst and the contract state it ---- */

enum fd_kind { FD_NONE, FD_ONE, FD_OPTIONAL, FD_VRING, FD_MEM };
enum q_kind { Q_NONE, Q_STATE, Q_U64 };

struct spec_row {
	uint32_t req;
	uint32_t min, max;
	enum fd_kind fds;
	enum q_kind q;
};

static const struct spec_row spec[] = {
	{ 1, 0, 0, FD_NONE, Q_NONE },	  /* GET_FEATURES */
	{ 2, 8, 8, FD_NONE, Q_NONE },	  /* SET_FEATURES: u64 */
	{ 3, 0, 0, FD_NONE, Q_NONE },	  /* SET_OWNER */
	{ 4, 0, 0, FD_NONE, Q_NONE },	  /* RESET_OWNER */
	{ 5, 8, 8 + 32 * 8, FD_MEM, Q_NONE }, /* SET_MEM_TABLE: u32 n, pad, 8 regions max */
	{ 6, 16, 16, FD_ONE, Q_NONE },	  /* SET_LOG_BASE: log description */
	{ 8, 8, 8, FD_NONE, Q_STATE },	  /* SET_VRING_NUM: vring state */
	{ 9, 40, 40, FD_NONE, Q_STATE },  /* SET_VRING_ADDR: vring address */
	{ 10, 8, 8, FD_NONE, Q_STATE },	  /* SET_VRING_BASE */
	{ 11, 8, 8, FD_NONE, Q_STATE },	  /* GET_VRING_BASE */
	{ 12, 8, 8, FD_VRING, Q_U64 },	  /* SET_VRING_KICK */
	{ 13, 8, 8, FD_VRING, Q_U64 },	  /* SET_VRING_CALL */
	{ 14, 8, 8, FD_VRING, Q_U64 },	  /* SET_VRING_ERR */
	{ 15, 0, 0, FD_NONE, Q_NONE },	  /* GET_PROTOCOL_FEATURES */
	{ 16, 8, 8, FD_NONE, Q_NONE },	  /* SET_PROTOCOL_FEATURES */
	{ 17, 0, 0, FD_NONE, Q_NONE },	  /* GET_QUEUE_NUM */
	{ 18, 8, 8, FD_NONE, Q_STATE },	  /* SET_VRING_ENABLE */
	{ 21, 0, 0, FD_ONE, Q_NONE },	  /* SET_BACKEND_REQ_FD */
	{ 24, 12, 12 + 256, FD_NONE, Q_NONE }, /* GET_CONFIG */
	{ 25, 12, 12 + 256, FD_NONE, Q_NONE }, /* SET_CONFIG */
	{ 31, 20, 24, FD_NONE, Q_NONE },  /* GET_INFLIGHT_FD: 20 bytes, QEMU pads to 24 */
	{ 32, 20, 24, FD_ONE, Q_NONE },	  /* SET_INFLIGHT_FD */
	{ 34, 0, 0, FD_NONE, Q_NONE },	  /* RESET_DEVICE */
	{ 36, 0, 0, FD_NONE, Q_NONE },	  /* GET_MAX_MEM_SLOTS */
	{ 37, 40, 40, FD_ONE, Q_NONE },	  /* ADD_MEM_REG: u64 pad + region */
	{ 38, 40, 40, FD_OPTIONAL, Q_NONE }, /* REM_MEM_REG: an fd MAY come, is closed */
	{ 39, 8, 8, FD_NONE, Q_NONE },	  /* SET_STATUS */
	{ 40, 0, 0, FD_NONE, Q_NONE },	  /* GET_STATUS */
	{ 42, 8, 8, FD_ONE, Q_NONE },	  /* SET_DEVICE_STATE_FD: u32 direction, u32 phase */
	{ 43, 0, 0, FD_NONE, Q_NONE },	  /* CHECK_DEVICE_STATE */
};

static const struct spec_row *spec_row(uint32_t req)
{
	for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); i++)
		if (spec[i].req == req)
			return &spec[i];
	return NULL;
}

/* ---- helpers ---- */

/* One sendmsg of exactly len bytes (len may be 0 only with fds). */
/* Header + payload into buf; payload NULL means zeros.  Returns length. */
static size_t mk(uint8_t *buf, uint32_t req, uint32_t flags, uint32_t size, const void *payload)
{
	ut_st32(buf, req);
	ut_st32(buf + 4, flags);
	ut_st32(buf + 8, size);
	if (payload)
		memcpy(buf + HDR, payload, size);
	else
		memset(buf + HDR, 0, size);
	return HDR + size;
}

/* A pipe whose write end is sent; EOF on the read end proves it closed. */
struct probe {
	int rd;
	int wr;
};

static void probe_open(struct probe *p)
{
	int fds[2];

	assert_int_equal(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
	p->rd = fds[0];
	p->wr = fds[1];
}

static void probes_open(struct probe *p, int *wr, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		probe_open(&p[i]);
		wr[i] = p[i].wr;
	}
}

/* Closes the test's copy; true when no other copy of the write end is open. */
static bool probe_closed(struct probe *p)
{
	char c;
	ssize_t n;

	if (p->wr >= 0)
		close(p->wr);
	p->wr = -1;
	n = read(p->rd, &c, 1);
	close(p->rd);
	p->rd = -1;
	return n == 0;
}

static void assert_probes_closed(struct probe *p, unsigned int n, const char *what)
{
	for (unsigned int i = 0; i < n; i++)
		if (!probe_closed(&p[i]))
			fail_msg("%s: sent fd %u is still open somewhere", what, i);
}

/* Reads with a fresh reader; the socket holds one whole message. */
static int read_once(int sock, struct vu_msg_reader *r, unsigned int nq)
{
	vu_msg_reader_init(r);
	return vu_msg_read(sock, r, nq);
}

/*
 * Sends buf (with nfds probe fds attached to its first byte) on a fresh
 * socketpair and returns what one vu_msg_read says.  On 1 the message's
 * fds are closed by the caller-side vu_msg_close_fds().  In every case all
 * probe fds must end up closed once the sockets are.
 */
static int try_msg(const uint8_t *buf, size_t len, unsigned int nfds, unsigned int nq,
		   const char *what)
{
	struct vu_msg_reader *r = malloc(sizeof(*r));
	struct probe p[16];
	int wr[16];
	int sv[2], ret;

	assert_non_null(r);
	assert_true(nfds <= 16);
	ut_stream_pair(sv);
	probes_open(p, wr, nfds);
	ut_send_raw(sv[0], buf, len, wr, nfds);
	ret = read_once(sv[1], r, nq);
	if (ret == 1) {
		if (r->msg.nfds != nfds)
			fail_msg("%s: message has %u fds, %u sent", what, r->msg.nfds, nfds);
		vu_msg_close_fds(&r->msg);
	}
	close(sv[0]);
	close(sv[1]);
	assert_probes_closed(p, nfds, what);
	free(r);
	return ret;
}

static void expect_ok(const uint8_t *buf, size_t len, unsigned int nfds, unsigned int nq,
		      const char *what)
{
	int ret = try_msg(buf, len, nfds, nq, what);

	if (ret != 1)
		fail_msg("%s: vu_msg_read returned %d, want 1", what, ret);
}

static void expect_reject(const uint8_t *buf, size_t len, unsigned int nfds, unsigned int nq,
			  const char *what)
{
	int ret = try_msg(buf, len, nfds, nq, what);

	if (ret >= 0)
		fail_msg("%s: vu_msg_read returned %d, want -errno", what, ret);
}

/* A request with a zero payload of `size` bytes, sent with nfds fds. */
struct zeroed_case {
	uint32_t req, size;
	unsigned int nfds;
	const char *what;
};

/* Each case is refused, and the fds that came with it are closed. */
static void expect_zeroed_rejected(const struct zeroed_case *cases, size_t n)
{
	uint8_t buf[HDR + 64];

	for (size_t i = 0; i < n; i++) {
		size_t len = mk(buf, cases[i].req, VERSION, cases[i].size, NULL);

		expect_reject(buf, len, cases[i].nfds, 1, cases[i].what);
	}
}

/* ---- whole messages ---- */

static void test_whole_messages(void **state)
{
	struct vu_msg_reader r;
	uint8_t buf[3 * (HDR + 40)], payload[40];
	size_t len = 0;
	int sv[2];

	(void)state;
	ut_stream_pair(sv);
	len += mk(buf + len, 1, VERSION, 0, NULL);
	ut_st64(payload, 0x0123456789abcdefull);
	len += mk(buf + len, 2, VERSION | F_NEED_REPLY, 8, payload);
	for (unsigned int i = 0; i < 40; i++)
		payload[i] = (uint8_t)(i + 1);
	ut_st32(payload, 1); /* queue index 1 */
	ut_st32(payload + 4, 1); /* flags: LOG */
	len += mk(buf + len, 9, VERSION, 40, payload);
	ut_send_raw(sv[0], buf, len, NULL, 0);

	vu_msg_reader_init(&r);
	assert_int_equal(vu_msg_read(sv[1], &r, 2), 1);
	assert_int_equal(r.msg.request, 1);
	assert_int_equal(r.msg.flags, VERSION);
	assert_int_equal(r.msg.size, 0);
	assert_int_equal(r.msg.nfds, 0);

	assert_int_equal(vu_msg_read(sv[1], &r, 2), 1);
	assert_int_equal(r.msg.request, 2);
	assert_int_equal(r.msg.flags, VERSION | F_NEED_REPLY);
	assert_int_equal(r.msg.size, 8);
	assert_int_equal(ut_ld(r.msg.payload, 8), 0x0123456789abcdefull);

	assert_int_equal(vu_msg_read(sv[1], &r, 2), 1);
	assert_int_equal(r.msg.request, 9);
	assert_int_equal(r.msg.size, 40);
	assert_memory_equal(r.msg.payload, payload, 40);

	/* Nothing more: wait, do not fail. */
	assert_int_equal(vu_msg_read(sv[1], &r, 2), 0);
	/* Then the peer goes away between messages. */
	close(sv[0]);
	assert_int_equal(vu_msg_read(sv[1], &r, 2), -ECONNRESET);
	close(sv[1]);
}

static void test_dribble(void **state)
{
	struct vu_msg_reader r;
	uint8_t buf[HDR + 40], payload[40];
	size_t len;
	int sv[2];

	(void)state;
	for (unsigned int i = 0; i < 40; i++)
		payload[i] = (uint8_t)(0xa0 + i);
	ut_st32(payload, 0);
	ut_st32(payload + 4, 0);
	len = mk(buf, 9, VERSION, 40, payload);
	ut_stream_pair(sv);
	vu_msg_reader_init(&r);
	for (size_t i = 0; i < len; i++) {
		int ret;

		ut_send_raw(sv[0], buf + i, 1, NULL, 0);
		ret = vu_msg_read(sv[1], &r, 1);
		if (i + 1 < len && ret != 0)
			fail_msg("byte %zu of %zu: vu_msg_read returned %d, want 0", i + 1, len, ret);
		if (i + 1 == len && ret != 1)
			fail_msg("last byte: vu_msg_read returned %d, want 1", ret);
	}
	assert_int_equal(r.msg.request, 9);
	assert_int_equal(r.msg.size, 40);
	assert_memory_equal(r.msg.payload, payload, 40);

	/* A second message, dribbled, with its fd on the very first byte. */
	{
		struct probe p;
		uint8_t kick[HDR + 8];
		size_t klen = mk(kick, 12, VERSION, 8, NULL);

		probe_open(&p);
		for (size_t i = 0; i < klen; i++) {
			int ret;

			ut_send_raw(sv[0], kick + i, 1, i == 0 ? &p.wr : NULL, i == 0);
			ret = vu_msg_read(sv[1], &r, 1);
			assert_int_equal(ret, i + 1 == klen ? 1 : 0);
		}
		assert_int_equal(r.msg.request, 12);
		assert_int_equal(r.msg.nfds, 1);
		vu_msg_close_fds(&r.msg);
		assert_true(probe_closed(&p));
	}
	close(sv[0]);
	close(sv[1]);
}

/* ---- fds ---- */

static void test_fds_with_header(void **state)
{
	struct vu_msg_reader r;
	uint8_t buf[HDR + 8 + 32 * 8];
	struct probe p[8];
	int wr[8], sv[2];
	size_t len;

	(void)state;
	/* SET_VRING_CALL, queue 0, one eventfd-like fd: it must be usable. */
	ut_stream_pair(sv);
	probes_open(p, wr, 1);
	len = mk(buf, 13, VERSION, 8, NULL);
	ut_send_raw(sv[0], buf, len, wr, 1);
	vu_msg_reader_init(&r);
	assert_int_equal(vu_msg_read(sv[1], &r, 1), 1);
	assert_int_equal(r.msg.nfds, 1);
	assert_true(r.msg.fds[0] >= 0);
	assert_int_equal(write(r.msg.fds[0], "x", 1), 1);
	{
		char c = 0;

		assert_int_equal(read(p[0].rd, &c, 1), 1);
		assert_int_equal(c, 'x');
	}
	/* vu_msg_take_fd hands it over exactly once. */
	{
		int fd = vu_msg_take_fd(&r.msg, 0);

		assert_true(fd >= 0);
		assert_int_equal(vu_msg_take_fd(&r.msg, 0), -1);
		assert_int_equal(vu_msg_take_fd(&r.msg, 1), -1);
		vu_msg_close_fds(&r.msg); /* must not close the taken fd */
		assert_true(fcntl(fd, F_GETFD) >= 0);
		close(fd);
	}
	assert_probes_closed(p, 1, "vring call");

	/* SET_MEM_TABLE with 8 regions and 8 fds: the maximum is fine. */
	probes_open(p, wr, 8);
	len = mk(buf, 5, VERSION, 8 + 32 * 8, NULL);
	ut_st32(buf + HDR, 8);
	ut_send_raw(sv[0], buf, len, wr, 8);
	assert_int_equal(vu_msg_read(sv[1], &r, 1), 1);
	assert_int_equal(r.msg.nfds, 8);
	for (unsigned int i = 0; i < 8; i++)
		assert_true(fcntl(r.msg.fds[i], F_GETFD) & FD_CLOEXEC);
	vu_msg_close_fds(&r.msg);
	vu_msg_close_fds(&r.msg); /* twice is safe */
	assert_probes_closed(p, 8, "mem table 8");
	close(sv[0]);
	close(sv[1]);
}

static void test_too_many_fds(void **state)
{
	/*
	 * More than eight fds for one message: all at once, or split between
	 * the header's sendmsg and the payload's (each batch alone may be
	 * within the limit).
	 */
	static const struct {
		const char *what;
		unsigned int with_header, with_payload; /* with_payload 0: one sendmsg */
	} cases[] = {
		{ "9 fds at once", 9, 0 },
		{ "6+6 fds", 6, 6 },
		{ "5+4 fds", 5, 4 },
	};
	uint8_t buf[HDR + 8 + 32 * 8];
	struct vu_msg_reader r;
	struct probe p[12];
	int wr[12], sv[2], ret, before;
	size_t len;

	(void)state;
	before = ut_count_fds();
	/* A request that takes fds. */
	len = mk(buf, 5, VERSION, 8 + 32 * 8, NULL);
	ut_st32(buf + HDR, 8);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned int n1 = cases[i].with_header, n2 = cases[i].with_payload;

		ut_stream_pair(sv);
		probes_open(p, wr, n1 + n2);
		if (n2) {
			ut_send_raw(sv[0], buf, HDR, wr, n1);
			ut_send_raw(sv[0], buf + HDR, len - HDR, wr + n1, n2);
		} else {
			ut_send_raw(sv[0], buf, len, wr, n1);
		}
		ret = read_once(sv[1], &r, 1);
		if (ret >= 0)
			fail_msg("%s: vu_msg_read returned %d", cases[i].what, ret);
		close(sv[0]);
		close(sv[1]);
		assert_probes_closed(p, n1 + n2, cases[i].what);
	}
	assert_int_equal(ut_count_fds(), before);
}

static void test_fds_not_taken(void **state)
{
	/* Requests that take no fd, or one, sent with more: zero payloads. */
	static const struct zeroed_case more_fds[] = {
		{ 1, 0, 1, "GET_FEATURES + fd" },
		{ 2, 8, 2, "SET_FEATURES + 2 fds" },
		{ 8, 8, 1, "SET_VRING_NUM + fd" },
		{ 24, 12, 1, "GET_CONFIG + fd" },
		{ 31, 24, 1, "GET_INFLIGHT_FD + fd" },
		{ 13, 8, 2, "CALL + 2 fds" },
		{ 6, 16, 2, "SET_LOG_BASE + 2 fds" },
		{ 38, 40, 2, "REM_MEM_REG + 2 fds" },
	};
	uint8_t buf[HDR + 64];
	size_t len;

	(void)state;
	expect_zeroed_rejected(more_fds, sizeof(more_fds) / sizeof(more_fds[0]));
	/* KICK with the NOFD bit says no fd comes: one that does is a lie. */
	len = mk(buf, 12, VERSION, 8, NULL);
	ut_st64(buf + HDR, NOFD);
	expect_reject(buf, len, 1, 1, "KICK NOFD + fd");
	len = mk(buf, 38, VERSION, 40, NULL);
	expect_ok(buf, len, 1, 1, "REM_MEM_REG + 1 fd (MAY)");
	expect_ok(buf, len, 0, 1, "REM_MEM_REG, no fd");
}

static void test_fds_missing(void **state)
{
	/* Requests that need an fd, sent without: zero payloads. */
	static const struct zeroed_case no_fd[] = {
		{ 6, 16, 0, "SET_LOG_BASE, no fd" },
		{ 21, 0, 0, "SET_BACKEND_REQ_FD, no fd" },
		{ 37, 40, 0, "ADD_MEM_REG, no fd" },
		{ 32, 24, 0, "SET_INFLIGHT_FD, no fd" },
		{ 7, 0, 0, "SET_LOG_FD, no fd" },
	};
	uint8_t buf[HDR + 64];
	size_t len;

	(void)state;
	expect_zeroed_rejected(no_fd, sizeof(no_fd) / sizeof(no_fd[0]));
	len = mk(buf, 6, VERSION, 16, NULL);
	expect_ok(buf, len, 1, 1, "SET_LOG_BASE, 1 fd");
	for (uint32_t req = 12; req <= 14; req++) {
		len = mk(buf, req, VERSION, 8, NULL);
		expect_reject(buf, len, 0, 1, "KICK/CALL/ERR without NOFD, no fd");
		expect_ok(buf, len, 1, 1, "KICK/CALL/ERR with fd");
		ut_st64(buf + HDR, NOFD);
		expect_ok(buf, len, 0, 1, "KICK/CALL/ERR NOFD, no fd");
	}
}

/*
 * The dispatcher's caller owns a message's fds once vu_msg_read returned 1,
 * and may take them all with vu_msg_take_fd.  The next message must then
 * carry exactly the fds that came with it.
 */
static void test_fds_taken_do_not_carry_over(void **state)
{
	struct vu_msg_reader r;
	uint8_t buf[HDR + 8];
	struct probe p;
	int sv[2], fd;
	size_t len;

	(void)state;
	ut_stream_pair(sv);
	probe_open(&p);
	vu_msg_reader_init(&r);
	len = mk(buf, 13, VERSION, 8, NULL); /* SET_VRING_CALL + fd */
	ut_send_raw(sv[0], buf, len, &p.wr, 1);
	assert_int_equal(vu_msg_read(sv[1], &r, 1), 1);
	fd = vu_msg_take_fd(&r.msg, 0);
	assert_true(fd >= 0);
	len = mk(buf, 1, VERSION, 0, NULL); /* GET_FEATURES, no fd */
	ut_send_raw(sv[0], buf, len, NULL, 0);
	assert_int_equal(vu_msg_read(sv[1], &r, 1), 1);
	assert_int_equal(r.msg.nfds, 0);
	close(fd);
	vu_msg_reader_reset(&r);
	close(sv[0]);
	close(sv[1]);
	assert_true(probe_closed(&p));
}

/* ---- header checks ---- */

static void test_unknown_requests(void **state)
{
	static const uint32_t codes[] = { 0, 19, 20, 22, 23, 41, 1000, 0xffffffffu };
	uint8_t buf[HDR + 8];
	char what[64];
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		snprintf(what, sizeof(what), "request %u", codes[i]);
		len = mk(buf, codes[i], VERSION, 0, NULL);
		expect_reject(buf, len, 0, 1, what);
		expect_reject(buf, len, 1, 1, what);
		/* A huge size must not make the reader wait for the payload. */
		ut_st32(buf + 8, 0xffffffffu);
		expect_reject(buf, HDR, 0, 1, what);
		len = mk(buf, codes[i], VERSION, 8, NULL);
		expect_reject(buf, len, 0, 1, what);
	}
}

static void test_flags(void **state)
{
	static const uint32_t bad[] = { 0, 2, 3, VERSION | F_REPLY, F_REPLY,
					VERSION | F_REPLY | F_NEED_REPLY, 2 | F_NEED_REPLY };
	uint8_t buf[HDR + 8];
	char what[64];
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(what, sizeof(what), "flags 0x%x", bad[i]);
		len = mk(buf, 1, bad[i], 0, NULL);
		expect_reject(buf, len, 0, 1, what);
		len = mk(buf, 2, bad[i], 8, NULL);
		expect_reject(buf, len, 0, 1, what);
	}
	len = mk(buf, 1, VERSION, 0, NULL);
	expect_ok(buf, len, 0, 1, "flags 1");
	len = mk(buf, 2, VERSION | F_NEED_REPLY, 8, NULL);
	expect_ok(buf, len, 0, 1, "flags NEED_REPLY");
}

/* A message of `size` payload bytes that satisfies every other rule. */
static size_t mk_valid_sized(uint8_t *buf, const struct spec_row *row, uint32_t size,
			     unsigned int *ret_nfds)
{
	size_t len = mk(buf, row->req, VERSION, size, NULL);

	switch (row->fds) {
	case FD_ONE:
		*ret_nfds = 1;
		break;
	case FD_VRING:
		*ret_nfds = 1; /* index 0, no NOFD bit */
		break;
	default:
		*ret_nfds = 0; /* mem table: nregions 0 */
	}
	if ((row->req == 24 || row->req == 25) && size >= 12)
		ut_st32(buf + HDR + 4, size - 12); /* config: consistent size */
	return len;
}

static void test_payload_sizes(void **state)
{
	uint8_t buf[HDR + 512];
	char what[96];

	(void)state;
	for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); i++) {
		const struct spec_row *row = &spec[i];
		unsigned int nfds;
		size_t len;

		len = mk_valid_sized(buf, row, row->min, &nfds);
		snprintf(what, sizeof(what), "request %u size %u (min)", row->req, row->min);
		expect_ok(buf, len, nfds, 1, what);
		len = mk_valid_sized(buf, row, row->max, &nfds);
		snprintf(what, sizeof(what), "request %u size %u (max)", row->req, row->max);
		expect_ok(buf, len, nfds, 1, what);
		if (row->min > 0) {
			len = mk_valid_sized(buf, row, row->min - 1, &nfds);
			snprintf(what, sizeof(what), "request %u size %u (min-1)", row->req,
				 row->min - 1);
			expect_reject(buf, len, nfds, 1, what);
		}
		len = mk_valid_sized(buf, row, row->max + 1, &nfds);
		snprintf(what, sizeof(what), "request %u size %u (max+1)", row->req, row->max + 1);
		expect_reject(buf, len, nfds, 1, what);
		/* A size far beyond anything: rejected from the header alone. */
		mk(buf, row->req, VERSION, 0, NULL);
		ut_st32(buf + 8, 0x7fffffffu);
		snprintf(what, sizeof(what), "request %u size 0x7fffffff", row->req);
		expect_reject(buf, HDR, 0, 1, what);
	}
}

static void test_queue_index(void **state)
{
	static const uint32_t state_reqs[] = { 8, 9, 10, 11, 18 };
	uint8_t buf[HDR + 40];
	char what[96];
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(state_reqs) / sizeof(state_reqs[0]); i++) {
		const struct spec_row *row = spec_row(state_reqs[i]);
		static const uint32_t bad[] = { 2, 3, 255, 256, 0x10001, 0xffffffffu };

		len = mk(buf, row->req, VERSION, row->min, NULL);
		for (uint32_t q = 0; q < 2; q++) {
			ut_st32(buf + HDR, q);
			snprintf(what, sizeof(what), "request %u queue %u of 2", row->req, q);
			expect_ok(buf, len, 0, 2, what);
		}
		for (size_t j = 0; j < sizeof(bad) / sizeof(bad[0]); j++) {
			ut_st32(buf + HDR, bad[j]);
			snprintf(what, sizeof(what), "request %u queue %u of 2", row->req, bad[j]);
			expect_reject(buf, len, 0, 2, what);
		}
		/* 256 queues: 255 is the last one. */
		ut_st32(buf + HDR, 255);
		expect_ok(buf, len, 0, 256, "queue 255 of 256");
		ut_st32(buf + HDR, 256);
		expect_reject(buf, len, 0, 256, "queue 256 of 256");
	}
	for (uint32_t req = 12; req <= 14; req++) {
		len = mk(buf, req, VERSION, 8, NULL);
		ut_st64(buf + HDR, 1);
		expect_ok(buf, len, 1, 2, "vring fd queue 1 of 2");
		ut_st64(buf + HDR, 1 | NOFD);
		expect_ok(buf, len, 0, 2, "vring fd queue 1 of 2, NOFD");
		ut_st64(buf + HDR, 2);
		expect_reject(buf, len, 1, 2, "vring fd queue 2 of 2");
		ut_st64(buf + HDR, 2 | NOFD);
		expect_reject(buf, len, 0, 2, "vring fd queue 2 of 2, NOFD");
		ut_st64(buf + HDR, 0xff | NOFD);
		expect_reject(buf, len, 0, 2, "vring fd queue 255 of 2, NOFD");
		expect_ok(buf, len, 0, 256, "vring fd queue 255 of 256, NOFD");
		ut_st64(buf + HDR, 0xff);
		expect_reject(buf, len, 1, 2, "vring fd queue 255 of 2");
		expect_ok(buf, len, 1, 256, "vring fd queue 255 of 256");
		/* The NOFD bit decides the fd count, not the index byte. */
		ut_st64(buf + HDR, 1 | NOFD);
		expect_reject(buf, len, 1, 2, "vring fd NOFD with fd");
		ut_st64(buf + HDR, 1);
		expect_reject(buf, len, 0, 2, "vring fd without NOFD, no fd");
	}
}

/* ---- EOF ---- */

static void test_eof(void **state)
{
	struct vu_msg_reader r;
	uint8_t buf[HDR + 40];
	struct probe p[2];
	int wr[2], sv[2];

	(void)state;
	/* Mid-header, with an fd already received. */
	mk(buf, 5, VERSION, 8 + 32, NULL);
	ut_st32(buf + HDR, 1);
	ut_stream_pair(sv);
	probes_open(p, wr, 1);
	ut_send_raw(sv[0], buf, 5, wr, 1);
	vu_msg_reader_init(&r);
	assert_int_equal(vu_msg_read(sv[1], &r, 1), 0);
	close(sv[0]);
	assert_int_equal(vu_msg_read(sv[1], &r, 1), -ECONNRESET);
	close(sv[1]);
	assert_probes_closed(p, 1, "EOF mid-header");

	/* Mid-payload, fds with the header. */
	ut_stream_pair(sv);
	probes_open(p, wr, 1);
	ut_send_raw(sv[0], buf, HDR + 3, wr, 1);
	vu_msg_reader_init(&r);
	assert_int_equal(vu_msg_read(sv[1], &r, 1), 0);
	shutdown(sv[0], SHUT_WR);
	assert_int_equal(vu_msg_read(sv[1], &r, 1), -ECONNRESET);
	close(sv[0]);
	close(sv[1]);
	assert_probes_closed(p, 1, "EOF mid-payload");

	/* Mid-payload, on a vring message (fd with the header), one shot. */
	mk(buf, 13, VERSION, 8, NULL);
	ut_stream_pair(sv);
	probes_open(p, wr, 1);
	ut_send_raw(sv[0], buf, HDR + 7, wr, 1);
	close(sv[0]);
	assert_int_equal(read_once(sv[1], &r, 1), -ECONNRESET);
	close(sv[1]);
	assert_probes_closed(p, 1, "EOF mid-payload, one read");

	/* Right after the header (size 8, nothing of it yet). */
	ut_stream_pair(sv);
	ut_send_raw(sv[0], buf, HDR, NULL, 0);
	close(sv[0]);
	assert_int_equal(read_once(sv[1], &r, 1), -ECONNRESET);
	close(sv[1]);

	/* A reset reader holding fds closes them. */
	ut_stream_pair(sv);
	probes_open(p, wr, 2);
	ut_send_raw(sv[0], buf, 4, wr, 2);
	assert_int_equal(read_once(sv[1], &r, 1), 0);
	vu_msg_reader_reset(&r);
	close(sv[0]);
	close(sv[1]);
	assert_probes_closed(p, 2, "reader reset");
}

/* ---- decoders ---- */

static struct vu_msg *msg_new(uint32_t req, uint32_t size, unsigned int nfds)
{
	struct vu_msg *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	m->request = req;
	m->flags = VERSION;
	m->size = size;
	m->nfds = nfds;
	for (unsigned int i = 0; i < VU_MAX_FDS; i++)
		m->fds[i] = -1;
	return m;
}

static void put_region(uint8_t *p, uint64_t gpa, uint64_t size, uint64_t uva, uint64_t off)
{
	ut_st64(p, gpa);
	ut_st64(p + 8, size);
	ut_st64(p + 16, uva);
	ut_st64(p + 24, off);
}

static void test_decode_mem_table(void **state)
{
	struct vu_mem_table t;

	(void)state;
	for (uint32_t n = 0; n <= 8; n++) {
		struct vu_msg *m = msg_new(5, 8 + 32 * n, n);

		ut_st32(m->payload, n);
		for (uint32_t i = 0; i < n; i++)
			put_region(m->payload + 8 + 32 * i, 0x100000ull * (i + 1), 0x1000 * (i + 1),
				   0x7f0000000000ull + i, 0x10 * i);
		memset(&t, 0xff, sizeof(t));
		assert_int_equal(vu_decode_mem_table(m, &t), 0);
		assert_int_equal(t.nregions, n);
		for (uint32_t i = 0; i < n; i++) {
			assert_int_equal(t.regions[i].guest_addr, 0x100000ull * (i + 1));
			assert_int_equal(t.regions[i].size, 0x1000 * (i + 1));
			assert_int_equal(t.regions[i].user_addr, 0x7f0000000000ull + i);
			assert_int_equal(t.regions[i].mmap_offset, 0x10 * i);
		}
		/* One fd too few or too many. */
		if (n > 0) {
			m->nfds = n - 1;
			assert_true(vu_decode_mem_table(m, &t) < 0);
		}
		if (n < 8) {
			m->nfds = n + 1;
			assert_true(vu_decode_mem_table(m, &t) < 0);
		}
		/* A payload one byte short of its regions. */
		if (n > 0) {
			m->nfds = n;
			m->size = 8 + 32 * n - 1;
			assert_true(vu_decode_mem_table(m, &t) < 0);
		}
		free(m);
	}
	/* Nine regions: more than SET_MEM_TABLE may carry. */
	{
		struct vu_msg *m = msg_new(5, 8 + 32 * 8, 8);

		ut_st32(m->payload, 9);
		assert_true(vu_decode_mem_table(m, &t) < 0);
		ut_st32(m->payload, 0xffffffffu);
		assert_true(vu_decode_mem_table(m, &t) < 0);
		m->size = 7;
		m->nfds = 0;
		ut_st32(m->payload, 0);
		assert_true(vu_decode_mem_table(m, &t) < 0);
		free(m);
	}
}

static void test_decode_mem_reg(void **state)
{
	struct vu_msg *m = msg_new(37, 40, 1);
	struct vu_mem_desc d;

	(void)state;
	ut_st64(m->payload, 0xdeadbeefull); /* padding */
	put_region(m->payload + 8, 0x1000, 0x2000, 0x3000, 0x4000);
	assert_int_equal(vu_decode_mem_reg(m, &d), 0);
	assert_int_equal(d.guest_addr, 0x1000);
	assert_int_equal(d.size, 0x2000);
	assert_int_equal(d.user_addr, 0x3000);
	assert_int_equal(d.mmap_offset, 0x4000);
	m->size = 39;
	assert_true(vu_decode_mem_reg(m, &d) < 0);
	free(m);
}

static void test_decode_config(void **state)
{
	struct vu_config_req c;
	struct vu_msg *m = msg_new(24, 0, 0);

	(void)state;
	/* offset 8, size 4, payload exactly 12 + 4. */
	ut_st32(m->payload, 8);
	ut_st32(m->payload + 4, 4);
	ut_st32(m->payload + 8, 0);
	memcpy(m->payload + 12, "abcd", 4);
	m->size = 16;
	assert_int_equal(vu_decode_config(m, &c), 0);
	assert_int_equal(c.offset, 8);
	assert_int_equal(c.size, 4);
	assert_non_null(c.data);
	assert_memory_equal(c.data, "abcd", 4);
	/* Size field and payload length disagree, either way. */
	m->size = 17;
	assert_true(vu_decode_config(m, &c) < 0);
	m->size = 15;
	assert_true(vu_decode_config(m, &c) < 0);
	m->size = 12;
	assert_true(vu_decode_config(m, &c) < 0);
	m->size = 11;
	assert_true(vu_decode_config(m, &c) < 0);
	/* offset + size past 256, and wrapping in 32 bits. */
	ut_st32(m->payload, 253);
	m->size = 16;
	assert_true(vu_decode_config(m, &c) < 0);
	ut_st32(m->payload, 252);
	assert_int_equal(vu_decode_config(m, &c), 0);
	ut_st32(m->payload, 0xfffffffeu);
	assert_true(vu_decode_config(m, &c) < 0);
	ut_st32(m->payload, 256);
	assert_true(vu_decode_config(m, &c) < 0);
	/* The whole space. */
	ut_st32(m->payload, 0);
	ut_st32(m->payload + 4, 256);
	m->size = 12 + 256;
	assert_int_equal(vu_decode_config(m, &c), 0);
	ut_st32(m->payload, 1);
	assert_true(vu_decode_config(m, &c) < 0);
	/* A size field beyond the config space, payload at its maximum. */
	ut_st32(m->payload, 0);
	ut_st32(m->payload + 4, 257);
	assert_true(vu_decode_config(m, &c) < 0);
	ut_st32(m->payload + 4, 0xfffffff4u); /* 12 + size wraps to 0 in u32 */
	m->size = 0;
	assert_true(vu_decode_config(m, &c) < 0);
	m->size = 12;
	assert_true(vu_decode_config(m, &c) < 0);
	free(m);
}

static void test_decode_vring_addr(void **state)
{
	struct vu_msg *m = msg_new(9, 40, 0);
	struct vu_vring_addr a;

	(void)state;
	ut_st32(m->payload, 1);
	ut_st32(m->payload + 4, 0);
	ut_st64(m->payload + 8, 0x1000);  /* desc */
	ut_st64(m->payload + 16, 0x2000); /* used */
	ut_st64(m->payload + 24, 0x3000); /* avail */
	ut_st64(m->payload + 32, 0x4000); /* log */
	assert_int_equal(vu_decode_vring_addr(m, &a), 0);
	assert_int_equal(a.index, 1);
	assert_int_equal(a.flags, 0);
	assert_int_equal(a.desc_user_addr, 0x1000);
	assert_int_equal(a.used_user_addr, 0x2000);
	assert_int_equal(a.avail_user_addr, 0x3000);
	assert_int_equal(a.log_guest_addr, 0x4000);
	ut_st32(m->payload + 4, 1); /* VHOST_VRING_F_LOG */
	assert_int_equal(vu_decode_vring_addr(m, &a), 0);
	assert_int_equal(a.flags, 1);
	for (unsigned int bit = 1; bit < 32; bit++) {
		ut_st32(m->payload + 4, 1u << bit);
		if (vu_decode_vring_addr(m, &a) >= 0)
			fail_msg("vring addr flag bit %u accepted", bit);
	}
	ut_st32(m->payload + 4, 0);
	m->size = 39;
	assert_true(vu_decode_vring_addr(m, &a) < 0);
	free(m);
}

static void test_decode_vring_fd(void **state)
{
	struct vu_msg *m = msg_new(12, 8, 0);
	uint32_t index;
	bool has_fd;

	(void)state;
	ut_st64(m->payload, 0xff | NOFD);
	assert_int_equal(vu_decode_vring_fd(m, &index, &has_fd), 0);
	assert_int_equal(index, 255);
	assert_false(has_fd);
	ut_st64(m->payload, 3);
	assert_int_equal(vu_decode_vring_fd(m, &index, &has_fd), 0);
	assert_int_equal(index, 3);
	assert_true(has_fd);
	for (unsigned int bit = 9; bit < 64; bit++) {
		ut_st64(m->payload, 1ull << bit);
		if (vu_decode_vring_fd(m, &index, &has_fd) >= 0)
			fail_msg("vring fd bit %u accepted", bit);
	}
	m->size = 7;
	ut_st64(m->payload, 0);
	assert_true(vu_decode_vring_fd(m, &index, &has_fd) < 0);
	free(m);
}

static void test_decode_small(void **state)
{
	struct vu_msg *m = msg_new(0, 0, 0);
	struct vu_vring_state s;
	struct vu_inflight_desc inf;
	struct vu_log_area log;
	uint64_t v;

	(void)state;
	m->size = 8;
	ut_st64(m->payload, 0x1122334455667788ull);
	assert_int_equal(vu_decode_u64(m, &v), 0);
	assert_int_equal(v, 0x1122334455667788ull);
	ut_st32(m->payload, 7);
	ut_st32(m->payload + 4, 0x8000);
	assert_int_equal(vu_decode_vring_state(m, &s), 0);
	assert_int_equal(s.index, 7);
	assert_int_equal(s.num, 0x8000);
	m->size = 7;
	assert_true(vu_decode_u64(m, &v) < 0);
	assert_true(vu_decode_vring_state(m, &s) < 0);

	m->size = 16;
	ut_st64(m->payload, 4096);
	ut_st64(m->payload + 8, 512);
	assert_int_equal(vu_decode_log_area(m, &log), 0);
	assert_int_equal(log.mmap_size, 4096);
	assert_int_equal(log.mmap_offset, 512);
	m->size = 15;
	assert_true(vu_decode_log_area(m, &log) < 0);

	m->size = 24;
	ut_st64(m->payload, 0x3000);
	ut_st64(m->payload + 8, 0x40);
	m->payload[16] = 2;
	m->payload[17] = 0;
	m->payload[18] = 0x00;
	m->payload[19] = 0x01;
	assert_int_equal(vu_decode_inflight(m, &inf), 0);
	assert_int_equal(inf.mmap_size, 0x3000);
	assert_int_equal(inf.mmap_offset, 0x40);
	assert_int_equal(inf.num_queues, 2);
	assert_int_equal(inf.queue_size, 256);
	m->size = 19;
	assert_true(vu_decode_inflight(m, &inf) < 0);
	free(m);
}

static void test_reply_encoding(void **state)
{
	struct vu_msg_reader r;
	uint8_t buf[HDR + 8];
	int sv[2];

	(void)state;
	ut_stream_pair(sv);
	vu_msg_reader_init(&r);
	r.msg.request = 1;
	r.msg.flags = VERSION;
	assert_int_equal(vu_msg_send_reply_u64(sv[1], &r.msg, 0xabcdef0123456789ull), 0);
	assert_int_equal(recv(sv[0], buf, sizeof(buf), MSG_DONTWAIT), HDR + 8);
	assert_int_equal(ut_ld(buf, 4), 1);
	assert_int_equal(ut_ld(buf + 4, 4), VERSION | F_REPLY);
	assert_int_equal(ut_ld(buf + 8, 4), 8);
	assert_int_equal(ut_ld(buf + HDR, 8), 0xabcdef0123456789ull);
	close(sv[0]);
	close(sv[1]);
}

/* ---- fuzz ---- */

/* What a valid message of this row must look like, by the spec. */
static void check_accepted(const struct vu_msg *m, unsigned int nq, unsigned int sent_max)
{
	const struct spec_row *row = spec_row(m->request);
	unsigned int want_fds = 0;

	if (!row) {
		if (m->request == 7) /* SET_LOG_FD: payload N/A, one fd */
			return;
		fail_msg("unknown request %u accepted", m->request);
	}
	if ((m->flags & 3) != VERSION || (m->flags & F_REPLY))
		fail_msg("request %u: flags 0x%x accepted", m->request, m->flags);
	if (m->size < row->min || m->size > row->max)
		fail_msg("request %u: size %u accepted", m->request, m->size);
	switch (row->fds) {
	case FD_NONE:
		want_fds = 0;
		break;
	case FD_ONE:
		want_fds = 1;
		break;
	case FD_OPTIONAL:
		want_fds = m->nfds <= 1 ? m->nfds : 99;
		break;
	case FD_VRING:
		want_fds = (ut_ld(m->payload, 8) & NOFD) ? 0 : 1;
		break;
	case FD_MEM:
		want_fds = m->nfds <= 8 ? m->nfds : 99;
		break;
	}
	if (m->nfds != want_fds || m->nfds > sent_max)
		fail_msg("request %u: %u fds accepted", m->request, m->nfds);
	if (row->q == Q_STATE && ut_ld(m->payload, 4) >= nq)
		fail_msg("request %u: queue %u of %u accepted", m->request,
			 (unsigned int)ut_ld(m->payload, 4), nq);
	if (row->q == Q_U64 && (ut_ld(m->payload, 8) & 0xff) >= nq)
		fail_msg("request %u: queue %u of %u accepted", m->request,
			 (unsigned int)(ut_ld(m->payload, 8) & 0xff), nq);
}

static uint32_t fuzz_request(void)
{
	switch (ut_rnd_below(8)) {
	case 0:
		return (uint32_t)ut_rnd();
	case 1:
		return (uint32_t)ut_rnd_below(64);
	default:
		return spec[ut_rnd_below(sizeof(spec) / sizeof(spec[0]))].req;
	}
}

static uint32_t fuzz_size(uint32_t req)
{
	const struct spec_row *row = spec_row(req);

	switch (ut_rnd_below(6)) {
	case 0:
		return (uint32_t)ut_rnd_below(300);
	case 1:
		return (uint32_t)ut_rnd();
	default:
		if (!row)
			return (uint32_t)ut_rnd_below(16);
		return row->min + (uint32_t)ut_rnd_below(row->max - row->min + 2) - (ut_rnd_below(4) == 0);
	}
}

static void test_fuzz(void **state)
{
	struct vu_msg_reader *r = malloc(sizeof(*r));
	struct probe p;
	int sv[2], before, fds[12];
	unsigned int accepted = 0, rejected = 0, nq = 1;

	(void)state;
	assert_non_null(r);
	ut_rnd_seed(FUZZ_SEED);
	before = ut_count_fds();
	probe_open(&p);
	ut_stream_pair(sv);
	vu_msg_reader_init(r);
	for (unsigned int it = 0; it < FUZZ_ITERATIONS; it++) {
		uint8_t buf[HDR + 400];
		uint32_t req = fuzz_request(), size = fuzz_size(req);
		uint32_t body = size <= 300 ? size : (uint32_t)ut_rnd_below(300);
		unsigned int nfds = ut_rnd_below(3) ? 0 : (unsigned int)ut_rnd_below(12);
		size_t len, sent = 0;
		int ret;

		ut_st32(buf, req);
		ut_st32(buf + 4, ut_rnd_below(8) ? VERSION | (ut_rnd_below(4) ? 0 : F_NEED_REPLY)
					     : (uint32_t)ut_rnd());
		ut_st32(buf + 8, size);
		for (uint32_t i = 0; i < body; i++)
			buf[HDR + i] = (uint8_t)(ut_rnd_below(3) ? 0 : ut_rnd());
		if (body >= 8 && ut_rnd_below(2))
			ut_st64(buf + HDR, ut_rnd_below(4) ? ut_rnd_below(4) : ut_rnd_below(2) ? NOFD : ut_rnd());
		len = HDR + body;
		if (ut_rnd_below(16) == 0)
			len = (size_t)ut_rnd_below(len + 1); /* truncated, the stream desyncs */
		for (unsigned int i = 0; i < nfds; i++)
			fds[i] = p.wr;
		/* In one to three pieces, fds on a random piece. */
		{
			unsigned int pieces = 1 + (unsigned int)ut_rnd_below(3), fd_piece = 0;

			if (len == 0)
				pieces = 1;
			fd_piece = (unsigned int)ut_rnd_below(pieces);
			for (unsigned int k = 0; k < pieces; k++) {
				size_t chunk = k + 1 == pieces ? len - sent
							       : (size_t)ut_rnd_below(len - sent + 1);

				if (chunk == 0)
					continue; /* fds on an empty send are dropped by the kernel */
				ut_send_raw(sv[0], buf + sent, chunk, k == fd_piece ? fds : NULL,
					 k == fd_piece ? nfds : 0);
				sent += chunk;
			}
		}
		if (ut_rnd_below(64) == 0)
			nq = 1 + (unsigned int)ut_rnd_below(256);
		for (;;) {
			ret = vu_msg_read(sv[1], r, nq);
			if (ret != 1)
				break;
			accepted++;
			check_accepted(&r->msg, nq, 11);
			vu_msg_close_fds(&r->msg);
		}
		if (ret < 0) {
			rejected++;
			close(sv[0]);
			close(sv[1]);
			ut_stream_pair(sv);
			vu_msg_reader_init(r);
		}
	}
	/* A peer that leaves mid-message: the reader must report EOF. */
	close(sv[0]);
	{
		int ret;

		while ((ret = vu_msg_read(sv[1], r, nq)) == 1)
			vu_msg_close_fds(&r->msg);
		assert_int_equal(ret, -ECONNRESET);
	}
	close(sv[1]);
	free(r);
	print_message("fuzz: %u accepted, %u connections dropped\n", accepted, rejected);
	assert_true(accepted >= 1000);
	assert_true(rejected >= 1000);
	if (!probe_closed(&p))
		fail_msg("fuzz: a received fd leaked");
	assert_int_equal(ut_count_fds(), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_messages),
		cmocka_unit_test(test_dribble),
		cmocka_unit_test(test_fds_with_header),
		cmocka_unit_test(test_too_many_fds),
		cmocka_unit_test(test_fds_not_taken),
		cmocka_unit_test(test_fds_missing),
		cmocka_unit_test(test_fds_taken_do_not_carry_over),
		cmocka_unit_test(test_unknown_requests),
		cmocka_unit_test(test_flags),
		cmocka_unit_test(test_payload_sizes),
		cmocka_unit_test(test_queue_index),
		cmocka_unit_test(test_eof),
		cmocka_unit_test(test_decode_mem_table),
		cmocka_unit_test(test_decode_mem_reg),
		cmocka_unit_test(test_decode_config),
		cmocka_unit_test(test_decode_vring_addr),
		cmocka_unit_test(test_decode_vring_fd),
		cmocka_unit_test(test_decode_small),
		cmocka_unit_test(test_reply_encoding),
		cmocka_unit_test(test_fuzz),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

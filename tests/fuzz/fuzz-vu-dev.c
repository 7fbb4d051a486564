// SPDX-License-Identifier: MIT
/*
 * A whole vhost-user device instance (vhost/core/vu-dev.c dispatch, vu-mem,
 * vu-vq, vu-log, vu-inflight, and vhost/blk/blk.c or vhost/rng/rng.c) driven by a
 * hostile front end: the messages, the fds that come with them and the
 * guest memory they point into all come from the input.
 *
 * Input: [device: even blk, odd rng] then a sequence of records.
 *   0b0Ekkkk len_lo len_hi bytes   send len bytes of the stream with kkkk
 *                                  fds (up to 15): eventfds if E, else the
 *                                  guest RAM memfd; then vu_dev_dispatch()
 *   0x80 off_lo off_hi n bytes     write n bytes of guest RAM at off * 16
 *   0x81                           every kick the device watches fires
 *   anything else                  ends the input
 * The connection goes away at the end of the input (or when dispatch says
 * so); every fd and mapping must go with it.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device.h"
#include "fuzz.h"
#include "fuzz-stream.h"
#include "vu-internal.h"

#define RAM_SIZE (1u << 20)
#define BLK_SIZE (1u << 20)
#define MAX_FDS 15u
#define MAX_WATCHES 64u

static const struct vhost_device_type *const types[] = { &vhost_blk_type, &vhost_rng_type };

static struct {
	void *shared[2];
	int ram_fd;
	uint8_t *ram;
	char *blk_path, *entropy_path;
} fx;

static struct watch {
	struct vu_dev *dev;
	int fd;
	vu_watch_cb cb;
	void *data;
} watches[MAX_WATCHES];

static void add_watch(struct vu_dev *dev, int fd, vu_watch_cb cb, void *data)
{
	for (unsigned int i = 0; i < MAX_WATCHES; i++)
		if (!watches[i].cb) {
			watches[i] = (struct watch){ dev, fd, cb, data };
			return;
		}
	FUZZ_CHECK(!"more watches than queues");
}

static void remove_watch(struct vu_dev *dev, int fd)
{
	for (unsigned int i = 0; i < MAX_WATCHES; i++)
		if (watches[i].cb && watches[i].dev == dev && watches[i].fd == fd)
			watches[i] = (struct watch){ NULL, -1, NULL, NULL };
}

static void cleanup(void)
{
	unlink(fx.blk_path);
	unlink(fx.entropy_path);
}

/* A file in /dev/shm of size bytes of pattern: deterministic, unlike urandom. */
static char *shm_file(const char *name, size_t size, uint8_t pattern)
{
	char *path = g_strdup_printf("/dev/shm/%s-XXXXXX", name);
	uint8_t *buf = g_malloc(size);
	int fd = mkstemp(path);

	memset(buf, pattern, size);
	FUZZ_CHECK(fd >= 0 && write(fd, buf, size) == (ssize_t)size);
	close(fd);
	g_free(buf);
	return path;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct vhost_device_args args = { .num_queues = 2 };

	(void)argc, (void)argv;
	fx.blk_path = shm_file("fuzz-vu-dev-blk", BLK_SIZE, 0);
	fx.entropy_path = shm_file("fuzz-vu-dev-entropy", 4096, 0x5a);
	atexit(cleanup);
	args.blk_file = fx.blk_path;
	args.entropy_file = fx.entropy_path;
	for (size_t i = 0; i < G_N_ELEMENTS(types); i++)
		FUZZ_CHECK(types[i]->open(&args, &fx.shared[i]) == 0);
	fx.ram_fd = memfd_create("fuzz-vu-dev-ram", MFD_CLOEXEC);
	FUZZ_CHECK(fx.ram_fd >= 0 && ftruncate(fx.ram_fd, RAM_SIZE) == 0);
	fx.ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fx.ram_fd, 0);
	FUZZ_CHECK(fx.ram != MAP_FAILED);
	return 0;
}

static void send_stream(int sock, const uint8_t *p, size_t n, unsigned int nfds, bool events)
{
	int fds[MAX_FDS];

	for (unsigned int i = 0; i < nfds; i++) {
		fds[i] = events ? eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) : fx.ram_fd;
		FUZZ_CHECK(fds[i] >= 0);
	}
	fuzz_send(sock, p, n, fds, nfds);
	for (unsigned int i = 0; events && i < nfds; i++)
		close(fds[i]);
}

/* Reads and drops the device's replies, closing any fds they carry. */
static void drain_replies(int sock)
{
	for (;;) {
		char buf[4096], cbuf[CMSG_SPACE(sizeof(int) * 16)];
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (n <= 0)
			return;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			int fds[16];
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			memcpy(fds, CMSG_DATA(c), k * sizeof(int));
			for (size_t i = 0; i < k; i++)
				close(fds[i]);
		}
	}
}

static void fire_kicks(void)
{
	for (unsigned int i = 0; i < MAX_WATCHES; i++)
		if (watches[i].cb)
			watches[i].cb(watches[i].dev, watches[i].fd, watches[i].data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct vu_loop_ops loop = { .add_watch = add_watch,
						 .remove_watch = remove_watch };
	static bool guarded;
	const struct vhost_device_type *type;
	struct vu_device_ops ops;
	struct fuzz_fds fds_before;
	struct vu_dev *dev;
	void *inst;
	size_t at = 1;
	int sv[2];

	if (size < 1)
		return 0;
	type = types[data[0] % 2];

	if (!guarded) {
		/* After libFuzzer's own handlers: the daemon installs it too. */
		FUZZ_CHECK(vu_guard_install() == 0);
		guarded = true;
	}
	fuzz_fds_snapshot(&fds_before);
	memset(fx.ram, 0, RAM_SIZE);
	for (unsigned int i = 0; i < MAX_WATCHES; i++)
		watches[i] = (struct watch){ NULL, -1, NULL, NULL };
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
	FUZZ_CHECK(type->instance_new(fx.shared[data[0] % 2], &ops, &inst) == 0);
	FUZZ_CHECK(vu_dev_new(sv[0], &ops, inst, &loop, NULL, &dev) == 0);

	while (at < size) {
		uint8_t h = data[at++];

		if (!(h & 0x80)) {
			size_t n;

			if (size - at < 2)
				break;
			n = data[at] | (size_t)data[at + 1] << 8;
			at += 2;
			n = n < size - at ? n : size - at;
			send_stream(sv[1], data + at, n, h & 0xf, h & 0x40);
			at += n;
			if (vu_dev_dispatch(dev) < 0)
				break;
			drain_replies(sv[1]);
		} else if (h == 0x80) {
			size_t off, n;

			if (size - at < 3)
				break;
			off = 16 * (data[at] | (size_t)data[at + 1] << 8);
			n = data[at + 2];
			at += 3;
			n = n < size - at ? n : size - at;
			n = off + n <= RAM_SIZE ? n : RAM_SIZE - off;
			memcpy(fx.ram + off, data + at, n);
			at += n;
		} else if (h == 0x81) {
			fire_kicks();
			if (vu_dev_poisoned(dev))
				break;
			drain_replies(sv[1]);
		} else {
			break;
		}
	}

	vu_dev_free(dev);
	type->instance_free(inst);
	close(sv[1]);
	for (unsigned int i = 0; i < MAX_WATCHES; i++)
		FUZZ_CHECK(!watches[i].cb); /* vu_dev_free removes every watch */
	fuzz_fds_check_no_leak(&fds_before);
	return 0;
}

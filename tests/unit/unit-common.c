// SPDX-License-Identifier: MIT
/* What the unit tests share (unit-common.h). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "fdpass.h"
#include "unit-common.h"

#define UT_MAX_FDS 64u

void ut_st16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

void ut_st32(uint8_t *p, uint32_t v)
{
	for (unsigned int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void ut_st64(uint8_t *p, uint64_t v)
{
	for (unsigned int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t ut_ld(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

const char *ut_rc_name(int rc)
{
	const char *name = rc < 0 ? strerrorname_np(-rc) : NULL;

	if (!rc)
		return "0";
	return name ? name : rc < 0 ? "other -errno" : "positive";
}

void ut_check_rc(const char *file, int line, int got, int want, const char *fmt, ...)
{
	char ctx[256];
	va_list ap;

	if (got == want)
		return;
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	print_error("%s: got %d (%s), want %d (%s)\n", ctx, got, ut_rc_name(got), want,
		    ut_rc_name(want));
	_fail(file, line);
}

uint8_t *ut_dup_exact(const void *buf, size_t len)
{
	uint8_t *p = malloc(len ? len : 1);

	assert_non_null(p);
	if (len)
		memcpy(p, buf, len);
	return p;
}

static uint64_t rng_state;

void ut_rnd_seed(uint64_t seed)
{
	rng_state = seed;
}

uint64_t ut_rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t ut_rnd_below(uint64_t n)
{
	return n ? ut_rnd() % n : 0;
}

int ut_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int ut_memfd(const char *name, uint64_t size)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	return fd;
}

void ut_stream_pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

void ut_send_raw(int sock, const void *buf, size_t len, const int *fds, unsigned int nfds)
{
	union {
		char buf[FDPASS_CONTROL_SIZE(UT_MAX_FDS)];
		struct cmsghdr align;
	} control;
	uint8_t dummy = 0;
	struct iovec iov = { .iov_base = len ? (void *)buf : &dummy, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	assert_true(nfds <= UT_MAX_FDS);
	fdpass_attach(&mh, control.buf, fds, nfds);
	n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	assert_int_equal(n, (ssize_t)len);
}

unsigned int ut_recv_raw(int sock, void *buf, size_t len, int *fds, unsigned int max_fds)
{
	union {
		char buf[FDPASS_CONTROL_SIZE(UT_MAX_FDS)];
		struct cmsghdr align;
	} control;
	unsigned int got_fds = 0;
	size_t got = 0;

	while (got < len) {
		struct iovec iov = { .iov_base = (uint8_t *)buf + got, .iov_len = len - got };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = control.buf, .msg_controllen = sizeof(control.buf) };
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);

		assert_true(n > 0);
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			unsigned int k = (unsigned int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			int in[UT_MAX_FDS];

			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			memcpy(in, CMSG_DATA(c), k * sizeof(int));
			for (unsigned int i = 0; i < k; i++) {
				if (got_fds < max_fds)
					fds[got_fds++] = in[i];
				else
					close(in[i]);
			}
		}
		got += (size_t)n;
	}
	return got_fds;
}

// SPDX-License-Identifier: MIT
#include "fuzz-stream.h"

#include <fcntl.h>
#include <sys/socket.h>

#include "fdpass.h"
#include "fuzz.h"

void fuzz_fds_snapshot(struct fuzz_fds *ret)
{
	for (int fd = 0; fd < FUZZ_FD_WINDOW; fd++)
		ret->open[fd] = fcntl(fd, F_GETFD) >= 0;
}

void fuzz_fds_check_no_leak(const struct fuzz_fds *before)
{
	struct fuzz_fds after;

	fuzz_fds_snapshot(&after);
	for (int fd = 0; fd < FUZZ_FD_WINDOW; fd++)
		if (after.open[fd] && !before->open[fd]) {
			fprintf(stderr, "fd %d leaked\n", fd);
			abort();
		}
}

void fuzz_send(int sock, const uint8_t *p, size_t n, const int *fds, unsigned int nfds)
{
	union {
		char buf[FDPASS_CONTROL_SIZE(FUZZ_MAX_SENT_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = (void *)p, .iov_len = n };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	FUZZ_CHECK(nfds <= FUZZ_MAX_SENT_FDS);
	fdpass_attach(&mh, cbuf.buf, fds, nfds);
	(void)sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
}

// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "listen-fds.h"

/* A decimal number and nothing else; -EINVAL otherwise. */
static int parse_count(const char *s, unsigned long max, unsigned long *ret)
{
	unsigned long v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (max - (unsigned long)(*s - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (unsigned long)(*s - '0');
	}
	*ret = v;
	return 0;
}

int listen_fds_take(void)
{
	const char *pid_s = getenv("LISTEN_PID"), *fds_s = getenv("LISTEN_FDS");
	unsigned long pid, n;
	int ret = 0;

	if (!pid_s && !fds_s)
		return 0;
	if (parse_count(pid_s, LONG_MAX, &pid) < 0 ||
	    parse_count(fds_s, INT_MAX - LISTEN_FDS_START, &n) < 0)
		ret = -EINVAL;
	else if (pid == (unsigned long)getpid())
		ret = (int)n;
	for (int i = 0; i < ret; i++) {
		int fd = LISTEN_FDS_START + i;

		if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
			ret = -errno;
			break;
		}
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return ret;
}

// SPDX-License-Identifier: MIT
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include <glib.h>

#include "util.h"

int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int fsync_dir_of(const char *path)
{
	g_autofree char *dir = g_path_get_dirname(path);
	_cleanup_(closep) int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || fsync(fd) < 0)
		return -errno;
	return 0;
}

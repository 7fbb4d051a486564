/* SPDX-License-Identifier: MIT */
/* File helpers for state that must survive a crash. */
#ifndef VRDMA_FILEIO_H
#define VRDMA_FILEIO_H

#include <stddef.h>

/* write(2) until all len bytes are written; 0 or -errno. */
int write_all(int fd, const void *buf, size_t len);
/* fsync(2) of the directory holding path, so a rename in it is durable. */
int fsync_dir_of(const char *path);

#endif

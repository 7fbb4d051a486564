/* SPDX-License-Identifier: MIT */
/*
 * Shared by the targets that play a front end on a socket: sending a piece
 * of the stream with fds, and the fd leak check that follows each input.
 */
#ifndef VRDMA_FUZZ_STREAM_H
#define VRDMA_FUZZ_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The low fds a leak is looked for in (libFuzzer opens files of its own). */
#define FUZZ_FD_WINDOW 512

struct fuzz_fds {
	bool open[FUZZ_FD_WINDOW];
};

void fuzz_fds_snapshot(struct fuzz_fds *ret);
/* Aborts, naming it, on an fd open now that was not open in before. */
void fuzz_fds_check_no_leak(const struct fuzz_fds *before);

/*
 * One non-blocking sendmsg of p[0..n) with fds[0..nfds) (at most
 * FUZZ_MAX_SENT_FDS): a full socket buffer just ends the stream early.
 */
#define FUZZ_MAX_SENT_FDS 16u
void fuzz_send(int sock, const uint8_t *p, size_t n, const int *fds, unsigned int nfds);

#endif

// SPDX-License-Identifier: MIT
/*
 * A large WRITE into a region backed by a shmem file (xport_mr_reg_file())
 * is received with splice: socket to a pipe (io_uring, so the wait stays on
 * the ring), then pipe to the file at the right offset.  A recvmsg into the
 * mapping would first fault in every new page and clear it, only to
 * overwrite it; the file write allocates the page and fills it in one pass,
 * and the socket-to-pipe step moves page references, not bytes.  On a
 * destination whose guest RAM is still empty that halves the cost of a
 * received byte.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"
#include "xport-tcp-internal.h"
_Static_assert(XPORT_MAX_CHANNELS <= 32, "file_waiters is a 32-bit mask");

/*
 * One step of a spliced WRITE: socket to pipe (as much of the payload as is
 * there, up to a pipeful), or pipe to file (what the pipe holds).  Both go
 * through the ring, which runs splices on io-wq threads: while one channel
 * fills the file, the others fill their pipes.  Pipe-to-file steps take
 * turns: a shmem write holds the file's lock, so concurrent ones would only
 * spin on it, burning CPU the sender could use.
 */
void tcp_splice_arm(struct tcp_chan *ch)
{
	struct tcp_conn *tc = ch->tc;
	struct io_uring_sqe *sqe;

	if (tc->killed)
		return;
	if (ch->in_pipe) {
		if (tc->file_writer && tc->file_writer != ch) {
			tc->file_waiters |= 1u << ch->index;
			return;
		}
		tc->file_writer = ch;
	}
	sqe = tcp_get_sqe(tc);
	if (!sqe) {
		tcp_conn_kill(ch->tc, -EBUSY);
		return;
	}
	if (ch->in_pipe)
		io_uring_prep_splice(sqe, ch->pipe[0], -1, ch->splice_fd,
				     (int64_t)ch->splice_off, ch->in_pipe, 0);
	else
		io_uring_prep_splice(sqe, ch->fd, -1, ch->pipe[1], -1,
				     MIN(ch->splice_left, ch->pipe_bytes), 0);
	io_uring_sqe_set_data64(sqe, ud_pack(UD_RX, ch->index, 0));
	ch->rx_busy = true;
}

/* The file is free again: the next waiting channel, round robin, gets it. */
static void file_writer_done(struct tcp_conn *tc, unsigned after)
{
	unsigned n = tc->base.channels;

	tc->file_writer = NULL;
	for (unsigned k = 1; k <= n && tc->file_waiters; k++) {
		unsigned i = (after + k) % n;

		if (tc->file_waiters & (1u << i)) {
			tc->file_waiters &= ~(1u << i);
			tcp_splice_arm(&tc->chan[i]);
			return;
		}
	}
}

void tcp_splice_cqe(struct tcp_chan *ch, int res)
{
	if (res == -EINTR || res == -EAGAIN) {
		tcp_splice_arm(ch);
		return;
	}
	if (ch->in_pipe) {
		/* Pipe to file: 0 would mean the file took nothing. */
		if (res <= 0 || (uint32_t)res > ch->in_pipe) {
			tcp_conn_kill(ch->tc, res < 0 ? res : -EIO);
			return;
		}
		ch->in_pipe -= (uint32_t)res;
		ch->splice_off += (uint32_t)res;
		if (!ch->in_pipe)
			file_writer_done(ch->tc, ch->index);
	} else {
		/* Socket to pipe: 0 is the peer's end of stream. */
		if (res <= 0 || (uint32_t)res > ch->splice_left) {
			tcp_conn_kill(ch->tc, res <= 0 ? xport_sock_error(res) : -EIO);
			return;
		}
		ch->in_pipe = (uint32_t)res;
		ch->splice_left -= (uint32_t)res;
	}
	if (ch->in_pipe || ch->splice_left) {
		tcp_splice_arm(ch);
		return;
	}
	tcp_rx_frame_done(ch);
	tcp_rx_expect_header(ch);
}

/* Carries out a decoded frame as far as buffers allow. */

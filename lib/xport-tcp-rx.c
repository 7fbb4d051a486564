// SPDX-License-Identifier: MIT
/*
 * Receive on a tcp channel: a frame header, then its payload into the
 * buffer or region it names, one recvmsg at a time.
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
/* ---- receive ---- */

static void rx_arm(struct tcp_chan *ch)
{
	struct io_uring_sqe *sqe;

	if (ch->tc->killed)
		return;
	sqe = tcp_get_sqe(ch->tc);
	if (!sqe) {
		tcp_conn_kill(ch->tc, -EBUSY);
		return;
	}
	io_uring_prep_recvmsg(sqe, ch->fd, &ch->rx_msg, MSG_WAITALL);
	io_uring_sqe_set_data64(sqe, ud_pack(UD_RX, ch->index, 0));
	ch->rx_busy = true;
}

void tcp_rx_expect_header(struct tcp_chan *ch)
{
	ch->rx = RX_HEADER;
	ch->rx_iov[0] = (struct iovec){ ch->rx_hdr, sizeof(ch->rx_hdr) };
	msg_init(&ch->rx_msg, ch->rx_iov, 1);
	rx_arm(ch);
}

/* Copies iov: short reads advance rx_iov in place. */
static void rx_expect_payload(struct tcp_chan *ch, const struct iovec *iov,
			      unsigned n)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (iov[i].iov_len)
			ch->rx_iov[k++] = iov[i];
	msg_init(&ch->rx_msg, ch->rx_iov, k);
}

/* 0, or -errno when no pipe can be had (the caller receives without one). */
static int chan_pipe(struct tcp_chan *ch)
{
	int size;

	if (ch->pipe[0] >= 0)
		return 0;
	if (pipe2(ch->pipe, O_CLOEXEC) < 0) {
		ch->pipe[0] = ch->pipe[1] = -1;
		return -errno;
	}
	/* Best effort: a smaller pipe only means more splices per WRITE. */
	size = fcntl(ch->pipe[1], F_SETPIPE_SZ, (int)SPLICE_PIPE_BYTES);
	if (size < 0)
		size = fcntl(ch->pipe[1], F_GETPIPE_SZ);
	ch->pipe_bytes = size > 0 ? (uint32_t)size : 4096u;
	return 0;
}

static int rx_write(struct tcp_chan *ch)
{
	const struct xport_frame *f = &ch->frame;
	struct xport_mr *mr;
	struct iovec iov;
	void *addr;
	int r = xport_conn_resolve(&ch->tc->base, f->region, f->key, f->offset, f->len,
				   XPORT_ACCESS_REMOTE_WRITE, &addr, &mr);

	if (r < 0)
		return r;
	if (mr->file_fd >= 0 && f->len >= SPLICE_MIN_BYTES && chan_pipe(ch) == 0) {
		ch->splice_fd = mr->file_fd;
		ch->splice_off = mr->file_offset + f->offset; /* in the file: checked at reg */
		ch->splice_left = f->len;
		return RX_SPLICE_GO;
	}
	/* Straight into the region: the frame was checked, no staging copy. */
	iov = (struct iovec){ addr, f->len };
	rx_expect_payload(ch, &iov, 1);
	return 0;
}

static int rx_send(struct tcp_chan *ch)
{
	struct iovec iov;
	unsigned idx;

	if (!ch->nfree_bufs)
		return RX_WAIT;
	idx = ch->free_bufs[ch->nfree_bufs - 1];
	if (!ch->bufs[idx]) {
		ch->bufs[idx] = g_try_malloc(ch->tc->base.opts.max_msg);
		if (!ch->bufs[idx])
			return -ENOMEM;
	}
	ch->nfree_bufs--;
	ch->rx_buf = idx;
	iov = (struct iovec){ ch->bufs[idx], ch->frame.len };
	rx_expect_payload(ch, &iov, 1);
	return 0;
}

static void resp_queue(struct tcp_chan *ch, void *addr)
{
	struct tcp_req *r = ch->free_resps;
	struct xport_frame f = {
		.op = XPORT_FRAME_READ_RESP,
		.len = ch->frame.len,
		.tag = ch->frame.tag,
	};

	ch->free_resps = r->next;
	r->next = NULL;
	r->len = f.len;
	r->niov = 0;
	if (f.len)
		r->iov[r->niov++] = (struct iovec){ addr, f.len };
	xport_frame_encode(&f, r->hdr);
	r->tx = TX_QUEUED;
	txq_append(ch, r);
	tcp_tx_start(ch);
}

/*
 * Answers come from the region itself, so every queued answer pins a slot:
 * with all slots taken the channel stops reading, and a peer flooding
 * READ_REQs gets TCP back-pressure instead of our memory.  A well-behaved
 * peer never gets here for long (see tcp_conn_params()).
 */
static int rx_read_req(struct tcp_chan *ch)
{
	const struct xport_frame *f = &ch->frame;
	void *addr;
	int r;

	if (!ch->free_resps)
		return RX_WAIT;
	r = xport_conn_resolve(&ch->tc->base, f->region, f->key, f->offset, f->len,
			       XPORT_ACCESS_REMOTE_READ, &addr, NULL);
	if (r < 0)
		return r;
	resp_queue(ch, addr);
	rx_expect_payload(ch, NULL, 0);
	return 0;
}

static struct tcp_req *read_lookup(struct tcp_conn *tc, const struct xport_frame *f)
{
	uint32_t slot = f->tag & 0xffff;
	struct tcp_req *r;

	if (slot >= tc->base.channels * tc->base.opts.send_depth)
		return NULL;
	r = &tc->reqs[slot];
	/* Only a READ_REQ already handed to the socket can have been answered. */
	if (r->op != XPORT_OP_READ || r->rd != RD_WAIT || r->tx == TX_QUEUED ||
	    r->tag != f->tag || r->len != f->len)
		return NULL;
	return r;
}

static int rx_read_resp(struct tcp_chan *ch)
{
	struct tcp_req *r = read_lookup(ch->tc, &ch->frame);

	if (!r)
		return -EPROTO;
	r->rd = RD_RECEIVING;
	ch->rx_read = r;
	rx_expect_payload(ch, r->iov, r->niov);
	return 0;
}

/* 0: payload read set up (possibly empty); RX_WAIT; or a fatal -errno. */
static int rx_dispatch(struct tcp_chan *ch)
{
	switch (ch->frame.op) {
	case XPORT_FRAME_WRITE:
	case XPORT_FRAME_WRITE_IMM:
		return rx_write(ch);
	case XPORT_FRAME_SEND:
		return rx_send(ch);
	case XPORT_FRAME_READ_REQ:
		return rx_read_req(ch);
	case XPORT_FRAME_READ_RESP:
		return rx_read_resp(ch);
	}
	return -EPROTO;
}

void tcp_rx_frame_done(struct tcp_chan *ch)
{
	const struct xport_frame *f = &ch->frame;
	struct tcp_req *r;

	switch (f->op) {
	case XPORT_FRAME_WRITE_IMM:
		tcp_comp_push(ch->tc, &(struct tcp_comp){
			.c = { .op = XPORT_OP_RECV_IMM, .channel = ch->index,
			       .len = f->len, .imm = f->tag },
			.buf = -1,
		});
		break;
	case XPORT_FRAME_SEND:
		tcp_comp_push(ch->tc, &(struct tcp_comp){
			.c = { .op = XPORT_OP_RECV, .channel = ch->index,
			       .len = f->len, .data = ch->bufs[ch->rx_buf] },
			.buf = (int)ch->rx_buf,
		});
		break;
	case XPORT_FRAME_READ_RESP:
		r = ch->rx_read;
		ch->rx_read = NULL;
		r->rd = RD_DONE;
		tcp_chan_reap(r->chan);
		break;
	default:
		break;
	}
}

static void rx_run(struct tcp_chan *ch)
{
	int r = rx_dispatch(ch);

	if (r < 0) {
		tcp_conn_kill(ch->tc, r);
		return;
	}
	if (r == RX_WAIT) {
		ch->rx = RX_STALLED;
		return;
	}
	if (r == RX_SPLICE_GO) {
		ch->rx = RX_SPLICE;
		tcp_splice_arm(ch);
		return;
	}
	if (ch->rx_msg.msg_iovlen) {
		ch->rx = RX_PAYLOAD;
		rx_arm(ch);
		return;
	}
	tcp_rx_frame_done(ch);
	tcp_rx_expect_header(ch);
}

void tcp_rx_resume(struct tcp_chan *ch)
{
	if (ch->rx == RX_STALLED && !ch->tc->killed)
		rx_run(ch);
}

void tcp_rx_cqe(struct tcp_chan *ch, int res)
{
	struct tcp_conn *tc = ch->tc;

	ch->rx_busy = false;
	if (tc->killed)
		return;
	if (ch->rx == RX_SPLICE) {
		tcp_splice_cqe(ch, res);
		return;
	}
	if (res == -EINTR || res == -EAGAIN) {
		rx_arm(ch);
		return;
	}
	if (res <= 0) {
		tcp_conn_kill(tc, xport_sock_error(res));
		return;
	}
	if (msg_advance(&ch->rx_msg, (size_t)res)) {
		rx_arm(ch);
		return;
	}
	if (ch->rx == RX_HEADER) {
		if (xport_frame_decode(ch->rx_hdr, sizeof(ch->rx_hdr),
				       tc->base.opts.max_msg, &ch->frame) < 0) {
			tcp_conn_kill(tc, -EPROTO);
			return;
		}
		rx_run(ch);
		return;
	}
	tcp_rx_frame_done(ch);
	tcp_rx_expect_header(ch);
}

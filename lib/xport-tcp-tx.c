// SPDX-License-Identifier: MIT
/*
 * Transmit on a tcp channel: frames queue behind the sendmsg in flight
 * and leave together in the next one, zero-copy when large enough.
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
/* ---- transmit ---- */

static unsigned req_out_iovs(const struct tcp_req *r)
{
	/* A READ's iovecs are where the answer lands, not something to send. */
	return r->is_resp || r->op != XPORT_OP_READ ? r->niov : 0;
}

static bool tx_want_zc(const struct tcp_chan *ch, size_t bytes)
{
	const struct tcp_conn *tc = ch->tc;

	if (!tc->zc_ok || ch->zc_last - ch->zc_done >= ZC_WINDOW)
		return false;
	switch (tc->base.opts.zerocopy) {
	case XPORT_ZC_ON:
		return true;
	case XPORT_ZC_OFF:
		return false;
	default:
		return bytes >= ZC_MIN_BYTES;
	}
}

/* (Re)submits the rest of the batch in tx_msg. */
static void tx_submit(struct tcp_chan *ch)
{
	struct io_uring_sqe *sqe = tcp_get_sqe(ch->tc);
	uint64_t seq = 0;

	if (!sqe) {
		tcp_conn_kill(ch->tc, -EBUSY);
		return;
	}
	if (tx_want_zc(ch, msg_bytes(&ch->tx_msg))) {
		seq = ++ch->zc_last;
		ch->zc_notified[seq % ZC_WINDOW] = false;
		ch->tx_seq = seq;
		io_uring_prep_sendmsg_zc(sqe, ch->fd, &ch->tx_msg,
					 MSG_NOSIGNAL | MSG_WAITALL);
	} else {
		io_uring_prep_sendmsg(sqe, ch->fd, &ch->tx_msg,
				      MSG_NOSIGNAL | MSG_WAITALL);
	}
	io_uring_sqe_set_data64(sqe, ud_pack(UD_TX, ch->index, seq));
	ch->tx_busy = true;
}

/* Gathers everything queued on the channel into one sendmsg. */
void tcp_tx_start(struct tcp_chan *ch)
{
	unsigned n = 0, items = 0;
	uint64_t bytes = 0;

	if (ch->tx_busy || !ch->txq_head || ch->tc->killed)
		return;
	for (struct tcp_req *r = ch->txq_head; r; r = r->tx_next) {
		unsigned out = req_out_iovs(r);
		uint64_t len = out ? r->len : 0;

		if (items && (n + 1 + out > IOV_MAX || bytes + len > BATCH_MAX_BYTES))
			break;
		ch->tx_iov[n++] = (struct iovec){ r->hdr, sizeof(r->hdr) };
		for (unsigned i = 0; i < out; i++)
			ch->tx_iov[n++] = r->iov[i];
		bytes += len;
		r->tx = TX_SENDING;
		items++;
	}
	ch->tx_batch = items;
	ch->tx_seq = 0;
	msg_init(&ch->tx_msg, ch->tx_iov, n);
	tx_submit(ch);
}

static void tx_batch_done(struct tcp_chan *ch)
{
	for (unsigned i = 0; i < ch->tx_batch; i++) {
		struct tcp_req *r = ch->txq_head;

		ch->txq_head = r->tx_next;
		r->tx_next = NULL;
		r->tx = TX_SENT;
		r->notif_seq = ch->tx_seq;
		if (r->is_resp)
			list_append(&ch->resp_wait, r);
	}
	if (!ch->txq_head)
		ch->txq_tail = NULL;
	ch->tx_batch = 0;
	tcp_chan_reap(ch);
}

static void zc_notified(struct tcp_chan *ch, uint64_t seq)
{
	if (seq <= ch->zc_done || seq > ch->zc_last)
		return;
	ch->zc_notified[seq % ZC_WINDOW] = true;
	while (ch->zc_done < ch->zc_last &&
	       ch->zc_notified[(ch->zc_done + 1) % ZC_WINDOW])
		ch->zc_done++;
	tcp_chan_reap(ch);
}

static void tx_error(struct tcp_chan *ch, uint64_t seq, int res)
{
	if (seq && (res == -EOPNOTSUPP || res == -EINVAL)) {
		/* This socket or kernel will not do zero-copy: copy from now on. */
		ch->tc->zc_ok = false;
		tx_submit(ch);
		return;
	}
	if (res == -EINTR || res == -EAGAIN) {
		tx_submit(ch);
		return;
	}
	tcp_conn_kill(ch->tc, xport_sock_error(res));
}

void tcp_tx_cqe(struct tcp_chan *ch, uint64_t seq, int res, unsigned flags)
{
	if (flags & IORING_CQE_F_NOTIF) {
		zc_notified(ch, seq);
		return;
	}
	/* Without F_MORE no notification follows: the kernel holds no pages. */
	if (seq && !(flags & IORING_CQE_F_MORE))
		zc_notified(ch, seq);
	ch->tx_busy = false;
	if (ch->tc->killed)
		return;
	if (res <= 0) {
		tx_error(ch, seq, res);
		return;
	}
	if (msg_advance(&ch->tx_msg, (size_t)res)) {
		tx_submit(ch);
		return;
	}
	tx_batch_done(ch);
	tcp_tx_start(ch);
}

/* Queues a request and, unless more follow, rings the doorbell. */
int tcp_req_queue(struct tcp_chan *ch, struct tcp_req *r,
		     const struct xport_frame *f, unsigned flags)
{
	xport_frame_encode(f, r->hdr);
	r->tx = TX_QUEUED;
	list_append(&ch->pending, r);
	txq_append(ch, r);
	if (!(flags & XPORT_F_MORE)) {
		tcp_tx_start(ch);
		tcp_ring_submit(ch->tc);
	}
	return ch->tc->base.error;
}

// SPDX-License-Identifier: MIT
/*
 * The io_uring engine of a tcp connection: submission, the completion
 * FIFO callers poll, request slots, the progress loop that dispatches
 * each completion to transmit, receive or the TLS relay, and waiting.
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
/* ---- ring plumbing ---- */

struct io_uring_sqe *tcp_get_sqe(struct tcp_conn *tc)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&tc->ring);

	if (!sqe) {
		io_uring_submit(&tc->ring);
		sqe = io_uring_get_sqe(&tc->ring);
	}
	return sqe;
}

/*
 * Fatal error: record it, stop both directions and cancel what is in flight.
 * The ops still owe us their CQEs; they are reaped (and produce nothing) by
 * later polls or by close.
 */
int tcp_conn_kill(struct tcp_conn *tc, int err)
{
	struct io_uring_sqe *sqe;

	xport_conn_fail(&tc->base, err);
	if (tc->killed)
		return err;
	tc->killed = true;
	for (unsigned i = 0; i < tc->base.channels; i++) {
		shutdown(tc->chan[i].fd, SHUT_RDWR);
		/* The peer learns at once, as it does of a plain socket's end. */
		xport_tls_relay_shutdown(tc->chan[i].relay);
	}
	/* Shutdown ends socket ops already; the cancel catches any parked in io-wq. */
	sqe = tcp_get_sqe(tc);
	if (sqe) {
		io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
		io_uring_sqe_set_data64(sqe, ud_pack(UD_CANCEL, 0, 0));
		tc->cancels++;
	}
	io_uring_submit(&tc->ring);
	return err;
}

void tcp_ring_submit(struct tcp_conn *tc)
{
	int r = io_uring_submit(&tc->ring);

	/* Short of resources or CQ backed up: the SQEs stay queued for next time. */
	if (r < 0 && r != -EAGAIN && r != -EBUSY && r != -EINTR)
		tcp_conn_kill(tc, r);
}

/* ---- completions ---- */

static int fifo_push(struct comp_fifo *f, const struct tcp_comp *c)
{
	if (f->len == f->cap) {
		unsigned cap = f->cap ? f->cap * 2 : 64;
		struct tcp_comp *v = g_try_new(struct tcp_comp, cap);

		if (!v)
			return -ENOMEM;
		for (unsigned i = 0; i < f->len; i++)
			v[i] = f->v[(f->head + i) % f->cap];
		g_free(f->v);
		f->v = v;
		f->cap = cap;
		f->head = 0;
	}
	f->v[(f->head + f->len) % f->cap] = *c;
	f->len++;
	return 0;
}

/* Nothing is reported once the connection failed: the error is the report. */
void tcp_comp_push(struct tcp_conn *tc, const struct tcp_comp *c)
{
	int r;

	if (tc->killed)
		return;
	r = fifo_push(&tc->fifo, c);
	if (r < 0)
		tcp_conn_kill(tc, r);
}

static unsigned fifo_pop(struct tcp_conn *tc, struct xport_completion *out,
			 unsigned max)
{
	struct comp_fifo *f = &tc->fifo;
	unsigned n = 0;

	while (n < max && f->len) {
		const struct tcp_comp *c = &f->v[f->head];

		out[n++] = c->c;
		if (c->buf >= 0)
			tc->lent[tc->nlent++] = (struct lent_buf){
				.chan = (uint16_t)c->c.channel,
				.buf = (uint16_t)c->buf,
			};
		f->head = (f->head + 1) % f->cap;
		f->len--;
	}
	return n;
}

/* ---- request slots ---- */

struct tcp_req *tcp_req_take(struct tcp_chan *ch)
{
	struct tcp_req *r = ch->free_reqs;

	if (!r) {
		ch->starved = true;
		return NULL;
	}
	ch->free_reqs = r->next;
	r->next = NULL;
	r->tx_next = NULL;
	return r;
}

void tcp_req_release(struct tcp_chan *ch, struct tcp_req *r)
{
	/*
	 * Unsignalled requests retire without a completion; a caller that got
	 * -EAGAIN still has to learn that posting works again.
	 */
	if (ch->starved) {
		ch->starved = false;
		ch->tc->unblocked = true;
	}
	r->rd = RD_NONE;
	r->gen++;
	r->next = ch->free_reqs;
	ch->free_reqs = r;
}

void tcp_req_init(struct tcp_req *r, enum xport_op op, unsigned flags,
		     uint64_t cookie, uint32_t len)
{
	uint32_t slot = (uint32_t)(r - r->chan->tc->reqs);

	r->op = op;
	r->flags = flags;
	r->cookie = cookie;
	r->len = len;
	r->niov = 0;
	r->rd = op == XPORT_OP_READ ? RD_WAIT : RD_NONE;
	r->tag = (uint32_t)r->gen << 16 | slot;
}

/*
 * Local memory (and the frame header, which a zero-copy send reads in place,
 * retransmissions included) is free once the bytes left and the kernel let
 * go of the pages; a READ also needs its answer.
 */
static bool req_done(const struct tcp_chan *ch, const struct tcp_req *r)
{
	if (r->tx != TX_SENT || r->notif_seq > ch->zc_done)
		return false;
	return r->op != XPORT_OP_READ || r->rd == RD_DONE;
}

/* Retires what is finished, in order: a completion vouches for earlier requests. */
void tcp_chan_reap(struct tcp_chan *ch)
{
	bool freed = false;
	struct tcp_req *r;

	while ((r = ch->resp_wait.head) && r->notif_seq <= ch->zc_done) {
		list_pop(&ch->resp_wait);
		r->next = ch->free_resps;
		ch->free_resps = r;
		freed = true;
	}
	while ((r = ch->pending.head) && req_done(ch, r)) {
		list_pop(&ch->pending);
		if (r->op == XPORT_OP_READ)
			ch->reads_out--;
		if (r->flags & XPORT_F_SIGNAL)
			tcp_comp_push(ch->tc, &(struct tcp_comp){
				.c = { .op = r->op, .channel = ch->index,
				       .cookie = r->cookie, .len = r->len },
				.buf = -1,
			});
		tcp_req_release(ch, r);
	}
	if (freed)
		tcp_rx_resume(ch);
}

/* ---- encrypted channels: the relay's polls ---- */

/* Polls, through the ring, for whatever the relay waits on and nobody polls yet. */
static void relay_arm(struct tcp_chan *ch)
{
	int fds[XPORT_RELAY_FDS];
	short want[XPORT_RELAY_FDS];

	if (ch->tc->killed)
		return;
	xport_tls_relay_wants(ch->relay, fds, want);
	for (unsigned i = 0; i < XPORT_RELAY_FDS; i++) {
		uint16_t missing = (uint16_t)(want[i] & ~ch->relay_armed[i]);
		struct io_uring_sqe *sqe;

		if (!missing)
			continue;
		sqe = tcp_get_sqe(ch->tc);
		if (!sqe) {
			tcp_conn_kill(ch->tc, -EBUSY);
			return;
		}
		io_uring_prep_poll_add(sqe, fds[i], missing);
		io_uring_sqe_set_data64(sqe, ud_pack(UD_RELAY, ch->index,
						     i | (uint64_t)missing << 8));
		ch->relay_armed[i] |= (short)missing;
	}
}

void tcp_relay_cqe(struct tcp_chan *ch, uint64_t seq)
{
	int r;

	ch->relay_armed[seq & 0xff] &= (short)~(seq >> 8);
	if (ch->tc->killed)
		return;
	r = xport_tls_relay_pump(ch->relay);
	if (r < 0) {
		tcp_conn_kill(ch->tc, r);
		return;
	}
	relay_arm(ch);
}

/* ---- progress ---- */

static void handle_cqe(struct tcp_conn *tc, uint64_t ud, int res, unsigned flags)
{
	unsigned kind = ud & 0xff, idx = (ud >> 8) & 0xff;

	if (kind == UD_CANCEL) {
		tc->cancels--;
		return;
	}
	if (idx >= tc->base.channels)
		return;
	if (kind == UD_RX)
		tcp_rx_cqe(&tc->chan[idx], res);
	else if (kind == UD_TX)
		tcp_tx_cqe(&tc->chan[idx], ud >> 16, res, flags);
	else if (kind == UD_RELAY && tc->chan[idx].relay)
		tcp_relay_cqe(&tc->chan[idx], ud >> 16);
}

/*
 * Handles ready CQEs until want completions are queued or none is left.
 * Leaving CQEs in the ring bounds the FIFO; the ring is sized so that what
 * can be in flight always fits.
 */
unsigned tcp_reap(struct tcp_conn *tc, unsigned want)
{
	struct io_uring_cqe *cqe;
	unsigned n = 0;

	while ((tc->killed || tc->fifo.len < want) &&
	       io_uring_peek_cqe(&tc->ring, &cqe) == 0) {
		uint64_t ud = cqe->user_data;
		int res = cqe->res;
		unsigned flags = cqe->flags;

		io_uring_cqe_seen(&tc->ring, cqe);
		handle_cqe(tc, ud, res, flags);
		n++;
	}
	return n;
}

/* RECV data is valid until the next poll: that poll takes the buffers back. */
static void release_lent(struct tcp_conn *tc)
{
	for (unsigned i = 0; i < tc->nlent; i++) {
		struct tcp_chan *ch = &tc->chan[tc->lent[i].chan];

		ch->free_bufs[ch->nfree_bufs++] = tc->lent[i].buf;
	}
	tc->nlent = 0;
	for (unsigned i = 0; i < tc->base.channels; i++)
		tcp_rx_resume(&tc->chan[i]);
}

static bool rx_waits_for_poll(const struct tcp_conn *tc)
{
	if (!tc->nlent)
		return false;
	for (unsigned i = 0; i < tc->base.channels; i++)
		if (tc->chan[i].rx == RX_STALLED)
			return true;
	return false;
}

int tcp_poll(struct xport_conn *conn, struct xport_completion *comps,
		    unsigned max)
{
	struct tcp_conn *tc = to_tcp(conn);
	unsigned n;

	release_lent(tc);
	tc->unblocked = false;
	for (unsigned i = 0; i < conn->channels; i++)
		tcp_tx_start(&tc->chan[i]);
	/* Socket ops often complete at submit: another round takes the next step. */
	for (unsigned round = 0; round < POLL_ROUNDS; round++) {
		tcp_ring_submit(tc);
		if (!tcp_reap(tc, max))
			break;
	}
	tcp_ring_submit(tc);
	n = fifo_pop(tc, comps, max);
	if (!n && conn->error)
		return conn->error;
	return (int)n;
}

int tcp_wait_cqe(struct tcp_conn *tc, gint64 deadline)
{
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts;
	int ms = xport_ms_until(deadline);

	if (ms < 0)
		return io_uring_wait_cqe(&tc->ring, &cqe);
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long long)(ms % 1000) * 1000000;
	return io_uring_wait_cqe_timeout(&tc->ring, &cqe, &ts);
}

/*
 * Processes CQEs while waiting, so a wakeup that only advanced a state
 * machine (a header, a partial send) does not end the wait.
 */
int tcp_wait(struct xport_conn *conn, int timeout_ms)
{
	struct tcp_conn *tc = to_tcp(conn);
	gint64 deadline = xport_deadline_after(timeout_ms);

	for (;;) {
		int r;

		if (tc->fifo.len || conn->error || tc->unblocked ||
		    rx_waits_for_poll(tc))
			return 0;
		tcp_ring_submit(tc);
		r = tcp_wait_cqe(tc, deadline);
		if (r == -ETIME)
			return -ETIMEDOUT;
		/* A signal: let the caller look at its flags, then poll and wait again. */
		if (r == -EINTR)
			return 0;
		if (r < 0)
			return r;
		tcp_reap(tc, 1);
	}
}

int tcp_flush(struct xport_conn *conn)
{
	struct tcp_conn *tc = to_tcp(conn);

	if (conn->error)
		return conn->error;
	for (unsigned i = 0; i < conn->channels; i++)
		tcp_tx_start(&tc->chan[i]);
	tcp_ring_submit(tc);
	return conn->error;
}

// SPDX-License-Identifier: MIT
/*
 * tcp back end.  A channel is one TCP stream carrying frames: the 32-byte
 * header of xport-wire.h, then the payload.  After the handshake every
 * socket operation of a connection runs through one io_uring, so the ring fd
 * is the single thing a caller waits on.
 *
 * Per channel at most one sendmsg and one recvmsg are in flight, because two
 * concurrent operations on one stream socket may interleave their bytes.
 * Sends are batched instead: whatever queued up while a send was in flight
 * leaves in the next sendmsg.
 *
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
#include <ifaddrs.h>
#include <limits.h>
#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util.h"
#include "xport-internal.h"
#include "xport-auth.h"
#include "xport-sock.h"
#include "xport-tls-relay.h"
#include "xport-wire.h"

#define ZC_MIN_BYTES (16u << 10) /* AUTO: below this, copying is cheaper */
#define ZC_WINDOW 64u            /* zero-copy sends per channel awaiting notification */
#define BATCH_MAX_BYTES (1u << 30)
#define POLL_ROUNDS 4            /* submit/reap rounds one xport_poll() may take */
#define CLOSE_DRAIN_MS 2000
#define MAX_PENDING_SOCKETS 256u /* accepted sockets not yet part of a connection */
#define SPLICE_MIN_BYTES (64u << 10) /* smaller WRITEs: recvmsg into the mapping */
#define SPLICE_PIPE_BYTES (1u << 20) /* asked for; the kernel may give less */

/* READ tags carry the request's slot index in their low 16 bits. */
_Static_assert(XPORT_MAX_CHANNELS * XPORT_MAX_DEPTH <= 65536, "READ tag slot index");

enum ud_kind { UD_RX = 1, UD_TX, UD_CANCEL, UD_RELAY };

enum tx_state { TX_QUEUED, TX_SENDING, TX_SENT };
enum rd_state { RD_NONE, RD_WAIT, RD_RECEIVING, RD_DONE };
enum rx_state { RX_HEADER, RX_PAYLOAD, RX_SPLICE, RX_STALLED };

#define RX_WAIT 1   /* rx_dispatch(): the frame needs a buffer or slot first */
#define RX_SPLICE_GO 2 /* rx_dispatch(): the payload goes by splice */

/*
 * One frame to transmit: a request the caller posted (send_depth slots per
 * channel), or a READ_RESP answering the peer (resp_slots per channel).
 */
struct tcp_req {
	struct tcp_req *next;    /* free list, pending list or resp_wait list */
	struct tcp_req *tx_next; /* transmit queue */
	struct tcp_chan *chan;
	bool is_resp;
	enum tx_state tx;
	enum rd_state rd;
	enum xport_op op;
	unsigned flags;
	uint64_t cookie;
	uint32_t len;
	uint32_t tag;
	uint16_t gen;         /* bumped on reuse so stale READ tags miss */
	uint64_t notif_seq;   /* zero-copy send whose notification frees our buffers */
	void *copy;           /* send_copy() buffer, kept for the slot's next use */
	unsigned niov;        /* payload: source, or where a READ lands */
	struct iovec iov[XPORT_MAX_SGE];
	uint8_t hdr[XPORT_FRAME_SIZE];
};

struct req_list {
	struct tcp_req *head, *tail;
};

struct tcp_chan {
	struct tcp_conn *tc;
	unsigned index;
	int fd;

	struct tcp_req *free_reqs, *free_resps;
	bool starved;       /* a post found no free slot */
	unsigned reads_out; /* READs posted and not retired */
	struct req_list pending;   /* posted requests, in order: completions are in order */
	struct req_list resp_wait; /* sent READ_RESPs whose zero-copy send is not notified */
	struct tcp_req *txq_head, *txq_tail; /* not yet fully sent; the batch is its front */

	bool tx_busy;
	unsigned tx_batch; /* requests in the sendmsg in flight */
	uint64_t tx_seq;   /* latest zero-copy send of that batch, 0 if none */
	struct iovec *tx_iov;
	struct msghdr tx_msg;
	uint64_t zc_last, zc_done; /* every zero-copy send <= zc_done is notified */
	bool zc_notified[ZC_WINDOW];

	bool rx_busy;
	enum rx_state rx;
	uint8_t rx_hdr[XPORT_FRAME_SIZE];
	struct xport_frame frame;
	struct iovec rx_iov[XPORT_MAX_SGE];
	struct msghdr rx_msg;
	unsigned rx_buf;         /* SEND: receive buffer in use */
	struct tcp_req *rx_read; /* READ_RESP: the READ being answered */
	void **bufs;             /* recv_depth buffers of max_msg, allocated on first use */
	unsigned *free_bufs;
	unsigned nfree_bufs;

	/* RX_SPLICE: the WRITE payload goes socket -> pipe -> splice_fd. */
	int pipe[2];          /* created on first use; -1 until then */
	uint32_t pipe_bytes;  /* its capacity */
	int splice_fd;        /* the region's file (owned by the region) */
	uint64_t splice_off;  /* file offset of the next payload byte */
	uint32_t splice_left; /* payload bytes not yet taken from the socket */
	uint32_t in_pipe;     /* bytes in the pipe: the op in flight writes them out */

	/* Encrypted: fd is our end of the relay's pair; the relay has the socket. */
	struct xport_tls_relay *relay;
	short relay_armed[XPORT_RELAY_FDS]; /* events of the polls in flight, per fd */
};

struct tcp_comp {
	struct xport_completion c;
	int buf; /* RECV: receive buffer lent out with it, else -1 */
};

struct comp_fifo {
	struct tcp_comp *v;
	unsigned cap, head, len;
};

struct lent_buf {
	uint16_t chan;
	uint16_t buf;
};

struct tcp_conn {
	struct xport_conn base;
	struct io_uring ring;
	bool ring_ready;
	bool killed;
	bool zc_ok; /* the kernel has SENDMSG_ZC and has not refused it */
	bool unblocked; /* a starved channel got a slot back: wake xport_wait() */
	unsigned cancels;
	unsigned read_limit; /* outstanding READs per channel */
	unsigned resp_slots; /* READ_RESPs queued per channel */
	struct tcp_req *reqs;  /* channels * send_depth */
	struct tcp_req *resps; /* channels * resp_slots */
	struct comp_fifo fifo;
	struct lent_buf *lent; /* RECV buffers handed out by the last poll */
	unsigned nlent;
	/* Spliced WRITEs: one pipe-to-file step at a time (see splice_arm()). */
	struct tcp_chan *file_writer;
	uint32_t file_waiters; /* channels whose pipe waits for their turn */
	struct tcp_chan chan[XPORT_MAX_CHANNELS];
};

static const struct xport_conn_ops tcp_conn_ops;
static const struct xport_listener_ops tcp_listener_ops;

static struct tcp_conn *to_tcp(struct xport_conn *conn)
{
	return container_of(conn, struct tcp_conn, base);
}

/* ---- small helpers ---- */

static gint64 earlier(gint64 a, gint64 b)
{
	if (a < 0)
		return b;
	return b < 0 ? a : MIN(a, b);
}

static uint64_t ud_pack(enum ud_kind kind, unsigned chan, uint64_t seq)
{
	return (uint64_t)kind | (uint64_t)chan << 8 | seq << 16;
}

static void msg_init(struct msghdr *m, struct iovec *iov, size_t n)
{
	*m = (struct msghdr){ .msg_iov = iov, .msg_iovlen = n };
}

static size_t msg_bytes(const struct msghdr *m)
{
	size_t n = 0;

	for (size_t i = 0; i < m->msg_iovlen; i++)
		n += m->msg_iov[i].iov_len;
	return n;
}

/* Drops the first done bytes after a short transfer; true while bytes remain. */
static bool msg_advance(struct msghdr *m, size_t done)
{
	while (m->msg_iovlen && done >= m->msg_iov->iov_len) {
		done -= m->msg_iov->iov_len;
		m->msg_iov++;
		m->msg_iovlen--;
	}
	if (m->msg_iovlen) {
		m->msg_iov->iov_base = (uint8_t *)m->msg_iov->iov_base + done;
		m->msg_iov->iov_len -= done;
	}
	return m->msg_iovlen > 0;
}

static void list_append(struct req_list *l, struct tcp_req *r)
{
	r->next = NULL;
	if (l->tail)
		l->tail->next = r;
	else
		l->head = r;
	l->tail = r;
}

static struct tcp_req *list_pop(struct req_list *l)
{
	struct tcp_req *r = l->head;

	l->head = r->next;
	if (!l->head)
		l->tail = NULL;
	r->next = NULL;
	return r;
}

static void txq_append(struct tcp_chan *ch, struct tcp_req *r)
{
	r->tx_next = NULL;
	if (ch->txq_tail)
		ch->txq_tail->tx_next = r;
	else
		ch->txq_head = r;
	ch->txq_tail = r;
}

/* ---- ring plumbing ---- */

static struct io_uring_sqe *get_sqe(struct tcp_conn *tc)
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
static int conn_kill(struct tcp_conn *tc, int err)
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
	sqe = get_sqe(tc);
	if (sqe) {
		io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
		io_uring_sqe_set_data64(sqe, ud_pack(UD_CANCEL, 0, 0));
		tc->cancels++;
	}
	io_uring_submit(&tc->ring);
	return err;
}

static void ring_submit(struct tcp_conn *tc)
{
	int r = io_uring_submit(&tc->ring);

	/* Short of resources or CQ backed up: the SQEs stay queued for next time. */
	if (r < 0 && r != -EAGAIN && r != -EBUSY && r != -EINTR)
		conn_kill(tc, r);
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
static void comp_push(struct tcp_conn *tc, const struct tcp_comp *c)
{
	int r;

	if (tc->killed)
		return;
	r = fifo_push(&tc->fifo, c);
	if (r < 0)
		conn_kill(tc, r);
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

static struct tcp_req *req_take(struct tcp_chan *ch)
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

static void req_release(struct tcp_chan *ch, struct tcp_req *r)
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

static void req_init(struct tcp_req *r, enum xport_op op, unsigned flags,
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

static void rx_resume(struct tcp_chan *ch);

/* Retires what is finished, in order: a completion vouches for earlier requests. */
static void chan_reap(struct tcp_chan *ch)
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
			comp_push(ch->tc, &(struct tcp_comp){
				.c = { .op = r->op, .channel = ch->index,
				       .cookie = r->cookie, .len = r->len },
				.buf = -1,
			});
		req_release(ch, r);
	}
	if (freed)
		rx_resume(ch);
}

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
	struct io_uring_sqe *sqe = get_sqe(ch->tc);
	uint64_t seq = 0;

	if (!sqe) {
		conn_kill(ch->tc, -EBUSY);
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
static void tx_start(struct tcp_chan *ch)
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
	chan_reap(ch);
}

static void zc_notified(struct tcp_chan *ch, uint64_t seq)
{
	if (seq <= ch->zc_done || seq > ch->zc_last)
		return;
	ch->zc_notified[seq % ZC_WINDOW] = true;
	while (ch->zc_done < ch->zc_last &&
	       ch->zc_notified[(ch->zc_done + 1) % ZC_WINDOW])
		ch->zc_done++;
	chan_reap(ch);
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
	conn_kill(ch->tc, xport_sock_error(res));
}

static void tx_cqe(struct tcp_chan *ch, uint64_t seq, int res, unsigned flags)
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
	tx_start(ch);
}

/* Queues a request and, unless more follow, rings the doorbell. */
static int req_queue(struct tcp_chan *ch, struct tcp_req *r,
		     const struct xport_frame *f, unsigned flags)
{
	xport_frame_encode(f, r->hdr);
	r->tx = TX_QUEUED;
	list_append(&ch->pending, r);
	txq_append(ch, r);
	if (!(flags & XPORT_F_MORE)) {
		tx_start(ch);
		ring_submit(ch->tc);
	}
	return ch->tc->base.error;
}

/* ---- receive ---- */

static void rx_arm(struct tcp_chan *ch)
{
	struct io_uring_sqe *sqe;

	if (ch->tc->killed)
		return;
	sqe = get_sqe(ch->tc);
	if (!sqe) {
		conn_kill(ch->tc, -EBUSY);
		return;
	}
	io_uring_prep_recvmsg(sqe, ch->fd, &ch->rx_msg, MSG_WAITALL);
	io_uring_sqe_set_data64(sqe, ud_pack(UD_RX, ch->index, 0));
	ch->rx_busy = true;
}

static void rx_expect_header(struct tcp_chan *ch)
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
	tx_start(ch);
}

/*
 * Answers come from the region itself, so every queued answer pins a slot:
 * with all slots taken the channel stops reading, and a peer flooding
 * READ_REQs gets TCP back-pressure instead of our memory.  A well-behaved
 * peer never gets here for long (see conn_params()).
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

static void rx_frame_done(struct tcp_chan *ch)
{
	const struct xport_frame *f = &ch->frame;
	struct tcp_req *r;

	switch (f->op) {
	case XPORT_FRAME_WRITE_IMM:
		comp_push(ch->tc, &(struct tcp_comp){
			.c = { .op = XPORT_OP_RECV_IMM, .channel = ch->index,
			       .len = f->len, .imm = f->tag },
			.buf = -1,
		});
		break;
	case XPORT_FRAME_SEND:
		comp_push(ch->tc, &(struct tcp_comp){
			.c = { .op = XPORT_OP_RECV, .channel = ch->index,
			       .len = f->len, .data = ch->bufs[ch->rx_buf] },
			.buf = (int)ch->rx_buf,
		});
		break;
	case XPORT_FRAME_READ_RESP:
		r = ch->rx_read;
		ch->rx_read = NULL;
		r->rd = RD_DONE;
		chan_reap(r->chan);
		break;
	default:
		break;
	}
}

_Static_assert(XPORT_MAX_CHANNELS <= 32, "file_waiters is a 32-bit mask");

/*
 * One step of a spliced WRITE: socket to pipe (as much of the payload as is
 * there, up to a pipeful), or pipe to file (what the pipe holds).  Both go
 * through the ring, which runs splices on io-wq threads: while one channel
 * fills the file, the others fill their pipes.  Pipe-to-file steps take
 * turns: a shmem write holds the file's lock, so concurrent ones would only
 * spin on it, burning CPU the sender could use.
 */
static void splice_arm(struct tcp_chan *ch)
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
	sqe = get_sqe(tc);
	if (!sqe) {
		conn_kill(ch->tc, -EBUSY);
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
			splice_arm(&tc->chan[i]);
			return;
		}
	}
}

static void rx_frame_done(struct tcp_chan *ch);
static void rx_expect_header(struct tcp_chan *ch);

static void splice_cqe(struct tcp_chan *ch, int res)
{
	if (res == -EINTR || res == -EAGAIN) {
		splice_arm(ch);
		return;
	}
	if (ch->in_pipe) {
		/* Pipe to file: 0 would mean the file took nothing. */
		if (res <= 0 || (uint32_t)res > ch->in_pipe) {
			conn_kill(ch->tc, res < 0 ? res : -EIO);
			return;
		}
		ch->in_pipe -= (uint32_t)res;
		ch->splice_off += (uint32_t)res;
		if (!ch->in_pipe)
			file_writer_done(ch->tc, ch->index);
	} else {
		/* Socket to pipe: 0 is the peer's end of stream. */
		if (res <= 0 || (uint32_t)res > ch->splice_left) {
			conn_kill(ch->tc, res <= 0 ? xport_sock_error(res) : -EIO);
			return;
		}
		ch->in_pipe = (uint32_t)res;
		ch->splice_left -= (uint32_t)res;
	}
	if (ch->in_pipe || ch->splice_left) {
		splice_arm(ch);
		return;
	}
	rx_frame_done(ch);
	rx_expect_header(ch);
}

/* Carries out a decoded frame as far as buffers allow. */
static void rx_run(struct tcp_chan *ch)
{
	int r = rx_dispatch(ch);

	if (r < 0) {
		conn_kill(ch->tc, r);
		return;
	}
	if (r == RX_WAIT) {
		ch->rx = RX_STALLED;
		return;
	}
	if (r == RX_SPLICE_GO) {
		ch->rx = RX_SPLICE;
		splice_arm(ch);
		return;
	}
	if (ch->rx_msg.msg_iovlen) {
		ch->rx = RX_PAYLOAD;
		rx_arm(ch);
		return;
	}
	rx_frame_done(ch);
	rx_expect_header(ch);
}

static void rx_resume(struct tcp_chan *ch)
{
	if (ch->rx == RX_STALLED && !ch->tc->killed)
		rx_run(ch);
}

static void rx_cqe(struct tcp_chan *ch, int res)
{
	struct tcp_conn *tc = ch->tc;

	ch->rx_busy = false;
	if (tc->killed)
		return;
	if (ch->rx == RX_SPLICE) {
		splice_cqe(ch, res);
		return;
	}
	if (res == -EINTR || res == -EAGAIN) {
		rx_arm(ch);
		return;
	}
	if (res <= 0) {
		conn_kill(tc, xport_sock_error(res));
		return;
	}
	if (msg_advance(&ch->rx_msg, (size_t)res)) {
		rx_arm(ch);
		return;
	}
	if (ch->rx == RX_HEADER) {
		if (xport_frame_decode(ch->rx_hdr, sizeof(ch->rx_hdr),
				       tc->base.opts.max_msg, &ch->frame) < 0) {
			conn_kill(tc, -EPROTO);
			return;
		}
		rx_run(ch);
		return;
	}
	rx_frame_done(ch);
	rx_expect_header(ch);
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
		sqe = get_sqe(ch->tc);
		if (!sqe) {
			conn_kill(ch->tc, -EBUSY);
			return;
		}
		io_uring_prep_poll_add(sqe, fds[i], missing);
		io_uring_sqe_set_data64(sqe, ud_pack(UD_RELAY, ch->index,
						     i | (uint64_t)missing << 8));
		ch->relay_armed[i] |= (short)missing;
	}
}

static void relay_cqe(struct tcp_chan *ch, uint64_t seq)
{
	int r;

	ch->relay_armed[seq & 0xff] &= (short)~(seq >> 8);
	if (ch->tc->killed)
		return;
	r = xport_tls_relay_pump(ch->relay);
	if (r < 0) {
		conn_kill(ch->tc, r);
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
		rx_cqe(&tc->chan[idx], res);
	else if (kind == UD_TX)
		tx_cqe(&tc->chan[idx], ud >> 16, res, flags);
	else if (kind == UD_RELAY && tc->chan[idx].relay)
		relay_cqe(&tc->chan[idx], ud >> 16);
}

/*
 * Handles ready CQEs until want completions are queued or none is left.
 * Leaving CQEs in the ring bounds the FIFO; the ring is sized so that what
 * can be in flight always fits.
 */
static unsigned reap(struct tcp_conn *tc, unsigned want)
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
		rx_resume(&tc->chan[i]);
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

static int tcp_poll(struct xport_conn *conn, struct xport_completion *comps,
		    unsigned max)
{
	struct tcp_conn *tc = to_tcp(conn);
	unsigned n;

	release_lent(tc);
	tc->unblocked = false;
	for (unsigned i = 0; i < conn->channels; i++)
		tx_start(&tc->chan[i]);
	/* Socket ops often complete at submit: another round takes the next step. */
	for (unsigned round = 0; round < POLL_ROUNDS; round++) {
		ring_submit(tc);
		if (!reap(tc, max))
			break;
	}
	ring_submit(tc);
	n = fifo_pop(tc, comps, max);
	if (!n && conn->error)
		return conn->error;
	return (int)n;
}

static int wait_cqe(struct tcp_conn *tc, gint64 deadline)
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
static int tcp_wait(struct xport_conn *conn, int timeout_ms)
{
	struct tcp_conn *tc = to_tcp(conn);
	gint64 deadline = xport_deadline_after(timeout_ms);

	for (;;) {
		int r;

		if (tc->fifo.len || conn->error || tc->unblocked ||
		    rx_waits_for_poll(tc))
			return 0;
		ring_submit(tc);
		r = wait_cqe(tc, deadline);
		if (r == -ETIME)
			return -ETIMEDOUT;
		/* A signal: let the caller look at its flags, then poll and wait again. */
		if (r == -EINTR)
			return 0;
		if (r < 0)
			return r;
		reap(tc, 1);
	}
}

static int tcp_flush(struct xport_conn *conn)
{
	struct tcp_conn *tc = to_tcp(conn);

	if (conn->error)
		return conn->error;
	for (unsigned i = 0; i < conn->channels; i++)
		tx_start(&tc->chan[i]);
	ring_submit(tc);
	return conn->error;
}

/* ---- data movement ---- */

static uint8_t frame_op(enum xport_op op)
{
	switch (op) {
	case XPORT_OP_WRITE:
		return XPORT_FRAME_WRITE;
	case XPORT_OP_WRITE_IMM:
		return XPORT_FRAME_WRITE_IMM;
	case XPORT_OP_READ:
		return XPORT_FRAME_READ_REQ;
	default:
		return XPORT_FRAME_SEND;
	}
}

static int tcp_post(struct xport_conn *conn, const struct xport_wr *wr,
		    uint32_t total_len)
{
	struct tcp_chan *ch = &to_tcp(conn)->chan[wr->channel];
	struct tcp_req *r;
	struct xport_frame f = { .op = frame_op(wr->op), .len = total_len };

	if (wr->op == XPORT_OP_READ && ch->reads_out >= to_tcp(conn)->read_limit) {
		ch->starved = true;
		return -EAGAIN;
	}
	r = req_take(ch);
	if (!r)
		return -EAGAIN;
	if (wr->op == XPORT_OP_READ)
		ch->reads_out++;
	req_init(r, wr->op, wr->flags, wr->cookie, total_len);
	for (unsigned i = 0; i < wr->nsg; i++) {
		const struct xport_sge *s = &wr->sg[i];

		if (s->len)
			r->iov[r->niov++] = (struct iovec){
				(uint8_t *)s->mr->addr + s->offset, s->len
			};
	}
	if (wr->op != XPORT_OP_SEND) {
		/* tcp regions have base 0: the offset is region-relative. */
		f.region = wr->remote->id;
		f.key = wr->remote->key;
		f.offset = wr->remote->base + wr->remote_offset;
	}
	if (wr->op == XPORT_OP_WRITE_IMM)
		f.tag = wr->imm;
	else if (wr->op == XPORT_OP_READ)
		f.tag = r->tag;
	return req_queue(ch, r, &f, wr->flags);
}

static int tcp_send_copy(struct xport_conn *conn, unsigned channel,
			 const void *buf, size_t len, uint64_t cookie,
			 unsigned flags)
{
	struct tcp_chan *ch = &to_tcp(conn)->chan[channel];
	struct tcp_req *r = req_take(ch);
	struct xport_frame f = { .op = XPORT_FRAME_SEND, .len = (uint32_t)len };

	if (!r)
		return -EAGAIN;
	if (!r->copy) {
		r->copy = g_try_malloc(conn->peer_max_msg);
		if (!r->copy) {
			req_release(ch, r);
			return -ENOMEM;
		}
	}
	req_init(r, XPORT_OP_SEND, flags, cookie, (uint32_t)len);
	if (len) {
		memcpy(r->copy, buf, len);
		r->iov[r->niov++] = (struct iovec){ r->copy, len };
	}
	return req_queue(ch, r, &f, flags);
}

static int tcp_mr_reg(struct xport_conn *conn, struct xport_mr *mr)
{
	struct statfs sfs;

	(void)conn;
	/*
	 * Splice into a file goes through its write path: shmem's fills a new
	 * page without clearing it first.  Other files (hugetlbfs has no write
	 * path at all) are written through the mapping as before.
	 */
	if (mr->file_fd >= 0 && (fstatfs(mr->file_fd, &sfs) < 0 || sfs.f_type != TMPFS_MAGIC))
		closep(&mr->file_fd);
	/* The key is the only secret between a peer and the region: never 0. */
	do
		mr->key = xport_random_u32();
	while (!mr->key);
	mr->base = 0;
	return 0;
}

static bool conn_busy(const struct tcp_conn *tc)
{
	if (tc->cancels)
		return true;
	for (unsigned i = 0; i < tc->base.channels; i++) {
		const struct tcp_chan *ch = &tc->chan[i];

		if (ch->rx_busy || ch->tx_busy || ch->relay_armed[0] || ch->relay_armed[1])
			return true;
	}
	return false;
}

/*
 * Waits (bounded) until the kernel has finished every socket op; after
 * conn_kill() they end promptly.  Zero-copy notifications are not waited
 * for: the kernel only reads pinned pages, it never writes them.
 */
static void conn_drain(struct tcp_conn *tc)
{
	gint64 deadline = xport_now_ms() + CLOSE_DRAIN_MS;

	while (conn_busy(tc)) {
		int r = wait_cqe(tc, deadline);

		if (r < 0 && r != -EINTR)
			break;
		reap(tc, UINT_MAX);
	}
}

/*
 * Nothing was registered with the kernel.  A READ_RESP still queued or
 * being sent from this region keeps reading it: that is the caller's
 * problem (the peer's READ must be over before dereg).  A peer's WRITE being
 * received into it right now is not, since the kernel would write into
 * memory the caller is about to free: as on rdma, where a dereg under a
 * remote write breaks the connection, the connection ends.
 */
static void tcp_mr_dereg(struct xport_mr *mr)
{
	struct tcp_conn *tc = to_tcp(mr->conn);

	for (unsigned i = 0; i < tc->base.channels; i++) {
		const struct tcp_chan *ch = &tc->chan[i];

		/* A splice in progress writes through the region's fd, closed next. */
		if (((ch->rx_busy && ch->rx == RX_PAYLOAD) || ch->rx == RX_SPLICE) &&
		    (ch->frame.op == XPORT_FRAME_WRITE ||
		     ch->frame.op == XPORT_FRAME_WRITE_IMM) &&
		    ch->frame.region == mr->id) {
			conn_kill(tc, -ECONNABORTED);
			conn_drain(tc);
			return;
		}
	}
}

/* ---- connection object ---- */

static void conn_free(struct tcp_conn *tc)
{
	unsigned depth = tc->base.opts.recv_depth;

	/* Regions first: tcp_mr_dereg() may still need the ring. */
	xport_conn_fini(&tc->base);
	if (tc->ring_ready)
		io_uring_queue_exit(&tc->ring);
	for (unsigned i = 0; i < tc->base.channels; i++) {
		struct tcp_chan *ch = &tc->chan[i];

		if (ch->fd >= 0)
			close(ch->fd);
		xport_tls_relay_free(ch->relay);
		for (unsigned j = 0; j < 2; j++)
			if (ch->pipe[j] >= 0)
				close(ch->pipe[j]);
		for (unsigned j = 0; ch->bufs && j < depth; j++)
			g_free(ch->bufs[j]);
		g_free(ch->bufs);
		g_free(ch->free_bufs);
		g_free(ch->tx_iov);
	}
	for (unsigned j = 0; tc->reqs && j < tc->base.channels * tc->base.opts.send_depth; j++)
		g_free(tc->reqs[j].copy);
	g_free(tc->reqs);
	g_free(tc->resps);
	g_free(tc->fifo.v);
	g_free(tc->lent);
	g_free(tc);
}

static void tcp_close(struct xport_conn *conn)
{
	struct tcp_conn *tc = to_tcp(conn);

	/* The kernel may still write into buffers until its ops are reaped. */
	conn_kill(tc, -ESHUTDOWN);
	conn_drain(tc);
	conn_free(tc);
}

static int chan_alloc(struct tcp_conn *tc, struct tcp_chan *ch)
{
	unsigned sd = tc->base.opts.send_depth, rd = tc->base.opts.recv_depth;
	unsigned nresp = tc->resp_slots;

	ch->tx_iov = g_try_new(struct iovec, IOV_MAX);
	ch->bufs = g_try_new0(void *, rd);
	ch->free_bufs = g_try_new(unsigned, rd);
	if (!ch->tx_iov || !ch->bufs || !ch->free_bufs)
		return -ENOMEM;
	for (unsigned j = 0; j < rd; j++)
		ch->free_bufs[j] = rd - 1 - j;
	ch->nfree_bufs = rd;
	for (unsigned j = 0; j < sd; j++) {
		struct tcp_req *r = &tc->reqs[ch->index * sd + j];

		r->chan = ch;
		req_release(ch, r);
	}
	for (unsigned j = 0; j < nresp; j++) {
		struct tcp_req *r = &tc->resps[ch->index * nresp + j];

		r->chan = ch;
		r->is_resp = true;
		r->next = ch->free_resps;
		ch->free_resps = r;
	}
	return 0;
}

static int conn_alloc(struct tcp_conn *tc)
{
	unsigned n = tc->base.channels;

	tc->reqs = g_try_new0(struct tcp_req, (gsize)n * tc->base.opts.send_depth);
	tc->resps = g_try_new0(struct tcp_req, (gsize)n * tc->resp_slots);
	tc->lent = g_try_new(struct lent_buf, (gsize)n * tc->base.opts.recv_depth);
	if (!tc->reqs || !tc->resps || !tc->lent)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		int r;

		tc->chan[i].tc = tc;
		tc->chan[i].index = i;
		r = chan_alloc(tc, &tc->chan[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

static bool same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
	return false;
}

/*
 * Whether the peer is this host.  The kernel copies zero-copy data that is
 * looped to a local socket anyway ("deferred copy", msg_zerocopy.rst), so
 * there zero-copy only adds notifications: measured 1.3 GB/s against
 * 2-4.5 GB/s copying on loopback.
 */
static bool peer_is_local(int fd)
{
	struct sockaddr_storage peer;
	socklen_t len = sizeof(peer);
	struct ifaddrs *ifs, *ifa;
	bool local = false;

	if (getpeername(fd, (struct sockaddr *)&peer, &len) < 0 || getifaddrs(&ifs) < 0)
		return false;
	for (ifa = ifs; ifa && !local; ifa = ifa->ifa_next)
		local = ifa->ifa_addr && same_ip(ifa->ifa_addr, (struct sockaddr *)&peer);
	freeifaddrs(ifs);
	return local;
}

static int ring_setup(struct tcp_conn *tc, int fd, bool relayed)
{
	unsigned n = tc->base.channels;
	/*
	 * Per channel: one recv, one send and its window of notifications;
	 * encrypted, up to two polls on each of the relay's two fds.
	 */
	struct io_uring_params p = {
		.flags = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP,
		.cq_entries = n * (2 + ZC_WINDOW + (relayed ? 4 : 0)) + 8,
	};
	struct io_uring_probe *probe;
	int r = io_uring_queue_init_params(2 * n + 4, &tc->ring, &p);

	if (r < 0)
		return r;
	tc->ring_ready = true;
	/* Through a relay the kernel copies to the pair anyway: no zero-copy. */
	if (relayed || tc->base.opts.zerocopy == XPORT_ZC_OFF ||
	    (tc->base.opts.zerocopy == XPORT_ZC_AUTO && peer_is_local(fd)))
		return 0;
	probe = io_uring_get_probe_ring(&tc->ring);
	if (probe) {
		tc->zc_ok = io_uring_opcode_supported(probe, IORING_OP_SENDMSG_ZC);
		io_uring_free_probe(probe);
	}
	return 0;
}

static int set_blocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* What the handshake told us about the peer. */
struct peer_params {
	uint32_t max_msg;
	uint32_t client_recv_depth;
};

/*
 * Both sides know the client's recv_depth from its HELLO, so it bounds the
 * READs either side keeps outstanding on a channel, and each side keeps at
 * least that many READ_RESP slots (like rdma's initiator depth and responder
 * resources).  Otherwise two peers flooding each other with READs could both
 * stop reading for want of slots while their sends wait for the other one
 * to read: a deadlock.
 */
static void conn_params(struct tcp_conn *tc, const struct peer_params *peer)
{
	tc->base.peer_max_msg = peer->max_msg;
	tc->read_limit = peer->client_recv_depth;
	tc->resp_slots = MAX(tc->base.opts.recv_depth, peer->client_recv_depth);
}

/*
 * Encrypted channels: the relay takes the socket and the session; fds[i]
 * becomes the back end's end of its pair.
 */
static int conn_relays(struct tcp_conn *tc, int *fds, struct xport_tls **tls)
{
	for (unsigned i = 0; tls && i < tc->base.channels; i++) {
		int app;
		int r;

		if (!tls[i])
			continue;
		r = xport_tls_relay_new(tls[i], fds[i], &app, &tc->chan[i].relay);
		if (r < 0)
			return r;
		tls[i] = NULL;
		fds[i] = app;
	}
	return 0;
}

/*
 * Takes the sockets (fds[i] = -1) and the sessions of encrypted channels
 * (tls may be NULL; tls[i] = NULL) only on success.
 */
static int conn_create(const struct xport_opts *opts, int *fds, struct xport_tls **tls,
		       const struct peer_params *peer, struct tcp_conn **ret)
{
	struct tcp_conn *tc = g_try_new0(struct tcp_conn, 1);
	int r;

	if (!tc)
		return -ENOMEM;
	xport_conn_init(&tc->base, &tcp_conn_ops, opts, XPORT_KIND_TCP);
	conn_params(tc, peer);
	for (unsigned i = 0; i < XPORT_MAX_CHANNELS; i++) {
		tc->chan[i].fd = -1;
		tc->chan[i].pipe[0] = tc->chan[i].pipe[1] = -1;
	}
	r = conn_alloc(tc);
	if (r < 0)
		goto out_free_conn;
	r = ring_setup(tc, fds[0], tls && tls[0]);
	if (r == 0)
		r = conn_relays(tc, fds, tls);
	if (r < 0)
		goto out_free_conn;
	/* Handshake sockets were non-blocking for poll(2); io_uring wants them plain. */
	for (unsigned i = 0; i < opts->channels; i++) {
		r = set_blocking(fds[i]);
		if (r < 0)
			goto out_free_conn;
	}
	for (unsigned i = 0; i < opts->channels; i++)
		tc->chan[i].fd = steal_fd(&fds[i]);
	tc->base.fd = tc->ring.ring_fd;
	for (unsigned i = 0; i < opts->channels; i++) {
		rx_expect_header(&tc->chan[i]);
		/* A first pump: records the handshake left in GnuTLS wake no poll. */
		if (tc->chan[i].relay)
			relay_cqe(&tc->chan[i], 0);
	}
	ring_submit(tc);
	*ret = tc;
	return 0;

out_free_conn:
	conn_free(tc);
	return r;
}

/* ---- handshake ---- */

/* Without authentication: every channel's HELLO, then every WELCOME. */
static int handshake(struct xport_hello hello, const int *fds, unsigned n,
		     gint64 deadline, uint32_t *ret_peer_max_msg)
{
	uint32_t peer_max_msg = UINT32_MAX;
	uint8_t buf[XPORT_HELLO_SIZE];
	int r;

	/* Every HELLO first: the server answers none before it has them all. */
	for (unsigned c = 0; c < n; c++) {
		hello.channel = (uint16_t)c;
		xport_hello_encode(&hello, buf);
		r = xport_sock_send_all(fds[c], buf, sizeof(buf), deadline);
		if (r < 0)
			return r;
	}
	for (unsigned c = 0; c < n; c++) {
		r = xport_sock_recv_all(fds[c], buf, XPORT_WELCOME_SIZE, deadline);
		if (r == 0)
			r = xport_welcome_result(buf, &peer_max_msg);
		if (r < 0)
			return r;
	}
	*ret_peer_max_msg = peer_max_msg;
	return 0;
}

/*
 * With authentication the handshake comes first: the channels connect once
 * the server holds the key they prove themselves with.
 */
static int connect_channels(const struct xport_opts *opts, const char *host,
			    const char *port, gint64 deadline, int *fds,
			    struct xport_tls **tls, uint32_t *ret_peer_max_msg)
{
	struct xport_hello hello = {
		.nchannels = (uint16_t)opts->channels,
		.max_msg = opts->max_msg,
		.recv_depth = opts->recv_depth,
		.token = xport_random_u64(),
	};
	struct xport_binding b;
	int r = 0;

	if (opts->auth)
		r = xport_auth_handshake(opts, host, port, &hello, deadline, &b);
	if (r == 0)
		r = xport_sock_connect(host, port, deadline, fds, opts->channels);
	if (r == 0 && opts->auth)
		r = xport_auth_tcp_channels(opts, host, &b, &hello, fds, opts->channels,
					    deadline, tls, ret_peer_max_msg);
	else if (r == 0)
		r = handshake(hello, fds, opts->channels, deadline, ret_peer_max_msg);
	gnutls_memset(&b, 0, sizeof(b));
	return r;
}

int xport_tcp_connect(const struct xport_opts *opts, const char *host,
		      const char *port, struct xport_conn **ret)
{
	gint64 deadline = xport_deadline_after(opts->timeout_ms);
	struct peer_params peer = { .client_recv_depth = opts->recv_depth };
	struct xport_tls *tls[XPORT_MAX_CHANNELS] = { 0 };
	int fds[XPORT_MAX_CHANNELS];
	struct tcp_conn *tc;
	int r;

	for (unsigned i = 0; i < XPORT_MAX_CHANNELS; i++)
		fds[i] = -1;
	r = connect_channels(opts, host, port, deadline, fds, tls, &peer.max_msg);
	if (r == 0)
		r = conn_create(opts, fds, tls, &peer, &tc);
	if (r < 0) {
		for (unsigned i = 0; i < opts->channels; i++)
			xport_tls_free(tls[i]);
		xport_close_fds(fds, opts->channels);
		return r;
	}
	*ret = &tc->base;
	return 0;
}

/* ---- listener ---- */

/* An accepted socket whose HELLO is not complete yet. */
struct hello_sock {
	int fd;
	unsigned have;
	gint64 deadline;
	uint8_t buf[XPORT_HELLO_SIZE];
};

/* Channels of one connection that have said HELLO. */
struct pend_group {
	uint64_t token;
	struct xport_hello hello; /* what every channel of the group must repeat */
	unsigned have;
	gint64 deadline;
	int fds[XPORT_MAX_CHANNELS];
	struct xport_tls *tls[XPORT_MAX_CHANNELS]; /* encrypted channels' sessions */
};

struct tcp_listener {
	struct xport_listener base;
	GPtrArray *hellos; /* struct hello_sock * */
	GPtrArray *groups; /* struct pend_group * */
	/* With authentication every socket goes through it instead of hellos. */
	struct xport_auth_gate *gate;
};

static struct tcp_listener *to_tcp_listener(struct xport_listener *l)
{
	return container_of(l, struct tcp_listener, base);
}

static void hello_sock_free(gpointer p)
{
	struct hello_sock *hs = p;

	closep(&hs->fd);
	g_free(hs);
}

static void group_free(gpointer p)
{
	struct pend_group *g = p;

	xport_close_fds(g->fds, XPORT_MAX_CHANNELS);
	for (unsigned i = 0; i < XPORT_MAX_CHANNELS; i++)
		xport_tls_free(g->tls[i]);
	g_free(g);
}

/* Tells the listener's owner (xport_opts.on_refused) who was refused and why. */
static void tell_refused(const struct tcp_listener *tl, int fd, int err, const char *reason)
{
	struct sockaddr_storage peer;
	socklen_t len = sizeof(peer);

	if (!tl->base.opts.on_refused)
		return;
	if (getpeername(fd, (struct sockaddr *)&peer, &len) < 0)
		len = 0;
	tl->base.opts.on_refused(tl->base.opts.refused_opaque, (struct sockaddr *)&peer, len,
				 err, reason);
}

/*
 * Best effort: tells a client why before hanging up; it may be gone already.
 * An encrypted channel (tls) would not understand: it only hears the hang-up.
 */
static void refuse(const struct tcp_listener *tl, int fd, struct xport_tls *tls, int err,
		   const char *reason)
{
	struct xport_welcome w = { .status = (uint16_t)-err };
	uint8_t buf[XPORT_WELCOME_SIZE];

	tell_refused(tl, fd, err, reason);
	xport_welcome_encode(&w, buf);
	if (!tls)
		(void)send(fd, buf, sizeof(buf), MSG_NOSIGNAL | MSG_DONTWAIT);
	xport_tls_free(tls);
	close(fd);
}

static void group_refuse(struct tcp_listener *tl, struct pend_group *g, int err)
{
	for (unsigned i = 0; i < XPORT_MAX_CHANNELS; i++)
		if (g->fds[i] >= 0)
			refuse(tl, steal_fd(&g->fds[i]), g_steal_pointer(&g->tls[i]), err, NULL);
	g_ptr_array_remove_fast(tl->groups, g);
}

static unsigned pending_sockets(const struct tcp_listener *tl)
{
	unsigned n = tl->hellos->len;

	for (guint i = 0; i < tl->groups->len; i++)
		n += ((struct pend_group *)g_ptr_array_index(tl->groups, i))->have;
	return n;
}

static void listener_expire(struct tcp_listener *tl)
{
	gint64 now = xport_now_ms();

	for (guint i = tl->hellos->len; i-- > 0;) {
		struct hello_sock *hs = g_ptr_array_index(tl->hellos, i);

		if (hs->deadline >= 0 && hs->deadline <= now) {
			tell_refused(tl, hs->fd, -ETIMEDOUT, NULL);
			g_ptr_array_remove_index_fast(tl->hellos, i);
		}
	}
	for (guint i = tl->groups->len; i-- > 0;) {
		struct pend_group *g = g_ptr_array_index(tl->groups, i);

		if (g->deadline >= 0 && g->deadline <= now)
			group_refuse(tl, g, -ETIMEDOUT);
	}
}

static gint64 listener_next_expiry(const struct tcp_listener *tl)
{
	gint64 next = -1;

	for (guint i = 0; i < tl->hellos->len; i++)
		next = earlier(next, ((struct hello_sock *)g_ptr_array_index(tl->hellos, i))->deadline);
	for (guint i = 0; i < tl->groups->len; i++)
		next = earlier(next, ((struct pend_group *)g_ptr_array_index(tl->groups, i))->deadline);
	if (tl->gate)
		next = earlier(next, xport_auth_gate_deadline(tl->gate));
	return next;
}

static int accept_new(struct tcp_listener *tl)
{
	for (;;) {
		int fd = accept4(tl->base.fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct hello_sock *hs;

		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			/* Errors of that one connection (see accept(2)): the next may be fine. */
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO ||
			    errno == ENETDOWN || errno == ENETUNREACH || errno == EHOSTDOWN ||
			    errno == EHOSTUNREACH || errno == ENOPROTOOPT || errno == ENONET)
				continue;
			return -errno;
		}
		if (pending_sockets(tl) >= MAX_PENDING_SOCKETS || xport_sock_nodelay(fd) < 0) {
			tell_refused(tl, fd, pending_sockets(tl) >= MAX_PENDING_SOCKETS ? -EBUSY : -errno,
				     NULL);
			close(fd);
			continue;
		}
		if (tl->gate) {
			/* Not a byte of the transport before the peer is authenticated. */
			xport_auth_gate_add(tl->gate, fd);
			continue;
		}
		hs = g_new0(struct hello_sock, 1);
		hs->fd = fd;
		hs->deadline = xport_deadline_after(tl->base.opts.timeout_ms);
		g_ptr_array_add(tl->hellos, hs);
	}
}

static struct pend_group *group_find(struct tcp_listener *tl, uint64_t token)
{
	for (guint i = 0; i < tl->groups->len; i++) {
		struct pend_group *g = g_ptr_array_index(tl->groups, i);

		if (g->token == token)
			return g;
	}
	return NULL;
}

/* Adds a channel to its group; returns the group once it is complete. */
static struct pend_group *group_join(struct tcp_listener *tl, int fd, struct xport_tls *tls,
				     const struct xport_hello *h)
{
	struct pend_group *g = group_find(tl, h->token);

	if (!g) {
		g = g_new0(struct pend_group, 1);
		g->token = h->token;
		g->hello = *h;
		g->deadline = xport_deadline_after(tl->base.opts.timeout_ms);
		for (unsigned i = 0; i < XPORT_MAX_CHANNELS; i++)
			g->fds[i] = -1;
		g_ptr_array_add(tl->groups, g);
	} else if (g->hello.nchannels != h->nchannels ||
		   g->hello.max_msg != h->max_msg ||
		   g->hello.recv_depth != h->recv_depth) {
		refuse(tl, fd, tls, -EINVAL, NULL);
		return NULL;
	}
	if (g->fds[h->channel] >= 0) {
		refuse(tl, fd, tls, -EEXIST, NULL);
		return NULL;
	}
	g->fds[h->channel] = fd;
	g->tls[h->channel] = tls;
	return ++g->have == g->hello.nchannels ? g : NULL;
}

static int welcome_all(struct tcp_conn *tc, uint32_t max_msg)
{
	struct xport_welcome w = { .max_msg = max_msg };
	uint8_t buf[XPORT_WELCOME_SIZE];

	xport_welcome_encode(&w, buf);
	for (unsigned i = 0; i < tc->base.channels; i++) {
		/* A fresh socket's send buffer always has room for 16 bytes. */
		ssize_t n = send(tc->chan[i].fd, buf, sizeof(buf),
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n != (ssize_t)sizeof(buf))
			return n < 0 ? xport_sock_error(-errno) : -ECONNRESET;
	}
	return 0;
}

/* 0: *ret_conn is set; 1: keep waiting; or -errno. */
static int group_finish(struct tcp_listener *tl, struct pend_group *g,
			struct xport_conn **ret_conn)
{
	struct xport_opts opts = tl->base.opts;
	struct peer_params peer = {
		.max_msg = g->hello.max_msg,
		.client_recv_depth = g->hello.recv_depth,
	};
	struct tcp_conn *tc;
	int r;

	opts.channels = g->hello.nchannels;
	/* Whole: the handshake's key admits no further channel. */
	if (tl->gate)
		xport_auth_gate_forget(tl->gate, g->token);
	r = conn_create(&opts, g->fds, g->tls, &peer, &tc);
	if (r < 0) {
		group_refuse(tl, g, r);
		return r;
	}
	g_ptr_array_remove_fast(tl->groups, g);
	if (welcome_all(tc, tl->base.opts.max_msg) < 0) {
		/* That client is gone; the listener is fine. */
		tcp_close(&tc->base);
		return 1;
	}
	*ret_conn = &tc->base;
	return 0;
}

/* Garbage, a hang-up or a timeout only costs that one socket. */
static int hello_progress(struct tcp_listener *tl, struct hello_sock *hs,
			  struct xport_conn **ret_conn)
{
	struct xport_hello hello;
	struct pend_group *g;
	ssize_t n = recv(hs->fd, hs->buf + hs->have, sizeof(hs->buf) - hs->have,
			 MSG_DONTWAIT);
	int fd;

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 1;
	if (n <= 0) {
		g_ptr_array_remove_fast(tl->hellos, hs);
		return 1;
	}
	hs->have += (unsigned)n;
	if (hs->have < sizeof(hs->buf))
		return 1;
	if (xport_hello_decode(hs->buf, sizeof(hs->buf), &hello) < 0) {
		bool tls = hs->buf[0] == 0x16; /* a TLS handshake record */

		tell_refused(tl, hs->fd, tls ? -EPROTONOSUPPORT : -EPROTO,
			     tls ? "a TLS handshake, and this side has no credentials" : NULL);
		g_ptr_array_remove_fast(tl->hellos, hs);
		return 1;
	}
	fd = steal_fd(&hs->fd);
	g_ptr_array_remove_fast(tl->hellos, hs);
	if (hello.flags) {
		refuse(tl, fd, NULL, -EPROTONOSUPPORT,
		       "the peer authenticates, and this side has no credentials");
		return 1;
	}
	g = group_join(tl, fd, NULL, &hello);
	return g ? group_finish(tl, g, ret_conn) : 1;
}

/* Channels the gate let through join their groups: 0 and *ret_conn once one is whole. */
static int gate_progress(struct tcp_listener *tl, const struct pollfd *pfds, unsigned n,
			 struct xport_conn **ret_conn)
{
	struct xport_auth_channel c;

	xport_auth_gate_step(tl->gate, pfds, n);
	while (xport_auth_gate_take(tl->gate, &c)) {
		struct pend_group *g = group_join(tl, c.fd, c.tls, &c.hello);
		int r = g ? group_finish(tl, g, ret_conn) : 1;

		if (r <= 0)
			return r;
	}
	return 1;
}

/* One poll(2) over the listening socket and every socket not yet in a group. */
static int accept_round(struct tcp_listener *tl, gint64 deadline,
			struct xport_conn **ret_conn, bool *ret_progress)
{
	struct pollfd pfds[1 + MAX_PENDING_SOCKETS + XPORT_AUTH_GATE_MAX_SOCKETS];
	struct hello_sock *snap[MAX_PENDING_SOCKETS];
	unsigned n, ngate = 0;
	int r;

	listener_expire(tl);
	n = tl->hellos->len;
	pfds[0] = (struct pollfd){ .fd = tl->base.fd, .events = POLLIN };
	for (unsigned i = 0; i < n; i++) {
		snap[i] = g_ptr_array_index(tl->hellos, i);
		pfds[i + 1] = (struct pollfd){ .fd = snap[i]->fd, .events = POLLIN };
	}
	if (tl->gate)
		ngate = xport_auth_gate_pollfds(tl->gate, pfds + 1 + n, XPORT_AUTH_GATE_MAX_SOCKETS);
	r = poll(pfds, 1 + n + ngate, xport_ms_until(earlier(deadline, listener_next_expiry(tl))));
	if (r < 0)
		return errno == EINTR ? 1 : -errno;
	*ret_progress = r > 0;
	for (unsigned i = 0; i < n; i++) {
		if (!pfds[i + 1].revents)
			continue;
		r = hello_progress(tl, snap[i], ret_conn);
		if (r <= 0)
			return r;
	}
	if (tl->gate) {
		r = gate_progress(tl, pfds + 1 + n, ngate, ret_conn);
		if (r <= 0)
			return r;
	}
	if (pfds[0].revents) {
		r = accept_new(tl);
		if (r < 0)
			return r;
	}
	return 1;
}

static int tcp_accept(struct xport_listener *listener, int timeout_ms,
		      struct xport_conn **ret_conn)
{
	struct tcp_listener *tl = to_tcp_listener(listener);
	gint64 deadline = xport_deadline_after(timeout_ms);

	for (;;) {
		bool progress = false;
		int r = accept_round(tl, deadline, ret_conn, &progress);

		if (r <= 0)
			return r;
		/* Past the deadline, still drain what is ready now. */
		if (!progress && deadline >= 0 && xport_now_ms() >= deadline)
			return -ETIMEDOUT;
	}
}

static void tcp_listener_close(struct xport_listener *listener)
{
	struct tcp_listener *tl = to_tcp_listener(listener);

	g_ptr_array_free(tl->hellos, TRUE);
	g_ptr_array_free(tl->groups, TRUE);
	xport_auth_gate_free(tl->gate);
	closep(&tl->base.fd);
	g_free(tl);
}

int xport_tcp_listen(const struct xport_opts *opts, const char *host,
		     const char *port, struct xport_listener **ret)
{
	struct tcp_listener *tl;
	int fd = -1, bound_port = 0;
	int r = xport_sock_listen(host, port, &fd, &bound_port);

	if (r < 0)
		return r;
	tl = g_new0(struct tcp_listener, 1);
	tl->base = (struct xport_listener){
		.ops = &tcp_listener_ops,
		.opts = *opts,
		.fd = fd,
		.port = bound_port,
	};
	tl->hellos = g_ptr_array_new_with_free_func(hello_sock_free);
	tl->groups = g_ptr_array_new_with_free_func(group_free);
	if (opts->auth) {
		r = xport_auth_gate_new(opts, true, &tl->gate);
		if (r < 0) {
			tcp_listener_close(&tl->base);
			return r;
		}
	}
	*ret = &tl->base;
	return 0;
}

static const struct xport_conn_ops tcp_conn_ops = {
	.mr_reg = tcp_mr_reg,
	.mr_dereg = tcp_mr_dereg,
	.post = tcp_post,
	.send_copy = tcp_send_copy,
	.flush = tcp_flush,
	.poll = tcp_poll,
	.wait = tcp_wait,
	.close = tcp_close,
};

static const struct xport_listener_ops tcp_listener_ops = {
	.accept = tcp_accept,
	.close = tcp_listener_close,
};

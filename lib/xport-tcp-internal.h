/* SPDX-License-Identifier: MIT */
/*
 * The tcp back end of the transport, in parts by job: the connection and
 * its set-up (xport-tcp.c), the io_uring engine (xport-tcp-io.c),
 * transmit (xport-tcp-tx.c), receive (xport-tcp-rx.c), splice into
 * file-backed regions (xport-tcp-splice.c) and the listener
 * (xport-tcp-listen.c).  This is what those parts share; nothing outside
 * lib/xport-tcp*.c includes it.
 */
#ifndef VRDMA_XPORT_TCP_INTERNAL_H
#define VRDMA_XPORT_TCP_INTERNAL_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "util.h"
#include "xport-internal.h"
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

static inline struct tcp_conn *to_tcp(struct xport_conn *conn)
{
	return container_of(conn, struct tcp_conn, base);
}

static inline gint64 earlier(gint64 a, gint64 b)
{
	if (a < 0)
		return b;
	return b < 0 ? a : MIN(a, b);
}

static inline uint64_t ud_pack(enum ud_kind kind, unsigned chan, uint64_t seq)
{
	return (uint64_t)kind | (uint64_t)chan << 8 | seq << 16;
}

static inline void msg_init(struct msghdr *m, struct iovec *iov, size_t n)
{
	*m = (struct msghdr){ .msg_iov = iov, .msg_iovlen = n };
}

static inline size_t msg_bytes(const struct msghdr *m)
{
	size_t n = 0;

	for (size_t i = 0; i < m->msg_iovlen; i++)
		n += m->msg_iov[i].iov_len;
	return n;
}

/* Drops the first done bytes after a short transfer; true while bytes remain. */
static inline bool msg_advance(struct msghdr *m, size_t done)
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

static inline void list_append(struct req_list *l, struct tcp_req *r)
{
	r->next = NULL;
	if (l->tail)
		l->tail->next = r;
	else
		l->head = r;
	l->tail = r;
}

static inline struct tcp_req *list_pop(struct req_list *l)
{
	struct tcp_req *r = l->head;

	l->head = r->next;
	if (!l->head)
		l->tail = NULL;
	r->next = NULL;
	return r;
}

static inline void txq_append(struct tcp_chan *ch, struct tcp_req *r)
{
	r->tx_next = NULL;
	if (ch->txq_tail)
		ch->txq_tail->tx_next = r;
	else
		ch->txq_head = r;
	ch->txq_tail = r;
}

/* xport-tcp-io.c */
struct io_uring_sqe *tcp_get_sqe(struct tcp_conn *tc);
/*
 * Fatal error: record it, stop both directions and cancel what is in flight.
 * The ops still owe us their CQEs; they are reaped (and produce nothing) by
 * later polls or by close.
 */
int tcp_conn_kill(struct tcp_conn *tc, int err);
void tcp_ring_submit(struct tcp_conn *tc);
/* Nothing is reported once the connection failed: the error is the report. */
void tcp_comp_push(struct tcp_conn *tc, const struct tcp_comp *c);
struct tcp_req *tcp_req_take(struct tcp_chan *ch);
void tcp_req_release(struct tcp_chan *ch, struct tcp_req *r);
void tcp_req_init(struct tcp_req *r, enum xport_op op, unsigned flags,
		     uint64_t cookie, uint32_t len);
/* Retires what is finished, in order: a completion vouches for earlier requests. */
void tcp_chan_reap(struct tcp_chan *ch);
void tcp_relay_cqe(struct tcp_chan *ch, uint64_t seq);
/*
 * Handles ready CQEs until want completions are queued or none is left.
 * Leaving CQEs in the ring bounds the FIFO; the ring is sized so that what
 * can be in flight always fits.
 */
unsigned tcp_reap(struct tcp_conn *tc, unsigned want);
int tcp_poll(struct xport_conn *conn, struct xport_completion *comps,
		    unsigned max);
int tcp_wait_cqe(struct tcp_conn *tc, gint64 deadline);
/*
 * Processes CQEs while waiting, so a wakeup that only advanced a state
 * machine (a header, a partial send) does not end the wait.
 */
int tcp_wait(struct xport_conn *conn, int timeout_ms);
int tcp_flush(struct xport_conn *conn);

/* xport-tcp-tx.c */
/* Gathers everything queued on the channel into one sendmsg. */
void tcp_tx_start(struct tcp_chan *ch);
void tcp_tx_cqe(struct tcp_chan *ch, uint64_t seq, int res, unsigned flags);
/* Queues a request and, unless more follow, rings the doorbell. */
int tcp_req_queue(struct tcp_chan *ch, struct tcp_req *r,
		     const struct xport_frame *f, unsigned flags);

/* xport-tcp-rx.c */
void tcp_rx_expect_header(struct tcp_chan *ch);
void tcp_rx_frame_done(struct tcp_chan *ch);
void tcp_rx_resume(struct tcp_chan *ch);
void tcp_rx_cqe(struct tcp_chan *ch, int res);

/* xport-tcp-splice.c */
/*
 * One step of a spliced WRITE: socket to pipe (as much of the payload as is
 * there, up to a pipeful), or pipe to file (what the pipe holds).  Both go
 * through the ring, which runs splices on io-wq threads: while one channel
 * fills the file, the others fill their pipes.  Pipe-to-file steps take
 * turns: a shmem write holds the file's lock, so concurrent ones would only
 * spin on it, burning CPU the sender could use.
 */
void tcp_splice_arm(struct tcp_chan *ch);
void tcp_splice_cqe(struct tcp_chan *ch, int res);

/* xport-tcp.c */
/* What the handshake told us about the peer. */
struct peer_params {
	uint32_t max_msg;
	uint32_t client_recv_depth;
};

int tcp_post(struct xport_conn *conn, const struct xport_wr *wr,
		    uint32_t total_len);
int tcp_send_copy(struct xport_conn *conn, unsigned channel,
			 const void *buf, size_t len, uint64_t cookie,
			 unsigned flags);
int tcp_mr_reg(struct xport_conn *conn, struct xport_mr *mr);
/*
 * Nothing was registered with the kernel.  A READ_RESP still queued or
 * being sent from this region keeps reading it: that is the caller's
 * problem (the peer's READ must be over before dereg).  A peer's WRITE being
 * received into it right now is not, since the kernel would write into
 * memory the caller is about to free: as on rdma, where a dereg under a
 * remote write breaks the connection, the connection ends.
 */
void tcp_mr_dereg(struct xport_mr *mr);
void tcp_close(struct xport_conn *conn);
/*
 * Both sides know the client's recv_depth from its HELLO, so it bounds the
 * READs either side keeps outstanding on a channel, and each side keeps at
 * least that many READ_RESP slots (like rdma's initiator depth and responder
 * resources).  Otherwise two peers flooding each other with READs could both
 * stop reading for want of slots while their sends wait for the other one
 * to read: a deadlock.
 */
void tcp_conn_params(struct tcp_conn *tc, const struct peer_params *peer);
/*
 * Takes the sockets (fds[i] = -1) and the sessions of encrypted channels
 * (tls may be NULL; tls[i] = NULL) only on success.
 */
int tcp_conn_create(const struct xport_opts *opts, int *fds, struct xport_tls **tls,
		       const struct peer_params *peer, struct tcp_conn **ret);
/* Without authentication: every channel's HELLO, then every WELCOME. */
int tcp_handshake(struct xport_hello hello, const int *fds, unsigned n,
		     gint64 deadline, uint32_t *ret_peer_max_msg);

#endif

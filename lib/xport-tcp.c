// SPDX-License-Identifier: MIT
/*
 * tcp back end: the connection, its set-up (handshake, channels, the ring)
 * and its data calls.  A channel is one TCP stream carrying frames: the
 * 32-byte header of xport-wire.h, then the payload.  After the handshake
 * every socket operation of a connection runs through one io_uring
 * (xport-tcp-io.c), so the ring fd is the single thing a caller waits on.
 *
 * Per channel at most one sendmsg and one recvmsg are in flight, because two
 * concurrent operations on one stream socket may interleave their bytes.
 * Sends are batched instead: whatever queued up while a send was in flight
 * leaves in the next sendmsg (xport-tcp-tx.c, xport-tcp-rx.c).  Large
 * WRITEs into file-backed regions arrive by splice (xport-tcp-splice.c).
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
#include <unistd.h>

#include "util.h"
#include "xport-tcp-internal.h"
#include "xport-auth.h"

static const struct xport_conn_ops tcp_conn_ops;

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

int tcp_post(struct xport_conn *conn, const struct xport_wr *wr,
		    uint32_t total_len)
{
	struct tcp_chan *ch = &to_tcp(conn)->chan[wr->channel];
	struct tcp_req *r;
	struct xport_frame f = { .op = frame_op(wr->op), .len = total_len };

	if (wr->op == XPORT_OP_READ && ch->reads_out >= to_tcp(conn)->read_limit) {
		ch->starved = true;
		return -EAGAIN;
	}
	r = tcp_req_take(ch);
	if (!r)
		return -EAGAIN;
	if (wr->op == XPORT_OP_READ)
		ch->reads_out++;
	tcp_req_init(r, wr->op, wr->flags, wr->cookie, total_len);
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
	return tcp_req_queue(ch, r, &f, wr->flags);
}

int tcp_send_copy(struct xport_conn *conn, unsigned channel,
			 const void *buf, size_t len, uint64_t cookie,
			 unsigned flags)
{
	struct tcp_chan *ch = &to_tcp(conn)->chan[channel];
	struct tcp_req *r = tcp_req_take(ch);
	struct xport_frame f = { .op = XPORT_FRAME_SEND, .len = (uint32_t)len };

	if (!r)
		return -EAGAIN;
	if (!r->copy) {
		r->copy = g_try_malloc(conn->peer_max_msg);
		if (!r->copy) {
			tcp_req_release(ch, r);
			return -ENOMEM;
		}
	}
	tcp_req_init(r, XPORT_OP_SEND, flags, cookie, (uint32_t)len);
	if (len) {
		memcpy(r->copy, buf, len);
		r->iov[r->niov++] = (struct iovec){ r->copy, len };
	}
	return tcp_req_queue(ch, r, &f, flags);
}

int tcp_mr_reg(struct xport_conn *conn, struct xport_mr *mr)
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
 * tcp_conn_kill() they end promptly.  Zero-copy notifications are not waited
 * for: the kernel only reads pinned pages, it never writes them.
 */
static void conn_drain(struct tcp_conn *tc)
{
	gint64 deadline = xport_now_ms() + CLOSE_DRAIN_MS;

	while (conn_busy(tc)) {
		int r = tcp_wait_cqe(tc, deadline);

		if (r < 0 && r != -EINTR)
			break;
		tcp_reap(tc, UINT_MAX);
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
void tcp_mr_dereg(struct xport_mr *mr)
{
	struct tcp_conn *tc = to_tcp(mr->conn);

	for (unsigned i = 0; i < tc->base.channels; i++) {
		const struct tcp_chan *ch = &tc->chan[i];

		/* A splice in progress writes through the region's fd, closed next. */
		if (((ch->rx_busy && ch->rx == RX_PAYLOAD) || ch->rx == RX_SPLICE) &&
		    (ch->frame.op == XPORT_FRAME_WRITE ||
		     ch->frame.op == XPORT_FRAME_WRITE_IMM) &&
		    ch->frame.region == mr->id) {
			tcp_conn_kill(tc, -ECONNABORTED);
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

void tcp_close(struct xport_conn *conn)
{
	struct tcp_conn *tc = to_tcp(conn);

	/* The kernel may still write into buffers until its ops are reaped. */
	tcp_conn_kill(tc, -ESHUTDOWN);
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
		tcp_req_release(ch, r);
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

/*
 * Both sides know the client's recv_depth from its HELLO, so it bounds the
 * READs either side keeps outstanding on a channel, and each side keeps at
 * least that many READ_RESP slots (like rdma's initiator depth and responder
 * resources).  Otherwise two peers flooding each other with READs could both
 * stop reading for want of slots while their sends wait for the other one
 * to read: a deadlock.
 */
void tcp_conn_params(struct tcp_conn *tc, const struct peer_params *peer)
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
int tcp_conn_create(const struct xport_opts *opts, int *fds, struct xport_tls **tls,
		       const struct peer_params *peer, struct tcp_conn **ret)
{
	struct tcp_conn *tc = g_try_new0(struct tcp_conn, 1);
	int r;

	if (!tc)
		return -ENOMEM;
	xport_conn_init(&tc->base, &tcp_conn_ops, opts, XPORT_KIND_TCP);
	tcp_conn_params(tc, peer);
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
		tcp_rx_expect_header(&tc->chan[i]);
		/* A first pump: records the handshake left in GnuTLS wake no poll. */
		if (tc->chan[i].relay)
			tcp_relay_cqe(&tc->chan[i], 0);
	}
	tcp_ring_submit(tc);
	*ret = tc;
	return 0;

out_free_conn:
	conn_free(tc);
	return r;
}

/* ---- handshake ---- */

/* Without authentication: every channel's HELLO, then every WELCOME. */
int tcp_handshake(struct xport_hello hello, const int *fds, unsigned n,
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
		r = tcp_handshake(hello, fds, opts->channels, deadline, ret_peer_max_msg);
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
		r = tcp_conn_create(opts, fds, tls, &peer, &tc);
	if (r < 0) {
		for (unsigned i = 0; i < opts->channels; i++)
			xport_tls_free(tls[i]);
		xport_close_fds(fds, opts->channels);
		return r;
	}
	*ret = &tc->base;
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

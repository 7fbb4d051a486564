// SPDX-License-Identifier: MIT
/*
 * Connections whose peer is behind another vrdma back end, across a live
 * migration of either guest (docs/migration-rdma.md, "Peers elsewhere").
 *
 * The moving guest's source, at the stop, asks the peer's back end to
 * PAUSE the peer QP: the peer takes no more of its guest's sends for it
 * and lets what it posted complete, so that nothing is in flight either
 * way and both sides' packet sequence numbers agree.  The destination,
 * once it has made the QP again, presents the token the source handed the
 * peer (carried in the device state) and has the peer RETARGET its QP: to
 * RESET and back to RTS, connected to the destination's QP and GID, at
 * the PSNs it stood at, its receives posted again from its ring, the
 * moved guest's rkeys translated from then on.  A source that resumes (a
 * failed move) tells the peer to RESUME.  The peer's guest sees a pause.
 *
 * This file is the peer's side: the listener, and what each request does;
 * rdma-peer-ask.c is the moving guest's side.
 *
 * Who may ask: the protocol runs on TLS with the operators' pre-shared
 * key (a guest has no key), each request comes from the address of the
 * GID it speaks for (a PAUSE or RESUME from the GID the QP is connected
 * to, a RETARGET from the GID it is to be connected to), and a RESUME or
 * RETARGET carries the token of the PAUSE, spent on first use.  A
 * DISCONNECT (the end of an rdma_cm connection that moved) comes from the
 * GID the QP is connected to, and only for a connection detached from the
 * host's rdma_cm.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "rdma-internal.h"
#include "rdma-peer-wire.h"
#include "rdma-peer.h"
#include "util.h"
#include "xport-sock.h"
#include "xport-tls.h"

/* A peer QP held for a move longer than this fails. */
#define HOLD_NS (30ull * 1000000000ull)
/* A peer's sends to drain before it answers PAUSE. */
#define DRAIN_NS 2000000000ull
/* Requests on one connection: one per QP of the asker's guest at most. */
#define MAX_REQUESTS_PER_CONN (RDMA_TABLE_MAX + 1u)
#define REQUESTS_PER_WAKEUP 32u

struct peer_conn {
	int fd;
	struct xport_tls *tls;
	int stage; /* 0 handshake, 1 request, 2 rkeys, 3 reply */
	uint8_t head[RDMA_PEER_REQUEST_SIZE];
	struct rdma_peer_request req;
	uint8_t *rkeys;
	size_t want, got;
	uint8_t reply[RDMA_PEER_REPLY_SIZE];
	uint8_t from_gid[16]; /* the caller's address as an IPv4-mapped GID */
	uint64_t deadline;    /* of the request under way */
	uint32_t requests;
};

/* ---- addresses ---- */

static void gid_of_ipv4(const struct sockaddr_in *a, uint8_t ret[16])
{
	memset(ret, 0, 16);
	ret[10] = ret[11] = 0xff;
	memcpy(ret + 12, &a->sin_addr, 4);
}

void rdma_peer_sockaddr(const uint8_t gid[16], uint16_t port, struct sockaddr_in *ret)
{
	*ret = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(port) };
	memcpy(&ret->sin_addr, gid + 12, 4);
}

static bool same_bytes(const uint8_t *a, const uint8_t *b, size_t n)
{
	uint8_t diff = 0;

	/* Tokens: no early exit that times how much of one matched. */
	for (size_t i = 0; i < n; i++)
		diff |= a[i] ^ b[i];
	return !diff;
}

/* ---- the peer's side: what a request does ---- */

struct rdma_qp *rdma_peer_qp_by_host_qpn(struct rdma_shared *sh, uint32_t qpn)
{
	for (GList *l = sh->devs; l; l = l->next) {
		struct rdma_dev *d = l->data;
		struct rdma_qp *qp = g_hash_table_lookup(d->qp_by_qpn, GUINT_TO_POINTER(qpn));

		if (qp)
			return qp;
	}
	return NULL;
}

int rdma_peer_host_attr(struct rdma_qp *qp, struct ibv_qp_attr *ret)
{
	struct ibv_qp_init_attr init;

	return ibv_query_qp(qp->qp, ret, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER |
				     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC, &init) ? -EIO : 0;
}

/* The QP is connected to exactly (gid, qpn). */
static bool connected_to(struct rdma_qp *qp, const uint8_t gid[16], uint32_t qpn)
{
	struct ibv_qp_attr a;

	return rdma_qp_state_connected(qp->state) && !rdma_peer_host_attr(qp, &a) && a.dest_qp_num == qpn &&
	       !memcmp(a.ah_attr.grh.dgid.raw, gid, 16);
}

/* The hold ends without the move it was for (the QP failed, or was
 * already in ERR): the QP's connection is over too. */
static void hold_failed(struct rdma_qp *qp)
{
	g_clear_pointer(&qp->held, g_free);
	rdma_cm_conn_lost(qp);
	rdma_flush_events(qp->dev);
}

static void unhold(struct rdma_qp *qp)
{
	g_clear_pointer(&qp->held, g_free);
	rdma_sq_take(qp->dev, qp);
	rdma_flush_events(qp->dev);
}

/* Lets what the QP posted complete; false when it did not in time. */
static bool drain_sends(struct rdma_qp *qp)
{
	uint64_t deadline = monotonic_ns() + DRAIN_NS;

	while (qp->sq.inflight && monotonic_ns() < deadline) {
		rdma_poll_cq(qp->dev, qp->scq);
		if (qp->sq.inflight)
			usleep(500);
	}
	return !qp->sq.inflight;
}

/* A PAUSE or DISCONNECT may be asked of a QP that is not held, by the QP
 * it is connected to, from that QP's address: 0, EBUSY or EPERM. */
static uint32_t asked_by_its_peer(struct rdma_qp *qp, const struct rdma_peer_request *req,
				  const uint8_t caller[16])
{
	if (qp->held)
		return EBUSY;
	if (!connected_to(qp, req->from_gid, req->from_qpn) ||
	    !same_bytes(caller, req->from_gid, 16))
		return EPERM;
	return 0;
}

static uint32_t do_pause(struct rdma_qp *qp, const struct rdma_peer_request *req,
			 const uint8_t caller[16])
{
	uint32_t r = asked_by_its_peer(qp, req, caller);

	if (r)
		return r;
	qp->held = g_new0(struct rdma_peer_link, 1);
	memcpy(qp->held->token, req->token, RDMA_PEER_TOKEN_SIZE);
	memcpy(qp->held->from_gid, req->from_gid, 16);
	qp->held->from_qpn = req->from_qpn;
	qp->held->deadline = monotonic_ns() + HOLD_NS;
	if (!drain_sends(qp)) {
		unhold(qp);
		return ETIMEDOUT;
	}
	return 0;
}

static bool holds(const struct rdma_qp *qp, const struct rdma_peer_request *req)
{
	return qp->held && same_bytes(qp->held->token, req->token, RDMA_PEER_TOKEN_SIZE) &&
	       same_bytes(qp->held->from_gid, req->from_gid, 16) &&
	       qp->held->from_qpn == req->from_qpn;
}

void rdma_peer_set_remote_rkeys(struct rdma_qp *qp, const struct rdma_peer_rkey *rkeys,
				uint32_t n)
{
	g_clear_pointer(&qp->remote_rkeys, g_hash_table_destroy);
	if (!n)
		return;
	qp->remote_rkeys = g_hash_table_new(NULL, NULL);
	for (uint32_t i = 0; i < n; i++)
		g_hash_table_insert(qp->remote_rkeys, GUINT_TO_POINTER(rkeys[i].guest),
				    GUINT_TO_POINTER(rkeys[i].host));
}

/*
 * RESET, then INIT, RTR and RTS as the QP stood, but for the peer's new
 * number and GID.  What the QP had posted of its receives is gone with
 * the reset: they are taken again from the guest's ring, where they still
 * are (the tail is the first one not completed).  Its sends had drained.
 */
static int reconnect(struct rdma_qp *qp, const uint8_t gid[16], uint32_t qpn)
{
	struct ibv_qp_attr a, s;
	int r = rdma_peer_host_attr(qp, &a);

	if (r)
		return r;
	s = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RESET };
	if (ibv_modify_qp(qp->qp, &s, IBV_QP_STATE))
		return -EIO;
	rdma_qp_new_incarnation(qp->dev, qp);
	qp->rq.next = qp->rq.tail;
	qp->rq.inflight = 0;
	qp->sq.inflight = 0;
	s = a;
	s.qp_state = IBV_QPS_INIT;
	r = ibv_modify_qp(qp->qp, &s, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS);
	s.qp_state = IBV_QPS_RTR;
	s.dest_qp_num = qpn;
	memcpy(s.ah_attr.grh.dgid.raw, gid, 16);
	if (!r)
		r = ibv_modify_qp(qp->qp, &s, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	s.qp_state = IBV_QPS_RTS;
	if (!r && qp->state == VRDMA_QPS_RTS)
		r = ibv_modify_qp(qp->qp, &s, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					      IBV_QP_MAX_QP_RD_ATOMIC);
	if (r)
		return -EIO;
	rdma_rq_fill(qp->dev, qp);
	return 0;
}

static uint32_t do_retarget(struct rdma_qp *qp, const struct rdma_peer_request *req,
			    const struct rdma_peer_rkey *rkeys, const uint8_t caller[16])
{
	if (!holds(qp, req) || !same_bytes(caller, req->new_gid, 16))
		return EPERM;
	/* Ended while held (its guest disconnected or moved it to ERR): it
	 * stays so, and the destination ends its side too. */
	if (qp->state == VRDMA_QPS_ERR) {
		hold_failed(qp);
		return ECONNRESET;
	}
	/* Spent: whatever happens next, this token does nothing again. */
	if (reconnect(qp, req->new_gid, req->new_qpn)) {
		rdma_qp_fatal(qp->dev, qp, VRDMA_QPF_HOST);
		hold_failed(qp);
		return EIO;
	}
	rdma_peer_set_remote_rkeys(qp, rkeys, req->n_rkeys);
	rdma_cm_peer_retargeted(qp);
	unhold(qp);
	return 0;
}

/* The other end of a connection that moved ended it (rdma-cm-move.c). */
static uint32_t do_disconnect(struct rdma_qp *qp, const struct rdma_peer_request *req,
			      const uint8_t caller[16])
{
	/* (Held: the asker is a source the connection moves away from.) */
	uint32_t r = asked_by_its_peer(qp, req, caller);

	/* A source stopped for a move: its state is written, its
	 * connections go on from the destination (which hears of the end
	 * when its retarget is refused). */
	if (!r && qp->dev->quiesced)
		r = EBUSY;
	return r ? r : rdma_cm_peer_closed(qp);
}

/* What a checked request does; a positive errno or 0 for the reply. */
uint32_t rdma_peer_handle(struct rdma_shared *sh, const struct rdma_peer_request *req,
			  const struct rdma_peer_rkey *rkeys, const uint8_t caller[16])
{
	struct rdma_qp *qp = rdma_peer_qp_by_host_qpn(sh, req->qpn);

	if (!qp)
		return ENOENT;
	switch (req->op) {
	case RDMA_PEER_PAUSE:
		return do_pause(qp, req, caller);
	case RDMA_PEER_RESUME:
		if (!holds(qp, req) || !same_bytes(caller, req->from_gid, 16))
			return EPERM;
		unhold(qp);
		return 0;
	case RDMA_PEER_RETARGET:
		return do_retarget(qp, req, rkeys, caller);
	default:
		return do_disconnect(qp, req, caller);
	}
}

void rdma_peer_check_holds(struct rdma_dev *d)
{
	uint64_t now = monotonic_ns();

	for (uint32_t i = 0; i < d->qps.cap; i++) {
		struct rdma_qp *qp = d->qps.obj[i];

		/*
		 * Nobody came back for it (the source died, or the move took
		 * longer than any should).  Going on with the source could land
		 * writes in memory the migration has copied already, lost
		 * without a word; the connection fails instead.
		 */
		if (qp && qp->held && now >= qp->held->deadline) {
			rdma_qp_fatal(d, qp, VRDMA_QPF_STOPPED);
			hold_failed(qp);
		}
	}
}

uint32_t rdma_peer_rkey(const struct rdma_qp *qp, uint32_t rkey)
{
	gpointer host;

	if (qp->remote_rkeys &&
	    g_hash_table_lookup_extended(qp->remote_rkeys, GUINT_TO_POINTER(rkey), NULL, &host))
		return GPOINTER_TO_UINT(host);
	return rkey;
}

void rdma_peer_qp_free(struct rdma_qp *qp)
{
	g_clear_pointer(&qp->held, g_free);
	g_clear_pointer(&qp->moving, g_free);
	g_clear_pointer(&qp->remote_rkeys, g_hash_table_destroy);
}

/* ---- the peer's side: the listener and its connections ---- */

static void conn_close(struct rdma_peer_srv *srv, unsigned int i)
{
	struct peer_conn *c = srv->conns[i];

	srv->conns[i] = NULL;
	xport_tls_free(c->tls);
	close(c->fd);
	g_free(c->rkeys);
	g_free(c);
}

static int conn_watch(struct rdma_peer_srv *srv, struct peer_conn *c, short events)
{
	struct epoll_event ev = {
		.events = (events & POLLOUT ? EPOLLOUT : 0) | (events & POLLIN ? EPOLLIN : 0),
		.data.fd = c->fd,
	};

	return epoll_ctl(srv->epfd, EPOLL_CTL_MOD, c->fd, &ev) ? -errno : 0;
}

/* Reads c->want bytes into buf; 0 once there, -EAGAIN, or -errno. */
static int conn_read(struct peer_conn *c, uint8_t *buf, short *events)
{
	while (c->got < c->want) {
		ssize_t n = xport_tls_recv(c->tls, buf + c->got, c->want - c->got, events);

		if (n < 0)
			return (int)n;
		if (n == 0)
			return -ECONNRESET;
		c->got += (size_t)n;
	}
	return 0;
}

static uint64_t step_deadline_ns(void)
{
	return monotonic_ns() + (uint64_t)RDMA_PEER_CALL_TIMEOUT_MS * 1000000;
}

/* The next request, within its own deadline. */
static void expect_request(struct peer_conn *c)
{
	g_clear_pointer(&c->rkeys, g_free);
	c->stage = 1;
	c->want = RDMA_PEER_REQUEST_SIZE;
	c->got = 0;
	c->deadline = step_deadline_ns();
}

/* One step of a connection; false when it is done with (closed by caller). */
static bool conn_step(struct rdma_shared *sh, struct peer_conn *c)
{
	struct rdma_peer_srv *srv = sh->peer;
	short events = POLLIN;
	unsigned int handled = 0;
	const char *why;
	int r = 0;

	for (;;) {
		switch (c->stage) {
		case 0:
			r = xport_tls_handshake(c->tls, &events, &why);
			if (!r)
				expect_request(c);
			break;
		case 1:
			r = conn_read(c, c->head, &events);
			if (!r && rdma_peer_request_decode(c->head, &c->req))
				return false;
			if (!r) {
				c->stage = 2;
				c->want = 8ull * c->req.n_rkeys;
				c->got = 0;
				c->rkeys = g_malloc(c->want + 1);
			}
			break;
		case 2: {
			g_autofree struct rdma_peer_rkey *rkeys = NULL;

			r = conn_read(c, c->rkeys, &events);
			if (r)
				break;
			rkeys = g_new(struct rdma_peer_rkey, c->req.n_rkeys + 1);
			rdma_peer_rkeys_decode(c->rkeys, c->req.n_rkeys, rkeys);
			rdma_peer_reply_encode(rdma_peer_handle(sh, &c->req, rkeys, c->from_gid),
					       c->reply);
			c->stage = 3;
			c->want = RDMA_PEER_REPLY_SIZE;
			c->got = 0;
			break;
		}
		default:
			while (!r && c->got < c->want) {
				ssize_t n = xport_tls_send(c->tls, c->reply + c->got,
							   c->want - c->got, &events);

				r = n < 0 ? (int)n : n == 0 ? -EIO : 0;
				c->got += n > 0 ? (size_t)n : 0;
			}
			if (r)
				break;
			/* The asker may go on with its next QP on this session; a
			 * few requests per wake-up, then the loop's other work (the
			 * socket is writable, so asking for that wakes us again at
			 * once, whatever TLS holds decrypted already). */
			if (++c->requests == MAX_REQUESTS_PER_CONN)
				return false;
			expect_request(c);
			if (++handled == REQUESTS_PER_WAKEUP)
				return !conn_watch(srv, c, POLLOUT);
			break;
		}
		if (r == -EAGAIN)
			return !conn_watch(srv, c, events);
		if (r)
			return false;
	}
}

static void accept_one(struct rdma_shared *sh, int lfd)
{
	struct rdma_peer_srv *srv = sh->peer;
	struct sockaddr_in from;
	socklen_t len = sizeof(from);
	struct peer_conn *c;
	unsigned int slot = RDMA_PEER_MAX_CONNS;
	int fd = accept4(lfd, (struct sockaddr *)&from, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return;
	for (unsigned int i = 0; i < RDMA_PEER_MAX_CONNS && slot == RDMA_PEER_MAX_CONNS; i++)
		if (!srv->conns[i])
			slot = i;
	if (slot == RDMA_PEER_MAX_CONNS || len != sizeof(from) || from.sin_family != AF_INET) {
		close(fd);
		return;
	}
	c = g_new0(struct peer_conn, 1);
	c->fd = fd;
	c->deadline = step_deadline_ns();
	gid_of_ipv4(&from, c->from_gid);
	if (xport_tls_new(srv->server, fd, NULL, &c->tls) ||
	    epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd,
		      &(struct epoll_event){ .events = EPOLLIN, .data.fd = fd })) {
		xport_tls_free(c->tls);
		close(fd);
		g_free(c);
		return;
	}
	srv->conns[slot] = c;
	timerfd_settime(srv->timer, 0, &(struct itimerspec){ { 1, 0 }, { 1, 0 } }, NULL);
	if (!conn_step(sh, c))
		conn_close(srv, slot);
}

static void expire_conns(struct rdma_peer_srv *srv)
{
	uint64_t now = monotonic_ns();
	uint64_t ticks;
	bool any = false;

	if (read(srv->timer, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		return;
	for (unsigned int i = 0; i < RDMA_PEER_MAX_CONNS; i++) {
		if (srv->conns[i] && now >= srv->conns[i]->deadline)
			conn_close(srv, i);
		any |= srv->conns[i] != NULL;
	}
	if (!any)
		timerfd_settime(srv->timer, 0, &(struct itimerspec){ 0 }, NULL);
}

void rdma_peer_ready(struct rdma_shared *sh)
{
	struct rdma_peer_srv *srv = sh->peer;
	struct epoll_event evs[8];
	int n;

	if (!srv)
		return;
	n = epoll_wait(srv->epfd, evs, G_N_ELEMENTS(evs), 0);
	for (int i = 0; i < n; i++) {
		int fd = evs[i].data.fd;
		bool done = false;

		if (fd == srv->timer) {
			expire_conns(srv);
			continue;
		}
		for (unsigned int l = 0; l < srv->nlisten && !done; l++)
			if (srv->listen[l] == fd) {
				accept_one(sh, fd);
				done = true;
			}
		for (unsigned int c = 0; c < RDMA_PEER_MAX_CONNS && !done; c++)
			if (srv->conns[c] && srv->conns[c]->fd == fd) {
				if (!conn_step(sh, srv->conns[c]))
					conn_close(srv, c);
				done = true;
			}
	}
}

int rdma_peer_fd(const struct rdma_shared *sh)
{
	return sh->peer ? sh->peer->epfd : -1;
}

static int listen_on(struct rdma_peer_srv *srv, const uint8_t gid[16])
{
	struct sockaddr_in a;
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	rdma_peer_sockaddr(gid, srv->port, &a);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 16) ||
	    epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd,
		      &(struct epoll_event){ .events = EPOLLIN, .data.fd = fd })) {
		int r = -errno;

		close(fd);
		return r;
	}
	srv->listen[srv->nlisten++] = fd;
	return 0;
}

void rdma_peer_close(struct rdma_shared *sh)
{
	struct rdma_peer_srv *srv = sh->peer;

	if (!srv)
		return;
	for (unsigned int i = 0; i < RDMA_PEER_MAX_CONNS; i++)
		if (srv->conns[i])
			conn_close(srv, i);
	for (unsigned int i = 0; i < srv->nlisten; i++)
		close(srv->listen[i]);
	if (srv->timer >= 0)
		close(srv->timer);
	if (srv->epfd >= 0)
		close(srv->epfd);
	xport_auth_free(srv->server);
	xport_auth_free(srv->client);
	g_free(srv);
	sh->peer = NULL;
}

int rdma_peer_open(struct rdma_shared *sh, uint16_t port, const char *psk_file,
		   const uint8_t (*gids)[16], unsigned int n_gids)
{
	struct rdma_peer_srv *srv = g_new0(struct rdma_peer_srv, 1);
	int r;

	sh->peer = srv;
	srv->port = port;
	srv->epfd = epoll_create1(EPOLL_CLOEXEC);
	srv->timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (srv->epfd < 0 || srv->timer < 0 ||
	    epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->timer,
		      &(struct epoll_event){ .events = EPOLLIN, .data.fd = srv->timer })) {
		r = -errno;
		goto fail;
	}
	r = xport_auth_new(&(struct xport_auth_cfg){ .server = true, .psk_file = psk_file },
			   &srv->server, NULL);
	if (!r)
		r = xport_auth_new(&(struct xport_auth_cfg){ .psk_file = psk_file }, &srv->client,
				   NULL);
	for (unsigned int i = 0; !r && i < n_gids; i++)
		r = rdma_gid_is_ipv4(gids[i]) ? listen_on(srv, gids[i]) : -EAFNOSUPPORT;
	if (!r)
		return 0;
fail:
	rdma_peer_close(sh);
	return r;
}


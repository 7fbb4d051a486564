// SPDX-License-Identifier: MIT
/*
 * rdma back end: librdmacm for connection management, one RC QP per
 * channel, all channels of a connection on one PD and one completion
 * channel.
 *
 * Send queue bookkeeping: every channel has send_depth slots used as a
 * ring.  Only some work requests are signalled (the caller's, every
 * signal_interval-th, and the one that fills the ring); since an RC send
 * queue completes in order, a signalled completion retires every slot up
 * to and including its own.
 *
 * Registered memory is addressed by the peer through an iova that keeps
 * only the page offset of the host address (ibv_reg_mr_iova), so no host
 * pointer ever goes on the wire.
 */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "util.h"
#include "xport-auth.h"
#include "xport-internal.h"
#include "xport-sock.h"
#include "xport-wire.h"

#define RECV_WR_FLAG (1ull << 63)
#define POLL_BATCH 32
#define MAX_BOUNCE 64
#define MAX_PENDING_CONNS 16
#define PORT_TRIES 8 /* "any port" with authentication: one free for both */
#define MAX_RD_ATOMIC 16
/* 4.096 us * 2^16 = 268 ms per try, 7 tries: a vanished peer shows in ~2 s. */
#define ACK_TIMEOUT_EXP 16
#define PAGE_OFFSET_MASK 4095u

struct send_slot {
	struct ibv_send_wr wr;
	struct ibv_sge sge[XPORT_MAX_SGE];
	uint64_t cookie;
	enum xport_op op;
	uint32_t len;
	int bounce; /* index of the bounce buffer it uses, or -1 */
	bool user_signal;
};

struct rdma_channel {
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	bool established;

	struct send_slot *slots;
	unsigned head;        /* next slot to fill */
	unsigned tail;        /* oldest slot not retired */
	unsigned outstanding; /* filled, not retired */
	unsigned since_signal;
	struct ibv_send_wr *chain_head, *chain_tail; /* deferred (XPORT_F_MORE) */

	uint8_t *recv_buf;
	struct ibv_mr *recv_mr;

	uint8_t *bounce_buf; /* send_copy: nbounce buffers of peer_max_msg */
	struct ibv_mr *bounce_mr;
	uint64_t bounce_busy; /* bitmap */
};

struct fifo_entry {
	struct xport_completion comp;
	int recv_index; /* receive buffer to repost once handed out, or -1 */
};

struct rdma_conn {
	struct xport_conn base;
	struct rdma_event_channel *events;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *comp;
	unsigned max_sge;
	unsigned nbounce;
	uint32_t max_inline;
	struct rdma_channel ch[XPORT_MAX_CHANNELS];

	struct fifo_entry *fifo;
	unsigned fifo_cap, fifo_head, fifo_count;
	/* Receive buffers handed to the caller by the last poll: (ch, index). */
	uint32_t *handed;
	unsigned handed_count;

	/* Server side, while the channels of a connection come in. */
	uint64_t token;
	unsigned established;
	/* Client side, with authentication: what each channel proves. */
	const struct xport_binding *binding;
};

struct rdma_listener {
	struct xport_listener base;
	struct rdma_event_channel *events;
	struct rdma_cm_id *id;
	GPtrArray *pending; /* struct rdma_conn * */
	/*
	 * With authentication: the handshake's TCP socket, on the same port
	 * number, and the gate its streams go through.
	 */
	int auth_fd;
	struct xport_auth_gate *gate;
};

static const struct xport_conn_ops rdma_conn_ops;
static const struct xport_listener_ops rdma_listener_ops;

static struct rdma_conn *to_rconn(struct xport_conn *conn)
{
	return container_of(conn, struct rdma_conn, base);
}

static struct rdma_listener *to_rlistener(struct xport_listener *l)
{
	return container_of(l, struct rdma_listener, base);
}

static int set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* Waits for the next event on a non-blocking event channel. */
static int next_cm_event(struct rdma_event_channel *ec, int64_t deadline,
			 struct rdma_cm_event **ret_event)
{
	for (;;) {
		struct pollfd pfd = { .fd = ec->fd, .events = POLLIN };
		int r;

		if (rdma_get_cm_event(ec, ret_event) == 0)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		r = poll(&pfd, 1, xport_ms_until(deadline));
		if (r == 0)
			return -ETIMEDOUT;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* ---- per-channel resources ---- */

static int channel_alloc_buffers(struct rdma_conn *c, struct rdma_channel *ch)
{
	const struct xport_opts *o = &c->base.opts;
	size_t recv_bytes = (size_t)o->recv_depth * o->max_msg;

	ch->slots = g_new0(struct send_slot, o->send_depth);
	ch->recv_buf = g_malloc0(recv_bytes);
	ch->recv_mr = ibv_reg_mr(c->pd, ch->recv_buf, recv_bytes,
				 IBV_ACCESS_LOCAL_WRITE);
	if (!ch->recv_mr)
		return -errno;
	return 0;
}

static int channel_post_recv(struct rdma_conn *c, struct rdma_channel *ch,
			     unsigned index)
{
	uint32_t max_msg = c->base.opts.max_msg;
	struct ibv_sge sge = {
		.addr = (uintptr_t)(ch->recv_buf + (size_t)index * max_msg),
		.length = max_msg,
		.lkey = ch->recv_mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = RECV_WR_FLAG | index, .sg_list = &sge, .num_sge = 1,
	};
	struct ibv_recv_wr *bad;
	int r = ibv_post_recv(ch->id->qp, &wr, &bad);

	return r ? -r : 0;
}

static int channel_create_qp(struct rdma_conn *c, struct rdma_channel *ch)
{
	const struct xport_opts *o = &c->base.opts;
	struct ibv_qp_init_attr attr = {
		.send_cq = ch->cq,
		.recv_cq = ch->cq,
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = o->send_depth,
			.max_recv_wr = o->recv_depth,
			.max_send_sge = c->max_sge,
			.max_recv_sge = 1,
			.max_inline_data = 64,
		},
	};
	uint8_t timeout = ACK_TIMEOUT_EXP;
	int r;

	ch->cq = ibv_create_cq(c->verbs, (int)(o->send_depth + o->recv_depth),
			       ch, c->comp, 0);
	if (!ch->cq)
		return -errno;
	attr.send_cq = attr.recv_cq = ch->cq;
	if (rdma_create_qp(ch->id, c->pd, &attr)) {
		/* Some devices have no inline data at all. */
		attr.cap.max_inline_data = 0;
		if (rdma_create_qp(ch->id, c->pd, &attr))
			return -errno;
	}
	c->max_inline = attr.cap.max_inline_data;
	/* Best effort: older kernels keep their default ack timeout. */
	rdma_set_option(ch->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			&timeout, sizeof(timeout));
	r = channel_alloc_buffers(c, ch);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < o->recv_depth; i++) {
		r = channel_post_recv(c, ch, i);
		if (r < 0)
			return r;
	}
	return 0;
}

static void channel_destroy(struct rdma_channel *ch)
{
	if (ch->id) {
		if (ch->id->qp)
			rdma_destroy_qp(ch->id);
		rdma_destroy_id(ch->id);
	}
	if (ch->cq)
		ibv_destroy_cq(ch->cq);
	if (ch->recv_mr)
		ibv_dereg_mr(ch->recv_mr);
	if (ch->bounce_mr)
		ibv_dereg_mr(ch->bounce_mr);
	g_free(ch->recv_buf);
	g_free(ch->bounce_buf);
	g_free(ch->slots);
	memset(ch, 0, sizeof(*ch));
}

/* ---- connection object ---- */

static struct rdma_conn *conn_new(const struct xport_opts *opts,
				  unsigned channels)
{
	struct rdma_conn *c = g_new0(struct rdma_conn, 1);
	struct xport_opts o = *opts;

	o.channels = channels;
	xport_conn_init(&c->base, &rdma_conn_ops, &o, XPORT_KIND_RDMA);
	c->fifo_cap = channels * (o.send_depth + o.recv_depth);
	c->fifo = g_new0(struct fifo_entry, c->fifo_cap);
	c->handed = g_new0(uint32_t, channels * o.recv_depth);
	c->base.fd = -1;
	return c;
}

/* PD, completion channel and limits, from the first channel's device. */
static int conn_bind_device(struct rdma_conn *c, struct ibv_context *verbs)
{
	struct ibv_device_attr attr;

	if (c->verbs)
		return c->verbs == verbs ? 0 : -EXDEV;
	if (ibv_query_device(verbs, &attr))
		return -errno;
	c->verbs = verbs;
	c->max_sge = MIN((unsigned)attr.max_sge, XPORT_MAX_SGE);
	c->pd = ibv_alloc_pd(verbs);
	if (!c->pd)
		return -errno;
	c->comp = ibv_create_comp_channel(verbs);
	if (!c->comp)
		return -errno;
	return set_nonblock(c->comp->fd);
}

static void conn_param_init(const struct rdma_conn *c,
			    struct rdma_conn_param *param, const void *priv,
			    uint8_t priv_len)
{
	struct ibv_device_attr attr;
	int rd = 1, init = 1;

	if (ibv_query_device(c->verbs, &attr) == 0) {
		rd = MIN(attr.max_qp_rd_atom, MAX_RD_ATOMIC);
		init = MIN(attr.max_qp_init_rd_atom, MAX_RD_ATOMIC);
	}
	*param = (struct rdma_conn_param){
		.private_data = priv,
		.private_data_len = priv_len,
		.responder_resources = (uint8_t)MAX(rd, 1),
		.initiator_depth = (uint8_t)MAX(init, 1),
		.retry_count = 7,
		.rnr_retry_count = 7, /* infinite: a busy receiver is not an error */
	};
}

static void conn_free(struct rdma_conn *c)
{
	for (unsigned i = 0; i < c->base.channels; i++)
		if (c->ch[i].established && c->ch[i].id)
			rdma_disconnect(c->ch[i].id);
	xport_conn_fini(&c->base);
	for (unsigned i = 0; i < c->base.channels; i++)
		channel_destroy(&c->ch[i]);
	if (c->comp)
		ibv_destroy_comp_channel(c->comp);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->events)
		rdma_destroy_event_channel(c->events);
	if (c->base.fd >= 0)
		close(c->base.fd);
	g_free(c->fifo);
	g_free(c->handed);
	g_free(c);
}

static void rdma_conn_close(struct xport_conn *conn)
{
	conn_free(to_rconn(conn));
}

/* One pollable fd for the caller: completions and connection events. */
static int conn_make_pollable(struct rdma_conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int r;

	c->base.fd = epoll_create1(EPOLL_CLOEXEC);
	if (c->base.fd < 0)
		return -errno;
	r = set_nonblock(c->events->fd);
	if (r < 0)
		return r;
	if (epoll_ctl(c->base.fd, EPOLL_CTL_ADD, c->comp->fd, &ev) < 0 ||
	    epoll_ctl(c->base.fd, EPOLL_CTL_ADD, c->events->fd, &ev) < 0)
		return -errno;
	return 0;
}

/* ---- client ---- */

static int resolve_channel(struct rdma_conn *c, struct rdma_channel *ch,
			   struct addrinfo *dst, int64_t deadline)
{
	struct rdma_cm_event *ev;
	int r;

	if (rdma_create_id(c->events, &ch->id, ch, RDMA_PS_TCP))
		return -errno;
	if (rdma_resolve_addr(ch->id, NULL, dst->ai_addr, 2000))
		return -errno;
	r = next_cm_event(c->events, deadline, &ev);
	if (r < 0)
		return r;
	r = ev->event == RDMA_CM_EVENT_ADDR_RESOLVED ? 0 : -EHOSTUNREACH;
	rdma_ack_cm_event(ev);
	if (r < 0)
		return r;
	r = conn_bind_device(c, ch->id->verbs);
	if (r < 0)
		return r;
	if (rdma_resolve_route(ch->id, 2000))
		return -errno;
	r = next_cm_event(c->events, deadline, &ev);
	if (r < 0)
		return r;
	r = ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED ? 0 : -EHOSTUNREACH;
	rdma_ack_cm_event(ev);
	return r;
}

static int welcome_from_event(const struct rdma_cm_event *ev, uint32_t *ret_max_msg)
{
	struct xport_welcome w;
	int r = xport_welcome_decode(ev->param.conn.private_data,
				     ev->param.conn.private_data_len, &w);

	if (r < 0)
		return -EPROTO;
	if (w.status)
		return -(int)w.status;
	*ret_max_msg = w.max_msg;
	return 0;
}

static int connect_channel(struct rdma_conn *c, unsigned index,
			   struct addrinfo *dst, int64_t deadline)
{
	struct rdma_channel *ch = &c->ch[index];
	struct xport_hello hello = {
		.channel = (uint16_t)index,
		.nchannels = (uint16_t)c->base.channels,
		.max_msg = c->base.opts.max_msg,
		.recv_depth = c->base.opts.recv_depth,
		.token = c->token,
	};
	uint8_t priv[XPORT_BOUND_HELLO_SIZE];
	uint8_t priv_len = XPORT_HELLO_SIZE;
	struct rdma_conn_param param;
	struct rdma_cm_event *ev;
	uint32_t peer_max_msg = 0;
	int r;

	r = resolve_channel(c, ch, dst, deadline);
	if (r < 0)
		return r;
	r = channel_create_qp(c, ch);
	if (r < 0)
		return r;
	if (c->binding) {
		/* Bound to the handshake, this address and this QP: a copy is no use elsewhere. */
		hello.flags = XPORT_HELLO_F_BOUND;
		r = xport_auth_rdma_hello(c->binding, &hello, rdma_get_local_addr(ch->id),
					  ch->id->qp->qp_num, priv);
		if (r < 0)
			return r;
		priv_len = XPORT_BOUND_HELLO_SIZE;
	} else {
		xport_hello_encode(&hello, priv);
	}
	conn_param_init(c, &param, priv, priv_len);
	if (rdma_connect(ch->id, &param))
		return -errno;
	r = next_cm_event(c->events, deadline, &ev);
	if (r < 0)
		return r;
	switch (ev->event) {
	case RDMA_CM_EVENT_ESTABLISHED:
		r = welcome_from_event(ev, &peer_max_msg);
		break;
	case RDMA_CM_EVENT_REJECTED:
		r = welcome_from_event(ev, &peer_max_msg);
		if (r == 0 || r == -EPROTO)
			r = -ECONNREFUSED;
		break;
	default:
		r = -ECONNREFUSED;
	}
	rdma_ack_cm_event(ev);
	if (r < 0)
		return r;
	ch->established = true;
	if (index > 0 && peer_max_msg != c->base.peer_max_msg)
		return -EPROTO;
	c->base.peer_max_msg = peer_max_msg;
	return 0;
}

int xport_rdma_connect(const struct xport_opts *opts, const char *host,
		       const char *port, struct xport_conn **ret)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *dst = NULL;
	int64_t deadline = xport_deadline_after(opts->timeout_ms);
	struct rdma_conn *c;
	int r;

	struct xport_binding b;
	struct xport_hello hello = {
		.nchannels = (uint16_t)opts->channels,
		.max_msg = opts->max_msg,
		.recv_depth = opts->recv_depth,
		.token = xport_random_u64(),
	};

	r = getaddrinfo(host, port, &hints, &dst);
	if (r)
		return r == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	/* With authentication, the handshake (over TCP) before any QP. */
	if (opts->auth) {
		r = xport_auth_handshake(opts, host, port, &hello, deadline, &b);
		if (r < 0) {
			freeaddrinfo(dst);
			return r;
		}
	}
	c = conn_new(opts, opts->channels);
	c->token = hello.token;
	c->binding = opts->auth ? &b : NULL;
	c->events = rdma_create_event_channel();
	if (!c->events) {
		r = -errno;
		goto out_free;
	}
	r = set_nonblock(c->events->fd);
	for (unsigned i = 0; r == 0 && i < c->base.channels; i++)
		r = connect_channel(c, i, dst, deadline);
	if (r == 0)
		r = conn_make_pollable(c);
	c->binding = NULL;
	gnutls_memset(&b, 0, sizeof(b));
	if (r < 0)
		goto out_free;
	freeaddrinfo(dst);
	*ret = &c->base;
	return 0;

out_free:
	freeaddrinfo(dst);
	conn_free(c);
	return r;
}

/* ---- server ---- */

/* Who was refused and why, for the listener's owner to log. */
static void tell_refused(const struct rdma_listener *l, const struct sockaddr *peer,
			 socklen_t len, int err, const char *reason)
{
	if (l->base.opts.on_refused)
		l->base.opts.on_refused(l->base.opts.refused_opaque, peer, len, err, reason);
}

static int bind_and_listen(struct rdma_listener *l, const char *host, const char *port)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE,
	};
	struct addrinfo *local = NULL;
	int r = getaddrinfo(host && *host ? host : NULL, port, &hints, &local);

	if (r)
		return r == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
	r = 0;
	if (rdma_create_id(l->events, &l->id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l->id, local->ai_addr) || rdma_listen(l->id, 64))
		r = -errno;
	freeaddrinfo(local);
	return r;
}

/*
 * The authentication handshake's TCP socket first (on port 0 the kernel
 * picks), then rdma_cm on the same number; "any port" tries again when
 * rdma_cm has that one taken.
 */
static int listen_with_auth(struct rdma_listener *l, const char *host, const char *port)
{
	int r = -EADDRINUSE;

	for (int tries = 0; r == -EADDRINUSE && tries < PORT_TRIES; tries++) {
		char bound[16];
		int tcp_port;

		closep(&l->auth_fd);
		if (l->id) {
			rdma_destroy_id(l->id);
			l->id = NULL;
		}
		r = xport_sock_listen(host, port, &l->auth_fd, &tcp_port);
		if (r < 0)
			return r;
		snprintf(bound, sizeof(bound), "%d", tcp_port);
		r = bind_and_listen(l, host, bound);
		if (strcmp(port, "0") != 0)
			break;
	}
	if (r < 0)
		return r;
	return xport_auth_gate_new(&l->base.opts, false, &l->gate);
}

int xport_rdma_listen(const struct xport_opts *opts, const char *host,
		      const char *port, struct xport_listener **ret)
{
	struct rdma_listener *l;
	int r;

	l = g_new0(struct rdma_listener, 1);
	l->base.ops = &rdma_listener_ops;
	l->base.opts = *opts;
	l->auth_fd = -1;
	l->pending = g_ptr_array_new();
	l->events = rdma_create_event_channel();
	if (!l->events) {
		r = -errno;
		goto out_close;
	}
	r = set_nonblock(l->events->fd);
	if (r < 0)
		goto out_close;
	r = opts->auth ? listen_with_auth(l, host, port) : bind_and_listen(l, host, port);
	if (r < 0)
		goto out_close;
	l->base.fd = l->events->fd;
	l->base.port = ntohs(rdma_get_src_port(l->id));
	*ret = &l->base;
	return 0;

out_close:
	l->base.ops->close(&l->base);
	return r;
}

static void reject_request(const struct rdma_listener *l, struct rdma_cm_id *id, int err,
			   const char *reason)
{
	struct xport_welcome w = { .status = (uint16_t)-err };
	uint8_t priv[XPORT_WELCOME_SIZE];
	struct sockaddr *peer = rdma_get_peer_addr(id);

	tell_refused(l, peer,
		     !peer ? 0 : peer->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
							     : sizeof(struct sockaddr_in),
		     err, reason);
	xport_welcome_encode(&w, priv);
	rdma_reject(id, priv, sizeof(priv));
}

static struct rdma_conn *pending_find(struct rdma_listener *l, uint64_t token)
{
	for (guint i = 0; i < l->pending->len; i++) {
		struct rdma_conn *c = g_ptr_array_index(l->pending, i);

		if (c->token == token)
			return c;
	}
	return NULL;
}

static void pending_drop(struct rdma_listener *l, struct rdma_conn *c)
{
	g_ptr_array_remove(l->pending, c);
	conn_free(c);
}

/*
 * The request's HELLO; with authentication it must be bound to a handshake
 * the gate holds a key for, and to the requester's address and QP.
 */
static int read_request(struct rdma_listener *l, const struct rdma_cm_event *ev,
			struct xport_hello *ret, const char **ret_reason)
{
	const void *priv = ev->param.conn.private_data;
	uint8_t len = ev->param.conn.private_data_len;
	uint8_t tag[XPORT_TAG_SIZE];
	int r;

	if (l->gate)
		return xport_auth_gate_check_rdma(l->gate, priv, len, rdma_get_peer_addr(ev->id),
						  ev->param.conn.qp_num, ret, ret_reason);
	r = xport_hello_decode(priv, len, ret);
	if (r < 0 && xport_bound_hello_decode(priv, len, ret, tag) == 0) {
		*ret_reason = "the peer authenticates, and this side has no credentials";
		return -EPROTONOSUPPORT;
	}
	return r;
}

/* A channel of a connection asks to join: set it up and accept it. */
static int on_connect_request(struct rdma_listener *l, struct rdma_cm_event *ev,
			      const char **ret_reason)
{
	struct rdma_cm_id *id = ev->id;
	struct xport_welcome w = { .max_msg = l->base.opts.max_msg };
	uint8_t priv[XPORT_WELCOME_SIZE];
	struct rdma_conn_param param;
	struct xport_hello hello;
	struct rdma_channel *ch;
	struct rdma_conn *c;
	int r;

	r = read_request(l, ev, &hello, ret_reason);
	if (r < 0)
		return r;
	c = pending_find(l, hello.token);
	if (!c) {
		if (hello.channel != 0 || l->pending->len >= MAX_PENDING_CONNS)
			return -ECONNREFUSED;
		c = conn_new(&l->base.opts, hello.nchannels);
		c->token = hello.token;
		c->base.peer_max_msg = hello.max_msg;
		g_ptr_array_add(l->pending, c);
	}
	if (hello.nchannels != c->base.channels || c->ch[hello.channel].id ||
	    hello.max_msg != c->base.peer_max_msg)
		return -EPROTO;
	ch = &c->ch[hello.channel];
	r = conn_bind_device(c, id->verbs);
	if (r < 0)
		goto out_drop;
	ch->id = id;
	id->context = c;
	r = channel_create_qp(c, ch);
	if (r < 0)
		goto out_detach;
	xport_welcome_encode(&w, priv);
	conn_param_init(c, &param, priv, sizeof(priv));
	if (rdma_accept(id, &param)) {
		r = -errno;
		goto out_detach;
	}
	return 0;

out_detach:
	/* The caller rejects and destroys the id once its event is acked. */
	if (id->qp)
		rdma_destroy_qp(id);
	id->context = NULL;
	ch->id = NULL;
out_drop:
	pending_drop(l, c);
	return r;
}

/* All channels up: hand the connection its own event channel. */
static int finish_conn(struct rdma_listener *l, struct rdma_conn *c)
{
	g_ptr_array_remove(l->pending, c);
	/* Whole: the handshake's key admits no further channel. */
	if (l->gate)
		xport_auth_gate_forget(l->gate, c->token);
	c->events = rdma_create_event_channel();
	if (!c->events)
		return -errno;
	for (unsigned i = 0; i < c->base.channels; i++)
		if (rdma_migrate_id(c->ch[i].id, c->events))
			return -errno;
	return conn_make_pollable(c);
}

/* Authentication streams on the TCP socket go to the gate. */
static void accept_auth(struct rdma_listener *l)
{
	for (;;) {
		int fd = accept4(l->auth_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0 && errno == EINTR)
			continue;
		if (fd < 0)
			return; /* EAGAIN, or that one connection's error */
		xport_auth_gate_add(l->gate, fd);
	}
}

static int64_t earlier(int64_t a, int64_t b)
{
	if (a < 0)
		return b;
	return b < 0 ? a : MIN(a, b);
}

/* The next CM event; with authentication, the handshakes move meanwhile. */
static int listener_next_event(struct rdma_listener *l, int64_t deadline,
			       struct rdma_cm_event **ret_event)
{
	if (!l->gate)
		return next_cm_event(l->events, deadline, ret_event);
	for (;;) {
		struct pollfd pfds[2 + XPORT_AUTH_GATE_MAX_SOCKETS] = {
			{ .fd = l->events->fd, .events = POLLIN },
			{ .fd = l->auth_fd, .events = POLLIN },
		};
		unsigned n;
		int r;

		if (rdma_get_cm_event(l->events, ret_event) == 0)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		n = xport_auth_gate_pollfds(l->gate, pfds + 2, XPORT_AUTH_GATE_MAX_SOCKETS);
		r = poll(pfds, 2 + n,
			 xport_ms_until(earlier(deadline, xport_auth_gate_deadline(l->gate))));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r == 0 && deadline >= 0 && xport_now_ms() >= deadline)
			return -ETIMEDOUT;
		xport_auth_gate_step(l->gate, pfds + 2, r > 0 ? n : 0);
		if (r > 0 && pfds[1].revents)
			accept_auth(l);
	}
}

static int rdma_accept_conn(struct xport_listener *base, int timeout_ms,
			    struct xport_conn **ret_conn)
{
	struct rdma_listener *l = to_rlistener(base);
	int64_t deadline = xport_deadline_after(timeout_ms);

	for (;;) {
		const char *reason = NULL;
		struct rdma_cm_event *ev;
		struct rdma_conn *c;
		int r = listener_next_event(l, deadline, &ev);

		if (r < 0)
			return r;
		c = ev->id->context;
		switch (ev->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			r = on_connect_request(l, ev, &reason);
			if (r < 0) {
				struct rdma_cm_id *id = ev->id;

				reject_request(l, id, r, reason);
				rdma_ack_cm_event(ev);
				rdma_destroy_id(id);
				continue;
			}
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			if (c) {
				for (unsigned i = 0; i < c->base.channels; i++)
					if (c->ch[i].id == ev->id)
						c->ch[i].established = true;
				c->established++;
			}
			break;
		default:
			/* A half-made connection fell apart: forget it. */
			if (c && pending_find(l, c->token) == c) {
				rdma_ack_cm_event(ev);
				pending_drop(l, c);
				continue;
			}
			break;
		}
		rdma_ack_cm_event(ev);
		if (c && c->established == c->base.channels &&
		    pending_find(l, c->token) == c) {
			r = finish_conn(l, c);
			if (r < 0) {
				conn_free(c);
				return r;
			}
			*ret_conn = &c->base;
			return 0;
		}
	}
}

static void rdma_listener_close(struct xport_listener *base)
{
	struct rdma_listener *l = to_rlistener(base);

	while (l->pending->len)
		pending_drop(l, g_ptr_array_index(l->pending, 0));
	g_ptr_array_free(l->pending, TRUE);
	if (l->id)
		rdma_destroy_id(l->id);
	if (l->events)
		rdma_destroy_event_channel(l->events);
	xport_auth_gate_free(l->gate);
	closep(&l->auth_fd);
	g_free(l);
}

static const struct xport_listener_ops rdma_listener_ops = {
	.accept = rdma_accept_conn,
	.close = rdma_listener_close,
};

/* ---- memory ---- */

static int rdma_mr_reg(struct xport_conn *conn, struct xport_mr *mr)
{
	struct rdma_conn *c = to_rconn(conn);
	/* Read-only mappings cannot be pinned for writing. */
	int access = mr->access & XPORT_ACCESS_LOCAL_READONLY ? 0 : IBV_ACCESS_LOCAL_WRITE;
	uint64_t iova = (uintptr_t)mr->addr & PAGE_OFFSET_MASK;
	struct ibv_mr *ibmr;

	if (mr->access & XPORT_ACCESS_REMOTE_WRITE)
		access |= IBV_ACCESS_REMOTE_WRITE;
	if (mr->access & XPORT_ACCESS_REMOTE_READ)
		access |= IBV_ACCESS_REMOTE_READ;
	ibmr = ibv_reg_mr_iova(c->pd, mr->addr, mr->len, iova, access);
	if (!ibmr)
		return -errno;
	mr->priv = ibmr;
	mr->key = ibmr->rkey;
	mr->base = iova;
	/* The device reaches the memory through the pinned mapping, never the file. */
	closep(&mr->file_fd);
	return 0;
}

static void rdma_mr_dereg(struct xport_mr *mr)
{
	ibv_dereg_mr(mr->priv);
}

/* ---- posting ---- */

static int channel_ring_doorbell(struct rdma_conn *c, struct rdma_channel *ch)
{
	struct ibv_send_wr *bad;
	int r;

	if (!ch->chain_head)
		return 0;
	r = ibv_post_send(ch->id->qp, ch->chain_head, &bad);
	ch->chain_head = ch->chain_tail = NULL;
	return r ? xport_conn_fail(&c->base, -r) : 0;
}

static int rdma_flush(struct xport_conn *conn)
{
	struct rdma_conn *c = to_rconn(conn);
	int r = 0;

	for (unsigned i = 0; i < conn->channels && r == 0; i++)
		r = channel_ring_doorbell(c, &c->ch[i]);
	return r;
}

static enum ibv_wr_opcode verbs_opcode(enum xport_op op)
{
	switch (op) {
	case XPORT_OP_WRITE: return IBV_WR_RDMA_WRITE;
	case XPORT_OP_WRITE_IMM: return IBV_WR_RDMA_WRITE_WITH_IMM;
	case XPORT_OP_READ: return IBV_WR_RDMA_READ;
	default: return IBV_WR_SEND;
	}
}

/* Takes the next slot of the ring and chains its work request. */
static int channel_queue(struct rdma_conn *c, struct rdma_channel *ch,
			 struct send_slot *tmpl, unsigned flags)
{
	unsigned depth = c->base.opts.send_depth;
	unsigned index = ch->head;
	struct send_slot *s = &ch->slots[index];
	bool signal;

	*s = *tmpl;
	s->wr.sg_list = s->sge;
	s->wr.wr_id = index;
	s->wr.next = NULL;
	s->user_signal = flags & XPORT_F_SIGNAL;
	ch->head = (index + 1) % depth;
	ch->outstanding++;
	/* The slot that fills the ring must be signalled, or nothing frees it. */
	signal = s->user_signal || ++ch->since_signal >= c->base.opts.signal_interval ||
		 ch->outstanding == depth;
	if (signal) {
		s->wr.send_flags |= IBV_SEND_SIGNALED;
		ch->since_signal = 0;
	}
	if (ch->chain_tail)
		ch->chain_tail->next = &s->wr;
	else
		ch->chain_head = &s->wr;
	ch->chain_tail = &s->wr;
	if (flags & XPORT_F_MORE)
		return 0;
	return channel_ring_doorbell(c, ch);
}

static int rdma_post(struct xport_conn *conn, const struct xport_wr *wr,
		     uint32_t total_len)
{
	struct rdma_conn *c = to_rconn(conn);
	struct rdma_channel *ch = &c->ch[wr->channel];
	struct send_slot s = { .bounce = -1 };

	if (wr->nsg > c->max_sge)
		return -EINVAL;
	if (ch->outstanding == conn->opts.send_depth)
		return -EAGAIN;
	for (unsigned i = 0; i < wr->nsg; i++) {
		const struct xport_sge *g = &wr->sg[i];
		const struct ibv_mr *ibmr = g->mr->priv;

		s.sge[i] = (struct ibv_sge){
			.addr = g->mr->base + g->offset,
			.length = g->len,
			.lkey = ibmr->lkey,
		};
	}
	s.wr.num_sge = (int)wr->nsg;
	s.wr.opcode = verbs_opcode(wr->op);
	if (wr->op != XPORT_OP_SEND) {
		s.wr.wr.rdma.remote_addr = wr->remote->base + wr->remote_offset;
		s.wr.wr.rdma.rkey = wr->remote->key;
	}
	if (wr->op == XPORT_OP_WRITE_IMM)
		s.wr.imm_data = htonl(wr->imm);
	s.cookie = wr->cookie;
	s.op = wr->op;
	s.len = total_len;
	return channel_queue(c, ch, &s, wr->flags);
}

/* Bounce buffers for send_copy come to life on first use. */
static int channel_bounce_get(struct rdma_conn *c, struct rdma_channel *ch)
{
	size_t bytes;

	if (!ch->bounce_buf) {
		c->nbounce = MIN(c->base.opts.send_depth, MAX_BOUNCE);
		bytes = (size_t)c->nbounce * c->base.peer_max_msg;
		ch->bounce_buf = g_malloc0(bytes);
		ch->bounce_mr = ibv_reg_mr(c->pd, ch->bounce_buf, bytes,
					   IBV_ACCESS_LOCAL_WRITE);
		if (!ch->bounce_mr) {
			g_free(g_steal_pointer(&ch->bounce_buf));
			return -errno;
		}
	}
	for (unsigned i = 0; i < c->nbounce; i++) {
		if (!(ch->bounce_busy & (1ull << i))) {
			ch->bounce_busy |= 1ull << i;
			return (int)i;
		}
	}
	return -EAGAIN;
}

static int rdma_send_copy(struct xport_conn *conn, unsigned channel,
			  const void *buf, size_t len, uint64_t cookie,
			  unsigned flags)
{
	struct rdma_conn *c = to_rconn(conn);
	struct rdma_channel *ch = &c->ch[channel];
	struct send_slot s = { .cookie = cookie, .op = XPORT_OP_SEND };
	uint8_t *dst;
	int b;

	if (ch->outstanding == conn->opts.send_depth)
		return -EAGAIN;
	s.len = (uint32_t)len;
	s.wr.opcode = IBV_WR_SEND;
	if (len <= c->max_inline) {
		/* Inline: the device copies at post time, so buf may be on the stack. */
		s.bounce = -1;
		s.sge[0] = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = (uint32_t)len };
		s.wr.send_flags = IBV_SEND_INLINE;
		s.wr.num_sge = len ? 1 : 0;
		/* Inline data is read at ibv_post_send time: never defer it. */
		return channel_queue(c, ch, &s, flags & ~XPORT_F_MORE);
	}
	b = channel_bounce_get(c, ch);
	if (b < 0)
		return b;
	dst = ch->bounce_buf + (size_t)b * conn->peer_max_msg;
	memcpy(dst, buf, len);
	s.bounce = b;
	s.sge[0] = (struct ibv_sge){
		.addr = (uintptr_t)dst, .length = (uint32_t)len, .lkey = ch->bounce_mr->lkey,
	};
	s.wr.num_sge = 1;
	return channel_queue(c, ch, &s, flags);
}

/* ---- completions ---- */

static int wc_errno(enum ibv_wc_status status)
{
	switch (status) {
	case IBV_WC_SUCCESS: return 0;
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_LOC_ACCESS_ERR: return -EACCES;
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_REM_OP_ERR: return -EPROTO;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR: return -ECONNRESET;
	case IBV_WC_WR_FLUSH_ERR: return -ECANCELED;
	case IBV_WC_LOC_LEN_ERR: return -EMSGSIZE;
	default: return -EIO;
	}
}

static struct fifo_entry *fifo_push(struct rdma_conn *c)
{
	struct fifo_entry *e = &c->fifo[(c->fifo_head + c->fifo_count) % c->fifo_cap];

	c->fifo_count++;
	e->recv_index = -1;
	return e;
}

static void retire_send(struct rdma_conn *c, unsigned chi, const struct ibv_wc *wc)
{
	struct rdma_channel *ch = &c->ch[chi];
	unsigned depth = c->base.opts.send_depth;
	unsigned index = (unsigned)wc->wr_id;
	int status = wc_errno(wc->status);

	/* Stale (already retired) slots show up as flushes after an error. */
	if (index >= depth || (index + depth - ch->tail) % depth >= ch->outstanding)
		return;
	for (;;) {
		unsigned t = ch->tail;
		struct send_slot *s = &ch->slots[t];

		if (s->bounce >= 0)
			ch->bounce_busy &= ~(1ull << s->bounce);
		ch->tail = (t + 1) % depth;
		ch->outstanding--;
		if (t == index) {
			if (s->user_signal) {
				struct fifo_entry *e = fifo_push(c);

				e->comp = (struct xport_completion){
					.op = s->op, .channel = chi, .status = status,
					.cookie = s->cookie, .len = s->len,
				};
			}
			break;
		}
	}
	if (status)
		xport_conn_fail(&c->base, status);
}

static void on_recv(struct rdma_conn *c, unsigned chi, const struct ibv_wc *wc)
{
	unsigned index = (unsigned)(wc->wr_id & ~RECV_WR_FLAG);
	int status = wc_errno(wc->status);
	struct fifo_entry *e;

	if (status) {
		/* Flushed receives carry no data; the error is the news. */
		xport_conn_fail(&c->base, status == -ECANCELED ? -ECONNRESET : status);
		return;
	}
	if (index >= c->base.opts.recv_depth)
		return;
	e = fifo_push(c);
	e->recv_index = (int)index;
	e->comp = (struct xport_completion){
		.channel = chi, .len = wc->byte_len, .cookie = 0,
	};
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		e->comp.op = XPORT_OP_RECV_IMM;
		e->comp.imm = ntohl(wc->imm_data);
	} else {
		e->comp.op = XPORT_OP_RECV;
		e->comp.data = c->ch[chi].recv_buf + (size_t)index * c->base.opts.max_msg;
	}
}

/* Moves finished work from the CQs into the fifo while it has room. */
static void drain_cqs(struct rdma_conn *c)
{
	for (unsigned chi = 0; chi < c->base.channels; chi++) {
		struct ibv_wc wc[POLL_BATCH];
		int n;

		do {
			unsigned room = c->fifo_cap - c->fifo_count;

			if (room == 0)
				return;
			n = ibv_poll_cq(c->ch[chi].cq, (int)MIN(room, POLL_BATCH), wc);
			if (n < 0) {
				xport_conn_fail(&c->base, -EIO);
				return;
			}
			for (int i = 0; i < n; i++) {
				if (wc[i].wr_id & RECV_WR_FLAG)
					on_recv(c, chi, &wc[i]);
				else
					retire_send(c, chi, &wc[i]);
			}
		} while (n == POLL_BATCH);
	}
}

static void drain_cm_events(struct rdma_conn *c)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(c->events, &ev) == 0) {
		switch (ev->event) {
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			for (unsigned i = 0; i < c->base.channels; i++)
				if (c->ch[i].id == ev->id)
					c->ch[i].established = false;
			xport_conn_fail(&c->base, -ECONNRESET);
			break;
		default:
			break;
		}
		rdma_ack_cm_event(ev);
	}
}

static void repost_handed(struct rdma_conn *c)
{
	for (unsigned i = 0; i < c->handed_count; i++) {
		unsigned chi = c->handed[i] >> 16, index = c->handed[i] & 0xffff;

		if (!c->base.error && channel_post_recv(c, &c->ch[chi], index) < 0)
			xport_conn_fail(&c->base, -EIO);
	}
	c->handed_count = 0;
}

static int rdma_poll(struct xport_conn *conn, struct xport_completion *comps,
		     unsigned max)
{
	struct rdma_conn *c = to_rconn(conn);
	unsigned n = 0;

	repost_handed(c);
	if (!conn->error)
		rdma_flush(conn);
	drain_cqs(c);
	drain_cm_events(c);
	while (n < max && c->fifo_count) {
		struct fifo_entry *e = &c->fifo[c->fifo_head];

		comps[n++] = e->comp;
		if (e->recv_index >= 0)
			c->handed[c->handed_count++] =
				e->comp.channel << 16 | (unsigned)e->recv_index;
		c->fifo_head = (c->fifo_head + 1) % c->fifo_cap;
		c->fifo_count--;
	}
	if (n)
		return (int)n;
	return conn->error;
}

static void ack_cq_events(struct rdma_conn *c)
{
	struct ibv_cq *cq;
	void *ctx;

	while (ibv_get_cq_event(c->comp, &cq, &ctx) == 0)
		ibv_ack_cq_events(cq, 1);
}

static int rdma_wait(struct xport_conn *conn, int timeout_ms)
{
	struct rdma_conn *c = to_rconn(conn);
	struct epoll_event ev[2];
	int r;

	for (unsigned i = 0; i < conn->channels; i++)
		if (ibv_req_notify_cq(c->ch[i].cq, 0))
			return xport_conn_fail(conn, -EIO);
	/* Work that finished before the CQs were armed raises no event. */
	drain_cqs(c);
	drain_cm_events(c);
	if (c->fifo_count || conn->error)
		return 0;
	r = epoll_wait(conn->fd, ev, 2, timeout_ms);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	ack_cq_events(c);
	drain_cm_events(c);
	return r == 0 ? -ETIMEDOUT : 0;
}

static const struct xport_conn_ops rdma_conn_ops = {
	.mr_reg = rdma_mr_reg,
	.mr_dereg = rdma_mr_dereg,
	.post = rdma_post,
	.send_copy = rdma_send_copy,
	.flush = rdma_flush,
	.poll = rdma_poll,
	.wait = rdma_wait,
	.close = rdma_conn_close,
};

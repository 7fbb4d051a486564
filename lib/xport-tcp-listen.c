// SPDX-License-Identifier: MIT
/*
 * The tcp listener: accepted sockets say HELLO (or go through the
 * authentication gate), the channels of one connection are grouped by
 * their token, and a complete group becomes a connection.
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
#include "xport-auth.h"

static const struct xport_listener_ops tcp_listener_ops;

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
	r = tcp_conn_create(&opts, g->fds, g->tls, &peer, &tc);
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

static const struct xport_listener_ops tcp_listener_ops = {
	.accept = tcp_accept,
	.close = tcp_listener_close,
};

// SPDX-License-Identifier: MIT
/*
 * The server's side of the authenticated setup (see xport-auth.h): every
 * socket a listener accepts goes through the gate before a byte of the
 * transport is taken from it.  The first byte tells a TLS handshake (an
 * authentication stream, or an encrypted tcp channel) from a plain HELLO (a
 * tcp channel that must then answer a challenge).  Each socket is one small
 * state machine moved by poll(2); a socket that stalls, lies or fails costs
 * only itself, and is refused with a reason.
 */
#include "xport-auth.h"

#include <errno.h>
#include <glib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"
#include "xport-internal.h"

#define GATE_MAX_KEYS 16     /* handshakes whose channels are awaited */
#define TLS_RECORD_TYPE_HANDSHAKE 0x16
#define HELLO_FIRST_BYTE 'V' /* "VXHI", little endian */

enum gate_state {
	GS_FIRST,     /* nothing read: TLS or a HELLO? */
	GS_HELLO,     /* plain: the HELLO */
	GS_TAG,       /* plain: challenge sent, the tag */
	GS_HANDSHAKE, /* TLS handshake */
	GS_INNER,     /* TLS: the bound HELLO record */
	GS_READY,     /* TLS authentication stream: sending READY */
};

struct gate_sock {
	int fd;
	struct sockaddr_storage peer; /* taken at once: a peer that resets is gone from the fd */
	socklen_t peer_len;
	int64_t deadline;
	enum gate_state state;
	short events;
	unsigned have;
	uint8_t buf[XPORT_BOUND_HELLO_SIZE];
	uint64_t nonce;
	struct xport_hello hello;
	struct xport_tls *tls;
	uint8_t ready[XPORT_BOUND_WELCOME_SIZE];
};

/* What an authentication stream left behind: the key its channels need. */
struct gate_key {
	struct xport_hello hello;
	uint8_t key[XPORT_KEY_SIZE];
	int64_t deadline;
};

struct xport_auth_gate {
	struct xport_opts opts; /* on_refused hears of every refusal */
	bool tcp_channels;
	GPtrArray *socks; /* struct gate_sock * */
	GPtrArray *keys;  /* struct gate_key * */
	GQueue through;   /* struct xport_auth_channel * */
};

/* GO: on with this socket; WAIT: it waits; DONE: it leaves quietly; <0: refuse it. */
#define GO 1
#define WAIT 0
#define DONE 2

static void sock_free(gpointer p)
{
	struct gate_sock *s = p;

	xport_tls_free(s->tls);
	closep(&s->fd);
	g_free(s);
}

static void key_free(gpointer p)
{
	struct gate_key *k = p;

	gnutls_memset(k->key, 0, sizeof(k->key));
	g_free(k);
}

int xport_auth_gate_new(const struct xport_opts *opts, bool tcp_channels,
			struct xport_auth_gate **ret)
{
	struct xport_auth_gate *g;

	if (!opts->auth || !xport_auth_is_server(opts->auth))
		return -EINVAL;
	g = g_new0(struct xport_auth_gate, 1);
	g->opts = *opts;
	g->tcp_channels = tcp_channels;
	g->socks = g_ptr_array_new_with_free_func(sock_free);
	g->keys = g_ptr_array_new_with_free_func(key_free);
	g_queue_init(&g->through);
	*ret = g;
	return 0;
}

static void channel_free(gpointer p)
{
	struct xport_auth_channel *c = p;

	xport_tls_free(c->tls);
	close(c->fd);
	g_free(c);
}

void xport_auth_gate_free(struct xport_auth_gate *g)
{
	if (!g)
		return;
	g_ptr_array_free(g->socks, TRUE);
	g_ptr_array_free(g->keys, TRUE);
	g_queue_clear_full(&g->through, channel_free);
	g_free(g);
}

static void tell(const struct xport_auth_gate *g, const struct sockaddr *peer, socklen_t len,
		 int err, const char *reason)
{
	if (g->opts.on_refused)
		g->opts.on_refused(g->opts.refused_opaque, peer, len, err, reason);
}

/* Best effort: a plain socket learns why from a WELCOME, a TLS one inside TLS. */
static void refuse(struct xport_auth_gate *g, struct gate_sock *s, int err, const char *reason)
{
	struct xport_welcome w = { .status = (uint16_t)-err };
	uint8_t buf[XPORT_WELCOME_SIZE];
	short events;

	tell(g, (struct sockaddr *)&s->peer, s->peer_len, err, reason);
	xport_welcome_encode(&w, buf);
	if (s->state == GS_HELLO || s->state == GS_TAG)
		(void)send(s->fd, buf, sizeof(buf), MSG_NOSIGNAL | MSG_DONTWAIT);
	else if (s->state == GS_INNER)
		(void)xport_tls_send(s->tls, buf, sizeof(buf), &events);
	g_ptr_array_remove_fast(g->socks, s);
}

void xport_auth_gate_add(struct xport_auth_gate *g, int fd)
{
	struct gate_sock *s;

	s = g_new0(struct gate_sock, 1);
	s->peer_len = sizeof(s->peer);
	if (getpeername(fd, (struct sockaddr *)&s->peer, &s->peer_len) < 0)
		s->peer_len = 0;
	if (g->socks->len >= XPORT_AUTH_GATE_MAX_SOCKETS) {
		tell(g, (struct sockaddr *)&s->peer, s->peer_len, -EBUSY,
		     "too many authentications under way");
		close(fd);
		g_free(s);
		return;
	}
	s->fd = fd;
	s->state = GS_FIRST;
	s->events = POLLIN;
	s->deadline = xport_deadline_after(g->opts.timeout_ms);
	g_ptr_array_add(g->socks, s);
}

static struct gate_key *key_find(struct xport_auth_gate *g, uint64_t token)
{
	for (guint i = 0; i < g->keys->len; i++) {
		struct gate_key *k = g_ptr_array_index(g->keys, i);

		if (k->hello.token == token)
			return k;
	}
	return NULL;
}

void xport_auth_gate_forget(struct xport_auth_gate *g, uint64_t token)
{
	struct gate_key *k = key_find(g, token);

	if (k)
		g_ptr_array_remove_fast(g->keys, k);
}

/*
 * The key a channel's hello names, if the channel says what its
 * handshake said (a replayed or stray HELLO names nothing or differs).
 */
static int channel_key(struct xport_auth_gate *g, const struct xport_hello *h,
		       struct gate_key **ret, const char **ret_reason)
{
	struct gate_key *k = key_find(g, h->token);

	if (!k) {
		*ret_reason = "the channel names no authenticated handshake";
		return -EKEYREJECTED;
	}
	if (h->nchannels != k->hello.nchannels || h->max_msg != k->hello.max_msg ||
	    h->recv_depth != k->hello.recv_depth ||
	    (h->flags & XPORT_HELLO_F_ENCRYPT) != (k->hello.flags & XPORT_HELLO_F_ENCRYPT) ||
	    (h->flags & XPORT_HELLO_F_AUTH)) {
		*ret_reason = "the channel contradicts its authenticated handshake";
		return -EINVAL;
	}
	*ret = k;
	return 0;
}

/* The socket and its session move on to the listener. */
static int admit(struct xport_auth_gate *g, struct gate_sock *s)
{
	struct xport_auth_channel *c = g_new0(struct xport_auth_channel, 1);

	c->fd = steal_fd(&s->fd);
	c->hello = s->hello;
	c->tls = g_steal_pointer(&s->tls);
	g_queue_push_tail(&g->through, c);
	return DONE;
}

/* Reads into s->buf up to want bytes: GO once there, WAIT, or -errno. */
static int fill(struct gate_sock *s, unsigned want)
{
	ssize_t n;

	if (s->tls)
		n = xport_tls_recv(s->tls, s->buf + s->have, want - s->have, &s->events);
	else
		n = recv(s->fd, s->buf + s->have, want - s->have, MSG_DONTWAIT);
	if (!s->tls && n < 0)
		n = (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? -EAGAIN : -errno;
	if (n == -EAGAIN) {
		s->events = s->tls ? s->events : POLLIN;
		return WAIT;
	}
	if (n <= 0)
		return n == 0 ? -ECONNRESET : (int)n;
	s->have += (unsigned)n;
	return s->have == want ? GO : WAIT;
}

/* ---- plain channels (tcp) ---- */

static int on_first(struct xport_auth_gate *g, struct gate_sock *s, const char **why)
{
	uint8_t b;
	ssize_t n = recv(s->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	int r;

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return WAIT;
	if (n <= 0)
		return n == 0 ? -ECONNRESET : -errno;
	if (b == TLS_RECORD_TYPE_HANDSHAKE) {
		r = xport_tls_new(g->opts.auth, s->fd, NULL, &s->tls);
		s->state = GS_HANDSHAKE;
		return r < 0 ? r : GO;
	}
	if (b == HELLO_FIRST_BYTE && g->tcp_channels) {
		s->state = GS_HELLO;
		return GO;
	}
	*why = g->tcp_channels ? "neither a TLS handshake nor a HELLO" : "not a TLS handshake";
	return -EPROTO;
}

static int on_hello(struct xport_auth_gate *g, struct gate_sock *s, const char **why)
{
	uint8_t chal[XPORT_CHALLENGE_SIZE];
	struct gate_key *k;
	int r = fill(s, XPORT_HELLO_SIZE);

	if (r != GO)
		return r;
	if (xport_hello_decode(s->buf, XPORT_HELLO_SIZE, &s->hello) < 0) {
		*why = "a malformed HELLO";
		return -EPROTO;
	}
	if (!(s->hello.flags & XPORT_HELLO_F_BOUND)) {
		*why = "the peer did not authenticate (a plain HELLO)";
		return -EACCES;
	}
	r = channel_key(g, &s->hello, &k, why);
	if (r < 0)
		return r;
	if (k->hello.flags & XPORT_HELLO_F_ENCRYPT) {
		*why = "a plain channel of an encrypted connection";
		return -EPROTO;
	}
	s->nonce = xport_random_u64();
	xport_challenge_encode(s->nonce, chal);
	/* A fresh socket's buffer always has room for 16 bytes. */
	if (send(s->fd, chal, sizeof(chal), MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof(chal))
		return -ECONNRESET;
	s->state = GS_TAG;
	s->have = 0;
	return GO;
}

static int on_tag(struct xport_auth_gate *g, struct gate_sock *s, const char **why)
{
	uint8_t nonce[8], want[XPORT_TAG_SIZE], hello[XPORT_HELLO_SIZE];
	struct gate_key *k;
	int r = fill(s, XPORT_TAG_SIZE);

	if (r != GO)
		return r;
	/* The handshake may have expired since the HELLO. */
	r = channel_key(g, &s->hello, &k, why);
	if (r < 0)
		return r;
	put_le64(nonce, s->nonce);
	xport_hello_encode(&s->hello, hello);
	r = xport_auth_tag(k->key, XPORT_TAG_TCP_PLAIN, nonce, sizeof(nonce), hello,
			   sizeof(hello), want);
	if (r < 0)
		return r;
	if (!xport_auth_tag_equal(want, s->buf)) {
		*why = "the channel's binding tag does not verify";
		return -EKEYREJECTED;
	}
	return admit(g, s);
}

/* ---- TLS streams ---- */

static int on_handshake(struct gate_sock *s, const char **why)
{
	int r = xport_tls_handshake(s->tls, &s->events, why);

	if (r == -EAGAIN)
		return WAIT;
	if (r < 0)
		return r;
	s->state = GS_INNER;
	s->have = 0;
	return GO;
}

/* An authentication stream's AUTH: keep its key, answer READY. */
static int on_auth(struct xport_auth_gate *g, struct gate_sock *s, const char **why)
{
	uint8_t keys[XPORT_PSK_MAX_KEYS][XPORT_KEY_SIZE], want[XPORT_TAG_SIZE];
	struct xport_welcome w = { .max_msg = g->opts.max_msg };
	struct gate_key *k = NULL;
	int n = xport_tls_binding_keys(s->tls, keys, XPORT_PSK_MAX_KEYS);

	for (int i = 0; i < n && !k; i++) {
		if (xport_auth_tag(keys[i], XPORT_TAG_AUTH, NULL, 0, s->buf, XPORT_HELLO_SIZE,
				   want) == 0 &&
		    xport_auth_tag_equal(want, s->buf + XPORT_HELLO_SIZE)) {
			k = g_new0(struct gate_key, 1);
			memcpy(k->key, keys[i], XPORT_KEY_SIZE);
		}
	}
	gnutls_memset(keys, 0, sizeof(keys));
	if (n < 0)
		return n;
	if (!k) {
		*why = "the handshake's binding tag does not verify (pre-shared keys differ?)";
		return -EKEYREJECTED;
	}
	k->hello = s->hello;
	k->deadline = xport_deadline_after(g->opts.timeout_ms);
	if (key_find(g, s->hello.token)) {
		key_free(k);
		*why = "a handshake's token used twice";
		return -EEXIST;
	}
	if (g->keys->len >= GATE_MAX_KEYS) {
		key_free(k);
		*why = "too many handshakes await their channels";
		return -EBUSY;
	}
	g_ptr_array_add(g->keys, k);
	xport_welcome_encode(&w, s->ready);
	xport_auth_tag(k->key, XPORT_TAG_READY, NULL, 0, s->ready, XPORT_WELCOME_SIZE,
		       s->ready + XPORT_WELCOME_SIZE);
	s->state = GS_READY;
	return GO;
}

/* An encrypted tcp channel: its tag covers its own session's exporter. */
static int on_tls_channel(struct xport_auth_gate *g, struct gate_sock *s, const char **why)
{
	uint8_t ctx[XPORT_CHANNEL_CTX_SIZE], want[XPORT_TAG_SIZE];
	struct gate_key *k;
	int r = channel_key(g, &s->hello, &k, why);

	if (r < 0)
		return r;
	if (!(s->hello.flags & XPORT_HELLO_F_ENCRYPT)) {
		*why = "a TLS channel of an unencrypted connection";
		return -EPROTO;
	}
	r = xport_auth_tls_ctx(s->tls, ctx);
	if (r == 0)
		r = xport_auth_tag(k->key, XPORT_TAG_TCP_TLS, ctx, sizeof(ctx), s->buf,
				   XPORT_HELLO_SIZE, want);
	if (r < 0)
		return r;
	if (!xport_auth_tag_equal(want, s->buf + XPORT_HELLO_SIZE)) {
		*why = "the channel's binding tag does not verify";
		return -EKEYREJECTED;
	}
	return admit(g, s);
}

static int on_inner(struct xport_auth_gate *g, struct gate_sock *s, const char **why)
{
	uint8_t tag[XPORT_TAG_SIZE];
	int r = fill(s, XPORT_BOUND_HELLO_SIZE);

	if (r != GO)
		return r;
	if (xport_bound_hello_decode(s->buf, XPORT_BOUND_HELLO_SIZE, &s->hello, tag) < 0) {
		*why = "a malformed HELLO inside TLS";
		return -EPROTO;
	}
	if (!(s->hello.flags & XPORT_HELLO_F_AUTH)) {
		if (!g->tcp_channels) {
			*why = "a channel HELLO on the authentication port";
			return -EPROTO;
		}
		return on_tls_channel(g, s, why);
	}
	if ((s->hello.flags & XPORT_HELLO_F_ENCRYPT) && !g->tcp_channels) {
		*why = "stream encryption is for tcp only";
		return -EPROTONOSUPPORT;
	}
	if (g->opts.encrypt && !(s->hello.flags & XPORT_HELLO_F_ENCRYPT)) {
		*why = "this side requires an encrypted stream (--tls-encrypt)";
		return -EPROTONOSUPPORT;
	}
	return on_auth(g, s, why);
}

static int on_ready(struct gate_sock *s)
{
	ssize_t n = xport_tls_send(s->tls, s->ready, sizeof(s->ready), &s->events);

	if (n == -EAGAIN)
		return WAIT;
	if (n < 0)
		return (int)n;
	/* The key stays; this stream is done (the client hangs up too). */
	return DONE;
}

/* Moves one socket as far as it goes; <0: refuse it (why may be NULL). */
static int advance(struct xport_auth_gate *g, struct gate_sock *s, const char **why)
{
	int r = GO;

	while (r == GO) {
		switch (s->state) {
		case GS_FIRST: r = on_first(g, s, why); break;
		case GS_HELLO: r = on_hello(g, s, why); break;
		case GS_TAG: r = on_tag(g, s, why); break;
		case GS_HANDSHAKE: r = on_handshake(s, why); break;
		case GS_INNER: r = on_inner(g, s, why); break;
		case GS_READY: r = on_ready(s); break;
		}
	}
	return r;
}

static void step_one(struct xport_auth_gate *g, struct gate_sock *s)
{
	const char *why = NULL;
	int r = advance(g, s, &why);

	if (r == WAIT)
		return;
	/* A hang-up before the first byte is no one to report (a port scan). */
	if (r == DONE || (s->state == GS_FIRST && r == -ECONNRESET && !why)) {
		g_ptr_array_remove_fast(g->socks, s);
		return;
	}
	if (!why && r == -ECONNRESET)
		why = "the peer hung up during the authentication";
	refuse(g, s, r, why);
}

static void expire(struct xport_auth_gate *g)
{
	int64_t now = xport_now_ms();

	for (guint i = g->socks->len; i-- > 0;) {
		struct gate_sock *s = g_ptr_array_index(g->socks, i);

		if (s->deadline >= 0 && s->deadline <= now)
			refuse(g, s, -ETIMEDOUT, "the authentication did not complete in time");
	}
	for (guint i = g->keys->len; i-- > 0;) {
		struct gate_key *k = g_ptr_array_index(g->keys, i);

		if (k->deadline >= 0 && k->deadline <= now)
			g_ptr_array_remove_index_fast(g->keys, i);
	}
}

unsigned xport_auth_gate_pollfds(const struct xport_auth_gate *g, struct pollfd *pfds,
				 unsigned max)
{
	unsigned n = MIN(g->socks->len, max);

	for (unsigned i = 0; i < n; i++) {
		const struct gate_sock *s = g_ptr_array_index(g->socks, i);

		pfds[i] = (struct pollfd){ .fd = s->fd, .events = s->events };
	}
	return n;
}

int64_t xport_auth_gate_deadline(const struct xport_auth_gate *g)
{
	int64_t next = -1;

	for (guint i = 0; i < g->socks->len; i++) {
		int64_t d = ((struct gate_sock *)g_ptr_array_index(g->socks, i))->deadline;

		next = next < 0 ? d : (d < 0 ? next : MIN(next, d));
	}
	for (guint i = 0; i < g->keys->len; i++) {
		int64_t d = ((struct gate_key *)g_ptr_array_index(g->keys, i))->deadline;

		next = next < 0 ? d : (d < 0 ? next : MIN(next, d));
	}
	return next;
}

void xport_auth_gate_step(struct xport_auth_gate *g, const struct pollfd *pfds, unsigned n)
{
	struct gate_sock *snap[XPORT_AUTH_GATE_MAX_SOCKETS];
	unsigned k = 0;

	/* The array changes as sockets leave: work from a snapshot of who was asked. */
	for (unsigned i = 0; i < n && i < g->socks->len && k < XPORT_AUTH_GATE_MAX_SOCKETS; i++) {
		struct gate_sock *s = g_ptr_array_index(g->socks, i);

		if (pfds[i].revents && pfds[i].fd == s->fd)
			snap[k++] = s;
	}
	for (unsigned i = 0; i < k; i++)
		step_one(g, snap[i]);
	expire(g);
}

bool xport_auth_gate_take(struct xport_auth_gate *g, struct xport_auth_channel *ret)
{
	struct xport_auth_channel *c = g_queue_pop_head(&g->through);

	if (!c)
		return false;
	*ret = *c;
	g_free(c);
	return true;
}

int xport_auth_gate_check_rdma(struct xport_auth_gate *g, const void *priv, size_t len,
			       const struct sockaddr *peer, uint32_t qpn,
			       struct xport_hello *ret_hello, const char **ret_reason)
{
	uint8_t tag[XPORT_TAG_SIZE], ctx[XPORT_RDMA_CTX_SIZE], want[XPORT_TAG_SIZE];
	struct xport_hello h;
	struct gate_key *k;
	int r;

	expire(g);
	if (xport_bound_hello_decode(priv, len, &h, tag) < 0) {
		bool plain = xport_hello_decode(priv, len, &h) == 0;

		*ret_reason = plain ? "the peer did not authenticate (a plain HELLO)"
				    : "a malformed HELLO";
		return plain ? -EACCES : -EPROTO;
	}
	r = channel_key(g, &h, &k, ret_reason);
	if (r < 0)
		return r;
	r = xport_auth_rdma_ctx(peer, qpn, ctx);
	if (r == 0)
		r = xport_auth_tag(k->key, XPORT_TAG_RDMA, ctx, sizeof(ctx), priv,
				   XPORT_HELLO_SIZE, want);
	if (r < 0) {
		*ret_reason = "the requester's address cannot be bound";
		return r;
	}
	if (!xport_auth_tag_equal(want, tag)) {
		*ret_reason = "the channel's binding tag does not verify";
		return -EKEYREJECTED;
	}
	*ret_hello = h;
	return 0;
}

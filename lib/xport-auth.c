// SPDX-License-Identifier: MIT
/*
 * The client's side of the authenticated setup (see xport-auth.h), and the
 * tags both sides make.  The server's side is xport-auth-gate.c.
 */
#include "xport-auth.h"

#include <errno.h>
#include <glib.h>
#include <gnutls/crypto.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "xport-internal.h"
#include "xport-sock.h"

#define CHANNEL_LABEL "EXPORTER-vrdma-channel"

static const char *const tag_labels[] = {
	[XPORT_TAG_AUTH] = "vrdma auth hello",
	[XPORT_TAG_READY] = "vrdma auth ready",
	[XPORT_TAG_TCP_PLAIN] = "vrdma tcp channel",
	[XPORT_TAG_TCP_TLS] = "vrdma tls channel",
	[XPORT_TAG_RDMA] = "vrdma rdma channel",
};

int xport_auth_tag(const uint8_t key[XPORT_KEY_SIZE], enum xport_tag_use use,
		   const void *ctx, size_t ctx_len, const void *msg, size_t msg_len,
		   uint8_t out[XPORT_TAG_SIZE])
{
	const char *label = tag_labels[use];
	uint8_t digest[32];
	gnutls_hmac_hd_t h;

	if (gnutls_hmac_init(&h, GNUTLS_MAC_SHA256, key, XPORT_KEY_SIZE) < 0)
		return -ENOMEM;
	/* The label's NUL keeps label and context apart. */
	if (gnutls_hmac(h, label, strlen(label) + 1) < 0 ||
	    (ctx_len && gnutls_hmac(h, ctx, ctx_len) < 0) ||
	    gnutls_hmac(h, msg, msg_len) < 0) {
		gnutls_hmac_deinit(h, NULL);
		return -EIO;
	}
	gnutls_hmac_deinit(h, digest);
	memcpy(out, digest, XPORT_TAG_SIZE);
	return 0;
}

bool xport_auth_tag_equal(const uint8_t a[XPORT_TAG_SIZE], const uint8_t b[XPORT_TAG_SIZE])
{
	volatile uint8_t diff = 0;

	for (unsigned i = 0; i < XPORT_TAG_SIZE; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

int xport_auth_rdma_ctx(const struct sockaddr *addr, uint32_t qpn,
			uint8_t out[XPORT_RDMA_CTX_SIZE])
{
	memset(out, 0, XPORT_RDMA_CTX_SIZE);
	if (addr && addr->sa_family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &((const struct sockaddr_in *)addr)->sin_addr, 4);
	} else if (addr && addr->sa_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
	} else {
		return -EAFNOSUPPORT;
	}
	put_le32(out + 16, qpn);
	return 0;
}

int xport_auth_tls_ctx(struct xport_tls *t, uint8_t out[XPORT_CHANNEL_CTX_SIZE])
{
	return xport_tls_export(t, CHANNEL_LABEL, out, XPORT_CHANNEL_CTX_SIZE);
}

/* ---- client ---- */

/* The peer's address, taken while the socket is connected. */
struct peer_addr {
	struct sockaddr_storage ss;
	socklen_t len;
};

static struct peer_addr peer_of(int fd)
{
	struct peer_addr p = { .len = sizeof(p.ss) };

	if (getpeername(fd, (struct sockaddr *)&p.ss, &p.len) < 0)
		p.len = 0;
	return p;
}

static void tell(const struct xport_opts *o, const struct peer_addr *p, int err,
		 const char *reason)
{
	if (o->on_refused)
		o->on_refused(o->refused_opaque, (const struct sockaddr *)&p->ss, p->len, err,
			      reason);
}

/*
 * READY: a welcome with status 0, then the server's tag over it.  A refusal
 * is the welcome alone, with the reason's errno.
 */
static int read_ready(struct xport_tls *t, int fd, int64_t deadline,
		      const uint8_t key[XPORT_KEY_SIZE], const char **ret_reason)
{
	uint8_t ready[XPORT_BOUND_WELCOME_SIZE], want[XPORT_TAG_SIZE];
	struct xport_welcome w;
	int r = xport_tls_recv_all(t, fd, ready, XPORT_WELCOME_SIZE, deadline);

	if (r == 0 && xport_welcome_decode(ready, XPORT_WELCOME_SIZE, &w) < 0)
		r = -EPROTO;
	if (r == 0 && w.status) {
		*ret_reason = "the destination refused the authentication handshake";
		return -(int)w.status;
	}
	if (r == 0)
		r = xport_tls_recv_all(t, fd, ready + XPORT_WELCOME_SIZE, XPORT_TAG_SIZE, deadline);
	if (r == 0)
		r = xport_auth_tag(key, XPORT_TAG_READY, NULL, 0, ready, XPORT_WELCOME_SIZE, want);
	if (r < 0) {
		*ret_reason = "the destination broke off the authentication handshake "
			      "(it may have refused this side's credentials)";
		return r;
	}
	if (!xport_auth_tag_equal(want, ready + XPORT_WELCOME_SIZE)) {
		*ret_reason = "the destination's binding tag does not verify (pre-shared keys differ?)";
		return -EKEYREJECTED;
	}
	return 0;
}

/* AUTH, then READY, on a session whose handshake is done. */
static int say_auth(struct xport_tls *t, int fd, struct xport_hello *hello,
		    int64_t deadline, struct xport_binding *ret, const char **ret_reason)
{
	uint8_t keys[1][XPORT_KEY_SIZE];
	uint8_t msg[XPORT_BOUND_HELLO_SIZE];
	int r = xport_tls_binding_keys(t, keys, 1);

	if (r < 0)
		return r;
	hello->channel = 0;
	hello->flags |= XPORT_HELLO_F_BOUND | XPORT_HELLO_F_AUTH;
	xport_hello_encode(hello, msg);
	r = xport_auth_tag(keys[0], XPORT_TAG_AUTH, NULL, 0, msg, XPORT_HELLO_SIZE,
			   msg + XPORT_HELLO_SIZE);
	if (r == 0)
		r = xport_tls_send_all(t, fd, msg, sizeof(msg), deadline);
	if (r < 0)
		*ret_reason = "the destination broke off the authentication handshake "
			      "(it may have refused this side's credentials)";
	if (r == 0)
		r = read_ready(t, fd, deadline, keys[0], ret_reason);
	/* The peer's alert says more than a broken stream. */
	if (r < 0 && xport_tls_alert(t))
		*ret_reason = xport_tls_alert(t);
	hello->flags &= (uint16_t)~XPORT_HELLO_F_AUTH;
	if (r == 0) {
		ret->token = hello->token;
		memcpy(ret->key, keys[0], XPORT_KEY_SIZE);
	}
	gnutls_memset(keys, 0, sizeof(keys));
	return r;
}

int xport_auth_handshake(const struct xport_opts *opts, const char *host,
			 const char *port, struct xport_hello *hello,
			 int64_t deadline, struct xport_binding *ret)
{
	_cleanup_(closep) int fd = -1;
	const char *reason = NULL;
	struct xport_tls *t = NULL;
	struct peer_addr peer;
	int r = xport_sock_connect(host, port, deadline, &fd, 1);

	if (r < 0)
		return r;
	peer = peer_of(fd);
	hello->flags = opts->encrypt ? XPORT_HELLO_F_ENCRYPT : 0;
	r = xport_tls_new(opts->auth, fd, host, &t);
	if (r == 0)
		r = xport_tls_handshake_wait(t, fd, deadline, &reason);
	if (r == 0)
		r = say_auth(t, fd, hello, deadline, ret, &reason);
	if (r < 0 && reason)
		tell(opts, &peer, r, reason);
	xport_tls_free(t);
	return r;
}

/* A refusal comes back where the next message was expected: a WELCOME. */
static int refusal(const uint8_t *buf, size_t len)
{
	struct xport_welcome w;

	if (xport_welcome_decode(buf, len, &w) == 0 && w.status)
		return -(int)w.status;
	return -EPROTO;
}

static int read_welcome(struct xport_tls *t, int fd, int64_t deadline,
			uint32_t *max_msg)
{
	uint8_t buf[XPORT_WELCOME_SIZE];
	int r = t ? xport_tls_recv_all(t, fd, buf, sizeof(buf), deadline)
		  : xport_sock_recv_all(fd, buf, sizeof(buf), deadline);

	return r < 0 ? r : xport_welcome_result(buf, max_msg);
}

/* Plain channels: HELLO, the server's nonce, the tag over both. */
static int plain_channels(const struct xport_binding *b, const struct xport_hello *hello,
			  const int *fds, unsigned n, int64_t deadline)
{
	uint8_t msgs[XPORT_MAX_CHANNELS][XPORT_HELLO_SIZE];
	int r = 0;

	for (unsigned c = 0; c < n && r == 0; c++) {
		struct xport_hello h = *hello;

		h.channel = (uint16_t)c;
		xport_hello_encode(&h, msgs[c]);
		r = xport_sock_send_all(fds[c], msgs[c], XPORT_HELLO_SIZE, deadline);
	}
	for (unsigned c = 0; c < n && r == 0; c++) {
		uint8_t chal[XPORT_CHALLENGE_SIZE], nonce[8], tag[XPORT_TAG_SIZE];
		uint64_t v;

		r = xport_sock_recv_all(fds[c], chal, sizeof(chal), deadline);
		if (r < 0)
			break;
		if (xport_challenge_decode(chal, sizeof(chal), &v) < 0) {
			r = refusal(chal, sizeof(chal));
			break;
		}
		put_le64(nonce, v);
		r = xport_auth_tag(b->key, XPORT_TAG_TCP_PLAIN, nonce, sizeof(nonce), msgs[c],
				   XPORT_HELLO_SIZE, tag);
		if (r == 0)
			r = xport_sock_send_all(fds[c], tag, sizeof(tag), deadline);
	}
	return r;
}

/* Encrypted channels: TLS each, then the bound HELLO as the first record. */
static int tls_channel(const struct xport_opts *opts, const char *host,
		       const struct xport_binding *b, struct xport_hello h, int fd,
		       int64_t deadline, struct xport_tls **ret_tls)
{
	uint8_t msg[XPORT_BOUND_HELLO_SIZE], ctx[XPORT_CHANNEL_CTX_SIZE];
	const char *reason = NULL;
	int r = xport_tls_new(opts->auth, fd, host, ret_tls);

	if (r < 0)
		return r;
	r = xport_tls_handshake_wait(*ret_tls, fd, deadline, &reason);
	if (r < 0) {
		struct peer_addr peer = peer_of(fd);

		if (reason)
			tell(opts, &peer, r, reason);
		return r;
	}
	xport_hello_encode(&h, msg);
	r = xport_auth_tls_ctx(*ret_tls, ctx);
	if (r == 0)
		r = xport_auth_tag(b->key, XPORT_TAG_TCP_TLS, ctx, sizeof(ctx), msg,
				   XPORT_HELLO_SIZE, msg + XPORT_HELLO_SIZE);
	if (r == 0)
		r = xport_tls_send_all(*ret_tls, fd, msg, sizeof(msg), deadline);
	return r;
}

int xport_auth_tcp_channels(const struct xport_opts *opts, const char *host,
			    const struct xport_binding *b, const struct xport_hello *hello,
			    const int *fds, unsigned n, int64_t deadline,
			    struct xport_tls **ret_tls, uint32_t *ret_peer_max_msg)
{
	bool encrypt = hello->flags & XPORT_HELLO_F_ENCRYPT;
	uint32_t max_msg = UINT32_MAX;
	int r = 0;

	for (unsigned c = 0; c < n; c++)
		ret_tls[c] = NULL;
	if (!encrypt)
		r = plain_channels(b, hello, fds, n, deadline);
	for (unsigned c = 0; encrypt && c < n && r == 0; c++) {
		struct xport_hello h = *hello;

		h.channel = (uint16_t)c;
		r = tls_channel(opts, host, b, h, fds[c], deadline, &ret_tls[c]);
	}
	for (unsigned c = 0; c < n && r == 0; c++)
		r = read_welcome(ret_tls[c], fds[c], deadline, &max_msg);
	if (r < 0) {
		for (unsigned c = 0; c < n; c++)
			xport_tls_free(g_steal_pointer(&ret_tls[c]));
		return r;
	}
	*ret_peer_max_msg = max_msg;
	return 0;
}

int xport_auth_rdma_hello(const struct xport_binding *b, const struct xport_hello *hello,
			  const struct sockaddr *local, uint32_t qpn,
			  uint8_t out[XPORT_BOUND_HELLO_SIZE])
{
	uint8_t ctx[XPORT_RDMA_CTX_SIZE];
	int r = xport_auth_rdma_ctx(local, qpn, ctx);

	if (r < 0)
		return r;
	xport_hello_encode(hello, out);
	return xport_auth_tag(b->key, XPORT_TAG_RDMA, ctx, sizeof(ctx), out, XPORT_HELLO_SIZE,
			      out + XPORT_HELLO_SIZE);
}

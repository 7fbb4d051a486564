// SPDX-License-Identifier: MIT
/*
 * The record relay (see xport-tls-relay.h).  Three buffers, each bounded:
 * ciphertext waiting for the network, ciphertext from the network not yet
 * decrypted, and plaintext waiting for the back end's end of the pair.
 * GnuTLS reads and writes through the first two (its pull and push
 * functions), so it never touches a socket and never blocks.
 */
#include "xport-tls-relay.h"

#include <errno.h>
#include <glib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"
#include "xport-sock.h"

#define RECORD_MAX 16384u                  /* TLS plaintext per record */
#define RECORD_ROOM (RECORD_MAX + 256u)    /* its ciphertext, with room to spare */
#define APP_CHUNK (64u << 10)              /* plaintext taken from the back end at once */
#define OUT_CAP (256u << 10)
#define IN_CAP (256u << 10)
#define PLAIN_CAP (64u << 10)
#define PAIR_BUF_BYTES (2 << 20)           /* asked of the socketpair; best effort */

struct buf {
	uint8_t *p;
	size_t off, len, cap; /* the data is [off, len) */
};

struct xport_tls_relay {
	struct xport_tls *tls;
	int net;      /* the network socket */
	int app;      /* our end of the pair */
	struct buf out;   /* ciphertext for the network */
	struct buf in;    /* ciphertext from the network */
	struct buf plain; /* plaintext for the back end */
	uint8_t *chunk;
	bool app_eof;     /* the back end hung up: close_notify, then FIN */
	bool net_shut;    /* FIN sent */
	bool net_eof;     /* the peer's session ended */
	bool app_shut;    /* the back end was told (FIN on the pair) */
	bool net_gone;    /* the socket said end of stream, or reset */
	int error;
};

static size_t buf_used(const struct buf *b) { return b->len - b->off; }

static size_t buf_room(struct buf *b)
{
	if (b->off == b->len)
		b->off = b->len = 0;
	if (b->off && b->cap - b->len < RECORD_ROOM) {
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
	}
	return b->cap - b->len;
}

static int fail(struct xport_tls_relay *r, int err)
{
	if (!r->error)
		r->error = err;
	return err;
}

/* GnuTLS's transport: the buffers, never the sockets. */
static ssize_t relay_pull(gnutls_transport_ptr_t p, void *data, size_t size)
{
	struct xport_tls_relay *r = p;
	size_t n;

	if (!buf_used(&r->in)) {
		ssize_t got = recv(r->net, r->in.p, r->in.cap, MSG_DONTWAIT);

		if (got == 0) {
			r->net_gone = true;
			return 0;
		}
		if (got < 0) {
			int e = errno == EWOULDBLOCK ? EAGAIN : errno;

			r->net_gone = e != EAGAIN && e != EINTR;
			gnutls_transport_set_errno(xport_tls_gnutls(r->tls), e);
			errno = e;
			return -1;
		}
		r->in.off = 0;
		r->in.len = (size_t)got;
	}
	n = MIN(size, buf_used(&r->in));
	memcpy(data, r->in.p + r->in.off, n);
	r->in.off += n;
	return (ssize_t)n;
}

static ssize_t relay_push(gnutls_transport_ptr_t p, const void *data, size_t size)
{
	struct xport_tls_relay *r = p;

	if (buf_room(&r->out) < size) {
		gnutls_transport_set_errno(xport_tls_gnutls(r->tls), EAGAIN);
		errno = EAGAIN;
		return -1;
	}
	memcpy(r->out.p + r->out.len, data, size);
	r->out.len += size;
	return (ssize_t)size;
}

/* ---- the four moves; each says whether it got anywhere ---- */

/*
 * Sends what b holds to fd until the socket is full; then, once b is empty
 * and *done_sending says the stream has ended, half-closes fd (once).
 * Whether anything moved; a socket error is -errno in *ret_err.
 */
static bool drain(int fd, struct buf *b, bool done_sending, bool *shut, int *ret_err)
{
	bool moved = false;

	while (buf_used(b)) {
		ssize_t n = send(fd, b->p + b->off, buf_used(b), MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return moved;
		if (n <= 0) {
			*ret_err = n < 0 ? -errno : -EIO;
			return false;
		}
		b->off += (size_t)n;
		moved = true;
	}
	if (done_sending && !*shut) {
		shutdown(fd, SHUT_WR);
		*shut = true;
		moved = true;
	}
	return moved;
}

/* Ciphertext to the network; after the last of it, FIN if the back end left. */
static bool flush_out(struct xport_tls_relay *r)
{
	int err = 0;
	bool moved = drain(r->net, &r->out, r->app_eof, &r->net_shut, &err);

	if (err)
		fail(r, xport_sock_error(err));
	return moved;
}

/* Plaintext from the back end, as records, as far as the out buffer takes them. */
static bool encrypt_more(struct xport_tls_relay *r)
{
	gnutls_session_t s = xport_tls_gnutls(r->tls);
	size_t want = MIN(APP_CHUNK, buf_room(&r->out) / RECORD_ROOM * RECORD_MAX);
	ssize_t n;

	if (r->app_eof || !want)
		return false;
	n = recv(r->app, r->chunk, want, MSG_DONTWAIT);
	if (n < 0)
		return errno == EINTR;
	if (n == 0) {
		/* Tells the peer the stream ended here, not in an attack. */
		r->app_eof = true;
		gnutls_bye(s, GNUTLS_SHUT_WR);
		return true;
	}
	for (size_t off = 0; off < (size_t)n;) {
		ssize_t k = gnutls_record_send(s, r->chunk + off, (size_t)n - off);

		if (k <= 0) {
			fail(r, -EIO);
			return false;
		}
		off += (size_t)k;
	}
	return true;
}

/* Plaintext to the back end; once all is there after the peer's end, FIN. */
static bool deliver(struct xport_tls_relay *r)
{
	int err = 0;
	bool moved = drain(r->app, &r->plain, r->net_eof, &r->app_shut, &err);

	/* The back end's end is gone: the connection is being torn down. */
	if (err)
		fail(r, -ECONNRESET);
	return moved;
}

/* Records from the network, decrypted, while there is room for a whole one. */
static bool decrypt_more(struct xport_tls_relay *r)
{
	gnutls_session_t s = xport_tls_gnutls(r->tls);
	bool moved = false;

	while (!r->net_eof && buf_room(&r->plain) >= RECORD_MAX) {
		ssize_t n = gnutls_record_recv(s, r->plain.p + r->plain.len, RECORD_MAX);

		if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
			return moved;
		if (n == 0) {
			r->net_eof = true;
			return true;
		}
		if (n < 0) {
			/*
			 * A peer gone without close_notify (in the middle of a
			 * record, too), or a record that does not authenticate.
			 */
			fail(r, r->net_gone || n == GNUTLS_E_PREMATURE_TERMINATION ? -ECONNRESET
								   : -EBADMSG);
			return false;
		}
		r->plain.len += (size_t)n;
		moved = true;
	}
	return moved;
}

int xport_tls_relay_pump(struct xport_tls_relay *r)
{
	bool moved = true;

	while (moved && !r->error) {
		moved = flush_out(r);
		moved |= encrypt_more(r);
		moved |= deliver(r);
		moved |= decrypt_more(r);
	}
	return r->error;
}

void xport_tls_relay_wants(const struct xport_tls_relay *r, int ret_fds[XPORT_RELAY_FDS],
			   short ret_events[XPORT_RELAY_FDS])
{
	size_t out_room = r->out.cap - buf_used(&r->out);
	size_t plain_room = r->plain.cap - buf_used(&r->plain);

	ret_fds[XPORT_RELAY_NET] = r->net;
	ret_fds[XPORT_RELAY_APP] = r->app;
	ret_events[XPORT_RELAY_NET] = ret_events[XPORT_RELAY_APP] = 0;
	if (r->error)
		return;
	if (buf_used(&r->out))
		ret_events[XPORT_RELAY_NET] |= POLLOUT;
	if (!r->net_eof && plain_room >= RECORD_MAX)
		ret_events[XPORT_RELAY_NET] |= POLLIN;
	if (buf_used(&r->plain))
		ret_events[XPORT_RELAY_APP] |= POLLOUT;
	if (!r->app_eof && out_room >= RECORD_ROOM)
		ret_events[XPORT_RELAY_APP] |= POLLIN;
}

void xport_tls_relay_shutdown(struct xport_tls_relay *r)
{
	if (r)
		shutdown(r->net, SHUT_RDWR);
}

void xport_tls_relay_free(struct xport_tls_relay *r)
{
	if (!r)
		return;
	xport_tls_free(r->tls);
	closep(&r->net);
	closep(&r->app);
	g_free(r->out.p);
	g_free(r->in.p);
	g_free(r->plain.p);
	g_free(r->chunk);
	g_free(r);
}

static void grow_pair_buffers(int fd)
{
	int bytes = PAIR_BUF_BYTES;

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

int xport_tls_relay_new(struct xport_tls *tls, int net_fd, int *ret_app_fd,
			struct xport_tls_relay **ret)
{
	gnutls_session_t s = xport_tls_gnutls(tls);
	struct xport_tls_relay *r;
	int pair[2];

	/* Both ends non-blocking; the back end makes its own end blocking. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) < 0)
		return -errno;
	grow_pair_buffers(pair[0]);
	grow_pair_buffers(pair[1]);
	r = g_new0(struct xport_tls_relay, 1);
	r->app = pair[1];
	r->net = net_fd;
	r->out = (struct buf){ .p = g_malloc(OUT_CAP), .cap = OUT_CAP };
	r->in = (struct buf){ .p = g_malloc(IN_CAP), .cap = IN_CAP };
	r->plain = (struct buf){ .p = g_malloc(PLAIN_CAP), .cap = PLAIN_CAP };
	r->chunk = g_malloc(APP_CHUNK);
	r->tls = tls;
	gnutls_transport_set_ptr(s, r);
	gnutls_transport_set_pull_function(s, relay_pull);
	gnutls_transport_set_push_function(s, relay_push);
	*ret_app_fd = pair[0];
	*ret = r;
	return 0;
}

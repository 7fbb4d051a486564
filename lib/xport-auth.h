/* SPDX-License-Identifier: MIT */
/*
 * Authenticated connection setup, for both back ends (docs/transport.md,
 * "Authentication"):
 *
 *  1. The client opens the authentication stream, a TCP connection to the
 *     listener's host and port, runs TLS on it with the operator's
 *     credentials and says AUTH: a HELLO naming the connection's token and
 *     parameters, tagged with the binding key, which both sides derive from
 *     the TLS exporter.  The server keeps the key for that token and answers
 *     READY (tagged too); the stream then closes.
 *  2. Every channel proves it belongs to that handshake with a tag, keyed by
 *     the binding key, over its HELLO and something fresh to the channel:
 *     the server's nonce (tcp, plain), the channel's own TLS exporter (tcp
 *     encrypted: each channel runs TLS), the requester's address and QP
 *     number (rdma: in the connection request's private data).
 *  3. The server takes channels only for a token it holds a key for, each
 *     channel index once, and forgets the key once the connection is whole.
 *
 * Refusals are reported through a callback with the errno and a static
 * sentence (never key material); library code does not log.
 */
#ifndef VRDMA_XPORT_AUTH_H
#define VRDMA_XPORT_AUTH_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "xport-tls.h"
#include "xport-wire.h"

struct xport_binding {
	uint64_t token;
	uint8_t key[XPORT_KEY_SIZE];
};

/* ---- client ---- */

/*
 * Step 1 for the connection hello describes (token, channels, max_msg,
 * recv_depth; its flags are set here: BOUND, ENCRYPT if opts->encrypt).
 * Failures are told to opts->on_refused with the reason.
 */
int xport_auth_handshake(const struct xport_opts *opts, const char *host,
			 const char *port, struct xport_hello *hello,
			 int64_t deadline, struct xport_binding *ret);

/*
 * tcp: binds the n connected sockets fds (channel c on fds[c]) and reads
 * their WELCOMEs.  With ENCRYPT in hello each channel runs TLS first;
 * ret_tls[c] is then its session (NULL otherwise), to be handed to the
 * record relay (xport-tls-relay.h).  On failure nothing is left in ret_tls.
 */
int xport_auth_tcp_channels(const struct xport_opts *opts, const char *host,
			    const struct xport_binding *b, const struct xport_hello *hello,
			    const int *fds, unsigned n, int64_t deadline,
			    struct xport_tls **ret_tls, uint32_t *ret_peer_max_msg);

/* rdma: channel hello's connection private data, tagged for (local, qpn). */
int xport_auth_rdma_hello(const struct xport_binding *b, const struct xport_hello *hello,
			  const struct sockaddr *local, uint32_t qpn,
			  uint8_t out[XPORT_BOUND_HELLO_SIZE]);

/* ---- server ---- */

struct xport_auth_gate;

#define XPORT_AUTH_GATE_MAX_SOCKETS 64 /* streams in the gate at once */

/* A tcp channel that proved its binding. */
struct xport_auth_channel {
	int fd;
	struct xport_hello hello;
	struct xport_tls *tls; /* an encrypted channel's session, else NULL */
};

/*
 * tcp_channels: tcp's gate takes channels as well as authentication
 * streams; rdma's takes only the latter (its channels come through rdma_cm,
 * see xport_auth_gate_check_rdma()).  opts: the listener's (auth, encrypt
 * required, timeout_ms, max_msg; on_refused hears of each socket refused).
 */
int xport_auth_gate_new(const struct xport_opts *opts, bool tcp_channels,
			struct xport_auth_gate **ret);
void xport_auth_gate_free(struct xport_auth_gate *g);
/* Takes an accepted, non-blocking socket (refused at once when full). */
void xport_auth_gate_add(struct xport_auth_gate *g, int fd);
/* The sockets to poll, at most max; their order is what step() expects. */
unsigned xport_auth_gate_pollfds(const struct xport_auth_gate *g, struct pollfd *pfds,
				 unsigned max);
/* When the next socket or key expires (-1: none). */
int64_t xport_auth_gate_deadline(const struct xport_auth_gate *g);
/* Moves every socket on whose pollfd something happened; expires old ones. */
void xport_auth_gate_step(struct xport_auth_gate *g, const struct pollfd *pfds, unsigned n);
/* A tcp channel that is through, in the order they got through. */
bool xport_auth_gate_take(struct xport_auth_gate *g, struct xport_auth_channel *ret);
/*
 * rdma: a connection request's private data from peer (its QP qpn): 0 and
 * the hello when it is bound to a handshake the gate holds a key for, else
 * -errno and *ret_reason.
 */
int xport_auth_gate_check_rdma(struct xport_auth_gate *g, const void *priv, size_t len,
			       const struct sockaddr *peer, uint32_t qpn,
			       struct xport_hello *ret_hello, const char **ret_reason);
/* The connection of token is whole: no channel joins it any more. */
void xport_auth_gate_forget(struct xport_auth_gate *g, uint64_t token);

/* ---- shared by both sides ---- */

enum xport_tag_use {
	XPORT_TAG_AUTH,        /* the AUTH hello */
	XPORT_TAG_READY,       /* the READY welcome */
	XPORT_TAG_TCP_PLAIN,   /* ctx: the server's nonce */
	XPORT_TAG_TCP_TLS,     /* ctx: the channel's exporter */
	XPORT_TAG_RDMA,        /* ctx: address (16) and QP number (4) */
};

/* HMAC-SHA256(key, use's label || ctx || msg), first XPORT_TAG_SIZE bytes. */
int xport_auth_tag(const uint8_t key[XPORT_KEY_SIZE], enum xport_tag_use use,
		   const void *ctx, size_t ctx_len, const void *msg, size_t msg_len,
		   uint8_t out[XPORT_TAG_SIZE]);
/* In constant time. */
bool xport_auth_tag_equal(const uint8_t a[XPORT_TAG_SIZE], const uint8_t b[XPORT_TAG_SIZE]);
/* rdma's tag context: the address as 16 bytes (IPv4 mapped), the QP number. */
#define XPORT_RDMA_CTX_SIZE 20
int xport_auth_rdma_ctx(const struct sockaddr *addr, uint32_t qpn,
			uint8_t out[XPORT_RDMA_CTX_SIZE]);
/* A channel's own TLS exporter, the context of its tag. */
#define XPORT_CHANNEL_CTX_SIZE 32
int xport_auth_tls_ctx(struct xport_tls *t, uint8_t out[XPORT_CHANNEL_CTX_SIZE]);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * TLS for the transport's authentication, on GnuTLS: the operator's
 * credentials (struct xport_auth, made by xport_auth_new()), a TLS 1.3
 * session on a socket with its handshake stepped without blocking, records,
 * and the binding keys (RFC 5705 exporter) the channels prove themselves
 * with.  Functions return -errno; a failed handshake also says why, in a
 * static string that never holds key material.
 */
#ifndef VRDMA_XPORT_TLS_H
#define VRDMA_XPORT_TLS_H

#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "xport.h"

#define XPORT_KEY_SIZE 32 /* a binding key: HMAC-SHA256 */

/* ---- the pre-shared key file (psktool's format) ---- */

#define XPORT_PSK_MAX_KEYS 64
#define XPORT_PSK_MAX_IDENTITY 128
#define XPORT_PSK_MIN_KEY 16
#define XPORT_PSK_MAX_KEY 64
#define XPORT_PSK_MAX_FILE (64u << 10)

struct xport_psk {
	char identity[XPORT_PSK_MAX_IDENTITY + 1];
	uint8_t key[XPORT_PSK_MAX_KEY];
	unsigned key_len;
};

/*
 * "IDENTITY:HEXKEY" lines (psktool -u IDENTITY -p FILE writes them), blank
 * lines and '#' comments allowed; identities printable ASCII without ':',
 * unique; keys 16..64 bytes.  At least one key, at most max.  -EBADMSG for
 * anything else (ret_keys then holds no key), -EFBIG past XPORT_PSK_MAX_FILE.
 */
int xport_psk_parse(const char *text, size_t len, struct xport_psk *ret_keys,
		    unsigned max, unsigned *ret_n);

/* ---- sessions ---- */

struct xport_tls;

/*
 * A session over the connected socket fd (not owned), as the server when
 * auth was made for one.  peer_name: the name the peer's certificate must
 * carry (NULL: none), overridden by the credentials' own hostname.
 */
int xport_tls_new(const struct xport_auth *auth, int fd, const char *peer_name,
		  struct xport_tls **ret);
void xport_tls_free(struct xport_tls *t);
gnutls_session_t xport_tls_gnutls(const struct xport_tls *t);
/* Why the peer ended the session with an alert after the handshake (else NULL). */
const char *xport_tls_alert(const struct xport_tls *t);

/*
 * One step of the handshake: 0 once it is done; -EAGAIN: call again when fd
 * is ready for *ret_events; else a fatal -errno, *ret_reason says why (the
 * peer has been sent an alert).
 */
int xport_tls_handshake(struct xport_tls *t, short *ret_events,
			const char **ret_reason);
/* Records, non-blocking: a count, -EAGAIN with *ret_events, or -errno. */
ssize_t xport_tls_send(struct xport_tls *t, const void *buf, size_t len,
		       short *ret_events);
/* 0 when the peer closed the session; a close without TLS's is -ECONNRESET. */
ssize_t xport_tls_recv(struct xport_tls *t, void *buf, size_t len,
		       short *ret_events);

/* The same with a deadline (monotonic ms, -1 none), for a client. */
int xport_tls_handshake_wait(struct xport_tls *t, int fd, int64_t deadline,
			     const char **ret_reason);
int xport_tls_send_all(struct xport_tls *t, int fd, const void *buf, size_t len,
		       int64_t deadline);
int xport_tls_recv_all(struct xport_tls *t, int fd, void *buf, size_t len,
		       int64_t deadline);

/* RFC 5705 keying material of the session for label, no context. */
int xport_tls_export(struct xport_tls *t, const char *label, void *out, size_t len);

/*
 * The keys this session's binding tags may be made with: the exporter's,
 * or, when x509 and a PSK file are both configured (TLS then runs on the
 * certificates, and the tags prove the PSK), the exporter mixed with each
 * PSK (the server's every key, the client's first).  Returns how many.
 */
int xport_tls_binding_keys(struct xport_tls *t, uint8_t (*ret_keys)[XPORT_KEY_SIZE],
			   unsigned max);

/* Whether the credentials are a server's. */
bool xport_auth_is_server(const struct xport_auth *auth);

#endif

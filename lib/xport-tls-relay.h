/* SPDX-License-Identifier: MIT */
/*
 * The record relay of an encrypted tcp channel: the tcp back end keeps
 * reading and writing a plain stream (one end of a socketpair) with
 * io_uring, exactly as on a network socket; the relay carries that stream
 * as TLS records over the network socket, in user space (this host has no
 * kernel TLS).  It never blocks and owns no loop: the back end waits on the
 * fds and events it asks for and calls xport_tls_relay_pump() when one is
 * ready.
 *
 * A peer that closes, a record that does not authenticate (-EBADMSG), or a
 * local end that hangs up shut both streams down, so the back end sees its
 * socket end as it would a network socket's.
 */
#ifndef VRDMA_XPORT_TLS_RELAY_H
#define VRDMA_XPORT_TLS_RELAY_H

#include "xport-tls.h"

struct xport_tls_relay;

/*
 * Takes the session and the network socket net_fd (non-blocking) on success;
 * *ret_app_fd is the plain end for the back end (non-blocking, close-on-exec).
 */
int xport_tls_relay_new(struct xport_tls *tls, int net_fd, int *ret_app_fd,
			struct xport_tls_relay **ret);
void xport_tls_relay_free(struct xport_tls_relay *r);
/* Ends the network side at once, both ways (a fatal error); NULL is fine. */
void xport_tls_relay_shutdown(struct xport_tls_relay *r);
/* Moves what it can both ways: 0, or the -errno that ended the channel. */
int xport_tls_relay_pump(struct xport_tls_relay *r);

enum { XPORT_RELAY_NET, XPORT_RELAY_APP, XPORT_RELAY_FDS };
/* What to wait for before the next pump: per fd, events (0: nothing). */
void xport_tls_relay_wants(const struct xport_tls_relay *r, int ret_fds[XPORT_RELAY_FDS],
			   short ret_events[XPORT_RELAY_FDS]);

#endif

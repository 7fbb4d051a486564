// SPDX-License-Identifier: MIT
/*
 * The last message of a failing engine.  Posting the FAIL and closing at
 * once lost it: the close cancelled the send still in flight, or ended the
 * other channels before the peer had read channel 0, and the peer then saw
 * "connection reset" instead of the reason (and chose the wrong exit
 * code).
 */
#include <errno.h>

#include "peer-proto.h"
#include "util.h"

/* Not a cookie either engine uses for its own requests. */
#define FAIL_COOKIE UINT64_C(0xfa11fa11fa11fa11)

int peer_send_fail(struct xport_conn *conn, int err, int timeout_ms)
{
	const struct peer_msg m = { .type = PEER_MSG_FAIL, .u.error = -err };
	uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000ull;
	uint8_t buf[PEER_MAX_MSG];
	size_t len = peer_msg_encode(&m, buf);
	int r;

	if (!conn || xport_conn_error(conn))
		return -ENOTCONN;
	while ((r = xport_send_copy(conn, 0, buf, len, FAIL_COOKIE, XPORT_F_SIGNAL)) == -EAGAIN) {
		struct xport_completion c;

		if (monotonic_ns() > deadline)
			return -ETIMEDOUT;
		r = xport_poll(conn, &c, 1);
		if (r < 0)
			return r;
		if (r == 0)
			xport_wait(conn, 10);
	}
	if (r < 0)
		return r;
	/* Until the peer hangs up, having read it: our own close first would
	 * race the FAIL on channel 0 against the end of the other channels,
	 * and a peer that saw a channel end first reports a reset.  What
	 * completes meanwhile is dropped. */
	while (monotonic_ns() < deadline) {
		struct xport_completion c[16];
		int n = xport_poll(conn, c, 16);

		if (n < 0)
			return 0;
		for (int i = 0; i < n; i++)
			if (c[i].op == XPORT_OP_SEND && c[i].cookie == FAIL_COOKIE &&
			    c[i].status)
				return c[i].status;
		if (n == 0)
			xport_wait(conn, 10);
	}
	return -ETIMEDOUT;
}

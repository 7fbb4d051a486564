// SPDX-License-Identifier: MIT
/*
 * The moving guest's side of the peer protocol (docs/migration-rdma.md,
 * "Peers elsewhere"): at the stop, the source asks each peer's back end to
 * PAUSE the peer QP; resumed after a failed move, it asks them to RESUME;
 * the destination, once it has made the QPs again, asks them to RETARGET;
 * either end of an rdma_cm connection that moved asks the other's to
 * DISCONNECT when it ends.
 *
 * One TLS session per peer back end (by the pair of addresses), with one
 * request after another on it: a guest with hundreds of QPs to the same
 * peer pays one handshake, not hundreds.  A session that fails once fails
 * every request after it at once, so a dead peer back end costs one
 * timeout, not one per QP.  A peer served by this very daemon (another
 * guest on this function) is asked in-process.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdma-peer.h"
#include "util.h"
#include "xport-sock.h"

/* Peer back ends asked at once; the QPs of any more fail. */
#define MAX_SESSIONS 64u

struct session {
	uint8_t own[16], to[16];
	int fd;
	struct xport_tls *tls;
	int err; /* set: the session is broken, every request fails so */
};

struct sessions {
	struct rdma_shared *sh;
	struct session s[MAX_SESSIONS];
	unsigned int n;
};

static int64_t step_deadline(void)
{
	return monotonic_ms() + RDMA_PEER_CALL_TIMEOUT_MS;
}

/* A connected TCP socket from own to to (non-blocking), by the deadline. */
static int connect_from(const uint8_t own[16], const uint8_t to[16], uint16_t port,
			int64_t deadline)
{
	struct sockaddr_in src, dst;
	int err = 0;
	socklen_t len = sizeof(err);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int r;

	if (fd < 0)
		return -errno;
	rdma_peer_sockaddr(own, 0, &src);
	rdma_peer_sockaddr(to, port, &dst);
	r = bind(fd, (struct sockaddr *)&src, sizeof(src)) ? -errno : 0;
	if (!r && connect(fd, (struct sockaddr *)&dst, sizeof(dst)) && errno != EINPROGRESS)
		r = -errno;
	if (!r)
		r = xport_sock_wait(fd, POLLOUT, deadline);
	if (!r && (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) || err))
		r = err ? -err : -errno;
	if (r) {
		close(fd);
		return r;
	}
	return fd;
}

static void session_open(struct rdma_shared *sh, struct session *s)
{
	const char *why;

	s->fd = connect_from(s->own, s->to, sh->peer->port, step_deadline());
	if (s->fd < 0) {
		s->err = s->fd;
		return;
	}
	s->err = xport_tls_new(sh->peer->client, s->fd, NULL, &s->tls);
	if (!s->err)
		s->err = xport_tls_handshake_wait(s->tls, s->fd, step_deadline(), &why);
}

/* The session from own to to: the one open, or a new one; NULL past
 * MAX_SESSIONS. */
static struct session *session_for(struct sessions *ss, const uint8_t own[16],
				   const uint8_t to[16])
{
	struct session *s;

	for (unsigned int i = 0; i < ss->n; i++)
		if (!memcmp(ss->s[i].own, own, 16) && !memcmp(ss->s[i].to, to, 16))
			return &ss->s[i];
	if (ss->n == MAX_SESSIONS)
		return NULL;
	s = &ss->s[ss->n++];
	*s = (struct session){ .fd = -1 };
	memcpy(s->own, own, 16);
	memcpy(s->to, to, 16);
	session_open(ss->sh, s);
	return s;
}

static void sessions_close(struct sessions *ss)
{
	for (unsigned int i = 0; i < ss->n; i++) {
		xport_tls_free(ss->s[i].tls);
		if (ss->s[i].fd >= 0)
			close(ss->s[i].fd);
	}
	ss->n = 0;
}

/* A request to the back end behind to; its status (0, a positive errno)
 * or -errno when it could not be asked. */
static int ask(struct sessions *ss, const uint8_t own[16], const uint8_t to[16],
	       const struct rdma_peer_request *req, const struct rdma_peer_rkey *rkeys)
{
	uint8_t head[RDMA_PEER_REQUEST_SIZE], reply[RDMA_PEER_REPLY_SIZE];
	g_autofree uint8_t *keys = NULL;
	struct session *s;
	uint32_t status;
	int r;

	/* The peer is served here (another guest of this daemon). */
	if (rdma_peer_qp_by_host_qpn(ss->sh, req->qpn) && !memcmp(own, to, 16))
		return (int)rdma_peer_handle(ss->sh, req, rkeys, own);
	s = session_for(ss, own, to);
	if (!s)
		return -EMFILE;
	if (s->err)
		return s->err;
	rdma_peer_request_encode(req, head);
	keys = g_malloc(8ull * req->n_rkeys + 1);
	rdma_peer_rkeys_encode(rkeys, req->n_rkeys, keys);
	r = xport_tls_send_all(s->tls, s->fd, head, sizeof(head), step_deadline());
	if (!r && req->n_rkeys)
		r = xport_tls_send_all(s->tls, s->fd, keys, 8ull * req->n_rkeys, step_deadline());
	if (!r)
		r = xport_tls_recv_all(s->tls, s->fd, reply, sizeof(reply), step_deadline());
	if (!r && rdma_peer_reply_decode(reply, &status))
		r = -EBADMSG;
	if (r) {
		s->err = r;
		return r;
	}
	return (int)status;
}

/* The GIDs of both ends of a connected QP, as the host has them. */
static int ends(struct rdma_dev *d, struct rdma_qp *qp, uint8_t own[16], uint8_t peer[16],
		uint32_t *ret_peer_qpn)
{
	struct ibv_qp_attr a;
	struct ibv_gid_entry e;

	if (rdma_peer_host_attr(qp, &a) ||
	    ibv_query_gid_ex(d->sh->ctx, 1, a.ah_attr.grh.sgid_index, &e, 0))
		return -EIO;
	memcpy(own, e.gid.raw, 16);
	memcpy(peer, a.ah_attr.grh.dgid.raw, 16);
	*ret_peer_qpn = a.dest_qp_num;
	return rdma_gid_is_ipv4(own) && rdma_gid_is_ipv4(peer) ? 0 : -EAFNOSUPPORT;
}

static int pause_one(struct sessions *ss, struct rdma_dev *d, struct rdma_qp *qp)
{
	struct rdma_peer_request req = { .op = RDMA_PEER_PAUSE, .from_qpn = qp->host_qpn };
	uint8_t peer[16];
	int r = ends(d, qp, req.from_gid, peer, &req.qpn);

	if (!r && getrandom(req.token, sizeof(req.token), 0) != sizeof(req.token))
		r = -EIO;
	if (!r)
		r = ask(ss, req.from_gid, peer, &req, NULL);
	if (r)
		return r < 0 ? r : -r;
	g_free(qp->moving);
	qp->moving = g_new0(struct rdma_peer_link, 1);
	memcpy(qp->moving->token, req.token, sizeof(req.token));
	memcpy(qp->moving->gid, peer, 16);
	qp->moving->qpn = req.qpn;
	memcpy(qp->moving->from_gid, req.from_gid, 16);
	qp->moving->from_qpn = req.from_qpn;
	return 0;
}

void rdma_peer_pause_all(struct rdma_dev *d, bool (*wants)(struct rdma_dev *d,
							    struct rdma_qp *qp))
{
	struct sessions ss = { .sh = d->sh };

	for (uint32_t i = 0; i < d->qps.cap; i++) {
		struct rdma_qp *qp = d->qps.obj[i];

		if (!qp || !wants(d, qp))
			continue;
		if (!d->sh->peer || pause_one(&ss, d, qp))
			rdma_qp_fatal(d, qp, VRDMA_QPF_STOPPED);
	}
	sessions_close(&ss);
}

void rdma_peer_resume(struct rdma_dev *d)
{
	struct sessions ss = { .sh = d->sh };

	for (uint32_t i = 0; i < d->qps.cap; i++) {
		struct rdma_qp *qp = d->qps.obj[i];
		struct rdma_peer_request req = { .op = RDMA_PEER_RESUME };

		if (!qp || !qp->moving)
			continue;
		req.qpn = qp->moving->qpn;
		req.from_qpn = qp->moving->from_qpn;
		memcpy(req.from_gid, qp->moving->from_gid, 16);
		memcpy(req.token, qp->moving->token, sizeof(req.token));
		/* Not told, the peer QP fails when its hold ends. */
		if (d->sh->peer)
			ask(&ss, req.from_gid, qp->moving->gid, &req, NULL);
		g_clear_pointer(&qp->moving, g_free);
	}
	sessions_close(&ss);
}

/* The rkeys of the MRs in the QP's PD a peer may use, by the guest's. */
static GArray *remote_rkeys(struct rdma_dev *d, struct rdma_qp *qp)
{
	GArray *a = g_array_new(FALSE, FALSE, sizeof(struct rdma_peer_rkey));

	for (uint32_t i = 0; i < d->mrs.cap && a->len < RDMA_PEER_MAX_RKEYS; i++) {
		const struct rdma_mr *mr = d->mrs.obj[i];

		if (mr && mr->mr && mr->pd == qp->pd && mr->rkey &&
		    (mr->access & (VRDMA_ACCESS_REMOTE_WRITE | VRDMA_ACCESS_REMOTE_READ |
				   VRDMA_ACCESS_REMOTE_ATOMIC)))
			g_array_append_val(a, ((struct rdma_peer_rkey){ mr->rkey, mr->mr->rkey }));
	}
	return a;
}

static int retarget_one(struct sessions *ss, struct rdma_dev *d, struct rdma_qp *qp)
{
	struct rdma_peer_request req = { .op = RDMA_PEER_RETARGET, .new_qpn = qp->host_qpn };
	g_autoptr(GArray) rkeys = NULL;
	uint8_t peer[16];
	uint32_t peer_qpn;
	int r = ends(d, qp, req.new_gid, peer, &peer_qpn);

	if (r)
		return r;
	/* Made again towards the peer the source had paused, and no other. */
	if (peer_qpn != qp->moving->qpn || memcmp(peer, qp->moving->gid, 16))
		return -EINVAL;
	req.qpn = peer_qpn;
	req.from_qpn = qp->moving->from_qpn;
	memcpy(req.from_gid, qp->moving->from_gid, 16);
	memcpy(req.token, qp->moving->token, sizeof(req.token));
	rkeys = remote_rkeys(d, qp);
	req.n_rkeys = rkeys->len;
	r = ask(ss, req.new_gid, peer, &req, (const struct rdma_peer_rkey *)rkeys->data);
	return r < 0 ? r : -r;
}

void rdma_peer_retarget_all(struct rdma_dev *d)
{
	struct sessions ss = { .sh = d->sh };

	for (uint32_t i = 0; i < d->qps.cap; i++) {
		struct rdma_qp *qp = d->qps.obj[i];
		int r;

		if (!qp || !qp->moving)
			continue;
		r = d->sh->peer ? retarget_one(&ss, d, qp) : -ENOTCONN;
		g_clear_pointer(&qp->moving, g_free);
		if (r) {
			rdma_qp_fatal(d, qp, VRDMA_QPF_STOPPED);
			rdma_cm_conn_lost(qp);
		}
	}
	sessions_close(&ss);
}

void rdma_peer_disconnect(struct rdma_dev *d, struct rdma_qp *const *qps, unsigned int n)
{
	struct sessions ss = { .sh = d->sh };

	for (unsigned int i = 0; i < n; i++) {
		struct rdma_peer_request req = { .op = RDMA_PEER_DISCONNECT,
						 .from_qpn = qps[i]->host_qpn };
		uint8_t peer[16];

		if (ends(d, qps[i], req.from_gid, peer, &req.qpn))
			continue;
		/* A peer in this daemon is told even with the protocol off. */
		if (d->sh->peer ||
		    (!memcmp(req.from_gid, peer, 16) && rdma_peer_qp_by_host_qpn(d->sh, req.qpn)))
			ask(&ss, req.from_gid, peer, &req, NULL);
	}
	sessions_close(&ss);
}

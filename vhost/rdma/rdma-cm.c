// SPDX-License-Identifier: MIT
/*
 * Connection management (VRDMA_F_CM, spec section 14): the host's rdma_cm
 * connects the guest's QPs.  The guest names a peer (IPv4 address, port)
 * and a QP of its own; the device resolves, connects, moves the host QP
 * to RTR and RTS with the attributes the connection manager negotiated,
 * and reports the outcome as CM events the guest fetches with
 * CM_GET_EVENT.  The device's own address is always the function's, so a
 * guest can neither speak as another address nor listen on one, and a
 * resolved route that leaves through another device is refused.
 *
 * The host rdma_cm speaks IB CM on the wire, so the guest's connections
 * interoperate with any native RoCE peer (rping, perftest -R, NVMe-oF...).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "rdma-cm.h"
#include "rdma-internal.h"

#define CM_TIMEOUT_MS 2000
#define CM_RETRIES 7

int rdma_cm_init(struct rdma_dev *d)
{
	int fl;

	d->cm_chan = rdma_create_event_channel();
	if (!d->cm_chan)
		return -errno;
	fl = fcntl(d->cm_chan->fd, F_GETFL);
	if (fl < 0 || fcntl(d->cm_chan->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int r = -errno;

		rdma_destroy_event_channel(d->cm_chan);
		d->cm_chan = NULL;
		return r;
	}
	return 0;
}

/* The guest's IPv4 address: that of the first IPv4 GID in its table. */
static int function_ipv4(const struct rdma_dev *d, uint8_t ret_ip[4])
{
	for (uint32_t i = 0; i < d->sh->lim.gid_tbl_len; i++) {
		struct ibv_gid_entry e;

		if (rdma_gid_to_host(d->sh, i, &e) < 0 || !rdma_gid_is_ipv4(e.gid.raw))
			continue;
		memcpy(ret_ip, e.gid.raw + 12, 4);
		return VRDMA_OK;
	}
	return VRDMA_ENETUNREACH;
}

static void to_sockaddr(struct sockaddr_in *sa, const uint8_t ip[4], uint16_t port)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	memcpy(&sa->sin_addr, ip, 4);
}

static void from_sockaddr(const struct sockaddr *sa, uint8_t ret_ip[4], uint16_t *ret_port)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

	memset(ret_ip, 0, 4);
	*ret_port = 0;
	if (sa && sa->sa_family == AF_INET) {
		memcpy(ret_ip, &in->sin_addr, 4);
		*ret_port = ntohs(in->sin_port);
	}
}

/* Both ends' addresses as the host id has them now (a detached
 * connection keeps the last it had). */
void rdma_cm_conn_addresses(struct rdma_cm_conn *c)
{
	if (!c->id)
		return;
	from_sockaddr(rdma_get_local_addr(c->id), c->local_ip, &c->local_port);
	from_sockaddr(rdma_get_peer_addr(c->id), c->remote_ip, &c->remote_port);
}

void rdma_cm_event_fill(struct vrdma_cm_event *ev, uint16_t type, uint32_t status,
			struct rdma_cm_conn *c)
{
	memset(ev, 0, sizeof(*ev));
	ev->type = type;
	ev->status = status;
	ev->conn = c->handle;
	ev->listen = c->listen;
	rdma_cm_conn_addresses(c);
	memcpy(ev->local_ip, c->local_ip, 4);
	memcpy(ev->remote_ip, c->remote_ip, 4);
	ev->local_port = c->local_port;
	ev->remote_port = c->remote_port;
}

/* Queues an event for the guest; the first one waiting rings the event
 * queue (the driver drains them all with CM_GET_EVENT). */
struct vrdma_cm_event *rdma_cm_queue_event(struct rdma_dev *d, uint16_t type, uint32_t status,
					   struct rdma_cm_conn *c, bool final)
{
	struct cm_event_node *node = g_new0(struct cm_event_node, 1);

	node->final = final;
	rdma_cm_event_fill(&node->ev, type, status, c);
	if (g_queue_is_empty(&d->cm_events))
		rdma_post_event(d, VRDMA_EV_CM, 0, 0);
	g_queue_push_tail(&d->cm_events, node);
	return &node->ev;
}

static void event_pdata(struct vrdma_cm_event *ev, const struct rdma_conn_param *p)
{
	size_t n = MIN((size_t)p->private_data_len, sizeof(ev->pdata));

	if (p->private_data && n) {
		memcpy(ev->pdata, p->private_data, n);
		ev->pdata_len = (uint8_t)n;
	}
	/* This side's: rdma_cm reports them so (a request's are the peer's,
	 * swapped). */
	ev->ird = (uint8_t)MIN(p->responder_resources, 255);
	ev->ord = (uint8_t)MIN(p->initiator_depth, 255);
}

void rdma_cm_id_destroy(struct rdma_cm_id *id)
{
	if (id)
		rdma_destroy_id(id);
}

/* Drops the events still waiting for the guest that name handle. */
static void drop_queued_events(struct rdma_dev *d, uint32_t handle)
{
	GList *l = d->cm_events.head;

	while (l) {
		GList *next = l->next;
		struct cm_event_node *node = l->data;

		if (node->ev.conn == handle) {
			g_free(node);
			g_queue_delete_link(&d->cm_events, l);
		}
		l = next;
	}
}

/* Frees the connection and its waiting events; its id is returned for the
 * caller to destroy once no event of it is unacknowledged. */
static struct rdma_cm_id *conn_free(struct rdma_dev *d, struct rdma_cm_conn *c)
{
	struct rdma_cm_id *id = c->id;

	if (c->qp)
		c->qp->conn = NULL;
	drop_queued_events(d, c->handle);
	rdma_table_del(&d->cm_conns, c->handle);
	g_free(c);
	return id;
}

/* The connection is over but its handle stays taken until the guest has
 * fetched its final event; returns the id to destroy, as conn_free. */
static struct rdma_cm_id *conn_retire(struct rdma_cm_conn *c)
{
	struct rdma_cm_id *id = c->id;

	if (c->qp)
		c->qp->conn = NULL;
	c->qp = NULL;
	c->id = NULL;
	c->state = CM_ENDED;
	return id;
}

/* The host QP to ERR, so that the guest's outstanding WQEs are flushed. */
static void qp_to_error(struct rdma_dev *d, struct rdma_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	if (qp && qp->state != VRDMA_QPS_ERR)
		(void)rdma_qp_modify(d, qp, &a, IBV_QP_STATE);
}

/*
 * The end of a connection: before it was established the guest hears the
 * outcome of its CM_CONNECT, afterwards that it closed.  A request the
 * guest was never told of (or its listen is gone) just goes.
 */
struct rdma_cm_id *rdma_cm_conn_end(struct rdma_dev *d, struct rdma_cm_conn *c, uint32_t status,
				    const struct rdma_conn_param *reject)
{
	struct vrdma_cm_event *ev;

	qp_to_error(d, c->qp);
	switch (c->state) {
	case CM_RESOLVING_ADDR:
	case CM_RESOLVING_ROUTE:
	case CM_CONNECTING:
		ev = rdma_cm_queue_event(d, VRDMA_CM_EV_CONNECT_REPLY, status ? status : VRDMA_EIO, c,
					 true);
		if (reject)
			event_pdata(ev, reject);
		break;
	case CM_CONNECTED:
	case CM_CLOSING:
		rdma_cm_queue_event(d, VRDMA_CM_EV_CLOSED, 0, c, true);
		break;
	case CM_REQUESTED:
		/* The peer gave up before the guest answered. */
		rdma_cm_queue_event(d, VRDMA_CM_EV_CLOSED, status, c, true);
		break;
	case CM_ENDED:
		return NULL;
	}
	return conn_retire(c);
}

/*
 * INIT again, RTR and RTS with what the connection manager negotiated.  The
 * first step sets the access rights the connection allows (remote READ when
 * this side has responder resources), as rdma_cm does before RTR: the
 * guest's own INIT may have had none (an active iWARP-style rdma_cm id asks
 * for none before it connects).
 */
static int qp_connect(struct rdma_dev *d, struct rdma_cm_conn *c)
{
	static const enum ibv_qp_state steps[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };

	for (size_t i = 0; i < G_N_ELEMENTS(steps); i++) {
		struct ibv_qp_attr a = { .qp_state = steps[i] };
		int mask = 0;

		if (rdma_init_qp_attr(c->id, &a, &mask))
			return errno ? errno : EINVAL;
		int r = rdma_qp_modify(d, c->qp, &a, mask);

		if (r)
			return r;
	}
	return 0;
}

static bool on_function(const struct rdma_dev *d, const struct rdma_cm_id *id)
{
	return id->verbs && strcmp(ibv_get_device_name(id->verbs->device),
				   ibv_get_device_name(d->sh->ctx->device)) == 0;
}

/* One host event of an active connection; returns an id to destroy. */
static struct rdma_cm_id *active_event(struct rdma_dev *d, struct rdma_cm_conn *c,
				       struct rdma_cm_event *e)
{
	struct vrdma_cm_event *ev;

	switch (e->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (c->state != CM_RESOLVING_ADDR)
			return NULL;
		if (!on_function(d, c->id))
			return rdma_cm_conn_end(d, c, VRDMA_ENETUNREACH, NULL);
		if (rdma_resolve_route(c->id, CM_TIMEOUT_MS))
			return rdma_cm_conn_end(d, c, 113 /* EHOSTUNREACH */, NULL);
		c->state = CM_RESOLVING_ROUTE;
		return NULL;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (c->state != CM_RESOLVING_ROUTE)
			return NULL;
		c->param.qp_num = c->qp->host_qpn;
		if (rdma_connect(c->id, &c->param))
			return rdma_cm_conn_end(d, c, 113 /* EHOSTUNREACH */, NULL);
		c->state = CM_CONNECTING;
		return NULL;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		if (c->state != CM_CONNECTING)
			return NULL;
		if (qp_connect(d, c) || rdma_establish(c->id)) {
			rdma_reject(c->id, NULL, 0);
			return rdma_cm_conn_end(d, c, VRDMA_EIO, NULL);
		}
		c->state = CM_CONNECTED;
		ev = rdma_cm_queue_event(d, VRDMA_CM_EV_CONNECT_REPLY, VRDMA_OK, c, false);
		event_pdata(ev, &e->param.conn);
		return NULL;
	case RDMA_CM_EVENT_REJECTED:
		return rdma_cm_conn_end(d, c, 111 /* ECONNREFUSED */, &e->param.conn);
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return rdma_cm_conn_end(d, c, 113 /* EHOSTUNREACH */, NULL);
	case RDMA_CM_EVENT_UNREACHABLE:
		return rdma_cm_conn_end(d, c, 110 /* ETIMEDOUT */, NULL);
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return rdma_cm_conn_end(d, c, 104 /* ECONNRESET */, NULL);
	default:
		return NULL;
	}
}

static struct rdma_cm_id *connect_request(struct rdma_dev *d, struct rdma_cm_event *e)
{
	struct rdma_cm_listen *l = e->listen_id->context;
	struct rdma_cm_conn *c;
	struct vrdma_cm_event *ev;

	if (!on_function(d, e->id) || d->cm_conns.count >= RDMA_CM_MAX_CONNS) {
		rdma_reject(e->id, NULL, 0);
		return e->id;
	}
	c = g_new0(struct rdma_cm_conn, 1);
	c->handle = rdma_table_add(&d->cm_conns, c, RDMA_CM_MAX_CONNS);
	if (!c->handle) {
		g_free(c);
		rdma_reject(e->id, NULL, 0);
		return e->id;
	}
	c->id = e->id;
	c->id->context = c;
	c->listen = l->handle;
	c->state = CM_REQUESTED;
	ev = rdma_cm_queue_event(d, VRDMA_CM_EV_CONNECT_REQUEST, VRDMA_OK, c, false);
	event_pdata(ev, &e->param.conn);
	return NULL;
}

static struct rdma_cm_id *host_event(struct rdma_dev *d, struct rdma_cm_event *e)
{
	struct rdma_cm_conn *c;

	if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		return connect_request(d, e);
	c = e->id->context;
	if (!c || c->state == CM_ENDED)
		return NULL;
	/*
	 * Its peer is moving (rdma-peer.c holds the QP): the peer's source
	 * tears its id down once the move is done, and the connection goes on
	 * with the destination, detached.  A hold that ends otherwise ends
	 * it (rdma_cm_conn_lost).
	 */
	if (c->state == CM_CONNECTED && c->qp && c->qp->held)
		return NULL;
	switch (e->event) {
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return rdma_cm_conn_end(d, c, VRDMA_OK, NULL);
	case RDMA_CM_EVENT_ESTABLISHED:
		/* Passive: the guest was told at CM_ACCEPT.  A disconnect it
		 * asked for before the RTU came sent nothing: send it now. */
		if (c->state == CM_CLOSING)
			rdma_disconnect(c->id);
		return NULL;
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		if (c->state == CM_CONNECTED || c->state == CM_CLOSING)
			return rdma_cm_conn_end(d, c, 104 /* ECONNRESET */, NULL);
		return active_event(d, c, e);
	default:
		return active_event(d, c, e);
	}
}

void rdma_cm_ready(struct vu_dev *vu, int fd, void *data)
{
	struct rdma_dev *d = data;
	struct rdma_cm_event *e;

	(void)vu;
	(void)fd;
	rdma_work_refill(d);
	while (rdma_get_cm_event(d->cm_chan, &e) == 0) {
		struct rdma_cm_id *gone = NULL;

		/* A listen id's own events (device removal) need nothing. */
		if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST ||
		    !g_hash_table_contains(d->cm_listen_ids, e->id))
			gone = host_event(d, e);
		rdma_ack_cm_event(e);
		rdma_cm_id_destroy(gone);
	}
	rdma_flush_events(d);
}

/* ---- commands ---- */

int rdma_cm_cmd_connect(struct rdma_dev *d, struct rdma_request *rq, struct vrdma_handle *resp)
{
	struct vrdma_cm_connect_req q;
	struct sockaddr_in src, dst;
	uint8_t ip[4];
	struct rdma_cm_conn *c;
	struct rdma_qp *qp;
	int r = rdma_check_cm_connect(rq, &d->sh->lim, &q);

	if (r)
		return r;
	qp = rdma_table_get(&d->qps, q.qp);
	if (!qp)
		return VRDMA_ENOENT;
	if (qp->state != VRDMA_QPS_INIT || qp->conn)
		return VRDMA_EINVAL;
	r = function_ipv4(d, ip);
	if (r)
		return r;
	c = g_new0(struct rdma_cm_conn, 1);
	c->handle = rdma_table_add(&d->cm_conns, c, RDMA_CM_MAX_CONNS);
	if (!c->handle) {
		g_free(c);
		return VRDMA_ENOSPC;
	}
	if (rdma_create_id(d->cm_chan, &c->id, c, RDMA_PS_TCP)) {
		c->id = NULL;
		conn_free(d, c);
		return VRDMA_ENOMEM;
	}
	to_sockaddr(&src, ip, 0);
	to_sockaddr(&dst, q.dst_ip, q.dst_port);
	if (rdma_resolve_addr(c->id, (struct sockaddr *)&src, (struct sockaddr *)&dst,
			      CM_TIMEOUT_MS)) {
		rdma_cm_id_destroy(conn_free(d, c));
		return VRDMA_ENETUNREACH;
	}
	memcpy(c->pdata, q.pdata, q.pdata_len);
	c->param = (struct rdma_conn_param){
		.private_data = q.pdata_len ? c->pdata : NULL,
		.private_data_len = q.pdata_len,
		.initiator_depth = q.ord,
		.responder_resources = q.ird,
		.retry_count = CM_RETRIES,
		.rnr_retry_count = CM_RETRIES,
	};
	c->state = CM_RESOLVING_ADDR;
	c->qp = qp;
	qp->conn = c;
	resp->handle = c->handle;
	return VRDMA_OK;
}

int rdma_cm_listen_on(struct rdma_dev *d, struct rdma_cm_listen *l)
{
	struct sockaddr_in src;
	uint8_t ip[4];
	int r = function_ipv4(d, ip);

	if (r)
		return r;
	to_sockaddr(&src, ip, l->port);
	if (rdma_create_id(d->cm_chan, &l->id, l, RDMA_PS_TCP)) {
		l->id = NULL;
		return VRDMA_ENOMEM;
	}
	if (rdma_bind_addr(l->id, (struct sockaddr *)&src))
		r = errno == EADDRINUSE ? VRDMA_EADDRINUSE : VRDMA_EADDRNOTAVAIL;
	else if (rdma_listen(l->id, l->backlog))
		r = errno == EADDRINUSE ? VRDMA_EADDRINUSE : VRDMA_EIO;
	if (r) {
		rdma_destroy_id(l->id);
		l->id = NULL;
		return r;
	}
	g_hash_table_add(d->cm_listen_ids, l->id);
	return VRDMA_OK;
}

int rdma_cm_cmd_listen(struct rdma_dev *d, struct rdma_request *rq, struct vrdma_handle *resp)
{
	static const uint8_t any[4];
	struct vrdma_cm_listen_req q;
	struct rdma_cm_listen *l;
	uint8_t ip[4];
	int r = rdma_check_cm_listen(rq, &q);

	if (r)
		return r;
	r = function_ipv4(d, ip);
	if (r)
		return r;
	if (memcmp(q.ip, any, 4) != 0 && memcmp(q.ip, ip, 4) != 0)
		return VRDMA_EADDRNOTAVAIL;
	l = g_new0(struct rdma_cm_listen, 1);
	l->handle = rdma_table_add(&d->cm_listens, l, RDMA_CM_MAX_LISTENS);
	if (!l->handle) {
		g_free(l);
		return VRDMA_ENOSPC;
	}
	l->port = q.port;
	l->backlog = q.backlog;
	r = rdma_cm_listen_on(d, l);
	if (r) {
		rdma_table_del(&d->cm_listens, l->handle);
		g_free(l);
		return r;
	}
	resp->handle = l->handle;
	return VRDMA_OK;
}

/* A connection the guest may still name: ended ones are not. */
static struct rdma_cm_conn *live_conn(struct rdma_dev *d, uint32_t handle)
{
	struct rdma_cm_conn *c = rdma_table_get(&d->cm_conns, handle);

	return c && c->state != CM_ENDED ? c : NULL;
}

static struct rdma_cm_conn *requested_conn(struct rdma_dev *d, uint32_t handle, int *ret_status)
{
	struct rdma_cm_conn *c = live_conn(d, handle);

	*ret_status = !c ? VRDMA_ENOENT : c->state != CM_REQUESTED ? VRDMA_EINVAL : VRDMA_OK;
	return *ret_status ? NULL : c;
}

int rdma_cm_cmd_accept(struct rdma_dev *d, struct rdma_request *rq)
{
	struct vrdma_cm_accept_req q;
	struct rdma_conn_param param;
	struct rdma_cm_conn *c;
	struct rdma_qp *qp;
	int r = rdma_check_cm_accept(rq, &d->sh->lim, &q);

	if (r)
		return r;
	c = requested_conn(d, q.conn, &r);
	if (!c)
		return r;
	/* From here a failed accept refuses the peer and frees the handle:
	 * the guest sees the error and forgets the request. */
	qp = rdma_table_get(&d->qps, q.qp);
	if (!qp)
		r = VRDMA_ENOENT;
	else if (qp->state != VRDMA_QPS_INIT || qp->conn)
		r = VRDMA_EINVAL;
	if (!r) {
		c->qp = qp;
		qp->conn = c;
		param = (struct rdma_conn_param){
			.private_data = q.pdata_len ? q.pdata : NULL,
			.private_data_len = q.pdata_len,
			.initiator_depth = q.ord,
			.responder_resources = q.ird,
			.rnr_retry_count = CM_RETRIES,
			.qp_num = qp->host_qpn,
		};
		if (qp_connect(d, c) || rdma_accept(c->id, &param))
			r = VRDMA_EIO;
	}
	if (r) {
		rdma_reject(c->id, NULL, 0);
		qp_to_error(d, c->qp);
		rdma_cm_id_destroy(conn_free(d, c));
		return r;
	}
	c->state = CM_CONNECTED;
	return VRDMA_OK;
}

int rdma_cm_cmd_reject(struct rdma_dev *d, struct rdma_request *rq)
{
	struct vrdma_cm_reject_req q;
	struct rdma_cm_conn *c;
	int r = rdma_check_cm_reject(rq, &q);

	if (r)
		return r;
	c = requested_conn(d, q.conn, &r);
	if (!c)
		return r;
	rdma_reject(c->id, q.pdata_len ? q.pdata : NULL, q.pdata_len);
	rdma_cm_id_destroy(conn_free(d, c));
	return VRDMA_OK;
}

int rdma_cm_cmd_disconnect(struct rdma_dev *d, struct rdma_request *rq)
{
	struct rdma_cm_conn *c;
	uint32_t h;
	int r = rdma_check_handle(rq, &h);

	if (r)
		return r;
	c = live_conn(d, h);
	if (!c)
		return VRDMA_ENOENT;
	if (c->state == CM_CLOSING)
		return VRDMA_OK;
	if (c->state != CM_CONNECTED)
		return VRDMA_EINVAL;
	if (c->detached) {
		rdma_cm_detached_close(d, c);
		return VRDMA_OK;
	}
	/* The host's DISCONNECTED (after the peer's reply or a timeout)
	 * ends it with a CLOSED event. */
	rdma_disconnect(c->id);
	qp_to_error(d, c->qp);
	c->state = CM_CLOSING;
	return VRDMA_OK;
}

static void listen_free(struct rdma_dev *d, struct rdma_cm_listen *l)
{
	if (l->id) {
		g_hash_table_remove(d->cm_listen_ids, l->id);
		rdma_destroy_id(l->id);
	}
	rdma_table_del(&d->cm_listens, l->handle);
	g_free(l);
}

int rdma_cm_cmd_destroy_listen(struct rdma_dev *d, struct rdma_request *rq)
{
	struct rdma_cm_listen *l;
	uint32_t h;
	int r = rdma_check_handle(rq, &h);

	if (r)
		return r;
	l = rdma_table_get(&d->cm_listens, h);
	if (!l)
		return VRDMA_ENOENT;
	listen_free(d, l);
	return VRDMA_OK;
}

int rdma_cm_cmd_get_event(struct rdma_dev *d, struct rdma_request *rq,
			  struct vrdma_cm_event *resp)
{
	g_autofree struct cm_event_node *node = NULL;
	struct rdma_cm_conn *c;
	int r = rdma_check_empty(rq);

	if (r)
		return r;
	node = g_queue_pop_head(&d->cm_events);
	if (!node)
		return VRDMA_ENOENT;
	*resp = node->ev;
	c = node->final ? rdma_table_get(&d->cm_conns, node->ev.conn) : NULL;
	if (c && c->state == CM_ENDED)
		conn_free(d, c);
	return VRDMA_OK;
}

/* ---- the QP side, and teardown ---- */

void rdma_cm_qp_gone(struct rdma_dev *d, struct rdma_qp *qp)
{
	struct rdma_cm_conn *c = qp->conn;

	if (!c)
		return;
	if (c->detached) {
		if (c->state == CM_CONNECTED)
			rdma_cm_detached_close(d, c);
		return;
	}
	c->qp = NULL;
	qp->conn = NULL;
	if (c->state == CM_CONNECTED) {
		rdma_disconnect(c->id);
		c->state = CM_CLOSING;
	} else if (c->state != CM_CLOSING) {
		rdma_cm_id_destroy(rdma_cm_conn_end(d, c, 103 /* ECONNABORTED */, NULL));
	}
}

void rdma_cm_destroy_all(struct rdma_dev *d)
{
	void *o;

	rdma_cm_detached_teardown(d);
	while ((o = rdma_table_any(&d->cm_conns)))
		rdma_cm_id_destroy(conn_free(d, o));
	while ((o = rdma_table_any(&d->cm_listens)))
		listen_free(d, o);
	g_queue_clear_full(&d->cm_events, g_free);
}

void rdma_cm_fini(struct rdma_dev *d)
{
	rdma_cm_destroy_all(d);
	rdma_table_free(&d->cm_conns);
	rdma_table_free(&d->cm_listens);
	if (d->cm_chan)
		rdma_destroy_event_channel(d->cm_chan);
	d->cm_chan = NULL;
}

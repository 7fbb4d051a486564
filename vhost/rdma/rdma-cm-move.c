// SPDX-License-Identifier: MIT
/*
 * rdma_cm connections across a live migration (docs/migration-rdma.md,
 * "Connections made by rdma_cm").  The host's rdma_cm ids cannot move: the
 * kernel's IB CM holds their state.  A connection whose QP moves connected
 * (to another QP of the guest, or to a peer whose back end holds it for
 * the move) goes on *detached*: its QP carries the data as before, and its
 * end, which IB CM would tell the peer with a DREQ, goes to the back end
 * behind the peer's GID by the peer protocol (DISCONNECT), which ends the
 * peer's connection as a DREQ would have.  The peer's connection is
 * detached too once its QP is retargeted at the moved QP (its host id,
 * connected to the source's, is torn down).
 *
 * A connection being made or closed at the stop cannot go on: on the
 * destination the guest gets the final event it would have had if the
 * peer had gone then.  Listens are made again at the destination
 * function's address, on the same port.
 */
#include <string.h>

#include "rdma-cm.h"
#include "rdma-internal.h"
#include "rdma-state.h"

static bool goes_on(const struct rdma_cm_conn *c)
{
	return c->state == CM_CONNECTED && c->qp && rdma_qp_state_connected(c->qp->state);
}

/* The final event of a connection that cannot go on. */
static void ending_event(struct rdma_cm_conn *c, struct vrdma_cm_event *ev)
{
	switch (c->state) {
	case CM_RESOLVING_ADDR:
	case CM_RESOLVING_ROUTE:
	case CM_CONNECTING:
		rdma_cm_event_fill(ev, VRDMA_CM_EV_CONNECT_REPLY, 104 /* ECONNRESET */, c);
		break;
	case CM_REQUESTED: /* the peer gave up before the guest answered */
		rdma_cm_event_fill(ev, VRDMA_CM_EV_CLOSED, 103 /* ECONNABORTED */, c);
		break;
	default:
		rdma_cm_event_fill(ev, VRDMA_CM_EV_CLOSED, 0, c);
	}
}

/* The source, stopped: nothing here changes, so that it can resume. */
void rdma_cm_save(struct rdma_dev *d, struct rdma_state_writer *w)
{
	bool ring = g_queue_is_empty(&d->cm_events);

	for (uint32_t i = 0; i < d->cm_listens.cap; i++) {
		const struct rdma_cm_listen *l = d->cm_listens.obj[i];

		if (l)
			rdma_state_put_cm_listen(w, &(struct rdma_state_cm_listen){
				.handle = l->handle, .port = l->port, .backlog = l->backlog });
	}
	for (uint32_t i = 0; i < d->cm_conns.cap; i++) {
		struct rdma_cm_conn *c = d->cm_conns.obj[i];
		struct rdma_state_cm_conn rec;

		if (!c)
			continue;
		rdma_cm_conn_addresses(c);
		rec = (struct rdma_state_cm_conn){
			.handle = c->handle, .listen = c->listen, .live = goes_on(c),
			.local_port = c->local_port, .remote_port = c->remote_port,
		};
		rec.qp = rec.live ? c->qp->handle : 0;
		memcpy(rec.local_ip, c->local_ip, 4);
		memcpy(rec.remote_ip, c->remote_ip, 4);
		rdma_state_put_cm_conn(w, &rec);
	}
	for (GList *l = d->cm_events.head; l; l = l->next) {
		const struct cm_event_node *node = l->data;

		rdma_state_put_cm_event(w, &(struct rdma_state_cm_event){ .ev = node->ev,
									.final = node->final });
	}
	for (uint32_t i = 0; i < d->cm_conns.cap; i++) {
		struct rdma_cm_conn *c = d->cm_conns.obj[i];
		struct rdma_state_cm_event e = { .final = true };

		if (!c || c->state == CM_ENDED || goes_on(c))
			continue;
		ending_event(c, &e.ev);
		e.ring = ring;
		ring = false;
		rdma_state_put_cm_event(w, &e);
	}
}

/* A listen whose port is taken here keeps its handle and hears nothing. */
int rdma_cm_restore_listen(struct rdma_dev *d, const struct rdma_state_cm_listen *rec)
{
	struct rdma_cm_listen *l = g_new0(struct rdma_cm_listen, 1);

	if (!d->cm_chan || rdma_table_add_at(&d->cm_listens, l, rec->handle)) {
		g_free(l);
		return VRDMA_EINVAL;
	}
	l->handle = rec->handle;
	l->port = rec->port;
	l->backlog = rec->backlog;
	(void)rdma_cm_listen_on(d, l);
	return VRDMA_OK;
}

int rdma_cm_restore_conn(struct rdma_dev *d, const struct rdma_state_cm_conn *rec)
{
	struct rdma_qp *qp = rec->live ? rdma_table_get(&d->qps, rec->qp) : NULL;
	struct rdma_cm_conn *c;

	if (!d->cm_chan || (rec->live && (!qp || qp->conn)))
		return VRDMA_EINVAL;
	c = g_new0(struct rdma_cm_conn, 1);
	if (rdma_table_add_at(&d->cm_conns, c, rec->handle)) {
		g_free(c);
		return VRDMA_EINVAL;
	}
	c->handle = rec->handle;
	c->listen = rec->listen;
	memcpy(c->local_ip, rec->local_ip, 4);
	memcpy(c->remote_ip, rec->remote_ip, 4);
	c->local_port = rec->local_port;
	c->remote_port = rec->remote_port;
	c->state = rec->live ? CM_CONNECTED : CM_ENDED;
	c->detached = rec->live;
	c->qp = qp;
	if (qp)
		qp->conn = c;
	return VRDMA_OK;
}

int rdma_cm_restore_event(struct rdma_dev *d, const struct rdma_state_cm_event *rec)
{
	struct cm_event_node *node;

	if (!rdma_table_get(&d->cm_conns, rec->ev.conn))
		return VRDMA_ENOENT;
	node = g_new0(struct cm_event_node, 1);
	node->ev = rec->ev;
	node->final = rec->final;
	if (rec->ring)
		rdma_post_event(d, VRDMA_EV_CM, 0, 0);
	g_queue_push_tail(&d->cm_events, node);
	return VRDMA_OK;
}

void rdma_cm_detached_close(struct rdma_dev *d, struct rdma_cm_conn *c)
{
	if (c->qp)
		rdma_peer_disconnect(d, &c->qp, 1);
	/* (In-process, the peer may have been this very connection.) */
	rdma_cm_id_destroy(rdma_cm_conn_end(d, c, VRDMA_OK, NULL));
}

void rdma_cm_detached_teardown(struct rdma_dev *d)
{
	g_autoptr(GPtrArray) qps = NULL;

	/* Stopped for a migration: its connections go on from the destination. */
	if (d->quiesced)
		return;
	qps = g_ptr_array_new();
	for (uint32_t i = 0; i < d->cm_conns.cap; i++) {
		const struct rdma_cm_conn *c = d->cm_conns.obj[i];

		if (c && c->detached && c->state == CM_CONNECTED && c->qp)
			g_ptr_array_add(qps, c->qp);
	}
	if (qps->len)
		rdma_peer_disconnect(d, (struct rdma_qp *const *)qps->pdata, qps->len);
}

void rdma_cm_peer_retargeted(struct rdma_qp *qp)
{
	struct rdma_cm_conn *c = qp->conn;
	struct rdma_cm_id *id;

	if (!c || c->state != CM_CONNECTED || c->detached)
		return;
	rdma_cm_conn_addresses(c);
	id = c->id;
	c->id = NULL;
	c->detached = true;
	rdma_cm_id_destroy(id);
}

uint32_t rdma_cm_peer_closed(struct rdma_qp *qp)
{
	struct rdma_cm_conn *c = qp->conn;

	if (!c || !c->detached || c->state != CM_CONNECTED)
		return ENOENT;
	rdma_cm_conn_lost(qp);
	rdma_flush_events(qp->dev);
	return 0;
}

void rdma_cm_conn_lost(struct rdma_qp *qp)
{
	struct rdma_cm_conn *c = qp->conn;

	if (c && c->state == CM_CONNECTED)
		rdma_cm_id_destroy(rdma_cm_conn_end(qp->dev, c, VRDMA_OK, NULL));
}

// SPDX-License-Identifier: MIT
/*
 * The device's objects across a live migration (spec section 10).  The
 * source, stopped and drained (rdma_quiesce), writes what the guest knows
 * of each object and where the device stood (rdma-state.h); the
 * destination makes each object again on its own function, under the same
 * handle, keys and QP number, and brings each QP to the state and packet
 * sequence numbers it had.  A QP whose peer is another QP of the same
 * guest moves with it and is connected to it again; the guest's driver
 * and its programs see nothing but the pause.
 */
#include <errno.h>
#include <string.h>

#include "rdma-internal.h"
#include "rdma-peer-wire.h"
#include "rdma-state.h"
#include "util.h"

/* What each transition on the way to RTS takes (IB's required attributes;
 * a transition refuses any attribute it does not allow). */
static uint32_t transition_mask(uint32_t to)
{
	switch (to) {
	case VRDMA_QPS_INIT:
		return VRDMA_QP_STATE | VRDMA_QP_PKEY_INDEX | VRDMA_QP_PORT | VRDMA_QP_ACCESS_FLAGS;
	case VRDMA_QPS_RTR:
		return VRDMA_QP_STATE | VRDMA_QP_AV | VRDMA_QP_PATH_MTU | VRDMA_QP_DEST_QPN |
		       VRDMA_QP_RQ_PSN | VRDMA_QP_MAX_DEST_RD_ATOMIC | VRDMA_QP_MIN_RNR_TIMER;
	case VRDMA_QPS_RTS:
		return VRDMA_QP_STATE | VRDMA_QP_SQ_PSN | VRDMA_QP_TIMEOUT | VRDMA_QP_RETRY_CNT |
		       VRDMA_QP_RNR_RETRY | VRDMA_QP_MAX_QP_RD_ATOMIC;
	default:
		return VRDMA_QP_STATE;
	}
}

/* Every attribute a QP in state has: the saved record's mask. */
static uint32_t mask_for_state(uint32_t state)
{
	uint32_t m = VRDMA_QP_STATE;

	for (uint32_t s = VRDMA_QPS_INIT; s <= VRDMA_QPS_RTS && s <= state; s++)
		m |= transition_mask(s);
	return state == VRDMA_QPS_ERR ? VRDMA_QP_STATE : m;
}

/* The QP's state and attributes now, as the MODIFY_QP that restores them:
 * the peer's number and the source GID as the guest named them. */
static int qp_attr_now(struct rdma_dev *d, struct rdma_qp *qp, struct vrdma_modify_qp_req *ret)
{
	int r;

	memset(ret, 0, sizeof(*ret));
	ret->qp = qp->handle;
	ret->attr_mask = mask_for_state(qp->state);
	ret->attr.qp_state = qp->state;
	if (qp->state == VRDMA_QPS_RESET || qp->state == VRDMA_QPS_ERR)
		return 0;
	r = rdma_qp_query(d, qp, &ret->attr);
	if (r)
		return -EIO;
	/* The device's view, not the host's transient one. */
	ret->attr.qp_state = qp->state;
	ret->attr.cur_qp_state = 0;
	return 0;
}

/* ---- saving ---- */

static void save_mr(struct rdma_state_writer *w, const struct rdma_mr *mr)
{
	unsigned int shift = mr->pages ? mr->pages->page_shift : 12;
	uint64_t page = 1ull << shift;
	struct rdma_state_mr rec = {
		.handle = mr->handle, .lkey = mr->lkey, .rkey = mr->rkey, .released = !mr->mr,
		.req = {
			.pd = mr->pd->handle, .access = mr->access, .iova = mr->iova,
			.length = mr->length, .page_shift = shift,
			.npages = (uint32_t)((((mr->iova & (page - 1)) + mr->length + page - 1)) >> shift),
		},
	};
	g_autofree uint64_t *pages = g_new0(uint64_t, rec.req.npages);

	/* A released MR keeps no pages: its list is any, its use none. */
	if (mr->pages)
		memcpy(pages, mr->pages->gpa, 8ull * rec.req.npages);
	else
		for (uint32_t i = 0; i < rec.req.npages; i++)
			pages[i] = i * page;
	rdma_state_put_mr(w, &rec, pages);
}

static void save_cq(struct rdma_state_writer *w, const struct rdma_cq *cq)
{
	struct rdma_state_cq rec = {
		.handle = cq->handle, .prod = cq->prod, .arm = cq->arm,
		.event_pending = cq->event_pending, .dead = cq->dead,
		.req = { .log2_slots = cq->log2_slots, .npages = cq->npages },
	};

	rdma_state_put_cq(w, &rec, cq->ring_gpas);
}

static int save_qp(struct rdma_dev *d, struct rdma_state_writer *w, struct rdma_qp *qp)
{
	struct rdma_state_qp rec = {
		.handle = qp->handle, .qpn = qp->qpn,
		.sq_next = qp->sq.next, .sq_tail = qp->sq.tail, .rq_tail = qp->rq.tail,
		.rings_gone = qp->rings_gone, .req = qp->create,
	};
	int r = qp_attr_now(d, qp, &rec.attr);

	if (!r)
		rdma_state_put_qp(w, &rec, qp->ring_gpas);
	return r;
}

/* A QP whose peer's back end holds the peer for this move: the peer, its
 * token, and the peer's rkeys if the peer had moved before. */
static void save_peer(struct rdma_state_writer *w, const struct rdma_qp *qp)
{
	struct rdma_state_peer rec = { .qp = qp->handle, .link = *qp->moving };
	uint32_t n = qp->remote_rkeys ? g_hash_table_size(qp->remote_rkeys) : 0;
	g_autofree struct rdma_peer_rkey *pairs = g_new(struct rdma_peer_rkey, n + 1);
	g_autofree uint8_t *bytes = NULL;
	GHashTableIter it;
	gpointer guest, host;

	n = 0;
	if (qp->remote_rkeys) {
		g_hash_table_iter_init(&it, qp->remote_rkeys);
		while (g_hash_table_iter_next(&it, &guest, &host) && n < RDMA_STATE_MAX_PEER_RKEYS)
			pairs[n++] = (struct rdma_peer_rkey){ GPOINTER_TO_UINT(guest),
							      GPOINTER_TO_UINT(host) };
	}
	bytes = g_malloc(8ull * n + 1);
	rdma_peer_rkeys_encode(pairs, n, bytes);
	rec.n_rkeys = n;
	rec.rkeys = bytes;
	rdma_state_put_peer(w, &rec);
}

int rdma_save_state(void *opaque, uint8_t **ret_data, size_t *ret_len)
{
	struct rdma_dev *d = opaque;
	struct rdma_state_writer w;
	int r = 0;

	/* Only a device stopped for migration stands still. */
	if (!d->quiesced)
		return -EBUSY;
	rdma_state_begin(&w, d->generation);
	for (uint32_t i = 0; i < d->pds.cap; i++)
		if (d->pds.obj[i])
			rdma_state_put_pd(&w, ((struct rdma_pd *)d->pds.obj[i])->handle);
	for (uint32_t i = 0; i < d->mrs.cap; i++)
		if (d->mrs.obj[i])
			save_mr(&w, d->mrs.obj[i]);
	for (uint32_t i = 0; i < d->cqs.cap; i++)
		if (d->cqs.obj[i])
			save_cq(&w, d->cqs.obj[i]);
	for (uint32_t i = 0; !r && i < d->qps.cap; i++)
		if (d->qps.obj[i])
			r = save_qp(d, &w, d->qps.obj[i]);
	for (GList *l = d->events.head; l; l = l->next)
		rdma_state_put_event(&w, l->data);
	for (uint32_t i = 0; i < d->qps.cap; i++) {
		const struct rdma_qp *qp = d->qps.obj[i];

		if (qp && qp->moving && rdma_qp_state_connected(qp->state))
			save_peer(&w, qp);
	}
	rdma_cm_save(d, &w);
	*ret_data = rdma_state_end(&w, ret_len);
	if (r)
		g_clear_pointer(ret_data, g_free);
	return r;
}

/* ---- loading ---- */

struct loading {
	struct rdma_dev *d;
	GArray *qps; /* struct rdma_state_qp, connected once all exist */
};

static int load_begin(void *opaque, uint32_t generation)
{
	struct loading *l = opaque;

	l->d->generation = generation;
	return 0;
}

static int load_pd(void *opaque, uint32_t handle)
{
	struct loading *l = opaque;
	uint32_t h;

	return rdma_pd_create(l->d, &(struct rdma_ids){ .handle = handle }, &h);
}

/* An MR whose memory had gone on the source: the handle and no more. */
static int load_released_mr(struct rdma_dev *d, const struct rdma_state_mr *rec)
{
	g_autofree struct rdma_mr *mr = g_new0(struct rdma_mr, 1);

	mr->pd = rdma_table_get(&d->pds, rec->req.pd);
	if (!mr->pd)
		return VRDMA_ENOENT;
	if (rdma_table_add_at(&d->mrs, mr, rec->handle))
		return VRDMA_EINVAL;
	mr->handle = rec->handle;
	mr->lkey = rec->lkey;
	mr->rkey = rec->rkey;
	mr->iova = rec->req.iova;
	mr->length = rec->req.length;
	mr->access = rec->req.access;
	mr->pd->users++;
	d->sh->used.mrs++;
	d->sh->used.pinned_bytes += mr->length;
	g_steal_pointer(&mr);
	return VRDMA_OK;
}

static int load_mr(void *opaque, struct rdma_state_mr *rec)
{
	struct loading *l = opaque;
	struct rdma_ids ids = { .handle = rec->handle, .lkey = rec->lkey, .rkey = rec->rkey };
	struct vrdma_reg_mr_resp resp;

	if (rec->released)
		return load_released_mr(l->d, rec);
	return rdma_mr_create(l->d, &rec->rq, &rec->req, &ids, &resp);
}

static int load_cq(void *opaque, struct rdma_state_cq *rec)
{
	struct loading *l = opaque;
	struct rdma_cq *cq;
	int r = rdma_cq_create(l->d, &rec->rq, &rec->req, &(struct rdma_ids){ .handle = rec->handle },
			       &cq);

	if (r)
		return r;
	cq->prod = rec->prod & cq->ring.mask;
	cq->arm = rec->arm;
	cq->event_pending = rec->event_pending;
	cq->dead = rec->dead;
	return VRDMA_OK;
}

static int load_qp(void *opaque, struct rdma_state_qp *rec)
{
	struct loading *l = opaque;
	struct rdma_ids ids = { .handle = rec->handle, .qpn = rec->qpn };
	struct rdma_qp *qp;
	int r = rdma_qp_create(l->d, &rec->rq, &rec->req, &ids, &qp);

	if (r)
		return r;
	/* Receives the source had posted and not completed are taken again
	 * from the ring; sends had drained (or the QP is in error). */
	qp->sq.next = qp->sq.tail = rec->sq_tail & qp->sq.ring.mask;
	qp->rq.next = qp->rq.tail = rec->rq_tail & qp->rq.ring.mask;
	qp->rings_gone = rec->rings_gone;
	rec->rq = (struct rdma_request){ 0 }; /* points into the state */
	g_array_append_val(l->qps, *rec);
	return VRDMA_OK;
}

/* The peer is connected to again once the QP is (retarget_peers). */
static int load_peer(void *opaque, const struct rdma_state_peer *rec)
{
	struct loading *l = opaque;
	struct rdma_qp *qp = rdma_table_get(&l->d->qps, rec->qp);
	g_autofree struct rdma_peer_rkey *pairs = NULL;

	if (!qp)
		return VRDMA_ENOENT;
	qp->moving = g_memdup2(&rec->link, sizeof(rec->link));
	pairs = g_new(struct rdma_peer_rkey, rec->n_rkeys + 1);
	rdma_peer_rkeys_decode(rec->rkeys, rec->n_rkeys, pairs);
	rdma_peer_set_remote_rkeys(qp, pairs, rec->n_rkeys);
	return VRDMA_OK;
}

static int load_event(void *opaque, const struct vrdma_event *ev)
{
	struct loading *l = opaque;

	rdma_post_event(l->d, ev->type, ev->handle, ev->data);
	return VRDMA_OK;
}

static int load_cm_listen(void *opaque, const struct rdma_state_cm_listen *rec)
{
	return rdma_cm_restore_listen(((struct loading *)opaque)->d, rec);
}

static int load_cm_conn(void *opaque, const struct rdma_state_cm_conn *rec)
{
	return rdma_cm_restore_conn(((struct loading *)opaque)->d, rec);
}

static int load_cm_event(void *opaque, const struct rdma_state_cm_event *rec)
{
	return rdma_cm_restore_event(((struct loading *)opaque)->d, rec);
}

/* A QP that moved with its peer was connected at the source's GID: here
 * the peer is at this function's (rdma_qp_apply then finds it by the
 * number the guest knows). */
static void peer_on_this_side(struct rdma_dev *d, struct vrdma_modify_qp_req *m)
{
	struct ibv_gid_entry own;

	for (uint32_t i = 0; i < d->qps.cap; i++) {
		struct rdma_qp *peer = d->qps.obj[i];

		if (!peer || peer->qpn != m->attr.dest_qp_num ||
		    rdma_gid_to_host(d->sh, m->attr.ah.sgid_index, &own) < 0)
			continue;
		memcpy(m->attr.ah.dgid, own.gid.raw, 16);
		return;
	}
}

/* A QP to the state it had, through each state on the way. */
static int restore_qp_state(struct rdma_dev *d, const struct rdma_state_qp *rec)
{
	static const uint32_t path[] = { VRDMA_QPS_INIT, VRDMA_QPS_RTR, VRDMA_QPS_RTS };
	struct rdma_qp *qp = rdma_table_get(&d->qps, rec->handle);
	struct vrdma_modify_qp_req m = rec->attr;
	uint32_t target = rec->attr.attr.qp_state;
	int r = VRDMA_OK;

	if (target == VRDMA_QPS_RESET)
		return VRDMA_OK;
	/* A peer elsewhere stays where it is (its number may be any). */
	if (!qp->moving)
		peer_on_this_side(d, &m);
	for (size_t i = 0; !r && target != VRDMA_QPS_ERR && i < G_N_ELEMENTS(path) &&
			   path[i] <= target; i++) {
		m.attr.qp_state = path[i];
		m.attr_mask = transition_mask(path[i]);
		r = rdma_qp_apply(d, qp, &m);
	}
	/* RESET goes nowhere but INIT: an error QP passes through it. */
	if (!r && target == VRDMA_QPS_ERR) {
		m.attr = (struct vrdma_qp_attr){ .qp_state = VRDMA_QPS_INIT, .port_num = 1 };
		m.attr_mask = VRDMA_QP_STATE | VRDMA_QP_PKEY_INDEX | VRDMA_QP_PORT |
			      VRDMA_QP_ACCESS_FLAGS;
		r = rdma_qp_apply(d, qp, &m);
		m.attr.qp_state = VRDMA_QPS_ERR;
		m.attr_mask = VRDMA_QP_STATE;
		if (!r)
			r = rdma_qp_apply(d, qp, &m);
	}
	return r;
}

int rdma_load_state(void *opaque, const uint8_t *data, size_t len)
{
	struct rdma_dev *d = opaque;
	uint32_t generation;
	int r;

	/* Only into a device that has nothing yet. */
	if (d->incoming || d->pds.count || d->mrs.count || d->cqs.count || d->qps.count)
		return -EBUSY;
	/* The device's statuses are errno values: the front end hears which. */
	r = rdma_state_check(data, len, &d->sh->lim, &d->sh->limit, &d->sh->used, &generation);
	if (r)
		return r < 0 ? r : -r;
	/* Made when the queues start: only then is guest memory known. */
	d->incoming = g_bytes_new(data, len);
	d->generation = generation;
	return 0;
}

int rdma_state_apply(struct rdma_dev *d)
{
	static const struct rdma_state_ops ops = {
		.begin = load_begin, .pd = load_pd, .mr = load_mr, .cq = load_cq, .qp = load_qp,
		.event = load_event, .peer = load_peer, .cm_listen = load_cm_listen,
		.cm_conn = load_cm_conn, .cm_event = load_cm_event,
	};
	g_autoptr(GBytes) state = g_steal_pointer(&d->incoming);
	struct loading l = { .d = d, .qps = g_array_new(FALSE, FALSE, sizeof(struct rdma_state_qp)) };
	size_t len;
	const uint8_t *data = g_bytes_get_data(state, &len);
	int r = rdma_state_decode(data, len, &d->sh->lim, &ops, &l);

	for (guint i = 0; !r && i < l.qps->len; i++)
		r = restore_qp_state(d, &g_array_index(l.qps, struct rdma_state_qp, i));
	g_array_free(l.qps, TRUE);
	if (r) {
		/* Nothing half-made stays, and the driver's session ends here
		 * as if nothing had moved (DEVICE_FATAL, a new generation). */
		rdma_destroy_all(d);
		g_queue_clear_full(&d->events, g_free);
		d->generation = d->sh->generation;
		return r < 0 ? r : -EINVAL;
	}
	/* Each QP whose peer's back end held the peer for this move has that
	 * peer connect to it now; one that fails alone goes to error. */
	rdma_peer_retarget_all(d);
	d->restored = true;
	return 0;
}

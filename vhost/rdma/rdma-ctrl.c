// SPDX-License-Identifier: MIT
/*
 * The control virtqueue: one command per element, executed in order on
 * the tenant's host function.  Requests are checked by rdma-check.c; here
 * handles become objects of this connection only, quotas are charged, and
 * each guest object becomes a real host object (PD, MR, CQ, QP).  The room
 * for the response is checked before a command runs, so a created object
 * is never lost for want of a place to report it.
 */
#include <errno.h>
#include <string.h>

#include "rdma-internal.h"
#include "util.h"

union rdma_resp {
	struct vrdma_device_attr dev;
	struct vrdma_port_attr port;
	struct vrdma_gid_resp gid;
	struct vrdma_handle handle;
	struct vrdma_reg_mr_resp mr;
	struct vrdma_create_cq_resp cq;
	struct vrdma_create_qp_resp qp;
	struct vrdma_qp_attr qp_attr;
	struct vrdma_cm_event cm_event;
};

typedef int (*rdma_cmd_fn)(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp);

static int host_status(int err)
{
	switch (err) {
	case EINVAL: return VRDMA_EINVAL;
	case ENOMEM: return VRDMA_ENOMEM;
	case EFAULT: return VRDMA_EFAULT;
	case EBUSY: return VRDMA_EBUSY;
	case EOPNOTSUPP: return VRDMA_EOPNOTSUPP;
	default: return VRDMA_EIO;
	}
}

/* The object of table t that a one-handle request names; NULL with
 * *ret_status set when there is none. */
static void *named_object(const struct rdma_request *rq, const struct rdma_table *t,
			  int *ret_status)
{
	void *o = NULL;
	uint32_t h;

	*ret_status = rdma_check_handle(rq, &h);
	if (!*ret_status)
		o = rdma_table_get(t, h);
	if (!*ret_status && !o)
		*ret_status = VRDMA_ENOENT;
	return o;
}

/* ---- queries ---- */

static int cmd_query_device(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	const struct rdma_shared *sh = d->sh;
	const struct ibv_device_attr *a = &sh->attr;
	struct vrdma_device_attr *o = &resp->dev;

	if (rq->len)
		return VRDMA_EINVAL;
	*o = (struct vrdma_device_attr){
		.fw_ver = 1,
		.node_guid = a->node_guid,
		.sys_image_guid = a->sys_image_guid,
		.max_mr_size = sh->lim.max_mr_size,
		.page_size_cap = 1u << 12 | 1u << 21,
		.vendor_id = 0x1af4, /* virtio */
		.vendor_part_id = VIRTIO_ID_RDMA,
		.hw_ver = 1,
		.max_qp = MIN((uint32_t)a->max_qp, sh->limit.qps),
		.max_qp_wr = sh->lim.max_qp_wr,
		.device_cap_flags = a->device_cap_flags & IBV_DEVICE_RC_RNR_NAK_GEN,
		.max_send_sge = sh->lim.max_send_sge,
		.max_recv_sge = sh->lim.max_recv_sge,
		.max_cq = MIN((uint32_t)a->max_cq, sh->limit.cqs),
		.max_cqe = sh->lim.max_cqe,
		.max_mr = MIN((uint32_t)a->max_mr, sh->limit.mrs),
		.max_pd = MIN((uint32_t)a->max_pd, sh->limit.pds),
		.max_qp_rd_atom = sh->lim.max_rd_atom,
		.max_qp_init_rd_atom = sh->lim.max_rd_atom,
		.max_inline_data = sh->lim.max_inline,
		.atomic_cap = sh->lim.atomics ? 1 : 0,
		.phys_port_cnt = 1,
	};
	return VRDMA_OK;
}

static int cmd_query_port(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	struct ibv_port_attr p;
	int r = rdma_check_port(rq);

	if (r)
		return r;
	r = ibv_query_port(d->sh->ctx, 1, &p);
	if (r)
		return host_status(r);
	resp->port = (struct vrdma_port_attr){
		.state = p.state,
		.max_mtu = p.max_mtu,
		.active_mtu = p.active_mtu,
		.gid_tbl_len = MIN((uint32_t)p.gid_tbl_len, d->sh->lim.gid_tbl_len),
		.port_cap_flags = 0,
		.max_msg_sz = MIN(p.max_msg_sz, RDMA_MAX_MSG),
		.pkey_tbl_len = 1,
		.active_width = p.active_width,
		.active_speed = p.active_speed,
		.phys_state = p.phys_state,
		.link_layer = IBV_LINK_LAYER_ETHERNET,
	};
	return VRDMA_OK;
}

static int cmd_query_gid(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	struct ibv_gid_entry e;
	uint16_t index;
	int r = rdma_check_gid(rq, &d->sh->lim, &index);

	if (r)
		return r;
	memset(&resp->gid, 0, sizeof(resp->gid));
	/* The guest's table (section 8): its entry not on the function now
	 * (the address went away) reads as empty, type 0. */
	if (rdma_gid_to_host(d->sh, index, &e) < 0)
		return VRDMA_OK;
	memcpy(resp->gid.gid, e.gid.raw, 16);
	resp->gid.type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? VRDMA_GID_ROCE_V2 : VRDMA_GID_ROCE_V1;
	return VRDMA_OK;
}

/* ---- PD ---- */

/* The object's handle: a new one, or the one a migrated guest holds. */
static uint32_t add_object(struct rdma_table *t, void *obj, const struct rdma_ids *ids)
{
	if (!ids)
		return rdma_table_add(t, obj, UINT32_MAX);
	return rdma_table_add_at(t, obj, ids->handle) ? 0 : ids->handle;
}

int rdma_pd_create(struct rdma_dev *d, const struct rdma_ids *ids, uint32_t *ret_handle)
{
	struct rdma_shared *sh = d->sh;
	g_autofree struct rdma_pd *pd = NULL;

	if (sh->used.pds >= sh->limit.pds)
		return VRDMA_ENOSPC;
	pd = g_new0(struct rdma_pd, 1);
	pd->pd = ibv_alloc_pd(sh->ctx);
	if (!pd->pd)
		return host_status(errno);
	pd->handle = add_object(&d->pds, pd, ids);
	if (!pd->handle) {
		ibv_dealloc_pd(pd->pd);
		return ids ? VRDMA_EINVAL : VRDMA_ENOSPC;
	}
	sh->used.pds++;
	*ret_handle = pd->handle;
	g_steal_pointer(&pd);
	return VRDMA_OK;
}

static int cmd_create_pd(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	if (rq->len)
		return VRDMA_EINVAL;
	return rdma_pd_create(d, NULL, &resp->handle.handle);
}

static void pd_destroy(struct rdma_dev *d, struct rdma_pd *pd)
{
	ibv_dealloc_pd(pd->pd);
	rdma_table_del(&d->pds, pd->handle);
	d->sh->used.pds--;
	g_free(pd);
}

static int cmd_destroy_pd(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	int r;
	struct rdma_pd *pd = named_object(rq, &d->pds, &r);

	(void)resp;
	if (r)
		return r;
	if (pd->users)
		return VRDMA_EBUSY;
	pd_destroy(d, pd);
	return VRDMA_OK;
}

/* ---- MR ---- */

static int mr_register(struct rdma_dev *d, struct rdma_mr *mr, struct rdma_request *rq,
		       const struct vrdma_reg_mr_req *m)
{
	g_autofree uint64_t *pages = rdma_request_pages(rq, 0, rq->npages);
	int r = rdma_pages_map(d, pages, rq->npages, m->page_shift, false, &mr->pages);

	if (r < 0)
		return r == -EFAULT || r == -EINVAL ? VRDMA_EFAULT
		       : r == -ENOSPC		    ? VRDMA_ENOSPC
						    : host_status(-r);
	/* Keyed at the guest's own virtual address: the host device checks
	 * every access against the guest's view of its buffer. */
	mr->mr = ibv_reg_mr_iova(mr->pd->pd, mr->pages->addr + mr->first_offset, m->length, m->iova,
				 (int)m->access);
	if (!mr->mr) {
		r = errno;
		rdma_pages_unmap(d, &mr->pages);
		return host_status(r);
	}
	return VRDMA_OK;
}

/*
 * The guest's keys of a new MR: the host's own, unless a moved MR holds
 * that lkey as its guest key already (keys of moved MRs are the source
 * function's); then the host is asked again, the colliding registrations
 * kept meanwhile so that it hands out others.
 */
#define KEY_TRIES 8

static int register_unique(struct rdma_dev *d, struct rdma_mr *mr, struct rdma_request *rq,
			   const struct vrdma_reg_mr_req *m)
{
	struct ibv_mr *held[KEY_TRIES];
	unsigned int nheld = 0;
	int r;

	for (;;) {
		r = mr_register(d, mr, rq, m);
		if (r || (!g_hash_table_contains(d->mr_by_lkey, GUINT_TO_POINTER(mr->mr->lkey)) &&
			  !g_hash_table_contains(d->mr_by_rkey, GUINT_TO_POINTER(mr->mr->rkey))))
			break;
		if (nheld == KEY_TRIES) {
			ibv_dereg_mr(mr->mr);
			rdma_pages_unmap(d, &mr->pages);
			r = VRDMA_EBUSY;
			break;
		}
		held[nheld++] = mr->mr;
		rdma_pages_unmap(d, &mr->pages);
	}
	while (nheld)
		ibv_dereg_mr(held[--nheld]);
	return r;
}

int rdma_mr_create(struct rdma_dev *d, struct rdma_request *rq, const struct vrdma_reg_mr_req *req,
		   const struct rdma_ids *ids, struct vrdma_reg_mr_resp *resp)
{
	struct rdma_shared *sh = d->sh;
	g_autofree struct rdma_mr *mr = NULL;
	struct vrdma_reg_mr_req m = *req;
	int r;

	if (ids && (g_hash_table_contains(d->mr_by_lkey, GUINT_TO_POINTER(ids->lkey)) ||
		    (ids->rkey && g_hash_table_contains(d->mr_by_rkey, GUINT_TO_POINTER(ids->rkey)))))
		return VRDMA_EINVAL;
	mr = g_new0(struct rdma_mr, 1);
	mr->pd = rdma_table_get(&d->pds, m.pd);
	if (!mr->pd)
		return VRDMA_ENOENT;
	if (sh->used.mrs >= sh->limit.mrs || m.length > sh->limit.pinned_bytes - sh->used.pinned_bytes)
		return VRDMA_ENOSPC;
	mr->iova = m.iova;
	mr->length = m.length;
	mr->access = m.access;
	mr->first_offset = m.iova & ((1ull << m.page_shift) - 1);
	r = ids ? mr_register(d, mr, rq, &m) : register_unique(d, mr, rq, &m);
	if (r)
		return r;
	mr->handle = add_object(&d->mrs, mr, ids);
	if (!mr->handle) {
		ibv_dereg_mr(mr->mr);
		rdma_pages_unmap(d, &mr->pages);
		return ids ? VRDMA_EINVAL : VRDMA_ENOSPC;
	}
	sh->used.mrs++;
	sh->used.pinned_bytes += m.length;
	mr->pd->users++;
	mr->lkey = ids ? ids->lkey : mr->mr->lkey;
	mr->rkey = ids ? ids->rkey
		       : m.access & ~(uint32_t)VRDMA_ACCESS_LOCAL_WRITE ? mr->mr->rkey : 0;
	g_hash_table_insert(d->mr_by_lkey, GUINT_TO_POINTER(mr->lkey), mr);
	if (mr->rkey)
		g_hash_table_insert(d->mr_by_rkey, GUINT_TO_POINTER(mr->rkey), mr);
	*resp = (struct vrdma_reg_mr_resp){ .mr = mr->handle, .lkey = mr->lkey, .rkey = mr->rkey };
	g_steal_pointer(&mr);
	return VRDMA_OK;
}

static int cmd_reg_mr(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	struct vrdma_reg_mr_req m;
	int r = rdma_check_reg_mr(rq, &d->sh->lim, &m);

	return r ? r : rdma_mr_create(d, rq, &m, NULL, &resp->mr);
}

/* Lets go of the host registration and the mapping; the handle lives on
 * until the guest deregisters (after its memory vanished, say). */
void rdma_mr_release(struct rdma_dev *d, struct rdma_mr *mr)
{
	if (!mr->mr)
		return;
	g_hash_table_remove(d->mr_by_lkey, GUINT_TO_POINTER(mr->lkey));
	if (mr->rkey)
		g_hash_table_remove(d->mr_by_rkey, GUINT_TO_POINTER(mr->rkey));
	ibv_dereg_mr(mr->mr);
	mr->mr = NULL;
	rdma_pages_unmap(d, &mr->pages);
}

static void mr_destroy(struct rdma_dev *d, struct rdma_mr *mr)
{
	rdma_mr_release(d, mr);
	rdma_table_del(&d->mrs, mr->handle);
	d->sh->used.mrs--;
	d->sh->used.pinned_bytes -= mr->length;
	mr->pd->users--;
	g_free(mr);
}

static int cmd_dereg_mr(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	int r;
	struct rdma_mr *mr = named_object(rq, &d->mrs, &r);

	(void)resp;
	if (r)
		return r;
	mr_destroy(d, mr);
	return VRDMA_OK;
}

/* ---- CQ ---- */

int rdma_cq_create(struct rdma_dev *d, struct rdma_request *rq, const struct vrdma_create_cq_req *req,
		   const struct rdma_ids *ids, struct rdma_cq **ret_cq)
{
	struct rdma_shared *sh = d->sh;
	g_autofree struct rdma_cq *cq = NULL;
	g_autofree uint64_t *pages = NULL;
	struct vrdma_create_cq_req c = *req;
	int host_cqe;
	int r;

	if (sh->used.cqs >= sh->limit.cqs)
		return VRDMA_ENOSPC;
	cq = g_new0(struct rdma_cq, 1);
	cq->dev = d;
	pages = rdma_request_pages(rq, 0, rq->npages);
	r = rdma_ring_init(d, &cq->ring, pages, rq->npages, c.log2_slots, VRDMA_CQE_SLOT_LOG2);
	if (r)
		return r;
	cq->capacity = cq->ring.mask;
	/* Room for the completions the device asks for on its own, too. */
	host_cqe = (int)MIN(2ull * cq->capacity, (uint64_t)sh->attr.max_cqe);
	cq->cq = ibv_create_cq(sh->ctx, host_cqe, cq, d->chan, 0);
	if (!cq->cq || ibv_req_notify_cq(cq->cq, 0)) {
		r = host_status(errno);
		if (cq->cq)
			ibv_destroy_cq(cq->cq);
		rdma_ring_fini(d, &cq->ring);
		return r;
	}
	cq->handle = add_object(&d->cqs, cq, ids);
	if (!cq->handle) {
		ibv_destroy_cq(cq->cq);
		rdma_ring_fini(d, &cq->ring);
		return ids ? VRDMA_EINVAL : VRDMA_ENOSPC;
	}
	sh->used.cqs++;
	cq->log2_slots = c.log2_slots;
	cq->npages = c.npages;
	cq->ring_gpas = g_steal_pointer(&pages);
	*ret_cq = g_steal_pointer(&cq);
	return VRDMA_OK;
}

static int cmd_create_cq(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	struct vrdma_create_cq_req c;
	struct rdma_cq *cq;
	int r = rdma_check_create_cq(rq, &d->sh->lim, &c);

	if (!r)
		r = rdma_cq_create(d, rq, &c, NULL, &cq);
	if (!r)
		resp->cq = (struct vrdma_create_cq_resp){ .cq = cq->handle, .cqe = cq->capacity };
	return r;
}

static void cq_destroy(struct rdma_dev *d, struct rdma_cq *cq)
{
	ibv_destroy_cq(cq->cq);
	rdma_ring_fini(d, &cq->ring);
	g_free(cq->ring_gpas);
	rdma_table_del(&d->cqs, cq->handle);
	d->sh->used.cqs--;
	g_free(cq);
}

static int cmd_destroy_cq(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	int r;
	struct rdma_cq *cq = named_object(rq, &d->cqs, &r);

	(void)resp;
	if (r)
		return r;
	if (cq->users)
		return VRDMA_EBUSY;
	cq_destroy(d, cq);
	return VRDMA_OK;
}

/* ---- QP ---- */

static void qp_free(struct rdma_dev *d, struct rdma_qp *qp)
{
	rdma_peer_qp_free(qp);
	if (qp->qp)
		ibv_destroy_qp(qp->qp);
	rdma_ring_fini(d, &qp->sq.ring);
	rdma_ring_fini(d, &qp->rq.ring);
	rdma_wq_fini(&qp->sq);
	rdma_wq_fini(&qp->rq);
	g_free(qp->ring_gpas);
	g_free(qp);
}

static int qp_rings(struct rdma_dev *d, struct rdma_qp *qp, struct rdma_request *rq,
		    const struct vrdma_create_qp_req *q)
{
	g_autofree uint64_t *sq_pages = rdma_request_pages(rq, 0, q->sq_npages);
	g_autofree uint64_t *rq_pages = rdma_request_pages(rq, q->sq_npages, q->rq_npages);
	int r = rdma_ring_init(d, &qp->sq.ring, sq_pages, q->sq_npages, q->sq_log2_slots,
			       q->sq_log2_slot_size);

	if (!r)
		r = rdma_ring_init(d, &qp->rq.ring, rq_pages, q->rq_npages, q->rq_log2_slots,
				   q->rq_log2_slot_size);
	if (!r)
		r = rdma_wq_init(&qp->sq, q->max_send_sge);
	if (!r)
		r = rdma_wq_init(&qp->rq, q->max_recv_sge);
	return r;
}

static int qp_create_host(struct rdma_qp *qp, const struct vrdma_create_qp_req *q)
{
	struct ibv_qp_init_attr init = {
		.qp_context = qp,
		.send_cq = qp->scq->cq,
		.recv_cq = qp->rcq->cq,
		.cap = {
			.max_send_wr = qp->sq.ring.mask,
			.max_recv_wr = qp->rq.ring.mask,
			.max_send_sge = q->max_send_sge,
			.max_recv_sge = q->max_recv_sge,
			.max_inline_data = q->max_inline_data,
		},
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0, /* the device signals what the guest asks for */
	};

	qp->qp = ibv_create_qp(qp->pd->pd, &init);
	if (!qp->qp)
		return host_status(errno);
	qp->host_qpn = qp->qp->qp_num;
	return VRDMA_OK;
}

/* A QP number the guest holds already: a moved QP's (its source's). */
static bool guest_qpn_taken(const struct rdma_dev *d, uint32_t qpn)
{
	for (uint32_t i = 0; i < d->qps.cap; i++) {
		const struct rdma_qp *qp = d->qps.obj[i];

		if (qp && qp->qpn == qpn)
			return true;
	}
	return false;
}

/*
 * The host QP, and the number the guest knows it by: the host's own,
 * unless a moved QP holds it already (then the host is asked again, the
 * colliding QPs kept meanwhile), or the moved QP's own (ids).
 */
static int qp_create_unique(struct rdma_dev *d, struct rdma_qp *qp,
			    const struct vrdma_create_qp_req *q, const struct rdma_ids *ids)
{
	struct ibv_qp *held[KEY_TRIES];
	unsigned int nheld = 0;
	int r;

	for (;;) {
		r = qp_create_host(qp, q);
		if (r || ids || !guest_qpn_taken(d, qp->host_qpn))
			break;
		if (nheld == KEY_TRIES) {
			ibv_destroy_qp(g_steal_pointer(&qp->qp));
			r = VRDMA_EBUSY;
			break;
		}
		held[nheld++] = g_steal_pointer(&qp->qp);
	}
	while (nheld)
		ibv_destroy_qp(held[--nheld]);
	if (!r)
		qp->qpn = ids ? ids->qpn : qp->host_qpn;
	return r;
}

int rdma_qp_create(struct rdma_dev *d, struct rdma_request *rq, const struct vrdma_create_qp_req *req,
		   const struct rdma_ids *ids, struct rdma_qp **ret_qp)
{
	struct rdma_shared *sh = d->sh;
	struct vrdma_create_qp_req q = *req;
	struct rdma_qp *qp;
	uint64_t wrs;
	int r = 0;

	if (ids && guest_qpn_taken(d, ids->qpn))
		return VRDMA_EINVAL;
	qp = g_new0(struct rdma_qp, 1);
	qp->dev = d;
	qp->pd = rdma_table_get(&d->pds, q.pd);
	qp->scq = rdma_table_get(&d->cqs, q.send_cq);
	qp->rcq = rdma_table_get(&d->cqs, q.recv_cq);
	wrs = (1ull << q.sq_log2_slots) + (1ull << q.rq_log2_slots) - 2;
	if (!qp->pd || !qp->scq || !qp->rcq)
		r = VRDMA_ENOENT;
	else if (sh->used.qps >= sh->limit.qps || wrs > sh->limit.wrs - sh->used.wrs)
		r = VRDMA_ENOSPC;
	if (!r)
		r = qp_rings(d, qp, rq, &q);
	if (!r)
		r = qp_create_unique(d, qp, &q, ids);
	if (!r) {
		qp->handle = add_object(&d->qps, qp, ids);
		r = qp->handle ? VRDMA_OK : ids ? VRDMA_EINVAL : VRDMA_ENOSPC;
	}
	if (r) {
		qp_free(d, qp);
		return r;
	}
	rdma_qp_new_incarnation(d, qp);
	qp->create = q;
	qp->ring_gpas = rdma_request_pages(rq, 0, (uint64_t)q.sq_npages + q.rq_npages);
	qp->max_inline = q.max_inline_data;
	qp->sig_all = q.sq_sig_all;
	qp->wrs = wrs;
	qp->state = VRDMA_QPS_RESET;
	qp->pd->users++;
	qp->scq->users++;
	qp->rcq->users++;
	sh->used.qps++;
	sh->used.wrs += wrs;
	g_hash_table_insert(d->qp_by_qpn, GUINT_TO_POINTER(qp->host_qpn), qp);
	rdma_poll_timer_update(d);
	*ret_qp = qp;
	return VRDMA_OK;
}

static int cmd_create_qp(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	struct vrdma_create_qp_req q;
	struct rdma_qp *qp;
	int r = rdma_check_create_qp(rq, &d->sh->lim, &q);

	if (!r)
		r = rdma_qp_create(d, rq, &q, NULL, &qp);
	if (!r)
		resp->qp = (struct vrdma_create_qp_resp){
			.qp = qp->handle, .qpn = qp->qpn,
			.max_send_wr = qp->sq.ring.mask, .max_recv_wr = qp->rq.ring.mask,
			.max_send_sge = q.max_send_sge, .max_recv_sge = q.max_recv_sge,
			.max_inline_data = q.max_inline_data,
		};
	return r;
}

static void qp_destroy(struct rdma_dev *d, struct rdma_qp *qp)
{
	rdma_cm_qp_gone(d, qp);
	g_hash_table_remove(d->qp_by_qpn, GUINT_TO_POINTER(qp->host_qpn));
	rdma_table_del(&d->qps, qp->handle);
	qp->pd->users--;
	qp->scq->users--;
	qp->rcq->users--;
	d->sh->used.qps--;
	d->sh->used.wrs -= qp->wrs;
	qp_free(d, qp);
	rdma_poll_timer_update(d);
}

static int cmd_destroy_qp(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	int r;
	struct rdma_qp *qp = named_object(rq, &d->qps, &r);

	(void)resp;
	if (r)
		return r;
	qp_destroy(d, qp);
	return VRDMA_OK;
}

static void attr_to_host(const struct vrdma_qp_attr *a, struct ibv_qp_attr *h)
{
	*h = (struct ibv_qp_attr){
		.qp_state = a->qp_state,
		.cur_qp_state = a->cur_qp_state,
		.path_mtu = a->path_mtu,
		.qkey = a->qkey,
		.rq_psn = a->rq_psn,
		.sq_psn = a->sq_psn,
		.dest_qp_num = a->dest_qp_num,
		.qp_access_flags = a->qp_access_flags,
		.pkey_index = a->pkey_index,
		.port_num = 1,
		.max_rd_atomic = a->max_rd_atomic,
		.max_dest_rd_atomic = a->max_dest_rd_atomic,
		.min_rnr_timer = a->min_rnr_timer,
		.timeout = a->timeout,
		.retry_cnt = a->retry_cnt,
		.rnr_retry = a->rnr_retry,
		.ah_attr = {
			.is_global = 1,
			.port_num = 1,
			.sl = a->ah.sl,
			.grh = {
				.flow_label = a->ah.flow_label,
				.sgid_index = a->ah.sgid_index,
				.hop_limit = a->ah.hop_limit,
				.traffic_class = a->ah.traffic_class,
			},
		},
	};
	memcpy(h->ah_attr.grh.dgid.raw, a->ah.dgid, 16);
}

/*
 * The host's number of a peer the guest names: a QP of this guest at the
 * guest's own GID is named by the number the guest knows, which after a
 * migration is not the host's; any other peer is the host's business.
 */
static uint32_t peer_host_qpn(const struct rdma_dev *d, const struct vrdma_qp_attr *a,
			      const struct ibv_gid_entry *own)
{
	if (memcmp(own->gid.raw, a->ah.dgid, 16))
		return a->dest_qp_num;
	for (uint32_t i = 0; i < d->qps.cap; i++) {
		const struct rdma_qp *peer = d->qps.obj[i];

		if (peer && peer->qpn == a->dest_qp_num)
			return peer->host_qpn;
	}
	return a->dest_qp_num;
}

int rdma_qp_apply(struct rdma_dev *d, struct rdma_qp *qp, const struct vrdma_modify_qp_req *req)
{
	struct vrdma_modify_qp_req m = *req;
	struct ibv_gid_entry own;
	struct ibv_qp_attr attr;
	int r;

	attr_to_host(&m.attr, &attr);
	/* The source GID is an entry of the guest's table, never a raw index
	 * into the function's: other GIDs there are not the tenant's. */
	if (m.attr_mask & VRDMA_QP_AV) {
		r = rdma_gid_to_host(d->sh, m.attr.ah.sgid_index, &own);
		if (r < 0)
			return VRDMA_EADDRNOTAVAIL;
		attr.ah_attr.grh.sgid_index = (uint8_t)r;
		/* A moved QP's peer elsewhere is named by its host's number,
		 * which may be any, one of this guest's included. */
		if ((m.attr_mask & VRDMA_QP_DEST_QPN) && !qp->moving)
			attr.dest_qp_num = peer_host_qpn(d, &m.attr, &own);
	}
	/* The device has one port and one P_Key: a move to INIT that leaves
	 * them out (as rdma_cm's iWARP-style INIT does) gets them. */
	if ((m.attr_mask & VRDMA_QP_STATE) && m.attr.qp_state == VRDMA_QPS_INIT &&
	    qp->state == VRDMA_QPS_RESET)
		m.attr_mask |= VRDMA_QP_PKEY_INDEX | VRDMA_QP_PORT;
	r = rdma_qp_modify(d, qp, &attr, (int)m.attr_mask);
	return r ? host_status(r) : VRDMA_OK;
}

static int cmd_modify_qp(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	struct vrdma_modify_qp_req m;
	struct rdma_qp *qp;
	int r = rdma_check_modify_qp(rq, &d->sh->lim, &m);

	(void)resp;
	if (r)
		return r;
	qp = rdma_table_get(&d->qps, m.qp);
	return qp ? rdma_qp_apply(d, qp, &m) : VRDMA_ENOENT;
}

int rdma_qp_modify(struct rdma_dev *d, struct rdma_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	int r = ibv_modify_qp(qp->qp, attr, mask);

	if (r)
		return r;
	if (mask & IBV_QP_STATE) {
		qp->state = attr->qp_state;
		if (qp->state == VRDMA_QPS_RESET)
			rdma_qp_rings_reset(d, qp);
		if (qp->state == VRDMA_QPS_RTR)
			qp->peer_local = rdma_qp_peer_is_local(d, qp);
	}
	rdma_rq_fill(d, qp);
	rdma_sq_take(d, qp);
	return 0;
}

/*
 * The QP of this instance a connected QP is connected to, or NULL: its
 * destination QP number is one of this instance's host QPs, at the GID the
 * QP sends from (a QP number alone could be any host's).
 */
static struct rdma_qp *local_peer(const struct rdma_dev *d, const struct rdma_qp *qp,
				  const struct ibv_qp_attr *h)
{
	struct ibv_gid_entry own;
	struct rdma_qp *peer;
	int guest_index;

	if (!rdma_qp_state_connected(qp->state))
		return NULL;
	peer = g_hash_table_lookup(d->qp_by_qpn, GUINT_TO_POINTER(h->dest_qp_num));
	guest_index = rdma_gid_from_host(d->sh, h->ah_attr.grh.sgid_index);
	if (!peer || guest_index < 0 || rdma_gid_to_host(d->sh, (uint32_t)guest_index, &own) < 0 ||
	    memcmp(own.gid.raw, h->ah_attr.grh.dgid.raw, 16))
		return NULL;
	return peer;
}

bool rdma_qp_peer_is_local(const struct rdma_dev *d, const struct rdma_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr h;

	return !ibv_query_qp(qp->qp, &h, IBV_QP_DEST_QPN | IBV_QP_AV, &init) &&
	       local_peer(d, qp, &h);
}

int rdma_qp_query(struct rdma_dev *d, struct rdma_qp *qp, struct vrdma_qp_attr *a)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr h;
	const struct rdma_qp *peer;
	int r, sgid;

	r = ibv_query_qp(qp->qp, &h, (int)VRDMA_QP_ATTR_SUPPORTED, &init);
	if (r)
		return host_status(r);
	peer = local_peer(d, qp, &h);
	sgid = rdma_gid_from_host(d->sh, h.ah_attr.grh.sgid_index);
	*a = (struct vrdma_qp_attr){
		.qp_state = h.qp_state,
		.cur_qp_state = h.cur_qp_state,
		.path_mtu = h.path_mtu,
		.qkey = h.qkey,
		.rq_psn = h.rq_psn,
		.sq_psn = h.sq_psn,
		/* the peer as the guest knows it, if it is one of the guest's */
		.dest_qp_num = peer ? peer->qpn : h.dest_qp_num,
		.qp_access_flags = (uint32_t)h.qp_access_flags & VRDMA_ACCESS_ALL,
		.pkey_index = h.pkey_index,
		.port_num = 1,
		.max_rd_atomic = h.max_rd_atomic,
		.max_dest_rd_atomic = h.max_dest_rd_atomic,
		.min_rnr_timer = h.min_rnr_timer,
		.timeout = h.timeout,
		.retry_cnt = h.retry_cnt,
		.rnr_retry = h.rnr_retry,
		.ah = {
			.flow_label = h.ah_attr.grh.flow_label,
			.sgid_index = (uint8_t)MAX(sgid, 0),
			.hop_limit = h.ah_attr.grh.hop_limit,
			.traffic_class = h.ah_attr.grh.traffic_class,
			.sl = h.ah_attr.sl,
		},
	};
	memcpy(a->ah.dgid, h.ah_attr.grh.dgid.raw, 16);
	return VRDMA_OK;
}

static int cmd_query_qp(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	int r;
	struct rdma_qp *qp = named_object(rq, &d->qps, &r);

	return r ? r : rdma_qp_query(d, qp, &resp->qp_attr);
}

/* ---- connection management: rdma-cm.c ---- */

static int cmd_cm_connect(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	return d->cm_chan ? rdma_cm_cmd_connect(d, rq, &resp->handle) : VRDMA_EOPNOTSUPP;
}

static int cmd_cm_listen(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	return d->cm_chan ? rdma_cm_cmd_listen(d, rq, &resp->handle) : VRDMA_EOPNOTSUPP;
}

static int cmd_cm_accept(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	(void)resp;
	return d->cm_chan ? rdma_cm_cmd_accept(d, rq) : VRDMA_EOPNOTSUPP;
}

static int cmd_cm_reject(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	(void)resp;
	return d->cm_chan ? rdma_cm_cmd_reject(d, rq) : VRDMA_EOPNOTSUPP;
}

static int cmd_cm_disconnect(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	(void)resp;
	return d->cm_chan ? rdma_cm_cmd_disconnect(d, rq) : VRDMA_EOPNOTSUPP;
}

static int cmd_cm_destroy_listen(struct rdma_dev *d, struct rdma_request *rq,
				 union rdma_resp *resp)
{
	(void)resp;
	return d->cm_chan ? rdma_cm_cmd_destroy_listen(d, rq) : VRDMA_EOPNOTSUPP;
}

static int cmd_cm_get_event(struct rdma_dev *d, struct rdma_request *rq, union rdma_resp *resp)
{
	return d->cm_chan ? rdma_cm_cmd_get_event(d, rq, &resp->cm_event) : VRDMA_EOPNOTSUPP;
}

/* ---- dispatch ---- */

static const struct {
	rdma_cmd_fn run;
	uint32_t resp_size;
} commands[VRDMA_CMD_MAX + 1] = {
	[VRDMA_CMD_QUERY_DEVICE] = { cmd_query_device, sizeof(struct vrdma_device_attr) },
	[VRDMA_CMD_QUERY_PORT] = { cmd_query_port, sizeof(struct vrdma_port_attr) },
	[VRDMA_CMD_QUERY_GID] = { cmd_query_gid, sizeof(struct vrdma_gid_resp) },
	[VRDMA_CMD_CREATE_PD] = { cmd_create_pd, sizeof(struct vrdma_handle) },
	[VRDMA_CMD_DESTROY_PD] = { cmd_destroy_pd, 0 },
	[VRDMA_CMD_REG_MR] = { cmd_reg_mr, sizeof(struct vrdma_reg_mr_resp) },
	[VRDMA_CMD_DEREG_MR] = { cmd_dereg_mr, 0 },
	[VRDMA_CMD_CREATE_CQ] = { cmd_create_cq, sizeof(struct vrdma_create_cq_resp) },
	[VRDMA_CMD_DESTROY_CQ] = { cmd_destroy_cq, 0 },
	[VRDMA_CMD_CREATE_QP] = { cmd_create_qp, sizeof(struct vrdma_create_qp_resp) },
	[VRDMA_CMD_MODIFY_QP] = { cmd_modify_qp, 0 },
	[VRDMA_CMD_QUERY_QP] = { cmd_query_qp, sizeof(struct vrdma_qp_attr) },
	[VRDMA_CMD_DESTROY_QP] = { cmd_destroy_qp, 0 },
	[VRDMA_CMD_CM_CONNECT] = { cmd_cm_connect, sizeof(struct vrdma_handle) },
	[VRDMA_CMD_CM_LISTEN] = { cmd_cm_listen, sizeof(struct vrdma_handle) },
	[VRDMA_CMD_CM_ACCEPT] = { cmd_cm_accept, 0 },
	[VRDMA_CMD_CM_REJECT] = { cmd_cm_reject, 0 },
	[VRDMA_CMD_CM_DISCONNECT] = { cmd_cm_disconnect, 0 },
	[VRDMA_CMD_CM_DESTROY_LISTEN] = { cmd_cm_destroy_listen, 0 },
	[VRDMA_CMD_CM_GET_EVENT] = { cmd_cm_get_event, sizeof(struct vrdma_cm_event) },
};

/* Runs one element; returns the bytes written into its response part. */
static uint32_t run_command(void *opaque, struct vq_elem *e)
{
	struct rdma_dev *d = opaque;
	struct vrdma_resp_hdr hdr = { .status = VRDMA_EINVAL };
	union rdma_resp resp;
	g_autofree uint8_t *req = NULL;
	struct rdma_request rq;
	uint32_t resp_size = 0;

	if (e->in_len < sizeof(hdr))
		return 0; /* nowhere to say anything */
	memset(&resp, 0, sizeof(resp));
	if (e->out_len > RDMA_MAX_REQUEST) {
		hdr.status = VRDMA_E2BIG;
		goto reply;
	}
	req = g_malloc(e->out_len ? e->out_len : 1);
	vq_iov_to_buf(e->out, e->out_num, 0, req, e->out_len);
	hdr.status = (uint32_t)rdma_check_header(req, e->out_len, &rq);
	if (hdr.status)
		goto reply;
	resp_size = commands[rq.opcode].resp_size;
	if (e->in_len - sizeof(hdr) < resp_size) {
		hdr.status = VRDMA_EINVAL;
		goto reply;
	}
	hdr.status = (uint32_t)commands[rq.opcode].run(d, &rq, &resp);
reply:
	if (hdr.status)
		resp_size = 0; /* a failed command says nothing more */
	vq_buf_to_iov(e->in, e->in_num, 0, &hdr, sizeof(hdr));
	vq_buf_to_iov(e->in, e->in_num, sizeof(hdr), &resp, resp_size);
	return (uint32_t)sizeof(hdr) + resp_size;
}

void rdma_ctrl_kick(struct rdma_dev *d, struct vu_vq *vq)
{
	vq_serve(vq, run_command, d);
	rdma_flush_events(d);
}

/* Reverse order of dependence: nothing stays on the host function. */
void rdma_destroy_all(struct rdma_dev *d)
{
	void *o;

	rdma_cm_destroy_all(d);
	while ((o = rdma_table_any(&d->qps)))
		qp_destroy(d, o);
	while ((o = rdma_table_any(&d->cqs)))
		cq_destroy(d, o);
	while ((o = rdma_table_any(&d->mrs)))
		mr_destroy(d, o);
	while ((o = rdma_table_any(&d->pds)))
		pd_destroy(d, o);
}

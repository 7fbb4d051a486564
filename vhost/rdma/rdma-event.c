// SPDX-License-Identifier: MIT
/*
 * Device events (spec section 7): queued while no event buffer is posted,
 * bounded, in order; and the failures that raise them.
 */
#include "rdma-internal.h"
#include "util.h"

void rdma_post_event(struct rdma_dev *d, uint16_t type, uint32_t handle, uint32_t data)
{
	struct vrdma_event *ev;

	if (g_queue_get_length(&d->events) >= RDMA_MAX_PENDING_EVENTS) {
		d->dropped_events++;
		return;
	}
	ev = g_new0(struct vrdma_event, 1);
	*ev = (struct vrdma_event){ .type = type, .handle = handle, .data = data };
	g_queue_push_tail(&d->events, ev);
}

/* An event lost for want of buffers: the driver can trust nothing now. */
static void note_dropped_events(struct rdma_dev *d)
{
	struct vrdma_event *ev;

	if (!d->dropped_events || g_queue_get_length(&d->events) >= RDMA_MAX_PENDING_EVENTS)
		return;
	d->dropped_events = 0;
	ev = g_new0(struct vrdma_event, 1);
	ev->type = VRDMA_EV_DEVICE_FATAL;
	g_queue_push_tail(&d->events, ev);
}

void rdma_flush_events(struct rdma_dev *d)
{
	struct vq_elem *e;
	unsigned int pushed = 0;

	note_dropped_events(d);
	while (d->event_vq && !d->quiesced && !g_queue_is_empty(&d->events) &&
	       vq_pop(d->event_vq, &e) > 0) {
		uint64_t room = MIN(e->in_len / sizeof(struct vrdma_event), 64u);
		uint32_t written = 0;

		for (uint64_t i = 0; i < room && !g_queue_is_empty(&d->events); i++) {
			g_autofree struct vrdma_event *ev = g_queue_pop_head(&d->events);

			if (ev->type == VRDMA_EV_CQ_COMP) {
				struct rdma_cq *cq = rdma_table_get(&d->cqs, ev->handle);

				if (cq)
					cq->event_pending = false;
			}
			written += (uint32_t)vq_buf_to_iov(e->in, e->in_num, written, ev, sizeof(*ev));
		}
		vq_push(d->event_vq, e, written);
		pushed++;
	}
	if (pushed)
		vq_notify(d->event_vq);
}

void rdma_event_kick(struct rdma_dev *d, struct vu_vq *vq)
{
	d->event_vq = vq;
	rdma_flush_events(d);
}

void rdma_cq_event(struct rdma_dev *d, struct rdma_cq *cq)
{
	cq->arm = 0;
	if (cq->event_pending)
		return; /* one is already on its way: coalesced */
	cq->event_pending = true;
	rdma_post_event(d, VRDMA_EV_CQ_COMP, cq->handle, 0);
}

/* ---- errors ---- */

static void host_qp_error(struct rdma_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	ibv_modify_qp(qp->qp, &a, IBV_QP_STATE);
	qp->state = VRDMA_QPS_ERR;
}

void rdma_qp_fatal(struct rdma_dev *d, struct rdma_qp *qp, uint32_t reason)
{
	host_qp_error(qp);
	rdma_post_event(d, VRDMA_EV_QP_FATAL, qp->handle, reason);
}

void rdma_cq_fail(struct rdma_dev *d, struct rdma_cq *cq)
{
	if (cq->dead)
		return;
	cq->dead = true;
	rdma_post_event(d, VRDMA_EV_CQ_ERR, cq->handle, 0);
	for (uint32_t i = 0; i < d->qps.cap; i++) {
		struct rdma_qp *qp = d->qps.obj[i];

		if (qp && (qp->scq == cq || qp->rcq == cq) && qp->state != VRDMA_QPS_ERR)
			rdma_qp_fatal(d, qp, VRDMA_QPF_HOST);
	}
}


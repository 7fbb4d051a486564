// SPDX-License-Identifier: MIT
/*
 * Host completions translated into the guest's CQ rings (spec 6.3 to 6.6):
 * a WQE completes from what the device remembered of it, never from the
 * slot the guest may have rewritten since.
 */
#include <string.h>

#include "rdma-internal.h"
#include "util.h"

#define POLL_BATCH 32u

void rdma_cq_push(struct rdma_dev *d, struct rdma_cq *cq, const struct vrdma_cqe *cqe)
{
	size_t off;

	if (cq->dead || d->quiesced || !cq->ring.pages)
		return;
	if (((cq->prod + 1) & cq->ring.mask) == rdma_ring_load(&cq->ring, VRDMA_RING_CONSUMER)) {
		rdma_cq_fail(d, cq); /* the guest stopped consuming it */
		return;
	}
	off = VRDMA_RING_DATA + ((size_t)cq->prod << VRDMA_CQE_SLOT_LOG2);
	memcpy(cq->ring.pages->addr + off, cqe, sizeof(*cqe));
	vu_pages_log(d->vu, cq->ring.pages, off, sizeof(*cqe));
	cq->prod = (cq->prod + 1) & cq->ring.mask;
	rdma_ring_store(d, &cq->ring, VRDMA_RING_PRODUCER, cq->prod);
	/* The device cannot see every host's solicited bit: an armed CQ gets
	 * its event on the next completion either way (a spare wake-up). */
	if (cq->arm)
		rdma_cq_event(d, cq);
}

static uint32_t wc_opcode_of(uint32_t wr_opcode)
{
	switch (wr_opcode) {
	case VRDMA_WR_RDMA_WRITE:
	case VRDMA_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case VRDMA_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case VRDMA_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case VRDMA_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	default:
		return IBV_WC_SEND;
	}
}

static void push_send_cqe(struct rdma_dev *d, struct rdma_qp *qp, const struct rdma_shadow *sh,
			  uint32_t status, uint32_t byte_len)
{
	struct vrdma_cqe cqe = {
		.wr_id = sh->wr_id,
		.status = status,
		.opcode = wc_opcode_of(sh->opcode),
		.byte_len = byte_len,
		.qp_num = qp->qpn,
		.port_num = 1,
	};

	rdma_cq_push(d, qp->scq, &cqe);
}

/* Marks the first len bytes the SGEs describe, in guest-physical pages. */
static void log_sges(struct rdma_dev *d, const struct vrdma_sge *sge, uint32_t n, uint64_t len)
{
	if (!vu_dev_logging(d->vu))
		return;
	for (uint32_t i = 0; i < n && len; i++) {
		struct rdma_mr *mr = rdma_mr_by_lkey(d, sge[i].lkey);
		uint64_t chunk = MIN((uint64_t)sge[i].length, len);

		len -= chunk;
		if (mr && mr->pages)
			vu_pages_log(d->vu, mr->pages, mr->first_offset + (sge[i].addr - mr->iova),
				     chunk);
	}
}


/* The bad WQE at sq.next, once everything before it finished.  What
 * follows it goes to the host QP in error, which flushes it: the caller's
 * loop (rdma_sq_take) takes it, never a call from here, so a run of bad
 * WQEs costs no stack. */
void rdma_finish_bad(struct rdma_dev *d, struct rdma_qp *qp)
{
	struct rdma_shadow *sh = rdma_shadow_at(&qp->sq, qp->sq.next);

	qp->bad_pending = false;
	push_send_cqe(d, qp, sh, qp->bad_status, 0);
	qp->sq.next = qp->sq.tail = (qp->sq.next + 1) & qp->sq.ring.mask;
	rdma_ring_store(d, &qp->sq.ring, VRDMA_RING_CONSUMER, qp->sq.tail);
	if (qp->state != VRDMA_QPS_ERR)
		rdma_qp_fatal(d, qp, VRDMA_QPF_BAD_WQE);
}

/*
 * The local buffers that READs and atomics wrote, for each of the count WQEs
 * from first that a successful completion retires.  The unsignaled ones
 * before it count too: posted unsignaled before logging began (only then is
 * a WQE unsignaled on the host), they may land after, and nothing else
 * reports them.
 */
static void log_retired_results(struct rdma_dev *d, const struct rdma_wq *sq, uint32_t first,
				uint32_t count)
{
	if (!vu_dev_logging(d->vu))
		return;
	for (uint32_t i = 0; i < count; i++) {
		const struct rdma_shadow *sh = rdma_shadow_at(sq, (first + i) & sq->ring.mask);

		if (sh->opcode == VRDMA_WR_RDMA_READ || sh->opcode == VRDMA_WR_ATOMIC_CMP_AND_SWP ||
		    sh->opcode == VRDMA_WR_ATOMIC_FETCH_AND_ADD)
			log_sges(d, sh->sge, sh->num_sge, UINT64_MAX);
	}
}

static void send_done(struct rdma_dev *d, struct rdma_qp *qp, const struct ibv_wc *wc)
{
	struct rdma_wq *sq = &qp->sq;
	uint32_t slot = (uint32_t)(wc->wr_id & RDMA_WRID_SLOT_MASK) & sq->ring.mask;
	uint32_t first = sq->tail, count = ((slot - first) & sq->ring.mask) + 1;
	const struct rdma_shadow *sh = rdma_shadow_at(sq, slot);

	/* A signaled completion retires every unsignaled WQE before it. */
	sq->inflight -= MIN(count, sq->inflight);
	sq->tail = (slot + 1) & sq->ring.mask;
	if (qp->rings_gone)
		return;
	rdma_ring_store(d, &sq->ring, VRDMA_RING_CONSUMER, sq->tail);
	if (wc->status == IBV_WC_SUCCESS)
		log_retired_results(d, sq, first, count);
	if (sh->report || wc->status != IBV_WC_SUCCESS)
		push_send_cqe(d, qp, sh, wc->status, wc->byte_len);
	rdma_sq_take(d, qp);
}

static void recv_done(struct rdma_dev *d, struct rdma_qp *qp, const struct ibv_wc *wc)
{
	struct rdma_wq *rq = &qp->rq;
	uint32_t slot = (uint32_t)(wc->wr_id & RDMA_WRID_SLOT_MASK) & rq->ring.mask;
	const struct rdma_shadow *sh = rdma_shadow_at(rq, slot);
	struct vrdma_cqe cqe = {
		.wr_id = sh->wr_id,
		.status = wc->status,
		.opcode = wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM
								  : IBV_WC_RECV,
		.byte_len = wc->byte_len,
		.qp_num = qp->qpn,
		.src_qp = wc->src_qp,
		.port_num = 1,
	};

	if (wc->wc_flags & IBV_WC_WITH_IMM) {
		cqe.imm_data = wc->imm_data;
		cqe.wc_flags = IBV_WC_WITH_IMM;
	}
	rq->inflight -= MIN(1u, rq->inflight);
	rq->tail = (slot + 1) & rq->ring.mask;
	if (qp->rings_gone)
		return;
	rdma_ring_store(d, &rq->ring, VRDMA_RING_CONSUMER, rq->tail);
	if (wc->status == IBV_WC_SUCCESS && cqe.opcode == IBV_WC_RECV)
		log_sges(d, sh->sge, sh->num_sge, wc->byte_len);
	rdma_cq_push(d, qp->rcq, &cqe);
	rdma_rq_fill(d, qp);
}

unsigned int rdma_poll_cq(struct rdma_dev *d, struct rdma_cq *cq)
{
	struct ibv_wc wc[POLL_BATCH];
	unsigned int total = 0;
	int n;

	while ((n = ibv_poll_cq(cq->cq, POLL_BATCH, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			struct rdma_qp *qp = g_hash_table_lookup(d->qp_by_qpn,
								 GUINT_TO_POINTER(wc[i].qp_num));

			if (!qp || wc[i].wr_id >> RDMA_WRID_INCARNATION_SHIFT != qp->incarnation)
				continue; /* of a QP destroyed or reset meanwhile */
			if (wc[i].wr_id & RDMA_WRID_RECV)
				recv_done(d, qp, &wc[i]);
			else
				send_done(d, qp, &wc[i]);
		}
		total += (unsigned int)n;
		d->sh->completions += (uint64_t)n;
		if ((unsigned int)n < POLL_BATCH)
			break;
	}
	return total;
}

void rdma_comp_ready(struct vu_dev *vu, int fd, void *data)
{
	struct rdma_dev *d = data;
	struct ibv_cq *hcq;
	void *ctx;

	(void)vu, (void)fd;
	rdma_work_refill(d);
	while (ibv_get_cq_event(d->chan, &hcq, &ctx) == 0) {
		ibv_ack_cq_events(hcq, 1);
		ibv_req_notify_cq(hcq, 0);
		/* Quiesced: completions wait on the host until the device runs. */
		if (!d->quiesced)
			rdma_poll_cq(d, ctx);
	}
	rdma_flush_events(d);
}


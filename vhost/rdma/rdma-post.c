// SPDX-License-Identifier: MIT
/*
 * Work requests from the guest (spec 6.1, 6.2, 6.4): a doorbell makes the
 * device copy each new WQE out of the ring once, check it, and post a whole
 * batch to the host QP in one call, within a work budget per call.
 */
#include <string.h>

#include "rdma-internal.h"
#include "util.h"

#define POST_BATCH 32u

struct rdma_mr *rdma_mr_by_lkey(const struct rdma_dev *d, uint32_t lkey)
{
	return g_hash_table_lookup(d->mr_by_lkey, GUINT_TO_POINTER(lkey));
}

uint32_t rdma_wire_rkey(const struct rdma_dev *d, const struct rdma_qp *qp, uint32_t rkey)
{
	const struct rdma_mr *mr;

	if (!qp->peer_local)
		return rdma_peer_rkey(qp, rkey);
	mr = g_hash_table_lookup(d->mr_by_rkey, GUINT_TO_POINTER(rkey));
	return mr && mr->mr ? mr->mr->rkey : rkey;
}

/*
 * Local buffers must lie in MRs of this connection in the QP's PD: the
 * host device checks that too, but another connection's MR on the same
 * function would pass its PD-less checks in some devices.
 */
static int check_local(const struct rdma_dev *d, const struct rdma_qp *qp,
		       const struct vrdma_sge *sge, uint32_t n, bool write, struct ibv_sge *ret_host)
{
	/* Zero-length SGEs too: some devices read a length of 0 as 2 GiB. */
	for (uint32_t i = 0; i < n; i++) {
		const struct rdma_mr *mr = rdma_mr_by_lkey(d, sge[i].lkey);

		if (!mr || mr->pd != qp->pd || sge[i].addr < mr->iova ||
		    !range_within(sge[i].addr - mr->iova, sge[i].length, mr->length) ||
		    (write && !(mr->access & VRDMA_ACCESS_LOCAL_WRITE)))
			return RDMA_WC_LOC_PROT_ERR;
		/* The host's key: not the guest's if the MR moved here. */
		ret_host[i] = (struct ibv_sge){ sge[i].addr, sge[i].length, mr->mr->lkey };
	}
	return RDMA_WC_SUCCESS;
}

static bool writes_locally(uint32_t opcode)
{
	return opcode == VRDMA_WR_RDMA_READ || opcode == VRDMA_WR_ATOMIC_CMP_AND_SWP ||
	       opcode == VRDMA_WR_ATOMIC_FETCH_AND_ADD;
}

static void remember(struct rdma_shadow *sh, uint64_t wr_id, uint32_t opcode, bool report,
		     const struct vrdma_sge *sge, uint32_t n)
{
	sh->wr_id = wr_id;
	sh->opcode = (uint8_t)opcode;
	sh->report = report;
	sh->num_sge = (uint8_t)n;
	memcpy(sh->sge, sge, n * sizeof(*sge));
}

static void build_send(struct rdma_qp *qp, const struct rdma_send_wqe *w, uint32_t slot,
		       struct ibv_send_wr *wr, struct ibv_sge *sges)
{
	bool report = (w->flags & VRDMA_SEND_SIGNALED) || qp->sig_all;
	/*
	 * Unsignaled runs are bounded so the host queue always drains.  While
	 * the guest migrates, every WQE is signaled on the host: the stop must
	 * see each one complete before the QP's state can move.
	 */
	bool signal = report || vu_dev_logging(qp->dev->vu) ||
		      ++qp->unsignaled_run >= (qp->sq.ring.mask + 1) / 2;

	if (signal)
		qp->unsignaled_run = 0;
	*wr = (struct ibv_send_wr){
		.wr_id = rdma_host_wr_id(qp, slot, 0),
		.sg_list = sges,
		.num_sge = (int)w->num_sge,
		.opcode = (enum ibv_wr_opcode)w->opcode,
		.send_flags = (w->flags & ~(unsigned int)VRDMA_SEND_SIGNALED) |
			      (signal ? IBV_SEND_SIGNALED : 0),
		.imm_data = w->imm,
	};
	if (w->opcode == VRDMA_WR_ATOMIC_CMP_AND_SWP || w->opcode == VRDMA_WR_ATOMIC_FETCH_AND_ADD) {
		wr->wr.atomic.remote_addr = w->remote_addr;
		wr->wr.atomic.compare_add = w->compare_add;
		wr->wr.atomic.swap = w->swap;
		wr->wr.atomic.rkey = rdma_wire_rkey(qp->dev, qp, w->rkey);
	} else {
		wr->wr.rdma.remote_addr = w->remote_addr;
		wr->wr.rdma.rkey = rdma_wire_rkey(qp->dev, qp, w->rkey);
	}
	/* sges holds the host's SGEs already (check_local), or the inline data. */
	if (w->inline_data) {
		sges[0] = (struct ibv_sge){ (uintptr_t)w->inline_data, w->length, 0 };
		wr->num_sge = 1;
	}
}

/* Posts wrs[0..n) (chained); returns how many the host took. */
static uint32_t post_sends(struct rdma_qp *qp, struct ibv_send_wr *wrs, uint32_t n)
{
	struct ibv_send_wr *bad = NULL;

	for (uint32_t i = 0; i + 1 < n; i++)
		wrs[i].next = &wrs[i + 1];
	if (!n || ibv_post_send(qp->qp, wrs, &bad) == 0)
		return n;
	return bad ? (uint32_t)(bad - wrs) : 0;
}

/*
 * Work the device may do in one call of the event loop: WQEs taken and
 * refused WQEs retired, over all QPs.  A ring's worth keeps any honest
 * queue moving in one go; the bound is for rings that feed each other
 * (a CQ ring over an SQ's producer index turns every completion into
 * another WQE), which would otherwise keep the loop, and every other
 * guest of the daemon, for as long as the guest likes.
 */
#define WORK_PER_CALL (1u << RDMA_MAX_LOG2_SLOTS)

void rdma_work_refill(struct rdma_dev *d)
{
	d->work_left = WORK_PER_CALL;
}

/* One unit of work, if any is left in this call. */
static bool spend_work(struct rdma_dev *d)
{
	if (!d->work_left)
		return false;
	d->work_left--;
	return true;
}

/* The same for the SQ: one left waiting is taken up by the poll timer
 * (receive rings are looked at on every tick anyway). */
static bool take_work(struct rdma_dev *d, struct rdma_qp *qp)
{
	if (spend_work(d))
		return true;
	qp->sq_more = true;
	return false;
}

/* Copies, checks and posts one batch of WQEs from sq.next towards prod;
 * stops at a bad one (bad_pending), which it leaves at sq.next. */
static void sq_take_batch(struct rdma_dev *d, struct rdma_qp *qp, uint32_t prod,
			  uint8_t *copies)
{
	struct rdma_wq *sq = &qp->sq;
	struct rdma_wq_caps caps = {
		.slot_size = 1u << sq->ring.slot_log2, .max_sge = sq->max_sge,
		.max_inline = qp->max_inline, .atomics = d->sh->lim.atomics,
	};
	struct ibv_send_wr wrs[POST_BATCH];
	struct ibv_sge sges[POST_BATCH][RDMA_MAX_SGE];
	uint32_t n = 0, first = sq->next, posted;

	while (n < POST_BATCH && sq->next != prod && rdma_wq_has_room(sq) && take_work(d, qp)) {
		uint8_t *copy = copies + ((size_t)n << sq->ring.slot_log2);
		struct rdma_send_wqe w;
		int st;

		memcpy(copy, rdma_ring_slot(&sq->ring, sq->next), caps.slot_size);
		st = rdma_parse_send_wqe(copy, &caps, &w);
		if (!st)
			st = check_local(d, qp, w.sge, w.num_sge, writes_locally(w.opcode), sges[n]);
		/* A WQE refused before its SGEs were found keeps none. */
		remember(rdma_shadow_at(sq, sq->next), w.wr_id, w.opcode,
			 (w.flags & VRDMA_SEND_SIGNALED) || qp->sig_all, w.sge,
			 w.sge ? MIN(w.num_sge, sq->max_sge) : 0);
		if (st) {
			qp->bad_pending = true;
			qp->bad_status = (uint32_t)st;
			break;
		}
		build_send(qp, &w, sq->next, &wrs[n], sges[n]);
		sq->next = (sq->next + 1) & sq->ring.mask;
		n++;
	}
	posted = post_sends(qp, wrs, n);
	sq->inflight += posted;
	d->sh->sends_posted += posted;
	if (posted < n) {
		/* The host refused the rest: the first refused is the bad one. */
		sq->next = (first + posted) & sq->ring.mask;
		qp->bad_pending = true;
		qp->bad_status = qp->state == VRDMA_QPS_ERR ? RDMA_WC_WR_FLUSH_ERR
							    : RDMA_WC_LOC_QP_OP_ERR;
	}
}

/*
 * Takes new send WQEs, up to the producer index, in batches; a refused
 * WQE completes once the WQEs before it have, and taking goes on after
 * it.  A loop, not recursion, within the call's work budget.
 */
void rdma_sq_take(struct rdma_dev *d, struct rdma_qp *qp)
{
	struct rdma_wq *sq = &qp->sq;
	g_autofree uint8_t *copies = NULL;

	qp->sq_more = false;
	while (rdma_qp_takes_work(d, qp)) {
		uint32_t prod;

		if (qp->bad_pending) {
			if (sq->inflight || !take_work(d, qp))
				return;
			rdma_finish_bad(d, qp);
			continue;
		}
		/* Sends wait in the ring until the QP may send (RTS or later),
		 * and while its peer moves. */
		if (qp->state < VRDMA_QPS_RTS || qp->held)
			return;
		prod = rdma_ring_load(&sq->ring, VRDMA_RING_PRODUCER);
		if (sq->next == prod || !rdma_wq_has_room(sq) || qp->sq_more)
			return;
		if (!copies)
			copies = g_malloc((size_t)POST_BATCH << sq->ring.slot_log2);
		sq_take_batch(d, qp, prod, copies);
	}
}

static void bad_recv(struct rdma_dev *d, struct rdma_qp *qp, uint64_t wr_id, int status)
{
	struct vrdma_cqe cqe = {
		.wr_id = wr_id, .status = (uint32_t)status, .opcode = IBV_WC_RECV,
		.qp_num = qp->qpn, .port_num = 1,
	};

	qp->rq.next = (qp->rq.next + 1) & qp->rq.ring.mask;
	if (!qp->rq.inflight) {
		qp->rq.tail = qp->rq.next;
		rdma_ring_store(d, &qp->rq.ring, VRDMA_RING_CONSUMER, qp->rq.tail);
	}
	rdma_cq_push(d, qp->rcq, &cqe);
	if (qp->state != VRDMA_QPS_ERR)
		rdma_qp_fatal(d, qp, VRDMA_QPF_BAD_WQE);
}

void rdma_rq_fill(struct rdma_dev *d, struct rdma_qp *qp)
{
	struct rdma_wq *rq = &qp->rq;
	struct rdma_wq_caps caps = {
		.slot_size = 1u << rq->ring.slot_log2, .max_sge = rq->max_sge,
	};
	struct ibv_recv_wr wrs[POST_BATCH], *bad;
	struct ibv_sge sges[POST_BATCH][RDMA_MAX_SGE];
	g_autofree uint8_t *copy = NULL;
	uint32_t prod;

	if (!rdma_qp_takes_work(d, qp))
		return;
	prod = rdma_ring_load(&rq->ring, VRDMA_RING_PRODUCER);
	while (rq->next != prod && rdma_wq_has_room(rq) && d->work_left) {
		uint32_t n = 0;

		if (!copy)
			copy = g_malloc(caps.slot_size);
		while (n < POST_BATCH && rq->next != prod && rdma_wq_has_room(rq) && spend_work(d)) {
			struct rdma_recv_wqe w;
			int st;

			memcpy(copy, rdma_ring_slot(&rq->ring, rq->next), caps.slot_size);
			st = rdma_parse_recv_wqe(copy, &caps, &w);
			if (!st)
				st = check_local(d, qp, w.sge, w.num_sge, true, sges[n]);
			if (st) {
				bad_recv(d, qp, w.wr_id, st);
				break;
			}
			remember(rdma_shadow_at(rq, rq->next), w.wr_id, 0, true, w.sge, w.num_sge);
			wrs[n] = (struct ibv_recv_wr){
				.wr_id = rdma_host_wr_id(qp, rq->next, RDMA_WRID_RECV), .sg_list = sges[n],
				.num_sge = (int)w.num_sge,
				.next = NULL,
			};
			if (n)
				wrs[n - 1].next = &wrs[n];
			rq->next = (rq->next + 1) & rq->ring.mask;
			n++;
		}
		if (n && ibv_post_recv(qp->qp, wrs, &bad)) {
			uint32_t posted = bad ? (uint32_t)(bad - wrs) : 0;

			rq->inflight += posted;
			d->sh->recvs_posted += posted;
			rq->next = (rq->next - (n - posted)) & rq->ring.mask;
			rdma_qp_fatal(d, qp, VRDMA_QPF_HOST);
			return;
		}
		rq->inflight += n;
		d->sh->recvs_posted += n;
	}
}

static void arm_cq(struct rdma_dev *d, struct rdma_cq *cq, uint16_t how)
{
	if (cq->dead || d->quiesced)
		return;
	cq->arm = how;
	/* Completions the driver has not consumed yet: no wake-up is lost. */
	if (rdma_ring_load(&cq->ring, VRDMA_RING_CONSUMER) != cq->prod)
		rdma_cq_event(d, cq);
}

/* Remembers a CQ to poll in this kick's busy-poll episode (--rdma-poll-us). */
static void note_hot(struct rdma_dev *d, struct rdma_cq *cq)
{
	if (!d->sh->poll_ns)
		return;
	for (unsigned int i = 0; i < d->nhot; i++)
		if (d->hot[i] == cq)
			return;
	if (d->nhot < RDMA_HOT_CQS)
		d->hot[d->nhot++] = cq;
}

static void ring_doorbell(struct rdma_dev *d, const struct vrdma_doorbell *db)
{
	struct rdma_qp *qp = NULL;
	struct rdma_cq *cq = NULL;

	if (db->reserved)
		return;
	switch (db->type) {
	case VRDMA_DB_SQ:
		qp = rdma_table_get(&d->qps, db->handle);
		if (qp) {
			rdma_sq_take(d, qp);
			rdma_rq_fill(d, qp);
			note_hot(d, qp->scq);
			note_hot(d, qp->rcq);
		}
		break;
	case VRDMA_DB_RQ:
		qp = rdma_table_get(&d->qps, db->handle);
		if (qp)
			rdma_rq_fill(d, qp);
		break;
	case VRDMA_DB_CQ_ARM:
	case VRDMA_DB_CQ_ARM_SOLICITED:
		cq = rdma_table_get(&d->cqs, db->handle);
		if (cq)
			arm_cq(d, cq, db->type);
		break;
	default:
		break; /* unknown records are skipped, as are unknown handles */
	}
}

/*
 * A buffer that is not whole records, or holds more than
 * VRDMA_MAX_DOORBELLS of them, is ignored entirely: one kick must not keep
 * the loop (and the other guests) waiting.
 */
static uint32_t take_doorbells(void *opaque, struct vq_elem *e)
{
	struct rdma_dev *d = opaque;
	struct vrdma_doorbell db[64];
	uint64_t off = 0;

	if (e->out_len > VRDMA_MAX_DOORBELLS * sizeof(db[0]))
		return 0;
	while (e->out_len % sizeof(db[0]) == 0 && off < e->out_len) {
		size_t got = vq_iov_to_buf(e->out, e->out_num, off, db,
					   MIN(sizeof(db), e->out_len - off));

		if (!got)
			break;
		for (size_t i = 0; i < got / sizeof(db[0]); i++)
			ring_doorbell(d, &db[i]);
		off += got;
	}
	return 0;
}

/*
 * --rdma-poll-us (off by default: a core traded for latency).  After a send
 * doorbell the back end keeps polling, until poll-us pass with nothing new:
 * the CQs of the QPs rung, and the doorbell queue itself with the driver's
 * kicks suppressed.  A ping-pong then runs with no wake-up of the back end
 * and no kick by the driver per message.  An episode ends after
 * BUSY_POLL_MAX_NS at most, so the loop's other connections and the
 * control queue get their turn.
 */
#define BUSY_POLL_MAX_NS 2000000ull

static void busy_poll(struct rdma_dev *d, struct vu_vq *vq)
{
	uint64_t now = monotonic_ns();
	uint64_t quiet_at = now + d->sh->poll_ns;
	uint64_t stop_at = now + MAX(BUSY_POLL_MAX_NS, d->sh->poll_ns);

	vq_set_polling(vq, true);
	while (now < quiet_at && now < stop_at && !d->quiesced) {
		unsigned int found = 0;

		rdma_work_refill(d);
		for (unsigned int i = 0; i < d->nhot; i++)
			if (!d->hot[i]->dead)
				found += rdma_poll_cq(d, d->hot[i]);
		if (vq_has_avail(vq))
			found += vq_serve(vq, take_doorbells, d);
		now = monotonic_ns();
		if (found) {
			rdma_flush_events(d);
			quiet_at = now + d->sh->poll_ns;
		}
	}
	vq_set_polling(vq, false);
}

void rdma_doorbell_kick(struct rdma_dev *d, struct vu_vq *vq)
{
	d->nhot = 0;
	vq_serve(vq, take_doorbells, d);
	if (d->nhot) {
		busy_poll(d, vq);
		/* Kicks are back on: take what came in as polling stopped. */
		vq_serve(vq, take_doorbells, d);
	}
	d->nhot = 0;
	rdma_flush_events(d);
}


// SPDX-License-Identifier: MIT
/*
 * The RDMA data path.  Guest work rings (rxe's layout) are mapped once;
 * a doorbell makes the device copy each new WQE out of the ring once,
 * check it, and post a whole batch to the host QP in one call.  Host
 * completions are translated into the guest's CQ ring, and an armed CQ
 * gets one event.  The guest's ring indexes are never trusted: the device
 * keeps its own positions and only ever reads the producer index, masked.
 */
#include <errno.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "rdma-internal.h"
#include "util.h"

#define POST_BATCH 32u
#define POLL_BATCH 32u
/* Every millisecond: receive rings (no doorbell in rxe's ABI). */
#define POLL_PERIOD_NS 1000000
/* Remote-writable MRs are marked dirty every 100 ticks while logging. */
#define LOG_EVERY_TICKS 100u
#define QUIESCE_TIMEOUT_NS 2000000000ull
/*
 * Host wr_ids: the slot in bits 0-31, WRID_RECV for receives (an error
 * completion's opcode is undefined: rxe leaves it 0 on flushed receives,
 * so the queue must come from the wr_id itself), and the QP's incarnation
 * above.  A completion of an earlier incarnation (flushed before a reset,
 * or of a destroyed QP whose number the host gave out again) names slots
 * of rings that have restarted since: it is dropped.
 */
#define WRID_RECV (1ull << 32)
#define WRID_INCARNATION_SHIFT 33
#define WRID_SLOT_MASK 0xffffffffull

/* ---- rings ---- */

int rdma_ring_init(struct rdma_dev *d, struct rdma_ring *ring, const uint64_t *pages,
		   uint64_t npages, uint32_t log2_slots, unsigned int slot_log2)
{
	int r = rdma_pages_map(d, pages, npages, 12, true, &ring->pages);

	if (r < 0)
		return r == -EFAULT || r == -EINVAL ? VRDMA_EFAULT
		       : r == -ENOSPC		    ? VRDMA_ENOSPC
						    : VRDMA_ENOMEM;
	ring->mask = (1u << log2_slots) - 1;
	ring->slot_log2 = slot_log2;
	return VRDMA_OK;
}

void rdma_ring_fini(struct rdma_dev *d, struct rdma_ring *ring)
{
	rdma_pages_unmap(d, &ring->pages);
}

static uint8_t *ring_slot(const struct rdma_ring *r, uint32_t i)
{
	return r->pages->addr + VRDMA_RING_DATA + ((size_t)(i & r->mask) << r->slot_log2);
}

/*
 * The driver's index, masked: any value is a valid slot.  A ring whose
 * memory went away (rdma_ring_fini() at mem_gone, spec section 9) reads as
 * empty and takes no write: the device never touches that memory again,
 * nor marks it dirty, whatever the QP or CQ goes through afterwards.
 */
static uint32_t ring_load(const struct rdma_ring *r, size_t off)
{
	if (!r->pages)
		return 0;
	return __atomic_load_n((uint32_t *)(r->pages->addr + off), __ATOMIC_ACQUIRE) & r->mask;
}

static void ring_store(struct rdma_dev *d, const struct rdma_ring *r, size_t off, uint32_t v)
{
	if (!r->pages)
		return;
	__atomic_store_n((uint32_t *)(r->pages->addr + off), v, __ATOMIC_RELEASE);
	vu_pages_log(d->vu, r->pages, off, 4);
}

int rdma_wq_init(struct rdma_wq *wq, uint32_t max_sge)
{
	wq->max_sge = max_sge;
	wq->shadow_size = sizeof(struct rdma_shadow) + max_sge * sizeof(struct vrdma_sge);
	wq->shadow = g_try_malloc0(((size_t)wq->ring.mask + 1) * wq->shadow_size);
	return wq->shadow ? VRDMA_OK : VRDMA_ENOMEM;
}

void rdma_wq_fini(struct rdma_wq *wq)
{
	g_free(g_steal_pointer(&wq->shadow));
}

static struct rdma_shadow *shadow_at(const struct rdma_wq *wq, uint32_t slot)
{
	return (struct rdma_shadow *)(wq->shadow + (size_t)(slot & wq->ring.mask) * wq->shadow_size);
}

static void wq_reset(struct rdma_dev *d, struct rdma_wq *wq)
{
	wq->next = wq->tail = wq->inflight = 0;
	ring_store(d, &wq->ring, VRDMA_RING_CONSUMER, 0);
}

void rdma_qp_new_incarnation(struct rdma_dev *d, struct rdma_qp *qp)
{
	/* 31 bits: a wrap takes two billion resets of one connection. */
	d->incarnations = (d->incarnations + 1) & 0x7fffffffu;
	qp->incarnation = d->incarnations;
}

void rdma_qp_rings_reset(struct rdma_dev *d, struct rdma_qp *qp)
{
	wq_reset(d, &qp->sq);
	wq_reset(d, &qp->rq);
	qp->bad_pending = false;
	qp->sq_more = false;
	qp->unsignaled_run = 0;
	rdma_qp_new_incarnation(d, qp);
}

static uint64_t host_wr_id(const struct rdma_qp *qp, uint32_t slot, uint64_t queue_bit)
{
	return (uint64_t)qp->incarnation << WRID_INCARNATION_SHIFT | queue_bit | slot;
}

/* Room for one more in flight: the host queue is exactly as deep. */
static bool wq_has_room(const struct rdma_wq *wq)
{
	return ((wq->next + 1) & wq->ring.mask) != wq->tail;
}

static bool qp_takes_work(const struct rdma_dev *d, const struct rdma_qp *qp)
{
	return !d->quiesced && qp->state != VRDMA_QPS_RESET && !qp->rings_gone;
}

/* ---- events ---- */

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

static void cq_event(struct rdma_dev *d, struct rdma_cq *cq)
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

/* ---- completions into the guest ---- */

static void cq_push(struct rdma_dev *d, struct rdma_cq *cq, const struct vrdma_cqe *cqe)
{
	size_t off;

	if (cq->dead || d->quiesced || !cq->ring.pages)
		return;
	if (((cq->prod + 1) & cq->ring.mask) == ring_load(&cq->ring, VRDMA_RING_CONSUMER)) {
		rdma_cq_fail(d, cq); /* the guest stopped consuming it */
		return;
	}
	off = VRDMA_RING_DATA + ((size_t)cq->prod << VRDMA_CQE_SLOT_LOG2);
	memcpy(cq->ring.pages->addr + off, cqe, sizeof(*cqe));
	vu_pages_log(d->vu, cq->ring.pages, off, sizeof(*cqe));
	cq->prod = (cq->prod + 1) & cq->ring.mask;
	ring_store(d, &cq->ring, VRDMA_RING_PRODUCER, cq->prod);
	/* The device cannot see every host's solicited bit: an armed CQ gets
	 * its event on the next completion either way (a spare wake-up). */
	if (cq->arm)
		cq_event(d, cq);
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

	cq_push(d, qp->scq, &cqe);
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
static void finish_bad(struct rdma_dev *d, struct rdma_qp *qp)
{
	struct rdma_shadow *sh = shadow_at(&qp->sq, qp->sq.next);

	qp->bad_pending = false;
	push_send_cqe(d, qp, sh, qp->bad_status, 0);
	qp->sq.next = qp->sq.tail = (qp->sq.next + 1) & qp->sq.ring.mask;
	ring_store(d, &qp->sq.ring, VRDMA_RING_CONSUMER, qp->sq.tail);
	if (qp->state != VRDMA_QPS_ERR)
		rdma_qp_fatal(d, qp, VRDMA_QPF_BAD_WQE);
}

static void send_done(struct rdma_dev *d, struct rdma_qp *qp, const struct ibv_wc *wc)
{
	struct rdma_wq *sq = &qp->sq;
	uint32_t slot = (uint32_t)(wc->wr_id & WRID_SLOT_MASK) & sq->ring.mask;
	uint32_t count = ((slot - sq->tail) & sq->ring.mask) + 1;
	const struct rdma_shadow *sh = shadow_at(sq, slot);

	/* A signaled completion retires every unsignaled WQE before it. */
	sq->inflight -= MIN(count, sq->inflight);
	sq->tail = (slot + 1) & sq->ring.mask;
	if (qp->rings_gone)
		return;
	ring_store(d, &sq->ring, VRDMA_RING_CONSUMER, sq->tail);
	if (wc->status == IBV_WC_SUCCESS &&
	    (sh->opcode == VRDMA_WR_RDMA_READ || sh->opcode == VRDMA_WR_ATOMIC_CMP_AND_SWP ||
	     sh->opcode == VRDMA_WR_ATOMIC_FETCH_AND_ADD))
		log_sges(d, sh->sge, sh->num_sge, UINT64_MAX);
	if (sh->report || wc->status != IBV_WC_SUCCESS)
		push_send_cqe(d, qp, sh, wc->status, wc->byte_len);
	rdma_sq_take(d, qp);
}

static void recv_done(struct rdma_dev *d, struct rdma_qp *qp, const struct ibv_wc *wc)
{
	struct rdma_wq *rq = &qp->rq;
	uint32_t slot = (uint32_t)(wc->wr_id & WRID_SLOT_MASK) & rq->ring.mask;
	const struct rdma_shadow *sh = shadow_at(rq, slot);
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
	ring_store(d, &rq->ring, VRDMA_RING_CONSUMER, rq->tail);
	if (wc->status == IBV_WC_SUCCESS && cqe.opcode == IBV_WC_RECV)
		log_sges(d, sh->sge, sh->num_sge, wc->byte_len);
	cq_push(d, qp->rcq, &cqe);
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

			if (!qp || wc[i].wr_id >> WRID_INCARNATION_SHIFT != qp->incarnation)
				continue; /* of a QP destroyed or reset meanwhile */
			if (wc[i].wr_id & WRID_RECV)
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

/* ---- work requests from the guest ---- */

struct rdma_mr *rdma_mr_by_lkey(const struct rdma_dev *d, uint32_t lkey)
{
	return g_hash_table_lookup(d->mr_by_lkey, GUINT_TO_POINTER(lkey));
}

/*
 * Local buffers must lie in MRs of this connection in the QP's PD: the
 * host device checks that too, but another connection's MR on the same
 * function would pass its PD-less checks in some devices.
 */
static int check_local(const struct rdma_dev *d, const struct rdma_qp *qp,
		       const struct vrdma_sge *sge, uint32_t n, bool write)
{
	/* Zero-length SGEs too: some devices read a length of 0 as 2 GiB. */
	for (uint32_t i = 0; i < n; i++) {
		const struct rdma_mr *mr = rdma_mr_by_lkey(d, sge[i].lkey);

		if (!mr || mr->pd != qp->pd || sge[i].addr < mr->iova ||
		    !range_within(sge[i].addr - mr->iova, sge[i].length, mr->length) ||
		    (write && !(mr->access & VRDMA_ACCESS_LOCAL_WRITE)))
			return RDMA_WC_LOC_PROT_ERR;
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
	/* Unsignaled runs are bounded so the host queue always drains. */
	bool signal = report || ++qp->unsignaled_run >= (qp->sq.ring.mask + 1) / 2;

	if (signal)
		qp->unsignaled_run = 0;
	*wr = (struct ibv_send_wr){
		.wr_id = host_wr_id(qp, slot, 0),
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
		wr->wr.atomic.rkey = w->rkey;
	} else {
		wr->wr.rdma.remote_addr = w->remote_addr;
		wr->wr.rdma.rkey = w->rkey;
	}
	if (w->inline_data) {
		sges[0] = (struct ibv_sge){ (uintptr_t)w->inline_data, w->length, 0 };
		wr->num_sge = 1;
		return;
	}
	for (uint32_t i = 0; i < w->num_sge; i++)
		sges[i] = (struct ibv_sge){ w->sge[i].addr, w->sge[i].length, w->sge[i].lkey };
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

	while (n < POST_BATCH && sq->next != prod && wq_has_room(sq) && take_work(d, qp)) {
		uint8_t *copy = copies + ((size_t)n << sq->ring.slot_log2);
		struct rdma_send_wqe w;
		int st;

		memcpy(copy, ring_slot(&sq->ring, sq->next), caps.slot_size);
		st = rdma_parse_send_wqe(copy, &caps, &w);
		if (!st)
			st = check_local(d, qp, w.sge, w.num_sge, writes_locally(w.opcode));
		/* A WQE refused before its SGEs were found keeps none. */
		remember(shadow_at(sq, sq->next), w.wr_id, w.opcode,
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
	while (qp_takes_work(d, qp)) {
		uint32_t prod;

		if (qp->bad_pending) {
			if (sq->inflight || !take_work(d, qp))
				return;
			finish_bad(d, qp);
			continue;
		}
		/* Sends wait in the ring until the QP may send (RTS or later). */
		if (qp->state < VRDMA_QPS_RTS)
			return;
		prod = ring_load(&sq->ring, VRDMA_RING_PRODUCER);
		if (sq->next == prod || !wq_has_room(sq) || qp->sq_more)
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
		ring_store(d, &qp->rq.ring, VRDMA_RING_CONSUMER, qp->rq.tail);
	}
	cq_push(d, qp->rcq, &cqe);
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

	if (!qp_takes_work(d, qp))
		return;
	prod = ring_load(&rq->ring, VRDMA_RING_PRODUCER);
	while (rq->next != prod && wq_has_room(rq) && d->work_left) {
		uint32_t n = 0;

		if (!copy)
			copy = g_malloc(caps.slot_size);
		while (n < POST_BATCH && rq->next != prod && wq_has_room(rq) && spend_work(d)) {
			struct rdma_recv_wqe w;
			int st;

			memcpy(copy, ring_slot(&rq->ring, rq->next), caps.slot_size);
			st = rdma_parse_recv_wqe(copy, &caps, &w);
			if (!st)
				st = check_local(d, qp, w.sge, w.num_sge, true);
			if (st) {
				bad_recv(d, qp, w.wr_id, st);
				break;
			}
			remember(shadow_at(rq, rq->next), w.wr_id, 0, true, w.sge, w.num_sge);
			for (uint32_t i = 0; i < w.num_sge; i++)
				sges[n][i] = (struct ibv_sge){ w.sge[i].addr, w.sge[i].length,
							       w.sge[i].lkey };
			wrs[n] = (struct ibv_recv_wr){
				.wr_id = host_wr_id(qp, rq->next, WRID_RECV), .sg_list = sges[n],
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
	if (ring_load(&cq->ring, VRDMA_RING_CONSUMER) != cq->prod)
		cq_event(d, cq);
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

/* ---- the poll timer, migration, quiesce ---- */

void rdma_poll_timer_update(struct rdma_dev *d)
{
	struct itimerspec on = {
		.it_interval = { 0, POLL_PERIOD_NS }, .it_value = { 0, POLL_PERIOD_NS },
	};
	struct itimerspec off = { 0 };

	timerfd_settime(d->poll_timer, 0, d->qps.count ? &on : &off, NULL);
}

void rdma_log_remote_writable(struct rdma_dev *d)
{
	if (!vu_dev_logging(d->vu))
		return;
	for (uint32_t i = 0; i < d->mrs.cap; i++) {
		const struct rdma_mr *mr = d->mrs.obj[i];

		if (mr && mr->pages &&
		    (mr->access & (VRDMA_ACCESS_REMOTE_WRITE | VRDMA_ACCESS_REMOTE_ATOMIC)))
			vu_pages_log(d->vu, mr->pages, mr->first_offset, mr->length);
	}
}

void rdma_timer_fired(struct vu_dev *vu, int fd, void *data)
{
	struct rdma_dev *d = data;
	uint64_t expirations;

	(void)vu;
	if (read(fd, &expirations, sizeof(expirations)) < 0 || d->quiesced)
		return;
	rdma_work_refill(d);
	for (uint32_t i = 0; i < d->qps.cap; i++) {
		struct rdma_qp *qp = d->qps.obj[i];

		if (!qp)
			continue;
		rdma_rq_fill(d, qp);
		/* Sends the last call's work budget left in the ring. */
		if (qp->sq_more)
			rdma_sq_take(d, qp);
	}
	if (++d->ticks % LOG_EVERY_TICKS == 0)
		rdma_log_remote_writable(d);
	rdma_flush_events(d);
}

static bool all_drained(const struct rdma_dev *d)
{
	for (uint32_t i = 0; i < d->qps.cap; i++) {
		const struct rdma_qp *qp = d->qps.obj[i];

		if (qp && (qp->sq.inflight || qp->rq.inflight))
			return false;
	}
	return true;
}

/*
 * The front end stopped the device while logging (migration): every QP
 * goes to error, the flushed completions reach the guest's CQs, the pages
 * that remote peers may have written are marked a last time, and nothing
 * lands in guest memory afterwards.
 */
void rdma_quiesce(struct rdma_dev *d)
{
	uint64_t deadline = monotonic_ns() + QUIESCE_TIMEOUT_NS;

	if (d->quiesced)
		return;
	rdma_work_refill(d);
	for (uint32_t i = 0; i < d->qps.cap; i++) {
		struct rdma_qp *qp = d->qps.obj[i];

		if (qp && qp->state != VRDMA_QPS_RESET && qp->state != VRDMA_QPS_ERR)
			rdma_qp_fatal(d, qp, VRDMA_QPF_STOPPED);
	}
	do {
		for (uint32_t i = 0; i < d->cqs.cap; i++)
			if (d->cqs.obj[i])
				rdma_poll_cq(d, d->cqs.obj[i]);
		if (all_drained(d))
			break;
		usleep(1000);
	} while (monotonic_ns() < deadline);
	rdma_log_remote_writable(d);
	d->quiesced = true;
}

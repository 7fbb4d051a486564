// SPDX-License-Identifier: MIT
/*
 * Rings in guest memory (rxe's layout), the device's own positions in them
 * and what it remembers of each WQE it posted.  The guest's ring indexes
 * are never trusted: the device keeps its own positions and only ever
 * reads the producer index, masked.
 */
#include <errno.h>
#include <string.h>

#include "rdma-internal.h"
#include "util.h"

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

uint8_t *rdma_ring_slot(const struct rdma_ring *r, uint32_t i)
{
	return r->pages->addr + VRDMA_RING_DATA + ((size_t)(i & r->mask) << r->slot_log2);
}

/*
 * The driver's index, masked: any value is a valid slot.  A ring whose
 * memory went away (rdma_ring_fini() at mem_gone, spec section 9) reads as
 * empty and takes no write: the device never touches that memory again,
 * nor marks it dirty, whatever the QP or CQ goes through afterwards.
 */
uint32_t rdma_ring_load(const struct rdma_ring *r, size_t off)
{
	if (!r->pages)
		return 0;
	return __atomic_load_n((uint32_t *)(r->pages->addr + off), __ATOMIC_ACQUIRE) & r->mask;
}

void rdma_ring_store(struct rdma_dev *d, const struct rdma_ring *r, size_t off, uint32_t v)
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

struct rdma_shadow *rdma_shadow_at(const struct rdma_wq *wq, uint32_t slot)
{
	return (struct rdma_shadow *)(wq->shadow + (size_t)(slot & wq->ring.mask) * wq->shadow_size);
}

static void wq_reset(struct rdma_dev *d, struct rdma_wq *wq)
{
	wq->next = wq->tail = wq->inflight = 0;
	rdma_ring_store(d, &wq->ring, VRDMA_RING_CONSUMER, 0);
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

uint64_t rdma_host_wr_id(const struct rdma_qp *qp, uint32_t slot, uint64_t queue_bit)
{
	return (uint64_t)qp->incarnation << RDMA_WRID_INCARNATION_SHIFT | queue_bit | slot;
}

/* Room for one more in flight: the host queue is exactly as deep. */
bool rdma_wq_has_room(const struct rdma_wq *wq)
{
	return ((wq->next + 1) & wq->ring.mask) != wq->tail;
}

bool rdma_qp_takes_work(const struct rdma_dev *d, const struct rdma_qp *qp)
{
	return !d->quiesced && !d->draining && qp->state != VRDMA_QPS_RESET && !qp->rings_gone;
}


// SPDX-License-Identifier: MIT
/*
 * The poll timer (receive rings have no doorbell in rxe's ABI), dirty
 * logging of what remote peers write, and the stop for migration.
 */
#include <sys/timerfd.h>
#include <unistd.h>

#include "rdma-internal.h"
#include "util.h"

/* Every millisecond: receive rings (no doorbell in rxe's ABI). */
#define POLL_PERIOD_NS 1000000
/* Remote-writable MRs are marked dirty every 100 ticks while logging. */
#define LOG_EVERY_TICKS 100u
#define QUIESCE_TIMEOUT_NS 2000000000ull

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
	/* Ticks are timer reads, which a loaded host makes fewer of than one
	 * a millisecond: holds for a moving peer are checked as often as the
	 * log, so that one ends close to its deadline all the same. */
	if (++d->ticks % LOG_EVERY_TICKS == 0) {
		rdma_log_remote_writable(d);
		rdma_peer_check_holds(d);
	}
	rdma_flush_events(d);
}

/* Nothing of the QP's is on the host that will complete by itself: its
 * sends are done, and a QP in error has flushed its receives too. */
static bool qp_drained(const struct rdma_qp *qp)
{
	return !qp->sq.inflight && (qp->state != VRDMA_QPS_ERR || !qp->rq.inflight);
}

static bool all_drained(const struct rdma_dev *d)
{
	for (uint32_t i = 0; i < d->qps.cap; i++) {
		const struct rdma_qp *qp = d->qps.obj[i];

		if (qp && !qp_drained(qp))
			return false;
	}
	return true;
}

/* Delivers completions until every QP drained, or the deadline passed. */
static bool drain(struct rdma_dev *d, uint64_t deadline)
{
	for (;;) {
		for (uint32_t i = 0; i < d->cqs.cap; i++)
			if (d->cqs.obj[i])
				rdma_poll_cq(d, d->cqs.obj[i]);
		if (all_drained(d))
			return true;
		if (monotonic_ns() >= deadline)
			return false;
		usleep(1000);
	}
}

static bool connected(const struct rdma_qp *qp)
{
	return qp->state >= VRDMA_QPS_INIT && qp->state <= VRDMA_QPS_RTS;
}

static bool peer_elsewhere(struct rdma_dev *d, struct rdma_qp *qp)
{
	return connected(qp) && !rdma_qp_peer_is_local(d, qp);
}

/*
 * The front end stopped the device while logging (migration).  The device
 * takes no more work and lets what was posted complete into the guest's
 * CQs, so that nothing is in flight and its state can move (rdma-migrate.c).
 * A QP whose peer is elsewhere is held from the peer's side: its back end
 * is asked to stop sending to it and to drain (rdma-peer.c).  Where that
 * cannot be (a native peer, no peer protocol here or there), the peer could
 * still write guest memory after the stop, so the QP goes to error
 * (QP_FATAL, STOPPED), as does a QP that did not drain in time.  The pages
 * remote peers may have written are marked a last time, and nothing lands
 * in guest memory afterwards.
 */
void rdma_quiesce(struct rdma_dev *d)
{
	uint64_t deadline = monotonic_ns() + QUIESCE_TIMEOUT_NS;

	if (d->quiesced)
		return;
	rdma_work_refill(d);
	d->draining = true;
	rdma_peer_pause_all(d, peer_elsewhere);
	if (!drain(d, deadline)) {
		for (uint32_t i = 0; i < d->qps.cap; i++) {
			struct rdma_qp *qp = d->qps.obj[i];

			if (qp && connected(qp) && !qp_drained(qp))
				rdma_qp_fatal(d, qp, VRDMA_QPF_STOPPED);
		}
		drain(d, monotonic_ns() + QUIESCE_TIMEOUT_NS);
	}
	rdma_log_remote_writable(d);
	d->draining = false;
	d->quiesced = true;
}

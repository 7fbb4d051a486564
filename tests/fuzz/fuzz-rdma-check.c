// SPDX-License-Identifier: MIT
/*
 * vhost/rdma/rdma-check.c: every guest byte of the paravirtual RDMA device.
 *
 * Input: [mode][knob] bytes...
 *   mode 0: a control request (header + payload), checked as rdma-ctrl.c
 *           does: rdma_check_header, then the checker of its opcode, then
 *           the page list read out as the command would.
 *   mode 1/2: one send/receive WQE slot, with work-queue caps a QP that
 *           passed rdma_check_create_qp could have (knob picks them).
 *   mode 3: a device state for a migration (rdma-state.c), decoded as the
 *           destination does; every record it hands on is read whole,
 *           and the state is checked as a whole (names, references,
 *           quotas).
 * The request and the slot sit in buffers exactly as large as the guest
 * made them, so ASan sees every overread.
 */
#include <glib.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "rdma-check-shared.h"
#include "rdma-internal.h"
#include "rdma-state.h"

#define GIB (1ull << 30)

/* A small host (rxe-like): clamps below the device's own maxima. */
static const struct rdma_limits lim_small = {
	.max_mr_size = 1 * GIB, .max_qp_wr = 1023, .max_cqe = 4095,
	.max_send_sge = 4, .max_recv_sge = 2, .max_inline = 64,
	.gid_tbl_len = 1, .max_rd_atom = 1, .atomics = false,
};

static void pages_read(const struct rdma_request *rq, size_t fixed)
{
	g_autofree uint64_t *pages = NULL;

	/* Exactly the page list, nothing before or after it. */
	FUZZ_CHECK(rq->pages == rq->payload + fixed);
	FUZZ_CHECK(rq->len == fixed + 8 * rq->npages);
	pages = rdma_request_pages(rq, 0, rq->npages);
}

static void command(const uint8_t *buf, size_t len, const struct rdma_limits *lim)
{
	struct rdma_request rq;
	struct vrdma_reg_mr_req mr;
	struct vrdma_create_cq_req cq;
	struct vrdma_create_qp_req qp;
	struct vrdma_modify_qp_req mq;
	struct vrdma_cm_connect_req cc;
	struct vrdma_cm_listen_req cl;
	struct vrdma_cm_accept_req ca;
	struct vrdma_cm_reject_req cj;
	uint32_t handle;
	uint16_t gid;

	if (rdma_check_header(buf, len, &rq) != VRDMA_OK)
		return;
	FUZZ_CHECK(rq.opcode >= VRDMA_CMD_QUERY_DEVICE && rq.opcode <= VRDMA_CMD_MAX);
	FUZZ_CHECK(rq.payload == buf + 8 && rq.len == len - 8);
	switch (rq.opcode) {
	case VRDMA_CMD_QUERY_PORT:
		(void)rdma_check_port(&rq);
		break;
	case VRDMA_CMD_QUERY_GID:
		if (rdma_check_gid(&rq, lim, &gid) == VRDMA_OK)
			FUZZ_CHECK(gid < lim->gid_tbl_len);
		break;
	case VRDMA_CMD_REG_MR:
		if (rdma_check_reg_mr(&rq, lim, &mr) == VRDMA_OK) {
			FUZZ_CHECK(mr.length && mr.length <= lim->max_mr_size);
			FUZZ_CHECK(rq.npages == mr.npages);
			pages_read(&rq, sizeof(mr));
		}
		break;
	case VRDMA_CMD_CREATE_CQ:
		if (rdma_check_create_cq(&rq, lim, &cq) == VRDMA_OK) {
			FUZZ_CHECK(cq.log2_slots >= 1 && cq.log2_slots <= RDMA_MAX_LOG2_SLOTS);
			FUZZ_CHECK((1ull << cq.log2_slots) - 1 <= lim->max_cqe);
			pages_read(&rq, sizeof(cq));
		}
		break;
	case VRDMA_CMD_CREATE_QP:
		if (rdma_check_create_qp(&rq, lim, &qp) == VRDMA_OK) {
			FUZZ_CHECK(qp.max_send_sge >= 1 && qp.max_send_sge <= lim->max_send_sge);
			FUZZ_CHECK(qp.max_recv_sge >= 1 && qp.max_recv_sge <= lim->max_recv_sge);
			FUZZ_CHECK(qp.max_inline_data <= lim->max_inline);
			FUZZ_CHECK((1ull << qp.sq_log2_slots) - 1 <= lim->max_qp_wr);
			FUZZ_CHECK((1ull << qp.rq_log2_slots) - 1 <= lim->max_qp_wr);
			FUZZ_CHECK(rq.npages == (uint64_t)qp.sq_npages + qp.rq_npages);
			pages_read(&rq, sizeof(qp));
		}
		break;
	case VRDMA_CMD_MODIFY_QP:
		(void)rdma_check_modify_qp(&rq, lim, &mq);
		break;
	case VRDMA_CMD_CM_CONNECT:
		if (rdma_check_cm_connect(&rq, lim, &cc) == VRDMA_OK)
			FUZZ_CHECK(cc.qp && cc.dst_port && cc.pdata_len <= sizeof(cc.pdata));
		break;
	case VRDMA_CMD_CM_LISTEN:
		if (rdma_check_cm_listen(&rq, &cl) == VRDMA_OK)
			FUZZ_CHECK(cl.port && cl.backlog && cl.backlog <= VRDMA_CM_MAX_BACKLOG);
		break;
	case VRDMA_CMD_CM_ACCEPT:
		if (rdma_check_cm_accept(&rq, lim, &ca) == VRDMA_OK)
			FUZZ_CHECK(ca.conn && ca.qp && ca.pdata_len <= sizeof(ca.pdata));
		break;
	case VRDMA_CMD_CM_REJECT:
		if (rdma_check_cm_reject(&rq, &cj) == VRDMA_OK)
			FUZZ_CHECK(cj.conn && cj.pdata_len <= sizeof(cj.pdata));
		break;
	case VRDMA_CMD_CM_GET_EVENT:
		if (rdma_check_empty(&rq) == VRDMA_OK)
			FUZZ_CHECK(rq.len == 0);
		break;
	default: /* QUERY_DEVICE, CREATE_PD: no payload, checked in rdma-ctrl.c */
		if (rdma_cmd_takes_handle(rq.opcode))
			(void)rdma_check_handle(&rq, &handle);
		break;
	}
}

static uint32_t log2_ceil(uint64_t v)
{
	uint32_t l = 0;

	while ((1ull << l) < v)
		l++;
	return l;
}

/* Caps of a WQ whose shape rdma_check_create_qp accepted. */
static struct rdma_wq_caps wq_caps(uint8_t knob, bool send)
{
	uint32_t max_sge = 1 + knob % RDMA_MAX_SGE;
	uint32_t max_inline = send ? (knob >> 5) * (RDMA_MAX_INLINE / 7) : 0;
	uint64_t need = send ? VRDMA_SWQE_BASE_SIZE + MAX(16ull * max_sge, (uint64_t)max_inline)
			     : VRDMA_RWQE_BASE_SIZE + 16ull * max_sge;
	uint32_t slot_log2 = MAX(log2_ceil(need), RDMA_MIN_SLOT_LOG2);

	/* A larger slot than needed is allowed too. */
	if ((knob & 0x10) && slot_log2 < RDMA_MAX_SLOT_LOG2)
		slot_log2++;
	return (struct rdma_wq_caps){
		.slot_size = 1u << slot_log2, .max_sge = max_sge,
		.max_inline = max_inline, .atomics = knob & 1,
	};
}

static void wqe(const uint8_t *p, size_t n, uint8_t knob, bool send)
{
	struct rdma_wq_caps caps = wq_caps(knob, send);
	g_autofree uint8_t *slot = g_malloc0(caps.slot_size); /* the device's private copy */
	const uint8_t *end = slot + caps.slot_size;

	memcpy(slot, p, MIN(n, (size_t)caps.slot_size));
	if (send) {
		struct rdma_send_wqe w;

		if (rdma_parse_send_wqe(slot, &caps, &w) != RDMA_WC_SUCCESS)
			return;
		if (w.flags & VRDMA_SEND_INLINE) {
			FUZZ_CHECK(w.length <= caps.max_inline && w.num_sge == 0);
			FUZZ_CHECK(w.inline_data >= slot && w.inline_data + w.length <= end);
		} else {
			FUZZ_CHECK(w.num_sge <= caps.max_sge && w.num_sge <= RDMA_MAX_SGE);
			FUZZ_CHECK((const uint8_t *)(w.sge + w.num_sge) <= end);
		}
	} else {
		struct rdma_recv_wqe w;

		if (rdma_parse_recv_wqe(slot, &caps, &w) != RDMA_WC_SUCCESS)
			return;
		FUZZ_CHECK(w.num_sge <= caps.max_sge && w.num_sge <= RDMA_MAX_SGE);
		FUZZ_CHECK((const uint8_t *)(w.sge + w.num_sge) <= end);
	}
}

/* ---- mode 3: a migrated device's state ---- */

static int st_begin(void *o, uint32_t generation)
{
	(void)o;
	FUZZ_CHECK(generation != 0);
	return 0;
}

static int st_pd(void *o, uint32_t handle)
{
	(void)o;
	FUZZ_CHECK(handle != 0);
	return 0;
}

static int st_mr(void *o, struct rdma_state_mr *mr)
{
	(void)o;
	pages_read(&mr->rq, sizeof(mr->req));
	return 0;
}

static int st_cq(void *o, struct rdma_state_cq *cq)
{
	(void)o;
	pages_read(&cq->rq, sizeof(cq->req));
	FUZZ_CHECK(!(cq->prod >> cq->req.log2_slots));
	return 0;
}

static int st_qp(void *o, struct rdma_state_qp *qp)
{
	(void)o;
	pages_read(&qp->rq, sizeof(qp->req));
	FUZZ_CHECK(qp->attr.qp == qp->handle);
	return 0;
}

static int st_event(void *o, const struct vrdma_event *ev)
{
	(void)o;
	FUZZ_CHECK(ev->type != 0);
	return 0;
}

static int st_peer(void *o, const struct rdma_state_peer *peer)
{
	(void)o;
	FUZZ_CHECK(peer->n_rkeys <= RDMA_STATE_MAX_PEER_RKEYS);
	return 0;
}

static int st_cm_listen(void *o, const struct rdma_state_cm_listen *l)
{
	(void)o;
	FUZZ_CHECK(l->port && l->backlog && l->backlog <= VRDMA_CM_MAX_BACKLOG);
	return 0;
}

static int st_cm_conn(void *o, const struct rdma_state_cm_conn *c)
{
	(void)o;
	FUZZ_CHECK(c->live == (c->qp != 0));
	return 0;
}

static int st_cm_event(void *o, const struct rdma_state_cm_event *e)
{
	(void)o;
	FUZZ_CHECK(e->ev.pdata_len <= sizeof(e->ev.pdata) && e->ev.conn != 0);
	return 0;
}

static void device_state(const uint8_t *buf, size_t len, const struct rdma_limits *lim)
{
	static const struct rdma_state_ops ops = {
		st_begin, st_pd,   st_mr,	 st_cq,	     st_qp,
		st_event, st_peer, st_cm_listen, st_cm_conn, st_cm_event,
	};

	const struct rdma_quota limit = { 64, 64, 64, 64, 1ull << 30, 1ull << 20, 0 };
	const struct rdma_quota used = { 0 };
	uint32_t generation = 0;

	(void)rdma_state_decode(buf, len, lim, &ops, NULL);
	/* And as a whole, as the destination checks it before anything. */
	if (rdma_state_check(buf, len, lim, &limit, &used, &generation) == VRDMA_OK)
		FUZZ_CHECK(generation != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	switch (data[0] % 4) {
	case 3:
		device_state(data + 2, size - 2, data[1] & 1 ? &lim_small : &lim_full);
		break;
	case 0:
		command(data + 2, size - 2, data[1] & 1 ? &lim_small : &lim_full);
		break;
	case 1:
		wqe(data + 2, size - 2, data[1], true);
		break;
	default:
		wqe(data + 2, size - 2, data[1], false);
		break;
	}
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * Every byte a guest gives the RDMA device is decoded and checked here,
 * once, before anything acts on it: control requests (sizes, reserved
 * fields, counts, page lists against lengths, access bits, QP types) and
 * work-queue entries (opcodes, flags, SGE counts, inline lengths).  Nothing
 * here touches verbs or guest memory, so it is tested and fuzzed alone.
 * Handles, keys and addresses are checked against live objects later, by
 * the code that owns those objects.
 */
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>
#include <stddef.h>
#include <string.h>

#include "rdma-internal.h"
#include "util.h"

/* The rings are rxe's public user ABI: stock librxe must find every field
 * where the device reads or writes it. */
#define SAME_OFFSET(ours, type, member) \
	static_assert((ours) == offsetof(type, member), #ours " is not rxe's " #member)
SAME_OFFSET(VRDMA_RING_PRODUCER, struct rxe_queue_buf, producer_index);
SAME_OFFSET(VRDMA_RING_CONSUMER, struct rxe_queue_buf, consumer_index);
SAME_OFFSET(VRDMA_RING_DATA, struct rxe_queue_buf, data);
SAME_OFFSET(VRDMA_RING_LOG2_ELEM, struct rxe_queue_buf, log2_elem_size);
SAME_OFFSET(VRDMA_RING_INDEX_MASK, struct rxe_queue_buf, index_mask);
SAME_OFFSET(VRDMA_SWQE_WR_ID, struct rxe_send_wqe, wr.wr_id);
SAME_OFFSET(VRDMA_SWQE_OPCODE, struct rxe_send_wqe, wr.opcode);
SAME_OFFSET(VRDMA_SWQE_SEND_FLAGS, struct rxe_send_wqe, wr.send_flags);
SAME_OFFSET(VRDMA_SWQE_IMM, struct rxe_send_wqe, wr.ex.imm_data);
SAME_OFFSET(VRDMA_SWQE_REMOTE_ADDR, struct rxe_send_wqe, wr.wr.rdma.remote_addr);
SAME_OFFSET(VRDMA_SWQE_RDMA_RKEY, struct rxe_send_wqe, wr.wr.rdma.rkey);
SAME_OFFSET(VRDMA_SWQE_REMOTE_ADDR, struct rxe_send_wqe, wr.wr.atomic.remote_addr);
SAME_OFFSET(VRDMA_SWQE_COMPARE_ADD, struct rxe_send_wqe, wr.wr.atomic.compare_add);
SAME_OFFSET(VRDMA_SWQE_SWAP, struct rxe_send_wqe, wr.wr.atomic.swap);
SAME_OFFSET(VRDMA_SWQE_ATOMIC_RKEY, struct rxe_send_wqe, wr.wr.atomic.rkey);
SAME_OFFSET(VRDMA_SWQE_DMA_LENGTH, struct rxe_send_wqe, dma.length);
SAME_OFFSET(VRDMA_SWQE_DMA_NUM_SGE, struct rxe_send_wqe, dma.num_sge);
SAME_OFFSET(VRDMA_SWQE_SGE, struct rxe_send_wqe, dma.sge);
SAME_OFFSET(VRDMA_SWQE_SGE, struct rxe_send_wqe, dma.inline_data);
SAME_OFFSET(VRDMA_RWQE_WR_ID, struct rxe_recv_wqe, wr_id);
SAME_OFFSET(VRDMA_RWQE_DMA_NUM_SGE, struct rxe_recv_wqe, dma.num_sge);
SAME_OFFSET(VRDMA_RWQE_SGE, struct rxe_recv_wqe, dma.sge);
SAME_OFFSET(0, struct ib_uverbs_wc, wr_id);
static_assert(offsetof(struct vrdma_cqe, status) == offsetof(struct ib_uverbs_wc, status) &&
	      offsetof(struct vrdma_cqe, opcode) == offsetof(struct ib_uverbs_wc, opcode) &&
	      offsetof(struct vrdma_cqe, byte_len) == offsetof(struct ib_uverbs_wc, byte_len) &&
	      offsetof(struct vrdma_cqe, imm_data) == offsetof(struct ib_uverbs_wc, ex.imm_data) &&
	      offsetof(struct vrdma_cqe, qp_num) == offsetof(struct ib_uverbs_wc, qp_num) &&
	      offsetof(struct vrdma_cqe, src_qp) == offsetof(struct ib_uverbs_wc, src_qp) &&
	      offsetof(struct vrdma_cqe, wc_flags) == offsetof(struct ib_uverbs_wc, wc_flags) &&
	      offsetof(struct vrdma_cqe, port_num) == offsetof(struct ib_uverbs_wc, port_num) &&
	      sizeof(struct vrdma_cqe) == sizeof(struct ib_uverbs_wc),
	      "the CQE is not struct ib_uverbs_wc");
static_assert(sizeof(struct vrdma_sge) == sizeof(struct rxe_sge), "the SGE is not rxe's");

static bool all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

int rdma_check_header(const uint8_t *buf, size_t len, struct rdma_request *ret)
{
	struct vrdma_cmd_hdr h;

	if (len < sizeof(h))
		return VRDMA_EINVAL;
	memcpy(&h, buf, sizeof(h));
	*ret = (struct rdma_request){
		.opcode = h.opcode, .payload = buf + sizeof(h), .len = len - sizeof(h),
	};
	if (h.flags || h.reserved)
		return VRDMA_EINVAL;
	if (h.opcode < VRDMA_CMD_QUERY_DEVICE || h.opcode > VRDMA_CMD_MAX)
		return VRDMA_EOPNOTSUPP;
	return VRDMA_OK;
}

/* The fixed part of a request, copied out (the buffer may be unaligned). */
static int take_fixed(const struct rdma_request *rq, void *fixed, size_t size)
{
	if (rq->len < size)
		return VRDMA_EINVAL;
	memcpy(fixed, rq->payload, size);
	return VRDMA_OK;
}

/* The page list after the fixed part: exactly npages entries. */
static int take_pages(struct rdma_request *rq, size_t fixed, uint64_t npages)
{
	if (npages > (rq->len - fixed) / 8 || rq->len - fixed != npages * 8)
		return VRDMA_EINVAL;
	rq->npages = npages;
	rq->pages = rq->payload + fixed;
	return VRDMA_OK;
}

uint64_t *rdma_request_pages(const struct rdma_request *rq, uint64_t first, uint64_t n)
{
	uint64_t *a = g_new(uint64_t, n ? n : 1);

	for (uint64_t i = 0; i < n; i++)
		a[i] = get_le64(rq->pages + 8 * (first + i));
	return a;
}

static bool pages_aligned(const struct rdma_request *rq, uint64_t page)
{
	for (uint64_t i = 0; i < rq->npages; i++)
		if (get_le64(rq->pages + 8 * i) & (page - 1))
			return false;
	return true;
}

/* Fixed parts with no page list must be exact. */
static int take_exact(const struct rdma_request *rq, void *fixed, size_t size)
{
	return rq->len == size ? take_fixed(rq, fixed, size) : VRDMA_EINVAL;
}

int rdma_check_handle(const struct rdma_request *rq, uint32_t *ret)
{
	struct vrdma_handle h;
	int r = take_exact(rq, &h, sizeof(h));

	if (r)
		return r;
	if (h.reserved)
		return VRDMA_EINVAL;
	*ret = h.handle;
	return h.handle ? VRDMA_OK : VRDMA_ENOENT;
}

int rdma_check_port(const struct rdma_request *rq)
{
	struct vrdma_port_req p;
	int r = take_exact(rq, &p, sizeof(p));

	if (r)
		return r;
	if (!all_zero(p.reserved, sizeof(p.reserved)) || p.port != 1)
		return VRDMA_EINVAL;
	return VRDMA_OK;
}

int rdma_check_gid(const struct rdma_request *rq, const struct rdma_limits *lim,
		   uint16_t *ret_index)
{
	struct vrdma_gid_req g;
	int r = take_exact(rq, &g, sizeof(g));

	if (r)
		return r;
	if (g.port != 1 || g.reserved || g.reserved2 || g.index >= lim->gid_tbl_len)
		return VRDMA_EINVAL;
	*ret_index = g.index;
	return VRDMA_OK;
}

static bool access_ok(uint32_t access)
{
	/* IB: a remote peer may write only where the local side may. */
	if ((access & (VRDMA_ACCESS_REMOTE_WRITE | VRDMA_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & VRDMA_ACCESS_LOCAL_WRITE))
		return false;
	return true;
}

int rdma_check_reg_mr(struct rdma_request *rq, const struct rdma_limits *lim,
		      struct vrdma_reg_mr_req *ret)
{
	struct vrdma_reg_mr_req m;
	uint64_t page, first, span;
	int r = take_fixed(rq, &m, sizeof(m));

	if (r)
		return r;
	if (m.access & ~(uint32_t)VRDMA_ACCESS_ALL)
		return VRDMA_EPERM;
	if (!access_ok(m.access) || m.length == 0 || m.iova + m.length < m.iova)
		return VRDMA_EINVAL;
	if (m.length > lim->max_mr_size)
		return VRDMA_E2BIG;
	if (m.page_shift != 12 && m.page_shift != 21)
		return VRDMA_EINVAL;
	page = 1ull << m.page_shift;
	first = m.iova & (page - 1);
	span = (first + m.length + page - 1) >> m.page_shift; /* no overflow: length <= 4 GiB */
	if (m.npages != span)
		return VRDMA_EINVAL;
	r = take_pages(rq, sizeof(m), m.npages);
	if (r)
		return r;
	if (!pages_aligned(rq, page))
		return VRDMA_EINVAL;
	*ret = m;
	return VRDMA_OK;
}

uint64_t rdma_ring_bytes(uint32_t log2_slots, uint32_t slot_log2)
{
	return VRDMA_RING_DATA + (1ull << (log2_slots + slot_log2));
}

static uint64_t ring_pages(uint32_t log2_slots, uint32_t slot_log2)
{
	return (rdma_ring_bytes(log2_slots, slot_log2) + VRDMA_RING_PAGE - 1) / VRDMA_RING_PAGE;
}

static int check_page_list(struct rdma_request *rq, size_t fixed, uint64_t npages)
{
	int r = take_pages(rq, fixed, npages);

	if (r)
		return r;
	return pages_aligned(rq, VRDMA_RING_PAGE) ? VRDMA_OK : VRDMA_EINVAL;
}

static uint32_t log2_floor(uint64_t v)
{
	uint32_t l = 0;

	while (v >>= 1)
		l++;
	return l;
}

int rdma_check_create_cq(struct rdma_request *rq, const struct rdma_limits *lim,
			 struct vrdma_create_cq_req *ret)
{
	struct vrdma_create_cq_req c;
	int r = take_fixed(rq, &c, sizeof(c));

	if (r)
		return r;
	if (c.reserved || c.comp_vector || c.log2_slots < 1)
		return VRDMA_EINVAL;
	if (c.log2_slots > RDMA_MAX_LOG2_SLOTS || c.log2_slots > log2_floor(lim->max_cqe + 1ull))
		return VRDMA_E2BIG;
	if (c.npages != ring_pages(c.log2_slots, VRDMA_CQE_SLOT_LOG2))
		return VRDMA_EINVAL;
	r = check_page_list(rq, sizeof(c), c.npages);
	if (r)
		return r;
	*ret = c;
	return VRDMA_OK;
}

static int check_wq_shape(uint32_t log2_slots, uint32_t slot_log2, uint64_t need,
			  uint32_t npages, const struct rdma_limits *lim)
{
	if (log2_slots < 1 || slot_log2 < RDMA_MIN_SLOT_LOG2 || slot_log2 > RDMA_MAX_SLOT_LOG2)
		return VRDMA_EINVAL;
	if (log2_slots > RDMA_MAX_LOG2_SLOTS || log2_slots > log2_floor(lim->max_qp_wr + 1ull))
		return VRDMA_E2BIG;
	if ((1ull << slot_log2) < need)
		return VRDMA_EINVAL;
	if (ring_pages(log2_slots, slot_log2) > VRDMA_MAX_RING_PAGES)
		return VRDMA_E2BIG;
	if (npages != ring_pages(log2_slots, slot_log2))
		return VRDMA_EINVAL;
	return VRDMA_OK;
}

int rdma_check_create_qp(struct rdma_request *rq, const struct rdma_limits *lim,
			 struct vrdma_create_qp_req *ret)
{
	struct vrdma_create_qp_req q;
	uint64_t send_need, recv_need;
	int r = take_fixed(rq, &q, sizeof(q));

	if (r)
		return r;
	if (q.reserved || q.sq_sig_all > 1)
		return VRDMA_EINVAL;
	/* SMI, GSI and raw packet QPs would reach the fabric's management
	 * and other tenants' traffic: never from a guest. */
	if (q.qp_type == 0 || q.qp_type == 1 || q.qp_type == 8)
		return VRDMA_EPERM;
	if (q.qp_type != VRDMA_QPT_RC)
		return VRDMA_EOPNOTSUPP;
	if (!q.pd || !q.send_cq || !q.recv_cq)
		return VRDMA_ENOENT;
	if (q.max_send_sge > lim->max_send_sge || q.max_recv_sge > lim->max_recv_sge ||
	    q.max_inline_data > lim->max_inline)
		return VRDMA_E2BIG;
	if (q.max_send_sge < 1 || q.max_recv_sge < 1)
		return VRDMA_EINVAL;
	send_need = VRDMA_SWQE_BASE_SIZE + MAX(16ull * q.max_send_sge, (uint64_t)q.max_inline_data);
	recv_need = VRDMA_RWQE_BASE_SIZE + 16ull * q.max_recv_sge;
	r = check_wq_shape(q.sq_log2_slots, q.sq_log2_slot_size, send_need, q.sq_npages, lim);
	if (!r)
		r = check_wq_shape(q.rq_log2_slots, q.rq_log2_slot_size, recv_need, q.rq_npages,
				   lim);
	if (!r)
		r = check_page_list(rq, sizeof(q), (uint64_t)q.sq_npages + q.rq_npages);
	if (r)
		return r;
	*ret = q;
	return VRDMA_OK;
}

/* RC states a guest may name: SQD is not supported, SQE is not RC's. */
static int check_state(uint32_t given, uint32_t state)
{
	if (!given)
		return VRDMA_OK;
	if (state == VRDMA_QPS_SQD)
		return VRDMA_EOPNOTSUPP;
	if (state == VRDMA_QPS_SQE || state > VRDMA_QPS_ERR)
		return VRDMA_EINVAL;
	return VRDMA_OK;
}

int rdma_check_modify_qp(const struct rdma_request *rq, const struct rdma_limits *lim,
			 struct vrdma_modify_qp_req *ret)
{
	struct vrdma_modify_qp_req m;
	const struct vrdma_qp_attr *a = &m.attr;
	int r = take_exact(rq, &m, sizeof(m));

	if (r)
		return r;
	if (!m.qp)
		return VRDMA_ENOENT;
	if (m.attr_mask & ~(uint32_t)VRDMA_QP_ATTR_SUPPORTED ||
	    !all_zero(a->reserved, sizeof(a->reserved)))
		return VRDMA_EINVAL;
	r = check_state(m.attr_mask & VRDMA_QP_STATE, a->qp_state);
	if (!r)
		r = check_state(m.attr_mask & VRDMA_QP_CUR_STATE, a->cur_qp_state);
	if (r)
		return r;
	if ((m.attr_mask & VRDMA_QP_PORT) && a->port_num != 1)
		return VRDMA_EINVAL;
	if ((m.attr_mask & VRDMA_QP_ACCESS_FLAGS) &&
	    (a->qp_access_flags & ~(uint32_t)VRDMA_ACCESS_ALL))
		return VRDMA_EPERM;
	if ((m.attr_mask & VRDMA_QP_PATH_MTU) && (a->path_mtu < 1 || a->path_mtu > 5))
		return VRDMA_EINVAL;
	if ((m.attr_mask & VRDMA_QP_AV) && a->ah.sgid_index >= lim->gid_tbl_len)
		return VRDMA_EINVAL;
	if ((m.attr_mask & VRDMA_QP_DEST_QPN) && a->dest_qp_num > 0xffffff)
		return VRDMA_EINVAL;
	/* PSNs are 24 bits; a field whose bit is clear is not looked at. */
	if (((m.attr_mask & VRDMA_QP_RQ_PSN) && a->rq_psn > 0xffffff) ||
	    ((m.attr_mask & VRDMA_QP_SQ_PSN) && a->sq_psn > 0xffffff))
		return VRDMA_EINVAL;
	if (((m.attr_mask & VRDMA_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > lim->max_rd_atom) ||
	    ((m.attr_mask & VRDMA_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > lim->max_rd_atom))
		return VRDMA_E2BIG;
	if ((m.attr_mask & VRDMA_QP_TIMEOUT && a->timeout > 31) ||
	    (m.attr_mask & VRDMA_QP_RETRY_CNT && a->retry_cnt > 7) ||
	    (m.attr_mask & VRDMA_QP_RNR_RETRY && a->rnr_retry > 7) ||
	    (m.attr_mask & VRDMA_QP_MIN_RNR_TIMER && a->min_rnr_timer > 31) ||
	    (m.attr_mask & VRDMA_QP_AV && a->ah.flow_label > 0xfffff))
		return VRDMA_EINVAL;
	*ret = m;
	return VRDMA_OK;
}

/* ---- connection management ---- */

/* A peer's address: unicast IPv4 (not 0.0.0.0, multicast or broadcast). */
static bool unicast_ipv4(const uint8_t ip[4])
{
	uint32_t a = (uint32_t)ip[0] << 24 | (uint32_t)ip[1] << 16 | (uint32_t)ip[2] << 8 | ip[3];

	return a != 0 && a != 0xffffffffu && (ip[0] & 0xf0) != 0xe0;
}

int rdma_check_cm_connect(const struct rdma_request *rq, const struct rdma_limits *lim,
			  struct vrdma_cm_connect_req *ret)
{
	struct vrdma_cm_connect_req c;
	int r = take_exact(rq, &c, sizeof(c));

	if (r)
		return r;
	if (!c.qp)
		return VRDMA_ENOENT;
	if (!all_zero(c.reserved, sizeof(c.reserved)) || !c.dst_port ||
	    !unicast_ipv4(c.dst_ip) || c.pdata_len > sizeof(c.pdata))
		return VRDMA_EINVAL;
	if (c.ord > lim->max_rd_atom || c.ird > lim->max_rd_atom)
		return VRDMA_E2BIG;
	*ret = c;
	return VRDMA_OK;
}

int rdma_check_cm_listen(const struct rdma_request *rq, struct vrdma_cm_listen_req *ret)
{
	struct vrdma_cm_listen_req l;
	int r = take_exact(rq, &l, sizeof(l));

	if (r)
		return r;
	if (!l.port || !l.backlog || l.backlog > VRDMA_CM_MAX_BACKLOG)
		return VRDMA_EINVAL;
	*ret = l;
	return VRDMA_OK;
}

int rdma_check_cm_accept(const struct rdma_request *rq, const struct rdma_limits *lim,
			 struct vrdma_cm_accept_req *ret)
{
	struct vrdma_cm_accept_req a;
	int r = take_exact(rq, &a, sizeof(a));

	if (r)
		return r;
	if (!a.conn || !a.qp)
		return VRDMA_ENOENT;
	if (!all_zero(a.reserved, sizeof(a.reserved)) || a.pdata_len > sizeof(a.pdata))
		return VRDMA_EINVAL;
	if (a.ord > lim->max_rd_atom || a.ird > lim->max_rd_atom)
		return VRDMA_E2BIG;
	*ret = a;
	return VRDMA_OK;
}

int rdma_check_cm_reject(const struct rdma_request *rq, struct vrdma_cm_reject_req *ret)
{
	struct vrdma_cm_reject_req j;
	int r = take_exact(rq, &j, sizeof(j));

	if (r)
		return r;
	if (!j.conn)
		return VRDMA_ENOENT;
	if (!all_zero(j.reserved, sizeof(j.reserved)) || j.pdata_len > sizeof(j.pdata))
		return VRDMA_EINVAL;
	*ret = j;
	return VRDMA_OK;
}

int rdma_check_empty(const struct rdma_request *rq)
{
	return rq->len ? VRDMA_EINVAL : VRDMA_OK;
}

/* ---- work-queue entries ---- */

static bool sges_fit(uint32_t num_sge, uint32_t base, const struct rdma_wq_caps *caps)
{
	return num_sge <= caps->max_sge && base + 16ull * num_sge <= caps->slot_size;
}

/* The sum of the SGE lengths, which must stay below 2 GiB (one message). */
static bool sge_total(const struct vrdma_sge *sge, uint32_t n, uint32_t *ret)
{
	uint64_t total = 0;

	for (uint32_t i = 0; i < n; i++)
		total += sge[i].length;
	*ret = (uint32_t)total;
	return total <= RDMA_MAX_MSG;
}

static bool opcode_ok(uint32_t op, bool atomics)
{
	switch (op) {
	case VRDMA_WR_RDMA_WRITE:
	case VRDMA_WR_RDMA_WRITE_WITH_IMM:
	case VRDMA_WR_SEND:
	case VRDMA_WR_SEND_WITH_IMM:
	case VRDMA_WR_RDMA_READ:
		return true;
	case VRDMA_WR_ATOMIC_CMP_AND_SWP:
	case VRDMA_WR_ATOMIC_FETCH_AND_ADD:
		return atomics;
	default:
		return false;
	}
}

static bool is_atomic(uint32_t op)
{
	return op == VRDMA_WR_ATOMIC_CMP_AND_SWP || op == VRDMA_WR_ATOMIC_FETCH_AND_ADD;
}

int rdma_parse_send_wqe(const uint8_t *slot, const struct rdma_wq_caps *caps,
			struct rdma_send_wqe *ret)
{
	struct rdma_send_wqe w = {
		.wr_id = get_le64(slot + VRDMA_SWQE_WR_ID),
		.opcode = get_le32(slot + VRDMA_SWQE_OPCODE),
		.flags = get_le32(slot + VRDMA_SWQE_SEND_FLAGS),
		.remote_addr = get_le64(slot + VRDMA_SWQE_REMOTE_ADDR),
		.length = get_le32(slot + VRDMA_SWQE_DMA_LENGTH),
		.num_sge = get_le32(slot + VRDMA_SWQE_DMA_NUM_SGE),
	};
	uint32_t total;

	memcpy(&w.imm, slot + VRDMA_SWQE_IMM, 4);
	*ret = w;
	if (!opcode_ok(w.opcode, caps->atomics) || (w.flags & ~(uint32_t)VRDMA_SEND_FLAGS_ALL))
		return RDMA_WC_LOC_QP_OP_ERR;
	if (is_atomic(w.opcode)) {
		ret->compare_add = get_le64(slot + VRDMA_SWQE_COMPARE_ADD);
		ret->swap = get_le64(slot + VRDMA_SWQE_SWAP);
		ret->rkey = get_le32(slot + VRDMA_SWQE_ATOMIC_RKEY);
	} else {
		ret->rkey = get_le32(slot + VRDMA_SWQE_RDMA_RKEY);
	}
	if (w.flags & VRDMA_SEND_INLINE) {
		/* Data rides in the WQE: only for what sends local bytes. */
		if (w.opcode == VRDMA_WR_RDMA_READ || is_atomic(w.opcode) ||
		    w.length > caps->max_inline || VRDMA_SWQE_SGE + (uint64_t)w.length > caps->slot_size)
			return RDMA_WC_LOC_LEN_ERR;
		ret->num_sge = 0;
		ret->inline_data = slot + VRDMA_SWQE_SGE;
		return RDMA_WC_SUCCESS;
	}
	if (!sges_fit(w.num_sge, VRDMA_SWQE_SGE, caps))
		return RDMA_WC_LOC_QP_OP_ERR;
	ret->sge = (const struct vrdma_sge *)(slot + VRDMA_SWQE_SGE);
	if (!sge_total(ret->sge, w.num_sge, &total))
		return RDMA_WC_LOC_LEN_ERR;
	ret->length = total;
	/* Atomics move exactly one aligned 8-byte word. */
	if (is_atomic(w.opcode) &&
	    (w.num_sge != 1 || ret->sge[0].length != 8 || w.remote_addr % 8))
		return RDMA_WC_LOC_LEN_ERR;
	return RDMA_WC_SUCCESS;
}

int rdma_parse_recv_wqe(const uint8_t *slot, const struct rdma_wq_caps *caps,
			struct rdma_recv_wqe *ret)
{
	uint32_t total;

	*ret = (struct rdma_recv_wqe){
		.wr_id = get_le64(slot + VRDMA_RWQE_WR_ID),
		.num_sge = get_le32(slot + VRDMA_RWQE_DMA_NUM_SGE),
		.sge = (const struct vrdma_sge *)(slot + VRDMA_RWQE_SGE),
	};
	if (!sges_fit(ret->num_sge, VRDMA_RWQE_SGE, caps))
		return RDMA_WC_LOC_QP_OP_ERR;
	if (!sge_total(ret->sge, ret->num_sge, &total))
		return RDMA_WC_LOC_LEN_ERR;
	return RDMA_WC_SUCCESS;
}

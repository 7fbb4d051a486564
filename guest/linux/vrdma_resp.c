// SPDX-License-Identifier: GPL-2.0
/*
 * vrdma: checks of what the device answers.
 *
 * The device is a host process the guest does not control, and a back
 * end of another version or a broken one must not make the driver index,
 * size or allocate anything by a value it has not checked, nor pass a
 * value to the RDMA core or to user space that the spec does not allow.
 * vrdma_cmd() (vrdma_main.c) checks the framing (used length, status) and
 * copies the payload out of device-writable memory; each check here then
 * runs on that copy, once, before any field is used.  A check returns
 * NULL, or the name of what is wrong, which the caller logs
 * (vrdma_bad_response) before failing with -EIO.
 *
 * The limits are the spec's (docs/virtio-rdma.md sections 4.3 and 14).
 * Reserved fields are not checked: nothing reads them.
 *
 * Test: tests/nested/driver-check drives several of these checks from
 * outside with the module's inject_* parameters (vrdma_main.c).
 */
#include <linux/bitops.h>
#include <linux/errno.h>
#include <linux/limits.h>
#include <linux/sizes.h>

#include "vrdma.h"

int vrdma_status_errno(u32 status)
{
	/* Only the statuses the spec defines reach callers (and user
	 * space): a kernel-internal errno such as -ERESTARTSYS must not. */
	switch (status) {
	case VRDMA_EPERM:
	case VRDMA_ENOENT:
	case VRDMA_EIO:
	case VRDMA_E2BIG:
	case VRDMA_ENOMEM:
	case VRDMA_EFAULT:
	case VRDMA_EBUSY:
	case VRDMA_EINVAL:
	case VRDMA_ENOSPC:
	case VRDMA_EOPNOTSUPP:
	case VRDMA_EADDRINUSE:
	case VRDMA_EADDRNOTAVAIL:
	case VRDMA_ENETUNREACH:
		return -(int)status;
	default:
		return -EIO;
	}
}

static bool within(u32 v, u32 lo, u32 hi)
{
	return v >= lo && v <= hi;
}

const char *vrdma_check_device_attr(const struct vrdma_device_attr *a)
{
	u64 pages = le64_to_cpu(a->page_size_cap);
	u64 mr_size = le64_to_cpu(a->max_mr_size);

	/* These size rings and slots (vrdma_create_qp, vrdma_create_cq). */
	if (!within(le32_to_cpu(a->max_send_sge), 1, VRDMA_SPEC_MAX_SGE))
		return "max_send_sge";
	if (!within(le32_to_cpu(a->max_recv_sge), 1, VRDMA_SPEC_MAX_SGE))
		return "max_recv_sge";
	if (le32_to_cpu(a->max_inline_data) > VRDMA_SPEC_MAX_INLINE)
		return "max_inline_data";
	if (!within(le32_to_cpu(a->max_qp_wr), 1, VRDMA_SPEC_MAX_WR))
		return "max_qp_wr";
	if (!within(le32_to_cpu(a->max_cqe), 1, VRDMA_SPEC_MAX_WR))
		return "max_cqe";
	/* These go into u8 fields of CM requests. */
	if (le32_to_cpu(a->max_qp_rd_atom) > VRDMA_SPEC_MAX_RD_ATOM)
		return "max_qp_rd_atom";
	if (le32_to_cpu(a->max_qp_init_rd_atom) > VRDMA_SPEC_MAX_RD_ATOM)
		return "max_qp_init_rd_atom";
	/* REG_MR page lists: 4 KiB pages always, 2 MiB where offered. */
	if (!mr_size || mr_size > VRDMA_SPEC_MAX_MR_SIZE)
		return "max_mr_size";
	if (!(pages & SZ_4K) || (pages & ~(u64)(SZ_4K | SZ_2M)))
		return "page_size_cap";
	/* The RDMA core's attributes are ints. */
	if (le32_to_cpu(a->max_qp) > INT_MAX || le32_to_cpu(a->max_cq) > INT_MAX ||
	    le32_to_cpu(a->max_mr) > INT_MAX || le32_to_cpu(a->max_pd) > INT_MAX)
		return "object count";
	if (le32_to_cpu(a->atomic_cap) > 1)
		return "atomic_cap";
	if (a->phys_port_cnt != 1)
		return "phys_port_cnt";
	return NULL;
}

const char *vrdma_check_port_attr(const struct vrdma_port_attr *p)
{
	/* The core sizes its GID and P_Key caches by these. */
	if (!within(le32_to_cpu(p->gid_tbl_len), 1, VRDMA_SPEC_MAX_GIDS))
		return "gid_tbl_len";
	if (le16_to_cpu(p->pkey_tbl_len) != 1)
		return "pkey_tbl_len";
	if (!within(le32_to_cpu(p->state), IB_PORT_DOWN, IB_PORT_ACTIVE_DEFER))
		return "state";
	if (!within(le32_to_cpu(p->max_mtu), IB_MTU_256, IB_MTU_4096) ||
	    !within(le32_to_cpu(p->active_mtu), IB_MTU_256, IB_MTU_4096))
		return "mtu";
	/* Port capability bits steer the core (CM, SM, ...): none allowed. */
	if (le32_to_cpu(p->port_cap_flags))
		return "port_cap_flags";
	if (le32_to_cpu(p->max_msg_sz) > (1u << 31))
		return "max_msg_sz";
	if (hweight8(p->active_width) != 1 || p->active_width > IB_WIDTH_2X)
		return "active_width";
	if (hweight8(p->active_speed) != 1)
		return "active_speed";
	if (p->phys_state > 7)
		return "phys_state";
	return NULL;
}

const char *vrdma_check_gid(const struct vrdma_gid_resp *g)
{
	if (le32_to_cpu(g->type) > 2)
		return "GID type";
	return NULL;
}

const char *vrdma_check_reg_mr(const struct vrdma_reg_mr_resp *r, u32 access)
{
	if (!r->mr)
		return "MR handle 0";
	/* Without remote access there is no rkey to hand out. */
	if (!(access & ~(u32)IB_ACCESS_LOCAL_WRITE) && r->rkey)
		return "rkey of an MR without remote access";
	return NULL;
}

const char *vrdma_check_create_cq(const struct vrdma_create_cq_resp *r, u32 log2_slots)
{
	if (!r->cq)
		return "CQ handle 0";
	if (le32_to_cpu(r->cqe) != (1u << log2_slots) - 1)
		return "CQ capacity";
	return NULL;
}

/*
 * librxe posts into the rings by these capacities: a larger one than the
 * slots were made for would have it write past a slot or the ring.
 */
const char *vrdma_check_create_qp(const struct vrdma_create_qp_resp *r,
				  const struct vrdma_create_qp_req *req)
{
	u32 qpn = le32_to_cpu(r->qpn);

	if (!r->qp)
		return "QP handle 0";
	/* 24-bit QP numbers; 0 and 1 are the special QPs. */
	if (qpn > VRDMA_QPN_MASK || qpn < 2)
		return "QP number";
	if (le32_to_cpu(r->max_send_wr) != (1u << le32_to_cpu(req->sq_log2_slots)) - 1 ||
	    le32_to_cpu(r->max_recv_wr) != (1u << le32_to_cpu(req->rq_log2_slots)) - 1)
		return "work request capacity";
	if (r->max_send_sge != req->max_send_sge || r->max_recv_sge != req->max_recv_sge)
		return "SGE capacity";
	if (r->max_inline_data != req->max_inline_data)
		return "inline capacity";
	return NULL;
}

const char *vrdma_check_qp_attr(const struct vrdma_qp_attr *a, u32 gid_tbl_len)
{
	if (le32_to_cpu(a->qp_state) > IB_QPS_ERR || le32_to_cpu(a->cur_qp_state) > IB_QPS_ERR)
		return "QP state";
	if (le32_to_cpu(a->path_mtu) > IB_MTU_4096)
		return "path_mtu";
	if ((le32_to_cpu(a->rq_psn) | le32_to_cpu(a->sq_psn) |
	     le32_to_cpu(a->dest_qp_num)) & ~VRDMA_QPN_MASK)
		return "PSN or QP number";
	if (le32_to_cpu(a->qp_access_flags) & ~VRDMA_ACCESS_ALL)
		return "qp_access_flags";
	if (le16_to_cpu(a->pkey_index))
		return "pkey_index";
	if (a->max_rd_atomic > VRDMA_SPEC_MAX_RD_ATOM ||
	    a->max_dest_rd_atomic > VRDMA_SPEC_MAX_RD_ATOM)
		return "rd_atomic";
	if (a->min_rnr_timer > 31 || a->timeout > 31 || a->retry_cnt > 7 || a->rnr_retry > 7)
		return "timer or retry";
	if (a->ah.sgid_index >= gid_tbl_len)
		return "sgid_index";
	if (le32_to_cpu(a->ah.flow_label) >= (1u << 20))
		return "flow_label";
	return NULL;
}

const char *vrdma_check_cm_event(const struct vrdma_cm_event *e)
{
	u16 type = le16_to_cpu(e->type);

	if (type < VRDMA_CM_EV_CONNECT_REQUEST || type > VRDMA_CM_EV_CLOSED)
		return "CM event type";
	if (!e->conn)
		return "connection handle 0";
	if (type == VRDMA_CM_EV_CONNECT_REQUEST && !e->listen)
		return "listen handle 0";
	/* iw_cm takes these as the QP's outstanding READs. */
	if (e->ird > VRDMA_SPEC_MAX_RD_ATOM || e->ord > VRDMA_SPEC_MAX_RD_ATOM)
		return "ird/ord";
	if (e->pdata_len > VRDMA_CM_ACCEPT_PDATA)
		return "pdata_len";
	/* It becomes the status of rdma_cm's event in user space. */
	if (type == VRDMA_CM_EV_CONNECT_REPLY) {
		switch (le32_to_cpu(e->status)) {
		case 0:
		case ECONNREFUSED:
		case ETIMEDOUT:
		case EHOSTUNREACH:
		case ENETUNREACH:
		case ECONNABORTED:
		case EIO:
			break;
		default:
			return "CONNECT_REPLY status";
		}
	}
	return NULL;
}

/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdma-peer.h"
#include "util.h"

/* RoCE v2 GIDs of IPv4 addresses are ::ffff:a.b.c.d. */
static bool is_v4_mapped(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(gid, prefix, sizeof(prefix)) == 0;
}

int rp_find_v4_gid(int (*query)(void *ctx, uint16_t index, uint8_t gid[16], uint32_t *type),
		   void *ctx, uint16_t max, uint8_t ret_gid[16])
{
	for (uint16_t i = 0; i < max; i++) {
		uint32_t type;

		if (query(ctx, i, ret_gid, &type) == 0 && type == VRDMA_GID_ROCE_V2 &&
		    is_v4_mapped(ret_gid))
			return i;
	}
	return -ENOENT;
}

static int native_gid(void *ctx, uint16_t index, uint8_t gid[16], uint32_t *type)
{
	struct ibv_gid_entry e;
	int r = ibv_query_gid_ex(ctx, 1, index, &e, 0);

	if (r)
		return -ENOENT;
	memcpy(gid, e.gid.raw, 16);
	*type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? VRDMA_GID_ROCE_V2 : VRDMA_GID_ROCE_V1;
	return 0;
}

int rp_native_open(const char *name, struct rp_native *n)
{
	return rp_native_open_sized(name, RP_BUF_SIZE, 64, n);
}

int rp_native_open_sized(const char *name, size_t buf_size, unsigned int depth,
			 struct rp_native *n)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_port_attr port;
	int gi;

	memset(n, 0, sizeof(*n));
	for (int i = 0; list && list[i]; i++)
		if (strcmp(ibv_get_device_name(list[i]), name) == 0)
			n->ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!n->ctx)
		return -ENODEV;
	if (ibv_query_port(n->ctx, 1, &port))
		return -EIO;
	gi = rp_find_v4_gid(native_gid, n->ctx, (uint16_t)port.gid_tbl_len, n->gid);
	if (gi < 0)
		return gi;
	n->gid_index = (uint8_t)gi;
	n->buf = aligned_alloc(4096, buf_size);
	if (n->buf)
		memset(n->buf, 0, buf_size);
	n->pd = ibv_alloc_pd(n->ctx);
	n->cq = n->pd ? ibv_create_cq(n->ctx, (int)(4 * depth), NULL, NULL, 0) : NULL;
	n->mr = n->buf && n->pd ? ibv_reg_mr(n->pd, n->buf, buf_size,
					     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						     IBV_ACCESS_REMOTE_READ |
						     IBV_ACCESS_REMOTE_ATOMIC)
				: NULL;
	if (!n->cq || !n->mr)
		return -errno ? -errno : -ENOMEM;
	n->qp = ibv_create_qp(n->pd, &(struct ibv_qp_init_attr){
		.send_cq = n->cq, .recv_cq = n->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
	});
	return n->qp ? 0 : -errno;
}

void rp_native_close(struct rp_native *n)
{
	if (n->qp)
		ibv_destroy_qp(n->qp);
	if (n->mr)
		ibv_dereg_mr(n->mr);
	if (n->cq)
		ibv_destroy_cq(n->cq);
	if (n->pd)
		ibv_dealloc_pd(n->pd);
	if (n->ctx)
		ibv_close_device(n->ctx);
	free(n->buf);
	memset(n, 0, sizeof(*n));
}

int rp_native_connect(struct rp_native *n, uint32_t remote_qpn, const uint8_t remote_gid[16],
		      uint8_t rnr_retry)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	};

	if (ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					     IBV_QP_ACCESS_FLAGS))
		return -EIO;
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = remote_qpn,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 1,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .sgid_index = n->gid_index, .hop_limit = 64 } },
	};
	memcpy(a.ah_attr.grh.dgid.raw, remote_gid, 16);
	if (ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -EIO;
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = rnr_retry,
		.max_rd_atomic = 1,
	};
	return ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
						IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						IBV_QP_MAX_QP_RD_ATOMIC) ? -EIO : 0;
}

int rp_native_post_recv(struct rp_native *n, uint64_t wr_id, uint64_t off, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)n->buf + off, len, n->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(n->qp, &wr, &bad) ? -EIO : 0;
}

int rp_native_post_send(struct rp_native *n, enum ibv_wr_opcode op, uint64_t wr_id,
			uint64_t off, uint32_t len, uint64_t remote_addr, uint32_t rkey,
			uint32_t imm)
{
	struct ibv_sge sge = { (uintptr_t)n->buf + off, len, n->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED, .imm_data = imm,
		.wr.rdma = { .remote_addr = remote_addr, .rkey = rkey },
	}, *bad;

	return ibv_post_send(n->qp, &wr, &bad) ? -EIO : 0;
}

int rp_native_wait(struct rp_native *n, struct ibv_wc *ret)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)RP_TIMEOUT_MS * 1000000ull;
	struct timespec nap = { .tv_nsec = 100000 };

	for (;;) {
		int r = ibv_poll_cq(n->cq, 1, ret);

		if (r)
			return r < 0 ? -EIO : 0;
		if (monotonic_ns() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&nap, NULL);
	}
}

static int guest_gid(void *ctx, uint16_t index, uint8_t gid[16], uint32_t *type)
{
	struct vrdma_gid_resp g;
	int r = vgd_query_gid(ctx, index, &g);

	if (r)
		return r;
	memcpy(gid, g.gid, 16);
	*type = g.type;
	return 0;
}

int rp_guest_open(const char *socket_path, struct rp_guest *p)
{
	return rp_guest_open_opts(socket_path, NULL, p);
}

int rp_guest_open_opts(const char *socket_path, const struct vgd_opts *o, struct rp_guest *p)
{
	struct vgd_qp_caps caps = {
		.sq_log2 = 6, .rq_log2 = 6, .max_send_sge = 4, .max_recv_sge = 4, .max_inline = 64,
	};
	struct vrdma_port_attr port;
	struct vrdma_port_req preq = { .port = 1 };
	int r, gi;

	memset(p, 0, sizeof(*p));
	r = vgd_open(socket_path, o, &p->g);
	if (!r)
		r = vgd_cmd(p->g, VRDMA_CMD_QUERY_PORT, &preq, sizeof(preq), &port, sizeof(port));
	if (r)
		return r;
	gi = rp_find_v4_gid(guest_gid, p->g, (uint16_t)port.gid_tbl_len, p->gid);
	if (gi < 0)
		return gi;
	p->gid_index = (uint8_t)gi;
	r = vgd_create_pd(p->g, &p->pd);
	if (!r)
		r = vgd_create_cq(p->g, 8, &p->cq);
	if (!r)
		r = vgd_create_qp(p->g, p->pd, &p->cq, &p->cq, &caps, &p->qp);
	if (!r)
		r = vgd_buf_alloc(p->g, RP_BUF_SIZE, true, &p->buf);
	if (!r)
		r = vgd_reg_mr(p->g, p->pd, &p->buf, 0, RP_BUF_SIZE, VRDMA_ACCESS_ALL, &p->mr);
	return r;
}

void rp_guest_close(struct rp_guest *p)
{
	vgd_buf_free(&p->buf);
	vgd_close(p->g);
	memset(p, 0, sizeof(*p));
}

struct vrdma_sge rp_guest_sge(const struct rp_guest *p, uint64_t off, uint32_t len)
{
	return (struct vrdma_sge){ .addr = p->mr.iova + off, .length = len, .lkey = p->mr.lkey };
}

int rp_guest_wait(struct rp_guest *p, struct vrdma_cqe *ret)
{
	return vgd_wait_cq(p->g, &p->cq, ret, 1, RP_TIMEOUT_MS, NULL);
}

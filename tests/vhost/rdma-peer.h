/* SPDX-License-Identifier: MIT */
/*
 * Test helpers for the RDMA device tests: a native verbs peer (a plain
 * libibverbs RC QP on a host device, the reference the device is compared
 * with) and a harness guest on a running vrdma-vhost, each with one QP,
 * CQ and buffer.  Used by the Soft-RoCE tier only.
 */
#ifndef VT_RDMA_PEER_H
#define VT_RDMA_PEER_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "vuf-rdma.h"

#define RP_BUF_SIZE (256u << 10)
#define RP_TIMEOUT_MS vuf_slow_ms(10000)

struct rp_native {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	uint8_t gid[16];
	uint8_t gid_index;
};

/* Opens device name with a QP; -errno, or 77-style -ENODEV without it. */
int rp_native_open(const char *name, struct rp_native *ret);
/* The same with a buffer of buf_size bytes and depth WRs per queue. */
int rp_native_open_sized(const char *name, size_t buf_size, unsigned int depth,
			 struct rp_native *ret);
void rp_native_close(struct rp_native *n);
int rp_native_connect(struct rp_native *n, uint32_t remote_qpn, const uint8_t remote_gid[16],
		      uint8_t rnr_retry);
int rp_native_post_recv(struct rp_native *n, uint64_t wr_id, uint64_t off, uint32_t len);
int rp_native_post_send(struct rp_native *n, enum ibv_wr_opcode op, uint64_t wr_id,
			uint64_t off, uint32_t len, uint64_t remote_addr, uint32_t rkey,
			uint32_t imm);
/* One completion, or -ETIMEDOUT. */
int rp_native_wait(struct rp_native *n, struct ibv_wc *ret);

/* A harness guest with one PD, CQ, QP and a scattered, registered buffer. */
struct rp_guest {
	struct vgd *g;
	uint32_t pd;
	struct vgd_cq cq;
	struct vgd_qp qp;
	struct vgd_buf buf;
	struct vgd_mr mr;
	uint8_t gid[16];
	uint8_t gid_index;
};

int rp_guest_open(const char *socket_path, struct rp_guest *ret);
int rp_guest_open_opts(const char *socket_path, const struct vgd_opts *o, struct rp_guest *ret);
void rp_guest_close(struct rp_guest *p);
/* Index of the RoCE v2 GID holding an IPv4 address, from a query function. */
int rp_find_v4_gid(int (*query)(void *ctx, uint16_t index, uint8_t gid[16], uint32_t *type),
		   void *ctx, uint16_t max, uint8_t ret_gid[16]);
/* An SGE into the guest's MR at off. */
struct vrdma_sge rp_guest_sge(const struct rp_guest *p, uint64_t off, uint32_t len);
/* One completion, or -ETIMEDOUT. */
int rp_guest_wait(struct rp_guest *p, struct vrdma_cqe *ret);

#endif

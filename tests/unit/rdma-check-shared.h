/* SPDX-License-Identifier: MIT */
/*
 * What the decoder tests of the RDMA device (test-rdma-check and
 * fuzz-rdma-check) share: a host's limits, and which requests carry
 * nothing but a handle.
 */
#ifndef VRDMA_RDMA_CHECK_SHARED_H
#define VRDMA_RDMA_CHECK_SHARED_H

#include <stdbool.h>
#include <stdint.h>

#include "rdma-internal.h"

/* A host that clamps nothing: the device's own maxima. */
static const struct rdma_limits lim_full = {
	.max_mr_size = 4ull << 30,
	.max_qp_wr = 16383,
	.max_cqe = 16383,
	.max_send_sge = 32,
	.max_recv_sge = 32,
	.max_inline = 256,
	.gid_tbl_len = 16,
	.max_rd_atom = 16,
	.atomics = true,
};

/* The requests whose whole payload is one vrdma_handle (rdma_check_handle). */
static inline bool rdma_cmd_takes_handle(uint16_t opcode)
{
	switch (opcode) {
	case VRDMA_CMD_DESTROY_PD:
	case VRDMA_CMD_DEREG_MR:
	case VRDMA_CMD_DESTROY_CQ:
	case VRDMA_CMD_QUERY_QP:
	case VRDMA_CMD_DESTROY_QP:
	case VRDMA_CMD_CM_DISCONNECT:
	case VRDMA_CMD_CM_DESTROY_LISTEN:
		return true;
	default:
		return false;
	}
}

#endif

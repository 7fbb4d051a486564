// SPDX-License-Identifier: MIT
/*
 * sriov-verbs-hold IBDEV: plays a tenant's process for the guest test.
 * Opens IBDEV and creates a PD, an MR, a CQ and an RC QP, prints "ready",
 * then holds them until it is killed (the kernel cleans up after it, as
 * after a tenant's crashed back end).
 * Exits 77 when IBDEV does not exist (no RDMA here).
 */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

int main(int argc, char **argv)
{
	static char buf[4096];
	struct ibv_qp_init_attr qpa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;

	if (argc != 2) {
		fprintf(stderr, "usage: sriov-verbs-hold IBDEV\n");
		return 2;
	}
	ctx = open_device(argv[1]);
	if (!ctx) {
		fprintf(stderr, "SKIP: no RDMA device %s here\n", argv[1]);
		return 77;
	}
	pd = ibv_alloc_pd(ctx);
	mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	qpa.send_cq = qpa.recv_cq = cq;
	qp = pd && cq ? ibv_create_qp(pd, &qpa) : NULL;
	if (!qp || !mr) {
		perror("sriov-verbs-hold: creating PD/MR/CQ/QP");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}

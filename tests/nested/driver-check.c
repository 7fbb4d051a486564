// SPDX-License-Identifier: MIT
/*
 * driver-check: what the nested tier asks of the vrdma guest driver beyond
 * the stock tools (tests/nested/init runs it in the nested guest).
 *
 *   driver-check hold DEV MIB destroy|exit SECONDS
 *       Holds a PD, an MR over MIB MiB, a CQ and a QP on DEV, prints
 *       "HOLD ready" and waits up to SECONDS for IBV_EVENT_DEVICE_FATAL
 *       (meanwhile the harness kills and restarts DEV's back end).  Then
 *       the lost QP must refuse a post (an arm of the lost CQ returns 0:
 *       uverbs drops the driver's answer), and either every
 *       destroy returns 0 (destroy) or the process exits holding it all
 *       and the kernel cleans up (exit).  The harness checks the guest's
 *       kernel log and that the pinned pages were released.
 *   driver-check refused DEV CASE
 *       CASE is qp, cq, port, query-qp or mr: the verb whose response the
 *       harness has had the driver corrupt (the module's inject_*
 *       parameters, as a faulty device would answer) must fail with EIO.
 *   driver-check works DEV
 *       Creates and destroys a PD, an MR, a CQ and a QP (RESET to INIT).
 *   driver-check cq-ex DEV
 *       ibv_create_cq_ex: without create flags it works; with one the
 *       device does not offer (IGNORE_OVERRUN) it fails with EOPNOTSUPP,
 *       the verbs convention that callers test for to fall back.
 *
 * Each prints "DRIVER-CHECK ..." lines and exits 0 only when every
 * outcome is the expected one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "verbs-open.h"

struct objs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	void *buf;
	size_t len;
};

static int fail(const char *what)
{
	printf("DRIVER-CHECK FAIL %s: %s\n", what, strerror(errno));
	fflush(stdout);
	return 1;
}

static struct ibv_qp *make_qp(struct objs *o)
{
	struct ibv_qp_init_attr init = {
		.send_cq = o->cq, .recv_cq = o->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};

	return ibv_create_qp(o->pd, &init);
}

/* PD, MR (len bytes, touched), CQ, QP in INIT; 0 or a failure printed. */
static int make_all(struct objs *o, size_t len)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	o->len = len;
	o->buf = aligned_alloc(4096, len);
	if (!o->buf)
		return fail("aligned_alloc");
	memset(o->buf, 0x5a, len);
	o->pd = ibv_alloc_pd(o->ctx);
	if (!o->pd)
		return fail("ibv_alloc_pd");
	o->mr = ibv_reg_mr(o->pd, o->buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!o->mr)
		return fail("ibv_reg_mr");
	o->cq = ibv_create_cq(o->ctx, 8, NULL, NULL, 0);
	if (!o->cq)
		return fail("ibv_create_cq");
	o->qp = make_qp(o);
	if (!o->qp)
		return fail("ibv_create_qp");
	if (ibv_modify_qp(o->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					     IBV_QP_ACCESS_FLAGS))
		return fail("QP to INIT");
	return 0;
}

/* Every destroy must succeed, lost objects included. */
static int destroy_all(struct objs *o)
{
	int bad = 0, r;

	if (o->qp && (r = ibv_destroy_qp(o->qp)))
		bad |= printf("DRIVER-CHECK FAIL ibv_destroy_qp: %s\n", strerror(r));
	if (o->cq && (r = ibv_destroy_cq(o->cq)))
		bad |= printf("DRIVER-CHECK FAIL ibv_destroy_cq: %s\n", strerror(r));
	if (o->mr && (r = ibv_dereg_mr(o->mr)))
		bad |= printf("DRIVER-CHECK FAIL ibv_dereg_mr: %s\n", strerror(r));
	if (o->pd && (r = ibv_dealloc_pd(o->pd)))
		bad |= printf("DRIVER-CHECK FAIL ibv_dealloc_pd: %s\n", strerror(r));
	if (ibv_close_device(o->ctx))
		bad |= printf("DRIVER-CHECK FAIL ibv_close_device\n");
	free(o->buf);
	return bad != 0;
}

/* Waits for the device's fatal event; 0 when it came. */
static int wait_fatal(struct ibv_context *ctx, int seconds)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	time_t end = time(NULL) + seconds;

	while (time(NULL) < end) {
		if (poll(&p, 1, 1000) <= 0)
			continue;
		if (ibv_get_async_event(ctx, &ev))
			return fail("ibv_get_async_event");
		printf("DRIVER-CHECK async event %s\n", ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
		if (ev.event_type == IBV_EVENT_DEVICE_FATAL)
			return 0;
	}
	printf("DRIVER-CHECK FAIL no IBV_EVENT_DEVICE_FATAL in %d s\n", seconds);
	return 1;
}

static int hold(const char *dev, size_t mib, int destroy, int seconds)
{
	struct objs o = { .ctx = nested_open_device(dev) };
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
	int r;

	if (!o.ctx)
		return fail("ibv_open_device");
	if (make_all(&o, mib << 20))
		return 1;
	printf("HOLD ready: %zu MiB registered, lkey %#x\n", mib, o.mr->lkey);
	fflush(stdout);
	if (wait_fatal(o.ctx, seconds))
		return 1;
	/* The objects are gone with the device: the driver must say so
	 * rather than name their handles to the new device instance. */
	sge = (struct ibv_sge){ .addr = (uintptr_t)o.buf, .length = 8, .lkey = o.mr->lkey };
	r = ibv_post_send(o.qp, &wr, &bad);
	printf("DRIVER-CHECK post on the lost QP: %s\n", r ? strerror(r) : "accepted");
	if (!r)
		return 1;
	/* The arm reaches the driver, which refuses it (vrdma_doorbell: a lost
	 * epoch rings nothing), but the kernel's uverbs answers 0 whatever the
	 * driver said (ib_uverbs_req_notify_cq): only that it returns, and
	 * what the kernel log says, can be checked here. */
	r = ibv_req_notify_cq(o.cq, 0);
	printf("DRIVER-CHECK arm of the lost CQ returned: %s\n", r ? strerror(r) : "0 (uverbs)");
	if (!destroy) {
		printf("DRIVER-CHECK exiting with every object held\n");
		fflush(stdout);
		_exit(0);
	}
	r = destroy_all(&o);
	printf("DRIVER-CHECK destroys after the loss: %s\n", r ? "FAILED" : "all returned 0");
	return r;
}

static int expect_eio(const char *what, int failed)
{
	if (failed && errno == EIO) {
		printf("DRIVER-CHECK refused %s: EIO (expected)\n", what);
		return 0;
	}
	printf("DRIVER-CHECK FAIL %s with a corrupted response: %s\n", what,
	       failed ? strerror(errno) : "accepted");
	return 1;
}

static int refused(const char *dev, const char *what)
{
	struct objs o = { .ctx = nested_open_device(dev) };
	struct ibv_port_attr port;
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	char page[4096] __attribute__((aligned(4096)));
	int r;

	if (!o.ctx)
		return fail("ibv_open_device");
	o.pd = ibv_alloc_pd(o.ctx);
	if (!o.pd)
		return fail("ibv_alloc_pd");
	if (!strcmp(what, "mr"))
		return expect_eio(what, !ibv_reg_mr(o.pd, page, sizeof(page), IBV_ACCESS_LOCAL_WRITE));
	if (!strcmp(what, "port")) {
		r = ibv_query_port(o.ctx, 1, &port);
		errno = r;
		return expect_eio(what, r != 0);
	}
	o.cq = ibv_create_cq(o.ctx, 8, NULL, NULL, 0);
	if (!strcmp(what, "cq"))
		return expect_eio(what, !o.cq);
	if (!o.cq)
		return fail("ibv_create_cq");
	o.qp = make_qp(&o);
	if (!strcmp(what, "qp"))
		return expect_eio(what, !o.qp);
	if (!o.qp)
		return fail("ibv_create_qp");
	if (!strcmp(what, "query-qp")) {
		r = ibv_query_qp(o.qp, &attr, IBV_QP_STATE, &init);
		errno = r;
		return expect_eio(what, r != 0);
	}
	fprintf(stderr, "driver-check: unknown case %s\n", what);
	return 2;
}

static int works(const char *dev)
{
	struct objs o = { .ctx = nested_open_device(dev) };

	if (!o.ctx)
		return fail("ibv_open_device");
	if (make_all(&o, 1 << 20))
		return 1;
	if (destroy_all(&o))
		return 1;
	printf("DRIVER-CHECK %s works\n", dev);
	return 0;
}

static int cq_ex(const char *dev)
{
	struct ibv_context *ctx = nested_open_device(dev);
	struct ibv_cq_init_attr_ex attr = { .cqe = 8, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_cq_ex *cq;

	if (!ctx)
		return fail("ibv_open_device");
	cq = ibv_create_cq_ex(ctx, &attr);
	if (!cq)
		return fail("ibv_create_cq_ex without flags");
	if (ibv_destroy_cq(ibv_cq_ex_to_cq(cq)))
		return fail("ibv_destroy_cq");
	attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	attr.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	errno = 0;
	cq = ibv_create_cq_ex(ctx, &attr);
	if (cq || errno != EOPNOTSUPP) {
		printf("DRIVER-CHECK FAIL ibv_create_cq_ex with IGNORE_OVERRUN: %s, errno %d (%s), "
		       "want EOPNOTSUPP\n", cq ? "created" : "refused", errno, strerror(errno));
		return 1;
	}
	if (ibv_close_device(ctx))
		return fail("ibv_close_device");
	printf("DRIVER-CHECK %s cq-ex: an unsupported create flag is EOPNOTSUPP\n", dev);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 6 && !strcmp(argv[1], "hold"))
		return hold(argv[2], strtoul(argv[3], NULL, 10), !strcmp(argv[4], "destroy"),
			    atoi(argv[5]));
	if (argc == 4 && !strcmp(argv[1], "refused"))
		return refused(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "works"))
		return works(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "cq-ex"))
		return cq_ex(argv[2]);
	fprintf(stderr, "usage: driver-check hold DEV MIB destroy|exit SECONDS\n"
			"       driver-check refused DEV qp|cq|port|query-qp|mr\n"
			"       driver-check works DEV\n"
			"       driver-check cq-ex DEV\n");
	return 2;
}

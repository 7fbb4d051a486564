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
 *   driver-check responses DEV
 *       For each verb in turn (create QP, create CQ, query port, query
 *       QP, register MR), has the driver corrupt that verb's response as
 *       a faulty device would answer (the module's inject_* parameters in
 *       /sys/module/vrdma/parameters): the verb must fail with EIO, the
 *       corruption must have been applied (inject_op back to 0), every
 *       object made on the way must destroy with 0, and then the device
 *       must work: a PD, an MR, a CQ and a QP (RESET to INIT) made and
 *       destroyed.  One process for all five: a program start costs
 *       seconds under nested TCG.  The harness checks the kernel log for
 *       the driver's reason for each.
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

/* The verb of one case, on objects made in o (the caller destroys them). */
static int refused(struct objs *o, const char *what)
{
	static char page[4096] __attribute__((aligned(4096)));
	struct ibv_port_attr port;
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	int r;

	o->pd = ibv_alloc_pd(o->ctx);
	if (!o->pd)
		return fail("ibv_alloc_pd");
	if (!strcmp(what, "mr")) {
		o->mr = ibv_reg_mr(o->pd, page, sizeof(page), IBV_ACCESS_LOCAL_WRITE);
		return expect_eio(what, !o->mr);
	}
	if (!strcmp(what, "port")) {
		r = ibv_query_port(o->ctx, 1, &port);
		errno = r;
		return expect_eio(what, r != 0);
	}
	o->cq = ibv_create_cq(o->ctx, 8, NULL, NULL, 0);
	if (!strcmp(what, "cq"))
		return expect_eio(what, !o->cq);
	if (!o->cq)
		return fail("ibv_create_cq");
	o->qp = make_qp(o);
	if (!strcmp(what, "qp"))
		return expect_eio(what, !o->qp);
	if (!o->qp)
		return fail("ibv_create_qp");
	r = ibv_query_qp(o->qp, &attr, IBV_QP_STATE, &init);
	errno = r;
	return expect_eio(what, r != 0);
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

static int set_param(const char *name, unsigned int value)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/vrdma/parameters/%s", name);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%u\n", value) < 0 || fclose(f))
		return fail(path);
	return 0;
}

static unsigned int get_param(const char *name)
{
	char path[128];
	unsigned int v = ~0u;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/vrdma/parameters/%s", name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%u", &v) != 1)
			v = ~0u;
		fclose(f);
	}
	return v;
}

/* Each case: the command, the byte offset in its response, the value. */
static const struct {
	const char *name;
	unsigned int op, offset, value;
} corruptions[] = {
	{ "qp", 10, 8, 65535 },     /* CREATE_QP: max_send_wr above what was asked */
	{ "cq", 8, 4, 1000000 },    /* CREATE_CQ: a capacity not the one asked */
	{ "port", 2, 12, 100000 },  /* QUERY_PORT: a GID table of 100000 entries */
	{ "query-qp", 12, 0, 99 },  /* QUERY_QP: state 99 */
	{ "mr", 6, 0, 0 },          /* REG_MR: handle 0 (the driver resets the device) */
};

static int responses(const char *dev)
{
	int bad = 0;

	for (size_t i = 0; i < sizeof(corruptions) / sizeof(corruptions[0]); i++) {
		const char *name = corruptions[i].name;
		struct objs o = { .ctx = nested_open_device(dev) };

		if (!o.ctx)
			return fail("ibv_open_device");
		/* The op last: it arms the injection. */
		if (set_param("inject_offset", corruptions[i].offset) ||
		    set_param("inject_value", corruptions[i].value) ||
		    set_param("inject_op", corruptions[i].op))
			return 1;
		bad |= refused(&o, name);
		if (get_param("inject_op") != 0)
			bad |= printf("DRIVER-CHECK FAIL %s: the corruption was never applied\n", name);
		set_param("inject_op", 0);
		if (destroy_all(&o))
			bad |= printf("DRIVER-CHECK FAIL %s: a destroy after the refusal failed\n", name);
		bad |= works(dev);
	}
	return bad != 0;
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
	if (argc == 3 && !strcmp(argv[1], "responses"))
		return responses(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "cq-ex"))
		return cq_ex(argv[2]);
	fprintf(stderr, "usage: driver-check hold DEV MIB destroy|exit SECONDS\n"
			"       driver-check responses DEV\n"
			"       driver-check cq-ex DEV\n");
	return 2;
}

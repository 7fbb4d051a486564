/* SPDX-License-Identifier: MIT */
/*
 * A hostile guest against the paravirtual RDMA device, in the Soft-RoCE
 * guest: what a guest user process or driver can do to the tenant's
 * daemon with rings, resets, memory, GIDs and mappings, each aimed at one
 * defense (docs/virtio-rdma.md sections 6, 8 and 9).  Each test starts its
 * own back end on rxe0 and ends by stopping it, which must still exit 0.
 *
 *   test-rdma-hostile VRDMA-VHOST   (needs VRDMA_RXE_DEV_A/B, or exits 77)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>

#include "rdma-checks.h"
#include "util.h"
#include "vt-common.h"

static struct vt_daemon tenant;
static const char *dev_a, *dev_b;

/* The back end on rxe0 with extra arguments (NULL-terminated, or NULL). */
static void start_tenant(const char *const *extra)
{
	const char *args[16] = { "--device", "rdma", "--ibdev", dev_a };
	size_t n = 4;

	for (size_t i = 0; extra && extra[i]; i++) {
		assert_true(n < G_N_ELEMENTS(args) - 1);
		args[n++] = extra[i];
	}
	args[n] = NULL;
	assert_int_equal(vt_spawn(&tenant, "h.sock", args), 0);
}

/* The back end lived through the test: it still serves a new guest, and
 * exits 0 on SIGTERM. */
static void stop_tenant(void)
{
	struct vgd *g;
	uint32_t pd;

	assert_int_equal(vgd_open(tenant.sock, NULL, &g), 0);
	assert_int_equal(vgd_create_pd(g, &pd), 0);
	vgd_close(g);
	assert_int_equal(vt_stop(&tenant), 0);
}

/* A QP of g with its own CQ, connected to a fresh native peer. */
static void open_qp(struct rp_guest *g, struct rp_native *n, const struct vgd_qp_caps *caps,
		    uint32_t cq_log2, struct vgd_cq *ret_cq, struct vgd_qp *ret_qp)
{
	assert_int_equal(rp_native_open(dev_b, n), 0);
	assert_int_equal(vgd_create_cq(g->g, cq_log2, ret_cq), 0);
	assert_int_equal(vgd_create_qp(g->g, g->pd, ret_cq, ret_cq, caps, ret_qp), 0);
	assert_int_equal(vgd_connect_qp(g->g, ret_qp, n->qp->qp_num, n->gid, g->gid_index, 7), 0);
	assert_int_equal(rp_native_connect(n, ret_qp->qpn, g->gid, 7), 0);
}

static uint32_t ring_index(const struct vgd_ring *r, size_t off)
{
	return __atomic_load_n((uint32_t *)(r->host + off), __ATOMIC_ACQUIRE);
}

/* The driver's side of a RESET it sent itself (vgd_modify_qp does this). */
static void restart_rings(struct vgd_qp *qp)
{
	qp->sq.prod = qp->rq.prod = 0;
	__atomic_store_n((uint32_t *)(qp->sq.host + VRDMA_RING_PRODUCER), 0, __ATOMIC_RELEASE);
	__atomic_store_n((uint32_t *)(qp->rq.host + VRDMA_RING_PRODUCER), 0, __ATOMIC_RELEASE);
}

/* ---- work per call ---- */

/* The stack limit to put back should the spawn fail with it lowered
 * (rlim_cur 0: nothing to put back). */
static struct rlimit saved_stack;

/* Sixteen thousand refused WQEs behind one doorbell: as many error
 * completions, in order, one QP_FATAL, and the daemon lives.  It once
 * recursed per refused WQE (~20 KiB a frame then); its frames are small
 * now (tens of bytes a level), so the daemon runs on a 256 KiB stack
 * here, which a recursion of this depth overflows and the loop does not
 * come near. */
static void test_bad_wqe_run(void **state)
{
	const struct vgd_qp_caps caps = { .sq_log2 = 14, .rq_log2 = 2, .max_send_sge = 1,
					  .max_recv_sge = 1 };
	enum { RUN = 16000 };
	g_autofree struct vrdma_cqe *c = g_new0(struct vrdma_cqe, RUN);
	struct rlimit stack, small_stack = { .rlim_cur = 256 << 10 };
	uint8_t slot[256] = { 0 };
	struct rp_guest g;
	struct rp_native n;
	struct vgd_cq cq;
	struct vgd_qp qp;
	int got;

	(void)state;
	/* The daemon inherits the limit its main thread's stack grows to. */
	assert_int_equal(getrlimit(RLIMIT_STACK, &stack), 0);
	small_stack.rlim_max = stack.rlim_max;
	saved_stack = stack;
	assert_int_equal(setrlimit(RLIMIT_STACK, &small_stack), 0);
	start_tenant(NULL);
	saved_stack.rlim_cur = 0;
	assert_int_equal(setrlimit(RLIMIT_STACK, &stack), 0);
	assert_int_equal(rp_guest_open(tenant.sock, &g), 0);
	open_qp(&g, &n, &caps, 14, &cq, &qp);
	memset(n.buf, 0, 8192);
	put_le32(slot + VRDMA_SWQE_OPCODE, 0xff);
	put_le32(slot + VRDMA_SWQE_SEND_FLAGS, VRDMA_SEND_SIGNALED);
	for (uint64_t i = 0; i < RUN; i++) {
		put_le64(slot + VRDMA_SWQE_WR_ID, 1000 + i);
		assert_int_equal(vgd_post_send_raw(g.g, &qp, slot, sizeof(slot), false), 0);
	}
	assert_int_equal(vgd_doorbell(g.g, VRDMA_DB_SQ, qp.handle), 0);
	assert_int_equal(vgd_wait_cq(g.g, &cq, c, RUN, RP_TIMEOUT_MS * 2, &got), 0);
	for (int i = 0; i < RUN; i++) {
		assert_int_equal(c[i].wr_id, 1000 + i);
		assert_int_equal(c[i].status, IBV_WC_LOC_QP_OP_ERR);
		assert_int_equal(c[i].qp_num, qp.qpn);
	}
	assert_int_equal(ring_index(&qp.sq, VRDMA_RING_CONSUMER), RUN);
	rt_expect_event(g.g, VRDMA_EV_QP_FATAL, qp.handle, VRDMA_QPF_BAD_WQE);
	rt_native_expect_zero(&n, 8192);
	rp_native_close(&n);
	rp_guest_close(&g);
	stop_tenant();
}

/*
 * An SQ whose ring starts on its CQ's first page: the CQ's producer index
 * is the SQ's, and every completion of a refused WQE publishes one more
 * WQE, forever (the CQ's consumer index is the SQ's too, so the CQ never
 * fills).  The guest fills every slot the device will read with a refused
 * WQE.  Without a bound on the work per call the daemon would spin in
 * this QP and serve nobody else; with it, another guest of the tenant is
 * answered, and so is this one.
 */
static void test_rings_feed_each_other(void **state)
{
	struct vgd_qp_caps caps = { .sq_log2 = 14, .rq_log2 = 2, .max_send_sge = 1,
				    .max_recv_sge = 1 };
	struct rp_guest g, other;
	struct vgd_cq cq;
	struct vgd_qp qp;
	uint32_t pd;
	uint64_t t0;

	(void)state;
	start_tenant(NULL);
	assert_int_equal(rp_guest_open(tenant.sock, &g), 0);
	assert_int_equal(vgd_create_cq(g.g, 14, &cq), 0);
	caps.sq_first_page = cq.ring.gpa;
	assert_int_equal(vgd_create_qp(g.g, g.pd, &cq, &cq, &caps, &qp), 0);
	/* Every WQE the device may read, on the CQ's page or the SQ's own,
	 * has opcode 0xff and an SGE count past the QP's: refused either way,
	 * whatever completions the device writes over part of them. */
	for (uint32_t i = 0; i <= qp.sq.mask; i++) {
		uint8_t *wqe = qp.sq.host + VRDMA_RING_DATA + ((size_t)i << qp.sq.slot_log2);

		memset(wqe, 0xff, 1u << qp.sq.slot_log2);
	}
	for (uint64_t off = VRDMA_RING_DATA; off + 64 <= cq.ring.npages * 4096ull; off += 64)
		memset(cq.ring.host + off, 0xff, 64);
	/* A refused receive starts it: its completion is the first "WQE". */
	assert_int_equal(vgd_modify_qp(g.g, &qp, VRDMA_QP_STATE | VRDMA_QP_PKEY_INDEX |
				       VRDMA_QP_PORT | VRDMA_QP_ACCESS_FLAGS,
				       &(struct vrdma_qp_attr){ .qp_state = VRDMA_QPS_INIT,
								 .port_num = 1 }), 0);
	assert_int_equal(vgd_post_recv(g.g, &qp, &(struct vgd_recv){
		.wr_id = 1, .num_sge = 1, .sge = { { .addr = 0, .length = 8, .lkey = 0xdead } } },
		1, true), 0);
	assert_int_equal(vgd_doorbell(g.g, VRDMA_DB_SQ, qp.handle), 0);
	/* The device runs it by the budget: everybody is answered meanwhile. */
	t0 = monotonic_ns();
	assert_int_equal(rp_guest_open(tenant.sock, &other), 0);
	assert_int_equal(vgd_create_pd(other.g, &pd), 0);
	assert_int_equal(vgd_create_pd(g.g, &pd), 0);
	fprintf(stderr, "other guest served in %.0f ms while the rings fed each other\n",
		(double)(monotonic_ns() - t0) / 1e6);
	/* It is really running: the producer index keeps moving. */
	{
		uint32_t p0 = ring_index(&cq.ring, VRDMA_RING_PRODUCER);

		usleep(50000);
		assert_int_not_equal(ring_index(&cq.ring, VRDMA_RING_PRODUCER), p0);
	}
	rp_guest_close(&other);
	rp_guest_close(&g);
	stop_tenant();
}

/* ---- QP incarnations ---- */

/*
 * ERR then RESET in one control kick, with receives posted: the host
 * flushes them, but by the time the device polls, the rings have
 * restarted.  Those completions belong to the QP before the reset: no CQE
 * reaches the guest, and both consumer indices stay at 0.  A slow command
 * between the two gives the host's flush time to land first.
 */
static void test_reset_drops_old_completions(void **state)
{
	const struct vgd_qp_caps caps = { .sq_log2 = 4, .rq_log2 = 4, .max_send_sge = 1,
					  .max_recv_sge = 1 };
	struct vrdma_modify_qp_req to_err = { .attr_mask = VRDMA_QP_STATE,
					      .attr = { .qp_state = VRDMA_QPS_ERR } };
	struct vrdma_modify_qp_req to_reset = { .attr_mask = VRDMA_QP_STATE,
						.attr = { .qp_state = VRDMA_QPS_RESET } };
	struct vgd_buf slow_buf;
	struct vrdma_cqe c[8];
	struct rp_guest g;
	struct rp_native n;
	struct vgd_cq cq;
	struct vgd_qp qp;
	uint8_t *slow_req;
	uint32_t slow_len;
	int status[3], got;

	(void)state;
	start_tenant(NULL);
	assert_int_equal(rp_guest_open(tenant.sock, &g), 0);
	open_qp(&g, &n, &caps, 6, &cq, &qp);
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(vgd_post_recv(g.g, &qp, &(struct vgd_recv){
			.wr_id = 50 + i, .num_sge = 1, .sge = { rp_guest_sge(&g, i * 4096, 4096) } },
			1, true), 0);
	/* The RQ doorbells (or the 1 ms poll) have put them on the host. */
	usleep(200000);
	/* The slow command: a registration of 16 MiB of scattered pages. */
	assert_int_equal(vgd_buf_alloc(g.g, 16u << 20, true, &slow_buf), 0);
	{
		struct vrdma_reg_mr_req m = { .pd = g.pd, .iova = slow_buf.va, .length = slow_buf.len,
					      .access = VRDMA_ACCESS_LOCAL_WRITE, .page_shift = 12,
					      .npages = (uint32_t)slow_buf.npages };

		slow_len = (uint32_t)(sizeof(m) + 8 * slow_buf.npages);
		slow_req = g_malloc(slow_len);
		memcpy(slow_req, &m, sizeof(m));
		for (uint64_t i = 0; i < slow_buf.npages; i++)
			put_le64(slow_req + sizeof(m) + 8 * i, slow_buf.pages[i]);
	}
	to_err.qp = to_reset.qp = qp.handle;
	assert_int_equal(vgd_cmd_batch(g.g, (const struct vgd_batch_cmd[]){
		{ VRDMA_CMD_MODIFY_QP, &to_err, sizeof(to_err) },
		{ VRDMA_CMD_REG_MR, slow_req, slow_len },
		{ VRDMA_CMD_MODIFY_QP, &to_reset, sizeof(to_reset) },
	}, 3, status), 0);
	g_free(slow_req);
	assert_int_equal(status[0], 0);
	assert_int_equal(status[2], 0);
	restart_rings(&qp);
	assert_int_equal(vgd_wait_cq(g.g, &cq, c, 1, 500, &got), -ETIMEDOUT);
	assert_int_equal(got, 0);
	assert_int_equal(ring_index(&qp.rq, VRDMA_RING_CONSUMER), 0);
	assert_int_equal(ring_index(&qp.sq, VRDMA_RING_CONSUMER), 0);
	/* The QP works in its new incarnation: connected again, a receive
	 * gets the peer's SEND, and its completion names the new WQE. */
	assert_int_equal(vgd_connect_qp(g.g, &qp, n.qp->qp_num, n.gid, g.gid_index, 7), 0);
	assert_int_equal(vgd_post_recv(g.g, &qp, &(struct vgd_recv){
		.wr_id = 77, .num_sge = 1, .sge = { rp_guest_sge(&g, 0, 4096) } }, 1, true), 0);
	rt_fill(n.buf, 100, 3);
	assert_int_equal(rp_native_post_send(&n, IBV_WR_SEND, 1, 0, 100, 0, 0, 0), 0);
	assert_int_equal(vgd_wait_cq(g.g, &cq, c, 1, RP_TIMEOUT_MS, &got), 0);
	assert_int_equal(c[0].wr_id, 77);
	assert_int_equal(c[0].status, IBV_WC_SUCCESS);
	assert_int_equal(ring_index(&qp.rq, VRDMA_RING_CONSUMER), 1);
	vgd_buf_free(&slow_buf);
	rp_native_close(&n);
	rp_guest_close(&g);
	stop_tenant();
}

/* ---- memory that goes away under rings ---- */

/*
 * The QP's rings and its CQ's ring in memory the front end then removes
 * (REM_MEM_REG), with dirty logging on: from then on the device never
 * writes that memory, nor marks it dirty, whatever happens to the QP (a
 * MODIFY_QP to RESET once wrote the old SQ and RQ consumer indices).
 */
static void test_ring_memory_removed(void **state)
{
	struct vgd_qp_caps caps = { .sq_log2 = 4, .rq_log2 = 4, .max_send_sge = 1,
				    .max_recv_sge = 1, .ring_region = 1 };
	struct vgd_opts o = { .log_all = true, .extra_bytes = 4u << 20 };
	const uint32_t sentinel = 0x5a5a5a5a;
	struct rp_guest g;
	struct rp_native n;
	struct vgd_cq cq;
	struct vgd_qp qp;

	(void)state;
	start_tenant(NULL);
	assert_int_equal(rp_guest_open_opts(tenant.sock, &o, &g), 0);
	assert_int_equal(rp_native_open(dev_b, &n), 0);
	assert_int_equal(vgd_create_cq_in(g.g, 1, 6, &cq), 0);
	assert_int_equal(vgd_create_qp(g.g, g.pd, &cq, &cq, &caps, &qp), 0);
	assert_int_equal(vgd_connect_qp(g.g, &qp, n.qp->qp_num, n.gid, g.gid_index, 7), 0);
	assert_int_equal(vgd_remove_extra(g.g), 0);
	rt_expect_event(g.g, VRDMA_EV_QP_FATAL, qp.handle, VRDMA_QPF_MEMORY);
	rt_expect_event(g.g, VRDMA_EV_CQ_ERR, cq.handle, 0);
	/* The harness still has the memory: what the device does to it shows. */
	vuf_log_clear(g.g->log);
	for (size_t off = VRDMA_RING_PRODUCER; off <= VRDMA_RING_CONSUMER; off += 128) {
		memcpy(qp.sq.host + off, &sentinel, 4);
		memcpy(qp.rq.host + off, &sentinel, 4);
		memcpy(cq.ring.host + off, &sentinel, 4);
	}
	assert_int_equal(vgd_modify_qp(g.g, &qp, VRDMA_QP_STATE,
				       &(struct vrdma_qp_attr){ .qp_state = VRDMA_QPS_RESET }), 0);
	assert_int_equal(vgd_arm_cq(g.g, &cq, false), 0);
	assert_int_equal(vgd_doorbell(g.g, VRDMA_DB_SQ, qp.handle), 0);
	usleep(100000);
	/* The device writes the work rings' consumer index and the CQ's
	 * producer index (the driver's RESET rewrote the producer indices). */
	assert_int_equal(ring_index(&qp.sq, VRDMA_RING_CONSUMER), sentinel);
	assert_int_equal(ring_index(&qp.rq, VRDMA_RING_CONSUMER), sentinel);
	assert_int_equal(ring_index(&cq.ring, VRDMA_RING_PRODUCER), sentinel);
	assert_int_equal(ring_index(&cq.ring, VRDMA_RING_CONSUMER), sentinel);
	assert_false(vuf_log_page_dirty(g.g->log, qp.sq.gpa));
	assert_false(vuf_log_page_dirty(g.g->log, qp.rq.gpa));
	assert_false(vuf_log_page_dirty(g.g->log, cq.ring.gpa));
	/* The handles live on until the guest lets go of them. */
	assert_int_equal(vgd_destroy(g.g, VRDMA_CMD_DESTROY_QP, qp.handle), 0);
	assert_int_equal(vgd_destroy(g.g, VRDMA_CMD_DESTROY_CQ, cq.handle), 0);
	rp_native_close(&n);
	rp_guest_close(&g);
	stop_tenant();
}

/* ---- the guest's GID table ---- */

static void run_ip(const char *cmd)
{
	char line[256];

	snprintf(line, sizeof(line), "ip %s", cmd);
	assert_int_equal(system(line), 0);
}

/* Waits until the function's table has (or has not) the IPv4 GID of addr. */
static void wait_host_gid(const char *dev, const char *addr, bool present)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	uint8_t want[16] = { [10] = 0xff, [11] = 0xff };
	bool found = !present;

	assert_int_equal(inet_pton(AF_INET, addr, want + 12), 1);
	for (int i = 0; list && list[i]; i++)
		if (strcmp(ibv_get_device_name(list[i]), dev) == 0)
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	assert_non_null(ctx);
	for (int tries = 0; tries < 100 && found != present; tries++) {
		struct ibv_port_attr port;

		assert_int_equal(ibv_query_port(ctx, 1, &port), 0);
		found = false;
		for (int i = 0; i < port.gid_tbl_len && !found; i++) {
			struct ibv_gid_entry e;

			found = !ibv_query_gid_ex(ctx, 1, (uint32_t)i, &e, 0) &&
				memcmp(e.gid.raw, want, 16) == 0;
		}
		if (found != present)
			usleep(50000);
	}
	ibv_close_device(ctx);
	assert_true(found == present);
}

static void expect_table(struct vgd *g, const char *addr)
{
	struct vrdma_port_attr port;
	struct vrdma_gid_resp r;
	uint8_t want[16] = { [10] = 0xff, [11] = 0xff };

	assert_int_equal(inet_pton(AF_INET, addr, want + 12), 1);
	assert_int_equal(vgd_cmd(g, VRDMA_CMD_QUERY_PORT, &(struct vrdma_port_req){ .port = 1 },
				 sizeof(struct vrdma_port_req), &port, sizeof(port)), 0);
	assert_int_equal(port.gid_tbl_len, 1);
	assert_int_equal(vgd_query_gid(g, 0, &r), 0);
	assert_int_equal(r.type, VRDMA_GID_ROCE_V2);
	assert_memory_equal(r.gid, want, 16);
	assert_int_equal(vgd_query_gid(g, 1, &r), VRDMA_EINVAL);
}

/*
 * A second address on the function's netdev gives it more GIDs (and it
 * has IPv6 ones already): none of them is the guest's unless the operator
 * says so.  The guest's table is the function's first IPv4 GID by
 * default, or the --rdma-gid addresses; a QP names an entry of that table,
 * and an entry whose address is gone is refused.
 */
static void test_gid_table(void **state)
{
	const char *explicit_gid[] = { "--rdma-gid", "192.0.2.11", NULL };
	const char *absent_gid[] = { "--rdma-gid", "192.0.2.99", NULL };
	struct vrdma_qp_attr attr;
	struct rp_guest g;
	struct rp_native n;
	struct ibv_wc wc;

	(void)state;
	run_ip("address add 192.0.2.11/24 dev va");
	wait_host_gid(dev_a, "192.0.2.11", true);
	/* The default: one entry, the first address; no other index exists. */
	start_tenant(NULL);
	assert_int_equal(rp_guest_open(tenant.sock, &g), 0);
	expect_table(g.g, getenv("VRDMA_RXE_ADDR_A"));
	assert_int_equal(rp_native_open(dev_b, &n), 0);
	for (uint8_t index = 1; index < 8; index++)
		assert_int_equal(vgd_connect_qp(g.g, &g.qp, n.qp->qp_num, n.gid, index, 7),
				 VRDMA_EINVAL);
	rp_native_close(&n);
	rp_guest_close(&g);
	stop_tenant();
	/* The operator's address: the table's only entry, and it carries traffic. */
	start_tenant(explicit_gid);
	assert_int_equal(rp_guest_open(tenant.sock, &g), 0);
	expect_table(g.g, "192.0.2.11");
	assert_int_equal(rp_native_open(dev_b, &n), 0);
	rt_connect_pair(&g, &n, 7);
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_QUERY_QP, &(struct vrdma_handle){ g.qp.handle },
				 sizeof(struct vrdma_handle), &attr, sizeof(attr)), 0);
	assert_int_equal(attr.ah.sgid_index, 0);
	assert_int_equal(rp_native_post_recv(&n, 1, 0, 4096), 0);
	rt_guest_fill(&g, 0, 1000, 9);
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 2, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED, .num_sge = 1,
		.sge = { rp_guest_sge(&g, 0, 1000) } });
	rt_guest_expect_cqe(&g, 2, IBV_WC_SUCCESS, IBV_WC_SEND);
	assert_int_equal(rp_native_wait(&n, &wc), 0);
	rt_native_expect_pattern(&n, 0, 1000, 9);
	rp_native_close(&n);
	rp_guest_close(&g);
	stop_tenant();
	run_ip("address del 192.0.2.11/24 dev va");
	wait_host_gid(dev_a, "192.0.2.11", false);
	/* An allowed address the function does not have: an empty entry,
	 * and a QP cannot send from it. */
	start_tenant(absent_gid);
	{
		const struct vgd_qp_caps caps = { .sq_log2 = 2, .rq_log2 = 2, .max_send_sge = 1,
						  .max_recv_sge = 1 };
		const uint8_t zero[16] = { 0 };
		struct vrdma_gid_resp r;
		struct vgd_cq cq;
		struct vgd_qp qp;
		struct vgd *vg;
		uint32_t pd;

		assert_int_equal(vgd_open(tenant.sock, NULL, &vg), 0);
		assert_int_equal(vgd_query_gid(vg, 0, &r), 0);
		assert_int_equal(r.type, 0);
		assert_memory_equal(r.gid, zero, 16);
		assert_int_equal(vgd_create_pd(vg, &pd), 0);
		assert_int_equal(vgd_create_cq(vg, 4, &cq), 0);
		assert_int_equal(vgd_create_qp(vg, pd, &cq, &cq, &caps, &qp), 0);
		assert_int_equal(rp_native_open(dev_b, &n), 0);
		assert_int_equal(vgd_connect_qp(vg, &qp, n.qp->qp_num, n.gid, 0, 7),
				 VRDMA_EADDRNOTAVAIL);
		rp_native_close(&n);
		vgd_close(vg);
	}
	stop_tenant();
}

/* ---- mappings ---- */

/*
 * Every run of pages of an MR or ring is one mapping of the daemon, and
 * the kernel allows a process only vm.max_map_count of them: the tenant's
 * quota refuses past it with ENOSPC, nothing half-made, and what is given
 * back can be used again.  A physically contiguous MR costs no mapping.
 */
static void test_map_quota(void **state)
{
	/* rp_guest_open: a 64-page scattered MR and three rings, 67 mappings. */
	const char *quota[] = { "--max-maps", "100", NULL };
	struct rp_guest g, other;
	struct vgd_buf scattered, contiguous;
	struct vgd_mr mr;

	(void)state;
	start_tenant(quota);
	assert_int_equal(rp_guest_open(tenant.sock, &g), 0);
	assert_int_equal(vgd_buf_alloc(g.g, 64 * 4096, true, &scattered), 0);
	assert_int_equal(vgd_buf_alloc(g.g, 1u << 20, false, &contiguous), 0);
	assert_int_equal(vgd_reg_mr(g.g, g.pd, &scattered, 0, scattered.len, 0, &mr), VRDMA_ENOSPC);
	/* The quota is the tenant's: another guest cannot set up its MR. */
	assert_int_equal(rp_guest_open(tenant.sock, &other), VRDMA_ENOSPC);
	rp_guest_close(&other);
	assert_int_equal(vgd_reg_mr(g.g, g.pd, &contiguous, 0, contiguous.len, 0, &mr), 0);
	/* Given back, usable again. */
	assert_int_equal(vgd_destroy(g.g, VRDMA_CMD_DEREG_MR, g.mr.handle), 0);
	assert_int_equal(vgd_reg_mr(g.g, g.pd, &scattered, 0, scattered.len, 0, &mr), 0);
	vgd_buf_free(&scattered);
	vgd_buf_free(&contiguous);
	rp_guest_close(&g);
	stop_tenant();
}

/* The packaged vm.max_map_count (packaging/sysctl), as an install sets it. */
static void apply_packaged_sysctl(void)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "sysctl -q -p %s/packaging/sysctl/60-vrdma.conf",
		 getenv("VRDMA_SOURCE_ROOT"));
	assert_int_equal(system(cmd), 0);
}

/*
 * 256 MiB of scattered 4 KiB pages, a guest user buffer as it usually is:
 * 65536 mappings, past the kernel's default limit.  With the packaged
 * sysctl it registers, and moves bytes at both ends.
 */
static void test_large_scattered_mr(void **state)
{
	struct vgd_opts o = { .ram_bytes = 320ull << 20, .timeout_ms = 300000 };
	struct rp_guest g;
	struct rp_native n;
	struct vgd_buf big;
	struct vgd_mr mr;
	struct ibv_wc wc;
	uint64_t t0;

	(void)state;
	apply_packaged_sysctl();
	start_tenant(NULL);
	assert_int_equal(rp_guest_open_opts(tenant.sock, &o, &g), 0);
	assert_int_equal(rp_native_open(dev_b, &n), 0);
	rt_connect_pair(&g, &n, 7);
	assert_int_equal(vgd_buf_alloc(g.g, 256u << 20, true, &big), 0);
	t0 = monotonic_ns();
	assert_int_equal(vgd_reg_mr(g.g, g.pd, &big, 0, big.len, VRDMA_ACCESS_ALL, &mr), 0);
	fprintf(stderr, "256 MiB of scattered pages registered in %.0f ms\n",
		(double)(monotonic_ns() - t0) / 1e6);
	/* The last page and the first, through the view the device made. */
	rt_fill(n.buf, 4096, 5);
	assert_int_equal(rp_native_post_send(&n, IBV_WR_RDMA_WRITE, 1, 0, 4096,
					     mr.iova + big.len - 4096, mr.rkey, 0), 0);
	assert_int_equal(rp_native_wait(&n, &wc), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	{
		uint8_t got[4096], want[4096];

		rt_fill(want, sizeof(want), 5);
		assert_int_equal(vgd_buf_read(g.g, &big, big.len - 4096, got, sizeof(got)), 0);
		assert_memory_equal(got, want, sizeof(want));
	}
	assert_int_equal(vgd_destroy(g.g, VRDMA_CMD_DEREG_MR, mr.handle), 0);
	vgd_buf_free(&big);
	rp_native_close(&n);
	rp_guest_close(&g);
	stop_tenant();
}

/* After a failed test too: the next one starts its own back end. */
static int stop_leftover(void **state)
{
	(void)state;
	if (tenant.running)
		vt_stop(&tenant);
	return 0;
}

/* A failed spawn must not leave the next tests with test_bad_wqe_run's
 * small stack. */
static int restore_stack(void **state)
{
	if (saved_stack.rlim_cur)
		(void)setrlimit(RLIMIT_STACK, &saved_stack);
	saved_stack.rlim_cur = 0;
	return stop_leftover(state);
}

static int gid_test_teardown(void **state)
{
	/* The extra address goes, even when the test failed halfway (the
	 * test itself removed it when it passed: no error then). */
	int gone = system("ip address del 192.0.2.11/24 dev va 2>/dev/null");

	(void)gone;
	return stop_leftover(state);
}

static int teardown(void **state)
{
	stop_leftover(state);
	vt_cleanup();
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_bad_wqe_run, restore_stack),
		cmocka_unit_test_teardown(test_rings_feed_each_other, stop_leftover),
		cmocka_unit_test_teardown(test_reset_drops_old_completions, stop_leftover),
		cmocka_unit_test_teardown(test_ring_memory_removed, stop_leftover),
		cmocka_unit_test_teardown(test_gid_table, gid_test_teardown),
		cmocka_unit_test_teardown(test_map_quota, stop_leftover),
		cmocka_unit_test_teardown(test_large_scattered_mr, stop_leftover),
	};

	const char *rig[2];

	vt_init(argc, argv);
	rt_require_rig((const char *const[]){ "VRDMA_RXE_DEV_A", "VRDMA_RXE_DEV_B", NULL }, rig);
	dev_a = rig[0];
	dev_b = rig[1];
	return cmocka_run_group_tests(tests, NULL, teardown);
}

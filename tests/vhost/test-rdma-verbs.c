/* SPDX-License-Identifier: MIT */
/*
 * The paravirtual RDMA device end to end, in the Soft-RoCE guest: harness
 * guests on `vrdma-vhost --device rdma` (tenant A on rxe0, tenant B on
 * rxe1) against a native verbs peer on rxe1 and against each other.
 * Every opcode moves real bytes through the host devices and is checked
 * byte for byte; RC errors surface as the right completion status; the
 * isolation cases are refused for the reason they name and move nothing.
 *
 *   test-rdma-verbs VRDMA-VHOST   (needs VRDMA_RXE_DEV_A/B, or exits 77)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>

#include "rdma-checks.h"
#include "util.h"
#include "vt-common.h"

static struct vt_daemon tenant_a, tenant_b, tenant_small;
static const char *dev_a, *dev_b;

static void open_pair(struct rp_guest *g, struct rp_native *n, uint8_t rnr_retry)
{
	assert_int_equal(rp_guest_open(tenant_a.sock, g), 0);
	assert_int_equal(rp_native_open(dev_b, n), 0);
	rt_connect_pair(g, n, rnr_retry);
}

/* ---- every opcode against a native peer ---- */

static void test_send_recv(void **state)
{
	struct rp_guest g;
	struct rp_native n;
	struct ibv_wc wc;
	struct vrdma_cqe c;

	(void)state;
	open_pair(&g, &n, 7);
	/* Guest to native: two SGEs out of a scattered MR. */
	rt_guest_fill(&g, 0, 3000, 1);
	assert_int_equal(rp_native_post_recv(&n, 11, 0, 8192), 0);
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 1, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED, .num_sge = 2,
		.sge = { rp_guest_sge(&g, 0, 1000), rp_guest_sge(&g, 1000, 2000) } });
	rt_guest_expect_cqe(&g, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	assert_int_equal(rp_native_wait(&n, &wc), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 3000);
	rt_native_expect_pattern(&n, 0, 3000, 1);
	/* Native to guest, with immediate data; no receive doorbell. */
	assert_int_equal(vgd_post_recv(g.g, &g.qp, &(struct vgd_recv){
		.wr_id = 21, .num_sge = 1, .sge = { rp_guest_sge(&g, 8192, 4096) } }, 1, false), 0);
	rt_fill(n.buf + 4096, 2048, 2);
	assert_int_equal(rp_native_post_send(&n, IBV_WR_SEND_WITH_IMM, 12, 4096, 2048, 0, 0,
					     htonl(0x1234)), 0);
	assert_int_equal(rp_native_wait(&n, &wc), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(rp_guest_wait(&g, &c), 0);
	assert_int_equal(c.wr_id, 21);
	assert_int_equal(c.status, IBV_WC_SUCCESS);
	assert_int_equal(c.opcode, IBV_WC_RECV);
	assert_int_equal(c.byte_len, 2048);
	assert_int_equal(c.wc_flags & IBV_WC_WITH_IMM, IBV_WC_WITH_IMM);
	assert_int_equal(c.imm_data, htonl(0x1234));
	rt_guest_expect_pattern(&g, 8192, 2048, 2);
	/* Inline: the bytes ride in the WQE. */
	assert_int_equal(rp_native_post_recv(&n, 13, 0, 8192), 0);
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 3, .opcode = VRDMA_WR_SEND,
		.flags = VRDMA_SEND_SIGNALED | VRDMA_SEND_INLINE,
		.inline_data = "inline bytes: forty of them, exactly so.", .inline_len = 40 });
	rt_guest_expect_cqe(&g, 3, IBV_WC_SUCCESS, IBV_WC_SEND);
	assert_int_equal(rp_native_wait(&n, &wc), 0);
	assert_int_equal(wc.byte_len, 40);
	assert_memory_equal(n.buf, "inline bytes: forty of them, exactly so.", 40);
	rp_native_close(&n);
	rp_guest_close(&g);
}

static void test_write_read(void **state)
{
	struct rp_guest g;
	struct rp_native n;
	struct ibv_wc wc;
	struct vrdma_cqe c;

	(void)state;
	open_pair(&g, &n, 7);
	/* WRITE from a guest page that straddles two scattered pages. */
	rt_guest_fill(&g, 16384 - 1000, 5000, 3);
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 4, .opcode = VRDMA_WR_RDMA_WRITE, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = (uintptr_t)n.buf + 16384, .rkey = n.mr->rkey, .num_sge = 1,
		.sge = { rp_guest_sge(&g, 16384 - 1000, 5000) } });
	rt_guest_expect_cqe(&g, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	rt_native_expect_pattern(&n, 16384, 5000, 3);
	/* WRITE_WITH_IMM consumes a receive at the native side. */
	assert_int_equal(rp_native_post_recv(&n, 14, 0, 64), 0);
	rt_guest_fill(&g, 20480, 777, 4);
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 5, .opcode = VRDMA_WR_RDMA_WRITE_WITH_IMM, .flags = VRDMA_SEND_SIGNALED,
		.imm = htonl(77), .remote_addr = (uintptr_t)n.buf + 24576, .rkey = n.mr->rkey,
		.num_sge = 1, .sge = { rp_guest_sge(&g, 20480, 777) } });
	rt_guest_expect_cqe(&g, 5, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(rp_native_wait(&n, &wc), 0);
	assert_int_equal(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(wc.imm_data, htonl(77));
	rt_native_expect_pattern(&n, 24576, 777, 4);
	/* READ into the guest. */
	rt_fill(n.buf + 32768, 6000, 5);
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 6, .opcode = VRDMA_WR_RDMA_READ, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = (uintptr_t)n.buf + 32768, .rkey = n.mr->rkey, .num_sge = 1,
		.sge = { rp_guest_sge(&g, 40000, 6000) } });
	rt_guest_expect_cqe(&g, 6, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	rt_guest_expect_pattern(&g, 40000, 6000, 5);
	/* The native peer writes into the guest's remote-writable MR... */
	rt_fill(n.buf + 49152, 3333, 6);
	assert_int_equal(rp_native_post_send(&n, IBV_WR_RDMA_WRITE, 15, 49152, 3333,
					     g.mr.iova + 65536 + 100, g.mr.rkey, 0), 0);
	assert_int_equal(rp_native_wait(&n, &wc), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	rt_guest_expect_pattern(&g, 65536 + 100, 3333, 6);
	/* ... and with immediate data, which the guest sees as opcode 129. */
	assert_int_equal(vgd_post_recv(g.g, &g.qp, &(struct vgd_recv){ .wr_id = 22 }, 1, false),
			 0);
	assert_int_equal(rp_native_post_send(&n, IBV_WR_RDMA_WRITE_WITH_IMM, 16, 49152, 100,
					     g.mr.iova + 131072, g.mr.rkey, htonl(99)), 0);
	assert_int_equal(rp_native_wait(&n, &wc), 0);
	assert_int_equal(rp_guest_wait(&g, &c), 0);
	assert_int_equal(c.wr_id, 22);
	assert_int_equal(c.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(c.imm_data, htonl(99));
	assert_int_equal(c.byte_len, 100);
	rt_guest_expect_pattern(&g, 131072, 100, 6);
	rp_native_close(&n);
	rp_guest_close(&g);
}

static void test_atomics(void **state)
{
	struct rp_guest g;
	struct rp_native n;
	uint64_t v = 5, old;

	(void)state;
	open_pair(&g, &n, 7);
	if (!(g.g->features & VUF_BIT(VRDMA_F_ATOMIC)))
		skip(); /* the host device has no atomics: the device must not offer them */
	memcpy(n.buf + 98304, &v, 8);
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 7, .opcode = VRDMA_WR_ATOMIC_CMP_AND_SWP, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = (uintptr_t)n.buf + 98304, .rkey = n.mr->rkey, .compare_add = 5,
		.swap = 9, .num_sge = 1, .sge = { rp_guest_sge(&g, 98304, 8) } });
	rt_guest_expect_cqe(&g, 7, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
	assert_int_equal(vgd_buf_read(g.g, &g.buf, 98304, &old, 8), 0);
	assert_int_equal(old, 5);
	memcpy(&v, n.buf + 98304, 8);
	assert_int_equal(v, 9);
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 8, .opcode = VRDMA_WR_ATOMIC_FETCH_AND_ADD, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = (uintptr_t)n.buf + 98304, .rkey = n.mr->rkey, .compare_add = 3,
		.num_sge = 1, .sge = { rp_guest_sge(&g, 98312, 8) } });
	rt_guest_expect_cqe(&g, 8, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	assert_int_equal(vgd_buf_read(g.g, &g.buf, 98312, &old, 8), 0);
	assert_int_equal(old, 9);
	memcpy(&v, n.buf + 98304, 8);
	assert_int_equal(v, 12);
	rp_native_close(&n);
	rp_guest_close(&g);
}

/* Unsignaled WQEs report nothing; a later signaled one retires them all. */
static void test_unsignaled_batch(void **state)
{
	struct rp_guest g;
	struct rp_native n;
	struct vgd_send w[40];
	struct vrdma_cqe c[2];
	int got = 0;

	(void)state;
	open_pair(&g, &n, 7);
	rt_guest_fill(&g, 0, 40 * 1024, 9);
	for (int i = 0; i < 40; i++)
		w[i] = (struct vgd_send){
			.wr_id = 100 + (uint64_t)i, .opcode = VRDMA_WR_RDMA_WRITE,
			.flags = i == 39 ? VRDMA_SEND_SIGNALED : 0,
			.remote_addr = (uintptr_t)n.buf + (uint64_t)i * 1024, .rkey = n.mr->rkey,
			.num_sge = 1, .sge = { rp_guest_sge(&g, (uint64_t)i * 1024, 1024) },
		};
	assert_int_equal(vgd_post_send(g.g, &g.qp, w, 40, true), 0);
	assert_int_equal(vgd_wait_cq(g.g, &g.cq, c, 1, RP_TIMEOUT_MS, &got), 0);
	assert_int_equal(c[0].wr_id, 139);
	assert_int_equal(c[0].status, IBV_WC_SUCCESS);
	rt_native_expect_pattern(&n, 0, 40 * 1024, 9);
	/* Exactly one completion: none for the unsignaled ones. */
	assert_int_equal(vgd_wait_cq(g.g, &g.cq, c, 1, 200, &got), -ETIMEDOUT);
	assert_int_equal(got, 0);
	/* Their slots came back: the consumer index passed them all. */
	assert_int_equal(__atomic_load_n((uint32_t *)(g.qp.sq.host + VRDMA_RING_CONSUMER),
					 __ATOMIC_ACQUIRE), 40);
	rp_native_close(&n);
	rp_guest_close(&g);
}

/* ---- RC errors as completion statuses ---- */

static void test_bad_lkey(void **state)
{
	struct rp_guest g;
	struct rp_native n;

	(void)state;
	open_pair(&g, &n, 7);
	rt_guest_fill(&g, 0, 4096, 10);
	memset(n.buf, 0, 8192);
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 30, .opcode = VRDMA_WR_RDMA_WRITE, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = (uintptr_t)n.buf, .rkey = n.mr->rkey, .num_sge = 1,
		.sge = { { .addr = g.mr.iova, .length = 4096, .lkey = g.mr.lkey ^ 0x100 } } });
	rt_guest_expect_cqe(&g, 30, IBV_WC_LOC_PROT_ERR, 0);
	rt_expect_event(g.g, VRDMA_EV_QP_FATAL, g.qp.handle, VRDMA_QPF_BAD_WQE);
	/* A range past the MR's end is refused the same way. */
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 31, .opcode = VRDMA_WR_RDMA_WRITE, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = (uintptr_t)n.buf, .rkey = n.mr->rkey, .num_sge = 1,
		.sge = { rp_guest_sge(&g, RP_BUF_SIZE - 100, 101) } });
	rt_guest_expect_cqe(&g, 31, IBV_WC_LOC_PROT_ERR, 0);
	/* A good WQE on the QP in error is flushed. */
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 32, .opcode = VRDMA_WR_RDMA_WRITE, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = (uintptr_t)n.buf, .rkey = n.mr->rkey, .num_sge = 1,
		.sge = { rp_guest_sge(&g, 0, 4096) } });
	rt_guest_expect_cqe(&g, 32, IBV_WC_WR_FLUSH_ERR, 0);
	rt_native_expect_zero(&n, 8192);
	rp_native_close(&n);
	rp_guest_close(&g);
}

static void test_remote_access_error(void **state)
{
	struct rp_guest g;
	struct rp_native n;

	(void)state;
	open_pair(&g, &n, 7);
	memset(n.buf, 0, 8192);
	rt_guest_fill(&g, 0, 4096, 11);
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 40, .opcode = VRDMA_WR_RDMA_WRITE, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = (uintptr_t)n.buf, .rkey = n.mr->rkey ^ 0xff00, .num_sge = 1,
		.sge = { rp_guest_sge(&g, 0, 4096) } });
	rt_guest_expect_cqe(&g, 40, IBV_WC_REM_ACCESS_ERR, 0);
	rt_native_expect_zero(&n, 8192);
	rp_native_close(&n);
	rp_guest_close(&g);
}

static void test_rnr(void **state)
{
	struct rp_guest g;
	struct rp_native n;

	(void)state;
	open_pair(&g, &n, 0); /* no RNR retries: the first NAK is final */
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 50, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED, .num_sge = 1,
		.sge = { rp_guest_sge(&g, 0, 64) } });
	rt_guest_expect_cqe(&g, 50, IBV_WC_RNR_RETRY_EXC_ERR, 0);
	rp_native_close(&n);
	rp_guest_close(&g);
}

/* ---- migration: dirty logging and the stop ---- */

static bool guest_page_dirty(const struct rp_guest *g, uint64_t off)
{
	return vuf_log_page_dirty(g->g->log, g->buf.pages[off / 4096]);
}

static void test_dirty_log_and_stop(void **state)
{
	struct vgd_opts o = { .log_all = true };
	struct vgd_opts dest = { .resume = true };
	uint16_t base[VRDMA_NUM_VQS];
	struct vrdma_event ev;
	struct vgd *moved;
	struct rp_guest g;
	struct rp_native n;
	struct ibv_wc wc;
	struct vrdma_cqe c;
	uint8_t zero[4096] = { 0 };

	(void)state;
	assert_int_equal(rp_guest_open_opts(tenant_a.sock, &o, &g), 0);
	assert_int_equal(rp_native_open(dev_b, &n), 0);
	rt_connect_pair(&g, &n, 7);
	vuf_log_clear(g.g->log);
	/* A remote WRITE has no local completion: the device marks the
	 * remote-writable MR on its own, within its 100 ms period. */
	rt_fill(n.buf, 4096, 20);
	assert_int_equal(rp_native_post_send(&n, IBV_WR_RDMA_WRITE, 1, 0, 4096,
					     g.mr.iova + 8 * 4096, g.mr.rkey, 0), 0);
	assert_int_equal(rp_native_wait(&n, &wc), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	usleep(300000);
	assert_true(guest_page_dirty(&g, 8 * 4096));
	/* A receive marks its buffer and the CQ slot the device wrote. */
	vuf_log_clear(g.g->log);
	assert_int_equal(vgd_post_recv(g.g, &g.qp, &(struct vgd_recv){
		.wr_id = 2, .num_sge = 1, .sge = { rp_guest_sge(&g, 20 * 4096, 4096) } }, 1, false), 0);
	assert_int_equal(rp_native_post_send(&n, IBV_WR_SEND, 3, 0, 100, 0, 0, 0), 0);
	assert_int_equal(rp_native_wait(&n, &wc), 0);
	assert_int_equal(rp_guest_wait(&g, &c), 0);
	assert_true(vuf_log_page_dirty(g.g->log, g.buf.pages[20]));
	/* The first CQ slot sits in the ring's first page. */
	assert_true(vuf_log_page_dirty(g.g->log, g.cq.ring.gpa));
	/* Stop as QEMU does before switch-over: a receive still posted is
	 * flushed into the CQ, and the whole remote-writable MR is marked. */
	assert_int_equal(vgd_post_recv(g.g, &g.qp, &(struct vgd_recv){
		.wr_id = 4, .num_sge = 1, .sge = { rp_guest_sge(&g, 24 * 4096, 4096) } }, 1, true), 0);
	usleep(100000);
	vuf_log_clear(g.g->log);
	assert_int_equal(vgd_stop(g.g, base), 0);
	assert_int_equal(vgd_poll_cq(g.g, &g.cq, &c, 1), 1);
	assert_int_equal(c.wr_id, 4);
	assert_int_equal(c.status, IBV_WC_WR_FLUSH_ERR);
	for (uint64_t off = 0; off < RP_BUF_SIZE; off += 4096)
		assert_true(guest_page_dirty(&g, off));
	/* Nothing lands after the stop: the QP is in error. */
	assert_int_equal(vgd_buf_write(g.g, &g.buf, 30 * 4096, zero, sizeof(zero)), 0);
	rt_fill(n.buf, 4096, 21);
	assert_int_equal(rp_native_post_send(&n, IBV_WR_RDMA_WRITE, 5, 0, 4096,
					     g.mr.iova + 30 * 4096, g.mr.rkey, 0), 0);
	/* The requester only retries into a QP in error (rxe's retry timer
	 * may take long to give up): what matters is that nothing lands. */
	usleep(500000);
	rt_guest_expect(&g, 30 * 4096, zero, sizeof(zero));
	/* The guest resumes on a device that never had its objects (the
	 * destination): its first event says so, and its handles are unknown. */
	assert_true(base[VRDMA_VQ_CTRL] > 0);
	memcpy(dest.base, base, sizeof(base));
	assert_int_equal(vgd_open(tenant_a.sock, &dest, &moved), 0);
	assert_int_equal(vgd_wait_event(moved, RP_TIMEOUT_MS, &ev), 0);
	assert_int_equal(ev.type, VRDMA_EV_DEVICE_FATAL);
	assert_int_equal(vgd_destroy(moved, VRDMA_CMD_DESTROY_QP, g.qp.handle), VRDMA_ENOENT);
	vgd_close(moved);
	rp_native_close(&n);
	rp_guest_close(&g);
}

static uint64_t atomic_peer_value(const struct rp_native *n)
{
	return __atomic_load_n((const uint64_t *)(n->buf + 8192), __ATOMIC_ACQUIRE);
}

/* A READ and a fetch-add posted unsignaled before logging began are
 * retired by a signaled WQE once it runs: the pages the device wrote for
 * them are marked too (nothing else reports them). */
static void test_dirty_log_unsignaled_results(void **state)
{
	struct rp_guest g;
	struct rp_native n;
	uint64_t old = 0;

	(void)state;
	open_pair(&g, &n, 7);
	rt_fill(n.buf, 4096, 31);
	memcpy(n.buf + 8192, &(uint64_t){ 41 }, 8);
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 1, .opcode = VRDMA_WR_RDMA_READ,
		.remote_addr = (uintptr_t)n.buf, .rkey = n.mr->rkey, .num_sge = 1,
		.sge = { rp_guest_sge(&g, 12 * 4096, 4096) } });
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 2, .opcode = VRDMA_WR_ATOMIC_FETCH_AND_ADD,
		.remote_addr = (uintptr_t)n.buf + 8192, .rkey = n.mr->rkey, .compare_add = 1,
		.num_sge = 1, .sge = { rp_guest_sge(&g, 14 * 4096, 8) } });
	/* The fetch-add ran at the peer, so both went to the host before
	 * logging began (unsignaled there: nothing will report them). */
	for (int ms = 0; ms < RP_TIMEOUT_MS && atomic_peer_value(&n) != 42; ms += 10)
		usleep(10000);
	assert_int_equal(atomic_peer_value(&n), 42);
	assert_int_equal(vgd_log_start(g.g), 0);
	vuf_log_clear(g.g->log);
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 3, .opcode = VRDMA_WR_RDMA_WRITE, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = (uintptr_t)n.buf + 16384, .rkey = n.mr->rkey, .num_sge = 1,
		.sge = { rp_guest_sge(&g, 0, 64) } });
	rt_guest_expect_cqe(&g, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	rt_guest_expect_pattern(&g, 12 * 4096, 4096, 31);
	assert_int_equal(vgd_buf_read(g.g, &g.buf, 14 * 4096, &old, 8), 0);
	assert_int_equal(old, 41);
	assert_true(guest_page_dirty(&g, 12 * 4096));
	assert_true(guest_page_dirty(&g, 14 * 4096));
	rp_native_close(&n);
	rp_guest_close(&g);
}

/* Memory the front end removes under a live MR: the QPs of its PD go to
 * error, the MR is deregistered, and its lkey no longer passes. */
static void test_memory_removed(void **state)
{
	struct vgd_opts o = { .extra_bytes = 4u << 20 };
	struct rp_guest g;
	struct rp_native n;
	struct vgd_buf extra;
	struct vgd_mr mr;
	int mrs;

	(void)state;
	assert_int_equal(rp_guest_open_opts(tenant_a.sock, &o, &g), 0);
	assert_int_equal(rp_native_open(dev_b, &n), 0);
	rt_connect_pair(&g, &n, 7);
	assert_int_equal(vgd_buf_alloc_in(g.g, 1, 1u << 20, true, &extra), 0);
	assert_int_equal(vgd_reg_mr(g.g, g.pd, &extra, 0, 1u << 20, VRDMA_ACCESS_ALL, &mr), 0);
	mrs = rt_host_objects("mr", tenant_a.d.pid);
	assert_int_equal(vgd_remove_extra(g.g), 0);
	rt_expect_event(g.g, VRDMA_EV_QP_FATAL, g.qp.handle, VRDMA_QPF_MEMORY);
	/* Deregistered on the host function itself, not only forgotten. */
	assert_int_equal(rt_host_objects("mr", tenant_a.d.pid), mrs - 1);
	memset(n.buf, 0, 8192);
	rt_guest_post(&g, &(struct vgd_send){
		.wr_id = 80, .opcode = VRDMA_WR_RDMA_WRITE, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = (uintptr_t)n.buf, .rkey = n.mr->rkey, .num_sge = 1,
		.sge = { { .addr = mr.iova, .length = 4096, .lkey = mr.lkey } } });
	rt_guest_expect_cqe(&g, 80, IBV_WC_LOC_PROT_ERR, 0);
	rt_native_expect_zero(&n, 8192);
	/* The handle lives on until the guest lets go of it. */
	assert_int_equal(vgd_destroy(g.g, VRDMA_CMD_DEREG_MR, mr.handle), 0);
	vgd_buf_free(&extra);
	rp_native_close(&n);
	rp_guest_close(&g);
}

/*
 * One refused send WQE per check of spec 6.2, each on a fresh QP: the
 * status that check documents, the device's own QP_FATAL (BAD_WQE, which
 * no host-side refusal gives), and nothing reaches the peer.  Then random
 * garbage: some refusal, always the device's own.
 */
struct hostile_wqe {
	const char *what;
	uint32_t opcode, flags, num_sge, length;
	uint64_t remote_addr;
	struct vrdma_sge sge[2];
	uint32_t status;
};

static void run_hostile_wqe(const struct hostile_wqe *h, const uint8_t *raw)
{
	struct rp_guest g;
	struct rp_native n;
	uint8_t slot[512] = { 0 };
	struct vrdma_cqe c;

	open_pair(&g, &n, 7);
	memset(n.buf, 0, 8192);
	if (raw) {
		memcpy(slot, raw, sizeof(slot));
	} else {
		put_le32(slot + VRDMA_SWQE_OPCODE, h->opcode);
		put_le32(slot + VRDMA_SWQE_SEND_FLAGS, h->flags | VRDMA_SEND_SIGNALED);
		put_le64(slot + VRDMA_SWQE_REMOTE_ADDR, h->remote_addr ? h->remote_addr
								      : (uintptr_t)n.buf);
		put_le32(slot + VRDMA_SWQE_RDMA_RKEY, n.mr->rkey);
		put_le32(slot + VRDMA_SWQE_DMA_LENGTH, h->length);
		put_le32(slot + VRDMA_SWQE_DMA_NUM_SGE, h->num_sge);
		for (uint32_t i = 0; i < 2; i++) {
			struct vrdma_sge sge = h->sge[i];

			/* lkey 1: the QP's own MR, at the MR's base plus addr. */
			if (sge.lkey == 1) {
				sge.lkey = g.mr.lkey;
				sge.addr += g.mr.iova;
			}
			memcpy(slot + VRDMA_SWQE_SGE + 16 * i, &sge, 16);
		}
	}
	put_le64(slot + VRDMA_SWQE_WR_ID, 0x77);
	assert_int_equal(vgd_post_send_raw(g.g, &g.qp, slot, sizeof(slot), true), 0);
	assert_int_equal(rp_guest_wait(&g, &c), 0);
	if (!raw) {
		if (c.status != h->status)
			fprintf(stderr, "%s: status %u, want %u\n", h->what, c.status, h->status);
		assert_int_equal(c.status, h->status);
	} else {
		assert_true(c.status == IBV_WC_LOC_LEN_ERR || c.status == IBV_WC_LOC_QP_OP_ERR ||
			    c.status == IBV_WC_LOC_PROT_ERR);
	}
	assert_int_equal(c.wr_id, 0x77);
	assert_int_equal(c.byte_len, 0);
	rt_expect_event(g.g, VRDMA_EV_QP_FATAL, g.qp.handle, VRDMA_QPF_BAD_WQE);
	rt_native_expect_zero(&n, 8192);
	rp_native_close(&n);
	rp_guest_close(&g);
}

static void test_hostile_wqes(void **state)
{
	/* The QP: 4 send SGEs, 64 bytes inline, slot 512 bytes; atomics on. */
	const struct hostile_wqe cases[] = {
		{ "unknown opcode", .opcode = 99, .num_sge = 1, .sge = { { 0, 8, 1 } },
		  .status = IBV_WC_LOC_QP_OP_ERR },
		{ "unknown send flag", .opcode = VRDMA_WR_SEND, .flags = 0x100, .num_sge = 1,
		  .sge = { { 0, 8, 1 } }, .status = IBV_WC_LOC_QP_OP_ERR },
		{ "inline past max_inline", .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_INLINE,
		  .length = 65, .status = IBV_WC_LOC_LEN_ERR },
		{ "inline READ", .opcode = VRDMA_WR_RDMA_READ, .flags = VRDMA_SEND_INLINE,
		  .length = 8, .status = IBV_WC_LOC_LEN_ERR },
		{ "more SGEs than the QP has", .opcode = VRDMA_WR_SEND, .num_sge = 5,
		  .sge = { { 0, 8, 1 } }, .status = IBV_WC_LOC_QP_OP_ERR },
		{ "SGE lengths past 2^31", .opcode = VRDMA_WR_RDMA_WRITE, .num_sge = 2,
		  .sge = { { 0, 0x80000000u, 1 }, { 0, 0x80000000u, 1 } },
		  .status = IBV_WC_LOC_LEN_ERR },
		{ "atomic with two SGEs", .opcode = VRDMA_WR_ATOMIC_FETCH_AND_ADD, .num_sge = 2,
		  .sge = { { 0, 8, 1 }, { 8, 8, 1 } }, .status = IBV_WC_LOC_LEN_ERR },
		{ "atomic at an unaligned address", .opcode = VRDMA_WR_ATOMIC_CMP_AND_SWP,
		  .num_sge = 1, .remote_addr = 0x1004, .sge = { { 0, 8, 1 } },
		  .status = IBV_WC_LOC_LEN_ERR },
		{ "unknown lkey", .opcode = VRDMA_WR_RDMA_WRITE, .num_sge = 1,
		  .sge = { { 0x1000, 8, 0x4242 } }, .status = IBV_WC_LOC_PROT_ERR },
		{ "zero-length SGE with an unknown lkey", .opcode = VRDMA_WR_SEND, .num_sge = 1,
		  .sge = { { 0, 0, 0x4242 } }, .status = IBV_WC_LOC_PROT_ERR },
		{ "SGE past the MR's end", .opcode = VRDMA_WR_RDMA_WRITE, .num_sge = 1,
		  .sge = { { RP_BUF_SIZE - 8, 16, 1 } }, .status = IBV_WC_LOC_PROT_ERR },
		{ "SGE below the MR's start", .opcode = VRDMA_WR_RDMA_WRITE, .num_sge = 1,
		  .sge = { { (uint64_t)-4096, 8, 1 } }, .status = IBV_WC_LOC_PROT_ERR },
	};
	uint64_t x = 0x9e3779b97f4a7c15ull;

	(void)state;
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++)
		run_hostile_wqe(&cases[i], NULL);
	for (int i = 0; i < 8; i++) {
		uint8_t slot[512];

		for (size_t j = 0; j < sizeof(slot); j++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			slot[j] = (uint8_t)x;
		}
		/* Half with a valid opcode and flags and 1..4 SGEs of random
		 * lkeys, so the deeper checks are hit. */
		if (i % 2) {
			put_le32(slot + VRDMA_SWQE_OPCODE, (uint32_t)(x % 7));
			put_le32(slot + VRDMA_SWQE_SEND_FLAGS, VRDMA_SEND_SIGNALED);
			put_le32(slot + VRDMA_SWQE_DMA_NUM_SGE, 1 + (uint32_t)(x >> 8) % 4);
		}
		run_hostile_wqe(NULL, slot);
	}
}

/* ---- two tenants ---- */

static void open_guests(struct rp_guest *a, struct rp_guest *b)
{
	assert_int_equal(rp_guest_open(tenant_a.sock, a), 0);
	assert_int_equal(rp_guest_open(tenant_b.sock, b), 0);
	assert_int_equal(vgd_connect_qp(a->g, &a->qp, b->qp.qpn, b->gid, a->gid_index, 7), 0);
	assert_int_equal(vgd_connect_qp(b->g, &b->qp, a->qp.qpn, a->gid, b->gid_index, 7), 0);
}

static void test_guest_to_guest(void **state)
{
	struct rp_guest a, b;
	struct vrdma_cqe c;

	(void)state;
	open_guests(&a, &b);
	assert_int_equal(vgd_post_recv(b.g, &b.qp, &(struct vgd_recv){
		.wr_id = 1, .num_sge = 1, .sge = { rp_guest_sge(&b, 0, 8192) } }, 1, false), 0);
	rt_guest_fill(&a, 0, 5000, 12);
	rt_guest_post(&a, &(struct vgd_send){
		.wr_id = 2, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED, .num_sge = 1,
		.sge = { rp_guest_sge(&a, 0, 5000) } });
	rt_guest_expect_cqe(&a, 2, IBV_WC_SUCCESS, IBV_WC_SEND);
	assert_int_equal(rp_guest_wait(&b, &c), 0);
	assert_int_equal(c.status, IBV_WC_SUCCESS);
	assert_int_equal(c.byte_len, 5000);
	rt_guest_expect_pattern(&b, 0, 5000, 12);
	/* B writes into A, then A reads it back from B. */
	rt_guest_fill(&b, 16384, 7000, 13);
	rt_guest_post(&b, &(struct vgd_send){
		.wr_id = 3, .opcode = VRDMA_WR_RDMA_WRITE, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = a.mr.iova + 30000, .rkey = a.mr.rkey, .num_sge = 1,
		.sge = { rp_guest_sge(&b, 16384, 7000) } });
	rt_guest_expect_cqe(&b, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	rt_guest_expect_pattern(&a, 30000, 7000, 13);
	rt_guest_post(&a, &(struct vgd_send){
		.wr_id = 4, .opcode = VRDMA_WR_RDMA_READ, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = b.mr.iova + 16384, .rkey = b.mr.rkey, .num_sge = 1,
		.sge = { rp_guest_sge(&a, 100000, 7000) } });
	rt_guest_expect_cqe(&a, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	rt_guest_expect_pattern(&a, 100000, 7000, 13);
	rp_guest_close(&a);
	rp_guest_close(&b);
}

/* ---- isolation ---- */

/* B's MR in another PD is out of reach through B's QP, rkey or not. */
static void test_iso_rkey_other_pd(void **state)
{
	struct rp_guest a, b;
	struct vgd_mr other;
	uint32_t pd2;
	uint8_t zero[4096] = { 0 };

	(void)state;
	open_guests(&a, &b);
	assert_int_equal(vgd_create_pd(b.g, &pd2), 0);
	assert_int_equal(vgd_buf_write(b.g, &b.buf, 200000, zero, sizeof(zero)), 0);
	assert_int_equal(vgd_reg_mr(b.g, pd2, &b.buf, 200000, 4096, VRDMA_ACCESS_ALL, &other), 0);
	rt_guest_fill(&a, 0, 4096, 14);
	rt_guest_post(&a, &(struct vgd_send){
		.wr_id = 60, .opcode = VRDMA_WR_RDMA_WRITE, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = other.iova, .rkey = other.rkey, .num_sge = 1,
		.sge = { rp_guest_sge(&a, 0, 4096) } });
	rt_guest_expect_cqe(&a, 60, IBV_WC_REM_ACCESS_ERR, 0);
	rt_guest_expect(&b, 200000, zero, sizeof(zero));
	rp_guest_close(&a);
	rp_guest_close(&b);
}

/*
 * A copied lkey of another guest of the same tenant (same host function),
 * or of another tenant, is refused by the device itself before it posts:
 * the refusal's QP_FATAL says BAD_WQE (the host's own PD check, which
 * would also refuse the first, raises none), and nothing lands.
 */
static void test_iso_foreign_lkey(void **state)
{
	struct rp_guest a, b, a2, a3;
	struct rp_native n;

	(void)state;
	open_pair(&a, &n, 7);
	assert_int_equal(rp_guest_open(tenant_b.sock, &b), 0);
	assert_int_equal(rp_guest_open(tenant_a.sock, &a2), 0);
	memset(n.buf, 0, 8192);
	rt_guest_fill(&a2, 0, 4096, 40);
	/* Same tenant, same host device, another guest connection. */
	rt_guest_post(&a, &(struct vgd_send){
		.wr_id = 70, .opcode = VRDMA_WR_RDMA_WRITE, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = (uintptr_t)n.buf, .rkey = n.mr->rkey, .num_sge = 1,
		.sge = { { .addr = a2.mr.iova, .length = 4096, .lkey = a2.mr.lkey } } });
	rt_guest_expect_cqe(&a, 70, IBV_WC_LOC_PROT_ERR, 0);
	rt_expect_event(a.g, VRDMA_EV_QP_FATAL, a.qp.handle, VRDMA_QPF_BAD_WQE);
	usleep(100000);
	rt_native_expect_zero(&n, 8192);
	rp_native_close(&n);
	/* Another tenant's lkey, on a fresh QP. */
	open_pair(&a3, &n, 7);
	assert_int_equal(rp_native_post_recv(&n, 1, 0, 4096), 0);
	rt_guest_post(&a3, &(struct vgd_send){
		.wr_id = 71, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED, .num_sge = 1,
		.sge = { { .addr = b.mr.iova, .length = 64, .lkey = b.mr.lkey } } });
	rt_guest_expect_cqe(&a3, 71, IBV_WC_LOC_PROT_ERR, 0);
	rt_expect_event(a3.g, VRDMA_EV_QP_FATAL, a3.qp.handle, VRDMA_QPF_BAD_WQE);
	usleep(100000);
	rt_native_expect_zero(&n, 8192);
	rp_native_close(&n);
	rp_guest_close(&a3);
	rp_guest_close(&a2);
	rp_guest_close(&b);
	rp_guest_close(&a);
}

/*
 * Handles are per connection: live handles of another connection (of the
 * same tenant and of another) name nothing here, and stay live there.
 */
static void test_iso_handles(void **state)
{
	const struct vgd_qp_caps caps = { .sq_log2 = 2, .rq_log2 = 2, .max_send_sge = 1,
					  .max_recv_sge = 1 };
	struct rp_guest a, a2, b;
	uint32_t pds[4];
	struct vgd_qp qps[3];
	struct vgd_mr mr;
	struct vrdma_qp_attr attr;

	(void)state;
	assert_int_equal(rp_guest_open(tenant_a.sock, &a), 0);
	assert_int_equal(rp_guest_open(tenant_a.sock, &a2), 0);
	assert_int_equal(rp_guest_open(tenant_b.sock, &b), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(vgd_create_pd(b.g, &pds[i]), 0);
	assert_int_equal(vgd_reg_mr(a.g, pds[3], &a.buf, 0, 4096, 0, &mr), VRDMA_ENOENT);
	assert_int_equal(vgd_destroy(a.g, VRDMA_CMD_DESTROY_PD, pds[3]), VRDMA_ENOENT);
	/* The same tenant's other guest, on the same host function: its
	 * newest QPs' handles are past anything this connection has. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(vgd_create_qp(a2.g, a2.pd, &a2.cq, &a2.cq, &caps, &qps[i]), 0);
	assert_int_equal(vgd_destroy(a.g, VRDMA_CMD_DESTROY_QP, qps[2].handle), VRDMA_ENOENT);
	assert_int_equal(vgd_modify_qp(a.g, &qps[2], VRDMA_QP_STATE,
				       &(struct vrdma_qp_attr){ .qp_state = VRDMA_QPS_INIT }),
			 VRDMA_ENOENT);
	assert_int_equal(vgd_cmd(a2.g, VRDMA_CMD_QUERY_QP, &(struct vrdma_handle){ qps[2].handle },
				 sizeof(struct vrdma_handle), &attr, sizeof(attr)), 0);
	assert_int_equal(attr.qp_state, VRDMA_QPS_RESET);
	assert_int_equal(vgd_destroy(a2.g, VRDMA_CMD_DESTROY_PD, pds[3]), VRDMA_ENOENT);
	rp_guest_close(&a2);
	/* Double destroy. */
	assert_int_equal(vgd_destroy(b.g, VRDMA_CMD_DESTROY_PD, pds[3]), 0);
	assert_int_equal(vgd_destroy(b.g, VRDMA_CMD_DESTROY_PD, pds[3]), VRDMA_ENOENT);
	/* In use. */
	assert_int_equal(vgd_destroy(a.g, VRDMA_CMD_DESTROY_PD, a.pd), VRDMA_EBUSY);
	assert_int_equal(vgd_destroy(a.g, VRDMA_CMD_DESTROY_CQ, a.cq.handle), VRDMA_EBUSY);
	rp_guest_close(&a);
	rp_guest_close(&b);
}

/* MRs only over the guest's own RAM, with lengths that agree. */
static void test_iso_mr_ranges(void **state)
{
	struct rp_guest a;
	struct vgd_buf outside = { .va = 0x7f2000000000ull, .len = 8192, .npages = 2 };
	uint64_t pages[2] = { 1ull << 40, (1ull << 40) + 4096 };
	struct vgd_mr mr;

	(void)state;
	assert_int_equal(rp_guest_open(tenant_a.sock, &a), 0);
	outside.pages = pages;
	/* Guest-physical pages beyond its RAM (it has 256 MiB at 0). */
	assert_int_equal(vgd_reg_mr(a.g, a.pd, &outside, 0, 8192, 0, &mr), VRDMA_EFAULT);
	/* One page inside, one just past the end. */
	pages[0] = (256ull << 20) - 4096;
	pages[1] = 256ull << 20;
	assert_int_equal(vgd_reg_mr(a.g, a.pd, &outside, 0, 8192, 0, &mr), VRDMA_EFAULT);
	/* Remote write without local write, unknown bits. */
	assert_int_equal(vgd_reg_mr(a.g, a.pd, &a.buf, 0, 4096, VRDMA_ACCESS_REMOTE_WRITE, &mr),
			 VRDMA_EINVAL);
	assert_int_equal(vgd_reg_mr(a.g, a.pd, &a.buf, 0, 4096, 0x10, &mr), VRDMA_EPERM);
	rp_guest_close(&a);
}

/* Fills tenant_small's quota on one connection; each flood stops with ENOSPC. */
static void fill_small_quota(struct vgd *g)
{
	struct vgd_qp_caps caps = { .sq_log2 = 2, .rq_log2 = 2, .max_send_sge = 1,
				    .max_recv_sge = 1 };
	struct vgd_cq cqs[4];
	struct vgd_qp qp;
	struct vgd_buf buf;
	struct vgd_mr mr;
	uint32_t pd = 0, more;
	int n = 0, r;

	/* 3 PDs, 3 CQs, 3 MRs, 2 QPs, 1 MiB pinned. */
	while (n < 10 && (r = vgd_create_pd(g, n ? &more : &pd)) == 0)
		n++;
	assert_int_equal(r, VRDMA_ENOSPC);
	assert_int_equal(n, 3);
	for (n = 0; n < 4 && (r = vgd_create_cq(g, 4, &cqs[n])) == 0; n++)
		;
	assert_int_equal(r, VRDMA_ENOSPC);
	assert_int_equal(n, 3);
	for (n = 0; n < 3 && (r = vgd_create_qp(g, pd, &cqs[0], &cqs[1], &caps, &qp)) == 0; n++)
		;
	assert_int_equal(r, VRDMA_ENOSPC);
	assert_int_equal(n, 2);
	assert_int_equal(vgd_buf_alloc(g, 2u << 20, true, &buf), 0);
	assert_int_equal(vgd_reg_mr(g, pd, &buf, 0, 2u << 20, 0, &mr), VRDMA_ENOSPC);
	assert_int_equal(vgd_reg_mr(g, pd, &buf, 0, 1u << 20, 0, &mr), 0);
	assert_int_equal(vgd_reg_mr(g, pd, &buf, 0, 4096, 0, &mr), VRDMA_ENOSPC);
	assert_int_equal(vgd_destroy(g, VRDMA_CMD_DEREG_MR, mr.handle), 0);
	assert_int_equal(vgd_reg_mr(g, pd, &buf, 0, 4096, 0, &mr), 0);
	vgd_buf_free(&buf);
}

/* Malformed requests fail with the documented status and change nothing. */
static void test_iso_bad_requests(void **state)
{
	struct rp_guest a;
	struct vrdma_reg_mr_req m;
	struct vrdma_create_qp_req q = { 0 };
	struct vrdma_reg_mr_resp mr_resp;
	struct vrdma_create_qp_resp qp_resp;
	struct vrdma_qp_attr attr = { .qp_state = VRDMA_QPS_RTR };
	struct vgd_mr mr;
	uint8_t req[sizeof(m) + 16];
	uint64_t page;

	(void)state;
	assert_int_equal(rp_guest_open(tenant_a.sock, &a), 0);
	page = a.buf.pages[0];
	/* No request bytes at all, a header without its payload, then zero,
	 * overlong and wrapping lengths: each reaches the device. */
	{
		struct vrdma_resp_hdr rh;
		struct vrdma_cmd_hdr h = { .opcode = VRDMA_CMD_REG_MR };
		uint32_t used;

		assert_int_equal(vgd_cmd_raw(a.g, NULL, 0, &rh, sizeof(rh), &used), 0);
		assert_int_equal(used, sizeof(rh));
		assert_int_equal(rh.status, VRDMA_EINVAL);
		assert_int_equal(vgd_cmd_raw(a.g, &h, sizeof(h), &rh, sizeof(rh), &used), 0);
		assert_int_equal(used, sizeof(rh));
		assert_int_equal(rh.status, VRDMA_EINVAL);
	}
	m = (struct vrdma_reg_mr_req){ .pd = a.pd, .iova = 0x1000, .length = 0,
				       .page_shift = 12, .npages = 1 };
	memcpy(req, &m, sizeof(m));
	memcpy(req + sizeof(m), &page, 8);
	assert_int_equal(vgd_cmd(a.g, VRDMA_CMD_REG_MR, req, sizeof(m) + 8, &mr_resp,
				 sizeof(mr_resp)), VRDMA_EINVAL);
	m.length = 8ull << 30;
	memcpy(req, &m, sizeof(m));
	assert_int_equal(vgd_cmd(a.g, VRDMA_CMD_REG_MR, req, sizeof(m) + 8, &mr_resp,
				 sizeof(mr_resp)), VRDMA_E2BIG);
	m.iova = UINT64_MAX - 100;
	m.length = 4096;
	memcpy(req, &m, sizeof(m));
	assert_int_equal(vgd_cmd(a.g, VRDMA_CMD_REG_MR, req, sizeof(m) + 8, &mr_resp,
				 sizeof(mr_resp)), VRDMA_EINVAL);
	/* A page list that disagrees with the length: two pages for one. */
	m = (struct vrdma_reg_mr_req){ .pd = a.pd, .iova = 0x1000, .length = 4096,
				       .page_shift = 12, .npages = 2 };
	memcpy(req, &m, sizeof(m));
	memcpy(req + sizeof(m), &page, 8);
	memcpy(req + sizeof(m) + 8, &page, 8);
	assert_int_equal(vgd_cmd(a.g, VRDMA_CMD_REG_MR, req, sizeof(m) + 16, &mr_resp,
				 sizeof(mr_resp)), VRDMA_EINVAL);
	/* Before setup: a QP with no PD or CQs of this connection. */
	q.qp_type = VRDMA_QPT_RC;
	q.pd = 0x00700007;
	q.send_cq = q.recv_cq = a.cq.handle;
	q.max_send_sge = q.max_recv_sge = 1;
	q.sq_log2_slots = q.rq_log2_slots = 2;
	q.sq_log2_slot_size = 8;
	q.rq_log2_slot_size = 6;
	q.sq_npages = q.rq_npages = 1;
	{
		uint8_t qreq[sizeof(q) + 16];

		memcpy(qreq, &q, sizeof(q));
		memcpy(qreq + sizeof(q), &page, 8);
		memcpy(qreq + sizeof(q) + 8, &page, 8);
		assert_int_equal(vgd_cmd(a.g, VRDMA_CMD_CREATE_QP, qreq, sizeof(qreq), &qp_resp,
					 sizeof(qp_resp)), VRDMA_ENOENT);
		/* A raw packet QP is never the guest's. */
		q.pd = a.pd;
		q.qp_type = 8;
		memcpy(qreq, &q, sizeof(q));
		assert_int_equal(vgd_cmd(a.g, VRDMA_CMD_CREATE_QP, qreq, sizeof(qreq), &qp_resp,
					 sizeof(qp_resp)), VRDMA_EPERM);
	}
	/* The IB state machine: RESET straight to RTR is refused by the host. */
	assert_int_equal(vgd_modify_qp(a.g, &a.qp, VRDMA_QP_STATE, &attr), VRDMA_EINVAL);
	/* Unknown command. */
	assert_int_equal(vgd_cmd(a.g, 99, NULL, 0, NULL, 0), VRDMA_EOPNOTSUPP);
	/* The connection still works. */
	assert_int_equal(vgd_reg_mr(a.g, a.pd, &a.buf, 0, 4096, 0, &mr), 0);
	rp_guest_close(&a);
}

/*
 * Perfect guesses of keys of the victim's live MRs (B, on the attacker's
 * QP's other end): an MR in B's QP's own PD registered without remote
 * access (the host key exists: rxe's is the lkey), an MR of B's in another
 * PD, and an MR of another guest of tenant B on the same host function.
 * Each is refused remotely, nothing lands, and B keeps working.  They fail
 * only because the device registers with the access the guest asked for
 * and gives each guest PD its own host PD.
 */
static void test_iso_guessed_rkeys(void **state)
{
	uint8_t zero[8192] = { 0 };
	struct rp_guest a, b, b2;
	struct vgd_mr local_only, other_pd, other_guest;
	struct vrdma_cqe c;
	uint32_t pd2;

	(void)state;
	assert_int_equal(rp_guest_open(tenant_b.sock, &b), 0);
	assert_int_equal(rp_guest_open(tenant_b.sock, &b2), 0);
	assert_int_equal(vgd_create_pd(b.g, &pd2), 0);
	assert_int_equal(vgd_buf_write(b.g, &b.buf, 0, zero, sizeof(zero)), 0);
	assert_int_equal(vgd_buf_write(b2.g, &b2.buf, 0, zero, sizeof(zero)), 0);
	assert_int_equal(vgd_reg_mr(b.g, b.pd, &b.buf, 0, 4096, VRDMA_ACCESS_LOCAL_WRITE,
				    &local_only), 0);
	assert_int_equal(local_only.rkey, 0);
	assert_int_equal(vgd_reg_mr(b.g, pd2, &b.buf, 4096, 4096, VRDMA_ACCESS_ALL, &other_pd), 0);
	assert_int_equal(vgd_reg_mr(b2.g, b2.pd, &b2.buf, 0, 8192, VRDMA_ACCESS_ALL, &other_guest),
			 0);
	const struct { uint64_t addr; uint32_t rkey; } guesses[] = {
		{ local_only.iova, local_only.lkey },
		{ other_pd.iova, other_pd.rkey },
		{ other_guest.iova, other_guest.rkey },
	};
	for (uint32_t i = 0; i < G_N_ELEMENTS(guesses); i++) {
		assert_int_equal(rp_guest_open(tenant_a.sock, &a), 0);
		/* B's QP is reconnected to each fresh attacker QP. */
		assert_int_equal(vgd_modify_qp(b.g, &b.qp, VRDMA_QP_STATE,
					       &(struct vrdma_qp_attr){ .qp_state = VRDMA_QPS_RESET }), 0);
		assert_int_equal(vgd_connect_qp(a.g, &a.qp, b.qp.qpn, b.gid, a.gid_index, 7), 0);
		assert_int_equal(vgd_connect_qp(b.g, &b.qp, a.qp.qpn, a.gid, b.gid_index, 7), 0);
		rt_guest_fill(&a, 0, 4096, 30);
		rt_guest_post(&a, &(struct vgd_send){
			.wr_id = i, .opcode = VRDMA_WR_RDMA_WRITE, .flags = VRDMA_SEND_SIGNALED,
			.remote_addr = guesses[i].addr, .rkey = guesses[i].rkey, .num_sge = 1,
			.sge = { rp_guest_sge(&a, 0, 4096) } });
		rt_guest_expect_cqe(&a, i, IBV_WC_REM_ACCESS_ERR, 0);
		rt_guest_expect(&b, 0, zero, sizeof(zero));
		rt_guest_expect(&b2, 0, zero, sizeof(zero));
		rp_guest_close(&a);
	}
	rp_guest_close(&b2);
	/* B, the victim, still sends to a native peer. */
	{
		struct rp_native n;
		struct ibv_wc wc;

		assert_int_equal(rp_native_open(dev_a, &n), 0);
		assert_int_equal(vgd_modify_qp(b.g, &b.qp, VRDMA_QP_STATE,
					       &(struct vrdma_qp_attr){ .qp_state = VRDMA_QPS_RESET }), 0);
		rt_connect_pair(&b, &n, 7);
		assert_int_equal(rp_native_post_recv(&n, 1, 0, 4096), 0);
		rt_guest_fill(&b, 4096, 1000, 31);
		rt_guest_post(&b, &(struct vgd_send){
			.wr_id = 9, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED, .num_sge = 1,
			.sge = { rp_guest_sge(&b, 4096, 1000) } });
		assert_int_equal(rp_guest_wait(&b, &c), 0);
		assert_int_equal(c.status, IBV_WC_SUCCESS);
		assert_int_equal(rp_native_wait(&n, &wc), 0);
		rt_native_expect_pattern(&n, 0, 1000, 31);
		rp_native_close(&n);
	}
	rp_guest_close(&b);
}

/* Floods stop at the tenant's quota, with ENOSPC, on any of its connections. */
static void test_iso_quota(void **state)
{
	struct vgd *g, *other;
	uint32_t pd;

	/* One back end per function: tenant A's makes way for a small one. */
	const char *args_small[] = { "--device", "rdma", "--ibdev", dev_a, "--max-pds", "3",
				     "--max-cqs", "3", "--max-mrs", "3", "--max-qps", "2",
				     "--max-pinned-mib", "1", NULL };

	(void)state;
	assert_int_equal(vt_stop(&tenant_a), 0);
	assert_int_equal(vt_spawn(&tenant_small, "small.sock", args_small), 0);
	assert_int_equal(vgd_open(tenant_small.sock, NULL, &g), 0);
	fill_small_quota(g);
	/* The quota is the tenant's, not the connection's. */
	assert_int_equal(vgd_open(tenant_small.sock, NULL, &other), 0);
	assert_int_equal(vgd_create_pd(other, &pd), VRDMA_ENOSPC);
	vgd_close(other);
	vgd_close(g);
}

/* A front end that goes away leaves nothing behind on the host function,
 * and the whole quota is free again for the next one, twenty times over. */
static void test_teardown(void **state)
{
	pid_t pid = tenant_small.d.pid;

	(void)state;
	for (int i = 0; i < 20; i++) {
		struct vgd *g;

		assert_int_equal(vgd_open(tenant_small.sock, NULL, &g), 0);
		fill_small_quota(g);
		assert_int_equal(rt_host_objects("qp", pid), 2);
		vgd_close(g);
		/* The daemon frees on its side once it sees the hang-up. */
		for (int t = 0; t < 50 && rt_host_objects("mr", pid); t++)
			usleep(20000);
		assert_int_equal(rt_host_objects("qp", pid), 0);
		assert_int_equal(rt_host_objects("cq", pid), 0);
		assert_int_equal(rt_host_objects("mr", pid), 0);
		assert_int_equal(rt_host_objects("pd", pid), 0);
	}
}

/* The host port going down and up reaches every guest of the function.
 * Last: the routes over the veth pair do not survive the link going down. */
static void test_port_events(void **state)
{
	struct vgd *g;
	struct vrdma_event ev;

	(void)state;
	assert_int_equal(vgd_open(tenant_b.sock, NULL, &g), 0);
	/* vb carries rxe1 (tests/rxe-vm/guest-setup). */
	assert_int_equal(system("ip link set vb down"), 0);
	assert_int_equal(vgd_wait_event(g, RP_TIMEOUT_MS, &ev), 0);
	assert_int_equal(ev.type, VRDMA_EV_PORT_ERR);
	assert_int_equal(ev.data, 1);
	assert_int_equal(system("ip link set vb up"), 0);
	assert_int_equal(vgd_wait_event(g, RP_TIMEOUT_MS, &ev), 0);
	assert_int_equal(ev.type, VRDMA_EV_PORT_ACTIVE);
	vgd_close(g);
}

static int setup(void **state)
{
	const char *args_a[] = { "--device", "rdma", "--ibdev", dev_a, NULL };
	/* Tenant B runs with the latency and registration options on. */
	const char *args_b[] = { "--device", "rdma", "--ibdev", dev_b, "--rdma-prefault",
				 "--rdma-poll-us", "50", NULL };

	(void)state;
	if (vt_spawn(&tenant_a, "a.sock", args_a) || vt_spawn(&tenant_b, "b.sock", args_b))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_send_recv),
		cmocka_unit_test(test_write_read),
		cmocka_unit_test(test_atomics),
		cmocka_unit_test(test_unsignaled_batch),
		cmocka_unit_test(test_bad_lkey),
		cmocka_unit_test(test_remote_access_error),
		cmocka_unit_test(test_rnr),
		cmocka_unit_test(test_dirty_log_and_stop),
		cmocka_unit_test(test_dirty_log_unsignaled_results),
		cmocka_unit_test(test_memory_removed),
		cmocka_unit_test(test_hostile_wqes),
		cmocka_unit_test(test_guest_to_guest),
		cmocka_unit_test(test_iso_rkey_other_pd),
		cmocka_unit_test(test_iso_foreign_lkey),
		cmocka_unit_test(test_iso_handles),
		cmocka_unit_test(test_iso_mr_ranges),
		cmocka_unit_test(test_iso_bad_requests),
		cmocka_unit_test(test_iso_guessed_rkeys),
		cmocka_unit_test(test_iso_quota),
		cmocka_unit_test(test_teardown),
		cmocka_unit_test(test_port_events),
	};

	const char *rig[2];

	vt_init(argc, argv);
	rt_require_rig((const char *const[]){ "VRDMA_RXE_DEV_A", "VRDMA_RXE_DEV_B", NULL }, rig);
	dev_a = rig[0];
	dev_b = rig[1];
	/* Each back end still running must exit 0 on SIGTERM. */
	return VT_RUN(tests, setup, NULL, &tenant_a, &tenant_b, &tenant_small);
}

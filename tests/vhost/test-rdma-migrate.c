/* SPDX-License-Identifier: MIT */
/*
 * The RDMA device's objects across a live migration (docs/virtio-rdma.md
 * section 10), in the Soft-RoCE guest: a harness guest on one back end
 * (rxe0) with two QPs connected to each other moves, as QEMU moves it, to
 * a back end on another function (rxe1), and back.  Its handles, keys and
 * QP numbers stay what the guest knows while the host gives others; posted
 * receives, CQ positions and packet sequence numbers carry over; every
 * opcode moves the right bytes afterwards.  A move the destination refuses
 * leaves the source working.
 *
 *   test-rdma-migrate VRDMA-VHOST   (needs VRDMA_RXE_DEV_A/B, or exits 77)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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

static struct vt_daemon back_a, back_b, back_small;
static const char *dev_a, *dev_b;

/* A guest with QPs qa (the rp_guest's) and qb connected to each other. */
struct pair {
	struct rp_guest g;
	struct vgd_cq cq_b;
	struct vgd_qp qb;
};

static const struct vgd_qp_caps pair_caps = { .sq_log2 = 6, .rq_log2 = 6, .max_send_sge = 4,
					      .max_recv_sge = 4, .max_inline = 64 };

static void open_pair(const char *sock, struct pair *p)
{
	struct vgd_opts o = { .log_all = true };

	assert_int_equal(rp_guest_open_opts(sock, &o, &p->g), 0);
	assert_int_equal(vgd_create_cq(p->g.g, 8, &p->cq_b), 0);
	assert_int_equal(vgd_create_qp(p->g.g, p->g.pd, &p->cq_b, &p->cq_b, &pair_caps, &p->qb), 0);
	assert_int_equal(vgd_connect_qp(p->g.g, &p->g.qp, p->qb.qpn, p->g.gid, p->g.gid_index, 7),
			 0);
	assert_int_equal(vgd_connect_qp(p->g.g, &p->qb, p->g.qp.qpn, p->g.gid, p->g.gid_index, 7),
			 0);
}

static void post_recv(struct pair *p, struct vgd_qp *qp, uint64_t wr_id, uint64_t off)
{
	assert_int_equal(vgd_post_recv(p->g.g, qp, &(struct vgd_recv){
		.wr_id = wr_id, .num_sge = 1, .sge = { rp_guest_sge(&p->g, off, 4096) } }, 1, true),
		0);
}

static void post_send(struct pair *p, struct vgd_qp *qp, const struct vgd_send *w)
{
	assert_int_equal(vgd_post_send(p->g.g, qp, w, 1, true), 0);
}

static void expect_cqe(struct pair *p, struct vgd_cq *cq, uint64_t wr_id, uint32_t opcode,
		       uint32_t qpn, uint32_t byte_len)
{
	struct vrdma_cqe c;
	int got;

	assert_int_equal(vgd_wait_cq(p->g.g, cq, &c, 1, RP_TIMEOUT_MS, &got), 0);
	if (c.wr_id != wr_id || c.status)
		fprintf(stderr, "CQE wr_id %llu status %u, want %llu\n",
			(unsigned long long)c.wr_id, c.status, (unsigned long long)wr_id);
	assert_int_equal(c.wr_id, wr_id);
	assert_int_equal(c.status, IBV_WC_SUCCESS);
	assert_int_equal(c.opcode, opcode);
	assert_int_equal(c.qp_num, qpn);
	if (byte_len)
		assert_int_equal(c.byte_len, byte_len);
}

/* A send's and its receive's completions on one CQ: in either order, as
 * two QPs' completions are not ordered between them. */
static void expect_send_and_recv(struct pair *p, struct vgd_cq *cq, uint64_t send_wr_id,
				 uint32_t send_qpn, uint64_t recv_wr_id, uint32_t recv_qpn,
				 uint32_t byte_len)
{
	bool seen_send = false, seen_recv = false;

	for (int i = 0; i < 2; i++) {
		struct vrdma_cqe c;
		int got;

		assert_int_equal(vgd_wait_cq(p->g.g, cq, &c, 1, RP_TIMEOUT_MS, &got), 0);
		assert_int_equal(c.status, IBV_WC_SUCCESS);
		if (c.wr_id == send_wr_id && !seen_send) {
			assert_int_equal(c.opcode, IBV_WC_SEND);
			assert_int_equal(c.qp_num, send_qpn);
			seen_send = true;
		} else {
			assert_int_equal(c.wr_id, recv_wr_id);
			assert_false(seen_recv);
			assert_int_equal(c.opcode, IBV_WC_RECV);
			assert_int_equal(c.qp_num, recv_qpn);
			assert_int_equal(c.byte_len, byte_len);
			seen_recv = true;
		}
	}
}

/* A SEND from qa lands in qb's next receive, which was wr_id. */
static void send_a_to_b(struct pair *p, uint64_t recv_wr_id, uint64_t recv_off, uint8_t seed)
{
	rt_guest_fill(&p->g, 0, 1500, seed);
	post_send(p, &p->g.qp, &(struct vgd_send){
		.wr_id = 1000 + seed, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED,
		.num_sge = 1, .sge = { rp_guest_sge(&p->g, 0, 1500) } });
	expect_cqe(p, &p->g.cq, 1000 + seed, IBV_WC_SEND, p->g.qp.qpn, 0);
	expect_cqe(p, &p->cq_b, recv_wr_id, IBV_WC_RECV, p->qb.qpn, 1500);
	rt_guest_expect_pattern(&p->g, recv_off, 1500, seed);
}

/* qa WRITEs, READs and adds through the guest's rkey of its own MR. */
static void one_sided(struct pair *p, uint8_t seed)
{
	uint64_t counter_off = 200000, value;

	rt_guest_fill(&p->g, 100000, 3000, seed);
	post_send(p, &p->g.qp, &(struct vgd_send){
		.wr_id = 2000 + seed, .opcode = VRDMA_WR_RDMA_WRITE, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = p->g.mr.iova + 150000, .rkey = p->g.mr.rkey, .num_sge = 1,
		.sge = { rp_guest_sge(&p->g, 100000, 3000) } });
	expect_cqe(p, &p->g.cq, 2000 + seed, IBV_WC_RDMA_WRITE, p->g.qp.qpn, 0);
	rt_guest_expect_pattern(&p->g, 150000, 3000, seed);
	post_send(p, &p->qb, &(struct vgd_send){
		.wr_id = 3000 + seed, .opcode = VRDMA_WR_RDMA_READ, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = p->g.mr.iova + 150000, .rkey = p->g.mr.rkey, .num_sge = 1,
		.sge = { rp_guest_sge(&p->g, 170000, 3000) } });
	expect_cqe(p, &p->cq_b, 3000 + seed, IBV_WC_RDMA_READ, p->qb.qpn, 0);
	rt_guest_expect_pattern(&p->g, 170000, 3000, seed);
	assert_int_equal(vgd_buf_read(p->g.g, &p->g.buf, counter_off, &value, 8), 0);
	post_send(p, &p->g.qp, &(struct vgd_send){
		.wr_id = 4000 + seed, .opcode = VRDMA_WR_ATOMIC_FETCH_AND_ADD,
		.flags = VRDMA_SEND_SIGNALED, .remote_addr = p->g.mr.iova + counter_off,
		.rkey = p->g.mr.rkey, .compare_add = 5, .num_sge = 1,
		.sge = { rp_guest_sge(&p->g, 210000, 8) } });
	expect_cqe(p, &p->g.cq, 4000 + seed, IBV_WC_FETCH_ADD, p->g.qp.qpn, 0);
	{
		uint64_t fetched, now;

		assert_int_equal(vgd_buf_read(p->g.g, &p->g.buf, 210000, &fetched, 8), 0);
		assert_int_equal(vgd_buf_read(p->g.g, &p->g.buf, counter_off, &now, 8), 0);
		assert_int_equal(fetched, value);
		assert_int_equal(now, value + 5);
	}
}

/*
 * Two QPs of one guest, connected to each other, move from rxe0 to rxe1
 * and back with traffic before, between and after: receives posted before
 * a move are the ones that complete after it, every opcode works with the
 * keys and QP numbers the guest was given, and the guest's handles name
 * the same objects.  The host gave other numbers each time.
 */
static void test_move_connected_pair(void **state)
{
	uint32_t generation;
	struct vrdma_qp_attr attr;
	struct pair p;
	size_t len;
	uint64_t t0;

	(void)state;
	open_pair(back_a.sock, &p);
	generation = p.g.g->config.generation;
	for (uint64_t i = 0; i < 4; i++)
		post_recv(&p, &p.qb, 100 + i, 20000 + i * 4096);
	post_recv(&p, &p.g.qp, 200, 60000);
	send_a_to_b(&p, 100, 20000, 1);
	one_sided(&p, 2);
	assert_int_equal(rt_host_objects("qp", back_a.d.pid), 2);

	t0 = monotonic_ns();
	assert_int_equal(vgd_migrate(p.g.g, back_b.sock, &len), 0);
	fprintf(stderr, "moved to %s in %.1f ms with %zu bytes of device state\n", dev_b,
		(double)(monotonic_ns() - t0) / 1e6, len);
	assert_int_equal(p.g.g->config.generation, generation);
	/* The source let go of everything; the destination has the QPs. */
	for (int t = 0; t < 50 && rt_host_objects("qp", back_a.d.pid); t++)
		usleep(20000);
	assert_int_equal(rt_host_objects("qp", back_a.d.pid), 0);
	assert_int_equal(rt_host_objects("qp", back_b.d.pid), 2);

	/* Receives posted on the source complete on the destination. */
	send_a_to_b(&p, 101, 20000 + 4096, 3);
	rt_guest_fill(&p.g, 30000, 700, 4);
	post_send(&p, &p.qb, &(struct vgd_send){
		.wr_id = 55, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED, .num_sge = 1,
		.sge = { rp_guest_sge(&p.g, 30000, 700) } });
	expect_cqe(&p, &p.cq_b, 55, IBV_WC_SEND, p.qb.qpn, 0);
	expect_cqe(&p, &p.g.cq, 200, IBV_WC_RECV, p.g.qp.qpn, 700);
	rt_guest_expect_pattern(&p.g, 60000, 700, 4);
	one_sided(&p, 5);
	/* The guest's view: its peer's QP number, its QP in RTS. */
	assert_int_equal(vgd_cmd(p.g.g, VRDMA_CMD_QUERY_QP, &(struct vrdma_handle){ p.g.qp.handle },
				 sizeof(struct vrdma_handle), &attr, sizeof(attr)), 0);
	assert_int_equal(attr.qp_state, VRDMA_QPS_RTS);
	assert_int_equal(attr.dest_qp_num, p.qb.qpn);

	/* And back again, with receives still posted from the first time. */
	assert_int_equal(vgd_migrate(p.g.g, back_a.sock, NULL), 0);
	send_a_to_b(&p, 102, 20000 + 2 * 4096, 6);
	one_sided(&p, 7);
	/* A new MR on a moved guest gets keys no moved MR holds. */
	{
		struct vgd_mr fresh;

		assert_int_equal(vgd_reg_mr(p.g.g, p.g.pd, &p.g.buf, 0, 4096, VRDMA_ACCESS_ALL,
					    &fresh), 0);
		assert_int_not_equal(fresh.lkey, p.g.mr.lkey);
		assert_int_not_equal(fresh.rkey, p.g.mr.rkey);
	}
	/* A new QP connects to a moved one by the number the guest knows,
	 * which is not the host's any more. */
	{
		struct vrdma_gid_resp gid;
		struct vgd_qp qc;

		assert_int_equal(vgd_query_gid(p.g.g, p.g.gid_index, &gid), 0);
		assert_int_equal(vgd_create_qp(p.g.g, p.g.pd, &p.cq_b, &p.cq_b, &pair_caps, &qc), 0);
		assert_int_equal(vgd_modify_qp(p.g.g, &p.qb, VRDMA_QP_STATE,
					       &(struct vrdma_qp_attr){ .qp_state = VRDMA_QPS_RESET }),
				 0);
		assert_int_equal(vgd_connect_qp(p.g.g, &p.qb, qc.qpn, gid.gid, p.g.gid_index, 7), 0);
		assert_int_equal(vgd_connect_qp(p.g.g, &qc, p.qb.qpn, gid.gid, p.g.gid_index, 7), 0);
		post_recv(&p, &p.qb, 300, 40000);
		rt_guest_fill(&p.g, 50000, 900, 8);
		post_send(&p, &qc, &(struct vgd_send){
			.wr_id = 77, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED,
			.num_sge = 1, .sge = { rp_guest_sge(&p.g, 50000, 900) } });
		expect_send_and_recv(&p, &p.cq_b, 77, qc.qpn, 300, p.qb.qpn, 900);
		rt_guest_expect_pattern(&p.g, 40000, 900, 8);
		assert_int_equal(vgd_destroy(p.g.g, VRDMA_CMD_DESTROY_QP, qc.handle), 0);
	}
	/* Its old handles name its objects: destroy them all. */
	assert_int_equal(vgd_destroy(p.g.g, VRDMA_CMD_DESTROY_QP, p.qb.handle), 0);
	assert_int_equal(vgd_destroy(p.g.g, VRDMA_CMD_DESTROY_QP, p.g.qp.handle), 0);
	assert_int_equal(vgd_destroy(p.g.g, VRDMA_CMD_DESTROY_CQ, p.cq_b.handle), 0);
	assert_int_equal(vgd_destroy(p.g.g, VRDMA_CMD_DEREG_MR, p.g.mr.handle), 0);
	rp_guest_close(&p.g);
}

/*
 * A destination that refuses the state (its quota has no room for the
 * QPs): the move fails, and the source, resumed, goes on with its QPs as
 * they were (unlike a migration that moved them to error at the stop).
 */
static void test_refused_move_leaves_source_working(void **state)
{
	const char *small[] = { "--device", "rdma", "--ibdev", dev_b, "--max-qps", "1", NULL };
	struct pair p;

	(void)state;
	assert_int_equal(vt_stop(&back_b), 0);
	assert_int_equal(vt_spawn(&back_small, "small.sock", small), 0);
	open_pair(back_a.sock, &p);
	for (uint64_t i = 0; i < 2; i++)
		post_recv(&p, &p.qb, 300 + i, 20000 + i * 4096);
	send_a_to_b(&p, 300, 20000, 8);
	/* Refused for the quota, and the front end hears that it was. */
	assert_int_equal(vgd_migrate(p.g.g, back_small.sock, NULL), -ENOSPC);
	assert_int_equal(vgd_resume(p.g.g), 0);
	send_a_to_b(&p, 301, 20000 + 4096, 9);
	one_sided(&p, 10);
	rp_guest_close(&p.g);
	assert_int_equal(vt_stop(&back_small), 0);
}

static int setup(void **state)
{
	const char *args_a[] = { "--device", "rdma", "--ibdev", dev_a, NULL };
	const char *args_b[] = { "--device", "rdma", "--ibdev", dev_b, NULL };

	(void)state;
	return vt_spawn(&back_a, "a.sock", args_a) || vt_spawn(&back_b, "b.sock", args_b) ? -1 : 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_move_connected_pair),
		cmocka_unit_test(test_refused_move_leaves_source_working),
	};
	const char *rig[2];

	vt_init(argc, argv);
	rt_require_rig((const char *const[]){ "VRDMA_RXE_DEV_A", "VRDMA_RXE_DEV_B", NULL }, rig);
	dev_a = rig[0];
	dev_b = rig[1];
	return VT_RUN(tests, setup, NULL, &back_a, &back_b, &back_small);
}

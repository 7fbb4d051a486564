/* SPDX-License-Identifier: MIT */
/*
 * rdma-move-bench: what a guest's RDMA objects add to a migration's stop.
 *
 *   rdma-move-bench VRDMA-VHOST DEV_A DEV_B SOCKET_DIR QPS MR_MIB RUNS
 *
 * A harness guest on `vrdma-vhost --device rdma --ibdev DEV_A` moves to a
 * second back end on DEV_B the way a migration moves it (spec section 10):
 * stop with dirty logging on, the source's state out (SET_DEVICE_STATE_FD),
 * into the destination and checked (CHECK_DEVICE_STATE), the queues started
 * there, and the first command answered (the objects are made by then).
 * That span is the device's part of the switch-over downtime.
 *
 * Rows, each the median of RUNS, in alternating order:
 *   anchor    the same guest with no objects (the span without RDMA state);
 *   QPS       QPS QPs, connected in pairs to each other, one CQ;
 *   MR        one MR over MR_MIB of guest RAM;
 *   both      the two together, which the target compares with the anchor.
 * After each move with QPs, one pair exchanges a SEND: the move is checked,
 * not only timed.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdma-peer.h"
#include "util.h"
#include "vuf-rdma.h"

#define MAX_RUNS 15
#define PAIR_LOG2 2 /* 4 slots a ring: the state's size, not depth, matters */

enum shape { ANCHOR, QPS_ONLY, MR_ONLY, BOTH, NSHAPES };
static const char *const shape_name[NSHAPES] = { "anchor: no objects", "QPs", "MR", "QPs + MR" };

struct config {
	const char *sock_a, *sock_b;
	unsigned int qps;
	uint64_t mr_bytes;
};

/* The two back ends: stopped on every way out, so that none keeps its
 * function from the next program. */
static pid_t daemons[2];

static void stop_daemons(void)
{
	for (int i = 0; i < 2; i++)
		if (daemons[i] > 0) {
			kill(daemons[i], SIGTERM);
			waitpid(daemons[i], NULL, 0);
			daemons[i] = 0;
		}
}

static void die(const char *what, int r)
{
	fprintf(stderr, "rdma-move-bench: %s: %s\n", what, strerror(r < 0 ? -r : r));
	exit(1);
}

static pid_t spawn_daemon(const char *bin, const char *dev, const char *sock)
{
	pid_t pid = fork();

	if (pid == 0) {
		execl(bin, bin, "--device", "rdma", "--ibdev", dev, "--socket-path", sock,
		      "--max-pinned-mib", "8192", "--max-qps", "8192", "--max-cqs", "64",
		      (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* QPs connected in pairs, on one CQ; returns the first pair in *first. */
static void make_pairs(struct rp_guest *p, unsigned int n, struct vgd_cq *cq,
		       struct vgd_qp first[2])
{
	const struct vgd_qp_caps caps = { .sq_log2 = PAIR_LOG2, .rq_log2 = PAIR_LOG2,
					  .max_send_sge = 1, .max_recv_sge = 1 };
	int r = vgd_create_cq(p->g, 12, cq);

	for (unsigned int i = 0; !r && i < n / 2; i++) {
		struct vgd_qp q[2];

		r = vgd_create_qp(p->g, p->pd, cq, cq, &caps, &q[0]);
		if (!r)
			r = vgd_create_qp(p->g, p->pd, cq, cq, &caps, &q[1]);
		if (!r)
			r = vgd_connect_qp(p->g, &q[0], q[1].qpn, p->gid, p->gid_index, 7);
		if (!r)
			r = vgd_connect_qp(p->g, &q[1], q[0].qpn, p->gid, p->gid_index, 7);
		if (!r && i == 0)
			memcpy(first, q, sizeof(q));
	}
	if (r)
		die("QP pairs", r);
}

/* One SEND across the first pair after the move, byte-checked. */
static void check_pair(struct rp_guest *p, struct vgd_cq *cq, struct vgd_qp q[2])
{
	static const char msg[] = "after the move";
	char got[sizeof(msg)] = { 0 };
	struct vrdma_cqe c[2];
	int n = 0, r;

	r = vgd_buf_write(p->g, &p->buf, 0, msg, sizeof(msg));
	if (!r)
		r = vgd_post_recv(p->g, &q[1], &(struct vgd_recv){
			.wr_id = 2, .num_sge = 1, .sge = { rp_guest_sge(p, 4096, sizeof(msg)) } }, 1,
			true);
	if (!r)
		r = vgd_post_send(p->g, &q[0], &(struct vgd_send){
			.wr_id = 1, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED,
			.num_sge = 1, .sge = { rp_guest_sge(p, 0, sizeof(msg)) } }, 1, true);
	if (!r)
		r = vgd_wait_cq(p->g, cq, c, 2, RP_TIMEOUT_MS, &n);
	if (!r)
		r = vgd_buf_read(p->g, &p->buf, 4096, got, sizeof(got));
	if (r || c[0].status || c[1].status || memcmp(got, msg, sizeof(msg)))
		die("a SEND across a moved pair", r ? r : EIO);
}

/* One move of a guest of this shape; the span in ms, and the state's size. */
static double one_move(const struct config *cfg, enum shape s, size_t *ret_state)
{
	struct vgd_opts o = { .ram_bytes = cfg->mr_bytes + (128ull << 20), .log_all = true };
	struct vrdma_device_attr attr;
	struct rp_guest p;
	struct vgd_cq cq;
	struct vgd_qp pair[2];
	struct vgd_buf big;
	struct vgd_mr mr;
	uint64_t t0, t1;
	int r;

	if ((r = rp_guest_open_opts(cfg->sock_a, &o, &p)))
		die("guest", r);
	if (s == ANCHOR) {
		/* Nothing of the guest's on the device: what rp_guest made goes. */
		vgd_destroy(p.g, VRDMA_CMD_DEREG_MR, p.mr.handle);
		vgd_destroy(p.g, VRDMA_CMD_DESTROY_QP, p.qp.handle);
		vgd_destroy(p.g, VRDMA_CMD_DESTROY_CQ, p.cq.handle);
		vgd_destroy(p.g, VRDMA_CMD_DESTROY_PD, p.pd);
	}
	if (s == QPS_ONLY || s == BOTH)
		make_pairs(&p, cfg->qps, &cq, pair);
	if (s == MR_ONLY || s == BOTH) {
		r = vgd_buf_alloc(p.g, cfg->mr_bytes, false, &big);
		if (!r)
			r = vgd_reg_mr(p.g, p.pd, &big, 0, cfg->mr_bytes, VRDMA_ACCESS_ALL, &mr);
		if (r)
			die("the big MR", r);
	}
	t0 = monotonic_ns();
	r = vgd_migrate(p.g, cfg->sock_b, ret_state);
	if (!r)
		r = vgd_cmd(p.g, VRDMA_CMD_QUERY_DEVICE, NULL, 0, &attr, sizeof(attr));
	t1 = monotonic_ns();
	if (r)
		die("the move", r);
	if (s == QPS_ONLY || s == BOTH)
		check_pair(&p, &cq, pair);
	rp_guest_close(&p);
	return (double)(t1 - t0) / 1e6;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	double ms[NSHAPES][MAX_RUNS], med[NSHAPES];
	size_t state[NSHAPES] = { 0 };
	char sock_a[512], sock_b[512];
	struct config cfg = { sock_a, sock_b, 0, 0 };
	int runs;

	if (argc != 8) {
		fprintf(stderr, "usage: rdma-move-bench VRDMA-VHOST DEV_A DEV_B SOCKET_DIR QPS "
				"MR_MIB RUNS\n");
		return 2;
	}
	cfg.qps = (unsigned int)strtoul(argv[5], NULL, 10) & ~1u;
	cfg.mr_bytes = strtoull(argv[6], NULL, 10) << 20;
	runs = atoi(argv[7]);
	if (runs < 1 || runs > MAX_RUNS || cfg.qps < 2 || !cfg.mr_bytes) {
		fprintf(stderr, "rdma-move-bench: QPS >= 2, MR_MIB >= 1, RUNS 1..%d\n", MAX_RUNS);
		return 2;
	}
	setrlimit(RLIMIT_MEMLOCK, &(struct rlimit){ RLIM_INFINITY, RLIM_INFINITY });
	snprintf(sock_a, sizeof(sock_a), "%s/move-a.sock", argv[4]);
	snprintf(sock_b, sizeof(sock_b), "%s/move-b.sock", argv[4]);
	daemons[0] = spawn_daemon(argv[1], argv[2], sock_a);
	daemons[1] = spawn_daemon(argv[1], argv[3], sock_b);
	atexit(stop_daemons);
	printf("move of a harness guest %s -> %s: stop (log on), state out, state in and "
	       "checked, queues started, first command answered\n", argv[2], argv[3]);
	printf("back ends: %s --device rdma --ibdev DEV --max-pinned-mib 8192 --max-qps 8192 "
	       "--max-cqs 64\n", argv[1]);
	printf("%u QPs in %u connected pairs, one MR of %s MiB; median of %d, order rotating\n",
	       cfg.qps, cfg.qps / 2, argv[6], runs);
	for (int i = 0; i < runs; i++)
		for (int k = 0; k < NSHAPES; k++) {
			enum shape s = (enum shape)((k + i) % NSHAPES);

			ms[s][i] = one_move(&cfg, s, &state[s]);
		}
	printf("| guest | device's part of the downtime (ms) | state (bytes) | vs anchor |\n");
	printf("| --- | --- | --- | --- |\n");
	for (int s = 0; s < NSHAPES; s++) {
		qsort(ms[s], (size_t)runs, sizeof(double), by_value);
		med[s] = ms[s][runs / 2];
		printf("| %s | %.1f | %zu | %.2fx |\n", shape_name[s], med[s], state[s],
		       med[s] / med[ANCHOR]);
	}
	printf("added per 100 QPs: %.1f ms; per GiB of MR: %.1f ms\n",
	       (med[QPS_ONLY] - med[ANCHOR]) * 100.0 / cfg.qps,
	       (med[MR_ONLY] - med[ANCHOR]) * (double)(1ull << 30) / (double)cfg.mr_bytes);
	return 0;
}

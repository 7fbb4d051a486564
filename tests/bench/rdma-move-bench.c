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
 *   both      the two together, which the target compares with the anchor;
 *   peers     QPS QPs each connected to a QP of a second guest, on DEV_B's
 *             back end: the peer protocol holds them at the stop (over TLS
 *             from DEV_A's back end) and points them at the moved QPs after
 *             it (docs/migration-rdma.md, "Peers elsewhere"); meanwhile the
 *             other guest writes to the moving one without a break, and
 *             the longest gap between its completions is the pause it
 *             sees.
 * After each move with QPs, one pair exchanges a SEND: the move is checked,
 * not only timed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>

#include "rdma-peer.h"
#include "util.h"
#include "vuf-rdma.h"

#define MAX_RUNS 15
#define PAIR_LOG2 2 /* 4 slots a ring: the state's size, not depth, matters */

enum shape { ANCHOR, QPS_ONLY, MR_ONLY, BOTH, PEERS, NSHAPES };
static const char *const shape_name[NSHAPES] = {
	"anchor: no objects", "QPs", "MR", "QPs + MR", "QPs to another guest's QPs",
};
#define PEER_PORT "4794"

struct config {
	const char *sock_a, *sock_b;
	const char *psk;
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

static pid_t spawn_daemon(const char *bin, const char *dev, const char *sock, const char *psk)
{
	pid_t pid = fork();

	if (pid == 0) {
		execl(bin, bin, "--device", "rdma", "--ibdev", dev, "--socket-path", sock,
		      "--max-pinned-mib", "8192", "--max-qps", "8192", "--max-cqs", "64",
		      "--rdma-peer-port", PEER_PORT, "--rdma-peer-psk", psk, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* The peer protocol's key, fresh for this run, readable by its owner only. */
static void write_psk(const char *path)
{
	g_autoptr(GString) line = g_string_new("vrdma-bench:");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	for (int i = 0; i < 32; i++)
		g_string_append_printf(line, "%02x", (uint8_t)g_random_int());
	g_string_append_c(line, '\n');
	if (fd < 0 || write(fd, line->str, line->len) != (ssize_t)line->len)
		die("the PSK file", errno);
	close(fd);
}

/* One SEND from a QP of one guest to a QP of the same or another guest,
 * after the move, byte-checked. */
static void check_link(struct rp_guest *from, struct vgd_cq *from_cq, struct vgd_qp *fq,
		       struct rp_guest *to, struct vgd_cq *to_cq, struct vgd_qp *tq)
{
	static const char msg[] = "after the move";
	char got[sizeof(msg)] = { 0 };
	struct vrdma_cqe c[2];
	int n = 0, m = 0, r;

	r = vgd_buf_write(from->g, &from->buf, 0, msg, sizeof(msg));
	if (!r)
		r = vgd_post_recv(to->g, tq, &(struct vgd_recv){
			.wr_id = 2, .num_sge = 1, .sge = { rp_guest_sge(to, 4096, sizeof(msg)) } },
			1, true);
	if (!r)
		r = vgd_post_send(from->g, fq, &(struct vgd_send){
			.wr_id = 1, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED,
			.num_sge = 1, .sge = { rp_guest_sge(from, 0, sizeof(msg)) } }, 1, true);
	if (!r && from_cq == to_cq)
		r = vgd_wait_cq(from->g, from_cq, c, 2, RP_TIMEOUT_MS, &n);
	else if (!r)
		r = vgd_wait_cq(from->g, from_cq, c, 1, RP_TIMEOUT_MS, &n) ||
		    vgd_wait_cq(to->g, to_cq, c + 1, 1, RP_TIMEOUT_MS, &m) ? EIO : 0;
	if (!r)
		r = vgd_buf_read(to->g, &to->buf, 4096, got, sizeof(got));
	if (r || c[0].status || c[1].status || memcmp(got, msg, sizeof(msg)))
		die("a SEND across a moved connection", r ? r : EIO);
}

/* n connections, each from a QP of guest a (on CQ acq) to a QP of guest b
 * (on bcq), which may be a itself; the first in first[]. */
static void make_links(struct rp_guest *a, struct vgd_cq *acq, struct rp_guest *b,
		       struct vgd_cq *bcq, unsigned int n, struct vgd_qp first[2])
{
	const struct vgd_qp_caps caps = { .sq_log2 = PAIR_LOG2, .rq_log2 = PAIR_LOG2,
					  .max_send_sge = 1, .max_recv_sge = 1 };
	int r = vgd_create_cq(a->g, 12, acq);

	if (!r && bcq != acq)
		r = vgd_create_cq(b->g, 12, bcq);
	for (unsigned int i = 0; !r && i < n; i++) {
		struct vgd_qp q[2];

		r = vgd_create_qp(a->g, a->pd, acq, acq, &caps, &q[0]);
		if (!r)
			r = vgd_create_qp(b->g, b->pd, bcq, bcq, &caps, &q[1]);
		if (!r)
			r = vgd_connect_qp(a->g, &q[0], q[1].qpn, b->gid, a->gid_index, 7);
		if (!r)
			r = vgd_connect_qp(b->g, &q[1], q[0].qpn, a->gid, b->gid_index, 7);
		if (!r && i == 0)
			memcpy(first, q, sizeof(q));
	}
	if (r)
		die("connected QPs", r);
}

/* The peer guest while the other moves: RDMA WRITEs into the moving
 * guest's buffer, one after another; the longest gap between two
 * completions is the pause the peer sees. */
struct traffic {
	struct rp_guest *peer;
	struct vgd_cq *cq;
	struct vgd_qp *qp;
	uint64_t remote_addr;
	uint32_t rkey;
	atomic_bool stop;
	uint64_t writes, errors;
	double longest_gap_ms;
};

static void *peer_traffic(void *arg)
{
	struct traffic *t = arg;
	uint64_t last = monotonic_ns();

	while (!atomic_load(&t->stop)) {
		struct vrdma_cqe c;
		int n = 0;
		int r = vgd_post_send(t->peer->g, t->qp, &(struct vgd_send){
			.wr_id = t->writes, .opcode = VRDMA_WR_RDMA_WRITE,
			.flags = VRDMA_SEND_SIGNALED, .remote_addr = t->remote_addr,
			.rkey = t->rkey, .num_sge = 1, .sge = { rp_guest_sge(t->peer, 8192, 64) } },
			1, true);
		uint64_t now;

		if (!r)
			r = vgd_wait_cq(t->peer->g, t->cq, &c, 1, 10000, &n);
		if (r || n != 1 || c.status) {
			t->errors++;
			break;
		}
		now = monotonic_ns();
		if ((double)(now - last) / 1e6 > t->longest_gap_ms)
			t->longest_gap_ms = (double)(now - last) / 1e6;
		last = now;
		t->writes++;
	}
	return NULL;
}

/* One move of a guest of this shape; the span in ms, and the state's size. */
static double one_move(const struct config *cfg, enum shape s, size_t *ret_state,
		       double *ret_gap_ms)
{
	struct vgd_opts o = { .ram_bytes = cfg->mr_bytes + (128ull << 20), .log_all = true };
	struct vrdma_device_attr attr;
	struct rp_guest p, peer;
	struct vgd_cq cq, link_cq[2];
	struct vgd_qp pair[2], link[2];
	struct vgd_buf big;
	struct vgd_mr mr;
	struct traffic t = { 0 };
	pthread_t thread;
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
		make_links(&p, &cq, &p, &cq, cfg->qps / 2, pair);
	if (s == PEERS) {
		if ((r = rp_guest_open(cfg->sock_b, &peer)))
			die("the peer guest", r);
		make_links(&p, &link_cq[0], &peer, &link_cq[1], cfg->qps, link);
		t = (struct traffic){ .peer = &peer, .cq = &link_cq[1], .qp = &link[1],
				      .remote_addr = p.mr.iova + 0x20000, .rkey = p.mr.rkey };
		if (pthread_create(&thread, NULL, peer_traffic, &t))
			die("the peer's traffic", EAGAIN);
	}
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
	if (s == PEERS) {
		atomic_store(&t.stop, true);
		pthread_join(thread, NULL);
		if (t.errors || !t.writes)
			die("the peer's writes across the move", EIO);
		*ret_gap_ms = t.longest_gap_ms;
	}
	if (s == QPS_ONLY || s == BOTH)
		check_link(&p, &cq, &pair[0], &p, &cq, &pair[1]);
	if (s == PEERS) {
		check_link(&p, &link_cq[0], &link[0], &peer, &link_cq[1], &link[1]);
		check_link(&peer, &link_cq[1], &link[1], &p, &link_cq[0], &link[0]);
		rp_guest_close(&peer);
	}
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
	double ms[NSHAPES][MAX_RUNS], med[NSHAPES], gap[MAX_RUNS];
	size_t state[NSHAPES] = { 0 };
	char sock_a[512], sock_b[512];
	char psk[512];
	struct config cfg = { sock_a, sock_b, psk, 0, 0 };
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
	snprintf(psk, sizeof(psk), "%s/peer.psk", argv[4]);
	write_psk(psk);
	daemons[0] = spawn_daemon(argv[1], argv[2], sock_a, psk);
	daemons[1] = spawn_daemon(argv[1], argv[3], sock_b, psk);
	atexit(stop_daemons);
	printf("move of a harness guest %s -> %s: stop (log on), state out, state in and "
	       "checked, queues started, first command answered\n", argv[2], argv[3]);
	printf("back ends: %s --device rdma --ibdev DEV --max-pinned-mib 8192 --max-qps 8192 "
	       "--max-cqs 64 --rdma-peer-port %s --rdma-peer-psk FILE\n", argv[1], PEER_PORT);
	printf("%u QPs in %u connected pairs, one MR of %s MiB, %u QPs to another guest on "
	       "%s's back end; median of %d, order rotating\n",
	       cfg.qps, cfg.qps / 2, argv[6], cfg.qps, argv[3], runs);
	for (int i = 0; i < runs; i++)
		for (int k = 0; k < NSHAPES; k++) {
			enum shape s = (enum shape)((k + i) % NSHAPES);

			ms[s][i] = one_move(&cfg, s, &state[s], &gap[i]);
		}
	printf("| guest | device's part of the downtime (ms) | state (bytes) | vs anchor |\n");
	printf("| --- | --- | --- | --- |\n");
	for (int s = 0; s < NSHAPES; s++) {
		qsort(ms[s], (size_t)runs, sizeof(double), by_value);
		med[s] = ms[s][runs / 2];
		printf("| %s | %.1f | %zu | %.2fx |\n", shape_name[s], med[s], state[s],
		       med[s] / med[ANCHOR]);
	}
	qsort(gap, (size_t)runs, sizeof(double), by_value);
	printf("the pause the other guest saw (longest gap between its RDMA WRITE "
	       "completions to the moving guest): %.1f ms, against %.1f ms of the anchor's "
	       "downtime\n", gap[runs / 2], med[ANCHOR]);
	printf("added per 100 QPs: %.1f ms; per GiB of MR: %.1f ms; per 100 QPs to another "
	       "guest: %.1f ms\n",
	       (med[QPS_ONLY] - med[ANCHOR]) * 100.0 / cfg.qps,
	       (med[MR_ONLY] - med[ANCHOR]) * (double)(1ull << 30) / (double)cfg.mr_bytes,
	       (med[PEERS] - med[ANCHOR]) * 100.0 / cfg.qps);
	return 0;
}

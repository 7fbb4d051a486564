/* SPDX-License-Identifier: MIT */
/*
 * rdma-bench: the paravirtual RDMA device against native verbs on the same
 * host devices, in one process, with the same loop for both sides:
 *
 *   rdma-bench VRDMA-VHOST DEV_A DEV_B SOCKET_DIR
 *
 * A harness guest on `vrdma-vhost --device rdma --ibdev DEV_A` and a native
 * QP on DEV_A each talk to a native QP on DEV_B.  Printed, one line each:
 * WRITE and SEND bandwidth (64 KiB and 4 KiB), 8-byte WRITE ping-pong
 * latency, MR registration time per GiB, QPs created per second.
 */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdma-peer.h"
#include "util.h"
#include "vuf-rdma.h"

#define BUF_SIZE (4u << 20)
#define MAX_MSG 65536u
#define TUNED_POLL_US "100"
#define TUNED_POLL_ARGS "--rdma-poll-us", TUNED_POLL_US
#define WINDOW 64u
#define BATCH 16u
/* Scattered pages are one mapping each: 128 MiB stays well inside the
 * kernel's default vm.max_map_count (65530) of the back end. */
#define REG_SIZE (256ull << 20)
#define NQPS 1024u

static void die(const char *what, int r)
{
	fprintf(stderr, "rdma-bench: %s: %s (%d)\n", what, r > 0 ? "device status" : strerror(-r), r);
	exit(1);
}

/* ---- the native endpoints (tests/vhost/rdma-peer.c) ---- */


static void nat_open(struct rp_native *n, const char *dev)
{
	int r = rp_native_open_sized(dev, BUF_SIZE, 255, n);

	if (r)
		die(dev, r);
}

static void nat_connect(struct rp_native *n, uint32_t qpn, const uint8_t gid[16])
{
	int r = rp_native_connect(n, qpn, gid, 7);

	if (r)
		die("native connect", r);
}

static void nat_post_recvs(struct rp_native *n, unsigned int count, uint32_t size)
{
	for (unsigned int i = 0; i < count; i++) {
		struct ibv_sge s = { (uintptr_t)n->buf, size, n->mr->lkey };
		struct ibv_recv_wr w = { .sg_list = &s, .num_sge = 1 }, *bad;

		if (ibv_post_recv(n->qp, &w, &bad))
			die("native post_recv", -errno);
	}
}

/* Receives on the native target are consumed and re-posted, always of
 * the largest message size: a later case may send bigger messages. */
static void nat_serve_recvs(struct rp_native *n)
{
	struct ibv_wc wc[32];
	int got = ibv_poll_cq(n->cq, 32, wc);

	for (int i = 0; i < got; i++)
		if (wc[i].status)
			die("native receive", -(int)wc[i].status);
	if (got > 0)
		nat_post_recvs(n, (unsigned int)got, MAX_MSG);
}

/* ---- the two senders under test ---- */

struct sender {
	const char *name;
	/* Posts n WRs of size bytes, the last one signaled. */
	void (*post)(struct sender *s, uint32_t opcode, uint32_t size, unsigned int n,
		     uint64_t remote, uint32_t rkey);
	/* Completions reaped now (each stands for a batch). */
	int (*reap)(struct sender *s);
	struct rp_native *nat;  /* the native sender */
	struct vgd *g;    /* or the guest */
	struct vgd_qp *qp;
	struct vgd_cq *cq;
	struct vgd_mr mr;
	struct vgd_buf buf;
};

static void nat_post(struct sender *s, uint32_t opcode, uint32_t size, unsigned int n,
		     uint64_t remote, uint32_t rkey)
{
	struct ibv_send_wr w[BATCH], *bad;
	struct ibv_sge sge = { (uintptr_t)s->nat->buf, size, s->nat->mr->lkey };

	for (unsigned int i = 0; i < n; i++)
		w[i] = (struct ibv_send_wr){
			.sg_list = &sge, .num_sge = 1, .opcode = (enum ibv_wr_opcode)opcode,
			.send_flags = i + 1 == n ? IBV_SEND_SIGNALED : 0,
			.wr.rdma = { remote, rkey }, .next = i + 1 < n ? &w[i + 1] : NULL,
		};
	if (ibv_post_send(s->nat->qp, w, &bad))
		die("native post_send", -errno);
}

static int nat_reap(struct sender *s)
{
	struct ibv_wc wc[16];
	int got = ibv_poll_cq(s->nat->cq, 16, wc);

	for (int i = 0; i < got; i++)
		if (wc[i].status)
			die("native send completion", -(int)wc[i].status);
	return got;
}

static void guest_post(struct sender *s, uint32_t opcode, uint32_t size, unsigned int n,
		       uint64_t remote, uint32_t rkey)
{
	struct vgd_send w[BATCH];

	for (unsigned int i = 0; i < n; i++)
		w[i] = (struct vgd_send){
			.opcode = opcode, .flags = i + 1 == n ? VRDMA_SEND_SIGNALED : 0,
			.remote_addr = remote, .rkey = rkey, .num_sge = 1,
			.sge = { { s->mr.iova, size, s->mr.lkey } },
		};
	if (vgd_post_send(s->g, s->qp, w, n, true))
		die("guest post_send", -EIO);
}

static int guest_reap(struct sender *s)
{
	struct vrdma_cqe c[16];
	int got = vgd_poll_cq(s->g, s->cq, c, 16);

	for (int i = 0; i < got; i++)
		if (c[i].status)
			die("guest send completion", -(int)c[i].status);
	return got;
}

/* MB/s (10^6) of count messages of size, WINDOW in flight in BATCHes. */
static double bandwidth(struct sender *s, struct rp_native *target, uint32_t opcode, uint32_t size,
			unsigned int count)
{
	unsigned int posted = 0, done = 0;
	uint64_t t0 = monotonic_ns();

	while (done < count) {
		while (posted < count && posted - done + BATCH <= WINDOW) {
			s->post(s, opcode, size, BATCH, (uintptr_t)target->buf, target->mr->rkey);
			posted += BATCH;
		}
		done += (unsigned int)s->reap(s) * BATCH;
		if (opcode == IBV_WR_SEND)
			nat_serve_recvs(target);
	}
	return (double)count * size / ((double)(monotonic_ns() - t0) / 1e3);
}

/* Half the round trip of an 8-byte WRITE ping-pong, in microseconds. */
static double latency(struct sender *s, struct rp_native *target, volatile uint64_t *mine,
		      uint64_t my_addr, uint32_t my_rkey, unsigned int iters)
{
	volatile uint64_t *theirs = (volatile uint64_t *)target->buf;
	uint64_t t0 = monotonic_ns();

	for (uint64_t seq = 1; seq <= iters; seq++) {
		struct ibv_sge sge = { (uintptr_t)target->buf + 64, 8, target->mr->lkey };
		struct ibv_send_wr w = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
					 .wr.rdma = { my_addr, my_rkey } }, *bad;
		struct ibv_wc wc;

		/* The sender's bytes hold seq; it writes them to the target. */
		if (s->nat)
			memcpy(s->nat->buf, &seq, 8);
		else
			vgd_buf_write(s->g, &s->buf, 0, &seq, 8);
		s->post(s, IBV_WR_RDMA_WRITE, 8, 1, (uintptr_t)target->buf, target->mr->rkey);
		while (*theirs != seq)
			;
		memcpy(target->buf + 64, &seq, 8);
		if (ibv_post_send(target->qp, &w, &bad))
			die("pong", -errno);
		while (*mine != seq)
			;
		while (!s->reap(s))
			;
		while (ibv_poll_cq(target->cq, 1, &wc) == 0)
			;
	}
	return (double)(monotonic_ns() - t0) / 1e3 / iters / 2;
}

/* ---- registration and QP creation ---- */

/* huge: the buffer on huge pages, as the guest's RAM is in the huge rows. */
static double native_reg_s_per_gib(struct rp_native *n, uint64_t size, bool huge)
{
	int fd = memfd_create("bench-mr", MFD_CLOEXEC | (huge ? MFD_HUGETLB : 0));
	uint8_t *p;
	uint64_t t0;
	struct ibv_mr *mr;
	double s;

	if (fd < 0 || ftruncate(fd, (off_t)size))
		die("memfd", -errno);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED)
		die("mmap", -errno);
	t0 = monotonic_ns();
	mr = ibv_reg_mr(n->pd, p, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	s = (double)(monotonic_ns() - t0) / 1e9;
	if (!mr)
		die("native reg_mr", -errno);
	ibv_dereg_mr(mr);
	munmap(p, size);
	close(fd);
	return s * (double)(1ull << 30) / size;
}

static double guest_reg_s_per_gib(struct vgd *g, uint32_t pd, const struct vgd_buf *b,
				  uint64_t size)
{
	struct vgd_mr mr;
	uint64_t t0 = monotonic_ns();
	double s;
	int r;

	/* The page size a guest driver would choose (2 MiB where it fits). */
	r = vgd_reg_mr(g, pd, b, 0, size, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE, &mr);
	s = (double)(monotonic_ns() - t0) / 1e9;
	if (r)
		die("guest reg_mr", r);
	vgd_destroy(g, VRDMA_CMD_DEREG_MR, mr.handle);
	return s * (double)(1ull << 30) / (double)size;
}

static double native_qps_per_s(struct rp_native *n)
{
	struct ibv_qp **qps = calloc(NQPS, sizeof(*qps));
	uint64_t t0 = monotonic_ns();
	double rate;

	for (unsigned int i = 0; i < NQPS; i++) {
		qps[i] = ibv_create_qp(n->pd, &(struct ibv_qp_init_attr){
			.send_cq = n->cq, .recv_cq = n->cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 3, .max_recv_wr = 3, .max_send_sge = 1,
				 .max_recv_sge = 1 } });
		if (!qps[i])
			die("native create_qp", -errno);
	}
	rate = NQPS / ((double)(monotonic_ns() - t0) / 1e9);
	for (unsigned int i = 0; i < NQPS; i++)
		ibv_destroy_qp(qps[i]);
	free(qps);
	return rate;
}

static double guest_qps_per_s(struct vgd *g, uint32_t pd, struct vgd_cq *cq)
{
	struct vgd_qp_caps caps = { .sq_log2 = 2, .rq_log2 = 2, .max_send_sge = 1,
				    .max_recv_sge = 1 };
	struct vgd_qp *qps = calloc(NQPS, sizeof(*qps));
	uint64_t t0 = monotonic_ns();
	double rate;

	for (unsigned int i = 0; i < NQPS; i++) {
		int r = vgd_create_qp(g, pd, cq, cq, &caps, &qps[i]);

		if (r)
			die("guest create_qp (the 1024-QP target)", r);
	}
	rate = NQPS / ((double)(monotonic_ns() - t0) / 1e9);
	for (unsigned int i = 0; i < NQPS; i++)
		vgd_destroy(g, VRDMA_CMD_DESTROY_QP, qps[i].handle);
	free(qps);
	return rate;
}

/* ---- the rows ---- */

static void row(const char *what, const char *unit, double dev, double nat, bool lower_better)
{
	printf("%-30s %10.2f %10.2f %-6s ratio %.2f%s\n", what, dev, nat, unit, dev / nat,
	       lower_better ? " (lower is better)" : "");
}

static int by_value(const void *a, const void *b);

/* LAT_RUNS rounds of 1000 ping-pongs each way, alternating, medians. */
#define LAT_RUNS 5
static void latency_row(struct sender *guest, struct sender *native, struct rp_native *nb,
			struct rp_native *nb2, struct rp_native *na)
{
	/* Pings go from offset 0, pongs land at offset 64. */
	volatile uint64_t *gmine = vuf_mem_ptr(guest->g->mem, guest->buf.pages[0] + 64, 8);
	double dl[LAT_RUNS], nl[LAT_RUNS];

	for (int i = 0; i < LAT_RUNS; i++) {
		if (i % 2)
			nl[i] = latency(native, nb2, (volatile uint64_t *)(na->buf + 64),
					(uintptr_t)na->buf + 64, na->mr->rkey, 1000);
		dl[i] = latency(guest, nb, gmine, guest->mr.iova + 64, guest->mr.rkey, 1000);
		if (i % 2 == 0)
			nl[i] = latency(native, nb2, (volatile uint64_t *)(na->buf + 64),
					(uintptr_t)na->buf + 64, na->mr->rkey, 1000);
	}
	qsort(dl, LAT_RUNS, sizeof(dl[0]), by_value);
	qsort(nl, LAT_RUNS, sizeof(nl[0]), by_value);
	row("WRITE 8 B latency", "usec", dl[LAT_RUNS / 2], nl[LAT_RUNS / 2], true);
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * REG_RUNS registrations each way, alternating, medians compared (one
 * registration of 128 MiB is a few ms: TCG noise is of that order).
 * Layouts of the guest buffer: one contiguous run (the driver registers it
 * with 2 MiB pages), 2 MiB runs in reverse order (a guest buffer on
 * transparent huge pages; 2 MiB pages again), and 4 KiB pages in reverse
 * order (the worst case: 4 KiB pages, one host mapping per page).
 */
#define REG_RUNS 5
static void registration_rows(struct vgd *g, uint32_t pd, struct rp_native *na, bool huge)
{
	static const struct {
		const char *name;
		uint64_t run, size;
	} layouts[] = {
		{ "MR registration, contiguous", REG_SIZE, REG_SIZE },
		{ "MR registration, 2 MiB runs", 2ull << 20, REG_SIZE },
		/* Smaller: one host mapping per page, and a process has at most
		 * vm.max_map_count (65530) of them. */
		{ "MR registration, 4 KiB pages", 4096, 64ull << 20 },
	};

	/* On huge pages a 4 KiB page list does not exist. */
	for (size_t l = 0; l < ARRAY_SIZE(layouts) - (huge ? 1 : 0); l++) {
		double dev[REG_RUNS], nat[REG_RUNS];
		char name[80];
		struct vgd_buf b;
		uint64_t size = layouts[l].size;
		int r = vgd_buf_alloc_runs(g, size, layouts[l].run, &b);

		if (r)
			die("guest buffer", r);
		for (int i = 0; i < REG_RUNS; i++) {
			if (i % 2) {
				nat[i] = native_reg_s_per_gib(na, size, huge);
				dev[i] = guest_reg_s_per_gib(g, pd, &b, size);
			} else {
				dev[i] = guest_reg_s_per_gib(g, pd, &b, size);
				nat[i] = native_reg_s_per_gib(na, size, huge);
			}
		}
		vgd_buf_free(&b);
		qsort(dev, REG_RUNS, sizeof(dev[0]), by_value);
		qsort(nat, REG_RUNS, sizeof(nat[0]), by_value);
		snprintf(name, sizeof(name), "%s%s", layouts[l].name, huge ? ", huge" : "");
		row(name, "s/GiB", dev[REG_RUNS / 2], nat[REG_RUNS / 2], true);
	}
}

/*
 * The same registrations with guest RAM on huge pages (memfd MFD_HUGETLB),
 * against native ibv_reg_mr of a huge-page memfd: a second connection to
 * the same back end.  Needs vm.nr_hugepages (rdma-bench-guest sets it).
 */
#define HUGE_RAM (640ull << 20)
static void huge_registration_rows(const char *sock, struct rp_native *na)
{
	struct vgd_opts o = { .ram_bytes = HUGE_RAM, .huge_pages = true };
	struct vgd *g;
	uint32_t pd;
	int r = vgd_open(sock, &o, &g);

	if (r) {
		printf("%-30s skipped: no guest RAM on huge pages (%s; see vm.nr_hugepages)\n",
		       "MR registration, huge", strerror(-r));
		return;
	}
	if ((r = vgd_create_pd(g, &pd)))
		die("huge guest PD", r);
	registration_rows(g, pd, na, true);
	vgd_close(g);
}

/* ---- main ---- */

/* tuned: the back end's latency and registration options, on. */
static pid_t spawn_daemon(const char *bin, const char *dev, const char *sock, bool tuned)
{
	pid_t pid = fork();

	if (pid == 0 && tuned)
		execl(bin, bin, "--device", "rdma", "--ibdev", dev, "--socket-path", sock,
		      "--max-pinned-mib", "2048", TUNED_POLL_ARGS, "--rdma-prefault", (char *)NULL);
	if (pid == 0) {
		execl(bin, bin, "--device", "rdma", "--ibdev", dev, "--socket-path", sock,
		      "--max-pinned-mib", "2048", (char *)NULL);
		_exit(127);
	}
	return pid;
}

#define BW_RUNS 4
static const struct {
	const char *name;
	uint32_t op;
	uint32_t size;
	unsigned int count;
} cases[] = {
	{ "WRITE 64 KiB bandwidth", IBV_WR_RDMA_WRITE, 65536, 1024 },
	{ "WRITE 4 KiB bandwidth", IBV_WR_RDMA_WRITE, 4096, 4096 },
	{ "SEND 64 KiB bandwidth", IBV_WR_SEND, 65536, 1024 },
	{ "SEND 4 KiB bandwidth", IBV_WR_SEND, 4096, 4096 },
};

int main(int argc, char **argv)
{
	struct vgd_opts o = { .ram_bytes = 1ull << 30 };
	struct rp_native na = { 0 }, nb = { 0 }, nb2 = { 0 };
	struct vgd_cq cq, cq2;
	struct vgd_qp qp;
	struct sender guest = { .name = "vrdma", .post = guest_post, .reap = guest_reap };
	struct sender native = { .name = "native", .post = nat_post, .reap = nat_reap };
	struct vgd_qp_caps caps = { .sq_log2 = 8, .rq_log2 = 8, .max_send_sge = 1,
				    .max_recv_sge = 1, .max_inline = 64 };
	struct vrdma_gid_resp gid;
	bool tuned;
	char sock[512];
	uint32_t pd;
	pid_t daemon;
	int r;

	if (argc != 6 || (strcmp(argv[5], "default") && strcmp(argv[5], "tuned"))) {
		fprintf(stderr, "usage: rdma-bench VRDMA-VHOST DEV_A DEV_B SOCKET_DIR default|tuned\n");
		return 2;
	}
	/* tuned: latency and registration again, with the back end's options for them. */
	tuned = !strcmp(argv[5], "tuned");
	setrlimit(RLIMIT_MEMLOCK, &(struct rlimit){ RLIM_INFINITY, RLIM_INFINITY });
	snprintf(sock, sizeof(sock), "%s/rdma-bench.sock", argv[4]);
	daemon = spawn_daemon(argv[1], argv[2], sock, tuned);
	r = -ENOENT;
	for (int i = 0; i < 200 && r; i++, usleep(50000))
		r = vgd_open(sock, &o, &guest.g);
	if (r)
		die("connect to vrdma-vhost", r);
	nat_open(&na, argv[2]);
	nat_open(&nb, argv[3]);
	nat_open(&nb2, argv[3]);
	native.nat = &na;
	if ((r = vgd_create_pd(guest.g, &pd)) || (r = vgd_create_cq(guest.g, 10, &cq)) ||
	    (r = vgd_create_cq(guest.g, 4, &cq2)) ||
	    (r = vgd_create_qp(guest.g, pd, &cq, &cq2, &caps, &qp)) ||
	    (r = vgd_buf_alloc(guest.g, BUF_SIZE, true, &guest.buf)) ||
	    (r = vgd_reg_mr(guest.g, pd, &guest.buf, 0, BUF_SIZE, VRDMA_ACCESS_ALL, &guest.mr)))
		die("guest setup", r);
	guest.qp = &qp;
	guest.cq = &cq;
	for (uint16_t i = 0; i < 64 && !vgd_query_gid(guest.g, i, &gid); i++)
		if (gid.type == VRDMA_GID_ROCE_V2 && gid.gid[10] == 0xff && !gid.gid[0]) {
			r = vgd_connect_qp(guest.g, &qp, nb.qp->qp_num, nb.gid, (uint8_t)i, 7);
			break;
		}
	if (r)
		die("guest connect", r);
	nat_connect(&nb, qp.qpn, gid.gid);
	nat_connect(&na, nb2.qp->qp_num, nb2.gid);
	nat_connect(&nb2, na.qp->qp_num, na.gid);
	nat_post_recvs(&nb, 200, MAX_MSG);
	nat_post_recvs(&nb2, 200, MAX_MSG);

	if (tuned) {
		printf("-- vrdma-vhost --rdma-poll-us %s --rdma-prefault:\n", TUNED_POLL_US);
		latency_row(&guest, &native, &nb, &nb2, &na);
		registration_rows(guest.g, pd, &na, false);
		huge_registration_rows(sock, &na);
		goto out;
	}
	printf("== rdma device vs native verbs: %s -> %s, same loop (window %u, batch %u, "
	       "one signaled per batch); medians of %d runs alternating (latency %d) ==\n",
	       argv[2], argv[3], WINDOW, BATCH, BW_RUNS, LAT_RUNS);
	printf("%-30s %10s %10s\n", "", "vrdma", "native");
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		double dev[BW_RUNS], nat[BW_RUNS];

		/* Alternate who goes first: drift in the TCG guest hits both alike. */
		for (int run = 0; run < BW_RUNS; run++) {
			struct sender *first = run % 2 ? &native : &guest;
			struct sender *second = run % 2 ? &guest : &native;
			struct rp_native *t1 = run % 2 ? &nb2 : &nb, *t2 = run % 2 ? &nb : &nb2;
			double a = bandwidth(first, t1, cases[i].op, cases[i].size, cases[i].count);
			double b = bandwidth(second, t2, cases[i].op, cases[i].size, cases[i].count);

			dev[run] = run % 2 ? b : a;
			nat[run] = run % 2 ? a : b;
		}
		qsort(dev, BW_RUNS, sizeof(dev[0]), by_value);
		qsort(nat, BW_RUNS, sizeof(nat[0]), by_value);
		row(cases[i].name, "MB/s", (dev[BW_RUNS / 2 - 1] + dev[BW_RUNS / 2]) / 2,
		    (nat[BW_RUNS / 2 - 1] + nat[BW_RUNS / 2]) / 2, false);
	}
	latency_row(&guest, &native, &nb, &nb2, &na);
	registration_rows(guest.g, pd, &na, false);
	huge_registration_rows(sock, &na);
	row("QP creation (1024 QPs)", "QPs/s", guest_qps_per_s(guest.g, pd, &cq2),
	    native_qps_per_s(&na), false);
out:
	vgd_close(guest.g);
	kill(daemon, SIGTERM);
	waitpid(daemon, NULL, 0);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * vrdma-vhost containing a hostile front end that plays by the message
 * rules but abuses what it shares: memory truncated under a mapping (the
 * SIGBUS guard), notifier fds that are not, or are blocking eventfds at
 * their maximum count, a queue that is never empty (the work budget) and
 * ring memory removed and added back under a running queue.
 *
 * One daemon serves the whole program. A good connection does real blk
 * I/O after every case; after every case the daemon is alive, its fd count
 * is back to the baseline, and at the end it must exit 0 on SIGTERM, so a
 * sanitizer report (ASan turning a handled SIGBUS into a crash) fails.
 */
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "util.h"
#include "vt-contain.h"

#define FILE_SIZE (1ull << 20)
#define FILE_SECTORS (FILE_SIZE / VUF_BLK_SECTOR)
#define HOSTILE_QSIZE 8
/* Larger than the daemon's per-kick budget (256) several times over. */
#define BIG_QSIZE 1024
/* How long the flood runs, and the latency the good connection must keep. */
#define FLOOD_NS 1000000000ull
#define GOOD_LATENCY_NS 1000000000ull
#define QUIET_MS 200
#define BLK_HDR_BYTES 16u

static struct vt_contain H;

/* ---- the hostile side ---- */

static struct vt_dev *open_hdev(uint64_t features, unsigned nvq, uint16_t qsize, bool start)
{
	return vt_contain_open_hdev(&H, features, nvq, qsize, start);
}

/* What must hold after every case. */
static void end_case(const char *name)
{
	vt_contain_close_hdev(&H);
	vt_contain_fd_baseline(&H, name);
	vt_contain_good_io(&H, name);
}

/* Replies the daemon sent before it noticed are skipped; then EOF must come. */
static void expect_dropped(struct vuf_conn *c, const char *name)
{
	uint64_t deadline = monotonic_ns() + VT_TIMEOUT_MS * 1000000ull;
	struct vuf_msg *m = malloc(sizeof(*m));
	int ret;

	assert_non_null(m);
	do {
		ret = vuf_recv_msg(c, m, VT_TIMEOUT_MS);
		if (!ret)
			vuf_msg_close_fds(m);
	} while (!ret && monotonic_ns() < deadline);
	free(m);
	if (ret != -ECONNRESET)
		fail_msg("%s: connection not dropped (%d)", name, ret);
	printf("# %-52s connection dropped\n", name);
}

static void expect_refusal(const char *name, int ret)
{
	if (ret != -EREMOTEIO && ret != -ECONNRESET)
		fail_msg("%s: expected a refusal, got %d%s", name, ret,
			 ret ? "" : " (zero ack: accepted)");
	printf("# %-52s %s\n", name,
	       ret == -ECONNRESET ? "connection dropped" : "non-zero ack");
}

/* Request memory for n requests of data_cap bytes each, inside one region. */
static void alloc_reqs(struct vuf_mem *m, size_t region, struct vuf_blk_req *reqs, size_t n,
		       uint32_t data_cap)
{
	uint64_t hdrs, data;

	assert_int_equal(vuf_mem_alloc_in(m, region, n * 32, 16, &hdrs), 0);
	assert_int_equal(vuf_mem_alloc_in(m, region, (uint64_t)n * data_cap, 4096, &data), 0);
	for (size_t i = 0; i < n; i++)
		reqs[i] = (struct vuf_blk_req){
			.hdr_gpa = hdrs + i * 32, .status_gpa = hdrs + i * 32 + BLK_HDR_BYTES,
			.data_gpa = data + i * data_cap, .data_cap = data_cap,
		};
}

static void swap_fd(int *slot, int fd)
{
	closep(slot);
	*slot = fd;
}

/* ---- 1. SIGBUS: shared memory truncated under the daemon's mapping ---- */

/*
 * A request is posted (while our own mapping still works), then the file
 * behind `fd` shrinks to nothing and the queue is kicked: the daemon's
 * next touch of that memory faults. It must drop this connection only.
 */
static void truncate_and_kick(struct vt_dev *h, struct vuf_blk_req *r, int fd, const char *name)
{
	assert_int_equal(vuf_blk_post(&h->vq[0], r, VUF_BLK_T_IN, 0, r->data_cap, false), 0);
	assert_int_equal(ftruncate(fd, 0), 0);
	/* Not vuf_vq_kick(): it reads the used ring, now beyond EOF for us too. */
	assert_int_equal(vuf_vq_kick_force(&h->vq[0]), 0);
	expect_dropped(h->c, name);
}

static void test_sigbus_ram_rings(void **state)
{
	struct vt_dev *h = open_hdev(VT_BLK_FEATURES, 1, HOSTILE_QSIZE, true);
	struct vuf_blk_req r;

	(void)state;
	/* Rings and buffers in region 0. */
	alloc_reqs(h->mem, 0, &r, 1, 512);
	truncate_and_kick(h, &r, vuf_mem_region(h->mem, 0)->fd, "RAM with the rings truncated");
	end_case("RAM with the rings truncated");
}

static void test_sigbus_ram_buffers(void **state)
{
	struct vt_dev *h = open_hdev(VT_BLK_FEATURES, 1, HOSTILE_QSIZE, true);
	struct vuf_blk_req r;

	(void)state;
	/* Rings intact in region 0; header, data and status in region 1. */
	alloc_reqs(h->mem, 1, &r, 1, 512);
	truncate_and_kick(h, &r, vuf_mem_region(h->mem, 1)->fd, "RAM with the buffers truncated");
	end_case("RAM with the buffers truncated");
}

/*
 * A hostile device set up by hand: guest RAM region 0 only, over ram_fd if
 * given (else a memfd), sent with SET_MEM_TABLE or region by region with
 * ADD_MEM_REG; queue 0 started.
 */
static struct vt_dev *open_hdev_ram(int ram_fd, bool add_mem_reg)
{
	struct vt_dev *h = &H.hdev;

	memset(h, 0, sizeof(*h));
	assert_int_equal(vuf_conn_connect(H.dmn.sock, VT_TIMEOUT_MS, &h->c), 0);
	H.hdev_open = true;
	h->mem = vuf_mem_new();
	assert_non_null(h->mem);
	assert_int_equal(vuf_negotiate(h->c, VT_BLK_FEATURES, VT_PROTO_ALL, &h->features,
				       &h->protocol), 0);
	if (ram_fd >= 0)
		assert_int_equal(vuf_mem_add_region_fd(h->mem, VT_RAM0_GPA, VT_RAM0_SIZE, 0,
						       ram_fd), 0);
	else
		assert_int_equal(vuf_mem_add_region(h->mem, VT_RAM0_GPA, VT_RAM0_SIZE, 0), 0);
	if (add_mem_reg) {
		struct vuf_region_desc d = vuf_mem_region_desc(h->mem, 0);

		assert_int_equal(vuf_add_mem_reg(h->c, &d, vuf_mem_region(h->mem, 0)->fd), 0);
	} else {
		assert_int_equal(vuf_mem_send_table(h->mem, h->c), 0);
	}
	assert_int_equal(vuf_vq_init(&h->vq[0], h->c, h->mem, 0, HOSTILE_QSIZE), 0);
	h->nvq = 1;
	assert_int_equal(vuf_vq_start(&h->vq[0]), 0);
	return h;
}

/* Guest RAM in a plain file, as with memory-backend-file on a filesystem. */
static void test_sigbus_ram_plain_file(void **state)
{
	char path[256];
	struct vuf_blk_req r;
	struct vt_dev *h;
	int fd;

	(void)state;
	vt_path("guest-ram", path, sizeof(path));
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(ftruncate(fd, (off_t)VT_RAM0_SIZE), 0);
	h = open_hdev_ram(fd, false);
	alloc_reqs(h->mem, 0, &r, 1, 512);
	truncate_and_kick(h, &r, fd, "RAM in a plain file truncated");
	close(fd);
	end_case("RAM in a plain file truncated");
}

/* The same memory given with ADD_MEM_REG instead of SET_MEM_TABLE. */
static void test_sigbus_ram_added(void **state)
{
	struct vt_dev *h = open_hdev_ram(-1, true);
	struct vuf_blk_req r;

	(void)state;
	alloc_reqs(h->mem, 0, &r, 1, 512);
	truncate_and_kick(h, &r, vuf_mem_region(h->mem, 0)->fd,
			  "RAM from ADD_MEM_REG truncated");
	end_case("RAM from ADD_MEM_REG truncated");
}

/* After SET_MEM_TABLE, the region holding the rings removed and added back. */
static void test_sigbus_ram_readded(void **state)
{
	struct vt_dev *h = open_hdev(VT_BLK_FEATURES, 1, HOSTILE_QSIZE, true);
	struct vuf_region_desc d0 = vuf_mem_region_desc(h->mem, 0);
	int fd = vuf_mem_region(h->mem, 0)->fd;
	struct vuf_blk_req r;

	(void)state;
	assert_int_equal(vuf_rem_mem_reg(h->c, &d0), 0);
	assert_int_equal(vuf_add_mem_reg(h->c, &d0, fd), 0);
	alloc_reqs(h->mem, 0, &r, 1, 512);
	truncate_and_kick(h, &r, fd, "RAM re-added after SET_MEM_TABLE truncated");
	end_case("RAM re-added after SET_MEM_TABLE truncated");
}

static void test_sigbus_log(void **state)
{
	struct vt_dev *h = open_hdev(VT_BLK_FEATURES | VUF_BIT(VUF_F_LOG_ALL), 1, HOSTILE_QSIZE,
				     true);
	struct vuf_log *log;
	struct vuf_blk_req r;

	(void)state;
	assert_true(h->features & VUF_BIT(VUF_F_LOG_ALL));
	assert_int_equal(vuf_log_new(VT_RAM0_SIZE, 0, &log), 0);
	assert_int_equal(vuf_log_send(log, h->c), 0);
	alloc_reqs(h->mem, 0, &r, 1, 512);
	/* The read writes guest memory, so the daemon sets log bits: in a 0-byte file. */
	truncate_and_kick(h, &r, log->fd, "dirty log truncated");
	vuf_log_free(log);
	end_case("dirty log truncated");
}

/* Our own inflight memfd (unsealed), sized as the daemon says it must be. */
static int inflight_area(struct vt_dev *h, struct vuf_inflight_desc *ret_desc)
{
	int theirs, fd;

	assert_int_equal(vuf_get_inflight_fd(h->c, 1, HOSTILE_QSIZE, ret_desc, &theirs), 0);
	close(theirs);
	fd = memfd_create("hostile-inflight", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)ret_desc->mmap_size), 0);
	assert_int_equal(vuf_set_inflight_fd(h->c, ret_desc, fd), 0);
	return fd;
}

static void test_sigbus_inflight_at_start(void **state)
{
	struct vt_dev *h = open_hdev(VT_BLK_FEATURES, 1, HOSTILE_QSIZE, false);
	struct vuf_inflight_desc d;
	int fd = inflight_area(h, &d), ret;

	(void)state;
	assert_int_equal(ftruncate(fd, 0), 0);
	/* Starting the ring reads the area for recovery. */
	ret = vuf_vq_start(&h->vq[0]);
	if (ret && ret != -ECONNRESET)
		fail_msg("inflight truncated before start: start returned %d", ret);
	expect_dropped(h->c, "inflight area truncated before start");
	close(fd);
	end_case("inflight area truncated before start");
}

static void test_sigbus_inflight_running(void **state)
{
	struct vt_dev *h = open_hdev(VT_BLK_FEATURES, 1, HOSTILE_QSIZE, false);
	struct vuf_inflight_desc d;
	struct vuf_blk_req r;
	int fd = inflight_area(h, &d);

	(void)state;
	assert_int_equal(vuf_vq_start(&h->vq[0]), 0);
	alloc_reqs(h->mem, 0, &r, 1, 512);
	/* Taking the request marks it in the area. */
	truncate_and_kick(h, &r, fd, "inflight area truncated while running");
	close(fd);
	end_case("inflight area truncated while running");
}

/* ---- 2. notifier fds ---- */

static int set_notifier(struct vuf_conn *c, uint32_t request, int fd)
{
	switch (request) {
	case VUF_SET_VRING_KICK:
		return vuf_set_vring_kick(c, 0, fd);
	case VUF_SET_VRING_CALL:
		return vuf_set_vring_call(c, 0, fd);
	default:
		return vuf_set_vring_err(c, 0, fd);
	}
}

/* The end we kept sees the other one closed: POLLHUP (read end) or POLLERR (write end). */
static void assert_pipe_peer_closed(int kept, const char *name)
{
	uint64_t deadline = monotonic_ns() + 3000000000ull;

	for (;;) {
		struct pollfd p = { .fd = kept, .events = POLLIN };

		if (poll(&p, 1, 100) > 0 && (p.revents & (POLLHUP | POLLERR)))
			return;
		if (monotonic_ns() > deadline)
			fail_msg("%s: the daemon kept the pipe end it was sent", name);
	}
}

static void test_pipe_notifiers(void **state)
{
	static const struct {
		uint32_t request;
		const char *what;
	} cases[] = {
		{ VUF_SET_VRING_KICK, "kick" },
		{ VUF_SET_VRING_CALL, "call" },
		{ VUF_SET_VRING_ERR, "err" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		for (int send_read_end = 0; send_read_end < 2; send_read_end++) {
			struct vt_dev *h = open_hdev(VT_BLK_FEATURES, 1, HOSTILE_QSIZE, true);
			char name[64];
			int p[2], ret;

			snprintf(name, sizeof(name), "pipe %s end as %s fd",
				 send_read_end ? "read" : "write", cases[i].what);
			assert_int_equal(pipe2(p, O_CLOEXEC), 0);
			ret = set_notifier(h->c, cases[i].request, p[send_read_end ? 0 : 1]);
			close(p[send_read_end ? 0 : 1]);
			expect_refusal(name, ret);
			assert_pipe_peer_closed(p[send_read_end ? 1 : 0], name);
			close(p[send_read_end ? 1 : 0]);
			end_case(name);
		}
	}
}

/* A blocking eventfd one below its maximum: one more write would block. */
static int full_eventfd(void)
{
	uint64_t v = UINT64_MAX - 1;
	int fd = eventfd(0, EFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, &v, sizeof(v)), sizeof(v));
	return fd;
}

static void test_full_call_fd(void **state)
{
	struct vt_dev *h = open_hdev(VT_BLK_FEATURES, 1, HOSTILE_QSIZE, false);
	struct vuf_blk_req r;
	uint8_t buf[512];
	uint64_t v = 0;

	(void)state;
	swap_fd(&h->vq[0].call_fd, full_eventfd());
	assert_int_equal(vuf_vq_start(&h->vq[0]), 0);
	alloc_reqs(h->mem, 0, &r, 1, sizeof(buf));
	/* Each completion is followed by a call the daemon cannot deliver. */
	for (int i = 0; i < 3; i++)
		if (vuf_blk_io(&h->vq[0], &r, VUF_BLK_T_IN, 0, buf, sizeof(buf), false,
			       VT_TIMEOUT_MS) != VUF_BLK_S_OK)
			fail_msg("full call fd: request %d not completed", i);
	vt_contain_good_io(&H, "requests completed on a full blocking call fd");
	/* The counter never moved: the daemon's writes did not go through. */
	assert_int_equal(read(h->vq[0].call_fd, &v, sizeof(v)), sizeof(v));
	assert_true(v == UINT64_MAX - 1);
	end_case("full blocking call fd");
}

static void test_full_err_fd(void **state)
{
	struct vt_dev *h = open_hdev(VT_BLK_FEATURES, 1, HOSTILE_QSIZE, false);

	(void)state;
	swap_fd(&h->vq[0].err_fd, full_eventfd());
	assert_int_equal(vuf_vq_start(&h->vq[0]), 0);
	/* A head outside the ring breaks the queue, which signals err. */
	vuf_vq_push_avail_raw(&h->vq[0], 0xfff0);
	assert_int_equal(vuf_vq_kick_force(&h->vq[0]), 0);
	usleep(QUIET_MS * 1000);
	assert_int_equal(vuf_vq_used_idx(&h->vq[0]), 0);
	vt_contain_good_io(&H, "a broken queue with a full blocking err fd");
	end_case("full blocking err fd");
}

static void test_shared_kick_fd(void **state)
{
	struct vt_dev *h = open_hdev(VT_BLK_FEATURES, 2, HOSTILE_QSIZE, false);
	struct vuf_blk_req r[2];
	int efd = eventfd(0, EFD_CLOEXEC);	/* blocking on purpose */

	(void)state;
	assert_true(efd >= 0);
	/* Two fds for one eventfd: whichever queue reads second finds it empty. */
	swap_fd(&h->vq[1].kick_fd, fcntl(efd, F_DUPFD_CLOEXEC, 0));
	swap_fd(&h->vq[0].kick_fd, efd);
	assert_true(h->vq[1].kick_fd >= 0);
	for (unsigned q = 0; q < 2; q++)
		assert_int_equal(vuf_vq_start(&h->vq[q]), 0);
	alloc_reqs(h->mem, 0, r, 2, 512);
	for (int round = 0; round < 20; round++) {
		struct vuf_used u;

		/* Both queues have work; one kick on the shared eventfd. */
		for (unsigned q = 0; q < 2; q++)
			assert_int_equal(vuf_blk_post(&h->vq[q], &r[q], VUF_BLK_T_IN,
						      (uint64_t)round, 512, false), 0);
		assert_int_equal(vuf_vq_kick_force(&h->vq[round % 2]), 0);
		for (unsigned q = 0; q < 2; q++) {
			if (vuf_vq_wait_used(&h->vq[q], VT_TIMEOUT_MS, &u))
				fail_msg("shared kick fd: queue %u not served in round %d", q,
					 round);
			assert_int_equal(vuf_blk_req_status(&h->vq[q], &r[q]), VUF_BLK_S_OK);
		}
	}
	vt_contain_good_io(&H, "one eventfd as kick fd of two queues");
	end_case("one eventfd as kick fd of two queues");
}

/* ---- 3. the per-kick budget ---- */

/* A queue of BIG_QSIZE indirect reads of 512 bytes, all posted. */
struct flood {
	struct vuf_blk_req req[BIG_QSIZE];
	uint16_t req_of_head[BIG_QSIZE];
};

static void flood_post(struct vuf_vq *vq, struct flood *f, size_t i)
{
	assert_int_equal(vuf_blk_post(vq, &f->req[i], VUF_BLK_T_IN, i % FILE_SECTORS, 512, true),
			 0);
	f->req_of_head[f->req[i].head] = (uint16_t)i;
}

static void flood_fill(struct vt_dev *h, struct flood *f)
{
	alloc_reqs(h->mem, 0, f->req, BIG_QSIZE, 512);
	for (size_t i = 0; i < BIG_QSIZE; i++)
		flood_post(&h->vq[0], f, i);
}

static void test_budget_full_ring(void **state)
{
	struct vt_dev *h = open_hdev(VT_BLK_FEATURES, 1, BIG_QSIZE, true);
	struct flood *f = calloc(1, sizeof(*f));
	uint8_t seen[BIG_QSIZE] = { 0 };
	uint64_t calls = 0;

	(void)state;
	assert_non_null(f);
	flood_fill(h, f);
	/* One kick for all of them: the daemon must come back by itself. */
	assert_int_equal(vuf_vq_kick_force(&h->vq[0]), 0);
	for (size_t n = 0; n < BIG_QSIZE; n++) {
		struct vuf_used u;
		size_t i;

		if (vuf_vq_wait_used(&h->vq[0], VT_TIMEOUT_MS, &u))
			fail_msg("full ring of %u: only %zu completed after one kick", BIG_QSIZE, n);
		i = f->req_of_head[u.id];
		if (seen[i]++)
			fail_msg("full ring: request %zu completed twice", i);
		if (vuf_blk_req_status(&h->vq[0], &f->req[i]) != VUF_BLK_S_OK)
			fail_msg("full ring: request %zu failed", i);
	}
	/* Without EVENT_IDX each round that served something signals once. */
	assert_int_equal(vuf_vq_take_calls(&h->vq[0], &calls), 0);
	printf("# %u requests after one kick: served in %llu rounds\n", BIG_QSIZE,
	       (unsigned long long)calls);
	if (calls < 2)
		fail_msg("full ring: served in one round, the daemon never yielded");
	free(f);
	end_case("a full ring of 1024 after one kick");
}

/* The good connection's one request in flight while the flood runs. */
struct probe {
	bool busy;
	uint64_t posted_ns, worst_ns;
	unsigned done;
};

static void probe_step(struct probe *p)
{
	struct vuf_vq *vq = &H.good.vq[0];
	uint64_t now = monotonic_ns();
	struct vuf_used u;

	if (!p->busy) {
		assert_int_equal(vuf_blk_post(vq, &H.good_req, VUF_BLK_T_IN, 0, 4096, false), 0);
		assert_int_equal(vuf_vq_kick(vq), 0);
		p->posted_ns = now;
		p->busy = true;
		return;
	}
	if (vuf_vq_wait_used(vq, 0, &u)) {
		if (now - p->posted_ns > GOOD_LATENCY_NS)
			fail_msg("good connection: no answer for %llu ms under a flood",
				 (unsigned long long)((now - p->posted_ns) / 1000000));
		return;
	}
	assert_int_equal(vuf_blk_req_status(vq, &H.good_req), VUF_BLK_S_OK);
	if (now - p->posted_ns > p->worst_ns)
		p->worst_ns = now - p->posted_ns;
	p->done++;
	p->busy = false;
}

/* Re-posts every request the daemon completed: the queue never drains. */
static unsigned flood_refill(struct vt_dev *h, struct flood *f)
{
	unsigned n = 0;
	struct vuf_used u;

	while (!vuf_vq_wait_used(&h->vq[0], 0, &u)) {
		flood_post(&h->vq[0], f, f->req_of_head[u.id]);
		n++;
	}
	if (n)
		assert_int_equal(vuf_vq_kick_force(&h->vq[0]), 0);
	return n;
}

static void test_budget_fairness(void **state)
{
	struct vt_dev *h = open_hdev(VT_BLK_FEATURES, 1, BIG_QSIZE, true);
	struct flood *f = calloc(1, sizeof(*f));
	struct timespec nap = { .tv_nsec = 50000 };
	struct probe p = { 0 };
	uint64_t end;
	unsigned flooded = 0;

	(void)state;
	assert_non_null(f);
	flood_fill(h, f);
	assert_int_equal(vuf_vq_kick_force(&h->vq[0]), 0);
	end = monotonic_ns() + FLOOD_NS;
	while (monotonic_ns() < end || p.busy) {
		flooded += flood_refill(h, f);
		probe_step(&p);
		nanosleep(&nap, NULL);
	}
	printf("# flood: %u hostile requests in 1 s; good: %u requests, worst %llu ms\n",
	       flooded, p.done, (unsigned long long)(p.worst_ns / 1000000));
	/* The flood must really have run past the budget, or nothing was shown. */
	if (flooded < 2 * BIG_QSIZE)
		fail_msg("flood too weak to show anything: %u requests", flooded);
	if (!p.done)
		fail_msg("good connection: nothing completed during the flood");
	free(f);
	end_case("a queue kept full for 1 s");
}

/* ---- 4. ring memory removed and added back ---- */

static void test_ring_memory_replaced(void **state)
{
	struct vt_dev *h = open_hdev(VT_BLK_FEATURES, 1, HOSTILE_QSIZE, true);
	const struct vuf_mem_region *r0 = vuf_mem_region(h->mem, 0);
	struct vuf_region_desc d0 = vuf_mem_region_desc(h->mem, 0);
	struct vuf_blk_req r[3];
	uint8_t pattern[512], buf[512];
	uint64_t errs = 0;

	(void)state;
	alloc_reqs(h->mem, 0, r, 3, sizeof(buf));
	for (size_t i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)(i ^ 0x5a);
	/* Running, with data the reads below must return. */
	assert_int_equal(vuf_blk_io(&h->vq[0], &r[2], VUF_BLK_T_OUT, 100, pattern,
				    sizeof(pattern), false, VT_TIMEOUT_MS), VUF_BLK_S_OK);
	assert_int_equal(vuf_rem_mem_reg(h->c, &d0), 0);
	/* Posted and kicked while the rings have no memory on the daemon's side. */
	for (int i = 0; i < 2; i++)
		assert_int_equal(vuf_blk_post(&h->vq[0], &r[i], VUF_BLK_T_IN, 100, 512, false), 0);
	assert_int_equal(vuf_vq_kick_force(&h->vq[0]), 0);
	usleep(QUIET_MS * 1000);
	assert_int_equal(vuf_vq_used_idx(&h->vq[0]), 1);
	/* Same fd, same addresses: the queue resumes with no kick. */
	assert_int_equal(vuf_add_mem_reg(h->c, &d0, r0->fd), 0);
	for (int i = 0; i < 2; i++) {
		struct vuf_used u;

		if (vuf_vq_wait_used(&h->vq[0], VT_TIMEOUT_MS, &u))
			fail_msg("ring memory replaced: request %d not completed", i);
	}
	for (int i = 0; i < 2; i++) {
		assert_int_equal(vuf_blk_req_status(&h->vq[0], &r[i]), VUF_BLK_S_OK);
		assert_memory_equal(vuf_mem_ptr(h->mem, r[i].data_gpa, 512), pattern, 512);
	}
	assert_int_equal(vuf_vq_take_errs(&h->vq[0], &errs), 0);
	if (errs)
		fail_msg("ring memory replaced: the queue was broken (err fd signalled)");
	/* And it keeps running. */
	assert_int_equal(vuf_blk_io(&h->vq[0], &r[2], VUF_BLK_T_IN, 100, buf, sizeof(buf), false,
				    VT_TIMEOUT_MS), VUF_BLK_S_OK);
	assert_memory_equal(buf, pattern, sizeof(buf));
	end_case("ring memory removed and added back");
}

/* ---- setup ---- */

static int setup(void **state)
{
	return vt_contain_setup(state, &H, "contain", FILE_SIZE,
				(const char *[]){ "--num-queues", "2", NULL });
}


#define T(f) cmocka_unit_test_teardown(f, vt_contain_case_cleanup)

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		T(test_sigbus_ram_rings),
		T(test_sigbus_ram_buffers),
		T(test_sigbus_ram_plain_file),
		T(test_sigbus_ram_added),
		T(test_sigbus_ram_readded),
		T(test_sigbus_log),
		T(test_sigbus_inflight_at_start),
		T(test_sigbus_inflight_running),
		T(test_pipe_notifiers),
		T(test_full_call_fd),
		T(test_full_err_fd),
		T(test_shared_kick_fd),
		T(test_budget_full_ring),
		T(test_budget_fairness),
		T(test_ring_memory_replaced),
	};
	vt_init(argc, argv);
	return VT_RUN(tests, setup, vt_contain_teardown, &H.dmn);
}

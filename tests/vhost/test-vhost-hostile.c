/* SPDX-License-Identifier: MIT */
/*
 * vrdma-vhost against a hostile front end. Every case runs on its own
 * connection while a second, well-behaved connection keeps doing real blk
 * I/O. After each case: the daemon is alive, every fd it received on the
 * hostile connection is closed (pipe read ends see EOF; /proc/<pid>/fd is
 * back to its baseline), and the good connection still reads back what it
 * writes.
 *
 * A rejected message must give a non-zero ack or a dropped connection
 * (the contract); a zero ack, no answer at all, or a crash fails.
 */
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "util.h"
#include "vt-contain.h"

#define FILE_SIZE (1ull << 20)
#define NUM_QUEUES 2
#define HOSTILE_QSIZE 8
#define MEMFD_SIZE (1ull << 20)
/* How long a broken queue must stay silent. */
#define QUIET_MS 300

static struct vt_contain H;

enum verdict { V_DROPPED, V_NACK, V_ACK0, V_HANG, V_OTHER };

static const char *verdict_name(enum verdict v)
{
	static const char *const names[] = {
		[V_DROPPED] = "connection dropped", [V_NACK] = "non-zero ack",
		[V_ACK0] = "zero ack (accepted)", [V_HANG] = "no answer (hang)",
		[V_OTHER] = "unexpected reply",
	};
	return names[v];
}

/* ---- hostile connections ---- */

static struct vuf_conn *open_raw(void)
{
	struct vuf_conn *c;

	assert_int_equal(vuf_conn_connect(H.dmn.sock, VT_TIMEOUT_MS, &c), 0);
	H.raw = c;
	return c;
}

/* A hostile device connection, fully set up, queue 0 started if start. */
static struct vt_dev *open_hdev(uint16_t qsize, bool start)
{
	return vt_contain_open_hdev(&H, VT_BLK_FEATURES, 1, qsize, start);
}

/* Owner, features (with LOG_ALL) and all protocol features: REPLY_ACK is on. */
static struct vuf_conn *open_negotiated(void)
{
	struct vuf_conn *c = open_raw();

	assert_int_equal(vuf_negotiate(c, VT_BLK_FEATURES | VUF_BIT(VUF_F_LOG_ALL), VT_PROTO_ALL,
				       NULL, NULL), 0);
	assert_true(vuf_conn_protocol_features(c) & VUF_BIT(VUF_PF_REPLY_ACK));
	return c;
}

/* Closes the hostile side and checks what must hold after every case. */
static void end_case(struct vuf_conn *c, const char *name)
{
	vuf_conn_free(c);
	H.raw = NULL;
	vt_contain_fd_baseline(&H, name);
	vt_contain_good_io(&H, name);
}

/* One line per refused message in the test log: what the daemon did. */
static void note(const char *name, int ret)
{
	printf("# %-48s %s\n", name, ret == -ECONNRESET ? "connection dropped" :
	       ret == -EREMOTEIO ? "non-zero ack" : "other");
}

/* The return of a typed request that must have been refused. */
static void expect_refusal_ret(const char *name, int ret)
{
	if (ret != -EREMOTEIO && ret != -ECONNRESET)
		fail_msg("%s: expected a refusal, got %d%s", name, ret,
			 ret ? "" : " (zero ack: accepted)");
	note(name, ret);
}

static enum verdict read_verdict(struct vuf_conn *c, uint32_t request)
{
	struct vuf_msg *m = malloc(sizeof(*m));
	enum verdict v = V_OTHER;
	int ret;

	assert_non_null(m);
	ret = vuf_recv_msg(c, m, VT_TIMEOUT_MS);
	if (ret == -ECONNRESET)
		v = V_DROPPED;
	else if (ret == -ETIMEDOUT)
		v = V_HANG;
	else if (!ret && m->request == request && (m->flags & VUF_FLAG_REPLY) && m->size == 8)
		v = get_le64(m->payload) ? V_NACK : V_ACK0;
	if (!ret)
		vuf_msg_close_fds(m);
	free(m);
	return v;
}

/*
 * The verdict on a message that must be refused. ack_ok: a non-zero u64
 * reply counts as a refusal (false for requests whose real reply is a u64
 * of their own, where only a drop is unambiguous). After a non-zero ack
 * the contract says the connection stays usable.
 */
static void expect_rejected(struct vuf_conn *c, uint32_t request, bool ack_ok, const char *name)
{
	enum verdict v = read_verdict(c, request);
	uint64_t f;

	if (v == V_DROPPED || v == V_NACK)
		printf("# %-48s %s\n", name, verdict_name(v));
	if (v == V_DROPPED)
		return;
	if (v != V_NACK || !ack_ok)
		fail_msg("%s: expected a refusal, got %s", name, verdict_name(v));
	if (vuf_get_features(c, &f))
		fail_msg("%s: connection unusable after a non-zero ack", name);
}

static int send_need_reply(struct vuf_conn *c, uint32_t request, const void *p, uint32_t len,
			   const int *fds, size_t nfds)
{
	return vuf_send_msg(c, request, VUF_FLAG_VERSION | VUF_FLAG_NEED_REPLY, p, len, fds, nfds);
}

/* Pipes whose write ends go to the daemon: EOF on the read end = closed. */
struct probes {
	int rd[VUF_RAW_MAX_FDS], wr[VUF_RAW_MAX_FDS];
	size_t n;
};

static void probes_make(struct probes *p, size_t n)
{
	p->n = n;
	for (size_t i = 0; i < n; i++) {
		int fds[2];

		assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
		p->rd[i] = fds[0];
		p->wr[i] = fds[1];
	}
}

/* Our write ends go once sent, so only the daemon's copies keep them open. */
static void probes_sent(struct probes *p)
{
	for (size_t i = 0; i < p->n; i++) {
		close(p->wr[i]);
		p->wr[i] = -1;
	}
}

static void probes_assert_closed(struct probes *p, const char *name)
{
	for (size_t i = 0; i < p->n; i++) {
		struct pollfd pfd = { .fd = p->rd[i], .events = POLLIN };

		if (poll(&pfd, 1, 3000) != 1 || !(pfd.revents & POLLHUP))
			fail_msg("%s: the daemon kept fd #%zu it received", name, i);
		close(p->rd[i]);
	}
	p->n = 0;
}

/* A message that must be refused, carrying n pipe ends that must be closed. */
static void reject_with_pipes(struct vuf_conn *c, uint32_t request, const void *payload,
			      uint32_t len, size_t npipes, bool ack_ok, const char *name)
{
	struct probes p;

	probes_make(&p, npipes);
	if (send_need_reply(c, request, payload, len, p.wr, npipes))
		fail_msg("%s: send failed", name);
	probes_sent(&p);
	expect_rejected(c, request, ack_ok, name);
	probes_assert_closed(&p, name);
}

/* A message without fds that must be refused, alone on a negotiated connection. */
static void reject_alone(uint32_t request, const void *payload, uint32_t len, bool ack_ok,
			 const char *name)
{
	struct vuf_conn *c = open_negotiated();

	assert_int_equal(send_need_reply(c, request, payload, len, NULL, 0), 0);
	expect_rejected(c, request, ack_ok, name);
	end_case(c, name);
}

static int memfd_of(uint64_t size)
{
	int fd = memfd_create("hostile", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	return fd;
}

/* ---- message-level cases ---- */

static void test_unknown_requests(void **state)
{
	static const uint32_t codes[] = { 0, 41, 99, 0x7fffffff, 0xffffffff };
	uint64_t zero = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(codes); i++) {
		char name[64];

		snprintf(name, sizeof(name), "unknown request %u", codes[i]);
		reject_alone(codes[i], &zero, 8, true, name);
	}
	/* And with a pipe attached, before any negotiation. */
	{
		struct vuf_conn *c = open_raw();

		reject_with_pipes(c, 1000, &zero, 8, 1, true, "unknown request with an fd");
		end_case(c, "unknown request with an fd");
	}
}

static void half_message(const void *bytes, size_t len, const char *name)
{
	struct vuf_conn *c = open_raw();

	assert_int_equal(vuf_send_raw(c, bytes, len, NULL, 0), 0);
	/* The daemon sees EOF in the middle of a message; it must just drop us. */
	shutdown(vuf_conn_fd(c), SHUT_WR);
	if (!vuf_conn_peer_closed(c, VT_TIMEOUT_MS))
		fail_msg("%s: connection not dropped", name);
	end_case(c, name);
}

static void test_short_header(void **state)
{
	uint8_t hdr[VUF_HDR_SIZE + 8];

	(void)state;
	put_le32(hdr, VUF_SET_FEATURES);
	put_le32(hdr + 4, VUF_FLAG_VERSION);
	put_le32(hdr + 8, 8);
	put_le64(hdr + 12, 0);
	half_message(hdr, 1, "1-byte header");
	half_message(hdr, 5, "5-byte header");
	half_message(hdr, 11, "11-byte header");
	/* Header complete, payload cut short. */
	half_message(hdr, 15, "payload cut short");
	/* A size field of 4 GiB with nothing behind it. */
	put_le32(hdr + 8, 0xffffffff);
	half_message(hdr, VUF_HDR_SIZE, "4 GiB size field");
	put_le32(hdr + 8, 0x10000);
	half_message(hdr, VUF_HDR_SIZE, "64 KiB size field");
}

static void test_bad_version(void **state)
{
	static const uint32_t flags[] = { 0x0, 0x2, 0x3, 0x0 | VUF_FLAG_REPLY };
	uint8_t p[8] = { 0 };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
		struct vuf_conn *c = open_negotiated();
		char name[64];

		snprintf(name, sizeof(name), "flags 0x%x", flags[i] | VUF_FLAG_NEED_REPLY);
		assert_int_equal(vuf_send_msg(c, VUF_SET_FEATURES, flags[i] | VUF_FLAG_NEED_REPLY,
					      p, sizeof(p), NULL, 0), 0);
		expect_rejected(c, VUF_SET_FEATURES, true, name);
		end_case(c, name);
	}
}

static void test_payload_size(void **state)
{
	static const struct {
		uint32_t request, size;
		bool ack_ok;
	} cases[] = {
		{ VUF_SET_FEATURES, 0, true }, { VUF_SET_FEATURES, 4, true },
		{ VUF_SET_FEATURES, 16, true }, { VUF_SET_OWNER, 8, true },
		{ VUF_SET_VRING_NUM, 4, true }, { VUF_SET_VRING_NUM, 12, true },
		{ VUF_SET_VRING_ADDR, 32, true }, { VUF_SET_VRING_ADDR, 48, true },
		{ VUF_SET_VRING_ENABLE, 0, true }, { VUF_SET_VRING_BASE, 7, true },
		{ VUF_SET_MEM_TABLE, 4, true }, { VUF_SET_MEM_TABLE, 7, true },
		{ VUF_SET_PROTOCOL_FEATURES, 2, true }, { VUF_SET_STATUS, 1, true },
		{ VUF_SET_INFLIGHT_FD, 8, true }, { VUF_GET_CONFIG, 4, true },
		{ VUF_GET_FEATURES, 8, false }, { VUF_GET_VRING_BASE, 4, false },
		{ VUF_GET_QUEUE_NUM, 1, false }, { VUF_GET_MAX_MEM_SLOTS, 16, false },
	};
	uint8_t p[64] = { 0 };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char name[64];

		snprintf(name, sizeof(name), "request %u with %u payload bytes",
			 cases[i].request, cases[i].size);
		reject_alone(cases[i].request, p, cases[i].size, cases[i].ack_ok, name);
	}
}

/* A mem table that says 2 regions but whose payload holds only one. */
static void test_mem_table_truncated(void **state)
{
	uint8_t p[8 + VUF_REGION_DESC_SIZE] = { 0 };
	int fds[2] = { memfd_of(MEMFD_SIZE), memfd_of(MEMFD_SIZE) };
	struct vuf_conn *c = open_negotiated();

	(void)state;
	put_le32(p, 2);
	put_le64(p + 8, 0);
	put_le64(p + 16, MEMFD_SIZE);
	put_le64(p + 24, 0x10000000);
	assert_int_equal(send_need_reply(c, VUF_SET_MEM_TABLE, p, sizeof(p), fds, 2), 0);
	close(fds[0]);
	close(fds[1]);
	expect_rejected(c, VUF_SET_MEM_TABLE, true, "mem table shorter than its count");
	end_case(c, "mem table shorter than its count");
}

static void test_fds_on_fdless(void **state)
{
	static const struct {
		uint32_t request, size;
		size_t nfds;
		bool ack_ok;
	} cases[] = {
		{ VUF_SET_FEATURES, 8, 1, true }, { VUF_SET_OWNER, 0, 1, true },
		{ VUF_SET_VRING_NUM, 8, 2, true }, { VUF_SET_VRING_ENABLE, 8, 1, true },
		{ VUF_SET_VRING_ADDR, 40, 3, true }, { VUF_SET_STATUS, 8, 1, true },
		{ VUF_GET_FEATURES, 0, 1, false }, { VUF_GET_VRING_BASE, 8, 1, false },
		{ VUF_GET_CONFIG, 12 + 8, 1, true }, { VUF_SET_PROTOCOL_FEATURES, 8, 4, true },
	};
	uint8_t p[64] = { 0 };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct vuf_conn *c = open_negotiated();
		char name[64];

		/* SET_VRING_NUM 8 on queue 0 would be valid without the fds. */
		put_le32(p + 4, 8);
		if (cases[i].request == VUF_GET_CONFIG)
			put_le32(p + 4, 8);
		snprintf(name, sizeof(name), "request %u with %zu fds", cases[i].request,
			 cases[i].nfds);
		reject_with_pipes(c, cases[i].request, p, cases[i].size, cases[i].nfds,
				  cases[i].ack_ok, name);
		end_case(c, name);
	}
}

static void test_missing_fds(void **state)
{
	struct vuf_region_desc r = { .gpa = 0, .size = MEMFD_SIZE, .uva = 0x10000000 };
	uint8_t p[VUF_INFLIGHT_DESC_SIZE] = { 0 };
	uint8_t table[VUF_MEM_TABLE_SIZE] = { 0 };
	uint8_t log[VUF_LOG_DESC_SIZE] = { 0 };
	uint8_t reg[8 + VUF_REGION_DESC_SIZE] = { 0 };
	uint8_t ring_fd[8];
	struct vuf_conn *c;
	int ret;

	(void)state;
	put_le32(table, 1);
	put_le64(table + 16, MEMFD_SIZE);
	put_le64(table + 24, 0x10000000);
	reject_alone(VUF_SET_MEM_TABLE, table, sizeof(table), true, "mem table, 1 region, no fd");

	/* Two regions, one fd: the fd that did come must still be closed. */
	c = open_negotiated();
	{
		struct vuf_region_desc two[2] = { r, r };
		struct probes pr;

		two[1].gpa = 0x40000000;
		two[1].uva = 0x50000000;
		probes_make(&pr, 1);
		ret = vuf_set_mem_table_raw(c, two, 2, pr.wr, 1);
		probes_sent(&pr);
		expect_refusal_ret("mem table, 2 regions, 1 fd", ret);
		probes_assert_closed(&pr, "mem table, 2 regions, 1 fd");
	}
	end_case(c, "mem table, 2 regions, 1 fd");

	/* Ring fds without the "no fd" flag (bit 8) and without an fd. */
	for (uint32_t req = VUF_SET_VRING_KICK; req <= VUF_SET_VRING_ERR; req++) {
		char name[64];

		snprintf(name, sizeof(name), "request %u without its fd", req);
		put_le64(ring_fd, 0);
		reject_alone(req, ring_fd, 8, true, name);
	}

	/* SET_LOG_BASE's own reply is a u64: a non-zero one is a refusal. */
	put_le64(log, 4096);
	reject_alone(VUF_SET_LOG_BASE, log, sizeof(log), true, "SET_LOG_BASE without fd");

	put_le64(reg + 16, MEMFD_SIZE);
	put_le64(reg + 24, 0x10000000);
	reject_alone(VUF_ADD_MEM_REG, reg, sizeof(reg), true, "ADD_MEM_REG without fd");

	put_le64(p, 4096);
	put_le16(p + 16, 1);
	put_le16(p + 18, 8);
	reject_alone(VUF_SET_INFLIGHT_FD, p, sizeof(p), true, "SET_INFLIGHT_FD without fd");
}

static void test_too_many_fds(void **state)
{
	uint8_t table[VUF_MEM_TABLE_SIZE] = { 0 };
	uint8_t kick[8] = { 0 };
	uint8_t feat[8] = { 0 };
	struct vuf_conn *c;

	(void)state;
	put_le32(table, 1);
	put_le64(table + 16, 4096);
	put_le64(table + 24, 0x10000000);
	c = open_negotiated();
	reject_with_pipes(c, VUF_SET_MEM_TABLE, table, sizeof(table), 9, true,
			  "mem table with 9 fds");
	end_case(c, "mem table with 9 fds");

	c = open_negotiated();
	reject_with_pipes(c, VUF_SET_VRING_KICK, kick, sizeof(kick), 9, true,
			  "SET_VRING_KICK with 9 fds");
	end_case(c, "SET_VRING_KICK with 9 fds");

	c = open_negotiated();
	reject_with_pipes(c, VUF_SET_FEATURES, feat, sizeof(feat), VUF_RAW_MAX_FDS, true,
			  "SET_FEATURES with 16 fds");
	end_case(c, "SET_FEATURES with 16 fds");
}

static void test_queue_index(void **state)
{
	static const struct {
		uint32_t request;
		uint32_t index;
		bool ack_ok;
	} states[] = {
		{ VUF_SET_VRING_NUM, NUM_QUEUES, true }, { VUF_SET_VRING_NUM, 0xffffffff, true },
		{ VUF_SET_VRING_BASE, 8, true }, { VUF_SET_VRING_ENABLE, NUM_QUEUES, true },
		{ VUF_SET_VRING_ENABLE, 0x80000000, true }, { VUF_GET_VRING_BASE, NUM_QUEUES, false },
		{ VUF_GET_VRING_BASE, 255, false },
	};
	static const struct {
		uint32_t request;
		uint64_t index;
	} ring_fds[] = {
		{ VUF_SET_VRING_KICK, NUM_QUEUES }, { VUF_SET_VRING_KICK, 0xff },
		{ VUF_SET_VRING_CALL, 9 }, { VUF_SET_VRING_ERR, 0x7f },
	};
	uint8_t p[VUF_VRING_ADDR_SIZE] = { 0 };
	struct vuf_conn *c;
	char name[64];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(states); i++) {
		snprintf(name, sizeof(name), "request %u on queue %u", states[i].request,
			 states[i].index);
		put_le32(p, states[i].index);
		put_le32(p + 4, 8);
		reject_alone(states[i].request, p, VUF_VRING_STATE_SIZE, states[i].ack_ok, name);
	}
	memset(p, 0, sizeof(p));
	put_le32(p, 1000);
	reject_alone(VUF_SET_VRING_ADDR, p, VUF_VRING_ADDR_SIZE, true,
		     "SET_VRING_ADDR on queue 1000");
	for (size_t i = 0; i < ARRAY_SIZE(ring_fds); i++) {
		c = open_negotiated();
		snprintf(name, sizeof(name), "request %u on queue %u with fd", ring_fds[i].request,
			 (unsigned)ring_fds[i].index);
		put_le64(p, ring_fds[i].index);
		reject_with_pipes(c, ring_fds[i].request, p, 8, 1, true, name);
		end_case(c, name);
	}
}

static void test_vring_num(void **state)
{
	static const uint32_t bad[] = { 0, 3, 100, 32769, 65536, 0x80000000, 0xffffffff };
	struct vuf_conn *c = open_negotiated();

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char name[64];
		int ret;

		snprintf(name, sizeof(name), "vring num %u", bad[i]);
		ret = vuf_set_vring_num(c, 0, bad[i]);
		expect_refusal_ret(name, ret);
		if (ret == -ECONNRESET) {
			end_case(c, name);
			c = open_negotiated();
		}
	}
	/* The same connection still takes the valid extremes. */
	assert_int_equal(vuf_set_vring_num(c, 0, 32768), 0);
	assert_int_equal(vuf_set_vring_num(c, 1, 256), 0);
	end_case(c, "bad vring nums");
}

/* ---- memory tables ---- */

struct bad_table {
	const char *name;
	struct vuf_region_desc r[2];
	uint64_t fd_size[2];
	uint32_t n;
};

static void send_table_case(const struct bad_table *t, bool expect_ok)
{
	struct vuf_conn *c = open_negotiated();
	int fds[2];
	int ret;

	for (uint32_t i = 0; i < t->n; i++)
		fds[i] = memfd_of(t->fd_size[i]);
	ret = vuf_set_mem_table_raw(c, t->r, t->n, fds, t->n);
	for (uint32_t i = 0; i < t->n; i++)
		close(fds[i]);
	if (expect_ok && ret)
		fail_msg("%s: valid table refused: %d", t->name, ret);
	if (!expect_ok)
		expect_refusal_ret(t->name, ret);
	end_case(c, t->name);
}

static void test_mem_table(void **state)
{
	const uint64_t M = MEMFD_SIZE, U = 0x10000000;
	const struct bad_table bad[] = {
		{ "overlapping regions", { { 0, M, U, 0 }, { M / 2, M, U + 2 * M, 0 } }, { M, M }, 2 },
		{ "identical regions", { { 0, M, U, 0 }, { 0, M, U + 2 * M, 0 } }, { M, M }, 2 },
		{ "overlapping user addresses", { { 0, M, U, 0 }, { 4 * M, M, U + M / 2, 0 } },
		  { M, M }, 2 },
		{ "guest address wraps", { { UINT64_MAX - M / 2, M, U, 0 } }, { M }, 1 },
		{ "user address wraps", { { 0, M, UINT64_MAX - M / 2, 0 } }, { M }, 1 },
		{ "region larger than fd", { { 0, 2 * M, U, 0 } }, { M }, 1 },
		{ "offset+size past fd", { { 0, M, U, M / 2 } }, { M }, 1 },
		{ "offset overflows", { { 0, M, U, UINT64_MAX - 4095 } }, { M }, 1 },
		{ "size overflows", { { 4096, UINT64_MAX, U, 0 } }, { M }, 1 },
	};
	const struct bad_table good_table = {
		"valid table", { { 0, M, U, 0 }, { 0x100000000ull, M / 2, U + 2 * M, M / 2 } },
		{ M, M }, 2,
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		send_table_case(&bad[i], false);
	send_table_case(&good_table, true);
}

static void test_mem_table_nine_regions(void **state)
{
	uint8_t p[8 + 9 * VUF_REGION_DESC_SIZE] = { 0 };
	int fds[9];
	struct vuf_conn *c = open_negotiated();

	(void)state;
	put_le32(p, 9);
	for (int i = 0; i < 9; i++) {
		uint8_t *r = p + 8 + i * VUF_REGION_DESC_SIZE;

		fds[i] = memfd_of(4096);
		put_le64(r, (uint64_t)i << 20);
		put_le64(r + 8, 4096);
		put_le64(r + 16, 0x10000000ull + ((uint64_t)i << 20));
	}
	/* A whole 9-region table, one fd each: only the count is wrong (the
	 * protocol's 8 regions and 8 fds per message are the same limit). */
	assert_int_equal(send_need_reply(c, VUF_SET_MEM_TABLE, p, sizeof(p), fds, 9), 0);
	for (int i = 0; i < 9; i++)
		close(fds[i]);
	expect_rejected(c, VUF_SET_MEM_TABLE, true, "9 regions");
	end_case(c, "9 regions");
}

/* One ADD_MEM_REG case on its own connection, after `first` if given. */
static void add_mem_reg_case(const struct vuf_region_desc *first, const struct vuf_region_desc *r,
			     bool expect_ok, const char *name)
{
	struct vuf_conn *c = open_negotiated();
	int fd = memfd_of(MEMFD_SIZE), ret;

	if (first)
		assert_int_equal(vuf_add_mem_reg(c, first, fd), 0);
	ret = vuf_add_mem_reg(c, r, fd);
	if (expect_ok) {
		if (ret)
			fail_msg("%s: valid region refused: %d", name, ret);
		assert_int_equal(vuf_rem_mem_reg(c, r), 0);
	} else {
		expect_refusal_ret(name, ret);
	}
	close(fd);
	end_case(c, name);
}

/* Each case alone, so a drop on one cannot hide the next. */
static void test_add_mem_reg(void **state)
{
	const uint64_t M = MEMFD_SIZE;
	struct vuf_region_desc base = { 0, M, 0x10000000, 0 };
	struct vuf_region_desc overlap = { M / 2, M, 0x20000000, 0 };
	struct vuf_region_desc too_big = { 8 * M, 2 * M, 0x30000000, 0 };
	struct vuf_region_desc fine = { 16 * M, M, 0x40000000, 0 };

	(void)state;
	/* Inside its fd and apart from everything but the first region. */
	add_mem_reg_case(&base, &overlap, false, "ADD_MEM_REG overlapping");
	/* Apart from everything, but larger than its fd. */
	add_mem_reg_case(NULL, &too_big, false, "ADD_MEM_REG larger than fd");
	add_mem_reg_case(&base, &fine, true, "ADD_MEM_REG valid");
}

/* ---- rings, log, inflight, config ---- */

/* One SET_VRING_ADDR case on its own device connection. */
static void ring_addr_case(int which, bool expect_ok, const char *name)
{
	struct vt_dev *h = open_hdev(HOSTILE_QSIZE, false);
	const struct vuf_mem_region *r0 = vuf_mem_region(h->mem, 0);
	struct vuf_vring_addr a = { .index = 0 };
	int ret;

	assert_int_equal(vuf_set_vring_num(h->c, 0, HOSTILE_QSIZE), 0);
	assert_int_equal(vuf_mem_uva(h->mem, h->vq[0].desc_gpa, &a.desc_uva), 0);
	assert_int_equal(vuf_mem_uva(h->mem, h->vq[0].avail_gpa, &a.avail_uva), 0);
	assert_int_equal(vuf_mem_uva(h->mem, h->vq[0].used_gpa, &a.used_uva), 0);
	if (which == 1)
		a.desc_uva = 0x1000; /* nowhere in guest memory */
	else if (which == 2)
		a.used_uva = (uint64_t)(uintptr_t)r0->host + r0->size - 8; /* across the end */
	ret = vuf_set_vring_addr(h->c, &a);
	if (expect_ok)
		assert_int_equal(ret, 0);
	else
		expect_refusal_ret(name, ret);
	vt_contain_close_hdev(&H);
	vt_contain_fd_baseline(&H, name);
	vt_contain_good_io(&H, name);
}

/* Each case alone, so a drop on one cannot hide the next. */
static void test_ring_addr_outside(void **state)
{
	(void)state;
	ring_addr_case(1, false, "desc table outside memory");
	ring_addr_case(2, false, "used ring across region end");
	ring_addr_case(0, true, "ring addresses inside memory");
}

static void log_base_case(uint64_t fd_size, uint64_t size, uint64_t offset, bool ok,
			  const char *name)
{
	struct vuf_conn *c = open_negotiated();
	int fd = memfd_of(fd_size);
	int ret = vuf_set_log_base_fd(c, fd, size, offset);

	close(fd);
	if (ok && ret)
		fail_msg("%s: valid log refused: %d", name, ret);
	if (!ok)
		expect_refusal_ret(name, ret);
	end_case(c, name);
}

static void test_log_base(void **state)
{
	(void)state;
	log_base_case(4096, 16, UINT64_MAX - 7, false, "log offset overflows");
	log_base_case(4096, UINT64_MAX, 8, false, "log size overflows");
	log_base_case(4096, 1 << 20, 0, false, "log larger than fd");
	log_base_case(4096, 16, 8192, false, "log offset past fd");
	log_base_case(4096, 4096, 1, false, "log end one byte past fd");
	log_base_case(8192, 4096, 4096, true, "valid log");
}

static void test_inflight(void **state)
{
	static const struct {
		uint16_t num_queues, queue_size;
		const char *name;
	} bad_get[] = {
		{ 0xffff, 0x8000, "GET_INFLIGHT_FD 65535 queues of 32768" },
		{ 1, 0xffff, "GET_INFLIGHT_FD queue size 65535" },
	};
	struct vuf_inflight_desc d;
	struct vuf_conn *c;
	int fd, ret;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad_get); i++) {
		uint8_t p[VUF_INFLIGHT_DESC_SIZE] = { 0 };

		put_le16(p + 16, bad_get[i].num_queues);
		put_le16(p + 18, bad_get[i].queue_size);
		/* A u64 non-zero reply in place of the descriptor is a refusal. */
		reject_alone(VUF_GET_INFLIGHT_FD, p, sizeof(p), true, bad_get[i].name);
	}

	c = open_negotiated();
	fd = memfd_of(4096);
	d = (struct vuf_inflight_desc){ .mmap_size = 1 << 20, .num_queues = 1, .queue_size = 128 };
	ret = vuf_set_inflight_fd(c, &d, fd);
	close(fd);
	expect_refusal_ret("SET_INFLIGHT_FD larger than fd", ret);
	end_case(c, "SET_INFLIGHT_FD larger than fd");

	c = open_negotiated();
	fd = memfd_of(4096);
	d = (struct vuf_inflight_desc){ .mmap_size = 4096, .mmap_offset = UINT64_MAX - 4095,
					.num_queues = 1, .queue_size = 8 };
	ret = vuf_set_inflight_fd(c, &d, fd);
	close(fd);
	expect_refusal_ret("SET_INFLIGHT_FD offset overflows", ret);
	end_case(c, "SET_INFLIGHT_FD offset overflows");
}

static void test_config_bad(void **state)
{
	uint8_t p[VUF_CONFIG_HDR_SIZE + 8] = { 0 };
	struct vuf_msg *m = malloc(sizeof(*m));
	struct vuf_conn *c;
	int ret;

	(void)state;
	assert_non_null(m);
	c = open_negotiated();
	put_le32(p, 0xfffffffc);
	put_le32(p + 4, 8);
	ret = vuf_set_config(c, 0xfffffffc, 0, p + 12, 8);
	expect_refusal_ret("SET_CONFIG offset wraps", ret);
	end_case(c, "SET_CONFIG offset wraps");

	/* The size field says more than the payload carries. */
	put_le32(p, 0);
	put_le32(p + 4, 200);
	reject_alone(VUF_SET_CONFIG, p, sizeof(p), true, "SET_CONFIG size beyond payload");

	/* GET_CONFIG past the config space: an empty reply or a drop. */
	c = open_negotiated();
	put_le32(p, 0xfffffff0);
	put_le32(p + 4, 8);
	assert_int_equal(vuf_send_msg(c, VUF_GET_CONFIG, VUF_FLAG_VERSION, p, sizeof(p), NULL, 0),
			 0);
	ret = vuf_recv_msg(c, m, VT_TIMEOUT_MS);
	if (!ret) {
		vuf_msg_close_fds(m);
		if (m->size != 0)
			fail_msg("GET_CONFIG offset wraps: got %u bytes of config", m->size);
	} else if (ret != -ECONNRESET) {
		fail_msg("GET_CONFIG offset wraps: %d", ret);
	}
	end_case(c, "GET_CONFIG offset wraps");
	free(m);
}

/*
 * A request of a protocol feature the front end did not accept: refused
 * (dropped, or a non-zero ack where the request has no reply of its own),
 * and every fd it carried closed.  BACKEND_REQ is never in VT_PROTO_ALL.
 */
static void test_feature_not_negotiated(void **state)
{
	static const struct {
		const char *name;
		uint32_t request, feature, size;
		size_t npipes;
		bool ack_ok;
	} cases[] = {
		{ "GET_MAX_MEM_SLOTS", VUF_GET_MAX_MEM_SLOTS, VUF_PF_CONFIG_MEM_SLOTS, 0, 0, false },
		{ "ADD_MEM_REG", VUF_ADD_MEM_REG, VUF_PF_CONFIG_MEM_SLOTS, 40, 1, true },
		{ "REM_MEM_REG", VUF_REM_MEM_REG, VUF_PF_CONFIG_MEM_SLOTS, 40, 0, true },
		{ "SET_LOG_BASE", VUF_SET_LOG_BASE, VUF_PF_LOG_SHMFD, 16, 1, false },
		{ "SET_BACKEND_REQ_FD", VUF_SET_BACKEND_REQ_FD, VUF_PF_BACKEND_REQ, 0, 1, true },
		{ "GET_CONFIG", VUF_GET_CONFIG, VUF_PF_CONFIG, 12, 0, false },
		{ "SET_CONFIG", VUF_SET_CONFIG, VUF_PF_CONFIG, 12, 0, true },
		{ "GET_INFLIGHT_FD", VUF_GET_INFLIGHT_FD, VUF_PF_INFLIGHT_SHMFD, 24, 0, false },
		{ "SET_INFLIGHT_FD", VUF_SET_INFLIGHT_FD, VUF_PF_INFLIGHT_SHMFD, 24, 1, true },
		{ "SET_STATUS", VUF_SET_STATUS, VUF_PF_STATUS, 8, 0, true },
		{ "GET_STATUS", VUF_GET_STATUS, VUF_PF_STATUS, 0, 0, false },
	};
	uint8_t p[64] = { 0 };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		uint64_t proto = VT_PROTO_ALL & ~VUF_BIT(cases[i].feature);
		struct vuf_conn *c = open_raw();
		char name[64];

		snprintf(name, sizeof(name), "%s without its protocol feature", cases[i].name);
		assert_int_equal(vuf_negotiate(c, VT_BLK_FEATURES, proto, NULL, NULL), 0);
		assert_false(vuf_conn_protocol_features(c) & VUF_BIT(cases[i].feature));
		reject_with_pipes(c, cases[i].request, p, cases[i].size, cases[i].npipes,
				  cases[i].ack_ok, name);
		end_case(c, name);
	}
}

/* ---- virtqueue contents ---- */

/*
 * Sets up a hostile device with queue 0 started, lets `corrupt` write a
 * bad chain into it, kicks, and checks the contract: no used entry, the
 * err eventfd fires, the queue processes nothing more until restarted,
 * and after GET_VRING_BASE + restart it serves again.
 */
static void queue_case(const char *name, void (*corrupt)(struct vt_dev *h))
{
	struct vt_dev *h = open_hdev(HOSTILE_QSIZE, true);
	struct vuf_vq *vq = &h->vq[0];
	struct vuf_blk_req r;
	uint8_t buf[512] = { 0 };
	uint32_t base;

	assert_int_equal(vuf_blk_req_alloc(h->mem, 4096, &r), 0);
	corrupt(h);
	assert_int_equal(vuf_vq_kick_force(vq), 0);
	if (vuf_vq_wait_err(vq, VT_TIMEOUT_MS))
		fail_msg("%s: err eventfd not signalled", name);
	if (vuf_vq_used_idx(vq) != 0)
		fail_msg("%s: a used entry was written for a bad chain", name);
	/*
	 * A broken queue stays stopped, even for a valid request posted after
	 * the bad one (its descriptors may reuse the bad chain's slots).
	 */
	assert_int_equal(vuf_blk_post(vq, &r, VUF_BLK_T_IN, 0, 512, false), 0);
	assert_int_equal(vuf_vq_kick_force(vq), 0);
	usleep(QUIET_MS * 1000);
	if (vuf_vq_used_idx(vq) != 0)
		fail_msg("%s: the broken queue processed more requests", name);
	vt_contain_good_io(&H, name);
	/* Stop, restart from scratch: it serves again. */
	assert_int_equal(vuf_vq_stop(vq, &base), 0);
	vuf_vq_reset(vq);
	assert_int_equal(vuf_vq_start_at(vq, 0), 0);
	if (vuf_blk_io(vq, &r, VUF_BLK_T_IN, 0, buf, sizeof(buf), false, VT_TIMEOUT_MS) !=
	    VUF_BLK_S_OK)
		fail_msg("%s: queue did not recover after stop and restart", name);
	vt_contain_close_hdev(&H);
	vt_contain_fd_baseline(&H, name);
	vt_contain_good_io(&H, name);
}

/* Room for tables and buffers the corrupt functions point at. */
static uint64_t scratch(struct vt_dev *h, uint64_t size)
{
	uint64_t gpa;

	assert_int_equal(vuf_mem_alloc(h->mem, size, 4096, &gpa), 0);
	return gpa;
}

/* A valid blk header for IN of sector 0, at gpa. */
static uint64_t blk_hdr(struct vt_dev *h)
{
	uint64_t gpa = scratch(h, 4096);
	uint8_t *p = vuf_mem_ptr(h->mem, gpa, 16);

	put_le32(p, VUF_BLK_T_IN);
	return gpa;
}

static void corrupt_self_loop(struct vt_dev *h)
{
	vuf_vq_write_desc(&h->vq[0], 0, blk_hdr(h), 16, VUF_DESC_F_NEXT, 0);
	vuf_vq_push_avail_raw(&h->vq[0], 0);
}

static void corrupt_long_cycle(struct vt_dev *h)
{
	uint64_t hdr = blk_hdr(h), data = scratch(h, 4096);

	/* 0 -> 1 -> ... -> 7 -> 0: longer than the queue without a short loop. */
	vuf_vq_write_desc(&h->vq[0], 0, hdr, 16, VUF_DESC_F_NEXT, 1);
	for (uint16_t i = 1; i < HOSTILE_QSIZE; i++)
		vuf_vq_write_desc(&h->vq[0], i, data, 512, VUF_DESC_F_NEXT | VUF_DESC_F_WRITE,
				  (uint16_t)((i + 1) % HOSTILE_QSIZE));
	vuf_vq_push_avail_raw(&h->vq[0], 0);
}

static void corrupt_bogus_next(struct vt_dev *h)
{
	vuf_vq_write_desc(&h->vq[0], 0, blk_hdr(h), 16, VUF_DESC_F_NEXT, 200);
	vuf_vq_push_avail_raw(&h->vq[0], 0);
}

static void corrupt_head_out_of_range(struct vt_dev *h)
{
	vuf_vq_push_avail_raw(&h->vq[0], 0xfff0);
}

static void corrupt_avail_jump(struct vt_dev *h)
{
	/* Descriptors are fine; the idx claims 100 entries in a ring of 8. */
	uint64_t hdr = blk_hdr(h), st = scratch(h, 4096);

	vuf_vq_write_desc(&h->vq[0], 0, hdr, 16, VUF_DESC_F_NEXT, 1);
	vuf_vq_write_desc(&h->vq[0], 1, st, 1, VUF_DESC_F_WRITE, 0);
	vuf_vq_set_avail_idx_raw(&h->vq[0], 100);
}

/* A blk read (header, 512-byte data, status) whose data lies at data_gpa. */
static void post_read_into(struct vt_dev *h, uint64_t data_gpa)
{
	uint64_t st = scratch(h, 4096);

	vuf_vq_write_desc(&h->vq[0], 0, blk_hdr(h), 16, VUF_DESC_F_NEXT, 1);
	vuf_vq_write_desc(&h->vq[0], 1, data_gpa, 512, VUF_DESC_F_NEXT | VUF_DESC_F_WRITE, 2);
	vuf_vq_write_desc(&h->vq[0], 2, st, 1, VUF_DESC_F_WRITE, 0);
	vuf_vq_push_avail_raw(&h->vq[0], 0);
}

static void corrupt_buffer_outside(struct vt_dev *h)
{
	/* Between the two RAM regions. */
	post_read_into(h, 0x80000000ull);
}

static void corrupt_buffer_wraps(struct vt_dev *h)
{
	post_read_into(h, UINT64_MAX - 255);
}

static void corrupt_buffer_straddles(struct vt_dev *h)
{
	/* Starts in region 0, runs past its end. */
	post_read_into(h, VT_RAM0_SIZE - 256);
}

/* A valid 3-entry indirect table; then the head points at it with `len`. */
static void indirect_with_len(struct vt_dev *h, uint32_t len, bool nested, bool table_loop)
{
	uint64_t table = scratch(h, 65536), hdr = blk_hdr(h), data = scratch(h, 4096);
	uint8_t *t = vuf_mem_ptr(h->mem, table, 48);

	put_le64(t, hdr);
	put_le32(t + 8, 16);
	put_le16(t + 12, VUF_DESC_F_NEXT);
	put_le16(t + 14, 1);
	put_le64(t + 16, data);
	put_le32(t + 24, nested ? 32 : 512);
	put_le16(t + 28, nested ? VUF_DESC_F_INDIRECT : VUF_DESC_F_NEXT | VUF_DESC_F_WRITE);
	put_le16(t + 30, table_loop ? 0 : 2);
	put_le64(t + 32, data + 1024);
	put_le32(t + 40, 1);
	put_le16(t + 44, VUF_DESC_F_WRITE);
	vuf_vq_write_desc(&h->vq[0], 0, table, len, VUF_DESC_F_INDIRECT, 0);
	vuf_vq_push_avail_raw(&h->vq[0], 0);
}

static void corrupt_indirect_len0(struct vt_dev *h) { indirect_with_len(h, 0, false, false); }
static void corrupt_indirect_len17(struct vt_dev *h) { indirect_with_len(h, 17, false, false); }
static void corrupt_indirect_len_huge(struct vt_dev *h)
{
	/* 32769 entries: more than the contract's 32768 (all inside guest RAM). */
	indirect_with_len(h, 32769 * 16, false, false);
}
static void corrupt_indirect_nested(struct vt_dev *h) { indirect_with_len(h, 48, true, false); }
static void corrupt_indirect_loop(struct vt_dev *h) { indirect_with_len(h, 48, false, true); }

static void corrupt_indirect_outside(struct vt_dev *h)
{
	vuf_vq_write_desc(&h->vq[0], 0, 0x80000000ull, 48, VUF_DESC_F_INDIRECT, 0);
	vuf_vq_push_avail_raw(&h->vq[0], 0);
}

static void corrupt_indirect_bad_next(struct vt_dev *h)
{
	uint64_t table = scratch(h, 4096);
	uint8_t *t = vuf_mem_ptr(h->mem, table, 32);

	put_le64(t, blk_hdr(h));
	put_le32(t + 8, 16);
	put_le16(t + 12, VUF_DESC_F_NEXT);
	put_le16(t + 14, 7);	/* the table has 2 entries */
	vuf_vq_write_desc(&h->vq[0], 0, table, 32, VUF_DESC_F_INDIRECT, 0);
	vuf_vq_push_avail_raw(&h->vq[0], 0);
}

#define QUEUE_CASE(fn) \
	static void test_q_##fn(void **state) { (void)state; queue_case(#fn, corrupt_##fn); }
QUEUE_CASE(self_loop)
QUEUE_CASE(long_cycle)
QUEUE_CASE(bogus_next)
QUEUE_CASE(head_out_of_range)
QUEUE_CASE(avail_jump)
QUEUE_CASE(buffer_outside)
QUEUE_CASE(buffer_wraps)
QUEUE_CASE(buffer_straddles)
QUEUE_CASE(indirect_len0)
QUEUE_CASE(indirect_len17)
QUEUE_CASE(indirect_len_huge)
QUEUE_CASE(indirect_nested)
QUEUE_CASE(indirect_loop)
QUEUE_CASE(indirect_outside)
QUEUE_CASE(indirect_bad_next)

/* ---- connections going away ---- */

static void test_disconnect_in_flight(void **state)
{
	struct vt_dev *h;
	struct vuf_blk_req r[4];

	(void)state;
	/* Requests posted and kicked, then the front end vanishes at once. */
	for (int round = 0; round < 10; round++) {
		h = open_hdev(HOSTILE_QSIZE, true);
		for (int i = 0; i < 2; i++) {
			assert_int_equal(vuf_blk_req_alloc(h->mem, 64 << 10, &r[i]), 0);
			assert_int_equal(vuf_blk_post(&h->vq[0], &r[i], VUF_BLK_T_IN, 0, 64 << 10,
						      false), 0);
		}
		assert_int_equal(vuf_vq_kick_force(&h->vq[0]), 0);
		vt_contain_close_hdev(&H);
	}
	vt_contain_fd_baseline(&H, "disconnects with requests in flight");
	vt_contain_good_io(&H, "disconnects with requests in flight");
}

static void test_many_connections(void **state)
{
	struct vuf_conn *c[64];

	(void)state;
	/* Half of them negotiate, half just connect; all close together. */
	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		assert_int_equal(vuf_conn_connect(H.dmn.sock, VT_TIMEOUT_MS, &c[i]), 0);
		if (i % 2)
			assert_int_equal(vuf_negotiate(c[i], VT_BLK_FEATURES, VT_PROTO_ALL, NULL,
						       NULL), 0);
	}
	vt_contain_good_io(&H, "64 open connections");
	/* One more than --max-connections: accepted by the kernel, then closed. */
	{
		struct vuf_conn *extra;
		uint64_t features;

		assert_int_equal(vuf_conn_connect(H.dmn.sock, VT_TIMEOUT_MS, &extra), 0);
		assert_int_equal(vuf_get_features(extra, &features), -ECONNRESET);
		vuf_conn_free(extra);
	}
	vt_contain_good_io(&H, "a connection over the limit refused");
	for (size_t i = 0; i < ARRAY_SIZE(c); i++)
		vuf_conn_free(c[i]);
	vt_contain_fd_baseline(&H, "64 connections closed");
	vt_contain_good_io(&H, "64 connections closed");
}

/* ---- the end ---- */

static void test_still_serving(void **state)
{
	struct vt_dev *fresh;
	struct vuf_blk_req r;
	uint8_t buf[512];

	(void)state;
	/* After all of it: the good connection and a brand-new one both work. */
	vt_contain_good_io(&H, "the whole suite");
	fresh = open_hdev(64, true);
	assert_int_equal(vuf_blk_req_alloc(fresh->mem, 4096, &r), 0);
	assert_int_equal(vuf_blk_io(&fresh->vq[0], &r, VUF_BLK_T_IN, 0, buf, sizeof(buf), false,
				    VT_TIMEOUT_MS), VUF_BLK_S_OK);
	vt_contain_close_hdev(&H);
	vt_contain_fd_baseline(&H, "the whole suite");
	assert_true(vuf_daemon_alive(&H.dmn.d));
}

static int setup(void **state)
{
	/* Room for the good connection and 64 more, not for a 66th. */
	const char *args[] = { "--num-queues", "2", "--max-connections", "65", NULL };

	return vt_contain_setup(state, &H, "hostile", FILE_SIZE, args);
}

#define T(f) cmocka_unit_test_teardown(f, vt_contain_case_cleanup)

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		T(test_unknown_requests),
		T(test_short_header),
		T(test_bad_version),
		T(test_payload_size),
		T(test_mem_table_truncated),
		T(test_fds_on_fdless),
		T(test_missing_fds),
		T(test_too_many_fds),
		T(test_queue_index),
		T(test_vring_num),
		T(test_mem_table),
		T(test_mem_table_nine_regions),
		T(test_add_mem_reg),
		T(test_ring_addr_outside),
		T(test_log_base),
		T(test_inflight),
		T(test_config_bad),
		T(test_feature_not_negotiated),
		T(test_q_self_loop),
		T(test_q_long_cycle),
		T(test_q_bogus_next),
		T(test_q_head_out_of_range),
		T(test_q_avail_jump),
		T(test_q_buffer_outside),
		T(test_q_buffer_wraps),
		T(test_q_buffer_straddles),
		T(test_q_indirect_len0),
		T(test_q_indirect_len17),
		T(test_q_indirect_len_huge),
		T(test_q_indirect_nested),
		T(test_q_indirect_loop),
		T(test_q_indirect_outside),
		T(test_q_indirect_bad_next),
		T(test_disconnect_in_flight),
		T(test_many_connections),
		T(test_still_serving),
	};
	vt_init(argc, argv);
	return VT_RUN(tests, setup, vt_contain_teardown, &H.dmn);
}

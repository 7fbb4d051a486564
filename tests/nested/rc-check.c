// SPDX-License-Identifier: MIT
/*
 * rc-check: RC semantics hold across a live migration of one end.
 *
 *   rc-check server DEV PORT GID_INDEX SECONDS
 *   rc-check client DEV HOST PORT GID_INDEX SECONDS
 *
 * Two nested guests, A (client) and B (server), each with a vrdma device,
 * connect one RC QP; the harness live-migrates guest A while the client
 * drives traffic for SECONDS seconds.  Each round of the client, posted in
 * order on the one QP:
 *
 *   1. RDMA WRITE of 4 KiB, a pattern unique to the round, into the
 *      server's slot round % NSLOTS;
 *   2. SEND of 64 bytes: the round number, the checksum of that pattern
 *      and the pattern's first bytes;
 *   3. every 4th round, FETCH_AND_ADD 1 on the server's counter: the old
 *      value returned must be the number of fetch-adds before it, so each
 *      add ran exactly once;
 *   4. every 8th round, RDMA READ of the slot just written, compared byte
 *      for byte with the pattern.
 *
 * Every WR is signaled and gets the next wr_id; one RC send queue
 * completes in posting order, so the client requires each completion to
 * be exactly the next wr_id with the opcode posted: a lost, doubled or
 * reordered completion fails, as does any status but success.  The server
 * requires every SEND to carry exactly the previous round + 1 (delivered
 * once and in order), its checksum and bytes to be that round's, and, as
 * RC delivers the WRITE before the SEND behind it, the slot to hold that
 * round's whole pattern already.
 *
 * At the end the client tells the server over TCP how many rounds and
 * fetch-adds it completed; the server waits for that many SENDs, checks
 * that nothing more arrives and that its counter equals the fetch-adds,
 * and answers its verdict.  The summary lines are
 *
 *   RC-CHECK client rounds N atomics M reads R longest-gap-ms G ok
 *   RC-CHECK server rounds N atomics M ok
 *
 * where G is the longest time between two consecutive client completions:
 * the pause the migration caused.  Any failure prints "RC-CHECK FAIL
 * REASON" and exits 1.  "RC-CHECK server connected" (QP in RTS) and
 * "RC-CHECK client running" (first round complete) tell the harness when
 * to go on.  Each wait is NESTED_WAIT_S seconds (default 60).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "nested-tcp.h"
#include "verbs-open.h"

#define SLOT_SIZE 4096
#define NSLOTS 16
/*
 * The server re-posts a receive only after checking its round, so at most
 * NRECV rounds are delivered but unchecked.  The client writes round r +
 * NSLOTS into round r's slot only after round r + NSLOTS - 1's SEND took
 * a receive; with NRECV < NSLOTS that means round r was checked before its
 * slot is overwritten.  (A client ahead by NRECV just waits on RNR NAKs,
 * retried forever with rnr_retry 7.)
 */
#define NRECV 8
#define MSG_SIZE 64
#define MSG_PATTERN_OFF 16
#define SQ_DEPTH 64
#define MAX_WR_PER_ROUND 4
#define CONNECT_WAITS 2 /* NESTED_WAIT_S each */
#define DRAIN_MS 200

/* The TCP exchange: fixed 64-byte frames, little-endian fields at fixed
 * offsets, whatever the two ends' ABI. */
#define FRAME_SIZE 64
#define FRAME_MAGIC 0x4b434352u /* "RCCK" */
enum frame_type {
	FRAME_HELLO_SERVER = 1,
	FRAME_HELLO_CLIENT,
	FRAME_READY,
	FRAME_DONE,
	FRAME_VERDICT,
};
/* Every frame: magic at 0, type at 4. */
#define AT_MAGIC 0
#define AT_TYPE 4
/* Hellos. */
#define AT_QPN 8
#define AT_PSN 12
#define AT_GID 16
#define AT_WRITE_ADDR 32
#define AT_WRITE_RKEY 40
#define AT_WRITE_LEN 44
#define AT_COUNTER_ADDR 48
#define AT_COUNTER_RKEY 56
/* DONE: rounds and fetch-adds completed.  VERDICT: ok, rounds seen, counter. */
#define AT_ROUNDS 8
#define AT_ATOMICS 16
#define AT_OK 24

struct peer {
	uint32_t qpn, psn;
	uint8_t gid[16];
	uint64_t write_addr, counter_addr;
	uint32_t write_rkey, write_len, counter_rkey;
};

struct rc {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_device_attr dev;
	enum ibv_mtu mtu;
	uint8_t gid[16];
	int gid_index;
	uint32_t psn;
	uint32_t sq_depth, rq_depth;
};

static __attribute__((noreturn, format(printf, 1, 2))) void fail(const char *fmt, ...)
{
	va_list ap;

	printf("RC-CHECK FAIL ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

static int wait_s(void)
{
	const char *s = getenv("NESTED_WAIT_S");
	char *end;
	long v = s ? strtol(s, &end, 10) : 0;

	return s && *s && !*end && v > 0 && v < 86400 ? (int)v : 60;
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Between empty polls of a CQ: short, a migration pause is seconds. */
static void nap(void)
{
	struct timespec t = { .tv_nsec = 50 * 1000 };

	nanosleep(&t, NULL);
}

static long parse_num(const char *s, long min, long max, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		fail("bad %s '%s'", what, s);
	return v;
}

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Byte i of round's pattern.  The key differs for every round (an odd
 * multiplier is a bijection), so no two rounds' patterns are equal and a
 * slot left holding an older round's bytes shows. */
static void fill_pattern(uint8_t *buf, size_t len, uint64_t round)
{
	uint64_t key = (round + 1) * 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)((key >> (8 * (i % 8))) + i * 7);
}

/* FNV-1a. */
static uint64_t checksum(const uint8_t *buf, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ buf[i]) * 0x100000001b3ull;
	return h;
}

/* The first differing byte, or -1. */
static long first_diff(const uint8_t *a, const uint8_t *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return (long)i;
	return -1;
}

/* 0, or -1 on EOF, error or no data for timeout_s seconds. */
static int read_full(int fd, void *p, size_t n, int timeout_s)
{
	uint64_t end = now_ms() + (uint64_t)timeout_s * 1000;

	for (size_t got = 0; got < n;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t t = now_ms();
		ssize_t r;

		if (t >= end || poll(&pfd, 1, (int)(end - t)) <= 0)
			return -1;
		r = read(fd, (uint8_t *)p + got, n - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static void frame_init(uint8_t *f, enum frame_type type)
{
	memset(f, 0, FRAME_SIZE);
	put_u32(f + AT_MAGIC, FRAME_MAGIC);
	put_u32(f + AT_TYPE, type);
}

/* A frame read within timeout_s: 0 if it is well formed and of the type
 * expected, -1 if none came, a failure if a wrong one did. */
static int frame_read(int fd, uint8_t *f, enum frame_type type, int timeout_s)
{
	if (read_full(fd, f, FRAME_SIZE, timeout_s))
		return -1;
	if (get_u32(f + AT_MAGIC) != FRAME_MAGIC)
		fail("TCP peer sent magic %#x, not an rc-check frame", get_u32(f + AT_MAGIC));
	if (get_u32(f + AT_TYPE) != (uint32_t)type)
		fail("TCP peer sent frame type %u, expected %d", get_u32(f + AT_TYPE), type);
	return 0;
}

static bool gid_is_zero(const uint8_t *gid)
{
	for (int i = 0; i < 16; i++)
		if (gid[i])
			return false;
	return true;
}

static void hello_encode(uint8_t *f, enum frame_type type, const struct rc *rc,
			 const struct peer *mrs)
{
	frame_init(f, type);
	put_u32(f + AT_QPN, rc->qp->qp_num);
	put_u32(f + AT_PSN, rc->psn);
	memcpy(f + AT_GID, rc->gid, 16);
	if (!mrs)
		return;
	put_u64(f + AT_WRITE_ADDR, mrs->write_addr);
	put_u32(f + AT_WRITE_RKEY, mrs->write_rkey);
	put_u32(f + AT_WRITE_LEN, mrs->write_len);
	put_u64(f + AT_COUNTER_ADDR, mrs->counter_addr);
	put_u32(f + AT_COUNTER_RKEY, mrs->counter_rkey);
}

/* The peer's hello, checked: QPN and PSN fit 24 bits, the GID is set and,
 * from the server, the MRs are what the client will address. */
static void hello_decode(const uint8_t *f, struct peer *p, bool from_server)
{
	p->qpn = get_u32(f + AT_QPN);
	p->psn = get_u32(f + AT_PSN);
	memcpy(p->gid, f + AT_GID, 16);
	if (!p->qpn || p->qpn > 0xffffff || p->psn > 0xffffff)
		fail("peer hello: QPN %#x / PSN %#x out of range", p->qpn, p->psn);
	if (gid_is_zero(p->gid))
		fail("peer hello: empty GID");
	if (!from_server)
		return;
	p->write_addr = get_u64(f + AT_WRITE_ADDR);
	p->write_rkey = get_u32(f + AT_WRITE_RKEY);
	p->write_len = get_u32(f + AT_WRITE_LEN);
	p->counter_addr = get_u64(f + AT_COUNTER_ADDR);
	p->counter_rkey = get_u32(f + AT_COUNTER_RKEY);
	if (p->write_len != NSLOTS * SLOT_SIZE || !p->write_addr ||
	    p->write_addr > UINT64_MAX - p->write_len)
		fail("server hello: write region %#" PRIx64 " + %u, want %u bytes", p->write_addr,
		     p->write_len, NSLOTS * SLOT_SIZE);
	if (!p->counter_addr || p->counter_addr % 8)
		fail("server hello: counter address %#" PRIx64 " not 8-byte aligned",
		     p->counter_addr);
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

/* DEV opened, its limits checked and applied; PD, CQ and one RC QP in
 * INIT; our GID and a random first PSN. */
static void rc_open(struct rc *rc, const char *dev, int gid_index, uint32_t rq_want)
{
	struct ibv_port_attr port;
	union ibv_gid gid;
	struct timespec t;
	int ret;

	rc->gid_index = gid_index;
	rc->ctx = nested_open_device(dev);
	if (!rc->ctx)
		fail("no RDMA device %s", dev);
	if ((ret = ibv_query_device(rc->ctx, &rc->dev)))
		fail("ibv_query_device: %s", strerror(ret));
	if (rc->dev.atomic_cap == IBV_ATOMIC_NONE)
		fail("%s offers no atomics", dev);
	if (rc->dev.max_qp_rd_atom < 1 || rc->dev.max_qp_init_rd_atom < 1)
		fail("%s allows no outstanding READ/atomic (%d, %d)", dev, rc->dev.max_qp_rd_atom,
		     rc->dev.max_qp_init_rd_atom);
	if ((ret = ibv_query_port(rc->ctx, 1, &port)))
		fail("ibv_query_port: %s", strerror(ret));
	rc->mtu = port.active_mtu < IBV_MTU_1024 ? port.active_mtu : IBV_MTU_1024;
	rc->sq_depth = min_u32(SQ_DEPTH, (uint32_t)rc->dev.max_qp_wr);
	rc->rq_depth = min_u32(rq_want, (uint32_t)rc->dev.max_qp_wr);
	if (rc->sq_depth < MAX_WR_PER_ROUND || rc->rq_depth < 1 || rc->dev.max_sge < 1)
		fail("%s: max_qp_wr %d / max_sge %d too small", dev, rc->dev.max_qp_wr,
		     rc->dev.max_sge);
	if (ibv_query_gid(rc->ctx, 1, gid_index, &gid))
		fail("ibv_query_gid(port 1, index %d): %s", gid_index, strerror(errno));
	memcpy(rc->gid, gid.raw, 16);
	if (gid_is_zero(rc->gid))
		fail("GID index %d of %s is empty", gid_index, dev);

	rc->pd = ibv_alloc_pd(rc->ctx);
	if (!rc->pd)
		fail("ibv_alloc_pd: %s", strerror(errno));
	rc->cq = ibv_create_cq(rc->ctx, (int)min_u32(rc->sq_depth + rc->rq_depth,
						     (uint32_t)rc->dev.max_cqe), NULL, NULL, 0);
	if (!rc->cq)
		fail("ibv_create_cq: %s", strerror(errno));

	struct ibv_qp_init_attr init = {
		.send_cq = rc->cq, .recv_cq = rc->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = rc->sq_depth, .max_recv_wr = rc->rq_depth,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.sq_sig_all = 0, /* every WR asks for its completion itself */
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	rc->qp = ibv_create_qp(rc->pd, &init);
	if (!rc->qp)
		fail("ibv_create_qp: %s", strerror(errno));
	if ((ret = ibv_modify_qp(rc->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						     IBV_QP_ACCESS_FLAGS)))
		fail("QP to INIT: %s", strerror(ret));
	clock_gettime(CLOCK_REALTIME, &t);
	rc->psn = ((uint32_t)t.tv_nsec ^ ((uint32_t)getpid() << 8)) & 0xffffff;
}

static void rc_connect(struct rc *rc, const struct peer *p)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = rc->mtu,
		.dest_qp_num = p->qpn, .rq_psn = p->psn,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .sgid_index = (uint8_t)rc->gid_index, .hop_limit = 64 } },
	};
	int ret;

	memcpy(a.ah_attr.grh.dgid.raw, p->gid, 16);
	if ((ret = ibv_modify_qp(rc->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
						     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
						     IBV_QP_MAX_DEST_RD_ATOMIC |
						     IBV_QP_MIN_RNR_TIMER)))
		fail("QP to RTR: %s", strerror(ret));
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTS, .sq_psn = rc->psn, .timeout = 14,
		.retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1,
	};
	if ((ret = ibv_modify_qp(rc->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
						     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						     IBV_QP_MAX_QP_RD_ATOMIC)))
		fail("QP to RTS: %s", strerror(ret));
}

static void *alloc_zeroed(size_t align, size_t len)
{
	void *p = aligned_alloc(align, len);

	if (!p)
		fail("aligned_alloc(%zu): %s", len, strerror(errno));
	memset(p, 0, len);
	return p;
}

static struct ibv_mr *reg(struct rc *rc, void *buf, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(rc->pd, buf, len, access);

	if (!mr)
		fail("ibv_reg_mr(%zu bytes): %s", len, strerror(errno));
	return mr;
}

/* Any completion within DRAIN_MS is one too many. */
static void expect_no_more(struct rc *rc, const char *after)
{
	uint64_t end = now_ms() + DRAIN_MS;
	struct ibv_wc wc;

	while (now_ms() < end) {
		int n = ibv_poll_cq(rc->cq, 1, &wc);

		if (n < 0)
			fail("ibv_poll_cq: %d", n);
		if (n)
			fail("extra completion after %s: wr_id %" PRIu64 " opcode %d status %s",
			     after, wc.wr_id, wc.opcode, ibv_wc_status_str(wc.status));
		nap();
	}
}

/* ---- server ---- */

struct server {
	struct rc rc;
	uint8_t *slots;              /* NSLOTS x SLOT_SIZE, the client's WRITE target */
	volatile uint64_t *counter;  /* the client's FETCH_AND_ADD target */
	uint8_t *recv_buf;           /* NRECV x MSG_SIZE */
	struct ibv_mr *recv_mr;
	/* Receives complete in posting order: the ring of wr_ids posted. */
	uint64_t ring[NRECV];
	uint32_t ring_head, ring_count;
	uint64_t next_round;
	uint8_t want[SLOT_SIZE];
};

static void post_recv(struct server *s, uint64_t idx)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(s->recv_buf + idx * MSG_SIZE), .length = MSG_SIZE,
		.lkey = s->recv_mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = idx, .sg_list = &sge, .num_sge = 1 }, *bad;
	int ret;

	/* Cleared, so a completion whose data never landed cannot pass. */
	memset(s->recv_buf + idx * MSG_SIZE, 0, MSG_SIZE);
	if ((ret = ibv_post_recv(s->rc.qp, &wr, &bad)))
		fail("ibv_post_recv: %s", strerror(ret));
	s->ring[(s->ring_head + s->ring_count) % s->rc.rq_depth] = idx;
	s->ring_count++;
}

/* One receive completion: the next round's SEND, its WRITE already there. */
static void server_take(struct server *s, const struct ibv_wc *wc, bool done, uint64_t rounds)
{
	uint64_t idx, round, sum;
	const uint8_t *msg;
	long at;

	if (wc->status != IBV_WC_SUCCESS)
		fail("server receive completion %s (wr_id %" PRIu64 ", round %" PRIu64 " next)",
		     ibv_wc_status_str(wc->status), wc->wr_id, s->next_round);
	if (wc->opcode != IBV_WC_RECV || (wc->wc_flags & IBV_WC_WITH_IMM))
		fail("server completion opcode %d flags %#x, expected a plain receive", wc->opcode,
		     wc->wc_flags);
	if (!s->ring_count || wc->wr_id != s->ring[s->ring_head])
		fail("receive completion wr_id %" PRIu64 ", expected %" PRIu64
		     " (lost or doubled receive completion)", wc->wr_id,
		     s->ring_count ? s->ring[s->ring_head] : UINT64_MAX);
	if (wc->byte_len != MSG_SIZE)
		fail("round %" PRIu64 ": SEND of %u bytes, want %d", s->next_round, wc->byte_len,
		     MSG_SIZE);
	idx = wc->wr_id;
	s->ring_head = (s->ring_head + 1) % s->rc.rq_depth;
	s->ring_count--;

	msg = s->recv_buf + idx * MSG_SIZE;
	round = get_u64(msg);
	sum = get_u64(msg + 8);
	if (round != s->next_round)
		fail("SEND carries round %" PRIu64 ", expected %" PRIu64
		     " (lost, duplicated or reordered SEND)", round, s->next_round);
	if (done && round >= rounds)
		fail("SEND for round %" PRIu64 " after the client's last round %" PRIu64, round,
		     rounds - 1);
	fill_pattern(s->want, SLOT_SIZE, round);
	if (sum != checksum(s->want, SLOT_SIZE))
		fail("round %" PRIu64 ": SEND's checksum %#" PRIx64 " is not the pattern's", round,
		     sum);
	if ((at = first_diff(msg + MSG_PATTERN_OFF, s->want, MSG_SIZE - MSG_PATTERN_OFF)) >= 0)
		fail("round %" PRIu64 ": SEND byte %ld wrong", round, MSG_PATTERN_OFF + at);
	at = first_diff(s->slots + (round % NSLOTS) * SLOT_SIZE, s->want, SLOT_SIZE);
	if (at >= 0)
		fail("round %" PRIu64 ": slot %" PRIu64 " byte %ld is %#x, want %#x: the WRITE "
		     "before this SEND did not land whole", round, round % NSLOTS, at,
		     s->slots[(round % NSLOTS) * SLOT_SIZE + (size_t)at], s->want[at]);
	s->next_round++;
	post_recv(s, idx);
}

static int server(const char *dev, int port, int gid_index, int seconds)
{
	static struct server s;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_ANY) };
	uint8_t f[FRAME_SIZE];
	struct ibv_mr *slots_mr, *counter_mr;
	struct peer me = { 0 }, client;
	uint64_t rounds = 0, atomics = 0, counter, last_progress, deadline;
	int one = 1, ls, fd;
	bool done = false;

	rc_open(&s.rc, dev, gid_index, NRECV);
	s.slots = alloc_zeroed(4096, NSLOTS * SLOT_SIZE);
	s.counter = alloc_zeroed(64, 64);
	s.recv_buf = alloc_zeroed(4096, (size_t)s.rc.rq_depth * MSG_SIZE);
	slots_mr = reg(&s.rc, s.slots, NSLOTS * SLOT_SIZE,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	counter_mr = reg(&s.rc, (void *)s.counter, 64,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	s.recv_mr = reg(&s.rc, s.recv_buf, (size_t)s.rc.rq_depth * MSG_SIZE,
			IBV_ACCESS_LOCAL_WRITE);
	/* Posted in INIT already: the first SEND finds them. */
	for (uint64_t i = 0; i < s.rc.rq_depth; i++)
		post_recv(&s, i);

	me.write_addr = (uintptr_t)s.slots;
	me.write_rkey = slots_mr->rkey;
	me.write_len = NSLOTS * SLOT_SIZE;
	me.counter_addr = (uintptr_t)s.counter;
	me.counter_rkey = counter_mr->rkey;
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1))
		fail("listen on %d: %s", port, strerror(errno));
	/* A connection that closes before the client's hello is a probe of
	 * the forwarding path (QEMU's user network accepts before we do). */
	for (;;) {
		fd = accept(ls, NULL, NULL);
		if (fd < 0)
			fail("accept: %s", strerror(errno));
		hello_encode(f, FRAME_HELLO_SERVER, &s.rc, &me);
		if (nested_tcp_write_all(fd, f, FRAME_SIZE) == 0 &&
		    frame_read(fd, f, FRAME_HELLO_CLIENT, wait_s()) == 0)
			break;
		close(fd);
	}
	hello_decode(f, &client, false);
	rc_connect(&s.rc, &client);
	frame_init(f, FRAME_READY);
	if (nested_tcp_write_all(fd, f, FRAME_SIZE))
		fail("client gone before READY");
	printf("RC-CHECK server connected\n");

	/* Until DONE and every round it counts.  No SEND for twice the
	 * client's own completion wait means the client is stuck; the whole
	 * run may take SECONDS plus a few waits at most. */
	last_progress = now_ms();
	deadline = last_progress + ((uint64_t)seconds + 4 * (uint64_t)wait_s()) * 1000;
	while (!done || s.next_round < rounds) {
		struct ibv_wc wc[8];
		int n = ibv_poll_cq(s.rc.cq, 8, wc);
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t t = now_ms();

		if (n < 0)
			fail("ibv_poll_cq: %d", n);
		for (int i = 0; i < n; i++)
			server_take(&s, &wc[i], done, rounds);
		if (n) {
			last_progress = t;
			continue;
		}
		if (!done && poll(&pfd, 1, 0) > 0) {
			if (frame_read(fd, f, FRAME_DONE, wait_s()))
				fail("client gone before DONE (%" PRIu64 " rounds received)",
				     s.next_round);
			rounds = get_u64(f + AT_ROUNDS);
			atomics = get_u64(f + AT_ATOMICS);
			done = true;
			last_progress = t;
			/* Rounds 0, 4, 8, ... fetch-add: the two counts agree. */
			if (atomics != (rounds + 3) / 4)
				fail("DONE says %" PRIu64 " rounds but %" PRIu64 " fetch-adds", rounds,
				     atomics);
			if (s.next_round > rounds)
				fail("received %" PRIu64 " rounds, the client completed %" PRIu64,
				     s.next_round, rounds);
			continue;
		}
		if (t - last_progress > 2 * (uint64_t)wait_s() * 1000)
			fail("no SEND for %d s (%" PRIu64 " rounds received, %s)", 2 * wait_s(),
			     s.next_round, done ? "client DONE" : "no DONE");
		if (t > deadline)
			fail("run not over after %d s", seconds + 4 * wait_s());
		nap();
	}
	expect_no_more(&s.rc, "the client's last round");

	counter = *s.counter;
	frame_init(f, FRAME_VERDICT);
	put_u64(f + AT_ROUNDS, s.next_round);
	put_u64(f + AT_ATOMICS, counter);
	put_u32(f + AT_OK, counter == atomics);
	if (nested_tcp_write_all(fd, f, FRAME_SIZE))
		fail("client gone before the verdict");
	if (counter != atomics)
		fail("counter is %" PRIu64 " after %" PRIu64 " fetch-adds completed", counter,
		     atomics);
	printf("RC-CHECK server rounds %" PRIu64 " atomics %" PRIu64 " ok\n", s.next_round,
	       counter);
	close(fd);
	close(ls);
	return 0;
}

/* ---- client ---- */

/* Local buffers, one MR: the WRITE's source, the READ's target, the SEND's
 * message, the fetch-add's result. */
#define C_SRC 0
#define C_READ SLOT_SIZE
#define C_MSG (2 * SLOT_SIZE)
#define C_OLD (2 * SLOT_SIZE + MSG_SIZE)
#define C_LEN (3 * SLOT_SIZE)

struct client {
	struct rc rc;
	struct peer srv;
	uint8_t *buf;
	struct ibv_mr *mr;
	uint64_t next_wr_id;
	uint64_t rounds, atomics, reads;
	uint64_t last_cqe_ms, longest_gap_ms;
};

/* The next completion, within the wait; it must be exactly the WR posted
 * next (one RC send queue completes in order) and a success. */
static void client_complete(struct client *c, uint64_t wr_id, enum ibv_wc_opcode opcode,
			    uint64_t round, struct ibv_wc *wc)
{
	uint64_t start = now_ms(), t;
	int n;

	while (!(n = ibv_poll_cq(c->rc.cq, 1, wc))) {
		if (now_ms() - start > (uint64_t)wait_s() * 1000)
			fail("round %" PRIu64 ": no completion for wr_id %" PRIu64 " in %d s", round,
			     wr_id, wait_s());
		nap();
	}
	if (n < 0)
		fail("ibv_poll_cq: %d", n);
	t = now_ms();
	if (c->last_cqe_ms && t - c->last_cqe_ms > c->longest_gap_ms)
		c->longest_gap_ms = t - c->last_cqe_ms;
	c->last_cqe_ms = t;
	if (wc->status != IBV_WC_SUCCESS)
		fail("round %" PRIu64 ": wr_id %" PRIu64 " completed with %s (vendor_err %#x)",
		     round, wc->wr_id, ibv_wc_status_str(wc->status), wc->vendor_err);
	if (wc->wr_id != wr_id)
		fail("round %" PRIu64 ": completion for wr_id %" PRIu64 ", expected %" PRIu64
		     " (lost, doubled or reordered completion)", round, wc->wr_id, wr_id);
	if (wc->opcode != opcode)
		fail("round %" PRIu64 ": wr_id %" PRIu64 " completed as opcode %d, posted %d",
		     round, wr_id, wc->opcode, opcode);
}

static void client_round(struct client *c, uint64_t round)
{
	struct ibv_sge sge[MAX_WR_PER_ROUND];
	struct ibv_send_wr wr[MAX_WR_PER_ROUND], *bad;
	enum ibv_wc_opcode want[MAX_WR_PER_ROUND];
	uint64_t first_id = c->next_wr_id, old;
	uint8_t *src = c->buf + C_SRC, *msg = c->buf + C_MSG;
	bool atomic = round % 4 == 0, read = round % 8 == 0;
	struct ibv_wc wc;
	int n = 0, ret;
	long at;

	fill_pattern(src, SLOT_SIZE, round);
	put_u64(msg, round);
	put_u64(msg + 8, checksum(src, SLOT_SIZE));
	memcpy(msg + MSG_PATTERN_OFF, src, MSG_SIZE - MSG_PATTERN_OFF);
	/* Cleared and poisoned: a READ or fetch-add that brought nothing shows. */
	memset(c->buf + C_READ, 0, SLOT_SIZE);
	memset(c->buf + C_OLD, 0xff, 8);
	memset(wr, 0, sizeof(wr));

	sge[n] = (struct ibv_sge){ (uintptr_t)src, SLOT_SIZE, c->mr->lkey };
	wr[n].opcode = IBV_WR_RDMA_WRITE;
	wr[n].wr.rdma.remote_addr = c->srv.write_addr + (round % NSLOTS) * SLOT_SIZE;
	wr[n].wr.rdma.rkey = c->srv.write_rkey;
	want[n++] = IBV_WC_RDMA_WRITE;

	sge[n] = (struct ibv_sge){ (uintptr_t)msg, MSG_SIZE, c->mr->lkey };
	wr[n].opcode = IBV_WR_SEND;
	want[n++] = IBV_WC_SEND;

	if (atomic) {
		sge[n] = (struct ibv_sge){ (uintptr_t)(c->buf + C_OLD), 8, c->mr->lkey };
		wr[n].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr[n].wr.atomic.remote_addr = c->srv.counter_addr;
		wr[n].wr.atomic.rkey = c->srv.counter_rkey;
		wr[n].wr.atomic.compare_add = 1;
		want[n++] = IBV_WC_FETCH_ADD;
	}
	if (read) {
		sge[n] = (struct ibv_sge){ (uintptr_t)(c->buf + C_READ), SLOT_SIZE, c->mr->lkey };
		wr[n].opcode = IBV_WR_RDMA_READ;
		wr[n].wr.rdma.remote_addr = c->srv.write_addr + (round % NSLOTS) * SLOT_SIZE;
		wr[n].wr.rdma.rkey = c->srv.write_rkey;
		want[n++] = IBV_WC_RDMA_READ;
	}
	for (int i = 0; i < n; i++) {
		wr[i].wr_id = c->next_wr_id++;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	if ((ret = ibv_post_send(c->rc.qp, wr, &bad)))
		fail("round %" PRIu64 ": ibv_post_send: %s (at wr_id %" PRIu64 ")", round,
		     strerror(ret), bad ? bad->wr_id : UINT64_MAX);

	for (int i = 0; i < n; i++) {
		client_complete(c, first_id + (uint64_t)i, want[i], round, &wc);
		if (want[i] == IBV_WC_FETCH_ADD) {
			if (wc.byte_len != 8)
				fail("round %" PRIu64 ": fetch-add byte_len %u", round, wc.byte_len);
			/* The result lands in host order, like any local memory. */
			memcpy(&old, c->buf + C_OLD, 8);
			if (old != c->atomics) {
				uint64_t later;

				/* Late or lost: what the buffer holds a moment after. */
				usleep(500 * 1000);
				memcpy(&later, c->buf + C_OLD, 8);
				fail("round %" PRIu64 ": fetch-add returned %" PRIu64 " (%" PRIu64
				     " 0.5 s later) after %" PRIu64 " fetch-adds: not exactly once"
				     " (longest gap so far %" PRIu64 " ms)", round, old, later,
				     c->atomics, c->longest_gap_ms);
			}
			c->atomics++;
		}
		if (want[i] == IBV_WC_RDMA_READ) {
			if (wc.byte_len != SLOT_SIZE)
				fail("round %" PRIu64 ": READ byte_len %u", round, wc.byte_len);
			if ((at = first_diff(c->buf + C_READ, src, SLOT_SIZE)) >= 0)
				fail("round %" PRIu64 ": READ back byte %ld is %#x, want %#x", round,
				     at, c->buf[C_READ + at], src[at]);
			c->reads++;
		}
	}
	c->rounds++;
}

static int client(const char *dev, const char *host, int port, int gid_index, int seconds)
{
	static struct client c;
	uint8_t f[FRAME_SIZE];
	uint64_t connect_end = now_ms() + (uint64_t)CONNECT_WAITS * wait_s() * 1000;
	uint64_t end, verdict_rounds, verdict_counter;
	int fd = -1;

	rc_open(&c.rc, dev, gid_index, 1);
	c.buf = alloc_zeroed(4096, C_LEN);
	c.mr = reg(&c.rc, c.buf, C_LEN, IBV_ACCESS_LOCAL_WRITE);

	/* The server's guest may boot later: keep trying for CONNECT_WAITS waits. */
	while (fd < 0) {
		if (now_ms() > connect_end)
			fail("no rc-check server at %s:%d within %d s", host, port, CONNECT_WAITS * wait_s());
		fd = nested_tcp_connect(host, port);
		if (fd >= 0 && frame_read(fd, f, FRAME_HELLO_SERVER, wait_s()) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		sleep(1);
	}
	hello_decode(f, &c.srv, true);
	hello_encode(f, FRAME_HELLO_CLIENT, &c.rc, NULL);
	if (nested_tcp_write_all(fd, f, FRAME_SIZE))
		fail("server gone before our hello");
	rc_connect(&c.rc, &c.srv);
	if (frame_read(fd, f, FRAME_READY, wait_s()))
		fail("server not READY within %d s", wait_s());

	end = now_ms() + (uint64_t)seconds * 1000;
	do {
		client_round(&c, c.rounds);
		if (c.rounds == 1) {
			printf("RC-CHECK client running\n");
			fflush(stdout);
		}
	} while (now_ms() < end);
	expect_no_more(&c.rc, "the last round");

	frame_init(f, FRAME_DONE);
	put_u64(f + AT_ROUNDS, c.rounds);
	put_u64(f + AT_ATOMICS, c.atomics);
	if (nested_tcp_write_all(fd, f, FRAME_SIZE))
		fail("server gone before DONE");
	/* The server may wait out a stuck SEND (2 waits) before answering. */
	if (frame_read(fd, f, FRAME_VERDICT, 3 * wait_s()))
		fail("no verdict from the server (it prints why)");
	verdict_rounds = get_u64(f + AT_ROUNDS);
	verdict_counter = get_u64(f + AT_ATOMICS);
	if (get_u32(f + AT_OK) != 1 || verdict_rounds != c.rounds || verdict_counter != c.atomics)
		fail("server verdict %s: it received %" PRIu64 " rounds, counter %" PRIu64
		     "; we completed %" PRIu64 " rounds, %" PRIu64 " fetch-adds",
		     get_u32(f + AT_OK) == 1 ? "ok" : "fail", verdict_rounds, verdict_counter,
		     c.rounds, c.atomics);
	printf("RC-CHECK client rounds %" PRIu64 " atomics %" PRIu64 " reads %" PRIu64
	       " longest-gap-ms %" PRIu64 " ok\n", c.rounds, c.atomics, c.reads, c.longest_gap_ms);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	bool server_mode = argc == 6 && !strcmp(argv[1], "server");

	if (!server_mode && !(argc == 7 && !strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: rc-check server DEV PORT GID_INDEX SECONDS\n"
				"       rc-check client DEV HOST PORT GID_INDEX SECONDS\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int gid_index = (int)parse_num(argv[argc - 2], 0, 255, "GID_INDEX");
	int seconds = (int)parse_num(argv[argc - 1], 1, 86400, "SECONDS");
	int port = (int)parse_num(argv[argc - 3], 1, 65535, "PORT");

	if (server_mode)
		return server(argv[2], port, gid_index, seconds);
	return client(argv[2], argv[3], port, gid_index, seconds);
}

/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of vhost/rdma/rdma-state.c: the RDMA device's state for a
 * migration, written and read back record by record; and every way the
 * bytes a front end hands the destination can be wrong, each refused
 * before any record of it is used.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <glib.h>

#include "rdma-state.h"
#include "unit-common.h"

static const struct rdma_limits lim = {
	.max_mr_size = 4ull << 30, .max_qp_wr = 16383, .max_cqe = 16383, .max_send_sge = 32,
	.max_recv_sge = 32, .max_inline = 256, .gid_tbl_len = 1, .max_rd_atom = 16,
	.atomics = true,
};

/* handle: index 3, generation 2 (rdma-table.c's layout) */
#define H(index, gen) ((uint32_t)(gen) << RDMA_HANDLE_INDEX_BITS | ((index) + 1))

/* ---- what the decoder hands out ---- */

struct seen {
	uint32_t generation;
	GString *log; /* one letter per record, in order */
	struct rdma_state_mr mr;
	uint64_t mr_page1;
	struct rdma_state_cq cq;
	struct rdma_state_qp qp;
	struct vrdma_event ev;
	struct rdma_state_peer peer;
	uint32_t peer_rkey1_host;
	struct rdma_state_cm_listen listen;
	struct rdma_state_cm_conn conn; /* the first */
	struct rdma_state_cm_event cm_ev; /* the last */
	int fail_at; /* the nth record returns an error (0: none) */
};

static int note(struct seen *s, char c)
{
	g_string_append_c(s->log, c);
	return s->fail_at && (int)s->log->len == s->fail_at ? -EIO : 0;
}

static int on_begin(void *o, uint32_t generation)
{
	((struct seen *)o)->generation = generation;
	return 0;
}

static int on_pd(void *o, uint32_t handle)
{
	(void)handle;
	return note(o, 'p');
}

static int on_mr(void *o, struct rdma_state_mr *mr)
{
	struct seen *s = o;

	s->mr = *mr;
	s->mr_page1 = ut_ld(mr->rq.pages + 8, 8);
	return note(o, 'm');
}

static int on_cq(void *o, struct rdma_state_cq *cq)
{
	((struct seen *)o)->cq = *cq;
	return note(o, 'c');
}

static int on_qp(void *o, struct rdma_state_qp *qp)
{
	((struct seen *)o)->qp = *qp;
	return note(o, 'q');
}

static int on_event(void *o, const struct vrdma_event *ev)
{
	((struct seen *)o)->ev = *ev;
	return note(o, 'e');
}

static int on_peer(void *o, const struct rdma_state_peer *peer)
{
	struct seen *s = o;

	s->peer = *peer;
	s->peer_rkey1_host = peer->n_rkeys > 1 ? (uint32_t)ut_ld(peer->rkeys + 12, 4) : 0;
	return note(o, 'P');
}

static int on_cm_listen(void *o, const struct rdma_state_cm_listen *l)
{
	((struct seen *)o)->listen = *l;
	return note(o, 'L');
}

static int on_cm_conn(void *o, const struct rdma_state_cm_conn *c)
{
	struct seen *s = o;

	if (!strchr(s->log->str, 'C'))
		s->conn = *c;
	return note(o, 'C');
}

static int on_cm_event(void *o, const struct rdma_state_cm_event *e)
{
	((struct seen *)o)->cm_ev = *e;
	return note(o, 'E');
}

static const struct rdma_state_ops ops = { on_begin, on_pd,   on_mr,	    on_cq,
					   on_qp,    on_event, on_peer, on_cm_listen,
					   on_cm_conn, on_cm_event };

static int decode(const uint8_t *data, size_t len, struct seen *s)
{
	g_string_truncate(s->log, 0);
	return rdma_state_decode(data, len, &lim, &ops, s);
}

/* ---- a whole state ---- */

/* Ways a state can be wrong only as a whole (rdma_state_check). */
struct shape {
	bool second_pd_same_handle;
	bool second_mr_same_lkey;
	bool second_mr_same_rkey;
	bool two_local_mrs; /* two MRs without remote access: both rkey 0 */
	bool second_qp_same_qpn;
	uint32_t mr_pd, qp_recv_cq; /* 0: the ones the state has */
	unsigned int peers;         /* PEER records, all for the QP... */
	uint32_t peer_qp;           /* ...or this one */
	/* rdma_cm: a listen, a live connection on the QP, an ended one with
	 * its final event; and ways to get them wrong */
	bool cm;
	uint32_t cm_live_qp;        /* 0: the QP */
	bool cm_second_live;        /* another live connection on the QP */
	bool cm_no_final;           /* the ended one without its final event */
	bool cm_final_for_live;     /* a final event for the live one */
	uint32_t cm_event_conn;     /* an event for this connection */
	bool cm_two_finals;         /* the ended one's final event twice */
	bool cm_two_rings;          /* two events that ring */
	bool qp_in_reset;           /* the QP in RESET: no connection goes on on it */
};

/* The rdma_cm records of shape x; the QP is qp. */
static void put_cm(struct rdma_state_writer *w, const struct shape *x, uint32_t qp)
{
	struct rdma_state_cm_conn live = {
		.handle = H(0, 2), .listen = H(0, 1), .qp = x->cm_live_qp ? x->cm_live_qp : qp,
		.live = true, .local_ip = { 10, 0, 0, 1 }, .remote_ip = { 10, 0, 0, 2 },
		.local_port = 7471, .remote_port = 40001,
	};
	struct rdma_state_cm_event ended = {
		.ev = { .type = VRDMA_CM_EV_CLOSED, .conn = H(1, 1), .status = 103 },
		.final = true, .ring = true,
	};

	if (!x->cm)
		return;
	rdma_state_put_cm_listen(w, &(struct rdma_state_cm_listen){ H(0, 1), 7471, 8 });
	rdma_state_put_cm_conn(w, &live);
	if (x->cm_second_live) {
		live.handle = H(2, 1);
		rdma_state_put_cm_conn(w, &live);
	}
	rdma_state_put_cm_conn(w, &(struct rdma_state_cm_conn){ .handle = H(1, 1) });
	if (x->cm_final_for_live) {
		ended.ev.conn = H(0, 2);
		rdma_state_put_cm_event(w, &ended);
		ended.ev.conn = H(1, 1);
	}
	if (x->cm_event_conn) {
		ended.ev.conn = x->cm_event_conn;
		ended.final = false;
		rdma_state_put_cm_event(w, &ended);
		ended.ev.conn = H(1, 1);
		ended.final = true;
	}
	if (!x->cm_no_final)
		rdma_state_put_cm_event(w, &ended);
	if (x->cm_two_finals)
		rdma_state_put_cm_event(w, &ended);
	if (x->cm_two_rings) {
		ended.final = false;
		rdma_state_put_cm_event(w, &ended);
	}
}

/* The QP's peer elsewhere, with two rkeys of a peer that moved before. */
static void put_peers(struct rdma_state_writer *w, const struct shape *x, uint32_t qp)
{
	static const uint8_t rkeys[16] = { 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0 };
	struct rdma_state_peer peer = {
		.qp = x->peer_qp ? x->peer_qp : qp, .n_rkeys = 2, .rkeys = rkeys,
		.link = { .qpn = 0x12, .from_qpn = 0x11, .token = { 0xaa, [15] = 0x55 },
			  .gid = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 2 },
			  .from_gid = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 1 } },
	};

	for (unsigned int i = 0; i < x->peers; i++)
		rdma_state_put_peer(w, &peer);
}

static uint8_t *make_shaped(const struct shape *x, size_t *ret_len)
{
	struct rdma_state_writer w;
	uint64_t mr_pages[3] = { 0x10000, 0x30000, 0x20000 };
	uint64_t cq_pages[2] = { 0x40000, 0x41000 };
	uint64_t qp_pages[3] = { 0x50000, 0x60000, 0x61000 };
	struct rdma_state_mr mr = {
		.handle = H(0, 1), .lkey = 0x1234, .rkey = 0x5678,
		.req = { .pd = H(0, 1), .access = VRDMA_ACCESS_ALL, .iova = 0x7f0000000800ull,
			 .length = 8192, .page_shift = 12, .npages = 3 },
	};
	struct rdma_state_cq cq = {
		.handle = H(1, 4), .prod = 7, .arm = VRDMA_DB_CQ_ARM, .event_pending = true,
		.req = { .log2_slots = 6, .npages = 2 },
	};
	struct rdma_state_qp qp = {
		.handle = H(2, 1), .qpn = 0x11, .sq_next = 3, .sq_tail = 3, .rq_tail = 2,
		.attr = {
			.qp = H(2, 1),
			.attr_mask = VRDMA_QP_STATE | VRDMA_QP_RQ_PSN | VRDMA_QP_SQ_PSN |
				     VRDMA_QP_DEST_QPN,
			.attr = { .qp_state = VRDMA_QPS_RTS, .rq_psn = 0x123456, .sq_psn = 0xabcdef,
				  .dest_qp_num = 0x12 },
		},
		.req = { .pd = H(0, 1), .send_cq = H(1, 4), .recv_cq = H(1, 4),
			 .qp_type = VRDMA_QPT_RC, .max_send_sge = 1, .max_recv_sge = 1,
			 .sq_log2_slots = 2, .sq_log2_slot_size = 8, .rq_log2_slots = 2,
			 .rq_log2_slot_size = 6, .sq_npages = 1, .rq_npages = 1 },
	};
	struct vrdma_event ev = { .type = VRDMA_EV_CQ_COMP, .handle = H(1, 4) };

	rdma_state_begin(&w, 0x9001);
	rdma_state_put_pd(&w, H(0, 1));
	if (x->second_pd_same_handle)
		rdma_state_put_pd(&w, H(0, 1));
	if (x->mr_pd)
		mr.req.pd = x->mr_pd;
	if (x->two_local_mrs) {
		mr.req.access = VRDMA_ACCESS_LOCAL_WRITE;
		mr.rkey = 0;
	}
	rdma_state_put_mr(&w, &mr, mr_pages);
	if (x->second_mr_same_lkey || x->second_mr_same_rkey || x->two_local_mrs) {
		mr.handle = H(3, 1);
		if (x->second_mr_same_lkey)
			mr.rkey++;
		else
			mr.lkey++;
		rdma_state_put_mr(&w, &mr, mr_pages);
	}
	rdma_state_put_cq(&w, &cq, cq_pages);
	if (x->qp_recv_cq)
		qp.req.recv_cq = x->qp_recv_cq;
	if (x->qp_in_reset)
		qp.attr = (struct vrdma_modify_qp_req){ .qp = qp.handle, .attr_mask = VRDMA_QP_STATE };
	rdma_state_put_qp(&w, &qp, qp_pages);
	if (x->second_qp_same_qpn) {
		qp.handle = qp.attr.qp = H(4, 1);
		rdma_state_put_qp(&w, &qp, qp_pages);
	}
	rdma_state_put_event(&w, &ev);
	put_peers(&w, x, qp.handle);
	put_cm(&w, x, qp.handle);
	return rdma_state_end(&w, ret_len);
}

static uint8_t *make_state(size_t *ret_len)
{
	return make_shaped(&(struct shape){ 0 }, ret_len);
}

static void test_round_trip(void **state)
{
	struct seen s = { .log = g_string_new(NULL) };
	g_autofree uint8_t *data = NULL;
	size_t len;

	(void)state;
	data = make_state(&len);
	assert_int_equal(decode(data, len, &s), 0);
	assert_string_equal(s.log->str, "pmcqe");
	assert_int_equal(s.generation, 0x9001);
	assert_int_equal(s.mr.handle, H(0, 1));
	assert_int_equal(s.mr.lkey, 0x1234);
	assert_int_equal(s.mr.rkey, 0x5678);
	assert_false(s.mr.released);
	assert_int_equal(s.mr.req.length, 8192);
	assert_int_equal(s.mr.rq.npages, 3);
	assert_int_equal(s.mr_page1, 0x30000);
	assert_int_equal(s.cq.prod, 7);
	assert_int_equal(s.cq.arm, VRDMA_DB_CQ_ARM);
	assert_true(s.cq.event_pending);
	assert_int_equal(s.qp.qpn, 0x11);
	assert_int_equal(s.qp.rq_tail, 2);
	assert_int_equal(s.qp.attr.attr.sq_psn, 0xabcdef);
	assert_int_equal(s.qp.attr.attr.rq_psn, 0x123456);
	assert_int_equal(s.qp.req.sq_npages, 1);
	assert_int_equal(s.ev.type, VRDMA_EV_CQ_COMP);
	/* What the decoder hands on stops it, and comes back. */
	s.fail_at = 3;
	assert_int_equal(decode(data, len, &s), -EIO);
	assert_string_equal(s.log->str, "pmc");
	g_string_free(s.log, TRUE);
}

/* ---- refusals ---- */

/* The offset of record n (0-based) in a state from make_state(). */
static size_t record_at(const uint8_t *data, unsigned int n)
{
	size_t off = 24;

	while (n--)
		off += 8 + ut_ld(data + off + 4, 4);
	return off;
}

/* A copy of the state with one mutation, which must be refused with no
 * record handed on after the damaged one. */
static void expect_refused(const uint8_t *data, size_t len, const char *what,
			   void (*damage)(uint8_t *copy, size_t *len), const char *seen_before)
{
	struct seen s = { .log = g_string_new(NULL) };
	g_autofree uint8_t *copy = g_malloc(len + 64);
	size_t n = len;
	int r;

	memcpy(copy, data, len);
	memset(copy + len, 0, 64);
	damage(copy, &n);
	r = decode(copy, n, &s);
	if (!r || strcmp(s.log->str, seen_before))
		fail_msg("%s: decoded to %d after records '%s', want a refusal after '%s'", what,
			 r, s.log->str, seen_before);
	g_string_free(s.log, TRUE);
}

static void bad_magic(uint8_t *c, size_t *n) { (void)n; c[0] ^= 1; }
static void bad_version(uint8_t *c, size_t *n) { (void)n; ut_st32(c + 8, 2); }
static void no_generation(uint8_t *c, size_t *n) { (void)n; ut_st32(c + 16, 0); }
static void header_reserved(uint8_t *c, size_t *n) { (void)n; c[20] = 1; }
static void fewer_records(uint8_t *c, size_t *n) { (void)n; ut_st32(c + 12, 4); }
static void more_records(uint8_t *c, size_t *n) { (void)n; ut_st32(c + 12, 6); }
static void huge_count(uint8_t *c, size_t *n) { (void)n; ut_st32(c + 12, 0xffffffffu); }
static void truncated(uint8_t *c, size_t *n) { (void)c; *n -= 3; }
static void trailing(uint8_t *c, size_t *n) { (void)c; *n += 5; }
static void record_too_long(uint8_t *c, size_t *n) { ut_st32(c + record_at(c, 1) + 4, (uint32_t)*n); }
static void unknown_type(uint8_t *c, size_t *n) { (void)n; ut_st16(c + record_at(c, 2), 10); }
static void out_of_order(uint8_t *c, size_t *n) { (void)n; ut_st16(c + record_at(c, 2), 1); }
static void record_reserved(uint8_t *c, size_t *n) { (void)n; c[record_at(c, 1) + 2] = 1; }
static void pd_handle_zero(uint8_t *c, size_t *n) { (void)n; ut_st32(c + record_at(c, 0) + 8, 0); }
static void mr_flags(uint8_t *c, size_t *n) { (void)n; c[record_at(c, 1) + 8 + 12] = 2; }
/* The MR's command says 3 pages; its length one byte more than they hold. */
static void mr_length(uint8_t *c, size_t *n)
{
	(void)n;
	ut_st64(c + record_at(c, 1) + 8 + 16 + 16, 3 * 4096 - 0x800 + 1);
}
static void mr_page_unaligned(uint8_t *c, size_t *n)
{
	(void)n;
	ut_st64(c + record_at(c, 1) + 8 + 16 + 32, 0x10008);
}
static void cq_arm(uint8_t *c, size_t *n) { (void)n; ut_st16(c + record_at(c, 2) + 8 + 8, 9); }
static void cq_prod(uint8_t *c, size_t *n) { (void)n; ut_st32(c + record_at(c, 2) + 8 + 4, 64); }
static void qp_psn(uint8_t *c, size_t *n)
{
	(void)n;
	/* attr.sq_psn: prefix 24, modify request's qp+mask 8, sq_psn at 20. */
	ut_st32(c + record_at(c, 3) + 8 + 24 + 8 + 20, 1u << 24);
}
static void qp_attr_other_qp(uint8_t *c, size_t *n)
{
	(void)n;
	ut_st32(c + record_at(c, 3) + 8 + 24, H(5, 1));
}
static void qp_position(uint8_t *c, size_t *n) { (void)n; ut_st32(c + record_at(c, 3) + 8 + 16, 4); }
static void qp_raw_packet(uint8_t *c, size_t *n)
{
	(void)n;
	/* CREATE_QP's qp_type, after the prefix and the modify request. */
	c[record_at(c, 3) + 8 + 24 + 80 + 12] = 8;
}
static void event_type(uint8_t *c, size_t *n) { (void)n; ut_st16(c + record_at(c, 4) + 8, 99); }

static void test_refusals(void **state)
{
	static const struct {
		const char *what;
		void (*damage)(uint8_t *, size_t *);
		const char *before;
	} cases[] = {
		{ "magic", bad_magic, "" },
		{ "version", bad_version, "" },
		{ "generation 0", no_generation, "" },
		{ "header reserved", header_reserved, "" },
		{ "fewer records than there are", fewer_records, "pmcq" },
		{ "more records than there are", more_records, "pmcqe" },
		{ "a count past the limit", huge_count, "" },
		{ "truncated", truncated, "pmcq" },
		{ "trailing bytes", trailing, "pmcqe" },
		{ "a record past the end", record_too_long, "p" },
		{ "an unknown type", unknown_type, "pm" },
		{ "a PD after a CQ", out_of_order, "pm" },
		{ "record reserved", record_reserved, "p" },
		{ "handle 0", pd_handle_zero, "" },
		{ "unknown MR flags", mr_flags, "p" },
		{ "an MR longer than its pages", mr_length, "p" },
		{ "an unaligned page", mr_page_unaligned, "p" },
		{ "an unknown arm", cq_arm, "pm" },
		{ "a producer index past the ring", cq_prod, "pm" },
		{ "a PSN of 25 bits", qp_psn, "pmc" },
		{ "the attributes of another QP", qp_attr_other_qp, "pmc" },
		{ "a ring position past the ring", qp_position, "pmc" },
		{ "a raw packet QP", qp_raw_packet, "pmc" },
		{ "an unknown event", event_type, "pmcq" },
	};
	g_autofree uint8_t *data = NULL;
	size_t len;

	(void)state;
	data = make_state(&len);
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++)
		expect_refused(data, len, cases[i].what, cases[i].damage, cases[i].before);
}

/* Random bytes, and random damage to a good state: refused, never a crash
 * (the sanitizers watch), never a record past the damage. */
static void test_garbage(void **state)
{
	struct seen s = { .log = g_string_new(NULL) };
	g_autofree uint8_t *data = NULL;
	uint8_t junk[512];
	size_t len;

	(void)state;
	data = make_state(&len);
	ut_rnd_seed(0x5eed);
	for (int i = 0; i < 20000; i++) {
		g_autofree uint8_t *copy = g_memdup2(data, len);
		size_t n = ut_rnd_below(len + 1);

		copy[ut_rnd_below(len)] ^= (uint8_t)(1u << ut_rnd_below(8));
		(void)decode(copy, n, &s);
		for (size_t j = 0; j < sizeof(junk); j++)
			junk[j] = (uint8_t)ut_rnd();
		memcpy(junk, RDMA_STATE_MAGIC, 8);
		(void)decode(junk, ut_rnd_below(sizeof(junk)), &s);
	}
	g_string_free(s.log, TRUE);
}

/* Quotas with room for exactly make_state()'s objects, and nothing used. */
static const struct rdma_quota room = { .pds = 1, .mrs = 1, .cqs = 1, .qps = 1,
					.pinned_bytes = 8192, .wrs = 6 };
static const struct rdma_quota none = { 0 };

/* What rdma_state_check() says of a state of this shape. */
static int check_shaped(const struct shape *x, const struct rdma_quota *limit,
			const struct rdma_quota *used)
{
	g_autofree uint8_t *data = NULL;
	uint32_t generation = 0;
	size_t len;
	int r;

	data = make_shaped(x, &len);
	r = rdma_state_check(data, len, &lim, limit, used, &generation);
	assert_int_equal(generation, r ? 0 : 0x9001);
	return r;
}

/* A state whose every record is fine can still be wrong as a whole: a
 * name twice, an object that is not there, more than the tenant has left.
 * Each is refused before anything of it is made. */
static void test_whole_state(void **state)
{
	struct rdma_quota less;

	(void)state;
	assert_int_equal(check_shaped(&(struct shape){ 0 }, &room, &none), VRDMA_OK);
	assert_int_equal(check_shaped(&(struct shape){ .second_pd_same_handle = true }, &room,
				      &none), VRDMA_EINVAL);
	assert_int_equal(check_shaped(&(struct shape){ .second_mr_same_lkey = true },
				      &(struct rdma_quota){ 1, 2, 1, 1, 16384, 6, 0 }, &none),
			 VRDMA_EINVAL);
	assert_int_equal(check_shaped(&(struct shape){ .second_mr_same_rkey = true },
				      &(struct rdma_quota){ 1, 2, 1, 1, 16384, 6, 0 }, &none),
			 VRDMA_EINVAL);
	/* rkey 0 is "no remote access", not a name: a guest has many such MRs
	 * (perftest's and rc-check's local buffers, in the nested tier). */
	assert_int_equal(check_shaped(&(struct shape){ .two_local_mrs = true },
				      &(struct rdma_quota){ 1, 2, 1, 1, 16384, 6, 0 }, &none),
			 VRDMA_OK);
	assert_int_equal(check_shaped(&(struct shape){ .second_qp_same_qpn = true },
				      &(struct rdma_quota){ 1, 1, 1, 2, 8192, 12, 0 }, &none),
			 VRDMA_EINVAL);
	assert_int_equal(check_shaped(&(struct shape){ .mr_pd = H(8, 1) }, &room, &none),
			 VRDMA_ENOENT);
	assert_int_equal(check_shaped(&(struct shape){ .qp_recv_cq = H(9, 1) }, &room, &none),
			 VRDMA_ENOENT);
	/* One short of each: refused; the tenant's other guests' use counts. */
	for (int i = 0; i < 6; i++) {
		less = room;
		switch (i) {
		case 0: less.pds--; break;
		case 1: less.mrs--; break;
		case 2: less.cqs--; break;
		case 3: less.qps--; break;
		case 4: less.pinned_bytes--; break;
		default: less.wrs--; break;
		}
		assert_int_equal(check_shaped(&(struct shape){ 0 }, &less, &none), VRDMA_ENOSPC);
	}
	assert_int_equal(check_shaped(&(struct shape){ 0 }, &room,
				      &(struct rdma_quota){ .qps = 1 }), VRDMA_ENOSPC);
}

/* A QP's peer elsewhere: what the destination needs to have the peer's
 * back end connect to it, read back as written; refused for a QP the
 * state does not have, twice for one QP, or with its rkeys cut short. */
static void test_peer_record(void **state)
{
	struct seen s = { .log = g_string_new(NULL) };
	g_autofree uint8_t *data = NULL;
	size_t len;

	(void)state;
	data = make_shaped(&(struct shape){ .peers = 1 }, &len);
	assert_int_equal(decode(data, len, &s), 0);
	assert_string_equal(s.log->str, "pmcqeP");
	assert_int_equal(s.peer.qp, H(2, 1));
	assert_int_equal(s.peer.link.qpn, 0x12);
	assert_int_equal(s.peer.link.from_qpn, 0x11);
	assert_int_equal(s.peer.link.token[0], 0xaa);
	assert_int_equal(s.peer.link.token[15], 0x55);
	assert_int_equal(s.peer.link.gid[15], 2);
	assert_int_equal(s.peer.link.from_gid[15], 1);
	assert_int_equal(s.peer.n_rkeys, 2);
	assert_int_equal(s.peer_rkey1_host, 4);
	assert_int_equal(check_shaped(&(struct shape){ .peers = 1 }, &room, &none), VRDMA_OK);
	assert_int_equal(check_shaped(&(struct shape){ .peers = 1, .peer_qp = H(6, 1) }, &room,
				      &none), VRDMA_ENOENT);
	assert_int_equal(check_shaped(&(struct shape){ .peers = 2 }, &room, &none),
			 VRDMA_EINVAL);
	/* The record one rkey pair shorter than it says it holds. */
	ut_st32(data + record_at(data, 5) + 4, 64 + 8);
	assert_int_equal(decode(data, record_at(data, 5) + 8 + 64 + 8, &s), VRDMA_EINVAL);
	ut_st32(data + record_at(data, 5) + 4, 64 + 16);
	assert_int_equal(decode(data, len, &s), 0);
	/* A peer QP number of 25 bits. */
	ut_st32(data + record_at(data, 5) + 8 + 4, 1u << 24);
	assert_int_equal(decode(data, len, &s), VRDMA_EINVAL);
	g_string_free(s.log, TRUE);
}

/*
 * rdma_cm's records: a listen, a connection that goes on (on its QP) and
 * one that ended (with its final event), read back as written; refused
 * for a connection on a QP the state lacks or that is not connected, two
 * on one QP, an ended one without its final event or with two, a final
 * event for one that goes on, an event of no connection, two events that
 * ring, a listen with no backlog, and handles no table of the limits'
 * size hands out.
 */
static void test_cm_records(void **state)
{
	struct seen s = { .log = g_string_new(NULL) };
	g_autofree uint8_t *data = NULL;
	size_t len;

	(void)state;
	data = make_shaped(&(struct shape){ .cm = true }, &len);
	assert_int_equal(decode(data, len, &s), 0);
	assert_string_equal(s.log->str, "pmcqeLCCE");
	assert_int_equal(s.listen.handle, H(0, 1));
	assert_int_equal(s.listen.port, 7471);
	assert_int_equal(s.listen.backlog, 8);
	assert_int_equal(s.conn.handle, H(0, 2));
	assert_int_equal(s.conn.listen, H(0, 1));
	assert_int_equal(s.conn.qp, H(2, 1));
	assert_true(s.conn.live);
	assert_int_equal(s.conn.remote_ip[3], 2);
	assert_int_equal(s.conn.local_port, 7471);
	assert_int_equal(s.conn.remote_port, 40001);
	assert_int_equal(s.cm_ev.ev.type, VRDMA_CM_EV_CLOSED);
	assert_int_equal(s.cm_ev.ev.conn, H(1, 1));
	assert_int_equal(s.cm_ev.ev.status, 103);
	assert_true(s.cm_ev.final);
	assert_true(s.cm_ev.ring);
	assert_int_equal(check_shaped(&(struct shape){ .cm = true }, &room, &none), VRDMA_OK);
	assert_int_equal(check_shaped(&(struct shape){ .cm = true, .cm_live_qp = H(9, 1) }, &room,
				      &none), VRDMA_ENOENT);
	assert_int_equal(check_shaped(&(struct shape){ .cm = true, .cm_second_live = true },
				      &room, &none), VRDMA_EINVAL);
	assert_int_equal(check_shaped(&(struct shape){ .cm = true, .cm_no_final = true }, &room,
				      &none), VRDMA_EINVAL);
	assert_int_equal(check_shaped(&(struct shape){ .cm = true, .cm_final_for_live = true },
				      &room, &none), VRDMA_EINVAL);
	assert_int_equal(check_shaped(&(struct shape){ .cm = true, .cm_event_conn = H(5, 1) },
				      &room, &none), VRDMA_ENOENT);
	assert_int_equal(check_shaped(&(struct shape){ .cm = true, .cm_two_finals = true }, &room,
				      &none), VRDMA_EINVAL);
	assert_int_equal(check_shaped(&(struct shape){ .cm = true, .cm_two_rings = true }, &room,
				      &none), VRDMA_EINVAL);
	assert_int_equal(check_shaped(&(struct shape){ .cm = true, .qp_in_reset = true }, &room,
				      &none), VRDMA_EINVAL);
	assert_int_equal(check_shaped(&(struct shape){ .qp_in_reset = true }, &room, &none),
			 VRDMA_OK);
	/* Bytes the decoder refuses: a listen of backlog 0, a live
	 * connection without its QP, an event flag nobody defined. */
	ut_st16(data + record_at(data, 5) + 8 + 6, 0);
	assert_int_equal(decode(data, len, &s), VRDMA_EINVAL);
	ut_st16(data + record_at(data, 5) + 8 + 6, 8);
	ut_st32(data + record_at(data, 6) + 8 + 8, 0);
	assert_int_equal(decode(data, len, &s), VRDMA_EINVAL);
	ut_st32(data + record_at(data, 6) + 8 + 8, H(2, 1));
	/* An ended connection on a QP; a connection handle no table of 256
	 * hands out. */
	ut_st32(data + record_at(data, 7) + 8 + 8, H(2, 1));
	assert_int_equal(decode(data, len, &s), VRDMA_EINVAL);
	ut_st32(data + record_at(data, 7) + 8 + 8, 0);
	ut_st32(data + record_at(data, 7) + 8, H(256, 1));
	assert_int_equal(decode(data, len, &s), VRDMA_EINVAL);
	ut_st32(data + record_at(data, 7) + 8, H(255, 1));
	assert_int_equal(decode(data, len, &s), 0);
	ut_st32(data + record_at(data, 7) + 8, H(1, 1));
	ut_st32(data + record_at(data, 8) + 8, 4);
	assert_int_equal(decode(data, len, &s), VRDMA_EINVAL);
	ut_st32(data + record_at(data, 8) + 8, 3);
	assert_int_equal(decode(data, len, &s), 0);
	g_string_free(s.log, TRUE);
}

/* Handles placed where a migrated guest had them (rdma-table.c). */
static void test_table_add_at(void **state)
{
	struct rdma_table t = { 0 };
	int a, b, c;

	(void)state;
	assert_int_equal(rdma_table_add_at(&t, &a, H(40, 3)), 0);
	assert_ptr_equal(rdma_table_get(&t, H(40, 3)), &a);
	assert_null(rdma_table_get(&t, H(40, 2)));
	assert_int_equal(rdma_table_add_at(&t, &b, H(40, 3)), -EEXIST);
	assert_int_equal(rdma_table_add_at(&t, &b, 0), -EINVAL);
	assert_int_equal(rdma_table_add_at(&t, &b, H(7, 0)), -EINVAL);
	/* A new handle never takes the slot. */
	for (int i = 0; i < 64; i++)
		assert_int_not_equal(rdma_table_add(&t, &c, UINT32_MAX) & RDMA_TABLE_MAX, 41);
	rdma_table_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_whole_state),
		cmocka_unit_test(test_peer_record),
		cmocka_unit_test(test_cm_records),
		cmocka_unit_test(test_table_add_at),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

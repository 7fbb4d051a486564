// SPDX-License-Identifier: MIT
/*
 * Unit tests of vhost/rdma/rdma-check.c and vhost/rdma/rdma-table.c: the decoding and
 * checking of every byte a guest gives the paravirtual RDMA device, and the
 * generation-tagged handle table.
 *
 * Every control case starts from one valid request and changes exactly one
 * field, so a case fails only for the reason it names.  Expected values come
 * from vhost/rdma/rdma-wire.h and docs/virtio-rdma.md, not from the code under
 * test: ring pages are recomputed here as ceil((384 + slots * slot) / 4096).
 * Some requests sit at an odd address because the unit tier runs under UBSan
 * and guests place page lists wherever they like.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rdma-check-shared.h"
#include "rdma-internal.h"
#include "util.h"

#define FUZZ_ITERATIONS 200000u
#define FUZZ_SEED 0x9e3779b97f4a7c15ull

#define HDR 8u
#define GIB (1ull << 30)

/* The spec's formula, written out again rather than borrowed. */
static uint64_t want_ring_pages(uint32_t log2_slots, uint32_t slot_log2)
{
	return (384 + (1ull << (log2_slots + slot_log2)) + 4095) / 4096;
}

static uint64_t want_span(uint64_t iova, uint64_t length, uint32_t shift)
{
	uint64_t p = 1ull << shift;

	return ((iova & (p - 1)) + length + p - 1) / p;
}

/* ---- building requests ---- */

struct req {
	uint8_t *alloc;
	uint8_t *buf;
	size_t len;
	struct rdma_request rq;
};

/* Header, fixed part, n le64 pages, then `extra` stray bytes.  The buffer is
 * exactly as long as the request (plus the odd byte), so ASan sees overreads. */
static void req_build(struct req *r, uint16_t op, const void *fixed, size_t flen,
		      const uint64_t *pages, size_t n, size_t extra, bool odd)
{
	r->len = HDR + flen + 8 * n + extra;
	r->alloc = g_malloc0(r->len + odd);
	r->buf = r->alloc + odd;
	put_le16(r->buf, op);
	memcpy(r->buf + HDR, fixed, flen);
	for (size_t i = 0; i < n; i++)
		put_le64(r->buf + HDR + flen + 8 * i, pages[i]);
	memset(r->buf + HDR + flen + 8 * n, 0xa5, extra);
	assert_int_equal(rdma_check_header(r->buf, r->len, &r->rq), VRDMA_OK);
	assert_int_equal(r->rq.opcode, op);
	assert_ptr_equal(r->rq.payload, r->buf + HDR);
	assert_int_equal(r->rq.len, r->len - HDR);
}

static void req_free(struct req *r)
{
	g_free(r->alloc);
}

/* n page addresses, each a multiple of `align`, deliberately not contiguous. */
static uint64_t *make_pages(size_t n, uint64_t align)
{
	uint64_t *p = g_new(uint64_t, n ? n : 1);

	for (size_t i = 0; i < n; i++)
		p[i] = (0x100000000ull / align + 3 * i + 1) * align;
	return p;
}

/* ---- header, handle, port, gid ---- */

static void test_header(void **state)
{
	uint8_t b[16] = { 0 };
	struct rdma_request rq;

	(void)state;
	put_le16(b, VRDMA_CMD_QUERY_DEVICE);
	assert_int_equal(rdma_check_header(b, 7, &rq), VRDMA_EINVAL);
	assert_int_equal(rdma_check_header(b, 0, &rq), VRDMA_EINVAL);
	assert_int_equal(rdma_check_header(b, 8, &rq), VRDMA_OK);
	assert_int_equal(rq.len, 0);
	assert_ptr_equal(rq.payload, b + 8);
	for (uint16_t op = 1; op <= VRDMA_CMD_MAX; op++) {
		put_le16(b, op);
		assert_int_equal(rdma_check_header(b, sizeof(b), &rq), VRDMA_OK);
		assert_int_equal(rq.opcode, op);
		assert_int_equal(rq.len, 8);
	}
	put_le16(b, 0);
	assert_int_equal(rdma_check_header(b, sizeof(b), &rq), VRDMA_EOPNOTSUPP);
	put_le16(b, VRDMA_CMD_MAX + 1);
	assert_int_equal(rdma_check_header(b, sizeof(b), &rq), VRDMA_EOPNOTSUPP);
	put_le16(b, VRDMA_CMD_CREATE_PD);
	put_le16(b + 2, 1); /* flags */
	assert_int_equal(rdma_check_header(b, sizeof(b), &rq), VRDMA_EINVAL);
	put_le16(b + 2, 0);
	b[7] = 0x80; /* reserved, top byte */
	assert_int_equal(rdma_check_header(b, sizeof(b), &rq), VRDMA_EINVAL);
}

static void test_handle(void **state)
{
	struct vrdma_handle h = { .handle = 0x100003 };
	uint8_t raw[9] = { 0 };
	struct req r;
	uint32_t out = 0;

	(void)state;
	req_build(&r, VRDMA_CMD_DESTROY_PD, &h, sizeof(h), NULL, 0, 0, true);
	assert_int_equal(rdma_check_handle(&r.rq, &out), VRDMA_OK);
	assert_int_equal(out, 0x100003);
	req_free(&r);
	/* One byte short and one byte long: the handle request has no tail. */
	req_build(&r, VRDMA_CMD_DESTROY_PD, raw, 7, NULL, 0, 0, false);
	assert_int_equal(rdma_check_handle(&r.rq, &out), VRDMA_EINVAL);
	req_free(&r);
	memcpy(raw, &h, sizeof(h));
	req_build(&r, VRDMA_CMD_DESTROY_PD, raw, 9, NULL, 0, 0, false);
	assert_int_equal(rdma_check_handle(&r.rq, &out), VRDMA_EINVAL);
	req_free(&r);
	h.reserved = 1;
	req_build(&r, VRDMA_CMD_DESTROY_PD, &h, sizeof(h), NULL, 0, 0, false);
	assert_int_equal(rdma_check_handle(&r.rq, &out), VRDMA_EINVAL);
	req_free(&r);
	h = (struct vrdma_handle){ 0 };
	req_build(&r, VRDMA_CMD_DESTROY_PD, &h, sizeof(h), NULL, 0, 0, false);
	assert_int_equal(rdma_check_handle(&r.rq, &out), VRDMA_ENOENT);
	req_free(&r);
}

static int port_status(const struct vrdma_port_req *p, size_t len)
{
	struct req r;
	int s;

	req_build(&r, VRDMA_CMD_QUERY_PORT, p, len, NULL, 0, 0, false);
	s = rdma_check_port(&r.rq);
	req_free(&r);
	return s;
}

static int gid_status(const struct vrdma_gid_req *g, uint16_t *index)
{
	struct req r;
	int s;

	req_build(&r, VRDMA_CMD_QUERY_GID, g, sizeof(*g), NULL, 0, 0, true);
	s = rdma_check_gid(&r.rq, &lim_full, index);
	req_free(&r);
	return s;
}

static void test_port_gid(void **state)
{
	struct vrdma_port_req p = { .port = 1 };
	struct vrdma_gid_req g = { .port = 1, .index = 15 };
	uint16_t index = 0;

	(void)state;
	assert_int_equal(port_status(&p, sizeof(p)), VRDMA_OK);
	assert_int_equal(port_status(&p, sizeof(p) - 1), VRDMA_EINVAL);
	p.port = 2;
	assert_int_equal(port_status(&p, sizeof(p)), VRDMA_EINVAL);
	p.port = 0;
	assert_int_equal(port_status(&p, sizeof(p)), VRDMA_EINVAL);
	p = (struct vrdma_port_req){ .port = 1, .reserved[6] = 1 };
	assert_int_equal(port_status(&p, sizeof(p)), VRDMA_EINVAL);

	assert_int_equal(gid_status(&g, &index), VRDMA_OK);
	assert_int_equal(index, 15);
	g.index = 16; /* gid_tbl_len */
	assert_int_equal(gid_status(&g, &index), VRDMA_EINVAL);
	g = (struct vrdma_gid_req){ .port = 2, .index = 0 };
	assert_int_equal(gid_status(&g, &index), VRDMA_EINVAL);
	g = (struct vrdma_gid_req){ .port = 1, .reserved = 1 };
	assert_int_equal(gid_status(&g, &index), VRDMA_EINVAL);
	g = (struct vrdma_gid_req){ .port = 1, .reserved2 = 1u << 31 };
	assert_int_equal(gid_status(&g, &index), VRDMA_EINVAL);
}

/* ---- REG_MR ---- */

/* 4 KiB pages, iova 100 bytes into its page: 4096 bytes span 2 pages. */
static struct vrdma_reg_mr_req mr_base(void)
{
	return (struct vrdma_reg_mr_req){
		.pd = 0x100001,
		.access = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_READ |
			  VRDMA_ACCESS_REMOTE_WRITE,
		.iova = 0x7f0000001000ull + 100,
		.length = 4096,
		.page_shift = 12,
		.npages = 2,
	};
}

/* n pages aligned to the MR's page size (4 KiB when the shift is bogus). */
static int mr_status_n(const struct vrdma_reg_mr_req *m, const struct rdma_limits *lim,
		       size_t n, size_t extra)
{
	uint64_t align = m->page_shift == 21 ? 1ull << 21 : 4096;
	uint64_t *pages = make_pages(n, align);
	struct vrdma_reg_mr_req out;
	struct req r;
	int s;

	req_build(&r, VRDMA_CMD_REG_MR, m, sizeof(*m), pages, n, extra, false);
	s = rdma_check_reg_mr(&r.rq, lim, &out);
	req_free(&r);
	g_free(pages);
	return s;
}

static int mr_status(const struct vrdma_reg_mr_req *m)
{
	return mr_status_n(m, &lim_full, m->npages, 0);
}

static void test_reg_mr_fields(void **state)
{
	struct vrdma_reg_mr_req m = mr_base();
	struct rdma_limits small = lim_full;

	(void)state;
	assert_int_equal(mr_status(&m), VRDMA_OK);
	m.access |= 0x10;
	assert_int_equal(mr_status(&m), VRDMA_EPERM);
	m.access = VRDMA_ACCESS_REMOTE_WRITE;
	assert_int_equal(mr_status(&m), VRDMA_EINVAL);
	m.access = VRDMA_ACCESS_REMOTE_ATOMIC | VRDMA_ACCESS_REMOTE_READ;
	assert_int_equal(mr_status(&m), VRDMA_EINVAL);
	/* Remote read alone writes nothing locally: allowed. */
	m.access = VRDMA_ACCESS_REMOTE_READ;
	assert_int_equal(mr_status(&m), VRDMA_OK);
	m.access = 0;
	assert_int_equal(mr_status(&m), VRDMA_OK);

	m = mr_base();
	m.length = 0;
	assert_int_equal(mr_status(&m), VRDMA_EINVAL);
	/* Same offset in the page, so the span is still 2: only the wrap is wrong. */
	m = mr_base();
	m.iova = 0xfffffffffffff000ull + 100;
	assert_int_equal(mr_status(&m), VRDMA_EINVAL);
	m.iova = 0xffffffffffffe000ull + 100;
	assert_int_equal(mr_status(&m), VRDMA_OK);

	/* A small max_mr_size keeps the page list short: 8193 bytes at offset
	 * 100 still span 3 pages, so only the size differs. */
	small.max_mr_size = 8192;
	m = mr_base();
	m.length = 8192;
	m.npages = 3;
	assert_int_equal(mr_status_n(&m, &small, 3, 0), VRDMA_OK);
	m.length = 8193;
	assert_int_equal(mr_status_n(&m, &small, 3, 0), VRDMA_E2BIG);

	m = mr_base();
	m.page_shift = 13;
	assert_int_equal(mr_status(&m), VRDMA_EINVAL);
	m.page_shift = 0;
	assert_int_equal(mr_status(&m), VRDMA_EINVAL);
}

static void test_reg_mr_pages(void **state)
{
	struct vrdma_reg_mr_req m = mr_base(), out;
	uint64_t *pages;
	struct req r;

	(void)state;
	/* npages disagreeing with the span, page list matching npages. */
	m.npages = 1;
	assert_int_equal(mr_status(&m), VRDMA_EINVAL);
	m.npages = 3;
	assert_int_equal(mr_status(&m), VRDMA_EINVAL);
	/* npages right, page list bytes wrong. */
	m = mr_base();
	assert_int_equal(mr_status_n(&m, &lim_full, 1, 0), VRDMA_EINVAL);
	assert_int_equal(mr_status_n(&m, &lim_full, 3, 0), VRDMA_EINVAL);
	assert_int_equal(mr_status_n(&m, &lim_full, 2, 4), VRDMA_EINVAL);
	assert_int_equal(mr_status_n(&m, &lim_full, 1, 7), VRDMA_EINVAL);

	/* One page off by 8 bytes. */
	pages = make_pages(2, 4096);
	pages[1] += 8;
	req_build(&r, VRDMA_CMD_REG_MR, &m, sizeof(m), pages, 2, 0, false);
	assert_int_equal(rdma_check_reg_mr(&r.rq, &lim_full, &out), VRDMA_EINVAL);
	req_free(&r);
	g_free(pages);

	/* Valid, 4 KiB, at an odd address: the page list is read unaligned. */
	pages = make_pages(2, 4096);
	req_build(&r, VRDMA_CMD_REG_MR, &m, sizeof(m), pages, 2, 0, true);
	assert_int_equal(rdma_check_reg_mr(&r.rq, &lim_full, &out), VRDMA_OK);
	assert_memory_equal(&out, &m, sizeof(m));
	assert_int_equal(r.rq.npages, 2);
	assert_ptr_equal(r.rq.pages, r.buf + HDR + sizeof(m));
	{
		uint64_t *got = rdma_request_pages(&r.rq, 0, 2);
		uint64_t *tail = rdma_request_pages(&r.rq, 1, 1);

		assert_memory_equal(got, pages, 16);
		assert_int_equal(tail[0], pages[1]);
		g_free(got);
		g_free(tail);
	}
	req_free(&r);
	g_free(pages);

	/* Valid, 2 MiB pages, 8 KiB straddling a 2 MiB boundary. */
	m = mr_base();
	m.iova = 0x40000000ull + 0x1ff000;
	m.length = 0x2000;
	m.page_shift = 21;
	m.npages = 2;
	assert_int_equal(want_span(m.iova, m.length, 21), 2);
	pages = make_pages(2, 1ull << 21);
	req_build(&r, VRDMA_CMD_REG_MR, &m, sizeof(m), pages, 2, 0, true);
	assert_int_equal(rdma_check_reg_mr(&r.rq, &lim_full, &out), VRDMA_OK);
	assert_int_equal(r.rq.npages, 2);
	{
		uint64_t *got = rdma_request_pages(&r.rq, 0, 2);

		assert_memory_equal(got, pages, 16);
		g_free(got);
	}
	req_free(&r);
	/* 4 KiB aligned is not enough for 2 MiB pages. */
	pages[0] += 4096;
	req_build(&r, VRDMA_CMD_REG_MR, &m, sizeof(m), pages, 2, 0, false);
	assert_int_equal(rdma_check_reg_mr(&r.rq, &lim_full, &out), VRDMA_EINVAL);
	req_free(&r);
	g_free(pages);
}

/* The largest MR: 4 GiB in 4 KiB pages is 2^20 entries, an 8 MiB list. */
static void test_reg_mr_max(void **state)
{
	struct vrdma_reg_mr_req m = mr_base();

	(void)state;
	m.iova = 0x10000000ull;
	m.length = 4 * GIB;
	m.npages = 1u << 20;
	assert_int_equal(mr_status(&m), VRDMA_OK);
	m.length = 4 * GIB + 1;
	m.npages = (1u << 20) + 1;
	assert_int_equal(mr_status(&m), VRDMA_E2BIG);
}

/* ---- CREATE_CQ ---- */

static int cq_status_n(const struct vrdma_create_cq_req *c, const struct rdma_limits *lim,
		       size_t n, bool odd)
{
	uint64_t *pages = make_pages(n, 4096);
	struct vrdma_create_cq_req out;
	struct req r;
	int s;

	req_build(&r, VRDMA_CMD_CREATE_CQ, c, sizeof(*c), pages, n, 0, odd);
	s = rdma_check_create_cq(&r.rq, lim, &out);
	if (s == VRDMA_OK) {
		assert_memory_equal(&out, c, sizeof(*c));
		assert_int_equal(r.rq.npages, n);
	}
	req_free(&r);
	g_free(pages);
	return s;
}

static int cq_status(const struct vrdma_create_cq_req *c, const struct rdma_limits *lim)
{
	return cq_status_n(c, lim, c->npages, false);
}

static void test_create_cq(void **state)
{
	struct vrdma_create_cq_req c = { .log2_slots = 6, .npages = 2 };
	struct rdma_limits small = lim_full;
	uint64_t *pages;
	struct req r;

	(void)state;
	assert_int_equal(want_ring_pages(6, 6), 2);
	assert_int_equal(rdma_ring_bytes(6, 6), 384 + 4096);
	assert_int_equal(cq_status_n(&c, &lim_full, 2, true), VRDMA_OK);
	c.log2_slots = 14;
	c.npages = want_ring_pages(14, 6);
	assert_int_equal(cq_status(&c, &lim_full), VRDMA_OK);
	c.log2_slots = 0;
	c.npages = want_ring_pages(0, 6);
	assert_int_equal(cq_status(&c, &lim_full), VRDMA_EINVAL);
	c.log2_slots = 15; /* above RDMA_MAX_LOG2_SLOTS */
	c.npages = want_ring_pages(15, 6);
	assert_int_equal(cq_status(&c, &lim_full), VRDMA_E2BIG);

	/* Capacity 2^n - 1 against max_cqe 255: 8 fits, 9 does not. */
	small.max_cqe = 255;
	c.log2_slots = 8;
	c.npages = want_ring_pages(8, 6);
	assert_int_equal(cq_status(&c, &small), VRDMA_OK);
	c.log2_slots = 9;
	c.npages = want_ring_pages(9, 6);
	assert_int_equal(cq_status(&c, &small), VRDMA_E2BIG);

	c = (struct vrdma_create_cq_req){ .log2_slots = 6, .npages = 3 };
	assert_int_equal(cq_status(&c, &lim_full), VRDMA_EINVAL);
	c.npages = 1;
	assert_int_equal(cq_status(&c, &lim_full), VRDMA_EINVAL);
	c.npages = 2;
	assert_int_equal(cq_status_n(&c, &lim_full, 1, false), VRDMA_EINVAL);
	assert_int_equal(cq_status_n(&c, &lim_full, 3, false), VRDMA_EINVAL);
	c.comp_vector = 1;
	assert_int_equal(cq_status(&c, &lim_full), VRDMA_EINVAL);
	c.comp_vector = 0;
	c.reserved = 1;
	assert_int_equal(cq_status(&c, &lim_full), VRDMA_EINVAL);
	c.reserved = 0;

	pages = make_pages(2, 4096);
	pages[0] |= 0x800;
	req_build(&r, VRDMA_CMD_CREATE_CQ, &c, sizeof(c), pages, 2, 0, true);
	{
		struct vrdma_create_cq_req out;

		assert_int_equal(rdma_check_create_cq(&r.rq, &lim_full, &out), VRDMA_EINVAL);
	}
	req_free(&r);
	g_free(pages);
}

/* ---- CREATE_QP ---- */

/* SQ: 16 slots of 512 bytes (208 + 16*4 SGEs, 208 + 64 inline): 3 pages.
 * RQ: 16 slots of 128 bytes (40 + 16*4): 1 page. */
static struct vrdma_create_qp_req qp_base(void)
{
	return (struct vrdma_create_qp_req){
		.pd = 0x100001, .send_cq = 0x100002, .recv_cq = 0x100002,
		.qp_type = VRDMA_QPT_RC, .sq_sig_all = 1,
		.max_send_sge = 4, .max_recv_sge = 4, .max_inline_data = 64,
		.sq_log2_slots = 4, .sq_log2_slot_size = 9,
		.rq_log2_slots = 4, .rq_log2_slot_size = 7,
		.sq_npages = 3, .rq_npages = 1,
	};
}

/* Keep npages consistent with the shape, so only the named field is off. */
static void qp_fix_pages(struct vrdma_create_qp_req *q)
{
	q->sq_npages = want_ring_pages(q->sq_log2_slots, q->sq_log2_slot_size);
	q->rq_npages = want_ring_pages(q->rq_log2_slots, q->rq_log2_slot_size);
}

static int qp_status_n(const struct vrdma_create_qp_req *q, const struct rdma_limits *lim,
		       size_t n, bool odd)
{
	uint64_t *pages = make_pages(n, 4096);
	struct vrdma_create_qp_req out;
	struct req r;
	int s;

	req_build(&r, VRDMA_CMD_CREATE_QP, q, sizeof(*q), pages, n, 0, odd);
	s = rdma_check_create_qp(&r.rq, lim, &out);
	if (s == VRDMA_OK) {
		uint64_t *got = rdma_request_pages(&r.rq, 0, n);

		assert_memory_equal(&out, q, sizeof(*q));
		assert_int_equal(r.rq.npages, n);
		assert_memory_equal(got, pages, 8 * n);
		g_free(got);
	}
	req_free(&r);
	g_free(pages);
	return s;
}

static int qp_status(const struct vrdma_create_qp_req *q)
{
	/* Shapes too large to compute give an arbitrary short list. */
	uint64_t n = (uint64_t)q->sq_npages + q->rq_npages;

	return qp_status_n(q, &lim_full, n <= 20000 ? n : 4, false);
}

static void test_create_qp_fields(void **state)
{
	struct vrdma_create_qp_req q = qp_base();
	static const uint8_t priv[] = { 0, 1, 8 }, unsup[] = { 3, 4, 9, 255 };

	(void)state;
	assert_int_equal(want_ring_pages(4, 9), 3);
	assert_int_equal(want_ring_pages(4, 7), 1);
	assert_int_equal(qp_status_n(&q, &lim_full, 4, true), VRDMA_OK);
	assert_int_equal(qp_status(&q), VRDMA_OK);
	for (size_t i = 0; i < sizeof(priv); i++) {
		q = qp_base();
		q.qp_type = priv[i];
		assert_int_equal(qp_status(&q), VRDMA_EPERM);
	}
	for (size_t i = 0; i < sizeof(unsup); i++) {
		q = qp_base();
		q.qp_type = unsup[i];
		assert_int_equal(qp_status(&q), VRDMA_EOPNOTSUPP);
	}
	q = qp_base();
	q.pd = 0;
	assert_int_equal(qp_status(&q), VRDMA_ENOENT);
	q = qp_base();
	q.send_cq = 0;
	assert_int_equal(qp_status(&q), VRDMA_ENOENT);
	q = qp_base();
	q.recv_cq = 0;
	assert_int_equal(qp_status(&q), VRDMA_ENOENT);

	q = qp_base();
	q.max_send_sge = 33;
	assert_int_equal(qp_status(&q), VRDMA_E2BIG);
	q = qp_base();
	q.max_recv_sge = 33;
	assert_int_equal(qp_status(&q), VRDMA_E2BIG);
	q = qp_base();
	q.max_inline_data = 257;
	assert_int_equal(qp_status(&q), VRDMA_E2BIG);
	q = qp_base();
	q.max_send_sge = 0;
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	q = qp_base();
	q.max_recv_sge = 0;
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);

	q = qp_base();
	q.reserved = 1;
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	q = qp_base();
	q.sq_sig_all = 2;
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	q.sq_sig_all = 0;
	assert_int_equal(qp_status(&q), VRDMA_OK);
}

static void test_create_qp_shape(void **state)
{
	struct vrdma_create_qp_req q;
	struct rdma_limits small = lim_full;

	(void)state;
	/* 256-byte SQ slot: 208 + 16*4 = 272 SGE bytes do not fit. */
	q = qp_base();
	q.max_inline_data = 0;
	q.sq_log2_slot_size = 8;
	qp_fix_pages(&q);
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	q.max_send_sge = 3; /* 256 exactly */
	assert_int_equal(qp_status(&q), VRDMA_OK);
	/* SGEs fit (240), inline does not (208 + 64 = 272). */
	q.max_send_sge = 2;
	q.max_inline_data = 64;
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	q.max_inline_data = 48;
	assert_int_equal(qp_status(&q), VRDMA_OK);
	/* 64-byte RQ slot: 40 + 16*4 = 104 does not fit. */
	q = qp_base();
	q.rq_log2_slot_size = 6;
	qp_fix_pages(&q);
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	q.max_recv_sge = 1;
	assert_int_equal(qp_status(&q), VRDMA_OK);

	q = qp_base();
	q.sq_log2_slot_size = 5;
	qp_fix_pages(&q);
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	q.sq_log2_slot_size = 13;
	qp_fix_pages(&q);
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	q = qp_base();
	q.rq_log2_slot_size = 13;
	qp_fix_pages(&q);
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);

	q = qp_base();
	q.sq_log2_slots = 15;
	qp_fix_pages(&q);
	assert_int_equal(qp_status(&q), VRDMA_E2BIG);
	q.sq_log2_slots = 0;
	qp_fix_pages(&q);
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	q = qp_base();
	q.rq_log2_slots = 0;
	qp_fix_pages(&q);
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	/* max_qp_wr 255: 2^8 - 1 WRs fit, 2^9 - 1 do not. */
	small.max_qp_wr = 255;
	q = qp_base();
	q.rq_log2_slots = 8;
	qp_fix_pages(&q);
	assert_int_equal(qp_status_n(&q, &small, q.sq_npages + q.rq_npages, false), VRDMA_OK);
	q.rq_log2_slots = 9;
	qp_fix_pages(&q);
	assert_int_equal(qp_status_n(&q, &small, q.sq_npages + q.rq_npages, false),
			 VRDMA_E2BIG);

	/* npages off by one, page list matching the declared counts. */
	q = qp_base();
	q.sq_npages = 4;
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	q.sq_npages = 2;
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	q = qp_base();
	q.rq_npages = 2;
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	q.rq_npages = 0;
	assert_int_equal(qp_status(&q), VRDMA_EINVAL);
	/* Counts right, list wrong. */
	q = qp_base();
	assert_int_equal(qp_status_n(&q, &lim_full, 3, false), VRDMA_EINVAL);
	assert_int_equal(qp_status_n(&q, &lim_full, 5, true), VRDMA_EINVAL);
	assert_int_equal(qp_status_n(&q, &lim_full, 0, false), VRDMA_EINVAL);
	{
		uint64_t *pages = make_pages(4, 4096);
		struct vrdma_create_qp_req out;
		struct req r;

		pages[3] += 1; /* the RQ's page */
		req_build(&r, VRDMA_CMD_CREATE_QP, &q, sizeof(q), pages, 4, 0, true);
		assert_int_equal(rdma_check_create_qp(&r.rq, &lim_full, &out), VRDMA_EINVAL);
		req_free(&r);
		g_free(pages);
	}
}

/* docs/virtio-rdma.md, CREATE_QP check 7: a ring of more than
 * VRDMA_MAX_RING_PAGES (16384) pages is E2BIG.  2^14 slots of 4 KiB plus the
 * 384-byte header need 16385 pages, and every other check passes. */
static void test_create_qp_ring_limit(void **state)
{
	struct vrdma_create_qp_req q = qp_base();

	(void)state;
	q.sq_log2_slots = 13;
	q.sq_log2_slot_size = 12;
	qp_fix_pages(&q);
	assert_int_equal(q.sq_npages, 8193);
	assert_int_equal(qp_status(&q), VRDMA_OK);
	q.sq_log2_slots = 14;
	qp_fix_pages(&q);
	assert_int_equal(q.sq_npages, VRDMA_MAX_RING_PAGES + 1);
	assert_int_equal(qp_status(&q), VRDMA_E2BIG);
}

/* ---- MODIFY_QP ---- */

#define MASK_ALL_BUT_KEY                                                              \
	(VRDMA_QP_STATE | VRDMA_QP_CUR_STATE | VRDMA_QP_ACCESS_FLAGS | VRDMA_QP_PKEY_INDEX | \
	 VRDMA_QP_PORT | VRDMA_QP_AV | VRDMA_QP_PATH_MTU | VRDMA_QP_TIMEOUT |            \
	 VRDMA_QP_RETRY_CNT | VRDMA_QP_RNR_RETRY | VRDMA_QP_RQ_PSN |                     \
	 VRDMA_QP_MAX_QP_RD_ATOMIC | VRDMA_QP_MIN_RNR_TIMER | VRDMA_QP_SQ_PSN |          \
	 VRDMA_QP_MAX_DEST_RD_ATOMIC | VRDMA_QP_DEST_QPN)

/* Every supported bit, every field at the top of its range. */
static struct vrdma_modify_qp_req mq_base(void)
{
	struct vrdma_modify_qp_req m = { .qp = 0x100005, .attr_mask = MASK_ALL_BUT_KEY };

	m.attr = (struct vrdma_qp_attr){
		.qp_state = VRDMA_QPS_RTR, .cur_qp_state = VRDMA_QPS_INIT, .path_mtu = 5,
		.rq_psn = 0xffffff, .sq_psn = 0xffffff, .dest_qp_num = 0xffffff,
		.qp_access_flags = VRDMA_ACCESS_ALL, .port_num = 1,
		.max_rd_atomic = 16, .max_dest_rd_atomic = 16, .min_rnr_timer = 31,
		.timeout = 31, .retry_cnt = 7, .rnr_retry = 7,
		.ah = { .flow_label = 0xfffff, .sgid_index = 15, .hop_limit = 64 },
	};
	return m;
}

static int mq_status_len(const struct vrdma_modify_qp_req *m, size_t len)
{
	uint8_t raw[sizeof(*m) + 1] = { 0 };
	struct vrdma_modify_qp_req out;
	struct req r;
	int s;

	memcpy(raw, m, sizeof(*m));
	req_build(&r, VRDMA_CMD_MODIFY_QP, raw, len, NULL, 0, 0, true);
	s = rdma_check_modify_qp(&r.rq, &lim_full, &out);
	if (s == VRDMA_OK)
		assert_memory_equal(&out, m, sizeof(*m));
	req_free(&r);
	return s;
}

static int mq_status(const struct vrdma_modify_qp_req *m)
{
	return mq_status_len(m, sizeof(*m));
}

/* Sets one field of a fresh base request and returns its status. */
#define MQ(field, value)                                   \
	({                                                 \
		struct vrdma_modify_qp_req m_ = mq_base(); \
		m_.field = (value);                        \
		mq_status(&m_);                            \
	})

static void test_modify_qp(void **state)
{
	struct vrdma_modify_qp_req m = mq_base();

	(void)state;
	assert_int_equal(sizeof(m), 80);
	assert_int_equal(mq_status(&m), VRDMA_OK);
	assert_int_equal(mq_status_len(&m, 79), VRDMA_EINVAL);
	assert_int_equal(mq_status_len(&m, 81), VRDMA_EINVAL);
	assert_int_equal(MQ(attr_mask, MASK_ALL_BUT_KEY | 1u << 2), VRDMA_EINVAL);
	assert_int_equal(MQ(attr_mask, MASK_ALL_BUT_KEY | 1u << 14), VRDMA_EINVAL);
	assert_int_equal(MQ(attr_mask, MASK_ALL_BUT_KEY | 1u << 31), VRDMA_EINVAL);
	assert_int_equal(MQ(qp, 0), VRDMA_ENOENT);
	assert_int_equal(MQ(attr.qp_state, 7), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.cur_qp_state, 7), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.port_num, 2), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.qp_access_flags, 0x10), VRDMA_EPERM);
	assert_int_equal(MQ(attr.path_mtu, 0), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.path_mtu, 6), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.ah.sgid_index, 16), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.ah.flow_label, 1u << 20), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.dest_qp_num, 1u << 24), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.rq_psn, 1u << 24), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.sq_psn, 1u << 24), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.max_rd_atomic, 17), VRDMA_E2BIG);
	assert_int_equal(MQ(attr.max_dest_rd_atomic, 17), VRDMA_E2BIG);
	assert_int_equal(MQ(attr.timeout, 32), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.retry_cnt, 8), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.rnr_retry, 8), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.min_rnr_timer, 32), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.reserved[3], 1), VRDMA_EINVAL);
	/* qkey is UD only and ignored. */
	assert_int_equal(MQ(attr.qkey, 0xffffffff), VRDMA_OK);

	/* A field whose bit is clear is ignored, however bad. */
	m = mq_base();
	m.attr_mask &= ~(uint32_t)VRDMA_QP_PORT;
	m.attr.port_num = 2;
	assert_int_equal(mq_status(&m), VRDMA_OK);
	m = mq_base();
	m.attr_mask = 0;
	m.attr.qp_state = 99;
	m.attr.path_mtu = 0;
	m.attr.qp_access_flags = 0xff;
	m.attr.timeout = 255;
	m.attr.ah.sgid_index = 255;
	assert_int_equal(mq_status(&m), VRDMA_OK);
}

/* docs/virtio-rdma.md, MODIFY_QP: "Fields whose bit is clear are ignored."
 * A verbs consumer setting only RQ_PSN leaves sq_psn as whatever its attr
 * struct held; the request must not fail for it. */
static void test_modify_qp_psn_mask(void **state)
{
	struct vrdma_modify_qp_req m = mq_base();

	(void)state;
	m.attr_mask = VRDMA_QP_RQ_PSN;
	m.attr.sq_psn = 1u << 24;
	assert_int_equal(mq_status(&m), VRDMA_OK);
	m = mq_base();
	m.attr_mask = VRDMA_QP_SQ_PSN;
	m.attr.rq_psn = 0xffffffff;
	assert_int_equal(mq_status(&m), VRDMA_OK);
}

/* docs/virtio-rdma.md, MODIFY_QP check 3: qp_state and cur_qp_state may be
 * 0, 1, 2, 3 or 6; SQD (4) gives EOPNOTSUPP and any other value EINVAL. */
static void test_modify_qp_states(void **state)
{
	static const uint32_t ok[] = { 0, 1, 2, 3, 6 };

	(void)state;
	for (size_t i = 0; i < G_N_ELEMENTS(ok); i++) {
		assert_int_equal(MQ(attr.qp_state, ok[i]), VRDMA_OK);
		assert_int_equal(MQ(attr.cur_qp_state, ok[i]), VRDMA_OK);
	}
	assert_int_equal(MQ(attr.qp_state, VRDMA_QPS_SQD), VRDMA_EOPNOTSUPP);
	assert_int_equal(MQ(attr.cur_qp_state, VRDMA_QPS_SQD), VRDMA_EOPNOTSUPP);
	assert_int_equal(MQ(attr.qp_state, VRDMA_QPS_SQE), VRDMA_EINVAL);
	assert_int_equal(MQ(attr.cur_qp_state, VRDMA_QPS_SQE), VRDMA_EINVAL);
}

/* ---- send and receive WQEs ---- */

/* ---- connection management ---- */

static struct vrdma_cm_connect_req cc_base(void)
{
	return (struct vrdma_cm_connect_req){
		.qp = 0x100007, .dst_ip = { 192, 0, 2, 2 }, .dst_port = 18530,
		.ord = 16, .ird = 16, .pdata_len = VRDMA_CM_CONNECT_PDATA,
	};
}

static int cc_status_len(const struct vrdma_cm_connect_req *c, size_t len)
{
	uint8_t raw[sizeof(*c) + 1] = { 0 };
	struct vrdma_cm_connect_req out;
	struct req r;
	int s;

	memcpy(raw, c, sizeof(*c));
	req_build(&r, VRDMA_CMD_CM_CONNECT, raw, len, NULL, 0, 0, true);
	s = rdma_check_cm_connect(&r.rq, &lim_full, &out);
	if (s == VRDMA_OK)
		assert_memory_equal(&out, c, sizeof(*c));
	req_free(&r);
	return s;
}

#define CC(stmt)                                                   \
	({                                                         \
		struct vrdma_cm_connect_req c_ = cc_base();        \
		stmt;                                              \
		cc_status_len(&c_, sizeof(c_));                    \
	})

static void test_cm_connect(void **state)
{
	struct vrdma_cm_connect_req c = cc_base();

	(void)state;
	assert_int_equal(cc_status_len(&c, sizeof(c)), VRDMA_OK);
	assert_int_equal(cc_status_len(&c, sizeof(c) - 1), VRDMA_EINVAL);
	assert_int_equal(cc_status_len(&c, sizeof(c) + 1), VRDMA_EINVAL);
	assert_int_equal(CC(c_.qp = 0), VRDMA_ENOENT);
	assert_int_equal(CC(c_.dst_port = 0), VRDMA_EINVAL);
	assert_int_equal(CC(c_.pdata_len = VRDMA_CM_CONNECT_PDATA + 1), VRDMA_EINVAL);
	assert_int_equal(CC(c_.reserved[2] = 1), VRDMA_EINVAL);
	assert_int_equal(CC(c_.ord = 17), VRDMA_E2BIG);
	assert_int_equal(CC(c_.ird = 17), VRDMA_E2BIG);
	/* The peer is one unicast IPv4 host. */
	assert_int_equal(CC(memset(c_.dst_ip, 0, 4)), VRDMA_EINVAL);
	assert_int_equal(CC(memset(c_.dst_ip, 0xff, 4)), VRDMA_EINVAL);
	assert_int_equal(CC(c_.dst_ip[0] = 224), VRDMA_EINVAL);
	assert_int_equal(CC(c_.dst_ip[0] = 239), VRDMA_EINVAL);
	assert_int_equal(CC(c_.dst_ip[0] = 223), VRDMA_OK);
	assert_int_equal(CC(c_.pdata_len = 0), VRDMA_OK);
}

static void test_cm_listen_accept_reject(void **state)
{
	struct vrdma_cm_listen_req l = { .ip = { 192, 0, 2, 1 }, .port = 1, .backlog = 128 };
	struct vrdma_cm_accept_req a = { .conn = 3, .qp = 4, .ord = 16, .ird = 16,
					 .pdata_len = VRDMA_CM_ACCEPT_PDATA };
	struct vrdma_cm_reject_req j = { .conn = 3, .pdata_len = VRDMA_CM_REJECT_PDATA };
	struct vrdma_cm_listen_req lo;
	struct vrdma_cm_accept_req ao;
	struct vrdma_cm_reject_req jo;
	struct req r;

	(void)state;
#define LISTEN_STATUS(expect)                                                         \
	do {                                                                          \
		req_build(&r, VRDMA_CMD_CM_LISTEN, &l, sizeof(l), NULL, 0, 0, true);  \
		assert_int_equal(rdma_check_cm_listen(&r.rq, &lo), (expect));         \
		req_free(&r);                                                         \
	} while (0)
	LISTEN_STATUS(VRDMA_OK);
	assert_memory_equal(&lo, &l, sizeof(l));
	l.backlog = 129;
	LISTEN_STATUS(VRDMA_EINVAL);
	l.backlog = 0;
	LISTEN_STATUS(VRDMA_EINVAL);
	l.backlog = 1;
	l.port = 0;
	LISTEN_STATUS(VRDMA_EINVAL);
	l.port = 65535;
	memset(l.ip, 0, 4); /* the wildcard: the function's address */
	LISTEN_STATUS(VRDMA_OK);
#undef LISTEN_STATUS

#define ACCEPT_STATUS(expect)                                                         \
	do {                                                                          \
		req_build(&r, VRDMA_CMD_CM_ACCEPT, &a, sizeof(a), NULL, 0, 0, true);  \
		assert_int_equal(rdma_check_cm_accept(&r.rq, &lim_full, &ao), (expect));  \
		req_free(&r);                                                         \
	} while (0)
	ACCEPT_STATUS(VRDMA_OK);
	assert_memory_equal(&ao, &a, sizeof(a));
	a.pdata_len = VRDMA_CM_ACCEPT_PDATA + 1;
	ACCEPT_STATUS(VRDMA_EINVAL);
	a.pdata_len = 0;
	a.reserved[4] = 1;
	ACCEPT_STATUS(VRDMA_EINVAL);
	a.reserved[4] = 0;
	a.ird = 17;
	ACCEPT_STATUS(VRDMA_E2BIG);
	a.ird = 0;
	a.qp = 0;
	ACCEPT_STATUS(VRDMA_ENOENT);
	a.qp = 4;
	a.conn = 0;
	ACCEPT_STATUS(VRDMA_ENOENT);
#undef ACCEPT_STATUS

#define REJECT_STATUS(expect)                                                         \
	do {                                                                          \
		req_build(&r, VRDMA_CMD_CM_REJECT, &j, sizeof(j), NULL, 0, 0, true);  \
		assert_int_equal(rdma_check_cm_reject(&r.rq, &jo), (expect));         \
		req_free(&r);                                                         \
	} while (0)
	REJECT_STATUS(VRDMA_OK);
	assert_memory_equal(&jo, &j, sizeof(j));
	j.pdata_len = VRDMA_CM_REJECT_PDATA + 1;
	REJECT_STATUS(VRDMA_EINVAL);
	j.pdata_len = 0;
	j.reserved[0] = 1;
	REJECT_STATUS(VRDMA_EINVAL);
	j.reserved[0] = 0;
	j.conn = 0;
	REJECT_STATUS(VRDMA_ENOENT);
#undef REJECT_STATUS

	/* CM_GET_EVENT has no payload at all. */
	req_build(&r, VRDMA_CMD_CM_GET_EVENT, NULL, 0, NULL, 0, 0, false);
	assert_int_equal(rdma_check_empty(&r.rq), VRDMA_OK);
	req_free(&r);
	req_build(&r, VRDMA_CMD_CM_GET_EVENT, NULL, 0, NULL, 0, 1, false);
	assert_int_equal(rdma_check_empty(&r.rq), VRDMA_EINVAL);
	req_free(&r);
}

static uint64_t slot_mem[4096 / 8]; /* 8-byte aligned, as the device's copy */
#define SLOT ((uint8_t *)slot_mem)

static const struct rdma_wq_caps caps0 = {
	.slot_size = 512, .max_sge = 4, .max_inline = 64, .atomics = true,
};

static void put_sge(uint8_t *at, uint32_t i, uint64_t addr, uint32_t len, uint32_t lkey)
{
	put_le64(at + 16 * i, addr);
	put_le32(at + 16 * i + 8, len);
	put_le32(at + 16 * i + 12, lkey);
}

/* One 8-byte SGE; dma.length deliberately disagrees with it. */
static void swqe_init(uint32_t opcode)
{
	memset(slot_mem, 0, sizeof(slot_mem));
	put_le64(SLOT + VRDMA_SWQE_WR_ID, 0xabcdef0123456789ull);
	put_le32(SLOT + VRDMA_SWQE_OPCODE, opcode);
	put_le32(SLOT + VRDMA_SWQE_SEND_FLAGS, VRDMA_SEND_SIGNALED);
	put_le64(SLOT + VRDMA_SWQE_REMOTE_ADDR, 0x7f0000002000ull);
	put_le32(SLOT + VRDMA_SWQE_DMA_LENGTH, 12345);
	put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, 1);
	put_sge(SLOT + VRDMA_SWQE_SGE, 0, 0x1000, 8, 0x77);
}

static int swqe(const struct rdma_wq_caps *caps, struct rdma_send_wqe *w)
{
	return rdma_parse_send_wqe(SLOT, caps, w);
}

static void test_send_wqe_opcodes(void **state)
{
	struct rdma_wq_caps noatom = caps0;
	struct rdma_send_wqe w;

	(void)state;
	for (uint32_t op = 0; op <= 6; op++) {
		swqe_init(op);
		assert_int_equal(swqe(&caps0, &w), RDMA_WC_SUCCESS);
		assert_int_equal(w.opcode, op);
		assert_int_equal(w.wr_id, 0xabcdef0123456789ull);
		assert_int_equal(w.flags, VRDMA_SEND_SIGNALED);
		assert_int_equal(w.num_sge, 1);
		assert_int_equal(w.length, 8); /* the SGE total, not dma.length */
		assert_ptr_equal(w.sge, SLOT + VRDMA_SWQE_SGE);
		assert_int_equal(w.sge[0].lkey, 0x77);
	}
	for (uint32_t op = 7; op <= 13; op++) {
		swqe_init(op);
		assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_QP_OP_ERR);
	}
	swqe_init(0xffffffff);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_QP_OP_ERR);
	noatom.atomics = false;
	swqe_init(VRDMA_WR_ATOMIC_CMP_AND_SWP);
	assert_int_equal(swqe(&noatom, &w), RDMA_WC_LOC_QP_OP_ERR);
	swqe_init(VRDMA_WR_ATOMIC_FETCH_AND_ADD);
	assert_int_equal(swqe(&noatom, &w), RDMA_WC_LOC_QP_OP_ERR);
	swqe_init(VRDMA_WR_SEND);
	assert_int_equal(swqe(&noatom, &w), RDMA_WC_SUCCESS);
	put_le32(SLOT + VRDMA_SWQE_SEND_FLAGS, 1u << 4);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_QP_OP_ERR);
	put_le32(SLOT + VRDMA_SWQE_SEND_FLAGS, VRDMA_SEND_FLAGS_ALL & ~VRDMA_SEND_INLINE);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_SUCCESS);

	/* RDMA ops take the rkey at 32; the immediate is kept as found. */
	swqe_init(VRDMA_WR_RDMA_WRITE_WITH_IMM);
	put_le32(SLOT + VRDMA_SWQE_RDMA_RKEY, 0x1234);
	memcpy(SLOT + VRDMA_SWQE_IMM, "\x01\x02\x03\x04", 4);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_SUCCESS);
	assert_int_equal(w.rkey, 0x1234);
	assert_int_equal(w.remote_addr, 0x7f0000002000ull);
	assert_memory_equal(&w.imm, "\x01\x02\x03\x04", 4);
}

static void test_send_wqe_sges(void **state)
{
	struct rdma_wq_caps small = caps0;
	struct rdma_send_wqe w;

	(void)state;
	swqe_init(VRDMA_WR_SEND);
	for (uint32_t i = 0; i < 4; i++)
		put_sge(SLOT + VRDMA_SWQE_SGE, i, 0x1000 * i, 100 + i, 1);
	put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, 4);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_SUCCESS);
	assert_int_equal(w.length, 406);
	assert_int_equal(w.num_sge, 4);
	put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, 5);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_QP_OP_ERR);
	put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, 0xffffffff);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_QP_OP_ERR);
	/* 208 + 4*16 = 272 bytes of a 256-byte slot. */
	small.slot_size = 256;
	put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, 4);
	assert_int_equal(swqe(&small, &w), RDMA_WC_LOC_QP_OP_ERR);
	put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, 3);
	assert_int_equal(swqe(&small, &w), RDMA_WC_SUCCESS);
	/* A zero-SGE send is a valid empty message. */
	put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, 0);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_SUCCESS);
	assert_int_equal(w.length, 0);

	/* One message is at most 2^31 bytes. */
	put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, 2);
	put_sge(SLOT + VRDMA_SWQE_SGE, 0, 0, 1u << 31, 1);
	put_sge(SLOT + VRDMA_SWQE_SGE, 1, 0, 1, 1);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_LEN_ERR);
	put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, 4);
	for (uint32_t i = 0; i < 4; i++)
		put_sge(SLOT + VRDMA_SWQE_SGE, i, 0, 0xffffffff, 1);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_LEN_ERR);
}

static void test_send_wqe_inline(void **state)
{
	struct rdma_wq_caps big = caps0;
	struct rdma_send_wqe w;

	(void)state;
	swqe_init(VRDMA_WR_SEND);
	put_le32(SLOT + VRDMA_SWQE_SEND_FLAGS, VRDMA_SEND_INLINE);
	put_le32(SLOT + VRDMA_SWQE_DMA_LENGTH, 64);
	put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, 99); /* ignored with INLINE */
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_SUCCESS);
	assert_int_equal(w.num_sge, 0);
	assert_int_equal(w.length, 64);
	assert_ptr_equal(w.inline_data, SLOT + VRDMA_SWQE_SGE);
	put_le32(SLOT + VRDMA_SWQE_DMA_LENGTH, 65);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_LEN_ERR);

	put_le32(SLOT + VRDMA_SWQE_DMA_LENGTH, 8);
	put_le32(SLOT + VRDMA_SWQE_OPCODE, VRDMA_WR_RDMA_WRITE);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_SUCCESS);
	put_le32(SLOT + VRDMA_SWQE_OPCODE, VRDMA_WR_RDMA_READ);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_LEN_ERR);
	put_le32(SLOT + VRDMA_SWQE_OPCODE, VRDMA_WR_ATOMIC_CMP_AND_SWP);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_LEN_ERR);
	put_le32(SLOT + VRDMA_SWQE_OPCODE, VRDMA_WR_ATOMIC_FETCH_AND_ADD);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_LEN_ERR);

	/* A generous max_inline still cannot reach past the 512-byte slot. */
	big.max_inline = 4096;
	put_le32(SLOT + VRDMA_SWQE_OPCODE, VRDMA_WR_SEND);
	put_le32(SLOT + VRDMA_SWQE_DMA_LENGTH, 512 - 208);
	assert_int_equal(swqe(&big, &w), RDMA_WC_SUCCESS);
	put_le32(SLOT + VRDMA_SWQE_DMA_LENGTH, 512 - 208 + 1);
	assert_int_equal(swqe(&big, &w), RDMA_WC_LOC_LEN_ERR);
	put_le32(SLOT + VRDMA_SWQE_DMA_LENGTH, 0xffffffff);
	assert_int_equal(swqe(&big, &w), RDMA_WC_LOC_LEN_ERR);
}

static void test_send_wqe_atomic(void **state)
{
	struct rdma_send_wqe w;

	(void)state;
	swqe_init(VRDMA_WR_ATOMIC_CMP_AND_SWP);
	put_le64(SLOT + VRDMA_SWQE_COMPARE_ADD, 0x1122334455667788ull);
	put_le64(SLOT + VRDMA_SWQE_SWAP, 0x99aabbccddeeff00ull);
	put_le32(SLOT + VRDMA_SWQE_ATOMIC_RKEY, 0x4242);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_SUCCESS);
	assert_int_equal(w.compare_add, 0x1122334455667788ull);
	assert_int_equal(w.swap, 0x99aabbccddeeff00ull);
	assert_int_equal(w.rkey, 0x4242); /* not the low half of compare_add */
	assert_int_equal(w.length, 8);
	put_le32(SLOT + VRDMA_SWQE_OPCODE, VRDMA_WR_ATOMIC_FETCH_AND_ADD);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_SUCCESS);
	assert_int_equal(w.compare_add, 0x1122334455667788ull);
	assert_int_equal(w.rkey, 0x4242);

	put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, 2);
	put_sge(SLOT + VRDMA_SWQE_SGE, 1, 0x2000, 8, 0x77);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_LEN_ERR);
	put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, 0);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_LEN_ERR);
	put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, 1);
	put_sge(SLOT + VRDMA_SWQE_SGE, 0, 0x1000, 4, 0x77);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_LEN_ERR);
	put_sge(SLOT + VRDMA_SWQE_SGE, 0, 0x1000, 8, 0x77);
	put_le64(SLOT + VRDMA_SWQE_REMOTE_ADDR, 0x7f0000002004ull);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_LOC_LEN_ERR);
	put_le64(SLOT + VRDMA_SWQE_REMOTE_ADDR, 0x7f0000002008ull);
	assert_int_equal(swqe(&caps0, &w), RDMA_WC_SUCCESS);
}

static void test_recv_wqe(void **state)
{
	struct rdma_wq_caps caps = { .slot_size = 128, .max_sge = 4 };
	struct rdma_recv_wqe w;

	(void)state;
	memset(slot_mem, 0, sizeof(slot_mem));
	put_le64(SLOT + VRDMA_RWQE_WR_ID, 42);
	put_le32(SLOT + VRDMA_RWQE_DMA_NUM_SGE, 2);
	put_sge(SLOT + VRDMA_RWQE_SGE, 0, 0x1000, 100, 5);
	put_sge(SLOT + VRDMA_RWQE_SGE, 1, 0x2000, 200, 6);
	assert_int_equal(rdma_parse_recv_wqe(SLOT, &caps, &w), RDMA_WC_SUCCESS);
	assert_int_equal(w.wr_id, 42);
	assert_int_equal(w.num_sge, 2);
	assert_ptr_equal(w.sge, SLOT + VRDMA_RWQE_SGE);
	assert_int_equal(w.sge[1].length, 200);
	assert_int_equal(w.sge[1].lkey, 6);

	put_le32(SLOT + VRDMA_RWQE_DMA_NUM_SGE, 5);
	assert_int_equal(rdma_parse_recv_wqe(SLOT, &caps, &w), RDMA_WC_LOC_QP_OP_ERR);
	/* 40 + 2*16 = 72 bytes of a 64-byte slot; one SGE (56) fits. */
	caps.slot_size = 64;
	put_le32(SLOT + VRDMA_RWQE_DMA_NUM_SGE, 2);
	assert_int_equal(rdma_parse_recv_wqe(SLOT, &caps, &w), RDMA_WC_LOC_QP_OP_ERR);
	put_le32(SLOT + VRDMA_RWQE_DMA_NUM_SGE, 1);
	assert_int_equal(rdma_parse_recv_wqe(SLOT, &caps, &w), RDMA_WC_SUCCESS);
	caps.slot_size = 128;
	put_le32(SLOT + VRDMA_RWQE_DMA_NUM_SGE, 2);
	put_sge(SLOT + VRDMA_RWQE_SGE, 0, 0x1000, 1u << 31, 5);
	put_sge(SLOT + VRDMA_RWQE_SGE, 1, 0x2000, 1, 6);
	assert_int_equal(rdma_parse_recv_wqe(SLOT, &caps, &w), RDMA_WC_LOC_LEN_ERR);
}

/* ---- the handle table ---- */

#define IDX(h) (((h) & 0xfffffu) - 1)
#define GEN(h) ((h) >> 20)

static int objs[64];

static void test_table_basic(void **state)
{
	struct rdma_table t = { 0 };
	uint32_t a, b, c;

	(void)state;
	assert_null(rdma_table_get(&t, 0));
	assert_null(rdma_table_any(&t));
	a = rdma_table_add(&t, &objs[0], 100);
	b = rdma_table_add(&t, &objs[1], 100);
	c = rdma_table_add(&t, &objs[2], 100);
	assert_int_equal(a, 1u << 20 | 1); /* generation 1, index 0 */
	assert_int_equal(b, 1u << 20 | 2);
	assert_int_equal(c, 1u << 20 | 3);
	assert_ptr_equal(rdma_table_get(&t, a), &objs[0]);
	assert_ptr_equal(rdma_table_get(&t, b), &objs[1]);
	assert_ptr_equal(rdma_table_get(&t, c), &objs[2]);
	assert_null(rdma_table_get(&t, 0));
	assert_null(rdma_table_get(&t, 2u << 20 | 1)); /* right index, wrong generation */
	assert_null(rdma_table_get(&t, 1u << 20));     /* index bits 0 */
	assert_null(rdma_table_get(&t, 1u << 20 | 0xfffff));
	assert_non_null(rdma_table_any(&t));

	rdma_table_del(&t, b);
	assert_null(rdma_table_get(&t, b));
	assert_int_equal(t.count, 2);
	rdma_table_del(&t, b); /* twice: no effect */
	rdma_table_del(&t, 0);
	assert_int_equal(t.count, 2);
	assert_ptr_equal(rdma_table_get(&t, a), &objs[0]);
	assert_ptr_equal(rdma_table_get(&t, c), &objs[2]);

	/* Round robin: the freed slot 1 is not taken before slot 3. */
	b = rdma_table_add(&t, &objs[3], 100);
	assert_int_equal(IDX(b), 3);
	rdma_table_del(&t, a);
	rdma_table_del(&t, b);
	rdma_table_del(&t, c);
	assert_int_equal(t.count, 0);
	assert_null(rdma_table_any(&t));
	rdma_table_free(&t);
	assert_null(t.obj);
	assert_int_equal(t.cap, 0);
	assert_int_equal(t.count, 0);
	assert_null(rdma_table_get(&t, a));
	rdma_table_free(&t); /* idempotent */
}

static void test_table_generation(void **state)
{
	struct rdma_table t = { 0 };
	uint32_t h[16], old;

	(void)state;
	/* Fill the 16 initial slots, so a freed slot is the only one left. */
	for (int i = 0; i < 16; i++)
		h[i] = rdma_table_add(&t, &objs[i], 100);
	assert_int_equal(t.cap, 16);
	old = h[0];
	rdma_table_del(&t, h[0]);
	h[0] = rdma_table_add(&t, &objs[20], 100);
	assert_int_equal(IDX(h[0]), 0);
	assert_int_equal(GEN(h[0]), 2);
	assert_null(rdma_table_get(&t, old));
	assert_ptr_equal(rdma_table_get(&t, h[0]), &objs[20]);

	/* Through a full generation wrap: never 0, the previous handle always dead,
	 * and after 4095 reuses the very first handle comes back. */
	for (uint32_t n = 0; n < 5000; n++) {
		old = h[5];
		rdma_table_del(&t, old);
		h[5] = rdma_table_add(&t, &objs[5], 100);
		assert_int_equal(IDX(h[5]), 5);
		assert_int_not_equal(GEN(h[5]), 0);
		assert_int_not_equal(h[5], old);
		assert_null(rdma_table_get(&t, old));
		assert_ptr_equal(rdma_table_get(&t, h[5]), &objs[5]);
		if (n == 4094)
			assert_int_equal(h[5], 1u << 20 | 6);
	}
	assert_int_equal(t.count, 16);
	rdma_table_free(&t);
}

static void test_table_limit_and_growth(void **state)
{
	struct rdma_table t = { 0 };
	uint32_t h[40];

	(void)state;
	for (int i = 0; i < 3; i++)
		assert_int_not_equal(rdma_table_add(&t, &objs[i], 3), 0);
	assert_int_equal(rdma_table_add(&t, &objs[3], 3), 0);
	assert_int_equal(t.count, 3);
	rdma_table_del(&t, 1u << 20 | 2);
	assert_int_not_equal(rdma_table_add(&t, &objs[3], 3), 0);
	assert_int_equal(rdma_table_add(&t, &objs[4], 0), 0);
	rdma_table_free(&t);

	/* Past the first 16 slots the table grows; every handle still resolves. */
	for (int i = 0; i < 40; i++) {
		h[i] = rdma_table_add(&t, &objs[i], 1000);
		assert_int_not_equal(h[i], 0);
	}
	for (int i = 0; i < 40; i++)
		assert_ptr_equal(rdma_table_get(&t, h[i]), &objs[i]);
	rdma_table_free(&t);
}

static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void test_table_random_handles(void **state)
{
	struct rdma_table t = { 0 };
	uint32_t live[3];

	(void)state;
	rng = FUZZ_SEED;
	for (int i = 0; i < 100000; i++)
		assert_null(rdma_table_get(&t, (uint32_t)rnd()));
	/* With objects present, only their own handles resolve. */
	for (int i = 0; i < 3; i++)
		live[i] = rdma_table_add(&t, &objs[i], 100);
	for (int i = 0; i < 100000; i++) {
		uint32_t h = (uint32_t)rnd();

		if (rdma_table_get(&t, h))
			assert_true(h == live[0] || h == live[1] || h == live[2]);
	}
	rdma_table_free(&t);
}

/* ---- fuzz ---- */

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = rnd();

		memcpy(p + i, &v, MIN(8, n - i));
	}
}

/* One control request through the header check and its own check, in a
 * buffer of exactly its length. */
static void fuzz_one_request(const uint8_t *src, size_t len)
{
	uint8_t *buf = g_malloc(len ? len : 1);
	struct rdma_request rq;
	uint32_t handle;
	uint16_t index;
	int s;

	memcpy(buf, src, len);
	if (rdma_check_header(buf, len, &rq) != VRDMA_OK)
		goto out;
	assert_true(rq.opcode >= 1 && rq.opcode <= VRDMA_CMD_MAX);
	assert_int_equal(rq.len, len - HDR);
	switch (rq.opcode) {
	case VRDMA_CMD_QUERY_PORT:
		(void)rdma_check_port(&rq);
		break;
	case VRDMA_CMD_QUERY_GID:
		if (rdma_check_gid(&rq, &lim_full, &index) == VRDMA_OK)
			assert_true(index < lim_full.gid_tbl_len);
		break;
	case VRDMA_CMD_REG_MR: {
		struct vrdma_reg_mr_req m;

		s = rdma_check_reg_mr(&rq, &lim_full, &m);
		if (s != VRDMA_OK)
			break;
		assert_true(m.length > 0 && m.length <= lim_full.max_mr_size);
		assert_true(m.page_shift == 12 || m.page_shift == 21);
		assert_int_equal(m.npages, want_span(m.iova, m.length, m.page_shift));
		assert_int_equal(rq.npages, m.npages);
		assert_int_equal(rq.len, sizeof(m) + 8 * rq.npages);
		for (uint64_t i = 0; i < rq.npages; i++)
			assert_int_equal(get_le64(rq.pages + 8 * i) & ((1ull << m.page_shift) - 1), 0);
		break;
	}
	case VRDMA_CMD_CREATE_CQ: {
		struct vrdma_create_cq_req c;

		if (rdma_check_create_cq(&rq, &lim_full, &c) != VRDMA_OK)
			break;
		assert_true(c.log2_slots >= 1 && c.log2_slots <= 14);
		assert_int_equal(c.npages, want_ring_pages(c.log2_slots, 6));
		assert_int_equal(rq.len, sizeof(c) + 8 * rq.npages);
		break;
	}
	case VRDMA_CMD_CREATE_QP: {
		struct vrdma_create_qp_req q;

		if (rdma_check_create_qp(&rq, &lim_full, &q) != VRDMA_OK)
			break;
		assert_int_equal(q.qp_type, VRDMA_QPT_RC);
		assert_true(q.pd && q.send_cq && q.recv_cq);
		assert_int_equal(q.sq_npages, want_ring_pages(q.sq_log2_slots, q.sq_log2_slot_size));
		assert_int_equal(q.rq_npages, want_ring_pages(q.rq_log2_slots, q.rq_log2_slot_size));
		assert_true(208 + 16ull * q.max_send_sge <= 1ull << q.sq_log2_slot_size);
		assert_true(208 + (uint64_t)q.max_inline_data <= 1ull << q.sq_log2_slot_size);
		assert_true(40 + 16ull * q.max_recv_sge <= 1ull << q.rq_log2_slot_size);
		assert_int_equal(rq.npages, (uint64_t)q.sq_npages + q.rq_npages);
		break;
	}
	case VRDMA_CMD_MODIFY_QP: {
		struct vrdma_modify_qp_req m;

		if (rdma_check_modify_qp(&rq, &lim_full, &m) != VRDMA_OK)
			break;
		assert_int_not_equal(m.qp, 0);
		assert_int_equal(m.attr_mask & ~(uint32_t)VRDMA_QP_ATTR_SUPPORTED, 0);
		break;
	}
	case VRDMA_CMD_CM_CONNECT: {
		struct vrdma_cm_connect_req c;

		if (rdma_check_cm_connect(&rq, &lim_full, &c) != VRDMA_OK)
			break;
		assert_true(c.qp && c.dst_port && c.pdata_len <= VRDMA_CM_CONNECT_PDATA);
		break;
	}
	case VRDMA_CMD_CM_ACCEPT: {
		struct vrdma_cm_accept_req a;

		if (rdma_check_cm_accept(&rq, &lim_full, &a) != VRDMA_OK)
			break;
		assert_true(a.conn && a.qp && a.pdata_len <= VRDMA_CM_ACCEPT_PDATA);
		break;
	}
	case VRDMA_CMD_CM_REJECT: {
		struct vrdma_cm_reject_req j;

		if (rdma_check_cm_reject(&rq, &j) != VRDMA_OK)
			break;
		assert_true(j.conn && j.pdata_len <= VRDMA_CM_REJECT_PDATA);
		break;
	}
	case VRDMA_CMD_CM_LISTEN: {
		struct vrdma_cm_listen_req l;

		if (rdma_check_cm_listen(&rq, &l) != VRDMA_OK)
			break;
		assert_true(l.port && l.backlog && l.backlog <= VRDMA_CM_MAX_BACKLOG);
		break;
	}
	default:
		if (rdma_cmd_takes_handle(rq.opcode) && rdma_check_handle(&rq, &handle) == VRDMA_OK)
			assert_int_not_equal(handle, 0);
		break;
	}
out:
	g_free(buf);
}

static void fuzz_one_wqe(void)
{
	struct rdma_wq_caps caps = {
		.slot_size = 64u << (rnd() % 7),
		.max_sge = 1 + rnd() % 32,
		.max_inline = rnd() % 257,
		.atomics = rnd() & 1,
	};
	struct rdma_send_wqe w;
	struct rdma_recv_wqe r;
	uint64_t total = 0;

	fill_random(SLOT, MAX(caps.slot_size, 256u));
	if (rnd() & 1) {
		/* Steer towards acceptance: plausible opcode, flags, counts, lengths. */
		put_le32(SLOT + VRDMA_SWQE_OPCODE, rnd() % 8);
		put_le32(SLOT + VRDMA_SWQE_SEND_FLAGS, rnd() & 0x1f);
		put_le32(SLOT + VRDMA_SWQE_DMA_LENGTH, rnd() % 400);
		put_le32(SLOT + VRDMA_SWQE_DMA_NUM_SGE, rnd() % 36);
		put_le32(SLOT + VRDMA_RWQE_DMA_NUM_SGE, rnd() % 36);
		for (uint32_t i = 0; i < 8; i++)
			put_le32(SLOT + VRDMA_SWQE_SGE + 16 * i + 8, rnd() % 16);
	}
	if (rdma_parse_send_wqe(SLOT, &caps, &w) == RDMA_WC_SUCCESS) {
		assert_true(w.opcode <= 6 && (caps.atomics || w.opcode <= 4));
		assert_int_equal(w.flags & ~(uint32_t)VRDMA_SEND_FLAGS_ALL, 0);
		if (w.flags & VRDMA_SEND_INLINE) {
			assert_int_equal(w.num_sge, 0);
			assert_true(w.length <= caps.max_inline);
			assert_true(208 + (uint64_t)w.length <= caps.slot_size);
			assert_true(w.opcode <= 3);
			assert_ptr_equal(w.inline_data, SLOT + VRDMA_SWQE_SGE);
		} else {
			assert_true(w.num_sge <= caps.max_sge);
			assert_true(208 + 16ull * w.num_sge <= caps.slot_size);
			for (uint32_t i = 0; i < w.num_sge; i++)
				total += get_le32(SLOT + VRDMA_SWQE_SGE + 16 * i + 8);
			assert_true(total <= 1ull << 31);
			assert_int_equal(w.length, total);
			if (w.opcode >= 5)
				assert_true(w.num_sge == 1 && w.length == 8 && w.remote_addr % 8 == 0);
		}
	}
	total = 0;
	if (rdma_parse_recv_wqe(SLOT, &caps, &r) == RDMA_WC_SUCCESS) {
		assert_true(r.num_sge <= caps.max_sge);
		assert_true(40 + 16ull * r.num_sge <= caps.slot_size);
		for (uint32_t i = 0; i < r.num_sge; i++)
			total += r.sge[i].length;
		assert_true(total <= 1ull << 31);
	}
}

static void test_fuzz(void **state)
{
	uint8_t buf[512 + 8];

	(void)state;
	rng = FUZZ_SEED;
	for (uint32_t it = 0; it < FUZZ_ITERATIONS; it++) {
		size_t len = rnd() % 513;

		fill_random(buf, len);
		if (len >= HDR && (rnd() & 1)) {
			put_le16(buf, 1 + rnd() % VRDMA_CMD_MAX);
			/* Mostly a clean header, so the payload check runs. */
			if (rnd() % 8)
				memset(buf + 2, 0, 6);
		}
		fuzz_one_request(buf, len);
		fuzz_one_wqe();
	}
}

/* Valid requests with a few bytes flipped: random bytes alone rarely get past
 * the first check, and the invariants only bite on accepted requests. */
static void test_fuzz_mutate(void **state)
{
	struct vrdma_reg_mr_req m = mr_base();
	struct vrdma_create_cq_req c = { .log2_slots = 6, .npages = 2 };
	struct vrdma_create_qp_req q = qp_base();
	struct vrdma_modify_qp_req mq = mq_base();
	uint64_t *pages = make_pages(4, 4096);
	struct req seeds[4];
	uint8_t work[HDR + 80 + 8 * 4 + 16] = { 0 };

	(void)state;
	req_build(&seeds[0], VRDMA_CMD_REG_MR, &m, sizeof(m), pages, 2, 0, false);
	req_build(&seeds[1], VRDMA_CMD_CREATE_CQ, &c, sizeof(c), pages, 2, 0, false);
	req_build(&seeds[2], VRDMA_CMD_CREATE_QP, &q, sizeof(q), pages, 4, 0, false);
	req_build(&seeds[3], VRDMA_CMD_MODIFY_QP, &mq, sizeof(mq), NULL, 0, 0, false);
	rng = FUZZ_SEED ^ 1;
	for (uint32_t it = 0; it < FUZZ_ITERATIONS / 4; it++) {
		const struct req *s = &seeds[rnd() % 4];
		size_t len = s->len;
		int flips = 1 + rnd() % 3;

		memcpy(work, s->buf, len);
		for (int i = 0; i < flips; i++)
			work[HDR + rnd() % (len - HDR)] ^= (uint8_t)(1u << (rnd() % 8));
		if (rnd() % 16 == 0) /* sometimes a length a page entry off */
			len = rnd() & 1 ? len - 8 : MIN(len + 8, sizeof(work));
		fuzz_one_request(work, len);
	}
	for (int i = 0; i < 4; i++)
		req_free(&seeds[i]);
	g_free(pages);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_handle),
		cmocka_unit_test(test_port_gid),
		cmocka_unit_test(test_cm_connect),
		cmocka_unit_test(test_cm_listen_accept_reject),
		cmocka_unit_test(test_reg_mr_fields),
		cmocka_unit_test(test_reg_mr_pages),
		cmocka_unit_test(test_reg_mr_max),
		cmocka_unit_test(test_create_cq),
		cmocka_unit_test(test_create_qp_fields),
		cmocka_unit_test(test_create_qp_shape),
		cmocka_unit_test(test_create_qp_ring_limit),
		cmocka_unit_test(test_modify_qp),
		cmocka_unit_test(test_modify_qp_psn_mask),
		cmocka_unit_test(test_modify_qp_states),
		cmocka_unit_test(test_send_wqe_opcodes),
		cmocka_unit_test(test_send_wqe_sges),
		cmocka_unit_test(test_send_wqe_inline),
		cmocka_unit_test(test_send_wqe_atomic),
		cmocka_unit_test(test_recv_wqe),
		cmocka_unit_test(test_table_basic),
		cmocka_unit_test(test_table_generation),
		cmocka_unit_test(test_table_limit_and_growth),
		cmocka_unit_test(test_table_random_handles),
		cmocka_unit_test(test_fuzz),
		cmocka_unit_test(test_fuzz_mutate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

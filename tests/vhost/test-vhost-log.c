/* SPDX-License-Identifier: MIT */
/*
 * vrdma-vhost dirty log: with VHOST_F_LOG_ALL acked and SET_LOG_BASE given,
 * exactly the guest pages the back end wrote are marked (read buffers,
 * status bytes, the used ring at its log address); pages it only read stay
 * clear; without LOG_ALL nothing is marked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util.h"
#include "vt-common.h"

#define FILE_SIZE (1ull << 20)
#define QSIZE 64
/* The log covers all guest RAM; it starts one page into its fd. */
#define LOG_COVERS (VT_RAM1_GPA + VT_RAM1_SIZE)
#define LOG_FD_OFFSET 4096
#define MAX_PAGES 64

static struct vt_daemon dmn;

struct page_set {
	uint64_t p[MAX_PAGES];
	size_t n;
};

static void add_range(struct page_set *s, uint64_t gpa, uint64_t len)
{
	for (uint64_t pg = gpa / VUF_LOG_PAGE; pg <= (gpa + len - 1) / VUF_LOG_PAGE; pg++) {
		bool have = false;

		for (size_t i = 0; i < s->n; i++)
			have |= s->p[i] == pg;
		if (!have) {
			assert_true(s->n < MAX_PAGES);
			s->p[s->n++] = pg;
		}
	}
}

static bool all_dirty(const struct vuf_log *l, const struct page_set *want)
{
	for (size_t i = 0; i < want->n; i++)
		if (!vuf_log_page_dirty(l, want->p[i] * VUF_LOG_PAGE))
			return false;
	return true;
}

/*
 * The log is set with atomic ORs that may trail the used idx a little:
 * wait for the expected bits, then settle and compare the whole log.
 */
static void assert_log_is(const struct vuf_log *l, const struct page_set *want)
{
	uint64_t got[MAX_PAGES];
	uint64_t deadline = monotonic_ns() + 2000000000ull;
	size_t n;

	while (!all_dirty(l, want) && monotonic_ns() < deadline)
		usleep(1000);
	usleep(50 * 1000);
	n = vuf_log_dirty_pages(l, got, MAX_PAGES);
	for (size_t i = 0; i < want->n; i++)
		if (!vuf_log_page_dirty(l, want->p[i] * VUF_LOG_PAGE))
			fail_msg("page 0x%llx (gpa 0x%llx) written but not marked",
				 (unsigned long long)want->p[i],
				 (unsigned long long)(want->p[i] * VUF_LOG_PAGE));
	for (size_t i = 0; i < n && i < MAX_PAGES; i++) {
		bool expected = false;

		for (size_t j = 0; j < want->n; j++)
			expected |= want->p[j] == got[i];
		if (!expected)
			fail_msg("page 0x%llx (gpa 0x%llx) marked but not written",
				 (unsigned long long)got[i],
				 (unsigned long long)(got[i] * VUF_LOG_PAGE));
	}
	assert_int_equal(n, want->n);
}

/* Opens a blk device with the given features; queue 0 logs at log_gpa. */
static void open_logged(struct vt_dev *dev, uint64_t features, bool ring_log,
			uint64_t used_log_gpa, struct vuf_log **ret_log)
{
	assert_int_equal(vt_dev_open(dev, dmn.sock, features, VT_PROTO_ALL, 1, QSIZE, false), 0);
	dev->vq[0].log = ring_log;
	if (used_log_gpa)
		dev->vq[0].used_log_gpa = used_log_gpa;
	assert_int_equal(vuf_log_new(LOG_COVERS, LOG_FD_OFFSET, ret_log), 0);
	assert_int_equal(vuf_log_send(*ret_log, dev->c), 0);
	assert_int_equal(vuf_vq_start(&dev->vq[0]), 0);
}

/* A request slot with 3 pages of data at a page boundary in region `region`. */
static void alloc_in(struct vt_dev *dev, size_t region, uint32_t cap, struct vuf_blk_req *r)
{
	memset(r, 0, sizeof(*r));
	assert_int_equal(vuf_mem_alloc_in(dev->mem, region, 32, 4096, &r->hdr_gpa), 0);
	r->status_gpa = r->hdr_gpa + 16;
	r->data_cap = cap;
	assert_int_equal(vuf_mem_alloc_in(dev->mem, region, cap, 4096, &r->data_gpa), 0);
}

static void io(struct vt_dev *dev, struct vuf_blk_req *r, uint32_t type, uint32_t len)
{
	uint8_t *buf = calloc(1, len);

	assert_non_null(buf);
	assert_int_equal(vuf_blk_io(&dev->vq[0], r, type, 0, buf, len, false, VT_TIMEOUT_MS),
			 VUF_BLK_S_OK);
	free(buf);
}

static void used_ring_pages(uint64_t log_gpa, struct page_set *s)
{
	/* flags, idx, QSIZE elements, avail_event: one page at QSIZE 64. */
	add_range(s, log_gpa, 4 + 8 * QSIZE + 2);
}

static void test_reads_marked(void **state)
{
	const uint64_t features = VT_BLK_FEATURES | VUF_BIT(VUF_F_LOG_ALL);
	struct vuf_blk_req low, high;
	struct page_set want = { .n = 0 };
	struct vuf_log *log;
	struct vt_dev dev;

	(void)state;
	open_logged(&dev, features, true, 0, &log);
	assert_true(dev.features & VUF_BIT(VUF_F_LOG_ALL));
	/* Data spanning 3 pages low, and 1 page in the high region. */
	alloc_in(&dev, 0, 3 * 4096, &low);
	alloc_in(&dev, 1, 4096, &high);
	vuf_log_clear(log);
	io(&dev, &low, VUF_BLK_T_IN, 3 * 4096);
	io(&dev, &high, VUF_BLK_T_IN, 4096);
	add_range(&want, low.data_gpa, 3 * 4096);
	add_range(&want, low.status_gpa, 1);
	add_range(&want, high.data_gpa, 4096);
	add_range(&want, high.status_gpa, 1);
	used_ring_pages(dev.vq[0].used_gpa, &want);
	assert_log_is(log, &want);
	vt_dev_close(&dev);
	vuf_log_free(log);
}

static void test_writes_not_marked(void **state)
{
	const uint64_t features = VT_BLK_FEATURES | VUF_BIT(VUF_F_LOG_ALL);
	struct page_set want = { .n = 0 };
	struct vuf_blk_req r;
	struct vuf_log *log;
	struct vt_dev dev;

	(void)state;
	open_logged(&dev, features, true, 0, &log);
	alloc_in(&dev, 0, 2 * 4096, &r);
	vuf_log_clear(log);
	/* The device only reads an OUT buffer: its pages stay clean. */
	io(&dev, &r, VUF_BLK_T_OUT, 2 * 4096);
	add_range(&want, r.status_gpa, 1);
	used_ring_pages(dev.vq[0].used_gpa, &want);
	assert_log_is(log, &want);
	vt_dev_close(&dev);
	vuf_log_free(log);
}

static void test_used_ring_at_log_addr(void **state)
{
	const uint64_t features = VT_BLK_FEATURES | VUF_BIT(VUF_F_LOG_ALL);
	/* An address that is not where the used ring is (QEMU allows this). */
	const uint64_t log_gpa = 0x800000;
	struct page_set want = { .n = 0 };
	struct vuf_blk_req r;
	struct vuf_log *log;
	struct vt_dev dev;

	(void)state;
	open_logged(&dev, features, true, log_gpa, &log);
	assert_true(dev.vq[0].used_gpa / VUF_LOG_PAGE != log_gpa / VUF_LOG_PAGE);
	alloc_in(&dev, 0, 4096, &r);
	vuf_log_clear(log);
	io(&dev, &r, VUF_BLK_T_IN, 4096);
	add_range(&want, r.data_gpa, 4096);
	add_range(&want, r.status_gpa, 1);
	used_ring_pages(log_gpa, &want);
	assert_log_is(log, &want);
	vt_dev_close(&dev);
	vuf_log_free(log);
}

static void test_no_log_all(void **state)
{
	struct page_set none = { .n = 0 };
	struct vuf_blk_req r;
	struct vuf_log *log;
	struct vt_dev dev;

	(void)state;
	/* A log is given, but LOG_ALL was not acked: nothing is marked. */
	open_logged(&dev, VT_BLK_FEATURES, true, 0, &log);
	assert_false(dev.features & VUF_BIT(VUF_F_LOG_ALL));
	alloc_in(&dev, 0, 4096, &r);
	vuf_log_clear(log);
	io(&dev, &r, VUF_BLK_T_IN, 4096);
	io(&dev, &r, VUF_BLK_T_OUT, 4096);
	assert_log_is(log, &none);
	vt_dev_close(&dev);
	vuf_log_free(log);
}

static void test_log_all_turned_on_later(void **state)
{
	struct page_set want = { .n = 0 }, none = { .n = 0 };
	struct vuf_blk_req r;
	struct vuf_log *log;
	struct vt_dev dev;

	(void)state;
	/* As in a migration: running without LOG_ALL, then SET_FEATURES adds it. */
	open_logged(&dev, VT_BLK_FEATURES, true, 0, &log);
	alloc_in(&dev, 0, 4096, &r);
	vuf_log_clear(log);
	io(&dev, &r, VUF_BLK_T_IN, 4096);
	assert_log_is(log, &none);
	assert_int_equal(vuf_set_features(dev.c, dev.features | VUF_BIT(VUF_F_LOG_ALL)), 0);
	io(&dev, &r, VUF_BLK_T_IN, 4096);
	add_range(&want, r.data_gpa, 4096);
	add_range(&want, r.status_gpa, 1);
	used_ring_pages(dev.vq[0].used_gpa, &want);
	assert_log_is(log, &want);
	vt_dev_close(&dev);
	vuf_log_free(log);
}

static int setup(void **state)
{
	(void)state;
	return vt_spawn_blk(&dmn, "log", FILE_SIZE, NULL, NULL) ? -1 : 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reads_marked),
		cmocka_unit_test(test_writes_not_marked),
		cmocka_unit_test(test_used_ring_at_log_addr),
		cmocka_unit_test(test_no_log_all),
		cmocka_unit_test(test_log_all_turned_on_later),
	};
	vt_init(argc, argv);
	return VT_RUN(tests, setup, NULL, &dmn);
}

// SPDX-License-Identifier: MIT
/*
 * Unit tests of the split-virtqueue side of the vhost-user core: guest
 * memory (vhost/core/vu-mem.c), descriptor walking, push and notify
 * (vhost/core/vu-vq.c), the dirty log (vu-log.c) and inflight recovery
 * (vu-inflight.c), on a device made by vu_dev_new() over a socketpair.
 *
 * The "guest" is two memfds, mapped here a second time: the test lays out
 * rings and buffers through its own mappings, byte by byte in little-endian,
 * with offsets from the virtio 1.2 split-ring layout (2.7) and the inflight
 * layout of vhost-user.rst, and reads the results back the same way.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "vu-internal.h"
#include "ring-layout.h"
#include "unit-common.h"

/* virtio 1.2, 2.7.5 and 2.7.6 */
#define T_DESC_NEXT 1u
#define T_DESC_WRITE 2u
#define T_DESC_INDIRECT 4u
#define T_AVAIL_NO_INTERRUPT 1u

#define T_F_LOG_ALL (1ull << 26)
#define T_F_INDIRECT (1ull << 28)
#define T_F_EVENT_IDX (1ull << 29)
#define T_F_VERSION_1 (1ull << 32)
#define T_BASE_FEATURES (T_F_VERSION_1 | T_F_INDIRECT)

#define IND_GPA 0x108000ull

#define PAGE 4096ull

/* ---- little-endian access to guest memory ---- */

/* ---- the fixture: a device, its guest memory, queue 0 ---- */

static unsigned int watches_added, watches_removed;

static void dummy_add_watch(struct vu_dev *dev, int fd, vu_watch_cb cb, void *data)
{
	(void)dev, (void)fd, (void)cb, (void)data;
	watches_added++;
}

static void dummy_remove_watch(struct vu_dev *dev, int fd)
{
	(void)dev, (void)fd;
	watches_removed++;
}

struct fx {
	int fds_before;
	int memfd[2];
	uint8_t *map[2];
	uint64_t map_len[2];
	int sv[2];
	struct vu_dev *dev;
	struct vu_vq *vq;
	int call;   /* the test's ends of the vq's eventfds */
	int err;
	uint32_t num;
	uint16_t avail_idx; /* the driver's shadow */
};

static uint8_t *gp(struct fx *f, uint64_t gpa)
{
	if (gpa >= RA_GPA && gpa < RA_GPA + RA_SIZE)
		return f->map[0] + (gpa - RA_GPA);
	if (gpa >= RB_GPA && gpa < RB_GPA + RB_SIZE)
		return f->map[1] + RB_OFF + (gpa - RB_GPA);
	fail_msg("gpa 0x%llx is not guest memory", (unsigned long long)gpa);
	return NULL;
}

static uint64_t uva_of(uint64_t gpa)
{
	return RA_UVA + (gpa - RA_GPA);
}

static int fx_setup(void **state)
{
	static const struct vu_loop_ops loop = {
		.add_watch = dummy_add_watch,
		.remove_watch = dummy_remove_watch,
	};
	static const struct vu_device_ops ops = { .name = "test", .max_queues = 2 };
	struct fx *f = calloc(1, sizeof(*f));
	struct vu_mem_desc a = { RA_GPA, RA_SIZE, RA_UVA, 0 };
	struct vu_mem_desc b = { RB_GPA, RB_SIZE, RB_UVA, RB_OFF };

	assert_non_null(f);
	f->fds_before = ut_count_fds();
	f->map_len[0] = RA_SIZE;
	f->map_len[1] = RB_OFF + RB_SIZE;
	for (int i = 0; i < 2; i++) {
		f->memfd[i] = ut_memfd("test-vu-ring", f->map_len[i]);
		f->map[i] = mmap(NULL, f->map_len[i], PROT_READ | PROT_WRITE, MAP_SHARED,
				 f->memfd[i], 0);
		assert_true(f->map[i] != MAP_FAILED);
	}
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, f->sv), 0);
	assert_int_equal(vu_dev_new(f->sv[0], &ops, NULL, &loop, NULL, &f->dev), 0);
	assert_int_equal(vu_mem_add(&f->dev->mem, &a, f->memfd[0]), 0);
	assert_int_equal(vu_mem_add(&f->dev->mem, &b, f->memfd[1]), 0);
	f->vq = &f->dev->vqs[0];
	f->call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	f->err = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	assert_true(f->call >= 0 && f->err >= 0);
	f->vq->call_fd = fcntl(f->call, F_DUPFD_CLOEXEC, 0);
	f->vq->err_fd = fcntl(f->err, F_DUPFD_CLOEXEC, 0);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	vu_dev_free(f->dev); /* closes sv[0], the vq's eventfds, unmaps */
	close(f->sv[1]);
	close(f->call);
	close(f->err);
	for (int i = 0; i < 2; i++) {
		munmap(f->map[i], f->map_len[i]);
		close(f->memfd[i]);
	}
	if (ut_count_fds() != f->fds_before)
		fail_msg("%d fds open after the test, %d before", ut_count_fds(), f->fds_before);
	free(f);
	return 0;
}

static uint64_t efd_take(int fd)
{
	uint64_t v = 0;

	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return 0;
	return v;
}

/*
 * (Re)starts queue 0 on a zeroed ring of num entries, as SET_VRING_NUM,
 * SET_VRING_ADDR, SET_VRING_BASE and SET_VRING_KICK would.
 */
static void fx_queue(struct fx *f, uint32_t num, uint64_t features, uint16_t base)
{
	struct vu_vq *vq = f->vq;

	vq_stop(vq);
	memset(gp(f, DESC_GPA), 0, 3 * PAGE);
	f->dev->features = features;
	f->num = num;
	f->avail_idx = base;
	ut_st16(gp(f, AVAIL_GPA + 2), base);
	ut_st16(gp(f, USED_GPA + 2), base);
	vq->num = num;
	vq->addr = (struct vu_vring_addr){
		.index = 0,
		.flags = 0,
		.desc_user_addr = uva_of(DESC_GPA),
		.used_user_addr = uva_of(USED_GPA),
		.avail_user_addr = uva_of(AVAIL_GPA),
		.log_guest_addr = USED_GPA,
	};
	vq->addr_set = true;
	vq->last_avail_idx = base;
	vq->enabled = true;
	assert_int_equal(vq_start(vq), 0);
	efd_take(f->call);
	efd_take(f->err);
}

static void set_desc_at(struct fx *f, uint64_t table, uint32_t i, uint64_t addr, uint32_t len,
			uint16_t flags, uint16_t next)
{
	uint8_t *p = gp(f, table + 16ull * i);

	ut_st64(p, addr);
	ut_st32(p + 8, len);
	ut_st16(p + 12, flags);
	ut_st16(p + 14, next);
}

static void set_desc(struct fx *f, uint32_t i, uint64_t addr, uint32_t len, uint16_t flags,
		     uint16_t next)
{
	set_desc_at(f, DESC_GPA, i, addr, len, flags, next);
}

static void avail_add(struct fx *f, uint16_t head)
{
	ut_st16(gp(f, AVAIL_GPA + 4 + 2ull * (f->avail_idx % f->num)), head);
	f->avail_idx++;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ut_st16(gp(f, AVAIL_GPA + 2), f->avail_idx);
}

static uint16_t used_idx(struct fx *f)
{
	return (uint16_t)ut_ld(gp(f, USED_GPA + 2), 2);
}

static void used_elem(struct fx *f, uint32_t slot, uint32_t *id, uint32_t *len)
{
	uint8_t *p = gp(f, USED_GPA + 4 + 8ull * slot);

	*id = (uint32_t)ut_ld(p, 4);
	*len = (uint32_t)ut_ld(p + 4, 4);
}

static void assert_used(struct fx *f, uint16_t at, uint32_t want_id, uint32_t want_len)
{
	uint32_t id, len;

	used_elem(f, at % f->num, &id, &len);
	if (id != want_id || len != want_len)
		fail_msg("used ring entry %u: id %u len %u, want id %u len %u", at, id, len,
			 want_id, want_len);
}

static struct vq_elem *pop_ok(struct fx *f)
{
	struct vq_elem *e = NULL;
	int ret = vq_pop(f->vq, &e);

	if (ret != 1)
		fail_msg("vq_pop returned %d, want 1", ret);
	assert_non_null(e);
	return e;
}

static void assert_empty(struct fx *f)
{
	struct vq_elem *e = NULL;

	assert_int_equal(vq_pop(f->vq, &e), 0);
}

static void fill(struct fx *f, uint64_t gpa, uint32_t len, uint8_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		*gp(f, gpa + i) = (uint8_t)(seed + i);
}

/* ---- direct chains, push, used ring ---- */

static void test_direct_chain(void **state)
{
	struct fx *f = *state;
	struct vq_elem *e;
	uint8_t out[16], want[16];

	fx_queue(f, 8, T_BASE_FEATURES, 0);
	fill(f, BUF_GPA, 16, 0x10);
	set_desc(f, 0, BUF_GPA, 16, T_DESC_NEXT, 1);
	set_desc(f, 1, BUF_GPA + 0x1000, 32, T_DESC_WRITE, 0);
	avail_add(f, 0);
	e = pop_ok(f);
	assert_int_equal(e->head, 0);
	assert_int_equal(e->out_num, 1);
	assert_int_equal(e->in_num, 1);
	assert_int_equal(e->out_len, 16);
	assert_int_equal(e->in_len, 32);
	assert_int_equal(e->out[0].iov_len, 16);
	assert_int_equal(e->in[0].iov_len, 32);
	assert_int_equal(vq_iov_to_buf(e->out, e->out_num, 0, out, sizeof(out)), 16);
	memcpy(want, gp(f, BUF_GPA), 16);
	assert_memory_equal(out, want, 16);
	assert_int_equal(vq_buf_to_iov(e->in, e->in_num, 3, "hello", 5), 5);
	assert_memory_equal(gp(f, BUF_GPA + 0x1000 + 3), "hello", 5);
	assert_empty(f);
	assert_int_equal(used_idx(f), 0);

	assert_int_equal(vq_push(f->vq, e, 20), 0);
	assert_int_equal(used_idx(f), 1);
	assert_used(f, 0, 0, 20);
	vq_notify(f->vq);
	assert_int_equal(efd_take(f->call), 1);

	/* Head 5, then 2, then 7: order by next, not by index. */
	set_desc(f, 5, BUF_GPA + 0x100, 7, T_DESC_NEXT, 2);
	set_desc(f, 2, BUF_GPA + 0x200, 9, T_DESC_WRITE | T_DESC_NEXT, 7);
	set_desc(f, 7, BUF_GPA + 0x300, 11, T_DESC_WRITE, 0);
	avail_add(f, 5);
	e = pop_ok(f);
	assert_int_equal(e->head, 5);
	assert_int_equal(e->out_num, 1);
	assert_int_equal(e->in_num, 2);
	assert_int_equal(e->out[0].iov_len, 7);
	assert_int_equal(e->in[0].iov_len, 9);
	assert_int_equal(e->in[1].iov_len, 11);
	assert_int_equal(e->in_gpa[0], BUF_GPA + 0x200);
	assert_int_equal(e->in_gpa[1], BUF_GPA + 0x300);
	assert_int_equal(e->in_len, 20);
	assert_int_equal(vq_push(f->vq, e, 5), 0);
	assert_int_equal(used_idx(f), 2);
	assert_used(f, 1, 5, 5);

	/* Two single-buffer requests completed out of order. */
	set_desc(f, 3, BUF_GPA + 0x400, 4, T_DESC_WRITE, 0);
	set_desc(f, 4, BUF_GPA + 0x500, 4, 0, 0);
	avail_add(f, 3);
	avail_add(f, 4);
	{
		struct vq_elem *e3 = pop_ok(f), *e4 = pop_ok(f);

		assert_int_equal(e3->head, 3);
		assert_int_equal(e4->head, 4);
		assert_int_equal(e4->out_num, 1);
		assert_int_equal(e4->in_num, 0);
		assert_empty(f);
		assert_int_equal(vq_push(f->vq, e4, 0), 0);
		assert_int_equal(vq_push(f->vq, e3, 4), 0);
	}
	assert_int_equal(used_idx(f), 4);
	assert_used(f, 2, 4, 0);
	assert_used(f, 3, 3, 4);
}

static void test_chain_of_queue_size(void **state)
{
	struct fx *f = *state;
	struct vq_elem *e;

	/* A chain through all 8 entries is as long as a chain may be. */
	fx_queue(f, 8, T_BASE_FEATURES, 0);
	for (uint32_t i = 0; i < 8; i++)
		set_desc(f, i, BUF_GPA + 0x100 * i, 1 + i, i < 7 ? T_DESC_NEXT : 0,
			 (uint16_t)(i + 1));
	avail_add(f, 0);
	e = pop_ok(f);
	assert_int_equal(e->out_num, 8);
	assert_int_equal(e->out_len, 36);
	assert_int_equal(vq_push(f->vq, e, 0), 0);
	assert_used(f, 0, 0, 0);
}

static void test_written_clamped(void **state)
{
	struct fx *f = *state;
	struct vq_elem *e;

	fx_queue(f, 8, T_BASE_FEATURES, 0);
	set_desc(f, 0, BUF_GPA, 32, T_DESC_WRITE, 0);
	avail_add(f, 0);
	e = pop_ok(f);
	assert_int_equal(vq_push(f->vq, e, 100), 0);
	/* The driver must never be told more than its buffer holds. */
	assert_used(f, 0, 0, 32);
}

static void test_used_idx_wraps(void **state)
{
	struct fx *f = *state;

	fx_queue(f, 8, T_BASE_FEATURES, 0xfffe);
	for (uint16_t h = 0; h < 4; h++) {
		set_desc(f, h, BUF_GPA + 0x100 * h, 16, T_DESC_WRITE, 0);
		avail_add(f, h);
	}
	for (uint16_t h = 0; h < 4; h++) {
		struct vq_elem *e = pop_ok(f);

		assert_int_equal(e->head, h);
		assert_int_equal(vq_push(f->vq, e, h + 1), 0);
	}
	assert_empty(f);
	assert_int_equal(used_idx(f), 2);
	/* 0xfffe % 8 = 6: slots 6, 7, 0, 1. */
	assert_used(f, 6, 0, 1);
	assert_used(f, 7, 1, 2);
	assert_used(f, 8, 2, 3);
	assert_used(f, 9, 3, 4);
}

static void test_avail_jump_exactly_num(void **state)
{
	struct fx *f = *state;

	/* The driver may make all num entries available at once. */
	fx_queue(f, 8, T_BASE_FEATURES, 0);
	for (uint16_t h = 0; h < 8; h++) {
		set_desc(f, h, BUF_GPA + 0x10 * h, 16, T_DESC_WRITE, 0);
		ut_st16(gp(f, AVAIL_GPA + 4 + 2ull * h), h);
	}
	ut_st16(gp(f, AVAIL_GPA + 2), 8);
	for (uint16_t h = 0; h < 8; h++) {
		struct vq_elem *e = pop_ok(f);

		assert_int_equal(e->head, h);
		vq_elem_free(e);
	}
	assert_empty(f);
}

static void test_not_ready(void **state)
{
	struct fx *f = *state;
	struct vq_elem *e = NULL;

	fx_queue(f, 8, T_BASE_FEATURES, 0);
	set_desc(f, 0, BUF_GPA, 16, T_DESC_WRITE, 0);
	avail_add(f, 0);
	f->vq->enabled = false;
	assert_int_equal(vq_pop(f->vq, &e), 0);
	f->vq->enabled = true;
	vq_stop(f->vq);
	assert_int_equal(vq_pop(f->vq, &e), 0);
	assert_int_equal(efd_take(f->err), 0);
}

/* ---- indirect tables ---- */

static void test_indirect(void **state)
{
	struct fx *f = *state;
	struct vq_elem *e;

	fx_queue(f, 8, T_BASE_FEATURES, 0);
	set_desc_at(f, IND_GPA, 0, BUF_GPA, 8, T_DESC_NEXT, 2);
	set_desc_at(f, IND_GPA, 2, BUF_GPA + 0x100, 16, T_DESC_WRITE | T_DESC_NEXT, 1);
	set_desc_at(f, IND_GPA, 1, BUF_GPA + 0x200, 4, T_DESC_WRITE, 0);
	/* The device ignores WRITE on the descriptor naming the table. */
	set_desc(f, 3, IND_GPA, 3 * 16, T_DESC_INDIRECT | T_DESC_WRITE, 0);
	avail_add(f, 3);
	e = pop_ok(f);
	assert_int_equal(e->head, 3);
	assert_int_equal(e->out_num, 1);
	assert_int_equal(e->in_num, 2);
	assert_int_equal(e->out[0].iov_len, 8);
	assert_int_equal(e->in[0].iov_len, 16);
	assert_int_equal(e->in[1].iov_len, 4);
	assert_int_equal(e->in_gpa[0], BUF_GPA + 0x100);
	assert_int_equal(e->in_gpa[1], BUF_GPA + 0x200);
	assert_int_equal(vq_buf_to_iov(e->in, e->in_num, 14, "abcd", 4), 4);
	assert_memory_equal(gp(f, BUF_GPA + 0x100 + 14), "ab", 2);
	assert_memory_equal(gp(f, BUF_GPA + 0x200), "cd", 2);
	assert_int_equal(vq_push(f->vq, e, 20), 0);
	assert_used(f, 0, 3, 20);
}

static void test_indirect_max_segments(void **state)
{
	struct fx *f = *state;
	struct vq_elem *e;

	/* VQ_MAX_SEGS entries are fine; the limit is from vu.h. */
	fx_queue(f, 8, T_BASE_FEATURES, 0);
	for (uint32_t i = 0; i < VQ_MAX_SEGS; i++)
		set_desc_at(f, IND_GPA, i, BUF_GPA + i, 1, i + 1 < VQ_MAX_SEGS ? T_DESC_NEXT : 0,
			    (uint16_t)(i + 1));
	set_desc(f, 0, IND_GPA, VQ_MAX_SEGS * 16, T_DESC_INDIRECT, 0);
	avail_add(f, 0);
	e = pop_ok(f);
	assert_int_equal(e->out_num, VQ_MAX_SEGS);
	vq_elem_free(e);
}

/* ---- a buffer across two regions ---- */

static void test_span_regions(void **state)
{
	struct fx *f = *state;
	uint8_t pattern[300], back[300];
	struct vq_elem *e;

	fx_queue(f, 8, T_BASE_FEATURES, 0);
	fill(f, RB_GPA - 100, 100, 1);
	fill(f, RB_GPA, 200, 101);
	set_desc(f, 0, RB_GPA - 100, 300, T_DESC_NEXT, 1);
	set_desc(f, 1, RB_GPA - 50, 100, T_DESC_WRITE, 0);
	avail_add(f, 0);
	e = pop_ok(f);
	assert_int_equal(e->out_num, 2);
	assert_int_equal(e->out[0].iov_len, 100);
	assert_int_equal(e->out[1].iov_len, 200);
	assert_int_equal(e->out_len, 300);
	assert_int_equal(vq_iov_to_buf(e->out, e->out_num, 0, back, 300), 300);
	for (int i = 0; i < 300; i++)
		pattern[i] = (uint8_t)(1 + i);
	assert_memory_equal(back, pattern, 300);
	assert_int_equal(e->in_num, 2);
	assert_int_equal(e->in[0].iov_len, 50);
	assert_int_equal(e->in[1].iov_len, 50);
	assert_int_equal(e->in_gpa[0], RB_GPA - 50);
	assert_int_equal(e->in_gpa[1], RB_GPA);
	memset(pattern, 0x5a, 100);
	assert_int_equal(vq_buf_to_iov(e->in, e->in_num, 0, pattern, 100), 100);
	for (int i = 0; i < 50; i++) {
		assert_int_equal(*gp(f, RB_GPA - 50 + i), 0x5a);
		assert_int_equal(*gp(f, RB_GPA + i), 0x5a);
	}
	assert_int_equal(vq_push(f->vq, e, 100), 0);
	assert_used(f, 0, 0, 100);
}

/* ---- broken chains ---- */

struct bad_case {
	const char *name;
	void (*build)(struct fx *f);
};

static void bad_self_loop(struct fx *f)
{
	set_desc(f, 0, BUF_GPA, 16, T_DESC_NEXT, 0);
	avail_add(f, 0);
}

static void bad_two_loop(struct fx *f)
{
	set_desc(f, 0, BUF_GPA, 16, T_DESC_NEXT, 1);
	set_desc(f, 1, BUF_GPA, 16, T_DESC_NEXT, 0);
	avail_add(f, 0);
}

static void bad_longer_than_queue(struct fx *f)
{
	for (uint32_t i = 0; i < 8; i++)
		set_desc(f, i, BUF_GPA + i, 1, T_DESC_NEXT, (uint16_t)((i + 1) % 8));
	avail_add(f, 3);
}

static void bad_next_is_num(struct fx *f)
{
	set_desc(f, 0, BUF_GPA, 16, T_DESC_NEXT, 8);
	avail_add(f, 0);
}

static void bad_next_ffff(struct fx *f)
{
	set_desc(f, 0, BUF_GPA, 16, T_DESC_NEXT, 0xffff);
	avail_add(f, 0);
}

static void bad_readable_after_writable(struct fx *f)
{
	set_desc(f, 0, BUF_GPA, 16, T_DESC_WRITE | T_DESC_NEXT, 1);
	set_desc(f, 1, BUF_GPA + 0x100, 16, 0, 0);
	avail_add(f, 0);
}

static void bad_nested_indirect(struct fx *f)
{
	set_desc_at(f, IND_GPA + 0x1000, 0, BUF_GPA, 16, 0, 0);
	set_desc_at(f, IND_GPA, 0, IND_GPA + 0x1000, 16, T_DESC_INDIRECT, 0);
	set_desc(f, 0, IND_GPA, 16, T_DESC_INDIRECT, 0);
	avail_add(f, 0);
}

static void bad_indirect_next(struct fx *f)
{
	set_desc_at(f, IND_GPA, 0, BUF_GPA, 16, 0, 0);
	set_desc(f, 0, IND_GPA, 16, T_DESC_INDIRECT | T_DESC_NEXT, 1);
	set_desc(f, 1, BUF_GPA + 0x100, 16, T_DESC_WRITE, 0);
	avail_add(f, 0);
}

static void bad_indirect_len0(struct fx *f)
{
	set_desc(f, 0, IND_GPA, 0, T_DESC_INDIRECT, 0);
	avail_add(f, 0);
}

static void bad_indirect_len24(struct fx *f)
{
	set_desc_at(f, IND_GPA, 0, BUF_GPA, 16, 0, 0);
	set_desc_at(f, IND_GPA, 1, BUF_GPA, 16, 0, 0);
	set_desc(f, 0, IND_GPA, 24, T_DESC_INDIRECT, 0);
	avail_add(f, 0);
}

static void bad_indirect_len8(struct fx *f)
{
	set_desc_at(f, IND_GPA, 0, BUF_GPA, 16, 0, 0);
	set_desc(f, 0, IND_GPA, 8, T_DESC_INDIRECT, 0);
	avail_add(f, 0);
}

static void bad_indirect_huge(struct fx *f)
{
	set_desc(f, 0, RA_GPA, (32768u + 1) * 16, T_DESC_INDIRECT, 0);
	avail_add(f, 0);
}

static void bad_indirect_unmapped(struct fx *f)
{
	set_desc(f, 0, 0x9000000, 32, T_DESC_INDIRECT, 0);
	avail_add(f, 0);
}

static void bad_indirect_past_memory(struct fx *f)
{
	set_desc(f, 0, MEM_END - 16, 32, T_DESC_INDIRECT, 0);
	avail_add(f, 0);
}

static void bad_indirect_loop(struct fx *f)
{
	set_desc_at(f, IND_GPA, 0, BUF_GPA, 16, T_DESC_NEXT, 1);
	set_desc_at(f, IND_GPA, 1, BUF_GPA, 16, T_DESC_NEXT, 0);
	set_desc(f, 0, IND_GPA, 32, T_DESC_INDIRECT, 0);
	avail_add(f, 0);
}

static void bad_indirect_next_out_of_table(struct fx *f)
{
	set_desc_at(f, IND_GPA, 0, BUF_GPA, 16, T_DESC_NEXT, 2);
	set_desc_at(f, IND_GPA, 1, BUF_GPA, 16, 0, 0);
	set_desc_at(f, IND_GPA, 2, BUF_GPA, 16, 0, 0); /* exists, but outside the table */
	set_desc(f, 0, IND_GPA, 32, T_DESC_INDIRECT, 0);
	avail_add(f, 0);
}

static void bad_indirect_too_many_segments(struct fx *f)
{
	for (uint32_t i = 0; i <= VQ_MAX_SEGS; i++)
		set_desc_at(f, IND_GPA, i, BUF_GPA + i, 1, i < VQ_MAX_SEGS ? T_DESC_NEXT : 0,
			    (uint16_t)(i + 1));
	set_desc(f, 0, IND_GPA, (VQ_MAX_SEGS + 1) * 16, T_DESC_INDIRECT, 0);
	avail_add(f, 0);
}

static void bad_unmapped_buffer(struct fx *f)
{
	set_desc(f, 0, 0x5000000, 16, T_DESC_WRITE, 0);
	avail_add(f, 0);
}

static void bad_buffer_below_memory(struct fx *f)
{
	set_desc(f, 0, RA_GPA - 8, 16, 0, 0);
	avail_add(f, 0);
}

static void bad_buffer_past_memory(struct fx *f)
{
	set_desc(f, 0, MEM_END - 10, 20, T_DESC_WRITE, 0);
	avail_add(f, 0);
}

static void bad_buffer_wraps(struct fx *f)
{
	set_desc(f, 0, 0xfffffffffffffff0ull, 0x20, 0, 0);
	avail_add(f, 0);
}

static void bad_second_buffer_unmapped(struct fx *f)
{
	set_desc(f, 0, BUF_GPA, 16, T_DESC_NEXT, 1);
	set_desc(f, 1, 0x7000000, 16, T_DESC_WRITE, 0);
	avail_add(f, 0);
}

static void bad_avail_jump(struct fx *f)
{
	for (uint16_t h = 0; h < 8; h++)
		set_desc(f, h, BUF_GPA, 16, T_DESC_WRITE, 0);
	ut_st16(gp(f, AVAIL_GPA + 2), 9); /* num + 1 ahead of last_avail_idx 0 */
}

static void bad_avail_backwards(struct fx *f)
{
	set_desc(f, 0, BUF_GPA, 16, T_DESC_WRITE, 0);
	ut_st16(gp(f, AVAIL_GPA + 2), 0xffff); /* "one behind": 65535 ahead */
}

static void bad_head_is_num(struct fx *f)
{
	avail_add(f, 8);
}

static void bad_head_ffff(struct fx *f)
{
	avail_add(f, 0xffff);
}

static const struct bad_case bad_cases[] = {
	{ "self loop", bad_self_loop },
	{ "two-descriptor loop", bad_two_loop },
	{ "chain longer than the queue", bad_longer_than_queue },
	{ "next == num", bad_next_is_num },
	{ "next == 0xffff", bad_next_ffff },
	{ "readable after writable", bad_readable_after_writable },
	{ "nested indirect", bad_nested_indirect },
	{ "indirect with NEXT", bad_indirect_next },
	{ "indirect length 0", bad_indirect_len0 },
	{ "indirect length 24", bad_indirect_len24 },
	{ "indirect length 8", bad_indirect_len8 },
	{ "indirect table > 32768 entries", bad_indirect_huge },
	{ "indirect table unmapped", bad_indirect_unmapped },
	{ "indirect table past memory", bad_indirect_past_memory },
	{ "loop inside an indirect table", bad_indirect_loop },
	{ "indirect next out of the table", bad_indirect_next_out_of_table },
	{ "more than VQ_MAX_SEGS segments", bad_indirect_too_many_segments },
	{ "unmapped buffer", bad_unmapped_buffer },
	{ "buffer below memory", bad_buffer_below_memory },
	{ "buffer past memory", bad_buffer_past_memory },
	{ "buffer address wraps", bad_buffer_wraps },
	{ "second buffer unmapped", bad_second_buffer_unmapped },
	{ "avail idx jumps by num + 1", bad_avail_jump },
	{ "avail idx goes backwards", bad_avail_backwards },
	{ "head == num", bad_head_is_num },
	{ "head == 0xffff", bad_head_ffff },
};

static void test_bad_chains(void **state)
{
	struct fx *f = *state;

	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *c = &bad_cases[i];
		struct vq_elem *e = NULL;
		uint64_t errs;
		int ret;

		fx_queue(f, 8, T_BASE_FEATURES, 0);
		c->build(f);
		ret = vq_pop(f->vq, &e);
		if (ret != -EIO)
			fail_msg("%s: vq_pop returned %d, want -EIO", c->name, ret);
		if (!f->vq->broken)
			fail_msg("%s: queue not marked broken", c->name);
		errs = efd_take(f->err);
		if (errs != 1)
			fail_msg("%s: err eventfd counted %llu, want 1", c->name,
				 (unsigned long long)errs);
		if (used_idx(f) != 0)
			fail_msg("%s: used idx moved to %u", c->name, used_idx(f));
		/* Dead until restarted, even with good work behind it. */
		set_desc(f, 5, BUF_GPA, 16, T_DESC_WRITE, 0);
		avail_add(f, 5);
		ret = vq_pop(f->vq, &e);
		if (ret != -EIO)
			fail_msg("%s: second vq_pop returned %d, want -EIO", c->name, ret);
		if (used_idx(f) != 0)
			fail_msg("%s: used idx moved to %u", c->name, used_idx(f));
	}
}

static void test_restart_after_break(void **state)
{
	struct fx *f = *state;
	struct vq_elem *e;

	fx_queue(f, 8, T_BASE_FEATURES, 0);
	bad_two_loop(f);
	assert_int_equal(vq_pop(f->vq, &e), -EIO);
	/* The driver fixes the chain; the front end stops and restarts. */
	set_desc(f, 1, BUF_GPA, 16, T_DESC_WRITE, 0);
	assert_int_equal(vq_pop(f->vq, &e), -EIO);
	vq_stop(f->vq);
	assert_int_equal(vq_start(f->vq), 0);
	e = pop_ok(f);
	assert_int_equal(e->head, 0);
	assert_int_equal(e->out_num, 1);
	assert_int_equal(e->in_num, 1);
	assert_int_equal(vq_push(f->vq, e, 16), 0);
	assert_used(f, 0, 0, 16);
}

/* ---- notification ---- */

static void set_used_event(struct fx *f, uint16_t v)
{
	ut_st16(gp(f, AVAIL_GPA + 4 + 2ull * f->num), v);
}

static uint16_t avail_event(struct fx *f)
{
	return (uint16_t)ut_ld(gp(f, USED_GPA + 4 + 8ull * f->num), 2);
}

static void complete(struct fx *f, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		uint16_t head = (uint16_t)(f->avail_idx % f->num);
		struct vq_elem *e;

		set_desc(f, head, BUF_GPA + 0x10 * head, 16, T_DESC_WRITE, 0);
		avail_add(f, head);
		e = pop_ok(f);
		assert_int_equal(vq_push(f->vq, e, 1), 0);
	}
}

/* vring_need_event() from the virtio spec, 2.7.10, as the expectation. */
static bool need_event(uint16_t event, uint16_t new_idx, uint16_t old)
{
	return (uint16_t)(new_idx - event - 1) < (uint16_t)(new_idx - old);
}

static void test_event_idx(void **state)
{
	static const struct {
		uint16_t used_event;
		unsigned int pushes;
	} steps[] = {
		{ 0, 1 },  /* idx 0 -> 1: passes 0 */
		{ 0, 1 },  /* 1 -> 2: 0 was passed before */
		{ 2, 1 },  /* 2 -> 3: passes 2 */
		{ 10, 2 }, /* 3 -> 5: 10 is ahead */
		{ 6, 3 },  /* 5 -> 8: 6 in between */
		{ 7, 1 },  /* 8 -> 9: 7 behind */
		{ 9, 1 },  /* 9 -> 10: exactly */
		{ 9, 0 },  /* nothing new */
	};
	struct fx *f = *state;
	uint16_t idx = 0;

	fx_queue(f, 16, T_BASE_FEATURES | T_F_EVENT_IDX, 0);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		uint16_t old = idx;
		bool want;
		uint64_t got;

		complete(f, steps[i].pushes);
		idx = (uint16_t)(idx + steps[i].pushes);
		set_used_event(f, steps[i].used_event);
		vq_notify(f->vq);
		want = need_event(steps[i].used_event, idx, old);
		got = efd_take(f->call);
		if (got != (want ? 1 : 0))
			fail_msg("step %zu (used_event %u, %u -> %u): %llu interrupts, want %d", i,
				 steps[i].used_event, old, idx, (unsigned long long)got, want);
	}
	/* EVENT_IDX: the device ignores NO_INTERRUPT. */
	ut_st16(gp(f, AVAIL_GPA), T_AVAIL_NO_INTERRUPT);
	complete(f, 1);
	set_used_event(f, idx);
	vq_notify(f->vq);
	assert_int_equal(efd_take(f->call), 1);
}

static void test_avail_event(void **state)
{
	struct fx *f = *state;
	struct vq_elem *e[3];

	fx_queue(f, 16, T_BASE_FEATURES | T_F_EVENT_IDX, 0);
	for (uint16_t h = 0; h < 3; h++) {
		set_desc(f, h, BUF_GPA, 16, T_DESC_WRITE, 0);
		avail_add(f, h);
	}
	for (int i = 0; i < 3; i++)
		e[i] = pop_ok(f);
	/* Out of work: the device asks to be kicked for entry 3 onwards. */
	assert_empty(f);
	assert_int_equal(avail_event(f), 3);
	for (int i = 0; i < 3; i++)
		vq_elem_free(e[i]);
}

static uint16_t used_flags(struct fx *f)
{
	return (uint16_t)ut_ld(gp(f, USED_GPA), 2);
}

/*
 * Polling mode (--rdma-poll-us): with EVENT_IDX, avail_event stays where
 * it was while the device polls, so the driver's next additions pass it at
 * most once; without, VRING_USED_F_NO_NOTIFY is set and cleared again.
 * vq_has_avail() sees work without taking it.
 */
static void test_polling_event_idx(void **state)
{
	struct fx *f = *state;
	struct vq_elem *e;

	fx_queue(f, 16, T_BASE_FEATURES | T_F_EVENT_IDX, 0);
	assert_false(vq_has_avail(f->vq));
	assert_empty(f);
	assert_int_equal(avail_event(f), 0);
	vq_set_polling(f->vq, true);
	for (uint16_t h = 0; h < 2; h++) {
		set_desc(f, h, BUF_GPA, 16, T_DESC_WRITE, 0);
		avail_add(f, h);
		assert_true(vq_has_avail(f->vq));
		e = pop_ok(f);
		vq_elem_free(e);
	}
	assert_false(vq_has_avail(f->vq));
	assert_empty(f);
	/* Not republished while polling: no kicks asked for entry 2 on. */
	assert_int_equal(avail_event(f), 0);
	assert_int_equal(used_flags(f) & 1, 0); /* the flag is not EVENT_IDX's way */
	vq_set_polling(f->vq, false);
	assert_empty(f);
	assert_int_equal(avail_event(f), 2);
}

static void test_polling_no_notify(void **state)
{
	struct fx *f = *state;
	struct vq_elem *e;

	fx_queue(f, 8, T_BASE_FEATURES, 0);
	assert_int_equal(used_flags(f) & 1, 0);
	vq_set_polling(f->vq, true);
	assert_int_equal(used_flags(f) & 1, 1);
	set_desc(f, 0, BUF_GPA, 16, T_DESC_WRITE, 0);
	avail_add(f, 0);
	assert_true(vq_has_avail(f->vq));
	e = pop_ok(f);
	vq_elem_free(e);
	assert_int_equal(used_flags(f) & 1, 1);
	vq_set_polling(f->vq, false);
	assert_int_equal(used_flags(f) & 1, 0);
	/* A stopped queue forgets polling; a broken index counts as work. */
	vq_set_polling(f->vq, true);
	ut_st16(gp(f, AVAIL_GPA + 2), (uint16_t)(f->avail_idx + 100));
	assert_true(vq_has_avail(f->vq));
	assert_int_equal(vq_pop(f->vq, &e), -EIO);
	assert_false(vq_has_avail(f->vq));
}

static void test_no_interrupt(void **state)
{
	struct fx *f = *state;

	fx_queue(f, 8, T_BASE_FEATURES, 0);
	complete(f, 1);
	vq_notify(f->vq);
	assert_int_equal(efd_take(f->call), 1);
	ut_st16(gp(f, AVAIL_GPA), T_AVAIL_NO_INTERRUPT);
	complete(f, 1);
	vq_notify(f->vq);
	assert_int_equal(efd_take(f->call), 0);
	ut_st16(gp(f, AVAIL_GPA), 0);
	complete(f, 1);
	vq_notify(f->vq);
	assert_int_equal(efd_take(f->call), 1);
	/* Without a call fd there is nobody to tell: no crash. */
	close(f->vq->call_fd);
	f->vq->call_fd = -1;
	complete(f, 1);
	vq_notify(f->vq);
	assert_int_equal(efd_take(f->call), 0);
}

/* ---- dirty log ---- */

#define LOG_BYTES 4096u

struct logfx {
	uint8_t *bits;
};

static void log_open(struct fx *f, struct logfx *l)
{
	int fd = ut_memfd("test-vu-ring", LOG_BYTES);

	l->bits = mmap(NULL, LOG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(l->bits != MAP_FAILED);
	/* The log keeps its mapping, not the fd (as QEMU's fd is closed after). */
	assert_int_equal(vu_log_set(&f->dev->log, fd, LOG_BYTES, 0), 0);
	close(fd);
}

static void log_close(struct fx *f, struct logfx *l)
{
	vu_log_clear(&f->dev->log);
	munmap(l->bits, LOG_BYTES);
}

/* The log has exactly the pages of want[] set (bit gpa/4096, LSB first). */
static void assert_log(struct logfx *l, const uint64_t *want, size_t n, const char *what)
{
	for (uint64_t page = 0; page < LOG_BYTES * 8ull; page++) {
		bool set = l->bits[page / 8] & (1u << (page % 8));
		bool expected = false;

		for (size_t i = 0; i < n; i++)
			expected |= want[i] == page;
		if (set != expected)
			fail_msg("%s: page 0x%llx (gpa 0x%llx) is %s", what,
				 (unsigned long long)page, (unsigned long long)(page * PAGE),
				 set ? "logged but was not written" : "written but not logged");
	}
}

/* out 16 bytes in page 0x104; in: 0x20 bytes across 0x105/0x106; 0x1000 in 0x113. */
static void log_chain(struct fx *f)
{
	set_desc(f, 0, 0x104000, 16, T_DESC_NEXT, 1);
	set_desc(f, 1, 0x105ff0, 0x20, T_DESC_WRITE | T_DESC_NEXT, 2);
	set_desc(f, 2, 0x113000, 0x1000, T_DESC_WRITE, 0);
	avail_add(f, 0);
}

static void test_dirty_log(void **state)
{
	struct fx *f = *state;
	struct logfx l;

	log_open(f, &l);

	/* LOG_ALL on, ring logging on at the used ring's own address. */
	fx_queue(f, 8, T_BASE_FEATURES | T_F_LOG_ALL, 0);
	f->vq->addr.flags = VU_VRING_F_LOG;
	log_chain(f);
	assert_int_equal(vq_push(f->vq, pop_ok(f), 0x30), 0);
	{
		static const uint64_t want[] = { 0x102, 0x105, 0x106, 0x113 };

		assert_log(&l, want, 4, "LOG_ALL, written 0x30");
	}

	/* Only what was written: 4 bytes stay in page 0x105. */
	memset(l.bits, 0, LOG_BYTES);
	fx_queue(f, 8, T_BASE_FEATURES | T_F_LOG_ALL, 0);
	f->vq->addr.flags = VU_VRING_F_LOG;
	log_chain(f);
	assert_int_equal(vq_push(f->vq, pop_ok(f), 4), 0);
	{
		static const uint64_t want[] = { 0x102, 0x105 };

		assert_log(&l, want, 2, "LOG_ALL, written 4");
	}

	/* Ring writes go to log_guest_addr, wherever the ring really is. */
	memset(l.bits, 0, LOG_BYTES);
	fx_queue(f, 8, T_BASE_FEATURES | T_F_LOG_ALL, 0);
	f->vq->addr.flags = VU_VRING_F_LOG;
	f->vq->addr.log_guest_addr = 0x10a000;
	log_chain(f);
	assert_int_equal(vq_push(f->vq, pop_ok(f), 0x20 + 0x1000), 0);
	{
		static const uint64_t want[] = { 0x10a, 0x105, 0x106, 0x113 };

		assert_log(&l, want, 4, "log_guest_addr elsewhere");
	}

	/* No VHOST_VRING_F_LOG: buffers are logged, the ring is not. */
	memset(l.bits, 0, LOG_BYTES);
	fx_queue(f, 8, T_BASE_FEATURES | T_F_LOG_ALL, 0);
	log_chain(f);
	assert_int_equal(vq_push(f->vq, pop_ok(f), 0x30), 0);
	{
		static const uint64_t want[] = { 0x105, 0x106, 0x113 };

		assert_log(&l, want, 3, "no ring logging");
	}

	/* A write across the two regions logs pages of both. */
	memset(l.bits, 0, LOG_BYTES);
	fx_queue(f, 8, T_BASE_FEATURES | T_F_LOG_ALL, 0);
	f->vq->addr.flags = VU_VRING_F_LOG;
	set_desc(f, 0, RB_GPA - 100, 300, T_DESC_WRITE, 0);
	avail_add(f, 0);
	assert_int_equal(vq_push(f->vq, pop_ok(f), 300), 0);
	{
		static const uint64_t want[] = { 0x102, (RB_GPA - PAGE) / PAGE, RB_GPA / PAGE };

		assert_log(&l, want, 3, "across regions");
	}

	/* LOG_ALL not acked: nothing, even with a log and ring logging. */
	memset(l.bits, 0, LOG_BYTES);
	fx_queue(f, 8, T_BASE_FEATURES, 0);
	f->vq->addr.flags = VU_VRING_F_LOG;
	log_chain(f);
	assert_int_equal(vq_push(f->vq, pop_ok(f), 0x30), 0);
	assert_log(&l, NULL, 0, "LOG_ALL off");

	log_close(f, &l);
}

static void test_log_set_rejects(void **state)
{
	struct fx *f = *state;
	int fd = ut_memfd("test-vu-ring", 8192);
	int pfd[2];

	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	assert_true(vu_log_set(&f->dev->log, fd, 0, 0) < 0);
	assert_true(vu_log_set(&f->dev->log, fd, 8193, 0) < 0);
	assert_true(vu_log_set(&f->dev->log, fd, 4096, 4097) < 0);
	assert_true(vu_log_set(&f->dev->log, fd, 4096, UINT64_MAX - 100) < 0);
	assert_true(vu_log_set(&f->dev->log, pfd[0], 4096, 0) < 0);
	assert_null(f->dev->log.bits);
	assert_int_equal(vu_log_set(&f->dev->log, fd, 4096, 4096), 0);
	assert_non_null(f->dev->log.bits);
	vu_log_clear(&f->dev->log);
	close(pfd[0]);
	close(pfd[1]);
	close(fd);
}

/* ---- guest memory ---- */

static void test_mem_add_rejects(void **state)
{
	struct vu_mem *mem = calloc(1, sizeof(*mem));
	static volatile sig_atomic_t poisoned;
	int fd = ut_memfd("test-vu-ring", 0x40000), small = ut_memfd("test-vu-ring", 0x1000), pfd[2];
	struct {
		const char *name;
		struct vu_mem_desc d;
	} bad[] = {
		{ "same gpa", { 0x100000, 0x1000, 0x50000000, 0 } },
		{ "gpa overlaps the end", { 0x10f000, 0x2000, 0x50000000, 0 } },
		{ "gpa overlaps the start", { 0xff000, 0x2000, 0x50000000, 0 } },
		{ "gpa encloses", { 0xf0000, 0x30000 - 0x10000, 0x50000000, 0 } },
		{ "uva overlaps", { 0x200000, 0x2000, 0x4000f000, 0 } },
		{ "uva encloses", { 0x200000, 0x10000, 0x3fff8000, 0 } },
		{ "gpa wraps", { 0xfffffffffffff000ull, 0x2000, 0x50000000, 0 } },
		{ "uva wraps", { 0x200000, 0x2000, 0xfffffffffffff000ull, 0 } },
		{ "offset wraps", { 0x200000, 0x2000, 0x50000000, 0xfffffffffffff000ull } },
		{ "size + offset past the file", { 0x200000, 0x40000, 0x50000000, 0x1000 } },
		{ "size past the file", { 0x200000, 0x40001, 0x50000000, 0 } },
		{ "offset past the file", { 0x200000, 0x1000, 0x50000000, 0x40000 } },
		{ "size 0", { 0x200000, 0, 0x50000000, 0 } },
	};

	(void)state;
	assert_non_null(mem);
	/* As vu_dev_new() does: every mapping reports faults to its connection. */
	mem->poisoned = &poisoned;
	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	{
		struct vu_mem_desc a = { 0x100000, 0x10000, 0x40000000, 0 };

		assert_int_equal(vu_mem_add(mem, &a, fd), 0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = vu_mem_add(mem, &bad[i].d, fd);

		if (ret >= 0)
			fail_msg("%s: vu_mem_add returned %d", bad[i].name, ret);
		if (mem->nregions != 1)
			fail_msg("%s: %u regions after a reject", bad[i].name, mem->nregions);
	}
	{
		struct vu_mem_desc p = { 0x200000, 0x1000, 0x50000000, 0 };

		assert_true(vu_mem_add(mem, &p, pfd[0]) < 0);
		assert_true(vu_mem_add(mem, &p, -1) < 0);
		assert_int_equal(mem->nregions, 1);
	}
	/* Adjacent in both spaces, exactly to the end of the file: fine. */
	{
		struct vu_mem_desc b = { 0x110000, 0xf000, 0x40010000, 0x31000 };

		assert_int_equal(vu_mem_add(mem, &b, fd), 0);
		assert_int_equal(mem->nregions, 2);
		assert_int_equal(vu_mem_remove(mem, &b), 0);
		assert_true(vu_mem_remove(mem, &b) < 0);
		assert_int_equal(mem->nregions, 1);
	}
	/* 32 slots in all (GET_MAX_MEM_SLOTS); the 33rd is refused. */
	for (unsigned int i = 1; i < VU_MAX_MEM_SLOTS; i++) {
		struct vu_mem_desc s = { 0x1000000ull * i, 0x1000, 0x60000000ull + 0x1000 * i, 0 };

		assert_int_equal(vu_mem_add(mem, &s, small), 0);
	}
	{
		struct vu_mem_desc s = { 0x80000000ull, 0x1000, 0x70000000ull, 0 };

		assert_true(vu_mem_add(mem, &s, small) < 0);
	}
	assert_int_equal(mem->nregions, VU_MAX_MEM_SLOTS);
	vu_mem_clear(mem);
	assert_int_equal(mem->nregions, 0);
	free(mem);
	close(fd);
	close(small);
	close(pfd[0]);
	close(pfd[1]);
}

static void test_translation(void **state)
{
	struct fx *f = *state;
	const struct vu_mem *mem = &f->dev->mem;
	uint64_t len = 0;
	uint8_t *p;

	fill(f, RB_GPA - 100, 100, 7);
	fill(f, RB_GPA, 300, 107);
	/* A range crossing from A into B is cut at the end of A. */
	p = vu_mem_gpa(mem, RB_GPA - 100, 300, &len);
	assert_non_null(p);
	assert_int_equal(len, 100);
	assert_memory_equal(p, gp(f, RB_GPA - 100), 100);
	/* B honours its mmap offset. */
	p = vu_mem_gpa(mem, RB_GPA, 300, &len);
	assert_non_null(p);
	assert_int_equal(len, 300);
	assert_memory_equal(p, gp(f, RB_GPA), 300);
	p = vu_mem_gpa(mem, MEM_END - 1, 10, &len);
	assert_non_null(p);
	assert_int_equal(len, 1);
	assert_null(vu_mem_gpa(mem, MEM_END, 1, &len));
	assert_null(vu_mem_gpa(mem, RA_GPA - 1, 10, &len));
	assert_null(vu_mem_gpa(mem, 0, 1, &len));
	assert_null(vu_mem_gpa(mem, UINT64_MAX, 1, &len));
	/* Front-end addresses: one region only, even where they touch. */
	assert_non_null(vu_mem_uva(mem, RA_UVA + RA_SIZE - 8, 8));
	assert_null(vu_mem_uva(mem, RA_UVA + RA_SIZE - 8, 16));
	assert_null(vu_mem_uva(mem, RB_UVA + RB_SIZE - 4, 8));
	assert_null(vu_mem_uva(mem, RA_UVA - 1, 2));
	assert_null(vu_mem_uva(mem, RA_UVA + 8, UINT64_MAX));
	p = vu_mem_uva(mem, RB_UVA + 16, 4);
	assert_non_null(p);
	assert_memory_equal(p, gp(f, RB_GPA + 16), 4);
}

static void test_ring_addresses(void **state)
{
	struct fx *f = *state;
	struct vu_vq *vq = f->vq;

	fx_queue(f, 8, T_BASE_FEATURES, 0);
	vq_stop(vq);
	/* A used ring hanging off the end of memory cannot be mapped. */
	vq->addr.used_user_addr = RB_UVA + RB_SIZE - 8;
	assert_true(vq_start(vq) < 0);
	vq->addr.used_user_addr = uva_of(USED_GPA);
	/* A descriptor table crossing from A into B is not contiguous for us. */
	vq->addr.desc_user_addr = RB_UVA - 64;
	assert_true(vq_start(vq) < 0);
	vq->addr.desc_user_addr = 0x1234000;
	assert_true(vq_start(vq) < 0);
	vq->addr.desc_user_addr = uva_of(DESC_GPA);
	/* virtio 1.2, 2.7: used ring 4-aligned, avail 2, descriptors 16. */
	vq->addr.used_user_addr = uva_of(USED_GPA) + 2;
	assert_true(vq_start(vq) < 0);
	vq->addr.used_user_addr = uva_of(USED_GPA);
	vq->addr.avail_user_addr = uva_of(AVAIL_GPA) + 1;
	assert_true(vq_start(vq) < 0);
	vq->addr.avail_user_addr = uva_of(AVAIL_GPA);
	vq->addr.desc_user_addr = uva_of(DESC_GPA) + 8;
	assert_true(vq_start(vq) < 0);
	vq->addr.desc_user_addr = uva_of(DESC_GPA);
	assert_int_equal(vq_start(vq), 0);
}

/* ---- inflight recovery ---- */

static struct vu_inflight_queue *inflight_q(struct fx *f, unsigned int i)
{
	struct vu_inflight_queue *q = vu_inflight_queue(&f->dev->inflight, i);

	assert_non_null(q);
	return q;
}

/* Queue 0 with inflight area of nq queues of qsize; the ring is set, not started. */
static void inflight_ring(struct fx *f, uint32_t num, uint16_t nq, uint16_t qsize)
{
	fx_queue(f, num, T_BASE_FEATURES, 0);
	vq_stop(f->vq);
	assert_int_equal(vu_inflight_create(&f->dev->inflight, nq, qsize), 0);
	for (uint16_t h = 0; h < num; h++)
		set_desc(f, h, BUF_GPA + 0x100ull * h, 16u + h, T_DESC_WRITE, 0);
}

static void mark_inflight(struct vu_inflight_queue *q, uint16_t head, uint64_t counter)
{
	q->desc[head].inflight = 1;
	q->desc[head].counter = counter;
}

static void test_inflight_resubmit(void **state)
{
	struct fx *f = *state;
	struct vu_inflight_queue *q;
	static const uint16_t ring[] = { 0, 2, 1, 6, 3, 4 };
	static const uint16_t want_order[] = { 6, 3, 1 };
	struct vq_elem *e;

	inflight_ring(f, 8, 2, 8);
	q = inflight_q(f, 0);
	assert_int_equal(q->version, 1);
	assert_int_equal(q->desc_num, 8);
	/* Six taken over time: 0 and 2 completed, 1, 6, 3 in flight, 4 is new. */
	for (unsigned int i = 0; i < 6; i++)
		avail_add(f, ring[i]);
	ut_st16(gp(f, USED_GPA + 2), 2);
	q->used_idx = 2;
	mark_inflight(q, 1, 9);
	mark_inflight(q, 6, 4);
	mark_inflight(q, 3, 6);
	assert_int_equal(vq_start(f->vq), 0);
	assert_int_equal(f->vq->last_avail_idx, 2 + 3);
	for (unsigned int i = 0; i < 3; i++) {
		e = pop_ok(f);
		if (e->head != want_order[i])
			fail_msg("resubmission %u: head %u, want %u", i, e->head, want_order[i]);
		assert_int_equal(e->in_len, 16u + e->head);
		if (e->head == 3) {
			assert_int_equal(vq_push(f->vq, e, 1), 0);
			assert_int_equal(q->desc[3].inflight, 0);
			assert_int_equal(q->used_idx, 3);
			assert_int_equal(used_idx(f), 3);
			assert_int_equal(q->last_batch_head, 3);
			assert_used(f, 2, 3, 1);
		} else {
			vq_elem_free(e);
		}
	}
	/* Then new work, tracked with a counter past every recovered one. */
	e = pop_ok(f);
	assert_int_equal(e->head, 4);
	assert_int_equal(q->desc[4].inflight, 1);
	assert_true(q->desc[4].counter > 9);
	assert_empty(f);
	assert_int_equal(vq_push(f->vq, e, 2), 0);
	assert_int_equal(q->desc[4].inflight, 0);
	assert_int_equal(q->used_idx, 4);
	assert_int_equal(q->last_batch_head, 4);
	assert_int_equal(q->desc[4].next, 3);
	/* 1 and 6 are still in flight. */
	assert_int_equal(q->desc[1].inflight, 1);
	assert_int_equal(q->desc[6].inflight, 1);
}

static void test_inflight_uninitialised(void **state)
{
	struct fx *f = *state;
	struct vu_inflight_queue *q;
	struct vq_elem *e;

	/* version 0: "an uninitialized buffer", whatever else it holds. */
	inflight_ring(f, 8, 1, 8);
	q = inflight_q(f, 0);
	q->version = 0;
	mark_inflight(q, 5, 1);
	f->vq->last_avail_idx = 1;
	avail_add(f, 7);
	avail_add(f, 2);
	assert_int_equal(vq_start(f->vq), 0);
	e = pop_ok(f);
	assert_int_equal(e->head, 2);
	assert_empty(f);
	assert_int_equal(vq_push(f->vq, e, 0), 0);
}

static void test_inflight_last_batch(void **state)
{
	struct fx *f = *state;
	struct vu_inflight_queue *q;
	struct vq_elem *e;

	/*
	 * Batch of one: head 6 reached the used ring (idx 3) but the area's
	 * used_idx still says 2, so its inflight flag is stale.
	 */
	inflight_ring(f, 8, 1, 8);
	q = inflight_q(f, 0);
	for (uint16_t h = 0; h < 5; h++)
		avail_add(f, h);
	ut_st16(gp(f, USED_GPA + 2), 3);
	q->used_idx = 2;
	q->last_batch_head = 6;
	mark_inflight(q, 6, 5);
	q->desc[6].next = 1;
	mark_inflight(q, 1, 9);
	mark_inflight(q, 3, 6);
	assert_int_equal(vq_start(f->vq), 0);
	assert_int_equal(q->desc[6].inflight, 0);
	assert_int_equal(q->used_idx, 3);
	assert_int_equal(f->vq->last_avail_idx, 3 + 2);
	e = pop_ok(f);
	assert_int_equal(e->head, 3);
	vq_elem_free(e);
	e = pop_ok(f);
	assert_int_equal(e->head, 1);
	vq_elem_free(e);
	assert_empty(f);

	/* Batch of two: 6 then 1 (linked by next) reached the ring. */
	inflight_ring(f, 8, 1, 8);
	q = inflight_q(f, 0);
	for (uint16_t h = 0; h < 5; h++)
		avail_add(f, h);
	ut_st16(gp(f, USED_GPA + 2), 4);
	q->used_idx = 2;
	q->last_batch_head = 6;
	mark_inflight(q, 6, 5);
	q->desc[6].next = 1;
	mark_inflight(q, 1, 9);
	q->desc[1].next = 3;
	mark_inflight(q, 3, 6);
	assert_int_equal(vq_start(f->vq), 0);
	assert_int_equal(q->desc[6].inflight, 0);
	assert_int_equal(q->desc[1].inflight, 0);
	assert_int_equal(q->desc[3].inflight, 1);
	assert_int_equal(q->used_idx, 4);
	assert_int_equal(f->vq->last_avail_idx, 4 + 1);
	e = pop_ok(f);
	assert_int_equal(e->head, 3);
	vq_elem_free(e);
	assert_empty(f);
}

/*
 * The inflight area is sized by GET/SET_INFLIGHT_FD's queue_size; the ring
 * by SET_VRING_NUM.  A front end may make them differ.  Queue 0's tracking
 * must then never read or write the bytes of queue 1's region.
 */
static void test_inflight_area_smaller_than_ring(void **state)
{
	struct fx *f = *state;
	uint64_t qbytes = vu_inflight_queue_bytes(8);
	struct vu_inflight_queue *q1;
	uint8_t snapshot[1024];
	struct vq_elem *e = NULL;
	int ret;

	assert_true(qbytes <= sizeof(snapshot));
	inflight_ring(f, 16, 2, 8);
	q1 = inflight_q(f, 1);
	mark_inflight(q1, 2, 77); /* queue 1 has its own request in flight */
	memcpy(snapshot, q1, qbytes);
	ret = vq_start(f->vq);
	if (memcmp(snapshot, q1, qbytes) != 0)
		fail_msg("starting queue 0 (num 16, inflight queue_size 8, vq_start %d) "
			 "overwrote queue 1's inflight region", ret);
	if (ret == 0) {
		set_desc(f, 12, BUF_GPA, 16, T_DESC_WRITE, 0);
		avail_add(f, 12);
		assert_int_equal(vq_pop(f->vq, &e), 1);
		assert_int_equal(vq_push(f->vq, e, 1), 0);
		if (memcmp(snapshot, q1, qbytes) != 0)
			fail_msg("tracking head 12 of queue 0 wrote into queue 1's region");
	}
}

static void test_inflight_area_claims_more(void **state)
{
	struct fx *f = *state;
	struct vu_inflight_queue *q0, *q1;
	struct vq_elem *e = NULL;
	int ret;

	/*
	 * The area holds 8 entries per queue, but queue 0's header says 16,
	 * like the ring.  Queue 1's in-flight head 0 must not be taken for a
	 * request of queue 0.
	 */
	inflight_ring(f, 16, 2, 8);
	q0 = inflight_q(f, 0);
	q1 = inflight_q(f, 1);
	q0->desc_num = 16;
	mark_inflight(q1, 0, 1);
	mark_inflight(q1, 1, 2);
	ret = vq_start(f->vq);
	if (ret == 0) {
		ret = vq_pop(f->vq, &e);
		if (ret == 1) {
			unsigned int head = e->head;

			vq_elem_free(e);
			fail_msg("queue 0 resubmitted head %u, which only queue 1's region marks "
				 "in flight", head);
		}
		assert_int_equal(ret, 0);
	}
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		T(test_direct_chain),
		T(test_chain_of_queue_size),
		T(test_written_clamped),
		T(test_used_idx_wraps),
		T(test_avail_jump_exactly_num),
		T(test_not_ready),
		T(test_indirect),
		T(test_indirect_max_segments),
		T(test_span_regions),
		T(test_bad_chains),
		T(test_restart_after_break),
		T(test_event_idx),
		T(test_avail_event),
		T(test_polling_event_idx),
		T(test_polling_no_notify),
		T(test_no_interrupt),
		T(test_dirty_log),
		T(test_log_set_rejects),
		cmocka_unit_test(test_mem_add_rejects),
		T(test_translation),
		T(test_ring_addresses),
		T(test_inflight_resubmit),
		T(test_inflight_uninitialised),
		T(test_inflight_last_batch),
		T(test_inflight_area_smaller_than_ring),
		T(test_inflight_area_claims_more),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}

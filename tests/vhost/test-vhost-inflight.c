/* SPDX-License-Identifier: MIT */
/*
 * vrdma-vhost blk: inflight tracking (GET/SET_INFLIGHT_FD, resubmission of
 * requests a crashed back end left in flight), reconnection with the same
 * guest memory and rings, and RESET_DEVICE.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "util.h"
#include "vt-common.h"

#define FILE_SIZE (1ull << 20)
#define QSIZE 64
#define NUM_QUEUES 2
/* Split layout: a 16-byte queue header, then 16 bytes per descriptor. */
#define QHDR_SIZE 16
#define DESC_STATE_SIZE 16
#define INFLIGHT_ALIGN 64

static struct vt_daemon dmn;
static char blk_file[256];

static uint64_t queue_stride(uint16_t qsize)
{
	uint64_t raw = QHDR_SIZE + (uint64_t)DESC_STATE_SIZE * qsize;

	return (raw + INFLIGHT_ALIGN - 1) & ~(uint64_t)(INFLIGHT_ALIGN - 1);
}

struct qregion {
	uint8_t *base;
};

static uint16_t q_version(struct qregion q) { return get_le16(q.base + 8); }
static uint16_t q_desc_num(struct qregion q) { return get_le16(q.base + 10); }
static uint16_t q_used_idx(struct qregion q) { return get_le16(q.base + 14); }
static uint8_t *q_desc(struct qregion q, uint16_t i) { return q.base + QHDR_SIZE + 16ull * i; }
static uint8_t q_inflight(struct qregion q, uint16_t i)
{
	return __atomic_load_n(q_desc(q, i), __ATOMIC_ACQUIRE);
}

static void fill(uint8_t *b, size_t len, uint8_t seed)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)(seed + i * 5);
}

static void assert_file_matches(uint64_t off, const uint8_t *want, size_t len)
{
	_cleanup_(closep) int fd = open(blk_file, O_RDONLY | O_CLOEXEC);
	uint8_t got[4096];

	assert_true(len <= sizeof(got));
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, got, len, (off_t)off), (ssize_t)len);
	assert_memory_equal(got, want, len);
}

/* Connect and negotiate everything, without rings. */
static struct vuf_conn *connect_negotiated(void)
{
	struct vuf_conn *c;

	assert_int_equal(vuf_conn_connect(dmn.sock, VT_TIMEOUT_MS, &c), 0);
	assert_int_equal(vuf_negotiate(c, VT_BLK_FEATURES, VT_PROTO_ALL, NULL, NULL), 0);
	assert_true(vuf_conn_protocol_features(c) & VUF_BIT(VUF_PF_INFLIGHT_SHMFD));
	return c;
}

static void test_get_inflight(void **state)
{
	struct vuf_inflight_desc d;
	struct vuf_conn *c = connect_negotiated();
	struct stat st;
	uint8_t *map;
	int fd;

	(void)state;
	assert_int_equal(vuf_get_inflight_fd(c, NUM_QUEUES, QSIZE, &d, &fd), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(d.mmap_size >= NUM_QUEUES * queue_stride(QSIZE));
	assert_true(range_within(d.mmap_offset, d.mmap_size, (uint64_t)st.st_size));
	assert_int_equal(d.num_queues, NUM_QUEUES);
	assert_int_equal(d.queue_size, QSIZE);
	map = mmap(NULL, d.mmap_offset + d.mmap_size, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	for (unsigned q = 0; q < NUM_QUEUES; q++) {
		struct qregion r = { map + d.mmap_offset + q * queue_stride(QSIZE) };

		assert_int_equal(q_version(r), 1);
		assert_int_equal(q_desc_num(r), QSIZE);
		assert_int_equal(q_used_idx(r), 0);
		for (uint16_t i = 0; i < QSIZE; i++)
			assert_int_equal(q_inflight(r, i), 0);
	}
	munmap(map, d.mmap_offset + d.mmap_size);
	close(fd);
	vuf_conn_free(c);
}

/* Memory, inflight region, rings: QEMU's order on (re)start. */
static void setup_rings(struct vuf_conn *c, struct vuf_mem *mem, struct vuf_vq *vqs,
			const struct vuf_inflight_desc *d, int inflight_fd)
{
	assert_int_equal(vuf_mem_send_table(mem, c), 0);
	assert_int_equal(vuf_set_inflight_fd(c, d, inflight_fd), 0);
	for (unsigned q = 0; q < NUM_QUEUES; q++) {
		vqs[q].conn = c;
		assert_int_equal(vuf_vq_start(&vqs[q]), 0);
	}
}

static void test_tracking_and_reconnect(void **state)
{
	struct vuf_inflight_desc d;
	struct vuf_vq vqs[NUM_QUEUES];
	struct vuf_blk_req r;
	struct vuf_conn *c;
	struct vuf_mem *mem = vuf_mem_new();
	uint8_t out[4096], in[4096];
	struct qregion q0;
	uint8_t *map;
	uint32_t base;
	int fd;

	(void)state;
	assert_non_null(mem);
	assert_int_equal(vuf_mem_add_region(mem, VT_RAM0_GPA, VT_RAM0_SIZE, 0), 0);
	c = connect_negotiated();
	for (unsigned q = 0; q < NUM_QUEUES; q++)
		assert_int_equal(vuf_vq_init(&vqs[q], c, mem, q, QSIZE), 0);
	assert_int_equal(vuf_blk_req_alloc(mem, sizeof(out), &r), 0);
	assert_int_equal(vuf_get_inflight_fd(c, NUM_QUEUES, QSIZE, &d, &fd), 0);
	map = mmap(NULL, d.mmap_offset + d.mmap_size, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	q0.base = map + d.mmap_offset;
	setup_rings(c, mem, vqs, &d, fd);

	/* Completed requests leave nothing inflight; used_idx follows the ring. */
	fill(out, sizeof(out), 1);
	assert_int_equal(vuf_blk_io(&vqs[0], &r, VUF_BLK_T_OUT, 16, out, sizeof(out), false,
				    VT_TIMEOUT_MS), VUF_BLK_S_OK);
	assert_int_equal(vuf_blk_io(&vqs[0], &r, VUF_BLK_T_IN, 16, in, sizeof(in), false,
				    VT_TIMEOUT_MS), VUF_BLK_S_OK);
	assert_int_equal(q_used_idx(q0), vuf_vq_used_idx(&vqs[0]));
	for (uint16_t i = 0; i < QSIZE; i++)
		assert_int_equal(q_inflight(q0, i), 0);

	/* The front end goes away and comes back with the same RAM and rings. */
	vuf_conn_free(c);
	c = connect_negotiated();
	setup_rings(c, mem, vqs, &d, fd);
	memset(in, 0, sizeof(in));
	assert_int_equal(vuf_blk_io(&vqs[0], &r, VUF_BLK_T_IN, 16, in, sizeof(in), false,
				    VT_TIMEOUT_MS), VUF_BLK_S_OK);
	assert_memory_equal(in, out, sizeof(in));
	assert_int_equal(vuf_blk_io(&vqs[1], &r, VUF_BLK_T_FLUSH, 0, NULL, 0, false,
				    VT_TIMEOUT_MS), VUF_BLK_S_OK);
	/* The ring indices carried on across the reconnection. */
	assert_int_equal(vuf_vq_stop(&vqs[0], &base), 0);
	assert_int_equal(base, 3);

	for (unsigned q = 0; q < NUM_QUEUES; q++)
		vuf_vq_destroy(&vqs[q]);
	vuf_conn_free(c);
	munmap(map, d.mmap_offset + d.mmap_size);
	close(fd);
	vuf_mem_free(mem);
}

/* An inflight region as a back end that crashed mid-request would leave it. */
static int crafted_region(struct vuf_inflight_desc *ret_d, uint8_t **ret_map)
{
	uint64_t size = NUM_QUEUES * queue_stride(QSIZE);
	int fd = memfd_create("crafted-inflight", MFD_CLOEXEC);
	uint8_t *map;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	for (unsigned q = 0; q < NUM_QUEUES; q++) {
		uint8_t *b = map + q * queue_stride(QSIZE);

		put_le16(b + 8, 1);
		put_le16(b + 10, QSIZE);
	}
	*ret_d = (struct vuf_inflight_desc){
		.mmap_size = size, .num_queues = NUM_QUEUES, .queue_size = QSIZE,
	};
	*ret_map = map;
	return fd;
}

static void mark_inflight(uint8_t *queue, uint16_t head, uint64_t counter)
{
	uint8_t *e = queue + QHDR_SIZE + 16ull * head;

	e[0] = 1;
	put_le64(e + 8, counter);
}

static void test_resubmit(void **state)
{
	struct vuf_inflight_desc d;
	struct vuf_blk_req first, second;
	struct vt_dev dev;
	struct vuf_used u1, u2;
	uint8_t a[4096], b[4096];
	uint8_t *map;
	int fd;
	const uint64_t sector = 64;

	(void)state;
	/* Memory and ring layout first; the queues start only after SET_INFLIGHT_FD. */
	assert_int_equal(vt_dev_open(&dev, dmn.sock, VT_BLK_FEATURES, VT_PROTO_ALL, NUM_QUEUES,
				     QSIZE, false), 0);
	assert_int_equal(vuf_blk_req_alloc(dev.mem, sizeof(a), &first), 0);
	assert_int_equal(vuf_blk_req_alloc(dev.mem, sizeof(b), &second), 0);
	/*
	 * Two writes to the same sector were fetched by the dead back end:
	 * "first" (counter 1) then "second" (counter 2). The avail ring lists
	 * them the other way round, so only counter order leaves b on disk.
	 */
	fill(a, sizeof(a), 0x10);
	fill(b, sizeof(b), 0x80);
	memcpy(vuf_mem_ptr(dev.mem, second.data_gpa, sizeof(b)), b, sizeof(b));
	memcpy(vuf_mem_ptr(dev.mem, first.data_gpa, sizeof(a)), a, sizeof(a));
	assert_int_equal(vuf_blk_post(&dev.vq[0], &second, VUF_BLK_T_OUT, sector, sizeof(b),
				      false), 0);
	assert_int_equal(vuf_blk_post(&dev.vq[0], &first, VUF_BLK_T_OUT, sector, sizeof(a),
				      false), 0);
	fd = crafted_region(&d, &map);
	mark_inflight(map, first.head, 1);
	mark_inflight(map, second.head, 2);
	assert_int_equal(vuf_set_inflight_fd(dev.c, &d, fd), 0);
	/* QEMU restarts a ring whose back end died at its used idx. */
	for (unsigned q = 0; q < NUM_QUEUES; q++)
		assert_int_equal(vuf_vq_start_at(&dev.vq[q], 0), 0);

	/* No kick: resubmission happens on queue start. */
	assert_int_equal(vuf_vq_wait_used(&dev.vq[0], VT_TIMEOUT_MS, &u1), 0);
	assert_int_equal(vuf_vq_wait_used(&dev.vq[0], VT_TIMEOUT_MS, &u2), 0);
	assert_int_equal(u1.id, first.head);
	assert_int_equal(u2.id, second.head);
	assert_int_equal(vuf_blk_req_status(&dev.vq[0], &first), VUF_BLK_S_OK);
	assert_int_equal(vuf_blk_req_status(&dev.vq[0], &second), VUF_BLK_S_OK);
	assert_file_matches(sector * VUF_BLK_SECTOR, b, sizeof(b));
	assert_int_equal(q_inflight((struct qregion){ map }, first.head), 0);
	assert_int_equal(q_inflight((struct qregion){ map }, second.head), 0);
	assert_int_equal(q_used_idx((struct qregion){ map }), 2);

	/*
	 * Those two avail entries were consumed by the resubmission: a kick
	 * now must not execute them a second time.
	 */
	assert_int_equal(vuf_vq_kick_force(&dev.vq[0]), 0);
	usleep(300 * 1000);
	assert_int_equal(vuf_vq_used_idx(&dev.vq[0]), 2);

	/* And the queue goes on normally. */
	memset(a, 0, sizeof(a));
	assert_int_equal(vuf_blk_io(&dev.vq[0], &first, VUF_BLK_T_IN, sector, a, sizeof(a), false,
				    VT_TIMEOUT_MS), VUF_BLK_S_OK);
	assert_memory_equal(a, b, sizeof(a));
	munmap(map, d.mmap_size);
	close(fd);
	vt_dev_close(&dev);
}

static void test_reset_device(void **state)
{
	struct vuf_blk_req r;
	struct vt_dev dev;
	uint8_t buf[512];

	(void)state;
	assert_int_equal(vt_dev_open(&dev, dmn.sock, VT_BLK_FEATURES, VT_PROTO_ALL, 1, QSIZE,
				     true), 0);
	assert_int_equal(vuf_blk_req_alloc(dev.mem, sizeof(buf), &r), 0);
	assert_int_equal(vuf_blk_io(&dev.vq[0], &r, VUF_BLK_T_IN, 0, buf, sizeof(buf), false,
				    VT_TIMEOUT_MS), VUF_BLK_S_OK);
	/* Reset, then the whole setup again on the same connection. */
	assert_int_equal(vuf_reset_device(dev.c), 0);
	assert_int_equal(vuf_negotiate(dev.c, VT_BLK_FEATURES, VT_PROTO_ALL, NULL, NULL), 0);
	assert_int_equal(vuf_mem_send_table(dev.mem, dev.c), 0);
	vuf_vq_reset(&dev.vq[0]);
	assert_int_equal(vuf_vq_start(&dev.vq[0]), 0);
	assert_int_equal(vuf_blk_io(&dev.vq[0], &r, VUF_BLK_T_IN, 0, buf, sizeof(buf), false,
				    VT_TIMEOUT_MS), VUF_BLK_S_OK);
	vt_dev_close(&dev);
}

static void test_fresh_connection_after_all(void **state)
{
	struct vuf_blk_req r;
	struct vt_dev dev;
	uint8_t buf[512];

	(void)state;
	assert_int_equal(vt_dev_open(&dev, dmn.sock, VT_BLK_FEATURES, VT_PROTO_ALL, NUM_QUEUES,
				     QSIZE, true), 0);
	assert_int_equal(vuf_blk_req_alloc(dev.mem, sizeof(buf), &r), 0);
	assert_int_equal(vuf_blk_io(&dev.vq[1], &r, VUF_BLK_T_IN, 0, buf, sizeof(buf), false,
				    VT_TIMEOUT_MS), VUF_BLK_S_OK);
	vt_dev_close(&dev);
}

static int setup(void **state)
{
	(void)state;
	return vt_spawn_blk(&dmn, "inflight", FILE_SIZE, (const char *[]){ "--num-queues", "2", NULL },
			    blk_file) ? -1 : 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_inflight),
		cmocka_unit_test(test_tracking_and_reconnect),
		cmocka_unit_test(test_resubmit),
		cmocka_unit_test(test_reset_device),
		cmocka_unit_test(test_fresh_connection_after_all),
	};
	vt_init(argc, argv);
	return VT_RUN(tests, setup, NULL, &dmn);
}

/* SPDX-License-Identifier: MIT */
/*
 * vrdma-vhost --device rng: features, and the data path with an entropy
 * file whose byte i is i (251 bytes), so every returned byte tells where in
 * the cycle it came from.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util.h"
#include "vt-common.h"

#define CYCLE 251
#define RNG_FEATURES (VUF_BIT(VUF_F_VERSION_1) | VUF_BIT(VUF_F_PROTOCOL_FEATURES) | \
		      VUF_BIT(VUF_F_INDIRECT_DESC) | VUF_BIT(VUF_F_EVENT_IDX))

static struct vt_daemon file_rng, urandom_rng;
static char entropy_file[256];

static uint8_t cycle_pattern(uint64_t i)
{
	return (uint8_t)i;
}

/* Reads len bytes (the device may return fewer per request) into out. */
static void rng_read(struct vt_dev *dev, uint64_t buf_gpa, uint8_t *out, uint32_t len)
{
	uint32_t got = 0;

	while (got < len) {
		int n = vuf_rng_read(&dev->vq[0], buf_gpa, len - got, VT_TIMEOUT_MS);

		assert_true(n > 0);
		memcpy(out + got, vuf_mem_ptr(dev->mem, buf_gpa, (uint64_t)n), (size_t)n);
		got += (uint32_t)n;
	}
}

/* One queue of 16, started, on the rng back end d. */
static void open_rng(struct vt_dev *dev, const struct vt_daemon *d)
{
	assert_int_equal(vt_dev_open(dev, d->sock, RNG_FEATURES, VT_PROTO_ALL, 1, 16, true), 0);
}

/* The bytes continue the cycle from *pos. */
static void assert_cycle(const uint8_t *b, size_t len, unsigned *pos)
{
	for (size_t i = 0; i < len; i++) {
		if (b[i] != *pos)
			fail_msg("byte %zu is %u, expected %u (offset in the cycle)", i, b[i], *pos);
		*pos = (*pos + 1) % CYCLE;
	}
}

static void test_features(void **state)
{
	const uint64_t blk_bits = VUF_BIT(VUF_BLK_F_SEG_MAX) | VUF_BIT(VUF_BLK_F_BLK_SIZE) |
				  VUF_BIT(VUF_BLK_F_FLUSH) | VUF_BIT(VUF_BLK_F_MQ) |
				  VUF_BIT(VUF_BLK_F_RO);
	struct vuf_conn *c;
	uint64_t f, pf, n;

	(void)state;
	assert_int_equal(vuf_conn_connect(file_rng.sock, VT_TIMEOUT_MS, &c), 0);
	assert_int_equal(vuf_set_owner(c), 0);
	assert_int_equal(vuf_get_features(c, &f), 0);
	assert_true(f & VUF_BIT(VUF_F_VERSION_1));
	assert_true(f & VUF_BIT(VUF_F_PROTOCOL_FEATURES));
	assert_int_equal(f & blk_bits, 0);
	assert_int_equal(vuf_get_protocol_features(c, &pf), 0);
	/* Inflight tracking is blk only. */
	assert_int_equal(pf & VUF_BIT(VUF_PF_INFLIGHT_SHMFD), 0);
	assert_int_equal(vuf_set_protocol_features(c, pf & VT_PROTO_ALL), 0);
	assert_int_equal(vuf_get_queue_num(c, &n), 0);
	assert_int_equal(n, 1);
	vuf_conn_free(c);
}

static void test_cyclic_file(void **state)
{
	uint8_t buf[1000];
	struct vt_dev dev;
	unsigned pos = 0;
	uint64_t gpa;

	(void)state;
	open_rng(&dev, &file_rng);
	assert_int_equal(vuf_mem_alloc(dev.mem, sizeof(buf), 4096, &gpa), 0);
	/* From offset 0, then across the end of the file several times. */
	rng_read(&dev, gpa, buf, 100);
	assert_cycle(buf, 100, &pos);
	rng_read(&dev, gpa, buf, 1000);
	assert_cycle(buf, 1000, &pos);
	rng_read(&dev, gpa, buf, 1);
	assert_cycle(buf, 1, &pos);
	vt_dev_close(&dev);
}

static void test_chain_and_indirect(void **state)
{
	const uint32_t seg[] = { 10, 300, 7 };
	struct vuf_buf bufs[3];
	uint8_t *p[3];
	struct vt_dev dev;
	struct vuf_used u;
	unsigned pos = 0;
	uint16_t head;

	(void)state;
	open_rng(&dev, &file_rng);
	for (int i = 0; i < 3; i++) {
		bufs[i] = (struct vuf_buf){ .len = seg[i], .device_writes = true };
		assert_int_equal(vuf_mem_alloc(dev.mem, seg[i], 4096, &bufs[i].gpa), 0);
		p[i] = vuf_mem_ptr(dev.mem, bufs[i].gpa, seg[i]);
	}
	for (int indirect = 0; indirect < 2; indirect++) {
		size_t done = 0;

		assert_int_equal(vuf_vq_add(&dev.vq[0], bufs, 3, indirect, &head), 0);
		assert_int_equal(vuf_vq_kick(&dev.vq[0]), 0);
		assert_int_equal(vuf_vq_wait_used(&dev.vq[0], VT_TIMEOUT_MS, &u), 0);
		assert_int_equal(u.id, head);
		assert_true(u.len > 0 && u.len <= 317);
		/* Where this instance is in the cycle is test_instance_starts_at_zero's business. */
		if (!indirect)
			pos = p[0][0];
		/* The device fills the segments in order. */
		for (int i = 0; i < 3 && done < u.len; i++) {
			size_t n = u.len - done < seg[i] ? u.len - done : seg[i];

			assert_cycle(p[i], n, &pos);
			done += n;
		}
	}
	vt_dev_close(&dev);
}

static void test_instance_starts_at_zero(void **state)
{
	struct vt_dev first, second;
	unsigned pos = 0;
	uint8_t buf[64];
	uint64_t gpa1, gpa2;

	(void)state;
	/*
	 * The contract: each connection is an independent device instance and
	 * a regular file is served from offset 0. So a second instance, opened
	 * after the first has consumed bytes, starts at 0 too.
	 */
	open_rng(&first, &file_rng);
	assert_int_equal(vuf_mem_alloc(first.mem, sizeof(buf), 4096, &gpa1), 0);
	rng_read(&first, gpa1, buf, 10);
	open_rng(&second, &file_rng);
	assert_int_equal(vuf_mem_alloc(second.mem, sizeof(buf), 4096, &gpa2), 0);
	rng_read(&second, gpa2, buf, sizeof(buf));
	assert_cycle(buf, sizeof(buf), &pos);
	vt_dev_close(&second);
	vt_dev_close(&first);
}

static void test_urandom(void **state)
{
	uint8_t a[256], b[256];
	struct vt_dev dev;
	uint64_t gpa;

	(void)state;
	open_rng(&dev, &urandom_rng);
	assert_int_equal(vuf_mem_alloc(dev.mem, sizeof(a), 4096, &gpa), 0);
	rng_read(&dev, gpa, a, sizeof(a));
	rng_read(&dev, gpa, b, sizeof(b));
	/* 2048 random bits repeating, or all zero, is not going to happen. */
	assert_memory_not_equal(a, b, sizeof(a));
	vt_dev_close(&dev);
}

static int setup(void **state)
{
	const char *file_args[] = { "--device", "rng", "--entropy-file", entropy_file, NULL };
	const char *urandom_args[] = { "--device", "rng", NULL };

	(void)state;
	vt_path("entropy", entropy_file, sizeof(entropy_file));
	if (vt_make_file(entropy_file, CYCLE, cycle_pattern) ||
	    vt_spawn(&file_rng, "rng.sock", file_args) ||
	    vt_spawn(&urandom_rng, "urandom.sock", urandom_args))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_features),
		cmocka_unit_test(test_cyclic_file),
		cmocka_unit_test(test_chain_and_indirect),
		cmocka_unit_test(test_instance_starts_at_zero),
		cmocka_unit_test(test_urandom),
	};
	vt_init(argc, argv);
	return VT_RUN(tests, setup, NULL, &file_rng, &urandom_rng);
}

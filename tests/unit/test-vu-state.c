/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of vhost/core/vu-state.c: the device's own state moved through
 * the front end (SET_DEVICE_STATE_FD, CHECK_DEVICE_STATE, as QEMU 8.2
 * defines them), on a device made by vu_dev_new() over a socketpair whose
 * other end plays the front end.  The back end answers with a memfd of its
 * own: the front end reads the saved state to its end, and writes a state
 * to load from its start.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>

#include "unit-common.h"
#include "vu-internal.h"

#define HDR 12u
#define F_VERSION 0x1u
#define F_REPLY 0x4u
#define STATE_NOFD (1ull << 8)
#define SAVED_BYTES (300u << 10) /* several pipe buffers' worth */

/* ---- a device with a state of its own ---- */

struct fake {
	uint8_t *saved; /* what save_state hands out */
	size_t saved_len;
	GByteArray *loaded; /* what load_state got */
	int load_result;
	unsigned int loads;
};

static int fake_save(void *opaque, uint8_t **ret_data, size_t *ret_len)
{
	struct fake *f = opaque;

	*ret_data = g_memdup2(f->saved, f->saved_len);
	*ret_len = f->saved_len;
	return 0;
}

static int fake_load(void *opaque, const uint8_t *data, size_t len)
{
	struct fake *f = opaque;

	f->loads++;
	g_byte_array_set_size(f->loaded, 0);
	g_byte_array_append(f->loaded, data, (guint)len);
	return f->load_result;
}

static void no_watch(struct vu_dev *dev, int fd, vu_watch_cb cb, void *data)
{
	(void)dev, (void)fd, (void)cb, (void)data;
}

static void no_unwatch(struct vu_dev *dev, int fd)
{
	(void)dev, (void)fd;
}

struct fx {
	struct fake fake;
	struct vu_dev *dev;
	int front; /* the front end's end of the socket */
	int fds_before;
};

static int fx_setup(void **state)
{
	static const struct vu_loop_ops loop = { .add_watch = no_watch,
						 .remove_watch = no_unwatch };
	struct vu_device_ops ops = { .name = "stateful", .max_queues = 1,
				     .save_state = fake_save, .load_state = fake_load };
	struct fx *f = g_new0(struct fx, 1);
	int sv[2];

	f->fds_before = ut_count_fds();
	f->fake.saved_len = SAVED_BYTES;
	f->fake.saved = g_malloc(SAVED_BYTES);
	for (size_t i = 0; i < SAVED_BYTES; i++)
		f->fake.saved[i] = (uint8_t)(i * 7 + (i >> 11));
	f->fake.loaded = g_byte_array_new();
	ut_stream_pair(sv);
	assert_int_equal(vu_dev_new(sv[0], &ops, &f->fake, &loop, NULL, &f->dev), 0);
	f->front = sv[1];
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	vu_dev_free(f->dev);
	close(f->front);
	g_free(f->fake.saved);
	g_byte_array_free(f->fake.loaded, TRUE);
	/* Every channel the back end made was closed, on every path. */
	assert_int_equal(ut_count_fds(), f->fds_before);
	g_free(f);
	return 0;
}

/* ---- the front end's side ---- */

/* Sends one request with an optional fd and has the back end run it;
 * returns what vu_dev_dispatch() returned. */
static int request(struct fx *f, uint32_t req, const void *payload, uint32_t size, int fd)
{
	uint8_t buf[HDR + 16];

	ut_st32(buf, req);
	ut_st32(buf + 4, F_VERSION);
	ut_st32(buf + 8, size);
	memcpy(buf + HDR, payload, size);
	ut_send_raw(f->front, buf, HDR + size, fd >= 0 ? &fd : NULL, fd >= 0);
	return vu_dev_dispatch(f->dev);
}

/* The reply's u64, and the fd that came with it (-1 when none). */
static uint64_t reply(struct fx *f, uint32_t req, int *ret_fd)
{
	uint8_t buf[HDR + 8];
	int fd = -1;

	ut_recv_raw(f->front, buf, sizeof(buf), &fd, 1);
	assert_int_equal(ut_ld(buf, 4), req);
	assert_int_equal(ut_ld(buf + 4, 4), F_VERSION | F_REPLY);
	assert_int_equal(ut_ld(buf + 8, 4), 8);
	if (ret_fd)
		*ret_fd = fd;
	else if (fd >= 0)
		close(fd);
	return ut_ld(buf + HDR, 8);
}

static void negotiate(struct fx *f)
{
	uint8_t features[8];

	ut_st64(features, 1ull << VU_PROTO_F_DEVICE_STATE);
	assert_int_equal(request(f, VU_SET_PROTOCOL_FEATURES, features, 8, -1), 0);
}

/* SET_DEVICE_STATE_FD with a pipe end, as QEMU sends it; the pipe's other
 * end is closed (the back end answers with its own channel). */
static uint64_t set_state_fd(struct fx *f, uint32_t direction, uint32_t phase, int *ret_fd)
{
	uint8_t p[8];
	int pipefd[2];
	uint64_t r;

	assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
	ut_st32(p, direction);
	ut_st32(p + 4, phase);
	assert_int_equal(request(f, VU_SET_DEVICE_STATE_FD, p, 8,
				 pipefd[direction == VU_STATE_SAVE ? 1 : 0]), 0);
	close(pipefd[0]);
	close(pipefd[1]);
	r = reply(f, VU_SET_DEVICE_STATE_FD, ret_fd);
	return r;
}

static uint64_t check_state(struct fx *f)
{
	assert_int_equal(request(f, VU_CHECK_DEVICE_STATE, NULL, 0, -1), 0);
	return reply(f, VU_CHECK_DEVICE_STATE, NULL);
}

/* ---- tests ---- */

/* The saved state, read to the end of the back end's channel. */
static void test_save(void **state)
{
	struct fx *f = *state;
	g_autofree uint8_t *got = g_malloc(SAVED_BYTES + 1);
	size_t have = 0;
	ssize_t n;
	int fd;

	negotiate(f);
	assert_int_equal(set_state_fd(f, VU_STATE_SAVE, VU_STATE_PHASE_STOPPED, &fd), 0);
	assert_true(fd >= 0);
	while ((n = read(fd, got + have, SAVED_BYTES + 1 - have)) > 0)
		have += (size_t)n;
	assert_int_equal(n, 0);
	close(fd);
	assert_int_equal(have, SAVED_BYTES);
	assert_memory_equal(got, f->fake.saved, SAVED_BYTES);
	assert_int_equal(check_state(f), 0);
}

static void write_all(int fd, const uint8_t *data, size_t len, size_t chunk)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, data + off, MIN(chunk, len - off));

		assert_true(n > 0);
		off += (size_t)n;
	}
}

/* A state written in pieces reaches the device whole, once CHECK comes;
 * what the device says of it is CHECK's answer. */
static void test_load(void **state)
{
	struct fx *f = *state;
	int fd;

	negotiate(f);
	assert_int_equal(set_state_fd(f, VU_STATE_LOAD, VU_STATE_PHASE_STOPPED, &fd), 0);
	assert_true(fd >= 0);
	write_all(fd, f->fake.saved, SAVED_BYTES, 4099);
	close(fd);
	assert_int_equal(f->fake.loads, 0);
	assert_int_equal(check_state(f), 0);
	assert_int_equal(f->fake.loads, 1);
	assert_int_equal(f->fake.loaded->len, SAVED_BYTES);
	assert_memory_equal(f->fake.loaded->data, f->fake.saved, SAVED_BYTES);
	/* A state the device refuses fails CHECK. */
	f->fake.load_result = -EBADMSG;
	assert_int_equal(set_state_fd(f, VU_STATE_LOAD, VU_STATE_PHASE_STOPPED, &fd), 0);
	write_all(fd, f->fake.saved, 100, 100);
	close(fd);
	assert_int_equal(check_state(f), EBADMSG);
	assert_int_equal(f->fake.loaded->len, 100);
}

/* A state of more than 64 MiB is refused before the device sees it, and
 * the channel cannot grow past one byte more than that. */
static void test_load_too_large(void **state)
{
	struct fx *f = *state;
	g_autofree uint8_t *chunk = g_malloc0(1u << 20);
	int fd;

	negotiate(f);
	assert_int_equal(set_state_fd(f, VU_STATE_LOAD, VU_STATE_PHASE_STOPPED, &fd), 0);
	for (int i = 0; i < 64; i++)
		assert_int_equal(write(fd, chunk, 1u << 20), 1 << 20);
	assert_int_equal(write(fd, chunk, 1), 1);
	assert_int_equal(write(fd, chunk, 1), -1);
	assert_int_equal(errno, EPERM);
	close(fd);
	assert_int_equal(check_state(f), E2BIG);
	assert_int_equal(f->fake.loads, 0);
}

/* Refused with an error and no channel: a phase other than "stopped", an
 * unknown direction, a device with a queue started. */
static void test_refusals(void **state)
{
	struct fx *f = *state;
	int fd;

	negotiate(f);
	assert_int_equal(set_state_fd(f, VU_STATE_SAVE, 1, &fd), STATE_NOFD | 1);
	assert_int_equal(fd, -1);
	assert_int_equal(set_state_fd(f, 2, VU_STATE_PHASE_STOPPED, &fd), STATE_NOFD | 1);
	assert_int_equal(fd, -1);
	f->dev->vqs[0].started = true;
	assert_int_equal(set_state_fd(f, VU_STATE_SAVE, VU_STATE_PHASE_STOPPED, &fd),
			 STATE_NOFD | 1);
	assert_int_equal(fd, -1);
	f->dev->vqs[0].started = false;
	/* CHECK with nothing moved, or after a refused SET, is an error. */
	assert_int_equal(check_state(f), EINVAL);
	assert_int_equal(f->fake.loads, 0);
}

/* Without the protocol feature the messages are a protocol error: the
 * connection goes. */
static void test_not_negotiated(void **state)
{
	struct fx *f = *state;
	uint8_t p[8] = { 0 };
	int pipefd[2];

	assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
	assert_true(request(f, VU_SET_DEVICE_STATE_FD, p, 8, pipefd[1]) < 0);
	close(pipefd[0]);
	close(pipefd[1]);
}

/* A device with no state of its own does not offer the feature. */
static void test_not_offered(void **state)
{
	static const struct vu_loop_ops loop = { .add_watch = no_watch,
						 .remove_watch = no_unwatch };
	struct vu_device_ops ops = { .name = "stateless", .max_queues = 1 };
	struct vu_dev *dev;
	uint8_t buf[HDR];
	int sv[2];

	(void)state;
	ut_stream_pair(sv);
	assert_int_equal(vu_dev_new(sv[0], &ops, NULL, &loop, NULL, &dev), 0);
	ut_st32(buf, VU_GET_PROTOCOL_FEATURES);
	ut_st32(buf + 4, F_VERSION);
	ut_st32(buf + 8, 0);
	ut_send_raw(sv[1], buf, HDR, NULL, 0);
	assert_int_equal(vu_dev_dispatch(dev), 0);
	{
		uint8_t r[HDR + 8];

		ut_recv_raw(sv[1], r, sizeof(r), NULL, 0);
		assert_int_equal(ut_ld(r + HDR, 8) >> VU_PROTO_F_DEVICE_STATE & 1, 0);
	}
	vu_dev_free(dev);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_save, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_load, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_load_too_large, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refusals, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_not_negotiated, fx_setup, fx_teardown),
		cmocka_unit_test(test_not_offered),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of vhost/rdma/rdma-peer-wire.c: the bytes back ends exchange
 * when a guest with RDMA connections moves.  A request and a reply read
 * back as written; every byte a request must have as it is (magic,
 * reserved bytes, op, 24-bit QP numbers, a bounded rkey count, no
 * destination outside RETARGET) is refused otherwise.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rdma-peer-wire.h"
#include "unit-common.h"

static const struct rdma_peer_request retarget = {
	.op = RDMA_PEER_RETARGET, .qpn = 0x11, .from_qpn = 0x22, .new_qpn = 0xffffff,
	.from_gid = { [10] = 0xff, [11] = 0xff, 192, 0, 2, 1 },
	.new_gid = { [10] = 0xff, [11] = 0xff, 192, 0, 2, 2 },
	.token = { 1, 2, 3, [15] = 16 }, .n_rkeys = 2,
};

static void test_round_trip(void **state)
{
	const struct rdma_peer_rkey rkeys[2] = { { 0x100, 0x200 }, { 0xffffffff, 7 } };
	uint8_t b[RDMA_PEER_REQUEST_SIZE], k[16], reply[RDMA_PEER_REPLY_SIZE];
	struct rdma_peer_request got;
	struct rdma_peer_rkey back[2];
	uint32_t status;

	(void)state;
	rdma_peer_request_encode(&retarget, b);
	assert_int_equal(rdma_peer_request_decode(b, &got), 0);
	assert_memory_equal(&got, &retarget, sizeof(got));
	rdma_peer_rkeys_encode(rkeys, 2, k);
	rdma_peer_rkeys_decode(k, 2, back);
	assert_memory_equal(back, rkeys, sizeof(back));
	rdma_peer_reply_encode(EPERM, reply);
	assert_int_equal(rdma_peer_reply_decode(reply, &status), 0);
	assert_int_equal(status, EPERM);
	reply[12] = 1;
	assert_int_equal(rdma_peer_reply_decode(reply, &status), -EBADMSG);
}

/* A copy of the encoded RETARGET with one change, refused. */
static void expect_refused(const char *what, size_t off, uint32_t v, unsigned int width)
{
	uint8_t b[RDMA_PEER_REQUEST_SIZE];
	struct rdma_peer_request got;

	rdma_peer_request_encode(&retarget, b);
	if (width == 1)
		b[off] = (uint8_t)v;
	else if (width == 2)
		ut_st16(b + off, (uint16_t)v);
	else
		ut_st32(b + off, v);
	if (rdma_peer_request_decode(b, &got) != -EBADMSG)
		fail_msg("%s: accepted", what);
}

static void test_refusals(void **state)
{
	struct rdma_peer_request pause = retarget;
	uint8_t b[RDMA_PEER_REQUEST_SIZE];
	struct rdma_peer_request got;

	(void)state;
	expect_refused("magic", 0, 'w', 1);
	expect_refused("op 0", 8, 0, 2);
	expect_refused("op 5", 8, 5, 2);
	expect_refused("reserved after op", 10, 1, 2);
	expect_refused("reserved after new_qpn", 60, 1, 4);
	expect_refused("qpn of 25 bits", 16, 1u << 24, 4);
	expect_refused("from_qpn of 25 bits", 20, 1u << 24, 4);
	expect_refused("new_qpn of 25 bits", 56, 1u << 24, 4);
	expect_refused("too many rkeys", 12, RDMA_PEER_MAX_RKEYS + 1, 4);
	/* Only a RETARGET names a destination and rkeys. */
	pause.op = RDMA_PEER_PAUSE;
	pause.n_rkeys = 0;
	pause.new_qpn = 0;
	memset(pause.new_gid, 0, 16);
	rdma_peer_request_encode(&pause, b);
	assert_int_equal(rdma_peer_request_decode(b, &got), 0);
	ut_st32(b + 12, 1);
	assert_int_equal(rdma_peer_request_decode(b, &got), -EBADMSG);
	ut_st32(b + 12, 0);
	b[79] = 1;
	assert_int_equal(rdma_peer_request_decode(b, &got), -EBADMSG);
	b[79] = 0;
	ut_st32(b + 56, 5);
	assert_int_equal(rdma_peer_request_decode(b, &got), -EBADMSG);
	/* A DISCONNECT names the two ends and nothing more. */
	pause.op = RDMA_PEER_DISCONNECT;
	rdma_peer_request_encode(&pause, b);
	assert_int_equal(rdma_peer_request_decode(b, &got), 0);
	assert_int_equal(got.op, RDMA_PEER_DISCONNECT);
	assert_int_equal(got.from_qpn, 0x22);
	b[64] = 1;
	assert_int_equal(rdma_peer_request_decode(b, &got), -EBADMSG);
}

/* Random bytes and single-bit flips never crash the decoder. */
static void test_garbage(void **state)
{
	uint8_t b[RDMA_PEER_REQUEST_SIZE];
	struct rdma_peer_request got;

	(void)state;
	ut_rnd_seed(0x9ee5);
	for (int i = 0; i < 20000; i++) {
		for (size_t j = 0; j < sizeof(b); j++)
			b[j] = (uint8_t)ut_rnd();
		if (i & 1)
			memcpy(b, RDMA_PEER_MAGIC, 8);
		if (rdma_peer_request_decode(b, &got) == 0) {
			assert_true(got.op >= RDMA_PEER_PAUSE && got.op <= RDMA_PEER_DISCONNECT);
			assert_true(got.n_rkeys <= RDMA_PEER_MAX_RKEYS);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_garbage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: MIT
/*
 * Unit tests of lib/xport-wire.c: the encoders and the validating decoders,
 * which are the only place where bytes received from a peer are decoded.
 *
 * Every decoder call goes through a wrapper that copies the input into a
 * heap block of exactly `len` bytes (so that AddressSanitizer reports any
 * read past the end) and checks that a failing decoder leaves its result
 * untouched.  The fuzz loop compares every decoder with an independent
 * reference model written from the header's description of the format.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <glib.h>

#include "unit-common.h"
#include "xport-wire.h"
#include "xport.h"

#define FUZZ_ITERATIONS 100000u
#define FUZZ_SEED 0x9e3779b97f4a7c15ull

/* ---- helpers ---- */

static bool zeros(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* buf == NULL is passed through as NULL. */
static int dec_hello(const void *buf, size_t len, struct xport_hello *ret)
{
	struct xport_hello out, sentinel;
	uint8_t *copy = buf ? ut_dup_exact(buf, len) : NULL;
	int r;

	memset(&out, 0xa5, sizeof(out));
	memcpy(&sentinel, &out, sizeof(out));
	r = xport_hello_decode(copy, len, &out);
	free(copy);
	if (r != 0)
		assert_memory_equal(&out, &sentinel, sizeof(out));
	else if (ret)
		*ret = out;
	return r;
}

static int dec_welcome(const void *buf, size_t len, struct xport_welcome *ret)
{
	struct xport_welcome out, sentinel;
	uint8_t *copy = buf ? ut_dup_exact(buf, len) : NULL;
	int r;

	memset(&out, 0xa5, sizeof(out));
	memcpy(&sentinel, &out, sizeof(out));
	r = xport_welcome_decode(copy, len, &out);
	free(copy);
	if (r != 0)
		assert_memory_equal(&out, &sentinel, sizeof(out));
	else if (ret)
		*ret = out;
	return r;
}

static int dec_region(const void *buf, size_t len,
		      struct xport_region_wire *ret)
{
	struct xport_region_wire out, sentinel;
	uint8_t *copy = buf ? ut_dup_exact(buf, len) : NULL;
	int r;

	memset(&out, 0xa5, sizeof(out));
	memcpy(&sentinel, &out, sizeof(out));
	r = xport_region_decode(copy, len, &out);
	free(copy);
	if (r != 0)
		assert_memory_equal(&out, &sentinel, sizeof(out));
	else if (ret)
		*ret = out;
	return r;
}

static int dec_frame(const void *buf, size_t len, uint32_t max_msg,
		     struct xport_frame *ret)
{
	struct xport_frame out, sentinel;
	uint8_t *copy = buf ? ut_dup_exact(buf, len) : NULL;
	int r;

	memset(&out, 0xa5, sizeof(out));
	memcpy(&sentinel, &out, sizeof(out));
	r = xport_frame_decode(copy, len, max_msg, &out);
	free(copy);
	if (r != 0)
		assert_memory_equal(&out, &sentinel, sizeof(out));
	else if (ret)
		*ret = out;
	return r;
}

static void assert_hello_eq(const struct xport_hello *a,
			    const struct xport_hello *b)
{
	assert_int_equal(a->channel, b->channel);
	assert_int_equal(a->nchannels, b->nchannels);
	assert_int_equal(a->max_msg, b->max_msg);
	assert_int_equal(a->recv_depth, b->recv_depth);
	assert_int_equal(a->token, b->token);
	assert_int_equal(a->flags, b->flags);
}

static void assert_welcome_eq(const struct xport_welcome *a,
			      const struct xport_welcome *b)
{
	assert_int_equal(a->status, b->status);
	assert_int_equal(a->max_msg, b->max_msg);
}

static void assert_region_eq(const struct xport_region_wire *a,
			     const struct xport_region_wire *b)
{
	assert_int_equal(a->kind, b->kind);
	assert_int_equal(a->access, b->access);
	assert_int_equal(a->id, b->id);
	assert_int_equal(a->key, b->key);
	assert_int_equal(a->base, b->base);
	assert_int_equal(a->len, b->len);
}

static void assert_frame_eq(const struct xport_frame *a,
			    const struct xport_frame *b)
{
	assert_int_equal(a->op, b->op);
	assert_int_equal(a->len, b->len);
	assert_int_equal(a->region, b->region);
	assert_int_equal(a->key, b->key);
	assert_int_equal(a->offset, b->offset);
	assert_int_equal(a->tag, b->tag);
}

/* ---- hello ---- */

static const struct xport_hello hello_ref = {
	.channel = 2,
	.nchannels = 4,
	.max_msg = 4096,
	.recv_depth = 64,
	.token = 0x0123456789abcdefull,
};
static const uint8_t hello_ref_bytes[XPORT_HELLO_SIZE] = {
	'V', 'X', 'H', 'I',			/* magic */
	0x01, 0x00,				/* version */
	0x02, 0x00,				/* channel */
	0x04, 0x00,				/* nchannels */
	0x00, 0x00,				/* flags */
	0x00, 0x10, 0x00, 0x00,			/* max_msg */
	0x40, 0x00, 0x00, 0x00,			/* recv_depth */
	0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, /* token */
	0x00, 0x00, 0x00, 0x00,			/* reserved */
};

static void test_hello_golden(void **state)
{
	uint8_t out[XPORT_HELLO_SIZE];
	struct xport_hello h;

	(void)state;
	memset(out, 0xff, sizeof(out)); /* the encoder must write every byte */
	xport_hello_encode(&hello_ref, out);
	assert_memory_equal(out, hello_ref_bytes, sizeof(out));

	ut_assert_rc(dec_hello(hello_ref_bytes, sizeof(hello_ref_bytes), &h), 0,
		  "golden hello");
	assert_hello_eq(&h, &hello_ref);
}

static void test_hello_roundtrip(void **state)
{
	static const struct xport_hello cases[] = {
		{ 0, 1, XPORT_MIN_MSG, 1, 0 },
		{ 15, 16, XPORT_MAX_MSG, XPORT_MAX_DEPTH, UINT64_MAX },
		{ 0, 16, 65536, 128, 1 },
		{ 7, 8, XPORT_MAX_MSG - 1, XPORT_MAX_DEPTH - 1, 0x8000000000000000ull },
		{ 2, 4, 4096, 64, 0x0123456789abcdefull },
	};
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		uint8_t buf[64] = { 0 };
		uint8_t again[XPORT_HELLO_SIZE];
		struct xport_hello h;

		xport_hello_encode(&cases[i], buf);
		ut_assert_rc(dec_hello(buf, XPORT_HELLO_SIZE, &h), 0, "case %zu", i);
		assert_hello_eq(&h, &cases[i]);
		xport_hello_encode(&h, again);
		assert_memory_equal(again, buf, XPORT_HELLO_SIZE);

		/* rdma_cm private data: padded with zeros, 56 bytes. */
		memset(&h, 0, sizeof(h));
		ut_assert_rc(dec_hello(buf, 56, &h), 0, "case %zu, 56 bytes", i);
		assert_hello_eq(&h, &cases[i]);
	}
}

static void test_hello_bad_magic(void **state)
{
	(void)state;

	for (unsigned i = 0; i < 4; i++) {
		for (unsigned bit = 0; bit < 8; bit++) {
			uint8_t buf[XPORT_HELLO_SIZE];

			memcpy(buf, hello_ref_bytes, sizeof(buf));
			buf[i] ^= (uint8_t)(1u << bit);
			ut_assert_rc(dec_hello(buf, sizeof(buf), NULL), -EBADMSG,
				  "magic byte %u bit %u", i, bit);
		}
	}

	static const char *const others[] = { "VXHA", "VXRD", "IHXV", "\0\0\0\0" };
	for (size_t i = 0; i < G_N_ELEMENTS(others); i++) {
		uint8_t buf[XPORT_HELLO_SIZE];

		memcpy(buf, hello_ref_bytes, sizeof(buf));
		memcpy(buf, others[i], 4);
		ut_assert_rc(dec_hello(buf, sizeof(buf), NULL), -EBADMSG,
			  "magic %zu", i);
	}

	/* A welcome (zero-padded to 32 bytes) is not a hello. */
	struct xport_welcome w = { .status = 0, .max_msg = 4096 };
	uint8_t buf[XPORT_HELLO_SIZE] = { 0 };
	xport_welcome_encode(&w, buf);
	ut_assert_rc(dec_hello(buf, sizeof(buf), NULL), -EBADMSG, "welcome as hello");

	/* Wrong magic wins over a wrong version. */
	memcpy(buf, hello_ref_bytes, sizeof(buf));
	buf[0] = 'X';
	ut_st16(buf + 4, 2);
	ut_assert_rc(dec_hello(buf, sizeof(buf), NULL), -EBADMSG,
		  "bad magic and bad version");
}

static void test_hello_version(void **state)
{
	static const uint16_t versions[] = { 0, 2, 3, 0x0100, 0x8000, 0xffff };
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(versions); i++) {
		uint8_t buf[56] = { 0 };

		memcpy(buf, hello_ref_bytes, XPORT_HELLO_SIZE);
		ut_st16(buf + 4, versions[i]);
		ut_assert_rc(dec_hello(buf, XPORT_HELLO_SIZE, NULL), -EPROTONOSUPPORT,
			  "version 0x%x", versions[i]);
		ut_assert_rc(dec_hello(buf, 56, NULL), -EPROTONOSUPPORT,
			  "version 0x%x, 56 bytes", versions[i]);
	}
}

static void test_hello_short(void **state)
{
	(void)state;

	for (size_t len = 0; len < XPORT_HELLO_SIZE; len++)
		ut_assert_rc(dec_hello(hello_ref_bytes, len, NULL), -EBADMSG,
			  "len %zu", len);
	ut_assert_rc(dec_hello(NULL, XPORT_HELLO_SIZE, NULL), -EBADMSG, "NULL, 32");
	ut_assert_rc(dec_hello(NULL, 56, NULL), -EBADMSG, "NULL, 56");
	ut_assert_rc(dec_hello(NULL, 0, NULL), -EBADMSG, "NULL, 0");
}

static void test_hello_tail(void **state)
{
	uint8_t buf[64];
	struct xport_hello h;
	(void)state;

	memset(buf, 0, sizeof(buf));
	memcpy(buf, hello_ref_bytes, XPORT_HELLO_SIZE);
	for (size_t len = XPORT_HELLO_SIZE; len <= sizeof(buf); len++) {
		memset(&h, 0, sizeof(h));
		ut_assert_rc(dec_hello(buf, len, &h), 0, "zero tail, len %zu", len);
		assert_hello_eq(&h, &hello_ref);
	}

	for (size_t pos = XPORT_HELLO_SIZE; pos < sizeof(buf); pos++) {
		static const uint8_t vals[] = { 0x01, 0x80, 0xff };

		for (size_t v = 0; v < G_N_ELEMENTS(vals); v++) {
			/* A fresh buffer each time: no reliance on undoing the poke. */
			memset(buf, 0, sizeof(buf));
			memcpy(buf, hello_ref_bytes, XPORT_HELLO_SIZE);
			buf[pos] = vals[v];
			ut_assert_rc(dec_hello(buf, sizeof(buf), NULL), -EBADMSG,
				  "tail byte %zu = 0x%x", pos, vals[v]);
			ut_assert_rc(dec_hello(buf, pos + 1, NULL), -EBADMSG,
				  "last tail byte %zu = 0x%x", pos, vals[v]);
			/* Bytes past len are not part of the message. */
			ut_assert_rc(dec_hello(buf, pos, NULL), 0,
				  "non-zero byte %zu past len", pos);
		}
	}
}

struct hello_case {
	uint16_t channel, nchannels;
	uint32_t max_msg, recv_depth;
	int want;
};

static void test_hello_fields(void **state)
{
	static const struct hello_case cases[] = {
		/* channels */
		{ 0, 1, 4096, 16, 0 },
		{ 15, XPORT_MAX_CHANNELS, 4096, 16, 0 },
		{ 0, 0, 4096, 16, -EBADMSG },
		{ 0, XPORT_MAX_CHANNELS + 1, 4096, 16, -EBADMSG },
		{ 16, XPORT_MAX_CHANNELS + 1, 4096, 16, -EBADMSG },
		{ 0, 0x0100, 4096, 16, -EBADMSG },
		{ 0, 0xffff, 4096, 16, -EBADMSG },
		{ 1, 1, 4096, 16, -EBADMSG },
		{ 4, 4, 4096, 16, -EBADMSG },
		{ 16, 16, 4096, 16, -EBADMSG },
		{ 0x0100, 16, 4096, 16, -EBADMSG },
		{ 0xffff, 16, 4096, 16, -EBADMSG },
		/* max_msg */
		{ 0, 1, 0, 16, -EBADMSG },
		{ 0, 1, 1, 16, -EBADMSG },
		{ 0, 1, XPORT_MIN_MSG - 1, 16, -EBADMSG },
		{ 0, 1, XPORT_MIN_MSG, 16, 0 },
		{ 0, 1, XPORT_MIN_MSG + 1, 16, 0 },
		{ 0, 1, XPORT_MAX_MSG, 16, 0 },
		{ 0, 1, XPORT_MAX_MSG + 1, 16, -EBADMSG },
		{ 0, 1, 0x80000000u, 16, -EBADMSG },
		{ 0, 1, UINT32_MAX, 16, -EBADMSG },
		/* recv_depth */
		{ 0, 1, 4096, 0, -EBADMSG },
		{ 0, 1, 4096, 1, 0 },
		{ 0, 1, 4096, XPORT_MAX_DEPTH, 0 },
		{ 0, 1, 4096, XPORT_MAX_DEPTH + 1, -EBADMSG },
		{ 0, 1, 4096, 0x80000000u, -EBADMSG },
		{ 0, 1, 4096, UINT32_MAX, -EBADMSG },
	};
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		const struct hello_case *c = &cases[i];
		struct xport_hello in = {
			.channel = c->channel,
			.nchannels = c->nchannels,
			.max_msg = c->max_msg,
			.recv_depth = c->recv_depth,
			.token = 42,
		};
		struct xport_hello out;
		uint8_t buf[XPORT_HELLO_SIZE];

		xport_hello_encode(&in, buf);
		ut_assert_rc(dec_hello(buf, sizeof(buf), &out), c->want,
			  "case %zu: channel %u/%u max_msg %u depth %u", i,
			  c->channel, c->nchannels, c->max_msg, c->recv_depth);
		if (c->want == 0)
			assert_hello_eq(&out, &in);
	}
}

static void test_hello_reserved(void **state)
{
	static const size_t offs[] = { 28, 29, 30, 31 };
	static const uint8_t vals[] = { 0x01, 0x80, 0xff };
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(offs); i++) {
		for (size_t v = 0; v < G_N_ELEMENTS(vals); v++) {
			uint8_t buf[56] = { 0 };

			memcpy(buf, hello_ref_bytes, XPORT_HELLO_SIZE);
			buf[offs[i]] = vals[v];
			ut_assert_rc(dec_hello(buf, XPORT_HELLO_SIZE, NULL), -EBADMSG,
				  "reserved byte %zu = 0x%x", offs[i], vals[v]);
			ut_assert_rc(dec_hello(buf, 56, NULL), -EBADMSG,
				  "reserved byte %zu = 0x%x, 56 bytes", offs[i],
				  vals[v]);
		}
	}
}

struct flags_case {
	uint16_t flags;
	uint16_t channel;
	int want;
};

static void test_hello_flags(void **state)
{
	static const struct flags_case cases[] = {
		{ 0, 1, 0 },
		{ XPORT_HELLO_F_BOUND, 1, 0 },
		{ XPORT_HELLO_F_BOUND | XPORT_HELLO_F_ENCRYPT, 1, 0 },
		{ XPORT_HELLO_F_BOUND | XPORT_HELLO_F_AUTH, 0, 0 },
		{ XPORT_HELLO_F_BOUND | XPORT_HELLO_F_AUTH | XPORT_HELLO_F_ENCRYPT, 0, 0 },
		/* the handshake is channel 0 */
		{ XPORT_HELLO_F_BOUND | XPORT_HELLO_F_AUTH, 1, -EBADMSG },
		/* no authentication or encryption without a binding */
		{ XPORT_HELLO_F_AUTH, 0, -EBADMSG },
		{ XPORT_HELLO_F_ENCRYPT, 1, -EBADMSG },
		{ XPORT_HELLO_F_AUTH | XPORT_HELLO_F_ENCRYPT, 0, -EBADMSG },
		/* unknown bits */
		{ 1u << 3, 1, -EBADMSG },
		{ XPORT_HELLO_F_BOUND | 1u << 3, 1, -EBADMSG },
		{ 0x80, 1, -EBADMSG },
		{ 0x100, 1, -EBADMSG },
		{ 0x8000, 1, -EBADMSG },
		{ 0xffff, 0, -EBADMSG },
	};
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		struct xport_hello in = hello_ref, out;
		uint8_t buf[XPORT_HELLO_SIZE];

		in.flags = cases[i].flags;
		in.channel = cases[i].channel;
		xport_hello_encode(&in, buf);
		assert_int_equal(ut_ld(buf + 10, 2), cases[i].flags);
		ut_assert_rc(dec_hello(buf, sizeof(buf), &out), cases[i].want,
			  "flags 0x%x channel %u", cases[i].flags, cases[i].channel);
		if (cases[i].want == 0)
			assert_hello_eq(&out, &in);
	}
}

/* ---- bound hello: a hello and its tag ---- */

static int dec_bound(const void *buf, size_t len, struct xport_hello *ret,
		     uint8_t ret_tag[XPORT_TAG_SIZE])
{
	struct xport_hello out, sentinel;
	uint8_t tag[XPORT_TAG_SIZE], tag_sentinel[XPORT_TAG_SIZE];
	uint8_t *copy = buf ? ut_dup_exact(buf, len) : NULL;
	int r;

	memset(&out, 0xa5, sizeof(out));
	memcpy(&sentinel, &out, sizeof(out));
	memset(tag, 0x5a, sizeof(tag));
	memcpy(tag_sentinel, tag, sizeof(tag));
	r = xport_bound_hello_decode(copy, len, &out, tag);
	free(copy);
	if (r != 0) {
		assert_memory_equal(&out, &sentinel, sizeof(out));
		assert_memory_equal(tag, tag_sentinel, sizeof(tag));
	} else {
		if (ret)
			*ret = out;
		if (ret_tag)
			memcpy(ret_tag, tag, sizeof(tag));
	}
	return r;
}

static void make_bound(uint8_t buf[56], uint16_t flags)
{
	struct xport_hello h = hello_ref;

	memset(buf, 0, 56);
	h.flags = flags;
	xport_hello_encode(&h, buf);
	for (unsigned i = 0; i < XPORT_TAG_SIZE; i++)
		buf[XPORT_HELLO_SIZE + i] = (uint8_t)(0xc0 + i);
}

static void test_bound_hello(void **state)
{
	uint8_t buf[56], tag[XPORT_TAG_SIZE];
	struct xport_hello h;
	(void)state;

	make_bound(buf, XPORT_HELLO_F_BOUND);
	/* 48 bytes, or rdma_cm's 56 zero-padded. */
	for (size_t len = XPORT_BOUND_HELLO_SIZE; len <= sizeof(buf); len++) {
		ut_assert_rc(dec_bound(buf, len, &h, tag), 0, "len %zu", len);
		assert_int_equal(h.flags, XPORT_HELLO_F_BOUND);
		assert_int_equal(h.token, hello_ref.token);
		assert_memory_equal(tag, buf + XPORT_HELLO_SIZE, XPORT_TAG_SIZE);
	}
	for (size_t len = 0; len < XPORT_BOUND_HELLO_SIZE; len++)
		ut_assert_rc(dec_bound(buf, len, NULL, NULL), -EBADMSG, "short: %zu", len);
	ut_assert_rc(dec_bound(NULL, 56, NULL, NULL), -EBADMSG, "NULL");
	for (size_t pos = XPORT_BOUND_HELLO_SIZE; pos < sizeof(buf); pos++) {
		make_bound(buf, XPORT_HELLO_F_BOUND);
		buf[pos] = 1;
		ut_assert_rc(dec_bound(buf, sizeof(buf), NULL, NULL), -EBADMSG,
			  "tail byte %zu", pos);
	}
	/* Not bound: no tag to speak of, even if bytes follow. */
	make_bound(buf, 0);
	ut_assert_rc(dec_bound(buf, sizeof(buf), NULL, NULL), -EBADMSG, "without BOUND");
	/* A plain decoder sees a bound hello's tag as a non-zero tail. */
	make_bound(buf, XPORT_HELLO_F_BOUND);
	ut_assert_rc(dec_hello(buf, sizeof(buf), NULL), -EBADMSG, "bound hello as plain");
	ut_assert_rc(dec_hello(buf, XPORT_HELLO_SIZE, &h), 0, "its first 32 bytes");
	/* The hello's own checks still apply. */
	make_bound(buf, XPORT_HELLO_F_BOUND | XPORT_HELLO_F_AUTH);
	ut_assert_rc(dec_bound(buf, sizeof(buf), NULL, NULL), -EBADMSG, "AUTH on channel 2");
	make_bound(buf, XPORT_HELLO_F_BOUND);
	ut_st16(buf + 4, 2);
	ut_assert_rc(dec_bound(buf, sizeof(buf), NULL, NULL), -EPROTONOSUPPORT, "version 2");
}

/* ---- challenge ---- */

static const uint8_t challenge_ref_bytes[XPORT_CHALLENGE_SIZE] = {
	'V', 'X', 'A', 'C',	/* magic */
	0x01, 0x00,		/* version */
	0x00, 0x00,		/* reserved */
	0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, /* nonce */
};

static int dec_challenge(const void *buf, size_t len, uint64_t *ret)
{
	uint8_t *copy = buf ? ut_dup_exact(buf, len) : NULL;
	uint64_t out = 0xa5a5a5a5a5a5a5a5ull;
	int r = xport_challenge_decode(copy, len, &out);

	free(copy);
	if (r != 0)
		assert_int_equal(out, 0xa5a5a5a5a5a5a5a5ull);
	else if (ret)
		*ret = out;
	return r;
}

static void test_challenge(void **state)
{
	uint8_t buf[XPORT_CHALLENGE_SIZE + 1];
	uint64_t nonce;
	(void)state;

	memset(buf, 0xff, sizeof(buf));
	xport_challenge_encode(0x0123456789abcdefull, buf);
	assert_memory_equal(buf, challenge_ref_bytes, XPORT_CHALLENGE_SIZE);
	ut_assert_rc(dec_challenge(challenge_ref_bytes, XPORT_CHALLENGE_SIZE, &nonce), 0, "golden");
	assert_int_equal(nonce, 0x0123456789abcdefull);
	/* Exactly 16 bytes: it is read with a length of its own. */
	for (size_t len = 0; len <= sizeof(buf); len++)
		if (len != XPORT_CHALLENGE_SIZE)
			ut_assert_rc(dec_challenge(buf, len, NULL), -EBADMSG, "len %zu", len);
	ut_assert_rc(dec_challenge(NULL, XPORT_CHALLENGE_SIZE, NULL), -EBADMSG, "NULL");
	for (size_t i = 0; i < 8; i++) {
		if (i == 4 || i == 5)
			continue;
		memcpy(buf, challenge_ref_bytes, XPORT_CHALLENGE_SIZE);
		buf[i] ^= 0x01;
		ut_assert_rc(dec_challenge(buf, XPORT_CHALLENGE_SIZE, NULL), -EBADMSG, "byte %zu", i);
	}
	memcpy(buf, challenge_ref_bytes, XPORT_CHALLENGE_SIZE);
	ut_st16(buf + 4, 2);
	ut_assert_rc(dec_challenge(buf, XPORT_CHALLENGE_SIZE, NULL), -EPROTONOSUPPORT, "version 2");
	/* A refusal comes back where the challenge was due: a WELCOME is none. */
	struct xport_welcome w = { .status = EKEYREJECTED };
	xport_welcome_encode(&w, buf);
	ut_assert_rc(dec_challenge(buf, XPORT_CHALLENGE_SIZE, NULL), -EBADMSG, "welcome as challenge");
}

/* ---- welcome ---- */

static const uint8_t welcome_ref_bytes[XPORT_WELCOME_SIZE] = {
	'V', 'X', 'H', 'A',	/* magic */
	0x01, 0x00,		/* version */
	0x00, 0x00,		/* status */
	0x00, 0x10, 0x00, 0x00,	/* max_msg 4096 */
	0x00, 0x00, 0x00, 0x00,	/* reserved */
};

static void test_welcome_golden(void **state)
{
	const struct xport_welcome ref = { .status = 0, .max_msg = 4096 };
	const struct xport_welcome refused = { .status = 0x1234, .max_msg = 0xa1b2c3d4 };
	static const uint8_t refused_bytes[XPORT_WELCOME_SIZE] = {
		'V', 'X', 'H', 'A', 0x01, 0x00, 0x34, 0x12,
		0xd4, 0xc3, 0xb2, 0xa1, 0x00, 0x00, 0x00, 0x00,
	};
	uint8_t out[XPORT_WELCOME_SIZE];
	struct xport_welcome w;

	(void)state;
	memset(out, 0xff, sizeof(out));
	xport_welcome_encode(&ref, out);
	assert_memory_equal(out, welcome_ref_bytes, sizeof(out));
	ut_assert_rc(dec_welcome(out, sizeof(out), &w), 0, "golden welcome");
	assert_welcome_eq(&w, &ref);

	memset(out, 0xff, sizeof(out));
	xport_welcome_encode(&refused, out);
	assert_memory_equal(out, refused_bytes, sizeof(out));
	ut_assert_rc(dec_welcome(out, sizeof(out), &w), 0, "golden refusal");
	assert_welcome_eq(&w, &refused);
}

static void test_welcome_roundtrip(void **state)
{
	static const struct xport_welcome cases[] = {
		{ 0, XPORT_MIN_MSG },
		{ 0, XPORT_MIN_MSG + 1 },
		{ 0, 4096 },
		{ 0, XPORT_MAX_MSG - 1 },
		{ 0, XPORT_MAX_MSG },
	};
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		uint8_t buf[56] = { 0 };
		uint8_t again[XPORT_WELCOME_SIZE];
		struct xport_welcome w;

		xport_welcome_encode(&cases[i], buf);
		for (size_t len = XPORT_WELCOME_SIZE; len <= sizeof(buf); len++) {
			memset(&w, 0, sizeof(w));
			ut_assert_rc(dec_welcome(buf, len, &w), 0, "case %zu len %zu", i,
				  len);
			assert_welcome_eq(&w, &cases[i]);
		}
		xport_welcome_encode(&w, again);
		assert_memory_equal(again, buf, sizeof(again));
	}
}

static void test_welcome_status(void **state)
{
	static const uint16_t statuses[] = { 1, EBUSY, ECONNREFUSED, EPROTO, 0x8000, 0xffff };
	static const uint32_t msgs[] = {
		0, 1, XPORT_MIN_MSG - 1, 4096, XPORT_MAX_MSG + 1, UINT32_MAX,
	};
	(void)state;

	/* A refusal carries no usable max_msg: any value passes. */
	for (size_t s = 0; s < G_N_ELEMENTS(statuses); s++) {
		for (size_t m = 0; m < G_N_ELEMENTS(msgs); m++) {
			struct xport_welcome in = { statuses[s], msgs[m] }, out;
			uint8_t buf[XPORT_WELCOME_SIZE];

			xport_welcome_encode(&in, buf);
			ut_assert_rc(dec_welcome(buf, sizeof(buf), &out), 0,
				  "status %u max_msg %u", statuses[s], msgs[m]);
			assert_welcome_eq(&out, &in);
		}
	}

	/* An acceptance must carry a sane max_msg. */
	static const uint32_t bad[] = {
		0, 1, XPORT_MIN_MSG - 1, XPORT_MAX_MSG + 1, 0x80000000u, UINT32_MAX,
	};
	for (size_t m = 0; m < G_N_ELEMENTS(bad); m++) {
		struct xport_welcome in = { 0, bad[m] };
		uint8_t buf[XPORT_WELCOME_SIZE];

		xport_welcome_encode(&in, buf);
		ut_assert_rc(dec_welcome(buf, sizeof(buf), NULL), -EBADMSG,
			  "status 0 max_msg %u", bad[m]);
	}
}

static void test_welcome_malformed(void **state)
{
	uint8_t buf[32];
	(void)state;

	/* reserved bytes, for an acceptance and for a refusal */
	for (unsigned status = 0; status < 2; status++) {
		for (size_t off = 12; off < 16; off++) {
			memset(buf, 0, sizeof(buf));
			memcpy(buf, welcome_ref_bytes, XPORT_WELCOME_SIZE);
			ut_st16(buf + 6, (uint16_t)(status * ECONNREFUSED));
			buf[off] = 0x01;
			ut_assert_rc(dec_welcome(buf, XPORT_WELCOME_SIZE, NULL), -EBADMSG,
				  "status %u reserved byte %zu", status, off);
			buf[off] = 0xff;
			ut_assert_rc(dec_welcome(buf, sizeof(buf), NULL), -EBADMSG,
				  "status %u reserved byte %zu, 32 bytes", status, off);
		}
	}

	/* short, NULL */
	for (size_t len = 0; len < XPORT_WELCOME_SIZE; len++)
		ut_assert_rc(dec_welcome(welcome_ref_bytes, len, NULL), -EBADMSG,
			  "len %zu", len);
	ut_assert_rc(dec_welcome(NULL, XPORT_WELCOME_SIZE, NULL), -EBADMSG, "NULL");
	ut_assert_rc(dec_welcome(NULL, 0, NULL), -EBADMSG, "NULL, 0");

	/* non-zero tail */
	for (size_t pos = XPORT_WELCOME_SIZE; pos < sizeof(buf); pos++) {
		memset(buf, 0, sizeof(buf));
		memcpy(buf, welcome_ref_bytes, XPORT_WELCOME_SIZE);
		buf[pos] = 0x10;
		ut_assert_rc(dec_welcome(buf, sizeof(buf), NULL), -EBADMSG,
			  "tail byte %zu", pos);
		ut_assert_rc(dec_welcome(buf, pos, NULL), 0, "byte %zu past len", pos);
	}

	/* magic */
	for (unsigned i = 0; i < 4; i++) {
		memcpy(buf, welcome_ref_bytes, XPORT_WELCOME_SIZE);
		buf[i] ^= 0x20;
		ut_assert_rc(dec_welcome(buf, XPORT_WELCOME_SIZE, NULL), -EBADMSG,
			  "magic byte %u", i);
	}
	memcpy(buf, hello_ref_bytes, XPORT_HELLO_SIZE);
	ut_assert_rc(dec_welcome(buf, XPORT_WELCOME_SIZE, NULL), -EBADMSG,
		  "hello as welcome");

	/* version */
	static const uint16_t versions[] = { 0, 2, 0x0100, 0xffff };
	for (size_t i = 0; i < G_N_ELEMENTS(versions); i++) {
		memcpy(buf, welcome_ref_bytes, XPORT_WELCOME_SIZE);
		ut_st16(buf + 4, versions[i]);
		ut_assert_rc(dec_welcome(buf, XPORT_WELCOME_SIZE, NULL),
			  -EPROTONOSUPPORT, "version 0x%x", versions[i]);
	}
}

/* ---- region descriptor ---- */

static const struct xport_region_wire region_ref = {
	.kind = XPORT_KIND_TCP,
	.access = XPORT_ACCESS_REMOTE_WRITE | XPORT_ACCESS_REMOTE_READ,
	.id = 7,
	.key = 0xdeadbeef,
	.base = 0x0000100000001000ull,
	.len = 0x2000,
};
static const uint8_t region_ref_bytes[XPORT_REGION_DESC_SIZE] = {
	'V', 'X', 'R', 'D',			/* magic */
	0x01,					/* version */
	0x02,					/* kind */
	0x03,					/* access */
	0x00,					/* reserved */
	0x07, 0x00, 0x00, 0x00,			/* id */
	0xef, 0xbe, 0xad, 0xde,			/* key */
	0x00, 0x10, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, /* base */
	0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* len */
};

static void test_region_golden(void **state)
{
	uint8_t out[XPORT_REGION_DESC_SIZE];
	struct xport_region_wire r;

	(void)state;
	memset(out, 0xff, sizeof(out));
	xport_region_encode(&region_ref, out);
	assert_memory_equal(out, region_ref_bytes, sizeof(out));
	ut_assert_rc(dec_region(out, sizeof(out), &r), 0, "golden region");
	assert_region_eq(&r, &region_ref);
}

struct region_case {
	uint8_t kind, access;
	uint64_t base, len;
	int want;
};

static void test_region_fields(void **state)
{
	static const struct region_case cases[] = {
		/* kind x access */
		{ XPORT_KIND_RDMA, 1, 0x1000, 0x1000, 0 },
		{ XPORT_KIND_RDMA, 2, 0x1000, 0x1000, 0 },
		{ XPORT_KIND_RDMA, 3, 0x1000, 0x1000, 0 },
		{ XPORT_KIND_TCP, 1, 0x1000, 0x1000, 0 },
		{ XPORT_KIND_TCP, 2, 0x1000, 0x1000, 0 },
		{ XPORT_KIND_TCP, 3, 0x1000, 0x1000, 0 },
		/* unknown kind */
		{ XPORT_KIND_AUTO, 3, 0x1000, 0x1000, -EBADMSG },
		{ 3, 3, 0x1000, 0x1000, -EBADMSG },
		{ 0x80, 3, 0x1000, 0x1000, -EBADMSG },
		{ 0xff, 3, 0x1000, 0x1000, -EBADMSG },
		/* access */
		{ XPORT_KIND_TCP, 0, 0x1000, 0x1000, -EBADMSG },
		{ XPORT_KIND_TCP, 4, 0x1000, 0x1000, -EBADMSG },
		{ XPORT_KIND_TCP, 5, 0x1000, 0x1000, -EBADMSG },
		{ XPORT_KIND_TCP, 7, 0x1000, 0x1000, -EBADMSG },
		{ XPORT_KIND_RDMA, 0x80, 0x1000, 0x1000, -EBADMSG },
		{ XPORT_KIND_RDMA, 0x83, 0x1000, 0x1000, -EBADMSG },
		{ XPORT_KIND_RDMA, 0xff, 0x1000, 0x1000, -EBADMSG },
		/* len and range */
		{ XPORT_KIND_TCP, 3, 0x1000, 0, -EBADMSG },
		{ XPORT_KIND_TCP, 3, 0, 0, -EBADMSG },
		{ XPORT_KIND_TCP, 3, 0, 1, 0 },
		{ XPORT_KIND_TCP, 3, 0, UINT64_MAX, 0 },
		{ XPORT_KIND_TCP, 3, UINT64_MAX - 1, 1, 0 },
		{ XPORT_KIND_TCP, 3, UINT64_MAX - 0x1000, 0x1000, 0 },
		{ XPORT_KIND_TCP, 3, UINT64_MAX, 1, -EBADMSG },
		{ XPORT_KIND_TCP, 3, UINT64_MAX, UINT64_MAX, -EBADMSG },
		{ XPORT_KIND_TCP, 3, UINT64_MAX - 0x1000, 0x2000, -EBADMSG },
		{ XPORT_KIND_TCP, 3, 1ull << 63, (1ull << 63) + 1, -EBADMSG },
		{ XPORT_KIND_TCP, 3, 3, UINT64_MAX - 1, -EBADMSG },
		{ XPORT_KIND_TCP, 3, 1, UINT64_MAX, -EBADMSG },
	};
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		const struct region_case *c = &cases[i];
		struct xport_region_wire in = {
			.kind = c->kind,
			.access = c->access,
			.id = (uint32_t)i + 1,
			.key = 0x55aa55aa,
			.base = c->base,
			.len = c->len,
		};
		struct xport_region_wire out;
		uint8_t buf[XPORT_REGION_DESC_SIZE], again[XPORT_REGION_DESC_SIZE];

		xport_region_encode(&in, buf);
		ut_assert_rc(dec_region(buf, sizeof(buf), &out), c->want,
			  "case %zu: kind %u access 0x%x base 0x%llx len 0x%llx", i,
			  c->kind, c->access, (unsigned long long)c->base,
			  (unsigned long long)c->len);
		if (c->want == 0) {
			assert_region_eq(&out, &in);
			xport_region_encode(&out, again);
			assert_memory_equal(again, buf, sizeof(buf));
		}
	}

	/* id and key are opaque: extremes roundtrip. */
	struct xport_region_wire in = region_ref, out;
	uint8_t buf[XPORT_REGION_DESC_SIZE];
	in.id = 0;
	in.key = 0;
	xport_region_encode(&in, buf);
	ut_assert_rc(dec_region(buf, sizeof(buf), &out), 0, "id 0 key 0");
	assert_region_eq(&out, &in);
	in.id = UINT32_MAX;
	in.key = UINT32_MAX;
	xport_region_encode(&in, buf);
	ut_assert_rc(dec_region(buf, sizeof(buf), &out), 0, "id/key max");
	assert_region_eq(&out, &in);
}

static void test_region_malformed(void **state)
{
	uint8_t buf[64];
	(void)state;

	/* reserved byte 7 */
	static const uint8_t vals[] = { 0x01, 0x80, 0xff };
	for (size_t v = 0; v < G_N_ELEMENTS(vals); v++) {
		memcpy(buf, region_ref_bytes, XPORT_REGION_DESC_SIZE);
		buf[7] = vals[v];
		ut_assert_rc(dec_region(buf, XPORT_REGION_DESC_SIZE, NULL), -EBADMSG,
			  "reserved = 0x%x", vals[v]);
	}

	/* the length must be exact, even with a zero tail */
	memset(buf, 0, sizeof(buf));
	memcpy(buf, region_ref_bytes, XPORT_REGION_DESC_SIZE);
	for (size_t len = 0; len <= sizeof(buf); len++) {
		if (len == XPORT_REGION_DESC_SIZE)
			continue;
		ut_assert_rc(dec_region(buf, len, NULL), -EBADMSG, "len %zu", len);
	}
	ut_assert_rc(dec_region(buf, XPORT_REGION_DESC_SIZE, NULL), 0, "len 32");
	ut_assert_rc(dec_region(NULL, XPORT_REGION_DESC_SIZE, NULL), -EBADMSG, "NULL");
	ut_assert_rc(dec_region(NULL, 0, NULL), -EBADMSG, "NULL, 0");

	/* magic */
	for (unsigned i = 0; i < 4; i++) {
		memcpy(buf, region_ref_bytes, XPORT_REGION_DESC_SIZE);
		buf[i] ^= 0x01;
		ut_assert_rc(dec_region(buf, XPORT_REGION_DESC_SIZE, NULL), -EBADMSG,
			  "magic byte %u", i);
	}
	memcpy(buf, hello_ref_bytes, XPORT_HELLO_SIZE);
	ut_assert_rc(dec_region(buf, XPORT_REGION_DESC_SIZE, NULL), -EBADMSG,
		  "hello as region");

	/* version */
	static const uint8_t versions[] = { 0, 2, 0x80, 0xff };
	for (size_t i = 0; i < G_N_ELEMENTS(versions); i++) {
		memcpy(buf, region_ref_bytes, XPORT_REGION_DESC_SIZE);
		buf[4] = versions[i];
		ut_assert_rc(dec_region(buf, XPORT_REGION_DESC_SIZE, NULL),
			  -EPROTONOSUPPORT, "version 0x%x", versions[i]);
	}
}

/* ---- frame ---- */

static void test_frame_golden(void **state)
{
	const struct xport_frame ref = {
		.op = XPORT_FRAME_WRITE_IMM,
		.len = 0x100,
		.region = 3,
		.key = 0xcafef00d,
		.offset = 0x1122334455667788ull,
		.tag = 0xa0b0c0d0,
	};
	static const uint8_t ref_bytes[XPORT_FRAME_SIZE] = {
		0x03,					/* op */
		0x00,					/* reserved */
		0x00, 0x00,				/* reserved */
		0x00, 0x01, 0x00, 0x00,			/* len */
		0x03, 0x00, 0x00, 0x00,			/* region */
		0x0d, 0xf0, 0xfe, 0xca,			/* key */
		0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, /* offset */
		0xd0, 0xc0, 0xb0, 0xa0,			/* tag */
		0x00, 0x00, 0x00, 0x00,			/* reserved */
	};
	uint8_t out[XPORT_FRAME_SIZE];
	struct xport_frame f;

	(void)state;
	memset(out, 0xff, sizeof(out));
	xport_frame_encode(&ref, out);
	assert_memory_equal(out, ref_bytes, sizeof(out));
	ut_assert_rc(dec_frame(out, sizeof(out), 4096, &f), 0, "golden frame");
	assert_frame_eq(&f, &ref);
}

struct frame_case {
	struct xport_frame f;
	uint32_t max_msg;
	int want;
};

#define FR(op_, len_, region_, key_, offset_, tag_) \
	{ .op = (op_), .len = (len_), .region = (region_), .key = (key_), \
	  .offset = (offset_), .tag = (tag_) }

static const struct frame_case frame_cases[] = {
	/* SEND */
	{ FR(XPORT_FRAME_SEND, 0, 0, 0, 0, 0), 4096, 0 },
	{ FR(XPORT_FRAME_SEND, 100, 0, 0, 0, 0), 4096, 0 },
	{ FR(XPORT_FRAME_SEND, 4096, 0, 0, 0, 0), 4096, 0 },
	{ FR(XPORT_FRAME_SEND, 4097, 0, 0, 0, 0), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_SEND, XPORT_MAX_MSG, 0, 0, 0, 0), XPORT_MAX_MSG, 0 },
	{ FR(XPORT_FRAME_SEND, XPORT_MAX_MSG + 1, 0, 0, 0, 0), XPORT_MAX_MSG, -EBADMSG },
	{ FR(XPORT_FRAME_SEND, UINT32_MAX, 0, 0, 0, 0), XPORT_MAX_MSG, -EBADMSG },
	{ FR(XPORT_FRAME_SEND, 0, 0, 0, 0, 0), 0, 0 },
	{ FR(XPORT_FRAME_SEND, 1, 0, 0, 0, 0), 0, -EBADMSG },
	{ FR(XPORT_FRAME_SEND, 64, 1, 0, 0, 0), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_SEND, 64, UINT32_MAX, 0, 0, 0), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_SEND, 64, 0, 1, 0, 0), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_SEND, 64, 0, 0, 1, 0), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_SEND, 64, 0, 0, 1ull << 32, 0), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_SEND, 64, 0, 0, 1ull << 63, 0), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_SEND, 64, 0, 0, 0, 1), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_SEND, 64, 0, 0, 0, 0x80000000u), 4096, -EBADMSG },
	/* WRITE */
	{ FR(XPORT_FRAME_WRITE, 1, 1, 5, 100, 0), 4096, 0 },
	{ FR(XPORT_FRAME_WRITE, 0, 1, 5, 0, 0), 4096, 0 },
	{ FR(XPORT_FRAME_WRITE, XPORT_MAX_IO, 2, 0, 0, 0), 64, 0 },
	{ FR(XPORT_FRAME_WRITE, XPORT_MAX_IO, 2, 0, UINT64_MAX - XPORT_MAX_IO, 0), 64, 0 },
	{ FR(XPORT_FRAME_WRITE, 10, UINT32_MAX, UINT32_MAX, UINT64_MAX - 10, 0), 64, 0 },
	{ FR(XPORT_FRAME_WRITE, 1, 1, 5, 100, 1), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_WRITE, 1, 1, 5, 100, UINT32_MAX), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_WRITE, XPORT_MAX_IO + 1, 1, 5, 0, 0), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_WRITE, UINT32_MAX, 1, 5, 0, 0), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_WRITE, 1, 1, 5, UINT64_MAX, 0), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_WRITE, 200, 1, 5, UINT64_MAX - 100, 0), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_WRITE, XPORT_MAX_IO, 1, 5, UINT64_MAX - 1, 0), 4096, -EBADMSG },
	/* WRITE_IMM: the tag carries the immediate */
	{ FR(XPORT_FRAME_WRITE_IMM, 8, 1, 5, 100, 0), 4096, 0 },
	{ FR(XPORT_FRAME_WRITE_IMM, 8, 1, 5, 100, UINT32_MAX), 4096, 0 },
	{ FR(XPORT_FRAME_WRITE_IMM, 0, 1, 5, 0, 7), 4096, 0 },
	{ FR(XPORT_FRAME_WRITE_IMM, XPORT_MAX_IO, 1, 5, 0, 7), 4096, 0 },
	{ FR(XPORT_FRAME_WRITE_IMM, XPORT_MAX_IO + 1, 1, 5, 0, 7), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_WRITE_IMM, UINT32_MAX, 1, 5, 0, 7), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_WRITE_IMM, 1, 1, 5, UINT64_MAX, 7), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_WRITE_IMM, 200, 1, 5, UINT64_MAX - 100, 7), 4096, -EBADMSG },
	{ FR(XPORT_FRAME_WRITE_IMM, 10, 1, 5, UINT64_MAX - 10, 7), 4096, 0 },
	/* READ_REQ */
	{ FR(XPORT_FRAME_READ_REQ, 4096, 9, 1, 0, 42), 64, 0 },
	{ FR(XPORT_FRAME_READ_REQ, XPORT_MAX_IO, 9, 1, 0, 42), 64, 0 },
	{ FR(XPORT_FRAME_READ_REQ, 10, 9, 1, UINT64_MAX - 10, 42), 64, 0 },
	{ FR(XPORT_FRAME_READ_REQ, XPORT_MAX_IO + 1, 9, 1, 0, 42), 64, -EBADMSG },
	{ FR(XPORT_FRAME_READ_REQ, UINT32_MAX, 9, 1, 0, 42), 64, -EBADMSG },
	{ FR(XPORT_FRAME_READ_REQ, 1, 9, 1, UINT64_MAX, 42), 64, -EBADMSG },
	{ FR(XPORT_FRAME_READ_REQ, 4096, 9, 1, UINT64_MAX - 4000, 42), 64, -EBADMSG },
	/* READ_RESP */
	{ FR(XPORT_FRAME_READ_RESP, 4096, 0, 0, 0, 42), 64, 0 },
	{ FR(XPORT_FRAME_READ_RESP, 0, 0, 0, 0, UINT32_MAX), 64, 0 },
	{ FR(XPORT_FRAME_READ_RESP, XPORT_MAX_IO, 0, 0, 0, 1), 64, 0 },
	{ FR(XPORT_FRAME_READ_RESP, XPORT_MAX_IO + 1, 0, 0, 0, 1), 64, -EBADMSG },
	{ FR(XPORT_FRAME_READ_RESP, UINT32_MAX, 0, 0, 0, 1), 64, -EBADMSG },
	{ FR(XPORT_FRAME_READ_RESP, 4096, 1, 0, 0, 42), 64, -EBADMSG },
	{ FR(XPORT_FRAME_READ_RESP, 4096, UINT32_MAX, 0, 0, 42), 64, -EBADMSG },
	{ FR(XPORT_FRAME_READ_RESP, 4096, 0, 1, 0, 42), 64, -EBADMSG },
	{ FR(XPORT_FRAME_READ_RESP, 4096, 0, 0, 1, 42), 64, -EBADMSG },
	{ FR(XPORT_FRAME_READ_RESP, 4096, 0, 0, 1ull << 63, 42), 64, -EBADMSG },
	/* unknown ops */
	{ FR(0, 0, 0, 0, 0, 0), 4096, -EBADMSG },
	{ FR(0, 64, 1, 1, 0, 0), 4096, -EBADMSG },
	{ FR(6, 0, 0, 0, 0, 0), 4096, -EBADMSG },
	{ FR(6, 64, 1, 1, 0, 0), 4096, -EBADMSG },
	{ FR(7, 0, 0, 0, 0, 0), 4096, -EBADMSG },
	{ FR(0x80, 0, 0, 0, 0, 0), 4096, -EBADMSG },
	{ FR(0x81, 0, 0, 0, 0, 0), 4096, -EBADMSG },
	{ FR(255, 0, 0, 0, 0, 0), 4096, -EBADMSG },
};

static void test_frame_ops(void **state)
{
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(frame_cases); i++) {
		const struct frame_case *c = &frame_cases[i];
		uint8_t buf[XPORT_FRAME_SIZE], again[XPORT_FRAME_SIZE];
		struct xport_frame out;

		xport_frame_encode(&c->f, buf);
		ut_assert_rc(dec_frame(buf, sizeof(buf), c->max_msg, &out), c->want,
			  "case %zu: op %u len %u region %u key %u offset 0x%llx "
			  "tag %u max_msg %u", i, c->f.op, c->f.len, c->f.region,
			  c->f.key, (unsigned long long)c->f.offset, c->f.tag,
			  c->max_msg);
		if (c->want == 0) {
			assert_frame_eq(&out, &c->f);
			xport_frame_encode(&out, again);
			assert_memory_equal(again, buf, sizeof(buf));
		}
	}
}

/* One good frame per op. */
static const struct xport_frame good_frames[] = {
	FR(XPORT_FRAME_SEND, 100, 0, 0, 0, 0),
	FR(XPORT_FRAME_WRITE, 100, 1, 2, 3, 0),
	FR(XPORT_FRAME_WRITE_IMM, 100, 1, 2, 3, 4),
	FR(XPORT_FRAME_READ_REQ, 100, 1, 2, 3, 4),
	FR(XPORT_FRAME_READ_RESP, 100, 0, 0, 0, 4),
};

static void test_frame_reserved(void **state)
{
	static const size_t offs[] = { 1, 2, 3, 28, 29, 30, 31 };
	static const uint8_t vals[] = { 0x01, 0x80, 0xff };
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(good_frames); i++) {
		uint8_t good[XPORT_FRAME_SIZE];

		xport_frame_encode(&good_frames[i], good);
		ut_assert_rc(dec_frame(good, sizeof(good), 4096, NULL), 0,
			  "good frame op %u", good_frames[i].op);
		for (size_t o = 0; o < G_N_ELEMENTS(offs); o++) {
			for (size_t v = 0; v < G_N_ELEMENTS(vals); v++) {
				uint8_t buf[XPORT_FRAME_SIZE];

				memcpy(buf, good, sizeof(buf));
				buf[offs[o]] = vals[v];
				ut_assert_rc(dec_frame(buf, sizeof(buf), 4096, NULL),
					  -EBADMSG, "op %u reserved byte %zu = 0x%x",
					  good_frames[i].op, offs[o], vals[v]);
			}
		}
	}
}

static void test_frame_length(void **state)
{
	uint8_t buf[64];
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(good_frames); i++) {
		memset(buf, 0, sizeof(buf));
		xport_frame_encode(&good_frames[i], buf);
		for (size_t len = 0; len <= sizeof(buf); len++) {
			if (len == XPORT_FRAME_SIZE)
				continue;
			ut_assert_rc(dec_frame(buf, len, 4096, NULL), -EBADMSG,
				  "op %u len %zu", good_frames[i].op, len);
		}
	}
	ut_assert_rc(dec_frame(NULL, XPORT_FRAME_SIZE, 4096, NULL), -EBADMSG, "NULL");
	ut_assert_rc(dec_frame(NULL, 0, 4096, NULL), -EBADMSG, "NULL, 0");
}

/* Every single-bit flip of a good frame: the result must match the model. */
static unsigned ref_frame(const uint8_t *p, size_t len, uint32_t max_msg);
static bool rc_allowed(int rc, unsigned allowed);

static void test_frame_bitflips(void **state)
{
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(good_frames); i++) {
		for (unsigned bit = 0; bit < XPORT_FRAME_SIZE * 8; bit++) {
			uint8_t buf[XPORT_FRAME_SIZE];
			int r;

			xport_frame_encode(&good_frames[i], buf);
			buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			r = dec_frame(buf, sizeof(buf), 4096, NULL);
			if (!rc_allowed(r, ref_frame(buf, sizeof(buf), 4096)))
				fail_msg("op %u bit %u: got %d (%s)",
					 good_frames[i].op, bit, r, ut_rc_name(r));
		}
	}
}

/* ---- host:port ---- */

struct hp_good {
	const char *spec, *host, *port;
};

static void test_hostport_good(void **state)
{
	static const struct hp_good cases[] = {
		{ "127.0.0.1:80", "127.0.0.1", "80" },
		{ ":4000", "", "4000" },
		{ "[::1]:5", "::1", "5" },
		{ "host:0", "host", "0" },
		{ "host:65535", "host", "65535" },
		{ "[fe80::1%eth0]:4791", "fe80::1%eth0", "4791" },
		{ "[host]:1", "host", "1" },
		{ "example.com:443", "example.com", "443" },
		{ ":0", "", "0" },
		{ "h:00080", "h", "00080" },
	};
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		char *host = NULL, *port = NULL;

		ut_assert_rc(xport_parse_hostport(cases[i].spec, &host, &port), 0,
			  "\"%s\"", cases[i].spec);
		assert_non_null(host);
		assert_non_null(port);
		assert_string_equal(host, cases[i].host);
		assert_string_equal(port, cases[i].port);
		g_free(host);
		g_free(port);
	}
}

static void test_hostport_bad(void **state)
{
	static const char *const cases[] = {
		"host", "host:", "host:65536", "host:-1", "host:+5", "host:12a",
		"a:b:c", "[::1]5", "[::1", "", ":", "[::1]:", "[::1]:65536",
		"[::1]:5:6", "[::1]:x", "::1:5", "host:99999", "host:123456",
		"host:000000", "host: 5", "host:5 ", "host:\t5", "host:0x10",
		"host:5\n", "[]", "[", "]:5:", "host:4294967376",
		"host:18446744073709551696",
	};
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		char *host = (char *)0x1, *port = (char *)0x2;

		ut_assert_rc(xport_parse_hostport(cases[i], &host, &port), -EINVAL,
			  "\"%s\"", cases[i]);
		/* nothing is handed out on failure */
		assert_ptr_equal(host, (char *)0x1);
		assert_ptr_equal(port, (char *)0x2);
	}

	char *host = (char *)0x1, *port = (char *)0x2;
	ut_assert_rc(xport_parse_hostport(NULL, &host, &port), -EINVAL, "NULL");
	assert_ptr_equal(host, (char *)0x1);
	assert_ptr_equal(port, (char *)0x2);
}

/* ---- reference model and fuzzing ---- */

enum {
	ALLOW_OK = 1u << 0,
	ALLOW_BADMSG = 1u << 1,
	ALLOW_PROTO = 1u << 2,
};

static bool rc_allowed(int rc, unsigned allowed)
{
	switch (rc) {
	case 0:
		return allowed & ALLOW_OK;
	case -EBADMSG:
		return allowed & ALLOW_BADMSG;
	case -EPROTONOSUPPORT:
		return allowed & ALLOW_PROTO;
	default:
		return false;
	}
}

/*
 * A wrong version must give -EPROTONOSUPPORT; if the message is malformed
 * in some other way too, -EBADMSG is just as right.
 */
static unsigned versioned(bool version_ok, bool rest_ok)
{
	if (!version_ok)
		return ALLOW_PROTO | (rest_ok ? 0 : ALLOW_BADMSG);
	return rest_ok ? ALLOW_OK : ALLOW_BADMSG;
}

static unsigned ref_hello(const uint8_t *p, size_t len)
{
	if (!p || len < 32 || memcmp(p, "VXHI", 4))
		return ALLOW_BADMSG;
	uint64_t channel = ut_ld(p + 6, 2), nchannels = ut_ld(p + 8, 2);
	uint64_t max_msg = ut_ld(p + 12, 4), depth = ut_ld(p + 16, 4);
	uint64_t flags = ut_ld(p + 10, 2);
	/* Bits 0..2 known (BOUND, AUTH, ENCRYPT); AUTH and ENCRYPT need BOUND;
	 * AUTH only on channel 0. */
	bool flags_ok = !(flags & ~7ull) && (!(flags & 6) || (flags & 1)) &&
			(!(flags & 2) || channel == 0);
	bool rest_ok = zeros(p + 32, len - 32) && flags_ok &&
		       zeros(p + 28, 4) && nchannels >= 1 &&
		       nchannels <= XPORT_MAX_CHANNELS && channel < nchannels &&
		       max_msg >= XPORT_MIN_MSG && max_msg <= XPORT_MAX_MSG &&
		       depth >= 1 && depth <= XPORT_MAX_DEPTH;
	return versioned(ut_ld(p + 4, 2) == 1, rest_ok);
}

static unsigned ref_welcome(const uint8_t *p, size_t len)
{
	if (!p || len < 16 || memcmp(p, "VXHA", 4))
		return ALLOW_BADMSG;
	uint64_t status = ut_ld(p + 6, 2), max_msg = ut_ld(p + 8, 4);
	bool rest_ok = zeros(p + 16, len - 16) && zeros(p + 12, 4) &&
		       (status != 0 ||
			(max_msg >= XPORT_MIN_MSG && max_msg <= XPORT_MAX_MSG));
	return versioned(ut_ld(p + 4, 2) == 1, rest_ok);
}

static unsigned ref_region(const uint8_t *p, size_t len)
{
	if (!p || len != 32 || memcmp(p, "VXRD", 4))
		return ALLOW_BADMSG;
	uint8_t kind = p[5], access = p[6];
	uint64_t base = ut_ld(p + 16, 8), rlen = ut_ld(p + 24, 8);
	bool rest_ok = p[7] == 0 &&
		       (kind == XPORT_KIND_RDMA || kind == XPORT_KIND_TCP) &&
		       access >= 1 && access <= 3 && rlen >= 1 &&
		       rlen <= UINT64_MAX - base;
	return versioned(p[4] == 1, rest_ok);
}

static unsigned ref_frame(const uint8_t *p, size_t len, uint32_t max_msg)
{
	if (!p || len != 32 || !zeros(p + 1, 3) || !zeros(p + 28, 4))
		return ALLOW_BADMSG;
	uint64_t flen = ut_ld(p + 4, 4), region = ut_ld(p + 8, 4), key = ut_ld(p + 12, 4);
	uint64_t offset = ut_ld(p + 16, 8), tag = ut_ld(p + 24, 4);
	bool ok;

	switch (p[0]) {
	case 1: /* SEND */
		ok = flen <= max_msg && !region && !key && !offset && !tag;
		break;
	case 2: /* WRITE */
		ok = !tag && flen <= XPORT_MAX_IO && offset <= UINT64_MAX - flen;
		break;
	case 3: /* WRITE_IMM */
	case 4: /* READ_REQ */
		ok = flen <= XPORT_MAX_IO && offset <= UINT64_MAX - flen;
		break;
	case 5: /* READ_RESP */
		ok = flen <= XPORT_MAX_IO && !region && !key && !offset;
		break;
	default:
		ok = false;
	}
	return ok ? ALLOW_OK : ALLOW_BADMSG;
}

static const uint64_t interesting[] = {
	0, 1, 2, 3, 4, 5, 6, 7, 15, 16, 17, 63, 64, 65, 0x7f, 0x80, 0xff, 0x100,
	4095, 4096, 4097, 0xffff, 0x10000,
	XPORT_MAX_MSG - 1, XPORT_MAX_MSG, XPORT_MAX_MSG + 1,
	XPORT_MAX_IO - 1, XPORT_MAX_IO, XPORT_MAX_IO + 1,
	0x7fffffff, 0x80000000u, 0xffffffffu, 0x100000000ull,
	1ull << 63, UINT64_MAX - XPORT_MAX_IO, UINT64_MAX - 1, UINT64_MAX,
};

static uint64_t rnd_interesting(void)
{
	return interesting[ut_rnd_below(G_N_ELEMENTS(interesting))];
}

enum { T_HELLO, T_WELCOME, T_REGION, T_FRAME, T_COUNT };

/* A valid message of the given type, built from random fields. */
static void make_valid(unsigned type, uint8_t buf[32], uint32_t max_msg)
{
	memset(buf, 0, 32);
	switch (type) {
	case T_HELLO: {
		struct xport_hello h;

		h.nchannels = (uint16_t)(1 + ut_rnd_below(XPORT_MAX_CHANNELS));
		h.channel = (uint16_t)ut_rnd_below(h.nchannels);
		h.max_msg = XPORT_MIN_MSG +
			    ut_rnd_below(XPORT_MAX_MSG - XPORT_MIN_MSG + 1);
		h.recv_depth = 1 + ut_rnd_below(XPORT_MAX_DEPTH);
		h.token = ut_rnd();
		/* None, bound, bound and encrypted; the handshake's on channel 0. */
		h.flags = (uint16_t)(ut_rnd_below(2) ? 0 : XPORT_HELLO_F_BOUND |
				     (ut_rnd_below(2) ? XPORT_HELLO_F_ENCRYPT : 0) |
				     (h.channel == 0 && ut_rnd_below(2) ? XPORT_HELLO_F_AUTH : 0));
		xport_hello_encode(&h, buf);
		break;
	}
	case T_WELCOME: {
		struct xport_welcome w;

		if (ut_rnd_below(4) == 0) {
			w.status = (uint16_t)(1 + ut_rnd_below(0xffff));
			w.max_msg = (uint32_t)ut_rnd();
		} else {
			w.status = 0;
			w.max_msg = XPORT_MIN_MSG +
				    ut_rnd_below(XPORT_MAX_MSG - XPORT_MIN_MSG + 1);
		}
		xport_welcome_encode(&w, buf);
		break;
	}
	case T_REGION: {
		struct xport_region_wire r;

		r.kind = ut_rnd_below(2) ? XPORT_KIND_RDMA : XPORT_KIND_TCP;
		r.access = (uint8_t)(1 + ut_rnd_below(3));
		r.id = (uint32_t)ut_rnd();
		r.key = (uint32_t)ut_rnd();
		r.base = ut_rnd() >> ut_rnd_below(64);
		if (r.base == UINT64_MAX)
			r.base--;
		r.len = 1 + (ut_rnd() >> ut_rnd_below(64)) % (UINT64_MAX - r.base);
		xport_region_encode(&r, buf);
		break;
	}
	case T_FRAME: {
		struct xport_frame f = { .op = (uint8_t)(1 + ut_rnd_below(5)) };

		switch (f.op) {
		case XPORT_FRAME_SEND:
			f.len = max_msg ? ut_rnd_below(max_msg + 1) : 0;
			break;
		case XPORT_FRAME_WRITE:
		case XPORT_FRAME_WRITE_IMM:
		case XPORT_FRAME_READ_REQ:
			f.len = ut_rnd_below(XPORT_MAX_IO + 1);
			f.region = (uint32_t)ut_rnd();
			f.key = (uint32_t)ut_rnd();
			f.offset = ut_rnd() >> ut_rnd_below(64);
			if (f.len)
				f.offset %= UINT64_MAX - f.len + 1;
			if (f.op != XPORT_FRAME_WRITE)
				f.tag = (uint32_t)ut_rnd();
			break;
		default:
			f.len = ut_rnd_below(XPORT_MAX_IO + 1);
			f.tag = (uint32_t)ut_rnd();
			break;
		}
		xport_frame_encode(&f, buf);
		break;
	}
	}
}

/* Random bytes behind a header that gets past the first checks. */
static void make_stamped(unsigned type, uint8_t buf[32])
{
	for (unsigned i = 0; i < 32; i++)
		buf[i] = (uint8_t)ut_rnd();
	uint16_t version = ut_rnd_below(4) == 0 ? (uint16_t)ut_rnd() : 1;
	switch (type) {
	case T_HELLO:
		memcpy(buf, "VXHI", 4);
		ut_st16(buf + 4, version);
		break;
	case T_WELCOME:
		memcpy(buf, "VXHA", 4);
		ut_st16(buf + 4, version);
		break;
	case T_REGION:
		memcpy(buf, "VXRD", 4);
		buf[4] = (uint8_t)version;
		break;
	case T_FRAME:
		buf[0] = (uint8_t)(1 + ut_rnd_below(5));
		memset(buf + 1, 0, 3);
		memset(buf + 28, 0, 4);
		break;
	}
}

static void mutate(uint8_t buf[32], unsigned n)
{
	while (n--) {
		switch (ut_rnd_below(4)) {
		case 0:
			buf[ut_rnd_below(32)] = (uint8_t)ut_rnd();
			break;
		case 1: {
			unsigned bit = ut_rnd_below(256);

			buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			break;
		}
		default: {
			/* an interesting value into a field-sized slot */
			unsigned width = 1u << ut_rnd_below(4);
			unsigned pos = ut_rnd_below(32 / width) * width;
			uint64_t v = rnd_interesting();

			for (unsigned i = 0; i < width; i++)
				buf[pos + i] = (uint8_t)(v >> (8 * i));
			break;
		}
		}
	}
}

static uint32_t pick_max_msg(void)
{
	switch (ut_rnd_below(5)) {
	case 0:
		return 0;
	case 1:
		return XPORT_MIN_MSG;
	case 2:
		return 4096;
	case 3:
		return XPORT_MAX_MSG;
	default:
		return XPORT_MIN_MSG + ut_rnd_below(XPORT_MAX_MSG - XPORT_MIN_MSG + 1);
	}
}

struct fuzz_stats {
	unsigned long ok, badmsg, proto;
};

static void tally(struct fuzz_stats *s, int rc)
{
	if (rc == 0)
		s->ok++;
	else if (rc == -EBADMSG)
		s->badmsg++;
	else if (rc == -EPROTONOSUPPORT)
		s->proto++;
}

static void dump(const char *what, unsigned long iter, const uint8_t *buf,
		 size_t len, int rc)
{
	print_error("%s: iteration %lu: got %d (%s) for len %zu:", what, iter, rc,
		    ut_rc_name(rc), len);
	for (size_t i = 0; i < len; i++)
		print_error(" %02x", buf[i]);
	print_error("\n");
}

enum { S_HELLO32, S_HELLO_LONG, S_WELCOME16, S_WELCOME32, S_REGION, S_FRAME, S_COUNT };
static const char *const stat_names[S_COUNT] = {
	"hello/32", "hello/long", "welcome/16", "welcome/32", "region", "frame",
};

static void test_fuzz_decoders(void **state)
{
	struct fuzz_stats stats[S_COUNT] = { 0 };
	(void)state;

	ut_rnd_seed(FUZZ_SEED);
	for (unsigned long iter = 0; iter < FUZZ_ITERATIONS; iter++) {
		uint8_t buf[56] = { 0 }, again[32];
		unsigned type = ut_rnd_below(T_COUNT);
		uint32_t max_msg = pick_max_msg();
		size_t long_len = 32 + ut_rnd_below(25); /* 32..56 */
		int r;

		switch (ut_rnd_below(4)) {
		case 0:
			for (unsigned i = 0; i < 32; i++)
				buf[i] = (uint8_t)ut_rnd();
			break;
		case 1:
			make_stamped(type, buf);
			break;
		default:
			make_valid(type, buf, max_msg);
			mutate(buf, ut_rnd_below(4));
			break;
		}
		if (long_len > 32 && ut_rnd_below(4) == 0)
			buf[32 + ut_rnd_below(long_len - 32)] = (uint8_t)(1 + ut_rnd_below(255));

		/* hello, exactly 32 bytes and zero-padded-or-not */
		struct xport_hello h;
		r = dec_hello(buf, 32, &h);
		tally(&stats[S_HELLO32], r);
		if (!rc_allowed(r, ref_hello(buf, 32))) {
			dump("hello", iter, buf, 32, r);
			fail();
		}
		if (r == 0) {
			xport_hello_encode(&h, again);
			if (memcmp(again, buf, 32)) {
				dump("hello re-encode", iter, buf, 32, r);
				fail();
			}
		}
		r = dec_hello(buf, long_len, &h);
		tally(&stats[S_HELLO_LONG], r);
		if (!rc_allowed(r, ref_hello(buf, long_len))) {
			dump("hello long", iter, buf, long_len, r);
			fail();
		}
		if (r == 0) {
			xport_hello_encode(&h, again);
			if (memcmp(again, buf, 32)) {
				dump("hello long re-encode", iter, buf, long_len, r);
				fail();
			}
		}

		/* welcome, 16 and 32 bytes */
		static const size_t wlens[2] = { 16, 32 };
		for (unsigned k = 0; k < 2; k++) {
			struct xport_welcome w;

			r = dec_welcome(buf, wlens[k], &w);
			tally(&stats[S_WELCOME16 + k], r);
			if (!rc_allowed(r, ref_welcome(buf, wlens[k]))) {
				dump("welcome", iter, buf, wlens[k], r);
				fail();
			}
			if (r == 0) {
				xport_welcome_encode(&w, again);
				if (memcmp(again, buf, 16) || !zeros(buf + 16, wlens[k] - 16)) {
					dump("welcome re-encode", iter, buf, wlens[k], r);
					fail();
				}
			}
		}

		/* region */
		struct xport_region_wire rg;
		r = dec_region(buf, 32, &rg);
		tally(&stats[S_REGION], r);
		if (!rc_allowed(r, ref_region(buf, 32))) {
			dump("region", iter, buf, 32, r);
			fail();
		}
		if (r == 0) {
			xport_region_encode(&rg, again);
			if (memcmp(again, buf, 32)) {
				dump("region re-encode", iter, buf, 32, r);
				fail();
			}
		}

		/* frame */
		struct xport_frame f;
		r = dec_frame(buf, 32, max_msg, &f);
		tally(&stats[S_FRAME], r);
		if (!rc_allowed(r, ref_frame(buf, 32, max_msg))) {
			print_error("max_msg %u\n", max_msg);
			dump("frame", iter, buf, 32, r);
			fail();
		}
		if (r == 0) {
			xport_frame_encode(&f, again);
			if (memcmp(again, buf, 32)) {
				dump("frame re-encode", iter, buf, 32, r);
				fail();
			}
		}
	}

	/* The loop only proves something if both outcomes were exercised. */
	for (unsigned s = 0; s < S_COUNT; s++) {
		print_message("fuzz %-10s ok %6lu  -EBADMSG %6lu  -EPROTONOSUPPORT %6lu\n",
			      stat_names[s], stats[s].ok, stats[s].badmsg,
			      stats[s].proto);
		assert_true(stats[s].ok >= 1000);
		assert_true(stats[s].badmsg >= 1000);
		if (s != S_FRAME)
			assert_true(stats[s].proto >= 100);
		assert_int_equal(stats[s].ok + stats[s].badmsg + stats[s].proto,
				 FUZZ_ITERATIONS);
	}
}

/* Independent model of "host:port" / "[v6]:port" / ":port". */
static bool ref_hostport(const char *s, char **ret_host, char **ret_port)
{
	const char *hs, *he, *ps;

	if (s[0] == '[') {
		hs = s + 1;
		he = strchr(hs, ']');
		if (!he || he[1] != ':')
			return false;
		ps = he + 2;
	} else {
		hs = s;
		he = strchr(s, ':');
		if (!he || strchr(he + 1, ':'))
			return false;
		ps = he + 1;
	}
	size_t n = strlen(ps);
	unsigned long v = 0;
	if (n < 1 || n > 5)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (ps[i] < '0' || ps[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(ps[i] - '0');
	}
	if (v > 65535)
		return false;
	*ret_host = g_strndup(hs, (gsize)(he - hs));
	*ret_port = g_strdup(ps);
	return true;
}

static void test_fuzz_hostport(void **state)
{
	static const char alphabet[] = "0123456789::[]ah.-+ %";
	unsigned long accepted = 0;
	(void)state;

	ut_rnd_seed(FUZZ_SEED ^ 0x5555);
	for (unsigned long iter = 0; iter < FUZZ_ITERATIONS; iter++) {
		char spec[16];
		size_t len = ut_rnd_below(sizeof(spec));
		char *host = (char *)0x1, *port = (char *)0x2;
		char *want_host = NULL, *want_port = NULL;

		for (size_t i = 0; i < len; i++)
			spec[i] = alphabet[ut_rnd_below(sizeof(alphabet) - 1)];
		spec[len] = '\0';
		if (len && ut_rnd_below(3) == 0)
			spec[0] = '[';

		/* parse a heap copy of exactly strlen+1 bytes */
		char *copy = g_strdup(spec);
		int r = xport_parse_hostport(copy, &host, &port);
		bool want = ref_hostport(spec, &want_host, &want_port);

		if (r != (want ? 0 : -EINVAL))
			fail_msg("\"%s\": got %d (%s), want %s", spec, r, ut_rc_name(r),
				 want ? "0" : "-EINVAL");
		if (want) {
			accepted++;
			assert_string_equal(host, want_host);
			assert_string_equal(port, want_port);
			g_free(host);
			g_free(port);
		} else {
			assert_ptr_equal(host, (char *)0x1);
			assert_ptr_equal(port, (char *)0x2);
		}
		g_free(want_host);
		g_free(want_port);
		g_free(copy);
	}
	print_message("fuzz hostport: %lu of %u accepted\n", accepted,
		      FUZZ_ITERATIONS);
	assert_true(accepted >= 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello_golden),
		cmocka_unit_test(test_hello_roundtrip),
		cmocka_unit_test(test_hello_bad_magic),
		cmocka_unit_test(test_hello_version),
		cmocka_unit_test(test_hello_short),
		cmocka_unit_test(test_hello_tail),
		cmocka_unit_test(test_hello_fields),
		cmocka_unit_test(test_hello_reserved),
		cmocka_unit_test(test_hello_flags),
		cmocka_unit_test(test_bound_hello),
		cmocka_unit_test(test_challenge),
		cmocka_unit_test(test_welcome_golden),
		cmocka_unit_test(test_welcome_roundtrip),
		cmocka_unit_test(test_welcome_status),
		cmocka_unit_test(test_welcome_malformed),
		cmocka_unit_test(test_region_golden),
		cmocka_unit_test(test_region_fields),
		cmocka_unit_test(test_region_malformed),
		cmocka_unit_test(test_frame_golden),
		cmocka_unit_test(test_frame_ops),
		cmocka_unit_test(test_frame_reserved),
		cmocka_unit_test(test_frame_length),
		cmocka_unit_test(test_frame_bitflips),
		cmocka_unit_test(test_hostport_good),
		cmocka_unit_test(test_hostport_bad),
		cmocka_unit_test(test_fuzz_decoders),
		cmocka_unit_test(test_fuzz_hostport),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

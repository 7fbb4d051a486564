// SPDX-License-Identifier: MIT
/*
 * Unit tests of the migration protocols: migrate/owner-proto.c (encoder,
 * validating decoder, owner_send/owner_recv with SCM_RIGHTS) and
 * migrate/peer-proto.c (engine-to-engine messages).
 *
 * Expected sizes, layouts and limits are taken from docs/migration-protocol.md
 * and written down here independently of the code under test.  Every decoder
 * call decodes a heap copy of exactly `len` bytes, so that AddressSanitizer
 * reports any read past the end.  Each case builds its input afresh.
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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "owner-proto.h"
#include "peer-proto.h"
#include "unit-common.h"

#define FUZZ_ITERATIONS 100000u
#define FUZZ_SEED 0x6a09e667f3bcc909ull

#define TiB (1ull << 40)
#define GiB (1ull << 30)
#define MiB (1ull << 20)

/* ---- helpers ---- */

static int odec(const void *buf, size_t len, unsigned nfds, struct owner_msg *ret)
{
	struct owner_msg tmp;
	uint8_t *copy = buf ? ut_dup_exact(buf, len) : NULL;
	int r = owner_msg_decode(copy, len, nfds, ret ? ret : &tmp);

	free(copy);
	return r;
}

static int pdec(const void *buf, size_t len, struct peer_msg *ret)
{
	struct peer_msg tmp;
	uint8_t *copy = buf ? ut_dup_exact(buf, len) : NULL;
	int r = peer_msg_decode(copy, len, ret ? ret : &tmp);

	free(copy);
	return r;
}

/* ---- the owner protocol, as docs/migration-protocol.md states it ---- */

#define O_MAGIC 0x574f4d56u /* "VMOW" */
#define P_MAGIC 0x52504d56u /* "VMPR" */

/* Payload size of a known type, or -1. */
static long spec_owner_plen(unsigned type)
{
	switch (type) {
	case 1: return 16;  /* HELLO */
	case 16: return 24; /* WELCOME */
	case 17: return 64; /* BLOCK */
	case 18: return 8;  /* BITMAP */
	case 2: return 8;   /* SYNC */
	case 19: return 16; /* ROUND_READY */
	case 3: return 4;   /* THROTTLE */
	case 4: return 0;   /* STOP */
	case 20: return 0;  /* STOPPED */
	case 5: return 4;   /* RESUME */
	case 6: return 0;   /* COMPLETED */
	case 7: return 4;   /* ABORT */
	default: return -1;
	}
}
static unsigned spec_owner_nfds(unsigned type) { return type == 17 || type == 18; }

static const unsigned owner_types[] = { 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20 };

static size_t oenc(const struct owner_msg *m, uint8_t buf[OWNER_MAX_MSG])
{
	memset(buf, 0xee, OWNER_MAX_MSG);
	return owner_msg_encode(m, buf);
}

static struct owner_msg o_block(uint32_t index, uint32_t page, uint64_t offset,
				uint64_t size, uint64_t bitmap_offset,
				const char *name)
{
	struct owner_msg m;

	memset(&m, 0, sizeof(m));
	m.type = OWNER_MSG_BLOCK;
	m.u.block.index = index;
	m.u.block.page_size = page;
	m.u.block.offset = offset;
	m.u.block.size = size;
	m.u.block.bitmap_offset = bitmap_offset;
	snprintf(m.u.block.name, sizeof(m.u.block.name), "%s", name);
	return m;
}

/* A valid message of each type (variant picks among a few). */
static struct owner_msg o_valid(unsigned type, unsigned variant)
{
	struct owner_msg m;

	memset(&m, 0, sizeof(m));
	m.type = (enum owner_msg_type)type;
	switch (type) {
	case OWNER_MSG_HELLO:
		m.u.hello.version = 1;
		m.u.hello.role = variant & 1 ? OWNER_ROLE_DEST : OWNER_ROLE_SOURCE;
		m.u.hello.caps = variant == 0 ? 0 : variant == 1 ? OWNER_CAP_THROTTLE
								: UINT64_MAX;
		break;
	case OWNER_MSG_WELCOME:
		m.u.welcome.version = 1;
		m.u.welcome.role = variant & 1 ? OWNER_ROLE_DEST : OWNER_ROLE_SOURCE;
		m.u.welcome.caps = variant ? OWNER_CAP_THROTTLE | (1ull << 63) : 0;
		m.u.welcome.nblocks = variant == 0 ? 1 : variant == 1 ? 64 : 7;
		break;
	case OWNER_MSG_BLOCK:
		if (variant == 0)
			return o_block(0, 4096, 0, 4096, 0, "pc.ram");
		if (variant == 1)
			return o_block(63, 1u << 30, 3 * GiB, 16 * TiB, 1ull << 40,
				       "0123456789abcdefghijklmnopqrstu");
		return o_block(5, 2 * MiB, 2 * MiB, 20 * MiB, 8, " ~!");
	case OWNER_MSG_BITMAP:
		m.u.bitmap_size = variant ? 1ull << 40 : 8;
		break;
	case OWNER_MSG_SYNC:
		m.u.round = variant ? UINT64_MAX : 0;
		break;
	case OWNER_MSG_ROUND_READY:
		m.u.ready.round = variant ? UINT64_MAX : 3;
		m.u.ready.dirty_pages = variant ? UINT64_MAX - 1 : 0;
		break;
	case OWNER_MSG_THROTTLE:
		m.u.percent = variant ? 99 : 0;
		break;
	case OWNER_MSG_RESUME:
	case OWNER_MSG_ABORT:
		m.u.error = variant == 0 ? 0 : variant == 1 ? 4095 : EIO;
		break;
	default:
		break;
	}
	return m;
}

static void assert_owner_eq(const struct owner_msg *a, const struct owner_msg *b)
{
	assert_int_equal(a->type, b->type);
	switch (a->type) {
	case OWNER_MSG_HELLO:
		assert_int_equal(a->u.hello.version, b->u.hello.version);
		assert_int_equal(a->u.hello.role, b->u.hello.role);
		assert_int_equal(a->u.hello.caps, b->u.hello.caps);
		break;
	case OWNER_MSG_WELCOME:
		assert_int_equal(a->u.welcome.version, b->u.welcome.version);
		assert_int_equal(a->u.welcome.role, b->u.welcome.role);
		assert_int_equal(a->u.welcome.caps, b->u.welcome.caps);
		assert_int_equal(a->u.welcome.nblocks, b->u.welcome.nblocks);
		break;
	case OWNER_MSG_BLOCK:
		assert_int_equal(a->u.block.index, b->u.block.index);
		assert_int_equal(a->u.block.page_size, b->u.block.page_size);
		assert_int_equal(a->u.block.offset, b->u.block.offset);
		assert_int_equal(a->u.block.size, b->u.block.size);
		assert_int_equal(a->u.block.bitmap_offset, b->u.block.bitmap_offset);
		assert_memory_equal(a->u.block.name, b->u.block.name, OWNER_NAME_MAX);
		break;
	case OWNER_MSG_BITMAP:
		assert_int_equal(a->u.bitmap_size, b->u.bitmap_size);
		break;
	case OWNER_MSG_SYNC:
		assert_int_equal(a->u.round, b->u.round);
		break;
	case OWNER_MSG_ROUND_READY:
		assert_int_equal(a->u.ready.round, b->u.ready.round);
		assert_int_equal(a->u.ready.dirty_pages, b->u.ready.dirty_pages);
		break;
	case OWNER_MSG_THROTTLE:
		assert_int_equal(a->u.percent, b->u.percent);
		break;
	case OWNER_MSG_RESUME:
	case OWNER_MSG_ABORT:
		assert_int_equal(a->u.error, b->u.error);
		break;
	default:
		break;
	}
}

/*
 * A header of our own making, as both protocols lay it out: magic, type,
 * zero, declared payload length, zero.
 */
static void spec_hdr(uint8_t *buf, uint32_t magic, uint16_t type, uint32_t plen)
{
	memset(buf, 0, 16);
	ut_st32(buf, magic);
	ut_st16(buf + 4, type);
	ut_st32(buf + 8, plen);
}

/* The header of an encoded message is exactly the one spec_hdr() makes. */
static void assert_spec_hdr(const uint8_t *buf, uint32_t magic, unsigned type, size_t plen)
{
	assert_int_equal(ut_ld(buf, 4), magic);
	assert_int_equal(ut_ld(buf + 4, 2), type);
	assert_int_equal(ut_ld(buf + 6, 2), 0);
	assert_int_equal(ut_ld(buf + 8, 4), plen);
	assert_int_equal(ut_ld(buf + 12, 4), 0);
}

/* The encoding of a valid BLOCK, built byte by byte from the spec. */
static size_t o_block_bytes(uint8_t buf[80], uint32_t index, uint32_t page,
			    uint64_t offset, uint64_t size, uint64_t bmoff)
{
	memset(buf, 0, 80);
	spec_hdr(buf, O_MAGIC, 17, 64);
	ut_st32(buf + 16, index);
	ut_st32(buf + 20, page);
	ut_st64(buf + 24, offset);
	ut_st64(buf + 32, size);
	ut_st64(buf + 40, bmoff);
	memcpy(buf + 48, "pc.ram", 6);
	return 80;
}

/* ---- owner: encoding ---- */

static void test_owner_golden(void **state)
{
	static const uint8_t hello[32] = {
		'V', 'M', 'O', 'W', 0x01, 0x00, 0x00, 0x00,
		0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
	};
	struct owner_msg m, d;
	uint8_t buf[OWNER_MAX_MSG], want[80];
	(void)state;

	memset(&m, 0, sizeof(m));
	m.type = OWNER_MSG_HELLO;
	m.u.hello = (struct owner_hello){ .version = 1, .role = OWNER_ROLE_DEST,
					  .caps = 0x0102030405060708ull };
	assert_int_equal(oenc(&m, buf), 32);
	assert_memory_equal(buf, hello, 32);
	ut_assert_rc(odec(hello, 32, 0, &d), 0, "golden hello");
	assert_owner_eq(&d, &m);

	m = o_block(3, 2 * MiB, 4 * MiB, 6 * MiB, 128, "pc.ram");
	assert_int_equal(oenc(&m, buf), 80);
	o_block_bytes(want, 3, 2 * MiB, 4 * MiB, 6 * MiB, 128);
	assert_memory_equal(buf, want, 80);
	ut_assert_rc(odec(want, 80, 1, &d), 0, "golden block");
	assert_owner_eq(&d, &m);

	/* A name longer than the field is cut to 31 chars + NUL. */
	m = o_block(0, 4096, 0, 4096, 0, "");
	memset(m.u.block.name, 'x', sizeof(m.u.block.name)); /* no NUL at all */
	assert_int_equal(oenc(&m, buf), 80);
	for (unsigned i = 0; i < 31; i++)
		assert_int_equal(buf[48 + i], 'x');
	assert_int_equal(buf[79], 0);
	ut_assert_rc(odec(buf, 80, 1, NULL), 0, "encoder-truncated name");

	/* A THROTTLE: header then percent. */
	memset(&m, 0, sizeof(m));
	m.type = OWNER_MSG_THROTTLE;
	m.u.percent = 42;
	assert_int_equal(oenc(&m, buf), 20);
	spec_hdr(want, O_MAGIC, 3, 4);
	ut_st32(want + 16, 42);
	assert_memory_equal(buf, want, 20);
}

static void test_owner_roundtrip(void **state)
{
	(void)state;

	for (size_t t = 0; t < sizeof(owner_types) / sizeof(owner_types[0]); t++) {
		unsigned type = owner_types[t];

		assert_int_equal(owner_msg_nfds((enum owner_msg_type)type),
				 spec_owner_nfds(type));
		assert_string_not_equal(owner_msg_name((enum owner_msg_type)type), "?");
		for (unsigned variant = 0; variant < 3; variant++) {
			struct owner_msg m = o_valid(type, variant), d;
			uint8_t buf[OWNER_MAX_MSG], again[OWNER_MAX_MSG];
			size_t len = oenc(&m, buf);
			unsigned nfds = spec_owner_nfds(type);

			assert_int_equal(len, 16 + (size_t)spec_owner_plen(type));
			assert_spec_hdr(buf, O_MAGIC, type, (size_t)spec_owner_plen(type));
			memset(&d, 0xa5, sizeof(d));
			ut_assert_rc(odec(buf, len, nfds, &d), 0, "type %u variant %u",
				  type, variant);
			assert_owner_eq(&d, &m);
			assert_int_equal(oenc(&d, again), len);
			assert_memory_equal(again, buf, len);

			/* The other fd counts are refused. */
			ut_assert_rc(odec(buf, len, !nfds, NULL), -EBADMSG,
				  "type %u with %u fds", type, !nfds);
			ut_assert_rc(odec(buf, len, 2, NULL), -EBADMSG,
				  "type %u with 2 fds", type);
		}
	}
	assert_string_equal(owner_msg_name(OWNER_MSG_BLOCK), "BLOCK");
	assert_string_equal(owner_msg_name(OWNER_MSG_ROUND_READY), "ROUND_READY");
	assert_string_equal(owner_msg_name((enum owner_msg_type)0), "?");
	assert_string_equal(owner_msg_name((enum owner_msg_type)8), "?");
}

/* ---- owner: header ---- */

static void test_owner_bad_magic(void **state)
{
	(void)state;

	for (unsigned i = 0; i < 4; i++) {
		for (unsigned bit = 0; bit < 8; bit++) {
			struct owner_msg m = o_valid(OWNER_MSG_SYNC, 0);
			uint8_t buf[OWNER_MAX_MSG];
			size_t len = oenc(&m, buf);

			buf[i] ^= (uint8_t)(1u << bit);
			ut_assert_rc(odec(buf, len, 0, NULL), -EBADMSG,
				  "magic byte %u bit %u", i, bit);
		}
	}
	/* A peer-protocol header is not an owner header. */
	uint8_t buf[OWNER_MAX_MSG];
	spec_hdr(buf, O_MAGIC, 2, 8);
	ut_st32(buf, P_MAGIC);
	memset(buf + 16, 0, 8);
	ut_assert_rc(odec(buf, 24, 0, NULL), -EBADMSG, "peer magic");
	/* Byte-swapped magic. */
	spec_hdr(buf, O_MAGIC, 2, 8);
	memcpy(buf, "WOMV", 4);
	ut_assert_rc(odec(buf, 24, 0, NULL), -EBADMSG, "swapped magic");
}

static void test_owner_reserved(void **state)
{
	static const unsigned offs[] = { 6, 7, 12, 13, 14, 15 };
	static const uint8_t vals[] = { 0x01, 0x80, 0xff };
	(void)state;

	for (size_t t = 0; t < sizeof(owner_types) / sizeof(owner_types[0]); t++) {
		for (size_t o = 0; o < 6; o++) {
			for (size_t v = 0; v < 3; v++) {
				struct owner_msg m = o_valid(owner_types[t], 0);
				uint8_t buf[OWNER_MAX_MSG];
				size_t len = oenc(&m, buf);

				buf[offs[o]] = vals[v];
				ut_assert_rc(odec(buf, len, spec_owner_nfds(owner_types[t]),
					       NULL), -EBADMSG,
					  "type %u reserved byte %u = 0x%x",
					  owner_types[t], offs[o], vals[v]);
			}
		}
	}
}

static void test_owner_length(void **state)
{
	(void)state;

	for (size_t t = 0; t < sizeof(owner_types) / sizeof(owner_types[0]); t++) {
		unsigned type = owner_types[t], nfds = spec_owner_nfds(type);
		size_t plen = (size_t)spec_owner_plen(type);
		uint8_t buf[OWNER_MAX_MSG + 8];
		struct owner_msg m = o_valid(type, 0);

		/* One byte too many, declared length unchanged. */
		memset(buf, 0, sizeof(buf));
		oenc(&m, buf);
		ut_assert_rc(odec(buf, 16 + plen + 1, nfds, NULL), -EBADMSG,
			  "type %u: trailing byte", type);
		/* Declared and actual agree, but not with the type. */
		ut_st32(buf + 8, (uint32_t)plen + 1);
		ut_assert_rc(odec(buf, 16 + plen + 1, nfds, NULL), -EBADMSG,
			  "type %u: declared %zu", type, plen + 1);
		/* Declared one more than actual. */
		ut_assert_rc(odec(buf, 16 + plen, nfds, NULL), -EBADMSG,
			  "type %u: declared > actual", type);
		/* Declared zero / huge with the right actual size. */
		ut_st32(buf + 8, plen ? 0 : 8);
		ut_assert_rc(odec(buf, 16 + plen, nfds, NULL), -EBADMSG,
			  "type %u: declared wrong", type);
		ut_st32(buf + 8, UINT32_MAX);
		ut_assert_rc(odec(buf, 16 + plen, nfds, NULL), -EBADMSG,
			  "type %u: declared 0xffffffff", type);

		if (plen) {
			/* One byte short, declared unchanged. */
			memset(buf, 0, sizeof(buf));
			m = o_valid(type, 0);
			oenc(&m, buf);
			ut_assert_rc(odec(buf, 16 + plen - 1, nfds, NULL), -EBADMSG,
				  "type %u: truncated", type);
			/* Declared and actual agree one short. */
			ut_st32(buf + 8, (uint32_t)plen - 1);
			ut_assert_rc(odec(buf, 16 + plen - 1, nfds, NULL), -EBADMSG,
				  "type %u: declared %zu", type, plen - 1);
			/* Declared one less than actual. */
			ut_assert_rc(odec(buf, 16 + plen, nfds, NULL), -EBADMSG,
				  "type %u: declared < actual", type);
		}

		/* Shorter than a header. */
		for (size_t len = 0; len < 16; len++) {
			m = o_valid(type, 0);
			oenc(&m, buf);
			ut_assert_rc(odec(buf, len, nfds, NULL), -EBADMSG,
				  "type %u: %zu bytes", type, len);
		}
	}
	ut_assert_rc(owner_msg_decode(NULL, 0, 0, &(struct owner_msg){ 0 }), -EBADMSG,
		  "NULL buffer");
	ut_assert_rc(owner_msg_decode(NULL, 24, 0, &(struct owner_msg){ 0 }), -EBADMSG,
		  "NULL buffer, length 24");
}

static void test_owner_unknown_types(void **state)
{
	static const unsigned listed[] = { 0, 8, 15, 21, 0xffff };
	(void)state;

	for (unsigned type = 0; type <= 0xffff; type++) {
		if (spec_owner_plen(type) >= 0)
			continue;
		if (type > 300 && type != 0xffff && type != 0x8001 && type != 0x0101)
			continue;
		for (unsigned plen = 0; plen <= 64; plen += 4) {
			uint8_t buf[80] = { 0 };

			spec_hdr(buf, O_MAGIC, (uint16_t)type, plen);
			for (unsigned nfds = 0; nfds < 2; nfds++)
				ut_assert_rc(odec(buf, 16 + plen, nfds, NULL), -EBADMSG,
					  "type %u plen %u nfds %u", type, plen, nfds);
		}
	}
	for (size_t i = 0; i < sizeof(listed) / sizeof(listed[0]); i++) {
		uint8_t buf[24] = { 0 };

		spec_hdr(buf, O_MAGIC, (uint16_t)listed[i], 8);
		ut_assert_rc(odec(buf, 24, 0, NULL), -EBADMSG, "type %u", listed[i]);
		spec_hdr(buf, O_MAGIC, (uint16_t)listed[i], 0);
		ut_assert_rc(odec(buf, 16, 0, NULL), -EBADMSG, "type %u, empty", listed[i]);
	}
}

static void test_owner_fd_count(void **state)
{
	static const struct {
		unsigned type, nfds;
	} bad[] = {
		{ OWNER_MSG_BLOCK, 0 }, { OWNER_MSG_BLOCK, 2 }, { OWNER_MSG_BLOCK, 4 },
		{ OWNER_MSG_BITMAP, 0 }, { OWNER_MSG_BITMAP, 2 },
		{ OWNER_MSG_SYNC, 1 }, { OWNER_MSG_HELLO, 1 }, { OWNER_MSG_WELCOME, 1 },
		{ OWNER_MSG_STOPPED, 1 }, { OWNER_MSG_ROUND_READY, 3 },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct owner_msg m = o_valid(bad[i].type, 0);
		uint8_t buf[OWNER_MAX_MSG];
		size_t len = oenc(&m, buf);

		ut_assert_rc(odec(buf, len, bad[i].nfds, NULL), -EBADMSG,
			  "type %u with %u fds", bad[i].type, bad[i].nfds);
	}
}

/* ---- owner: payload fields ---- */

static void test_owner_version_role(void **state)
{
	static const uint32_t versions[] = { 0, 2, 3, 0x100, UINT32_MAX };
	static const uint32_t roles[] = { 0, 3, 4, 0x101, UINT32_MAX };
	static const unsigned types[] = { OWNER_MSG_HELLO, OWNER_MSG_WELCOME };
	(void)state;

	for (size_t t = 0; t < 2; t++) {
		for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
			struct owner_msg m = o_valid(types[t], 0);
			uint8_t buf[OWNER_MAX_MSG];
			size_t len;

			if (types[t] == OWNER_MSG_HELLO)
				m.u.hello.version = versions[i];
			else
				m.u.welcome.version = versions[i];
			len = oenc(&m, buf);
			ut_assert_rc(odec(buf, len, 0, NULL), -EPROTONOSUPPORT,
				  "type %u version %u", types[t], versions[i]);
		}
		for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
			uint8_t buf[OWNER_MAX_MSG];
			struct owner_msg m = o_valid(types[t], 0);
			size_t len = oenc(&m, buf);

			ut_st32(buf + 20, roles[i]);
			ut_assert_rc(odec(buf, len, 0, NULL), -EBADMSG,
				  "type %u role %u", types[t], roles[i]);
		}
	}
}

static void test_owner_welcome(void **state)
{
	static const uint32_t bad_n[] = { 0, 65, 128, UINT32_MAX };
	(void)state;

	for (size_t i = 0; i < sizeof(bad_n) / sizeof(bad_n[0]); i++) {
		struct owner_msg m = o_valid(OWNER_MSG_WELCOME, 0);
		uint8_t buf[OWNER_MAX_MSG];
		size_t len;

		m.u.welcome.nblocks = bad_n[i];
		len = oenc(&m, buf);
		ut_assert_rc(odec(buf, len, 0, NULL), -EBADMSG, "nblocks %u", bad_n[i]);
	}
	for (uint32_t n = 1; n <= 64; n++) {
		struct owner_msg m = o_valid(OWNER_MSG_WELCOME, 0), d;
		uint8_t buf[OWNER_MAX_MSG];
		size_t len;

		m.u.welcome.nblocks = n;
		len = oenc(&m, buf);
		ut_assert_rc(odec(buf, len, 0, &d), 0, "nblocks %u", n);
		assert_int_equal(d.u.welcome.nblocks, n);
	}
	for (unsigned off = 36; off < 40; off++) { /* the trailing zero u32 */
		struct owner_msg m = o_valid(OWNER_MSG_WELCOME, 0);
		uint8_t buf[OWNER_MAX_MSG];
		size_t len = oenc(&m, buf);

		buf[off] = 1;
		ut_assert_rc(odec(buf, len, 0, NULL), -EBADMSG, "welcome byte %u", off);
	}
}

static int block_rc(uint32_t index, uint32_t page, uint64_t offset, uint64_t size,
		    uint64_t bmoff)
{
	struct owner_msg m = o_block(index, page, offset, size, bmoff, "pc.ram");
	uint8_t buf[OWNER_MAX_MSG];
	size_t len = oenc(&m, buf);

	return odec(buf, len, 1, NULL);
}

static void test_owner_block_fields(void **state)
{
	(void)state;

	/* Page size: power of two, 4 KiB .. 1 GiB. */
	for (unsigned shift = 12; shift <= 30; shift++)
		ut_assert_rc(block_rc(0, 1u << shift, 0, 1ull << shift, 0), 0,
			  "page 2^%u", shift);
	static const uint32_t bad_pages[] = {
		0, 1, 512, 2048, 4095, 4097, 3 * 4096, 6 * 4096, (1u << 30) + 4096,
		1u << 31, 0x80001000u, UINT32_MAX,
	};
	for (size_t i = 0; i < sizeof(bad_pages) / sizeof(bad_pages[0]); i++)
		ut_assert_rc(block_rc(0, bad_pages[i], 0, 3ull * GiB * 4, 0), -EBADMSG,
			  "page size %u", bad_pages[i]);

	/* Size: > 0, page multiple, <= 16 TiB. */
	ut_assert_rc(block_rc(0, 4096, 0, 0, 0), -EBADMSG, "size 0");
	ut_assert_rc(block_rc(0, 4096, 0, 6144, 0), -EBADMSG, "size 1.5 pages");
	ut_assert_rc(block_rc(0, 4096, 0, 4095, 0), -EBADMSG, "size 4095");
	ut_assert_rc(block_rc(0, 2 * MiB, 0, 4096, 0), -EBADMSG, "size < page");
	ut_assert_rc(block_rc(0, 2 * MiB, 0, 3 * MiB, 0), -EBADMSG, "size 1.5 huge pages");
	ut_assert_rc(block_rc(0, 4096, 0, 16 * TiB, 0), 0, "size 16 TiB");
	ut_assert_rc(block_rc(0, 4096, 0, 16 * TiB + 4096, 0), -EBADMSG,
		  "size 16 TiB + 4096");
	ut_assert_rc(block_rc(0, 4096, 0, UINT64_MAX - 4095, 0), -EBADMSG, "size ~2^64");

	/* Offset: page aligned, offset + size without overflow. */
	ut_assert_rc(block_rc(0, 4096, 100, 4096, 0), -EBADMSG, "offset 100");
	ut_assert_rc(block_rc(0, 4096, 4096 + 8, 4096, 0), -EBADMSG, "offset 4104");
	ut_assert_rc(block_rc(0, 2 * MiB, 4096, 2 * MiB, 0), -EBADMSG,
		  "offset 4 KiB with 2 MiB pages");
	ut_assert_rc(block_rc(0, 4096, UINT64_MAX - 4095, 4096, 0), -EBADMSG,
		  "offset + size = 2^64");
	ut_assert_rc(block_rc(0, 4096, UINT64_MAX - 4095, 8192, 0), -EBADMSG,
		  "offset + size > 2^64");
	ut_assert_rc(block_rc(0, 4096, 0x8000000000000000ull, 16 * TiB, 0), 0,
		  "offset 2^63");
	ut_assert_rc(block_rc(0, 4096, UINT64_MAX - 8191, 4096, 0), 0,
		  "offset + size = 2^64 - 4096");
	ut_assert_rc(block_rc(0, 1u << 30, UINT64_MAX - (1ull << 30) + 1, 1u << 30, 0),
		  -EBADMSG, "1 GiB page: offset + size = 2^64");

	/* Bitmap offset: 8-aligned. */
	static const uint64_t bad_bm[] = { 1, 4, 7, 12, 4100, 0x100000004ull };
	for (size_t i = 0; i < sizeof(bad_bm) / sizeof(bad_bm[0]); i++)
		ut_assert_rc(block_rc(0, 4096, 0, 4096, bad_bm[i]), -EBADMSG,
			  "bitmap offset %llu", (unsigned long long)bad_bm[i]);
	ut_assert_rc(block_rc(0, 4096, 0, 4096, 8), 0, "bitmap offset 8");
	ut_assert_rc(block_rc(0, 4096, 0, 4096, 4096 + 8), 0, "bitmap offset 4104");

	/* Index: at most 64 blocks. */
	ut_assert_rc(block_rc(63, 4096, 0, 4096, 0), 0, "index 63");
	ut_assert_rc(block_rc(64, 4096, 0, 4096, 0), -EBADMSG, "index 64");
	ut_assert_rc(block_rc(UINT32_MAX, 4096, 0, 4096, 0), -EBADMSG, "index ~0");
}

/* The BLOCK encoding of pc.ram with its 32 name bytes replaced. */
static int block_name_rc(const uint8_t name[OWNER_NAME_MAX])
{
	uint8_t buf[80];

	o_block_bytes(buf, 0, 4096, 0, 4096, 0);
	memcpy(buf + 48, name, OWNER_NAME_MAX);
	return odec(buf, 80, 1, NULL);
}

static void test_owner_block_names(void **state)
{
	uint8_t name[OWNER_NAME_MAX];
	(void)state;

	memset(name, 0, sizeof(name));
	ut_assert_rc(block_name_rc(name), -EBADMSG, "empty name");

	memset(name, 'a', sizeof(name));
	ut_assert_rc(block_name_rc(name), -EBADMSG, "32 chars, unterminated");

	memset(name, 0, sizeof(name));
	memset(name, 'a', 31);
	ut_assert_rc(block_name_rc(name), 0, "31 chars");

	static const uint8_t bad_chars[] = { 0x01, 0x09, 0x0a, 0x1f, 0x7f, 0x80, 0xc3, 0xff };
	for (size_t i = 0; i < sizeof(bad_chars); i++) {
		for (unsigned pos = 0; pos < 3; pos++) {
			memset(name, 0, sizeof(name));
			memcpy(name, "abc", 3);
			name[pos] = bad_chars[i];
			ut_assert_rc(block_name_rc(name), -EBADMSG,
				  "char 0x%02x at %u", bad_chars[i], pos);
		}
		memset(name, 0, sizeof(name));
		memset(name, 'z', 31);
		name[30] = bad_chars[i];
		ut_assert_rc(block_name_rc(name), -EBADMSG, "char 0x%02x at 30",
			  bad_chars[i]);
	}

	/* Every printable character is fine, at every position. */
	for (unsigned c = 0x20; c <= 0x7e; c++) {
		memset(name, 0, sizeof(name));
		memset(name, c, 1 + c % 31);
		ut_assert_rc(block_name_rc(name), 0, "char 0x%02x", c);
	}

	/* Garbage after the NUL, at every position after it. */
	for (unsigned pos = 2; pos < OWNER_NAME_MAX; pos++) {
		memset(name, 0, sizeof(name));
		name[0] = 'a';
		name[pos] = 'b';
		ut_assert_rc(block_name_rc(name), -EBADMSG, "garbage at %u", pos);
	}
	memset(name, 0, sizeof(name));
	memcpy(name, "pc.ram\0x", 8);
	ut_assert_rc(block_name_rc(name), -EBADMSG, "\"pc.ram\\0x\"");
	memset(name, 0, sizeof(name));
	name[0] = 'a';
	name[31] = 0x80;
	ut_assert_rc(block_name_rc(name), -EBADMSG, "high byte in the last slot");

	/* The decoded name is NUL terminated and equal. */
	struct owner_msg d;
	memset(name, 0, sizeof(name));
	memcpy(name, "ram-node0", 9);
	uint8_t buf[80];
	o_block_bytes(buf, 0, 4096, 0, 4096, 0);
	memcpy(buf + 48, name, sizeof(name));
	ut_assert_rc(odec(buf, 80, 1, &d), 0, "ram-node0");
	assert_string_equal(d.u.block.name, "ram-node0");
}

static int u32_msg_rc(unsigned type, uint32_t v)
{
	uint8_t buf[20];

	spec_hdr(buf, O_MAGIC, (uint16_t)type, 4);
	ut_st32(buf + 16, v);
	return odec(buf, 20, 0, NULL);
}

static int bitmap_rc(uint64_t size)
{
	uint8_t buf[24];

	spec_hdr(buf, O_MAGIC, 18, 8);
	ut_st64(buf + 16, size);
	return odec(buf, 24, 1, NULL);
}

static void test_owner_small_fields(void **state)
{
	(void)state;

	for (uint32_t p = 0; p <= 99; p++)
		ut_assert_rc(u32_msg_rc(3, p), 0, "throttle %u", p);
	ut_assert_rc(u32_msg_rc(3, 100), -EBADMSG, "throttle 100");
	ut_assert_rc(u32_msg_rc(3, 101), -EBADMSG, "throttle 101");
	ut_assert_rc(u32_msg_rc(3, UINT32_MAX), -EBADMSG, "throttle ~0");

	for (unsigned type = 5; type <= 7; type += 2) {
		ut_assert_rc(u32_msg_rc(type, 0), 0, "type %u error 0", type);
		ut_assert_rc(u32_msg_rc(type, 4095), 0, "type %u error 4095", type);
		ut_assert_rc(u32_msg_rc(type, 4096), -EBADMSG, "type %u error 4096", type);
		ut_assert_rc(u32_msg_rc(type, 0x80000000u), -EBADMSG, "type %u error 2^31",
			  type);
		ut_assert_rc(u32_msg_rc(type, UINT32_MAX), -EBADMSG, "type %u error -1", type);
	}

	ut_assert_rc(bitmap_rc(0), -EBADMSG, "bitmap size 0");
	ut_assert_rc(bitmap_rc(4), -EBADMSG, "bitmap size 4");
	ut_assert_rc(bitmap_rc(12), -EBADMSG, "bitmap size 12");
	ut_assert_rc(bitmap_rc(4097), -EBADMSG, "bitmap size 4097");
	ut_assert_rc(bitmap_rc(8), 0, "bitmap size 8");
	ut_assert_rc(bitmap_rc(4096), 0, "bitmap size 4096");
	ut_assert_rc(bitmap_rc(UINT64_MAX), -EBADMSG, "bitmap size ~0");

	/* SYNC and ROUND_READY accept any value. */
	struct owner_msg d;
	uint8_t buf[32];
	spec_hdr(buf, O_MAGIC, 19, 16);
	ut_st64(buf + 16, 0x1122334455667788ull);
	ut_st64(buf + 24, 0x99aabbccddeeff00ull);
	ut_assert_rc(odec(buf, 32, 0, &d), 0, "round ready");
	assert_int_equal(d.u.ready.round, 0x1122334455667788ull);
	assert_int_equal(d.u.ready.dirty_pages, 0x99aabbccddeeff00ull);
}

/* ---- owner: sockets ---- */

static void seqpacket_pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

/* The number the next received fd will get: the lowest free one. */
static int next_free_fd(void)
{
	int fd = dup(0 /* any open fd */);

	if (fd < 0)
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	close(fd);
	return fd;
}

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) != -1 || errno != EBADF;
}

static int make_memfd(size_t size, uint8_t fill)
{
	int fd = memfd_create("test-mig-proto", MFD_CLOEXEC);
	uint8_t page[4096];

	assert_true(fd >= 0);
	memset(page, fill, sizeof(page));
	for (size_t off = 0; off < size; off += sizeof(page))
		assert_int_equal(pwrite(fd, page, sizeof(page), (off_t)off), sizeof(page));
	return fd;
}

static void test_sock_block_fd(void **state)
{
	int sv[2], mfd, fd = -2;
	struct owner_msg m = o_block(2, 4096, 4096, 8192, 16, "pc.ram"), d;
	uint8_t page[4096];
	struct stat st;
	(void)state;

	seqpacket_pair(sv);
	mfd = make_memfd(3 * 4096, 0x5c);
	ut_assert_rc(owner_send(sv[0], &m, mfd), 0, "send block");
	memset(&d, 0, sizeof(d));
	ut_assert_rc(owner_recv(sv[1], 1000, &d, &fd), 0, "recv block");
	assert_owner_eq(&d, &m);
	assert_true(fd >= 0);
	assert_true(fd != mfd);

	/* The same memfd: size, contents, and writes show through. */
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 3 * 4096);
	assert_int_equal(pread(fd, page, sizeof(page), 4096), sizeof(page));
	for (size_t i = 0; i < sizeof(page); i++)
		assert_int_equal(page[i], 0x5c);
	uint8_t *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 4096);
	assert_true(p != MAP_FAILED);
	assert_int_equal(p[8191], 0x5c);
	p[0] = 0xa7;
	munmap(p, 8192);
	assert_int_equal(pread(mfd, page, 1, 4096), 1);
	assert_int_equal(page[0], 0xa7);
	close(fd);

	/* A BITMAP with its memfd. */
	int bfd = make_memfd(4096, 0);
	m = o_valid(OWNER_MSG_BITMAP, 0);
	m.u.bitmap_size = 4096;
	ut_assert_rc(owner_send(sv[0], &m, bfd), 0, "send bitmap");
	fd = -2;
	ut_assert_rc(owner_recv(sv[1], 1000, &d, &fd), 0, "recv bitmap");
	assert_int_equal(d.type, OWNER_MSG_BITMAP);
	assert_int_equal(d.u.bitmap_size, 4096);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 4096);
	close(fd);

	close(bfd);
	close(mfd);
	close(sv[0]);
	close(sv[1]);
}

static void test_sock_all_types(void **state)
{
	int sv[2], mfd;
	(void)state;

	seqpacket_pair(sv);
	mfd = make_memfd(4096, 1);
	for (size_t t = 0; t < sizeof(owner_types) / sizeof(owner_types[0]); t++) {
		for (unsigned variant = 0; variant < 3; variant++) {
			unsigned type = owner_types[t];
			struct owner_msg m = o_valid(type, variant), d;
			int fd = -2;

			ut_assert_rc(owner_send(sv[variant & 1], &m,
					     spec_owner_nfds(type) ? mfd : -1), 0,
				  "send type %u", type);
			ut_assert_rc(owner_recv(sv[!(variant & 1)], 1000, &d, &fd), 0,
				  "recv type %u", type);
			assert_owner_eq(&d, &m);
			if (spec_owner_nfds(type)) {
				assert_true(fd >= 0);
				close(fd);
			} else {
				assert_int_equal(fd, -1);
			}
		}
	}
	close(mfd);
	close(sv[0]);
	close(sv[1]);
}

static void test_sock_send_fd_mismatch(void **state)
{
	int sv[2], mfd, fd = -2, before;
	struct owner_msg m = o_valid(OWNER_MSG_SYNC, 0), d;
	(void)state;

	seqpacket_pair(sv);
	mfd = make_memfd(4096, 0);
	before = ut_count_fds();
	assert_true(owner_send(sv[0], &m, mfd) < 0);
	m = o_valid(OWNER_MSG_BLOCK, 0);
	assert_true(owner_send(sv[0], &m, -1) < 0);
	m = o_valid(OWNER_MSG_BITMAP, 0);
	assert_true(owner_send(sv[0], &m, -1) < 0);
	/* Nothing was sent. */
	ut_assert_rc(owner_recv(sv[1], 0, &d, &fd), -ETIMEDOUT, "nothing sent");
	assert_int_equal(fd, -1);
	assert_int_equal(ut_count_fds(), before);
	close(mfd);
	close(sv[0]);
	close(sv[1]);
}

/* Sends buf with nfds copies of a memfd; owner_recv must refuse and close. */
static void refuse_with_fds(const void *buf, size_t len, unsigned nfds,
			    int want, const char *what)
{
	int sv[2], mfd, fds[16], fd = -2, before, next;
	struct owner_msg d;

	seqpacket_pair(sv);
	mfd = make_memfd(4096, 0);
	for (unsigned i = 0; i < nfds; i++)
		fds[i] = mfd;
	before = ut_count_fds();
	next = next_free_fd();
	ut_send_raw(sv[0], buf, len, fds, nfds);
	memset(&d, 0, sizeof(d));
	ut_assert_rc(owner_recv(sv[1], 1000, &d, &fd), want, "%s", what);
	assert_int_equal(fd, -1);
	if (ut_count_fds() != before)
		fail_msg("%s: %d fds open after, %d before", what, ut_count_fds(), before);
	if (nfds && fd_open(next))
		fail_msg("%s: received fd %d left open", what, next);

	/* The socket still works. */
	struct owner_msg m = o_valid(OWNER_MSG_SYNC, 1);
	ut_assert_rc(owner_send(sv[0], &m, -1), 0, "%s: send after", what);
	ut_assert_rc(owner_recv(sv[1], 1000, &d, &fd), 0, "%s: recv after", what);
	assert_owner_eq(&d, &m);
	close(mfd);
	close(sv[0]);
	close(sv[1]);
}

static void test_sock_stray_fds(void **state)
{
	uint8_t buf[OWNER_MAX_MSG + 64];
	size_t len;
	struct owner_msg m;
	(void)state;

	/* A SYNC with an fd. */
	m = o_valid(OWNER_MSG_SYNC, 0);
	len = oenc(&m, buf);
	refuse_with_fds(buf, len, 1, -EBADMSG, "SYNC + 1 fd");
	refuse_with_fds(buf, len, 2, -EBADMSG, "SYNC + 2 fds");

	/* A BLOCK with 3, 2, 4, 6 and 16 fds. */
	m = o_valid(OWNER_MSG_BLOCK, 0);
	len = oenc(&m, buf);
	refuse_with_fds(buf, len, 3, -EBADMSG, "BLOCK + 3 fds");
	refuse_with_fds(buf, len, 2, -EBADMSG, "BLOCK + 2 fds");
	refuse_with_fds(buf, len, 4, -EBADMSG, "BLOCK + 4 fds");
	refuse_with_fds(buf, len, 6, -EBADMSG, "BLOCK + 6 fds");
	refuse_with_fds(buf, len, 16, -EBADMSG, "BLOCK + 16 fds");
	/* A BLOCK without its fd. */
	refuse_with_fds(buf, len, 0, -EBADMSG, "BLOCK + 0 fds");

	/* A malformed BLOCK with its one fd. */
	m = o_block(0, 3 * 4096, 0, 3 * 4096, 0, "pc.ram");
	len = oenc(&m, buf);
	refuse_with_fds(buf, len, 1, -EBADMSG, "bad BLOCK + 1 fd");

	/* A HELLO version 2 with an fd: refused either way, fd closed. */
	m = o_valid(OWNER_MSG_HELLO, 0);
	m.u.hello.version = 2;
	len = oenc(&m, buf);
	refuse_with_fds(buf, len, 1, -EBADMSG, "HELLO v2 + 1 fd");
	refuse_with_fds(buf, len, 0, -EPROTONOSUPPORT, "HELLO v2");

	/* Garbage with an fd. */
	memset(buf, 0x41, 40);
	refuse_with_fds(buf, 40, 1, -EBADMSG, "garbage + 1 fd");
}

static void test_sock_oversize(void **state)
{
	uint8_t buf[OWNER_MAX_MSG + 64];
	(void)state;

	/* A valid SYNC header, then far too many bytes. */
	memset(buf, 0, sizeof(buf));
	spec_hdr(buf, O_MAGIC, 2, 8);
	refuse_with_fds(buf, OWNER_MAX_MSG + 1, 0, -EBADMSG, "257 bytes");
	refuse_with_fds(buf, sizeof(buf), 0, -EBADMSG, "320 bytes");
	refuse_with_fds(buf, OWNER_MAX_MSG + 1, 1, -EBADMSG, "257 bytes + fd");

	/* A long packet whose first 256 bytes would be a valid message. */
	memset(buf, 0, sizeof(buf));
	spec_hdr(buf, O_MAGIC, 2, OWNER_MAX_MSG - 16);
	refuse_with_fds(buf, OWNER_MAX_MSG + 8, 0, -EBADMSG, "264 bytes");

	/* Exactly OWNER_MAX_MSG: not truncated, but no message is that long. */
	memset(buf, 0, sizeof(buf));
	spec_hdr(buf, O_MAGIC, 2, 8);
	refuse_with_fds(buf, OWNER_MAX_MSG, 0, -EBADMSG, "256 bytes");
	/* Short packets. */
	refuse_with_fds(buf, 15, 0, -EBADMSG, "15 bytes");
	refuse_with_fds(buf, 1, 0, -EBADMSG, "1 byte");
}

static void test_sock_empty_packet(void **state)
{
	int sv[2], mfd, fd = -2, before, next, r;
	struct owner_msg d;
	(void)state;

	/*
	 * A zero-length packet from a live peer cannot be told apart from
	 * end-of-file by recvmsg(); whatever owner_recv() calls it, it must
	 * fail and close an fd that came with it.
	 */
	seqpacket_pair(sv);
	mfd = make_memfd(4096, 0);
	before = ut_count_fds();
	next = next_free_fd();
	ut_send_raw(sv[0], "", 0, &mfd, 1);
	r = owner_recv(sv[1], 1000, &d, &fd);
	assert_true(r == -EBADMSG || r == -ECONNRESET);
	assert_int_equal(fd, -1);
	assert_false(fd_open(next));
	assert_int_equal(ut_count_fds(), before);
	close(mfd);
	close(sv[0]);
	close(sv[1]);
}

static void test_sock_closed_peer(void **state)
{
	int sv[2], fd = -2;
	struct owner_msg m = o_valid(OWNER_MSG_STOP, 0), d;
	(void)state;

	seqpacket_pair(sv);
	close(sv[0]);
	ut_assert_rc(owner_recv(sv[1], 1000, &d, &fd), -ECONNRESET, "closed peer");
	assert_int_equal(fd, -1);
	/* Sending to it: an error, and no SIGPIPE to kill us. */
	ut_assert_rc(owner_send(sv[1], &m, -1), -ECONNRESET, "send to closed peer");
	close(sv[1]);

	/* A queued message is still delivered, then the close. */
	seqpacket_pair(sv);
	m = o_valid(OWNER_MSG_ROUND_READY, 1);
	ut_assert_rc(owner_send(sv[0], &m, -1), 0, "send");
	close(sv[0]);
	ut_assert_rc(owner_recv(sv[1], 1000, &d, &fd), 0, "queued message");
	assert_owner_eq(&d, &m);
	ut_assert_rc(owner_recv(sv[1], 1000, &d, &fd), -ECONNRESET, "then closed");
	ut_assert_rc(owner_recv(sv[1], -1, &d, &fd), -ECONNRESET, "still closed");
	close(sv[1]);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_sock_timeout(void **state)
{
	int sv[2], fd = -2;
	struct owner_msg d;
	uint64_t t0, dt;
	(void)state;

	seqpacket_pair(sv);
	t0 = mono_ms();
	ut_assert_rc(owner_recv(sv[1], 150, &d, &fd), -ETIMEDOUT, "150 ms");
	dt = mono_ms() - t0;
	assert_int_equal(fd, -1);
	assert_true(dt >= 140);
	assert_true(dt < 5000);

	fd = -2;
	t0 = mono_ms();
	ut_assert_rc(owner_recv(sv[1], 0, &d, &fd), -ETIMEDOUT, "0 ms");
	assert_true(mono_ms() - t0 < 1000);
	assert_int_equal(fd, -1);

	/* A message that is there does not wait for the timeout. */
	struct owner_msg m = o_valid(OWNER_MSG_STOPPED, 0);
	ut_assert_rc(owner_send(sv[0], &m, -1), 0, "send");
	ut_assert_rc(owner_recv(sv[1], 0, &d, &fd), 0, "ready message, 0 ms");
	assert_int_equal(d.type, OWNER_MSG_STOPPED);
	close(sv[0]);
	close(sv[1]);
}

/* ---- the peer protocol ---- */

static long spec_peer_plen(unsigned type, uint32_t nblocks)
{
	switch (type) {
	case 1: return 16;  /* LAYOUT */
	case 2: return 48;  /* BLOCK */
	case 3: return 40;  /* REGION */
	case 4: return 16;  /* PROGRESS */
	case 5: return 24;  /* DONE */
	case 6: return 8 + 8 * (long)nblocks; /* HASHES */
	case 7: case 8: case 9: return 0; /* READY, COMMIT, COMMITTED */
	case 10: return 4;  /* FAIL */
	case 11: return 8;  /* HANDOFF */
	case 12: return 4;  /* RESULT */
	case 13: return 8 + 16 * (long)nblocks; /* PAGES: nblocks is its run count */
	case 14: return 8;  /* ROUND_END */
	case 15: return 16; /* ROUND_LANDED */
	default: return -1;
	}
}

static size_t penc(const struct peer_msg *m, uint8_t buf[PEER_MAX_MSG])
{
	memset(buf, 0xee, PEER_MAX_MSG);
	return peer_msg_encode(m, buf);
}

static struct peer_msg p_valid(unsigned type, unsigned variant)
{
	struct peer_msg m;

	memset(&m, 0, sizeof(m));
	m.type = (enum peer_msg_type)type;
	switch (type) {
	case PEER_MSG_LAYOUT:
		m.u.layout.version = variant == 2 ? 2 : 1;
		m.u.layout.nblocks = variant ? 64 : 1;
		m.u.layout.flags = (variant & 1 ? PEER_FLAG_VERIFY : 0) |
				   (variant == 2 ? PEER_FLAG_HANDOFF : 0);
		break;
	case PEER_MSG_BLOCK:
		m.u.block.index = variant ? 63 : 0;
		m.u.block.page_size = variant ? 1u << 30 : 4096;
		m.u.block.size = variant ? 16 * TiB : 4096;
		snprintf(m.u.block.name, sizeof(m.u.block.name), "%s",
			 variant ? "0123456789abcdefghijklmnopqrstu" : "pc.ram");
		break;
	case PEER_MSG_REGION:
		m.u.region.index = variant ? 63 : 0;
		for (unsigned i = 0; i < XPORT_REGION_DESC_SIZE; i++)
			m.u.region.desc[i] = (uint8_t)(variant ? 0xff - i : i * 7);
		break;
	case PEER_MSG_PROGRESS:
		m.u.progress.round = variant ? UINT64_MAX : 1;
		m.u.progress.bytes = variant ? UINT64_MAX - 7 : 123456789;
		break;
	case PEER_MSG_DONE:
		m.u.done.channel = variant ? 15 : 0;
		m.u.done.rounds = variant ? UINT64_MAX : 7;
		m.u.done.bytes = variant ? 1ull << 63 : 4096;
		break;
	case PEER_MSG_HASHES:
		m.u.hashes.nblocks = variant == 0 ? 1 : variant == 1 ? 64 : 2;
		for (unsigned i = 0; i < m.u.hashes.nblocks; i++)
			m.u.hashes.hash[i] = (0x0123456789abcdefull * (i + 1)) ^ variant;
		break;
	case PEER_MSG_FAIL:
	case PEER_MSG_RESULT:
		m.u.error = variant == 0 ? 0 : variant == 1 ? 4095 : ENOSPC;
		break;
	case PEER_MSG_HANDOFF:
		m.u.port = variant == 0 ? 1 : variant == 1 ? 65535 : 4445;
		break;
	case PEER_MSG_ROUND_END:
		m.u.round.round = variant == 1 ? UINT32_MAX : variant;
		m.u.round.channel = variant == 1 ? 15 : 0;
		break;
	case PEER_MSG_ROUND_LANDED:
		m.u.round.round = variant == 1 ? UINT32_MAX : variant;
		m.u.round.sweep_ms = variant == 1 ? UINT32_MAX : 17 * variant;
		m.u.round.unchecked = variant == 1 ? UINT64_MAX : 4096 * variant;
		break;
	case PEER_MSG_PAGES:
		m.u.pages.round = variant == 1 ? UINT32_MAX : variant;
		m.u.pages.nruns = variant == 0 ? 1 : variant == 1 ? PEER_MAX_RUNS : 3;
		for (unsigned i = 0; i < m.u.pages.nruns; i++)
			m.u.pages.run[i] = (struct peer_run){
				.block = variant == 1 ? 63 : i, .count = variant == 1 ? UINT32_MAX : 1,
				.first = variant == 1 ? UINT64_MAX - UINT32_MAX : 256 * i };
		break;
	default:
		break;
	}
	return m;
}

static void assert_peer_eq(const struct peer_msg *a, const struct peer_msg *b)
{
	assert_int_equal(a->type, b->type);
	switch (a->type) {
	case PEER_MSG_LAYOUT:
		assert_int_equal(a->u.layout.version, b->u.layout.version);
		assert_int_equal(a->u.layout.nblocks, b->u.layout.nblocks);
		assert_int_equal(a->u.layout.flags, b->u.layout.flags);
		break;
	case PEER_MSG_BLOCK:
		assert_int_equal(a->u.block.index, b->u.block.index);
		assert_int_equal(a->u.block.page_size, b->u.block.page_size);
		assert_int_equal(a->u.block.size, b->u.block.size);
		assert_memory_equal(a->u.block.name, b->u.block.name, OWNER_NAME_MAX);
		break;
	case PEER_MSG_REGION:
		assert_int_equal(a->u.region.index, b->u.region.index);
		assert_memory_equal(a->u.region.desc, b->u.region.desc,
				    XPORT_REGION_DESC_SIZE);
		break;
	case PEER_MSG_PROGRESS:
		assert_int_equal(a->u.progress.round, b->u.progress.round);
		assert_int_equal(a->u.progress.bytes, b->u.progress.bytes);
		break;
	case PEER_MSG_DONE:
		assert_int_equal(a->u.done.channel, b->u.done.channel);
		assert_int_equal(a->u.done.rounds, b->u.done.rounds);
		assert_int_equal(a->u.done.bytes, b->u.done.bytes);
		break;
	case PEER_MSG_HASHES:
		assert_int_equal(a->u.hashes.nblocks, b->u.hashes.nblocks);
		for (unsigned i = 0; i < a->u.hashes.nblocks; i++)
			assert_int_equal(a->u.hashes.hash[i], b->u.hashes.hash[i]);
		break;
	case PEER_MSG_FAIL:
	case PEER_MSG_RESULT:
		assert_int_equal(a->u.error, b->u.error);
		break;
	case PEER_MSG_HANDOFF:
		assert_int_equal(a->u.port, b->u.port);
		break;
	case PEER_MSG_ROUND_END:
	case PEER_MSG_ROUND_LANDED:
		assert_int_equal(a->u.round.round, b->u.round.round);
		assert_int_equal(a->u.round.channel, b->u.round.channel);
		assert_int_equal(a->u.round.sweep_ms, b->u.round.sweep_ms);
		assert_int_equal(a->u.round.unchecked, b->u.round.unchecked);
		break;
	case PEER_MSG_PAGES:
		assert_int_equal(a->u.pages.round, b->u.pages.round);
		assert_int_equal(a->u.pages.nruns, b->u.pages.nruns);
		assert_memory_equal(a->u.pages.run, b->u.pages.run,
				    a->u.pages.nruns * sizeof(struct peer_run));
		break;
	default:
		break;
	}
}

static void test_peer_golden(void **state)
{
	static const uint8_t layout[32] = {
		'V', 'M', 'P', 'R', 0x01, 0x00, 0x00, 0x00,
		0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x01, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
		0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	struct peer_msg m, d;
	uint8_t buf[PEER_MAX_MSG], want[PEER_MAX_MSG];
	(void)state;

	memset(&m, 0, sizeof(m));
	m.type = PEER_MSG_LAYOUT;
	m.u.layout.version = 1;
	m.u.layout.nblocks = 3;
	m.u.layout.flags = PEER_FLAG_VERIFY;
	assert_int_equal(penc(&m, buf), 32);
	assert_memory_equal(buf, layout, 32);
	ut_assert_rc(pdec(layout, 32, &d), 0, "golden layout");
	assert_peer_eq(&d, &m);

	memset(&m, 0, sizeof(m));
	m.type = PEER_MSG_HASHES;
	m.u.hashes.nblocks = 2;
	m.u.hashes.hash[0] = 0x1111111122222222ull;
	m.u.hashes.hash[1] = 0x0102030405060708ull;
	assert_int_equal(penc(&m, buf), 40);
	spec_hdr(want, P_MAGIC, 6, 24);
	ut_st32(want + 16, 2);
	ut_st32(want + 20, 0);
	ut_st64(want + 24, 0x1111111122222222ull);
	ut_st64(want + 32, 0x0102030405060708ull);
	assert_memory_equal(buf, want, 40);

	memset(&m, 0, sizeof(m));
	m.type = PEER_MSG_DONE;
	m.u.done.channel = 3;
	m.u.done.rounds = 9;
	m.u.done.bytes = 0xabcdef;
	assert_int_equal(penc(&m, buf), 40);
	spec_hdr(want, P_MAGIC, 5, 24);
	ut_st32(want + 16, 3);
	ut_st32(want + 20, 0);
	ut_st64(want + 24, 9);
	ut_st64(want + 32, 0xabcdef);
	assert_memory_equal(buf, want, 40);

	memset(&m, 0, sizeof(m));
	m.type = PEER_MSG_BLOCK;
	m.u.block.index = 1;
	m.u.block.page_size = 2 * MiB;
	m.u.block.size = 8 * GiB;
	strcpy(m.u.block.name, "pc.ram");
	assert_int_equal(penc(&m, buf), 64);
	spec_hdr(want, P_MAGIC, 2, 48);
	ut_st32(want + 16, 1);
	ut_st32(want + 20, 2 * MiB);
	ut_st64(want + 24, 8 * GiB);
	memset(want + 32, 0, 32);
	memcpy(want + 32, "pc.ram", 6);
	assert_memory_equal(buf, want, 64);
}

static const unsigned peer_types[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };

/* What spec_peer_plen() takes for m: HASHES' blocks, PAGES' runs. */
static uint32_t p_count(const struct peer_msg *m)
{
	return m->type == PEER_MSG_PAGES ? m->u.pages.nruns : m->u.hashes.nblocks;
}

static void test_peer_roundtrip(void **state)
{
	(void)state;

	for (size_t t = 0; t < sizeof(peer_types) / sizeof(peer_types[0]); t++) {
		for (unsigned variant = 0; variant < 3; variant++) {
			unsigned type = peer_types[t];
			struct peer_msg m = p_valid(type, variant), d;
			uint8_t buf[PEER_MAX_MSG], again[PEER_MAX_MSG];
			size_t len = penc(&m, buf);

			assert_int_equal(len, 16 + (size_t)spec_peer_plen(type, p_count(&m)));
			assert_true(len <= PEER_MAX_MSG);
			assert_spec_hdr(buf, P_MAGIC, type, len - 16);
			memset(&d, 0xa5, sizeof(d));
			ut_assert_rc(pdec(buf, len, &d), 0, "type %u variant %u", type,
				  variant);
			assert_peer_eq(&d, &m);
			assert_int_equal(penc(&d, again), len);
			assert_memory_equal(again, buf, len);
		}
	}

	/* HASHES with every block count. */
	for (uint32_t n = 1; n <= 64; n++) {
		struct peer_msg m, d;
		uint8_t buf[PEER_MAX_MSG];
		size_t len;

		memset(&m, 0, sizeof(m));
		m.type = PEER_MSG_HASHES;
		m.u.hashes.nblocks = n;
		for (uint32_t i = 0; i < n; i++)
			m.u.hashes.hash[i] = ~(uint64_t)i * 0x9e3779b97f4a7c15ull;
		len = penc(&m, buf);
		assert_int_equal(len, 24 + 8 * n);
		ut_assert_rc(pdec(buf, len, &d), 0, "hashes %u", n);
		assert_peer_eq(&d, &m);
	}
}

static void test_peer_header(void **state)
{
	(void)state;

	for (size_t t = 0; t < sizeof(peer_types) / sizeof(peer_types[0]); t++) {
		unsigned type = peer_types[t];
		struct peer_msg m = p_valid(type, 0);
		uint8_t buf[PEER_MAX_MSG + 8];
		size_t len;

		/* Truncated header. */
		for (size_t l = 0; l < 16; l++) {
			len = penc(&m, buf);
			ut_assert_rc(pdec(buf, l, NULL), -EBADMSG, "type %u, %zu bytes",
				  type, l);
		}
		/* Magic. */
		for (unsigned i = 0; i < 4; i++) {
			len = penc(&m, buf);
			buf[i] ^= 0x20;
			ut_assert_rc(pdec(buf, len, NULL), -EBADMSG, "type %u magic %u",
				  type, i);
		}
		len = penc(&m, buf);
		ut_st32(buf, O_MAGIC);
		ut_assert_rc(pdec(buf, len, NULL), -EBADMSG, "type %u owner magic", type);
		/* Reserved header bytes. */
		static const unsigned offs[] = { 6, 7, 12, 13, 14, 15 };
		for (unsigned i = 0; i < 6; i++) {
			len = penc(&m, buf);
			buf[offs[i]] = 1;
			ut_assert_rc(pdec(buf, len, NULL), -EBADMSG, "type %u byte %u",
				  type, offs[i]);
		}
		/* Length: trailing byte, one short, declared +-1. */
		memset(buf, 0, sizeof(buf));
		len = penc(&m, buf);
		ut_assert_rc(pdec(buf, len + 1, NULL), -EBADMSG, "type %u + 1 byte", type);
		if (len > 16)
			ut_assert_rc(pdec(buf, len - 1, NULL), -EBADMSG, "type %u - 1 byte",
				  type);
		ut_st32(buf + 8, (uint32_t)(len - 16 + 1));
		ut_assert_rc(pdec(buf, len + 1, NULL), -EBADMSG, "type %u declared + 1",
			  type);
		ut_assert_rc(pdec(buf, len, NULL), -EBADMSG, "type %u declared > actual",
			  type);
		if (len > 16) {
			ut_st32(buf + 8, (uint32_t)(len - 16 - 1));
			ut_assert_rc(pdec(buf, len - 1, NULL), -EBADMSG,
				  "type %u declared - 1", type);
			ut_assert_rc(pdec(buf, len, NULL), -EBADMSG,
				  "type %u declared < actual", type);
		}
		ut_st32(buf + 8, UINT32_MAX);
		ut_assert_rc(pdec(buf, len, NULL), -EBADMSG, "type %u declared ~0", type);
	}
	ut_assert_rc(peer_msg_decode(NULL, 0, &(struct peer_msg){ 0 }), -EBADMSG, "NULL");
	ut_assert_rc(peer_msg_decode(NULL, 32, &(struct peer_msg){ 0 }), -EBADMSG,
		  "NULL, 32");

	/* Unknown types. */
	static const unsigned unknown[] = { 0, 16, 17, 18, 0x100, 0x8001, 0xffff };
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		for (unsigned plen = 0; plen <= 48; plen += 8) {
			uint8_t buf[64] = { 0 };

			spec_hdr(buf, P_MAGIC, (uint16_t)unknown[i], plen);
			ut_assert_rc(pdec(buf, 16 + plen, NULL), -EBADMSG,
				  "type %u plen %u", unknown[i], plen);
		}
	}
}

/* A HASHES of our own making: declared nblocks n, payload for `have` blocks. */
static int hashes_rc(uint32_t n, uint32_t have, uint32_t declared_plen,
		     uint32_t reserved)
{
	uint8_t buf[16 + 8 + 8 * 80];
	size_t len = 16 + 8 + 8 * (size_t)have;

	assert_true(have <= 80);
	memset(buf, 0x3c, sizeof(buf));
	spec_hdr(buf, P_MAGIC, 6, declared_plen);
	ut_st32(buf + 16, n);
	ut_st32(buf + 20, reserved);
	return pdec(buf, len, NULL);
}

static void test_peer_hashes(void **state)
{
	(void)state;

	ut_assert_rc(hashes_rc(1, 1, 16, 0), 0, "1 block");
	ut_assert_rc(hashes_rc(64, 64, 520, 0), 0, "64 blocks");
	ut_assert_rc(hashes_rc(0, 0, 8, 0), -EBADMSG, "0 blocks");
	ut_assert_rc(hashes_rc(65, 65, 528, 0), -EBADMSG, "65 blocks");
	ut_assert_rc(hashes_rc(UINT32_MAX, 1, 16, 0), -EBADMSG, "~0 blocks");
	ut_assert_rc(hashes_rc(0x20000001u, 1, 16, 0), -EBADMSG,
		  "nblocks whose 8*n wraps to 8");
	ut_assert_rc(hashes_rc(2, 1, 16, 0), -EBADMSG, "2 declared, 1 sent");
	ut_assert_rc(hashes_rc(2, 1, 24, 0), -EBADMSG, "2 declared, length for 2, 1 sent");
	ut_assert_rc(hashes_rc(1, 2, 24, 0), -EBADMSG, "1 declared, 2 sent");
	ut_assert_rc(hashes_rc(1, 2, 16, 0), -EBADMSG, "1 declared, trailing 8");
	ut_assert_rc(hashes_rc(1, 1, 24, 0), -EBADMSG, "length field 24");
	ut_assert_rc(hashes_rc(1, 1, 16, 1), -EBADMSG, "reserved 1");
	ut_assert_rc(hashes_rc(1, 1, 16, 0x80000000u), -EBADMSG, "reserved 2^31");

	/* Too short to hold nblocks. */
	for (size_t len = 16; len < 24; len++) {
		uint8_t buf[24] = { 0 };

		spec_hdr(buf, P_MAGIC, 6, 8);
		ut_st32(buf + 16, 1);
		ut_assert_rc(pdec(buf, len, NULL), -EBADMSG, "hashes, %zu bytes", len);
	}
}

/* PAGES (type 13): the golden bytes, both limits of the run count, and
 * each field a decoder must refuse. */
static int pages_rc(uint32_t nruns_field, uint32_t nruns_sent, uint32_t block, uint32_t count,
		    uint64_t first)
{
	uint8_t buf[16 + 8 + 16 * 122] = { 0 };
	uint32_t plen = 8 + 16 * nruns_sent;

	spec_hdr(buf, P_MAGIC, 13, plen);
	ut_st32(buf + 16, 7);
	ut_st32(buf + 20, nruns_field);
	for (uint32_t i = 0; i < nruns_sent; i++) {
		ut_st32(buf + 24 + 16 * i, block);
		ut_st32(buf + 28 + 16 * i, count);
		ut_st64(buf + 32 + 16 * i, first + i);
	}
	return pdec(buf, 16 + plen, NULL);
}

static void test_peer_pages(void **state)
{
	struct peer_msg m = { .type = PEER_MSG_PAGES }, d;
	uint8_t buf[PEER_MAX_MSG], want[56];
	(void)state;

	m.u.pages.round = 3;
	m.u.pages.nruns = 2;
	m.u.pages.run[0] = (struct peer_run){ .block = 1, .count = 256, .first = 0x100000000ull };
	m.u.pages.run[1] = (struct peer_run){ .block = 63, .count = 1, .first = 5 };
	assert_int_equal(penc(&m, buf), 56);
	spec_hdr(want, P_MAGIC, 13, 40);
	ut_st32(want + 16, 3);
	ut_st32(want + 20, 2);
	ut_st32(want + 24, 1);
	ut_st32(want + 28, 256);
	ut_st64(want + 32, 0x100000000ull);
	ut_st32(want + 40, 63);
	ut_st32(want + 44, 1);
	ut_st64(want + 48, 5);
	assert_memory_equal(buf, want, 56);
	ut_assert_rc(pdec(want, 56, &d), 0, "golden pages");
	assert_int_equal(d.u.pages.round, 3);
	assert_int_equal(d.u.pages.nruns, 2);
	assert_memory_equal(d.u.pages.run, m.u.pages.run, 2 * sizeof(struct peer_run));

	/* The most a message holds, and it fits the buffers. */
	m.u.pages.nruns = PEER_MAX_RUNS;
	for (uint32_t i = 0; i < PEER_MAX_RUNS; i++)
		m.u.pages.run[i] = (struct peer_run){ .block = i % 64, .count = i + 1, .first = i };
	assert_int_equal(penc(&m, buf), PEER_MAX_MSG);
	ut_assert_rc(pdec(buf, PEER_MAX_MSG, &d), 0, "pages, %u runs", PEER_MAX_RUNS);
	assert_memory_equal(d.u.pages.run, m.u.pages.run, PEER_MAX_RUNS * sizeof(struct peer_run));

	ut_assert_rc(pages_rc(1, 1, 0, 1, 0), 0, "1 run");
	ut_assert_rc(pages_rc(0, 0, 0, 1, 0), -EBADMSG, "0 runs");
	ut_assert_rc(pages_rc(121, 121, 0, 1, 0), -EBADMSG, "121 runs");
	ut_assert_rc(pages_rc(UINT32_MAX, 1, 0, 1, 0), -EBADMSG, "~0 runs");
	ut_assert_rc(pages_rc(2, 1, 0, 1, 0), -EBADMSG, "2 declared, 1 sent");
	ut_assert_rc(pages_rc(1, 2, 0, 1, 0), -EBADMSG, "1 declared, 2 sent");
	ut_assert_rc(pages_rc(1, 1, 0, 0, 0), -EBADMSG, "a run of 0 granules");
	ut_assert_rc(pages_rc(1, 1, 64, 1, 0), -EBADMSG, "block 64");
	ut_assert_rc(pages_rc(1, 1, 0, 2, UINT64_MAX - 1), -EBADMSG, "a run past 2^64");
	ut_assert_rc(pages_rc(1, 1, 0, 1, UINT64_MAX - 1), 0, "a run up to 2^64");
	for (size_t len = 16; len < 24; len++) {
		uint8_t b[24] = { 0 };

		spec_hdr(b, P_MAGIC, 13, 8);
		ut_st32(b + 20, 1);
		ut_assert_rc(pdec(b, len, NULL), -EBADMSG, "pages, %zu bytes", len);
	}
}

static int layout_rc(uint32_t version, uint32_t nblocks, uint32_t flags,
		     uint32_t zero)
{
	uint8_t buf[32];

	spec_hdr(buf, P_MAGIC, 1, 16);
	ut_st32(buf + 16, version);
	ut_st32(buf + 20, nblocks);
	ut_st32(buf + 24, flags);
	ut_st32(buf + 28, zero);
	return pdec(buf, 32, NULL);
}

/* A BLOCK of our own making with exactly these 32 name bytes. */
static int pblock_bytes_rc(uint32_t index, uint32_t page, uint64_t size,
			   const uint8_t name[OWNER_NAME_MAX])
{
	uint8_t buf[64];

	spec_hdr(buf, P_MAGIC, 2, 48);
	ut_st32(buf + 16, index);
	ut_st32(buf + 20, page);
	ut_st64(buf + 24, size);
	memcpy(buf + 32, name, OWNER_NAME_MAX);
	return pdec(buf, 64, NULL);
}

/* The same with name zero padded (cut at 32 bytes, so not always terminated). */
static int pblock_rc(uint32_t index, uint32_t page, uint64_t size, const char *name)
{
	uint8_t field[OWNER_NAME_MAX] = { 0 };

	memcpy(field, name, strnlen(name, OWNER_NAME_MAX));
	return pblock_bytes_rc(index, page, size, field);
}

static int u32_peer_rc(unsigned type, uint32_t a, uint32_t b, size_t plen)
{
	uint8_t buf[64];

	memset(buf, 0, sizeof(buf));
	spec_hdr(buf, P_MAGIC, (uint16_t)type, (uint32_t)plen);
	ut_st32(buf + 16, a);
	if (plen >= 8)
		ut_st32(buf + 20, b);
	return pdec(buf, 16 + plen, NULL);
}

static void test_peer_fields(void **state)
{
	(void)state;

	/* LAYOUT */
	ut_assert_rc(layout_rc(1, 1, 0, 0), 0, "layout");
	ut_assert_rc(layout_rc(1, 64, 1, 0), 0, "layout 64 verify");
	ut_assert_rc(layout_rc(3, 1, 0, 0), -EPROTONOSUPPORT, "layout v3");
	ut_assert_rc(layout_rc(2, 1, 2, 0), 0, "layout v2 hand-off");
	ut_assert_rc(layout_rc(2, 1, 3, 0), 0, "layout v2 hand-off, verify");
	ut_assert_rc(layout_rc(2, 1, 0, 0), -EBADMSG, "layout v2 without hand-off");
	ut_assert_rc(layout_rc(2, 1, 1, 0), -EBADMSG, "layout v2 verify, no hand-off");
	ut_assert_rc(layout_rc(0, 1, 0, 0), -EPROTONOSUPPORT, "layout v0");
	ut_assert_rc(layout_rc(UINT32_MAX, 1, 0, 0), -EPROTONOSUPPORT, "layout v~0");
	ut_assert_rc(layout_rc(1, 0, 0, 0), -EBADMSG, "layout 0 blocks");
	ut_assert_rc(layout_rc(1, 65, 0, 0), -EBADMSG, "layout 65 blocks");
	ut_assert_rc(layout_rc(1, 1, 2, 0), -EBADMSG, "layout v1 with hand-off");
	ut_assert_rc(layout_rc(1, 1, 3, 0), -EBADMSG, "layout v1 verify, hand-off");
	ut_assert_rc(layout_rc(1, 1, 4, 0), 0, "layout verify pages");
	ut_assert_rc(layout_rc(2, 1, 6, 0), 0, "layout v2 hand-off, verify pages");
	ut_assert_rc(layout_rc(1, 1, 5, 0), -EBADMSG, "layout both ways of verifying");
	ut_assert_rc(layout_rc(1, 1, 8, 0), 0, "layout round landed");
	ut_assert_rc(layout_rc(2, 1, 14, 0), 0, "layout v2, verify pages, round landed");
	ut_assert_rc(layout_rc(1, 1, 16, 0), -EBADMSG, "layout flags 16");
	ut_assert_rc(layout_rc(1, 1, 7, 0), -EBADMSG, "layout flags 7");
	ut_assert_rc(layout_rc(1, 1, 0x80000000u, 0), -EBADMSG, "layout flags 2^31");
	ut_assert_rc(layout_rc(1, 1, 0, 1), -EBADMSG, "layout reserved");

	/* ROUND_END, ROUND_LANDED */
	ut_assert_rc(u32_peer_rc(14, 9, 15, 8), 0, "round end, channel 15");
	ut_assert_rc(u32_peer_rc(14, 9, 16, 8), -EBADMSG, "round end, channel 16");
	ut_assert_rc(u32_peer_rc(14, 9, 0, 4), -EBADMSG, "round end, 4 bytes");
	ut_assert_rc(u32_peer_rc(15, UINT32_MAX, UINT32_MAX, 16), 0, "round landed");
	ut_assert_rc(u32_peer_rc(15, 9, 1, 8), -EBADMSG, "round landed, 8 bytes");

	/* BLOCK */
	ut_assert_rc(pblock_rc(0, 4096, 4096, "pc.ram"), 0, "block");
	ut_assert_rc(pblock_rc(63, 1u << 30, 16 * TiB, "x"), 0, "block max");
	ut_assert_rc(pblock_rc(64, 4096, 4096, "pc.ram"), -EBADMSG, "block index 64");
	static const uint32_t bad_pages[] = { 0, 2048, 4095, 4097, 12288, 1u << 31,
					      UINT32_MAX };
	for (size_t i = 0; i < sizeof(bad_pages) / sizeof(bad_pages[0]); i++)
		ut_assert_rc(pblock_rc(0, bad_pages[i], 12 * GiB, "pc.ram"), -EBADMSG,
			  "block page %u", bad_pages[i]);
	ut_assert_rc(pblock_rc(0, 4096, 0, "pc.ram"), -EBADMSG, "block size 0");
	ut_assert_rc(pblock_rc(0, 4096, 6144, "pc.ram"), -EBADMSG, "block size 6144");
	ut_assert_rc(pblock_rc(0, 2 * MiB, 4096, "pc.ram"), -EBADMSG, "block size < page");
	ut_assert_rc(pblock_rc(0, 4096, 16 * TiB + 4096, "pc.ram"), -EBADMSG,
		  "block size > 16 TiB");
	ut_assert_rc(pblock_rc(0, 4096, 4096, ""), -EBADMSG, "block name empty");
	ut_assert_rc(pblock_rc(0, 4096, 4096, "0123456789abcdef0123456789abcdef"),
		  -EBADMSG, "block name unterminated");
	ut_assert_rc(pblock_rc(0, 4096, 4096, "pc\x01ram"), -EBADMSG, "block name \\x01");
	ut_assert_rc(pblock_rc(0, 4096, 4096, "pc\x7fram"), -EBADMSG, "block name \\x7f");
	ut_assert_rc(pblock_rc(0, 4096, 4096, "pc\xe9ram"), -EBADMSG, "block name \\xe9");
	static const uint8_t garbage_after_nul[OWNER_NAME_MAX] = "ram\0z";
	static const uint8_t garbage_at_31[OWNER_NAME_MAX] = { 'r', 'a', 'm', [31] = 1 };
	ut_assert_rc(pblock_bytes_rc(0, 4096, 4096, garbage_after_nul), -EBADMSG,
		     "block name garbage after NUL");
	ut_assert_rc(pblock_bytes_rc(0, 4096, 4096, garbage_at_31), -EBADMSG,
		     "block name garbage at 31");

	/* REGION */
	ut_assert_rc(u32_peer_rc(3, 63, 0, 40), 0, "region 63");
	ut_assert_rc(u32_peer_rc(3, 64, 0, 40), -EBADMSG, "region 64");
	ut_assert_rc(u32_peer_rc(3, UINT32_MAX, 0, 40), -EBADMSG, "region ~0");
	ut_assert_rc(u32_peer_rc(3, 0, 1, 40), -EBADMSG, "region reserved");

	/* DONE */
	ut_assert_rc(u32_peer_rc(5, 15, 0, 24), 0, "done channel 15");
	ut_assert_rc(u32_peer_rc(5, 16, 0, 24), -EBADMSG, "done channel 16");
	ut_assert_rc(u32_peer_rc(5, UINT32_MAX, 0, 24), -EBADMSG, "done channel ~0");
	ut_assert_rc(u32_peer_rc(5, 0, 1, 24), -EBADMSG, "done reserved");

	/* FAIL */
	ut_assert_rc(u32_peer_rc(10, 0, 0, 4), 0, "fail 0");
	ut_assert_rc(u32_peer_rc(10, 4095, 0, 4), 0, "fail 4095");
	ut_assert_rc(u32_peer_rc(10, 4096, 0, 4), -EBADMSG, "fail 4096");
	ut_assert_rc(u32_peer_rc(10, 0x80000000u, 0, 4), -EBADMSG, "fail 2^31");
	ut_assert_rc(u32_peer_rc(10, UINT32_MAX, 0, 4), -EBADMSG, "fail -1");

	/* RESULT: an errno, as FAIL. */
	ut_assert_rc(u32_peer_rc(12, 0, 0, 4), 0, "result 0");
	ut_assert_rc(u32_peer_rc(12, 4095, 0, 4), 0, "result 4095");
	ut_assert_rc(u32_peer_rc(12, 4096, 0, 4), -EBADMSG, "result 4096");
	ut_assert_rc(u32_peer_rc(12, UINT32_MAX, 0, 4), -EBADMSG, "result -1");

	/* HANDOFF: a tcp port, never 0. */
	ut_assert_rc(u32_peer_rc(11, 1, 0, 8), 0, "handoff port 1");
	ut_assert_rc(u32_peer_rc(11, 65535, 0, 8), 0, "handoff port 65535");
	ut_assert_rc(u32_peer_rc(11, 0, 0, 8), -EBADMSG, "handoff port 0");
	ut_assert_rc(u32_peer_rc(11, 65536, 0, 8), -EBADMSG, "handoff port 65536");
	ut_assert_rc(u32_peer_rc(11, UINT32_MAX, 0, 8), -EBADMSG, "handoff port ~0");
	ut_assert_rc(u32_peer_rc(11, 4445, 1, 8), -EBADMSG, "handoff reserved");
}

/* ---- fuzz ---- */

/* Reference validity of an owner packet, from the protocol document. */
static bool ref_name_ok(const uint8_t *n)
{
	size_t len = 0;

	while (len < 32 && n[len])
		len++;
	if (len == 0 || len == 32)
		return false;
	for (size_t i = 0; i < 32; i++) {
		if (i < len && (n[i] < 0x20 || n[i] > 0x7e))
			return false;
		if (i >= len && n[i])
			return false;
	}
	return true;
}

static bool ref_page_ok(uint64_t page)
{
	for (unsigned s = 12; s <= 30; s++)
		if (page == 1ull << s)
			return true;
	return false;
}

static int ref_owner(const uint8_t *b, size_t len, unsigned nfds)
{
	unsigned type;
	long plen;
	const uint8_t *p = b + 16;

	if (len < 16 || ut_ld(b, 4) != O_MAGIC || ut_ld(b + 6, 2) || ut_ld(b + 12, 4))
		return -EBADMSG;
	type = (unsigned)ut_ld(b + 4, 2);
	plen = spec_owner_plen(type);
	if (plen < 0 || ut_ld(b + 8, 4) != (uint64_t)plen || len != 16 + (size_t)plen ||
	    nfds != spec_owner_nfds(type))
		return -EBADMSG;
	switch (type) {
	case 1:
	case 16:
		if (ut_ld(p, 4) != 1)
			return -EPROTONOSUPPORT;
		if (ut_ld(p + 4, 4) != 1 && ut_ld(p + 4, 4) != 2)
			return -EBADMSG;
		if (type == 16 && (ut_ld(p + 16, 4) < 1 || ut_ld(p + 16, 4) > 64 || ut_ld(p + 20, 4)))
			return -EBADMSG;
		return 0;
	case 17: {
		uint64_t page = ut_ld(p + 4, 4), off = ut_ld(p + 8, 8), size = ut_ld(p + 16, 8);
		uint64_t bm = ut_ld(p + 24, 8);

		if (ut_ld(p, 4) >= 64 || !ref_page_ok(page) || size == 0 || size % page ||
		    size > 16 * TiB || off % page || off + size < off || bm % 8 ||
		    bm > 1ull << 40 /* the code's limit; the document sets none */ ||
		    !ref_name_ok(p + 32))
			return -EBADMSG;
		return 0;
	}
	case 18: {
		uint64_t s = ut_ld(p, 8);

		return s && s % 8 == 0 && s <= 1ull << 40 /* code's limit */ ? 0 : -EBADMSG;
	}
	case 3:
		return ut_ld(p, 4) <= 99 ? 0 : -EBADMSG;
	case 5:
	case 7:
		return ut_ld(p, 4) <= 4095 ? 0 : -EBADMSG;
	default:
		return 0;
	}
}

static int ref_peer(const uint8_t *b, size_t len)
{
	unsigned type;
	uint64_t n = 0;
	long plen;
	const uint8_t *p = b + 16;

	if (len < 16 || ut_ld(b, 4) != P_MAGIC || ut_ld(b + 6, 2) || ut_ld(b + 12, 4))
		return -EBADMSG;
	type = (unsigned)ut_ld(b + 4, 2);
	if (type == 6 || type == 13) {
		if (len < 24)
			return -EBADMSG;
		n = ut_ld(p + (type == 13 ? 4 : 0), 4);
		if (n < 1 || n > (type == 13 ? 120 : 64))
			return -EBADMSG;
	}
	plen = spec_peer_plen(type, (uint32_t)n);
	if (plen < 0 || ut_ld(b + 8, 4) != (uint64_t)plen || len != 16 + (size_t)plen)
		return -EBADMSG;
	switch (type) {
	case 1:
		if (ut_ld(p, 4) != 1 && ut_ld(p, 4) != 2)
			return -EPROTONOSUPPORT;
		/* Flags: 1 verify (full), 2 hand-off (exactly version 2), 4
		 * verify (pages), never 1 and 4; 8 round landed. */
		return ut_ld(p + 4, 4) >= 1 && ut_ld(p + 4, 4) <= 64 && !(ut_ld(p + 8, 4) & ~15ull) &&
			       (ut_ld(p + 8, 4) & 5) != 5 && !ut_ld(p + 12, 4) &&
			       !!(ut_ld(p + 8, 4) & 2) == (ut_ld(p, 4) == 2)
			       ? 0 : -EBADMSG;
	case 2: {
		uint64_t page = ut_ld(p + 4, 4), size = ut_ld(p + 8, 8);

		return ut_ld(p, 4) < 64 && ref_page_ok(page) && size && size % page == 0 &&
			       size <= 16 * TiB && ref_name_ok(p + 16) ? 0 : -EBADMSG;
	}
	case 3:
		return ut_ld(p, 4) < 64 && !ut_ld(p + 4, 4) ? 0 : -EBADMSG;
	case 5:
		return ut_ld(p, 4) < 16 && !ut_ld(p + 4, 4) ? 0 : -EBADMSG;
	case 6:
		return ut_ld(p + 4, 4) ? -EBADMSG : 0;
	case 10:
	case 12:
		return ut_ld(p, 4) <= 4095 ? 0 : -EBADMSG;
	case 11:
		return ut_ld(p, 4) >= 1 && ut_ld(p, 4) <= 65535 && !ut_ld(p + 4, 4) ? 0 : -EBADMSG;
	case 14:
		return ut_ld(p + 4, 4) < 16 ? 0 : -EBADMSG;
	case 13:
		for (uint64_t i = 0; i < n; i++) {
			const uint8_t *run = p + 8 + 16 * i;
			uint64_t count = ut_ld(run + 4, 4);

			if (ut_ld(run, 4) >= 64 || count == 0 || ut_ld(run + 8, 8) > UINT64_MAX - count)
				return -EBADMSG;
		}
		return 0;
	default:
		return 0;
	}
}

static void rnd_name(char *name)
{
	size_t n = 1 + ut_rnd_below(31);

	memset(name, 0, OWNER_NAME_MAX);
	for (size_t i = 0; i < n; i++)
		name[i] = (char)(0x20 + ut_rnd_below(0x5f));
}

/* A random valid owner message of a random type; returns its length. */
static size_t rnd_owner_valid(uint8_t buf[OWNER_MAX_MSG])
{
	unsigned type = owner_types[ut_rnd_below(sizeof(owner_types) / sizeof(owner_types[0]))];
	struct owner_msg m;

	if (ut_rnd_below(4) == 0) /* more of the two that carry an fd */
		type = ut_rnd() & 1 ? OWNER_MSG_BLOCK : OWNER_MSG_BITMAP;
	m = o_valid(type, (unsigned)ut_rnd_below(3));

	switch (type) {
	case OWNER_MSG_HELLO:
		m.u.hello.caps = ut_rnd();
		break;
	case OWNER_MSG_WELCOME:
		m.u.welcome.caps = ut_rnd();
		m.u.welcome.nblocks = 1 + (uint32_t)ut_rnd_below(64);
		break;
	case OWNER_MSG_BLOCK: {
		uint32_t page = 1u << (12 + ut_rnd_below(19));
		uint64_t maxpages = 16 * TiB / page;

		m.u.block.index = (uint32_t)ut_rnd_below(64);
		m.u.block.page_size = page;
		m.u.block.size = page * (1 + ut_rnd_below(ut_rnd() & 1 ? 16 : maxpages));
		m.u.block.offset = page * ut_rnd_below((UINT64_MAX - m.u.block.size) / page + 1);
		if (ut_rnd() & 1)
			m.u.block.offset = page * ut_rnd_below(64);
		m.u.block.bitmap_offset = 8 * ut_rnd_below((1ull << 37) + 1);
		rnd_name(m.u.block.name);
		break;
	}
	case OWNER_MSG_BITMAP:
		m.u.bitmap_size = 8 * (1 + ut_rnd_below(1ull << 37));
		break;
	case OWNER_MSG_SYNC:
		m.u.round = ut_rnd();
		break;
	case OWNER_MSG_ROUND_READY:
		m.u.ready.round = ut_rnd();
		m.u.ready.dirty_pages = ut_rnd();
		break;
	case OWNER_MSG_THROTTLE:
		m.u.percent = (uint32_t)ut_rnd_below(100);
		break;
	case OWNER_MSG_RESUME:
	case OWNER_MSG_ABORT:
		m.u.error = (int32_t)ut_rnd_below(4096);
		break;
	default:
		break;
	}
	return owner_msg_encode(&m, buf);
}

static size_t rnd_peer_valid(uint8_t buf[PEER_MAX_MSG])
{
	unsigned type = peer_types[ut_rnd_below(sizeof(peer_types) / sizeof(peer_types[0]))];
	struct peer_msg m = p_valid(type, (unsigned)ut_rnd_below(3));

	switch (type) {
	case PEER_MSG_LAYOUT:
		m.u.layout.nblocks = 1 + (uint32_t)ut_rnd_below(64);
		m.u.layout.flags = (uint32_t)ut_rnd_below(4) | (ut_rnd() & 1 ? PEER_FLAG_ROUND_LANDED : 0);
		if (m.u.layout.flags & PEER_FLAG_VERIFY && ut_rnd() & 1)
			m.u.layout.flags ^= PEER_FLAG_VERIFY | PEER_FLAG_VERIFY_PAGES;
		m.u.layout.version = m.u.layout.flags & PEER_FLAG_HANDOFF ? 2 : 1;
		break;
	case PEER_MSG_BLOCK: {
		uint32_t page = 1u << (12 + ut_rnd_below(19));

		m.u.block.index = (uint32_t)ut_rnd_below(64);
		m.u.block.page_size = page;
		m.u.block.size = page * (1 + ut_rnd_below(16 * TiB / page));
		rnd_name(m.u.block.name);
		break;
	}
	case PEER_MSG_REGION:
		m.u.region.index = (uint32_t)ut_rnd_below(64);
		for (unsigned i = 0; i < XPORT_REGION_DESC_SIZE; i++)
			m.u.region.desc[i] = (uint8_t)ut_rnd();
		break;
	case PEER_MSG_PROGRESS:
		m.u.progress.round = ut_rnd();
		m.u.progress.bytes = ut_rnd();
		break;
	case PEER_MSG_DONE:
		m.u.done.channel = (uint32_t)ut_rnd_below(16);
		m.u.done.rounds = ut_rnd();
		m.u.done.bytes = ut_rnd();
		break;
	case PEER_MSG_HASHES:
		m.u.hashes.nblocks = 1 + (uint32_t)ut_rnd_below(64);
		for (unsigned i = 0; i < m.u.hashes.nblocks; i++)
			m.u.hashes.hash[i] = ut_rnd();
		break;
	case PEER_MSG_ROUND_END:
		m.u.round.round = (uint32_t)ut_rnd();
		m.u.round.channel = (uint32_t)ut_rnd_below(16);
		break;
	case PEER_MSG_ROUND_LANDED:
		m.u.round.round = (uint32_t)ut_rnd();
		m.u.round.sweep_ms = (uint32_t)ut_rnd();
		m.u.round.unchecked = ut_rnd();
		break;
	case PEER_MSG_PAGES:
		/* At most 36 runs: the fuzz's messages stay within its 600 bytes. */
		m.u.pages.round = (uint32_t)ut_rnd();
		m.u.pages.nruns = 1 + (uint32_t)ut_rnd_below(36);
		for (unsigned i = 0; i < m.u.pages.nruns; i++) {
			uint32_t count = 1 + (uint32_t)ut_rnd_below(UINT32_MAX);

			m.u.pages.run[i] = (struct peer_run){
				.block = (uint32_t)ut_rnd_below(64), .count = count,
				.first = ut_rnd() % (UINT64_MAX - count + 1) };
		}
		break;
	case PEER_MSG_FAIL:
	case PEER_MSG_RESULT:
		m.u.error = (int32_t)ut_rnd_below(4096);
		break;
	case PEER_MSG_HANDOFF:
		m.u.port = (uint16_t)(1 + ut_rnd_below(UINT16_MAX));
		break;
	default:
		break;
	}
	return peer_msg_encode(&m, buf);
}

/* Flips, overwrites or resizes a few bytes. */
static size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
	unsigned n = 1 + (unsigned)ut_rnd_below(4);

	for (unsigned k = 0; k < n; k++) {
		switch (ut_rnd_below(8)) {
		case 0: /* drop or add trailing bytes */
			if (ut_rnd() & 1 && len)
				len -= 1 + ut_rnd_below(len < 8 ? len : 8);
			else if (len < cap)
				len += 1 + ut_rnd_below(cap - len < 8 ? cap - len : 8);
			break;
		case 1: /* a boundary value in a header field */
			if (len >= 12)
				ut_st32(buf + 8, (uint32_t)(len - 16 + ut_rnd_below(3) - 1));
			break;
		case 2: /* a payload u32 set to an interesting value */
			if (len >= 20) {
				static const uint32_t v[] = { 0, 1, 2, 63, 64, 65, 99, 100,
							      4095, 4096, 1u << 30,
							      UINT32_MAX };
				size_t at = 16 + 4 * ut_rnd_below((len - 16) / 4);

				ut_st32(buf + at, v[ut_rnd_below(sizeof(v) / sizeof(v[0]))]);
			}
			break;
		default: /* one bit */
			if (len) {
				size_t at = ut_rnd_below(len);

				buf[at] ^= (uint8_t)(1u << ut_rnd_below(8));
			}
			break;
		}
	}
	return len;
}

static void test_fuzz(void **state)
{
	enum { CAP = 600 };
	unsigned long ok_owner[2] = { 0, 0 }, ok_peer = 0, eproto = 0;
	(void)state;

	ut_rnd_seed(FUZZ_SEED);
	for (unsigned long iter = 0; iter < FUZZ_ITERATIONS; iter++) {
		uint8_t buf[CAP + PEER_MAX_MSG];
		size_t len;

		memset(buf, 0, sizeof(buf));
		switch (ut_rnd_below(6)) {
		case 0: /* random bytes */
			len = ut_rnd_below(CAP + 1);
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)ut_rnd();
			break;
		case 1: /* a valid header (either protocol), random payload */
			len = 16 + ut_rnd_below(CAP - 16 + 1);
			for (size_t i = 16; i < len; i++)
				buf[i] = (uint8_t)(ut_rnd_below(3) ? 0 : ut_rnd());
			if (ut_rnd() & 1) {
				unsigned t = owner_types[ut_rnd_below(12)];

				spec_hdr(buf, O_MAGIC, (uint16_t)t, (uint32_t)spec_owner_plen(t));
				if (ut_rnd_below(4))
					len = 16 + (size_t)spec_owner_plen(t);
			} else {
				unsigned t = peer_types[ut_rnd_below(sizeof(peer_types) / sizeof(peer_types[0]))];
				uint32_t n = 1 + (uint32_t)ut_rnd_below(64);

				spec_hdr(buf, P_MAGIC, (uint16_t)t, (uint32_t)spec_peer_plen(t, n));
				if (t == 6)
					ut_st32(buf + 16, n);
				if (ut_rnd_below(4))
					len = 16 + (size_t)spec_peer_plen(t, n);
			}
			break;
		case 2: /* a valid owner message */
			len = rnd_owner_valid(buf);
			if (ut_rnd_below(4))
				len = mutate(buf, len, CAP);
			break;
		default: /* a valid peer message */
			len = rnd_peer_valid(buf);
			if (ut_rnd_below(4))
				len = mutate(buf, len, CAP);
			break;
		}

		for (unsigned nfds = 0; nfds < 2; nfds++) {
			struct owner_msg m;
			uint8_t again[OWNER_MAX_MSG];
			int r = odec(buf, len, nfds, &m), want = ref_owner(buf, len, nfds);

			if (r != 0 && r != -EBADMSG && r != -EPROTONOSUPPORT)
				fail_msg("iter %lu owner nfds %u: rc %d", iter, nfds, r);
			if (r != want)
				fail_msg("iter %lu owner nfds %u len %zu type %u: got %s, "
					 "reference %s", iter, nfds, len,
					 len >= 6 ? (unsigned)ut_ld(buf + 4, 2) : 0,
					 ut_rc_name(r), ut_rc_name(want));
			eproto += r == -EPROTONOSUPPORT;
			if (r)
				continue;
			ok_owner[nfds]++;
			assert_int_equal(owner_msg_nfds(m.type), nfds);
			if (owner_msg_encode(&m, again) != len || memcmp(again, buf, len))
				fail_msg("iter %lu: owner re-encoding differs (type %u)",
					 iter, (unsigned)m.type);
		}

		struct peer_msg pm;
		uint8_t again[PEER_MAX_MSG];
		int r = pdec(buf, len, &pm), want = ref_peer(buf, len);

		if (r != 0 && r != -EBADMSG && r != -EPROTONOSUPPORT)
			fail_msg("iter %lu peer: rc %d", iter, r);
		if (r != want)
			fail_msg("iter %lu peer len %zu type %u: got %s, reference %s",
				 iter, len, len >= 6 ? (unsigned)ut_ld(buf + 4, 2) : 0,
				 ut_rc_name(r), ut_rc_name(want));
		eproto += r == -EPROTONOSUPPORT;
		if (r)
			continue;
		ok_peer++;
		if (peer_msg_encode(&pm, again) != len || memcmp(again, buf, len))
			fail_msg("iter %lu: peer re-encoding differs (type %u)", iter,
				 (unsigned)pm.type);
	}
	print_message("fuzz: owner accepted %lu (0 fds) + %lu (1 fd), peer %lu, "
		      "EPROTONOSUPPORT %lu, of %u\n", ok_owner[0], ok_owner[1],
		      ok_peer, eproto, FUZZ_ITERATIONS);
	assert_true(ok_owner[0] >= 5000);
	assert_true(ok_owner[1] >= 1000);
	assert_true(ok_peer >= 10000);
	assert_true(eproto >= 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_owner_golden),
		cmocka_unit_test(test_owner_roundtrip),
		cmocka_unit_test(test_owner_bad_magic),
		cmocka_unit_test(test_owner_reserved),
		cmocka_unit_test(test_owner_length),
		cmocka_unit_test(test_owner_unknown_types),
		cmocka_unit_test(test_owner_fd_count),
		cmocka_unit_test(test_owner_version_role),
		cmocka_unit_test(test_owner_welcome),
		cmocka_unit_test(test_owner_block_fields),
		cmocka_unit_test(test_owner_block_names),
		cmocka_unit_test(test_owner_small_fields),
		cmocka_unit_test(test_sock_block_fd),
		cmocka_unit_test(test_sock_all_types),
		cmocka_unit_test(test_sock_send_fd_mismatch),
		cmocka_unit_test(test_sock_stray_fds),
		cmocka_unit_test(test_sock_oversize),
		cmocka_unit_test(test_sock_empty_packet),
		cmocka_unit_test(test_sock_closed_peer),
		cmocka_unit_test(test_sock_timeout),
		cmocka_unit_test(test_peer_golden),
		cmocka_unit_test(test_peer_roundtrip),
		cmocka_unit_test(test_peer_header),
		cmocka_unit_test(test_peer_hashes),
		cmocka_unit_test(test_peer_pages),
		cmocka_unit_test(test_peer_fields),
		cmocka_unit_test(test_fuzz),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

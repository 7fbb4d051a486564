// SPDX-License-Identifier: MIT
/*
 * Unit tests of migrate/page-hash.c, --verify's digests: that a source and
 * a destination that saw the same bytes agree, that one flipped byte
 * anywhere does not, and that the destination's sweep finds exactly the
 * granules nothing hashed yet.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "page-hash.h"
#include "peer-proto.h"

#define PAGE 4096u
#define NPAGES 300u /* more than a bitmap word, not a multiple of 64 */

static uint8_t *ram_new(uint8_t seed)
{
	uint8_t *ram = malloc((size_t)NPAGES * PAGE);

	assert_non_null(ram);
	for (size_t i = 0; i < (size_t)NPAGES * PAGE; i++)
		ram[i] = (uint8_t)(i * 31 + seed + i / PAGE);
	return ram;
}

static void test_granule(void **state)
{
	(void)state;
	assert_int_equal(page_hash_granule(4096), 4096);
	assert_int_equal(page_hash_granule(64 << 10), 64 << 10);
	/* Huge pages: a granule never spans two 1 MiB stripes (channels). */
	assert_int_equal(page_hash_granule(2u << 20), PEER_GRANULE_MAX);
	assert_int_equal(page_hash_granule(1u << 30), PEER_GRANULE_MAX);
}

/* The source's "never sent" is the destination's hashed zeros. */
static void test_zero_pages_agree(void **state)
{
	struct page_hashes src, dst;
	uint8_t *zeros = calloc(NPAGES, PAGE);
	(void)state;

	assert_non_null(zeros);
	assert_int_equal(page_hashes_init(&src, (uint64_t)NPAGES * PAGE, PAGE, false), 0);
	assert_int_equal(page_hashes_init(&dst, (uint64_t)NPAGES * PAGE, PAGE, true), 0);
	assert_int_equal(src.n, NPAGES);
	for (size_t i = 0; i < NPAGES; i++)
		assert_true(page_hashes_pending(&dst, i));
	assert_false(page_hashes_pending(&src, 0));
	page_hashes_update(&dst, zeros, 0, NPAGES);
	for (size_t i = 0; i < NPAGES; i++)
		assert_false(page_hashes_pending(&dst, i));
	assert_true(page_hashes_digest(&src) == page_hashes_digest(&dst));
	/* One byte of one page the source never sent. */
	zeros[77 * PAGE + 5] = 1;
	page_hashes_update(&dst, zeros, 77, 1);
	assert_true(page_hashes_digest(&src) != page_hashes_digest(&dst));
	page_hashes_free(&src);
	page_hashes_free(&dst);
	free(zeros);
}

/* Runs sent in any order and split, against one take of the same bytes. */
static void test_same_bytes_agree(void **state)
{
	struct page_hashes src, dst;
	uint8_t *ram = ram_new(7), *copy = malloc((size_t)NPAGES * PAGE);
	(void)state;

	assert_non_null(copy);
	memcpy(copy, ram, (size_t)NPAGES * PAGE);
	assert_int_equal(page_hashes_init(&src, (uint64_t)NPAGES * PAGE, PAGE, false), 0);
	assert_int_equal(page_hashes_init(&dst, (uint64_t)NPAGES * PAGE, PAGE, true), 0);
	page_hashes_update(&src, ram, 200, 100);
	page_hashes_update(&src, ram, 0, 1);
	page_hashes_update(&src, ram, 1, 199);
	for (size_t i = 0; i < NPAGES; i++)
		page_hashes_take(&dst, i, copy + i * PAGE);
	assert_true(page_hashes_digest(&src) == page_hashes_digest(&dst));

	/* A page changed after the destination hashed it, never sent again:
	 * the digests differ, wherever the byte is. */
	for (size_t at = 0; at < (size_t)NPAGES * PAGE; at += 4093) {
		copy[at] ^= 0x80;
		page_hashes_take(&dst, at / PAGE, copy + at / PAGE * PAGE);
		assert_true(page_hashes_digest(&src) != page_hashes_digest(&dst));
		copy[at] ^= 0x80;
		page_hashes_take(&dst, at / PAGE, copy + at / PAGE * PAGE);
		assert_true(page_hashes_digest(&src) == page_hashes_digest(&dst));
	}
	/* Sent again and hashed again: agree again. */
	ram[5 * PAGE] ^= 1;
	page_hashes_update(&src, ram, 5, 1);
	assert_true(page_hashes_digest(&src) != page_hashes_digest(&dst));
	page_hashes_update(&dst, ram, 5, 1);
	assert_true(page_hashes_digest(&src) == page_hashes_digest(&dst));
	page_hashes_free(&src);
	page_hashes_free(&dst);
	free(ram);
	free(copy);
}

/* The sweep's runs: only pending granules, below the limit, wrapping. */
static void test_next_unhashed(void **state)
{
	struct page_hashes dst;
	uint8_t *ram = ram_new(1);
	size_t len, first;
	(void)state;

	assert_int_equal(page_hashes_init(&dst, (uint64_t)NPAGES * PAGE, PAGE, true), 0);
	page_hashes_update(&dst, ram, 0, 10);
	page_hashes_update(&dst, ram, 20, 250);
	/* Pending: 10..19 and 270..299. */
	first = page_hashes_next_unhashed(&dst, NPAGES, 8, &len);
	assert_int_equal(first, 10);
	assert_int_equal(len, 8);
	dst.cursor = 18;
	first = page_hashes_next_unhashed(&dst, NPAGES, 64, &len);
	assert_int_equal(first, 18);
	assert_int_equal(len, 2);
	dst.cursor = 20;
	/* Below 270 nothing is left after the cursor: it wraps to 10. */
	first = page_hashes_next_unhashed(&dst, 270, 64, &len);
	assert_int_equal(first, 10);
	assert_int_equal(len, 10);
	first = page_hashes_next_unhashed(&dst, NPAGES, 64, &len);
	assert_int_equal(first, 10);
	dst.cursor = 20;
	first = page_hashes_next_unhashed(&dst, NPAGES, 64, &len);
	assert_int_equal(first, 270);
	assert_int_equal(len, 30);
	page_hashes_update(&dst, ram, 10, 10);
	page_hashes_update(&dst, ram, 270, 30);
	first = page_hashes_next_unhashed(&dst, NPAGES, 64, &len);
	assert_int_equal(first, NPAGES);
	/* A limit of 0 finds nothing. */
	page_hashes_free(&dst);
	assert_int_equal(page_hashes_init(&dst, (uint64_t)NPAGES * PAGE, PAGE, true), 0);
	assert_int_equal(page_hashes_next_unhashed(&dst, 0, 64, &len), NPAGES);
	page_hashes_free(&dst);
	free(ram);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_granule),
		cmocka_unit_test(test_zero_pages_agree),
		cmocka_unit_test(test_same_bytes_agree),
		cmocka_unit_test(test_next_unhashed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: MIT
/*
 * Unit tests of migrate/bitmap.c: dirty-run extraction, counting, range
 * updates and the zero-page test.
 *
 * Every test builds its own bitmap (heap block of exactly bitmap_words(nbits)
 * words, so that AddressSanitizer reports reads past the last word) and
 * compares with a plain bool-per-bit reference written here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bitmap.h"
#include "unit-common.h"

#define RANDOM_SEED 0x243f6a8885a308d3ull
#define RANDOM_MAPS 3000u

/* ---- helpers ---- */


/* A zeroed bitmap of exactly bitmap_words(nbits) words (at least one). */
static uint64_t *map_new(size_t nbits)
{
	size_t n = bitmap_words(nbits) ? bitmap_words(nbits) : 1;
	uint64_t *w = calloc(n, sizeof(*w));

	assert_non_null(w);
	return w;
}

static void bit_set(uint64_t *w, size_t i) { w[i / 64] |= 1ull << (i % 64); }
static bool bit_get(const uint64_t *w, size_t i) { return w[i / 64] >> (i % 64) & 1; }

/* Sets every bit of the last word past nbits (they must be ignored). */
static void set_garbage(uint64_t *w, size_t nbits)
{
	if (nbits % 64)
		w[nbits / 64] |= ~0ull << (nbits % 64);
}

struct run {
	size_t start, len;
};

static struct run next_run(const uint64_t *w, size_t nbits, size_t from,
			   size_t max_len)
{
	struct run r = { .len = 0xdead };

	r.start = bitmap_next_run(w, nbits, from, max_len, &r.len);
	return r;
}

#define assert_run(w, nbits, from, max_len, want_start, want_len)            \
	do {                                                                   \
		struct run r_ = next_run((w), (nbits), (from), (max_len));     \
		if (r_.start != (size_t)(want_start) ||                        \
		    r_.len != (size_t)(want_len))                              \
			fail_msg("next_run(nbits %zu, from %zu, max %zu): got "  \
				 "(%zu, %zu), want (%zu, %zu)",                \
				 (size_t)(nbits), (size_t)(from),              \
				 (size_t)(max_len), r_.start, r_.len,          \
				 (size_t)(want_start), (size_t)(want_len));    \
	} while (0)

/* ---- bitmap_next_run ---- */

static void test_run_empty(void **state)
{
	static const size_t sizes[] = { 1, 63, 64, 65, 127, 128, 129, 200, 4096 };
	(void)state;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t nbits = sizes[i];
		uint64_t *w = map_new(nbits);

		assert_run(w, nbits, 0, SIZE_MAX, nbits, 0);
		assert_run(w, nbits, nbits / 2, SIZE_MAX, nbits, 0);
		assert_run(w, nbits, nbits - 1, 1, nbits, 0);
		assert_run(w, nbits, nbits, SIZE_MAX, nbits, 0);
		assert_int_equal(bitmap_count(w, nbits), 0);
		free(w);
	}

	/* No bits at all. */
	uint64_t *w = map_new(0);
	w[0] = ~0ull; /* past nbits: ignored */
	assert_run(w, 0, 0, SIZE_MAX, 0, 0);
	assert_int_equal(bitmap_count(w, 0), 0);
	free(w);
}

static void test_run_full(void **state)
{
	static const size_t sizes[] = { 1, 2, 63, 64, 65, 128, 129, 200, 4096, 4097 };
	(void)state;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t nbits = sizes[i];
		uint64_t *w = map_new(nbits);

		memset(w, 0xff, bitmap_words(nbits) * sizeof(*w)); /* garbage too */
		assert_run(w, nbits, 0, SIZE_MAX, 0, nbits);
		assert_run(w, nbits, nbits - 1, SIZE_MAX, nbits - 1, 1);
		assert_run(w, nbits, nbits, SIZE_MAX, nbits, 0);
		assert_run(w, nbits, 0, nbits, 0, nbits);
		assert_int_equal(bitmap_count(w, nbits), nbits);
		free(w);
	}
}

static void test_run_single_bit(void **state)
{
	static const size_t sizes[] = { 1, 64, 65, 130, 192 };
	(void)state;

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t nbits = sizes[s];

		for (size_t pos = 0; pos < nbits; pos++) {
			uint64_t *w = map_new(nbits);

			bit_set(w, pos);
			assert_run(w, nbits, 0, SIZE_MAX, pos, 1);
			assert_run(w, nbits, pos, SIZE_MAX, pos, 1);
			assert_run(w, nbits, pos, 1, pos, 1);
			assert_run(w, nbits, pos + 1, SIZE_MAX, nbits, 0);
			if (pos)
				assert_run(w, nbits, pos - 1, SIZE_MAX, pos, 1);
			assert_int_equal(bitmap_count(w, nbits), 1);
			free(w);
		}
	}
}

/*
 * A map of nbits with up to two ranges set (and, with garbage, the bits
 * past nbits), and the runs next_run() must find in it, queried in order.
 */
struct run_query {
	size_t from, max_len, start, len;
};

struct run_case {
	size_t nbits;
	struct run set[2];
	bool garbage;
	struct run_query q[10];
};

static void check_run_case(const struct run_case *c)
{
	uint64_t *w = map_new(c->nbits);
	size_t count = 0;

	for (size_t i = 0; i < 2 && c->set[i].len; i++) {
		bitmap_set_range(w, c->set[i].start, c->set[i].len);
		count += c->set[i].len;
	}
	if (c->garbage)
		set_garbage(w, c->nbits);
	for (const struct run_query *q = c->q; q->max_len; q++)
		assert_run(w, c->nbits, q->from, q->max_len, q->start, q->len);
	assert_int_equal(bitmap_count(w, c->nbits), count);
	free(w);
}

#define M SIZE_MAX

static void test_run_word_boundaries(void **state)
{
	static const struct run_case cases[] = {
		/* A run spanning three whole words and two partial ones. */
		{ 320, { { 10, 290 } }, false, { { 0, M, 10, 290 }, { 128, M, 128, 172 } } },
		/* Runs starting exactly at a word boundary, after a fully clear word. */
		{ 256, { { 128, 64 } }, false, { { 0, M, 128, 64 }, { 192, M, 256, 0 } } },
	};
	(void)state;

	/* 60..70 crosses the first word boundary. */
	uint64_t *w = map_new(256);
	bitmap_set_range(w, 60, 11);
	assert_int_equal(w[0], 0xf000000000000000ull);
	assert_int_equal(w[1], 0x7full);
	assert_run(w, 256, 0, SIZE_MAX, 60, 11);
	assert_run(w, 256, 64, SIZE_MAX, 64, 7);
	assert_run(w, 256, 71, SIZE_MAX, 256, 0);
	free(w);

	/* 63..64: one bit on each side. */
	w = map_new(256);
	bit_set(w, 63);
	bit_set(w, 64);
	assert_run(w, 256, 0, SIZE_MAX, 63, 2);
	free(w);

	/* Two runs separated by exactly one clear bit at a boundary. */
	w = map_new(256);
	bitmap_set_range(w, 0, 256);
	w[1] &= ~1ull; /* clear bit 64 */
	assert_run(w, 256, 0, SIZE_MAX, 0, 64);
	assert_run(w, 256, 64, SIZE_MAX, 65, 191);
	free(w);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_run_case(&cases[i]);
}

static void test_run_ends_at_nbits(void **state)
{
	static const struct run_case cases[] = {
		/* nbits a multiple of 64: the run ends with the last word. */
		{ 128, { { 100, 28 } }, false, { { 0, M, 100, 28 }, { 127, M, 127, 1 } } },
		/* nbits inside a word, garbage set right after the last bit. */
		{ 100, { { 90, 10 } }, true, { { 0, M, 90, 10 }, { 99, M, 99, 1 } } },
		/* One-word map ending at bit 64. */
		{ 64, { { 1, 63 } }, false, { { 0, M, 1, 63 } } },
		/* Run ending at nbits = 65, i.e. bit 0 of the second word. */
		{ 65, { { 60, 5 } }, true, { { 0, M, 60, 5 } } },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_run_case(&cases[i]);
}

static void test_run_garbage_ignored(void **state)
{
	static const size_t sizes[] = { 1, 5, 63, 65, 70, 100, 127, 129, 4001 };
	(void)state;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t nbits = sizes[i];
		uint64_t *w = map_new(nbits);

		set_garbage(w, nbits); /* only bits past nbits are set */
		assert_run(w, nbits, 0, SIZE_MAX, nbits, 0);
		assert_run(w, nbits, nbits - 1, SIZE_MAX, nbits, 0);
		assert_int_equal(bitmap_count(w, nbits), 0);
		free(w);

		/* And a real bit in front of the garbage. */
		w = map_new(nbits);
		set_garbage(w, nbits);
		bit_set(w, nbits - 1);
		assert_run(w, nbits, 0, SIZE_MAX, nbits - 1, 1);
		assert_int_equal(bitmap_count(w, nbits), 1);
		free(w);
	}
}

static void test_run_max_len(void **state)
{
	static const struct run_case cases[] = {
		/* 10..109: 100 bits, taken 30 at a time; then max_len equal to
		 * the run, one more, one less, and 1. */
		{ 200, { { 10, 100 } }, false, {
			{ 0, 30, 10, 30 }, { 40, 30, 40, 30 }, { 70, 30, 70, 30 },
			{ 100, 30, 100, 10 }, { 110, 30, 200, 0 }, { 0, 100, 10, 100 },
			{ 0, 101, 10, 100 }, { 0, 99, 10, 99 }, { 0, 1, 10, 1 } } },
		/* A cut exactly at a word boundary, continued in the next word. */
		{ 256, { { 0, 256 } }, false, {
			{ 0, 64, 0, 64 }, { 64, 64, 64, 64 }, { 128, 100, 128, 100 },
			{ 228, 100, 228, 28 } } },
	};
	uint64_t *w;
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_run_case(&cases[i]);

	/* Walking with max_len 1 visits every bit of a run. */
	w = map_new(150);
	bitmap_set_range(w, 60, 10);
	bitmap_set_range(w, 140, 10);
	set_garbage(w, 150);
	size_t from = 0, visited = 0;
	for (;;) {
		struct run r = next_run(w, 150, from, 1);

		if (r.start == 150) {
			assert_int_equal(r.len, 0);
			break;
		}
		assert_int_equal(r.len, 1);
		assert_true(bit_get(w, r.start));
		assert_true(r.start >= from);
		visited++;
		from = r.start + 1;
	}
	assert_int_equal(visited, 20);
	free(w);
}

static void test_run_from_middle(void **state)
{
	static const struct run_case from_middle = {
		300, { { 10, 100 }, { 200, 50 } }, false, {
			{ 50, M, 50, 60 }, { 63, M, 63, 47 }, { 64, M, 64, 46 },
			{ 109, M, 109, 1 }, { 110, M, 200, 50 }, { 249, M, 249, 1 },
			{ 250, M, 300, 0 }, { 50, 5, 50, 5 } } };
	(void)state;

	check_run_case(&from_middle);
}

#undef M

/* ---- bitmap_count ---- */

static void test_count(void **state)
{
	(void)state;

	uint64_t *w = map_new(64);
	w[0] = ~0ull;
	assert_int_equal(bitmap_count(w, 64), 64);
	assert_int_equal(bitmap_count(w, 1), 1);
	assert_int_equal(bitmap_count(w, 63), 63);
	free(w);

	w = map_new(130);
	w[0] = 0x8000000000000001ull;
	w[1] = 0xffull;
	w[2] = 0x3ull | 0xf0ull; /* bits 128, 129; 132..135 are garbage */
	assert_int_equal(bitmap_count(w, 130), 2 + 8 + 2);
	assert_int_equal(bitmap_count(w, 129), 2 + 8 + 1);
	assert_int_equal(bitmap_count(w, 128), 2 + 8);
	assert_int_equal(bitmap_count(w, 72), 2 + 8);
	assert_int_equal(bitmap_count(w, 71), 2 + 7);
	free(w);

	w = map_new(1000);
	set_garbage(w, 1000);
	bitmap_set_range(w, 3, 500);
	assert_int_equal(bitmap_count(w, 1000), 500);
	free(w);
}

/* ---- bitmap_set_range / bitmap_clear_range ---- */

static void test_set_clear_examples(void **state)
{
	/*
	 * Three words, all zero (then set) or all ones (then cleared), one or
	 * two ranges applied in order.  A range of length 0 is a no-op.
	 */
	static const struct {
		const char *what;
		bool clear;
		unsigned nranges;
		struct {
			size_t start, len;
		} range[2];
		uint64_t want[3];
	} cases[] = {
		{ "set the whole middle word", false, 1, { { 64, 64 } }, { 0, ~0ull, 0 } },
		{ "set across a word boundary", false, 1, { { 60, 8 } },
		  { 0xf000000000000000ull, 0xfull, 0 } },
		{ "set inside the first word", false, 1, { { 3, 5 } }, { 0xf8ull, 0, 0 } },
		{ "set everything", false, 1, { { 0, 192 } }, { ~0ull, ~0ull, ~0ull } },
		{ "set nothing, twice", false, 2, { { 7, 0 }, { 64, 0 } }, { 0, 0, 0 } },
		{ "set last bits of words", false, 2, { { 63, 1 }, { 127, 2 } },
		  { 0x8000000000000000ull, 0x8000000000000000ull, 1 } },
		{ "clear across a word boundary", true, 1, { { 63, 2 } },
		  { 0x7fffffffffffffffull, ~1ull, ~0ull } },
		{ "clear the whole middle word", true, 1, { { 64, 64 } }, { ~0ull, 0, ~0ull } },
		{ "clear 5..184", true, 1, { { 5, 180 } }, { 0x1full, 0, ~0ull << 57 } },
		{ "clear everything", true, 1, { { 0, 192 } }, { 0, 0, 0 } },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t *w = map_new(192);

		if (cases[i].clear)
			memset(w, 0xff, 3 * sizeof(*w));
		for (size_t r = 0; r < cases[i].nranges; r++) {
			if (cases[i].clear)
				bitmap_clear_range(w, cases[i].range[r].start, cases[i].range[r].len);
			else
				bitmap_set_range(w, cases[i].range[r].start, cases[i].range[r].len);
		}
		for (size_t k = 0; k < 3; k++)
			if (w[k] != cases[i].want[k])
				fail_msg("%s: word %zu is 0x%016llx, want 0x%016llx",
					 cases[i].what, k, (unsigned long long)w[k],
					 (unsigned long long)cases[i].want[k]);
		free(w);
	}
}

/* Every [first, first+len) of a 4-word map, on a random background. */
static void test_set_clear_exhaustive(void **state)
{
	const size_t nbits = 256;
	(void)state;

	ut_rnd_seed(RANDOM_SEED ^ 1);
	for (size_t first = 0; first <= nbits; first++) {
		for (size_t len = 0; first + len <= nbits; len++) {
			uint64_t bg[4], *w;
			bool set = ut_rnd() & 1;

			for (size_t i = 0; i < 4; i++)
				bg[i] = ut_rnd();
			w = map_new(nbits);
			memcpy(w, bg, sizeof(bg));
			if (set)
				bitmap_set_range(w, first, len);
			else
				bitmap_clear_range(w, first, len);
			for (size_t i = 0; i < nbits; i++) {
				bool want = i >= first && i < first + len ? set
									  : bit_get(bg, i);

				if (bit_get(w, i) != want)
					fail_msg("%s_range(%zu, %zu): bit %zu is %d",
						 set ? "set" : "clear", first, len,
						 i, !want);
			}
			free(w);
		}
	}
}

/* ---- page_is_zero ---- */

static void *zpage(size_t len)
{
	void *p = NULL;

	/* posix_memalign: no size restriction, exact size for ASan. */
	assert_int_equal(posix_memalign(&p, 4096, len), 0);
	memset(p, 0, len);
	return p;
}

/* A fresh zero page with byte `at` set to v. */
static bool zero_with_byte(size_t len, size_t at, uint8_t v)
{
	uint8_t *p = zpage(len);
	bool r;

	p[at] = v;
	r = page_is_zero(p, len);
	free(p);
	return r;
}

static void test_page_is_zero(void **state)
{
	static const size_t sizes[] = { 4096, 2u << 20 };
	(void)state;

	for (size_t s = 0; s < 2; s++) {
		size_t len = sizes[s];
		void *p = zpage(len);

		assert_true(page_is_zero(p, len));
		free(p);
		assert_false(zero_with_byte(len, 0, 1));
		assert_false(zero_with_byte(len, 0, 0x80));
		assert_false(zero_with_byte(len, len - 1, 1));
		assert_false(zero_with_byte(len, len - 1, 0x80));
		assert_false(zero_with_byte(len, len / 2, 0x10));
		assert_false(zero_with_byte(len, 511, 1));
		assert_false(zero_with_byte(len, 512, 1));
		assert_false(zero_with_byte(len, len - 512, 1));
		assert_false(zero_with_byte(len, len - 513, 1));
	}

	/* Every byte position of a 4 KiB page. */
	for (size_t at = 0; at < 4096; at++)
		if (zero_with_byte(4096, at, (uint8_t)(1u << (at % 8))))
			fail_msg("4096-byte page with byte %zu set reported zero", at);

	/* Lengths that are not a multiple of the 512-byte block. */
	static const size_t odd[] = { 8, 16, 504, 520, 4104 };
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		void *z = zpage(odd[i]);

		assert_true(page_is_zero(z, odd[i]));
		free(z);
		assert_false(zero_with_byte(odd[i], odd[i] - 1, 1));
		assert_false(zero_with_byte(odd[i], 0, 1));
	}

	/* A non-zero byte just past len is not looked at. */
	uint8_t *q = zpage(8192);
	q[4096] = 1;
	assert_true(page_is_zero(q, 4096));
	free(q);
}

/* ---- randomized cross-check ---- */

/* Fills ref/w with one of several patterns, with random garbage past nbits. */
static void random_map(bool *ref, uint64_t *w, size_t nbits)
{
	unsigned kind = (unsigned)ut_rnd_below(5);

	memset(ref, 0, nbits);
	switch (kind) {
	case 0: /* independent bits, random density */
	case 1: {
		unsigned pct = (unsigned)ut_rnd_below(101);

		for (size_t i = 0; i < nbits; i++)
			ref[i] = ut_rnd_below(100) < pct;
		break;
	}
	case 2: /* runs of random lengths, some long */
	case 3: {
		size_t i = 0;
		bool v = ut_rnd() & 1;

		while (i < nbits) {
			size_t n = 1 + (ut_rnd() & 1 ? ut_rnd_below(8) : ut_rnd_below(300));

			for (size_t j = 0; j < n && i < nbits; j++)
				ref[i++] = v;
			v = !v;
		}
		break;
	}
	default: /* mostly set with a few holes, or all/none */
		if (ut_rnd_below(4) == 0) {
			memset(ref, ut_rnd() & 1, nbits);
		} else {
			memset(ref, 1, nbits);
			for (size_t n = ut_rnd_below(6); n; n--)
				ref[ut_rnd_below(nbits)] = false;
		}
		break;
	}
	memset(w, 0, bitmap_words(nbits) * sizeof(*w));
	for (size_t i = 0; i < nbits; i++)
		if (ref[i])
			bit_set(w, i);
	if (nbits % 64)
		w[nbits / 64] |= ut_rnd() << (nbits % 64);
}

static size_t random_max_len(size_t nbits)
{
	switch (ut_rnd_below(6)) {
	case 0: return 1;
	case 1: return 2 + ut_rnd_below(7);
	case 2: return 1 + ut_rnd_below(100);
	case 3: return 1 + ut_rnd_below(nbits);
	case 4: return 64;
	default: return SIZE_MAX;
	}
}

static void test_random_runs(void **state)
{
	const size_t max_nbits = 5000;
	bool *ref = malloc(max_nbits), *seen = malloc(max_nbits);
	unsigned long runs = 0, cut = 0;
	(void)state;

	assert_non_null(ref);
	assert_non_null(seen);
	ut_rnd_seed(RANDOM_SEED);
	for (unsigned iter = 0; iter < RANDOM_MAPS; iter++) {
		size_t nbits = 1 + ut_rnd_below(max_nbits), nset = 0, from = 0;
		uint64_t *w = map_new(nbits);

		random_map(ref, w, nbits);
		for (size_t i = 0; i < nbits; i++)
			nset += ref[i];
		if (bitmap_count(w, nbits) != nset)
			fail_msg("iter %u nbits %zu: count %zu, want %zu", iter,
				 nbits, bitmap_count(w, nbits), nset);

		/* Walk every run, each call with its own max_len. */
		memset(seen, 0, nbits);
		for (;;) {
			size_t max_len = random_max_len(nbits);
			struct run r = next_run(w, nbits, from, max_len);

			if (r.start == nbits) {
				if (r.len != 0)
					fail_msg("iter %u: end with len %zu", iter, r.len);
				break;
			}
			if (r.start < from || r.start > nbits || r.len == 0 ||
			    r.len > max_len || r.len > nbits - r.start)
				fail_msg("iter %u nbits %zu from %zu max %zu: bad run "
					 "(%zu, %zu)", iter, nbits, from, max_len,
					 r.start, r.len);
			for (size_t i = from; i < r.start; i++)
				if (ref[i])
					fail_msg("iter %u nbits %zu: run (%zu, %zu) from "
						 "%zu skips set bit %zu", iter, nbits,
						 r.start, r.len, from, i);
			for (size_t i = r.start; i < r.start + r.len; i++) {
				if (!ref[i])
					fail_msg("iter %u nbits %zu: run (%zu, %zu) "
						 "covers clear bit %zu", iter, nbits,
						 r.start, r.len, i);
				if (seen[i])
					fail_msg("iter %u: bit %zu in two runs", iter, i);
				seen[i] = true;
			}
			if (r.len < max_len && r.start + r.len < nbits &&
			    ref[r.start + r.len])
				fail_msg("iter %u nbits %zu: run (%zu, %zu) max %zu "
					 "not maximal", iter, nbits, r.start, r.len,
					 max_len);
			cut += r.len == max_len && r.start + r.len < nbits &&
			       ref[r.start + r.len];
			runs++;
			from = r.start + r.len;
		}
		for (size_t i = 0; i < nbits; i++)
			if (seen[i] != ref[i])
				fail_msg("iter %u nbits %zu: bit %zu set %d seen %d",
					 iter, nbits, i, ref[i], seen[i]);

		/* Random starting points against a direct scan of ref. */
		for (unsigned q = 0; q < 20; q++) {
			size_t f = ut_rnd_below(nbits + 1), max_len = random_max_len(nbits);
			size_t ws = f, wl = 0;
			struct run r;

			while (ws < nbits && !ref[ws])
				ws++;
			while (ws + wl < nbits && ref[ws + wl] && wl < max_len)
				wl++;
			r = next_run(w, nbits, f, max_len);
			if (r.start != ws || r.len != wl)
				fail_msg("iter %u nbits %zu from %zu max %zu: got "
					 "(%zu, %zu), want (%zu, %zu)", iter, nbits,
					 f, max_len, r.start, r.len, ws, wl);
		}
		free(w);
	}
	print_message("random runs: %lu runs, %lu cut by max_len\n", runs, cut);
	assert_true(runs > 10000);
	assert_true(cut > 1000);
	free(ref);
	free(seen);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_run_empty),
		cmocka_unit_test(test_run_full),
		cmocka_unit_test(test_run_single_bit),
		cmocka_unit_test(test_run_word_boundaries),
		cmocka_unit_test(test_run_ends_at_nbits),
		cmocka_unit_test(test_run_garbage_ignored),
		cmocka_unit_test(test_run_max_len),
		cmocka_unit_test(test_run_from_middle),
		cmocka_unit_test(test_count),
		cmocka_unit_test(test_set_clear_examples),
		cmocka_unit_test(test_set_clear_exhaustive),
		cmocka_unit_test(test_page_is_zero),
		cmocka_unit_test(test_random_runs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

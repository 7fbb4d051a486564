// SPDX-License-Identifier: MIT
#include "bitmap.h"

#include <string.h>

/* Next bit at or after `from` whose value is `set`, or nbits. */
static size_t find_bit(const uint64_t *words, size_t nbits, size_t from, bool set)
{
	while (from < nbits) {
		uint64_t w = words[from / 64];

		if (!set)
			w = ~w;
		w &= ~0ull << (from % 64);
		if (w) {
			size_t bit = from / 64 * 64 + (size_t)__builtin_ctzll(w);

			return bit < nbits ? bit : nbits;
		}
		from = (from / 64 + 1) * 64;
	}
	return nbits;
}

size_t bitmap_next_run(const uint64_t *words, size_t nbits, size_t from,
		       size_t max_len, size_t *ret_len)
{
	size_t start = find_bit(words, nbits, from, true), end;

	if (start >= nbits) {
		*ret_len = 0;
		return nbits;
	}
	end = find_bit(words, nbits, start, false);
	if (end - start > max_len)
		end = start + max_len;
	*ret_len = end - start;
	return start;
}

size_t bitmap_count(const uint64_t *words, size_t nbits)
{
	size_t n = 0, full = nbits / 64;

	for (size_t i = 0; i < full; i++)
		n += (size_t)__builtin_popcountll(words[i]);
	if (nbits % 64)
		n += (size_t)__builtin_popcountll(words[full] & ((1ull << (nbits % 64)) - 1));
	return n;
}

static void update_range(uint64_t *words, size_t first, size_t len, bool set)
{
	while (len) {
		size_t bit = first % 64, n = 64 - bit < len ? 64 - bit : len;
		uint64_t mask = (n == 64 ? ~0ull : ((1ull << n) - 1)) << bit;

		if (set)
			words[first / 64] |= mask;
		else
			words[first / 64] &= ~mask;
		first += n;
		len -= n;
	}
}

void bitmap_clear_range(uint64_t *words, size_t first, size_t len)
{
	update_range(words, first, len, false);
}

void bitmap_set_range(uint64_t *words, size_t first, size_t len)
{
	update_range(words, first, len, true);
}

bool page_is_zero(const void *p, size_t len)
{
	const uint64_t *w = p;
	uint64_t acc = 0;

	/* OR in blocks so the compiler can vectorize; exit early per 512 B. */
	for (size_t i = 0; i < len / 8; i += 64) {
		size_t n = len / 8 - i < 64 ? len / 8 - i : 64;

		for (size_t j = 0; j < n; j++)
			acc |= w[i + j];
		if (acc)
			return false;
	}
	return true;
}

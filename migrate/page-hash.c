// SPDX-License-Identifier: MIT
#include "page-hash.h"

#include <errno.h>
#include <glib.h>
#include <string.h>
#include <xxhash.h>

#include "bitmap.h"
#include "peer-proto.h"

uint32_t page_hash_granule(uint32_t page_size)
{
	return MIN(page_size, PEER_GRANULE_MAX);
}

int page_hashes_init(struct page_hashes *ph, uint64_t size, uint32_t page_size,
		     bool track_unhashed)
{
	g_autofree uint8_t *zeros = NULL;

	*ph = (struct page_hashes){ .granule = page_hash_granule(page_size) };
	ph->n = size / ph->granule;
	zeros = g_try_malloc0(ph->granule);
	ph->hash = g_try_new(uint64_t, ph->n);
	if (track_unhashed)
		ph->unhashed = g_try_new(uint64_t, bitmap_words(ph->n));
	if (!zeros || !ph->hash || (track_unhashed && !ph->unhashed)) {
		page_hashes_free(ph);
		return -ENOMEM;
	}
	ph->zero = XXH3_64bits(zeros, ph->granule);
	for (size_t i = 0; i < ph->n; i++)
		ph->hash[i] = ph->zero;
	if (track_unhashed)
		bitmap_set_range(ph->unhashed, 0, ph->n);
	return 0;
}

void page_hashes_free(struct page_hashes *ph)
{
	g_free(ph->hash);
	g_free(ph->unhashed);
	*ph = (struct page_hashes){ 0 };
}

void page_hashes_update(struct page_hashes *ph, const uint8_t *base, size_t first,
			size_t count)
{
	for (size_t i = first; i < first + count; i++)
		ph->hash[i] = XXH3_64bits(base + i * ph->granule, ph->granule);
	if (ph->unhashed)
		bitmap_clear_range(ph->unhashed, first, count);
}

void page_hashes_set_zero(struct page_hashes *ph, size_t first, size_t count)
{
	for (size_t i = first; i < first + count; i++) {
		if (page_hashes_pending(ph, i)) {
			ph->hash[i] = ph->zero;
			bitmap_clear_range(ph->unhashed, i, 1);
		}
	}
}

size_t page_hashes_count_pending(const struct page_hashes *ph)
{
	return ph->unhashed ? bitmap_count(ph->unhashed, ph->n) : 0;
}

void page_hashes_take(struct page_hashes *ph, size_t i, const uint8_t *bytes)
{
	ph->hash[i] = XXH3_64bits(bytes, ph->granule);
	if (ph->unhashed)
		bitmap_clear_range(ph->unhashed, i, 1);
}

bool page_hashes_pending(const struct page_hashes *ph, size_t i)
{
	return ph->unhashed && (ph->unhashed[i / 64] >> (i % 64)) & 1;
}

size_t page_hashes_next_unhashed(struct page_hashes *ph, size_t below, size_t max,
				 size_t *ret_len)
{
	below = MIN(below, ph->n);
	/* Two looks at most: from the cursor on, then from 0. */
	for (int pass = 0; pass < 2; pass++) {
		size_t p = bitmap_next_run(ph->unhashed, below, MIN(ph->cursor, below), max,
					   ret_len);

		if (p < below)
			return p;
		ph->cursor = 0;
	}
	return ph->n;
}

/* Of the digests as little-endian u64s, whatever this host's byte order. */
uint64_t page_hashes_digest(const struct page_hashes *ph)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return XXH3_64bits(ph->hash, ph->n * sizeof(*ph->hash));
#else
	XXH3_state_t *st = XXH3_createState();
	uint64_t h;

	if (!st)
		return 0;
	XXH3_64bits_reset(st);
	for (size_t i = 0; i < ph->n; i++) {
		uint64_t le = GUINT64_TO_LE(ph->hash[i]);

		XXH3_64bits_update(st, &le, sizeof(le));
	}
	h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
#endif
}

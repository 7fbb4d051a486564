/* SPDX-License-Identifier: MIT */
/* Dirty bitmaps: bit i of word i/64 is page i.  Pure functions, no I/O. */
#ifndef VRDMA_MIG_BITMAP_H
#define VRDMA_MIG_BITMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline size_t bitmap_words(size_t nbits) { return (nbits + 63) / 64; }

/*
 * Finds the first run of set bits at or after `from`, stopping at nbits and
 * at max_len bits.  Returns the run's first bit (nbits if there is none) and
 * its length in *ret_len.  Bits past nbits in the last word are ignored.
 */
size_t bitmap_next_run(const uint64_t *words, size_t nbits, size_t from,
		       size_t max_len, size_t *ret_len);
size_t bitmap_count(const uint64_t *words, size_t nbits);
/* Clears bits [first, first+len). */
void bitmap_clear_range(uint64_t *words, size_t first, size_t len);
/* Sets bits [first, first+len). */
void bitmap_set_range(uint64_t *words, size_t first, size_t len);
/* True if len bytes at p are all zero (len a multiple of 8, p 8-aligned). */
bool page_is_zero(const void *p, size_t len);

#endif

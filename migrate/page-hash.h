/* SPDX-License-Identifier: MIT */
/*
 * --verify's bookkeeping: one xxh3 digest per granule of a RAM block (a
 * page, at most PEER_GRANULE_MAX), taken while pages move, so that the
 * stop hashes only what its last round moved.  Both sides keep one per
 * block and compare a digest of the whole array at the end.  Pure
 * computation over memory the caller maps; no I/O.
 */
#ifndef VRDMA_MIG_PAGE_HASH_H
#define VRDMA_MIG_PAGE_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct page_hashes {
	uint64_t *hash;      /* one per granule */
	uint64_t *unhashed;  /* destination: granules not hashed yet (bitmap) */
	size_t n;            /* granules */
	size_t cursor;       /* where the next sweep looks */
	uint64_t zero;       /* the digest of a granule of zeros */
	uint32_t granule;    /* bytes */
};

/* The granule of a block with pages of page_size bytes. */
uint32_t page_hash_granule(uint32_t page_size);

/*
 * For a block of size bytes (a multiple of page_size).  The source starts
 * with every granule holding the digest of zeros: a page it never sends
 * was zero (or a hole), which is what a fresh destination holds.  The
 * destination (track_unhashed) starts with every granule still to hash:
 * its own zeros are checked too.  0 or -ENOMEM.
 */
int page_hashes_init(struct page_hashes *ph, uint64_t size, uint32_t page_size,
		     bool track_unhashed);
void page_hashes_free(struct page_hashes *ph);

/* Hashes granules [first, first + count) of the block mapped at base. */
void page_hashes_update(struct page_hashes *ph, const uint8_t *base, size_t first,
			size_t count);

/* Those of granules [first, first + count) not hashed yet hold zeros (a hole). */
void page_hashes_set_zero(struct page_hashes *ph, size_t first, size_t count);
/* How many granules are not hashed yet. */
size_t page_hashes_count_pending(const struct page_hashes *ph);
/* Granule i's digest, from a copy of its bytes. */
void page_hashes_take(struct page_hashes *ph, size_t i, const uint8_t *bytes);
/* Destination: granule i was never hashed. */
bool page_hashes_pending(const struct page_hashes *ph, size_t i);

/*
 * Destination: the next run of at most max granules below granule `below`
 * that were never hashed, from where the last sweep stopped (then from 0):
 * its first granule, its length in *ret_len; n if there is none.  The
 * caller hashes (or zeroes) some of it, then moves ph->cursor past that.
 */
size_t page_hashes_next_unhashed(struct page_hashes *ph, size_t below, size_t max,
				 size_t *ret_len);

/* The digest of the whole array: equal on both sides iff every granule is. */
uint64_t page_hashes_digest(const struct page_hashes *ph);

#endif

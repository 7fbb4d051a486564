/* SPDX-License-Identifier: MIT */
/* Numbers from command lines, checked whole. */
#ifndef VRDMA_PARSE_NUM_H
#define VRDMA_PARSE_NUM_H

#include <stdint.h>

/*
 * The decimal number s, if it lies in [min, max]: 0, or -EINVAL for
 * anything else (empty, a sign, trailing characters, overflow).  strtoull
 * alone would take "-1" as 2^64 - 1 and "12abc" as 12.
 */
int parse_u64_range(const char *s, uint64_t min, uint64_t max, uint64_t *ret);

#endif

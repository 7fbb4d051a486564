/* SPDX-License-Identifier: MIT */
/* Command lines: numbers checked whole, and the names of the options. */
#ifndef VRDMA_PARSE_NUM_H
#define VRDMA_PARSE_NUM_H

#include <getopt.h>
#include <stdint.h>

/*
 * The decimal number s, if it lies in [min, max]: 0, or -EINVAL for
 * anything else (empty, a sign, trailing characters, overflow).  strtoull
 * alone would take "-1" as 2^64 - 1 and "12abc" as 12.
 */
int parse_u64_range(const char *s, uint64_t min, uint64_t max, uint64_t *ret);

/*
 * The long name of the option that getopt_long() returned as OPT, for an
 * error message that names what the user typed ("?" if none has it).
 */
const char *option_long_name(const struct option *longopts, int opt);

#endif

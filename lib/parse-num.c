// SPDX-License-Identifier: MIT
#include "parse-num.h"

#include <errno.h>
#include <stdlib.h>

int parse_u64_range(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < min || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

const char *option_long_name(const struct option *longopts, int opt)
{
	for (; longopts->name; longopts++)
		if (longopts->val == opt)
			return longopts->name;
	return "?";
}

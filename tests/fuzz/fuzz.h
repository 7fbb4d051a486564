/* SPDX-License-Identifier: MIT */
/*
 * Shared by the libFuzzer targets: a property that must hold on whatever a
 * decoder accepted.  A broken property is a finding like a sanitizer report,
 * so it aborts (libFuzzer saves the input).
 */
#ifndef VRDMA_FUZZ_H
#define VRDMA_FUZZ_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: property broken: %s\n",        \
				__FILE__, __LINE__, #cond);                    \
			abort();                                               \
		}                                                              \
	} while (0)

#endif

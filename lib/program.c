// SPDX-License-Identifier: MIT
#include "program.h"

#include <stdlib.h>

void program_print_version(const struct program_info *prog)
{
	printf("%s %s\n", prog->name, VRDMA_VERSION);
}

int program_getopt(const struct program_info *prog, int argc, char **argv, const char *shortopts,
	       const struct option *longopts, int *longindex)
{
	int opt = getopt_long(argc, argv, shortopts, longopts, longindex);

	switch (opt) {
	case 'h':
		prog->usage(stdout);
		exit(EXIT_SUCCESS);
	case 'V':
		program_print_version(prog);
		exit(EXIT_SUCCESS);
	case '?':
		prog->usage(stderr);
		break;
	}
	return opt;
}

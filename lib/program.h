/* SPDX-License-Identifier: MIT */
/*
 * What every vrdma program does with --help, --version and an option that
 * getopt rejects: one behaviour in one place.  The programs' own options
 * stay theirs.
 */
#ifndef VRDMA_PROGRAM_H
#define VRDMA_PROGRAM_H

#include <getopt.h>
#include <stdio.h>

struct program_info {
	const char *name;		/* as --version prints it */
	void (*usage)(FILE *f);
};

/* "NAME VERSION" on stdout. */
void program_print_version(const struct program_info *prog);

/*
 * getopt_long() for prog, where 'h' is --help and 'V' is --version: they
 * print the usage on stdout, or the version, and end the process with
 * exit status 0, as a help text is the whole run.  An option that getopt
 * rejects prints the usage on stderr and comes back as '?'; every other
 * option comes back as getopt_long() returns it.
 */
int program_getopt(const struct program_info *prog, int argc, char **argv, const char *shortopts,
	       const struct option *longopts, int *longindex);

#endif

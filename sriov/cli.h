/* SPDX-License-Identifier: MIT */
/* vrdma-sriov's pieces: the commands (cli-cmds.c, cli-pool.c) and their
 * output (cli-out.c).  Private to the CLI. */
#ifndef VRDMA_SRIOV_CLI_H
#define VRDMA_SRIOV_CLI_H

#include <stdbool.h>

#include "json-out.h"
#include "sriov-internal.h"

enum cli_exit {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAILED = 1,
	CLI_EXIT_USAGE = 2,
	CLI_EXIT_NOT_FOUND = 3,
	CLI_EXIT_BUSY = 4,
	CLI_EXIT_EXHAUSTED = 5,
	CLI_EXIT_DENIED = 6,
	CLI_EXIT_BAD_DATA = 7,
};

struct cli {
	struct sriov_ctx ctx;
	bool json;
};

struct cli_command {
	const char *name;
	int (*run)(struct cli *cli, int argc, char **argv);
};

int cli_list(struct cli *cli, int argc, char **argv);
int cli_show(struct cli *cli, int argc, char **argv);
int cli_enable(struct cli *cli, int argc, char **argv);
int cli_set(struct cli *cli, int argc, char **argv);
int cli_assign(struct cli *cli, int argc, char **argv);
int cli_release(struct cli *cli, int argc, char **argv);
int cli_scrub(struct cli *cli, int argc, char **argv);
int cli_pool(struct cli *cli, int argc, char **argv);

/* Reports a failure once (stderr, or {"error": ...} with --json) and
 * returns the exit code for @err (-errno). */
int cli_fail(const struct cli *cli, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A usage error of one command: message and the command's usage. */
int cli_usage_error(const char *usage, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int cli_exit_code(int err);
/* For a command whose arguments are all positional: --help prints its
 * usage and exits 0, any other option is a usage error (-1); otherwise the
 * index of the first positional argument. */
int cli_help_only(int argc, char **argv, const char *usage);

JsonBuilder *cli_json_begin(void);
/* Ends the object cli_json_begin() opened and prints it on one line. */
void cli_json_print(JsonBuilder *b);
/* Like json_out_str(), but an unknown (NULL or empty) value is a JSON null. */
void cli_json_str(JsonBuilder *b, const char *name, const char *value);
void cli_json_fn(JsonBuilder *b, const struct sriov_fn *fn, const struct sriov_pool_entry *e);
void cli_json_assignment(JsonBuilder *b, const struct sriov_assignment *a);
void cli_json_left(JsonBuilder *b, const struct sriov_res_count *left);

const char *cli_kind_name(enum sriov_kind kind);
const char *cli_pool_state_name(enum sriov_pool_state s);
/* "pd 1, mr 2, ..." of the non-zero counts. */
char *cli_left_text(const struct sriov_res_count *left);

#endif

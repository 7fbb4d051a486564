// SPDX-License-Identifier: MIT
/*
 * vrdma-sriov: the operator's view of SR-IOV functions and the tenant pool.
 *
 *   vrdma-sriov [--sysfs-root DIR] [--sriov-state PATH] [--json] COMMAND ...
 *
 * Humans get tables and one-line results on stdout, errors on stderr; with
 * --json every command prints exactly one JSON object on stdout (an "error"
 * member on failure).  The work is all in sriov.h; this file only parses,
 * prints and maps errors to exit codes.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "log.h"
#include "program.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: vrdma-sriov [--sysfs-root DIR] [--sriov-state PATH] [--json] COMMAND ...\n"
		"\n"
		"SR-IOV functions (and plain RDMA devices) as a per-tenant pool.\n"
		"\n"
		"Commands:\n"
		"  list                        PFs, their VFs, other RDMA devices, pool state\n"
		"  show FUNCTION               one function (PCI address or RDMA device name)\n"
		"  enable --pf PCI --num-vfs N set the PF's VF count (non-zero only from 0)\n"
		"  set --vf PCI [settings]     per-VF settings through the PF (netlink)\n"
		"  assign --tenant T [--pf PCI] [--numa N]\n"
		"                              give T a free function (or print T's)\n"
		"  release --tenant T | --vf FUNCTION\n"
		"                              take it back and scrub it\n"
		"  scrub FUNCTION              retry the scrub of a released function\n"
		"  pool add|remove FUNCTION    make a non-VF RDMA device (rxe) assignable\n"
		"\n"
		"Options:\n"
		"  --sysfs-root DIR   sysfs to read (default /sys; tests use fake trees)\n"
		"  --sriov-state PATH pool state (default " SRIOV_DEFAULT_STATE ";\n"
		"                     vrdma-vhost's option of the same name)\n"
		"  --state-file PATH  deprecated spelling of --sriov-state\n"
		"  --json             one JSON object on stdout per command\n"
		"  -h, --help         this text (COMMAND --help: the command's)\n"
		"  --version          the version, then exit\n"
		"\n"
		"Exit codes: 0 done, 1 failed (kernel, netlink, I/O), 2 usage, 3 no such\n"
		"function/tenant, 4 busy (RDMA resources left, VFs in use, scrub pending),\n"
		"5 no free function, 6 belongs to another tenant, 7 malformed sysfs or\n"
		"state file.\n");
}

static const struct cli_command commands[] = {
	{ "list", cli_list },       { "show", cli_show },       { "enable", cli_enable },
	{ "set", cli_set },         { "assign", cli_assign },   { "release", cli_release },
	{ "scrub", cli_scrub },     { "pool", cli_pool },
};

static int no_netlink(void *opaque, int protocol, struct nl_msg *req,
		      int (*on_reply)(struct nl_msg *reply, void *arg), void *arg)
{
	(void)opaque, (void)protocol, (void)req, (void)on_reply, (void)arg;
	return -EPROTONOSUPPORT;
}

/* Tests on fake trees where no private network namespace is available:
 * netlink requests would reach the host's real interfaces.  Undocumented;
 * it can only make scrubs fail (nothing then proves a function clean). */
static const struct sriov_nl_ops nl_none = { .transact = no_netlink };

static const struct program_info program = { "vrdma-sriov", usage };

static int parse_global(int argc, char **argv, struct cli *cli)
{
	static const struct option longopts[] = {
		{ "sysfs-root", required_argument, NULL, 'r' },
		{ "sriov-state", required_argument, NULL, 's' },
		{ "state-file", required_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "test-no-netlink", no_argument, NULL, 'N' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	int opt;

	/* '+': stop at the command, whose options are its own. */
	while ((opt = program_getopt(&program, argc, argv, "+h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'r': cli->ctx.sysfs_root = optarg; break;
		case 's': cli->ctx.state_path = optarg; break;
		case 'S':
			/* The old name: unit files of operators still carry it. */
			log_warn("--state-file is deprecated: use --sriov-state");
			cli->ctx.state_path = optarg;
			break;
		case 'j': cli->json = true; break;
		case 'N': cli->ctx.nl = &nl_none; break;
		default: return -EINVAL;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return -EINVAL;
	}
	return optind;
}

int main(int argc, char **argv)
{
	struct cli cli = {
		.ctx = { .sysfs_root = "/sys", .state_path = SRIOV_DEFAULT_STATE,
			 .nl = &sriov_nl_kernel },
	};
	int first;

	log_init("vrdma-sriov", LOG_LVL_INFO);
	first = parse_global(argc, argv, &cli);
	if (first < 0)
		return CLI_EXIT_USAGE;
	for (size_t i = 0; i < G_N_ELEMENTS(commands); i++) {
		if (strcmp(argv[first], commands[i].name))
			continue;
		/* The command sees argv[0] = its name, like a program. */
		optind = 0;
		return commands[i].run(&cli, argc - first, argv + first);
	}
	log_error("unknown command '%s' (try --help)", argv[first]);
	return CLI_EXIT_USAGE;
}

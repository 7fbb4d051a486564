// SPDX-License-Identifier: MIT
/* vrdma-sriov assign, release, scrub, pool: the tenant pool. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "log.h"

static int state_error(const struct cli *cli, int r, const char *what)
{
	if (r == -EBADMSG)
		return cli_fail(cli, r, "%s: state file %s or sysfs is malformed", what,
				cli->ctx.state_path);
	if (r == -ELOOP)
		return cli_fail(cli, r, "%s: state file %s or its lock is a symlink: refused", what,
				cli->ctx.state_path);
	if (r == -ETIMEDOUT)
		return cli_fail(cli, r, "%s: the pool stayed locked (%s.lock) by another process",
				what, cli->ctx.state_path);
	return cli_fail(cli, r, "%s: %s", what, g_strerror(-r));
}

static const char assign_usage[] =
	"Usage: vrdma-sriov assign --tenant T [--pf PCI] [--numa N]\n"
	"Gives tenant T a free function (a VF, or a device added with 'pool add'),\n"
	"optionally of one PF or NUMA node, and prints its PCI address and RDMA\n"
	"device (\"-\" for no PCI address).  A tenant that already has one gets it\n"
	"again: one function per tenant.\n";

static int print_assignment(const struct cli *cli, const struct sriov_assignment *a)
{
	if (cli->json) {
		JsonBuilder *b = cli_json_begin();

		cli_json_assignment(b, a);
		cli_json_print(b);
	} else {
		printf("%s %s\n", a->pci[0] ? a->pci : "-", a->ibdev);
	}
	return CLI_EXIT_OK;
}

int cli_assign(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "tenant", required_argument, NULL, 't' },
		{ "pf", required_argument, NULL, 'p' },
		{ "numa", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct sriov_filter filter = { .numa_node = -1 };
	struct sriov_assignment a;
	const char *tenant = NULL;
	int opt, r;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 't': tenant = optarg; break;
		case 'p': filter.pf = optarg; break;
		case 'n':
			if (sriov_parse_numa(optarg, &filter.numa_node) < 0)
				return cli_usage_error(assign_usage, "bad NUMA node '%s'", optarg);
			break;
		case 'h': fputs(assign_usage, stdout); return CLI_EXIT_OK;
		default: return cli_usage_error(assign_usage, "bad option");
		}
	}
	if (!tenant || optind < argc)
		return cli_usage_error(assign_usage, "assign needs --tenant");
	if (!sriov_tenant_valid(tenant))
		return cli_usage_error(assign_usage, "bad tenant name '%s'", tenant);
	if (filter.pf && !sriov_pci_valid(filter.pf))
		return cli_usage_error(assign_usage, "'%s' is not a PCI address", filter.pf);
	r = sriov_tenant_acquire(&cli->ctx, tenant, &filter, &a);
	if (r == -ENOSPC)
		return cli_fail(cli, r, "no free function for tenant %s%s", tenant,
				filter.pf || filter.numa_node >= 0 ? " with these constraints" : "");
	if (r == -ENODEV)
		return cli_fail(cli, r, "tenant %s's function is gone from sysfs", tenant);
	if (r < 0)
		return state_error(cli, r, "assign");
	return print_assignment(cli, &a);
}

static int release_result(const struct cli *cli, int r, const char *function,
			  const struct sriov_res_count *left)
{
	g_autofree char *text = cli_left_text(left);

	if (r == -EBUSY && *text)
		return cli_fail(cli, r, "%s is released but not scrubbed: user processes still "
				"hold RDMA resources on it (%s); it will not be handed out until "
				"'vrdma-sriov scrub %s' succeeds", function, text, function);
	if (r == -EPROTONOSUPPORT)
		return cli_fail(cli, r, "%s is released but not scrubbed: this kernel has no RDMA "
				"netlink, so nothing proves the old tenant's RDMA resources are "
				"gone; it will not be handed out", function);
	if (r < 0)
		return cli_fail(cli, r, "%s is released but not scrubbed (%s); it will not be "
				"handed out until 'vrdma-sriov scrub %s' succeeds", function,
				g_strerror(-r), function);
	if (cli->json) {
		JsonBuilder *b = cli_json_begin();

		cli_json_str(b, "function", function);
		cli_json_str(b, "state", "free");
		cli_json_print(b);
	} else {
		printf("%s: scrubbed and free\n", function);
	}
	return CLI_EXIT_OK;
}

static const char release_usage[] =
	"Usage: vrdma-sriov release --tenant T | --vf FUNCTION\n"
	"Takes the tenant's function back and scrubs it (see 'scrub').  While user\n"
	"processes still hold RDMA resources on it, it stays 'dirty' (exit 4) and is\n"
	"never handed out; run 'vrdma-sriov scrub FUNCTION' once they are gone.\n";

int cli_release(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "tenant", required_argument, NULL, 't' },
		{ "vf", required_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *tenant = NULL, *device = NULL;
	char function[SRIOV_NAME_LEN] = "";
	struct sriov_res_count left;
	int opt, r;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 't': tenant = optarg; break;
		case 'v': device = optarg; break;
		case 'h': fputs(release_usage, stdout); return CLI_EXIT_OK;
		default: return cli_usage_error(release_usage, "bad option");
		}
	}
	if (!tenant == !device || optind < argc)
		return cli_usage_error(release_usage, "release needs --tenant or --vf (one)");
	if (tenant && !sriov_tenant_valid(tenant))
		return cli_usage_error(release_usage, "bad tenant name '%s'", tenant);
	r = sriov_pool_release(&cli->ctx, tenant, device, function, &left);
	if (r == -EBUSY && sriov_lease_held(&cli->ctx, function) > 0)
		return cli_fail(cli, r, "%s is still in use by a running back end: stop it first "
				"(nothing changed)", function);
	if (r == -ENOENT)
		return cli_fail(cli, r, "%s %s has no function assigned",
				tenant ? "tenant" : "function", tenant ? tenant : device);
	if (r < 0 && !function[0])
		return state_error(cli, r, "release");
	return release_result(cli, r, function, &left);
}

static const char scrub_usage[] =
	"Usage: vrdma-sriov scrub FUNCTION\n"
	"Retries the scrub of a released (dirty) pool function; anything else is\n"
	"refused.  Checks that no back end holds it and no user process holds RDMA\n"
	"resources (contexts, PDs, MRs, CQs, QPs) on its RDMA device, then gives it\n"
	"a fresh random MAC (or node and port GUIDs) and resets link state, trust\n"
	"and spoof checking (not VLAN, QoS or rate).  It becomes free when this\n"
	"succeeds.\n";

int cli_scrub(struct cli *cli, int argc, char **argv)
{
	struct sriov_res_count left;
	int r = cli_help_only(argc, argv, scrub_usage);

	if (r < 0)
		return CLI_EXIT_USAGE;
	if (r != argc - 1)
		return cli_usage_error(scrub_usage, "scrub needs one FUNCTION");
	r = sriov_pool_scrub(&cli->ctx, argv[optind], &left);
	if (r == -ENOENT)
		return cli_fail(cli, r, "no function '%s'", argv[optind]);
	if (r == -EPERM)
		return cli_fail(cli, r, "%s is assigned: release it first", argv[optind]);
	if (r == -EINVAL)
		return cli_fail(cli, r, "%s is not waiting for a scrub: only released pool "
				"functions are scrubbed", argv[optind]);
	if (r == -EBUSY && sriov_lease_held(&cli->ctx, argv[optind]) > 0)
		return cli_fail(cli, r, "%s is still in use by a running back end", argv[optind]);
	return release_result(cli, r, argv[optind], &left);
}

static const char pool_usage[] =
	"Usage: vrdma-sriov pool add|remove FUNCTION\n"
	"VFs with an RDMA device are pool members by themselves.  'add' makes any\n"
	"other RDMA device assignable (an rxe device standing in for a VF, a whole\n"
	"PCI function with an Ethernet netdev; never a PF); 'remove' undoes it (not\n"
	"while assigned or dirty).\n";

int cli_pool(struct cli *cli, int argc, char **argv)
{
	bool add;
	int r = cli_help_only(argc, argv, pool_usage);

	if (r < 0)
		return CLI_EXIT_USAGE;
	if (r != argc - 2 || (strcmp(argv[optind], "add") && strcmp(argv[optind], "remove")))
		return cli_usage_error(pool_usage, "pool needs add|remove and one FUNCTION");
	add = !strcmp(argv[optind], "add");
	r = add ? sriov_pool_add(&cli->ctx, argv[optind + 1])
		: sriov_pool_remove(&cli->ctx, argv[optind + 1]);
	if (r == -ENOENT)
		return cli_fail(cli, r, "%s: no such %s", argv[optind + 1],
				add ? "function in sysfs" : "explicit pool member");
	if (r == -ENODEV)
		return cli_fail(cli, r, "%s has no RDMA device", argv[optind + 1]);
	if (r == -EBUSY)
		return cli_fail(cli, r, "%s is assigned, waiting for its scrub, or in use by a "
				"running back end", argv[optind + 1]);
	if (r == -EINVAL)
		return cli_fail(cli, r, "%s is a PF (the host's NIC): its VFs are the pool",
				argv[optind + 1]);
	if (r == -EOPNOTSUPP)
		return cli_fail(cli, r, "%s has no identity a scrub could reset (no netdev, or "
				"InfiniBand): it could never be handed to a second tenant",
				argv[optind + 1]);
	if (r < 0)
		return state_error(cli, r, add ? "pool add" : "pool remove");
	if (cli->json) {
		JsonBuilder *b = cli_json_begin();

		cli_json_str(b, "function", argv[optind + 1]);
		cli_json_str(b, "pool", add ? "member" : "removed");
		cli_json_print(b);
	} else {
		printf("%s: %s\n", argv[optind + 1], add ? "in the pool" : "out of the pool");
	}
	return CLI_EXIT_OK;
}

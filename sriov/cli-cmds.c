// SPDX-License-Identifier: MIT
/* vrdma-sriov list, show, enable, set: discovery and configuration. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "log.h"

static int load_view(const struct cli *cli, struct sriov_scan **ret_scan,
		     struct sriov_pool **ret_pool)
{
	int r = sriov_scan(cli->ctx.sysfs_root, ret_scan);

	if (r < 0)
		return cli_fail(cli, r, "cannot read sysfs at %s: %s", cli->ctx.sysfs_root,
				g_strerror(-r));
	r = sriov_pool_load(cli->ctx.state_path, ret_pool);
	if (r < 0)
		return cli_fail(cli, r, "state file %s: %s", cli->ctx.state_path,
				r == -EBADMSG ? "malformed (not touched; fix or move it)"
					      : g_strerror(-r));
	return 0;
}

static const char *or_dash(const char *s)
{
	return s && *s ? s : "-";
}

static void print_row(const struct sriov_fn *fn, const struct sriov_pool_entry *e)
{
	char numa[16] = "-", pool[96];

	if (fn->numa_node >= 0)
		snprintf(numa, sizeof(numa), "%d", fn->numa_node);
	snprintf(pool, sizeof(pool), "%s%s%s", e->state == SRIOV_POOL_NONE ? "-"
					       : cli_pool_state_name(e->state),
		 e->tenant[0] ? " " : "", e->tenant);
	printf("%-13s %-4s %-13s %-10s %-12s %-4s %s", fn->id, cli_kind_name(fn->kind),
	       or_dash(fn->pf), or_dash(fn->ibdev), or_dash(fn->netdev), numa, pool);
	if (fn->kind == SRIOV_PF)
		printf("  vfs %u/%u driver %s", fn->num_vfs, fn->total_vfs, or_dash(fn->driver));
	if (fn->status < 0)
		printf("  ERROR: %s", fn->problem);
	putchar('\n');
}

static const char list_usage[] =
	"Usage: vrdma-sriov list\n"
	"PFs (with VF counts), their VFs in order, then RDMA devices that are\n"
	"neither (plain PCI, soft devices such as rxe), each with its pool state.\n";

int cli_list(struct cli *cli, int argc, char **argv)
{
	__attribute__((cleanup(sriov_scan_freep))) struct sriov_scan *scan = NULL;
	__attribute__((cleanup(sriov_pool_freep))) struct sriov_pool *pool = NULL;
	JsonBuilder *b = NULL;
	int r = cli_help_only(argc, argv, list_usage);

	if (r < 0)
		return CLI_EXIT_USAGE;
	if (r < argc)
		return cli_usage_error(list_usage, "unexpected argument '%s'", argv[r]);
	r = load_view(cli, &scan, &pool);
	if (r)
		return r;
	if (cli->json) {
		b = cli_json_begin();
		json_builder_set_member_name(b, "functions");
		json_builder_begin_array(b);
	} else {
		printf("%-13s %-4s %-13s %-10s %-12s %-4s %s\n", "FUNCTION", "KIND", "PF", "IBDEV",
		       "NETDEV", "NUMA", "POOL");
	}
	for (size_t i = 0; i < scan->n; i++) {
		struct sriov_pool_entry e;

		sriov_pool_lookup(pool, &scan->fns[i], &e);
		if (!b) {
			print_row(&scan->fns[i], &e);
			continue;
		}
		json_builder_begin_object(b);
		cli_json_fn(b, &scan->fns[i], &e);
		json_builder_end_object(b);
	}
	if (b) {
		json_builder_end_array(b);
		cli_json_print(b);
	}
	return CLI_EXIT_OK;
}

static void print_fn(const struct sriov_fn *fn, const struct sriov_pool_entry *e)
{
	printf("function:   %s (%s)\n", fn->id, cli_kind_name(fn->kind));
	if (fn->kind == SRIOV_VF)
		printf("pf:         %s (virtfn%d)\n", fn->pf, fn->vf_index);
	if (fn->kind == SRIOV_PF)
		printf("vfs:        %u of %u\n", fn->num_vfs, fn->total_vfs);
	printf("driver:     %s\n", or_dash(fn->driver));
	printf("ibdev:      %s%s\n", or_dash(fn->ibdev),
	       !fn->ibdev[0] ? "" : fn->infiniband ? " (InfiniBand)" : " (Ethernet)");
	printf("uverbs:     %s\n", or_dash(fn->uverbs));
	printf("netdev:     %s\n", or_dash(fn->netdev));
	if (fn->numa_node >= 0)
		printf("numa node:  %d\n", fn->numa_node);
	else
		printf("numa node:  -\n");
	printf("pool:       %s%s%s\n", cli_pool_state_name(e->state), e->tenant[0] ? " " : "",
	       e->tenant);
	if (fn->status < 0)
		printf("ERROR:      %s\n", fn->problem);
}

static const char show_usage[] =
	"Usage: vrdma-sriov show FUNCTION\n"
	"FUNCTION is a PCI address (DDDD:BB:DD.F) or an RDMA device name.  Also\n"
	"shows the RDMA resources user processes hold on it, where the kernel can\n"
	"tell (RDMA netlink).\n";

static void show_resources(const struct cli *cli, const struct sriov_fn *fn, JsonBuilder *b)
{
	struct sriov_res_count c;
	g_autofree char *text = NULL;
	int r;

	if (!fn->ibdev[0])
		return;
	r = sriov_rdma_user_resources(cli->ctx.nl, fn->ibdev, &c);
	if (r < 0) {
		if (b)
			cli_json_str(b, "resources-error", g_strerror(-r));
		else
			printf("resources:  unknown (%s)\n", g_strerror(-r));
		return;
	}
	if (b) {
		cli_json_left(b, &c);
		return;
	}
	text = cli_left_text(&c);
	printf("resources:  %s\n", *text ? text : "none held by user processes");
}

int cli_show(struct cli *cli, int argc, char **argv)
{
	__attribute__((cleanup(sriov_scan_freep))) struct sriov_scan *scan = NULL;
	__attribute__((cleanup(sriov_pool_freep))) struct sriov_pool *pool = NULL;
	const struct sriov_fn *fn;
	struct sriov_pool_entry e;
	JsonBuilder *b = NULL;
	int r = cli_help_only(argc, argv, show_usage);

	if (r < 0)
		return CLI_EXIT_USAGE;
	if (r != argc - 1)
		return cli_usage_error(show_usage, "show needs exactly one FUNCTION");
	r = load_view(cli, &scan, &pool);
	if (r)
		return r;
	fn = sriov_scan_find(scan, argv[argc - 1]);
	if (!fn)
		return cli_fail(cli, -ENOENT, "no function '%s' in %s", argv[argc - 1],
				cli->ctx.sysfs_root);
	sriov_pool_lookup(pool, fn, &e);
	if (cli->json) {
		b = cli_json_begin();
		cli_json_fn(b, fn, &e);
	} else {
		print_fn(fn, &e);
	}
	show_resources(cli, fn, b);
	if (b)
		cli_json_print(b);
	return fn->status < 0 ? cli_exit_code(fn->status) : CLI_EXIT_OK;
}

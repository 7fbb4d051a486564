// SPDX-License-Identifier: MIT
/* vrdma-sriov output: errors to exit codes, JSON objects. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "log.h"

int cli_exit_code(int err)
{
	switch (-err) {
	case 0: return CLI_EXIT_OK;
	case EINVAL: return CLI_EXIT_USAGE;
	case ENOENT:
	case ENODEV: return CLI_EXIT_NOT_FOUND;
	case EBUSY: return CLI_EXIT_BUSY;
	case ENOSPC: return CLI_EXIT_EXHAUSTED;
	case EPERM:
	case EEXIST: return CLI_EXIT_DENIED;
	case EBADMSG:
	case ENOTUNIQ:
	case ENOLINK: return CLI_EXIT_BAD_DATA;
	default: return CLI_EXIT_FAILED;
	}
}

int cli_fail(const struct cli *cli, int err, const char *fmt, ...)
{
	g_autofree char *text = NULL;
	va_list ap;

	va_start(ap, fmt);
	text = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	if (cli->json) {
		JsonBuilder *b = cli_json_begin();

		cli_json_str(b, "error", text);
		json_out_int(b, "exit-code", cli_exit_code(err));
		cli_json_print(b);
	}
	log_error("%s", text);
	return cli_exit_code(err);
}

int cli_usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;

	fputs("vrdma-sriov: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%s", usage);
	return CLI_EXIT_USAGE;
}

int cli_help_only(int argc, char **argv, const char *usage)
{
	static const struct option longopts[] = { { "help", no_argument, NULL, 'h' }, { 0 } };
	int opt;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt == 'h') {
			fputs(usage, stdout);
			exit(CLI_EXIT_OK);
		}
		cli_usage_error(usage, "bad option");
		return -1;
	}
	return optind;
}

JsonBuilder *cli_json_begin(void)
{
	JsonBuilder *b = json_builder_new();

	json_builder_begin_object(b);
	return b;
}

void cli_json_print(JsonBuilder *b)
{
	g_autofree char *text = NULL;

	json_builder_end_object(b);
	text = json_out_text(b, FALSE);
	printf("%s\n", text);
	g_object_unref(b);
}

void cli_json_str(JsonBuilder *b, const char *name, const char *value)
{
	json_builder_set_member_name(b, name);
	if (value && *value)
		json_builder_add_string_value(b, value);
	else
		json_builder_add_null_value(b);
}

const char *cli_kind_name(enum sriov_kind kind)
{
	switch (kind) {
	case SRIOV_PF: return "pf";
	case SRIOV_VF: return "vf";
	case SRIOV_PLAIN: return "pci";
	case SRIOV_SOFT: return "soft";
	}
	return "?";
}

const char *cli_pool_state_name(enum sriov_pool_state s)
{
	switch (s) {
	case SRIOV_POOL_NONE: return "none";
	case SRIOV_POOL_FREE: return "free";
	case SRIOV_POOL_ASSIGNED: return "assigned";
	case SRIOV_POOL_DIRTY: return "dirty";
	}
	return "?";
}

static void json_pool(JsonBuilder *b, const struct sriov_pool_entry *e)
{
	json_builder_set_member_name(b, "pool");
	json_builder_begin_object(b);
	cli_json_str(b, "state", cli_pool_state_name(e->state));
	cli_json_str(b, "tenant", e->tenant);
	if (e->since)
		json_out_int(b, "since", e->since);
	json_builder_end_object(b);
}

/* How a tenant's back end reaches a function: the same keys in 'show' and 'assign'. */
static void json_reached_by(JsonBuilder *b, const char *ibdev, const char *uverbs,
			    const char *netdev, int numa_node)
{
	cli_json_str(b, "ibdev", ibdev);
	cli_json_str(b, "uverbs", uverbs);
	cli_json_str(b, "netdev", netdev);
	json_out_int(b, "numa-node", numa_node);
}

void cli_json_fn(JsonBuilder *b, const struct sriov_fn *fn, const struct sriov_pool_entry *e)
{
	cli_json_str(b, "function", fn->id);
	cli_json_str(b, "kind", cli_kind_name(fn->kind));
	cli_json_str(b, "pci", fn->pci);
	cli_json_str(b, "pf", fn->pf);
	if (fn->kind == SRIOV_VF)
		json_out_int(b, "vf-index", fn->vf_index);
	if (fn->kind == SRIOV_PF) {
		json_out_int(b, "total-vfs", fn->total_vfs);
		json_out_int(b, "num-vfs", fn->num_vfs);
	}
	cli_json_str(b, "driver", fn->driver);
	json_reached_by(b, fn->ibdev, fn->uverbs, fn->netdev, fn->numa_node);
	cli_json_str(b, "link-layer", !fn->ibdev[0] ? NULL
				      : fn->infiniband ? "InfiniBand" : "Ethernet");
	cli_json_str(b, "problem", fn->status < 0 ? fn->problem : NULL);
	if (e)
		json_pool(b, e);
}

void cli_json_assignment(JsonBuilder *b, const struct sriov_assignment *a)
{
	cli_json_str(b, "function", a->function);
	cli_json_str(b, "pci", a->pci);
	cli_json_str(b, "pf", a->pf);
	json_reached_by(b, a->ibdev, a->uverbs, a->netdev, a->numa_node);
	cli_json_str(b, "tenant", a->tenant);
	json_out_bool(b, "new", a->new);
}

void cli_json_left(JsonBuilder *b, const struct sriov_res_count *left)
{
	json_builder_set_member_name(b, "resources-left");
	json_builder_begin_object(b);
	json_out_int(b, "ctx", left->ctx);
	json_out_int(b, "pd", left->pd);
	json_out_int(b, "mr", left->mr);
	json_out_int(b, "cq", left->cq);
	json_out_int(b, "qp", left->qp);
	json_builder_end_object(b);
}

char *cli_left_text(const struct sriov_res_count *left)
{
	const struct { const char *name; unsigned n; } items[] = {
		{ "ctx", left->ctx }, { "pd", left->pd }, { "mr", left->mr },
		{ "cq", left->cq },   { "qp", left->qp },
	};
	GString *s = g_string_new(NULL);

	for (size_t i = 0; i < G_N_ELEMENTS(items); i++)
		if (items[i].n)
			g_string_append_printf(s, "%s%s %u", s->len ? ", " : "", items[i].name,
					       items[i].n);
	return g_string_free(s, FALSE);
}

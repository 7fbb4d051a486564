// SPDX-License-Identifier: MIT
/* vrdma-sriov enable and set: VF count and per-VF settings. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "log.h"

static const char enable_usage[] =
	"Usage: vrdma-sriov enable --pf PCI --num-vfs N\n"
	"Sets the PF's number of VFs.  A non-zero count changes only through 0,\n"
	"and only while none of the VFs that would disappear is assigned or\n"
	"waiting for its scrub.  The PF's driver must be bound.\n";

static int enable_error(const struct cli *cli, int r, const char *pf, unsigned n,
			const char *tenant)
{
	switch (-r) {
	case ENOENT: return cli_fail(cli, r, "no PCI function %s", pf);
	case EOPNOTSUPP: return cli_fail(cli, r, "%s is not SR-IOV capable", pf);
	case ERANGE: return cli_fail(cli, r, "%s supports fewer than %u VFs", pf, n);
	case ENXIO:
		return cli_fail(cli, r, "no driver bound to %s: bind the PF's driver first", pf);
	case EBADMSG: return cli_fail(cli, r, "sysfs of %s is malformed", pf);
	case EBUSY:
		if (tenant[0])
			return cli_fail(cli, r, "busy: a VF of %s is held for tenant %s "
					"(assigned, or released and not yet scrubbed)", pf, tenant);
		return cli_fail(cli, r, "busy: %s already has VFs; a non-zero count changes "
				"only through 0 (enable --pf %s --num-vfs 0 first)", pf, pf);
	default: return cli_fail(cli, r, "cannot set the VFs of %s: %s", pf, g_strerror(-r));
	}
}

static int parse_count(const char *s, unsigned *ret)
{
	unsigned long v;

	if (sriov_parse_uint(s, 65535, &v) < 0)
		return -EINVAL;
	*ret = (unsigned)v;
	return 0;
}

int cli_enable(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "pf", required_argument, NULL, 'p' },
		{ "num-vfs", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char tenant[SRIOV_TENANT_LEN], pf[SRIOV_PCI_LEN];
	const char *pf_arg = NULL, *n_arg = NULL;
	unsigned n;
	int opt, r;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p': pf_arg = optarg; break;
		case 'n': n_arg = optarg; break;
		case 'h': fputs(enable_usage, stdout); return CLI_EXIT_OK;
		default: return cli_usage_error(enable_usage, "bad option");
		}
	}
	if (!pf_arg || !n_arg || optind < argc)
		return cli_usage_error(enable_usage, "enable needs --pf and --num-vfs");
	if (sriov_pci_normalize(pf_arg, pf) < 0)
		return cli_usage_error(enable_usage, "'%s' is not a PCI address", pf_arg);
	if (parse_count(n_arg, &n) < 0)
		return cli_usage_error(enable_usage, "'%s' is not a VF count", n_arg);
	r = sriov_pool_set_num_vfs(&cli->ctx, pf, n, tenant);
	if (r < 0)
		return enable_error(cli, r, pf, n, tenant);
	if (cli->json) {
		JsonBuilder *b = cli_json_begin();

		cli_json_str(b, "pf", pf);
		json_out_int(b, "num-vfs", n);
		cli_json_print(b);
	} else {
		printf("%s: %u VFs\n", pf, n);
	}
	return CLI_EXIT_OK;
}

static const char set_usage[] =
	"Usage: vrdma-sriov set --vf PCI [--mac MAC] [--trust on|off] [--spoofchk on|off]\n"
	"                       [--link-state auto|enable|disable]\n"
	"                       [--node-guid GUID] [--port-guid GUID]\n"
	"Per-VF settings, sent to the PF's netdev (netlink).  MAC: aa:bb:cc:dd:ee:ff;\n"
	"GUID: eight colon-separated hex bytes (InfiniBand VFs).\n";

/* @n colon-separated hex bytes, exactly. */
static int parse_hex_bytes(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char byte[3] = { s[0], s[0] ? s[1] : 0, 0 };

		if (!g_ascii_isxdigit(byte[0]) || !g_ascii_isxdigit(byte[1]))
			return -EINVAL;
		out[i] = (uint8_t)strtoul(byte, NULL, 16);
		s += 2;
		if (*s != (i + 1 < n ? ':' : '\0'))
			return -EINVAL;
		s += i + 1 < n;
	}
	return 0;
}

static int parse_guid(const char *s, uint64_t *ret)
{
	uint8_t b[8];

	if (parse_hex_bytes(s, b, sizeof(b)) < 0)
		return -EINVAL;
	*ret = 0;
	for (size_t i = 0; i < sizeof(b); i++)
		*ret = *ret << 8 | b[i];
	return 0;
}

static int parse_bool(const char *s, bool *ret)
{
	if (strcmp(s, "on") && strcmp(s, "off"))
		return -EINVAL;
	*ret = !strcmp(s, "on");
	return 0;
}

static int parse_link_state(const char *s, enum sriov_link_state *ret)
{
	static const char *const names[] = { "auto", "enable", "disable" };

	for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
		if (!strcmp(s, names[i])) {
			*ret = (enum sriov_link_state)i;
			return 0;
		}
	return -EINVAL;
}

static int parse_setting(int opt, const char *arg, struct sriov_vf_cfg *cfg)
{
	switch (opt) {
	case 'm': cfg->set |= SRIOV_SET_MAC; return parse_hex_bytes(arg, cfg->mac, 6);
	case 't': cfg->set |= SRIOV_SET_TRUST; return parse_bool(arg, &cfg->trust);
	case 's': cfg->set |= SRIOV_SET_SPOOFCHK; return parse_bool(arg, &cfg->spoofchk);
	case 'l':
		cfg->set |= SRIOV_SET_LINK_STATE;
		return parse_link_state(arg, &cfg->link_state);
	case 'N': cfg->set |= SRIOV_SET_NODE_GUID; return parse_guid(arg, &cfg->node_guid);
	case 'P': cfg->set |= SRIOV_SET_PORT_GUID; return parse_guid(arg, &cfg->port_guid);
	}
	return -EINVAL;
}

static const char *setting_name(unsigned bit)
{
	switch (bit) {
	case SRIOV_SET_MAC: return "mac";
	case SRIOV_SET_TRUST: return "trust";
	case SRIOV_SET_SPOOFCHK: return "spoofchk";
	case SRIOV_SET_LINK_STATE: return "link-state";
	case SRIOV_SET_NODE_GUID: return "node-guid";
	case SRIOV_SET_PORT_GUID: return "port-guid";
	}
	return "?";
}

static int apply_settings(const struct cli *cli, const char *vf, const struct sriov_vf_cfg *cfg)
{
	__attribute__((cleanup(sriov_scan_freep))) struct sriov_scan *scan = NULL;
	const struct sriov_fn *fn;
	unsigned failed;
	int ifindex, r;

	r = sriov_scan(cli->ctx.sysfs_root, &scan);
	if (r < 0)
		return cli_fail(cli, r, "cannot read sysfs: %s", g_strerror(-r));
	fn = sriov_scan_find(scan, vf);
	if (!fn || fn->kind != SRIOV_VF)
		return cli_fail(cli, -ENOENT, "%s is not a VF", vf);
	if (fn->status < 0)
		return cli_fail(cli, fn->status, "%s: %s", vf, fn->problem);
	r = sriov_pf_ifindex(cli->ctx.sysfs_root, fn->pf, &ifindex);
	if (r < 0)
		return cli_fail(cli, r, "PF %s of %s has no usable netdev: %s", fn->pf, vf,
				g_strerror(-r));
	r = sriov_vf_configure(cli->ctx.nl, ifindex, (unsigned)fn->vf_index, cfg, &failed);
	if (r < 0)
		return cli_fail(cli, r, "%s (VF %d of %s): setting %s failed: %s", vf,
				fn->vf_index, fn->pf, setting_name(failed), g_strerror(-r));
	return CLI_EXIT_OK;
}

int cli_set(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "vf", required_argument, NULL, 'v' },
		{ "mac", required_argument, NULL, 'm' },
		{ "trust", required_argument, NULL, 't' },
		{ "spoofchk", required_argument, NULL, 's' },
		{ "link-state", required_argument, NULL, 'l' },
		{ "node-guid", required_argument, NULL, 'N' },
		{ "port-guid", required_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct sriov_vf_cfg cfg = { 0 };
	const char *vf = NULL;
	char pci[SRIOV_PCI_LEN];
	int opt, r;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt == 'h') {
			fputs(set_usage, stdout);
			return CLI_EXIT_OK;
		}
		if (opt == 'v') {
			vf = optarg;
			continue;
		}
		if (opt == '?' || parse_setting(opt, optarg, &cfg) < 0)
			return cli_usage_error(set_usage, "bad option or value");
	}
	if (!vf || !cfg.set || optind < argc)
		return cli_usage_error(set_usage, "set needs --vf and at least one setting");
	if (sriov_pci_normalize(vf, pci) < 0)
		return cli_usage_error(set_usage, "'%s' is not a PCI address", vf);
	r = apply_settings(cli, pci, &cfg);
	if (r == CLI_EXIT_OK && cli->json) {
		JsonBuilder *b = cli_json_begin();

		cli_json_str(b, "vf", pci);
		json_out_int(b, "settings", cfg.set);
		cli_json_print(b);
	} else if (r == CLI_EXIT_OK) {
		printf("%s: settings applied\n", pci);
	}
	return r;
}

// SPDX-License-Identifier: MIT
/*
 * Discovery: PFs and their VFs from <root>/bus/pci/devices, then every RDMA
 * device of <root>/class/infiniband that is not one of them.  A function
 * whose sysfs is inconsistent is still listed, with status and problem set,
 * so that one broken VF never hides the others (and is never assigned).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sriov-internal.h"

struct scan_ctx {
	const char *root;
	GArray *fns;       /* struct sriov_fn */
	GHashTable *verbs; /* ibdev -> "uverbsN" */
};

static void set_problem(struct sriov_fn *fn, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_problem(struct sriov_fn *fn, int err, const char *fmt, ...)
{
	va_list ap;

	if (fn->status < 0)
		return; /* the first problem is the one to fix first */
	fn->status = err;
	va_start(ap, fmt);
	vsnprintf(fn->problem, sizeof(fn->problem), fmt, ap);
	va_end(ap);
}

/* Sources were validated to fit; g_strlcpy() keeps that true regardless. */
static void copy_str(char *dst, size_t size, const char *src)
{
	g_strlcpy(dst, src, size);
}

static char *pci_path(const struct scan_ctx *c, const char *pci, const char *attr)
{
	return g_build_filename(c->root, "bus/pci/devices", pci, attr, NULL);
}

static bool is_uverbs_name(const char *s)
{
	unsigned long v;

	return g_str_has_prefix(s, "uverbs") && sriov_parse_uint(s + 6, 1u << 20, &v) == 0;
}

/* ibdev -> uverbs char device, from <root>/class/infiniband_verbs/\*\/ibdev. */
static void load_verbs(struct scan_ctx *c)
{
	g_autofree char *dir = g_build_filename(c->root, "class/infiniband_verbs", NULL);
	g_autoptr(GPtrArray) names = NULL;

	if (sriov_list_dir(dir, is_uverbs_name, &names) < 0)
		return;
	for (guint i = 0; i < names->len; i++) {
		g_autofree char *p = g_build_filename(dir, names->pdata[i], "ibdev", NULL);
		char buf[SRIOV_ATTR_MAX + 1];

		if (sriov_read_attr(p, buf) == 0 && sriov_name_valid(buf))
			g_hash_table_insert(c->verbs, g_strdup(buf), g_strdup(names->pdata[i]));
	}
}

/* RDMA device details that do not depend on PCI: uverbs, link layer. */
static void fill_ibdev(struct scan_ctx *c, struct sriov_fn *fn)
{
	g_autofree char *ll = g_build_filename(c->root, "class/infiniband", fn->ibdev,
					       "ports/1/link_layer", NULL);
	const char *uverbs = g_hash_table_lookup(c->verbs, fn->ibdev);
	char buf[SRIOV_ATTR_MAX + 1];
	int r;

	if (uverbs)
		snprintf(fn->uverbs, sizeof(fn->uverbs), "/dev/infiniband/%s", uverbs);
	r = sriov_read_attr(ll, buf);
	if (r == -ENOENT)
		return;
	if (r == 0 && !strcmp(buf, "InfiniBand"))
		fn->infiniband = true;
	else if (r < 0 || strcmp(buf, "Ethernet"))
		set_problem(fn, -EBADMSG, "%s: not InfiniBand or Ethernet", ll);
}

static void fill_pci_ibdev(struct scan_ctx *c, struct sriov_fn *fn)
{
	g_autofree char *dir = pci_path(c, fn->pci, "infiniband");
	g_autoptr(GPtrArray) names = NULL;
	int r = sriov_list_dir(dir, NULL, &names);

	if (r == -ENOENT)
		return;
	if (r < 0) {
		set_problem(fn, r, "%s: %s", dir, g_strerror(-r));
		return;
	}
	if (names->len > 1) {
		set_problem(fn, -ENOTUNIQ, "%u RDMA devices under one PCI function (%s, %s)",
			    names->len, (char *)names->pdata[0], (char *)names->pdata[1]);
		return;
	}
	if (names->len == 0)
		return;
	if (!sriov_name_valid(names->pdata[0])) {
		set_problem(fn, -EBADMSG, "%s: bad RDMA device name", dir);
		return;
	}
	copy_str(fn->ibdev, sizeof(fn->ibdev), names->pdata[0]);
	fill_ibdev(c, fn);
}

/* The first netdev, sorted: VFs have one; a multi-port PF's first port. */
static void fill_pci_netdev(struct scan_ctx *c, struct sriov_fn *fn)
{
	g_autofree char *dir = pci_path(c, fn->pci, "net");
	g_autoptr(GPtrArray) names = NULL;

	if (sriov_list_dir(dir, sriov_name_valid, &names) == 0 && names->len)
		copy_str(fn->netdev, sizeof(fn->netdev), names->pdata[0]);
}

static void fill_pci(struct scan_ctx *c, struct sriov_fn *fn)
{
	g_autofree char *numa = pci_path(c, fn->pci, "numa_node");
	g_autofree char *drv = pci_path(c, fn->pci, "driver");
	char buf[SRIOV_ATTR_MAX + 1];
	int r;

	copy_str(fn->id, sizeof(fn->id), fn->pci);
	fn->numa_node = -1;
	r = sriov_read_attr(numa, buf);
	if (r == 0)
		r = sriov_parse_numa(buf, &fn->numa_node);
	if (r < 0 && r != -ENOENT)
		set_problem(fn, r, "%s: %s", numa, r == -EBADMSG ? "not a NUMA node" : g_strerror(-r));
	r = sriov_read_link_name(drv, fn->driver);
	if (r < 0 && r != -ENOENT)
		set_problem(fn, r, "%s: bad driver link", drv);
	fill_pci_ibdev(c, fn);
	fill_pci_netdev(c, fn);
}

static struct sriov_fn *add_fn(struct scan_ctx *c, enum sriov_kind kind)
{
	struct sriov_fn fn = { .kind = kind, .vf_index = -1, .numa_node = -1 };

	g_array_append_val(c->fns, fn);
	return &g_array_index(c->fns, struct sriov_fn, c->fns->len - 1);
}

static bool is_virtfn(const char *s)
{
	unsigned long v;

	return g_str_has_prefix(s, "virtfn") && sriov_parse_uint(s + 6, 65535, &v) == 0;
}

static gint cmp_virtfn(gconstpointer a, gconstpointer b)
{
	unsigned long x = strtoul(*(char *const *)a + 6, NULL, 10);
	unsigned long y = strtoul(*(char *const *)b + 6, NULL, 10);

	return (x > y) - (x < y);
}

static void add_vf(struct scan_ctx *c, const char *pf, const char *link)
{
	g_autofree char *path = pci_path(c, pf, link);
	struct sriov_fn *fn = add_fn(c, SRIOV_VF);
	g_autofree char *physfn = NULL;
	char back[SRIOV_PCI_LEN];
	int r;

	copy_str(fn->pf, sizeof(fn->pf), pf);
	fn->vf_index = (int)strtoul(link + 6, NULL, 10);
	r = sriov_read_link_pci(path, fn->pci);
	if (r < 0) {
		snprintf(fn->id, sizeof(fn->id), "%s/%s", pf, link);
		set_problem(fn, r == -ENOENT ? -EBADMSG : r, "%s: not a link to a PCI function", path);
		return;
	}
	fill_pci(c, fn);
	physfn = pci_path(c, fn->pci, "physfn");
	r = sriov_read_link_pci(physfn, back);
	if (r == -ENOENT)
		set_problem(fn, -ENOLINK, "%s: missing", physfn);
	else if (r < 0)
		set_problem(fn, r, "%s: not a link to a PCI function", physfn);
	else if (strcmp(back, pf))
		set_problem(fn, -EBADMSG, "%s points to %s, not to %s", physfn, back, pf);
}

static void add_pf(struct scan_ctx *c, const char *pci)
{
	g_autofree char *total = pci_path(c, pci, "sriov_totalvfs");
	g_autofree char *num = pci_path(c, pci, "sriov_numvfs");
	g_autofree char *dir = pci_path(c, pci, NULL);
	g_autoptr(GPtrArray) links = NULL;
	struct sriov_fn *fn = add_fn(c, SRIOV_PF);
	unsigned long v;
	int r;

	copy_str(fn->pci, sizeof(fn->pci), pci);
	fill_pci(c, fn);
	r = sriov_read_uint(total, 65535, &v);
	fn->total_vfs = r ? 0 : (unsigned)v;
	if (r < 0)
		set_problem(fn, r, "%s: %s", total, r == -EBADMSG ? "not a number" : g_strerror(-r));
	r = sriov_read_uint(num, 65535, &v);
	fn->num_vfs = r ? 0 : (unsigned)v;
	if (r < 0)
		set_problem(fn, r, "%s: %s", num, r == -EBADMSG ? "not a number" : g_strerror(-r));
	else if (fn->num_vfs > fn->total_vfs)
		set_problem(fn, -EBADMSG, "%s: %u VFs of at most %u", num, fn->num_vfs,
			    fn->total_vfs);
	if (sriov_list_dir(dir, is_virtfn, &links) < 0)
		return;
	g_ptr_array_sort(links, cmp_virtfn);
	/* fn is not used past here: add_vf() may move the array */
	for (guint i = 0; i < links->len; i++)
		add_vf(c, pci, links->pdata[i]);
}

static bool has_function(struct scan_ctx *c, const char *pci, const char *ibdev)
{
	for (guint i = 0; i < c->fns->len; i++) {
		const struct sriov_fn *fn = &g_array_index(c->fns, struct sriov_fn, i);

		if ((pci && !strcmp(fn->pci, pci)) || (ibdev && !strcmp(fn->ibdev, ibdev)))
			return true;
	}
	return false;
}

static void scan_pfs(struct scan_ctx *c)
{
	g_autofree char *dir = g_build_filename(c->root, "bus/pci/devices", NULL);
	g_autoptr(GPtrArray) names = NULL;

	if (sriov_list_dir(dir, sriov_pci_valid, &names) < 0)
		return;
	for (guint i = 0; i < names->len; i++) {
		g_autofree char *total = pci_path(c, names->pdata[i], "sriov_totalvfs");
		char pci[SRIOV_PCI_LEN];

		if (sriov_pci_normalize(names->pdata[i], pci) == 0 &&
		    g_file_test(total, G_FILE_TEST_EXISTS) && !has_function(c, pci, NULL))
			add_pf(c, pci);
	}
}

/* A soft device's netdev: the GID table's, else rxe's "parent" file. */
static void fill_soft_netdev(struct scan_ctx *c, struct sriov_fn *fn)
{
	g_autofree char *ndev = g_build_filename(c->root, "class/infiniband", fn->ibdev,
						 "ports/1/gid_attrs/ndevs/0", NULL);
	g_autofree char *parent = g_build_filename(c->root, "class/infiniband", fn->ibdev,
						   "parent", NULL);
	char buf[SRIOV_ATTR_MAX + 1];

	if ((sriov_read_attr(ndev, buf) == 0 || sriov_read_attr(parent, buf) == 0) &&
	    sriov_name_valid(buf))
		copy_str(fn->netdev, sizeof(fn->netdev), buf);
}

static void add_ibdev(struct scan_ctx *c, const char *ibdev)
{
	g_autofree char *dev = g_build_filename(c->root, "class/infiniband", ibdev, "device",
						NULL);
	char pci[SRIOV_PCI_LEN];
	struct sriov_fn *fn;
	int r = sriov_read_link_pci(dev, pci);

	if (r == 0 && has_function(c, pci, NULL))
		return;
	fn = add_fn(c, r == 0 ? SRIOV_PLAIN : SRIOV_SOFT);
	if (r == 0) {
		copy_str(fn->pci, sizeof(fn->pci), pci);
		fill_pci(c, fn);
		return;
	}
	copy_str(fn->id, sizeof(fn->id), ibdev);
	copy_str(fn->ibdev, sizeof(fn->ibdev), ibdev);
	if (r != -ENOENT)
		set_problem(fn, r, "%s: not a link to a PCI function", dev);
	fill_ibdev(c, fn);
	fill_soft_netdev(c, fn);
}

static void scan_ibdevs(struct scan_ctx *c)
{
	g_autofree char *dir = g_build_filename(c->root, "class/infiniband", NULL);
	g_autoptr(GPtrArray) names = NULL;

	if (sriov_list_dir(dir, sriov_name_valid, &names) < 0)
		return;
	for (guint i = 0; i < names->len; i++)
		if (!has_function(c, NULL, names->pdata[i]))
			add_ibdev(c, names->pdata[i]);
}

int sriov_scan(const char *sysfs_root, struct sriov_scan **ret_scan)
{
	struct scan_ctx c = { .root = sysfs_root };
	struct sriov_scan *scan;

	if (!g_file_test(sysfs_root, G_FILE_TEST_IS_DIR))
		return -ENOENT;
	c.fns = g_array_new(FALSE, TRUE, sizeof(struct sriov_fn));
	c.verbs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	load_verbs(&c);
	scan_pfs(&c);
	scan_ibdevs(&c);
	g_hash_table_destroy(c.verbs);
	scan = g_new0(struct sriov_scan, 1);
	scan->n = c.fns->len;
	scan->fns = (struct sriov_fn *)(void *)g_array_free(c.fns, FALSE);
	*ret_scan = scan;
	return 0;
}

void sriov_scan_free(struct sriov_scan *scan)
{
	if (!scan)
		return;
	g_free(scan->fns);
	g_free(scan);
}

const struct sriov_fn *sriov_scan_find(const struct sriov_scan *scan, const char *id)
{
	char pci[SRIOV_PCI_LEN];
	bool is_pci = sriov_pci_normalize(id, pci) == 0;

	/* "" would match every function without an RDMA device. */
	if (!is_pci && (!id || !sriov_name_valid(id)))
		return NULL;

	for (size_t i = 0; i < scan->n; i++) {
		const struct sriov_fn *fn = &scan->fns[i];

		if (is_pci ? !strcmp(fn->pci, pci) : !strcmp(fn->ibdev, id))
			return fn;
	}
	return NULL;
}

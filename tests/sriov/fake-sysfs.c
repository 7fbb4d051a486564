// SPDX-License-Identifier: MIT
/* Fake sysfs trees: see fake-sysfs.h. */
#include "fake-sysfs.h"

#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int next_ifindex = 10;
static int next_uverbs = 20;

static void die(const char *what, const char *path)
{
	fprintf(stderr, "fake-sysfs: %s %s: %s\n", what, path, g_strerror(errno));
	abort();
}

char *fake_sysfs_new(void)
{
	char *root = g_strdup("/tmp/vrdma-fake-sysfs.XXXXXX");

	if (!g_mkdtemp(root))
		die("mkdtemp", root);
	return root;
}

static int rm_entry(const char *path)
{
	GDir *dir = g_dir_open(path, 0, NULL);
	const char *name;

	if (dir && !g_file_test(path, G_FILE_TEST_IS_SYMLINK)) {
		while ((name = g_dir_read_name(dir))) {
			g_autofree char *child = g_build_filename(path, name, NULL);

			rm_entry(child);
		}
	}
	if (dir)
		g_dir_close(dir);
	return dir && !g_file_test(path, G_FILE_TEST_IS_SYMLINK) ? rmdir(path) : unlink(path);
}

void fake_sysfs_free(char *root)
{
	if (!root)
		return;
	rm_entry(root);
	g_free(root);
}

static char *parent_made(const char *root, const char *rel)
{
	char *path = g_build_filename(root, rel, NULL);
	g_autofree char *dir = g_path_get_dirname(path);

	if (g_mkdir_with_parents(dir, 0755) < 0)
		die("mkdir", dir);
	return path;
}

void fake_write(const char *root, const char *rel, const char *content)
{
	g_autofree char *path = parent_made(root, rel);

	if (!g_file_set_contents(path, content, (gssize)strlen(content), NULL))
		die("write", path);
}

void fake_link(const char *root, const char *rel, const char *target)
{
	g_autofree char *path = parent_made(root, rel);

	unlink(path);
	if (symlink(target, path) < 0)
		die("symlink", path);
}

void fake_remove(const char *root, const char *rel)
{
	g_autofree char *path = g_build_filename(root, rel, NULL);

	rm_entry(path);
}

static void mkdirs(const char *root, const char *rel)
{
	g_autofree char *path = g_build_filename(root, rel, NULL);

	if (g_mkdir_with_parents(path, 0755) < 0)
		die("mkdir", path);
}

void fake_pci(const char *root, const char *pci, const char *driver, int numa)
{
	g_autofree char *dev = g_strdup_printf("bus/pci/devices/%s", pci);

	mkdirs(root, dev);
	if (driver) {
		g_autofree char *drv = g_strdup_printf("bus/pci/drivers/%s", driver);
		g_autofree char *link = g_strdup_printf("%s/driver", dev);
		g_autofree char *target = g_strdup_printf("../../drivers/%s", driver);

		mkdirs(root, drv);
		fake_link(root, link, target);
	}
	if (numa != -2) {
		g_autofree char *rel = g_strdup_printf("%s/numa_node", dev);
		g_autofree char *text = g_strdup_printf("%d\n", numa);

		fake_write(root, rel, text);
	}
}

void fake_netdev(const char *root, const char *name, const char *pci, int ifindex)
{
	g_autofree char *cls = g_strdup_printf("class/net/%s", name);
	g_autofree char *idx = g_strdup_printf("class/net/%s/ifindex", name);
	g_autofree char *text = g_strdup_printf("%d\n", ifindex);

	if (pci) {
		g_autofree char *dir = g_strdup_printf("bus/pci/devices/%s/net/%s", pci, name);
		g_autofree char *target = g_strdup_printf("../../bus/pci/devices/%s/net/%s", pci,
							  name);

		mkdirs(root, dir);
		fake_link(root, cls, target);
	}
	fake_write(root, idx, text);
}

void fake_ibdev(const char *root, const char *name, const char *pci, const char *netdev,
		bool infiniband, int uverbs)
{
	g_autofree char *cls = g_strdup_printf("class/infiniband/%s", name);
	g_autofree char *ll = g_strdup_printf("%s/ports/1/link_layer", cls);
	g_autofree char *uv = g_strdup_printf("class/infiniband_verbs/uverbs%d/ibdev", uverbs);
	g_autofree char *uvtext = g_strdup_printf("%s\n", name);

	if (pci) {
		g_autofree char *dir = g_strdup_printf("bus/pci/devices/%s/infiniband/%s", pci, name);
		g_autofree char *target = g_strdup_printf("../../bus/pci/devices/%s/infiniband/%s",
							  pci, name);
		g_autofree char *dev = g_strdup_printf("%s/device", dir);
		g_autofree char *to_pci = g_strdup_printf("../../../%s", pci);

		mkdirs(root, dir);
		fake_link(root, cls, target);
		fake_link(root, dev, to_pci);
	} else {
		g_autofree char *ndev = g_strdup_printf("%s/ports/1/gid_attrs/ndevs/0", cls);
		g_autofree char *ntext = g_strdup_printf("%s\n", netdev);

		mkdirs(root, cls);
		if (netdev)
			fake_write(root, ndev, ntext);
	}
	fake_write(root, ll, infiniband ? "InfiniBand\n" : "Ethernet\n");
	if (uverbs >= 0)
		fake_write(root, uv, uvtext);
}

void fake_pci_next(const char *base, unsigned n, char ret[13])
{
	unsigned dom, bus, dev, fn, devfn;

	if (sscanf(base, "%4x:%2x:%2x.%1x", &dom, &bus, &dev, &fn) != 4)
		abort();
	devfn = dev * 8 + fn + n;
	bus += devfn / 256;
	devfn %= 256;
	snprintf(ret, 13, "%04x:%02x:%02x.%x", dom, bus, devfn / 8, devfn % 8);
}

/* A function's RDMA device and netdev, each where it has a name (NULL: none). */
static void fake_fn_devices(const char *root, const char *pci, const char *ibdev,
			    const char *netdev)
{
	if (ibdev)
		fake_ibdev(root, ibdev, pci, NULL, false, next_uverbs++);
	if (netdev)
		fake_netdev(root, netdev, pci, next_ifindex++);
}

static void fake_vf(const char *root, const char *pf, unsigned i, const char *vf,
		    const char *ibdev_prefix, const char *netdev_prefix)
{
	g_autofree char *virtfn = g_strdup_printf("bus/pci/devices/%s/virtfn%u", pf, i);
	g_autofree char *physfn = g_strdup_printf("bus/pci/devices/%s/physfn", vf);
	g_autofree char *to_vf = g_strdup_printf("../%s", vf);
	g_autofree char *to_pf = g_strdup_printf("../%s", pf);
	g_autofree char *ibdev = ibdev_prefix ? g_strdup_printf("%s_vf%u", ibdev_prefix, i) : NULL;
	g_autofree char *netdev = netdev_prefix ? g_strdup_printf("%sv%u", netdev_prefix, i) : NULL;

	fake_pci(root, vf, "mlx5_core", 1);
	fake_link(root, virtfn, to_vf);
	fake_link(root, physfn, to_pf);
	fake_fn_devices(root, vf, ibdev, netdev);
}

void fake_pf(const char *root, const char *pf, unsigned total, unsigned num,
	     const char *first_vf, const char *ibdev_prefix, const char *netdev_prefix)
{
	g_autofree char *t = g_strdup_printf("bus/pci/devices/%s/sriov_totalvfs", pf);
	g_autofree char *n = g_strdup_printf("bus/pci/devices/%s/sriov_numvfs", pf);
	g_autofree char *ttext = g_strdup_printf("%u\n", total);
	g_autofree char *ntext = g_strdup_printf("%u\n", num);
	g_autofree char *ibdev = ibdev_prefix ? g_strdup_printf("%s_pf", ibdev_prefix) : NULL;

	fake_pci(root, pf, "mlx5_core", 1);
	fake_write(root, t, ttext);
	fake_write(root, n, ntext);
	fake_fn_devices(root, pf, ibdev, netdev_prefix);
	for (unsigned i = 0; i < num; i++) {
		char vf[13];

		fake_pci_next(first_vf, i, vf);
		fake_vf(root, pf, i, vf, ibdev_prefix, netdev_prefix);
	}
}

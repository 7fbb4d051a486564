/* SPDX-License-Identifier: MIT */
/*
 * Fake sysfs trees for the sriov tests, shaped like the kernel's: PCI
 * functions under bus/pci/devices (virtfnN, physfn, driver links),
 * their infiniband/ and net/ children, class/infiniband, class/net and
 * class/infiniband_verbs.  Every helper aborts on a setup failure: a test
 * whose tree is not what it says must not run.
 */
#ifndef VRDMA_FAKE_SYSFS_H
#define VRDMA_FAKE_SYSFS_H

#include <stdbool.h>

/* A fresh tree in a new temporary directory; fake_sysfs_free removes it. */
char *fake_sysfs_new(void);
void fake_sysfs_free(char *root);

/* <root>/<rel> holds @content (parents created). */
void fake_write(const char *root, const char *rel, const char *content);
/* <root>/<rel> is a symlink to @target (replacing what was there). */
void fake_link(const char *root, const char *rel, const char *target);
void fake_remove(const char *root, const char *rel);

/* A PCI function with an optional driver and a NUMA node (-2: no file). */
void fake_pci(const char *root, const char *pci, const char *driver, int numa);
/* An SR-IOV PF: sriov_totalvfs, and @num VFs at 0000:BB:DD.F numbered
 * from @first_vf on, each with virtfnN/physfn links, an mlx5-like ibdev
 * "<ibdev_prefix>N" and a netdev "<netdev_prefix>vN". */
void fake_pf(const char *root, const char *pf, unsigned total, unsigned num,
	     const char *first_vf, const char *ibdev_prefix, const char *netdev_prefix);
/* An RDMA device: under a PCI function (@pci) or soft (@pci NULL, with
 * @netdev as its GID table's netdev); uverbs<@uverbs> maps to it. */
void fake_ibdev(const char *root, const char *name, const char *pci, const char *netdev,
		bool infiniband, int uverbs);
/* A netdev under a PCI function (or none) with an ifindex. */
void fake_netdev(const char *root, const char *name, const char *pci, int ifindex);
/* The PCI address @n functions after @base (device/function carried). */
void fake_pci_next(const char *base, unsigned n, char ret[13]);

#endif

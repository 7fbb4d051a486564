// SPDX-License-Identifier: MIT
/*
 * sriov-fake-tree DIR: builds the fake sysfs tree the CLI tests use:
 * (every PCI function on NUMA node 1)
 *   0000:03:00.0  PF, 0 of 8 VFs
 *   0000:04:00.0  PF, 2 of 4 VFs (0000:04:00.2-3)
 *   0000:81:00.0  PF, 12 of 16 VFs (0000:81:00.1 - 0000:81:01.4)
 *   rxe0          soft RDMA device on netdev va
 */
#include <glib.h>
#include <stdio.h>

#include "fake-sysfs.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: sriov-fake-tree DIR\n");
		return 2;
	}
	if (g_mkdir_with_parents(argv[1], 0755) < 0) {
		perror(argv[1]);
		return 1;
	}
	fake_pf(argv[1], "0000:03:00.0", 8, 0, "0000:03:00.1", "mlxa", "ens1f0");
	fake_pf(argv[1], "0000:04:00.0", 4, 2, "0000:04:00.2", "mlxb", "ens2f0");
	fake_pf(argv[1], "0000:81:00.0", 16, 12, "0000:81:00.1", "mlxc", "ens3f0");
	fake_netdev(argv[1], "va", NULL, 3);
	fake_ibdev(argv[1], "rxe0", NULL, "va", false, 60);
	return 0;
}

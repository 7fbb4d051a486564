// SPDX-License-Identifier: MIT
/* Enablement: the sriov_numvfs write, with the kernel's rules checked first
 * so that the caller gets a precise error instead of a bare EBUSY/ENOENT. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sriov-internal.h"
#include "util.h"

static int write_attr(const char *path, const char *text)
{
	_cleanup_(closep) int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	size_t len = strlen(text);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, len);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

int sriov_set_num_vfs(const char *sysfs_root, const char *pf, unsigned num_vfs)
{
	char pci[SRIOV_PCI_LEN], text[16];
	g_autofree char *dir = NULL, *total = NULL, *num = NULL, *drv = NULL;
	unsigned long total_vfs, cur;
	int r;

	if (sriov_pci_normalize(pf, pci) < 0)
		return -EINVAL;
	dir = g_build_filename(sysfs_root, "bus/pci/devices", pci, NULL);
	if (!g_file_test(dir, G_FILE_TEST_IS_DIR))
		return -ENOENT;
	total = g_build_filename(dir, "sriov_totalvfs", NULL);
	num = g_build_filename(dir, "sriov_numvfs", NULL);
	drv = g_build_filename(dir, "driver", NULL);
	r = sriov_read_uint(total, 65535, &total_vfs);
	if (r == -ENOENT)
		return -EOPNOTSUPP; /* not SR-IOV capable */
	if (r < 0)
		return r;
	if (num_vfs > total_vfs)
		return -ERANGE;
	/* The kernel refuses without a driver (its driver configures VFs). */
	if (!g_file_test(drv, G_FILE_TEST_EXISTS))
		return -ENXIO;
	r = sriov_read_uint(num, 65535, &cur);
	if (r < 0)
		return r;
	if (cur == num_vfs)
		return 0;
	if (cur && num_vfs)
		return -EBUSY;
	snprintf(text, sizeof(text), "%u\n", num_vfs);
	r = write_attr(num, text);
	/* The driver went away between the check and the write. */
	return r == -ENOENT ? -ENXIO : r;
}

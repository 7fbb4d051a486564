// SPDX-License-Identifier: MIT
/*
 * The one place where sysfs bytes are read and parsed.  sysfs is the
 * kernel's, but the root is injectable and drivers differ: every value is
 * bounded, checked in full and turned into -EBADMSG when it is not what the
 * kernel documents, so that no caller ever sees garbage.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sriov-internal.h"
#include "util.h"

int sriov_read_capped(int fd, char *buf, size_t max, size_t *ret_len)
{
	size_t len = 0;

	/* One byte more than allowed, to tell "full" from "too long". */
	while (len <= max) {
		ssize_t n = read(fd, buf + len, max + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > max)
		return -EBADMSG;
	*ret_len = len;
	return 0;
}

int sriov_read_attr(const char *path, char ret_buf[SRIOV_ATTR_MAX + 1])
{
	_cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	size_t len = 0;
	int r;

	if (fd < 0)
		return -errno;
	r = sriov_read_capped(fd, ret_buf, SRIOV_ATTR_MAX, &len);
	if (r < 0)
		return r;
	if (len && ret_buf[len - 1] == '\n')
		len--;
	ret_buf[len] = '\0';
	for (size_t i = 0; i < len; i++)
		if (!isprint((unsigned char)ret_buf[i]))
			return -EBADMSG;
	return 0;
}

int sriov_parse_uint(const char *s, unsigned long max, unsigned long *ret)
{
	unsigned long v;
	char *end;

	/* strtoul alone accepts " 12", "+12", "-1" and "12abc". */
	if (!isdigit((unsigned char)s[0]))
		return -EBADMSG;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > max)
		return -EBADMSG;
	*ret = v;
	return 0;
}

int sriov_parse_numa(const char *s, int *ret)
{
	unsigned long v;

	if (!strcmp(s, "-1")) {
		*ret = -1;
		return 0;
	}
	if (sriov_parse_uint(s, 1023, &v) < 0)
		return -EBADMSG;
	*ret = (int)v;
	return 0;
}

int sriov_read_uint(const char *path, unsigned long max, unsigned long *ret)
{
	char buf[SRIOV_ATTR_MAX + 1];
	int r = sriov_read_attr(path, buf);

	return r < 0 ? r : sriov_parse_uint(buf, max, ret);
}

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

bool sriov_pci_valid(const char *s)
{
	/* DDDD:BB:DD.F, device 0..1f, function 0..7 */
	if (strlen(s) != SRIOV_PCI_LEN - 1 || s[4] != ':' || s[7] != ':' || s[10] != '.')
		return false;
	if (!is_hex(s, 4) || !is_hex(s + 5, 2) || !is_hex(s + 8, 2))
		return false;
	if (strtoul((char[]){ s[8], s[9], 0 }, NULL, 16) > 0x1f)
		return false;
	return s[11] >= '0' && s[11] <= '7';
}

int sriov_pci_normalize(const char *in, char ret[SRIOV_PCI_LEN])
{
	if (!in || !sriov_pci_valid(in))
		return -EINVAL;
	for (size_t i = 0; i < SRIOV_PCI_LEN; i++)
		ret[i] = (char)tolower((unsigned char)in[i]);
	return 0;
}

bool sriov_name_valid(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len >= SRIOV_NAME_LEN || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isgraph((unsigned char)s[i]) || s[i] == '/')
			return false;
	return true;
}

bool sriov_tenant_valid(const char *t)
{
	size_t len = t ? strlen(t) : 0;

	if (len == 0 || len >= SRIOV_TENANT_LEN || t[0] == '-' || t[0] == '.')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)t[i]) && !strchr("._-", t[i]))
			return false;
	return true;
}

static int read_link_last(const char *path, char *ret, size_t size)
{
	char target[PATH_MAX];
	const char *last;
	ssize_t n = readlink(path, target, sizeof(target));

	if (n < 0)
		return -errno;
	if ((size_t)n >= sizeof(target))
		return -EBADMSG;
	target[n] = '\0';
	last = strrchr(target, '/');
	last = last ? last + 1 : target;
	if (strlen(last) >= size)
		return -EBADMSG;
	strcpy(ret, last);
	return 0;
}

int sriov_read_link_pci(const char *path, char ret[SRIOV_PCI_LEN])
{
	char last[SRIOV_NAME_LEN];
	int r = read_link_last(path, last, sizeof(last));

	if (r < 0)
		return r;
	return sriov_pci_normalize(last, ret) < 0 ? -EBADMSG : 0;
}

int sriov_read_link_name(const char *path, char ret[SRIOV_NAME_LEN])
{
	int r = read_link_last(path, ret, SRIOV_NAME_LEN);

	if (r < 0)
		return r;
	return sriov_name_valid(ret) ? 0 : -EBADMSG;
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int sriov_list_dir(const char *path, bool (*valid)(const char *), GPtrArray **ret_names)
{
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	DIR *dir = opendir(path);
	struct dirent *de;

	if (!dir)
		return -errno;
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		if (valid && !valid(de->d_name))
			continue;
		g_ptr_array_add(names, g_strdup(de->d_name));
	}
	closedir(dir);
	g_ptr_array_sort(names, cmp_str);
	*ret_names = g_steal_pointer(&names);
	return 0;
}

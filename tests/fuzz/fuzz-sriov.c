// SPDX-License-Identifier: MIT
/*
 * sriov/: the bytes sysfs hands us (sysfs.c) and the pool state file
 * (state.c).  Both are read from real files, as in production.
 *
 * Input: [mode] bytes...
 *   0: a sysfs attribute file: sriov_read_attr, then the strict parsers
 *      (sriov_parse_uint with the limits the callers use, sriov_parse_numa)
 *      and the name validators on what it returned
 *   1: the state file: sriov_pool_load; what loads must format to a file
 *      that loads to the same pool (format -> parse -> format is stable)
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "sriov-internal.h"

static char *dir, *attr_path, *state_path;

static void cleanup(void)
{
	unlink(attr_path);
	unlink(state_path);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	dir = g_strdup(g_file_test("/dev/shm", G_FILE_TEST_IS_DIR) ? "/dev/shm/fuzz-sriov-XXXXXX"
								   : "/tmp/fuzz-sriov-XXXXXX");
	FUZZ_CHECK(g_mkdtemp(dir) != NULL);
	attr_path = g_build_filename(dir, "sriov_numvfs", NULL);
	state_path = g_build_filename(dir, "pool.json", NULL);
	atexit(cleanup);
	return 0;
}

static void put_file(const char *path, const uint8_t *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, p, n) == (ssize_t)n);
	close(fd);
}

static void attr(const uint8_t *p, size_t n)
{
	static const unsigned long maxima[] = { 1, 0xffff, 1023, 4096, ULONG_MAX };
	char buf[SRIOV_ATTR_MAX + 1];
	unsigned long v;
	int numa;

	put_file(attr_path, p, n);
	if (sriov_read_attr(attr_path, buf) < 0)
		return;
	FUZZ_CHECK(strlen(buf) <= SRIOV_ATTR_MAX);
	for (size_t i = 0; buf[i]; i++)
		FUZZ_CHECK(g_ascii_isprint(buf[i]));
	for (size_t i = 0; i < G_N_ELEMENTS(maxima); i++)
		if (!sriov_parse_uint(buf, maxima[i], &v))
			FUZZ_CHECK(v <= maxima[i] && g_ascii_isdigit(buf[0]));
	if (!sriov_parse_numa(buf, &numa))
		FUZZ_CHECK(numa >= -1 && numa <= 1023);
	if (sriov_name_valid(buf))
		FUZZ_CHECK(!strchr(buf, '/') && strcmp(buf, ".") && strcmp(buf, ".."));
	if (sriov_pci_valid(buf))
		FUZZ_CHECK(strlen(buf) == SRIOV_PCI_LEN - 1);
	(void)sriov_function_key_valid(buf);
}

static void state(const uint8_t *p, size_t n)
{
	struct sriov_pool *a = NULL, *b = NULL;
	g_autofree char *t1 = NULL, *t2 = NULL;

	put_file(state_path, p, n);
	if (sriov_pool_load(state_path, &a) < 0)
		return;
	t1 = sriov_state_format(a);
	FUZZ_CHECK(sriov_state_parse(t1, strlen(t1), &b) == 0);
	t2 = sriov_state_format(b);
	FUZZ_CHECK(!strcmp(t1, t2));
	sriov_pool_free(a);
	sriov_pool_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		state(data + 1, size - 1);
	else
		attr(data + 1, size - 1);
	return 0;
}

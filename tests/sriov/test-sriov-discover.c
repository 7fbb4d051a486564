// SPDX-License-Identifier: MIT
/*
 * Unit tests of discovery (sriov/discover.c) and enablement (enable.c) on
 * fake sysfs trees: PFs with 0, 2 and 12 VFs, broken links, two RDMA devices
 * under one function, garbage in files, and a fuzz loop that scribbles over
 * a whole tree (AddressSanitizer watches every scan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fake-sysfs.h"
#include "sriov-internal.h"

#define PF0 "0000:03:00.0" /* 0 of 8 VFs */
#define PF2 "0000:04:00.0" /* 2 of 4 VFs from 0000:04:00.2 */
#define PF12 "0000:81:00.0" /* 12 of 16 VFs from 0000:81:00.1 */

static int setup(void **state)
{
	char *root = fake_sysfs_new();

	fake_pf(root, PF0, 8, 0, "0000:03:00.1", "mlxa", "ens1f0");
	fake_pf(root, PF2, 4, 2, "0000:04:00.2", "mlxb", "ens2f0");
	fake_pf(root, PF12, 16, 12, "0000:81:00.1", "mlxc", "ens3f0");
	*state = root;
	return 0;
}

static int teardown(void **state)
{
	fake_sysfs_free(*state);
	return 0;
}

static struct sriov_scan *scan_ok(const char *root)
{
	struct sriov_scan *scan = NULL;

	assert_int_equal(sriov_scan(root, &scan), 0);
	assert_non_null(scan);
	return scan;
}

static const struct sriov_fn *find(const struct sriov_scan *scan, const char *id)
{
	const struct sriov_fn *fn = sriov_scan_find(scan, id);

	if (!fn)
		fail_msg("%s not discovered", id);
	return fn;
}

static void test_pfs_and_vfs(void **state)
{
	struct sriov_scan *scan = scan_ok(*state);
	const struct sriov_fn *pf;

	/* 3 PFs + 14 VFs, nothing else */
	assert_int_equal(scan->n, 3 + 0 + 2 + 12);
	pf = &scan->fns[0];
	assert_int_equal(pf->kind, SRIOV_PF);
	assert_string_equal(pf->pci, PF0);
	assert_int_equal(pf->total_vfs, 8);
	assert_int_equal(pf->num_vfs, 0);
	assert_string_equal(pf->driver, "mlx5_core");
	assert_string_equal(pf->ibdev, "mlxa_pf");
	assert_string_equal(pf->netdev, "ens1f0");
	assert_int_equal(pf->numa_node, 1);
	assert_int_equal(pf->status, 0);
	assert_string_equal(scan->fns[1].pci, PF2);
	assert_int_equal(scan->fns[1].num_vfs, 2);
	for (int i = 0; i < 2; i++) {
		const struct sriov_fn *vf = &scan->fns[2 + i];

		assert_int_equal(vf->kind, SRIOV_VF);
		assert_string_equal(vf->pf, PF2);
		assert_int_equal(vf->vf_index, i);
		assert_int_equal(vf->status, 0);
	}
	assert_string_equal(scan->fns[2].pci, "0000:04:00.2");
	assert_string_equal(scan->fns[3].pci, "0000:04:00.3");
	assert_string_equal(scan->fns[3].ibdev, "mlxb_vf1");
	assert_string_equal(scan->fns[3].netdev, "ens2f0v1");
	assert_true(g_str_has_prefix(scan->fns[3].uverbs, "/dev/infiniband/uverbs"));
	assert_false(scan->fns[3].infiniband);
	sriov_scan_free(scan);
}

/* virtfn10 comes after virtfn9, not after virtfn1. */
static void test_numeric_order(void **state)
{
	struct sriov_scan *scan = scan_ok(*state);
	const struct sriov_fn *pf = find(scan, PF12);
	size_t base = (size_t)(pf - scan->fns) + 1;

	assert_int_equal(pf->num_vfs, 12);
	for (int i = 0; i < 12; i++) {
		char want[13];

		fake_pci_next("0000:81:00.1", (unsigned)i, want);
		assert_int_equal(scan->fns[base + i].vf_index, i);
		assert_string_equal(scan->fns[base + i].pci, want);
	}
	assert_string_equal(scan->fns[base + 10].pci, "0000:81:01.3");
	sriov_scan_free(scan);
}

static void test_missing_physfn(void **state)
{
	struct sriov_scan *scan;
	const struct sriov_fn *vf;

	fake_remove(*state, "bus/pci/devices/0000:04:00.3/physfn");
	scan = scan_ok(*state);
	vf = find(scan, "0000:04:00.3");
	assert_int_equal(vf->status, -ENOLINK);
	assert_non_null(strstr(vf->problem, "physfn"));
	/* its sibling is untouched */
	assert_int_equal(find(scan, "0000:04:00.2")->status, 0);
	sriov_scan_free(scan);
}

static void test_physfn_elsewhere(void **state)
{
	struct sriov_scan *scan;

	fake_link(*state, "bus/pci/devices/0000:04:00.2/physfn", "../" PF0);
	scan = scan_ok(*state);
	assert_int_equal(find(scan, "0000:04:00.2")->status, -EBADMSG);
	sriov_scan_free(scan);
}

static void test_two_ibdevs(void **state)
{
	struct sriov_scan *scan;
	const struct sriov_fn *vf;

	fake_ibdev(*state, "extra0", "0000:04:00.2", NULL, false, 90);
	scan = scan_ok(*state);
	vf = find(scan, "0000:04:00.2");
	assert_int_equal(vf->status, -ENOTUNIQ);
	assert_non_null(strstr(vf->problem, "RDMA devices"));
	/* and extra0 is not listed a second time as a plain device */
	assert_int_equal(scan->n, 17);
	sriov_scan_free(scan);
}

static void expect_pf_problem(const char *root, const char *rel, const char *content, int err)
{
	struct sriov_scan *scan;

	fake_write(root, rel, content);
	scan = scan_ok(root);
	assert_int_equal(find(scan, PF2)->status, err);
	assert_true(strlen(find(scan, PF2)->problem) > 0);
	sriov_scan_free(scan);
}

static void test_garbage_files(void **state)
{
	const char *root = *state;

	expect_pf_problem(root, "bus/pci/devices/" PF2 "/sriov_totalvfs", "lots\n", -EBADMSG);
	fake_write(root, "bus/pci/devices/" PF2 "/sriov_totalvfs", "4\n");
	expect_pf_problem(root, "bus/pci/devices/" PF2 "/sriov_numvfs", "-1\n", -EBADMSG);
	expect_pf_problem(root, "bus/pci/devices/" PF2 "/sriov_numvfs", "5\n", -EBADMSG);
	fake_write(root, "bus/pci/devices/" PF2 "/sriov_numvfs", "2\n");
	expect_pf_problem(root, "bus/pci/devices/" PF2 "/numa_node", "1x\n", -EBADMSG);
	fake_write(root, "bus/pci/devices/" PF2 "/numa_node", "-1\n");
	expect_pf_problem(root, "class/infiniband/mlxb_pf/ports/1/link_layer", "Token Ring\n",
			  -EBADMSG);
}

static void test_bad_virtfn_target(void **state)
{
	struct sriov_scan *scan;
	bool seen = false;

	fake_link(*state, "bus/pci/devices/" PF2 "/virtfn1", "../not-a-pci-address");
	fake_link(*state, "bus/pci/devices/" PF2 "/virtfnX", "../0000:04:00.3");
	scan = scan_ok(*state);
	for (size_t i = 0; i < scan->n; i++)
		if (scan->fns[i].kind == SRIOV_VF && scan->fns[i].vf_index == 1 &&
		    !strcmp(scan->fns[i].pf, PF2)) {
			assert_int_equal(scan->fns[i].status, -EBADMSG);
			seen = true;
		}
	assert_true(seen);
	sriov_scan_free(scan);
}

static void test_soft_and_plain(void **state)
{
	struct sriov_scan *scan;
	const struct sriov_fn *fn;

	fake_netdev(*state, "va", NULL, 3);
	fake_ibdev(*state, "rxe0", NULL, "va", false, 5);
	fake_pci(*state, "0000:05:00.0", "mlx4_core", -2);
	fake_ibdev(*state, "mlx4_0", "0000:05:00.0", NULL, true, 6);
	scan = scan_ok(*state);
	fn = find(scan, "rxe0");
	assert_int_equal(fn->kind, SRIOV_SOFT);
	assert_string_equal(fn->id, "rxe0");
	assert_string_equal(fn->pci, "");
	assert_string_equal(fn->netdev, "va");
	assert_string_equal(fn->uverbs, "/dev/infiniband/uverbs5");
	assert_int_equal(fn->numa_node, -1);
	fn = find(scan, "mlx4_0");
	assert_int_equal(fn->kind, SRIOV_PLAIN);
	assert_string_equal(fn->id, "0000:05:00.0");
	assert_true(fn->infiniband);
	assert_int_equal(fn->numa_node, -1);
	assert_ptr_equal(find(scan, "0000:05:00.0"), fn);
	sriov_scan_free(scan);
}

static void test_enable(void **state)
{
	const char *root = *state;
	g_autofree char *num = g_build_filename(root, "bus/pci/devices", PF2, "sriov_numvfs", NULL);
	g_autofree char *text = NULL;

	assert_int_equal(sriov_set_num_vfs(root, PF2, 3), -EBUSY);
	assert_int_equal(sriov_set_num_vfs(root, PF2, 2), 0);
	assert_int_equal(sriov_set_num_vfs(root, PF2, 5), -ERANGE);
	assert_int_equal(sriov_set_num_vfs(root, PF2, 0), 0);
	assert_true(g_file_get_contents(num, &text, NULL, NULL));
	assert_string_equal(text, "0\n");
	assert_int_equal(sriov_set_num_vfs(root, PF2, 3), 0);
	g_free(text);
	assert_true(g_file_get_contents(num, &text, NULL, NULL));
	assert_string_equal(text, "3\n");
	assert_int_equal(sriov_set_num_vfs(root, "0000:09:00.0", 1), -ENOENT);
	assert_int_equal(sriov_set_num_vfs(root, "nonsense", 1), -EINVAL);
	assert_int_equal(sriov_set_num_vfs(root, "0000:04:00.2", 1), -EOPNOTSUPP);
	fake_remove(root, "bus/pci/devices/" PF0 "/driver");
	assert_int_equal(sriov_set_num_vfs(root, PF0, 1), -ENXIO);
	fake_write(root, "bus/pci/devices/" PF12 "/sriov_numvfs", "twelve\n");
	assert_int_equal(sriov_set_num_vfs(root, PF12, 0), -EBADMSG);
}

static void test_no_root(void **state)
{
	struct sriov_scan *scan = NULL;
	g_autofree char *missing = g_build_filename(*state, "nope", NULL);
	char *empty = fake_sysfs_new();

	assert_int_equal(sriov_scan(missing, &scan), -ENOENT);
	scan = scan_ok(empty);
	assert_int_equal(scan->n, 0);
	sriov_scan_free(scan);
	fake_sysfs_free(empty);
}

static void scribble(const char *path, GRand *rng)
{
	static const char *const samples[] = { "", "\n", "-1", "4294967296", "0x10", " 3",
					       "InfiniBand", "../..", "0000:04:00.2" };
	char buf[600];
	size_t len = (size_t)g_rand_int_range(rng, 0, sizeof(buf));

	if (g_rand_boolean(rng)) {
		const char *s = samples[g_rand_int_range(rng, 0, G_N_ELEMENTS(samples))];

		g_file_set_contents(path, s, (gssize)strlen(s), NULL);
		return;
	}
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)g_rand_int(rng);
	g_file_set_contents(path, buf, (gssize)len, NULL);
}

/* Regular files and symlinks of a tree, for the fuzz loop. */
static void collect(const char *dir, GPtrArray *files, GPtrArray *links)
{
	GDir *d = g_dir_open(dir, 0, NULL);
	const char *name;

	if (!d)
		return;
	while ((name = g_dir_read_name(d))) {
		char *p = g_build_filename(dir, name, NULL);

		if (g_file_test(p, G_FILE_TEST_IS_SYMLINK))
			g_ptr_array_add(links, p);
		else if (g_file_test(p, G_FILE_TEST_IS_DIR)) {
			collect(p, files, links);
			g_free(p);
		} else
			g_ptr_array_add(files, p);
	}
	g_dir_close(d);
}

static void test_fuzz(void **state)
{
	g_autoptr(GRand) rng = g_rand_new_with_seed(0x5eed);
	g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GPtrArray) links = g_ptr_array_new_with_free_func(g_free);
	static const char *const targets[] = { "../0000:04:00.9", "/", "..", "../x/../..",
					       "0000:04:00.2", "../../../../../../etc" };

	fake_netdev(*state, "va", NULL, 3);
	fake_ibdev(*state, "rxe0", NULL, "va", false, 5);
	collect(*state, files, links);
	for (int round = 0; round < 300; round++) {
		struct sriov_scan *scan;

		for (int k = 0; k < 4; k++) {
			const char *f = files->pdata[g_rand_int_range(rng, 0, (gint32)files->len)];
			const char *l = links->pdata[g_rand_int_range(rng, 0, (gint32)links->len)];

			scribble(f, rng);
			unlink(l);
			if (symlink(targets[g_rand_int_range(rng, 0, G_N_ELEMENTS(targets))], l) < 0)
				fail_msg("symlink %s", l);
		}
		scan = scan_ok(*state);
		for (size_t i = 0; i < scan->n; i++) {
			const struct sriov_fn *fn = &scan->fns[i];

			assert_true(fn->status <= 0);
			assert_true(fn->status == 0 || fn->problem[0]);
			assert_true(!fn->pci[0] || sriov_pci_valid(fn->pci));
			assert_true(!fn->ibdev[0] || sriov_name_valid(fn->ibdev));
		}
		sriov_scan_free(scan);
		sriov_set_num_vfs(*state, PF2, (unsigned)g_rand_int_range(rng, 0, 5));
	}
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_pfs_and_vfs),    T(test_numeric_order), T(test_missing_physfn),
		T(test_physfn_elsewhere), T(test_two_ibdevs),  T(test_garbage_files),
		T(test_bad_virtfn_target), T(test_soft_and_plain), T(test_enable),
		T(test_no_root),        T(test_fuzz),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: MIT
/* Unit tests of sriov/sysfs.c: the strict parsers every sysfs byte goes
 * through. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fake-sysfs.h"
#include "sriov-internal.h"

static void test_parse_uint(void **state)
{
	static const char *const bad[] = { "", " 1", "+1", "-1", "1 ", "0x10", "1a",
					   "99999999999999999999999", "12\n" };
	unsigned long v;

	(void)state;
	assert_int_equal(sriov_parse_uint("0", 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(sriov_parse_uint("65535", 65535, &v), 0);
	assert_int_equal(v, 65535);
	assert_int_equal(sriov_parse_uint("65536", 65535, &v), -EBADMSG);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sriov_parse_uint(bad[i], ~0ul, &v), -EBADMSG);
}

static void test_parse_numa(void **state)
{
	int n;

	(void)state;
	assert_int_equal(sriov_parse_numa("-1", &n), 0);
	assert_int_equal(n, -1);
	assert_int_equal(sriov_parse_numa("3", &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(sriov_parse_numa("-2", &n), -EBADMSG);
	assert_int_equal(sriov_parse_numa("1024", &n), -EBADMSG);
	assert_int_equal(sriov_parse_numa("", &n), -EBADMSG);
}

static void test_pci(void **state)
{
	static const char *const bad[] = { "", "0000:03:00", "0000:03:00.8", "0000:03:20.0",
					   "000:03:00.0", "0000-03:00.0", "0000:03:00.0 ",
					   "g000:03:00.0", "0000:03:00.00" };
	char out[SRIOV_PCI_LEN];

	(void)state;
	assert_true(sriov_pci_valid("0000:03:00.0"));
	assert_true(sriov_pci_valid("ffff:ff:1f.7"));
	assert_int_equal(sriov_pci_normalize("0000:AF:1F.7", out), 0);
	assert_string_equal(out, "0000:af:1f.7");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_false(sriov_pci_valid(bad[i]));
		assert_int_equal(sriov_pci_normalize(bad[i], out), -EINVAL);
	}
	assert_int_equal(sriov_pci_normalize(NULL, out), -EINVAL);
}

static void test_names(void **state)
{
	char long_name[SRIOV_NAME_LEN + 1];

	(void)state;
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[SRIOV_NAME_LEN] = '\0';
	assert_true(sriov_name_valid("mlx5_0"));
	assert_false(sriov_name_valid(""));
	assert_false(sriov_name_valid(".."));
	assert_false(sriov_name_valid("a/b"));
	assert_false(sriov_name_valid("a b"));
	assert_false(sriov_name_valid("a\tb"));
	assert_false(sriov_name_valid(long_name));
	assert_true(sriov_tenant_valid("tenant-1.a_b"));
	assert_false(sriov_tenant_valid("-x"));
	assert_false(sriov_tenant_valid(".x"));
	assert_false(sriov_tenant_valid("a/b"));
	assert_false(sriov_tenant_valid(""));
	assert_false(sriov_tenant_valid(NULL));
}

static void test_read_attr(void **state)
{
	char *root = fake_sysfs_new();
	char buf[SRIOV_ATTR_MAX + 1];
	char big[SRIOV_ATTR_MAX + 2];
	g_autofree char *p = g_build_filename(root, "f", NULL);
	g_autofree char *dir = g_build_filename(root, "d", NULL);
	unsigned long v;

	(void)state;
	fake_write(root, "f", "12\n");
	assert_int_equal(sriov_read_attr(p, buf), 0);
	assert_string_equal(buf, "12");
	assert_int_equal(sriov_read_uint(p, 100, &v), 0);
	assert_int_equal(v, 12);
	fake_write(root, "f", "12\n\n");
	assert_int_equal(sriov_read_attr(p, buf), -EBADMSG);
	fake_write(root, "f", "");
	assert_int_equal(sriov_read_attr(p, buf), 0);
	assert_string_equal(buf, "");
	assert_int_equal(sriov_read_uint(p, 100, &v), -EBADMSG);
	memset(big, '1', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	fake_write(root, "f", big);
	assert_int_equal(sriov_read_attr(p, buf), -EBADMSG);
	big[SRIOV_ATTR_MAX] = '\0'; /* exactly the maximum is fine */
	fake_write(root, "f", big);
	assert_int_equal(sriov_read_attr(p, buf), 0);
	assert_true(g_file_set_contents(p, "1\0002", 3, NULL));
	assert_int_equal(sriov_read_attr(p, buf), -EBADMSG);
	fake_write(root, "d/x", "");
	assert_true(sriov_read_attr(dir, buf) < 0);
	fake_remove(root, "f");
	assert_int_equal(sriov_read_attr(p, buf), -ENOENT);
	fake_sysfs_free(root);
}

static void test_links(void **state)
{
	char *root = fake_sysfs_new();
	g_autofree char *p = g_build_filename(root, "l", NULL);
	char pci[SRIOV_PCI_LEN], name[SRIOV_NAME_LEN];

	(void)state;
	fake_link(root, "l", "../../devices/pci0000:00/0000:03:00.2");
	assert_int_equal(sriov_read_link_pci(p, pci), 0);
	assert_string_equal(pci, "0000:03:00.2");
	fake_link(root, "l", "0000:03:00.2/");
	assert_int_equal(sriov_read_link_pci(p, pci), -EBADMSG);
	fake_link(root, "l", "../virtfn0");
	assert_int_equal(sriov_read_link_pci(p, pci), -EBADMSG);
	fake_link(root, "l", "../../drivers/mlx5_core");
	assert_int_equal(sriov_read_link_name(p, name), 0);
	assert_string_equal(name, "mlx5_core");
	fake_link(root, "l", "..");
	assert_int_equal(sriov_read_link_name(p, name), -EBADMSG);
	fake_remove(root, "l");
	fake_write(root, "l", "not a link");
	assert_int_equal(sriov_read_link_pci(p, pci), -EINVAL);
	fake_sysfs_free(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_uint), cmocka_unit_test(test_parse_numa),
		cmocka_unit_test(test_pci),        cmocka_unit_test(test_names),
		cmocka_unit_test(test_read_attr),  cmocka_unit_test(test_links),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

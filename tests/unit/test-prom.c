// SPDX-License-Identifier: MIT
/*
 * Unit tests of lib/prom.c: every sample carries the document's identifying
 * label, label values are escaped as the text format wants, and two
 * documents that differ only in that label hold no common series (what
 * node_exporter needs of several files in one textfile directory).  The
 * daemons' own names and units are checked end to end (vhost-metrics,
 * migrate-tcp-*).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <glib.h>

#include "prom.h"
#include "util.h"

/* A small document, as a daemon writes one. */
static struct prom *render(const char *id)
{
	struct prom *p = prom_new("backend", id);
	const char *const two[] = { "role", "source", "transport", "tcp", NULL };

	prom_metric(p, "t_size_bytes", "gauge", "a size", 4096);
	prom_family(p, "t_events_total", "counter", "events by kind");
	prom_sample(p, "t_events_total", "kind", "a", 1);
	prom_sample(p, "t_events_total", "kind", "b", 2.5);
	prom_family(p, "t_info", "gauge", "two labels");
	prom_sample_labels(p, "t_info", two, 1);
	prom_process_cpu(p, "t");
	return p;
}

static void test_every_sample_labelled(void **state)
{
	_cleanup_(prom_freep) struct prom *p = render("vm1");
	g_auto(GStrv) lines = g_strsplit(prom_text(p)->str, "\n", -1);
	unsigned samples = 0;

	(void)state;
	for (char **l = lines; *l; l++) {
		if (!**l || g_str_has_prefix(*l, "# "))
			continue;
		samples++;
		assert_non_null(strstr(*l, "{backend=\"vm1\""));
	}
	assert_int_equal(samples, 5);
	assert_non_null(strstr(prom_text(p)->str, "t_size_bytes{backend=\"vm1\"} 4096\n"));
	assert_non_null(strstr(prom_text(p)->str,
			       "t_events_total{backend=\"vm1\",kind=\"b\"} 2.5\n"));
	assert_non_null(strstr(prom_text(p)->str,
			       "t_info{backend=\"vm1\",role=\"source\",transport=\"tcp\"} 1\n"));
	assert_non_null(strstr(prom_text(p)->str,
			       "# TYPE t_cpu_seconds_total counter\nt_cpu_seconds_total{backend=\"vm1\"} "));
}

/* Backslash, double quote and newline are escaped; bytes that are no UTF-8
 * (a path may hold them) become U+FFFD, so the file stays parseable. */
static void test_label_escaped(void **state)
{
	_cleanup_(prom_freep) struct prom *p = prom_new("vm", "a\"b\\c\nd\xff");

	(void)state;
	prom_sample(p, "t", "k", "x\"y", 1);
	assert_string_equal(prom_text(p)->str,
			    "t{vm=\"a\\\"b\\\\c\\nd\xef\xbf\xbd\",k=\"x\\\"y\"} 1\n");
}

/* The series of each sample line of a document: name and labels. */
static GHashTable *series_of(const struct prom *p)
{
	g_auto(GStrv) lines = g_strsplit(prom_text(p)->str, "\n", -1);
	GHashTable *set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

	for (char **l = lines; *l; l++) {
		const char *brace = strchr(*l, '}');

		if (**l && **l != '#')
			g_hash_table_add(set, g_strndup(*l, (size_t)(brace - *l + 1)));
	}
	return set;
}

/* Two daemons' files in one directory: no series of one in the other. */
static void test_two_documents_disjoint(void **state)
{
	_cleanup_(prom_freep) struct prom *a = render("/run/vrdma/a.sock");
	_cleanup_(prom_freep) struct prom *b = render("/run/vrdma/b.sock");
	g_autoptr(GHashTable) sa = series_of(a);
	g_autoptr(GHashTable) sb = series_of(b);
	GHashTableIter it;
	gpointer key;

	(void)state;
	assert_int_equal(g_hash_table_size(sa), 5);
	assert_int_equal(g_hash_table_size(sb), 5);
	g_hash_table_iter_init(&it, sb);
	while (g_hash_table_iter_next(&it, &key, NULL))
		assert_false(g_hash_table_contains(sa, key));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_sample_labelled),
		cmocka_unit_test(test_label_escaped),
		cmocka_unit_test(test_two_documents_disjoint),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

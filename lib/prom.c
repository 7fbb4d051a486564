// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "prom.h"

struct prom {
	GString *text;
	char *id; /* the identifying label, rendered: key="escaped value" */
};

/* The text format's escapes in a label value: backslash, quote, newline. */
static void append_label_value(GString *out, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			g_string_append_c(out, '\\');
		if (*v == '\n')
			g_string_append(out, "\\n");
		else
			g_string_append_c(out, *v);
	}
}

struct prom *prom_new(const char *id_key, const char *id_value)
{
	struct prom *p = g_new0(struct prom, 1);
	GString *id = g_string_new(id_key);
	/* Label values are UTF-8; a path need not be. */
	g_autofree char *valid = g_utf8_make_valid(id_value ? id_value : "", -1);

	g_string_append(id, "=\"");
	append_label_value(id, valid);
	g_string_append_c(id, '"');
	p->id = g_string_free(id, FALSE);
	p->text = g_string_new(NULL);
	return p;
}

void prom_free(struct prom *p)
{
	if (!p)
		return;
	g_string_free(p->text, TRUE);
	g_free(p->id);
	g_free(p);
}

void prom_freep(struct prom **p)
{
	prom_free(*p);
}

const GString *prom_text(const struct prom *p)
{
	return p->text;
}

void prom_family(struct prom *p, const char *name, const char *type, const char *help)
{
	g_string_append_printf(p->text, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void prom_sample_labels(struct prom *p, const char *name, const char *const *labels,
			double number)
{
	GString *out = p->text;

	g_string_append_printf(out, "%s{%s", name, p->id);
	for (; labels && labels[0]; labels += 2) {
		g_string_append_printf(out, ",%s=\"", labels[0]);
		append_label_value(out, labels[1] ? labels[1] : "");
		g_string_append_c(out, '"');
	}
	g_string_append_c(out, '}');
	/* Integers stay integers (counters of bytes exceed float's %g digits). */
	if (number >= -9.0e18 && number <= 9.0e18 && number == (double)(int64_t)number)
		g_string_append_printf(out, " %lld\n", (long long)number);
	else
		g_string_append_printf(out, " %.15g\n", number);
}

void prom_sample(struct prom *p, const char *name, const char *key, const char *value,
		 double number)
{
	const char *const labels[] = { key, value, NULL };

	prom_sample_labels(p, name, labels, number);
}

void prom_metric(struct prom *p, const char *name, const char *type, const char *help,
		 double number)
{
	prom_family(p, name, type, help);
	prom_sample(p, name, NULL, NULL, number);
}

void prom_process_cpu(struct prom *p, const char *prefix)
{
	g_autofree char *name = g_strconcat(prefix, "_cpu_seconds_total", NULL);
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return;
	prom_metric(p, name, "counter",
		    "user and system CPU time spent by this process, in seconds",
		    (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
}

int prom_write_file(const char *path, const struct prom *p)
{
	g_autofree char *tmp = g_strdup_printf("%s.tmp.%d", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	const GString *out = p->text;
	size_t done = 0;
	int ret = 0;

	if (fd < 0)
		return -errno;
	while (done < out->len) {
		ssize_t n = write(fd, out->str + done, out->len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			break;
		}
		done += (size_t)n;
	}
	if (close(fd) < 0 && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path) < 0)
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

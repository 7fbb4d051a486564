// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "prom.h"

void prom_family(GString *out, const char *name, const char *type, const char *help)
{
	g_string_append_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

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

void prom_sample(GString *out, const char *name, const char *label_key, const char *label_value,
		 double value)
{
	g_string_append(out, name);
	if (label_key) {
		g_string_append_printf(out, "{%s=\"", label_key);
		append_label_value(out, label_value ? label_value : "");
		g_string_append(out, "\"}");
	}
	/* Integers stay integers (counters of bytes exceed float's %g digits). */
	if (value >= -9.0e18 && value <= 9.0e18 && value == (double)(int64_t)value)
		g_string_append_printf(out, " %lld\n", (long long)value);
	else
		g_string_append_printf(out, " %.15g\n", value);
}

void prom_metric(GString *out, const char *name, const char *type, const char *help,
		 double value)
{
	prom_family(out, name, type, help);
	prom_sample(out, name, NULL, NULL, value);
}

void prom_process_cpu(GString *out)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return;
	prom_metric(out, "process_cpu_seconds_total", "counter",
		    "user and system CPU time spent by this process, in seconds",
		    (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
}

int prom_write_file(const char *path, const GString *out)
{
	g_autofree char *tmp = g_strdup_printf("%s.tmp.%d", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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

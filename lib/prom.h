/* SPDX-License-Identifier: MIT */
/*
 * Metrics in the Prometheus text exposition format (version 0.0.4), for
 * node_exporter's textfile collector: families of samples built in a
 * GString, then written atomically to a file.
 */
#ifndef VRDMA_PROM_H
#define VRDMA_PROM_H

#include <stdint.h>

#include <glib.h>

/* "# HELP" and "# TYPE" lines; type is "counter" or "gauge". */
void prom_family(GString *out, const char *name, const char *type, const char *help);
/*
 * One sample, with one label (label_key NULL: none); the label's value is
 * quoted and escaped here.  Whole numbers are written as integers.
 */
void prom_sample(GString *out, const char *name, const char *label_key, const char *label_value,
		 double value);
/* A family of one sample without labels: prom_family() + prom_sample(). */
void prom_metric(GString *out, const char *name, const char *type, const char *help,
		 double value);
/* process_cpu_seconds_total: this process's user + system CPU time, the
 * standard name exporters use. */
void prom_process_cpu(GString *out);
/* Writes out to path through a temporary file in the same directory and a
 * rename, so a reader never sees half a file.  -errno on failure. */
int prom_write_file(const char *path, const GString *out);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Metrics in the Prometheus text exposition format (version 0.0.4), for
 * node_exporter's textfile collector: families of samples built in memory,
 * then written atomically to a file.
 *
 * Several daemons' files sit in one textfile directory, and node_exporter
 * refuses a scrape that holds the same series twice.  So every sample of a
 * document carries the document's identifying label (the back end's or the
 * migration's name), set once at prom_new().  Names follow Prometheus'
 * conventions: base units (_bytes, _seconds), counters end in _total.
 */
#ifndef VRDMA_PROM_H
#define VRDMA_PROM_H

#include <stdint.h>

#include <glib.h>

struct prom;

/* A new document whose every sample carries id_key="id_value" (the value
 * is escaped here, and invalid UTF-8 in it replaced). */
struct prom *prom_new(const char *id_key, const char *id_value);
void prom_free(struct prom *p);
/* For _cleanup_(prom_freep) (util.h). */
void prom_freep(struct prom **p);
/* The text so far. */
const GString *prom_text(const struct prom *p);

/* "# HELP" and "# TYPE" lines; type is "counter" or "gauge". */
void prom_family(struct prom *p, const char *name, const char *type, const char *help);
/*
 * One sample: the identifying label, then one more (key NULL: none) whose
 * value is quoted and escaped here.  Whole numbers are written as integers.
 */
void prom_sample(struct prom *p, const char *name, const char *key, const char *value,
		 double number);
/* One sample with more labels: key, value, key, value, ..., NULL. */
void prom_sample_labels(struct prom *p, const char *name, const char *const *labels,
			double number);
/* A family of one sample with only the identifying label. */
void prom_metric(struct prom *p, const char *name, const char *type, const char *help,
		 double number);
/* PREFIX_cpu_seconds_total: this process's user + system CPU time.  Not
 * process_cpu_seconds_total: node_exporter exports that for itself, and a
 * textfile family of the same name with other help text is refused. */
void prom_process_cpu(struct prom *p, const char *prefix);
/* Writes the document to path through a temporary file in the same
 * directory and a rename, so a reader never sees half a file.  -errno on
 * failure. */
int prom_write_file(const char *path, const struct prom *p);

#endif

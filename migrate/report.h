/* SPDX-License-Identifier: MIT */
/*
 * How both sides of a migration report to their caller: the stats it reads
 * afterwards (the first failure is the one it sees) and the events its
 * callback gets meanwhile.
 */
#ifndef VRDMA_MIG_REPORT_H
#define VRDMA_MIG_REPORT_H

#include "migrate.h"
#include "util.h"

/* Records why the migration fails, unless a cause is already recorded; returns err. */
static inline int mig_report_failure(struct mig_stats *st, enum mig_failure why, int err)
{
	if (!st->failure) {
		st->failure = why;
		st->error = err;
	}
	return err;
}

/* Stamps the time since t_start (monotonic ns), then tells fn (may be NULL). */
static inline void mig_report_event(struct mig_stats *st, uint64_t t_start, mig_event_fn fn,
				    void *opaque, enum mig_event_type type)
{
	struct mig_event ev = { .type = type, .stats = st };

	st->total_time_ms = (monotonic_ns() - t_start) / 1000000;
	if (fn)
		fn(&ev, opaque);
}

#endif

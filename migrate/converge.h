/* SPDX-License-Identifier: MIT */
/*
 * When to stop pre-copying.  After every dirty sync the engine knows how
 * many bytes are dirty and how fast the last round moved data; this policy
 * answers: another round, another round with the guest throttled harder,
 * or stop-and-copy now.  Pure logic, so it is unit tested on its own.
 */
#ifndef VRDMA_MIG_CONVERGE_H
#define VRDMA_MIG_CONVERGE_H

#include <stdint.h>

struct converge_cfg {
	uint64_t downtime_limit_ns; /* default 300 ms, like QEMU */
	unsigned max_rounds;        /* forced stop-and-copy after this many */
	unsigned throttle_initial;  /* percent, first hint (QEMU: 20) */
	unsigned throttle_step;     /* percent added per further hint (QEMU: 10) */
	unsigned throttle_max;      /* percent (QEMU: 99) */
	unsigned stalls_before_throttle; /* non-shrinking rounds before a hint */
};

struct converge_state {
	unsigned round;           /* syncs decided so far */
	uint64_t prev_dirty_bytes;
	unsigned stalls;
	unsigned throttle;        /* percent currently asked for */
};

enum converge_action {
	CONVERGE_CONTINUE,
	CONVERGE_THROTTLE,  /* another round; ask the owner for state->throttle % */
	CONVERGE_STOP_COPY, /* remaining fits the downtime limit */
	CONVERGE_FORCED,    /* round cap reached: stop-and-copy anyway */
};

void converge_cfg_default(struct converge_cfg *cfg);
/*
 * dirty_bytes: dirty now; bandwidth: bytes/s of the last round (0 if
 * unknown).  *ret_expected_ns: the downtime a stop-and-copy now would take
 * (UINT64_MAX if the bandwidth is unknown).
 */
enum converge_action converge_decide(const struct converge_cfg *cfg,
				     struct converge_state *state,
				     uint64_t dirty_bytes, double bandwidth,
				     uint64_t *ret_expected_ns);

#endif

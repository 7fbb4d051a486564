// SPDX-License-Identifier: MIT
#include "converge.h"

#include <stdbool.h>

/* A round "shrank" when the dirty set fell below this share of the last one. */
#define SHRINK_NUM 9
#define SHRINK_DEN 10

void converge_cfg_default(struct converge_cfg *cfg)
{
	*cfg = (struct converge_cfg){
		.downtime_limit_ns = 300ull * 1000 * 1000,
		.max_rounds = 30,
		.throttle_initial = 20,
		.throttle_step = 10,
		.throttle_max = 99,
		.stalls_before_throttle = 2,
	};
}

static uint64_t expected_ns(uint64_t bytes, double bandwidth)
{
	double ns;

	if (bytes == 0)
		return 0;
	if (bandwidth <= 0)
		return UINT64_MAX;
	ns = (double)bytes / bandwidth * 1e9;
	return ns >= (double)UINT64_MAX ? UINT64_MAX : (uint64_t)ns;
}

enum converge_action converge_decide(const struct converge_cfg *cfg,
				     struct converge_state *state,
				     uint64_t dirty_bytes, double bandwidth,
				     uint64_t *ret_expected_ns)
{
	uint64_t expect = expected_ns(dirty_bytes, bandwidth);
	bool shrinking;

	*ret_expected_ns = expect;
	state->round++;
	shrinking = state->round == 1 ||
		    dirty_bytes / SHRINK_NUM * SHRINK_DEN < state->prev_dirty_bytes ||
		    dirty_bytes < SHRINK_NUM; /* tiny sets always count as shrinking */
	state->prev_dirty_bytes = dirty_bytes;
	if (expect <= cfg->downtime_limit_ns)
		return CONVERGE_STOP_COPY;
	if (state->round >= cfg->max_rounds)
		return CONVERGE_FORCED;
	state->stalls = shrinking ? 0 : state->stalls + 1;
	if (state->stalls < cfg->stalls_before_throttle ||
	    state->throttle >= cfg->throttle_max)
		return CONVERGE_CONTINUE;
	state->stalls = 0;
	state->throttle = state->throttle ? state->throttle + cfg->throttle_step
					  : cfg->throttle_initial;
	if (state->throttle > cfg->throttle_max)
		state->throttle = cfg->throttle_max;
	return CONVERGE_THROTTLE;
}

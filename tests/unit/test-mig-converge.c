// SPDX-License-Identifier: MIT
/*
 * Unit tests of migrate/converge.c, the pre-copy convergence policy: when to
 * stop-and-copy, when to throttle the guest, and when to give up waiting.
 * Ends with a small simulation of a guest dirtying memory against a link.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "converge.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)
#define MS 1000000ull

static const char *action_name(enum converge_action a)
{
	switch (a) {
	case CONVERGE_CONTINUE: return "CONTINUE";
	case CONVERGE_THROTTLE: return "THROTTLE";
	case CONVERGE_STOP_COPY: return "STOP_COPY";
	case CONVERGE_FORCED: return "FORCED";
	}
	return "?";
}

#define assert_action(got, want)                                            \
	do {                                                                  \
		enum converge_action g_ = (got), w_ = (want);                 \
		if (g_ != w_)                                                 \
			fail_msg("action %s, want %s", action_name(g_),       \
				 action_name(w_));                            \
	} while (0)

static struct converge_cfg dflt(void)
{
	struct converge_cfg cfg;

	memset(&cfg, 0x5a, sizeof(cfg)); /* every field must be written */
	converge_cfg_default(&cfg);
	return cfg;
}

static enum converge_action decide(const struct converge_cfg *cfg,
				   struct converge_state *st, uint64_t dirty,
				   double bw, uint64_t *ret_expect)
{
	/* Same decision on a copy with another sentinel: *ret is always written. */
	struct converge_state copy = *st;
	uint64_t expect = 0x1234, expect2 = 0x5678;
	enum converge_action a = converge_decide(cfg, st, dirty, bw, &expect);
	enum converge_action a2 = converge_decide(cfg, &copy, dirty, bw, &expect2);

	assert_int_equal(a, a2);
	assert_int_equal(expect, expect2);
	assert_memory_equal(&copy, st, sizeof(copy));
	if (ret_expect)
		*ret_expect = expect;
	return a;
}

/* One round of dirty bytes, sent at 1 GiB/s, decides want. */
#define assert_round(cfg, st, dirty, want)                                    \
	assert_action(decide(cfg, st, dirty, (double)GiB, NULL), want)

static void test_defaults(void **state)
{
	struct converge_cfg cfg = dflt();
	(void)state;

	assert_int_equal(cfg.downtime_limit_ns, 300 * MS);
	assert_int_equal(cfg.throttle_initial, 20);
	assert_int_equal(cfg.throttle_step, 10);
	assert_int_equal(cfg.throttle_max, 99);
	assert_int_equal(cfg.stalls_before_throttle, 2);
	assert_true(cfg.max_rounds >= 20);
}

static void test_stop_copy_fits(void **state)
{
	struct converge_cfg cfg = dflt();
	uint64_t e;
	(void)state;

	/* 256 MiB at 1 GiB/s: exactly 250 ms. */
	struct converge_state st = { 0 };
	assert_action(decide(&cfg, &st, 256 * MiB, (double)GiB, &e), CONVERGE_STOP_COPY);
	assert_int_equal(e, 250 * MS);
	assert_int_equal(st.round, 1);
	assert_int_equal(st.throttle, 0);

	/* 100 MB at 1 GB/s: 100 ms, within rounding. */
	st = (struct converge_state){ 0 };
	assert_action(decide(&cfg, &st, 100000000, 1e9, &e), CONVERGE_STOP_COPY);
	assert_true(e >= 100 * MS - 1 && e <= 100 * MS + 1);

	/* Exactly at the limit (inclusive), and one page over it. */
	struct converge_cfg c250 = dflt();
	c250.downtime_limit_ns = 250 * MS;
	st = (struct converge_state){ 0 };
	assert_action(decide(&c250, &st, 256 * MiB, (double)GiB, &e),
		      CONVERGE_STOP_COPY);
	assert_int_equal(e, 250 * MS);
	st = (struct converge_state){ 0 };
	assert_action(decide(&c250, &st, 256 * MiB + 4096, (double)GiB, &e),
		      CONVERGE_CONTINUE);
	assert_true(e > 250 * MS);

	/* 1 GiB at 1 GiB/s: 1 s, too long; the first round never throttles. */
	st = (struct converge_state){ 0 };
	assert_action(decide(&cfg, &st, GiB, (double)GiB, &e), CONVERGE_CONTINUE);
	assert_int_equal(e, 1000 * MS);

	/* Just over the limit at 1e9 B/s. */
	st = (struct converge_state){ 0 };
	assert_action(decide(&cfg, &st, 300000001 + 1000, 1e9, &e), CONVERGE_CONTINUE);
	assert_true(e > 300 * MS);

	/* A large set over a fast link: 10 GiB at 100 GiB/s = 100 ms. */
	st = (struct converge_state){ 0 };
	assert_action(decide(&cfg, &st, 10 * GiB, 100.0 * GiB, &e), CONVERGE_STOP_COPY);
	assert_true(e >= 100 * MS - 1 && e <= 100 * MS + 1);

	/* Stop-copy in a later round, once the set has shrunk enough. */
	st = (struct converge_state){ 0 };
	assert_round(&cfg, &st, 4 * GiB, CONVERGE_CONTINUE);
	assert_round(&cfg, &st, 1 * GiB, CONVERGE_CONTINUE);
	assert_action(decide(&cfg, &st, 200 * MiB, (double)GiB, &e), CONVERGE_STOP_COPY);
	assert_true(e >= 195 * MS && e <= 196 * MS);
	assert_int_equal(st.round, 3);
}

static void test_custom_limit(void **state)
{
	struct converge_cfg cfg = dflt();
	struct converge_state st = { 0 };
	uint64_t e;
	(void)state;

	cfg.downtime_limit_ns = 10 * MS;
	/* 20 MiB at 1 GiB/s: ~19.5 ms > 10 ms. */
	assert_action(decide(&cfg, &st, 20 * MiB, (double)GiB, &e), CONVERGE_CONTINUE);
	assert_action(decide(&cfg, &st, 10 * MiB, (double)GiB, &e), CONVERGE_STOP_COPY);
	assert_true(e < 10 * MS);
}

static void test_unknown_bandwidth(void **state)
{
	struct converge_cfg cfg = dflt();
	struct converge_state st = { 0 };
	uint64_t e;
	(void)state;

	/* Nothing dirty: stop now, whatever the bandwidth. */
	assert_action(decide(&cfg, &st, 0, 0, &e), CONVERGE_STOP_COPY);
	assert_int_equal(e, 0);
	st = (struct converge_state){ 0 };
	assert_action(decide(&cfg, &st, 0, 1e9, &e), CONVERGE_STOP_COPY);
	assert_int_equal(e, 0);

	/* Unknown bandwidth, even one dirty byte: never a stop-and-copy. */
	static const uint64_t dirty[] = { 1, 4096, GiB };
	for (size_t i = 0; i < sizeof(dirty) / sizeof(dirty[0]); i++) {
		st = (struct converge_state){ 0 };
		for (unsigned round = 1; round <= cfg.max_rounds; round++) {
			enum converge_action a = decide(&cfg, &st, dirty[i], 0, &e);

			assert_int_equal(e, UINT64_MAX);
			if (round < cfg.max_rounds)
				assert_true(a == CONVERGE_CONTINUE || a == CONVERGE_THROTTLE);
			else
				assert_action(a, CONVERGE_FORCED);
		}
	}

	/* Negative bandwidth is as unknown as zero. */
	st = (struct converge_state){ 0 };
	assert_action(decide(&cfg, &st, 4096, -1.0, &e), CONVERGE_CONTINUE);
	assert_int_equal(e, UINT64_MAX);

	/* A tiny bandwidth: expected time saturates, no overflow. */
	st = (struct converge_state){ 0 };
	assert_action(decide(&cfg, &st, UINT64_MAX, 1e-12, &e), CONVERGE_CONTINUE);
	assert_int_equal(e, UINT64_MAX);
}

static void test_shrinking_no_throttle(void **state)
{
	struct converge_cfg cfg = dflt();
	struct converge_state st = { 0 };
	uint64_t dirty = 64 * GiB;
	(void)state;

	/* 1 GiB/s: nothing above 300 MiB fits; shrink by 20 % per round. */
	for (unsigned round = 1; round <= 15; round++) {
		assert_round(&cfg, &st, dirty, CONVERGE_CONTINUE);
		assert_int_equal(st.throttle, 0);
		assert_int_equal(st.round, round);
		dirty = dirty * 8 / 10;
	}
	/* 64 GiB * 0.8^15 = 2.25 GiB; keep going down to the limit. */
	while (dirty > 300 * MiB) {
		assert_round(&cfg, &st, dirty, CONVERGE_CONTINUE);
		dirty = dirty * 8 / 10;
	}
	assert_round(&cfg, &st, dirty, CONVERGE_STOP_COPY);
	assert_int_equal(st.throttle, 0);
	assert_true(st.round < cfg.max_rounds);
}

/* Alternating stall and shrink never adds up to two consecutive stalls. */
static void test_stall_counter_resets(void **state)
{
	struct converge_cfg cfg = dflt();
	struct converge_state st = { 0 };
	(void)state;

	/* 10 GiB, 10 GiB (stall), then 5, 10 (growth: a stall), 5, 10, ... */
	assert_round(&cfg, &st, 10 * GiB, CONVERGE_CONTINUE);
	assert_round(&cfg, &st, 10 * GiB, CONVERGE_CONTINUE);
	assert_int_equal(st.stalls, 1);
	for (unsigned i = 0; i < 13; i++) {
		assert_round(&cfg, &st, 5 * GiB, CONVERGE_CONTINUE);
		assert_int_equal(st.stalls, 0);
		assert_round(&cfg, &st, 10 * GiB, CONVERGE_CONTINUE);
		assert_int_equal(st.stalls, 1);
	}
	assert_int_equal(st.throttle, 0);
	assert_int_equal(st.round, 28);
	/* One more stall now makes two in a row. */
	assert_round(&cfg, &st, 10 * GiB, CONVERGE_THROTTLE);
	assert_int_equal(st.throttle, 20);
}

/* A dirty set that never shrinks: throttle 20, 30, ... 90, 99, then nothing. */
static void test_throttle_ladder(void **state)
{
	struct converge_cfg cfg = dflt();
	struct converge_state st = { 0 };
	unsigned want = 0, hints = 0, last_hint_round = 0;
	(void)state;

	for (unsigned round = 1; round <= cfg.max_rounds; round++) {
		unsigned before = st.throttle;
		enum converge_action a = decide(&cfg, &st, 8 * GiB, (double)GiB, NULL);

		assert_true(st.throttle <= cfg.throttle_max);
		if (round == cfg.max_rounds) {
			assert_action(a, CONVERGE_FORCED);
			break;
		}
		if (a == CONVERGE_THROTTLE) {
			want = want ? want + 10 : 20;
			if (want > 99)
				want = 99;
			hints++;
			if (st.throttle != want)
				fail_msg("round %u: throttle %u, want %u", round,
					 st.throttle, want);
			/* Two non-shrinking rounds between hints (round 1 shrinks). */
			assert_int_equal(round, last_hint_round ? last_hint_round + 2 : 3);
			last_hint_round = round;
		} else {
			assert_action(a, CONVERGE_CONTINUE);
			assert_int_equal(st.throttle, before);
		}
	}
	/* 20 30 40 50 60 70 80 90 99 */
	assert_int_equal(hints, 9);
	assert_int_equal(st.throttle, 99);
	assert_int_equal(last_hint_round, 19);
}

/* Growth counts as a stall, and the first round's size does not matter. */
static void test_growing_set_throttles(void **state)
{
	struct converge_cfg cfg = dflt();
	struct converge_state st = { 0 };
	(void)state;

	assert_round(&cfg, &st, 1 * GiB, CONVERGE_CONTINUE);
	assert_round(&cfg, &st, 2 * GiB, CONVERGE_CONTINUE);
	assert_round(&cfg, &st, 3 * GiB, CONVERGE_THROTTLE);
	assert_int_equal(st.throttle, 20);

	/* 5 % less is not shrinking (needs < 90 %). */
	st = (struct converge_state){ 0 };
	assert_round(&cfg, &st, 10 * GiB, CONVERGE_CONTINUE);
	assert_round(&cfg, &st, 95 * GiB / 10, CONVERGE_CONTINUE);
	assert_round(&cfg, &st, 91 * GiB / 10, CONVERGE_THROTTLE);
	assert_int_equal(st.throttle, 20);

	/* 20 % less each round is shrinking: no hint. */
	st = (struct converge_state){ 0 };
	assert_round(&cfg, &st, 10 * GiB, CONVERGE_CONTINUE);
	assert_round(&cfg, &st, 8 * GiB, CONVERGE_CONTINUE);
	assert_round(&cfg, &st, 64 * GiB / 10, CONVERGE_CONTINUE);
	assert_int_equal(st.throttle, 0);
}

/* A cap that is not a multiple of the step, and a bigger initial value. */
static void test_throttle_custom_cap(void **state)
{
	struct converge_cfg cfg = dflt();
	struct converge_state st = { 0 };
	unsigned seen[8], n = 0;
	(void)state;

	cfg.throttle_initial = 50;
	cfg.throttle_step = 25;
	cfg.throttle_max = 90;
	cfg.stalls_before_throttle = 1;
	cfg.max_rounds = 100;
	for (unsigned round = 1; round < 20; round++) {
		enum converge_action a = decide(&cfg, &st, 8 * GiB, (double)GiB, NULL);

		assert_true(st.throttle <= 90);
		if (a == CONVERGE_THROTTLE) {
			assert_true(n < 8);
			seen[n++] = st.throttle;
		} else {
			assert_action(a, CONVERGE_CONTINUE);
		}
	}
	assert_int_equal(n, 3);
	assert_int_equal(seen[0], 50);
	assert_int_equal(seen[1], 75);
	assert_int_equal(seen[2], 90);
}

static void test_max_rounds(void **state)
{
	struct converge_cfg cfg = dflt();
	struct converge_state st = { 0 };
	uint64_t dirty = 100 * GiB;
	(void)state;

	/* Shrinking, but too slowly to ever fit. */
	for (unsigned round = 1; round < cfg.max_rounds; round++) {
		assert_round(&cfg, &st, dirty, CONVERGE_CONTINUE);
		dirty = dirty * 85 / 100;
	}
	assert_round(&cfg, &st, dirty, CONVERGE_FORCED);
	assert_int_equal(st.round, cfg.max_rounds);

	/* A small cap. */
	cfg.max_rounds = 3;
	st = (struct converge_state){ 0 };
	assert_round(&cfg, &st, 8 * GiB, CONVERGE_CONTINUE);
	assert_round(&cfg, &st, 4 * GiB, CONVERGE_CONTINUE);
	assert_round(&cfg, &st, 2 * GiB, CONVERGE_FORCED);

	/* Fitting in the last round is a normal stop, not a forced one. */
	st = (struct converge_state){ 0 };
	assert_round(&cfg, &st, 8 * GiB, CONVERGE_CONTINUE);
	assert_round(&cfg, &st, 4 * GiB, CONVERGE_CONTINUE);
	assert_round(&cfg, &st, 100 * MiB, CONVERGE_STOP_COPY);
}

/* ---- simulation ---- */

struct sim_result {
	enum converge_action end;
	unsigned rounds;
	unsigned max_throttle;
	uint64_t expect_ns;
};

/*
 * A guest of `ram` bytes dirtying `rate` bytes/s (reduced by the throttle
 * percent when the owner honours it) while the engine sends at `bw`
 * bytes/s.  Round 0 sends all of RAM; each round then sends what was
 * dirtied during the previous one (never more than RAM).
 */
static struct sim_result simulate(double rate, double bw, uint64_t ram,
				  bool honour_throttle)
{
	struct converge_cfg cfg = dflt();
	struct converge_state st = { 0 };
	struct sim_result res = { 0 };
	double sent = (double)ram;

	for (;;) {
		double secs = sent / bw;
		double eff = honour_throttle ? rate * (100 - st.throttle) / 100 : rate;
		double dirty = fmin(eff * secs, (double)ram);
		enum converge_action a;

		a = decide(&cfg, &st, (uint64_t)dirty, bw, &res.expect_ns);
		if (st.throttle > res.max_throttle)
			res.max_throttle = st.throttle;
		assert_true(st.throttle <= cfg.throttle_max);
		res.rounds = st.round;
		if (a == CONVERGE_STOP_COPY || a == CONVERGE_FORCED) {
			res.end = a;
			return res;
		}
		assert_true(st.round < cfg.max_rounds);
		sent = dirty;
	}
}

static void test_simulation(void **state)
{
	const double bw = 1.25e9; /* 10 Gbit/s */
	struct sim_result r;
	(void)state;

	/* D = 0.3 B: converges quickly, without any throttle. */
	r = simulate(0.3 * bw, bw, 16 * GiB, true);
	assert_action(r.end, CONVERGE_STOP_COPY);
	assert_int_equal(r.max_throttle, 0);
	assert_true(r.rounds <= 6);
	assert_true(r.expect_ns <= 300 * MS);

	/* Same with a small guest: the first sync already fits. */
	r = simulate(0.3 * bw, bw, 256 * MiB, true);
	assert_action(r.end, CONVERGE_STOP_COPY);
	assert_int_equal(r.rounds, 1);

	/* D = 2 B, owner ignores THROTTLE: it can never fit: forced. */
	r = simulate(2 * bw, bw, 16 * GiB, false);
	assert_action(r.end, CONVERGE_FORCED);
	assert_int_equal(r.rounds, dflt().max_rounds);
	assert_true(r.max_throttle >= 90);

	/* D = 2 B, owner honours THROTTLE: forced, or stopped thanks to it. */
	r = simulate(2 * bw, bw, 16 * GiB, true);
	print_message("D = 2B, throttled: %s after %u rounds, throttle %u%%\n",
		      action_name(r.end), r.rounds, r.max_throttle);
	if (r.end == CONVERGE_STOP_COPY) {
		/* Below 50 % throttle, D stays >= B: no convergence possible. */
		assert_true(r.max_throttle > 50);
		assert_true(r.expect_ns <= 300 * MS);
	} else {
		assert_action(r.end, CONVERGE_FORCED);
		assert_int_equal(r.rounds, dflt().max_rounds);
	}

	/* D = 0.95 B: shrinks too slowly to count, throttling rescues it. */
	r = simulate(0.95 * bw, bw, 16 * GiB, true);
	assert_action(r.end, CONVERGE_STOP_COPY);
	assert_true(r.max_throttle >= 20);
	r = simulate(0.95 * bw, bw, 16 * GiB, false);
	assert_action(r.end, CONVERGE_FORCED);

	/* An idle guest: round 1 sees nothing dirty. */
	r = simulate(0, bw, 16 * GiB, true);
	assert_action(r.end, CONVERGE_STOP_COPY);
	assert_int_equal(r.rounds, 1);
	assert_int_equal(r.expect_ns, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_stop_copy_fits),
		cmocka_unit_test(test_custom_limit),
		cmocka_unit_test(test_unknown_bandwidth),
		cmocka_unit_test(test_shrinking_no_throttle),
		cmocka_unit_test(test_stall_counter_resets),
		cmocka_unit_test(test_throttle_ladder),
		cmocka_unit_test(test_growing_set_throttles),
		cmocka_unit_test(test_throttle_custom_cap),
		cmocka_unit_test(test_max_rounds),
		cmocka_unit_test(test_simulation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

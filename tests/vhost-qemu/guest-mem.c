// SPDX-License-Identifier: MIT
/*
 * vrdma-guest-mem MIB RATE SEED: the memory half of the real-guest migration
 * workload (the disk half is guest-io.c).  Runs in the test guest, linked
 * static.
 *
 * It fills MIB MiB of anonymous memory with a pattern that depends on the
 * page, a per-page generation and SEED, then walks the pages in order for
 * ever: each page must still hold its current generation (every word), and
 * is rewritten with the next one.  RATE caps the walk in MiB/s, so the guest
 * dirties a known amount of memory per second during a migration.  A page
 * that a migration lost, or sent stale, fails the check on the next pass.
 *
 * Twice a second it prints
 *   vrdma-mem N ok pass P rate R maxgap_us G
 * N counts the lines, P the completed passes, R the MiB/s checked and
 * rewritten since the last line, G the longest time between two steps of the
 * walk since the start (intended sleeps excluded): what the guest itself saw
 * of a stall.  Under TCG the guest's clock stops while QEMU stops the vCPUs,
 * so G does not include a migration's downtime; the test measures that from
 * the host.  On a mismatch it prints one FAIL line and exits 1.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PAGE 4096u
#define WORDS (PAGE / sizeof(uint64_t))
#define REPORT_NS 500000000ll
#define CHUNK_PAGES 64u /* pages between two looks at the clock */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64's finalizer: a different base word per (seed, page, gen). */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t page_base(uint64_t seed, uint64_t page, uint32_t gen)
{
	return mix(seed ^ (page << 24) ^ gen);
}

static uint64_t pattern_word(uint64_t base, size_t i)
{
	return base ^ ((uint64_t)i * UINT64_C(0xd6e8feb86659fd93));
}

static void fill(uint64_t *p, uint64_t base)
{
	for (size_t i = 0; i < WORDS; i++)
		p[i] = pattern_word(base, i);
}

/* Index of the first word that differs, or -1. */
static long check(const uint64_t *p, uint64_t base)
{
	for (size_t i = 0; i < WORDS; i++)
		if (p[i] != pattern_word(base, i))
			return (long)i;
	return -1;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 0);
	return errno || end == s || *end ? -1 : 0;
}

int main(int argc, char **argv)
{
	uint64_t mib, rate, seed, npages, line = 0, passes = 0, maxgap = 0;
	uint64_t last_step, last_report, report_pages = 0, budget_start, budget_pages = 0;
	uint32_t *gen;
	uint8_t *mem;

	if (argc != 4 || parse_u64(argv[1], &mib) || parse_u64(argv[2], &rate) ||
	    parse_u64(argv[3], &seed) || mib == 0 || mib > (1u << 20) || rate == 0) {
		fprintf(stderr, "usage: vrdma-guest-mem MIB RATE_MIB_PER_S SEED\n");
		return 2;
	}
	npages = mib * (1024 * 1024 / PAGE);
	mem = mmap(NULL, npages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	gen = calloc(npages, sizeof(*gen));
	if (mem == MAP_FAILED || !gen) {
		printf("vrdma-mem 0 FAIL cannot allocate %" PRIu64 " MiB\n", mib);
		return 1;
	}
	for (uint64_t pg = 0; pg < npages; pg++)
		fill((uint64_t *)(mem + pg * PAGE), page_base(seed, pg, 0));
	printf("vrdma-mem 0 filled %" PRIu64 " MiB, rate %" PRIu64 " MiB/s\n", mib, rate);
	fflush(stdout);

	last_step = last_report = budget_start = now_ns();
	for (;;) {
		for (uint64_t pg = 0; pg < npages; pg++) {
			uint64_t *p = (uint64_t *)(mem + pg * PAGE);
			long bad = check(p, page_base(seed, pg, gen[pg]));

			if (bad >= 0) {
				printf("vrdma-mem %" PRIu64 " FAIL page %" PRIu64 " word %ld: got %016"
				       PRIx64 " want %016" PRIx64 " (generation %" PRIu32 ", pass %"
				       PRIu64 ")\n", line + 1, pg, bad, p[bad],
				       pattern_word(page_base(seed, pg, gen[pg]), (size_t)bad),
				       gen[pg], passes);
				fflush(stdout);
				return 1;
			}
			fill(p, page_base(seed, pg, ++gen[pg]));
			report_pages++;
			budget_pages++;
			if ((pg + 1) % CHUNK_PAGES)
				continue;

			uint64_t t = now_ns();
			if (t - last_step > maxgap)
				maxgap = t - last_step;
			/* Ahead of RATE: sleep until the budget allows this many pages. */
			uint64_t due = budget_start + budget_pages * PAGE * 1000000000ull /
						      (rate << 20);
			if (due > t) {
				struct timespec d = { (time_t)((due - t) / 1000000000ull),
						      (long)((due - t) % 1000000000ull) };
				nanosleep(&d, NULL);
				t = now_ns();
				if (t > due && t - due > maxgap)
					maxgap = t - due;
			}
			if (t - budget_start > 2000000000ull) {
				/* A fresh budget every 2 s: no catching up after a stall. */
				budget_start = t;
				budget_pages = 0;
			}
			last_step = t;
			if (t - last_report >= REPORT_NS) {
				printf("vrdma-mem %" PRIu64 " ok pass %" PRIu64 " rate %.1f maxgap_us %"
				       PRIu64 "\n", ++line, passes,
				       (double)report_pages * PAGE / (1 << 20) * 1e9 /
					       (double)(t - last_report),
				       maxgap / 1000);
				fflush(stdout);
				last_report = t;
				report_pages = 0;
			}
		}
		passes++;
	}
}

// SPDX-License-Identifier: MIT
/*
 * vrdma-guestsim: a fake guest that owns its RAM in a memfd and speaks the
 * owner protocol (owner-proto.h), so the migration engine can be tested,
 * demonstrated and benchmarked without QEMU.
 *
 * Source: page p always holds content(seed, p, version[p]).  A workload
 * thread rewrites whole pages at --dirty-rate and records every write in a
 * private dirty bitmap that SYNC hands over to the engine.  Because content
 * is a pure function of the version, the guest can prove at exit that nobody
 * else wrote into its memory (the self-check) and can publish per-page
 * hashes for the destination to compare its image against.
 *
 * Destination: zero-filled RAM of the same geometry for the engine to fill;
 * on COMPLETED it compares the image with the source's hash file.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glib.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "log.h"
#include "owner-proto.h"
#include "program.h"
#include "fileio.h"
#include "util.h"

#define GS_DEFAULT_BLOCKS 2
#define GS_MAX_RAM_MIB (1ull << 26) /* 64 TiB; blocks are capped separately */
#define GS_MAX_DIRTY_MBPS 1e6
#define GS_TICK_NS 1000000ull   /* token bucket granularity */
#define GS_BURST_NS 10000000ull /* a late tick catches up at most 10 ms */
#define GS_HOT_SHARE 9          /* tenths of the writes that go to the hot set */
#define GS_HASH_WAIT_MS 30000
#define GS_HASH_POLL_MS 20
#define GS_FIRST_BAD 8 /* page numbers worth quoting in a report */
#define GS_LISTEN_BACKLOG 4

enum gs_exit {
	GS_EXIT_OK = 0,
	GS_EXIT_CHECK = 1,   /* self-check failed, hash mismatch, I/O failure */
	GS_EXIT_USAGE = 2,   /* bad arguments, or cannot start as asked */
	GS_EXIT_ABORTED = 3, /* destination discarded its image */
	GS_EXIT_PROTO = 4,   /* destination: the engine broke the protocol */
};

enum gs_pattern { GS_UNIFORM, GS_HOTSET };

struct gs_opts {
	const char *socket_path;
	enum owner_role role;
	uint64_t ram_mib;
	unsigned nblocks;
	uint32_t page_size;
	double dirty_mbps;
	enum gs_pattern pattern;
	double hot_fraction;
	uint64_t seed;
	const char *hash_file;
	const char *check_hash_file;
	uint64_t corrupt_page; /* UINT64_MAX: none */
	/* Tests: the one request whose reply waits for SIGUSR1 (type 0: none). */
	enum owner_msg_type hold_type;
	uint64_t hold_round; /* for SYNC */
	bool quiet;
};

struct gs_block {
	uint64_t offset; /* in the memfd, bytes */
	uint64_t size;
	uint64_t first_page; /* global page number of its first page */
	uint64_t npages;
	uint64_t bitmap_word; /* its first word in either dirty bitmap */
};

/* Blocks lie back to back, so global page p is at base + p * page_size. */
struct gs_ram {
	int fd;
	uint8_t *base;
	uint64_t size;
	uint32_t page_size;
	uint64_t npages;
	uint64_t pages_per_block; /* of every block but the last */
	unsigned nblocks;
	struct gs_block blocks[OWNER_MAX_BLOCKS];
	uint64_t bitmap_words;
};

/* Up to GS_FIRST_BAD page numbers out of count. */
struct gs_bad {
	uint64_t count;
	uint64_t first[GS_FIRST_BAD];
};

struct gs_workload {
	const struct gs_ram *ram;
	uint64_t seed;
	uint32_t *version;       /* per page; only the thread writes it */
	_Atomic uint64_t *dirty; /* private bitmap, gs_ram layout */
	double bytes_per_ns;     /* unthrottled rate */
	enum gs_pattern pattern;
	uint64_t hot_pages;
	atomic_uint throttle;    /* percent */
	atomic_bool pause_req;   /* polled by the thread before every page */
	atomic_uint_fast64_t writes;
	pthread_mutex_t lock;    /* protects the fields below */
	pthread_cond_t cond;
	bool parked;
	bool quit;
	uint64_t run_ns;         /* time spent unparked, for the achieved rate */
	bool started;            /* main thread only */
	pthread_t thread;
};

enum gs_conn_state { GS_AWAIT_HELLO, GS_MIGRATING, GS_STOPPED };

struct gs_session {
	int sock;
	enum gs_conn_state state;
	uint64_t caps;
	int bitmap_fd; /* source: the shared dirty bitmap */
	uint64_t *shared;
	uint64_t bitmap_size;
	const char *close_why; /* why the connection ended, for the log */
	int resume_error;
};

struct gs {
	struct gs_opts opt;
	struct gs_ram ram;
	struct gs_workload wl;
	struct gs_session sess;
	int listen_fd;
	int sig_fd;
	dev_t sock_dev; /* identify our socket file before unlinking it */
	ino_t sock_ino;
	unsigned migrations;
	unsigned resumes;
	unsigned protocol_errors;
	unsigned throttle_max;
	bool selfcheck_failed;
	uint64_t selfcheck_bad_max;
	bool terminated; /* by a signal while holding a reply */
};

/* ---- page content ---- */

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline uint64_t xorshift64s(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* Chained splitmix so neighbouring (page, version) pairs look unrelated;
 * xorshift64* must not start from 0. */
static uint64_t page_seed(uint64_t seed, uint64_t page, uint32_t version)
{
	uint64_t s = splitmix64(splitmix64(splitmix64(seed) ^ page) ^ version);

	return s ? s : 1;
}

/*
 * Version 0 leaves every zero_every-th page zero (default 4), for zero-page
 * skipping to skip; 0 means none (incompressible RAM, as for benchmarks).
 * Set once by the options, before any thread starts.
 */
static uint64_t zero_every = 4;

static bool page_is_zero(uint64_t page, uint32_t version)
{
	return version == 0 && zero_every && page % zero_every == zero_every - 1;
}

static uint64_t *page_words(const struct gs_ram *ram, uint64_t page)
{
	return (uint64_t *)(ram->base + page * ram->page_size);
}

static void page_fill(const struct gs_ram *ram, uint64_t seed, uint64_t page,
		      uint32_t version)
{
	uint64_t *dst = page_words(ram, page);
	size_t nwords = ram->page_size / 8;
	uint64_t s;

	if (page_is_zero(page, version)) {
		memset(dst, 0, ram->page_size);
		return;
	}
	s = page_seed(seed, page, version);
	for (size_t i = 0; i < nwords; i++)
		dst[i] = xorshift64s(&s);
}

static bool page_matches(const struct gs_ram *ram, uint64_t seed, uint64_t page,
			 uint32_t version)
{
	const uint64_t *src = page_words(ram, page);
	size_t nwords = ram->page_size / 8;
	bool zero = page_is_zero(page, version);
	uint64_t s = page_seed(seed, page, version);

	for (size_t i = 0; i < nwords; i++) {
		if (src[i] != (zero ? 0 : xorshift64s(&s)))
			return false;
	}
	return true;
}

static void bad_add(struct gs_bad *bad, uint64_t page)
{
	if (bad->count < GS_FIRST_BAD)
		bad->first[bad->count] = page;
	bad->count++;
}

static void bad_format(const struct gs_bad *bad, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (uint64_t i = 0; i < bad->count && i < GS_FIRST_BAD && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%" PRIu64,
					 i ? "," : "", bad->first[i]);
}

/* ---- RAM ---- */

static void ram_layout(struct gs_ram *ram, const struct gs_opts *o)
{
	uint64_t total = o->ram_mib << 20;
	uint64_t bsize = total / o->nblocks / o->page_size * o->page_size;
	uint64_t word = 0;

	ram->fd = -1;
	ram->size = total;
	ram->page_size = o->page_size;
	ram->npages = total / o->page_size;
	ram->nblocks = o->nblocks;
	ram->pages_per_block = bsize / o->page_size;
	for (unsigned i = 0; i < o->nblocks; i++) {
		struct gs_block *b = &ram->blocks[i];

		b->offset = i * bsize;
		b->size = i + 1 < o->nblocks ? bsize : total - b->offset;
		b->first_page = b->offset / o->page_size;
		b->npages = b->size / o->page_size;
		b->bitmap_word = word;
		word += (b->npages + 63) / 64;
	}
	ram->bitmap_words = word;
}

/* A mapped memfd of fixed size; returns the fd. */
static int memfd_map(const char *name, uint64_t size, void **ret_map)
{
	_cleanup_(closep) int fd = -1;
	void *map;

	if (size > (uint64_t)PTRDIFF_MAX)
		return -EFBIG;
	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0)
		return -errno;
	/* The engine maps it: a size that cannot change cannot SIGBUS it. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return -errno;
	map = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	*ret_map = map;
	return steal_fd(&fd);
}

static int ram_create(struct gs_ram *ram)
{
	void *map;
	int fd = memfd_map("vrdma-guest-ram", ram->size, &map);

	if (fd < 0)
		return fd;
	ram->fd = fd;
	ram->base = map;
	return 0;
}

static void ram_discard(struct gs_ram *ram)
{
	if (ram->base)
		munmap(ram->base, (size_t)ram->size);
	closep(&ram->fd);
	ram->base = NULL;
	ram->fd = -1;
}

/* One call per run instead of one fault per page halves the fill time;
 * on a kernel without it the fill simply takes the faults. */
static void ram_populate(const struct gs_ram *ram, uint64_t first, uint64_t n)
{
	if (n)
		madvise(page_words(ram, first), n * ram->page_size, MADV_POPULATE_WRITE);
}

/* Version 0 everywhere.  A fresh memfd is already zero, so the zero pages
 * are left as holes that cost no memory. */
static void ram_fill_initial(const struct gs_ram *ram, uint64_t seed)
{
	uint64_t p = 0;

	while (p < ram->npages) {
		uint64_t end = p;

		while (end < ram->npages && !page_is_zero(end, 0))
			end++;
		ram_populate(ram, p, end - p);
		for (; p < end; p++)
			page_fill(ram, seed, p, 0);
		p = end + 1; /* past the zero page that ended the run */
	}
}

/* Little-endian XXH3 of every page, in page order: the hash file format. */
static uint8_t *ram_page_hashes(const struct gs_ram *ram)
{
	uint8_t *hashes = calloc(ram->npages, 8);

	if (!hashes)
		return NULL;
	for (uint64_t p = 0; p < ram->npages; p++)
		put_le64(hashes + p * 8, XXH3_64bits(page_words(ram, p), ram->page_size));
	return hashes;
}

/* ---- dirty tracking ---- */

static uint64_t dirty_word(const struct gs_ram *ram, uint64_t page, uint64_t *ret_bit)
{
	uint64_t b = page / ram->pages_per_block;
	uint64_t local;

	if (b >= ram->nblocks) /* the last block also takes the remainder */
		b = ram->nblocks - 1;
	local = page - ram->blocks[b].first_page;
	*ret_bit = 1ull << (local % 64);
	return ram->blocks[b].bitmap_word + local / 64;
}

static void dirty_mark(const struct gs_ram *ram, _Atomic uint64_t *bitmap, uint64_t page)
{
	uint64_t bit;
	uint64_t w = dirty_word(ram, page, &bit);

	/* Release: whoever sees the bit also sees the page it announces. */
	atomic_fetch_or_explicit(&bitmap[w], bit, memory_order_release);
}

static void dirty_clear(_Atomic uint64_t *bitmap, uint64_t nwords)
{
	for (uint64_t i = 0; i < nwords; i++)
		atomic_store_explicit(&bitmap[i], 0, memory_order_relaxed);
}

/*
 * Moves every private bit into the shared bitmap; returns how many moved.
 * The exchange (not load-then-clear) makes a write that races with the
 * harvest land either in this round or the next, never in neither.  No
 * fence before ROUND_READY: the engine reads the words only after that
 * message, and the kernel's socket queue locking orders our stores first.
 */
static uint64_t dirty_harvest(_Atomic uint64_t *bitmap, uint64_t *shared, uint64_t nwords)
{
	uint64_t moved = 0;

	for (uint64_t i = 0; i < nwords; i++) {
		uint64_t v = atomic_exchange_explicit(&bitmap[i], 0, memory_order_acquire);

		if (!v)
			continue;
		/* Atomic although the engine promised not to touch the word
		 * now: a careless engine then loses its own bits, not ours. */
		__atomic_fetch_or(&shared[i], v, __ATOMIC_RELAXED);
		moved += (uint64_t)__builtin_popcountll(v);
	}
	return moved;
}

/* ---- workload ---- */

struct gs_bucket {
	double tokens; /* bytes that may be written now */
	uint64_t last_ns;
	uint64_t next_tick_ns;
	uint64_t active_since_ns;
};

static void bucket_reset(struct gs_bucket *b)
{
	uint64_t now = monotonic_ns();

	*b = (struct gs_bucket){
		.last_ns = now, .next_tick_ns = now, .active_since_ns = now,
	};
}

static void bucket_refill(struct gs_workload *w, struct gs_bucket *b)
{
	unsigned throttle = atomic_load_explicit(&w->throttle, memory_order_relaxed);
	double rate = w->bytes_per_ns * (100 - throttle) / 100.0;
	double cap = rate * GS_BURST_NS;
	uint64_t now = monotonic_ns();

	if (cap < w->ram->page_size)
		cap = w->ram->page_size;
	b->tokens += (double)(now - b->last_ns) * rate;
	if (b->tokens > cap)
		b->tokens = cap;
	b->last_ns = now;
}

/* Sleeps to the next tick, or not at all when the writes overran it. */
static void bucket_sleep(struct gs_bucket *b)
{
	uint64_t now = monotonic_ns();
	struct timespec ts;

	b->next_tick_ns += GS_TICK_NS;
	if (b->next_tick_ns <= now) {
		b->next_tick_ns = now;
		return;
	}
	ts.tv_sec = (time_t)(b->next_tick_ns / 1000000000ull);
	ts.tv_nsec = (long)(b->next_tick_ns % 1000000000ull);
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static uint64_t pick_page(const struct gs_workload *w, uint64_t *rng)
{
	uint64_t n = w->ram->npages;
	uint64_t hot = w->hot_pages;
	uint64_t r = xorshift64s(rng);

	if (w->pattern == GS_UNIFORM || hot >= n)
		return r % n;
	if (xorshift64s(rng) % 10 < GS_HOT_SHARE)
		return r % hot;
	return hot + r % (n - hot);
}

/*
 * Content first, dirty bit second: the engine may copy the page between
 * the two, and the bit set afterwards makes it copy the page again next
 * round.  Bit first could let the engine copy the old content and clear
 * the bit before the new content is there: a lost update.
 */
static void workload_write(struct gs_workload *w, uint64_t page)
{
	uint32_t v = ++w->version[page];

	page_fill(w->ram, w->seed, page, v);
	dirty_mark(w->ram, w->dirty, page);
	atomic_fetch_add_explicit(&w->writes, 1, memory_order_relaxed);
}

/* Parks while a pause is requested; false when the thread should quit. */
static bool workload_runnable(struct gs_workload *w, struct gs_bucket *b)
{
	bool quit;

	if (!atomic_load_explicit(&w->pause_req, memory_order_acquire))
		return true;
	pthread_mutex_lock(&w->lock);
	w->run_ns += monotonic_ns() - b->active_since_ns;
	w->parked = true;
	pthread_cond_broadcast(&w->cond);
	while (atomic_load(&w->pause_req) && !w->quit)
		pthread_cond_wait(&w->cond, &w->lock);
	w->parked = false;
	quit = w->quit;
	pthread_mutex_unlock(&w->lock);
	bucket_reset(b); /* a pause must not turn into a burst */
	return !quit;
}

static void *workload_main(void *arg)
{
	struct gs_workload *w = arg;
	uint64_t rng = splitmix64(w->seed ^ 0x6775657374ull) | 1;
	struct gs_bucket b;

	bucket_reset(&b);
	while (workload_runnable(w, &b)) {
		bucket_refill(w, &b);
		while (b.tokens >= w->ram->page_size &&
		       !atomic_load_explicit(&w->pause_req, memory_order_acquire)) {
			workload_write(w, pick_page(w, &rng));
			b.tokens -= w->ram->page_size;
		}
		bucket_sleep(&b);
	}
	return NULL;
}

static int workload_init(struct gs_workload *w, const struct gs_ram *ram,
			 const struct gs_opts *o)
{
	/* Truncation is the floor here: both factors are positive. */
	uint64_t hot = (uint64_t)(o->hot_fraction * (double)ram->npages);

	w->ram = ram;
	w->seed = o->seed;
	w->bytes_per_ns = o->dirty_mbps * 1e6 / 1e9;
	w->pattern = o->pattern;
	w->hot_pages = hot < 1 ? 1 : hot > ram->npages ? ram->npages : hot;
	w->version = calloc(ram->npages, sizeof(*w->version));
	w->dirty = calloc(ram->bitmap_words, sizeof(*w->dirty));
	if (!w->version || !w->dirty)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	return 0;
}

static int workload_start(struct gs_workload *w)
{
	int r;

	if (w->bytes_per_ns <= 0)
		return 0;
	r = pthread_create(&w->thread, NULL, workload_main, w);
	if (r)
		return -r;
	w->started = true;
	return 0;
}

/* Returns once the thread is parked: no page write is in progress. */
static void workload_pause(struct gs_workload *w)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->lock);
	atomic_store_explicit(&w->pause_req, true, memory_order_release);
	while (!w->parked)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

static void workload_resume(struct gs_workload *w)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->lock);
	atomic_store_explicit(&w->pause_req, false, memory_order_release);
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static void workload_stop(struct gs_workload *w)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->lock);
	w->quit = true;
	atomic_store_explicit(&w->pause_req, true, memory_order_release);
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	w->started = false;
}

static void workload_free(struct gs_workload *w)
{
	workload_stop(w);
	free(w->version);
	free(w->dirty);
}

/* Only once the thread is parked or gone. */
static double workload_mbps(const struct gs_workload *w)
{
	uint64_t bytes = atomic_load(&w->writes) * w->ram->page_size;

	return w->run_ns ? (double)bytes * 1e3 / (double)w->run_ns : 0.0;
}

/* ---- self-check ---- */

/* The workload must be parked: it owns version[]. */
static void selfcheck_run(struct gs *g)
{
	struct gs_bad bad = { 0 };
	char first[256];

	for (uint64_t p = 0; p < g->ram.npages; p++) {
		if (!page_matches(&g->ram, g->opt.seed, p, g->wl.version[p]))
			bad_add(&bad, p);
	}
	if (!bad.count)
		return;
	g->selfcheck_failed = true;
	if (bad.count > g->selfcheck_bad_max)
		g->selfcheck_bad_max = bad.count;
	bad_format(&bad, first, sizeof(first));
	log_error("self-check: %" PRIu64 " pages were written by someone else (first: %s)",
		  bad.count, first);
}

/* ---- hash files ---- */

/* A reader sees either no file or the complete one, never a partial one. */
static int write_file_atomic(const char *path, const uint8_t *buf, size_t len)
{
	g_autofree char *tmp = g_strdup_printf("%s.XXXXXX", path);
	_cleanup_(closep) int fd = mkostemp(tmp, O_CLOEXEC);
	int r;

	if (fd < 0)
		return -errno;
	r = write_all(fd, buf, len);
	if (r == 0 && (fchmod(fd, 0644) < 0 || fsync(fd) < 0))
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	return fsync_dir_of(path);
}

/* Reads exactly len bytes; a file of any other size is -EBADMSG. */
static int read_file_exact(const char *path, uint8_t *buf, size_t len)
{
	_cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	size_t got = 0;

	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != len)
		return -EBADMSG;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EBADMSG;
		got += (size_t)n;
	}
	return 0;
}

/* The source writes the file at its own COMPLETED, which may come later;
 * -EINTR when a signal arrives meanwhile. */
static int wait_for_file(int sig_fd, const char *path, int timeout_ms)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct pollfd pfd = { .fd = sig_fd, .events = POLLIN };

	while (access(path, F_OK) < 0) {
		if (errno != ENOENT)
			return -errno;
		if (monotonic_ns() >= deadline)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, GS_HASH_POLL_MS) > 0)
			return -EINTR;
	}
	return 0;
}

static int hash_compare(const char *path, const uint8_t *hashes, uint64_t npages,
			struct gs_bad *ret_bad)
{
	uint8_t *theirs = malloc(npages * 8);
	int r;

	if (!theirs)
		return -ENOMEM;
	r = read_file_exact(path, theirs, npages * 8);
	for (uint64_t p = 0; r == 0 && p < npages; p++) {
		if (memcmp(theirs + p * 8, hashes + p * 8, 8))
			bad_add(ret_bad, p);
	}
	free(theirs);
	return r;
}

/* ---- the engine connection ---- */

enum gs_next {
	GS_CONTINUE,
	GS_CLOSE,       /* the connection is over; sess.close_why says why */
	GS_PROTO_ERROR, /* malformed or out of sequence: close, reply nothing */
	GS_COMPLETED,
	GS_ABORTED,
};

#define ST(s) (1u << (s))
#define ST_ACTIVE (ST(GS_MIGRATING) | ST(GS_STOPPED))

typedef enum gs_next (*gs_handler)(struct gs *g, const struct owner_msg *m);

/* One row per message the owner accepts, with the states it may come in:
 * the sequence check happens once, before any handler runs. */
struct gs_rule {
	enum owner_msg_type type;
	unsigned states;
	gs_handler handle;
};

static void session_reset(struct gs_session *s, int sock)
{
	*s = (struct gs_session){ .sock = sock, .bitmap_fd = -1 };
}

static void session_close(struct gs_session *s)
{
	if (s->shared)
		munmap(s->shared, (size_t)s->bitmap_size);
	closep(&s->bitmap_fd);
	closep(&s->sock);
	session_reset(s, -1);
}

static enum gs_next send_or_close(struct gs *g, const struct owner_msg *m, int fd)
{
	int r = owner_send(g->sess.sock, m, fd);

	if (r == 0)
		return GS_CONTINUE;
	g->sess.close_why = r == -ECONNRESET ? "engine disconnected" : "send failed";
	return GS_CLOSE;
}

static enum gs_next send_geometry(struct gs *g, enum owner_role role)
{
	struct owner_msg m = {
		.type = OWNER_MSG_WELCOME,
		.u.welcome = {
			.version = OWNER_PROTO_VERSION, .role = role,
			.caps = g->sess.caps, .nblocks = g->ram.nblocks,
		},
	};
	enum gs_next next = send_or_close(g, &m, -1);

	for (unsigned i = 0; i < g->ram.nblocks && next == GS_CONTINUE; i++) {
		const struct gs_block *b = &g->ram.blocks[i];

		m = (struct owner_msg){
			.type = OWNER_MSG_BLOCK,
			.u.block = {
				.index = i, .page_size = g->ram.page_size,
				.offset = b->offset, .size = b->size,
				.bitmap_offset = role == OWNER_ROLE_SOURCE ? b->bitmap_word * 8 : 0,
			},
		};
		snprintf(m.u.block.name, sizeof(m.u.block.name), "ram%u", i);
		next = send_or_close(g, &m, g->ram.fd);
	}
	return next;
}

/* The fd and map live as long as the connection; a retried migration gets
 * a fresh, all-clear bitmap. */
static int session_bitmap_create(struct gs_session *s, uint64_t nwords)
{
	void *map;
	int fd = memfd_map("vrdma-dirty-bitmap", nwords * 8, &map);

	if (fd < 0)
		return fd;
	s->bitmap_fd = fd;
	s->shared = map;
	s->bitmap_size = nwords * 8;
	return 0;
}

static bool hello_role_ok(const struct gs *g, const struct owner_msg *m)
{
	if (m->u.hello.role == g->opt.role)
		return true;
	log_warn("the engine said hello to a %s, this is the %s",
		 m->u.hello.role == OWNER_ROLE_SOURCE ? "source" : "destination",
		 g->opt.role == OWNER_ROLE_SOURCE ? "source" : "destination");
	return false;
}

static void hello_accepted(struct gs *g, const struct owner_msg *m)
{
	g->sess.caps = m->u.hello.caps & OWNER_CAP_THROTTLE;
	/* Active before anything is sent: once an fd is out, ending the
	 * connection must resume (source) or discard (destination). */
	g->sess.state = GS_MIGRATING;
	g->migrations++;
	log_info("migration %u: engine said hello (caps 0x%" PRIx64 ")",
		 g->migrations, g->sess.caps);
}

static enum gs_next src_hello(struct gs *g, const struct owner_msg *m)
{
	struct owner_msg bm = { .type = OWNER_MSG_BITMAP };
	enum gs_next next;
	int r;

	if (!hello_role_ok(g, m))
		return GS_PROTO_ERROR;
	r = session_bitmap_create(&g->sess, g->ram.bitmap_words);
	if (r < 0) {
		log_error("cannot create the shared dirty bitmap: %s", strerror(-r));
		g->sess.close_why = "no dirty bitmap";
		return GS_CLOSE;
	}
	/* Earlier writes are covered by the engine's first full pass, which
	 * can only start after WELCOME. */
	dirty_clear(g->wl.dirty, g->ram.bitmap_words);
	hello_accepted(g, m);
	next = send_geometry(g, OWNER_ROLE_SOURCE);
	if (next != GS_CONTINUE)
		return next;
	bm.u.bitmap_size = g->sess.bitmap_size;
	return send_or_close(g, &bm, g->sess.bitmap_fd);
}

static enum gs_next src_sync(struct gs *g, const struct owner_msg *m)
{
	struct owner_msg reply = { .type = OWNER_MSG_ROUND_READY };
	uint64_t moved = dirty_harvest(g->wl.dirty, g->sess.shared, g->ram.bitmap_words);

	reply.u.ready.round = m->u.round;
	reply.u.ready.dirty_pages = moved;
	log_info("round %" PRIu64 " ready with %" PRIu64 " dirty pages", m->u.round, moved);
	return send_or_close(g, &reply, -1);
}

static enum gs_next throttle_check(struct gs *g, const struct owner_msg *m)
{
	if (!(g->sess.caps & OWNER_CAP_THROTTLE)) {
		log_warn("THROTTLE without the capability having been agreed");
		return GS_PROTO_ERROR;
	}
	if (m->u.percent > g->throttle_max)
		g->throttle_max = m->u.percent;
	return GS_CONTINUE;
}

static enum gs_next src_throttle(struct gs *g, const struct owner_msg *m)
{
	enum gs_next next = throttle_check(g, m);

	if (next != GS_CONTINUE)
		return next;
	atomic_store_explicit(&g->wl.throttle, m->u.percent, memory_order_relaxed);
	log_info("throttled to %u%%", m->u.percent);
	return GS_CONTINUE;
}

/* Idempotent: a repeated STOP gets another STOPPED. */
static enum gs_next src_stop(struct gs *g, const struct owner_msg *m)
{
	struct owner_msg reply = { .type = OWNER_MSG_STOPPED };

	(void)m;
	workload_pause(&g->wl);
	g->sess.state = GS_STOPPED;
	log_info("stopped");
	return send_or_close(g, &reply, -1);
}

static enum gs_next src_resume(struct gs *g, const struct owner_msg *m)
{
	g->sess.resume_error = m->u.error;
	g->sess.close_why = "RESUME";
	return GS_CLOSE;
}

static enum gs_next on_completed(struct gs *g, const struct owner_msg *m)
{
	(void)m;
	(void)g;
	return GS_COMPLETED;
}

/* The destination has no workload to slow; agreeing to the capability
 * only spares the engine a special case. */
static enum gs_next dst_throttle(struct gs *g, const struct owner_msg *m)
{
	return throttle_check(g, m);
}

static enum gs_next dst_hello(struct gs *g, const struct owner_msg *m)
{
	if (!hello_role_ok(g, m))
		return GS_PROTO_ERROR;
	hello_accepted(g, m);
	return send_geometry(g, OWNER_ROLE_DEST);
}

static enum gs_next dst_abort(struct gs *g, const struct owner_msg *m)
{
	(void)g;
	log_warn("engine aborted the migration: %s",
		 m->u.error ? strerror(m->u.error) : "no error given");
	return GS_ABORTED;
}

static const struct gs_rule source_rules[] = {
	{ OWNER_MSG_HELLO, ST(GS_AWAIT_HELLO), src_hello },
	{ OWNER_MSG_SYNC, ST_ACTIVE, src_sync },
	{ OWNER_MSG_THROTTLE, ST_ACTIVE, src_throttle },
	{ OWNER_MSG_STOP, ST_ACTIVE, src_stop },
	{ OWNER_MSG_RESUME, ST_ACTIVE, src_resume },
	/* Completing while the guest still runs would strand its last writes. */
	{ OWNER_MSG_COMPLETED, ST(GS_STOPPED), on_completed },
};

static const struct gs_rule dest_rules[] = {
	{ OWNER_MSG_HELLO, ST(GS_AWAIT_HELLO), dst_hello },
	{ OWNER_MSG_THROTTLE, ST(GS_MIGRATING), dst_throttle },
	{ OWNER_MSG_COMPLETED, ST(GS_MIGRATING), on_completed },
	{ OWNER_MSG_ABORT, ST(GS_MIGRATING), dst_abort },
};

static const struct gs_rule *rule_find(const struct gs *g, enum owner_msg_type type)
{
	bool src = g->opt.role == OWNER_ROLE_SOURCE;
	const struct gs_rule *rules = src ? source_rules : dest_rules;
	size_t n = src ? ARRAY_SIZE(source_rules) : ARRAY_SIZE(dest_rules);

	for (size_t i = 0; i < n; i++) {
		if (rules[i].type == type)
			return &rules[i];
	}
	return NULL;
}

static enum gs_next recv_failed(struct gs *g, int r)
{
	if (r == -EBADMSG || r == -EPROTONOSUPPORT) {
		log_warn("malformed message from the engine: %s", strerror(-r));
		return GS_PROTO_ERROR;
	}
	g->sess.close_why = r == -ECONNRESET ? "engine disconnected" : "receive failed";
	return GS_CLOSE;
}

/* The signal read from the signalfd, 0 if none could be read. */
static int read_signal(int sig_fd)
{
	struct signalfd_siginfo si;

	if (read(sig_fd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return 0;
	return (int)si.ssi_signo;
}

static bool is_hold_point(const struct gs *g, const struct owner_msg *m)
{
	return g->opt.hold_type && m->type == g->opt.hold_type &&
	       (m->type != OWNER_MSG_SYNC || m->u.round == g->opt.hold_round);
}

/*
 * --hold-at: the engine waits for this reply while a test does what it
 * aims at this phase (kills a peer), then sends SIGUSR1.  Holds once.
 * Returns false if SIGTERM/SIGINT came instead.
 */
static bool hold_reply(struct gs *g, const struct owner_msg *m)
{
	struct pollfd pfd = { .fd = g->sig_fd, .events = POLLIN };

	log_info("holding the reply to %s until SIGUSR1", owner_msg_name(m->type));
	g->opt.hold_type = 0;
	for (;;) {
		int sig;

		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return false;
		sig = read_signal(g->sig_fd);
		if (sig == SIGUSR1) {
			log_info("released the hold");
			return true;
		}
		if (sig) {
			log_info("terminated by %s while holding", strsignal(sig));
			g->terminated = true;
			return false;
		}
	}
}

/*
 * After a held SYNC, every page is reported dirty: the round after the
 * release resends the whole RAM, so it lasts on any link until the engine
 * has noticed the fault aimed at it, and its convergence check has no
 * reason to end the rounds there.  The pages are unchanged; sending them
 * again is harmless, as a dirty log's false positives are.
 */
static void dirty_all(struct gs *g)
{
	for (uint64_t p = 0; p < g->ram.npages; p++)
		dirty_mark(&g->ram, g->wl.dirty, p);
	log_info("every page reported dirty after the hold");
}

/* Handles one message; the socket is readable. */
static enum gs_next session_step(struct gs *g)
{
	const struct gs_rule *rule;
	struct owner_msg m;
	int fd = -1;
	int r = owner_recv(g->sess.sock, 0, &m, &fd);

	if (r == -ETIMEDOUT || r == -EAGAIN)
		return GS_CONTINUE;
	if (r < 0)
		return recv_failed(g, r);
	if (fd >= 0) { /* only owner-to-engine messages carry one */
		close(fd);
		log_warn("engine sent %s, which only an owner sends", owner_msg_name(m.type));
		return GS_PROTO_ERROR;
	}
	rule = rule_find(g, m.type);
	if (!rule || !(rule->states & ST(g->sess.state))) {
		log_warn("%s out of sequence", owner_msg_name(m.type));
		return GS_PROTO_ERROR;
	}
	if (is_hold_point(g, &m)) {
		if (!hold_reply(g, &m))
			return GS_CONTINUE;
		if (m.type == OWNER_MSG_SYNC)
			dirty_all(g);
	}
	return rule->handle(g, &m);
}

/* ---- serving ---- */

enum gs_end {
	GS_END_NONE,
	GS_END_SIGNAL,
	GS_END_COMPLETED,
	GS_END_ABORTED,
	GS_END_PROTO,
	GS_END_FATAL,
};

/* After RESUME, an engine that vanished or one that broke the protocol:
 * an engine that died must never leave the guest paused. */
static void source_resume(struct gs *g)
{
	int err = g->sess.resume_error;

	g->resumes++;
	if (err)
		log_info("resumed (%s): %s", g->sess.close_why, strerror(err));
	else
		log_info("resumed (%s)", g->sess.close_why);
	session_close(&g->sess);
	workload_pause(&g->wl);
	selfcheck_run(g);
	atomic_store_explicit(&g->wl.throttle, 0, memory_order_relaxed);
	workload_resume(&g->wl);
}

static enum gs_end source_after(struct gs *g, enum gs_next next)
{
	bool active = g->sess.state != GS_AWAIT_HELLO;

	switch (next) {
	case GS_CONTINUE:
		return GS_END_NONE;
	case GS_COMPLETED:
		return GS_END_COMPLETED;
	case GS_PROTO_ERROR:
		g->protocol_errors++;
		g->sess.close_why = "protocol error";
		break;
	case GS_CLOSE:
	case GS_ABORTED:
		break;
	}
	if (active) {
		source_resume(g);
	} else {
		log_info("engine left before HELLO (%s)", g->sess.close_why);
		session_close(&g->sess);
	}
	return GS_END_NONE;
}

static enum gs_end dest_after(struct gs *g, enum gs_next next)
{
	switch (next) {
	case GS_CONTINUE:
		return GS_END_NONE;
	case GS_COMPLETED:
		return GS_END_COMPLETED;
	case GS_ABORTED:
		return GS_END_ABORTED;
	case GS_PROTO_ERROR:
		g->protocol_errors++;
		return GS_END_PROTO;
	case GS_CLOSE:
		break;
	}
	if (g->sess.state != GS_AWAIT_HELLO) {
		log_warn("%s before COMPLETED", g->sess.close_why);
		return GS_END_ABORTED;
	}
	/* Nothing was handed out yet, so nothing needs discarding. */
	log_info("engine left before HELLO (%s)", g->sess.close_why);
	session_close(&g->sess);
	return GS_END_NONE;
}

static void accept_engine(struct gs *g)
{
	int fd = accept4(g->listen_fd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0) {
		if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
			log_warn("accept: %s", strerror(errno));
		return;
	}
	session_reset(&g->sess, fd);
	log_info("engine connected");
}

/* poll() on the signal fd and either the listener or the one connection. */
static enum gs_end serve(struct gs *g)
{
	for (;;) {
		bool connected = g->sess.sock >= 0;
		struct pollfd pfd[2] = {
			{ .fd = g->sig_fd, .events = POLLIN },
			{ .fd = connected ? g->sess.sock : g->listen_fd, .events = POLLIN },
		};
		enum gs_next next;
		enum gs_end end;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error("poll: %s", strerror(errno));
			return GS_END_FATAL;
		}
		if (pfd[0].revents) {
			int sig = read_signal(g->sig_fd);

			if (sig == SIGUSR1)
				continue; /* a release with nothing held */
			if (sig)
				log_info("terminated by %s", strsignal(sig));
			return GS_END_SIGNAL;
		}
		if (!pfd[1].revents)
			continue;
		if (!connected) {
			accept_engine(g);
			continue;
		}
		next = session_step(g);
		if (g->terminated)
			return GS_END_SIGNAL;
		end = g->opt.role == OWNER_ROLE_SOURCE ? source_after(g, next)
						       : dest_after(g, next);
		if (end != GS_END_NONE)
			return end;
	}
}

/* ---- the listening socket ---- */

static bool socket_is_live(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_(closep) int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	strcpy(sa.sun_path, path); /* length checked by parse_args */
	return fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
}

/* Removes a socket left by a dead owner, but not a live one or a file
 * that is not a socket at all. */
static int socket_remove_stale(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	if (socket_is_live(path))
		return -EADDRINUSE;
	return unlink(path) < 0 ? -errno : 0;
}

/*
 * Binds under a temporary name and renames it into place once listening,
 * so that the socket appearing already means connect() will work.
 */
static int socket_listen(struct gs *g)
{
	const char *path = g->opt.socket_path;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_(closep) int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	struct stat st;
	int r = socket_remove_stale(path);

	if (r < 0)
		return r;
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s.%d", path, (int)getpid());
	unlink(sa.sun_path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	if (listen(fd, GS_LISTEN_BACKLOG) < 0 || rename(sa.sun_path, path) < 0 ||
	    lstat(path, &st) < 0) {
		r = -errno;
		unlink(sa.sun_path);
		return r;
	}
	g->sock_dev = st.st_dev;
	g->sock_ino = st.st_ino;
	g->listen_fd = steal_fd(&fd);
	return 0;
}

/* Only if the path is still ours: a successor may have taken it over. */
static void socket_remove(const struct gs *g)
{
	struct stat st;

	if (g->listen_fd < 0)
		return;
	if (lstat(g->opt.socket_path, &st) == 0 && st.st_dev == g->sock_dev &&
	    st.st_ino == g->sock_ino)
		unlink(g->opt.socket_path);
}

/* Blocked in every thread (the workload inherits the mask) and read by
 * the main loop from a signalfd. */
static int signals_setup(void)
{
	sigset_t set;
	int r;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1); /* releases a --hold-at */
	r = pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (r)
		return -r;
	r = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	return r < 0 ? -errno : r;
}

/* ---- report ---- */

struct gs_report {
	const char *state;      /* completed | running | aborted */
	const char *hash_check; /* ok | mismatch | missing | skipped */
	const uint8_t *hashes;  /* NULL when the image is gone */
	struct gs_bad mismatch;
};

static const char *selfcheck_word(const struct gs *g)
{
	if (g->opt.role != OWNER_ROLE_SOURCE)
		return "skipped";
	return g->selfcheck_failed ? "failed" : "ok";
}

static void report_print(const struct gs *g, const struct gs_report *rep)
{
	bool src = g->opt.role == OWNER_ROLE_SOURCE;

	printf("{\"role\":\"%s\",\"state\":\"%s\",\"selfcheck\":\"%s\",\"pages\":%" PRIu64
	       ",\"page_writes\":%" PRIu64 ",\"resumes\":%u,\"migrations\":%u"
	       ",\"protocol_errors\":%u,\"throttle_max\":%u,\"dirty_mbps\":%.1f,\"hash\":",
	       src ? "source" : "dest", rep->state, selfcheck_word(g), g->ram.npages,
	       (uint64_t)atomic_load(&g->wl.writes), g->resumes, g->migrations,
	       g->protocol_errors, g->throttle_max, workload_mbps(&g->wl));
	if (rep->hashes)
		printf("\"%016" PRIx64 "\"", (uint64_t)XXH3_64bits(rep->hashes, g->ram.npages * 8));
	else
		printf("null");
	printf(",\"hash_check\":\"%s\",\"mismatched_pages\":%" PRIu64 ",\"first_mismatches\":[",
	       rep->hash_check, rep->mismatch.count);
	for (uint64_t i = 0; i < rep->mismatch.count && i < GS_FIRST_BAD; i++)
		printf("%s%" PRIu64, i ? "," : "", rep->mismatch.first[i]);
	printf("],\"selfcheck_bad_pages\":%" PRIu64 "}\n", g->selfcheck_bad_max);
	fflush(stdout);
}

/* ---- finishing ---- */

static int finish_source(struct gs *g, enum gs_end end)
{
	struct gs_report rep = {
		.state = end == GS_END_COMPLETED ? "completed" : "running",
		.hash_check = "skipped",
	};
	uint8_t *hashes;
	bool io_failed = false;
	int r;

	workload_stop(&g->wl);
	hashes = ram_page_hashes(&g->ram);
	if (!hashes) {
		log_error("out of memory for the page hashes");
		io_failed = true;
	} else if (end == GS_END_COMPLETED && g->opt.hash_file) {
		r = write_file_atomic(g->opt.hash_file, hashes, g->ram.npages * 8);
		if (r < 0) {
			log_error("cannot write %s: %s", g->opt.hash_file, strerror(-r));
			io_failed = true;
		}
	}
	if (end == GS_END_COMPLETED)
		log_info("completed: the guest now lives on the destination");
	selfcheck_run(g);
	rep.hashes = hashes;
	report_print(g, &rep);
	free(hashes);
	return g->selfcheck_failed || io_failed || end == GS_END_FATAL ? GS_EXIT_CHECK
									: GS_EXIT_OK;
}

/* Fills rep->hash_check and rep->mismatch; false when the check failed. */
static bool dest_check_hashes(struct gs *g, const uint8_t *hashes, struct gs_report *rep)
{
	const char *path = g->opt.check_hash_file;
	char first[256];
	int r = wait_for_file(g->sig_fd, path, GS_HASH_WAIT_MS);

	if (r == 0)
		r = hash_compare(path, hashes, g->ram.npages, &rep->mismatch);
	if (r < 0) {
		log_error("cannot check against %s: %s", path,
			  r == -EBADMSG ? "wrong size for this RAM" : strerror(-r));
		rep->hash_check = "missing";
		return false;
	}
	if (!rep->mismatch.count) {
		rep->hash_check = "ok";
		log_info("hash check: all %" PRIu64 " pages match the source", g->ram.npages);
		return true;
	}
	rep->hash_check = "mismatch";
	bad_format(&rep->mismatch, first, sizeof(first));
	log_error("hash check: %" PRIu64 " pages differ from the source (first: %s)",
		  rep->mismatch.count, first);
	return false;
}

static int finish_dest(struct gs *g, enum gs_end end)
{
	struct gs_report rep = { .state = "aborted", .hash_check = "skipped" };
	uint8_t *hashes;
	bool ok = true;

	if (end != GS_END_COMPLETED) {
		log_info("discarding the received image");
		ram_discard(&g->ram);
		report_print(g, &rep);
		return end == GS_END_PROTO ? GS_EXIT_PROTO : GS_EXIT_ABORTED;
	}
	log_info("completed: the image is complete");
	rep.state = "completed";
	hashes = ram_page_hashes(&g->ram);
	if (!hashes) {
		log_error("out of memory for the page hashes");
		ok = false;
	} else if (g->opt.check_hash_file) {
		ok = dest_check_hashes(g, hashes, &rep);
	}
	rep.hashes = hashes;
	report_print(g, &rep);
	free(hashes);
	return ok ? GS_EXIT_OK : GS_EXIT_CHECK;
}

/* ---- command line ---- */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: vrdma-guestsim --owner PATH --role source|dest --ram-mib N [OPTIONS]\n"
		"\n"
		"A fake guest that owns RAM in a memfd and serves the migration engine\n"
		"over the owner protocol on a UNIX socket.\n"
		"\n"
		"  --owner PATH            the owner socket: listen here (SOCK_SEQPACKET); the\n"
		"                          engine's --owner names the same path\n"
		"  --socket PATH           deprecated spelling of --owner\n"
		"  --role ROLE             source (runs a workload) or dest (receives)\n"
		"  --ram-mib N             RAM size in MiB\n"
		"  --blocks K              RAM blocks, 1..%d (default %d)\n"
		"  --page-size BYTES       power of two >= 4096 (default 4096)\n"
		"  --dirty-rate MBPS       source: page writes in MB/s, 10^6 bytes (default 0)\n"
		"  --pattern P             uniform (default) or hotset\n"
		"  --hot-fraction F        hotset: 90%% of writes go to this share of pages\n"
		"                          (default 0.1)\n"
		"  --seed S                content seed (default 0)\n"
		"  --zero-every N          source: every N-th page starts zero (default 4;\n"
		"                          0: none, all pages random)\n"
		"  --hash-file FILE        source: write per-page hashes here at COMPLETED\n"
		"  --check-hash-file FILE  dest: compare the image with this hash file\n"
		"  --corrupt-page P        dest, for tests: flip a byte of page P at start;\n"
		"                          survives if the engine never sends P (a zero\n"
		"                          page: P %% 4 == 3 on a source that did not write it)\n"
		"  --hold-at WHAT          source, for tests: hold the reply to the first\n"
		"                          HELLO ('hello'), SYNC of round N ('sync:N') or\n"
		"                          STOP ('stop') until SIGUSR1, so a test can aim\n"
		"                          at that phase of the engine; a held SYNC then\n"
		"                          reports every page dirty, so that the round\n"
		"                          after it resends the whole RAM and lasts\n"
		"  --quiet                 no progress messages on stderr\n"
		"  -h, --help              this text\n"
		"  --version               the version, then exit\n"
		"\n"
		"Prints one JSON report line on stdout at exit.  Exit status: 0 fine,\n"
		"1 self-check failed or hash mismatch, 2 bad usage, 3 destination aborted,\n"
		"4 destination got a protocol error.\n",
		OWNER_MAX_BLOCKS, GS_DEFAULT_BLOCKS);
}

static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int parse_double(const char *s, double min, double max, double *ret)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < min || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int parse_choice(const char *s, const char *a, const char *b, unsigned *ret)
{
	if (strcmp(s, a) == 0)
		*ret = 0;
	else if (strcmp(s, b) == 0)
		*ret = 1;
	else
		return -EINVAL;
	return 0;
}

static int parse_hold(const char *arg, struct gs_opts *o)
{
	if (strcmp(arg, "hello") == 0) {
		o->hold_type = OWNER_MSG_HELLO;
		return 0;
	}
	if (strcmp(arg, "stop") == 0) {
		o->hold_type = OWNER_MSG_STOP;
		return 0;
	}
	if (strncmp(arg, "sync:", 5) != 0)
		return -EINVAL;
	o->hold_type = OWNER_MSG_SYNC;
	return parse_u64(arg + 5, 0, UINT32_MAX, &o->hold_round);
}

static int parse_one(struct gs_opts *o, int opt, const char *arg)
{
	uint64_t v = 0;
	unsigned c = 0;
	int r;

	switch (opt) {
	case 'o': o->socket_path = arg; return 0;
	case 'S':
		/* The old name, in scripts written before --owner. */
		log_warn("--socket is deprecated: use --owner");
		o->socket_path = arg;
		return 0;
	case 'H': o->hash_file = arg; return 0;
	case 'C': o->check_hash_file = arg; return 0;
	case 'q': o->quiet = true; return 0;
	case 'A': return parse_hold(arg, o);
	case 'D': return parse_double(arg, 0, GS_MAX_DIRTY_MBPS, &o->dirty_mbps);
	case 'F':
		r = parse_double(arg, 0, 1, &o->hot_fraction);
		return r == 0 && o->hot_fraction == 0 ? -EINVAL : r;
	case 'e': return parse_u64(arg, 0, UINT64_MAX, &o->seed);
	case 'c': return parse_u64(arg, 0, UINT64_MAX - 1, &o->corrupt_page);
	case 'z': return parse_u64(arg, 0, UINT32_MAX, &zero_every);
	case 'm': return parse_u64(arg, 1, GS_MAX_RAM_MIB, &o->ram_mib);
	case 'r':
		r = parse_choice(arg, "source", "dest", &c);
		o->role = c ? OWNER_ROLE_DEST : OWNER_ROLE_SOURCE;
		return r;
	case 'p':
		r = parse_choice(arg, "uniform", "hotset", &c);
		o->pattern = c ? GS_HOTSET : GS_UNIFORM;
		return r;
	case 'b':
		r = parse_u64(arg, 1, OWNER_MAX_BLOCKS, &v);
		o->nblocks = (unsigned)v;
		return r;
	case 'P':
		r = parse_u64(arg, OWNER_MIN_PAGE, OWNER_MAX_PAGE, &v);
		o->page_size = (uint32_t)v;
		return r == 0 && !is_power_of_2(v) ? -EINVAL : r;
	}
	return -EINVAL;
}

/* The checks that involve more than one option; messages for the user. */
static int check_opts(const struct gs_opts *o)
{
	uint64_t total = o->ram_mib << 20;
	uint64_t bsize = total / o->nblocks / o->page_size * o->page_size;

	if (!o->socket_path || !o->role || !o->ram_mib) {
		log_error("--owner, --role and --ram-mib are required (see --help)");
		return -EINVAL;
	}
	if (strlen(o->socket_path) + 12 > sizeof(((struct sockaddr_un *)0)->sun_path)) {
		log_error("socket path too long: %s", o->socket_path);
		return -EINVAL;
	}
	if (total % o->page_size || bsize == 0) {
		log_error("%" PRIu64 " MiB cannot be split into %u blocks of whole %u-byte pages",
			  o->ram_mib, o->nblocks, o->page_size);
		return -EINVAL;
	}
	if (total - (o->nblocks - 1) * bsize > OWNER_MAX_BLOCK_SIZE) {
		log_error("blocks would exceed the protocol's %llu GiB; use more --blocks",
			  OWNER_MAX_BLOCK_SIZE >> 30);
		return -EINVAL;
	}
	if ((o->hash_file && o->role != OWNER_ROLE_SOURCE) ||
	    (o->check_hash_file && o->role != OWNER_ROLE_DEST)) {
		log_error("--hash-file is for the source, --check-hash-file for the destination");
		return -EINVAL;
	}
	if (o->hold_type && o->role != OWNER_ROLE_SOURCE) {
		log_error("--hold-at is for the source");
		return -EINVAL;
	}
	if (o->corrupt_page != UINT64_MAX &&
	    (o->role != OWNER_ROLE_DEST || o->corrupt_page >= total / o->page_size)) {
		log_error("--corrupt-page needs --role dest and a page below %" PRIu64,
			  total / o->page_size);
		return -EINVAL;
	}
	return 0;
}

static const struct program_info program = { "vrdma-guestsim", usage };

static int parse_args(int argc, char **argv, struct gs_opts *o)
{
	static const struct option longopts[] = {
		{ "owner", required_argument, NULL, 'o' },
		{ "socket", required_argument, NULL, 'S' },
		{ "role", required_argument, NULL, 'r' },
		{ "ram-mib", required_argument, NULL, 'm' },
		{ "blocks", required_argument, NULL, 'b' },
		{ "page-size", required_argument, NULL, 'P' },
		{ "dirty-rate", required_argument, NULL, 'D' },
		{ "pattern", required_argument, NULL, 'p' },
		{ "hot-fraction", required_argument, NULL, 'F' },
		{ "seed", required_argument, NULL, 'e' },
		{ "hash-file", required_argument, NULL, 'H' },
		{ "check-hash-file", required_argument, NULL, 'C' },
		{ "corrupt-page", required_argument, NULL, 'c' },
		{ "zero-every", required_argument, NULL, 'z' },
		{ "hold-at", required_argument, NULL, 'A' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	int opt;
	int idx = 0;

	*o = (struct gs_opts){
		.nblocks = GS_DEFAULT_BLOCKS, .page_size = OWNER_MIN_PAGE, .hot_fraction = 0.1,
		.corrupt_page = UINT64_MAX,
	};
	while ((opt = program_getopt(&program, argc, argv, "h", longopts, &idx)) != -1) {
		if (opt == '?')
			return -EINVAL;
		if (parse_one(o, opt, optarg) < 0) {
			log_error("invalid value for --%s: '%s' (see --help)",
				  longopts[idx].name, optarg);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	return check_opts(o);
}

/* ---- main ---- */

/* Logs what failed; returns r. */
static int setup_failed(const char *what, const char *detail, int r)
{
	log_error("%s: %s", what, detail ? detail : strerror(-r));
	return r;
}

static int source_prepare(struct gs *g)
{
	uint64_t t0 = monotonic_ns();

	ram_fill_initial(&g->ram, g->opt.seed);
	log_info("filled %" PRIu64 " MiB in %.0f ms", g->opt.ram_mib,
		 (double)(monotonic_ns() - t0) / 1e6);
	/* A hash file left by an earlier run must not satisfy a destination
	 * that looks for it before this source completes. */
	if (g->opt.hash_file && unlink(g->opt.hash_file) < 0 && errno != ENOENT)
		return setup_failed("cannot remove the old hash file", NULL, -errno);
	return 0;
}

static int setup(struct gs *g)
{
	int r;

	/* First, so that a SIGTERM during a long fill still ends in a report. */
	g->sig_fd = signals_setup();
	if (g->sig_fd < 0)
		return setup_failed("cannot set up signal handling", NULL, g->sig_fd);
	ram_layout(&g->ram, &g->opt);
	r = ram_create(&g->ram);
	if (r < 0)
		return setup_failed("cannot create the guest RAM", NULL, r);
	if (workload_init(&g->wl, &g->ram, &g->opt) < 0)
		return setup_failed("cannot set up the workload", NULL, -ENOMEM);
	if (g->opt.role == OWNER_ROLE_SOURCE) {
		r = source_prepare(g);
		if (r < 0)
			return r;
	}
	if (g->opt.corrupt_page != UINT64_MAX) {
		/* A bad image that only a verifying engine can catch. */
		g->ram.base[g->opt.corrupt_page * g->ram.page_size] ^= 0xff;
		log_info("corrupted page %" PRIu64 " on purpose", g->opt.corrupt_page);
	}
	r = socket_listen(g);
	if (r < 0)
		return setup_failed(g->opt.socket_path,
				    r == -EEXIST ? "exists and is not a socket" : NULL, r);
	r = workload_start(&g->wl);
	if (r < 0)
		return setup_failed("cannot start the workload", NULL, r);
	log_info("ready");
	return 0;
}

int main(int argc, char **argv)
{
	static struct gs g = { .listen_fd = -1, .sig_fd = -1 };
	enum gs_end end;
	int rc;

	log_init("vrdma-guestsim", LOG_LVL_INFO);
	if (parse_args(argc, argv, &g.opt) < 0)
		return GS_EXIT_USAGE;
	log_init(g.opt.role == OWNER_ROLE_SOURCE ? "vrdma-guestsim[source]"
						 : "vrdma-guestsim[dest]",
		 g.opt.quiet ? LOG_LVL_WARN : LOG_LVL_INFO);
	session_reset(&g.sess, -1);
	if (setup(&g) < 0) {
		rc = GS_EXIT_USAGE;
		goto out;
	}
	end = serve(&g);
	rc = g.opt.role == OWNER_ROLE_SOURCE ? finish_source(&g, end) : finish_dest(&g, end);
out:
	socket_remove(&g);
	session_close(&g.sess);
	closep(&g.listen_fd);
	closep(&g.sig_fd);
	workload_free(&g.wl);
	ram_discard(&g.ram);
	return rc;
}

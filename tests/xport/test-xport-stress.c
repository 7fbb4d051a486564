// SPDX-License-Identifier: MIT
/*
 * tcp back end under a live-migration-like load, looking for stalls.
 *
 * A forked server registers a 64 MiB region and does what the migration
 * destination does: xport_poll(conn, &c, 1) + xport_wait(conn, 100) in a
 * loop (every other half second taking up to 64 completions per poll
 * instead), answering only small messages.  The client, like the migration
 * source, streams a seeded random mix over 4 channels:
 *
 *   - WRITEs of 4 KiB .. 1 MiB from a read-only MAP_SHARED mapping of a
 *     memfd (zero-copy sends may be used), XPORT_F_MORE, a flush every 16
 *     posts; a 1 MiB stripe always rides the same channel, so a later WRITE
 *     of the same bytes cannot be overtaken by an older one;
 *   - 0-length signalled WRITEs (drain markers), alone or on every channel
 *     followed by a wait for all of them;
 *   - small SENDs (a tick on channel 0 at least every 250 ms, others at
 *     random, now and then a burst far larger than the server's receive
 *     queue, which is kept short on purpose);
 *   - bursts of hundreds of small WRITEs on one channel without a flush, so
 *     that posting runs into -EAGAIN (send queue full);
 *   - pauses of 0..5 ms and a bandwidth cap, so that the channels go idle.
 *
 * Every byte range is rewritten in the source memory (and in a shadow copy)
 * right before it is posted, so memory under a WRITE in flight changes as
 * guest RAM does under a migration; the later WRITE of the same range on the
 * same channel repairs it.  At the end a FINAL message goes out on every
 * channel; once the server has them all it acknowledges, and its region
 * (shared with the parent) must equal the shadow.
 *
 * No step may wait longer than 5 s: a post that keeps failing with -EAGAIN,
 * a drain whose markers do not come back, a server that hears nothing.
 *
 *   test-xport-stress [--seconds S] [--iterations N] [--seed N]
 *                     [--max-bandwidth MiB/s] [--zerocopy auto|on|off]
 *
 * Exit: 0 pass, 1 fail.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "program.h"
#include "util.h"
#include "xport.h"

#define REGION_SIZE (64u << 20)
#define STRIPE (1u << 20)
#define PAGE 4096u
#define NCHAN 4
#define STEP_MS 5000        /* longest any one step may wait */
/* The client ticks between steps, so the server may hear nothing for one step and a bit. */
#define SERVER_SILENCE_MS (STEP_MS + 2000)
#define HARD_LIMIT_S 110    /* whole test, either process (meson: 120) */
#define FLUSH_EVERY 16
#define TICK_MS 250
#define MARK_COOKIE 0x4d41524bull /* "MARK" */
#define SEND_COOKIE 0x53454e44ull /* "SEND" */

enum msg_type {
	MSG_DESC = 1, /* server -> client: the region descriptor */
	MSG_TICK,     /* client -> server: small SEND */
	MSG_FINAL,    /* client -> server: last message on a channel */
	MSG_ACK,      /* server -> client: every FINAL arrived */
};

struct wire_msg {
	uint32_t type;
	uint32_t channel;
	uint64_t seq; /* per channel, from 0: the server checks the order */
	uint8_t desc[XPORT_REGION_DESC_SIZE];
};

static const char *who = "client";
static uint64_t seed = 1;
static unsigned seconds = 10;
static uint64_t iterations; /* 0: run for `seconds` */
static uint64_t max_bandwidth = 256ull << 20; /* bytes/s, 0: no cap */
static enum xport_zerocopy zerocopy = XPORT_ZC_AUTO;
static pid_t server_pid = -1;

#define FAIL(...)                                                         \
	do {                                                              \
		fprintf(stderr, "FAIL [stress %s, seed %" PRIu64 "] ", who, seed); \
		fprintf(stderr, __VA_ARGS__);                             \
		fputc('\n', stderr);                                      \
		exit(1);                                                  \
	} while (0)

static void sleep_us(unsigned us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* xorshift64*: seeded, the same sequence everywhere. */
static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

static uint64_t rnd_below(uint64_t n)
{
	return rnd() % n;
}

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL [stress] hard time limit reached: something hangs\n";

	(void)sig;
	(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
	if (server_pid > 0)
		kill(server_pid, SIGKILL);
	_exit(1);
}

static void kill_server(void)
{
	if (server_pid > 0)
		kill(server_pid, SIGKILL);
}

static void *map_shared_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		FAIL("mmap %zu: %s", len, strerror(errno));
	return p;
}

static void opts_for_test(struct xport_opts *o)
{
	xport_opts_init(o);
	o->kind = XPORT_KIND_TCP;
	o->channels = NCHAN;
	o->timeout_ms = STEP_MS;
	o->zerocopy = zerocopy;
	/* send_depth, recv_depth, signal_interval: the defaults, as migration uses them. */
}

static const char *step_name(const char *what, unsigned ch)
{
	static char buf[96];

	snprintf(buf, sizeof(buf), "%s (channel %u)", what, ch);
	return buf;
}

/* ---- server: the migration destination's loop ---- */

static void server_send(struct xport_conn *c, const struct wire_msg *m)
{
	int64_t deadline = monotonic_ms() + STEP_MS;

	for (;;) {
		struct xport_completion comp;
		int r = xport_send_copy(c, 0, m, sizeof(*m), 0, 0);

		if (r == 0)
			return;
		if (r != -EAGAIN)
			FAIL("send_copy: %s", strerror(-r));
		if (monotonic_ms() > deadline)
			FAIL("send_copy kept failing with -EAGAIN for %d ms", STEP_MS);
		r = xport_poll(c, &comp, 1);
		if (r < 0)
			FAIL("poll while sending: %s", strerror(-r));
		if (r == 1 && comp.op == XPORT_OP_RECV)
			FAIL("a message arrived while the server was sending");
		if (r == 0)
			xport_wait(c, 10);
	}
}

static void serve(int port_fd, uint8_t *region)
{
	struct xport_listener *l;
	struct xport_conn *c;
	struct xport_mr *mr;
	struct xport_opts o;
	struct wire_msg m = { .type = MSG_DESC };
	uint64_t expect_seq[NCHAN] = { 0 };
	unsigned finals = 0;
	bool acked = false;
	int64_t last_msg;
	int port, r;

	who = "server";
	opts_for_test(&o);
	/*
	 * Two receive buffers: a burst of SENDs runs a channel out of them, and
	 * its receive waits (RX_STALLED in the tcp back end) until a poll hands
	 * buffers back.  With the default 64, or even 4, one poll never gets
	 * that far behind.
	 */
	o.recv_depth = 2;
	r = xport_listen(&o, "127.0.0.1", "0", &l);
	if (r < 0)
		FAIL("listen: %s", strerror(-r));
	port = xport_listener_port(l);
	if (write(port_fd, &port, sizeof(port)) != sizeof(port))
		FAIL("announce port: %s", strerror(errno));
	close(port_fd);
	r = xport_accept(l, STEP_MS, &c);
	if (r < 0)
		FAIL("accept: %s", strerror(-r));
	xport_listener_close(l);
	r = xport_mr_reg(c, region, REGION_SIZE, XPORT_ACCESS_REMOTE_WRITE, &mr);
	if (r < 0)
		FAIL("register the region: %s", strerror(-r));
	if (xport_mr_describe(mr, m.desc) < 0)
		FAIL("describe the region");
	server_send(c, &m);

	last_msg = monotonic_ms();
	for (;;) {
		struct xport_completion comps[64];
		/*
		 * Mostly one completion per poll, as the migration destination
		 * takes them; every other half second a batch, which lends out
		 * several receive buffers at once.
		 */
		unsigned max = (monotonic_ms() / 500) % 2 ? ARRAY_SIZE(comps) : 1;

		r = xport_poll(c, comps, max);
		if (r < 0) {
			/* The client hangs up once it has the acknowledgement. */
			if (acked && r == -ECONNRESET)
				break;
			FAIL("poll: %s (%u of %u FINALs, acked %d)", strerror(-r), finals,
			     NCHAN, acked);
		}
		if (r == 0) {
			if (monotonic_ms() - last_msg > SERVER_SILENCE_MS)
				FAIL("no message from the client for %d ms (%u of %u FINALs): stalled",
				     SERVER_SILENCE_MS, finals, NCHAN);
			xport_wait(c, 100);
			continue;
		}
		for (int i = 0; i < r; i++) {
			const struct xport_completion *comp = &comps[i];
			struct wire_msg in;

			if (comp->status)
				FAIL("completion op %d: %s", comp->op, strerror(-comp->status));
			if (comp->op != XPORT_OP_RECV)
				continue; /* our own SENDs, were they signalled */
			last_msg = monotonic_ms();
			if (comp->len != sizeof(in))
				FAIL("message of %u bytes", comp->len);
			memcpy(&in, comp->data, sizeof(in));
			if (in.channel >= NCHAN || in.channel != comp->channel)
				FAIL("message for channel %u arrived on channel %u", in.channel,
				     comp->channel);
			if (in.seq != expect_seq[in.channel])
				FAIL("channel %u: message %" PRIu64 " arrived, expected %" PRIu64,
				     in.channel, in.seq, expect_seq[in.channel]);
			expect_seq[in.channel]++;
			switch (in.type) {
			case MSG_TICK:
				break;
			case MSG_FINAL:
				/*
				 * server_send() polls, which ends the life of
				 * comps[].data; but nothing follows the last FINAL.
				 */
				if (++finals == NCHAN) {
					struct wire_msg ack = { .type = MSG_ACK };

					server_send(c, &ack);
					acked = true;
				}
				break;
			default:
				FAIL("unexpected message type %u", in.type);
			}
		}
	}
	xport_mr_dereg(mr);
	xport_conn_close(c);
}

/* ---- client: the migration source ---- */

struct client {
	struct xport_conn *conn;
	struct xport_mr *mr;        /* the read-only mapping */
	struct xport_remote remote;
	uint8_t *src;               /* writable mapping of the same memfd */
	uint8_t *shadow;            /* what the server's region must hold */
	uint64_t marks_posted, marks_done;
	uint64_t sends_posted, sends_done; /* signalled SENDs */
	uint64_t seq[NCHAN];
	unsigned unflushed;
	uint64_t bytes, writes, iter;
	uint64_t bw_start_ns, bw_bytes;
	int64_t last_tick;
	unsigned phase;   /* enum size_phase */
	uint64_t eagains; /* posts refused for a full send queue */
};

static void check_comp(const struct xport_completion *comp)
{
	if (comp->status)
		FAIL("completion op %d channel %u: %s", comp->op, comp->channel,
		     strerror(-comp->status));
}

/* Takes completions in; RECVs only answer the end, so none may come here. */
static void client_reap(struct client *cl)
{
	struct xport_completion comp[64];
	int n = xport_poll(cl->conn, comp, ARRAY_SIZE(comp));

	if (n < 0)
		FAIL("poll: %s", strerror(-n));
	for (int i = 0; i < n; i++) {
		check_comp(&comp[i]);
		if (comp[i].op == XPORT_OP_RECV)
			FAIL("unexpected message from the server");
		if (comp[i].cookie == MARK_COOKIE)
			cl->marks_done++;
		else if (comp[i].cookie == SEND_COOKIE)
			cl->sends_done++;
	}
}

/* Runs op until it stops saying -EAGAIN; at most STEP_MS. */
static void retry_eagain(struct client *cl, const char *what, unsigned ch,
			 int (*op)(struct client *, const void *), const void *arg)
{
	int64_t deadline = 0;
	unsigned spins = 0;

	for (;;) {
		int r = op(cl, arg);

		if (r == 0)
			return;
		if (r != -EAGAIN)
			FAIL("%s: %s", step_name(what, ch), strerror(-r));
		cl->eagains++;
		if (!deadline)
			deadline = monotonic_ms() + STEP_MS;
		else if (monotonic_ms() > deadline)
			FAIL("%s: -EAGAIN for %d ms, nothing completes (iteration %" PRIu64
			     ", %" PRIu64 " MiB sent): stalled",
			     step_name(what, ch), STEP_MS, cl->iter, cl->bytes >> 20);
		r = xport_flush(cl->conn);
		if (r < 0)
			FAIL("flush: %s", strerror(-r));
		client_reap(cl);
		/* Busy-poll a little, then sleep, as the migration source does. */
		if (++spins > 64)
			xport_wait(cl->conn, 10);
	}
}

static int do_post(struct client *cl, const void *wr)
{
	return xport_post(cl->conn, wr);
}

static void post(struct client *cl, const struct xport_wr *wr)
{
	retry_eagain(cl, wr->nsg ? "WRITE" : "marker", wr->channel, do_post, wr);
}

struct send_arg {
	unsigned channel;
	unsigned flags;
	const struct wire_msg *m;
};

static int do_send(struct client *cl, const void *p)
{
	const struct send_arg *a = p;

	return xport_send_copy(cl->conn, a->channel, a->m, sizeof(*a->m),
			       SEND_COOKIE, a->flags);
}

static void send_msg(struct client *cl, unsigned ch, enum msg_type type, bool signal)
{
	struct wire_msg m = { .type = type, .channel = ch, .seq = cl->seq[ch] };
	struct send_arg a = { .channel = ch, .flags = signal ? XPORT_F_SIGNAL : 0, .m = &m };

	retry_eagain(cl, "SEND", ch, do_send, &a);
	cl->seq[ch]++;
	if (signal)
		cl->sends_posted++;
}

static void flush(struct client *cl)
{
	int r = xport_flush(cl->conn);

	if (r < 0)
		FAIL("flush: %s", strerror(-r));
	cl->unflushed = 0;
	client_reap(cl);
}

static void mark(struct client *cl, unsigned ch)
{
	struct xport_wr wr = {
		.op = XPORT_OP_WRITE, .channel = ch, .flags = XPORT_F_SIGNAL,
		.cookie = MARK_COOKIE, .remote = &cl->remote,
	};

	post(cl, &wr);
	cl->marks_posted++;
}

/* A marker on every channel, then all markers back: at most STEP_MS. */
static void drain(struct client *cl)
{
	int64_t deadline = monotonic_ms() + STEP_MS;

	for (unsigned ch = 0; ch < NCHAN; ch++)
		mark(cl, ch);
	cl->unflushed = 0;
	for (;;) {
		client_reap(cl);
		if (cl->marks_done == cl->marks_posted)
			return;
		if (monotonic_ms() > deadline)
			FAIL("drain: %" PRIu64 " of %" PRIu64 " markers back after %d ms "
			     "(iteration %" PRIu64 ", %" PRIu64 " MiB sent): stalled",
			     cl->marks_done, cl->marks_posted, STEP_MS, cl->iter, cl->bytes >> 20);
		xport_wait(cl->conn, 100);
	}
}

/* Sleeps just enough to keep the average under max_bandwidth. */
static void rate_limit(struct client *cl, uint64_t bytes)
{
	uint64_t due;

	if (!max_bandwidth)
		return;
	cl->bw_bytes += bytes;
	due = cl->bw_start_ns + (uint64_t)((double)cl->bw_bytes / (double)max_bandwidth * 1e9);
	for (uint64_t t = monotonic_ns(); t < due; t = monotonic_ns()) {
		uint64_t us = (due - t) / 1000 + 1;

		sleep_us(us < 1000000 ? (unsigned)us : 1000000u);
	}
}

/* New contents for [off, off+len): in the source memory and the shadow. */
static void dirty(struct client *cl, uint64_t off, uint32_t len)
{
	uint64_t x = rnd() | 1;

	for (uint32_t i = 0; i < len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(cl->src + off + i, &x, 8);
	}
	memcpy(cl->shadow + off, cl->src + off, len);
}

/*
 * Write sizes come in phases, as in a migration: round 0 sends long runs,
 * later rounds mostly single dirty pages (which fill the send queues with
 * small requests: the -EAGAIN path), and sometimes a mix.
 */
enum size_phase { PHASE_LARGE, PHASE_SMALL, PHASE_MIXED, NPHASES };

static uint32_t write_pages(struct client *cl)
{
	switch (cl->phase) {
	case PHASE_LARGE:
		return 1 + (uint32_t)rnd_below(STRIPE / PAGE);
	case PHASE_SMALL:
		return rnd_below(8) ? 1 : 1 + (uint32_t)rnd_below(16);
	default:
		return rnd_below(2) ? 1 + (uint32_t)rnd_below(STRIPE / PAGE)
				    : 1 + (uint32_t)rnd_below(8);
	}
}

/* One WRITE of pages (clipped to the stripe) at a random page of stripe. */
static void write_at(struct client *cl, uint64_t stripe, uint32_t pages, bool periodic_flush)
{
	uint64_t off = stripe * STRIPE + rnd_below(STRIPE / PAGE) * PAGE;
	uint64_t room = (stripe + 1) * STRIPE - off;
	uint32_t len = (uint32_t)((uint64_t)pages * PAGE < room ? (uint64_t)pages * PAGE : room);
	struct xport_sge sg = { .mr = cl->mr, .offset = off, .len = len };
	struct xport_wr wr = {
		.op = XPORT_OP_WRITE,
		.channel = (unsigned)(stripe % NCHAN), /* a stripe never changes channel */
		.flags = XPORT_F_MORE,
		.sg = &sg, .nsg = 1,
		.remote = &cl->remote, .remote_offset = off,
	};

	rate_limit(cl, len);
	dirty(cl, off, len);
	post(cl, &wr);
	cl->bytes += len;
	cl->writes++;
	if (++cl->unflushed >= FLUSH_EVERY && periodic_flush)
		flush(cl);
}

static void write_random(struct client *cl)
{
	write_at(cl, rnd_below(REGION_SIZE / STRIPE), write_pages(cl), true);
}

/*
 * Hundreds of small WRITEs on one channel without a flush: the send queue
 * fills up and posting gets -EAGAIN until completions free slots.
 */
static void burst(struct client *cl)
{
	unsigned ch = (unsigned)rnd_below(NCHAN), n = 100 + (unsigned)rnd_below(500);

	for (unsigned i = 0; i < n; i++) {
		uint64_t stripe = rnd_below(REGION_SIZE / STRIPE / NCHAN) * NCHAN + ch;

		write_at(cl, stripe, rnd_below(8) ? 1 : 1 + (uint32_t)rnd_below(64), false);
	}
	flush(cl);
}

static void client_connect(struct client *cl, int port)
{
	struct xport_opts o;
	char portstr[16];
	int64_t deadline;
	int r;

	opts_for_test(&o);
	snprintf(portstr, sizeof(portstr), "%d", port);
	r = xport_connect(&o, "127.0.0.1", portstr, &cl->conn);
	if (r < 0)
		FAIL("connect: %s", strerror(-r));
	/* The descriptor of the server's region. */
	deadline = monotonic_ms() + STEP_MS;
	for (;;) {
		struct xport_completion comp;
		struct wire_msg m;

		r = xport_poll(cl->conn, &comp, 1);
		if (r < 0)
			FAIL("poll for the descriptor: %s", strerror(-r));
		if (r == 1 && comp.op == XPORT_OP_RECV) {
			check_comp(&comp);
			if (comp.len != sizeof(m))
				FAIL("descriptor message of %u bytes", comp.len);
			memcpy(&m, comp.data, sizeof(m));
			if (m.type != MSG_DESC)
				FAIL("expected the descriptor, got type %u", m.type);
			r = xport_remote_import(cl->conn, m.desc, sizeof(m.desc), &cl->remote);
			if (r < 0)
				FAIL("import the descriptor: %s", strerror(-r));
			if (cl->remote.len < REGION_SIZE)
				FAIL("server region of %" PRIu64 " bytes", cl->remote.len);
			return;
		}
		if (monotonic_ms() > deadline)
			FAIL("no descriptor within %d ms", STEP_MS);
		xport_wait(cl->conn, 100);
	}
}

/* FINAL on every channel, then the server's ACK: at most STEP_MS. */
static void finish(struct client *cl)
{
	int64_t deadline;

	flush(cl);
	for (unsigned ch = 0; ch < NCHAN; ch++)
		send_msg(cl, ch, MSG_FINAL, false);
	deadline = monotonic_ms() + STEP_MS;
	for (;;) {
		struct xport_completion comp;
		int r = xport_poll(cl->conn, &comp, 1);

		if (r < 0)
			FAIL("poll for the acknowledgement: %s", strerror(-r));
		if (r == 1) {
			check_comp(&comp);
			if (comp.op == XPORT_OP_RECV) {
				struct wire_msg m;

				if (comp.len != sizeof(m))
					FAIL("acknowledgement of %u bytes", comp.len);
				memcpy(&m, comp.data, sizeof(m));
				if (m.type != MSG_ACK)
					FAIL("expected the acknowledgement, got type %u", m.type);
				return;
			}
			if (comp.cookie == MARK_COOKIE)
				cl->marks_done++;
			continue;
		}
		if (monotonic_ms() > deadline)
			FAIL("no acknowledgement within %d ms (%" PRIu64 " MiB sent): stalled",
			     STEP_MS, cl->bytes >> 20);
		xport_wait(cl->conn, 100);
	}
}

static void run_client(int port, const uint8_t *region)
{
	struct client cl = { 0 };
	int64_t end = monotonic_ms() + (int64_t)seconds * 1000;
	int memfd = memfd_create("stress-src", MFD_CLOEXEC);
	uint8_t *ro;
	int r;

	if (memfd < 0 || ftruncate(memfd, REGION_SIZE) < 0)
		FAIL("memfd: %s", strerror(errno));
	cl.src = mmap(NULL, REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	ro = mmap(NULL, REGION_SIZE, PROT_READ, MAP_SHARED, memfd, 0);
	if (cl.src == MAP_FAILED || ro == MAP_FAILED)
		FAIL("mmap the memfd: %s", strerror(errno));
	close(memfd);
	cl.shadow = map_shared_anon(REGION_SIZE);

	client_connect(&cl, port);
	r = xport_mr_reg(cl.conn, ro, REGION_SIZE, XPORT_ACCESS_LOCAL_READONLY, &cl.mr);
	if (r < 0)
		FAIL("register the source: %s", strerror(-r));

	cl.bw_start_ns = monotonic_ns();
	cl.last_tick = monotonic_ms();
	for (cl.iter = 0; iterations ? cl.iter < iterations : monotonic_ms() < end; cl.iter++) {
		unsigned dice = (unsigned)rnd_below(1000);

		if (!rnd_below(500))
			cl.phase = (unsigned)rnd_below(NPHASES);
		if (dice < 20) {
			/* A marker on one channel, not waited for. */
			mark(&cl, (unsigned)rnd_below(NCHAN));
		} else if (dice < 30) {
			/* A small SEND, mostly on channel 0, sometimes signalled. */
			unsigned ch = rnd_below(3) ? 0 : (unsigned)rnd_below(NCHAN);

			send_msg(&cl, ch, MSG_TICK, rnd_below(2));
		} else if (dice < 34) {
			drain(&cl);
		} else if (dice < 37) {
			burst(&cl);
		} else if (dice < 38) {
			/*
			 * More SENDs than the server has receive buffers: its
			 * channel waits for buffers that only its next poll
			 * gives back.
			 */
			unsigned ch = (unsigned)rnd_below(NCHAN), n = 64 + (unsigned)rnd_below(200);

			for (unsigned i = 0; i < n; i++)
				send_msg(&cl, ch, MSG_TICK, !rnd_below(8));
		} else {
			write_random(&cl);
		}
		if (monotonic_ms() - cl.last_tick >= TICK_MS) {
			cl.last_tick = monotonic_ms();
			send_msg(&cl, 0, MSG_TICK, false);
		}
		/* Pacing: idle gaps of 0..5 ms. */
		if (!rnd_below(16))
			sleep_us((unsigned)rnd_below(5001));
	}
	drain(&cl);
	finish(&cl);

	if (memcmp(region, cl.shadow, REGION_SIZE) != 0) {
		size_t i = 0;

		while (region[i] == cl.shadow[i])
			i++;
		FAIL("the server's region differs from the last writes at byte %zu", i);
	}
	printf("stress: %" PRIu64 " iterations, %" PRIu64 " writes, %" PRIu64
	       " MiB, %" PRIu64 " markers, %" PRIu64 " signalled sends, %" PRIu64
	       " -EAGAIN: region matches\n",
	       cl.iter, cl.writes, cl.bytes >> 20, cl.marks_posted, cl.sends_posted,
	       cl.eagains);
	xport_mr_dereg(cl.mr);
	xport_conn_close(cl.conn);
	munmap(ro, REGION_SIZE);
	munmap(cl.src, REGION_SIZE);
	munmap(cl.shadow, REGION_SIZE);
}

/* The server exits once the client hung up: give it STEP_MS. */
static void reap_server(void)
{
	int64_t deadline = monotonic_ms() + STEP_MS;
	int status;

	for (;;) {
		pid_t p = waitpid(server_pid, &status, WNOHANG);

		if (p == server_pid)
			break;
		if (p < 0)
			FAIL("waitpid: %s", strerror(errno));
		if (monotonic_ms() > deadline)
			FAIL("the server did not exit within %d ms", STEP_MS);
		sleep_us(10000);
	}
	server_pid = -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		FAIL("server ended with status 0x%x", status);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: test-xport-stress [--seconds S] [--iterations N] [--seed N]\n"
		   "                         [--max-bandwidth MiB/s (0: none)] "
		   "[--zerocopy auto|on|off]\n");
}

static const struct program_info program = { "test-xport-stress", usage };

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 'S' },
		{ "max-bandwidth", required_argument, NULL, 'b' },
		{ "zerocopy", required_argument, NULL, 'z' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct sigaction sa = { .sa_handler = on_alarm };
	uint8_t *region;
	int pipefd[2], port, opt;
	struct pollfd pfd;

	while ((opt = program_getopt(&program, argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 's': seconds = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'n': iterations = strtoull(optarg, NULL, 0); break;
		case 'S': seed = strtoull(optarg, NULL, 0); break;
		case 'b': max_bandwidth = strtoull(optarg, NULL, 0) << 20; break;
		case 'z':
			if (xport_zerocopy_parse(optarg, &zerocopy) == 0)
				break;
			usage(stderr);
			return 2;
		default: return 2;
		}
	}
	if (optind != argc || seconds > 90) {
		usage(stderr);
		return 2;
	}
	rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	sigaction(SIGALRM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	alarm(HARD_LIMIT_S);

	/* Shared, so the parent can compare it; no xport state before fork. */
	region = map_shared_anon(REGION_SIZE);
	if (pipe(pipefd) < 0)
		FAIL("pipe: %s", strerror(errno));
	server_pid = fork();
	if (server_pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (server_pid == 0) {
		server_pid = -1;
		alarm(HARD_LIMIT_S); /* not inherited across fork */
		close(pipefd[0]);
		serve(pipefd[1], region);
		_exit(0);
	}
	atexit(kill_server);
	close(pipefd[1]);
	pfd = (struct pollfd){ .fd = pipefd[0], .events = POLLIN };
	if (poll(&pfd, 1, STEP_MS) != 1 || read(pipefd[0], &port, sizeof(port)) != sizeof(port))
		FAIL("the server never announced its port");
	close(pipefd[0]);
	printf("stress: seed %" PRIu64 ", %s, bandwidth cap %" PRIu64 " MiB/s, zerocopy %s\n",
	       seed, iterations ? "fixed iterations" : "timed", max_bandwidth >> 20,
	       zerocopy == XPORT_ZC_ON ? "on" : zerocopy == XPORT_ZC_OFF ? "off" : "auto");
	run_client(port, region);
	reap_server();
	printf("PASS\n");
	return 0;
}

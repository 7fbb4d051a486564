// SPDX-License-Identifier: MIT
/*
 * Source side of a migration.
 *
 * Pages travel as WRITEs from the (read-only) mapping of source RAM into
 * the destination's registered RAM, built from runs of dirty bits and cut at
 * 1 MiB stripes.  A stripe always rides the same channel: requests on one
 * channel are carried out in order, so a page re-sent in a later round can
 * never be overtaken by its older copy on another channel.  That holds for
 * tcp too, where a "completion" only means the bytes left this host.
 */
#include <assert.h>
#include <errno.h>
#include <glib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "bitmap.h"
#include "migrate.h"
#include "owner.h"
#include "page-hash.h"
#include "peer-proto.h"
#include "report.h"
#include "util.h"

#define STRIPE (1ull << 20)
#define POST_BATCH 16
#define PROGRESS_NS 1000000000ull
#define MARK_COOKIE UINT64_MAX
#define MAX_RUN_PAGES (STRIPE / OWNER_MIN_PAGE)
/* A granule --verify hashes never spans two stripes (two channels). */
static_assert(STRIPE % PEER_GRANULE_MAX == 0, "granules within stripes");
/* A stripe piece is one PAGES run. */
static_assert(STRIPE <= PEER_MAX_RUN_BYTES, "a piece fits a run");

struct src_block {
	struct owner_ram_block *ram;
	struct xport_mr *mr;
	struct xport_remote remote;
};

struct source {
	const struct mig_cfg *cfg;
	mig_event_fn fn;
	void *opaque;
	struct mig_stats *st;
	struct owner_session *owner;
	struct xport_conn *conn;
	struct src_block blocks[OWNER_MAX_BLOCKS];
	unsigned nblocks;
	unsigned unflushed;
	unsigned marks; /* drain marks completed; any reap may see one */
	uint64_t t_start, t_progress, t_sync;
	uint64_t bw_start_ns, bw_bytes; /* --max-bandwidth token bucket */
	double last_bandwidth;          /* bytes/s of the last round */
	/* What a FAIL from the destination means now: while it answers our
	 * layout, it could not take this guest (layouts differ, its owner or
	 * its registration failed): the set-up failed, not the peer. */
	enum mig_failure dest_fail_class;
	bool dest_gave_up; /* it sent FAIL: no need to tell it ours */
	uint64_t round_t0, round_bytes0; /* the round being sent */
	uint64_t t_stop;                 /* the guest stopped here */
	bool stopping;                   /* the round being sent is the last */
	uint64_t dest_unchecked;         /* bytes the destination still checks */
	/* --verify (pages): a digest per granule as sent, and per channel
	 * the PAGES message that names what went out on it, sent behind. */
	struct page_hashes hashes[OWNER_MAX_BLOCKS];
	struct peer_msg *announce;
	unsigned max_runs;
	/* --test-corrupt-round: the bad copy of the first granule. */
	uint8_t *corrupt_buf;
	struct xport_mr *corrupt_mr;
};

static uint64_t peer_deadline(const struct source *s)
{
	return monotonic_ns() + (uint64_t)s->cfg->peer_timeout_ms * 1000000ull;
}

static void emit(struct source *s, enum mig_event_type type)
{
	mig_report_event(s->st, s->t_start, s->fn, s->opaque, type);
}

static int fail(struct source *s, enum mig_failure why, int err)
{
	return mig_report_failure(s->st, why, err);
}

static int peer_fail(struct source *s, int err)
{
	return fail(s, err == -EBADMSG || err == -EPROTO ? MIG_FAIL_PROTOCOL : MIG_FAIL_PEER, err);
}

static int check_cancel(struct source *s)
{
	if (s->cfg->cancel && *s->cfg->cancel)
		return fail(s, MIG_FAIL_CANCELLED, -ECANCELED);
	return 0;
}

/* Reaps completions, counting the drain marks among them in s->marks. */
static int reap(struct source *s)
{
	struct xport_completion comp[64];
	int n = xport_poll(s->conn, comp, ARRAY_SIZE(comp));

	if (n < 0)
		return peer_fail(s, n);
	for (int i = 0; i < n; i++) {
		if (comp[i].status)
			return peer_fail(s, comp[i].status);
		if (comp[i].op == XPORT_OP_RECV) {
			/* Unasked, the destination only ever says it gives up. */
			struct peer_msg m;

			if (peer_msg_decode(comp[i].data, comp[i].len, &m) == 0 &&
			    m.type == PEER_MSG_FAIL) {
				s->dest_gave_up = true;
				return fail(s, s->dest_fail_class, m.u.error ? -m.u.error : -EIO);
			}
			return fail(s, MIG_FAIL_PROTOCOL, -EPROTO);
		}
		if (comp[i].cookie == MARK_COOKIE)
			s->marks++;
	}
	return 0;
}

/* Posts wr, reaping completions while the channel is full: never forever. */
static int post(struct source *s, const struct xport_wr *wr)
{
	uint64_t deadline = 0;
	unsigned spins = 0;

	for (;;) {
		int r = xport_post(s->conn, wr);

		if (r != -EAGAIN)
			return r < 0 ? peer_fail(s, r) : 0;
		if (!deadline)
			deadline = peer_deadline(s);
		else if (monotonic_ns() > deadline)
			return fail(s, MIG_FAIL_PEER, -ETIMEDOUT);
		r = xport_flush(s->conn);
		if (r == 0)
			r = reap(s);
		if (r == 0)
			r = check_cancel(s);
		if (r < 0)
			return r;
		/* Busy-poll first (that is where the bandwidth is), then sleep. */
		if (++spins > 256)
			xport_wait(s->conn, 10);
	}
}

static int peer_send(struct source *s, const struct peer_msg *m, unsigned channel)
{
	uint8_t buf[PEER_MAX_MSG];
	size_t len = peer_msg_encode(m, buf);

	uint64_t deadline = peer_deadline(s);

	for (;;) {
		int r = xport_send_copy(s->conn, channel, buf, len, 0, 0);

		if (r != -EAGAIN)
			return r < 0 ? peer_fail(s, r) : 0;
		if (monotonic_ns() > deadline)
			return fail(s, MIG_FAIL_PEER, -ETIMEDOUT);
		r = reap(s);
		if (r < 0)
			return r;
		xport_wait(s->conn, 10);
	}
}

/* One look for the destination's next message: 1 (in *m), 0 (none yet), -errno. */
static int peer_try_recv(struct source *s, struct peer_msg *m)
{
	struct xport_completion c;
	int r = xport_poll(s->conn, &c, 1);

	if (r < 0)
		return peer_fail(s, r);
	if (r == 1 && c.status)
		return peer_fail(s, c.status);
	if (r == 1 && c.op == XPORT_OP_RECV) {
		r = peer_msg_decode(c.data, c.len, m);
		if (r < 0)
			return fail(s, MIG_FAIL_PROTOCOL, r);
		if (m->type == PEER_MSG_FAIL) {
			s->dest_gave_up = true;
			return fail(s, s->dest_fail_class, m->u.error ? -m->u.error : -EIO);
		}
		return 1;
	}
	return check_cancel(s);
}

/* Waits for the destination's next message. */
static int peer_recv(struct source *s, struct peer_msg *m)
{
	uint64_t deadline = peer_deadline(s);

	for (;;) {
		int r = peer_try_recv(s, m);

		if (r != 0)
			return r < 0 ? r : 0;
		if (monotonic_ns() > deadline)
			return fail(s, MIG_FAIL_PEER, -ETIMEDOUT);
		xport_wait(s->conn, 100);
	}
}

/* Sleeps just enough to keep the average under --max-bandwidth. */
static void rate_limit(struct source *s, uint64_t bytes)
{
	uint64_t max = s->cfg->max_bandwidth, due_ns;

	if (!max)
		return;
	s->bw_bytes += bytes;
	due_ns = s->bw_start_ns + (uint64_t)((double)s->bw_bytes / (double)max * 1e9);
	for (;;) {
		/* One clock read: a second one could pass due_ns and underflow. */
		uint64_t t = monotonic_ns(), left;
		struct timespec ts;

		if (t >= due_ns)
			return;
		left = due_ns - t;
		ts = (struct timespec){ .tv_sec = (time_t)(left / 1000000000ull),
					.tv_nsec = (long)(left % 1000000000ull) };
		nanosleep(&ts, NULL);
	}
}

/* A keepalive for the destination, and a progress event for the caller. */
static int maybe_progress(struct source *s)
{
	struct peer_msg m = { .type = PEER_MSG_PROGRESS };
	uint64_t t = monotonic_ns();

	if (t - s->t_progress < PROGRESS_NS)
		return 0;
	s->t_progress = t;
	/* Round 0 is the long one: its rate so far, not a previous round's. */
	if (s->st->rounds == 0 && t > s->round_t0) {
		s->st->mbps = (double)(s->st->ram_transferred - s->round_bytes0) * 8 /
			      ((double)(t - s->round_t0) / 1e9) / 1e6;
	}
	m.u.progress.round = s->st->rounds;
	m.u.progress.bytes = s->st->ram_transferred;
	emit(s, MIG_EV_PROGRESS);
	return peer_send(s, &m, 0);
}

/* Sends channel ch's PAGES, if it names anything. */
static int announce_flush(struct source *s, unsigned ch)
{
	struct peer_msg *m = &s->announce[ch];
	int r;

	if (!m->u.pages.nruns)
		return 0;
	m->type = PEER_MSG_PAGES;
	m->u.pages.round = (uint32_t)MIN(s->st->rounds, UINT32_MAX);
	r = peer_send(s, m, ch);
	m->u.pages.nruns = 0;
	return r;
}

/*
 * Granules [first, first + count) of block bi are posted on channel ch:
 * the PAGES that names them follows on the same channel, so it reaches
 * the destination only once they have landed.
 */
static int announce(struct source *s, unsigned ch, unsigned bi, uint64_t first, uint32_t count)
{
	struct peer_msg *m = &s->announce[ch];
	struct peer_run *last = m->u.pages.nruns ? &m->u.pages.run[m->u.pages.nruns - 1] : NULL;

	/* At most a stripe a run, as the destination hashes a run at once. */
	if (last && last->block == bi && last->first + last->count == first &&
	    (uint64_t)(last->count + count) * s->hashes[bi].granule <= PEER_MAX_RUN_BYTES) {
		last->count += count;
		return 0;
	}
	if (m->u.pages.nruns == s->max_runs) {
		int r = announce_flush(s, ch);

		if (r < 0)
			return r;
	}
	m->u.pages.run[m->u.pages.nruns++] =
		(struct peer_run){ .block = bi, .count = count, .first = first };
	return 0;
}

static int announce_flush_all(struct source *s)
{
	int r = 0;

	for (unsigned ch = 0; s->announce && r == 0 && ch < s->st->channels; ch++)
		r = announce_flush(s, ch);
	return r;
}

/* Sends bytes [off, off+len) of block bi, one WRITE per stripe piece. */
static int send_range(struct source *s, unsigned bi, uint64_t off, uint64_t len)
{
	struct src_block *b = &s->blocks[bi];
	unsigned channels = s->st->channels;

	while (len) {
		uint64_t piece = MIN(len, (off / STRIPE + 1) * STRIPE - off);
		struct xport_sge sg = { .mr = b->mr, .offset = off, .len = (uint32_t)piece };
		struct xport_wr wr = {
			.op = XPORT_OP_WRITE,
			.channel = (unsigned)((off / STRIPE + bi) % channels),
			.flags = XPORT_F_MORE,
			.sg = &sg, .nsg = 1,
			.remote = &b->remote, .remote_offset = off,
		};
		uint32_t g = s->hashes[bi].granule;
		int r;

		rate_limit(s, piece);
		r = post(s, &wr);
		/*
		 * Hashed while the write goes out (the device or the kernel
		 * reads the pages meanwhile).  Any time after this round's
		 * dirty sync is right: a page the guest writes after it is in
		 * the dirty log, and goes (and is hashed) again.
		 */
		if (r == 0 && s->announce) {
			page_hashes_update(&s->hashes[bi], b->ram->addr, off / g, piece / g);
			r = announce(s, wr.channel, bi, off / g, (uint32_t)(piece / g));
		}
		if (r < 0)
			return r;
		if (++s->unflushed >= POST_BATCH) {
			s->unflushed = 0;
			r = xport_flush(s->conn);
			if (r == 0)
				r = reap(s);
			if (r < 0)
				return peer_fail(s, r);
		}
		s->st->ram_transferred += piece;
		off += piece;
		len -= piece;
	}
	return maybe_progress(s);
}

static int send_pages(struct source *s, unsigned bi, size_t first, size_t n)
{
	uint64_t ps = s->blocks[bi].ram->info.page_size;

	s->st->normal += n;
	s->st->normal_bytes += n * ps;
	return send_range(s, bi, first * ps, n * ps);
}

/*
 * The first page at or after p that the file may hold data for, by the
 * file's own map of its holes (shmem keeps one).  A hole reads as zero, and
 * reading it through the mapping would allocate and clear a page for
 * nothing.  npages if only holes are left; p when the file cannot tell.
 */
static size_t next_data_page(const struct owner_ram_block *ram, size_t p)
{
	off_t from = (off_t)(ram->info.offset + p * ram->info.page_size), off;

	if (ram->fd < 0)
		return p;
	off = lseek(ram->fd, from, SEEK_DATA);
	if (off < 0)
		return errno == ENXIO ? ram->npages : p;
	if (off <= from)
		return p;
	/* Round down: a page that is only partly a hole may hold data. */
	return MIN((size_t)((uint64_t)(off - (off_t)ram->info.offset) / ram->info.page_size),
		   ram->npages);
}

/* The page after the data that starts at page p: where the next hole is. */
static size_t data_end_page(const struct owner_ram_block *ram, size_t p)
{
	uint64_t ps = ram->info.page_size;
	off_t from = (off_t)(ram->info.offset + p * ps), off;

	if (ram->fd < 0)
		return ram->npages;
	off = lseek(ram->fd, from, SEEK_HOLE);
	if (off <= from)
		return ram->npages;
	/* Round up: a page that is only partly data is data. */
	return MIN((size_t)(((uint64_t)(off - (off_t)ram->info.offset) + ps - 1) / ps),
		   ram->npages);
}

/* Bytes round 0 has not looked at yet: page P of block BI and after. */
static uint64_t unscanned_bytes(const struct source *s, unsigned bi, size_t p)
{
	const struct owner_ram_block *ram = s->blocks[bi].ram;
	uint64_t left = (uint64_t)(ram->npages - p) * ram->info.page_size;

	for (unsigned b = bi + 1; b < s->nblocks; b++)
		left += s->blocks[b].ram->info.size;
	return left;
}

/*
 * Round 0: every page except the zero ones (the destination starts zeroed).
 * Holes are skipped without being read; a page the guest writes after its
 * hole was skipped is in the dirty log, which runs already.
 */
static int send_all_nonzero(struct source *s)
{
	for (unsigned bi = 0; bi < s->nblocks; bi++) {
		struct owner_ram_block *ram = s->blocks[bi].ram;
		size_t ps = ram->info.page_size, p = 0, data_end = 0;

		while (p < ram->npages) {
			size_t start;
			int r;

			if (p >= data_end) {
				start = p;
				p = next_data_page(ram, p);
				s->st->duplicate += p - start;
				if (p >= ram->npages)
					break;
				data_end = MAX(data_end_page(ram, p), p + 1);
			}
			if (page_is_zero(ram->addr + p * ps, ps)) {
				s->st->duplicate++;
				p++;
				continue;
			}
			start = p;
			while (p < data_end && p - start < MAX_RUN_PAGES &&
			       !page_is_zero(ram->addr + p * ps, ps))
				p++;
			/* What progress reports as remaining, as QEMU does in
			 * its first pass: the pages not sent yet. */
			s->st->ram_remaining = unscanned_bytes(s, bi, p);
			r = send_pages(s, bi, start, p - start);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static uint64_t dirty_bytes(const struct source *s)
{
	uint64_t bytes = 0;

	for (unsigned bi = 0; bi < s->nblocks; bi++) {
		const struct owner_ram_block *ram = s->blocks[bi].ram;

		bytes += bitmap_count(ram->dirty, ram->npages) * ram->info.page_size;
	}
	return bytes;
}

/* Sends every page whose bit is set, clearing the bits as it goes. */
static int send_dirty(struct source *s)
{
	for (unsigned bi = 0; bi < s->nblocks; bi++) {
		struct owner_ram_block *ram = s->blocks[bi].ram;
		size_t p = 0, n;

		while ((p = bitmap_next_run(ram->dirty, ram->npages, p, MAX_RUN_PAGES, &n)) <
		       ram->npages) {
			int r;

			bitmap_clear_range(ram->dirty, p, n);
			r = send_pages(s, bi, p, n);
			if (r < 0)
				return r;
			p += n;
		}
	}
	return 0;
}

/* Waits until every write posted so far has completed, on every channel. */
static int drain(struct source *s)
{
	uint64_t deadline = peer_deadline(s);
	unsigned channels = s->st->channels;
	int r;

	/*
	 * A full channel makes post() reap while later marks are still being
	 * posted, so an earlier channel's mark can come back there: every reap
	 * counts marks, not just the loop below.
	 */
	s->marks = 0;
	for (unsigned ch = 0; ch < channels; ch++) {
		/* An empty signalled WRITE completes after everything before it. */
		struct xport_wr wr = {
			.op = XPORT_OP_WRITE, .channel = ch, .flags = XPORT_F_SIGNAL,
			.cookie = MARK_COOKIE, .remote = &s->blocks[0].remote,
		};

		r = post(s, &wr);
		if (r < 0)
			return r;
	}
	s->unflushed = 0;
	while (s->marks < channels) {
		r = reap(s);
		if (r == 0)
			r = check_cancel(s);
		if (r < 0)
			return r;
		if (monotonic_ns() > deadline)
			return fail(s, MIG_FAIL_PEER, -ETIMEDOUT);
		if (s->marks < channels)
			xport_wait(s->conn, 100);
	}
	return 0;
}

static int sync_dirty(struct source *s)
{
	uint64_t t = monotonic_ns();
	int r = owner_session_sync(s->owner, s->st->dirty_sync_count, s->cfg->owner_timeout_ms);
	uint64_t pages = 0;

	if (r < 0)
		return fail(s, MIG_FAIL_OWNER, r);
	s->st->dirty_sync_count++;
	s->st->ram_remaining = dirty_bytes(s);
	for (unsigned bi = 0; bi < s->nblocks; bi++)
		pages += bitmap_count(s->blocks[bi].ram->dirty, s->blocks[bi].ram->npages);
	if (t > s->t_sync)
		s->st->dirty_pages_rate = (double)pages / ((double)(t - s->t_sync) / 1e9);
	s->t_sync = t;
	return 0;
}

/*
 * --test-corrupt-round: what a transfer that lands one wrong byte leaves.
 * A copy of the first granule with its first byte flipped goes over the
 * original, behind it on its channel; our digest is of the original.
 */
static int corrupt_first_granule(struct source *s)
{
	struct src_block *b = &s->blocks[0];
	uint32_t g = s->hashes[0].granule;
	struct xport_sge sg = { .mr = s->corrupt_mr, .len = g };
	struct xport_wr wr = { .op = XPORT_OP_WRITE, .channel = 0, .sg = &sg, .nsg = 1,
			       .remote = &b->remote, .remote_offset = 0 };
	int r;

	memcpy(s->corrupt_buf, b->ram->addr, g);
	s->corrupt_buf[0] ^= 0xff;
	page_hashes_update(&s->hashes[0], b->ram->addr, 0, 1);
	r = post(s, &wr);
	return r < 0 ? r : announce(s, 0, 0, 0, 1);
}

static bool corrupt_due(const struct source *s)
{
	if (!s->corrupt_mr)
		return false;
	if (s->cfg->test_corrupt_round == MIG_TEST_CORRUPT_STOP)
		return s->stopping;
	return s->st->rounds == s->cfg->test_corrupt_round;
}

/*
 * After a pre-copy round: on tcp a completed write has only left this
 * host, and the destination (which also hashes what lands, with --verify)
 * can lag behind by its socket buffers.  ROUND_END on every channel, and
 * ROUND_LANDED back: the round ends once it has landed there.  So the
 * bandwidth a round measures, which the downtime estimate uses, is what
 * reaches the destination, and the stop does not inherit a backlog.
 */
static int await_landed(struct source *s, uint64_t *ret_sweep_ns)
{
	struct peer_msg m = { .type = PEER_MSG_ROUND_END };
	uint32_t round = (uint32_t)MIN(s->st->rounds, UINT32_MAX);
	int r = 0;

	for (unsigned ch = 0; r == 0 && ch < s->st->channels; ch++) {
		m.u.round.round = round;
		m.u.round.channel = ch;
		r = peer_send(s, &m, ch);
	}
	if (r == 0)
		r = peer_recv(s, &m);
	if (r == 0 && (m.type != PEER_MSG_ROUND_LANDED || m.u.round.round != round))
		r = fail(s, MIG_FAIL_PROTOCOL, -EPROTO);
	if (r == 0) {
		*ret_sweep_ns = (uint64_t)m.u.round.sweep_ms * 1000000ull;
		s->dest_unchecked = m.u.round.unchecked;
	}
	return r;
}

/* One pre-copy round: send, wait for it to land, measure. */
static int run_round(struct source *s, bool first)
{
	uint64_t t0 = monotonic_ns(), bytes0 = s->st->ram_transferred, pages0 = s->st->normal;
	uint64_t sweep_ns = 0, ns;
	double secs;
	int r;

	s->round_t0 = t0;
	s->round_bytes0 = bytes0;
	r = first ? send_all_nonzero(s) : send_dirty(s);
	if (r == 0 && corrupt_due(s))
		r = corrupt_first_granule(s);
	if (r == 0)
		r = announce_flush_all(s);
	if (r == 0)
		r = drain(s);
	if (r == 0 && !s->stopping)
		r = await_landed(s, &sweep_ns);
	if (r < 0)
		return r;
	/* The destination's sweep is its own work, not the link's. */
	ns = monotonic_ns() - t0;
	secs = (double)(ns > sweep_ns ? ns - sweep_ns : ns) / 1e9;
	s->st->rounds++;
	if (secs > 0 && s->st->ram_transferred > bytes0) {
		s->last_bandwidth = (double)(s->st->ram_transferred - bytes0) / secs;
		s->st->mbps = s->last_bandwidth * 8 / 1e6;
		s->st->pages_per_second = (double)(s->st->normal - pages0) / secs;
	}
	return 0;
}

static int precopy(struct source *s)
{
	struct converge_state cs = { 0 };
	int r;

	/* Start dirty tracking, then send everything once. */
	r = sync_dirty(s);
	if (r == 0) {
		for (unsigned bi = 0; bi < s->nblocks; bi++)
			bitmap_clear_range(s->blocks[bi].ram->dirty, 0, s->blocks[bi].ram->npages);
		s->st->status = "active";
		r = run_round(s, true);
	}
	while (r == 0) {
		uint64_t expect_ns;
		enum converge_action a;

		r = sync_dirty(s);
		if (r < 0)
			break;
		a = converge_decide(&s->cfg->converge, &cs, s->st->ram_remaining,
				    s->last_bandwidth, &expect_ns);
		s->st->expected_downtime_ms = expect_ns == UINT64_MAX ? UINT64_MAX
								      : expect_ns / 1000000;
		emit(s, MIG_EV_ROUND);
		/* --verify: while the destination still has RAM to check, a
		 * stop would wait for it; pre-copy goes on (to the cap). */
		if (a == CONVERGE_STOP_COPY && s->dest_unchecked &&
		    cs.round < s->cfg->converge.max_rounds) {
			r = run_round(s, false);
			continue;
		}
		if (a == CONVERGE_STOP_COPY || a == CONVERGE_FORCED) {
			s->st->forced = a == CONVERGE_FORCED;
			s->st->stop_reason = s->st->forced ? "round-cap" : "converged";
			return 0;
		}
		if (a == CONVERGE_THROTTLE && owner_session_throttle(s->owner, cs.throttle) == 0) {
			s->st->throttle_percent = cs.throttle;
			emit(s, MIG_EV_THROTTLE);
		}
		r = run_round(s, false);
	}
	return r;
}

/* This side's digest of block bi, as --verify's mode computes it. */
static uint64_t block_digest(const struct source *s, unsigned bi)
{
	const struct owner_ram_block *ram = s->blocks[bi].ram;

	if (s->cfg->verify == MIG_VERIFY_PAGES)
		return page_hashes_digest(&s->hashes[bi]);
	return XXH3_64bits(ram->addr, ram->info.size);
}

/* Guest stopped: last dirty pages, DONE everywhere, verify, commit. */
static int stop_and_copy(struct source *s)
{
	struct peer_msg m = { .type = PEER_MSG_DONE };
	uint64_t hashes[OWNER_MAX_BLOCKS];
	int r;

	s->t_stop = monotonic_ns();
	s->stopping = true;
	s->st->status = "device";
	emit(s, MIG_EV_STOP_COPY);
	r = owner_session_stop(s->owner, s->cfg->owner_timeout_ms);
	if (r < 0)
		return fail(s, MIG_FAIL_OWNER, r);
	r = sync_dirty(s);
	if (r == 0)
		r = run_round(s, false);
	for (unsigned ch = 0; r == 0 && ch < s->st->channels; ch++) {
		m.u.done.channel = ch;
		m.u.done.rounds = s->st->rounds;
		m.u.done.bytes = s->st->ram_transferred;
		r = peer_send(s, &m, ch);
	}
	if (r < 0)
		return r;
	/* Hash while the destination hashes: verify costs downtime once, not twice. */
	if (s->cfg->verify)
		for (unsigned bi = 0; bi < s->nblocks; bi++)
			hashes[bi] = block_digest(s, bi);
	/* A destination still checking pages says it is there meanwhile. */
	do
		r = peer_recv(s, &m);
	while (r == 0 && m.type == PEER_MSG_PROGRESS);
	if (r < 0)
		return r;
	if (s->cfg->verify) {
		if (m.type != PEER_MSG_HASHES || m.u.hashes.nblocks != s->nblocks)
			return fail(s, MIG_FAIL_PROTOCOL, -EPROTO);
		for (unsigned bi = 0; bi < s->nblocks; bi++)
			if (hashes[bi] != m.u.hashes.hash[bi])
				return fail(s, MIG_FAIL_VERIFY, -EILSEQ);
	} else if (m.type != PEER_MSG_READY) {
		return fail(s, MIG_FAIL_PROTOCOL, -EPROTO);
	}
	m.type = PEER_MSG_COMMIT;
	r = peer_send(s, &m, 0);
	if (r == 0)
		r = peer_recv(s, &m);
	if (r == 0 && m.type != PEER_MSG_COMMITTED)
		r = fail(s, MIG_FAIL_PROTOCOL, -EPROTO);
	s->st->downtime_ms = (monotonic_ns() - s->t_stop) / 1000000;
	return r;
}

/*
 * After our QEMU's stream failed: the destination's RESULT, if its QEMU
 * failed first (it is then the cause), within a short wait.
 */
static int why_not_sent(struct source *s, int err)
{
	uint64_t deadline = monotonic_ns() + 5000000000ull;
	struct peer_msg m;

	for (;;) {
		int r = peer_try_recv(s, &m);

		if (r > 0 && m.type == PEER_MSG_RESULT && m.u.error) {
			s->dest_gave_up = true; /* it said all there is to say */
			return fail(s, MIG_FAIL_PEER_FRONTEND, -m.u.error);
		}
		if (r > 0 && m.type == PEER_MSG_RESULT)
			return 0; /* loaded after all: the guest is there */
		if (r != 0 || monotonic_ns() > deadline)
			return fail(s, MIG_FAIL_FRONTEND, err);
		xport_wait(s->conn, 50);
	}
}

/*
 * The device state, after COMMITTED (--qmp on both sides): our QEMU sends
 * it to the port HANDOFF names, and RESULT says whether the destination's
 * QEMU loaded it.  RESULT 0 is the end, whatever our QEMU still reports:
 * the guest is there.  The guest stays stopped here all along (downtime
 * runs on).  While our QEMU moves bytes, PROGRESS keeps the destination
 * waiting: the time limit is for silence, not for the whole step.
 */
static int hand_over(struct source *s)
{
	const struct mig_handoff *h = s->cfg->handoff;
	uint64_t t0 = monotonic_ns(), deadline, last_bytes = 0;
	struct peer_msg m;
	bool sent = false;
	int r = peer_recv(s, &m);

	if (r < 0)
		return r;
	if (m.type != PEER_MSG_HANDOFF)
		return fail(s, MIG_FAIL_PROTOCOL, -EPROTO);
	r = h->send(h->opaque, m.u.port);
	if (r < 0) {
		r = why_not_sent(s, r);
		goto done;
	}
	deadline = peer_deadline(s);
	for (;;) {
		if (!sent) {
			uint64_t bytes = last_bytes;

			r = h->sent(h->opaque, &bytes);
			if (r < 0) {
				r = why_not_sent(s, r);
				goto done;
			}
			sent = r > 0;
			if (sent || bytes != last_bytes) {
				struct peer_msg p = { .type = PEER_MSG_PROGRESS,
						      .u.progress = { .round = s->st->rounds,
								      .bytes = bytes } };

				last_bytes = bytes;
				deadline = peer_deadline(s);
				r = peer_send(s, &p, 0);
				if (r < 0)
					return r;
			}
		}
		r = peer_try_recv(s, &m);
		if (r < 0)
			return r;
		if (r > 0 && m.type != PEER_MSG_RESULT)
			return fail(s, MIG_FAIL_PROTOCOL, -EPROTO);
		if (r > 0 && m.u.error) {
			s->dest_gave_up = true;
			return fail(s, MIG_FAIL_PEER_FRONTEND, -m.u.error);
		}
		if (r > 0)
			break;
		if (monotonic_ns() > deadline)
			return fail(s, sent ? MIG_FAIL_PEER : MIG_FAIL_FRONTEND, -ETIMEDOUT);
		xport_wait(s->conn, 50);
	}
	r = 0;
done:
	if (r < 0)
		return r;
	s->st->handoff = true;
	s->st->handoff_ms = (monotonic_ns() - t0) / 1000000;
	s->st->downtime_ms = (monotonic_ns() - s->t_stop) / 1000000;
	return 0;
}

/* Tells the destination our layout, so it can start registering its RAM. */
static int send_layout(struct source *s)
{
	struct peer_msg m = {
		.type = PEER_MSG_LAYOUT,
		.u.layout = { .version = s->cfg->handoff ? PEER_PROTO_VERSION_HANDOFF
							 : PEER_PROTO_VERSION,
			      .nblocks = s->nblocks,
			      .flags = (s->cfg->verify == MIG_VERIFY_FULL ? PEER_FLAG_VERIFY : 0) |
				       PEER_FLAG_ROUND_LANDED |
				       (s->cfg->verify == MIG_VERIFY_PAGES ? PEER_FLAG_VERIFY_PAGES
									   : 0) |
				       (s->cfg->handoff ? PEER_FLAG_HANDOFF : 0) },
	};
	int r = peer_send(s, &m, 0);

	for (unsigned bi = 0; r == 0 && bi < s->nblocks; bi++) {
		const struct owner_block *info = &s->blocks[bi].ram->info;

		m.type = PEER_MSG_BLOCK;
		m.u.block.index = bi;
		m.u.block.page_size = info->page_size;
		m.u.block.size = info->size;
		memcpy(m.u.block.name, info->name, OWNER_NAME_MAX);
		r = peer_send(s, &m, 0);
	}
	return r;
}

/* Learns where each block may go. */
static int recv_regions(struct source *s)
{
	struct peer_msg m;
	int r = 0;

	for (unsigned bi = 0; r == 0 && bi < s->nblocks; bi++) {
		struct src_block *b = &s->blocks[bi];

		r = peer_recv(s, &m);
		if (r < 0)
			return r;
		if (m.type != PEER_MSG_REGION || m.u.region.index != bi)
			return fail(s, MIG_FAIL_PROTOCOL, -EPROTO);
		r = xport_remote_import(s->conn, m.u.region.desc, XPORT_REGION_DESC_SIZE,
					&b->remote);
		if (r < 0)
			return fail(s, MIG_FAIL_PROTOCOL, r);
		/* The destination's region must hold the whole block, writable. */
		if (b->remote.len < b->ram->info.size)
			return fail(s, MIG_FAIL_SETUP, -EMSGSIZE);
		if (!(b->remote.access & XPORT_ACCESS_REMOTE_WRITE))
			return fail(s, MIG_FAIL_SETUP, -EACCES);
	}
	return r;
}

/*
 * Source RAM is mapped read-only.  Some kernels (Linux 6.1 with rdma_rxe)
 * refuse to pin a read-only shared mapping (-EFAULT); then the mapping is
 * made writable for the registration's sake only: the region is still
 * registered without local write access, so the device cannot write it.
 */
static int register_block(struct source *s, struct src_block *b)
{
	int r = xport_mr_reg(s->conn, b->ram->addr, b->ram->info.size,
			     XPORT_ACCESS_LOCAL_READONLY, &b->mr);

	if (r != -EFAULT)
		return r;
	if (mprotect(b->ram->addr, b->ram->info.size, PROT_READ | PROT_WRITE) < 0)
		return -errno;
	return xport_mr_reg(s->conn, b->ram->addr, b->ram->info.size,
			    XPORT_ACCESS_LOCAL_READONLY, &b->mr);
}

/* --verify (pages): the digests, the PAGES messages, a test's bad copy. */
static int verify_setup(struct source *s)
{
	uint32_t room = xport_conn_peer_max_msg(s->conn);
	int r;

	if (s->cfg->verify != MIG_VERIFY_PAGES)
		return 0;
	for (unsigned bi = 0; bi < s->nblocks; bi++) {
		const struct owner_block *info = &s->blocks[bi].ram->info;

		r = page_hashes_init(&s->hashes[bi], info->size, info->page_size, false);
		if (r < 0)
			return r;
	}
	s->max_runs = room < PEER_HDR_SIZE + 8 + 16 ? 0
		      : MIN(PEER_MAX_RUNS, (room - PEER_HDR_SIZE - 8) / 16);
	if (!s->max_runs)
		return -EMSGSIZE;
	s->announce = g_try_new0(struct peer_msg, s->st->channels);
	if (!s->announce)
		return -ENOMEM;
	if (s->cfg->test_corrupt) {
		uint32_t g = s->hashes[0].granule;

		s->corrupt_buf = g_try_malloc0(g);
		if (!s->corrupt_buf)
			return -ENOMEM;
		r = xport_mr_reg(s->conn, s->corrupt_buf, g, XPORT_ACCESS_LOCAL_READONLY,
				 &s->corrupt_mr);
		if (r < 0)
			return r;
	}
	return 0;
}

static void verify_free(struct source *s)
{
	xport_mr_dereg(s->corrupt_mr);
	g_free(s->corrupt_buf);
	g_free(s->announce);
	for (unsigned bi = 0; bi < OWNER_MAX_BLOCKS; bi++)
		page_hashes_free(&s->hashes[bi]);
}

/*
 * The destination first: an unreachable or refusing peer fails the
 * migration before the owner has been asked for anything.
 */
static int setup(struct source *s)
{
	int r = xport_connect(&s->cfg->xopts, s->cfg->host, s->cfg->port, &s->conn);

	if (r < 0)
		return fail(s, MIG_FAIL_PEER, r);
	s->st->transport = xport_conn_kind(s->conn);
	s->st->channels = xport_conn_channels(s->conn);
	r = owner_session_open(s->cfg->owner_path, OWNER_ROLE_SOURCE,
			       s->cfg->owner_timeout_ms, &s->owner);
	if (r < 0)
		return fail(s, MIG_FAIL_OWNER, r);
	s->nblocks = s->owner->nblocks;
	s->st->ram_total = s->owner->ram_bytes;
	for (unsigned bi = 0; bi < s->nblocks; bi++)
		s->blocks[bi].ram = &s->owner->blocks[bi];
	r = verify_setup(s);
	if (r < 0)
		return fail(s, MIG_FAIL_SETUP, r);
	/* Both sides pin their RAM at the same time: registration is slow. */
	s->dest_fail_class = MIG_FAIL_SETUP;
	r = send_layout(s);
	if (r < 0)
		return r;
	for (unsigned bi = 0; bi < s->nblocks; bi++) {
		struct src_block *b = &s->blocks[bi];

		r = register_block(s, b);
		if (r < 0)
			return fail(s, MIG_FAIL_SETUP, r);
	}
	r = recv_regions(s);
	s->dest_fail_class = MIG_FAIL_PEER;
	if (r < 0)
		return r;
	s->st->setup_time_ms = (monotonic_ns() - s->t_start) / 1000000;
	emit(s, MIG_EV_SETUP_DONE);
	return 0;
}

/* Best effort: the peer may already be gone. */
static void tell_peer_failure(struct source *s)
{
	if (!s->dest_gave_up)
		peer_send_fail(s->conn, s->st->error, PEER_FAIL_TIMEOUT_MS);
}

int mig_send(const struct mig_cfg *cfg, mig_event_fn fn, void *opaque,
	     struct mig_stats *ret_stats)
{
	struct source s = { .cfg = cfg, .fn = fn, .opaque = opaque, .st = ret_stats,
			    .dest_fail_class = MIG_FAIL_PEER };
	bool ram_moved = false;
	int r;

	memset(ret_stats, 0, sizeof(*ret_stats));
	ret_stats->status = "setup";
	s.t_start = s.t_progress = s.t_sync = s.bw_start_ns = monotonic_ns();
	r = setup(&s);
	if (r == 0)
		r = precopy(&s);
	if (r == 0)
		r = stop_and_copy(&s);
	if (r == 0) {
		/* The owner lets its QEMU send the device state only now. */
		r = owner_session_finish(s.owner, OWNER_MSG_COMPLETED, 0);
		ram_moved = true;
		if (cfg->handoff)
			r = r < 0 ? fail(&s, MIG_FAIL_OWNER, r) : hand_over(&s);
		else
			r = 0; /* as before: the caller's migrate will tell */
	}
	if (r == 0) {
		ret_stats->status = "completed";
		ret_stats->ram_remaining = 0;
		emit(&s, MIG_EV_COMPLETED);
	} else {
		tell_peer_failure(&s);
		/* Whatever happened, the source guest keeps running: its owner
		 * resumes it, or, once the RAM has moved, its QEMU does when its
		 * own migration fails or the caller tells it (the hand-off). */
		if (s.owner && !ram_moved)
			owner_session_finish(s.owner, OWNER_MSG_RESUME, r);
		ret_stats->status = "failed";
		emit(&s, MIG_EV_FAILED);
	}
	verify_free(&s);
	xport_conn_close(s.conn);
	owner_session_close(s.owner);
	return r;
}

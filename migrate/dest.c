// SPDX-License-Identifier: MIT
/*
 * Destination side of a migration.  It registers the owner's fresh RAM
 * once, tells the source where each block may be written, then mostly
 * waits: on rdma the pages land without it; on tcp its polling is what
 * places them.  It ends when every channel said DONE (each DONE is ordered
 * behind that channel's writes), optionally proves the image with hashes,
 * and hands the guest to its owner only on COMMIT.
 */
#include <errno.h>
#include <glib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "migrate.h"
#include "owner.h"
#include "page-hash.h"
#include "peer-proto.h"
#include "report.h"
#include "util.h"

struct dest {
	const struct mig_cfg *cfg;
	mig_event_fn fn;
	void *opaque;
	struct mig_stats *st;
	struct owner_session *owner;
	struct xport_listener *listener;
	struct xport_conn *conn;
	struct xport_mr *mrs[OWNER_MAX_BLOCKS];
	uint32_t flags;
	uint64_t t_start;
	bool source_gave_up; /* it sent FAIL: no need to tell it ours */
	bool owner_done;     /* the owner heard COMPLETED: it owns the guest */
	uint16_t handoff_port;
	/* --verify (pages): a digest per granule, taken as PAGES names it
	 * (behind its bytes), and for the rest by a sweep while idle. */
	struct page_hashes hashes[OWNER_MAX_BLOCKS];
	/* How far round 0 has come, per block: the sweep stays behind it, so
	 * that it does not hash pages that are still to arrive. */
	size_t reached[OWNER_MAX_BLOCKS];
	bool verify_pages;
	uint32_t round_end_mask; /* channels that said ROUND_END for round_end */
	uint32_t round_end;
	uint8_t *sweep_buf;      /* SWEEP_BYTES */
	bool swept[OWNER_MAX_BLOCKS]; /* every granule hashed at least once */
	/* Until round 0 has landed, the idle sweep marks holes only (going
	 * forward from here): reading pages then would mostly read pages
	 * whose PAGES is on its way, and hash them twice. */
	bool round0_landed;
	size_t hole_cursor[OWNER_MAX_BLOCKS];
};

/* What the sweep reads per look: short enough to keep polling. */
#define SWEEP_BYTES PEER_GRANULE_MAX
/* Granules of a hole it marks per look (a bit test each). */
#define SWEEP_HOLE_GRANULES 65536u
/* How long it may go on before it answers a ROUND_END (the source waits). */
#define SWEEP_BEFORE_LANDED_MS 2000u

static void emit(struct dest *d, enum mig_event_type type)
{
	mig_report_event(d->st, d->t_start, d->fn, d->opaque, type);
}

static int fail(struct dest *d, enum mig_failure why, int err)
{
	return mig_report_failure(d->st, why, err);
}

/*
 * One look for the source's next message: 1 (in *m), 0 (none yet), -errno.
 * A destination owner that died (a killed QEMU) cannot take the guest:
 * that fails now, so that the source resumes now, not after the last round.
 */
static int try_recv_msg(struct dest *d, struct peer_msg *m)
{
	struct xport_completion c;
	int r = xport_poll(d->conn, &c, 1);

	if (r < 0)
		return fail(d, MIG_FAIL_PEER, r);
	if (r == 1 && c.status)
		return fail(d, MIG_FAIL_PEER, c.status);
	if (r == 1 && c.op == XPORT_OP_RECV) {
		r = peer_msg_decode(c.data, c.len, m);
		if (r < 0)
			return fail(d, MIG_FAIL_PROTOCOL, r);
		if (m->type == PEER_MSG_FAIL) {
			d->source_gave_up = true;
			return fail(d, MIG_FAIL_PEER, m->u.error ? -m->u.error : -EIO);
		}
		/* DONE and ROUND_END speak for the channel they come on: that
		 * is what orders them behind its writes. */
		if ((m->type == PEER_MSG_DONE && m->u.done.channel != c.channel) ||
		    (m->type == PEER_MSG_ROUND_END && m->u.round.channel != c.channel))
			return fail(d, MIG_FAIL_PROTOCOL, -EPROTO);
		return 1;
	}
	if (r == 1)
		return 0; /* our own sends completing */
	if (d->cfg->cancel && *d->cfg->cancel)
		return fail(d, MIG_FAIL_CANCELLED, -ECANCELED);
	r = d->owner && !d->owner_done ? owner_session_check_idle(d->owner) : 0;
	return r < 0 ? fail(d, MIG_FAIL_OWNER, r) : 0;
}

/*
 * Next message from the source.  The source sends at least a PROGRESS a
 * second while it works, so silence longer than peer_timeout_ms means it
 * is gone even if no transport error says so.
 */
static bool sweep_some(struct dest *d, bool all);

static int recv_msg(struct dest *d, struct peer_msg *m)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)d->cfg->peer_timeout_ms * 1000000ull;

	for (;;) {
		int r = try_recv_msg(d, m);

		if (r != 0)
			return r < 0 ? r : 0;
		if (monotonic_ns() > deadline)
			return fail(d, MIG_FAIL_PEER, -ETIMEDOUT);
		/* Idle moments go to --verify's sweep (nothing without it). */
		if (!sweep_some(d, false))
			xport_wait(d->conn, 100);
	}
}

static int send_msg(struct dest *d, const struct peer_msg *m, unsigned flags)
{
	uint8_t buf[PEER_MAX_MSG];
	size_t len = peer_msg_encode(m, buf);

	for (;;) {
		struct xport_completion c;
		int r = xport_send_copy(d->conn, 0, buf, len, 0, flags);

		if (r != -EAGAIN)
			return r < 0 ? fail(d, MIG_FAIL_PEER, r) : 0;
		r = xport_poll(d->conn, &c, 1);
		if (r < 0)
			return fail(d, MIG_FAIL_PEER, r);
	}
}

/* The source's layout must match the owner's blocks exactly. */
static int check_layout(struct dest *d)
{
	struct peer_msg m;
	unsigned nblocks;
	bool same;
	int r = recv_msg(d, &m);

	if (r < 0)
		return r;
	if (m.type != PEER_MSG_LAYOUT)
		return fail(d, MIG_FAIL_PROTOCOL, -EPROTO);
	nblocks = m.u.layout.nblocks;
	if (nblocks > OWNER_MAX_BLOCKS)
		return fail(d, MIG_FAIL_PROTOCOL, -EPROTO);
	same = nblocks == d->owner->nblocks;
	d->flags = m.u.layout.flags;
	/* Every block the source announced is read, even after a mismatch:
	 * closing on unread bytes resets the connection, and the source
	 * would then see a broken peer instead of our FAIL. */
	for (unsigned bi = 0; bi < nblocks; bi++) {
		const struct owner_block *mine = &d->owner->blocks[bi].info;

		r = recv_msg(d, &m);
		if (r < 0)
			return r;
		if (m.type != PEER_MSG_BLOCK || m.u.block.index != bi)
			return fail(d, MIG_FAIL_PROTOCOL, -EPROTO);
		if (!same || m.u.block.size != mine->size ||
		    m.u.block.page_size != mine->page_size ||
		    strcmp(m.u.block.name, mine->name) != 0)
			same = false;
	}
	if (!same)
		return fail(d, MIG_FAIL_SETUP, -EBADMSG);
	d->verify_pages = d->flags & PEER_FLAG_VERIFY_PAGES;
	for (unsigned bi = 0; d->verify_pages && bi < nblocks; bi++) {
		const struct owner_block *info = &d->owner->blocks[bi].info;

		r = page_hashes_init(&d->hashes[bi], info->size, info->page_size, true);
		if (r < 0)
			return fail(d, MIG_FAIL_SETUP, r);
	}
	if (d->verify_pages && !(d->sweep_buf = g_try_malloc(SWEEP_BYTES)))
		return fail(d, MIG_FAIL_SETUP, -ENOMEM);
	/* The device state follows the RAM only if both sides drive QEMU. */
	if (!(d->flags & PEER_FLAG_HANDOFF) != !d->cfg->handoff)
		return fail(d, MIG_FAIL_SETUP, -EPROTONOSUPPORT);
	return 0;
}

/*
 * With --verify=full, the final hashes read every page, and pages the
 * source never sent (zero pages) would fault in then, inside the guest's
 * downtime: fault them in now, during setup.  (--verify reads them while
 * it waits for pages, a slice at a time.)  Without it, pages are allocated as they
 * arrive, as QEMU's own destination does, and setup stays short.  (RDMA
 * registration pins, and so allocates, every page anyway.)  Best effort: a
 * kernel without MADV_POPULATE_WRITE only loses the head start.
 */
static void prefault(struct dest *d)
{
	for (unsigned bi = 0; bi < d->owner->nblocks; bi++)
		madvise(d->owner->blocks[bi].addr, d->owner->blocks[bi].info.size,
			MADV_POPULATE_WRITE);
}

/* Revokes the source's access to our RAM (a no-op for regions never offered). */
static void drop_regions(struct dest *d)
{
	for (unsigned bi = 0; bi < OWNER_MAX_BLOCKS; bi++) {
		xport_mr_dereg(d->mrs[bi]);
		d->mrs[bi] = NULL;
	}
}

static int offer_regions(struct dest *d)
{
	for (unsigned bi = 0; bi < d->owner->nblocks; bi++) {
		struct owner_ram_block *ram = &d->owner->blocks[bi];
		struct peer_msg m = { .type = PEER_MSG_REGION, .u.region.index = bi };
		/* With the file, tcp fills new pages through it: see xport_mr_reg_file(). */
		int r = xport_mr_reg_file(d->conn, ram->addr, ram->info.size,
					  XPORT_ACCESS_REMOTE_WRITE, ram->fd, ram->info.offset,
					  &d->mrs[bi]);

		if (r < 0)
			return fail(d, MIG_FAIL_SETUP, r);
		xport_mr_describe(d->mrs[bi], m.u.region.desc);
		r = send_msg(d, &m, 0);
		if (r < 0)
			return r;
	}
	return 0;
}

static int setup(struct dest *d)
{
	int r = xport_listen(&d->cfg->xopts, d->cfg->host, d->cfg->port, &d->listener);

	if (r < 0)
		return fail(d, MIG_FAIL_SETUP, r);
	r = owner_session_open(d->cfg->owner_path, OWNER_ROLE_DEST,
			       d->cfg->owner_timeout_ms, &d->owner);
	if (r < 0)
		return fail(d, MIG_FAIL_OWNER, r);
	d->st->ram_total = d->owner->ram_bytes;
	emit(d, MIG_EV_LISTENING);
	/* Accept in slices so a signal can cancel the wait. */
	do {
		r = xport_accept(d->listener, 500, &d->conn);
		if (r == -ETIMEDOUT && d->cfg->cancel && *d->cfg->cancel)
			return fail(d, MIG_FAIL_CANCELLED, -ECANCELED);
	} while (r == -ETIMEDOUT);
	if (r < 0)
		return fail(d, MIG_FAIL_PEER, r);
	xport_listener_close(g_steal_pointer(&d->listener));
	d->t_start = monotonic_ns();
	d->st->transport = xport_conn_kind(d->conn);
	d->st->channels = xport_conn_channels(d->conn);
	r = check_layout(d);
	if (r == 0 && (d->flags & PEER_FLAG_VERIFY))
		prefault(d);
	if (r == 0)
		r = offer_regions(d);
	if (r == 0) {
		d->st->status = "active";
		d->st->setup_time_ms = (monotonic_ns() - d->t_start) / 1000000;
		emit(d, MIG_EV_SETUP_DONE);
	}
	return r;
}

/*
 * Digests of granules [first, first + count) of block bi.  On tcp their
 * bytes came in through the RAM file, so our mapping has no page table
 * entries for them yet: one populate call maps the run, instead of a
 * fault every few pages (which made hashing lag the transfer by hundreds
 * of milliseconds at the stop).  Best effort: without it, faults do it.
 */
static void hash_landed(struct dest *d, unsigned bi, size_t first, size_t count)
{
	struct page_hashes *ph = &d->hashes[bi];
	uint8_t *addr = (uint8_t *)d->owner->blocks[bi].addr + first * ph->granule;

	madvise(addr, count * ph->granule, MADV_POPULATE_READ);
	page_hashes_update(ph, d->owner->blocks[bi].addr, first, count);
}

/*
 * PAGES: the granules it names have landed (it rode behind them on their
 * channel), so their digests are taken now.  Each run must lie inside the
 * layout: a hostile source gets no read outside our RAM.
 */
static int take_pages(struct dest *d, const struct peer_msg *m)
{
	if (!d->verify_pages)
		return fail(d, MIG_FAIL_PROTOCOL, -EPROTO);
	for (uint32_t i = 0; i < m->u.pages.nruns; i++) {
		const struct peer_run *run = &m->u.pages.run[i];
		struct page_hashes *ph;

		if (run->block >= d->owner->nblocks)
			return fail(d, MIG_FAIL_PROTOCOL, -EPROTO);
		ph = &d->hashes[run->block];
		if (run->first > ph->n || run->count > ph->n - run->first ||
		    (uint64_t)run->count * ph->granule > PEER_MAX_RUN_BYTES)
			return fail(d, MIG_FAIL_PROTOCOL, -EPROTO);
		hash_landed(d, run->block, run->first, run->count);
		/* Round 0 goes through the blocks in order, each front to back;
		 * later rounds only resend. */
		for (unsigned bi = 0; bi < run->block; bi++)
			d->reached[bi] = d->hashes[bi].n;
		d->reached[run->block] = m->u.pages.round ? ph->n
					 : MAX(d->reached[run->block], run->first + run->count);
	}
	return 0;
}

/* pread() until len bytes are in; 0 or -errno (-EIO at the file's end). */
static int pread_full(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pread(fd, buf, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * The first granule at or after granule g of block bi whose bytes the RAM
 * file may hold, by the file's map of its holes: `below` if none before
 * it, g when the file cannot tell (or there is no file).  A hole reads as
 * zeros.
 */
static size_t data_granule(const struct owner_ram_block *ram, const struct page_hashes *ph,
			   size_t g, size_t below)
{
	off_t base = (off_t)ram->info.offset, data;

	if (ram->fd < 0)
		return g;
	data = lseek(ram->fd, base + (off_t)((uint64_t)g * ph->granule), SEEK_DATA);
	if (data < 0)
		return errno == ENXIO ? below : g; /* ENXIO: only holes after it */
	/* Round down: a granule partly data is data. */
	return MAX(g, MIN(below, (size_t)((uint64_t)(data - base) / ph->granule)));
}

/* Round 0's idle work on block bi: the next hole of its file below `below`. */
static bool sweep_holes(struct dest *d, unsigned bi, size_t below)
{
	const struct owner_ram_block *ram = &d->owner->blocks[bi];
	struct page_hashes *ph = &d->hashes[bi];
	off_t base = (off_t)ram->info.offset, hole;
	size_t first, end;

	if (ram->fd < 0 || d->hole_cursor[bi] >= below)
		return false;
	hole = lseek(ram->fd, base + (off_t)(d->hole_cursor[bi] * ph->granule), SEEK_HOLE);
	if (hole < base)
		return false;
	/* Whole granules only: round the hole's start up. */
	first = (size_t)(((uint64_t)(hole - base) + ph->granule - 1) / ph->granule);
	if (first >= below) {
		d->hole_cursor[bi] = below;
		return false;
	}
	end = MIN(data_granule(ram, ph, first, below), first + SWEEP_HOLE_GRANULES);
	if (end > first)
		page_hashes_set_zero(ph, first, end - first);
	d->hole_cursor[bi] = MAX(end, first + 1);
	return true;
}

/*
 * Idle work: digests of granules no PAGES has named, behind round 0 (its
 * zero pages; one on a channel that lags is hashed again by its PAGES).
 * With all, every block.  True if there was some.
 *
 * A stretch the RAM file has as a hole (nothing wrote it, which is most
 * of an idle guest) is zeros: its digests are known from the file's map.
 * The rest is read through the file a window at a time: scattered zero
 * pages read as zeros there without being allocated (the mapping would
 * allocate and clear each), one read for many of them.
 */
static bool sweep_some(struct dest *d, bool all)
{
	for (unsigned bi = 0; d->verify_pages && bi < d->owner->nblocks; bi++) {
		const struct owner_ram_block *ram = &d->owner->blocks[bi];
		struct page_hashes *ph = &d->hashes[bi];
		size_t below = all ? ph->n : d->reached[bi], window = SWEEP_BYTES / ph->granule;
		size_t len, first, end, holes;

		if (d->swept[bi])
			continue;
		if (!all && !d->round0_landed) {
			if (sweep_holes(d, bi, below))
				return true;
			continue;
		}
		first = page_hashes_next_unhashed(ph, below, window, &len);
		if (first >= ph->n) {
			/* Nothing is ever unhashed again: done with this block. */
			d->swept[bi] = below == ph->n;
			continue;
		}
		if (ram->fd < 0) {
			hash_landed(d, bi, first, len);
			ph->cursor = first + len;
			return true;
		}
		/* A hole, however long, is zeros: one look at the file's map. */
		holes = data_granule(ram, ph, first, below) - first;
		if (holes) {
			holes = MIN(holes, SWEEP_HOLE_GRANULES);
			page_hashes_set_zero(ph, first, holes);
			ph->cursor = first + holes;
			return true;
		}
		end = MIN(first + window, below);
		if (pread_full(ram->fd, d->sweep_buf, (end - first) * ph->granule,
			       ram->info.offset + first * ph->granule) < 0) {
			hash_landed(d, bi, first, len);
			ph->cursor = first + len;
			return true;
		}
		for (size_t i = first; i < end; i++)
			if (page_hashes_pending(ph, i))
				page_hashes_take(ph, i, d->sweep_buf + (i - first) * ph->granule);
		ph->cursor = end;
		return true;
	}
	return false;
}

/*
 * ROUND_END: once every channel has said it for a round, everything the
 * round wrote has landed, and with --verify its PAGES are hashed (each
 * came before it on its channel): ROUND_LANDED says so.
 */
static int take_round_end(struct dest *d, const struct peer_msg *m)
{
	uint32_t bit, all = (1u << d->st->channels) - 1;
	struct peer_msg landed = { .type = PEER_MSG_ROUND_LANDED };
	uint64_t t0, deadline;

	if (!(d->flags & PEER_FLAG_ROUND_LANDED) || m->u.round.channel >= d->st->channels)
		return fail(d, MIG_FAIL_PROTOCOL, -EPROTO);
	bit = 1u << m->u.round.channel;
	if ((d->round_end_mask & bit) || (d->round_end_mask && m->u.round.round != d->round_end))
		return fail(d, MIG_FAIL_PROTOCOL, -EPROTO);
	d->round_end = m->u.round.round;
	d->round_end_mask |= bit;
	if (d->round_end_mask != all)
		return 0;
	d->round_end_mask = 0;
	/*
	 * Round 0 has passed every block: the sweep catches up now, while the
	 * guest still runs, not in the stop.  Bounded, as the source waits;
	 * it learns how long (not part of the round's time) and what is left
	 * (it does not stop the guest while there is).
	 */
	for (unsigned bi = 0; bi < d->owner->nblocks; bi++)
		d->reached[bi] = d->hashes[bi].n;
	d->round0_landed = true;
	t0 = monotonic_ns();
	deadline = t0 + MIN((uint64_t)d->cfg->peer_timeout_ms / 4, SWEEP_BEFORE_LANDED_MS) *
			       1000000ull;
	while (monotonic_ns() < deadline && sweep_some(d, false))
		;
	landed.u.round.round = d->round_end;
	landed.u.round.sweep_ms = (uint32_t)((monotonic_ns() - t0) / 1000000);
	for (unsigned bi = 0; bi < d->owner->nblocks; bi++)
		landed.u.round.unchecked += (uint64_t)page_hashes_count_pending(&d->hashes[bi]) *
					    d->hashes[bi].granule;
	return send_msg(d, &landed, 0);
}

/* Until every channel has said DONE. */
static int receive_pages(struct dest *d)
{
	uint32_t done_mask = 0, all = (1u << d->st->channels) - 1;

	while (done_mask != all) {
		struct peer_msg m;
		int r = recv_msg(d, &m);

		if (r < 0)
			return r;
		switch (m.type) {
		case PEER_MSG_PAGES:
			r = take_pages(d, &m);
			if (r < 0)
				return r;
			break;
		case PEER_MSG_ROUND_END:
			r = take_round_end(d, &m);
			if (r < 0)
				return r;
			break;
		case PEER_MSG_PROGRESS:
			d->st->rounds = m.u.progress.round;
			d->st->ram_transferred = m.u.progress.bytes;
			emit(d, MIG_EV_PROGRESS);
			break;
		case PEER_MSG_DONE:
			if (m.u.done.channel >= d->st->channels ||
			    (done_mask & (1u << m.u.done.channel)))
				return fail(d, MIG_FAIL_PROTOCOL, -EPROTO);
			done_mask |= 1u << m.u.done.channel;
			d->st->rounds = m.u.done.rounds;
			d->st->ram_transferred = m.u.done.bytes;
			break;
		default:
			return fail(d, MIG_FAIL_PROTOCOL, -EPROTO);
		}
	}
	return 0;
}

/* Until the source hangs up (at most 10 s): what we sent last is read. */
static void wait_hang_up(struct dest *d)
{
	for (int i = 0; i < 100; i++) {
		struct xport_completion c;

		if (xport_poll(d->conn, &c, 1) < 0)
			break;
		xport_wait(d->conn, 100);
	}
}

static int finish(struct dest *d)
{
	struct peer_msg m = { .type = PEER_MSG_READY };
	int r;

	d->st->status = "device";
	/* What the sweep has not reached yet is hashed now, in the downtime
	 * (only after a forced stop, or a source of other rounds), saying we
	 * are here at least once a second: the source waits for HASHES. */
	for (uint64_t said = monotonic_ns(); sweep_some(d, true);) {
		if (monotonic_ns() - said > 1000000000ull) {
			struct peer_msg alive = { .type = PEER_MSG_PROGRESS };

			r = send_msg(d, &alive, 0);
			if (r < 0)
				return r;
			said = monotonic_ns();
		}
	}
	if (d->flags & (PEER_FLAG_VERIFY | PEER_FLAG_VERIFY_PAGES)) {
		m.type = PEER_MSG_HASHES;
		m.u.hashes.nblocks = d->owner->nblocks;
		for (unsigned bi = 0; bi < d->owner->nblocks; bi++)
			m.u.hashes.hash[bi] = d->verify_pages
				? page_hashes_digest(&d->hashes[bi])
				: XXH3_64bits(d->owner->blocks[bi].addr,
					      d->owner->blocks[bi].info.size);
	}
	r = send_msg(d, &m, 0);
	if (r == 0)
		r = recv_msg(d, &m);
	if (r < 0)
		return r;
	if (m.type != PEER_MSG_COMMIT)
		return fail(d, MIG_FAIL_PROTOCOL, -EPROTO);
	/*
	 * Once the owner hears COMPLETED it may load device state and run the
	 * guest: the source loses write access to this RAM first (a late or
	 * hostile WRITE then fails instead of changing a running guest).
	 */
	drop_regions(d);
	/* From here the guest is ours: tell the owner before acknowledging. */
	r = owner_session_finish(d->owner, OWNER_MSG_COMPLETED, 0);
	if (r < 0)
		return fail(d, MIG_FAIL_OWNER, r);
	d->owner_done = true;
	/* Listening may fail: the source must still be able to resume. */
	if (d->cfg->handoff) {
		r = d->cfg->handoff->listen(d->cfg->handoff->opaque, &d->handoff_port);
		if (r < 0)
			return fail(d, MIG_FAIL_FRONTEND, r);
	}
	m.type = PEER_MSG_COMMITTED;
	r = send_msg(d, &m, 0);
	if (d->cfg->handoff)
		return r;
	/*
	 * The source hangs up once it has read COMMITTED.  Closing first could
	 * reset a tcp connection and destroy COMMITTED unread, leaving both
	 * sides believing they own the guest.
	 */
	if (r == 0)
		wait_hang_up(d);
	return 0;
}

/* RESULT, best effort: how it went is already settled in our stats. */
static void send_result(struct dest *d, int err)
{
	struct peer_msg m = { .type = PEER_MSG_RESULT, .u.error = -err };
	struct mig_stats keep = *d->st;

	if (!d->source_gave_up && send_msg(d, &m, 0) == 0)
		wait_hang_up(d);
	*d->st = keep;
}

/*
 * The device state (--qmp on both sides): our QEMU listens on the port
 * HANDOFF names, the source's QEMU sends, and RESULT tells the source
 * whether ours loaded it; the source gives up on its guest only then.
 * A failure on the way ends in RESULT 0 if our QEMU loaded the guest
 * after all (it is here now), in RESULT with the error once our QEMU is
 * certainly gone (the source may run its guest again), or in no RESULT at
 * all when neither is certain (the source then keeps its guest paused).
 */
static int hand_over(struct dest *d)
{
	const struct mig_handoff *h = d->cfg->handoff;
	uint64_t timeout_ns = (uint64_t)d->cfg->peer_timeout_ms * 1000000ull;
	uint64_t deadline = monotonic_ns() + timeout_ns;
	struct peer_msg m = { .type = PEER_MSG_HANDOFF, .u.port = d->handoff_port };
	int r = send_msg(d, &m, 0), loaded = 0;

	while (r == 0) {
		loaded = h->loaded(h->opaque);
		if (loaded != 0)
			break;
		r = try_recv_msg(d, &m);
		if (r > 0 && m.type == PEER_MSG_PROGRESS) {
			deadline = monotonic_ns() + timeout_ns; /* the stream moves */
			r = 0;
		} else if (r > 0) {
			r = fail(d, MIG_FAIL_PROTOCOL, -EPROTO);
		} else if (r == 0 && monotonic_ns() > deadline) {
			r = fail(d, MIG_FAIL_FRONTEND, -ETIMEDOUT);
		} else if (r == 0) {
			xport_wait(d->conn, 50);
		}
	}
	/* It may have loaded since the last look. */
	if (r < 0 && h->loaded(h->opaque) == 1)
		loaded = 1;
	if (loaded == 1) {
		/* The guest is here: that is the outcome, told or not. */
		send_result(d, 0);
		d->st->failure = MIG_FAIL_NONE;
		d->st->error = 0;
		return 0;
	}
	if (loaded < 0)
		r = fail(d, MIG_FAIL_FRONTEND, loaded);
	/* Not certain it is gone: no word, and the source stays paused. */
	if (h->discard(h->opaque) == 0)
		send_result(d, r);
	return r;
}

int mig_incoming(const struct mig_cfg *cfg, mig_event_fn fn, void *opaque,
		 struct mig_stats *ret_stats)
{
	struct dest d = { .cfg = cfg, .fn = fn, .opaque = opaque, .st = ret_stats };
	bool committed = false;
	int r;

	memset(ret_stats, 0, sizeof(*ret_stats));
	ret_stats->status = "setup";
	d.t_start = monotonic_ns();
	r = setup(&d);
	if (r == 0)
		r = receive_pages(&d);
	if (r == 0) {
		r = finish(&d);
		committed = r == 0;
	}
	if (committed && cfg->handoff)
		r = hand_over(&d);
	if (committed && r == 0) {
		ret_stats->status = "completed";
		emit(&d, MIG_EV_COMPLETED);
	} else if (committed) {
		/* RESULT said it, or could not be said: never a FAIL now. */
		ret_stats->status = "failed";
		emit(&d, MIG_EV_FAILED);
	} else {
		/* Best effort: the source may already be gone. */
		if (!d.source_gave_up)
			peer_send_fail(d.conn, r, PEER_FAIL_TIMEOUT_MS);
		/* The owner discards what arrived. */
		if (d.owner && !d.owner_done)
			owner_session_finish(d.owner, OWNER_MSG_ABORT, r);
		ret_stats->status = "failed";
		emit(&d, MIG_EV_FAILED);
	}
	drop_regions(&d);
	for (unsigned bi = 0; bi < OWNER_MAX_BLOCKS; bi++)
		page_hashes_free(&d.hashes[bi]);
	g_free(d.sweep_buf);
	xport_conn_close(d.conn);
	xport_listener_close(d.listener);
	owner_session_close(d.owner);
	return r;
}

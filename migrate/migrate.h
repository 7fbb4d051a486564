/* SPDX-License-Identifier: MIT */
/*
 * The live-migration engine: pre-copy of guest RAM from a source memory
 * owner to a destination memory owner, by RDMA WRITE (or tcp frames) from
 * source RAM straight into destination RAM.
 *
 * mig_send() and mig_incoming() run one migration each, blocking, and
 * report progress through a callback; they never log.  On any failure
 * before the RAM is committed, the source owner is told RESUME (its guest
 * keeps running, its memory untouched: the engine maps it read-only) and
 * the destination owner ABORT.  After the commit (a failed hand-off) the
 * owners' sessions are over: the caller settles the front ends.
 */
#ifndef VRDMA_MIGRATE_H
#define VRDMA_MIGRATE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "converge.h"
#include "xport.h"

/*
 * The device-state hand-off, when each engine also drives its QEMU
 * (vrdma-migrate --qmp): once the destination owns the RAM, its QEMU
 * listens, the source's QEMU sends the device state by its own migration
 * stream, and the destination tells the source whether its QEMU loaded it.
 * Set on both sides or on neither: the destination refuses a mismatch
 * (-EPROTONOSUPPORT, MIG_FAIL_SETUP).  No call may block for long: the
 * engine polls between looks at its peer.
 */
struct mig_handoff {
	/* dst, before COMMITTED: the front end listens, on *ret_port. */
	int (*listen)(void *opaque, uint16_t *ret_port);
	/*
	 * dst: 1 once the front end has loaded the state (the guest is there,
	 * running or not), 0 not yet (or cannot tell now), -errno once it
	 * certainly never will (it exited).
	 */
	int (*loaded)(void *opaque);
	/*
	 * dst, when the hand-off failed before the front end loaded: make sure
	 * it never runs the guest (quit, and see it gone).  0 when certain:
	 * only then may the source be told to run its guest again.
	 */
	int (*discard)(void *opaque);
	/* src: the front end starts sending to the destination's port. */
	int (*send)(void *opaque, uint16_t port);
	/* src: 1 once everything left, 0 not yet (*ret_bytes so far), -errno. */
	int (*sent)(void *opaque, uint64_t *ret_bytes);
	void *opaque;
};

/* send --verify: the destination's image must equal the source's. */
enum mig_verify {
	MIG_VERIFY_NONE,
	/*
	 * A digest per page (granule), taken on the source as a page is sent
	 * and on the destination once it has landed; the stop hashes only
	 * what its last round moved.  Proves the transfer: every byte the
	 * destination holds is the byte the source's RAM held when last sent,
	 * which the dirty log says is the byte it holds now.
	 */
	MIG_VERIFY_PAGES,
	/* Both whole images hashed at the stop: proves the dirty log too,
	 * for that many milliseconds more of downtime. */
	MIG_VERIFY_FULL,
};

/* mig_cfg.test_corrupt_round: the last round, whichever it is. */
#define MIG_TEST_CORRUPT_STOP UINT32_MAX

struct mig_cfg {
	const char *owner_path;
	const char *host; /* send: destination; incoming: address to listen on */
	const char *port;
	struct xport_opts xopts;
	struct converge_cfg converge;
	uint64_t max_bandwidth; /* bytes/s, 0 = unlimited */
	enum mig_verify verify;
	/*
	 * Tests only (send --test-corrupt-round): with --verify, round N (or
	 * MIG_TEST_CORRUPT_STOP) also lands a copy of the first granule with
	 * one byte flipped over the original, as a faulty transfer would;
	 * verification must catch it.  0 with test_corrupt off.
	 */
	bool test_corrupt;
	uint32_t test_corrupt_round;
	int owner_timeout_ms;   /* owner replies */
	int peer_timeout_ms;    /* silence from the peer before giving up */
	const volatile sig_atomic_t *cancel; /* set by a signal handler */
	const struct mig_handoff *handoff;   /* NULL: the device state is not ours */
};

void mig_cfg_default(struct mig_cfg *cfg);

/* Why a migration failed: the CLI maps these to exit codes. */
enum mig_failure {
	MIG_FAIL_NONE = 0,
	MIG_FAIL_OWNER,    /* the memory owner misbehaved or went away */
	MIG_FAIL_PEER,     /* transport error, peer gone, timeout */
	MIG_FAIL_PROTOCOL, /* the peer sent something malformed or out of turn */
	MIG_FAIL_VERIFY,   /* hashes differ */
	MIG_FAIL_CANCELLED,
	MIG_FAIL_SETUP,    /* layouts differ, registration failed, ... */
	MIG_FAIL_FRONTEND, /* hand-off: this host's QEMU refused or failed */
	MIG_FAIL_PEER_FRONTEND, /* hand-off: the destination's QEMU did not load */
};

/* Shaped like QEMU's query-migrate. */
struct mig_stats {
	const char *status; /* "setup", "active", "device" (stop-and-copy), "completed", "failed" */
	enum xport_kind transport;
	unsigned channels;
	/* With a hand-off (handoff set), downtime runs until the destination's
	 * QEMU has the device state; handoff_ms is that last part. */
	uint64_t total_time_ms, setup_time_ms, downtime_ms, handoff_ms;
	bool handoff;
	uint64_t expected_downtime_ms;
	uint64_t ram_total;       /* bytes */
	uint64_t ram_transferred; /* bytes on the wire (payload) */
	uint64_t ram_remaining;   /* dirty bytes at the last sync */
	uint64_t duplicate;       /* zero pages skipped */
	uint64_t normal;          /* pages sent */
	uint64_t normal_bytes;
	uint64_t dirty_sync_count;
	uint64_t rounds;
	double mbps;              /* of the last round, megabits/s as QEMU */
	double pages_per_second;
	double dirty_pages_rate;  /* pages/s dirtied, last round */
	unsigned throttle_percent;
	bool forced;              /* stop-and-copy because of the round cap */
	/* Why pre-copy ended: "converged" (the rest fits the downtime limit)
	 * or "round-cap"; NULL while it goes on, and on the destination. */
	const char *stop_reason;
	enum mig_failure failure;
	int error;                /* -errno when failed */
};

enum mig_event_type {
	MIG_EV_LISTENING,  /* incoming: waiting for the source */
	MIG_EV_SETUP_DONE,
	MIG_EV_ROUND,      /* a dirty sync happened; stats updated */
	MIG_EV_PROGRESS,   /* about once a second while sending */
	MIG_EV_THROTTLE,
	MIG_EV_STOP_COPY,
	MIG_EV_COMPLETED,
	MIG_EV_FAILED,
};

struct mig_event {
	enum mig_event_type type;
	const struct mig_stats *stats;
};

typedef void (*mig_event_fn)(const struct mig_event *ev, void *opaque);

int mig_send(const struct mig_cfg *cfg, mig_event_fn fn, void *opaque,
	     struct mig_stats *ret_stats);
int mig_incoming(const struct mig_cfg *cfg, mig_event_fn fn, void *opaque,
		 struct mig_stats *ret_stats);

#endif

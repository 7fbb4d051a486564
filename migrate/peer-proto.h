/* SPDX-License-Identifier: MIT */
/*
 * Engine-to-engine control messages (source <-> destination), carried as
 * xport SENDs next to the RDMA WRITEs / tcp frames that move the pages.
 * docs/migration-protocol.md describes the sequence.  Header: magic
 * "VMPR", type, zero, payload length, zero (16 bytes, little endian).
 */
#ifndef VRDMA_PEER_PROTO_H
#define VRDMA_PEER_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "owner-proto.h"
#include "xport.h"

#define PEER_PROTO_VERSION 1
/* LAYOUT of a migration with PEER_FLAG_HANDOFF: an engine older than the
 * hand-off refuses it as a version it does not speak. */
#define PEER_PROTO_VERSION_HANDOFF 2
#define PEER_HDR_SIZE 16
/* Runs in one PAGES message: 16 bytes each, the message well under the
 * engines' 4 KiB receive buffers. */
#define PEER_MAX_RUNS 120u
#define PEER_MAX_MSG (PEER_HDR_SIZE + 8 + 16 * PEER_MAX_RUNS)
/* --verify=full: both sides hash their whole RAM while the guest is stopped. */
#define PEER_FLAG_VERIFY (1u << 0)
/* Both engines drive their QEMUs (--qmp): the device state follows COMMITTED. */
#define PEER_FLAG_HANDOFF (1u << 1)
/* --verify (pages): a digest per granule, taken as granules are sent and
 * arrive (PAGES); the stop hashes only what the last round moved. */
#define PEER_FLAG_VERIFY_PAGES (1u << 2)
/* Each pre-copy round ends with ROUND_END and waits for ROUND_LANDED. */
#define PEER_FLAG_ROUND_LANDED (1u << 3)
/*
 * What --verify hashes as one: a page, but never more than the source's
 * 1 MiB stripe, so that a granule's bytes always ride one channel and the
 * PAGES message naming it can ride behind them.
 */
#define PEER_GRANULE_MAX (1u << 20)
/* A PAGES run covers at most this much (a stripe): the destination hashes
 * a run at one go, so a message asks for a bounded amount of work. */
#define PEER_MAX_RUN_BYTES (1u << 20)

enum peer_msg_type {
	PEER_MSG_LAYOUT = 1, /* src: version, nblocks, flags */
	PEER_MSG_BLOCK,      /* src: one RAM block's geometry */
	PEER_MSG_REGION,     /* dst: where that block may be written */
	PEER_MSG_PROGRESS,   /* src: round, bytes so far (also a keepalive) */
	PEER_MSG_DONE,       /* src, on every channel, after its last write */
	PEER_MSG_HASHES,     /* dst: per-block hashes (verify) */
	PEER_MSG_READY,      /* dst: everything arrived (no verify) */
	PEER_MSG_COMMIT,     /* src: the destination owns the guest now */
	PEER_MSG_COMMITTED,  /* dst: acknowledged */
	PEER_MSG_FAIL,       /* either: giving up, error */
	/* With PEER_FLAG_HANDOFF, after COMMITTED: */
	PEER_MSG_HANDOFF,    /* dst: its QEMU listens for the device state on this port */
	PEER_MSG_RESULT,     /* dst: its QEMU loaded the device state (0) or failed */
	/* With PEER_FLAG_VERIFY_PAGES, on the channel that carried the bytes: */
	PEER_MSG_PAGES,      /* src: these granules were written, and hashed as sent */
	/* With PEER_FLAG_ROUND_LANDED: */
	PEER_MSG_ROUND_END,  /* src, on every channel: a pre-copy round's writes are before */
	PEER_MSG_ROUND_LANDED, /* dst: all of that round landed (and is hashed) */
};

/* Granules [first, first + count) of RAM block `block`. */
struct peer_run {
	uint32_t block, count;
	uint64_t first;
};

struct peer_msg {
	enum peer_msg_type type;
	union {
		struct {
			uint32_t version, nblocks, flags;
		} layout;
		struct {
			uint32_t index, page_size;
			uint64_t size;
			char name[OWNER_NAME_MAX];
		} block;
		struct {
			uint32_t index;
			uint8_t desc[XPORT_REGION_DESC_SIZE];
		} region;
		struct {
			uint64_t round, bytes;
		} progress;
		struct {
			uint32_t channel;
			uint64_t rounds, bytes;
		} done;
		struct {
			uint32_t nblocks;
			uint64_t hash[OWNER_MAX_BLOCKS];
		} hashes;
		struct {
			uint32_t round, nruns; /* nruns: 1..PEER_MAX_RUNS */
			struct peer_run run[PEER_MAX_RUNS];
		} pages;
		struct {
			uint32_t round, channel; /* channel: ROUND_END only */
			/* ROUND_LANDED: how long the destination swept before
			 * it answered (not the round's time), and how many
			 * bytes of RAM it has still to check. */
			uint32_t sweep_ms;
			uint64_t unchecked;
		} round;
		uint16_t port;  /* HANDOFF */
		int32_t error; /* FAIL, RESULT: positive errno */
	} u;
};

size_t peer_msg_encode(const struct peer_msg *msg, uint8_t buf[PEER_MAX_MSG]);
/* 0, -EBADMSG or -EPROTONOSUPPORT. */
int peer_msg_decode(const void *buf, size_t len, struct peer_msg *ret_msg);

/*
 * Sends FAIL with ERR (-errno) on channel 0 and waits, at most TIMEOUT_MS,
 * for the peer to hang up, so that our close does not overtake it
 * (peer-fail.c).  0, or -errno: the peer may not have heard.
 */
int peer_send_fail(struct xport_conn *conn, int err, int timeout_ms);
/* How long a failing engine waits for its FAIL to leave. */
#define PEER_FAIL_TIMEOUT_MS 1000

#endif

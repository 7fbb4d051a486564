/* SPDX-License-Identifier: MIT */
/*
 * The engine's side of the owner protocol: connect, learn and map the RAM
 * blocks (and the source's dirty bitmap), then drive rounds.  Every block is
 * checked against fstat() of its fd before it is mapped; the source's RAM
 * is mapped read-only, so the engine cannot write into a running guest.
 */
#ifndef VRDMA_MIG_OWNER_H
#define VRDMA_MIG_OWNER_H

#include <stddef.h>
#include <stdint.h>

#include "owner-proto.h"

struct owner_ram_block {
	struct owner_block info;
	uint8_t *addr;
	int fd;          /* the file mapped at addr (from info.offset), -1 if none */
	size_t npages;
	uint64_t *dirty; /* source: this block's words in the shared bitmap */
};

struct owner_session {
	int sock;
	enum owner_role role;
	uint64_t caps;
	unsigned nblocks;
	struct owner_ram_block blocks[OWNER_MAX_BLOCKS];
	uint8_t *bitmap;
	size_t bitmap_size;
	uint64_t ram_bytes;
};

int owner_session_open(const char *path, enum owner_role role, int timeout_ms,
		       struct owner_session **ret);
/* SYNC{round}, waits for ROUND_READY{round}. */
int owner_session_sync(struct owner_session *s, uint64_t round, int timeout_ms);
int owner_session_throttle(struct owner_session *s, unsigned percent);
/* STOP, waits for STOPPED. */
int owner_session_stop(struct owner_session *s, int timeout_ms);
/* COMPLETED, RESUME{error} or ABORT{error}: the last word to the owner. */
int owner_session_finish(struct owner_session *s, enum owner_msg_type type,
			 int error);
/*
 * Between our requests an owner says nothing: anything readable (end of
 * file included) means it died or broke the protocol.  0, or -EPIPE.
 */
int owner_session_check_idle(struct owner_session *s);
void owner_session_close(struct owner_session *s);

#endif

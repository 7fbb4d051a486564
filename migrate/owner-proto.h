/* SPDX-License-Identifier: MIT */
/*
 * The owner protocol: between the migration engine and whoever owns the
 * guest's RAM (a patched QEMU, or vrdma-guestsim).  docs/migration-protocol.md
 * is the normative text; this header is its C binding.
 *
 * Transport: a UNIX SOCK_SEQPACKET socket; the owner listens, the engine
 * connects.  One message per packet: a 16-byte header, then the payload;
 * BLOCK and BITMAP carry exactly one fd (SCM_RIGHTS).  All integers little
 * endian.  Every decoder validates every field and returns 0, -EBADMSG, or
 * -EPROTONOSUPPORT.
 */
#ifndef VRDMA_OWNER_PROTO_H
#define VRDMA_OWNER_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OWNER_PROTO_VERSION 1
#define OWNER_HDR_SIZE 16
#define OWNER_MAX_MSG 256
#define OWNER_MAX_BLOCKS 64
#define OWNER_NAME_MAX 32 /* including the terminating NUL */
#define OWNER_MIN_PAGE 4096u
#define OWNER_MAX_PAGE (1u << 30)
#define OWNER_MAX_BLOCK_SIZE (1ull << 44) /* 16 TiB */

/* Capability bits, negotiated as the intersection of both sides' sets. */
#define OWNER_CAP_THROTTLE (1ull << 0) /* the owner slows the guest on THROTTLE */
#define OWNER_CAPS_KNOWN OWNER_CAP_THROTTLE

enum owner_role {
	OWNER_ROLE_SOURCE = 1,
	OWNER_ROLE_DEST = 2,
};

enum owner_msg_type {
	/* engine -> owner */
	OWNER_MSG_HELLO = 1,      /* struct owner_hello */
	OWNER_MSG_SYNC = 2,       /* round: harvest dirty pages into the bitmap */
	OWNER_MSG_THROTTLE = 3,   /* percent */
	OWNER_MSG_STOP = 4,       /* pause the guest, answer STOPPED */
	OWNER_MSG_RESUME = 5,     /* source: migration failed, keep running; error */
	OWNER_MSG_COMPLETED = 6,  /* the migration is done */
	OWNER_MSG_ABORT = 7,      /* destination: discard what was received; error */
	/* owner -> engine */
	OWNER_MSG_WELCOME = 16,   /* struct owner_welcome */
	OWNER_MSG_BLOCK = 17,     /* struct owner_block + fd */
	OWNER_MSG_BITMAP = 18,    /* bitmap memfd size + fd (source only) */
	OWNER_MSG_ROUND_READY = 19, /* round, dirty page count */
	OWNER_MSG_STOPPED = 20,
};

struct owner_hello {
	uint32_t version;
	enum owner_role role;
	uint64_t caps;
};

struct owner_welcome {
	uint32_t version;
	enum owner_role role;
	uint64_t caps;
	uint32_t nblocks; /* 1..OWNER_MAX_BLOCKS BLOCK messages follow */
};

struct owner_block {
	uint32_t index;     /* 0..nblocks-1, in order */
	uint32_t page_size; /* power of two, OWNER_MIN_PAGE..OWNER_MAX_PAGE */
	uint64_t offset;    /* of the block in its fd, page aligned */
	uint64_t size;      /* multiple of page_size, > 0 */
	uint64_t bitmap_offset; /* source: byte offset of its bitmap, 8-aligned */
	char name[OWNER_NAME_MAX]; /* printable ASCII, NUL terminated */
};

/* A decoded message; which member is valid depends on type. */
struct owner_msg {
	enum owner_msg_type type;
	union {
		struct owner_hello hello;
		struct owner_welcome welcome;
		struct owner_block block;
		uint64_t round;        /* SYNC */
		struct {
			uint64_t round;
			uint64_t dirty_pages;
		} ready;               /* ROUND_READY */
		uint32_t percent;      /* THROTTLE: 0..99 */
		int32_t error;         /* RESUME, ABORT: positive errno, 0 if none */
		uint64_t bitmap_size;  /* BITMAP */
	} u;
};

/* Encodes msg into buf (>= OWNER_MAX_MSG bytes); returns the length. */
size_t owner_msg_encode(const struct owner_msg *msg, uint8_t *buf);
/* Decodes one packet; nfds is how many fds came with it. */
int owner_msg_decode(const uint8_t *buf, size_t len, unsigned nfds,
		     struct owner_msg *ret_msg);
/* How many fds a message of this type carries (0 or 1). */
unsigned owner_msg_nfds(enum owner_msg_type type);

/*
 * Socket helpers.  owner_send() sends one message (with fd when the type
 * carries one, else fd must be -1).  owner_recv() receives one message,
 * waiting at most timeout_ms (<0: forever); a received fd is returned in
 * *ret_fd (else -1).  Stray fds, truncated packets and malformed messages
 * are closed/refused: -EBADMSG.  A closed peer gives -ECONNRESET.
 */
int owner_send(int sock, const struct owner_msg *msg, int fd);
int owner_recv(int sock, int timeout_ms, struct owner_msg *ret_msg, int *ret_fd);

const char *owner_msg_name(enum owner_msg_type type);
/* A RAM block name on the wire: printable ASCII, NUL terminated, zero padded. */
bool owner_name_valid(const uint8_t name[OWNER_NAME_MAX]);
/*
 * A RAM block's index, page size and size within the limits above (both
 * protocols describe blocks; each adds checks of its own fields).
 */
bool owner_block_geometry_valid(uint32_t index, uint32_t page_size, uint64_t size);

/*
 * The 16-byte header both migration protocols share, each with its own
 * magic: magic, type, zero, payload length, zero.  mig_msg_start() writes
 * it, clears the plen payload bytes after it (padding and reserved fields
 * go out as zeros) and returns the payload; mig_hdr_valid() is false for a
 * short buffer, another magic, or a reserved byte that is not zero.
 */
#define MIG_HDR_SIZE 16
uint8_t *mig_msg_start(uint8_t *buf, uint32_t magic, uint16_t type, size_t plen);
bool mig_hdr_valid(const uint8_t *buf, size_t len, uint32_t magic);

#endif

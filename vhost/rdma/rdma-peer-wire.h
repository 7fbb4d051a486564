/* SPDX-License-Identifier: MIT */
/*
 * The protocol between back ends when a guest with RDMA connections moves
 * (docs/migration-rdma.md, "Peers elsewhere"): the bytes of a request and
 * of its reply.  One request per TLS connection, to the back end behind
 * the peer QP's GID:
 *
 *   PAUSE     the moving guest's source asks the peer to stop sending on
 *             the QP connected to it and to drain; the peer keeps the token
 *   RESUME    the source, resumed after a failed move: the peer goes on
 *   RETARGET  the destination, with the token from the source's state: the
 *             peer's QP is connected to the destination's QP from now on
 *   DISCONNECT either end of an rdma_cm connection that moved ends it: the
 *             receiver's connection ends as if a DREQ had come
 *
 * Every value is little-endian.  Pure bytes: no sockets, no verbs
 * (unit-tested and fuzzed).
 */
#ifndef VRDMA_RDMA_PEER_WIRE_H
#define VRDMA_RDMA_PEER_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define RDMA_PEER_MAGIC "vrdmaPB1"
#define RDMA_PEER_REPLY_MAGIC "vrdmaPR1"
#define RDMA_PEER_TOKEN_SIZE 16u
#define RDMA_PEER_REQUEST_SIZE 80u
#define RDMA_PEER_REPLY_SIZE 16u
/* rkeys a RETARGET may carry: one per MR of the moved guest's PD. */
#define RDMA_PEER_MAX_RKEYS 65536u

enum rdma_peer_op {
	RDMA_PEER_PAUSE = 1,
	RDMA_PEER_RESUME = 2,
	RDMA_PEER_RETARGET = 3,
	RDMA_PEER_DISCONNECT = 4,
};

struct rdma_peer_rkey {
	uint32_t guest; /* the rkey the peer's guest was given */
	uint32_t host;  /* the rkey the moved MR has now */
};

struct rdma_peer_request {
	uint16_t op;
	uint32_t qpn;      /* the receiver's host QP */
	uint32_t from_qpn; /* the host QP it is connected to now */
	uint8_t from_gid[16];
	uint8_t token[RDMA_PEER_TOKEN_SIZE];
	/* RETARGET: where the moved QP is now, and its MRs' new rkeys. */
	uint32_t new_qpn;
	uint8_t new_gid[16];
	uint32_t n_rkeys;
};

/*
 * The fixed part: 0, or -EBADMSG for anything but a known op with every
 * reserved byte 0, QP numbers of 24 bits, and n_rkeys (RETARGET only) at
 * most RDMA_PEER_MAX_RKEYS.  What follows is n_rkeys times 8 bytes.
 */
int rdma_peer_request_decode(const uint8_t buf[RDMA_PEER_REQUEST_SIZE],
			     struct rdma_peer_request *ret);
void rdma_peer_request_encode(const struct rdma_peer_request *req,
			      uint8_t ret[RDMA_PEER_REQUEST_SIZE]);
void rdma_peer_rkeys_decode(const uint8_t *buf, uint32_t n, struct rdma_peer_rkey *ret);
void rdma_peer_rkeys_encode(const struct rdma_peer_rkey *rkeys, uint32_t n, uint8_t *ret);

/* The reply: a status, 0 or a positive errno. */
void rdma_peer_reply_encode(uint32_t status, uint8_t ret[RDMA_PEER_REPLY_SIZE]);
/* 0 and the status, or -EBADMSG. */
int rdma_peer_reply_decode(const uint8_t buf[RDMA_PEER_REPLY_SIZE], uint32_t *ret_status);

#endif

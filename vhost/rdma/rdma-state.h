/* SPDX-License-Identifier: MIT */
/*
 * The RDMA device's own state for migration (spec section 10): written by
 * the source back end, read by the destination's, through the front end
 * (vhost-user DEVICE_STATE).  A record per object, in the order objects
 * depend on each other; each carries the guest command that made the
 * object (REG_MR, CREATE_CQ, CREATE_QP, then MODIFY_QP for the QP's state
 * and attributes), so the destination checks it exactly as it checks a
 * guest's command, plus what the guest knows of it (handles, keys, QP
 * number) and where the device stood in its rings.
 *
 * Pure bytes: no verbs, no guest memory (unit-tested and fuzzed).  Every
 * value is little-endian.
 */
#ifndef VRDMA_RDMA_STATE_H
#define VRDMA_RDMA_STATE_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "rdma-internal.h"

#define RDMA_STATE_MAGIC "vrdmaST1"
#define RDMA_STATE_VERSION 1u
/* More records than any instance can hold objects and events. */
#define RDMA_STATE_MAX_RECORDS                                                                     \
	(4u * RDMA_TABLE_MAX + RDMA_MAX_PENDING_EVENTS + RDMA_CM_MAX_LISTENS +                     \
	 3u * RDMA_CM_MAX_CONNS)

enum rdma_state_type {
	RDMA_STATE_PD = 1,
	RDMA_STATE_MR = 2,
	RDMA_STATE_CQ = 3,
	RDMA_STATE_QP = 4,
	RDMA_STATE_EVENT = 5,
	RDMA_STATE_PEER = 6,
	RDMA_STATE_CM_LISTEN = 7,
	RDMA_STATE_CM_CONN = 8,
	RDMA_STATE_CM_EVENT = 9,
};

/* A QP's peer elsewhere, held by its back end for this move (rdma-peer.c). */
#define RDMA_STATE_MAX_PEER_RKEYS 65536u

struct rdma_state_peer {
	uint32_t qp; /* the QP's handle */
	struct rdma_peer_link link;
	uint32_t n_rkeys;      /* the peer's rkeys, if it moved before */
	const uint8_t *rkeys;  /* n_rkeys of { le32 guest's, le32 host's } */
};

struct rdma_state_mr {
	uint32_t handle, lkey, rkey;
	bool released; /* its memory went away: a handle and nothing more */
	struct vrdma_reg_mr_req req;
	struct rdma_request rq; /* the checked command, with its page list */
};

struct rdma_state_cq {
	uint32_t handle;
	uint32_t prod;
	uint16_t arm;
	bool event_pending, dead;
	struct vrdma_create_cq_req req;
	struct rdma_request rq;
};

struct rdma_state_qp {
	uint32_t handle, qpn;
	uint32_t sq_next, sq_tail, rq_tail;
	bool rings_gone;
	struct vrdma_modify_qp_req attr; /* the QP's state and attributes now */
	struct vrdma_create_qp_req req;
	struct rdma_request rq;
};

/* An rdma_cm listen: made again on the destination's address, same port. */
struct rdma_state_cm_listen {
	uint32_t handle;
	uint16_t port, backlog;
};

/*
 * An rdma_cm connection.  A live one (its QP connected, in RTR or RTS) goes
 * on without the host's connection manager, whose ids cannot move: its
 * end is carried by the peer protocol (DISCONNECT).  Any other is ended:
 * its final event is among the CM_EVENT records, and its handle is freed
 * once the guest fetched it.
 */
struct rdma_state_cm_conn {
	uint32_t handle, listen;
	uint32_t qp; /* live: the QP's handle; else 0 */
	bool live;
	uint8_t local_ip[4], remote_ip[4];
	uint16_t local_port, remote_port;
};

/* A CM event the guest has not fetched; final: its connection's last (the
 * handle goes with it); ring: the guest is told there are CM events (the
 * source's queue was empty). */
struct rdma_state_cm_event {
	struct vrdma_cm_event ev;
	bool final, ring;
};

/* What a decoded state is handed to, record by record; a nonzero return
 * (a vrdma_status or -errno) stops the decoding and is returned. */
struct rdma_state_ops {
	/* First: the generation the guest saw on the source (header). */
	int (*begin)(void *opaque, uint32_t generation);
	int (*pd)(void *opaque, uint32_t handle);
	int (*mr)(void *opaque, struct rdma_state_mr *mr);
	int (*cq)(void *opaque, struct rdma_state_cq *cq);
	int (*qp)(void *opaque, struct rdma_state_qp *qp);
	int (*event)(void *opaque, const struct vrdma_event *ev);
	int (*peer)(void *opaque, const struct rdma_state_peer *peer);
	int (*cm_listen)(void *opaque, const struct rdma_state_cm_listen *l);
	int (*cm_conn)(void *opaque, const struct rdma_state_cm_conn *c);
	int (*cm_event)(void *opaque, const struct rdma_state_cm_event *e);
};

/*
 * Checks data as a whole (header, record sizes and order, each command as
 * the device checks a guest's) and hands each record to ops.  0, a
 * positive vrdma_status for a record the checks refuse, or what ops
 * returned.  The records point into data.
 */
int rdma_state_decode(const uint8_t *data, size_t len, const struct rdma_limits *lim,
		      const struct rdma_state_ops *ops, void *opaque);

/*
 * Checks a state as a whole before anything of it is made: every record
 * (rdma_state_decode), each handle and each guest name (lkey, rkey, QP
 * number) once, every object it names present before it, and everything
 * it holds within what the tenant has left (limit less used).  0 and the
 * guest's generation, or a vrdma_status.
 */
int rdma_state_check(const uint8_t *data, size_t len, const struct rdma_limits *lim,
		     const struct rdma_quota *limit, const struct rdma_quota *used,
		     uint32_t *ret_generation);

/* Writing one: records in the order of enum rdma_state_type. */
struct rdma_state_writer {
	GByteArray *buf;
	uint32_t records;
};

void rdma_state_begin(struct rdma_state_writer *w, uint32_t generation);
void rdma_state_put_pd(struct rdma_state_writer *w, uint32_t handle);
/* pages: npages guest-physical addresses, as the command had them. */
void rdma_state_put_mr(struct rdma_state_writer *w, const struct rdma_state_mr *mr,
		       const uint64_t *pages);
void rdma_state_put_cq(struct rdma_state_writer *w, const struct rdma_state_cq *cq,
		       const uint64_t *pages);
/* pages: the SQ's then the RQ's. */
void rdma_state_put_qp(struct rdma_state_writer *w, const struct rdma_state_qp *qp,
		       const uint64_t *pages);
void rdma_state_put_event(struct rdma_state_writer *w, const struct vrdma_event *ev);
void rdma_state_put_peer(struct rdma_state_writer *w, const struct rdma_state_peer *peer);
void rdma_state_put_cm_listen(struct rdma_state_writer *w, const struct rdma_state_cm_listen *l);
void rdma_state_put_cm_conn(struct rdma_state_writer *w, const struct rdma_state_cm_conn *c);
void rdma_state_put_cm_event(struct rdma_state_writer *w, const struct rdma_state_cm_event *e);
/* The state's bytes (g_free them). */
uint8_t *rdma_state_end(struct rdma_state_writer *w, size_t *ret_len);

#endif

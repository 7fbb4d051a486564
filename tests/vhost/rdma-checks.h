/* SPDX-License-Identifier: MIT */
/*
 * Checks the RDMA device tests share (cmocka assertions on top of
 * rdma-peer.h): byte patterns in guest and native buffers, the next
 * completion or event, and QPs connected to each other.  A failed check
 * fails the calling test.
 */
#ifndef VT_RDMA_CHECKS_H
#define VT_RDMA_CHECKS_H

#include <stdint.h>
#include <sys/types.h>

#include "rdma-peer.h"

/* Byte i of pattern seed. */
void rt_fill(uint8_t *p, size_t n, uint8_t seed);
void rt_guest_fill(struct rp_guest *p, uint64_t off, uint32_t len, uint8_t seed);
void rt_guest_expect(struct rp_guest *p, uint64_t off, const uint8_t *want, uint32_t len);
void rt_guest_expect_pattern(struct rp_guest *p, uint64_t off, uint32_t len, uint8_t seed);
void rt_native_expect_pattern(struct rp_native *n, uint64_t off, uint32_t len, uint8_t seed);
/* Nothing landed in the native peer's first len bytes. */
void rt_native_expect_zero(struct rp_native *n, uint32_t len);

/* Both sides to RTS, towards each other (RoCE v2). */
void rt_connect_pair(struct rp_guest *g, struct rp_native *n, uint8_t rnr_retry);
/* One WQE, with a doorbell. */
void rt_guest_post(struct rp_guest *g, const struct vgd_send *w);
/* The guest's next completion is wr_id with status (and opcode if it
 * succeeded), of its QP. */
void rt_guest_expect_cqe(struct rp_guest *g, uint64_t wr_id, uint32_t status, uint32_t opcode);
/* The next device event is exactly this one. */
void rt_expect_event(struct vgd *g, uint16_t type, uint32_t handle, uint32_t data);
/* No device event arrives within ms. */
void rt_expect_no_event(struct vgd *g, int ms);
/* INIT with only the state and access rights, as rdma_cm's iWARP-style
 * walk does: the device adds the port and P_Key index. */
void rt_guest_qp_init_cm(struct rp_guest *g);
/* The next CM event, of type want_type: drains CM_GET_EVENT, waiting for
 * the device's CM event record while there is none. */
void rt_guest_cm_event(struct rp_guest *g, uint16_t want_type, struct vrdma_cm_event *ret);

/* The host's objects of a kind (`rdma resource show KIND`: pd, mr, cq,
 * qp) that belong to process pid. */
int rt_host_objects(const char *kind, pid_t pid);

/*
 * The Soft-RoCE rig's variables (tests/rxe-vm/run): each of names[] (NULL-
 * terminated) into values[].  Outside the rig the program exits 77 with
 * why, or 1 where VRDMA_REQUIRE_RDMA says the rig must be there.
 */
void rt_require_rig(const char *const *names, const char **values);

#endif

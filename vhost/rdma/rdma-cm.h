/* SPDX-License-Identifier: MIT */
/*
 * Connection management's own types, shared by rdma-cm.c (connections on
 * the host's rdma_cm) and rdma-cm-move.c (connections across a migration).
 */
#ifndef VRDMA_RDMA_CM_H
#define VRDMA_RDMA_CM_H

#include <rdma/rdma_cma.h>

#include "rdma-internal.h"

enum cm_state {
	CM_RESOLVING_ADDR,
	CM_RESOLVING_ROUTE,
	CM_CONNECTING,
	CM_REQUESTED, /* a peer's request, waiting for the guest's answer */
	CM_CONNECTED,
	CM_CLOSING,   /* disconnect sent, waiting for the host's DISCONNECTED */
	CM_ENDED,     /* its final event waits for CM_GET_EVENT; the handle with it */
};

struct rdma_cm_conn {
	uint32_t handle;
	uint32_t listen; /* CM_REQUESTED: the listen it came in on */
	struct rdma_cm_id *id;
	struct rdma_qp *qp;
	enum cm_state state;
	/*
	 * A connection that outlived its host id: it moved with the guest, or
	 * its peer did (rdma-cm-move.c).  Its end is told to the peer's back
	 * end by the peer protocol, and the peer's reaches it the same way.
	 */
	bool detached;
	/* Both ends' addresses, as its events report them. */
	uint8_t local_ip[4], remote_ip[4];
	uint16_t local_port, remote_port;
	struct rdma_conn_param param; /* CM_RESOLVING_*: what to connect with */
	uint8_t pdata[VRDMA_CM_CONNECT_PDATA];
};

struct rdma_cm_listen {
	uint32_t handle;
	struct rdma_cm_id *id; /* NULL: its port was taken on a migration's destination */
	uint16_t port, backlog;
};

/*
 * A queued event; a connection's last one frees its handle when fetched.
 * Every queued event names a live handle, and a handle has at most two
 * (its opening one and its final one), so the queue never holds more than
 * twice the connection limit: a handle freed any other way (REJECT, a
 * failed ACCEPT) takes its waiting events with it (conn_free).
 */
struct cm_event_node {
	struct vrdma_cm_event ev;
	bool final;
};

/* rdma-cm.c */
/* Both ends' addresses as the host id has them now (a detached
 * connection keeps the last it had). */
void rdma_cm_conn_addresses(struct rdma_cm_conn *c);
/* An event as the connection stands now (not queued). */
void rdma_cm_event_fill(struct vrdma_cm_event *ev, uint16_t type, uint32_t status,
			struct rdma_cm_conn *c);
/* Queues it for the guest; the first one waiting rings the event queue. */
struct vrdma_cm_event *rdma_cm_queue_event(struct rdma_dev *d, uint16_t type, uint32_t status,
					   struct rdma_cm_conn *c, bool final);
/* The end of a connection, its QP to ERR and its final event queued;
 * returns the id for the caller to destroy (rdma_cm_id_destroy). */
struct rdma_cm_id *rdma_cm_conn_end(struct rdma_dev *d, struct rdma_cm_conn *c, uint32_t status,
				    const struct rdma_conn_param *reject);
void rdma_cm_id_destroy(struct rdma_cm_id *id);
/* A listen's host id on this function's address; -errno-style vrdma status. */
int rdma_cm_listen_on(struct rdma_dev *d, struct rdma_cm_listen *l);

/* rdma-cm-move.c */
/* A detached connection's end asked by its guest (DISCONNECT, or its QP
 * destroyed): the peer's back end is told, this side is CLOSED. */
void rdma_cm_detached_close(struct rdma_dev *d, struct rdma_cm_conn *c);
/* The device goes (not by a migration): each detached connection's peer
 * is told. */
void rdma_cm_detached_teardown(struct rdma_dev *d);

#endif

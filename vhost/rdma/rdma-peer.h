/* SPDX-License-Identifier: MIT */
/*
 * The peer protocol's two halves (docs/migration-rdma.md, "Peers
 * elsewhere"), private to rdma-peer.c (the peer's side: the listener and
 * what a request does) and rdma-peer-ask.c (the moving guest's side).
 */
#ifndef VRDMA_RDMA_PEER_H
#define VRDMA_RDMA_PEER_H

#include <netinet/in.h>

#include "rdma-internal.h"
#include "rdma-peer-wire.h"
#include "xport-tls.h"

/* Each step of a request (connect, handshake, one request and its reply)
 * at the most. */
#define RDMA_PEER_CALL_TIMEOUT_MS 3000
#define RDMA_PEER_MAX_CONNS 16u

struct peer_conn;

struct rdma_peer_srv {
	struct xport_auth *server, *client;
	uint16_t port;
	int epfd;
	int timer; /* ticks while connections are open */
	int listen[RDMA_MAX_TENANT_GIDS];
	unsigned int nlisten;
	struct peer_conn *conns[RDMA_PEER_MAX_CONNS];
};

/* A QP of any of this daemon's guests by its host number, or NULL. */
struct rdma_qp *rdma_peer_qp_by_host_qpn(struct rdma_shared *sh, uint32_t qpn);
/* The host QP's attributes, every one a connected QP has; -EIO. */
int rdma_peer_host_attr(struct rdma_qp *qp, struct ibv_qp_attr *ret);
/* What a decoded request does, asked from caller's address (a GID): the
 * reply's status, 0 or a positive errno. */
uint32_t rdma_peer_handle(struct rdma_shared *sh, const struct rdma_peer_request *req,
			  const struct rdma_peer_rkey *rkeys, const uint8_t caller[16]);
/* The IPv4 address of an IPv4-mapped GID, at port. */
void rdma_peer_sockaddr(const uint8_t gid[16], uint16_t port, struct sockaddr_in *ret);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Devices served on the vhost-user core.  A device type opens its shared
 * state once (a backing file, an entropy source) and makes one instance per
 * front-end connection.
 */
#ifndef VRDMA_VHOST_DEVICE_H
#define VRDMA_VHOST_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "vu.h"

struct prom;

struct vhost_device_args {
	const char *blk_file;
	bool read_only;
	unsigned int num_queues;
	const char *entropy_file;
	const char *ibdev; /* rdma: the tenant's host RDMA device */
	struct {
		uint32_t pds, mrs, cqs, qps;
		uint64_t pinned_bytes;
		uint64_t wrs;
		uint64_t maps; /* mappings of guest pages (one per run of pages) */
	} rdma_quota; /* rdma: per tenant, over all its connections */
	/* rdma: the GIDs (16 bytes each, IPv4 as ::ffff:a.b.c.d) the tenant
	 * may send from; none: the function's first RoCE v2 IPv4 GID. */
	const uint8_t (*rdma_gids)[16];
	unsigned int n_rdma_gids;
	unsigned int rdma_poll_us; /* rdma: spin on the send CQ after a doorbell */
	bool rdma_prefault; /* rdma: fill guest RAM's page tables at SET_MEM_TABLE */
	/* rdma: the peer protocol's port on the tenant's GIDs (0: off) and
	 * its pre-shared key file (docs/migration-rdma.md). */
	uint16_t rdma_peer_port;
	const char *rdma_peer_psk;
};

struct vhost_device_type {
	const char *name;
	/* --print-capabilities' "type": QEMU's VHostUserBackendType
	 * (docs/interop/vhost-user.json); NULL where it has none (name). */
	const char *vhost_user_type;
	/* Capability names for --print-capabilities (NULL-terminated). */
	const char *const *capabilities;
	int (*open)(const struct vhost_device_args *args, void **ret_shared);
	void (*close)(void *shared);
	/* Fills the ops for one connection and returns its instance. */
	int (*instance_new)(void *shared, struct vu_device_ops *ret_ops, void **ret_instance);
	void (*instance_free)(void *instance);
	/* Optional: an fd of the shared state to watch (-1: none), and what to
	 * run when it is readable (the host device's asynchronous events). */
	int (*shared_fd)(void *shared);
	void (*shared_ready)(void *shared);
	/* Optional: the device's own metrics (prom.h families), appended. */
	void (*metrics)(void *shared, struct prom *out);
};

extern const struct vhost_device_type vhost_blk_type;
extern const struct vhost_device_type vhost_rng_type;
extern const struct vhost_device_type vhost_rdma_type;

#endif

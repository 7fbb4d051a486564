// SPDX-License-Identifier: MIT
/*
 * Scrubbing a function between tenants.  What it can check is what the
 * kernel reports: RDMA objects held by user processes, and the identity the
 * PF hands the VF (MAC or GUIDs, link state, trust, spoof checking).  Device
 * memory contents and anything the VF's firmware keeps are the driver's
 * business (a VF is reset by its driver on FLR when the next user opens it).
 */
#include <errno.h>
#include <string.h>

#include "sriov-internal.h"

static bool any_left(const struct sriov_res_count *c)
{
	return c->ctx || c->pd || c->mr || c->cq || c->qp;
}

/* Identity first (it must succeed), then the settings some drivers lack. */
static int reset_vf(const struct sriov_ctx *ctx, const struct sriov_fn *fn)
{
	struct sriov_vf_cfg cfg = { .link_state = SRIOV_LINK_AUTO, .spoofchk = true };
	static const unsigned optional[] = { SRIOV_SET_LINK_STATE, SRIOV_SET_TRUST,
					     SRIOV_SET_SPOOFCHK };
	unsigned failed;
	int ifindex, r;

	r = sriov_pf_ifindex(ctx->sysfs_root, fn->pf, &ifindex);
	if (r < 0)
		return r;
	if (fn->infiniband) {
		cfg.set = SRIOV_SET_NODE_GUID | SRIOV_SET_PORT_GUID;
		cfg.node_guid = sriov_random_guid();
		cfg.port_guid = sriov_random_guid();
	} else {
		cfg.set = SRIOV_SET_MAC;
		sriov_random_mac(cfg.mac);
	}
	r = sriov_vf_configure(ctx->nl, ifindex, (unsigned)fn->vf_index, &cfg, &failed);
	for (size_t i = 0; r == 0 && i < G_N_ELEMENTS(optional); i++) {
		/* An InfiniBand VF has no spoof checking. */
		if (fn->infiniband && optional[i] == SRIOV_SET_SPOOFCHK)
			continue;
		cfg.set = optional[i];
		r = sriov_vf_configure(ctx->nl, ifindex, (unsigned)fn->vf_index, &cfg, &failed);
		if (r == -EOPNOTSUPP)
			r = 0;
	}
	return r;
}

bool sriov_scrub_possible(const struct sriov_fn *fn)
{
	/* A VF's identity is set through its PF.  Anything else has only its
	 * netdev's MAC; IPoIB's address is the port's GID, not settable. */
	return fn->kind == SRIOV_VF || (fn->netdev[0] && !fn->infiniband);
}

static int reset_netdev(const struct sriov_ctx *ctx, const struct sriov_fn *fn)
{
	uint8_t mac[6];
	int ifindex, r;

	/* Nothing could be changed: "scrubbed" would be a lie. */
	if (!sriov_scrub_possible(fn))
		return -EOPNOTSUPP;
	r = sriov_netdev_ifindex(ctx->sysfs_root, fn->netdev, &ifindex);
	if (r < 0)
		return r;
	sriov_random_mac(mac);
	return sriov_netdev_set_mac(ctx->nl, ifindex, mac);
}

int sriov_scrub(const struct sriov_ctx *ctx, const struct sriov_fn *fn,
		struct sriov_res_count *ret_left)
{
	struct sriov_res_count left = { 0 };
	int r;

	if (ret_left)
		*ret_left = left;
	if (fn->status < 0)
		return fn->status;
	if (fn->ibdev[0]) {
		r = sriov_rdma_user_resources(ctx->nl, fn->ibdev, &left);
		if (r < 0)
			return r;
		if (ret_left)
			*ret_left = left;
		if (any_left(&left))
			return -EBUSY;
	}
	if (fn->kind == SRIOV_VF)
		return reset_vf(ctx, fn);
	return reset_netdev(ctx, fn);
}

// SPDX-License-Identifier: MIT
/*
 * "Is anything of the old tenant left on this device?", asked the RDMA
 * netlink (NETLINK_RDMA, nldev): one resource dump per type, counting every
 * entry that does not carry a kernel name.  Kernel-owned entries (the GSI QP
 * and its PD and CQs, which every device has) carry one; user entries carry
 * a PID, except when their creating task was reaped (objects can outlive it,
 * e.g. through a passed uverbs fd) or lives in a PID namespace hidden from
 * us, so "has a PID" would miss exactly those.
 */
#include <errno.h>
#include <netlink/netlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <rdma/rdma_netlink.h>
#include <string.h>

#include "sriov-internal.h"

#ifndef NETLINK_RDMA
#define NETLINK_RDMA 20
#endif

struct dev_lookup {
	const char *name;
	int index; /* -1 until found */
};

struct res_type {
	int cmd;
	int table;
	int entry;
};

static const struct res_type res_types[] = {
	{ RDMA_NLDEV_CMD_RES_CTX_GET, RDMA_NLDEV_ATTR_RES_CTX, RDMA_NLDEV_ATTR_RES_CTX_ENTRY },
	{ RDMA_NLDEV_CMD_RES_PD_GET, RDMA_NLDEV_ATTR_RES_PD, RDMA_NLDEV_ATTR_RES_PD_ENTRY },
	{ RDMA_NLDEV_CMD_RES_MR_GET, RDMA_NLDEV_ATTR_RES_MR, RDMA_NLDEV_ATTR_RES_MR_ENTRY },
	{ RDMA_NLDEV_CMD_RES_CQ_GET, RDMA_NLDEV_ATTR_RES_CQ, RDMA_NLDEV_ATTR_RES_CQ_ENTRY },
	{ RDMA_NLDEV_CMD_RES_QP_GET, RDMA_NLDEV_ATTR_RES_QP, RDMA_NLDEV_ATTR_RES_QP_ENTRY },
};

struct res_dump {
	const struct res_type *type;
	uint32_t index;
	unsigned count;
};

static bool attr_u32(const struct nlattr *a, uint32_t *ret)
{
	if (!a || nla_len(a) < (int)sizeof(uint32_t))
		return false;
	*ret = nla_get_u32((struct nlattr *)a);
	return true;
}

/* A string attribute that really holds a NUL inside its length. */
static const char *attr_str(const struct nlattr *a)
{
	if (!a || nla_len(a) < 1 || !memchr(nla_data(a), '\0', (size_t)nla_len(a)))
		return NULL;
	return nla_data(a);
}

static struct nlattr *msg_find(struct nl_msg *msg, int type)
{
	struct nlmsghdr *h = nlmsg_hdr(msg);

	return nla_find(nlmsg_attrdata(h, 0), nlmsg_attrlen(h, 0), type);
}

static int on_dev(struct nl_msg *msg, void *arg)
{
	struct dev_lookup *d = arg;
	const char *name = attr_str(msg_find(msg, RDMA_NLDEV_ATTR_DEV_NAME));
	uint32_t index;

	if (name && !strcmp(name, d->name) &&
	    attr_u32(msg_find(msg, RDMA_NLDEV_ATTR_DEV_INDEX), &index) && index <= INT32_MAX)
		d->index = (int)index;
	return 0;
}

static int on_res(struct nl_msg *msg, void *arg)
{
	struct res_dump *d = arg;
	struct nlattr *table = msg_find(msg, d->type->table);
	struct nlattr *entry;
	uint32_t index;
	int rem;

	if (!attr_u32(msg_find(msg, RDMA_NLDEV_ATTR_DEV_INDEX), &index) || index != d->index)
		return -EBADMSG;
	if (!table)
		return 0;
	nla_for_each_nested(entry, table, rem) {
		if (nla_type(entry) != d->type->entry)
			continue;
		if (!nla_find(nla_data(entry), nla_len(entry), RDMA_NLDEV_ATTR_RES_KERN_NAME))
			d->count++;
	}
	return 0;
}

static int dump(const struct sriov_nl_ops *ops, int cmd, int dev_index,
		int (*on_reply)(struct nl_msg *, void *), void *arg)
{
	struct nl_msg *msg = nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd),
						NLM_F_REQUEST | NLM_F_DUMP);
	int r;

	if (!msg)
		return -ENOMEM;
	if (dev_index >= 0 && nla_put_u32(msg, RDMA_NLDEV_ATTR_DEV_INDEX, (uint32_t)dev_index)) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	r = ops->transact(ops->opaque, NETLINK_RDMA, msg, on_reply, arg);
	nlmsg_free(msg);
	return r;
}

int sriov_rdma_user_resources(const struct sriov_nl_ops *ops, const char *ibdev,
			      struct sriov_res_count *ret_count)
{
	struct dev_lookup dev = { .name = ibdev, .index = -1 };
	struct sriov_res_count count = { 0 };
	/* In the order of res_types. */
	unsigned *const slots[] = { &count.ctx, &count.pd, &count.mr, &count.cq, &count.qp };
	int r;

	G_STATIC_ASSERT(G_N_ELEMENTS(slots) == G_N_ELEMENTS(res_types));

	if (!sriov_name_valid(ibdev))
		return -EINVAL;
	/* The resource dumps want the index, only the device dump has names. */
	r = dump(ops, RDMA_NLDEV_CMD_GET, -1, on_dev, &dev);
	if (r < 0)
		return r;
	if (dev.index < 0)
		return -ENODEV;
	for (size_t i = 0; i < G_N_ELEMENTS(res_types); i++) {
		struct res_dump d = { .type = &res_types[i], .index = (uint32_t)dev.index };

		r = dump(ops, d.type->cmd, dev.index, on_res, &d);
		if (r < 0)
			return r;
		*slots[i] = d.count;
	}
	*ret_count = count;
	return 0;
}

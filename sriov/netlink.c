// SPDX-License-Identifier: MIT
/*
 * Netlink through libnl: VF settings go to the PF's netdev as rtnl_link VF
 * attributes (RTM_NEWLINK + IFLA_VFINFO_LIST), built by libnl-route.  The
 * send step is sriov_nl_ops.transact so that tests see every message.
 */
#include <errno.h>
#include <linux/if_link.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/link/sriov.h>
#include <string.h>
#include <sys/random.h>

#include "sriov-internal.h"

struct transact_state {
	int (*on_reply)(struct nl_msg *reply, void *arg);
	void *arg;
	int err; /* first error: the kernel's or on_reply's */
};

static int on_valid(struct nl_msg *msg, void *opaque)
{
	struct transact_state *st = opaque;
	int r;

	if (!st->on_reply || st->err)
		return NL_OK;
	r = st->on_reply(msg, st->arg);
	if (r < 0)
		st->err = r;
	return NL_OK; /* drain the rest of a dump either way */
}

static int on_error(struct sockaddr_nl *who, struct nlmsgerr *e, void *opaque)
{
	struct transact_state *st = opaque;

	(void)who;
	if (!st->err)
		st->err = e->error < 0 ? e->error : -EPROTO;
	return NL_STOP;
}

static int kernel_transact(void *opaque, int protocol, struct nl_msg *req,
			   int (*on_reply)(struct nl_msg *reply, void *arg), void *arg)
{
	struct transact_state st = { .on_reply = on_reply, .arg = arg };
	struct nl_sock *sk = nl_socket_alloc();
	struct nlmsghdr *hdr = nlmsg_hdr(req);
	int r;

	(void)opaque;
	if (!sk)
		return -ENOMEM;
	/* A dump ends with NLMSG_DONE; anything else must be acked. */
	if (!(hdr->nlmsg_flags & NLM_F_DUMP))
		hdr->nlmsg_flags |= NLM_F_ACK;
	nl_socket_disable_auto_ack(sk);
	r = nl_connect(sk, protocol);
	if (r < 0) {
		/* libnl hides the errno; for NETLINK_RDMA the usual reason is a
		 * kernel without CONFIG_INFINIBAND.  Every kernel has
		 * NETLINK_ROUTE: a failure there is not "no RDMA netlink". */
		nl_socket_free(sk);
		if (r == -NLE_NOMEM)
			return -ENOMEM;
		return protocol == NETLINK_ROUTE ? -EIO : -EPROTONOSUPPORT;
	}
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, on_valid, &st);
	nl_socket_modify_err_cb(sk, NL_CB_CUSTOM, on_error, &st);
	r = nl_send_auto(sk, req);
	if (r >= 0)
		r = nl_recvmsgs_default(sk);
	nl_socket_free(sk);
	if (st.err)
		return st.err;
	return r < 0 ? -EIO : 0;
}

const struct sriov_nl_ops sriov_nl_kernel = { .transact = kernel_transact };

static void put_vf(struct rtnl_link_vf **vf)
{
	if (*vf)
		rtnl_link_vf_put(*vf);
}

static void put_link(struct rtnl_link **link)
{
	if (*link)
		rtnl_link_put(*link);
}

static void put_addr(struct nl_addr **a)
{
	if (*a)
		nl_addr_put(*a);
}

/* One setting of one VF: a link object carrying a single VF entry. */
static int build_vf_msg(int ifindex, unsigned vf_index, const struct sriov_vf_cfg *cfg,
			unsigned bit, struct nl_msg **ret_msg)
{
	__attribute__((cleanup(put_link))) struct rtnl_link *link = rtnl_link_alloc();
	__attribute__((cleanup(put_vf))) struct rtnl_link_vf *vf = rtnl_link_vf_alloc();
	__attribute__((cleanup(put_addr))) struct nl_addr *mac = NULL;
	static const uint32_t link_states[] = {
		[SRIOV_LINK_AUTO] = IFLA_VF_LINK_STATE_AUTO,
		[SRIOV_LINK_ENABLE] = IFLA_VF_LINK_STATE_ENABLE,
		[SRIOV_LINK_DISABLE] = IFLA_VF_LINK_STATE_DISABLE,
	};

	if (!link || !vf)
		return -ENOMEM;
	rtnl_link_set_ifindex(link, ifindex);
	rtnl_link_vf_set_index(vf, vf_index);
	switch (bit) {
	case SRIOV_SET_MAC:
		mac = nl_addr_build(AF_LLC, cfg->mac, sizeof(cfg->mac));
		if (!mac)
			return -ENOMEM;
		rtnl_link_vf_set_addr(vf, mac);
		break;
	case SRIOV_SET_TRUST: rtnl_link_vf_set_trust(vf, cfg->trust); break;
	case SRIOV_SET_SPOOFCHK: rtnl_link_vf_set_spoofchk(vf, cfg->spoofchk); break;
	case SRIOV_SET_LINK_STATE:
		if ((unsigned)cfg->link_state >= G_N_ELEMENTS(link_states))
			return -EINVAL;
		rtnl_link_vf_set_linkstate(vf, link_states[cfg->link_state]);
		break;
	case SRIOV_SET_NODE_GUID: rtnl_link_vf_set_ib_node_guid(vf, cfg->node_guid); break;
	case SRIOV_SET_PORT_GUID: rtnl_link_vf_set_ib_port_guid(vf, cfg->port_guid); break;
	default: return -EINVAL;
	}
	if (rtnl_link_vf_add(link, vf) < 0)
		return -ENOMEM;
	return rtnl_link_build_change_request(link, link, 0, ret_msg) < 0 ? -ENOMEM : 0;
}

int sriov_vf_configure(const struct sriov_nl_ops *ops, int pf_ifindex, unsigned vf_index,
		       const struct sriov_vf_cfg *cfg, unsigned *ret_failed)
{
	*ret_failed = 0;
	if (pf_ifindex <= 0 || cfg->set >= SRIOV_SET_PORT_GUID << 1)
		return -EINVAL;
	for (unsigned bit = SRIOV_SET_MAC; bit <= SRIOV_SET_PORT_GUID; bit <<= 1) {
		struct nl_msg *msg = NULL;
		int r;

		if (!(cfg->set & bit))
			continue;
		r = build_vf_msg(pf_ifindex, vf_index, cfg, bit, &msg);
		if (r == 0)
			r = ops->transact(ops->opaque, NETLINK_ROUTE, msg, NULL, NULL);
		nlmsg_free(msg);
		if (r < 0) {
			*ret_failed = bit;
			return r;
		}
	}
	return 0;
}

int sriov_netdev_set_mac(const struct sriov_nl_ops *ops, int ifindex, const uint8_t mac[6])
{
	__attribute__((cleanup(put_link))) struct rtnl_link *link = rtnl_link_alloc();
	__attribute__((cleanup(put_addr))) struct nl_addr *addr = nl_addr_build(AF_LLC, mac, 6);
	struct nl_msg *msg = NULL;
	int r;

	if (ifindex <= 0)
		return -EINVAL;
	if (!link || !addr)
		return -ENOMEM;
	rtnl_link_set_ifindex(link, ifindex);
	rtnl_link_set_addr(link, addr);
	if (rtnl_link_build_change_request(link, link, 0, &msg) < 0)
		return -ENOMEM;
	r = ops->transact(ops->opaque, NETLINK_ROUTE, msg, NULL, NULL);
	nlmsg_free(msg);
	return r;
}

int sriov_netdev_ifindex(const char *sysfs_root, const char *netdev, int *ret_ifindex)
{
	g_autofree char *path = NULL;
	unsigned long v;
	int r;

	if (!sriov_name_valid(netdev))
		return -EINVAL;
	path = g_build_filename(sysfs_root, "class/net", netdev, "ifindex", NULL);
	r = sriov_read_uint(path, INT32_MAX, &v);
	if (r < 0)
		return r;
	if (v == 0)
		return -EBADMSG;
	*ret_ifindex = (int)v;
	return 0;
}

int sriov_pf_ifindex(const char *sysfs_root, const char *pf, int *ret_ifindex)
{
	g_autofree char *dir = NULL;
	g_autoptr(GPtrArray) names = NULL;
	int r;

	if (!sriov_pci_valid(pf))
		return -EINVAL;
	dir = g_build_filename(sysfs_root, "bus/pci/devices", pf, "net", NULL);
	r = sriov_list_dir(dir, sriov_name_valid, &names);
	if (r < 0)
		return r == -ENOENT ? -ENODEV : r;
	if (names->len == 0)
		return -ENODEV;
	/* A multi-port PF's VFs hang off its first port's netdev. */
	return sriov_netdev_ifindex(sysfs_root, names->pdata[0], ret_ifindex);
}

static void random_bytes(void *buf, size_t len)
{
	/* getrandom() of at most 256 bytes does not fail once the pool is up;
	 * fall back to GLib's generator rather than hand out zeros. */
	if (getrandom(buf, len, 0) == (ssize_t)len)
		return;
	for (size_t i = 0; i < len; i++)
		((uint8_t *)buf)[i] = (uint8_t)g_random_int();
}

void sriov_random_mac(uint8_t ret_mac[6])
{
	random_bytes(ret_mac, 6);
	ret_mac[0] = (uint8_t)((ret_mac[0] & 0xfe) | 0x02); /* unicast, locally administered */
}

uint64_t sriov_random_guid(void)
{
	uint64_t g = 0;

	while (g == 0 || g == UINT64_MAX) /* both mean "unset" to drivers */
		random_bytes(&g, sizeof(g));
	return g;
}

// SPDX-License-Identifier: MIT
/*
 * Unit tests of sriov/netlink.c and rdma-res.c with the send step replaced:
 * every rtnetlink request is captured and taken apart attribute by
 * attribute; RDMA netlink dumps are answered with hand-built replies that
 * mix user and kernel resources, split over several messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <rdma/rdma_netlink.h>

#include "sriov-internal.h"

#ifndef NETLINK_RDMA
#define NETLINK_RDMA 20
#endif

#define PF_IFINDEX 7
#define RXE_INDEX 3

struct fake_nl {
	GPtrArray *sent;     /* copies of the request (struct nlmsghdr + payload) */
	int fail_at;         /* fail the Nth request (0-based), -1: never */
	int fail_err;
	unsigned user[5];    /* user-owned entries per resource dump (ctx pd mr cq qp) */
	unsigned kernel[5];  /* kernel-owned entries */
	unsigned orphan[5];  /* user entries whose creator was reaped: no PID */
	uint32_t reply_index; /* device index the resource replies claim */
};

static int fake_transact(void *opaque, int protocol, struct nl_msg *req,
			 int (*on_reply)(struct nl_msg *, void *), void *arg);

static struct nlmsghdr *sent(struct fake_nl *f, guint i)
{
	assert_true(i < f->sent->len);
	return f->sent->pdata[i];
}

/* ---- rtnetlink: VF settings ---- */

/* The single IFLA_VF_INFO of a captured request, parsed; checks the
 * envelope (RTM_NEWLINK/SETLINK for PF_IFINDEX, nothing but the VF list). */
static void vf_attrs(struct nlmsghdr *h, struct nlattr **vf)
{
	struct nlattr *tb[IFLA_MAX + 1], *info;
	struct ifinfomsg *ifi = nlmsg_data(h);
	int rem, n = 0;

	assert_true(h->nlmsg_type == RTM_NEWLINK || h->nlmsg_type == RTM_SETLINK);
	/* RTM_NEWLINK with any of these would create or replace a link. */
	assert_int_equal(h->nlmsg_flags & (NLM_F_CREATE | NLM_F_EXCL | NLM_F_REPLACE), 0);
	assert_int_equal(ifi->ifi_index, PF_IFINDEX);
	assert_int_equal(nlmsg_parse(h, sizeof(*ifi), tb, IFLA_MAX, NULL), 0);
	assert_non_null(tb[IFLA_VFINFO_LIST]);
	for (int a = 0; a <= IFLA_MAX; a++)
		assert_true(!tb[a] || a == IFLA_VFINFO_LIST);
	nla_for_each_nested(info, tb[IFLA_VFINFO_LIST], rem) {
		assert_int_equal(nla_type(info), IFLA_VF_INFO);
		assert_int_equal(nla_parse_nested(vf, IFLA_VF_MAX, info, NULL), 0);
		n++;
	}
	assert_int_equal(n, 1);
}

/* The only attribute set in @vf is @type, of @len bytes; returns it. */
static void *only_attr(struct nlattr **vf, int type, int len)
{
	for (int a = 0; a <= IFLA_VF_MAX; a++)
		if (a != type && vf[a])
			fail_msg("unexpected VF attribute %d next to %d", a, type);
	assert_non_null(vf[type]);
	assert_int_equal(nla_len(vf[type]), len);
	return nla_data(vf[type]);
}

static void test_vf_every_setting(void **state)
{
	struct fake_nl *f = *state;
	const struct sriov_nl_ops ops = { fake_transact, f };
	struct sriov_vf_cfg cfg = {
		.set = SRIOV_SET_MAC | SRIOV_SET_TRUST | SRIOV_SET_SPOOFCHK | SRIOV_SET_LINK_STATE |
		       SRIOV_SET_NODE_GUID | SRIOV_SET_PORT_GUID,
		.mac = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 },
		.trust = true,
		.spoofchk = false,
		.link_state = SRIOV_LINK_DISABLE,
		.node_guid = 0x0011223344556677ull,
		.port_guid = 0x8899aabbccddeeffull,
	};
	struct nlattr *vf[IFLA_VF_MAX + 1];
	struct ifla_vf_mac *mac;
	struct ifla_vf_trust *trust;
	struct ifla_vf_spoofchk *spoof;
	struct ifla_vf_link_state *ls;
	struct ifla_vf_guid guid; /* 8-byte aligned, unlike netlink payloads */
	unsigned failed = 99;

	assert_int_equal(sriov_vf_configure(&ops, PF_IFINDEX, 2, &cfg, &failed), 0);
	assert_int_equal(failed, 0);
	assert_int_equal(f->sent->len, 6); /* one request per setting, in order */

	vf_attrs(sent(f, 0), vf);
	mac = only_attr(vf, IFLA_VF_MAC, sizeof(*mac));
	assert_int_equal(mac->vf, 2);
	assert_memory_equal(mac->mac, cfg.mac, 6);

	vf_attrs(sent(f, 1), vf);
	trust = only_attr(vf, IFLA_VF_TRUST, sizeof(*trust));
	assert_int_equal(trust->vf, 2);
	assert_int_equal(trust->setting, 1);

	vf_attrs(sent(f, 2), vf);
	spoof = only_attr(vf, IFLA_VF_SPOOFCHK, sizeof(*spoof));
	assert_int_equal(spoof->vf, 2);
	assert_int_equal(spoof->setting, 0);

	vf_attrs(sent(f, 3), vf);
	ls = only_attr(vf, IFLA_VF_LINK_STATE, sizeof(*ls));
	assert_int_equal(ls->vf, 2);
	assert_int_equal(ls->link_state, IFLA_VF_LINK_STATE_DISABLE);

	vf_attrs(sent(f, 4), vf);
	memcpy(&guid, only_attr(vf, IFLA_VF_IB_NODE_GUID, sizeof(guid)), sizeof(guid));
	assert_int_equal(guid.vf, 2);
	assert_true(guid.guid == cfg.node_guid);

	vf_attrs(sent(f, 5), vf);
	memcpy(&guid, only_attr(vf, IFLA_VF_IB_PORT_GUID, sizeof(guid)), sizeof(guid));
	assert_int_equal(guid.vf, 2);
	assert_true(guid.guid == cfg.port_guid);
}

static void test_vf_link_states(void **state)
{
	struct fake_nl *f = *state;
	const struct sriov_nl_ops ops = { fake_transact, f };
	static const uint32_t want[] = { IFLA_VF_LINK_STATE_AUTO, IFLA_VF_LINK_STATE_ENABLE,
					 IFLA_VF_LINK_STATE_DISABLE };
	struct nlattr *vf[IFLA_VF_MAX + 1];
	unsigned failed;

	for (unsigned i = 0; i < 3; i++) {
		struct sriov_vf_cfg cfg = { .set = SRIOV_SET_LINK_STATE, .link_state = i };
		struct ifla_vf_link_state *ls;

		assert_int_equal(sriov_vf_configure(&ops, PF_IFINDEX, 11, &cfg, &failed), 0);
		vf_attrs(sent(f, i), vf);
		ls = only_attr(vf, IFLA_VF_LINK_STATE, sizeof(*ls));
		assert_int_equal(ls->vf, 11);
		assert_int_equal(ls->link_state, want[i]);
	}
}

static void test_vf_failure_names_setting(void **state)
{
	struct fake_nl *f = *state;
	const struct sriov_nl_ops ops = { fake_transact, f };
	struct sriov_vf_cfg cfg = { .set = SRIOV_SET_MAC | SRIOV_SET_TRUST | SRIOV_SET_SPOOFCHK };
	unsigned failed = 0;

	f->fail_at = 1;
	f->fail_err = -EOPNOTSUPP;
	assert_int_equal(sriov_vf_configure(&ops, PF_IFINDEX, 0, &cfg, &failed), -EOPNOTSUPP);
	assert_int_equal(failed, SRIOV_SET_TRUST);
	assert_int_equal(f->sent->len, 2); /* stopped at the failing one */
	assert_int_equal(sriov_vf_configure(&ops, 0, 0, &cfg, &failed), -EINVAL);
	cfg.set = 1u << 12;
	assert_int_equal(sriov_vf_configure(&ops, PF_IFINDEX, 0, &cfg, &failed), -EINVAL);
}

static void test_netdev_mac(void **state)
{
	struct fake_nl *f = *state;
	const struct sriov_nl_ops ops = { fake_transact, f };
	uint8_t mac[6];
	struct nlattr *tb[IFLA_MAX + 1];
	struct nlmsghdr *h;

	sriov_random_mac(mac);
	assert_int_equal(sriov_netdev_set_mac(&ops, 42, mac), 0);
	h = sent(f, 0);
	assert_int_equal(((struct ifinfomsg *)nlmsg_data(h))->ifi_index, 42);
	assert_int_equal(nlmsg_parse(h, sizeof(struct ifinfomsg), tb, IFLA_MAX, NULL), 0);
	assert_non_null(tb[IFLA_ADDRESS]);
	assert_int_equal(nla_len(tb[IFLA_ADDRESS]), 6);
	assert_memory_equal(nla_data(tb[IFLA_ADDRESS]), mac, 6);
	for (int a = 0; a <= IFLA_MAX; a++)
		assert_true(!tb[a] || a == IFLA_ADDRESS);
	assert_int_equal(sriov_netdev_set_mac(&ops, 0, mac), -EINVAL);
}

static void test_random_identity(void **state)
{
	uint8_t a[6], b[6];

	(void)state;
	for (int i = 0; i < 200; i++) {
		sriov_random_mac(a);
		assert_int_equal(a[0] & 0x01, 0); /* unicast */
		assert_int_equal(a[0] & 0x02, 0x02); /* locally administered */
	}
	sriov_random_mac(b);
	assert_memory_not_equal(a, b, 6);
	assert_true(sriov_random_guid() != sriov_random_guid());
}

/* ---- RDMA netlink: resources left ---- */

static struct nl_msg *new_reply(int cmd)
{
	struct nl_msg *m = nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd), NLM_F_MULTI);

	assert_non_null(m);
	return m;
}

static void reply_devices(int (*on_reply)(struct nl_msg *, void *), void *arg)
{
	static const struct { uint32_t index; const char *name; } devs[] = {
		{ 0, "mlx5_0" }, { RXE_INDEX, "rxe0" }, { 4, "rxe" },
	};

	for (size_t i = 0; i < G_N_ELEMENTS(devs); i++) {
		struct nl_msg *m = new_reply(RDMA_NLDEV_CMD_GET);

		nla_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, devs[i].index);
		nla_put_string(m, RDMA_NLDEV_ATTR_DEV_NAME, devs[i].name);
		assert_int_equal(on_reply(m, arg), 0);
		nlmsg_free(m);
	}
}

static const struct { int cmd, table, entry; } res_cmds[5] = {
	{ RDMA_NLDEV_CMD_RES_CTX_GET, RDMA_NLDEV_ATTR_RES_CTX, RDMA_NLDEV_ATTR_RES_CTX_ENTRY },
	{ RDMA_NLDEV_CMD_RES_PD_GET, RDMA_NLDEV_ATTR_RES_PD, RDMA_NLDEV_ATTR_RES_PD_ENTRY },
	{ RDMA_NLDEV_CMD_RES_MR_GET, RDMA_NLDEV_ATTR_RES_MR, RDMA_NLDEV_ATTR_RES_MR_ENTRY },
	{ RDMA_NLDEV_CMD_RES_CQ_GET, RDMA_NLDEV_ATTR_RES_CQ, RDMA_NLDEV_ATTR_RES_CQ_ENTRY },
	{ RDMA_NLDEV_CMD_RES_QP_GET, RDMA_NLDEV_ATTR_RES_QP, RDMA_NLDEV_ATTR_RES_QP_ENTRY },
};

/* Two messages per dump (as a paged dump would): user entries in the
 * first, kernel entries (and one more user entry) in the second. */
static int reply_resources(struct fake_nl *f, int k,
			   int (*on_reply)(struct nl_msg *, void *), void *arg)
{
	unsigned user_first = f->user[k] ? f->user[k] - 1 : 0;
	int r;

	for (int part = 0; part < 2; part++) {
		struct nl_msg *m = new_reply(res_cmds[k].cmd);
		struct nlattr *table, *e;
		unsigned users = part == 0 ? user_first : f->user[k] - user_first;

		nla_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, f->reply_index);
		nla_put_string(m, RDMA_NLDEV_ATTR_DEV_NAME, "rxe0");
		table = nla_nest_start(m, res_cmds[k].table);
		for (unsigned i = 0; i < users; i++) {
			e = nla_nest_start(m, res_cmds[k].entry);
			nla_put_u32(m, RDMA_NLDEV_ATTR_RES_PID, 1000 + i);
			nla_nest_end(m, e);
		}
		for (unsigned i = 0; part == 1 && i < f->kernel[k]; i++) {
			e = nla_nest_start(m, res_cmds[k].entry);
			nla_put_string(m, RDMA_NLDEV_ATTR_RES_KERN_NAME, "ib_core");
			nla_nest_end(m, e);
		}
		for (unsigned i = 0; part == 1 && i < f->orphan[k]; i++) {
			e = nla_nest_start(m, res_cmds[k].entry);
			nla_put_u32(m, RDMA_NLDEV_ATTR_RES_LQPN, 100 + i);
			nla_nest_end(m, e);
		}
		nla_nest_end(m, table);
		r = on_reply(m, arg);
		nlmsg_free(m);
		/* like the real transact(): the first on_reply error */
		if (r < 0)
			return r;
	}
	return 0;
}

static int rdma_reply(struct fake_nl *f, struct nlmsghdr *h,
		      int (*on_reply)(struct nl_msg *, void *), void *arg)
{
	int cmd = RDMA_NL_GET_OP(h->nlmsg_type);
	struct nlattr *idx = nla_find(nlmsg_attrdata(h, 0), nlmsg_attrlen(h, 0),
				      RDMA_NLDEV_ATTR_DEV_INDEX);

	assert_int_equal(RDMA_NL_GET_CLIENT(h->nlmsg_type), RDMA_NL_NLDEV);
	assert_true(h->nlmsg_flags & NLM_F_DUMP);
	if (cmd == RDMA_NLDEV_CMD_GET) {
		assert_null(idx);
		reply_devices(on_reply, arg);
		return 0;
	}
	/* The resource dumps name the device by index. */
	assert_non_null(idx);
	assert_int_equal(nla_get_u32(idx), RXE_INDEX);
	for (int k = 0; k < 5; k++)
		if (res_cmds[k].cmd == cmd)
			return reply_resources(f, k, on_reply, arg);
	fail_msg("unexpected RDMA netlink command %d", cmd);
	return -EINVAL;
}

static int fake_transact(void *opaque, int protocol, struct nl_msg *req,
			 int (*on_reply)(struct nl_msg *, void *), void *arg)
{
	struct fake_nl *f = opaque;
	struct nlmsghdr *h = nlmsg_hdr(req);
	int r = 0;

	g_ptr_array_add(f->sent, g_memdup2(h, h->nlmsg_len));
	if (f->fail_at == (int)f->sent->len - 1)
		return f->fail_err;
	if (protocol == NETLINK_RDMA)
		r = rdma_reply(f, h, on_reply, arg);
	else
		assert_int_equal(protocol, NETLINK_ROUTE);
	return r;
}

static void test_rdma_counts_user_only(void **state)
{
	struct fake_nl *f = *state;
	const struct sriov_nl_ops ops = { fake_transact, f };
	struct sriov_res_count c;

	memcpy(f->user, (unsigned[]){ 1, 2, 3, 4, 5 }, sizeof(f->user));
	memcpy(f->kernel, (unsigned[]){ 0, 1, 0, 2, 1 }, sizeof(f->kernel));
	assert_int_equal(sriov_rdma_user_resources(&ops, "rxe0", &c), 0);
	assert_int_equal(c.ctx, 1);
	assert_int_equal(c.pd, 2);
	assert_int_equal(c.mr, 3);
	assert_int_equal(c.cq, 4);
	assert_int_equal(c.qp, 5);
	assert_int_equal(f->sent->len, 6); /* device dump + 5 resource dumps */
}

static void test_rdma_kernel_only_is_clean(void **state)
{
	struct fake_nl *f = *state;
	const struct sriov_nl_ops ops = { fake_transact, f };
	struct sriov_res_count c = { 9, 9, 9, 9, 9 };

	memcpy(f->kernel, (unsigned[]){ 0, 1, 0, 2, 1 }, sizeof(f->kernel));
	assert_int_equal(sriov_rdma_user_resources(&ops, "rxe0", &c), 0);
	assert_int_equal(c.ctx + c.pd + c.mr + c.cq + c.qp, 0);
}

/* The kernel omits the PID of an object whose creating task is gone (or
 * hidden in another PID namespace): still a user's, still counted. */
static void test_rdma_counts_orphans(void **state)
{
	struct fake_nl *f = *state;
	const struct sriov_nl_ops ops = { fake_transact, f };
	struct sriov_res_count c;

	memcpy(f->kernel, (unsigned[]){ 0, 1, 0, 2, 1 }, sizeof(f->kernel));
	memcpy(f->orphan, (unsigned[]){ 1, 1, 2, 0, 3 }, sizeof(f->orphan));
	assert_int_equal(sriov_rdma_user_resources(&ops, "rxe0", &c), 0);
	assert_int_equal(c.ctx, 1);
	assert_int_equal(c.pd, 1);
	assert_int_equal(c.mr, 2);
	assert_int_equal(c.cq, 0);
	assert_int_equal(c.qp, 3);
}

static void test_rdma_errors(void **state)
{
	struct fake_nl *f = *state;
	const struct sriov_nl_ops ops = { fake_transact, f };
	struct sriov_res_count c;

	/* no such device */
	assert_int_equal(sriov_rdma_user_resources(&ops, "mlx5_9", &c), -ENODEV);
	assert_int_equal(sriov_rdma_user_resources(&ops, "bad/name", &c), -EINVAL);
	/* a reply about another device is not believed */
	f->reply_index = 0;
	assert_int_equal(sriov_rdma_user_resources(&ops, "rxe0", &c), -EBADMSG);
	/* kernel without RDMA netlink */
	f->reply_index = RXE_INDEX;
	f->fail_at = (int)f->sent->len;
	f->fail_err = -EPROTONOSUPPORT;
	assert_int_equal(sriov_rdma_user_resources(&ops, "rxe0", &c), -EPROTONOSUPPORT);
	/* failure in the middle of the resource dumps */
	f->fail_at = (int)f->sent->len + 3;
	f->fail_err = -EIO;
	assert_int_equal(sriov_rdma_user_resources(&ops, "rxe0", &c), -EIO);
}

static int setup(void **state)
{
	struct fake_nl *f = g_new0(struct fake_nl, 1);

	f->sent = g_ptr_array_new_with_free_func(g_free);
	f->fail_at = -1;
	f->reply_index = RXE_INDEX;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fake_nl *f = *state;

	g_ptr_array_unref(f->sent);
	g_free(f);
	return 0;
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_vf_every_setting),   T(test_vf_link_states),
		T(test_vf_failure_names_setting), T(test_netdev_mac),
		T(test_random_identity),    T(test_rdma_counts_user_only),
		T(test_rdma_kernel_only_is_clean), T(test_rdma_counts_orphans), T(test_rdma_errors),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: MIT
/*
 * Unit tests of the tenant pool (sriov/pool.c, scrub.c, state.c) on a fake
 * sysfs tree with netlink replaced: assignment rules, release and scrub
 * (refused while RDMA resources are left, identity reset after), the state
 * file's validation, a crash between write and rename, and concurrent
 * assigns from many processes.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <rdma/rdma_netlink.h>

#include "fake-sysfs.h"
#include "sriov-internal.h"
#include "util.h"

#ifndef NETLINK_RDMA
#define NETLINK_RDMA 20
#endif

#define PF_A "0000:04:00.0" /* NUMA 1: VFs 0000:04:00.2-3, ibdevs mlxb_vf0-1 */
#define PF_B "0000:05:00.0" /* NUMA 0: VFs 0000:05:00.2-3, ibdevs mlxd_vf0-1 */
#define VA_IFINDEX 3

static const char *const ibdevs[] = { "mlxb_pf", "mlxb_vf0", "mlxb_vf1", "mlxd_pf",
				      "mlxd_vf0", "mlxd_vf1", "rxe0" };

struct fixture {
	char *root;
	char *state_path;
	struct sriov_ctx ctx;
	struct sriov_nl_ops ops;
	GPtrArray *routes; /* captured rtnetlink requests */
	const char *busy;  /* ibdev with user resources left */
	unsigned busy_qps;
	int route_err;     /* returned for rtnetlink requests */
};

/* ---- fake netlink ---- */

static int reply(int cmd, int (*on_reply)(struct nl_msg *, void *), void *arg, uint32_t index,
		 unsigned user_qps)
{
	struct nl_msg *m = nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd), NLM_F_MULTI);
	struct nlattr *t;
	int r;

	nla_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, index);
	nla_put_string(m, RDMA_NLDEV_ATTR_DEV_NAME, ibdevs[index]);
	if (cmd == RDMA_NLDEV_CMD_RES_QP_GET) {
		t = nla_nest_start(m, RDMA_NLDEV_ATTR_RES_QP);
		for (unsigned i = 0; i < user_qps; i++) {
			struct nlattr *e = nla_nest_start(m, RDMA_NLDEV_ATTR_RES_QP_ENTRY);

			nla_put_u32(m, RDMA_NLDEV_ATTR_RES_PID, 4242);
			nla_nest_end(m, e);
		}
		nla_nest_end(m, t);
	}
	r = on_reply(m, arg);
	nlmsg_free(m);
	return r;
}

static int fake_transact(void *opaque, int protocol, struct nl_msg *req,
			 int (*on_reply)(struct nl_msg *, void *), void *arg)
{
	struct fixture *f = opaque;
	struct nlmsghdr *h = nlmsg_hdr(req);
	struct nlattr *idx;
	int cmd, r;

	if (protocol == NETLINK_ROUTE) {
		g_ptr_array_add(f->routes, g_memdup2(h, h->nlmsg_len));
		return f->route_err;
	}
	assert_int_equal(protocol, NETLINK_RDMA);
	cmd = RDMA_NL_GET_OP(h->nlmsg_type);
	if (cmd == RDMA_NLDEV_CMD_GET) {
		for (uint32_t i = 0; i < G_N_ELEMENTS(ibdevs); i++)
			if ((r = reply(cmd, on_reply, arg, i, 0)) < 0)
				return r;
		return 0;
	}
	idx = nla_find(nlmsg_attrdata(h, 0), nlmsg_attrlen(h, 0), RDMA_NLDEV_ATTR_DEV_INDEX);
	assert_non_null(idx);
	assert_true(nla_get_u32(idx) < G_N_ELEMENTS(ibdevs));
	return reply(cmd, on_reply, arg, nla_get_u32(idx),
		     f->busy && !strcmp(f->busy, ibdevs[nla_get_u32(idx)]) ? f->busy_qps : 0);
}

static int setup(void **state)
{
	struct fixture *f = g_new0(struct fixture, 1);

	f->root = fake_sysfs_new();
	fake_pf(f->root, PF_A, 4, 2, "0000:04:00.2", "mlxb", "ens2f0");
	fake_pf(f->root, PF_B, 4, 2, "0000:05:00.2", "mlxd", "ens3f0");
	fake_write(f->root, "bus/pci/devices/" PF_B "/numa_node", "0\n");
	fake_write(f->root, "bus/pci/devices/0000:05:00.2/numa_node", "0\n");
	fake_write(f->root, "bus/pci/devices/0000:05:00.3/numa_node", "0\n");
	fake_netdev(f->root, "va", NULL, VA_IFINDEX);
	fake_ibdev(f->root, "rxe0", NULL, "va", false, 7);
	f->state_path = g_build_filename(f->root, "state/pool.json", NULL);
	f->routes = g_ptr_array_new_with_free_func(g_free);
	f->ops = (struct sriov_nl_ops){ fake_transact, f };
	f->ctx = (struct sriov_ctx){ f->root, f->state_path, &f->ops };
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	sriov_state_before_rename = NULL;
	sriov_state_lock_timeout_ms = 10000;
	fake_sysfs_free(f->root);
	g_free(f->state_path);
	g_ptr_array_unref(f->routes);
	g_free(f);
	return 0;
}

static struct sriov_pool *load(const struct fixture *f)
{
	struct sriov_pool *pool = NULL;

	assert_int_equal(sriov_pool_load(f->state_path, &pool), 0);
	return pool;
}

static enum sriov_pool_state pool_state(const struct fixture *f, const char *id, char *tenant)
{
	__attribute__((cleanup(sriov_scan_freep))) struct sriov_scan *scan = NULL;
	__attribute__((cleanup(sriov_pool_freep))) struct sriov_pool *pool = load(f);
	struct sriov_pool_entry e;

	assert_int_equal(sriov_scan(f->root, &scan), 0);
	assert_non_null(sriov_scan_find(scan, id));
	sriov_pool_lookup(pool, sriov_scan_find(scan, id), &e);
	if (tenant)
		strcpy(tenant, e.tenant);
	return e.state;
}

static void acquire(struct fixture *f, const char *tenant, const char *want)
{
	struct sriov_assignment a;

	assert_int_equal(sriov_tenant_acquire(&f->ctx, tenant, NULL, &a), 0);
	assert_string_equal(a.function, want);
	assert_string_equal(a.tenant, tenant);
}

/* ---- assignment ---- */

static void test_acquire(void **state)
{
	struct fixture *f = *state;
	struct sriov_assignment a;
	char tenant[SRIOV_TENANT_LEN];

	assert_int_equal(sriov_tenant_acquire(&f->ctx, "alice", NULL, &a), 0);
	assert_true(a.new);
	assert_string_equal(a.pci, "0000:04:00.2");
	assert_string_equal(a.pf, PF_A);
	assert_string_equal(a.ibdev, "mlxb_vf0");
	assert_string_equal(a.netdev, "ens2f0v0");
	assert_int_equal(a.numa_node, 1);
	assert_true(g_str_has_prefix(a.uverbs, "/dev/infiniband/uverbs"));
	/* the same tenant gets the same function again */
	assert_int_equal(sriov_tenant_acquire(&f->ctx, "alice", NULL, &a), 0);
	assert_false(a.new);
	assert_string_equal(a.pci, "0000:04:00.2");
	acquire(f, "bob", "0000:04:00.3");
	acquire(f, "carol", "0000:05:00.2");
	acquire(f, "dave", "0000:05:00.3");
	/* PFs and rxe0 are not members: the pool is exhausted */
	assert_int_equal(sriov_tenant_acquire(&f->ctx, "erin", NULL, &a), -ENOSPC);
	assert_int_equal(pool_state(f, "0000:05:00.2", tenant), SRIOV_POOL_ASSIGNED);
	assert_string_equal(tenant, "carol");
	assert_int_equal(pool_state(f, PF_A, NULL), SRIOV_POOL_NONE);
	assert_int_equal(pool_state(f, "rxe0", NULL), SRIOV_POOL_NONE);
	assert_int_equal(sriov_tenant_acquire(&f->ctx, "../x", NULL, &a), -EINVAL);
}

static void test_filters(void **state)
{
	struct fixture *f = *state;
	struct sriov_filter numa0 = { .numa_node = 0 }, pf_a = { .pf = PF_A, .numa_node = -1 };
	struct sriov_filter none = { .pf = PF_A, .numa_node = 0 };
	struct sriov_assignment a;

	assert_int_equal(sriov_tenant_acquire(&f->ctx, "t0", &numa0, &a), 0);
	assert_string_equal(a.pci, "0000:05:00.2");
	assert_int_equal(sriov_tenant_acquire(&f->ctx, "t1", &pf_a, &a), 0);
	assert_string_equal(a.pci, "0000:04:00.2");
	assert_int_equal(sriov_tenant_acquire(&f->ctx, "t2", &none, &a), -ENOSPC);
	pf_a.pf = "bogus";
	assert_int_equal(sriov_tenant_acquire(&f->ctx, "t2", &pf_a, &a), -EINVAL);
}

static void test_broken_vf_never_assigned(void **state)
{
	struct fixture *f = *state;
	struct sriov_assignment a;

	fake_remove(f->root, "bus/pci/devices/0000:04:00.2/physfn");
	fake_ibdev(f->root, "extra", "0000:04:00.3", NULL, false, 30); /* two ibdevs */
	acquire(f, "alice", "0000:05:00.2");
	acquire(f, "bob", "0000:05:00.3");
	assert_int_equal(sriov_tenant_acquire(&f->ctx, "carol", NULL, &a), -ENOSPC);
	assert_int_equal(sriov_tenant_claim(&f->ctx, "carol", "0000:04:00.2", &a), -ENOLINK);
}

static void test_soft_member(void **state)
{
	struct fixture *f = *state;
	struct sriov_assignment a;

	acquire(f, "t1", "0000:04:00.2");
	acquire(f, "t2", "0000:04:00.3");
	acquire(f, "t3", "0000:05:00.2");
	acquire(f, "t4", "0000:05:00.3");
	assert_int_equal(sriov_pool_add(&f->ctx, "rxe0"), 0);
	assert_int_equal(sriov_pool_add(&f->ctx, "rxe0"), 0); /* idempotent */
	assert_int_equal(sriov_pool_add(&f->ctx, "nosuch"), -ENOENT);
	assert_int_equal(pool_state(f, "rxe0", NULL), SRIOV_POOL_FREE);
	assert_int_equal(sriov_tenant_acquire(&f->ctx, "t5", NULL, &a), 0);
	assert_string_equal(a.function, "rxe0");
	assert_string_equal(a.pci, "");
	assert_string_equal(a.ibdev, "rxe0");
	assert_string_equal(a.netdev, "va");
	assert_string_equal(a.uverbs, "/dev/infiniband/uverbs7");
	assert_int_equal(sriov_pool_remove(&f->ctx, "rxe0"), -EBUSY);
	assert_int_equal(sriov_pool_release(&f->ctx, "t5", NULL, NULL, NULL), 0);
	assert_int_equal(sriov_pool_remove(&f->ctx, "rxe0"), 0);
	assert_int_equal(sriov_pool_remove(&f->ctx, "rxe0"), -ENOENT);
	assert_int_equal(pool_state(f, "rxe0", NULL), SRIOV_POOL_NONE);
}

static void test_claim(void **state)
{
	struct fixture *f = *state;
	struct sriov_assignment a;

	assert_int_equal(sriov_tenant_claim(&f->ctx, "alice", "0000:05:00.3", &a), 0);
	assert_true(a.new);
	assert_string_equal(a.tenant, "alice");
	assert_int_equal(sriov_tenant_claim(&f->ctx, "alice", "mlxd_vf1", &a), 0); /* by ibdev */
	assert_false(a.new);
	assert_int_equal(sriov_tenant_claim(&f->ctx, "bob", "0000:05:00.3", &a), -EPERM);
	assert_int_equal(sriov_tenant_claim(&f->ctx, "bob", "mlxd_vf1", &a), -EPERM);
	assert_int_equal(sriov_tenant_claim(&f->ctx, NULL, "0000:05:00.3", &a), -EPERM);
	/* alice already has one */
	assert_int_equal(sriov_tenant_claim(&f->ctx, "alice", "0000:04:00.2", &a), -EEXIST);
	/* acquire returns the claimed one */
	acquire(f, "alice", "0000:05:00.3");
	/* outside the pool: an untenanted back end gets it unrecorded; a
	 * tenant does not, since nothing would keep it from the next one */
	assert_int_equal(sriov_tenant_claim(&f->ctx, NULL, PF_A, &a), 0);
	assert_false(a.new);
	assert_string_equal(a.tenant, "");
	assert_int_equal(sriov_tenant_claim(&f->ctx, "bob", PF_A, &a), -EXDEV);
	assert_int_equal(sriov_tenant_claim(&f->ctx, "bob", "rxe0", &a), -EXDEV);
	assert_int_equal(pool_state(f, PF_A, NULL), SRIOV_POOL_NONE);
	/* a free pool member is never used unrecorded: bob would get it next */
	assert_int_equal(sriov_tenant_claim(&f->ctx, NULL, "0000:04:00.2", &a), -EPERM);
	assert_int_equal(sriov_tenant_claim(&f->ctx, NULL, "mlxb_vf0", &a), -EPERM);
	assert_int_equal(pool_state(f, "0000:04:00.2", NULL), SRIOV_POOL_FREE);
	acquire(f, "bob", "0000:04:00.2");
	assert_int_equal(sriov_tenant_claim(&f->ctx, "bob", "0000:09:00.0", &a), -ENOENT);
	/* an empty or bogus name matches nothing (functions without an ibdev) */
	assert_int_equal(sriov_tenant_claim(&f->ctx, NULL, "", &a), -EINVAL);
	assert_int_equal(sriov_tenant_claim(&f->ctx, NULL, "a/b", &a), -EINVAL);
}

static int lease_file_mode(const struct fixture *f, const char *function)
{
	g_autofree char *path = g_strconcat(f->state_path, ".lease.", function, NULL);
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	return (int)(st.st_mode & 07777);
}

/* A running back end's lease keeps its function from release and scrub. */
static void test_lease(void **state)
{
	struct fixture *f = *state;
	struct sriov_assignment a, b;
	char tenant[SRIOV_TENANT_LEN];
	int fd, fd2;

	assert_int_equal(sriov_tenant_claim(&f->ctx, "alice", "0000:04:00.2", &a), 0);
	assert_int_equal(sriov_lease_held(&f->ctx, "0000:04:00.2"), 0);
	assert_int_equal(sriov_lease_take(&f->ctx, &a, &fd), 0);
	assert_true(fd >= 0);
	assert_int_equal(lease_file_mode(f, "0000:04:00.2"), 0600);
	assert_int_equal(sriov_lease_held(&f->ctx, "0000:04:00.2"), 1);
	/* a second back end for the same function */
	assert_int_equal(sriov_lease_take(&f->ctx, &a, &fd2), -EBUSY);
	assert_int_equal(fd2, -1);
	/* release and scrub refused, and nothing changed */
	assert_int_equal(sriov_pool_release(&f->ctx, "alice", NULL, NULL, NULL), -EBUSY);
	assert_int_equal(sriov_pool_release(&f->ctx, NULL, "mlxb_vf0", NULL, NULL), -EBUSY);
	assert_int_equal(pool_state(f, "0000:04:00.2", tenant), SRIOV_POOL_ASSIGNED);
	assert_string_equal(tenant, "alice");
	assert_int_equal(f->routes->len, 0);
	/* the back end exits */
	close(fd);
	assert_int_equal(sriov_lease_held(&f->ctx, "0000:04:00.2"), 0);
	assert_int_equal(sriov_pool_release(&f->ctx, "alice", NULL, NULL, NULL), 0);
	assert_int_equal(pool_state(f, "0000:04:00.2", NULL), SRIOV_POOL_FREE);
	/* a lease on what the pool no longer says is stale */
	assert_int_equal(sriov_lease_take(&f->ctx, &a, &fd), -ESTALE);
	/* an untenanted back end on a function outside the pool: a second one
	 * fails, and the function cannot join the pool under it */
	assert_int_equal(sriov_tenant_claim(&f->ctx, NULL, "rxe0", &b), 0);
	assert_int_equal(sriov_lease_take(&f->ctx, &b, &fd), 0);
	assert_int_equal(sriov_lease_take(&f->ctx, &b, &fd2), -EBUSY);
	assert_int_equal(sriov_pool_add(&f->ctx, "rxe0"), -EBUSY);
	close(fd);
	assert_int_equal(sriov_pool_add(&f->ctx, "rxe0"), 0);
	/* now a pool member: the untenanted assignment is stale */
	assert_int_equal(sriov_lease_take(&f->ctx, &b, &fd), -ESTALE);
}

/* A function some back end holds is never handed out, even if free. */
static void test_leased_never_handed_out(void **state)
{
	struct fixture *f = *state;
	g_autofree char *dir = g_path_get_dirname(f->state_path);
	g_autofree char *path = g_strconcat(f->state_path, ".lease.0000:04:00.2", NULL);
	g_autofree char *planted = g_strconcat(f->state_path, ".lease.0000:05:00.2", NULL);
	struct sriov_assignment a;
	int fd;

	assert_int_equal(g_mkdir_with_parents(dir, 0755), 0);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX), 0);
	acquire(f, "alice", "0000:04:00.3");
	assert_int_equal(sriov_tenant_claim(&f->ctx, "bob", "0000:04:00.2", &a), -EBUSY);
	close(fd);
	acquire(f, "bob", "0000:04:00.2");
	/* a symlink planted as a lease file is not followed */
	assert_int_equal(sriov_tenant_claim(&f->ctx, "carol", "0000:05:00.2", &a), 0);
	assert_int_equal(symlink("/dev/null", planted), 0);
	assert_int_equal(sriov_lease_take(&f->ctx, &a, &fd), -ELOOP);
	assert_int_equal(sriov_tenant_claim(&f->ctx, "dave", "0000:05:00.3", &a), 0);
}

/* ---- release and scrub ---- */

static struct nlattr *vf_info(struct nlmsghdr *h, struct nlattr **vf)
{
	struct nlattr *tb[IFLA_MAX + 1];

	assert_int_equal(nlmsg_parse(h, sizeof(struct ifinfomsg), tb, IFLA_MAX, NULL), 0);
	assert_non_null(tb[IFLA_VFINFO_LIST]);
	assert_int_equal(nla_parse_nested(vf, IFLA_VF_MAX, nla_data(tb[IFLA_VFINFO_LIST]), NULL),
			 0);
	return tb[IFLA_VFINFO_LIST];
}

static void test_release_refused_while_resources_left(void **state)
{
	struct fixture *f = *state;
	struct sriov_res_count left;
	struct sriov_assignment a;
	char function[SRIOV_NAME_LEN];
	struct nlattr *vf[IFLA_VF_MAX + 1];
	struct ifla_vf_mac mac;
	int ifindex;

	assert_int_equal(sriov_tenant_claim(&f->ctx, "alice", "0000:04:00.3", &a), 0);
	f->busy = "mlxb_vf1";
	f->busy_qps = 2;
	assert_int_equal(sriov_pool_release(&f->ctx, "alice", NULL, function, &left), -EBUSY);
	assert_string_equal(function, "0000:04:00.3");
	assert_int_equal(left.qp, 2);
	assert_int_equal(f->routes->len, 0); /* nothing reset while in use */
	assert_int_equal(pool_state(f, "0000:04:00.3", NULL), SRIOV_POOL_DIRTY);
	/* dirty: neither claimable nor handed out */
	assert_int_equal(sriov_tenant_claim(&f->ctx, "bob", "0000:04:00.3", &a), -EBUSY);
	acquire(f, "bob", "0000:04:00.2");
	acquire(f, "carol", "0000:05:00.2");
	acquire(f, "dave", "0000:05:00.3");
	assert_int_equal(sriov_tenant_acquire(&f->ctx, "erin", NULL, &a), -ENOSPC);
	/* still busy on retry, by tenant or by function */
	assert_int_equal(sriov_pool_release(&f->ctx, "alice", NULL, NULL, &left), -EBUSY);
	assert_int_equal(sriov_pool_scrub(&f->ctx, "mlxb_vf1", &left), -EBUSY);
	/* the old tenant's process is gone */
	f->busy = NULL;
	assert_int_equal(sriov_pool_scrub(&f->ctx, "0000:04:00.3", &left), 0);
	assert_int_equal(pool_state(f, "0000:04:00.3", NULL), SRIOV_POOL_FREE);
	acquire(f, "erin", "0000:04:00.3");
	/* the reset went to the PF's netdev for VF 1: a fresh LA MAC first */
	assert_int_equal(sriov_pf_ifindex(f->root, PF_A, &ifindex), 0);
	assert_true(f->routes->len >= 1);
	assert_int_equal(((struct ifinfomsg *)nlmsg_data(f->routes->pdata[0]))->ifi_index, ifindex);
	vf_info(f->routes->pdata[0], vf);
	assert_non_null(vf[IFLA_VF_MAC]);
	memcpy(&mac, nla_data(vf[IFLA_VF_MAC]), sizeof(mac));
	assert_int_equal(mac.vf, 1);
	assert_int_equal(mac.mac[0] & 0x03, 0x02);
}

/* The settings after the MAC: link state auto, trust off, spoof check on. */
static void test_scrub_resets_settings(void **state)
{
	struct fixture *f = *state;
	struct nlattr *vf[IFLA_VF_MAX + 1];
	struct ifla_vf_link_state ls;
	struct ifla_vf_trust trust;
	struct ifla_vf_spoofchk spoof;

	acquire(f, "alice", "0000:04:00.2");
	assert_int_equal(sriov_pool_release(&f->ctx, NULL, "0000:04:00.2", NULL, NULL), 0);
	assert_int_equal(f->routes->len, 4);
	vf_info(f->routes->pdata[1], vf);
	memcpy(&ls, nla_data(vf[IFLA_VF_LINK_STATE]), sizeof(ls));
	assert_int_equal(ls.vf, 0);
	assert_int_equal(ls.link_state, IFLA_VF_LINK_STATE_AUTO);
	vf_info(f->routes->pdata[2], vf);
	memcpy(&trust, nla_data(vf[IFLA_VF_TRUST]), sizeof(trust));
	assert_int_equal(trust.setting, 0);
	vf_info(f->routes->pdata[3], vf);
	memcpy(&spoof, nla_data(vf[IFLA_VF_SPOOFCHK]), sizeof(spoof));
	assert_int_equal(spoof.setting, 1);
}

static void test_scrub_infiniband_vf(void **state)
{
	struct fixture *f = *state;
	struct nlattr *vf[IFLA_VF_MAX + 1];

	fake_write(f->root, "class/infiniband/mlxb_vf0/ports/1/link_layer", "InfiniBand\n");
	acquire(f, "alice", "0000:04:00.2");
	assert_int_equal(sriov_pool_release(&f->ctx, "alice", NULL, NULL, NULL), 0);
	/* node GUID, port GUID, link state, trust; no spoof checking on IB */
	assert_int_equal(f->routes->len, 4);
	vf_info(f->routes->pdata[0], vf);
	assert_non_null(vf[IFLA_VF_IB_NODE_GUID]);
	assert_null(vf[IFLA_VF_MAC]);
	vf_info(f->routes->pdata[1], vf);
	assert_non_null(vf[IFLA_VF_IB_PORT_GUID]);
}

static void test_scrub_soft_device_mac(void **state)
{
	struct fixture *f = *state;
	struct nlattr *tb[IFLA_MAX + 1];
	struct nlmsghdr *h;
	struct sriov_res_count left;

	assert_int_equal(sriov_pool_add(&f->ctx, "rxe0"), 0);
	assert_int_equal(sriov_tenant_claim(&f->ctx, "alice", "rxe0", &(struct sriov_assignment){ 0 }),
			 0);
	f->busy = "rxe0";
	f->busy_qps = 1;
	assert_int_equal(sriov_pool_release(&f->ctx, NULL, "rxe0", NULL, &left), -EBUSY);
	assert_int_equal(left.qp, 1);
	f->busy = NULL;
	assert_int_equal(sriov_pool_release(&f->ctx, "alice", NULL, NULL, NULL), 0);
	assert_int_equal(f->routes->len, 1);
	h = f->routes->pdata[0];
	assert_int_equal(((struct ifinfomsg *)nlmsg_data(h))->ifi_index, VA_IFINDEX);
	assert_int_equal(nlmsg_parse(h, sizeof(struct ifinfomsg), tb, IFLA_MAX, NULL), 0);
	assert_int_equal(nla_len(tb[IFLA_ADDRESS]), 6);
	assert_int_equal(((uint8_t *)nla_data(tb[IFLA_ADDRESS]))[0] & 0x03, 0x02);
}

static void test_scrub_failure_keeps_dirty(void **state)
{
	struct fixture *f = *state;

	acquire(f, "alice", "0000:04:00.2");
	f->route_err = -EPERM;
	assert_int_equal(sriov_pool_release(&f->ctx, "alice", NULL, NULL, NULL), -EPERM);
	assert_int_equal(pool_state(f, "0000:04:00.2", NULL), SRIOV_POOL_DIRTY);
	f->route_err = 0;
	assert_int_equal(sriov_pool_release(&f->ctx, "alice", NULL, NULL, NULL), 0);
	assert_int_equal(pool_state(f, "0000:04:00.2", NULL), SRIOV_POOL_FREE);
	assert_int_equal(sriov_pool_release(&f->ctx, "alice", NULL, NULL, NULL), -ENOENT);
	assert_int_equal(sriov_pool_release(&f->ctx, "a", "0000:04:00.2", NULL, NULL), -EINVAL);
	/* an assigned function is not scrubbed from under its tenant */
	acquire(f, "bob", "0000:04:00.2");
	assert_int_equal(sriov_pool_scrub(&f->ctx, "0000:04:00.2", NULL), -EPERM);
}

/* Only released functions are scrubbed: never a PF (the host's NIC). */
static void test_scrub_only_dirty(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(sriov_pool_scrub(&f->ctx, PF_A, NULL), -EINVAL);
	assert_int_equal(sriov_pool_scrub(&f->ctx, "rxe0", NULL), -EINVAL);
	assert_int_equal(sriov_pool_scrub(&f->ctx, "0000:04:00.2", NULL), -EINVAL);
	assert_int_equal(f->routes->len, 0);
	assert_int_equal(sriov_pool_add(&f->ctx, PF_A), -EINVAL);
	assert_int_equal(pool_state(f, PF_A, NULL), SRIOV_POOL_NONE);
}

/* Nothing to give a new identity: never reported as scrubbed. */
static void test_scrub_without_identity(void **state)
{
	struct fixture *f = *state;
	const struct sriov_fn soft = { .kind = SRIOV_SOFT, .id = "rxe0", .ibdev = "rxe0",
				       .vf_index = -1 };
	const struct sriov_fn plain_ib = { .kind = SRIOV_PLAIN, .id = "0000:07:00.0",
					   .pci = "0000:07:00.0", .netdev = "ib0",
					   .infiniband = true, .vf_index = -1 };
	char tenant[SRIOV_TENANT_LEN];

	assert_int_equal(sriov_scrub(&f->ctx, &soft, NULL), -EOPNOTSUPP);
	assert_int_equal(sriov_scrub(&f->ctx, &plain_ib, NULL), -EOPNOTSUPP);
	/* such a device cannot join the pool ... */
	fake_ibdev(f->root, "siw0", NULL, NULL, false, 8);
	assert_int_equal(sriov_pool_add(&f->ctx, "siw0"), -EOPNOTSUPP);
	/* ... and a member that lost its netdev stays dirty */
	assert_int_equal(sriov_pool_add(&f->ctx, "rxe0"), 0);
	assert_int_equal(sriov_tenant_claim(&f->ctx, "alice", "rxe0", &(struct sriov_assignment){ 0 }),
			 0);
	fake_remove(f->root, "class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0");
	assert_int_equal(sriov_pool_release(&f->ctx, "alice", NULL, NULL, NULL), -EOPNOTSUPP);
	assert_int_equal(pool_state(f, "rxe0", tenant), SRIOV_POOL_DIRTY);
	assert_string_equal(tenant, "alice");
	assert_int_equal(f->routes->len, 0);
}

static void test_num_vfs_guarded(void **state)
{
	struct fixture *f = *state;
	char tenant[SRIOV_TENANT_LEN];

	acquire(f, "alice", "0000:04:00.2");
	assert_int_equal(sriov_pool_set_num_vfs(&f->ctx, PF_A, 0, tenant), -EBUSY);
	assert_string_equal(tenant, "alice");
	assert_int_equal(sriov_pool_set_num_vfs(&f->ctx, PF_B, 0, tenant), 0);
	assert_string_equal(tenant, "");
	assert_int_equal(sriov_pool_release(&f->ctx, "alice", NULL, NULL, NULL), 0);
	assert_int_equal(sriov_pool_set_num_vfs(&f->ctx, PF_A, 0, tenant), 0);
}

/* ---- the state file ---- */

static void test_state_roundtrip(void **state)
{
	struct fixture *f = *state;
	__attribute__((cleanup(sriov_pool_freep))) struct sriov_pool *a = NULL, *b = NULL;
	g_autofree char *text = NULL, *again = NULL;

	acquire(f, "alice", "0000:04:00.2");
	assert_int_equal(sriov_pool_add(&f->ctx, "rxe0"), 0);
	a = load(f);
	assert_int_equal(a->records->len, 1);
	assert_int_equal(a->members->len, 1);
	text = sriov_state_format(a);
	assert_int_equal(sriov_state_parse(text, strlen(text), &b), 0);
	again = sriov_state_format(b);
	assert_string_equal(text, again);
}

static void test_state_corrupt(void **state)
{
	struct fixture *f = *state;
	static const char *const bad[] = {
		"", "{", "[]", "null", "{\"version\":2,\"members\":[],\"functions\":[]}",
		"{\"version\":1,\"members\":[]}",
		"{\"version\":\"1\",\"members\":[],\"functions\":[]}",
		"{\"version\":1,\"members\":[1],\"functions\":[]}",
		"{\"version\":1,\"members\":[\"a/b\"],\"functions\":[]}",
		"{\"version\":1,\"members\":[\"rxe0\",\"rxe0\"],\"functions\":[]}",
		"{\"version\":1,\"members\":[],\"functions\":[{\"function\":\"0000:04:00.2\","
		"\"state\":\"lent\",\"tenant\":\"a\",\"since\":1}]}",
		"{\"version\":1,\"members\":[],\"functions\":[{\"function\":\"0000:04:00.2\","
		"\"state\":\"assigned\",\"tenant\":\"-a\",\"since\":1}]}",
		"{\"version\":1,\"members\":[],\"functions\":[{\"function\":\"0000:04:00.2\","
		"\"state\":\"assigned\",\"tenant\":\"a\",\"since\":\"x\"}]}",
		"{\"version\":1,\"members\":[],\"functions\":[{\"function\":\"0000:04:00.2\","
		"\"state\":\"assigned\",\"tenant\":\"a\",\"since\":1},{\"function\":"
		"\"0000:04:00.2\",\"state\":\"dirty\",\"tenant\":\"b\",\"since\":1}]}",
		/* an upper-case key would not match 0000:0a:00.2: a dirty VF looks free */
		"{\"version\":1,\"members\":[],\"functions\":[{\"function\":\"0000:0A:00.2\","
		"\"state\":\"dirty\",\"tenant\":\"a\",\"since\":1}]}",
		"{\"version\":1,\"members\":[\"0000:0A:00.2\"],\"functions\":[]}",
		/* nested deeper than the format ever is */
		"{\"version\":1,\"members\":[],\"functions\":[],\"x\":[[[[[[[[1]]]]]]]]}",
	};
	struct sriov_assignment a;
	g_autofree char *dir = g_path_get_dirname(f->state_path);

	assert_int_equal(g_mkdir_with_parents(dir, 0755), 0);
	for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
		struct sriov_pool *pool = NULL;

		assert_true(g_file_set_contents(f->state_path, bad[i], -1, NULL));
		if (sriov_pool_load(f->state_path, &pool) != -EBADMSG)
			fail_msg("accepted: %s", bad[i]);
		/* never "empty, so everything is free": the file stays as is */
		assert_int_equal(sriov_tenant_acquire(&f->ctx, "t", NULL, &a), -EBADMSG);
	}
}

static void die_before_rename(const char *tmp)
{
	(void)tmp;
	raise(SIGKILL);
}

/* The temp files in the state directory ("pool.json.tmpXXXXXX"). */
static GPtrArray *temp_files(const struct fixture *f)
{
	g_autofree char *dir = g_path_get_dirname(f->state_path);
	GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
	const char *name;

	while (d && (name = g_dir_read_name(d)))
		if (g_str_has_prefix(name, "pool.json.tmp"))
			g_ptr_array_add(names, g_build_filename(dir, name, NULL));
	return names;
}

static void test_crash_before_rename(void **state)
{
	struct fixture *f = *state;
	__attribute__((cleanup(sriov_pool_freep))) struct sriov_pool *pool = NULL;
	g_autoptr(GPtrArray) temps = NULL, after = NULL;
	g_autofree char *leftover = NULL;
	int status;
	pid_t pid;

	acquire(f, "alice", "0000:04:00.2");
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sriov_assignment a;

		sriov_state_before_rename = die_before_rename;
		sriov_tenant_acquire(&f->ctx, "bob", NULL, &a);
		_exit(0); /* not reached: killed in the hook */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* the crash happened after bob's state was written ... */
	temps = temp_files(f);
	assert_int_equal(temps->len, 1);
	assert_true(g_file_get_contents(temps->pdata[0], &leftover, NULL, NULL));
	assert_non_null(strstr(leftover, "bob"));
	/* ... and the state is still the old one, intact */
	pool = load(f);
	assert_int_equal(pool->records->len, 1);
	assert_string_equal(g_array_index(pool->records, struct sriov_record, 0).tenant, "alice");
	/* and usable: the next writer removes the leftover */
	acquire(f, "bob", "0000:04:00.3");
	after = temp_files(f);
	assert_int_equal(after->len, 0);
}

static mode_t file_mode(const char *path)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode & 07777;
}

/* Symlinks planted in the state directory are never followed. */
static void test_state_no_symlinks(void **state)
{
	struct fixture *f = *state;
	g_autofree char *dir = g_path_get_dirname(f->state_path);
	g_autofree char *victim = g_build_filename(f->root, "victim", NULL);
	g_autofree char *tmp = g_strconcat(f->state_path, ".tmp", NULL);
	g_autofree char *lock = g_strconcat(f->state_path, ".lock", NULL);
	g_autofree char *content = NULL;
	struct sriov_pool *pool = NULL;
	struct sriov_assignment a;

	assert_int_equal(g_mkdir_with_parents(dir, 0755), 0);
	assert_true(g_file_set_contents(victim, "precious", -1, NULL));
	/* the old fixed temp name, pointing elsewhere */
	assert_int_equal(symlink(victim, tmp), 0);
	acquire(f, "alice", "0000:04:00.2");
	assert_true(g_file_get_contents(victim, &content, NULL, NULL));
	assert_string_equal(content, "precious");
	assert_int_equal(file_mode(f->state_path), 0600);
	assert_int_equal(file_mode(lock), 0600);
	/* a state file that is a symlink is refused, not read or replaced */
	assert_int_equal(unlink(f->state_path), 0);
	assert_int_equal(symlink(victim, f->state_path), 0);
	assert_int_equal(sriov_pool_load(f->state_path, &pool), -ELOOP);
	assert_int_equal(sriov_tenant_acquire(&f->ctx, "bob", NULL, &a), -ELOOP);
	assert_int_equal(unlink(f->state_path), 0);
	/* so is a lock file that is one */
	assert_int_equal(unlink(lock), 0);
	assert_int_equal(symlink(victim, lock), 0);
	assert_int_equal(sriov_tenant_acquire(&f->ctx, "bob", NULL, &a), -ELOOP);
	g_free(content);
	assert_true(g_file_get_contents(victim, &content, NULL, NULL));
	assert_string_equal(content, "precious");
}

static void test_state_lock_bounded(void **state)
{
	struct fixture *f = *state;
	g_autofree char *lock = g_strconcat(f->state_path, ".lock", NULL);
	struct sriov_assignment a;
	uint64_t start;
	int fd;

	acquire(f, "alice", "0000:04:00.2");
	/* a loose lock file from an older version is tightened */
	assert_int_equal(chmod(lock, 0644), 0);
	acquire(f, "alice", "0000:04:00.2");
	assert_int_equal(file_mode(lock), 0600);
	/* a shared lock through a read-only fd blocks writers: not forever */
	fd = open(lock, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_SH), 0);
	sriov_state_lock_timeout_ms = 200;
	alarm(10); /* an unbounded wait fails the test instead of hanging it */
	start = monotonic_ns();
	assert_int_equal(sriov_tenant_acquire(&f->ctx, "bob", NULL, &a), -ETIMEDOUT);
	assert_true(monotonic_ns() - start >= 200000000ull);
	alarm(0);
	close(fd);
	acquire(f, "bob", "0000:04:00.3");
}

/* Hostile content never reaches the parser, and nothing but a small
 * regular file is read. */
static void test_state_hostile_files(void **state)
{
	struct fixture *f = *state;
	g_autofree char *dir = g_path_get_dirname(f->state_path);
	g_autofree char *deep = g_malloc(100001);
	g_autofree char *huge = NULL;
	static const char quoted[] = "{\"version\":1,\"members\":[],\"functions\":[],"
				     "\"x\":\"[[[[[[[[[[\\\"[[[[\"}";
	struct sriov_pool *pool = NULL;

	assert_int_equal(g_mkdir_with_parents(dir, 0755), 0);
	memset(deep, '[', 100000);
	deep[100000] = '\0';
	assert_int_equal(sriov_state_parse(deep, 100000, &pool), -EBADMSG);
	assert_true(g_file_set_contents(f->state_path, deep, -1, NULL));
	assert_int_equal(sriov_pool_load(f->state_path, &pool), -EBADMSG);
	/* brackets inside strings do not count */
	assert_int_equal(sriov_state_parse(quoted, strlen(quoted), &pool), 0);
	sriov_pool_free(pool);
	pool = NULL;
	/* over the size cap: refused without reading it all */
	huge = g_malloc(5u << 20);
	memset(huge, ' ', 5u << 20);
	memcpy(huge, "{\"version\":1,\"members\":[],\"functions\":[]}", 42);
	assert_true(g_file_set_contents(f->state_path, huge, 5u << 20, NULL));
	assert_int_equal(sriov_pool_load(f->state_path, &pool), -EBADMSG);
	/* a FIFO would block the reader forever */
	assert_int_equal(unlink(f->state_path), 0);
	assert_int_equal(mkfifo(f->state_path, 0600), 0);
	alarm(10);
	assert_int_equal(sriov_pool_load(f->state_path, &pool), -EBADMSG);
	alarm(0);
	assert_null(pool);
}

#define RACERS 16

static void racer(struct fixture *f, int i, int go, int out)
{
	char tenant[16], buf[SRIOV_NAME_LEN + 8] = "";
	struct sriov_assignment a;
	int r;

	snprintf(tenant, sizeof(tenant), "racer%d", i);
	(void)!read(go, buf, 1); /* everyone starts when the pipe closes */
	r = sriov_tenant_acquire(&f->ctx, tenant, NULL, &a);
	snprintf(buf, sizeof(buf), "%d %s\n", r, r == 0 ? a.function : "-");
	(void)!write(out, buf, strlen(buf));
	_exit(0);
}

static void test_concurrent_assign(void **state)
{
	struct fixture *f = *state;
	__attribute__((cleanup(sriov_pool_freep))) struct sriov_pool *pool = NULL;
	g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	int go[2], out[2], ok = 0, full = 0;
	char buf[4096];
	FILE *in;

	/* 12 more VFs: 16 in all, as many as racers (one misses nothing) */
	fake_pf(f->root, "0000:81:00.0", 16, 12, "0000:81:00.1", "mlxc", "ens4f0");
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(out), 0);
	for (int i = 0; i < RACERS + 4; i++) {
		pid_t pid = fork();

		assert_true(pid >= 0);
		if (pid == 0) {
			close(go[1]);
			close(out[0]);
			racer(f, i, go[0], out[1]);
		}
	}
	close(go[0]);
	close(out[1]);
	close(go[1]);
	in = fdopen(out[0], "r");
	while (fgets(buf, sizeof(buf), in)) {
		char fn[SRIOV_NAME_LEN];
		int r;

		assert_int_equal(sscanf(buf, "%d %63s", &r, fn), 2);
		if (r == -ENOSPC) {
			full++;
			continue;
		}
		assert_int_equal(r, 0);
		if (!g_hash_table_add(seen, g_strdup(fn)))
			fail_msg("%s handed out twice", fn);
		ok++;
	}
	fclose(in);
	while (wait(NULL) > 0)
		;
	assert_int_equal(ok, RACERS);
	assert_int_equal(full, 4);
	pool = load(f);
	assert_int_equal(pool->records->len, RACERS);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_acquire),
		T(test_filters),
		T(test_broken_vf_never_assigned),
		T(test_soft_member),
		T(test_claim),
		T(test_lease),
		T(test_leased_never_handed_out),
		T(test_release_refused_while_resources_left),
		T(test_scrub_resets_settings),
		T(test_scrub_infiniband_vf),
		T(test_scrub_soft_device_mac),
		T(test_scrub_failure_keeps_dirty),
		T(test_scrub_only_dirty),
		T(test_scrub_without_identity),
		T(test_num_vfs_guarded),
		T(test_state_roundtrip),
		T(test_state_corrupt),
		T(test_crash_before_rename),
		T(test_state_no_symlinks),
		T(test_state_lock_bounded),
		T(test_state_hostile_files),
		T(test_concurrent_assign),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/*
 * sriov: SR-IOV virtual functions (and plain RDMA devices) as a per-tenant
 * pool.
 *
 * Three layers, each usable alone:
 *  - discovery: sriov_scan() reads a sysfs tree (the root is injectable so
 *    tests build fake trees) into a flat list of functions;
 *  - configuration: sriov_set_num_vfs() and sriov_vf_configure() (netlink,
 *    through an injectable struct sriov_nl_ops);
 *  - the pool: a JSON state file, serialized by flock, that says which
 *    function belongs to which tenant and which ones still need scrubbing.
 *
 * A "function" is named by its PCI address ("0000:03:00.2") or, when its RDMA
 * device has no PCI device (rdma_rxe), by the RDMA device name ("rxe0").
 * Every call returns 0 (or a count) or -errno and never logs.  Errors that
 * matter to callers:
 *   -ENOENT   no such function / tenant / file
 *   -EBADMSG  sysfs or state-file content is malformed (never trusted)
 *   -EBUSY    the function is in use: VFs enabled, RDMA resources left
 *   -EPERM    the function belongs to another tenant
 *   -EXDEV    a tenant named a function outside the pool
 *   -ENOSPC   no free function matches
 *   -ENXIO    no driver is bound to the PF
 */
#ifndef VRDMA_SRIOV_H
#define VRDMA_SRIOV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nl_msg;

#define SRIOV_PCI_LEN 13  /* "DDDD:BB:DD.F" and NUL */
#define SRIOV_NAME_LEN 64 /* IB_DEVICE_NAME_MAX; netdev names are shorter */
#define SRIOV_TENANT_LEN 65
#define SRIOV_PATH_LEN 64
#define SRIOV_PROBLEM_LEN 160

/* ---- discovery ---- */

enum sriov_kind {
	SRIOV_PF,    /* SR-IOV capable physical function */
	SRIOV_VF,    /* virtual function (virtfnN of a PF) */
	SRIOV_PLAIN, /* PCI function with an RDMA device, no SR-IOV */
	SRIOV_SOFT,  /* RDMA device without a PCI device (rxe, siw) */
};

struct sriov_fn {
	enum sriov_kind kind;
	char id[SRIOV_NAME_LEN];   /* PCI address, or ibdev for SRIOV_SOFT */
	char pci[SRIOV_PCI_LEN];   /* "" for SRIOV_SOFT */
	char pf[SRIOV_PCI_LEN];    /* SRIOV_VF: its PF */
	int vf_index;              /* SRIOV_VF: N of virtfnN, else -1 */
	unsigned total_vfs;        /* SRIOV_PF */
	unsigned num_vfs;          /* SRIOV_PF */
	char driver[SRIOV_NAME_LEN]; /* bound driver, "" if none */
	char ibdev[SRIOV_NAME_LEN];  /* RDMA device, "" if none */
	char uverbs[SRIOV_PATH_LEN]; /* "/dev/infiniband/uverbsN" or "" */
	char netdev[SRIOV_NAME_LEN]; /* "" if none */
	int numa_node;               /* -1: unknown */
	bool infiniband;             /* port 1 link layer is InfiniBand */
	int status;                  /* 0, or -errno: sysfs is inconsistent */
	char problem[SRIOV_PROBLEM_LEN]; /* why, when status < 0 */
};

/* PFs in address order, each followed by its VFs in virtfn order, then the
 * RDMA devices that are neither (plain PCI, soft). */
struct sriov_scan {
	size_t n;
	struct sriov_fn *fns;
};

int sriov_scan(const char *sysfs_root, struct sriov_scan **ret_scan);
void sriov_scan_free(struct sriov_scan *scan);
/* By PCI address (any case) or RDMA device name; NULL if absent. */
const struct sriov_fn *sriov_scan_find(const struct sriov_scan *scan, const char *id);

/* Validates and lower-cases a PCI address "DDDD:BB:DD.F". */
int sriov_pci_normalize(const char *in, char ret[SRIOV_PCI_LEN]);
/* Tenant names: 1..64 of [A-Za-z0-9._-], not starting with '-' or '.'. */
bool sriov_tenant_valid(const char *tenant);

/*
 * Sets sriov_numvfs of @pf.  A non-zero count changes only through 0, and
 * this never does that implicitly: -EBUSY if @pf has VFs and @num_vfs is
 * another non-zero count.  -ENXIO without a bound driver, -ERANGE above
 * sriov_totalvfs.  Does not look at the pool: see sriov_pool_set_num_vfs().
 */
int sriov_set_num_vfs(const char *sysfs_root, const char *pf, unsigned num_vfs);

/* ---- netlink ---- */

struct sriov_res_count {
	unsigned ctx, pd, mr, cq, qp;
};

/*
 * How netlink requests reach the kernel.  transact() sends @req on a socket
 * of @protocol (NETLINK_ROUTE or NETLINK_RDMA), passes every reply message to
 * @on_reply (it returns 0 or -errno) and returns 0 once the kernel acked or
 * finished the dump, else -errno (the kernel's own error when it sent one).
 * Tests put their own transact() here to capture the built messages.
 */
struct sriov_nl_ops {
	int (*transact)(void *opaque, int protocol, struct nl_msg *req,
			int (*on_reply)(struct nl_msg *reply, void *arg), void *arg);
	void *opaque;
};

/* The real kernel, through libnl sockets. */
extern const struct sriov_nl_ops sriov_nl_kernel;

enum sriov_link_state { SRIOV_LINK_AUTO, SRIOV_LINK_ENABLE, SRIOV_LINK_DISABLE };

enum {
	SRIOV_SET_MAC = 1 << 0,
	SRIOV_SET_TRUST = 1 << 1,
	SRIOV_SET_SPOOFCHK = 1 << 2,
	SRIOV_SET_LINK_STATE = 1 << 3,
	SRIOV_SET_NODE_GUID = 1 << 4,
	SRIOV_SET_PORT_GUID = 1 << 5,
};

struct sriov_vf_cfg {
	unsigned set; /* SRIOV_SET_* */
	uint8_t mac[6];
	bool trust;
	bool spoofchk;
	enum sriov_link_state link_state;
	uint64_t node_guid;
	uint64_t port_guid;
};

/* Applies @cfg to VF @vf_index of the PF netdev @pf_ifindex (one request per
 * setting, so that the first unsupported one names itself: the error is
 * returned with *ret_failed set to that SRIOV_SET_* bit, or 0). */
int sriov_vf_configure(const struct sriov_nl_ops *ops, int pf_ifindex, unsigned vf_index,
		       const struct sriov_vf_cfg *cfg, unsigned *ret_failed);
/* Sets the MAC address of a netdev (scrub of a soft device). */
int sriov_netdev_set_mac(const struct sriov_nl_ops *ops, int ifindex, const uint8_t mac[6]);
/* Counts the RDMA resources of @ibdev that belong to user processes
 * (RDMA netlink resource dumps; kernel-owned ones such as the GSI QP are not
 * a tenant's).  -EPROTONOSUPPORT when the kernel has no RDMA stack. */
int sriov_rdma_user_resources(const struct sriov_nl_ops *ops, const char *ibdev,
			      struct sriov_res_count *ret_count);
/* ifindex of a netdev, from <sysfs_root>/class/net/NAME/ifindex. */
int sriov_netdev_ifindex(const char *sysfs_root, const char *netdev, int *ret_ifindex);
/* ifindex of a PF's netdev (where its VFs' settings go); -ENODEV if none. */
int sriov_pf_ifindex(const char *sysfs_root, const char *pf, int *ret_ifindex);
/* A random, locally administered, unicast MAC / a random GUID. */
void sriov_random_mac(uint8_t ret_mac[6]);
uint64_t sriov_random_guid(void);

/* ---- the tenant pool ---- */

struct sriov_ctx {
	const char *sysfs_root;        /* "/sys" */
	const char *state_path;        /* SRIOV_DEFAULT_STATE */
	const struct sriov_nl_ops *nl; /* &sriov_nl_kernel */
};

#define SRIOV_DEFAULT_STATE "/var/lib/vrdma/sriov-state.json"

/* What a tenant got: everything the vhost back end needs to open it. */
struct sriov_assignment {
	char function[SRIOV_NAME_LEN]; /* pool key: PCI address or ibdev */
	char pci[SRIOV_PCI_LEN];       /* "" for a soft device */
	char pf[SRIOV_PCI_LEN];
	char ibdev[SRIOV_NAME_LEN];
	char uverbs[SRIOV_PATH_LEN];
	char netdev[SRIOV_NAME_LEN];
	int numa_node;
	char tenant[SRIOV_TENANT_LEN];
	bool new; /* taken by this call (not an existing assignment) */
};

/* Restricts which free function sriov_tenant_acquire() may take. */
struct sriov_filter {
	const char *pf; /* PCI address of the PF, or NULL */
	int numa_node;  /* -1: any */
};

/*
 * For the vhost back end's --tenant T: returns T's existing assignment, or
 * takes a free function for T (matching @filter, may be NULL) and records
 * it.  -ENOSPC when none is free, -EBADMSG when the state file is corrupt.
 */
int sriov_tenant_acquire(const struct sriov_ctx *ctx, const char *tenant,
			 const struct sriov_filter *filter, struct sriov_assignment *ret);

/*
 * For the back end's explicit --vf PCI / --ibdev NAME (@device is either).
 * A pool function is only ever used by its recorded tenant: -EPERM if it
 * belongs to a tenant other than @tenant, or if @tenant is NULL (an
 * unrecorded user would share it with the next tenant); -EBUSY if it is
 * waiting to be scrubbed or a back end holds its lease.  A free one is
 * recorded for @tenant.  A function outside the pool (a PF, an rxe device
 * nobody added) is returned unrecorded to an untenanted caller and refused
 * (-EXDEV) to a tenant.  -ENOENT if sysfs does not have it.
 */
int sriov_tenant_claim(const struct sriov_ctx *ctx, const char *tenant, const char *device,
		       struct sriov_assignment *ret);

/*
 * A running back end's hold on its function: an exclusive flock on the 0600
 * file <state_path>.lease.<function>, kept for the back end's whole life
 * (it ends when *@ret_fd is closed, or the process exits).  Taken under the
 * pool lock after checking that the pool still says what @a (from
 * sriov_tenant_acquire/claim) says: -ESTALE if it changed since, -EBUSY if
 * another back end holds the lease.  While it is held the function is never
 * handed out, and sriov_pool_release() and sriov_pool_scrub() refuse it
 * with -EBUSY (the tenant's record stays as it is).
 */
int sriov_lease_take(const struct sriov_ctx *ctx, const struct sriov_assignment *a, int *ret_fd);
/* 1 if a back end holds the lease of @function, else 0 (or -errno). */
int sriov_lease_held(const struct sriov_ctx *ctx, const char *function);

/* Pool state of one function, for listings. */
enum sriov_pool_state {
	SRIOV_POOL_NONE,     /* not a pool member */
	SRIOV_POOL_FREE,
	SRIOV_POOL_ASSIGNED,
	SRIOV_POOL_DIRTY,    /* released, not yet scrubbed: never handed out */
};

struct sriov_pool_entry {
	char function[SRIOV_NAME_LEN];
	enum sriov_pool_state state;
	char tenant[SRIOV_TENANT_LEN]; /* ASSIGNED, DIRTY: the (last) tenant */
	int64_t since;                 /* unix time of the last change */
};

struct sriov_pool;
/* A snapshot of the state file (read without the lock: it is replaced by
 * rename, so a reader sees one whole version). */
int sriov_pool_load(const char *state_path, struct sriov_pool **ret_pool);
void sriov_pool_free(struct sriov_pool *pool);
/* State of @fn in @pool: VFs with an RDMA device are members implicitly,
 * anything else only after sriov_pool_add(). */
void sriov_pool_lookup(const struct sriov_pool *pool, const struct sriov_fn *fn,
		       struct sriov_pool_entry *ret);

/* Makes a non-VF function (rxe device, plain PCI function) a pool member:
 * -EINVAL for a PF (the host's NIC), -EOPNOTSUPP for one the scrub could not
 * give a new identity (no netdev, or InfiniBand), -EBUSY while leased. */
int sriov_pool_add(const struct sriov_ctx *ctx, const char *device);
/* Removes an explicit member; -EBUSY while assigned or dirty. */
int sriov_pool_remove(const struct sriov_ctx *ctx, const char *device);

/*
 * Ends a tenant's use of a function (by tenant, or by @device when @tenant
 * is NULL): the function becomes dirty, then is scrubbed (sriov_scrub).
 * -EBUSY, with nothing changed, while a back end holds its lease
 * (sriov_lease_held() tells).  -EBUSY, and the function stays dirty, while
 * RDMA resources of user processes remain on it (*ret_left says how many of
 * each), or the reset failed: retry with sriov_pool_scrub().
 */
int sriov_pool_release(const struct sriov_ctx *ctx, const char *tenant, const char *device,
		       char ret_function[SRIOV_NAME_LEN], struct sriov_res_count *ret_left);
/* Scrubs a dirty function again and frees it on success; -EINVAL for a
 * function that is not dirty, -EPERM for an assigned one. */
int sriov_pool_scrub(const struct sriov_ctx *ctx, const char *device,
		     struct sriov_res_count *ret_left);

/* sriov_set_num_vfs() under the pool lock: -EBUSY while a VF of @pf that is
 * about to disappear is assigned or dirty (its tenant is named in
 * @ret_tenant). */
int sriov_pool_set_num_vfs(const struct sriov_ctx *ctx, const char *pf, unsigned num_vfs,
			   char ret_tenant[SRIOV_TENANT_LEN]);

/*
 * The scrub itself, no pool bookkeeping: refuses (-EBUSY, counts in
 * @ret_left) while user processes hold RDMA resources on the function's
 * device, then gives it a fresh random MAC (Ethernet) or node and port GUIDs
 * (InfiniBand) and resets link state (auto), trust (off) and spoof checking
 * (on) through its PF.  A soft device gets a fresh MAC on its netdev.
 * -EOPNOTSUPP when there is no identity to change (no netdev, or a non-VF
 * InfiniBand device).  VLAN, QoS and rate limits are not reset.
 */
int sriov_scrub(const struct sriov_ctx *ctx, const struct sriov_fn *fn,
		struct sriov_res_count *ret_left);

#endif

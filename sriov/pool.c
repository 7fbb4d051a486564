// SPDX-License-Identifier: MIT
/*
 * The tenant pool.  Every operation is one transaction: lock, read the state
 * file, scan sysfs, decide, save, unlock, so that two concurrent invocations
 * (two back ends starting, an operator's CLI) never hand out one function
 * twice.  A released function is "dirty" until its scrub succeeds and is
 * never handed out while dirty: the record is saved as dirty before the
 * scrub starts, so a crash during the scrub cannot free it either.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "sriov-internal.h"
#include "util.h"

struct txn {
	int lock_fd;
	struct sriov_pool *pool;
	struct sriov_scan *scan;
};

/* The end of every transaction, as the cleanup of its variable. */
static void txn_end(struct txn *t)
{
	sriov_pool_free(t->pool);
	sriov_scan_free(t->scan);
	closep(&t->lock_fd);
}

static int txn_begin(const struct sriov_ctx *ctx, struct txn *t)
{
	int r;

	*t = (struct txn){ .lock_fd = sriov_state_lock(ctx->state_path) };
	if (t->lock_fd < 0)
		return t->lock_fd;
	r = sriov_pool_load(ctx->state_path, &t->pool);
	if (r == 0)
		r = sriov_scan(ctx->sysfs_root, &t->scan);
	return r;
}

/* ---- leases: a running back end's flock on its function ---- */

static char *lease_path(const struct sriov_ctx *ctx, const char *function)
{
	return g_strconcat(ctx->state_path, ".lease.", function, NULL);
}

int sriov_lease_held(const struct sriov_ctx *ctx, const char *function)
{
	g_autofree char *path = NULL;
	_cleanup_(closep) int fd = -1;

	if (!sriov_function_key_valid(function))
		return -EINVAL;
	path = lease_path(ctx, function);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	/* Closing @fd drops this probe's lock at once. */
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	return errno == EWOULDBLOCK ? 1 : -errno;
}

/* -EBUSY while a back end holds @function. */
static int check_no_lease(const struct sriov_ctx *ctx, const char *function)
{
	int r = sriov_lease_held(ctx, function);

	return r > 0 ? -EBUSY : r;
}

static bool is_candidate(const struct sriov_pool *pool, const struct sriov_fn *fn)
{
	return fn->status == 0 && fn->ibdev[0] &&
	       (fn->kind == SRIOV_VF || sriov_pool_is_member(pool, fn->id));
}

void sriov_pool_lookup(const struct sriov_pool *pool, const struct sriov_fn *fn,
		       struct sriov_pool_entry *ret)
{
	const struct sriov_record *rec = sriov_pool_find_record(pool, fn->id);

	*ret = (struct sriov_pool_entry){ .state = SRIOV_POOL_NONE };
	snprintf(ret->function, sizeof(ret->function), "%s", fn->id);
	if (rec) {
		ret->state = rec->state;
		snprintf(ret->tenant, sizeof(ret->tenant), "%s", rec->tenant);
		ret->since = rec->since;
	} else if (is_candidate(pool, fn)) {
		ret->state = SRIOV_POOL_FREE;
	}
}

static void fill_assignment(const struct sriov_fn *fn, const char *tenant, bool is_new,
			    struct sriov_assignment *ret)
{
	*ret = (struct sriov_assignment){ .numa_node = fn->numa_node, .new = is_new };
	snprintf(ret->function, sizeof(ret->function), "%s", fn->id);
	snprintf(ret->pci, sizeof(ret->pci), "%s", fn->pci);
	snprintf(ret->pf, sizeof(ret->pf), "%s", fn->pf);
	snprintf(ret->ibdev, sizeof(ret->ibdev), "%s", fn->ibdev);
	snprintf(ret->uverbs, sizeof(ret->uverbs), "%s", fn->uverbs);
	snprintf(ret->netdev, sizeof(ret->netdev), "%s", fn->netdev);
	snprintf(ret->tenant, sizeof(ret->tenant), "%s", tenant ? tenant : "");
}

static int record_assigned(const struct sriov_ctx *ctx, struct txn *t, const char *function,
			   const char *tenant)
{
	struct sriov_record rec = { .state = SRIOV_POOL_ASSIGNED, .since = (int64_t)time(NULL) };

	snprintf(rec.function, sizeof(rec.function), "%s", function);
	snprintf(rec.tenant, sizeof(rec.tenant), "%s", tenant);
	g_array_append_val(t->pool->records, rec);
	return sriov_state_save(ctx->state_path, t->pool);
}

static const struct sriov_record *tenant_record(const struct sriov_pool *pool, const char *tenant,
						enum sriov_pool_state state)
{
	for (guint i = 0; i < pool->records->len; i++) {
		const struct sriov_record *r = &g_array_index(pool->records, struct sriov_record, i);

		if (r->state == state && !strcmp(r->tenant, tenant))
			return r;
	}
	return NULL;
}

static bool matches(const struct sriov_fn *fn, const struct sriov_filter *f)
{
	char pf[SRIOV_PCI_LEN];

	if (!f)
		return true;
	if (f->pf && (sriov_pci_normalize(f->pf, pf) < 0 || strcmp(fn->pf, pf)))
		return false;
	return f->numa_node < 0 || fn->numa_node == f->numa_node;
}

static int acquire(const struct sriov_ctx *ctx, struct txn *t, const char *tenant,
		   const struct sriov_filter *filter, struct sriov_assignment *ret)
{
	const struct sriov_record *own = tenant_record(t->pool, tenant, SRIOV_POOL_ASSIGNED);
	int r;

	if (own) {
		const struct sriov_fn *fn = sriov_scan_find(t->scan, own->function);

		if (!fn)
			return -ENODEV; /* its VF vanished from sysfs */
		fill_assignment(fn, tenant, false, ret);
		return 0;
	}
	for (size_t i = 0; i < t->scan->n; i++) {
		const struct sriov_fn *fn = &t->scan->fns[i];

		if (!is_candidate(t->pool, fn) || sriov_pool_find_record(t->pool, fn->id) ||
		    !matches(fn, filter) || check_no_lease(ctx, fn->id) < 0)
			continue;
		r = record_assigned(ctx, t, fn->id, tenant);
		if (r < 0)
			return r;
		fill_assignment(fn, tenant, true, ret);
		return 0;
	}
	return -ENOSPC;
}

int sriov_tenant_acquire(const struct sriov_ctx *ctx, const char *tenant,
			 const struct sriov_filter *filter, struct sriov_assignment *ret)
{
	if (!sriov_tenant_valid(tenant) || (filter && filter->pf && !sriov_pci_valid(filter->pf)))
		return -EINVAL;
	_cleanup_(txn_end) struct txn t;
	int r = txn_begin(ctx, &t);

	return r ? r : acquire(ctx, &t, tenant, filter, ret);
}

static int claim(const struct sriov_ctx *ctx, struct txn *t, const char *tenant,
		 const char *device, struct sriov_assignment *ret)
{
	const struct sriov_fn *fn = sriov_scan_find(t->scan, device);
	const struct sriov_record *rec;
	int r;

	if (!fn)
		return -ENOENT;
	rec = sriov_pool_find_record(t->pool, fn->id);
	if (rec && rec->state == SRIOV_POOL_DIRTY)
		return -EBUSY;
	if (rec && (!tenant || strcmp(rec->tenant, tenant)))
		return -EPERM;
	if (fn->status < 0)
		return fn->status;
	if (rec) {
		fill_assignment(fn, rec->tenant, false, ret);
		return 0;
	}
	if (!is_candidate(t->pool, fn)) {
		/* Outside the pool nothing records a tenant, so nothing could
		 * keep the function from a second tenant: only an untenanted
		 * (operator's) back end may use it. */
		if (tenant)
			return -EXDEV;
		fill_assignment(fn, NULL, false, ret);
		return 0;
	}
	/* A free pool member: unrecorded, it would be handed out again. */
	if (!tenant)
		return -EPERM;
	r = check_no_lease(ctx, fn->id);
	if (r < 0)
		return r;
	/* One function per tenant: a second one is a configuration mistake. */
	if (tenant_record(t->pool, tenant, SRIOV_POOL_ASSIGNED))
		return -EEXIST;
	fill_assignment(fn, tenant, true, ret);
	return record_assigned(ctx, t, fn->id, tenant);
}

int sriov_tenant_claim(const struct sriov_ctx *ctx, const char *tenant, const char *device,
		       struct sriov_assignment *ret)
{
	if ((tenant && !sriov_tenant_valid(tenant)) || !device ||
	    !(sriov_pci_valid(device) || sriov_name_valid(device)))
		return -EINVAL;
	_cleanup_(txn_end) struct txn t;
	int r = txn_begin(ctx, &t);

	return r ? r : claim(ctx, &t, tenant, device, ret);
}

/* Does the pool still say what @a says? */
static bool still_holds(const struct txn *t, const struct sriov_assignment *a)
{
	const struct sriov_fn *fn = sriov_scan_find(t->scan, a->function);
	const struct sriov_record *rec;

	if (!fn || strcmp(fn->id, a->function))
		return false;
	rec = sriov_pool_find_record(t->pool, fn->id);
	if (!a->tenant[0])
		return !rec && !is_candidate(t->pool, fn);
	return rec && rec->state == SRIOV_POOL_ASSIGNED && !strcmp(rec->tenant, a->tenant);
}

static int lease_take(const struct sriov_ctx *ctx, struct txn *t,
		      const struct sriov_assignment *a, int *ret_fd)
{
	g_autofree char *path = lease_path(ctx, a->function);
	_cleanup_(closep) int fd = -1;

	if (!still_holds(t, a))
		return -ESTALE;
	fd = sriov_open_private(path, O_RDWR);
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK ? -EBUSY : -errno;
	*ret_fd = steal_fd(&fd);
	return 0;
}

int sriov_lease_take(const struct sriov_ctx *ctx, const struct sriov_assignment *a, int *ret_fd)
{
	*ret_fd = -1;
	if (!sriov_function_key_valid(a->function) || (a->tenant[0] && !sriov_tenant_valid(a->tenant)))
		return -EINVAL;
	/* Under the pool lock, like every check of a lease: a release either
	 * ran before (and the check fails) or sees the lease. */
	_cleanup_(txn_end) struct txn t;
	int r = txn_begin(ctx, &t);

	return r ? r : lease_take(ctx, &t, a, ret_fd);
}

static void remove_record(struct sriov_pool *pool, const char *function)
{
	for (guint i = 0; i < pool->records->len; i++)
		if (!strcmp(g_array_index(pool->records, struct sriov_record, i).function, function)) {
			g_array_remove_index(pool->records, i);
			return;
		}
}

/* Scrubs the dirty function @function and frees it when that worked. */
static int scrub_and_free(const struct sriov_ctx *ctx, struct txn *t, const char *function,
			  struct sriov_res_count *ret_left)
{
	const struct sriov_fn *fn = sriov_scan_find(t->scan, function);
	int r;

	if (!fn)
		return -ENODEV; /* stays dirty: we cannot prove it is clean */
	r = check_no_lease(ctx, function);
	if (r < 0)
		return r;
	r = sriov_scrub(ctx, fn, ret_left);
	if (r < 0)
		return r;
	remove_record(t->pool, function);
	return sriov_state_save(ctx->state_path, t->pool);
}

/* The record a release names: by tenant (assigned first, else a dirty one
 * being retried) or by function. */
static struct sriov_record *release_target(struct txn *t, const char *tenant, const char *device)
{
	const struct sriov_fn *fn;
	char pci[SRIOV_PCI_LEN];

	if (tenant) {
		const struct sriov_record *r = tenant_record(t->pool, tenant, SRIOV_POOL_ASSIGNED);

		if (!r)
			r = tenant_record(t->pool, tenant, SRIOV_POOL_DIRTY);
		return r ? sriov_pool_find_record(t->pool, r->function) : NULL;
	}
	fn = sriov_scan_find(t->scan, device);
	if (fn)
		return sriov_pool_find_record(t->pool, fn->id);
	/* Gone from sysfs: the record can still be named. */
	return sriov_pool_find_record(t->pool,
				      sriov_pci_normalize(device, pci) == 0 ? pci : device);
}

static int release(const struct sriov_ctx *ctx, struct txn *t, const char *tenant,
		   const char *device, char ret_function[SRIOV_NAME_LEN],
		   struct sriov_res_count *ret_left)
{
	struct sriov_record *rec = release_target(t, tenant, device);
	char function[SRIOV_NAME_LEN];
	int r;

	if (!rec)
		return -ENOENT;
	snprintf(function, sizeof(function), "%s", rec->function);
	if (ret_function)
		snprintf(ret_function, SRIOV_NAME_LEN, "%s", function);
	/* The tenant's back end still runs: it stays assigned. */
	r = check_no_lease(ctx, function);
	if (r < 0)
		return r;
	if (rec->state == SRIOV_POOL_ASSIGNED) {
		rec->state = SRIOV_POOL_DIRTY;
		rec->since = (int64_t)time(NULL);
		r = sriov_state_save(ctx->state_path, t->pool);
		if (r < 0)
			return r;
	}
	return scrub_and_free(ctx, t, function, ret_left);
}

int sriov_pool_release(const struct sriov_ctx *ctx, const char *tenant, const char *device,
		       char ret_function[SRIOV_NAME_LEN], struct sriov_res_count *ret_left)
{
	struct sriov_res_count left = { 0 };
	struct txn t;
	int r;

	if (!tenant == !device || (tenant && !sriov_tenant_valid(tenant)))
		return -EINVAL;
	r = txn_begin(ctx, &t);
	if (r == 0)
		r = release(ctx, &t, tenant, device, ret_function, &left);
	txn_end(&t);
	if (ret_left)
		*ret_left = left;
	return r;
}

static int scrub_cmd(const struct sriov_ctx *ctx, struct txn *t, const char *device,
		     struct sriov_res_count *ret_left)
{
	const struct sriov_fn *fn = sriov_scan_find(t->scan, device);
	const struct sriov_record *rec;

	if (!fn)
		return -ENOENT;
	rec = sriov_pool_find_record(t->pool, fn->id);
	if (rec && rec->state == SRIOV_POOL_ASSIGNED)
		return -EPERM; /* scrubbing would pull it from under its tenant */
	/* Only a released function is scrubbed: anything else may be a host
	 * NIC (a PF) whose MAC is not ours to change. */
	if (!rec)
		return -EINVAL;
	return scrub_and_free(ctx, t, fn->id, ret_left);
}

int sriov_pool_scrub(const struct sriov_ctx *ctx, const char *device,
		     struct sriov_res_count *ret_left)
{
	struct sriov_res_count left = { 0 };
	struct txn t;
	int r;

	if (!device)
		return -EINVAL;
	r = txn_begin(ctx, &t);
	if (r == 0)
		r = scrub_cmd(ctx, &t, device, &left);
	txn_end(&t);
	if (ret_left)
		*ret_left = left;
	return r;
}

static int add_member(const struct sriov_ctx *ctx, struct txn *t, const char *device)
{
	const struct sriov_fn *fn = sriov_scan_find(t->scan, device);
	int r;

	if (!fn)
		return -ENOENT;
	if (fn->status < 0)
		return fn->status;
	if (!fn->ibdev[0])
		return -ENODEV; /* nothing a tenant could use */
	if (fn->kind == SRIOV_PF)
		return -EINVAL; /* the host's NIC: its VFs are the pool */
	if (fn->kind == SRIOV_VF || sriov_pool_is_member(t->pool, fn->id))
		return 0;
	if (!sriov_scrub_possible(fn))
		return -EOPNOTSUPP; /* it could never leave "dirty" */
	/* An untenanted back end uses it: a tenant must not get it too. */
	r = check_no_lease(ctx, fn->id);
	if (r < 0)
		return r;
	g_ptr_array_add(t->pool->members, g_strdup(fn->id));
	return sriov_state_save(ctx->state_path, t->pool);
}

static int remove_member(const struct sriov_ctx *ctx, struct txn *t, const char *device)
{
	const struct sriov_fn *fn = sriov_scan_find(t->scan, device);
	char pci[SRIOV_PCI_LEN];
	const char *key = fn ? fn->id : sriov_pci_normalize(device, pci) == 0 ? pci : device;

	for (guint i = 0; i < t->pool->members->len; i++) {
		if (strcmp(t->pool->members->pdata[i], key))
			continue;
		if (sriov_pool_find_record(t->pool, key))
			return -EBUSY;
		g_ptr_array_remove_index(t->pool->members, i);
		return sriov_state_save(ctx->state_path, t->pool);
	}
	return -ENOENT;
}

/* 'pool add' and 'pool remove': one change to the members, under the lock. */
static int change_members(const struct sriov_ctx *ctx, const char *device,
			  int (*change)(const struct sriov_ctx *ctx, struct txn *t,
					const char *device))
{
	if (!device)
		return -EINVAL;
	_cleanup_(txn_end) struct txn t;
	int r = txn_begin(ctx, &t);

	return r ? r : change(ctx, &t, device);
}

int sriov_pool_add(const struct sriov_ctx *ctx, const char *device)
{
	return change_members(ctx, device, add_member);
}

int sriov_pool_remove(const struct sriov_ctx *ctx, const char *device)
{
	return change_members(ctx, device, remove_member);
}

/* A VF that disappears with the new count while someone still owns it. */
static const struct sriov_record *doomed_record(struct txn *t, const char *pf, unsigned num_vfs)
{
	for (size_t i = 0; i < t->scan->n; i++) {
		const struct sriov_fn *fn = &t->scan->fns[i];
		const struct sriov_record *rec;

		if (fn->kind != SRIOV_VF || strcmp(fn->pf, pf) || (unsigned)fn->vf_index < num_vfs)
			continue;
		rec = sriov_pool_find_record(t->pool, fn->id);
		if (rec)
			return rec;
	}
	return NULL;
}

int sriov_pool_set_num_vfs(const struct sriov_ctx *ctx, const char *pf, unsigned num_vfs,
			   char ret_tenant[SRIOV_TENANT_LEN])
{
	char pci[SRIOV_PCI_LEN];
	const struct sriov_record *rec;
	struct txn t;
	int r;

	ret_tenant[0] = '\0';
	if (sriov_pci_normalize(pf, pci) < 0)
		return -EINVAL;
	r = txn_begin(ctx, &t);
	if (r == 0 && (rec = doomed_record(&t, pci, num_vfs))) {
		snprintf(ret_tenant, SRIOV_TENANT_LEN, "%s", rec->tenant);
		r = -EBUSY;
	}
	if (r == 0)
		r = sriov_set_num_vfs(ctx->sysfs_root, pci, num_vfs);
	txn_end(&t);
	return r;
}

// SPDX-License-Identifier: MIT
/*
 * The paravirtual RDMA device type (virtio device id 42): the tenant's
 * host function is opened once per daemon, each front-end connection is
 * one guest device with its own objects, and the tenant's quotas are
 * shared by all of them.  See docs/virtio-rdma.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#include "device.h"
#include "prom.h"
#include "rdma-internal.h"
#include "util.h"

static struct ibv_context *open_by_name(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (strcmp(ibv_get_device_name(list[i]), name) == 0) {
			ctx = ibv_open_device(list[i]);
			break;
		}
	if (list)
		ibv_free_device_list(list);
	if (!ctx && !errno)
		errno = ENODEV;
	return ctx;
}

/* ---- the tenant's mappings of guest pages ---- */

int rdma_pages_map(struct rdma_dev *d, const uint64_t *gpas, uint64_t npages,
		   unsigned int page_shift, bool guarded, struct vu_pages **ret)
{
	struct rdma_shared *sh = d->sh;
	int r = vu_pages_map(d->vu, gpas, npages, page_shift, guarded,
			     sh->limit.maps - MIN(sh->used.maps, sh->limit.maps), ret);

	if (r == 0)
		sh->used.maps += (*ret)->nmaps;
	return r;
}

void rdma_pages_unmap(struct rdma_dev *d, struct vu_pages **pages)
{
	if (!*pages)
		return;
	d->sh->used.maps -= (*pages)->nmaps;
	vu_pages_unmap(g_steal_pointer(pages));
}

/* ---- the guest's GID table ---- */

bool rdma_gid_is_ipv4(const uint8_t gid[16])
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(gid, mapped, sizeof(mapped)) == 0;
}

/* Which entry of the guest's table a function GID is, or -ENOENT.  The
 * default table: the first RoCE v2 IPv4 GID, which first_v4 says. */
static int guest_index_of(const struct rdma_shared *sh, const struct ibv_gid_entry *e,
			  bool first_v4)
{
	if (e->gid_type != IBV_GID_TYPE_ROCE_V2)
		return -ENOENT;
	if (!sh->n_allowed_gids)
		return first_v4 && rdma_gid_is_ipv4(e->gid.raw) ? 0 : -ENOENT;
	for (unsigned int i = 0; i < sh->n_allowed_gids; i++)
		if (memcmp(e->gid.raw, sh->allowed_gid[i], 16) == 0)
			return (int)i;
	return -ENOENT;
}

/* Walks the function's table in order; ret_entry gets the match. */
static int find_gid(const struct rdma_shared *sh, bool by_host, uint32_t want,
		    struct ibv_gid_entry *ret_entry)
{
	bool first_v4 = true;

	for (uint32_t i = 0; i < MIN((uint32_t)sh->port.gid_tbl_len, 256u); i++) {
		struct ibv_gid_entry e;
		int gi;

		if (ibv_query_gid_ex(sh->ctx, 1, i, &e, 0))
			continue;
		gi = guest_index_of(sh, &e, first_v4);
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && rdma_gid_is_ipv4(e.gid.raw))
			first_v4 = false;
		if (gi < 0 || (by_host ? i != want : (uint32_t)gi != want))
			continue;
		if (ret_entry)
			*ret_entry = e;
		return by_host ? gi : (int)i;
	}
	return -ENOENT;
}

int rdma_gid_to_host(const struct rdma_shared *sh, uint32_t guest_index,
		     struct ibv_gid_entry *ret_entry)
{
	return find_gid(sh, false, guest_index, ret_entry);
}

int rdma_gid_from_host(const struct rdma_shared *sh, uint32_t host_index)
{
	return find_gid(sh, true, host_index, NULL);
}

/* What the device offers: the host's limits, clamped to the spec's. */
static void limits_from_host(struct rdma_shared *sh)
{
	const struct ibv_device_attr *a = &sh->attr;

	sh->lim = (struct rdma_limits){
		.max_mr_size = MIN(a->max_mr_size, RDMA_MAX_MR_SIZE),
		.max_qp_wr = MIN((uint32_t)a->max_qp_wr, (1u << RDMA_MAX_LOG2_SLOTS) - 1),
		.max_cqe = MIN((uint32_t)a->max_cqe / 2, (1u << RDMA_MAX_LOG2_SLOTS) - 1),
		.max_send_sge = MIN((uint32_t)a->max_sge, RDMA_MAX_SGE),
		.max_recv_sge = MIN((uint32_t)a->max_sge, RDMA_MAX_SGE),
		.max_inline = RDMA_MAX_INLINE,
		.gid_tbl_len = sh->n_allowed_gids ? sh->n_allowed_gids : 1,
		.max_rd_atom = (uint8_t)MIN(a->max_qp_rd_atom, 16),
		.atomics = a->atomic_cap != IBV_ATOMIC_NONE,
	};
}

/*
 * One fd for the daemon to watch: the host device's asynchronous events
 * and, with --rdma-peer-port, the peer protocol (rdma-peer.c), which
 * listens on each of the tenant's GIDs.
 */
static int watch_init(struct rdma_shared *sh, const struct vhost_device_args *args)
{
	const uint8_t(*gids)[16] = (const uint8_t(*)[16])sh->allowed_gid;
	unsigned int n_gids = sh->n_allowed_gids;
	struct ibv_gid_entry first;
	int r;

	sh->watch_fd = epoll_create1(EPOLL_CLOEXEC);
	if (sh->watch_fd < 0 ||
	    epoll_ctl(sh->watch_fd, EPOLL_CTL_ADD, sh->ctx->async_fd,
		      &(struct epoll_event){ .events = EPOLLIN }))
		return -errno;
	if (!args->rdma_peer_port)
		return 0;
	if (!args->rdma_peer_psk)
		return -EINVAL;
	/* No GIDs given: the guest's one is the function's first IPv4 GID. */
	if (!n_gids) {
		if (rdma_gid_to_host(sh, 0, &first) < 0)
			return -ENETUNREACH;
		gids = (const uint8_t(*)[16])first.gid.raw;
		n_gids = 1;
	}
	r = rdma_peer_open(sh, args->rdma_peer_port, args->rdma_peer_psk, gids, n_gids);
	if (!r && epoll_ctl(sh->watch_fd, EPOLL_CTL_ADD, rdma_peer_fd(sh),
			    &(struct epoll_event){ .events = EPOLLIN }))
		r = -errno;
	return r;
}

static void rdma_close(void *shared)
{
	struct rdma_shared *sh = shared;

	if (!sh)
		return;
	rdma_peer_close(sh);
	if (sh->watch_fd >= 0)
		close(sh->watch_fd);
	ibv_close_device(sh->ctx);
	g_free(sh);
}

static int rdma_open(const struct vhost_device_args *args, void **ret_shared)
{
	g_autofree struct rdma_shared *sh = NULL;
	int r;

	if (!args->ibdev)
		return -ENODEV;
	sh = g_new0(struct rdma_shared, 1);
	sh->watch_fd = -1;
	errno = 0;
	sh->ctx = open_by_name(args->ibdev);
	if (!sh->ctx)
		return -errno;
	r = ibv_query_device(sh->ctx, &sh->attr);
	if (!r)
		r = ibv_query_port(sh->ctx, 1, &sh->port);
	if (r) {
		ibv_close_device(sh->ctx);
		return -r;
	}
	if (args->n_rdma_gids > RDMA_MAX_TENANT_GIDS) {
		ibv_close_device(sh->ctx);
		return -E2BIG;
	}
	memcpy(sh->allowed_gid, args->rdma_gids, 16ull * args->n_rdma_gids);
	sh->n_allowed_gids = args->n_rdma_gids;
	limits_from_host(sh);
	r = fcntl(sh->ctx->async_fd, F_GETFL);
	if (r < 0 || fcntl(sh->ctx->async_fd, F_SETFL, r | O_NONBLOCK) < 0) {
		r = -errno;
		ibv_close_device(sh->ctx);
		return r;
	}
	sh->limit = (struct rdma_quota){
		.pds = args->rdma_quota.pds, .mrs = args->rdma_quota.mrs,
		.cqs = args->rdma_quota.cqs, .qps = args->rdma_quota.qps,
		.pinned_bytes = args->rdma_quota.pinned_bytes, .wrs = args->rdma_quota.wrs,
		.maps = args->rdma_quota.maps,
	};
	sh->generation = g_random_int() | 1;
	sh->poll_ns = (uint64_t)args->rdma_poll_us * 1000;
	sh->prefault = args->rdma_prefault;
	r = watch_init(sh, args);
	if (r) {
		rdma_close(g_steal_pointer(&sh));
		return r;
	}
	*ret_shared = g_steal_pointer(&sh);
	return 0;
}

static int rdma_shared_fd(void *shared)
{
	return ((struct rdma_shared *)shared)->watch_fd;
}

static void broadcast(struct rdma_shared *sh, uint16_t type, uint32_t data)
{
	for (GList *l = sh->devs; l; l = l->next) {
		rdma_post_event(l->data, type, 0, data);
		rdma_flush_events(l->data);
	}
}

/*
 * The host device's asynchronous events, for every connection: a QP or
 * CQ event goes to the one that owns it (destroying a QP or CQ waits for
 * its events to be acknowledged, so the context is still valid here).
 */
static void rdma_shared_ready(void *shared)
{
	struct rdma_shared *sh = shared;
	struct ibv_async_event ev;

	while (ibv_get_async_event(sh->ctx, &ev) == 0) {
		struct rdma_qp *qp = NULL;
		struct rdma_cq *cq;

		switch (ev.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
			qp = ev.element.qp->qp_context;
			if (qp->state != VRDMA_QPS_ERR)
				rdma_qp_fatal(qp->dev, qp, VRDMA_QPF_HOST);
			rdma_flush_events(qp->dev);
			break;
		case IBV_EVENT_CQ_ERR:
			cq = ev.element.cq->cq_context;
			rdma_cq_fail(cq->dev, cq);
			rdma_flush_events(cq->dev);
			break;
		case IBV_EVENT_PORT_ACTIVE:
			broadcast(sh, VRDMA_EV_PORT_ACTIVE, 1);
			break;
		case IBV_EVENT_PORT_ERR:
			broadcast(sh, VRDMA_EV_PORT_ERR, 1);
			break;
		case IBV_EVENT_DEVICE_FATAL:
			broadcast(sh, VRDMA_EV_DEVICE_FATAL, 0);
			break;
		default:
			break; /* informational (path migration, GID or LID change...) */
		}
		ibv_ack_async_event(&ev);
	}
	rdma_peer_ready(sh);
}

static int rdma_get_config(void *opaque, uint32_t offset, uint8_t *buf, uint32_t len)
{
	struct rdma_dev *d = opaque;
	const struct rdma_shared *sh = d->sh;
	struct vrdma_config cfg = {
		.node_guid = sh->attr.node_guid,
		.sys_image_guid = sh->attr.sys_image_guid,
		.max_qp = MIN((uint32_t)sh->attr.max_qp, sh->limit.qps),
		.max_cq = MIN((uint32_t)sh->attr.max_cq, sh->limit.cqs),
		.max_mr = MIN((uint32_t)sh->attr.max_mr, sh->limit.mrs),
		.max_pd = MIN((uint32_t)sh->attr.max_pd, sh->limit.pds),
		.max_qp_wr = sh->lim.max_qp_wr,
		.max_cqe = sh->lim.max_cqe,
		.generation = d->generation,
		.max_sge = (uint16_t)sh->lim.max_send_sge,
		.phys_port_cnt = 1,
	};

	memset(buf, 0, len);
	if (offset < sizeof(cfg))
		memcpy(buf, (uint8_t *)&cfg + offset, MIN((size_t)len, sizeof(cfg) - offset));
	return 0;
}

static int rdma_set_config(void *opaque, uint32_t offset, const uint8_t *buf, uint32_t len)
{
	(void)opaque, (void)offset, (void)buf, (void)len;
	return -EPERM;
}

/*
 * A queue that starts past slot 0 on a device that never ran was running
 * before elsewhere (a live migration, or a back end restarted under the
 * guest): its objects are gone with that device.  The driver hears it once.
 */
static void check_session(struct rdma_dev *d, struct vu_vq *vq)
{
	unsigned int bit = 1u << vq_index(vq);

	if (d->kicked & bit)
		return;
	d->kicked |= bit;
	/* A migrated instance continues its session with its objects. */
	if (!vq_next_avail(vq) || d->session_lost || d->restored)
		return;
	d->session_lost = true;
	rdma_post_event(d, VRDMA_EV_DEVICE_FATAL, 0, 0);
	vu_dev_config_changed(d->vu);
}

static void rdma_queue_kick(void *opaque, struct vu_vq *vq)
{
	struct rdma_dev *d = opaque;

	/* A migrated guest's objects, made before anything of it is served;
	 * if that fails, its session ends here (check_session). */
	if (d->incoming)
		rdma_state_apply(d);
	check_session(d, vq);
	/* Started again after a stop (a migration that failed): go on, and
	 * so do the peers held for the move. */
	if (d->quiesced)
		rdma_peer_resume(d);
	d->quiesced = false;
	rdma_work_refill(d);
	switch (vq_index(vq)) {
	case VRDMA_VQ_CTRL:
		rdma_ctrl_kick(d, vq);
		break;
	case VRDMA_VQ_DOORBELL:
		rdma_doorbell_kick(d, vq);
		break;
	default:
		rdma_event_kick(d, vq);
		break;
	}
}

static void rdma_queue_stop(void *opaque, struct vu_vq *vq)
{
	struct rdma_dev *d = opaque;

	/* Paused without migration, the guest's memory stays ours to write. */
	if (vu_dev_logging(d->vu))
		rdma_quiesce(d);
	if (vq == d->event_vq)
		d->event_vq = NULL;
}

/* Guest memory under objects is going: they die before it is unmapped. */
static void rdma_mem_gone(void *opaque, uint64_t gpa, uint64_t size)
{
	struct rdma_dev *d = opaque;

	for (uint32_t i = 0; i < d->mrs.cap; i++) {
		struct rdma_mr *mr = d->mrs.obj[i];

		if (!mr || !mr->pages || !vu_pages_overlap(mr->pages, gpa, size))
			continue;
		for (uint32_t j = 0; j < d->qps.cap; j++) {
			struct rdma_qp *qp = d->qps.obj[j];

			if (qp && qp->pd == mr->pd && qp->state != VRDMA_QPS_ERR)
				rdma_qp_fatal(d, qp, VRDMA_QPF_MEMORY);
		}
		rdma_mr_release(d, mr);
	}
	/* Rings are let go of at once: whatever the QP or CQ goes through
	 * later (a reset, a flush, a destroy), the device can no longer write
	 * that memory, nor mark it dirty. */
	for (uint32_t j = 0; j < d->qps.cap; j++) {
		struct rdma_qp *qp = d->qps.obj[j];

		if (!qp || qp->rings_gone || (!vu_pages_overlap(qp->sq.ring.pages, gpa, size) &&
					      !vu_pages_overlap(qp->rq.ring.pages, gpa, size)))
			continue;
		qp->rings_gone = true;
		if (qp->state != VRDMA_QPS_ERR)
			rdma_qp_fatal(d, qp, VRDMA_QPF_MEMORY);
		rdma_ring_fini(d, &qp->sq.ring);
		rdma_ring_fini(d, &qp->rq.ring);
	}
	for (uint32_t j = 0; j < d->cqs.cap; j++) {
		struct rdma_cq *cq = d->cqs.obj[j];

		if (cq && cq->ring.pages && vu_pages_overlap(cq->ring.pages, gpa, size)) {
			rdma_cq_fail(d, cq);
			rdma_ring_fini(d, &cq->ring);
		}
	}
}

static void rdma_reset(void *opaque)
{
	struct rdma_dev *d = opaque;

	rdma_destroy_all(d);
	g_queue_clear_full(&d->events, g_free);
	d->dropped_events = 0;
	d->quiesced = false;
	d->event_vq = NULL;
	d->kicked = 0;
	d->session_lost = false;
	d->restored = false;
	g_clear_pointer(&d->incoming, g_bytes_unref);
}

static void rdma_attach(void *opaque, struct vu_dev *dev)
{
	struct rdma_dev *d = opaque;

	d->vu = dev;
	vu_dev_add_watch(dev, d->chan->fd, rdma_comp_ready, d);
	vu_dev_add_watch(dev, d->poll_timer, rdma_timer_fired, d);
	if (d->cm_chan)
		vu_dev_add_watch(dev, d->cm_chan->fd, rdma_cm_ready, d);
}

static void rdma_instance_free(void *instance)
{
	struct rdma_dev *d = instance;

	if (!d)
		return;
	rdma_reset(d);
	rdma_cm_fini(d);
	d->sh->devs = g_list_remove(d->sh->devs, d);
	rdma_table_free(&d->pds);
	rdma_table_free(&d->mrs);
	rdma_table_free(&d->cqs);
	rdma_table_free(&d->qps);
	g_hash_table_destroy(d->qp_by_qpn);
	g_hash_table_destroy(d->mr_by_lkey);
	g_hash_table_destroy(d->mr_by_rkey);
	g_hash_table_destroy(d->cm_listen_ids);
	if (d->chan)
		ibv_destroy_comp_channel(d->chan);
	if (d->poll_timer >= 0)
		close(d->poll_timer);
	g_free(d);
}

static int rdma_instance_new(void *shared, struct vu_device_ops *ret_ops, void **ret_instance)
{
	struct rdma_shared *sh = shared;
	struct rdma_dev *d = g_new0(struct rdma_dev, 1);
	int fl;

	d->sh = sh;
	d->generation = sh->generation;
	sh->devs = g_list_prepend(sh->devs, d);
	d->qp_by_qpn = g_hash_table_new(NULL, NULL);
	d->mr_by_lkey = g_hash_table_new(NULL, NULL);
	d->mr_by_rkey = g_hash_table_new(NULL, NULL);
	d->cm_listen_ids = g_hash_table_new(NULL, NULL);
	g_queue_init(&d->events);
	g_queue_init(&d->cm_events);
	d->poll_timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	d->chan = ibv_create_comp_channel(sh->ctx);
	fl = d->chan ? fcntl(d->chan->fd, F_GETFL) : -1;
	if (d->poll_timer < 0 || fl < 0 || fcntl(d->chan->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int r = -errno;

		rdma_instance_free(d);
		return r ? r : -ENOMEM;
	}
	/* Without the host's rdma_cm (no rdma_ucm), cm_chan stays NULL: the
	 * device offers no connection management; verbs work as before. */
	(void)rdma_cm_init(d);
	*ret_ops = (struct vu_device_ops){
		.name = "rdma",
		.max_queues = VRDMA_NUM_VQS,
		.features = (sh->lim.atomics ? 1ull << VRDMA_F_ATOMIC : 0) |
			    (d->cm_chan ? 1ull << VRDMA_F_CM : 0),
		.config_space = true,
		.populate_memory = sh->prefault,
		.get_config = rdma_get_config,
		.set_config = rdma_set_config,
		.queue_kick = rdma_queue_kick,
		.reset = rdma_reset,
		.attach = rdma_attach,
		.queue_stop = rdma_queue_stop,
		.mem_gone = rdma_mem_gone,
		.save_state = rdma_save_state,
		.load_state = rdma_load_state,
	};
	*ret_instance = d;
	return 0;
}

/* The tenant's objects and pinned memory against its quotas. */
static void rdma_metrics(void *shared, struct prom *out)
{
	const struct rdma_shared *sh = shared;
	static const char *const kinds[] = { "pd", "mr", "cq", "qp" };
	const uint32_t used[] = { sh->used.pds, sh->used.mrs, sh->used.cqs, sh->used.qps };
	const uint32_t limit[] = { sh->limit.pds, sh->limit.mrs, sh->limit.cqs, sh->limit.qps };

	prom_family(out, "vrdma_vhost_rdma_objects", "gauge",
		    "RDMA objects the tenant holds, by kind");
	for (size_t i = 0; i < G_N_ELEMENTS(kinds); i++)
		prom_sample(out, "vrdma_vhost_rdma_objects", "kind", kinds[i], used[i]);
	prom_family(out, "vrdma_vhost_rdma_objects_limit", "gauge",
		    "the tenant's quota of RDMA objects, by kind");
	for (size_t i = 0; i < G_N_ELEMENTS(kinds); i++)
		prom_sample(out, "vrdma_vhost_rdma_objects_limit", "kind", kinds[i], limit[i]);
	prom_metric(out, "vrdma_vhost_rdma_pinned_bytes", "gauge",
		    "guest memory registered (pinned) by the tenant",
		    (double)sh->used.pinned_bytes);
	prom_metric(out, "vrdma_vhost_rdma_pinned_limit_bytes", "gauge",
		    "the tenant's quota of pinned guest memory", (double)sh->limit.pinned_bytes);
	prom_metric(out, "vrdma_vhost_rdma_maps", "gauge",
		    "the daemon's mappings of the tenant's guest pages (MRs, rings)",
		    (double)sh->used.maps);
	prom_metric(out, "vrdma_vhost_rdma_maps_limit", "gauge",
		    "the tenant's quota of mappings of guest pages", (double)sh->limit.maps);
	prom_metric(out, "vrdma_vhost_rdma_work_requests", "gauge",
		    "work requests the tenant's QP rings can hold", (double)sh->used.wrs);
	prom_family(out, "vrdma_vhost_rdma_work_requests_posted_total", "counter",
		    "guest WQEs posted to the tenant's function, by queue");
	prom_sample(out, "vrdma_vhost_rdma_work_requests_posted_total", "queue", "send",
		    (double)sh->sends_posted);
	prom_sample(out, "vrdma_vhost_rdma_work_requests_posted_total", "queue", "recv",
		    (double)sh->recvs_posted);
	prom_metric(out, "vrdma_vhost_rdma_completions_total", "counter",
		    "completions the function reported for guest WQEs", (double)sh->completions);
}

static const char *const rdma_capabilities[] = { "ibdev", NULL };

const struct vhost_device_type vhost_rdma_type = {
	.metrics = rdma_metrics,
	.name = "rdma",
	.capabilities = rdma_capabilities,
	.open = rdma_open,
	.close = rdma_close,
	.instance_new = rdma_instance_new,
	.instance_free = rdma_instance_free,
	.shared_fd = rdma_shared_fd,
	.shared_ready = rdma_shared_ready,
};

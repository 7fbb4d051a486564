/* SPDX-License-Identifier: MIT */
/*
 * A guest driver and provider for the paravirtual RDMA device (see
 * vuf-rdma.h and docs/virtio-rdma.md).  Rings are physically contiguous
 * here, MR buffers may be scattered; everything else follows the spec.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <glib.h>

#include "util.h"
#include "vuf-internal.h"
#include "vuf-rdma.h"

#define VGD_QUEUE_SIZE 256u
#define VGD_REQ_MAX (8u << 20)
#define VGD_RESP_MAX 4096u
#define VGD_EV_BUFS 64u
#define VGD_EV_BUF_SIZE 64u
#define VGD_VA_BASE 0x7f1000000000ull
#define PAGE 4096u
#define VGD_HUGE (2ull << 20)
#define VGD_PROTOCOL_FEATURES                                                                \
	(VUF_BIT(VUF_PF_CONFIG) | VUF_BIT(VUF_PF_REPLY_ACK) | VUF_BIT(VUF_PF_LOG_SHMFD) |    \
	 VUF_BIT(VUF_PF_MQ) | VUF_BIT(VUF_PF_CONFIG_MEM_SLOTS) | VUF_BIT(VUF_PF_DEVICE_STATE))

/* ---- setup ---- */

static int post_event_buffer(struct vgd *g, uint32_t i)
{
	struct vuf_buf b = {
		.gpa = g->ev_gpa + (uint64_t)i * VGD_EV_BUF_SIZE, .len = VGD_EV_BUF_SIZE,
		.device_writes = true,
	};
	uint16_t head;
	int r = vuf_vq_add(&g->vq[VRDMA_VQ_EVENT], &b, 1, false, &head);

	if (r)
		return r;
	g->ev_buf_of_head[head % VGD_QUEUE_SIZE] = (uint16_t)i;
	return vuf_vq_kick_force(&g->vq[VRDMA_VQ_EVENT]);
}

/* The rings as a migrated guest has them: both indexes at base. */
static int start_at(struct vuf_vq *vq, uint16_t base)
{
	vq->avail_idx = vq->kicked_idx = vq->last_used = base;
	put_le16(vq->avail + 2, base);
	put_le16(vq->used + 2, base);
	return vuf_vq_start_at(vq, base);
}

static int setup_queues(struct vgd *g, const struct vgd_opts *o)
{
	int r = 0;

	for (unsigned int i = 0; !r && i < VRDMA_NUM_VQS; i++)
		r = vuf_vq_init(&g->vq[i], g->conn, g->mem, i, VGD_QUEUE_SIZE);
	for (unsigned int i = 0; !r && i < VRDMA_NUM_VQS; i++) {
		g->vq[i].log = g->log != NULL;
		r = o && o->resume ? start_at(&g->vq[i], o->base[i]) : vuf_vq_start(&g->vq[i]);
	}
	if (!r)
		r = vuf_mem_alloc(g->mem, VGD_REQ_MAX, PAGE, &g->req_gpa);
	if (!r)
		r = vuf_mem_alloc(g->mem, VGD_RESP_MAX, PAGE, &g->resp_gpa);
	if (!r)
		r = vuf_mem_alloc(g->mem, 8ull * VGD_QUEUE_SIZE, PAGE, &g->db_gpa);
	if (!r)
		r = vuf_mem_alloc(g->mem, (uint64_t)VGD_EV_BUFS * VGD_EV_BUF_SIZE, PAGE, &g->ev_gpa);
	/* Queue size 256 leaves room: the event queue holds VGD_EV_BUFS. */
	for (uint32_t i = 0; !r && i < VGD_EV_BUFS; i++)
		r = post_event_buffer(g, i);
	return r;
}

static int add_huge_ram(struct vuf_mem *m, uint64_t ram)
{
	int fd, r;

	if (ram % VGD_HUGE)
		return -EINVAL;
	fd = vuf_memfd("vgd-guest-ram-huge", MFD_HUGETLB, ram);
	if (fd < 0)
		return fd;
	r = vuf_mem_add_region_fd(m, 0, ram, 0, fd);
	close(fd);
	return r;
}

int vgd_open(const char *socket_path, const struct vgd_opts *o, struct vgd **ret)
{
	struct vgd *g = calloc(1, sizeof(*g));
	uint64_t ram = o && o->ram_bytes ? o->ram_bytes : 256ull << 20;
	uint64_t want = VUF_BIT(VUF_F_VERSION_1) | VUF_BIT(VUF_F_PROTOCOL_FEATURES) |
			VUF_BIT(VRDMA_F_ATOMIC) | (o && o->log_all ? VUF_BIT(VUF_F_LOG_ALL) : 0);
	uint64_t proto;
	int r;

	if (!g)
		return -ENOMEM;
	g->timeout_ms = o && o->timeout_ms ? o->timeout_ms : vuf_slow_ms(5000);
	g->next_va = VGD_VA_BASE;
	r = vuf_conn_connect(socket_path, 5000, &g->conn);
	if (r) {
		free(g);
		return r;
	}
	g->mem = vuf_mem_new();
	r = g->mem ? vuf_negotiate(g->conn, want, VGD_PROTOCOL_FEATURES, &g->features, &proto)
		   : -ENOMEM;
	if (!r && o && o->huge_pages)
		r = add_huge_ram(g->mem, ram);
	else if (!r)
		r = vuf_mem_add_region(g->mem, 0, ram, 0);
	if (!r && o && o->extra_bytes)
		r = vuf_mem_add_region(g->mem, VGD_EXTRA_GPA, o->extra_bytes, 0);
	if (!r)
		r = vuf_mem_send_table(g->mem, g->conn);
	/* Up to the extra region's end, so that its pages can be asked about
	 * too (the log is a sparse memfd). */
	g->span = o && o->extra_bytes ? VGD_EXTRA_GPA + o->extra_bytes : ram;
	if (!r && o && o->log_all) {
		g->logs = true;
		r = vuf_log_new(g->span, 0, &g->log);
		if (!r)
			r = vuf_log_send(g->log, g->conn);
	}
	if (!r)
		r = vuf_get_config(g->conn, 0, sizeof(g->config), &g->config);
	if (!r)
		r = setup_queues(g, o);
	if (r) {
		vgd_close(g);
		return r;
	}
	*ret = g;
	return 0;
}

int vgd_log_start(struct vgd *g)
{
	int r;

	if (g->log)
		return 0;
	r = vuf_set_features(g->conn, g->features | VUF_BIT(VUF_F_LOG_ALL));
	if (!r)
		r = vuf_log_new(g->span, 0, &g->log);
	if (!r)
		r = vuf_log_send(g->log, g->conn);
	if (!r)
		g->logs = true;
	return r;
}

/*
 * A live migration of this guest, as QEMU and the engine do it: every
 * queue stopped (logging is on: the device drains and stands still), the
 * device's state saved; a connection to the destination back end with the
 * same guest memory (its memory table first, as the patched QEMU sends it),
 * the state loaded there, and every queue resumed where it stopped.  The
 * source connection then goes, as the source QEMU quits.  The guest's rings,
 * buffers and positions stay what they were: only the back end changes.
 */
int vgd_migrate(struct vgd *g, const char *socket_path, size_t *ret_state_len)
{
	return vgd_migrate_between(g, socket_path, ret_state_len, NULL, NULL);
}

int vgd_migrate_between(struct vgd *g, const char *socket_path, size_t *ret_state_len,
			void (*between)(void *arg), void *arg)
{
	struct vuf_conn *dst;
	g_autofree uint8_t *state = NULL;
	uint16_t base[VRDMA_NUM_VQS];
	uint64_t features, proto;
	size_t len = 0;
	int r = 0;

	/* A guest that arrived by migration is not logged; QEMU starts
	 * logging again at the start of the next one. */
	if (g->logs)
		r = vgd_log_start(g);
	if (!r)
		r = vgd_stop(g, base);
	if (!r)
		r = vuf_save_device_state(g->conn, &state, &len);
	if (r)
		return r;
	if (between)
		between(arg);
	r = vuf_conn_connect(socket_path, 5000, &dst);
	if (r)
		return r;
	r = vuf_negotiate(dst, g->features & ~VUF_BIT(VUF_F_LOG_ALL), VGD_PROTOCOL_FEATURES,
			  &features, &proto);
	if (!r)
		r = vuf_mem_send_table(g->mem, dst);
	if (!r)
		r = vuf_load_device_state(dst, state, len);
	if (!r)
		r = vuf_get_config(dst, 0, sizeof(g->config), &g->config);
	for (unsigned int i = 0; !r && i < VRDMA_NUM_VQS; i++) {
		g->vq[i].conn = dst;
		g->vq[i].log = false;
		r = vuf_vq_start_at(&g->vq[i], base[i]);
	}
	if (r) {
		vuf_conn_free(dst);
		return r;
	}
	vuf_conn_free(g->conn);
	vuf_log_free(g->log);
	g->log = NULL;
	g->conn = dst;
	g->features = features;
	if (ret_state_len)
		*ret_state_len = len;
	return 0;
}

void vgd_close(struct vgd *g)
{
	if (!g)
		return;
	for (unsigned int i = 0; i < VRDMA_NUM_VQS; i++)
		if (g->vq[i].conn)
			vuf_vq_destroy(&g->vq[i]);
	vuf_conn_free(g->conn);
	vuf_log_free(g->log);
	vuf_mem_free(g->mem);
	free(g);
}

/* ---- control ---- */

/*
 * As a guest driver waits for a command: asleep until the device's
 * interrupt (the call fd), then the used entry.  Sleeping in steps instead
 * costs every command up to a step, which shows in REG_MR's time.
 */
static int wait_reply(struct vuf_vq *vq, int timeout_ms, struct vuf_used *u)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000ull;

	for (;;) {
		int r;

		if (vuf_vq_pending_used(vq))
			return vuf_vq_wait_used(vq, 0, u);
		if (monotonic_ns() >= deadline)
			return -ETIMEDOUT;
		r = vuf_vq_wait_call(vq, 10);
		if (r && r != -ETIMEDOUT)
			return r;
	}
}

int vgd_cmd_raw(struct vgd *g, const void *req, uint32_t req_len, void *resp, uint32_t resp_len,
		uint32_t *ret_used)
{
	struct vuf_vq *vq = &g->vq[VRDMA_VQ_CTRL];
	struct vuf_buf b[2] = {
		{ .gpa = g->req_gpa, .len = req_len },
		{ .gpa = g->resp_gpa, .len = resp_len, .device_writes = true },
	};
	void *rq = vuf_mem_ptr(g->mem, g->req_gpa, req_len);
	void *rs = vuf_mem_ptr(g->mem, g->resp_gpa, resp_len);
	struct vuf_used u;
	uint16_t head;
	int r;

	/* A request of no bytes at all is the device's to refuse. */
	if (!rs || !resp_len || (req_len && !rq))
		return -EINVAL;
	if (req_len)
		memcpy(rq, req, req_len);
	memset(rs, 0xa5, resp_len); /* the device must overwrite what it reports */
	r = vuf_vq_add(vq, b, 2, false, &head);
	if (!r)
		r = vuf_vq_kick_force(vq);
	if (!r)
		r = wait_reply(vq, g->timeout_ms, &u);
	if (r)
		return r;
	if (u.id != head || u.len > resp_len)
		return -EPROTO;
	memcpy(resp, rs, resp_len);
	*ret_used = u.len;
	return 0;
}

/*
 * Several commands in one kick, as a driver with many threads may queue
 * them: the device runs them back to back, before any other event of the
 * loop.  Each gets its own request and response area.
 */
int vgd_cmd_batch(struct vgd *g, const struct vgd_batch_cmd *cmds, unsigned int n,
		  int *ret_status)
{
	struct vuf_vq *vq = &g->vq[VRDMA_VQ_CTRL];
	uint64_t req_room = VGD_REQ_MAX / VGD_BATCH_MAX, resp_room = VGD_RESP_MAX / VGD_BATCH_MAX;
	uint16_t heads[VGD_BATCH_MAX];
	int r = 0;

	if (!n || n > VGD_BATCH_MAX)
		return -EINVAL;
	for (unsigned int i = 0; !r && i < n; i++) {
		struct vrdma_cmd_hdr h = { .opcode = cmds[i].opcode };
		uint64_t req_gpa = g->req_gpa + i * req_room, resp_gpa = g->resp_gpa + i * resp_room;
		struct vuf_buf b[2] = {
			{ .gpa = req_gpa, .len = (uint32_t)sizeof(h) + cmds[i].req_len },
			{ .gpa = resp_gpa, .len = (uint32_t)sizeof(struct vrdma_resp_hdr),
			  .device_writes = true },
		};
		uint8_t *rq = vuf_mem_ptr(g->mem, req_gpa, b[0].len);

		if (!rq || b[0].len > req_room)
			return -EINVAL;
		memcpy(rq, &h, sizeof(h));
		memcpy(rq + sizeof(h), cmds[i].req, cmds[i].req_len);
		r = vuf_vq_add(vq, b, 2, false, &heads[i]);
	}
	if (!r)
		r = vuf_vq_kick_force(vq);
	for (unsigned int i = 0; !r && i < n; i++) {
		struct vrdma_resp_hdr rh;
		struct vuf_used u;

		r = wait_reply(vq, g->timeout_ms, &u);
		if (!r && (u.id != heads[i] || u.len != sizeof(rh)))
			r = -EPROTO;
		if (!r) {
			memcpy(&rh, vuf_mem_ptr(g->mem, g->resp_gpa + i * resp_room, sizeof(rh)),
			       sizeof(rh));
			ret_status[i] = (int)rh.status;
		}
	}
	return r;
}

int vgd_cmd(struct vgd *g, uint16_t opcode, const void *req, uint32_t req_len, void *resp,
	    uint32_t resp_len)
{
	g_autofree uint8_t *buf = g_malloc(sizeof(struct vrdma_cmd_hdr) + req_len);
	uint8_t out[sizeof(struct vrdma_resp_hdr) + VGD_RESP_MAX - 8];
	struct vrdma_cmd_hdr h = { .opcode = opcode };
	struct vrdma_resp_hdr rh;
	uint32_t used;
	int r;

	if (resp_len > sizeof(out) - sizeof(rh))
		return -EINVAL;
	memcpy(buf, &h, sizeof(h));
	if (req_len)
		memcpy(buf + sizeof(h), req, req_len);
	r = vgd_cmd_raw(g, buf, (uint32_t)sizeof(h) + req_len, out,
			(uint32_t)sizeof(rh) + resp_len, &used);
	if (r)
		return r;
	if (used < sizeof(rh))
		return -EPROTO;
	memcpy(&rh, out, sizeof(rh));
	if (rh.status)
		return used == sizeof(rh) ? (int)rh.status : -EPROTO;
	if (used != sizeof(rh) + resp_len)
		return -EPROTO;
	if (resp_len)
		memcpy(resp, out + sizeof(rh), resp_len);
	return 0;
}

/* ---- buffers ---- */

int vgd_buf_alloc(struct vgd *g, uint64_t len, bool scatter, struct vgd_buf *ret)
{
	return vgd_buf_alloc_in(g, 0, len, scatter, ret);
}

int vgd_remove_extra(struct vgd *g)
{
	struct vuf_region_desc d;

	if (vuf_mem_nregions(g->mem) < 2)
		return -ENOENT;
	d = vuf_mem_region_desc(g->mem, 1);
	return vuf_rem_mem_reg(g->conn, &d);
}

/*
 * len bytes made of runs of `run` physically contiguous bytes; the runs in
 * reverse physical order if `reverse`.  Buffers of 2 MiB or more start on a
 * 2 MiB guest-physical boundary with a virtual address congruent to it, as
 * a Linux guest's transparent huge pages are, so a driver may register them
 * with 2 MiB pages (vgd_reg_mr).
 */
static int buf_alloc(struct vgd *g, size_t region, uint64_t len, uint64_t run, bool reverse,
		     struct vgd_buf *ret)
{
	uint64_t npages = (len + PAGE - 1) / PAGE, run_pages = MAX(run / PAGE, 1);
	uint64_t nruns = (npages + run_pages - 1) / run_pages;
	uint64_t align = len >= VGD_HUGE ? VGD_HUGE : PAGE;
	uint64_t base;
	int r;

	r = vuf_mem_alloc_in(g->mem, region, nruns * run_pages * PAGE, align, &base);
	if (r)
		return r;
	g->next_va = (g->next_va + align - 1) & ~(align - 1);
	*ret = (struct vgd_buf){ .va = g->next_va + base % align, .len = len, .npages = npages };
	/* Guard page between buffers in the made-up VA space. */
	g->next_va = ret->va + (npages + 1) * PAGE;
	ret->pages = calloc(npages, sizeof(uint64_t));
	if (!ret->pages)
		return -ENOMEM;
	for (uint64_t i = 0; i < npages; i++) {
		uint64_t k = i / run_pages, at = reverse ? nruns - 1 - k : k;

		ret->pages[i] = base + (at * run_pages + i % run_pages) * PAGE;
	}
	return 0;
}

int vgd_buf_alloc_in(struct vgd *g, size_t region, uint64_t len, bool scatter,
		     struct vgd_buf *ret)
{
	return buf_alloc(g, region, len, scatter ? PAGE : len, scatter, ret);
}

int vgd_buf_alloc_runs(struct vgd *g, uint64_t len, uint64_t run, struct vgd_buf *ret)
{
	if (!run || run % PAGE)
		return -EINVAL;
	return buf_alloc(g, 0, len, run, true, ret);
}

void vgd_buf_free(struct vgd_buf *b)
{
	free(b->pages);
	b->pages = NULL;
}

static int buf_copy(struct vgd *g, const struct vgd_buf *b, uint64_t off, void *data,
		    uint64_t len, bool to_guest)
{
	if (!range_within(off, len, b->len))
		return -EINVAL;
	while (len) {
		uint64_t in_page = MIN(len, PAGE - off % PAGE);
		uint8_t *p = vuf_mem_ptr(g->mem, b->pages[off / PAGE] + off % PAGE, in_page);

		if (!p)
			return -EFAULT;
		if (to_guest)
			memcpy(p, data, in_page);
		else
			memcpy(data, p, in_page);
		data = (uint8_t *)data + in_page;
		off += in_page;
		len -= in_page;
	}
	return 0;
}

int vgd_buf_write(struct vgd *g, const struct vgd_buf *b, uint64_t off, const void *src,
		  uint64_t len)
{
	return buf_copy(g, b, off, (void *)src, len, true);
}

int vgd_buf_read(struct vgd *g, const struct vgd_buf *b, uint64_t off, void *dst, uint64_t len)
{
	return buf_copy(g, b, off, dst, len, false);
}

/* ---- objects ---- */

int vgd_create_pd(struct vgd *g, uint32_t *ret_pd)
{
	struct vrdma_handle h;
	int r = vgd_cmd(g, VRDMA_CMD_CREATE_PD, NULL, 0, &h, sizeof(h));

	if (!r)
		*ret_pd = h.handle;
	return r;
}

int vgd_destroy(struct vgd *g, uint16_t opcode, uint32_t handle)
{
	struct vrdma_handle h = { .handle = handle };

	return vgd_cmd(g, opcode, &h, sizeof(h), NULL, 0);
}

/*
 * 2 MiB pages serve [off, off+len) of b if every 2 MiB block of guest
 * virtual addresses it touches lies inside b and is backed by one aligned,
 * contiguous 2 MiB of guest-physical memory (ib_umem_find_best_pgsz's
 * question, asked of the device's page_size_cap: 4 KiB | 2 MiB).
 */
static bool huge_pages_fit(const struct vgd_buf *b, uint64_t off, uint64_t len)
{
	uint64_t per = VGD_HUGE / PAGE;
	uint64_t first = (b->va + off) & ~(VGD_HUGE - 1), end = b->va + off + len;

	if (first < b->va || ((end + VGD_HUGE - 1) & ~(VGD_HUGE - 1)) > b->va + b->npages * PAGE)
		return false;
	for (uint64_t va = first; va < end; va += VGD_HUGE) {
		uint64_t k = (va - b->va) / PAGE;

		if (b->pages[k] % VGD_HUGE)
			return false;
		for (uint64_t j = 1; j < per; j++)
			if (b->pages[k + j] != b->pages[k] + j * PAGE)
				return false;
	}
	return true;
}

int vgd_reg_mr_shift(struct vgd *g, uint32_t pd, const struct vgd_buf *b, uint64_t off,
		     uint64_t len, uint32_t access, unsigned int page_shift, struct vgd_mr *ret)
{
	uint64_t page = 1ull << page_shift, iova = b->va + off;
	uint64_t first_va = iova & ~(page - 1);
	uint64_t npages = ((iova + len + page - 1) & ~(page - 1)) - first_va;
	struct vrdma_reg_mr_req m = {
		.pd = pd, .access = access, .iova = iova, .length = len,
		.page_shift = page_shift,
	};
	g_autofree uint8_t *req = NULL;
	struct vrdma_reg_mr_resp resp;
	int r;

	if (!len || !range_within(off, len, b->len) || (page_shift != 12 && page_shift != 21) ||
	    (page_shift == 21 && !huge_pages_fit(b, off, len)))
		return -EINVAL;
	npages >>= page_shift;
	m.npages = (uint32_t)npages;
	req = g_malloc(sizeof(m) + npages * 8);
	memcpy(req, &m, sizeof(m));
	for (uint64_t i = 0; i < npages; i++) {
		uint64_t gpa = b->pages[(first_va + i * page - b->va) / PAGE];

		memcpy(req + sizeof(m) + i * 8, &gpa, 8);
	}
	r = vgd_cmd(g, VRDMA_CMD_REG_MR, req, (uint32_t)(sizeof(m) + npages * 8), &resp,
		    sizeof(resp));
	if (r)
		return r;
	*ret = (struct vgd_mr){
		.handle = resp.mr, .lkey = resp.lkey, .rkey = resp.rkey, .iova = m.iova, .len = len,
	};
	return 0;
}

int vgd_reg_mr(struct vgd *g, uint32_t pd, const struct vgd_buf *b, uint64_t off, uint64_t len,
	       uint32_t access, struct vgd_mr *ret)
{
	unsigned int shift = len && range_within(off, len, b->len) && huge_pages_fit(b, off, len) ?
				     21 : 12;

	return vgd_reg_mr_shift(g, pd, b, off, len, access, shift, ret);
}

static int ring_alloc(struct vgd *g, size_t region, uint32_t log2_slots, unsigned int slot_log2,
		      struct vgd_ring *ret)
{
	uint64_t bytes = VRDMA_RING_DATA + (1ull << (log2_slots + slot_log2));
	int r;

	*ret = (struct vgd_ring){
		.npages = (bytes + PAGE - 1) / PAGE, .mask = (1u << log2_slots) - 1,
		.slot_log2 = slot_log2,
	};
	r = vuf_mem_alloc_in(g->mem, region, ret->npages * PAGE, PAGE, &ret->gpa);
	if (r)
		return r;
	ret->host = vuf_mem_ptr(g->mem, ret->gpa, ret->npages * PAGE);
	if (!ret->host)
		return -EFAULT;
	/* What the rxe user ABI's provider reads; the device does not. */
	put_le32(ret->host + VRDMA_RING_LOG2_ELEM, slot_log2);
	put_le32(ret->host + VRDMA_RING_INDEX_MASK, ret->mask);
	return 0;
}

static void put_ring_pages(uint8_t *p, const struct vgd_ring *ring)
{
	for (uint64_t i = 0; i < ring->npages; i++)
		put_le64(p + 8 * i, ring->gpa + i * PAGE);
}

int vgd_create_cq(struct vgd *g, uint32_t log2_slots, struct vgd_cq *ret)
{
	return vgd_create_cq_in(g, 0, log2_slots, ret);
}

int vgd_create_cq_in(struct vgd *g, size_t region, uint32_t log2_slots, struct vgd_cq *ret)
{
	struct vrdma_create_cq_req c = { .log2_slots = log2_slots };
	struct vrdma_create_cq_resp resp;
	g_autofree uint8_t *req = NULL;
	int r = ring_alloc(g, region, log2_slots, VRDMA_CQE_SLOT_LOG2, &ret->ring);

	if (r)
		return r;
	c.npages = (uint32_t)ret->ring.npages;
	req = g_malloc(sizeof(c) + 8 * ret->ring.npages);
	memcpy(req, &c, sizeof(c));
	put_ring_pages(req + sizeof(c), &ret->ring);
	r = vgd_cmd(g, VRDMA_CMD_CREATE_CQ, req, (uint32_t)(sizeof(c) + 8 * ret->ring.npages), &resp,
		    sizeof(resp));
	if (r)
		return r;
	ret->handle = resp.cq;
	ret->capacity = resp.cqe;
	return 0;
}

static unsigned int slot_log2_for(uint64_t need)
{
	unsigned int l = 6;

	while ((1ull << l) < need)
		l++;
	return l;
}

int vgd_create_qp(struct vgd *g, uint32_t pd, const struct vgd_cq *scq, const struct vgd_cq *rcq,
		  const struct vgd_qp_caps *caps, struct vgd_qp *ret)
{
	unsigned int sq_slot = slot_log2_for(VRDMA_SWQE_BASE_SIZE +
					     MAX(16ull * caps->max_send_sge, caps->max_inline));
	unsigned int rq_slot = slot_log2_for(VRDMA_RWQE_BASE_SIZE + 16ull * caps->max_recv_sge);
	struct vrdma_create_qp_req q;
	struct vrdma_create_qp_resp resp;
	g_autofree uint8_t *req = NULL;
	size_t len;
	int r;

	memset(ret, 0, sizeof(*ret));
	ret->caps = *caps;
	r = ring_alloc(g, caps->ring_region, caps->sq_log2, sq_slot, &ret->sq);
	if (!r)
		r = ring_alloc(g, caps->ring_region, caps->rq_log2, rq_slot, &ret->rq);
	if (r)
		return r;
	q = (struct vrdma_create_qp_req){
		.pd = pd, .send_cq = scq->handle, .recv_cq = rcq->handle,
		.qp_type = VRDMA_QPT_RC, .sq_sig_all = caps->sig_all,
		.max_send_sge = caps->max_send_sge, .max_recv_sge = caps->max_recv_sge,
		.max_inline_data = caps->max_inline,
		.sq_log2_slots = caps->sq_log2, .sq_log2_slot_size = sq_slot,
		.rq_log2_slots = caps->rq_log2, .rq_log2_slot_size = rq_slot,
		.sq_npages = (uint32_t)ret->sq.npages, .rq_npages = (uint32_t)ret->rq.npages,
	};
	len = sizeof(q) + 8 * (ret->sq.npages + ret->rq.npages);
	req = g_malloc(len);
	memcpy(req, &q, sizeof(q));
	put_ring_pages(req + sizeof(q), &ret->sq);
	if (caps->sq_first_page)
		put_le64(req + sizeof(q), caps->sq_first_page);
	put_ring_pages(req + sizeof(q) + 8 * ret->sq.npages, &ret->rq);
	r = vgd_cmd(g, VRDMA_CMD_CREATE_QP, req, (uint32_t)len, &resp, sizeof(resp));
	if (r)
		return r;
	ret->handle = resp.qp;
	ret->qpn = resp.qpn;
	return 0;
}

static void ring_restart(struct vgd_ring *r)
{
	r->prod = r->cons = 0;
	__atomic_store_n((uint32_t *)(r->host + VRDMA_RING_PRODUCER), 0, __ATOMIC_RELEASE);
}

int vgd_modify_qp(struct vgd *g, struct vgd_qp *qp, uint32_t mask,
		  const struct vrdma_qp_attr *a)
{
	struct vrdma_modify_qp_req m = { .qp = qp->handle, .attr_mask = mask, .attr = *a };
	int r = vgd_cmd(g, VRDMA_CMD_MODIFY_QP, &m, sizeof(m), NULL, 0);

	/* Back in RESET, driver and device both start the rings at slot 0. */
	if (!r && (mask & VRDMA_QP_STATE) && a->qp_state == VRDMA_QPS_RESET) {
		ring_restart(&qp->sq);
		ring_restart(&qp->rq);
	}
	return r;
}

int vgd_connect_qp(struct vgd *g, struct vgd_qp *qp, uint32_t remote_qpn,
		   const uint8_t remote_gid[16], uint8_t sgid_index, uint8_t rnr_retry)
{
	struct vrdma_qp_attr a = {
		.qp_state = VRDMA_QPS_INIT, .port_num = 1,
		.qp_access_flags = VRDMA_ACCESS_ALL,
	};
	int r = vgd_modify_qp(g, qp, VRDMA_QP_STATE | VRDMA_QP_PKEY_INDEX | VRDMA_QP_PORT |
				     VRDMA_QP_ACCESS_FLAGS, &a);

	if (r)
		return r;
	a = (struct vrdma_qp_attr){
		.qp_state = VRDMA_QPS_RTR, .path_mtu = 3 /* 1024 */, .dest_qp_num = remote_qpn,
		.rq_psn = 0, .max_dest_rd_atomic = 1, .min_rnr_timer = 1,
		.ah = { .sgid_index = sgid_index, .hop_limit = 64 },
	};
	memcpy(a.ah.dgid, remote_gid, 16);
	r = vgd_modify_qp(g, qp, VRDMA_QP_STATE | VRDMA_QP_AV | VRDMA_QP_PATH_MTU |
				 VRDMA_QP_DEST_QPN | VRDMA_QP_RQ_PSN | VRDMA_QP_MAX_DEST_RD_ATOMIC |
				 VRDMA_QP_MIN_RNR_TIMER, &a);
	if (r)
		return r;
	a = (struct vrdma_qp_attr){
		.qp_state = VRDMA_QPS_RTS, .sq_psn = 0, .timeout = 14, .retry_cnt = 7,
		.rnr_retry = rnr_retry, .max_rd_atomic = 1,
	};
	return vgd_modify_qp(g, qp, VRDMA_QP_STATE | VRDMA_QP_SQ_PSN | VRDMA_QP_TIMEOUT |
				    VRDMA_QP_RETRY_CNT | VRDMA_QP_RNR_RETRY | VRDMA_QP_MAX_QP_RD_ATOMIC,
			     &a);
}

int vgd_query_gid(struct vgd *g, uint16_t index, struct vrdma_gid_resp *ret)
{
	struct vrdma_gid_req q = { .port = 1, .index = index };

	return vgd_cmd(g, VRDMA_CMD_QUERY_GID, &q, sizeof(q), ret, sizeof(*ret));
}

/* ---- data path ---- */

static uint8_t *ring_slot(struct vgd_ring *r, uint32_t i)
{
	return r->host + VRDMA_RING_DATA + ((size_t)(i & r->mask) << r->slot_log2);
}

static uint32_t ring_index(const struct vgd_ring *r, size_t off)
{
	return __atomic_load_n((uint32_t *)(r->host + off), __ATOMIC_ACQUIRE);
}

static void ring_publish(struct vgd_ring *r, size_t off, uint32_t v)
{
	__atomic_store_n((uint32_t *)(r->host + off), v, __ATOMIC_RELEASE);
}

static bool ring_full(const struct vgd_ring *r)
{
	return ((r->prod + 1) & r->mask) == (ring_index(r, VRDMA_RING_CONSUMER) & r->mask);
}

int vgd_doorbell(struct vgd *g, uint16_t type, uint32_t handle)
{
	struct vuf_vq *vq = &g->vq[VRDMA_VQ_DOORBELL];
	struct vrdma_doorbell db = { .handle = handle, .type = type };
	uint64_t gpa = g->db_gpa + 8ull * (g->db_next++ % VGD_QUEUE_SIZE);
	struct vuf_buf b = { .gpa = gpa, .len = sizeof(db) };
	struct vuf_used u;
	uint16_t head;
	int r;

	/* Doorbells come back unwritten: reap them so the queue never fills. */
	while (vuf_vq_pending_used(vq))
		vuf_vq_wait_used(vq, 0, &u);
	memcpy(vuf_mem_ptr(g->mem, gpa, sizeof(db)), &db, sizeof(db));
	r = vuf_vq_add(vq, &b, 1, false, &head);
	return r ? r : vuf_vq_kick(vq);
}

static void write_send_wqe(uint8_t *s, size_t slot_size, const struct vgd_send *w)
{
	memset(s, 0, slot_size);
	put_le64(s + VRDMA_SWQE_WR_ID, w->wr_id);
	put_le32(s + VRDMA_SWQE_OPCODE, w->opcode);
	put_le32(s + VRDMA_SWQE_SEND_FLAGS, w->flags);
	memcpy(s + VRDMA_SWQE_IMM, &w->imm, 4);
	put_le64(s + VRDMA_SWQE_REMOTE_ADDR, w->remote_addr);
	if (w->opcode == VRDMA_WR_ATOMIC_CMP_AND_SWP || w->opcode == VRDMA_WR_ATOMIC_FETCH_AND_ADD) {
		put_le64(s + VRDMA_SWQE_COMPARE_ADD, w->compare_add);
		put_le64(s + VRDMA_SWQE_SWAP, w->swap);
		put_le32(s + VRDMA_SWQE_ATOMIC_RKEY, w->rkey);
	} else {
		put_le32(s + VRDMA_SWQE_RDMA_RKEY, w->rkey);
	}
	if (w->flags & VRDMA_SEND_INLINE) {
		put_le32(s + VRDMA_SWQE_DMA_LENGTH, w->inline_len);
		memcpy(s + VRDMA_SWQE_SGE, w->inline_data, w->inline_len);
		return;
	}
	put_le32(s + VRDMA_SWQE_DMA_NUM_SGE, w->num_sge);
	for (uint32_t i = 0; i < w->num_sge; i++)
		memcpy(s + VRDMA_SWQE_SGE + 16 * i, &w->sge[i], 16);
}

int vgd_post_send(struct vgd *g, struct vgd_qp *qp, const struct vgd_send *wr, uint32_t n,
		  bool ring_db)
{
	for (uint32_t i = 0; i < n; i++) {
		if (ring_full(&qp->sq))
			return -ENOSPC;
		write_send_wqe(ring_slot(&qp->sq, qp->sq.prod), 1u << qp->sq.slot_log2, &wr[i]);
		qp->sq.prod = (qp->sq.prod + 1) & qp->sq.mask;
		ring_publish(&qp->sq, VRDMA_RING_PRODUCER, qp->sq.prod);
	}
	return ring_db ? vgd_doorbell(g, VRDMA_DB_SQ, qp->handle) : 0;
}

int vgd_post_send_raw(struct vgd *g, struct vgd_qp *qp, const void *slot, uint32_t len,
		      bool ring_db)
{
	uint8_t *s;

	if (ring_full(&qp->sq) || len > (1u << qp->sq.slot_log2))
		return -ENOSPC;
	s = ring_slot(&qp->sq, qp->sq.prod);
	memset(s, 0, 1u << qp->sq.slot_log2);
	memcpy(s, slot, len);
	qp->sq.prod = (qp->sq.prod + 1) & qp->sq.mask;
	ring_publish(&qp->sq, VRDMA_RING_PRODUCER, qp->sq.prod);
	return ring_db ? vgd_doorbell(g, VRDMA_DB_SQ, qp->handle) : 0;
}

int vgd_post_recv(struct vgd *g, struct vgd_qp *qp, const struct vgd_recv *wr, uint32_t n,
		  bool ring_db)
{
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *s;

		if (ring_full(&qp->rq))
			return -ENOSPC;
		s = ring_slot(&qp->rq, qp->rq.prod);
		memset(s, 0, 1u << qp->rq.slot_log2);
		put_le64(s + VRDMA_RWQE_WR_ID, wr[i].wr_id);
		put_le32(s + VRDMA_RWQE_DMA_NUM_SGE, wr[i].num_sge);
		for (uint32_t j = 0; j < wr[i].num_sge; j++)
			memcpy(s + VRDMA_RWQE_SGE + 16 * j, &wr[i].sge[j], 16);
		qp->rq.prod = (qp->rq.prod + 1) & qp->rq.mask;
		ring_publish(&qp->rq, VRDMA_RING_PRODUCER, qp->rq.prod);
	}
	return ring_db ? vgd_doorbell(g, VRDMA_DB_RQ, qp->handle) : 0;
}

int vgd_poll_cq(struct vgd *g, struct vgd_cq *cq, struct vrdma_cqe *out, int max)
{
	struct vgd_ring *r = &cq->ring;
	uint32_t prod = ring_index(r, VRDMA_RING_PRODUCER) & r->mask;
	int n = 0;

	(void)g;
	while (n < max && r->cons != prod) {
		memcpy(&out[n++], ring_slot(r, r->cons), sizeof(*out));
		r->cons = (r->cons + 1) & r->mask;
		ring_publish(r, VRDMA_RING_CONSUMER, r->cons);
	}
	return n;
}

int vgd_wait_cq(struct vgd *g, struct vgd_cq *cq, struct vrdma_cqe *out, int n, int timeout_ms,
		int *ret_got)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct timespec nap = { .tv_nsec = 100000 };
	int got = 0;

	for (;;) {
		got += vgd_poll_cq(g, cq, out + got, n - got);
		if (ret_got)
			*ret_got = got;
		if (got == n)
			return 0;
		if (monotonic_ns() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&nap, NULL);
	}
}

int vgd_arm_cq(struct vgd *g, struct vgd_cq *cq, bool solicited)
{
	return vgd_doorbell(g, solicited ? VRDMA_DB_CQ_ARM_SOLICITED : VRDMA_DB_CQ_ARM, cq->handle);
}

int vgd_wait_event(struct vgd *g, int timeout_ms, struct vrdma_event *ret)
{
	struct vuf_vq *vq = &g->vq[VRDMA_VQ_EVENT];
	struct vuf_used u;
	uint64_t gpa;
	int r;

	while (g->ev_next >= g->ev_npending) {
		uint16_t buf;

		r = vuf_vq_wait_used(vq, timeout_ms, &u);
		if (r)
			return r;
		if (u.len % sizeof(struct vrdma_event) || u.len > VGD_EV_BUF_SIZE)
			return -EPROTO;
		buf = g->ev_buf_of_head[u.id % VGD_QUEUE_SIZE];
		gpa = g->ev_gpa + (uint64_t)buf * VGD_EV_BUF_SIZE;
		memcpy(g->ev_pending, vuf_mem_ptr(g->mem, gpa, u.len), u.len);
		g->ev_npending = u.len / sizeof(struct vrdma_event);
		g->ev_next = 0;
		r = post_event_buffer(g, buf);
		if (r)
			return r;
	}
	*ret = g->ev_pending[g->ev_next++];
	return 0;
}

int vgd_stop(struct vgd *g, uint16_t ret_base[VRDMA_NUM_VQS])
{
	uint32_t base;
	int r = 0;

	for (unsigned int i = 0; !r && i < VRDMA_NUM_VQS; i++) {
		r = vuf_vq_stop(&g->vq[i], &base);
		g->stopped_base[i] = (uint16_t)base;
		if (ret_base)
			ret_base[i] = (uint16_t)base;
	}
	return r;
}

int vgd_resume(struct vgd *g)
{
	int r = 0;

	for (unsigned int i = 0; !r && i < VRDMA_NUM_VQS; i++)
		r = vuf_vq_start_at(&g->vq[i], g->stopped_base[i]);
	return r;
}

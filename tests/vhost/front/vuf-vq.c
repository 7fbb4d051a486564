/* SPDX-License-Identifier: MIT */
/* Split virtqueue, driver side: the guest's half of the rings. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "vuf-internal.h"

#define DESC_SIZE 16u
#define RING_PAGE 4096u

static uint64_t desc_bytes(uint16_t num) { return (uint64_t)DESC_SIZE * num; }
/* flags, idx, ring[num], used_event */
static uint64_t avail_bytes(uint16_t num) { return 4 + 2ull * num + 2; }
/* flags, idx, ring[num] of {id, len}, avail_event */
static uint64_t used_bytes(uint16_t num) { return 4 + 8ull * num + 2; }

/* Shared-memory u16 accessors; the device side runs in another process. */
static uint16_t *u16_at(uint8_t *base, uint64_t off) { return (uint16_t *)(base + off); }

static uint16_t load_acquire(uint8_t *base, uint64_t off)
{
	return __atomic_load_n(u16_at(base, off), __ATOMIC_ACQUIRE);
}

static void store_release(uint8_t *base, uint64_t off, uint16_t v)
{
	__atomic_store_n(u16_at(base, off), v, __ATOMIC_RELEASE);
}

static void init_free_list(struct vuf_vq *vq)
{
	for (uint32_t i = 0; i < vq->num; i++) {
		vq->free_next[i] = (uint16_t)(i + 1);
		vq->chain_len[i] = 0;
	}
	vq->free_head = 0;
	vq->num_free = vq->num;
}

static int new_eventfd(int *ret_fd)
{
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	if (fd < 0)
		return -errno;
	*ret_fd = fd;
	return 0;
}

int vuf_vq_init(struct vuf_vq *vq, struct vuf_conn *c, struct vuf_mem *m,
		uint32_t index, uint16_t num)
{
	int ret;

	memset(vq, 0, sizeof(*vq));
	vq->kick_fd = vq->call_fd = vq->err_fd = -1;
	if (!is_power_of_2(num) || num > VUF_VQ_MAX_SIZE)
		return -EINVAL;
	vq->conn = c;
	vq->mem = m;
	vq->index = index;
	vq->num = num;
	/* Page-aligned rings so that dirty-log tests can name their pages. */
	ret = vuf_mem_alloc(m, desc_bytes(num), RING_PAGE, &vq->desc_gpa);
	if (!ret)
		ret = vuf_mem_alloc(m, avail_bytes(num), RING_PAGE, &vq->avail_gpa);
	if (!ret)
		ret = vuf_mem_alloc(m, used_bytes(num), RING_PAGE, &vq->used_gpa);
	if (ret)
		return ret;
	vq->used_log_gpa = vq->used_gpa;
	vq->desc = vuf_mem_ptr(m, vq->desc_gpa, desc_bytes(num));
	vq->avail = vuf_mem_ptr(m, vq->avail_gpa, avail_bytes(num));
	vq->used = vuf_mem_ptr(m, vq->used_gpa, used_bytes(num));
	vq->free_next = calloc(num, sizeof(uint16_t));
	vq->chain_len = calloc(num, sizeof(uint16_t));
	if (!vq->free_next || !vq->chain_len) {
		ret = -ENOMEM;
		goto out_destroy;
	}
	init_free_list(vq);
	ret = new_eventfd(&vq->kick_fd);
	if (!ret)
		ret = new_eventfd(&vq->call_fd);
	if (!ret)
		ret = new_eventfd(&vq->err_fd);
	if (ret)
		goto out_destroy;
	return 0;

out_destroy:
	vuf_vq_destroy(vq);
	return ret;
}

void vuf_vq_destroy(struct vuf_vq *vq)
{
	closep(&vq->kick_fd);
	closep(&vq->call_fd);
	closep(&vq->err_fd);
	vq->kick_fd = vq->call_fd = vq->err_fd = -1;
	free(vq->free_next);
	free(vq->chain_len);
	vq->free_next = vq->chain_len = NULL;
}

void vuf_vq_reset(struct vuf_vq *vq)
{
	uint64_t drain;

	memset(vq->desc, 0, desc_bytes(vq->num));
	memset(vq->avail, 0, avail_bytes(vq->num));
	memset(vq->used, 0, used_bytes(vq->num));
	vq->avail_idx = vq->kicked_idx = vq->last_used = 0;
	init_free_list(vq);
	vuf_vq_take_calls(vq, &drain);
	vuf_vq_take_errs(vq, &drain);
}

int vuf_vq_start_at(struct vuf_vq *vq, uint16_t base)
{
	struct vuf_conn *c = vq->conn;
	struct vuf_vring_addr a = {
		.index = vq->index,
		.flags = vq->log ? VUF_VRING_F_LOG : 0,
		.log_gpa = vq->used_log_gpa,
	};
	int ret;

	vq->event_idx = vuf_conn_features(c) & VUF_BIT(VUF_F_EVENT_IDX);
	ret = vuf_mem_uva(vq->mem, vq->desc_gpa, &a.desc_uva);
	if (!ret)
		ret = vuf_mem_uva(vq->mem, vq->avail_gpa, &a.avail_uva);
	if (!ret)
		ret = vuf_mem_uva(vq->mem, vq->used_gpa, &a.used_uva);
	if (ret)
		return ret;
	if (!vq->manual_used_event)
		vuf_vq_set_used_event(vq, vq->last_used);
	ret = vuf_set_vring_num(c, vq->index, vq->num);
	if (!ret)
		ret = vuf_set_vring_base(c, vq->index, base);
	if (!ret)
		ret = vuf_set_vring_addr(c, &a);
	if (!ret)
		ret = vuf_set_vring_err(c, vq->index, vq->err_fd);
	if (!ret)
		ret = vuf_set_vring_call(c, vq->index, vq->call_fd);
	/* The kick fd starts the ring, so it goes last (as QEMU does). */
	if (!ret)
		ret = vuf_set_vring_kick(c, vq->index, vq->kick_fd);
	/* With protocol features, rings start disabled. */
	if (!ret && (vuf_conn_features(c) & VUF_BIT(VUF_F_PROTOCOL_FEATURES)))
		ret = vuf_set_vring_enable(c, vq->index, true);
	return ret;
}

int vuf_vq_start(struct vuf_vq *vq)
{
	return vuf_vq_start_at(vq, vq->last_used);
}

int vuf_vq_stop(struct vuf_vq *vq, uint32_t *ret_base)
{
	return vuf_get_vring_base(vq->conn, vq->index, ret_base);
}

void vuf_vq_write_desc(struct vuf_vq *vq, uint16_t i, uint64_t gpa, uint32_t len,
		       uint16_t flags, uint16_t next)
{
	uint8_t *d = vq->desc + (uint64_t)(i % vq->num) * DESC_SIZE;

	put_le64(d, gpa);
	put_le32(d + 8, len);
	put_le16(d + 12, flags);
	put_le16(d + 14, next);
}

static void write_table_entry(uint8_t *d, uint64_t gpa, uint32_t len, uint16_t flags,
			      uint16_t next)
{
	put_le64(d, gpa);
	put_le32(d + 8, len);
	put_le16(d + 12, flags);
	put_le16(d + 14, next);
}

static void publish(struct vuf_vq *vq, uint16_t head)
{
	put_le16(vq->avail + 4 + 2ull * (vq->avail_idx % vq->num), head);
	vq->avail_idx++;
	/* Descriptors and ring entry must be visible before the new idx. */
	store_release(vq->avail, 2, vq->avail_idx);
}

void vuf_vq_push_avail_raw(struct vuf_vq *vq, uint16_t head)
{
	publish(vq, head);
}

void vuf_vq_set_avail_idx_raw(struct vuf_vq *vq, uint16_t idx)
{
	vq->avail_idx = idx;
	store_release(vq->avail, 2, idx);
}

static uint16_t take_desc(struct vuf_vq *vq)
{
	uint16_t d = vq->free_head;

	vq->free_head = vq->free_next[d];
	vq->num_free--;
	return d;
}

static int add_indirect(struct vuf_vq *vq, const struct vuf_buf *bufs, size_t n,
			uint16_t *ret_head)
{
	uint64_t table_bytes = (uint64_t)VUF_INDIRECT_MAX * DESC_SIZE, table_gpa;
	uint16_t head;
	uint8_t *t;
	int ret;

	if (n > VUF_INDIRECT_MAX)
		return -E2BIG;
	/* One table per possible head, allocated on first use. */
	if (!vq->indirect_pool_gpa) {
		ret = vuf_mem_alloc(vq->mem, table_bytes * vq->num, 16, &vq->indirect_pool_gpa);
		if (ret)
			return ret;
	}
	head = take_desc(vq);
	table_gpa = vq->indirect_pool_gpa + table_bytes * head;
	t = vuf_mem_ptr(vq->mem, table_gpa, table_bytes);
	for (size_t i = 0; i < n; i++) {
		uint16_t flags = (bufs[i].device_writes ? VUF_DESC_F_WRITE : 0) |
				 (i + 1 < n ? VUF_DESC_F_NEXT : 0);

		write_table_entry(t + i * DESC_SIZE, bufs[i].gpa, bufs[i].len, flags,
				  (uint16_t)(i + 1 < n ? i + 1 : 0));
	}
	vuf_vq_write_desc(vq, head, table_gpa, (uint32_t)(n * DESC_SIZE),
			  VUF_DESC_F_INDIRECT, 0);
	vq->chain_len[head] = 1;
	*ret_head = head;
	return 0;
}

static void add_direct(struct vuf_vq *vq, const struct vuf_buf *bufs, size_t n,
		       uint16_t *ret_head)
{
	uint16_t head = vq->free_head, d = head;

	for (size_t i = 0; i < n; i++) {
		uint16_t next;
		uint16_t flags = bufs[i].device_writes ? VUF_DESC_F_WRITE : 0;

		take_desc(vq);
		next = vq->free_head;
		if (i + 1 < n)
			flags |= VUF_DESC_F_NEXT;
		vuf_vq_write_desc(vq, d, bufs[i].gpa, bufs[i].len, flags, i + 1 < n ? next : 0);
		d = next;
	}
	vq->chain_len[head] = (uint16_t)n;
	*ret_head = head;
}

int vuf_vq_add(struct vuf_vq *vq, const struct vuf_buf *bufs, size_t n,
	       bool indirect, uint16_t *ret_head)
{
	uint16_t head;
	int ret;

	if (!n)
		return -EINVAL;
	if (vq->num_free < (indirect ? 1 : n))
		return -ENOSPC;
	if (indirect) {
		ret = add_indirect(vq, bufs, n, &head);
		if (ret)
			return ret;
	} else {
		add_direct(vq, bufs, n, &head);
	}
	publish(vq, head);
	if (ret_head)
		*ret_head = head;
	return 0;
}

static int notify(int fd)
{
	uint64_t one = 1;

	return write(fd, &one, sizeof(one)) == sizeof(one) ? 0 : -errno;
}

int vuf_vq_kick_force(struct vuf_vq *vq)
{
	vq->kicked_idx = vq->avail_idx;
	return notify(vq->kick_fd);
}

uint16_t vuf_vq_avail_event(const struct vuf_vq *vq)
{
	return load_acquire(vq->used, 4 + 8ull * vq->num);
}

int vuf_vq_kick(struct vuf_vq *vq)
{
	uint16_t old = vq->kicked_idx, new = vq->avail_idx;
	bool need;

	/* The avail idx store must be ordered before reading the device's hints. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (vq->event_idx) {
		uint16_t ev = vuf_vq_avail_event(vq);

		/* Notify iff avail_event lies in (old, new]: virtio's vring_need_event. */
		need = (uint16_t)(new - ev - 1) < (uint16_t)(new - old);
	} else {
		need = !(load_acquire(vq->used, 0) & VUF_USED_F_NO_NOTIFY);
	}
	vq->kicked_idx = new;
	return need ? notify(vq->kick_fd) : 0;
}

int vuf_vq_kick_and_reap(struct vuf_vq *vq, uint16_t head, int timeout_ms,
			 struct vuf_used *ret_used)
{
	int ret = vuf_vq_kick(vq);

	if (!ret)
		ret = vuf_vq_wait_used(vq, timeout_ms, ret_used);
	if (ret)
		return ret;
	return ret_used->id == head ? 0 : -EPROTO;
}

uint16_t vuf_vq_used_idx(const struct vuf_vq *vq)
{
	return load_acquire(vq->used, 2);
}

uint16_t vuf_vq_pending_used(const struct vuf_vq *vq)
{
	return (uint16_t)(vuf_vq_used_idx(vq) - vq->last_used);
}

static void free_chain(struct vuf_vq *vq, uint16_t head)
{
	uint16_t last = head;

	for (uint16_t i = 1; i < vq->chain_len[head]; i++)
		last = vq->free_next[last];
	vq->free_next[last] = vq->free_head;
	vq->free_head = head;
	vq->num_free += vq->chain_len[head];
	vq->chain_len[head] = 0;
}

static int reap(struct vuf_vq *vq, struct vuf_used *ret_used)
{
	const uint8_t *e = vq->used + 4 + 8ull * (vq->last_used % vq->num);
	uint32_t id = get_le32(e), len = get_le32(e + 4);

	/* A device that returns an id we never posted is a device bug. */
	if (id >= vq->num || !vq->chain_len[id])
		return -EPROTO;
	free_chain(vq, (uint16_t)id);
	vq->last_used++;
	if (!vq->manual_used_event)
		vuf_vq_set_used_event(vq, vq->last_used);
	ret_used->id = id;
	ret_used->len = len;
	return 0;
}

int vuf_vq_wait_used(struct vuf_vq *vq, int timeout_ms, struct vuf_used *ret_used)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct timespec nap = { .tv_nsec = 50000 };

	for (;;) {
		/* Acquire on idx orders the element reads after it. */
		if (vuf_vq_used_idx(vq) != vq->last_used)
			return reap(vq, ret_used);
		if (monotonic_ns() >= deadline)
			return -ETIMEDOUT;
		/* Polling, not the call fd: interrupts may rightly be suppressed. */
		nanosleep(&nap, NULL);
	}
}

static int take_eventfd(int fd, uint64_t *ret_count)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) == sizeof(v)) {
		*ret_count = v;
		return 0;
	}
	if (errno == EAGAIN) {
		*ret_count = 0;
		return 0;
	}
	return -errno;
}

static int wait_eventfd(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t v;
	int r = poll(&p, 1, timeout_ms);

	if (r < 0)
		return -errno;
	if (r == 0)
		return -ETIMEDOUT;
	return take_eventfd(fd, &v);
}

int vuf_vq_take_calls(struct vuf_vq *vq, uint64_t *ret_count)
{
	return take_eventfd(vq->call_fd, ret_count);
}

int vuf_vq_wait_call(struct vuf_vq *vq, int timeout_ms)
{
	return wait_eventfd(vq->call_fd, timeout_ms);
}

int vuf_vq_take_errs(struct vuf_vq *vq, uint64_t *ret_count)
{
	return take_eventfd(vq->err_fd, ret_count);
}

int vuf_vq_wait_err(struct vuf_vq *vq, int timeout_ms)
{
	return wait_eventfd(vq->err_fd, timeout_ms);
}

void vuf_vq_set_used_event(struct vuf_vq *vq, uint16_t idx)
{
	store_release(vq->avail, 4 + 2ull * vq->num, idx);
}

void vuf_vq_set_avail_flags(struct vuf_vq *vq, uint16_t flags)
{
	store_release(vq->avail, 0, flags);
}

// SPDX-License-Identifier: MIT
/*
 * Split virtqueues, device side (virtio 1.2, 2.7).  Everything in the rings
 * is written by the guest driver, concurrently, and is hostile: each
 * descriptor is copied once before it is checked, chains are bounded by
 * the table size (so loops end), and any violation breaks the queue rather
 * than the daemon.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#include <glib.h>

#include "util.h"
#include "vu-internal.h"

static struct vu_dev *vq_dev(const struct vu_vq *vq)
{
	return vq->dev;
}

uint16_t vq_next_avail(const struct vu_vq *vq)
{
	return vq->last_avail_idx;
}

unsigned int vq_index(const struct vu_vq *vq)
{
	return vq->index;
}

bool vq_ready(const struct vu_vq *vq)
{
	return vq->started && vq->enabled && !vq->broken && vq->desc;
}

/* used_event lives after the avail ring, avail_event after the used ring. */
static uint16_t *used_event_ptr(const struct vu_vq *vq)
{
	return &vq->avail->ring[vq->num];
}

static uint16_t *avail_event_ptr(const struct vu_vq *vq)
{
	return (uint16_t *)&vq->used->ring[vq->num];
}

int vq_map_rings(struct vu_vq *vq)
{
	const struct vu_mem *mem = &vq_dev(vq)->mem;
	uint64_t num = vq->num;
	const struct vu_vring_addr *a = &vq->addr;

	vq->desc = NULL;
	vq->avail = NULL;
	vq->used = NULL;
	if (!vq->addr_set || !num)
		return -EINVAL;
	/* Alignment from virtio 1.2, 2.7: 16, 2 and 4 bytes. */
	if (a->desc_user_addr % 16 || a->avail_user_addr % 2 || a->used_user_addr % 4)
		return -EINVAL;
	vq->desc = vu_mem_uva(mem, a->desc_user_addr, 16 * num);
	vq->avail = vu_mem_uva(mem, a->avail_user_addr, 4 + 2 * num + 2);
	vq->used = vu_mem_uva(mem, a->used_user_addr, 4 + 8 * num + 2);
	if (!vq->desc || !vq->avail || !vq->used) {
		vq->desc = NULL;
		vq->avail = NULL;
		vq->used = NULL;
		return -EFAULT;
	}
	return 0;
}

void vq_break(struct vu_vq *vq)
{
	if (vq->broken)
		return;
	vq->broken = true;
	if (vq->err_fd >= 0)
		eventfd_write(vq->err_fd, 1);
}

static void log_write(struct vu_vq *vq, uint64_t gpa, uint64_t len)
{
	struct vu_dev *dev = vq_dev(vq);

	if (vu_logging(dev))
		vu_log_write(&dev->log, gpa, len);
}

/* Ring writes are logged at the guest address QEMU gave for the used ring. */
static void log_used(struct vu_vq *vq, uint64_t offset, uint64_t len)
{
	if (vq->addr.flags & VU_VRING_F_LOG)
		log_write(vq, vq->addr.log_guest_addr + offset, len);
}

struct taken {
	uint64_t counter;
	uint16_t head;
};

static int compare_taken(const void *a, const void *b)
{
	const struct taken *x = a, *y = b;

	return x->counter < y->counter ? -1 : x->counter > y->counter;
}

/*
 * Recovery after a back-end restart ("When reconnecting" in the spec): first
 * undo the last batch if it reached the used ring, then queue every request
 * still marked inflight for re-execution, oldest first.
 */
static int inflight_recover(struct vu_vq *vq)
{
	struct vu_inflight_queue *q = vq->inflight;
	uint64_t max_counter = 0;
	unsigned int n = 0;

	if (q->version == 0 || q->desc_num != vq->num) {
		memset(q->desc, 0, sizeof(q->desc[0]) * vq->num);
		q->version = 1;
		q->desc_num = (uint16_t)vq->num;
		q->last_batch_head = 0;
		q->used_idx = vq->used_idx;
		vq->inflight_counter = 1;
		return 0;
	}
	if (q->used_idx != vq->used_idx) {
		uint16_t batch = (uint16_t)(vq->used_idx - q->used_idx);
		uint16_t head = q->last_batch_head;

		for (unsigned int i = 0; i < batch && i < vq->num && head < vq->num; i++) {
			q->desc[head].inflight = 0;
			head = q->desc[head].next;
		}
		q->used_idx = vq->used_idx;
	}
	g_autofree struct taken *taken = g_new(struct taken, vq->num);

	/* Copied first: the front end may change the area while we sort. */
	for (uint32_t i = 0; i < vq->num; i++) {
		if (q->desc[i].inflight != 1)
			continue;
		taken[n] = (struct taken){ q->desc[i].counter, (uint16_t)i };
		if (taken[n].counter > max_counter)
			max_counter = taken[n].counter;
		n++;
	}
	qsort(taken, n, sizeof(*taken), compare_taken);
	g_free(vq->resubmit);
	vq->resubmit = g_new(uint16_t, vq->num);
	for (unsigned int i = 0; i < n; i++)
		vq->resubmit[i] = taken[i].head;
	vq->resubmit_num = n;
	vq->resubmit_next = 0;
	vq->inflight_counter = max_counter + 1;
	/* Taken = completed + in flight: resume taking after both. */
	vq->last_avail_idx = (uint16_t)(vq->used_idx + n);
	return 0;
}

int vq_start(struct vu_vq *vq)
{
	int ret = vq_map_rings(vq);

	if (ret < 0)
		return ret;
	vq->used_idx = __atomic_load_n(&vq->used->idx, __ATOMIC_RELAXED);
	vq->signalled_used_valid = false;
	vq->broken = false;
	vq->resubmit_num = 0;
	vq->resubmit_next = 0;
	vq->inflight = vu_inflight_queue(&vq_dev(vq)->inflight, vq->index);
	/*
	 * The area was sized for queue_size descriptors; the header's desc_num
	 * is the front end's to scribble on, so only the size we mapped counts.
	 * A driver may use a smaller ring than the area was made for.
	 */
	if (vq->inflight && vq->num > vq_dev(vq)->inflight.queue_size) {
		vq->inflight = NULL;
		return -EINVAL;
	}
	if (vq->inflight)
		inflight_recover(vq);
	vq->started = true;
	return 0;
}

void vq_stop(struct vu_vq *vq)
{
	vq->started = false;
	vq->polling = false;
	g_free(vq->resubmit);
	vq->resubmit = NULL;
	vq->resubmit_num = 0;
	vq->resubmit_next = 0;
}

void vq_close_fds(struct vu_vq *vq)
{
	closep(&vq->kick_fd);
	closep(&vq->call_fd);
	closep(&vq->err_fd);
}

/* Scratch space for one chain; devices get a right-sized copy. */
struct chain {
	struct iovec iov[VQ_MAX_SEGS];
	uint64_t gpa[VQ_MAX_SEGS];
	unsigned int nseg;
	unsigned int out_num;
	uint64_t out_len;
	uint64_t in_len;
};

static int add_buffer(const struct vu_mem *mem, struct chain *c, uint64_t gpa, uint32_t len,
		      bool writable)
{
	uint64_t left = len;

	/* Device-writable buffers come after all device-readable ones. */
	if (!writable && c->nseg > c->out_num)
		return -EINVAL;
	if (gpa + len < gpa)
		return -EFAULT;
	while (left) {
		uint64_t got;
		void *host = vu_mem_gpa(mem, gpa, left, &got);

		if (!host)
			return -EFAULT;
		if (c->nseg >= VQ_MAX_SEGS)
			return -E2BIG;
		c->iov[c->nseg] = (struct iovec){ .iov_base = host, .iov_len = got };
		c->gpa[c->nseg] = gpa;
		c->nseg++;
		if (writable)
			c->in_len += got;
		else {
			c->out_num++;
			c->out_len += got;
		}
		gpa += got;
		left -= got;
	}
	return 0;
}

static int walk_chain(struct vu_vq *vq, uint16_t head, struct chain *c)
{
	const struct vu_mem *mem = &vq_dev(vq)->mem;
	const struct vring_desc *table = vq->desc;
	uint32_t table_size = vq->num;
	uint32_t idx = head;
	bool indirect = false;

	for (uint32_t count = 0;; count++) {
		struct vring_desc d;
		int ret;

		/* More links than entries means the chain loops. */
		if (count >= table_size)
			return -ELOOP;
		memcpy(&d, &table[idx], sizeof(d));
		if (d.flags & VRING_DESC_F_INDIRECT) {
			uint64_t got;

			if (!vu_has_feature(vq_dev(vq), VU_F_INDIRECT_DESC) || indirect ||
			    count != 0 || (d.flags & VRING_DESC_F_NEXT))
				return -EINVAL;
			if (d.len == 0 || d.len % sizeof(d) || d.len / sizeof(d) > VU_MAX_QUEUE_SIZE)
				return -EINVAL;
			/* The table must be contiguous in one region. */
			table = vu_mem_gpa(mem, d.addr, d.len, &got);
			if (!table || got != d.len)
				return -EFAULT;
			table_size = d.len / sizeof(d);
			indirect = true;
			idx = 0;
			count = (uint32_t)-1; /* the loop's count++ restarts it at 0 */
			continue;
		}
		ret = add_buffer(mem, c, d.addr, d.len, d.flags & VRING_DESC_F_WRITE);
		if (ret < 0)
			return ret;
		if (!(d.flags & VRING_DESC_F_NEXT))
			return 0;
		idx = d.next;
		if (idx >= table_size)
			return -EINVAL;
	}
}

static struct vq_elem *elem_from_chain(uint16_t head, const struct chain *c)
{
	unsigned int in_num = c->nseg - c->out_num;
	struct vq_elem *e = g_malloc0(sizeof(*e) + c->nseg * sizeof(struct iovec) +
				      in_num * sizeof(uint64_t));

	e->head = head;
	e->out_num = c->out_num;
	e->in_num = in_num;
	e->out_len = c->out_len;
	e->in_len = c->in_len;
	e->out = (struct iovec *)(e + 1);
	e->in = e->out + c->out_num;
	e->in_gpa = (uint64_t *)(e->out + c->nseg);
	memcpy(e->out, c->iov, c->nseg * sizeof(struct iovec));
	memcpy(e->in_gpa, c->gpa + c->out_num, in_num * sizeof(uint64_t));
	return e;
}

static int take_chain(struct vu_vq *vq, uint16_t head, struct vq_elem **ret_elem)
{
	g_autofree struct chain *c = g_malloc(sizeof(*c));
	int ret;

	c->nseg = c->out_num = 0;
	c->out_len = c->in_len = 0;
	if (head >= vq->num)
		return -EINVAL;
	ret = walk_chain(vq, head, c);
	if (ret < 0)
		return ret;
	*ret_elem = elem_from_chain(head, c);
	return 0;
}

static void inflight_mark_taken(struct vu_vq *vq, uint16_t head)
{
	struct vu_inflight_queue *q = vq->inflight;

	if (!q)
		return;
	q->desc[head].counter = vq->inflight_counter++;
	__atomic_signal_fence(__ATOMIC_RELEASE);
	q->desc[head].inflight = 1;
}

/* Tells an EVENT_IDX driver to kick for anything past last_avail_idx. */
static void publish_avail_event(struct vu_vq *vq)
{
	__atomic_store_n(avail_event_ptr(vq), vq->last_avail_idx, __ATOMIC_RELAXED);
	log_used(vq, offsetof(struct vring_used, ring) + 8ull * vq->num, 2);
}

static int avail_pending(struct vu_vq *vq, uint16_t *ret_avail)
{
	uint16_t avail = __atomic_load_n(&vq->avail->idx, __ATOMIC_ACQUIRE);

	/* The driver cannot have made more than num entries available. */
	if ((uint16_t)(avail - vq->last_avail_idx) > vq->num)
		return -EINVAL;
	*ret_avail = avail;
	return avail != vq->last_avail_idx;
}

bool vq_has_avail(struct vu_vq *vq)
{
	uint16_t avail;

	if (!vq_ready(vq))
		return false;
	/* A broken index counts as work: vq_pop then breaks the queue. */
	return vq->resubmit_next < vq->resubmit_num || avail_pending(vq, &avail) != 0;
}

void vq_set_polling(struct vu_vq *vq, bool on)
{
	if (vq->polling == on || !vq_ready(vq))
		return;
	vq->polling = on;
	/*
	 * With EVENT_IDX the stale avail_event already holds kicks back (the
	 * driver kicks only when it passes it); without, the flag asks.  Going
	 * back, the caller's next vq_pop publishes avail_event and re-checks.
	 */
	if (!vu_has_feature(vq_dev(vq), VU_F_EVENT_IDX)) {
		uint16_t flags = __atomic_load_n(&vq->used->flags, __ATOMIC_RELAXED);

		flags = on ? flags | VRING_USED_F_NO_NOTIFY : flags & ~VRING_USED_F_NO_NOTIFY;
		__atomic_store_n(&vq->used->flags, flags, __ATOMIC_RELAXED);
		log_used(vq, offsetof(struct vring_used, flags), 2);
		/* Order the flag before the caller's next look at avail->idx. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
}

int vq_pop(struct vu_vq *vq, struct vq_elem **ret_elem)
{
	uint16_t avail, head;
	int ret;

	if (!vq_ready(vq))
		return vq->broken ? -EIO : 0;
	if (vq->resubmit_next < vq->resubmit_num) {
		head = vq->resubmit[vq->resubmit_next++];
		ret = take_chain(vq, head, ret_elem);
		goto taken;
	}
	ret = avail_pending(vq, &avail);
	/* While polling, avail_event stays behind: the driver does not kick. */
	if (ret == 0 && !vq->polling && vu_has_feature(vq_dev(vq), VU_F_EVENT_IDX)) {
		publish_avail_event(vq);
		/* Order the store above before re-reading the driver's index. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		ret = avail_pending(vq, &avail);
	}
	if (ret == 0)
		return 0;
	if (ret < 0)
		goto taken;
	head = __atomic_load_n(&vq->avail->ring[vq->last_avail_idx % vq->num], __ATOMIC_RELAXED);
	ret = take_chain(vq, head, ret_elem);
	if (ret == 0) {
		inflight_mark_taken(vq, head);
		vq->last_avail_idx++;
	}
taken:
	if (ret < 0) {
		vq_break(vq);
		return -EIO;
	}
	return 1;
}

static void log_elem_writes(struct vu_vq *vq, const struct vq_elem *e, uint64_t written)
{
	for (unsigned int i = 0; i < e->in_num && written; i++) {
		uint64_t len = e->in[i].iov_len < written ? e->in[i].iov_len : written;

		log_write(vq, e->in_gpa[i], len);
		written -= len;
	}
}

int vq_push(struct vu_vq *vq, struct vq_elem *elem, uint32_t written)
{
	struct vu_inflight_queue *q = vq->inflight;
	uint32_t slot;

	if (!vq->started || !vq->used) {
		vq_elem_free(elem);
		return -ESHUTDOWN;
	}
	if (written > elem->in_len)
		written = (uint32_t)elem->in_len;
	log_elem_writes(vq, elem, written);
	slot = vq->used_idx % vq->num;
	vq->used->ring[slot].id = elem->head;
	vq->used->ring[slot].len = written;
	log_used(vq, offsetof(struct vring_used, ring) + 8ull * slot, 8);
	if (q) {
		q->desc[elem->head].next = q->last_batch_head;
		q->last_batch_head = elem->head;
	}
	vq->used_idx++;
	/* The element must be visible before the index that publishes it. */
	__atomic_store_n(&vq->used->idx, vq->used_idx, __ATOMIC_RELEASE);
	log_used(vq, offsetof(struct vring_used, idx), 2);
	if (q) {
		q->desc[elem->head].inflight = 0;
		__atomic_signal_fence(__ATOMIC_RELEASE);
		q->used_idx = vq->used_idx;
	}
	vq_elem_free(elem);
	return 0;
}

void vq_notify(struct vu_vq *vq)
{
	if (!vq->used || vq->call_fd < 0)
		return;
	/* Our used->idx store must be visible before we read the driver's flags. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (vu_has_feature(vq_dev(vq), VU_F_EVENT_IDX)) {
		uint16_t old = vq->signalled_used, now = vq->used_idx;
		bool valid = vq->signalled_used_valid;
		uint16_t event = __atomic_load_n(used_event_ptr(vq), __ATOMIC_RELAXED);

		vq->signalled_used = now;
		vq->signalled_used_valid = true;
		/* virtio 1.2, 2.7.10: interrupt only when we passed used_event. */
		if (valid && (uint16_t)(now - event - 1) >= (uint16_t)(now - old))
			return;
	} else if (__atomic_load_n(&vq->avail->flags, __ATOMIC_RELAXED) &
		   VRING_AVAIL_F_NO_INTERRUPT) {
		return;
	}
	eventfd_write(vq->call_fd, 1);
}

void vq_kick_self(struct vu_vq *vq)
{
	/* The kick fd is non-blocking; a full counter already means "kicked". */
	if (vq->kick_fd >= 0)
		eventfd_write(vq->kick_fd, 1);
}

unsigned int vq_serve(struct vu_vq *vq, vq_handler handle, void *opaque)
{
	unsigned int done = 0;
	struct vq_elem *e;

	while (done < VQ_BUDGET && vq_pop(vq, &e) > 0) {
		vq_push(vq, e, handle(opaque, e));
		done++;
	}
	if (done)
		vq_notify(vq);
	/* Let the other connections in; come back for the rest. */
	if (done == VQ_BUDGET)
		vq_kick_self(vq);
	return done;
}

void vq_elem_free(struct vq_elem *elem)
{
	g_free(elem);
}

/* Copies between an iovec array (from offset) and a flat buffer. */
static size_t iov_copy(const struct iovec *iov, unsigned int n, size_t offset, uint8_t *buf,
		       size_t len, bool to_iov)
{
	size_t done = 0;

	for (unsigned int i = 0; i < n && done < len; i++) {
		uint8_t *seg = iov[i].iov_base;
		size_t chunk;

		if (offset >= iov[i].iov_len) {
			offset -= iov[i].iov_len;
			continue;
		}
		chunk = MIN(iov[i].iov_len - offset, len - done);
		if (to_iov)
			memcpy(seg + offset, buf + done, chunk);
		else
			memcpy(buf + done, seg + offset, chunk);
		done += chunk;
		offset = 0;
	}
	return done;
}

size_t vq_iov_to_buf(const struct iovec *iov, unsigned int n, size_t offset, void *buf, size_t len)
{
	return iov_copy(iov, n, offset, buf, len, false);
}

size_t vq_buf_to_iov(const struct iovec *iov, unsigned int n, size_t offset, const void *buf,
		     size_t len)
{
	return iov_copy(iov, n, offset, (uint8_t *)buf, len, true);
}

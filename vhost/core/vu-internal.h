/* SPDX-License-Identifier: MIT */
/* Private to the vhost-user core: state shared by its .c files. */
#ifndef VRDMA_VU_INTERNAL_H
#define VRDMA_VU_INTERNAL_H

#include <linux/virtio_ring.h>
#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#include "vu-proto.h"
#include "vu.h"

/* --- guest memory (vu-mem.c) --- */

struct vu_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t uva; /* the front end's address of the region */
	uint64_t mmap_offset;
	uint8_t *host; /* our mapping of gpa */
	void *map_base;
	size_t map_len;
	int fd; /* ours (a dup): devices map guest pages from it again */
	dev_t file_dev; /* with file_ino: the same file in a later table */
	ino_t file_ino;
};

struct vu_mem {
	unsigned int nregions;
	struct vu_region regions[VU_MAX_MEM_SLOTS];
	volatile sig_atomic_t *poisoned; /* set by the SIGBUS guard */
	bool populate; /* fill the page tables when mapping (vu_device_ops) */
};

/* Guest RAM one connection may map: far above any guest we serve, far below
 * the 128 TiB of address space that every connection shares. */
#define VU_MAX_MAPPED_BYTES (1ull << 40)

/* Maps the region; takes no ownership of fd. */
int vu_mem_add(struct vu_mem *mem, const struct vu_mem_desc *d, int fd);
int vu_mem_remove(struct vu_mem *mem, const struct vu_mem_desc *d);
void vu_mem_clear(struct vu_mem *mem);
/*
 * Host pointer for guest address gpa, and how many of the len bytes from
 * there stay inside that one region (*ret_len, >0).  NULL if unmapped.
 */
void *vu_mem_gpa(const struct vu_mem *mem, uint64_t gpa, uint64_t len, uint64_t *ret_len);
/* Host pointer for [uva, uva+len) which must lie in one region, or NULL. */
void *vu_mem_uva(const struct vu_mem *mem, uint64_t uva, uint64_t len);
/* The region holding gpa, or NULL. */
const struct vu_region *vu_mem_region(const struct vu_mem *mem, uint64_t gpa);
/* The same memory (file, offset, addresses) is in both tables. */
bool vu_region_in(const struct vu_region *r, const struct vu_mem *mem);

/* --- SIGBUS containment for shared mappings (vu-guard.c) --- */

/* Regions, the log, the inflight area and every RDMA ring of every connection. */
#define VU_GUARD_MAX 32768u
/* Registers a mapping: a SIGBUS in it sets *poisoned instead of killing us. */
int vu_guard_add(void *start, size_t len, volatile sig_atomic_t *poisoned);
void vu_guard_remove(void *start);
/* mmap(MAP_SHARED) of fd, registered with the guard; unmap with vu_unmap(). */
void *vu_map_shared(int fd, uint64_t offset, uint64_t len, volatile sig_atomic_t *poisoned,
		    size_t *ret_map_len, uint64_t *ret_skew);
/* The same, with the page tables filled now (MAP_POPULATE). */
void *vu_map_shared_populated(int fd, uint64_t offset, uint64_t len,
			      volatile sig_atomic_t *poisoned, size_t *ret_map_len,
			      uint64_t *ret_skew);
void vu_unmap(void *base, size_t len);

/* --- dirty log (vu-log.c) --- */

struct vu_log {
	uint8_t *bits;
	uint64_t size; /* bytes of bitmap */
	void *map_base;
	size_t map_len;
	volatile sig_atomic_t *poisoned;
};

int vu_log_set(struct vu_log *log, int fd, uint64_t size, uint64_t offset);
void vu_log_clear(struct vu_log *log);
/* Marks every 4 KiB page of [gpa, gpa+len); pages past the log are skipped. */
void vu_log_write(struct vu_log *log, uint64_t gpa, uint64_t len);

/* --- inflight tracking area (vu-inflight.c) --- */

struct vu_inflight_desc_state {
	uint8_t inflight;
	uint8_t padding[5];
	uint16_t next;
	uint64_t counter;
};

struct vu_inflight_queue {
	uint64_t features;
	uint16_t version;
	uint16_t desc_num;
	uint16_t last_batch_head;
	uint16_t used_idx;
	struct vu_inflight_desc_state desc[];
};

struct vu_inflight {
	void *map_base;
	size_t map_len;
	uint32_t skew; /* mapping starts this far before the area */
	volatile sig_atomic_t *poisoned;
	int fd;
	uint16_t num_queues;
	uint16_t queue_size;
};

/* Bytes of one queue's region, 64-byte aligned (0 if queue_size invalid). */
uint64_t vu_inflight_queue_bytes(uint16_t queue_size);
int vu_inflight_create(struct vu_inflight *inf, uint16_t num_queues, uint16_t queue_size);
int vu_inflight_adopt(struct vu_inflight *inf, int fd, const struct vu_inflight_desc *d);
void vu_inflight_clear(struct vu_inflight *inf);
struct vu_inflight_queue *vu_inflight_queue(const struct vu_inflight *inf, unsigned int index);

/* --- virtqueues (vu-vq.c) --- */

struct vu_vq {
	struct vu_dev *dev;
	unsigned int index;
	uint32_t num;
	struct vu_vring_addr addr;
	bool addr_set;
	bool started; /* kick fd given, not stopped by GET_VRING_BASE */
	bool enabled;
	bool broken;
	int kick_fd;
	int call_fd;
	int err_fd;

	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;

	uint16_t last_avail_idx;
	bool polling; /* the device polls the avail ring: kicks suppressed */
	uint16_t used_idx;
	uint16_t signalled_used;
	bool signalled_used_valid;

	struct vu_inflight_queue *inflight;
	uint64_t inflight_counter;
	uint16_t *resubmit; /* heads to re-execute first, in counter order */
	unsigned int resubmit_num;
	unsigned int resubmit_next;
};

/* Resolves ring addresses against the current memory; -EFAULT if not mapped. */
int vq_map_rings(struct vu_vq *vq);
/* Starts processing: shadow indexes, inflight recovery. */
int vq_start(struct vu_vq *vq);
void vq_stop(struct vu_vq *vq);
/* Marks the queue dead and tells the front end through the err fd. */
void vq_break(struct vu_vq *vq);
bool vq_ready(const struct vu_vq *vq);
void vq_close_fds(struct vu_vq *vq);

/* --- the device (vu-dev.c) --- */

struct vu_dev {
	int sock;
	struct vu_device_ops ops;
	void *opaque;
	struct vu_loop_ops loop;
	void *loop_data;
	struct vu_msg_reader reader;

	uint64_t features;
	uint64_t protocol_features;
	uint8_t status;
	bool owner_set;
	volatile sig_atomic_t poisoned; /* shared memory vanished under us */
	int backend_fd;

	struct vu_mem mem;
	struct vu_log log;
	struct vu_inflight inflight;
	unsigned int num_queues;
	struct vu_vq *vqs;

	/* The device state moving (vu-state.c): a load's channel, and the
	 * outcome CHECK_DEVICE_STATE reports (-EINPROGRESS: not loaded yet). */
	int state_fd;
	bool state_load;
	int state_result;
	bool has_device_state; /* the device moves a state of its own */
};

/* --- device state for migration (vu-state.c) --- */

/* SET_DEVICE_STATE_FD and CHECK_DEVICE_STATE; both reply themselves. */
int vu_state_set_fd(struct vu_dev *dev, struct vu_msg *msg);
int vu_state_check(struct vu_dev *dev, struct vu_msg *msg);
/* Forgets a transfer (its channel closed). */
void vu_state_drop(struct vu_dev *dev);

static inline bool vu_has_feature(const struct vu_dev *dev, unsigned int bit)
{
	return dev->features & (1ull << bit);
}

static inline bool vu_has_protocol_feature(const struct vu_dev *dev, unsigned int bit)
{
	return dev->protocol_features & (1ull << bit);
}

static inline bool vu_logging(const struct vu_dev *dev)
{
	return vu_has_feature(dev, VU_F_LOG_ALL) && dev->log.bits;
}

#endif

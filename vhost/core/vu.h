/* SPDX-License-Identifier: MIT */
/*
 * vhost-user back-end core: one struct vu_dev per front-end connection.
 *
 * The core never owns an event loop.  The embedder watches the socket and
 * calls vu_dev_dispatch() when it is readable; the core asks the embedder to
 * watch queue kick fds through vu_loop_ops.  Devices (blk, rng, later rdma)
 * plug in through struct vu_device_ops and serve their queues with
 * vq_pop()/vq_push()/vq_notify().
 *
 * Every function returns 0 (or a count) on success and -errno on failure.
 */
#ifndef VRDMA_VU_H
#define VRDMA_VU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

struct vu_dev;
struct vu_vq;

typedef void (*vu_watch_cb)(struct vu_dev *dev, int fd, void *data);

struct vu_loop_ops {
	/* Call cb(dev, fd, data) whenever fd is readable, until removed. */
	void (*add_watch)(struct vu_dev *dev, int fd, vu_watch_cb cb, void *data);
	void (*remove_watch)(struct vu_dev *dev, int fd);
};

/*
 * A device.  Hooks left NULL behave as "not supported": vu_dev_new()
 * fills them with defaults, so the core never tests for NULL.
 */
struct vu_device_ops {
	const char *name;
	uint16_t max_queues;
	/* Device virtio feature bits; the core adds its own (rings, logging). */
	uint64_t features;
	/* It has a config space (GET_CONFIG). */
	bool config_space;
	/* It can re-execute requests after a restart (INFLIGHT_SHMFD). */
	bool inflight_tracking;
	/* Fill the page tables of guest RAM when it is mapped: hardware
	 * registration of guest memory then finds its pages in place. */
	bool populate_memory;
	/* Copies config space bytes [offset, offset+len) into buf. */
	int (*get_config)(void *opaque, uint32_t offset, uint8_t *buf, uint32_t len);
	int (*set_config)(void *opaque, uint32_t offset, const uint8_t *buf, uint32_t len);
	/* New requests may be on vq (a kick, or work to resubmit). */
	void (*queue_kick)(void *opaque, struct vu_vq *vq);
	/* The front end acked these features (after SET_FEATURES). */
	int (*set_features)(void *opaque, uint64_t features);
	/* The front end reset the device: drop device state.  Also called
	 * before the connection goes away, while it still exists. */
	void (*reset)(void *opaque);
	/* The connection exists; called once, before any message. */
	void (*attach)(void *opaque, struct vu_dev *dev);
	/* The front end stopped vq (GET_VRING_BASE): nothing may be in flight
	 * into guest memory once this returns. */
	void (*queue_stop)(void *opaque, struct vu_vq *vq);
	/* Guest memory [gpa, gpa+size) went away (REM_MEM_REG, or not in a new
	 * table): drop whatever was mapped from it (vu_pages, which keep the
	 * memory itself until they are unmapped). */
	void (*mem_gone)(void *opaque, uint64_t gpa, uint64_t size);
	/*
	 * Migration of the device's own state (DEVICE_STATE), every queue
	 * stopped: save_state serializes it (the caller g_free()s the data),
	 * load_state takes what another back end's save_state produced (a
	 * hostile front end's bytes, for all the device knows).  Without
	 * save_state the protocol feature is not offered.
	 */
	int (*save_state)(void *opaque, uint8_t **ret_data, size_t *ret_len);
	int (*load_state)(void *opaque, const uint8_t *data, size_t len);
};

int vu_dev_new(int sock, const struct vu_device_ops *ops, void *opaque,
	       const struct vu_loop_ops *loop, void *loop_data, struct vu_dev **ret);
/* Removes every watch, closes every fd and mapping, and the socket. */
void vu_dev_free(struct vu_dev *dev);
/*
 * Handles every complete message the socket holds.  Returns 0 to go on,
 * or -errno when the connection must be dropped (vu_dev_free()).
 */
int vu_dev_dispatch(struct vu_dev *dev);
int vu_dev_socket(const struct vu_dev *dev);
/*
 * Shared memory of this connection vanished (the front end truncated a
 * file we mapped): it must be dropped.  Needs vu_guard_install().
 */
bool vu_dev_poisoned(const struct vu_dev *dev);
/*
 * Installs the process-wide SIGBUS handler that contains faults in memory
 * front ends share with us to their own connection.  Call once, early.
 */
int vu_guard_install(void);
void *vu_dev_loop_data(const struct vu_dev *dev);
/* Asks the front end to re-read config space (needs BACKEND_REQ). */
int vu_dev_config_changed(struct vu_dev *dev);
/* Watches for a device's own fds, through the embedder's loop. */
void vu_dev_add_watch(struct vu_dev *dev, int fd, vu_watch_cb cb, void *data);
void vu_dev_remove_watch(struct vu_dev *dev, int fd);
/* Dirty logging is on (LOG_ALL with a log): device writes must be marked. */
bool vu_dev_logging(const struct vu_dev *dev);
/* Marks [gpa, gpa+len) written, when logging. */
void vu_dev_log_write(struct vu_dev *dev, uint64_t gpa, uint64_t len);

/*
 * A contiguous host view of guest pages (an RDMA MR or ring).  A guarded
 * view (one the back end itself reads and writes) maps each page again
 * from its region's file, so it stays valid whatever the front end does
 * to its memory table until vu_pages_unmap().  An unguarded view (for
 * hardware only: an MR) of pages that are contiguous in one region is that
 * region's own mapping.
 */
struct vu_pages {
	uint8_t *addr;
	uint64_t len; /* npages << page_shift */
	uint64_t npages;
	unsigned int page_shift;
	uint64_t *gpa; /* of each page */
	bool guarded;
	bool borrowed; /* the region's mapping, not ours */
	uint64_t nmaps; /* mappings the view made (one per run of pages) */
};

/*
 * Maps npages guest-physical pages of 1 << page_shift bytes (each aligned
 * and wholly inside guest RAM, else -EFAULT).  guarded: the caller itself
 * reads and writes the view (a SIGBUS in it poisons the connection).
 * -ENOSPC, with nothing mapped, when the view would need more than
 * max_maps mappings (one per run of pages contiguous in one region).
 */
int vu_pages_map(struct vu_dev *dev, const uint64_t *gpas, uint64_t npages,
		 unsigned int page_shift, bool guarded, uint64_t max_maps, struct vu_pages **ret);
void vu_pages_unmap(struct vu_pages *p);
/* Marks bytes [off, off+len) of the view written, when logging. */
void vu_pages_log(struct vu_dev *dev, const struct vu_pages *p, uint64_t off, uint64_t len);
/* Some page of the view lies in [gpa, gpa+size). */
bool vu_pages_overlap(const struct vu_pages *p, uint64_t gpa, uint64_t size);

/* One request: a descriptor chain mapped to host iovecs. */
struct vq_elem {
	uint16_t head;
	unsigned int out_num; /* device-readable segments, first */
	unsigned int in_num;  /* device-writable segments, after */
	uint64_t out_len;
	uint64_t in_len;
	struct iovec *out;
	struct iovec *in;
	uint64_t *in_gpa; /* guest address of each in segment, for the log */
};

/* Upper bound of segments in one element (a chain longer is refused). */
#define VQ_MAX_SEGS 1024u

unsigned int vq_index(const struct vu_vq *vq);
/* The avail index the device takes next: the ring's base before any pop. */
uint16_t vq_next_avail(const struct vu_vq *vq);
/*
 * Takes the next request: 1 with *elem filled (free with vq_elem_free),
 * 0 if the queue is empty or stopped, -EIO if the driver broke the queue
 * (it is then dead until the front end restarts it; the err fd fired).
 */
int vq_pop(struct vu_vq *vq, struct vq_elem **ret_elem);
/* True if vq_pop has something (or a broken index) to report; no side effects. */
bool vq_has_avail(struct vu_vq *vq);
/*
 * Polling mode: the device looks at the ring itself, so the driver is asked
 * not to kick (VRING_USED_F_NO_NOTIFY, or avail_event left behind).  After
 * turning it off, serve the queue once more: that re-arms kicks and takes
 * what arrived in between.
 */
void vq_set_polling(struct vu_vq *vq, bool on);
/*
 * Returns a request to the driver: `written` bytes were written into its
 * in segments (they are logged for migration).  Frees elem.
 */
int vq_push(struct vu_vq *vq, struct vq_elem *elem, uint32_t written);
/* Interrupts the driver if it asked to be (EVENT_IDX / NO_INTERRUPT). */
void vq_notify(struct vu_vq *vq);
/*
 * Requests handled per kick before a device yields: it then calls
 * vq_kick_self() so the queue is served again after the loop's other work.
 */
#define VQ_BUDGET 256u
void vq_kick_self(struct vu_vq *vq);
/* Executes one request; returns the bytes it wrote into the in segments. */
typedef uint32_t (*vq_handler)(void *opaque, struct vq_elem *elem);
/*
 * The usual kick: up to VQ_BUDGET requests through handle(), each pushed
 * with what it wrote, one notification, and a self-kick when the budget
 * ran out.  Returns how many were served.
 */
unsigned int vq_serve(struct vu_vq *vq, vq_handler handle, void *opaque);
void vq_elem_free(struct vq_elem *elem);

/* Copies up to len bytes from/to an element's segments at offset. */
size_t vq_iov_to_buf(const struct iovec *iov, unsigned int n, size_t offset, void *buf, size_t len);
size_t vq_buf_to_iov(const struct iovec *iov, unsigned int n, size_t offset, const void *buf,
		     size_t len);

#endif

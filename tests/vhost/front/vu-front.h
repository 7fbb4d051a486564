/* SPDX-License-Identifier: MIT */
/*
 * vu-front: a vhost-user front end for tests and benchmarks.
 *
 * It plays QEMU's side of the socket (guest RAM in memfds, every front-end
 * request, raw access to send malformed ones) and the guest driver's side
 * of split virtqueues (post buffers, kick, reap used entries, watch the
 * call eventfd). Every function returns 0 (or a count) or -errno; pointers
 * are NULL only for out-of-memory. Nothing here logs.
 */
#ifndef VU_FRONT_H
#define VU_FRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- wire constants (vhost-user protocol) ---- */

enum vuf_request {
	VUF_GET_FEATURES = 1,
	VUF_SET_FEATURES = 2,
	VUF_SET_OWNER = 3,
	VUF_RESET_OWNER = 4,
	VUF_SET_MEM_TABLE = 5,
	VUF_SET_LOG_BASE = 6,
	VUF_SET_LOG_FD = 7,
	VUF_SET_VRING_NUM = 8,
	VUF_SET_VRING_ADDR = 9,
	VUF_SET_VRING_BASE = 10,
	VUF_GET_VRING_BASE = 11,
	VUF_SET_VRING_KICK = 12,
	VUF_SET_VRING_CALL = 13,
	VUF_SET_VRING_ERR = 14,
	VUF_GET_PROTOCOL_FEATURES = 15,
	VUF_SET_PROTOCOL_FEATURES = 16,
	VUF_GET_QUEUE_NUM = 17,
	VUF_SET_VRING_ENABLE = 18,
	VUF_SET_BACKEND_REQ_FD = 21,
	VUF_GET_CONFIG = 24,
	VUF_SET_CONFIG = 25,
	VUF_GET_INFLIGHT_FD = 31,
	VUF_SET_INFLIGHT_FD = 32,
	VUF_RESET_DEVICE = 34,
	VUF_GET_MAX_MEM_SLOTS = 36,
	VUF_ADD_MEM_REG = 37,
	VUF_REM_MEM_REG = 38,
	VUF_SET_STATUS = 39,
	VUF_GET_STATUS = 40,
	VUF_SET_DEVICE_STATE_FD = 42,
	VUF_CHECK_DEVICE_STATE = 43,
};

#define VUF_FLAG_VERSION	0x1u
#define VUF_FLAG_REPLY		0x4u
#define VUF_FLAG_NEED_REPLY	0x8u

#define VUF_HDR_SIZE		12u
#define VUF_MAX_PAYLOAD		4096u
/* The protocol allows 8 fds; raw sends may carry more to test rejection. */
#define VUF_PROTO_MAX_FDS	8u
#define VUF_RAW_MAX_FDS		16u
#define VUF_MAX_REGIONS		8u
/* Payload sizes of the fixed-layout messages. */
#define VUF_REGION_DESC_SIZE	32u
#define VUF_MEM_TABLE_SIZE	(8u + VUF_MAX_REGIONS * VUF_REGION_DESC_SIZE)
#define VUF_VRING_ADDR_SIZE	40u
#define VUF_VRING_STATE_SIZE	8u
#define VUF_LOG_DESC_SIZE	16u
/* QEMU's VhostUserInflight is not packed: 20 bytes of fields, 24 on the wire. */
#define VUF_INFLIGHT_DESC_SIZE	24u
#define VUF_CONFIG_HDR_SIZE	12u
#define VUF_VRING_NOFD		(1u << 8)

/* Virtio feature bits. */
#define VUF_F_LOG_ALL		26
#define VUF_F_INDIRECT_DESC	28
#define VUF_F_EVENT_IDX		29
#define VUF_F_PROTOCOL_FEATURES	30
#define VUF_F_VERSION_1		32
#define VUF_BLK_F_RO		5
#define VUF_BLK_F_SEG_MAX	2
#define VUF_BLK_F_BLK_SIZE	6
#define VUF_BLK_F_FLUSH		9
#define VUF_BLK_F_MQ		12

/* Protocol feature bits. */
#define VUF_PF_MQ		0
#define VUF_PF_LOG_SHMFD	1
#define VUF_PF_REPLY_ACK	3
#define VUF_PF_BACKEND_REQ	5
#define VUF_PF_CONFIG		9
#define VUF_PF_INFLIGHT_SHMFD	12
#define VUF_PF_RESET_DEVICE	13
#define VUF_PF_CONFIG_MEM_SLOTS	15
#define VUF_PF_STATUS		16
#define VUF_PF_DEVICE_STATE	19

#define VUF_BIT(b) (1ull << (b))

/* ---- connection and messages ---- */

struct vuf_msg {
	uint32_t request;
	uint32_t flags;
	uint32_t size;			/* header's size field == payload bytes read */
	uint8_t payload[VUF_MAX_PAYLOAD];
	int fds[VUF_RAW_MAX_FDS];	/* received fds, owned by the message */
	size_t nfds;
};

struct vuf_conn;

/*
 * A wait of ms on this machine, stretched by VRDMA_SLOWDOWN: the speed
 * factor the rxe tiers measure (tests/rxe-vm), 1 when unset or below 1.
 * Every wait for something that must happen goes through it, so that a
 * loaded or emulated machine is slower, not failing.
 */
int vuf_slow_ms(int ms);

/* Connects, retrying ECONNREFUSED/ENOENT until timeout_ms has passed. */
int vuf_conn_connect(const char *path, int timeout_ms, struct vuf_conn **ret_conn);
/* Takes ownership of an already connected stream socket. */
int vuf_conn_adopt(int fd, struct vuf_conn **ret_conn);
void vuf_conn_free(struct vuf_conn *c);
int vuf_conn_fd(const struct vuf_conn *c);
/* Receive timeout for every reply (default 5000 ms). */
void vuf_conn_set_timeout(struct vuf_conn *c, int timeout_ms);
/*
 * When REPLY_ACK has been negotiated, typed requests without a reply of
 * their own set NEED_REPLY and wait for the ack (default on). A non-zero
 * ack is returned as -EREMOTEIO.
 */
void vuf_conn_set_reply_ack(struct vuf_conn *c, bool on);
uint64_t vuf_conn_features(const struct vuf_conn *c);
uint64_t vuf_conn_protocol_features(const struct vuf_conn *c);

/* Sends bytes exactly as given (any header), with fds as SCM_RIGHTS. */
int vuf_send_raw(struct vuf_conn *c, const void *buf, size_t len,
		 const int *fds, size_t nfds);
/* Sends header {request, flags, len} and the payload. */
int vuf_send_msg(struct vuf_conn *c, uint32_t request, uint32_t flags,
		 const void *payload, uint32_t len, const int *fds, size_t nfds);
/*
 * Receives one message. -ETIMEDOUT after timeout_ms (<0: the connection's),
 * -ECONNRESET on EOF, -EPROTO if the size field exceeds VUF_MAX_PAYLOAD.
 * The caller closes ret_msg's fds with vuf_msg_close_fds().
 */
int vuf_recv_msg(struct vuf_conn *c, struct vuf_msg *ret_msg, int timeout_ms);
void vuf_msg_close_fds(struct vuf_msg *m);
/* Waits for the u64 reply to `request`; returns it in ret_val. */
int vuf_recv_u64_reply(struct vuf_conn *c, uint32_t request, uint64_t *ret_val);
/*
 * Generic request: sends, then either reads the reply into ret_reply
 * (if non-NULL) or does the REPLY_ACK dance when enabled.
 */
int vuf_request(struct vuf_conn *c, uint32_t request, const void *payload,
		uint32_t len, const int *fds, size_t nfds, struct vuf_msg *ret_reply);
/* True if the peer has closed the connection (EOF pending, no data). */
bool vuf_conn_peer_closed(struct vuf_conn *c, int timeout_ms);

/* Typed requests. */
int vuf_get_features(struct vuf_conn *c, uint64_t *ret_features);
int vuf_set_features(struct vuf_conn *c, uint64_t features);
int vuf_get_protocol_features(struct vuf_conn *c, uint64_t *ret_features);
int vuf_set_protocol_features(struct vuf_conn *c, uint64_t features);
int vuf_set_owner(struct vuf_conn *c);
int vuf_reset_device(struct vuf_conn *c);
int vuf_get_max_mem_slots(struct vuf_conn *c, uint64_t *ret_slots);
int vuf_get_queue_num(struct vuf_conn *c, uint64_t *ret_num);
int vuf_set_vring_num(struct vuf_conn *c, uint32_t index, uint32_t num);
int vuf_set_vring_base(struct vuf_conn *c, uint32_t index, uint32_t base);
int vuf_get_vring_base(struct vuf_conn *c, uint32_t index, uint32_t *ret_base);
int vuf_set_vring_enable(struct vuf_conn *c, uint32_t index, bool enable);
/* fd < 0 sends the "no fd" flag (bit 8) and no ancillary data. */
int vuf_set_vring_kick(struct vuf_conn *c, uint32_t index, int fd);
int vuf_set_vring_call(struct vuf_conn *c, uint32_t index, int fd);
int vuf_set_vring_err(struct vuf_conn *c, uint32_t index, int fd);

struct vuf_vring_addr {
	uint32_t index;
	uint32_t flags;		/* bit 0: VHOST_VRING_F_LOG */
	uint64_t desc_uva, used_uva, avail_uva;
	uint64_t log_gpa;	/* guest-physical address of the used ring */
};
#define VUF_VRING_F_LOG 0x1u
int vuf_set_vring_addr(struct vuf_conn *c, const struct vuf_vring_addr *a);

struct vuf_region_desc {
	uint64_t gpa, size, uva, mmap_offset;
};
/* Exactly as given: n descriptors, nfds fds (hostile tests mismatch them). */
int vuf_set_mem_table_raw(struct vuf_conn *c, const struct vuf_region_desc *r,
			  uint32_t n, const int *fds, size_t nfds);
int vuf_add_mem_reg(struct vuf_conn *c, const struct vuf_region_desc *r, int fd);
int vuf_rem_mem_reg(struct vuf_conn *c, const struct vuf_region_desc *r);

/* Reply payload is checked to be VUF_CONFIG_HDR_SIZE + size. */
int vuf_get_config(struct vuf_conn *c, uint32_t offset, uint32_t size, void *ret_buf);
int vuf_set_config(struct vuf_conn *c, uint32_t offset, uint32_t flags,
		   const void *buf, uint32_t size);
int vuf_set_status(struct vuf_conn *c, uint8_t status);
int vuf_get_status(struct vuf_conn *c, uint8_t *ret_status);

/* SET_LOG_BASE always gets a u64 reply (LOG_SHMFD); non-zero -> -EREMOTEIO. */
int vuf_set_log_base_fd(struct vuf_conn *c, int fd, uint64_t size, uint64_t offset);

struct vuf_inflight_desc {
	uint64_t mmap_size, mmap_offset;
	uint16_t num_queues, queue_size;
};
/* The caller owns *ret_fd. */
/*
 * The device's own state, as QEMU 8.2 moves it (DEVICE_STATE): SET_DEVICE_
 * STATE_FD with a pipe end, the back end's channel instead if it answers
 * with one, the bytes to EOF (save) or written and closed (load), then
 * CHECK_DEVICE_STATE.  -EREMOTEIO when the back end reports a failure.
 */
int vuf_save_device_state(struct vuf_conn *c, uint8_t **ret_data, size_t *ret_len);
int vuf_load_device_state(struct vuf_conn *c, const uint8_t *data, size_t len);

int vuf_get_inflight_fd(struct vuf_conn *c, uint16_t num_queues, uint16_t queue_size,
			struct vuf_inflight_desc *ret_desc, int *ret_fd);
int vuf_set_inflight_fd(struct vuf_conn *c, const struct vuf_inflight_desc *d, int fd);

/*
 * SET_OWNER, GET_FEATURES, protocol features (if offered), SET_FEATURES
 * with want & offered. The negotiated sets are remembered by the conn.
 */
int vuf_negotiate(struct vuf_conn *c, uint64_t want, uint64_t want_protocol,
		  uint64_t *ret_features, uint64_t *ret_protocol);

/* ---- guest RAM ---- */

struct vuf_mem;
struct vuf_mem_region {
	uint64_t gpa, size;
	uint64_t fd_offset;	/* where gpa lives in fd (mmap offset on the wire) */
	int fd;
	uint8_t *host;		/* pointer to gpa */
};

struct vuf_mem *vuf_mem_new(void);
void vuf_mem_free(struct vuf_mem *m);
/* A new memfd of fd_offset + size bytes; gpa..gpa+size maps fd_offset.. */
int vuf_mem_add_region(struct vuf_mem *m, uint64_t gpa, uint64_t size, uint64_t fd_offset);
/*
 * The same over a file the caller made (a plain file, hugetlbfs): fd must
 * hold fd_offset + size bytes. The region keeps a dup; fd stays the caller's.
 */
int vuf_mem_add_region_fd(struct vuf_mem *m, uint64_t gpa, uint64_t size, uint64_t fd_offset,
			  int fd);
size_t vuf_mem_nregions(const struct vuf_mem *m);
const struct vuf_mem_region *vuf_mem_region(const struct vuf_mem *m, size_t i);
/* The wire descriptor of region i (uva is our pointer, like QEMU's). */
struct vuf_region_desc vuf_mem_region_desc(const struct vuf_mem *m, size_t i);
/* SET_MEM_TABLE with every region. */
int vuf_mem_send_table(const struct vuf_mem *m, struct vuf_conn *c);
/* NULL unless [gpa, gpa+len) is inside one region. */
void *vuf_mem_ptr(const struct vuf_mem *m, uint64_t gpa, uint64_t len);
int vuf_mem_gpa(const struct vuf_mem *m, const void *p, uint64_t *ret_gpa);
/* User (front-end virtual) address of gpa, what SET_VRING_ADDR carries. */
int vuf_mem_uva(const struct vuf_mem *m, uint64_t gpa, uint64_t *ret_uva);
/* Bump allocator over the regions, zeroed memory; -ENOMEM when full. */
int vuf_mem_alloc(struct vuf_mem *m, uint64_t size, uint64_t align, uint64_t *ret_gpa);
/* The same inside one region (first fit is region order otherwise). */
int vuf_mem_alloc_in(struct vuf_mem *m, size_t region, uint64_t size, uint64_t align,
		     uint64_t *ret_gpa);

/* ---- split virtqueue, driver side ---- */

#define VUF_DESC_F_NEXT		1u
#define VUF_DESC_F_WRITE	2u
#define VUF_DESC_F_INDIRECT	4u
#define VUF_AVAIL_F_NO_INTERRUPT 1u
#define VUF_USED_F_NO_NOTIFY	1u
#define VUF_VQ_MAX_SIZE		32768u
#define VUF_INDIRECT_MAX	64u

struct vuf_buf {
	uint64_t gpa;
	uint32_t len;
	bool device_writes;
};

struct vuf_used {
	uint32_t id;
	uint32_t len;
};

struct vuf_vq {
	struct vuf_conn *conn;
	struct vuf_mem *mem;
	uint32_t index;
	uint16_t num;
	bool event_idx;		/* VIRTIO_F_EVENT_IDX negotiated */
	bool log;		/* send VHOST_VRING_F_LOG with the ring addresses */
	uint64_t desc_gpa, avail_gpa, used_gpa;
	uint64_t used_log_gpa;	/* log address of the used ring (init: used_gpa) */
	uint8_t *desc, *avail, *used;	/* host pointers into guest RAM */
	int kick_fd, call_fd, err_fd;	/* eventfds we own */
	uint16_t avail_idx;		/* next avail idx the driver publishes */
	uint16_t kicked_idx;		/* avail idx at the last notification */
	uint16_t last_used;		/* next used entry the driver reaps */
	uint16_t free_head, num_free;
	uint16_t *free_next;		/* free list, and links of posted chains */
	uint16_t *chain_len;		/* per head: descriptors to free, 0 if idle */
	bool manual_used_event;		/* else used_event follows last_used */
	uint64_t indirect_pool_gpa;	/* num tables of VUF_INDIRECT_MAX entries */
};

/* Lays out the rings in m (free descriptor list, eventfds). */
int vuf_vq_init(struct vuf_vq *vq, struct vuf_conn *c, struct vuf_mem *m,
		uint32_t index, uint16_t num);
void vuf_vq_destroy(struct vuf_vq *vq);
/* Forgets all driver state and zeroes the rings (reuse after a reset). */
void vuf_vq_reset(struct vuf_vq *vq);
/*
 * SET_VRING_NUM, BASE (avail_idx), ADDR, CALL, ERR, KICK, then ENABLE if
 * protocol features were negotiated. event_idx follows the conn features.
 */
int vuf_vq_start(struct vuf_vq *vq);
/* Same with an explicit SET_VRING_BASE (vuf_vq_start uses last_used). */
int vuf_vq_start_at(struct vuf_vq *vq, uint16_t base);
/* GET_VRING_BASE: stops the ring on the back end. */
int vuf_vq_stop(struct vuf_vq *vq, uint32_t *ret_base);
/* Posts a chain (not yet kicked); indirect puts it in one indirect table. */
int vuf_vq_add(struct vuf_vq *vq, const struct vuf_buf *bufs, size_t n,
	       bool indirect, uint16_t *ret_head);
/* Notifies if the device asked for it (EVENT_IDX / NO_NOTIFY). */
int vuf_vq_kick(struct vuf_vq *vq);
int vuf_vq_kick_force(struct vuf_vq *vq);
/* Number of used entries not yet reaped. */
uint16_t vuf_vq_pending_used(const struct vuf_vq *vq);
/* Reaps one used entry, freeing its descriptors; -ETIMEDOUT. */
int vuf_vq_wait_used(struct vuf_vq *vq, int timeout_ms, struct vuf_used *ret_used);
/*
 * One request at a time: kicks, reaps the next used entry, and returns
 * -EPROTO if it is not the chain at head (the back end used another).
 */
int vuf_vq_kick_and_reap(struct vuf_vq *vq, uint16_t head, int timeout_ms,
			 struct vuf_used *ret_used);
/* Count of call-eventfd signals since last asked (0 if none), -errno. */
int vuf_vq_take_calls(struct vuf_vq *vq, uint64_t *ret_count);
int vuf_vq_wait_call(struct vuf_vq *vq, int timeout_ms);
int vuf_vq_take_errs(struct vuf_vq *vq, uint64_t *ret_count);
int vuf_vq_wait_err(struct vuf_vq *vq, int timeout_ms);
/* EVENT_IDX: ask for an interrupt when used idx passes `idx`. */
void vuf_vq_set_used_event(struct vuf_vq *vq, uint16_t idx);
uint16_t vuf_vq_avail_event(const struct vuf_vq *vq);
void vuf_vq_set_avail_flags(struct vuf_vq *vq, uint16_t flags);
uint16_t vuf_vq_used_idx(const struct vuf_vq *vq);

/* Raw access for hostile tests: no free-list bookkeeping. */
void vuf_vq_write_desc(struct vuf_vq *vq, uint16_t i, uint64_t gpa, uint32_t len,
		       uint16_t flags, uint16_t next);
/* Puts head in the next avail slot and publishes avail_idx + 1. */
void vuf_vq_push_avail_raw(struct vuf_vq *vq, uint16_t head);
/* Publishes an arbitrary avail idx. */
void vuf_vq_set_avail_idx_raw(struct vuf_vq *vq, uint16_t idx);

/* ---- dirty log ---- */

#define VUF_LOG_PAGE 4096u

struct vuf_log {
	int fd;
	uint8_t *map;		/* the whole fd */
	uint64_t size;		/* log bytes (after offset) */
	uint64_t offset;	/* where the log starts in fd */
};

/* A log memfd covering guest addresses [0, covered) at offset in the fd. */
int vuf_log_new(uint64_t covered, uint64_t offset, struct vuf_log **ret_log);
void vuf_log_free(struct vuf_log *l);
int vuf_log_send(struct vuf_log *l, struct vuf_conn *c);
bool vuf_log_page_dirty(const struct vuf_log *l, uint64_t gpa);
/* Number of dirty pages; the first max are stored in ret_pages (page numbers). */
size_t vuf_log_dirty_pages(const struct vuf_log *l, uint64_t *ret_pages, size_t max);
void vuf_log_clear(struct vuf_log *l);

/* ---- virtio-blk ---- */

#define VUF_BLK_T_IN		0u
#define VUF_BLK_T_OUT		1u
#define VUF_BLK_T_FLUSH		4u
#define VUF_BLK_T_GET_ID	8u
#define VUF_BLK_S_OK		0u
#define VUF_BLK_S_IOERR		1u
#define VUF_BLK_S_UNSUPP	2u
#define VUF_BLK_ID_BYTES	20u
#define VUF_BLK_SECTOR		512u
#define VUF_BLK_CONFIG_SIZE	60u

struct vuf_blk_config {
	uint64_t capacity;
	uint32_t size_max, seg_max, blk_size;
	uint8_t wce;
	uint16_t num_queues;
};
int vuf_blk_get_config(struct vuf_conn *c, struct vuf_blk_config *ret_cfg);

/*
 * Per-slot guest memory for one request: a 16-byte header, data and the
 * status byte. Posting is asynchronous, so many can be in flight.
 */
struct vuf_blk_req {
	uint64_t hdr_gpa, data_gpa, status_gpa;
	uint32_t data_cap;
	uint16_t head;
	uint32_t used_len;	/* set by vuf_blk_io */
};
int vuf_blk_req_alloc(struct vuf_mem *m, uint32_t data_cap, struct vuf_blk_req *ret_req);
/* Writes the header, marks status 0xff, posts hdr/data/status. */
int vuf_blk_post(struct vuf_vq *vq, struct vuf_blk_req *r, uint32_t type,
		 uint64_t sector, uint32_t len, bool indirect);
uint8_t vuf_blk_req_status(const struct vuf_vq *vq, const struct vuf_blk_req *r);
/*
 * Synchronous request through a scratch slot: copies buf in (OUT) or out
 * (IN, GET_ID), kicks, waits. Returns the status byte (>= 0) or -errno.
 */
int vuf_blk_io(struct vuf_vq *vq, struct vuf_blk_req *scratch, uint32_t type,
	       uint64_t sector, void *buf, uint32_t len, bool indirect, int timeout_ms);

/* ---- virtio-rng ---- */

/* Posts one device-writable buffer of len, returns bytes the device wrote. */
int vuf_rng_read(struct vuf_vq *vq, uint64_t buf_gpa, uint32_t len, int timeout_ms);

/* ---- running the back end ---- */

struct vuf_daemon {
	pid_t pid;
	bool exited;		/* reaped; wstatus is valid */
	int wstatus;
};
/*
 * Forks argv (argv[0] is the path), then waits until connect() on
 * socket_path succeeds (the contract's readiness signal).
 */
int vuf_daemon_spawn(char *const argv[], const char *socket_path, int timeout_ms,
		     struct vuf_daemon *ret_d);
bool vuf_daemon_alive(struct vuf_daemon *d);
/* SIGTERM, wait up to timeout_ms (then SIGKILL, -ETIMEDOUT); wait status out. */
int vuf_daemon_stop(struct vuf_daemon *d, int timeout_ms, int *ret_wstatus);
/* Open fds of a process, from /proc/<pid>/fd. */
int vuf_proc_fd_count(pid_t pid);

#endif

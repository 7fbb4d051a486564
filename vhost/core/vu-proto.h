/* SPDX-License-Identifier: MIT */
/*
 * vhost-user wire format (QEMU docs/interop/vhost-user.rst) and the one
 * place where every byte a front end sends is checked: the request table,
 * the message reader and the payload decoders.  Nothing outside this file
 * looks at raw message bytes.
 */
#ifndef VRDMA_VU_PROTO_H
#define VRDMA_VU_PROTO_H

#include <stdbool.h>
#include <stdint.h>

enum vu_request {
	VU_GET_FEATURES = 1,
	VU_SET_FEATURES = 2,
	VU_SET_OWNER = 3,
	VU_RESET_OWNER = 4,
	VU_SET_MEM_TABLE = 5,
	VU_SET_LOG_BASE = 6,
	VU_SET_LOG_FD = 7,
	VU_SET_VRING_NUM = 8,
	VU_SET_VRING_ADDR = 9,
	VU_SET_VRING_BASE = 10,
	VU_GET_VRING_BASE = 11,
	VU_SET_VRING_KICK = 12,
	VU_SET_VRING_CALL = 13,
	VU_SET_VRING_ERR = 14,
	VU_GET_PROTOCOL_FEATURES = 15,
	VU_SET_PROTOCOL_FEATURES = 16,
	VU_GET_QUEUE_NUM = 17,
	VU_SET_VRING_ENABLE = 18,
	VU_SET_BACKEND_REQ_FD = 21,
	VU_GET_CONFIG = 24,
	VU_SET_CONFIG = 25,
	VU_GET_INFLIGHT_FD = 31,
	VU_SET_INFLIGHT_FD = 32,
	VU_RESET_DEVICE = 34,
	VU_GET_MAX_MEM_SLOTS = 36,
	VU_ADD_MEM_REG = 37,
	VU_REM_MEM_REG = 38,
	VU_SET_STATUS = 39,
	VU_GET_STATUS = 40,
	VU_SET_DEVICE_STATE_FD = 42,
	VU_CHECK_DEVICE_STATE = 43,
	VU_REQUEST_MAX,
};

/* Back-end to front-end requests, on the channel from SET_BACKEND_REQ_FD. */
enum { VU_BACKEND_CONFIG_CHANGE_MSG = 2 };

enum {
	VU_FLAG_VERSION_MASK = 0x3,
	VU_FLAG_VERSION = 0x1,
	VU_FLAG_REPLY = 0x4,
	VU_FLAG_NEED_REPLY = 0x8,
};

/* Protocol feature bits (GET/SET_PROTOCOL_FEATURES). */
enum {
	VU_PROTO_F_MQ = 0,
	VU_PROTO_F_LOG_SHMFD = 1,
	VU_PROTO_F_REPLY_ACK = 3,
	VU_PROTO_F_BACKEND_REQ = 5,
	VU_PROTO_F_CONFIG = 9,
	VU_PROTO_F_INFLIGHT_SHMFD = 12,
	VU_PROTO_F_RESET_DEVICE = 13,
	VU_PROTO_F_CONFIGURE_MEM_SLOTS = 15,
	VU_PROTO_F_STATUS = 16,
	VU_PROTO_F_DEVICE_STATE = 19,
};

/* SET_DEVICE_STATE_FD: which way the state goes, and when. */
enum { VU_STATE_SAVE = 0, VU_STATE_LOAD = 1 };
enum { VU_STATE_PHASE_STOPPED = 0 };
/* Its reply's flag: no fd comes with the reply. */
#define VU_STATE_REPLY_NOFD (1ull << 8)

struct vu_state_req {
	uint32_t direction;
	uint32_t phase;
};

/* Virtio feature bits the core itself implements. */
enum {
	VU_F_LOG_ALL = 26,
	VU_F_INDIRECT_DESC = 28,
	VU_F_EVENT_IDX = 29,
	VU_F_PROTOCOL_FEATURES = 30,
	VU_F_VERSION_1 = 32,
};

#define VU_HDR_SIZE 12u
#define VU_MAX_FDS 8u
#define VU_MAX_CONFIG_SIZE 256u
#define VU_MAX_PAYLOAD (12u + VU_MAX_CONFIG_SIZE)
/* SET_MEM_TABLE carries at most this many regions (QEMU's baseline). */
#define VU_MEM_TABLE_MAX_REGIONS 8u
#define VU_MAX_MEM_SLOTS 32u
#define VU_MAX_QUEUE_SIZE 32768u
#define VU_VRING_NOFD (1u << 8)
#define VU_VRING_IDX_MASK 0xffu
#define VU_VRING_F_LOG 1u

/* One received message: header, payload, and the fds that came with it. */
struct vu_msg {
	uint32_t request;
	uint32_t flags;
	uint32_t size;
	uint8_t payload[VU_MAX_PAYLOAD];
	int fds[VU_MAX_FDS];
	unsigned int nfds;
};

/*
 * Incremental reader for a non-blocking stream socket: a hostile front end
 * may dribble a message byte by byte, and must not stall the other
 * connections the daemon serves.
 */
struct vu_msg_reader {
	struct vu_msg msg;
	uint8_t hdr[VU_HDR_SIZE];
	uint32_t have; /* bytes of header + payload received so far */
};

void vu_msg_reader_init(struct vu_msg_reader *r);
/* Closes every fd the reader holds and empties it. */
void vu_msg_reader_reset(struct vu_msg_reader *r);
/*
 * Reads what the socket has.  Returns 1 with a whole, centrally validated
 * message in r->msg (its fds now owned by the caller), 0 if more bytes are
 * needed, -ECONNRESET on EOF, or another -errno when the message breaks the
 * rules (the connection must be dropped; the reader has closed its fds).
 */
int vu_msg_read(int sock, struct vu_msg_reader *r, unsigned int num_queues);

/* Closes every fd of a message (safe to call twice). */
void vu_msg_close_fds(struct vu_msg *msg);
/* Takes fd number i out of the message, or -1. */
int vu_msg_take_fd(struct vu_msg *msg, unsigned int i);

const char *vu_request_name(uint32_t request);
/* Whether this request has its own reply (so REPLY_ACK does not apply). */
bool vu_request_has_reply(uint32_t request);

/* Sends a reply to msg with the given payload (no fds unless nfds). */
int vu_msg_send_reply(int sock, const struct vu_msg *msg, const void *payload,
		      uint32_t size, const int *fds, unsigned int nfds);
int vu_msg_send_reply_u64(int sock, const struct vu_msg *msg, uint64_t value);
/* The same with fd attached (none when fd < 0). */
int vu_msg_send_reply_u64_fd(int sock, const struct vu_msg *msg, uint64_t value, int fd);

/* --- decoded payloads: every decoder checks sizes and ranges --- */

struct vu_mem_desc {
	uint64_t guest_addr;
	uint64_t size;
	uint64_t user_addr;
	uint64_t mmap_offset;
};

struct vu_mem_table {
	uint32_t nregions;
	struct vu_mem_desc regions[VU_MEM_TABLE_MAX_REGIONS];
};

struct vu_vring_state {
	uint32_t index;
	uint32_t num;
};

struct vu_vring_addr {
	uint32_t index;
	uint32_t flags;
	uint64_t desc_user_addr;
	uint64_t used_user_addr;
	uint64_t avail_user_addr;
	uint64_t log_guest_addr;
};

struct vu_log_area {
	uint64_t mmap_size;
	uint64_t mmap_offset;
};

struct vu_config_req {
	uint32_t offset;
	uint32_t size;
	uint32_t flags;
	const uint8_t *data; /* points into the message, size bytes */
};

struct vu_inflight_desc {
	uint64_t mmap_size;
	uint64_t mmap_offset;
	uint16_t num_queues;
	uint16_t queue_size;
};

int vu_decode_u64(const struct vu_msg *msg, uint64_t *ret);
int vu_decode_state_req(const struct vu_msg *msg, struct vu_state_req *ret);
int vu_decode_vring_state(const struct vu_msg *msg, struct vu_vring_state *ret);
int vu_decode_vring_addr(const struct vu_msg *msg, struct vu_vring_addr *ret);
/* For KICK/CALL/ERR: the queue index and whether an fd came along. */
int vu_decode_vring_fd(const struct vu_msg *msg, uint32_t *ret_index, bool *ret_has_fd);
int vu_decode_mem_table(const struct vu_msg *msg, struct vu_mem_table *ret);
int vu_decode_mem_reg(const struct vu_msg *msg, struct vu_mem_desc *ret);
int vu_decode_log_area(const struct vu_msg *msg, struct vu_log_area *ret);
int vu_decode_config(const struct vu_msg *msg, struct vu_config_req *ret);
int vu_decode_inflight(const struct vu_msg *msg, struct vu_inflight_desc *ret);

/* Encoders for replies and back-end requests. */
void vu_encode_vring_state(uint8_t out[8], uint32_t index, uint32_t num);
void vu_encode_inflight(uint8_t out[24], const struct vu_inflight_desc *d);
/* Builds a back-end request header + payload into out; returns its length. */
uint32_t vu_encode_backend_msg(uint8_t *out, uint32_t request, uint32_t flags,
			       const void *payload, uint32_t size);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * virtio-rdma (device id 42): the binary interface between a guest driver
 * and the device, as docs/virtio-rdma.md specifies it.  Every multi-byte
 * field is little-endian; every structure has a fixed size, checked below.
 *
 * The work-queue and completion rings use the layouts of rxe's public user
 * ABI (<rdma/rdma_user_rxe.h>, <rdma/ib_user_verbs.h>), so that Debian's
 * stock librxe can post and poll them from guest user space; rdma-check.c
 * checks that equivalence at build time.
 *
 * This file is the source of truth for the ABI: a change starts here (and
 * in the spec), and guest/linux/vrdma_abi.h, the kernel's copy, follows;
 * tests/unit/abi-match fails until the two agree member by member.
 */
#ifndef VRDMA_RDMA_WIRE_H
#define VRDMA_RDMA_WIRE_H

#include <assert.h>
#include <stdint.h>

#define VIRTIO_ID_RDMA 42

/* Device feature bits (device-specific range). */
#define VRDMA_F_ATOMIC 0 /* RC atomics: CMP_AND_SWP, FETCH_AND_ADD */
#define VRDMA_F_CM 1     /* connection management: the CM_* commands */

/* Virtqueues: a fixed three, whatever the number of QPs. */
enum vrdma_vq {
	VRDMA_VQ_CTRL = 0,     /* driver requests, device responses */
	VRDMA_VQ_DOORBELL = 1, /* driver -> device doorbell records */
	VRDMA_VQ_EVENT = 2,    /* device -> driver event records */
	VRDMA_NUM_VQS = 3,
};

struct vrdma_config {
	uint64_t node_guid;
	uint64_t sys_image_guid;
	uint32_t max_qp;
	uint32_t max_cq;
	uint32_t max_mr;
	uint32_t max_pd;
	uint32_t max_qp_wr;
	uint32_t max_cqe;
	/* Random, nonzero, fixed for the device's life: a different value
	 * after a live migration tells the driver every object is gone. */
	uint32_t generation;
	uint16_t max_sge;
	uint8_t phys_port_cnt;
	uint8_t reserved;
};
static_assert(sizeof(struct vrdma_config) == 48, "config layout");

/* ---- control virtqueue ---- */

enum vrdma_cmd {
	VRDMA_CMD_QUERY_DEVICE = 1,
	VRDMA_CMD_QUERY_PORT = 2,
	VRDMA_CMD_QUERY_GID = 3,
	VRDMA_CMD_CREATE_PD = 4,
	VRDMA_CMD_DESTROY_PD = 5,
	VRDMA_CMD_REG_MR = 6,
	VRDMA_CMD_DEREG_MR = 7,
	VRDMA_CMD_CREATE_CQ = 8,
	VRDMA_CMD_DESTROY_CQ = 9,
	VRDMA_CMD_CREATE_QP = 10,
	VRDMA_CMD_MODIFY_QP = 11,
	VRDMA_CMD_QUERY_QP = 12,
	VRDMA_CMD_DESTROY_QP = 13,
	/* Connection management (VRDMA_F_CM), spec section 14. */
	VRDMA_CMD_CM_CONNECT = 14,
	VRDMA_CMD_CM_LISTEN = 15,
	VRDMA_CMD_CM_ACCEPT = 16,
	VRDMA_CMD_CM_REJECT = 17,
	VRDMA_CMD_CM_DISCONNECT = 18,
	VRDMA_CMD_CM_DESTROY_LISTEN = 19,
	VRDMA_CMD_CM_GET_EVENT = 20,
	VRDMA_CMD_MAX = VRDMA_CMD_CM_GET_EVENT,
};

/* Every request starts with this, every response with vrdma_resp_hdr. */
struct vrdma_cmd_hdr {
	uint16_t opcode;
	uint16_t flags; /* zero */
	uint32_t reserved; /* zero */
};
static_assert(sizeof(struct vrdma_cmd_hdr) == 8, "cmd header");

/* status: 0, or one of these Linux errno numbers (x86/generic values). */
enum vrdma_status {
	VRDMA_OK = 0,
	VRDMA_EPERM = 1,       /* not allowed: access bits, privileged QP type */
	VRDMA_ENOENT = 2,      /* no such handle on this device */
	VRDMA_EIO = 5,         /* the host device failed */
	VRDMA_E2BIG = 7,       /* a size or count above the device's limit */
	VRDMA_ENOMEM = 12,     /* the host ran out of memory */
	VRDMA_EFAULT = 14,     /* a guest address outside guest RAM */
	VRDMA_EBUSY = 16,      /* still in use (a PD with MRs, a CQ with QPs) */
	VRDMA_EINVAL = 22,     /* malformed request */
	VRDMA_ENOSPC = 28,     /* a tenant quota is exhausted */
	VRDMA_EOPNOTSUPP = 95, /* a valid request the device does not support */
	VRDMA_EADDRINUSE = 98, /* CM_LISTEN: the port is taken */
	VRDMA_EADDRNOTAVAIL = 99, /* not the guest's address (CM_LISTEN, a QP's GID) */
	VRDMA_ENETUNREACH = 101, /* the function has no IPv4 address */
};

struct vrdma_resp_hdr {
	uint32_t status;
	uint32_t reserved;
};
static_assert(sizeof(struct vrdma_resp_hdr) == 8, "resp header");

/* QUERY_DEVICE: no request payload. */
struct vrdma_device_attr {
	uint64_t fw_ver;
	uint64_t node_guid;
	uint64_t sys_image_guid;
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t device_cap_flags; /* IB_DEVICE_* subset, see the spec */
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint32_t max_pd;
	uint32_t max_qp_rd_atom;
	uint32_t max_qp_init_rd_atom;
	uint32_t max_inline_data;
	uint32_t atomic_cap; /* 0 none, 1 within the device (IB_ATOMIC_HCA) */
	uint8_t phys_port_cnt;
	uint8_t reserved[7];
};
static_assert(sizeof(struct vrdma_device_attr) == 112, "device attr");

struct vrdma_port_req {
	uint8_t port; /* 1 */
	uint8_t reserved[7];
};

struct vrdma_port_attr {
	uint32_t state;        /* IB_PORT_*: 1 down, 4 active */
	uint32_t max_mtu;      /* IB_MTU_*: 1 256 .. 5 4096 */
	uint32_t active_mtu;
	uint32_t gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint16_t pkey_tbl_len;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer; /* 2: Ethernet (RoCE) */
	uint8_t reserved[2];
};
static_assert(sizeof(struct vrdma_port_attr) == 32, "port attr");

struct vrdma_gid_req {
	uint8_t port;
	uint8_t reserved;
	uint16_t index;
	uint32_t reserved2;
};

enum vrdma_gid_type { VRDMA_GID_ROCE_V1 = 1, VRDMA_GID_ROCE_V2 = 2 };

struct vrdma_gid_resp {
	uint8_t gid[16];
	uint32_t type; /* vrdma_gid_type; 0: the entry is empty */
	uint32_t reserved;
};
static_assert(sizeof(struct vrdma_gid_resp) == 24, "gid resp");

/* Requests and responses that carry one handle. */
struct vrdma_handle {
	uint32_t handle; /* nonzero, chosen by the device */
	uint32_t reserved;
};
static_assert(sizeof(struct vrdma_handle) == 8, "handle");

/* Access flags a guest may ask for (IB_ACCESS_* values). */
enum vrdma_access {
	VRDMA_ACCESS_LOCAL_WRITE = 1u << 0,
	VRDMA_ACCESS_REMOTE_WRITE = 1u << 1,
	VRDMA_ACCESS_REMOTE_READ = 1u << 2,
	VRDMA_ACCESS_REMOTE_ATOMIC = 1u << 3,
	VRDMA_ACCESS_ALL = 0xf,
};

/* REG_MR: followed by npages le64 guest-physical page addresses. */
struct vrdma_reg_mr_req {
	uint32_t pd;
	uint32_t access;     /* vrdma_access */
	uint64_t iova;       /* the guest's virtual address of byte 0 */
	uint64_t length;     /* bytes, > 0 */
	uint32_t page_shift; /* 12 (4 KiB) or 21 (2 MiB) */
	uint32_t npages;     /* pages covering [iova, iova + length) */
};
static_assert(sizeof(struct vrdma_reg_mr_req) == 32, "reg mr");

struct vrdma_reg_mr_resp {
	uint32_t mr;
	uint32_t lkey;
	uint32_t rkey; /* 0 without remote access */
	uint32_t reserved;
};
static_assert(sizeof(struct vrdma_reg_mr_resp) == 16, "reg mr resp");

/* Rings are given as lists of 4 KiB guest pages, after the fixed part. */
#define VRDMA_RING_PAGE 4096u
#define VRDMA_MAX_RING_PAGES 16384u /* 64 MiB per ring */

/* CREATE_CQ: followed by npages le64 page addresses of the CQ ring. */
struct vrdma_create_cq_req {
	uint32_t log2_slots; /* ring slots: capacity is (1 << log2_slots) - 1 */
	uint32_t npages;
	uint32_t comp_vector; /* 0 */
	uint32_t reserved;
};
static_assert(sizeof(struct vrdma_create_cq_req) == 16, "create cq");

struct vrdma_create_cq_resp {
	uint32_t cq;
	uint32_t cqe; /* capacity */
};

enum vrdma_qp_type { VRDMA_QPT_RC = 2 }; /* IB_QPT_RC; the only one */

/* CREATE_QP: followed by sq_npages, then rq_npages, le64 page addresses. */
struct vrdma_create_qp_req {
	uint32_t pd;
	uint32_t send_cq;
	uint32_t recv_cq;
	uint8_t qp_type;
	uint8_t sq_sig_all;
	uint16_t reserved;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
	uint32_t sq_log2_slots; /* max_send_wr is (1 << sq_log2_slots) - 1 */
	uint32_t sq_log2_slot_size;
	uint32_t rq_log2_slots;
	uint32_t rq_log2_slot_size;
	uint32_t sq_npages;
	uint32_t rq_npages;
};
static_assert(sizeof(struct vrdma_create_qp_req) == 52, "create qp");

struct vrdma_create_qp_resp {
	uint32_t qp;
	uint32_t qpn; /* the QP number on the wire */
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
	uint32_t reserved;
};
static_assert(sizeof(struct vrdma_create_qp_resp) == 32, "create qp resp");

/* attr_mask bits: IB_QP_* values. */
enum vrdma_qp_attr_mask {
	VRDMA_QP_STATE = 1u << 0,
	VRDMA_QP_CUR_STATE = 1u << 1,
	VRDMA_QP_ACCESS_FLAGS = 1u << 3,
	VRDMA_QP_PKEY_INDEX = 1u << 4,
	VRDMA_QP_PORT = 1u << 5,
	VRDMA_QP_AV = 1u << 7,
	VRDMA_QP_PATH_MTU = 1u << 8,
	VRDMA_QP_TIMEOUT = 1u << 9,
	VRDMA_QP_RETRY_CNT = 1u << 10,
	VRDMA_QP_RNR_RETRY = 1u << 11,
	VRDMA_QP_RQ_PSN = 1u << 12,
	VRDMA_QP_MAX_QP_RD_ATOMIC = 1u << 13,
	VRDMA_QP_MIN_RNR_TIMER = 1u << 15,
	VRDMA_QP_SQ_PSN = 1u << 16,
	VRDMA_QP_MAX_DEST_RD_ATOMIC = 1u << 17,
	VRDMA_QP_DEST_QPN = 1u << 20,
	VRDMA_QP_ATTR_SUPPORTED = 0x13bfbb,
};

/* IB_QPS_* values. */
enum vrdma_qp_state {
	VRDMA_QPS_RESET = 0,
	VRDMA_QPS_INIT = 1,
	VRDMA_QPS_RTR = 2,
	VRDMA_QPS_RTS = 3,
	VRDMA_QPS_SQD = 4,
	VRDMA_QPS_SQE = 5,
	VRDMA_QPS_ERR = 6,
};

struct vrdma_ah_attr {
	uint8_t dgid[16];
	uint32_t flow_label;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t sl;
};
static_assert(sizeof(struct vrdma_ah_attr) == 24, "ah attr");

struct vrdma_qp_attr {
	uint32_t qp_state;
	uint32_t cur_qp_state;
	uint32_t path_mtu; /* IB_MTU_*: 1..5 */
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	uint32_t qp_access_flags; /* vrdma_access */
	uint16_t pkey_index;
	uint8_t port_num;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t reserved[7];
	struct vrdma_ah_attr ah;
};
static_assert(sizeof(struct vrdma_qp_attr) == 72, "qp attr");

struct vrdma_modify_qp_req {
	uint32_t qp;
	uint32_t attr_mask;
	struct vrdma_qp_attr attr;
};
static_assert(sizeof(struct vrdma_modify_qp_req) == 80, "modify qp");

/* QUERY_QP: request vrdma_handle; response vrdma_qp_attr. */

/* ---- connection management (VRDMA_F_CM) ----
 *
 * The device runs the RDMA connection manager on the host for its QPs:
 * IPv4 addresses and ports, as rdma_cm's TCP port space.  Its own address
 * is always the function's (the IPv4 address of its RoCE v2 GID); the
 * guest names only the peer.  Addresses are in network byte order. */

#define VRDMA_CM_CONNECT_PDATA 56  /* what rdma_cm carries in a REQ */
#define VRDMA_CM_ACCEPT_PDATA 196  /* ... in a REP */
#define VRDMA_CM_REJECT_PDATA 148  /* ... in a REJ */
#define VRDMA_CM_MAX_BACKLOG 128u

/* CM_CONNECT: an RC QP in INIT to a peer; response vrdma_handle (conn). */
struct vrdma_cm_connect_req {
	uint32_t qp;
	uint8_t dst_ip[4];
	uint16_t dst_port; /* nonzero */
	uint8_t ord;       /* RDMA READs this side may have outstanding */
	uint8_t ird;       /* ... the peer may */
	uint8_t pdata_len;
	uint8_t reserved[3];
	uint8_t pdata[VRDMA_CM_CONNECT_PDATA];
};
static_assert(sizeof(struct vrdma_cm_connect_req) == 72, "cm connect");

/* CM_LISTEN: response vrdma_handle (listen). */
struct vrdma_cm_listen_req {
	uint8_t ip[4];    /* 0.0.0.0 or the function's address */
	uint16_t port;    /* nonzero */
	uint16_t backlog; /* 1 .. VRDMA_CM_MAX_BACKLOG */
};
static_assert(sizeof(struct vrdma_cm_listen_req) == 8, "cm listen");

/* CM_ACCEPT: a requested connection onto an RC QP in INIT. */
struct vrdma_cm_accept_req {
	uint32_t conn;
	uint32_t qp;
	uint8_t ord;
	uint8_t ird;
	uint8_t pdata_len;
	uint8_t reserved[5];
	uint8_t pdata[VRDMA_CM_ACCEPT_PDATA];
};
static_assert(sizeof(struct vrdma_cm_accept_req) == 212, "cm accept");

/* CM_REJECT: a requested connection; the handle is free afterwards. */
struct vrdma_cm_reject_req {
	uint32_t conn;
	uint8_t pdata_len;
	uint8_t reserved[3];
	uint8_t pdata[VRDMA_CM_REJECT_PDATA];
};
static_assert(sizeof(struct vrdma_cm_reject_req) == 156, "cm reject");

/* CM_DISCONNECT and CM_DESTROY_LISTEN: request vrdma_handle. */

enum vrdma_cm_event_type {
	/* conn: a peer asks listen for a connection; answer with
	 * CM_ACCEPT or CM_REJECT. */
	VRDMA_CM_EV_CONNECT_REQUEST = 1,
	/* conn: the outcome of CM_CONNECT; status 0 means established, any
	 * other status frees the handle. */
	VRDMA_CM_EV_CONNECT_REPLY = 2,
	/* conn: a connection is closed (either side); the QP is in ERR and
	 * the handle is free. */
	VRDMA_CM_EV_CLOSED = 3,
};

/* CM_GET_EVENT: no request payload; the oldest event, or VRDMA_ENOENT. */
struct vrdma_cm_event {
	uint16_t type;
	uint16_t reserved;
	uint32_t status; /* 0 or a vrdma_status-style errno (111 refused, 110 timed out) */
	uint32_t conn;
	uint32_t listen;
	uint8_t local_ip[4];
	uint8_t remote_ip[4];
	uint16_t local_port;
	uint16_t remote_port;
	uint8_t ird;
	uint8_t ord;
	uint8_t pdata_len;
	uint8_t reserved2;
	uint8_t pdata[VRDMA_CM_ACCEPT_PDATA];
};
static_assert(sizeof(struct vrdma_cm_event) == 228, "cm event");

/* ---- doorbell virtqueue: device-readable arrays of records ---- */

enum vrdma_doorbell_type {
	VRDMA_DB_SQ = 1,             /* handle: QP; new send WQEs */
	VRDMA_DB_RQ = 2,             /* handle: QP; new receive WQEs (optional) */
	VRDMA_DB_CQ_ARM = 3,         /* handle: CQ; event on the next completion */
	VRDMA_DB_CQ_ARM_SOLICITED = 4, /* ... on the next solicited or error one */
};

struct vrdma_doorbell {
	uint32_t handle;
	uint16_t type;
	uint16_t reserved;
};
static_assert(sizeof(struct vrdma_doorbell) == 8, "doorbell");

/* Records in one doorbell buffer at most; a longer buffer is ignored. */
#define VRDMA_MAX_DOORBELLS 4096u

/* ---- event virtqueue: device-writable buffers of records ---- */

enum vrdma_event_type {
	VRDMA_EV_CQ_COMP = 1,      /* handle: an armed CQ got a completion */
	VRDMA_EV_CQ_ERR = 2,       /* handle: CQ overrun; the CQ is dead */
	VRDMA_EV_QP_FATAL = 3,     /* handle: QP moved to error; data: reason */
	VRDMA_EV_PORT_ACTIVE = 4,
	VRDMA_EV_PORT_ERR = 5,
	/* The driver must treat every object as lost and reset the device:
	 * after a migration or a restarted back end, or events were lost. */
	VRDMA_EV_DEVICE_FATAL = 6,
	/* Connection-management events wait: fetch them with CM_GET_EVENT. */
	VRDMA_EV_CM = 7,
};

enum vrdma_qp_fatal_reason {
	VRDMA_QPF_BAD_WQE = 1,     /* a WQE the device refused */
	VRDMA_QPF_HOST = 2,        /* the host QP failed */
	VRDMA_QPF_MEMORY = 3,      /* guest memory under the QP's MRs changed */
	VRDMA_QPF_STOPPED = 4,     /* the device was stopped for migration */
};

struct vrdma_event {
	uint16_t type;
	uint16_t reserved;
	uint32_t handle;
	uint32_t data;
	uint32_t reserved2;
};
static_assert(sizeof(struct vrdma_event) == 16, "event");

/* ---- rings in guest memory (rxe's queue layout) ---- */

/* Header of every SQ, RQ and CQ ring; slots start at VRDMA_RING_DATA. */
#define VRDMA_RING_LOG2_ELEM 0   /* le32, written by the driver, not read */
#define VRDMA_RING_INDEX_MASK 4  /* le32, written by the driver, not read */
#define VRDMA_RING_PRODUCER 128  /* le32 index, already masked */
#define VRDMA_RING_CONSUMER 256  /* le32 index, already masked */
#define VRDMA_RING_DATA 384

/* Send WQE (struct rxe_send_wqe): the fields the device reads. */
#define VRDMA_SWQE_WR_ID 0          /* le64 */
#define VRDMA_SWQE_OPCODE 12        /* le32, IB_UVERBS_WR_* */
#define VRDMA_SWQE_SEND_FLAGS 16    /* le32, IB_SEND_* */
#define VRDMA_SWQE_IMM 20           /* be32 immediate data */
#define VRDMA_SWQE_REMOTE_ADDR 24   /* le64, RDMA and atomics */
#define VRDMA_SWQE_RDMA_RKEY 32     /* le32 */
#define VRDMA_SWQE_COMPARE_ADD 32   /* le64, atomics */
#define VRDMA_SWQE_SWAP 40          /* le64, CMP_AND_SWP */
#define VRDMA_SWQE_ATOMIC_RKEY 48   /* le32 */
#define VRDMA_SWQE_DMA_LENGTH 184   /* le32, total bytes */
#define VRDMA_SWQE_DMA_NUM_SGE 196  /* le32 */
#define VRDMA_SWQE_SGE 208          /* sges, or the inline data */
#define VRDMA_SWQE_BASE_SIZE 208

/* Receive WQE (struct rxe_recv_wqe). */
#define VRDMA_RWQE_WR_ID 0          /* le64 */
#define VRDMA_RWQE_DMA_NUM_SGE 28   /* le32 */
#define VRDMA_RWQE_SGE 40
#define VRDMA_RWQE_BASE_SIZE 40

/* One scatter/gather entry (struct rxe_sge). */
struct vrdma_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};
static_assert(sizeof(struct vrdma_sge) == 16, "sge");

/* Send WQE opcodes (IB_UVERBS_WR_*) and flags (IB_SEND_*) the device takes. */
enum vrdma_wr_opcode {
	VRDMA_WR_RDMA_WRITE = 0,
	VRDMA_WR_RDMA_WRITE_WITH_IMM = 1,
	VRDMA_WR_SEND = 2,
	VRDMA_WR_SEND_WITH_IMM = 3,
	VRDMA_WR_RDMA_READ = 4,
	VRDMA_WR_ATOMIC_CMP_AND_SWP = 5,
	VRDMA_WR_ATOMIC_FETCH_AND_ADD = 6,
};

enum vrdma_send_flags {
	VRDMA_SEND_FENCE = 1u << 0,
	VRDMA_SEND_SIGNALED = 1u << 1,
	VRDMA_SEND_SOLICITED = 1u << 2,
	VRDMA_SEND_INLINE = 1u << 3,
	VRDMA_SEND_FLAGS_ALL = 0xf,
};

/* Completion (struct ib_uverbs_wc) in 64-byte CQ slots. */
#define VRDMA_CQE_SLOT_LOG2 6
struct vrdma_cqe {
	uint64_t wr_id;
	uint32_t status;   /* IB_WC_* status */
	uint32_t opcode;   /* IB_UVERBS_WC_* */
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm_data; /* big-endian on the wire, copied as is */
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags; /* IB_WC_WITH_IMM = 2 */
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
	uint8_t port_num;
	uint8_t reserved;
};
static_assert(sizeof(struct vrdma_cqe) == 48, "cqe");

#endif

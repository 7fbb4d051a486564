/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * virtio-rdma (virtio device id 42): the guest driver's view of the device
 * interface in docs/virtio-rdma.md.  Written for the kernel; the layouts are
 * the same as the back end's vhost/rdma/rdma-wire.h, checked below against
 * fixed sizes and, member by member, by tests/unit/abi-match.
 *
 * This file is a copy: the source of truth is vhost/rdma/rdma-wire.h (and
 * the spec).  A change starts there; this file follows, and abi-match
 * fails until the two agree.
 */
#ifndef VRDMA_ABI_H
#define VRDMA_ABI_H

#include <linux/types.h>
#include <linux/build_bug.h>
#include <linux/stddef.h>

#define VIRTIO_ID_VRDMA 42

#define VRDMA_F_ATOMIC 0
#define VRDMA_F_CM 1

enum {
	VRDMA_VQ_CTRL = 0,
	VRDMA_VQ_DOORBELL = 1,
	VRDMA_VQ_EVENT = 2,
	VRDMA_NUM_VQS = 3,
};

struct vrdma_config {
	__be64 node_guid;
	__be64 sys_image_guid;
	__le32 max_qp;
	__le32 max_cq;
	__le32 max_mr;
	__le32 max_pd;
	__le32 max_qp_wr;
	__le32 max_cqe;
	__le32 generation;
	__le16 max_sge;
	__u8 phys_port_cnt;
	__u8 reserved;
};

enum vrdma_cmd_op {
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
	VRDMA_CMD_CM_CONNECT = 14,
	VRDMA_CMD_CM_LISTEN = 15,
	VRDMA_CMD_CM_ACCEPT = 16,
	VRDMA_CMD_CM_REJECT = 17,
	VRDMA_CMD_CM_DISCONNECT = 18,
	VRDMA_CMD_CM_DESTROY_LISTEN = 19,
	VRDMA_CMD_CM_GET_EVENT = 20,
};

/* Connection management (VRDMA_F_CM): IPv4 addresses in network order. */
#define VRDMA_CM_CONNECT_PDATA 56
#define VRDMA_CM_ACCEPT_PDATA 196
#define VRDMA_CM_REJECT_PDATA 148
#define VRDMA_CM_MAX_BACKLOG 128

struct vrdma_cm_connect_req {
	__le32 qp;
	__u8 dst_ip[4];
	__le16 dst_port;
	__u8 ord;
	__u8 ird;
	__u8 pdata_len;
	__u8 reserved[3];
	__u8 pdata[VRDMA_CM_CONNECT_PDATA];
};

struct vrdma_cm_listen_req {
	__u8 ip[4];
	__le16 port;
	__le16 backlog;
};

struct vrdma_cm_accept_req {
	__le32 conn;
	__le32 qp;
	__u8 ord;
	__u8 ird;
	__u8 pdata_len;
	__u8 reserved[5];
	__u8 pdata[VRDMA_CM_ACCEPT_PDATA];
};

struct vrdma_cm_reject_req {
	__le32 conn;
	__u8 pdata_len;
	__u8 reserved[3];
	__u8 pdata[VRDMA_CM_REJECT_PDATA];
};

enum {
	VRDMA_CM_EV_CONNECT_REQUEST = 1,
	VRDMA_CM_EV_CONNECT_REPLY = 2,
	VRDMA_CM_EV_CLOSED = 3,
};

struct vrdma_cm_event {
	__le16 type;
	__le16 reserved;
	__le32 status;
	__le32 conn;
	__le32 listen;
	__u8 local_ip[4];
	__u8 remote_ip[4];
	__le16 local_port;
	__le16 remote_port;
	__u8 ird;
	__u8 ord;
	__u8 pdata_len;
	__u8 reserved2;
	__u8 pdata[VRDMA_CM_ACCEPT_PDATA];
};

struct vrdma_cmd_hdr {
	__le16 opcode;
	__le16 flags;
	__le32 reserved;
};

/* status: 0, or one of these Linux errno numbers (x86/generic values). */
enum vrdma_status {
	VRDMA_OK = 0,
	VRDMA_EPERM = 1,
	VRDMA_ENOENT = 2,
	VRDMA_EIO = 5,
	VRDMA_E2BIG = 7,
	VRDMA_ENOMEM = 12,
	VRDMA_EFAULT = 14,
	VRDMA_EBUSY = 16,
	VRDMA_EINVAL = 22,
	VRDMA_ENOSPC = 28,
	VRDMA_EOPNOTSUPP = 95,
	VRDMA_EADDRINUSE = 98,
	VRDMA_EADDRNOTAVAIL = 99,
	VRDMA_ENETUNREACH = 101,
};

struct vrdma_resp_hdr {
	__le32 status;
	__le32 reserved;
};

struct vrdma_device_attr {
	__le64 fw_ver;
	__be64 node_guid;
	__be64 sys_image_guid;
	__le64 max_mr_size;
	__le64 page_size_cap;
	__le32 vendor_id;
	__le32 vendor_part_id;
	__le32 hw_ver;
	__le32 max_qp;
	__le32 max_qp_wr;
	__le32 device_cap_flags;
	__le32 max_send_sge;
	__le32 max_recv_sge;
	__le32 max_cq;
	__le32 max_cqe;
	__le32 max_mr;
	__le32 max_pd;
	__le32 max_qp_rd_atom;
	__le32 max_qp_init_rd_atom;
	__le32 max_inline_data;
	__le32 atomic_cap;
	__u8 phys_port_cnt;
	__u8 reserved[7];
};

struct vrdma_port_req {
	__u8 port;
	__u8 reserved[7];
};

struct vrdma_port_attr {
	__le32 state;
	__le32 max_mtu;
	__le32 active_mtu;
	__le32 gid_tbl_len;
	__le32 port_cap_flags;
	__le32 max_msg_sz;
	__le16 pkey_tbl_len;
	__u8 active_width;
	__u8 active_speed;
	__u8 phys_state;
	__u8 link_layer;
	__u8 reserved[2];
};

struct vrdma_gid_req {
	__u8 port;
	__u8 reserved;
	__le16 index;
	__le32 reserved2;
};

struct vrdma_gid_resp {
	__u8 gid[16];
	__le32 type; /* 0 empty, 1 RoCE v1, 2 RoCE v2 */
	__le32 reserved;
};

struct vrdma_handle {
	__le32 handle;
	__le32 reserved;
};

#define VRDMA_ACCESS_ALL 0xfu

struct vrdma_reg_mr_req {
	__le32 pd;
	__le32 access;
	__le64 iova;
	__le64 length;
	__le32 page_shift;
	__le32 npages;
};

struct vrdma_reg_mr_resp {
	__le32 mr;
	__le32 lkey;
	__le32 rkey;
	__le32 reserved;
};

#define VRDMA_RING_PAGE 4096u
#define VRDMA_MAX_RING_PAGES 16384u

struct vrdma_create_cq_req {
	__le32 log2_slots;
	__le32 npages;
	__le32 comp_vector;
	__le32 reserved;
};

struct vrdma_create_cq_resp {
	__le32 cq;
	__le32 cqe;
};

#define VRDMA_QPT_RC 2

struct vrdma_create_qp_req {
	__le32 pd;
	__le32 send_cq;
	__le32 recv_cq;
	__u8 qp_type;
	__u8 sq_sig_all;
	__le16 reserved;
	__le32 max_send_sge;
	__le32 max_recv_sge;
	__le32 max_inline_data;
	__le32 sq_log2_slots;
	__le32 sq_log2_slot_size;
	__le32 rq_log2_slots;
	__le32 rq_log2_slot_size;
	__le32 sq_npages;
	__le32 rq_npages;
} __packed;

struct vrdma_create_qp_resp {
	__le32 qp;
	__le32 qpn;
	__le32 max_send_wr;
	__le32 max_recv_wr;
	__le32 max_send_sge;
	__le32 max_recv_sge;
	__le32 max_inline_data;
	__le32 reserved;
};

#define VRDMA_QP_ATTR_SUPPORTED 0x13bfbbu

struct vrdma_ah_attr {
	__u8 dgid[16];
	__le32 flow_label;
	__u8 sgid_index;
	__u8 hop_limit;
	__u8 traffic_class;
	__u8 sl;
};

struct vrdma_qp_attr {
	__le32 qp_state;
	__le32 cur_qp_state;
	__le32 path_mtu;
	__le32 qkey;
	__le32 rq_psn;
	__le32 sq_psn;
	__le32 dest_qp_num;
	__le32 qp_access_flags;
	__le16 pkey_index;
	__u8 port_num;
	__u8 max_rd_atomic;
	__u8 max_dest_rd_atomic;
	__u8 min_rnr_timer;
	__u8 timeout;
	__u8 retry_cnt;
	__u8 rnr_retry;
	__u8 reserved[7];
	struct vrdma_ah_attr ah;
};

struct vrdma_modify_qp_req {
	__le32 qp;
	__le32 attr_mask;
	struct vrdma_qp_attr attr;
};

enum {
	VRDMA_DB_SQ = 1,
	VRDMA_DB_RQ = 2,
	VRDMA_DB_CQ_ARM = 3,
	VRDMA_DB_CQ_ARM_SOLICITED = 4,
};

struct vrdma_doorbell {
	__le32 handle;
	__le16 type;
	__le16 reserved;
};

enum {
	VRDMA_EV_CQ_COMP = 1,
	VRDMA_EV_CQ_ERR = 2,
	VRDMA_EV_QP_FATAL = 3,
	VRDMA_EV_PORT_ACTIVE = 4,
	VRDMA_EV_PORT_ERR = 5,
	VRDMA_EV_DEVICE_FATAL = 6,
	VRDMA_EV_CM = 7,
};

struct vrdma_event {
	__le16 type;
	__le16 reserved;
	__le32 handle;
	__le32 data;
	__le32 reserved2;
};

/* QP_FATAL's data: why the device moved the QP to ERR. */
enum vrdma_qp_fatal_reason {
	VRDMA_QPF_BAD_WQE = 1,
	VRDMA_QPF_HOST = 2,
	VRDMA_QPF_MEMORY = 3,
	VRDMA_QPF_STOPPED = 4,
};

/* Ring layout (struct rxe_queue_buf). */
#define VRDMA_RING_PRODUCER 128
#define VRDMA_RING_CONSUMER 256
#define VRDMA_RING_DATA 384
#define VRDMA_SWQE_BASE_SIZE 208
#define VRDMA_RWQE_BASE_SIZE 40
#define VRDMA_SGE_SIZE 16
#define VRDMA_CQE_SLOT_LOG2 6

static inline void vrdma_abi_checks(void)
{
	BUILD_BUG_ON(sizeof(struct vrdma_config) != 48);
	BUILD_BUG_ON(offsetof(struct vrdma_config, generation) != 40);
	BUILD_BUG_ON(offsetof(struct vrdma_config, max_sge) != 44);
	BUILD_BUG_ON(sizeof(struct vrdma_cmd_hdr) != 8);
	BUILD_BUG_ON(sizeof(struct vrdma_resp_hdr) != 8);
	BUILD_BUG_ON(sizeof(struct vrdma_device_attr) != 112);
	BUILD_BUG_ON(offsetof(struct vrdma_device_attr, max_qp) != 52);
	BUILD_BUG_ON(offsetof(struct vrdma_device_attr, atomic_cap) != 100);
	BUILD_BUG_ON(offsetof(struct vrdma_device_attr, phys_port_cnt) != 104);
	BUILD_BUG_ON(sizeof(struct vrdma_port_req) != 8);
	BUILD_BUG_ON(sizeof(struct vrdma_port_attr) != 32);
	BUILD_BUG_ON(offsetof(struct vrdma_port_attr, link_layer) != 29);
	BUILD_BUG_ON(sizeof(struct vrdma_gid_req) != 8);
	BUILD_BUG_ON(sizeof(struct vrdma_gid_resp) != 24);
	BUILD_BUG_ON(sizeof(struct vrdma_handle) != 8);
	BUILD_BUG_ON(sizeof(struct vrdma_reg_mr_req) != 32);
	BUILD_BUG_ON(offsetof(struct vrdma_reg_mr_req, page_shift) != 24);
	BUILD_BUG_ON(sizeof(struct vrdma_reg_mr_resp) != 16);
	BUILD_BUG_ON(sizeof(struct vrdma_create_cq_req) != 16);
	BUILD_BUG_ON(sizeof(struct vrdma_create_cq_resp) != 8);
	BUILD_BUG_ON(sizeof(struct vrdma_create_qp_req) != 52);
	BUILD_BUG_ON(offsetof(struct vrdma_create_qp_req, qp_type) != 12);
	BUILD_BUG_ON(offsetof(struct vrdma_create_qp_req, max_send_sge) != 16);
	BUILD_BUG_ON(offsetof(struct vrdma_create_qp_req, rq_npages) != 48);
	BUILD_BUG_ON(sizeof(struct vrdma_create_qp_resp) != 32);
	BUILD_BUG_ON(sizeof(struct vrdma_ah_attr) != 24);
	BUILD_BUG_ON(sizeof(struct vrdma_qp_attr) != 72);
	BUILD_BUG_ON(offsetof(struct vrdma_qp_attr, pkey_index) != 32);
	BUILD_BUG_ON(offsetof(struct vrdma_qp_attr, rnr_retry) != 40);
	BUILD_BUG_ON(offsetof(struct vrdma_qp_attr, ah) != 48);
	BUILD_BUG_ON(sizeof(struct vrdma_modify_qp_req) != 80);
	BUILD_BUG_ON(sizeof(struct vrdma_doorbell) != 8);
	BUILD_BUG_ON(sizeof(struct vrdma_event) != 16);
	BUILD_BUG_ON(sizeof(struct vrdma_cm_connect_req) != 72);
	BUILD_BUG_ON(sizeof(struct vrdma_cm_listen_req) != 8);
	BUILD_BUG_ON(sizeof(struct vrdma_cm_accept_req) != 212);
	BUILD_BUG_ON(sizeof(struct vrdma_cm_reject_req) != 156);
	BUILD_BUG_ON(sizeof(struct vrdma_cm_event) != 228);
	BUILD_BUG_ON(offsetof(struct vrdma_cm_event, pdata) != 32);
}

#endif

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vrdma: the driver's objects, shared by vrdma_main.c (virtio: queues,
 * device loss), vrdma_verbs.c (the verbs), vrdma_resp.c (checks of the
 * device's responses) and vrdma_cm.c (connection management).
 */
#ifndef VRDMA_H
#define VRDMA_H

#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_user_rxe.h>

#include "vrdma_abi.h"

struct vrdma_conn;

#define VRDMA_EVENT_BUFS 16
#define VRDMA_EVENT_BUF_RECORDS 64
#define VRDMA_MAX_SEGS 1024
/* The largest fixed request and response (CM_ACCEPT, CM_GET_EVENT). */
#define VRDMA_CMD_MAX 256

/*
 * The limits the spec (docs/virtio-rdma.md, QUERY_DEVICE and QUERY_PORT)
 * puts on what the device reports; a response beyond them is refused.
 */
#define VRDMA_SPEC_MAX_WR 16383u
#define VRDMA_SPEC_MAX_SGE 32u
#define VRDMA_SPEC_MAX_INLINE 256u
#define VRDMA_SPEC_MAX_RD_ATOM 16u
#define VRDMA_SPEC_MAX_MR_SIZE (4ull << 30)
#define VRDMA_SPEC_MAX_GIDS 256u
#define VRDMA_QPN_MASK 0xffffffu

/*
 * Something the device may still write or read: a ring, an MR's pinned
 * pages.  After a destroy the device did not confirm, it waits on the
 * device's orphan list until the device has been reset (vrdma_main.c).
 */
struct vrdma_orphan {
	struct list_head node;
	void (*release)(struct vrdma_orphan *o);
};

struct vrdma_dev {
	struct ib_device ib;
	struct virtio_device *vdev;
	struct virtqueue *ctrl_vq;
	struct virtqueue *db_vq;
	struct virtqueue *ev_vq;

	struct mutex ctrl_lock; /* one control command at a time */
	wait_queue_head_t ctrl_wait;
	bool ctrl_abort;        /* the device was reset under a command */
	/* What the device reads and writes of a command: the caller's
	 * request is copied in, the response copied out (and checked there). */
	struct vrdma_cmd_hdr *ctrl_hdr;
	struct vrdma_resp_hdr *ctrl_rhdr;
	void *ctrl_req;
	void *ctrl_resp;

	spinlock_t db_lock;
	bool db_off;            /* the doorbell queue is being replaced */

	struct vrdma_event *ev_bufs; /* VRDMA_EVENT_BUFS * RECORDS */
	struct work_struct ev_work;
	struct work_struct cfg_work; /* configuration change, process context */

	/*
	 * Device loss (spec section 9; vrdma_main.c).  Every object records
	 * the epoch it was created in; a loss moves the epoch on, and the
	 * device is reset before it is used again.  Objects of an older epoch
	 * are never named to the device: their destroys only free memory.
	 */
	u32 epoch;              /* changes under ctrl_lock */
	u32 reset_epoch;        /* objects older than this are off the device */
	unsigned long loss_pending; /* bit 0: a loss waits for loss_work */
	wait_queue_head_t reset_wait;
	struct work_struct loss_work;
	struct mutex orphan_lock;
	struct list_head orphans;
	bool dead;              /* the device could not be set up again */
	bool ready;             /* probe finished: losses are handled */
	bool removing;

	struct xarray cqs; /* device handle -> vrdma_cq */
	struct xarray qps; /* device handle -> vrdma_qp */

	struct vrdma_device_attr attr; /* checked (vrdma_check_device_attr) */
	struct vrdma_port_attr port;   /* at probe: the table lengths stay */
	u32 generation;
	bool atomic;
	bool registered;

	/* Connection management (VRDMA_F_CM, vrdma_cm.c). */
	bool cm;
	struct net_device *ndev; /* carries the addresses rdma_cm resolves */
	u32 mac_gid_index;       /* the last GID: the netdev's MAC (iWARP style) */
	struct mutex cm_lock;    /* CM commands and events, in order */
	u32 cm_epoch;            /* the epoch the CM's handles belong to */
	struct xarray conns;     /* device handle -> vrdma_conn */
	struct xarray listens;   /* device handle -> vrdma_listen */
	struct work_struct cm_work;
	wait_queue_head_t cm_wait; /* QPs waiting for iw_cm to let go */
	struct list_head conn_list; /* every vrdma_conn, for teardown */
	bool cm_stopping;        /* removal: no more CM work */
};

struct vrdma_ucontext {
	struct ib_ucontext ibuc;
};

struct vrdma_pd {
	struct ib_pd ibpd;
	u32 handle;
	u32 epoch;
};

struct vrdma_mr {
	struct ib_mr ibmr;
	struct ib_umem *umem;
	u32 handle;
	u32 epoch;
	struct vrdma_orphan orphan; /* its pages, if the device may still use them */
};

/* One ring in guest memory, mapped to user space through an mmap entry. */
struct vrdma_ring {
	struct rdma_user_mmap_entry rdma_entry;
	/* One for the object (dropped once the device can no longer write
	 * the ring), one for the mmap entry while it is inserted. */
	struct kref ref;
	struct vrdma_orphan orphan;
	void *buf; /* vmalloc_user */
	size_t size; /* page-aligned */
	u32 npages; /* 4 KiB pages the device sees */
	bool inserted;
};

struct vrdma_cq {
	struct ib_cq ibcq;
	u32 handle;
	u32 epoch;
	struct vrdma_ring *ring;
};

struct vrdma_qp {
	struct ib_qp ibqp;
	u32 handle;
	u32 epoch;
	struct vrdma_ring *sq;
	struct vrdma_ring *rq;
	struct ib_qp_cap cap;
	u8 sq_sig_all;
	struct vrdma_conn *conn; /* under dev->cm_lock */
	atomic_t cm_refs;        /* iw_cm's references (iw_add_ref) */
	bool dying;              /* being destroyed: iw_get_qp skips it */
};

static inline struct vrdma_dev *to_vdev(struct ib_device *ib)
{
	return container_of(ib, struct vrdma_dev, ib);
}

static inline struct vrdma_pd *to_vpd(struct ib_pd *pd)
{
	return container_of(pd, struct vrdma_pd, ibpd);
}

static inline struct vrdma_mr *to_vmr(struct ib_mr *mr)
{
	return container_of(mr, struct vrdma_mr, ibmr);
}

static inline struct vrdma_cq *to_vcq(struct ib_cq *cq)
{
	return container_of(cq, struct vrdma_cq, ibcq);
}

static inline struct vrdma_qp *to_vqp(struct ib_qp *qp)
{
	return container_of(qp, struct vrdma_qp, ibqp);
}

/* ---- vrdma_main.c: the control queue, doorbells, device loss ---- */

/* A request that names no object of the driver's. */
#define VRDMA_NO_OBJECT 0u

/*
 * One control command.  req (at most VRDMA_CMD_MAX bytes) is copied to
 * the device; pages (a page list in kmalloc or vmalloc memory) is sent in
 * place; on success the response payload, exactly resp_len bytes, is
 * copied to resp, which the caller then checks.  epoch is the epoch of
 * the objects the request names (VRDMA_NO_OBJECT if none): an object of
 * an older epoch is never named to the device.
 */
struct vrdma_call {
	u16 op;
	u32 epoch;
	const void *req;
	size_t req_len;
	const void *pages;
	size_t pages_len;
	void *resp;
	size_t resp_len;
	u32 ret_epoch; /* out: the epoch the command ran in (for creates) */
};

/*
 * Runs a command.  Returns 0, the device's status as a negative errno,
 * -ESTALE when it names an object lost with the device (nothing sent),
 * or -EIO when the device failed to answer properly.
 */
int vrdma_cmd(struct vrdma_dev *dev, struct vrdma_call *call);
/* A command whose request is one handle and whose response is empty. */
int vrdma_handle_cmd(struct vrdma_dev *dev, u16 op, u32 handle, u32 epoch);
/* Whether an object of this epoch is gone with the device. */
bool vrdma_lost(struct vrdma_dev *dev, u32 epoch);
/* The device broke its contract or lost our objects: reset it (async). */
void vrdma_device_lost(struct vrdma_dev *dev, const char *why);
/*
 * Hands over what the device may still use after a destroy: released now
 * if the device can no longer use it (confirmed: the destroy succeeded;
 * or the object's epoch has been reset), else after the next reset.
 */
void vrdma_release_after_device(struct vrdma_dev *dev, struct vrdma_orphan *o,
				u32 epoch, bool confirmed);
/* Adds a doorbell record; -EIO for an object lost with the device. */
int vrdma_doorbell(struct vrdma_dev *dev, u32 handle, u32 epoch, u16 type);
/* The QP whose number the device gave, or NULL. */
struct vrdma_qp *vrdma_qp_by_num(struct vrdma_dev *dev, u32 qpn);
/* Logs a response that failed its check, once per cause (ratelimited). */
void vrdma_bad_response(struct vrdma_dev *dev, u16 op, const char *what);

/* ---- vrdma_verbs.c ---- */
extern const struct ib_device_ops vrdma_dev_ops;

/* ---- vrdma_resp.c: each returns NULL, or what is wrong ---- */
int vrdma_status_errno(u32 status);
const char *vrdma_check_device_attr(const struct vrdma_device_attr *a);
const char *vrdma_check_port_attr(const struct vrdma_port_attr *p);
const char *vrdma_check_gid(const struct vrdma_gid_resp *g);
const char *vrdma_check_reg_mr(const struct vrdma_reg_mr_resp *r, u32 access);
const char *vrdma_check_create_cq(const struct vrdma_create_cq_resp *r, u32 log2_slots);
const char *vrdma_check_create_qp(const struct vrdma_create_qp_resp *r,
				  const struct vrdma_create_qp_req *req);
const char *vrdma_check_qp_attr(const struct vrdma_qp_attr *a, u32 gid_tbl_len);
const char *vrdma_check_cm_event(const struct vrdma_cm_event *e);

/* ---- vrdma_cm.c ---- */
int vrdma_cm_setup(struct vrdma_dev *dev);  /* before ib_register_device */
void vrdma_cm_teardown(struct vrdma_dev *dev); /* after ib_unregister_device */
void vrdma_cm_event(struct vrdma_dev *dev);    /* VRDMA_EV_CM arrived */
u32 vrdma_cm_gid_index(struct vrdma_dev *dev); /* the netdev's MAC GID */
void vrdma_cm_mac_gid(struct vrdma_dev *dev, union ib_gid *gid);
/* modify_qp on a CM-managed QP: 1 when the CM does it instead. */
int vrdma_cm_modify_qp(struct vrdma_dev *dev, struct vrdma_qp *qp,
		       struct ib_qp_attr *attr, int mask);
/* destroy_qp: ends its connection and waits for iw_cm to let go. */
void vrdma_cm_qp_destroy(struct vrdma_dev *dev, struct vrdma_qp *qp);
/* The device was lost and reset: so are the connections; tell iw_cm. */
void vrdma_cm_device_lost(struct vrdma_dev *dev);
/* Removal, before the device is reset: no CM work runs after it. */
void vrdma_cm_stop(struct vrdma_dev *dev);

#endif

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vrdma: the driver's objects, shared by vrdma_main.c (verbs, virtio) and
 * vrdma_cm.c (connection management).
 */
#ifndef VRDMA_H
#define VRDMA_H

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

struct vrdma_dev {
	struct ib_device ib;
	struct virtio_device *vdev;
	struct virtqueue *ctrl_vq;
	struct virtqueue *db_vq;
	struct virtqueue *ev_vq;

	struct mutex ctrl_lock; /* one control command at a time */
	wait_queue_head_t ctrl_wait;
	struct vrdma_cmd_hdr *ctrl_hdr;
	struct vrdma_resp_hdr *ctrl_rhdr;

	spinlock_t db_lock;

	struct vrdma_event *ev_bufs; /* VRDMA_EVENT_BUFS * RECORDS */
	struct work_struct ev_work;
	struct work_struct cfg_work; /* configuration change, process context */

	struct xarray cqs; /* device handle -> vrdma_cq */
	struct xarray qps; /* device handle -> vrdma_qp */

	struct vrdma_device_attr attr;
	struct vrdma_port_attr port;
	u32 generation;
	bool atomic;
	bool registered;

	/* Connection management (VRDMA_F_CM, vrdma_cm.c). */
	bool cm;
	struct net_device *ndev; /* carries the addresses rdma_cm resolves */
	u32 mac_gid_index;       /* the last GID: the netdev's MAC (iWARP style) */
	struct mutex cm_lock;    /* CM commands and events, in order */
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
};

struct vrdma_mr {
	struct ib_mr ibmr;
	struct ib_umem *umem;
	u32 handle;
};

/* One ring in guest memory, mapped to user space through an mmap entry. */
struct vrdma_ring {
	struct rdma_user_mmap_entry rdma_entry;
	void *buf; /* vmalloc_user */
	size_t size; /* page-aligned */
	u32 npages; /* 4 KiB pages the device sees */
	bool inserted;
};

struct vrdma_cq {
	struct ib_cq ibcq;
	u32 handle;
	struct vrdma_ring *ring;
};

struct vrdma_qp {
	struct ib_qp ibqp;
	u32 handle;
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

/* Runs one control command (vrdma_main.c); req/resp/extra not on the stack. */
int vrdma_cmd(struct vrdma_dev *dev, u16 op, void *req, size_t req_len,
	      void *extra, size_t extra_len, void *resp, size_t resp_len);
/* A command whose request is one handle and whose response is empty. */
int vrdma_handle_cmd(struct vrdma_dev *dev, u16 op, u32 handle);
/* The QP whose number the device gave, or NULL. */
struct vrdma_qp *vrdma_qp_by_num(struct vrdma_dev *dev, u32 qpn);

/* vrdma_cm.c */
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
/* Every device object is gone (DEVICE_FATAL, new generation): so are the
 * connections; tell iw_cm. */
void vrdma_cm_device_lost(struct vrdma_dev *dev);
/* Removal, before the device is reset: no CM work runs after it. */
void vrdma_cm_stop(struct vrdma_dev *dev);

#endif

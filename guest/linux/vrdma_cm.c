// SPDX-License-Identifier: GPL-2.0
/*
 * vrdma: connection management for rdma_cm (VRDMA_F_CM).
 *
 * The device connects QPs itself: the host's rdma_cm speaks IB CM with
 * the peer and moves the host QP to RTS (docs/virtio-rdma.md section 14).
 * The kernel's rdma_cm hands connection management to a driver only
 * through the iWARP connection manager (iw_cm), so the port declares the
 * iWARP CM capability and the driver implements its provider calls on top
 * of the device's CM commands.  rdma_cm resolves addresses on a netdev of
 * the driver's (vrdmaethN, no packets: IFF_NOARP, transmit drops) that
 * carries the function's IPv4 address; iWARP matches a port to a netdev by
 * a GID made of its MAC, which is the last entry of the GID table.  The
 * RoCE GIDs before it are the host function's, as without CM, so verbs
 * applications that exchange GIDs themselves (perftest) are unchanged.
 *
 * Lifetimes: a connection holds a reference to its iw_cm_id from connect
 * or accept until its last event (CONNECT_REPLY with an error, or CLOSE)
 * is delivered.  A peer's request not yet answered belongs to the new
 * cm_id (provider_data) until iw_accept or iw_reject.
 *
 * Device loss (vrdma_main.c): connections and listens remember the epoch
 * they were made in.  Under cm_lock, vrdma_cm_sync() ends the connections
 * of an older epoch and forgets the handles of older listens (the device
 * reuses the values) before anything else is done; commands never name an
 * old handle (vrdma_cmd refuses them).  A listen the loss ended stays
 * with its cm_id, silent, until rdma_cm destroys it.
 */
#include <linux/etherdevice.h>
#include <linux/list.h>
#include <linux/rcupdate.h>
#include <linux/sched/signal.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/slab.h>
#include <linux/virtio.h>
#include <rdma/iw_cm.h>

#include "vrdma.h"

struct vrdma_conn {
	struct list_head node; /* dev->conn_list, under cm_lock */
	u32 handle;
	u32 epoch;
	struct iw_cm_id *cm_id; /* referenced while set */
	struct vrdma_qp *qp;
	bool established;
	bool closing;  /* CM_DISCONNECT sent */
	bool gone;     /* a request the device has dropped (the peer gave up) */
	struct sockaddr_in local, remote;
	u8 ird, ord;
};

struct vrdma_listen {
	u32 handle;
	u32 epoch;
	struct iw_cm_id *cm_id;
};

/* ---------------- the netdev ---------------- */

static netdev_tx_t vrdma_ndev_xmit(struct sk_buff *skb, struct net_device *ndev)
{
	/* It carries addresses for rdma_cm, not packets. */
	ndev->stats.tx_dropped++;
	dev_kfree_skb_any(skb);
	return NETDEV_TX_OK;
}

static const struct net_device_ops vrdma_ndev_ops = {
	.ndo_start_xmit = vrdma_ndev_xmit,
	.ndo_set_mac_address = eth_mac_addr,
	.ndo_validate_addr = eth_validate_addr,
};

static void vrdma_ndev_setup(struct net_device *ndev)
{
	ether_setup(ndev);
	ndev->netdev_ops = &vrdma_ndev_ops;
	ndev->flags |= IFF_NOARP;
	ndev->priv_flags |= IFF_NO_QUEUE;
}

u32 vrdma_cm_gid_index(struct vrdma_dev *dev)
{
	return dev->mac_gid_index;
}

void vrdma_cm_mac_gid(struct vrdma_dev *dev, union ib_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	memcpy(gid->raw, dev->ndev->dev_addr, ETH_ALEN);
}

/* ---------------- helpers ---------------- */

static void vrdma_sin(struct sockaddr_in *sin, const u8 ip[4], __le16 port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	memcpy(&sin->sin_addr, ip, 4);
	sin->sin_port = htons(le16_to_cpu(port));
}

/* An IPv4 address (or the IPv4 or IPv6 wildcard) and port of cm_id's. */
static int vrdma_ipv4(const struct sockaddr_storage *ss, u8 ip[4], __le16 *port)
{
	const struct sockaddr_in *sin = (const void *)ss;
	const struct sockaddr_in6 *sin6 = (const void *)ss;

	if (ss->ss_family == AF_INET) {
		memcpy(ip, &sin->sin_addr, 4);
		*port = cpu_to_le16(ntohs(sin->sin_port));
		return 0;
	}
	if (ss->ss_family == AF_INET6 && ipv6_addr_any(&sin6->sin6_addr)) {
		memset(ip, 0, 4);
		*port = cpu_to_le16(ntohs(sin6->sin6_port));
		return 0;
	}
	if (ss->ss_family == AF_INET6 && ipv6_addr_v4mapped(&sin6->sin6_addr)) {
		memcpy(ip, &sin6->sin6_addr.s6_addr32[3], 4);
		*port = cpu_to_le16(ntohs(sin6->sin6_port));
		return 0;
	}
	return -EAFNOSUPPORT;
}

static void vrdma_event_addrs(struct iw_cm_event *ev, const struct vrdma_conn *conn)
{
	memcpy(&ev->local_addr, &conn->local, sizeof(conn->local));
	memcpy(&ev->remote_addr, &conn->remote, sizeof(conn->remote));
	/* iw_cm reads ird as this side's initiator depth, ord as its
	 * responder resources (cma_iw_handler). */
	ev->ird = conn->ord;
	ev->ord = conn->ird;
}

/*
 * The last event of a connection with a cm_id; frees it.  A connect the
 * peer refused carries the private data of its REJECT (@reply: the device's
 * event, NULL where none), which rdma_cm hands to the application with
 * RDMA_CM_EVENT_REJECTED.  cm_lock held.
 */
static void vrdma_conn_end(struct vrdma_dev *dev, struct vrdma_conn *conn, int status,
			   const struct vrdma_cm_event *reply)
{
	struct iw_cm_event ev = {};
	struct iw_cm_id *cm_id = conn->cm_id;

	if (conn->established) {
		ev.event = IW_CM_EVENT_CLOSE;
	} else {
		ev.event = IW_CM_EVENT_CONNECT_REPLY;
		ev.status = status ? status : -ECONNRESET;
		if (reply && reply->pdata_len) {
			ev.private_data = (void *)reply->pdata;
			ev.private_data_len = reply->pdata_len; /* checked */
		}
	}
	vrdma_event_addrs(&ev, conn);
	if (conn->qp)
		conn->qp->conn = NULL;
	cm_id->provider_data = NULL;
	cm_id->event_handler(cm_id, &ev);
	cm_id->rem_ref(cm_id);
	list_del(&conn->node);
	kfree(conn);
}

/* CM_REJECT of a requested connection; the device frees the handle. */
static int vrdma_reject(struct vrdma_dev *dev, u32 handle, u32 epoch, const void *pdata, u8 len)
{
	struct vrdma_cm_reject_req req = { .conn = cpu_to_le32(handle) };
	struct vrdma_call c = { .op = VRDMA_CMD_CM_REJECT, .epoch = epoch, .req = &req,
				.req_len = sizeof(req) };

	req.pdata_len = min_t(u8, len, VRDMA_CM_REJECT_PDATA);
	if (pdata && req.pdata_len)
		memcpy(req.pdata, pdata, req.pdata_len);
	return vrdma_cmd(dev, &c);
}

/* ---------------- device events ---------------- */

/* Forgets a connection's handle, unless the device reused it meanwhile. */
static void vrdma_conn_forget(struct vrdma_dev *dev, struct vrdma_conn *conn)
{
	xa_cmpxchg(&dev->conns, conn->handle, conn, NULL, 0);
}

/*
 * Under cm_lock, first thing: after a device loss, ends the connections
 * and forgets the listens of older epochs (see the top of this file).
 */
static void vrdma_cm_sync(struct vrdma_dev *dev)
{
	u32 epoch = READ_ONCE(dev->epoch);
	struct vrdma_conn *conn, *next;
	struct vrdma_listen *l;
	unsigned long i;

	if (dev->cm_epoch == epoch)
		return;
	dev->cm_epoch = epoch;
	list_for_each_entry_safe(conn, next, &dev->conn_list, node) {
		if (conn->gone || conn->epoch == epoch)
			continue;
		vrdma_conn_forget(dev, conn);
		if (conn->cm_id)
			vrdma_conn_end(dev, conn, -ECONNRESET, NULL);
		else
			conn->gone = true; /* freed at iw_accept or iw_reject */
	}
	xa_for_each(&dev->listens, i, l)
		if (l->epoch != epoch)
			xa_erase(&dev->listens, i);
}

static void vrdma_cm_request(struct vrdma_dev *dev, const struct vrdma_cm_event *e, u32 epoch)
{
	struct vrdma_listen *l = xa_load(&dev->listens, le32_to_cpu(e->listen));
	u32 handle = le32_to_cpu(e->conn);
	struct iw_cm_event ev = {};
	struct vrdma_conn *conn;
	int ret = -ENOMEM;

	conn = l ? kzalloc(sizeof(*conn), GFP_KERNEL) : NULL;
	if (conn) {
		conn->handle = handle;
		conn->epoch = epoch;
		vrdma_sin(&conn->local, e->local_ip, e->local_port);
		vrdma_sin(&conn->remote, e->remote_ip, e->remote_port);
		conn->ird = e->ird;
		conn->ord = e->ord;
		ret = xa_insert(&dev->conns, handle, conn, GFP_KERNEL);
	}
	if (!ret) {
		/* Owned by the cm_id iw_cm makes for it until iw_accept or
		 * iw_reject; on the list so that one iw_cm drops is freed at
		 * teardown. */
		list_add(&conn->node, &dev->conn_list);
		ev.event = IW_CM_EVENT_CONNECT_REQUEST;
		vrdma_event_addrs(&ev, conn);
		ev.provider_data = conn;
		ev.private_data = (void *)e->pdata;
		ev.private_data_len = e->pdata_len; /* checked */
		/* iw_cm copies the private data before this returns. */
		ret = l->cm_id->event_handler(l->cm_id, &ev);
		if (ret) {
			vrdma_conn_forget(dev, conn);
			list_del(&conn->node);
		}
	}
	if (ret) {
		kfree(conn);
		vrdma_reject(dev, handle, epoch, NULL, 0);
	}
}

/* One event, checked (vrdma_check_cm_event), of the given epoch. */
static void vrdma_cm_handle(struct vrdma_dev *dev, const struct vrdma_cm_event *e, u32 epoch)
{
	u32 handle = le32_to_cpu(e->conn);
	u32 status = le32_to_cpu(e->status);
	struct vrdma_conn *conn;
	struct iw_cm_event ev = {};

	switch (le16_to_cpu(e->type)) {
	case VRDMA_CM_EV_CONNECT_REQUEST:
		vrdma_cm_request(dev, e, epoch);
		return;
	case VRDMA_CM_EV_CONNECT_REPLY:
		conn = xa_load(&dev->conns, handle);
		if (!conn || !conn->cm_id || conn->established)
			return;
		if (status) {
			vrdma_conn_forget(dev, conn);
			vrdma_conn_end(dev, conn, -(int)status, e);
			return;
		}
		conn->established = true;
		conn->ird = e->ird;
		conn->ord = e->ord;
		ev.event = IW_CM_EVENT_CONNECT_REPLY;
		vrdma_event_addrs(&ev, conn);
		ev.private_data = (void *)e->pdata;
		ev.private_data_len = e->pdata_len; /* checked */
		conn->cm_id->event_handler(conn->cm_id, &ev);
		return;
	case VRDMA_CM_EV_CLOSED:
		conn = xa_erase(&dev->conns, handle);
		if (!conn)
			return;
		if (conn->cm_id)
			vrdma_conn_end(dev, conn, -ECONNRESET, NULL);
		else
			conn->gone = true; /* freed at iw_accept or iw_reject */
		return;
	}
}

static void vrdma_cm_work(struct work_struct *work)
{
	struct vrdma_dev *dev = container_of(work, struct vrdma_dev, cm_work);
	struct vrdma_cm_event e;
	struct vrdma_call c = { .op = VRDMA_CMD_CM_GET_EVENT, .resp = &e, .resp_len = sizeof(e) };
	const char *what;

	mutex_lock(&dev->cm_lock);
	while (!dev->cm_stopping && vrdma_cmd(dev, &c) == 0) {
		/* Fetched from a new instance: the old handles go first. */
		vrdma_cm_sync(dev);
		what = vrdma_check_cm_event(&e);
		if (!what) {
			vrdma_cm_handle(dev, &e, c.ret_epoch);
			continue;
		}
		vrdma_bad_response(dev, c.op, what);
		/* A request nobody will answer would hold the peer: refuse it. */
		if (le16_to_cpu(e.type) == VRDMA_CM_EV_CONNECT_REQUEST && e.conn)
			vrdma_reject(dev, le32_to_cpu(e.conn), c.ret_epoch, NULL, 0);
	}
	mutex_unlock(&dev->cm_lock);
}

void vrdma_cm_event(struct vrdma_dev *dev)
{
	if (dev->cm && !READ_ONCE(dev->cm_stopping))
		schedule_work(&dev->cm_work);
}

void vrdma_cm_stop(struct vrdma_dev *dev)
{
	mutex_lock(&dev->cm_lock);
	WRITE_ONCE(dev->cm_stopping, true);
	mutex_unlock(&dev->cm_lock);
	cancel_work_sync(&dev->cm_work);
}

void vrdma_cm_device_lost(struct vrdma_dev *dev)
{
	if (!dev->cm)
		return;
	mutex_lock(&dev->cm_lock);
	vrdma_cm_sync(dev);
	mutex_unlock(&dev->cm_lock);
	/* Its CM event may have been among those lost: drain anyway. */
	vrdma_cm_event(dev);
}

/* ---------------- iw_cm provider calls ---------------- */

static void vrdma_iw_add_ref(struct ib_qp *ibqp)
{
	atomic_inc(&container_of(ibqp, struct vrdma_qp, ibqp)->cm_refs);
}

static void vrdma_iw_rem_ref(struct ib_qp *ibqp)
{
	struct vrdma_qp *qp = container_of(ibqp, struct vrdma_qp, ibqp);

	if (atomic_dec_and_test(&qp->cm_refs))
		wake_up_all(&container_of(ibqp->device, struct vrdma_dev, ib)->cm_wait);
}

/*
 * The caller's QP of that number.  iw_cm runs connect and accept in the
 * calling process: a QP another process created is not its to connect
 * (and would let it hold that QP's destruction up).
 */
static struct vrdma_qp *vrdma_callers_qp(struct vrdma_dev *dev, u32 qpn)
{
	struct vrdma_qp *qp = vrdma_qp_by_num(dev, qpn);
	struct task_struct *owner = qp ? qp->ibqp.res.task : NULL;

	if (qp && qp->ibqp.uobject && owner && !same_thread_group(owner, current))
		return NULL;
	return qp;
}

static struct ib_qp *vrdma_iw_get_qp(struct ib_device *ib, int qpn)
{
	struct vrdma_qp *qp = vrdma_callers_qp(container_of(ib, struct vrdma_dev, ib), qpn);

	return qp ? &qp->ibqp : NULL;
}

static int vrdma_iw_connect(struct iw_cm_id *cm_id, struct iw_cm_conn_param *p)
{
	struct vrdma_dev *dev = container_of(cm_id->device, struct vrdma_dev, ib);
	struct vrdma_qp *qp = vrdma_callers_qp(dev, p->qpn);
	struct vrdma_cm_connect_req req = {};
	struct vrdma_handle h;
	struct vrdma_call c = { .op = VRDMA_CMD_CM_CONNECT, .req = &req, .req_len = sizeof(req),
				.resp = &h, .resp_len = sizeof(h) };
	struct vrdma_conn *conn;
	int ret;

	if (!qp)
		return -EINVAL;
	if (p->private_data_len > VRDMA_CM_CONNECT_PDATA)
		return -EINVAL;
	conn = kzalloc(sizeof(*conn), GFP_KERNEL);
	if (!conn)
		return -ENOMEM;
	req.qp = cpu_to_le32(qp->handle);
	ret = vrdma_ipv4(&cm_id->remote_addr, req.dst_ip, &req.dst_port);
	if (ret)
		goto out;
	req.ord = min_t(u32, p->ord, le32_to_cpu(dev->attr.max_qp_init_rd_atom));
	req.ird = min_t(u32, p->ird, le32_to_cpu(dev->attr.max_qp_rd_atom));
	req.pdata_len = p->private_data_len;
	if (p->private_data_len)
		memcpy(req.pdata, p->private_data, p->private_data_len);
	memcpy(&conn->local, &cm_id->local_addr, sizeof(conn->local));
	memcpy(&conn->remote, &cm_id->remote_addr, sizeof(conn->remote));

	mutex_lock(&dev->cm_lock);
	vrdma_cm_sync(dev);
	c.epoch = qp->epoch;
	ret = vrdma_cmd(dev, &c);
	if (!ret && !h.handle) {
		vrdma_bad_response(dev, c.op, "connection handle 0");
		vrdma_device_lost(dev, "a connection without a handle");
		ret = -EIO;
	}
	if (!ret) {
		conn->handle = le32_to_cpu(h.handle);
		conn->epoch = c.ret_epoch;
		ret = xa_insert(&dev->conns, conn->handle, conn, GFP_KERNEL);
	}
	if (!ret) {
		conn->cm_id = cm_id;
		conn->qp = qp;
		qp->conn = conn;
		cm_id->add_ref(cm_id);
		cm_id->provider_data = conn;
		list_add(&conn->node, &dev->conn_list);
		conn = NULL;
	}
	mutex_unlock(&dev->cm_lock);
out:
	kfree(conn);
	return ret == -ESTALE ? -EIO : ret;
}

/* iw_accept's command; conn and qp are of one epoch. */
static int vrdma_accept_cmd(struct vrdma_dev *dev, struct vrdma_conn *conn, struct vrdma_qp *qp,
			    struct iw_cm_conn_param *p, struct vrdma_cm_accept_req *req)
{
	struct vrdma_call c = { .op = VRDMA_CMD_CM_ACCEPT, .epoch = conn->epoch, .req = req,
				.req_len = sizeof(*req) };

	req->conn = cpu_to_le32(conn->handle);
	req->qp = cpu_to_le32(qp->handle);
	req->ord = min_t(u32, p->ord, le32_to_cpu(dev->attr.max_qp_init_rd_atom));
	req->ird = min_t(u32, p->ird, le32_to_cpu(dev->attr.max_qp_rd_atom));
	req->pdata_len = p->private_data_len;
	if (p->private_data_len)
		memcpy(req->pdata, p->private_data, p->private_data_len);
	return vrdma_cmd(dev, &c);
}

static int vrdma_iw_accept(struct iw_cm_id *cm_id, struct iw_cm_conn_param *p)
{
	struct vrdma_dev *dev = container_of(cm_id->device, struct vrdma_dev, ib);
	struct vrdma_conn *conn = cm_id->provider_data;
	struct vrdma_qp *qp = vrdma_callers_qp(dev, p->qpn);
	struct vrdma_cm_accept_req req = {};
	struct iw_cm_event ev = {};
	bool req_sent = false;
	int ret;

	if (!conn)
		return -EINVAL;
	mutex_lock(&dev->cm_lock);
	vrdma_cm_sync(dev);
	if (conn->gone)
		ret = -ECONNRESET;
	else if (!qp || p->private_data_len > VRDMA_CM_ACCEPT_PDATA)
		ret = -EINVAL;
	else if (qp->epoch != conn->epoch)
		ret = -EIO; /* the QP is lost with the device */
	else
		ret = 0;
	if (!ret) {
		/* A failed accept refuses the peer and frees the handle. */
		req_sent = true;
		ret = vrdma_accept_cmd(dev, conn, qp, p, &req);
	}
	if (ret) {
		/* The device frees the handle when the command fails (spec
		 * 14.1); a failure here must refuse the peer itself. */
		if (!conn->gone && !req_sent)
			vrdma_reject(dev, conn->handle, conn->epoch, NULL, 0);
		if (!conn->gone)
			vrdma_conn_forget(dev, conn);
		cm_id->provider_data = NULL;
		list_del(&conn->node);
		kfree(conn);
	} else {
		/* Established from here, as an iWARP responder is once its
		 * reply is sent; a lost RTU ends in CLOSED. */
		conn->cm_id = cm_id;
		conn->qp = qp;
		conn->established = true;
		conn->ird = req.ird;
		conn->ord = req.ord;
		qp->conn = conn;
		cm_id->add_ref(cm_id);
		ev.event = IW_CM_EVENT_ESTABLISHED;
		vrdma_event_addrs(&ev, conn);
		cm_id->event_handler(cm_id, &ev);
	}
	mutex_unlock(&dev->cm_lock);
	return ret == -ESTALE ? -ECONNRESET : ret;
}

static int vrdma_iw_reject(struct iw_cm_id *cm_id, const void *pdata, u8 len)
{
	struct vrdma_dev *dev = container_of(cm_id->device, struct vrdma_dev, ib);
	struct vrdma_conn *conn = cm_id->provider_data;
	int ret = 0;

	if (!conn)
		return -EINVAL;
	mutex_lock(&dev->cm_lock);
	vrdma_cm_sync(dev);
	if (!conn->gone) {
		vrdma_conn_forget(dev, conn);
		ret = vrdma_reject(dev, conn->handle, conn->epoch, pdata, len);
	}
	cm_id->provider_data = NULL;
	list_del(&conn->node);
	kfree(conn);
	mutex_unlock(&dev->cm_lock);
	/* A request lost with the device needs no answer. */
	return ret == -ESTALE ? 0 : ret;
}

static int vrdma_iw_create_listen(struct iw_cm_id *cm_id, int backlog)
{
	struct vrdma_dev *dev = container_of(cm_id->device, struct vrdma_dev, ib);
	struct vrdma_cm_listen_req req = {};
	struct vrdma_handle h;
	struct vrdma_call c = { .op = VRDMA_CMD_CM_LISTEN, .req = &req, .req_len = sizeof(req),
				.resp = &h, .resp_len = sizeof(h) };
	struct vrdma_listen *l;
	int ret;

	l = kzalloc(sizeof(*l), GFP_KERNEL);
	if (!l)
		return -ENOMEM;
	ret = vrdma_ipv4(&cm_id->local_addr, req.ip, &req.port);
	if (ret)
		goto out;
	req.backlog = cpu_to_le16(clamp(backlog, 1, VRDMA_CM_MAX_BACKLOG));
	mutex_lock(&dev->cm_lock);
	vrdma_cm_sync(dev);
	ret = vrdma_cmd(dev, &c);
	if (!ret && !h.handle) {
		vrdma_bad_response(dev, c.op, "listen handle 0");
		vrdma_device_lost(dev, "a listen without a handle");
		ret = -EIO;
	}
	if (!ret) {
		l->handle = le32_to_cpu(h.handle);
		l->epoch = c.ret_epoch;
		l->cm_id = cm_id;
		ret = xa_insert(&dev->listens, l->handle, l, GFP_KERNEL);
		if (ret)
			vrdma_handle_cmd(dev, VRDMA_CMD_CM_DESTROY_LISTEN, l->handle, l->epoch);
	}
	if (!ret) {
		cm_id->provider_data = l;
		l = NULL;
	}
	mutex_unlock(&dev->cm_lock);
out:
	kfree(l);
	return ret == -ESTALE ? -EIO : ret;
}

static int vrdma_iw_destroy_listen(struct iw_cm_id *cm_id)
{
	struct vrdma_dev *dev = container_of(cm_id->device, struct vrdma_dev, ib);
	struct vrdma_listen *l = cm_id->provider_data;

	if (!l)
		return 0;
	mutex_lock(&dev->cm_lock);
	vrdma_cm_sync(dev);
	xa_cmpxchg(&dev->listens, l->handle, l, NULL, 0);
	/* A listen lost with the device is not named to it (-ESTALE). */
	vrdma_handle_cmd(dev, VRDMA_CMD_CM_DESTROY_LISTEN, l->handle, l->epoch);
	cm_id->provider_data = NULL;
	mutex_unlock(&dev->cm_lock);
	kfree(l);
	return 0;
}

/* ---------------- QPs under connection management ---------------- */

int vrdma_cm_modify_qp(struct vrdma_dev *dev, struct vrdma_qp *qp,
		       struct ib_qp_attr *attr, int mask)
{
	bool to_state = mask & IB_QP_STATE;
	int ret = 0;

	if (!dev->cm)
		return 0;
	/*
	 * rdma_cm's user library walks an iWARP QP through RTR with no
	 * address and through RTS with no attributes: the device's CM does
	 * those moves on the host, so these are no-ops here.
	 */
	if (!(mask & ~IB_QP_PORT))
		return 1;
	if (to_state && attr->qp_state == IB_QPS_RTR && !(mask & IB_QP_AV))
		return 1;
	/* iw_cm disconnects by moving the QP: SQD gracefully, ERR abruptly. */
	if (to_state && (attr->qp_state == IB_QPS_SQD || attr->qp_state == IB_QPS_ERR)) {
		mutex_lock(&dev->cm_lock);
		vrdma_cm_sync(dev);
		if (qp->conn && qp->conn->established && !qp->conn->closing) {
			qp->conn->closing = true;
			ret = vrdma_handle_cmd(dev, VRDMA_CMD_CM_DISCONNECT, qp->conn->handle,
					       qp->conn->epoch);
		}
		mutex_unlock(&dev->cm_lock);
		if (attr->qp_state == IB_QPS_SQD && qp->conn)
			return ret ? ret : 1;
	}
	return 0;
}

void vrdma_cm_qp_destroy(struct vrdma_dev *dev, struct vrdma_qp *qp)
{
	struct vrdma_conn *conn;

	if (!dev->cm)
		return;
	/*
	 * No new iw_cm reference from here: iw_get_qp skips a dying QP, and
	 * iw_cm takes its reference in the same spinlocked section as the
	 * lookup, which synchronize_rcu() waits out.
	 */
	xa_lock(&dev->qps);
	qp->dying = true;
	xa_unlock(&dev->qps);
	synchronize_rcu();
	/* The device ends the connection when the QP goes; tell iw_cm now,
	 * so that it lets go of the QP before it is freed. */
	mutex_lock(&dev->cm_lock);
	vrdma_cm_sync(dev);
	conn = qp->conn;
	if (conn) {
		vrdma_conn_forget(dev, conn);
		vrdma_conn_end(dev, conn, -ECONNABORTED, NULL);
	}
	mutex_unlock(&dev->cm_lock);
	wait_event(dev->cm_wait, atomic_read(&qp->cm_refs) == 0);
}

/* ---------------- set-up ---------------- */

static const struct ib_device_ops vrdma_cm_ops = {
	.iw_accept = vrdma_iw_accept,
	.iw_add_ref = vrdma_iw_add_ref,
	.iw_connect = vrdma_iw_connect,
	.iw_create_listen = vrdma_iw_create_listen,
	.iw_destroy_listen = vrdma_iw_destroy_listen,
	.iw_get_qp = vrdma_iw_get_qp,
	.iw_reject = vrdma_iw_reject,
	.iw_rem_ref = vrdma_iw_rem_ref,
};

int vrdma_cm_setup(struct vrdma_dev *dev)
{
	struct net_device *ndev;
	int ret;

	mutex_init(&dev->cm_lock);
	xa_init(&dev->conns);
	xa_init(&dev->listens);
	INIT_WORK(&dev->cm_work, vrdma_cm_work);
	init_waitqueue_head(&dev->cm_wait);
	INIT_LIST_HEAD(&dev->conn_list);
	dev->cm_epoch = dev->epoch;
	if (!dev->cm)
		return 0;
	dev->mac_gid_index = le32_to_cpu(dev->port.gid_tbl_len);
	ndev = alloc_netdev(0, "vrdmaeth%d", NET_NAME_ENUM, vrdma_ndev_setup);
	if (!ndev)
		return -ENOMEM;
	eth_hw_addr_random(ndev);
	SET_NETDEV_DEV(ndev, &dev->vdev->dev);
	ret = register_netdev(ndev);
	if (ret) {
		free_netdev(ndev);
		return ret;
	}
	dev->ndev = ndev;
	ret = ib_device_set_netdev(&dev->ib, ndev, 1);
	if (ret) {
		unregister_netdev(ndev);
		free_netdev(ndev);
		dev->ndev = NULL;
		return ret;
	}
	strscpy(dev->ib.iw_ifname, ndev->name, sizeof(dev->ib.iw_ifname));
	ib_set_device_ops(&dev->ib, &vrdma_cm_ops);
	return 0;
}

void vrdma_cm_teardown(struct vrdma_dev *dev)
{
	struct vrdma_conn *conn, *next;
	struct vrdma_listen *l;
	unsigned long i;

	cancel_work_sync(&dev->cm_work);
	/* rdma_cm destroyed every id on the device before unregistering
	 * returned: nothing refers to what is left (requests iw_cm dropped). */
	list_for_each_entry_safe(conn, next, &dev->conn_list, node) {
		list_del(&conn->node);
		kfree(conn);
	}
	xa_for_each(&dev->listens, i, l)
		kfree(xa_erase(&dev->listens, i));
	xa_destroy(&dev->conns);
	xa_destroy(&dev->listens);
	if (dev->ndev) {
		ib_device_set_netdev(&dev->ib, NULL, 1);
		unregister_netdev(dev->ndev);
		free_netdev(dev->ndev);
		dev->ndev = NULL;
	}
}

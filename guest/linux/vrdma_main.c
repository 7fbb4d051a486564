// SPDX-License-Identifier: GPL-2.0
/*
 * vrdma: guest driver for the virtio-rdma device (virtio device id 42).
 *
 * The device is specified in docs/virtio-rdma.md.  This file is the
 * virtio side: the control queue, doorbells, events, probe and removal,
 * and device loss.  vrdma_verbs.c implements the verbs with rxe's user
 * ABI, so that Debian's stock librxe drives the device from user space;
 * vrdma_resp.c checks the device's responses; vrdma_cm.c is rdma_cm.
 *
 * Device loss (spec section 9).  The device's objects vanish when its back
 * end restarts or the guest migrates (a new generation), when it raises
 * DEVICE_FATAL, and - as far as the driver can tell - when it answers
 * ENOENT for an object handle the driver holds, fails a destroy, or breaks
 * the protocol.  vrdma_device_lost() then has loss_work:
 *
 *   1. reset the device: it stops writing guest memory and destroys what
 *      it still had, and a command waiting for it gives up;
 *   2. move the epoch on: objects of the old one are never named to the
 *      device again (a new instance hands out the same handle values to
 *      new objects), and their handles leave the lookup tables;
 *   3. set the device up again, free what waited for the reset (orphans),
 *      and report IB_EVENT_DEVICE_FATAL to the users.
 *
 * From then on the destroys of lost objects succeed at once and free
 * everything (rings, pinned pages), so processes that held objects across
 * a loss exit without the RDMA core's cleanup warning.  Commands wait
 * while a loss is pending, so they never race the reset.  Memory the
 * device might still write is freed only after a destroy it confirmed or
 * after a reset: until then it is an orphan.
 *
 * What the driver cannot see: a back end that reconnects without
 * restarting keeps its generation, and its DEVICE_FATAL comes as an
 * event; commands the driver sends before that event arrives reach the
 * new, empty instance (where a held handle gives ENOENT: a loss).
 */
#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/virtio.h>
#include <linux/virtio_config.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/mm.h>
#include <linux/xarray.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>

#include "vrdma.h"

/*
 * Test hook (tests/nested/driver-check): the next successful response to
 * command inject_op has the le32 at byte inject_offset of its payload
 * replaced by inject_value, as a faulty device would write it, before the
 * driver copies and checks it.  One shot; 0 = off; root only.
 */
static unsigned int inject_op;
module_param(inject_op, uint, 0600);
MODULE_PARM_DESC(inject_op, "test: corrupt the next response to this command");
static unsigned int inject_offset;
module_param(inject_offset, uint, 0600);
MODULE_PARM_DESC(inject_offset, "test: byte offset of the le32 to replace");
static unsigned int inject_value;
module_param(inject_value, uint, 0600);
MODULE_PARM_DESC(inject_value, "test: the value written there");

#define VRDMA_SMALL_SEGS 8

/* ---------------- control queue ---------------- */

static void vrdma_ctrl_done(struct virtqueue *vq)
{
	struct vrdma_dev *dev = vq->vdev->priv;

	wake_up(&dev->ctrl_wait);
}

/* Segments a buffer takes: one per page of vmalloc memory, else one. */
static unsigned int vrdma_sg_count(const void *buf, size_t len)
{
	if (!len)
		return 0;
	if (!is_vmalloc_addr(buf))
		return 1;
	return DIV_ROUND_UP(offset_in_page(buf) + len, PAGE_SIZE);
}

/* Adds a buffer (kmalloc or vmalloc memory) to an sg table, page by page. */
static void vrdma_sg_add(struct scatterlist *sgs, unsigned int *n, const void *buf,
			 size_t len)
{
	while (len) {
		size_t chunk;

		sg_init_table(&sgs[*n], 1);
		if (is_vmalloc_addr(buf)) {
			size_t off = offset_in_page(buf);

			chunk = min_t(size_t, len, PAGE_SIZE - off);
			sg_set_page(&sgs[*n], vmalloc_to_page(buf), chunk, off);
		} else {
			chunk = len;
			sg_set_buf(&sgs[*n], buf, chunk);
		}
		(*n)++;
		buf += chunk;
		len -= chunk;
	}
}

void vrdma_bad_response(struct vrdma_dev *dev, u16 op, const char *what)
{
	dev_warn_ratelimited(&dev->vdev->dev, "response to command %u refused: %s\n", op, what);
}

static void vrdma_inject(struct vrdma_dev *dev, u16 op, size_t resp_len)
{
	u32 off = READ_ONCE(inject_offset);
	__le32 v = cpu_to_le32(READ_ONCE(inject_value));

	if (!op || READ_ONCE(inject_op) != op || resp_len < sizeof(v) || off > resp_len - sizeof(v))
		return;
	WRITE_ONCE(inject_op, 0);
	memcpy(dev->ctrl_resp + off, &v, sizeof(v));
	dev_info(&dev->vdev->dev, "test: response to command %u altered at %u\n", op, off);
}

/* Commands whose ENOENT means the device lost an object the driver holds. */
static bool vrdma_names_object(u16 op)
{
	switch (op) {
	case VRDMA_CMD_DESTROY_PD:
	case VRDMA_CMD_REG_MR:
	case VRDMA_CMD_DEREG_MR:
	case VRDMA_CMD_DESTROY_CQ:
	case VRDMA_CMD_CREATE_QP:
	case VRDMA_CMD_MODIFY_QP:
	case VRDMA_CMD_QUERY_QP:
	case VRDMA_CMD_DESTROY_QP:
		return true;
	default:
		return false; /* CM handles end on their own (spec 14) */
	}
}

/*
 * Sends the command and waits for the device to return it: 0, -ESTALE if
 * the device was reset under it, or the error of adding it to the queue.
 */
static int vrdma_ctrl_send(struct vrdma_dev *dev, struct vrdma_call *c,
			   struct scatterlist *sgs, struct scatterlist **sgp, unsigned int *len)
{
	unsigned int nout = 0, nin = 0, i;
	void *token = NULL;
	int ret;

	memset(dev->ctrl_hdr, 0, sizeof(*dev->ctrl_hdr));
	dev->ctrl_hdr->opcode = cpu_to_le16(c->op);
	dev->ctrl_rhdr->status = cpu_to_le32(~0u);
	dev->ctrl_rhdr->reserved = 0;
	if (c->req_len)
		memcpy(dev->ctrl_req, c->req, c->req_len);
	memset(dev->ctrl_resp, 0, c->resp_len);

	vrdma_sg_add(sgs, &nout, dev->ctrl_hdr, sizeof(*dev->ctrl_hdr));
	vrdma_sg_add(sgs, &nout, dev->ctrl_req, c->req_len);
	vrdma_sg_add(sgs, &nout, c->pages, c->pages_len);
	nin = nout;
	vrdma_sg_add(sgs, &nin, dev->ctrl_rhdr, sizeof(*dev->ctrl_rhdr));
	vrdma_sg_add(sgs, &nin, dev->ctrl_resp, c->resp_len);
	nin -= nout;
	for (i = 0; i < nout + nin; i++)
		sgp[i] = &sgs[i];
	/* One command at a time: the queue always has room for it. */
	ret = virtqueue_add_sgs(dev->ctrl_vq, sgp, nout, nin, dev, GFP_KERNEL);
	if (ret) {
		dev_err(&dev->vdev->dev, "control queue add failed: %d\n", ret);
		return ret;
	}
	virtqueue_kick(dev->ctrl_vq);
	wait_event(dev->ctrl_wait, (token = virtqueue_get_buf(dev->ctrl_vq, len)) ||
				   READ_ONCE(dev->ctrl_abort));
	/* Reset under it: whatever the command did is gone with the rest. */
	return token ? 0 : -ESTALE;
}

/* Under ctrl_lock.  See vrdma_cmd(). */
static int vrdma_cmd_locked(struct vrdma_dev *dev, struct vrdma_call *c,
			    struct scatterlist *sgs, struct scatterlist **sgp)
{
	const unsigned int hdr = sizeof(struct vrdma_resp_hdr);
	unsigned int len;
	u32 status;
	int ret;

	if (dev->dead)
		return -EIO;
	if (c->epoch != VRDMA_NO_OBJECT && c->epoch != dev->epoch)
		return -ESTALE;
	c->ret_epoch = dev->epoch;
	ret = vrdma_ctrl_send(dev, c, sgs, sgp, &len);
	if (ret)
		return ret;
	if (len < hdr || len > hdr + c->resp_len) {
		vrdma_bad_response(dev, c->op, "used length");
		vrdma_device_lost(dev, "a response of a bad length");
		return -EIO;
	}
	status = le32_to_cpu(dev->ctrl_rhdr->status);
	if (status) {
		ret = vrdma_status_errno(status);
	} else if (len != hdr + c->resp_len) {
		vrdma_bad_response(dev, c->op, "used length");
		vrdma_device_lost(dev, "a response of a bad length");
		ret = -EIO;
	} else {
		vrdma_inject(dev, c->op, c->resp_len);
		memcpy(c->resp, dev->ctrl_resp, c->resp_len);
		ret = 0;
	}
	/* A new generation: the device is another instance (spec 2.3). */
	if (virtio_cread32(dev->vdev, offsetof(struct vrdma_config, generation)) !=
	    dev->generation)
		vrdma_device_lost(dev, "the generation changed");
	if (ret == -ENOENT && c->epoch != VRDMA_NO_OBJECT && vrdma_names_object(c->op)) {
		vrdma_device_lost(dev, "ENOENT for a handle the driver holds");
		return -ESTALE;
	}
	/* An empty CM event queue is the normal end of a drain. */
	if (ret && !(c->op == VRDMA_CMD_CM_GET_EVENT && ret == -ENOENT))
		dev_info_ratelimited(&dev->vdev->dev, "command %u failed: %d\n", c->op, ret);
	return ret;
}

int vrdma_cmd(struct vrdma_dev *dev, struct vrdma_call *c)
{
	struct scatterlist small_sgs[VRDMA_SMALL_SEGS], *small_sgp[VRDMA_SMALL_SEGS];
	struct scatterlist *sgs = small_sgs, **sgp = small_sgp;
	unsigned int nsegs;
	int ret;

	if (WARN_ON_ONCE(c->req_len > VRDMA_CMD_MAX || c->resp_len > VRDMA_CMD_MAX))
		return -EINVAL;
	nsegs = 2 + !!c->req_len + vrdma_sg_count(c->pages, c->pages_len) + !!c->resp_len;
	if (nsegs > VRDMA_MAX_SEGS)
		return -E2BIG;
	if (nsegs > VRDMA_SMALL_SEGS) {
		sgs = kcalloc(nsegs, sizeof(*sgs), GFP_KERNEL);
		sgp = kcalloc(nsegs, sizeof(*sgp), GFP_KERNEL);
		if (!sgs || !sgp) {
			ret = -ENOMEM;
			goto out;
		}
	}
	for (;;) {
		/* A pending loss: the objects named here are about to go. */
		wait_event(dev->reset_wait, !test_bit(0, &dev->loss_pending));
		mutex_lock(&dev->ctrl_lock);
		if (!test_bit(0, &dev->loss_pending))
			break;
		mutex_unlock(&dev->ctrl_lock);
	}
	ret = vrdma_cmd_locked(dev, c, sgs, sgp);
	mutex_unlock(&dev->ctrl_lock);
out:
	if (sgs != small_sgs) {
		kfree(sgs);
		kfree(sgp);
	}
	return ret;
}

int vrdma_handle_cmd(struct vrdma_dev *dev, u16 op, u32 handle, u32 epoch)
{
	struct vrdma_handle h = { .handle = cpu_to_le32(handle) };
	struct vrdma_call c = { .op = op, .epoch = epoch, .req = &h, .req_len = sizeof(h) };

	return vrdma_cmd(dev, &c);
}

/* ---------------- device loss ---------------- */

bool vrdma_lost(struct vrdma_dev *dev, u32 epoch)
{
	return READ_ONCE(dev->dead) || epoch != READ_ONCE(dev->epoch) ||
	       test_bit(0, &dev->loss_pending);
}

void vrdma_device_lost(struct vrdma_dev *dev, const char *why)
{
	if (!READ_ONCE(dev->ready) || READ_ONCE(dev->removing))
		return;
	if (test_and_set_bit(0, &dev->loss_pending))
		return;
	dev_warn(&dev->vdev->dev, "device lost (%s): resetting it\n", why);
	schedule_work(&dev->loss_work);
}

static void vrdma_release_orphans(struct list_head *list)
{
	struct vrdma_orphan *o, *next;

	list_for_each_entry_safe(o, next, list, node) {
		list_del(&o->node);
		o->release(o);
	}
}

void vrdma_release_after_device(struct vrdma_dev *dev, struct vrdma_orphan *o,
				u32 epoch, bool confirmed)
{
	mutex_lock(&dev->orphan_lock);
	if (!confirmed && epoch >= dev->reset_epoch) {
		list_add_tail(&o->node, &dev->orphans);
		o = NULL;
	}
	mutex_unlock(&dev->orphan_lock);
	if (o)
		o->release(o);
}

/* Called with the device reset, or about to be: no one reads the handles. */
static void vrdma_forget_handles(struct vrdma_dev *dev)
{
	unsigned long i;
	void *obj;

	xa_for_each(&dev->cqs, i, obj)
		xa_erase(&dev->cqs, i);
	xa_for_each(&dev->qps, i, obj)
		xa_erase(&dev->qps, i);
}

static int vrdma_find_vqs(struct vrdma_dev *dev);
static int vrdma_query_attrs(struct vrdma_dev *dev);

static void vrdma_db_drop_all(struct vrdma_dev *dev);

/* After a reset: the status sequence of a probe, the queues, attributes. */
static int vrdma_restart(struct vrdma_dev *dev)
{
	struct virtio_device *vdev = dev->vdev;
	unsigned long flags;
	int ret;

	cancel_work_sync(&dev->ev_work);
	spin_lock_irqsave(&dev->db_lock, flags);
	dev->db_off = true;
	spin_unlock_irqrestore(&dev->db_lock, flags);
	vrdma_db_drop_all(dev);
	vdev->config->del_vqs(vdev);
	dev->ctrl_vq = dev->db_vq = dev->ev_vq = NULL;

	virtio_add_status(vdev, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	virtio_add_status(vdev, VIRTIO_CONFIG_S_DRIVER);
	ret = vdev->config->finalize_features(vdev);
	if (ret)
		return ret;
	virtio_add_status(vdev, VIRTIO_CONFIG_S_FEATURES_OK);
	if (!(vdev->config->get_status(vdev) & VIRTIO_CONFIG_S_FEATURES_OK))
		return -ENODEV;
	ret = vrdma_find_vqs(dev);
	if (ret)
		return ret;
	spin_lock_irqsave(&dev->db_lock, flags);
	dev->db_off = false;
	spin_unlock_irqrestore(&dev->db_lock, flags);
	dev->generation = virtio_cread32(vdev, offsetof(struct vrdma_config, generation));
	WRITE_ONCE(dev->ctrl_abort, false);
	return vrdma_query_attrs(dev);
}

static void vrdma_loss_work(struct work_struct *work)
{
	struct vrdma_dev *dev = container_of(work, struct vrdma_dev, loss_work);
	struct ib_event ibev = {
		.device = &dev->ib,
		.element.port_num = 1,
		.event = IB_EVENT_DEVICE_FATAL,
	};
	LIST_HEAD(released);
	int ret;

	/* From here the device writes no ring and no page, and the front
	 * end has it destroy every object (RESET_DEVICE). */
	virtio_reset_device(dev->vdev);
	WRITE_ONCE(dev->ctrl_abort, true);
	wake_up_all(&dev->ctrl_wait);
	mutex_lock(&dev->ctrl_lock);
	dev->epoch = dev->epoch + 1 ?: 1; /* never VRDMA_NO_OBJECT */
	vrdma_forget_handles(dev);
	ret = dev->removing ? -ENODEV : vrdma_restart(dev);
	if (ret) {
		WRITE_ONCE(dev->dead, true);
		if (!dev->removing)
			dev_err(&dev->vdev->dev, "the device could not be set up again: %d\n", ret);
	} else {
		dev_info(&dev->vdev->dev, "device reset: generation %08x, epoch %u\n",
			 dev->generation, dev->epoch);
	}
	mutex_lock(&dev->orphan_lock);
	dev->reset_epoch = dev->epoch;
	list_splice_init(&dev->orphans, &released);
	mutex_unlock(&dev->orphan_lock);
	clear_bit(0, &dev->loss_pending);
	mutex_unlock(&dev->ctrl_lock);
	wake_up_all(&dev->reset_wait);
	vrdma_release_orphans(&released);
	if (dev->removing)
		return;
	vrdma_cm_device_lost(dev);
	if (dev->registered)
		ib_dispatch_event(&ibev);
}

/* ---------------- doorbells ---------------- */

/* Under db_lock. */
static void vrdma_db_reclaim(struct vrdma_dev *dev)
{
	unsigned int len;
	void *rec;

	while ((rec = virtqueue_get_buf(dev->db_vq, &len)) != NULL)
		kfree(rec);
}

/* The device is reset and db_off set: no one else touches the queue. */
static void vrdma_db_drop_all(struct vrdma_dev *dev)
{
	void *rec;

	if (!dev->db_vq)
		return;
	vrdma_db_reclaim(dev);
	while ((rec = virtqueue_detach_unused_buf(dev->db_vq)) != NULL)
		kfree(rec);
}

int vrdma_doorbell(struct vrdma_dev *dev, u32 handle, u32 epoch, u16 type)
{
	struct vrdma_doorbell *db;
	struct scatterlist sg;
	unsigned long flags;
	int ret, tries;

	if (vrdma_lost(dev, epoch))
		return -EIO;
	db = kmalloc(sizeof(*db), GFP_ATOMIC);
	if (!db)
		return -ENOMEM;
	db->handle = cpu_to_le32(handle);
	db->type = cpu_to_le16(type);
	db->reserved = 0;
	sg_init_one(&sg, db, sizeof(*db));

	spin_lock_irqsave(&dev->db_lock, flags);
	if (dev->db_off) {
		ret = -EIO;
		goto out;
	}
	vrdma_db_reclaim(dev);
	ret = virtqueue_add_outbuf(dev->db_vq, &sg, 1, db, GFP_ATOMIC);
	/* The device is behind: wait briefly for it to take buffers. */
	for (tries = 0; tries < 100000 && ret == -ENOSPC; tries++) {
		virtqueue_kick(dev->db_vq);
		cpu_relax();
		vrdma_db_reclaim(dev);
		ret = virtqueue_add_outbuf(dev->db_vq, &sg, 1, db, GFP_ATOMIC);
	}
	if (!ret)
		virtqueue_kick(dev->db_vq);
out:
	spin_unlock_irqrestore(&dev->db_lock, flags);
	if (ret)
		kfree(db);
	return ret;
}

/* ---------------- events ---------------- */

static int vrdma_post_event_buf(struct vrdma_dev *dev, int i)
{
	struct scatterlist sg;
	struct vrdma_event *buf = dev->ev_bufs + i * VRDMA_EVENT_BUF_RECORDS;

	sg_init_one(&sg, buf, VRDMA_EVENT_BUF_RECORDS * sizeof(*buf));
	return virtqueue_add_inbuf(dev->ev_vq, &sg, 1, buf, GFP_KERNEL);
}

static void vrdma_ev_done(struct virtqueue *vq)
{
	struct vrdma_dev *dev = vq->vdev->priv;

	schedule_work(&dev->ev_work);
}

static const char *vrdma_qp_fatal_reason(u32 reason)
{
	switch (reason) {
	case VRDMA_QPF_BAD_WQE:
		return "the device refused a WQE";
	case VRDMA_QPF_HOST:
		return "the host QP failed";
	case VRDMA_QPF_MEMORY:
		return "guest memory under it changed";
	case VRDMA_QPF_STOPPED:
		return "the device stopped for migration";
	default:
		return "unknown reason";
	}
}

static void vrdma_qp_event(struct vrdma_dev *dev, u32 handle, u32 reason)
{
	struct ib_event ibev = { .device = &dev->ib, .event = IB_EVENT_QP_FATAL };
	struct vrdma_qp *qp;

	xa_lock(&dev->qps);
	qp = xa_load(&dev->qps, handle);
	if (qp) {
		dev_info_ratelimited(&dev->vdev->dev, "QP %u fatal: %s\n", qp->ibqp.qp_num,
				     vrdma_qp_fatal_reason(reason));
		if (qp->ibqp.event_handler) {
			ibev.element.qp = &qp->ibqp;
			qp->ibqp.event_handler(&ibev, qp->ibqp.qp_context);
		}
	}
	xa_unlock(&dev->qps);
}

static void vrdma_cq_event(struct vrdma_dev *dev, u32 handle, bool error)
{
	struct ib_event ibev = { .device = &dev->ib, .event = IB_EVENT_CQ_ERR };
	struct vrdma_cq *cq;

	xa_lock(&dev->cqs);
	cq = xa_load(&dev->cqs, handle);
	if (cq && !error && cq->ibcq.comp_handler) {
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
	} else if (cq && error && cq->ibcq.event_handler) {
		ibev.element.cq = &cq->ibcq;
		cq->ibcq.event_handler(&ibev, cq->ibcq.cq_context);
	}
	xa_unlock(&dev->cqs);
}

/* One event, from a copy: unknown types and handles are ignored. */
static void vrdma_handle_event(struct vrdma_dev *dev, const struct vrdma_event *ev)
{
	u16 type = le16_to_cpu(ev->type);
	u32 handle = le32_to_cpu(ev->handle);
	struct ib_event ibev = { .device = &dev->ib, .element.port_num = 1 };

	switch (type) {
	case VRDMA_EV_CQ_COMP:
	case VRDMA_EV_CQ_ERR:
		vrdma_cq_event(dev, handle, type == VRDMA_EV_CQ_ERR);
		break;
	case VRDMA_EV_QP_FATAL:
		vrdma_qp_event(dev, handle, le32_to_cpu(ev->data));
		break;
	case VRDMA_EV_PORT_ACTIVE:
	case VRDMA_EV_PORT_ERR:
		if (!dev->registered)
			break;
		ibev.event = type == VRDMA_EV_PORT_ACTIVE ? IB_EVENT_PORT_ACTIVE :
							    IB_EVENT_PORT_ERR;
		ib_dispatch_event(&ibev);
		break;
	case VRDMA_EV_CM:
		vrdma_cm_event(dev);
		break;
	case VRDMA_EV_DEVICE_FATAL:
		vrdma_device_lost(dev, "DEVICE_FATAL event");
		break;
	default:
		dev_dbg(&dev->vdev->dev, "unknown event type %u\n", type);
	}
}

static void vrdma_ev_work(struct work_struct *work)
{
	struct vrdma_dev *dev = container_of(work, struct vrdma_dev, ev_work);
	struct vrdma_event *buf, ev;
	unsigned int len, i;
	bool again;

	do {
		virtqueue_disable_cb(dev->ev_vq);
		while ((buf = virtqueue_get_buf(dev->ev_vq, &len)) != NULL) {
			for (i = 0; i < len / sizeof(*buf) && i < VRDMA_EVENT_BUF_RECORDS; i++) {
				ev = buf[i];
				vrdma_handle_event(dev, &ev);
			}
			vrdma_post_event_buf(dev, (buf - dev->ev_bufs) / VRDMA_EVENT_BUF_RECORDS);
		}
		virtqueue_kick(dev->ev_vq);
		again = !virtqueue_enable_cb(dev->ev_vq);
	} while (again);
}

/* ---------------- set-up ---------------- */

/* Under ctrl_lock (or in probe, before anyone else can send). */
static int vrdma_query_attrs(struct vrdma_dev *dev)
{
	struct scatterlist sgs[VRDMA_SMALL_SEGS], *sgp[VRDMA_SMALL_SEGS];
	struct vrdma_port_req preq = { .port = 1 };
	struct vrdma_device_attr attr;
	struct vrdma_port_attr port;
	struct vrdma_call dc = { .op = VRDMA_CMD_QUERY_DEVICE, .resp = &attr,
				 .resp_len = sizeof(attr) };
	struct vrdma_call pc = { .op = VRDMA_CMD_QUERY_PORT, .req = &preq,
				 .req_len = sizeof(preq), .resp = &port,
				 .resp_len = sizeof(port) };
	const char *what;
	int ret;

	ret = vrdma_cmd_locked(dev, &dc, sgs, sgp);
	if (!ret)
		ret = vrdma_cmd_locked(dev, &pc, sgs, sgp);
	if (ret)
		return ret;
	what = vrdma_check_device_attr(&attr);
	if (what) {
		vrdma_bad_response(dev, dc.op, what);
		return -EIO;
	}
	what = vrdma_check_port_attr(&port);
	if (what) {
		vrdma_bad_response(dev, pc.op, what);
		return -EIO;
	}
	dev->attr = attr;
	/* The table lengths are the core's for the device's lifetime. */
	if (!dev->registered)
		dev->port = port;
	return 0;
}

static int vrdma_find_vqs(struct vrdma_dev *dev)
{
	static const char * const names[] = { "control", "doorbell", "event" };
	vq_callback_t *cbs[] = { vrdma_ctrl_done, NULL, vrdma_ev_done };
	struct virtqueue *vqs[VRDMA_NUM_VQS];
	int ret, i;

	ret = virtio_find_vqs(dev->vdev, VRDMA_NUM_VQS, vqs, cbs, names, NULL);
	if (ret)
		return ret;
	dev->ctrl_vq = vqs[VRDMA_VQ_CTRL];
	dev->db_vq = vqs[VRDMA_VQ_DOORBELL];
	dev->ev_vq = vqs[VRDMA_VQ_EVENT];
	virtio_device_ready(dev->vdev);
	for (i = 0; i < VRDMA_EVENT_BUFS; i++) {
		ret = vrdma_post_event_buf(dev, i);
		if (ret)
			break;
	}
	virtqueue_kick(dev->ev_vq);
	return 0;
}

static void vrdma_cfg_work(struct work_struct *work);
static void vrdma_free(struct vrdma_dev *dev);

static struct vrdma_dev *vrdma_alloc(struct virtio_device *vdev)
{
	struct vrdma_dev *dev = ib_alloc_device(vrdma_dev, ib);

	if (!dev)
		return NULL;
	dev->vdev = vdev;
	vdev->priv = dev;
	mutex_init(&dev->ctrl_lock);
	init_waitqueue_head(&dev->ctrl_wait);
	spin_lock_init(&dev->db_lock);
	INIT_WORK(&dev->ev_work, vrdma_ev_work);
	INIT_WORK(&dev->cfg_work, vrdma_cfg_work);
	INIT_WORK(&dev->loss_work, vrdma_loss_work);
	init_waitqueue_head(&dev->reset_wait);
	mutex_init(&dev->orphan_lock);
	INIT_LIST_HEAD(&dev->orphans);
	dev->epoch = 1;
	dev->reset_epoch = 1;
	xa_init(&dev->cqs);
	xa_init(&dev->qps);
	dev->ctrl_hdr = kzalloc(sizeof(*dev->ctrl_hdr), GFP_KERNEL);
	dev->ctrl_rhdr = kzalloc(sizeof(*dev->ctrl_rhdr), GFP_KERNEL);
	dev->ctrl_req = kzalloc(VRDMA_CMD_MAX, GFP_KERNEL);
	dev->ctrl_resp = kzalloc(VRDMA_CMD_MAX, GFP_KERNEL);
	dev->ev_bufs = kcalloc(VRDMA_EVENT_BUFS * VRDMA_EVENT_BUF_RECORDS,
			       sizeof(struct vrdma_event), GFP_KERNEL);
	if (!dev->ctrl_hdr || !dev->ctrl_rhdr || !dev->ctrl_req || !dev->ctrl_resp ||
	    !dev->ev_bufs) {
		vrdma_free(dev);
		return NULL;
	}
	return dev;
}

static void vrdma_free(struct vrdma_dev *dev)
{
	kfree(dev->ctrl_hdr);
	kfree(dev->ctrl_rhdr);
	kfree(dev->ctrl_req);
	kfree(dev->ctrl_resp);
	kfree(dev->ev_bufs);
	xa_destroy(&dev->cqs);
	xa_destroy(&dev->qps);
	ib_dealloc_device(&dev->ib);
}

static int vrdma_probe(struct virtio_device *vdev)
{
	struct vrdma_dev *dev;
	int ret;

	vrdma_abi_checks();
	dev = vrdma_alloc(vdev);
	if (!dev)
		return -ENOMEM;
	dev->atomic = virtio_has_feature(vdev, VRDMA_F_ATOMIC);
	dev->cm = virtio_has_feature(vdev, VRDMA_F_CM);
	dev->generation = virtio_cread32(vdev, offsetof(struct vrdma_config, generation));

	ret = vrdma_find_vqs(dev);
	if (ret)
		goto err_free;
	mutex_lock(&dev->ctrl_lock);
	ret = vrdma_query_attrs(dev);
	mutex_unlock(&dev->ctrl_lock);
	if (ret) {
		dev_err(&vdev->dev, "QUERY_DEVICE/QUERY_PORT failed: %d\n", ret);
		goto err_reset;
	}

	dev->ib.dev.parent = &vdev->dev;
	dev->ib.node_type = RDMA_NODE_IB_CA;
	dev->ib.phys_port_cnt = 1;
	dev->ib.num_comp_vectors = 1;
	dev->ib.node_guid = dev->attr.node_guid;
	strscpy(dev->ib.node_desc, "vrdma virtio-rdma", sizeof(dev->ib.node_desc));
	ib_set_device_ops(&dev->ib, &vrdma_dev_ops);
	/*
	 * These write() commands are enabled per device: librxe's doorbell is
	 * a POST_SEND with no WRs, and ibv_req_notify_cq is REQ_NOTIFY_CQ.
	 */
	dev->ib.uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
				   BIT_ULL(IB_USER_VERBS_CMD_POST_RECV) |
				   BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);

	ret = vrdma_cm_setup(dev);
	if (ret) {
		dev_err(&vdev->dev, "connection management set-up failed: %d\n", ret);
		goto err_reset;
	}
	/*
	 * No DMA device: the device takes guest-physical addresses and no
	 * IOMMU translates for it (no VIRTIO_F_ACCESS_PLATFORM), so user
	 * memory is never DMA-mapped (an IOVA would name another page, and a
	 * bounce buffer would hide the device's writes).  MR page lists come
	 * from the pages themselves (vrdma_verbs.c, vrdma_mr_pages).
	 */
	ret = ib_register_device(&dev->ib, "vrdma%d", NULL);
	if (ret) {
		dev_err(&vdev->dev, "ib_register_device failed: %d\n", ret);
		vrdma_cm_teardown(dev);
		goto err_reset;
	}
	dev->registered = true;
	WRITE_ONCE(dev->ready, true);
	dev_info(&vdev->dev, "%s: generation %08x, atomics %s, rdma_cm %s%s\n",
		 dev_name(&dev->ib.dev), dev->generation,
		 dev->atomic ? "on" : "off", dev->cm ? "on " : "off",
		 dev->ndev ? netdev_name(dev->ndev) : "");
	/* A new generation while probing went unheeded (not ready): look. */
	schedule_work(&dev->cfg_work);
	return 0;

err_reset:
	virtio_reset_device(vdev);
	cancel_work_sync(&dev->ev_work);
	cancel_work_sync(&dev->cfg_work);
	vdev->config->del_vqs(vdev);
err_free:
	vrdma_free(dev);
	return ret;
}

static void vrdma_remove(struct virtio_device *vdev)
{
	struct vrdma_dev *dev = vdev->priv;
	unsigned long flags;
	LIST_HEAD(released);

	dev->registered = false;
	cancel_work_sync(&dev->cfg_work);
	ib_unregister_device(&dev->ib);
	vrdma_cm_stop(dev);
	WRITE_ONCE(dev->removing, true);
	flush_work(&dev->loss_work);
	virtio_reset_device(vdev);
	cancel_work_sync(&dev->ev_work);
	cancel_work_sync(&dev->cfg_work);
	vrdma_cm_teardown(dev);
	spin_lock_irqsave(&dev->db_lock, flags);
	dev->db_off = true;
	spin_unlock_irqrestore(&dev->db_lock, flags);
	vrdma_db_drop_all(dev);
	vdev->config->del_vqs(vdev);
	/* The device is reset: what it might have written is free to go. */
	mutex_lock(&dev->orphan_lock);
	list_splice_init(&dev->orphans, &released);
	mutex_unlock(&dev->orphan_lock);
	vrdma_release_orphans(&released);
	vrdma_free(dev);
}

static void vrdma_cfg_work(struct work_struct *work)
{
	struct vrdma_dev *dev = container_of(work, struct vrdma_dev, cfg_work);
	u32 gen = virtio_cread32(dev->vdev, offsetof(struct vrdma_config, generation));

	/* Every handle is gone (spec section 9).  dev->generation changes
	 * only in loss_work, under ctrl_lock; a stale read here is harmless:
	 * at worst one more reset. */
	if (gen != READ_ONCE(dev->generation))
		vrdma_device_lost(dev, "the generation changed");
}

/* Called in interrupt context; ib_dispatch_event() may sleep. */
static void vrdma_config_changed(struct virtio_device *vdev)
{
	struct vrdma_dev *dev = vdev->priv;

	schedule_work(&dev->cfg_work);
}

static const struct virtio_device_id vrdma_id_table[] = {
	{ VIRTIO_ID_VRDMA, VIRTIO_DEV_ANY_ID },
	{ 0 },
};

static unsigned int vrdma_features[] = {
	VRDMA_F_ATOMIC,
	VRDMA_F_CM,
};

static struct virtio_driver vrdma_driver = {
	.driver.name = KBUILD_MODNAME,
	.driver.owner = THIS_MODULE,
	.feature_table = vrdma_features,
	.feature_table_size = ARRAY_SIZE(vrdma_features),
	.id_table = vrdma_id_table,
	.probe = vrdma_probe,
	.remove = vrdma_remove,
	.config_changed = vrdma_config_changed,
};

module_virtio_driver(vrdma_driver);
MODULE_DEVICE_TABLE(virtio, vrdma_id_table);
MODULE_DESCRIPTION("virtio-rdma guest driver (librxe-compatible)");
MODULE_LICENSE("GPL");

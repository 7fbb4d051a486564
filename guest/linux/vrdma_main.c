// SPDX-License-Identifier: GPL-2.0
/*
 * vrdma: guest driver for the virtio-rdma device (virtio device id 42).
 *
 * The device is specified in docs/virtio-rdma.md.  The driver registers an
 * ib_device with rxe's driver id and rxe's user ABI (rings mmapped through
 * the uverbs file, post_send as a doorbell), so that Debian's stock librxe
 * drives it from user space.  Only user-space (uverbs) objects are
 * supported: the device has no DMA MR, so kernel ULPs cannot use it.
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
#include <linux/log2.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/iter.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/rdma_user_rxe.h>
#include <uapi/rdma/ib_user_ioctl_verbs.h>

#include "vrdma.h"

/* ---------------- control queue ---------------- */

static void vrdma_ctrl_done(struct virtqueue *vq)
{
	struct vrdma_dev *dev = vq->vdev->priv;

	wake_up(&dev->ctrl_wait);
}

/* Adds a buffer (kmalloc or vmalloc memory) to an sg table, page by page. */
static int vrdma_sg_add(struct scatterlist *sgs, int *n, void *buf, size_t len)
{
	while (len) {
		size_t chunk;

		if (*n >= VRDMA_MAX_SEGS)
			return -E2BIG;
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
	return 0;
}

/*
 * Runs one control command: request = header + req (+ extra, e.g. a page
 * list), response = header + resp.  Returns 0, or a negative errno (the
 * device status negated).  req/resp/extra must not be on the stack.
 */
int vrdma_cmd(struct vrdma_dev *dev, u16 op, void *req, size_t req_len,
	      void *extra, size_t extra_len, void *resp, size_t resp_len)
{
	struct scatterlist *sgs;
	struct scatterlist **sgp;
	int nout = 0, nin = 0, ret, i;
	unsigned int len;
	void *token;

	sgs = kcalloc(VRDMA_MAX_SEGS + 2, sizeof(*sgs), GFP_KERNEL);
	sgp = kcalloc(VRDMA_MAX_SEGS + 2, sizeof(*sgp), GFP_KERNEL);
	if (!sgs || !sgp) {
		ret = -ENOMEM;
		goto out_free;
	}

	mutex_lock(&dev->ctrl_lock);
	memset(dev->ctrl_hdr, 0, sizeof(*dev->ctrl_hdr));
	dev->ctrl_hdr->opcode = cpu_to_le16(op);
	memset(dev->ctrl_rhdr, 0, sizeof(*dev->ctrl_rhdr));
	dev->ctrl_rhdr->status = cpu_to_le32(~0u);

	ret = vrdma_sg_add(sgs, &nout, dev->ctrl_hdr, sizeof(*dev->ctrl_hdr));
	if (!ret && req_len)
		ret = vrdma_sg_add(sgs, &nout, req, req_len);
	if (!ret && extra_len)
		ret = vrdma_sg_add(sgs, &nout, extra, extra_len);
	nin = nout;
	if (!ret)
		ret = vrdma_sg_add(sgs, &nin, dev->ctrl_rhdr,
				   sizeof(*dev->ctrl_rhdr));
	if (!ret && resp_len)
		ret = vrdma_sg_add(sgs, &nin, resp, resp_len);
	if (ret)
		goto out_unlock;
	nin -= nout;
	for (i = 0; i < nout + nin; i++)
		sgp[i] = &sgs[i];

	ret = virtqueue_add_sgs(dev->ctrl_vq, sgp, nout, nin, dev, GFP_KERNEL);
	if (ret) {
		dev_err(&dev->vdev->dev, "control queue add failed: %d\n", ret);
		goto out_unlock;
	}
	virtqueue_kick(dev->ctrl_vq);
	token = NULL;
	wait_event(dev->ctrl_wait,
		   (token = virtqueue_get_buf(dev->ctrl_vq, &len)) != NULL);
	if (len < sizeof(struct vrdma_resp_hdr)) {
		ret = -EIO;
		goto out_unlock;
	}
	ret = -(int)le32_to_cpu(dev->ctrl_rhdr->status);
	if (ret > 0 || ret < -4095)
		ret = -EIO;
	/* An empty CM event queue is the normal end of a drain. */
	if (ret && !(op == VRDMA_CMD_CM_GET_EVENT && ret == -ENOENT))
		dev_info_ratelimited(&dev->vdev->dev, "command %u failed: %d\n",
				     op, ret);
out_unlock:
	mutex_unlock(&dev->ctrl_lock);
out_free:
	kfree(sgp);
	kfree(sgs);
	return ret;
}

/* ---------------- doorbells ---------------- */

static void vrdma_db_reclaim(struct vrdma_dev *dev)
{
	unsigned int len;
	void *rec;

	while ((rec = virtqueue_get_buf(dev->db_vq, &len)) != NULL)
		kfree(rec);
}

static int vrdma_doorbell(struct vrdma_dev *dev, u32 handle, u16 type)
{
	struct vrdma_doorbell *db;
	struct scatterlist sg;
	unsigned long flags;
	int ret;

	db = kmalloc(sizeof(*db), GFP_ATOMIC);
	if (!db)
		return -ENOMEM;
	db->handle = cpu_to_le32(handle);
	db->type = cpu_to_le16(type);
	db->reserved = 0;
	sg_init_one(&sg, db, sizeof(*db));

	spin_lock_irqsave(&dev->db_lock, flags);
	vrdma_db_reclaim(dev);
	ret = virtqueue_add_outbuf(dev->db_vq, &sg, 1, db, GFP_ATOMIC);
	if (ret == -ENOSPC) {
		/* The device is behind: wait briefly for it to take buffers. */
		int tries;

		for (tries = 0; tries < 100000 && ret == -ENOSPC; tries++) {
			virtqueue_kick(dev->db_vq);
			cpu_relax();
			vrdma_db_reclaim(dev);
			ret = virtqueue_add_outbuf(dev->db_vq, &sg, 1, db,
						   GFP_ATOMIC);
		}
	}
	if (!ret)
		virtqueue_kick(dev->db_vq);
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

static void vrdma_handle_event(struct vrdma_dev *dev, struct vrdma_event *ev)
{
	u16 type = le16_to_cpu(ev->type);
	u32 handle = le32_to_cpu(ev->handle);
	struct ib_event ibev = {};
	struct vrdma_cq *cq;
	struct vrdma_qp *qp;

	switch (type) {
	case VRDMA_EV_CQ_COMP:
	case VRDMA_EV_CQ_ERR:
		xa_lock(&dev->cqs);
		cq = xa_load(&dev->cqs, handle);
		if (cq && type == VRDMA_EV_CQ_COMP) {
			if (cq->ibcq.comp_handler)
				cq->ibcq.comp_handler(&cq->ibcq,
						      cq->ibcq.cq_context);
		} else if (cq && cq->ibcq.event_handler) {
			ibev.device = &dev->ib;
			ibev.element.cq = &cq->ibcq;
			ibev.event = IB_EVENT_CQ_ERR;
			cq->ibcq.event_handler(&ibev, cq->ibcq.cq_context);
		}
		xa_unlock(&dev->cqs);
		break;
	case VRDMA_EV_QP_FATAL:
		xa_lock(&dev->qps);
		qp = xa_load(&dev->qps, handle);
		if (qp && qp->ibqp.event_handler) {
			ibev.device = &dev->ib;
			ibev.element.qp = &qp->ibqp;
			ibev.event = IB_EVENT_QP_FATAL;
			qp->ibqp.event_handler(&ibev, qp->ibqp.qp_context);
		}
		xa_unlock(&dev->qps);
		break;
	case VRDMA_EV_PORT_ACTIVE:
	case VRDMA_EV_PORT_ERR:
		if (!dev->registered)
			break;
		ibev.device = &dev->ib;
		ibev.element.port_num = 1;
		ibev.event = type == VRDMA_EV_PORT_ACTIVE ? IB_EVENT_PORT_ACTIVE :
							    IB_EVENT_PORT_ERR;
		ib_dispatch_event(&ibev);
		break;
	case VRDMA_EV_CM:
		vrdma_cm_event(dev);
		break;
	case VRDMA_EV_DEVICE_FATAL:
		dev_err(&dev->vdev->dev, "device fatal event\n");
		vrdma_cm_device_lost(dev);
		if (!dev->registered)
			break;
		ibev.device = &dev->ib;
		ibev.element.port_num = 1;
		ibev.event = IB_EVENT_DEVICE_FATAL;
		ib_dispatch_event(&ibev);
		break;
	default:
		dev_dbg(&dev->vdev->dev, "unknown event type %u\n", type);
	}
}

static void vrdma_ev_work(struct work_struct *work)
{
	struct vrdma_dev *dev = container_of(work, struct vrdma_dev, ev_work);
	struct vrdma_event *buf;
	unsigned int len, i;
	bool again;

	do {
		virtqueue_disable_cb(dev->ev_vq);
		while ((buf = virtqueue_get_buf(dev->ev_vq, &len)) != NULL) {
			for (i = 0; i < len / sizeof(*buf) &&
				    i < VRDMA_EVENT_BUF_RECORDS; i++)
				vrdma_handle_event(dev, &buf[i]);
			vrdma_post_event_buf(dev, (buf - dev->ev_bufs) /
							  VRDMA_EVENT_BUF_RECORDS);
		}
		virtqueue_kick(dev->ev_vq);
		again = !virtqueue_enable_cb(dev->ev_vq);
	} while (again);
}

/* ---------------- rings ---------------- */

static struct vrdma_ring *vrdma_ring_alloc(u32 log2_slots, u32 log2_slot_size)
{
	struct vrdma_ring *r;
	size_t bytes = VRDMA_RING_DATA + ((size_t)1 << (log2_slots + log2_slot_size));
	struct rxe_queue_buf *hdr;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return NULL;
	r->npages = DIV_ROUND_UP(bytes, VRDMA_RING_PAGE);
	r->size = PAGE_ALIGN(bytes);
	r->buf = vmalloc_user(r->size);
	if (!r->buf) {
		kfree(r);
		return NULL;
	}
	hdr = r->buf;
	hdr->log2_elem_size = log2_slot_size;
	hdr->index_mask = (1u << log2_slots) - 1;
	hdr->producer_index = 0;
	hdr->consumer_index = 0;
	return r;
}

static void vrdma_ring_free(struct vrdma_ring *r)
{
	if (!r)
		return;
	vfree(r->buf);
	kfree(r);
}

/* Drops the object's reference; the ring is freed once unmapped too. */
static void vrdma_ring_put(struct vrdma_ring *r)
{
	if (!r)
		return;
	if (r->inserted)
		rdma_user_mmap_entry_remove(&r->rdma_entry);
	else
		vrdma_ring_free(r);
}

static void vrdma_ring_pages(struct vrdma_ring *r, __le64 *out)
{
	u32 i;

	for (i = 0; i < r->npages; i++)
		out[i] = cpu_to_le64((u64)PFN_PHYS(vmalloc_to_pfn(
				r->buf + (size_t)i * VRDMA_RING_PAGE)));
}

static int vrdma_ring_publish(struct ib_ucontext *uctx, struct vrdma_ring *r,
			      struct mminfo *mi)
{
	int ret;

	ret = rdma_user_mmap_entry_insert(uctx, &r->rdma_entry, r->size);
	if (ret)
		return ret;
	r->inserted = true;
	mi->offset = rdma_user_mmap_get_offset(&r->rdma_entry);
	mi->size = r->size;
	mi->pad = 0;
	return 0;
}

static int vrdma_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *e;
	struct vrdma_ring *r;
	int ret;

	e = rdma_user_mmap_entry_get(uctx, vma);
	if (!e)
		return -EINVAL;
	r = container_of(e, struct vrdma_ring, rdma_entry);
	if (vma->vm_end - vma->vm_start > r->size)
		ret = -EINVAL;
	else
		ret = remap_vmalloc_range(vma, r->buf, 0);
	rdma_user_mmap_entry_put(e);
	return ret;
}

static void vrdma_mmap_free(struct rdma_user_mmap_entry *e)
{
	vrdma_ring_free(container_of(e, struct vrdma_ring, rdma_entry));
}

/* ---------------- device, port, gid ---------------- */

static int vrdma_query_device(struct ib_device *ib, struct ib_device_attr *a,
			      struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ib);
	struct vrdma_device_attr *d = &dev->attr;

	memset(a, 0, sizeof(*a));
	a->fw_ver = le64_to_cpu(d->fw_ver);
	a->sys_image_guid = d->sys_image_guid;
	a->max_mr_size = le64_to_cpu(d->max_mr_size);
	a->page_size_cap = le64_to_cpu(d->page_size_cap);
	a->vendor_id = le32_to_cpu(d->vendor_id);
	a->vendor_part_id = le32_to_cpu(d->vendor_part_id);
	a->hw_ver = le32_to_cpu(d->hw_ver);
	a->max_qp = le32_to_cpu(d->max_qp);
	a->max_qp_wr = le32_to_cpu(d->max_qp_wr);
	a->device_cap_flags = le32_to_cpu(d->device_cap_flags) &
			      IB_DEVICE_RC_RNR_NAK_GEN;
	a->max_send_sge = le32_to_cpu(d->max_send_sge);
	a->max_recv_sge = le32_to_cpu(d->max_recv_sge);
	a->max_sge_rd = a->max_send_sge;
	a->max_cq = le32_to_cpu(d->max_cq);
	a->max_cqe = le32_to_cpu(d->max_cqe);
	a->max_mr = le32_to_cpu(d->max_mr);
	a->max_pd = le32_to_cpu(d->max_pd);
	a->max_qp_rd_atom = le32_to_cpu(d->max_qp_rd_atom);
	a->max_qp_init_rd_atom = le32_to_cpu(d->max_qp_init_rd_atom);
	a->max_res_rd_atom = a->max_qp_rd_atom * a->max_qp;
	a->atomic_cap = dev->atomic && le32_to_cpu(d->atomic_cap) ?
				IB_ATOMIC_HCA : IB_ATOMIC_NONE;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	return 0;
}

static int vrdma_cmd_query_port(struct vrdma_dev *dev, struct vrdma_port_attr *out)
{
	struct vrdma_port_req *req;
	struct vrdma_port_attr *resp;
	int ret;

	req = kzalloc(sizeof(*req), GFP_KERNEL);
	resp = kzalloc(sizeof(*resp), GFP_KERNEL);
	if (!req || !resp) {
		ret = -ENOMEM;
		goto out;
	}
	req->port = 1;
	ret = vrdma_cmd(dev, VRDMA_CMD_QUERY_PORT, req, sizeof(*req), NULL, 0,
			resp, sizeof(*resp));
	if (!ret)
		*out = *resp;
out:
	kfree(req);
	kfree(resp);
	return ret;
}

static int vrdma_query_port(struct ib_device *ib, u32 port,
			    struct ib_port_attr *a)
{
	struct vrdma_dev *dev = to_vdev(ib);
	struct vrdma_port_attr p;
	int ret;

	ret = vrdma_cmd_query_port(dev, &p);
	if (ret)
		return ret;
	dev->port = p;
	/* The core zeroed *a. */
	a->state = le32_to_cpu(p.state);
	a->max_mtu = le32_to_cpu(p.max_mtu);
	a->active_mtu = le32_to_cpu(p.active_mtu);
	a->gid_tbl_len = le32_to_cpu(p.gid_tbl_len);
	if (dev->cm)
		a->gid_tbl_len = vrdma_cm_gid_index(dev) + 1;
	a->port_cap_flags = le32_to_cpu(p.port_cap_flags);
	a->max_msg_sz = le32_to_cpu(p.max_msg_sz);
	a->pkey_tbl_len = le16_to_cpu(p.pkey_tbl_len);
	a->active_width = p.active_width;
	a->active_speed = p.active_speed;
	a->phys_state = p.phys_state;
	a->lid = 0;
	a->sm_lid = 0;
	a->lmc = 0;
	a->max_vl_num = 1;
	a->bad_pkey_cntr = 0;
	a->qkey_viol_cntr = 0;
	a->ip_gids = false;
	return 0;
}

static enum rdma_link_layer vrdma_get_link_layer(struct ib_device *ib, u32 port)
{
	return IB_LINK_LAYER_ETHERNET;
}

static int vrdma_get_port_immutable(struct ib_device *ib, u32 port,
				    struct ib_port_immutable *im)
{
	struct vrdma_dev *dev = to_vdev(ib);

	im->pkey_tbl_len = le16_to_cpu(dev->port.pkey_tbl_len);
	im->gid_tbl_len = le32_to_cpu(dev->port.gid_tbl_len);
	/*
	 * The GID table is the host function's and comes from QUERY_GID.  The
	 * core manages RoCE GID tables from local netdevs only, so the port
	 * is declared with the IB protocol bit (no MAD, CM or SA): the core
	 * then fills its GID cache through query_gid, and the link layer is
	 * still reported as Ethernet.
	 */
	im->core_cap_flags = RDMA_CORE_CAP_PROT_IB;
	im->max_mad_size = 0;
	if (dev->cm) {
		/*
		 * With connection management (vrdma_cm.c) the port takes the
		 * iWARP CM: rdma_cm then leaves connections to the driver.
		 * The GID cache is still filled through query_gid, with one
		 * more entry: the MAC GID iWARP ports are found by.
		 */
		im->core_cap_flags = RDMA_CORE_CAP_PROT_IWARP | RDMA_CORE_CAP_IW_CM;
		im->gid_tbl_len = vrdma_cm_gid_index(dev) + 1;
	}
	return 0;
}

static int vrdma_query_pkey(struct ib_device *ib, u32 port, u16 index, u16 *pkey)
{
	if (index > 0)
		return -EINVAL;
	*pkey = 0xffff;
	return 0;
}

static int vrdma_query_gid(struct ib_device *ib, u32 port, int index,
			   union ib_gid *gid)
{
	struct vrdma_dev *dev = to_vdev(ib);
	struct vrdma_gid_req *req;
	struct vrdma_gid_resp *resp;
	int ret;

	if (dev->cm && index == vrdma_cm_gid_index(dev)) {
		vrdma_cm_mac_gid(dev, gid);
		return 0;
	}
	req = kzalloc(sizeof(*req), GFP_KERNEL);
	resp = kzalloc(sizeof(*resp), GFP_KERNEL);
	if (!req || !resp) {
		ret = -ENOMEM;
		goto out;
	}
	req->port = 1;
	req->index = cpu_to_le16(index);
	ret = vrdma_cmd(dev, VRDMA_CMD_QUERY_GID, req, sizeof(*req), NULL, 0,
			resp, sizeof(*resp));
	if (!ret)
		memcpy(gid->raw, resp->gid, sizeof(gid->raw));
out:
	kfree(req);
	kfree(resp);
	return ret;
}

struct vrdma_qp *vrdma_qp_by_num(struct vrdma_dev *dev, u32 qpn)
{
	struct vrdma_qp *qp;
	unsigned long i;

	xa_lock(&dev->qps);
	xa_for_each(&dev->qps, i, qp)
		if (qp->ibqp.qp_num == qpn && !qp->dying)
			break;
	xa_unlock(&dev->qps);
	return qp;
}

/* ---------------- ucontext, PD ---------------- */

static int vrdma_alloc_ucontext(struct ib_ucontext *uctx, struct ib_udata *udata)
{
	return 0;
}

static void vrdma_dealloc_ucontext(struct ib_ucontext *uctx)
{
}

int vrdma_handle_cmd(struct vrdma_dev *dev, u16 op, u32 handle)
{
	struct vrdma_handle *h;
	int ret;

	h = kzalloc(sizeof(*h), GFP_KERNEL);
	if (!h)
		return -ENOMEM;
	h->handle = cpu_to_le32(handle);
	ret = vrdma_cmd(dev, op, h, sizeof(*h), NULL, 0, NULL, 0);
	kfree(h);
	return ret;
}

static int vrdma_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibpd->device);
	struct vrdma_handle *resp;
	int ret;

	resp = kzalloc(sizeof(*resp), GFP_KERNEL);
	if (!resp)
		return -ENOMEM;
	ret = vrdma_cmd(dev, VRDMA_CMD_CREATE_PD, NULL, 0, NULL, 0, resp,
			sizeof(*resp));
	if (!ret)
		to_vpd(ibpd)->handle = le32_to_cpu(resp->handle);
	kfree(resp);
	return ret;
}

static int vrdma_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	return vrdma_handle_cmd(to_vdev(ibpd->device), VRDMA_CMD_DESTROY_PD,
				to_vpd(ibpd)->handle);
}

/* ---------------- MR ---------------- */

static struct ib_mr *vrdma_get_dma_mr(struct ib_pd *pd, int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static struct ib_mr *vrdma_reg_user_mr(struct ib_pd *ibpd, u64 start,
				       u64 length, u64 iova, int access,
				       struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibpd->device);
	struct vrdma_reg_mr_req *req = NULL;
	struct vrdma_reg_mr_resp *resp = NULL;
	struct ib_block_iter biter;
	unsigned long pgsz;
	__le64 *pages = NULL;
	struct vrdma_mr *mr;
	size_t npages, i = 0;
	int ret;

	/* Optional bits (relaxed ordering, ...) may be ignored; others not. */
	access &= ~IB_ACCESS_OPTIONAL;
	if (access & ~VRDMA_ACCESS_ALL)
		return ERR_PTR(-EOPNOTSUPP);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->umem = ib_umem_get(ibpd->device, start, length, access);
	if (IS_ERR(mr->umem)) {
		ret = PTR_ERR(mr->umem);
		goto err_free;
	}
	pgsz = ib_umem_find_best_pgsz(mr->umem, SZ_4K | SZ_2M, iova);
	if (!pgsz) {
		ret = -EINVAL;
		goto err_umem;
	}
	npages = ib_umem_num_dma_blocks(mr->umem, pgsz);
	pages = kvcalloc(npages, sizeof(*pages), GFP_KERNEL);
	req = kzalloc(sizeof(*req), GFP_KERNEL);
	resp = kzalloc(sizeof(*resp), GFP_KERNEL);
	if (!pages || !req || !resp) {
		ret = -ENOMEM;
		goto err_umem;
	}
	rdma_umem_for_each_dma_block(mr->umem, &biter, pgsz) {
		if (i >= npages)
			break;
		pages[i++] = cpu_to_le64(rdma_block_iter_dma_address(&biter));
	}
	req->pd = cpu_to_le32(to_vpd(ibpd)->handle);
	req->access = cpu_to_le32(access);
	req->iova = cpu_to_le64(iova);
	req->length = cpu_to_le64(length);
	req->page_shift = cpu_to_le32(ilog2(pgsz));
	req->npages = cpu_to_le32(npages);
	ret = vrdma_cmd(dev, VRDMA_CMD_REG_MR, req, sizeof(*req), pages,
			npages * sizeof(*pages), resp, sizeof(*resp));
	if (ret)
		goto err_umem;
	mr->handle = le32_to_cpu(resp->mr);
	mr->ibmr.lkey = le32_to_cpu(resp->lkey);
	mr->ibmr.rkey = le32_to_cpu(resp->rkey);
	mr->ibmr.iova = iova;
	mr->ibmr.length = length;
	kvfree(pages);
	kfree(req);
	kfree(resp);
	return &mr->ibmr;

err_umem:
	kvfree(pages);
	kfree(req);
	kfree(resp);
	ib_umem_release(mr->umem);
err_free:
	kfree(mr);
	return ERR_PTR(ret);
}

static int vrdma_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct vrdma_mr *mr = to_vmr(ibmr);
	int ret;

	ret = vrdma_handle_cmd(to_vdev(ibmr->device), VRDMA_CMD_DEREG_MR,
			       mr->handle);
	if (ret)
		return ret;
	ib_umem_release(mr->umem);
	kfree(mr);
	return 0;
}

/* ---------------- CQ ---------------- */

static int vrdma_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
			   struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibcq->device);
	struct vrdma_cq *cq = to_vcq(ibcq);
	struct vrdma_create_cq_req *req = NULL;
	struct vrdma_create_cq_resp *resp = NULL;
	struct rxe_create_cq_resp uresp = {};
	__le64 *pages = NULL;
	struct vrdma_ucontext *vuc;
	u32 log2_slots;
	int ret;

	if (!udata)
		return -EOPNOTSUPP; /* no kernel consumers (no DMA MR) */
	if (attr->flags || attr->comp_vector)
		return -EINVAL;
	if (attr->cqe < 1 || attr->cqe > le32_to_cpu(dev->attr.max_cqe))
		return -EINVAL;
	vuc = rdma_udata_to_drv_context(udata, struct vrdma_ucontext, ibuc);
	if (!vuc)
		return -EINVAL;

	log2_slots = order_base_2(attr->cqe + 1);
	cq->ring = vrdma_ring_alloc(log2_slots, VRDMA_CQE_SLOT_LOG2);
	if (!cq->ring)
		return -ENOMEM;
	req = kzalloc(sizeof(*req), GFP_KERNEL);
	resp = kzalloc(sizeof(*resp), GFP_KERNEL);
	pages = kvcalloc(cq->ring->npages, sizeof(*pages), GFP_KERNEL);
	if (!req || !resp || !pages) {
		ret = -ENOMEM;
		goto err;
	}
	vrdma_ring_pages(cq->ring, pages);
	req->log2_slots = cpu_to_le32(log2_slots);
	req->npages = cpu_to_le32(cq->ring->npages);
	ret = vrdma_cmd(dev, VRDMA_CMD_CREATE_CQ, req, sizeof(*req), pages,
			cq->ring->npages * sizeof(*pages), resp, sizeof(*resp));
	if (ret)
		goto err;
	cq->handle = le32_to_cpu(resp->cq);
	ibcq->cqe = le32_to_cpu(resp->cqe);
	ret = vrdma_ring_publish(&vuc->ibuc, cq->ring, &uresp.mi);
	if (ret)
		goto err_destroy;
	ret = ib_copy_to_udata(udata, &uresp, min(udata->outlen, sizeof(uresp)));
	if (ret)
		goto err_destroy;
	ret = xa_insert(&dev->cqs, cq->handle, cq, GFP_KERNEL);
	if (ret)
		goto err_destroy;
	kfree(req);
	kfree(resp);
	kvfree(pages);
	return 0;

err_destroy:
	vrdma_handle_cmd(dev, VRDMA_CMD_DESTROY_CQ, cq->handle);
err:
	kfree(req);
	kfree(resp);
	kvfree(pages);
	vrdma_ring_put(cq->ring);
	cq->ring = NULL;
	return ret;
}

/*
 * Destroys a device object and forgets its handle.  -ENOENT means the
 * device no longer has it (it was reset), which is as good as destroyed.
 */
static int vrdma_destroy_handle(struct vrdma_dev *dev, u16 cmd, u32 handle,
				struct xarray *handles)
{
	int ret = vrdma_handle_cmd(dev, cmd, handle);

	if (ret && ret != -ENOENT)
		return ret;
	xa_erase(handles, handle);
	return 0;
}

static int vrdma_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibcq->device);
	struct vrdma_cq *cq = to_vcq(ibcq);
	int ret;

	ret = vrdma_destroy_handle(dev, VRDMA_CMD_DESTROY_CQ, cq->handle, &dev->cqs);
	if (ret)
		return ret;
	vrdma_ring_put(cq->ring);
	cq->ring = NULL;
	return 0;
}

static int vrdma_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct vrdma_cq *cq = to_vcq(ibcq);
	u16 type = (flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED ?
			   VRDMA_DB_CQ_ARM_SOLICITED : VRDMA_DB_CQ_ARM;

	return vrdma_doorbell(to_vdev(ibcq->device), cq->handle, type);
}

static int vrdma_poll_cq(struct ib_cq *ibcq, int n, struct ib_wc *wc)
{
	return 0; /* user CQs only: librxe polls the ring itself */
}

/* ---------------- QP ---------------- */

static u32 vrdma_slot_log2(u32 bytes)
{
	u32 l = order_base_2(bytes);

	return max_t(u32, l, 6);
}

static int vrdma_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
			   struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibqp->device);
	struct vrdma_qp *qp = to_vqp(ibqp);
	struct vrdma_create_qp_req *req = NULL;
	struct vrdma_create_qp_resp *resp = NULL;
	struct rxe_create_qp_resp uresp = {};
	struct vrdma_ucontext *vuc;
	__le64 *pages = NULL;
	u32 ssge, rsge, inl, sq_l2, sq_sl2, rq_l2, rq_sl2, max_wr;
	int ret;

	if (!udata)
		return -EOPNOTSUPP;
	if (init->qp_type != IB_QPT_RC)
		return -EOPNOTSUPP;
	if (init->srq || init->create_flags)
		return -EOPNOTSUPP;
	vuc = rdma_udata_to_drv_context(udata, struct vrdma_ucontext, ibuc);
	if (!vuc)
		return -EINVAL;

	max_wr = le32_to_cpu(dev->attr.max_qp_wr);
	ssge = max_t(u32, init->cap.max_send_sge, 1);
	rsge = max_t(u32, init->cap.max_recv_sge, 1);
	inl = init->cap.max_inline_data;
	if (ssge > le32_to_cpu(dev->attr.max_send_sge) ||
	    rsge > le32_to_cpu(dev->attr.max_recv_sge) ||
	    inl > le32_to_cpu(dev->attr.max_inline_data) ||
	    init->cap.max_send_wr > max_wr || init->cap.max_recv_wr > max_wr)
		return -EINVAL;
	/* At least 8 slots: tiny rings gain nothing and librxe's fullness
	 * checks are least exercised there. */
	sq_l2 = max_t(u32, order_base_2(init->cap.max_send_wr + 1), 3);
	rq_l2 = max_t(u32, order_base_2(init->cap.max_recv_wr + 1), 3);
	sq_sl2 = vrdma_slot_log2(VRDMA_SWQE_BASE_SIZE +
				 max_t(u32, ssge * VRDMA_SGE_SIZE, inl));
	rq_sl2 = vrdma_slot_log2(VRDMA_RWQE_BASE_SIZE + rsge * VRDMA_SGE_SIZE);
	if (sq_sl2 > 12 || rq_sl2 > 12)
		return -EINVAL;
	/* Use the whole slot, as rxe does, within the device's limits. */
	qp->cap.max_send_sge = min_t(u32, ((1u << sq_sl2) - VRDMA_SWQE_BASE_SIZE) /
					  VRDMA_SGE_SIZE,
				     le32_to_cpu(dev->attr.max_send_sge));
	qp->cap.max_recv_sge = min_t(u32, ((1u << rq_sl2) - VRDMA_RWQE_BASE_SIZE) /
					  VRDMA_SGE_SIZE,
				     le32_to_cpu(dev->attr.max_recv_sge));
	qp->cap.max_inline_data = min_t(u32, (1u << sq_sl2) - VRDMA_SWQE_BASE_SIZE,
					le32_to_cpu(dev->attr.max_inline_data));

	qp->sq = vrdma_ring_alloc(sq_l2, sq_sl2);
	qp->rq = vrdma_ring_alloc(rq_l2, rq_sl2);
	req = kzalloc(sizeof(*req), GFP_KERNEL);
	resp = kzalloc(sizeof(*resp), GFP_KERNEL);
	if (!qp->sq || !qp->rq || !req || !resp) {
		ret = -ENOMEM;
		goto err;
	}
	pages = kvcalloc(qp->sq->npages + qp->rq->npages, sizeof(*pages),
			 GFP_KERNEL);
	if (!pages) {
		ret = -ENOMEM;
		goto err;
	}
	vrdma_ring_pages(qp->sq, pages);
	vrdma_ring_pages(qp->rq, pages + qp->sq->npages);
	qp->sq_sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;

	req->pd = cpu_to_le32(to_vpd(ibqp->pd)->handle);
	req->send_cq = cpu_to_le32(to_vcq(init->send_cq)->handle);
	req->recv_cq = cpu_to_le32(to_vcq(init->recv_cq)->handle);
	req->qp_type = VRDMA_QPT_RC;
	req->sq_sig_all = qp->sq_sig_all;
	req->max_send_sge = cpu_to_le32(qp->cap.max_send_sge);
	req->max_recv_sge = cpu_to_le32(qp->cap.max_recv_sge);
	req->max_inline_data = cpu_to_le32(qp->cap.max_inline_data);
	req->sq_log2_slots = cpu_to_le32(sq_l2);
	req->sq_log2_slot_size = cpu_to_le32(sq_sl2);
	req->rq_log2_slots = cpu_to_le32(rq_l2);
	req->rq_log2_slot_size = cpu_to_le32(rq_sl2);
	req->sq_npages = cpu_to_le32(qp->sq->npages);
	req->rq_npages = cpu_to_le32(qp->rq->npages);
	ret = vrdma_cmd(dev, VRDMA_CMD_CREATE_QP, req, sizeof(*req), pages,
			(qp->sq->npages + qp->rq->npages) * sizeof(*pages),
			resp, sizeof(*resp));
	if (ret)
		goto err;
	qp->handle = le32_to_cpu(resp->qp);
	ibqp->qp_num = le32_to_cpu(resp->qpn);
	qp->cap.max_send_wr = le32_to_cpu(resp->max_send_wr);
	qp->cap.max_recv_wr = le32_to_cpu(resp->max_recv_wr);
	qp->cap.max_send_sge = le32_to_cpu(resp->max_send_sge);
	qp->cap.max_recv_sge = le32_to_cpu(resp->max_recv_sge);
	qp->cap.max_inline_data = le32_to_cpu(resp->max_inline_data);
	init->cap = qp->cap;

	ret = vrdma_ring_publish(&vuc->ibuc, qp->rq, &uresp.rq_mi);
	if (!ret)
		ret = vrdma_ring_publish(&vuc->ibuc, qp->sq, &uresp.sq_mi);
	if (!ret)
		ret = ib_copy_to_udata(udata, &uresp,
				       min(udata->outlen, sizeof(uresp)));
	if (!ret)
		ret = xa_insert(&dev->qps, qp->handle, qp, GFP_KERNEL);
	if (ret) {
		vrdma_handle_cmd(dev, VRDMA_CMD_DESTROY_QP, qp->handle);
		goto err;
	}
	kfree(req);
	kfree(resp);
	kvfree(pages);
	return 0;

err:
	kfree(req);
	kfree(resp);
	kvfree(pages);
	vrdma_ring_put(qp->sq);
	vrdma_ring_put(qp->rq);
	qp->sq = qp->rq = NULL;
	return ret;
}

static int vrdma_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
			   int mask, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibqp->device);
	struct vrdma_qp *qp = to_vqp(ibqp);
	struct vrdma_modify_qp_req *req;
	struct vrdma_qp_attr *a;
	int ret;

	if (mask & ~VRDMA_QP_ATTR_SUPPORTED)
		return -EOPNOTSUPP;
	ret = vrdma_cm_modify_qp(dev, qp, attr, mask);
	if (ret)
		return ret < 0 ? ret : 0;
	req = kzalloc(sizeof(*req), GFP_KERNEL);
	if (!req)
		return -ENOMEM;
	a = &req->attr;
	req->qp = cpu_to_le32(qp->handle);
	req->attr_mask = cpu_to_le32(mask);
	if (mask & IB_QP_STATE)
		a->qp_state = cpu_to_le32(attr->qp_state);
	if (mask & IB_QP_CUR_STATE)
		a->cur_qp_state = cpu_to_le32(attr->cur_qp_state);
	if (mask & IB_QP_PATH_MTU)
		a->path_mtu = cpu_to_le32(attr->path_mtu);
	if (mask & IB_QP_RQ_PSN)
		a->rq_psn = cpu_to_le32(attr->rq_psn & 0xffffff);
	if (mask & IB_QP_SQ_PSN)
		a->sq_psn = cpu_to_le32(attr->sq_psn & 0xffffff);
	if (mask & IB_QP_DEST_QPN)
		a->dest_qp_num = cpu_to_le32(attr->dest_qp_num);
	if (mask & IB_QP_ACCESS_FLAGS)
		a->qp_access_flags = cpu_to_le32(attr->qp_access_flags);
	if (mask & IB_QP_PKEY_INDEX)
		a->pkey_index = cpu_to_le16(attr->pkey_index);
	if (mask & IB_QP_PORT)
		a->port_num = attr->port_num;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		a->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		a->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IB_QP_MIN_RNR_TIMER)
		a->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IB_QP_TIMEOUT)
		a->timeout = attr->timeout;
	if (mask & IB_QP_RETRY_CNT)
		a->retry_cnt = attr->retry_cnt;
	if (mask & IB_QP_RNR_RETRY)
		a->rnr_retry = attr->rnr_retry;
	if (mask & IB_QP_AV) {
		const struct ib_global_route *grh = rdma_ah_read_grh(&attr->ah_attr);

		if (!(rdma_ah_get_ah_flags(&attr->ah_attr) & IB_AH_GRH)) {
			kfree(req);
			return -EINVAL; /* RoCE always needs a GRH */
		}
		memcpy(a->ah.dgid, grh->dgid.raw, 16);
		a->ah.flow_label = cpu_to_le32(grh->flow_label);
		a->ah.sgid_index = grh->sgid_index;
		a->ah.hop_limit = grh->hop_limit;
		a->ah.traffic_class = grh->traffic_class;
		a->ah.sl = rdma_ah_get_sl(&attr->ah_attr);
	}
	ret = vrdma_cmd(dev, VRDMA_CMD_MODIFY_QP, req, sizeof(*req), NULL, 0,
			NULL, 0);
	kfree(req);
	if (!ret && (mask & IB_QP_STATE) && attr->qp_state == IB_QPS_RESET) {
		/*
		 * The device zeroed its positions and both consumer indices;
		 * the producer indices must be 0 too before the QP leaves
		 * RESET (spec 4.3, MODIFY_QP).
		 */
		struct rxe_queue_buf *sq = qp->sq->buf, *rq = qp->rq->buf;

		smp_store_release(&sq->producer_index, 0);
		smp_store_release(&rq->producer_index, 0);
	}
	return ret;
}

static int vrdma_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
			  int mask, struct ib_qp_init_attr *init)
{
	struct vrdma_dev *dev = to_vdev(ibqp->device);
	struct vrdma_qp *qp = to_vqp(ibqp);
	struct vrdma_handle *h;
	struct vrdma_qp_attr *a;
	int ret;

	h = kzalloc(sizeof(*h), GFP_KERNEL);
	a = kzalloc(sizeof(*a), GFP_KERNEL);
	if (!h || !a) {
		ret = -ENOMEM;
		goto out;
	}
	h->handle = cpu_to_le32(qp->handle);
	ret = vrdma_cmd(dev, VRDMA_CMD_QUERY_QP, h, sizeof(*h), NULL, 0, a,
			sizeof(*a));
	if (ret)
		goto out;
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = le32_to_cpu(a->qp_state);
	attr->cur_qp_state = le32_to_cpu(a->cur_qp_state);
	attr->path_mtu = le32_to_cpu(a->path_mtu);
	attr->path_mig_state = IB_MIG_MIGRATED;
	attr->qkey = le32_to_cpu(a->qkey);
	attr->rq_psn = le32_to_cpu(a->rq_psn);
	attr->sq_psn = le32_to_cpu(a->sq_psn);
	attr->dest_qp_num = le32_to_cpu(a->dest_qp_num);
	attr->qp_access_flags = le32_to_cpu(a->qp_access_flags);
	attr->pkey_index = le16_to_cpu(a->pkey_index);
	attr->port_num = a->port_num;
	attr->max_rd_atomic = a->max_rd_atomic;
	attr->max_dest_rd_atomic = a->max_dest_rd_atomic;
	attr->min_rnr_timer = a->min_rnr_timer;
	attr->timeout = a->timeout;
	attr->retry_cnt = a->retry_cnt;
	attr->rnr_retry = a->rnr_retry;
	attr->cap = qp->cap;
	attr->ah_attr.type = rdma_ah_find_type(ibqp->device, 1);
	rdma_ah_set_port_num(&attr->ah_attr, 1);
	rdma_ah_set_sl(&attr->ah_attr, a->ah.sl);
	rdma_ah_set_grh(&attr->ah_attr, NULL, le32_to_cpu(a->ah.flow_label),
			a->ah.sgid_index, a->ah.hop_limit, a->ah.traffic_class);
	rdma_ah_set_dgid_raw(&attr->ah_attr, a->ah.dgid);

	memset(init, 0, sizeof(*init));
	init->qp_type = IB_QPT_RC;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->cap = qp->cap;
	init->sq_sig_type = qp->sq_sig_all ? IB_SIGNAL_ALL_WR : IB_SIGNAL_REQ_WR;
out:
	kfree(h);
	kfree(a);
	return ret;
}

static int vrdma_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibqp->device);
	struct vrdma_qp *qp = to_vqp(ibqp);
	int ret;

	vrdma_cm_qp_destroy(dev, qp);
	ret = vrdma_destroy_handle(dev, VRDMA_CMD_DESTROY_QP, qp->handle, &dev->qps);
	if (ret)
		return ret;
	vrdma_ring_put(qp->sq);
	vrdma_ring_put(qp->rq);
	qp->sq = qp->rq = NULL;
	return 0;
}

static int vrdma_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
			   const struct ib_send_wr **bad)
{
	struct vrdma_qp *qp = to_vqp(ibqp);
	int ret;

	/* librxe writes the WQEs and calls post_send with none: a doorbell. */
	if (wr) {
		*bad = wr;
		return -EOPNOTSUPP;
	}
	ret = vrdma_doorbell(to_vdev(ibqp->device), qp->handle, VRDMA_DB_SQ);
	if (ret)
		dev_info_ratelimited(&ibqp->device->dev, "SQ doorbell failed: %d\n",
				     ret);
	return ret;
}

static int vrdma_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
			   const struct ib_recv_wr **bad)
{
	struct vrdma_qp *qp = to_vqp(ibqp);

	if (wr) {
		*bad = wr;
		return -EOPNOTSUPP;
	}
	return vrdma_doorbell(to_vdev(ibqp->device), qp->handle, VRDMA_DB_RQ);
}

static const struct ib_device_ops vrdma_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_RXE,
	.uverbs_abi_ver = 2, /* rxe's ABI; librxe accepts 1 and 2 */

	.alloc_pd = vrdma_alloc_pd,
	.alloc_ucontext = vrdma_alloc_ucontext,
	.create_cq = vrdma_create_cq,
	.create_qp = vrdma_create_qp,
	.dealloc_pd = vrdma_dealloc_pd,
	.dealloc_ucontext = vrdma_dealloc_ucontext,
	.dereg_mr = vrdma_dereg_mr,
	.destroy_cq = vrdma_destroy_cq,
	.destroy_qp = vrdma_destroy_qp,
	.get_dma_mr = vrdma_get_dma_mr,
	.get_link_layer = vrdma_get_link_layer,
	.get_port_immutable = vrdma_get_port_immutable,
	.mmap = vrdma_mmap,
	.mmap_free = vrdma_mmap_free,
	.modify_qp = vrdma_modify_qp,
	.poll_cq = vrdma_poll_cq,
	.post_recv = vrdma_post_recv,
	.post_send = vrdma_post_send,
	.query_device = vrdma_query_device,
	.query_gid = vrdma_query_gid,
	.query_pkey = vrdma_query_pkey,
	.query_port = vrdma_query_port,
	.query_qp = vrdma_query_qp,
	.reg_user_mr = vrdma_reg_user_mr,
	.req_notify_cq = vrdma_req_notify_cq,

	INIT_RDMA_OBJ_SIZE(ib_cq, vrdma_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_pd, vrdma_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, vrdma_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, vrdma_ucontext, ibuc),
};

/* ---------------- virtio probe/remove ---------------- */

static void vrdma_cfg_work(struct work_struct *work);

static int vrdma_probe(struct virtio_device *vdev)
{
	static const char * const names[] = { "control", "doorbell", "event" };
	vq_callback_t *cbs[] = { vrdma_ctrl_done, NULL, vrdma_ev_done };
	struct virtqueue *vqs[VRDMA_NUM_VQS];
	struct vrdma_device_attr *attr;
	struct vrdma_dev *dev;
	int ret, i;

	vrdma_abi_checks();

	dev = ib_alloc_device(vrdma_dev, ib);
	if (!dev)
		return -ENOMEM;
	dev->vdev = vdev;
	vdev->priv = dev;
	mutex_init(&dev->ctrl_lock);
	init_waitqueue_head(&dev->ctrl_wait);
	spin_lock_init(&dev->db_lock);
	INIT_WORK(&dev->ev_work, vrdma_ev_work);
	INIT_WORK(&dev->cfg_work, vrdma_cfg_work);
	xa_init(&dev->cqs);
	xa_init(&dev->qps);
	dev->atomic = virtio_has_feature(vdev, VRDMA_F_ATOMIC);
	dev->cm = virtio_has_feature(vdev, VRDMA_F_CM);
	dev->generation = virtio_cread32(vdev, offsetof(struct vrdma_config,
							generation));

	dev->ctrl_hdr = kzalloc(sizeof(*dev->ctrl_hdr), GFP_KERNEL);
	dev->ctrl_rhdr = kzalloc(sizeof(*dev->ctrl_rhdr), GFP_KERNEL);
	dev->ev_bufs = kcalloc(VRDMA_EVENT_BUFS * VRDMA_EVENT_BUF_RECORDS,
			       sizeof(struct vrdma_event), GFP_KERNEL);
	if (!dev->ctrl_hdr || !dev->ctrl_rhdr || !dev->ev_bufs) {
		ret = -ENOMEM;
		goto err_free;
	}

	ret = virtio_find_vqs(vdev, VRDMA_NUM_VQS, vqs, cbs, names, NULL);
	if (ret)
		goto err_free;
	dev->ctrl_vq = vqs[VRDMA_VQ_CTRL];
	dev->db_vq = vqs[VRDMA_VQ_DOORBELL];
	dev->ev_vq = vqs[VRDMA_VQ_EVENT];
	virtio_device_ready(vdev);

	for (i = 0; i < VRDMA_EVENT_BUFS; i++) {
		ret = vrdma_post_event_buf(dev, i);
		if (ret)
			break;
	}
	virtqueue_kick(dev->ev_vq);

	attr = kzalloc(sizeof(*attr), GFP_KERNEL);
	if (!attr) {
		ret = -ENOMEM;
		goto err_reset;
	}
	ret = vrdma_cmd(dev, VRDMA_CMD_QUERY_DEVICE, NULL, 0, NULL, 0, attr,
			sizeof(*attr));
	if (!ret)
		dev->attr = *attr;
	kfree(attr);
	if (ret) {
		dev_err(&vdev->dev, "QUERY_DEVICE failed: %d\n", ret);
		goto err_reset;
	}
	ret = vrdma_cmd_query_port(dev, &dev->port);
	if (ret) {
		dev_err(&vdev->dev, "QUERY_PORT failed: %d\n", ret);
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
	ret = ib_register_device(&dev->ib, "vrdma%d", vdev->dev.parent);
	if (ret) {
		dev_err(&vdev->dev, "ib_register_device failed: %d\n", ret);
		vrdma_cm_teardown(dev);
		goto err_reset;
	}
	dev->registered = true;
	dev_info(&vdev->dev, "%s: generation %08x, atomics %s, rdma_cm %s%s\n",
		 dev_name(&dev->ib.dev), dev->generation,
		 dev->atomic ? "on" : "off", dev->cm ? "on " : "off",
		 dev->ndev ? netdev_name(dev->ndev) : "");
	return 0;

err_reset:
	virtio_reset_device(vdev);
	cancel_work_sync(&dev->ev_work);
	cancel_work_sync(&dev->cfg_work);
	vdev->config->del_vqs(vdev);
err_free:
	kfree(dev->ctrl_hdr);
	kfree(dev->ctrl_rhdr);
	kfree(dev->ev_bufs);
	ib_dealloc_device(&dev->ib);
	return ret;
}

static void vrdma_remove(struct virtio_device *vdev)
{
	struct vrdma_dev *dev = vdev->priv;
	unsigned long flags;

	dev->registered = false;
	cancel_work_sync(&dev->cfg_work);
	ib_unregister_device(&dev->ib);
	vrdma_cm_stop(dev);
	virtio_reset_device(vdev);
	cancel_work_sync(&dev->ev_work);
	cancel_work_sync(&dev->cfg_work);
	vrdma_cm_teardown(dev);
	spin_lock_irqsave(&dev->db_lock, flags);
	vrdma_db_reclaim(dev);
	spin_unlock_irqrestore(&dev->db_lock, flags);
	vdev->config->del_vqs(vdev);
	kfree(dev->ctrl_hdr);
	kfree(dev->ctrl_rhdr);
	kfree(dev->ev_bufs);
	xa_destroy(&dev->cqs);
	xa_destroy(&dev->qps);
	ib_dealloc_device(&dev->ib);
}

static void vrdma_cfg_work(struct work_struct *work)
{
	struct vrdma_dev *dev = container_of(work, struct vrdma_dev, cfg_work);
	struct virtio_device *vdev = dev->vdev;
	u32 gen = virtio_cread32(vdev, offsetof(struct vrdma_config, generation));

	if (gen != dev->generation) {
		struct ib_event ibev = {
			.device = &dev->ib,
			.element.port_num = 1,
			.event = IB_EVENT_DEVICE_FATAL,
		};

		/* Every handle is gone (spec section 9). */
		dev_err(&vdev->dev, "generation changed %08x -> %08x\n",
			dev->generation, gen);
		dev->generation = gen;
		vrdma_cm_device_lost(dev);
		if (dev->registered)
			ib_dispatch_event(&ibev);
	}
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

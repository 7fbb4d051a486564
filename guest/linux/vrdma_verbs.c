// SPDX-License-Identifier: GPL-2.0
/*
 * vrdma: the verbs, on the device's control commands.
 *
 * The ib_device speaks rxe's user ABI (driver id RDMA_DRIVER_RXE, rings
 * with rxe's queue header mapped through the uverbs file, post_send as a
 * doorbell), so that Debian's stock librxe drives it.  Only user-space
 * (uverbs) objects are supported: the device has no DMA MR, so kernel
 * ULPs cannot use it.
 *
 * Every response is checked (vrdma_resp.c) before a field of it is used.
 * Every object remembers the epoch it was created in (vrdma_main.c):
 * after a device loss, commands on it fail with -EIO and its destroy only
 * frees memory.  Destroys always succeed: the RDMA core can do nothing
 * with a failed one but leak it and warn.  A ring or an MR's pages are
 * freed only once the device can no longer use them: after a destroy it
 * confirmed, or after a reset (vrdma_release_after_device).
 */
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/rdma_user_rxe.h>

#include "vrdma.h"

/* What a verb returns for a command on an object lost with the device. */
static int vrdma_user_err(int ret)
{
	return ret == -ESTALE ? -EIO : ret;
}

/*
 * After a destroy command: whether the device confirmed it.  Any other
 * answer than "lost with the device" means that the device and the driver
 * no longer agree on what exists, and the device is reset.
 */
static bool vrdma_destroy_confirmed(struct vrdma_dev *dev, int ret)
{
	if (!ret)
		return true;
	if (ret != -ESTALE)
		vrdma_device_lost(dev, "a destroy failed");
	return false;
}

/*
 * A create whose response failed its check: destroy what the device made.
 * Without a handle to name it by, the device must be reset.  Whether the
 * device confirmed the destroy.
 */
static bool vrdma_undo_create(struct vrdma_dev *dev, u16 destroy_op, u32 handle, u32 epoch)
{
	if (!handle) {
		vrdma_device_lost(dev, "a create answered without a handle");
		return false;
	}
	return vrdma_destroy_confirmed(dev, vrdma_handle_cmd(dev, destroy_op, handle, epoch));
}

/* ---------------- rings ---------------- */

static void vrdma_ring_free(struct kref *ref)
{
	struct vrdma_ring *r = container_of(ref, struct vrdma_ring, ref);

	vfree(r->buf);
	kfree(r);
}

static void vrdma_ring_release(struct vrdma_orphan *o)
{
	kref_put(&container_of(o, struct vrdma_ring, orphan)->ref, vrdma_ring_free);
}

static struct vrdma_ring *vrdma_ring_alloc(u32 log2_slots, u32 log2_slot_size)
{
	size_t bytes = VRDMA_RING_DATA + ((size_t)1 << (log2_slots + log2_slot_size));
	struct rxe_queue_buf *hdr;
	struct vrdma_ring *r;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return NULL;
	kref_init(&r->ref);
	r->orphan.release = vrdma_ring_release;
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

/*
 * The object lets go of its ring: user space can map it no more, and the
 * memory goes once no mapping is left and the device cannot write it.
 */
static void vrdma_ring_drop(struct vrdma_dev *dev, struct vrdma_ring *r, u32 epoch,
			    bool confirmed)
{
	if (!r)
		return;
	if (r->inserted) {
		r->inserted = false;
		rdma_user_mmap_entry_remove(&r->rdma_entry);
	}
	vrdma_release_after_device(dev, &r->orphan, epoch, confirmed);
}

/* Guest-physical addresses of the ring's pages (vmalloc memory). */
static void vrdma_ring_pages(struct vrdma_ring *r, __le64 *out)
{
	u32 i;

	for (i = 0; i < r->npages; i++)
		out[i] = cpu_to_le64((u64)PFN_PHYS(vmalloc_to_pfn(r->buf +
								  (size_t)i * VRDMA_RING_PAGE)));
}

static int vrdma_ring_publish(struct ib_ucontext *uctx, struct vrdma_ring *r,
			      struct mminfo *mi)
{
	int ret;

	ret = rdma_user_mmap_entry_insert(uctx, &r->rdma_entry, r->size);
	if (ret)
		return ret;
	kref_get(&r->ref); /* the entry's, dropped in vrdma_mmap_free */
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
	kref_put(&container_of(e, struct vrdma_ring, rdma_entry)->ref, vrdma_ring_free);
}

/* ---------------- device, port, gid ---------------- */

static int vrdma_query_device(struct ib_device *ib, struct ib_device_attr *a,
			      struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ib);
	struct vrdma_device_attr *d = &dev->attr; /* checked */

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
	a->device_cap_flags = le32_to_cpu(d->device_cap_flags) & IB_DEVICE_RC_RNR_NAK_GEN;
	a->max_send_sge = le32_to_cpu(d->max_send_sge);
	a->max_recv_sge = le32_to_cpu(d->max_recv_sge);
	a->max_sge_rd = a->max_send_sge;
	a->max_cq = le32_to_cpu(d->max_cq);
	a->max_cqe = le32_to_cpu(d->max_cqe);
	a->max_mr = le32_to_cpu(d->max_mr);
	a->max_pd = le32_to_cpu(d->max_pd);
	a->max_qp_rd_atom = le32_to_cpu(d->max_qp_rd_atom);
	a->max_qp_init_rd_atom = le32_to_cpu(d->max_qp_init_rd_atom);
	a->max_res_rd_atom = min_t(u64, (u64)a->max_qp_rd_atom * a->max_qp, INT_MAX);
	a->atomic_cap = dev->atomic && le32_to_cpu(d->atomic_cap) ? IB_ATOMIC_HCA :
								     IB_ATOMIC_NONE;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	return 0;
}

static int vrdma_query_port(struct ib_device *ib, u32 port, struct ib_port_attr *a)
{
	struct vrdma_dev *dev = to_vdev(ib);
	struct vrdma_port_req req = { .port = 1 };
	struct vrdma_port_attr p;
	struct vrdma_call c = { .op = VRDMA_CMD_QUERY_PORT, .req = &req,
				.req_len = sizeof(req), .resp = &p, .resp_len = sizeof(p) };
	const char *what;
	int ret;

	ret = vrdma_cmd(dev, &c);
	if (ret)
		return vrdma_user_err(ret);
	what = vrdma_check_port_attr(&p);
	if (what) {
		vrdma_bad_response(dev, c.op, what);
		return -EIO;
	}
	/* The core zeroed *a.  The table lengths are those of the probe. */
	a->state = le32_to_cpu(p.state);
	a->max_mtu = le32_to_cpu(p.max_mtu);
	a->active_mtu = le32_to_cpu(p.active_mtu);
	a->gid_tbl_len = le32_to_cpu(dev->port.gid_tbl_len);
	if (dev->cm)
		a->gid_tbl_len = vrdma_cm_gid_index(dev) + 1;
	a->max_msg_sz = le32_to_cpu(p.max_msg_sz);
	a->pkey_tbl_len = le16_to_cpu(dev->port.pkey_tbl_len);
	a->active_width = p.active_width;
	a->active_speed = p.active_speed;
	a->phys_state = p.phys_state;
	a->max_vl_num = 1;
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

static int vrdma_query_gid(struct ib_device *ib, u32 port, int index, union ib_gid *gid)
{
	struct vrdma_dev *dev = to_vdev(ib);
	struct vrdma_gid_req req = { .port = 1, .index = cpu_to_le16(index) };
	struct vrdma_gid_resp r;
	struct vrdma_call c = { .op = VRDMA_CMD_QUERY_GID, .req = &req,
				.req_len = sizeof(req), .resp = &r, .resp_len = sizeof(r) };
	const char *what;
	int ret;

	if (dev->cm && index == vrdma_cm_gid_index(dev)) {
		vrdma_cm_mac_gid(dev, gid);
		return 0;
	}
	if (index < 0 || index >= le32_to_cpu(dev->port.gid_tbl_len))
		return -EINVAL;
	ret = vrdma_cmd(dev, &c);
	if (ret)
		return vrdma_user_err(ret);
	what = vrdma_check_gid(&r);
	if (what) {
		vrdma_bad_response(dev, c.op, what);
		return -EIO;
	}
	memcpy(gid->raw, r.gid, sizeof(gid->raw));
	return 0;
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

static int vrdma_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibpd->device);
	struct vrdma_pd *pd = to_vpd(ibpd);
	struct vrdma_handle h;
	struct vrdma_call c = { .op = VRDMA_CMD_CREATE_PD, .resp = &h, .resp_len = sizeof(h) };
	int ret;

	ret = vrdma_cmd(dev, &c);
	if (ret)
		return vrdma_user_err(ret);
	if (!h.handle) {
		vrdma_bad_response(dev, c.op, "PD handle 0");
		vrdma_undo_create(dev, VRDMA_CMD_DESTROY_PD, 0, c.ret_epoch);
		return -EIO;
	}
	pd->handle = le32_to_cpu(h.handle);
	pd->epoch = c.ret_epoch;
	return 0;
}

static int vrdma_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibpd->device);
	struct vrdma_pd *pd = to_vpd(ibpd);

	/* Nothing of the guest's memory hangs on a PD. */
	vrdma_destroy_confirmed(dev, vrdma_handle_cmd(dev, VRDMA_CMD_DESTROY_PD, pd->handle,
						      pd->epoch));
	return 0;
}

/* ---------------- MR ---------------- */

static struct ib_mr *vrdma_get_dma_mr(struct ib_pd *pd, int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static void vrdma_mr_release(struct vrdma_orphan *o)
{
	struct vrdma_mr *mr = container_of(o, struct vrdma_mr, orphan);

	ib_umem_release(mr->umem);
	kfree(mr);
}

/* Guest-physical address of every 4 KiB of the MR's pages, in order. */
static int vrdma_mr_phys_4k(struct ib_umem *umem, u64 *phys, size_t n)
{
	size_t skip = (umem->address & ~PAGE_MASK) / SZ_4K, i = 0;
	struct scatterlist *sg;
	unsigned int k;
	u32 off;

	for_each_sgtable_sg(&umem->sgt_append.sgt, sg, k) {
		u64 base = page_to_phys(sg_page(sg)) + sg->offset;

		if ((sg->offset | sg->length) & (SZ_4K - 1))
			return -EINVAL;
		for (off = 0; off < sg->length && i < n; off += SZ_4K) {
			if (skip) {
				skip--;
				continue;
			}
			phys[i++] = base + off;
		}
	}
	return i == n ? 0 : -EFAULT;
}

/*
 * Whether 2 MiB pages can describe the MR: every 4 KiB of it sits at the
 * same offset in a 2 MiB guest-physical page as in a 2 MiB page of the
 * MR's iova space, and the 4 KiB pages of one 2 MiB page are contiguous.
 */
static bool vrdma_mr_fits_2m(const u64 *phys, size_t n, u64 iova)
{
	u64 va = iova & ~(u64)(SZ_4K - 1);
	size_t i;

	for (i = 0; i < n; i++, va += SZ_4K) {
		if ((phys[i] ^ va) & (SZ_2M - 1))
			return false;
		if (i && (va & (SZ_2M - 1)) && phys[i] != phys[i - 1] + SZ_4K)
			return false;
	}
	return true;
}

/*
 * REG_MR's page list: the guest-physical address of every P-byte page of
 * the MR, with P = 2 MiB where that describes it in fewer pages (and the
 * device takes 2 MiB pages), else 4 KiB.
 *
 * The device takes guest-physical addresses (spec 2.1): it has no IOMMU
 * and does not negotiate VIRTIO_F_ACCESS_PLATFORM, so a guest IOMMU does
 * not translate for it.  The addresses therefore come from the pinned
 * pages themselves, never from a DMA mapping: under an IOMMU (intel-iommu,
 * virtio-iommu) a DMA address is an IOVA, which the device would take for
 * another guest page, kernel memory included.
 */
static int vrdma_mr_pages(struct vrdma_dev *dev, struct ib_umem *umem, u64 iova,
			  __le64 **ret_pages, u32 *ret_npages, u32 *ret_shift)
{
	u64 len = umem->length, va;
	size_t n4k, n2m, i, j;
	__le64 *pages;
	u64 *phys;
	int ret;

	/* A 4 KiB page must hold the same bytes in both address spaces. */
	if ((iova ^ umem->address) & (SZ_4K - 1))
		return -EINVAL;
	if (!len || len > le64_to_cpu(dev->attr.max_mr_size) || iova + len < iova)
		return -EINVAL;
	n4k = DIV_ROUND_UP((iova & (SZ_4K - 1)) + len, SZ_4K);
	n2m = DIV_ROUND_UP((iova & (SZ_2M - 1)) + len, SZ_2M);
	phys = kvcalloc(n4k, sizeof(*phys), GFP_KERNEL);
	if (!phys)
		return -ENOMEM;
	ret = vrdma_mr_phys_4k(umem, phys, n4k);
	if (ret)
		goto out;
	if (!(le64_to_cpu(dev->attr.page_size_cap) & SZ_2M) || n2m >= n4k ||
	    !vrdma_mr_fits_2m(phys, n4k, iova))
		n2m = 0;
	pages = kvcalloc(n2m ?: n4k, sizeof(*pages), GFP_KERNEL);
	if (!pages) {
		ret = -ENOMEM;
		goto out;
	}
	if (n2m) {
		/* The first 4 KiB page of each 2 MiB one gives its start. */
		va = iova & ~(u64)(SZ_4K - 1);
		for (i = 0, j = 0; i < n4k; i++, va += SZ_4K)
			if (!i || !(va & (SZ_2M - 1)))
				pages[j++] = cpu_to_le64(phys[i] - (va & (SZ_2M - 1)));
		*ret_shift = 21;
	} else {
		for (i = 0; i < n4k; i++)
			pages[i] = cpu_to_le64(phys[i]);
		*ret_shift = 12;
	}
	*ret_pages = pages;
	*ret_npages = n2m ?: n4k;
out:
	kvfree(phys);
	return ret;
}

static struct ib_mr *vrdma_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length, u64 iova,
				       int access, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibpd->device);
	struct vrdma_pd *pd = to_vpd(ibpd);
	struct vrdma_reg_mr_req req = {};
	struct vrdma_reg_mr_resp r;
	struct vrdma_call c = { .op = VRDMA_CMD_REG_MR, .epoch = pd->epoch, .req = &req,
				.req_len = sizeof(req), .resp = &r, .resp_len = sizeof(r) };
	__le64 *pages = NULL;
	struct vrdma_mr *mr;
	u32 npages, shift;
	const char *what;
	int ret;

	/* Optional bits (relaxed ordering, ...) may be ignored; others not. */
	access &= ~IB_ACCESS_OPTIONAL;
	if (access & ~VRDMA_ACCESS_ALL)
		return ERR_PTR(-EOPNOTSUPP);
	if (vrdma_lost(dev, pd->epoch))
		return ERR_PTR(-EIO);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->orphan.release = vrdma_mr_release;
	mr->umem = ib_umem_get(ibpd->device, start, length, access);
	if (IS_ERR(mr->umem)) {
		ret = PTR_ERR(mr->umem);
		kfree(mr);
		return ERR_PTR(ret);
	}
	ret = vrdma_mr_pages(dev, mr->umem, iova, &pages, &npages, &shift);
	if (ret) {
		vrdma_mr_release(&mr->orphan);
		return ERR_PTR(ret);
	}
	req.pd = cpu_to_le32(pd->handle);
	req.access = cpu_to_le32(access);
	req.iova = cpu_to_le64(iova);
	req.length = cpu_to_le64(length);
	req.page_shift = cpu_to_le32(shift);
	req.npages = cpu_to_le32(npages);
	c.pages = pages;
	c.pages_len = (size_t)npages * sizeof(*pages);
	ret = vrdma_cmd(dev, &c);
	kvfree(pages);
	if (ret) {
		/* Refused: nothing registered.  Reset under it: released once
		 * the reset is through. */
		vrdma_release_after_device(dev, &mr->orphan, c.ret_epoch, ret != -ESTALE);
		return ERR_PTR(vrdma_user_err(ret));
	}
	what = vrdma_check_reg_mr(&r, access);
	if (what) {
		vrdma_bad_response(dev, c.op, what);
		vrdma_release_after_device(dev, &mr->orphan, c.ret_epoch,
					   vrdma_undo_create(dev, VRDMA_CMD_DEREG_MR,
							     le32_to_cpu(r.mr), c.ret_epoch));
		return ERR_PTR(-EIO);
	}
	mr->handle = le32_to_cpu(r.mr);
	mr->epoch = c.ret_epoch;
	mr->ibmr.lkey = le32_to_cpu(r.lkey);
	mr->ibmr.rkey = le32_to_cpu(r.rkey);
	mr->ibmr.iova = iova;
	mr->ibmr.length = length;
	return &mr->ibmr;
}

static int vrdma_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibmr->device);
	struct vrdma_mr *mr = to_vmr(ibmr);
	int ret = vrdma_handle_cmd(dev, VRDMA_CMD_DEREG_MR, mr->handle, mr->epoch);

	/* The pages stay pinned while a remote peer could still write them. */
	vrdma_release_after_device(dev, &mr->orphan, mr->epoch,
				   vrdma_destroy_confirmed(dev, ret));
	return 0;
}

/* ---------------- CQ ---------------- */

static int vrdma_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
			   struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibcq->device);
	struct vrdma_cq *cq = to_vcq(ibcq);
	struct vrdma_create_cq_req req = {};
	struct vrdma_create_cq_resp r;
	struct vrdma_call c = { .op = VRDMA_CMD_CREATE_CQ, .req = &req, .req_len = sizeof(req),
				.resp = &r, .resp_len = sizeof(r) };
	struct rxe_create_cq_resp uresp = {};
	struct vrdma_ucontext *vuc;
	bool confirmed = true;
	__le64 *pages;
	const char *what;
	u32 log2_slots;
	int ret;

	if (!udata)
		return -EOPNOTSUPP; /* no kernel consumers (no DMA MR) */
	/* A create flag the device does not offer is EOPNOTSUPP, as in rxe:
	 * callers test for it to fall back. */
	if (attr->flags)
		return -EOPNOTSUPP;
	if (attr->comp_vector)
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
	pages = kvcalloc(cq->ring->npages, sizeof(*pages), GFP_KERNEL);
	if (!pages) {
		ret = -ENOMEM;
		goto err_ring;
	}
	vrdma_ring_pages(cq->ring, pages);
	req.log2_slots = cpu_to_le32(log2_slots);
	req.npages = cpu_to_le32(cq->ring->npages);
	c.pages = pages;
	c.pages_len = cq->ring->npages * sizeof(*pages);
	ret = vrdma_cmd(dev, &c);
	kvfree(pages);
	if (ret) {
		confirmed = ret != -ESTALE;
		ret = vrdma_user_err(ret);
		goto err_ring;
	}
	what = vrdma_check_create_cq(&r, log2_slots);
	if (what) {
		vrdma_bad_response(dev, c.op, what);
		ret = -EIO;
		goto err_destroy;
	}
	cq->handle = le32_to_cpu(r.cq);
	cq->epoch = c.ret_epoch;
	ibcq->cqe = le32_to_cpu(r.cqe);
	ret = vrdma_ring_publish(&vuc->ibuc, cq->ring, &uresp.mi);
	if (!ret)
		ret = ib_copy_to_udata(udata, &uresp, min(udata->outlen, sizeof(uresp)));
	if (!ret)
		ret = xa_insert(&dev->cqs, cq->handle, cq, GFP_KERNEL);
	if (!ret)
		return 0;
err_destroy:
	confirmed = vrdma_undo_create(dev, VRDMA_CMD_DESTROY_CQ, le32_to_cpu(r.cq), c.ret_epoch);
err_ring:
	vrdma_ring_drop(dev, cq->ring, c.ret_epoch, confirmed);
	cq->ring = NULL;
	return ret;
}

static int vrdma_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibcq->device);
	struct vrdma_cq *cq = to_vcq(ibcq);
	int ret;

	/* Only this CQ: after a loss a new one may have the same handle. */
	xa_cmpxchg(&dev->cqs, cq->handle, cq, NULL, 0);
	ret = vrdma_handle_cmd(dev, VRDMA_CMD_DESTROY_CQ, cq->handle, cq->epoch);
	vrdma_ring_drop(dev, cq->ring, cq->epoch, vrdma_destroy_confirmed(dev, ret));
	cq->ring = NULL;
	return 0;
}

static int vrdma_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct vrdma_cq *cq = to_vcq(ibcq);
	u16 type = (flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED ?
			   VRDMA_DB_CQ_ARM_SOLICITED : VRDMA_DB_CQ_ARM;

	return vrdma_doorbell(to_vdev(ibcq->device), cq->handle, cq->epoch, type);
}

static int vrdma_poll_cq(struct ib_cq *ibcq, int n, struct ib_wc *wc)
{
	return 0; /* user CQs only: librxe polls the ring itself */
}

/* ---------------- QP ---------------- */

static u32 vrdma_slot_log2(u32 bytes)
{
	return max_t(u32, order_base_2(bytes), 6);
}

/* The request's sizes from the caller's capacities; -EINVAL beyond them. */
static int vrdma_qp_sizes(struct vrdma_dev *dev, const struct ib_qp_cap *cap,
			  struct vrdma_create_qp_req *req)
{
	u32 max_wr = le32_to_cpu(dev->attr.max_qp_wr);
	u32 dev_ssge = le32_to_cpu(dev->attr.max_send_sge);
	u32 dev_rsge = le32_to_cpu(dev->attr.max_recv_sge);
	u32 dev_inl = le32_to_cpu(dev->attr.max_inline_data);
	u32 ssge = max_t(u32, cap->max_send_sge, 1);
	u32 rsge = max_t(u32, cap->max_recv_sge, 1);
	u32 inl = cap->max_inline_data, sq_sl2, rq_sl2;

	/* All device limits are checked (vrdma_check_device_attr): no sum
	 * below overflows. */
	if (ssge > dev_ssge || rsge > dev_rsge || inl > dev_inl ||
	    cap->max_send_wr > max_wr || cap->max_recv_wr > max_wr)
		return -EINVAL;
	sq_sl2 = vrdma_slot_log2(VRDMA_SWQE_BASE_SIZE + max_t(u32, ssge * VRDMA_SGE_SIZE, inl));
	rq_sl2 = vrdma_slot_log2(VRDMA_RWQE_BASE_SIZE + rsge * VRDMA_SGE_SIZE);
	if (sq_sl2 > 12 || rq_sl2 > 12)
		return -EINVAL;
	/* At least 8 slots: tiny rings gain nothing and librxe's fullness
	 * checks are least exercised there. */
	req->sq_log2_slots = cpu_to_le32(max_t(u32, order_base_2(cap->max_send_wr + 1), 3));
	req->rq_log2_slots = cpu_to_le32(max_t(u32, order_base_2(cap->max_recv_wr + 1), 3));
	req->sq_log2_slot_size = cpu_to_le32(sq_sl2);
	req->rq_log2_slot_size = cpu_to_le32(rq_sl2);
	/* Use the whole slot, as rxe does, within the device's limits. */
	req->max_send_sge = cpu_to_le32(min_t(u32, ((1u << sq_sl2) - VRDMA_SWQE_BASE_SIZE) /
						       VRDMA_SGE_SIZE, dev_ssge));
	req->max_recv_sge = cpu_to_le32(min_t(u32, ((1u << rq_sl2) - VRDMA_RWQE_BASE_SIZE) /
						       VRDMA_SGE_SIZE, dev_rsge));
	req->max_inline_data = cpu_to_le32(min_t(u32, (1u << sq_sl2) - VRDMA_SWQE_BASE_SIZE,
						 dev_inl));
	return 0;
}

static int vrdma_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
			   struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibqp->device);
	struct vrdma_qp *qp = to_vqp(ibqp);
	struct vrdma_pd *pd = to_vpd(ibqp->pd);
	struct vrdma_cq *scq, *rcq;
	struct vrdma_create_qp_req req = {};
	struct vrdma_create_qp_resp r;
	struct vrdma_call c = { .op = VRDMA_CMD_CREATE_QP, .epoch = pd->epoch, .req = &req,
				.req_len = sizeof(req), .resp = &r, .resp_len = sizeof(r) };
	struct rxe_create_qp_resp uresp = {};
	struct vrdma_ucontext *vuc;
	bool confirmed = true;
	__le64 *pages = NULL;
	const char *what;
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
	scq = to_vcq(init->send_cq);
	rcq = to_vcq(init->recv_cq);
	/* Objects of two epochs: one of them is lost with the device. */
	if (scq->epoch != pd->epoch || rcq->epoch != pd->epoch)
		return -EIO;
	ret = vrdma_qp_sizes(dev, &init->cap, &req);
	if (ret)
		return ret;
	qp->sq_sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	req.pd = cpu_to_le32(pd->handle);
	req.send_cq = cpu_to_le32(scq->handle);
	req.recv_cq = cpu_to_le32(rcq->handle);
	req.qp_type = VRDMA_QPT_RC;
	req.sq_sig_all = qp->sq_sig_all;

	qp->sq = vrdma_ring_alloc(le32_to_cpu(req.sq_log2_slots),
				  le32_to_cpu(req.sq_log2_slot_size));
	qp->rq = vrdma_ring_alloc(le32_to_cpu(req.rq_log2_slots),
				  le32_to_cpu(req.rq_log2_slot_size));
	if (qp->sq && qp->rq)
		pages = kvcalloc(qp->sq->npages + qp->rq->npages, sizeof(*pages), GFP_KERNEL);
	if (!pages) {
		ret = -ENOMEM;
		goto err_rings;
	}
	vrdma_ring_pages(qp->sq, pages);
	vrdma_ring_pages(qp->rq, pages + qp->sq->npages);
	req.sq_npages = cpu_to_le32(qp->sq->npages);
	req.rq_npages = cpu_to_le32(qp->rq->npages);
	c.pages = pages;
	c.pages_len = (qp->sq->npages + qp->rq->npages) * sizeof(*pages);
	ret = vrdma_cmd(dev, &c);
	kvfree(pages);
	if (ret) {
		confirmed = ret != -ESTALE;
		ret = vrdma_user_err(ret);
		goto err_rings;
	}
	what = vrdma_check_create_qp(&r, &req);
	if (what) {
		vrdma_bad_response(dev, c.op, what);
		ret = -EIO;
		goto err_destroy;
	}
	qp->handle = le32_to_cpu(r.qp);
	qp->epoch = c.ret_epoch;
	ibqp->qp_num = le32_to_cpu(r.qpn);
	qp->cap.max_send_wr = le32_to_cpu(r.max_send_wr);
	qp->cap.max_recv_wr = le32_to_cpu(r.max_recv_wr);
	qp->cap.max_send_sge = le32_to_cpu(r.max_send_sge);
	qp->cap.max_recv_sge = le32_to_cpu(r.max_recv_sge);
	qp->cap.max_inline_data = le32_to_cpu(r.max_inline_data);
	init->cap = qp->cap;

	ret = vrdma_ring_publish(&vuc->ibuc, qp->rq, &uresp.rq_mi);
	if (!ret)
		ret = vrdma_ring_publish(&vuc->ibuc, qp->sq, &uresp.sq_mi);
	if (!ret)
		ret = ib_copy_to_udata(udata, &uresp, min(udata->outlen, sizeof(uresp)));
	if (!ret)
		ret = xa_insert(&dev->qps, qp->handle, qp, GFP_KERNEL);
	if (!ret)
		return 0;
err_destroy:
	confirmed = vrdma_undo_create(dev, VRDMA_CMD_DESTROY_QP, le32_to_cpu(r.qp), c.ret_epoch);
err_rings:
	vrdma_ring_drop(dev, qp->sq, c.ret_epoch, confirmed);
	vrdma_ring_drop(dev, qp->rq, c.ret_epoch, confirmed);
	qp->sq = qp->rq = NULL;
	return ret;
}

static void vrdma_modify_attrs(struct vrdma_qp_attr *a, const struct ib_qp_attr *attr, int mask)
{
	if (mask & IB_QP_STATE)
		a->qp_state = cpu_to_le32(attr->qp_state);
	if (mask & IB_QP_CUR_STATE)
		a->cur_qp_state = cpu_to_le32(attr->cur_qp_state);
	if (mask & IB_QP_PATH_MTU)
		a->path_mtu = cpu_to_le32(attr->path_mtu);
	if (mask & IB_QP_RQ_PSN)
		a->rq_psn = cpu_to_le32(attr->rq_psn & VRDMA_QPN_MASK);
	if (mask & IB_QP_SQ_PSN)
		a->sq_psn = cpu_to_le32(attr->sq_psn & VRDMA_QPN_MASK);
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
}

static int vrdma_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
			   struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibqp->device);
	struct vrdma_qp *qp = to_vqp(ibqp);
	struct vrdma_modify_qp_req req = {};
	struct vrdma_call c = { .op = VRDMA_CMD_MODIFY_QP, .epoch = qp->epoch, .req = &req,
				.req_len = sizeof(req) };
	int ret;

	if (mask & ~VRDMA_QP_ATTR_SUPPORTED)
		return -EOPNOTSUPP;
	ret = vrdma_cm_modify_qp(dev, qp, attr, mask);
	if (ret)
		return ret < 0 ? vrdma_user_err(ret) : 0;
	req.qp = cpu_to_le32(qp->handle);
	req.attr_mask = cpu_to_le32(mask);
	vrdma_modify_attrs(&req.attr, attr, mask);
	if (mask & IB_QP_AV) {
		const struct ib_global_route *grh = rdma_ah_read_grh(&attr->ah_attr);

		if (!(rdma_ah_get_ah_flags(&attr->ah_attr) & IB_AH_GRH))
			return -EINVAL; /* RoCE always needs a GRH */
		memcpy(req.attr.ah.dgid, grh->dgid.raw, 16);
		req.attr.ah.flow_label = cpu_to_le32(grh->flow_label);
		req.attr.ah.sgid_index = grh->sgid_index;
		req.attr.ah.hop_limit = grh->hop_limit;
		req.attr.ah.traffic_class = grh->traffic_class;
		req.attr.ah.sl = rdma_ah_get_sl(&attr->ah_attr);
	}
	ret = vrdma_cmd(dev, &c);
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
	return vrdma_user_err(ret);
}

static int vrdma_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
			  struct ib_qp_init_attr *init)
{
	struct vrdma_dev *dev = to_vdev(ibqp->device);
	struct vrdma_qp *qp = to_vqp(ibqp);
	struct vrdma_handle h = { .handle = cpu_to_le32(qp->handle) };
	struct vrdma_qp_attr a;
	struct vrdma_call c = { .op = VRDMA_CMD_QUERY_QP, .epoch = qp->epoch, .req = &h,
				.req_len = sizeof(h), .resp = &a, .resp_len = sizeof(a) };
	const char *what;
	int ret;

	ret = vrdma_cmd(dev, &c);
	if (ret)
		return vrdma_user_err(ret);
	what = vrdma_check_qp_attr(&a, le32_to_cpu(dev->port.gid_tbl_len));
	if (what) {
		vrdma_bad_response(dev, c.op, what);
		return -EIO;
	}
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = le32_to_cpu(a.qp_state);
	attr->cur_qp_state = le32_to_cpu(a.cur_qp_state);
	attr->path_mtu = le32_to_cpu(a.path_mtu);
	attr->path_mig_state = IB_MIG_MIGRATED;
	attr->rq_psn = le32_to_cpu(a.rq_psn);
	attr->sq_psn = le32_to_cpu(a.sq_psn);
	attr->dest_qp_num = le32_to_cpu(a.dest_qp_num);
	attr->qp_access_flags = le32_to_cpu(a.qp_access_flags);
	attr->port_num = 1;
	attr->max_rd_atomic = a.max_rd_atomic;
	attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
	attr->min_rnr_timer = a.min_rnr_timer;
	attr->timeout = a.timeout;
	attr->retry_cnt = a.retry_cnt;
	attr->rnr_retry = a.rnr_retry;
	attr->cap = qp->cap;
	attr->ah_attr.type = rdma_ah_find_type(ibqp->device, 1);
	rdma_ah_set_port_num(&attr->ah_attr, 1);
	rdma_ah_set_sl(&attr->ah_attr, a.ah.sl);
	rdma_ah_set_grh(&attr->ah_attr, NULL, le32_to_cpu(a.ah.flow_label), a.ah.sgid_index,
			a.ah.hop_limit, a.ah.traffic_class);
	rdma_ah_set_dgid_raw(&attr->ah_attr, a.ah.dgid);

	memset(init, 0, sizeof(*init));
	init->qp_type = IB_QPT_RC;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->cap = qp->cap;
	init->sq_sig_type = qp->sq_sig_all ? IB_SIGNAL_ALL_WR : IB_SIGNAL_REQ_WR;
	return 0;
}

static int vrdma_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibqp->device);
	struct vrdma_qp *qp = to_vqp(ibqp);
	bool confirmed;

	vrdma_cm_qp_destroy(dev, qp);
	xa_cmpxchg(&dev->qps, qp->handle, qp, NULL, 0);
	confirmed = vrdma_destroy_confirmed(dev, vrdma_handle_cmd(dev, VRDMA_CMD_DESTROY_QP,
								  qp->handle, qp->epoch));
	vrdma_ring_drop(dev, qp->sq, qp->epoch, confirmed);
	vrdma_ring_drop(dev, qp->rq, qp->epoch, confirmed);
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
	ret = vrdma_doorbell(to_vdev(ibqp->device), qp->handle, qp->epoch, VRDMA_DB_SQ);
	if (ret)
		dev_info_ratelimited(&ibqp->device->dev, "SQ doorbell failed: %d\n", ret);
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
	return vrdma_doorbell(to_vdev(ibqp->device), qp->handle, qp->epoch, VRDMA_DB_RQ);
}

const struct ib_device_ops vrdma_dev_ops = {
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

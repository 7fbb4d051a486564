/* SPDX-License-Identifier: MIT */
/* virtio-blk, driver side: config space and requests. */
#include <errno.h>
#include <string.h>

#include "util.h"
#include "vu-front.h"

#define BLK_HDR_SIZE 16u

int vuf_blk_get_config(struct vuf_conn *c, struct vuf_blk_config *ret_cfg)
{
	uint8_t b[VUF_BLK_CONFIG_SIZE];
	int ret;

	/* QEMU reads the whole struct virtio_blk_config (60 bytes). */
	ret = vuf_get_config(c, 0, sizeof(b), b);
	if (ret)
		return ret;
	/* virtio 1.x config space is little-endian. */
	ret_cfg->capacity = get_le64(b);
	ret_cfg->size_max = get_le32(b + 8);
	ret_cfg->seg_max = get_le32(b + 12);
	ret_cfg->blk_size = get_le32(b + 20);
	ret_cfg->wce = b[32];
	ret_cfg->num_queues = get_le16(b + 34);
	return 0;
}

int vuf_blk_req_alloc(struct vuf_mem *m, uint32_t data_cap, struct vuf_blk_req *ret_req)
{
	uint64_t hdr;
	int ret;

	memset(ret_req, 0, sizeof(*ret_req));
	ret = vuf_mem_alloc(m, BLK_HDR_SIZE + 16, 16, &hdr);
	if (ret)
		return ret;
	ret_req->hdr_gpa = hdr;
	ret_req->status_gpa = hdr + BLK_HDR_SIZE;
	ret_req->data_cap = data_cap;
	if (data_cap)
		ret = vuf_mem_alloc(m, data_cap, 4096, &ret_req->data_gpa);
	return ret;
}

static bool data_device_writes(uint32_t type)
{
	return type == VUF_BLK_T_IN || type == VUF_BLK_T_GET_ID;
}

int vuf_blk_post(struct vuf_vq *vq, struct vuf_blk_req *r, uint32_t type,
		 uint64_t sector, uint32_t len, bool indirect)
{
	uint8_t *hdr = vuf_mem_ptr(vq->mem, r->hdr_gpa, BLK_HDR_SIZE + 1);
	struct vuf_buf bufs[3];
	size_t n = 0;

	if (!hdr || len > r->data_cap)
		return -EINVAL;
	put_le32(hdr, type);
	put_le32(hdr + 4, 0);
	put_le64(hdr + 8, sector);
	/* A value no device writes, so a missing status update shows. */
	hdr[BLK_HDR_SIZE] = 0xff;
	bufs[n++] = (struct vuf_buf){ .gpa = r->hdr_gpa, .len = BLK_HDR_SIZE };
	if (len)
		bufs[n++] = (struct vuf_buf){
			.gpa = r->data_gpa, .len = len, .device_writes = data_device_writes(type),
		};
	bufs[n++] = (struct vuf_buf){ .gpa = r->status_gpa, .len = 1, .device_writes = true };
	return vuf_vq_add(vq, bufs, n, indirect, &r->head);
}

uint8_t vuf_blk_req_status(const struct vuf_vq *vq, const struct vuf_blk_req *r)
{
	const uint8_t *s = vuf_mem_ptr(vq->mem, r->status_gpa, 1);

	return __atomic_load_n(s, __ATOMIC_ACQUIRE);
}

int vuf_blk_io(struct vuf_vq *vq, struct vuf_blk_req *scratch, uint32_t type,
	       uint64_t sector, void *buf, uint32_t len, bool indirect, int timeout_ms)
{
	uint8_t *data = len ? vuf_mem_ptr(vq->mem, scratch->data_gpa, len) : NULL;
	struct vuf_used u;
	int ret;

	if (len && (!data || len > scratch->data_cap))
		return -EINVAL;
	if (type == VUF_BLK_T_OUT)
		memcpy(data, buf, len);
	else if (len)
		memset(data, 0, len);
	ret = vuf_blk_post(vq, scratch, type, sector, len, indirect);
	if (!ret)
		ret = vuf_vq_kick_and_reap(vq, scratch->head, timeout_ms, &u);
	if (ret)
		return ret;
	scratch->used_len = u.len;
	if (data_device_writes(type))
		memcpy(buf, data, len);
	return vuf_blk_req_status(vq, scratch);
}

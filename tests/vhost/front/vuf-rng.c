/* SPDX-License-Identifier: MIT */
/* virtio-rng: one device-writable buffer per request. */
#include <errno.h>

#include "vu-front.h"

int vuf_rng_read(struct vuf_vq *vq, uint64_t buf_gpa, uint32_t len, int timeout_ms)
{
	struct vuf_buf b = { .gpa = buf_gpa, .len = len, .device_writes = true };
	struct vuf_used u;
	uint16_t head;
	int ret;

	ret = vuf_vq_add(vq, &b, 1, false, &head);
	if (!ret)
		ret = vuf_vq_kick_and_reap(vq, head, timeout_ms, &u);
	if (ret)
		return ret;
	if (u.len > len)
		return -EPROTO;
	return (int)u.len;
}

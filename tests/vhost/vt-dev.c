/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "vt-dev.h"

int vt_dev_connect(struct vt_dev *dev, const char *sock, int timeout_ms, uint64_t want,
		   uint64_t want_proto)
{
	int ret;

	memset(dev, 0, sizeof(*dev));
	ret = vuf_conn_connect(sock, timeout_ms, &dev->c);
	if (ret)
		return ret;
	dev->mem = vuf_mem_new();
	if (!dev->mem)
		return -ENOMEM;
	return vuf_negotiate(dev->c, want, want_proto, &dev->features, &dev->protocol);
}

int vt_dev_start_queues(struct vt_dev *dev, unsigned nvq, uint16_t qsize, bool start)
{
	int ret;

	if (nvq > VT_MAX_VQS)
		return -EINVAL;
	ret = vuf_mem_send_table(dev->mem, dev->c);
	for (unsigned i = 0; !ret && i < nvq; i++) {
		ret = vuf_vq_init(&dev->vq[i], dev->c, dev->mem, i, qsize);
		if (!ret)
			dev->nvq++;
	}
	for (unsigned i = 0; !ret && start && i < nvq; i++)
		ret = vuf_vq_start(&dev->vq[i]);
	return ret;
}

void vt_dev_close(struct vt_dev *dev)
{
	for (unsigned i = 0; i < dev->nvq; i++)
		vuf_vq_destroy(&dev->vq[i]);
	dev->nvq = 0;
	vuf_conn_free(dev->c);
	dev->c = NULL;
	vuf_mem_free(dev->mem);
	dev->mem = NULL;
}

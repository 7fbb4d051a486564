// SPDX-License-Identifier: MIT
/*
 * virtio-blk on a file (virtio 1.2, 5.2), served synchronously: each kick
 * drains the queue with preadv/pwritev.  Every request field comes from
 * the guest and is range-checked against the backing file before any I/O.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/virtio_blk.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <glib.h>

#include "device.h"
#include "util.h"

#define BLK_SECTOR 512u
#define BLK_SEG_MAX 126u
#define BLK_ID "vrdma-blk"
/* Far above what Linux sends (max_sectors_kb is 1280 by default). */
#define BLK_MAX_REQUEST (64u << 20)

struct blk_backing {
	int fd;
	bool read_only;
	unsigned int num_queues;
};

struct blk_instance {
	struct blk_backing *backing;
};

static int blk_open(const struct vhost_device_args *args, void **ret_shared)
{
	struct blk_backing *b;
	struct stat st;
	int fd;

	if (!args->blk_file)
		return -EINVAL;
	if (args->num_queues < 1 || args->num_queues > 8)
		return -ERANGE;
	fd = open(args->blk_file, (args->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))) {
		close(fd);
		return -EINVAL;
	}
	b = g_new0(struct blk_backing, 1);
	b->fd = fd;
	b->read_only = args->read_only;
	b->num_queues = args->num_queues;
	*ret_shared = b;
	return 0;
}

static void blk_close(void *shared)
{
	struct blk_backing *b = shared;

	if (!b)
		return;
	close(b->fd);
	g_free(b);
}

/* Size in bytes, read each time: the file may grow (then SIGHUP). */
static uint64_t backing_size(const struct blk_backing *b)
{
	struct stat st;
	off_t end;

	if (fstat(b->fd, &st) < 0)
		return 0;
	if (S_ISREG(st.st_mode))
		return (uint64_t)st.st_size;
	end = lseek(b->fd, 0, SEEK_END);
	return end < 0 ? 0 : (uint64_t)end;
}

static int blk_get_config(void *opaque, uint32_t offset, uint8_t *buf, uint32_t len)
{
	struct blk_instance *inst = opaque;
	struct virtio_blk_config cfg = { 0 };

	cfg.capacity = backing_size(inst->backing) / BLK_SECTOR;
	cfg.seg_max = BLK_SEG_MAX;
	cfg.blk_size = BLK_SECTOR;
	cfg.num_queues = (uint16_t)inst->backing->num_queues;
	/* Bytes past our struct read as zero. */
	if (offset < sizeof(cfg))
		memcpy(buf, (uint8_t *)&cfg + offset,
		       MIN((size_t)len, sizeof(cfg) - offset));
	return 0;
}

static int blk_set_config(void *opaque, uint32_t offset, const uint8_t *buf, uint32_t len)
{
	/* No CONFIG_WCE: nothing in our config space is writable. */
	(void)opaque, (void)offset, (void)buf, (void)len;
	return -EPERM;
}

/*
 * Copies the part [offset, offset+len) of an iovec array into dst; returns
 * the number of entries, or -1 if the array is shorter than that.
 */
static int iov_slice(const struct iovec *src, unsigned int n, uint64_t offset, uint64_t len,
		     struct iovec *dst)
{
	int out = 0;

	for (unsigned int i = 0; i < n && len; i++) {
		uint64_t chunk;

		if (offset >= src[i].iov_len) {
			offset -= src[i].iov_len;
			continue;
		}
		chunk = MIN(src[i].iov_len - offset, len);
		dst[out++] = (struct iovec){ (uint8_t *)src[i].iov_base + offset, chunk };
		len -= chunk;
		offset = 0;
	}
	return len ? -1 : out;
}

/* preadv/pwritev until done: short transfers are legal for both. */
static int blk_rw(int fd, struct iovec *iov, int n, uint64_t off, bool write)
{
	while (n > 0) {
		ssize_t got = write ? pwritev(fd, iov, n, (off_t)off) : preadv(fd, iov, n, (off_t)off);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -EIO;
		off += (uint64_t)got;
		while (n > 0 && (size_t)got >= iov->iov_len) {
			got -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + got;
			iov->iov_len -= (size_t)got;
		}
	}
	return 0;
}

static bool sectors_in_range(const struct blk_backing *b, uint64_t sector, uint64_t bytes)
{
	/* One request is served synchronously: bound what it may cost. */
	if (bytes % BLK_SECTOR || bytes > BLK_MAX_REQUEST || sector > UINT64_MAX / BLK_SECTOR)
		return false;
	return range_within(sector * BLK_SECTOR, bytes, backing_size(b));
}

/* Executes one request and writes its status byte. */
static void blk_execute(struct blk_backing *b, struct vq_elem *e)
{
	g_autofree struct iovec *data = g_new(struct iovec, VQ_MAX_SEGS);
	struct virtio_blk_outhdr hdr;
	uint64_t data_len = e->in_len - 1;
	uint8_t status = VIRTIO_BLK_S_IOERR;
	int n;

	if (vq_iov_to_buf(e->out, e->out_num, 0, &hdr, sizeof(hdr)) != sizeof(hdr))
		goto done;
	switch (hdr.type) {
	case VIRTIO_BLK_T_IN:
		n = iov_slice(e->in, e->in_num, 0, data_len, data);
		if (n < 0 || !sectors_in_range(b, hdr.sector, data_len))
			break;
		if (blk_rw(b->fd, data, n, hdr.sector * BLK_SECTOR, false) == 0)
			status = VIRTIO_BLK_S_OK;
		break;
	case VIRTIO_BLK_T_OUT:
		data_len = e->out_len - sizeof(hdr);
		n = iov_slice(e->out, e->out_num, sizeof(hdr), data_len, data);
		if (b->read_only || n < 0 || !sectors_in_range(b, hdr.sector, data_len))
			break;
		if (blk_rw(b->fd, data, n, hdr.sector * BLK_SECTOR, true) == 0)
			status = VIRTIO_BLK_S_OK;
		break;
	case VIRTIO_BLK_T_FLUSH:
		if (fdatasync(b->fd) == 0)
			status = VIRTIO_BLK_S_OK;
		break;
	case VIRTIO_BLK_T_GET_ID: {
		char id[VIRTIO_BLK_ID_BYTES] = BLK_ID;
		size_t len = MIN((size_t)data_len, sizeof(id));

		vq_buf_to_iov(e->in, e->in_num, 0, id, len);
		status = VIRTIO_BLK_S_OK;
		break;
	}
	default:
		status = VIRTIO_BLK_S_UNSUPP;
		break;
	}
done:
	/* The status byte is the last byte of the device-writable buffers. */
	vq_buf_to_iov(e->in, e->in_num, e->in_len - 1, &status, 1);
}

static uint32_t blk_serve_one(void *opaque, struct vq_elem *e)
{
	struct blk_instance *inst = opaque;

	/*
	 * A request without room for the status byte cannot be answered.
	 * Otherwise the whole device-writable part counts as written: the
	 * status is its last byte and a failed read may have touched the
	 * rest, and all of it must reach the dirty log.
	 */
	if (e->in_len < 1 || e->in_len > UINT32_MAX)
		return 0;
	blk_execute(inst->backing, e);
	return (uint32_t)e->in_len;
}

static void blk_queue_kick(void *opaque, struct vu_vq *vq)
{
	vq_serve(vq, blk_serve_one, opaque);
}

static int blk_instance_new(void *shared, struct vu_device_ops *ret_ops, void **ret_instance)
{
	struct blk_backing *b = shared;
	struct blk_instance *inst = g_new0(struct blk_instance, 1);

	inst->backing = b;
	*ret_ops = (struct vu_device_ops){
		.name = "blk",
		.max_queues = (uint16_t)b->num_queues,
		.features = 1ull << VIRTIO_BLK_F_SEG_MAX | 1ull << VIRTIO_BLK_F_BLK_SIZE |
			    1ull << VIRTIO_BLK_F_FLUSH | 1ull << VIRTIO_BLK_F_MQ |
			    (b->read_only ? 1ull << VIRTIO_BLK_F_RO : 0),
		.config_space = true,
		.inflight_tracking = true,
		.get_config = blk_get_config,
		.set_config = blk_set_config,
		.queue_kick = blk_queue_kick,
	};
	*ret_instance = inst;
	return 0;
}

static void blk_instance_free(void *instance)
{
	g_free(instance);
}

static const char *const blk_capabilities[] = { "blk-file", "read-only", NULL };

const struct vhost_device_type vhost_blk_type = {
	.name = "blk",
	.vhost_user_type = "block",
	.capabilities = blk_capabilities,
	.open = blk_open,
	.close = blk_close,
	.instance_new = blk_instance_new,
	.instance_free = blk_instance_free,
};

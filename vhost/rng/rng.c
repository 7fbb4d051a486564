// SPDX-License-Identifier: MIT
/*
 * virtio-rng (virtio 1.2, 5.4): fills each device-writable buffer with bytes
 * from an entropy source.  A regular file is served cyclically from its
 * start, so tests can recognise exactly which bytes reached the guest.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "device.h"
#include "util.h"

/* Bytes given per request at most: the driver asks for small amounts. */
#define RNG_MAX_CHUNK 65536u

struct rng_source {
	int fd;
	bool cyclic;
	uint64_t size;
};

/* Each connection is its own device: a file is served from its start. */
struct rng_instance {
	struct rng_source *src;
	uint64_t offset;
	uint8_t *buf; /* RNG_MAX_CHUNK bytes */
};

static int rng_open(const struct vhost_device_args *args, void **ret_shared)
{
	const char *path = args->entropy_file ? args->entropy_file : "/dev/urandom";
	struct rng_source *src;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || (S_ISREG(st.st_mode) && st.st_size == 0)) {
		close(fd);
		return -EINVAL;
	}
	src = g_new0(struct rng_source, 1);
	src->fd = fd;
	src->cyclic = S_ISREG(st.st_mode);
	src->size = (uint64_t)st.st_size;
	*ret_shared = src;
	return 0;
}

static void rng_close(void *shared)
{
	struct rng_source *src = shared;

	if (!src)
		return;
	close(src->fd);
	g_free(src);
}

static ssize_t rng_fill(struct rng_instance *inst, uint8_t *buf, size_t len)
{
	const struct rng_source *src = inst->src;
	size_t done = 0;

	while (done < len) {
		ssize_t n;

		if (src->cyclic) {
			n = pread(src->fd, buf + done, MIN(len - done, src->size - inst->offset),
				  (off_t)inst->offset);
			if (n > 0)
				inst->offset = (inst->offset + (uint64_t)n) % src->size;
		} else {
			n = read(src->fd, buf + done, len - done);
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return done ? (ssize_t)done : -EIO;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static uint32_t rng_serve_one(void *opaque, struct vq_elem *e)
{
	struct rng_instance *inst = opaque;
	ssize_t got = rng_fill(inst, inst->buf, MIN(e->in_len, (uint64_t)RNG_MAX_CHUNK));

	return got > 0 ? (uint32_t)vq_buf_to_iov(e->in, e->in_num, 0, inst->buf, (size_t)got) : 0;
}

static void rng_queue_kick(void *opaque, struct vu_vq *vq)
{
	vq_serve(vq, rng_serve_one, opaque);
}

static int rng_instance_new(void *shared, struct vu_device_ops *ret_ops, void **ret_instance)
{
	struct rng_instance *inst = g_new0(struct rng_instance, 1);

	inst->src = shared;
	inst->buf = g_malloc(RNG_MAX_CHUNK);
	*ret_ops = (struct vu_device_ops){
		.name = "rng",
		.max_queues = 1,
		.queue_kick = rng_queue_kick,
	};
	*ret_instance = inst;
	return 0;
}

static void rng_instance_free(void *instance)
{
	struct rng_instance *inst = instance;

	if (inst)
		g_free(inst->buf);
	g_free(inst);
}

static const char *const rng_capabilities[] = { "entropy-file", NULL };

const struct vhost_device_type vhost_rng_type = {
	.name = "rng",
	.vhost_user_type = "rng",
	.capabilities = rng_capabilities,
	.open = rng_open,
	.close = rng_close,
	.instance_new = rng_instance_new,
	.instance_free = rng_instance_free,
};

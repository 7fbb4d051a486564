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

static void rng_queue_kick(void *opaque, struct vu_vq *vq)
{
	struct rng_instance *inst = opaque;
	g_autofree uint8_t *buf = g_malloc(RNG_MAX_CHUNK);
	unsigned int done = 0;
	struct vq_elem *e;

	while (done < VQ_BUDGET && vq_pop(vq, &e) > 0) {
		ssize_t got = rng_fill(inst, buf, MIN(e->in_len, (uint64_t)RNG_MAX_CHUNK));
		uint32_t written = 0;

		if (got > 0)
			written = (uint32_t)vq_buf_to_iov(e->in, e->in_num, 0, buf, (size_t)got);
		vq_push(vq, e, written);
		done++;
	}
	if (done)
		vq_notify(vq);
	/* Let the other connections in; come back for the rest. */
	if (done == VQ_BUDGET)
		vq_kick_self(vq);
}

static int rng_instance_new(void *shared, struct vu_device_ops *ret_ops, void **ret_instance)
{
	struct rng_instance *inst = g_new0(struct rng_instance, 1);

	inst->src = shared;
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
	g_free(instance);
}

static const char *const rng_capabilities[] = { "entropy-file", NULL };

const struct vhost_device_type vhost_rng_type = {
	.name = "rng",
	.capabilities = rng_capabilities,
	.open = rng_open,
	.close = rng_close,
	.instance_new = rng_instance_new,
	.instance_free = rng_instance_free,
};

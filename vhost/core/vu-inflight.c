// SPDX-License-Identifier: MIT
/*
 * The inflight area (vhost-user "Inflight I/O tracking", split rings): a
 * shared memory file QEMU keeps across back-end restarts, recording which
 * requests were taken but not completed, so a new back end re-executes them.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "vu-internal.h"

_Static_assert(sizeof(struct vu_inflight_desc_state) == 16, "spec layout");
_Static_assert(sizeof(struct vu_inflight_queue) == 16, "spec layout");

#define INFLIGHT_ALIGN 64u

uint64_t vu_inflight_queue_bytes(uint16_t queue_size)
{
	uint64_t bytes;

	if (!queue_size || queue_size > VU_MAX_QUEUE_SIZE)
		return 0;
	bytes = sizeof(struct vu_inflight_queue) +
		(uint64_t)queue_size * sizeof(struct vu_inflight_desc_state);
	return (bytes + INFLIGHT_ALIGN - 1) / INFLIGHT_ALIGN * INFLIGHT_ALIGN;
}

/* Maps [offset, offset+size) of fd; returns the skew or -errno. */
static int map_area(struct vu_inflight *inf, int fd, uint64_t size, uint64_t offset)
{
	size_t map_len;
	uint64_t skew;
	void *base = vu_map_shared(fd, offset, size, inf->poisoned, &map_len, &skew);

	if (!base)
		return -errno;
	inf->map_base = base;
	inf->map_len = map_len;
	return (int)skew;
}

int vu_inflight_create(struct vu_inflight *inf, uint16_t num_queues, uint16_t queue_size)
{
	uint64_t qbytes = vu_inflight_queue_bytes(queue_size);
	uint64_t size;
	int fd, ret;

	if (!qbytes || !num_queues)
		return -EINVAL;
	size = qbytes * num_queues;
	fd = memfd_create("vrdma-vhost-inflight", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	/* QEMU keeps this fd across our restarts: it must never shrink. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	vu_inflight_clear(inf);
	ret = map_area(inf, fd, size, 0);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	inf->fd = fd;
	inf->num_queues = num_queues;
	inf->queue_size = queue_size;
	for (unsigned int i = 0; i < num_queues; i++) {
		struct vu_inflight_queue *q = vu_inflight_queue(inf, i);

		q->version = 1;
		q->desc_num = queue_size;
	}
	return 0;
}

int vu_inflight_adopt(struct vu_inflight *inf, int fd, const struct vu_inflight_desc *d)
{
	uint64_t qbytes = vu_inflight_queue_bytes(d->queue_size);
	struct stat st;
	int ret;

	if (!qbytes || !d->num_queues || d->mmap_size != qbytes * d->num_queues)
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || !range_within(d->mmap_offset, d->mmap_size, (uint64_t)st.st_size))
		return -EINVAL;
	vu_inflight_clear(inf);
	ret = map_area(inf, fd, d->mmap_size, d->mmap_offset);
	if (ret < 0)
		return ret;
	inf->fd = fd;
	inf->num_queues = d->num_queues;
	inf->queue_size = d->queue_size;
	inf->skew = (uint32_t)ret;
	return 0;
}

void vu_inflight_clear(struct vu_inflight *inf)
{
	volatile sig_atomic_t *poisoned = inf->poisoned;

	vu_unmap(inf->map_base, inf->map_len);
	if (inf->fd >= 0)
		close(inf->fd);
	*inf = (struct vu_inflight){ .fd = -1, .poisoned = poisoned };
}

struct vu_inflight_queue *vu_inflight_queue(const struct vu_inflight *inf, unsigned int index)
{
	if (!inf->map_base || index >= inf->num_queues)
		return NULL;
	return (struct vu_inflight_queue *)((uint8_t *)inf->map_base + inf->skew +
					    index * vu_inflight_queue_bytes(inf->queue_size));
}

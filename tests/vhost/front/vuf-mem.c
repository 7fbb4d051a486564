/* SPDX-License-Identifier: MIT */
/* Guest RAM: memfd (or caller-made file) regions at chosen guest-physical addresses. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util.h"
#include "vuf-internal.h"

struct vuf_mem *vuf_mem_new(void)
{
	return calloc(1, sizeof(struct vuf_mem));
}

void vuf_mem_free(struct vuf_mem *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nregions; i++) {
		struct vuf_mem_region *r = &m->regions[i];

		munmap(m->maps[i], r->fd_offset + r->size);
		close(r->fd);
	}
	free(m);
}

static bool overlaps(const struct vuf_mem *m, uint64_t gpa, uint64_t size)
{
	for (size_t i = 0; i < m->nregions; i++) {
		const struct vuf_mem_region *r = &m->regions[i];

		if (gpa < r->gpa + r->size && r->gpa < gpa + size)
			return true;
	}
	return false;
}

int vuf_mem_add_region_fd(struct vuf_mem *m, uint64_t gpa, uint64_t size, uint64_t fd_offset,
			  int fd)
{
	_cleanup_(closep) int own = -1;
	uint64_t total;
	void *map;

	if (m->nregions == VUF_MAX_REGIONS)
		return -ENOSPC;
	if (!size || gpa + size < gpa || __builtin_add_overflow(fd_offset, size, &total))
		return -EINVAL;
	if (overlaps(m, gpa, size))
		return -EEXIST;
	own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (own < 0)
		return -errno;
	map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
	if (map == MAP_FAILED)
		return -errno;
	m->maps[m->nregions] = map;
	m->regions[m->nregions] = (struct vuf_mem_region){
		.gpa = gpa, .size = size, .fd_offset = fd_offset,
		.fd = steal_fd(&own), .host = (uint8_t *)map + fd_offset,
	};
	m->nregions++;
	return 0;
}

int vuf_mem_add_region(struct vuf_mem *m, uint64_t gpa, uint64_t size, uint64_t fd_offset)
{
	_cleanup_(closep) int fd = -1;
	uint64_t total;

	if (__builtin_add_overflow(fd_offset, size, &total))
		return -EINVAL;
	fd = vuf_memfd("vuf-guest-ram", 0, total);
	if (fd < 0)
		return fd;
	return vuf_mem_add_region_fd(m, gpa, size, fd_offset, fd);
}

int vuf_memfd(const char *name, unsigned int flags, uint64_t size)
{
	/* No MFD_ALLOW_SEALING, like QEMU's memory-backend-memfd,seal=off. */
	int fd = memfd_create(name, MFD_CLOEXEC | flags);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

size_t vuf_mem_nregions(const struct vuf_mem *m) { return m->nregions; }

const struct vuf_mem_region *vuf_mem_region(const struct vuf_mem *m, size_t i)
{
	return i < m->nregions ? &m->regions[i] : NULL;
}

struct vuf_region_desc vuf_mem_region_desc(const struct vuf_mem *m, size_t i)
{
	const struct vuf_mem_region *r = &m->regions[i];

	/*
	 * Like QEMU: the user address is where the region starts in our
	 * address space, and the mmap offset is where it starts in the fd.
	 */
	return (struct vuf_region_desc){
		.gpa = r->gpa, .size = r->size,
		.uva = (uint64_t)(uintptr_t)r->host, .mmap_offset = r->fd_offset,
	};
}

int vuf_mem_send_table(const struct vuf_mem *m, struct vuf_conn *c)
{
	struct vuf_region_desc d[VUF_MAX_REGIONS];
	int fds[VUF_MAX_REGIONS];

	for (size_t i = 0; i < m->nregions; i++) {
		d[i] = vuf_mem_region_desc(m, i);
		fds[i] = m->regions[i].fd;
	}
	return vuf_set_mem_table_raw(c, d, (uint32_t)m->nregions, fds, m->nregions);
}

static const struct vuf_mem_region *find(const struct vuf_mem *m, uint64_t gpa, uint64_t len)
{
	for (size_t i = 0; i < m->nregions; i++) {
		const struct vuf_mem_region *r = &m->regions[i];

		if (gpa >= r->gpa && range_within(gpa - r->gpa, len, r->size))
			return r;
	}
	return NULL;
}

void *vuf_mem_ptr(const struct vuf_mem *m, uint64_t gpa, uint64_t len)
{
	const struct vuf_mem_region *r = find(m, gpa, len);

	return r ? r->host + (gpa - r->gpa) : NULL;
}

int vuf_mem_gpa(const struct vuf_mem *m, const void *p, uint64_t *ret_gpa)
{
	uintptr_t a = (uintptr_t)p;

	for (size_t i = 0; i < m->nregions; i++) {
		const struct vuf_mem_region *r = &m->regions[i];
		uintptr_t base = (uintptr_t)r->host;

		if (a >= base && a - base < r->size) {
			*ret_gpa = r->gpa + (a - base);
			return 0;
		}
	}
	return -EFAULT;
}

int vuf_mem_uva(const struct vuf_mem *m, uint64_t gpa, uint64_t *ret_uva)
{
	void *p = vuf_mem_ptr(m, gpa, 1);

	if (!p)
		return -EFAULT;
	*ret_uva = (uint64_t)(uintptr_t)p;
	return 0;
}

int vuf_mem_alloc_in(struct vuf_mem *m, size_t region, uint64_t size, uint64_t align,
		     uint64_t *ret_gpa)
{
	struct vuf_mem_region *r;
	uint64_t gpa, off;

	if (!align || !is_power_of_2(align) || region >= m->nregions)
		return -EINVAL;
	r = &m->regions[region];
	/* Align the guest-physical address, not the region offset. */
	gpa = (r->gpa + m->alloc_off[region] + align - 1) & ~(align - 1);
	off = gpa - r->gpa;
	if (!range_within(off, size, r->size))
		return -ENOMEM;
	m->alloc_off[region] = off + size;
	memset(r->host + off, 0, size);
	*ret_gpa = gpa;
	return 0;
}

int vuf_mem_alloc(struct vuf_mem *m, uint64_t size, uint64_t align, uint64_t *ret_gpa)
{
	for (size_t i = 0; i < m->nregions; i++) {
		int ret = vuf_mem_alloc_in(m, i, size, align, ret_gpa);

		if (ret != -ENOMEM)
			return ret;
	}
	return -ENOMEM;
}

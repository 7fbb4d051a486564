// SPDX-License-Identifier: MIT
/*
 * Guest memory regions.  Each region is checked against the fd it comes
 * with (fstat), against wrap-around in all three address spaces and
 * against overlap with the regions already mapped, before it is mapped.
 * Translation never crosses from one region into another: callers get the
 * length that stays inside the region and walk on themselves.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "vu-internal.h"

static bool wraps(uint64_t start, uint64_t len)
{
	return start + len < start;
}

static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

static int check_against_fd(const struct vu_mem_desc *d, int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	/* A shorter file would SIGBUS us on first touch. */
	if (!range_within(d->mmap_offset, d->size, (uint64_t)st.st_size))
		return -EINVAL;
	return 0;
}

static int check_region(const struct vu_mem *mem, const struct vu_mem_desc *d)
{
	if (d->size == 0 || d->size > VU_MAX_MAPPED_BYTES || wraps(d->guest_addr, d->size) ||
	    wraps(d->user_addr, d->size) || wraps(d->mmap_offset, d->size))
		return -EINVAL;
	uint64_t mapped = d->size;

	for (unsigned int i = 0; i < mem->nregions; i++) {
		const struct vu_region *r = &mem->regions[i];

		mapped += r->size;
		if (mapped > VU_MAX_MAPPED_BYTES)
			return -E2BIG;
		if (overlaps(d->guest_addr, d->size, r->gpa, r->size) ||
		    overlaps(d->user_addr, d->size, r->uva, r->size))
			return -EEXIST;
	}
	return 0;
}

int vu_mem_add(struct vu_mem *mem, const struct vu_mem_desc *d, int fd)
{
	struct vu_region *r;
	struct stat st;
	size_t map_len;
	uint64_t skew;
	void *base;
	int own_fd;
	int ret;

	if (mem->nregions >= VU_MAX_MEM_SLOTS)
		return -ENOSPC;
	ret = check_region(mem, d);
	if (ret < 0)
		return ret;
	ret = check_against_fd(d, fd);
	if (ret < 0)
		return ret;
	if (fstat(fd, &st) < 0)
		return -errno;
	own_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (own_fd < 0)
		return -errno;
	base = mem->populate ? vu_map_shared_populated(fd, d->mmap_offset, d->size, mem->poisoned,
						       &map_len, &skew)
			     : vu_map_shared(fd, d->mmap_offset, d->size, mem->poisoned, &map_len,
					     &skew);
	if (!base) {
		ret = -errno;
		close(own_fd);
		return ret;
	}
	r = &mem->regions[mem->nregions++];
	*r = (struct vu_region){
		.gpa = d->guest_addr,
		.size = d->size,
		.uva = d->user_addr,
		.mmap_offset = d->mmap_offset,
		.host = (uint8_t *)base + skew,
		.map_base = base,
		.map_len = map_len,
		.fd = own_fd,
		.file_dev = st.st_dev,
		.file_ino = st.st_ino,
	};
	return 0;
}

static void region_release(struct vu_region *r)
{
	vu_unmap(r->map_base, r->map_len);
	closep(&r->fd);
}

int vu_mem_remove(struct vu_mem *mem, const struct vu_mem_desc *d)
{
	for (unsigned int i = 0; i < mem->nregions; i++) {
		struct vu_region *r = &mem->regions[i];

		if (r->gpa != d->guest_addr || r->size != d->size || r->uva != d->user_addr)
			continue;
		region_release(r);
		memmove(r, r + 1, (mem->nregions - i - 1) * sizeof(*r));
		mem->nregions--;
		return 0;
	}
	return -ENOENT;
}

void vu_mem_clear(struct vu_mem *mem)
{
	for (unsigned int i = 0; i < mem->nregions; i++)
		region_release(&mem->regions[i]);
	mem->nregions = 0;
}

const struct vu_region *vu_mem_region(const struct vu_mem *mem, uint64_t gpa)
{
	for (unsigned int i = 0; i < mem->nregions; i++) {
		const struct vu_region *r = &mem->regions[i];

		if (gpa >= r->gpa && gpa - r->gpa < r->size)
			return r;
	}
	return NULL;
}

bool vu_region_in(const struct vu_region *r, const struct vu_mem *mem)
{
	for (unsigned int i = 0; i < mem->nregions; i++) {
		const struct vu_region *o = &mem->regions[i];

		if (o->gpa == r->gpa && o->size == r->size && o->uva == r->uva &&
		    o->mmap_offset == r->mmap_offset && o->file_dev == r->file_dev &&
		    o->file_ino == r->file_ino)
			return true;
	}
	return false;
}

void *vu_mem_gpa(const struct vu_mem *mem, uint64_t gpa, uint64_t len, uint64_t *ret_len)
{
	for (unsigned int i = 0; i < mem->nregions; i++) {
		const struct vu_region *r = &mem->regions[i];
		uint64_t off;

		if (gpa < r->gpa || gpa - r->gpa >= r->size)
			continue;
		off = gpa - r->gpa;
		*ret_len = len < r->size - off ? len : r->size - off;
		return r->host + off;
	}
	return NULL;
}

void *vu_mem_uva(const struct vu_mem *mem, uint64_t uva, uint64_t len)
{
	for (unsigned int i = 0; i < mem->nregions; i++) {
		const struct vu_region *r = &mem->regions[i];

		if (uva < r->uva || !range_within(uva - r->uva, len, r->size))
			continue;
		return r->host + (uva - r->uva);
	}
	return NULL;
}

/* SPDX-License-Identifier: MIT */
/* Dirty log: the memfd the back end marks pages in during migration. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util.h"
#include "vuf-internal.h"

int vuf_log_new(uint64_t covered, uint64_t offset, struct vuf_log **ret_log)
{
	_cleanup_(closep) int fd = -1;
	uint64_t pages = (covered + VUF_LOG_PAGE - 1) / VUF_LOG_PAGE;
	uint64_t size = (pages + 7) / 8, total;
	struct vuf_log *l;
	void *map;

	if (!covered || __builtin_add_overflow(offset, size, &total))
		return -EINVAL;
	fd = vuf_memfd("vuf-dirty-log", 0, total);
	if (fd < 0)
		return fd;
	map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	l = malloc(sizeof(*l));
	if (!l) {
		munmap(map, total);
		return -ENOMEM;
	}
	*l = (struct vuf_log){ .fd = steal_fd(&fd), .map = map, .size = size, .offset = offset };
	*ret_log = l;
	return 0;
}

void vuf_log_free(struct vuf_log *l)
{
	if (!l)
		return;
	munmap(l->map, l->offset + l->size);
	close(l->fd);
	free(l);
}

int vuf_log_send(struct vuf_log *l, struct vuf_conn *c)
{
	return vuf_set_log_base_fd(c, l->fd, l->size, l->offset);
}

static uint8_t log_byte(const struct vuf_log *l, uint64_t i)
{
	/* The back end sets bits with atomic OR from another process. */
	return __atomic_load_n(l->map + l->offset + i, __ATOMIC_ACQUIRE);
}

bool vuf_log_page_dirty(const struct vuf_log *l, uint64_t gpa)
{
	uint64_t page = gpa / VUF_LOG_PAGE;

	if (page / 8 >= l->size)
		return false;
	return log_byte(l, page / 8) & (1u << (page % 8));
}

size_t vuf_log_dirty_pages(const struct vuf_log *l, uint64_t *ret_pages, size_t max)
{
	size_t n = 0;

	for (uint64_t i = 0; i < l->size; i++) {
		uint8_t b = log_byte(l, i);

		for (unsigned bit = 0; b && bit < 8; bit++) {
			if (!(b & (1u << bit)))
				continue;
			if (n < max)
				ret_pages[n] = i * 8 + bit;
			n++;
		}
	}
	return n;
}

void vuf_log_clear(struct vuf_log *l)
{
	memset(l->map + l->offset, 0, l->size);
}

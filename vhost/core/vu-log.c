// SPDX-License-Identifier: MIT
/*
 * The dirty log of a migrating guest: one bit per 4 KiB guest page, set
 * with an atomic OR because QEMU reads and clears the bitmap concurrently.
 */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "vu-internal.h"

#define VU_LOG_PAGE 4096ull
/* 1 GiB of bitmap covers 32 TiB of guest memory: anything larger is a lie. */
#define VU_LOG_MAX_SIZE (1ull << 30)

int vu_log_set(struct vu_log *log, int fd, uint64_t size, uint64_t offset)
{
	struct stat st;
	size_t map_len;
	uint64_t skew;
	void *base;

	if (size == 0 || size > VU_LOG_MAX_SIZE || offset + size < offset)
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || !range_within(offset, size, (uint64_t)st.st_size))
		return -EINVAL;
	base = vu_map_shared(fd, offset, size, log->poisoned, &map_len, &skew);
	if (!base)
		return -errno;
	vu_log_clear(log);
	log->map_base = base;
	log->map_len = map_len;
	log->bits = (uint8_t *)base + skew;
	log->size = size;
	return 0;
}

void vu_log_clear(struct vu_log *log)
{
	volatile sig_atomic_t *poisoned = log->poisoned;

	vu_unmap(log->map_base, log->map_len);
	*log = (struct vu_log){ .poisoned = poisoned };
}

void vu_log_write(struct vu_log *log, uint64_t gpa, uint64_t len)
{
	uint64_t first, last;

	if (!log->bits || len == 0 || gpa + len - 1 < gpa)
		return;
	/* The guest memory writes must be visible before QEMU sees their bits. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	first = gpa / VU_LOG_PAGE;
	last = (gpa + len - 1) / VU_LOG_PAGE;
	for (uint64_t page = first; page <= last; page++) {
		/* Pages past the end of the log are not guest RAM QEMU tracks. */
		if (page / 8 >= log->size)
			break;
		__atomic_fetch_or(&log->bits[page / 8], (uint8_t)(1u << (page % 8)),
				  __ATOMIC_RELAXED);
	}
}

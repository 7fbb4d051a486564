// SPDX-License-Identifier: MIT
/*
 * Contiguous host views of guest page lists, for devices that hand guest
 * memory to hardware (RDMA MRs) or share rings with a guest.  Pages that
 * follow each other in one region's file become one mmap; the view is
 * reserved first, so it is one range even when the pages are scattered.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include <glib.h>

#include "util.h"
#include "vu-internal.h"

/* Pages [first, first+n) of the list sit back to back in region r's file. */
static uint64_t run_length(const struct vu_region *r, const uint64_t *gpas, uint64_t first,
			   uint64_t npages, uint64_t page)
{
	uint64_t n = 1;

	while (first + n < npages && gpas[first + n] == gpas[first] + n * page &&
	       range_within(gpas[first + n] - r->gpa, page, r->size))
		n++;
	return n;
}

static int map_run(uint8_t *at, const struct vu_region *r, uint64_t gpa, uint64_t len)
{
	uint64_t offset = r->mmap_offset + (gpa - r->gpa);

	/* The file offset of every guest page must be mappable on its own. */
	if (offset % (uint64_t)sysconf(_SC_PAGESIZE))
		return -EFAULT;
	/*
	 * Populated now: the view is pinned (an MR) or used (a ring) at once,
	 * and filling its page tables here takes read faults with fault-around
	 * (16 pages a fault on shmem), where pinning an empty view takes one
	 * write fault per page.
	 */
	if (mmap(at, len, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED | MAP_NORESERVE | MAP_POPULATE, r->fd,
		 (off_t)offset) == MAP_FAILED)
		return -errno;
	return 0;
}

/*
 * The runs of p's pages, each checked to lie inside one region: counted
 * (map false), or mapped at p->addr.  Returns how many, or -errno.
 */
static int64_t walk_runs(struct vu_dev *dev, const struct vu_pages *p, bool map)
{
	uint64_t page = 1ull << p->page_shift;
	int64_t runs = 0;

	for (uint64_t i = 0; i < p->npages; runs++) {
		const struct vu_region *r = vu_mem_region(&dev->mem, p->gpa[i]);
		uint64_t n;
		int ret;

		if (p->gpa[i] % page || !r || !range_within(p->gpa[i] - r->gpa, page, r->size))
			return -EFAULT;
		n = run_length(r, p->gpa, i, p->npages, page);
		ret = map ? map_run(p->addr + i * page, r, p->gpa[i], n * page) : 0;
		if (ret < 0)
			return ret;
		i += n;
	}
	return runs;
}

/*
 * Pages that are one run inside one region are already contiguous in the
 * region's own mapping: a view nobody but the hardware touches can use it
 * as it is (no new mapping, and its page tables are already filled).  The
 * back end's own views (rings) never do: the region mapping goes away with
 * the memory table, a view must not.
 */
static uint8_t *region_view(struct vu_dev *dev, const uint64_t *gpas, uint64_t npages,
			    uint64_t page)
{
	const struct vu_region *r = vu_mem_region(&dev->mem, gpas[0]);

	if (!r || gpas[0] % page || !range_within(gpas[0] - r->gpa, page, r->size) ||
	    run_length(r, gpas, 0, npages, page) != npages)
		return NULL;
	return r->host + (gpas[0] - r->gpa);
}

int vu_pages_map(struct vu_dev *dev, const uint64_t *gpas, uint64_t npages,
		 unsigned int page_shift, bool guarded, uint64_t max_maps, struct vu_pages **ret)
{
	g_autofree struct vu_pages *p = NULL;
	int64_t runs;
	void *base;
	int r;

	if (!npages || page_shift < 12 || page_shift > 30 ||
	    npages > VU_MAX_MAPPED_BYTES >> page_shift)
		return -EINVAL;
	p = g_new0(struct vu_pages, 1);
	p->npages = npages;
	p->page_shift = page_shift;
	p->len = npages << page_shift;
	p->gpa = g_memdup2(gpas, npages * sizeof(*gpas));
	if (!guarded) {
		p->addr = region_view(dev, gpas, npages, 1ull << page_shift);
		p->borrowed = p->addr != NULL;
		if (p->borrowed) {
			*ret = g_steal_pointer(&p);
			return 0;
		}
	}
	/* Each run is one mapping of the process, and the kernel allows a
	 * process only so many (vm.max_map_count): counted before any is made. */
	runs = walk_runs(dev, p, false);
	if (runs < 0 || (uint64_t)runs > max_maps) {
		g_free(p->gpa);
		return runs < 0 ? (int)runs : -ENOSPC;
	}
	p->nmaps = (uint64_t)runs;
	base = mmap(NULL, p->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED) {
		g_free(p->gpa);
		return -ENOMEM;
	}
	p->addr = base;
	runs = walk_runs(dev, p, true);
	r = runs < 0 ? (int)runs : 0;
	if (r == 0 && guarded) {
		r = vu_guard_add(p->addr, p->len, &dev->poisoned);
		p->guarded = r == 0;
	}
	if (r < 0) {
		vu_pages_unmap(g_steal_pointer(&p));
		return r;
	}
	*ret = g_steal_pointer(&p);
	return 0;
}

void vu_pages_unmap(struct vu_pages *p)
{
	if (!p)
		return;
	if (p->guarded)
		vu_guard_remove(p->addr);
	if (!p->borrowed)
		munmap(p->addr, p->len);
	g_free(p->gpa);
	g_free(p);
}

void vu_pages_log(struct vu_dev *dev, const struct vu_pages *p, uint64_t off, uint64_t len)
{
	uint64_t page = 1ull << p->page_shift;

	if (!vu_dev_logging(dev) || !range_within(off, len, p->len))
		return;
	while (len) {
		uint64_t in_page = MIN(len, page - off % page);

		vu_log_write(&dev->log, p->gpa[off >> p->page_shift] + off % page, in_page);
		off += in_page;
		len -= in_page;
	}
}

bool vu_pages_overlap(const struct vu_pages *p, uint64_t gpa, uint64_t size)
{
	uint64_t page = 1ull << p->page_shift;

	for (uint64_t i = 0; i < p->npages; i++)
		if (p->gpa[i] < gpa + size && gpa < p->gpa[i] + page)
			return true;
	return false;
}

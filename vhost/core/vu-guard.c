// SPDX-License-Identifier: MIT
/*
 * SIGBUS containment for memory a front end shares with us.  A front end
 * can truncate the file behind guest RAM, the log or the inflight area after
 * we mapped it; the next access then raises SIGBUS, which would kill the
 * daemon and every other tenant's connection with it.  Sealing cannot be
 * required (hugetlbfs and plain files cannot be sealed), so instead every
 * such mapping is registered here.  The handler swaps the whole faulting
 * mapping for anonymous zero pages, flags its connection and returns: the
 * access completes on zeros and the daemon drops that connection.
 *
 * The table is only changed on the loop thread, and SIGBUS from guest
 * memory is synchronous on that same thread, so the handler never sees it
 * half-updated.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vu-internal.h"

struct guarded {
	uintptr_t start;
	size_t len;
	volatile sig_atomic_t *poisoned;
};

static struct guarded table[VU_GUARD_MAX];
static unsigned int used;
static struct sigaction previous;

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	uintptr_t addr = (uintptr_t)si->si_addr;

	for (unsigned int i = 0; i < used; i++) {
		struct guarded *g = &table[i];

		if (addr < g->start || addr - g->start >= g->len)
			continue;
		if (mmap((void *)g->start, g->len, PROT_READ | PROT_WRITE,
			 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED)
			break;
		*g->poisoned = 1;
		return;
	}
	/* Not ours: behave as if we had never been installed. */
	if (previous.sa_flags & SA_SIGINFO && previous.sa_sigaction) {
		previous.sa_sigaction(sig, si, uctx);
		return;
	}
	signal(sig, previous.sa_handler == SIG_IGN ? SIG_DFL : previous.sa_handler);
	raise(sig);
}

int vu_guard_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGBUS, &sa, &previous) < 0 ? -errno : 0;
}

int vu_guard_add(void *start, size_t len, volatile sig_atomic_t *poisoned)
{
	/* Every mapping belongs to a connection that must learn of a fault. */
	if (!poisoned)
		return -EINVAL;
	if (used == VU_GUARD_MAX)
		return -ENOSPC;
	table[used++] = (struct guarded){ (uintptr_t)start, len, poisoned };
	return 0;
}

void vu_guard_remove(void *start)
{
	for (unsigned int i = 0; i < used; i++) {
		if (table[i].start != (uintptr_t)start)
			continue;
		table[i] = table[--used];
		return;
	}
}

static void *map_shared(int fd, uint64_t offset, uint64_t len, int flags,
			volatile sig_atomic_t *poisoned, size_t *ret_map_len, uint64_t *ret_skew)
{
	uint64_t skew = offset % (uint64_t)sysconf(_SC_PAGESIZE);
	void *base;

	/* mmap wants a page-aligned offset: map from the page before. */
	base = mmap(NULL, len + skew, PROT_READ | PROT_WRITE, MAP_SHARED | flags, fd,
		    (off_t)(offset - skew));
	if (base == MAP_FAILED)
		return NULL;
	int ret = vu_guard_add(base, len + skew, poisoned);

	if (ret < 0) {
		munmap(base, len + skew);
		errno = -ret;
		return NULL;
	}
	*ret_map_len = len + skew;
	*ret_skew = skew;
	return base;
}

void *vu_map_shared(int fd, uint64_t offset, uint64_t len, volatile sig_atomic_t *poisoned,
		    size_t *ret_map_len, uint64_t *ret_skew)
{
	return map_shared(fd, offset, len, MAP_NORESERVE, poisoned, ret_map_len, ret_skew);
}

void *vu_map_shared_populated(int fd, uint64_t offset, uint64_t len,
			      volatile sig_atomic_t *poisoned, size_t *ret_map_len,
			      uint64_t *ret_skew)
{
	return map_shared(fd, offset, len, MAP_POPULATE, poisoned, ret_map_len, ret_skew);
}

void vu_unmap(void *base, size_t len)
{
	if (!base)
		return;
	vu_guard_remove(base);
	munmap(base, len);
}

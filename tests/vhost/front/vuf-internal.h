/* SPDX-License-Identifier: MIT */
/* Shared by the vu-front sources only. */
#ifndef VUF_INTERNAL_H
#define VUF_INTERNAL_H

#include "vu-front.h"

struct vuf_conn {
	int fd;
	int timeout_ms;
	bool reply_ack;
	uint64_t features;		/* as last sent with SET_FEATURES */
	uint64_t protocol_features;	/* as last sent with SET_PROTOCOL_FEATURES */
};

struct vuf_mem {
	struct vuf_mem_region regions[VUF_MAX_REGIONS];
	uint8_t *maps[VUF_MAX_REGIONS];	/* mmap of the whole fd */
	size_t nregions;
	uint64_t alloc_off[VUF_MAX_REGIONS];	/* bump allocator, per region */
};

/* A memfd of size bytes (flags: MFD_HUGETLB or 0), or -errno. */
int vuf_memfd(const char *name, unsigned int flags, uint64_t size);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The guest memory that the ring tests (test-vu-ring, fuzz-vu-vq) lay out:
 * two regions, adjacent in guest-physical and in the front end's space,
 * region B starting RB_OFF into its memfd; the rings and the buffers they
 * point to lie in region A and run on into B.
 */
#ifndef VRDMA_RING_LAYOUT_H
#define VRDMA_RING_LAYOUT_H

#define RA_GPA 0x100000ull
#define RA_SIZE 0x10000ull
#define RA_UVA 0x40000000ull
#define RB_GPA (RA_GPA + RA_SIZE)
#define RB_SIZE 0x10000ull
#define RB_UVA (RA_UVA + RA_SIZE)
#define RB_OFF 0x1000ull
#define MEM_END (RB_GPA + RB_SIZE)

#define DESC_GPA 0x100000ull
#define AVAIL_GPA 0x101000ull
#define USED_GPA 0x102000ull
#define BUF_GPA 0x104000ull

#endif

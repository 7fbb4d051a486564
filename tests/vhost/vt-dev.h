/* SPDX-License-Identifier: MIT */
/*
 * One vu-front device as the vhost tests, the benchmark and the soak's
 * front ends all bring it up: connect and negotiate, add guest RAM (each
 * its own layout, and anything it sets up first), then send the memory
 * table and lay out and start the queues.  No cmocka: the benchmark and
 * the soak link it too.
 */
#ifndef VT_DEV_H
#define VT_DEV_H

#include <stdbool.h>
#include <stdint.h>

#include "vu-front.h"

#define VT_MAX_VQS 8

struct vt_dev {
	struct vuf_conn *c;
	struct vuf_mem *mem;
	struct vuf_vq vq[VT_MAX_VQS];
	unsigned nvq;
	uint64_t features, protocol;
};

/* Connects (waiting up to timeout_ms for the socket), makes an empty guest
 * RAM and negotiates want & offered (protocol: want_proto & offered). */
int vt_dev_connect(struct vt_dev *dev, const char *sock, int timeout_ms, uint64_t want,
		   uint64_t want_proto);
/* Sends the memory table and lays out nvq queues of qsize in it; starts
 * them unless start is false. */
int vt_dev_start_queues(struct vt_dev *dev, unsigned nvq, uint16_t qsize, bool start);
/* Frees what the two above made, whatever step failed; dev can be opened again. */
void vt_dev_close(struct vt_dev *dev);

#endif

// SPDX-License-Identifier: MIT
/*
 * vhost-churn SOCKET CLIENTS ROUNDS [FIRST_ROUND]: front ends that come and
 * go, for the soak of a long-running vrdma-vhost (blk).
 *
 * Each round connects CLIENTS front ends at once (every one with its own
 * guest RAM memfd, ring, eventfds and, where offered, inflight area), writes
 * a 4 KiB block through each at its own sector, reads it back and checks
 * it (the block is tagged with the round number, counted from FIRST_ROUND,
 * so a write that is lost shows even when the same sector was written in
 * an earlier round), then drops them all: half closed cleanly after stopping the ring
 * (GET_VRING_BASE), half just closed, as a killed QEMU leaves them.  Prints
 * one line per round; exit 0 when every request came back right, 1 if one
 * did not, 2 on bad usage.  The caller watches the daemon's memory and fds
 * between rounds (tests/soak/run).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vt-dev.h"
#include "vu-front.h"

#define RAM_SIZE (1u << 20)
#define QUEUE_SIZE 64
#define BLOCK 4096u
#define TIMEOUT_MS 10000

struct client {
	struct vt_dev dev;	/* one queue */
	struct vuf_blk_req req;
};

static int client_open(struct client *cl, const char *sock)
{
	int ret = vt_dev_connect(&cl->dev, sock, TIMEOUT_MS,
				 VUF_BIT(VUF_F_VERSION_1) | VUF_BIT(VUF_F_EVENT_IDX) |
					 VUF_BIT(VUF_F_INDIRECT_DESC) |
					 VUF_BIT(VUF_F_PROTOCOL_FEATURES),
				 VUF_BIT(VUF_PF_REPLY_ACK) | VUF_BIT(VUF_PF_CONFIG));

	if (!ret)
		ret = vuf_mem_add_region(cl->dev.mem, 0, RAM_SIZE, 0);
	if (!ret)
		ret = vt_dev_start_queues(&cl->dev, 1, QUEUE_SIZE, true);
	if (!ret)
		ret = vuf_blk_req_alloc(cl->dev.mem, BLOCK, &cl->req);
	return ret;
}

static void client_close(struct client *cl, bool cleanly)
{
	uint32_t base;

	if (cleanly && cl->dev.nvq)
		(void)vuf_vq_stop(&cl->dev.vq[0], &base);
	vt_dev_close(&cl->dev);
	memset(cl, 0, sizeof(*cl));
}

/* Writes a block tagged with (round, client) and reads it back. */
static int client_io(struct client *cl, unsigned round, unsigned idx)
{
	uint8_t out[BLOCK], in[BLOCK];
	uint64_t sector = (uint64_t)idx * (BLOCK / VUF_BLK_SECTOR);
	int st;

	for (unsigned i = 0; i < BLOCK; i++)
		out[i] = (uint8_t)(i * 7 + round * 31 + idx);
	st = vuf_blk_io(&cl->dev.vq[0], &cl->req, VUF_BLK_T_OUT, sector, out, BLOCK, idx & 1,
			TIMEOUT_MS);
	if (st != VUF_BLK_S_OK)
		return st < 0 ? st : -EIO;
	memset(in, 0, sizeof(in));
	st = vuf_blk_io(&cl->dev.vq[0], &cl->req, VUF_BLK_T_IN, sector, in, BLOCK, false, TIMEOUT_MS);
	if (st != VUF_BLK_S_OK)
		return st < 0 ? st : -EIO;
	return memcmp(in, out, BLOCK) ? -EILSEQ : 0;
}

int main(int argc, char **argv)
{
	struct client *clients;
	unsigned n, rounds, first = 0;
	int bad = 0;

	if ((argc != 4 && argc != 5) || (n = (unsigned)atoi(argv[2])) == 0 || n > 1000 ||
	    (rounds = (unsigned)atoi(argv[3])) == 0) {
		fprintf(stderr, "usage: vhost-churn SOCKET CLIENTS(1..1000) ROUNDS [FIRST_ROUND]\n");
		return 2;
	}
	if (argc == 5)
		first = (unsigned)atoi(argv[4]);
	clients = calloc(n, sizeof(*clients));
	if (!clients)
		return 1;
	for (unsigned r = 0; r < rounds && !bad; r++) {
		for (unsigned i = 0; i < n && !bad; i++) {
			int ret = client_open(&clients[i], argv[1]);

			if (!ret)
				ret = client_io(&clients[i], first + r, i);
			if (ret) {
				fprintf(stderr, "vhost-churn: round %u client %u: %s\n", r, i,
					strerror(-ret));
				bad = 1;
			}
		}
		for (unsigned i = 0; i < n; i++)
			if (clients[i].dev.c)
				client_close(&clients[i], i & 1);
		printf("round %u: %u front ends served%s\n", first + r, n, bad ? " (FAILED)" : "");
		fflush(stdout);
	}
	free(clients);
	return bad;
}

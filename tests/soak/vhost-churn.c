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

#include "vu-front.h"

#define RAM_SIZE (1u << 20)
#define QUEUE_SIZE 64
#define BLOCK 4096u
#define TIMEOUT_MS 10000

struct client {
	struct vuf_conn *c;
	struct vuf_mem *mem;
	struct vuf_vq vq;
	bool vq_ready;
	struct vuf_blk_req req;
};

static int client_open(struct client *cl, const char *sock)
{
	uint64_t features, protocol;
	int ret;

	ret = vuf_conn_connect(sock, TIMEOUT_MS, &cl->c);
	if (ret)
		return ret;
	cl->mem = vuf_mem_new();
	if (!cl->mem)
		return -ENOMEM;
	ret = vuf_negotiate(cl->c,
			    VUF_BIT(VUF_F_VERSION_1) | VUF_BIT(VUF_F_EVENT_IDX) |
				    VUF_BIT(VUF_F_INDIRECT_DESC) | VUF_BIT(VUF_F_PROTOCOL_FEATURES),
			    VUF_BIT(VUF_PF_REPLY_ACK) | VUF_BIT(VUF_PF_CONFIG),
			    &features, &protocol);
	if (!ret)
		ret = vuf_mem_add_region(cl->mem, 0, RAM_SIZE, 0);
	if (!ret)
		ret = vuf_mem_send_table(cl->mem, cl->c);
	if (!ret)
		ret = vuf_vq_init(&cl->vq, cl->c, cl->mem, 0, QUEUE_SIZE);
	if (ret)
		return ret;
	cl->vq_ready = true;
	ret = vuf_vq_start(&cl->vq);
	if (!ret)
		ret = vuf_blk_req_alloc(cl->mem, BLOCK, &cl->req);
	return ret;
}

static void client_close(struct client *cl, bool cleanly)
{
	uint32_t base;

	if (cleanly && cl->vq_ready)
		(void)vuf_vq_stop(&cl->vq, &base);
	if (cl->vq_ready)
		vuf_vq_destroy(&cl->vq);
	vuf_conn_free(cl->c);
	vuf_mem_free(cl->mem);
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
	st = vuf_blk_io(&cl->vq, &cl->req, VUF_BLK_T_OUT, sector, out, BLOCK, idx & 1, TIMEOUT_MS);
	if (st != VUF_BLK_S_OK)
		return st < 0 ? st : -EIO;
	memset(in, 0, sizeof(in));
	st = vuf_blk_io(&cl->vq, &cl->req, VUF_BLK_T_IN, sector, in, BLOCK, false, TIMEOUT_MS);
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
			if (clients[i].c)
				client_close(&clients[i], i & 1);
		printf("round %u: %u front ends served%s\n", first + r, n, bad ? " (FAILED)" : "");
		fflush(stdout);
	}
	free(clients);
	return bad;
}

// SPDX-License-Identifier: MIT
/*
 * A hostile migration peer, for tests/migrate/hostile: plays the source
 * against a real `vrdma-migrate incoming`, or the destination against a
 * real `vrdma-migrate send`, and misbehaves in one chosen way.  The real
 * engine must refuse (protocol or setup failure), tell its owner to
 * ABORT / RESUME, and exit; this program only has to say its lines.
 *
 *   fake-peer source CASE HOST PORT TRANSPORT
 *   fake-peer dest   CASE HOST PORT TRANSPORT
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "peer-proto.h"
#include "util.h"
#include "xport.h"

#define BLOCK_SIZE (32ull << 20) /* the scenario's guestsim: 64 MiB in 2 blocks */
#define BIG_REGION BLOCK_SIZE
#define TIMEOUT_MS 20000

static _Noreturn void die(const char *what, int err)
{
	fprintf(stderr, "fake-peer: %s: %s\n", what, strerror(-err));
	exit(1);
}

static void send_raw(struct xport_conn *c, unsigned ch, const void *buf, size_t len)
{
	for (int i = 0; i < 1000; i++) {
		struct xport_completion comp;
		int r = xport_send_copy(c, ch, buf, len, 0, 0);

		if (r == 0)
			return;
		if (r != -EAGAIN)
			die("send", r);
		if (xport_poll(c, &comp, 1) < 0)
			return;
		usleep(1000);
	}
}

static void send_msg(struct xport_conn *c, unsigned ch, const struct peer_msg *m)
{
	uint8_t buf[PEER_MAX_MSG];

	send_raw(c, ch, buf, peer_msg_encode(m, buf));
}

/* Next message; 0, or -errno once the real engine hangs up. */
static int recv_msg(struct xport_conn *c, struct peer_msg *m)
{
	uint64_t deadline = monotonic_ns() + TIMEOUT_MS * 1000000ull;

	while (monotonic_ns() < deadline) {
		struct xport_completion comp;
		int r = xport_poll(c, &comp, 1);

		if (r < 0)
			return r;
		if (r == 1 && comp.op == XPORT_OP_RECV)
			return peer_msg_decode(comp.data, comp.len, m) < 0 ? -EBADMSG : 0;
		if (r == 0)
			xport_wait(c, 100);
	}
	return -ETIMEDOUT;
}

/* Waits until the real engine closes the connection (its verdict). */
static int wait_hangup(struct xport_conn *c)
{
	struct peer_msg m;
	int r;

	while ((r = recv_msg(c, &m)) == 0)
		if (m.type == PEER_MSG_FAIL)
			fprintf(stderr, "fake-peer: engine says FAIL (%s)\n", strerror(m.u.error));
	return r == -ETIMEDOUT ? 1 : 0;
}

static void send_layout(struct xport_conn *c, uint32_t nblocks, uint64_t size, uint32_t flags)
{
	struct peer_msg m = {
		.type = PEER_MSG_LAYOUT,
		.u.layout = { .version = PEER_PROTO_VERSION, .nblocks = nblocks, .flags = flags },
	};

	send_msg(c, 0, &m);
	for (uint32_t i = 0; i < nblocks; i++) {
		m = (struct peer_msg){ .type = PEER_MSG_BLOCK };
		m.u.block.index = i;
		m.u.block.page_size = 4096;
		m.u.block.size = size;
		snprintf(m.u.block.name, sizeof(m.u.block.name), "ram%u", i);
		send_msg(c, 0, &m);
	}
}

static int fake_source(const char *kase, struct xport_conn *c)
{
	struct peer_msg m = { 0 };

	if (!strcmp(kase, "garbage")) {
		send_raw(c, 0, "not a peer message at all", 25);
	} else if (!strcmp(kase, "layout-mismatch")) {
		send_layout(c, 2, BLOCK_SIZE * 2, 0); /* blocks twice the owner's */
	} else if (!strcmp(kase, "done-bad-channel") || !strcmp(kase, "done-twice") ||
		   !strcmp(kase, "commit-early") || !strcmp(kase, "done-other-channel")) {
		send_layout(c, 2, BLOCK_SIZE, 0);
		for (int i = 0; i < 2; i++)
			if (recv_msg(c, &m) < 0 || m.type != PEER_MSG_REGION)
				die("expected REGION", -EPROTO);
		m = (struct peer_msg){ .type = PEER_MSG_DONE };
		if (!strcmp(kase, "commit-early")) {
			m.type = PEER_MSG_COMMIT;
		} else if (!strcmp(kase, "done-bad-channel")) {
			m.u.done.channel = 9;
		} else if (!strcmp(kase, "done-other-channel")) {
			/* Channel 1's DONE, sent on channel 0: it would vouch for
			 * writes it is not behind. */
			m.u.done.channel = 1;
		} else {
			send_msg(c, 0, &m);
		}
		send_msg(c, 0, &m);
	} else if (!strcmp(kase, "pages-outside") || !strcmp(kase, "pages-unasked") ||
		   !strcmp(kase, "pages-long")) {
		/* PAGES naming the last granule of block 1 and one past it (a
		 * read beyond the guest's RAM), a run longer than a stripe (a
		 * message asking for unbounded work), or any PAGES without
		 * --verify. */
		bool asked = strcmp(kase, "pages-unasked") != 0;
		bool outside = !strcmp(kase, "pages-outside");

		send_layout(c, 2, BLOCK_SIZE, asked ? PEER_FLAG_VERIFY_PAGES : 0);
		for (int i = 0; i < 2; i++)
			if (recv_msg(c, &m) < 0 || m.type != PEER_MSG_REGION)
				die("expected REGION", -EPROTO);
		m = (struct peer_msg){ .type = PEER_MSG_PAGES, .u.pages.nruns = 1 };
		m.u.pages.run[0] = (struct peer_run){
			.block = 1, .first = outside ? BLOCK_SIZE / 4096 - 1 : 0,
			.count = outside ? 2 : asked ? (1u << 20) / 4096 + 1 : 1,
		};
		send_msg(c, 0, &m);
	} else if (!strcmp(kase, "round-end-twice")) {
		/* One channel ends round 0 twice: the round cannot have landed. */
		send_layout(c, 2, BLOCK_SIZE, PEER_FLAG_ROUND_LANDED);
		for (int i = 0; i < 2; i++)
			if (recv_msg(c, &m) < 0 || m.type != PEER_MSG_REGION)
				die("expected REGION", -EPROTO);
		m = (struct peer_msg){ .type = PEER_MSG_ROUND_END };
		send_msg(c, 0, &m);
		send_msg(c, 0, &m);
	} else {
		return 2;
	}
	return wait_hangup(c);
}

/* The real source sends its layout first; answer it with the given lie. */
static int fake_dest(const char *kase, struct xport_conn *c)
{
	static uint8_t small[4096] __attribute__((aligned(4096)));
	/* Read-only, but large enough for any block: only access can refuse it. */
	bool readonly = !strcmp(kase, "region-readonly");
	size_t len = readonly ? BIG_REGION : sizeof(small);
	void *ram = readonly ? mmap(NULL, len, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
			     : small;
	struct xport_mr *mr;
	struct peer_msg m;
	int r;

	if (ram == MAP_FAILED)
		die("mmap", -errno);
	for (int i = 0; i < 3; i++)
		if (recv_msg(c, &m) < 0)
			die("layout", -EPROTO);
	r = xport_mr_reg(c, ram, len,
			 readonly ? XPORT_ACCESS_REMOTE_READ : XPORT_ACCESS_REMOTE_WRITE, &mr);
	if (r < 0)
		die("register", r);
	m = (struct peer_msg){ .type = PEER_MSG_REGION };
	if (!strcmp(kase, "region-small") || !strcmp(kase, "region-readonly")) {
		/* A region far smaller than the 32 MiB block, or not writable. */
		xport_mr_describe(mr, m.u.region.desc);
	} else if (!strcmp(kase, "region-garbage")) {
		memset(m.u.region.desc, 0x5a, sizeof(m.u.region.desc));
	} else if (!strcmp(kase, "unsolicited")) {
		m = (struct peer_msg){ .type = PEER_MSG_READY };
	} else {
		return 2;
	}
	send_msg(c, 0, &m);
	return wait_hangup(c);
}

int main(int argc, char **argv)
{
	struct xport_opts o;
	struct xport_conn *c;
	int r;

	if (argc != 6) {
		fprintf(stderr, "usage: fake-peer source|dest CASE HOST PORT TRANSPORT\n");
		return 2;
	}
	xport_opts_init(&o);
	if (xport_kind_parse(argv[5], &o.kind) < 0)
		return 2;
	o.channels = 4;
	o.timeout_ms = TIMEOUT_MS;
	if (!strcmp(argv[1], "source")) {
		r = xport_connect(&o, argv[3], argv[4], &c);
		if (r < 0)
			die("connect", r);
		r = fake_source(argv[2], c);
	} else {
		struct xport_listener *l;

		r = xport_listen(&o, argv[3], argv[4], &l);
		if (r == 0)
			r = xport_accept(l, TIMEOUT_MS, &c);
		if (r < 0)
			die("listen/accept", r);
		xport_listener_close(l);
		r = fake_dest(argv[2], c);
	}
	xport_conn_close(c);
	return r;
}

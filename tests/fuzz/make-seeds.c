// SPDX-License-Identifier: MIT
/*
 * Writes the seed corpora of the fuzz targets: small valid inputs, made
 * with the project's own encoders where it has them (xport, owner, peer,
 * vhost-user headers, the state file), else laid out by the wire specs.
 *
 *   make-seeds DIR      writes DIR/<target>/<name> (tests/fuzz/corpus)
 */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "owner-proto.h"
#include "peer-proto.h"
#include "rdma-internal.h"
#include "rdma-state.h"
#include "sriov-internal.h"
#include "vu-internal.h"
#include "xport-wire.h"

static const char *root;

static void seed(const char *target, const char *name, const void *a, size_t na,
		 const void *b, size_t nb)
{
	g_autofree char *dir = g_build_filename(root, target, NULL);
	g_autofree char *path = g_build_filename(dir, name, NULL);
	g_autofree uint8_t *buf = g_malloc(na + nb + 1);

	memcpy(buf, a, na);
	if (nb)
		memcpy(buf + na, b, nb);
	if (g_mkdir_with_parents(dir, 0755) < 0 ||
	    !g_file_set_contents(path, (const char *)buf, (gssize)(na + nb), NULL)) {
		fprintf(stderr, "make-seeds: cannot write %s\n", path);
		exit(1);
	}
}

/* ---- fuzz-xport-wire: [decoder] bytes ---- */

static void xport_seeds(void)
{
	const struct xport_hello h = { 1, 4, 65536, 256, 0x1122334455667788ull };
	const struct xport_welcome w = { 0, 65536 };
	const struct xport_region_wire r = { XPORT_KIND_TCP, 3, 7, 0xabcd, 0x7f0000000000ull,
					     1ull << 30 };
	const char *specs[] = { "10.0.0.1:4791", "[fe80::1]:18515", ":7000", "host.example:0" };
	uint8_t out[64], sel;
	char name[32];

	sel = 0, xport_hello_encode(&h, out), seed("fuzz-xport-wire", "hello", &sel, 1, out,
						     XPORT_HELLO_SIZE);
	sel = 1, xport_welcome_encode(&w, out), seed("fuzz-xport-wire", "welcome", &sel, 1, out,
						       XPORT_WELCOME_SIZE);
	sel = 2, xport_region_encode(&r, out), seed("fuzz-xport-wire", "region", &sel, 1, out,
						     XPORT_REGION_DESC_SIZE);
	for (uint8_t op = XPORT_FRAME_SEND; op <= XPORT_FRAME_READ_RESP; op++) {
		const struct xport_frame f = { op, 4096, 3, 0xabcd, 8192, 42 };

		out[0] = 3;
		memcpy(out + 1, (uint8_t[]){ 0, 0, 1, 0 }, 4); /* max_msg 65536 */
		xport_frame_encode(&f, out + 5);
		snprintf(name, sizeof(name), "frame-%u", op);
		seed("fuzz-xport-wire", name, out, 5 + XPORT_FRAME_SIZE, NULL, 0);
	}
	for (size_t i = 0; i < G_N_ELEMENTS(specs); i++) {
		sel = 4;
		snprintf(name, sizeof(name), "hostport-%zu", i);
		seed("fuzz-xport-wire", name, &sel, 1, specs[i], strlen(specs[i]));
	}
}

/* ---- fuzz-xport-auth: [decoder] bytes ---- */

static void auth_seeds(void)
{
	static const char psk[] = "# psktool -u vrdma -p keys.psk\n"
				  "vrdma:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"
				  "src-b:00112233445566778899AABBCCDDEEFF\r\n";
	static const uint16_t flags[] = {
		XPORT_HELLO_F_BOUND,
		XPORT_HELLO_F_BOUND | XPORT_HELLO_F_ENCRYPT,
		XPORT_HELLO_F_BOUND | XPORT_HELLO_F_AUTH,
	};
	uint8_t out[1 + 56] = { 0 };
	char name[32];

	for (size_t i = 0; i < G_N_ELEMENTS(flags); i++) {
		struct xport_hello h = { 0, 4, 65536, 256, 0x1122334455667788ull, flags[i] };

		memset(out, 0, sizeof(out));
		out[0] = 0;
		xport_hello_encode(&h, out + 1);
		memset(out + 1 + XPORT_HELLO_SIZE, 0xa5, XPORT_TAG_SIZE);
		snprintf(name, sizeof(name), "bound-hello-%zu", i);
		/* 48 bytes as tcp sends it, 56 as rdma_cm hands it over. */
		seed("fuzz-xport-auth", name, out, 1 + XPORT_BOUND_HELLO_SIZE, NULL, 0);
		snprintf(name, sizeof(name), "bound-hello-%zu-cm", i);
		seed("fuzz-xport-auth", name, out, sizeof(out), NULL, 0);
	}
	out[0] = 1;
	xport_challenge_encode(0x0123456789abcdefull, out + 1);
	seed("fuzz-xport-auth", "challenge", out, 1 + XPORT_CHALLENGE_SIZE, NULL, 0);
	out[0] = 2;
	seed("fuzz-xport-auth", "psk-file", out, 1, psk, sizeof(psk) - 1);
}

/* ---- fuzz-owner-proto: [nfds] packet; fuzz-peer-proto: message ---- */

static void owner_seed(const struct owner_msg *m)
{
	uint8_t buf[OWNER_MAX_MSG];
	uint8_t nfds = (uint8_t)owner_msg_nfds(m->type);
	size_t n = owner_msg_encode(m, buf);

	seed("fuzz-owner-proto", owner_msg_name(m->type), &nfds, 1, buf, n);
}

static void owner_seeds(void)
{
	static const struct owner_msg msgs[] = {
		{ .type = OWNER_MSG_HELLO,
		  .u.hello = { OWNER_PROTO_VERSION, OWNER_ROLE_SOURCE, OWNER_CAPS_KNOWN } },
		{ .type = OWNER_MSG_WELCOME,
		  .u.welcome = { OWNER_PROTO_VERSION, OWNER_ROLE_SOURCE, OWNER_CAPS_KNOWN, 2 } },
		{ .type = OWNER_MSG_BLOCK,
		  .u.block = { 1, 4096, 1ull << 30, 1ull << 30, 32768, "pc.ram" } },
		{ .type = OWNER_MSG_SYNC, .u.round = 3 },
		{ .type = OWNER_MSG_THROTTLE, .u.percent = 50 },
		{ .type = OWNER_MSG_STOP },
		{ .type = OWNER_MSG_RESUME, .u.error = 110 },
		{ .type = OWNER_MSG_COMPLETED },
		{ .type = OWNER_MSG_ABORT, .u.error = 0 },
		{ .type = OWNER_MSG_BITMAP, .u.bitmap_size = 65536 },
		{ .type = OWNER_MSG_ROUND_READY, .u.ready = { .round = 3, .dirty_pages = 100 } },
		{ .type = OWNER_MSG_STOPPED },
	};

	for (size_t i = 0; i < G_N_ELEMENTS(msgs); i++)
		owner_seed(&msgs[i]);
}

static void peer_seed(const char *name, const struct peer_msg *m)
{
	uint8_t buf[PEER_MAX_MSG];

	seed("fuzz-peer-proto", name, buf, peer_msg_encode(m, buf), NULL, 0);
}

static void peer_seeds(void)
{
	const struct xport_region_wire r = { XPORT_KIND_RDMA, 2, 1, 0x1234, 0x7f0000000000ull,
					     1ull << 30 };
	struct peer_msg m;

	m = (struct peer_msg){ .type = PEER_MSG_LAYOUT };
	m.u.layout.version = PEER_PROTO_VERSION, m.u.layout.nblocks = 2;
	m.u.layout.flags = PEER_FLAG_VERIFY;
	peer_seed("layout", &m);
	m = (struct peer_msg){ .type = PEER_MSG_BLOCK };
	m.u.block.index = 1, m.u.block.page_size = 4096, m.u.block.size = 1ull << 30;
	strcpy(m.u.block.name, "pc.ram");
	peer_seed("block", &m);
	m = (struct peer_msg){ .type = PEER_MSG_REGION };
	m.u.region.index = 1;
	xport_region_encode(&r, m.u.region.desc);
	peer_seed("region", &m);
	m = (struct peer_msg){ .type = PEER_MSG_PROGRESS };
	m.u.progress.round = 2, m.u.progress.bytes = 1 << 20;
	peer_seed("progress", &m);
	m = (struct peer_msg){ .type = PEER_MSG_DONE };
	m.u.done.channel = 1, m.u.done.rounds = 4, m.u.done.bytes = 1 << 30;
	peer_seed("done", &m);
	m = (struct peer_msg){ .type = PEER_MSG_HASHES };
	m.u.hashes.nblocks = 2, m.u.hashes.hash[0] = 1, m.u.hashes.hash[1] = 2;
	peer_seed("hashes", &m);
	m = (struct peer_msg){ .type = PEER_MSG_READY };
	peer_seed("ready", &m);
	m = (struct peer_msg){ .type = PEER_MSG_COMMIT };
	peer_seed("commit", &m);
	m = (struct peer_msg){ .type = PEER_MSG_COMMITTED };
	peer_seed("committed", &m);
	m = (struct peer_msg){ .type = PEER_MSG_FAIL, .u.error = 5 };
	peer_seed("fail", &m);
	m = (struct peer_msg){ .type = PEER_MSG_PAGES };
	m.u.pages.round = 1, m.u.pages.nruns = 2;
	m.u.pages.run[0] = (struct peer_run){ .block = 0, .count = 256, .first = 0 };
	m.u.pages.run[1] = (struct peer_run){ .block = 1, .count = 1, .first = 4095 };
	peer_seed("pages", &m);
}

/* ---- fuzz-vu-proto: [num_queues][nfds][chunk][fd_chunk] stream ---- */

struct stream {
	uint8_t b[8192];
	size_t n;
};

static void vu_add(struct stream *s, uint32_t req, uint32_t flags, const void *p, uint32_t size)
{
	s->n += vu_encode_backend_msg(s->b + s->n, req, flags, p, size);
}

static void vu_one(uint8_t nfds, uint32_t req, const void *p, uint32_t size)
{
	struct stream s = { .n = 4 };

	memcpy(s.b, (uint8_t[]){ 1, nfds, 0, 0 }, 4);
	vu_add(&s, req, 0, p, size);
	seed("fuzz-vu-proto", vu_request_name(req), s.b, s.n, NULL, 0);
}

static void vu_seeds(void)
{
	uint8_t p[VU_MAX_PAYLOAD] = { 0 };
	struct stream s = { .n = 4 };
	uint64_t feat = 1ull << VU_F_VERSION_1 | 1ull << VU_F_PROTOCOL_FEATURES;

	vu_one(0, VU_GET_FEATURES, NULL, 0);
	vu_one(0, VU_SET_FEATURES, &feat, 8);
	vu_one(0, VU_SET_OWNER, NULL, 0);
	/* one region: gpa 0, 1 MiB, uva 0x7f0000000000, offset 0 */
	memset(p, 0, sizeof(p));
	p[0] = 1;
	memcpy(p + 16, (uint64_t[]){ 1 << 20, 0x7f0000000000ull, 0 }, 24);
	vu_one(1, VU_SET_MEM_TABLE, p, 40);
	memset(p, 0, sizeof(p));
	p[0] = 0, p[4] = 0, p[5] = 1; /* index 0, num 256 */
	vu_one(0, VU_SET_VRING_NUM, p, 8);
	vu_one(0, VU_SET_VRING_BASE, p, 8);
	vu_one(0, VU_GET_VRING_BASE, p, 8);
	memset(p, 0, 40);
	memcpy(p + 8, (uint64_t[]){ 0x7f0000000000ull, 0x7f0000002000ull, 0x7f0000001000ull,
				    0x2000 }, 32);
	vu_one(0, VU_SET_VRING_ADDR, p, 40);
	memset(p, 0, 8);
	vu_one(1, VU_SET_VRING_KICK, p, 8);
	vu_one(1, VU_SET_VRING_CALL, p, 8);
	p[1] = 1; /* NOFD */
	vu_one(0, VU_SET_VRING_ERR, p, 8);
	memset(p, 0, 16);
	p[1] = 0x10; /* 4 KiB log */
	vu_one(1, VU_SET_LOG_BASE, p, 16);
	memset(p, 0, 12);
	p[4] = 8; /* offset 0, size 8 */
	vu_one(0, VU_GET_CONFIG, p, 20);
	vu_one(0, VU_SET_CONFIG, p, 20);
	memset(p, 0, 24);
	p[1] = 0x10, p[16] = 1, p[18] = 0, p[19] = 1;
	vu_one(1, VU_SET_INFLIGHT_FD, p, 24);
	vu_one(0, VU_GET_INFLIGHT_FD, p, 24);
	memset(p, 0, 40);
	memcpy(p + 8, (uint64_t[]){ 1 << 20, 1 << 20, 0x7f0000100000ull, 0 }, 32);
	vu_one(1, VU_ADD_MEM_REG, p, 40);
	vu_one(0, VU_REM_MEM_REG, p, 40);
	vu_one(0, VU_SET_STATUS, (uint64_t[]){ 15 }, 8);
	vu_one(0, VU_GET_STATUS, NULL, 0);
	vu_one(1, VU_SET_BACKEND_REQ_FD, NULL, 0);
	/* A session's start, dribbled 5 bytes at a time, the fd with chunk 2. */
	memcpy(s.b, (uint8_t[]){ 2, 1, 5, 2 }, 4);
	vu_add(&s, VU_GET_FEATURES, 0, NULL, 0);
	vu_add(&s, VU_SET_OWNER, 0, NULL, 0);
	vu_add(&s, VU_SET_BACKEND_REQ_FD, VU_FLAG_NEED_REPLY, NULL, 0);
	vu_add(&s, VU_GET_QUEUE_NUM, 0, NULL, 0);
	vu_add(&s, VU_SET_VRING_ENABLE, 0, (uint64_t[]){ 1ull << 32 | 1 }, 8);
	seed("fuzz-vu-proto", "session", s.b, s.n, NULL, 0);
}

/* ---- fuzz-rdma-check: [mode][knob] bytes ---- */

static void rdma_cmd(const char *name, uint16_t op, const void *fixed, size_t n,
		     const uint64_t *pages, size_t np)
{
	uint8_t b[2 + 8 + 128 + 8 * 64] = { 0, 0 };

	memcpy(b + 2, &op, 2);
	if (n)
		memcpy(b + 10, fixed, n);
	if (np)
		memcpy(b + 10 + n, pages, 8 * np);
	seed("fuzz-rdma-check", name, b, 10 + n + 8 * np, NULL, 0);
}

static void rdma_seeds(void)
{
	uint64_t pages[64];
	const struct vrdma_handle h = { 1, 0 };
	const struct vrdma_port_req port = { 1, { 0 } };
	const struct vrdma_gid_req gid = { 1, 0, 0, 0 };
	const struct vrdma_reg_mr_req mr = { 1, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_READ,
					     0x7f0000000800ull, 8192, 12, 3 };
	const struct vrdma_create_cq_req cq = { 6, 2, 0, 0 }; /* 384 + 64 * 64 bytes */
	struct vrdma_create_qp_req qp = {
		.pd = 1, .send_cq = 1, .recv_cq = 2, .qp_type = VRDMA_QPT_RC,
		.max_send_sge = 2, .max_recv_sge = 2, .max_inline_data = 32,
		.sq_log2_slots = 4, .sq_log2_slot_size = 8, .rq_log2_slots = 4,
		.rq_log2_slot_size = 7, .sq_npages = 2, .rq_npages = 1,
	};
	struct vrdma_modify_qp_req mq = { .qp = 1, .attr_mask = 1 };
	uint8_t slot[2 + 512] = { 0 };

	for (size_t i = 0; i < G_N_ELEMENTS(pages); i++)
		pages[i] = 0x100000000ull + 0x3000 * i;
	rdma_cmd("query-device", VRDMA_CMD_QUERY_DEVICE, NULL, 0, NULL, 0);
	rdma_cmd("query-port", VRDMA_CMD_QUERY_PORT, &port, sizeof(port), NULL, 0);
	rdma_cmd("query-gid", VRDMA_CMD_QUERY_GID, &gid, sizeof(gid), NULL, 0);
	rdma_cmd("create-pd", VRDMA_CMD_CREATE_PD, NULL, 0, NULL, 0);
	rdma_cmd("destroy-pd", VRDMA_CMD_DESTROY_PD, &h, sizeof(h), NULL, 0);
	rdma_cmd("reg-mr", VRDMA_CMD_REG_MR, &mr, sizeof(mr), pages, 3);
	rdma_cmd("dereg-mr", VRDMA_CMD_DEREG_MR, &h, sizeof(h), NULL, 0);
	rdma_cmd("create-cq", VRDMA_CMD_CREATE_CQ, &cq, sizeof(cq), pages, 2);
	rdma_cmd("destroy-cq", VRDMA_CMD_DESTROY_CQ, &h, sizeof(h), NULL, 0);
	rdma_cmd("create-qp", VRDMA_CMD_CREATE_QP, &qp, sizeof(qp), pages, 3);
	mq.attr.qp_state = 1; /* INIT */
	mq.attr.qp_access_flags = VRDMA_ACCESS_REMOTE_WRITE;
	mq.attr.port_num = 1;
	mq.attr_mask = 1 | 16 | 32 | 8; /* STATE, PKEY_INDEX, PORT, ACCESS_FLAGS */
	rdma_cmd("modify-qp-init", VRDMA_CMD_MODIFY_QP, &mq, sizeof(mq), NULL, 0);
	rdma_cmd("query-qp", VRDMA_CMD_QUERY_QP, &h, sizeof(h), NULL, 0);
	rdma_cmd("destroy-qp", VRDMA_CMD_DESTROY_QP, &h, sizeof(h), NULL, 0);

	/* A SEND with two SGEs, a slot of 256 bytes (knob: max_sge 2). */
	slot[0] = 1, slot[1] = 1;
	slot[2 + VRDMA_SWQE_OPCODE] = VRDMA_WR_SEND;
	slot[2 + VRDMA_SWQE_SEND_FLAGS] = 2; /* SIGNALED */
	slot[2 + VRDMA_SWQE_DMA_NUM_SGE] = 2;
	memcpy(slot + 2 + VRDMA_SWQE_SGE, (uint64_t[]){ 0x1000, 64 | 0x77ull << 32, 0x2000,
							 32 | 0x77ull << 32 }, 32);
	seed("fuzz-rdma-check", "send-wqe", slot, 2 + 256, NULL, 0);
	/* Inline RDMA WRITE, 16 bytes (knob 0x61: max_inline 108). */
	memset(slot, 0, sizeof(slot));
	slot[0] = 1, slot[1] = 0x61;
	slot[2 + VRDMA_SWQE_OPCODE] = VRDMA_WR_RDMA_WRITE;
	slot[2 + VRDMA_SWQE_SEND_FLAGS] = 8 | 2; /* INLINE | SIGNALED */
	slot[2 + VRDMA_SWQE_DMA_LENGTH] = 16;
	seed("fuzz-rdma-check", "send-inline", slot, 2 + 512, NULL, 0);
	/* Atomic fetch-and-add, one aligned 8-byte SGE (atomics: knob odd). */
	memset(slot, 0, sizeof(slot));
	slot[0] = 1, slot[1] = 1;
	slot[2 + VRDMA_SWQE_OPCODE] = VRDMA_WR_ATOMIC_FETCH_AND_ADD;
	slot[2 + VRDMA_SWQE_REMOTE_ADDR] = 0x40;
	slot[2 + VRDMA_SWQE_DMA_NUM_SGE] = 1;
	memcpy(slot + 2 + VRDMA_SWQE_SGE, (uint64_t[]){ 0x1000, 8 | 0x77ull << 32 }, 16);
	seed("fuzz-rdma-check", "send-atomic", slot, 2 + 256, NULL, 0);
	/* A receive WQE with one SGE. */
	memset(slot, 0, sizeof(slot));
	slot[0] = 2, slot[1] = 1;
	slot[2 + VRDMA_RWQE_DMA_NUM_SGE] = 1;
	memcpy(slot + 2 + VRDMA_RWQE_SGE, (uint64_t[]){ 0x1000, 4096 | 0x77ull << 32 }, 16);
	seed("fuzz-rdma-check", "recv-wqe", slot, 2 + 128, NULL, 0);
}

/* Mode 3: a device state with rdma_cm records (a listen, an ended
 * connection, its request and its final event). */
static void rdma_state_seeds(void)
{
	const uint8_t head[2] = { 3, 0 };
	const uint32_t pd = 1u << RDMA_HANDLE_INDEX_BITS | 1, conn = 1u << RDMA_HANDLE_INDEX_BITS | 2;
	struct rdma_state_cm_event ev = {
		.ev = { .type = VRDMA_CM_EV_CONNECT_REQUEST, .conn = conn, .listen = pd,
			.local_ip = { 192, 0, 2, 1 }, .local_port = 7471 },
	};
	struct rdma_state_writer w;
	g_autofree uint8_t *data = NULL;
	size_t len;

	rdma_state_begin(&w, 7);
	rdma_state_put_pd(&w, pd);
	rdma_state_put_cm_listen(&w, &(struct rdma_state_cm_listen){ pd, 7471, 4 });
	rdma_state_put_cm_conn(&w, &(struct rdma_state_cm_conn){ .handle = conn, .listen = pd });
	rdma_state_put_cm_event(&w, &ev);
	ev.ev.type = VRDMA_CM_EV_CLOSED;
	ev.ev.status = 103;
	ev.final = true;
	rdma_state_put_cm_event(&w, &ev);
	data = rdma_state_end(&w, &len);
	seed("fuzz-rdma-check", "state-cm", head, sizeof(head), data, len);
}

/* ---- fuzz-sriov: [mode] bytes ---- */

static void sriov_seeds(void)
{
	const char *attrs[] = { "8\n", "-1\n", "0\n", "0000:3b:00.2\n", "mlx5_0\n", "ens1f0v3" };
	struct sriov_pool *pool = sriov_pool_new();
	struct sriov_record r = { "0000:3b:00.3", SRIOV_POOL_ASSIGNED, "tenant-a", 1763942400 };
	g_autofree char *text = NULL;
	char name[32];
	uint8_t sel = 0;

	for (size_t i = 0; i < G_N_ELEMENTS(attrs); i++) {
		snprintf(name, sizeof(name), "attr-%zu", i);
		seed("fuzz-sriov", name, &sel, 1, attrs[i], strlen(attrs[i]));
	}
	g_ptr_array_add(pool->members, g_strdup("0000:3b:00.2"));
	g_ptr_array_add(pool->members, g_strdup("0000:3b:00.3"));
	g_ptr_array_add(pool->members, g_strdup("rxe0"));
	g_array_append_val(pool->records, r);
	r = (struct sriov_record){ "rxe0", SRIOV_POOL_DIRTY, "tenant-b", 1763942401 };
	g_array_append_val(pool->records, r);
	text = sriov_state_format(pool);
	sel = 1;
	seed("fuzz-sriov", "state", &sel, 1, text, strlen(text));
	sriov_pool_free(pool);
}

/* ---- fuzz-vu-vq: [num][features][base] desc table, avail ring, buffers ---- */

#define VQ_NUM 8u
#define BUF_GPA 0x104000ull

static void vq_desc(uint8_t *t, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
		    uint16_t next)
{
	memcpy(t + 16 * i, &addr, 8);
	memcpy(t + 16 * i + 8, &len, 4);
	memcpy(t + 16 * i + 12, &flags, 2);
	memcpy(t + 16 * i + 14, &next, 2);
}

static void vq_seeds(void)
{
	enum { NEXT = 1, WRITE = 2, INDIRECT = 4 };
	uint8_t b[4 + 16 * VQ_NUM + 6 + 2 * VQ_NUM + 256] = { 0 };
	uint8_t *desc = b + 4, *avail = desc + 16 * VQ_NUM, *buf = avail + 6 + 2 * VQ_NUM;
	uint16_t heads[] = { 0, 3, 5 };

	b[0] = 3;     /* 8 entries */
	b[1] = 1 | 2; /* INDIRECT_DESC, EVENT_IDX */
	/* 0: out 64 -> in 512; 3: indirect table of 2 at BUF_GPA; 5: one in */
	vq_desc(desc, 0, BUF_GPA + 0x1000, 64, NEXT, 1);
	vq_desc(desc, 1, BUF_GPA + 0x2000, 512, WRITE, 0);
	vq_desc(desc, 3, BUF_GPA, 32, INDIRECT, 0);
	vq_desc(desc, 5, 0x110000, 4096, WRITE, 0); /* in region B */
	vq_desc(buf, 0, BUF_GPA + 0x3000, 16, NEXT, 1);
	vq_desc(buf, 1, BUF_GPA + 0x4000, 128, WRITE, 0);
	avail[2] = 3; /* idx */
	for (unsigned i = 0; i < 3; i++)
		memcpy(avail + 4 + 2 * i, &heads[i], 2);
	avail[4 + 2 * VQ_NUM] = 1; /* used_event */
	seed("fuzz-vu-vq", "chains", b, sizeof(b), NULL, 0);
	b[1] = 0; /* neither feature */
	seed("fuzz-vu-vq", "chains-plain", b, sizeof(b), NULL, 0);
	/* base 0xfffe: the avail index wraps */
	b[1] = 3, b[2] = 0xfe, b[3] = 0xff;
	memcpy(avail + 2, (uint16_t[]){ 1 }, 2);
	memcpy(avail + 4 + 2 * 6, &heads[0], 2);
	memcpy(avail + 4 + 2 * 7, &heads[1], 2);
	memcpy(avail + 4, &heads[2], 2);
	seed("fuzz-vu-vq", "wrap", b, sizeof(b), NULL, 0);
}

/* ---- fuzz-vu-dev: records of messages+fds, guest RAM writes, kicks ---- */

static void rec_msgs(struct stream *s, uint8_t head, const struct stream *msgs)
{
	s->b[s->n++] = head;
	s->b[s->n++] = (uint8_t)msgs->n;
	s->b[s->n++] = (uint8_t)(msgs->n >> 8);
	memcpy(s->b + s->n, msgs->b, msgs->n);
	s->n += msgs->n;
}

static void rec_ram(struct stream *s, uint32_t gpa, const void *p, uint8_t n)
{
	s->b[s->n++] = 0x80;
	s->b[s->n++] = (uint8_t)(gpa / 16);
	s->b[s->n++] = (uint8_t)(gpa / 16 >> 8);
	s->b[s->n++] = n;
	memcpy(s->b + s->n, p, n);
	s->n += n;
}

/* A virtio-blk request of type at RAM 0: header, 512 bytes, status. */
static void blk_request(struct stream *s, uint32_t type)
{
	uint8_t desc[48] = { 0 }, hdr[16] = { 0 };
	uint16_t avail[3] = { 0, 1, 0 };

	vq_desc(desc, 0, 0x4000, 16, 1, 1);
	vq_desc(desc, 1, 0x5000, 512, type ? 1 : 1 | 2, 2);
	vq_desc(desc, 2, 0x6000, 1, 2, 0);
	memcpy(hdr, &type, 4);
	hdr[8] = 1; /* sector 1 */
	rec_ram(s, 0x0, desc, sizeof(desc));
	rec_ram(s, 0x4000, hdr, sizeof(hdr));
	rec_ram(s, 0x6000, (uint8_t[]){ 0xff }, 1); /* the device overwrites it */
	rec_ram(s, 0x1000, avail, sizeof(avail));
	s->b[s->n++] = 0x81;
}

/* A record of one message (see rec_msgs). */
static void rec_one(struct stream *s, uint8_t head, uint32_t req, uint32_t flags,
		    const void *p, uint32_t size)
{
	struct stream m = { .n = 0 };

	vu_add(&m, req, flags, p, size);
	rec_msgs(s, head, &m);
}

/*
 * Queue 0 of 8 entries from index 0, its rings at uva (desc, avail at
 * +0x1000, used at +0x2000); addr_flags 1 logs the used ring.
 */
static void rec_queue0(struct stream *s, uint64_t uva, uint8_t addr_flags)
{
	struct stream m = { .n = 0 };
	uint8_t p[40] = { 0 };

	vu_add(&m, VU_SET_VRING_NUM, 0, (uint32_t[]){ 0, 8 }, 8);
	p[4] = addr_flags;
	memcpy(p + 8, (uint64_t[]){ uva, uva + 0x2000, uva + 0x1000, 0x2000 }, 32);
	vu_add(&m, VU_SET_VRING_ADDR, 0, p, 40);
	vu_add(&m, VU_SET_VRING_BASE, 0, (uint32_t[]){ 0, 0 }, 8);
	rec_msgs(s, 0x00, &m);
}

static void dev_seeds(void)
{
	const uint64_t uva = 0x7f0000000000ull;
	uint64_t feat = 1ull << VU_F_VERSION_1;
	struct stream s = { .n = 1 }, m = { 0 }; /* b[0] = 0: blk */
	uint8_t p[128] = { 0 };

	vu_add(&m, VU_GET_FEATURES, 0, NULL, 0);
	vu_add(&m, VU_SET_FEATURES, 0, &feat, 8);
	vu_add(&m, VU_SET_OWNER, 0, NULL, 0);
	vu_add(&m, VU_GET_QUEUE_NUM, 0, NULL, 0);
	rec_msgs(&s, 0x00, &m);
	p[0] = 1;
	memcpy(p + 8, (uint64_t[]){ 0, 1 << 20, uva, 0 }, 32);
	rec_one(&s, 0x01, VU_SET_MEM_TABLE, 0, p, 40);
	rec_queue0(&s, uva, 0);
	rec_one(&s, 0x41, VU_SET_VRING_CALL, 0, (uint64_t[]){ 0 }, 8);
	rec_one(&s, 0x41, VU_SET_VRING_KICK, 0, (uint64_t[]){ 0 }, 8);
	{
		struct stream r = s;

		blk_request(&r, 0); /* read */
		seed("fuzz-vu-dev", "blk-read", r.b, r.n, NULL, 0);
		r = s;
		blk_request(&r, 1); /* write */
		seed("fuzz-vu-dev", "blk-write", r.b, r.n, NULL, 0);
		/* rng: the same setup, one device-writable buffer of 64 bytes. */
		r = s;
		r.b[0] = 1;
		vq_desc(p, 0, 0x5000, 64, 2, 0);
		rec_ram(&r, 0x0, p, 16);
		rec_ram(&r, 0x1000, (uint16_t[]){ 0, 1, 0 }, 6);
		r.b[r.n++] = 0x81;
		seed("fuzz-vu-dev", "rng-read", r.b, r.n, NULL, 0);
	}
	/* Config space, inflight area, queue stop. */
	m.n = 0;
	memset(p, 0, sizeof(p));
	p[4] = 60;
	vu_add(&m, VU_GET_CONFIG, 0, p, 72);
	memset(p, 0, sizeof(p));
	p[16] = 2, p[18] = 8; /* 2 queues of 8 */
	vu_add(&m, VU_GET_INFLIGHT_FD, 0, p, 24);
	vu_add(&m, VU_GET_VRING_BASE, 0, (uint32_t[]){ 0, 0 }, 8);
	vu_add(&m, VU_RESET_OWNER, 0, NULL, 0);
	rec_msgs(&s, 0x00, &m);
	seed("fuzz-vu-dev", "config-inflight", s.b, s.n, NULL, 0);

	/* With protocol features: inflight, log, memory slots, enable. */
	s.n = 1, m.n = 0;
	feat |= 1ull << VU_F_PROTOCOL_FEATURES | 1ull << VU_F_LOG_ALL;
	vu_add(&m, VU_SET_FEATURES, 0, &feat, 8);
	vu_add(&m, VU_GET_PROTOCOL_FEATURES, 0, NULL, 0);
	vu_add(&m, VU_SET_PROTOCOL_FEATURES, 0,
	       (uint64_t[]){ 1ull << VU_PROTO_F_MQ | 1ull << VU_PROTO_F_LOG_SHMFD |
			     1ull << VU_PROTO_F_REPLY_ACK | 1ull << VU_PROTO_F_CONFIG |
			     1ull << VU_PROTO_F_INFLIGHT_SHMFD | 1ull << VU_PROTO_F_RESET_DEVICE |
			     1ull << VU_PROTO_F_CONFIGURE_MEM_SLOTS | 1ull << VU_PROTO_F_STATUS },
	       8);
	vu_add(&m, VU_GET_MAX_MEM_SLOTS, 0, NULL, 0);
	rec_msgs(&s, 0x00, &m);
	memset(p, 0, sizeof(p));
	memcpy(p + 8, (uint64_t[]){ 0, 1 << 19, uva, 0 }, 32);
	rec_one(&s, 0x01, VU_ADD_MEM_REG, VU_FLAG_NEED_REPLY, p, 40);
	memcpy(p + 8, (uint64_t[]){ 1 << 19, 1 << 19, uva + (1 << 19), 1 << 19 }, 32);
	rec_one(&s, 0x01, VU_ADD_MEM_REG, 0, p, 40);
	memset(p, 0, sizeof(p));
	p[16] = 2, p[18] = 8;
	rec_one(&s, 0x00, VU_GET_INFLIGHT_FD, 0, p, 24);
	memcpy(p, (uint64_t[]){ 2 * vu_inflight_queue_bytes(8), 0xc0000 }, 16); /* in the memfd */
	rec_one(&s, 0x01, VU_SET_INFLIGHT_FD, 0, p, 24);
	{
		/* Queue 0's inflight area as a crashed back end left it: heads 3
		 * and 0 in flight, to be resubmitted oldest first at the kick. */
		uint8_t q[16 + 16 * 8] = { 0 };

		q[8] = 1, q[10] = 8; /* version, desc_num */
		q[16 + 16 * 0] = 1, q[16 + 16 * 0 + 8] = 2;
		q[16 + 16 * 3] = 1, q[16 + 16 * 3 + 8] = 1;
		rec_ram(&s, 0xc0000, q, sizeof(q));
	}
	memcpy(p, (uint64_t[]){ 4096, 0xd0000 }, 16);
	rec_one(&s, 0x01, VU_SET_LOG_BASE, 0, p, 16);
	rec_queue0(&s, uva, 1);
	rec_one(&s, 0x41, VU_SET_VRING_KICK, 0, (uint64_t[]){ 0 }, 8);
	m.n = 0;
	vu_add(&m, VU_SET_VRING_ENABLE, 0, (uint32_t[]){ 0, 1 }, 8);
	vu_add(&m, VU_SET_STATUS, 0, (uint64_t[]){ 15 }, 8);
	rec_msgs(&s, 0x00, &m);
	blk_request(&s, 1);
	m.n = 0;
	memset(p, 0, sizeof(p));
	p[4] = 60;
	vu_add(&m, VU_GET_CONFIG, 0, p, 72);
	vu_add(&m, VU_GET_VRING_BASE, 0, (uint32_t[]){ 0, 0 }, 8);
	memset(p, 0, sizeof(p));
	memcpy(p + 8, (uint64_t[]){ 1 << 19, 1 << 19, uva + (1 << 19), 1 << 19 }, 32);
	vu_add(&m, VU_REM_MEM_REG, 0, p, 40);
	vu_add(&m, VU_RESET_DEVICE, 0, NULL, 0);
	memset(p, 0, sizeof(p));
	p[0] = 20, p[4] = 4; /* 4 bytes at 20 */
	vu_add(&m, VU_SET_CONFIG, 0, p, 16); /* refused: nothing in blk config is writable */
	rec_msgs(&s, 0x00, &m);
	seed("fuzz-vu-dev", "protocol", s.b, s.n, NULL, 0);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	root = argv[1];
	xport_seeds();
	auth_seeds();
	owner_seeds();
	peer_seeds();
	vu_seeds();
	rdma_seeds();
	rdma_state_seeds();
	sriov_seeds();
	vq_seeds();
	dev_seeds();
	return 0;
}

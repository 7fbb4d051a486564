/* SPDX-License-Identifier: MIT */
/*
 * A connection between two guests behind different back ends, across the
 * live migration of one of them (docs/migration-rdma.md, "Peers
 * elsewhere"), in the Soft-RoCE guest.  Guest M on a back end at GID A
 * (rxe0) is connected to guest P on a back end at GID B (rxe1); M moves,
 * as QEMU moves it, to P's back end (a function serves one back end, and
 * the rig has two), and back.  P's back end pauses P's QP at the stop and
 * connects it to M's new QP after it (asked over TLS by M's source the
 * first time, by M's destination the second): every opcode moves the
 * right bytes afterwards,
 * atomics act exactly once, receives posted before the move complete
 * after it, and neither guest sees an event.  A peer with no vrdma back
 * end (a native verbs QP) fails cleanly, as documented.  The protocol
 * refuses callers without the key, callers that are not the QP's peer,
 * and tokens that are wrong or already spent; a hold nobody claims fails
 * the peer QP.  A connection rdma_cm made moves too: it goes on, the
 * moved guest's listen with it, and its end reaches the other side
 * (DISCONNECT) but from nobody else.
 *
 *   test-rdma-migrate-peer VRDMA-VHOST   (needs the rig's variables, or exits 77)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>

#include "rdma-checks.h"
#include "rdma-peer-wire.h"
#include "util.h"
#include "vt-common.h"
#include "xport-sock.h"
#include "xport-tls.h"

#define PEER_PORT "4794"

static struct vt_daemon back_p, back_m1;
static const char *dev_a, *dev_b, *addr_a, *addr_b;
static char psk_file[512], wrong_psk_file[512];

static int write_psk(const char *name, char *path, size_t len)
{
	uint8_t key[32];
	GString *text = g_string_new("vrdma-test:");
	int fd, r;

	vt_path(name, path, len);
	for (size_t i = 0; i < sizeof(key); i++)
		g_string_append_printf(text, "%02x", (uint8_t)g_random_int());
	g_string_append_c(text, '\n');
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	r = fd >= 0 && write(fd, text->str, text->len) == (ssize_t)text->len ? 0 : -1;
	if (fd >= 0)
		close(fd);
	g_string_free(text, TRUE);
	return r;
}

/* ---- a connected pair, one guest on each side ---- */

struct pair {
	struct rp_guest m, p;
};

static void open_pair(struct pair *x)
{
	struct vgd_opts o = { .log_all = true };

	assert_int_equal(rp_guest_open_opts(back_m1.sock, &o, &x->m), 0);
	assert_int_equal(rp_guest_open(back_p.sock, &x->p), 0);
	assert_int_equal(vgd_connect_qp(x->m.g, &x->m.qp, x->p.qp.qpn, x->p.gid, x->m.gid_index, 7),
			 0);
	assert_int_equal(vgd_connect_qp(x->p.g, &x->p.qp, x->m.qp.qpn, x->m.gid, x->p.gid_index, 7),
			 0);
}

static void post_recv(struct rp_guest *g, uint64_t wr_id, uint64_t off)
{
	assert_int_equal(vgd_post_recv(g->g, &g->qp, &(struct vgd_recv){
		.wr_id = wr_id, .num_sge = 1, .sge = { rp_guest_sge(g, off, 4096) } }, 1, true), 0);
}

/* A SEND of len bytes of seed from one guest into a receive the other
 * posted at recv_off; both complete, the bytes arrive. */
static void send_one(struct rp_guest *from, struct rp_guest *to, uint64_t wr_id,
		     uint64_t recv_wr_id, uint64_t recv_off, uint8_t seed)
{
	rt_guest_fill(from, 0x8000, 700, seed);
	rt_guest_post(from, &(struct vgd_send){
		.wr_id = wr_id, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED,
		.num_sge = 1, .sge = { rp_guest_sge(from, 0x8000, 700) } });
	rt_guest_expect_cqe(from, wr_id, IBV_WC_SUCCESS, IBV_WC_SEND);
	rt_guest_expect_cqe(to, recv_wr_id, IBV_WC_SUCCESS, IBV_WC_RECV);
	rt_guest_expect_pattern(to, recv_off, 700, seed);
}

/* RDMA WRITE and READ from one guest into the other's MR, by the rkey its
 * guest was given. */
static void write_and_read(struct rp_guest *from, struct rp_guest *to, uint8_t seed)
{
	rt_guest_fill(from, 0x10000, 3000, seed);
	rt_guest_post(from, &(struct vgd_send){
		.wr_id = 10, .opcode = VRDMA_WR_RDMA_WRITE, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = to->mr.iova + 0x18000, .rkey = to->mr.rkey, .num_sge = 1,
		.sge = { rp_guest_sge(from, 0x10000, 3000) } });
	rt_guest_expect_cqe(from, 10, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	rt_guest_expect_pattern(to, 0x18000, 3000, seed);
	rt_guest_fill(to, 0x20000, 2000, seed + 1);
	rt_guest_post(from, &(struct vgd_send){
		.wr_id = 11, .opcode = VRDMA_WR_RDMA_READ, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = to->mr.iova + 0x20000, .rkey = to->mr.rkey, .num_sge = 1,
		.sge = { rp_guest_sge(from, 0x28000, 2000) } });
	rt_guest_expect_cqe(from, 11, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	rt_guest_expect_pattern(from, 0x28000, 2000, seed + 1);
}

/* FETCH_ADD 1 on the other guest's counter: it held want, and holds want + 1. */
static void fetch_add(struct rp_guest *from, struct rp_guest *to, uint64_t want)
{
	uint64_t after = want + 1;

	rt_guest_post(from, &(struct vgd_send){
		.wr_id = 12, .opcode = VRDMA_WR_ATOMIC_FETCH_AND_ADD, .flags = VRDMA_SEND_SIGNALED,
		.remote_addr = to->mr.iova + 0x30000, .rkey = to->mr.rkey, .compare_add = 1,
		.num_sge = 1, .sge = { rp_guest_sge(from, 0x30008, 8) } });
	rt_guest_expect_cqe(from, 12, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	rt_guest_expect(from, 0x30008, (const uint8_t *)&want, 8);
	rt_guest_expect(to, 0x30000, (const uint8_t *)&after, 8);
}

/* Nothing completes on the guest's CQ for ms: short, so that the whole
 * forged-request case stays well inside a hold's 30 s on a slow machine. */
static void expect_no_cqe(struct rp_guest *g, int ms)
{
	struct vrdma_cqe c;
	int n = 0;

	assert_int_equal(vgd_wait_cq(g->g, &g->cq, &c, 1, ms, &n), -ETIMEDOUT);
}

static void close_pair(struct pair *x)
{
	rp_guest_close(&x->m);
	rp_guest_close(&x->p);
}

/* M's QP on the back end it is on now, P's always on back_p. */
static void expect_host_qps(const struct vt_daemon *m_on)
{
	int want_p = m_on == &back_p ? 2 : 1;

	for (int t = 0; t < 50 && (rt_host_objects("qp", back_p.d.pid) != want_p ||
				   rt_host_objects("qp", back_m1.d.pid) != 2 - want_p); t++)
		usleep(20000);
	assert_int_equal(rt_host_objects("qp", back_p.d.pid), want_p);
	assert_int_equal(rt_host_objects("qp", back_m1.d.pid), 2 - want_p);
}

/* Every opcode both ways, with receives M and P posted before. */
static void traffic_after(struct pair *x, uint8_t seed, uint64_t counter)
{
	struct vrdma_qp_attr attr;

	send_one(&x->p, &x->m, 101, 2, 0x2000, seed);
	send_one(&x->m, &x->p, 102, 3, 0x3000, seed + 1);
	/* P's guest still names M's MR by the rkey it was given. */
	write_and_read(&x->p, &x->m, seed + 2);
	write_and_read(&x->m, &x->p, seed + 4);
	fetch_add(&x->p, &x->m, counter);
	/* M's guest sees its peer where it was; neither saw an event. */
	assert_int_equal(vgd_cmd(x->m.g, VRDMA_CMD_QUERY_QP,
				 &(struct vrdma_handle){ x->m.qp.handle }, sizeof(struct vrdma_handle),
				 &attr, sizeof(attr)), 0);
	assert_int_equal(attr.qp_state, VRDMA_QPS_RTS);
	assert_int_equal(attr.dest_qp_num, x->p.qp.qpn);
	rt_expect_no_event(x->m.g, 100);
	rt_expect_no_event(x->p.g, 100);
}

static void move_m(struct pair *x, struct vt_daemon *to, const char *what)
{
	size_t len;
	uint64_t t0 = monotonic_ns();

	assert_int_equal(vgd_migrate(x->m.g, to->sock, &len), 0);
	fprintf(stderr, "moved M %s in %.1f ms, %zu bytes of device state\n", what,
		(double)(monotonic_ns() - t0) / 1e6, len);
	expect_host_qps(to);
}

static void test_move_with_vrdma_peer(void **state)
{
	uint64_t counter = 5;
	struct pair x;

	(void)state;
	open_pair(&x);
	assert_int_equal(vgd_buf_write(x.m.g, &x.m.buf, 0x30000, &counter, 8), 0);
	post_recv(&x.p, 1, 0x1000);
	send_one(&x.m, &x.p, 100, 1, 0x1000, 1);
	write_and_read(&x.p, &x.m, 2);
	write_and_read(&x.m, &x.p, 4);
	fetch_add(&x.p, &x.m, 5);

	/* Receives posted before each move complete after it. */
	post_recv(&x.m, 2, 0x2000);
	post_recv(&x.p, 3, 0x3000);
	move_m(&x, &back_p, "from rxe0 to rxe1, beside its peer");
	traffic_after(&x, 10, 6);
	post_recv(&x.m, 2, 0x2000);
	post_recv(&x.p, 3, 0x3000);
	move_m(&x, &back_m1, "back to rxe0, its peer retargeted over TLS");
	traffic_after(&x, 20, 7);
	close_pair(&x);
}

/*
 * A native peer (plain verbs, no back end of ours behind it) cannot be
 * held: the moving QP fails at the stop with QP_FATAL, reason STOPPED,
 * and the guest learns it on the destination.
 */
static void test_move_with_native_peer(void **state)
{
	struct vgd_opts o = { .log_all = true };
	struct rp_native n;
	struct rp_guest m;

	(void)state;
	assert_int_equal(rp_guest_open_opts(back_m1.sock, &o, &m), 0);
	assert_int_equal(rp_native_open(dev_b, &n), 0);
	rt_connect_pair(&m, &n, 7);
	assert_int_equal(vgd_migrate(m.g, back_p.sock, NULL), 0);
	rt_expect_event(m.g, VRDMA_EV_QP_FATAL, m.qp.handle, VRDMA_QPF_STOPPED);
	rp_native_close(&n);
	rp_guest_close(&m);
}

/* ---- the protocol, asked by hand ---- */

/* One request from local address from to the back end at to; the reply's
 * status, or -errno when there was none. */
static int ask(const char *psk, const char *from, const char *to,
	       const struct rdma_peer_request *req)
{
	int64_t deadline = monotonic_ms() + 3000;
	struct sockaddr_in src = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET };
	uint8_t head[RDMA_PEER_REQUEST_SIZE], reply[RDMA_PEER_REPLY_SIZE];
	struct xport_auth *auth = NULL;
	struct xport_tls *tls = NULL;
	const char *why;
	uint32_t status;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int r;

	assert_true(fd >= 0);
	inet_pton(AF_INET, from, &src.sin_addr);
	inet_pton(AF_INET, to, &dst.sin_addr);
	dst.sin_port = htons(atoi(PEER_PORT));
	assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&dst, sizeof(dst)), 0);
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(xport_auth_new(&(struct xport_auth_cfg){ .psk_file = psk }, &auth, NULL),
			 0);
	rdma_peer_request_encode(req, head);
	r = xport_tls_new(auth, fd, NULL, &tls);
	if (!r)
		r = xport_tls_handshake_wait(tls, fd, deadline, &why);
	if (!r)
		r = xport_tls_send_all(tls, fd, head, sizeof(head), deadline);
	if (!r)
		r = xport_tls_recv_all(tls, fd, reply, sizeof(reply), deadline);
	if (!r)
		r = rdma_peer_reply_decode(reply, &status) ? -EBADMSG : (int)status;
	xport_tls_free(tls);
	xport_auth_free(auth);
	close(fd);
	return r;
}

static void gid_of(const char *addr, uint8_t gid[16])
{
	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	inet_pton(AF_INET, addr, gid + 12);
}

/*
 * P's QP is connected to M's.  Asking about it: without the key, from an
 * address that is not M's, with a token it was never given, or with one
 * already spent, changes nothing (and the pair still works); from M's
 * address with the key, a PAUSE and its RESUME work exactly once.
 */
static void test_forged_and_replayed_requests(void **state)
{
	struct rdma_peer_request req = { .op = RDMA_PEER_PAUSE, .token = { 1, 2, 3 } };
	struct pair x;

	(void)state;
	open_pair(&x);
	post_recv(&x.p, 1, 0x1000);
	send_one(&x.m, &x.p, 100, 1, 0x1000, 1);
	req.qpn = x.p.qp.qpn; /* not moved: the host's number */
	req.from_qpn = x.m.qp.qpn;
	gid_of(addr_a, req.from_gid);

	/* No key, or another: the TLS handshake fails, nothing is asked. */
	assert_true(ask(wrong_psk_file, addr_a, addr_b, &req) < 0);
	/* The key, but not from M's address. */
	assert_int_equal(ask(psk_file, addr_b, addr_b, &req), EPERM);
	/* Not what P's QP is connected to. */
	req.from_qpn ^= 1;
	assert_int_equal(ask(psk_file, addr_a, addr_b, &req), EPERM);
	req.from_qpn ^= 1;
	/* A RETARGET or RESUME with a token nobody was given. */
	req.op = RDMA_PEER_RETARGET;
	req.new_qpn = 0x99;
	gid_of(addr_b, req.new_gid);
	assert_int_equal(ask(psk_file, addr_b, addr_b, &req), EPERM);
	req.op = RDMA_PEER_RESUME;
	req.new_qpn = 0;
	memset(req.new_gid, 0, 16);
	assert_int_equal(ask(psk_file, addr_a, addr_b, &req), EPERM);
	post_recv(&x.p, 2, 0x2000);
	send_one(&x.m, &x.p, 101, 2, 0x2000, 2);

	/* M's address and the key: PAUSE holds P's sends... */
	req.op = RDMA_PEER_PAUSE;
	assert_int_equal(ask(psk_file, addr_a, addr_b, &req), 0);
	assert_int_equal(ask(psk_file, addr_a, addr_b, &req), EBUSY);
	post_recv(&x.m, 3, 0x3000);
	rt_guest_fill(&x.p, 0x8000, 700, 3);
	rt_guest_post(&x.p, &(struct vgd_send){
		.wr_id = 102, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED,
		.num_sge = 1, .sge = { rp_guest_sge(&x.p, 0x8000, 700) } });
	expect_no_cqe(&x.m, 1000);
	/* Held: a RESUME or RETARGET with another token does nothing. */
	req.token[0] ^= 0x80;
	req.op = RDMA_PEER_RESUME;
	assert_int_equal(ask(psk_file, addr_a, addr_b, &req), EPERM);
	req.op = RDMA_PEER_RETARGET;
	req.new_qpn = x.m.qp.qpn;
	gid_of(addr_a, req.new_gid);
	assert_int_equal(ask(psk_file, addr_a, addr_b, &req), EPERM);
	req.new_qpn = 0;
	memset(req.new_gid, 0, 16);
	req.token[0] ^= 0x80;
	expect_no_cqe(&x.m, 1000);
	/* ...until RESUME with its token; the token is then spent. */
	req.op = RDMA_PEER_RESUME;
	assert_int_equal(ask(psk_file, addr_a, addr_b, &req), 0);
	rt_guest_expect_cqe(&x.p, 102, IBV_WC_SUCCESS, IBV_WC_SEND);
	rt_guest_expect_cqe(&x.m, 3, IBV_WC_SUCCESS, IBV_WC_RECV);
	rt_guest_expect_pattern(&x.m, 0x3000, 700, 3);
	assert_int_equal(ask(psk_file, addr_a, addr_b, &req), EPERM);
	req.op = RDMA_PEER_RETARGET;
	req.new_qpn = 0x99;
	gid_of(addr_b, req.new_gid);
	assert_int_equal(ask(psk_file, addr_b, addr_b, &req), EPERM);
	/* A DISCONNECT is for connections that moved: this one rdma_cm
	 * never made. */
	req.op = RDMA_PEER_DISCONNECT;
	req.new_qpn = 0;
	memset(req.new_gid, 0, 16);
	assert_int_equal(ask(psk_file, addr_a, addr_b, &req), ENOENT);
	post_recv(&x.p, 4, 0x4000);
	send_one(&x.m, &x.p, 103, 4, 0x4000, 4);
	rt_expect_no_event(x.p.g, 100);
	close_pair(&x);
}

/* ---- rdma_cm connections ---- */

/* The device's CM event records still waiting (one may stay from before
 * CM_GET_EVENT drained what it announced): nothing but those. */
static void drain_cm_records(struct rp_guest *g)
{
	struct vrdma_event ev;

	while (vgd_wait_event(g->g, 200, &ev) == 0)
		assert_int_equal(ev.type, VRDMA_EV_CM);
}

/* M connects to P's listen by rdma_cm; returns M's and P's handles. */
static void cm_connect_pair(struct pair *x, uint16_t port, uint32_t *ret_m, uint32_t *ret_p)
{
	struct vrdma_cm_listen_req l = { .port = port, .backlog = 4 };
	struct vrdma_cm_connect_req q = { .dst_port = port, .ord = 1, .ird = 1 };
	struct vrdma_cm_accept_req a = { .ord = 1, .ird = 1 };
	struct vrdma_handle lh = { 0 }, mh = { 0 };
	struct vrdma_cm_event e;

	assert_int_equal(vgd_cmd(x->p.g, VRDMA_CMD_CM_LISTEN, &l, sizeof(l), &lh, sizeof(lh)), 0);
	rt_guest_qp_init_cm(&x->m);
	rt_guest_qp_init_cm(&x->p);
	q.qp = x->m.qp.handle;
	assert_int_equal(inet_pton(AF_INET, addr_b, q.dst_ip), 1);
	assert_int_equal(vgd_cmd(x->m.g, VRDMA_CMD_CM_CONNECT, &q, sizeof(q), &mh, sizeof(mh)), 0);
	rt_guest_cm_event(&x->p, VRDMA_CM_EV_CONNECT_REQUEST, &e);
	a.conn = e.conn;
	a.qp = x->p.qp.handle;
	assert_int_equal(vgd_cmd(x->p.g, VRDMA_CMD_CM_ACCEPT, &a, sizeof(a), NULL, 0), 0);
	rt_guest_cm_event(&x->m, VRDMA_CM_EV_CONNECT_REPLY, &e);
	assert_int_equal(e.status, 0);
	assert_int_equal(e.conn, mh.handle);
	assert_int_equal(vgd_cmd(x->p.g, VRDMA_CMD_CM_DESTROY_LISTEN, &lh, sizeof(lh), NULL, 0),
			 0);
	drain_cm_records(&x->m);
	drain_cm_records(&x->p);
	*ret_m = mh.handle;
	*ret_p = a.conn;
}

/* A guest on the back end from asks for a connection at addr:port and
 * is refused by M, which hears the request on its listen lh. */
static void cm_refused_by_m(struct pair *x, const struct vt_daemon *from, const char *addr,
			    uint16_t port, uint32_t lh)
{
	struct vrdma_cm_connect_req q = { .dst_port = port, .ord = 1, .ird = 1 };
	struct vrdma_handle h = { 0 };
	struct vrdma_cm_event e;
	struct rp_guest c;
	uint8_t ip[4];

	assert_int_equal(rp_guest_open(from->sock, &c), 0);
	rt_guest_qp_init_cm(&c);
	q.qp = c.qp.handle;
	assert_int_equal(inet_pton(AF_INET, addr, q.dst_ip), 1);
	assert_int_equal(vgd_cmd(c.g, VRDMA_CMD_CM_CONNECT, &q, sizeof(q), &h, sizeof(h)), 0);
	rt_guest_cm_event(&x->m, VRDMA_CM_EV_CONNECT_REQUEST, &e);
	assert_int_equal(e.listen, lh);
	assert_int_equal(inet_pton(AF_INET, addr, ip), 1);
	assert_memory_equal(e.local_ip, ip, 4);
	assert_int_equal(e.local_port, port);
	assert_int_equal(vgd_cmd(x->m.g, VRDMA_CMD_CM_REJECT,
				 &(struct vrdma_cm_reject_req){ .conn = e.conn },
				 sizeof(struct vrdma_cm_reject_req), NULL, 0), 0);
	rt_guest_cm_event(&c, VRDMA_CM_EV_CONNECT_REPLY, &e);
	assert_int_equal(e.status, 111 /* ECONNREFUSED */);
	drain_cm_records(&x->m);
	rp_guest_close(&c);
}

/* The other end hears an end: its connection's CLOSED, and nothing more. */
static void cm_expect_closed(struct rp_guest *g, uint32_t conn)
{
	struct vrdma_cm_event e;

	rt_guest_cm_event(g, VRDMA_CM_EV_CLOSED, &e);
	assert_int_equal(e.conn, conn);
	assert_int_equal(vgd_cmd(g->g, VRDMA_CMD_CM_GET_EVENT, NULL, 0, &e, sizeof(e)),
			 VRDMA_ENOENT);
}

/*
 * A connection rdma_cm made, across moves of M: the QPs go on as any
 * (every opcode, no event on either guest, also once the source's
 * rdma_cm ids are gone), M's listen moves with M (a request reaches it at
 * the destination's address), and the end of the connection reaches the
 * other side as a DREQ would have: by P after one move (M hears it from
 * P's back end), by M after moving there and back (P hears it from M's).
 */
static void test_move_cm_connection(void **state)
{
	const uint16_t m_port = 7481;

	(void)state;
	for (int by_m = 0; by_m < 2; by_m++) {
		struct vrdma_cm_listen_req ml = { .port = m_port, .backlog = 4 };
		struct vrdma_handle mlh = { 0 };
		struct vgd_opts o = { .log_all = true };
		uint64_t counter = 5;
		uint32_t mc, pc;
		struct pair x;

		assert_int_equal(rp_guest_open_opts(back_m1.sock, &o, &x.m), 0);
		assert_int_equal(rp_guest_open(back_p.sock, &x.p), 0);
		cm_connect_pair(&x, (uint16_t)(7480 - by_m * 10), &mc, &pc);
		assert_int_equal(vgd_cmd(x.m.g, VRDMA_CMD_CM_LISTEN, &ml, sizeof(ml), &mlh,
					 sizeof(mlh)), 0);
		assert_int_equal(vgd_buf_write(x.m.g, &x.m.buf, 0x30000, &counter, 8), 0);
		post_recv(&x.p, 1, 0x1000);
		send_one(&x.m, &x.p, 100, 1, 0x1000, 1);
		fetch_add(&x.p, &x.m, 5);

		post_recv(&x.m, 2, 0x2000);
		post_recv(&x.p, 3, 0x3000);
		move_m(&x, &back_p, "with an rdma_cm connection, to rxe1");
		traffic_after(&x, 10, 6);
		/* The source's ids are torn down with it: still nothing. */
		rt_expect_no_event(x.m.g, 1000);
		rt_expect_no_event(x.p.g, 100);
		post_recv(&x.m, 2, 0x2000);
		post_recv(&x.p, 3, 0x3000);
		traffic_after(&x, 30, 7);
		cm_refused_by_m(&x, &back_m1, addr_b, m_port, mlh.handle);
		if (by_m) {
			post_recv(&x.m, 2, 0x2000);
			post_recv(&x.p, 3, 0x3000);
			move_m(&x, &back_m1, "with an rdma_cm connection, back to rxe0");
			traffic_after(&x, 20, 8);
			cm_refused_by_m(&x, &back_p, addr_a, m_port, mlh.handle);
			assert_int_equal(vgd_cmd(x.m.g, VRDMA_CMD_CM_DISCONNECT,
						 &(struct vrdma_handle){ mc },
						 sizeof(struct vrdma_handle), NULL, 0), 0);
			cm_expect_closed(&x.m, mc);
			cm_expect_closed(&x.p, pc);
		} else {
			/* From where M was (its source, or a replay of it),
			 * from another address than M's, or without the key, a
			 * DISCONNECT ends nothing. */
			struct rdma_peer_request req = { .op = RDMA_PEER_DISCONNECT };
			struct vrdma_qp_attr pa;

			req.qpn = x.p.qp.qpn;
			req.from_qpn = x.m.qp.qpn;
			gid_of(addr_a, req.from_gid);
			assert_int_equal(ask(psk_file, addr_a, addr_b, &req), EPERM);
			assert_true(ask(wrong_psk_file, addr_a, addr_b, &req) < 0);
			/* (P's guest sees M as its back end has it now.) */
			assert_int_equal(vgd_cmd(x.p.g, VRDMA_CMD_QUERY_QP,
						 &(struct vrdma_handle){ x.p.qp.handle },
						 sizeof(struct vrdma_handle), &pa, sizeof(pa)), 0);
			req.from_qpn = pa.dest_qp_num;
			gid_of(addr_b, req.from_gid);
			assert_int_equal(ask(psk_file, addr_a, addr_b, &req), EPERM);
			rt_expect_no_event(x.p.g, 200);
			post_recv(&x.m, 2, 0x2000);
			post_recv(&x.p, 3, 0x3000);
			traffic_after(&x, 40, 8);
			assert_int_equal(vgd_cmd(x.p.g, VRDMA_CMD_CM_DISCONNECT,
						 &(struct vrdma_handle){ pc },
						 sizeof(struct vrdma_handle), NULL, 0), 0);
			cm_expect_closed(&x.p, pc);
			cm_expect_closed(&x.m, mc);
		}
		close_pair(&x);
	}
}

struct ending {
	struct pair *x;
	uint32_t conn;
};

static void p_disconnects(void *arg)
{
	const struct ending *e = arg;

	assert_int_equal(vgd_cmd(e->x->p.g, VRDMA_CMD_CM_DISCONNECT,
				 &(struct vrdma_handle){ e->conn }, sizeof(struct vrdma_handle),
				 NULL, 0), 0);
}

/*
 * P's guest ends the connection while M is stopped for its move (P's QP
 * held): P hears CLOSED as ever, and the destination, whose RETARGET the
 * peer refuses, fails M's QP (QP_FATAL, STOPPED) and ends M's connection:
 * M hears of the end, and no QP of either is brought back to life.
 */
static void test_end_during_move(void **state)
{
	struct vgd_opts o = { .log_all = true };
	bool fatal = false;
	struct vrdma_event ev;
	struct ending end;
	uint32_t mc, pc;
	struct pair x;

	(void)state;
	assert_int_equal(rp_guest_open_opts(back_m1.sock, &o, &x.m), 0);
	assert_int_equal(rp_guest_open(back_p.sock, &x.p), 0);
	cm_connect_pair(&x, 7460, &mc, &pc);
	post_recv(&x.p, 1, 0x1000);
	send_one(&x.m, &x.p, 100, 1, 0x1000, 1);
	end = (struct ending){ &x, pc };
	assert_int_equal(vgd_migrate_between(x.m.g, back_p.sock, NULL, p_disconnects, &end), 0);
	cm_expect_closed(&x.p, pc);
	cm_expect_closed(&x.m, mc);
	while (vgd_wait_event(x.m.g, 500, &ev) == 0)
		if (ev.type == VRDMA_EV_QP_FATAL) {
			assert_int_equal(ev.handle, x.m.qp.handle);
			assert_int_equal(ev.data, VRDMA_QPF_STOPPED);
			fatal = true;
		}
	assert_true(fatal);
	close_pair(&x);
}

/*
 * A PAUSE nobody follows up (the source's back end died after asking): the
 * peer QP fails after 30 s rather than go on with a source whose memory a
 * migration may have copied already.
 */
static void test_unclaimed_hold_fails_the_qp(void **state)
{
	struct rdma_peer_request req = { .op = RDMA_PEER_PAUSE, .token = { 9, 9, 9 } };
	struct vrdma_event ev;
	struct pair x;
	uint64_t t0;

	(void)state;
	open_pair(&x);
	req.qpn = x.p.qp.qpn;
	req.from_qpn = x.m.qp.qpn;
	gid_of(addr_a, req.from_gid);
	assert_int_equal(ask(psk_file, addr_a, addr_b, &req), 0);
	t0 = monotonic_ns();
	rt_expect_no_event(x.p.g, 1000);
	assert_int_equal(vgd_wait_event(x.p.g, vuf_slow_ms(40000), &ev), 0);
	fprintf(stderr, "the held QP failed after %.1f s\n", (double)(monotonic_ns() - t0) / 1e9);
	assert_int_equal(ev.type, VRDMA_EV_QP_FATAL);
	assert_int_equal(ev.handle, x.p.qp.handle);
	assert_int_equal(ev.data, VRDMA_QPF_STOPPED);
	close_pair(&x);
}

static int setup(void **state)
{
	const char *args_p[] = { "--device", "rdma", "--ibdev", dev_b, "--rdma-gid", addr_b,
				 "--rdma-peer-port", PEER_PORT, "--rdma-peer-psk", psk_file,
				 NULL };
	const char *args_m1[] = { "--device", "rdma", "--ibdev", dev_a, "--rdma-gid", addr_a,
				  "--rdma-peer-port", PEER_PORT, "--rdma-peer-psk", psk_file,
				  NULL };

	(void)state;
	if (write_psk("peer.psk", psk_file, sizeof(psk_file)) ||
	    write_psk("wrong.psk", wrong_psk_file, sizeof(wrong_psk_file)))
		return -1;
	return vt_spawn(&back_p, "p.sock", args_p) || vt_spawn(&back_m1, "m1.sock", args_m1) ? -1
											     : 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_move_with_vrdma_peer),
		cmocka_unit_test(test_move_cm_connection),
		cmocka_unit_test(test_end_during_move),
		cmocka_unit_test(test_move_with_native_peer),
		cmocka_unit_test(test_forged_and_replayed_requests),
		cmocka_unit_test(test_unclaimed_hold_fails_the_qp),
	};
	const char *rig[4];

	vt_init(argc, argv);
	rt_require_rig((const char *const[]){ "VRDMA_RXE_DEV_A", "VRDMA_RXE_DEV_B",
					      "VRDMA_RXE_ADDR_A", "VRDMA_RXE_ADDR_B", NULL },
		       rig);
	dev_a = rig[0];
	dev_b = rig[1];
	addr_a = rig[2];
	addr_b = rig[3];
	return VT_RUN(tests, setup, NULL, &back_p, &back_m1);
}

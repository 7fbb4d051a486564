/* SPDX-License-Identifier: MIT */
/*
 * Connection management of the paravirtual RDMA device (VRDMA_F_CM,
 * docs/virtio-rdma.md section 14), in the Soft-RoCE guest: a harness guest
 * on `vrdma-vhost --device rdma` (tenant A on rxe0, whose address is
 * VRDMA_RXE_ADDR_A) against a native librdmacm peer in the second network
 * namespace (rxe1, VRDMA_RXE_ADDR_B), connected both ways by the host's
 * rdma_cm, with bytes checked across each connection; then the refusals.
 *
 *   test-rdma-cm VRDMA-VHOST   (needs the rxe-vm variables, or exits 77)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "rdma-checks.h"
#include "util.h"
#include "vt-common.h"

#define MSG_LEN 3000u
#define PEER_TIMEOUT_S 60

static struct vt_daemon tenant_a;
static const char *dev_a, *addr_a, *addr_b, *netns_b;

static uint8_t pattern(size_t i, uint8_t seed)
{
	return (uint8_t)(seed * 31 + i * 13 + (i >> 8));
}

/* ---- the native peer: a child process in the peer's namespace ---- */

struct peer {
	pid_t pid;
	int ready; /* read end: one byte once the peer listens */
};

static int enter_netns(const char *name)
{
	char path[256];
	int fd, r;

	snprintf(path, sizeof(path), "/var/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = setns(fd, CLONE_NEWNET) ? -errno : 0;
	close(fd);
	return r;
}

static bool check_pattern(const uint8_t *b, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pattern(i, seed))
			return false;
	return true;
}

/* On a connected id whose receive into `in` is posted: receives the
 * guest's message (seed), answers with seed + 1, then waits for the
 * guest's disconnect. */
static int peer_exchange(struct rdma_cm_id *id, const uint8_t *in, uint8_t seed)
{
	static uint8_t out[MSG_LEN];
	struct rdma_cm_event *ev;
	struct ibv_mr *mr_out;
	struct ibv_wc wc;

	mr_out = rdma_reg_msgs(id, out, sizeof(out));
	if (!mr_out)
		return 20;
	if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
		return 21;
	if (wc.byte_len != MSG_LEN || !check_pattern(in, MSG_LEN, seed))
		return 22;
	for (size_t i = 0; i < MSG_LEN; i++)
		out[i] = pattern(i, (uint8_t)(seed + 1));
	if (rdma_post_send(id, NULL, out, MSG_LEN, mr_out, 0) ||
	    rdma_get_send_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
		return 23;
	if (rdma_get_cm_event(id->channel, &ev))
		return 24;
	if (ev->event != RDMA_CM_EVENT_DISCONNECTED)
		return 25;
	rdma_ack_cm_event(ev);
	rdma_disconnect(id);
	rdma_dereg_mr(mr_out);
	return 0;
}

static const struct ibv_qp_init_attr peer_qp = {
	.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	.sq_sig_all = 1,
};

/* Listens on addr_b:port, accepts one guest, checks its private data. */
static int peer_server(const char *port, uint8_t seed, int ready)
{
	static uint8_t in[MSG_LEN];
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP };
	struct rdma_addrinfo *res;
	struct ibv_qp_init_attr attr = peer_qp;
	struct rdma_cm_id *listen_id, *id;
	struct rdma_conn_param param = {
		.private_data = "peer-accepts", .private_data_len = 13,
		.responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7,
	};
	struct ibv_mr *mr;
	int r;

	if (rdma_getaddrinfo(addr_b, port, &hints, &res) ||
	    rdma_create_ep(&listen_id, res, NULL, &attr) || rdma_listen(listen_id, 1))
		return 10;
	if (write(ready, "r", 1) != 1)
		return 11;
	if (rdma_get_request(listen_id, &id))
		return 12;
	if (!id->event || id->event->param.conn.private_data_len < 14 ||
	    memcmp(id->event->param.conn.private_data, "guest-connects", 14) != 0)
		return 13;
	/* The receive for the guest's message goes in before the accept. */
	mr = rdma_reg_msgs(id, in, sizeof(in));
	if (!mr || rdma_post_recv(id, NULL, in, sizeof(in), mr) || rdma_accept(id, &param))
		return 14;
	r = peer_exchange(id, in, seed);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listen_id);
	rdma_freeaddrinfo(res);
	return r;
}

/* Connects to the guest's listen on addr_a:port; the peer disconnects. */
static int peer_client(const char *port, uint8_t seed)
{
	static uint8_t in[MSG_LEN], out[MSG_LEN];
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP };
	struct rdma_addrinfo *res;
	struct ibv_qp_init_attr attr = peer_qp;
	struct rdma_conn_param param = {
		.private_data = "peer-connects", .private_data_len = 14,
		.responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
		.rnr_retry_count = 7,
	};
	struct rdma_cm_id *id;
	struct ibv_mr *mr_in, *mr_out;
	struct ibv_wc wc;

	if (rdma_getaddrinfo(addr_a, port, &hints, &res) || rdma_create_ep(&id, res, NULL, &attr))
		return 30;
	mr_in = rdma_reg_msgs(id, in, sizeof(in));
	mr_out = rdma_reg_msgs(id, out, sizeof(out));
	if (!mr_in || !mr_out || rdma_post_recv(id, NULL, in, sizeof(in), mr_in))
		return 31;
	if (rdma_connect(id, &param))
		return 32;
	if (id->event && (id->event->param.conn.private_data_len < 14 ||
			  memcmp(id->event->param.conn.private_data, "guest-accepts", 14) != 0))
		return 33;
	for (size_t i = 0; i < MSG_LEN; i++)
		out[i] = pattern(i, seed);
	if (rdma_post_send(id, NULL, out, MSG_LEN, mr_out, 0) ||
	    rdma_get_send_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
		return 34;
	if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS ||
	    wc.byte_len != MSG_LEN || !check_pattern(in, MSG_LEN, (uint8_t)(seed + 1)))
		return 35;
	rdma_disconnect(id);
	rdma_dereg_mr(mr_in);
	rdma_dereg_mr(mr_out);
	rdma_destroy_ep(id);
	rdma_freeaddrinfo(res);
	return 0;
}

/* Connects to addr_a:port n times, each with a fresh id and no QP, and
 * expects each to be refused (the guest rejects them, or fails to accept). */
static int peer_flood(const char *port, unsigned int n)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP };
	struct rdma_conn_param param = { .qp_num = 1, .retry_count = 1 };
	struct rdma_addrinfo *res;

	if (rdma_getaddrinfo(addr_a, port, &hints, &res))
		return 40;
	for (unsigned int i = 0; i < n; i++) {
		struct rdma_cm_id *id;
		int r;

		if (rdma_create_ep(&id, res, NULL, NULL))
			return 41;
		r = rdma_connect(id, &param);
		rdma_destroy_ep(id);
		if (r == 0)
			return 42; /* accepted: the guest never does */
	}
	rdma_freeaddrinfo(res);
	return 0;
}

static void peer_start(struct peer *p, bool server, const char *port, uint8_t seed)
{
	int fds[2];

	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		close(fds[0]);
		alarm(PEER_TIMEOUT_S);
		if (enter_netns(netns_b))
			_exit(2);
		_exit(server ? peer_server(port, seed, fds[1]) : peer_client(port, seed));
	}
	close(fds[1]);
	p->ready = fds[0];
	if (server) {
		char c;

		assert_int_equal(read(p->ready, &c, 1), 1);
	}
}

static void peer_finish(struct peer *p)
{
	int st;

	assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
	if (p->ready >= 0)
		close(p->ready);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fprintf(stderr, "native peer: %s %d\n", WIFEXITED(st) ? "exit" : "signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- the harness guest ---- */

/* RESET, then INIT again: a failed connection leaves the QP in ERR. */
static void guest_qp_reinit(struct rp_guest *g)
{
	struct vrdma_qp_attr a = { .qp_state = VRDMA_QPS_RESET };

	assert_int_equal(vgd_modify_qp(g->g, &g->qp, VRDMA_QP_STATE, &a), 0);
	rt_guest_qp_init_cm(g);
}

static uint32_t guest_connect_to(struct rp_guest *g, const uint8_t ip[4], uint16_t port,
				 int *ret_status)
{
	struct vrdma_cm_connect_req q = { .qp = g->qp.handle, .dst_port = port, .ord = 1, .ird = 1,
					  .pdata_len = 14 };
	struct vrdma_handle h = { 0 };

	memcpy(q.dst_ip, ip, 4);
	memcpy(q.pdata, "guest-connects", 14);
	*ret_status = vgd_cmd(g->g, VRDMA_CMD_CM_CONNECT, &q, sizeof(q), &h, sizeof(h));
	return h.handle;
}

static uint32_t guest_connect(struct rp_guest *g, const char *ip, uint16_t port, int *ret_status)
{
	uint8_t a[4];

	assert_int_equal(inet_pton(AF_INET, ip, a), 1);
	return guest_connect_to(g, a, port, ret_status);
}

/* Sends MSG_LEN bytes of pattern seed and waits for the completion. */
static void guest_send(struct rp_guest *g, uint8_t seed)
{
	g_autofree uint8_t *b = g_malloc(MSG_LEN);
	struct vrdma_cqe c;

	for (size_t i = 0; i < MSG_LEN; i++)
		b[i] = pattern(i, seed);
	assert_int_equal(vgd_buf_write(g->g, &g->buf, 0, b, MSG_LEN), 0);
	assert_int_equal(vgd_post_send(g->g, &g->qp, &(struct vgd_send){
		.wr_id = 7, .opcode = VRDMA_WR_SEND, .flags = VRDMA_SEND_SIGNALED,
		.num_sge = 1, .sge = { rp_guest_sge(g, 0, MSG_LEN) } }, 1, true), 0);
	assert_int_equal(rp_guest_wait(g, &c), 0);
	assert_int_equal(c.status, IBV_WC_SUCCESS);
	assert_int_equal(c.wr_id, 7);
}

static void guest_send_recv(struct rp_guest *g, uint8_t seed, bool we_send_first)
{
	g_autofree uint8_t *b = g_malloc(MSG_LEN);
	struct vrdma_cqe c;

	if (we_send_first)
		guest_send(g, seed);
	/* The peer's answer (seed + 1), or its first message (seed). */
	assert_int_equal(rp_guest_wait(g, &c), 0);
	assert_int_equal(c.status, IBV_WC_SUCCESS);
	assert_int_equal(c.wr_id, 8);
	assert_int_equal(c.byte_len, MSG_LEN);
	assert_int_equal(vgd_buf_read(g->g, &g->buf, 65536, b, MSG_LEN), 0);
	assert_true(check_pattern(b, MSG_LEN, we_send_first ? (uint8_t)(seed + 1) : seed));
}

static void guest_post_recv(struct rp_guest *g)
{
	assert_int_equal(vgd_post_recv(g->g, &g->qp, &(struct vgd_recv){
		.wr_id = 8, .num_sge = 1, .sge = { rp_guest_sge(g, 65536, MSG_LEN) } }, 1, true), 0);
}

/* The guest connects to a native server, talks, disconnects. */
static void test_guest_connects(void **state)
{
	struct vrdma_cm_event e;
	struct rp_guest g;
	struct peer p;
	uint32_t conn;
	int st;

	(void)state;
	peer_start(&p, true, "18700", 41);
	assert_int_equal(rp_guest_open(tenant_a.sock, &g), 0);
	rt_guest_qp_init_cm(&g);
	guest_post_recv(&g);
	conn = guest_connect(&g, addr_b, 18700, &st);
	assert_int_equal(st, 0);
	assert_int_not_equal(conn, 0);
	/* Connecting again on the same QP is refused. */
	guest_connect(&g, addr_b, 18700, &st);
	assert_int_equal(st, VRDMA_EINVAL);
	rt_guest_cm_event(&g, VRDMA_CM_EV_CONNECT_REPLY, &e);
	assert_int_equal(e.status, 0);
	assert_int_equal(e.conn, conn);
	assert_true(e.pdata_len >= 13);
	assert_memory_equal(e.pdata, "peer-accepts", 13);
	guest_send_recv(&g, 41, true);
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_DISCONNECT, &(struct vrdma_handle){ conn },
				 sizeof(struct vrdma_handle), NULL, 0), 0);
	/* Once the CLOSED waits, the connection cannot be named any more,
	 * though its handle stays taken until the event is fetched. */
	for (int tries = 0;; tries++) {
		struct vrdma_event rec;

		/* A record from before the drain may come first; while the
		 * connection is still closing, a second disconnect is a no-op. */
		assert_true(tries < 3);
		assert_int_equal(vgd_wait_event(g.g, RP_TIMEOUT_MS * 3, &rec), 0);
		assert_int_equal(rec.type, VRDMA_EV_CM);
		st = vgd_cmd(g.g, VRDMA_CMD_CM_DISCONNECT, &(struct vrdma_handle){ conn },
			     sizeof(struct vrdma_handle), NULL, 0);
		if (st == VRDMA_ENOENT)
			break;
		assert_int_equal(st, 0);
	}
	rt_guest_cm_event(&g, VRDMA_CM_EV_CLOSED, &e);
	assert_int_equal(e.conn, conn);
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_DISCONNECT, &(struct vrdma_handle){ conn },
				 sizeof(struct vrdma_handle), NULL, 0), VRDMA_ENOENT);
	peer_finish(&p);
	rp_guest_close(&g);
}

/* A native client connects to the guest's listen; the peer disconnects. */
static void test_guest_listens(void **state)
{
	struct vrdma_cm_listen_req l = { .port = 18701, .backlog = 4 };
	struct vrdma_cm_accept_req a = { .ord = 1, .ird = 1, .pdata_len = 14 };
	struct vrdma_handle lh = { 0 };
	struct vrdma_cm_event e;
	struct rp_guest g;
	struct peer p;

	(void)state;
	assert_int_equal(rp_guest_open(tenant_a.sock, &g), 0);
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_LISTEN, &l, sizeof(l), &lh, sizeof(lh)), 0);
	rt_guest_qp_init_cm(&g);
	guest_post_recv(&g);
	peer_start(&p, false, "18701", 52);
	rt_guest_cm_event(&g, VRDMA_CM_EV_CONNECT_REQUEST, &e);
	assert_int_equal(e.listen, lh.handle);
	assert_true(e.pdata_len >= 14);
	assert_memory_equal(e.pdata, "peer-connects", 14);
	/* The device's own address is the function's. */
	assert_int_equal(inet_pton(AF_INET, addr_a, l.ip), 1);
	assert_memory_equal(e.local_ip, l.ip, 4);
	assert_int_equal(e.local_port, 18701);
	a.conn = e.conn;
	a.qp = g.qp.handle;
	memcpy(a.pdata, "guest-accepts", 14);
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_ACCEPT, &a, sizeof(a), NULL, 0), 0);
	guest_send_recv(&g, 52, false);
	/* Answer with seed + 1, as the peer expects. */
	guest_send(&g, 53);
	rt_guest_cm_event(&g, VRDMA_CM_EV_CLOSED, &e);
	assert_int_equal(e.conn, a.conn);
	peer_finish(&p);
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_DESTROY_LISTEN, &lh, sizeof(lh), NULL, 0), 0);
	rp_guest_close(&g);
}

/* The handle the device gives the k-th connection of a guest that has
 * had no other: generation-tagged slots of a 16-slot table, round robin
 * (vhost/rdma/rdma-table.c).  Predictable, as a hostile guest would have it. */
static uint32_t nth_conn_handle(unsigned int k)
{
	return (k / 16 + 1) << 20 | (k % 16 + 1);
}

/* Refuses the request h once it has come (ENOENT until then): rejected,
 * or accepted onto the guest's QP, which is in RESET, so the accept fails
 * and frees the handle as a reject does. */
static int refuse_request(struct rp_guest *g, uint32_t h, bool by_failed_accept)
{
	uint64_t deadline = monotonic_ns() + RP_TIMEOUT_MS * 3000000ull;
	int st;

	for (;;) {
		if (by_failed_accept) {
			struct vrdma_cm_accept_req a = { .conn = h, .qp = g->qp.handle };

			st = vgd_cmd(g->g, VRDMA_CMD_CM_ACCEPT, &a, sizeof(a), NULL, 0);
			if (st == VRDMA_EINVAL)
				return 0;
		} else {
			struct vrdma_cm_reject_req r = { .conn = h };

			st = vgd_cmd(g->g, VRDMA_CMD_CM_REJECT, &r, sizeof(r), NULL, 0);
		}
		if (st != VRDMA_ENOENT || monotonic_ns() > deadline)
			return st;
		usleep(1000);
	}
}

/*
 * A guest that never fetches CM events, and a peer that keeps connecting:
 * the guest rejects each request by guessing its handle (or fails to
 * accept it, with a QP in RESET), so handles are freed while their
 * CONNECT_REQUEST waits.  The spec promises at most two events per live
 * handle: afterwards no event is left at all, however many came.
 */
static void test_cm_events_bounded(void **state)
{
	enum { CONNECTS = 2000 };
	struct vrdma_cm_listen_req l = { .port = 18704, .backlog = 8 };
	struct vrdma_handle lh = { 0 };
	struct vrdma_cm_event e;
	struct rp_guest g;
	struct peer p;
	unsigned int left = 0;

	(void)state;
	assert_int_equal(rp_guest_open(tenant_a.sock, &g), 0);
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_LISTEN, &l, sizeof(l), &lh, sizeof(lh)), 0);
	p.pid = fork();
	assert_true(p.pid >= 0);
	if (p.pid == 0) {
		alarm(PEER_TIMEOUT_S * 10);
		_exit(enter_netns(netns_b) ? 2 : peer_flood("18704", CONNECTS));
	}
	p.ready = -1;
	for (unsigned int k = 0; k < CONNECTS; k++)
		assert_int_equal(refuse_request(&g, nth_conn_handle(k), k % 3 == 2), 0);
	peer_finish(&p);
	while (vgd_cmd(g.g, VRDMA_CMD_CM_GET_EVENT, NULL, 0, &e, sizeof(e)) == 0)
		left++;
	fprintf(stderr, "%d connects refused; %u CM events left\n", CONNECTS, left);
	assert_int_equal(left, 0);
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_DESTROY_LISTEN, &lh, sizeof(lh), NULL, 0), 0);
	rp_guest_close(&g);
}

/* What the device refuses, and a connection nobody listens for. */
static void test_refusals(void **state)
{
	struct vrdma_cm_listen_req l = { .port = 18702, .backlog = 1 };
	struct vrdma_handle h = { 0 };
	struct vrdma_cm_event e;
	struct rp_guest g;
	uint8_t nobody[4];
	uint32_t conn;
	int st;

	(void)state;
	assert_int_equal(rp_guest_open(tenant_a.sock, &g), 0);
	/* Nothing waits. */
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_GET_EVENT, NULL, 0, &e, sizeof(e)),
			 VRDMA_ENOENT);
	/* A QP still in RESET cannot connect. */
	guest_connect(&g, addr_b, 18702, &st);
	assert_int_equal(st, VRDMA_EINVAL);
	/* Another tenant's address is not the guest's to listen on. */
	assert_int_equal(inet_pton(AF_INET, addr_b, l.ip), 1);
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_LISTEN, &l, sizeof(l), &h, sizeof(h)),
			 VRDMA_EADDRNOTAVAIL);
	/* Its own address twice on one port: the second is in use. */
	assert_int_equal(inet_pton(AF_INET, addr_a, l.ip), 1);
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_LISTEN, &l, sizeof(l), &h, sizeof(h)), 0);
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_LISTEN, &l, sizeof(l), &(struct vrdma_handle){ 0 },
				 sizeof(h)), VRDMA_EADDRINUSE);
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_DESTROY_LISTEN, &h, sizeof(h), NULL, 0), 0);
	assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_DESTROY_LISTEN, &h, sizeof(h), NULL, 0),
			 VRDMA_ENOENT);
	/* Connections of another guest are not this one's (see below). */
	/* Nobody listens on the peer's port: the peer's CM rejects. */
	rt_guest_qp_init_cm(&g);
	conn = guest_connect(&g, addr_b, 18703, &st);
	assert_int_equal(st, 0);
	rt_guest_cm_event(&g, VRDMA_CM_EV_CONNECT_REPLY, &e);
	assert_int_equal(e.conn, conn);
	assert_int_equal(e.status, 111 /* ECONNREFUSED */);
	/* An address on the peer's subnet that nobody has: resolution gives
	 * up after the device's 2 s. */
	assert_int_equal(inet_pton(AF_INET, addr_b, nobody), 1);
	nobody[3] = 77;
	guest_qp_reinit(&g);
	conn = guest_connect_to(&g, nobody, 18703, &st);
	assert_int_equal(st, 0);
	rt_guest_cm_event(&g, VRDMA_CM_EV_CONNECT_REPLY, &e);
	assert_int_equal(e.conn, conn);
	assert_int_equal(e.status, 113 /* EHOSTUNREACH */);
	/* A connection being set up ends when its QP is destroyed. */
	guest_qp_reinit(&g);
	conn = guest_connect_to(&g, nobody, 18703, &st);
	assert_int_equal(st, 0);
	assert_int_equal(vgd_destroy(g.g, VRDMA_CMD_DESTROY_QP, g.qp.handle), 0);
	rt_guest_cm_event(&g, VRDMA_CM_EV_CONNECT_REPLY, &e);
	assert_int_equal(e.conn, conn);
	assert_int_equal(e.status, 103 /* ECONNABORTED */);
	rp_guest_close(&g);
}

/*
 * Watches what a netdev sends: a packet socket bound to it.  A counter of
 * the netdev would also count the late packets of earlier tests (vb carries
 * B's side of every connection), so the packets are told apart by address.
 * Only ETH_P_ALL sockets see what a netdev sends, not just what it receives.
 */
static int watch_sent(const char *netdev)
{
	struct sockaddr_ll at = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(ETH_P_ALL),
		.sll_ifindex = (int)if_nametoindex(netdev),
	};
	int fd;

	assert_true(at.sll_ifindex > 0);
	fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&at, sizeof(at)), 0);
	return fd;
}

/* IPv4 packets sent to @dst that the socket of watch_sent() saw; closes it. */
static unsigned sent_to(int fd, const uint8_t dst[4])
{
	unsigned count = 0;
	uint8_t packet[2048];
	struct sockaddr_ll from;
	socklen_t len;
	ssize_t n;

	for (;;) {
		len = sizeof(from);
		n = recvfrom(fd, packet, sizeof(packet), 0, (struct sockaddr *)&from, &len);
		if (n < 0)
			break;
		/* The destination address is at byte 16 of the IPv4 header. */
		if (from.sll_pkttype == PACKET_OUTGOING && from.sll_protocol == htons(ETH_P_IP) &&
		    n >= 20 && memcmp(packet + 16, dst, 4) == 0)
			count++;
	}
	assert_int_equal(errno, EAGAIN);
	close(fd);
	return count;
}

/*
 * A route that leaves through another host device (the other tenant's
 * rxe1, on vb) is not the guest's to use: the connection fails before
 * anything is sent there.  Here the host's rdma_cm refuses first (the
 * bound source address pins rxe0, and the route resolves to no GID of
 * it: EHOSTUNREACH); the device's own check (ENETUNREACH) is for a
 * resolution that does land on another device.
 */
static void test_route_through_other_device(void **state)
{
	uint8_t elsewhere[4] = { 198, 51, 100, 7 };
	struct vrdma_cm_event e;
	struct rp_guest g;
	uint32_t conn;
	int watch;
	int st;

	(void)state;
	/* 198.51.100.7 is reached through vb (rxe1) only. */
	assert_int_equal(system("ip route add 198.51.100.7/32 dev vb && "
				"ip neigh replace 198.51.100.7 lladdr 02:00:00:00:00:07 dev vb "
				"nud permanent"), 0);
	assert_int_equal(rp_guest_open(tenant_a.sock, &g), 0);
	rt_guest_qp_init_cm(&g);
	watch = watch_sent("vb");
	conn = guest_connect_to(&g, elsewhere, 18705, &st);
	assert_int_equal(st, 0);
	rt_guest_cm_event(&g, VRDMA_CM_EV_CONNECT_REPLY, &e);
	assert_int_equal(e.conn, conn);
	if (e.status != VRDMA_ENETUNREACH && e.status != 113 /* EHOSTUNREACH */)
		fail_msg("a route through vb ended with status %u", e.status);
	assert_int_equal(sent_to(watch, elsewhere), 0);
	rp_guest_close(&g);
}

/* The route goes, even after a failed test. */
static int remove_route(void **state)
{
	int gone = system("ip route del 198.51.100.7/32 dev vb 2>/dev/null");

	(void)state, (void)gone;
	return 0;
}

/*
 * The handle of a live request of another guest of the same tenant, on the
 * same host function, names nothing here: ACCEPT, REJECT and DISCONNECT of
 * it are refused, and the request stays the other guest's to answer.
 */
static void test_foreign_conn_handles(void **state)
{
	struct vrdma_cm_listen_req l = { .port = 18706, .backlog = 1 };
	struct vrdma_handle lh = { 0 };
	struct vrdma_cm_event e;
	struct rp_guest g, other;
	struct peer p;

	(void)state;
	assert_int_equal(rp_guest_open(tenant_a.sock, &g), 0);
	assert_int_equal(rp_guest_open(tenant_a.sock, &other), 0);
	assert_int_equal(vgd_cmd(other.g, VRDMA_CMD_CM_LISTEN, &l, sizeof(l), &lh, sizeof(lh)), 0);
	rt_guest_qp_init_cm(&g);
	p.pid = fork();
	assert_true(p.pid >= 0);
	if (p.pid == 0) {
		alarm(PEER_TIMEOUT_S);
		_exit(enter_netns(netns_b) ? 2 : peer_flood("18706", 1));
	}
	p.ready = -1;
	rt_guest_cm_event(&other, VRDMA_CM_EV_CONNECT_REQUEST, &e);
	{
		struct vrdma_cm_accept_req a = { .conn = e.conn, .qp = g.qp.handle };
		struct vrdma_cm_reject_req r = { .conn = e.conn };

		assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_ACCEPT, &a, sizeof(a), NULL, 0),
				 VRDMA_ENOENT);
		assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_REJECT, &r, sizeof(r), NULL, 0),
				 VRDMA_ENOENT);
		assert_int_equal(vgd_cmd(g.g, VRDMA_CMD_CM_DISCONNECT,
					 &(struct vrdma_handle){ e.conn }, sizeof(struct vrdma_handle),
					 NULL, 0), VRDMA_ENOENT);
		/* Still the other guest's: it rejects it, and the peer hears so. */
		assert_int_equal(vgd_cmd(other.g, VRDMA_CMD_CM_REJECT, &r, sizeof(r), NULL, 0), 0);
	}
	peer_finish(&p);
	rp_guest_close(&other);
	rp_guest_close(&g);
}

static int setup(void **state)
{
	const char *args_a[] = { "--device", "rdma", "--ibdev", dev_a, NULL };

	(void)state;
	return vt_spawn(&tenant_a, "a.sock", args_a) ? -1 : 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_guest_connects),
		cmocka_unit_test(test_guest_listens),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test_teardown(test_route_through_other_device, remove_route),
		cmocka_unit_test(test_foreign_conn_handles),
		cmocka_unit_test(test_cm_events_bounded),
	};

	const char *rig[4];

	vt_init(argc, argv);
	rt_require_rig((const char *const[]){ "VRDMA_RXE_DEV_A", "VRDMA_RXE_ADDR_A",
					      "VRDMA_RXE_ADDR_B", "VRDMA_RXE_NETNS_B", NULL }, rig);
	dev_a = rig[0];
	addr_a = rig[1];
	addr_b = rig[2];
	netns_b = rig[3];
	return VT_RUN(tests, setup, NULL, &tenant_a);
}

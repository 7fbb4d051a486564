// SPDX-License-Identifier: MIT
/*
 * rkey-probe: one device instance attacks another's memory.
 *
 *   rkey-probe victim DEV PORT GID_INDEX
 *   rkey-probe attack DEV HOST PORT GID_INDEX
 *
 * tests/nested/run gives the nested guest two vrdma devices of one back
 * end, two device instances on one host function (rxe0), as two guests'
 * devices would be: the victim runs on one, the attacker on the other.
 * Every key below is therefore a live key of the same host device, and
 * only isolation stops the attacker.  The victim
 * registers three buffers: MR1 (PD1, remote read/write), MR2 (PD1, local
 * access only) and MR3 (PD2, remote read/write), connects one RC QP in PD1
 * per probe to the attacker, and gives the attacker everything an attacker
 * could guess or steal: every address, rkey *and lkey*.  The attacker then:
 *
 *   granted      WRITEs MR1[0..64) with its rkey          -> success (control)
 *   no-access    WRITEs MR2 with MR2's lkey as rkey        -> remote access error
 *   other-pd     WRITEs MR3 through a QP of PD1            -> remote access error
 *   read-other   READs MR3 through a QP of PD1             -> remote access error
 *   foreign-lkey WRITEs MR1[64..128) from a local SGE
 *                carrying the victim's MR1 lkey            -> local protection error,
 *                refused by the attacker's back end itself (spec 6.2: byte_len 0
 *                and QP_FATAL on the QP; the host device's own PD check gives the
 *                same status, but neither of those)
 *
 * and tells the victim it is done; the victim checks that only MR1[0..64)
 * changed.  Each side prints "RKEY-PROBE NAME got STATUS want STATUS" lines
 * (a post the provider refused is "RKEY-PROBE NAME post refused: ERROR",
 * which never counts as the expected status) and exits 0 only when every
 * outcome is the expected one.  No probe is ever skipped.  Waits are
 * NESTED_WAIT_S seconds (default 60).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "nested-tcp.h"
#include "verbs-open.h"

#define BUF_SIZE 4096
#define NPROBES 5
#define VICTIM_FILL 0xaa
#define ATTACK_FILL 0x5a

enum { MR_GRANTED, MR_NO_ACCESS, MR_OTHER_PD, NMRS };

static const struct {
	const char *name;
	enum ibv_wr_opcode opcode;
	int mr;              /* the victim's target buffer */
	uint32_t offset;     /* within it */
	bool foreign_lkey;   /* local SGE carries the victim's lkey */
	bool lkey_as_rkey;   /* the rkey is the victim's lkey of that MR */
	enum ibv_wc_status want;
} probes[NPROBES] = {
	{ "granted", IBV_WR_RDMA_WRITE, MR_GRANTED, 0, false, false, IBV_WC_SUCCESS },
	{ "no-access", IBV_WR_RDMA_WRITE, MR_NO_ACCESS, 0, false, true, IBV_WC_REM_ACCESS_ERR },
	{ "other-pd", IBV_WR_RDMA_WRITE, MR_OTHER_PD, 0, false, false, IBV_WC_REM_ACCESS_ERR },
	{ "read-other", IBV_WR_RDMA_READ, MR_OTHER_PD, 64, false, false, IBV_WC_REM_ACCESS_ERR },
	{ "foreign-lkey", IBV_WR_RDMA_WRITE, MR_GRANTED, 64, true, false, IBV_WC_LOC_PROT_ERR },
};

/* What each side tells the other (both run this program on x86-64). */
struct side_info {
	uint8_t gid[16];
	uint32_t qpn[NPROBES];
	uint32_t psn;
	struct {
		uint64_t addr;
		uint32_t rkey, lkey;
	} mr[NMRS];
};

struct verbs {
	const char *dev;
	struct ibv_context *ctx;
	struct ibv_pd *pd[2];
	struct ibv_cq *cq;
	struct ibv_qp *qp[NPROBES];
	struct ibv_mr *mr[NMRS];
	uint8_t *buf[NMRS];
	int gid_index;
};

static void die(const char *what)
{
	fprintf(stderr, "rkey-probe: %s: %s\n", what, strerror(errno));
	exit(2);
}

static int wait_s(void)
{
	const char *s = getenv("NESTED_WAIT_S");

	return s && atoi(s) > 0 ? atoi(s) : 60;
}

static void open_device(struct verbs *v)
{
	v->ctx = nested_open_device(v->dev);
	if (!v->ctx)
		die("ibv_open_device");
	v->pd[0] = ibv_alloc_pd(v->ctx);
	v->pd[1] = ibv_alloc_pd(v->ctx);
	v->cq = ibv_create_cq(v->ctx, 4 * NPROBES, NULL, NULL, 0);
	if (!v->pd[0] || !v->pd[1] || !v->cq)
		die("PD/CQ");
	for (int i = 0; i < NPROBES; i++) {
		struct ibv_qp_init_attr init = {
			.send_cq = v->cq, .recv_cq = v->cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1,
				 .max_recv_sge = 1 },
			.sq_sig_all = 1,
		};
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_INIT, .port_num = 1,
			.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
		};

		v->qp[i] = ibv_create_qp(v->pd[0], &init);
		if (!v->qp[i] || ibv_modify_qp(v->qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
								    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			die("QP to INIT");
	}
}

static struct ibv_mr *reg(struct verbs *v, int i, struct ibv_pd *pd, int access, uint8_t fill)
{
	v->buf[i] = aligned_alloc(4096, BUF_SIZE);
	if (!v->buf[i])
		die("aligned_alloc");
	memset(v->buf[i], fill, BUF_SIZE);
	v->mr[i] = ibv_reg_mr(pd, v->buf[i], BUF_SIZE, access);
	if (!v->mr[i])
		die("ibv_reg_mr");
	return v->mr[i];
}

static void describe(const struct verbs *v, struct side_info *me, uint32_t psn)
{
	union ibv_gid gid;

	memset(me, 0, sizeof(*me));
	if (ibv_query_gid(v->ctx, 1, v->gid_index, &gid))
		die("ibv_query_gid");
	memcpy(me->gid, gid.raw, sizeof(me->gid));
	for (int i = 0; i < NPROBES; i++)
		me->qpn[i] = v->qp[i]->qp_num;
	me->psn = psn;
	for (int i = 0; i < NMRS; i++) {
		if (!v->mr[i])
			continue;
		me->mr[i].addr = (uintptr_t)v->buf[i];
		me->mr[i].rkey = v->mr[i]->rkey;
		me->mr[i].lkey = v->mr[i]->lkey;
	}
}

static void connect_qps(struct verbs *v, const struct side_info *me, const struct side_info *peer)
{
	for (int i = 0; i < NPROBES; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
			.dest_qp_num = peer->qpn[i], .rq_psn = peer->psn,
			.max_dest_rd_atomic = 1, .min_rnr_timer = 12,
			.ah_attr = { .is_global = 1, .port_num = 1,
				     .grh = { .sgid_index = (uint8_t)v->gid_index, .hop_limit = 64 } },
		};

		memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
		if (ibv_modify_qp(v->qp[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
							 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
							 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
			die("QP to RTR");
		a = (struct ibv_qp_attr){
			.qp_state = IBV_QPS_RTS, .sq_psn = me->psn, .timeout = 14,
			.retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1,
		};
		if (ibv_modify_qp(v->qp[i], &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
							 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
							 IBV_QP_MAX_QP_RD_ATOMIC))
			die("QP to RTS");
	}
}

static int read_full(int fd, void *p, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, (uint8_t *)p + got, n - got);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static int victim(int port, struct verbs *v)
{
	struct side_info me, peer;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int one = 1, ls, fd, bad = 0;
	uint8_t done, verdict;

	reg(v, MR_GRANTED, v->pd[0], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					     IBV_ACCESS_REMOTE_READ, VICTIM_FILL);
	reg(v, MR_NO_ACCESS, v->pd[0], IBV_ACCESS_LOCAL_WRITE, VICTIM_FILL);
	reg(v, MR_OTHER_PD, v->pd[1], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					      IBV_ACCESS_REMOTE_READ, VICTIM_FILL);
	describe(v, &me, 0x1111);
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1))
		die("listen");
	printf("rkey-probe: victim listening on %d\n", port);
	fflush(stdout);
	/* A connection that closes before the attacker's half is a probe of
	 * the forwarding path (QEMU's user network accepts before we do). */
	for (;;) {
		fd = accept(ls, NULL, NULL);
		if (fd < 0)
			die("accept");
		if (nested_tcp_write_all(fd, &me, sizeof(me)) == 0 && read_full(fd, &peer, sizeof(peer)) == 0)
			break;
		close(fd);
	}
	connect_qps(v, &me, &peer);
	if (nested_tcp_write_all(fd, &me, 1) || read_full(fd, &done, 1))
		die("waiting for the attacker");
	for (int i = 0; i < BUF_SIZE; i++) {
		uint8_t want = VICTIM_FILL;

		if (i < 64)
			want = ATTACK_FILL; /* the granted write lands in MR1 only */
		if (v->buf[MR_GRANTED][i] != want) {
			printf("RKEY-PROBE victim MR1[%d] = %#x, want %#x\n", i,
			       v->buf[MR_GRANTED][i], want);
			bad = 1;
			break;
		}
	}
	for (int m = MR_NO_ACCESS; m < NMRS; m++)
		for (int i = 0; i < BUF_SIZE; i++)
			if (v->buf[m][i] != VICTIM_FILL) {
				printf("RKEY-PROBE victim MR%d[%d] = %#x: the attack landed\n",
				       m + 1, i, v->buf[m][i]);
				bad = 1;
				break;
			}
	printf("RKEY-PROBE victim memory %s\n", bad ? "CHANGED" : "intact (only the granted 64 bytes written)");
	verdict = (uint8_t)bad;
	nested_tcp_write_all(fd, &verdict, 1);
	close(fd);
	close(ls);
	return bad;
}

/* The probe's completion status (its byte_len in *len), or -errno if the
 * post itself failed. */
static int run_probe(struct verbs *v, int i, const struct side_info *peer, uint32_t *ret_len)
{
	const uint32_t len = 64;
	struct ibv_sge sge = {
		.addr = (uintptr_t)v->buf[0] + (probes[i].opcode == IBV_WR_RDMA_READ ? 1024 : 0),
		.length = len,
		.lkey = probes[i].foreign_lkey ? peer->mr[probes[i].mr].lkey : v->mr[0]->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1, .opcode = probes[i].opcode,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = {
			.remote_addr = peer->mr[probes[i].mr].addr + probes[i].offset,
			.rkey = probes[i].lkey_as_rkey ? peer->mr[probes[i].mr].lkey
						       : peer->mr[probes[i].mr].rkey,
		},
	}, *bad;
	struct ibv_wc wc;
	struct timespec t0, t;

	int ret = ibv_post_send(v->qp[i], &wr, &bad);

	if (ret)
		return -ret;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(v->cq, 1, &wc);

		if (n < 0)
			die("ibv_poll_cq");
		if (n == 1 && wc.wr_id == (uint64_t)i) {
			*ret_len = wc.byte_len;
			return (int)wc.status;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > wait_s()) {
			fprintf(stderr, "rkey-probe: %s: no completion in %d s\n", probes[i].name,
				wait_s());
			return IBV_WC_GENERAL_ERR;
		}
		usleep(1000);
	}
}

/* Whether the device reported QP_FATAL for qp within the wait. */
static bool qp_fatal_seen(struct verbs *v, struct ibv_qp *qp)
{
	struct pollfd p = { .fd = v->ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	time_t end = time(NULL) + wait_s();
	bool seen = false;

	while (!seen && time(NULL) < end) {
		if (poll(&p, 1, 500) <= 0)
			continue;
		if (ibv_get_async_event(v->ctx, &ev))
			die("ibv_get_async_event");
		seen = ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == qp;
		ibv_ack_async_event(&ev);
	}
	return seen;
}

static int attack(const char *host, int port, struct verbs *v)
{
	struct side_info me, peer;
	int fd = -1, bad = 0;
	uint8_t ack, verdict = 1;

	reg(v, 0, v->pd[0], IBV_ACCESS_LOCAL_WRITE, ATTACK_FILL);
	describe(v, &me, 0x2222);
	/* The victim may not be listening yet: try for the whole wait. */
	for (int tries = 0; tries < wait_s(); tries++) {
		fd = nested_tcp_connect(host, port);
		if (fd >= 0 && read_full(fd, &peer, sizeof(peer)) == 0 &&
		    nested_tcp_write_all(fd, &me, sizeof(me)) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		sleep(1);
	}
	if (fd < 0)
		die("no victim");
	connect_qps(v, &me, &peer);
	if (read_full(fd, &ack, 1))
		die("victim gone");
	for (int i = 0; i < NPROBES; i++) {
		uint32_t len = 0;
		int got;

		/* One host function: two live MRs never share a key. */
		if (probes[i].foreign_lkey && peer.mr[probes[i].mr].lkey == v->mr[0]->lkey) {
			printf("RKEY-PROBE %s FAILED: the victim's lkey %#x is also ours: "
			       "not one host function?\n", probes[i].name, v->mr[0]->lkey);
			bad = 1;
			continue;
		}
		got = run_probe(v, i, &peer, &len);
		if (got < 0) {
			printf("RKEY-PROBE %s post refused: %s\n", probes[i].name, strerror(-got));
			bad = 1;
			continue;
		}
		printf("RKEY-PROBE %s got %s want %s\n", probes[i].name,
		       ibv_wc_status_str((enum ibv_wc_status)got), ibv_wc_status_str(probes[i].want));
		bad |= got != (int)probes[i].want;
		if (!probes[i].foreign_lkey)
			continue;
		/* The back end's own refusal (spec 6.2), not the host's PD check. */
		if (len || !qp_fatal_seen(v, v->qp[i])) {
			printf("RKEY-PROBE %s FAILED: not refused by the back end (byte_len %u, "
			       "no QP_FATAL with it)\n", probes[i].name, len);
			bad = 1;
		} else {
			printf("RKEY-PROBE %s refused by the back end: byte_len 0, QP_FATAL\n",
			       probes[i].name);
		}
	}
	/* The READ must not have brought the victim's bytes over either. */
	for (int i = 1024; i < 1024 + 64; i++)
		if (v->buf[0][i] != ATTACK_FILL) {
			printf("RKEY-PROBE read-other: the victim's bytes arrived\n");
			bad = 1;
			break;
		}
	ack = 1;
	if (nested_tcp_write_all(fd, &ack, 1) || read_full(fd, &verdict, 1))
		die("victim gone before its verdict");
	printf("RKEY-PROBE victim says its memory is %s\n", verdict ? "CHANGED" : "intact");
	close(fd);
	return bad || verdict;
}

int main(int argc, char **argv)
{
	struct verbs v = { 0 };
	int victim_mode = argc == 5 && !strcmp(argv[1], "victim");

	if (!victim_mode && !(argc == 6 && !strcmp(argv[1], "attack"))) {
		fprintf(stderr, "usage: rkey-probe victim DEV PORT GID_INDEX\n"
				"       rkey-probe attack DEV HOST PORT GID_INDEX\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	v.dev = argv[2];
	v.gid_index = atoi(argv[argc - 1]);
	open_device(&v);
	if (victim_mode)
		return victim(atoi(argv[3]), &v);
	return attack(argv[3], atoi(argv[4]), &v);
}

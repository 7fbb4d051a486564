// SPDX-License-Identifier: MIT
/*
 * cm-reject: the private data of an rdma_cm REJECT reaches the side that
 * asked (tests/nested/run starts the peer, tests/nested/init the client).
 *
 *   cm-reject peer ADDR PORT SECONDS
 *       Natively, on the second Soft-RoCE device: listens on ADDR:PORT and
 *       rejects every request with REJECT_PDATA, for SECONDS.
 *   cm-reject client ADDR PORT SECONDS
 *       In the nested guest, through the vrdma device: connects to
 *       ADDR:PORT and wants RDMA_CM_EVENT_REJECTED carrying REJECT_PDATA.
 *
 * Each prints "CM-REJECT ..." lines; the client exits 0 only when the
 * rejection and its private data arrived.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/rdma_cma.h>

#define REJECT_PDATA "vrdma-nested: no room here"

static int fail(const char *what)
{
	printf("CM-REJECT FAIL %s: %s\n", what, strerror(errno));
	return 1;
}

/* The next event of @ch within @ms, or NULL (errno ETIMEDOUT). */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;

	if (poll(&p, 1, ms) <= 0) {
		errno = ETIMEDOUT;
		return NULL;
	}
	return rdma_get_cm_event(ch, &e) ? NULL : e;
}

/* Waits for the event @want on @ch; 0, or a failure printed. */
static int expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want, int ms)
{
	struct rdma_cm_event *e = next_event(ch, ms);
	enum rdma_cm_event_type got;

	if (!e)
		return fail(rdma_event_str(want));
	got = e->event;
	rdma_ack_cm_event(e);
	if (got != want) {
		printf("CM-REJECT FAIL %s where %s was due\n", rdma_event_str(got),
		       rdma_event_str(want));
		return 1;
	}
	return 0;
}

static int address(const char *ip, const char *port, struct sockaddr_in *sin)
{
	*sin = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(atoi(port)) };
	if (inet_pton(AF_INET, ip, &sin->sin_addr) != 1) {
		printf("CM-REJECT FAIL not an IPv4 address: %s\n", ip);
		return 1;
	}
	return 0;
}

static int peer(struct rdma_event_channel *ch, struct rdma_cm_id *id, struct sockaddr_in *at,
		int seconds)
{
	time_t end = time(NULL) + seconds;
	struct rdma_cm_event *e;
	unsigned rejected = 0;

	if (rdma_bind_addr(id, (struct sockaddr *)at) || rdma_listen(id, 8))
		return fail("rdma_bind_addr/rdma_listen");
	printf("CM-REJECT peer listens\n");
	fflush(stdout);
	while (time(NULL) < end) {
		e = next_event(ch, 1000);
		if (!e)
			continue;
		if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			if (rdma_reject(e->id, REJECT_PDATA, sizeof(REJECT_PDATA)))
				return fail("rdma_reject");
			printf("CM-REJECT peer rejected request %u\n", ++rejected);
			fflush(stdout);
		}
		rdma_ack_cm_event(e);
	}
	return 0;
}

static int client(struct rdma_event_channel *ch, struct rdma_cm_id *id, struct sockaddr_in *to,
		  int seconds)
{
	struct ibv_qp_init_attr qp = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct rdma_conn_param param = { .private_data = "hello", .private_data_len = 6 };
	struct rdma_cm_event *e;
	int ms = seconds * 1000;
	struct ibv_pd *pd;
	int bad;

	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)to, 2000) ||
	    expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, ms))
		return fail("address resolution");
	if (rdma_resolve_route(id, 2000) || expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, ms))
		return fail("route resolution");
	pd = ibv_alloc_pd(id->verbs);
	if (!pd)
		return fail("ibv_alloc_pd");
	if (rdma_create_qp(id, pd, &qp))
		return fail("rdma_create_qp");
	if (rdma_connect(id, &param))
		return fail("rdma_connect");
	e = next_event(ch, ms);
	if (!e)
		return fail("the answer to rdma_connect");
	printf("CM-REJECT client got %s, status %d, %u bytes of private data\n",
	       rdma_event_str(e->event), e->status, e->param.conn.private_data_len);
	bad = e->event != RDMA_CM_EVENT_REJECTED ||
	      e->param.conn.private_data_len < sizeof(REJECT_PDATA) ||
	      memcmp(e->param.conn.private_data, REJECT_PDATA, sizeof(REJECT_PDATA)) != 0;
	rdma_ack_cm_event(e);
	rdma_destroy_qp(id);
	ibv_dealloc_pd(pd);
	if (bad) {
		printf("CM-REJECT FAIL want REJECTED carrying \"%s\"\n", REJECT_PDATA);
		return 1;
	}
	printf("CM-REJECT client: the peer's private data arrived with the rejection\n");
	return 0;
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct sockaddr_in sin;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 5 || (strcmp(argv[1], "peer") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: cm-reject peer|client ADDR PORT SECONDS\n");
		return 2;
	}
	if (address(argv[2], argv[3], &sin))
		return 1;
	ch = rdma_create_event_channel();
	if (!ch)
		return fail("rdma_create_event_channel");
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return fail("rdma_create_id");
	if (!strcmp(argv[1], "peer"))
		rc = peer(ch, id, &sin, atoi(argv[4]));
	else
		rc = client(ch, id, &sin, atoi(argv[4]));
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return rc;
}

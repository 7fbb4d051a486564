// SPDX-License-Identifier: MIT
/*
 * The device state's bytes (rdma-state.h): a header (8 bytes of magic,
 * le32 version, le32 records, le32 generation, le32 0), then records of
 * { le16 type, le16 0, le32 length, body }.  Bodies:
 *
 *   PD     le32 handle, le32 0
 *   MR     le32 handle, lkey, rkey, flags (bit 0: released); REG_MR's request
 *   CQ     le32 handle, prod; le16 arm; u8 event_pending, dead; le32 0;
 *          CREATE_CQ's request
 *   QP     le32 handle, qpn, sq_next, sq_tail, rq_tail, flags (bit 0: rings
 *          gone); MODIFY_QP's request (its state now); CREATE_QP's request
 *   EVENT  struct vrdma_event
 *   PEER   le32 QP handle, le32 peer's QP number, le32 the QP's number on
 *          the source, le32 n; the peer's GID[16], the source's GID[16],
 *          token[16]; n times { le32 guest's rkey, le32 host's rkey }
 *   CM_LISTEN  le32 handle; le16 port, backlog
 *   CM_CONN    le32 handle, listen, QP handle (0: none), flags (bit 0: live);
 *              local IPv4[4], remote IPv4[4]; le16 local port, remote port
 *   CM_EVENT   le32 flags (bit 0: final, bit 1: ring); struct vrdma_cm_event
 *
 * A request is the command's payload as the guest sent it, page list
 * included, checked here by the same functions that check the guest's.
 */
#include <string.h>

#include "rdma-state.h"
#include "util.h"

#define HEADER_SIZE 24u
#define RECORD_HEADER 8u
#define MR_PREFIX 16u
#define CQ_PREFIX 16u
#define QP_PREFIX 24u
#define PEER_PREFIX 64u
#define FLAG_RELEASED 1u
#define FLAG_RINGS_GONE 1u
#define CM_LISTEN_SIZE 8u
#define CM_CONN_SIZE 28u
#define FLAG_LIVE 1u
#define FLAG_FINAL 1u
#define FLAG_RING 2u

/* ---- writing ---- */

void rdma_state_begin(struct rdma_state_writer *w, uint32_t generation)
{
	uint8_t h[HEADER_SIZE] = { 0 };

	w->buf = g_byte_array_new();
	w->records = 0;
	memcpy(h, RDMA_STATE_MAGIC, 8);
	put_le32(h + 8, RDMA_STATE_VERSION);
	put_le32(h + 16, generation);
	g_byte_array_append(w->buf, h, sizeof(h));
}

/* A record's header and its fixed part; the caller appends the rest. */
static void put_record(struct rdma_state_writer *w, uint16_t type, const void *fixed,
		       size_t fixed_len, size_t rest_len)
{
	uint8_t h[RECORD_HEADER];

	put_le16(h, type);
	put_le16(h + 2, 0);
	put_le32(h + 4, (uint32_t)(fixed_len + rest_len));
	g_byte_array_append(w->buf, h, sizeof(h));
	g_byte_array_append(w->buf, fixed, (guint)fixed_len);
	w->records++;
}

static void put_pages(struct rdma_state_writer *w, const uint64_t *pages, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		uint8_t le[8];

		put_le64(le, pages[i]);
		g_byte_array_append(w->buf, le, sizeof(le));
	}
}

void rdma_state_put_pd(struct rdma_state_writer *w, uint32_t handle)
{
	uint8_t b[8] = { 0 };

	put_le32(b, handle);
	put_record(w, RDMA_STATE_PD, b, sizeof(b), 0);
}

void rdma_state_put_mr(struct rdma_state_writer *w, const struct rdma_state_mr *mr,
		       const uint64_t *pages)
{
	uint8_t b[MR_PREFIX + sizeof(mr->req)];

	put_le32(b, mr->handle);
	put_le32(b + 4, mr->lkey);
	put_le32(b + 8, mr->rkey);
	put_le32(b + 12, mr->released ? FLAG_RELEASED : 0);
	memcpy(b + MR_PREFIX, &mr->req, sizeof(mr->req));
	put_record(w, RDMA_STATE_MR, b, sizeof(b), 8ull * mr->req.npages);
	put_pages(w, pages, mr->req.npages);
}

void rdma_state_put_cq(struct rdma_state_writer *w, const struct rdma_state_cq *cq,
		       const uint64_t *pages)
{
	uint8_t b[CQ_PREFIX + sizeof(cq->req)] = { 0 };

	put_le32(b, cq->handle);
	put_le32(b + 4, cq->prod);
	put_le16(b + 8, cq->arm);
	b[10] = cq->event_pending;
	b[11] = cq->dead;
	memcpy(b + CQ_PREFIX, &cq->req, sizeof(cq->req));
	put_record(w, RDMA_STATE_CQ, b, sizeof(b), 8ull * cq->req.npages);
	put_pages(w, pages, cq->req.npages);
}

void rdma_state_put_qp(struct rdma_state_writer *w, const struct rdma_state_qp *qp,
		       const uint64_t *pages)
{
	uint8_t b[QP_PREFIX + sizeof(qp->attr) + sizeof(qp->req)];
	uint64_t npages = (uint64_t)qp->req.sq_npages + qp->req.rq_npages;

	put_le32(b, qp->handle);
	put_le32(b + 4, qp->qpn);
	put_le32(b + 8, qp->sq_next);
	put_le32(b + 12, qp->sq_tail);
	put_le32(b + 16, qp->rq_tail);
	put_le32(b + 20, qp->rings_gone ? FLAG_RINGS_GONE : 0);
	memcpy(b + QP_PREFIX, &qp->attr, sizeof(qp->attr));
	memcpy(b + QP_PREFIX + sizeof(qp->attr), &qp->req, sizeof(qp->req));
	put_record(w, RDMA_STATE_QP, b, sizeof(b), 8 * npages);
	put_pages(w, pages, npages);
}

void rdma_state_put_event(struct rdma_state_writer *w, const struct vrdma_event *ev)
{
	put_record(w, RDMA_STATE_EVENT, ev, sizeof(*ev), 0);
}

void rdma_state_put_peer(struct rdma_state_writer *w, const struct rdma_state_peer *peer)
{
	uint8_t b[PEER_PREFIX];

	put_le32(b, peer->qp);
	put_le32(b + 4, peer->link.qpn);
	put_le32(b + 8, peer->link.from_qpn);
	put_le32(b + 12, peer->n_rkeys);
	memcpy(b + 16, peer->link.gid, 16);
	memcpy(b + 32, peer->link.from_gid, 16);
	memcpy(b + 48, peer->link.token, 16);
	put_record(w, RDMA_STATE_PEER, b, sizeof(b), 8ull * peer->n_rkeys);
	g_byte_array_append(w->buf, peer->rkeys, 8 * peer->n_rkeys);
}

void rdma_state_put_cm_listen(struct rdma_state_writer *w, const struct rdma_state_cm_listen *l)
{
	uint8_t b[CM_LISTEN_SIZE];

	put_le32(b, l->handle);
	put_le16(b + 4, l->port);
	put_le16(b + 6, l->backlog);
	put_record(w, RDMA_STATE_CM_LISTEN, b, sizeof(b), 0);
}

void rdma_state_put_cm_conn(struct rdma_state_writer *w, const struct rdma_state_cm_conn *c)
{
	uint8_t b[CM_CONN_SIZE];

	put_le32(b, c->handle);
	put_le32(b + 4, c->listen);
	put_le32(b + 8, c->qp);
	put_le32(b + 12, c->live ? FLAG_LIVE : 0);
	memcpy(b + 16, c->local_ip, 4);
	memcpy(b + 20, c->remote_ip, 4);
	put_le16(b + 24, c->local_port);
	put_le16(b + 26, c->remote_port);
	put_record(w, RDMA_STATE_CM_CONN, b, sizeof(b), 0);
}

void rdma_state_put_cm_event(struct rdma_state_writer *w, const struct rdma_state_cm_event *e)
{
	uint8_t b[4 + sizeof(e->ev)];

	put_le32(b, (e->final ? FLAG_FINAL : 0) | (e->ring ? FLAG_RING : 0));
	memcpy(b + 4, &e->ev, sizeof(e->ev));
	put_record(w, RDMA_STATE_CM_EVENT, b, sizeof(b), 0);
}

uint8_t *rdma_state_end(struct rdma_state_writer *w, size_t *ret_len)
{
	put_le32(w->buf->data + 12, w->records);
	*ret_len = w->buf->len;
	return g_byte_array_free(g_steal_pointer(&w->buf), FALSE);
}

/* ---- reading ---- */

/* A handle as the table makes them: an index and a generation, not 0. */
static bool handle_ok(uint32_t h)
{
	return (h & RDMA_TABLE_MAX) && (h >> RDMA_HANDLE_INDEX_BITS);
}

/* The command after a record's prefix, as an rdma_request to check. */
static struct rdma_request command(uint16_t opcode, const uint8_t *body, size_t prefix,
				   size_t len)
{
	return (struct rdma_request){ .opcode = opcode, .payload = body + prefix,
				      .len = len - prefix };
}

static int decode_mr(const uint8_t *b, size_t len, const struct rdma_limits *lim,
		     struct rdma_state_mr *ret)
{
	uint32_t flags;

	if (len < MR_PREFIX)
		return VRDMA_EINVAL;
	ret->handle = get_le32(b);
	ret->lkey = get_le32(b + 4);
	ret->rkey = get_le32(b + 8);
	flags = get_le32(b + 12);
	if (!handle_ok(ret->handle) || (flags & ~FLAG_RELEASED))
		return VRDMA_EINVAL;
	ret->released = flags & FLAG_RELEASED;
	ret->rq = command(VRDMA_CMD_REG_MR, b, MR_PREFIX, len);
	return rdma_check_reg_mr(&ret->rq, lim, &ret->req);
}

static int decode_cq(const uint8_t *b, size_t len, const struct rdma_limits *lim,
		     struct rdma_state_cq *ret)
{
	int r;

	if (len < CQ_PREFIX)
		return VRDMA_EINVAL;
	ret->handle = get_le32(b);
	ret->prod = get_le32(b + 4);
	ret->arm = get_le16(b + 8);
	if (!handle_ok(ret->handle) || b[10] > 1 || b[11] > 1 || get_le32(b + 12) ||
	    (ret->arm && ret->arm != VRDMA_DB_CQ_ARM && ret->arm != VRDMA_DB_CQ_ARM_SOLICITED))
		return VRDMA_EINVAL;
	ret->event_pending = b[10];
	ret->dead = b[11];
	ret->rq = command(VRDMA_CMD_CREATE_CQ, b, CQ_PREFIX, len);
	r = rdma_check_create_cq(&ret->rq, lim, &ret->req);
	if (!r && ret->prod >> ret->req.log2_slots)
		r = VRDMA_EINVAL;
	return r;
}

static int decode_qp(const uint8_t *b, size_t len, const struct rdma_limits *lim,
		     struct rdma_state_qp *ret)
{
	size_t attr_end = QP_PREFIX + sizeof(ret->attr);
	struct rdma_request attr;
	uint32_t flags;
	int r;

	if (len < attr_end)
		return VRDMA_EINVAL;
	ret->handle = get_le32(b);
	ret->qpn = get_le32(b + 4);
	ret->sq_next = get_le32(b + 8);
	ret->sq_tail = get_le32(b + 12);
	ret->rq_tail = get_le32(b + 16);
	flags = get_le32(b + 20);
	if (!handle_ok(ret->handle) || ret->qpn > 0xffffff || (flags & ~FLAG_RINGS_GONE))
		return VRDMA_EINVAL;
	ret->rings_gone = flags & FLAG_RINGS_GONE;
	attr = command(VRDMA_CMD_MODIFY_QP, b, QP_PREFIX, attr_end);
	r = rdma_check_modify_qp(&attr, lim, &ret->attr);
	if (!r && ret->attr.qp != ret->handle)
		r = VRDMA_EINVAL;
	if (r)
		return r;
	ret->rq = command(VRDMA_CMD_CREATE_QP, b, attr_end, len);
	r = rdma_check_create_qp(&ret->rq, lim, &ret->req);
	/* Positions are slots of the rings the request describes. */
	if (!r && (ret->sq_next >> ret->req.sq_log2_slots || ret->sq_tail >> ret->req.sq_log2_slots ||
		   ret->rq_tail >> ret->req.rq_log2_slots))
		r = VRDMA_EINVAL;
	return r;
}

static int decode_event(const uint8_t *b, size_t len, struct vrdma_event *ret)
{
	if (len != sizeof(*ret))
		return VRDMA_EINVAL;
	memcpy(ret, b, sizeof(*ret));
	if (!ret->type || ret->type > VRDMA_EV_CM || ret->reserved || ret->reserved2)
		return VRDMA_EINVAL;
	return VRDMA_OK;
}

static int decode_peer(const uint8_t *b, size_t len, struct rdma_state_peer *ret)
{
	if (len < PEER_PREFIX)
		return VRDMA_EINVAL;
	*ret = (struct rdma_state_peer){
		.qp = get_le32(b), .n_rkeys = get_le32(b + 12), .rkeys = b + PEER_PREFIX,
		.link = { .qpn = get_le32(b + 4), .from_qpn = get_le32(b + 8) },
	};
	memcpy(ret->link.gid, b + 16, 16);
	memcpy(ret->link.from_gid, b + 32, 16);
	memcpy(ret->link.token, b + 48, 16);
	if (!handle_ok(ret->qp) || ret->link.qpn > 0xffffff || ret->link.from_qpn > 0xffffff ||
	    ret->n_rkeys > RDMA_STATE_MAX_PEER_RKEYS || len != PEER_PREFIX + 8ull * ret->n_rkeys)
		return VRDMA_EINVAL;
	return VRDMA_OK;
}

/* A handle a table of at most limit objects hands out (rdma-table.c: its
 * slots grow to the next power of two past the count, and the limits
 * are powers of two): a larger index would grow the destination's table
 * for nothing. */
static bool index_below(uint32_t h, uint32_t limit)
{
	return (h & RDMA_TABLE_MAX) <= limit;
}

static int decode_cm_listen(const uint8_t *b, size_t len, struct rdma_state_cm_listen *ret)
{
	if (len != CM_LISTEN_SIZE)
		return VRDMA_EINVAL;
	*ret = (struct rdma_state_cm_listen){ .handle = get_le32(b), .port = get_le16(b + 4),
					      .backlog = get_le16(b + 6) };
	return handle_ok(ret->handle) && index_below(ret->handle, RDMA_CM_MAX_LISTENS) &&
			       ret->port && ret->backlog && ret->backlog <= VRDMA_CM_MAX_BACKLOG
		       ? VRDMA_OK
		       : VRDMA_EINVAL;
}

static int decode_cm_conn(const uint8_t *b, size_t len, struct rdma_state_cm_conn *ret)
{
	uint32_t flags;

	if (len != CM_CONN_SIZE)
		return VRDMA_EINVAL;
	flags = get_le32(b + 12);
	*ret = (struct rdma_state_cm_conn){
		.handle = get_le32(b), .listen = get_le32(b + 4), .qp = get_le32(b + 8),
		.live = flags & FLAG_LIVE, .local_port = get_le16(b + 24),
		.remote_port = get_le16(b + 26),
	};
	memcpy(ret->local_ip, b + 16, 4);
	memcpy(ret->remote_ip, b + 20, 4);
	/* A live connection has its QP, an ended one none. */
	if (!handle_ok(ret->handle) || !index_below(ret->handle, RDMA_CM_MAX_CONNS) ||
	    (flags & ~FLAG_LIVE) ||
	    (ret->listen && !handle_ok(ret->listen)) ||
	    (ret->live ? !handle_ok(ret->qp) : ret->qp != 0))
		return VRDMA_EINVAL;
	return VRDMA_OK;
}

static int decode_cm_event(const uint8_t *b, size_t len, struct rdma_state_cm_event *ret)
{
	const struct vrdma_cm_event *ev = &ret->ev;
	uint32_t flags;

	if (len != 4 + sizeof(ret->ev))
		return VRDMA_EINVAL;
	flags = get_le32(b);
	memcpy(&ret->ev, b + 4, sizeof(ret->ev));
	ret->final = flags & FLAG_FINAL;
	ret->ring = flags & FLAG_RING;
	if ((flags & ~(FLAG_FINAL | FLAG_RING)) || ev->type < VRDMA_CM_EV_CONNECT_REQUEST ||
	    ev->type > VRDMA_CM_EV_CLOSED || ev->reserved || ev->reserved2 ||
	    ev->pdata_len > sizeof(ev->pdata) || !handle_ok(ev->conn) ||
	    (ev->listen && !handle_ok(ev->listen)))
		return VRDMA_EINVAL;
	return VRDMA_OK;
}

static int decode_cm_record(uint16_t type, const uint8_t *b, size_t len,
			    const struct rdma_state_ops *ops, void *opaque)
{
	struct rdma_state_cm_listen l;
	struct rdma_state_cm_conn c;
	struct rdma_state_cm_event e;
	int r;

	switch (type) {
	case RDMA_STATE_CM_LISTEN:
		r = decode_cm_listen(b, len, &l);
		return r ? r : ops->cm_listen(opaque, &l);
	case RDMA_STATE_CM_CONN:
		r = decode_cm_conn(b, len, &c);
		return r ? r : ops->cm_conn(opaque, &c);
	default:
		r = decode_cm_event(b, len, &e);
		return r ? r : ops->cm_event(opaque, &e);
	}
}

static int decode_record(uint16_t type, const uint8_t *b, size_t len,
			 const struct rdma_limits *lim, const struct rdma_state_ops *ops,
			 void *opaque)
{
	struct rdma_state_mr mr;
	struct rdma_state_cq cq;
	struct rdma_state_qp qp;
	struct rdma_state_peer peer;
	struct vrdma_event ev;
	int r;

	switch (type) {
	case RDMA_STATE_PD:
		if (len != 8 || !handle_ok(get_le32(b)) || get_le32(b + 4))
			return VRDMA_EINVAL;
		return ops->pd(opaque, get_le32(b));
	case RDMA_STATE_MR:
		r = decode_mr(b, len, lim, &mr);
		return r ? r : ops->mr(opaque, &mr);
	case RDMA_STATE_CQ:
		r = decode_cq(b, len, lim, &cq);
		return r ? r : ops->cq(opaque, &cq);
	case RDMA_STATE_QP:
		r = decode_qp(b, len, lim, &qp);
		return r ? r : ops->qp(opaque, &qp);
	case RDMA_STATE_EVENT:
		r = decode_event(b, len, &ev);
		return r ? r : ops->event(opaque, &ev);
	case RDMA_STATE_PEER:
		r = decode_peer(b, len, &peer);
		return r ? r : ops->peer(opaque, &peer);
	default:
		return decode_cm_record(type, b, len, ops, opaque);
	}
}

int rdma_state_decode(const uint8_t *data, size_t len, const struct rdma_limits *lim,
		      const struct rdma_state_ops *ops, void *opaque)
{
	uint32_t records, seen = 0;
	uint16_t last_type = 0;
	size_t off = HEADER_SIZE;

	int r;

	if (len < HEADER_SIZE || memcmp(data, RDMA_STATE_MAGIC, 8) ||
	    get_le32(data + 8) != RDMA_STATE_VERSION || !get_le32(data + 16) || get_le32(data + 20))
		return VRDMA_EINVAL;
	records = get_le32(data + 12);
	if (records > RDMA_STATE_MAX_RECORDS)
		return VRDMA_E2BIG;
	r = ops->begin(opaque, get_le32(data + 16));
	if (r)
		return r;
	while (off < len) {
		uint16_t type;
		uint32_t body;

		if (len - off < RECORD_HEADER || seen == records)
			return VRDMA_EINVAL;
		type = get_le16(data + off);
		body = get_le32(data + off + 4);
		/* Known types, in the order objects depend on each other. */
		if (type < RDMA_STATE_PD || type > RDMA_STATE_CM_EVENT || type < last_type ||
		    get_le16(data + off + 2) || body > len - off - RECORD_HEADER)
			return VRDMA_EINVAL;
		r = decode_record(type, data + off + RECORD_HEADER, body, lim, ops, opaque);
		if (r)
			return r;
		last_type = type;
		seen++;
		off += RECORD_HEADER + body;
	}
	return seen == records ? VRDMA_OK : VRDMA_EINVAL;
}

/* ---- checking a state as a whole ---- */

struct whole {
	struct rdma_quota need;
	uint32_t generation;
	/* handles per kind, and the guest's names that must stay unique */
	GHashTable *pds, *mrs, *cqs, *qps, *lkeys, *rkeys, *qpns, *peers;
	/* rdma_cm: listens, connections (handle -> live + 1), the QPs in
	 * them, and the ended connections whose final event came */
	GHashTable *listens, *conns, *conn_qps, *finals;
	GHashTable *connected_qps; /* QPs in RTR or RTS */
	uint32_t ended, cm_events, rings;
};

/* Adds key to set; false when it was there already. */
static bool add_unique(GHashTable *set, uint32_t key)
{
	return g_hash_table_add(set, GUINT_TO_POINTER(key));
}

static bool has(GHashTable *set, uint32_t key)
{
	return g_hash_table_contains(set, GUINT_TO_POINTER(key));
}

static int whole_begin(void *opaque, uint32_t generation)
{
	((struct whole *)opaque)->generation = generation;
	return VRDMA_OK;
}

static int whole_pd(void *opaque, uint32_t handle)
{
	struct whole *w = opaque;

	w->need.pds++;
	return add_unique(w->pds, handle) ? VRDMA_OK : VRDMA_EINVAL;
}

static int whole_mr(void *opaque, struct rdma_state_mr *mr)
{
	struct whole *w = opaque;

	w->need.mrs++;
	w->need.pinned_bytes += mr->req.length;
	if (!has(w->pds, mr->req.pd))
		return VRDMA_ENOENT;
	/* rkey 0 names nothing: it is every local-only MR's (rdma-ctrl.c). */
	return add_unique(w->mrs, mr->handle) && add_unique(w->lkeys, mr->lkey) &&
			       (!mr->rkey || add_unique(w->rkeys, mr->rkey)) ? VRDMA_OK
									   : VRDMA_EINVAL;
}

static int whole_cq(void *opaque, struct rdma_state_cq *cq)
{
	struct whole *w = opaque;

	w->need.cqs++;
	return add_unique(w->cqs, cq->handle) ? VRDMA_OK : VRDMA_EINVAL;
}

static int whole_qp(void *opaque, struct rdma_state_qp *qp)
{
	struct whole *w = opaque;

	w->need.qps++;
	w->need.wrs += (1ull << qp->req.sq_log2_slots) + (1ull << qp->req.rq_log2_slots) - 2;
	if (!has(w->pds, qp->req.pd) || !has(w->cqs, qp->req.send_cq) ||
	    !has(w->cqs, qp->req.recv_cq))
		return VRDMA_ENOENT;
	if (rdma_qp_state_connected(qp->attr.attr.qp_state))
		add_unique(w->connected_qps, qp->handle);
	return add_unique(w->qps, qp->handle) && add_unique(w->qpns, qp->qpn) ? VRDMA_OK
									       : VRDMA_EINVAL;
}

static int whole_event(void *opaque, const struct vrdma_event *ev)
{
	(void)opaque, (void)ev;
	return VRDMA_OK;
}

/* One peer per QP, of a QP the state has. */
static int whole_peer(void *opaque, const struct rdma_state_peer *peer)
{
	struct whole *w = opaque;

	if (!has(w->qps, peer->qp))
		return VRDMA_ENOENT;
	return add_unique(w->peers, peer->qp) ? VRDMA_OK : VRDMA_EINVAL;
}

static int whole_cm_listen(void *opaque, const struct rdma_state_cm_listen *l)
{
	struct whole *w = opaque;

	return g_hash_table_size(w->listens) < RDMA_CM_MAX_LISTENS &&
			       add_unique(w->listens, l->handle) ? VRDMA_OK : VRDMA_EINVAL;
}

static int whole_cm_conn(void *opaque, const struct rdma_state_cm_conn *c)
{
	struct whole *w = opaque;

	if (g_hash_table_size(w->conns) >= RDMA_CM_MAX_CONNS ||
	    g_hash_table_contains(w->conns, GUINT_TO_POINTER(c->handle)))
		return VRDMA_EINVAL;
	g_hash_table_insert(w->conns, GUINT_TO_POINTER(c->handle), GUINT_TO_POINTER(c->live + 1u));
	if (!c->live) {
		w->ended++;
		return VRDMA_OK;
	}
	if (!has(w->qps, c->qp))
		return VRDMA_ENOENT;
	/* A connection goes on on a connected QP, and a QP is in one
	 * connection at most. */
	return has(w->connected_qps, c->qp) && add_unique(w->conn_qps, c->qp) ? VRDMA_OK
									       : VRDMA_EINVAL;
}

/* Each names a connection of the state; an ended connection has exactly
 * one final event, a live one none. */
static int whole_cm_event(void *opaque, const struct rdma_state_cm_event *e)
{
	struct whole *w = opaque;
	uint32_t kind = GPOINTER_TO_UINT(g_hash_table_lookup(w->conns,
							     GUINT_TO_POINTER(e->ev.conn)));

	/* (The guest is told of CM events once.) */
	if (++w->cm_events > 2 * RDMA_CM_MAX_CONNS || (e->ring && ++w->rings > 1))
		return VRDMA_EINVAL;
	if (!kind)
		return VRDMA_ENOENT;
	if (e->final && (kind != 1 || !add_unique(w->finals, e->ev.conn)))
		return VRDMA_EINVAL;
	return VRDMA_OK;
}

static bool fits(uint64_t need, uint64_t limit, uint64_t used)
{
	return used <= limit && need <= limit - used;
}

int rdma_state_check(const uint8_t *data, size_t len, const struct rdma_limits *lim,
		     const struct rdma_quota *limit, const struct rdma_quota *used,
		     uint32_t *ret_generation)
{
	static const struct rdma_state_ops ops = {
		.begin = whole_begin, .pd = whole_pd, .mr = whole_mr, .cq = whole_cq,
		.qp = whole_qp, .event = whole_event, .peer = whole_peer,
		.cm_listen = whole_cm_listen, .cm_conn = whole_cm_conn, .cm_event = whole_cm_event,
	};
	struct whole w = { 0 };
	GHashTable **sets[] = { &w.pds,   &w.mrs,     &w.cqs,	&w.qps,	    &w.lkeys,
				&w.rkeys, &w.qpns,    &w.peers, &w.listens, &w.conns,
				&w.conn_qps, &w.finals, &w.connected_qps };
	uint32_t finals;
	int r;

	for (size_t i = 0; i < G_N_ELEMENTS(sets); i++)
		*sets[i] = g_hash_table_new(NULL, NULL);
	r = rdma_state_decode(data, len, lim, &ops, &w);
	finals = g_hash_table_size(w.finals);
	for (size_t i = 0; i < G_N_ELEMENTS(sets); i++)
		g_hash_table_destroy(*sets[i]);
	if (r)
		return r;
	if (finals != w.ended)
		return VRDMA_EINVAL;
	if (!fits(w.need.pds, limit->pds, used->pds) || !fits(w.need.mrs, limit->mrs, used->mrs) ||
	    !fits(w.need.cqs, limit->cqs, used->cqs) || !fits(w.need.qps, limit->qps, used->qps) ||
	    !fits(w.need.wrs, limit->wrs, used->wrs) ||
	    !fits(w.need.pinned_bytes, limit->pinned_bytes, used->pinned_bytes))
		return VRDMA_ENOSPC;
	*ret_generation = w.generation;
	return VRDMA_OK;
}

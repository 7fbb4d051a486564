/* SPDX-License-Identifier: MIT */
/*
 * The paravirtual RDMA device (docs/virtio-rdma.md), private to vhost/.
 *
 * rdma-check.c    every guest byte: control requests and WQEs, decoded and
 *                 checked once, with no verbs and no guest memory (unit-tested)
 * rdma-table.c    handles: per connection, generation-tagged, never pointers
 * rdma-ctrl.c     the control virtqueue: commands on the host function
 * rdma-ring.c     rings in guest memory, the device's positions, WQE shadows
 * rdma-post.c     doorbells, taking WQEs and posting them (the work budget)
 * rdma-comp.c     host completions into the guest's CQs
 * rdma-event.c    device events, and the failures that raise them
 * rdma-quiesce.c  the poll timer, dirty logging, the stop for migration
 * rdma-cm.c       connection management (rdma_cm)
 * rdma-peer.c     peers behind other back ends, across a migration: their side
 * rdma-peer-ask.c ...and the moving guest's side
 * rdma.c          the device type: the tenant's function, quotas, instances
 */
#ifndef VRDMA_RDMA_INTERNAL_H
#define VRDMA_RDMA_INTERNAL_H

#include <glib.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "rdma-wire.h"
#include "vu.h"

/* ---- limits the device advertises (clamped further by the host) ---- */

#define RDMA_MAX_MR_SIZE (4ull << 30)
#define RDMA_MAX_SGE 32u
#define RDMA_MAX_INLINE 256u
#define RDMA_MAX_LOG2_SLOTS 14u /* 16384 slots: 16383 WRs or CQEs */
#define RDMA_MIN_SLOT_LOG2 6u
#define RDMA_MAX_SLOT_LOG2 12u
#define RDMA_MAX_MSG (1u << 31)
/* A control request: REG_MR of RDMA_MAX_MR_SIZE in 4 KiB pages, plus slack. */
#define RDMA_MAX_REQUEST ((RDMA_MAX_MR_SIZE >> 12) * 8 + 4096)

/* ---- decoded, checked requests (rdma-check.c) ---- */

struct rdma_limits {
	uint64_t max_mr_size;
	uint32_t max_qp_wr;
	uint32_t max_cqe;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline;
	uint32_t gid_tbl_len;
	uint8_t max_rd_atom;
	bool atomics;
};

/* A request's fixed part and, where it has one, its page list. */
struct rdma_request {
	uint16_t opcode;
	const uint8_t *payload; /* after the header */
	size_t len;
	const uint8_t *pages; /* REG_MR, CREATE_CQ, CREATE_QP: le64 each, unaligned */
	uint64_t npages;
};

/* The page list as an array (g_free it), from page first, n of them. */
uint64_t *rdma_request_pages(const struct rdma_request *rq, uint64_t first, uint64_t n);

int rdma_check_header(const uint8_t *buf, size_t len, struct rdma_request *ret);
/* Each returns 0 or a positive vrdma_status. */
/* These three also set rq->pages and rq->npages. */
int rdma_check_reg_mr(struct rdma_request *rq, const struct rdma_limits *lim,
		      struct vrdma_reg_mr_req *ret);
int rdma_check_create_cq(struct rdma_request *rq, const struct rdma_limits *lim,
			 struct vrdma_create_cq_req *ret);
int rdma_check_create_qp(struct rdma_request *rq, const struct rdma_limits *lim,
			 struct vrdma_create_qp_req *ret);
int rdma_check_modify_qp(const struct rdma_request *rq, const struct rdma_limits *lim,
			 struct vrdma_modify_qp_req *ret);
int rdma_check_handle(const struct rdma_request *rq, uint32_t *ret);
int rdma_check_gid(const struct rdma_request *rq, const struct rdma_limits *lim,
		   uint16_t *ret_index);
int rdma_check_port(const struct rdma_request *rq);
int rdma_check_cm_connect(const struct rdma_request *rq, const struct rdma_limits *lim,
			  struct vrdma_cm_connect_req *ret);
int rdma_check_cm_listen(const struct rdma_request *rq, struct vrdma_cm_listen_req *ret);
int rdma_check_cm_accept(const struct rdma_request *rq, const struct rdma_limits *lim,
			 struct vrdma_cm_accept_req *ret);
int rdma_check_cm_reject(const struct rdma_request *rq, struct vrdma_cm_reject_req *ret);
/* A request with no payload at all. */
int rdma_check_empty(const struct rdma_request *rq);
/* Bytes of a ring of 1 << log2_slots slots of 1 << slot_log2 bytes. */
uint64_t rdma_ring_bytes(uint32_t log2_slots, uint32_t slot_log2);

/* A send WQE as the device posts it. */
struct rdma_send_wqe {
	uint64_t wr_id;
	uint32_t opcode; /* vrdma_wr_opcode */
	uint32_t flags;  /* vrdma_send_flags */
	uint32_t imm;    /* as found (network order) */
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add;
	uint64_t swap;
	uint32_t length;
	uint32_t num_sge;
	const struct vrdma_sge *sge; /* into the caller's copy of the slot */
	const uint8_t *inline_data;  /* same */
};

struct rdma_recv_wqe {
	uint64_t wr_id;
	uint32_t num_sge;
	const struct vrdma_sge *sge;
};

struct rdma_wq_caps {
	uint32_t slot_size;
	uint32_t max_sge;
	uint32_t max_inline;
	bool atomics;
};

/* slot: the caller's private copy of one slot.  0 or an IB_WC_* status. */
int rdma_parse_send_wqe(const uint8_t *slot, const struct rdma_wq_caps *caps,
			struct rdma_send_wqe *ret);
int rdma_parse_recv_wqe(const uint8_t *slot, const struct rdma_wq_caps *caps,
			struct rdma_recv_wqe *ret);

/* IB_WC_* statuses the device itself produces. */
enum {
	RDMA_WC_SUCCESS = 0,
	RDMA_WC_LOC_LEN_ERR = 1,
	RDMA_WC_LOC_QP_OP_ERR = 2,
	RDMA_WC_LOC_PROT_ERR = 4,
	RDMA_WC_WR_FLUSH_ERR = 5,
};

/* ---- handles (rdma-table.c) ---- */

#define RDMA_HANDLE_INDEX_BITS 20
#define RDMA_TABLE_MAX ((1u << RDMA_HANDLE_INDEX_BITS) - 1)

struct rdma_table {
	void **obj;
	uint16_t *gen;
	uint32_t cap;
	uint32_t count;
	uint32_t hint; /* where the next free slot is looked for */
};

/* The new object's handle, or 0 when the table holds limit objects. */
uint32_t rdma_table_add(struct rdma_table *t, void *obj, uint32_t limit);
/* The object under a handle given elsewhere (a migrated guest's):
 * -EINVAL for no handle at all, -EEXIST when its slot is taken. */
int rdma_table_add_at(struct rdma_table *t, void *obj, uint32_t handle);
void *rdma_table_get(const struct rdma_table *t, uint32_t handle);
void rdma_table_del(struct rdma_table *t, uint32_t handle);
/* Any object, for teardown; NULL when empty. */
void *rdma_table_any(const struct rdma_table *t);
void rdma_table_free(struct rdma_table *t);

/* ---- objects ---- */

struct rdma_quota {
	uint32_t pds, mrs, cqs, qps;
	uint64_t pinned_bytes;
	uint64_t wrs; /* work requests the QPs' rings can hold */
	uint64_t maps; /* the daemon's mappings of guest pages (MRs, rings) */
};

/* GIDs a tenant may send from (--rdma-gid), at most this many. */
#define RDMA_MAX_TENANT_GIDS 16u

/* The tenant's function, shared by every connection of this daemon. */
struct rdma_shared {
	struct ibv_context *ctx;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	struct rdma_limits lim;
	struct rdma_quota limit; /* per tenant */
	struct rdma_quota used;
	uint32_t generation;
	GList *devs; /* every connection's device, for port and device events */
	uint64_t poll_ns; /* after a send doorbell, poll its CQ this long */
	/* The guest's GID table: entry i is allowed_gid[i] wherever it sits
	 * in the function's table; none given, the function's first RoCE v2
	 * IPv4 GID is the only entry.  Other GIDs (VLANs, IPv6, other
	 * addresses of the netdev) are not the guest's to send from. */
	uint8_t allowed_gid[RDMA_MAX_TENANT_GIDS][16];
	unsigned int n_allowed_gids;
	bool prefault;    /* guest RAM mapped with its page tables filled */
	struct rdma_peer_srv *peer; /* the peer protocol (rdma-peer.c); NULL: off */
	int watch_fd;               /* epoll: the async events and the peer protocol */
	/* Work the tenant's function did for its guests, for the metrics: what
	 * an operator divides CPU time by to see the back end's cost per WQE. */
	uint64_t sends_posted, recvs_posted, completions;
};

struct rdma_pd {
	uint32_t handle;
	struct ibv_pd *pd;
	unsigned int users; /* MRs and QPs */
};

struct rdma_mr {
	uint32_t handle;
	/* The keys the guest knows: the host's, unless the MR moved here from
	 * another back end (migration), where the host gave others. */
	uint32_t lkey, rkey;
	struct rdma_pd *pd;
	struct ibv_mr *mr;
	struct vu_pages *pages;
	uint64_t iova;
	uint64_t length;
	uint64_t first_offset; /* of iova in the first page */
	uint32_t access;
};

/* A ring in guest memory, rxe's layout; positions are the device's own. */
struct rdma_ring {
	struct vu_pages *pages;
	uint32_t mask;
	unsigned int slot_log2;
};

struct rdma_cq {
	struct rdma_dev *dev; /* its connection, for host events */
	uint32_t handle;
	struct ibv_cq *cq;
	struct rdma_ring ring;
	uint32_t prod;
	uint32_t capacity;
	unsigned int users; /* QPs */
	uint16_t arm;       /* 0, VRDMA_DB_CQ_ARM or VRDMA_DB_CQ_ARM_SOLICITED */
	bool event_pending;
	bool dead;          /* overrun */
	/* How the guest made it, for a migration (rdma-migrate.c). */
	uint32_t log2_slots, npages;
	uint64_t *ring_gpas;
};

/* What the device remembers of a WQE it posted: the guest may rewrite
 * the slot at any time, so completions never read it again. */
struct rdma_shadow {
	uint64_t wr_id;
	uint8_t opcode;
	bool report; /* the guest asked for a completion */
	uint8_t num_sge;
	struct vrdma_sge sge[]; /* sized by the queue's max_sge */
};

struct rdma_wq {
	struct rdma_ring ring;
	uint32_t next;     /* next slot to take */
	uint32_t tail;     /* first slot not yet retired */
	uint32_t inflight; /* posted to the host, not completed */
	uint32_t max_sge;
	size_t shadow_size;
	uint8_t *shadow;   /* (mask + 1) * shadow_size */
};

struct rdma_cm_conn;

/*
 * A connection across a move (rdma-peer.c).  On the moving side: the
 * peer's back end holds the peer QP for this token, the peer being at
 * (gid, qpn) and this QP at (from_gid, from_qpn) on the source.  On the
 * peer's side: the QP is held for the token, by the QP at (from_gid,
 * from_qpn), until deadline.
 */
struct rdma_peer_link {
	uint8_t token[16];
	uint8_t gid[16];
	uint32_t qpn;
	uint8_t from_gid[16];
	uint32_t from_qpn;
	uint64_t deadline;
};

/*
 * A QP in RTR or RTS is connected: it names its peer, moves connected, and
 * an rdma_cm connection on it goes on after a move.
 */
static inline bool rdma_qp_state_connected(uint32_t qp_state)
{
	return qp_state == VRDMA_QPS_RTR || qp_state == VRDMA_QPS_RTS;
}

struct rdma_qp {
	struct rdma_dev *dev; /* its connection, for host events */
	struct rdma_cm_conn *conn; /* the CM connection it is in, if any */
	uint32_t handle;
	uint32_t qpn;      /* the number the guest knows (see rdma_mr's keys) */
	uint32_t host_qpn; /* the host QP's own */
	struct ibv_qp *qp;
	struct rdma_pd *pd;
	struct rdma_cq *scq;
	struct rdma_cq *rcq;
	struct rdma_wq sq;
	struct rdma_wq rq;
	uint32_t max_inline;
	uint32_t state; /* vrdma_qp_state, as last set */
	bool sig_all;
	/* How the guest made it, for a migration: CREATE_QP, SQ and RQ pages. */
	struct vrdma_create_qp_req create;
	uint64_t *ring_gpas;
	unsigned int unsignaled_run;
	bool rings_gone;  /* guest memory under a ring went away */
	bool bad_pending; /* a bad WQE at sq.next waits for the rest to finish */
	bool peer_local;  /* connected to another QP of this guest (they move together) */
	bool sq_more;     /* the work budget ran out with sends in the ring */
	uint32_t bad_status;
	/* Tags its host wr_ids; new at creation and at every reset. */
	uint32_t incarnation;
	uint64_t wrs; /* charged to the quota */
	struct rdma_peer_link *held;   /* its peer is moving: no sends */
	struct rdma_peer_link *moving; /* this QP is moving, its peer held */
	GHashTable *remote_rkeys;      /* a moved peer's rkeys: guest's -> host's */
};

struct rdma_event_node {
	struct vrdma_event ev;
};

#define RDMA_HOT_CQS 8u

/* One guest's device: a vhost-user connection. */
struct rdma_dev {
	struct rdma_shared *sh;
	struct vu_dev *vu;
	struct vu_vq *event_vq; /* known once it was kicked */
	struct rdma_table pds, mrs, cqs, qps;
	GHashTable *qp_by_qpn; /* host QP number -> rdma_qp */
	GHashTable *mr_by_lkey; /* the guest's lkey -> rdma_mr */
	GHashTable *mr_by_rkey; /* the guest's rkey (not 0) -> rdma_mr */
	struct ibv_comp_channel *chan;
	int poll_timer; /* timerfd: receive rings and logging */
	unsigned int ticks;
	GQueue events; /* vrdma_event waiting for event buffers */
	unsigned int dropped_events;
	bool quiesced; /* stopped for migration: nothing touches guest memory */
	bool draining; /* stopping: no new work is taken, completions go on */
	bool restored; /* its objects came from a migration source */
	GBytes *incoming; /* a checked state to make when the queues start */
	uint32_t generation; /* what the guest sees (a migrated guest: its source's) */
	uint32_t work_left;    /* in this call of the event loop (rdma_work_refill) */
	uint32_t incarnations; /* of QPs, handed out */
	unsigned int kicked; /* queues kicked at least once, a bit each */
	bool session_lost;   /* the driver had objects this device never had */
	/* --rdma-poll-us: CQs of the QPs rung in this kick, polled next. */
	struct rdma_cq *hot[RDMA_HOT_CQS];
	unsigned int nhot;
	/* Connection management (rdma-cm.c); no channel: no VRDMA_F_CM. */
	struct rdma_event_channel *cm_chan;
	struct rdma_table cm_conns, cm_listens;
	GHashTable *cm_listen_ids; /* the listens' rdma_cm_ids */
	GQueue cm_events;          /* vrdma_cm_event for CM_GET_EVENT */
};

/* Connections and listens per guest device: requests beyond are refused. */
#define RDMA_CM_MAX_CONNS 256u
#define RDMA_CM_MAX_LISTENS 32u

#define RDMA_MAX_PENDING_EVENTS 1024u

/* rdma.c */
/* vu_pages_map() within the tenant's mapping quota (-ENOSPC past it). */
int rdma_pages_map(struct rdma_dev *d, const uint64_t *gpas, uint64_t npages,
		   unsigned int page_shift, bool guarded, struct vu_pages **ret);
/* Unmaps *pages (NULL: nothing) and gives its mappings back. */
void rdma_pages_unmap(struct rdma_dev *d, struct vu_pages **pages);
/* The function's GID table index of the guest's GID index, with the
 * entry; -ENOENT when the guest's table has no such entry now. */
int rdma_gid_to_host(const struct rdma_shared *sh, uint32_t guest_index,
		     struct ibv_gid_entry *ret_entry);
/* The guest's index of a function GID index; -ENOENT if not the guest's. */
int rdma_gid_from_host(const struct rdma_shared *sh, uint32_t host_index);
/* An IPv4-mapped GID (::ffff:a.b.c.d). */
bool rdma_gid_is_ipv4(const uint8_t gid[16]);

/* rdma-ctrl.c */
void rdma_ctrl_kick(struct rdma_dev *d, struct vu_vq *vq);

/* What a migrated guest already knows of an object it had on the source:
 * the object is made again under these, not under new ones. */
struct rdma_ids {
	uint32_t handle;
	uint32_t lkey, rkey; /* an MR's */
	uint32_t qpn;        /* a QP's */
};

/* The commands' objects, made for a guest command (ids NULL) or again for
 * a migrated guest; requests already checked (rdma-check.c).  0 or a
 * vrdma_status. */
int rdma_pd_create(struct rdma_dev *d, const struct rdma_ids *ids, uint32_t *ret_handle);
int rdma_mr_create(struct rdma_dev *d, struct rdma_request *rq, const struct vrdma_reg_mr_req *req,
		   const struct rdma_ids *ids, struct vrdma_reg_mr_resp *resp);
int rdma_cq_create(struct rdma_dev *d, struct rdma_request *rq, const struct vrdma_create_cq_req *req,
		   const struct rdma_ids *ids, struct rdma_cq **ret_cq);
int rdma_qp_create(struct rdma_dev *d, struct rdma_request *rq, const struct vrdma_create_qp_req *req,
		   const struct rdma_ids *ids, struct rdma_qp **ret_qp);
/* A MODIFY_QP already checked; 0 or a vrdma_status. */
int rdma_qp_apply(struct rdma_dev *d, struct rdma_qp *qp, const struct vrdma_modify_qp_req *m);
void rdma_destroy_all(struct rdma_dev *d);
/* The QP's attributes in the guest's terms (its GID index, its peer's QP
 * number when the peer is another QP of this guest); 0 or a vrdma_status. */
int rdma_qp_query(struct rdma_dev *d, struct rdma_qp *qp, struct vrdma_qp_attr *a);
/* The QP is connected to another QP of this instance (they move together). */
bool rdma_qp_peer_is_local(const struct rdma_dev *d, const struct rdma_qp *qp);
/* Deregisters and unmaps; the handle stays until the guest frees it. */
void rdma_mr_release(struct rdma_dev *d, struct rdma_mr *mr);

/* Moves a QP as the guest or the connection manager asks, and keeps the
 * rings in step; 0 or the host's errno. */
int rdma_qp_modify(struct rdma_dev *d, struct rdma_qp *qp, struct ibv_qp_attr *attr, int mask);

/* rdma-migrate.c: the device's objects across a migration (vu_device_ops). */
int rdma_save_state(void *opaque, uint8_t **ret_data, size_t *ret_len);
int rdma_load_state(void *opaque, const uint8_t *data, size_t len);
/* Makes the objects of the state load_state took; 0, or -errno with
 * nothing made. */
int rdma_state_apply(struct rdma_dev *d);

/* rdma-cm.c */
int rdma_cm_init(struct rdma_dev *d);
void rdma_cm_ready(struct vu_dev *vu, int fd, void *data);
int rdma_cm_cmd_connect(struct rdma_dev *d, struct rdma_request *rq, struct vrdma_handle *resp);
int rdma_cm_cmd_listen(struct rdma_dev *d, struct rdma_request *rq, struct vrdma_handle *resp);
int rdma_cm_cmd_accept(struct rdma_dev *d, struct rdma_request *rq);
int rdma_cm_cmd_reject(struct rdma_dev *d, struct rdma_request *rq);
int rdma_cm_cmd_disconnect(struct rdma_dev *d, struct rdma_request *rq);
int rdma_cm_cmd_destroy_listen(struct rdma_dev *d, struct rdma_request *rq);
int rdma_cm_cmd_get_event(struct rdma_dev *d, struct rdma_request *rq,
			  struct vrdma_cm_event *resp);
/* The QP is being destroyed: its connection goes on without it. */
void rdma_cm_qp_gone(struct rdma_dev *d, struct rdma_qp *qp);
void rdma_cm_destroy_all(struct rdma_dev *d);
void rdma_cm_fini(struct rdma_dev *d);

/* rdma-cm-move.c: connections across a migration */
struct rdma_state_writer;
struct rdma_state_cm_listen;
struct rdma_state_cm_conn;
struct rdma_state_cm_event;
/* The source, stopped: listens, connections and CM events into the state. */
void rdma_cm_save(struct rdma_dev *d, struct rdma_state_writer *w);
/* The destination, each record once its QPs exist; a vrdma_status. */
int rdma_cm_restore_listen(struct rdma_dev *d, const struct rdma_state_cm_listen *rec);
int rdma_cm_restore_conn(struct rdma_dev *d, const struct rdma_state_cm_conn *rec);
int rdma_cm_restore_event(struct rdma_dev *d, const struct rdma_state_cm_event *rec);
/* Peer side: the QP is connected to the moved QP now; its connection goes
 * on detached from the host's rdma_cm. */
void rdma_cm_peer_retargeted(struct rdma_qp *qp);
/* Peer side: the other end of the QP's detached connection ended it
 * (DISCONNECT); 0, or ENOENT when it is in none. */
uint32_t rdma_cm_peer_closed(struct rdma_qp *qp);
/* The QP cannot go on (a hold nobody claimed, a failed retarget): its
 * connection is over, CLOSED for its guest. */
void rdma_cm_conn_lost(struct rdma_qp *qp);

/*
 * Host wr_ids: the slot in bits 0-31, RDMA_WRID_RECV for receives (an
 * error completion's opcode is undefined: rxe leaves it 0 on flushed
 * receives, so the queue must come from the wr_id itself), and the QP's
 * incarnation above.  A completion of an earlier incarnation (flushed
 * before a reset, or of a destroyed QP whose number the host gave out
 * again) names slots of rings that have restarted since: it is dropped.
 */
#define RDMA_WRID_RECV (1ull << 32)
#define RDMA_WRID_INCARNATION_SHIFT 33
#define RDMA_WRID_SLOT_MASK 0xffffffffull

/* rdma-ring.c */
int rdma_ring_init(struct rdma_dev *d, struct rdma_ring *ring, const uint64_t *pages,
		   uint64_t npages, uint32_t log2_slots, unsigned int slot_log2);
void rdma_ring_fini(struct rdma_dev *d, struct rdma_ring *ring);
int rdma_wq_init(struct rdma_wq *wq, uint32_t max_sge);
void rdma_wq_fini(struct rdma_wq *wq);
/* Slot i of the ring (masked). */
uint8_t *rdma_ring_slot(const struct rdma_ring *r, uint32_t i);
/* The driver's index at off (acquire), masked; 0 for a released ring. */
uint32_t rdma_ring_load(const struct rdma_ring *r, size_t off);
/* The device's index at off (release), logged; nothing for a released ring. */
void rdma_ring_store(struct rdma_dev *d, const struct rdma_ring *r, size_t off, uint32_t v);
struct rdma_shadow *rdma_shadow_at(const struct rdma_wq *wq, uint32_t slot);
uint64_t rdma_host_wr_id(const struct rdma_qp *qp, uint32_t slot, uint64_t queue_bit);
/* Room for one more in flight: the host queue is exactly as deep. */
bool rdma_wq_has_room(const struct rdma_wq *wq);
/* Neither stopped (or stopping), nor in RESET, nor with its rings gone. */
bool rdma_qp_takes_work(const struct rdma_dev *d, const struct rdma_qp *qp);
/* The QP went back to RESET: both sides restart at slot 0, and
 * completions of what was posted before are dropped. */
void rdma_qp_rings_reset(struct rdma_dev *d, struct rdma_qp *qp);
/* A fresh tag for the QP's host wr_ids (a new QP, a reset). */
void rdma_qp_new_incarnation(struct rdma_dev *d, struct rdma_qp *qp);
/* Every entry from the event loop: a new budget of work for this call. */
void rdma_work_refill(struct rdma_dev *d);
/* rdma-post.c */
void rdma_doorbell_kick(struct rdma_dev *d, struct vu_vq *vq);
void rdma_rq_fill(struct rdma_dev *d, struct rdma_qp *qp);
/* Takes and posts new send WQEs (from RTS on). */
void rdma_sq_take(struct rdma_dev *d, struct rdma_qp *qp);
struct rdma_mr *rdma_mr_by_lkey(const struct rdma_dev *d, uint32_t lkey);
/* The rkey a remote access puts on the wire: between two QPs of this
 * guest, the host's rkey of the guest's MR (another once the MR moved); to
 * a peer that moved, its MR's new rkey; any other rkey as it is (the
 * remote device checks it). */
uint32_t rdma_wire_rkey(const struct rdma_dev *d, const struct rdma_qp *qp, uint32_t rkey);

/* rdma-peer.c */
/* Listens on each GID (IPv4 only) at port, TLS with the key file's PSKs. */
int rdma_peer_open(struct rdma_shared *sh, uint16_t port, const char *psk_file,
		   const uint8_t (*gids)[16], unsigned int n_gids);
void rdma_peer_close(struct rdma_shared *sh);
/* An fd to watch for the protocol (-1: off), and its work when readable. */
int rdma_peer_fd(const struct rdma_shared *sh);
void rdma_peer_ready(struct rdma_shared *sh);
/* Source, at the stop: each QP wants() names has its peer's back end hold
 * the peer QP (qp->moving); where it cannot (no back end there: a native
 * peer), the QP goes to ERR (QP_FATAL, STOPPED). */
void rdma_peer_pause_all(struct rdma_dev *d, bool (*wants)(struct rdma_dev *d,
							    struct rdma_qp *qp));
/* Source, resumed after a failed move: every held peer goes on. */
void rdma_peer_resume(struct rdma_dev *d);
/* Destination, the QPs made again and connected: each peer held for the
 * move (qp->moving, from the state) is moved to its QP; a QP whose peer's
 * back end does not answer yes goes to ERR (QP_FATAL, STOPPED). */
void rdma_peer_retarget_all(struct rdma_dev *d);
/* Peer side: a QP held longer than any move takes fails (QP_FATAL,
 * STOPPED). */
void rdma_peer_check_holds(struct rdma_dev *d);
struct rdma_peer_rkey;
/* A moved peer's rkeys from now on: the ones the guest was given, each to
 * the one its MR has now (n of them; 0: none). */
void rdma_peer_set_remote_rkeys(struct rdma_qp *qp, const struct rdma_peer_rkey *rkeys,
				uint32_t n);
/* The host's rkey of an rkey of a moved peer's MR (others as they are). */
uint32_t rdma_peer_rkey(const struct rdma_qp *qp, uint32_t rkey);
void rdma_peer_qp_free(struct rdma_qp *qp);
/* Each QP's detached connection ended: the back end behind its peer is
 * told (DISCONNECT), or this daemon itself when the peer is here. */
void rdma_peer_disconnect(struct rdma_dev *d, struct rdma_qp *const *qps, unsigned int n);

/* rdma-comp.c */
/* Translates the host completions into the guest's ring; returns how many. */
unsigned int rdma_poll_cq(struct rdma_dev *d, struct rdma_cq *cq);
void rdma_comp_ready(struct vu_dev *vu, int fd, void *data);
/* One CQE into the guest's ring, or the CQ dies of the overrun. */
void rdma_cq_push(struct rdma_dev *d, struct rdma_cq *cq, const struct vrdma_cqe *cqe);
/* Completes the refused WQE at sq.next once everything before it has. */
void rdma_finish_bad(struct rdma_dev *d, struct rdma_qp *qp);

/* rdma-event.c */
void rdma_event_kick(struct rdma_dev *d, struct vu_vq *vq);
void rdma_post_event(struct rdma_dev *d, uint16_t type, uint32_t handle, uint32_t data);
void rdma_flush_events(struct rdma_dev *d);
/* An armed CQ got a completion: one event, coalesced. */
void rdma_cq_event(struct rdma_dev *d, struct rdma_cq *cq);
/* The CQ is dead (overrun, or its ring is gone): so is every QP on it. */
void rdma_cq_fail(struct rdma_dev *d, struct rdma_cq *cq);
/* Moves the QP to ERR on the host and tells the guest why. */
void rdma_qp_fatal(struct rdma_dev *d, struct rdma_qp *qp, uint32_t reason);

/* rdma-quiesce.c */
void rdma_timer_fired(struct vu_dev *vu, int fd, void *data);
/* Runs the poll timer while the connection has QPs. */
void rdma_poll_timer_update(struct rdma_dev *d);
void rdma_quiesce(struct rdma_dev *d);
void rdma_log_remote_writable(struct rdma_dev *d);

#endif

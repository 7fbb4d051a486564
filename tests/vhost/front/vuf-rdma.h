/* SPDX-License-Identifier: MIT */
/*
 * vuf-rdma: a guest driver and provider for the paravirtual RDMA device,
 * for tests and benchmarks.  It plays the guest kernel (control commands,
 * ring pages, doorbells, events) and the user-space provider (WQEs written
 * into rxe-layout rings, CQ polling) against a real vrdma-vhost over the
 * vu-front harness.  Guest buffers live in memfd guest RAM at made-up
 * guest virtual addresses, optionally on scattered physical pages.
 *
 * Functions return 0, a positive vrdma_status from the device, or -errno
 * for harness and transport failures.
 */
#ifndef VUF_RDMA_H
#define VUF_RDMA_H

#include <stdbool.h>
#include <stdint.h>

#include "rdma-wire.h"
#include "vu-front.h"

struct vgd {
	struct vuf_conn *conn;
	struct vuf_mem *mem;
	struct vuf_vq vq[VRDMA_NUM_VQS];
	struct vrdma_config config;
	uint64_t features;
	uint64_t req_gpa, resp_gpa; /* control scratch */
	uint64_t db_gpa;            /* doorbell record slots */
	uint32_t db_next;
	uint64_t ev_gpa;            /* event buffers */
	uint16_t ev_buf_of_head[256];
	struct vrdma_event ev_pending[4];
	unsigned int ev_npending, ev_next;
	uint64_t next_va;           /* guest virtual addresses handed out */
	struct vuf_log *log;
	uint64_t span;              /* the guest-physical space a log covers */
	bool logs;                  /* logging was turned on: a migration turns it on again */
	int timeout_ms;
	uint16_t stopped_base[VRDMA_NUM_VQS]; /* where vgd_stop() left each queue */
};

struct vgd_opts {
	uint64_t ram_bytes;  /* default 256 MiB */
	/* Guest RAM on huge pages (memfd MFD_HUGETLB, 2 MiB on x86), as RDMA guests
	 * usually run; ram_bytes must be a multiple of 2 MiB. */
	bool huge_pages;
	bool log_all;        /* negotiate LOG_ALL and send a log */
	int timeout_ms;      /* per command, default 5000 */
	/* Start the queues where a stopped device left them (vgd_stop), as
	 * on a migration's destination. */
	bool resume;
	uint16_t base[VRDMA_NUM_VQS];
	/* A second RAM region (its own memfd) of this size at VGD_EXTRA_GPA,
	 * for buffers a test takes away with REM_MEM_REG. */
	uint64_t extra_bytes;
};

#define VGD_EXTRA_GPA (1ull << 40)

int vgd_open(const char *socket_path, const struct vgd_opts *o, struct vgd **ret);
void vgd_close(struct vgd *g);

/* One control command, raw: resp_len bytes of response payload expected. */
int vgd_cmd(struct vgd *g, uint16_t opcode, const void *req, uint32_t req_len, void *resp,
	    uint32_t resp_len);
/* Up to VGD_BATCH_MAX commands with no response payload, queued and
 * kicked at once; ret_status[i] is the device's status of cmds[i]. */
#define VGD_BATCH_MAX 8u
struct vgd_batch_cmd {
	uint16_t opcode;
	const void *req;
	uint32_t req_len;
};
int vgd_cmd_batch(struct vgd *g, const struct vgd_batch_cmd *cmds, unsigned int n,
		  int *ret_status);
/* The same with an arbitrary header (flags/reserved) and used-length out. */
int vgd_cmd_raw(struct vgd *g, const void *req, uint32_t req_len, void *resp, uint32_t resp_len,
		uint32_t *ret_used);

/* ---- guest buffers ---- */

struct vgd_buf {
	uint64_t va;
	uint64_t len;
	uint64_t npages;
	uint64_t *pages; /* gpa of each 4 KiB page */
};

/* scatter: pages in reverse physical order, so no two are adjacent. */
int vgd_buf_alloc(struct vgd *g, uint64_t len, bool scatter, struct vgd_buf *ret);
/* The same in RAM region `region` (1: the extra one). */
int vgd_buf_alloc_in(struct vgd *g, size_t region, uint64_t len, bool scatter,
		     struct vgd_buf *ret);
/* Runs of `run` contiguous bytes in reverse physical order (run: 4 KiB multiple). */
int vgd_buf_alloc_runs(struct vgd *g, uint64_t len, uint64_t run, struct vgd_buf *ret);
/* REM_MEM_REG of the extra region, as a front end unplugging memory. */
int vgd_remove_extra(struct vgd *g);
void vgd_buf_free(struct vgd_buf *b);
int vgd_buf_write(struct vgd *g, const struct vgd_buf *b, uint64_t off, const void *src,
		  uint64_t len);
int vgd_buf_read(struct vgd *g, const struct vgd_buf *b, uint64_t off, void *dst, uint64_t len);

/* ---- objects ---- */

int vgd_create_pd(struct vgd *g, uint32_t *ret_pd);
int vgd_destroy(struct vgd *g, uint16_t opcode, uint32_t handle);

struct vgd_mr {
	uint32_t handle, lkey, rkey;
	uint64_t iova, len;
};
/*
 * Registers [off, off+len) of b with the largest page size the device takes
 * that fits (2 MiB where b is backed by aligned huge runs, else 4 KiB), as a
 * guest kernel driver does with ib_umem_find_best_pgsz().
 */
int vgd_reg_mr(struct vgd *g, uint32_t pd, const struct vgd_buf *b, uint64_t off, uint64_t len,
	       uint32_t access, struct vgd_mr *ret);
/* The same with a given page shift (12 or 21); -EINVAL if it does not fit. */
int vgd_reg_mr_shift(struct vgd *g, uint32_t pd, const struct vgd_buf *b, uint64_t off,
		     uint64_t len, uint32_t access, unsigned int page_shift, struct vgd_mr *ret);

struct vgd_ring {
	uint64_t gpa;
	uint8_t *host;
	uint64_t npages;
	uint32_t mask;
	unsigned int slot_log2;
	uint32_t prod, cons; /* the driver's own positions */
};

struct vgd_cq {
	uint32_t handle;
	uint32_t capacity;
	struct vgd_ring ring;
};
int vgd_create_cq(struct vgd *g, uint32_t log2_slots, struct vgd_cq *ret);
/* The same with the ring in RAM region `region` (1: the extra one). */
int vgd_create_cq_in(struct vgd *g, size_t region, uint32_t log2_slots, struct vgd_cq *ret);

struct vgd_qp_caps {
	uint32_t sq_log2, rq_log2;
	uint32_t max_send_sge, max_recv_sge, max_inline;
	bool sig_all;
	/* Hostile tests: the device's SQ ring starts on this guest page (a
	 * CQ's first page, say) instead of the harness's own first page. */
	uint64_t sq_first_page;
	size_t ring_region; /* the rings in this RAM region (1: the extra one) */
};
struct vgd_qp {
	uint32_t handle, qpn;
	struct vgd_qp_caps caps;
	struct vgd_ring sq, rq;
};
int vgd_create_qp(struct vgd *g, uint32_t pd, const struct vgd_cq *scq, const struct vgd_cq *rcq,
		  const struct vgd_qp_caps *caps, struct vgd_qp *ret);
/* A move to RESET restarts the driver's ring positions too. */
int vgd_modify_qp(struct vgd *g, struct vgd_qp *qp, uint32_t mask,
		  const struct vrdma_qp_attr *a);
/* RESET -> INIT -> RTR -> RTS towards a remote QP at gid (RoCE v2). */
int vgd_connect_qp(struct vgd *g, struct vgd_qp *qp, uint32_t remote_qpn,
		   const uint8_t remote_gid[16], uint8_t sgid_index, uint8_t rnr_retry);
int vgd_query_gid(struct vgd *g, uint16_t index, struct vrdma_gid_resp *ret);

/* ---- data path ---- */

struct vgd_send {
	uint64_t wr_id;
	uint32_t opcode; /* VRDMA_WR_* */
	uint32_t flags;  /* VRDMA_SEND_* */
	uint32_t imm;    /* network order */
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add, swap;
	uint32_t num_sge;
	struct vrdma_sge sge[4];
	const void *inline_data; /* with VRDMA_SEND_INLINE */
	uint32_t inline_len;
};
/* Writes the WQEs, publishes them, rings one SQ doorbell (ring_db). */
int vgd_post_send(struct vgd *g, struct vgd_qp *qp, const struct vgd_send *wr, uint32_t n,
		  bool ring_db);
/* Raw slot bytes, for hostile WQEs; a doorbell with ring_db. */
int vgd_post_send_raw(struct vgd *g, struct vgd_qp *qp, const void *slot, uint32_t len,
		      bool ring_db);

struct vgd_recv {
	uint64_t wr_id;
	uint32_t num_sge;
	struct vrdma_sge sge[4];
};
/* No doorbell unless ring_db: librxe posts receives without one. */
int vgd_post_recv(struct vgd *g, struct vgd_qp *qp, const struct vgd_recv *wr, uint32_t n,
		  bool ring_db);
int vgd_doorbell(struct vgd *g, uint16_t type, uint32_t handle);

int vgd_poll_cq(struct vgd *g, struct vgd_cq *cq, struct vrdma_cqe *out, int max);
/* Polls until n completions arrived; -ETIMEDOUT with *ret_got set. */
int vgd_wait_cq(struct vgd *g, struct vgd_cq *cq, struct vrdma_cqe *out, int n, int timeout_ms,
		int *ret_got);
int vgd_arm_cq(struct vgd *g, struct vgd_cq *cq, bool solicited);
/* Next event record; -ETIMEDOUT. */
int vgd_wait_event(struct vgd *g, int timeout_ms, struct vrdma_event *ret);

/* Stops every queue (GET_VRING_BASE), as QEMU does before switch-over;
 * ret_base (may be NULL) gets where each stopped. */
int vgd_stop(struct vgd *g, uint16_t ret_base[VRDMA_NUM_VQS]);
/* Logging from now on (LOG_ALL and a log), as QEMU turns it on when a
 * migration starts; nothing if the guest logs already. */
int vgd_log_start(struct vgd *g);
/*
 * Live-migrates the guest (opened with log_all) to the back end at
 * socket_path: stop, the device's state saved and loaded there, every
 * queue resumed where it stopped, with the same guest memory.  *ret_state_len
 * (may be NULL) gets the state's size.  On failure the guest stays on the
 * source, stopped.
 */
int vgd_migrate(struct vgd *g, const char *socket_path, size_t *ret_state_len);
/* The same, with between(arg) called once the source has stopped and
 * saved its state, before the destination loads it (what happens to the
 * guest's peers in the middle of a move). */
int vgd_migrate_between(struct vgd *g, const char *socket_path, size_t *ret_state_len,
			void (*between)(void *arg), void *arg);
/* Starts every queue again where vgd_stop() left it (a migration failed). */
int vgd_resume(struct vgd *g);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * What the two back ends share with the front (xport.c).  The front checks
 * every caller argument once; a back end may trust what reaches it.
 */
#ifndef VRDMA_XPORT_INTERNAL_H
#define VRDMA_XPORT_INTERNAL_H

#include <glib.h>
#include <limits.h>

#include "util.h"
#include "xport.h"

struct xport_conn_ops {
	int (*mr_reg)(struct xport_conn *conn, struct xport_mr *mr);
	void (*mr_dereg)(struct xport_mr *mr);
	int (*post)(struct xport_conn *conn, const struct xport_wr *wr,
		    uint32_t total_len);
	int (*send_copy)(struct xport_conn *conn, unsigned channel,
			 const void *buf, size_t len, uint64_t cookie,
			 unsigned flags);
	int (*flush)(struct xport_conn *conn);
	int (*poll)(struct xport_conn *conn, struct xport_completion *comps,
		    unsigned max);
	int (*wait)(struct xport_conn *conn, int timeout_ms);
	void (*close)(struct xport_conn *conn);
};

struct xport_conn {
	const struct xport_conn_ops *ops;
	struct xport_opts opts; /* validated, defaults filled in */
	enum xport_kind kind;
	unsigned channels;
	uint32_t peer_max_msg;
	int fd;    /* what xport_conn_fd() returns */
	int error; /* sticky: first fatal error */
	/* Registered regions by id (id = index + 1); slots of freed ones are NULL. */
	GPtrArray *regions;
};

struct xport_mr {
	struct xport_conn *conn;
	void *addr;
	size_t len;
	unsigned access;
	uint32_t id;
	uint32_t key;  /* rdma: rkey; tcp: random secret */
	uint64_t base; /* what the peer addresses offset 0 as */
	void *priv;    /* back end's (struct ibv_mr *) */
	int file_fd;   /* xport_mr_reg_file(): our duplicate, else -1 */
	uint64_t file_offset;
};

struct xport_listener_ops {
	int (*accept)(struct xport_listener *listener, int timeout_ms,
		      struct xport_conn **ret_conn);
	void (*close)(struct xport_listener *listener);
};

struct xport_listener {
	const struct xport_listener_ops *ops;
	struct xport_opts opts;
	int fd;
	int port;
};

/* Front-end helpers for the back ends. */
void xport_conn_init(struct xport_conn *conn, const struct xport_conn_ops *ops,
		     const struct xport_opts *opts, enum xport_kind kind);
void xport_conn_fini(struct xport_conn *conn);
/* Records the first fatal error; returns err for tail calls. */
int xport_conn_fail(struct xport_conn *conn, int err);
/*
 * Resolves a peer's (region, key, offset, len) to local memory, refusing
 * anything not registered with the needed access: -ENOENT (no such region),
 * -EKEYREJECTED (wrong key), -EACCES (access not granted), -ERANGE (outside).
 * ret_mr (may be NULL) gets the region itself.
 */
int xport_conn_resolve(struct xport_conn *conn, uint32_t region, uint32_t key,
		       uint64_t offset, uint64_t len, unsigned access,
		       void **ret_addr, struct xport_mr **ret_mr);
uint32_t xport_random_u32(void);
uint64_t xport_random_u64(void);

/* Setup deadlines in monotonic ms; -1 means none (timeout_ms < 0). */
static inline int64_t xport_now_ms(void)
{
	return monotonic_ms();
}

static inline int64_t xport_deadline_after(int timeout_ms)
{
	return timeout_ms < 0 ? -1 : xport_now_ms() + timeout_ms;
}

/* A poll(2) timeout until the deadline: -1 for none, 0 once passed. */
static inline int xport_ms_until(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - xport_now_ms();
	return left <= 0 ? 0 : (int)MIN(left, INT_MAX);
}

/* Back-end entry points. */
int xport_rdma_listen(const struct xport_opts *opts, const char *host,
		      const char *port, struct xport_listener **ret);
int xport_rdma_connect(const struct xport_opts *opts, const char *host,
		       const char *port, struct xport_conn **ret);
int xport_tcp_listen(const struct xport_opts *opts, const char *host,
		     const char *port, struct xport_listener **ret);
int xport_tcp_connect(const struct xport_opts *opts, const char *host,
		      const char *port, struct xport_conn **ret);

#endif

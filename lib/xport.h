/* SPDX-License-Identifier: MIT */
/*
 * xport: one data-movement API over two back ends.
 *
 *  - rdma: librdmacm connection management, RC queue pairs, one-sided
 *    WRITE / WRITE_WITH_IMM / READ and two-sided SEND/RECV on libibverbs.
 *  - tcp:  io_uring sockets; one-sided operations become framed requests
 *    ("place these bytes at offset X of region N") that the receiving
 *    library validates and carries out.
 *
 * A connection has one or more channels (a QP, or a socket).  Requests on
 * one channel are carried out in order; there is no order across channels.
 *
 * Conventions: functions return 0 (or a count) on success and -errno on
 * failure; they never log.  The library owns no event loop: a caller waits
 * on xport_conn_fd() (or calls xport_wait()) and then drives progress with
 * xport_poll().  None of the objects are thread-safe.
 */
#ifndef VRDMA_XPORT_H
#define VRDMA_XPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define XPORT_MAX_CHANNELS 16
#define XPORT_MAX_SGE 16

enum xport_kind {
	XPORT_KIND_AUTO = 0, /* rdma when a verbs device exists, else tcp */
	XPORT_KIND_RDMA,
	XPORT_KIND_TCP,
};

enum xport_zerocopy {
	/* The default.  tcp: zero-copy send for large payloads if the kernel
	 * can and the peer is another host (locally it is copied anyway). */
	XPORT_ZC_AUTO = 0,
	XPORT_ZC_OFF,
	XPORT_ZC_ON,
};

struct xport_auth;

struct xport_opts {
	enum xport_kind kind;
	unsigned channels;        /* 1..XPORT_MAX_CHANNELS */
	unsigned send_depth;      /* outstanding requests per channel */
	unsigned recv_depth;      /* receive buffers per channel */
	unsigned signal_interval; /* ask for a completion every N requests at least */
	uint32_t max_msg;         /* largest SEND payload this side accepts */
	int timeout_ms;           /* connection setup; <0: wait forever */
	enum xport_zerocopy zerocopy;
	/*
	 * Authentication (NULL: none, anyone who reaches the port is served).
	 * Both sides need credentials; the connection is only made after a
	 * mutually authenticated TLS handshake, every channel bound to it.
	 * Must outlive the listeners and connections made with it.
	 */
	const struct xport_auth *auth;
	/* tcp, with auth: every channel's bytes travel as TLS records. */
	bool encrypt;
	/*
	 * Told once of each connection refused while accepting (listeners), or
	 * of an authentication that failed while connecting (clients), with the
	 * peer's address (len 0 if unknown), why (-errno) and, where there is
	 * more to say than the errno (authentication), a static sentence
	 * (else NULL), so the caller can log it.  NULL: nobody is told.
	 */
	void (*on_refused)(void *opaque, const struct sockaddr *peer, socklen_t len,
			   int err, const char *reason);
	void *refused_opaque;
};

/*
 * Credentials for authentication, as QEMU's tls-creds-x509 and
 * tls-creds-psk take them.  Key files must be neither readable nor writable
 * by group or others (-EPERM).  -ENOENT and the like for a missing file,
 * -EBADMSG for one that does not parse; *ret_file (may be NULL; g_free it)
 * then names the file.
 */
struct xport_auth_cfg {
	bool server;
	/*
	 * QEMU's layout: ca-cert.pem (the CA that signs both sides), ca-crl.pem
	 * (optional), and server-cert.pem + server-key.pem on the server,
	 * client-cert.pem + client-key.pem on the client.
	 */
	const char *x509_dir;
	/* "IDENTITY:HEXKEY" lines, as psktool writes them.  With x509_dir too,
	 * the handshake runs on the certificates and also proves the key. */
	const char *psk_file;
	/*
	 * The name the peer's certificate must carry.  Client: NULL checks the
	 * host it connects to; server: NULL takes any certificate of the CA.
	 */
	const char *hostname;
};

int xport_auth_new(const struct xport_auth_cfg *cfg, struct xport_auth **ret_auth,
		   char **ret_file);
void xport_auth_free(struct xport_auth *auth);

void xport_opts_init(struct xport_opts *opts);
const char *xport_kind_name(enum xport_kind kind);
int xport_kind_parse(const char *name, enum xport_kind *ret_kind);
/* "auto", "off" or "on". */
int xport_zerocopy_parse(const char *name, enum xport_zerocopy *ret_mode);
/* Number of usable verbs devices (0 when none or no RDMA stack). */
int xport_rdma_device_count(void);

struct xport_listener;
struct xport_conn;
struct xport_mr;

/* host may be NULL/"" for any address; port "0" picks a free one. */
int xport_listen(const struct xport_opts *opts, const char *host,
		 const char *port, struct xport_listener **ret_listener);
int xport_listener_port(const struct xport_listener *listener);
int xport_listener_fd(const struct xport_listener *listener);
/* Accepts one whole connection (all of its channels); timeout_ms < 0 waits. */
int xport_accept(struct xport_listener *listener, int timeout_ms,
		 struct xport_conn **ret_conn);
void xport_listener_close(struct xport_listener *listener);

int xport_connect(const struct xport_opts *opts, const char *host,
		  const char *port, struct xport_conn **ret_conn);
void xport_conn_close(struct xport_conn *conn);

enum xport_kind xport_conn_kind(const struct xport_conn *conn);
unsigned xport_conn_channels(const struct xport_conn *conn);
/* Largest SEND the peer accepts. */
uint32_t xport_conn_peer_max_msg(const struct xport_conn *conn);
/* Readable when xport_poll() has something to do. */
int xport_conn_fd(const struct xport_conn *conn);
/* 0 while healthy, else the first fatal error (sticky). */
int xport_conn_error(const struct xport_conn *conn);

/* ---- memory ---- */

enum {
	XPORT_ACCESS_LOCAL = 0,
	XPORT_ACCESS_REMOTE_WRITE = 1u << 0,
	XPORT_ACCESS_REMOTE_READ = 1u << 1,
	/*
	 * The transport only ever reads this memory (WRITE/SEND source), so it
	 * may be mapped read-only; it cannot be the sink of a READ.
	 */
	XPORT_ACCESS_LOCAL_READONLY = 1u << 2,
};

int xport_mr_reg(struct xport_conn *conn, void *addr, size_t len,
		 unsigned access, struct xport_mr **ret_mr);
/*
 * As xport_mr_reg(), for memory that is also the bytes [fd_offset,
 * fd_offset + len) of the file fd, mapped shared at addr (a memfd holding
 * guest RAM).  tcp then lands large incoming WRITEs through the file: a
 * page the file does not have yet is allocated by the write itself, not
 * first faulted in and cleared through the mapping.  fd is duplicated; the
 * caller keeps its own.  rdma checks the range the same way but keeps no
 * duplicate: the device only ever uses the mapping.
 */
int xport_mr_reg_file(struct xport_conn *conn, void *addr, size_t len,
		      unsigned access, int fd, uint64_t fd_offset,
		      struct xport_mr **ret_mr);
void xport_mr_dereg(struct xport_mr *mr);
void *xport_mr_addr(const struct xport_mr *mr);
size_t xport_mr_len(const struct xport_mr *mr);

/*
 * A region the peer may write to or read from is announced by sending its
 * descriptor (fixed size, little endian, no host pointers) in any message;
 * the peer turns it back into an xport_remote with xport_remote_import(),
 * which validates every field.
 */
#define XPORT_REGION_DESC_SIZE 32
int xport_mr_describe(const struct xport_mr *mr,
		      uint8_t ret_desc[XPORT_REGION_DESC_SIZE]);

struct xport_remote {
	uint32_t id;
	uint32_t key;
	uint64_t base; /* address in the peer's region namespace */
	uint64_t len;
	unsigned access;
};
int xport_remote_import(const struct xport_conn *conn, const void *desc,
			size_t desc_len, struct xport_remote *ret_remote);

/* ---- data movement ---- */

enum xport_op {
	XPORT_OP_WRITE = 1,
	XPORT_OP_WRITE_IMM, /* write, then a RECV_IMM completion at the peer */
	XPORT_OP_READ,
	XPORT_OP_SEND,
	XPORT_OP_RECV,     /* completion only */
	XPORT_OP_RECV_IMM, /* completion only */
};

#define XPORT_F_SIGNAL (1u << 0) /* report a completion for this request */
#define XPORT_F_MORE   (1u << 1) /* more follow: defer the doorbell to xport_flush() */

struct xport_sge {
	struct xport_mr *mr;
	uint64_t offset;
	uint32_t len;
};

struct xport_wr {
	enum xport_op op;
	unsigned channel;
	unsigned flags;
	uint64_t cookie;
	const struct xport_sge *sg;
	unsigned nsg;
	const struct xport_remote *remote; /* WRITE, WRITE_IMM, READ */
	uint64_t remote_offset;
	uint32_t imm; /* WRITE_IMM */
};

/*
 * Queues one request.  -EAGAIN: the channel's send queue is full, poll for
 * completions and retry.  A SEND's payload must fit the peer's max_msg.
 * Local memory must stay untouched until the request's completion (or the
 * completion of a later signalled request on the same channel).
 */
int xport_post(struct xport_conn *conn, const struct xport_wr *wr);
/* Copies buf into a transport-owned buffer and sends it. */
int xport_send_copy(struct xport_conn *conn, unsigned channel, const void *buf,
		    size_t len, uint64_t cookie, unsigned flags);
/* Rings the doorbells for requests posted with XPORT_F_MORE. */
int xport_flush(struct xport_conn *conn);

struct xport_completion {
	enum xport_op op;
	unsigned channel;
	int status; /* 0 or -errno */
	uint64_t cookie;
	uint32_t len;
	uint32_t imm;
	const void *data; /* RECV: valid until the next xport_poll() */
};

/*
 * Makes progress and returns up to max completions (0 if none).  A fatal
 * connection error is returned as -errno once all completions that were
 * produced before it have been handed out.
 */
int xport_poll(struct xport_conn *conn, struct xport_completion *ret_comps,
	       unsigned max);
/* Sleeps until xport_poll() may return something; -ETIMEDOUT on timeout. */
int xport_wait(struct xport_conn *conn, int timeout_ms);

/* Ordered shutdown helpers for the glib cleanup attributes. */
static inline void xport_conn_closep(struct xport_conn **c) { if (*c) xport_conn_close(*c); }
static inline void xport_listener_closep(struct xport_listener **l) { if (*l) xport_listener_close(*l); }
static inline void xport_mr_deregp(struct xport_mr **m) { if (*m) xport_mr_dereg(*m); }

#endif

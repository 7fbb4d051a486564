// SPDX-License-Identifier: MIT
/* Front of the transport: argument checks once, then the back end's ops. */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "xport-internal.h"
#include "xport-tls.h"
#include "xport-wire.h"

void xport_opts_init(struct xport_opts *opts)
{
	*opts = (struct xport_opts){
		.kind = XPORT_KIND_AUTO,
		.channels = 1,
		.send_depth = 128,
		.recv_depth = 64,
		.signal_interval = 16,
		.max_msg = 4096,
		.timeout_ms = 10000,
		.zerocopy = XPORT_ZC_AUTO,
	};
}

static int opts_check(const struct xport_opts *opts)
{
	if (opts->channels < 1 || opts->channels > XPORT_MAX_CHANNELS)
		return -EINVAL;
	if (opts->send_depth < 1 || opts->send_depth > XPORT_MAX_DEPTH ||
	    opts->recv_depth < 1 || opts->recv_depth > XPORT_MAX_DEPTH)
		return -EINVAL;
	if (opts->signal_interval < 1 || opts->signal_interval > opts->send_depth)
		return -EINVAL;
	if (opts->max_msg < XPORT_MIN_MSG || opts->max_msg > XPORT_MAX_MSG)
		return -EINVAL;
	if (opts->zerocopy > XPORT_ZC_ON || opts->kind > XPORT_KIND_TCP)
		return -EINVAL;
	return 0;
}

const char *xport_kind_name(enum xport_kind kind)
{
	switch (kind) {
	case XPORT_KIND_AUTO: return "auto";
	case XPORT_KIND_RDMA: return "rdma";
	case XPORT_KIND_TCP: return "tcp";
	}
	return "?";
}

int xport_kind_parse(const char *name, enum xport_kind *ret_kind)
{
	static const enum xport_kind kinds[] = {
		XPORT_KIND_AUTO, XPORT_KIND_RDMA, XPORT_KIND_TCP,
	};

	for (size_t i = 0; name && i < ARRAY_SIZE(kinds); i++) {
		if (strcmp(name, xport_kind_name(kinds[i])) == 0) {
			*ret_kind = kinds[i];
			return 0;
		}
	}
	return -EINVAL;
}

int xport_zerocopy_parse(const char *name, enum xport_zerocopy *ret_mode)
{
	static const char *const names[] = {
		[XPORT_ZC_AUTO] = "auto", [XPORT_ZC_OFF] = "off", [XPORT_ZC_ON] = "on",
	};

	for (size_t i = 0; name && i < ARRAY_SIZE(names); i++) {
		if (strcmp(name, names[i]) == 0) {
			*ret_mode = (enum xport_zerocopy)i;
			return 0;
		}
	}
	return -EINVAL;
}

int xport_rdma_device_count(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (!list)
		return 0;
	ibv_free_device_list(list);
	return n;
}

static enum xport_kind resolve_kind(enum xport_kind kind)
{
	if (kind != XPORT_KIND_AUTO)
		return kind;
	return xport_rdma_device_count() > 0 ? XPORT_KIND_RDMA : XPORT_KIND_TCP;
}

/* Credentials of the right side; encryption only with them, and on tcp. */
static int auth_check(const struct xport_opts *opts, bool server)
{
	if (opts->auth && xport_auth_is_server(opts->auth) != server)
		return -EINVAL;
	if (opts->encrypt && (!opts->auth || opts->kind != XPORT_KIND_TCP))
		return -EINVAL;
	return 0;
}

/* The options a listener (server) or a connection starts from; -EINVAL. */
static int opts_prepare(const struct xport_opts *opts, bool server,
			struct xport_opts *ret_opts)
{
	struct xport_opts o = *opts;
	int r = opts_check(&o);

	if (r < 0)
		return r;
	o.kind = resolve_kind(o.kind);
	r = auth_check(&o, server);
	if (r < 0)
		return r;
	*ret_opts = o;
	return 0;
}

int xport_listen(const struct xport_opts *opts, const char *host,
		 const char *port, struct xport_listener **ret_listener)
{
	struct xport_opts o;
	int r;

	if (!port || !ret_listener)
		return -EINVAL;
	r = opts_prepare(opts, true, &o);
	if (r < 0)
		return r;
	if (o.kind == XPORT_KIND_RDMA)
		return xport_rdma_listen(&o, host, port, ret_listener);
	return xport_tcp_listen(&o, host, port, ret_listener);
}

int xport_listener_port(const struct xport_listener *listener)
{
	return listener->port;
}

int xport_listener_fd(const struct xport_listener *listener)
{
	return listener->fd;
}

int xport_accept(struct xport_listener *listener, int timeout_ms,
		 struct xport_conn **ret_conn)
{
	if (!listener || !ret_conn)
		return -EINVAL;
	return listener->ops->accept(listener, timeout_ms, ret_conn);
}

void xport_listener_close(struct xport_listener *listener)
{
	if (listener)
		listener->ops->close(listener);
}

int xport_connect(const struct xport_opts *opts, const char *host,
		  const char *port, struct xport_conn **ret_conn)
{
	struct xport_opts o;
	int r;

	if (!host || !*host || !port || !ret_conn)
		return -EINVAL;
	r = opts_prepare(opts, false, &o);
	if (r < 0)
		return r;
	if (o.kind == XPORT_KIND_RDMA)
		return xport_rdma_connect(&o, host, port, ret_conn);
	return xport_tcp_connect(&o, host, port, ret_conn);
}

void xport_conn_init(struct xport_conn *conn, const struct xport_conn_ops *ops,
		     const struct xport_opts *opts, enum xport_kind kind)
{
	conn->ops = ops;
	conn->opts = *opts;
	conn->kind = kind;
	conn->channels = opts->channels;
	conn->fd = -1;
	conn->regions = g_ptr_array_new();
}

/* Frees the regions the caller left registered; the back end frees conn. */
void xport_conn_fini(struct xport_conn *conn)
{
	if (!conn->regions)
		return;
	for (guint i = 0; i < conn->regions->len; i++)
		xport_mr_dereg(g_ptr_array_index(conn->regions, i));
	g_ptr_array_free(conn->regions, TRUE);
	conn->regions = NULL;
}

void xport_conn_close(struct xport_conn *conn)
{
	if (conn)
		conn->ops->close(conn);
}

int xport_conn_fail(struct xport_conn *conn, int err)
{
	if (!conn->error)
		conn->error = err < 0 ? err : -EIO;
	return err;
}

enum xport_kind xport_conn_kind(const struct xport_conn *conn) { return conn->kind; }
unsigned xport_conn_channels(const struct xport_conn *conn) { return conn->channels; }
uint32_t xport_conn_peer_max_msg(const struct xport_conn *conn) { return conn->peer_max_msg; }
int xport_conn_fd(const struct xport_conn *conn) { return conn->fd; }
int xport_conn_error(const struct xport_conn *conn) { return conn->error; }

static void fill_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			/* Only EINTR is possible with flags 0 on a booted kernel. */
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
}

uint32_t xport_random_u32(void)
{
	uint32_t v;

	fill_random(&v, sizeof(v));
	return v;
}

uint64_t xport_random_u64(void)
{
	uint64_t v;

	fill_random(&v, sizeof(v));
	return v;
}

int xport_mr_reg_file(struct xport_conn *conn, void *addr, size_t len,
		      unsigned access, int fd, uint64_t fd_offset,
		      struct xport_mr **ret_mr)
{
	_cleanup_(closep) int file_fd = -1;
	struct xport_mr *mr;
	int r;

	if (!conn || !addr || !len || !ret_mr ||
	    (access & ~(XPORT_ACCESS_REMOTE_WRITE | XPORT_ACCESS_REMOTE_READ |
			XPORT_ACCESS_LOCAL_READONLY)))
		return -EINVAL;
	if ((access & XPORT_ACCESS_LOCAL_READONLY) && (access & XPORT_ACCESS_REMOTE_WRITE))
		return -EINVAL;
	if ((uintptr_t)addr + len < (uintptr_t)addr)
		return -EINVAL;
	if (conn->regions->len >= UINT32_MAX - 1)
		return -ENOSPC;
	if (fd >= 0) {
		struct stat st;

		/* The file must hold the whole region, or a write would grow it. */
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 0 ||
		    !range_within(fd_offset, len, (uint64_t)st.st_size))
			return -EINVAL;
		file_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (file_fd < 0)
			return -errno;
	}
	mr = g_new0(struct xport_mr, 1);
	mr->file_fd = steal_fd(&file_fd);
	mr->file_offset = fd_offset;
	mr->conn = conn;
	mr->addr = addr;
	mr->len = len;
	mr->access = access;
	mr->id = conn->regions->len + 1;
	r = conn->ops->mr_reg(conn, mr);
	if (r < 0) {
		closep(&mr->file_fd);
		g_free(mr);
		return r;
	}
	/* Ids are never reused: a stale descriptor cannot reach a new region. */
	g_ptr_array_add(conn->regions, mr);
	*ret_mr = mr;
	return 0;
}

int xport_mr_reg(struct xport_conn *conn, void *addr, size_t len,
		 unsigned access, struct xport_mr **ret_mr)
{
	return xport_mr_reg_file(conn, addr, len, access, -1, 0, ret_mr);
}

void xport_mr_dereg(struct xport_mr *mr)
{
	if (!mr)
		return;
	g_ptr_array_index(mr->conn->regions, mr->id - 1) = NULL;
	mr->conn->ops->mr_dereg(mr);
	closep(&mr->file_fd);
	g_free(mr);
}

void *xport_mr_addr(const struct xport_mr *mr) { return mr->addr; }
size_t xport_mr_len(const struct xport_mr *mr) { return mr->len; }

int xport_mr_describe(const struct xport_mr *mr,
		      uint8_t ret_desc[XPORT_REGION_DESC_SIZE])
{
	struct xport_region_wire w;

	if (!mr || !(mr->access & (XPORT_ACCESS_REMOTE_WRITE | XPORT_ACCESS_REMOTE_READ)))
		return -EINVAL;
	w = (struct xport_region_wire){
		.kind = (uint8_t)mr->conn->kind,
		.access = (uint8_t)(mr->access & (XPORT_ACCESS_REMOTE_WRITE |
						  XPORT_ACCESS_REMOTE_READ)),
		.id = mr->id,
		.key = mr->key,
		.base = mr->base,
		.len = mr->len,
	};
	xport_region_encode(&w, ret_desc);
	return 0;
}

int xport_remote_import(const struct xport_conn *conn, const void *desc,
			size_t desc_len, struct xport_remote *ret_remote)
{
	struct xport_region_wire w;
	int r = xport_region_decode(desc, desc_len, &w);

	if (r < 0)
		return r;
	if (w.kind != conn->kind)
		return -EBADMSG;
	*ret_remote = (struct xport_remote){
		.id = w.id, .key = w.key, .base = w.base, .len = w.len,
		.access = w.access,
	};
	return 0;
}

int xport_conn_resolve(struct xport_conn *conn, uint32_t region, uint32_t key,
		       uint64_t offset, uint64_t len, unsigned access,
		       void **ret_addr, struct xport_mr **ret_mr)
{
	struct xport_mr *mr;

	/* Each refusal has its own errno: the peer's log and tests tell them apart. */
	if (region == 0 || region > conn->regions->len)
		return -ENOENT;
	mr = g_ptr_array_index(conn->regions, region - 1);
	if (!mr)
		return -ENOENT;
	if (mr->key != key)
		return -EKEYREJECTED;
	if ((mr->access & access) != access)
		return -EACCES;
	if (!range_within(offset, len, mr->len))
		return -ERANGE;
	*ret_addr = (uint8_t *)mr->addr + offset;
	if (ret_mr)
		*ret_mr = mr;
	return 0;
}

static int check_sg(const struct xport_conn *conn, const struct xport_wr *wr,
		    uint64_t *ret_total)
{
	uint64_t total = 0;

	if (wr->nsg > XPORT_MAX_SGE || (wr->nsg && !wr->sg))
		return -EINVAL;
	for (unsigned i = 0; i < wr->nsg; i++) {
		const struct xport_sge *s = &wr->sg[i];

		if (!s->mr || s->mr->conn != conn ||
		    !range_within(s->offset, s->len, s->mr->len))
			return -EINVAL;
		if (wr->op == XPORT_OP_READ && (s->mr->access & XPORT_ACCESS_LOCAL_READONLY))
			return -EINVAL;
		total += s->len;
	}
	if (total > XPORT_MAX_IO)
		return -EMSGSIZE;
	*ret_total = total;
	return 0;
}

static int check_remote(const struct xport_wr *wr, uint64_t total)
{
	unsigned need = wr->op == XPORT_OP_READ ? XPORT_ACCESS_REMOTE_READ
						: XPORT_ACCESS_REMOTE_WRITE;

	if (!wr->remote || (wr->remote->access & need) != need)
		return -EINVAL;
	if (!range_within(wr->remote_offset, total, wr->remote->len))
		return -ERANGE;
	return 0;
}

int xport_post(struct xport_conn *conn, const struct xport_wr *wr)
{
	uint64_t total;
	int r;

	if (!conn || !wr || wr->channel >= conn->channels ||
	    (wr->flags & ~(XPORT_F_SIGNAL | XPORT_F_MORE)))
		return -EINVAL;
	if (conn->error)
		return conn->error;
	r = check_sg(conn, wr, &total);
	if (r < 0)
		return r;
	switch (wr->op) {
	case XPORT_OP_WRITE:
	case XPORT_OP_WRITE_IMM:
	case XPORT_OP_READ:
		r = check_remote(wr, total);
		break;
	case XPORT_OP_SEND:
		r = total > conn->peer_max_msg ? -EMSGSIZE : 0;
		break;
	default:
		r = -EINVAL;
	}
	if (r < 0)
		return r;
	return conn->ops->post(conn, wr, (uint32_t)total);
}

int xport_send_copy(struct xport_conn *conn, unsigned channel, const void *buf,
		    size_t len, uint64_t cookie, unsigned flags)
{
	if (!conn || channel >= conn->channels || (len && !buf) ||
	    (flags & ~(XPORT_F_SIGNAL | XPORT_F_MORE)))
		return -EINVAL;
	if (conn->error)
		return conn->error;
	if (len > conn->peer_max_msg)
		return -EMSGSIZE;
	return conn->ops->send_copy(conn, channel, buf, len, cookie, flags);
}

int xport_flush(struct xport_conn *conn)
{
	if (!conn)
		return -EINVAL;
	return conn->ops->flush(conn);
}

int xport_poll(struct xport_conn *conn, struct xport_completion *ret_comps,
	       unsigned max)
{
	if (!conn || !ret_comps || !max)
		return -EINVAL;
	return conn->ops->poll(conn, ret_comps, max);
}

int xport_wait(struct xport_conn *conn, int timeout_ms)
{
	if (!conn)
		return -EINVAL;
	return conn->ops->wait(conn, timeout_ms);
}

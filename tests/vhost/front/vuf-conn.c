/* SPDX-License-Identifier: MIT */
/* The socket: connect, raw messages with SCM_RIGHTS, replies and acks. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "vuf-internal.h"

#define DEFAULT_TIMEOUT_MS vuf_slow_ms(5000)
#define MAX_SLOWDOWN 20.0

int vuf_slow_ms(int ms)
{
	static double factor;

	if (!factor) {
		const char *s = getenv("VRDMA_SLOWDOWN");
		double f = s ? strtod(s, NULL) : 1.0;

		factor = f >= 1.0 && f <= MAX_SLOWDOWN ? f : 1.0;
	}
	return (int)(ms * factor);
}

static int sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	return nanosleep(&ts, NULL) ? -errno : 0;
}

static int try_connect(const char *path, int *ret_fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_(closep) int fd = -1;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	*ret_fd = steal_fd(&fd);
	return 0;
}

int vuf_conn_connect(const char *path, int timeout_ms, struct vuf_conn **ret_conn)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000ull;
	int fd = -1, ret;

	for (;;) {
		ret = try_connect(path, &fd);
		if (!ret)
			break;
		/* The daemon may not have bound or listened yet. */
		if (ret != -ECONNREFUSED && ret != -ENOENT)
			return ret;
		if (monotonic_ns() >= deadline)
			return -ETIMEDOUT;
		sleep_ms(10);
	}
	ret = vuf_conn_adopt(fd, ret_conn);
	if (ret)
		close(fd);
	return ret;
}

int vuf_conn_adopt(int fd, struct vuf_conn **ret_conn)
{
	struct vuf_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->fd = fd;
	c->timeout_ms = DEFAULT_TIMEOUT_MS;
	c->reply_ack = true;
	*ret_conn = c;
	return 0;
}

void vuf_conn_free(struct vuf_conn *c)
{
	if (!c)
		return;
	closep(&c->fd);
	free(c);
}

int vuf_conn_fd(const struct vuf_conn *c) { return c->fd; }
void vuf_conn_set_timeout(struct vuf_conn *c, int timeout_ms) { c->timeout_ms = timeout_ms; }
void vuf_conn_set_reply_ack(struct vuf_conn *c, bool on) { c->reply_ack = on; }
uint64_t vuf_conn_features(const struct vuf_conn *c) { return c->features; }
uint64_t vuf_conn_protocol_features(const struct vuf_conn *c) { return c->protocol_features; }

int vuf_send_raw(struct vuf_conn *c, const void *buf, size_t len,
		 const int *fds, size_t nfds)
{
	union {
		char buf[CMSG_SPACE(VUF_RAW_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	size_t off = 0;

	if (nfds > VUF_RAW_MAX_FDS || (nfds && !len))
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *cm;

		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	while (off < len) {
		ssize_t n;

		iov.iov_base = (char *)buf + off;
		iov.iov_len = len - off;
		/* MSG_NOSIGNAL: a daemon that dropped us must not kill the test. */
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EPIPE ? -ECONNRESET : -errno;
		}
		/* The fds travel with the first chunk only. */
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
		off += (size_t)n;
	}
	return 0;
}

int vuf_send_msg(struct vuf_conn *c, uint32_t request, uint32_t flags,
		 const void *payload, uint32_t len, const int *fds, size_t nfds)
{
	uint8_t buf[VUF_HDR_SIZE + VUF_MAX_PAYLOAD];

	if (len > VUF_MAX_PAYLOAD)
		return -EMSGSIZE;
	/* Native byte order, as the protocol says; x86 and arm64 are LE. */
	memcpy(buf, &request, 4);
	memcpy(buf + 4, &flags, 4);
	memcpy(buf + 8, &len, 4);
	if (len)
		memcpy(buf + VUF_HDR_SIZE, payload, len);
	return vuf_send_raw(c, buf, VUF_HDR_SIZE + len, fds, nfds);
}

static int wait_readable(int fd, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = monotonic_ns();
		int ms, r;

		if (now >= deadline)
			return -ETIMEDOUT;
		ms = (int)((deadline - now + 999999) / 1000000);
		r = poll(&p, 1, ms);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0)
			return 0;
	}
}

static void collect_fds(struct msghdr *mh, struct vuf_msg *m)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		size_t n;
		int *p;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		p = (int *)CMSG_DATA(cm);
		for (size_t i = 0; i < n; i++) {
			if (m->nfds < VUF_RAW_MAX_FDS)
				m->fds[m->nfds++] = p[i];
			else
				close(p[i]);
		}
	}
}

/* Reads exactly len bytes, collecting any fds that come along. */
static int recv_exact(struct vuf_conn *c, void *buf, size_t len, uint64_t deadline,
		      struct vuf_msg *m)
{
	size_t off = 0;

	while (off < len) {
		union {
			char buf[CMSG_SPACE(VUF_RAW_MAX_FDS * sizeof(int))];
			struct cmsghdr align;
		} control;
		struct iovec iov = { .iov_base = (char *)buf + off, .iov_len = len - off };
		struct msghdr mh = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = control.buf, .msg_controllen = sizeof(control.buf),
		};
		ssize_t n;
		int ret = wait_readable(c->fd, deadline);

		if (ret)
			return ret;
		n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == ECONNRESET ? -ECONNRESET : -errno;
		}
		collect_fds(&mh, m);
		if (n == 0)
			return -ECONNRESET;
		off += (size_t)n;
	}
	return 0;
}

int vuf_recv_msg(struct vuf_conn *c, struct vuf_msg *ret_msg, int timeout_ms)
{
	uint64_t deadline;
	uint8_t hdr[VUF_HDR_SIZE];
	int ret;

	if (timeout_ms < 0)
		timeout_ms = c->timeout_ms;
	deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000ull;
	ret_msg->nfds = 0;
	ret = recv_exact(c, hdr, sizeof(hdr), deadline, ret_msg);
	if (ret)
		goto out_close_fds;
	memcpy(&ret_msg->request, hdr, 4);
	memcpy(&ret_msg->flags, hdr + 4, 4);
	memcpy(&ret_msg->size, hdr + 8, 4);
	if (ret_msg->size > VUF_MAX_PAYLOAD) {
		ret = -EPROTO;
		goto out_close_fds;
	}
	ret = recv_exact(c, ret_msg->payload, ret_msg->size, deadline, ret_msg);
	if (ret)
		goto out_close_fds;
	return 0;

out_close_fds:
	vuf_msg_close_fds(ret_msg);
	return ret;
}

void vuf_msg_close_fds(struct vuf_msg *m)
{
	for (size_t i = 0; i < m->nfds; i++)
		close(m->fds[i]);
	m->nfds = 0;
}

/* A reply must echo the request, carry REPLY and version 1. */
static int recv_reply(struct vuf_conn *c, uint32_t request, struct vuf_msg *m)
{
	int ret = vuf_recv_msg(c, m, -1);

	if (ret)
		return ret;
	if (m->request != request || (m->flags & 0x3) != VUF_FLAG_VERSION ||
	    !(m->flags & VUF_FLAG_REPLY)) {
		vuf_msg_close_fds(m);
		return -EPROTO;
	}
	return 0;
}

int vuf_recv_u64_reply(struct vuf_conn *c, uint32_t request, uint64_t *ret_val)
{
	struct vuf_msg *m = malloc(sizeof(*m));
	int ret;

	if (!m)
		return -ENOMEM;
	ret = recv_reply(c, request, m);
	if (!ret) {
		if (m->size != 8 || m->nfds)
			ret = -EPROTO;
		else
			memcpy(ret_val, m->payload, 8);
		vuf_msg_close_fds(m);
	}
	free(m);
	return ret;
}

int vuf_request(struct vuf_conn *c, uint32_t request, const void *payload,
		uint32_t len, const int *fds, size_t nfds, struct vuf_msg *ret_reply)
{
	bool ack = !ret_reply && c->reply_ack &&
		   (c->protocol_features & VUF_BIT(VUF_PF_REPLY_ACK));
	uint32_t flags = VUF_FLAG_VERSION | (ack ? VUF_FLAG_NEED_REPLY : 0);
	uint64_t val;
	int ret;

	ret = vuf_send_msg(c, request, flags, payload, len, fds, nfds);
	if (ret)
		return ret;
	if (ret_reply)
		return recv_reply(c, request, ret_reply);
	if (!ack)
		return 0;
	ret = vuf_recv_u64_reply(c, request, &val);
	if (ret)
		return ret;
	return val ? -EREMOTEIO : 0;
}

bool vuf_conn_peer_closed(struct vuf_conn *c, int timeout_ms)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000ull;
	char b;
	ssize_t n;

	if (wait_readable(c->fd, deadline))
		return false;
	n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

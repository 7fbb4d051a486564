// SPDX-License-Identifier: MIT
/* Socket plumbing for connection setup (see xport-sock.h). */
#include "xport-sock.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "util.h"
#include "xport-internal.h"

int xport_sock_error(int err)
{
	switch (err) {
	case 0:
	case -EPIPE:
	case -ECONNRESET:
	case -ECONNABORTED:
	case -ENOTCONN:
	case -ESHUTDOWN:
		return -ECONNRESET;
	default:
		return err;
	}
}

int xport_sock_wait(int fd, short events, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };

	for (;;) {
		int n = poll(&p, 1, xport_ms_until(deadline));

		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

int xport_io_all(int fd, void *buf, size_t len, int64_t deadline, xport_io_step step,
		 void *ctx, int eof_err)
{
	uint8_t *p = buf;

	while (len) {
		short events = 0;
		ssize_t n = step(ctx, p, len, &events);
		int r;

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return eof_err;
		if (n != -EAGAIN)
			return (int)n;
		r = xport_sock_wait(fd, events, deadline);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A send(2)/recv(2) result as a step's: would block is -EAGAIN with events. */
static ssize_t sock_step_result(ssize_t n, short events, short *ret_events)
{
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		*ret_events = events;
		return -EAGAIN;
	}
	return xport_sock_error(-errno);
}

static ssize_t send_step(void *ctx, void *buf, size_t len, short *ret_events)
{
	const int *fd = ctx;
	ssize_t n;

	do
		n = send(*fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return sock_step_result(n, POLLOUT, ret_events);
}

static ssize_t recv_step(void *ctx, void *buf, size_t len, short *ret_events)
{
	const int *fd = ctx;
	ssize_t n;

	do
		n = recv(*fd, buf, len, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return sock_step_result(n, POLLIN, ret_events);
}

int xport_sock_send_all(int fd, const void *buf, size_t len, int64_t deadline)
{
	/* send(2) never takes 0 bytes of a non-empty buffer on a stream socket. */
	return xport_io_all(fd, (void *)buf, len, deadline, send_step, &fd, -EIO);
}

int xport_sock_recv_all(int fd, void *buf, size_t len, int64_t deadline)
{
	return xport_io_all(fd, buf, len, deadline, recv_step, &fd, -ECONNRESET);
}

int xport_sock_nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		return -errno;
	return 0;
}

int xport_addrinfo_error(int err)
{
	switch (err) {
	case EAI_SYSTEM:
		return errno ? -errno : -EIO;
	case EAI_MEMORY:
		return -ENOMEM;
	case EAI_AGAIN:
		return -EAGAIN;
	case EAI_NONAME:
	case EAI_SERVICE:
	case EAI_NODATA:
		return -ENOENT;
	default:
		return -EINVAL;
	}
}

static int connect_one(const struct addrinfo *ai, int64_t deadline, int *ret_fd)
{
	_cleanup_(closep) int fd = socket(ai->ai_family,
					  SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
					  ai->ai_protocol);
	socklen_t len = sizeof(int);
	int err = 0, r;

	if (fd < 0)
		return -errno;
	r = xport_sock_nodelay(fd);
	if (r < 0)
		return r;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS)
			return -errno;
		r = xport_sock_wait(fd, POLLOUT, deadline);
		if (r < 0)
			return r;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			return -errno;
		if (err)
			return -err;
	}
	*ret_fd = steal_fd(&fd);
	return 0;
}

int xport_sock_connect(const char *host, const char *port, int64_t deadline,
		       int *fds, unsigned n)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	const struct addrinfo *ai;
	struct addrinfo *res;
	int r = getaddrinfo(host, port, &hints, &res);

	if (r)
		return xport_addrinfo_error(r);
	r = -EHOSTUNREACH;
	/* Channel 0 finds the first address that answers; the others follow it. */
	for (ai = res; ai; ai = ai->ai_next) {
		r = connect_one(ai, deadline, &fds[0]);
		if (r == 0 || r == -ETIMEDOUT)
			break;
	}
	for (unsigned c = 1; r == 0 && c < n; c++)
		r = connect_one(ai, deadline, &fds[c]);
	freeaddrinfo(res);
	return r;
}

void xport_close_fds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		closep(&fds[i]);
}

static int listen_on(const struct addrinfo *ai, bool wildcard, int *ret_fd)
{
	_cleanup_(closep) int fd = socket(ai->ai_family,
					  SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
					  ai->ai_protocol);
	int one = 1, zero = 0;

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		return -errno;
	/* A wildcard IPv6 socket takes IPv4 clients too, whatever the sysctl says. */
	if (wildcard && ai->ai_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0)
		return -errno;
	*ret_fd = steal_fd(&fd);
	return 0;
}

static int listen_any(const struct addrinfo *res, bool wildcard, int *ret_fd)
{
	int r = -EADDRNOTAVAIL;

	/* For "any address" prefer the dual-stack IPv6 socket. */
	for (int pass = wildcard ? 0 : 1; pass < 2; pass++) {
		for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
			if (pass == 0 && ai->ai_family != AF_INET6)
				continue;
			r = listen_on(ai, wildcard, ret_fd);
			if (r == 0)
				return 0;
		}
	}
	return r;
}

static int local_port(int fd, int *ret_port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_INET)
		*ret_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	else if (ss.ss_family == AF_INET6)
		*ret_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	else
		return -EAFNOSUPPORT;
	return 0;
}

int xport_sock_listen(const char *host, const char *port, int *ret_fd,
		      int *ret_port)
{
	struct addrinfo hints = {
		.ai_flags = AI_PASSIVE,
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
	};
	bool wildcard = !host || !*host;
	_cleanup_(closep) int fd = -1;
	struct addrinfo *res;
	int r = getaddrinfo(wildcard ? NULL : host, port, &hints, &res);

	if (r)
		return xport_addrinfo_error(r);
	r = listen_any(res, wildcard, &fd);
	freeaddrinfo(res);
	if (r == 0)
		r = local_port(fd, ret_port);
	if (r < 0)
		return r;
	*ret_fd = steal_fd(&fd);
	return 0;
}

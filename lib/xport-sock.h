/* SPDX-License-Identifier: MIT */
/*
 * Socket plumbing shared by the tcp back end, the authentication handshake
 * and the rdma back end's authentication listener: connecting, listening,
 * and whole-buffer I/O on non-blocking sockets with a deadline (monotonic
 * ms, -1 for none, see xport_deadline_after()).  -errno on failure.
 */
#ifndef VRDMA_XPORT_SOCK_H
#define VRDMA_XPORT_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A peer that went away shows up under many names; callers see one. */
int xport_sock_error(int err);
/* Waits until fd is ready for events (POLLIN/POLLOUT); -ETIMEDOUT. */
int xport_sock_wait(int fd, short events, int64_t deadline);
/*
 * One non-blocking step of a whole-buffer transfer on ctx: the bytes moved,
 * 0 at the end of the stream, -EAGAIN to wait until the fd is ready for
 * *ret_events, or -errno.
 */
typedef ssize_t (*xport_io_step)(void *ctx, void *buf, size_t len, short *ret_events);
/*
 * Steps until all len bytes have moved, waiting on fd until deadline
 * (-ETIMEDOUT); eof_err when the stream ends first.  The plain socket's
 * send_all/recv_all and TLS's record I/O all run on it.
 */
int xport_io_all(int fd, void *buf, size_t len, int64_t deadline, xport_io_step step,
		 void *ctx, int eof_err);
int xport_sock_send_all(int fd, const void *buf, size_t len, int64_t deadline);
int xport_sock_recv_all(int fd, void *buf, size_t len, int64_t deadline);
int xport_sock_nodelay(int fd);
/* getaddrinfo()'s EAI_* as -errno. */
int xport_addrinfo_error(int err);
/* n sockets to host:port (non-blocking, TCP_NODELAY) into fds. */
int xport_sock_connect(const char *host, const char *port, int64_t deadline,
		       int *fds, unsigned n);
/* A listening socket (non-blocking) on host:port; host NULL/"" is any. */
int xport_sock_listen(const char *host, const char *port, int *ret_fd,
		      int *ret_port);
void xport_close_fds(int *fds, unsigned n);

#endif

/* SPDX-License-Identifier: MIT */
/* The nested tier's test programs: the TCP side channel they exchange
 * their QP numbers, GIDs and keys on (rkey-probe, rc-check). */
#ifndef NESTED_TCP_H
#define NESTED_TCP_H

#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

/* A connected socket to HOST:PORT (IPv4), or -1. */
static inline int nested_tcp_connect(const char *host, int port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
	char service[16];
	int fd;

	snprintf(service, sizeof(service), "%d", port);
	if (getaddrinfo(host, service, &hints, &ai))
		return -1;
	fd = socket(ai->ai_family, ai->ai_socktype, 0);
	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen)) {
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

/* All N bytes of P to FD: 0, or -1 (a peer gone is no SIGPIPE). */
static inline int nested_tcp_write_all(int fd, const void *p, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = send(fd, (const uint8_t *)p + done, n - done, MSG_NOSIGNAL);

		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

#endif

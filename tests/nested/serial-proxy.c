// SPDX-License-Identifier: MIT
/*
 * serial-proxy PORT TTY: runs inside the nested guest.  Listens on
 * 127.0.0.1:PORT, accepts one connection, and copies bytes both ways between
 * it and TTY (an ISA serial port that QEMU connects to a TCP peer outside),
 * so that ibv_rc_pingpong / perftest can do their TCP handshake without a NIC
 * (the patched QEMU has no network device).
 *
 * A serial port delivers a message a byte or a few at a time, but
 * ibv_rc_pingpong and perftest read each handshake message with one read()
 * of its full size.  So bytes from the tty are gathered until the line has
 * been idle for IDLE_MS and then written to the socket at once (the
 * handshakes are lockstep, so this never splits a message).  coalesce-proxy
 * does the same on the other side of the serial line.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

static int pump(int from, int to)
{
	char buf[4096];
	ssize_t n = read(from, buf, sizeof(buf)), off = 0;

	if (n <= 0)
		return -1;
	while (off < n) {
		ssize_t w = write(to, buf + off, n - off);
		if (w <= 0)
			return -1;
		off += w;
	}
	return 0;
}

#define IDLE_MS 150

/* Reads from the tty until it has been idle for IDLE_MS, then writes once. */
static int gather(int tty, int s)
{
	static char buf[1 << 16];
	size_t len = 0, off = 0;

	for (;;) {
		struct pollfd p = { .fd = tty, .events = POLLIN };
		ssize_t n;

		if (len == sizeof(buf))
			break;
		n = read(tty, buf + len, sizeof(buf) - len);
		if (n <= 0)
			return -1;
		len += n;
		if (poll(&p, 1, IDLE_MS) <= 0)
			break;
	}
	while (off < len) {
		ssize_t w = write(s, buf + off, len - off);
		if (w <= 0)
			return -1;
		off += w;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct termios t;
	int one = 1, ls, s, tty;

	if (argc != 3) {
		fprintf(stderr, "usage: serial-proxy PORT TTY\n");
		return 2;
	}
	tty = open(argv[2], O_RDWR | O_NOCTTY);
	if (tty < 0 || tcgetattr(tty, &t) < 0) {
		perror(argv[2]);
		return 1;
	}
	cfmakeraw(&t);
	cfsetispeed(&t, B115200);
	cfsetospeed(&t, B115200);
	t.c_cflag |= CLOCAL | CREAD;
	t.c_cflag &= ~CRTSCTS;
	tcsetattr(tty, TCSANOW, &t);

	sa.sin_port = htons(atoi(argv[1]));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ls = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 1) < 0) {
		perror("bind/listen");
		return 1;
	}
	fprintf(stderr, "serial-proxy: listening on %s <-> %s\n", argv[1], argv[2]);
	s = accept(ls, NULL, NULL);
	if (s < 0) {
		perror("accept");
		return 1;
	}
	for (;;) {
		struct pollfd p[2] = { { .fd = s, .events = POLLIN },
				       { .fd = tty, .events = POLLIN } };

		if (poll(p, 2, -1) < 0)
			return 1;
		if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && pump(s, tty))
			break;
		if ((p[1].revents & POLLIN) && gather(tty, s))
			break;
	}
	/* Keep the serial side open a moment so the last bytes drain. */
	sleep(1);
	return 0;
}

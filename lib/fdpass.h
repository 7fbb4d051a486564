/* SPDX-License-Identifier: MIT */
/*
 * File descriptors over UNIX sockets: the SCM_RIGHTS control message that
 * vhost-user and the owner protocol attach to a message.
 */
#ifndef VRDMA_FDPASS_H
#define VRDMA_FDPASS_H

#include <sys/socket.h>

/* Bytes of control buffer that n descriptors need. */
#define FDPASS_CONTROL_SIZE(n) CMSG_SPACE(sizeof(int) * (n))

/*
 * Attaches fds[0..n) to mh as one SCM_RIGHTS message built in control,
 * which holds at least FDPASS_CONTROL_SIZE(n) bytes and is aligned for
 * struct cmsghdr.  n == 0 attaches nothing (mh's control is left alone).
 */
void fdpass_attach(struct msghdr *mh, void *control, const int *fds, unsigned int n);

#endif

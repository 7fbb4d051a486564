// SPDX-License-Identifier: MIT
#include <string.h>

#include "fdpass.h"

void fdpass_attach(struct msghdr *mh, void *control, const int *fds, unsigned int n)
{
	struct cmsghdr *c;

	if (!n)
		return;
	memset(control, 0, FDPASS_CONTROL_SIZE(n));
	mh->msg_control = control;
	mh->msg_controllen = FDPASS_CONTROL_SIZE(n);
	c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
}

/* SPDX-License-Identifier: MIT */
/*
 * systemd's socket-activation contract (sd_listen_fds(3)), without
 * libsystemd: a service manager that opened our listening sockets passes
 * them as fds 3, 4, ... and says so in LISTEN_PID (our pid) and LISTEN_FDS
 * (their count).
 */
#ifndef VRDMA_LISTEN_FDS_H
#define VRDMA_LISTEN_FDS_H

#define LISTEN_FDS_START 3

/*
 * The number of sockets passed to this process (0: none, or the
 * variables name another process), or -EINVAL if they are malformed.
 * Either way the variables are removed, so children never see them, and
 * the passed fds become close-on-exec.
 */
int listen_fds_take(void);

#endif

/* SPDX-License-Identifier: MIT */
/* Running the back end under test: spawn, readiness, SIGTERM, fd census. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "vuf-internal.h"

static void nap_ms(int ms)
{
	struct timespec ts = { .tv_nsec = (long)ms * 1000000L };

	nanosleep(&ts, NULL);
}

static bool reap(struct vuf_daemon *d)
{
	int st;

	if (d->exited)
		return true;
	if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
		d->exited = true;
		d->wstatus = st;
	}
	return d->exited;
}

int vuf_daemon_spawn(char *const argv[], const char *socket_path, int timeout_ms,
		     struct vuf_daemon *ret_d)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct vuf_daemon d = { .pid = -1 };
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	d.pid = pid;
	/* The contract's readiness signal: connect() on the path succeeds. */
	for (;;) {
		struct vuf_conn *probe;

		if (!vuf_conn_connect(socket_path, 0, &probe)) {
			vuf_conn_free(probe);
			break;
		}
		if (reap(&d)) {
			*ret_d = d;
			return -ECHILD;
		}
		if (monotonic_ns() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return -ETIMEDOUT;
		}
		nap_ms(10);
	}
	*ret_d = d;
	return 0;
}

bool vuf_daemon_alive(struct vuf_daemon *d)
{
	return !reap(d);
}

int vuf_daemon_stop(struct vuf_daemon *d, int timeout_ms, int *ret_wstatus)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000ull;

	if (!reap(d))
		kill(d->pid, SIGTERM);
	while (!reap(d)) {
		if (monotonic_ns() >= deadline) {
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &d->wstatus, 0);
			d->exited = true;
			*ret_wstatus = d->wstatus;
			return -ETIMEDOUT;
		}
		nap_ms(10);
	}
	*ret_wstatus = d->wstatus;
	return 0;
}

int vuf_proc_fd_count(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

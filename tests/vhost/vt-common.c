/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util.h"
#include "vt-common.h"

static char *daemon_path;
static char *tmp_dir;

void vt_init(int argc, char **argv)
{
	GError *err = NULL;
	int fd;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH-TO-vrdma-vhost\n", argv[0]);
		exit(2);
	}
	daemon_path = argv[1];
	if (access(daemon_path, X_OK)) {
		fprintf(stderr, "%s: not executable: %s\n", daemon_path, strerror(errno));
		exit(1);
	}
	fd = memfd_create("vt-probe", MFD_CLOEXEC);
	if (fd < 0) {
		/* Guest RAM is memfd: without it nothing here can run. */
		printf("SKIP: memfd_create unsupported: %s\n", strerror(errno));
		exit(77);
	}
	close(fd);
	/* A peer that drops us must surface as EPIPE, not kill the test. */
	signal(SIGPIPE, SIG_IGN);
	/* VT_TEST_FILTER=test_name (a glob): run only those, by hand. */
	if (getenv("VT_TEST_FILTER"))
		cmocka_set_test_filter(getenv("VT_TEST_FILTER"));
	tmp_dir = g_dir_make_tmp("vrdma-vhost-XXXXXX", &err);
	if (!tmp_dir) {
		fprintf(stderr, "temp dir: %s\n", err->message);
		exit(1);
	}
}

const char *vt_path(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", tmp_dir, name);
	return buf;
}

void vt_cleanup(void)
{
	GDir *dir;
	const char *name;

	if (!tmp_dir)
		return;
	dir = g_dir_open(tmp_dir, 0, NULL);
	while (dir && (name = g_dir_read_name(dir))) {
		g_autofree char *p = g_build_filename(tmp_dir, name, NULL);

		g_unlink(p);
	}
	if (dir)
		g_dir_close(dir);
	g_rmdir(tmp_dir);
	g_free(tmp_dir);
	tmp_dir = NULL;
}

int vt_spawn(struct vt_daemon *d, const char *sockname, const char *const *args)
{
	const char *argv[32];
	size_t n = 0;
	int ret;

	vt_path(sockname, d->sock, sizeof(d->sock));
	argv[n++] = daemon_path;
	for (size_t i = 0; args[i] && n < ARRAY_SIZE(argv) - 3; i++)
		argv[n++] = args[i];
	argv[n++] = "--socket-path";
	argv[n++] = d->sock;
	argv[n] = NULL;
	/* Generous: under ASan the daemon starts slowly on a loaded machine. */
	ret = vuf_daemon_spawn((char *const *)argv, d->sock, 20000, &d->d);
	if (ret)
		fprintf(stderr, "spawning %s failed: %s (wait status 0x%x)\n", daemon_path,
			strerror(-ret), d->d.exited ? d->d.wstatus : 0);
	d->running = !ret;
	return ret;
}

int vt_stop(struct vt_daemon *d)
{
	int st, ret;

	if (!d->running)
		return -ECHILD;
	d->running = false;
	if (!vuf_daemon_alive(&d->d)) {
		fprintf(stderr, "daemon died before SIGTERM (wait status 0x%x)\n", d->d.wstatus);
		return -ECHILD;
	}
	ret = vuf_daemon_stop(&d->d, 10000, &st);
	if (ret) {
		fprintf(stderr, "daemon ignored SIGTERM for 10 s\n");
		return ret;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "daemon exit: %s %d (non-zero; see its stderr above)\n",
			WIFEXITED(st) ? "status" : "signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		return -EIO;
	}
	return 0;
}

int vt_make_file(const char *path, uint64_t size, uint8_t (*pattern)(uint64_t))
{
	_cleanup_(closep) int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	uint8_t buf[4096];

	if (fd < 0)
		return -errno;
	for (uint64_t off = 0; off < size; off += sizeof(buf)) {
		size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = pattern ? pattern(off + i) : 0;
		if (write(fd, buf, n) != (ssize_t)n)
			return -EIO;
	}
	return 0;
}

int vt_spawn_blk(struct vt_daemon *d, const char *name, uint64_t size, const char *const *extra,
		 char ret_file[256])
{
	char file[256], img[64], sock[64];
	const char *args[16] = { "--device", "blk", "--blk-file", file };
	size_t n = 4;
	int r;

	snprintf(img, sizeof(img), "%s.img", name);
	snprintf(sock, sizeof(sock), "%s.sock", name);
	vt_path(img, file, sizeof(file));
	for (size_t i = 0; extra && extra[i]; i++) {
		if (n >= G_N_ELEMENTS(args) - 1)
			return -E2BIG;
		args[n++] = extra[i];
	}
	args[n] = NULL;
	r = vt_make_file(file, size, NULL);
	if (!r)
		r = vt_spawn(d, sock, args);
	if (!r && ret_file)
		snprintf(ret_file, 256, "%s", file);
	return r;
}

int vt_run_group(const char *name, const struct CMUnitTest *tests, size_t n,
		 CMFixtureFunction setup, CMFixtureFunction teardown, struct vt_daemon *const *daemons)
{
	int failed = _cmocka_run_group_tests(name, tests, n, setup, teardown);

	for (size_t i = 0; daemons[i]; i++)
		failed |= daemons[i]->running && vt_stop(daemons[i]);
	vt_cleanup();
	return failed ? 1 : 0;
}

int vt_dev_open(struct vt_dev *dev, const char *sock, uint64_t want, uint64_t want_proto,
		unsigned nvq, uint16_t qsize, bool start)
{
	int ret = vt_dev_connect(dev, sock, VT_TIMEOUT_MS, want, want_proto);

	if (!ret)
		ret = vuf_mem_add_region(dev->mem, VT_RAM0_GPA, VT_RAM0_SIZE, 0);
	if (!ret)
		ret = vuf_mem_add_region(dev->mem, VT_RAM1_GPA, VT_RAM1_SIZE, VT_RAM1_FD_OFFSET);
	if (!ret)
		ret = vt_dev_start_queues(dev, nvq, qsize, start);
	return ret;
}

int vt_blk_round_trip(struct vt_dev *dev, struct vuf_blk_req *req, uint64_t sector,
		      uint8_t seed)
{
	uint8_t out[4096], in[4096];

	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (uint8_t)(i * 3 + seed);
	if (vuf_blk_io(&dev->vq[0], req, VUF_BLK_T_OUT, sector, out, sizeof(out), false,
		       VT_TIMEOUT_MS) != VUF_BLK_S_OK ||
	    vuf_blk_io(&dev->vq[0], req, VUF_BLK_T_IN, sector, in, sizeof(in), false,
		       VT_TIMEOUT_MS) != VUF_BLK_S_OK)
		return -EIO;
	return memcmp(in, out, sizeof(in)) ? -EBADMSG : 0;
}

int vt_wait_fd_count(pid_t pid, int want)
{
	uint64_t deadline = monotonic_ns() + 3000000000ull;
	int n;

	for (;;) {
		n = vuf_proc_fd_count(pid);
		if (n == want || monotonic_ns() > deadline)
			return n;
		usleep(10000);
	}
}

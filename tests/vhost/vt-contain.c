// SPDX-License-Identifier: MIT
/* The good connection beside the hostile ones (vt-contain.h). */
#include <errno.h>
#include <unistd.h>

#include "vt-contain.h"

int vt_contain_setup(void **state, struct vt_contain *c, const char *name, uint64_t file_size,
		     const char *const *extra)
{
	*state = c;
	c->sectors = file_size / VUF_BLK_SECTOR;
	if (vt_spawn_blk(&c->dmn, name, file_size, extra, NULL))
		return -1;
	if (vt_dev_open(&c->good, c->dmn.sock, VT_BLK_FEATURES, VT_PROTO_ALL, 1, 64, true) ||
	    vuf_blk_req_alloc(c->good.mem, 4096, &c->good_req))
		return -1;
	c->baseline_fds = vuf_proc_fd_count(c->dmn.d.pid);
	return c->baseline_fds > 0 ? 0 : -1;
}

int vt_contain_teardown(void **state)
{
	struct vt_contain *c = *state;

	vt_dev_close(&c->good);
	return 0;
}

int vt_contain_case_cleanup(void **state)
{
	struct vt_contain *c = *state;

	if (!c->raw && !c->hdev_open)
		return 0;
	vuf_conn_free(c->raw);
	c->raw = NULL;
	if (c->hdev_open)
		vt_contain_close_hdev(c);
	usleep(200 * 1000);
	c->baseline_fds = vuf_proc_fd_count(c->dmn.d.pid);
	return 0;
}

void vt_contain_good_io(struct vt_contain *c, const char *after)
{
	uint64_t sector = (c->good_round * 8) % (c->sectors - 8);
	int ret;

	c->good_round++;
	if (!vuf_daemon_alive(&c->dmn.d))
		fail_msg("daemon died after %s (wait status 0x%x)", after, c->dmn.d.wstatus);
	ret = vt_blk_round_trip(&c->good, &c->good_req, sector, (uint8_t)c->good_round);
	if (ret == -EIO)
		fail_msg("good connection: I/O failed after %s", after);
	if (ret)
		fail_msg("good connection: read back differs after %s", after);
}

void vt_contain_fd_baseline(struct vt_contain *c, const char *after)
{
	int n = vt_wait_fd_count(c->dmn.d.pid, c->baseline_fds);

	if (n != c->baseline_fds)
		fail_msg("after %s the daemon has %d fds open, baseline %d", after, n,
			 c->baseline_fds);
}

struct vt_dev *vt_contain_open_hdev(struct vt_contain *c, uint64_t features, unsigned int nvq,
				    uint16_t qsize, bool start)
{
	assert_int_equal(vt_dev_open(&c->hdev, c->dmn.sock, features, VT_PROTO_ALL, nvq, qsize,
				     start), 0);
	c->hdev_open = true;
	return &c->hdev;
}

void vt_contain_close_hdev(struct vt_contain *c)
{
	vt_dev_close(&c->hdev);
	c->hdev_open = false;
}

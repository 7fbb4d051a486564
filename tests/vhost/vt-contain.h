/* SPDX-License-Identifier: MIT */
/*
 * Containment tests (test-vhost-contain, test-vhost-hostile): a blk back
 * end with one well-behaved connection beside the hostile one each case
 * opens.  After a case the good connection still reads back what it wrote,
 * and the daemon holds exactly the fds it held before.
 */
#ifndef VT_CONTAIN_H
#define VT_CONTAIN_H

#include "vt-common.h"

struct vt_contain {
	struct vt_daemon dmn;
	struct vt_dev good;
	struct vuf_blk_req good_req;
	uint64_t sectors;
	unsigned int good_round;
	int baseline_fds;
	/* The hostile side of the running case, closed after a failed one. */
	struct vt_dev hdev;
	bool hdev_open;
	struct vuf_conn *raw;
};

/* The back end over a name.img of file_size bytes (extra arguments after
 * the blk ones), the good connection, and the fd baseline; c becomes the
 * group's cmocka state, for the two fixtures below. */
int vt_contain_setup(void **state, struct vt_contain *c, const char *name, uint64_t file_size,
		     const char *const *extra);
/* Group teardown: the good connection goes. */
int vt_contain_teardown(void **state);
/* Test teardown: a failed case left its hostile side open; close it and
 * measure the baseline again. */
int vt_contain_case_cleanup(void **state);

/* The daemon lives and the good connection writes and reads back a sector. */
void vt_contain_good_io(struct vt_contain *c, const char *after);
/* The daemon's fds are back to the baseline. */
void vt_contain_fd_baseline(struct vt_contain *c, const char *after);

/* The case's hostile device connection, fully set up (vt_dev_open). */
struct vt_dev *vt_contain_open_hdev(struct vt_contain *c, uint64_t features, unsigned int nvq,
				    uint16_t qsize, bool start);
void vt_contain_close_hdev(struct vt_contain *c);

#endif

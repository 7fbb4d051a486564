/* SPDX-License-Identifier: MIT */
/*
 * What every vrdma-vhost test program shares: a temp dir, the daemon
 * process, and a fully set-up device connection built on vu-front.
 */
#ifndef VT_COMMON_H
#define VT_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "vt-dev.h"
#include "vu-front.h"

#define VT_TIMEOUT_MS vuf_slow_ms(5000)
/* Two regions, the second high and at a non-zero fd offset. */
#define VT_RAM0_GPA 0x0ull
#define VT_RAM0_SIZE (16ull << 20)
#define VT_RAM1_GPA 0x100000000ull
#define VT_RAM1_SIZE (4ull << 20)
#define VT_RAM1_FD_OFFSET (64ull << 10)

struct vt_daemon {
	char sock[256];
	struct vuf_daemon d;
	bool running;
};

/* The daemon binary (argv[1]) and a private temp dir; exits 77 without memfd. */
void vt_init(int argc, char **argv);
/* Formats dir/name into buf and returns buf. */
const char *vt_path(const char *name, char *buf, size_t len);
/* Spawns the daemon with the given extra args (NULL-terminated) on dir/sockname. */
int vt_spawn(struct vt_daemon *d, const char *sockname, const char *const *args);
/* SIGTERM; 0 iff it exited with status 0 (prints why not). */
int vt_stop(struct vt_daemon *d);
/* Removes the temp dir. */
void vt_cleanup(void);
/* Writes a file of size bytes where byte i is pattern(i) (0 without one). */
int vt_make_file(const char *path, uint64_t size, uint8_t (*pattern)(uint64_t));
/*
 * A blk back end over a fresh zero-filled file of size bytes, dir/name.img
 * (its path in ret_file when that is not NULL), listening on
 * dir/name.sock, with extra arguments (NULL-terminated, or NULL).
 */
int vt_spawn_blk(struct vt_daemon *d, const char *name, uint64_t size, const char *const *extra,
		 char ret_file[256]);
/*
 * A test program's whole run: the group, then every daemon (NULL-
 * terminated) must exit 0 on SIGTERM (a sanitizer report in one shows up
 * so), then the temp dir goes.  Returns the program's exit status.
 */
int vt_run_group(const char *name, const struct CMUnitTest *tests, size_t n,
		 CMFixtureFunction setup, CMFixtureFunction teardown, struct vt_daemon *const *daemons);
#define VT_RUN(tests, setup, teardown, ...)                                                  \
	vt_run_group(#tests, tests, sizeof(tests) / sizeof(tests[0]), setup, teardown,       \
		     (struct vt_daemon *const[]){ __VA_ARGS__, NULL })

/*
 * Connects, negotiates want & offered (protocol: want_proto & offered),
 * sends the two-region memory table, lays out nvq queues of qsize and
 * starts them unless start is false.
 */
int vt_dev_open(struct vt_dev *dev, const char *sock, uint64_t want, uint64_t want_proto,
		unsigned nvq, uint16_t qsize, bool start);

/*
 * Writes 4 KiB (a pattern from seed) at sector through queue 0 and reads
 * them back: 0, -EIO if either request failed, -EBADMSG if the data differs.
 */
int vt_blk_round_trip(struct vt_dev *dev, struct vuf_blk_req *req, uint64_t sector,
		      uint8_t seed);
/* Waits up to 3 s for pid to have want fds open; returns the last count seen. */
int vt_wait_fd_count(pid_t pid, int want);

/* Features every blk test wants by default. */
#define VT_BLK_FEATURES (VUF_BIT(VUF_F_VERSION_1) | VUF_BIT(VUF_F_INDIRECT_DESC) | \
			 VUF_BIT(VUF_BLK_F_SEG_MAX) | VUF_BIT(VUF_BLK_F_BLK_SIZE) | \
			 VUF_BIT(VUF_BLK_F_FLUSH) | VUF_BIT(VUF_BLK_F_MQ) | \
			 VUF_BIT(VUF_BLK_F_RO) | VUF_BIT(VUF_F_PROTOCOL_FEATURES))
#define VT_PROTO_ALL (VUF_BIT(VUF_PF_MQ) | VUF_BIT(VUF_PF_LOG_SHMFD) | \
		      VUF_BIT(VUF_PF_REPLY_ACK) | VUF_BIT(VUF_PF_CONFIG) | \
		      VUF_BIT(VUF_PF_INFLIGHT_SHMFD) | VUF_BIT(VUF_PF_RESET_DEVICE) | \
		      VUF_BIT(VUF_PF_CONFIG_MEM_SLOTS) | VUF_BIT(VUF_PF_STATUS))

#endif

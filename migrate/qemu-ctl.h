/* SPDX-License-Identifier: MIT */
/*
 * vrdma-migrate --qmp: the engine drives its local QEMU itself, so one
 * command per host migrates a guest.  This file holds the steps an
 * orchestrator would otherwise send over QMP (docs/migration.md,
 * "Migrating a QEMU guest"): x-ignore-shared, the owner socket in a private
 * directory, the device-state hand-off (mig_handoff) and the end on each
 * side.  Functions return 0 or -errno and never log: ctl->error says what
 * went wrong, in words.
 */
#ifndef VRDMA_QEMU_CTL_H
#define VRDMA_QEMU_CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "migrate.h"

struct qmp;

/* Where the guest is after qemu_ctl_end(). */
enum qemu_guest_place {
	QEMU_GUEST_DESTINATION, /* it runs (or waits, if it was paused) there */
	QEMU_GUEST_SOURCE,      /* it runs (or waits, if it was paused) here */
	QEMU_GUEST_UNKNOWN,     /* src: paused here, and it may run there */
};

struct qemu_ctl {
	struct qmp *qmp;
	const char *qmp_path;
	bool incoming;
	/* src: the destination's host; dst: the address to listen on ("" any) */
	const char *stream_host;
	uint16_t stream_port;  /* dst: --state-port, 0 for any free port */
	int timeout_ms;        /* each QMP command; settling a migration */
	uid_t qemu_uid;        /* QEMU's user and group (SO_PEERCRED) */
	gid_t qemu_gid;
	char *parent;          /* the private directory's parent */
	char *dir;             /* private: the owner socket, QEMU's TLS files */
	int dir_fd;
	char *owner_path;      /* dir/owner.sock, for the engine */
	bool owner_listening;
	bool tls;              /* our tls-creds object is in QEMU */
	bool guest_was_running; /* src */
	bool migrate_issued;    /* src: QEMU's own migration was started */
	bool loaded;            /* dst: QEMU loaded the device state: the guest is here */
	char *error;
	struct mig_handoff handoff;
};

/*
 * Connects to the QMP socket and readies QEMU: the destination must wait
 * with -incoming defer, the source must hold a guest.  With credentials,
 * QEMU's own stream gets the same ones (tls-creds-x509 from the same
 * directory, or tls-creds-psk on the same key file); without, any left by
 * an earlier run are cleared.
 */
int qemu_ctl_open(struct qemu_ctl *c, const char *qmp_path, bool incoming,
		  const char *stream_host, uint16_t stream_port, const char *x509_dir,
		  const char *psk_file, const char *tls_hostname, int timeout_ms);

/*
 * After the engine, by its outcome ST.  Done: the source QEMU quits, and
 * the destination's QEMU gets its migration settings back (no
 * x-ignore-shared: a later migration sends the RAM).  Failed: the source
 * settles QEMU's own migration first (cancelled, or ended); its guest runs
 * again, unless the device state may have been loaded on the destination
 * (the guest stays paused: *ret_place QEMU_GUEST_UNKNOWN, -EAGAIN).  The
 * destination's QEMU was discarded by the hand-off, or quits here unless
 * it holds the guest.
 */
int qemu_ctl_end(struct qemu_ctl *c, const struct mig_stats *st,
		 enum qemu_guest_place *ret_place);
void qemu_ctl_close(struct qemu_ctl *c);

#endif

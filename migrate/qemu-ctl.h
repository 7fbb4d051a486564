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

#include "migrate.h"

struct qmp;

struct qemu_ctl {
	struct qmp *qmp;
	const char *qmp_path;
	bool incoming;
	/* src: the destination's host; dst: the address to listen on ("" any) */
	const char *stream_host;
	uint16_t stream_port;  /* dst: --state-port, 0 for any free port */
	char *dir;             /* private: the owner socket, the PSK link */
	char *owner_path;      /* dir/owner.sock, for the engine */
	bool owner_listening;
	bool guest_was_running; /* src */
	/* src: all the device state left; dst: QEMU loaded it (the guest is here) */
	bool handoff_done;
	char *error;
	struct mig_handoff handoff;
};

/*
 * Connects to the QMP socket and readies QEMU: the destination must wait
 * with -incoming defer, the source must hold a guest.  With credentials,
 * QEMU's own stream gets the same ones (tls-creds-x509 from the same
 * directory, or tls-creds-psk on the same key file).
 */
int qemu_ctl_open(struct qemu_ctl *c, const char *qmp_path, bool incoming,
		  const char *stream_host, uint16_t stream_port, const char *x509_dir,
		  const char *psk_file, const char *tls_hostname, int timeout_ms);

/*
 * After the engine, by its outcome ST: done, the source quits its QEMU
 * and the destination closes its owner socket; failed, the source's guest
 * runs again (cont where QEMU did not resume it itself), except when its
 * device state left and no answer came back (-EAGAIN: it may run on the
 * destination), and the destination's QEMU quits unless it loaded the
 * device state (then the guest is there).  *ret_resumed: the source's
 * guest runs.
 */
int qemu_ctl_end(struct qemu_ctl *c, const struct mig_stats *st, bool *ret_resumed);
void qemu_ctl_close(struct qemu_ctl *c);

#endif

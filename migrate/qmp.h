/* SPDX-License-Identifier: MIT */
/*
 * A QMP client for one QEMU on this host: its unix socket, one command at a
 * time, each answer matched to its command by id; events in between are
 * read and dropped.  QEMU is a peer like any other: every line is bounded
 * (64 KiB, 32 levels of nesting) and parsed as JSON, every wait has a
 * limit, and after a reply that leaves the stream out of step the
 * connection is dropped (later calls fail with -ENOTCONN).
 *
 * Functions return 0 or -errno and never log.  -EREMOTEIO: QEMU answered
 * with an error, whose description *ret_error carries (g_free it).  Where
 * the call fails otherwise, *ret_error says what failed, in words.
 */
#ifndef VRDMA_QMP_H
#define VRDMA_QMP_H

#include <json-glib/json-glib.h>
#include <sys/socket.h>

struct qmp;

/* Connects, reads the greeting and leaves capabilities negotiation. */
int qmp_connect(const char *path, int timeout_ms, struct qmp **ret_qmp, char **ret_error);
void qmp_close(struct qmp *q);

/*
 * Runs COMMAND with ARGS (a JSON object, or NULL; not taken) and waits for
 * its answer.  On 0, *ret_return (if not NULL) is what it returned
 * (json_node_unref it).  A QEMU that exits meanwhile gives -ECONNRESET.
 */
int qmp_call(struct qmp *q, const char *command, JsonNode *args, JsonNode **ret_return,
	     char **ret_error);

/* A string member of a JSON object node, or NULL (no object, no such string). */
const char *qmp_member_str(JsonNode *node, const char *name);

/* The QEMU process at the other end (SO_PEERCRED). */
int qmp_peer(const struct qmp *q, struct ucred *ret_cred);

/* Until QEMU closes the connection (it exited): 0, or -ETIMEDOUT. */
int qmp_wait_closed(struct qmp *q, int timeout_ms);

#endif

// SPDX-License-Identifier: MIT
/*
 * vrdma-migrate --qmp: the QMP steps around the engine (see qemu-ctl.h).
 * The rules QEMU enforces (no migrate-incoming before the RAM is complete,
 * the source resumes when its own migration fails) stay QEMU's; this file
 * only issues the steps in their order and reads the outcome.
 */
#include "qemu-ctl.h"

#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qmp.h"

#define TLS_ID "vrdma-migrate-tls"

/* {"NAME": VALUE} builders for the few arguments the steps take. */
static JsonNode *args_str(const char *name, const char *value)
{
	g_autoptr(JsonBuilder) b = json_builder_new();

	json_builder_begin_object(b);
	json_builder_set_member_name(b, name);
	json_builder_add_string_value(b, value);
	json_builder_end_object(b);
	return json_builder_get_root(b);
}

static int call(struct qemu_ctl *c, const char *cmd, JsonNode *args, JsonNode **ret)
{
	int r;

	g_clear_pointer(&c->error, g_free);
	r = qmp_call(c->qmp, cmd, args, ret, &c->error);
	if (args)
		json_node_unref(args);
	return r;
}

static int call_str(struct qemu_ctl *c, const char *cmd, const char *name, const char *value)
{
	return call(c, cmd, args_str(name, value), NULL);
}

/* A string member of what a command returned, or NULL. */
static const char *member_str(JsonNode *n, const char *name)
{
	if (!n || !JSON_NODE_HOLDS_OBJECT(n))
		return NULL;
	return json_object_get_string_member_with_default(json_node_get_object(n), name, NULL);
}

static int query_status(struct qemu_ctl *c, char **ret_status)
{
	g_autoptr(JsonNode) ret = NULL;
	const char *st;
	int r = call(c, "query-status", NULL, &ret);

	if (r < 0)
		return r;
	st = member_str(ret, "status");
	if (!st) {
		c->error = g_strdup("query-status: no status in QEMU's answer");
		return -EBADMSG;
	}
	*ret_status = g_strdup(st);
	return 0;
}

static int set_ignore_shared(struct qemu_ctl *c)
{
	g_autoptr(JsonBuilder) b = json_builder_new();

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "capabilities");
	json_builder_begin_array(b);
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "capability");
	json_builder_add_string_value(b, "x-ignore-shared");
	json_builder_set_member_name(b, "state");
	json_builder_add_boolean_value(b, TRUE);
	json_builder_end_object(b);
	json_builder_end_array(b);
	json_builder_end_object(b);
	return call(c, "migrate-set-capabilities", json_builder_get_root(b), NULL);
}

/* The first identity of a PSK file (IDENTITY:HEXKEY lines): QEMU's username. */
static char *psk_identity(const char *file)
{
	g_autofree char *text = NULL;
	char *colon;

	if (!g_file_get_contents(file, &text, NULL, NULL))
		return NULL;
	colon = strchr(text, ':');
	return colon ? g_strndup(text, (gsize)(colon - text)) : NULL;
}

/*
 * QEMU's stream gets the engine's credentials: x509 from the same
 * directory (the layouts are QEMU's), or the PSK through a keys.psk link
 * in the private directory (QEMU reads a directory, the engine a file).
 */
static int set_tls(struct qemu_ctl *c, const char *x509_dir, const char *psk_file,
		   const char *hostname)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonBuilder) p = json_builder_new();
	g_autofree char *abs = NULL, *link = NULL, *user = NULL;
	int r;

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "qom-type");
	json_builder_add_string_value(b, x509_dir ? "tls-creds-x509" : "tls-creds-psk");
	json_builder_set_member_name(b, "id");
	json_builder_add_string_value(b, TLS_ID);
	json_builder_set_member_name(b, "endpoint");
	json_builder_add_string_value(b, c->incoming ? "server" : "client");
	json_builder_set_member_name(b, "dir");
	if (x509_dir) {
		json_builder_add_string_value(b, x509_dir);
		json_builder_set_member_name(b, "verify-peer");
		json_builder_add_boolean_value(b, TRUE);
	} else {
		abs = g_canonicalize_filename(psk_file, NULL);
		link = g_build_filename(c->dir, "keys.psk", NULL);
		if (symlink(abs, link) < 0) {
			r = -errno;
			c->error = g_strdup_printf("%s: %s", link, strerror(-r));
			return r;
		}
		json_builder_add_string_value(b, c->dir);
		if (!c->incoming) {
			user = psk_identity(psk_file);
			if (!user) {
				c->error = g_strdup_printf("%s: no IDENTITY:HEXKEY line", psk_file);
				return -EBADMSG;
			}
			json_builder_set_member_name(b, "username");
			json_builder_add_string_value(b, user);
		}
	}
	json_builder_end_object(b);
	/* Left over by an engine that was killed: replace it. */
	call_str(c, "object-del", "id", TLS_ID);
	r = call(c, "object-add", json_builder_get_root(b), NULL);
	if (r < 0)
		return r;
	json_builder_begin_object(p);
	json_builder_set_member_name(p, "tls-creds");
	json_builder_add_string_value(p, TLS_ID);
	if (hostname && !c->incoming) {
		json_builder_set_member_name(p, "tls-hostname");
		json_builder_add_string_value(p, hostname);
	}
	json_builder_end_object(p);
	return call(c, "migrate-set-parameters", json_builder_get_root(p), NULL);
}

/*
 * The private directory for the owner socket.  QEMU creates the socket in
 * it, so a root engine hands the directory to the user QEMU runs as (the
 * owner of the QMP socket): nobody else can reach it.
 */
static int make_dir(struct qemu_ctl *c)
{
	g_autoptr(GError) err = NULL;
	struct stat st;

	c->dir = g_dir_make_tmp("vrdma-migrate-XXXXXX", &err);
	if (!c->dir) {
		c->error = g_strdup_printf("a private directory: %s", err->message);
		return -EIO;
	}
	if (geteuid() == 0 && stat(c->qmp_path, &st) == 0 && st.st_uid != 0 &&
	    chown(c->dir, st.st_uid, st.st_gid) < 0) {
		int r = -errno;

		c->error = g_strdup_printf("%s: chown to QEMU's user: %s", c->dir, strerror(-r));
		return r;
	}
	c->owner_path = g_build_filename(c->dir, "owner.sock", NULL);
	return 0;
}

/* "tcp:HOST:PORT", with an IPv6 address in brackets. */
static char *tcp_uri(const char *host, unsigned port)
{
	if (!host || !*host)
		host = "0.0.0.0";
	return strchr(host, ':') ? g_strdup_printf("tcp:[%s]:%u", host, port)
				 : g_strdup_printf("tcp:%s:%u", host, port);
}

/* dst: QEMU listens for the device state; the port it got. */
static int handoff_listen(void *opaque, uint16_t *ret_port)
{
	struct qemu_ctl *c = opaque;
	g_autofree char *uri = tcp_uri(c->stream_host, c->stream_port);
	g_autoptr(JsonNode) info = NULL;
	JsonArray *addrs;
	const char *port;
	int r = call_str(c, "migrate-incoming", "uri", uri);

	if (r < 0)
		return r;
	if (c->stream_port) {
		*ret_port = c->stream_port;
		return 0;
	}
	/* Port 0: QEMU picked one, and names it in query-migrate. */
	r = call(c, "query-migrate", NULL, &info);
	if (r < 0)
		return r;
	addrs = JSON_NODE_HOLDS_OBJECT(info) &&
				json_object_has_member(json_node_get_object(info), "socket-address")
			? json_object_get_array_member(json_node_get_object(info), "socket-address")
			: NULL;
	port = addrs && json_array_get_length(addrs) > 0
		       ? member_str(json_array_get_element(addrs, 0), "port")
		       : NULL;
	if (!port || !g_ascii_string_to_unsigned(port, 10, 1, UINT16_MAX, NULL, NULL)) {
		c->error = g_strdup("query-migrate names no port QEMU listens on");
		return -EBADMSG;
	}
	*ret_port = (uint16_t)g_ascii_strtoull(port, NULL, 10);
	return 0;
}

/* dst: 1 once QEMU has loaded the device state (the guest runs or is paused). */
static int handoff_loaded(void *opaque)
{
	struct qemu_ctl *c = opaque;
	g_autofree char *st = NULL;
	int r = query_status(c, &st);

	if (r == -ECONNRESET || r == -EPIPE) {
		g_free(c->error);
		c->error = g_strdup("QEMU exited while it loaded the device state "
				    "(its log says why)");
	}
	if (r < 0)
		return r;
	if (!strcmp(st, "inmigrate"))
		return 0;
	if (!strcmp(st, "running") || !strcmp(st, "paused")) {
		c->handoff_done = true;
		return 1;
	}
	c->error = g_strdup_printf("QEMU is '%s' after the device state, not running", st);
	return -EPROTO;
}

/* src: QEMU sends the device state by its own stream. */
static int handoff_send(void *opaque, uint16_t port)
{
	struct qemu_ctl *c = opaque;
	g_autofree char *uri = tcp_uri(c->stream_host, port);

	return call_str(c, "migrate", "uri", uri);
}

/* src: 1 once QEMU's migration completed. */
static int handoff_sent(void *opaque)
{
	struct qemu_ctl *c = opaque;
	g_autoptr(JsonNode) info = NULL;
	const char *st, *desc;
	int r = call(c, "query-migrate", NULL, &info);

	if (r < 0)
		return r;
	st = member_str(info, "status");
	if (st && !strcmp(st, "completed")) {
		c->handoff_done = true;
		return 1;
	}
	if (st && (!strcmp(st, "failed") || !strcmp(st, "cancelled"))) {
		desc = member_str(info, "error-desc");
		c->error = g_strdup_printf("QEMU's device-state migration %s: %s", st,
					   desc ? desc : "no reason given");
		return -EIO;
	}
	return 0;
}

/*
 * A guest that arrived by a migration still has the owner socket of that
 * one: QEMU closes it only when told.  Close it then, once; QEMU refuses
 * that while an owner's migration is under way, and the first error stands.
 */
static int owner_listen(struct qemu_ctl *c)
{
	g_autofree char *first = NULL;
	int r = call_str(c, "x-vrdma-owner-listen", "path", c->owner_path);

	if (r != -EREMOTEIO)
		return r;
	first = g_steal_pointer(&c->error);
	if (call(c, "x-vrdma-owner-close", NULL, NULL) == 0 &&
	    call_str(c, "x-vrdma-owner-listen", "path", c->owner_path) == 0)
		return 0;
	g_free(c->error);
	c->error = g_steal_pointer(&first);
	return r;
}

int qemu_ctl_open(struct qemu_ctl *c, const char *qmp_path, bool incoming,
		  const char *stream_host, uint16_t stream_port, const char *x509_dir,
		  const char *psk_file, const char *tls_hostname, int timeout_ms)
{
	g_autofree char *st = NULL;
	int r;

	memset(c, 0, sizeof(*c));
	c->qmp_path = qmp_path;
	c->incoming = incoming;
	c->stream_host = stream_host;
	c->stream_port = stream_port;
	c->handoff = (struct mig_handoff){ .listen = handoff_listen, .loaded = handoff_loaded,
					   .send = handoff_send, .sent = handoff_sent,
					   .opaque = c };
	r = qmp_connect(qmp_path, timeout_ms, &c->qmp, &c->error);
	if (r < 0)
		return r;
	r = query_status(c, &st);
	if (r < 0)
		return r;
	if (incoming && strcmp(st, "inmigrate")) {
		c->error = g_strdup_printf("QEMU is '%s', not waiting for an incoming migration: "
					   "start it with -incoming defer", st);
		return -EINVAL;
	}
	if (!incoming && strcmp(st, "running") && strcmp(st, "paused")) {
		c->error = g_strdup_printf("QEMU is '%s': it holds no guest to migrate", st);
		return -EINVAL;
	}
	c->guest_was_running = !strcmp(st, "running");
	r = make_dir(c);
	if (r == 0)
		r = set_ignore_shared(c);
	if (r == 0 && (x509_dir || psk_file))
		r = set_tls(c, x509_dir, psk_file, tls_hostname);
	if (r == 0)
		r = owner_listen(c);
	c->owner_listening = r == 0;
	return r;
}

/* src, failed: the guest runs again, unless the destination may run it. */
static int source_failed(struct qemu_ctl *c, enum mig_failure why, bool *ret_resumed)
{
	g_autofree char *st = NULL;
	int r = query_status(c, &st);

	if (r < 0)
		return r;
	/* Its owner resumed it, or QEMU did when its own migration failed. */
	if (!strcmp(st, "running") || !c->guest_was_running) {
		*ret_resumed = !strcmp(st, "running");
		return 0;
	}
	/*
	 * All the device state left and no word came back: the destination
	 * may be running the guest.  Running it here too would make two.
	 */
	if (c->handoff_done && why != MIG_FAIL_PEER_FRONTEND) {
		c->error = g_strdup("the device state reached the destination but its answer did "
				    "not come back: the guest may run there; look before you "
				    "'cont' it here");
		return -EAGAIN;
	}
	r = call(c, "cont", NULL, NULL);
	*ret_resumed = r == 0;
	return r;
}

int qemu_ctl_end(struct qemu_ctl *c, const struct mig_stats *st, bool *ret_resumed)
{
	bool ok = st->failure == MIG_FAIL_NONE;
	int r = 0;

	*ret_resumed = false;
	if (!c->qmp)
		return 0;
	if (!c->incoming && ok) {
		/* The guest runs on the destination now, as after virsh migrate.
		 * QEMU may hang up before it answers. */
		call(c, "quit", NULL, NULL);
		return 0;
	}
	if (!c->incoming) {
		r = source_failed(c, st->failure, ret_resumed);
	} else if (!ok && !c->handoff_done) {
		/* Never run a guest on what a failed migration left here. */
		call(c, "quit", NULL, NULL);
		return 0;
	}
	/* Tidy: a later migration listens again. */
	if (c->owner_listening) {
		g_autofree char *keep = g_steal_pointer(&c->error);

		call(c, "x-vrdma-owner-close", NULL, NULL);
		g_free(c->error);
		c->error = g_steal_pointer(&keep);
	}
	return r;
}

void qemu_ctl_close(struct qemu_ctl *c)
{
	qmp_close(c->qmp);
	c->qmp = NULL;
	if (c->dir) {
		g_autofree char *link = g_build_filename(c->dir, "keys.psk", NULL);

		g_unlink(link);
		if (c->owner_path)
			g_unlink(c->owner_path);
		g_rmdir(c->dir);
	}
	g_clear_pointer(&c->dir, g_free);
	g_clear_pointer(&c->owner_path, g_free);
	g_clear_pointer(&c->error, g_free);
}

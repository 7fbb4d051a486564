// SPDX-License-Identifier: MIT
/*
 * vrdma-migrate --qmp: the QMP steps around the engine (see qemu-ctl.h).
 * The rules QEMU enforces (no migrate-incoming before the RAM is complete,
 * the source resumes when its own migration fails) stay QEMU's; this file
 * issues the steps in their order, reads the outcome, and decides where
 * the guest may run: never in two places, and never on a host that may
 * hold half of it.
 */
#include "qemu-ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <gnutls/gnutls.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "qmp.h"
#include "util.h"

#define TLS_ID "vrdma-migrate-tls"
/* Root's private directories live here: root-owned, not sticky, so that
 * QEMU's user, owner of its own directory, cannot swap it under us. */
#define ROOT_RUN_DIR "/run/vrdma-migrate"
#define DH_PARAMS "dh-params.pem"

/* What a QEMU TLS server reads of an x509 directory besides DH_PARAMS. */
static const char *const x509_server_files[] = {
	"ca-cert.pem", "ca-crl.pem", "server-cert.pem", "server-key.pem", NULL
};

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

/* A command whose failure changes nothing: its error does not replace ours. */
static void call_quietly(struct qemu_ctl *c, const char *cmd, JsonNode *args)
{
	g_autofree char *keep = g_steal_pointer(&c->error);

	call(c, cmd, args, NULL);
	g_free(c->error);
	c->error = g_steal_pointer(&keep);
}

static int query_str(struct qemu_ctl *c, const char *cmd, const char *member, char **ret)
{
	g_autoptr(JsonNode) node = NULL;
	const char *v;
	int r = call(c, cmd, NULL, &node);

	if (r < 0)
		return r;
	v = qmp_member_str(node, member);
	if (!v) {
		c->error = g_strdup_printf("%s: no %s in QEMU's answer", cmd, member);
		return -EBADMSG;
	}
	*ret = g_strdup(v);
	return 0;
}

static int query_status(struct qemu_ctl *c, char **ret_status)
{
	return query_str(c, "query-status", "status", ret_status);
}

static JsonNode *ignore_shared_args(bool on)
{
	g_autoptr(JsonBuilder) b = json_builder_new();

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "capabilities");
	json_builder_begin_array(b);
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "capability");
	json_builder_add_string_value(b, "x-ignore-shared");
	json_builder_set_member_name(b, "state");
	json_builder_add_boolean_value(b, on);
	json_builder_end_object(b);
	json_builder_end_array(b);
	json_builder_end_object(b);
	return json_builder_get_root(b);
}

/*
 * The first identity of a PSK file, as the engine's own parser reads it
 * (IDENTITY:HEXKEY lines; blank lines and # comments skipped): QEMU's
 * username.  The key text is wiped before it is freed.
 */
static char *psk_identity(const char *file)
{
	char *text = NULL, *ident = NULL;
	gsize len = 0;

	if (!g_file_get_contents(file, &text, &len, NULL))
		return NULL;
	for (char *line = text; line && *line;) {
		char *nl = strchr(line, '\n'), *colon;

		if (nl)
			*nl = '\0';
		colon = strchr(line, ':');
		if (*line && *line != '#' && colon && colon > line) {
			ident = g_strndup(line, (gsize)(colon - line));
			break;
		}
		line = nl ? nl + 1 : NULL;
	}
	explicit_bzero(text, len);
	g_free(text);
	return ident;
}

/*
 * A QEMU TLS server needs Diffie-Hellman parameters, and with no
 * dh-params.pem in its directory it generates a 2048-bit group in
 * object-add: 0.2 s of CPU natively, many times that under emulation (a
 * prime search, so at random), with QMP silent meanwhile (object-add ran
 * past the engine's 10 s timeout in CI).  The RFC 7919 group
 * GnuTLS carries is what a generated one would be worth, and free.
 */
static int write_dh_params(struct qemu_ctl *c)
{
	gnutls_dh_params_t dh = NULL;
	gnutls_datum_t pem = { 0 };
	int fd, r = gnutls_dh_params_init(&dh);

	if (r == 0)
		r = gnutls_dh_params_import_raw(dh, &gnutls_ffdhe_2048_group_prime,
						&gnutls_ffdhe_2048_group_generator);
	if (r == 0)
		r = gnutls_dh_params_export2_pkcs3(dh, GNUTLS_X509_FMT_PEM, &pem);
	if (dh)
		gnutls_dh_params_deinit(dh);
	if (r < 0) {
		c->error = g_strdup_printf("Diffie-Hellman parameters for QEMU: %s",
					   gnutls_strerror(r));
		return -EIO;
	}
	fd = openat(c->dir_fd, DH_PARAMS, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    0644);
	/* Public parameters, for QEMU's user to read whatever our umask is. */
	r = fd < 0 ? -errno : fchmod(fd, 0644) < 0 ? -errno : write_all(fd, pem.data, pem.size);
	if (fd >= 0)
		close(fd);
	gnutls_free(pem.data);
	if (r < 0)
		c->error = g_strdup_printf("%s/" DH_PARAMS ": %s", c->dir, strerror(-r));
	return r;
}

/* NAME in the private directory, a link to PATH. */
static int link_in_dir(struct qemu_ctl *c, const char *path, const char *name)
{
	g_autofree char *abs = g_canonicalize_filename(path, NULL);
	int r = symlinkat(abs, c->dir_fd, name) < 0 ? -errno : 0;

	if (r < 0)
		c->error = g_strdup_printf("%s/%s: %s", c->dir, name, strerror(-r));
	return r;
}

/*
 * The directory QEMU's tls-creds object reads.  PSK: the private one, with
 * a keys.psk link (QEMU reads a directory, the engine a file).  x509: the
 * operator's own (the layouts are QEMU's); but a server's that lacks
 * dh-params.pem is linked file by file into the private one, beside ours.
 */
static int creds_dir(struct qemu_ctl *c, const char *x509_dir, const char *psk_file,
		     const char **ret_dir)
{
	g_autofree char *dh = NULL;
	int r;

	if (!x509_dir) {
		*ret_dir = c->dir;
		r = link_in_dir(c, psk_file, "keys.psk");
		return r < 0 || !c->incoming ? r : write_dh_params(c);
	}
	*ret_dir = x509_dir;
	dh = g_build_filename(x509_dir, DH_PARAMS, NULL);
	if (!c->incoming || access(dh, F_OK) == 0)
		return 0;
	for (const char *const *name = x509_server_files; *name; name++) {
		g_autofree char *file = g_build_filename(x509_dir, *name, NULL);

		/* Those missing stay missing: QEMU names them. */
		if (access(file, F_OK) == 0 && (r = link_in_dir(c, file, *name)) < 0)
			return r;
	}
	*ret_dir = c->dir;
	return write_dh_params(c);
}

/* QEMU's stream gets the engine's credentials, x509 or PSK. */
static int set_tls(struct qemu_ctl *c, const char *x509_option, const char *psk_file,
		   const char *hostname)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonBuilder) p = json_builder_new();
	/* QEMU resolves a relative path from its own working directory. */
	g_autofree char *x509_dir = x509_option ? g_canonicalize_filename(x509_option, NULL)
						: NULL;
	g_autofree char *user = NULL;
	const char *dir;
	int r = creds_dir(c, x509_dir, psk_file, &dir);

	if (r < 0)
		return r;
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "qom-type");
	json_builder_add_string_value(b, x509_dir ? "tls-creds-x509" : "tls-creds-psk");
	json_builder_set_member_name(b, "id");
	json_builder_add_string_value(b, TLS_ID);
	json_builder_set_member_name(b, "endpoint");
	json_builder_add_string_value(b, c->incoming ? "server" : "client");
	json_builder_set_member_name(b, "dir");
	json_builder_add_string_value(b, dir);
	if (x509_dir) {
		json_builder_set_member_name(b, "verify-peer");
		json_builder_add_boolean_value(b, TRUE);
	} else if (!c->incoming) {
		user = psk_identity(psk_file);
		if (!user) {
			c->error = g_strdup_printf("%s: no IDENTITY:HEXKEY line", psk_file);
			return -EBADMSG;
		}
		json_builder_set_member_name(b, "username");
		json_builder_add_string_value(b, user);
	}
	json_builder_end_object(b);
	/* Left over by an engine that was killed: replace it. */
	call_quietly(c, "object-del", args_str("id", TLS_ID));
	r = call(c, "object-add", json_builder_get_root(b), NULL);
	if (r < 0)
		return r;
	c->tls = true;
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

/* The migration settings a QEMU that keeps its guest had before us. */
static void restore_settings(struct qemu_ctl *c)
{
	call_quietly(c, "migrate-set-capabilities", ignore_shared_args(false));
	call_quietly(c, "migrate-set-parameters", args_str("tls-creds", ""));
	if (c->tls)
		call_quietly(c, "object-del", args_str("id", TLS_ID));
	c->tls = false;
}

/* The parent of our private directory; root's must be root's alone. */
static int private_parent(struct qemu_ctl *c)
{
	struct stat st;

	if (geteuid() != 0) {
		c->parent = g_strdup(g_get_tmp_dir());
		return 0;
	}
	if (mkdir(ROOT_RUN_DIR, 0711) < 0 && errno != EEXIST) {
		int r = -errno;

		c->error = g_strdup_printf("%s: %s", ROOT_RUN_DIR, strerror(-r));
		return r;
	}
	if (lstat(ROOT_RUN_DIR, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 022)) {
		c->error = g_strdup(ROOT_RUN_DIR ": not a directory that only root may change");
		return -EPERM;
	}
	c->parent = g_strdup(ROOT_RUN_DIR);
	return 0;
}

/*
 * The private directory for the owner socket.  QEMU creates the socket in
 * it, so it belongs to the user QEMU runs as (the QMP peer's): nobody else
 * can reach it.  We work in it through its fd only.
 */
static int make_dir(struct qemu_ctl *c)
{
	g_autofree char *tmpl = NULL;
	int r = private_parent(c);

	if (r < 0)
		return r;
	tmpl = g_build_filename(c->parent, "vrdma-migrate-XXXXXX", NULL);
	if (!mkdtemp(tmpl)) {
		r = -errno;
		c->error = g_strdup_printf("a private directory in %s: %s", c->parent, strerror(-r));
		return r;
	}
	c->dir = g_steal_pointer(&tmpl);
	c->dir_fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c->dir_fd < 0 ||
	    ((c->qemu_uid != geteuid() || c->qemu_gid != getegid()) &&
	     fchown(c->dir_fd, c->qemu_uid, c->qemu_gid) < 0)) {
		r = -errno;
		c->error = g_strdup_printf("%s: handing it to QEMU's user: %s", c->dir, strerror(-r));
		return r;
	}
	c->owner_path = g_build_filename(c->dir, "owner.sock", NULL);
	return 0;
}

/*
 * A guest that arrived by a migration still has the owner socket of that
 * one, idle: QEMU closes it only when told.  Close it then, but only an
 * idle one ("listening", or "complete" on a destination): an owner in
 * another engine's migration is left alone, and its error stands.
 */
static int owner_listen(struct qemu_ctl *c)
{
	g_autofree char *first = NULL, *state = NULL;
	int r = call_str(c, "x-vrdma-owner-listen", "path", c->owner_path);

	if (r != -EREMOTEIO)
		return r;
	first = g_steal_pointer(&c->error);
	if (query_str(c, "x-query-vrdma-owner", "state", &state) == 0 &&
	    (!strcmp(state, "listening") || !strcmp(state, "complete")) &&
	    call(c, "x-vrdma-owner-close", NULL, NULL) == 0 &&
	    call_str(c, "x-vrdma-owner-listen", "path", c->owner_path) == 0)
		return 0;
	g_free(c->error);
	c->error = g_steal_pointer(&first);
	return r;
}

/*
 * "tcp:HOST:PORT", with an IPv6 address in brackets.  No host: QEMU takes
 * the passive addresses getaddrinfo() gives, as the engine's own listener.
 */
static char *tcp_uri(const char *host, unsigned port)
{
	if (!host || !*host)
		return g_strdup_printf("tcp::%u", port);
	return strchr(host, ':') ? g_strdup_printf("tcp:[%s]:%u", host, port)
				 : g_strdup_printf("tcp:%s:%u", host, port);
}

/* dst: QEMU listens for the device state; the port it got. */
static int handoff_listen(void *opaque, uint16_t *ret_port)
{
	struct qemu_ctl *c = opaque;
	g_autofree char *uri = tcp_uri(c->stream_host, c->stream_port);
	g_autoptr(JsonNode) info = NULL;
	JsonNode *addrs = NULL;
	const char *port = NULL;
	guint64 v;
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
	if (JSON_NODE_HOLDS_OBJECT(info))
		addrs = json_object_get_member(json_node_get_object(info), "socket-address");
	if (addrs && JSON_NODE_HOLDS_ARRAY(addrs) &&
	    json_array_get_length(json_node_get_array(addrs)) > 0)
		port = qmp_member_str(json_array_get_element(json_node_get_array(addrs), 0),
				      "port");
	if (!port || !g_ascii_string_to_unsigned(port, 10, 1, UINT16_MAX, &v, NULL)) {
		c->error = g_strdup("query-migrate names no port QEMU listens on");
		return -EBADMSG;
	}
	*ret_port = (uint16_t)v;
	return 0;
}

static bool gone(int r)
{
	return r == -ECONNRESET || r == -EPIPE;
}

/*
 * dst: 1 once QEMU has loaded the device state: any state but inmigrate
 * (running, paused, postmigrate for a guest that was paused, or worse: the
 * guest is here either way).  A QEMU that exited never will (-ECONNRESET);
 * anything else unclear is "not yet", until the engine's time limit.
 */
static int handoff_loaded(void *opaque)
{
	struct qemu_ctl *c = opaque;
	g_autofree char *st = NULL;
	int r;

	if (c->loaded)
		return 1;
	r = query_status(c, &st);
	if (gone(r)) {
		g_free(c->error);
		c->error = g_strdup("QEMU exited while it loaded the device state (its log "
				    "says why)");
		return -ECONNRESET;
	}
	if (r < 0)
		return 0;
	c->loaded = strcmp(st, "inmigrate") != 0;
	return c->loaded;
}

/* dst: QEMU must never run the guest: quit, and see it gone. */
static int handoff_discard(void *opaque)
{
	struct qemu_ctl *c = opaque;
	int r;

	if (handoff_loaded(c) == 1)
		return -EBUSY; /* too late: the guest is here */
	r = call(c, "quit", NULL, NULL);
	if (r < 0 && !gone(r) && r != -ENOTCONN)
		return r;
	r = qmp_wait_closed(c->qmp, c->timeout_ms);
	return r == -ENOTCONN ? -EIO : r;
}

/*
 * src: QEMU sends the device state by its own stream, once it has taken
 * the engine's COMPLETED (then it is in postmigrate, waiting for that).
 */
static int handoff_send(void *opaque, uint16_t port)
{
	struct qemu_ctl *c = opaque;
	g_autofree char *uri = tcp_uri(c->stream_host, port);
	uint64_t deadline = monotonic_ns() + (uint64_t)c->timeout_ms * 1000000ull;
	int r;

	for (;;) {
		g_autofree char *st = NULL;

		r = query_status(c, &st);
		if (r < 0)
			return r;
		if (!strcmp(st, "postmigrate"))
			break;
		if (monotonic_ns() > deadline) {
			c->error = g_strdup_printf("QEMU is '%s', not waiting for the device-state "
						   "migration after the engine's RAM", st);
			return -ETIMEDOUT;
		}
		g_usleep(10000);
	}
	r = call_str(c, "migrate", "uri", uri);
	/* Even refused, it may have begun: settle it before any cont. */
	c->migrate_issued = true;
	return r;
}

/* The status of QEMU's own migration, and the bytes it sent so far. */
static int migration_status(struct qemu_ctl *c, char **ret_status, uint64_t *ret_bytes)
{
	g_autoptr(JsonNode) info = NULL;
	const char *st;
	JsonNode *ram = NULL, *t = NULL;
	int r = call(c, "query-migrate", NULL, &info);

	if (r < 0)
		return r;
	st = qmp_member_str(info, "status");
	if (JSON_NODE_HOLDS_OBJECT(info))
		ram = json_object_get_member(json_node_get_object(info), "ram");
	if (ram && JSON_NODE_HOLDS_OBJECT(ram))
		t = json_object_get_member(json_node_get_object(ram), "transferred");
	if (ret_bytes && t && JSON_NODE_HOLDS_VALUE(t) &&
	    json_node_get_value_type(t) == G_TYPE_INT64 && json_node_get_int(t) >= 0)
		*ret_bytes = (uint64_t)json_node_get_int(t);
	/* Before any migration, QEMU names no status. */
	*ret_status = g_strdup(st ? st : "none");
	return 0;
}

static bool terminal(const char *st)
{
	return !strcmp(st, "completed") || !strcmp(st, "failed") || !strcmp(st, "cancelled") ||
	       !strcmp(st, "none");
}

/* src: 1 once QEMU's migration completed. */
static int handoff_sent(void *opaque, uint64_t *ret_bytes)
{
	struct qemu_ctl *c = opaque;
	g_autofree char *st = NULL;
	int r = migration_status(c, &st, ret_bytes);

	if (r < 0)
		return r;
	if (!strcmp(st, "completed"))
		return 1;
	if (terminal(st)) {
		c->error = g_strdup_printf("QEMU's device-state migration is '%s'", st);
		return -EIO;
	}
	return 0;
}

int qemu_ctl_open(struct qemu_ctl *c, const char *qmp_path, bool incoming,
		  const char *stream_host, uint16_t stream_port, const char *x509_dir,
		  const char *psk_file, const char *tls_hostname, int timeout_ms)
{
	g_autofree char *st = NULL;
	struct ucred peer;
	int r;

	memset(c, 0, sizeof(*c));
	c->dir_fd = -1;
	c->qmp_path = qmp_path;
	c->incoming = incoming;
	c->stream_host = stream_host;
	c->stream_port = stream_port;
	c->timeout_ms = timeout_ms;
	c->handoff = (struct mig_handoff){ .listen = handoff_listen, .loaded = handoff_loaded,
					   .discard = handoff_discard, .send = handoff_send,
					   .sent = handoff_sent, .opaque = c };
	r = qmp_connect(qmp_path, timeout_ms, &c->qmp, &c->error);
	if (r < 0)
		return r;
	r = qmp_peer(c->qmp, &peer);
	if (r < 0) {
		c->error = g_strdup_printf("who QEMU runs as: %s", strerror(-r));
		return r;
	}
	c->qemu_uid = peer.uid;
	c->qemu_gid = peer.gid;
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
		r = call(c, "migrate-set-capabilities", ignore_shared_args(true), NULL);
	if (r == 0 && (x509_dir || psk_file))
		r = set_tls(c, x509_dir, psk_file, tls_hostname);
	else if (r == 0)
		r = call(c, "migrate-set-parameters", args_str("tls-creds", ""), NULL);
	if (r == 0)
		r = owner_listen(c);
	c->owner_listening = r == 0;
	return r;
}

/*
 * src: QEMU's own migration in a state that stays: cancelled unless it
 * completed.  Its final status, or NULL when it cannot be told.
 */
static char *settle_migration(struct qemu_ctl *c)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)c->timeout_ms * 1000000ull;
	bool cancelled = false;

	for (;;) {
		g_autofree char *st = NULL;

		if (migration_status(c, &st, NULL) < 0)
			return NULL;
		if (terminal(st))
			return g_steal_pointer(&st);
		if (!cancelled)
			call_quietly(c, "migrate_cancel", NULL);
		cancelled = true;
		if (monotonic_ns() > deadline)
			return NULL;
		g_usleep(20000);
	}
}

/* src, failed: the guest runs again, unless the destination may run it. */
static int source_failed(struct qemu_ctl *c, enum mig_failure why,
			 enum qemu_guest_place *ret_place)
{
	g_autofree char *mig = NULL, *st = NULL;
	int r;

	*ret_place = QEMU_GUEST_UNKNOWN;
	if (c->migrate_issued) {
		mig = settle_migration(c);
		if (!mig) {
			c->error = g_strdup("cannot tell whether QEMU's device-state migration "
					    "ended: the guest stays paused here and may run on the "
					    "destination; look before you 'cont' it here");
			return -EAGAIN;
		}
		/*
		 * All the device state left.  Only a destination that said its
		 * QEMU is gone (RESULT with an error) rules out a guest there.
		 */
		if (!strcmp(mig, "completed") && why != MIG_FAIL_PEER_FRONTEND) {
			c->error = g_strdup("the device state reached the destination but its "
					    "answer did not come back: the guest may run there; "
					    "look before you 'cont' it here");
			return -EAGAIN;
		}
	}
	r = query_status(c, &st);
	if (r < 0)
		return r;
	*ret_place = QEMU_GUEST_SOURCE;
	/* Its owner resumed it, or QEMU did when its own migration failed. */
	if (!strcmp(st, "running") || !c->guest_was_running)
		return 0;
	return call(c, "cont", NULL, NULL);
}

int qemu_ctl_end(struct qemu_ctl *c, const struct mig_stats *st,
		 enum qemu_guest_place *ret_place)
{
	bool ok = st->failure == MIG_FAIL_NONE;
	int r = 0;

	*ret_place = QEMU_GUEST_SOURCE;
	if (!c->qmp)
		return 0;
	if (ok) {
		*ret_place = QEMU_GUEST_DESTINATION;
		if (!c->incoming) {
			/* The guest runs on the destination now, as after virsh
			 * migrate.  QEMU may hang up before it answers. */
			call_quietly(c, "quit", NULL);
			return 0;
		}
	} else if (!c->incoming) {
		r = source_failed(c, st->failure, ret_place);
		if (r == -EAGAIN)
			return r; /* QEMU stays as it is, for the operator */
	} else if (handoff_loaded(c) == 1) {
		*ret_place = QEMU_GUEST_DESTINATION;
	} else {
		/* Never run a guest on what a failed migration left here. */
		handoff_discard(c);
		return 0;
	}
	/* The QEMU that keeps the guest: a later migration starts afresh. */
	restore_settings(c);
	if (c->owner_listening)
		call_quietly(c, "x-vrdma-owner-close", NULL);
	c->owner_listening = false;
	return r;
}

void qemu_ctl_close(struct qemu_ctl *c)
{
	qmp_close(c->qmp);
	c->qmp = NULL;
	/* A struct that never reached qemu_ctl_open() has no directory either. */
	if (c->dir && c->dir_fd >= 0) {
		g_autofree char *name = g_path_get_basename(c->dir);
		int parent = open(c->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		unlinkat(c->dir_fd, "owner.sock", 0);
		unlinkat(c->dir_fd, "keys.psk", 0);
		unlinkat(c->dir_fd, DH_PARAMS, 0);
		for (const char *const *file = x509_server_files; *file; file++)
			unlinkat(c->dir_fd, *file, 0);
		close(c->dir_fd);
		if (parent >= 0) {
			unlinkat(parent, name, AT_REMOVEDIR);
			close(parent);
		}
	} else if (c->dir) {
		rmdir(c->dir); /* made, but never opened: empty */
	}
	c->dir_fd = -1;
	g_clear_pointer(&c->parent, g_free);
	g_clear_pointer(&c->dir, g_free);
	g_clear_pointer(&c->owner_path, g_free);
	g_clear_pointer(&c->error, g_free);
}

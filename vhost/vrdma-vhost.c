// SPDX-License-Identifier: MIT
/*
 * vrdma-vhost: the vhost-user back-end daemon QEMU connects to.  It follows
 * QEMU's back-end program conventions (docs/interop/vhost-user.rst): no
 * daemonizing, --socket-path or --fd, --print-capabilities, a prompt clean
 * exit on SIGTERM.  A GLib main loop serves the control plane; every
 * connection is an independent device instance, and one connection's
 * failure never stops the others.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib-unix.h>
#include <glib.h>

#include "device.h"
#include "listen-fds.h"
#include "log.h"
#include "prom.h"
#include "sriov.h"
#include "util.h"
#include "vu.h"
#include "xport.h"

enum { EXIT_SETUP = 1, EXIT_USAGE = 2 };

struct daemon {
	GMainLoop *loop;
	const struct vhost_device_type *type;
	void *shared;
	int listen_fd;
	guint listen_watch;
	const char *socket_path;
	bool single_connection; /* --fd was a connected socket */
	GList *conns;
	unsigned int nconns;
	unsigned int max_conns;
	guint accept_retry; /* listening paused: out of fds */
	guint shared_watch; /* the device's own fd (host events), if it has one */
	unsigned int next_id;
	struct sriov_assignment function; /* the tenant's VF, when one was asked for */
	int lease_fd; /* held until exit: the pool does not release the VF under us */
	/* --metrics-file: counters since start, written every interval */
	const char *metrics_path;
	char *metrics_instance; /* the backend="..." label of every series */
	guint metrics_timer;
	bool metrics_warned; /* a failed write is logged once */
	uint64_t conns_total, conns_closed, refused_limit, refused_error;
	GHashTable *drops; /* errno -> connections dropped for it */
};

struct conn {
	struct daemon *d;
	unsigned int id;
	struct vu_dev *dev;
	void *instance;
	guint sock_watch;
	guint drop_idle; /* scheduled drop of a poisoned connection */
	GHashTable *watches; /* fd -> struct watch */
};

struct watch {
	struct conn *c;
	int fd;
	vu_watch_cb cb;
	void *data;
	guint source;
};

static void conn_free(struct conn *c);

static gboolean drop_poisoned(gpointer data)
{
	struct conn *c = data;

	log_warn("connection %u: dropped: the front end truncated memory it shares with us",
		 c->id);
	c->drop_idle = 0;
	conn_free(c);
	return G_SOURCE_REMOVE;
}

static gboolean watch_fired(gint fd, GIOCondition cond, gpointer data)
{
	struct watch *w = data;
	struct conn *c = w->c;

	(void)cond;
	w->cb(c->dev, fd, w->data);
	/* Freeing the connection here would free this very watch. */
	if (vu_dev_poisoned(c->dev) && !c->drop_idle)
		c->drop_idle = g_idle_add(drop_poisoned, c);
	return G_SOURCE_CONTINUE;
}

static void watch_destroy(gpointer data)
{
	struct watch *w = data;

	g_source_remove(w->source);
	g_free(w);
}

static void loop_add_watch(struct vu_dev *dev, int fd, vu_watch_cb cb, void *data)
{
	struct conn *c = vu_dev_loop_data(dev);
	struct watch *w = g_new0(struct watch, 1);

	w->c = c;
	w->fd = fd;
	w->cb = cb;
	w->data = data;
	w->source = g_unix_fd_add(fd, G_IO_IN, watch_fired, w);
	g_hash_table_replace(c->watches, GINT_TO_POINTER(fd), w);
}

static void loop_remove_watch(struct vu_dev *dev, int fd)
{
	struct conn *c = vu_dev_loop_data(dev);

	g_hash_table_remove(c->watches, GINT_TO_POINTER(fd));
}

static const struct vu_loop_ops loop_ops = {
	.add_watch = loop_add_watch,
	.remove_watch = loop_remove_watch,
};

static void conn_free(struct conn *c)
{
	struct daemon *d = c->d;

	if (c->sock_watch)
		g_source_remove(c->sock_watch);
	if (c->drop_idle)
		g_source_remove(c->drop_idle);
	vu_dev_free(c->dev);
	g_hash_table_destroy(c->watches);
	d->type->instance_free(c->instance);
	d->conns = g_list_remove(d->conns, c);
	d->nconns--;
	g_free(c);
	if (d->single_connection)
		g_main_loop_quit(d->loop);
}

static void count_drop(struct daemon *d, int err)
{
	gpointer key = GINT_TO_POINTER(err);

	g_hash_table_insert(d->drops, key,
			    GSIZE_TO_POINTER(GPOINTER_TO_SIZE(g_hash_table_lookup(d->drops, key)) + 1));
}

static gboolean conn_readable(gint fd, GIOCondition cond, gpointer data)
{
	struct conn *c = data;
	int ret;

	(void)fd, (void)cond;
	ret = vu_dev_dispatch(c->dev);
	if (ret == 0)
		return G_SOURCE_CONTINUE;
	if (ret == -ECONNRESET) {
		log_info("connection %u: closed by the front end", c->id);
		c->d->conns_closed++;
	} else {
		log_warn("connection %u: dropped: %s", c->id, strerror(-ret));
		count_drop(c->d, -ret);
	}
	c->sock_watch = 0; /* returning REMOVE destroys the source */
	conn_free(c);
	return G_SOURCE_REMOVE;
}

static int conn_new(struct daemon *d, int sock)
{
	struct vu_device_ops ops;
	struct conn *c;
	int ret;

	c = g_new0(struct conn, 1);
	c->d = d;
	c->id = ++d->next_id;
	c->watches = g_hash_table_new_full(NULL, NULL, NULL, watch_destroy);
	ret = d->type->instance_new(d->shared, &ops, &c->instance);
	if (ret < 0)
		goto err;
	ret = vu_dev_new(sock, &ops, c->instance, &loop_ops, c, &c->dev);
	if (ret < 0) {
		d->type->instance_free(c->instance);
		goto err;
	}
	c->sock_watch = g_unix_fd_add(sock, G_IO_IN | G_IO_HUP | G_IO_ERR, conn_readable, c);
	d->conns = g_list_prepend(d->conns, c);
	d->nconns++;
	d->conns_total++;
	log_info("connection %u: front end connected", c->id);
	return 0;
err:
	g_hash_table_destroy(c->watches);
	g_free(c);
	close(sock);
	return ret;
}

static gboolean listen_readable(gint fd, GIOCondition cond, gpointer data);

static gboolean resume_accepting(gpointer data)
{
	struct daemon *d = data;

	d->accept_retry = 0;
	d->listen_watch = g_unix_fd_add(d->listen_fd, G_IO_IN, listen_readable, d);
	return G_SOURCE_REMOVE;
}

/* "pid P uid U" of a UNIX socket's peer, for the log: who was refused. */
static char *peer_name(int sock)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return g_strdup("(peer unknown)");
	return g_strdup_printf("pid %d uid %u", (int)cred.pid, (unsigned int)cred.uid);
}

static gboolean listen_readable(gint fd, GIOCondition cond, gpointer data)
{
	struct daemon *d = data;
	int sock, ret;

	(void)cond;
	sock = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (sock < 0) {
		if (errno != EMFILE && errno != ENFILE && errno != ENOBUFS && errno != ENOMEM) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warn("accept: %s", strerror(errno));
			return G_SOURCE_CONTINUE;
		}
		/* The socket stays readable: do not spin on it, try again later. */
		log_warn("accept: %s; pausing for a second", strerror(errno));
		d->listen_watch = 0;
		d->accept_retry = g_timeout_add_seconds(1, resume_accepting, d);
		return G_SOURCE_REMOVE;
	}
	if (d->nconns >= d->max_conns) {
		g_autofree char *who = peer_name(sock);

		log_warn("refusing front end %s: already serving %u connections", who, d->nconns);
		d->refused_limit++;
		close(sock);
		return G_SOURCE_CONTINUE;
	}
	ret = conn_new(d, sock);
	if (ret < 0) {
		log_warn("cannot serve a new connection: %s", strerror(-ret));
		d->refused_error++;
	}
	return G_SOURCE_CONTINUE;
}

/* A stale socket file from a killed daemon is replaced; anything else is not. */
static int listen_on_path(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, ret;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	strcpy(addr.sun_path, path);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, 16) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

static int adopt_fd(struct daemon *d, int fd)
{
	int listening = 0;
	socklen_t len = sizeof(listening);

	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0)
		return -errno;
	if (!g_unix_set_fd_nonblocking(fd, TRUE, NULL))
		return -EINVAL;
	if (listening) {
		d->listen_fd = fd;
		return 0;
	}
	d->single_connection = true;
	return conn_new(d, fd);
}

static gboolean on_quit_signal(gpointer data)
{
	struct daemon *d = data;

	log_info("signal received, exiting");
	g_main_loop_quit(d->loop);
	return G_SOURCE_CONTINUE;
}

/* SIGHUP: the backing store may have changed size; tell every front end. */
static gboolean on_hangup(gpointer data)
{
	struct daemon *d = data;

	for (GList *l = d->conns; l; l = l->next) {
		struct conn *c = l->data;
		int ret = vu_dev_config_changed(c->dev);

		if (ret < 0 && ret != -EOPNOTSUPP)
			log_warn("connection %u: config change notice: %s", c->id, strerror(-ret));
	}
	return G_SOURCE_CONTINUE;
}

static const struct vhost_device_type *device_types[] = { &vhost_blk_type, &vhost_rng_type,
							   &vhost_rdma_type };

static const struct vhost_device_type *find_type(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(device_types); i++)
		if (strcmp(device_types[i]->name, name) == 0)
			return device_types[i];
	return NULL;
}

/* vhost-user.rst's --print-capabilities: {"type": ..., "features": [...]}. */
static void print_capabilities(const struct vhost_device_type *type)
{
	printf("{\n  \"type\": \"%s\",\n  \"features\": [",
	       type->vhost_user_type ? type->vhost_user_type : type->name);
	for (size_t i = 0; type->capabilities[i]; i++)
		printf("%s\n    \"%s\"", i ? "," : "", type->capabilities[i]);
	printf("\n  ]\n}\n");
}

struct options {
	gchar *device;
	gchar *socket_path;
	gint fd;
	gboolean print_capabilities;
	gchar *blk_file;
	gboolean read_only;
	gint num_queues;
	gint max_connections;
	gchar *entropy_file;
	gchar *tenant;
	gchar *vf;
	gchar *ibdev;
	gchar *sysfs_root;
	gchar *sriov_state;
	gint max_pds;
	gint max_mrs;
	gint max_cqs;
	gint max_qps;
	gint64 max_pinned_mib;
	gint64 max_wrs;
	gint64 max_maps;
	gchar **rdma_gids;
	gint rdma_poll_us;
	gboolean rdma_prefault;
	gint rdma_peer_port;
	gchar *rdma_peer_psk;
	gchar *metrics_file;
	gchar *metrics_instance;
	gint metrics_interval;
	gboolean verbose;
	gboolean version;
};

/* --rdma-peer-psk: the key file loads as the peer protocol will load it. */
static int check_psk_file(const char *path)
{
	struct xport_auth *auth = NULL;
	int r = xport_auth_new(&(struct xport_auth_cfg){ .server = true, .psk_file = path },
			       &auth, NULL);

	xport_auth_free(auth);
	if (r < 0)
		fprintf(stderr, "vrdma-vhost: --rdma-peer-psk %s: %s%s\n", path, strerror(-r),
			r == -EPERM ? " (the key file must be readable by its owner only)" :
			r == -EBADMSG ? " (want psktool's IDENTITY:HEXKEY lines)" : "");
	return r;
}

/*
 * The default --device.  A management tool launches the binary a vhost-user
 * descriptor names (/usr/share/qemu/vhost-user/, QEMU's
 * docs/interop/vhost-user.json) with the generic options only, so each
 * device type is installed under a name of its own, a link to this binary:
 * vrdma-vhost-TYPE.  Any other name serves blk.
 */
static gchar *device_by_program_name(const char *argv0)
{
	g_autofree gchar *name = g_path_get_basename(argv0);
	const char *prefix = "vrdma-vhost-";

	if (g_str_has_prefix(name, prefix) && find_type(name + strlen(prefix)))
		return g_strdup(name + strlen(prefix));
	return g_strdup("blk");
}

static int parse_options(int argc, char **argv, struct options *o)
{
	GOptionEntry entries[] = {
		{ "device", 0, 0, G_OPTION_ARG_STRING, &o->device, "device type: blk, rng or rdma (default: TYPE when run as vrdma-vhost-TYPE, else blk)", "TYPE" },
		{ "socket-path", 0, 0, G_OPTION_ARG_FILENAME, &o->socket_path, "listen on this UNIX socket", "PATH" },
		{ "fd", 0, 0, G_OPTION_ARG_INT, &o->fd, "serve this inherited socket (listening or connected)", "FD" },
		{ "print-capabilities", 0, 0, G_OPTION_ARG_NONE, &o->print_capabilities, "print capabilities as JSON and exit", NULL },
		{ "blk-file", 0, 0, G_OPTION_ARG_FILENAME, &o->blk_file, "blk: backing file or block device", "PATH" },
		{ "read-only", 0, 0, G_OPTION_ARG_NONE, &o->read_only, "blk: refuse writes", NULL },
		{ "num-queues", 0, 0, G_OPTION_ARG_INT, &o->num_queues, "blk: request queues, 1..8 (default 1)", "N" },
		{ "max-connections", 0, 0, G_OPTION_ARG_INT, &o->max_connections, "front ends served at once (default 64)", "N" },
		{ "entropy-file", 0, 0, G_OPTION_ARG_FILENAME, &o->entropy_file, "rng: source (default /dev/urandom; a regular file is served cyclically)", "PATH" },
		{ "tenant", 0, 0, G_OPTION_ARG_STRING, &o->tenant, "serve this tenant on its VF from the SR-IOV pool (takes a free one if it has none)", "T" },
		{ "vf", 0, 0, G_OPTION_ARG_STRING, &o->vf, "use this VF (PCI address); with --tenant it must be a pool function free or the tenant's own, without --tenant it must be outside the pool", "PCI" },
		{ "ibdev", 0, 0, G_OPTION_ARG_STRING, &o->ibdev, "use this RDMA device (same rules as --vf)", "NAME" },
		{ "sysfs-root", 0, 0, G_OPTION_ARG_FILENAME, &o->sysfs_root, "sysfs for the SR-IOV pool (default /sys)", "DIR" },
		{ "sriov-state", 0, 0, G_OPTION_ARG_FILENAME, &o->sriov_state, "SR-IOV pool state file (default " SRIOV_DEFAULT_STATE ")", "PATH" },
		{ "max-pds", 0, 0, G_OPTION_ARG_INT, &o->max_pds, "rdma: protection domains per tenant (default 1024)", "N" },
		{ "max-mrs", 0, 0, G_OPTION_ARG_INT, &o->max_mrs, "rdma: memory regions per tenant (default 65536)", "N" },
		{ "max-cqs", 0, 0, G_OPTION_ARG_INT, &o->max_cqs, "rdma: completion queues per tenant (default 4096)", "N" },
		{ "max-qps", 0, 0, G_OPTION_ARG_INT, &o->max_qps, "rdma: queue pairs per tenant (default 4096)", "N" },
		{ "max-pinned-mib", 0, 0, G_OPTION_ARG_INT64, &o->max_pinned_mib, "rdma: MiB of guest memory registered per tenant (default 16384)", "MIB" },
		{ "max-wrs", 0, 0, G_OPTION_ARG_INT64, &o->max_wrs, "rdma: work requests the tenant's QP rings may hold (default 4194304)", "N" },
		{ "max-maps", 0, 0, G_OPTION_ARG_INT64, &o->max_maps, "rdma: mappings of guest pages per tenant, one per run of contiguous pages in an MR or ring (default: 90 % of vm.max_map_count less 4096)", "N" },
		{ "rdma-gid", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->rdma_gids, "rdma: an address (IPv4 or IPv6) of the function whose RoCE v2 GID the tenant may send from; repeat for more, up to 16, in the order of the guest's GID table (default: the function's first IPv4 address)", "ADDR" },
		{ "rdma-poll-us", 0, 0, G_OPTION_ARG_INT, &o->rdma_poll_us, "rdma: after a send doorbell, keep polling its CQs and the doorbell queue until this long passes idle, 0..1000 (default 0: wait for interrupts and kicks)", "USEC" },
		{ "metrics-file", 0, 0, G_OPTION_ARG_FILENAME, &o->metrics_file, "write counters here in the Prometheus text format (node_exporter's textfile collector), replaced atomically", "PATH" },
		{ "metrics-interval", 0, 0, G_OPTION_ARG_INT, &o->metrics_interval, "seconds between metrics writes, 1..3600 (default 15)", "S" },
		{ "metrics-instance", 0, 0, G_OPTION_ARG_STRING, &o->metrics_instance, "the backend=\"NAME\" label every series carries, so several back ends' files share one textfile directory (default: the listening socket's path)", "NAME" },
		{ "rdma-prefault", 0, 0, G_OPTION_ARG_NONE, &o->rdma_prefault, "rdma: fill guest RAM's page tables when it is mapped, so registering MRs finds the pages in place (allocates all guest RAM)", NULL },
		{ "rdma-peer-port", 0, 0, G_OPTION_ARG_INT, &o->rdma_peer_port, "rdma: TCP port of the peer protocol, on each of the tenant's IPv4 GID addresses: connections to guests behind other vrdma back ends then survive either guest's live migration; the same port on every host (default 0: off, such connections fail at a migration)", "PORT" },
		{ "rdma-peer-psk", 0, 0, G_OPTION_ARG_FILENAME, &o->rdma_peer_psk, "rdma: the pre-shared key file (psktool's IDENTITY:HEXKEY lines) the peer protocol authenticates back ends with; required with --rdma-peer-port", "FILE" },
		{ "verbose", 'v', 0, G_OPTION_ARG_NONE, &o->verbose, "log more", NULL },
		{ "version", 0, 0, G_OPTION_ARG_NONE, &o->version, "print the version and exit", NULL },
		{ NULL },
	};
	g_autoptr(GOptionContext) ctx = g_option_context_new("- vhost-user back end for vrdma");
	g_autoptr(GError) err = NULL;

	o->fd = -1;
	o->num_queues = 1;
	o->max_connections = 64;
	o->max_pds = 1024;
	o->max_mrs = 65536;
	o->max_cqs = 4096;
	o->max_qps = 4096;
	o->max_pinned_mib = 16384;
	o->max_wrs = 4194304;
	o->max_maps = -1;
	o->metrics_interval = 15;
	g_option_context_add_main_entries(ctx, entries, NULL);
	g_option_context_set_description(ctx,
		"Socket activation: without --socket-path and --fd, a socket passed by\n"
		"systemd (LISTEN_PID/LISTEN_FDS, one socket) is served as --fd serves it.\n"
		"Exit status: 0 on SIGTERM/SIGINT or when an --fd connection ends,\n"
		"1 when the device or socket cannot be set up, 2 on bad usage.\n"
		"SIGHUP re-reads the blk backing size and notifies the front ends.\n");
	if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
		fprintf(stderr, "vrdma-vhost: %s (see --help)\n", err->message);
		return -EINVAL;
	}
	if (argc > 1) {
		fprintf(stderr, "vrdma-vhost: unexpected argument '%s'\n", argv[1]);
		return -EINVAL;
	}
	if (o->version) {
		printf("vrdma-vhost %s\n", VRDMA_VERSION);
		exit(EXIT_SUCCESS);
	}
	if (!o->device)
		o->device = device_by_program_name(argv[0]);
	return 0;
}

/*
 * Socket activation: with neither --socket-path nor --fd, a socket passed
 * by systemd (a .socket unit) is served as --fd would serve it, so a back
 * end restarted by systemd keeps the path QEMU reconnects to.
 */
static int take_activated_socket(struct options *o)
{
	int n;

	if (o->socket_path || o->fd >= 0 || o->print_capabilities)
		return 0;
	n = listen_fds_take();
	if (n < 0) {
		fprintf(stderr, "vrdma-vhost: malformed LISTEN_PID/LISTEN_FDS in the environment\n");
		return -EINVAL;
	}
	if (n > 1) {
		fprintf(stderr, "vrdma-vhost: socket activation passed %d sockets; "
			"the back end serves exactly one\n", n);
		return -EINVAL;
	}
	if (n == 1)
		o->fd = LISTEN_FDS_START;
	return 0;
}

static int check_usage(const struct options *o)
{
	if (o->print_capabilities)
		return 0;
	if (!!o->socket_path == (o->fd >= 0)) {
		fprintf(stderr, "vrdma-vhost: give exactly one of --socket-path and --fd "
			"(or start it socket-activated)\n");
		return -EINVAL;
	}
	if (o->vf && o->ibdev) {
		fprintf(stderr, "vrdma-vhost: give at most one of --vf and --ibdev\n");
		return -EINVAL;
	}
	if (o->num_queues < 1 || o->num_queues > 8) {
		fprintf(stderr, "vrdma-vhost: --num-queues must be 1..8\n");
		return -EINVAL;
	}
	if (o->max_connections < 1 || o->max_connections > 1024) {
		fprintf(stderr, "vrdma-vhost: --max-connections must be 1..1024\n");
		return -EINVAL;
	}
	if (o->max_pds < 0 || o->max_mrs < 0 || o->max_cqs < 0 || o->max_qps < 0 ||
	    o->max_pinned_mib < 0 || o->max_pinned_mib > (1ll << 24) || o->max_wrs < 0 ||
	    o->max_maps < -1 ||
	    o->rdma_poll_us < 0 || o->rdma_poll_us > 1000) {
		fprintf(stderr, "vrdma-vhost: the --max-* quotas must be >= 0 "
			"(--max-pinned-mib at most 16 TiB), --rdma-poll-us 0..1000\n");
		return -EINVAL;
	}
	if (o->rdma_peer_port < 0 || o->rdma_peer_port > 65535 ||
	    (o->rdma_peer_port && !o->rdma_peer_psk)) {
		fprintf(stderr, "vrdma-vhost: --rdma-peer-port must be 0..65535, "
			"and needs --rdma-peer-psk\n");
		return -EINVAL;
	}
	if (o->rdma_peer_psk && check_psk_file(o->rdma_peer_psk) < 0)
		return -EINVAL;
	if (o->metrics_interval < 1 || o->metrics_interval > 3600) {
		fprintf(stderr, "vrdma-vhost: --metrics-interval must be 1..3600\n");
		return -EINVAL;
	}
	if (o->metrics_instance && (!*o->metrics_instance ||
				    !g_utf8_validate(o->metrics_instance, -1, NULL))) {
		fprintf(stderr, "vrdma-vhost: invalid value '%s' for --metrics-instance "
			"(a non-empty UTF-8 name)\n", o->metrics_instance);
		return -EINVAL;
	}
	return 0;
}

static void log_pool_error(const struct options *o, const char *device, int ret)
{
	if (ret == -EPERM && o->tenant)
		log_error("%s belongs to another tenant", device);
	else if (ret == -EPERM)
		log_error("%s is in the SR-IOV pool: only its tenant may use it (give --tenant)",
			  device);
	else if (ret == -EXDEV)
		log_error("%s is not in the SR-IOV pool: a tenant gets only pool functions "
			  "(a VF, or 'vrdma-sriov pool add')", device);
	else if (ret == -EBUSY)
		log_error("%s waits to be scrubbed after its last tenant, or another back end "
			  "uses it", device);
	else if (ret == -EEXIST)
		log_error("tenant %s already holds another function", o->tenant);
	else if (ret == -ENOSPC)
		log_error("no free function in the SR-IOV pool for tenant %s", o->tenant);
	else
		log_error("%s: %s", device ? device : "SR-IOV pool", strerror(-ret));
}

/*
 * The tenant's RDMA function, from the SR-IOV pool: the device the guest's
 * resources will live on.  Another tenant's function is never accepted.  The
 * lease on it is held until exit, so that the pool refuses to release and
 * scrub it while this back end (and the guest's resources) still run.
 */
static int resolve_function(const struct options *o, struct sriov_assignment *ret_fn,
			    int *ret_lease_fd)
{
	const struct sriov_ctx ctx = {
		.sysfs_root = o->sysfs_root ? o->sysfs_root : "/sys",
		.state_path = o->sriov_state ? o->sriov_state : SRIOV_DEFAULT_STATE,
		.nl = &sriov_nl_kernel,
	};
	const char *device = o->vf ? o->vf : o->ibdev;
	int ret;

	if (device)
		ret = sriov_tenant_claim(&ctx, o->tenant, device, ret_fn);
	else
		ret = sriov_tenant_acquire(&ctx, o->tenant, NULL, ret_fn);
	if (ret < 0) {
		log_pool_error(o, device, ret);
		return ret;
	}
	ret = sriov_lease_take(&ctx, ret_fn, ret_lease_fd);
	if (ret == -EBUSY)
		log_error("function %s is already served by another running back end",
			  ret_fn->function);
	else if (ret == -ESTALE)
		log_error("function %s changed in the SR-IOV pool while starting (released?)",
			  ret_fn->function);
	else if (ret < 0)
		log_error("function %s: cannot take its lease: %s", ret_fn->function,
			  strerror(-ret));
	return ret;
}

static gboolean shared_readable(gint fd, GIOCondition cond, gpointer data)
{
	struct daemon *d = data;

	(void)fd, (void)cond;
	d->type->shared_ready(d->shared);
	return G_SOURCE_CONTINUE;
}

static gint by_errno(gconstpointer a, gconstpointer b)
{
	return GPOINTER_TO_INT(a) - GPOINTER_TO_INT(b);
}

static void metrics_render(const struct daemon *d, struct prom *out)
{
	g_autoptr(GList) errs = g_list_sort(g_hash_table_get_keys(d->drops), by_errno);

	prom_family(out, "vrdma_vhost_info", "gauge", "the device type this back end serves");
	prom_sample(out, "vrdma_vhost_info", "device", d->type->name, 1);
	prom_metric(out, "vrdma_vhost_connections", "gauge", "front ends connected now", d->nconns);
	prom_metric(out, "vrdma_vhost_connections_accepted_total", "counter",
		    "front ends accepted and served since start", (double)d->conns_total);
	prom_family(out, "vrdma_vhost_connections_refused_total", "counter",
		    "front ends refused on accept: over --max-connections, or no instance");
	prom_sample(out, "vrdma_vhost_connections_refused_total", "reason", "limit",
		    (double)d->refused_limit);
	prom_sample(out, "vrdma_vhost_connections_refused_total", "reason", "error",
		    (double)d->refused_error);
	prom_family(out, "vrdma_vhost_connections_ended_total", "counter",
		    "connections that ended: closed by the front end, or dropped for an error "
		    "(its errno name)");
	prom_sample(out, "vrdma_vhost_connections_ended_total", "reason", "closed",
		    (double)d->conns_closed);
	for (GList *l = errs; l; l = l->next) {
		int err = GPOINTER_TO_INT(l->data);
		const char *name = strerrorname_np(err);

		prom_sample(out, "vrdma_vhost_connections_ended_total", "reason",
			    name ? name : "unknown",
			    (double)GPOINTER_TO_SIZE(g_hash_table_lookup(d->drops, l->data)));
	}
	if (d->type->metrics && d->shared)
		d->type->metrics(d->shared, out);
	prom_process_cpu(out, "vrdma_vhost");
}

static void metrics_write(struct daemon *d)
{
	_cleanup_(prom_freep) struct prom *out = prom_new("backend", d->metrics_instance);
	int ret;

	metrics_render(d, out);
	ret = prom_write_file(d->metrics_path, out);
	if (ret < 0 && !d->metrics_warned)
		log_warn("cannot write metrics to %s: %s (said once)", d->metrics_path,
			 strerror(-ret));
	d->metrics_warned = d->metrics_warned || ret < 0;
}

static gboolean metrics_tick(gpointer data)
{
	metrics_write(data);
	return G_SOURCE_CONTINUE;
}

/*
 * The name in the backend="..." label when --metrics-instance gives none:
 * the path of the socket QEMU connects to, which no other back end on the
 * host can hold at the same time (socket activation and --fd included:
 * the socket's own address).  An unnamed socket (a socketpair) falls back
 * to the pid.
 */
static char *metrics_instance_default(const struct options *o)
{
	struct sockaddr_un sa = { 0 };
	socklen_t len = sizeof(sa);

	if (o->socket_path)
		return g_strdup(o->socket_path);
	if (o->fd >= 0 && getsockname(o->fd, (struct sockaddr *)&sa, &len) == 0 &&
	    sa.sun_family == AF_UNIX && len > offsetof(struct sockaddr_un, sun_path) &&
	    sa.sun_path[0])
		return g_strndup(sa.sun_path, MIN(len, sizeof(sa)) -
						  offsetof(struct sockaddr_un, sun_path));
	return g_strdup_printf("vrdma-vhost-%d", (int)getpid());
}

/*
 * The kernel's limit on a process's mappings, less what the daemon needs
 * for itself (libraries, guest RAM regions, logs, stacks): the default
 * mapping quota of the tenant's MRs and rings.  The package raises the
 * limit (sysctl.d), since a scattered MR needs a mapping per page.
 */
static uint64_t default_max_maps(void)
{
	g_autofree gchar *text = NULL;
	guint64 limit = 65530; /* the kernel's default */

	if (g_file_get_contents("/proc/sys/vm/max_map_count", &text, NULL, NULL))
		limit = g_ascii_strtoull(text, NULL, 10);
	return limit * 9 / 10 > 4096 ? limit * 9 / 10 - 4096 : 0;
}

/* --rdma-gid: each address as the 16 bytes of its RoCE v2 GID. */
static int parse_gids(char **addrs, uint8_t (*ret)[16], unsigned int *ret_n)
{
	unsigned int n = addrs ? g_strv_length(addrs) : 0;

	if (n > 16) {
		fprintf(stderr, "vrdma-vhost: at most 16 --rdma-gid addresses, not %u\n", n);
		return -EINVAL;
	}
	for (unsigned int i = 0; i < n; i++) {
		struct in_addr v4;

		memset(ret[i], 0, 16);
		if (inet_pton(AF_INET, addrs[i], &v4) == 1) {
			ret[i][10] = ret[i][11] = 0xff;
			memcpy(&ret[i][12], &v4, 4);
		} else if (inet_pton(AF_INET6, addrs[i], ret[i]) != 1) {
			fprintf(stderr, "vrdma-vhost: invalid address '%s' for --rdma-gid "
				"(an IPv4 or IPv6 address)\n", addrs[i]);
			return -EINVAL;
		}
	}
	*ret_n = n;
	return 0;
}

/* What a failure to open the rdma device says about --rdma-peer-port, if
 * it is its listener's (the key file was checked before); else "". */
static const char *peer_setup_error(const struct options *o, int ret)
{
	if (!o->rdma_peer_port)
		return "";
	switch (ret) {
	case -EADDRINUSE:
		return " (--rdma-peer-port: the port is taken on a GID address)";
	case -EADDRNOTAVAIL:
	case -EAFNOSUPPORT:
		return " (--rdma-peer-port: listens on the tenant's IPv4 GID addresses only)";
	default:
		return "";
	}
}

static int run(struct daemon *d, const struct options *o)
{
	uint8_t gids[16][16];
	unsigned int ngids = 0;
	struct vhost_device_args args = {
		.blk_file = o->blk_file,
		.read_only = o->read_only,
		.num_queues = (unsigned int)o->num_queues,
		.entropy_file = o->entropy_file,
		.rdma_quota = {
			.pds = (uint32_t)o->max_pds, .mrs = (uint32_t)o->max_mrs,
			.cqs = (uint32_t)o->max_cqs, .qps = (uint32_t)o->max_qps,
			.pinned_bytes = (uint64_t)o->max_pinned_mib << 20,
			.wrs = (uint64_t)o->max_wrs,
			.maps = o->max_maps >= 0 ? (uint64_t)o->max_maps : default_max_maps(),
		},
		.rdma_gids = (const uint8_t (*)[16])gids,
		.rdma_poll_us = (unsigned int)o->rdma_poll_us,
		.rdma_prefault = o->rdma_prefault,
		.rdma_peer_port = (uint16_t)o->rdma_peer_port,
		.rdma_peer_psk = o->rdma_peer_psk,
	};
	int ret;

	if (parse_gids(o->rdma_gids, gids, &ngids) < 0)
		return EXIT_USAGE;
	args.n_rdma_gids = ngids;
	if (o->tenant || o->vf || o->ibdev) {
		if (resolve_function(o, &d->function, &d->lease_fd) < 0)
			return EXIT_SETUP;
		log_info("tenant %s: function %s (rdma %s, %s)%s",
			 o->tenant ? o->tenant : "-", d->function.function,
			 d->function.ibdev[0] ? d->function.ibdev : "none",
			 d->function.uverbs[0] ? d->function.uverbs : "no uverbs",
			 d->function.new ? ", newly assigned" : "");
		if (d->function.ibdev[0])
			args.ibdev = d->function.ibdev;
	}
	if (d->type == &vhost_rdma_type && !args.ibdev) {
		log_error("the rdma device needs the tenant's RDMA function: give --tenant, "
			  "--vf or --ibdev");
		return EXIT_SETUP;
	}
	ret = d->type->open(&args, &d->shared);
	if (ret < 0) {
		log_error("%s device: %s%s", d->type->name, strerror(-ret),
			  ret == -EINVAL && !o->blk_file && d->type == &vhost_blk_type ?
				  " (--blk-file is required)" : peer_setup_error(o, ret));
		return EXIT_SETUP;
	}
	if (d->type->shared_fd && d->type->shared_fd(d->shared) >= 0)
		d->shared_watch = g_unix_fd_add(d->type->shared_fd(d->shared), G_IO_IN,
						shared_readable, d);
	if (o->socket_path) {
		ret = listen_on_path(o->socket_path);
		if (ret < 0) {
			log_error("cannot listen on %s: %s", o->socket_path, strerror(-ret));
			return EXIT_SETUP;
		}
		d->listen_fd = ret;
		d->socket_path = o->socket_path;
	} else {
		ret = adopt_fd(d, o->fd);
		if (ret < 0) {
			log_error("--fd %d: %s", o->fd, strerror(-ret));
			return EXIT_SETUP;
		}
	}
	if (d->listen_fd >= 0)
		d->listen_watch = g_unix_fd_add(d->listen_fd, G_IO_IN, listen_readable, d);
	log_info("%s device ready%s%s", d->type->name, d->socket_path ? " on " : "",
		 d->socket_path ? d->socket_path : "");
	if (o->metrics_file) {
		d->metrics_path = o->metrics_file;
		d->metrics_instance = o->metrics_instance ? g_strdup(o->metrics_instance)
							  : metrics_instance_default(o);
		metrics_write(d);
		d->metrics_timer = g_timeout_add_seconds((guint)o->metrics_interval, metrics_tick, d);
	}
	g_main_loop_run(d->loop);
	return 0;
}

static void daemon_cleanup(struct daemon *d)
{
	while (d->conns) {
		struct conn *c = d->conns->data;

		d->single_connection = false;
		conn_free(c);
	}
	/* The last figures, with every connection gone. */
	if (d->metrics_timer) {
		g_source_remove(d->metrics_timer);
		metrics_write(d);
	}
	if (d->listen_watch)
		g_source_remove(d->listen_watch);
	if (d->accept_retry)
		g_source_remove(d->accept_retry);
	if (d->listen_fd >= 0)
		close(d->listen_fd);
	if (d->socket_path)
		unlink(d->socket_path);
	if (d->shared_watch)
		g_source_remove(d->shared_watch);
	if (d->shared)
		d->type->close(d->shared);
	/* Last: the function is released only once nothing of ours uses it. */
	if (d->lease_fd >= 0)
		close(d->lease_fd);
	g_main_loop_unref(d->loop);
	g_hash_table_destroy(d->drops);
	g_free(d->metrics_instance);
}

static void options_clear(struct options *o)
{
	g_free(o->device);
	g_free(o->socket_path);
	g_free(o->blk_file);
	g_free(o->entropy_file);
	g_free(o->tenant);
	g_free(o->vf);
	g_free(o->ibdev);
	g_free(o->sysfs_root);
	g_free(o->sriov_state);
	g_free(o->metrics_file);
	g_free(o->rdma_peer_psk);
	g_free(o->metrics_instance);
	g_strfreev(o->rdma_gids);
}

int main(int argc, char **argv)
{
	_cleanup_(options_clear) struct options o = { 0 };
	struct daemon d = { .listen_fd = -1, .lease_fd = -1 };
	int rc;

	log_init("vrdma-vhost", LOG_LVL_INFO);
	signal(SIGPIPE, SIG_IGN);
	if (parse_options(argc, argv, &o) < 0 || take_activated_socket(&o) < 0 ||
	    check_usage(&o) < 0)
		return EXIT_USAGE;
	if (o.verbose)
		log_init("vrdma-vhost", LOG_LVL_DEBUG);
	d.type = find_type(o.device);
	if (!d.type) {
		fprintf(stderr, "vrdma-vhost: unknown --device '%s' (blk, rng, rdma)\n", o.device);
		return EXIT_USAGE;
	}
	if (o.print_capabilities) {
		print_capabilities(d.type);
		return 0;
	}
	d.max_conns = (unsigned int)o.max_connections;
	if (vu_guard_install() < 0) {
		log_error("cannot install the SIGBUS guard: %s", strerror(errno));
		return EXIT_SETUP;
	}
	d.loop = g_main_loop_new(NULL, FALSE);
	d.drops = g_hash_table_new(NULL, NULL);
	/* Before any setup: a SIGTERM during it must still mean a clean exit. */
	g_unix_signal_add(SIGTERM, on_quit_signal, &d);
	g_unix_signal_add(SIGINT, on_quit_signal, &d);
	g_unix_signal_add(SIGHUP, on_hangup, &d);
	rc = run(&d, &o);
	daemon_cleanup(&d);
	return rc;
}

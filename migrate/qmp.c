// SPDX-License-Identifier: MIT
/* A small QMP client: see qmp.h. */
#include "qmp.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util.h"

/* QEMU's answers here are small; a longer line is not one of them. */
#define QMP_MAX_LINE (64u << 10)
/* json-glib parses nesting by recursion, without a limit of its own. */
#define QMP_MAX_DEPTH 32

struct qmp {
	int fd;         /* -1 once the connection is of no more use */
	bool gone;      /* ... because QEMU closed it */
	int timeout_ms;
	uint64_t next_id;
	GString *in; /* bytes read, not yet a whole line */
};

static int say(char **ret_error, int err, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

static int say(char **ret_error, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	g_free(*ret_error);
	*ret_error = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	return err;
}

/* Waits until fd is ready for EVENTS, at most until deadline_ns. */
static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		uint64_t now = monotonic_ns();
		int r;

		if (now >= deadline_ns)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)((deadline_ns - now + 999999) / 1000000));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0)
			return 0;
	}
}

/* The next whole line, without its end; -ETIMEDOUT, -ECONNRESET (EOF). */
static int read_line(struct qmp *q, char **ret_line, uint64_t deadline_ns)
{
	for (;;) {
		char *nl = memchr(q->in->str, '\n', q->in->len);
		char buf[4096];
		ssize_t n;
		int r;

		if (nl && nl - q->in->str > (ptrdiff_t)QMP_MAX_LINE)
			return -EMSGSIZE; /* the caller drops the connection */
		if (nl) {
			*ret_line = g_strndup(q->in->str, (gsize)(nl - q->in->str));
			g_string_erase(q->in, 0, nl - q->in->str + 1);
			return 0;
		}
		if (q->in->len > QMP_MAX_LINE)
			return -EMSGSIZE; /* the caller drops the connection */
		r = wait_fd(q->fd, POLLIN, deadline_ns);
		if (r < 0)
			return r;
		n = read(q->fd, buf, sizeof(buf));
		if (n < 0 && errno == ECONNRESET)
			return -ECONNRESET;
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		if (n > 0)
			g_string_append_len(q->in, buf, n);
	}
}

/* Brackets nest no deeper than QMP_MAX_DEPTH, strings skipped. */
static bool depth_ok(const char *s)
{
	bool in_string = false;
	int depth = 0;

	for (; *s; s++) {
		if (in_string) {
			if (*s == '\\' && s[1])
				s++;
			else if (*s == '"')
				in_string = false;
		} else if (*s == '"') {
			in_string = true;
		} else if (*s == '{' || *s == '[') {
			if (++depth > QMP_MAX_DEPTH)
				return false;
		} else if (*s == '}' || *s == ']') {
			depth--;
		}
	}
	return true;
}

/* The next line that is a JSON object (in *ret_obj, a new reference). */
static int read_object(struct qmp *q, JsonNode **ret_node, uint64_t deadline_ns)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autofree char *line = NULL;
	JsonNode *root;
	int r = read_line(q, &line, deadline_ns);

	if (r < 0)
		return r;
	if (!depth_ok(line) || !json_parser_load_from_data(parser, line, -1, NULL))
		return -EBADMSG;
	root = json_parser_get_root(parser);
	if (!root || !JSON_NODE_HOLDS_OBJECT(root))
		return -EBADMSG;
	*ret_node = json_node_ref(root);
	return 0;
}

static int send_all(int fd, const char *s, size_t len, uint64_t deadline_ns)
{
	while (len) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		int r;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			r = wait_fd(fd, POLLOUT, deadline_ns);
			if (r < 0)
				return r;
			continue;
		}
		if (n < 0)
			return -errno;
		s += n;
		len -= (size_t)n;
	}
	return 0;
}

/* After an error that leaves the stream out of step, nothing more is read. */
static int drop(struct qmp *q, int r)
{
	if (r != -EREMOTEIO && q->fd >= 0) {
		close(q->fd);
		q->fd = -1;
		q->gone = r == -ECONNRESET || r == -EPIPE;
	}
	return r;
}

static const char *io_words(int r)
{
	switch (r) {
	case -ETIMEDOUT: return "QEMU did not answer in time";
	case -ECONNRESET: return "QEMU closed its QMP socket (it exited?)";
	case -EBADMSG: return "QEMU sent a line that is not a JSON object";
	case -EMSGSIZE: return "QEMU sent a line longer than 1 MiB";
	default: return strerror(-r);
	}
}

int qmp_call(struct qmp *q, const char *command, JsonNode *args, JsonNode **ret_return,
	     char **ret_error)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)q->timeout_ms * 1000000ull;
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonGenerator) gen = json_generator_new();
	g_autoptr(JsonNode) req = NULL;
	g_autofree char *text = NULL;
	uint64_t id = q->next_id++;
	int r;

	if (q->fd < 0 && q->gone)
		return say(ret_error, -ECONNRESET, "%s: %s", command, io_words(-ECONNRESET));
	if (q->fd < 0)
		return say(ret_error, -ENOTCONN, "%s: the QMP connection was dropped after an "
			   "earlier error", command);
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "execute");
	json_builder_add_string_value(b, command);
	if (args) {
		json_builder_set_member_name(b, "arguments");
		json_builder_add_value(b, json_node_copy(args));
	}
	json_builder_set_member_name(b, "id");
	json_builder_add_int_value(b, (gint64)id);
	json_builder_end_object(b);
	req = json_builder_get_root(b);
	json_generator_set_root(gen, req);
	text = json_generator_to_data(gen, NULL);
	r = send_all(q->fd, text, strlen(text), deadline);
	if (r == 0)
		r = send_all(q->fd, "\n", 1, deadline);
	if (r < 0)
		return drop(q, say(ret_error, r, "%s: %s", command, io_words(r)));
	for (;;) {
		g_autoptr(JsonNode) node = NULL;
		JsonObject *o;
		JsonNode *got_id;

		r = read_object(q, &node, deadline);
		if (r < 0)
			return drop(q, say(ret_error, r, "%s: %s", command, io_words(r)));
		o = json_node_get_object(node);
		if (json_object_has_member(o, "event"))
			continue;
		got_id = json_object_get_member(o, "id");
		if (!got_id || !JSON_NODE_HOLDS_VALUE(got_id) ||
		    json_node_get_value_type(got_id) != G_TYPE_INT64 ||
		    (uint64_t)json_node_get_int(got_id) != id)
			continue; /* an answer to nobody we know */
		if (json_object_has_member(o, "error")) {
			const char *desc = qmp_member_str(json_object_get_member(o, "error"), "desc");

			return say(ret_error, -EREMOTEIO, "%s: %s", command,
				   desc ? desc : "an error without a description");
		}
		if (!json_object_has_member(o, "return"))
			return drop(q, say(ret_error, -EBADMSG,
					   "%s: an answer without return or error", command));
		if (ret_return)
			*ret_return = json_node_copy(json_object_get_member(o, "return"));
		return 0;
	}
}

int qmp_connect(const char *path, int timeout_ms, struct qmp **ret_qmp, char **ret_error)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	g_autoptr(JsonNode) greeting = NULL;
	struct qmp *q;
	int r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return say(ret_error, -ENAMETOOLONG, "%s: path too long for a socket", path);
	memcpy(sa.sun_path, path, strlen(path));
	q = g_new0(struct qmp, 1);
	q->timeout_ms = timeout_ms;
	q->next_id = 1;
	q->in = g_string_new(NULL);
	/* A unix connect blocks while the listener's backlog is full. */
	q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	r = q->fd < 0 ? -errno : 0;
	if (r == 0 && connect(q->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		r = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT : -errno;
	if (r < 0) {
		qmp_close(q);
		return say(ret_error, r, "cannot connect to QMP socket %s: %s", path,
			   r == -ETIMEDOUT ? "QEMU accepts no more connections" : strerror(-r));
	}
	r = read_object(q, &greeting, monotonic_ns() + (uint64_t)timeout_ms * 1000000ull);
	if (r == 0 && !json_object_has_member(json_node_get_object(greeting), "QMP"))
		r = -EPROTO;
	if (r < 0) {
		qmp_close(q);
		return say(ret_error, r, "%s: no QMP greeting: %s", path,
			   r == -EPROTO ? "not a QMP socket"
			   : r == -ETIMEDOUT
				   ? "QEMU did not greet in time (another client may hold this "
				     "monitor: give the engine a QMP socket of its own)"
				   : io_words(r));
	}
	r = qmp_call(q, "qmp_capabilities", NULL, NULL, ret_error);
	if (r < 0) {
		qmp_close(q);
		return r;
	}
	*ret_qmp = q;
	return 0;
}

const char *qmp_member_str(JsonNode *node, const char *name)
{
	JsonNode *m;

	if (!node || !JSON_NODE_HOLDS_OBJECT(node))
		return NULL;
	m = json_object_get_member(json_node_get_object(node), name);
	if (!m || !JSON_NODE_HOLDS_VALUE(m) || json_node_get_value_type(m) != G_TYPE_STRING)
		return NULL;
	return json_node_get_string(m);
}

int qmp_peer(const struct qmp *q, struct ucred *ret_cred)
{
	socklen_t len = sizeof(*ret_cred);

	if (q->fd < 0)
		return -ENOTCONN;
	return getsockopt(q->fd, SOL_SOCKET, SO_PEERCRED, ret_cred, &len) < 0 ? -errno : 0;
}

int qmp_wait_closed(struct qmp *q, int timeout_ms)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000ull;
	char buf[4096];

	if (q->fd < 0)
		return q->gone ? 0 : -ENOTCONN;
	for (;;) {
		ssize_t n;
		int r = wait_fd(q->fd, POLLIN, deadline);

		if (r < 0)
			return r;
		n = read(q->fd, buf, sizeof(buf));
		if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE))) {
			drop(q, -ECONNRESET);
			return 0;
		}
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
	}
}

void qmp_close(struct qmp *q)
{
	if (!q)
		return;
	if (q->fd >= 0)
		close(q->fd);
	g_string_free(q->in, TRUE);
	g_free(q);
}

// SPDX-License-Identifier: MIT
/*
 * The pool's state file:
 *
 *   { "version": 1,
 *     "members": [ "rxe0" ],
 *     "functions": [ { "function": "0000:03:00.2", "state": "assigned",
 *                      "tenant": "alice", "since": 1767225600 } ] }
 *
 * Writers hold flock on <path>.lock for the whole read-modify-write and
 * replace the file by rename, so readers (and a writer after a crash) see
 * either the old or the new version, never half of one.  The file is
 * validated like sysfs: a corrupt file is an error, never "empty pool", since
 * treating it as empty would hand assigned VFs out again.
 *
 * The directory may be shared with less trusted users, so no path here is
 * followed through a symlink, every file is created 0600 and exclusively,
 * and nothing is read before it is known to be a small regular file.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sriov-internal.h"
#include "fileio.h"
#include "json-out.h"
#include "util.h"

#define STATE_VERSION 1
#define STATE_MAX_BYTES (4u << 20)
/* The format nests three deep (root, "functions", a record). */
#define STATE_MAX_DEPTH 8
#define TMP_SUFFIX ".tmp"

void (*sriov_state_before_rename)(const char *tmp_path);
unsigned sriov_state_lock_timeout_ms = 10000;

struct sriov_pool *sriov_pool_new(void)
{
	struct sriov_pool *p = g_new0(struct sriov_pool, 1);

	p->members = g_ptr_array_new_with_free_func(g_free);
	p->records = g_array_new(FALSE, TRUE, sizeof(struct sriov_record));
	return p;
}

void sriov_pool_free(struct sriov_pool *pool)
{
	if (!pool)
		return;
	g_ptr_array_unref(pool->members);
	g_array_unref(pool->records);
	g_free(pool);
}

struct sriov_record *sriov_pool_find_record(const struct sriov_pool *pool, const char *function)
{
	for (guint i = 0; i < pool->records->len; i++) {
		struct sriov_record *r = &g_array_index(pool->records, struct sriov_record, i);

		if (!strcmp(r->function, function))
			return r;
	}
	return NULL;
}

bool sriov_pool_is_member(const struct sriov_pool *pool, const char *function)
{
	for (guint i = 0; i < pool->members->len; i++)
		if (!strcmp(pool->members->pdata[i], function))
			return true;
	return false;
}

/* A function key is a lower-case PCI address or an RDMA device name.  An
 * upper-case address would name a function without matching its key, so a
 * dirty record could look free: it is malformed. */
bool sriov_function_key_valid(const char *s)
{
	char pci[SRIOV_PCI_LEN];

	if (!s)
		return false;
	if (sriov_pci_normalize(s, pci) == 0)
		return !strcmp(s, pci);
	return sriov_name_valid(s);
}

static const char *member_str(JsonObject *o, const char *name)
{
	JsonNode *n = json_object_get_member(o, name);

	if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
		return NULL;
	return json_node_get_string(n);
}

static int parse_record(JsonNode *node, struct sriov_record *ret)
{
	JsonObject *o = JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
	const char *fn, *state, *tenant;
	JsonNode *since;

	if (!o)
		return -EBADMSG;
	fn = member_str(o, "function");
	state = member_str(o, "state");
	tenant = member_str(o, "tenant");
	since = json_object_get_member(o, "since");
	if (!sriov_function_key_valid(fn) || !state || !sriov_tenant_valid(tenant) || !since ||
	    !JSON_NODE_HOLDS_VALUE(since) || json_node_get_value_type(since) != G_TYPE_INT64)
		return -EBADMSG;
	if (!strcmp(state, "assigned"))
		ret->state = SRIOV_POOL_ASSIGNED;
	else if (!strcmp(state, "dirty"))
		ret->state = SRIOV_POOL_DIRTY;
	else
		return -EBADMSG;
	snprintf(ret->function, sizeof(ret->function), "%s", fn);
	snprintf(ret->tenant, sizeof(ret->tenant), "%s", tenant);
	ret->since = json_node_get_int(since);
	return 0;
}

static int parse_members(JsonArray *a, struct sriov_pool *pool)
{
	for (guint i = 0; i < json_array_get_length(a); i++) {
		JsonNode *n = json_array_get_element(a, i);
		const char *s;

		if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
			return -EBADMSG;
		s = json_node_get_string(n);
		if (!sriov_function_key_valid(s) || sriov_pool_is_member(pool, s))
			return -EBADMSG;
		g_ptr_array_add(pool->members, g_strdup(s));
	}
	return 0;
}

static int parse_records(JsonArray *a, struct sriov_pool *pool)
{
	for (guint i = 0; i < json_array_get_length(a); i++) {
		struct sriov_record rec;

		if (parse_record(json_array_get_element(a, i), &rec) < 0)
			return -EBADMSG;
		/* One function, one owner: a duplicate means the file lies. */
		if (sriov_pool_find_record(pool, rec.function))
			return -EBADMSG;
		g_array_append_val(pool->records, rec);
	}
	return 0;
}

static JsonArray *member_array(JsonObject *o, const char *name)
{
	JsonNode *n = json_object_get_member(o, name);

	return n && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
}

/* json-glib's parser recurses once per level: bound the depth before it
 * sees the text, counting brackets outside strings. */
static bool nesting_ok(const char *text, size_t len)
{
	bool in_string = false;
	unsigned depth = 0;

	for (size_t i = 0; i < len; i++) {
		char c = text[i];

		if (in_string) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		} else if (c == '"') {
			in_string = true;
		} else if (c == '[' || c == '{') {
			if (++depth > STATE_MAX_DEPTH)
				return false;
		} else if ((c == ']' || c == '}') && depth) {
			depth--;
		}
	}
	return true;
}

int sriov_state_parse(const char *text, size_t len, struct sriov_pool **ret_pool)
{
	__attribute__((cleanup(sriov_pool_freep))) struct sriov_pool *pool = sriov_pool_new();
	g_autoptr(JsonParser) parser = json_parser_new();
	JsonObject *root;
	JsonNode *version;
	JsonArray *members, *records;

	if (len > STATE_MAX_BYTES || !nesting_ok(text, len) ||
	    !json_parser_load_from_data(parser, text, (gssize)len, NULL))
		return -EBADMSG;
	if (!json_parser_get_root(parser) || !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser)))
		return -EBADMSG;
	root = json_node_get_object(json_parser_get_root(parser));
	version = json_object_get_member(root, "version");
	if (!version || !JSON_NODE_HOLDS_VALUE(version) ||
	    json_node_get_value_type(version) != G_TYPE_INT64 ||
	    json_node_get_int(version) != STATE_VERSION)
		return -EBADMSG;
	members = member_array(root, "members");
	records = member_array(root, "functions");
	if (!members || !records || parse_members(members, pool) < 0 ||
	    parse_records(records, pool) < 0)
		return -EBADMSG;
	*ret_pool = g_steal_pointer(&pool);
	return 0;
}

static const char *state_name(enum sriov_pool_state s)
{
	return s == SRIOV_POOL_DIRTY ? "dirty" : "assigned";
}

char *sriov_state_format(const struct sriov_pool *pool)
{
	g_autoptr(JsonBuilder) b = json_builder_new();

	json_builder_begin_object(b);
	json_out_int(b, "version", STATE_VERSION);
	json_builder_set_member_name(b, "members");
	json_builder_begin_array(b);
	for (guint i = 0; i < pool->members->len; i++)
		json_builder_add_string_value(b, pool->members->pdata[i]);
	json_builder_end_array(b);
	json_builder_set_member_name(b, "functions");
	json_builder_begin_array(b);
	for (guint i = 0; i < pool->records->len; i++) {
		const struct sriov_record *r = &g_array_index(pool->records, struct sriov_record, i);

		json_builder_begin_object(b);
		json_out_str(b, "function", r->function);
		json_out_str(b, "state", state_name(r->state));
		json_out_str(b, "tenant", r->tenant);
		json_out_int(b, "since", r->since);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
	json_builder_end_object(b);
	return json_out_text(b, TRUE);
}

/* The whole file as a string, if it holds at most STATE_MAX_BYTES. */
static int read_capped(int fd, char **ret_text, size_t *ret_len)
{
	g_autofree char *buf = g_malloc(STATE_MAX_BYTES + 2);
	size_t len;
	int r = sriov_read_capped(fd, buf, STATE_MAX_BYTES, &len);

	if (r < 0)
		return r;
	buf[len] = '\0';
	*ret_text = g_steal_pointer(&buf);
	*ret_len = len;
	return 0;
}

int sriov_pool_load(const char *state_path, struct sriov_pool **ret_pool)
{
	/* O_NONBLOCK: opening a FIFO must not wait for a writer. */
	_cleanup_(closep) int fd =
		open(state_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	g_autofree char *text = NULL;
	struct stat st;
	size_t len = 0;
	int r;

	if (fd < 0) {
		/* No file yet: nothing was ever assigned. */
		if (errno == ENOENT) {
			*ret_pool = sriov_pool_new();
			return 0;
		}
		return -errno;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADMSG;
	r = read_capped(fd, &text, &len);
	if (r < 0)
		return r;
	return sriov_state_parse(text, len, ret_pool);
}

/* Temp files a crashed writer left behind; the caller holds the lock, so
 * no live writer owns one. */
static void remove_stale_temps(const char *path)
{
	g_autofree char *dir = g_path_get_dirname(path);
	g_autofree char *base = g_path_get_basename(path);
	g_autofree char *prefix = g_strconcat(base, TMP_SUFFIX, NULL);
	g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
	const char *name;

	while (d && (name = g_dir_read_name(d))) {
		if (strlen(name) == strlen(prefix) + 6 && g_str_has_prefix(name, prefix)) {
			g_autofree char *p = g_build_filename(dir, name, NULL);

			unlink(p);
		}
	}
}

int sriov_state_save(const char *path, const struct sriov_pool *pool)
{
	g_autofree char *text = sriov_state_format(pool);
	/* A fresh, exclusive name (mkostemp: O_EXCL, 0600): a symlink planted
	 * in the directory is never followed. */
	g_autofree char *tmp = g_strconcat(path, TMP_SUFFIX "XXXXXX", NULL);
	_cleanup_(closep) int fd = -1;
	int r;

	remove_stale_temps(path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = write_all(fd, text, strlen(text));
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && sriov_state_before_rename)
		sriov_state_before_rename(tmp);
	/* rename() replaces a symlink at @path, it does not follow it. */
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	/* The new state is in place: a failed directory fsync only weakens
	 * durability across a power cut, it does not undo the change. */
	(void)fsync_dir_of(path);
	return 0;
}

/* Opens (creating it 0600) a file that must be ours: a regular file, not a
 * symlink, not readable or writable by others. */
int sriov_open_private(const char *path, int flags)
{
	_cleanup_(closep) int fd =
		open(path, flags | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADMSG;
	/* An older version created it 0644: anyone could flock it. */
	if ((st.st_mode & 077) && fchmod(fd, st.st_mode & 0700) < 0)
		return -errno;
	return steal_fd(&fd);
}

int sriov_state_dir_create(const char *path)
{
	g_autofree char *dir = g_path_get_dirname(path);

	return g_mkdir_with_parents(dir, 0755) < 0 ? -errno : 0;
}

int sriov_state_lock(const char *path)
{
	g_autofree char *lock = g_strconcat(path, ".lock", NULL);
	_cleanup_(closep) int fd = -1;
	uint64_t deadline = monotonic_ns() + sriov_state_lock_timeout_ms * 1000000ull;
	int r = sriov_state_dir_create(path);

	if (r < 0)
		return r;
	fd = sriov_open_private(lock, O_RDWR);
	if (fd < 0)
		return fd;
	/* Never wait forever: whoever holds it may be stuck (or hostile). */
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (monotonic_ns() >= deadline)
			return -ETIMEDOUT;
		g_usleep(1000 + (gulong)g_random_int_range(0, 9000));
	}
	return steal_fd(&fd);
}

// SPDX-License-Identifier: MIT
/*
 * migrate/qmp.c against a QEMU that misbehaves: a fake QMP server (a
 * thread on a unix socket) plays a script of lines, "@ID@" standing for the
 * id of the command it read last.  Each hostile case fails for its own
 * cause: the line bound, the nesting bound, the id match, EOF, silence.
 * Then migrate/qemu-ctl.c's TLS set-up, from the commands the fake read.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>
#include <gnutls/gnutls.h>

#include "qemu-ctl.h"
#include "qmp.h"

#define GREETING "{\"QMP\": {\"version\": {}, \"capabilities\": []}}"
#define CAPS_OK "{\"return\": {}, \"id\": @ID@}"

struct fake {
	char dir[64];
	char path[128];
	int listen_fd;
	pthread_t thread;
	const char *const *script; /* "<" reads a command line, else a line to send */
	bool close_at_end;          /* else: stay silent until the client leaves */
	GPtrArray *commands;        /* the lines it read, parsed */
};

static void send_line(int fd, const char *line, const char *id)
{
	g_autoptr(GString) out = g_string_new(line);

	g_string_replace(out, "@ID@", id, 0);
	g_string_append_c(out, '\n');
	assert_int_equal(send(fd, out->str, out->len, MSG_NOSIGNAL), (ssize_t)out->len);
}

/* The id of one command line read from fd ("0" if none); keeps the line. */
static char *read_command(struct fake *f, int fd)
{
	g_autoptr(GString) line = g_string_new(NULL);
	JsonNode *parsed, *id = NULL;
	char c;

	while (read(fd, &c, 1) == 1 && c != '\n')
		g_string_append_c(line, c);
	parsed = json_from_string(line->str, NULL);
	if (!parsed)
		return g_strdup("0");
	g_ptr_array_add(f->commands, parsed);
	if (JSON_NODE_HOLDS_OBJECT(parsed))
		id = json_object_get_member(json_node_get_object(parsed), "id");
	return id && JSON_NODE_HOLDS_VALUE(id) ? g_strdup_printf("%" G_GINT64_FORMAT,
								json_node_get_int(id))
					       : g_strdup("0");
}

static void *serve(void *opaque)
{
	struct fake *f = opaque;
	g_autofree char *id = g_strdup("0");
	int fd = accept(f->listen_fd, NULL, NULL);
	char c;

	if (fd < 0)
		return NULL;
	for (const char *const *s = f->script; *s; s++) {
		if (!strcmp(*s, "<")) {
			g_free(id);
			id = read_command(f, fd);
		} else {
			send_line(fd, *s, id);
		}
	}
	while (!f->close_at_end && read(fd, &c, 1) > 0)
		;
	close(fd);
	return NULL;
}

static void fake_start(struct fake *f, const char *const *script, bool close_at_end)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	memset(f, 0, sizeof(*f));
	strcpy(f->dir, "/tmp/test-qmp-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/qmp.sock", f->dir);
	strcpy(sa.sun_path, f->path);
	f->script = script;
	f->close_at_end = close_at_end;
	f->commands = g_ptr_array_new_with_free_func((GDestroyNotify)json_node_unref);
	f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(f->listen_fd >= 0);
	assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f->listen_fd, 1), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, serve, f), 0);
}

static void fake_stop(struct fake *f)
{
	pthread_join(f->thread, NULL);
	close(f->listen_fd);
	unlink(f->path);
	rmdir(f->dir);
	g_ptr_array_unref(f->commands);
}

/* The arguments of the first command EXECUTE the fake read. */
static JsonObject *command_args(struct fake *f, const char *execute)
{
	for (guint i = 0; i < f->commands->len; i++) {
		JsonNode *cmd = g_ptr_array_index(f->commands, i);
		JsonObject *o = json_node_get_object(cmd);

		if (!g_strcmp0(qmp_member_str(cmd, "execute"), execute))
			return json_object_get_object_member(o, "arguments");
	}
	return NULL;
}

/* Connects through greeting and capabilities, then runs COMMAND once. */
static int run_one(const char *const *script, bool close_at_end, int timeout_ms,
		   JsonNode **ret, char **ret_error)
{
	struct fake f;
	struct qmp *q = NULL;
	int r;

	fake_start(&f, script, close_at_end);
	r = qmp_connect(f.path, timeout_ms, &q, ret_error);
	assert_int_equal(r, 0);
	r = qmp_call(q, "query-status", NULL, ret, ret_error);
	qmp_close(q);
	fake_stop(&f);
	return r;
}

static void test_answer_after_events_and_strangers(void **state)
{
	static const char *const script[] = {
		GREETING, "<", CAPS_OK, "<",
		"{\"event\": \"STOP\", \"timestamp\": {}}",
		"{\"return\": {\"status\": \"paused\"}, \"id\": 999}",
		"{\"return\": {\"status\": \"paused\"}, \"id\": \"@ID@\"}",
		"{\"return\": {\"status\": \"running\", \"running\": true}, \"id\": @ID@}",
		NULL,
	};
	g_autoptr(JsonNode) ret = NULL;
	g_autofree char *err = NULL;
	(void)state;

	assert_int_equal(run_one(script, true, 2000, &ret, &err), 0);
	/* Not the event, not another id, not a string id: the answer. */
	assert_string_equal(qmp_member_str(ret, "status"), "running");
	/* A member that is not a string is no string. */
	assert_null(qmp_member_str(ret, "running"));
	assert_null(qmp_member_str(ret, "nothing"));
}

static void test_error_keeps_the_connection(void **state)
{
	static const char *const script[] = {
		GREETING, "<", CAPS_OK, "<",
		"{\"error\": {\"class\": \"GenericError\", \"desc\": \"no such thing\"}, "
		"\"id\": @ID@}",
		"<", "{\"return\": {\"status\": \"running\"}, \"id\": @ID@}", NULL,
	};
	g_autoptr(JsonNode) ret = NULL;
	g_autofree char *err = NULL;
	struct qmp *q = NULL;
	struct fake f;
	(void)state;

	fake_start(&f, script, false);
	assert_int_equal(qmp_connect(f.path, 2000, &q, &err), 0);
	assert_int_equal(qmp_call(q, "query-status", NULL, NULL, &err), -EREMOTEIO);
	assert_non_null(strstr(err, "no such thing"));
	assert_int_equal(qmp_call(q, "query-status", NULL, &ret, &err), 0);
	assert_string_equal(qmp_member_str(ret, "status"), "running");
	qmp_close(q);
	fake_stop(&f);
}

static void test_line_too_long_drops_the_connection(void **state)
{
	g_autofree char *big = NULL;
	g_autofree char *err = NULL;
	const char *script[] = { GREETING, "<", CAPS_OK, "<", NULL, NULL };
	struct qmp *q = NULL;
	struct fake f;
	(void)state;

	/* 65 KiB inside one string: valid JSON, one line, over the bound. */
	big = g_strdup_printf("{\"return\": {\"status\": \"%0*d\"}, \"id\": @ID@}", 65 << 10, 0);
	script[4] = big;
	fake_start(&f, script, false);
	assert_int_equal(qmp_connect(f.path, 2000, &q, &err), 0);
	assert_int_equal(qmp_call(q, "query-status", NULL, NULL, &err), -EMSGSIZE);
	/* Out of step from here: nothing more is read. */
	assert_int_equal(qmp_call(q, "query-status", NULL, NULL, &err), -ENOTCONN);
	qmp_close(q);
	fake_stop(&f);
}

static void test_deep_nesting_refused(void **state)
{
	g_autofree char *deep = NULL, *err = NULL;
	g_autoptr(GString) s = g_string_new("{\"return\": ");
	const char *script[] = { GREETING, "<", CAPS_OK, "<", NULL, NULL };
	(void)state;

	for (int i = 0; i < 40; i++)
		g_string_append_c(s, '[');
	for (int i = 0; i < 40; i++)
		g_string_append_c(s, ']');
	g_string_append(s, ", \"id\": @ID@}");
	deep = g_string_free(g_steal_pointer(&s), FALSE);
	script[4] = deep;
	assert_int_equal(run_one(script, false, 2000, NULL, &err), -EBADMSG);
}

static void test_brackets_in_strings_are_text(void **state)
{
	static const char *const script[] = {
		GREETING, "<", CAPS_OK, "<",
		"{\"return\": {\"status\": \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\\"\"}, "
		"\"id\": @ID@}",
		NULL,
	};
	g_autoptr(JsonNode) ret = NULL;
	g_autofree char *err = NULL;
	(void)state;

	assert_int_equal(run_one(script, false, 2000, &ret, &err), 0);
	assert_non_null(qmp_member_str(ret, "status"));
}

static void test_qemu_exits_mid_call(void **state)
{
	static const char *const script[] = { GREETING, "<", CAPS_OK, "<", NULL };
	g_autofree char *err = NULL;
	struct qmp *q = NULL;
	struct fake f;
	(void)state;

	fake_start(&f, script, true);
	assert_int_equal(qmp_connect(f.path, 2000, &q, &err), 0);
	assert_int_equal(qmp_call(q, "quit", NULL, NULL, &err), -ECONNRESET);
	/* Gone is gone: later calls say so, and waiting for the close is over. */
	assert_int_equal(qmp_call(q, "quit", NULL, NULL, &err), -ECONNRESET);
	assert_int_equal(qmp_wait_closed(q, 100), 0);
	qmp_close(q);
	fake_stop(&f);
}

static void test_silence_times_out(void **state)
{
	static const char *const script[] = { GREETING, "<", CAPS_OK, "<", NULL };
	g_autofree char *err = NULL;
	(void)state;

	assert_int_equal(run_one(script, false, 200, NULL, &err), -ETIMEDOUT);
}

static void test_not_a_qmp_socket(void **state)
{
	static const char *const script[] = { "{\"hello\": 1}", NULL };
	g_autofree char *err = NULL;
	struct qmp *q = NULL;
	struct fake f;
	(void)state;

	fake_start(&f, script, true);
	assert_int_equal(qmp_connect(f.path, 2000, &q, &err), -EPROTO);
	assert_non_null(strstr(err, "not a QMP socket"));
	fake_stop(&f);
	assert_int_equal(qmp_connect("/nonexistent/qmp.sock", 200, &q, &err), -ENOENT);
}

/* What a destination engine's qemu_ctl_open() asks of a QEMU that says yes. */
static const char *const incoming_script[] = {
	GREETING, "<", CAPS_OK,
	"<", "{\"return\": {\"status\": \"inmigrate\", \"running\": false}, \"id\": @ID@}",
	"<", CAPS_OK, /* migrate-set-capabilities */
	"<", CAPS_OK, /* object-del, of a left-over */
	"<", CAPS_OK, /* object-add */
	"<", CAPS_OK, /* migrate-set-parameters */
	"<", CAPS_OK, /* x-vrdma-owner-listen */
	NULL,
};

/* DIR/dh-params.pem: a PKCS#3 group GnuTLS loads, of 2048 bits at least. */
static void assert_dh_params(const char *dir)
{
	g_autofree char *path = g_build_filename(dir, "dh-params.pem", NULL);
	g_autofree char *text = NULL;
	gnutls_datum_t pem, prime = { 0 }, gen = { 0 };
	gnutls_dh_params_t dh;
	unsigned bits = 0;
	gsize len;

	assert_true(g_file_get_contents(path, &text, &len, NULL));
	pem = (gnutls_datum_t){ (unsigned char *)text, (unsigned)len };
	assert_int_equal(gnutls_dh_params_init(&dh), 0);
	assert_int_equal(gnutls_dh_params_import_pkcs3(dh, &pem, GNUTLS_X509_FMT_PEM), 0);
	assert_int_equal(gnutls_dh_params_export_raw(dh, &prime, &gen, &bits), 0);
	assert_true(prime.size * 8 >= 2048);
	gnutls_free(prime.data);
	gnutls_free(gen.data);
	gnutls_dh_params_deinit(dh);
}

/*
 * A TLS server QEMU without dh-params.pem generates a group, and its QMP
 * is silent for seconds (under emulation, past the engine's timeout):
 * the PSK directory the engine hands QEMU carries one.
 */
static void test_psk_server_gets_dh_params(void **state)
{
	g_autofree char *tmp = g_dir_make_tmp("test-qmp-XXXXXX", NULL);
	g_autofree char *keys = NULL, *dir = NULL, *dh = NULL;
	struct qemu_ctl c;
	JsonObject *args;
	struct stat st;
	struct fake f;
	mode_t umask_was;
	(void)state;

	assert_non_null(tmp);
	keys = g_build_filename(tmp, "keys.psk", NULL);
	assert_true(g_file_set_contents(keys, "vrdma:00112233445566778899aabbccddeeff\n", -1,
					NULL));
	fake_start(&f, incoming_script, false);
	/* An operator's hardened umask must not hide the group from QEMU's user. */
	umask_was = umask(077);
	if (qemu_ctl_open(&c, f.path, true, "", 0, NULL, keys, NULL, 2000) < 0)
		fail_msg("%s", c.error);
	umask(umask_was);
	args = command_args(&f, "object-add");
	assert_non_null(args);
	assert_string_equal(json_object_get_string_member(args, "qom-type"), "tls-creds-psk");
	assert_string_equal(json_object_get_string_member(args, "endpoint"), "server");
	dir = g_strdup(json_object_get_string_member(args, "dir"));
	assert_string_equal(dir, c.dir);
	assert_dh_params(dir);
	dh = g_build_filename(dir, "dh-params.pem", NULL);
	assert_int_equal(stat(dh, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	qemu_ctl_close(&c);
	fake_stop(&f);
	/* Nothing of it stays behind. */
	assert_false(g_file_test(dir, G_FILE_TEST_EXISTS));
	unlink(keys);
	rmdir(tmp);
}

/*
 * x509: the operator's directory as it is when it has dh-params.pem; else
 * its server files linked beside a group of the engine's.
 */
static void test_x509_server_dir_without_dh_params(void **state)
{
	static const char *const files[] = { "ca-cert.pem", "server-cert.pem",
					     "server-key.pem" };
	g_autofree char *dh = NULL, *cwd = NULL;
	char x509[] = "/tmp/test-qmp-x509-XXXXXX";
	const char *dir;
	struct qemu_ctl c;
	struct fake f;
	(void)state;

	assert_non_null(mkdtemp(x509));
	for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
		g_autofree char *path = g_build_filename(x509, files[i], NULL);

		assert_true(g_file_set_contents(path, files[i], -1, NULL));
	}
	fake_start(&f, incoming_script, false);
	assert_int_equal(qemu_ctl_open(&c, f.path, true, "", 0, x509, NULL, NULL, 2000), 0);
	dir = json_object_get_string_member(command_args(&f, "object-add"), "dir");
	assert_string_equal(dir, c.dir);
	assert_dh_params(dir);
	for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
		g_autofree char *path = g_build_filename(dir, files[i], NULL);
		g_autofree char *text = NULL;

		assert_true(g_file_get_contents(path, &text, NULL, NULL));
		assert_string_equal(text, files[i]);
	}
	qemu_ctl_close(&c);
	fake_stop(&f);

	/* With its own group, the operator's directory is QEMU's, named whole
	 * (QEMU would resolve a relative one from its own directory). */
	dh = g_build_filename(x509, "dh-params.pem", NULL);
	assert_true(g_file_set_contents(dh, "theirs", -1, NULL));
	fake_start(&f, incoming_script, false);
	cwd = g_get_current_dir();
	assert_int_equal(chdir("/tmp"), 0);
	assert_int_equal(qemu_ctl_open(&c, f.path, true, "", 0, x509 + strlen("/tmp/"), NULL,
				       NULL, 2000), 0);
	assert_int_equal(chdir(cwd), 0);
	dir = json_object_get_string_member(command_args(&f, "object-add"), "dir");
	assert_string_equal(dir, x509);
	qemu_ctl_close(&c);
	fake_stop(&f);
	for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
		g_autofree char *path = g_build_filename(x509, files[i], NULL);

		unlink(path);
	}
	unlink(dh);
	rmdir(x509);
}

/* An engine without --qmp closes a qemu_ctl it never opened: fd 0 stays. */
static void test_close_unopened(void **state)
{
	struct qemu_ctl c = { 0 };
	struct stat st;
	int fd = 0;
	(void)state;

	if (fstat(0, &st) < 0) /* started without stdin: give it one */
		fd = open("/dev/null", O_RDONLY);
	assert_int_equal(fd, 0);
	qemu_ctl_close(&c);
	assert_int_equal(fstat(0, &st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answer_after_events_and_strangers),
		cmocka_unit_test(test_error_keeps_the_connection),
		cmocka_unit_test(test_line_too_long_drops_the_connection),
		cmocka_unit_test(test_deep_nesting_refused),
		cmocka_unit_test(test_brackets_in_strings_are_text),
		cmocka_unit_test(test_qemu_exits_mid_call),
		cmocka_unit_test(test_silence_times_out),
		cmocka_unit_test(test_not_a_qmp_socket),
		cmocka_unit_test(test_psk_server_gets_dh_params),
		cmocka_unit_test(test_x509_server_dir_without_dh_params),
		cmocka_unit_test(test_close_unopened),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

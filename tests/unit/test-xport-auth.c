// SPDX-License-Identifier: MIT
/*
 * Unit tests of the authentication's pieces that need no peer: the PSK
 * file's parser (lib/xport-tls.c), loading credentials (which files, which
 * modes, what is reported), and the binding tags (lib/xport-auth.c).
 * Handshakes and refusals are the host tier's (tests/xport, tests/migrate).
 */
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "xport-auth.h"
#include "xport-tls.h"

#define KEY32 "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

/* ---- the PSK file ---- */

static int parse(const char *text, struct xport_psk *keys, unsigned max, unsigned *n)
{
	/* An exact heap copy, no NUL: the parser must not read past len. */
	size_t len = strlen(text);
	char *copy = g_memdup2(text, len);
	int r = xport_psk_parse(copy, len, keys, max, n);

	g_free(copy);
	return r;
}

static void test_psk_good(void **state)
{
	struct xport_psk keys[4];
	unsigned n = 0;
	(void)state;

	assert_int_equal(parse("vrdma:" KEY32 "\n", keys, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(keys[0].identity, "vrdma");
	assert_int_equal(keys[0].key_len, 32);
	assert_int_equal(keys[0].key[0], 0x00);
	assert_int_equal(keys[0].key[31], 0xff);

	/* Comments, blank lines, CRLF, no final newline, upper case hex, 16 and 64 bytes. */
	assert_int_equal(parse("# keys\n\nsrc-a:00112233445566778899AABBCCDDEEFF\r\n"
			       "\r\nsrc-b:" KEY32 KEY32, keys, 4, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(keys[0].identity, "src-a");
	assert_int_equal(keys[0].key_len, 16);
	assert_int_equal(keys[0].key[15], 0xff);
	assert_string_equal(keys[1].identity, "src-b");
	assert_int_equal(keys[1].key_len, 64);
}

static void test_psk_bad(void **state)
{
	static const char *const bad[] = {
		"",                                     /* no key at all */
		"# only a comment\n",
		"vrdma" KEY32 "\n",                     /* no colon */
		":" KEY32 "\n",                         /* no identity */
		"vr dma:" KEY32 "\n",                   /* space in the identity */
		"vr\tdma:" KEY32 "\n",
		"vrdma:\n",                             /* no key */
		"vrdma:0011223344556677889\n",          /* odd number of digits */
		"vrdma:00112233445566778899aabbccddee\n", /* 15 bytes */
		"vrdma:" KEY32 KEY32 "00\n",            /* 65 bytes */
		"vrdma:" KEY32 "g0\n",                  /* not hex */
		"vrdma:" KEY32 ":00\n",                 /* a second colon */
		"vrdma:" KEY32 "\nvrdma:" KEY32 "\n",   /* the same identity twice */
		"a:" KEY32 "\nb:" KEY32 "\nc:" KEY32 "\n", /* more than max (2) */
	};
	(void)state;

	for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
		struct xport_psk keys[2];
		unsigned n = 77;

		memset(keys, 0x5a, sizeof(keys));
		assert_int_equal(parse(bad[i], keys, 2, &n), -EBADMSG);
		assert_int_equal(n, 77);
		/* Whatever was parsed before the error is wiped. */
		for (size_t k = 0; k < sizeof(keys[0].key); k++)
			if (keys[0].key[k] != 0 && keys[0].key[k] != 0x5a)
				fail_msg("case %zu: key bytes left behind", i);
	}
	{
		struct xport_psk keys[1];
		unsigned n;
		char *big = g_malloc0(XPORT_PSK_MAX_FILE + 1);

		memset(big, '#', XPORT_PSK_MAX_FILE + 1);
		assert_int_equal(xport_psk_parse(big, XPORT_PSK_MAX_FILE + 1, keys, 1, &n), -EFBIG);
		g_free(big);
	}
}

static void test_psk_random(void **state)
{
	static const char valid[] = "a:" KEY32 "\nbb:" KEY32 "\r\n#c\n";
	GRand *rng = g_rand_new_with_seed(0x5eed);
	unsigned accepted = 0;
	(void)state;

	/* Valid files with a few characters changed: what is accepted is in bounds. */
	for (unsigned iter = 0; iter < 20000; iter++) {
		static const char alphabet[] = "vrdma:0123456789abcdefXYZ#\n\r :";
		char text[sizeof(valid)];
		size_t len = sizeof(valid) - 1 - (size_t)g_rand_int_range(rng, 0, 4);
		struct xport_psk keys[4];
		unsigned n = 0;

		memcpy(text, valid, sizeof(valid));
		for (int k = g_rand_int_range(rng, 0, 3); k > 0; k--)
			text[g_rand_int_range(rng, 0, (int)len)] =
				alphabet[g_rand_int_range(rng, 0, sizeof(alphabet) - 1)];
		if (xport_psk_parse(text, len, keys, 4, &n) != 0)
			continue;
		accepted++;
		assert_in_range(n, 1, 4);
		for (unsigned k = 0; k < n; k++) {
			assert_in_range(keys[k].key_len, XPORT_PSK_MIN_KEY, XPORT_PSK_MAX_KEY);
			assert_in_range(strlen(keys[k].identity), 1, XPORT_PSK_MAX_IDENTITY);
			assert_null(strchr(keys[k].identity, ':'));
		}
	}
	/* Not vacuous: unchanged and harmlessly changed files got through. */
	assert_true(accepted > 1000);
	g_rand_free(rng);
}

/* ---- loading credentials ---- */

static char *scratch_dir(void)
{
	char *dir = g_dir_make_tmp("test-xport-auth.XXXXXX", NULL);

	assert_non_null(dir);
	return dir;
}

static void put(const char *dir, const char *name, const char *text, mode_t mode)
{
	g_autofree char *path = g_build_filename(dir, name, NULL);

	assert_true(g_file_set_contents(path, text, -1, NULL));
	assert_int_equal(chmod(path, mode), 0);
}

static void rm_rf(const char *dir)
{
	g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
	const char *name;

	while (d && (name = g_dir_read_name(d))) {
		g_autofree char *path = g_build_filename(dir, name, NULL);

		g_unlink(path);
	}
	g_rmdir(dir);
}

/* xport_auth_new's errno and the file it names (basename, or NULL). */
static int load(bool server, const char *x509, const char *psk, char **ret_base)
{
	struct xport_auth_cfg cfg = { .server = server, .x509_dir = x509, .psk_file = psk };
	struct xport_auth *auth = NULL;
	g_autofree char *file = NULL;
	int r = xport_auth_new(&cfg, &auth, &file);

	*ret_base = file ? g_path_get_basename(file) : NULL;
	if (r == 0) {
		assert_non_null(auth);
		assert_true(xport_auth_is_server(auth) == server);
		xport_auth_free(auth);
	}
	return r;
}

/* Loading is refused with want, naming want_file (NULL: no name checked). */
static void assert_load_refused(bool server, const char *x509, const char *psk, int want,
				const char *want_file)
{
	g_autofree char *base = NULL;

	assert_int_equal(load(server, x509, psk, &base), want);
	if (want_file)
		assert_string_equal(base, want_file);
}

static void test_load_psk(void **state)
{
	g_autofree char *dir = scratch_dir();
	g_autofree char *path = g_build_filename(dir, "keys.psk", NULL);
	static const mode_t loose[] = { 0640, 0604, 0660, 0606, 0620, 0602, 0610, 0601, 0644 };
	char *base = NULL;
	(void)state;

	put(dir, "keys.psk", "vrdma:" KEY32 "\n", 0600);
	assert_int_equal(load(true, NULL, path, &base), 0);
	assert_int_equal(load(false, NULL, path, &base), 0);
	put(dir, "keys.psk", "vrdma:" KEY32 "\n", 0400);
	assert_int_equal(load(false, NULL, path, &base), 0);
	/* Readable, writable or executable by group or others: refused, named. */
	for (size_t i = 0; i < G_N_ELEMENTS(loose); i++) {
		put(dir, "keys.psk", "vrdma:" KEY32 "\n", loose[i]);
		assert_load_refused(true, NULL, path, -EPERM, "keys.psk");
	}
	put(dir, "keys.psk", "vrdma:not hex\n", 0600);
	assert_load_refused(true, NULL, path, -EBADMSG, "keys.psk");
	assert_load_refused(true, NULL, dir, -EINVAL, NULL); /* a directory */
	g_unlink(path);
	assert_load_refused(true, NULL, path, -ENOENT, "keys.psk");
	rm_rf(dir);
}

static void test_load_x509_files(void **state)
{
	g_autofree char *dir = scratch_dir();
	(void)state;

	/* The CA first, then the role's certificate and key. */
	assert_load_refused(true, dir, NULL, -ENOENT, "ca-cert.pem");
	put(dir, "ca-cert.pem", "not a certificate\n", 0644);
	assert_load_refused(false, dir, NULL, -ENOENT, "client-cert.pem");
	put(dir, "client-cert.pem", "not a certificate\n", 0644);
	put(dir, "client-key.pem", "not a key\n", 0644);
	assert_load_refused(false, dir, NULL, -EPERM, "client-key.pem");
	/* The server's files are others. */
	assert_load_refused(true, dir, NULL, -ENOENT, "server-cert.pem");
	put(dir, "client-key.pem", "not a key\n", 0600);
	assert_load_refused(false, dir, NULL, -EBADMSG, "ca-cert.pem");
	/* Neither kind: nothing to authenticate with. */
	assert_load_refused(false, NULL, NULL, -EINVAL, NULL);
	rm_rf(dir);
}

/* ---- tags ---- */

static void test_tags(void **state)
{
	uint8_t key[XPORT_KEY_SIZE] = { 1 }, key2[XPORT_KEY_SIZE] = { 2 };
	uint8_t a[XPORT_TAG_SIZE], b[XPORT_TAG_SIZE];
	static const uint8_t msg[32] = { 'V', 'X', 'H', 'I' };
	static const uint8_t ctx[8] = { 9 };
	(void)state;

	assert_int_equal(xport_auth_tag(key, XPORT_TAG_TCP_PLAIN, ctx, 8, msg, 32, a), 0);
	assert_int_equal(xport_auth_tag(key, XPORT_TAG_TCP_PLAIN, ctx, 8, msg, 32, b), 0);
	assert_true(xport_auth_tag_equal(a, b));
	/* Every input changes the tag: key, use, context, message. */
	assert_int_equal(xport_auth_tag(key2, XPORT_TAG_TCP_PLAIN, ctx, 8, msg, 32, b), 0);
	assert_false(xport_auth_tag_equal(a, b));
	assert_int_equal(xport_auth_tag(key, XPORT_TAG_TCP_TLS, ctx, 8, msg, 32, b), 0);
	assert_false(xport_auth_tag_equal(a, b));
	assert_int_equal(xport_auth_tag(key, XPORT_TAG_TCP_PLAIN, ctx, 7, msg, 32, b), 0);
	assert_false(xport_auth_tag_equal(a, b));
	assert_int_equal(xport_auth_tag(key, XPORT_TAG_TCP_PLAIN, ctx, 8, msg, 31, b), 0);
	assert_false(xport_auth_tag_equal(a, b));
	/* One bit anywhere is enough to differ. */
	for (unsigned i = 0; i < XPORT_TAG_SIZE * 8; i++) {
		memcpy(b, a, sizeof(b));
		b[i / 8] ^= (uint8_t)(1u << (i % 8));
		assert_false(xport_auth_tag_equal(a, b));
	}
}

static void test_rdma_ctx(void **state)
{
	struct sockaddr_in v4 = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0xc0000201) };
	struct sockaddr_in6 v6 = { .sin6_family = AF_INET6 };
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	static const uint8_t want4[XPORT_RDMA_CTX_SIZE] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1, 0x11, 0x22, 0x33, 0,
	};
	uint8_t out[XPORT_RDMA_CTX_SIZE];
	(void)state;

	assert_int_equal(xport_auth_rdma_ctx((struct sockaddr *)&v4, 0x332211, out), 0);
	assert_memory_equal(out, want4, sizeof(out));
	v6.sin6_addr.s6_addr[0] = 0xfe;
	v6.sin6_addr.s6_addr[15] = 0x01;
	assert_int_equal(xport_auth_rdma_ctx((struct sockaddr *)&v6, 7, out), 0);
	assert_int_equal(out[0], 0xfe);
	assert_int_equal(out[15], 0x01);
	assert_int_equal(out[16], 7);
	assert_int_equal(xport_auth_rdma_ctx((struct sockaddr *)&un, 7, out), -EAFNOSUPPORT);
	assert_int_equal(xport_auth_rdma_ctx(NULL, 7, out), -EAFNOSUPPORT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_psk_good),
		cmocka_unit_test(test_psk_bad),
		cmocka_unit_test(test_psk_random),
		cmocka_unit_test(test_load_psk),
		cmocka_unit_test(test_load_x509_files),
		cmocka_unit_test(test_tags),
		cmocka_unit_test(test_rdma_ctx),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: MIT
/*
 * Credentials, TLS sessions and binding keys (see xport-tls.h).
 *
 * TLS 1.3 only: both ends are this library.  Tickets are off, so after the
 * handshake neither side sends a record the other did not ask for, and
 * GnuTLS reads a stream socket exactly record by record: what follows the
 * records of the handshake stays in the socket for whoever reads next.
 */
#include "xport-tls.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "xport-internal.h"
#include "xport-sock.h"

#define PRIORITY_X509 "NORMAL:-VERS-ALL:+VERS-TLS1.3"
/* Only the (EC)DHE key exchanges with a PSK: forward secrecy. */
#define PRIORITY_PSK "NORMAL:-VERS-ALL:+VERS-TLS1.3:+ECDHE-PSK:+DHE-PSK"
#define MAX_PEM_FILE (1u << 20)
#define BINDING_LABEL "EXPORTER-vrdma-binding"

struct xport_auth {
	bool server;
	char *hostname;
	gnutls_certificate_credentials_t x509;
	gnutls_psk_server_credentials_t psk_server;
	gnutls_psk_client_credentials_t psk_client;
	struct xport_psk *psk;
	unsigned npsk;
};

struct xport_tls {
	const struct xport_auth *auth;
	gnutls_session_t s;
	bool psk_offered; /* server: the peer named a PSK identity we know */
	bool psk_unknown; /* server: ... one we do not */
	const char *alert; /* why the peer's fatal alert after the handshake, if it sent one */
};

/* ---- the PSK file ---- */

static bool identity_ok(const char *p, size_t n)
{
	if (n == 0 || n > XPORT_PSK_MAX_IDENTITY)
		return false;
	for (size_t i = 0; i < n; i++)
		if (p[i] < 0x21 || p[i] > 0x7e || p[i] == ':')
			return false;
	return true;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int parse_hex_key(const char *p, size_t n, struct xport_psk *k)
{
	if (n % 2 || n / 2 < XPORT_PSK_MIN_KEY || n / 2 > XPORT_PSK_MAX_KEY)
		return -EBADMSG;
	for (size_t i = 0; i < n; i += 2) {
		int hi = hex_value(p[i]), lo = hex_value(p[i + 1]);

		if (hi < 0 || lo < 0)
			return -EBADMSG;
		k->key[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	k->key_len = (unsigned)(n / 2);
	return 0;
}

static int parse_psk_line(const char *p, size_t n, struct xport_psk *k)
{
	const char *colon = memchr(p, ':', n);

	if (n && p[n - 1] == '\r')
		n--;
	if (!colon || !identity_ok(p, (size_t)(colon - p)))
		return -EBADMSG;
	memcpy(k->identity, p, (size_t)(colon - p));
	k->identity[colon - p] = '\0';
	return parse_hex_key(colon + 1, n - (size_t)(colon - p) - 1, k);
}

int xport_psk_parse(const char *text, size_t len, struct xport_psk *ret_keys,
		    unsigned max, unsigned *ret_n)
{
	unsigned n = 0;
	int r = 0;

	if (len > XPORT_PSK_MAX_FILE)
		return -EFBIG;
	for (size_t at = 0; at < len && r == 0;) {
		const char *line = text + at, *nl = memchr(line, '\n', len - at);
		size_t ll = nl ? (size_t)(nl - line) : len - at;

		at += ll + 1;
		if (ll == 0 || line[0] == '#' || (ll == 1 && line[0] == '\r'))
			continue;
		if (n == max) {
			r = -EBADMSG;
			break;
		}
		r = parse_psk_line(line, ll, &ret_keys[n]);
		for (unsigned i = 0; r == 0 && i < n; i++)
			if (!strcmp(ret_keys[i].identity, ret_keys[n].identity))
				r = -EBADMSG;
		n++;
	}
	if (r == 0 && n == 0)
		r = -EBADMSG;
	if (r < 0) {
		gnutls_memset(ret_keys, 0, sizeof(*ret_keys) * n);
		return r;
	}
	*ret_n = n;
	return 0;
}

/* ---- loading the credentials ---- */

/* A whole file, at most max bytes; key files must be private to the owner. */
static int read_file(const char *path, size_t max, bool secret, gnutls_datum_t *ret)
{
	_cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	uint8_t *buf;
	size_t have = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (secret && (st.st_mode & (S_IRWXG | S_IRWXO)))
		return -EPERM;
	if (st.st_size < 0 || (uint64_t)st.st_size > max)
		return -EFBIG;
	buf = gnutls_malloc((size_t)st.st_size + 1);
	if (!buf)
		return -ENOMEM;
	while (have < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + have, (size_t)st.st_size - have);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			gnutls_memset(buf, 0, have);
			gnutls_free(buf);
			return n < 0 ? -errno : -EIO;
		}
		have += (size_t)n;
	}
	buf[have] = '\0';
	*ret = (gnutls_datum_t){ .data = buf, .size = (unsigned)have };
	return 0;
}

static void datum_wipe(gnutls_datum_t *d)
{
	if (d->data) {
		gnutls_memset(d->data, 0, d->size);
		gnutls_free(d->data);
	}
	*d = (gnutls_datum_t){ 0 };
}

/* On failure *ret_file names the file. */
static int load_pem(const char *dir, const char *name, bool secret, bool optional,
		    gnutls_datum_t *ret, char **ret_file)
{
	g_autofree char *path = g_build_filename(dir, name, NULL);
	int r = read_file(path, MAX_PEM_FILE, secret, ret);

	if (r == -ENOENT && optional) {
		*ret = (gnutls_datum_t){ 0 };
		return 0;
	}
	if (r < 0)
		*ret_file = g_steal_pointer(&path);
	return r;
}

static int load_x509(struct xport_auth *a, const char *dir, char **ret_file)
{
	const char *role = a->server ? "server" : "client";
	g_autofree char *cert_name = g_strdup_printf("%s-cert.pem", role);
	g_autofree char *key_name = g_strdup_printf("%s-key.pem", role);
	gnutls_datum_t ca = { 0 }, crl = { 0 }, cert = { 0 }, key = { 0 };
	const char *bad = NULL;
	int r;

	if (gnutls_certificate_allocate_credentials(&a->x509) < 0)
		return -ENOMEM;
	r = load_pem(dir, "ca-cert.pem", false, false, &ca, ret_file);
	if (r == 0)
		r = load_pem(dir, "ca-crl.pem", false, true, &crl, ret_file);
	if (r == 0)
		r = load_pem(dir, cert_name, false, false, &cert, ret_file);
	if (r == 0)
		r = load_pem(dir, key_name, true, false, &key, ret_file);
	if (r == 0 && gnutls_certificate_set_x509_trust_mem(a->x509, &ca, GNUTLS_X509_FMT_PEM) <= 0)
		bad = "ca-cert.pem";
	else if (r == 0 && crl.data &&
		 gnutls_certificate_set_x509_crl_mem(a->x509, &crl, GNUTLS_X509_FMT_PEM) < 0)
		bad = "ca-crl.pem";
	else if (r == 0 && gnutls_certificate_set_x509_key_mem(a->x509, &cert, &key,
							      GNUTLS_X509_FMT_PEM) < 0)
		bad = cert_name;
	if (bad) {
		*ret_file = g_build_filename(dir, bad, NULL);
		r = -EBADMSG;
	}
	datum_wipe(&key);
	datum_wipe(&cert);
	datum_wipe(&crl);
	datum_wipe(&ca);
	return r;
}

static int psk_lookup(gnutls_session_t s, const char *identity, gnutls_datum_t *key)
{
	struct xport_tls *t = gnutls_session_get_ptr(s);

	for (unsigned i = 0; i < t->auth->npsk; i++) {
		const struct xport_psk *k = &t->auth->psk[i];

		if (strcmp(k->identity, identity))
			continue;
		key->data = gnutls_malloc(k->key_len);
		if (!key->data)
			return -1;
		memcpy(key->data, k->key, k->key_len);
		key->size = k->key_len;
		t->psk_offered = true;
		return 0;
	}
	t->psk_unknown = true;
	return -1;
}

static int load_psk(struct xport_auth *a, const char *path, char **ret_file)
{
	gnutls_datum_t text = { 0 };
	gnutls_datum_t first;
	int r = read_file(path, XPORT_PSK_MAX_FILE, true, &text);

	a->psk = g_new0(struct xport_psk, XPORT_PSK_MAX_KEYS);
	if (r == 0)
		r = xport_psk_parse((const char *)text.data, text.size, a->psk,
				    XPORT_PSK_MAX_KEYS, &a->npsk);
	datum_wipe(&text);
	if (r < 0) {
		*ret_file = g_strdup(path);
		return r;
	}
	if (a->server) {
		if (gnutls_psk_allocate_server_credentials(&a->psk_server) < 0)
			return -ENOMEM;
		gnutls_psk_set_server_credentials_function(a->psk_server, psk_lookup);
		return 0;
	}
	/* A client speaks as the file's first identity. */
	first = (gnutls_datum_t){ .data = a->psk[0].key, .size = a->psk[0].key_len };
	if (gnutls_psk_allocate_client_credentials(&a->psk_client) < 0 ||
	    gnutls_psk_set_client_credentials(a->psk_client, a->psk[0].identity, &first,
					      GNUTLS_PSK_KEY_RAW) < 0)
		return -ENOMEM;
	return 0;
}

void xport_auth_free(struct xport_auth *a)
{
	if (!a)
		return;
	if (a->x509)
		gnutls_certificate_free_credentials(a->x509);
	if (a->psk_server)
		gnutls_psk_free_server_credentials(a->psk_server);
	if (a->psk_client)
		gnutls_psk_free_client_credentials(a->psk_client);
	if (a->psk)
		gnutls_memset(a->psk, 0, sizeof(*a->psk) * XPORT_PSK_MAX_KEYS);
	g_free(a->psk);
	g_free(a->hostname);
	g_free(a);
}

int xport_auth_new(const struct xport_auth_cfg *cfg, struct xport_auth **ret_auth,
		   char **ret_file)
{
	g_autofree char *file = NULL;
	struct xport_auth *a;
	int r = 0;

	if (!cfg || !ret_auth || (!cfg->x509_dir && !cfg->psk_file))
		return -EINVAL;
	a = g_new0(struct xport_auth, 1);
	a->server = cfg->server;
	a->hostname = g_strdup(cfg->hostname);
	if (cfg->x509_dir)
		r = load_x509(a, cfg->x509_dir, &file);
	if (r == 0 && cfg->psk_file)
		r = load_psk(a, cfg->psk_file, &file);
	if (r < 0) {
		xport_auth_free(a);
		if (ret_file)
			*ret_file = g_steal_pointer(&file);
		return r;
	}
	*ret_auth = a;
	return 0;
}

bool xport_auth_is_server(const struct xport_auth *auth)
{
	return auth->server;
}

/* ---- sessions ---- */

void xport_tls_free(struct xport_tls *t)
{
	if (!t)
		return;
	gnutls_deinit(t->s);
	g_free(t);
}

gnutls_session_t xport_tls_gnutls(const struct xport_tls *t)
{
	return t->s;
}

const char *xport_tls_alert(const struct xport_tls *t)
{
	return t->alert;
}

static int session_creds(struct xport_tls *t, const char *peer_name)
{
	const struct xport_auth *a = t->auth;
	const char *name = a->hostname ? a->hostname : peer_name;

	/* With both, TLS authenticates the certificates; the tags the PSK. */
	if (a->x509) {
		if (gnutls_credentials_set(t->s, GNUTLS_CRD_CERTIFICATE, a->x509) < 0 ||
		    gnutls_priority_set_direct(t->s, PRIORITY_X509, NULL) < 0)
			return -ENOMEM;
		if (a->server)
			gnutls_certificate_server_set_request(t->s, GNUTLS_CERT_REQUIRE);
		/* The peer's chain against the CA (and CRL), and its name if one is asked for. */
		gnutls_session_set_verify_cert(t->s, a->server ? a->hostname : name, 0);
		return 0;
	}
	if (gnutls_credentials_set(t->s, GNUTLS_CRD_PSK,
				   a->server ? (void *)a->psk_server : (void *)a->psk_client) < 0 ||
	    gnutls_priority_set_direct(t->s, PRIORITY_PSK, NULL) < 0)
		return -ENOMEM;
	return 0;
}

int xport_tls_new(const struct xport_auth *auth, int fd, const char *peer_name,
		  struct xport_tls **ret)
{
	struct xport_tls *t = g_new0(struct xport_tls, 1);
	unsigned flags = auth->server ? GNUTLS_SERVER : GNUTLS_CLIENT;
	int r;

	t->auth = auth;
	if (gnutls_init(&t->s, flags | GNUTLS_NO_TICKETS | GNUTLS_NO_SIGNAL) < 0) {
		g_free(t);
		return -ENOMEM;
	}
	gnutls_session_set_ptr(t->s, t);
	r = session_creds(t, peer_name);
	if (r < 0) {
		xport_tls_free(t);
		return r;
	}
	/* Our own deadlines bound the handshake. */
	gnutls_handshake_set_timeout(t->s, 0);
	gnutls_transport_set_int(t->s, fd);
	*ret = t;
	return 0;
}

/* ---- why a handshake failed ---- */

struct reason {
	int err;
	const char *text;
};

static struct reason verify_reason(unsigned status)
{
	if (status & (GNUTLS_CERT_EXPIRED | GNUTLS_CERT_NOT_ACTIVATED))
		return (struct reason){ -EKEYEXPIRED,
					"the peer's certificate has expired or is not valid yet" };
	if (status & GNUTLS_CERT_REVOKED)
		return (struct reason){ -EKEYREVOKED, "the peer's certificate is revoked" };
	/* Another CA's, also one that took the trusted CA's name. */
	if (status & (GNUTLS_CERT_SIGNER_NOT_FOUND | GNUTLS_CERT_SIGNER_NOT_CA |
		      GNUTLS_CERT_SIGNATURE_FAILURE))
		return (struct reason){ -EKEYREJECTED,
					"the peer's certificate is not issued by the trusted CA" };
	if (status & GNUTLS_CERT_UNEXPECTED_OWNER)
		return (struct reason){ -EKEYREJECTED,
					"the peer's certificate does not name the expected host" };
	return (struct reason){ -EKEYREJECTED, "the peer's certificate does not verify" };
}

static struct reason alert_reason(gnutls_alert_description_t alert)
{
	switch (alert) {
	case GNUTLS_A_BAD_CERTIFICATE:
	case GNUTLS_A_UNSUPPORTED_CERTIFICATE:
	case GNUTLS_A_CERTIFICATE_REVOKED:
	case GNUTLS_A_CERTIFICATE_EXPIRED:
	case GNUTLS_A_CERTIFICATE_UNKNOWN:
	case GNUTLS_A_UNKNOWN_CA:
	case GNUTLS_A_ACCESS_DENIED:
	case GNUTLS_A_CERTIFICATE_REQUIRED:
		return (struct reason){ -EKEYREJECTED, "the peer refused this side's certificate" };
	case GNUTLS_A_ILLEGAL_PARAMETER:
	case GNUTLS_A_DECRYPT_ERROR:
	case GNUTLS_A_BAD_RECORD_MAC:
	case GNUTLS_A_UNKNOWN_PSK_IDENTITY:
		return (struct reason){ -EKEYREJECTED,
					"the peer refused this side's key (pre-shared keys differ?)" };
	case GNUTLS_A_HANDSHAKE_FAILURE:
	case GNUTLS_A_INSUFFICIENT_SECURITY:
	case GNUTLS_A_PROTOCOL_VERSION:
		return (struct reason){ -EPROTONOSUPPORT,
					"the peer has no credentials in common with this side" };
	default:
		return (struct reason){ -ECONNREFUSED, "the peer aborted the TLS handshake" };
	}
}

static struct reason handshake_reason(const struct xport_tls *t, int r)
{
	switch (r) {
	case GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR:
		return verify_reason(gnutls_session_get_verify_cert_status(t->s));
	case GNUTLS_E_CERTIFICATE_REQUIRED:
	case GNUTLS_E_NO_CERTIFICATE_FOUND:
		/* A GnuTLS client holds back a certificate of another CA. */
		return (struct reason){ -ENOKEY, "the peer sent no certificate issued by the trusted CA" };
	case GNUTLS_E_FATAL_ALERT_RECEIVED:
		return alert_reason(gnutls_alert_get(t->s));
	case GNUTLS_E_UNEXPECTED_PACKET_LENGTH:
	case GNUTLS_E_UNSUPPORTED_VERSION_PACKET:
	case GNUTLS_E_UNEXPECTED_PACKET:
	case GNUTLS_E_UNEXPECTED_HANDSHAKE_PACKET:
		return (struct reason){ -EPROTO, "the peer does not speak TLS" };
	case GNUTLS_E_PREMATURE_TERMINATION:
	case GNUTLS_E_PULL_ERROR:
	case GNUTLS_E_PUSH_ERROR:
		return (struct reason){ -ECONNRESET, "the peer hung up during the TLS handshake" };
	case GNUTLS_E_NO_CIPHER_SUITES:
	case GNUTLS_E_INSUFFICIENT_CREDENTIALS:
	case GNUTLS_E_NO_COMMON_KEY_SHARE:
	case GNUTLS_E_UNKNOWN_CIPHER_SUITE:
		return (struct reason){ -EPROTONOSUPPORT,
					"no credentials in common with the peer (x509 against a pre-shared key?)" };
	default:
		break;
	}
	if (t->psk_unknown)
		return (struct reason){ -ENOKEY, "the peer's PSK identity is not in the key file" };
	/* TLS 1.3: a binder made with another key does not verify. */
	if (t->psk_offered)
		return (struct reason){ -EKEYREJECTED, "the peer's pre-shared key differs" };
	return (struct reason){ -EPROTO, gnutls_strerror(r) };
}

static short direction(const struct xport_tls *t)
{
	return gnutls_record_get_direction(t->s) ? POLLOUT : POLLIN;
}

int xport_tls_handshake(struct xport_tls *t, short *ret_events, const char **ret_reason)
{
	/* Warning alerts are not fatal: a few more steps at most. */
	for (int tries = 0; tries < 8; tries++) {
		int r = gnutls_handshake(t->s);
		struct reason why;

		if (r == 0)
			return 0;
		if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) {
			*ret_events = direction(t);
			return -EAGAIN;
		}
		if (!gnutls_error_is_fatal(r))
			continue;
		why = handshake_reason(t, r);
		/* Best effort: the peer learns why, if its socket has room. */
		if (r != GNUTLS_E_FATAL_ALERT_RECEIVED)
			gnutls_alert_send_appropriate(t->s, r);
		*ret_reason = why.text;
		return why.err;
	}
	*ret_reason = "the peer keeps sending TLS warnings";
	return -EPROTO;
}

static ssize_t record_result(struct xport_tls *t, ssize_t r, short *ret_events)
{
	if (r >= 0)
		return r;
	if (r == GNUTLS_E_FATAL_ALERT_RECEIVED) {
		struct reason why = alert_reason(gnutls_alert_get(t->s));

		t->alert = why.text;
		return why.err;
	}
	if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) {
		*ret_events = direction(t);
		return -EAGAIN;
	}
	if (r == GNUTLS_E_PREMATURE_TERMINATION || r == GNUTLS_E_PULL_ERROR ||
	    r == GNUTLS_E_PUSH_ERROR)
		return -ECONNRESET;
	/* A record that does not decrypt or authenticate: tampering. */
	return -EBADMSG;
}

ssize_t xport_tls_send(struct xport_tls *t, const void *buf, size_t len, short *ret_events)
{
	return record_result(t, gnutls_record_send(t->s, buf, len), ret_events);
}

ssize_t xport_tls_recv(struct xport_tls *t, void *buf, size_t len, short *ret_events)
{
	return record_result(t, gnutls_record_recv(t->s, buf, len), ret_events);
}

int xport_tls_handshake_wait(struct xport_tls *t, int fd, int64_t deadline,
			     const char **ret_reason)
{
	for (;;) {
		short events = 0;
		int r = xport_tls_handshake(t, &events, ret_reason);

		if (r != -EAGAIN)
			return r;
		r = xport_sock_wait(fd, events, deadline);
		if (r < 0) {
			*ret_reason = r == -ETIMEDOUT ? "the TLS handshake timed out" : NULL;
			return r;
		}
	}
}

/*
 * Record I/O as whole-buffer steps.  GnuTLS may want a send repeated once
 * there is room, or a receive to write first: *ret_events says which.
 */
static ssize_t record_send_step(void *t, void *buf, size_t len, short *ret_events)
{
	return xport_tls_send(t, buf, len, ret_events);
}

static ssize_t record_recv_step(void *t, void *buf, size_t len, short *ret_events)
{
	return xport_tls_recv(t, buf, len, ret_events);
}

int xport_tls_send_all(struct xport_tls *t, int fd, const void *buf, size_t len,
		       int64_t deadline)
{
	return xport_io_all(fd, (void *)buf, len, deadline, record_send_step, t, -EIO);
}

int xport_tls_recv_all(struct xport_tls *t, int fd, void *buf, size_t len,
		       int64_t deadline)
{
	return xport_io_all(fd, buf, len, deadline, record_recv_step, t, -ECONNRESET);
}

int xport_tls_export(struct xport_tls *t, const char *label, void *out, size_t len)
{
	if (gnutls_prf_rfc5705(t->s, strlen(label), label, 0, NULL, len, out) < 0)
		return -EIO;
	return 0;
}

int xport_tls_binding_keys(struct xport_tls *t, uint8_t (*ret_keys)[XPORT_KEY_SIZE],
			   unsigned max)
{
	const struct xport_auth *a = t->auth;
	uint8_t exported[XPORT_KEY_SIZE];
	unsigned n;
	int r = xport_tls_export(t, BINDING_LABEL, exported, sizeof(exported));

	if (r < 0)
		return r;
	if (!a->x509 || !a->npsk) {
		memcpy(ret_keys[0], exported, XPORT_KEY_SIZE);
		gnutls_memset(exported, 0, sizeof(exported));
		return 1;
	}
	n = MIN(a->server ? a->npsk : 1u, max);
	for (unsigned i = 0; i < n && r == 0; i++)
		if (gnutls_hmac_fast(GNUTLS_MAC_SHA256, a->psk[i].key, a->psk[i].key_len,
				     exported, sizeof(exported), ret_keys[i]) < 0)
			r = -EIO;
	gnutls_memset(exported, 0, sizeof(exported));
	return r < 0 ? r : (int)n;
}

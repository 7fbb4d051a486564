// SPDX-License-Identifier: MIT
/*
 * vrdma-migrate: the command orchestration runs on both hosts.
 *
 *   vrdma-migrate incoming --listen HOST:PORT --owner SOCKET [options]
 *   vrdma-migrate send --to HOST:PORT --owner SOCKET [options]
 *
 * Humans get a live progress line on a terminal; programs get --json:
 * newline-delimited events and a final object shaped like QEMU's
 * query-migrate.
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json-out.h"
#include "log.h"
#include "migrate.h"
#include "parse-num.h"
#include "program.h"
#include "prom.h"
#include "qemu-ctl.h"
#include "util.h"
#include "xport-wire.h"

enum exit_code {
	EXIT_OK = 0,
	EXIT_PEER = 1,
	EXIT_USAGE = 2,
	EXIT_OWNER = 3,
	EXIT_VERIFY = 4,
	EXIT_PROTOCOL = 5,
	EXIT_CANCELLED = 6,
	EXIT_SETUP = 7,
	EXIT_QEMU = 8,      /* --qmp: this host's QEMU refused a step or failed */
	EXIT_PEER_QEMU = 9, /* --qmp, send: the destination's QEMU did not load the guest */
	EXIT_GUEST_UNKNOWN = 10, /* --qmp, send: paused here, and it may run there */
};

/* --qmp: QEMU's own words for a failure of its part. */
static const struct qemu_ctl *frontend;

struct cli {
	bool json;
	bool tty;
	bool incoming;
	bool line_open;
	const char *metrics_path; /* --metrics-file */
	const char *metrics_instance; /* --metrics-instance: the vm="..." label */
	bool metrics_warned;
	struct xport_auth_cfg auth; /* --tls-creds, --psk-file, --tls-hostname */
	const char *qmp_path;       /* --qmp */
	uint16_t state_port;        /* --state-port */
};

static volatile sig_atomic_t cancelled;

/* Why it failed, in words: EBADMSG in the set-up has one cause. */
static const char *failure_reason(enum mig_failure f, int err)
{
	if (f == MIG_FAIL_SETUP && err == -EBADMSG)
		return "the two guests' RAM layouts differ (number, names or sizes of the "
		       "RAM blocks: compare both QEMUs' -m and memory backends)";
	if (f == MIG_FAIL_FRONTEND && frontend && frontend->error)
		return frontend->error;
	if (f == MIG_FAIL_PEER_FRONTEND)
		return "the destination's QEMU did not load the guest's device state (its log "
		       "there says why)";
	if (f == MIG_FAIL_SETUP && err == -EPROTONOSUPPORT)
		return "one engine drives its QEMU (--qmp) and the other does not: give --qmp "
		       "on both hosts, or --owner on both";
	return strerror(-err);
}

static void on_signal(int sig)
{
	(void)sig;
	cancelled = 1;
}

static double mib(uint64_t bytes)
{
	return (double)bytes / (1024.0 * 1024.0);
}

static void add_stats(JsonBuilder *b, const struct mig_stats *st)
{
	json_out_str(b, "status", st->status);
	json_out_str(b, "transport", xport_kind_name(st->transport));
	json_out_int(b, "channels", st->channels);
	json_out_int(b, "total-time", (gint64)st->total_time_ms);
	json_out_int(b, "setup-time", (gint64)st->setup_time_ms);
	json_out_int(b, "downtime", (gint64)st->downtime_ms);
	if (st->handoff)
		json_out_int(b, "device-state-time", (gint64)st->handoff_ms);
	if (st->expected_downtime_ms != UINT64_MAX)
		json_out_int(b, "expected-downtime", (gint64)st->expected_downtime_ms);
	if (st->stop_reason) {
		json_out_bool(b, "forced", st->forced);
		json_out_str(b, "stop-reason", st->stop_reason);
	}
	json_out_int(b, "cpu-throttle-percentage", st->throttle_percent);
	json_builder_set_member_name(b, "ram");
	json_builder_begin_object(b);
	json_out_int(b, "transferred", (gint64)st->ram_transferred);
	json_out_int(b, "remaining", (gint64)st->ram_remaining);
	json_out_int(b, "total", (gint64)st->ram_total);
	json_out_int(b, "duplicate", (gint64)st->duplicate);
	json_out_int(b, "normal", (gint64)st->normal);
	json_out_int(b, "normal-bytes", (gint64)st->normal_bytes);
	json_out_int(b, "dirty-sync-count", (gint64)st->dirty_sync_count);
	json_out_int(b, "rounds", (gint64)st->rounds);
	json_out_double(b, "pages-per-second", st->pages_per_second);
	json_out_double(b, "mbps", st->mbps);
	json_out_double(b, "dirty-pages-rate", st->dirty_pages_rate);
	json_builder_end_object(b);
	if (st->error)
		json_out_str(b, "error-desc", failure_reason(st->failure, st->error));
}

static const char *event_name(enum mig_event_type t)
{
	static const char *const names[] = {
		[MIG_EV_LISTENING] = "listening", [MIG_EV_SETUP_DONE] = "setup",
		[MIG_EV_ROUND] = "round",         [MIG_EV_PROGRESS] = "progress",
		[MIG_EV_THROTTLE] = "throttle",   [MIG_EV_STOP_COPY] = "stop-and-copy",
		[MIG_EV_COMPLETED] = "completed", [MIG_EV_FAILED] = "failed",
	};
	return names[t];
}

static void print_json_event(const struct mig_event *ev)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autofree char *text = NULL;

	json_builder_begin_object(b);
	json_out_str(b, "event", event_name(ev->type));
	add_stats(b, ev->stats);
	json_builder_end_object(b);
	text = json_out_text(b, FALSE);
	printf("%s\n", text);
	fflush(stdout);
}

static void print_progress(struct cli *cli, const struct mig_stats *st)
{
	char downtime[32] = "?";

	if (st->expected_downtime_ms != UINT64_MAX)
		snprintf(downtime, sizeof(downtime), "%llu ms",
			 (unsigned long long)st->expected_downtime_ms);
	if (cli->incoming)
		fprintf(stderr, "\r\033[K round %llu  received %.1f MiB of %.1f MiB",
			(unsigned long long)st->rounds, mib(st->ram_transferred),
			mib(st->ram_total));
	else
		fprintf(stderr,
			"\r\033[K round %llu  sent %.1f MiB  %.1f MiB/s  remaining %.1f MiB"
			"  expected downtime %s  throttle %u%%",
			(unsigned long long)st->rounds, mib(st->ram_transferred),
			st->mbps * 1e6 / 8 / (1024.0 * 1024.0), mib(st->ram_remaining),
			downtime, st->throttle_percent);
	cli->line_open = true;
}

/* --metrics-file: the migration's state after each event, for dashboards. */
static void write_metrics(struct cli *cli, const struct mig_stats *st)
{
	_cleanup_(prom_freep) struct prom *out = prom_new("vm", cli->metrics_instance);
	static const char *const phases[] = { "setup", "active", "device", "completed", "failed" };
	const char *const info[] = { "role", cli->incoming ? "destination" : "source",
				     "transport", xport_kind_name(st->transport), NULL };
	int ret;

	prom_family(out, "vrdma_migrate_info", "gauge", "this engine's side and transport");
	prom_sample_labels(out, "vrdma_migrate_info", info, 1);
	prom_family(out, "vrdma_migrate_phase", "gauge",
		    "1 for the phase the migration is in (device: stop-and-copy)");
	for (size_t i = 0; i < G_N_ELEMENTS(phases); i++)
		prom_sample(out, "vrdma_migrate_phase", "phase", phases[i],
			    st->status && !strcmp(st->status, phases[i]));
	prom_metric(out, "vrdma_migrate_ram_size_bytes", "gauge", "the guest's RAM",
		    (double)st->ram_total);
	prom_metric(out, "vrdma_migrate_ram_transferred_bytes_total", "counter",
		    "guest RAM transferred so far", (double)st->ram_transferred);
	prom_metric(out, "vrdma_migrate_ram_remaining_bytes", "gauge",
		    "guest RAM still to send: dirty at the last sync, or not yet scanned in round 0",
		    (double)st->ram_remaining);
	prom_family(out, "vrdma_migrate_pages_total", "counter",
		    "pages sent, and zero pages skipped");
	prom_sample(out, "vrdma_migrate_pages_total", "kind", "sent", (double)st->normal);
	prom_sample(out, "vrdma_migrate_pages_total", "kind", "zero", (double)st->duplicate);
	prom_metric(out, "vrdma_migrate_rounds_total", "counter", "pre-copy rounds so far",
		    (double)st->rounds);
	prom_metric(out, "vrdma_migrate_send_rate_bytes_per_second", "gauge",
		    "send rate of the last round", st->mbps * 1e6 / 8);
	prom_metric(out, "vrdma_migrate_dirty_pages_per_second", "gauge",
		    "pages the guest dirtied per second in the last round", st->dirty_pages_rate);
	prom_metric(out, "vrdma_migrate_throttle_ratio", "gauge",
		    "guest CPU throttle asked for, 0 to 1", st->throttle_percent / 100.0);
	prom_metric(out, "vrdma_migrate_duration_seconds", "gauge",
		    "time since the migration started; its total time once it ended",
		    (double)st->total_time_ms / 1e3);
	prom_metric(out, "vrdma_migrate_setup_seconds", "gauge",
		    "time the set-up took (connection, layouts, registration)",
		    (double)st->setup_time_ms / 1e3);
	prom_metric(out, "vrdma_migrate_downtime_seconds", "gauge",
		    "time the guest was stopped, so far", (double)st->downtime_ms / 1e3);
	prom_process_cpu(out, "vrdma_migrate");
	ret = prom_write_file(cli->metrics_path, out);
	if (ret < 0 && !cli->metrics_warned)
		log_warn("cannot write metrics to %s: %s (said once)", cli->metrics_path,
			 strerror(-ret));
	cli->metrics_warned = cli->metrics_warned || ret < 0;
}

static void on_event(const struct mig_event *ev, void *opaque)
{
	struct cli *cli = opaque;

	if (cli->metrics_path)
		write_metrics(cli, ev->stats);

	if (cli->json) {
		print_json_event(ev);
		return;
	}
	switch (ev->type) {
	case MIG_EV_LISTENING:
		log_info("waiting for the source (%.1f MiB of RAM offered)",
			 mib(ev->stats->ram_total));
		break;
	case MIG_EV_SETUP_DONE:
		log_info("connected over %s, %u channel(s), %.1f MiB of RAM",
			 xport_kind_name(ev->stats->transport), ev->stats->channels,
			 mib(ev->stats->ram_total));
		break;
	case MIG_EV_ROUND:
	case MIG_EV_PROGRESS:
		if (cli->tty)
			print_progress(cli, ev->stats);
		break;
	case MIG_EV_THROTTLE:
	case MIG_EV_STOP_COPY:
		if (cli->tty)
			print_progress(cli, ev->stats);
		break;
	case MIG_EV_COMPLETED:
	case MIG_EV_FAILED:
		if (cli->line_open)
			fputc('\n', stderr);
		cli->line_open = false;
		break;
	}
}

static void print_summary(const struct mig_stats *st)
{
	printf("status: %s\n", st->status);
	printf("transport: %s, %u channel(s)\n", xport_kind_name(st->transport), st->channels);
	printf("total time: %llu ms, setup: %llu ms, downtime: %llu ms\n",
	       (unsigned long long)st->total_time_ms, (unsigned long long)st->setup_time_ms,
	       (unsigned long long)st->downtime_ms);
	if (st->handoff)
		printf("device state by QEMU's stream: %llu ms (part of the downtime)\n",
		       (unsigned long long)st->handoff_ms);
	printf("ram: total %.1f MiB, transferred %.1f MiB, zero pages skipped %llu, "
	       "pages sent %llu, rounds %llu, dirty syncs %llu\n",
	       mib(st->ram_total), mib(st->ram_transferred),
	       (unsigned long long)st->duplicate, (unsigned long long)st->normal,
	       (unsigned long long)st->rounds, (unsigned long long)st->dirty_sync_count);
	if (st->throttle_percent)
		printf("guest throttled up to %u%%\n", st->throttle_percent);
	if (st->forced)
		printf("note: round cap reached, stopped without meeting the downtime limit\n");
}

static int exit_code(const struct mig_stats *st)
{
	switch (st->failure) {
	case MIG_FAIL_NONE: return EXIT_OK;
	case MIG_FAIL_OWNER: return EXIT_OWNER;
	case MIG_FAIL_PEER: return EXIT_PEER;
	case MIG_FAIL_PROTOCOL: return EXIT_PROTOCOL;
	case MIG_FAIL_VERIFY: return EXIT_VERIFY;
	case MIG_FAIL_CANCELLED: return EXIT_CANCELLED;
	case MIG_FAIL_SETUP: return EXIT_SETUP;
	case MIG_FAIL_FRONTEND: return EXIT_QEMU;
	case MIG_FAIL_PEER_FRONTEND: return EXIT_PEER_QEMU;
	}
	return EXIT_PEER;
}

static const char *failure_text(enum mig_failure f)
{
	switch (f) {
	case MIG_FAIL_OWNER: return "memory owner";
	case MIG_FAIL_PEER: return "peer or transport";
	case MIG_FAIL_PROTOCOL: return "protocol violation by the peer";
	case MIG_FAIL_VERIFY: return "verification: destination image differs";
	case MIG_FAIL_CANCELLED: return "cancelled";
	case MIG_FAIL_SETUP: return "setup";
	case MIG_FAIL_FRONTEND: return "this host's QEMU";
	case MIG_FAIL_PEER_FRONTEND: return "the destination's QEMU";
	default: return "unknown";
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: vrdma-migrate incoming --listen HOST:PORT --qmp SOCKET [options]\n"
		"       vrdma-migrate send --to HOST:PORT --qmp SOCKET [options]\n"
		"       vrdma-migrate incoming|send ... --owner SOCKET [options]\n"
		"\n"
		"Live-migrates a guest between two hosts, one command on each. With --qmp\n"
		"the engine drives its QEMU (7.2 with qemu-patches/) itself: guest RAM by\n"
		"the engine, then the device state by QEMU's own stream, and at the end\n"
		"the source QEMU quits and the guest runs on the destination. With --owner\n"
		"it moves the RAM of a memory owner only (QEMU after x-vrdma-owner-listen,\n"
		"or vrdma-guestsim) and the caller does the rest.\n"
		"\n"
		"  --qmp SOCKET          the local QEMU's QMP UNIX socket; the destination's\n"
		"                        QEMU waits with -incoming defer\n"
		"  --owner SOCKET        a memory owner's UNIX socket (instead of --qmp)\n"
		"  --state-port PORT     incoming --qmp: the port QEMU receives the device\n"
		"                        state on, at the --listen address (default: any free)\n"
		"  --transport KIND      rdma, tcp or auto (default auto: rdma if a device exists)\n"
		"  --channels N          QPs / connections (default 4, 1..16)\n"
		"  --zerocopy MODE       tcp sends: auto (default: zero-copy to another host),\n"
		"                        on or off\n"
		"  --downtime-ms N       downtime limit for stop-and-copy (default 300)\n"
		"  --max-bandwidth RATE  send: bytes/s, suffix K, M or G (x1024); default unlimited\n"
		"  --max-rounds N        send: stop-and-copy after N rounds regardless (default 30)\n"
		"  --verify[=MODE]       send: prove the destination's image equal to the\n"
		"                        source's before it may run: 'pages' (default) hashes\n"
		"                        each page as it is sent and lands, so the stop only\n"
		"                        hashes its last round; 'full' hashes both whole\n"
		"                        images at the stop (checks the dirty log too, at the\n"
		"                        cost of downtime)\n"
		"  --timeout-ms N        give up after N ms of silence from the peer, connecting\n"
		"                        and authenticating included (default 30000; 10000 to\n"
		"                        connect)\n"
		"  --json                newline-delimited JSON events on stdout\n"
		"  --metrics-file PATH   the state after each event, Prometheus text format,\n"
		"                        replaced atomically (node_exporter textfile collector)\n"
		"  --metrics-instance NAME  the vm=\"NAME\" label every series carries, so\n"
		"                        several engines' files share one textfile directory\n"
		"                        (default: the --qmp or --owner socket's path)\n"
		"  --tls-creds DIR       authenticate both sides with x509 certificates, QEMU's\n"
		"                        layout: ca-cert.pem, server-cert.pem and server-key.pem\n"
		"                        (incoming), client-cert.pem and client-key.pem (send)\n"
		"  --psk-file FILE       authenticate with a pre-shared key: IDENTITY:HEXKEY lines\n"
		"                        (psktool); with --tls-creds too, both are required\n"
		"  --tls-hostname NAME   the name the peer's certificate must carry (send:\n"
		"                        default the --to host; incoming: default any)\n"
		"  --tls-encrypt         tcp: encrypt the whole stream (TLS records); incoming:\n"
		"                        refuse sources that do not\n"
		"  -h, --help            this text\n"
		"  --version             the version, then exit\n"
		"\n"
		"Without --tls-creds or --psk-file the port is not authenticated: anyone who\n"
		"reaches it first can write the guest's RAM (and, with --qmp, the port the\n"
		"destination QEMU takes the device state on). Use them, or a trusted network.\n"
		"\n"
		"Exit codes: 0 completed, 1 peer/transport failure, timeout or failed\n"
		"authentication, 2 usage, 3 memory owner failure, 4 verification mismatch,\n"
		"5 peer protocol violation, 6 cancelled (SIGINT/SIGTERM), 7 setup (credentials\n"
		"that do not load, layouts differ, registration failed), 8 this host's QEMU\n"
		"refused a step or failed its part (--qmp), 9 send --qmp: the destination's\n"
		"QEMU did not load the device state, 10 send --qmp: the guest stays paused\n"
		"here and may run on the destination (look before you 'cont' it).\n"
		"On any failure the source's guest runs again and the destination discards\n"
		"what it received (with --qmp its QEMU quits), except in case 10.\n");
}

static const struct program_info program = { "vrdma-migrate", usage };

static int parse_rate(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;
	uint64_t mult = 1;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	if (*end == 'K' || *end == 'k')
		mult = 1ull << 10;
	else if (*end == 'M' || *end == 'm')
		mult = 1ull << 20;
	else if (*end == 'G' || *end == 'g')
		mult = 1ull << 30;
	else if (*end)
		return -EINVAL;
	if (mult > 1 && end[1])
		return -EINVAL;
	if (v == 0 || v > UINT64_MAX / mult)
		return -EINVAL;
	*ret = v * mult;
	return 0;
}

static int parse_args(int argc, char **argv, struct mig_cfg *cfg, struct cli *cli)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "to", required_argument, NULL, 't' },
		{ "owner", required_argument, NULL, 'o' },
		{ "qmp", required_argument, NULL, 'Q' },
		{ "state-port", required_argument, NULL, 'S' },
		{ "transport", required_argument, NULL, 'T' },
		{ "channels", required_argument, NULL, 'c' },
		{ "zerocopy", required_argument, NULL, 'z' },
		{ "downtime-ms", required_argument, NULL, 'd' },
		{ "max-bandwidth", required_argument, NULL, 'b' },
		{ "max-rounds", required_argument, NULL, 'r' },
		{ "verify", optional_argument, NULL, 'v' },
		/* Tests only, undocumented: see mig_cfg.test_corrupt. */
		{ "test-corrupt-round", required_argument, NULL, 'X' },
		{ "timeout-ms", required_argument, NULL, 'm' },
		{ "json", no_argument, NULL, 'j' },
		{ "metrics-file", required_argument, NULL, 'M' },
		{ "metrics-instance", required_argument, NULL, 'I' },
		{ "tls-creds", required_argument, NULL, 'C' },
		{ "psk-file", required_argument, NULL, 'P' },
		{ "tls-hostname", required_argument, NULL, 'H' },
		{ "tls-encrypt", no_argument, NULL, 'E' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	const char *addr = NULL;
	uint64_t v;
	int opt;

	if (argc < 2 || (strcmp(argv[1], "send") && strcmp(argv[1], "incoming"))) {
		if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
			usage(stdout);
			exit(EXIT_OK);
		}
		if (argc >= 2 && !strcmp(argv[1], "--version")) {
			program_print_version(&program);
			exit(EXIT_OK);
		}
		usage(stderr);
		return -EINVAL;
	}
	cli->incoming = strcmp(argv[1], "incoming") == 0;
	optind = 2;
	while ((opt = program_getopt(&program, argc, argv, "h", longopts, NULL)) != -1) {
		int r = 0;

		switch (opt) {
		case 'l':
		case 't':
			if ((opt == 'l') != cli->incoming) {
				log_error("--%s belongs to '%s'", opt == 'l' ? "listen" : "to",
					  opt == 'l' ? "incoming" : "send");
				return -EINVAL;
			}
			addr = optarg;
			break;
		case 'o': cfg->owner_path = optarg; break;
		case 'Q': cli->qmp_path = optarg; break;
		case 'S':
			r = parse_u64_range(optarg, 1, UINT16_MAX, &v);
			cli->state_port = (uint16_t)v;
			break;
		case 'T': r = xport_kind_parse(optarg, &cfg->xopts.kind); break;
		case 'c':
			r = parse_u64_range(optarg, 1, XPORT_MAX_CHANNELS, &v);
			cfg->xopts.channels = (unsigned)v;
			break;
		case 'z': r = xport_zerocopy_parse(optarg, &cfg->xopts.zerocopy); break;
		case 'd':
			r = parse_u64_range(optarg, 1, 3600000, &v);
			cfg->converge.downtime_limit_ns = v * 1000000;
			break;
		case 'b': r = parse_rate(optarg, &cfg->max_bandwidth); break;
		case 'r':
			r = parse_u64_range(optarg, 1, 100000, &v);
			cfg->converge.max_rounds = (unsigned)v;
			break;
		case 'v':
			cfg->verify = MIG_VERIFY_PAGES;
			if (optarg && strcmp(optarg, "full") == 0)
				cfg->verify = MIG_VERIFY_FULL;
			else if (optarg && strcmp(optarg, "pages") != 0)
				r = -EINVAL;
			break;
		case 'X':
			cfg->test_corrupt = true;
			cfg->test_corrupt_round = MIG_TEST_CORRUPT_STOP;
			if (strcmp(optarg, "stop") != 0) {
				r = parse_u64_range(optarg, 0, UINT32_MAX - 1, &v);
				cfg->test_corrupt_round = (uint32_t)v;
			}
			break;
		case 'm':
			r = parse_u64_range(optarg, 100, 86400000, &v);
			/* Silence is silence: while connecting and
			 * authenticating too (the default set-up limit is
			 * the transport's, 10 s). */
			cfg->peer_timeout_ms = (int)v;
			cfg->xopts.timeout_ms = (int)v;
			break;
		case 'j': cli->json = true; break;
		case 'M': cli->metrics_path = optarg; break;
		case 'I':
			r = *optarg && g_utf8_validate(optarg, -1, NULL) ? 0 : -EINVAL;
			cli->metrics_instance = optarg;
			break;
		case 'C': cli->auth.x509_dir = optarg; break;
		case 'P': cli->auth.psk_file = optarg; break;
		case 'H': cli->auth.hostname = optarg; break;
		case 'E': cfg->xopts.encrypt = true; break;
		default: return -EINVAL;
		}
		if (r < 0) {
			log_error("invalid value '%s' for --%s", optarg, option_long_name(longopts, opt));
			return r;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	if (cfg->test_corrupt && (cli->incoming || cfg->verify != MIG_VERIFY_PAGES)) {
		log_error("--test-corrupt-round belongs to 'send --verify=pages'");
		return -EINVAL;
	}
	if (!addr || !cfg->owner_path == !cli->qmp_path) {
		log_error("%s needs %s and one of --qmp or --owner", argv[1],
			  cli->incoming ? "--listen" : "--to");
		return -EINVAL;
	}
	/* QEMU's stream takes one kind of credentials, and its server checks
	 * no certificate name. */
	if (cli->qmp_path && cli->auth.x509_dir && cli->auth.psk_file) {
		log_error("--qmp takes --tls-creds or --psk-file, not both: QEMU's device-state "
			  "stream uses one kind of credentials");
		return -EINVAL;
	}
	if (cli->qmp_path && cli->incoming && cli->auth.hostname) {
		log_error("incoming --qmp cannot check the source's certificate name "
			  "(--tls-hostname): QEMU's device-state stream would take any certificate "
			  "of the CA; give the source its own CA instead");
		return -EINVAL;
	}
	if (cli->state_port && (!cli->incoming || !cli->qmp_path)) {
		log_error("--state-port belongs to 'incoming --qmp'");
		return -EINVAL;
	}
	/* The socket is this host's one name for the guest. */
	if (!cli->metrics_instance)
		cli->metrics_instance = cli->qmp_path ? cli->qmp_path : cfg->owner_path;
	if ((cli->auth.hostname || cfg->xopts.encrypt) && !cli->auth.x509_dir &&
	    !cli->auth.psk_file) {
		log_error("--tls-hostname and --tls-encrypt need --tls-creds or --psk-file");
		return -EINVAL;
	}
	if (cfg->xopts.encrypt && (cfg->xopts.kind == XPORT_KIND_RDMA ||
				   (cfg->xopts.kind == XPORT_KIND_AUTO && xport_rdma_device_count() > 0))) {
		log_error("--tls-encrypt is for the tcp transport (RDMA WRITEs bypass the CPU): "
			  "add --transport tcp");
		return -EINVAL;
	}
	if (cli->auth.hostname && !cli->auth.x509_dir) {
		log_error("--tls-hostname needs --tls-creds (a pre-shared key names no host)");
		return -EINVAL;
	}
	if (xport_parse_hostport(addr, (char **)&cfg->host, (char **)&cfg->port) < 0) {
		log_error("bad address '%s': want HOST:PORT", addr);
		return -EINVAL;
	}
	if (!cli->incoming && !*cfg->host) {
		log_error("--to needs a host");
		return -EINVAL;
	}
	cli->auth.server = cli->incoming;
	return 0;
}

/* The credentials, or a message naming the file and what is wrong with it. */
static int load_auth(const struct cli *cli, struct xport_auth **ret)
{
	g_autofree char *file = NULL;
	int r;

	if (!cli->auth.x509_dir && !cli->auth.psk_file)
		return 0;
	r = xport_auth_new(&cli->auth, ret, &file);
	if (r == -EPERM)
		log_error("%s: a key file must not be readable or writable by group or others "
			  "(chmod 600 it)", file);
	else if (r == -EBADMSG)
		log_error("%s: not a valid %s", file ? file : "?",
			  cli->auth.psk_file && file && !strcmp(file, cli->auth.psk_file)
				  ? "key file (IDENTITY:HEXKEY lines, 16..64 byte keys)"
				  : "certificate, key or CRL (PEM)");
	else if (r < 0)
		log_error("%s: %s", file ? file : "credentials", strerror(-r));
	return r;
}

/*
 * A peer the listener refused (incoming), or an authentication with the
 * destination that failed (send): logged once, with the address and why.
 */
static void log_refused(void *opaque, const struct sockaddr *peer, socklen_t len, int err,
			const char *reason)
{
	char host[NI_MAXHOST] = "(unknown)", port[NI_MAXSERV] = "?";
	const struct cli *cli = opaque;

	if (len)
		getnameinfo(peer, len, host, sizeof(host), port, sizeof(port),
			    NI_NUMERICHOST | NI_NUMERICSERV);
	if (!cli->incoming)
		log_error("authentication with %s port %s failed: %s (%s)", host, port,
			  reason ? reason : strerror(-err), strerror(-err));
	else if (reason)
		log_warn("refused a connection from %s port %s: %s (%s)", host, port, reason,
			 strerror(-err));
	else
		log_warn("refused a connection from %s port %s: %s", host, port, strerror(-err));
}

/*
 * --qmp: the end on this side, and where the guest is, in words and (with
 * --json) as a last event.  EXIT_GUEST_UNKNOWN when it may run on the
 * destination while it waits here: the operator must look.
 */
static int end_qemu(const struct cli *cli, struct qemu_ctl *qemu, const struct mig_stats *st)
{
	static const char *const places[] = { [QEMU_GUEST_DESTINATION] = "destination",
					      [QEMU_GUEST_SOURCE] = "source",
					      [QEMU_GUEST_UNKNOWN] = "unknown" };
	enum qemu_guest_place place;
	int r = qemu_ctl_end(qemu, st, &place);

	if (r < 0)
		log_error("QEMU at %s: %s", cli->qmp_path, qemu->error);
	else if (st->failure != MIG_FAIL_NONE && !cli->incoming)
		log_info("the guest runs on this host again (unless it was paused)");
	else if (st->failure != MIG_FAIL_NONE && place == QEMU_GUEST_DESTINATION)
		log_warn("the guest is on this host now, but the source may not have heard it");
	else if (st->failure != MIG_FAIL_NONE)
		log_info("this host's QEMU quit: it never ran the guest");
	if (cli->json) {
		g_autoptr(JsonBuilder) b = json_builder_new();
		g_autofree char *text = NULL;

		json_builder_begin_object(b);
		json_out_str(b, "event", "guest");
		json_out_str(b, "place", places[place]);
		if (r < 0 && qemu->error)
			json_out_str(b, "error-desc", qemu->error);
		json_builder_end_object(b);
		text = json_out_text(b, FALSE);
		printf("%s\n", text);
		fflush(stdout);
	}
	return place == QEMU_GUEST_UNKNOWN ? EXIT_GUEST_UNKNOWN : exit_code(st);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct xport_auth *auth = NULL;
	struct qemu_ctl qemu = { 0 };
	struct cli cli = { 0 };
	struct mig_stats st = { 0 };
	struct mig_cfg cfg;
	int r, code;

	log_init("vrdma-migrate", LOG_LVL_INFO);
	mig_cfg_default(&cfg);
	if (parse_args(argc, argv, &cfg, &cli) < 0)
		return EXIT_USAGE;
	if (load_auth(&cli, &auth) < 0) {
		g_free((char *)cfg.host);
		g_free((char *)cfg.port);
		return EXIT_SETUP;
	}
	cli.tty = isatty(STDERR_FILENO);
	cfg.cancel = &cancelled;
	cfg.xopts.auth = auth;
	cfg.xopts.on_refused = log_refused;
	cfg.xopts.refused_opaque = &cli;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (cli.qmp_path) {
		r = qemu_ctl_open(&qemu, cli.qmp_path, cli.incoming, cfg.host, cli.state_port,
				  cli.auth.x509_dir, cli.auth.psk_file, cli.auth.hostname,
				  cfg.owner_timeout_ms);
		frontend = &qemu;
		if (r < 0) {
			/* Nothing was asked of the engine: the guest is where it was. */
			log_error("QEMU at %s: %s", cli.qmp_path, qemu.error);
			st.status = "failed";
			st.failure = MIG_FAIL_FRONTEND;
			st.error = r;
			if (cli.json)
				print_json_event(&(struct mig_event){ MIG_EV_FAILED, &st });
			code = EXIT_QEMU;
			goto out;
		}
		cfg.owner_path = qemu.owner_path;
		cfg.handoff = &qemu.handoff;
	}
	r = cli.incoming ? mig_incoming(&cfg, on_event, &cli, &st)
			 : mig_send(&cfg, on_event, &cli, &st);
	if (!cli.json) {
		if (r < 0)
			log_error("migration failed (%s): %s", failure_text(st.failure),
				  failure_reason(st.failure, r));
		print_summary(&st);
	}
	code = cli.qmp_path ? end_qemu(&cli, &qemu, &st) : exit_code(&st);
out:
	qemu_ctl_close(&qemu);
	g_free((char *)cfg.host);
	g_free((char *)cfg.port);
	xport_auth_free(auth);
	return code;
}

// SPDX-License-Identifier: MIT
/*
 * vrdma-perf: ib_write_bw / ib_write_lat style measurements over xport,
 * on either back end, so the two can be compared with perftest's numbers
 * from the same machine.
 *
 *   server:  vrdma-perf [OPTIONS]
 *   client:  vrdma-perf [OPTIONS] SERVER
 *
 * write_bw: the client streams RDMA WRITEs of --size bytes into one remote
 * buffer; the clock stops when the server has acknowledged a message sent
 * after the last write on every channel, so tcp and rdma are timed alike.
 * write_lat: WRITE_WITH_IMM ping-pong; half the round trip is reported.
 */
#include <errno.h>
#include <getopt.h>
#include <glib.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "log.h"
#include "parse-num.h"
#include "program.h"
#include "util.h"
#include "xport.h"

#define MIB (1024.0 * 1024.0)
#define CONTROL_TIMEOUT_MS 30000
#define BW_WINDOWS 10

enum perf_test { TEST_WRITE_BW, TEST_WRITE_LAT };

struct perf_cfg {
	enum perf_test test;
	struct xport_opts xopts;
	uint32_t size;
	uint64_t iters;
	const char *port;
	const char *bind;
	const char *server;
	bool iters_set;
};

struct perf_side {
	struct xport_conn *conn;
	uint8_t *buf;
	struct xport_mr *mr;
	struct xport_remote remote;
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int fail(const char *what, int err)
{
	log_error("%s: %s", what, strerror(-err));
	return 1;
}

/* Busy-polls for one completion: this is a benchmark, latency matters. */
static int poll_one(struct xport_conn *c, struct xport_completion *comp,
		    int timeout_ms)
{
	double deadline = now_us() + timeout_ms * 1000.0;

	for (;;) {
		int r = xport_poll(c, comp, 1);

		if (r < 0)
			return r;
		if (r == 1)
			return comp->status;
		if (now_us() > deadline)
			return -ETIMEDOUT;
	}
}

/* Waits for a message (RECV); send completions on the way are skipped. */
static int recv_msg(struct xport_conn *c, void *buf, size_t len)
{
	struct xport_completion comp;

	for (;;) {
		int r = poll_one(c, &comp, CONTROL_TIMEOUT_MS);

		if (r < 0)
			return r;
		if (comp.op != XPORT_OP_RECV)
			continue;
		if (comp.len != len)
			return -EPROTO;
		memcpy(buf, comp.data, len);
		return 0;
	}
}

static int send_msg(struct xport_conn *c, unsigned channel, const void *buf,
		    size_t len)
{
	for (;;) {
		struct xport_completion comp;
		int r = xport_send_copy(c, channel, buf, len, 0, 0);

		if (r != -EAGAIN)
			return r;
		r = xport_poll(c, &comp, 1);
		if (r < 0)
			return r;
	}
}

/* Registers a buffer of cfg->size and swaps region descriptors. */
static int setup_buffers(const struct perf_cfg *cfg, struct perf_side *s)
{
	uint8_t desc[XPORT_REGION_DESC_SIZE];
	int r;

	s->buf = mmap(NULL, cfg->size, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (s->buf == MAP_FAILED)
		return -errno;
	memset(s->buf, 0x5a, cfg->size);
	r = xport_mr_reg(s->conn, s->buf, cfg->size,
			 XPORT_ACCESS_REMOTE_WRITE, &s->mr);
	if (r < 0)
		return r;
	r = xport_mr_describe(s->mr, desc);
	if (r == 0)
		r = send_msg(s->conn, 0, desc, sizeof(desc));
	if (r == 0)
		r = recv_msg(s->conn, desc, sizeof(desc));
	if (r == 0)
		r = xport_remote_import(s->conn, desc, sizeof(desc), &s->remote);
	return r;
}

/* ---- write_bw ---- */

static void print_bw(const struct perf_cfg *cfg, double elapsed_us, double peak)
{
	double bytes = (double)cfg->size * (double)cfg->iters;
	double avg = bytes / MIB / (elapsed_us / 1e6);

	printf("---------------------------------------------------------------------------------------\n");
	printf(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
	printf(" %-10u %-16llu %-18.2f %-20.2f %.6f\n", cfg->size,
	       (unsigned long long)cfg->iters, peak, avg,
	       (double)cfg->iters / elapsed_us);
	printf("---------------------------------------------------------------------------------------\n");
}

static int bw_client(const struct perf_cfg *cfg, struct perf_side *s)
{
	unsigned channels = xport_conn_channels(s->conn);
	uint64_t window = MAX(cfg->iters / BW_WINDOWS, 1), posted = 0;
	double start, window_start, peak = 0;
	struct xport_sge sg = { .mr = s->mr, .len = cfg->size };
	struct xport_wr wr = {
		.op = XPORT_OP_WRITE, .sg = &sg, .nsg = 1, .remote = &s->remote,
	};
	uint8_t ack;
	int r;

	start = window_start = now_us();
	while (posted < cfg->iters) {
		struct xport_completion comp[64];

		wr.channel = (unsigned)(posted % channels);
		/* Doorbell once per batch of channels: fewer syscalls / MMIOs. */
		wr.flags = (posted + 1) % 16 && posted + 1 < cfg->iters ? XPORT_F_MORE : 0;
		r = xport_post(s->conn, &wr);
		if (r == 0) {
			posted++;
			if (posted % window == 0) {
				double t = now_us();

				peak = MAX(peak, (double)window * cfg->size / MIB /
						       ((t - window_start) / 1e6));
				window_start = t;
			}
			continue;
		}
		if (r != -EAGAIN)
			return fail("post write", r);
		r = xport_poll(s->conn, comp, 64);
		if (r < 0)
			return fail("poll", r);
	}
	/* One message per channel, ordered behind that channel's writes. */
	for (unsigned ch = 0; ch < channels; ch++) {
		r = send_msg(s->conn, ch, "E", 1);
		if (r < 0)
			return fail("send end marker", r);
	}
	r = recv_msg(s->conn, &ack, 1);
	if (r < 0)
		return fail("wait for the server's acknowledgement", r);
	print_bw(cfg, now_us() - start, peak);
	return 0;
}

static int bw_server(struct perf_side *s)
{
	unsigned channels = xport_conn_channels(s->conn), ends = 0;
	uint8_t mark;

	while (ends < channels) {
		/* No timeout that a slow transfer could hit: the peer ends it. */
		struct xport_completion comp;
		int r = xport_poll(s->conn, &comp, 1);

		if (r < 0)
			return fail("receive", r);
		if (r == 1 && comp.op == XPORT_OP_RECV)
			ends++;
		if (r == 0)
			xport_wait(s->conn, 1000);
	}
	mark = 'A';
	return send_msg(s->conn, 0, &mark, 1) < 0;
}

/* ---- write_lat ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void print_lat(const struct perf_cfg *cfg, double *lat, uint64_t n)
{
	double sum = 0, sq = 0, avg, stdev;

	qsort(lat, n, sizeof(*lat), cmp_double);
	for (uint64_t i = 0; i < n; i++)
		sum += lat[i];
	avg = sum / (double)n;
	for (uint64_t i = 0; i < n; i++)
		sq += (lat[i] - avg) * (lat[i] - avg);
	stdev = sqrt(sq / (double)n);
	printf("---------------------------------------------------------------------------------------\n");
	printf(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec]\n");
	printf(" %-6u %-14llu %-14.2f %-12.2f %-16.2f %-14.2f %-15.2f %-22.2f %.2f\n",
	       cfg->size, (unsigned long long)n, lat[0], lat[n - 1], lat[n / 2], avg,
	       stdev, lat[(uint64_t)((double)n * 0.99)],
	       lat[(uint64_t)((double)n * 0.999)]);
	printf("---------------------------------------------------------------------------------------\n");
}

static int ping(const struct perf_cfg *cfg, struct perf_side *s, uint32_t seq)
{
	struct xport_sge sg = { .mr = s->mr, .len = cfg->size };
	struct xport_wr wr = {
		.op = XPORT_OP_WRITE_IMM, .sg = &sg, .nsg = 1, .remote = &s->remote,
		.imm = seq,
	};
	int r;

	for (;;) {
		struct xport_completion comp;

		r = xport_post(s->conn, &wr);
		if (r != -EAGAIN)
			return r;
		r = xport_poll(s->conn, &comp, 1);
		if (r < 0)
			return r;
	}
}

/* Waits for the peer's WRITE_WITH_IMM carrying seq. */
static int pong(struct perf_side *s, uint32_t seq)
{
	struct xport_completion comp;

	for (;;) {
		int r = poll_one(s->conn, &comp, CONTROL_TIMEOUT_MS);

		if (r < 0)
			return r;
		if (comp.op == XPORT_OP_RECV_IMM)
			return comp.imm == seq ? 0 : -EPROTO;
	}
}

static int lat_client(const struct perf_cfg *cfg, struct perf_side *s)
{
	g_autofree double *lat = g_new(double, cfg->iters);
	int r;

	for (uint64_t i = 0; i < cfg->iters; i++) {
		double t0 = now_us();

		r = ping(cfg, s, (uint32_t)i);
		if (r == 0)
			r = pong(s, (uint32_t)i);
		if (r < 0)
			return fail("ping-pong", r);
		lat[i] = (now_us() - t0) / 2;
	}
	print_lat(cfg, lat, cfg->iters);
	return 0;
}

static int lat_server(const struct perf_cfg *cfg, struct perf_side *s)
{
	for (uint64_t i = 0; i < cfg->iters; i++) {
		int r = pong(s, (uint32_t)i);

		if (r == 0)
			r = ping(cfg, s, (uint32_t)i);
		if (r < 0)
			return fail("ping-pong", r);
	}
	return 0;
}

/* ---- main ---- */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: vrdma-perf [OPTIONS]            run as server\n"
		"       vrdma-perf [OPTIONS] SERVER     run as client\n"
		"\n"
		"  -t, --transport KIND   rdma, tcp or auto (default: auto = rdma if a device exists)\n"
		"      --test NAME        write_bw (default) or write_lat\n"
		"  -s, --size BYTES       message size (default 65536)\n"
		"  -n, --iters N          iterations (default 5000 for bw, 1000 for lat)\n"
		"  -p, --port PORT        port (default 18515)\n"
		"  -b, --bind ADDR        server: address to listen on (default: any)\n"
		"  -q, --channels N       QPs / sockets (default 1)\n"
		"      --tx-depth N       outstanding writes per channel (default 128)\n"
		"      --signal N         signal every N-th write (default 16)\n"
		"      --zerocopy MODE    tcp: auto, on or off (default auto: large sends to another host)\n"
		"  -h, --help             this text\n"
		"      --version          the version, then exit\n"
		"\n"
		"Both sides must use the same --transport, --test, --size and --iters.\n"
		"Bandwidth is in MiB/s (perftest's 'MB/sec').\n");
}

static const struct program_info program = { "vrdma-perf", usage };

static int parse_args(int argc, char **argv, struct perf_cfg *cfg)
{
	static const struct option longopts[] = {
		{ "transport", required_argument, NULL, 't' },
		{ "test", required_argument, NULL, 'T' },
		{ "size", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'n' },
		{ "port", required_argument, NULL, 'p' },
		{ "bind", required_argument, NULL, 'b' },
		{ "channels", required_argument, NULL, 'q' },
		{ "tx-depth", required_argument, NULL, 'D' },
		{ "signal", required_argument, NULL, 'S' },
		{ "zerocopy", required_argument, NULL, 'Z' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	uint64_t v;
	int opt;

	xport_opts_init(&cfg->xopts);
	cfg->size = 65536;
	cfg->port = "18515";
	while ((opt = program_getopt(&program, argc, argv, "t:s:n:p:b:q:h", longopts, NULL)) != -1) {
		int r = 0;

		switch (opt) {
		case 't':
			r = xport_kind_parse(optarg, &cfg->xopts.kind);
			break;
		case 'T':
			if (strcmp(optarg, "write_bw") == 0)
				cfg->test = TEST_WRITE_BW;
			else if (strcmp(optarg, "write_lat") == 0)
				cfg->test = TEST_WRITE_LAT;
			else
				r = -EINVAL;
			break;
		case 's':
			r = parse_u64_range(optarg, 1, 1u << 30, &v);
			cfg->size = (uint32_t)v;
			break;
		case 'n':
			r = parse_u64_range(optarg, 1, 1ull << 40, &cfg->iters);
			cfg->iters_set = true;
			break;
		case 'p': cfg->port = optarg; break;
		case 'b': cfg->bind = optarg; break;
		case 'q':
			r = parse_u64_range(optarg, 1, XPORT_MAX_CHANNELS, &v);
			cfg->xopts.channels = (unsigned)v;
			break;
		case 'D':
			r = parse_u64_range(optarg, 1, 4096, &v);
			cfg->xopts.send_depth = (unsigned)v;
			break;
		case 'S':
			r = parse_u64_range(optarg, 1, 4096, &v);
			cfg->xopts.signal_interval = (unsigned)v;
			break;
		case 'Z': r = xport_zerocopy_parse(optarg, &cfg->xopts.zerocopy); break;
		default:
			return -EINVAL;
		}
		if (r < 0) {
			log_error("invalid value for --%s: '%s'", option_long_name(longopts, opt),
				  optarg);
			return r;
		}
	}
	if (optind + 1 < argc) {
		usage(stderr);
		return -EINVAL;
	}
	cfg->server = optind < argc ? argv[optind] : NULL;
	if (!cfg->iters_set)
		cfg->iters = cfg->test == TEST_WRITE_BW ? 5000 : 1000;
	cfg->xopts.signal_interval = MIN(cfg->xopts.signal_interval, cfg->xopts.send_depth);
	return 0;
}

static int run(const struct perf_cfg *cfg)
{
	_cleanup_(xport_listener_closep) struct xport_listener *listener = NULL;
	_cleanup_(xport_conn_closep) struct xport_conn *conn = NULL;
	struct perf_side side = { 0 };
	int r;

	if (cfg->server) {
		r = xport_connect(&cfg->xopts, cfg->server, cfg->port, &conn);
		if (r < 0)
			return fail("connect", r);
	} else {
		r = xport_listen(&cfg->xopts, cfg->bind, cfg->port, &listener);
		if (r < 0)
			return fail("listen", r);
		printf(" waiting for a client on port %d\n", xport_listener_port(listener));
		r = xport_accept(listener, -1, &conn);
		if (r < 0)
			return fail("accept", r);
	}
	side.conn = conn;
	r = setup_buffers(cfg, &side);
	if (r < 0)
		return fail("exchange buffers", r);
	printf(" transport: %s  channels: %u  size: %u  iterations: %llu\n",
	       xport_kind_name(xport_conn_kind(conn)), xport_conn_channels(conn),
	       cfg->size, (unsigned long long)cfg->iters);
	if (cfg->test == TEST_WRITE_BW)
		r = cfg->server ? bw_client(cfg, &side) : bw_server(&side);
	else
		r = cfg->server ? lat_client(cfg, &side) : lat_server(cfg, &side);
	xport_mr_dereg(side.mr);
	return r;
}

int main(int argc, char **argv)
{
	struct perf_cfg cfg = { 0 };

	log_init("vrdma-perf", LOG_LVL_INFO);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse_args(argc, argv, &cfg) < 0)
		return 2;
	return run(&cfg);
}

/* SPDX-License-Identifier: MIT */
/*
 * vhost-bench: one vhost-user blk back end measured through vu-front, driven
 * the way QEMU and a Linux guest drive it: EVENT_IDX and indirect descriptors
 * negotiated, the inflight area set up when offered, every request one
 * indirect chain, completions waited for on the call eventfd (poll), never
 * by busy polling. The same code runs against every back end.
 *
 *   vhost-bench --make-file PATH --size-mib N
 *   vhost-bench --socket PATH [--seconds S] [--warmup S]
 *
 * The file holds, in the 8-byte word at byte offset o, o | tag << 40: tag 0
 * when made, a per-run tag where a run wrote. Reads poison and then check the
 * first word of every sector they get back, writes are read back at the end,
 * so a back end that returns wrong data, or none, fails the run (exit 1).
 * Results are "metric value" lines on stdout; lines starting with # are notes.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>
#include <unistd.h>

#include "util.h"
#include "vt-dev.h"
#include "vu-front.h"

#define CONNECT_TIMEOUT_MS	20000
/* No completion for this long means the back end is stuck: an error. */
#define COMPLETION_TIMEOUT_MS	5000
/* QEMU 7.2 vhost-user-blk-pci's default queue-size. */
#define QUEUE_SIZE		128u
#define MAX_DEPTH		32u
#define MAX_IO			(1u << 20)
#define GUEST_RAM_SIZE		(48ull << 20)
#define BLK_HDR_SIZE		16u
#define OFFSET_BITS		40
#define OFFSET_MASK		((1ull << OFFSET_BITS) - 1)
#define WRITE_READBACK		64u

/*
 * What QEMU's vhost-user-blk front end asks for and a Linux virtio-blk
 * driver accepts. No BACKEND_REQ (no config changes happen here) and no
 * STATUS (neither back end acts on it).
 */
#define WANT_FEATURES (VUF_BIT(VUF_F_VERSION_1) | VUF_BIT(VUF_F_INDIRECT_DESC) | \
		       VUF_BIT(VUF_F_EVENT_IDX) | VUF_BIT(VUF_BLK_F_SEG_MAX) | \
		       VUF_BIT(VUF_BLK_F_BLK_SIZE) | VUF_BIT(VUF_BLK_F_FLUSH) | \
		       VUF_BIT(VUF_BLK_F_MQ) | VUF_BIT(VUF_F_PROTOCOL_FEATURES))
#define WANT_PROTOCOL (VUF_BIT(VUF_PF_MQ) | VUF_BIT(VUF_PF_LOG_SHMFD) | \
		       VUF_BIT(VUF_PF_REPLY_ACK) | VUF_BIT(VUF_PF_CONFIG) | \
		       VUF_BIT(VUF_PF_INFLIGHT_SHMFD) | VUF_BIT(VUF_PF_RESET_DEVICE) | \
		       VUF_BIT(VUF_PF_CONFIG_MEM_SLOTS))

struct job {
	const char *name;
	uint32_t type;		/* VUF_BLK_T_IN or _OUT */
	uint32_t io_bytes;
	unsigned depth;
	bool random;
	bool latency;		/* report median and p99 instead of a rate */
};

static const struct job jobs[] = {
	{ "rr4k_qd1", VUF_BLK_T_IN, 4096, 1, true, true },
	{ "rr4k_qd32", VUF_BLK_T_IN, 4096, 32, true, false },
	{ "sr1m_qd4", VUF_BLK_T_IN, 1u << 20, 4, false, false },
	{ "rw4k_qd32", VUF_BLK_T_OUT, 4096, 32, true, false },
};

struct slot {
	uint64_t hdr_gpa, data_gpa;
	uint8_t *hdr, *data;	/* status byte at hdr + BLK_HDR_SIZE */
	uint64_t offset;
	uint64_t posted_ns;
};

struct bench_dev {
	struct vt_dev dev;	/* one queue */
	uint64_t capacity;	/* bytes */
	int inflight_fd;
	struct slot slots[MAX_DEPTH];
	struct slot *by_head[QUEUE_SIZE];
	uint64_t tag;		/* this run's write tag */
};

/* The first failure, for the one message main prints. */
struct failure {
	const char *what;
	uint64_t offset, expected, got;
};

struct latencies {
	uint32_t *ns;
	size_t n, cap;
};

struct run {
	struct bench_dev *d;
	const struct job *job;
	uint64_t end_ns;
	uint64_t rng;
	uint64_t next_seq;
	unsigned inflight;
	uint64_t ops;
	struct latencies *lat;
	uint64_t written[WRITE_READBACK];
	uint64_t nwritten;
	struct failure *fail;
};

static uint64_t xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t pattern_word(uint64_t offset, uint64_t tag)
{
	return offset | tag << OFFSET_BITS;
}

static uint64_t load_word(const uint8_t *p)
{
	uint64_t w;

	memcpy(&w, p, sizeof(w));
	return w;
}

static void store_word(uint8_t *p, uint64_t w)
{
	memcpy(p, &w, sizeof(w));
}

static int make_file(const char *path, uint64_t size_mib)
{
	_cleanup_(closep) int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	uint8_t *buf = malloc(MAX_IO);
	int ret = 0;

	if (fd < 0 || !buf) {
		free(buf);
		return fd < 0 ? -errno : -ENOMEM;
	}
	for (uint64_t off = 0; off < (size_mib << 20) && !ret; off += MAX_IO) {
		for (uint32_t i = 0; i < MAX_IO; i += 8)
			store_word(buf + i, pattern_word(off + i, 0));
		if (pwrite(fd, buf, MAX_IO, (off_t)off) != MAX_IO)
			ret = -EIO;
	}
	free(buf);
	return ret;
}

/* ---- device setup, in QEMU's order ---- */

static int setup_inflight(struct bench_dev *d)
{
	struct vuf_inflight_desc desc;
	int ret;

	if (!(d->dev.protocol & VUF_BIT(VUF_PF_INFLIGHT_SHMFD)))
		return 0;
	ret = vuf_get_inflight_fd(d->dev.c, 1, QUEUE_SIZE, &desc, &d->inflight_fd);
	return ret ?: vuf_set_inflight_fd(d->dev.c, &desc, d->inflight_fd);
}

static int alloc_slots(struct bench_dev *d)
{
	for (unsigned i = 0; i < MAX_DEPTH; i++) {
		struct slot *s = &d->slots[i];
		int ret = vuf_mem_alloc(d->dev.mem, BLK_HDR_SIZE + 16, 16, &s->hdr_gpa);

		if (!ret)
			ret = vuf_mem_alloc(d->dev.mem, MAX_IO, 4096, &s->data_gpa);
		if (ret)
			return ret;
		s->hdr = vuf_mem_ptr(d->dev.mem, s->hdr_gpa, BLK_HDR_SIZE + 1);
		s->data = vuf_mem_ptr(d->dev.mem, s->data_gpa, MAX_IO);
	}
	return 0;
}

static int dev_open(struct bench_dev *d, const char *sock)
{
	struct vuf_blk_config cfg;
	int ret;

	d->inflight_fd = -1;
	ret = vt_dev_connect(&d->dev, sock, CONNECT_TIMEOUT_MS, WANT_FEATURES, WANT_PROTOCOL);
	if (ret)
		return ret;
	/* Without these the numbers would not be what a guest sees. */
	if (!(d->dev.features & VUF_BIT(VUF_F_EVENT_IDX)) ||
	    !(d->dev.features & VUF_BIT(VUF_F_INDIRECT_DESC)) ||
	    !(d->dev.protocol & VUF_BIT(VUF_PF_CONFIG)))
		return -EOPNOTSUPP;
	ret = vuf_blk_get_config(d->dev.c, &cfg);
	if (!ret)
		ret = setup_inflight(d);
	if (!ret)
		ret = vuf_mem_add_region(d->dev.mem, 0, GUEST_RAM_SIZE, 0);
	if (!ret)
		ret = vt_dev_start_queues(&d->dev, 1, QUEUE_SIZE, true);
	if (!ret)
		ret = alloc_slots(d);
	if (ret)
		return ret;
	if (cfg.capacity > (OFFSET_MASK >> 9) || cfg.capacity * VUF_BLK_SECTOR < MAX_IO)
		return -ERANGE;
	d->capacity = cfg.capacity * VUF_BLK_SECTOR;
	return 0;
}

static void dev_close(struct bench_dev *d)
{
	vt_dev_close(&d->dev);
	closep(&d->inflight_fd);
}

/* ---- requests ---- */

static void fill_write(struct slot *s, uint32_t len, uint64_t tag)
{
	for (uint32_t i = 0; i < len; i += 8)
		store_word(s->data + i, pattern_word(s->offset + i, tag));
}

/* A word no correct read leaves: its offset bits are not sector-aligned. */
static void poison_read(struct slot *s, uint32_t len)
{
	for (uint32_t i = 0; i < len; i += VUF_BLK_SECTOR)
		store_word(s->data + i, UINT64_MAX);
}

static int post(struct run *r, struct slot *s, uint64_t offset)
{
	struct bench_dev *d = r->d;
	uint32_t len = r->job->io_bytes;
	struct vuf_buf bufs[3] = {
		{ .gpa = s->hdr_gpa, .len = BLK_HDR_SIZE },
		{ .gpa = s->data_gpa, .len = len, .device_writes = r->job->type == VUF_BLK_T_IN },
		{ .gpa = s->hdr_gpa + BLK_HDR_SIZE, .len = 1, .device_writes = true },
	};
	uint16_t head;
	int ret;

	s->offset = offset;
	if (r->job->type == VUF_BLK_T_OUT)
		fill_write(s, len, d->tag);
	else
		poison_read(s, len);
	put_le32(s->hdr, r->job->type);
	put_le32(s->hdr + 4, 0);
	put_le64(s->hdr + 8, offset / VUF_BLK_SECTOR);
	s->hdr[BLK_HDR_SIZE] = 0xff;
	s->posted_ns = monotonic_ns();
	/* Linux puts any multi-buffer request in an indirect table when it can. */
	ret = vuf_vq_add(&d->dev.vq[0], bufs, ARRAY_SIZE(bufs), true, &head);
	if (ret)
		return ret;
	d->by_head[head] = s;
	r->inflight++;
	return 0;
}

static uint64_t next_offset(struct run *r)
{
	uint64_t bs = r->job->io_bytes, blocks = r->d->capacity / bs, off;

	if (r->job->random)
		return xorshift64(&r->rng) % blocks * bs;
	off = r->next_seq;
	r->next_seq = (off + bs) % (blocks * bs);
	return off;
}

static int fail(struct run *r, const char *what, uint64_t offset, uint64_t expected,
		uint64_t got)
{
	*r->fail = (struct failure){ what, offset, expected, got };
	return -EBADMSG;
}

/* exact_tag: the word must carry this run's tag (write read-back). */
static int check_read(struct run *r, const struct slot *s, bool exact_tag)
{
	uint64_t mask = exact_tag ? UINT64_MAX : OFFSET_MASK;

	for (uint32_t i = 0; i < r->job->io_bytes; i += VUF_BLK_SECTOR) {
		uint64_t want = pattern_word(s->offset + i, r->d->tag) & mask;
		uint64_t w = load_word(s->data + i);

		if ((w & mask) != want)
			return fail(r, "read returned wrong data", s->offset + i, want, w);
	}
	return 0;
}

static int complete(struct run *r, const struct slot *s, uint64_t now, bool exact_tag)
{
	uint8_t status = __atomic_load_n(&s->hdr[BLK_HDR_SIZE], __ATOMIC_ACQUIRE);
	struct latencies *lat = r->lat;

	if (status != VUF_BLK_S_OK)
		return fail(r, "request status not OK", s->offset, VUF_BLK_S_OK, status);
	if (r->job->type == VUF_BLK_T_IN) {
		int ret = check_read(r, s, exact_tag);

		if (ret)
			return ret;
	} else {
		r->written[r->nwritten++ % WRITE_READBACK] = s->offset;
	}
	if (lat && lat->n < lat->cap)
		lat->ns[lat->n++] = (uint32_t)MIN(now - s->posted_ns, UINT32_MAX);
	r->ops++;
	return 0;
}

/*
 * Sleeps on the call eventfd until a used entry is there. Reaping moved
 * used_event to last_used (as Linux does); the fence orders that store
 * before the used-idx load, mirroring the device's idx store -> used_event
 * load, so an entry published after the check always signals.
 */
static int wait_used(struct vuf_vq *vq)
{
	for (;;) {
		int ret;

		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (vuf_vq_pending_used(vq))
			return 0;
		ret = vuf_vq_wait_call(vq, COMPLETION_TIMEOUT_MS);
		if (ret)
			return ret;
	}
}

/* Completes what is in the used ring, reposting while time remains. */
static int reap_all(struct run *r, bool exact_tag, bool repost)
{
	struct vuf_vq *vq = &r->d->dev.vq[0];

	while (vuf_vq_pending_used(vq)) {
		struct vuf_used u;
		struct slot *s;
		uint64_t now;
		int ret = vuf_vq_wait_used(vq, 0, &u);

		if (ret)
			return ret;
		now = monotonic_ns();
		s = r->d->by_head[u.id];
		r->inflight--;
		ret = complete(r, s, now, exact_tag);
		if (!ret && repost && now < r->end_ns)
			ret = post(r, s, next_offset(r));
		if (ret)
			return ret;
	}
	return 0;
}

/* Keeps job->depth requests in flight for duration_ns; ret_ns: until the last completed. */
static int run_job(struct run *r, uint64_t duration_ns, uint64_t *ret_ns)
{
	uint64_t start = monotonic_ns();
	int ret = 0;

	r->end_ns = start + duration_ns;
	for (unsigned i = 0; i < r->job->depth && !ret; i++)
		ret = post(r, &r->d->slots[i], next_offset(r));
	if (!ret)
		ret = vuf_vq_kick(&r->d->dev.vq[0]);
	while (!ret && r->inflight) {
		ret = wait_used(&r->d->dev.vq[0]);
		if (!ret)
			ret = reap_all(r, false, true);
		/* One notification per batch, as blk-mq does for the last request. */
		if (!ret)
			ret = vuf_vq_kick(&r->d->dev.vq[0]);
	}
	*ret_ns = monotonic_ns() - start;
	return ret;
}

/* Reads back what the write job wrote last; it must carry this run's tag. */
static int read_back(struct run *w)
{
	const struct job readback = { "readback", VUF_BLK_T_IN, w->job->io_bytes, 1, false, false };
	struct run r = { .d = w->d, .job = &readback, .fail = w->fail };
	uint64_t n = MIN(w->nwritten, WRITE_READBACK);
	int ret = 0;

	for (uint64_t i = 0; i < n && !ret; i++) {
		ret = post(&r, &w->d->slots[0], w->written[i]);
		if (!ret)
			ret = vuf_vq_kick(&w->d->dev.vq[0]);
		if (!ret)
			ret = wait_used(&w->d->dev.vq[0]);
		if (!ret)
			ret = reap_all(&r, true, false);
	}
	return ret;
}

/* ---- reporting ---- */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static double percentile_us(struct latencies *l, unsigned pct)
{
	size_t i = (l->n * pct + 99) / 100;

	qsort(l->ns, l->n, sizeof(*l->ns), cmp_u32);
	return l->ns[i ? i - 1 : 0] / 1000.0;
}

static void report(const struct job *j, struct run *r, uint64_t ns)
{
	double secs = ns / 1e9;

	if (j->latency) {
		printf("%s_p50_us %.2f\n", j->name, percentile_us(r->lat, 50));
		printf("%s_p99_us %.2f\n", j->name, percentile_us(r->lat, 99));
	} else if (j->io_bytes >= MAX_IO) {
		printf("%s_mibs %.1f\n", j->name, r->ops * (j->io_bytes / 1048576.0) / secs);
	} else {
		printf("%s_iops %.0f\n", j->name, r->ops / secs);
	}
	fflush(stdout);
}

static int bench_job(struct bench_dev *d, const struct job *j, uint64_t warmup_ns,
		     uint64_t measure_ns, struct failure *f)
{
	/* A fixed seed per job: every back end sees the same offsets. */
	struct run warm = { .d = d, .job = j, .rng = 0x9e3779b97f4a7c15ull, .fail = f };
	struct latencies lat = { 0 };
	struct run r;
	uint64_t ns;
	int ret;

	ret = run_job(&warm, warmup_ns, &ns);
	if (ret)
		return ret;
	r = (struct run){ .d = d, .job = j, .rng = warm.rng, .next_seq = warm.next_seq,
			  .fail = f, .lat = j->latency ? &lat : NULL };
	if (j->latency) {
		/* Generous: even 1 µs per request fits. */
		lat.cap = measure_ns / 1000 + 1;
		lat.ns = malloc(lat.cap * sizeof(*lat.ns));
		if (!lat.ns)
			return -ENOMEM;
	}
	ret = run_job(&r, measure_ns, &ns);
	if (!ret && !r.ops)
		ret = -ETIMEDOUT;
	if (!ret && j->type == VUF_BLK_T_OUT)
		ret = read_back(&r);
	if (!ret)
		report(j, &r, ns);
	free(lat.ns);
	return ret;
}

static void print_failure(const char *name, int err, const struct failure *f)
{
	if (err == -EBADMSG)
		fprintf(stderr, "vhost-bench: %s: %s at byte %llu: expected 0x%llx, got 0x%llx\n",
			name, f->what, (unsigned long long)f->offset,
			(unsigned long long)f->expected, (unsigned long long)f->got);
	else
		fprintf(stderr, "vhost-bench: %s: %s\n", name, strerror(-err));
}

static int bench(const char *sock, double seconds, double warmup)
{
	struct bench_dev d = { 0 };
	struct failure f = { 0 };
	int ret;

	/* Tags are 24 bits and never 0, the made file's tag. */
	d.tag = ((uint64_t)getpid() ^ monotonic_ns()) % 0xffffff + 1;
	ret = dev_open(&d, sock);
	if (ret) {
		fprintf(stderr, "vhost-bench: setting up the device on %s: %s\n", sock,
			ret == -EOPNOTSUPP ? "EVENT_IDX, INDIRECT_DESC or CONFIG not offered" :
			strerror(-ret));
		dev_close(&d);
		return 1;
	}
	printf("# features 0x%llx protocol 0x%llx inflight %s capacity %llu MiB\n",
	       (unsigned long long)d.dev.features, (unsigned long long)d.dev.protocol,
	       d.inflight_fd >= 0 ? "yes" : "no", (unsigned long long)(d.capacity >> 20));
	for (size_t i = 0; i < ARRAY_SIZE(jobs) && !ret; i++) {
		ret = bench_job(&d, &jobs[i], (uint64_t)(warmup * 1e9),
				(uint64_t)(seconds * 1e9), &f);
		if (ret)
			print_failure(jobs[i].name, ret, &f);
	}
	dev_close(&d);
	return ret ? 1 : 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: vhost-bench --make-file PATH --size-mib N\n"
		"       vhost-bench --socket PATH [--seconds S] [--warmup S]\n"
		"Measures a vhost-user blk back end: 4 KiB random reads at depth 1\n"
		"(median, p99 us) and 32 (IOPS), 1 MiB sequential reads at depth 4\n"
		"(MiB/s), 4 KiB random writes at depth 32 (IOPS). The back end must\n"
		"serve a file made with --make-file.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "make-file", required_argument, NULL, 'm' },
		{ "size-mib", required_argument, NULL, 'z' },
		{ "socket", required_argument, NULL, 's' },
		{ "seconds", required_argument, NULL, 't' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *file = NULL, *sock = NULL;
	double seconds = 3, warmup = 0.5;
	unsigned long size_mib = 256;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'm': file = optarg; break;
		case 'z': size_mib = strtoul(optarg, NULL, 0); break;
		case 's': sock = optarg; break;
		case 't': seconds = strtod(optarg, NULL); break;
		case 'w': warmup = strtod(optarg, NULL); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!file == !sock || optind != argc || !size_mib || size_mib > (1ul << 20) ||
	    !(seconds > 0 && seconds <= 600) || !(warmup >= 0 && warmup <= 600)) {
		usage(stderr);
		return 2;
	}
	if (file) {
		ret = make_file(file, size_mib);
		if (ret)
			fprintf(stderr, "vhost-bench: %s: %s\n", file, strerror(-ret));
		return ret ? 1 : 0;
	}
	/* A back end that dies must surface as EPIPE, not kill us. */
	signal(SIGPIPE, SIG_IGN);
	return bench(sock, seconds, warmup);
}

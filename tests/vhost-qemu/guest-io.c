// The guest's workload on /dev/vda (a static binary in the initramfs).
//
//   vrdma-guest-io DEVICE SEED PATTERN_MIB STAMP_MIB SCRATCH_SECTOR
//
// Disk layout (written by the host, see run-test):
//   [0, PATTERN_MIB MiB)  splitmix64 stream of SEED, 64-bit little-endian words
//   STAMP_MIB MiB + s * 128 KiB, s < 8: stamp slot s
//   SCRATCH_SECTOR + s, s < 8: scratch slot s
//
// Iteration N, forever, then one console line "vrdma-io N ok" or
// "vrdma-io N FAIL reason":
//   stamp    writes "vrdma-stamp N\n" repeated to stamp slot N % 8 (O_DIRECT)
//            and reads it back into slot N % 8 of a buffer that lives as long
//            as the program and that the CPU never writes: DMA only
//   pattern  reads the pattern (O_DIRECT) and compares it
//   scratch  writes "vrdma-scratch N\n" to scratch slot N % 8, fdatasync
//            (a FLUSH request), reads it back
//   dma      compares the 8 buffer slots with the stamps of the last 8
//            iterations.  After a live migration this checks that the
//            source's back end logged the guest pages it wrote (LOG_ALL): a
//            page that was sent before the DMA and never written by the CPU
//            reaches the destination only through the back end's dirty log.
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLOTS 8
#define STAMP_SIZE (128u << 10)
#define SECTOR 512u
#define CHUNK (1u << 20)
#define ALIGN 4096u

struct workload {
	int fd;
	uint64_t pattern_size, stamp_off, scratch_off;
	uint8_t *pattern;      // expected pattern bytes
	uint8_t *dma_slots;    // SLOTS * STAMP_SIZE, written by the device only
	uint8_t *chunk;        // pattern reads
	uint8_t *stamp;        // the stamp being written / compared
	uint8_t *sector_out, *sector_in;
	char reason[384];
};

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int fail(struct workload *w, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->reason, sizeof(w->reason), fmt, ap);
	va_end(ap);
	return -1;
}

static void *aligned(size_t size)
{
	void *p = NULL;

	if (posix_memalign(&p, ALIGN, size)) {
		perror("vrdma-guest-io: posix_memalign");
		exit(1);
	}
	return p;
}

static void fill_stamp(uint8_t *buf, uint64_t n)
{
	char line[40];
	int len = snprintf(line, sizeof(line), "vrdma-stamp %" PRIu64 "\n", n);

	for (size_t off = 0; off < STAMP_SIZE; off += (size_t)len)
		memcpy(buf + off, line, off + (size_t)len <= STAMP_SIZE ? (size_t)len : STAMP_SIZE - off);
}

/*
 * The newest kernel message about the disk (a capacity change, an I/O
 * error), or "none": the short-read report carries it so that a failure
 * says whether the guest saw the device change.
 */
static void last_disk_message(char *out, size_t out_size)
{
	static char log[1 << 16];
	int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, log, (int)sizeof(log) - 1);
	const char *found = NULL;

	snprintf(out, out_size, "none");
	if (n <= 0)
		return;
	log[n] = '\0';
	for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
		if (strstr(line, "vda") || strstr(line, "virtio_blk") || strstr(line, "capacity"))
			found = line;
	if (found)
		snprintf(out, out_size, "%s", found);
}

static int io(struct workload *w, const char *what, int write, void *buf, size_t len, uint64_t off)
{
	ssize_t done = write ? pwrite(w->fd, buf, len, (off_t)off) : pread(w->fd, buf, len, (off_t)off);

	if (done < 0)
		return fail(w, "%s: %s", what, strerror(errno));
	if ((size_t)done != len) {
		/*
		 * Once in ~50 migrations a read right after the switch-over
		 * returned 0 bytes: say what the device size is then and
		 * whether the same call works again, to tell the causes apart.
		 */
		uint64_t size = 0;
		ssize_t again;
		char kmsg[160];

		ioctl(w->fd, BLKGETSIZE64, &size);
		again = write ? pwrite(w->fd, buf, len, (off_t)off) : pread(w->fd, buf, len, (off_t)off);
		last_disk_message(kmsg, sizeof(kmsg));
		return fail(w, "short-io %s: %zd of %zu bytes at %" PRIu64 " (device size %" PRIu64
			    ", again: %zd, kernel: %s)", what, done, len, off, size, again, kmsg);
	}
	return 0;
}

static int check_stamp(struct workload *w, uint64_t n)
{
	uint8_t *slot = w->dma_slots + (n % SLOTS) * STAMP_SIZE;
	uint64_t off = w->stamp_off + (n % SLOTS) * STAMP_SIZE;

	fill_stamp(w->stamp, n);
	if (io(w, "stamp-write", 1, w->stamp, STAMP_SIZE, off) ||
	    io(w, "stamp-read", 0, slot, STAMP_SIZE, off))
		return -1;
	if (memcmp(slot, w->stamp, STAMP_SIZE))
		return fail(w, "stamp-mismatch");
	return 0;
}

static int check_pattern(struct workload *w)
{
	for (uint64_t off = 0; off < w->pattern_size; off += CHUNK) {
		if (io(w, "pattern-read", 0, w->chunk, CHUNK, off))
			return -1;
		for (size_t i = 0; i < CHUNK; i += SECTOR)
			if (memcmp(w->chunk + i, w->pattern + off + i, SECTOR))
				return fail(w, "pattern-mismatch at byte %" PRIu64, off + i);
	}
	return 0;
}

static int check_scratch(struct workload *w, uint64_t n)
{
	uint64_t off = w->scratch_off + (n % SLOTS) * SECTOR;

	memset(w->sector_out, 0, SECTOR);
	snprintf((char *)w->sector_out, SECTOR, "vrdma-scratch %" PRIu64 "\n", n);
	if (io(w, "scratch-write", 1, w->sector_out, SECTOR, off))
		return -1;
	if (fdatasync(w->fd))
		return fail(w, "scratch-flush: %s", strerror(errno));
	if (io(w, "scratch-read", 0, w->sector_in, SECTOR, off))
		return -1;
	if (memcmp(w->sector_in, w->sector_out, SECTOR))
		return fail(w, "scratch-mismatch");
	return 0;
}

static int check_dma_slots(struct workload *w, uint64_t n)
{
	for (uint64_t k = n; k >= 1 && k + SLOTS > n; k--) {
		fill_stamp(w->stamp, k);
		if (memcmp(w->dma_slots + (k % SLOTS) * STAMP_SIZE, w->stamp, STAMP_SIZE))
			return fail(w, "dma-slot: bytes read in iteration %" PRIu64 " changed", k);
	}
	return 0;
}

static uint64_t number(const char *s)
{
	char *end;
	uint64_t v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *s == '\0' || *end != '\0') {
		fprintf(stderr, "vrdma-guest-io: bad number '%s'\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	struct workload w = { 0 };
	uint64_t seed, state;

	if (argc != 6) {
		fprintf(stderr, "usage: vrdma-guest-io DEVICE SEED PATTERN_MIB STAMP_MIB SCRATCH_SECTOR\n");
		return 2;
	}
	seed = number(argv[2]);
	w.pattern_size = number(argv[3]) << 20;
	w.stamp_off = number(argv[4]) << 20;
	w.scratch_off = number(argv[5]) * SECTOR;
	w.fd = open(argv[1], O_RDWR | O_DIRECT);
	if (w.fd < 0) {
		fprintf(stderr, "vrdma-guest-io: open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}

	w.pattern = aligned(w.pattern_size);
	state = seed;
	for (uint64_t i = 0; i < w.pattern_size / 8; i++) {
		uint64_t word = splitmix64(&state);

		memcpy(w.pattern + i * 8, &word, 8);  // x86: little-endian
	}
	// Populated (zeroed by the kernel) now, long before any migration.
	w.dma_slots = mmap(NULL, SLOTS * STAMP_SIZE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (w.dma_slots == MAP_FAILED) {
		perror("vrdma-guest-io: mmap");
		return 1;
	}
	w.chunk = aligned(CHUNK);
	w.stamp = aligned(STAMP_SIZE);
	w.sector_out = aligned(SECTOR);
	w.sector_in = aligned(SECTOR);
	setvbuf(stdout, NULL, _IOLBF, 0);

	for (uint64_t n = 1;; n++) {
		w.reason[0] = '\0';
		if (check_stamp(&w, n) || check_pattern(&w) || check_scratch(&w, n) ||
		    check_dma_slots(&w, n))
			printf("vrdma-io %" PRIu64 " FAIL %s\n", n, w.reason);
		else
			printf("vrdma-io %" PRIu64 " ok\n", n);
	}
}

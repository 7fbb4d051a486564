// SPDX-License-Identifier: MIT
/*
 * vhost/core/vu-vq.c: the descriptor-chain walker over guest memory the driver
 * wrote (direct, indirect, EVENT_IDX), through vq_pop / vq_push / vq_notify
 * on a device made by vu_dev_new() with two memfd regions, as
 * tests/unit/test-vu-ring.c sets one up.
 *
 * Input: [num][features][base lo][base hi] desc table (16 * num bytes),
 *        avail ring (6 + 2 * num bytes), then the buffer area at BUF_GPA
 *        (indirect tables, data).  Missing bytes are zero.
 * Every segment of every element must lie inside one mapped region.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "ring-layout.h"
#include "vu-internal.h"

static struct {
	int memfd[2];
	uint8_t *map[2];
	int sv[2];
	int call, err;
	struct vu_dev *dev;
	struct vu_vq *vq;
} fx;

static void no_watch(struct vu_dev *dev, int fd, vu_watch_cb cb, void *data)
{
	(void)dev, (void)fd, (void)cb, (void)data;
}

static void no_unwatch(struct vu_dev *dev, int fd)
{
	(void)dev, (void)fd;
}

static uint8_t *gp(uint64_t gpa)
{
	if (gpa < RB_GPA)
		return fx.map[0] + (gpa - RA_GPA);
	return fx.map[1] + RB_OFF + (gpa - RB_GPA);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const struct vu_loop_ops loop = { .add_watch = no_watch, .remove_watch = no_unwatch };
	static const struct vu_device_ops ops = { .name = "fuzz", .max_queues = 1 };
	const struct vu_mem_desc a = { RA_GPA, RA_SIZE, RA_UVA, 0 };
	const struct vu_mem_desc b = { RB_GPA, RB_SIZE, RB_UVA, RB_OFF };
	const uint64_t len[2] = { RA_SIZE, RB_OFF + RB_SIZE };

	(void)argc, (void)argv;
	for (int i = 0; i < 2; i++) {
		fx.memfd[i] = memfd_create("fuzz-vu-vq", MFD_CLOEXEC);
		FUZZ_CHECK(fx.memfd[i] >= 0 && ftruncate(fx.memfd[i], (off_t)len[i]) == 0);
		fx.map[i] = mmap(NULL, len[i], PROT_READ | PROT_WRITE, MAP_SHARED, fx.memfd[i], 0);
		FUZZ_CHECK(fx.map[i] != MAP_FAILED);
	}
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fx.sv) == 0);
	FUZZ_CHECK(vu_dev_new(fx.sv[0], &ops, NULL, &loop, NULL, &fx.dev) == 0);
	FUZZ_CHECK(vu_mem_add(&fx.dev->mem, &a, fx.memfd[0]) == 0);
	FUZZ_CHECK(vu_mem_add(&fx.dev->mem, &b, fx.memfd[1]) == 0);
	fx.vq = &fx.dev->vqs[0];
	fx.call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	fx.err = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	FUZZ_CHECK(fx.call >= 0 && fx.err >= 0);
	fx.vq->call_fd = fcntl(fx.call, F_DUPFD_CLOEXEC, 0);
	fx.vq->err_fd = fcntl(fx.err, F_DUPFD_CLOEXEC, 0);
	return 0;
}

static void drain(int efd)
{
	uint64_t v;

	(void)!read(efd, &v, sizeof(v));
}

/* [p, p+len) lies within the device's own mapping of one region. */
static bool in_guest(const void *p, size_t len)
{
	const struct vu_mem *mem = &fx.dev->mem;

	for (unsigned int i = 0; i < mem->nregions; i++) {
		const uint8_t *h = mem->regions[i].host;

		if ((const uint8_t *)p >= h && len <= mem->regions[i].size &&
		    (const uint8_t *)p - h <= (ptrdiff_t)(mem->regions[i].size - len))
			return true;
	}
	return false;
}

static void check_elem(const struct vq_elem *e, uint32_t num)
{
	uint64_t out = 0, in = 0;

	FUZZ_CHECK(e->head < num);
	FUZZ_CHECK(e->out_num + e->in_num <= VQ_MAX_SEGS);
	for (unsigned int i = 0; i < e->out_num; i++) {
		FUZZ_CHECK(in_guest(e->out[i].iov_base, e->out[i].iov_len));
		out += e->out[i].iov_len;
	}
	for (unsigned int i = 0; i < e->in_num; i++) {
		FUZZ_CHECK(in_guest(e->in[i].iov_base, e->in[i].iov_len));
		in += e->in[i].iov_len;
	}
	FUZZ_CHECK(out == e->out_len && in == e->in_len);
}

/* Copies what the input has into guest memory, zero-filling the rest. */
static size_t place(uint64_t gpa, size_t room, const uint8_t *p, size_t n)
{
	size_t take = n < room ? n : room;

	memcpy(gp(gpa), p, take);
	memset(gp(gpa) + take, 0, room - take);
	return take;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vu_vq *vq = fx.vq;
	uint32_t num;
	uint16_t base;
	size_t off;
	uint8_t scratch[64];

	if (size < 4)
		return 0;
	num = 1u << (data[0] % 9); /* 1..256: the table fits its page */
	fx.dev->features = (1ull << VU_F_VERSION_1) |
			   (data[1] & 1 ? 1ull << VU_F_INDIRECT_DESC : 0) |
			   (data[1] & 2 ? 1ull << VU_F_EVENT_IDX : 0);
	base = (uint16_t)(data[2] | data[3] << 8);
	off = 4;
	off += place(DESC_GPA, 16 * num, data + off, size - off);
	off += place(AVAIL_GPA, 6 + 2 * num, data + off, size - off);
	memset(gp(USED_GPA), 0, 6 + 8 * num);
	memcpy(gp(USED_GPA + 2), &base, 2);
	/* The buffer area runs on into region B: two mappings here. */
	off += place(BUF_GPA, RB_GPA - BUF_GPA, data + off, size - off);
	place(RB_GPA, MEM_END - RB_GPA, data + off, size - off);

	vq_stop(vq);
	vq->num = num;
	vq->addr = (struct vu_vring_addr){
		.desc_user_addr = RA_UVA + (DESC_GPA - RA_GPA),
		.used_user_addr = RA_UVA + (USED_GPA - RA_GPA),
		.avail_user_addr = RA_UVA + (AVAIL_GPA - RA_GPA),
		.log_guest_addr = USED_GPA,
	};
	vq->addr_set = true;
	vq->last_avail_idx = base;
	vq->enabled = true;
	FUZZ_CHECK(vq_start(vq) == 0);
	vq_set_polling(vq, data[1] & 4);

	for (uint32_t n = 0; n <= num; n++) {
		struct vq_elem *e = NULL;
		int ret;

		(void)vq_has_avail(vq);
		ret = vq_pop(vq, &e);
		if (ret != 1) {
			FUZZ_CHECK(ret == 0 || ret == -EIO);
			break;
		}
		check_elem(e, num);
		memset(scratch, 0xa5, sizeof(scratch));
		(void)vq_iov_to_buf(e->out, e->out_num, 0, scratch, sizeof(scratch));
		(void)vq_buf_to_iov(e->in, e->in_num, 0, scratch, sizeof(scratch));
		(void)vq_push(vq, e, (uint32_t)(e->in_len < 64 ? e->in_len : 64));
	}
	vq_notify(vq);
	vq_set_polling(vq, false);
	vq_stop(vq);
	drain(fx.call);
	drain(fx.err);
	return 0;
}

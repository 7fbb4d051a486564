// SPDX-License-Identifier: MIT
/*
 * The request table and the message reader: sizes, fd counts and queue
 * indexes are checked here, once, before any handler runs.  Every fd
 * received is either handed to the caller inside a valid message or closed.
 */
#include "vu-proto.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"
#include "fdpass.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "vhost-user and virtio 1.x are little-endian; so must the host be");

enum fd_rule {
	FDS_NONE,
	FDS_ONE,
	FDS_OPTIONAL_ONE,
	FDS_VRING,     /* one fd unless the payload's NOFD bit is set */
	FDS_MEM_TABLE, /* exactly one per region, checked by the decoder */
};

enum queue_rule {
	QUEUE_NONE,
	QUEUE_STATE_INDEX, /* u32 index at payload offset 0 */
	QUEUE_U64_INDEX,   /* low byte of a u64 */
};

struct request_rule {
	const char *name;
	uint32_t min_size;
	uint32_t max_size;
	enum fd_rule fds;
	enum queue_rule queue;
	bool has_reply;
};

#define RULE(req, mn, mx, f, q, r) \
	[VU_##req] = { #req, (mn), (mx), FDS_##f, QUEUE_##q, (r) }

/*
 * SET_LOG_FD and GET_VRING_BASE etc. follow the spec's payload types.
 * GET_INFLIGHT_FD/SET_INFLIGHT_FD: QEMU sends its struct with the tail
 * padding (24 bytes); the meaningful part is 20.
 */
static const struct request_rule rules[VU_REQUEST_MAX] = {
	RULE(GET_FEATURES, 0, 0, NONE, NONE, true),
	RULE(SET_FEATURES, 8, 8, NONE, NONE, false),
	RULE(SET_OWNER, 0, 0, NONE, NONE, false),
	RULE(RESET_OWNER, 0, 0, NONE, NONE, false),
	RULE(SET_MEM_TABLE, 8, 8 + 32 * VU_MEM_TABLE_MAX_REGIONS, MEM_TABLE, NONE, false),
	RULE(SET_LOG_BASE, 16, 16, ONE, NONE, true),
	RULE(SET_LOG_FD, 0, 8, ONE, NONE, false),
	RULE(SET_VRING_NUM, 8, 8, NONE, STATE_INDEX, false),
	RULE(SET_VRING_ADDR, 40, 40, NONE, STATE_INDEX, false),
	RULE(SET_VRING_BASE, 8, 8, NONE, STATE_INDEX, false),
	RULE(GET_VRING_BASE, 8, 8, NONE, STATE_INDEX, true),
	RULE(SET_VRING_KICK, 8, 8, VRING, U64_INDEX, false),
	RULE(SET_VRING_CALL, 8, 8, VRING, U64_INDEX, false),
	RULE(SET_VRING_ERR, 8, 8, VRING, U64_INDEX, false),
	RULE(GET_PROTOCOL_FEATURES, 0, 0, NONE, NONE, true),
	RULE(SET_PROTOCOL_FEATURES, 8, 8, NONE, NONE, false),
	RULE(GET_QUEUE_NUM, 0, 0, NONE, NONE, true),
	RULE(SET_VRING_ENABLE, 8, 8, NONE, STATE_INDEX, false),
	RULE(SET_BACKEND_REQ_FD, 0, 0, ONE, NONE, false),
	RULE(GET_CONFIG, 12, 12 + VU_MAX_CONFIG_SIZE, NONE, NONE, true),
	RULE(SET_CONFIG, 12, 12 + VU_MAX_CONFIG_SIZE, NONE, NONE, false),
	RULE(GET_INFLIGHT_FD, 20, 24, NONE, NONE, true),
	RULE(SET_INFLIGHT_FD, 20, 24, ONE, NONE, false),
	RULE(RESET_DEVICE, 0, 0, NONE, NONE, false),
	RULE(GET_MAX_MEM_SLOTS, 0, 0, NONE, NONE, true),
	RULE(ADD_MEM_REG, 40, 40, ONE, NONE, false),
	RULE(REM_MEM_REG, 40, 40, OPTIONAL_ONE, NONE, false),
	RULE(SET_STATUS, 8, 8, NONE, NONE, false),
	RULE(GET_STATUS, 0, 0, NONE, NONE, true),
	RULE(SET_DEVICE_STATE_FD, 8, 8, ONE, NONE, true),
	RULE(CHECK_DEVICE_STATE, 0, 0, NONE, NONE, true),
};

static const struct request_rule *rule_for(uint32_t request)
{
	if (request >= VU_REQUEST_MAX || !rules[request].name)
		return NULL;
	return &rules[request];
}

const char *vu_request_name(uint32_t request)
{
	const struct request_rule *rule = rule_for(request);

	return rule ? rule->name : "UNKNOWN";
}

bool vu_request_has_reply(uint32_t request)
{
	const struct request_rule *rule = rule_for(request);

	return rule && rule->has_reply;
}

void vu_msg_close_fds(struct vu_msg *msg)
{
	for (unsigned int i = 0; i < msg->nfds; i++) {
		if (msg->fds[i] >= 0)
			close(msg->fds[i]);
		msg->fds[i] = -1;
	}
	msg->nfds = 0;
}

int vu_msg_take_fd(struct vu_msg *msg, unsigned int i)
{
	int fd;

	if (i >= msg->nfds)
		return -1;
	fd = msg->fds[i];
	msg->fds[i] = -1;
	return fd;
}

void vu_msg_reader_init(struct vu_msg_reader *r)
{
	memset(r, 0, sizeof(*r));
}

void vu_msg_reader_reset(struct vu_msg_reader *r)
{
	vu_msg_close_fds(&r->msg);
	vu_msg_reader_init(r);
}

/* Adopts the fds of one control message; any overflow is a violation. */
static int collect_fds(struct vu_msg *msg, struct msghdr *mh)
{
	int ret = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t n;
		int *fds;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		fds = (int *)CMSG_DATA(c);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, &fds[i], sizeof(fd));
			if (msg->nfds < VU_MAX_FDS)
				msg->fds[msg->nfds++] = fd;
			else {
				close(fd);
				ret = -EPROTO;
			}
		}
	}
	if (mh->msg_flags & MSG_CTRUNC)
		ret = -EPROTO; /* the kernel dropped fds: more than we allow */
	return ret;
}

static int check_header(struct vu_msg_reader *r)
{
	struct vu_msg *msg = &r->msg;
	const struct request_rule *rule;

	msg->request = get_le32(r->hdr);
	msg->flags = get_le32(r->hdr + 4);
	msg->size = get_le32(r->hdr + 8);
	rule = rule_for(msg->request);
	if (!rule)
		return -EOPNOTSUPP;
	/* A request carries the version and may ask for a reply: nothing else. */
	if ((msg->flags & VU_FLAG_VERSION_MASK) != VU_FLAG_VERSION ||
	    (msg->flags & ~(uint32_t)(VU_FLAG_VERSION_MASK | VU_FLAG_NEED_REPLY)))
		return -EPROTO;
	if (msg->size < rule->min_size || msg->size > rule->max_size)
		return -EBADMSG;
	return 0;
}

static uint32_t queue_index_of(const struct vu_msg *msg, enum queue_rule q)
{
	if (q == QUEUE_STATE_INDEX)
		return get_le32(msg->payload);
	return (uint32_t)(get_le64(msg->payload) & VU_VRING_IDX_MASK);
}

static int check_complete(const struct vu_msg *msg, unsigned int num_queues)
{
	const struct request_rule *rule = rule_for(msg->request);
	bool fd_expected;

	switch (rule->fds) {
	case FDS_NONE:
		if (msg->nfds)
			return -EBADMSG;
		break;
	case FDS_ONE:
		if (msg->nfds != 1)
			return -EBADMSG;
		break;
	case FDS_OPTIONAL_ONE:
		if (msg->nfds > 1)
			return -EBADMSG;
		break;
	case FDS_VRING:
		fd_expected = !(get_le64(msg->payload) & VU_VRING_NOFD);
		if (msg->nfds != (fd_expected ? 1u : 0u))
			return -EBADMSG;
		break;
	case FDS_MEM_TABLE:
		break; /* vu_decode_mem_table() ties the count to the regions */
	}
	if (rule->queue != QUEUE_NONE && queue_index_of(msg, rule->queue) >= num_queues)
		return -ERANGE;
	return 0;
}

/* One recvmsg() of at most len bytes into buf, fds collected. */
static ssize_t recv_some(int sock, struct vu_msg *msg, void *buf, size_t len, int *ret_fd_err)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * VU_MAX_FDS)];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control.buf,
		.msg_controllen = sizeof(control.buf),
	};
	ssize_t n;

	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	*ret_fd_err = collect_fds(msg, &mh);
	return n;
}

int vu_msg_read(int sock, struct vu_msg_reader *r, unsigned int num_queues)
{
	for (;;) {
		uint32_t want;
		uint8_t *dst;
		int fd_err = 0;
		ssize_t n;
		int ret;

		/* The previous message's fds belong to the caller now. */
		if (r->have == 0)
			r->msg.nfds = 0;
		if (r->have < VU_HDR_SIZE) {
			want = VU_HDR_SIZE - r->have;
			dst = r->hdr + r->have;
		} else {
			want = VU_HDR_SIZE + r->msg.size - r->have;
			dst = r->msg.payload + (r->have - VU_HDR_SIZE);
		}
		if (want == 0)
			goto complete;
		n = recv_some(sock, &r->msg, dst, want, &fd_err);
		if (n == -EAGAIN || n == -EWOULDBLOCK)
			return 0;
		if (n <= 0 || fd_err) {
			vu_msg_reader_reset(r);
			return n < 0 ? (int)n : fd_err ? fd_err : -ECONNRESET;
		}
		r->have += (uint32_t)n;
		if (r->have == VU_HDR_SIZE) {
			ret = check_header(r);
			if (ret < 0) {
				vu_msg_reader_reset(r);
				return ret;
			}
		}
		if (r->have < VU_HDR_SIZE || r->have < VU_HDR_SIZE + r->msg.size)
			continue;
complete:
		ret = check_complete(&r->msg, num_queues);
		if (ret < 0) {
			vu_msg_reader_reset(r);
			return ret;
		}
		r->have = 0;
		return 1;
	}
}

static int send_all(int sock, const uint8_t *buf, size_t len, const int *fds, unsigned int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * VU_MAX_FDS)];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds > VU_MAX_FDS)
		return -EINVAL;
	fdpass_attach(&mh, control.buf, fds, nfds);
	/*
	 * Replies are small; a peer that does not drain its socket so that
	 * even one reply does not fit is broken, and is dropped.
	 */
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EAGAIN;
}

int vu_msg_send_reply(int sock, const struct vu_msg *msg, const void *payload,
		      uint32_t size, const int *fds, unsigned int nfds)
{
	uint8_t buf[VU_HDR_SIZE + VU_MAX_PAYLOAD];

	if (size > VU_MAX_PAYLOAD)
		return -EINVAL;
	put_le32(buf, msg->request);
	put_le32(buf + 4, VU_FLAG_VERSION | VU_FLAG_REPLY);
	put_le32(buf + 8, size);
	if (size)
		memcpy(buf + VU_HDR_SIZE, payload, size);
	return send_all(sock, buf, VU_HDR_SIZE + size, fds, nfds);
}

int vu_msg_send_reply_u64(int sock, const struct vu_msg *msg, uint64_t value)
{
	return vu_msg_send_reply_u64_fd(sock, msg, value, -1);
}

int vu_msg_send_reply_u64_fd(int sock, const struct vu_msg *msg, uint64_t value, int fd)
{
	uint8_t le[8];

	put_le64(le, value);
	return vu_msg_send_reply(sock, msg, le, sizeof(le), fd >= 0 ? &fd : NULL, fd >= 0);
}

uint32_t vu_encode_backend_msg(uint8_t *out, uint32_t request, uint32_t flags,
			       const void *payload, uint32_t size)
{
	put_le32(out, request);
	put_le32(out + 4, VU_FLAG_VERSION | flags);
	put_le32(out + 8, size);
	if (size)
		memcpy(out + VU_HDR_SIZE, payload, size);
	return VU_HDR_SIZE + size;
}

/* --- payload decoders --- */

int vu_decode_u64(const struct vu_msg *msg, uint64_t *ret)
{
	if (msg->size < 8)
		return -EBADMSG;
	*ret = get_le64(msg->payload);
	return 0;
}

int vu_decode_state_req(const struct vu_msg *msg, struct vu_state_req *ret)
{
	if (msg->size < 8)
		return -EBADMSG;
	ret->direction = get_le32(msg->payload);
	ret->phase = get_le32(msg->payload + 4);
	return 0;
}

int vu_decode_vring_state(const struct vu_msg *msg, struct vu_vring_state *ret)
{
	if (msg->size < 8)
		return -EBADMSG;
	ret->index = get_le32(msg->payload);
	ret->num = get_le32(msg->payload + 4);
	return 0;
}

int vu_decode_vring_addr(const struct vu_msg *msg, struct vu_vring_addr *ret)
{
	const uint8_t *p = msg->payload;

	if (msg->size < 40)
		return -EBADMSG;
	ret->index = get_le32(p);
	ret->flags = get_le32(p + 4);
	ret->desc_user_addr = get_le64(p + 8);
	ret->used_user_addr = get_le64(p + 16);
	ret->avail_user_addr = get_le64(p + 24);
	ret->log_guest_addr = get_le64(p + 32);
	if (ret->flags & ~VU_VRING_F_LOG)
		return -EINVAL;
	return 0;
}

int vu_decode_vring_fd(const struct vu_msg *msg, uint32_t *ret_index, bool *ret_has_fd)
{
	uint64_t v;

	if (msg->size < 8)
		return -EBADMSG;
	v = get_le64(msg->payload);
	if (v & ~(uint64_t)(VU_VRING_IDX_MASK | VU_VRING_NOFD))
		return -EINVAL;
	*ret_index = (uint32_t)(v & VU_VRING_IDX_MASK);
	*ret_has_fd = !(v & VU_VRING_NOFD);
	return 0;
}

static void decode_region(const uint8_t *p, struct vu_mem_desc *ret)
{
	ret->guest_addr = get_le64(p);
	ret->size = get_le64(p + 8);
	ret->user_addr = get_le64(p + 16);
	ret->mmap_offset = get_le64(p + 24);
}

int vu_decode_mem_table(const struct vu_msg *msg, struct vu_mem_table *ret)
{
	uint32_t n;

	if (msg->size < 8)
		return -EBADMSG;
	n = get_le32(msg->payload);
	if (n > VU_MEM_TABLE_MAX_REGIONS)
		return -E2BIG;
	/* QEMU sends the table sized to its regions; each carries one fd. */
	if (msg->size < 8 + 32 * n || msg->nfds != n)
		return -EBADMSG;
	ret->nregions = n;
	for (uint32_t i = 0; i < n; i++)
		decode_region(msg->payload + 8 + 32 * i, &ret->regions[i]);
	return 0;
}

int vu_decode_mem_reg(const struct vu_msg *msg, struct vu_mem_desc *ret)
{
	if (msg->size < 40)
		return -EBADMSG;
	/* The first u64 is padding. */
	decode_region(msg->payload + 8, ret);
	return 0;
}

int vu_decode_log_area(const struct vu_msg *msg, struct vu_log_area *ret)
{
	if (msg->size < 16)
		return -EBADMSG;
	ret->mmap_size = get_le64(msg->payload);
	ret->mmap_offset = get_le64(msg->payload + 8);
	return 0;
}

int vu_decode_config(const struct vu_msg *msg, struct vu_config_req *ret)
{
	if (msg->size < 12)
		return -EBADMSG;
	ret->offset = get_le32(msg->payload);
	ret->size = get_le32(msg->payload + 4);
	ret->flags = get_le32(msg->payload + 8);
	/* The payload must hold exactly the bytes it announces. */
	if (ret->size > VU_MAX_CONFIG_SIZE || msg->size != 12 + ret->size)
		return -EBADMSG;
	if (!range_within(ret->offset, ret->size, VU_MAX_CONFIG_SIZE))
		return -EINVAL;
	ret->data = msg->payload + 12;
	return 0;
}

int vu_decode_inflight(const struct vu_msg *msg, struct vu_inflight_desc *ret)
{
	if (msg->size < 20)
		return -EBADMSG;
	ret->mmap_size = get_le64(msg->payload);
	ret->mmap_offset = get_le64(msg->payload + 8);
	ret->num_queues = get_le16(msg->payload + 16);
	ret->queue_size = get_le16(msg->payload + 18);
	return 0;
}

void vu_encode_vring_state(uint8_t out[8], uint32_t index, uint32_t num)
{
	put_le32(out, index);
	put_le32(out + 4, num);
}

void vu_encode_inflight(uint8_t out[24], const struct vu_inflight_desc *d)
{
	memset(out, 0, 24);
	put_le64(out, d->mmap_size);
	put_le64(out + 8, d->mmap_offset);
	put_le16(out + 16, d->num_queues);
	put_le16(out + 18, d->queue_size);
}

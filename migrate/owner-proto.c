// SPDX-License-Identifier: MIT
/* Owner protocol: encoding, the validating decoder, and fd passing. */
#include "fdpass.h"
#include "owner-proto.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"

#define OWNER_MAGIC 0x574f4d56u /* "VMOW" */
#define MAX_ERRNO 4095
#define MAX_BITMAP_SIZE (1ull << 40)
#define MAX_FDS_SEEN 4 /* room to notice (and close) fds nobody asked for */

static size_t payload_size(enum owner_msg_type type)
{
	switch (type) {
	case OWNER_MSG_HELLO: return 16;
	case OWNER_MSG_WELCOME: return 24;
	case OWNER_MSG_BLOCK: return 32 + OWNER_NAME_MAX;
	case OWNER_MSG_SYNC: return 8;
	case OWNER_MSG_THROTTLE: return 4;
	case OWNER_MSG_RESUME:
	case OWNER_MSG_ABORT: return 4;
	case OWNER_MSG_BITMAP: return 8;
	case OWNER_MSG_ROUND_READY: return 16;
	case OWNER_MSG_STOP:
	case OWNER_MSG_COMPLETED:
	case OWNER_MSG_STOPPED: return 0;
	}
	return SIZE_MAX;
}

unsigned owner_msg_nfds(enum owner_msg_type type)
{
	return type == OWNER_MSG_BLOCK || type == OWNER_MSG_BITMAP;
}

const char *owner_msg_name(enum owner_msg_type type)
{
	switch (type) {
	case OWNER_MSG_HELLO: return "HELLO";
	case OWNER_MSG_SYNC: return "SYNC";
	case OWNER_MSG_THROTTLE: return "THROTTLE";
	case OWNER_MSG_STOP: return "STOP";
	case OWNER_MSG_RESUME: return "RESUME";
	case OWNER_MSG_COMPLETED: return "COMPLETED";
	case OWNER_MSG_ABORT: return "ABORT";
	case OWNER_MSG_WELCOME: return "WELCOME";
	case OWNER_MSG_BLOCK: return "BLOCK";
	case OWNER_MSG_BITMAP: return "BITMAP";
	case OWNER_MSG_ROUND_READY: return "ROUND_READY";
	case OWNER_MSG_STOPPED: return "STOPPED";
	}
	return "?";
}

/* HELLO and WELCOME open with the same fields: version, role, capabilities. */
static void put_greeting(uint8_t *p, uint32_t version, enum owner_role role, uint64_t caps)
{
	put_le32(p, version);
	put_le32(p + 4, role);
	put_le64(p + 8, caps);
}

size_t owner_msg_encode(const struct owner_msg *msg, uint8_t *buf)
{
	size_t plen = payload_size(msg->type);
	uint8_t *p = mig_msg_start(buf, OWNER_MAGIC, (uint16_t)msg->type, plen);

	switch (msg->type) {
	case OWNER_MSG_HELLO:
		put_greeting(p, msg->u.hello.version, msg->u.hello.role, msg->u.hello.caps);
		break;
	case OWNER_MSG_WELCOME:
		put_greeting(p, msg->u.welcome.version, msg->u.welcome.role,
			     msg->u.welcome.caps);
		put_le32(p + 16, msg->u.welcome.nblocks);
		break;
	case OWNER_MSG_BLOCK:
		put_le32(p, msg->u.block.index);
		put_le32(p + 4, msg->u.block.page_size);
		put_le64(p + 8, msg->u.block.offset);
		put_le64(p + 16, msg->u.block.size);
		put_le64(p + 24, msg->u.block.bitmap_offset);
		/* Zero-padded, and always NUL terminated (buf was cleared). */
		memcpy(p + 32, msg->u.block.name,
		       strnlen(msg->u.block.name, OWNER_NAME_MAX - 1));
		break;
	case OWNER_MSG_SYNC:
		put_le64(p, msg->u.round);
		break;
	case OWNER_MSG_THROTTLE:
		put_le32(p, msg->u.percent);
		break;
	case OWNER_MSG_RESUME:
	case OWNER_MSG_ABORT:
		put_le32(p, (uint32_t)msg->u.error);
		break;
	case OWNER_MSG_BITMAP:
		put_le64(p, msg->u.bitmap_size);
		break;
	case OWNER_MSG_ROUND_READY:
		put_le64(p, msg->u.ready.round);
		put_le64(p + 8, msg->u.ready.dirty_pages);
		break;
	default:
		break;
	}
	return OWNER_HDR_SIZE + plen;
}

bool owner_name_valid(const uint8_t name[OWNER_NAME_MAX])
{
	size_t n = strnlen((const char *)name, OWNER_NAME_MAX);

	if (n == 0 || n == OWNER_NAME_MAX)
		return false;
	for (size_t i = 0; i < OWNER_NAME_MAX; i++) {
		if (i < n && (name[i] < 0x20 || name[i] > 0x7e))
			return false;
		if (i >= n && name[i])
			return false;
	}
	return true;
}

bool owner_block_geometry_valid(uint32_t index, uint32_t page_size, uint64_t size)
{
	return index < OWNER_MAX_BLOCKS && is_power_of_2(page_size) &&
	       page_size >= OWNER_MIN_PAGE && page_size <= OWNER_MAX_PAGE &&
	       size != 0 && size <= OWNER_MAX_BLOCK_SIZE && size % page_size == 0;
}

uint8_t *mig_msg_start(uint8_t *buf, uint32_t magic, uint16_t type, size_t plen)
{
	memset(buf, 0, MIG_HDR_SIZE + plen);
	put_le32(buf, magic);
	put_le16(buf + 4, type);
	put_le32(buf + 8, (uint32_t)plen);
	return buf + MIG_HDR_SIZE;
}

bool mig_hdr_valid(const uint8_t *buf, size_t len, uint32_t magic)
{
	return buf && len >= MIG_HDR_SIZE && get_le32(buf) == magic &&
	       !get_le16(buf + 6) && !get_le32(buf + 12);
}

static int decode_block(const uint8_t *p, struct owner_block *b)
{
	b->index = get_le32(p);
	b->page_size = get_le32(p + 4);
	b->offset = get_le64(p + 8);
	b->size = get_le64(p + 16);
	b->bitmap_offset = get_le64(p + 24);
	if (!owner_block_geometry_valid(b->index, b->page_size, b->size) ||
	    b->offset % b->page_size ||
	    b->offset > UINT64_MAX - b->size || b->bitmap_offset % 8 ||
	    b->bitmap_offset > MAX_BITMAP_SIZE)
		return -EBADMSG;
	if (!owner_name_valid(p + 32))
		return -EBADMSG;
	memcpy(b->name, p + 32, OWNER_NAME_MAX);
	return 0;
}

static bool valid_role(uint32_t role)
{
	return role == OWNER_ROLE_SOURCE || role == OWNER_ROLE_DEST;
}

static int decode_payload(enum owner_msg_type type, const uint8_t *p,
			  struct owner_msg *m)
{
	uint32_t v;

	switch (type) {
	case OWNER_MSG_HELLO:
	case OWNER_MSG_WELCOME:
		/* Same leading fields; a WELCOME adds the block count. */
		v = get_le32(p);
		if (v != OWNER_PROTO_VERSION)
			return -EPROTONOSUPPORT;
		if (!valid_role(get_le32(p + 4)))
			return -EBADMSG;
		if (type == OWNER_MSG_HELLO) {
			m->u.hello = (struct owner_hello){
				.version = v, .role = get_le32(p + 4), .caps = get_le64(p + 8),
			};
			return 0;
		}
		m->u.welcome = (struct owner_welcome){
			.version = v, .role = get_le32(p + 4), .caps = get_le64(p + 8),
			.nblocks = get_le32(p + 16),
		};
		if (get_le32(p + 20) || m->u.welcome.nblocks < 1 ||
		    m->u.welcome.nblocks > OWNER_MAX_BLOCKS)
			return -EBADMSG;
		return 0;
	case OWNER_MSG_BLOCK:
		return decode_block(p, &m->u.block);
	case OWNER_MSG_SYNC:
		m->u.round = get_le64(p);
		return 0;
	case OWNER_MSG_THROTTLE:
		m->u.percent = get_le32(p);
		return m->u.percent <= 99 ? 0 : -EBADMSG;
	case OWNER_MSG_RESUME:
	case OWNER_MSG_ABORT:
		v = get_le32(p);
		if (v > MAX_ERRNO)
			return -EBADMSG;
		m->u.error = (int32_t)v;
		return 0;
	case OWNER_MSG_BITMAP:
		m->u.bitmap_size = get_le64(p);
		return m->u.bitmap_size && m->u.bitmap_size <= MAX_BITMAP_SIZE &&
			       m->u.bitmap_size % 8 == 0 ? 0 : -EBADMSG;
	case OWNER_MSG_ROUND_READY:
		m->u.ready.round = get_le64(p);
		m->u.ready.dirty_pages = get_le64(p + 8);
		return 0;
	default:
		return 0;
	}
}

int owner_msg_decode(const uint8_t *buf, size_t len, unsigned nfds,
		     struct owner_msg *ret_msg)
{
	struct owner_msg m = { 0 };
	enum owner_msg_type type;
	size_t plen;
	int r;

	if (!mig_hdr_valid(buf, len, OWNER_MAGIC))
		return -EBADMSG;
	type = get_le16(buf + 4);
	plen = payload_size(type);
	if (plen == SIZE_MAX || get_le32(buf + 8) != plen ||
	    len != OWNER_HDR_SIZE + plen || nfds != owner_msg_nfds(type))
		return -EBADMSG;
	m.type = type;
	r = decode_payload(type, buf + OWNER_HDR_SIZE, &m);
	if (r < 0)
		return r;
	*ret_msg = m;
	return 0;
}

int owner_send(int sock, const struct owner_msg *msg, int fd)
{
	uint8_t buf[OWNER_MAX_MSG];
	union {
		struct cmsghdr h;
		uint8_t b[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = buf };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if ((fd >= 0) != (owner_msg_nfds(msg->type) == 1))
		return -EINVAL;
	iov.iov_len = owner_msg_encode(msg, buf);
	fdpass_attach(&mh, ctl.b, &fd, fd >= 0);
	do {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EPIPE ? -ECONNRESET : -errno;
	return (size_t)n == iov.iov_len ? 0 : -EIO;
}

/* Collects the fds of a packet; closes all of them if there are too many. */
static unsigned take_fds(struct msghdr *mh, int *fds, unsigned max)
{
	unsigned n = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t count;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < count; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

static void close_fds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
}

int owner_recv(int sock, int timeout_ms, struct owner_msg *ret_msg, int *ret_fd)
{
	uint8_t buf[OWNER_MAX_MSG];
	union {
		struct cmsghdr h;
		uint8_t b[CMSG_SPACE(MAX_FDS_SEEN * sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl.b, .msg_controllen = sizeof(ctl.b),
	};
	struct pollfd pfd = { .fd = sock, .events = POLLIN };
	int fds[MAX_FDS_SEEN];
	unsigned nfds;
	ssize_t n;
	int r;

	*ret_fd = -1;
	do {
		r = poll(&pfd, 1, timeout_ms);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (r == 0)
		return -ETIMEDOUT;
	do {
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == ECONNRESET ? -ECONNRESET : -errno;
	nfds = take_fds(&mh, fds, MAX_FDS_SEEN);
	if (n == 0) {
		close_fds(fds, nfds);
		return -ECONNRESET;
	}
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		close_fds(fds, nfds);
		return -EBADMSG;
	}
	r = owner_msg_decode(buf, (size_t)n, nfds, ret_msg);
	if (r < 0) {
		close_fds(fds, nfds);
		return r;
	}
	if (nfds)
		*ret_fd = fds[0];
	return 0;
}

// SPDX-License-Identifier: MIT
/* Encoders and the validating decoders for everything a peer sends. */
#include "xport-wire.h"

#include <errno.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define HELLO_MAGIC 0x49485856u   /* "VXHI" */
#define WELCOME_MAGIC 0x41485856u /* "VXHA" */
#define REGION_MAGIC 0x44525856u  /* "VXRD" */
#define CHALLENGE_MAGIC 0x43415856u /* "VXAC" */
#define HELLO_FLAGS (XPORT_HELLO_F_BOUND | XPORT_HELLO_F_AUTH | XPORT_HELLO_F_ENCRYPT)

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * The hello, challenge and welcome open alike: magic, then the version
 * (le16).  head_put() clears the message and writes that; head_check()
 * tells another message (-EBADMSG) from another version.
 */
static void head_put(uint8_t *out, size_t size, uint32_t magic)
{
	memset(out, 0, size);
	put_le32(out, magic);
	put_le16(out + 4, XPORT_WIRE_VERSION);
}

static int head_check(const uint8_t *p, uint32_t magic)
{
	if (get_le32(p) != magic)
		return -EBADMSG;
	if (get_le16(p + 4) != XPORT_WIRE_VERSION)
		return -EPROTONOSUPPORT;
	return 0;
}

void xport_hello_encode(const struct xport_hello *hello,
			uint8_t out[XPORT_HELLO_SIZE])
{
	head_put(out, XPORT_HELLO_SIZE, HELLO_MAGIC);
	put_le16(out + 6, hello->channel);
	put_le16(out + 8, hello->nchannels);
	put_le16(out + 10, hello->flags);
	put_le32(out + 12, hello->max_msg);
	put_le32(out + 16, hello->recv_depth);
	put_le64(out + 20, hello->token);
}

/*
 * rdma_cm hands over private data padded with zeros to the transport's
 * maximum, so a buffer longer than the struct is fine as long as the tail
 * is zero.
 */
static int check_length(const uint8_t *p, size_t len, size_t want)
{
	if (!p || len < want)
		return -EBADMSG;
	return all_zero(p + want, len - want) ? 0 : -EBADMSG;
}

/* The first XPORT_HELLO_SIZE bytes of p, whatever follows. */
static int hello_fields(const uint8_t *p, struct xport_hello *ret)
{
	struct xport_hello h;
	int r = head_check(p, HELLO_MAGIC);

	if (r < 0)
		return r;
	h.channel = get_le16(p + 6);
	h.nchannels = get_le16(p + 8);
	h.flags = get_le16(p + 10);
	h.max_msg = get_le32(p + 12);
	h.recv_depth = get_le32(p + 16);
	h.token = get_le64(p + 20);
	if (!all_zero(p + 28, 4) || (h.flags & ~HELLO_FLAGS))
		return -EBADMSG;
	/* Authentication and encryption only ever come with a binding. */
	if ((h.flags & (XPORT_HELLO_F_AUTH | XPORT_HELLO_F_ENCRYPT)) &&
	    !(h.flags & XPORT_HELLO_F_BOUND))
		return -EBADMSG;
	if ((h.flags & XPORT_HELLO_F_AUTH) && h.channel != 0)
		return -EBADMSG;
	if (h.nchannels < 1 || h.nchannels > XPORT_MAX_CHANNELS ||
	    h.channel >= h.nchannels)
		return -EBADMSG;
	if (h.max_msg < XPORT_MIN_MSG || h.max_msg > XPORT_MAX_MSG ||
	    h.recv_depth < 1 || h.recv_depth > XPORT_MAX_DEPTH)
		return -EBADMSG;
	*ret = h;
	return 0;
}

int xport_hello_decode(const void *buf, size_t len, struct xport_hello *ret)
{
	const uint8_t *p = buf;

	if (check_length(p, len, XPORT_HELLO_SIZE) < 0)
		return -EBADMSG;
	return hello_fields(p, ret);
}

int xport_bound_hello_decode(const void *buf, size_t len, struct xport_hello *ret,
			     uint8_t ret_tag[XPORT_TAG_SIZE])
{
	const uint8_t *p = buf;
	struct xport_hello h;
	int r;

	if (check_length(p, len, XPORT_BOUND_HELLO_SIZE) < 0)
		return -EBADMSG;
	r = hello_fields(p, &h);
	if (r < 0)
		return r;
	if (!(h.flags & XPORT_HELLO_F_BOUND))
		return -EBADMSG;
	memcpy(ret_tag, p + XPORT_HELLO_SIZE, XPORT_TAG_SIZE);
	*ret = h;
	return 0;
}

void xport_challenge_encode(uint64_t nonce, uint8_t out[XPORT_CHALLENGE_SIZE])
{
	head_put(out, XPORT_CHALLENGE_SIZE, CHALLENGE_MAGIC);
	put_le64(out + 8, nonce);
}

int xport_challenge_decode(const void *buf, size_t len, uint64_t *ret_nonce)
{
	const uint8_t *p = buf;
	int r;

	if (!p || len != XPORT_CHALLENGE_SIZE)
		return -EBADMSG;
	r = head_check(p, CHALLENGE_MAGIC);
	if (r < 0)
		return r;
	if (get_le16(p + 6))
		return -EBADMSG;
	*ret_nonce = get_le64(p + 8);
	return 0;
}

void xport_welcome_encode(const struct xport_welcome *welcome,
			  uint8_t out[XPORT_WELCOME_SIZE])
{
	head_put(out, XPORT_WELCOME_SIZE, WELCOME_MAGIC);
	put_le16(out + 6, welcome->status);
	put_le32(out + 8, welcome->max_msg);
}

int xport_welcome_decode(const void *buf, size_t len, struct xport_welcome *ret)
{
	const uint8_t *p = buf;
	struct xport_welcome w;
	int r;

	if (check_length(p, len, XPORT_WELCOME_SIZE) < 0)
		return -EBADMSG;
	r = head_check(p, WELCOME_MAGIC);
	if (r < 0)
		return r;
	w.status = get_le16(p + 6);
	w.max_msg = get_le32(p + 8);
	if (!all_zero(p + 12, 4))
		return -EBADMSG;
	if (w.status == 0 && (w.max_msg < XPORT_MIN_MSG || w.max_msg > XPORT_MAX_MSG))
		return -EBADMSG;
	*ret = w;
	return 0;
}

int xport_welcome_result(const uint8_t buf[XPORT_WELCOME_SIZE], uint32_t *max_msg)
{
	struct xport_welcome w;

	if (xport_welcome_decode(buf, XPORT_WELCOME_SIZE, &w) < 0)
		return -EPROTO;
	if (w.status)
		return -(int)w.status;
	*max_msg = MIN(*max_msg, w.max_msg);
	return 0;
}

void xport_region_encode(const struct xport_region_wire *region,
			 uint8_t out[XPORT_REGION_DESC_SIZE])
{
	memset(out, 0, XPORT_REGION_DESC_SIZE);
	put_le32(out, REGION_MAGIC);
	out[4] = XPORT_WIRE_VERSION;
	out[5] = region->kind;
	out[6] = region->access;
	put_le32(out + 8, region->id);
	put_le32(out + 12, region->key);
	put_le64(out + 16, region->base);
	put_le64(out + 24, region->len);
}

int xport_region_decode(const void *buf, size_t len,
			struct xport_region_wire *ret)
{
	const uint8_t *p = buf;
	struct xport_region_wire r;

	if (!p || len != XPORT_REGION_DESC_SIZE || get_le32(p) != REGION_MAGIC)
		return -EBADMSG;
	if (p[4] != XPORT_WIRE_VERSION)
		return -EPROTONOSUPPORT;
	r.kind = p[5];
	r.access = p[6];
	r.id = get_le32(p + 8);
	r.key = get_le32(p + 12);
	r.base = get_le64(p + 16);
	r.len = get_le64(p + 24);
	if (p[7] || (r.kind != XPORT_KIND_RDMA && r.kind != XPORT_KIND_TCP))
		return -EBADMSG;
	if (!r.access || (r.access & ~(XPORT_ACCESS_REMOTE_WRITE | XPORT_ACCESS_REMOTE_READ)))
		return -EBADMSG;
	if (r.len == 0 || r.base + r.len < r.base)
		return -EBADMSG;
	*ret = r;
	return 0;
}

void xport_frame_encode(const struct xport_frame *frame,
			uint8_t out[XPORT_FRAME_SIZE])
{
	memset(out, 0, XPORT_FRAME_SIZE);
	out[0] = frame->op;
	put_le32(out + 4, frame->len);
	put_le32(out + 8, frame->region);
	put_le32(out + 12, frame->key);
	put_le64(out + 16, frame->offset);
	put_le32(out + 24, frame->tag);
}

int xport_frame_decode(const void *buf, size_t len, uint32_t max_msg,
		       struct xport_frame *ret)
{
	const uint8_t *p = buf;
	struct xport_frame f;

	if (!p || len != XPORT_FRAME_SIZE || p[1] || get_le16(p + 2) ||
	    !all_zero(p + 28, 4))
		return -EBADMSG;
	f.op = p[0];
	f.len = get_le32(p + 4);
	f.region = get_le32(p + 8);
	f.key = get_le32(p + 12);
	f.offset = get_le64(p + 16);
	f.tag = get_le32(p + 24);

	switch (f.op) {
	case XPORT_FRAME_SEND:
		if (f.len > max_msg || f.region || f.key || f.offset || f.tag)
			return -EBADMSG;
		break;
	case XPORT_FRAME_WRITE:
		if (f.tag)
			return -EBADMSG;
		/* fall through */
	case XPORT_FRAME_WRITE_IMM:
	case XPORT_FRAME_READ_REQ:
		if (f.len > XPORT_MAX_IO || f.offset + f.len < f.offset)
			return -EBADMSG;
		break;
	case XPORT_FRAME_READ_RESP:
		if (f.len > XPORT_MAX_IO || f.region || f.key || f.offset)
			return -EBADMSG;
		break;
	default:
		return -EBADMSG;
	}
	*ret = f;
	return 0;
}

int xport_parse_hostport(const char *spec, char **ret_host, char **ret_port)
{
	const char *colon, *host_start = spec, *host_end;
	char *end;
	unsigned long port;

	if (!spec)
		return -EINVAL;
	if (spec[0] == '[') {
		host_start = spec + 1;
		host_end = strchr(host_start, ']');
		if (!host_end || host_end[1] != ':')
			return -EINVAL;
		colon = host_end + 1;
	} else {
		colon = strrchr(spec, ':');
		if (!colon || memchr(spec, ':', (size_t)(colon - spec)))
			return -EINVAL;
		host_end = colon;
	}
	if (!colon[1] || strlen(colon + 1) > 5)
		return -EINVAL;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || port > 65535 || colon[1] < '0' || colon[1] > '9')
		return -EINVAL;
	*ret_host = g_strndup(host_start, (gsize)(host_end - host_start));
	*ret_port = g_strdup(colon + 1);
	return 0;
}

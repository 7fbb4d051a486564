// SPDX-License-Identifier: MIT
/* Engine-to-engine messages: encoding and the validating decoder. */
#include "peer-proto.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "util.h"

#define PEER_MAGIC 0x52504d56u /* "VMPR" */
#define MAX_ERRNO 4095

static_assert(PEER_MAX_MSG >= PEER_HDR_SIZE + 8 + 8 * OWNER_MAX_BLOCKS, "HASHES fits");

/* n: HASHES' block count, PAGES' run count, else unused. */
static size_t payload_size(enum peer_msg_type type, uint32_t n)
{
	switch (type) {
	case PEER_MSG_LAYOUT: return 16;
	case PEER_MSG_BLOCK: return 16 + OWNER_NAME_MAX;
	case PEER_MSG_REGION: return 8 + XPORT_REGION_DESC_SIZE;
	case PEER_MSG_PROGRESS: return 16;
	case PEER_MSG_DONE: return 24;
	case PEER_MSG_HASHES: return 8 + 8 * (size_t)n;
	case PEER_MSG_PAGES: return 8 + 16 * (size_t)n;
	case PEER_MSG_ROUND_END: return 8;
	case PEER_MSG_ROUND_LANDED: return 16;
	case PEER_MSG_READY:
	case PEER_MSG_COMMIT:
	case PEER_MSG_COMMITTED: return 0;
	case PEER_MSG_HANDOFF: return 8;
	case PEER_MSG_FAIL:
	case PEER_MSG_RESULT: return 4;
	}
	return SIZE_MAX;
}

size_t peer_msg_encode(const struct peer_msg *m, uint8_t buf[PEER_MAX_MSG])
{
	uint32_t n = m->type == PEER_MSG_HASHES ? m->u.hashes.nblocks
		   : m->type == PEER_MSG_PAGES  ? m->u.pages.nruns
						: 0;
	size_t plen = payload_size(m->type, n);
	uint8_t *p = mig_msg_start(buf, PEER_MAGIC, (uint16_t)m->type, plen);

	switch (m->type) {
	case PEER_MSG_LAYOUT:
		put_le32(p, m->u.layout.version);
		put_le32(p + 4, m->u.layout.nblocks);
		put_le32(p + 8, m->u.layout.flags);
		break;
	case PEER_MSG_BLOCK:
		put_le32(p, m->u.block.index);
		put_le32(p + 4, m->u.block.page_size);
		put_le64(p + 8, m->u.block.size);
		memcpy(p + 16, m->u.block.name, strnlen(m->u.block.name, OWNER_NAME_MAX - 1));
		break;
	case PEER_MSG_REGION:
		put_le32(p, m->u.region.index);
		memcpy(p + 8, m->u.region.desc, XPORT_REGION_DESC_SIZE);
		break;
	case PEER_MSG_PROGRESS:
		put_le64(p, m->u.progress.round);
		put_le64(p + 8, m->u.progress.bytes);
		break;
	case PEER_MSG_DONE:
		put_le32(p, m->u.done.channel);
		put_le64(p + 8, m->u.done.rounds);
		put_le64(p + 16, m->u.done.bytes);
		break;
	case PEER_MSG_HASHES:
		put_le32(p, n);
		for (uint32_t i = 0; i < n; i++)
			put_le64(p + 8 + 8 * i, m->u.hashes.hash[i]);
		break;
	case PEER_MSG_PAGES:
		put_le32(p, m->u.pages.round);
		put_le32(p + 4, n);
		for (uint32_t i = 0; i < n; i++) {
			uint8_t *r = p + 8 + 16 * i;

			put_le32(r, m->u.pages.run[i].block);
			put_le32(r + 4, m->u.pages.run[i].count);
			put_le64(r + 8, m->u.pages.run[i].first);
		}
		break;
	case PEER_MSG_ROUND_END:
		put_le32(p, m->u.round.round);
		put_le32(p + 4, m->u.round.channel);
		break;
	case PEER_MSG_ROUND_LANDED:
		put_le32(p, m->u.round.round);
		put_le32(p + 4, m->u.round.sweep_ms);
		put_le64(p + 8, m->u.round.unchecked);
		break;
	case PEER_MSG_HANDOFF:
		put_le32(p, m->u.port);
		break;
	case PEER_MSG_FAIL:
	case PEER_MSG_RESULT:
		put_le32(p, (uint32_t)m->u.error);
		break;
	default:
		break;
	}
	return PEER_HDR_SIZE + plen;
}

static int decode_payload(const uint8_t *p, struct peer_msg *m)
{
	switch (m->type) {
	case PEER_MSG_LAYOUT:
		m->u.layout.version = get_le32(p);
		m->u.layout.nblocks = get_le32(p + 4);
		m->u.layout.flags = get_le32(p + 8);
		if (m->u.layout.version != PEER_PROTO_VERSION &&
		    m->u.layout.version != PEER_PROTO_VERSION_HANDOFF)
			return -EPROTONOSUPPORT;
		if (m->u.layout.nblocks < 1 || m->u.layout.nblocks > OWNER_MAX_BLOCKS ||
		    (m->u.layout.flags &
		     ~(PEER_FLAG_VERIFY | PEER_FLAG_HANDOFF | PEER_FLAG_VERIFY_PAGES |
		       PEER_FLAG_ROUND_LANDED)) ||
		    get_le32(p + 12))
			return -EBADMSG;
		/* One way of verifying, or none. */
		if ((m->u.layout.flags & PEER_FLAG_VERIFY) &&
		    (m->u.layout.flags & PEER_FLAG_VERIFY_PAGES))
			return -EBADMSG;
		/* Version 2 is exactly the hand-off. */
		if (!(m->u.layout.flags & PEER_FLAG_HANDOFF) !=
		    (m->u.layout.version == PEER_PROTO_VERSION))
			return -EBADMSG;
		return 0;
	case PEER_MSG_BLOCK:
		m->u.block.index = get_le32(p);
		m->u.block.page_size = get_le32(p + 4);
		m->u.block.size = get_le64(p + 8);
		if (!owner_block_geometry_valid(m->u.block.index, m->u.block.page_size,
						m->u.block.size) ||
		    !owner_name_valid(p + 16))
			return -EBADMSG;
		memcpy(m->u.block.name, p + 16, OWNER_NAME_MAX);
		return 0;
	case PEER_MSG_REGION:
		m->u.region.index = get_le32(p);
		if (m->u.region.index >= OWNER_MAX_BLOCKS || get_le32(p + 4))
			return -EBADMSG;
		memcpy(m->u.region.desc, p + 8, XPORT_REGION_DESC_SIZE);
		return 0;
	case PEER_MSG_PROGRESS:
		m->u.progress.round = get_le64(p);
		m->u.progress.bytes = get_le64(p + 8);
		return 0;
	case PEER_MSG_DONE:
		m->u.done.channel = get_le32(p);
		m->u.done.rounds = get_le64(p + 8);
		m->u.done.bytes = get_le64(p + 16);
		return m->u.done.channel < XPORT_MAX_CHANNELS && !get_le32(p + 4) ? 0 : -EBADMSG;
	case PEER_MSG_HASHES:
		m->u.hashes.nblocks = get_le32(p);
		if (get_le32(p + 4))
			return -EBADMSG;
		for (uint32_t i = 0; i < m->u.hashes.nblocks; i++)
			m->u.hashes.hash[i] = get_le64(p + 8 + 8 * i);
		return 0;
	case PEER_MSG_PAGES:
		/* The count was checked with the length; each run against the
		 * layout by the destination, which knows it. */
		m->u.pages.round = get_le32(p);
		m->u.pages.nruns = get_le32(p + 4);
		for (uint32_t i = 0; i < m->u.pages.nruns; i++) {
			const uint8_t *r = p + 8 + 16 * i;
			struct peer_run *run = &m->u.pages.run[i];

			run->block = get_le32(r);
			run->count = get_le32(r + 4);
			run->first = get_le64(r + 8);
			if (run->block >= OWNER_MAX_BLOCKS || run->count == 0 ||
			    run->first > UINT64_MAX - run->count)
				return -EBADMSG;
		}
		return 0;
	case PEER_MSG_ROUND_END:
		m->u.round.round = get_le32(p);
		m->u.round.channel = get_le32(p + 4);
		return m->u.round.channel < XPORT_MAX_CHANNELS ? 0 : -EBADMSG;
	case PEER_MSG_ROUND_LANDED:
		m->u.round.round = get_le32(p);
		m->u.round.sweep_ms = get_le32(p + 4);
		m->u.round.unchecked = get_le64(p + 8);
		return 0;
	case PEER_MSG_HANDOFF:
		/* Port 0 is no port: QEMU listens on a real one. */
		if (get_le32(p) < 1 || get_le32(p) > UINT16_MAX || get_le32(p + 4))
			return -EBADMSG;
		m->u.port = (uint16_t)get_le32(p);
		return 0;
	case PEER_MSG_FAIL:
	case PEER_MSG_RESULT:
		m->u.error = (int32_t)get_le32(p);
		return m->u.error >= 0 && m->u.error <= MAX_ERRNO ? 0 : -EBADMSG;
	default:
		return 0;
	}
}

int peer_msg_decode(const void *buf, size_t len, struct peer_msg *ret_msg)
{
	const uint8_t *b = buf;
	struct peer_msg m = { 0 };
	uint32_t n = 0;
	size_t plen;
	int r;

	if (!mig_hdr_valid(b, len, PEER_MAGIC))
		return -EBADMSG;
	m.type = get_le16(b + 4);
	if (m.type == PEER_MSG_HASHES || m.type == PEER_MSG_PAGES) {
		if (len < PEER_HDR_SIZE + 8)
			return -EBADMSG;
		n = get_le32(b + PEER_HDR_SIZE + (m.type == PEER_MSG_PAGES ? 4 : 0));
		if (n < 1 || n > (m.type == PEER_MSG_PAGES ? PEER_MAX_RUNS : OWNER_MAX_BLOCKS))
			return -EBADMSG;
	}
	plen = payload_size(m.type, n);
	if (plen == SIZE_MAX || get_le32(b + 8) != plen || len != PEER_HDR_SIZE + plen)
		return -EBADMSG;
	r = decode_payload(b + PEER_HDR_SIZE, &m);
	if (r < 0)
		return r;
	*ret_msg = m;
	return 0;
}

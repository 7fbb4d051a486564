// SPDX-License-Identifier: MIT
/*
 * The bytes of the back-end peer protocol (rdma-peer-wire.h).  A request:
 *
 *    0  8 bytes of magic "vrdmaPB1"
 *    8  le16 op, le16 0
 *   12  le32 n_rkeys (RETARGET; else 0)
 *   16  le32 qpn, le32 from_qpn
 *   24  from_gid[16]
 *   40  token[16]
 *   56  le32 new_qpn (RETARGET; else 0), le32 0
 *   64  new_gid[16] (RETARGET; else 0)
 *   80  n_rkeys times { le32 guest rkey, le32 host rkey }
 *
 * A reply: 8 bytes of magic "vrdmaPR1", le32 status, le32 0.
 */
#include <errno.h>
#include <string.h>

#include "rdma-peer-wire.h"
#include "util.h"

#define QPN_MAX 0xffffffu

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

int rdma_peer_request_decode(const uint8_t buf[RDMA_PEER_REQUEST_SIZE],
			     struct rdma_peer_request *ret)
{
	struct rdma_peer_request r = { 0 };

	if (memcmp(buf, RDMA_PEER_MAGIC, 8) || get_le16(buf + 10) || get_le32(buf + 60))
		return -EBADMSG;
	r.op = get_le16(buf + 8);
	r.n_rkeys = get_le32(buf + 12);
	r.qpn = get_le32(buf + 16);
	r.from_qpn = get_le32(buf + 20);
	memcpy(r.from_gid, buf + 24, 16);
	memcpy(r.token, buf + 40, RDMA_PEER_TOKEN_SIZE);
	r.new_qpn = get_le32(buf + 56);
	memcpy(r.new_gid, buf + 64, 16);
	if (r.op < RDMA_PEER_PAUSE || r.op > RDMA_PEER_DISCONNECT || r.qpn > QPN_MAX ||
	    r.from_qpn > QPN_MAX || r.new_qpn > QPN_MAX || r.n_rkeys > RDMA_PEER_MAX_RKEYS)
		return -EBADMSG;
	/* Only a RETARGET says where to, and with which keys. */
	if (r.op != RDMA_PEER_RETARGET && (r.n_rkeys || r.new_qpn || !all_zero(r.new_gid, 16)))
		return -EBADMSG;
	*ret = r;
	return 0;
}

void rdma_peer_request_encode(const struct rdma_peer_request *req,
			      uint8_t ret[RDMA_PEER_REQUEST_SIZE])
{
	memset(ret, 0, RDMA_PEER_REQUEST_SIZE);
	memcpy(ret, RDMA_PEER_MAGIC, 8);
	put_le16(ret + 8, req->op);
	put_le32(ret + 12, req->n_rkeys);
	put_le32(ret + 16, req->qpn);
	put_le32(ret + 20, req->from_qpn);
	memcpy(ret + 24, req->from_gid, 16);
	memcpy(ret + 40, req->token, RDMA_PEER_TOKEN_SIZE);
	put_le32(ret + 56, req->new_qpn);
	memcpy(ret + 64, req->new_gid, 16);
}

void rdma_peer_rkeys_decode(const uint8_t *buf, uint32_t n, struct rdma_peer_rkey *ret)
{
	for (uint32_t i = 0; i < n; i++) {
		ret[i].guest = get_le32(buf + 8ull * i);
		ret[i].host = get_le32(buf + 8ull * i + 4);
	}
}

void rdma_peer_rkeys_encode(const struct rdma_peer_rkey *rkeys, uint32_t n, uint8_t *ret)
{
	for (uint32_t i = 0; i < n; i++) {
		put_le32(ret + 8ull * i, rkeys[i].guest);
		put_le32(ret + 8ull * i + 4, rkeys[i].host);
	}
}

void rdma_peer_reply_encode(uint32_t status, uint8_t ret[RDMA_PEER_REPLY_SIZE])
{
	memcpy(ret, RDMA_PEER_REPLY_MAGIC, 8);
	put_le32(ret + 8, status);
	put_le32(ret + 12, 0);
}

int rdma_peer_reply_decode(const uint8_t buf[RDMA_PEER_REPLY_SIZE], uint32_t *ret_status)
{
	if (memcmp(buf, RDMA_PEER_REPLY_MAGIC, 8) || get_le32(buf + 12))
		return -EBADMSG;
	*ret_status = get_le32(buf + 8);
	return 0;
}

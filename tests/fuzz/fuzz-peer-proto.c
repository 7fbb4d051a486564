// SPDX-License-Identifier: MIT
/*
 * migrate/peer-proto.c: peer_msg_decode() on one SEND from the migration
 * peer (the other engine, across the network).  What the decoder accepts
 * must be a message that survives encode -> decode.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "peer-proto.h"
#include "xport-wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t e1[PEER_MAX_MSG], e2[PEER_MAX_MSG];
	struct peer_msg a, b;
	size_t n1, n2;

	if (peer_msg_decode(data, size, &a))
		return 0;
	FUZZ_CHECK(size <= PEER_MAX_MSG);
	if (a.type == PEER_MSG_HASHES)
		FUZZ_CHECK(a.u.hashes.nblocks <= OWNER_MAX_BLOCKS);
	if (a.type == PEER_MSG_LAYOUT)
		FUZZ_CHECK(a.u.layout.nblocks <= OWNER_MAX_BLOCKS);
	if (a.type == PEER_MSG_PAGES) {
		/* The destination indexes its blocks and digests with these. */
		FUZZ_CHECK(a.u.pages.nruns >= 1 && a.u.pages.nruns <= PEER_MAX_RUNS);
		for (uint32_t i = 0; i < a.u.pages.nruns; i++)
			FUZZ_CHECK(a.u.pages.run[i].block < OWNER_MAX_BLOCKS &&
				   a.u.pages.run[i].count &&
				   a.u.pages.run[i].first + a.u.pages.run[i].count >=
					   a.u.pages.run[i].first);
	}
	if (a.type == PEER_MSG_REGION) {
		/* The destination's region descriptor: the source decodes it next. */
		struct xport_region_wire r;

		(void)xport_region_decode(a.u.region.desc, XPORT_REGION_DESC_SIZE, &r);
	}
	if (a.type == PEER_MSG_BLOCK)
		FUZZ_CHECK(memchr(a.u.block.name, '\0', OWNER_NAME_MAX) != NULL);
	n1 = peer_msg_encode(&a, e1);
	FUZZ_CHECK(n1 <= PEER_MAX_MSG);
	FUZZ_CHECK(peer_msg_decode(e1, n1, &b) == 0);
	n2 = peer_msg_encode(&b, e2);
	FUZZ_CHECK(n1 == n2 && !memcmp(e1, e2, n1));
	return 0;
}

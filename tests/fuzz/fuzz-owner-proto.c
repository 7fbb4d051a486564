// SPDX-License-Identifier: MIT
/*
 * migrate/owner-proto.c: owner_msg_decode() on one packet from the owner of
 * guest RAM (a patched QEMU or guestsim).  The first byte is how many fds
 * came with the packet (SCM_RIGHTS); the rest is the packet.  What the
 * decoder accepts must be a message that survives encode -> decode.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "owner-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t e1[OWNER_MAX_MSG], e2[OWNER_MAX_MSG];
	struct owner_msg a, b;
	size_t n1, n2;
	unsigned nfds;

	if (size < 1)
		return 0;
	nfds = data[0] % 4; /* owner_recv() takes a few and refuses the rest */
	if (owner_msg_decode(data + 1, size - 1, nfds, &a))
		return 0;
	FUZZ_CHECK(nfds == owner_msg_nfds(a.type));
	FUZZ_CHECK(size - 1 <= OWNER_MAX_MSG);
	FUZZ_CHECK(owner_msg_name(a.type) != NULL);
	if (a.type == OWNER_MSG_BLOCK) {
		FUZZ_CHECK(a.u.block.page_size >= OWNER_MIN_PAGE &&
			   a.u.block.page_size <= OWNER_MAX_PAGE);
		FUZZ_CHECK(!(a.u.block.page_size & (a.u.block.page_size - 1)));
		FUZZ_CHECK(a.u.block.size && !(a.u.block.size % a.u.block.page_size));
		FUZZ_CHECK(memchr(a.u.block.name, '\0', OWNER_NAME_MAX) != NULL);
	}
	if (a.type == OWNER_MSG_WELCOME)
		FUZZ_CHECK(a.u.welcome.nblocks >= 1 &&
			   a.u.welcome.nblocks <= OWNER_MAX_BLOCKS);
	n1 = owner_msg_encode(&a, e1);
	FUZZ_CHECK(n1 <= OWNER_MAX_MSG);
	FUZZ_CHECK(owner_msg_decode(e1, n1, nfds, &b) == 0);
	n2 = owner_msg_encode(&b, e2);
	FUZZ_CHECK(n1 == n2 && !memcmp(e1, e2, n1));
	return 0;
}

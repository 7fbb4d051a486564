// SPDX-License-Identifier: MIT
/*
 * The authentication's decoders: the tagged hello (the AUTH message, an
 * encrypted channel's first record, rdma's connection private data), the
 * challenge a plain tcp channel answers, and the PSK key file.  The first
 * byte picks the decoder; the rest sits at the end of libFuzzer's own
 * exactly-sized buffer so ASan sees any overread.  What a decoder accepts
 * must hold its documented bounds and survive encode -> decode unchanged.
 */
#include <glib.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "xport-tls.h"
#include "xport-wire.h"

static void bound_hello(const uint8_t *p, size_t n)
{
	uint8_t tag[XPORT_TAG_SIZE], tag2[XPORT_TAG_SIZE];
	uint8_t e1[XPORT_BOUND_HELLO_SIZE], e2[XPORT_BOUND_HELLO_SIZE];
	struct xport_hello a, b;

	if (xport_bound_hello_decode(p, n, &a, tag))
		return;
	FUZZ_CHECK(n >= XPORT_BOUND_HELLO_SIZE);
	FUZZ_CHECK(a.flags & XPORT_HELLO_F_BOUND);
	FUZZ_CHECK(!(a.flags & XPORT_HELLO_F_AUTH) || a.channel == 0);
	FUZZ_CHECK(a.channel < a.nchannels && a.nchannels <= XPORT_MAX_CHANNELS);
	FUZZ_CHECK(!memcmp(tag, p + XPORT_HELLO_SIZE, XPORT_TAG_SIZE));
	xport_hello_encode(&a, e1);
	memcpy(e1 + XPORT_HELLO_SIZE, tag, XPORT_TAG_SIZE);
	FUZZ_CHECK(!memcmp(e1, p, XPORT_BOUND_HELLO_SIZE));
	FUZZ_CHECK(xport_bound_hello_decode(e1, sizeof(e1), &b, tag2) == 0);
	xport_hello_encode(&b, e2);
	memcpy(e2 + XPORT_HELLO_SIZE, tag2, XPORT_TAG_SIZE);
	FUZZ_CHECK(!memcmp(e1, e2, sizeof(e1)));
	/* Its first 32 bytes are a plain hello too (tcp reads them alone). */
	FUZZ_CHECK(xport_hello_decode(p, XPORT_HELLO_SIZE, &b) == 0);
}

static void challenge(const uint8_t *p, size_t n)
{
	uint8_t e[XPORT_CHALLENGE_SIZE];
	uint64_t nonce;

	if (xport_challenge_decode(p, n, &nonce))
		return;
	FUZZ_CHECK(n == XPORT_CHALLENGE_SIZE);
	xport_challenge_encode(nonce, e);
	FUZZ_CHECK(!memcmp(e, p, sizeof(e)));
}

static void psk_file(const uint8_t *p, size_t n)
{
	struct xport_psk keys[4];
	unsigned count = 0;

	if (xport_psk_parse((const char *)p, n, keys, G_N_ELEMENTS(keys), &count))
		return;
	FUZZ_CHECK(count >= 1 && count <= G_N_ELEMENTS(keys));
	for (unsigned i = 0; i < count; i++) {
		size_t len = strlen(keys[i].identity);

		FUZZ_CHECK(len >= 1 && len <= XPORT_PSK_MAX_IDENTITY);
		FUZZ_CHECK(!strchr(keys[i].identity, ':'));
		FUZZ_CHECK(keys[i].key_len >= XPORT_PSK_MIN_KEY &&
			   keys[i].key_len <= XPORT_PSK_MAX_KEY);
		for (unsigned k = 0; k < i; k++)
			FUZZ_CHECK(strcmp(keys[k].identity, keys[i].identity));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static void (*const decoders[])(const uint8_t *, size_t) = {
		bound_hello, challenge, psk_file,
	};

	if (size < 1)
		return 0;
	decoders[data[0] % G_N_ELEMENTS(decoders)](data + 1, size - 1);
	return 0;
}

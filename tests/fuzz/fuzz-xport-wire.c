// SPDX-License-Identifier: MIT
/*
 * lib/xport-wire.c: every decoder of bytes a transport peer sends.  The
 * first byte picks the decoder; the rest is the peer's bytes, left at the
 * end of libFuzzer's own exactly-sized buffer so ASan sees any overread.
 * What a decoder accepts must survive encode -> decode unchanged.
 */
#include <glib.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "xport-wire.h"

/*
 * The fixed-size messages: what the decoder accepts re-encodes to bytes
 * that decode and re-encode to the same bytes.
 */
#define FIXED_SIZE_TARGET(name, type, size)                                    \
	static void name(const uint8_t *p, size_t n)                           \
	{                                                                      \
		type a, b;                                                     \
		uint8_t e1[size], e2[size];                                    \
									       \
		if (xport_##name##_decode(p, n, &a))                           \
			return;                                                \
		FUZZ_CHECK(n >= size);                                         \
		xport_##name##_encode(&a, e1);                                 \
		FUZZ_CHECK(xport_##name##_decode(e1, sizeof(e1), &b) == 0);    \
		xport_##name##_encode(&b, e2);                                 \
		FUZZ_CHECK(!memcmp(e1, e2, sizeof(e1)));                       \
	}

FIXED_SIZE_TARGET(hello, struct xport_hello, XPORT_HELLO_SIZE)
FIXED_SIZE_TARGET(welcome, struct xport_welcome, XPORT_WELCOME_SIZE)
FIXED_SIZE_TARGET(region, struct xport_region_wire, XPORT_REGION_DESC_SIZE)

static void frame(const uint8_t *p, size_t n)
{
	struct xport_frame a, b;
	uint8_t e1[XPORT_FRAME_SIZE], e2[XPORT_FRAME_SIZE];
	uint32_t max_msg;

	/* The receiver's own limit, within what a connection negotiates. */
	if (n < 4)
		return;
	max_msg = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		  (uint32_t)p[3] << 24;
	max_msg = XPORT_MIN_MSG + max_msg % (XPORT_MAX_MSG - XPORT_MIN_MSG + 1);
	p += 4, n -= 4;
	if (xport_frame_decode(p, n, max_msg, &a))
		return;
	FUZZ_CHECK(n >= XPORT_FRAME_SIZE);
	if (a.op == XPORT_FRAME_SEND)
		FUZZ_CHECK(a.len <= max_msg);
	FUZZ_CHECK(a.len <= XPORT_MAX_IO);
	xport_frame_encode(&a, e1);
	FUZZ_CHECK(xport_frame_decode(e1, sizeof(e1), max_msg, &b) == 0);
	xport_frame_encode(&b, e2);
	FUZZ_CHECK(!memcmp(e1, e2, sizeof(e1)));
}

static void hostport(const uint8_t *p, size_t n)
{
	g_autofree char *spec = g_strndup((const char *)p, n);
	g_autofree char *host = NULL, *port = NULL;

	if (xport_parse_hostport(spec, &host, &port))
		return;
	FUZZ_CHECK(host && port && strlen(port) >= 1 && strlen(port) <= 5);
	FUZZ_CHECK(strtoul(port, NULL, 10) <= 65535);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static void (*const decoders[])(const uint8_t *, size_t) = {
		hello, welcome, region, frame, hostport,
	};

	if (size < 1)
		return 0;
	decoders[data[0] % G_N_ELEMENTS(decoders)](data + 1, size - 1);
	return 0;
}

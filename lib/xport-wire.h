/* SPDX-License-Identifier: MIT */
/*
 * Wire formats of the transport, and the one place where bytes received
 * from a peer are decoded and validated.  All integers are little endian.
 * Every decoder returns 0, or -EBADMSG for malformed input and
 * -EPROTONOSUPPORT for a version this side does not speak.
 */
#ifndef VRDMA_XPORT_WIRE_H
#define VRDMA_XPORT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "xport.h"

#define XPORT_WIRE_VERSION 1

#define XPORT_MIN_MSG 64u
#define XPORT_MAX_MSG (1u << 20)
#define XPORT_MAX_DEPTH 4096u
/* Largest payload of one request: bounds what a peer can make us read. */
#define XPORT_MAX_IO (1u << 30)

/* Connection request: one per channel (rdma_cm private data: <= 56 bytes). */
#define XPORT_HELLO_SIZE 32
/*
 * Hello flags (all zero without authentication, as before they existed).
 * BOUND: the sender proves with a tag (XPORT_TAG_SIZE bytes, see
 * xport-auth.h) that the channel belongs to an authenticated handshake;
 * AUTH: this stream is that handshake (inside TLS), channel 0; ENCRYPT: tcp
 * channels carry TLS records.  AUTH and ENCRYPT need BOUND.
 */
#define XPORT_HELLO_F_BOUND (1u << 0)
#define XPORT_HELLO_F_AUTH (1u << 1)
#define XPORT_HELLO_F_ENCRYPT (1u << 2)
#define XPORT_TAG_SIZE 16
/* A hello followed by its tag: the AUTH message, rdma private data, a TLS channel's first record. */
#define XPORT_BOUND_HELLO_SIZE (XPORT_HELLO_SIZE + XPORT_TAG_SIZE)
struct xport_hello {
	uint16_t channel;
	uint16_t nchannels;
	uint32_t max_msg;    /* largest SEND the sender accepts */
	uint32_t recv_depth; /* receive buffers the sender posts per channel */
	uint64_t token;      /* ties the channels of one connection together */
	uint16_t flags;      /* XPORT_HELLO_F_* */
};
void xport_hello_encode(const struct xport_hello *hello,
			uint8_t out[XPORT_HELLO_SIZE]);
int xport_hello_decode(const void *buf, size_t len, struct xport_hello *ret);
/* A hello with BOUND set and its tag; longer input must be zero-padded. */
int xport_bound_hello_decode(const void *buf, size_t len, struct xport_hello *ret,
			     uint8_t ret_tag[XPORT_TAG_SIZE]);

/* Connection reply. */
#define XPORT_WELCOME_SIZE 16
struct xport_welcome {
	uint16_t status; /* 0, or a positive errno: the server refuses */
	uint32_t max_msg;
};
void xport_welcome_encode(const struct xport_welcome *welcome,
			  uint8_t out[XPORT_WELCOME_SIZE]);
int xport_welcome_decode(const void *buf, size_t len, struct xport_welcome *ret);
/*
 * A client's reading of a reply: 0 (*max_msg lowered to the server's
 * largest SEND), -EPROTO if malformed, or the -errno the server refused with.
 */
int xport_welcome_result(const uint8_t buf[XPORT_WELCOME_SIZE], uint32_t *max_msg);

/*
 * tcp, with authentication: the server's answer to a plain channel's bound
 * HELLO, a fresh nonce the channel's tag must cover (so a tag seen on the
 * wire is worth nothing on another socket).
 */
#define XPORT_CHALLENGE_SIZE 16
void xport_challenge_encode(uint64_t nonce, uint8_t out[XPORT_CHALLENGE_SIZE]);
int xport_challenge_decode(const void *buf, size_t len, uint64_t *ret_nonce);

/* The authentication handshake's answer: a welcome and its tag (READY). */
#define XPORT_BOUND_WELCOME_SIZE (XPORT_WELCOME_SIZE + XPORT_TAG_SIZE)

/* Region descriptor, see xport_mr_describe(). */
struct xport_region_wire {
	uint8_t kind; /* enum xport_kind */
	uint8_t access;
	uint32_t id;
	uint32_t key;
	uint64_t base;
	uint64_t len;
};
void xport_region_encode(const struct xport_region_wire *region,
			 uint8_t out[XPORT_REGION_DESC_SIZE]);
int xport_region_decode(const void *buf, size_t len,
			struct xport_region_wire *ret);

/* tcp back end: every request travels as a frame header plus payload. */
#define XPORT_FRAME_SIZE 32
enum xport_frame_op {
	XPORT_FRAME_SEND = 1,
	XPORT_FRAME_WRITE,
	XPORT_FRAME_WRITE_IMM,
	XPORT_FRAME_READ_REQ,  /* len bytes of region at offset, please */
	XPORT_FRAME_READ_RESP, /* payload answers the READ_REQ with tag */
};
struct xport_frame {
	uint8_t op;
	uint32_t len;    /* payload bytes following the header (READ_REQ: asked) */
	uint32_t region; /* WRITE, WRITE_IMM, READ_REQ */
	uint32_t key;
	uint64_t offset;
	uint32_t tag; /* WRITE_IMM: immediate; READ_REQ/RESP: request tag */
};
void xport_frame_encode(const struct xport_frame *frame,
			uint8_t out[XPORT_FRAME_SIZE]);
/* max_msg: the receiver's limit for SEND payloads. */
int xport_frame_decode(const void *buf, size_t len, uint32_t max_msg,
		       struct xport_frame *ret);

/* "host:port", "[v6]:port" or ":port" (any address); ports 0..65535. */
int xport_parse_hostport(const char *spec, char **ret_host, char **ret_port);

#endif

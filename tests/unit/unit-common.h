/* SPDX-License-Identifier: MIT */
/*
 * What the unit tests share (cmocka assertions inside): little-endian
 * bytes, a reproducible random source, open fds of the process, memfds,
 * and a stream socket to play the front end or peer of a protocol with,
 * fds included.
 */
#ifndef VRDMA_UNIT_COMMON_H
#define VRDMA_UNIT_COMMON_H

#include <stddef.h>
#include <stdint.h>

void ut_st16(uint8_t *p, uint16_t v);
void ut_st32(uint8_t *p, uint32_t v);
void ut_st64(uint8_t *p, uint64_t v);
/* The n-byte little-endian value at p. */
uint64_t ut_ld(const uint8_t *p, unsigned int n);

/*
 * got == want, or the test fails with both as errno names and the context
 * (printf-style): what a decoder test says when a refusal is the wrong one.
 */
#define ut_assert_rc(got, want, ...) ut_check_rc(__FILE__, __LINE__, (got), (want), __VA_ARGS__)
__attribute__((format(printf, 5, 6)))
void ut_check_rc(const char *file, int line, int got, int want, const char *fmt, ...);
/* "0", the errno's name of a negative errno ("EBADMSG"), or what it is. */
const char *ut_rc_name(int rc);
/* A heap copy of exactly len bytes, so that ASan catches a read past it. */
uint8_t *ut_dup_exact(const void *buf, size_t len);

/* splitmix64 from seed: the same sequence every run. */
void ut_rnd_seed(uint64_t seed);
uint64_t ut_rnd(void);
uint64_t ut_rnd_below(uint64_t n);

/* Open fds of this process (to find leaks). */
int ut_count_fds(void);
/* A memfd of size bytes. */
int ut_memfd(const char *name, uint64_t size);

/* A connected AF_UNIX stream pair. */
void ut_stream_pair(int sv[2]);
/* One sendmsg of exactly len bytes with fds (len may be 0 only with fds). */
void ut_send_raw(int sock, const void *buf, size_t len, const int *fds, unsigned int nfds);
/*
 * Receives exactly len bytes (waiting); the fds that came with them, at
 * most max_fds, into fds (the rest closed).  Returns how many fds came.
 */
unsigned int ut_recv_raw(int sock, void *buf, size_t len, int *fds, unsigned int max_fds);

#endif

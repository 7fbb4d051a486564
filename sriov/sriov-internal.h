/* SPDX-License-Identifier: MIT */
/* Shared inside sriov/ (and by its unit tests): the sysfs parsers and the
 * state file.  Not for other folders. */
#ifndef VRDMA_SRIOV_INTERNAL_H
#define VRDMA_SRIOV_INTERNAL_H

#include <glib.h>

#include "sriov.h"

/* A sysfs attribute is short; anything longer is garbage. */
#define SRIOV_ATTR_MAX 256

/* ---- sysfs.c: every byte read from sysfs goes through these ---- */

/* Reads fd to its end into buf (room for max + 1 bytes, not terminated):
 * its length, or -EBADMSG when it holds more than max bytes. */
int sriov_read_capped(int fd, char *buf, size_t max, size_t *ret_len);

/* Reads <path> (at most SRIOV_ATTR_MAX bytes, one trailing newline
 * stripped).  -EBADMSG for longer content, NUL or control characters. */
int sriov_read_attr(const char *path, char ret_buf[SRIOV_ATTR_MAX + 1]);
/* Strict decimal: digits only, no sign or space, at most @max. */
int sriov_parse_uint(const char *s, unsigned long max, unsigned long *ret);
/* numa_node: "-1" or 0..1023. */
int sriov_parse_numa(const char *s, int *ret);
int sriov_read_uint(const char *path, unsigned long max, unsigned long *ret);
/* The PCI address a symlink points at (its last component, validated). */
int sriov_read_link_pci(const char *path, char ret[SRIOV_PCI_LEN]);
/* The last component of a symlink's target, validated as a name. */
int sriov_read_link_name(const char *path, char ret[SRIOV_NAME_LEN]);
/* Kernel object names (ibdev, netdev, driver): printable, no '/', no
 * space, not "." or "..", shorter than SRIOV_NAME_LEN. */
bool sriov_name_valid(const char *s);
/* Sorted entries of a directory (validated by @valid if given, others
 * skipped).  -ENOENT if the directory does not exist. */
int sriov_list_dir(const char *path, bool (*valid)(const char *), GPtrArray **ret_names);
bool sriov_pci_valid(const char *s);

/* ---- state.c ---- */

struct sriov_record {
	char function[SRIOV_NAME_LEN];
	enum sriov_pool_state state; /* ASSIGNED or DIRTY */
	char tenant[SRIOV_TENANT_LEN];
	int64_t since;
};

struct sriov_pool {
	GPtrArray *members; /* char *: explicitly added functions */
	GArray *records;    /* struct sriov_record */
};

struct sriov_pool *sriov_pool_new(void);
/* A lower-case PCI address or an RDMA device name. */
bool sriov_function_key_valid(const char *s);
int sriov_state_parse(const char *text, size_t len, struct sriov_pool **ret_pool);
char *sriov_state_format(const struct sriov_pool *pool);
/* Writes @pool atomically: a fresh 0600 <path>.tmpXXXXXX, fsync, rename,
 * fsync of the dir.  Removes temp files a crashed writer left. */
int sriov_state_save(const char *path, const struct sriov_pool *pool);
/* Takes the exclusive lock on <path>.lock (creating the directory),
 * waiting at most sriov_state_lock_timeout_ms: -ETIMEDOUT after that.
 * Returns the fd to close to unlock. */
int sriov_state_lock(const char *path);
/* Creates the directory of the state file. */
int sriov_state_dir_create(const char *path);
/* open(@path, @flags | O_CREAT, 0600) refusing symlinks (-ELOOP) and
 * anything but a regular file (-EBADMSG); tightens a looser mode. */
int sriov_open_private(const char *path, int flags);

/* Tests only: called between the fsync of the temp file and the rename. */
extern void (*sriov_state_before_rename)(const char *tmp_path);
/* Tests only: how long sriov_state_lock() waits (default 10 s). */
extern unsigned sriov_state_lock_timeout_ms;

/* scrub.c: whether sriov_scrub() has an identity to change on @fn. */
bool sriov_scrub_possible(const struct sriov_fn *fn);

struct sriov_record *sriov_pool_find_record(const struct sriov_pool *pool, const char *function);
bool sriov_pool_is_member(const struct sriov_pool *pool, const char *function);

static inline void sriov_pool_freep(struct sriov_pool **p) { sriov_pool_free(*p); }
static inline void sriov_scan_freep(struct sriov_scan **p) { sriov_scan_free(*p); }

#endif

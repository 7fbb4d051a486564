// SPDX-License-Identifier: MIT
#include "owner.h"

#include <errno.h>
#include <glib.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bitmap.h"
#include "util.h"

static int connect_owner(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_(closep) int fd = -1;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	return steal_fd(&fd);
}

/* Receives a message of the wanted type; anything else is a protocol error. */
static int expect(struct owner_session *s, enum owner_msg_type type,
		  int timeout_ms, struct owner_msg *ret, int *ret_fd)
{
	int fd = -1, r = owner_recv(s->sock, timeout_ms, ret, &fd);

	if (r < 0)
		return r;
	if (ret->type != type) {
		if (fd >= 0)
			close(fd);
		return -EPROTO;
	}
	if (ret_fd)
		*ret_fd = fd;
	else if (fd >= 0)
		close(fd);
	return 0;
}

/* Maps [offset, offset+size) of fd after checking it lies inside the file. */
static int map_checked(int fd, uint64_t offset, uint64_t size, int prot,
		       int flags, uint8_t **ret)
{
	struct stat st;
	void *p;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size < 0 || !range_within(offset, size, (uint64_t)st.st_size))
		return -EBADMSG;
	if (size > SIZE_MAX)
		return -EFBIG;
	p = mmap(NULL, (size_t)size, prot, MAP_SHARED | flags, fd, (off_t)offset);
	if (p == MAP_FAILED)
		return -errno;
	*ret = p;
	return 0;
}

static int receive_block(struct owner_session *s, unsigned index, int timeout_ms)
{
	struct owner_ram_block *b = &s->blocks[index];
	int prot = s->role == OWNER_ROLE_SOURCE ? PROT_READ : PROT_READ | PROT_WRITE;
	_cleanup_(closep) int fd = -1;
	struct owner_msg m;
	int r;

	r = expect(s, OWNER_MSG_BLOCK, timeout_ms, &m, &fd);
	if (r < 0)
		return r;
	if (m.u.block.index != index)
		return -EPROTO;
	for (unsigned i = 0; i < index; i++)
		if (strcmp(s->blocks[i].info.name, m.u.block.name) == 0)
			return -EPROTO;
	b->info = m.u.block;
	b->npages = m.u.block.size / m.u.block.page_size;
	r = map_checked(fd, b->info.offset, b->info.size, prot, 0, &b->addr);
	if (r < 0)
		return r;
	/* Kept: the source finds holes with it, the destination writes through it. */
	b->fd = steal_fd(&fd);
	s->ram_bytes += b->info.size;
	return 0;
}

/* The source's dirty bitmap: every block's words must fit inside it. */
static int receive_bitmap(struct owner_session *s, int timeout_ms)
{
	_cleanup_(closep) int fd = -1;
	struct owner_msg m;
	int r;

	r = expect(s, OWNER_MSG_BITMAP, timeout_ms, &m, &fd);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < s->nblocks; i++) {
		struct owner_ram_block *b = &s->blocks[i];

		if (!range_within(b->info.bitmap_offset, bitmap_words(b->npages) * 8,
				  m.u.bitmap_size))
			return -EBADMSG;
	}
	r = map_checked(fd, 0, m.u.bitmap_size, PROT_READ | PROT_WRITE, 0, &s->bitmap);
	if (r < 0)
		return r;
	s->bitmap_size = m.u.bitmap_size;
	for (unsigned i = 0; i < s->nblocks; i++)
		s->blocks[i].dirty = (uint64_t *)(s->bitmap + s->blocks[i].info.bitmap_offset);
	return 0;
}

static int handshake(struct owner_session *s, int timeout_ms)
{
	struct owner_msg m = {
		.type = OWNER_MSG_HELLO,
		.u.hello = { .version = OWNER_PROTO_VERSION, .role = s->role,
			     .caps = OWNER_CAPS_KNOWN },
	};
	int r = owner_send(s->sock, &m, -1);

	if (r < 0)
		return r;
	r = expect(s, OWNER_MSG_WELCOME, timeout_ms, &m, NULL);
	if (r < 0)
		return r;
	if (m.u.welcome.role != s->role)
		return -EPROTO;
	s->caps = m.u.welcome.caps & OWNER_CAPS_KNOWN;
	s->nblocks = m.u.welcome.nblocks;
	for (unsigned i = 0; i < s->nblocks; i++) {
		r = receive_block(s, i, timeout_ms);
		if (r < 0)
			return r;
	}
	return s->role == OWNER_ROLE_SOURCE ? receive_bitmap(s, timeout_ms) : 0;
}

int owner_session_open(const char *path, enum owner_role role, int timeout_ms,
		       struct owner_session **ret)
{
	struct owner_session *s = g_new0(struct owner_session, 1);
	int r;

	s->role = role;
	for (unsigned i = 0; i < OWNER_MAX_BLOCKS; i++)
		s->blocks[i].fd = -1;
	s->sock = connect_owner(path);
	if (s->sock < 0) {
		r = s->sock;
		g_free(s);
		return r;
	}
	r = handshake(s, timeout_ms);
	if (r < 0) {
		owner_session_close(s);
		return r;
	}
	*ret = s;
	return 0;
}

int owner_session_sync(struct owner_session *s, uint64_t round, int timeout_ms)
{
	struct owner_msg m = { .type = OWNER_MSG_SYNC, .u.round = round };
	int r = owner_send(s->sock, &m, -1);

	if (r == 0)
		r = expect(s, OWNER_MSG_ROUND_READY, timeout_ms, &m, NULL);
	if (r == 0 && m.u.ready.round != round)
		r = -EPROTO;
	return r;
}

int owner_session_throttle(struct owner_session *s, unsigned percent)
{
	struct owner_msg m = { .type = OWNER_MSG_THROTTLE, .u.percent = percent };

	if (!(s->caps & OWNER_CAP_THROTTLE))
		return -EOPNOTSUPP;
	return owner_send(s->sock, &m, -1);
}

int owner_session_stop(struct owner_session *s, int timeout_ms)
{
	struct owner_msg m = { .type = OWNER_MSG_STOP };
	int r = owner_send(s->sock, &m, -1);

	return r < 0 ? r : expect(s, OWNER_MSG_STOPPED, timeout_ms, &m, NULL);
}

int owner_session_finish(struct owner_session *s, enum owner_msg_type type,
			 int error)
{
	struct owner_msg m = { .type = type, .u.error = error < 0 ? -error : error };

	return owner_send(s->sock, &m, -1);
}

int owner_session_check_idle(struct owner_session *s)
{
	struct pollfd p = { .fd = s->sock, .events = POLLIN | POLLRDHUP };
	int n = poll(&p, 1, 0);

	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n == 0 ? 0 : -EPIPE;
}

void owner_session_close(struct owner_session *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->nblocks; i++) {
		if (s->blocks[i].addr)
			munmap(s->blocks[i].addr, s->blocks[i].info.size);
		if (s->blocks[i].fd >= 0)
			close(s->blocks[i].fd);
	}
	if (s->bitmap)
		munmap(s->bitmap, s->bitmap_size);
	if (s->sock >= 0)
		close(s->sock);
	g_free(s);
}

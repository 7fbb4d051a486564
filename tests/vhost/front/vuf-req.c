/* SPDX-License-Identifier: MIT */
/* One typed helper per front-end request. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "util.h"
#include "vuf-internal.h"

static int request_u64_reply(struct vuf_conn *c, uint32_t request, uint64_t *ret_val)
{
	int ret = vuf_send_msg(c, request, VUF_FLAG_VERSION, NULL, 0, NULL, 0);

	return ret ? ret : vuf_recv_u64_reply(c, request, ret_val);
}

static int request_u64(struct vuf_conn *c, uint32_t request, uint64_t val)
{
	uint8_t p[8];

	put_le64(p, val);
	return vuf_request(c, request, p, sizeof(p), NULL, 0, NULL);
}

static int request_state(struct vuf_conn *c, uint32_t request, uint32_t index, uint32_t num)
{
	uint8_t p[VUF_VRING_STATE_SIZE];

	put_le32(p, index);
	put_le32(p + 4, num);
	return vuf_request(c, request, p, sizeof(p), NULL, 0, NULL);
}

int vuf_get_features(struct vuf_conn *c, uint64_t *ret_features)
{
	return request_u64_reply(c, VUF_GET_FEATURES, ret_features);
}

int vuf_set_features(struct vuf_conn *c, uint64_t features)
{
	int ret = request_u64(c, VUF_SET_FEATURES, features);

	if (!ret)
		c->features = features;
	return ret;
}

int vuf_get_protocol_features(struct vuf_conn *c, uint64_t *ret_features)
{
	return request_u64_reply(c, VUF_GET_PROTOCOL_FEATURES, ret_features);
}

int vuf_set_protocol_features(struct vuf_conn *c, uint64_t features)
{
	uint8_t p[8];
	int ret;

	/*
	 * Never NEED_REPLY here (QEMU does not either): whether REPLY_ACK is
	 * in force for the message that negotiates it is not defined.
	 */
	put_le64(p, features);
	ret = vuf_send_msg(c, VUF_SET_PROTOCOL_FEATURES, VUF_FLAG_VERSION, p, sizeof(p),
			   NULL, 0);
	if (!ret)
		c->protocol_features = features;
	return ret;
}

int vuf_set_owner(struct vuf_conn *c)
{
	return vuf_request(c, VUF_SET_OWNER, NULL, 0, NULL, 0, NULL);
}

int vuf_reset_device(struct vuf_conn *c)
{
	return vuf_request(c, VUF_RESET_DEVICE, NULL, 0, NULL, 0, NULL);
}

int vuf_get_max_mem_slots(struct vuf_conn *c, uint64_t *ret_slots)
{
	return request_u64_reply(c, VUF_GET_MAX_MEM_SLOTS, ret_slots);
}

int vuf_get_queue_num(struct vuf_conn *c, uint64_t *ret_num)
{
	return request_u64_reply(c, VUF_GET_QUEUE_NUM, ret_num);
}

int vuf_set_vring_num(struct vuf_conn *c, uint32_t index, uint32_t num)
{
	return request_state(c, VUF_SET_VRING_NUM, index, num);
}

int vuf_set_vring_base(struct vuf_conn *c, uint32_t index, uint32_t base)
{
	return request_state(c, VUF_SET_VRING_BASE, index, base);
}

int vuf_set_vring_enable(struct vuf_conn *c, uint32_t index, bool enable)
{
	return request_state(c, VUF_SET_VRING_ENABLE, index, enable);
}

int vuf_get_vring_base(struct vuf_conn *c, uint32_t index, uint32_t *ret_base)
{
	struct vuf_msg *m = malloc(sizeof(*m));
	uint8_t p[VUF_VRING_STATE_SIZE];
	int ret;

	if (!m)
		return -ENOMEM;
	put_le32(p, index);
	put_le32(p + 4, 0);
	ret = vuf_request(c, VUF_GET_VRING_BASE, p, sizeof(p), NULL, 0, m);
	if (!ret) {
		if (m->size != VUF_VRING_STATE_SIZE || m->nfds || get_le32(m->payload) != index)
			ret = -EPROTO;
		else
			*ret_base = get_le32(m->payload + 4);
		vuf_msg_close_fds(m);
	}
	free(m);
	return ret;
}

static int request_vring_fd(struct vuf_conn *c, uint32_t request, uint32_t index, int fd)
{
	uint64_t v = (index & 0xff) | (fd < 0 ? VUF_VRING_NOFD : 0);
	uint8_t p[8];

	put_le64(p, v);
	return vuf_request(c, request, p, sizeof(p), fd < 0 ? NULL : &fd, fd < 0 ? 0 : 1, NULL);
}

int vuf_set_vring_kick(struct vuf_conn *c, uint32_t index, int fd)
{
	return request_vring_fd(c, VUF_SET_VRING_KICK, index, fd);
}

int vuf_set_vring_call(struct vuf_conn *c, uint32_t index, int fd)
{
	return request_vring_fd(c, VUF_SET_VRING_CALL, index, fd);
}

int vuf_set_vring_err(struct vuf_conn *c, uint32_t index, int fd)
{
	return request_vring_fd(c, VUF_SET_VRING_ERR, index, fd);
}

int vuf_set_vring_addr(struct vuf_conn *c, const struct vuf_vring_addr *a)
{
	uint8_t p[VUF_VRING_ADDR_SIZE];

	put_le32(p, a->index);
	put_le32(p + 4, a->flags);
	put_le64(p + 8, a->desc_uva);
	put_le64(p + 16, a->used_uva);
	put_le64(p + 24, a->avail_uva);
	put_le64(p + 32, a->log_gpa);
	return vuf_request(c, VUF_SET_VRING_ADDR, p, sizeof(p), NULL, 0, NULL);
}

static void put_region(uint8_t *p, const struct vuf_region_desc *r)
{
	put_le64(p, r->gpa);
	put_le64(p + 8, r->size);
	put_le64(p + 16, r->uva);
	put_le64(p + 24, r->mmap_offset);
}

int vuf_set_mem_table_raw(struct vuf_conn *c, const struct vuf_region_desc *r,
			  uint32_t n, const int *fds, size_t nfds)
{
	/* QEMU always sends the full 8-slot table, whatever n says. */
	uint8_t p[VUF_MEM_TABLE_SIZE] = { 0 };

	if (n > VUF_MAX_REGIONS)
		return -EINVAL;
	put_le32(p, n);
	for (uint32_t i = 0; i < n; i++)
		put_region(p + 8 + i * VUF_REGION_DESC_SIZE, &r[i]);
	return vuf_request(c, VUF_SET_MEM_TABLE, p, sizeof(p), fds, nfds, NULL);
}

int vuf_add_mem_reg(struct vuf_conn *c, const struct vuf_region_desc *r, int fd)
{
	uint8_t p[8 + VUF_REGION_DESC_SIZE] = { 0 };

	put_region(p + 8, r);
	return vuf_request(c, VUF_ADD_MEM_REG, p, sizeof(p), &fd, 1, NULL);
}

int vuf_rem_mem_reg(struct vuf_conn *c, const struct vuf_region_desc *r)
{
	uint8_t p[8 + VUF_REGION_DESC_SIZE] = { 0 };

	put_region(p + 8, r);
	return vuf_request(c, VUF_REM_MEM_REG, p, sizeof(p), NULL, 0, NULL);
}

int vuf_get_config(struct vuf_conn *c, uint32_t offset, uint32_t size, void *ret_buf)
{
	uint8_t p[VUF_CONFIG_HDR_SIZE + 256] = { 0 };
	struct vuf_msg *m;
	int ret;

	if (size > 256)
		return -EINVAL;
	m = malloc(sizeof(*m));
	if (!m)
		return -ENOMEM;
	put_le32(p, offset);
	put_le32(p + 4, size);
	ret = vuf_request(c, VUF_GET_CONFIG, p, VUF_CONFIG_HDR_SIZE + size, NULL, 0, m);
	if (!ret) {
		/* A zero-length reply is how the back end reports an error. */
		if (m->size == 0)
			ret = -EREMOTEIO;
		else if (m->size != VUF_CONFIG_HDR_SIZE + size || m->nfds)
			ret = -EPROTO;
		else
			memcpy(ret_buf, m->payload + VUF_CONFIG_HDR_SIZE, size);
		vuf_msg_close_fds(m);
	}
	free(m);
	return ret;
}

int vuf_set_config(struct vuf_conn *c, uint32_t offset, uint32_t flags,
		   const void *buf, uint32_t size)
{
	uint8_t p[VUF_CONFIG_HDR_SIZE + 256];

	if (size > 256)
		return -EINVAL;
	put_le32(p, offset);
	put_le32(p + 4, size);
	put_le32(p + 8, flags);
	memcpy(p + VUF_CONFIG_HDR_SIZE, buf, size);
	return vuf_request(c, VUF_SET_CONFIG, p, VUF_CONFIG_HDR_SIZE + size, NULL, 0, NULL);
}

int vuf_set_status(struct vuf_conn *c, uint8_t status)
{
	return request_u64(c, VUF_SET_STATUS, status);
}

int vuf_get_status(struct vuf_conn *c, uint8_t *ret_status)
{
	uint64_t v;
	int ret = request_u64_reply(c, VUF_GET_STATUS, &v);

	if (!ret)
		*ret_status = (uint8_t)v;
	return ret;
}

int vuf_set_log_base_fd(struct vuf_conn *c, int fd, uint64_t size, uint64_t offset)
{
	uint8_t p[VUF_LOG_DESC_SIZE];
	uint64_t val;
	int ret;

	put_le64(p, size);
	put_le64(p + 8, offset);
	/* With LOG_SHMFD the back end always replies: no NEED_REPLY needed. */
	ret = vuf_send_msg(c, VUF_SET_LOG_BASE, VUF_FLAG_VERSION, p, sizeof(p), &fd, 1);
	if (ret)
		return ret;
	ret = vuf_recv_u64_reply(c, VUF_SET_LOG_BASE, &val);
	if (ret)
		return ret;
	return val ? -EREMOTEIO : 0;
}

static void put_inflight(uint8_t *p, const struct vuf_inflight_desc *d)
{
	memset(p, 0, VUF_INFLIGHT_DESC_SIZE);
	put_le64(p, d->mmap_size);
	put_le64(p + 8, d->mmap_offset);
	put_le16(p + 16, d->num_queues);
	put_le16(p + 18, d->queue_size);
}

int vuf_get_inflight_fd(struct vuf_conn *c, uint16_t num_queues, uint16_t queue_size,
			struct vuf_inflight_desc *ret_desc, int *ret_fd)
{
	struct vuf_inflight_desc d = { .num_queues = num_queues, .queue_size = queue_size };
	uint8_t p[VUF_INFLIGHT_DESC_SIZE];
	struct vuf_msg *m = malloc(sizeof(*m));
	int ret;

	if (!m)
		return -ENOMEM;
	put_inflight(p, &d);
	ret = vuf_request(c, VUF_GET_INFLIGHT_FD, p, sizeof(p), NULL, 0, m);
	if (ret)
		goto out_free;
	if (m->size != VUF_INFLIGHT_DESC_SIZE || m->nfds != 1) {
		ret = -EPROTO;
		vuf_msg_close_fds(m);
		goto out_free;
	}
	ret_desc->mmap_size = get_le64(m->payload);
	ret_desc->mmap_offset = get_le64(m->payload + 8);
	ret_desc->num_queues = get_le16(m->payload + 16);
	ret_desc->queue_size = get_le16(m->payload + 18);
	*ret_fd = m->fds[0];
out_free:
	free(m);
	return ret;
}

int vuf_set_inflight_fd(struct vuf_conn *c, const struct vuf_inflight_desc *d, int fd)
{
	uint8_t p[VUF_INFLIGHT_DESC_SIZE];

	put_inflight(p, d);
	return vuf_request(c, VUF_SET_INFLIGHT_FD, p, sizeof(p), &fd, 1, NULL);
}

int vuf_negotiate(struct vuf_conn *c, uint64_t want, uint64_t want_protocol,
		  uint64_t *ret_features, uint64_t *ret_protocol)
{
	uint64_t offered, proto_offered = 0, proto = 0;
	int ret;

	ret = vuf_set_owner(c);
	if (ret)
		return ret;
	ret = vuf_get_features(c, &offered);
	if (ret)
		return ret;
	if (offered & VUF_BIT(VUF_F_PROTOCOL_FEATURES)) {
		ret = vuf_get_protocol_features(c, &proto_offered);
		if (ret)
			return ret;
		proto = proto_offered & want_protocol;
		ret = vuf_set_protocol_features(c, proto);
		if (ret)
			return ret;
	}
	/* Like QEMU: bit 30 stays set in SET_FEATURES when protocol features are used. */
	if (offered & VUF_BIT(VUF_F_PROTOCOL_FEATURES))
		want |= VUF_BIT(VUF_F_PROTOCOL_FEATURES);
	ret = vuf_set_features(c, offered & want);
	if (ret)
		return ret;
	if (ret_features)
		*ret_features = offered & want;
	if (ret_protocol)
		*ret_protocol = proto;
	return 0;
}

/* ---- the device's own state (DEVICE_STATE) ---- */

#define STATE_SAVE 0u
#define STATE_LOAD 1u
#define STATE_REPLY_NOFD (1ull << 8)

/* SET_DEVICE_STATE_FD with fd; the channel to use (the back end's, or
 * fd's other end) in *ret_fd, which the caller closes. */
static int set_state_fd(struct vuf_conn *c, uint32_t direction, int pipefd[2], int *ret_fd)
{
	uint8_t p[8];
	struct vuf_msg *m = malloc(sizeof(*m));
	int ours = direction == STATE_SAVE ? 0 : 1;
	uint64_t v;
	int ret;

	if (!m)
		return -ENOMEM;
	put_le32(p, direction);
	put_le32(p + 4, 0);
	ret = vuf_request(c, VUF_SET_DEVICE_STATE_FD, p, sizeof(p), &pipefd[1 - ours], 1, m);
	close(pipefd[1 - ours]);
	if (!ret && (m->size != 8 || m->nfds > 1))
		ret = -EPROTO;
	if (!ret) {
		v = get_le64(m->payload);
		if ((v & 0xff) || !(v & STATE_REPLY_NOFD) != (m->nfds == 1))
			ret = (v & 0xff) ? -EREMOTEIO : -EPROTO;
	}
	if (!ret && m->nfds == 1) {
		close(pipefd[ours]);
		*ret_fd = m->fds[0];
		m->nfds = 0;
	} else if (!ret) {
		*ret_fd = pipefd[ours];
	} else {
		close(pipefd[ours]);
	}
	if (ret)
		vuf_msg_close_fds(m);
	free(m);
	return ret;
}

static int check_state(struct vuf_conn *c)
{
	uint64_t v;
	int ret = vuf_send_msg(c, VUF_CHECK_DEVICE_STATE, VUF_FLAG_VERSION, NULL, 0, NULL, 0);

	if (!ret)
		ret = vuf_recv_u64_reply(c, VUF_CHECK_DEVICE_STATE, &v);
	/* vrdma-vhost answers a failure with its errno (vu-state.c). */
	return ret ? ret : v ? -(int)MIN(v, 255u) : 0;
}

int vuf_save_device_state(struct vuf_conn *c, uint8_t **ret_data, size_t *ret_len)
{
	GByteArray *buf;
	uint8_t chunk[65536];
	int pipefd[2], fd, ret;
	ssize_t n;

	if (pipe2(pipefd, O_CLOEXEC))
		return -errno;
	ret = set_state_fd(c, STATE_SAVE, pipefd, &fd);
	if (ret)
		return ret;
	buf = g_byte_array_new();
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		g_byte_array_append(buf, chunk, (guint)n);
	ret = n < 0 ? -errno : 0;
	close(fd);
	if (!ret)
		ret = check_state(c);
	*ret_len = buf->len;
	*ret_data = g_byte_array_free(buf, FALSE);
	return ret;
}

int vuf_load_device_state(struct vuf_conn *c, const uint8_t *data, size_t len)
{
	int pipefd[2], fd, ret;

	if (pipe2(pipefd, O_CLOEXEC))
		return -errno;
	ret = set_state_fd(c, STATE_LOAD, pipefd, &fd);
	if (ret)
		return ret;
	for (size_t off = 0; !ret && off < len;) {
		ssize_t n = write(fd, data + off, len - off);

		if (n <= 0)
			ret = n < 0 ? -errno : -EIO;
		else
			off += (size_t)n;
	}
	close(fd);
	return ret ? ret : check_state(c);
}

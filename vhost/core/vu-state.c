// SPDX-License-Identifier: MIT
/*
 * The device's own state for migration (VHOST_USER_PROTOCOL_F_DEVICE_STATE,
 * as QEMU 8.2 defines SET_DEVICE_STATE_FD and CHECK_DEVICE_STATE).  The
 * spec lets the back end answer with a channel of its own; this one is a
 * memfd, which the front end reads to its end (save) or writes from its
 * start (load).  Neither side then waits for the other, the loop never
 * blocks, and the device sees its state as one buffer.  A loaded state is
 * copied out of the memfd before the device checks it: the front end may
 * still be writing.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

#include "util.h"
#include "vu-internal.h"

/* What a front end may hand a device to load. */
#define VU_MAX_DEVICE_STATE (64ull << 20)

void vu_state_drop(struct vu_dev *dev)
{
	closep(&dev->state_fd);
	dev->state_result = -ENOENT;
}

static int write_all_at(int fd, const uint8_t *data, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = pwrite(fd, data + off, len - off, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		off += (size_t)n;
	}
	return 0;
}

/* The device's state in a sealed memfd, at offset 0 for the reader. */
static int save_state(struct vu_dev *dev, int *ret_fd)
{
	g_autofree uint8_t *data = NULL;
	_cleanup_(closep) int fd = -1;
	size_t len = 0;
	int r = dev->ops.save_state(dev->opaque, &data, &len);

	if (r < 0)
		return r;
	fd = memfd_create("vrdma-device-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	r = write_all_at(fd, data, len);
	if (!r && fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL))
		r = -errno;
	if (r)
		return r;
	*ret_fd = g_steal_fd(&fd);
	return 0;
}

/* A memfd the front end writes from offset 0: one byte more than a state
 * may have, so that a state too large shows (and cannot grow further). */
static int load_channel(struct vu_dev *dev, int *ret_fd)
{
	_cleanup_(closep) int fd = memfd_create("vrdma-device-state",
						MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)VU_MAX_DEVICE_STATE + 1) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL))
		return -errno;
	/* Ours shares the file offset: it says how far the writer got. */
	dev->state_fd = dup(fd);
	if (dev->state_fd < 0)
		return -errno;
	*ret_fd = g_steal_fd(&fd);
	return 0;
}

static bool any_queue_started(const struct vu_dev *dev)
{
	for (unsigned int i = 0; i < dev->num_queues; i++)
		if (dev->vqs[i].started)
			return true;
	return false;
}

int vu_state_set_fd(struct vu_dev *dev, struct vu_msg *msg)
{
	struct vu_state_req req;
	int fd = -1, r;

	vu_state_drop(dev);
	r = vu_decode_state_req(msg, &req);
	/* Only a stopped device moves its state (the one phase defined). */
	if (!r && (req.phase != VU_STATE_PHASE_STOPPED || req.direction > VU_STATE_LOAD ||
		   any_queue_started(dev)))
		r = -EINVAL;
	if (!r)
		r = req.direction == VU_STATE_SAVE ? save_state(dev, &fd) : load_channel(dev, &fd);
	dev->state_load = !r && req.direction == VU_STATE_LOAD;
	dev->state_result = r < 0 ? r : dev->state_load ? -EINPROGRESS : 0;
	if (r < 0) {
		vu_state_drop(dev);
		dev->state_result = r;
	}
	r = vu_msg_send_reply_u64_fd(dev->sock, msg, r < 0 ? VU_STATE_REPLY_NOFD | 1 : 0, fd);
	closep(&fd);
	return r;
}

/* The loaded state, copied out of the channel, to the device. */
static int load_state(struct vu_dev *dev)
{
	off_t len = lseek(dev->state_fd, 0, SEEK_CUR);
	g_autofree uint8_t *data = NULL;

	if (len < 0)
		return -errno;
	if ((uint64_t)len > VU_MAX_DEVICE_STATE)
		return -E2BIG;
	data = g_try_malloc(len ? (size_t)len : 1);
	if (!data)
		return -ENOMEM;
	for (off_t off = 0; off < len;) {
		ssize_t n = pread(dev->state_fd, data + off, (size_t)(len - off), off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		off += n;
	}
	return dev->ops.load_state(dev->opaque, data, (size_t)len);
}

int vu_state_check(struct vu_dev *dev, struct vu_msg *msg)
{
	if (dev->state_result == -EINPROGRESS)
		dev->state_result = load_state(dev);
	closep(&dev->state_fd);
	/* Non-zero is a failure (all the spec says): the errno itself, so
	 * that the front end's message names the cause (QEMU prints it). */
	return vu_msg_send_reply_u64(dev->sock, msg, dev->state_result < 0 ?
				     (uint64_t)MIN(-dev->state_result, 255) : 0);
}

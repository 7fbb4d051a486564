// SPDX-License-Identifier: MIT
/*
 * One vhost-user connection: the handlers, one per request, and the
 * dispatcher.  By the time a handler runs, vu-proto.c has checked the
 * payload size, the fd count and the queue index, and the dispatcher has
 * checked that the front end negotiated the protocol feature of a GATED
 * request.  A handler returns 0, REPLIED when it sent its own reply, or
 * -errno; REPLY_ACK is answered here, generically.  Every fd still in the
 * message afterwards is closed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>

#include "util.h"
#include "vu-internal.h"

enum { REPLIED = 1 };

typedef int (*vu_handler)(struct vu_dev *dev, struct vu_msg *msg);

static const uint64_t core_features = 1ull << VU_F_VERSION_1 | 1ull << VU_F_INDIRECT_DESC |
				      1ull << VU_F_EVENT_IDX | 1ull << VU_F_PROTOCOL_FEATURES |
				      1ull << VU_F_LOG_ALL;

static const uint64_t core_protocol_features =
	1ull << VU_PROTO_F_MQ | 1ull << VU_PROTO_F_LOG_SHMFD | 1ull << VU_PROTO_F_REPLY_ACK |
	1ull << VU_PROTO_F_BACKEND_REQ | 1ull << VU_PROTO_F_RESET_DEVICE |
	1ull << VU_PROTO_F_CONFIGURE_MEM_SLOTS | 1ull << VU_PROTO_F_STATUS;

static uint64_t offered_features(const struct vu_dev *dev)
{
	return core_features | dev->ops.features;
}

static uint64_t offered_protocol_features(const struct vu_dev *dev)
{
	return core_protocol_features |
	       (dev->ops.config_space ? 1ull << VU_PROTO_F_CONFIG : 0) |
	       (dev->ops.inflight_tracking ? 1ull << VU_PROTO_F_INFLIGHT_SHMFD : 0) |
	       (dev->has_device_state ? 1ull << VU_PROTO_F_DEVICE_STATE : 0);
}

/* --- default device hooks: "not supported" --- */

static int no_save_state(void *opaque, uint8_t **ret_data, size_t *ret_len)
{
	(void)opaque, (void)ret_data, (void)ret_len;
	return -EOPNOTSUPP;
}

static int no_load_state(void *opaque, const uint8_t *data, size_t len)
{
	(void)opaque, (void)data, (void)len;
	return -EOPNOTSUPP;
}

static int no_get_config(void *opaque, uint32_t offset, uint8_t *buf, uint32_t len)
{
	(void)opaque, (void)offset, (void)buf, (void)len;
	return -EOPNOTSUPP;
}

static int no_set_config(void *opaque, uint32_t offset, const uint8_t *buf, uint32_t len)
{
	(void)opaque, (void)offset, (void)buf, (void)len;
	return -EOPNOTSUPP;
}

static void no_queue_kick(void *opaque, struct vu_vq *vq)
{
	(void)opaque, (void)vq;
}

static int any_features(void *opaque, uint64_t features)
{
	(void)opaque, (void)features;
	return 0;
}

static void no_attach(void *opaque, struct vu_dev *dev)
{
	(void)opaque, (void)dev;
}

static void no_queue_stop(void *opaque, struct vu_vq *vq)
{
	(void)opaque, (void)vq;
}

static void no_mem_gone(void *opaque, uint64_t gpa, uint64_t size)
{
	(void)opaque, (void)gpa, (void)size;
}

static void no_reset(void *opaque)
{
	(void)opaque;
}

/* --- queue helpers --- */

/*
 * Takes the message's fd as a queue notifier.  It must be an eventfd, and
 * ours is made non-blocking: a pipe nobody reads, or an eventfd at its
 * maximum count, would otherwise block the one thread all tenants share.
 * (The flag is shared with the front end's descriptor; QEMU's are
 * non-blocking already.)
 */
static int take_eventfd(struct vu_msg *msg)
{
	char path[64], target[64];
	ssize_t n;
	int fd, fl;

	if (msg->nfds < 1 || msg->fds[0] < 0)
		return -EBADF;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", msg->fds[0]);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	if (strcmp(target, "anon_inode:[eventfd]") != 0)
		return -EBADF;
	fl = fcntl(msg->fds[0], F_GETFL);
	if (fl < 0 || fcntl(msg->fds[0], F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	fd = vu_msg_take_fd(msg, 0);
	return fd;
}

static void kick_cb(struct vu_dev *dev, int fd, void *data)
{
	struct vu_vq *vq = data;
	eventfd_t value;

	if (eventfd_read(fd, &value) < 0 && errno != EAGAIN)
		return;
	if (vq_ready(vq))
		dev->ops.queue_kick(dev->opaque, vq);
}

static void stop_queue(struct vu_dev *dev, struct vu_vq *vq)
{
	if (vq->kick_fd >= 0)
		dev->loop.remove_watch(dev, vq->kick_fd);
	vq_stop(vq);
	closep(&vq->kick_fd);
}

static void reset_queue(struct vu_dev *dev, struct vu_vq *vq)
{
	stop_queue(dev, vq);
	vq_close_fds(vq);
	vq->num = 0;
	vq->addr_set = false;
	vq->enabled = false;
	vq->broken = false;
	vq->desc = NULL;
	vq->avail = NULL;
	vq->used = NULL;
	vq->last_avail_idx = 0;
	vq->inflight = NULL;
}

/* Runs the device on a queue that may have work without a kick. */
static void poke_queue(struct vu_dev *dev, struct vu_vq *vq)
{
	if (vq_ready(vq))
		dev->ops.queue_kick(dev->opaque, vq);
}

/*
 * Memory changed: every ring is resolved again.  QEMU replaces a region by
 * removing it and adding it back, so a running ring may be unmapped for a
 * moment: it just pauses (vq_ready() needs its rings) and resumes, with
 * whatever the driver queued meanwhile, once its memory is back.
 */
static void remap_rings(struct vu_dev *dev)
{
	for (unsigned int i = 0; i < dev->num_queues; i++) {
		struct vu_vq *vq = &dev->vqs[i];

		if (vq->addr_set && vq_map_rings(vq) == 0)
			poke_queue(dev, vq);
	}
}

static void reset_device(struct vu_dev *dev)
{
	for (unsigned int i = 0; i < dev->num_queues; i++)
		reset_queue(dev, &dev->vqs[i]);
	vu_log_clear(&dev->log);
	dev->features = 0;
	dev->status = 0;
	dev->ops.reset(dev->opaque);
}

/* --- handlers --- */

static int h_get_features(struct vu_dev *dev, struct vu_msg *msg)
{
	return vu_msg_send_reply_u64(dev->sock, msg, offered_features(dev)) ?: REPLIED;
}

static int h_set_features(struct vu_dev *dev, struct vu_msg *msg)
{
	uint64_t features;
	int ret;

	vu_decode_u64(msg, &features);
	if (features & ~offered_features(dev))
		return -EINVAL;
	ret = dev->ops.set_features(dev->opaque, features);
	if (ret < 0)
		return ret;
	dev->features = features;
	/* Without PROTOCOL_FEATURES, rings are enabled as soon as they start. */
	if (!vu_has_feature(dev, VU_F_PROTOCOL_FEATURES))
		for (unsigned int i = 0; i < dev->num_queues; i++)
			dev->vqs[i].enabled = true;
	return 0;
}

static int h_set_owner(struct vu_dev *dev, struct vu_msg *msg)
{
	(void)msg;
	dev->owner_set = true;
	return 0;
}

static int h_reset(struct vu_dev *dev, struct vu_msg *msg)
{
	(void)msg;
	reset_device(dev);
	return 0;
}

static int h_set_mem_table(struct vu_dev *dev, struct vu_msg *msg)
{
	g_autofree struct vu_mem *fresh = g_new0(struct vu_mem, 1);
	struct vu_mem_table table;
	int ret;

	ret = vu_decode_mem_table(msg, &table);
	if (ret < 0)
		return ret;
	fresh->poisoned = &dev->poisoned;
	fresh->populate = dev->ops.populate_memory;
	for (uint32_t i = 0; i < table.nregions; i++) {
		ret = vu_mem_add(fresh, &table.regions[i], msg->fds[i]);
		if (ret < 0) {
			vu_mem_clear(fresh);
			return ret;
		}
	}
	for (unsigned int i = 0; i < dev->mem.nregions; i++) {
		const struct vu_region *r = &dev->mem.regions[i];

		if (!vu_region_in(r, fresh))
			dev->ops.mem_gone(dev->opaque, r->gpa, r->size);
	}
	vu_mem_clear(&dev->mem);
	dev->mem = *fresh;
	remap_rings(dev);
	return 0;
}

static int h_get_max_mem_slots(struct vu_dev *dev, struct vu_msg *msg)
{
	return vu_msg_send_reply_u64(dev->sock, msg, VU_MAX_MEM_SLOTS) ?: REPLIED;
}

static int h_add_mem_reg(struct vu_dev *dev, struct vu_msg *msg)
{
	struct vu_mem_desc d;
	int ret;

	vu_decode_mem_reg(msg, &d);
	ret = vu_mem_add(&dev->mem, &d, msg->fds[0]);
	if (ret < 0)
		return ret;
	remap_rings(dev);
	return 0;
}

static int h_rem_mem_reg(struct vu_dev *dev, struct vu_msg *msg)
{
	struct vu_mem_desc d;
	int ret;

	vu_decode_mem_reg(msg, &d);
	ret = vu_mem_remove(&dev->mem, &d);
	if (ret < 0)
		return ret;
	/* Only memory that was there: devices' own views still hold it. */
	dev->ops.mem_gone(dev->opaque, d.guest_addr, d.size);
	remap_rings(dev);
	return 0;
}

static int h_set_log_base(struct vu_dev *dev, struct vu_msg *msg)
{
	struct vu_log_area area;
	int ret;

	vu_decode_log_area(msg, &area);
	ret = vu_log_set(&dev->log, msg->fds[0], area.mmap_size, area.mmap_offset);
	if (ret < 0)
		return ret;
	/* QEMU waits for this reply before it trusts the log. */
	return vu_msg_send_reply_u64(dev->sock, msg, 0) ?: REPLIED;
}

static int h_set_log_fd(struct vu_dev *dev, struct vu_msg *msg)
{
	/* The log-change eventfd: we never resize the log, so it is not needed. */
	(void)dev, (void)msg;
	return 0;
}

static struct vu_vq *queue_of(struct vu_dev *dev, uint32_t index)
{
	return &dev->vqs[index]; /* index checked in vu-proto.c */
}

/* The ring a SET_VRING_NUM or SET_VRING_BASE names; NULL while it runs. */
static struct vu_vq *stopped_queue_of(struct vu_dev *dev, const struct vu_msg *msg,
				      struct vu_vring_state *s)
{
	struct vu_vq *vq;

	vu_decode_vring_state(msg, s);
	vq = queue_of(dev, s->index);
	return vq->started ? NULL : vq;
}

static int h_set_vring_num(struct vu_dev *dev, struct vu_msg *msg)
{
	struct vu_vring_state s;
	struct vu_vq *vq = stopped_queue_of(dev, msg, &s);

	if (!vq)
		return -EBUSY;
	if (!is_power_of_2(s.num) || s.num > VU_MAX_QUEUE_SIZE)
		return -EINVAL;
	vq->num = s.num;
	vq->desc = NULL;
	vq->avail = NULL;
	vq->used = NULL;
	return 0;
}

static int h_set_vring_addr(struct vu_dev *dev, struct vu_msg *msg)
{
	struct vu_vring_addr a;
	struct vu_vq *vq;
	int ret;

	ret = vu_decode_vring_addr(msg, &a);
	if (ret < 0)
		return ret;
	vq = queue_of(dev, a.index);
	if (!vq->num)
		return -EINVAL;
	/* QEMU re-sends the address of a running ring to switch logging on. */
	struct vu_vring_addr old = vq->addr;
	bool old_set = vq->addr_set;

	vq->addr = a;
	vq->addr_set = true;
	ret = vq_map_rings(vq);
	if (ret < 0) {
		vq->addr = old;
		vq->addr_set = old_set;
		if (old_set && vq_map_rings(vq) < 0 && vq->started)
			vq_break(vq);
		return ret;
	}
	return 0;
}

static int h_set_vring_base(struct vu_dev *dev, struct vu_msg *msg)
{
	struct vu_vring_state s;
	struct vu_vq *vq = stopped_queue_of(dev, msg, &s);

	if (!vq)
		return -EBUSY;
	if (s.num > UINT16_MAX)
		return -EINVAL;
	vq->last_avail_idx = (uint16_t)s.num;
	return 0;
}

static int h_get_vring_base(struct vu_dev *dev, struct vu_msg *msg)
{
	struct vu_vring_state s;
	uint8_t reply[8];
	struct vu_vq *vq;

	vu_decode_vring_state(msg, &s);
	vq = queue_of(dev, s.index);
	/* Requests are served synchronously; the device quiesces its own. */
	dev->ops.queue_stop(dev->opaque, vq);
	stop_queue(dev, vq);
	closep(&vq->call_fd);
	vu_encode_vring_state(reply, s.index, vq->last_avail_idx);
	return vu_msg_send_reply(dev->sock, msg, reply, sizeof(reply), NULL, 0) ?: REPLIED;
}

static int h_set_vring_kick(struct vu_dev *dev, struct vu_msg *msg)
{
	struct vu_vq *vq;
	uint32_t index;
	bool has_fd;
	int ret;

	ret = vu_decode_vring_fd(msg, &index, &has_fd);
	if (ret < 0)
		return ret;
	/* Polling a ring without a kick fd is not supported. */
	if (!has_fd)
		return -EOPNOTSUPP;
	vq = queue_of(dev, index);
	stop_queue(dev, vq);
	ret = take_eventfd(msg);
	if (ret < 0)
		return ret;
	vq->kick_fd = ret;
	ret = vq_start(vq);
	if (ret < 0) {
		closep(&vq->kick_fd);
		return ret;
	}
	if (!vu_has_feature(dev, VU_F_PROTOCOL_FEATURES))
		vq->enabled = true;
	dev->loop.add_watch(dev, vq->kick_fd, kick_cb, vq);
	/* Requests recovered from the inflight area run without a kick. */
	if (vq->resubmit_num)
		poke_queue(dev, vq);
	return 0;
}

static int replace_vring_fd(struct vu_dev *dev, struct vu_msg *msg, bool call)
{
	struct vu_vq *vq;
	uint32_t index;
	bool has_fd;
	int fd, ret;

	ret = vu_decode_vring_fd(msg, &index, &has_fd);
	if (ret < 0)
		return ret;
	vq = queue_of(dev, index);
	fd = has_fd ? take_eventfd(msg) : -1;
	if (fd < -1)
		return fd;
	if (call) {
		closep(&vq->call_fd);
		vq->call_fd = fd;
		vq->signalled_used_valid = false;
		/*
		 * Completions made while the driver had no call fd (QEMU sets it
		 * after enabling some rings) would never be signalled: one
		 * spurious interrupt is harmless, a lost one hangs the guest.
		 */
		if (fd >= 0 && vq->started)
			eventfd_write(fd, 1);
	} else {
		closep(&vq->err_fd);
		vq->err_fd = fd;
	}
	return 0;
}

static int h_set_vring_call(struct vu_dev *dev, struct vu_msg *msg)
{
	return replace_vring_fd(dev, msg, true);
}

static int h_set_vring_err(struct vu_dev *dev, struct vu_msg *msg)
{
	return replace_vring_fd(dev, msg, false);
}

static int h_get_protocol_features(struct vu_dev *dev, struct vu_msg *msg)
{
	return vu_msg_send_reply_u64(dev->sock, msg, offered_protocol_features(dev)) ?: REPLIED;
}

static int h_set_protocol_features(struct vu_dev *dev, struct vu_msg *msg)
{
	uint64_t features;

	vu_decode_u64(msg, &features);
	if (features & ~offered_protocol_features(dev))
		return -EINVAL;
	dev->protocol_features = features;
	return 0;
}

static int h_get_queue_num(struct vu_dev *dev, struct vu_msg *msg)
{
	return vu_msg_send_reply_u64(dev->sock, msg, dev->num_queues) ?: REPLIED;
}

static int h_set_vring_enable(struct vu_dev *dev, struct vu_msg *msg)
{
	struct vu_vring_state s;
	struct vu_vq *vq;

	vu_decode_vring_state(msg, &s);
	if (s.num > 1)
		return -EINVAL;
	vq = queue_of(dev, s.index);
	vq->enabled = s.num;
	poke_queue(dev, vq);
	return 0;
}

static int h_set_backend_req_fd(struct vu_dev *dev, struct vu_msg *msg)
{
	closep(&dev->backend_fd);
	dev->backend_fd = vu_msg_take_fd(msg, 0);
	return 0;
}

static int h_get_config(struct vu_dev *dev, struct vu_msg *msg)
{
	uint8_t reply[12 + VU_MAX_CONFIG_SIZE];
	struct vu_config_req req;
	int ret;

	ret = vu_decode_config(msg, &req);
	if (ret < 0)
		return ret;
	memcpy(reply, msg->payload, 12);
	memset(reply + 12, 0, req.size);
	ret = dev->ops.get_config(dev->opaque, req.offset, reply + 12, req.size);
	if (ret < 0)
		return ret;
	return vu_msg_send_reply(dev->sock, msg, reply, 12 + req.size, NULL, 0) ?: REPLIED;
}

static int h_set_config(struct vu_dev *dev, struct vu_msg *msg)
{
	struct vu_config_req req;
	int ret;

	ret = vu_decode_config(msg, &req);
	if (ret < 0)
		return ret;
	return dev->ops.set_config(dev->opaque, req.offset, req.data, req.size);
}

/* Running queues point into the inflight area: it may not change under them. */
static bool any_queue_started(const struct vu_dev *dev)
{
	for (unsigned int i = 0; i < dev->num_queues; i++)
		if (dev->vqs[i].started)
			return true;
	return false;
}

/* GET_ and SET_INFLIGHT_FD: an area for at most our queues, none running. */
static int decode_inflight(const struct vu_dev *dev, const struct vu_msg *msg,
			   struct vu_inflight_desc *d)
{
	if (any_queue_started(dev))
		return -EBUSY;
	vu_decode_inflight(msg, d);
	if (d->num_queues > dev->num_queues)
		return -EINVAL;
	return 0;
}

static int h_get_inflight_fd(struct vu_dev *dev, struct vu_msg *msg)
{
	struct vu_inflight_desc d;
	uint8_t reply[24];
	int ret;

	ret = decode_inflight(dev, msg, &d);
	if (ret < 0)
		return ret;
	ret = vu_inflight_create(&dev->inflight, d.num_queues, d.queue_size);
	if (ret < 0)
		return ret;
	d.mmap_size = vu_inflight_queue_bytes(d.queue_size) * d.num_queues;
	d.mmap_offset = 0;
	vu_encode_inflight(reply, &d);
	return vu_msg_send_reply(dev->sock, msg, reply, sizeof(reply), &dev->inflight.fd, 1)
		       ?: REPLIED;
}

static int h_set_inflight_fd(struct vu_dev *dev, struct vu_msg *msg)
{
	struct vu_inflight_desc d;
	int fd, ret;

	ret = decode_inflight(dev, msg, &d);
	if (ret < 0)
		return ret;
	fd = vu_msg_take_fd(msg, 0);
	ret = vu_inflight_adopt(&dev->inflight, fd, &d);
	if (ret < 0)
		close(fd);
	return ret;
}

static int h_set_status(struct vu_dev *dev, struct vu_msg *msg)
{
	uint64_t status;

	vu_decode_u64(msg, &status);
	if (status > UINT8_MAX)
		return -EINVAL;
	dev->status = (uint8_t)status;
	return 0;
}

static int h_get_status(struct vu_dev *dev, struct vu_msg *msg)
{
	return vu_msg_send_reply_u64(dev->sock, msg, dev->status) ?: REPLIED;
}

static int h_set_device_state_fd(struct vu_dev *dev, struct vu_msg *msg)
{
	if (!vu_has_protocol_feature(dev, VU_PROTO_F_DEVICE_STATE))
		return -EINVAL;
	return vu_state_set_fd(dev, msg) ?: REPLIED;
}

static int h_check_device_state(struct vu_dev *dev, struct vu_msg *msg)
{
	if (!vu_has_protocol_feature(dev, VU_PROTO_F_DEVICE_STATE))
		return -EINVAL;
	return vu_state_check(dev, msg) ?: REPLIED;
}

struct handler {
	vu_handler run;
	uint64_t needs; /* protocol features the front end must have accepted */
};

#define HANDLER(req, fn) [VU_##req] = { (fn), 0 }
/* Requests of a protocol feature: refused unless the feature was negotiated. */
#define GATED(req, fn, feature) [VU_##req] = { (fn), 1ull << VU_PROTO_F_##feature }

static const struct handler handlers[VU_REQUEST_MAX] = {
	HANDLER(GET_FEATURES, h_get_features),
	HANDLER(SET_FEATURES, h_set_features),
	HANDLER(SET_OWNER, h_set_owner),
	HANDLER(RESET_OWNER, h_reset),
	HANDLER(RESET_DEVICE, h_reset),
	HANDLER(SET_MEM_TABLE, h_set_mem_table),
	HANDLER(SET_LOG_FD, h_set_log_fd),
	HANDLER(SET_VRING_NUM, h_set_vring_num),
	HANDLER(SET_VRING_ADDR, h_set_vring_addr),
	HANDLER(SET_VRING_BASE, h_set_vring_base),
	HANDLER(GET_VRING_BASE, h_get_vring_base),
	HANDLER(SET_VRING_KICK, h_set_vring_kick),
	HANDLER(SET_VRING_CALL, h_set_vring_call),
	HANDLER(SET_VRING_ERR, h_set_vring_err),
	HANDLER(GET_PROTOCOL_FEATURES, h_get_protocol_features),
	HANDLER(SET_PROTOCOL_FEATURES, h_set_protocol_features),
	HANDLER(GET_QUEUE_NUM, h_get_queue_num),
	HANDLER(SET_VRING_ENABLE, h_set_vring_enable),
	/* These two check their feature themselves: they answer -EINVAL. */
	HANDLER(SET_DEVICE_STATE_FD, h_set_device_state_fd),
	HANDLER(CHECK_DEVICE_STATE, h_check_device_state),
	/* Only once the front end accepted the feature. */
	GATED(GET_MAX_MEM_SLOTS, h_get_max_mem_slots, CONFIGURE_MEM_SLOTS),
	GATED(ADD_MEM_REG, h_add_mem_reg, CONFIGURE_MEM_SLOTS),
	GATED(REM_MEM_REG, h_rem_mem_reg, CONFIGURE_MEM_SLOTS),
	GATED(SET_LOG_BASE, h_set_log_base, LOG_SHMFD),
	GATED(SET_BACKEND_REQ_FD, h_set_backend_req_fd, BACKEND_REQ),
	GATED(GET_CONFIG, h_get_config, CONFIG),
	GATED(SET_CONFIG, h_set_config, CONFIG),
	GATED(GET_INFLIGHT_FD, h_get_inflight_fd, INFLIGHT_SHMFD),
	GATED(SET_INFLIGHT_FD, h_set_inflight_fd, INFLIGHT_SHMFD),
	GATED(SET_STATUS, h_set_status, STATUS),
	GATED(GET_STATUS, h_get_status, STATUS),
};

/* Runs one validated message; <0 means drop the connection. */
static int handle(struct vu_dev *dev, struct vu_msg *msg)
{
	const struct handler *h = &handlers[msg->request];
	bool ack = (msg->flags & VU_FLAG_NEED_REPLY) &&
		   vu_has_protocol_feature(dev, VU_PROTO_F_REPLY_ACK) &&
		   !vu_request_has_reply(msg->request);
	int ret;

	if (!h->run || (h->needs & ~dev->protocol_features))
		ret = -EOPNOTSUPP;
	else
		ret = h->run(dev, msg);

	vu_msg_close_fds(msg);
	if (ret == REPLIED)
		return 0;
	if (ack)
		return vu_msg_send_reply_u64(dev->sock, msg, ret < 0 ? 1 : 0);
	return ret < 0 ? ret : 0;
}

/* Messages handled per call: the socket watch fires again for the rest. */
#define DISPATCH_BUDGET 64

int vu_dev_dispatch(struct vu_dev *dev)
{
	for (unsigned int n = 0; n < DISPATCH_BUDGET; n++) {
		int ret;

		if (dev->poisoned)
			return -EFAULT;
		ret = vu_msg_read(dev->sock, &dev->reader, dev->num_queues);
		if (ret <= 0)
			return ret;
		ret = handle(dev, &dev->reader.msg);
		dev->reader.msg.nfds = 0;
		if (ret < 0)
			return ret;
	}
	return dev->poisoned ? -EFAULT : 0;
}

bool vu_dev_poisoned(const struct vu_dev *dev)
{
	return dev->poisoned;
}

int vu_dev_new(int sock, const struct vu_device_ops *ops, void *opaque,
	       const struct vu_loop_ops *loop, void *loop_data, struct vu_dev **ret)
{
	struct vu_dev *dev;

	if (!ops->max_queues || ops->max_queues > VU_VRING_IDX_MASK + 1)
		return -EINVAL;
	dev = g_new0(struct vu_dev, 1);
	dev->sock = sock;
	dev->ops = *ops;
	if (!dev->ops.get_config)
		dev->ops.get_config = no_get_config;
	if (!dev->ops.set_config)
		dev->ops.set_config = no_set_config;
	if (!dev->ops.queue_kick)
		dev->ops.queue_kick = no_queue_kick;
	if (!dev->ops.set_features)
		dev->ops.set_features = any_features;
	if (!dev->ops.reset)
		dev->ops.reset = no_reset;
	if (!dev->ops.attach)
		dev->ops.attach = no_attach;
	if (!dev->ops.queue_stop)
		dev->ops.queue_stop = no_queue_stop;
	if (!dev->ops.mem_gone)
		dev->ops.mem_gone = no_mem_gone;
	dev->has_device_state = ops->save_state && ops->load_state;
	if (!dev->has_device_state) {
		dev->ops.save_state = no_save_state;
		dev->ops.load_state = no_load_state;
	}
	dev->state_fd = -1;
	dev->state_result = -ENOENT;
	dev->opaque = opaque;
	dev->loop = *loop;
	dev->loop_data = loop_data;
	dev->backend_fd = -1;
	dev->inflight.fd = -1;
	dev->mem.poisoned = &dev->poisoned;
	dev->mem.populate = ops->populate_memory;
	dev->log.poisoned = &dev->poisoned;
	dev->inflight.poisoned = &dev->poisoned;
	vu_msg_reader_init(&dev->reader);
	dev->num_queues = ops->max_queues;
	dev->vqs = g_new0(struct vu_vq, dev->num_queues);
	for (unsigned int i = 0; i < dev->num_queues; i++) {
		dev->vqs[i].dev = dev;
		dev->vqs[i].index = i;
		dev->vqs[i].kick_fd = dev->vqs[i].call_fd = dev->vqs[i].err_fd = -1;
	}
	dev->ops.attach(dev->opaque, dev);
	*ret = dev;
	return 0;
}

void vu_dev_free(struct vu_dev *dev)
{
	if (!dev)
		return;
	/* The device lets go of guest memory while the connection exists. */
	dev->ops.reset(dev->opaque);
	for (unsigned int i = 0; i < dev->num_queues; i++)
		reset_queue(dev, &dev->vqs[i]);
	g_free(dev->vqs);
	vu_mem_clear(&dev->mem);
	vu_log_clear(&dev->log);
	vu_inflight_clear(&dev->inflight);
	closep(&dev->backend_fd);
	vu_state_drop(dev);
	vu_msg_reader_reset(&dev->reader);
	closep(&dev->sock);
	g_free(dev);
}

int vu_dev_socket(const struct vu_dev *dev)
{
	return dev->sock;
}

void *vu_dev_loop_data(const struct vu_dev *dev)
{
	return dev->loop_data;
}

void vu_dev_add_watch(struct vu_dev *dev, int fd, vu_watch_cb cb, void *data)
{
	dev->loop.add_watch(dev, fd, cb, data);
}

void vu_dev_remove_watch(struct vu_dev *dev, int fd)
{
	dev->loop.remove_watch(dev, fd);
}

bool vu_dev_logging(const struct vu_dev *dev)
{
	return vu_logging(dev);
}

void vu_dev_log_write(struct vu_dev *dev, uint64_t gpa, uint64_t len)
{
	if (vu_logging(dev))
		vu_log_write(&dev->log, gpa, len);
}

int vu_dev_config_changed(struct vu_dev *dev)
{
	uint8_t buf[VU_HDR_SIZE];
	uint32_t len;
	ssize_t n;

	if (dev->backend_fd < 0 || !vu_has_protocol_feature(dev, VU_PROTO_F_BACKEND_REQ))
		return -EOPNOTSUPP;
	len = vu_encode_backend_msg(buf, VU_BACKEND_CONFIG_CHANGE_MSG, 0, NULL, 0);
	n = send(dev->backend_fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	return (uint32_t)n == len ? 0 : -EAGAIN;
}

// SPDX-License-Identifier: MIT
/* Checks the RDMA device tests share (rdma-checks.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <glib.h>

#include "rdma-checks.h"

void rt_fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7 + (i >> 9));
}

void rt_guest_fill(struct rp_guest *p, uint64_t off, uint32_t len, uint8_t seed)
{
	g_autofree uint8_t *b = g_malloc(len);

	rt_fill(b, len, seed);
	assert_int_equal(vgd_buf_write(p->g, &p->buf, off, b, len), 0);
}

void rt_guest_expect(struct rp_guest *p, uint64_t off, const uint8_t *want, uint32_t len)
{
	g_autofree uint8_t *b = g_malloc(len);

	assert_int_equal(vgd_buf_read(p->g, &p->buf, off, b, len), 0);
	assert_memory_equal(b, want, len);
}

void rt_guest_expect_pattern(struct rp_guest *p, uint64_t off, uint32_t len, uint8_t seed)
{
	g_autofree uint8_t *want = g_malloc(len);

	rt_fill(want, len, seed);
	rt_guest_expect(p, off, want, len);
}

void rt_native_expect_pattern(struct rp_native *n, uint64_t off, uint32_t len, uint8_t seed)
{
	g_autofree uint8_t *want = g_malloc(len);

	rt_fill(want, len, seed);
	assert_memory_equal(n->buf + off, want, len);
}

void rt_native_expect_zero(struct rp_native *n, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		assert_int_equal(n->buf[i], 0);
}

void rt_connect_pair(struct rp_guest *g, struct rp_native *n, uint8_t rnr_retry)
{
	assert_int_equal(vgd_connect_qp(g->g, &g->qp, n->qp->qp_num, n->gid, g->gid_index,
					rnr_retry), 0);
	assert_int_equal(rp_native_connect(n, g->qp.qpn, g->gid, rnr_retry), 0);
}

void rt_guest_post(struct rp_guest *g, const struct vgd_send *w)
{
	assert_int_equal(vgd_post_send(g->g, &g->qp, w, 1, true), 0);
}

void rt_guest_expect_cqe(struct rp_guest *g, uint64_t wr_id, uint32_t status, uint32_t opcode)
{
	struct vrdma_cqe c;

	assert_int_equal(rp_guest_wait(g, &c), 0);
	assert_int_equal(c.wr_id, wr_id);
	assert_int_equal(c.status, status);
	if (status == IBV_WC_SUCCESS)
		assert_int_equal(c.opcode, opcode);
	assert_int_equal(c.qp_num, g->qp.qpn);
}

void rt_expect_event(struct vgd *g, uint16_t type, uint32_t handle, uint32_t data)
{
	struct vrdma_event ev;

	assert_int_equal(vgd_wait_event(g, RP_TIMEOUT_MS, &ev), 0);
	assert_int_equal(ev.type, type);
	assert_int_equal(ev.handle, handle);
	assert_int_equal(ev.data, data);
}

void rt_require_rig(const char *const *names, const char **values)
{
	bool all = true;

	for (size_t i = 0; names[i]; i++) {
		values[i] = getenv(names[i]);
		all = all && values[i];
	}
	if (all)
		return;
	if (getenv("VRDMA_REQUIRE_RDMA")) {
		fprintf(stderr, "the Soft-RoCE rig's variables are missing, but "
			"VRDMA_REQUIRE_RDMA is set\n");
		exit(1);
	}
	printf("SKIP: needs the Soft-RoCE rig's RDMA devices (run it in tests/rxe-vm/run)\n");
	exit(77);
}

void rt_expect_no_event(struct vgd *g, int ms)
{
	struct vrdma_event ev;

	assert_int_equal(vgd_wait_event(g, ms, &ev), -ETIMEDOUT);
}

void rt_guest_qp_init_cm(struct rp_guest *g)
{
	struct vrdma_qp_attr a = { .qp_state = VRDMA_QPS_INIT,
				   .qp_access_flags = VRDMA_ACCESS_ALL };

	assert_int_equal(vgd_modify_qp(g->g, &g->qp, VRDMA_QP_STATE | VRDMA_QP_ACCESS_FLAGS, &a),
			 0);
}

void rt_guest_cm_event(struct rp_guest *g, uint16_t want_type, struct vrdma_cm_event *ret)
{
	struct vrdma_event ev;
	int r;

	for (;;) {
		r = vgd_cmd(g->g, VRDMA_CMD_CM_GET_EVENT, NULL, 0, ret, sizeof(*ret));
		if (r != VRDMA_ENOENT)
			break;
		assert_int_equal(vgd_wait_event(g->g, RP_TIMEOUT_MS * 3, &ev), 0);
	}
	assert_int_equal(r, 0);
	assert_int_equal(ret->type, want_type);
}

int rt_host_objects(const char *kind, pid_t pid)
{
	char cmd[128], line[512], want[32];
	int n = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "rdma resource show %s 2>/dev/null", kind);
	snprintf(want, sizeof(want), " pid %d ", (int)pid);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line) - 1, f)) {
		/* Make the last field end in a space too. */
		size_t len = strcspn(line, "\n");

		line[len] = ' ';
		line[len + 1] = '\0';
		n += strstr(line, want) != NULL;
	}
	assert_int_equal(pclose(f), 0);
	return n;
}

// SPDX-License-Identifier: MIT
/*
 * Handles a guest uses for its objects: an index into this connection's
 * table plus the slot's generation, so a handle means nothing on another
 * connection, and a destroyed handle stays dead until its slot has been
 * reused 4095 times.  Never a pointer: nothing of the host's layout leaks.
 */
#include <errno.h>

#include "rdma-internal.h"

#define GEN_BITS (32 - RDMA_HANDLE_INDEX_BITS)
#define GEN_MAX ((1u << GEN_BITS) - 1)

static uint32_t make_handle(uint32_t index, uint16_t gen)
{
	return (uint32_t)gen << RDMA_HANDLE_INDEX_BITS | (index + 1);
}

/* Room for index i at least (the table doubles, up to its maximum). */
static void grow_to(struct rdma_table *t, uint32_t i)
{
	uint32_t cap = MAX(t->cap, 16u);

	while (cap <= i)
		cap *= 2;
	cap = MIN(cap, (uint32_t)RDMA_TABLE_MAX);
	if (cap <= t->cap)
		return;
	t->obj = g_renew(void *, t->obj, cap);
	t->gen = g_renew(uint16_t, t->gen, cap);
	for (uint32_t j = t->cap; j < cap; j++) {
		t->obj[j] = NULL;
		t->gen[j] = 0;
	}
	t->cap = cap;
}

uint32_t rdma_table_add(struct rdma_table *t, void *obj, uint32_t limit)
{
	uint32_t i = t->cap;

	if (t->count >= limit || t->count >= RDMA_TABLE_MAX)
		return 0;
	/* From where the last search ended: slots are reused round robin. */
	for (uint32_t n = 0; n < t->cap && t->count < t->cap; n++) {
		uint32_t j = (t->hint + n) % t->cap;

		if (!t->obj[j]) {
			i = j;
			break;
		}
	}
	if (i == t->cap)
		grow_to(t, i);
	/* Generation 0 never appears: handle 0 stays invalid. */
	t->gen[i] = t->gen[i] % GEN_MAX + 1;
	t->obj[i] = obj;
	t->count++;
	t->hint = i + 1;
	return make_handle(i, t->gen[i]);
}

int rdma_table_add_at(struct rdma_table *t, void *obj, uint32_t handle)
{
	uint32_t index = (handle & RDMA_TABLE_MAX) - 1;
	uint16_t gen = (uint16_t)(handle >> RDMA_HANDLE_INDEX_BITS);

	if (!(handle & RDMA_TABLE_MAX) || !gen || gen > GEN_MAX)
		return -EINVAL;
	grow_to(t, index);
	if (index >= t->cap || t->obj[index])
		return -EEXIST;
	t->gen[index] = gen;
	t->obj[index] = obj;
	t->count++;
	t->hint = index + 1;
	return 0;
}

void *rdma_table_get(const struct rdma_table *t, uint32_t handle)
{
	uint32_t index = (handle & RDMA_TABLE_MAX) - 1;
	uint16_t gen = (uint16_t)(handle >> RDMA_HANDLE_INDEX_BITS);

	if (!(handle & RDMA_TABLE_MAX) || index >= t->cap || t->gen[index] != gen)
		return NULL;
	return t->obj[index];
}

void rdma_table_del(struct rdma_table *t, uint32_t handle)
{
	uint32_t index = (handle & RDMA_TABLE_MAX) - 1;

	if (rdma_table_get(t, handle)) {
		t->obj[index] = NULL;
		t->count--;
	}
}

void *rdma_table_any(const struct rdma_table *t)
{
	for (uint32_t i = 0; i < t->cap && t->count; i++)
		if (t->obj[i])
			return t->obj[i];
	return NULL;
}

void rdma_table_free(struct rdma_table *t)
{
	g_free(t->obj);
	g_free(t->gen);
	*t = (struct rdma_table){ 0 };
}

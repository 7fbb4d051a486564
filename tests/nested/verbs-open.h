/* SPDX-License-Identifier: MIT */
/* The nested tier's test programs (rkey-probe, driver-check): one helper. */
#ifndef NESTED_VERBS_OPEN_H
#define NESTED_VERBS_OPEN_H

#include <string.h>

#include <infiniband/verbs.h>

/* The RDMA device called NAME, opened; NULL if there is none. */
static inline struct ibv_context *nested_open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i] && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

#endif

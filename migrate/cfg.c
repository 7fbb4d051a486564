// SPDX-License-Identifier: MIT
#include "migrate.h"

void mig_cfg_default(struct mig_cfg *cfg)
{
	*cfg = (struct mig_cfg){ 0 };
	xport_opts_init(&cfg->xopts);
	cfg->xopts.channels = 4;
	converge_cfg_default(&cfg->converge);
	cfg->owner_timeout_ms = 10000;
	cfg->peer_timeout_ms = 30000;
}

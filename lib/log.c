// SPDX-License-Identifier: MIT
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

static const char *log_program = "vrdma";
static enum log_level log_threshold = LOG_LVL_INFO;

void log_init(const char *program, enum log_level level)
{
	log_program = program;
	log_threshold = level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	va_list ap;

	if (level > log_threshold)
		return;
	fprintf(stderr, "%s: %s: ", log_program, names[level]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

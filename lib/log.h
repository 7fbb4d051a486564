/* SPDX-License-Identifier: MIT */
/*
 * Logging for programs (daemons and CLIs), never for library code: the
 * libraries return -errno and the edge says what failed, once, with context.
 */
#ifndef VRDMA_LOG_H
#define VRDMA_LOG_H

enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

void log_init(const char *program, enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif

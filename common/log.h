/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - the log of every gpuqos daemon: one line per event on stderr, with a UTC
 * timestamp and a level. Does not own: where stderr goes (the container
 * runtime or the test harness decides).
 */
#ifndef GPUQOS_COMMON_LOG_H
#define GPUQOS_COMMON_LOG_H

enum gq_log_level {
	GQ_LOG_ERROR = 0,
	GQ_LOG_WARN = 1,
	GQ_LOG_INFO = 2,
	GQ_LOG_DEBUG = 3,
};

void gq_log_set_level(enum gq_log_level level);
/* Parses "error", "warn", "info", "debug"; -1 if none of those. */
int gq_log_parse_level(const char *s, enum gq_log_level *out);
void gq_log(enum gq_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) gq_log(GQ_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) gq_log(GQ_LOG_WARN, __VA_ARGS__)
#define log_info(...) gq_log(GQ_LOG_INFO, __VA_ARGS__)
#define log_debug(...) gq_log(GQ_LOG_DEBUG, __VA_ARGS__)

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - the log of every gpuqos daemon: one line per event on stderr, with a UTC
 * timestamp and a level. Does not own: where stderr goes (the container
 * runtime or the test harness decides).
 */
#ifndef GPUQOS_COMMON_LOG_H
#define GPUQOS_COMMON_LOG_H

enum log_level {
	LOG_LEVEL_ERROR = 0,
	LOG_LEVEL_WARN = 1,
	LOG_LEVEL_INFO = 2,
	LOG_LEVEL_DEBUG = 3,
};

void log_set_level(enum log_level level);
/* Parses "error", "warn", "info", "debug"; -1 if none of those. */
int log_parse_level(const char *s, enum log_level *out);
void log_line(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_line(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_line(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_line(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_line(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif

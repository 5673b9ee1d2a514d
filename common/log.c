/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.c - formats log lines. Owns the level filter; does not own any
 * buffering (stderr is unbuffered so a crash loses nothing).
 */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum log_level log_level = LOG_LEVEL_INFO;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void log_set_level(enum log_level level)
{
	log_level = level;
}

int log_parse_level(const char *s, enum log_level *out)
{
	for (int i = 0; i <= LOG_LEVEL_DEBUG; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

void log_line(enum log_level level, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	if (level > log_level)
		return;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || !gmtime_r(&ts.tv_sec, &tm))
		memset(&tm, 0, sizeof(tm));
	n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		     tm.tm_sec, ts.tv_nsec / 1000000, level_names[level]);
	if (n < 0)
		return;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One write per line so lines from a crash-restart do not interleave. */
	fprintf(stderr, "%s\n", line);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_log.c - the preempt agent's only output to the application's
 * terminal: one line per event on stderr, and only when GPUQOS_LOG is set.
 *
 * Owns: the log level and line format, and the monotonic clock helper.
 * Does not own: stdout (never written) or stdio buffers (each line is one
 * write(2), so the application's FILE locks and buffers are not touched).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "preempt.h"

int pa_log_level = PA_LOG_OFF;

void pa_log_init(void)
{
	const char *v = getenv("GPUQOS_LOG");

	if (v == NULL || *v == '\0')
		pa_log_level = PA_LOG_OFF;
	else if (strcmp(v, "debug") == 0)
		pa_log_level = PA_LOG_DEBUG;
	else
		pa_log_level = PA_LOG_INFO;
}

void pa_log(int level, const char *fmt, ...)
{
	char line[512];
	int saved = errno;
	va_list ap;
	ssize_t w;
	int n, m;

	if (level > pa_log_level)
		return;
	n = snprintf(line, sizeof(line), "gpuqos-preempt[%d]: ", (int)getpid());
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* Best effort: there is nowhere to report a failed log write. */
	w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
	errno = saved;
}

rm_u64 pa_now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 0;
	return (rm_u64)ts.tv_sec * 1000000000u + (rm_u64)ts.tv_nsec;
}

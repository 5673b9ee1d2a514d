/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_buf.c - growable text buffer (see sim_buf.h). Owns only memory.
 */
#include "sim_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int sim_buf_reserve(struct sim_buf *b, size_t need)
{
	if (b->len + need + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + need + 1)
		cap *= 2;
	char *p = realloc(b->data, cap);
	if (!p) {
		b->failed = 1;
		return -1;
	}
	b->data = p;
	b->cap = cap;
	return 0;
}

void sim_buf_printf(struct sim_buf *b, const char *fmt, ...)
{
	va_list ap;

	if (b->failed)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = 1;
		return;
	}
	if (sim_buf_reserve(b, (size_t)n) != 0)
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void sim_buf_free(struct sim_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->failed = 0;
}

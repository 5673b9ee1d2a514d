/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli_table.c - aligned text tables and terminal-safe strings; see
 * cli_table.h.
 */
#include "agent/cli/cli_table.h"

#include <stdlib.h>
#include <string.h>

/* Length of the control character starting at s, 0 if s is not one.
 * C1 controls (U+0080..U+009F, UTF-8 C2 80..C2 9F) include CSI. */
static size_t ctl_len(const unsigned char *s)
{
	if (s[0] < 0x20 || s[0] == 0x7f)
		return 1;
	if (s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f)
		return 2;
	return 0;
}

char *term_safe(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	char *out = malloc(strlen(s) + 1), *o = out;

	if (!out)
		return NULL;
	while (*p) {
		size_t n = ctl_len(p);

		if (n) {
			*o++ = '?';
			p += n;
		} else {
			*o++ = (char)*p++;
		}
	}
	*o = '\0';
	return out;
}

void put_safe(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		size_t n = ctl_len(p);

		fputc(n ? '?' : *p, f);
		p += n ? n : 1;
	}
}

/* Columns on screen: UTF-8 continuation bytes take none. */
static size_t width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

int table_init(struct table *t, size_t ncols, const char *const *header)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	return table_add(t, header);
}

int table_add(struct table *t, const char *const *cells)
{
	size_t i, base;

	if (t->nrows == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 16;
		char **p = realloc(t->cells, ncap * t->ncols * sizeof(*p));

		if (!p)
			return -1;
		t->cells = p;
		t->cap = ncap;
	}
	base = t->nrows * t->ncols;
	for (i = 0; i < t->ncols; i++) {
		t->cells[base + i] = term_safe(cells[i] ? cells[i] : "-");
		if (!t->cells[base + i]) {
			while (i--)
				free(t->cells[base + i]);
			return -1;
		}
	}
	t->nrows++;
	return 0;
}

void table_print(const struct table *t, FILE *f)
{
	size_t *w = calloc(t->ncols ? t->ncols : 1, sizeof(*w));
	size_t r, c;

	for (r = 0; w && r < t->nrows; r++)
		for (c = 0; c < t->ncols; c++) {
			size_t cw = width(t->cells[r * t->ncols + c]);

			if (cw > w[c])
				w[c] = cw;
		}
	for (r = 0; r < t->nrows; r++) {
		for (c = 0; c < t->ncols; c++) {
			const char *cell = t->cells[r * t->ncols + c];
			int last = c + 1 == t->ncols;

			/* Without the widths (OOM) fall back to tab separation. */
			if (!w)
				fprintf(f, "%s%s", cell, last ? "" : "\t");
			else
				fprintf(f, "%s%*s", cell,
					last ? 0 : (int)(w[c] - width(cell) + 2), "");
		}
		fputc('\n', f);
	}
	free(w);
}

void table_free(struct table *t)
{
	size_t i;

	for (i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

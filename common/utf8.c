/* SPDX-License-Identifier: Apache-2.0 */
/*
 * utf8.c - see utf8.h. Owns the decoder (the table of well-formed byte
 * sequences of Unicode 15, table 3-7) and the replacements; does not own
 * the strings.
 */
#include "common/utf8.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* Table 3-7: the lead byte fixes the length and the range of the second
 * byte (E0 and F0 exclude overlong forms, ED the surrogates, F4 anything
 * past U+10FFFF); later bytes are 80..BF. C0, C1 and F5..FF never lead. */
size_t utf8_next(const char *s, size_t n, uint32_t *cp, int *bad)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned char c = u[0], lo = 0x80, hi = 0xBF;
	size_t len;
	uint32_t v;

	*bad = 0;
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
		v = c & 0x1Fu;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		v = c & 0x0Fu;
		lo = c == 0xE0 ? 0xA0 : 0x80;
		hi = c == 0xED ? 0x9F : 0xBF;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		v = c & 0x07u;
		lo = c == 0xF0 ? 0x90 : 0x80;
		hi = c == 0xF4 ? 0x8F : 0xBF;
	} else {
		*cp = UTF8_REPLACEMENT;
		*bad = 1;
		return 1;
	}
	for (size_t i = 1; i < len; i++) {
		/* A NUL or the end stops a truncated sequence here too. */
		if (i >= n || u[i] < lo || u[i] > hi) {
			*cp = UTF8_REPLACEMENT;
			*bad = 1;
			return i; /* the maximal subpart: what was valid so far */
		}
		v = (v << 6) | (u[i] & 0x3Fu);
		lo = 0x80;
		hi = 0xBF;
	}
	*cp = v;
	return len;
}

int utf8_valid(const char *s, size_t n)
{
	uint32_t cp;
	int bad;

	for (size_t i = 0; i < n;) {
		i += utf8_next(s + i, n - i, &cp, &bad);
		if (bad)
			return 0;
	}
	return 1;
}

char *utf8_dup_valid(const char *s)
{
	size_t n = strlen(s), o = 0;
	/* Each invalid byte becomes at most 3: the worst case is every byte. */
	char *out = malloc(n * 3 + 1);
	uint32_t cp;
	int bad;

	if (!out)
		return NULL;
	for (size_t i = 0, k; i < n; i += k) {
		k = utf8_next(s + i, n - i, &cp, &bad);
		if (bad) {
			memcpy(out + o, UTF8_REPLACEMENT_STR, 3);
			o += 3;
		} else {
			memcpy(out + o, s + i, k);
			o += k;
		}
	}
	out[o] = '\0';
	return out;
}

void utf8_prom_label(const char *s, void (*put)(void *cls, const char *p, size_t n), void *cls)
{
	size_t n = strlen(s), run = 0, k;
	uint32_t cp;
	int bad;

	for (size_t i = 0; i < n; i += k) {
		const char *esc = NULL;

		k = utf8_next(s + i, n - i, &cp, &bad);
		if (bad)
			esc = UTF8_REPLACEMENT_STR;
		else if (cp == '\\')
			esc = "\\\\";
		else if (cp == '"')
			esc = "\\\"";
		else if (cp == '\n')
			esc = "\\n";
		if (!esc) {
			run += k;
			continue;
		}
		if (run)
			put(cls, s + i - run, run);
		put(cls, esc, strlen(esc));
		run = 0;
	}
	if (run)
		put(cls, s + n - run, run);
}

/* Out of memory: each byte of an invalid sequence becomes '?' where it
 * is, so that what is printed is valid all the same. */
static void fix_in_place(char *p)
{
	size_t n = strlen(p), k;
	uint32_t cp;
	int bad;

	for (size_t i = 0; i < n; i += k) {
		k = utf8_next(p + i, n - i, &cp, &bad);
		if (bad)
			memset(p + i, '?', k);
	}
}

/* A string cJSON owns (or a constant, !owned), replaced by a valid copy in
 * cJSON's allocator. 1 replaced, 0 already valid. */
static int fix(char **p, int *owned)
{
	char *clean, *copy = NULL;
	size_t n;

	if (!*p || utf8_valid(*p, strlen(*p)))
		return 0;
	if ((clean = utf8_dup_valid(*p))) {
		n = strlen(clean) + 1;
		if ((copy = cJSON_malloc(n)))
			memcpy(copy, clean, n);
		free(clean);
	}
	if (!copy) {
		if (!*owned)
			return 0; /* a literal is ours, and valid: not reached */
		fix_in_place(*p);
		return 1;
	}
	if (*owned)
		cJSON_free(*p);
	*p = copy;
	*owned = 1;
	return 1;
}

int utf8_json_sanitize(struct cJSON *item)
{
	int n = 0, owned, r;

	for (; item; item = item->next) {
		/* Raw text is JSON already: replacing bytes that are not UTF-8
		 * cannot touch its syntax, which is ASCII. */
		owned = 1;
		if (cJSON_IsString(item) || cJSON_IsRaw(item))
			n += fix(&item->valuestring, &owned);
		owned = !(item->type & cJSON_StringIsConst);
		if ((r = fix(&item->string, &owned)) && owned)
			item->type &= ~cJSON_StringIsConst; /* the copy is the tree's own */
		n += r + utf8_json_sanitize(item->child);
	}
	return n;
}

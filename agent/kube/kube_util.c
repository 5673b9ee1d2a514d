/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_util.c - the small helpers every file of agent/kube uses: the
 * clock, jitter and backoff, string building and escaping, the growable
 * buffer, status texts and JSON field access. Calls nothing else in
 * agent/kube, so that no file of it calls back into the files that call
 * it. Does not own requests (kube_req.c) or any state.
 */
#include "agent/kube/kube_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t kube_now_ms(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

unsigned kube_rand(struct kube_client *c, unsigned bound)
{
	/* xorshift32: jitter only needs to differ between nodes. */
	c->rng ^= c->rng << 13;
	c->rng ^= c->rng >> 17;
	c->rng ^= c->rng << 5;
	return bound ? c->rng % bound : 0;
}

/* Doubling delay with "equal jitter": half fixed, half random, so that the
 * agents of a whole cluster do not retry in step after an API outage. */
unsigned kube_backoff_ms(struct kube_client *c, unsigned failures)
{
	uint64_t d = c->o.backoff_min_ms;

	for (unsigned i = 1; i < failures && d < c->o.backoff_max_ms; i++)
		d *= 2;
	if (d > c->o.backoff_max_ms)
		d = c->o.backoff_max_ms;
	return (unsigned)(d / 2 + kube_rand(c, (unsigned)(d / 2) + 1));
}

char *kube_strdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

/* Percent-encodes a query or path value (RFC 3986 unreserved kept). */
char *kube_escape(struct kube_client *c, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(s) * 3 + 1), *o = out;

	(void)c;
	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~", ch)) {
			*o++ = (char)ch;
		} else {
			*o++ = '%';
			*o++ = hex[ch >> 4];
			*o++ = hex[ch & 15];
		}
	}
	*o = '\0';
	return out;
}

int kube_buf_add(struct kube_buf *b, const char *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *np;

		while (cap < b->len + n + 1)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np)
			return -1;
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

const char *kube_status_text(long status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return status >= 200 && status < 300 ? "OK" : "unexpected status";
	}
}

const char *kube_json_str(const cJSON *obj, const char *a, const char *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);

	if (b)
		v = cJSON_GetObjectItemCaseSensitive(v, b);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int hex4(const char *p, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char ch = p[i];
		unsigned d = ch >= '0' && ch <= '9' ? (unsigned)(ch - '0')
			     : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
			     : ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10) : 16u;

		if (d > 15)
			return -1;
		*v = *v << 4 | d;
	}
	return 0;
}

/* Rewrites, in place and at the same length, the escapes cJSON would
 * mishandle: "\u0000" (cJSON keeps the NUL, so every C string comparison
 * stops there: "latency-critical\u0000junk" would read as
 * "latency-critical") and an unpaired UTF-16 surrogate (cJSON refuses the
 * whole document, so one odd annotation would stall a watch until 410).
 * Each becomes "\ufffd", U+FFFD REPLACEMENT CHARACTER, as a decoder that
 * meets an invalid sequence writes it: the value stays visibly wrong,
 * the rest of the object is kept. Backslashes only occur inside strings
 * in valid JSON, so no string tracking is needed; a raw NUL byte (never
 * valid JSON) becomes DEL for the same reason as an escaped one. */
void kube_json_mend(char *p, size_t n)
{
	unsigned hi, lo;

	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\0') {
			p[i] = 0x7f;
			continue;
		}
		if (p[i] != '\\' || i + 1 >= n)
			continue;
		if (p[++i] != 'u' || i + 5 > n || hex4(p + i + 1, &hi) != 0)
			continue;
		/* p + i - 1 is the escape "\uXXXX". */
		if (hi >= 0xd800 && hi <= 0xdbff && i + 11 <= n && p[i + 5] == '\\' &&
		    p[i + 6] == 'u' && hex4(p + i + 7, &lo) == 0 && lo >= 0xdc00 && lo <= 0xdfff) {
			i += 10; /* a valid pair */
			continue;
		}
		if (hi == 0 || (hi >= 0xd800 && hi <= 0xdfff))
			memcpy(p + i + 1, "fffd", 4);
		i += 4;
	}
}

cJSON *kube_json_parse(char *p, size_t n)
{
	if (!p)
		return NULL;
	kube_json_mend(p, n);
	return cJSON_ParseWithLength(p, n);
}

/* The delay before a retry: the backoff, or the server's Retry-After
 * when that is longer (it is capped when read: a server cannot park the
 * client for hours). */
unsigned kube_retry_ms(struct kube_client *c, unsigned failures, unsigned retry_after_ms)
{
	unsigned d = kube_backoff_ms(c, failures);

	return retry_after_ms > d ? retry_after_ms : d;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_json.c - typed, checked access to control-socket answer members; see
 * ctl_json.h. Only the first problem is kept: it is the one that explains
 * the others.
 */
#include "agent/cli/ctl_json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void j_fail(struct jerr *e, const char *fmt, ...)
{
	va_list ap;

	if (e->msg[0])
		return;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	if (!e->msg[0]) /* keep "a problem was recorded" true even if empty */
		snprintf(e->msg, sizeof(e->msg), "malformed");
}

/* Finds `key`; returns 1 found, 0 absent-and-allowed, -1 recorded error. */
static int j_find(struct jerr *e, const cJSON *o, const char *where, const char *key,
		  int flags, const cJSON **it)
{
	*it = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!*it) {
		if (flags & J_OPT)
			return 0;
		j_fail(e, "%s: missing \"%s\"", where, key);
		return -1;
	}
	if (cJSON_IsNull(*it)) {
		if (flags & J_NULL)
			return 0;
		j_fail(e, "%s: \"%s\" is null", where, key);
		return -1;
	}
	return 1;
}

static int j_type(struct jerr *e, const char *where, const char *key, const char *want)
{
	j_fail(e, "%s: \"%s\" is not %s", where, key, want);
	return -1;
}

int j_int(struct jerr *e, const cJSON *o, const char *where, const char *key,
	  int flags, long long *v)
{
	const cJSON *it;
	int r = j_find(e, o, where, key, flags, &it);
	double d;

	if (r <= 0)
		return r;
	d = cJSON_IsNumber(it) ? it->valuedouble : NAN;
	/* Integers beyond 2^53 cannot have come through JSON doubles intact. */
	if (!isfinite(d) || d > 9007199254740992.0 || d < -9007199254740992.0 ||
	    d != (double)(long long)d)
		return j_type(e, where, key, "an integer");
	*v = (long long)d;
	return 1;
}

int j_str(struct jerr *e, const cJSON *o, const char *where, const char *key,
	  int flags, const char **v)
{
	const cJSON *it;
	int r = j_find(e, o, where, key, flags, &it);

	if (r <= 0)
		return r;
	if (!cJSON_IsString(it) || !it->valuestring)
		return j_type(e, where, key, "a string");
	*v = it->valuestring;
	return 1;
}

int j_bool(struct jerr *e, const cJSON *o, const char *where, const char *key,
	   int flags, int *v)
{
	const cJSON *it;
	int r = j_find(e, o, where, key, flags, &it);

	if (r <= 0)
		return r;
	if (!cJSON_IsBool(it))
		return j_type(e, where, key, "true or false");
	*v = cJSON_IsTrue(it);
	return 1;
}

int j_obj(struct jerr *e, const cJSON *o, const char *where, const char *key,
	  int flags, const cJSON **v)
{
	int r = j_find(e, o, where, key, flags, v);

	if (r <= 0)
		return r;
	if (!cJSON_IsObject(*v))
		return j_type(e, where, key, "an object");
	return 1;
}

int j_arr(struct jerr *e, const cJSON *o, const char *where, const char *key,
	  int flags, const cJSON **v)
{
	int r = j_find(e, o, where, key, flags, v);

	if (r <= 0)
		return r;
	if (!cJSON_IsArray(*v))
		return j_type(e, where, key, "an array");
	return 1;
}

int j_errno(struct jerr *e, const cJSON *o, const char *where, const char *key,
	    int flags, struct jerrno *v)
{
	const cJSON *it;
	int r = j_find(e, o, where, key, flags, &it);

	memset(v, 0, sizeof(*v));
	if (r <= 0)
		return r;
	if (cJSON_IsString(it) && it->valuestring && strcmp(it->valuestring, "timeout") == 0) {
		v->present = v->timeout = 1;
		return 1;
	}
	if (!cJSON_IsNumber(it))
		return j_type(e, where, key, "an integer or \"timeout\"");
	r = j_int(e, o, where, key, flags, &v->num);
	v->present = r > 0;
	return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jsonnum.c - whole numbers in the agent's JSON answers written as digits
 * (jsonnum.h says why).
 */
#include "agent/io/jsonnum.h"

#include <stdio.h>

/* 2^53: every whole double up to it is exact, and so is its text. */
#define JSON_EXACT_MAX 9007199254740992.0

cJSON *json_add_num(cJSON *o, const char *key, double v)
{
	char buf[24];

	if (v >= -JSON_EXACT_MAX && v <= JSON_EXACT_MAX && v == (double)(long long)v) {
		snprintf(buf, sizeof(buf), "%lld", (long long)v);
		return cJSON_AddRawToObject(o, key, buf);
	}
	return cJSON_AddNumberToObject(o, key, v);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quantity.c - sizes as Kubernetes writes a quantity, restricted to whole
 * bytes: the policy file's "memory" section, the gpuqos.io/gpu-memory
 * annotation, and every place that shows a size. Pure: libc only.
 */
#include "common/quantity.h"

#include <stdio.h>
#include <string.h>

#include "abi/gq_proto.h"

static const struct {
	const char *suffix;
	uint64_t mult;
} units[] = {
	{ "Pi", 1ull << 50 }, { "Ti", 1ull << 40 }, { "Gi", 1ull << 30 }, { "Mi", 1ull << 20 },
	{ "Ki", 1ull << 10 }, { "P", 1000000000000000ull }, { "T", 1000000000000ull },
	{ "G", 1000000000ull }, { "M", 1000000ull }, { "k", 1000ull },
};
#define NUNITS (sizeof(units) / sizeof(units[0]))

int quantity_parse(const char *s, uint64_t *out, char *why, size_t n)
{
	uint64_t v = 0, mult = 1;
	size_t i = 0;

	if (!s || !*s) {
		snprintf(why, n, "is empty");
		return -1;
	}
	while (s[i] >= '0' && s[i] <= '9') {
		/* Past QUANTITY_MAX already: no need to read on. */
		if (v > QUANTITY_MAX) {
			snprintf(why, n, "\"%.40s\" is larger than 1Pi", s);
			return -1;
		}
		v = v * 10u + (uint64_t)(s[i] - '0');
		i++;
	}
	if (i == 0 || (s[0] == '0' && i > 1)) {
		snprintf(why, n,
			 "\"%.40s\" is not a size: whole bytes, or a whole number with Ki, Mi, Gi, "
			 "Ti, Pi, k, M, G, T or P (e.g. 16Gi)",
			 s);
		return -1;
	}
	if (s[i]) {
		size_t u;

		for (u = 0; u < NUNITS; u++)
			if (strcmp(s + i, units[u].suffix) == 0)
				break;
		if (u == NUNITS) {
			snprintf(why, n,
				 "\"%.40s\" has an unknown suffix \"%.8s\": use Ki, Mi, Gi, Ti, Pi, "
				 "k, M, G, T or P, whole numbers only (e.g. 16Gi)",
				 s, s + i);
			return -1;
		}
		mult = units[u].mult;
	}
	if (v > QUANTITY_MAX / mult) {
		snprintf(why, n, "\"%.40s\" is larger than 1Pi", s);
		return -1;
	}
	v *= mult;
	if (v < QUANTITY_MIN) {
		snprintf(why, n, "\"%.40s\" is smaller than 1Mi", s);
		return -1;
	}
	*out = v;
	return 0;
}

void quantity_format(uint64_t bytes, char *buf, size_t n)
{
	if (bytes == GQ_MEM_UNLIMITED) {
		snprintf(buf, n, "unlimited");
		return;
	}
	for (size_t u = 0; u < NUNITS; u++) {
		if (bytes && bytes % units[u].mult == 0) {
			snprintf(buf, n, "%llu%s", (unsigned long long)(bytes / units[u].mult),
				 units[u].suffix);
			return;
		}
	}
	snprintf(buf, n, "%llu", (unsigned long long)bytes);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gq_run.h - what `gpuqos run` writes into a workload's environment and
 * gpuqos-agent reads back from /proc/<pid>/environ: the windows an LC asks
 * for (GPUQOS_RUN_WINDOWS), in the grammar a pod's gpuqos.io/windows uses
 * too (docs/policy.md, "Windows").
 *
 * Owns: the grammar, in one inline parser, so that `gpuqos run` (libc only)
 * refuses what the agent would. Does not own what a window does.
 */
#ifndef GPUQOS_GQ_RUN_H
#define GPUQOS_GQ_RUN_H

#include <stdint.h>

#include "gq_proto.h"

/* What an LC asks for itself: its pod's gpuqos.io/windows, or `gpuqos run
 * --windows`. NONE: it did not ask, and the node's windows.afterUs
 * applies. */
enum window_ask { WINDOW_ASK_NONE, WINDOW_ASK_OFF, WINDOW_ASK_AUTO, WINDOW_ASK_US };
struct window_req {
	enum window_ask ask;
	uint32_t after_us; /* WINDOW_ASK_US: 1 .. GQ_WINDOW_AFTER_MAX_US */
};

/* Parses an ask: "auto", "off", or 1 to 6 ASCII digits of us (0 is
 * "off"), nothing before or after, within GQ_WINDOW_AFTER_MAX_US (the
 * longest window the preempt agent runs). Anything else (a sign, a space,
 * a control character, junk, out of range) is -1. */
static inline int policy_window_ask_parse(const char *s, struct window_req *out)
{
	uint32_t v = 0;
	size_t n = 0;

	if (!s)
		return -1;
	if (s[0] == 'a' && s[1] == 'u' && s[2] == 't' && s[3] == 'o' && !s[4]) {
		out->ask = WINDOW_ASK_AUTO;
		out->after_us = 0;
		return 0;
	}
	if (s[0] == 'o' && s[1] == 'f' && s[2] == 'f' && !s[3]) {
		out->ask = WINDOW_ASK_OFF;
		out->after_us = 0;
		return 0;
	}
	for (; s[n]; n++) {
		if (s[n] < '0' || s[n] > '9' || n == 6)
			return -1;
		v = v * 10u + (uint32_t)(s[n] - '0');
	}
	if (!n || v > GQ_WINDOW_AFTER_MAX_US)
		return -1;
	out->ask = v ? WINDOW_ASK_US : WINDOW_ASK_OFF;
	out->after_us = v;
	return 0;
}

#endif

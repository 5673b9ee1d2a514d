/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.c - the core's clock (core.h: core_now_us). The core reads time
 * only here, from the function the wiring installed (the loop's now_us),
 * so that gpuqos_core links without the loop and its unit tests run on a
 * fake clock. Owns nothing else.
 */
#include "agent/core/core.h"

#include <stdlib.h>

static uint64_t (*clock_now)(void);

void core_clock_install(uint64_t (*now_us)(void))
{
	clock_now = now_us;
}

uint64_t core_now_us(void)
{
	if (!clock_now) {
		log_error("the core's clock was read before it was installed");
		abort(); /* a deadline on a clock of 0 would be silently wrong */
	}
	return clock_now();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_launch.h - the process's GPU launch counters (preempt_launch.c),
 * read by the agent thread for ACTIVITY (docs/protocol.md).
 */
#ifndef GPUQOS_PREEMPT_LAUNCH_H
#define GPUQOS_PREEMPT_LAUNCH_H

#include "abi/rm_abi.h"

struct pa_launch_counts {
	rm_u64 launches, bursts, active_ns, at_ns;
	unsigned long missed; /* entry points handed out unwrapped */
};

/* A snapshot; active_ns counts only the part of the latest launch's tail
 * that has passed by at_ns. */
void pa_launch_read(struct pa_launch_counts *c);
/* In a forked child: nothing launched yet. */
void pa_launch_child_reset(void);
/* (Whether launches reach the counters here: pa_launch_counting,
 * preempt_cuda.h.) */

#endif /* GPUQOS_PREEMPT_LAUNCH_H */

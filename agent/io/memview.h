/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memview.h - what the ctl answers and /metrics show of video memory:
 * each process's used memory, budget and refused allocations per GPU,
 * and its pod's (docs/ctl.md, docs/metrics.md). Renders struct proc_mem
 * as memory.c left it; decides nothing.
 */
#ifndef GPUQOS_AGENT_IO_MEMVIEW_H
#define GPUQOS_AGENT_IO_MEMVIEW_H

#include <stddef.h>
#include <sys/types.h>

struct agent;
struct proc;
struct cJSON;

/* o.memory: one object per GPU the process's preempt agent counts on. */
void memview_proc_json(struct agent *a, const struct proc *p, struct cJSON *o);
/* Adds lcReserveBytes (null: none kept), what the last plan counted
 * there (lcUsedBytes, uncappedBytes: null before a reading; bePartBytes:
 * null without a reserve), and processesError when the RM's per-process
 * count could not be read, to each GPU of the agent's "gpus" array
 * (gpuinfo_json). */
void memview_gpus_json(struct agent *a, struct cJSON *gpus);
/* o.uncappedMemory: what the core's last reading of the RM counts of
 * each process (only: that pid; 0 every one) on each GPU whose memory no
 * preempt agent counts. */
void memview_uncapped_json(struct agent *a, struct cJSON *o, pid_t only);
/* The gpuqos_memory_* families, through put (metrics.c's buffer). */
void memview_metrics(struct agent *a, void (*put)(void *ctx, const char *s, size_t n), void *ctx);

#endif

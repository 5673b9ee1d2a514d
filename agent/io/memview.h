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

struct agent;
struct proc;
struct cJSON;

/* o.memory: one object per GPU the process's preempt agent counts on. */
void memview_proc_json(struct agent *a, const struct proc *p, struct cJSON *o);
/* Adds lcReserveBytes (null: none kept) to each GPU of the agent's
 * "gpus" array (gpuinfo_json). */
void memview_gpus_json(struct agent *a, struct cJSON *gpus);
/* The gpuqos_memory_* families, through put (metrics.c's buffer). */
void memview_metrics(struct agent *a, void (*put)(void *ctx, const char *s, size_t n), void *ctx);

#endif

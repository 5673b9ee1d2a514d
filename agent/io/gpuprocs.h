/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuprocs.h - what the RM counts of each process's video memory on each
 * GPU (NV2080_CTRL_CMD_GPU_GET_PIDS and GET_PID_INFO, docs/rm-facts.md
 * "Video memory"), read every GPUPROCS_INTERVAL_MS, so the memory of the
 * processes without a preempt agent that counts it is counted in the LC
 * reserve's arithmetic (core/memory.c) and shown (used, not capped) in
 * gpuqosctl and /metrics (memview.c).
 *
 * Owns: the worker that reads it (one query at a time, off the loop
 * thread; the query itself is common/rmgpus.c) and each GPU's last
 * failure. Each GPU read goes into the core as a fact
 * (memory_gpu_procs); the core keeps the reading. Does not own the GPU
 * list (gpuinfo.c: the device instances it reads), the arithmetic
 * (core/memory.c) or rendering (memview.c). Caps nothing and decides
 * nothing.
 *
 * Threads: the query blocks inside the RM on a workq worker; everything
 * here runs on the loop thread.
 */
#ifndef GPUQOS_AGENT_IO_GPUPROCS_H
#define GPUQOS_AGENT_IO_GPUPROCS_H

#include <stddef.h>
#include <stdint.h>

#include "common/rmgpus.h"

struct agent;
struct loop;

#define GPUPROCS_INTERVAL_MS 3000u   /* between the starts of two readings */
#define GPUPROCS_LATE_MS 10000u      /* a reading this long in the RM is logged */

/* Starts reading on loop through control device dev, for the GPUs of
 * the agent's GPU table, telling a's core each GPU read. -1 only when the
 * worker or the loop watches cannot be set up. */
int gpuprocs_init(struct agent *a, struct loop *loop, const char *dev);
/* The latest reading of device instance gpu (for its error: what it
 * counts, the core's copy), NULL when there is none. */
const struct gpuprocs_gpu *gpuprocs_gpu(uint32_t gpu);
/* Drops the watches; a worker still inside the RM frees its own job. */
void gpuprocs_fini(void);

#endif

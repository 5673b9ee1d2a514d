/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memory.h - video-memory budgets: the policy file's "memory" section
 * (parsed by config.c, its sizes by common/quantity.c), and what each
 * process holds and may hold per GPU (memory.c, part of the core: core.h
 * includes this header).
 *
 * Owns: the budget of each process of a peer
 * that counts memory (GQ_HELLO_F_MEMORY) and the checks on its MEM_USAGE.
 * Does not own: counting or refusing allocations (the preempt agent does,
 * docs/protocol.md "Memory"), sending MEMORY (a hook) or rendering
 * (ctl, metrics).
 */
#ifndef GPUQOS_AGENT_CORE_MEMORY_H
#define GPUQOS_AGENT_CORE_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "abi/gq_proto.h"
#include "common/quantity.h"

/* What the policy file's "memory" section says (docs/policy.md,
 * "Memory"). A budget of GQ_MEM_UNLIMITED is none. */
struct mem_config {
	uint64_t lc_reserve;          /* bytes kept free for LCs per GPU; 0: none */
	uint32_t lc_reserve_percent;  /* ... or this share of the GPU (1..100); 0: bytes */
	uint64_t default_budget[3];   /* by enum qos_class: a pod's budget per GPU */
};

void mem_config_defaults(struct mem_config *m);

/* ---- the core's side (memory.c) ---- */

/* GPUs one process's memory is kept for; reports on more are dropped. */
#define MEM_GPUS_PER_PROC 8u
/* The device instances a budget is kept for (NV0000_CTRL_GPU_MAX_ATTACHED_GPUS). */
#define MEM_GPU_MAX 32u

/* A GPU's video memory as the GPU table read it from the RM
 * (FB_GET_INFO_V2, docs/rm-facts.md "Video memory"): a fact pushed in by
 * the table (memory_gpu_size), never asked for by the core. */
struct mem_gpu_size {
	int listed;     /* the GPU table has this device instance */
	uint64_t total; /* its heap in bytes; 0: not known (the query failed) */
	int said;       /* "no LC reserve there" was logged since it became unknown */
};

/* What the RM counts of each process on a GPU (GET_PIDS, GET_PID_INFO,
 * docs/rm-facts.md "Video memory"), as the GPU-process reader last read
 * it: a fact pushed in (memory_gpu_procs), never asked for by the core. */
#define MEM_RM_PROCS_MAX 64u /* processes kept per GPU of one reading */

struct mem_rm_proc {
	uint32_t pid;  /* as the RM gives it (the agent's pid namespace) */
	uint64_t used; /* what its clients own there, bytes */
};

/* A GPU's memory held besides the BEs' own: the RM's last reading of its
 * processes, and what the last plan (memory_plan) counted there, which the
 * faces render. */
struct mem_gpu_held {
	int read; /* a reading of this GPU came (and it stays listed) */
	unsigned n;
	struct mem_rm_proc procs[MEM_RM_PROCS_MAX];
	int bad_said;      /* a refused reading was logged since the last good one */
	uint64_t lc_used;  /* what the LCs' preempt agents report */
	uint64_t uncapped; /* the reading's processes no preempt agent counts */
	uint64_t be_part;  /* what the BEs may hold together; GQ_MEM_UNLIMITED: no reserve kept */
};

/* One process's memory on one GPU: its preempt agent's last MEM_USAGE on
 * this connection, the budget the last plan gave it and what was sent. */
struct mem_gpu {
	uint32_t gpu; /* device instance, as in TSG */
	int reported; /* a MEM_USAGE on this connection */
	uint64_t used, peak, enforced, refused, refused_bytes, unknown;
	uint64_t limit;     /* the plan's budget; GQ_MEM_UNLIMITED: none */
	uint64_t pod_limit; /* its pod's own budget (annotation or class default) */
	uint64_t total;     /* what its FB info is to report (0: the RM's own) */
	int sent;           /* a MEMORY went on this connection */
	uint64_t sent_limit, sent_total;
};

struct proc_mem {
	unsigned n;
	struct mem_gpu g[MEM_GPUS_PER_PROC];
	int refusal_said; /* its first refusal was logged (and its pod told) */
	/* A MEMORY went on this connection: its preempt agent reports only
	 * after one (docs/protocol.md, "Memory"). */
	int greeted;
};

#endif

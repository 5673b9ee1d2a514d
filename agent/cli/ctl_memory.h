/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_memory.h - a process's "memory" member of the ctl answers
 * (docs/ctl.md): checked whole, then shown by `gpuqosctl show`.
 */
#ifndef GPUQOS_CLI_CTL_MEMORY_H
#define GPUQOS_CLI_CTL_MEMORY_H

#include <stdio.h>

#include "agent/cli/cli_table.h"
#include "agent/cli/ctl_json.h"

#define MEMV_GPUS 8

struct memv_gpu {
	long long gpu, used, limit, pod_limit, pod_used, refused, refused_bytes, unknown;
	int has_limit, has_pod_limit, reported;
};

struct memv {
	int n;
	struct memv_gpu g[MEMV_GPUS];
};

/* o.memory (absent in agents before 2026-12-07): 0, or -1 recorded in e. */
int memv_parse(struct jerr *e, const cJSON *o, const char *where, struct memv *v);
/* One "memory" line per GPU. */
void memv_show(FILE *out, const struct memv *v,
	       void (*detail)(FILE *out, const char *name, const char *value));

/* ans.uncappedMemory (absent in agents before 2026-12-08), a row per
 * process and GPU whose memory no preempt agent counts: 0 (t has at
 * least its header), or -1 recorded in e (t freed). */
int memv_uncapped_table(struct jerr *e, const cJSON *ans, struct table *t);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * health.h - GPU health from NVML, when libnvidia-ml.so.1 can be dlopen'ed
 * (never a build dependency). A GPU NVML calls lost (GPU_IS_LOST,
 * RESET_REQUIRED) is Unhealthy until it answers NVML again; all GPUs are
 * when NVML cannot tell which is lost. A critical XID marks its GPU
 * unhealthy for good (a GPU that threw one needs a drain and a reset, not
 * a retry); the XIDs an application or a timeslice can cause are ignored:
 * 13 (graphics engine exception), 31 (MMU fault), 43 (channel stopped),
 * 45 (preemptive cleanup), 68 (video decoder exception) and 109 (context
 * switch timeout, what a bad timeslice can provoke).
 *
 * Owns: the NVML library handle, its event set and the thread that waits
 * on it. Does not own the table (writes struct pshared under its lock).
 */
#ifndef GPUQOS_PLUGIN_HEALTH_H
#define GPUQOS_PLUGIN_HEALTH_H

#include "plugin/server.h"

/* 1 when XID x says nothing about the GPU's health. */
int phealth_xid_ignored(unsigned long long xid);

struct phealth;

/* NULL when NVML is not there or not usable (logged; devices stay
 * healthy). */
struct phealth *phealth_start(const char *lib, struct pshared *sh);
void phealth_stop(struct phealth *h);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuinfo.h - which GPU each RM device instance is: its UUID (the
 * "GPU-..." nvidia-smi shows) and PCI bus id, so the node agent can say
 * per TSG which physical GPU it runs on. A TSG hangs under a device whose
 * NV0080_ALLOC_PARAMETERS.deviceId is the device instance this table is
 * keyed by.
 *
 * Owns: the agent's copy of the table (the query itself is
 * common/rmgpus.c, shared with the device plugin) and running that query
 * off the event loop. Does not own the TSG table, the ctl protocol or
 * deciding anything per GPU (policy.c groups by device instance and needs
 * no UUID).
 *
 * Threads: RM controls can block for minutes (docs/rm-facts.md), so the query
 * runs on a short-lived worker thread; everything else here runs on the
 * loop thread. gpuinfo_query() is the synchronous query, for the worker
 * and for tools (common/rmgpus.h).
 */
#ifndef GPUQOS_AGENT_GPUINFO_H
#define GPUQOS_AGENT_GPUINFO_H

#include <stddef.h>
#include <stdint.h>

#include "common/rmgpus.h"

struct agent;
struct loop;
struct cJSON;

#define GPUINFO_QUERY_TIMEOUT_MS 2000u  /* a query longer than this is given up on */
#define GPUINFO_RETRY_MS 30000u         /* after a failure or a query given up on */
#define GPUINFO_UNKNOWN_MIN_MS 10000u   /* re-queries for unknown device instances */

/* A JSON array, one object per GPU: deviceInstance, subDeviceInstance,
 * gpuId (hex string), uuid, pciBusId and memoryBytes (null when unknown;
 * memoryError then says why). NULL if out of memory. */
struct cJSON *gpuinfo_table_json(const struct gpuinfo_table *t);

/* ---- the agent's table (loop thread only) ---- */

/* Starts the first query and waits for it at most GPUINFO_QUERY_TIMEOUT_MS
 * (the one bounded wait, before the loop serves); if it has not answered
 * by then its answer is taken from the loop when it comes. Each complete
 * table tells a's core every GPU's video-memory size (memory_gpu_size).
 * -1 only when the loop watches cannot be set up. */
int gpuinfo_init(struct agent *a, struct loop *loop, const char *dev);
/* Query again (SIGHUP); while one runs, once more after it. */
void gpuinfo_refresh(const char *why);
/* A TSG names this device instance: query again if it is not in the
 * table, at most every GPUINFO_UNKNOWN_MIN_MS. */
void gpuinfo_note_device(uint32_t device_instance);
/* The device instances of the table, at most max of them: how many. */
size_t gpuinfo_instances(uint32_t *out, size_t max);
/* The UUID of a device instance, NULL if unknown. */
const char *gpuinfo_uuid(uint32_t device_instance);
/* Taken a new table this many times: a face that shows UUIDs renders again. */
unsigned gpuinfo_generation(void);
/* gpuinfo_table_json of the agent's table. */
struct cJSON *gpuinfo_json(void);
/* Why the last query failed, or NULL. */
const char *gpuinfo_error(void);
/* Drops the watches; a worker still inside the RM frees its own job. */
void gpuinfo_fini(void);

#endif

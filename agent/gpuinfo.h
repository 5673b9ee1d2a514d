/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuinfo.h - which GPU each RM device instance is: its UUID (the
 * "GPU-..." nvidia-smi shows) and PCI bus id, so the node agent can say
 * per TSG which physical GPU it runs on. A TSG hangs under a device whose
 * NV0080_ALLOC_PARAMETERS.deviceId is the device instance this table is
 * keyed by.
 *
 * Owns: the agent's own short-lived RM client on the control device and
 * the controls it issues there (GET_ATTACHED_IDS, GET_ID_INFO_V2,
 * GET_UUID_FROM_GPU_ID, GET_PCI_INFO; docs/gpuinfo.md), the table they
 * produce, and running that query off the event loop. Does not own the
 * TSG table, the ctl protocol or deciding anything per GPU (policy.c
 * groups by device instance and needs no UUID).
 *
 * Threads: RM controls can block for minutes (DESIGN.md), so the query
 * runs on a short-lived worker thread; everything else here runs on the
 * loop thread. gpuinfo_query() is the synchronous query, for the worker
 * and for tools.
 */
#ifndef GPUQOS_AGENT_GPUINFO_H
#define GPUQOS_AGENT_GPUINFO_H

#include <stddef.h>
#include <stdint.h>

#include "abi/rm_abi.h"

struct loop;
struct cJSON;

#define GPUINFO_PCI_MAX 24u             /* "00000000:00:00.0" and a NUL, with room */
#define GPUINFO_QUERY_TIMEOUT_MS 2000u  /* a query longer than this is given up on */
#define GPUINFO_RETRY_MS 30000u         /* after a failure or a query given up on */
#define GPUINFO_UNKNOWN_MIN_MS 10000u   /* re-queries for unknown device instances */

struct gpuinfo_gpu {
	uint32_t gpu_id; /* the RM's platform id of the GPU */
	uint32_t device_instance, subdevice_instance;
	char uuid[RM_GPU_UUID_STR_LEN]; /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" or "" */
	char pci_bus_id[GPUINFO_PCI_MAX]; /* "dddddddd:bb:ss.0" or "" */
	uint32_t status; /* RM status of the first control that failed for it, 0 */
};

struct gpuinfo_table {
	size_t n;
	struct gpuinfo_gpu gpus[RM_GPU_MAX_ATTACHED];
	int listed;      /* GET_ATTACHED_IDS answered: the list is complete */
	char error[256]; /* the first failure in words, "" if none */
};

/* ---- pure helpers (no I/O) ---- */

/* The valid gpuIds of a GET_ATTACHED_IDS answer (contiguous, up to the
 * first RM_GPU_INVALID_ID); returns how many were copied to ids. */
size_t gpuinfo_parse_attached(const struct rm_gpu_attached_ids *p, uint32_t *ids, size_t max);
/* The 16 binary bytes as "GPU-8-4-4-4-12", lower case like the RM. */
void gpuinfo_format_uuid(const uint8_t bin[RM_GPU_UUID_LEN], char out[RM_GPU_UUID_STR_LEN]);
/* A GET_UUID_FROM_GPU_ID answer made with flags: the ASCII form checked
 * to be a canonical GPU UUID, or the binary form formatted. 0, or -1 if
 * the answer is not a UUID (out is then ""). */
int gpuinfo_parse_uuid(const struct rm_gpu_uuid_from_id *p, uint32_t flags,
		       char out[RM_GPU_UUID_STR_LEN]);
/* "dddddddd:bb:ss.0", nvidia-smi's spelling (the RM reports no function). */
void gpuinfo_format_pci(const struct rm_gpu_pci_info *p, char *out, size_t len);
/* rm_status_name, knowing also the statuses only these controls return. */
const char *gpuinfo_status_name(uint32_t status);
const struct gpuinfo_gpu *gpuinfo_table_find(const struct gpuinfo_table *t,
					     uint32_t device_instance);
/* A JSON array, one object per GPU: deviceInstance, subDeviceInstance,
 * gpuId (hex string), uuid and pciBusId (null when unknown). NULL if out
 * of memory. */
struct cJSON *gpuinfo_table_json(const struct gpuinfo_table *t);

/* ---- the query itself: blocks inside the RM ---- */

/* Opens dev, allocates a client, asks, frees the client, closes. Returns
 * 0 when the list was read (single GPUs may still lack a UUID: their
 * status says why), -1 when nothing could be read; t->error says what
 * failed, naming the object and the errno or RM status in words. */
int gpuinfo_query(const char *dev, struct gpuinfo_table *t);

/* ---- the agent's table (loop thread only) ---- */

/* Starts the first query and waits for it at most GPUINFO_QUERY_TIMEOUT_MS
 * (the one bounded wait, before the loop serves); if it has not answered
 * by then its answer is taken from the loop when it comes. -1 only when
 * the loop watches cannot be set up. */
int gpuinfo_init(struct loop *loop, const char *dev);
/* Query again (SIGHUP); while one runs, once more after it. */
void gpuinfo_refresh(const char *why);
/* A TSG names this device instance: query again if it is not in the
 * table, at most every GPUINFO_UNKNOWN_MIN_MS. */
void gpuinfo_note_device(uint32_t device_instance);
/* The UUID of a device instance, NULL if unknown. */
const char *gpuinfo_uuid(uint32_t device_instance);
/* gpuinfo_table_json of the agent's table. */
struct cJSON *gpuinfo_json(void);
/* Why the last query failed, or NULL. */
const char *gpuinfo_error(void);
/* Drops the watches; a worker still inside the RM frees its own job. */
void gpuinfo_fini(void);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rmgpus.h - the GPUs the NVIDIA RM lists on this node: for each, the RM's
 * gpuId, the device instance a TSG's device names, the UUID (the "GPU-..."
 * nvidia-smi shows), the PCI bus id and the size of its video memory,
 * read by a short-lived RM client of our own (GET_ATTACHED_IDS,
 * GET_ID_INFO_V2, GET_UUID_FROM_GPU_ID, GET_PCI_INFO on the client;
 * FB_GET_INFO_V2 on a subdevice of its own; docs/gpuinfo.md).
 *
 * Shared by the node agent (agent/gpuinfo.c keeps its table) and the device
 * plugin (plugin/ advertises one device per GPU). Owns the query and the
 * parsing of its answers; does not own threads or deadlines: the query
 * blocks inside the RM, and each caller runs it where that cannot stall
 * its loop.
 */
#ifndef GPUQOS_COMMON_RMGPUS_H
#define GPUQOS_COMMON_RMGPUS_H

#include <stddef.h>
#include <stdint.h>

#include "abi/rm_abi.h"

#define GPUINFO_PCI_MAX 24u             /* "00000000:00:00.0" and a NUL, with room */

struct gpuinfo_gpu {
	uint32_t gpu_id; /* the RM's platform id of the GPU */
	uint32_t device_instance, subdevice_instance;
	char uuid[RM_GPU_UUID_STR_LEN]; /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" or "" */
	char pci_bus_id[GPUINFO_PCI_MAX]; /* "dddddddd:bb:ss.0" or "" */
	uint32_t status; /* RM status of the first control that failed for it, 0 */
	/* Its video memory: the RM heap's size (FB_GET_INFO_V2 HEAP_SIZE, in
	 * bytes), 0 when not known; then fb_error says why. */
	uint64_t fb_heap_bytes;
	char fb_error[128];
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

/* ---- the query itself: blocks inside the RM ---- */

/* Opens dev (and, for the size of each GPU's memory, the GPUs' own
 * device nodes beside it: the RM gives a device object only to a process
 * that holds its GPU's node open), allocates a client, asks, frees the
 * client, closes. Returns
 * 0 when the list was read (single GPUs may still lack a UUID: their
 * status says why), -1 when nothing could be read; t->error says what
 * failed, naming the object and the errno or RM status in words. */
#define GPUINFO_Q_MEMORY 0x1u /* also each GPU's video-memory size (fb_heap_bytes) */
int gpuinfo_query(const char *dev, unsigned flags, struct gpuinfo_table *t);

/* ---- the processes on each GPU and their video memory ---- */

/* What one query keeps per GPU: the first ones the RM lists. */
#define GPUPROCS_PER_GPU_MAX 64u

struct gpuprocs_proc {
	uint32_t pid;        /* in the caller's pid namespace, as the RM gives it */
	uint64_t used_bytes; /* memPrivate + memSharedOwned: what its clients own there */
};

struct gpuprocs_gpu {
	uint32_t device_instance;
	int read;        /* the RM answered both controls: procs is its list */
	uint32_t listed; /* pids the RM listed, the caller left out */
	size_t n;        /* kept (at most GPUPROCS_PER_GPU_MAX) */
	struct gpuprocs_proc procs[GPUPROCS_PER_GPU_MAX];
	char error[128]; /* why it was not read, in words; "" if it was */
};

struct gpuprocs_table {
	size_t n;
	struct gpuprocs_gpu gpus[RM_GPU_MAX_ATTACHED];
	char error[256]; /* the control device or client failed: nothing read */
};

/* The pids of a GET_PIDS answer, without 0 and self, at most max: how
 * many were copied to out. *listed: how many it named besides self;
 * -1 (nothing copied) when pidTblCount is past the table. */
long gpuprocs_parse_pids(const struct rm_gpu_get_pids *p, uint32_t self, uint32_t *out,
			 size_t max, uint32_t *listed);

/* For each of the n device instances, the processes with a device on it
 * (NV2080_CTRL_CMD_GPU_GET_PIDS, idType CLASS, id NV20_SUBDEVICE_0) and
 * the video memory each holds there (NV2080_CTRL_CMD_GPU_GET_PID_INFO),
 * on a subdevice of a client of our own, as gpuinfo_query opens it (the
 * GPUs' nodes held open). self (the caller's pid) is left out. 0 when
 * the client could be made (single GPUs may still fail: their error),
 * -1 when nothing could be asked (t->error). Blocks inside the RM. */
int gpuprocs_query(const char *dev, const uint32_t *instances, size_t n, uint32_t self,
		   struct gpuprocs_table *t);

#endif

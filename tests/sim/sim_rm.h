/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_rm.h - the simulated resource manager: open files of nvidiactl, RM
 * clients and the objects under them (devices, subdevices, TSGs, channels,
 * anything else), the TSG scheduling controls, and the JSON state view.
 *
 * Owns: the object model and every RM status it decides, behind one lock.
 * Does not own: ioctl decoding, copying from and to the caller's memory,
 * capabilities, injected latency (gpuqos_sim.c) or the call log (sim_log.c).
 * It does no I/O, so it is unit-tested without FUSE.
 */
#ifndef GPUQOS_SIM_RM_H
#define GPUQOS_SIM_RM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "abi/rm_abi.h"
#include "sim_buf.h"

/* Statuses the real RM uses that rm_abi.h does not need for gpuqos. */
#define SIM_ERR_INVALID_ADDRESS 0x1eu /* os_memcpy_from_user failed */

/* Largest nested parameter block the RM copies in (RMAPI_PARAM_COPY_MAX_PARAMS_SIZE). */
#define SIM_PARAM_COPY_MAX (1024u * 1024u)

/* Generated object handles (hObjectNew 0 for a non-client class) start
 * here within each client, like the real RM's unique-handle range. */
#define SIM_OBJECT_HANDLE_BASE 0xcaf00000u

struct sim_rm;

/* Who is calling: the open file description and the calling task's
 * privilege (CAP_SYS_NICE or CAP_SYS_ADMIN effective). */
struct sim_call {
	uint64_t fh;
	int privileged;
	uint64_t t_us; /* when the model runs the call, on the log's clock */
};

/* What the control layer was told to do instead of the real thing. */
struct sim_ctrl_inject {
	int unsupported;   /* answer NV_ERR_NOT_SUPPORTED */
	int fail;          /* answer fail_status once the object is valid (NV_OK: a drop) */
	rm_u32 fail_status;
};

/* Each simulated GPU's video memory unless --fb-mib says otherwise: an
 * H100's 80 GiB. */
#define SIM_FB_TOTAL_DEFAULT (80ull << 30)

struct sim_rm *sim_rm_new(unsigned gpus);
/* Every GPU's video memory, in bytes (allocations already held stay). */
void sim_rm_set_fb_total(struct sim_rm *rm, rm_u64 bytes);
void sim_rm_destroy(struct sim_rm *rm);

/* The client handles this RM generates: upward from lo, wrapping below hi
 * (by default the real RM's 0xc1d00000 .. 0xc1dfffff). One RM per machine
 * makes client handles unique on the machine, which the eBPF tracker
 * relies on; several simulators at once (parallel tests) each take a
 * range of their own (gpuqos_sim.c) to keep that true. */
void sim_rm_set_client_range(struct sim_rm *rm, rm_handle lo, rm_handle hi);

/* Open files: an id per open file description; release frees every client
 * the file allocated, and everything under them. 0 means out of memory. */
uint64_t sim_rm_file_open(struct sim_rm *rm, pid_t opener);
void sim_rm_file_release(struct sim_rm *rm, uint64_t fh);

/* How many bytes of pAllocParms the RM reads for class cls when the caller
 * says paramsSize: the class's own structure for the classes modelled,
 * else the caller's size. */
rm_u32 sim_rm_alloc_params_len(rm_u32 cls, rm_u32 paramsSize);

/* Allocate v->hClass under v->hObjectParent in client v->hRoot. ap holds
 * the allocation parameters read from the caller (aplen bytes, NULL if
 * none). On success fills v->hObjectNew. Returns the RM status. */
rm_u32 sim_rm_alloc(struct sim_rm *rm, const struct sim_call *c, struct rm_alloc_view *v,
		    const void *ap, size_t aplen);

rm_u32 sim_rm_free(struct sim_rm *rm, const struct sim_call *c, const struct rm_free_params *p);

/* Run control cmd on hObject of hClient; params (size bytes) are read and
 * written in place. */
rm_u32 sim_rm_control(struct sim_rm *rm, const struct sim_call *c, rm_handle hClient,
		      rm_handle hObject, rm_u32 cmd, void *params, rm_u32 size,
		      const struct sim_ctrl_inject *inj);

/* Render the whole model as one JSON object; t_us (the log's clock) is
 * the snapshot's time. */
void sim_rm_state_json(struct sim_rm *rm, struct sim_buf *out, uint64_t t_us);

#endif

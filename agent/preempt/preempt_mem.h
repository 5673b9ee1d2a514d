/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_mem.h - the video memory of the process, per GPU: what it holds,
 * the budget the node agent set, and what was refused (docs/protocol.md,
 * "Memory").
 *
 * Owns: the table of live video-memory allocations, the per-GPU counts,
 * the budget decision and the FB-info rewrite. Does not own: locking,
 * ioctl(), reading the application's memory, the connection. Nothing here
 * makes a system call, so it is unit-tested directly; the caller holds its
 * lock around every function that takes a struct pa_mem.
 */
#ifndef GPUQOS_PREEMPT_MEM_H
#define GPUQOS_PREEMPT_MEM_H

#include "abi/gq_proto.h"
#include "abi/rm_abi.h"

/* GPUs one process accounts; a device beyond them is not counted (its
 * allocations pass, counted unknown). */
#define PA_MEM_GPUS 16
/* Live allocations the table holds (slots: a power of two, kept at most
 * three quarters full). Beyond it an allocation passes uncounted. */
#define PA_MEM_SLOTS 16384u
#define PA_MEM_MAX_LIVE (PA_MEM_SLOTS / 4u * 3u)

struct pa_mem_alloc {
	rm_handle h_client, h; /* h 0: a free slot */
	rm_handle h_parent;
	int fd;
	unsigned gpu; /* index into pa_mem.gpu */
	rm_u64 size;
};

struct pa_mem_gpu {
	int used;
	rm_u32 instance;
	rm_u64 used_bytes, peak;
	rm_u64 limit; /* GQ_MEM_UNLIMITED without a budget */
	rm_u32 limit_flags;
	rm_u64 reported_total;
	rm_u64 refused, refused_bytes, unknown;
	int dirty;         /* counts changed since the last report */
	int urgent;        /* the first refusal under this budget: report at once */
	int refused_under; /* a refusal already happened under this budget */
	rm_u64 sent_ns;    /* the last report */
};

struct pa_mem {
	struct pa_mem_gpu gpu[PA_MEM_GPUS];
	struct pa_mem_alloc *tab; /* PA_MEM_SLOTS, allocated on first use */
	unsigned live;
	int any_limit;             /* some GPU has a budget: check before calls */
	unsigned long unknown_gpu; /* allocations on a device beyond PA_MEM_GPUS */
};

void pa_mem_init(struct pa_mem *m);
/* Frees the table (a forked child starts again from nothing). */
void pa_mem_reset(struct pa_mem *m);

/* Whether an allocation of `size` bytes on device `instance` must be
 * refused: it would take the process past that GPU's budget. A refusal is
 * counted (and makes a report due). */
int pa_mem_refuse(struct pa_mem *m, rm_u32 instance, rm_u64 size);

/* A video-memory allocation succeeded: h under h_client, parent h_parent,
 * issued on fd, `size` bytes on device `instance` (GQ_UNKNOWN: the device
 * was not seen, so it is counted unknown). */
void pa_mem_added(struct pa_mem *m, int fd, rm_handle h_client, rm_handle h_parent, rm_handle h,
		  rm_u32 instance, rm_u64 size);
/* An allocation passed without being counted (parameters unreadable). */
void pa_mem_unknown(struct pa_mem *m, rm_u32 instance);

/* RM_FREE of h under h_client succeeded: the allocation h, or, when h is
 * the client itself or an object that parents allocations (a device),
 * every allocation under it. */
void pa_mem_freed(struct pa_mem *m, rm_handle h_client, rm_handle h);
/* fd is being closed: its allocations go with its clients. */
void pa_mem_close_fd(struct pa_mem *m, int fd);

/* A MEMORY from the node agent (validated by gq_msg_check). Returns 0, or
 * -1 if it is not one to apply (reserved flags, no room for the device). */
int pa_mem_set_limit(struct pa_mem *m, const struct gq_memory *msg);

/* Rewrite an FB_GET_INFO_V2 answer of device `instance` in place when its
 * budget asks (GQ_MEMORY_F_REPORT); `n` is fbInfoListSize as the RM
 * answered, capped by the caller to the entries present. Returns how many
 * entries changed. */
unsigned pa_mem_fb_rewrite(struct pa_mem *m, rm_u32 instance, struct rm_fb_info *list,
			   rm_u32 n);

/* The next report due at now_ns (a GPU whose counts changed, its last
 * report at least GQ_MEM_USAGE_PERIOD_MS ago, or a first refusal): fills
 * out's body (not its header) and returns 1, else 0. *next_ms gets the
 * wait until one is due (-1: none pending, 0: ask again now). */
int pa_mem_take_report(struct pa_mem *m, rm_u64 now_ns, struct gq_mem_usage *out, int *next_ms);
/* Every GPU seen is to be reported at once (a new connection). */
void pa_mem_mark_all(struct pa_mem *m);

#endif /* GPUQOS_PREEMPT_MEM_H */

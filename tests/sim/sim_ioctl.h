/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_ioctl.h - the nvidiactl ioctl path of gpuqos-sim: escape decoding,
 * the XFER wrapper, nested parameter blocks in the caller's memory, who the
 * caller is, injected latency, and one log record per call.
 *
 * Owns: everything between the FUSE ioctl request and the RM model. Does
 * not own: RM objects and statuses (sim_rm.c), the files of the mount
 * (gpuqos_sim.c).
 */
#ifndef GPUQOS_SIM_IOCTL_H
#define GPUQOS_SIM_IOCTL_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdint.h>
#include <sys/types.h>

#include "sim_inject.h"
#include "sim_log.h"
#include "sim_rm.h"

/* Largest block the XFER wrapper may name (NV_ABSOLUTE_MAX_IOCTL_SIZE). */
#define SIM_XFER_MAX 16384u

struct sim_ctx {
	struct sim_rm *rm;
	struct sim_inject *inj;
	struct sim_log *log;
	struct fuse_session *se;
	uint64_t start_us; /* CLOCK_MONOTONIC at start */
};

uint64_t sim_mono_us(void);

/* The thread group of task tid and whether it holds CAP_SYS_NICE or
 * CAP_SYS_ADMIN in its effective set. Returns 0, or -errno (then *tgid is
 * tid and the task counts as unprivileged). */
int sim_task_info(pid_t tid, pid_t *tgid, int *privileged);

/* Answer one ioctl on the nvidiactl file fh (replies to req). */
void sim_ioctl_handle(struct sim_ctx *ctx, fuse_req_t req, uint64_t fh, unsigned int cmd,
		      const void *in_buf, size_t in_bufsz, size_t out_bufsz);

#endif

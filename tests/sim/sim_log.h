/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_log.h - the call log: one record per ioctl the simulator answered,
 * rendered as JSON lines for the `log` file.
 *
 * Owns: a bounded ring of records and their sequence numbers. Does not own:
 * deciding what a call means (gpuqos_sim.c fills the records).
 */
#ifndef GPUQOS_SIM_LOG_H
#define GPUQOS_SIM_LOG_H

#include <stdint.h>
#include <sys/types.h>

#include "sim_buf.h"

#define SIM_LOG_MAX_PARAMS 7

struct sim_log_rec {
	uint64_t seq;   /* set by sim_log_add */
	uint64_t t_us;  /* start, microseconds since the simulator started */
	uint64_t dur_us;
	pid_t pid, tid;
	uint64_t fh;
	uint32_t request;   /* the ioctl request value */
	const char *kind;   /* "alloc", "control", "free", "other" */
	const char *form;   /* "nvos64", "nvos21", "nvos54", "nvos00", "" */
	int xfer;           /* came through the XFER wrapper */
	int err;            /* errno the ioctl returned (0 = it returned 0) */
	int has_status;
	uint32_t status;
	uint32_t client, parent, object, cls, cmd;
	int nparams;
	const char *pname[SIM_LOG_MAX_PARAMS];
	uint64_t pval[SIM_LOG_MAX_PARAMS];
};

struct sim_log;

struct sim_log *sim_log_new(unsigned capacity);
void sim_log_destroy(struct sim_log *log);
void sim_log_add(struct sim_log *log, struct sim_log_rec *rec);
void sim_log_reset(struct sim_log *log);
void sim_log_json(struct sim_log *log, struct sim_buf *out);

#endif

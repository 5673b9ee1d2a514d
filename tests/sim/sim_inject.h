/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_inject.h - what tests ask the simulator to do differently: extra
 * latency and forced statuses per control command, commands answered as
 * unsupported. Parsed from the text written to the `control` file.
 *
 * Owns: the injection table and the control-file grammar. Does not own:
 * sleeping or the log (gpuqos_sim.c acts on what lookups return).
 */
#ifndef GPUQOS_SIM_INJECT_H
#define GPUQOS_SIM_INJECT_H

#include <stddef.h>
#include <stdint.h>

#include "sim_rm.h"

struct sim_inject;

struct sim_inject *sim_inject_new(void);
void sim_inject_destroy(struct sim_inject *inj);

/* Apply the commands in text (one per line). All lines are checked before
 * any is applied: returns 0, or -EINVAL and changes nothing. Sets
 * *reset_log when a reset-log command was among them. */
int sim_inject_apply(struct sim_inject *inj, const char *text, size_t len, int *reset_log);

/* For control cmd: the latency to add (us) and what to answer instead.
 * Consumes one use of a counted failure. */
void sim_inject_lookup(struct sim_inject *inj, rm_u32 cmd, uint64_t *latency_us,
		       struct sim_ctrl_inject *out);

/* Render the table as JSON (for the state view). */
void sim_inject_json(struct sim_inject *inj, struct sim_buf *b);

#endif

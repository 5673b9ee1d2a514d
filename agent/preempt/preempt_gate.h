/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_gate.h - gating TSGs of this process for a lease (preempt_gate.c).
 * Called from the library's own thread only.
 */
#ifndef GPUQOS_PREEMPT_GATE_H
#define GPUQOS_PREEMPT_GATE_H

#include "abi/gq_proto.h"

/* Execute a validated GATE or UNGATE. Returns the RESULT's err (0, an
 * errno, GQ_ERR_UNKNOWN_TSG or GQ_ERR_NOT_GATEABLE) and fills the RM
 * status of the channel control and the time spent in ioctl(). A GATE of
 * a gated TSG only renews its lease; an UNGATE of an ungated one does
 * nothing. */
rm_u32 pa_gate_command(const struct gq_command *c, rm_u32 *status, rm_u64 *elapsed_ns);

/* Enable the TSGs whose lease lapsed. Returns how many ms until the next
 * lease ends (the poll timeout), or -1 when nothing is gated. */
int pa_gate_expire(void);

/* The node agent is gone: enable every gated TSG now. */
void pa_gate_release_all(void);

#endif /* GPUQOS_PREEMPT_GATE_H */

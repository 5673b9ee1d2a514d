/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_gate.h - gating TSGs of this process for a lease (preempt_gate.c).
 * Called from the library's own thread, and pa_gate_window from the
 * window thread.
 */
#ifndef GPUQOS_PREEMPT_GATE_H
#define GPUQOS_PREEMPT_GATE_H

#include "abi/gq_proto.h"

/* Execute a validated GATE or UNGATE. Returns the RESULT's err (0, an
 * errno, GQ_ERR_UNKNOWN_TSG or GQ_ERR_NOT_GATEABLE) and fills the RM
 * status of the channel control and the time spent in ioctl(). A GATE of
 * a gated TSG only renews its lease; an UNGATE of an enabled one only
 * sets or ends its lease. */
rm_u32 pa_gate_command(const struct gq_command *c, rm_u32 *status, rm_u64 *elapsed_ns);

/* End the rotations whose lease lapsed, and after the restore grace
 * without a node agent put every timeslice back. Returns how many ms
 * until the next of these is due (a poll timeout), or -1 for none. */
int pa_gate_expire(void);
/* The page through which the node agent renews this connection's leases
 * (docs/protocol.md, "Lease page"), NULL when there is none (any more). */
void pa_gate_lease_word(const struct gq_lease_word *w);

/* The connection to the node agent ended: every rotation ends now (its
 * TSGs enabled, their timeslices put back); the restore grace starts. */
void pa_gate_conn_down(void);

/* Connected (again): no restore is due. Also in a forked child. */
void pa_gate_conn_up(void);

/* For a window (preempt_window.c, its thread): off, disable and preempt
 * every gateable GR TSG of GPU dev that no gate or window holds; on (off
 * 0), enable every TSG a window holds that no gate holds, and end the
 * window's hold of the others. Returns how many TSGs changed; elapsed_ns
 * grows by the time spent in ioctl(). */
unsigned pa_gate_window(rm_u32 dev, int off, rm_u64 *elapsed_ns);

/* TSGs a window holds now. */
unsigned pa_gate_windowed(void);

/* In a forked child. */
void pa_gate_child_reset(void);

#endif /* GPUQOS_PREEMPT_GATE_H */

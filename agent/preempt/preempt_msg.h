/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_msg.h - the preempt agent's side of the gq_proto messages: filling
 * the messages it sends, and checking the ones it receives.
 *
 * Owns: message layouts as the preempt agent fills them, GATE/UNGATE and
 * WINDOW validation and the deadline rule (which RM control the other
 * COMMANDs become: abi/rm_plan.h, shared with the node agent's direct
 * path). Does not own: sockets, ioctl(), tables (it takes a copy of a
 * TSG). Pure functions, unit-tested directly.
 */
#ifndef GPUQOS_PREEMPT_MSG_H
#define GPUQOS_PREEMPT_MSG_H

#include "abi/gq_proto.h"
#include "abi/rm_abi.h"
#include "preempt_track.h"
#include "preempt_wake.h"

void pa_msg_hello(struct gq_hello *m, rm_u32 seq, rm_u32 pid, rm_u32 flags, rm_u32 ntsg,
		  const char *comm);
void pa_msg_tsg(struct gq_tsg *m, rm_u32 seq, const struct pa_tsg *g);
void pa_msg_tsg_gone(struct gq_tsg_gone *m, rm_u32 seq, const struct pa_tsg *g);
void pa_msg_synced(struct gq_synced *m, rm_u32 seq, rm_u32 ntsg);
void pa_msg_activity(struct gq_activity *m, rm_u32 seq, rm_u64 launches, rm_u64 bursts,
		     rm_u64 active_ns, rm_u64 at_ns);
void pa_msg_wake(struct gq_wake *m, rm_u32 seq, const struct pa_wake_counts *c);
/* PHASE from c; with span, c's span where it has one under the period.
 * Returns 0, or -1 where c holds no phase the node agent can use (no
 * period in range, no latest start, or one more than GQ_PHASE_STALE_NS
 * before at_ns: the wakes were off meanwhile, and the predictor saw no
 * starts): nothing to send. */
int pa_msg_phase(struct gq_phase *m, rm_u32 seq, const struct pa_wake_counts *c, int span);

/* Validate a GATE (lease 1..GQ_GATE_LEASE_MAX_MS) or UNGATE (lease
 * 0..GQ_GATE_LEASE_MAX_MS).
 * Returns 0 or GQ_ERR_BAD_OP. The other ops become one TSG control each
 * (rm_plan_of, abi/rm_plan.h), which refuses these two: they are not one
 * TSG control (preempt_gate.c). */
rm_u32 pa_gate_check(const struct gq_command *c);

/* Whether a command received at received_ns may no longer start at now_ns.
 * A budget of 0 has always passed: a command must carry a real deadline. */
int pa_deadline_passed(rm_u64 received_ns, rm_u64 now_ns, rm_u32 deadline_us);

/* Why a WINDOW with GQ_WINDOW_F_ON cannot be run, received at now_ns on
 * the library's clock, or NULL (docs/protocol.md, "Windows"). */
const char *pa_window_bad(const struct gq_window *w, rm_u64 now_ns);

/* The first start (start_ns + k * period_ns, any whole k) after now_ns. */
rm_u64 pa_window_next_start(rm_u64 now_ns, rm_u64 start_ns, rm_u64 period_ns);

void pa_msg_result(struct gq_result *m, const struct gq_command *c, rm_u32 rm_status, rm_u32 err,
		   rm_u64 value, rm_u64 elapsed_ns);

#endif /* GPUQOS_PREEMPT_MSG_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rm_plan.h - the one RM control a COMMAND's op becomes (docs/protocol.md,
 * "Messages"): which TSG control, its parameter block filled from the op's
 * arg, and the value the RESULT carries once RM answered.
 *
 * Owns: the op -> control mapping and the ranges of each op's arg. Both
 * paths that issue a COMMAND use it, so they issue the very same control:
 * the preempt library on the process's own fd (preempt_conn.c) and the
 * node agent's direct path on a pidfd_getfd duplicate (agent/io/direct.c).
 * Does not own: issuing the ioctl, or GATE/UNGATE, which are not one TSG
 * control (a DISABLE_CHANNELS on the TSG's subdevice, then a PREEMPT of
 * the TSG: preempt_gate.c); both are refused here.
 *
 * Like rm_abi.h it includes nothing of libc (memset is the compiler's
 * builtin), so the preempt library, the agent and the tests share it as
 * is.
 */
#ifndef GPUQOS_RM_PLAN_H
#define GPUQOS_RM_PLAN_H

#include "gq_proto.h"
#include "rm_abi.h"

struct rm_plan {
	rm_u32 cmd;         /* RM_CTRL_TSG_*, issued on the TSG's handle */
	rm_u32 params_size; /* rm_tsg_ctrl_params_size(cmd) */
	union {
		struct rm_tsg_timeslice timeslice; /* SET_ and GET_TIMESLICE */
		struct rm_tsg_preempt preempt;
		struct rm_tsg_interleave interleave;
	} params;
};

/* The control for op with arg, into *out (zeroed first: RM reads every
 * byte of the block). Returns 0, or GQ_ERR_BAD_OP (an op that is not one
 * TSG control, or an arg out of its range): nothing to issue. */
static inline rm_u32 rm_plan_of(rm_u32 op, rm_u64 arg, struct rm_plan *out)
{
	__builtin_memset(out, 0, sizeof(*out));
	switch (op) {
	case GQ_OP_SET_TIMESLICE:
		/* Reported back as a u32 with GQ_UNKNOWN reserved. */
		if (arg >= GQ_UNKNOWN)
			return GQ_ERR_BAD_OP;
		out->cmd = RM_CTRL_TSG_SET_TIMESLICE;
		out->params.timeslice.timesliceUs = arg;
		break;
	case GQ_OP_GET_TIMESLICE:
		out->cmd = RM_CTRL_TSG_GET_TIMESLICE;
		break;
	case GQ_OP_SET_INTERLEAVE:
		if (arg > RM_INTERLEAVE_HIGH)
			return GQ_ERR_BAD_OP;
		out->cmd = RM_CTRL_TSG_SET_INTERLEAVE;
		out->params.interleave.tsgInterleaveLevel = (rm_u32)arg;
		break;
	case GQ_OP_PREEMPT:
		/* Bit 0: wait for the TSG to leave the engine. */
		if (arg & ~(rm_u64)1)
			return GQ_ERR_BAD_OP;
		out->cmd = RM_CTRL_TSG_PREEMPT;
		out->params.preempt.bWait = (rm_u8)(arg & 1);
		break;
	default:
		return GQ_ERR_BAD_OP;
	}
	out->params_size = rm_tsg_ctrl_params_size(out->cmd);
	return 0;
}

/* The value a RESULT carries once the planned control ran: the timeslice
 * RM wrote back for GET_TIMESLICE, the op's arg otherwise. */
static inline rm_u64 rm_plan_value(rm_u32 op, rm_u64 arg, const struct rm_plan *p)
{
	if (op == GQ_OP_GET_TIMESLICE)
		return p->params.timeslice.timesliceUs;
	return arg;
}

#endif /* GPUQOS_RM_PLAN_H */

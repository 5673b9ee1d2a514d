/* SPDX-License-Identifier: Apache-2.0 */
/*
 * path.c - the choice of control path per action (path.h). Pure: no I/O,
 * no state; the reconciler and ctl.c feed it the facts. Does not own the
 * facts nor issuing anything.
 */
#include "agent/core/path.h"

#include "abi/gq_proto.h"

const char *path_name(enum path p)
{
	switch (p) {
	case PATH_IN_PROCESS:
		return "in-process";
	case PATH_DIRECT:
		return "direct";
	case PATH_NONE:
		break;
	}
	return "none";
}

enum path_action op_action(uint32_t op)
{
	switch (op) {
	case GQ_OP_SET_INTERLEAVE:
		return ACTION_INTERLEAVE;
	case GQ_OP_PREEMPT:
		return ACTION_PREEMPT;
	default:
		return ACTION_TIMESLICE;
	}
}

static const char agent_stalled[] =
	"the preempt agent's control path is stalled (a control missed its deadline)";
static const char direct_stalled[] =
	"direct path stalled (too many controls lost past their deadline)";

/* NULL when the preempt agent can carry it, else why not. */
static const char *agent_why(const struct path_in *in)
{
	if (!in->peer)
		return "no connected preempt agent";
	if (in->peer_stalled)
		return agent_stalled;
	return NULL;
}

/* NULL when the direct path can carry it, else why not. The capability
 * comes first: it is what an operator must change. */
static const char *direct_why(const struct path_in *in)
{
	if (!in->direct_caps)
		return "direct path needs CAP_SYS_PTRACE";
	if (in->action == ACTION_INTERLEAVE && !in->interleave_caps)
		return "SET_INTERLEAVE through the direct path needs CAP_SYS_NICE in the node agent";
	if (!in->direct_running)
		return "direct path not running";
	if (!in->fd_known)
		return "direct path: the control-device fd of the TSG's client is unknown";
	if (in->direct_stalled)
		return direct_stalled;
	return NULL;
}

static struct path_choice none(const char *why, int stalled)
{
	return (struct path_choice){ .path = PATH_NONE, .stalled = stalled, .why = why };
}

static struct path_choice use(enum path p)
{
	return (struct path_choice){ .path = p, .stalled = 0, .why = NULL };
}

struct path_choice path_select(const struct path_in *in)
{
	const char *aw = agent_why(in), *dw = direct_why(in);

	switch (in->mode) {
	case PATH_MODE_IN_PROCESS:
		return aw ? none(aw, aw == agent_stalled) : use(PATH_IN_PROCESS);
	case PATH_MODE_DIRECT:
		return dw ? none(dw, dw == direct_stalled) : use(PATH_DIRECT);
	case PATH_MODE_AUTO:
		break;
	}
	if (in->action == ACTION_INTERLEAVE && !dw)
		return use(PATH_DIRECT);
	if (!aw)
		return use(PATH_IN_PROCESS);
	if (!dw)
		return use(PATH_DIRECT);
	/* Neither: a stalled agent says more than a missing alternative. */
	if (aw == agent_stalled)
		return none(aw, 1);
	return none(dw, dw == direct_stalled);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd.c - RM controls in flight on either path (a COMMAND to a preempt
 * agent, or a job of the direct path): ids, absolute deadlines, matching
 * results, recording outcomes on the TSG (backoff on failure, the path
 * used) and what a missed deadline means: a stalled peer, or a direct
 * worker counted lost. Does not own deciding which commands to send or on
 * which path (reconcile.c, ctl.c, path.c), nor the paths (peer.c,
 * direct.c).
 */
#include "agent/core/core.h"
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gq_op_name(uint32_t op)
{
	switch (op) {
	case GQ_OP_SET_TIMESLICE:
		return "SET_TIMESLICE";
	case GQ_OP_GET_TIMESLICE:
		return "GET_TIMESLICE";
	case GQ_OP_SET_INTERLEAVE:
		return "SET_INTERLEAVE";
	case GQ_OP_PREEMPT:
		return "PREEMPT";
	case GQ_OP_GATE:
		return "GATE";
	case GQ_OP_UNGATE:
		return "UNGATE";
	}
	return "?";
}

static const char *err_name(uint32_t err)
{
	switch (err) {
	case GQ_ERR_UNKNOWN_TSG:
		return "unknown TSG";
	case GQ_ERR_EXPIRED:
		return "deadline expired before the control started";
	case GQ_ERR_BAD_OP:
		return "bad op or argument";
	case GQ_ERR_NOT_GATEABLE:
		return "the preempt agent cannot gate this TSG";
	}
	return strerror((int)err);
}

/* The preempt agent drops a command not started within deadline_us; we
 * allow the same again for the control itself (RM round trips take
 * 100-450 us, but one once hung for minutes) before calling it lost. The
 * direct path gets the same budget: its queue wait plus the control. */
static uint64_t cmd_deadline(const struct agent *a)
{
	return core_now_us() + 2ull * a->cfg->control_deadline_ms * 1000u;
}

/* Issues op on t through path (chosen by the caller with tsg_path). */
struct cmd *cmd_issue(struct agent *a, struct tsg *t, enum path path, uint32_t op, uint64_t arg,
		      struct ctl_conn *ctl)
{
	struct proc *p = proc_find(a, t->pid);
	struct cmd *c;
	int rc;

	if (path == PATH_NONE || (path == PATH_IN_PROCESS && (!p || !p->peer)))
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (++a->next_seq == 0)
		a->next_seq = 1;
	c->seq = a->next_seq;
	c->path = path;
	c->peer = path == PATH_IN_PROCESS ? p->peer : NULL;
	c->pid = t->pid;
	c->h_client = t->h_client;
	c->h_tsg = t->h_tsg;
	c->op = op;
	c->arg = arg;
	c->sent = core_now_us();
	c->deadline = cmd_deadline(a);
	c->ctl = ctl;
	if (path == PATH_IN_PROCESS)
		rc = a->hooks.submit_in_process ? a->hooks.submit_in_process(a, c) : -1;
	else
		rc = a->hooks.submit_direct ? a->hooks.submit_direct(a, t, c) : -1;
	if (rc != 0) {
		free(c);
		return NULL;
	}
	c->next = a->cmds;
	a->cmds = c;
	t->sent.inflight++;
	t->sent.inflight_op = op;
	t->sent.last_path = path;
	/* The path that carries each setting; a read-back sets nothing. */
	if (op != GQ_OP_GET_TIMESLICE)
		t->sent.action_path[op_action(op)] = path;
	a->n.commands++;
	log_debug("pid %d: COMMAND %u %s TSG 0x%x arg %llu via %s", (int)t->pid, c->seq,
		  gq_op_name(op), t->h_tsg, (unsigned long long)arg, path_name(path));
	return c;
}

static void cmd_unlink(struct agent *a, struct cmd *c)
{
	for (struct cmd **pp = &a->cmds; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			return;
		}
	}
}

static void tsg_backoff(struct tsg *t)
{
	t->sent.backoff_ms = t->sent.backoff_ms ? t->sent.backoff_ms * 2 : AGENT_BACKOFF_MIN_MS;
	if (t->sent.backoff_ms > AGENT_BACKOFF_MAX_MS)
		t->sent.backoff_ms = AGENT_BACKOFF_MAX_MS;
	t->sent.backoff_until = core_now_us() + (uint64_t)t->sent.backoff_ms * 1000u;
}

static void tsg_record_error(struct tsg *t, const struct cmd *c, const struct cmd_outcome *o)
{
	const char *via = c->path == PATH_DIRECT ? " (direct path)" : "";

	if (o->why && o->why[0])
		snprintf(t->sent.error, sizeof(t->sent.error), "%s%s: %s", gq_op_name(c->op), via, o->why);
	else if (o->err)
		snprintf(t->sent.error, sizeof(t->sent.error), "%s%s: %s", gq_op_name(c->op), via,
			 err_name(o->err));
	else
		snprintf(t->sent.error, sizeof(t->sent.error), "%s%s: %s", gq_op_name(c->op), via,
			 rm_status_name(o->rm_status));
	if (c->op == GQ_OP_SET_INTERLEAVE && o->err == 0 &&
	    o->rm_status == RM_ERR_INSUFFICIENT_PERMISSIONS) {
		/* Only CAP_SYS_NICE in the calling task helps; retrying cannot. */
		t->sent.il_refused = (int32_t)c->arg;
		snprintf(t->sent.error, sizeof(t->sent.error),
			 "SET_INTERLEAVE%s: NV_ERR_INSUFFICIENT_PERMISSIONS: needs CAP_SYS_NICE", via);
		return;
	}
	tsg_backoff(t);
}

/* RM's word that the claimed handles name nothing of that client (or the
 * preempt agent's, that it never saw them). */
static int says_no_such_tsg(const struct cmd_outcome *o)
{
	if (o->err == GQ_ERR_UNKNOWN_TSG)
		return 1;
	return o->err == 0 &&
	       (o->rm_status == RM_ERR_INVALID_CLIENT || o->rm_status == RM_ERR_INVALID_OBJECT_HANDLE ||
		o->rm_status == RM_ERR_INVALID_OBJECT_PARENT || o->rm_status == RM_ERR_OBJECT_NOT_FOUND);
}

/* A claim waiting for its read-back (TSG_CLAIM_READBACK): any control RM
 * answered on the claimed handles through the claimant's fd confirms it;
 * RM saying they do not exist refuses it for good. */
static void tsg_claim_outcome(struct agent *a, struct tsg *t, const struct cmd *c,
			      const struct cmd_outcome *o)
{
	int ok = o->err == 0 && o->rm_status == RM_OK;

	if (t->claim != TSG_CLAIM_READBACK)
		return;
	if (ok) {
		t->claim = TSG_CLAIM_CONFIRMED;
		log_debug("pid %d: TSG 0x%x/0x%x confirmed by a read-back via %s", (int)t->pid,
			  t->h_client, t->h_tsg, path_name(c->path));
	} else if (says_no_such_tsg(o)) {
		t->claim = TSG_CLAIM_REFUSED;
		a->n.claims_refused_readback++;
		snprintf(t->sent.error, sizeof(t->sent.error), "claim refused: %s on it: %s", gq_op_name(c->op),
			 o->err ? err_name(o->err) : rm_status_name(o->rm_status));
		proc_log(a, t->proc, LOG_LEVEL_WARN,
			 "pid %d: preempt agent's TSG 0x%x/0x%x refused: %s on it says it does not "
			 "exist (%s)", (int)t->pid, t->h_client, t->h_tsg, gq_op_name(c->op),
			 o->err ? err_name(o->err) : rm_status_name(o->rm_status));
	} else if (c->path == PATH_DIRECT && o->err && !t->readback_direct_failed) {
		/* The fd did not take an RM control from us (not the device, or
		 * gone): let the preempt agent try, at once. */
		t->readback_direct_failed = 1;
	} else {
		tsg_record_error(t, c, o); /* in view, and a backoff before the next try */
	}
}

/* A GATE answered done. A GATE of a TSG its preempt agent already said
 * gated changes nothing in the RM (a renewal, or one sent again because
 * the gate did not show): its disable came before, and the tracker's
 * record of it with it. If the RM still holds a
 * channel of it enabled (the tracker saw every DISABLE_CHANNELS the RM
 * accepted), the gate was never made. Twice running and the agent stops
 * taking its word: it leaves the rotation (a runlist with a BE that cannot
 * be gated goes to the floor), and its neighbours are no longer held off
 * for turns it takes anyway. One answered with every channel off starts
 * the count again: the first GATE's answer can be read before the
 * tracker's record of its disable. */
static void gate_check_made(struct agent *a, struct tsg *t)
{
	if (t->kch.n == 0 || t->gate.unmade)
		return;
	if (tsg_kchans_off(t)) {
		t->gate.unmade_run = 0;
		return;
	}
	if (!t->gate.said || ++t->gate.unmade_run < GATE_UNMADE_MAX)
		return;
	t->gate.unmade = 1;
	a->dirty = 1;
	proc_log(a, t->proc, LOG_LEVEL_WARN,
		 "pid %d: TSG 0x%x: its preempt agent says it is gated, the RM holds its channels "
		 "enabled (%u GATEs running): out of the rotation",
		 (int)t->pid, t->h_tsg, t->gate.unmade_run);
}

/* A GATE or UNGATE ended. The preempt agent reports the state it leaves
 * in its next TSG report too; the RESULT comes first. */
static void tsg_record_gate(struct agent *a, struct tsg *t, const struct cmd *c,
			    const struct cmd_outcome *o)
{
	int ok = o->err == 0 && o->rm_status == RM_OK;

	t->sent.last_failed = !ok;
	if (!ok) {
		/* It cannot be gated: the policy puts its runlist at the floor. */
		if (o->err == GQ_ERR_NOT_GATEABLE || o->err == GQ_ERR_BAD_OP)
			t->gate.no_gate = 1;
		tsg_record_error(t, c, o);
		return;
	}
	t->sent.error[0] = '\0';
	t->sent.backoff_ms = 0;
	t->sent.backoff_until = 0;
	if (c->op == GQ_OP_GATE)
		gate_check_made(a, t);
	tsg_gate_note(t, c->op == GQ_OP_GATE, core_now_us());
	t->gate.leased = c->op == GQ_OP_GATE || c->arg > 0;
	if (t->gate.leased)
		t->gate.renewed = c->sent;
}

/* A read-back of a confirmed TSG answered v: when the RM holds another
 * value than we believe, and no telling since the read replaces it, the
 * belief was wrong (a lost event, a control RM did not keep, a race): say
 * so; the observation that follows makes the next pass set it again. */
static void tsg_verify_answer(struct agent *a, struct tsg *t, const struct cmd *c, uint32_t v)
{
	uint32_t believed = tsg_effective_ts(t);

	a->n.verify_reads++;
	t->verify.at = core_now_us();
	if (c->sent < t->obs.ts_at || v == believed)
		return;
	t->verify.mismatches++;
	a->n.verify_mismatches++;
	proc_log(a, t->proc, LOG_LEVEL_WARN,
		 "pid %d: TSG 0x%x: the RM holds %u us, not the %u us believed; setting it again",
		 (int)t->pid, t->h_tsg, v, believed);
}

/* Records the outcome on the TSG: observed value on success, backoff and
 * the error in words on failure. */
static void tsg_record(struct agent *a, struct tsg *t, const struct cmd *c, const struct cmd_outcome *o)
{
	int ok = o->err == 0 && o->rm_status == RM_OK;
	int claimed = t->claim == TSG_CLAIM_CONFIRMED;

	tsg_claim_outcome(a, t, c, o);

	t->sent.has_last = 1;
	t->sent.last_op = c->op;
	t->sent.last_status = o->rm_status;
	t->sent.last_errno = o->err;
	t->sent.last_timeout = 0;
	t->sent.last_elapsed_us = o->elapsed_ns / 1000u;
	/* The fd took no control from us: later read-backs go through the
	 * preempt agent (reconcile.c, readback_path). */
	if (c->op == GQ_OP_GET_TIMESLICE && !ok && c->path == PATH_DIRECT && o->err)
		t->readback_direct_failed = 1;
	if (c->op == GQ_OP_PREEMPT || (c->op == GQ_OP_GET_TIMESLICE && !ok))
		return; /* changes no setting: says nothing of convergence */
	if (c->op == GQ_OP_GATE || c->op == GQ_OP_UNGATE) {
		tsg_record_gate(a, t, c, o);
		return;
	}
	t->sent.last_failed = !ok;
	if (!ok) {
		tsg_record_error(t, c, o);
		return;
	}
	/* A refused level is not retried: its reason must stay in view. */
	if (!(t->want.desired_il >= 0 && t->sent.il_refused == t->want.desired_il))
		t->sent.error[0] = '\0';
	t->sent.backoff_ms = 0;
	t->sent.backoff_until = 0;
	/* As of when it was sent: anything the RM was told after that, and
	 * seen before this result, stands. */
	if (c->op == GQ_OP_SET_TIMESLICE || c->op == GQ_OP_GET_TIMESLICE) {
		uint32_t v = o->value >= GQ_UNKNOWN ? GQ_UNKNOWN - 1 : (uint32_t)o->value;

		if (c->op == GQ_OP_GET_TIMESLICE && claimed)
			tsg_verify_answer(a, t, c, v);
		tsg_observe_ts(t, v, c->sent);
		/* What a SET left is read back soon: libcuda or another
		 * telling may follow it (docs/policy.md, verifyIntervalS). */
		if (c->op == GQ_OP_SET_TIMESLICE && a->cfg->verify_interval_s)
			t->verify.due = core_now_us() + AGENT_VERIFY_SETTLE_MS * 1000ull;
		/* Having to set this value again means someone set it back
		 * (or the RM did not keep it): tsg_revert_wait. */
		if (c->op == GQ_OP_SET_TIMESLICE)
			tsg_revert_arm(t, TSG_TIMESLICE, (uint32_t)c->arg);
	} else if (c->op == GQ_OP_SET_INTERLEAVE) {
		tsg_observe_il(t, (uint32_t)c->arg, c->sent);
		tsg_revert_arm(t, TSG_INTERLEAVE, (uint32_t)c->arg);
	}
}

/* The result of c arrived (on time or late): record it, answer a waiting
 * ctl request, free c. A pass follows unless the result left t as a pass
 * reads it (a lease renewed, a read-back that found the belief) and no
 * pass waited for it: at 256 BEs renewing every quarter lease, a pass per
 * renewal would be most of the agent's work. */
static void cmd_finish(struct agent *a, struct cmd *c, const struct cmd_outcome *o)
{
	struct tsg *t = tsg_find(a, c->pid, c->h_client, c->h_tsg);
	struct tsg_inputs before, after;
	int needs_pass = !t || c->ctl || c->timed_out;

	cmd_unlink(a, c);
	a->n.results++;
	if (!c->timed_out && t && t->sent.inflight)
		t->sent.inflight--;
	if ((o->err || o->rm_status) && t) {
		a->n.failures++;
		proc_log(a, t->proc, LOG_LEVEL_WARN, "pid %d: %s on TSG 0x%x via %s failed: %s, errno %u (%s)%s%s",
			 (int)c->pid, gq_op_name(c->op), c->h_tsg, path_name(c->path),
			 rm_status_name(o->rm_status), o->err, o->err ? err_name(o->err) : "none",
			 o->why && o->why[0] ? ": " : "", o->why ? o->why : "");
	} else if (o->err || o->rm_status) {
		a->n.failures++;
	}
	if (t) {
		tsg_inputs_of(t, &before);
		tsg_record(a, t, c, o);
		tsg_inputs_of(t, &after);
		needs_pass |= t->sent.waited || !tsg_inputs_same(&before, &after);
		t->sent.waited = 0;
	}
	if (a->hooks.control_ended)
		a->hooks.control_ended(a, t, c, o);
	if (c->ctl && a->hooks.cmd_done)
		a->hooks.cmd_done(a, c->ctl, c, o);
	free(c);
	if (needs_pass)
		a->dirty = 1;
}

void cmd_result(struct agent *a, struct peer *p, const struct gq_result *r)
{
	struct cmd_outcome o = { r->rm_status, r->err, r->value, r->elapsed_ns, NULL, NULL };
	struct cmd *c;

	for (c = a->cmds; c; c = c->next)
		if (c->seq == r->hdr.seq && c->peer == p && c->path == PATH_IN_PROCESS)
			break;
	if (!c || c->op != r->op || c->h_client != r->h_client || c->h_tsg != r->h_tsg) {
		a->n.unknown_result++;
		proc_log(a, p->proc, LOG_LEVEL_DEBUG, "pid %d: RESULT %u matches no command", (int)p->pid,
			 r->hdr.seq);
		return;
	}
	if (c->timed_out) {
		proc_log(a, p->proc, LOG_LEVEL_INFO, "pid %d: late RESULT %u: control path works again",
			 (int)p->pid, c->seq);
		p->stalled = 0;
	}
	cmd_finish(a, c, &o);
}

void cmd_direct_result(struct agent *a, uint32_t seq, const struct cmd_outcome *o)
{
	struct cmd *c;

	for (c = a->cmds; c; c = c->next)
		if (c->seq == seq && c->path == PATH_DIRECT)
			break;
	if (!c) {
		a->n.unknown_result++;
		log_debug("direct path: result %u matches no command", seq);
		return;
	}
	if (c->timed_out)
		log_info("pid %d: %s on TSG 0x%x returned %.1f s late on the direct path",
			 (int)c->pid, gq_op_name(c->op), c->h_tsg, (double)o->elapsed_ns / 1e9);
	cmd_finish(a, c, o);
}

static void tsg_timeout(struct agent *a, struct cmd *c, struct tsg *t)
{
	if (t->sent.inflight)
		t->sent.inflight--;
	t->sent.has_last = 1;
	t->sent.last_op = c->op;
	t->sent.last_timeout = 1;
	snprintf(t->sent.error, sizeof(t->sent.error), "%s: no result within the deadline%s",
		 gq_op_name(c->op), c->path == PATH_DIRECT ? " (direct path)" : "");
	/* The in-process path stops at a stalled peer; the direct path has no such
	 * stop per process, so the TSG itself waits before a retry. */
	if (c->path == PATH_DIRECT && c->op != GQ_OP_PREEMPT && c->op != GQ_OP_GET_TIMESLICE)
		tsg_backoff(t);
}

/* Frees c when it was a direct job that never started. */
static void cmd_timeout(struct agent *a, struct cmd *c)
{
	struct tsg *t = tsg_find(a, c->pid, c->h_client, c->h_tsg);
	int where = -1;

	c->timed_out = 1;
	a->n.timeouts++;
	if (a->hooks.control_ended) {
		struct cmd_outcome late = { .err_word = "timeout" };

		a->hooks.control_ended(a, t, c, &late);
	}
	if (c->path == PATH_IN_PROCESS) {
		if (!c->peer->stalled)
			log_warn("pid %d: %s on TSG 0x%x: no RESULT within its deadline, control path "
				 "stalled", (int)c->pid, gq_op_name(c->op), c->h_tsg);
		c->peer->stalled = 1;
	} else {
		where = a->hooks.expire_direct ? a->hooks.expire_direct(a, c) : 0;
		log_warn("pid %d: %s on TSG 0x%x: no result within its deadline on the direct path (%s)",
			 (int)c->pid, gq_op_name(c->op), c->h_tsg,
			 where == 0   ? "still queued: dropped"
			 : where == 1 ? "a worker is stuck in it: counted lost"
				      : "it just finished");
	}
	if (t)
		tsg_timeout(a, c, t);
	if (c->ctl) {
		struct cmd_outcome o = { .err_word = "timeout" };
		struct ctl_conn *ctl = c->ctl;

		c->ctl = NULL;
		if (a->hooks.cmd_done)
			a->hooks.cmd_done(a, ctl, c, &o);
	}
	a->dirty = 1;
	if (where != 0)
		return;
	cmd_unlink(a, c); /* dropped from the queue: no result will come */
	free(c);
}

void cmd_expire(struct agent *a)
{
	uint64_t now = core_now_us();
	struct cmd *c = a->cmds;

	while (c) {
		struct cmd *next = c->next;

		if (!c->timed_out && c->deadline <= now)
			cmd_timeout(a, c);
		c = next;
	}
}

uint64_t cmd_next_deadline(const struct agent *a)
{
	uint64_t next = 0;

	for (const struct cmd *c = a->cmds; c; c = c->next)
		if (!c->timed_out && (next == 0 || c->deadline < next))
			next = c->deadline;
	return next;
}

/* The peer went away: its commands will never be answered. */
void cmd_fail_peer(struct agent *a, struct peer *p)
{
	struct cmd **pp = &a->cmds;

	while (*pp) {
		struct cmd *c = *pp;

		if (c->path != PATH_IN_PROCESS || c->peer != p) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		if (c->ctl && a->hooks.cmd_done) {
			struct cmd_outcome o = { .err = ECONNRESET };

			a->hooks.cmd_done(a, c->ctl, c, &o);
		}
		free(c);
	}
}

void cmd_detach_ctl(struct agent *a, struct ctl_conn *ctl)
{
	for (struct cmd *c = a->cmds; c; c = c->next)
		if (c->ctl == ctl)
			c->ctl = NULL;
}

void cmd_free_all(struct agent *a)
{
	while (a->cmds) {
		struct cmd *c = a->cmds;

		a->cmds = c->next;
		free(c);
	}
}

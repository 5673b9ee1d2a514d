/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reconcile.c - makes observed TSG settings match desired ones: runs the
 * policy over every known TSG, sends the commands that close the gap
 * (rate-limited, one in flight per TSG, none during backoff, each on the
 * path path.c chooses), reads back the claims nobody confirmed, and keeps
 * each peer's POLICY current, and gates the BEs rotate.c says should be.
 * Safe to run at any time; a second run with
 * nothing changed sends nothing. Does not own the policy itself
 * (policy.c), the paths (peer.c, direct.c: reached through struct
 * agent_hooks) or the timers (cron.c).
 */
#include "agent/core/core.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* More than one GPU (struct proc.own_gpu). */
#define RECONCILE_GPUS_SEVERAL (GQ_UNKNOWN - 1)
/* Read-backs of claims per tick on the direct path (its SETs have their
 * own budget, AGENT_DIRECT_PER_TICK). */
#define AGENT_READBACK_PER_TICK 64u

/* One policy pass over every TSG: the inputs, the decisions and the
 * runlists (kept for the peers' POLICY). */
struct pass {
	struct policy_tsg_in *in;
	struct policy_tsg_out *out;
	struct policy_runlist *rl;
	size_t n, m;
};

static void pass_free(struct pass *ps)
{
	free(ps->in);
	free(ps->out);
	free(ps->rl);
}

/* A TSG counts for its runlist neighbours only when its GPU is known (or
 * it could be paired with neighbours on another GPU) and nobody doubts it
 * exists: an unconfirmed claim must not move anyone. */
static int tsg_counts(const struct tsg *t)
{
	return t->gpu != GQ_UNKNOWN && !tsg_unverified(t);
}

/* A BE TSG and the index of its policy input (proc_groups). */
struct be_at {
	const struct tsg *t;
	size_t at;
};

/* The BE TSGs of one process on one runlist, side by side. */
static int by_proc_runlist(const void *x, const void *y)
{
	const struct tsg *a = ((const struct be_at *)x)->t, *b = ((const struct be_at *)y)->t;

	if (a->gpu != b->gpu)
		return a->gpu < b->gpu ? -1 : 1;
	if (a->engine != b->engine)
		return a->engine < b->engine ? -1 : 1;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return a < b ? -1 : (a > b);
}

/* Rotation turns are per process (rotate.c), so the policy counts BE
 * processes and knows how many TSGs each has on its runlist: in[i] gets
 * proc_tsgs and proc_repeat. ts[0..n) are the TSGs of in[0..n). */
static int proc_groups(struct tsg *const *ts, struct policy_tsg_in *in, size_t n)
{
	struct be_at *g = malloc((n + 1) * sizeof(*g));
	size_t m = 0;

	if (!g)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (in[i].cls == CLASS_BE)
			g[m++] = (struct be_at){ ts[i], i };
	qsort(g, m, sizeof(*g), by_proc_runlist);
	for (size_t i = 0, j; i < m; i = j) {
		for (j = i + 1; j < m && g[j].t->pid == g[i].t->pid && g[j].t->gpu == g[i].t->gpu &&
				g[j].t->engine == g[i].t->engine;
		     j++)
			;
		for (size_t k = i; k < j; k++) {
			in[g[k].at].proc_tsgs = (uint32_t)(j - i);
			in[g[k].at].proc_repeat = k > i;
		}
	}
	free(g);
	return 0;
}

static int pass_inputs(struct agent *a, struct pass *ps)
{
	size_t i = 0, n = a->ntsgs;
	struct tsg **ts;

	memset(ps, 0, sizeof(*ps));
	ps->in = calloc(n + 1, sizeof(*ps->in));
	ps->out = calloc(n + 1, sizeof(*ps->out));
	ps->rl = calloc(n + 1, sizeof(*ps->rl));
	ts = calloc(n + 1, sizeof(*ts));
	if (!ps->in || !ps->out || !ps->rl || !ts) {
		free(ts);
		pass_free(ps);
		return -1;
	}
	for (struct tsg *t = a->tsgs; t && i < n; t = t->next, i++) {
		int counts = tsg_counts(t);

		ts[i] = t;

		ps->in[i].gpu = counts ? t->gpu : GQ_UNKNOWN;
		ps->in[i].engine_type = t->engine;
		ps->in[i].cls = counts ? t->proc->cls : CLASS_UNMANAGED;
		ps->in[i].baseline_timeslice_us = tsg_baseline(t);
		ps->in[i].gateable = counts && rotate_gateable(t);
		ps->in[i].lc_busy = counts && t->proc->busy.always;
	}
	ps->n = i;
	if (proc_groups(ts, ps->in, i) != 0) {
		free(ts);
		pass_free(ps);
		return -1;
	}
	free(ts);
	return 0;
}

/* GQ_UNKNOWN: nothing yet; 0 once two values disagree. */
static void merge(uint32_t *into, uint32_t v)
{
	if (*into == GQ_UNKNOWN)
		*into = v;
	else if (*into != v)
		*into = 0;
}

/* What each process's counted TSGs want, per engine kind, for its POLICY. */
static void note_own(struct agent *a)
{
	for (struct proc *p = a->procs; p; p = p->next) {
		p->own_gr = p->own_copy = p->own_gpu = GQ_UNKNOWN;
		p->own_wake = 0;
	}
	for (struct tsg *t = a->tsgs; t; t = t->next) {
		struct proc *p = t->proc;

		if (!tsg_counts(t))
			continue;
		if (p->own_gpu == GQ_UNKNOWN)
			p->own_gpu = t->gpu;
		else if (p->own_gpu != t->gpu)
			p->own_gpu = RECONCILE_GPUS_SEVERAL;
		if (p->cls == CLASS_UNMANAGED || t->want.desired_ts == GQ_UNKNOWN)
			continue;
		if (rm_engine_is_gr(t->engine)) {
			merge(&p->own_gr, t->want.desired_ts);
			p->own_wake |= t->want.wake;
		} else if (rm_engine_is_copy(t->engine)) {
			merge(&p->own_copy, t->want.desired_ts);
		}
	}
}

/* A TSG enters a rotation no sooner than a dwell (rotate_dwell_us) after
 * its membership last changed: a neighbour or its own preempt agent
 * flipping what it reports (NO_GATE, gateable or not, a process coming and
 * going) cannot make the agent gate, ungate and set a BE again and again.
 * Leaving goes at once: it only ever lets the BE run (and an LC, a
 * launch-bound LC beside it, or a BE that can no longer be gated must not
 * wait for it), so a TSG is moved in and out at most once each per dwell.
 * The first change goes at once too. Records the change (or that it is
 * held) on t; 1: held, keep t's current decision. */
static int rotation_hold_entry(struct agent *a, struct tsg *t, const struct policy_tsg_out *o,
			 uint64_t now)
{
	if (o->rotate == t->gate.rotate) {
		t->gate.change_held = 0;
		return 0;
	}
	if (o->rotate && t->gate.rotate_since && now < t->gate.rotate_since + rotate_dwell_us(a)) {
		a->n.rotation_changes_held += !t->gate.change_held;
		t->gate.change_held = 1;
		return 1;
	}
	t->gate.rotate_since = now;
	t->gate.change_held = 0;
	return 0;
}

static int run_policy(struct agent *a, struct pass *ps, uint64_t now)
{
	size_t i = 0;

	if (pass_inputs(a, ps) != 0) {
		log_error("reconcile: out of memory for the policy input");
		return -1;
	}
	ps->m = policy_runlists(ps->in, ps->n, ps->rl);
	policy_decide_with(&a->cfg->policy, ps->in, ps->n, ps->rl, ps->m, ps->out);
	for (struct tsg *t = a->tsgs; t && i < ps->n; t = t->next, i++) {
		if (rotation_hold_entry(a, t, &ps->out[i], now))
			continue;
		if (t->want.desired_il != ps->out[i].interleave)
			t->sent.il_refused = IL_REFUSED_NONE; /* a new level deserves a new try */
		t->want.desired_ts = ps->out[i].timeslice_us;
		t->want.desired_il = ps->out[i].interleave;
		t->gate.rotate = ps->out[i].rotate;
		/* Only where the policy is applied: not while held or refused. */
		t->want.wake = ps->out[i].wake && t->gpu != GQ_UNKNOWN && !t->unverified_until &&
			       t->claim != TSG_CLAIM_READBACK && t->claim != TSG_CLAIM_REFUSED;
		t->want.reason = ps->out[i].reason ? ps->out[i].reason : "";
		if (t->gpu == GQ_UNKNOWN)
			t->want.reason = "GPU (device instance) unknown: left alone";
		if (t->unverified_until)
			t->want.reason = "reported by its preempt agent, not seen by the eBPF tracker yet: held";
		else if (t->claim == TSG_CLAIM_READBACK)
			t->want.reason = "reported by its preempt agent, not read back from the RM yet: held";
		else if (t->claim == TSG_CLAIM_REFUSED)
			t->want.reason = "reported by its preempt agent, but the RM does not know it: refused";
	}
	note_own(a);
	return 0;
}

/* A claim's read-back goes through the direct path when it may carry
 * timeslice controls: then the agent hears the RM itself. Through the
 * preempt agent otherwise (or when the direct path could not reach the
 * fd), which a process that forges its RESULTs can answer falsely
 * (docs/protocol.md, "Claims"). The read-back sets nothing, so a forced
 * path does not bind it. */
static struct path_choice readback_path(struct agent *a, const struct tsg *t)
{
	struct path_in in = tsg_path_facts(a, t, ACTION_TIMESLICE);
	struct path_choice direct = { .path = PATH_NONE }, agent;

	if (in.mode != PATH_MODE_IN_PROCESS && !t->readback_direct_failed) {
		in.mode = PATH_MODE_DIRECT;
		direct = path_select(&in);
		if (direct.path != PATH_NONE)
			return direct;
	}
	in.mode = PATH_MODE_IN_PROCESS;
	agent = path_select(&in);
	return agent.path == PATH_NONE && direct.why ? direct : agent;
}

/* No path can carry t's next control: say why once, show it on the TSG. */
static void tsg_block(struct agent *a, struct tsg *t, uint32_t op, const struct path_choice *ch)
{
	if (t->sent.blocked != ch->why)
		proc_log(a, t->proc, LOG_LEVEL_WARN, "pid %d: %s on TSG 0x%x not sent: %s", (int)t->pid,
			 gq_op_name(op), t->h_tsg, ch->why);
	t->sent.blocked = ch->why;
	t->sent.blocked_stalled = ch->stalled;
	snprintf(t->sent.error, sizeof(t->sent.error), "%s: %s", gq_op_name(op), ch->why);
}

/* The rate limit of the chosen path; 1 if one more may be sent now. */
static int path_budget(struct agent *a, const struct tsg *t, enum path path, uint32_t op)
{
	if (path == PATH_DIRECT && op == GQ_OP_GET_TIMESLICE)
		return a->readback_sent_this_tick < AGENT_READBACK_PER_TICK;
	if (path == PATH_DIRECT)
		return a->direct_sent_this_tick < AGENT_DIRECT_PER_TICK;
	return t->proc->peer && t->proc->peer->sent_this_tick < AGENT_CMDS_PER_TICK;
}

static int send_one(struct agent *a, struct tsg *t, const struct path_choice *ch, uint32_t op,
		    uint64_t arg)
{
	uint64_t now = core_now_us();

	if (ch->path == PATH_NONE) {
		tsg_block(a, t, op, ch);
		return 0;
	}
	t->sent.blocked = NULL;
	if (!path_budget(a, t, ch->path, op) || !tsg_control_allowed(a, t, op, now) ||
	    !cmd_issue(a, t, ch->path, op, arg, NULL))
		return 0;
	tsg_control_charge(a, t, op, now);
	if (ch->path == PATH_DIRECT && op == GQ_OP_GET_TIMESLICE)
		a->readback_sent_this_tick++;
	else if (ch->path == PATH_DIRECT)
		a->direct_sent_this_tick++;
	else
		t->proc->peer->sent_this_tick++;
	return 1;
}

/* A renewal due for t, made by a store in its peer's lease page instead of
 * a COMMAND: no message, no wakeup of the BE, no RESULT to read. Returns
 * 1 when renewed so. The store renews every lease of the peer; each of its
 * TSGs that should lose its lease gets an UNGATE of its own. */
static int renew_in_page(struct agent *a, struct tsg *t, uint64_t now, uint64_t lease_ms)
{
	struct peer *p = t->proc->peer;
	uint64_t until = now + lease_ms * 1000u;

	if (!p || !p->lease_page || p->broken || p->stalled || !a->hooks.renew_leases ||
	    t->sent.inflight)
		return 0;
	if (until > p->lease_until_us) {
		a->hooks.renew_leases(a, p, until);
		p->lease_until_us = until;
	}
	t->gate.renewed = now;
	t->gate.lapse_by = until + AGENT_GATE_LAPSE_SLACK_US;
	a->n.page_renewals++;
	return 1;
}

/* Gating before any setting: an UNGATE ends a stall, a GATE takes a BE
 * off the LC's way at once. Every TSG in a rotation holds a lease its
 * preempt agent enforces (docs/protocol.md, "Gating"), renewed here.
 * Returns 1 when t needs a gate command now (sent, or held back by the
 * rate limit), 0 when it needs none. An UNGATE is sent even while
 * holding: it only ever lets work run. */
static int reconcile_gate(struct agent *a, struct tsg *t, uint64_t now, int holding, int renewing,
			  int *sent)
{
	struct path_choice ch = { .path = PATH_IN_PROCESS };
	uint64_t lease = a->cfg->policy.gate_lease_ms;

	/* Past its lease (the agent was stopped or slow): the preempt agent
	 * has ended the gate by itself, whatever report of it is still unread;
	 * what is sent now starts a new one. */
	if ((t->gate.gated || t->gate.said) && t->gate.leased && t->gate.lapse_by &&
	    now > t->gate.lapse_by)
		tsg_gate_note(t, 0, now);
	if (!t->gate.rotate || !rotate_gateable(t)) {
		/* Out of the rotation: enabled, and no lease that would put
		 * libcuda's timeslice back behind the policy's back. */
		if (!t->gate.gated && !t->gate.leased)
			return 0;
		*sent = send_one(a, t, &ch, GQ_OP_UNGATE, 0);
		return 1;
	}
	if (t->gate.want != t->gate.gated || !t->gate.leased) {
		if (t->gate.want && holding)
			return 0;
	} else if (!rotate_renew_due(a, t, now, renewing) || renew_in_page(a, t, now, lease)) {
		return 0;
	}
	/* A gate, its turn, or the renewal of either. */
	*sent = send_one(a, t, &ch, t->gate.want ? GQ_OP_GATE : GQ_OP_UNGATE, lease);
	if (*sent)
		t->gate.lapse_by = now + lease * 1000u + AGENT_GATE_LAPSE_SLACK_US;
	return 1;
}

/* Read-backs are due on whole seconds of the core clock (at, rounded
 * up), so those of many TSGs share a pass rather than each waking the
 * agent. */
static uint64_t verify_slot(uint64_t at)
{
	return (at + 999999u) / 1000000u * 1000000u;
}

/* Converged as far as we know: hold the belief against the RM now and
 * then (verifyIntervalS), through the read-back's path. A read that finds
 * another value makes the next pass set it again (cmd.c). The next one is
 * due from when this one is sent, so a read that fails or is lost is not
 * repeated at once. */
static int reconcile_verify(struct agent *a, struct tsg *t, uint64_t now)
{
	uint64_t iv = (uint64_t)a->cfg->verify_interval_s * 1000000ull;
	struct path_choice ch;

	if (iv == 0 || t->want.desired_ts == GQ_UNKNOWN || t->proc->cls == CLASS_UNMANAGED) {
		t->verify.due = 0;
		return 0;
	}
	if (t->verify.due == 0)
		t->verify.due = verify_slot(now + iv);
	if (now < t->verify.due)
		return 0;
	ch = readback_path(a, t);
	if (ch.path == PATH_NONE || !path_budget(a, t, ch.path, GQ_OP_GET_TIMESLICE))
		return 0;
	t->verify.due = verify_slot(now + iv);
	return send_one(a, t, &ch, GQ_OP_GET_TIMESLICE, 0);
}

/* Sends at most one command for t; returns 1 if one was sent. While
 * `holding`, only read-backs of claims (they change nothing) and
 * UNGATEs; while `renewing` (rotate_renewing), leases renewed early. */
static int reconcile_tsg(struct agent *a, struct tsg *t, uint64_t now, int holding, int renewing)
{
	struct proc *p = t->proc;
	struct path_choice ch;
	int gate_sent = 0;
	uint32_t op;
	uint64_t arg;

	if (t->sent.held_until && t->sent.held_until <= now)
		t->sent.held_until = 0; /* tsg_control_allowed holds it again if need be */
	if (t->sent.inflight) {
		/* Another control wanted: its result calls for a pass (cmd.c). */
		if (t->gate.want != t->gate.gated || tsg_ts_differs(t) || tsg_il_differs(t))
			t->sent.waited = 1;
		return 0;
	}
	if (t->sent.backoff_until > now || t->unverified_until || t->claim == TSG_CLAIM_REFUSED)
		return 0; /* an unverified or refused claim is never acted on */
	if (t->claim == TSG_CLAIM_READBACK) {
		if (p->cls == CLASS_UNMANAGED)
			return 0; /* counts for nothing: no need to know yet */
		ch = readback_path(a, t);
		return send_one(a, t, &ch, GQ_OP_GET_TIMESLICE, 0);
	}
	if (reconcile_gate(a, t, now, holding, renewing, &gate_sent))
		return gate_sent;
	if (holding)
		return 0;
	if (p->cls == CLASS_UNMANAGED && t->obs.applied_ts == GQ_UNKNOWN)
		return 0; /* never touched by anyone: leave it alone */
	/* A setting someone keeps setting back waits (tsg.c); the other one
	 * goes meanwhile. */
	if (tsg_ts_differs(t) && !tsg_revert_wait(a, t, TSG_TIMESLICE, now)) {
		op = GQ_OP_SET_TIMESLICE;
		arg = t->want.desired_ts;
	} else if (tsg_il_differs(t) && !tsg_revert_wait(a, t, TSG_INTERLEAVE, now)) {
		op = GQ_OP_SET_INTERLEAVE;
		arg = (uint64_t)t->want.desired_il;
	} else if (tsg_ts_differs(t) || tsg_il_differs(t)) {
		return 0; /* waiting */
	} else {
		/* Back to the desired values by itself: a wait still running
		 * and the reason it gave are over. */
		for (int k = 0; k < TSG_NSETTINGS; k++)
			if (t->revert[k].until) {
				t->revert[k].until = 0;
				t->sent.error[0] = '\0';
			}
		if (t->sent.blocked)
			t->sent.error[0] = '\0';
		t->sent.blocked = NULL;
		return reconcile_verify(a, t, now);
	}
	ch = tsg_path(a, t, op_action(op));
	return send_one(a, t, &ch, op, arg);
}

/* The answer for one more TSG of process p on `engine`, asked on p's GPU
 * (every GPU known when p has none yet): GQ_UNKNOWN when no GPU is known,
 * 0 when the GPUs disagree. */
static uint32_t hypothetical(struct agent *a, const struct pass *ps, const struct proc *p,
			     uint32_t engine, uint32_t baseline)
{
	/* A new TSG of a process whose preempt agent gates counts as
	 * gateable: it is, once its channels exist. */
	struct policy_tsg_in hyp = { .engine_type = engine, .cls = p->cls,
				     .baseline_timeslice_us = baseline,
				     .gateable = p->peer && p->peer->can_gate,
				     .lc_busy = p->busy.always };
	uint32_t answer = GQ_UNKNOWN;

	for (size_t i = 0; i < ps->m; i++) {
		const struct policy_runlist *r;
		struct policy_runlist with;
		struct policy_tsg_out out;
		uint32_t gpu = ps->rl[i].gpu;

		/* rl is sorted by GPU: ask each GPU once, at its first runlist */
		if (gpu == GQ_UNKNOWN || (i > 0 && ps->rl[i - 1].gpu == gpu))
			continue;
		if (p->own_gpu != GQ_UNKNOWN && p->own_gpu != RECONCILE_GPUS_SEVERAL && p->own_gpu != gpu)
			continue;
		r = policy_runlist_find(ps->rl, ps->m, gpu, engine);
		with = r ? *r : (struct policy_runlist){ .gpu = gpu, .engine_type = engine };
		with.lc += p->cls == CLASS_LC;
		with.be += p->cls == CLASS_BE;
		with.be_gateable += p->cls == CLASS_BE && hyp.gateable;
		hyp.gpu = gpu;
		policy_decide_tsg(&a->cfg->policy, &hyp, &with, &out);
		merge(&answer, out.timeslice_us);
	}
	return answer;
}

/* What a TSG of engine `engine` that process p creates next, or libcuda's
 * own later SET_TIMESLICE on one it has, should be, so that the preempt
 * agent sets it at once and rewrites that SET (docs/protocol.md). Where p
 * already has counted TSGs of that engine kind it is their value: the SET
 * that follows concerns them, and counting them again beside a
 * hypothetical twin would give a sole BE the several-BE floor. Otherwise
 * the policy's answer for one more such TSG. 0: leave libcuda's value (the
 * answer is the baseline, or the GPUs disagree). */
static uint32_t reconcile_policy_for(struct agent *a, const struct pass *ps, const struct proc *p,
				uint32_t own, uint32_t engine, uint32_t baseline)
{
	uint32_t answer = own != GQ_UNKNOWN ? own : hypothetical(a, ps, p, engine, baseline);

	return answer == GQ_UNKNOWN || answer == baseline ? 0 : answer;
}

static void reconcile_send_policy(struct agent *a, const struct pass *ps, struct peer *p)
{
	const struct policy_config *cfg = &a->cfg->policy;
	uint32_t gr = 0, copy = 0, wake = 0;

	if (p->proc && p->proc->cls != CLASS_UNMANAGED) {
		gr = reconcile_policy_for(a, ps, p->proc, p->proc->own_gr, RM_ENGINE_GR0,
				     RM_DEFAULT_TIMESLICE_GR_US);
		copy = reconcile_policy_for(a, ps, p->proc, p->proc->own_copy, RM_ENGINE_COPY0 + 2,
				       RM_DEFAULT_TIMESLICE_COPY_US);
		/* Wakes while one of its TSGs is an LC beside a BE, no longer:
		 * alone, or beside a launch-bound LC, there is no switch to
		 * start early. */
		if (p->proc->own_wake && cfg->wake_lead_us)
			wake = GQ_WAKE_WORD(cfg->wake_lead_us, cfg->wake_hold_us);
	}
	if ((!p->policy_valid || gr != p->policy_gr || copy != p->policy_copy ||
	     wake != p->policy_wake) &&
	    a->hooks.send_policy)
		a->hooks.send_policy(a, p, gr, copy, wake);
}

/* After a restart, the claims re-reported by earlier peers are read back
 * before anything is set from a partial view (within the grace). */
static int holding_now(struct agent *a, uint64_t now)
{
	int holding = state_grace_advance(a, now);

	if (holding || (a->hooks.kernel_confirms && a->hooks.kernel_confirms(a)) ||
	    now >= a->started_us + AGENT_RESTART_GRACE_MS * 1000ull)
		return holding;
	for (const struct tsg *t = a->tsgs; t; t = t->next)
		if (t->claim == TSG_CLAIM_READBACK && t->proc->cls != CLASS_UNMANAGED)
			return 1;
	return 0;
}

void reconcile(struct agent *a)
{
	uint64_t now = core_now_us();
	unsigned sent = 0;
	struct pass ps;
	int holding, renewing;

	a->dirty = 0;
	a->n.passes++;
	if (run_policy(a, &ps, now) != 0) {
		record_pass(a);
		if (a->hooks.after_reconcile)
			a->hooks.after_reconcile(a);
		return;
	}
	window_decide(a, now);
	rotate_plan(a, now);
	window_plan(a, now);
	memory_plan(a);
	/* Outside the loop over TSGs: with none, the grace must still end. */
	holding = holding_now(a, now);
	/* POLICY before the commands: a preempt agent handles its messages in
	 * order, so libcuda's own SET that follows our command is rewritten
	 * to the new value rather than racing it. */
	for (struct peer *p = a->peers; p; p = p->next)
		if (p->hello)
			reconcile_send_policy(a, &ps, p);
	renewing = rotate_renewing(a, now);
	for (struct tsg *t = a->tsgs; t; t = t->next)
		sent += (unsigned)reconcile_tsg(a, t, now, holding, renewing);
	pass_free(&ps);
	if (sent)
		log_debug("reconcile: %u command(s) sent", sent);
	record_pass(a); /* what the faces publish after the batch */
	if (a->hooks.after_reconcile)
		a->hooks.after_reconcile(a);
}

void reconcile_new_tick(struct agent *a)
{
	for (struct peer *p = a->peers; p; p = p->next)
		p->sent_this_tick = 0;
	a->direct_sent_this_tick = 0;
	a->readback_sent_this_tick = 0;
}

uint64_t reconcile_next_deadline(const struct agent *a)
{
	uint64_t next = cmd_next_deadline(a), now = core_now_us(), turn = rotate_next_deadline(a);
	uint64_t win = window_next_deadline(a);
	/* The grace ends in reconcile (holding_now): be there when it does. */
	uint64_t grace_end = a->started_us + AGENT_RESTART_GRACE_MS * 1000ull;

	for (const struct tsg *t = a->tsgs; t; t = t->next) {
		if (t->sent.backoff_until > now && (next == 0 || t->sent.backoff_until < next))
			next = t->sent.backoff_until;
		if (t->verify.due > now && (next == 0 || t->verify.due < next))
			next = t->verify.due;
		if (t->sent.held_until && (next == 0 || t->sent.held_until < next))
			next = t->sent.held_until > now ? t->sent.held_until : now;
		for (int k = 0; k < TSG_NSETTINGS; k++)
			if (t->revert[k].until > now && (next == 0 || t->revert[k].until < next))
				next = t->revert[k].until;
	}
	if ((a->expected || now < grace_end) && (next == 0 || grace_end < next))
		next = grace_end;
	if (turn && (next == 0 || turn < next))
		next = turn;
	if (win && (next == 0 || win < next))
		next = win;
	return next;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rotate.c - taking turns: of the BEs the policy put in a rotation on one
 * runlist, exactly one process is schedulable at a time and the others
 * are gated (their channels disabled by their own preempt agent). All
 * the rotating TSGs of one process there take one turn together; every
 * rotate_period_ms the turn passes to the process the agent served least
 * so far (ties: the one waiting longest).
 *
 * Owns: the rotation's members (struct rot_member: one per process and
 * runlist), their turns and what each was served, whether each rotating
 * TSG should be gated (struct tsg_gate.want), when a gate must be
 * renewed, and when the next turn or renewal is due. Does not own: the
 * decision who rotates (policy.c, held by the dwell in reconcile.c),
 * sending GATE and UNGATE (reconcile.c), executing them and the lease (the
 * preempt agent, docs/protocol.md "Gating").
 *
 * Why: with several BEs at any timeslice an LC request waits behind each
 * schedulable BE's slice; gating all but one gives the one-BE latency
 * with three or four BEs (docs/perf-log). Turns per process, not per TSG,
 * and counted from the agent's own plan, not from what a preempt agent
 * says: a process cannot buy turns with contexts nor by misreporting.
 */
#include "agent/core/core.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>

_Static_assert(POLICY_GATE_LEASE_MAX_MS <= GQ_GATE_LEASE_MAX_MS,
	       "the preempt agent accepts every lease the policy allows");

int rotate_gateable(const struct tsg *t)
{
	const struct peer *p = t->proc->peer;

	return p && p->hello && !p->broken && !p->stalled && p->can_gate && !t->gate.no_gate &&
	       !t->gate.unmade && !tsg_unverified(t);
}

/* Renew a gate when a quarter of its lease has passed: three renewals can
 * be lost or late before it lapses. */
static uint64_t renew_after_us(const struct agent *a)
{
	return (uint64_t)a->cfg->policy.gate_lease_ms * 1000u / 4u;
}

/* Due a quarter lease after the last; with `early` (a pass that renews
 * another anyway) from an eighth: the renewals of every BE then fall into
 * the same passes instead of one pass each. */
int rotate_renew_due(const struct agent *a, const struct tsg *t, uint64_t now, int early)
{
	uint64_t after = renew_after_us(a);

	if (early)
		after /= 2u;
	return t->gate.leased && now >= t->gate.renewed + after;
}

int rotate_renewing(const struct agent *a, uint64_t now)
{
	for (const struct tsg *t = a->tsgs; t; t = t->next)
		if (t->gate.rotate && t->gate.want == t->gate.gated && rotate_renew_due(a, t, now, 0))
			return 1;
	return 0;
}

uint64_t rotate_dwell_us(const struct agent *a)
{
	uint64_t two_turns = 2ull * a->cfg->policy.rotate_period_ms;

	return (two_turns > ROTATE_DWELL_MIN_MS ? two_turns : ROTATE_DWELL_MIN_MS) * 1000u;
}

static int by_runlist(const void *x, const void *y)
{
	const struct rot_member *a = *(const struct rot_member *const *)x;
	const struct rot_member *b = *(const struct rot_member *const *)y;

	if (a->gpu != b->gpu)
		return a->gpu < b->gpu ? -1 : 1;
	if (a->engine != b->engine)
		return a->engine < b->engine ? -1 : 1;
	return a->proc->pid < b->proc->pid ? -1 : (a->proc->pid > b->proc->pid);
}

/* When an LC's requests come, for the turn changes on its GPU: its
 * period, latest start and where in its period a change begins (core_now_us()
 * clock), from its preempt agent's PHASE (peer.c). */
struct gap {
	uint64_t period_us, last_us, offset_us; /* period_us 0: none known */
};

/* The gap of the one LC process on `gpu` whose PHASE is fresh, if its
 * period is at most a quarter of a turn and leaves room for a change
 * before its next request; none when no LC or several LC processes have
 * one (a change cannot fall in the gaps of two). */
static struct gap lc_gap(const struct agent *a, uint32_t gpu, uint64_t now, uint64_t period_us)
{
	struct proc *lc = phase_lc(a, gpu, now);
	struct gap none = { 0, 0, 0 }, g;
	uint64_t before;

	if (!a->cfg->policy.rotate_in_gap || !lc || lc->phase.period_us == 0 ||
	    lc->phase.period_us > period_us / 4)
		return none;
	g.period_us = lc->phase.period_us;
	g.last_us = lc->phase.last_start_us;
	/* With windows (window.c) the BEs are off around every request: the
	 * change goes right after a window ends, and must be over before the
	 * next one begins. */
	if (lc->win.why == WINDOW_GIVEN) {
		g.period_us = lc->win.period_ns / 1000u;
		g.offset_us = (uint64_t)lc->win.after_us + WINDOW_CHANGE_AFTER_US;
		if (g.offset_us + ROTATE_CHANGE_US + lc->win.before_us <= g.period_us) {
			g.last_us = lc->grid.anchor_us;
			return g;
		}
		g.period_us = lc->phase.period_us;
	}
	/* The change must be over before the next request's wake. */
	before = ROTATE_CHANGE_US + a->cfg->policy.wake_lead_us;
	if (lc->phase.period_us < before + ROTATE_CHANGE_MIN_OFFSET_US)
		return none;
	g.offset_us = lc->phase.period_us - before;
	return g;
}

/* The first point `offset` after one of the LC's request starts (every
 * period from last_us) at or after `end`. */
uint64_t rotate_gap_point(uint64_t end, uint64_t period_us, uint64_t last_us, uint64_t offset_us)
{
	uint64_t at = last_us + offset_us;

	if (end <= at)
		return at;
	return at + (end - at + period_us - 1) / period_us * period_us;
}

/* What m was served, its turn so far included. */
static uint64_t served_now(const struct rot_member *m, uint64_t now)
{
	return m->served_us + (m->turn_start && now > m->turn_start ? now - m->turn_start : 0);
}

/* m's turn ends now: what it held is served, and it queues behind every
 * process waiting already. */
static void turn_close(struct agent *a, struct rot_member *m, uint64_t now)
{
	m->served_us = served_now(m, now);
	m->queued = ++a->rot_seq;
	m->turn_start = m->turn_end = 0;
	m->waiting_since = now;
}

static void turn_open(struct rot_member *m, uint64_t now)
{
	if (m->waiting_since && now > m->waiting_since &&
	    now - m->waiting_since > m->longest_wait_us)
		m->longest_wait_us = now - m->waiting_since;
	m->waiting_since = 0;
	m->turn_start = m->last_turn = now;
	m->turn_end = 0;
}

/* Processes leaving and joining the rotation of g[0..n) (one runlist).
 * One that joins (or comes back) is counted as served as much as the
 * most served of those already in, and queues behind them: a new process
 * never goes before one that waits, and a stream of new ones cannot keep
 * an old one waiting past one turn of each process in. A holder that
 * leaves has its turn so far served. */
static void membership(struct agent *a, struct rot_member **g, size_t n, uint64_t now)
{
	uint64_t top = 0;
	int any = 0;

	for (size_t i = 0; i < n; i++)
		if (g[i]->active) {
			uint64_t s = served_now(g[i], now);

			any = 1;
			top = s > top ? s : top;
		}
	for (size_t i = 0; i < n; i++) {
		struct rot_member *m = g[i];

		if (m->active && m->tsgs == 0) {
			if (m->turn_start)
				turn_close(a, m, now);
			m->active = 0;
			m->waiting_since = 0;
		} else if (!m->active && m->tsgs) {
			if (any && m->served_us < top)
				m->served_us = top;
			m->queued = ++a->rot_seq;
			m->active = 1;
			m->turn_start = m->turn_end = 0;
			m->waiting_since = now;
		}
	}
}

/* Nobody is owed more than one turn: a process whose turns were cut
 * short (the rotation ended, its turn was taken from it) gets one turn
 * early, never a run of them that would keep the others waiting. */
static void owed_at_most_one_turn(struct rot_member **g, size_t n, uint64_t period_us)
{
	uint64_t top = 0;

	for (size_t i = 0; i < n; i++)
		if (g[i]->active && g[i]->served_us > top)
			top = g[i]->served_us;
	for (size_t i = 0; i < n; i++)
		if (g[i]->active && g[i]->served_us + period_us < top)
			g[i]->served_us = top - period_us;
}

static int goes_before(const struct rot_member *x, const struct rot_member *y)
{
	if (x->served_us != y->served_us)
		return x->served_us < y->served_us;
	return x->queued < y->queued;
}

/* The turn going to `next`, with what each member was served when it was
 * chosen (e2e.py checks the choice from this line). */
static void log_turn(struct rot_member *const *g, size_t n, const struct rot_member *next,
		     size_t in)
{
	char served[256];
	size_t at = 0;

	served[0] = '\0';
	for (size_t i = 0; i < n && at < sizeof(served); i++) {
		int k;

		if (!g[i]->active)
			continue;
		k = snprintf(served + at, sizeof(served) - at, " %d=%llu", (int)g[i]->proc->pid,
			     (unsigned long long)(g[i]->served_us / 1000u));
		if (k < 0)
			break;
		at += (size_t)k;
	}
	log_debug("rotation: GPU %u engine %u: turn of pid %d (%zu processes; served ms:%s)",
		  next->gpu, next->engine, (int)next->proc->pid, in, served);
}

/* The member of g[0..n) (one runlist) whose turn it is now; starts a new
 * turn when the current one has lasted a period (or there is none).
 * Where an LC's gap is known when the period ends, the turn goes on until
 * the change's controls fit between the LC's requests (ROTATE_CHANGE_US
 * before its next wake), at most one LC period: a request that meets them
 * waits 150 µs or more (docs/perf-log). NULL: nobody rotates there. */
static struct rot_member *turn_of(struct agent *a, struct rot_member **g, size_t n, uint64_t now,
				  uint64_t period_us)
{
	struct rot_member *cur = NULL, *next = NULL;
	size_t in = 0;

	membership(a, g, n, now);
	for (size_t i = 0; i < n; i++) {
		if (!g[i]->active)
			continue;
		in++;
		if (g[i]->turn_start == 0)
			continue;
		if (cur == NULL)
			cur = g[i];
		else
			turn_close(a, g[i], now); /* one turn at a time */
	}
	if (in == 0)
		return NULL;
	if (cur && now < cur->turn_start + period_us)
		return cur;
	if (cur && cur->turn_end == 0) {
		struct gap gap = lc_gap(a, cur->gpu, now, period_us);

		if (gap.period_us)
			cur->turn_end = rotate_gap_point(cur->turn_start + period_us, gap.period_us,
							 gap.last_us, gap.offset_us);
	}
	if (cur && now < cur->turn_end)
		return cur;
	if (cur) {
		a->n.turns_in_gap += cur->turn_end != 0;
		turn_close(a, cur, now);
	}
	owed_at_most_one_turn(g, n, period_us);
	for (size_t i = 0; i < n; i++) {
		if (!g[i]->active || (g[i] == cur && in > 1))
			continue;
		if (next == NULL || goes_before(g[i], next))
			next = g[i];
	}
	a->n.turns++;
	if (next != cur)
		log_turn(g, n, next, in);
	turn_open(next, now);
	return next;
}

/* t's process's member on t's runlist, made when it has none; NULL when
 * out of memory. */
static struct rot_member *member_of(struct tsg *t)
{
	struct rot_member *m = t->gate.member;

	if (m && m->proc == t->proc && m->gpu == t->gpu && m->engine == t->engine)
		return m;
	for (m = t->proc->rot; m; m = m->next)
		if (m->gpu == t->gpu && m->engine == t->engine)
			return m;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->proc = t->proc;
	m->gpu = t->gpu;
	m->engine = t->engine;
	m->next = t->proc->rot;
	t->proc->rot = m;
	return m;
}

void rotate_plan(struct agent *a, uint64_t now)
{
	uint64_t period_us = (uint64_t)a->cfg->policy.rotate_period_ms * 1000u;
	struct rot_member **g;
	size_t n = 0;

	for (struct proc *p = a->procs; p; p = p->next)
		for (struct rot_member *m = p->rot; m; m = m->next)
			m->tsgs = 0;
	for (struct tsg *t = a->tsgs; t; t = t->next) {
		t->gate.want = 0;
		t->gate.member = t->gate.rotate ? member_of(t) : NULL;
		if (t->gate.member)
			t->gate.member->tsgs++;
		else if (t->gate.rotate)
			log_error("rotation: out of memory; pid %d TSG 0x%x not gated",
				  (int)t->pid, t->h_tsg);
	}
	for (struct proc *p = a->procs; p; p = p->next)
		for (struct rot_member *m = p->rot; m; m = m->next)
			n += m->tsgs || m->active;
	if (n == 0)
		return;
	g = malloc(n * sizeof(*g));
	if (!g) {
		/* Nobody gated: every BE stays schedulable at its timeslice. */
		log_error("rotation: out of memory; no BE gated this pass");
		for (struct tsg *t = a->tsgs; t; t = t->next)
			t->gate.member = NULL;
		return;
	}
	n = 0;
	for (struct proc *p = a->procs; p; p = p->next)
		for (struct rot_member *m = p->rot; m; m = m->next)
			if (m->tsgs || m->active)
				g[n++] = m;
	qsort(g, n, sizeof(*g), by_runlist);
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && g[j]->gpu == g[i]->gpu && g[j]->engine == g[i]->engine; j++)
			;
		turn_of(a, g + i, j - i, now, period_us);
	}
	free(g);
	/* After turn_of only the holder of each rotation has a turn_start. */
	for (struct tsg *t = a->tsgs; t; t = t->next)
		if (t->gate.member) {
			t->gate.want = t->gate.member->turn_start == 0;
			t->gate.last_turn = t->gate.member->last_turn;
		}
}

unsigned rotate_processes(const struct agent *a, uint32_t gpu, uint32_t engine)
{
	unsigned n = 0;

	for (const struct proc *p = a->procs; p; p = p->next)
		for (const struct rot_member *m = p->rot; m; m = m->next)
			n += m->active && m->gpu == gpu && m->engine == engine;
	return n;
}

uint64_t rotate_wait_longest_us(const struct tsg *t, uint64_t now)
{
	const struct rot_member *m;
	uint64_t cur = 0;

	for (m = t->proc->rot; m; m = m->next)
		if (m->gpu == t->gpu && m->engine == t->engine)
			break;
	if (!m)
		return 0;
	if (m->active && m->waiting_since && now > m->waiting_since)
		cur = now - m->waiting_since;
	return cur > m->longest_wait_us ? cur : m->longest_wait_us;
}

uint64_t rotate_next_deadline(const struct agent *a)
{
	uint64_t period_us = (uint64_t)a->cfg->policy.rotate_period_ms * 1000u, next = 0;

	for (const struct proc *p = a->procs; p; p = p->next)
		for (const struct rot_member *m = p->rot; m; m = m->next) {
			uint64_t due;

			if (!m->active || !m->turn_start)
				continue;
			due = m->turn_end ? m->turn_end : m->turn_start + period_us;
			if (next == 0 || due < next)
				next = due;
		}
	for (const struct tsg *t = a->tsgs; t; t = t->next) {
		if (t->gate.leased) {
			uint64_t renew = t->gate.renewed + renew_after_us(a);

			if (next == 0 || renew < next)
				next = renew;
		}
	}
	return next;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rotate.c - taking turns: of the BEs the policy put in a rotation on one
 * runlist, exactly one is schedulable at a time and the others are gated
 * (their channels disabled by their own preempt agent), the turn passing
 * to the BE whose last turn is oldest every rotate_period_ms.
 *
 * Owns: the turn of every rotating TSG and whether it should be gated
 * (struct tsg_gate.want), when a gate must be renewed, and when the next
 * turn or renewal is due. Does not own: the decision who rotates
 * (policy.c), sending GATE and UNGATE (reconcile.c), executing them and
 * the lease (the preempt agent, docs/protocol.md "Gating").
 *
 * Why: with several BEs at any timeslice an LC request waits behind each
 * schedulable BE's slice; gating all but one gives the one-BE latency
 * with three or four BEs (docs/perf-log).
 */
#include "agent/agent.h"
#include "common/log.h"

#include <stdlib.h>

_Static_assert(POLICY_GATE_LEASE_MAX_MS <= GQ_GATE_LEASE_MAX_MS,
	       "the preempt agent accepts every lease the policy allows");

int rotate_gateable(const struct tsg *t)
{
	const struct peer *p = t->proc->peer;

	return p && p->hello && !p->broken && !p->stalled && p->can_gate && !t->gate.no_gate &&
	       !tsg_unverified(t);
}

/* Renew a gate when a quarter of its lease has passed: three renewals can
 * be lost or late before it lapses. */
static uint64_t renew_after_us(const struct agent *a)
{
	return (uint64_t)a->cfg->policy.gate_lease_ms * 1000u / 4u;
}

int rotate_renew_due(const struct agent *a, const struct tsg *t, uint64_t now)
{
	return t->gate.leased && now >= t->gate.renewed + renew_after_us(a);
}

static int by_runlist(const void *x, const void *y)
{
	const struct tsg *a = *(const struct tsg *const *)x, *b = *(const struct tsg *const *)y;

	if (a->gpu != b->gpu)
		return a->gpu < b->gpu ? -1 : 1;
	if (a->engine != b->engine)
		return a->engine < b->engine ? -1 : 1;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->h_tsg != b->h_tsg)
		return a->h_tsg < b->h_tsg ? -1 : 1;
	return a->h_client < b->h_client ? -1 : (a->h_client > b->h_client);
}

/* When an LC's requests come, for the turn changes on its GPU: its
 * period, latest start and where in its period a change begins (now_us()
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
	if (window_applies(a, lc, now)) {
		const struct policy_config *cfg = &a->cfg->policy;

		g.offset_us = (uint64_t)window_after(a, lc, now) + WINDOW_CHANGE_AFTER_US;
		if (g.offset_us + ROTATE_CHANGE_US + cfg->window_before_us <= lc->phase.period_us) {
			g.last_us = phase_grid(lc);
			return g;
		}
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

/* The member of g[0..n) whose turn it is now; starts a new turn when the
 * current one has lasted a period (or there is none). Where an LC's gap is
 * known when the period ends, the turn goes on until the change's controls
 * fit between the LC's requests (ROTATE_CHANGE_US before its next wake),
 * at most one LC period: a request that meets them waits 150 µs or more
 * (docs/perf-log). */
static struct tsg *turn_of(struct agent *a, struct tsg **g, size_t n, uint64_t now,
			   uint64_t period_us)
{
	struct tsg *cur = NULL, *next = NULL;

	for (size_t i = 0; i < n; i++) {
		if (g[i]->gate.turn_start == 0)
			continue;
		if (cur == NULL)
			cur = g[i];
		else
			g[i]->gate.turn_start = 0; /* one turn at a time */
	}
	if (cur && now < cur->gate.turn_start + period_us)
		return cur;
	if (cur && cur->gate.turn_end == 0) {
		struct gap gap = lc_gap(a, cur->gpu, now, period_us);

		if (gap.period_us)
			cur->gate.turn_end = rotate_gap_point(cur->gate.turn_start + period_us,
							      gap.period_us, gap.last_us,
							      gap.offset_us);
	}
	if (cur && now < cur->gate.turn_end)
		return cur;
	for (size_t i = 0; i < n; i++) {
		if (g[i] == cur && n > 1)
			continue;
		if (next == NULL || g[i]->gate.last_turn < next->gate.last_turn)
			next = g[i];
	}
	if (cur) {
		a->n.turns_in_gap += cur->gate.turn_end != 0;
		cur->gate.turn_start = 0;
		cur->gate.turn_end = 0;
	}
	a->n.turns++;
	next->gate.turn_start = now;
	next->gate.turn_end = 0;
	next->gate.last_turn = now;
	if (next != cur)
		log_debug("rotation: GPU %u engine %u: turn of pid %d TSG 0x%x (%zu BEs)", next->gpu,
			  next->engine, (int)next->pid, next->h_tsg, n);
	return next;
}

void rotate_plan(struct agent *a, uint64_t now)
{
	uint64_t period_us = (uint64_t)a->cfg->policy.rotate_period_ms * 1000u;
	struct tsg **g;
	size_t n = 0;

	for (struct tsg *t = a->tsgs; t; t = t->next) {
		t->gate.want = 0;
		if (!t->gate.rotate)
			t->gate.turn_start = t->gate.turn_end = 0;
		else
			n++;
	}
	if (n == 0)
		return;
	g = malloc(n * sizeof(*g));
	if (!g) {
		/* Nobody gated: every BE stays schedulable at its timeslice. */
		log_error("rotation: out of memory; no BE gated this pass");
		return;
	}
	n = 0;
	for (struct tsg *t = a->tsgs; t; t = t->next)
		if (t->gate.rotate)
			g[n++] = t;
	qsort(g, n, sizeof(*g), by_runlist);
	for (size_t i = 0, j; i < n; i = j) {
		struct tsg *turn;

		for (j = i + 1; j < n && g[j]->gpu == g[i]->gpu && g[j]->engine == g[i]->engine; j++)
			;
		turn = turn_of(a, g + i, j - i, now, period_us);
		for (size_t k = i; k < j; k++)
			g[k]->gate.want = g[k] != turn;
	}
	free(g);
}

uint64_t rotate_next_deadline(const struct agent *a)
{
	uint64_t period_us = (uint64_t)a->cfg->policy.rotate_period_ms * 1000u, next = 0;

	for (const struct tsg *t = a->tsgs; t; t = t->next) {
		uint64_t due = 0;

		if (t->gate.rotate && t->gate.turn_start)
			due = t->gate.turn_end ? t->gate.turn_end : t->gate.turn_start + period_us;
		if (t->gate.leased) {
			uint64_t renew = t->gate.renewed + renew_after_us(a);

			if (due == 0 || renew < due)
				due = renew;
		}
		if (due && (next == 0 || due < next))
			next = due;
	}
	return next;
}

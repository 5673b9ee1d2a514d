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
 * with three or four BEs (docs/PERF.md).
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

/* The member of g[0..n) whose turn it is now; starts a new turn when the
 * current one has lasted a period (or there is none). */
static struct tsg *turn_of(struct tsg **g, size_t n, uint64_t now, uint64_t period_us)
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
	for (size_t i = 0; i < n; i++) {
		if (g[i] == cur && n > 1)
			continue;
		if (next == NULL || g[i]->gate.last_turn < next->gate.last_turn)
			next = g[i];
	}
	if (cur)
		cur->gate.turn_start = 0;
	next->gate.turn_start = now;
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
			t->gate.turn_start = 0;
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
		turn = turn_of(g + i, j - i, now, period_us);
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
			due = t->gate.turn_start + period_us;
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

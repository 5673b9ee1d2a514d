/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_core_reconcile.c - unit tests of the core's reconcile.c, on the fake
 * clock and recording hooks of core_fixture.h: what a pass sends and in
 * what order (POLICY before its commands, the several-BE floor, wakes), and
 * the restart grace.
 */
#include "tests/agent/core_fixture.h"
#include "tests/check.h"

#include <stdlib.h>

/* The POLICY of a pass goes before its commands: a preempt agent handles
 * its messages in order, so libcuda's SET after our command is rewritten
 * to the new value rather than racing it. */
static void test_policy_before_commands(void)
{
	struct agent *a = agent_new();
	struct proc *be = proc_with_peer(a, 1, "best-effort");
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");
	size_t i;

	report(a, be, 0x10, RM_ENGINE_GR0, 2048);
	report(a, lc, 0x20, RM_ENGINE_GR0, 2048);
	reconcile(a);
	confirm_all(a, 0);
	reconcile(a); /* the SETs and the POLICY that change with them */
	i = last_sent(GQ_OP_SET_TIMESLICE, 1, 0);
	CHECK(i < nsent && sent[i].arg == 50 && last_gr[1] == 50);
	CHECK(policy_nsent[1] <= i);
	i = last_sent(GQ_OP_SET_TIMESLICE, 2, 0);
	CHECK(i < nsent && sent[i].arg == 100000 && last_gr[2] == 100000);
	CHECK(policy_nsent[2] <= i);
	agent_free(a);
}

/* POLICY for a process with a GR TSG is that TSG's value: a sole BE gets
 * 50, not the floor of two; two BEs beside an LC both get the floor. */
static void test_several_be_floor(void)
{
	struct tsg *tb, *tl, *t2;
	struct agent *a = be_beside_lc(&tb, &tl);
	struct proc *be2;
	size_t n;

	CHECK_EQ_U(last_gr[1], 50);
	CHECK_EQ_U(last_gr[2], 100000);
	be2 = proc_with_peer(a, 4, "best-effort");
	reconcile(a);
	CHECK_EQ_U(last_gr[4], 1000); /* one more BE on that runlist */
	n = nsent;
	t2 = report(a, be2, 0x40, RM_ENGINE_GR0, 2048);
	reconcile(a);
	confirm_all(a, n);
	reconcile(a);
	CHECK_EQ_U(tb->want.desired_ts, 1000);
	CHECK_EQ_U(t2->want.desired_ts, 1000);
	CHECK_EQ_U(last_gr[1], 1000);
	CHECK_EQ_U(count(GQ_OP_SET_TIMESLICE, 1, 1000), 1);
	agent_free(a);
}

/* POLICY asks an LC's preempt agent for wakes only while the LC is beside
 * a BE at lcUs and the policy has a lead: never a BE, never an LC alone or
 * launch-bound. */
static void test_wake_policy(void)
{
	struct tsg *tb, *tl;
	struct agent *a = be_beside_lc(&tb, &tl);
	struct proc *lc = proc_find(a, 2);
	size_t before;

	CHECK_EQ_U(last_wake[2], GQ_WAKE_WORD(100, 0)); /* the default */
	a->cfg->policy.wake_lead_us = 0;
	reconcile(a);
	CHECK_EQ_U(last_wake[2], 0); /* turned off */
	a->cfg->policy.wake_lead_us = 100;
	a->cfg->policy.wake_hold_us = 20;
	before = npolicy;
	reconcile(a);
	CHECK_EQ_U(last_wake[2], GQ_WAKE_WORD(100, 20));
	CHECK_EQ_U(last_wake[1], 0);
	CHECK(tl->want.wake && !tb->want.wake);
	CHECK_EQ_U(npolicy, before + 1); /* only the LC's POLICY changed */
	reconcile(a);
	CHECK_EQ_U(npolicy, before + 1); /* nothing new: nothing sent */

	/* Launch-bound: the runlist is at the driver's values, no wakes. */
	lc->busy.always = 1;
	reconcile(a);
	CHECK_EQ_U(last_wake[2], 0);
	lc->busy.always = 0;
	reconcile(a);
	CHECK_EQ_U(last_wake[2], GQ_WAKE_WORD(100, 20));

	/* The BE gone: the LC is alone, no wakes. */
	tsg_drop(a, tb);
	reconcile(a);
	CHECK_EQ_U(last_wake[2], 0);
	CHECK(!tl->want.wake);
	agent_free(a);
}

/* After a restart nothing is set until the earlier peers are back or the
 * grace ends; with no TSG at all the grace still ends. */
static void test_restart_grace(void)
{
	struct agent *a = agent_new();
	struct state_entry *e = calloc(1, sizeof(*e));
	struct proc *be, *lc;

	a->started_us = fake_now;
	e->pid = 99;
	a->expected = e;
	reconcile(a);
	CHECK(a->expected != NULL);
	CHECK(reconcile_next_deadline(a) == a->started_us + AGENT_RESTART_GRACE_MS * 1000ull);
	be = proc_with_peer(a, 1, "best-effort");
	lc = proc_with_peer(a, 2, "latency-critical");
	report(a, be, 0x10, RM_ENGINE_GR0, 2048);
	report(a, lc, 0x20, RM_ENGINE_GR0, 2048);
	reconcile(a);
	confirm_all(a, 0);
	reconcile(a);
	CHECK_EQ_U(count(GQ_OP_SET_TIMESLICE, 1, 50), 0); /* held */
	fake_now += AGENT_RESTART_GRACE_MS * 1000ull;
	reconcile(a);
	CHECK(a->expected == NULL);
	CHECK_EQ_U(count(GQ_OP_SET_TIMESLICE, 1, 50), 1);
	agent_free(a);

	/* no TSG: the grace must end anyway, and nothing is due after it */
	a = agent_new();
	a->started_us = fake_now;
	e = calloc(1, sizeof(*e));
	e->pid = 99;
	a->expected = e;
	fake_now += AGENT_RESTART_GRACE_MS * 1000ull + 1;
	reconcile(a);
	CHECK(a->expected == NULL);
	CHECK_EQ_U(reconcile_next_deadline(a), 0);
	agent_free(a);
}

int main(void)
{
	core_fixture_start();
	test_policy_before_commands();
	test_several_be_floor();
	test_wake_policy();
	test_restart_grace();
	CHECK_DONE();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_core_rotate.c - unit tests of the core's rotate.c, on the fake clock
 * and recording hooks of core_fixture.h: BEs taking turns beside an LC: one
 * schedulable at a time, leases, turn changes placed in an LC's gaps, turns
 * per process, and peers that lie or flip.
 */
#include "tests/agent/core_fixture.h"
#include "tests/check.h"

#include <string.h>

/* The BEs (pids 1, 4, 5) whose gate the core wants closed now. */
static unsigned gated_mask(struct tsg *const be[3])
{
	return (unsigned)be[0]->gate.want | (unsigned)be[1]->gate.want << 1 |
	       (unsigned)be[2]->gate.want << 2;
}

/* Several gateable BEs beside an LC take turns: one schedulable at a time,
 * the oldest turn next, every period; gates and turns hold leases the
 * core renews; the LC leaving ends the rotation with UNGATE 0. */
static void test_rotation(void)
{
	static const pid_t pids[3] = { 1, 4, 5 };
	struct agent *a = agent_new();
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");
	struct tsg *be[3], *tl;
	unsigned turns[3] = { 0, 0, 0 };
	size_t n;

	/* 100 ms turns (not the default) keep the steps below short. */
	a->cfg->policy.rotate_period_ms = 100;
	tl = report(a, lc, 0x20, RM_ENGINE_GR0, 2048);
	for (int i = 0; i < 3; i++) {
		struct proc *p = proc_with_peer(a, pids[i], "best-effort");

		p->peer->can_gate = 1;
		be[i] = report(a, p, 0x10, RM_ENGINE_GR0, 2048);
	}
	lc->peer->can_gate = 1;
	reconcile(a);
	confirm_all(a, 0);
	for (int round = 0; round < 4; round++) { /* sets, then gates, then turns */
		n = nsent;
		reconcile(a);
		answer_all(a, n);
	}
	for (int i = 0; i < 3; i++) {
		CHECK(be[i]->gate.rotate);
		CHECK_EQ_U(be[i]->want.desired_ts, 50);
		CHECK_EQ_U(be[i]->obs.applied_ts, 50);
		CHECK(be[i]->gate.leased);
		CHECK(be[i]->gate.gated == be[i]->gate.want);
	}
	CHECK(!tl->gate.rotate);
	/* Exactly one BE is schedulable. */
	CHECK(gated_mask(be) == 6 || gated_mask(be) == 5 || gated_mask(be) == 3);
	CHECK(tsg_state_of(be[0]) == TSG_CONVERGED);
	/* Thirty periods: the turn moves every period, each BE gets ten. */
	for (int k = 0; k < 30; k++) {
		unsigned before = gated_mask(be);

		fake_now += 100000;
		n = nsent;
		reconcile_new_tick(a);
		reconcile(a);
		CHECK(gated_mask(be) != before);
		for (int i = 0; i < 3; i++)
			turns[i] += !be[i]->gate.want;
		for (size_t i = n; i < nsent; i++) {
			CHECK(sent[i].op == GQ_OP_GATE || sent[i].op == GQ_OP_UNGATE);
			CHECK_EQ_U(sent[i].arg, 500); /* every member holds a lease */
		}
		answer_all(a, n);
	}
	CHECK(turns[0] == 10 && turns[1] == 10 && turns[2] == 10);
	/* How long each was held off, from the RESULTs (answered at once):
	 * gated two periods of three, each time for two periods (200 ms). */
	for (int i = 0; i < 3; i++) {
		CHECK_EQ_U(be[i]->gate.longest_us, 200000);
		CHECK(be[i]->gate.count >= 10 && be[i]->gate.count <= 11);
		CHECK(tsg_gated_total_us(be[i], fake_now) >= 1900000 &&
		      tsg_gated_total_us(be[i], fake_now) <= 2300000);
		CHECK(tsg_gated_longest_us(be[i], fake_now) == 200000);
	}
	/* Leases are renewed a quarter lease after they were granted (here
	 * 200 ms), turn or no turn: over 1.2 s in 50 ms steps, no member goes
	 * longer than that plus one step without a lease-bearing command. */
	{
		uint64_t last[3] = { fake_now, fake_now, fake_now }, worst = 0;

		a->cfg->policy.rotate_period_ms = 300;
		a->cfg->policy.gate_lease_ms = 800;
		for (int k = 0; k < 24; k++) {
			fake_now += 50000;
			n = nsent;
			reconcile_new_tick(a);
			reconcile(a);
			for (size_t c = n; c < nsent; c++) {
				int b = sent[c].pid == 1 ? 0 : sent[c].pid == 4 ? 1 : 2;

				CHECK_EQ_U(sent[c].arg, 800);
				if (fake_now - last[b] > worst)
					worst = fake_now - last[b];
				last[b] = fake_now;
			}
			answer_all(a, n);
		}
		CHECK(worst > 0 && worst <= 250000);
	}
	/* The agent stopped for 2 s (no tick, no message read): each gated
	 * BE's preempt agent ends its gate when the lease (800 ms here) runs
	 * out, and its report of that is read only when the agent runs
	 * again. The agent counts the gate up to the lease's end, not up to
	 * when it read the report. */
	{
		int g = be[0]->gate.gated ? 0 : be[1]->gate.gated ? 1 : 2;
		uint64_t since = be[g]->gate.since, lapse = be[g]->gate.lapse_by;
		uint64_t total = tsg_gated_total_us(be[g], fake_now);
		struct gq_tsg m;

		CHECK(be[g]->gate.gated && be[g]->gate.leased && lapse > since);
		CHECK(lapse <= fake_now + 800000 + AGENT_GATE_LAPSE_SLACK_US);
		fake_now += 2000000;
		/* Read meanwhile (a scrape): the open gate ends at the lapse too. */
		CHECK_EQ_U(tsg_gated_total_us(be[g], fake_now), total + (lapse - (fake_now - 2000000)));
		/* Running again, the agent ticks before it reads the report: the
		 * renewal it sends does not stretch the gate that lapsed. */
		n = nsent;
		reconcile_new_tick(a);
		reconcile(a);
		CHECK(!be[g]->gate.gated);
		CHECK(be[g]->gate.longest_us <= 800000 + 50000 + AGENT_GATE_LAPSE_SLACK_US);
		memset(&m, 0, sizeof(m));
		m.h_client = 0xc1d00000u + (uint32_t)pids[g];
		m.h_tsg = 0x10;
		m.h_device = 0x5c000001;
		m.engine_type = RM_ENGINE_GR0;
		m.fd = 3;
		m.timeslice_us = 2048;
		m.app_timeslice_us = 2048;
		m.interleave = GQ_UNKNOWN;
		m.flags = 0; /* the lease lapsed: enabled, out of the rotation */
		CHECK(tsg_upsert(a, be[g]->proc, &m, 1) == be[g]);
		CHECK(!be[g]->gate.gated && !be[g]->gate.leased);
		answer_all(a, n);
		CHECK(be[g]->gate.longest_us <= 800000 + 50000 + AGENT_GATE_LAPSE_SLACK_US);
		CHECK_EQ_U(tsg_gated_total_us(be[g], fake_now), total + (lapse - (fake_now - 2000000)));
		/* Back in the rotation at the next ticks. */
		for (int round = 0; round < 4; round++) {
			n = nsent;
			reconcile_new_tick(a);
			reconcile(a);
			answer_all(a, n);
		}
	}
	/* The LC goes: nobody rotates, every lease ends with UNGATE 0. */
	tsg_drop(a, tl);
	n = nsent;
	reconcile_new_tick(a);
	reconcile(a);
	CHECK_EQ_U(nsent - n, 3);
	for (size_t i = n; i < nsent; i++)
		CHECK(sent[i].op == GQ_OP_UNGATE && sent[i].arg == 0);
	answer_all(a, n);
	for (int i = 0; i < 3; i++)
		CHECK(!be[i]->gate.gated && !be[i]->gate.leased && !be[i]->gate.rotate);
	agent_free(a);
}

/* Runs the rotation in 1 ms steps for `steps` ms, the phases of lcs[0..n)
 * refreshed each step (a report every millisecond), and checks that every
 * turn changed exactly at its 100 ms period and none was placed (but the
 * one that may have been held when this began); returns how many changes
 * it saw after the first. */
static unsigned unplaced_changes(struct agent *a, struct tsg *const be[3], struct proc *const *lcs,
				 size_t nlcs, int steps)
{
	uint64_t last = 0, in_gap = a->n.turns_in_gap;
	unsigned changes = 0;

	for (int step = 0; step < steps; step++) {
		unsigned before = gated_mask(be);
		size_t n;

		for (size_t i = 0; i < nlcs; i++)
			lcs[i]->phase.rx_us = fake_now;
		fake_now += 1000;
		n = nsent;
		reconcile_new_tick(a);
		reconcile(a);
		answer_all(a, n);
		if (gated_mask(be) == before)
			continue;
		if (last) {
			CHECK_EQ_U(fake_now - last, 100000);
			changes++;
		}
		last = fake_now;
	}
	CHECK(a->n.turns_in_gap <= in_gap + 1);
	return changes;
}

/* The turn changes of a rotation fall in the middle of an LC's gap
 * between requests once its preempt agent said when they come (PHASE):
 * each at the first gap middle after the turn's period, never past it by
 * more than one LC period. No placement without a fresh phase, with a
 * period over a quarter of the turn, or with two LC processes. */
static void test_rotation_gap(void)
{
	static const pid_t pids[3] = { 1, 4, 5 };
	struct agent *a = agent_new();
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");
	struct tsg *be[3];
	uint64_t start, last = 0;
	unsigned changes = 0;
	size_t n;

	CHECK_EQ_U(rotate_gap_point(100, 10, 0, 5), 105);
	CHECK_EQ_U(rotate_gap_point(105, 10, 0, 5), 105);
	CHECK_EQ_U(rotate_gap_point(106, 10, 0, 5), 115);
	CHECK_EQ_U(rotate_gap_point(100, 10, 200, 5), 205); /* a start after the end */
	CHECK_EQ_U(rotate_gap_point(100, 10, 0, 8), 108);

	a->cfg->policy.rotate_period_ms = 100;
	report(a, lc, 0x20, RM_ENGINE_GR0, 2048);
	for (int i = 0; i < 3; i++) {
		struct proc *p = proc_with_peer(a, pids[i], "best-effort");

		p->peer->can_gate = 1;
		be[i] = report(a, p, 0x10, RM_ENGINE_GR0, 2048);
	}
	reconcile(a);
	confirm_all(a, 0);
	for (int round = 0; round < 4; round++) {
		n = nsent;
		reconcile(a);
		answer_all(a, n);
	}
	/* The LC's requests every 5 ms, the latest 1.4 ms ago: a change
	 * begins 3.4 ms after a start (1.5 ms of controls and the 100 µs
	 * wake lead before the next), on the 1 ms steps below. */
	lc->phase.have = 1;
	lc->phase.period_us = 5000;
	lc->phase.last_start_us = fake_now - 1400;
	start = fake_now;
	for (int step = 0; step < 1000; step++) { /* 1 s in 1 ms steps */
		unsigned before = gated_mask(be);
		uint64_t due;

		lc->phase.rx_us = fake_now; /* a report every step */
		fake_now += 1000;
		n = nsent;
		reconcile_new_tick(a);
		reconcile(a);
		answer_all(a, n);
		due = rotate_next_deadline(a);
		if (gated_mask(be) == before) {
			CHECK(due > fake_now);
			continue;
		}
		changes++;
		/* ROTATE_CHANGE_US and the lead before the next request. */
		CHECK_EQ_U((fake_now - lc->phase.last_start_us) % 5000,
			   5000 - ROTATE_CHANGE_US - a->cfg->policy.wake_lead_us);
		if (last)
			CHECK(fake_now - last >= 100000 && fake_now - last < 105000);
		last = fake_now;
	}
	CHECK(changes >= 9 && changes <= 10);
	CHECK(fake_now - start == 1000000);
	CHECK(a->n.turns_in_gap >= changes - 1 && a->n.turns_in_gap <= changes);

	/* A period over a quarter of the turn, or too short for the change,
	 * the lead and a short request (2 ms, 2.5 ms: under 2.6 ms): changes
	 * every 100 ms again. */
	for (int k = 0; k < 3; k++) {
		lc->phase.period_us = k == 0 ? 30000 : k == 1 ? 2000 : 2500;
		CHECK(unplaced_changes(a, be, &lc, 1, 400) >= 2);
	}

	/* A stale phase (no report for over a second) places nothing. */
	lc->phase.period_us = 5000;
	lc->phase.rx_us = fake_now - PHASE_FRESH_US - 1;
	CHECK(unplaced_changes(a, be, NULL, 0, 400) >= 2);

	/* With windows the change goes right after a window ends (its
	 * afterUs and WINDOW_CHANGE_AFTER_US past a start), not just ahead of
	 * the next request, where the next window's disable runs. */
	lc->phase.period_us = 5000;
	lc->phase.period_ns = 5000000;
	a->cfg->policy.window_after_us = 800;
	for (int i = 0; i < 3; i++)
		be[i]->proc->peer->can_window = 1; /* else no BE takes windows */
	{
		unsigned placed = 0;

		for (int step = 0; step < 400; step++) {
			unsigned before = gated_mask(be);

			lc->phase.rx_us = fake_now;
			fake_now += 100;
			n = nsent;
			reconcile_new_tick(a);
			reconcile(a);
			answer_all(a, n);
			if (gated_mask(be) == before)
				continue;
			CHECK_EQ_U((fake_now - lc->phase.last_start_us) % 5000,
				   800 + WINDOW_CHANGE_AFTER_US);
			placed++;
		}
		CHECK(placed >= 1);
	}
	a->cfg->policy.window_after_us = 0;

	/* Two LC processes with phases: no gap suits both, none is used. */
	{
		struct proc *lcs[2] = { lc, proc_with_peer(a, 7, "latency-critical") };

		report(a, lcs[1], 0x30, RM_ENGINE_GR0, 2048);
		lcs[1]->phase = lc->phase;
		lcs[1]->phase.last_start_us += 1700;
		CHECK(unplaced_changes(a, be, lcs, 2, 400) >= 2);
	}
	agent_free(a);
}

/* A BE whose preempt agent cannot gate (an older library, or its report
 * says so) keeps the whole runlist at the floor, and nobody is gated. */
static void test_rotation_needs_every_be(void)
{
	struct agent *a = agent_new();
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");
	struct proc *b1 = proc_with_peer(a, 1, "best-effort");
	struct proc *b2 = proc_with_peer(a, 4, "best-effort");
	struct tsg *t1, *t2;

	b1->peer->can_gate = 1; /* b2's library cannot */
	report(a, lc, 0x20, RM_ENGINE_GR0, 2048);
	t1 = report(a, b1, 0x10, RM_ENGINE_GR0, 2048);
	t2 = report(a, b2, 0x10, RM_ENGINE_GR0, 2048);
	reconcile(a);
	confirm_all(a, 0);
	reconcile(a);
	CHECK_EQ_U(t1->want.desired_ts, 1000);
	CHECK_EQ_U(t2->want.desired_ts, 1000);
	CHECK(!t1->gate.rotate && !t1->gate.want);
	CHECK_EQ_U(count(GQ_OP_GATE, 1, 500), 0);
	/* Now it can, but its report says this TSG cannot be gated. */
	b2->peer->can_gate = 1;
	t2->gate.no_gate = 1;
	reconcile(a);
	CHECK_EQ_U(t1->want.desired_ts, 1000);
	t2->gate.no_gate = 0;
	reconcile(a);
	CHECK_EQ_U(t1->want.desired_ts, 50);
	CHECK(t1->gate.rotate && t2->gate.rotate);
	agent_free(a);
}

/* Rotation tests: BE process pid with n gateable GR TSGs (0x10, 0x11, ...)
 * into t[0..n). */
static void be_proc(struct agent *a, pid_t pid, unsigned n, struct tsg **t)
{
	struct proc *p = proc_with_peer(a, pid, "best-effort");

	p->peer->can_gate = 1;
	for (unsigned k = 0; k < n; k++)
		t[k] = report(a, p, 0x10 + k, RM_ENGINE_GR0, 2048);
}

/* One step: us later, a tick, a pass, every command answered at once (a
 * preempt agent that does what it is told). Returns the controls (not
 * read-backs) pid got in it. */
static unsigned rot_step(struct agent *a, uint64_t us, pid_t pid)
{
	unsigned got = 0;

	fake_now += us;
	nsent = 0;
	reconcile_new_tick(a);
	reconcile(a);
	CHECK(nsent < MAX_SENT);
	for (size_t i = 0; i < nsent; i++)
		got += sent[i].pid == pid && sent[i].op != GQ_OP_GET_TIMESLICE;
	answer_all(a, 0);
	return got;
}

/* Every TSG of t[0..n) is schedulable (its preempt agent said ungated). */
static int all_ungated(struct tsg *const *t, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		if (t[k]->gate.gated)
			return 0;
	return 1;
}

/* A BE that says it is gated when it should run (its turn), after every
 * UNGATE: the UNGATE that ends a gate the agent sent goes at once; the
 * ones after it go within the per-TSG control bound, not one a pass. */
static void test_rotation_ungate_liar(void)
{
	struct agent *a = agent_new();
	struct tsg *honest[1], *liar[1];
	unsigned ungates = 0;

	report(a, proc_with_peer(a, 2, "latency-critical"), 0x20, RM_ENGINE_GR0, 2048);
	be_proc(a, 1, 1, honest);
	be_proc(a, 4, 1, liar);
	for (int k = 0; k < 20; k++)
		rot_step(a, 5000, 0);
	CHECK(liar[0]->gate.rotate && honest[0]->gate.rotate);
	for (int k = 0; k < 1000; k++) { /* 1 s in 1 ms steps */
		struct gq_tsg m;

		fake_now += 1000;
		nsent = 0;
		reconcile_new_tick(a);
		reconcile(a);
		for (size_t i = 0; i < nsent; i++)
			ungates += sent[i].pid == 4 && sent[i].op == GQ_OP_UNGATE;
		answer_all(a, 0);
		if (liar[0]->gate.want)
			continue;
		/* Its report: gated and leased, whatever it was told. */
		memset(&m, 0, sizeof(m));
		m.h_client = 0xc1d00000u + 4u;
		m.h_tsg = 0x10;
		m.h_device = 0x5c000001;
		m.engine_type = RM_ENGINE_GR0;
		m.fd = 3;
		m.timeslice_us = liar[0]->obs.applied_ts;
		m.app_timeslice_us = 2048;
		m.interleave = GQ_UNKNOWN;
		m.flags = GQ_TSG_F_GATED | GQ_TSG_F_LEASED;
		CHECK(tsg_upsert(a, liar[0]->proc, &m, 1) == liar[0]);
	}
	CHECK(ungates >= 2);
	CHECK(ungates <= AGENT_CONTROLS_BURST + 1000000u / 100000u + 2u);
	agent_free(a);
}

/* A BE that answers every GATE done and never disables its channel (the
 * tracker saw it allocated and never saw a DISABLE_CHANNELS of it) leaves
 * the rotation for good once two GATEs running found its channel on; the
 * runlist goes to the floor and the honest BE is gated no more. The
 * honest one's disable reaches the tracker only after its GATE's answer
 * (the worse order) and never counts against it. */
static void test_rotation_gate_unmade(void)
{
	struct agent *a = agent_new();
	struct tsg *honest[1], *liar[1];
	int out_at = -1, k;
	unsigned honest_gates_after = 0, liar_out_turns = 0;

	report(a, proc_with_peer(a, 2, "latency-critical"), 0x20, RM_ENGINE_GR0, 2048);
	be_proc(a, 1, 1, honest);
	be_proc(a, 4, 1, liar);
	tsg_channel_seen(honest[0], 0x5c000020, fake_now);
	tsg_channel_seen(liar[0], 0x5c000020, fake_now);
	for (k = 0; k < 400; k++) { /* 2 s in 5 ms steps */
		rot_step(a, 5000, 0);
		for (size_t i = 0; out_at >= 0 && i < nsent; i++)
			honest_gates_after += sent[i].pid == 1 && sent[i].op == GQ_OP_GATE;
		/* The tracker's record of what the honest one did. */
		(void)tsg_channel_state(honest[0], 0x5c000020, honest[0]->gate.said, fake_now);
		liar_out_turns += out_at >= 0 && liar[0]->gate.rotate;
		if (out_at < 0 && liar[0]->gate.unmade)
			out_at = k;
	}
	CHECK(out_at >= 0);
	CHECK(!honest[0]->gate.unmade);
	CHECK(!rotate_gateable(liar[0]) && rotate_gateable(honest[0]));
	CHECK(!liar[0]->gate.rotate && !honest[0]->gate.rotate);
	CHECK_EQ_U(liar_out_turns, 0);
	CHECK_EQ_U(honest_gates_after, 0);
	CHECK(!honest[0]->gate.want && !honest[0]->gate.gated && !honest[0]->gate.leased);
	CHECK_EQ_U(honest[0]->want.desired_ts, 1000); /* the floor */
	agent_free(a);
}

/* Turns are per process: a process with 32 GR TSGs beside one with a
 * single TSG gets half the time, not 32 turns in 33, and the single TSG
 * waits one turn at a time. */
static void test_rotation_per_process(void)
{
	struct agent *a = agent_new();
	struct tsg *many[32], *one[1];
	uint64_t sched_many = 0, sched_one = 0, total = 0;

	report(a, proc_with_peer(a, 2, "latency-critical"), 0x20, RM_ENGINE_GR0, 2048);
	be_proc(a, 1, 32, many);
	be_proc(a, 4, 1, one);
	for (int k = 0; k < 20; k++)
		rot_step(a, 5000, 0);
	CHECK(one[0]->gate.rotate && many[0]->gate.rotate && many[31]->gate.rotate);
	CHECK_EQ_U(rotate_processes(a, 0, RM_ENGINE_GR0), 2);
	CHECK_EQ_U(one[0]->want.desired_ts, 50);
	/* all 32 schedulable in their turn: at the floor, as several BEs */
	CHECK_EQ_U(many[0]->want.desired_ts, 1000);
	one[0]->gate.longest_us = 0;
	for (int k = 0; k < 4000; k++) { /* 20 s */
		rot_step(a, 5000, 0);
		sched_many += all_ungated(many, 32) ? 5000 : 0;
		sched_one += all_ungated(one, 1) ? 5000 : 0;
		total += 5000;
	}
	CHECK(sched_many >= total * 45 / 100 && sched_many <= total * 55 / 100);
	CHECK(sched_one >= total * 45 / 100 && sched_one <= total * 55 / 100);
	/* One turn of the other process (250 ms) and a step at a time. */
	CHECK(tsg_gated_longest_us(one[0], fake_now) >= 250000);
	CHECK(tsg_gated_longest_us(one[0], fake_now) <= 250000 + 2 * 5000);
	agent_free(a);
}

/* Four BEs, one with three contexts, one coming late, the turn changes
 * held to an LC's gaps (turns of varying length): each process is
 * schedulable within 10 % of the mean. */
static void test_rotation_fair_four(void)
{
	static const pid_t pids[4] = { 1, 4, 5, 6 };
	static const unsigned ntsg[4] = { 1, 3, 1, 1 };
	struct agent *a = agent_new();
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");
	struct tsg *t[4][3];
	uint64_t sched[4] = { 0, 0, 0, 0 }, mean = 0;

	report(a, lc, 0x20, RM_ENGINE_GR0, 2048);
	lc->phase.have = 1;
	lc->phase.period_us = 7000; /* a change waits up to 7 ms for a gap */
	lc->phase.last_start_us = fake_now;
	for (int i = 0; i < 3; i++)
		be_proc(a, pids[i], ntsg[i], t[i]);
	for (int k = 0; k < 400; k++) { /* 2 s with three */
		lc->phase.rx_us = fake_now;
		rot_step(a, 5000, 0);
	}
	be_proc(a, pids[3], ntsg[3], t[3]);
	for (int k = 0; k < 20; k++) {
		lc->phase.rx_us = fake_now;
		rot_step(a, 5000, 0);
	}
	CHECK_EQ_U(rotate_processes(a, 0, RM_ENGINE_GR0), 4);
	for (int k = 0; k < 12000; k++) { /* 60 s: 240 turns */
		lc->phase.rx_us = fake_now;
		rot_step(a, 5000, 0);
		for (int i = 0; i < 4; i++)
			sched[i] += all_ungated(t[i], ntsg[i]) ? 5000 : 0;
	}
	CHECK(a->n.turns_in_gap > 100);
	for (int i = 0; i < 4; i++)
		mean += sched[i] / 4;
	for (int i = 0; i < 4; i++) {
		CHECK(sched[i] >= mean * 90 / 100 && sched[i] <= mean * 110 / 100);
		/* three turns of the others at a time, each held at most 7 ms */
		for (unsigned k = 0; k < ntsg[i]; k++)
			CHECK(tsg_gated_longest_us(t[i][k], fake_now) <= 3 * (250000 + 7000) + 2 * 5000);
	}
	agent_free(a);
}

/* A BE whose preempt agent flips NO_GATE every 5 ms for 15 s: the other
 * BE gets fewer than 20 controls in any second (the membership's dwell
 * and the bound on controls per TSG), and still takes turns. */
static void test_rotation_flipper(void)
{
	struct agent *a = agent_new();
	struct tsg *victim[1], *flip[1];
	struct gq_tsg m;
	unsigned per_s = 0, worst = 0, gates = 0, total = 0;

	report(a, proc_with_peer(a, 2, "latency-critical"), 0x20, RM_ENGINE_GR0, 2048);
	be_proc(a, 1, 1, victim);
	be_proc(a, 4, 1, flip);
	for (int k = 0; k < 20; k++)
		rot_step(a, 5000, 1);
	CHECK(victim[0]->gate.rotate);
	memset(&m, 0, sizeof(m));
	m.h_client = 0xc1d00004u;
	m.h_tsg = 0x10;
	m.h_device = 0x5c000001;
	m.engine_type = RM_ENGINE_GR0;
	m.fd = 3;
	m.timeslice_us = GQ_UNKNOWN;
	m.app_timeslice_us = 2048;
	m.interleave = GQ_UNKNOWN;
	for (int k = 0; k < 3000; k++) { /* 15 s in 5 ms steps */
		size_t g0;
		unsigned got;

		m.flags = k % 2 ? GQ_TSG_F_NO_GATE : 0;
		CHECK(tsg_upsert(a, flip[0]->proc, &m, 1) == flip[0]);
		g0 = victim[0]->gate.count;
		got = rot_step(a, 5000, 1);
		gates += victim[0]->gate.count > g0;
		per_s += got;
		total += got;
		if (k % 200 == 199) {
			worst = per_s > worst ? per_s : worst;
			per_s = 0;
		}
	}
	CHECK(worst > 0 && worst < 20);
	CHECK(total < 15 * 20);
	CHECK(gates > 0); /* the rotation went on */
	CHECK(a->n.rotation_changes_held > 0);
	agent_free(a);
}

/* A stream of short-lived BEs (a new one every 200 ms, each living
 * 400 ms: at most three processes at once) beside an old one: a newcomer
 * queues behind those waiting, so the old BE is never gated longer than
 * two turns at a time. */
static void test_rotation_newcomers(void)
{
	struct agent *a = agent_new();
	struct tsg *old[1], *young[64];
	unsigned most = 0;

	report(a, proc_with_peer(a, 2, "latency-critical"), 0x20, RM_ENGINE_GR0, 2048);
	be_proc(a, 1, 1, old);
	for (int k = 0; k < 20; k++)
		rot_step(a, 5000, 0);
	for (int k = 0; k < 3000; k++) { /* 15 s */
		int i = k / 40;

		if (k % 40 == 0 && i < 64) {
			if (i >= 2)
				tsg_drop(a, young[i - 2]);
			be_proc(a, 10 + i, 1, &young[i]);
		}
		rot_step(a, 5000, 0);
		if (rotate_processes(a, 0, RM_ENGINE_GR0) > most)
			most = rotate_processes(a, 0, RM_ENGINE_GR0);
	}
	CHECK_EQ_U(most, 3);
	CHECK(old[0]->gate.count > 10);
	CHECK(tsg_gated_longest_us(old[0], fake_now) <= (most - 1) * 250000 + 2 * 5000);
	agent_free(a);
}

/* What t's preempt agent reports after a control: the TSG as it holds it. */
static void report_as_held(struct agent *a, struct tsg *t, int gated)
{
	CHECK(report_flags(a, t->proc, t->h_tsg, RM_ENGINE_GR0, t->obs.applied_ts,
			   (gated ? GQ_TSG_F_GATED : 0) | GQ_TSG_F_LEASED) == t);
}

/* Leases are renewed together: the pass that renews one whose quarter
 * lease is up also renews those past an eighth, and not the others; the
 * next renewal is due a quarter lease after the oldest left. A renewal's
 * RESULT and the report repeating the state leave the agent clean (no
 * pass for them); a report that changes the state does not. */
static void test_rotation_renew_together(void)
{
	struct agent *a = agent_new();
	struct tsg *be[3];
	uint64_t quarter = a->cfg->policy.gate_lease_ms * 1000ull / 4u;
	size_t n;

	a->cfg->policy.rotate_period_ms = 10000; /* no turn in this test */
	report(a, proc_with_peer(a, 2, "latency-critical"), 0x20, RM_ENGINE_GR0, 2048);
	for (int i = 0; i < 3; i++)
		be_proc(a, 10 + i, 1, &be[i]);
	for (int k = 0; k < 20; k++)
		rot_step(a, 5000, 0);
	for (int i = 0; i < 3; i++)
		CHECK(be[i]->gate.rotate && be[i]->gate.leased && be[i]->gate.gated == be[i]->gate.want);
	/* Leases of three ages: due now, past an eighth, not past it. */
	fake_now += quarter;
	be[0]->gate.renewed = fake_now - quarter;
	be[1]->gate.renewed = fake_now - quarter / 2u - 1000u;
	be[2]->gate.renewed = fake_now - quarter / 2u + 1000u;
	n = nsent;
	reconcile_new_tick(a);
	reconcile(a);
	CHECK(last_sent(be[0]->gate.want ? GQ_OP_GATE : GQ_OP_UNGATE, 10, n) < nsent);
	CHECK(last_sent(be[1]->gate.want ? GQ_OP_GATE : GQ_OP_UNGATE, 11, n) < nsent);
	CHECK_EQ_U(nsent - n, 2); /* not be[2]'s */
	a->dirty = 0;
	answer_all(a, n);
	CHECK(!a->dirty); /* renewals that took: nothing for a pass to do */
	report_as_held(a, be[0], be[0]->gate.gated);
	CHECK(!a->dirty);
	CHECK(reconcile_next_deadline(a) == be[2]->gate.renewed + quarter);
	/* Without be[2] due, no pass renews anything early. */
	fake_now = be[2]->gate.renewed + quarter - 1;
	n = nsent;
	reconcile(a);
	CHECK_EQ_U(nsent, n);
	/* A report that says otherwise needs a pass. */
	report_as_held(a, be[1], !be[1]->gate.gated);
	CHECK(a->dirty);
	agent_free(a);
}

/* hooks.renew_leases of the page test: what was stored, per peer. */
static unsigned page_stores;
static uint64_t page_until[64];

static void renew_leases(struct agent *a, struct peer *p, uint64_t until_us)
{
	(void)a;
	page_stores++;
	page_until[p->pid] = until_us;
}

/* A peer that took a lease page is renewed by a store there, never by a
 * COMMAND; a change of its gate still goes as one. A peer without one, or
 * a stalled one, is renewed by COMMAND. */
static void test_rotation_renew_in_page(void)
{
	struct agent *a = agent_new();
	struct tsg *be[2];
	uint64_t lease = a->cfg->policy.gate_lease_ms * 1000ull, quarter = lease / 4u;
	size_t n;

	a->hooks.renew_leases = renew_leases;
	page_stores = 0;
	memset(page_until, 0, sizeof(page_until));
	a->cfg->policy.rotate_period_ms = 10000; /* no turn in this test */
	report(a, proc_with_peer(a, 2, "latency-critical"), 0x20, RM_ENGINE_GR0, 2048);
	be_proc(a, 10, 1, &be[0]);
	be_proc(a, 11, 1, &be[1]);
	for (int k = 0; k < 20; k++)
		rot_step(a, 5000, 0);
	for (int i = 0; i < 2; i++)
		CHECK(be[i]->gate.rotate && be[i]->gate.leased && be[i]->gate.gated == be[i]->gate.want);
	be[0]->proc->peer->lease_page = 1;
	/* Both due: be[0]'s renewal is a store, be[1]'s a COMMAND. */
	fake_now += quarter;
	n = nsent;
	reconcile_new_tick(a);
	reconcile(a);
	CHECK_EQ_U(page_stores, 1);
	CHECK(page_until[10] == fake_now + lease);
	CHECK(be[0]->gate.renewed == fake_now);
	CHECK(be[0]->gate.lapse_by == fake_now + lease + AGENT_GATE_LAPSE_SLACK_US);
	CHECK(last_sent(be[1]->gate.want ? GQ_OP_GATE : GQ_OP_UNGATE, 11, n) < nsent);
	CHECK_EQ_U(nsent - n, 1); /* nothing for be[0] */
	answer_all(a, n);
	/* Many quarters on, still no COMMAND to be[0], a store each time. */
	for (int k = 0; k < 8; k++) {
		fake_now += quarter;
		n = nsent;
		reconcile_new_tick(a);
		reconcile(a);
		CHECK(last_sent(GQ_OP_GATE, 10, n) == nsent &&
		      last_sent(GQ_OP_UNGATE, 10, n) == nsent);
		answer_all(a, n);
	}
	CHECK_EQ_U(page_stores, 9);
	CHECK(page_until[10] == fake_now + lease);
	/* A stalled peer's lease is not renewed through its page. */
	be[0]->proc->peer->stalled = 1;
	fake_now += quarter;
	reconcile_new_tick(a);
	reconcile(a);
	CHECK_EQ_U(page_stores, 9);
	agent_free(a);
}

int main(void)
{
	core_fixture_start();
	test_rotation();
	test_rotation_renew_together();
	test_rotation_renew_in_page();
	test_rotation_needs_every_be();
	test_rotation_gap();
	test_rotation_per_process();
	test_rotation_ungate_liar();
	test_rotation_gate_unmade();
	test_rotation_fair_four();
	test_rotation_flipper();
	test_rotation_newcomers();
	CHECK_DONE();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_core_tsg.c - unit tests of the core's tsg.c, on the fake clock and
 * recording hooks of core_fixture.h: a TSG's claim and its read-back, the
 * belief of what the RM holds, reverts, the per-process claim limit, and
 * the time a TSG is held off (its gate as said and as the RM holds it).
 */
#include "tests/agent/core_fixture.h"
#include "tests/check.h"

#include <errno.h>
#include <string.h>

/* Without the tracker a claim moves nobody until it is read back, and one
 * the RM does not know is refused for good. */
static void test_unverified_claims(void)
{
	struct agent *a = agent_new();
	struct proc *be = proc_with_peer(a, 1, "best-effort");
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");
	struct proc *liar = proc_with_peer(a, 3, "best-effort");
	struct tsg *tb = report(a, be, 0x10, RM_ENGINE_GR0, 2048), *tl, *tx;

	CHECK(tb && tb->claim == TSG_CLAIM_READBACK);
	reconcile(a);
	CHECK_EQ_U(nsent, 1);
	CHECK(sent[0].op == GQ_OP_GET_TIMESLICE);
	confirm_all(a, 0);
	CHECK(tb->claim == TSG_CLAIM_CONFIRMED);
	tl = report(a, lc, 0x20, RM_ENGINE_GR0, 2048);
	reconcile(a);
	/* the LC is unconfirmed: the BE stays at its baseline */
	CHECK_EQ_U(count(GQ_OP_SET_TIMESLICE, 1, 50), 0);
	CHECK_EQ_U(tb->want.desired_ts, 2048);
	confirm_all(a, 1);
	CHECK(tl->claim == TSG_CLAIM_CONFIRMED);
	reconcile(a);
	CHECK_EQ_U(count(GQ_OP_SET_TIMESLICE, 1, 50), 1);
	CHECK_EQ_U(count(GQ_OP_SET_TIMESLICE, 2, 100000), 1);
	/* a claim the RM does not know */
	tx = report(a, liar, 0x30, RM_ENGINE_GR0, 2048);
	reconcile(a);
	for (size_t i = 0; i < nsent; i++)
		if (sent[i].pid == 3 && sent[i].op == GQ_OP_GET_TIMESLICE)
			answer(a, i, RM_ERR_INVALID_OBJECT_HANDLE, 0);
	CHECK(tx->claim == TSG_CLAIM_REFUSED);
	CHECK(tsg_state_of(tx) == TSG_REFUSED);
	CHECK_EQ_U(a->n.claims_refused_readback, 1);
	reconcile(a);
	CHECK_EQ_U(tb->want.desired_ts, 50); /* not the several-BE floor */
	CHECK_EQ_U(count(GQ_OP_SET_TIMESLICE, 1, 1000), 0);
	CHECK_EQ_U(count(GQ_OP_GET_TIMESLICE, 3, 0), 1); /* refused for good */
	/* an unmanaged process's claim is not read back, and shown unmanaged */
	tx = report(a, proc_with_peer(a, 5, "unmanaged"), 0x50, RM_ENGINE_GR0, 2048);
	reconcile(a);
	CHECK_EQ_U(count(GQ_OP_GET_TIMESLICE, 5, 0), 0);
	CHECK(tsg_state_of(tx) == TSG_UNMANAGED);
	CHECK(tsg_unverified(tx));
	agent_free(a);
}

/* A millisecond later someone sets the BE's timeslice back to 2048 and
 * a pass runs: the index of the SET it sent, or nsent. */
static size_t revert_pass(struct agent *a, struct tsg *tb)
{
	size_t n = nsent;

	fake_now += 1000;
	tsg_observe_ts(tb, 2048, fake_now);
	reconcile_new_tick(a);
	reconcile(a);
	return last_sent(GQ_OP_SET_TIMESLICE, 1, n);
}

/* One revert; whether a SET of 50 went out at once (answered NV_OK). */
static int revert_once(struct agent *a, struct tsg *tb)
{
	size_t i = revert_pass(a, tb);

	if (i == nsent)
		return 0;
	CHECK(sent[i].arg == 50);
	answer(a, i, RM_OK, 50);
	return 1;
}

/* Three reverts are set again at once, each later one waits twice as long
 * as the one before (1 s up to 60 s), listed as pending with the reason; a
 * value that held for 10 s forgets them; a SET the RM refused arms none. */
static void test_revert(void)
{
	struct tsg *tb, *tl;
	struct agent *a = be_beside_lc(&tb, &tl);
	uint32_t waits[] = { 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000 };

	CHECK(tsg_state_of(tb) == TSG_CONVERGED && tb->revert[TSG_TIMESLICE].set_value == 50);
	for (int k = 0; k < 3; k++)
		CHECK(revert_once(a, tb));
	CHECK_EQ_U(tb->revert[TSG_TIMESLICE].recent, 3);
	for (size_t k = 0; k < sizeof(waits) / sizeof(waits[0]); k++) {
		size_t n;

		CHECK(!revert_once(a, tb));
		CHECK_EQ_U(tb->revert[TSG_TIMESLICE].backoff_ms, waits[k]);
		CHECK(tb->revert[TSG_TIMESLICE].until == fake_now + waits[k] * 1000ull);
		CHECK(tsg_state_of(tb) == TSG_PENDING);
		CHECK(strstr(tb->sent.error, "set back to 2048 us") != NULL);
		CHECK(reconcile_next_deadline(a) <= tb->revert[TSG_TIMESLICE].until);
		fake_now = tb->revert[TSG_TIMESLICE].until - 1;
		n = nsent;
		reconcile_new_tick(a);
		reconcile(a);
		CHECK(last_sent(GQ_OP_SET_TIMESLICE, 1, n) == nsent); /* not yet */
		fake_now++;
		reconcile(a);
		n = last_sent(GQ_OP_SET_TIMESLICE, 1, n);
		CHECK(n < nsent && sent[n].arg == 50);
		answer(a, n, RM_OK, 50);
		CHECK(tb->sent.error[0] == '\0' && tsg_state_of(tb) == TSG_CONVERGED);
	}
	/* The process sets the policy's value itself during a wait: the wait
	 * and its reason end. */
	CHECK(!revert_once(a, tb));
	CHECK(tb->revert[TSG_TIMESLICE].until > fake_now);
	tsg_observe_ts(tb, 50, fake_now);
	reconcile(a);
	CHECK(tb->revert[TSG_TIMESLICE].until == 0 && tb->sent.error[0] == '\0');
	CHECK(tsg_state_of(tb) == TSG_CONVERGED);
	tsg_revert_arm(tb, TSG_TIMESLICE, 50); /* as a SET of ours would */
	CHECK_EQ_U(tb->revert[TSG_TIMESLICE].total, 4 + sizeof(waits) / sizeof(waits[0]));
	CHECK_EQ_U(a->n.reverts, tb->revert[TSG_TIMESLICE].total);
	CHECK_EQ_U(tl->revert[TSG_TIMESLICE].total, 0);
	/* 50 holds for 10 s: the next revert is the first again. */
	fake_now += AGENT_REVERT_QUIET_MS * 1000ull;
	CHECK(revert_once(a, tb));
	CHECK_EQ_U(tb->revert[TSG_TIMESLICE].recent, 1);
	CHECK_EQ_U(tb->revert[TSG_TIMESLICE].backoff_ms, 0);
	/* A SET the RM refused arms nothing: what follows is its own backoff. */
	{
		size_t i = revert_pass(a, tb);

		CHECK(i < nsent);
		answer(a, i, RM_ERR_INVALID_ARGUMENT, 0);
		CHECK(tb->revert[TSG_TIMESLICE].set_value == GQ_UNKNOWN);
		CHECK_EQ_U(tb->revert[TSG_TIMESLICE].recent, 2);
	}
	agent_free(a);
}

/* The interleave level has reverts of its own: a BE whose level someone
 * keeps setting back waits like a timeslice, and the timeslice, which
 * nobody touches, is set meanwhile. */
static void test_revert_interleave(void)
{
	struct tsg *tb, *tl;
	struct agent *a = be_beside_lc(&tb, &tl);
	size_t n, i;

	a->cfg->policy.be_interleave = RM_INTERLEAVE_LOW;
	for (int k = 0; k < 4; k++) {
		n = nsent;
		fake_now += 1000;
		tsg_observe_il(tb, RM_INTERLEAVE_MEDIUM, fake_now); /* set back */
		reconcile_new_tick(a);
		reconcile(a);
		i = last_sent(GQ_OP_SET_INTERLEAVE, 1, n);
		CHECK(i < nsent && sent[i].arg == RM_INTERLEAVE_LOW);
		if (i < nsent)
			answer(a, i, RM_OK, 0);
	}
	/* k = 0 was the first SET; three reverts (k = 1, 2, 3) were answered
	 * at once, the fourth waits. */
	n = nsent;
	fake_now += 1000;
	tsg_observe_il(tb, RM_INTERLEAVE_MEDIUM, fake_now);
	reconcile_new_tick(a);
	reconcile(a);
	CHECK(last_sent(GQ_OP_SET_INTERLEAVE, 1, n) == nsent);
	CHECK_EQ_U(tb->revert[TSG_INTERLEAVE].backoff_ms, AGENT_REVERT_BACKOFF_MIN_MS);
	CHECK(strstr(tb->sent.error, "interleave level set back to 1") != NULL);
	CHECK_EQ_U(tb->revert[TSG_TIMESLICE].total, 0);
	/* The timeslice, set back once meanwhile, goes at once. */
	tsg_observe_ts(tb, 2048, fake_now);
	reconcile(a);
	i = last_sent(GQ_OP_SET_TIMESLICE, 1, n);
	CHECK(i < nsent && sent[i].arg == 50);
	answer(a, i, RM_OK, 50);
	CHECK(reconcile_next_deadline(a) <= tb->revert[TSG_INTERLEAVE].until);
	fake_now = tb->revert[TSG_INTERLEAVE].until;
	n = nsent;
	reconcile(a);
	i = last_sent(GQ_OP_SET_INTERLEAVE, 1, n);
	CHECK(i < nsent && sent[i].arg == RM_INTERLEAVE_LOW);
	CHECK_EQ_U(tb->revert[TSG_INTERLEAVE].total, 4);
	CHECK_EQ_U(tb->revert[TSG_TIMESLICE].total, 1);
	CHECK_EQ_U(a->n.reverts, 5);
	agent_free(a);
}

/* The belief follows whoever told the RM last: a report repeating an
 * earlier one after our own SET is believed, and corrected. */
static void test_belief_latest(void)
{
	struct tsg *tb, *tl;
	struct agent *a = be_beside_lc(&tb, &tl);
	struct proc *be = proc_find(a, 1);
	size_t n = count(GQ_OP_SET_TIMESLICE, 1, 50);

	report(a, be, 0x10, RM_ENGINE_GR0, 1000);
	fake_now += 10;
	reconcile(a);
	CHECK_EQ_U(count(GQ_OP_SET_TIMESLICE, 1, 50), n + 1);
	answer(a, nsent - 1, RM_OK, 50);
	fake_now += 10;
	report(a, be, 0x10, RM_ENGINE_GR0, 1000); /* the same report again */
	CHECK_EQ_U(tb->obs.applied_ts, 1000);
	CHECK(tsg_state_of(tb) == TSG_PENDING);
	CHECK(strcmp(tsg_state(a, tb), "pending") == 0);
	/* a RESULT of a SET sent before the report does not undo it */
	tsg_observe_ts(tb, 50, fake_now - 5);
	CHECK_EQ_U(tb->obs.applied_ts, 1000);
	agent_free(a);
}

/* Claims past the per-process limit are refused with EDQUOT. */
static void test_claim_limits(void)
{
	struct agent *a = agent_new();
	struct proc *p = proc_with_peer(a, 1, "best-effort");
	unsigned ok = 0;

	for (unsigned i = 0; i < AGENT_CLAIMS_PER_PROC + 10; i++) {
		errno = 0;
		if (report(a, p, 0x1000 + i, RM_ENGINE_GR0, 2048))
			ok++;
		else
			CHECK(errno == EDQUOT);
	}
	CHECK_EQ_U(ok, AGENT_CLAIMS_PER_PROC);
	CHECK_EQ_U(p->claims, AGENT_CLAIMS_PER_PROC);
	tsg_drop_pid(a, 1, 0, 0, TSG_SRC_PREEMPT);
	CHECK_EQ_U(p->claims, 0);
	CHECK_EQ_U(p->uid->claims, 0);
	CHECK_EQ_U(a->ntsgs, 0);
	agent_free(a);
}

/* The time a TSG is held off: a period opens when it is said gated (again
 * changes nothing) and closes when it is said not; the open one counts in
 * the total and the longest as it goes. */
static void test_gate_time(void)
{
	struct tsg t;

	memset(&t, 0, sizeof(t));
	tsg_gate_note(&t, 0, 50);
	CHECK(t.gate.count == 0 && tsg_gated_total_us(&t, 60) == 0);
	tsg_gate_note(&t, 1, 100);
	tsg_gate_note(&t, 1, 150);
	CHECK(t.gate.gated && t.gate.count == 1);
	CHECK(tsg_gated_total_us(&t, 250) == 150 && tsg_gated_longest_us(&t, 250) == 150);
	tsg_gate_note(&t, 0, 400);
	CHECK(!t.gate.gated && t.gate.total_us == 300 && t.gate.longest_us == 300);
	CHECK(tsg_gated_total_us(&t, 10000) == 300 && tsg_gated_longest_us(&t, 10000) == 300);
	tsg_gate_note(&t, 1, 500);
	CHECK(t.gate.count == 2);
	CHECK(tsg_gated_total_us(&t, 900) == 700 && tsg_gated_longest_us(&t, 900) == 400);
	tsg_gate_note(&t, 0, 600);
	CHECK(t.gate.total_us == 400 && t.gate.longest_us == 300);
	/* A clock that steps back closes the period at zero length. */
	tsg_gate_note(&t, 1, 1000);
	tsg_gate_note(&t, 0, 900);
	CHECK(t.gate.count == 3 && t.gate.total_us == 400 && t.gate.longest_us == 300);
}

/* A gate as the RM holds it: once the tracker knows a TSG's channels, its
 * preempt agent's word counts only while the RM holds all of them off;
 * a channel freed takes its state with it (the others' bits kept). */
static void test_gate_channels(void)
{
	struct tsg t;

	memset(&t, 0, sizeof(t));
	tsg_channel_seen(&t, 0x5c000021, 10);
	tsg_channel_seen(&t, 0x5c000022, 10);
	tsg_channel_seen(&t, 0x5c000021, 10); /* again: once */
	CHECK(t.kch.n == 2);
	/* Said gated, nothing disabled: not gated (a liar). */
	tsg_gate_note(&t, 1, 100);
	CHECK(t.gate.said && !t.gate.gated && t.gate.count == 0);
	CHECK(tsg_channel_state(&t, 0x5c000021, 1, 150) && !t.gate.gated);
	CHECK(!tsg_channel_state(&t, 0x5c000099, 1, 160)); /* not its channel */
	CHECK(tsg_channel_state(&t, 0x5c000022, 1, 200) && t.gate.gated && t.gate.count == 1);
	/* Enabled by the RM while still said gated: ungated at once. */
	CHECK(tsg_channel_state(&t, 0x5c000021, 0, 300) && !t.gate.gated);
	CHECK(t.gate.total_us == 100 && t.gate.longest_us == 100);
	/* The enabled channel freed: the other (still off) is all there is. */
	tsg_channel_gone(&t, 0x5c000021, 400);
	CHECK(t.kch.n == 1 && t.kch.h[0] == 0x5c000022 && t.kch.off == 1u);
	CHECK(t.gate.gated && t.gate.count == 2);
	tsg_gate_note(&t, 0, 500);
	CHECK(!t.gate.gated && t.gate.total_us == 200);
	/* The last freed: the word alone again. */
	tsg_channel_gone(&t, 0x5c000022, 600);
	CHECK(t.kch.n == 0 && t.kch.off == 0);
	tsg_gate_note(&t, 1, 700);
	CHECK(t.gate.gated);
	/* At most TSG_KCHANS_MAX channels are kept. */
	for (rm_handle h = 0; h < TSG_KCHANS_MAX + 2u; h++)
		tsg_channel_seen(&t, 0x5c000100 + h, 800);
	CHECK(t.kch.n == TSG_KCHANS_MAX && !t.gate.gated);
}

int main(void)
{
	core_fixture_start();
	test_unverified_claims();
	test_belief_latest();
	test_revert();
	test_revert_interleave();
	test_gate_time();
	test_gate_channels();
	test_claim_limits();
	CHECK_DONE();
}

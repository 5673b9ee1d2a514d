/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_core_cmd.c - unit tests of the core's cmd.c, on the fake clock and
 * recording hooks of core_fixture.h: commands in flight, their backoff, and
 * what a read-back answers (verifyIntervalS, a direct read that fails).
 */
#include "tests/agent/core_fixture.h"
#include "tests/check.h"

#include <errno.h>
#include <string.h>

/* One command in flight per TSG; a failure backs off 100 ms, doubling. */
static void test_inflight_and_backoff(void)
{
	struct tsg *tb, *tl;
	struct agent *a = be_beside_lc(&tb, &tl);
	size_t n;

	CHECK(tsg_state_of(tb) == TSG_CONVERGED);
	tsg_observe_ts(tb, 2048, fake_now); /* someone set it back */
	reconcile(a);
	n = nsent;
	CHECK(sent[n - 1].op == GQ_OP_SET_TIMESLICE && sent[n - 1].arg == 50);
	reconcile(a);
	reconcile(a);
	CHECK_EQ_U(nsent, n); /* in flight: nothing more */
	answer(a, n - 1, RM_ERR_INVALID_ARGUMENT, 0);
	CHECK(tb->sent.backoff_until == fake_now + 100000);
	CHECK(tsg_state_of(tb) == TSG_FAILED);
	fake_now += 50000;
	reconcile(a);
	CHECK_EQ_U(nsent, n); /* backing off */
	fake_now += 60000;
	reconcile(a);
	CHECK_EQ_U(nsent, n + 1);
	answer(a, n, RM_ERR_INVALID_ARGUMENT, 0);
	CHECK(tb->sent.backoff_until == fake_now + 200000);
	CHECK(reconcile_next_deadline(a) == fake_now + 200000);
	agent_free(a);
}

/* A TSG we set is read back a second later, then every verifyIntervalS
 * (on the whole second at or after it, where the reads of other TSGs fall
 * too): a read that agrees changes nothing; one that finds another value
 * is counted and the TSG set again; a read that never answers is not
 * repeated before the next interval; 0 turns the reads off. */
static void test_verify(void)
{
	struct tsg *tb, *tl;
	struct agent *a = be_beside_lc_verify(&tb, &tl, 60);
	uint64_t iv = 60ull * 1000000ull;
	size_t n, i;

	CHECK(tsg_state_of(tb) == TSG_CONVERGED);
	CHECK(tb->verify.due == fake_now + AGENT_VERIFY_SETTLE_MS * 1000ull);
	CHECK(tb->verify.at == 0);
	CHECK(reconcile_next_deadline(a) == tb->verify.due);
	fake_now = tb->verify.due - 1;
	n = nsent;
	reconcile(a);
	CHECK_EQ_U(nsent, n); /* not yet */
	fake_now++;
	reconcile(a);
	i = last_sent(GQ_OP_GET_TIMESLICE, 1, n);
	CHECK(i < nsent);
	CHECK(last_sent(GQ_OP_GET_TIMESLICE, 2, n) < nsent); /* the LC's too */
	CHECK(tsg_state_of(tb) == TSG_CONVERGED); /* a read on its way changes nothing */
	answer(a, i, RM_OK, 50);
	CHECK_EQ_U(a->n.verify_reads, 1);
	CHECK_EQ_U(a->n.verify_mismatches, 0);
	CHECK(tb->verify.at == fake_now &&
	      tb->verify.due == (fake_now + iv + 999999u) / 1000000u * 1000000u);
	CHECK(tl->verify.due == tb->verify.due); /* the LC's read falls in the same pass */
	CHECK(tsg_state_of(tb) == TSG_CONVERGED);
	/* The RM holds libcuda's value behind our back. */
	fake_now = tb->verify.due - 1;
	n = nsent;
	reconcile(a);
	CHECK(last_sent(GQ_OP_GET_TIMESLICE, 1, n) == nsent); /* not yet */
	fake_now++;
	n = nsent;
	reconcile(a);
	i = last_sent(GQ_OP_GET_TIMESLICE, 1, n);
	CHECK(i < nsent);
	answer(a, i, RM_OK, 2048);
	CHECK_EQ_U(a->n.verify_mismatches, 1);
	CHECK_EQ_U(tb->verify.mismatches, 1);
	CHECK_EQ_U(tb->obs.applied_ts, 2048);
	CHECK(tsg_state_of(tb) == TSG_PENDING);
	n = nsent;
	reconcile(a);
	i = last_sent(GQ_OP_SET_TIMESLICE, 1, n);
	CHECK(i < nsent && sent[i].arg == 50);
	answer(a, i, RM_OK, 50);
	CHECK(tb->verify.due == fake_now + AGENT_VERIFY_SETTLE_MS * 1000ull);
	/* A read that does not answer: nothing more until the next interval. */
	fake_now += AGENT_VERIFY_SETTLE_MS * 1000ull;
	n = nsent;
	reconcile(a);
	CHECK(last_sent(GQ_OP_GET_TIMESLICE, 1, n) < nsent);
	n = nsent;
	fake_now += 1000000;
	cmd_expire(a); /* its deadline passes */
	reconcile(a);
	CHECK(last_sent(GQ_OP_GET_TIMESLICE, 1, n) == nsent);
	/* Off: no read is due. */
	a->cfg->verify_interval_s = 0;
	fake_now += 2 * iv;
	n = nsent;
	reconcile(a);
	CHECK(last_sent(GQ_OP_GET_TIMESLICE, 1, n) == nsent);
	agent_free(a);
}

/* A read-back that the direct path cannot carry (the fd took no control
 * from the agent: an errno) goes through the preempt agent next time,
 * rather than failing again every interval. */
static void test_verify_direct_fallback(void)
{
	struct tsg *tb, *tl;
	struct agent *a = be_beside_lc_verify(&tb, &tl, 60);
	static int direct_stand_in; /* never dereferenced by the core */
	struct cmd_outcome o;
	size_t n, i;

	a->caps = (struct caps){ .known = 1, .eff = ~0ull, .ptrace_scope = -1 };
	a->direct = (struct direct *)(void *)&direct_stand_in;
	a->hooks.submit_direct = submit_direct;
	fake_now = tb->verify.due;
	n = nsent;
	reconcile(a);
	i = last_sent(GQ_OP_GET_TIMESLICE, 1, n);
	CHECK(i < nsent && sent[i].path == PATH_DIRECT);
	memset(&o, 0, sizeof(o));
	o.err = ENOTTY;
	cmd_direct_result(a, sent[i].seq, &o);
	CHECK(tb->readback_direct_failed);
	CHECK_EQ_U(a->n.verify_mismatches, 0);
	fake_now += 60ull * 1000000ull;
	n = nsent;
	reconcile_new_tick(a);
	reconcile(a);
	i = last_sent(GQ_OP_GET_TIMESLICE, 1, n);
	CHECK(i < nsent && sent[i].path == PATH_IN_PROCESS);
	a->direct = NULL;
	agent_free(a);
}

int main(void)
{
	core_fixture_start();
	test_inflight_and_backoff();
	test_verify();
	test_verify_direct_fallback();
	CHECK_DONE();
}

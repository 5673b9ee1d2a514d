/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_core.c - unit tests of the node agent's core (gpuqos_core: tsg.c,
 * cmd.c, reconcile.c, state.c and the pure files) linked alone: no
 * process, no socket, no timer. The clock is fake (fake_clock, installed
 * as the core's clock); the control paths are hooks that record what the
 * core submits. Each test names the rule it holds the core to.
 */
#include "agent/core/core.h"
#include "tests/check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fake_now = 1000000000ull;

static uint64_t fake_clock(void)
{
	return fake_now;
}

/* What the core submitted, in order. */
#define MAX_SENT 65536
static struct sent {
	enum path path;
	pid_t pid;
	rm_handle h_tsg;
	uint32_t op, seq;
	uint64_t arg;
} sent[MAX_SENT];
static size_t nsent;
static size_t npolicy;
static uint32_t last_gr[8], last_wake[8];
static size_t policy_nsent[8]; /* commands submitted when pid's last POLICY went */

static int submit_in_process(struct agent *a, struct cmd *c)
{
	(void)a;
	if (nsent < MAX_SENT)
		sent[nsent++] = (struct sent){ PATH_IN_PROCESS, c->pid, c->h_tsg, c->op, c->seq, c->arg };
	return 0;
}

static int submit_direct(struct agent *a, const struct tsg *t, struct cmd *c)
{
	(void)a;
	(void)t;
	if (nsent < MAX_SENT)
		sent[nsent++] = (struct sent){ PATH_DIRECT, c->pid, c->h_tsg, c->op, c->seq, c->arg };
	return 0;
}

static int send_policy(struct agent *a, struct peer *p, uint32_t gr, uint32_t copy, uint32_t wake)
{
	(void)a;
	p->policy_valid = 1;
	p->policy_gr = gr;
	p->policy_copy = copy;
	npolicy++;
	p->policy_wake = wake;
	if (p->pid >= 1 && p->pid < 8) {
		last_gr[p->pid] = gr;
		last_wake[p->pid] = wake;
		policy_nsent[p->pid] = nsent;
	}
	return 0;
}

static struct agent *agent_new(void)
{
	struct agent *a = calloc(1, sizeof(*a));

	a->cfg = calloc(1, sizeof(*a->cfg));
	config_defaults(a->cfg);
	a->cfg->trust_run_class = 1;
	a->cfg->default_class = CLASS_UNMANAGED;
	a->cfg->control_deadline_ms = 1000;
	a->cfg->verify_interval_s = 0; /* test_verify turns the read-backs on */
	/* no state file: without the state hooks state.c writes nothing */
	a->hooks.submit_in_process = submit_in_process;
	a->hooks.send_policy = send_policy;
	a->started_us = fake_now - 10000000ull; /* long after any restart grace */
	nsent = 0;
	npolicy = 0;
	memset(last_gr, 0, sizeof(last_gr));
	memset(last_wake, 0, sizeof(last_wake));
	memset(policy_nsent, 0, sizeof(policy_nsent));
	return a;
}

static void agent_free(struct agent *a)
{
	cmd_free_all(a);
	while (a->peers) {
		struct peer *p = a->peers;

		a->peers = p->next;
		free(p);
	}
	proc_free_all(a);
	state_free_all(a);
	pods_free(a);
	free(a->cfg);
	free(a);
}

/* A process with a connected preempt agent of the given class. */
static struct proc *proc_with_peer(struct agent *a, pid_t pid, const char *cls)
{
	struct procinfo pi;
	struct peer *p = calloc(1, sizeof(*p));
	struct proc *pr;

	memset(&pi, 0, sizeof(pi));
	pi.starttime = 100 + (uint64_t)pid;
	snprintf(pi.comm, sizeof(pi.comm), "w%d", (int)pid);
	snprintf(pi.run_class, sizeof(pi.run_class), "%s", cls);
	pr = proc_attach(a, pid, &pi);
	p->pid = pid;
	p->proc = pr;
	p->hello = 1;
	p->next = a->peers;
	a->peers = p;
	pr->peer = p;
	pr->uid = uid_use_get(a, 1000);
	return pr;
}

static struct tsg *report(struct agent *a, struct proc *p, rm_handle h_tsg, uint32_t engine,
			  uint32_t ts)
{
	struct gq_tsg m;

	memset(&m, 0, sizeof(m));
	m.h_client = 0xc1d00000u + (uint32_t)p->pid;
	m.h_tsg = h_tsg;
	m.h_device = 0x5c000001;
	m.device_instance = 0;
	m.engine_type = engine;
	m.fd = 3;
	m.timeslice_us = ts;
	m.app_timeslice_us = 2048;
	m.interleave = GQ_UNKNOWN;
	return tsg_upsert(a, p, &m, 1);
}

/* Answers submitted command i (a RESULT from its preempt agent). */
static void answer(struct agent *a, size_t i, uint32_t rm_status, uint64_t value)
{
	struct gq_result r;
	struct proc *p = proc_find(a, sent[i].pid);

	memset(&r, 0, sizeof(r));
	r.hdr.seq = sent[i].seq;
	r.op = sent[i].op;
	r.h_client = 0xc1d00000u + (uint32_t)sent[i].pid;
	r.h_tsg = sent[i].h_tsg;
	r.rm_status = rm_status;
	r.value = value;
	cmd_result(a, p->peer, &r);
}

/* Answers every GET_TIMESLICE sent from index *from on with NV_OK. */
static void confirm_all(struct agent *a, size_t from)
{
	for (size_t i = from; i < nsent; i++)
		if (sent[i].op == GQ_OP_GET_TIMESLICE)
			answer(a, i, RM_OK, 2048);
}

static size_t count(uint32_t op, pid_t pid, uint64_t arg)
{
	size_t n = 0;

	for (size_t i = 0; i < nsent; i++)
		n += sent[i].op == op && sent[i].pid == pid && sent[i].arg == arg;
	return n;
}

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

/* A BE and an LC, both confirmed and converged at the policy's values. */
static struct agent *be_beside_lc_verify(struct tsg **tb, struct tsg **tl, uint32_t verify_s)
{
	struct agent *a = agent_new();
	struct proc *be = proc_with_peer(a, 1, "best-effort");
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");

	a->cfg->verify_interval_s = verify_s;
	*tb = report(a, be, 0x10, RM_ENGINE_GR0, 2048);
	*tl = report(a, lc, 0x20, RM_ENGINE_GR0, 2048);
	reconcile(a);
	confirm_all(a, 0);
	reconcile(a);
	for (size_t i = 0; i < nsent; i++)
		if (sent[i].op == GQ_OP_SET_TIMESLICE)
			answer(a, i, RM_OK, sent[i].arg);
	reconcile(a);
	return a;
}

static struct agent *be_beside_lc(struct tsg **tb, struct tsg **tl)
{
	return be_beside_lc_verify(tb, tl, 0);
}

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

/* The index of the last command of op sent for pid, or nsent if none
 * since `from`. */
static size_t last_sent(uint32_t op, pid_t pid, size_t from)
{
	size_t at = nsent;

	for (size_t i = from; i < nsent; i++)
		if (sent[i].op == op && sent[i].pid == pid)
			at = i;
	return at;
}

/* A TSG we set is read back a second later, then every verifyIntervalS:
 * a read that agrees changes nothing; one that finds another value is
 * counted and the TSG set again; a read that never answers is not
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
	CHECK(tb->verify.at == fake_now && tb->verify.due == fake_now + iv);
	CHECK(tsg_state_of(tb) == TSG_CONVERGED);
	/* The RM holds libcuda's value behind our back. */
	fake_now += iv;
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

/* Answers every command sent from index *from on with NV_OK. */
static void answer_all(struct agent *a, size_t from)
{
	for (size_t i = from; i < nsent; i++)
		answer(a, i, RM_OK, sent[i].op == GQ_OP_GET_TIMESLICE ? 2048 : sent[i].arg);
}

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

/* Windows (window.c): what the last send_window hook call carried. */
static struct peer_window win_last;
static pid_t win_last_pid;
static unsigned win_nsent;

static int send_window(struct agent *a, struct peer *p)
{
	(void)a;
	win_last = p->win;
	win_last_pid = p->pid;
	win_nsent++;
	return 0;
}

/* One reconcile, fake_now moved on by us first. */
static void window_step(struct agent *a, uint64_t us)
{
	size_t n = nsent;

	fake_now += us;
	reconcile_new_tick(a);
	reconcile(a);
	answer_all(a, n);
}

/* phase_grid_take: the median of the last three starts on the newest one's
 * period; a late report moves nothing; a new period only once it held. */
static void test_phase_grid(void)
{
	struct proc lc;

	memset(&lc, 0, sizeof(lc));
	lc.phase.period_ns = 10000000;
	lc.phase.last_start_us = 1000000;
	lc.phase.rx_us = 1;
	CHECK_EQ_U(phase_grid_take(&lc), 1000000);
	/* The same report again changes nothing. */
	lc.phase.last_start_us = 1000900;
	CHECK_EQ_U(phase_grid_take(&lc), 1000000);
	/* A start 900 us late, 25 periods on: of two, the earlier placement. */
	lc.phase.rx_us = 2;
	lc.phase.last_start_us = 1250900;
	CHECK_EQ_U(phase_grid_take(&lc), 1250000);
	/* On time, then one 6.5 ms late (over half a period: it reads as
	 * 3.5 ms early): the median keeps the grid. */
	lc.phase.rx_us = 3;
	lc.phase.last_start_us = 1500003;
	CHECK_EQ_U(phase_grid_take(&lc), 1500003);
	lc.phase.rx_us = 4;
	lc.phase.last_start_us = 1756500;
	CHECK_EQ_U((phase_grid_take(&lc) - 1750003) % 10000, 0); /* a start on the grid */
	/* The grid really moved (every start 2 ms later): the median of the
	 * two on-time reports and the late one follows the newest. */
	lc.phase.rx_us = 5;
	lc.phase.last_start_us = 2002003;
	CHECK_EQ_U(phase_grid_take(&lc), 2002003);
	lc.phase.rx_us = 6;
	lc.phase.last_start_us = 2252003;
	CHECK_EQ_U(phase_grid_take(&lc), 2252003);
	/* A period kept in ns: 5000.4 us, 50 periods between reports. */
	memset(&lc, 0, sizeof(lc));
	lc.phase.period_ns = 5000400;
	lc.phase.last_start_us = 3000000;
	lc.phase.rx_us = 1;
	CHECK_EQ_U(phase_grid_take(&lc), 3000000);
	lc.phase.rx_us = 2;
	lc.phase.last_start_us = 3000000 + 250020;
	CHECK_EQ_U(phase_grid_take(&lc), 3250020);
	/* A new period is not taken in at once: the grid stays until every
	 * report has said it for PHASE_SETTLE_US; then it starts a new grid. */
	lc.phase.rx_us = 3;
	lc.phase.period_ns = 4000000;
	lc.phase.last_start_us = 3700321;
	CHECK_EQ_U(phase_grid_take(&lc), 3250020);
	CHECK_EQ_U(lc.grid.pending_ns, 4000000);
	lc.phase.rx_us = 3 + PHASE_SETTLE_US - 1;
	lc.phase.last_start_us = 3700321 + 4000;
	CHECK_EQ_U(phase_grid_take(&lc), 3250020);
	CHECK_EQ_U(lc.grid.period_ns, 5000400);
	lc.phase.rx_us = 3 + PHASE_SETTLE_US;
	lc.phase.last_start_us = 3700321 + 8000;
	CHECK_EQ_U(phase_grid_take(&lc), 3708321);
	CHECK_EQ_U(lc.grid.period_ns, 4000000);
	CHECK_EQ_U(lc.grid.pending_ns, 0);
	/* A period that alternates by 2 % at every report (a forged PHASE)
	 * never holds: the grid and its period stay, however long. */
	for (unsigned i = 1; i <= 40; i++) {
		lc.phase.rx_us = 3 + PHASE_SETTLE_US + i * 250000u;
		lc.phase.period_ns = i % 2 ? 4080000 : 3920000;
		lc.phase.last_start_us = 3708321 + i * 250000u + i * 1300u;
		CHECK_EQ_U(phase_grid_take(&lc), 3708321);
		CHECK_EQ_U(lc.grid.period_ns, 4000000);
	}
	/* Back at the grid's period: taken in, the wait forgotten. */
	lc.phase.rx_us += 250000;
	lc.phase.period_ns = 4000000;
	lc.phase.last_start_us = 3708321 + 41u * 250000u;
	CHECK_EQ_U(phase_grid_take(&lc), 3708321 + 41u * 250000u);
	CHECK_EQ_U(lc.grid.pending_ns, 0);
}

static void test_windows(void)
{
	struct agent *a = agent_new();
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");
	struct proc *be = proc_with_peer(a, 1, "best-effort");
	struct proc *old = proc_with_peer(a, 3, "best-effort");
	unsigned n;

	a->hooks.send_window = send_window;
	win_nsent = 0;
	be->peer->can_window = 1;
	old->peer->can_window = 0; /* an older library: never sent one */
	report(a, lc, 0x20, RM_ENGINE_GR0, 2048);
	report(a, be, 0x10, RM_ENGINE_GR0, 2048);
	report(a, old, 0x30, RM_ENGINE_GR0, 2048);
	reconcile(a);
	confirm_all(a, 0);
	lc->phase.have = 1;
	lc->phase.period_us = 10000;
	lc->phase.period_ns = 10000000;
	lc->phase.last_start_us = fake_now - 3000;
	lc->phase.rx_us = fake_now;

	/* Off by default (windows.afterUs 0): nothing sent. */
	window_step(a, 1000);
	CHECK_EQ_U(win_nsent, 0);
	CHECK_EQ_U(window_next_deadline(a), 0);

	/* On: the BE gets the LC's period and latest start, the policy's
	 * before and after; the older library and the LC get nothing. */
	a->cfg->policy.window_after_us = 1100;
	window_step(a, 1000);
	CHECK_EQ_U(win_nsent, 1);
	CHECK_EQ_U(win_last_pid, 1);
	CHECK(win_last.on && win_last.gpu == 0 && win_last.period_ns == 10000000);
	CHECK_EQ_U(win_last.start_us, lc->phase.last_start_us);
	CHECK_EQ_U(win_last.before_us, 1200);
	CHECK_EQ_U(win_last.after_us, 1100);
	CHECK_EQ_U(win_last.lc_pid, 2);
	CHECK_EQ_U(a->n.windows_sent, 1);
	CHECK_EQ_U(window_next_deadline(a), fake_now + WINDOW_RENEW_US);

	/* Nothing new, or a start on the same grid: no resend until the
	 * renewal is due. */
	CHECK(lc->win.why == WINDOW_GIVEN && lc->win.after_us == 1100 && lc->win.bes == 1);
	CHECK(be->win.why == WINDOW_GIVEN && be->win.lc_pid == 2);
	window_step(a, 1000);
	CHECK_EQ_U(win_nsent, 1);
	lc->phase.last_start_us += 10010;
	lc->phase.rx_us = fake_now;
	window_step(a, 1000);
	CHECK_EQ_U(win_nsent, 1);
	/* A period a few ns off (the predictor's median moves so) is not a
	 * move; one that would move the windows 25 us before the renewal
	 * (1 us in 10 ms, 25 periods) is, and a move waits WINDOW_MOVE_MIN_US
	 * after the start: meanwhile the schedule the BE runs is renewed. */
	lc->phase.period_ns = 10000003;
	lc->phase.rx_us = fake_now;
	window_step(a, 1000);
	CHECK_EQ_U(win_nsent, 1);
	lc->phase.period_ns = 10001000;
	lc->phase.rx_us = fake_now;
	window_step(a, 1000);
	CHECK_EQ_U(win_nsent, 1);
	CHECK(be->win.why == WINDOW_WHY_HELD && be->peer->win.period_ns == 10000000);
	lc->phase.rx_us = fake_now + WINDOW_RENEW_US;
	window_step(a, WINDOW_RENEW_US);
	CHECK_EQ_U(win_nsent, 2);
	CHECK_EQ_U(win_last.period_ns, 10000000);
	lc->phase.rx_us = fake_now + WINDOW_MOVE_MIN_US;
	window_step(a, WINDOW_MOVE_MIN_US);
	CHECK_EQ_U(win_nsent, 3);
	CHECK_EQ_U(win_last.period_ns, 10001000);
	CHECK(be->win.why == WINDOW_GIVEN);
	lc->phase.period_ns = 10000000;
	lc->phase.rx_us = fake_now + WINDOW_MOVE_MIN_US;
	window_step(a, WINDOW_MOVE_MIN_US);
	CHECK_EQ_U(win_nsent, 4);
	CHECK_EQ_U(win_last.period_ns, 10000000);
	/* The grid moves (two of three reports 3 ms later): one move. */
	lc->phase.last_start_us += WINDOW_MOVE_MIN_US + 3000;
	lc->phase.rx_us = fake_now + WINDOW_MOVE_MIN_US;
	window_step(a, WINDOW_MOVE_MIN_US);
	lc->phase.last_start_us += 10000;
	lc->phase.rx_us = fake_now + 1000;
	window_step(a, 1000);
	CHECK_EQ_U(win_nsent, 6); /* a renewal, then the move */
	CHECK_EQ_U(win_last.start_us, lc->phase.last_start_us);

	/* A window over maxOffPercent of the LC's period (1200 + 3900 us of
	 * 10 ms at 50 %) ends the schedule at once, refused by the cap. */
	a->cfg->policy.window_after_us = 3900;
	lc->phase.rx_us = fake_now + 1000;
	window_step(a, 1000);
	CHECK_EQ_U(win_nsent, 7);
	CHECK(!win_last.on && !be->peer->win.on);
	CHECK(lc->win.why == WINDOW_WHY_CAP && lc->win.after_us == 0 && lc->win.cap_percent == 50);
	CHECK(be->win.why == WINDOW_WHY_LC_REFUSED && be->win.lc_pid == 2);
	CHECK_EQ_U(a->n.windows_ended, 1);
	lc->phase.rx_us = fake_now + WINDOW_RENEW_US;
	window_step(a, WINDOW_RENEW_US);
	CHECK_EQ_U(win_nsent, 7); /* an ended schedule is not resent */
	a->cfg->policy.window_after_us = 1100;
	lc->phase.rx_us = fake_now + WINDOW_MOVE_MIN_US;
	window_step(a, WINDOW_MOVE_MIN_US);
	CHECK(win_last.on);

	/* A period that changes (10 ms to 4 ms) waits until it held: no
	 * windows meanwhile (refused, period unstable), then the new grid. */
	lc->phase.period_us = 4000;
	lc->phase.period_ns = 4000000;
	lc->phase.rx_us = fake_now + 1000;
	window_step(a, 1000);
	CHECK(!win_last.on);
	CHECK(lc->win.why == WINDOW_WHY_PERIOD_UNSTABLE);
	a->cfg->policy.window_after_us = 500;
	for (unsigned i = 0; i < 5; i++) {
		lc->phase.rx_us = fake_now + WINDOW_RENEW_US;
		window_step(a, WINDOW_RENEW_US);
	}
	CHECK(lc->win.why == WINDOW_GIVEN && lc->win.period_ns == 4000000);
	CHECK(win_last.on && win_last.period_ns == 4000000);
	lc->phase.period_us = 10000;
	lc->phase.period_ns = 10000000;
	for (unsigned i = 0; i < 5; i++) {
		lc->phase.rx_us = fake_now + WINDOW_RENEW_US;
		window_step(a, WINDOW_RENEW_US);
	}
	CHECK(win_last.on && win_last.period_ns == 10000000);
	a->cfg->policy.window_after_us = 1100;
	lc->phase.rx_us = fake_now + WINDOW_MOVE_MIN_US;
	window_step(a, WINDOW_MOVE_MIN_US);
	CHECK(win_last.on && win_last.after_us == 1100);

	/* A launch-bound LC, a stale phase, two LCs with phases: each ends it. */
	n = win_nsent;
	lc->busy.always = 1;
	window_step(a, 1000);
	CHECK(!win_last.on && win_nsent == n + 1);
	CHECK(lc->win.why == WINDOW_WHY_LAUNCH_BOUND);
	lc->busy.always = 0;
	lc->phase.rx_us = fake_now + WINDOW_MOVE_MIN_US;
	window_step(a, WINDOW_MOVE_MIN_US);
	CHECK(win_last.on);
	window_step(a, PHASE_FRESH_US + 1);
	CHECK(lc->win.why == WINDOW_WHY_PERIOD_UNKNOWN);
	CHECK(!win_last.on);
	{
		struct proc *lc2 = proc_with_peer(a, 4, "latency-critical");

		report(a, lc2, 0x40, RM_ENGINE_GR0, 2048);
		lc->phase.rx_us = fake_now;
		window_step(a, 1000);
		CHECK(win_last.on);
		lc2->phase = lc->phase;
		window_step(a, 1000);
		CHECK(!win_last.on);
		CHECK(lc->win.why == WINDOW_WHY_SEVERAL_LC && lc2->win.why == WINDOW_WHY_SEVERAL_LC);
		lc2->phase.have = 0;
	}

	/* "auto": no span reported, no windows; then the LC's span plus
	 * 50 us, rounded up to 50. It grows at once; it shrinks only after
	 * 5 s of shorter spans, to the longest of them; a span too long for
	 * maxOffPercent (50 % of 10 ms: 3800 us after 1200 before) is cut
	 * into its 50 us margin at most, else gets no windows. */
	a->cfg->policy.window_after_us = 0;
	a->cfg->policy.window_after_auto = 1;
	lc->phase.rx_us = fake_now;
	lc->phase.span_us = 0;
	window_step(a, 1000);
	CHECK(!win_last.on);
	CHECK(lc->win.why == WINDOW_WHY_NO_SPAN && lc->win.ask == WINDOW_ASK_AUTO);
	lc->phase.span_us = 712;
	lc->phase.rx_us = fake_now + WINDOW_MOVE_MIN_US;
	window_step(a, WINDOW_MOVE_MIN_US);
	CHECK(win_last.on);
	CHECK_EQ_U(win_last.after_us, 800);
	lc->phase.span_us = 760; /* 850: more, at once (sent as a move may go) */
	window_step(a, 1000);
	CHECK_EQ_U(lc->win.after_us, 850);
	lc->phase.rx_us = fake_now + WINDOW_MOVE_MIN_US;
	window_step(a, WINDOW_MOVE_MIN_US);
	CHECK_EQ_U(win_last.after_us, 850);
	n = win_nsent;
	/* Shorter for 4.5 s (700, then 750 at most): kept; at 5 s, the
	 * longest of them. */
	for (unsigned i = 0; i < 10; i++) {
		lc->phase.span_us = i == 4 ? 690 : 640;
		lc->phase.rx_us = fake_now;
		window_step(a, 500000);
	}
	CHECK_EQ_U(win_last.after_us, 850);
	CHECK(win_nsent > n + 1); /* renewals, at 850 */
	lc->phase.rx_us = fake_now;
	window_step(a, 500000);
	CHECK_EQ_U(win_last.after_us, 750);
	/* A longer span in between starts the wait again. */
	lc->phase.span_us = 600;
	lc->phase.rx_us = fake_now;
	window_step(a, 4000000);
	lc->phase.span_us = 800; /* 850: longer than 750, at once */
	lc->phase.rx_us = fake_now;
	window_step(a, 1000);
	CHECK_EQ_U(lc->win.after_us, 850);
	lc->phase.span_us = 3801; /* 3850: over the 3800 that fit, none */
	lc->phase.rx_us = fake_now;
	window_step(a, 1000);
	CHECK(!win_last.on);
	CHECK(lc->win.why == WINDOW_WHY_CAP);
	lc->phase.span_us = 3760; /* 3850: over by the margin, cut to 3800 */
	lc->phase.rx_us = fake_now;
	window_step(a, 1000);
	CHECK(lc->win.why == WINDOW_GIVEN);
	CHECK_EQ_U(lc->win.after_us, 3800);
	lc->phase.span_us = 3601; /* 3650: shorter, 3800 held */
	lc->phase.rx_us = fake_now;
	window_step(a, 1000);
	CHECK_EQ_U(lc->win.after_us, 3800);
	/* The period reads 200 us shorter (3700 fits) and holds: the held
	 * length is cut to what fits at once, still past the span's 3650 +
	 * 50, not held and ended. */
	lc->phase.period_us = 9800;
	lc->phase.period_ns = 9800000;
	for (unsigned i = 0; i < 5; i++) {
		lc->phase.rx_us = fake_now + WINDOW_RENEW_US;
		window_step(a, WINDOW_RENEW_US);
	}
	CHECK(lc->win.why == WINDOW_GIVEN);
	CHECK_EQ_U(lc->win.after_us, 3700);
	CHECK(win_last.on);
	CHECK_EQ_U(win_last.after_us, 3700);
	lc->phase.period_us = 10000;
	lc->phase.period_ns = 10000000;
	for (unsigned i = 0; i < 5; i++) {
		lc->phase.rx_us = fake_now + WINDOW_RENEW_US;
		window_step(a, WINDOW_RENEW_US);
	}
	/* No room at all (before 5000 us of 50 % of 10 ms): no windows. */
	a->cfg->policy.window_before_us = 5000;
	lc->phase.rx_us = fake_now;
	window_step(a, 1000);
	CHECK(!win_last.on);
	CHECK(lc->win.why == WINDOW_WHY_CAP);
	a->cfg->policy.window_before_us = 1200;
	agent_free(a);
}

/* An LC peer that lies in its PHASE: its period alternates by 2 % and
 * its latest start moves at every report (every ms here). The grid keeps
 * its period, and the BE's schedule moves at most once a
 * WINDOW_MOVE_MIN_US (each move can cost the BE one window more in its
 * library), each move within the per-TSG control bound. */
static void test_windows_forged_phase(void)
{
	struct agent *a = agent_new();
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");
	struct proc *be = proc_with_peer(a, 1, "best-effort");
	struct peer_window prev;
	struct tsg *tb;
	unsigned moves = 0, ends = 0, sends, n;

	a->hooks.send_window = send_window;
	win_nsent = 0;
	be->peer->can_window = 1;
	report(a, lc, 0x20, RM_ENGINE_GR0, 2048);
	tb = report(a, be, 0x10, RM_ENGINE_GR0, 2048);
	reconcile(a);
	confirm_all(a, 0);
	a->cfg->policy.window_after_us = 1800;
	lc->phase.have = 1;
	lc->phase.period_us = 10000;
	lc->phase.period_ns = 10000000;
	lc->phase.last_start_us = fake_now - 3000;
	lc->phase.rx_us = fake_now;
	window_step(a, 1000);
	CHECK(win_last.on);
	prev = win_last;
	sends = win_nsent;
	for (unsigned i = 0; i < 3000; i++) { /* 3 s */
		lc->phase.period_ns = i % 2 ? 10200000 : 10000000;
		lc->phase.period_us = lc->phase.period_ns / 1000u;
		lc->phase.last_start_us = fake_now - 300 - (i % 7) * 700;
		lc->phase.rx_us = fake_now;
		n = win_nsent;
		window_step(a, 1000);
		if (win_nsent == n)
			continue;
		/* A period that has not held refuses the windows (an end goes at
		 * once: it only lets the BE run); a start is a move. */
		if (!win_last.on) {
			ends++;
			CHECK(lc->win.why == WINDOW_WHY_PERIOD_UNSTABLE);
			prev.on = 0;
			continue;
		}
		CHECK_EQ_U(win_last.period_ns, 10000000);
		moves += !(prev.on && win_last.start_us == prev.start_us &&
			   win_last.after_us == prev.after_us);
		prev = win_last;
	}
	CHECK_EQ_U(lc->grid.period_ns, 10000000);
	CHECK(moves >= 1 && moves <= 3);
	CHECK(ends <= moves + 1);
	/* Renewals every 250 ms, the moves and the ends: nothing more. */
	CHECK(win_nsent - sends <= 3000000 / WINDOW_RENEW_US + moves + ends);

	/* A move the per-TSG control bound holds waits (a renewal of what
	 * the BE runs goes), and goes once the bound allows. */
	lc->phase.period_ns = 10000000;
	lc->phase.period_us = 10000;
	for (unsigned i = 0; i < 1200; i++) { /* an honest grid again, on */
		lc->phase.last_start_us = fake_now - 3000;
		lc->phase.rx_us = fake_now;
		window_step(a, 1000);
	}
	CHECK(win_last.on);
	prev = win_last;
	tb->sent.bucket_tat = fake_now + 10000000;
	for (unsigned i = 0; i < 1200; i++) {
		lc->phase.last_start_us = fake_now - 4500;
		lc->phase.rx_us = fake_now;
		window_step(a, 1000);
	}
	CHECK(be->win.why == WINDOW_WHY_HELD);
	CHECK(win_last.on && win_last.start_us == prev.start_us);
	CHECK(a->n.controls_held >= 1);
	tb->sent.bucket_tat = 0;
	lc->phase.rx_us = fake_now;
	window_step(a, 1000);
	CHECK(be->win.why == WINDOW_GIVEN);
	CHECK(win_last.on && win_last.start_us != prev.start_us);
	CHECK(tb->sent.bucket_tat > fake_now); /* the move was counted */
	agent_free(a);
}

/* An "LC" whose only TSG is a claim the RM refused counts for nobody: it
 * imposes no windows on a BE, and beside a real LC it does not end that
 * LC's windows. */
static void test_windows_refused_claim(void)
{
	struct agent *a = agent_new();
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");
	struct proc *be = proc_with_peer(a, 1, "best-effort");
	struct proc *liar = proc_with_peer(a, 3, "latency-critical");

	a->hooks.send_window = send_window;
	win_nsent = 0;
	be->peer->can_window = 1;
	report(a, lc, 0x20, RM_ENGINE_GR0, 2048);
	report(a, be, 0x10, RM_ENGINE_GR0, 2048);
	reconcile(a);
	confirm_all(a, 0);
	nsent = 0;
	CHECK(report(a, liar, 0x30, RM_ENGINE_GR0, 2048));
	reconcile(a);
	for (size_t i = 0; i < nsent; i++)
		if (sent[i].pid == 3 && sent[i].op == GQ_OP_GET_TIMESLICE)
			answer(a, i, RM_ERR_INVALID_OBJECT_HANDLE, 0);
	a->cfg->policy.window_after_us = 1100;
	liar->phase.have = 1;
	liar->phase.period_us = 10000;
	liar->phase.period_ns = 10000000;
	liar->phase.last_start_us = fake_now - 3000;
	liar->phase.rx_us = fake_now;
	window_step(a, 1000);
	CHECK(!be->peer->win.on && win_nsent == 0);
	CHECK(liar->win.why == WINDOW_WHY_UNVERIFIED);
	CHECK(be->win.why == WINDOW_WHY_NO_LC);
	lc->phase = liar->phase;
	liar->phase.rx_us = fake_now;
	window_step(a, 1000);
	CHECK(be->peer->win.on && be->peer->win.lc_pid == 2);
	CHECK(lc->win.why == WINDOW_GIVEN);
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

/* One ACTIVITY from pid's preempt agent (times in ms on its clock). */
static void activity(struct agent *a, struct proc *p, uint64_t launches, double active_ms,
		     double at_ms, uint32_t reserved)
{
	struct gq_activity m;

	memset(&m, 0, sizeof(m));
	m.reserved = reserved;
	m.launches = launches;
	m.active_ns = (uint64_t)(active_ms * 1e6);
	m.at_ns = (uint64_t)(at_ms * 1e6);
	lcbusy_report(a, p, &m);
}

/* Launch readings: the share of the time launches keep a process active,
 * smoothed; an LC at busyLcPercent (50) is launch-bound until it falls 10
 * points under; impossible reports are dropped and counted, a launch
 * racing the library's read (up to one 200 us tail) is not impossible;
 * four seconds without reports forget the reading. */
static void test_launch_readings(void)
{
	struct agent *a = agent_new();
	struct proc *lc = proc_with_peer(a, 1, "lc"), *be = proc_with_peer(a, 2, "be");

	CHECK(lc->busy.percent < 0 && !lc->busy.always);
	activity(a, lc, 1000, 10, 1000, 0); /* the base */
	CHECK(lc->busy.percent < 0);
	activity(a, lc, 11000, 250, 1250, 0); /* 240 of 250 ms: 96 % */
	CHECK(lc->busy.percent > 95.9 && lc->busy.percent < 96.1 && lc->busy.always);
	CHECK(lc->busy.launches_per_s > 39999 && lc->busy.launches_per_s < 40001);
	CHECK_EQ_U(a->n.bad_activity, 0);
	/* A BE reads the same and is never launch-bound. */
	activity(a, be, 0, 0, 1000, 0);
	activity(a, be, 10000, 240, 1250, 0);
	CHECK(be->busy.percent > 95 && !be->busy.always);

	/* Reserved bits: dropped, counted, the reading kept. */
	activity(a, lc, 12000, 490, 1500, 1);
	CHECK_EQ_U(a->n.bad_activity, 1);
	CHECK(lc->busy.always && lc->busy.percent > 95.9);
	/* 0.1 ms more active than elapsed (a racing launch): all of it (an
	 * interval 25 points over the threshold and above the reading weighs
	 * 0.6). */
	activity(a, lc, 12000, 500.1, 1500, 0);
	CHECK_EQ_U(a->n.bad_activity, 1);
	CHECK(lc->busy.percent > 98.3 && lc->busy.percent < 98.5); /* 0.6 * 100 + 0.4 * 96 */
	/* 0.1 ms back (the racing launch's part not added yet): none of it. */
	activity(a, lc, 13000, 500.0, 1750, 0);
	CHECK_EQ_U(a->n.bad_activity, 1);
	CHECK(lc->busy.percent > 68.8 && lc->busy.percent < 68.9); /* 0.7 * 98.4 */
	CHECK(lc->busy.always); /* hysteresis: bound down to 40 % */
	/* The next report counts from the higher value, so nothing is lost
	 * twice: 125 of 250 ms. */
	activity(a, lc, 14000, 625.1, 2000, 0);
	CHECK(lc->busy.percent > 63.2 && lc->busy.percent < 63.3); /* 0.3 * 50 + 0.7 * 68.88 */
	/* 0.3 ms more than elapsed: not one process's counters. Forgotten,
	 * and the runlist is reconsidered. */
	a->dirty = 0;
	activity(a, lc, 15000, 875.4, 2250, 0);
	CHECK_EQ_U(a->n.bad_activity, 2);
	CHECK(lc->busy.percent < 0 && !lc->busy.always && a->dirty);
	/* That report was not a base: the next one is. */
	activity(a, lc, 16000, 1000, 2500, 0);
	activity(a, lc, 26000, 1240, 2750, 0);
	CHECK(lc->busy.always);
	/* Launches or active time going back more than a tail: forgotten. */
	activity(a, lc, 25000, 1300, 3000, 0);
	CHECK_EQ_U(a->n.bad_activity, 3);
	CHECK(!lc->busy.always);
	activity(a, lc, 30000, 1300, 3000, 0);
	activity(a, lc, 31000, 1540, 3250, 0);
	activity(a, lc, 32000, 1539.7, 3500, 0);
	CHECK_EQ_U(a->n.bad_activity, 4);
	/* Falling readings: bound while at or above 40 %, not below. */
	activity(a, lc, 40000, 1600, 3750, 0);
	activity(a, lc, 50000, 1840, 4000, 0); /* 96 % */
	CHECK(lc->busy.always);
	double t = 4000, act = 1840;
	while (lc->busy.percent >= 40.0) {
		CHECK(lc->busy.always);
		t += 250;
		act += 25; /* 10 % */
		activity(a, lc, 50000, act, t, 0);
	}
	CHECK(!lc->busy.always && lc->busy.percent > 30.0);
	/* From 10 %: an interval at 90 % (25 points over, above the reading)
	 * is believed at once (0.6 * 90 + 0.4 * 10 = 58); one at 70 % (a
	 * backlog, a burst) moves the reading as slowly as ever. */
	while (lc->busy.percent > 10.5) {
		t += 250;
		act += 25;
		activity(a, lc, 50000, act, t, 0);
	}
	{
		double before = lc->busy.percent;

		t += 250;
		act += 175; /* 70 % */
		activity(a, lc, 50000, act, t, 0);
		CHECK(!lc->busy.always && lc->busy.percent > 0.3 * 70 + 0.7 * before - 0.01 &&
		      lc->busy.percent < 0.3 * 70 + 0.7 * before + 0.01);
		while (lc->busy.percent > 10.5) {
			t += 250;
			act += 25;
			activity(a, lc, 50000, act, t, 0);
		}
		before = lc->busy.percent;
		t += 250;
		act += 225; /* 90 % */
		activity(a, lc, 50000, act, t, 0);
		CHECK(lc->busy.always && lc->busy.percent > 0.6 * 90 + 0.4 * before - 0.01 &&
		      lc->busy.percent < 0.6 * 90 + 0.4 * before + 0.01);
		/* Falling back, as slowly as ever (0.3): 40 % reached after three
		 * idle-ish reports, not one. */
		t += 250;
		act += 25;
		activity(a, lc, 50000, act, t, 0);
		CHECK(lc->busy.always);
		while (lc->busy.percent >= 40.0) {
			t += 250;
			act += 25;
			activity(a, lc, 50000, act, t, 0);
		}
		CHECK(!lc->busy.always);
	}
	/* A report closer than 100 ms to the last changes nothing and folds
	 * into the next: 50 ms all active, then 200 ms idle, is 20 %. */
	{
		double before = lc->busy.percent;

		activity(a, lc, 50100, act + 50, t + 50, 0);
		CHECK(lc->busy.percent == before);
		activity(a, lc, 50100, act + 50, t + 250, 0);
		CHECK(lc->busy.percent > 0.3 * 20 + 0.7 * before - 0.01 &&
		      lc->busy.percent < 0.3 * 20 + 0.7 * before + 0.01);
	}
	/* An impossible rate is shown as the cap, not as a number no tool
	 * reads as an integer. */
	activity(a, be, 20000, 480, 1500, 0);
	activity(a, be, UINT64_MAX / 2, 480, 1600, 0);
	CHECK(be->busy.launches_per_s > 0.3e9 - 1 && be->busy.launches_per_s <= 0.3e9 + 0.7 * 40000 + 1);
	/* Over a second without a report (a process whose CPU was taken):
	 * the readings stay. Four seconds: unknown. */
	fake_now += 1100000;
	lcbusy_tick(a);
	CHECK(lc->busy.percent >= 0 && be->busy.percent >= 0);
	fake_now += 2900000;
	lcbusy_tick(a);
	CHECK(lc->busy.percent >= 0 && be->busy.percent >= 0);
	fake_now += 100001;
	lcbusy_tick(a);
	CHECK(lc->busy.percent < 0 && be->busy.percent < 0);
	/* A launch-bound LC silent for three seconds stays launch-bound. */
	activity(a, lc, 0, 0, 20000, 0);
	activity(a, lc, 100000, 250, 20250, 0);
	CHECK(lc->busy.always);
	fake_now += 3000000;
	lcbusy_tick(a);
	CHECK(lc->busy.always);
	fake_now += 1100000;
	lcbusy_tick(a);
	CHECK(!lc->busy.always && lc->busy.percent < 0);
	/* busyLcPercent 0: read, never judged. */
	a->cfg->policy.busy_lc_percent = 0;
	activity(a, lc, 0, 0, 10000, 0);
	activity(a, lc, 10000, 250, 10250, 0);
	CHECK(lc->busy.percent > 99 && !lc->busy.always);
	a->cfg->policy.busy_lc_percent = 50;
	lcbusy_tick(a);
	CHECK(lc->busy.always);
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

/* An LC's own ask for windows (window.c): standalone GPUQOS_RUN_WINDOWS,
 * in Kubernetes its pod's (win_ask). It turns windows on for that LC's
 * BEs alone, within windows.podMaxOffPercent; an LC that did not ask
 * keeps the node's default. Two LCs, each with a BE, on GPUs 0 and 1. */
static struct tsg *report_on(struct agent *a, struct proc *p, rm_handle h_tsg, uint32_t gpu)
{
	struct gq_tsg m;

	memset(&m, 0, sizeof(m));
	m.h_client = 0xc1d00000u + (uint32_t)p->pid;
	m.h_tsg = h_tsg;
	m.h_device = 0x5c000001 + gpu;
	m.device_instance = gpu;
	m.engine_type = RM_ENGINE_GR0;
	m.fd = 3;
	m.timeslice_us = 2048;
	m.app_timeslice_us = 2048;
	m.interleave = GQ_UNKNOWN;
	return tsg_upsert(a, p, &m, 1);
}

static void ask_phase(struct proc *lc, uint32_t span_us)
{
	lc->phase.have = 1;
	lc->phase.period_us = 10000;
	lc->phase.period_ns = 10000000;
	lc->phase.last_start_us = fake_now - 3000;
	lc->phase.rx_us = fake_now;
	lc->phase.span_us = span_us;
}

/* A second on (a schedule moves at most once a WINDOW_MOVE_MIN_US), the
 * LCs' PHASE fresh. */
static void ask_step(struct agent *a, struct proc *lc1, struct proc *lc2, uint32_t span_us)
{
	fake_now += WINDOW_MOVE_MIN_US;
	ask_phase(lc1, span_us);
	ask_phase(lc2, span_us);
	window_step(a, 0);
}

/* Kubernetes mode: each process in a pod of its own, with the facts its
 * annotations give (what kube_mode.c pushes in). */
static void pod_facts_for(struct agent *a, struct proc *p, enum qos_class cls, enum window_ask ask)
{
	struct pod_facts f = { .cls = cls, .cls_source = CLS_SRC_ANNOTATION };

	f.windows.ask = ask;
	snprintf(p->pod_uid, sizeof(p->pod_uid), "pod-%d", (int)p->pid);
	CHECK(pod_set(a, p->pod_uid, &f) >= 0);
}

static void test_windows_ask(void)
{
	struct agent *a = agent_new();
	struct proc *lc1 = proc_with_peer(a, 2, "latency-critical");
	struct proc *be1 = proc_with_peer(a, 1, "best-effort");
	struct proc *lc2 = proc_with_peer(a, 4, "latency-critical");
	struct proc *be2 = proc_with_peer(a, 5, "best-effort");
	struct window_req r;

	a->hooks.send_window = send_window;
	win_nsent = 0;
	be1->peer->can_window = 1;
	be2->peer->can_window = 1;
	report_on(a, lc1, 0x20, 0);
	report_on(a, be1, 0x10, 0);
	report_on(a, lc2, 0x40, 1);
	report_on(a, be2, 0x50, 1);
	reconcile(a);
	confirm_all(a, 0);
	CHECK_EQ_U(a->cfg->policy.window_pod_max_off_percent, 30);

	/* The policy file: 0 .. 90, 0 allowed (no asks). */
	{
		struct agent_config c;
		char err[256];

		CHECK(config_parse("{\"version\":1,\"windows\":{\"podMaxOffPercent\":0}}", &c, err,
				   sizeof(err)) == 0 &&
		      c.policy.window_pod_max_off_percent == 0);
		CHECK(config_parse("{\"version\":1,\"windows\":{\"podMaxOffPercent\":90}}", &c, err,
				   sizeof(err)) == 0 &&
		      c.policy.window_pod_max_off_percent == 90);
		CHECK(config_parse("{\"version\":1,\"windows\":{\"podMaxOffPercent\":91}}", &c, err,
				   sizeof(err)) != 0 &&
		      strstr(err, "windows.podMaxOffPercent"));
		CHECK(config_parse("{\"version\":1,\"windows\":{\"podMaxOffPercent\":\"30\"}}", &c,
				   err, sizeof(err)) != 0);
	}

	/* The parse gpuqos run and the agent share: strict. */
	CHECK(policy_window_ask_parse("auto", &r) == 0 && r.ask == WINDOW_ASK_AUTO);
	CHECK(policy_window_ask_parse("off", &r) == 0 && r.ask == WINDOW_ASK_OFF);
	CHECK(policy_window_ask_parse("0", &r) == 0 && r.ask == WINDOW_ASK_OFF);
	CHECK(policy_window_ask_parse("100000", &r) == 0 && r.ask == WINDOW_ASK_US &&
	      r.after_us == 100000);
	CHECK(policy_window_ask_parse("100001", &r) != 0);
	CHECK(policy_window_ask_parse("0000001", &r) != 0);
	CHECK(policy_window_ask_parse("", &r) != 0);
	CHECK(policy_window_ask_parse(" auto", &r) != 0);
	CHECK(policy_window_ask_parse("auto\n", &r) != 0);
	CHECK(policy_window_ask_parse("+800", &r) != 0);
	CHECK(policy_window_ask_parse("800us", &r) != 0);
	CHECK(policy_window_ask_parse("AUTO", &r) != 0);
	CHECK(policy_window_ask_parse("auto\xef\xbf\xbdjunk", &r) != 0); /* a NUL, mended */

	/* Node default off, nobody asked: nothing. */
	ask_step(a, lc1, lc2, 712);
	CHECK_EQ_U(win_nsent, 0);
	CHECK(lc1->win.ask == WINDOW_ASK_OFF && lc1->win.why == WINDOW_WHY_OFF);

	/* lc1 asks "auto": its BE gets windows sized from its span (712 +
	 * 50, rounded up to 50), lc2's BE none. */
	snprintf(lc1->run_windows, sizeof(lc1->run_windows), "auto");
	ask_step(a, lc1, lc2, 712);
	CHECK(be1->peer->win.on && be1->peer->win.lc_pid == 2);
	CHECK_EQ_U(be1->peer->win.after_us, 800);
	CHECK(!be2->peer->win.on);
	CHECK_EQ_U(win_last_pid, 1);
	CHECK(lc1->win.ask == WINDOW_ASK_AUTO && lc1->win.own && lc1->win.why == WINDOW_GIVEN);
	CHECK(lc2->win.ask == WINDOW_ASK_OFF);

	/* The cap: a 2900 us span wants 2950 after; 30 % of 10 ms leaves 1800
	 * after the 1200 before (maxOffPercent's 50 % would give 3800): no
	 * windows, not one cut short. A 1700 us span's 1750 fits. */
	ask_step(a, lc1, lc2, 2900);
	CHECK(!be1->peer->win.on);
	CHECK(lc1->win.why == WINDOW_WHY_CAP && lc1->win.cap_percent == 30 && !lc1->win.after_us);
	CHECK(be1->win.why == WINDOW_WHY_LC_REFUSED);
	ask_step(a, lc1, lc2, 1700);
	CHECK(be1->peer->win.on);
	CHECK_EQ_U(be1->peer->win.after_us, 1750);
	/* A fixed ask that does not fit the cap gets none; one that does,
	 * its own length. */
	snprintf(lc1->run_windows, sizeof(lc1->run_windows), "2000");
	ask_step(a, lc1, lc2, 712);
	CHECK(!be1->peer->win.on);
	CHECK(lc1->win.why == WINDOW_WHY_CAP && lc1->win.ask_us == 2000);
	snprintf(lc1->run_windows, sizeof(lc1->run_windows), "1500");
	ask_step(a, lc1, lc2, 712);
	CHECK(be1->peer->win.on);
	CHECK_EQ_U(be1->peer->win.after_us, 1500);
	CHECK(lc1->win.ask == WINDOW_ASK_US && lc1->win.ask_us == 1500);
	CHECK(!be2->peer->win.on);

	/* podMaxOffPercent 0: asks are ignored, the node's default (off) holds. */
	a->cfg->policy.window_pod_max_off_percent = 0;
	ask_step(a, lc1, lc2, 712);
	CHECK(!be1->peer->win.on);
	a->cfg->policy.window_pod_max_off_percent = 30;

	/* Node default 1100: lc2 (no ask) gets it under maxOffPercent; lc1
	 * asking "off" keeps its BE on the GPU. */
	a->cfg->policy.window_after_us = 1100;
	snprintf(lc1->run_windows, sizeof(lc1->run_windows), "off");
	ask_step(a, lc1, lc2, 712);
	CHECK(!be1->peer->win.on);
	CHECK(be2->peer->win.on && be2->peer->win.lc_pid == 4);
	CHECK_EQ_U(be2->peer->win.after_us, 1100);
	/* An invalid ask, or one not believed (trustRunClass false), is
	 * none: the default. */
	snprintf(lc1->run_windows, sizeof(lc1->run_windows), "auto ");
	ask_step(a, lc1, lc2, 712);
	CHECK(be1->peer->win.on);
	CHECK_EQ_U(be1->peer->win.after_us, 1100);
	snprintf(lc1->run_windows, sizeof(lc1->run_windows), "1500");
	ask_step(a, lc1, lc2, 712);
	CHECK_EQ_U(be1->peer->win.after_us, 1500);
	a->cfg->trust_run_class = 0;
	ask_step(a, lc1, lc2, 712);
	CHECK_EQ_U(be1->peer->win.after_us, 1100);
	a->cfg->trust_run_class = 1;

	/* Kubernetes: the pod's ask (its facts), never the environment's. */
	a->mode = AGENT_MODE_KUBE;
	pod_facts_for(a, lc1, CLASS_LC, WINDOW_ASK_NONE);
	pod_facts_for(a, lc2, CLASS_LC, WINDOW_ASK_NONE);
	pod_facts_for(a, be1, CLASS_BE, WINDOW_ASK_NONE);
	pod_facts_for(a, be2, CLASS_BE, WINDOW_ASK_NONE);
	CHECK_EQ_U(pod_reclassify(a, NULL, NULL), 0); /* the same classes as before */
	ask_step(a, lc1, lc2, 712);
	CHECK_EQ_U(be1->peer->win.after_us, 1100);
	pod_facts_for(a, lc1, CLASS_LC, WINDOW_ASK_AUTO);
	pod_reclassify(a, lc1->pod_uid, NULL);
	ask_step(a, lc1, lc2, 712);
	CHECK_EQ_U(be1->peer->win.after_us, 800);
	CHECK_EQ_U(be2->peer->win.after_us, 1100);
	pod_facts_for(a, lc1, CLASS_LC, WINDOW_ASK_OFF);
	pod_reclassify(a, lc1->pod_uid, NULL);
	ask_step(a, lc1, lc2, 712);
	CHECK(!be1->peer->win.on && be2->peer->win.on);
	agent_free(a);
}

/* Kubernetes mode: classes come from the facts pushed in for each pod,
 * each change once; a pod that goes leaves its processes pod-unknown, an
 * override stays, the table has a bound. */
static void test_pod_facts(void)
{
	struct agent *a = agent_new();
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");
	struct proc *be = proc_with_peer(a, 3, "best-effort");
	struct proc *nopod = proc_with_peer(a, 4, "best-effort");
	struct pod_facts f = { .cls = CLASS_LC, .cls_source = CLS_SRC_ANNOTATION };
	char uid[40];

	a->mode = AGENT_MODE_KUBE;
	snprintf(lc->pod_uid, sizeof(lc->pod_uid), "uid-lc");
	snprintf(be->pod_uid, sizeof(be->pod_uid), "uid-be");
	/* Not listed yet: unmanaged, pod-unknown; in no pod: no-pod. */
	CHECK_EQ_U(pod_reclassify(a, NULL, NULL), 3);
	CHECK(lc->cls == CLASS_UNMANAGED && lc->cls_source == CLS_SRC_POD_UNKNOWN);
	CHECK(nopod->cls == CLASS_UNMANAGED && nopod->cls_source == CLS_SRC_NO_POD);
	CHECK_EQ_U(pod_set(a, "uid-lc", &f), 1);
	CHECK_EQ_U(pod_set(a, "uid-lc", &f), 0); /* the same facts: no change */
	f.cls = CLASS_BE;
	f.cls_source = CLS_SRC_DEFAULT;
	f.cls_invalid = 1;
	CHECK_EQ_U(pod_set(a, "uid-be", &f), 1);
	CHECK_EQ_U(pod_reclassify(a, "uid-lc", NULL), 1);
	CHECK(lc->cls == CLASS_LC && lc->cls_source == CLS_SRC_ANNOTATION);
	CHECK(be->cls == CLASS_UNMANAGED); /* only the pod asked for */
	CHECK_EQ_U(pod_reclassify(a, "uid-be", NULL), 1);
	CHECK(be->cls == CLASS_BE && be->cls_source == CLS_SRC_DEFAULT);
	CHECK(pod_find(a, "uid-be") && pod_find(a, "uid-be")->cls_invalid);
	/* An override wins over the pod, and outlives it. */
	CHECK(state_set(a, lc->pid, lc->starttime, 0, CLASS_BE) == 0);
	proc_classify(a, lc);
	CHECK(lc->cls == CLASS_BE && lc->cls_source == CLS_SRC_OVERRIDE);
	CHECK_EQ_U(pod_forget(a, "uid-lc"), 1);
	CHECK_EQ_U(pod_forget(a, "uid-lc"), 0);
	CHECK_EQ_U(pod_forget(a, "uid-be"), 1);
	pod_reclassify(a, NULL, NULL);
	CHECK(lc->cls == CLASS_BE && lc->cls_source == CLS_SRC_OVERRIDE);
	CHECK(be->cls == CLASS_UNMANAGED && be->cls_source == CLS_SRC_POD_UNKNOWN);
	/* Bad uids and the bound. */
	errno = 0;
	CHECK(pod_set(a, "", &f) == -1 && errno == EINVAL);
	CHECK(pod_set(a, "0123456789012345678901234567890123456789", &f) == -1 && errno == EINVAL);
	for (unsigned i = 0; i < AGENT_PODS_MAX; i++) {
		snprintf(uid, sizeof(uid), "p%u", i);
		CHECK(pod_set(a, uid, &f) == 1);
	}
	errno = 0;
	CHECK(pod_set(a, "one-more", &f) == -1 && errno == EDQUOT);
	CHECK(pod_set(a, "p7", &f) == 0); /* a known one still updates */
	CHECK(pod_find(a, "p16383") != NULL && pod_find(a, "one-more") == NULL);
	agent_free(a);
}

/* The faces publish what changed (record.c, changes.c): a pass that
 * changed nothing queues no record; a changed decision or a change of
 * what the RM holds queues exactly that TSG's record, once a batch, in the
 * order the records changed (not the table's); a TSG that goes is queued
 * as gone, with its pod. */
static void test_records_publish_changes(void)
{
	struct tsg *tb, *tl;
	struct agent *a = be_beside_lc(&tb, &tl);
	size_t n;

	snprintf(tl->proc->pod_uid, sizeof(tl->proc->pod_uid), "pod-lc");
	CHECK(a->changes.n >= 2); /* the first records */
	CHECK(tb->rec.ts == 50 && tb->rec.state == TSG_CONVERGED && tb->rec.cls == CLASS_BE);
	changes_clear(a);
	reconcile(a);
	reconcile(a);
	CHECK_EQ_U(a->changes.n, 0); /* nothing changed: nothing to publish */
	CHECK(!a->changes.overflow);
	/* Someone sets the BE back: the RM holds 2048, a SET goes. */
	tsg_observe_ts(tb, 2048, fake_now);
	n = nsent;
	reconcile(a);
	CHECK_EQ_U(a->changes.n, 1);
	CHECK(a->changes.v[0].pid == 1 && a->changes.v[0].h_tsg == tb->h_tsg && !a->changes.v[0].gone);
	CHECK(tb->rec.ts == 2048 && tb->rec.ts_desired == 50 && tb->rec.state == TSG_PENDING);
	/* The SET took, in the same batch: the record follows, queued once. */
	CHECK(last_sent(GQ_OP_SET_TIMESLICE, 1, n) < nsent);
	answer(a, last_sent(GQ_OP_SET_TIMESLICE, 1, n), RM_OK, 50);
	reconcile(a);
	CHECK_EQ_U(a->changes.n, 1);
	CHECK(tb->rec.ts == 50 && tb->rec.state == TSG_CONVERGED);
	changes_clear(a);
	reconcile(a);
	CHECK_EQ_U(a->changes.n, 0);
	/* Two changes in two passes of one batch, the later TSG of the table
	 * first: queued in the order they changed. */
	tsg_observe_ts(tb, 2048, fake_now);
	reconcile(a);
	tsg_observe_ts(tl, 2048, fake_now);
	reconcile(a);
	CHECK_EQ_U(a->changes.n, 2);
	CHECK(a->changes.v[0].h_tsg == tb->h_tsg && a->changes.v[0].pid == 1);
	CHECK(a->changes.v[1].h_tsg == tl->h_tsg && a->changes.v[1].pid == 2);
	CHECK(strcmp(a->changes.v[1].pod_uid, "pod-lc") == 0);
	changes_clear(a);
	/* The LC's TSG goes: queued as gone, with its pod. */
	tsg_drop(a, tl);
	CHECK_EQ_U(a->changes.n, 1);
	CHECK(a->changes.v[0].gone && a->changes.v[0].pid == 2 &&
	      strcmp(a->changes.v[0].pod_uid, "pod-lc") == 0);
	agent_free(a);
}

/* Budgets sent, by pid (1..7) and GPU 0: the last MEMORY of each. */
static uint64_t mem_limit_sent[8], mem_total_sent[8];
static unsigned mem_sends[8];
static uint64_t fake_gpu_total;

static int send_memory(struct agent *a, struct peer *p, const struct mem_gpu *e)
{
	(void)a;
	if (p->pid >= 1 && p->pid < 8 && e->gpu == 0) {
		mem_limit_sent[p->pid] = e->limit;
		mem_total_sent[p->pid] = e->total;
		mem_sends[p->pid]++;
	}
	return 0;
}

static uint64_t gpu_mem_total(const struct agent *a, uint32_t gpu)
{
	(void)a;
	return gpu == 0 ? fake_gpu_total : 0;
}

static void usage(struct agent *a, struct proc *p, uint64_t used, uint64_t refused)
{
	struct gq_mem_usage m;

	memset(&m, 0, sizeof(m));
	m.used = used;
	m.peak = used;
	m.limit = GQ_MEM_UNLIMITED;
	m.refused = refused;
	m.refused_bytes = refused;
	memory_report(a, p->peer, &m);
}

#define GI (1ull << 30)

/* Budgets (docs/policy.md, "Memory"): a pod's budget shared by its
 * processes on a GPU so their limits never sum past it; the LC reserve
 * keeps the BEs together out of total - reserve - what LCs hold; a BE
 * over its new budget after an LC came keeps what it holds and gets no
 * more; a peer without the MEMORY flag is never sent one; bad reports
 * change nothing. */
static void test_memory(void)
{
	struct agent *a = agent_new();
	struct proc *b1 = proc_with_peer(a, 1, "best-effort");
	struct proc *b2 = proc_with_peer(a, 2, "best-effort");
	struct proc *b3 = proc_with_peer(a, 3, "best-effort");
	struct proc *old = proc_with_peer(a, 5, "best-effort");
	struct pod_facts f = { .cls = CLASS_BE, .cls_source = CLS_SRC_ANNOTATION, .memory = 8 * GI };
	struct proc *lc;
	uint64_t before;

	memset(mem_sends, 0, sizeof(mem_sends));
	a->hooks.send_memory = send_memory;
	a->hooks.gpu_mem_total = gpu_mem_total;
	fake_gpu_total = 80 * GI;
	a->mode = AGENT_MODE_KUBE;
	a->cfg->memory.default_budget[CLASS_BE] = 4 * GI;
	a->cfg->memory.default_budget[CLASS_LC] = 20 * GI;
	/* b1 and b2 share pod "p12" (8Gi by its annotation); b3 is alone in
	 * "p3" with the class default; old's library does not count memory. */
	snprintf(b1->pod_uid, sizeof(b1->pod_uid), "p12");
	snprintf(b2->pod_uid, sizeof(b2->pod_uid), "p12");
	snprintf(b3->pod_uid, sizeof(b3->pod_uid), "p3");
	snprintf(old->pod_uid, sizeof(old->pod_uid), "p5");
	CHECK_EQ_U(pod_set(a, "p12", &f), 1);
	f.memory = 0;
	CHECK_EQ_U(pod_set(a, "p3", &f), 1);
	CHECK_EQ_U(pod_set(a, "p5", &f), 1);
	pod_reclassify(a, NULL, NULL);
	CHECK(b1->cls == CLASS_BE && b3->cls == CLASS_BE);
	b1->peer->memory = b2->peer->memory = b3->peer->memory = 1;
	usage(a, b1, 1 * GI, 0);
	usage(a, b2, 3 * GI, 0);
	usage(a, b3, 1 * GI, 0);
	usage(a, old, 1 * GI, 0); /* unasked: dropped, counted */
	CHECK_EQ_U(a->n.bad_mem_usage, 1);
	CHECK_EQ_U(old->mem.n, 0);
	reconcile(a);
	/* The pod's 4Gi left, half each: 1+2 and 3+2, together 8Gi. */
	CHECK_EQ_U(mem_limit_sent[1], 3 * GI);
	CHECK_EQ_U(mem_limit_sent[2], 5 * GI);
	CHECK_EQ_U(mem_total_sent[1], 8 * GI); /* its FB info shows the pod's budget */
	CHECK_EQ_U(mem_limit_sent[3], 4 * GI);
	CHECK_EQ_U(mem_sends[5], 0);
	/* The same plan again sends nothing. */
	reconcile(a);
	CHECK_EQ_U(mem_sends[1], 1);
	CHECK_EQ_U(mem_sends[3], 1);
	/* b2 grew to 6Gi: 1Gi left for the pod, shared. */
	usage(a, b2, 6 * GI, 0);
	reconcile(a);
	CHECK_EQ_U(mem_limit_sent[1] + mem_limit_sent[2], 8 * GI);
	CHECK_EQ_U(mem_limit_sent[1], 1 * GI + GI / 2);

	/* Bad reports: dropped, counted, nothing changes. */
	before = b3->mem.g[0].used;
	{
		struct gq_mem_usage m;
		const struct {
			uint32_t dev, flags;
			uint64_t used, peak, refused, refused_bytes;
		} bad[] = {
			{ 0, 2, 2 * GI, 2 * GI, 0, 0 },           /* reserved flag */
			{ 0, 0, 3 * GI, 2 * GI, 0, 0 },           /* used past its peak */
			{ 0, 0, 2 * GI, (1ull << 50) + 1, 0, 0 }, /* a peak past 1Pi */
			{ 0, 0, 2 * GI, 2 * GI, 5, 4 },           /* fewer bytes than refusals */
			{ 0, 0, GI / 2, GI / 2, 0, 0 },           /* its peak went back */
			{ 32, 0, GI, GI, 0, 0 },                  /* no such device instance */
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			memset(&m, 0, sizeof(m));
			m.device_instance = bad[i].dev;
			m.flags = bad[i].flags;
			m.used = bad[i].used;
			m.peak = bad[i].peak;
			m.limit = GQ_MEM_UNLIMITED;
			m.refused = bad[i].refused;
			m.refused_bytes = bad[i].refused_bytes;
			memory_report(a, b3->peer, &m);
			CHECK_EQ_U(a->n.bad_mem_usage, 2 + i);
		}
		CHECK_EQ_U(b3->mem.n, 1);
		CHECK_EQ_U(b3->mem.g[0].used, before);
		CHECK_EQ_U(b3->mem.g[0].peak, before);
	}

	/* The LC reserve: 60Gi of 80 kept for LCs. The BEs hold 8Gi, so
	 * together they may reach 20Gi: each gets a third of the 12Gi left,
	 * within its pod's budget. */
	a->cfg->memory.lc_reserve = 60 * GI;
	reconcile(a);
	CHECK_EQ_U(mem_limit_sent[3], 4 * GI); /* 1 + 4 = 5 > its pod's 4 */
	CHECK_EQ_U(mem_limit_sent[1], 1 * GI + GI / 2);
	/* An LC arrives and takes 15Gi: the BEs may now reach 5Gi together
	 * and hold 8: each keeps what it holds and gets no more. */
	lc = proc_with_peer(a, 4, "latency-critical");
	snprintf(lc->pod_uid, sizeof(lc->pod_uid), "p4");
	f.cls = CLASS_LC;
	CHECK_EQ_U(pod_set(a, "p4", &f), 1);
	pod_reclassify(a, "p4", NULL);
	lc->peer->memory = 1;
	usage(a, lc, 15 * GI, 0);
	reconcile(a);
	CHECK_EQ_U(mem_limit_sent[1], 1 * GI);
	CHECK_EQ_U(mem_limit_sent[2], 6 * GI);
	CHECK_EQ_U(mem_limit_sent[3], 1 * GI);
	/* Its FB info: the least of its pod's budget and what the BEs may
	 * hold together. */
	CHECK_EQ_U(mem_total_sent[3], 4 * GI);
	CHECK_EQ_U(mem_total_sent[1], 5 * GI);
	/* The LC is held only by its own budget (20Gi, its class default). */
	CHECK_EQ_U(mem_limit_sent[4], 20 * GI);
	/* A percent reserve: 25 % of 80Gi. */
	a->cfg->memory.lc_reserve = 0;
	a->cfg->memory.lc_reserve_percent = 25;
	CHECK_EQ_U(memory_lc_reserve(a, 80 * GI), 20 * GI);
	/* A refusal is kept, once said. */
	usage(a, b3, 1 * GI, 2);
	CHECK_EQ_U(b3->mem.g[0].refused, 2);
	CHECK(b3->mem.refusal_said);
	/* A new connection: what was sent is sent again. */
	before = mem_sends[3];
	memory_hello(a, b3->peer);
	reconcile(a);
	CHECK_EQ_U(mem_sends[3], before + 1);
	agent_free(a);
}

int main(void)
{
	log_set_level(LOG_LEVEL_ERROR);
	core_clock_install(fake_clock);
	test_unverified_claims();
	test_inflight_and_backoff();
	test_records_publish_changes();
	test_belief_latest();
	test_verify();
	test_verify_direct_fallback();
	test_revert();
	test_revert_interleave();
	test_policy_before_commands();
	test_several_be_floor();
	test_wake_policy();
	test_rotation();
	test_gate_time();
	test_rotation_needs_every_be();
	test_rotation_gap();
	test_rotation_per_process();
	test_rotation_ungate_liar();
	test_rotation_fair_four();
	test_rotation_flipper();
	test_rotation_newcomers();
	test_phase_grid();
	test_windows();
	test_windows_forged_phase();
	test_windows_refused_claim();
	test_windows_ask();
	test_gate_channels();
	test_pod_facts();
	test_memory();
	test_restart_grace();
	test_claim_limits();
	test_launch_readings();
	CHECK_DONE();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_core_window.c - unit tests of the core's window.c, on the fake clock
 * and recording hooks of core_fixture.h: windows around an LC's requests:
 * what a BE is sent and when, the cap, a PHASE that lies, a refused claim,
 * an LC's own ask.
 */
#include "tests/agent/core_fixture.h"
#include "tests/check.h"

#include <string.h>
#include <stdio.h>

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

int main(void)
{
	core_fixture_start();
	test_windows();
	test_windows_forged_phase();
	test_windows_refused_claim();
	test_windows_ask();
	CHECK_DONE();
}

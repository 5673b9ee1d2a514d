/* SPDX-License-Identifier: Apache-2.0 */
/*
 * window.c - windows: keeping each BE off its GPU around every request of
 * the one periodic LC beside it, by a schedule its own preempt agent runs
 * (docs/policy.md, "Windows"; docs/protocol.md, "Windows").
 *
 * Owns: which BE process gets which schedule (that grid and period, the
 * policy's before and after), and sending, renewing and ending it. Does
 * not own: receiving PHASE (peer.c), when an LC's requests come
 * (phase.c), running the schedule (the BE's
 * preempt agent, preempt_window.c), placing a rotation's turn change
 * (rotate.c, which asks here).
 *
 * Why: the one channel switch ahead of each request is what a CUDA-graph
 * model still loses beside a busy BE under the wake; with the BE off the
 * GPU when the request comes there is no switch to wait for (ViT-B/16
 * every 10 ms: 1.18-1.25x -> 1.00-1.06x its p99 alone, docs/perf-log). It
 * costs the BE the window in every period, so it is off unless the
 * policy gives windows.afterUs: a number, or "auto" for each LC's own
 * span (what its preempt agent measured, PHASE), or the LC asks for its
 * own (its pod's gpuqos.io/windows, `gpuqos run --windows`), within
 * windows.podMaxOffPercent: the operator chose the node's default, not
 * what a pod takes from the BEs beside it.
 */
#include "agent/core/core.h"
#include "common/log.h"

#include <string.h>

/* A grid that moved less than this, or a period that would move the
 * windows less than this before the next renewal, is not sent before
 * that renewal. */
#define WINDOW_SAME_US 20u

/* With windows.afterUs "auto", an LC's windows end its span (PHASE: the
 * 99th percentile of its last requests' ends past their due times) plus
 * WINDOW_AUTO_MARGIN_US after each due time, rounded up to
 * WINDOW_AUTO_STEP_US. One that maxOffPercent of its period does not
 * allow (podMaxOffPercent, where the LC asked for "auto" itself) is cut
 * into its margin at most, and is otherwise none, not one cut short into
 * the span: a window that ends mid-request brings the BE back
 * onto the engine while the request runs, and that costs the request
 * more than no window (measured on an H200: BERT-base every 5 ms with its
 * window cut to 250 us after the due time, 1.32x its solo p99 against
 * 1.14x with none; ResNet-50 1.23x against 1.04x). The
 * length grows at once; it shrinks only to the longest the span asked
 * for over the last WINDOW_AUTO_HOLD_US, so that a span that
 * wavers from report to report (measured: 800-1000 us for ViT-B/16 at the
 * 95th percentile of 64 requests) neither resends every BE's schedule at
 * each PHASE nor leaves a window short for the next slow request. */
#define WINDOW_AUTO_MARGIN_US 50u
#define WINDOW_AUTO_STEP_US 50u
#define WINDOW_AUTO_HOLD_US 5000000u

/* The windows lc gets: its own ask, or the node's default where it did
 * not ask (or asked for windows where pods may not). */
struct window_rule {
	uint32_t after_us; /* fixed; 0 with autosize, or none */
	int autosize;      /* "auto": sized from lc's span */
	uint32_t max_off;  /* percent of lc's period a window may take */
};

/* lc's own ask: its pod's (pod.c sets win_ask), or standalone its
 * GPUQOS_RUN_WINDOWS where the class from its environment is believed. */
static struct window_req window_ask(const struct agent *a, const struct proc *lc)
{
	struct window_req r = { WINDOW_ASK_NONE, 0 };

	if (a->mode == AGENT_MODE_KUBE) /* the pod's, never the process's */
		return lc->win_ask;
	if (a->cfg->trust_run_class && lc->run_windows[0] &&
	    policy_window_ask_parse(lc->run_windows, &r) != 0)
		r.ask = WINDOW_ASK_NONE;
	return r;
}

static void window_rule(const struct agent *a, const struct proc *lc, struct window_rule *r)
{
	const struct policy_config *cfg = &a->cfg->policy;
	struct window_req ask = window_ask(a, lc);

	r->after_us = cfg->window_after_us;
	r->autosize = cfg->window_after_auto;
	r->max_off = cfg->window_max_off_percent;
	if (ask.ask == WINDOW_ASK_OFF) {
		/* Takes nothing from the BEs: always honoured. */
		r->after_us = 0;
		r->autosize = 0;
	} else if (ask.ask != WINDOW_ASK_NONE && cfg->window_pod_max_off_percent) {
		r->after_us = ask.ask == WINDOW_ASK_US ? ask.after_us : 0;
		r->autosize = ask.ask == WINDOW_ASK_AUTO;
		if (cfg->window_pod_max_off_percent < r->max_off)
			r->max_off = cfg->window_pod_max_off_percent;
	}
}

enum window_ask window_setting(const struct agent *a, const struct proc *lc, uint32_t *after_us)
{
	struct window_rule r;

	window_rule(a, lc, &r);
	*after_us = r.after_us;
	return r.autosize ? WINDOW_ASK_AUTO : r.after_us ? WINDOW_ASK_US : WINDOW_ASK_OFF;
}

/* The longest after that keeps lc's window within max_off percent of its
 * period (0: none fits). */
static uint32_t after_fits(const struct policy_config *cfg, const struct proc *lc,
			   uint32_t max_off)
{
	uint64_t max = lc->phase.period_ns * max_off / 100000u;

	return max > cfg->window_before_us ? (uint32_t)(max - cfg->window_before_us) : 0;
}

uint32_t window_update_after(const struct agent *a, struct proc *lc, uint64_t now)
{
	const struct policy_config *cfg = &a->cfg->policy;
	struct window_rule r;
	uint32_t want, fits;

	if (!lc)
		return cfg->window_after_auto ? 0 : cfg->window_after_us;
	window_rule(a, lc, &r);
	if (!r.autosize) {
		/* An ask for "auto" again later starts from its span afresh. */
		lc->window_auto_us = 0;
		lc->window_shrink_since_us = 0;
		return r.after_us;
	}
	fits = after_fits(cfg, lc, r.max_off) / WINDOW_AUTO_STEP_US * WINDOW_AUTO_STEP_US;
	if (!lc->phase.span_us || !fits) {
		lc->window_auto_us = 0;
		return 0;
	}
	want = lc->phase.span_us + WINDOW_AUTO_MARGIN_US;
	want = (want + WINDOW_AUTO_STEP_US - 1u) / WINDOW_AUTO_STEP_US * WINDOW_AUTO_STEP_US;
	if (want > fits) {
		/* Cut into the margin only, never into the span itself: at a
		 * period on the edge (4999 and 5000 us read in turn) the
		 * windows stay, still past the span. */
		if (want - fits > WINDOW_AUTO_MARGIN_US) {
			lc->window_auto_us = 0;
			lc->window_shrink_since_us = 0;
			return 0;
		}
		want = fits;
	}
	/* A period that got shorter cuts a held length (longer than the span
	 * now asks for) at once: held, it would no longer fit, and the
	 * windows would end until it did (measured: on and off every 0.2-1 s
	 * while the period read 4999 and 5000 us). */
	if (lc->window_auto_us > fits)
		lc->window_auto_us = fits;
	if (want >= lc->window_auto_us) {
		lc->window_auto_us = want;
		lc->window_shrink_since_us = 0;
	} else if (!lc->window_shrink_since_us) {
		lc->window_shrink_since_us = now;
		lc->window_shrink_us = want;
	} else {
		if (want > lc->window_shrink_us)
			lc->window_shrink_us = want;
		if (now - lc->window_shrink_since_us >= WINDOW_AUTO_HOLD_US) {
			lc->window_auto_us = lc->window_shrink_us;
			lc->window_shrink_since_us = 0;
		}
	}
	return lc->window_auto_us;
}

int window_applies(const struct agent *a, struct proc *lc, uint64_t now)
{
	const struct policy_config *cfg = &a->cfg->policy;
	struct window_rule r;
	uint32_t after;
	uint64_t span;

	if (!lc)
		return 0;
	after = window_update_after(a, lc, now);
	span = (uint64_t)cfg->window_before_us + after;
	window_rule(a, lc, &r);
	/* A fixed after that does not fit gets no windows, as the node's
	 * does: a shorter one would end mid-request. */
	return after && !lc->busy.always && lc->phase.period_ns >= 1000u &&
	       span * 100000u <= lc->phase.period_ns * r.max_off;
}

/* The schedule the BE process be should run now: around the requests of
 * the one LC with a fresh phase on the GPU of be's first GR TSG that has
 * one, when the window fits in the policy's share of that LC's period.
 * Returns 0 when there is none. */
static int window_for(const struct agent *a, const struct proc *be, uint64_t now,
		      struct peer_window *out)
{
	const struct policy_config *cfg = &a->cfg->policy;

	for (const struct tsg *t = a->tsgs; t; t = t->next) {
		struct proc *lc;

		if (t->proc != be || !rm_engine_is_gr(t->engine))
			continue;
		lc = phase_lc(a, t->gpu, now);
		/* A launch-bound LC has no gaps to keep the BE out of. */
		if (!window_applies(a, lc, now))
			continue;
		out->on = 1;
		out->gpu = t->gpu;
		out->period_ns = lc->phase.period_ns;
		out->start_us = phase_grid_update(lc);
		out->before_us = cfg->window_before_us;
		out->after_us = window_update_after(a, lc, now);
		out->lc_pid = lc->pid;
		return 1;
	}
	return 0;
}

/* Starts a and b lie on one grid of this period, within WINDOW_SAME_US. */
static int same_grid(uint64_t a_us, uint64_t b_us, uint64_t period_ns)
{
	uint64_t d = (a_us > b_us ? a_us - b_us : b_us - a_us) * 1000u % period_ns;

	return d <= WINDOW_SAME_US * 1000u || period_ns - d <= WINDOW_SAME_US * 1000u;
}

/* Periods a and b part by under WINDOW_SAME_US over one renewal: the
 * predictor's period moves by nanoseconds from report to report. */
static int same_period(uint64_t a_ns, uint64_t b_ns)
{
	uint64_t d = a_ns > b_ns ? a_ns - b_ns : b_ns - a_ns;

	return d * (WINDOW_RENEW_US * 1000u / a_ns + 1) <= WINDOW_SAME_US * 1000u;
}

static void window_send(struct agent *a, struct peer *p, uint64_t now)
{
	if (!a->hooks.send_window || a->hooks.send_window(a, p) != 0)
		return;
	p->win.sent_us = now;
	if (p->win.on)
		a->n.windows_sent++;
	else
		a->n.windows_ended++;
}

void window_plan(struct agent *a, uint64_t now)
{
	for (struct peer *p = a->peers; p; p = p->next) {
		struct peer_window want;
		int moved;

		if (!p->hello || p->broken || !p->can_window || !p->proc)
			continue;
		memset(&want, 0, sizeof(want));
		if (p->proc->cls != CLASS_BE || !window_for(a, p->proc, now, &want)) {
			if (p->win.on) {
				log_info("pid %d: windows end", (int)p->pid);
				memset(&p->win, 0, sizeof(p->win));
				window_send(a, p, now);
			}
			continue;
		}
		moved = !p->win.on || p->win.gpu != want.gpu ||
			!same_period(p->win.period_ns, want.period_ns) ||
			!same_grid(p->win.start_us, want.start_us, want.period_ns) ||
			p->win.before_us != want.before_us ||
			p->win.after_us != want.after_us;
		if (!moved && now < p->win.sent_us + WINDOW_RENEW_US)
			continue;
		if (!p->win.on || p->win.lc_pid != want.lc_pid)
			log_info("pid %d: windows on GPU %u around the requests of LC pid %d (every "
				 "%llu us, %u us before to %u us after)",
				 (int)p->pid, want.gpu, (int)want.lc_pid,
				 (unsigned long long)(want.period_ns / 1000u), want.before_us,
				 want.after_us);
		else if (p->win.after_us != want.after_us)
			log_info("pid %d: windows now %u us after each request (were %u)",
				 (int)p->pid, want.after_us, p->win.after_us);
		want.sent_us = p->win.sent_us;
		p->win = want;
		window_send(a, p, now);
	}
}

uint64_t window_next_deadline(const struct agent *a)
{
	uint64_t next = 0;

	for (const struct peer *p = a->peers; p; p = p->next) {
		uint64_t due = p->win.sent_us + WINDOW_RENEW_US;

		if (p->win.on && (next == 0 || due < next))
			next = due;
	}
	return next;
}

int peer_window_held(const struct peer *p, uint64_t now)
{
	if (!p || !p->win.on || !p->win_state.known ||
	    now - p->win_state.rx_us > (uint64_t)WINDOW_LEASE_MS * 1000u)
		return -1;
	return p->win_state.on;
}

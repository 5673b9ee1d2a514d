/* SPDX-License-Identifier: Apache-2.0 */
/*
 * window.c - windows: keeping each BE off its GPU around every request of
 * the one periodic LC beside it, by a schedule its own preempt agent runs
 * (docs/policy.md, "Windows"; docs/protocol.md, "Windows").
 *
 * Owns: the window decision of every LC and BE (struct window_decision:
 * given, or refused and why), which BE process gets which schedule (that
 * grid and period, the policy's before and after), and sending, renewing
 * and ending it, a start or a move within the per-TSG control bound and
 * at most one a WINDOW_MOVE_MIN_US. Does not own: receiving PHASE
 * (peer.c), when an LC's requests come (phase.c), running the schedule
 * and the budget on the BE's real off time (the BE's preempt agent,
 * preempt_window.c), placing a rotation's turn change (rotate.c, which
 * reads the decision), showing the decision (ctl, metrics, the pod's
 * state: they render proc.win, never decide again).
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

#include <stdarg.h>
#include <stdio.h>
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
	int own;           /* lc's own ask, not the node's default */
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
	r->own = 0;
	if (ask.ask == WINDOW_ASK_OFF) {
		/* Takes nothing from the BEs: always honoured. */
		r->after_us = 0;
		r->autosize = 0;
		r->own = 1;
	} else if (ask.ask != WINDOW_ASK_NONE && cfg->window_pod_max_off_percent) {
		r->own = 1;
		r->after_us = ask.ask == WINDOW_ASK_US ? ask.after_us : 0;
		r->autosize = ask.ask == WINDOW_ASK_AUTO;
		if (cfg->window_pod_max_off_percent < r->max_off)
			r->max_off = cfg->window_pod_max_off_percent;
	}
}

/* The longest after that keeps lc's window within max_off percent of its
 * period (0: none fits). */
static uint32_t after_fits(const struct policy_config *cfg, const struct proc *lc,
			   uint32_t max_off)
{
	uint64_t max = lc->grid.period_ns * max_off / 100000u;

	return max > cfg->window_before_us ? (uint32_t)(max - cfg->window_before_us) : 0;
}

/* lc's after for rule r (us; 0: none fits): the fixed one, or with
 * "auto" its span and a margin, held in lc->window_auto_us (grows at
 * once, shrinks only after WINDOW_AUTO_HOLD_US of shorter spans). */
static uint32_t window_size(const struct agent *a, struct proc *lc, const struct window_rule *r,
			    uint64_t now)
{
	const struct policy_config *cfg = &a->cfg->policy;
	uint32_t want, fits;

	if (!r->autosize) {
		/* An ask for "auto" again later starts from its span afresh. */
		lc->window_auto_us = 0;
		lc->window_shrink_since_us = 0;
		return r->after_us;
	}
	fits = after_fits(cfg, lc, r->max_off) / WINDOW_AUTO_STEP_US * WINDOW_AUTO_STEP_US;
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

static const struct {
	const char *name, *text;
} why_names[] = {
	[WINDOW_GIVEN] = { "given", "given" },
	[WINDOW_WHY_OFF] = { "off", "windows are off on the node and it asked for none" },
	[WINDOW_WHY_ASKED_OFF] = { "askedOff", "it asked for none (\"off\")" },
	[WINDOW_WHY_UNVERIFIED] = { "unverified",
				    "no TSG of it is confirmed (a claim counts for nobody)" },
	[WINDOW_WHY_PERIOD_UNKNOWN] = { "periodUnknown", "no fresh PHASE: its period is unknown" },
	[WINDOW_WHY_PERIOD_UNSTABLE] = { "periodUnstable",
					 "its period moved and has not held for 1 s" },
	[WINDOW_WHY_LAUNCH_BOUND] = { "launchBound", "it is launch-bound: no gaps" },
	[WINDOW_WHY_SEVERAL_LC] = { "severalLc", "another LC with a PHASE shares its GPU" },
	[WINDOW_WHY_NO_SPAN] = { "noSpan", "\"auto\" and no span reported yet" },
	[WINDOW_WHY_CAP] = { "cap", "the window does not fit the cap of its period" },
	[WINDOW_WHY_NO_BE] = { "noBe", "no BE beside it takes windows" },
	[WINDOW_WHY_NO_LC] = { "noLc", "no single periodic LC beside it" },
	[WINDOW_WHY_LC_REFUSED] = { "lcRefused", "the LC beside it has its windows refused" },
	[WINDOW_WHY_HELD] = { "held", "its schedule moved within 1 s, or the control bound holds it" },
};

const char *window_why_name(enum window_why why)
{
	return (unsigned)why < sizeof(why_names) / sizeof(why_names[0]) && why_names[why].name
		       ? why_names[why].name
		       : "?";
}

const char *window_why_text(enum window_why why)
{
	return (unsigned)why < sizeof(why_names) / sizeof(why_names[0]) && why_names[why].text
		       ? why_names[why].text
		       : "?";
}

/* lc's first confirmed GR TSG: where its windows are decided (NULL: none). */
static const struct tsg *lc_gr(const struct agent *a, const struct proc *lc)
{
	for (const struct tsg *t = a->tsgs; t; t = t->next)
		if (t->proc == lc && rm_engine_is_gr(t->engine) && t->gpu != GQ_UNKNOWN &&
		    !tsg_unverified(t))
			return t;
	return NULL;
}

static enum window_why decide_lc(struct agent *a, struct proc *lc, uint64_t now)
{
	struct window_decision *d = &lc->win;
	const struct tsg *gr = lc_gr(a, lc);
	struct window_rule r;
	uint64_t span;
	uint32_t after;

	window_rule(a, lc, &r);
	d->decided = 1;
	d->ask = r.autosize ? WINDOW_ASK_AUTO : r.after_us ? WINDOW_ASK_US : WINDOW_ASK_OFF;
	d->own = r.own;
	d->ask_us = r.after_us;
	d->cap_percent = r.max_off;
	d->gpu = gr ? gr->gpu : GQ_UNKNOWN;
	if (d->ask == WINDOW_ASK_OFF) {
		lc->window_auto_us = 0;
		return r.own ? WINDOW_WHY_ASKED_OFF : WINDOW_WHY_OFF;
	}
	if (!gr)
		return WINDOW_WHY_UNVERIFIED;
	if (!phase_fresh(lc, now))
		return WINDOW_WHY_PERIOD_UNKNOWN;
	phase_grid_take(lc);
	if (lc->grid.pending_ns)
		return WINDOW_WHY_PERIOD_UNSTABLE;
	if (lc->busy.always)
		return WINDOW_WHY_LAUNCH_BOUND;
	if (phase_lc(a, gr->gpu, now) != lc)
		return WINDOW_WHY_SEVERAL_LC;
	d->period_ns = lc->grid.period_ns;
	after = window_size(a, lc, &r, now);
	if (!after)
		return r.autosize && !lc->phase.span_us ? WINDOW_WHY_NO_SPAN : WINDOW_WHY_CAP;
	/* A fixed after that does not fit gets no windows, as the node's
	 * does: a shorter one would end mid-request. */
	span = (uint64_t)d->before_us + after;
	if (span * 100000u > d->period_ns * r.max_off)
		return WINDOW_WHY_CAP;
	d->after_us = after;
	return WINDOW_GIVEN;
}

/* The BE be's windows: around the LC of the first GPU of its confirmed
 * GR TSGs whose LC has them, else refused with the first LC's reason. */
static void decide_be(struct agent *a, struct proc *be, uint64_t now)
{
	struct window_decision *d = &be->win;

	d->decided = 1;
	d->why = WINDOW_WHY_NO_LC;
	for (const struct tsg *t = a->tsgs; t; t = t->next) {
		struct proc *lc;

		if (t->proc != be || !rm_engine_is_gr(t->engine) || t->gpu == GQ_UNKNOWN ||
		    tsg_unverified(t))
			continue;
		lc = phase_lc(a, t->gpu, now);
		if (!lc || !lc->win.decided)
			continue;
		if (lc->win.why == WINDOW_GIVEN || lc->win.why == WINDOW_WHY_NO_BE) {
			d->why = WINDOW_GIVEN;
			d->lc_pid = lc->pid;
			d->gpu = t->gpu;
			d->after_us = lc->win.after_us;
			d->period_ns = lc->win.period_ns;
			lc->win.bes++;
			return;
		}
		if (d->why == WINDOW_WHY_NO_LC) {
			d->why = WINDOW_WHY_LC_REFUSED;
			d->lc_pid = lc->pid;
			d->gpu = t->gpu;
		}
	}
}

static void window_log(struct agent *a, struct proc *p, enum log_level lv, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* A decision that changed is logged once (within its window lines' limit). */
static void decision_log(struct agent *a, struct proc *p)
{
	struct window_decision *d = &p->win;

	if (d->logged ? d->logged_why == d->why && d->logged_after_us == d->after_us
		      : d->why == WINDOW_WHY_OFF || d->why == WINDOW_WHY_NO_LC)
		return;
	d->logged = 1;
	d->logged_why = d->why;
	d->logged_after_us = d->after_us;
	if (p->cls != CLASS_LC)
		return; /* a BE's schedule is logged as it is sent (window_plan) */
	if (d->why == WINDOW_GIVEN)
		window_log(a, p, LOG_LEVEL_INFO,
			 "pid %d: windows given: %u us before to %u us after each request, every "
			 "%llu us (cap %u %%)",
			 (int)p->pid, d->before_us, d->after_us,
			 (unsigned long long)(d->period_ns / 1000u), d->cap_percent);
	else if (d->why == WINDOW_WHY_UNVERIFIED || d->why == WINDOW_WHY_PERIOD_UNKNOWN ||
		 d->why == WINDOW_WHY_NO_BE)
		/* Those of a process coming up (not confirmed, no PHASE yet, no
		 * BE yet) say little: at debug, outside its line budget. */
		log_debug("pid %d: windows refused (%s): %s", (int)p->pid, window_why_name(d->why),
			  window_why_text(d->why));
	else
		window_log(a, p, LOG_LEVEL_INFO, "pid %d: windows refused (%s): %s", (int)p->pid,
			 window_why_name(d->why), window_why_text(d->why));
}

void window_decide(struct agent *a, uint64_t now)
{
	int any = 0;

	for (struct proc *p = a->procs; p; p = p->next) {
		struct window_decision *d = &p->win;
		int logged = d->logged;
		enum window_why lw = d->logged_why;
		uint32_t la = d->logged_after_us;

		memset(d, 0, sizeof(*d));
		d->logged = logged;
		d->logged_why = lw;
		d->logged_after_us = la;
		d->before_us = a->cfg->policy.window_before_us;
		if (p->cls == CLASS_LC)
			d->why = decide_lc(a, p, now);
	}
	for (struct proc *p = a->procs; p; p = p->next)
		if (p->cls == CLASS_LC && p->win.why != WINDOW_WHY_OFF &&
		    p->win.why != WINDOW_WHY_ASKED_OFF)
			any = 1;
	/* With no LC asking for windows, the BEs need no walk of the TSGs. */
	for (struct proc *p = a->procs; p; p = p->next)
		if (p->cls == CLASS_BE && p->peer && p->peer->can_window) {
			if (any) {
				decide_be(a, p, now);
			} else {
				p->win.decided = 1;
				p->win.why = WINDOW_WHY_NO_LC;
			}
		}
	for (struct proc *p = a->procs; p; p = p->next) {
		if (p->cls == CLASS_LC && p->win.why == WINDOW_GIVEN && !p->win.bes) {
			p->win.why = WINDOW_WHY_NO_BE;
			p->win.after_us = 0;
		}
		if (p->win.decided)
			decision_log(a, p);
	}
}

/* The schedule the BE process be should run now, as window_decide
 * decided. Returns 0 when there is none. */
static int window_for(struct agent *a, const struct proc *be, struct peer_window *out)
{
	struct proc *lc;

	if (!be->win.decided || be->win.why != WINDOW_GIVEN)
		return 0;
	lc = proc_find(a, be->win.lc_pid);
	if (!lc || lc->win.why != WINDOW_GIVEN)
		return 0;
	out->on = 1;
	out->gpu = be->win.gpu;
	out->period_ns = lc->win.period_ns;
	out->start_us = lc->grid.anchor_us;
	out->before_us = lc->win.before_us;
	out->after_us = lc->win.after_us;
	out->lc_pid = lc->pid;
	return 1;
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

/* A start or a move of be's schedule on gpu is a control of each of its
 * confirmed GR TSGs there: within the per-TSG bound (reconcile.c), all
 * or none. 1: taken. */
static int window_control_take(struct agent *a, const struct proc *be, uint32_t gpu,
			       uint64_t now)
{
	for (struct tsg *t = a->tsgs; t; t = t->next)
		if (t->proc == be && rm_engine_is_gr(t->engine) && t->gpu == gpu &&
		    !tsg_control_allowed(a, t, AGENT_CONTROL_WINDOW, now))
			return 0;
	for (struct tsg *t = a->tsgs; t; t = t->next)
		if (t->proc == be && rm_engine_is_gr(t->engine) && t->gpu == gpu)
			tsg_control_charge(a, t, AGENT_CONTROL_WINDOW, now);
	return 1;
}

/* Window lines of process p ("windows on", "windows end", decisions):
 * at most WINDOW_LOG_BURST per AGENT_PROC_LOG_WINDOW_MS, counted apart
 * from its other lines (proc_log); the rest counted as suppressed. */
#define WINDOW_LOG_BURST 6u

static void window_log(struct agent *a, struct proc *p, enum log_level lv, const char *fmt, ...)
{
	unsigned long dropped;
	char line[512];
	va_list ap;

	if (!ratelimit_allow(&p->win_log, core_now_us(), WINDOW_LOG_BURST,
			     AGENT_PROC_LOG_WINDOW_MS * 1000ull, &dropped)) {
		a->n.log_suppressed++;
		return;
	}
	if (dropped)
		log_warn("pid %d: %lu window line(s) suppressed (limit %u per %u s)", (int)p->pid,
			 dropped, WINDOW_LOG_BURST, AGENT_PROC_LOG_WINDOW_MS / 1000u);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_line(lv, "%s", line);
}

void window_plan(struct agent *a, uint64_t now)
{
	for (struct peer *p = a->peers; p; p = p->next) {
		struct peer_window want;
		int moved;

		if (!p->hello || p->broken || !p->can_window || !p->proc)
			continue;
		memset(&want, 0, sizeof(want));
		if (p->proc->cls != CLASS_BE || !window_for(a, p->proc, &want)) {
			if (p->win.on) {
				uint64_t moved_us = p->win.moved_us;

				window_log(a, p->proc, LOG_LEVEL_INFO,
					 "pid %d: windows end", (int)p->pid);
				memset(&p->win, 0, sizeof(p->win));
				p->win.moved_us = moved_us;
				window_send(a, p, now);
			}
			continue;
		}
		moved = !p->win.on || p->win.gpu != want.gpu ||
			!same_period(p->win.period_ns, want.period_ns) ||
			!same_grid(p->win.start_us, want.start_us, want.period_ns) ||
			p->win.before_us != want.before_us ||
			p->win.after_us != want.after_us;
		if (moved && ((p->win.moved_us && now < p->win.moved_us + WINDOW_MOVE_MIN_US) ||
			      !window_control_take(a, p->proc, want.gpu, now))) {
			/* Held: the schedule it runs is renewed, a start waits. */
			p->proc->win.why = WINDOW_WHY_HELD;
			if (!p->win.on || now < p->win.sent_us + WINDOW_RENEW_US)
				continue;
			window_send(a, p, now);
			continue;
		}
		if (!moved && now < p->win.sent_us + WINDOW_RENEW_US)
			continue;
		if (!p->win.on || p->win.lc_pid != want.lc_pid)
			window_log(a, p->proc, LOG_LEVEL_INFO,
				 "pid %d: windows on GPU %u around the requests of LC pid %d (every "
				 "%llu us, %u us before to %u us after)",
				 (int)p->pid, want.gpu, (int)want.lc_pid,
				 (unsigned long long)(want.period_ns / 1000u), want.before_us,
				 want.after_us);
		else if (p->win.after_us != want.after_us)
			window_log(a, p->proc, LOG_LEVEL_INFO,
				 "pid %d: windows now %u us after each request (were %u)",
				 (int)p->pid, want.after_us, p->win.after_us);
		want.sent_us = p->win.sent_us;
		want.moved_us = moved ? now : p->win.moved_us;
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

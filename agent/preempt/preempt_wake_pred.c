/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_wake_pred.c - predicting a periodic LC's next request from the
 * starts of its launch bursts, and judging each wake by what followed.
 *
 * Owns: the arithmetic only. No clock, no lock, no I/O: the caller passes
 * times in and serialises calls.
 */
#include <string.h>

#include "preempt_wake.h"

void pa_wake_pred_reset(struct pa_wake_pred *p)
{
	memset(p, 0, sizeof(*p));
}

void pa_wake_pred_forget(struct pa_wake_pred *p)
{
	p->last = 0;
	p->n = 0;
	p->head = 0;
	p->period = 0;
	/* The spans held stay: they are the application's, not the
	 * context's. */
	p->nstarts = 0;
	p->due = 0;
}

/* The median of the held intervals, or 0 unless at least
 * PA_WAKE_AGREE of them lie within PA_WAKE_JITTER_NS of it: one late
 * request (two odd intervals) does not stop the wakes of the next ones. */
static rm_u64 agreed_period(const struct pa_wake_pred *p)
{
	rm_u64 s[PA_WAKE_HIST], m;
	unsigned i, j, near = 0;

	if (p->n < PA_WAKE_HIST)
		return 0;
	memcpy(s, p->iv, sizeof(s));
	for (i = 1; i < PA_WAKE_HIST; i++)
		for (j = i; j > 0 && s[j - 1] > s[j]; j--) {
			rm_u64 t = s[j];

			s[j] = s[j - 1];
			s[j - 1] = t;
		}
	m = s[PA_WAKE_HIST / 2];
	if (m < PA_WAKE_MIN_PERIOD_NS || m > PA_WAKE_MAX_PERIOD_NS)
		return 0;
	for (i = 0; i < PA_WAKE_HIST; i++)
		near += (s[i] > m ? s[i] - m : m - s[i]) <= PA_WAKE_JITTER_NS;
	return near >= PA_WAKE_AGREE ? m : 0;
}

/* A calm or wasted judgement, real or shadow: the backoff comes down
 * after PA_WAKE_CALM calm ones, and PA_WAKE_RESUME calm ones in a row end
 * a hold. */
static void note_calm(struct pa_wake_pred *p, int wasted)
{
	if (wasted) {
		p->calm = 0;
		p->streak = 0;
		return;
	}
	p->streak++;
	if (++p->calm >= PA_WAKE_CALM) {
		p->calm = 0;
		if (p->backoff)
			p->backoff--;
	}
	if (p->hold && p->streak >= PA_WAKE_RESUME) {
		p->hold = 0;
		p->resumes++;
	}
}

/* One judged wake into the window; a hold when too many were wasted. */
static void note_judged(struct pa_wake_pred *p, int wasted)
{
	if (p->njudged == PA_WAKE_WINDOW)
		p->nwasted -= p->judged[p->jhead];
	else
		p->njudged++;
	p->judged[p->jhead] = (unsigned char)wasted;
	p->jhead = (p->jhead + 1) % PA_WAKE_WINDOW;
	p->nwasted += (unsigned)wasted;
	note_calm(p, wasted);
	if (p->nwasted < PA_WAKE_MISS_LIMIT || p->keep_waking)
		return;
	p->hold = PA_WAKE_HOLD << p->backoff;
	p->stops++;
	if (p->backoff < PA_WAKE_BACKOFF_MAX)
		p->backoff++;
	p->njudged = 0;
	p->jhead = 0;
	p->nwasted = 0;
}

/* Whether the request's first operation came within the wake's reach
 * (or up to one reach before it: the two switches merge) and its kernels
 * more than PA_WAKE_SPLIT_NS after that operation. */
static int split(const struct pa_wake_pred *p, rm_u64 t, rm_u64 first_op)
{
	if (!first_op || first_op >= t || t - first_op <= PA_WAKE_SPLIT_NS)
		return 0;
	return first_op + PA_WAKE_REACH_NS >= p->woken_at &&
	       first_op <= p->woken_at + PA_WAKE_REACH_NS;
}

/* Judge the wake issued for the start that just happened at t; while
 * wakes are held, the wake that would have been (the shadow), by the
 * reach alone: it only decides when wakes resume. */
static void judge(struct pa_wake_pred *p, rm_u64 t, rm_u64 first_op)
{
	int wasted = 0;

	if (p->shadow_for == p->seq + 1 && p->shadow_at) {
		p->shadow_for = 0;
		if (p->hold)
			note_calm(p, t > p->shadow_at && t - p->shadow_at > PA_WAKE_REACH_NS);
		return;
	}
	if (p->woken_for != p->seq + 1 || !p->woken_at)
		return; /* no wake issued for this start */
	if (split(p, t, first_op)) {
		p->wasted++;
		p->split++;
		wasted = 1;
	} else if (t < p->woken_at)
		p->early++; /* the request beat its wake: nothing lost */
	else if (t - p->woken_at <= PA_WAKE_REACH_NS)
		p->hits++;
	else {
		p->wasted++;
		wasted = 1;
	}
	note_judged(p, wasted);
}

/* The grid point the request starting at t was due on: the median of the
 * latest starts (t among them), each taken to its grid point nearest t;
 * 0 without an agreed period or enough starts. */
static rm_u64 due_of(const struct pa_wake_pred *p, rm_u64 t)
{
	long long d[PA_SPAN_STARTS];
	rm_u64 per = p->period;

	if (!per || p->nstarts < PA_SPAN_STARTS)
		return 0;
	for (unsigned i = 0; i < PA_SPAN_STARTS; i++) {
		rm_u64 r = (t - p->starts[i]) % per; /* starts[i] <= t */

		d[i] = r <= per / 2 ? -(long long)r : (long long)(per - r);
	}
	for (unsigned i = 1; i < PA_SPAN_STARTS; i++)
		for (unsigned k = i; k > 0 && d[k] < d[k - 1]; k--) {
			long long x = d[k];

			d[k] = d[k - 1];
			d[k - 1] = x;
		}
	return (rm_u64)((long long)t + d[PA_SPAN_STARTS / 2]);
}

/* The latest request's span, if it had a due time and an end. */
static void note_span(struct pa_wake_pred *p, rm_u64 done)
{
	rm_u64 us;

	if (!p->due || !done || done <= p->due || done - p->due >= p->due_period)
		return;
	us = (done - p->due + 999u) / 1000u;
	p->span_us[p->span_head] = (rm_u32)us;
	p->span_head = (p->span_head + 1) % PA_SPAN_HIST;
	if (p->nspan < PA_SPAN_HIST)
		p->nspan++;
	p->spans++;
}

unsigned pa_wake_pred_spans(const struct pa_wake_pred *p, rm_u32 out[PA_SPAN_HIST])
{
	memcpy(out, p->span_us, p->nspan * sizeof(out[0]));
	return p->nspan;
}

rm_u32 pa_span_percentile(rm_u32 *s, unsigned n)
{
	if (n < PA_SPAN_MIN || n > PA_SPAN_HIST)
		return 0;
	for (unsigned i = 1; i < n; i++)
		for (unsigned k = i; k > 0 && s[k] < s[k - 1]; k--) {
			rm_u32 x = s[k];

			s[k] = s[k - 1];
			s[k - 1] = x;
		}
	return s[(n * PA_SPAN_PERCENTILE + 99u) / 100u - 1u];
}

rm_u32 pa_wake_pred_span(const struct pa_wake_pred *p)
{
	rm_u32 s[PA_SPAN_HIST];

	return pa_span_percentile(s, pa_wake_pred_spans(p, s));
}

void pa_wake_pred_start(struct pa_wake_pred *p, rm_u64 t, rm_u64 first_op, rm_u64 done)
{
	if (p->hold)
		p->hold--;
	note_span(p, done);
	judge(p, t, first_op);
	if (p->last && t > p->last) {
		p->iv[p->head] = t - p->last;
		p->head = (p->head + 1) % PA_WAKE_HIST;
		if (p->n < PA_WAKE_HIST)
			p->n++;
	} else if (p->last) {
		/* The clock did not move forward: start over. */
		p->n = 0;
		p->head = 0;
	}
	p->last = t;
	p->seq++;
	p->period = agreed_period(p);
	if (p->nstarts && t < p->starts[0])
		p->nstarts = 0;
	for (unsigned i = PA_SPAN_STARTS - 1; i > 0; i--)
		p->starts[i] = p->starts[i - 1];
	p->starts[0] = t;
	if (p->nstarts < PA_SPAN_STARTS)
		p->nstarts++;
	p->due = due_of(p, t);
	p->due_period = p->period;
}

void pa_wake_pred_overtaken(struct pa_wake_pred *p)
{
	p->wakes++;
	p->early++;
}

rm_u64 pa_wake_pred_target(struct pa_wake_pred *p, rm_u64 lead_ns)
{
	if (!p->period || !lead_ns || p->woken_for == p->seq + 1 || p->period <= lead_ns)
		return 0;
	if (p->hold) {
		p->shadow_for = p->seq + 1;
		p->shadow_at = p->last + p->period - lead_ns;
		return 0;
	}
	return p->last + p->period - lead_ns;
}

void pa_wake_pred_woken(struct pa_wake_pred *p, rm_u64 t)
{
	p->woken_for = p->seq + 1;
	p->woken_at = t;
	if (t)
		p->wakes++;
	else
		p->skipped++;
}

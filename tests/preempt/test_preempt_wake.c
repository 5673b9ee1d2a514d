/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_preempt_wake.c - unit tests of the wake predictor
 * (agent/preempt/preempt_wake_pred.c): when a period is agreed, where the
 * wake is aimed, how each wake is judged (by the reach, and by a request
 * whose kernels came long after its first operation), the hold after
 * wasted ones, and the requests' spans.
 */
#include "agent/core/policy.h"
#include "agent/preempt/preempt_wake.h"
#include "tests/check.h"

/* The node agent warns of a lead past the reach the preempt agent judges by. */
_Static_assert(PA_WAKE_REACH_NS == POLICY_WAKE_REACH_US * 1000ull, "the wake's reach, twice");

#define US 1000ull
#define MS 1000000ull
#define LEAD (100 * US)

static struct pa_wake_pred P;

/* Starts at t0, t0 + period, ... (n of them); returns the last. */
static rm_u64 feed(rm_u64 t0, rm_u64 period, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		pa_wake_pred_start(&P, t0 + i * period, 0, 0);
	return t0 + (n - 1) * period;
}

static void test_agreement(void)
{
	rm_u64 last;

	pa_wake_pred_reset(&P);
	/* Eight intervals are needed: nine starts. */
	last = feed(10 * MS, 2 * MS, PA_WAKE_HIST);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), 0);
	pa_wake_pred_start(&P, last + 2 * MS, 0, 0);
	last += 2 * MS;
	CHECK_EQ_U(P.period, 2 * MS);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), last + 2 * MS - LEAD);
	/* No lead, or a lead as long as the period: nothing. */
	CHECK_EQ_U(pa_wake_pred_target(&P, 0), 0);
	CHECK_EQ_U(pa_wake_pred_target(&P, 2 * MS), 0);

	/* One late request (two odd intervals) keeps the period... */
	pa_wake_pred_start(&P, last + 2 * MS + 400 * US, 0, 0);
	pa_wake_pred_start(&P, last + 4 * MS, 0, 0);
	CHECK_EQ_U(P.period, 2 * MS);
	/* ...three odd intervals out of eight do not. */
	pa_wake_pred_start(&P, last + 6 * MS + 300 * US, 0, 0);
	CHECK_EQ_U(P.period, 0);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), 0);

	/* Starts alternately 25 us late: intervals 50 us apart, each within
	 * 50 us of the median, agree; 60 us late (120 apart) do not. */
	pa_wake_pred_reset(&P);
	for (unsigned i = 0; i < 9; i++)
		pa_wake_pred_start(&P, 5 * MS + i * 3 * MS + (i % 2) * 25 * US, 0, 0);
	CHECK(P.period != 0);
	pa_wake_pred_reset(&P);
	for (unsigned i = 0; i < 9; i++)
		pa_wake_pred_start(&P, 5 * MS + i * 3 * MS + (i % 2) * 60 * US, 0, 0);
	CHECK_EQ_U(P.period, 0);

	/* Periods outside 1 ms .. 1 s are not predicted. */
	pa_wake_pred_reset(&P);
	feed(MS, 900 * US, 12);
	CHECK_EQ_U(P.period, 0);
	pa_wake_pred_reset(&P);
	feed(MS, 1100 * MS, 12);
	CHECK_EQ_U(P.period, 0);

	/* A clock that does not move forward starts over. */
	pa_wake_pred_reset(&P);
	last = feed(10 * MS, 2 * MS, 12);
	CHECK(P.period != 0);
	pa_wake_pred_start(&P, last, 0, 0);
	CHECK_EQ_U(P.period, 0);
	CHECK_EQ_U(P.n, 0);

	/* Forgetting (a context gone): nothing is aimed at until nine new
	 * starts agree; the counts stay. */
	pa_wake_pred_reset(&P);
	last = feed(10 * MS, 2 * MS, 12);
	pa_wake_pred_woken(&P, last + 2 * MS - LEAD);
	pa_wake_pred_start(&P, last + 2 * MS, 0, 0);
	pa_wake_pred_forget(&P);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), 0);
	CHECK_EQ_U(P.hits, 1);
	last = feed(last + 50 * MS, 2 * MS, PA_WAKE_HIST);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), 0);
	pa_wake_pred_start(&P, last + 2 * MS, 0, 0);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), last + 4 * MS - LEAD);
}

/* n wakes, each issued 10 us past the reach ahead of its start (which
 * comes on time, so the period holds). */
static rm_u64 wasted_wakes(rm_u64 last, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		CHECK(pa_wake_pred_target(&P, LEAD) != 0);
		pa_wake_pred_woken(&P, last + 2 * MS - PA_WAKE_REACH_NS - 10 * US);
		pa_wake_pred_start(&P, last + 2 * MS, 0, 0);
		last += 2 * MS;
	}
	return last;
}

/* n wakes that each hit. */
static rm_u64 hit_wakes(rm_u64 last, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		pa_wake_pred_woken(&P, last + 2 * MS - LEAD);
		pa_wake_pred_start(&P, last + 2 * MS, 0, 0);
		last += 2 * MS;
	}
	return last;
}

/* n starts on time, with no wake issued. */
static rm_u64 plain_starts(rm_u64 last, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		pa_wake_pred_start(&P, last + 2 * MS, 0, 0);
		last += 2 * MS;
	}
	return last;
}

static void test_judging(void)
{
	rm_u64 last, target;

	pa_wake_pred_reset(&P);
	last = feed(10 * MS, 2 * MS, 9);
	target = pa_wake_pred_target(&P, LEAD);
	CHECK_EQ_U(target, last + 2 * MS - LEAD);
	pa_wake_pred_woken(&P, target);
	/* One wake per start. */
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), 0);
	pa_wake_pred_start(&P, last + 2 * MS, 0, 0);
	CHECK_EQ_U(P.hits, 1);
	CHECK_EQ_U(P.wakes, 1);

	/* The request beat its wake. */
	last += 2 * MS;
	pa_wake_pred_woken(&P, last + 2 * MS + 10 * US);
	pa_wake_pred_start(&P, last + 2 * MS, 0, 0);
	CHECK_EQ_U(P.early, 1);

	/* Not issued (t 0): not judged, not counted as a wake. */
	last += 2 * MS;
	pa_wake_pred_woken(&P, 0);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), 0);
	pa_wake_pred_start(&P, last + 2 * MS, 0, 0);
	CHECK_EQ_U(P.skipped, 1);
	CHECK_EQ_U(P.wakes, 2);
	CHECK_EQ_U(P.hits + P.wasted + P.early, 2);

	/* Issued while its request started (the thread found the start moved
	 * on when it came to record it): a wake, counted as beaten, and the
	 * next start is woken as usual. */
	last += 2 * MS;
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), last + 2 * MS - LEAD);
	pa_wake_pred_start(&P, last + 2 * MS, 0, 0);
	pa_wake_pred_overtaken(&P);
	CHECK_EQ_U(P.wakes, 3);
	CHECK_EQ_U(P.early, 2);
	CHECK_EQ_U(P.hits + P.wasted + P.early, 3);
	CHECK(pa_wake_pred_target(&P, LEAD) != 0);

	/* Wasted: the request came more than PA_WAKE_REACH_NS after its
	 * wake, whatever the lead. At the reach exactly it is still a hit. */
	last += 2 * MS;
	pa_wake_pred_woken(&P, last + 2 * MS - LEAD);
	pa_wake_pred_start(&P, last + 2 * MS - LEAD + PA_WAKE_REACH_NS, 0, 0);
	CHECK_EQ_U(P.wasted, 0);
	CHECK_EQ_U(P.hits, 2);
	last = P.last;
	/* PA_WAKE_MISS_LIMIT wasted among the last PA_WAKE_WINDOW hold wakes
	 * off for PA_WAKE_HOLD starts. */
	last = wasted_wakes(last, PA_WAKE_MISS_LIMIT);
	CHECK_EQ_U(P.wasted, PA_WAKE_MISS_LIMIT);
	CHECK_EQ_U(P.hold, PA_WAKE_HOLD);
	CHECK_EQ_U(P.stops, 1);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), 0);
	last = plain_starts(last, PA_WAKE_HOLD - 1);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), 0);
	last = plain_starts(last, 1);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), last + 2 * MS - LEAD);
	/* The next hold is twice as long, and so on up to
	 * PA_WAKE_BACKOFF_MAX doublings. */
	last = wasted_wakes(last, PA_WAKE_MISS_LIMIT);
	CHECK_EQ_U(P.hold, 2 * PA_WAKE_HOLD);
	CHECK_EQ_U(P.stops, 2);
	for (unsigned k = 2; k <= PA_WAKE_BACKOFF_MAX + 1; k++) {
		last = plain_starts(last, P.hold);
		last = wasted_wakes(last, PA_WAKE_MISS_LIMIT);
		CHECK_EQ_U(P.hold, PA_WAKE_HOLD << (k < PA_WAKE_BACKOFF_MAX ? k : PA_WAKE_BACKOFF_MAX));
	}
	/* PA_WAKE_CALM hits in a row halve the next hold. */
	last = plain_starts(last, P.hold);
	CHECK_EQ_U(P.backoff, PA_WAKE_BACKOFF_MAX);
	last = hit_wakes(last, PA_WAKE_CALM);
	CHECK_EQ_U(P.backoff, PA_WAKE_BACKOFF_MAX - 1);
	last = wasted_wakes(last, PA_WAKE_MISS_LIMIT);
	CHECK_EQ_U(P.hold, PA_WAKE_HOLD << (PA_WAKE_BACKOFF_MAX - 1));

	/* A lead longer than the reach wastes every wake that the request
	 * does not beat: PA_WAKE_MISS_LIMIT such wakes hold the rest off. */
	pa_wake_pred_reset(&P);
	last = feed(10 * MS, 2 * MS, 9);
	for (unsigned i = 0; i < PA_WAKE_MISS_LIMIT; i++) {
		CHECK_EQ_U(pa_wake_pred_target(&P, 300 * US), last + 2 * MS - 300 * US);
		pa_wake_pred_woken(&P, last + 2 * MS - 300 * US);
		pa_wake_pred_start(&P, last + 2 * MS, 0, 0);
		last += 2 * MS;
	}
	CHECK_EQ_U(P.wasted, PA_WAKE_MISS_LIMIT);
	CHECK_EQ_U(pa_wake_pred_target(&P, 300 * US), 0);

	/* One wasted fewer than the limit in every window does not hold: the
	 * oldest leave the window as new ones come. */
	pa_wake_pred_reset(&P);
	last = feed(10 * MS, 2 * MS, 9);
	for (unsigned i = 0; i < 4 * PA_WAKE_WINDOW; i++) {
		rm_u64 next = last + 2 * MS;

		pa_wake_pred_woken(&P, next - LEAD);
		if (i % (PA_WAKE_WINDOW / (PA_WAKE_MISS_LIMIT - 1) + 1) == 0)
			next += PA_WAKE_REACH_NS; /* past its reach: wasted */
		pa_wake_pred_start(&P, next, 0, 0);
		last = next;
	}
	CHECK(P.wasted >= 4 * (PA_WAKE_MISS_LIMIT - 1) - 1);
	CHECK_EQ_U(P.hold, 0);
	CHECK(pa_wake_pred_target(&P, LEAD) != 0);

	/* keep_waking (GPUQOS_WAKE_STOPS=0): every wasted wake is counted,
	 * none stops the next. */
	pa_wake_pred_reset(&P);
	P.keep_waking = 1;
	last = feed(10 * MS, 2 * MS, 9);
	last = wasted_wakes(last, 4 * PA_WAKE_MISS_LIMIT);
	CHECK_EQ_U(P.wasted, 4 * PA_WAKE_MISS_LIMIT);
	CHECK_EQ_U(P.hold, 0);
	CHECK(pa_wake_pred_target(&P, LEAD) == last + 2 * MS - LEAD);
}

/* While wakes are held, each start is judged against the wake that would
 * have been issued for it (pa_wake_pred_target keeps it): PA_WAKE_RESUME
 * calm ones in a row end the hold early; a late one starts the count
 * again. Shadow judgements are no wakes: no hit or wasted is counted. */
static void test_shadow(void)
{
	rm_u64 last;

	_Static_assert(PA_WAKE_RESUME + 12 < PA_WAKE_HOLD, "a hold that calm can end early");
	pa_wake_pred_reset(&P);
	last = feed(10 * MS, 2 * MS, 9);
	last = wasted_wakes(last, PA_WAKE_MISS_LIMIT);
	CHECK_EQ_U(P.hold, PA_WAKE_HOLD);
	CHECK_EQ_U(P.stops, 1);
	/* Ten calm starts, then one past the reach of its shadow wake. */
	for (unsigned i = 0; i < 10; i++) {
		CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), 0);
		CHECK_EQ_U(P.shadow_at, last + 2 * MS - LEAD);
		last = plain_starts(last, 1);
	}
	CHECK_EQ_U(P.streak, 10);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), 0);
	pa_wake_pred_start(&P, last + 2 * MS + PA_WAKE_REACH_NS, 0, 0);
	last += 4 * MS;
	CHECK_EQ_U(P.streak, 0);
	/* Back on the grid (early for its shadow: calm), then calm ones:
	 * the hold ends at the PA_WAKE_RESUME-th in a row, before its
	 * length. */
	for (unsigned i = 0; i < PA_WAKE_RESUME; i++) {
		CHECK(P.hold != 0);
		CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), 0);
		pa_wake_pred_start(&P, last, 0, 0);
		last += 2 * MS;
	}
	last -= 2 * MS;
	CHECK_EQ_U(P.hold, 0);
	CHECK_EQ_U(P.resumes, 1);
	CHECK_EQ_U(P.stops, 1);
	CHECK_EQ_U(P.wasted, PA_WAKE_MISS_LIMIT);
	CHECK_EQ_U(P.hits, 0);
	CHECK_EQ_U(P.wakes, PA_WAKE_MISS_LIMIT);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), last + 2 * MS - LEAD);

	/* Starts that nobody aimed a shadow at (the wake thread did not ask
	 * for a target) are not judged: the hold runs its length. */
	last = wasted_wakes(last, PA_WAKE_MISS_LIMIT);
	CHECK_EQ_U(P.hold, PA_WAKE_HOLD << 1);
	last = plain_starts(last, (PA_WAKE_HOLD << 1) - 1);
	CHECK_EQ_U(P.resumes, 1);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), 0);
	last = plain_starts(last, 1);
	CHECK(pa_wake_pred_target(&P, LEAD) != 0);
}

/* A request whose first GPU operation (an event record) came around its
 * wake but whose kernels came more than PA_WAKE_SPLIT_NS after it: the
 * wake is wasted, even though the kernels came within the reach. */
static void test_split(void)
{
	rm_u64 last, due, w;

	pa_wake_pred_reset(&P);
	last = feed(10 * MS, 2 * MS, 9);
	due = last + 2 * MS;
	w = due - LEAD;
	/* The event 10 us after the wake, the kernels 60 us later: a hit. */
	pa_wake_pred_woken(&P, w);
	pa_wake_pred_start(&P, w + 70 * US, w + 10 * US, 0);
	CHECK_EQ_U(P.hits, 1);
	CHECK_EQ_U(P.wasted, 0);
	/* The event on time, the kernels 140 us after it (130 after the
	 * wake: within the reach): wasted, split. */
	last = P.last;
	due = last + 2 * MS;
	w = due - LEAD;
	pa_wake_pred_woken(&P, w);
	pa_wake_pred_start(&P, w + 140 * US, w, 0);
	CHECK_EQ_U(P.wasted, 1);
	CHECK_EQ_U(P.split, 1);
	CHECK_EQ_U(P.hits, 1);
	/* At PA_WAKE_SPLIT_NS exactly: a hit. */
	last = P.last;
	w = last + 2 * MS - LEAD;
	pa_wake_pred_woken(&P, w);
	pa_wake_pred_start(&P, w + 20 * US + PA_WAKE_SPLIT_NS, w + 20 * US, 0);
	CHECK_EQ_U(P.hits, 2);
	CHECK_EQ_U(P.split, 1);
	/* The event a reach before the wake or earlier: its own switch was
	 * over before the wake's began; judged by the kernels alone. */
	last = P.last;
	w = last + 2 * MS - LEAD;
	pa_wake_pred_woken(&P, w);
	pa_wake_pred_start(&P, w + 50 * US, w - PA_WAKE_REACH_NS - 1, 0);
	CHECK_EQ_U(P.hits, 3);
	CHECK_EQ_U(P.split, 1);
	/* Just within a reach before the wake: the switches merge. */
	last = P.last;
	w = last + 2 * MS - LEAD;
	pa_wake_pred_woken(&P, w);
	pa_wake_pred_start(&P, w + 50 * US, w - PA_WAKE_REACH_NS + 10 * US, 0);
	CHECK_EQ_U(P.split, 2);
	/* The event past the reach: wasted by the reach, not split. */
	last = P.last;
	w = last + 2 * MS - LEAD;
	pa_wake_pred_woken(&P, w);
	pa_wake_pred_start(&P, w + PA_WAKE_REACH_NS + 200 * US, w + PA_WAKE_REACH_NS + 1, 0);
	CHECK_EQ_U(P.wasted, 3);
	CHECK_EQ_U(P.split, 2);
	/* A request the wake was not issued for: not judged at all. */
	last = P.last;
	pa_wake_pred_woken(&P, 0);
	pa_wake_pred_start(&P, last + 2 * MS, last + 2 * MS - 500 * US, 0);
	CHECK_EQ_U(P.wasted, 3);
	/* Split wakes stop the wakes like any wasted ones. */
	pa_wake_pred_reset(&P);
	last = feed(10 * MS, 2 * MS, 9);
	for (unsigned i = 0; i < PA_WAKE_MISS_LIMIT; i++) {
		CHECK_EQ_U(P.hold, 0);
		w = last + 2 * MS - LEAD;
		pa_wake_pred_woken(&P, w);
		pa_wake_pred_start(&P, w + 120 * US, w - 10 * US, 0);
		last = P.last;
	}
	CHECK_EQ_U(P.split, PA_WAKE_MISS_LIMIT);
	CHECK(P.hold != 0);
	CHECK_EQ_U(pa_wake_pred_target(&P, LEAD), 0);
}

/* A request's span: its end (the first wait that returned done after its
 * launches) past the grid point it was due on, held and reported at the
 * 99th percentile. */
static void test_span(void)
{
	const rm_u64 per = 5 * MS;
	rm_u64 t = 1000 * MS, n0;

	pa_wake_pred_reset(&P);
	/* No agreed period yet: nothing is due, no span is taken. */
	for (unsigned i = 0; i < PA_WAKE_HIST; i++, t += per)
		pa_wake_pred_start(&P, t, 0, i ? t - per + 600 * US : 0);
	CHECK_EQ_U(P.spans, 0);
	pa_wake_pred_start(&P, t, 0, t - per + 600 * US);
	CHECK_EQ_U(P.period, per);
	CHECK_EQ_U(P.due, t);
	CHECK_EQ_U(P.spans, 0);
	/* Each request over 600 us after its start (on time): span 600. */
	for (unsigned i = 1; i < PA_SPAN_MIN; i++) {
		t += per;
		pa_wake_pred_start(&P, t, 0, t - per + 600 * US);
		CHECK_EQ_U(pa_wake_pred_span(&P), 0); /* fewer than PA_SPAN_MIN */
	}
	t += per;
	pa_wake_pred_start(&P, t, 0, t - per + 600 * US);
	CHECK_EQ_U(P.spans, PA_SPAN_MIN);
	CHECK_EQ_U(pa_wake_pred_span(&P), 600);
	/* A request 300 us late is due on the grid all the same, and its end
	 * counts from there: 900. The one after, on time, is due at its
	 * start. */
	t += per;
	pa_wake_pred_start(&P, t + 300 * US, 0, t - per + 600 * US);
	CHECK_EQ_U(P.due, t);
	t += per;
	pa_wake_pred_start(&P, t, 0, t - per + 900 * US);
	CHECK_EQ_U(P.due, t);
	CHECK_EQ_U(P.span_us[(P.span_head + PA_SPAN_HIST - 1) % PA_SPAN_HIST], 900);
	/* No end, an end before the due time, or one a period or more after
	 * it: no span. */
	n0 = P.spans;
	t += per;
	pa_wake_pred_start(&P, t, 0, 0);
	t += per;
	pa_wake_pred_start(&P, t, 0, t - per - 1 * US);
	t += per;
	pa_wake_pred_start(&P, t, 0, t);
	CHECK_EQ_U(P.spans, n0);
	/* The 99th percentile of the latest 128: one slow request of 128 does
	 * not set it, two do. */
	_Static_assert(PA_SPAN_HIST == 128 && PA_SPAN_PERCENTILE == 99, "the percentile");
	for (unsigned i = 0; i < PA_SPAN_HIST; i++) {
		t += per;
		pa_wake_pred_start(&P, t, 0, t - per + (i == PA_SPAN_HIST - 1 ? 2000 : 600) * US);
	}
	CHECK_EQ_U(pa_wake_pred_span(&P), 600);
	t += per;
	pa_wake_pred_start(&P, t, 0, t - per + 2000 * US);
	CHECK_EQ_U(pa_wake_pred_span(&P), 2000);
	/* A context gone: the timing is forgotten, the spans stay; the next
	 * request is due on nothing until the starts agree again. */
	pa_wake_pred_forget(&P);
	CHECK_EQ_U(P.due, 0);
	CHECK_EQ_U(pa_wake_pred_span(&P), 2000);
	n0 = P.spans;
	t += per;
	pa_wake_pred_start(&P, t, 0, 0);
	t += per;
	pa_wake_pred_start(&P, t, 0, t - per + 600 * US);
	CHECK_EQ_U(P.spans, n0);
}

int main(void)
{
	test_agreement();
	test_judging();
	test_shadow();
	test_split();
	test_span();
	CHECK_DONE();
}

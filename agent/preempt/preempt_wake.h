/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_wake.h - waking a periodic LC's context one switch ahead of its
 * next request (preempt_wake.c; docs/policy.md, "Waking a periodic LC").
 *
 * The predictor is pure (no clock, no I/O) so that it is unit-tested on
 * its own; the rest is the thread that issues the wakes.
 */
#ifndef GPUQOS_PREEMPT_WAKE_H
#define GPUQOS_PREEMPT_WAKE_H

#include "abi/rm_abi.h"

/* Intervals between request starts held, how many of them must agree
 * before anything is predicted, and how closely: within
 * PA_WAKE_JITTER_NS of their median. */
#define PA_WAKE_HIST 8u
#define PA_WAKE_AGREE 6u
#define PA_WAKE_JITTER_NS 50000ull
/* Periods outside these bounds are not predicted: below, the LC is close
 * to launch-bound (the GPU switches to it all the time anyway); above,
 * one wasted wake is cheap but a prediction means little. */
#define PA_WAKE_MIN_PERIOD_NS 1000000ull
#define PA_WAKE_MAX_PERIOD_NS 1000000000ull
/* A request that starts later than this after its wake misses the switch
 * the wake started: the context comes in, finds only the wake, and the
 * request waits for it to leave and come back (measured on an H100 beside
 * a busy BE: about 400 us instead of about 245 without a wake, for requests
 * 140-160 us or more after the wake, with a 100 us lead, with or without a
 * 60 us hold; docs/perf-log). Such a wake cost the BE two switches and the
 * LC more than it gained. The reach does not grow with the lead: with a
 * lead of 150 or 175 us, requests on time were as slow at the p99 (docs/
 * docs/perf-log, "Keeping the woken context in"), so a lead over the reach has
 * its wakes judged wasted and stopped. */
#define PA_WAKE_REACH_NS 150000ull
/* With a hold, the thread launches the empty kernel again this often from
 * the wake until the request's first launch, so that the context has work
 * queued whenever the scheduler looks (docs/perf-log, "Keeping the woken
 * context in"). */
#define PA_WAKE_TRAIN_NS 20000ull
/* gpuqos_request_hint: a request's GPU work said to start later than this
 * is taken to start then. */
#define PA_WAKE_HINT_MAX_US 1000000u
/* A request whose first GPU operation (a CUDA event recorded on its
 * stream) reached the GPU around its wake, but whose kernels were launched
 * more than this after that operation, had its context come in, run the
 * operation and leave before the kernels: they pay a second switch. Such a
 * wake is judged wasted too. Measured on an H100 with a CUDA-graph
 * ResNet-50 recording an event before each graph: the graph's GPU time
 * rose by 300-350 us when its launch came 200 us or more after the
 * event, with the wake, and not without it (docs/perf-log, "A CUDA-graph
 * model and the wake"). */
#define PA_WAKE_SPLIT_NS 100000ull
/* Out of the last PA_WAKE_WINDOW judged wakes, PA_WAKE_MISS_LIMIT wasted
 * ones stop wakes for PA_WAKE_HOLD << backoff requests; each stop doubles
 * the next one's length, up to PA_WAKE_BACKOFF_MAX doublings, and
 * PA_WAKE_CALM calm judgements in a row halve it again. Each wasted wake
 * is a request that waits longer than without a wake (about 400 us against
 * 245 on an H100), so wasted wakes must stay rare; but a request not woken
 * pays the whole switch, so a hold must last no longer than the host's
 * noise. While wakes are held, each start is still judged against the
 * wake that would have been issued for it (shadow): PA_WAKE_RESUME calm
 * ones in a row end the hold. Wasted wakes come in bursts (a late LC is
 * late for a few requests together): replayed over 20 recorded traces of
 * micro and CUDA-graph ResNet-50 LCs (tests/preempt/wake_replay.c), the
 * former rule (4 in 128, holds up to 4096 requests, nothing judged while
 * held) woke 56 % of the requests on average (3-94 %), 0.97 % wasted; this
 * one 72 % (3-94 %), 1.12 % wasted (docs/policy.md, "Waking a periodic
 * LC"). */
#define PA_WAKE_WINDOW 32u
#define PA_WAKE_MISS_LIMIT 2u
#define PA_WAKE_HOLD 64u
#define PA_WAKE_BACKOFF_MAX 2u
#define PA_WAKE_CALM 128u
#define PA_WAKE_RESUME 32u
/* The lead a policy may ask for. Measured: 100 us ahead of a 200 us
 * switch hid half of it; 300 us ahead was lose-lose (docs/perf-log). */
#define PA_WAKE_LEAD_MAX_US 1000u

/* A request's span: from the grid point it was due on (the median of the
 * last PA_SPAN_STARTS starts, each taken to the grid point nearest the
 * request's own start, so one late start does not move it) to the first
 * wait for GPU work that returned done after the request's launches. The
 * latest PA_SPAN_HIST are held; the 99th percentile of them is reported
 * once PA_SPAN_MIN are (windows sized by it: docs/policy.md, "Windows";
 * a window that covers 95 % of the requests leaves the slowest few
 * percent, the LC's p99, to find the BE back). */
#define PA_SPAN_STARTS 3u
#define PA_SPAN_HIST 128u
#define PA_SPAN_MIN 32u
#define PA_SPAN_PERCENTILE 99u

struct pa_wake_pred {
	rm_u64 last;                /* latest request start; 0: none yet */
	rm_u64 iv[PA_WAKE_HIST];    /* latest intervals, a ring */
	unsigned n, head;           /* intervals held, next slot */
	rm_u64 period;              /* the agreed period; 0: none */
	rm_u64 seq;                 /* request starts seen */
	rm_u64 woken_for;           /* seq + 1 of the start the latest wake was for; 0 */
	rm_u64 woken_at;            /* when that wake was issued */
	unsigned char judged[PA_WAKE_WINDOW]; /* the latest judged wakes, a ring: 1 wasted */
	unsigned njudged, jhead, nwasted;     /* held, next slot, wasted among them */
	unsigned hold;              /* starts left before wakes resume */
	unsigned backoff;           /* doublings of the next hold */
	unsigned calm;              /* calm judgements since the latest wasted one or backoff step */
	unsigned streak;            /* calm judgements since the latest wasted one */
	rm_u64 shadow_for;          /* seq + 1 of the start a held wake was aimed at; 0 */
	rm_u64 shadow_at;           /* when that wake would have been issued */
	rm_u64 wakes, hits, wasted, early, skipped;
	rm_u64 split;               /* of wasted: kernels PA_WAKE_SPLIT_NS after the first op */
	rm_u64 stops;               /* holds the judging started */
	rm_u64 resumes;             /* holds ended early by calm shadow judgements */
	int keep_waking;            /* judged, never stopped (GPUQOS_WAKE_STOPS=0) */
	rm_u64 starts[PA_SPAN_STARTS]; /* the latest starts, newest first */
	unsigned nstarts;
	rm_u64 due, due_period;     /* the latest request's grid point and period; 0: none */
	rm_u32 span_us[PA_SPAN_HIST]; /* the latest spans, a ring */
	unsigned nspan, span_head;
	rm_u64 spans;               /* spans measured */
};

/* Everything forgotten, keep_waking too. */
void pa_wake_pred_reset(struct pa_wake_pred *p);
/* The requests so far were in a context that is gone or no longer used:
 * forget their timing (the counts stay). */
void pa_wake_pred_forget(struct pa_wake_pred *p);
/* A request's first launch came at t (monotonic ns); the latest wake is
 * judged by it. first_op: when an earlier GPU operation of the same
 * request was submitted (an event record after the previous request's
 * launches had ended), or 0: none. done: when a wait for GPU work first
 * returned done after the previous request's last launch (its end), or 0:
 * none did. */
void pa_wake_pred_start(struct pa_wake_pred *p, rm_u64 t, rm_u64 first_op, rm_u64 done);
/* The PA_SPAN_PERCENTILE percentile of the held spans (us), or 0 while
 * fewer than PA_SPAN_MIN are held. */
rm_u32 pa_wake_pred_span(const struct pa_wake_pred *p);
/* The same in two steps, so that a caller holding a lock the launch
 * wrappers take only copies under it (the sort of 128 spans stays out):
 * the held spans into out, how many; then their percentile (sorts s). */
unsigned pa_wake_pred_spans(const struct pa_wake_pred *p, rm_u32 out[PA_SPAN_HIST]);
rm_u32 pa_span_percentile(rm_u32 *s, unsigned n);
/* When to wake for the next start (monotonic ns), or 0: nothing to do
 * (no agreed period, held off, or already woken for it). While held, the
 * wake it would have aimed at is kept for the next start's shadow
 * judging. */
rm_u64 pa_wake_pred_target(struct pa_wake_pred *p, rm_u64 lead_ns);
/* A wake was issued at t for the start pa_wake_pred_target aimed at
 * (t 0: none was, and none will be for that start). */
void pa_wake_pred_woken(struct pa_wake_pred *p, rm_u64 t);
/* A wake was issued, but its request started before the thread could
 * record it: counted as a wake the request beat, and not judged. */
void pa_wake_pred_overtaken(struct pa_wake_pred *p);

/* The counts the node agent is told (WAKE, abi/gq_proto.h). */
struct pa_wake_counts {
	rm_u64 requests, wakes, hits, wasted, beaten, not_issued, stops;
	int stopped; /* the judging holds wakes off now */
	rm_u64 at_ns;
	/* PHASE (abi/gq_proto.h): the agreed period and the latest request
	 * start, on this clock; period_ns 0 while none is agreed. span_us:
	 * pa_wake_pred_span. */
	rm_u64 period_ns, last_start_ns;
	rm_u32 span_us;
};

/* The library's side (preempt_wake.c). */
/* From the launch wrappers, at the first launch of a burst (a request);
 * first_op and done as for pa_wake_pred_start. */
void pa_wake_request(rm_u64 now, rm_u64 first_op, rm_u64 done);
/* Whether pa_wake_request wants to be called (a cheap atomic read). */
int pa_wake_wanted(void);
/* Before a context is destroyed, released or reset: forget it. */
void pa_wake_ctx_gone(void);
/* Wakes off for good in this process, saying why once. */
void pa_wake_disable(const char *why);
/* GPUQOS_WAKE_LEAD_US and GPUQOS_WAKE_HOLD_US; starts the thread. */
void pa_wake_init(void);
/* The node agent's POLICY (the caller checked the ranges): lead 0 stops
 * wakes, another lead starts them. Ignored where the environment set
 * GPUQOS_WAKE_LEAD_US, and after wakes were turned off for good. */
void pa_wake_policy(unsigned lead_us, unsigned hold_us);
void pa_wake_child_reset(void);
/* The counts so far: 1, or 0 while no wake was ever asked in this process
 * (nothing to tell). */
int pa_wake_counts(struct pa_wake_counts *c);

#endif /* GPUQOS_PREEMPT_WAKE_H */

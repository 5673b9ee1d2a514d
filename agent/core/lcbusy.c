/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lcbusy.c - how busy each process keeps the GPU with its launches, from
 * the ACTIVITY its preempt agent reports, and which LCs are launch-bound:
 * their launch-active share (docs/protocol.md, struct gq_activity) is at
 * least busyLcPercent.
 *
 * Why: an LC that launches without pause (an eager, CPU-bound model; a
 * queue that never drains) makes the GPU switch to it for nearly every
 * launch. Behind a BE at a short timeslice those switches cost the BE far
 * more than the LC gains: an eager ResNet-50 beside a training BE on an
 * H200 left the BE 11 % of what it did alone, against 81 % at driver
 * defaults, and the LC's p99 was worse too (docs/perf-log). Such an LC
 * leaves its BEs at baseline (policy.c).
 *
 * A launch keeps its process "active" for GQ_ACTIVITY_TAIL_US (about one
 * channel switch): a micro LC launching every 2 ms reads 10 %, a CUDA
 * graph every 5 ms 4 %, an LC launching more often than every 200 us
 * 100 %. Unlike CPU time, this does not grow while an LC waits behind BEs
 * (it launches no faster), so the verdict needs no hold: it follows the
 * reading, with LCBUSY_HYST_PERCENT of hysteresis, and a reading far over
 * the threshold is believed sooner (LCBUSY_ATTACK_*).
 *
 * Owns: checking reports, the smoothed reading and the verdict (struct
 * proc.busy). Does not own: what the verdict changes (policy.c).
 * Trust: a process can only misreport its own launches; an LC that claims
 * to be launch-bound gives up its own priority, one that hides it gets
 * what every LC got before this rule.
 */
#include "agent/core/core.h"
#include "common/log.h"

/* Weight of the newest interval: with reports every 250 ms, about a
 * second of history. */
#define LCBUSY_ALPHA 0.3
/* An interval shorter than this is folded into the next one. */
#define LCBUSY_MIN_INTERVAL_NS 100000000ull
/* No report for this long: the reading is unknown (no verdict). Four
 * seconds, not one: a process whose CPU is taken (a busy node) reports
 * late, yet launches whenever it runs. A launch-bound LC went silent for
 * over a second on a 2-CPU machine beside four busy loops, and forgetting
 * it put its BEs at beUs beside it for a while (the 11 % case above). A
 * process that is gone is forgotten at once (its connection ends). */
#define LCBUSY_STALE_US (16ull * GQ_ACTIVITY_PERIOD_MS * 1000ull)
/* More launches per second than any process makes (a call costs tens of
 * nanoseconds even into a libcuda that does nothing): a higher rate is
 * read as this one, so what the agent shows stays a plain integer. */
#define LCBUSY_MAX_RATE 1e9
/* A launch-bound LC stops being one below busyLcPercent minus this. */
#define LCBUSY_HYST_PERCENT 10.0
/* An interval at least this far over busyLcPercent, above the reading,
 * weighs LCBUSY_ATTACK_ALPHA: an LC that starts launching without pause
 * (an eager model reads 75-97 %) is judged one report after it starts
 * instead of two or three. Until the verdict it is an ordinary LC at lcUs
 * that always has work, and the BE whose turn it is gets next to nothing
 * (300-730 ms stalls on an H100, docs/perf-log). Readings nearer the
 * threshold (an LC catching up a backlog reads 30-50 %) move as slowly as
 * before, so a short burst does not flip the runlist. */
#define LCBUSY_ATTACK_OVER_PERCENT 25.0
#define LCBUSY_ATTACK_ALPHA 0.6

static void lcbusy_forget(struct agent *a, struct proc *p)
{
	a->dirty |= p->busy.always;
	p->busy.have_base = 0;
	p->busy.heard_us = 0;
	p->busy.percent = -1.0;
	p->busy.launches_per_s = -1.0;
	p->busy.always = 0;
}

static void lcbusy_judge(struct agent *a, struct proc *p)
{
	double threshold = a->cfg->policy.busy_lc_percent;
	int was = p->busy.always, now;

	if (p->cls != CLASS_LC || threshold <= 0 || p->busy.percent < 0)
		now = 0;
	else if (was)
		now = p->busy.percent >= threshold - LCBUSY_HYST_PERCENT;
	else
		now = p->busy.percent >= threshold;
	if (now == was)
		return;
	p->busy.always = now;
	a->dirty = 1;
	proc_log(a, p, LOG_LEVEL_INFO,
		 now ? "pid %d (%s): LC launch-bound (launches keep it active %.0f %% of the time, "
		       "%.0f/s): its BEs keep their baseline"
		     : "pid %d (%s): LC no longer launch-bound (active %.0f %%, %.0f launches/s)",
		 (int)p->pid, p->comm, p->busy.percent, p->busy.launches_per_s);
}

void lcbusy_report(struct agent *a, struct proc *p, const struct gq_activity *m)
{
	/* A launch racing the preempt agent's read can make active_ns lag by
	 * up to one tail (docs/protocol.md, "Activity"): within that, a step
	 * back reads as no activity and a step past the elapsed time as all. */
	const uint64_t tail = (uint64_t)GQ_ACTIVITY_TAIL_US * 1000u;
	uint64_t dt, dl, da, active;
	double share;

	if (m->flags != 0 || m->reserved != 0) {
		a->n.bad_activity++;
		proc_log(a, p, LOG_LEVEL_WARN, "pid %d: ACTIVITY with reserved bits set: ignored",
			 (int)p->pid);
		return;
	}
	if (!p->busy.have_base) {
		p->busy.have_base = 1;
		p->busy.base_launches = m->launches;
		p->busy.base_active_ns = m->active_ns;
		p->busy.base_at_ns = m->at_ns;
		p->busy.heard_us = core_now_us();
		return;
	}
	if (m->at_ns < p->busy.base_at_ns || m->launches < p->busy.base_launches ||
	    m->active_ns + tail < p->busy.base_active_ns ||
	    (m->active_ns > p->busy.base_active_ns &&
	     m->active_ns - p->busy.base_active_ns > m->at_ns - p->busy.base_at_ns + tail)) {
		/* Counters that go back or more active time than time passed:
		 * not counters of one process. Start again from this one. */
		a->n.bad_activity++;
		proc_log(a, p, LOG_LEVEL_WARN,
			 "pid %d: ACTIVITY inconsistent with the one before (launches %llu -> %llu, "
			 "active %llu -> %llu ns over %lld ns): reading restarted",
			 (int)p->pid, (unsigned long long)p->busy.base_launches,
			 (unsigned long long)m->launches, (unsigned long long)p->busy.base_active_ns,
			 (unsigned long long)m->active_ns,
			 (long long)(m->at_ns - p->busy.base_at_ns));
		lcbusy_forget(a, p);
		return;
	}
	p->busy.heard_us = core_now_us();
	dt = m->at_ns - p->busy.base_at_ns;
	if (dt < LCBUSY_MIN_INTERVAL_NS)
		return;
	dl = m->launches - p->busy.base_launches;
	active = m->active_ns > p->busy.base_active_ns ? m->active_ns : p->busy.base_active_ns;
	da = active - p->busy.base_active_ns;
	if (da > dt)
		da = dt;
	share = 100.0 * (double)da / (double)dt;
	if (p->busy.percent < 0) {
		p->busy.percent = share;
	} else {
		double threshold = a->cfg->policy.busy_lc_percent, w = LCBUSY_ALPHA;

		if (threshold > 0 && share >= threshold + LCBUSY_ATTACK_OVER_PERCENT &&
		    share > p->busy.percent)
			w = LCBUSY_ATTACK_ALPHA;
		p->busy.percent = w * share + (1 - w) * p->busy.percent;
	}
	share = (double)dl * 1e9 / (double)dt;
	if (share > LCBUSY_MAX_RATE)
		share = LCBUSY_MAX_RATE;
	p->busy.launches_per_s = p->busy.launches_per_s < 0
					 ? share
					 : LCBUSY_ALPHA * share +
						   (1 - LCBUSY_ALPHA) * p->busy.launches_per_s;
	p->busy.base_launches = m->launches;
	p->busy.base_active_ns = active;
	p->busy.base_at_ns = m->at_ns;
	lcbusy_judge(a, p);
}

void lcbusy_tick(struct agent *a)
{
	uint64_t now = core_now_us();

	for (struct proc *p = a->procs; p; p = p->next) {
		if (p->busy.heard_us && now - p->busy.heard_us > LCBUSY_STALE_US) {
			if (p->busy.always)
				proc_log(a, p, LOG_LEVEL_INFO,
					 "pid %d (%s): no launch report for %llu ms: not launch-bound",
					 (int)p->pid, p->comm,
					 (unsigned long long)(LCBUSY_STALE_US / 1000u));
			lcbusy_forget(a, p);
		} else {
			lcbusy_judge(a, p); /* its class or the threshold may have changed */
		}
	}
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy.c - the pure decision: classes and observed TSGs in, desired
 * timeslice and interleave level per TSG out.
 *
 * Owns: grouping TSGs per (GPU, runlist), the rules of docs/policy.md, the
 * defaults and their limits, class names. Does not own: where a class comes
 * from (config.c, the Kubernetes side), applying a setting, retries, or any
 * state between calls. No I/O, no globals; only policy_decide allocates
 * (its runlist table).
 */
#include "agent/core/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/rm_abi.h"

_Static_assert(POLICY_INTERLEAVE_DRIVER_DEFAULT == RM_INTERLEAVE_MEDIUM,
	       "RM starts every TSG at MEDIUM");

void policy_config_defaults(struct policy_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	/* LC 100 ms was enough in every single-BE row of docs/rm-facts.md: the LC
	 * never uses it up, it only must not be the one switched out. */
	cfg->lc_timeslice_us = 100000;
	/* Sole BE at 50 us: micro LC p99 248 us (2446 at driver defaults),
	 * 20 us bought only 16 us more and is the value that stalled the
	 * control path in the several-BE run. */
	cfg->be_timeslice_us = 50;
	/* Several BEs: short slices made them switch among themselves. */
	cfg->several_be_timeslice_us = 1000;
	/* Three BEs beside a micro LC (H200): floor 1000 us p99 3817 us, one
	 * schedulable at a time rotated every 100 ms 296-300 us, with the
	 * BEs keeping 79 % either way (docs/perf-log). */
	cfg->several_be = POLICY_SEVERAL_BE_ROTATE;
	cfg->rotate_period_ms = 250;
	cfg->rotate_in_gap = 1;
	/* How long a BE stalls at most if the node agent hangs. */
	cfg->gate_lease_ms = 500;
	/* An eager (launch-bound) ResNet-50 beside a training BE on an H200
	 * left the BE 11 % at 50 us against 81 % at driver defaults, the LC's
	 * p99 no better (docs/perf-log). A launch keeps an LC active for
	 * 200 us: a micro LC every 2 ms reads 10 %, one launching without
	 * pause 100 %. */
	cfg->busy_lc_percent = 50;
	/* A micro LC beside a busy BE on an H100: p99 296 -> 193-201 us with
	 * one BE, 300-325 -> 273-293 with three, 310 -> 216-220 beside a
	 * training step, the BE unchanged; a lead longer than the ~190 us
	 * switch is lose-lose (docs/perf-log). */
	cfg->wake_lead_us = 100;
	cfg->wake_hold_us = 0;
	/* Off: a window costs the BE its length in every LC period, and
	 * must outlast the LC's request, which only the operator knows
	 * (ViT-B/16 every 10 ms: 1.18-1.25x -> 1.00-1.06x its p99 alone, the
	 * BE 7-14 % less, docs/perf-log). The lead covers a disable and a
	 * preempt at their p99 (about 1.2 ms). */
	cfg->window_before_us = 1200;
	cfg->window_after_us = 0;
	cfg->window_after_auto = 0;
	cfg->window_max_off_percent = 50;
	/* A pod that asks for windows takes them from every BE beside it,
	 * which the operator did not choose: at most 30 % of each period (a
	 * 1.2 ms lead and 300 us after every 5 ms), where a measured "auto"
	 * window took 20-45 %. */
	cfg->window_pod_max_off_percent = 30;
	/* No measurable effect, and non-root needs CAP_SYS_NICE to set it. */
	cfg->lc_interleave = POLICY_INTERLEAVE_LEAVE;
	cfg->be_interleave = POLICY_INTERLEAVE_LEAVE;
	cfg->manage_copy = 0;
}

static int timeslice_ok(uint32_t us)
{
	return us >= POLICY_TIMESLICE_MIN_US && us <= POLICY_TIMESLICE_MAX_US;
}

static int interleave_ok(int32_t level)
{
	return level == POLICY_INTERLEAVE_LEAVE ||
	       (level >= (int32_t)RM_INTERLEAVE_LOW && level <= (int32_t)RM_INTERLEAVE_HIGH);
}

static int bad(char *err, size_t errlen, const char *field, const char *what)
{
	if (err && errlen)
		snprintf(err, errlen, "policy setting %s %s", field, what);
	return -1;
}

int policy_config_validate(const struct policy_config *cfg, int allow_unsafe_several_be,
			   char *err, size_t errlen)
{
	static const char range[] = "must be from 1 to 10000000 us";

	if (!timeslice_ok(cfg->lc_timeslice_us))
		return bad(err, errlen, "lc_timeslice_us", range);
	if (!timeslice_ok(cfg->be_timeslice_us))
		return bad(err, errlen, "be_timeslice_us", range);
	if (!timeslice_ok(cfg->several_be_timeslice_us))
		return bad(err, errlen, "several_be_timeslice_us", range);
	if (cfg->several_be_timeslice_us < POLICY_SEVERAL_BE_SAFE_MIN_US && !allow_unsafe_several_be)
		return bad(err, errlen, "several_be_timeslice_us",
			   "is below the safe floor of 500 us and unsafe values are not allowed");
	if (cfg->several_be != POLICY_SEVERAL_BE_FLOOR && cfg->several_be != POLICY_SEVERAL_BE_LEAVE &&
	    cfg->several_be != POLICY_SEVERAL_BE_ROTATE)
		return bad(err, errlen, "several_be", "must be FLOOR, LEAVE or ROTATE");
	if (cfg->rotate_period_ms < POLICY_ROTATE_PERIOD_MIN_MS ||
	    cfg->rotate_period_ms > POLICY_ROTATE_PERIOD_MAX_MS)
		return bad(err, errlen, "rotate_period_ms", "must be from 20 to 10000 ms");
	if (cfg->gate_lease_ms < POLICY_GATE_LEASE_MIN_MS ||
	    cfg->gate_lease_ms > POLICY_GATE_LEASE_MAX_MS)
		return bad(err, errlen, "gate_lease_ms", "must be from 100 to 10000 ms");
	if (cfg->busy_lc_percent > POLICY_BUSY_LC_PERCENT_MAX)
		return bad(err, errlen, "busy_lc_percent", "must be from 0 to 100");
	if (cfg->wake_lead_us > POLICY_WAKE_MAX_US)
		return bad(err, errlen, "wake_lead_us", "must be from 0 to 1000 us");
	if (cfg->wake_hold_us > POLICY_WAKE_MAX_US)
		return bad(err, errlen, "wake_hold_us", "must be from 0 to 1000 us");
	if (cfg->wake_hold_us && !cfg->wake_lead_us)
		return bad(err, errlen, "wake_hold_us", "needs a wake_lead_us (a hold without a wake)");
	if (cfg->window_before_us > POLICY_WINDOW_BEFORE_MAX_US)
		return bad(err, errlen, "window_before_us", "must be from 0 to 10000 us");
	if (cfg->window_after_us > POLICY_WINDOW_AFTER_MAX_US)
		return bad(err, errlen, "window_after_us", "must be from 0 to 100000 us");
	if (cfg->window_after_auto && cfg->window_after_us)
		return bad(err, errlen, "window_after_us", "must be 0 where it is \"auto\"");
	if (cfg->window_max_off_percent < 1 ||
	    cfg->window_max_off_percent > POLICY_WINDOW_OFF_PERCENT_MAX)
		return bad(err, errlen, "window_max_off_percent", "must be from 1 to 90");
	if (cfg->window_pod_max_off_percent > POLICY_WINDOW_OFF_PERCENT_MAX)
		return bad(err, errlen, "window_pod_max_off_percent", "must be from 0 to 90");
	if (cfg->gate_lease_ms < 2u * cfg->rotate_period_ms)
		return bad(err, errlen, "gate_lease_ms",
			   "must be at least twice rotate_period_ms (a lease outlasts a renewal)");
	if (!interleave_ok(cfg->lc_interleave))
		return bad(err, errlen, "lc_interleave", "must be LOW, MEDIUM, HIGH or LEAVE");
	if (!interleave_ok(cfg->be_interleave))
		return bad(err, errlen, "be_interleave", "must be LOW, MEDIUM, HIGH or LEAVE");
	return 0;
}

static int runlist_managed(const struct policy_config *cfg, uint32_t engine_type)
{
	return rm_engine_is_gr(engine_type) || (cfg->manage_copy && rm_engine_is_copy(engine_type));
}

static uint32_t baseline_of(const struct policy_tsg_in *t)
{
	if (t->baseline_timeslice_us)
		return t->baseline_timeslice_us;
	return rm_engine_is_gr(t->engine_type) ? RM_DEFAULT_TIMESLICE_GR_US
					       : RM_DEFAULT_TIMESLICE_COPY_US;
}

/* Where a level is configured it may have been applied while the TSG had a
 * neighbour of the other class; since levels cannot be read back, going
 * back to baseline means asking for the driver's default explicitly. */
static int32_t restore_level(int32_t configured)
{
	return configured == POLICY_INTERLEAVE_LEAVE ? POLICY_INTERLEAVE_LEAVE
						     : POLICY_INTERLEAVE_DRIVER_DEFAULT;
}

static int runlist_cmp(const void *x, const void *y)
{
	const struct policy_runlist *a = x, *b = y;

	if (a->gpu != b->gpu)
		return a->gpu < b->gpu ? -1 : 1;
	if (a->engine_type != b->engine_type)
		return a->engine_type < b->engine_type ? -1 : 1;
	return 0;
}

/* UNMANAGED TSGs are invisible here: they never make a runlist "shared". */
size_t policy_runlists(const struct policy_tsg_in *in, size_t n, struct policy_runlist *rl)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++)
		rl[i] = (struct policy_runlist){ .gpu = in[i].gpu, .engine_type = in[i].engine_type,
						 .lc = in[i].cls == CLASS_LC,
						 .be = in[i].cls == CLASS_BE,
						 .be_gateable = in[i].cls == CLASS_BE && in[i].gateable,
						 .be_procs = in[i].cls == CLASS_BE && !in[i].proc_repeat,
						 .lc_busy = in[i].cls == CLASS_LC && in[i].lc_busy };
	if (n > 1)
		qsort(rl, n, sizeof(*rl), runlist_cmp);
	for (size_t i = 0; i < n; i++) {
		if (m && runlist_cmp(&rl[m - 1], &rl[i]) == 0) {
			rl[m - 1].lc += rl[i].lc;
			rl[m - 1].be += rl[i].be;
			rl[m - 1].be_gateable += rl[i].be_gateable;
			rl[m - 1].be_procs += rl[i].be_procs;
			rl[m - 1].lc_busy += rl[i].lc_busy;
		} else {
			rl[m++] = rl[i];
		}
	}
	return m;
}

const struct policy_runlist *policy_runlist_find(const struct policy_runlist *rl, size_t m,
						 uint32_t gpu, uint32_t engine_type)
{
	struct policy_runlist key = { .gpu = gpu, .engine_type = engine_type };

	if (m == 0)
		return NULL;
	return bsearch(&key, rl, m, sizeof(*rl), runlist_cmp);
}

static void set(struct policy_tsg_out *o, uint32_t us, int32_t level, const char *reason)
{
	o->timeslice_us = us;
	o->interleave = level;
	o->reason = reason;
	o->rotate = 0;
	o->wake = 0;
}

/* A runlist with a launch-bound LC (lcbusy.c) is left as the driver set
 * it, LCs and BEs alike, rotated or not, floored or not. Every launch of
 * such an LC makes the GPU switch to it: behind a short BE slice those
 * switches cost the BE more than the LC gains, and a long LC slice lets an
 * LC that always has work keep the GPU (an eager ResNet-50 at 100 ms beside
 * a training BE at its 2048 us left the BE 74 % against 83 % at driver
 * defaults, H200). At the driver's values the BE keeps its default share
 * by construction (docs/policy.md, "Launch-bound LCs"). */
#define BUSY_LC_REASON                                                                       \
	"a launch-bound LC on this runlist: baseline, as at driver defaults (shorter BE slices " \
	"would cost the BE more than the LC gains)"

static void decide_lc(const struct policy_config *cfg, const struct policy_tsg_in *t,
		      const struct policy_runlist *c, struct policy_tsg_out *o)
{
	if (c->be == 0)
		set(o, baseline_of(t), restore_level(cfg->lc_interleave),
		    "no BE on this runlist: baseline");
	else if (c->lc_busy)
		set(o, baseline_of(t), restore_level(cfg->lc_interleave), BUSY_LC_REASON);
	else {
		set(o, cfg->lc_timeslice_us, cfg->lc_interleave, "LC beside a BE");
		o->wake = cfg->wake_lead_us != 0;
	}
}

static int busy_lc_wins(const struct policy_tsg_in *t, const struct policy_runlist *c,
			struct policy_tsg_out *o, int32_t level)
{
	if (c->lc_busy == 0)
		return 0;
	set(o, baseline_of(t), level, BUSY_LC_REASON);
	return 1;
}

static void decide_be(const struct policy_config *cfg, const struct policy_tsg_in *t,
		      const struct policy_runlist *c, struct policy_tsg_out *o)
{
	int32_t restore = restore_level(cfg->be_interleave);

	if (c->lc == 0)
		set(o, baseline_of(t), restore, "no LC on this runlist: baseline");
	else if (busy_lc_wins(t, c, o, restore))
		return;
	else if (c->be <= 1)
		set(o, cfg->be_timeslice_us, cfg->be_interleave, "sole BE beside an LC");
	else if (cfg->several_be == POLICY_SEVERAL_BE_LEAVE)
		set(o, baseline_of(t), restore_level(cfg->be_interleave),
		    "several BEs beside an LC: left at baseline");
	else if (cfg->several_be == POLICY_SEVERAL_BE_ROTATE && c->be_gateable == c->be &&
		 c->be_procs > 1) {
		/* Turns are per process: a process with several TSGs here has
		 * them all schedulable in its turn, beside each other. */
		if (t->proc_tsgs > 1)
			set(o, cfg->several_be_timeslice_us, cfg->be_interleave,
			    "several BE processes beside an LC: one schedulable at a time, rotated; "
			    "its several TSGs at the safe floor");
		else
			set(o, cfg->be_timeslice_us, cfg->be_interleave,
			    "several BEs beside an LC: one schedulable at a time, rotated");
		o->rotate = 1;
	} else if (cfg->several_be == POLICY_SEVERAL_BE_ROTATE && c->be_gateable == c->be)
		set(o, cfg->several_be_timeslice_us, cfg->be_interleave,
		    "several BE TSGs of one process beside an LC: safe floor (turns are per process)");
	else if (cfg->several_be == POLICY_SEVERAL_BE_ROTATE)
		set(o, cfg->several_be_timeslice_us, cfg->be_interleave,
		    "several BEs beside an LC, not all can be gated: safe floor");
	else
		set(o, cfg->several_be_timeslice_us, cfg->be_interleave,
		    "several BEs beside an LC: safe floor");
}

void policy_decide_tsg(const struct policy_config *cfg, const struct policy_tsg_in *t,
		       const struct policy_runlist *rl, struct policy_tsg_out *out)
{
	static const struct policy_runlist empty;

	if (t->cls != CLASS_LC && t->cls != CLASS_BE) {
		set(out, baseline_of(t), POLICY_INTERLEAVE_LEAVE, "unmanaged TSG: baseline");
		return;
	}
	if (!runlist_managed(cfg, t->engine_type)) {
		set(out, baseline_of(t), POLICY_INTERLEAVE_LEAVE, "engine not managed: baseline");
		return;
	}
	if (!rl)
		rl = &empty;
	if (t->cls == CLASS_LC)
		decide_lc(cfg, t, rl, out);
	else
		decide_be(cfg, t, rl, out);
}

void policy_decide_with(const struct policy_config *cfg, const struct policy_tsg_in *in, size_t n,
			const struct policy_runlist *rl, size_t m, struct policy_tsg_out *out)
{
	for (size_t i = 0; i < n; i++)
		policy_decide_tsg(cfg, &in[i], policy_runlist_find(rl, m, in[i].gpu, in[i].engine_type),
				  &out[i]);
}

int policy_decide(const struct policy_config *cfg, const struct policy_tsg_in *in, size_t n,
		  struct policy_tsg_out *out)
{
	struct policy_runlist *rl;
	size_t m;

	if (n == 0)
		return 0;
	rl = malloc(n * sizeof(*rl));
	if (!rl)
		return -1;
	m = policy_runlists(in, n, rl);
	policy_decide_with(cfg, in, n, rl, m, out);
	free(rl);
	return 0;
}

const char *class_name(enum qos_class c)
{
	switch (c) {
	case CLASS_UNMANAGED:
		return "unmanaged";
	case CLASS_BE:
		return "best-effort";
	case CLASS_LC:
		return "latency-critical";
	}
	return "unknown";
}

int class_parse(const char *s, enum qos_class *out)
{
	static const struct {
		const char *name;
		enum qos_class cls;
	} names[] = {
		{ "unmanaged", CLASS_UNMANAGED },  { "best-effort", CLASS_BE },
		{ "be", CLASS_BE },                { "BE", CLASS_BE },
		{ "latency-critical", CLASS_LC }, { "lc", CLASS_LC },
		{ "LC", CLASS_LC },
	};

	if (!s)
		return -1;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(s, names[i].name) == 0) {
			*out = names[i].cls;
			return 0;
		}
	}
	return -1;
}

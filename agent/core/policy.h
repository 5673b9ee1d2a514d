/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy.h - what each TSG's scheduler settings should be.
 *
 * Owns: the pure decision (classes + observed TSGs -> desired settings),
 * grouped per GPU and per runlist (engine). Does not own: where classes come
 * from (standalone rules or Kubernetes), nor applying anything. No I/O.
 */
#ifndef GPUQOS_AGENT_POLICY_H
#define GPUQOS_AGENT_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "abi/gq_run.h"

enum qos_class {
	CLASS_UNMANAGED = 0,
	CLASS_BE = 1,
	CLASS_LC = 2,
};

/* How BE TSGs are treated when several of them share a runlist with an LC
 * TSG. Short BE timeslices there made BEs switch among themselves, starved
 * one of them and once stalled the RM control path (docs/rm-facts.md), so the
 * default never goes below a floor. */
enum policy_several_be {
	POLICY_SEVERAL_BE_FLOOR = 0, /* BE timeslice = several_be_timeslice_us */
	POLICY_SEVERAL_BE_LEAVE = 1, /* BEs keep their baseline */
	/* One BE schedulable at a time, the others gated (their channels
	 * disabled by their own preempt agent), rotated every
	 * rotate_period_ms; each at be_timeslice_us. Where a BE on the
	 * runlist cannot be gated, the runlist gets FLOOR. */
	POLICY_SEVERAL_BE_ROTATE = 2,
};

#define POLICY_INTERLEAVE_LEAVE (-1)

/* The level RM gives every new TSG (kchangrpapiConstruct sets MEDIUM). The
 * level cannot be read back (GET_INTERLEAVE_LEVEL is not exported), so when
 * a configured level stops applying, the TSG is put back to this one. */
#define POLICY_INTERLEAVE_DRIVER_DEFAULT 1

/* Limits a configuration must respect (policy_config_validate). RM accepts
 * 0..1,000,000 us and more, but 0 is never meant and 10 s is already far
 * beyond anything measured. */
#define POLICY_TIMESLICE_MIN_US 1u
#define POLICY_TIMESLICE_MAX_US 10000000u
/* Several BEs beside an LC at 200 us lost 54 % of BE throughput and at
 * 20 us stalled the RM control path (docs/rm-facts.md); 500 us is the shortest
 * value measured that did neither. */
#define POLICY_SEVERAL_BE_SAFE_MIN_US 500u
/* Rotation: a period shorter than 20 ms cost the LC p99 (556 us at 20 ms
 * against 461 at 100 ms, docs/perf-log), and each switch costs two channel
 * controls of 0.4-1.2 ms. The lease bounds how long a BE stays gated when
 * the node agent stops renewing it; it must outlast a renewal. */
#define POLICY_ROTATE_PERIOD_MIN_MS 20u
#define POLICY_ROTATE_PERIOD_MAX_MS 10000u
#define POLICY_GATE_LEASE_MIN_MS 100u
#define POLICY_GATE_LEASE_MAX_MS 10000u
#define POLICY_BUSY_LC_PERCENT_MAX 100u
/* The wake's lead and hold (docs/policy.md, "Waking a periodic LC"); the
 * preempt agent accepts no more (GQ_WAKE_MAX_US). */
#define POLICY_WAKE_MAX_US 1000u
/* How far after its wake a request may start and still be judged a hit
 * (the preempt agent's PA_WAKE_REACH_NS): a longer lead has its wakes
 * judged wasted and stopped, so the node agent warns of one. */
#define POLICY_WAKE_REACH_US 150u
/* Windows (docs/policy.md, "Windows"): the BE is taken off at most 10 ms
 * before an LC's request and kept off at most 100 ms past its start (the
 * preempt agent's GQ_WINDOW_*_MAX_US), and never more than 90 % of the
 * LC's period. */
#define POLICY_WINDOW_BEFORE_MAX_US 10000u
#define POLICY_WINDOW_AFTER_MAX_US 100000u
#define POLICY_WINDOW_OFF_PERCENT_MAX 90u

/* The windows an LC asks for itself (enum window_ask, struct window_req)
 * and their grammar: abi/gq_run.h, shared with `gpuqos run`. */
_Static_assert(POLICY_WINDOW_AFTER_MAX_US == GQ_WINDOW_AFTER_MAX_US,
	       "an LC may ask for the longest window the preempt agent runs");

struct policy_config {
	uint32_t lc_timeslice_us;         /* LC TSG beside a BE */
	uint32_t be_timeslice_us;         /* the only BE TSG beside an LC */
	uint32_t several_be_timeslice_us; /* each of several BEs beside an LC */
	enum policy_several_be several_be;
	int32_t lc_interleave; /* RM_INTERLEAVE_* or POLICY_INTERLEAVE_LEAVE */
	int32_t be_interleave;
	int manage_copy; /* also apply to copy-engine runlists */
	uint32_t rotate_period_ms; /* POLICY_SEVERAL_BE_ROTATE: each BE's turn */
	uint32_t gate_lease_ms;    /* a gate lapses after this without renewal */
	/* Hold a turn's change until it fits in an LC's gap between requests
	 * (rotate.c), where the LC's preempt agent says when they come. */
	int rotate_in_gap;
	/* An LC process whose launches keep it active at least this share of
	 * the time (percent, 0: never; lcbusy.c) is launch-bound: its BEs keep
	 * their baseline. */
	uint32_t busy_lc_percent;
	/* An LC beside a BE gets its context woken this long ahead of its
	 * periodic requests by its own preempt agent (0: no wakes), with a
	 * kernel that holds the context this long (0: an empty one). */
	uint32_t wake_lead_us, wake_hold_us;
	/* Windows (window.c): with after_us > 0, every BE beside one periodic
	 * LC is kept off its GPU from before_us ahead of each of the LC's
	 * predicted requests to after_us past its start, where the window
	 * is at most max_off_percent of the LC's period. after_us 0: none.
	 * after_auto: after_us is 0, and each LC's own span (PHASE) sizes it
	 * instead (window.c). */
	uint32_t window_before_us, window_after_us, window_max_off_percent;
	int window_after_auto;
	/* The most of max_off_percent an LC's own ask (window_req) may keep
	 * the BEs off per period (percent; 0: asks for windows are ignored,
	 * "off" is still honoured). */
	uint32_t window_pod_max_off_percent;
};

struct policy_tsg_in {
	uint32_t gpu;         /* device instance */
	uint32_t engine_type; /* NV2080_ENGINE_TYPE_*: the runlist */
	enum qos_class cls;
	/* What the app/libcuda asked for; 0 = not known yet, and then the
	 * driver default for the engine (2048 us GR, 1024 us copy) is used, so
	 * a missing read never turns into a 0 us timeslice. */
	uint32_t baseline_timeslice_us;
	/* Its preempt agent can gate it (docs/protocol.md, "Gating"). */
	int gateable;
	/* An LC TSG whose process is launch-bound (lcbusy.c). */
	int lc_busy;
	/* A BE's process: its BE TSGs on this runlist, this one included (0
	 * is taken as 1), and whether another of them came before this one
	 * (its process is counted once, on the first). A rotation's turns are
	 * per process: all of them are schedulable in their process's turn. */
	uint32_t proc_tsgs;
	int proc_repeat;
};

struct policy_tsg_out {
	uint32_t timeslice_us; /* desired */
	int32_t interleave;    /* desired level, or POLICY_INTERLEAVE_LEAVE */
	const char *reason;    /* static string for operators */
	int rotate;            /* takes turns with the other BEs of its runlist */
	int wake;              /* an LC TSG whose process should wake it (wake_lead_us) */
};

/* The TSGs one runlist (GPU, engine) holds, per class. */
struct policy_runlist {
	uint32_t gpu, engine_type;
	uint32_t lc, be;
	uint32_t be_gateable; /* BEs whose preempt agent can gate them */
	uint32_t be_procs;    /* processes of the BEs (policy_tsg_in.proc_repeat) */
	uint32_t lc_busy;     /* LCs whose process is launch-bound */
};

void policy_config_defaults(struct policy_config *cfg);

/* 0 if cfg respects the limits above (rotation period and lease
 * included, the lease at least twice the period); otherwise -1 and a sentence in err
 * naming the field. A several_be_timeslice_us below
 * POLICY_SEVERAL_BE_SAFE_MIN_US passes only with allow_unsafe_several_be. */
int policy_config_validate(const struct policy_config *cfg, int allow_unsafe_several_be,
			   char *err, size_t errlen);

/* Groups in[0..n) per runlist into rl (room for n entries), sorted by
 * (gpu, engine_type); returns how many runlists. O(n log n). */
size_t policy_runlists(const struct policy_tsg_in *in, size_t n, struct policy_runlist *rl);

/* The runlist (gpu, engine_type) of rl[0..m) (from policy_runlists), or
 * NULL when no TSG is on it. O(log m). */
const struct policy_runlist *policy_runlist_find(const struct policy_runlist *rl, size_t m,
						 uint32_t gpu, uint32_t engine_type);

/* The decision for TSG t on a runlist holding rl (t itself included, when
 * it is there; NULL: nothing). Rules: docs/policy.md. */
void policy_decide_tsg(const struct policy_config *cfg, const struct policy_tsg_in *t,
		       const struct policy_runlist *rl, struct policy_tsg_out *out);

/* Decide for all n TSGs at once (a TSG's setting depends on its runlist
 * neighbours), given their runlists rl[0..m) from policy_runlists. Pure:
 * same input, same output; out[i] is the decision for in[i]. O(n log m). */
void policy_decide_with(const struct policy_config *cfg, const struct policy_tsg_in *in, size_t n,
			const struct policy_runlist *rl, size_t m, struct policy_tsg_out *out);

/* policy_runlists + policy_decide_with, with the runlists allocated here:
 * 0, or -1 when out of memory (out untouched). */
int policy_decide(const struct policy_config *cfg, const struct policy_tsg_in *in, size_t n,
		  struct policy_tsg_out *out);

const char *class_name(enum qos_class c);
/* Parses "latency-critical"/"lc", "best-effort"/"be", "unmanaged"; -1 if bad. */
int class_parse(const char *s, enum qos_class *out);

#endif

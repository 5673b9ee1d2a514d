/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lcbusy.c - which LC processes are always busy: their CPU time (every
 * thread, read through the process's CPU-time clock) grows at least
 * busyLcPercent of the wall time, smoothed over about a second.
 *
 * Why: an LC that is always busy (an eager, launch-bound model; a queue
 * that never drains) makes the GPU switch to it for every small launch.
 * Behind a BE at a short timeslice those switches cost the BE far more
 * than the LC gains: an eager ResNet-50 beside a training BE on an H200
 * left the BE 11 % of what it did alone, against 81 % at driver defaults,
 * and the LC's p99 was worse too (docs/PERF.md). Such an LC spends its
 * time launching or waiting for its own kernels (CUDA spins in its
 * synchronise calls by default), so it keeps a CPU busy; an LC serving
 * requests with idle gaps does not.
 *
 * Owns: the reading and the smoothing (struct proc.busy). Does not own
 * what it changes (policy.c: an always-busy LC leaves its BEs at their
 * baseline). The clock read is one system call that takes no lock of the
 * target's memory, so it runs on the loop. Limits: an LC whose other
 * threads are CPU-bound (preprocessing, a busy server) reads as always
 * busy; one that synchronises by blocking reads as idle while it waits.
 */
#include "agent/agent.h"
#include "common/log.h"

#include <time.h>

/* Weight of the newest reading: with the 200 ms reconcile tick, about a
 * second of history. */
#define LCBUSY_ALPHA 0.3
/* Leaving "always busy" needs this many points below the threshold, so a
 * process near it does not flip the BEs' settings every tick. */
#define LCBUSY_HYSTERESIS 10.0

static void lcbusy_reset(struct proc *p)
{
	p->busy.cpu_ns = 0;
	p->busy.at_us = 0;
	p->busy.percent = -1.0;
	if (p->busy.always)
		p->busy.always = 0;
}

static int lcbusy_read(pid_t pid, uint64_t *cpu_ns)
{
	struct timespec ts;
	clockid_t cid;

	if (clock_getcpuclockid(pid, &cid) != 0 || clock_gettime(cid, &ts) != 0)
		return -1;
	*cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return 0;
}

static void lcbusy_update(struct agent *a, struct proc *p, uint64_t now)
{
	double threshold = a->cfg->policy.busy_lc_percent, sample;
	uint64_t cpu;
	int was = p->busy.always;

	if (lcbusy_read(p->pid, &cpu) != 0) {
		lcbusy_reset(p);
		a->dirty |= was;
		return;
	}
	if (!p->busy.at_us)
		p->busy.percent = -1.0; /* a first reading: no rate yet */
	else if (now > p->busy.at_us && cpu >= p->busy.cpu_ns) {
		sample = (double)(cpu - p->busy.cpu_ns) / 10.0 / (double)(now - p->busy.at_us);
		if (sample > 100.0)
			sample = 100.0; /* several busy threads are one busy LC */
		p->busy.percent = p->busy.percent < 0
					  ? sample
					  : LCBUSY_ALPHA * sample + (1 - LCBUSY_ALPHA) * p->busy.percent;
	}
	p->busy.cpu_ns = cpu;
	p->busy.at_us = now;
	if (threshold <= 0 || p->busy.percent < 0)
		p->busy.always = 0;
	else if (!was && p->busy.percent >= threshold)
		p->busy.always = 1;
	else if (was && p->busy.percent < threshold - LCBUSY_HYSTERESIS)
		p->busy.always = 0;
	if (p->busy.always != was) {
		proc_log(a, p, LOG_LEVEL_INFO, "pid %d (%s): LC %s always busy (CPU %.0f %%)",
			 (int)p->pid, p->comm, p->busy.always ? "is" : "is no longer", p->busy.percent);
		a->dirty = 1;
	}
}

void lcbusy_tick(struct agent *a)
{
	uint64_t now = now_us();

	for (struct proc *p = a->procs; p; p = p->next) {
		if (p->cls == CLASS_LC && a->cfg->policy.busy_lc_percent > 0) {
			lcbusy_update(a, p, now);
		} else if (p->busy.at_us || p->busy.always) {
			a->dirty |= p->busy.always;
			lcbusy_reset(p);
		}
	}
}

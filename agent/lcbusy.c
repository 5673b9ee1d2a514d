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
 * target's memory, so it runs on the loop.
 *
 * An LC delayed behind BEs at their baseline also keeps its CPU busy (it
 * spins waiting for its late kernels: the micro LC read 98 % beside three
 * BEs at 1000 us, 15 % beside them rotated), so the reading means
 * something only while the BEs are shortened. Once an LC is found always
 * busy it stays so for LCBUSY_HOLD_MS without being read, then is read
 * afresh with its BEs shortened again. Limits: an LC whose other threads
 * are CPU-bound (preprocessing, a busy server) reads as always busy; one
 * that synchronises by blocking reads as idle while it waits.
 */
#include "agent/agent.h"
#include "common/log.h"

#include <time.h>

/* Weight of the newest reading: with the 200 ms reconcile tick, about a
 * second of history. */
#define LCBUSY_ALPHA 0.3
/* How long an always-busy LC keeps its BEs at baseline before it is
 * measured again beside shortened BEs: a wrong verdict costs at most one
 * measurement (about 1.5 s) in this long. */
#define LCBUSY_HOLD_MS 30000u

static void lcbusy_reset(struct proc *p)
{
	p->busy.cpu_ns = 0;
	p->busy.at_us = 0;
	p->busy.percent = -1.0;
	p->busy.always = 0;
	p->busy.until_us = 0;
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

	if (was && now < p->busy.until_us)
		return; /* its BEs are at baseline: a reading now means nothing */
	if (was) {
		proc_log(a, p, LOG_LEVEL_INFO, "pid %d (%s): measuring the LC's CPU use again",
			 (int)p->pid, p->comm);
		lcbusy_reset(p);
		a->dirty = 1;
		return;
	}
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
	if (threshold > 0 && p->busy.percent >= threshold) {
		p->busy.always = 1;
		p->busy.until_us = now + LCBUSY_HOLD_MS * 1000ull;
		proc_log(a, p, LOG_LEVEL_INFO,
			 "pid %d (%s): LC always busy (CPU %.0f %%): its BEs keep their baseline for "
			 "%u s", (int)p->pid, p->comm, p->busy.percent, LCBUSY_HOLD_MS / 1000u);
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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phase.c - when an LC's requests come, as rotations (rotate.c) and
 * windows (window.c) use it: a PHASE report fresh enough, the one LC with
 * one on a GPU, and the grid of its due times (the median of its last
 * starts). Does not own receiving PHASE (peer.c) nor what is placed on
 * the grid.
 */
#include "agent/core/core.h"

#include <stdint.h>

int phase_fresh(const struct proc *p, uint64_t now)
{
	return p->phase.have && p->phase.rx_us <= now && now - p->phase.rx_us <= PHASE_FRESH_US;
}

struct proc *phase_lc(const struct agent *a, uint32_t gpu, uint64_t now)
{
	struct proc *lc = NULL;

	for (const struct tsg *t = a->tsgs; t; t = t->next) {
		struct proc *pr = t->proc;

		/* A claim nobody confirmed (or one refused) counts for no
		 * other process: neither as the LC nor as a second one. */
		if (t->gpu != gpu || !pr || pr->cls != CLASS_LC || tsg_unverified(t) ||
		    !phase_fresh(pr, now))
			continue;
		if (lc && lc != pr)
			return NULL;
		lc = pr;
	}
	return lc;
}

/* Period a is over 1 % off period b. */
static int period_moved(uint64_t a_ns, uint64_t b_ns)
{
	return (a_ns > b_ns ? a_ns - b_ns : b_ns - a_ns) * 100u > b_ns;
}

/* A new period takes over only once it held: every report since the
 * first that said it within 1 % of it, for PHASE_SETTLE_US. A report
 * back at the grid's period ends the wait. 1: lc's report stays out. */
static int period_pending(struct proc *lc)
{
	uint64_t per = lc->phase.period_ns, rx = lc->phase.rx_us;

	if (!lc->grid.n || !period_moved(per, lc->grid.period_ns)) {
		lc->grid.pending_ns = 0;
		return 0;
	}
	if (!lc->grid.pending_ns || period_moved(per, lc->grid.pending_ns)) {
		lc->grid.pending_ns = per;
		lc->grid.pending_since_us = rx;
		return 1;
	}
	if (rx - lc->grid.pending_since_us < PHASE_SETTLE_US)
		return 1;
	lc->grid.pending_ns = 0;
	lc->grid.n = 0; /* it held: a new grid */
	return 0;
}

/* A request starts when its first launch comes, which a late process
 * (its thread descheduled, a slow submit) makes later than the time it
 * was due, never earlier, and sometimes by more than half a period. The
 * latest start alone would move every window of the next PHASE period
 * (250 ms) by one request's lateness; the median of the last three,
 * each placed on the newest one's period, ignores one late report. With
 * two, the earlier placement counts: lateness only delays. A PHASE that
 * alternates its period (a forged one: 2 % every report) would start a
 * new grid, and move every BE's windows, at each report: a new period
 * waits until it held (period_pending). */
uint64_t phase_grid_take(struct proc *lc)
{
	uint64_t per = lc->phase.period_ns, s = lc->phase.last_start_us;
	int64_t d[WINDOW_GRID_SAMPLES], med;
	unsigned n;

	if (lc->grid.n && lc->grid.rx_us == lc->phase.rx_us)
		return lc->grid.anchor_us;
	lc->grid.rx_us = lc->phase.rx_us;
	if (period_pending(lc))
		return lc->grid.anchor_us;
	lc->grid.period_ns = per;
	n = lc->grid.n < WINDOW_GRID_SAMPLES ? lc->grid.n + 1 : WINDOW_GRID_SAMPLES;
	for (unsigned i = n - 1; i > 0; i--)
		lc->grid.starts_us[i] = lc->grid.starts_us[i - 1];
	lc->grid.starts_us[0] = s;
	lc->grid.n = n;
	/* Where each start's grid point lies from s, within half a period. */
	for (unsigned i = 0; i < n; i++) {
		int64_t r = ((int64_t)lc->grid.starts_us[i] - (int64_t)s) * 1000 % (int64_t)per;

		if (r < 0)
			r += (int64_t)per;
		if (r > (int64_t)per / 2)
			r -= (int64_t)per;
		d[i] = r;
	}
	for (unsigned i = 1; i < n; i++) /* n <= 3: insertion sort */
		for (unsigned k = i; k > 0 && d[k] < d[k - 1]; k--) {
			int64_t t = d[k];

			d[k] = d[k - 1];
			d[k - 1] = t;
		}
	med = n == 2 ? d[0] : d[n / 2];
	lc->grid.anchor_us = (uint64_t)((int64_t)s + med / 1000);
	return lc->grid.anchor_us;
}

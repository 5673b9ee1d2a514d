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

		if (t->gpu != gpu || !pr || pr->cls != CLASS_LC || !phase_fresh(pr, now))
			continue;
		if (lc && lc != pr)
			return NULL;
		lc = pr;
	}
	return lc;
}

/* A request starts when its first launch comes, which a late process
 * (its thread descheduled, a slow submit) makes later than the time it
 * was due, never earlier, and sometimes by more than half a period. The
 * latest start alone would move every window of the next PHASE period
 * (250 ms) by one request's lateness; the median of the last three,
 * each placed on the newest one's period, ignores one late report. With
 * two, the earlier placement counts: lateness only delays. */
uint64_t phase_grid_update(struct proc *lc)
{
	uint64_t per = lc->phase.period_ns, s = lc->phase.last_start_us;
	uint64_t drift = per > lc->grid.period_ns ? per - lc->grid.period_ns
						  : lc->grid.period_ns - per;
	int64_t d[WINDOW_GRID_SAMPLES], med;
	unsigned n;

	if (lc->grid.n && lc->grid.rx_us == lc->phase.rx_us)
		return lc->grid.anchor_us;
	lc->grid.rx_us = lc->phase.rx_us;
	if (drift * 100u > per)
		lc->grid.n = 0;
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

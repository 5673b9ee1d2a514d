/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_core_phase.c - unit tests of the core's phase.c, on the fake clock
 * and recording hooks of core_fixture.h: the grid of an LC's due times from
 * its PHASE reports.
 */
#include "tests/agent/core_fixture.h"
#include "tests/check.h"

#include <string.h>

/* phase_grid_take: the median of the last three starts on the newest one's
 * period; a late report moves nothing; a new period only once it held. */
static void test_phase_grid(void)
{
	struct proc lc;

	memset(&lc, 0, sizeof(lc));
	lc.phase.period_ns = 10000000;
	lc.phase.last_start_us = 1000000;
	lc.phase.rx_us = 1;
	CHECK_EQ_U(phase_grid_take(&lc), 1000000);
	/* The same report again changes nothing. */
	lc.phase.last_start_us = 1000900;
	CHECK_EQ_U(phase_grid_take(&lc), 1000000);
	/* A start 900 us late, 25 periods on: of two, the earlier placement. */
	lc.phase.rx_us = 2;
	lc.phase.last_start_us = 1250900;
	CHECK_EQ_U(phase_grid_take(&lc), 1250000);
	/* On time, then one 6.5 ms late (over half a period: it reads as
	 * 3.5 ms early): the median keeps the grid. */
	lc.phase.rx_us = 3;
	lc.phase.last_start_us = 1500003;
	CHECK_EQ_U(phase_grid_take(&lc), 1500003);
	lc.phase.rx_us = 4;
	lc.phase.last_start_us = 1756500;
	CHECK_EQ_U((phase_grid_take(&lc) - 1750003) % 10000, 0); /* a start on the grid */
	/* The grid really moved (every start 2 ms later): the median of the
	 * two on-time reports and the late one follows the newest. */
	lc.phase.rx_us = 5;
	lc.phase.last_start_us = 2002003;
	CHECK_EQ_U(phase_grid_take(&lc), 2002003);
	lc.phase.rx_us = 6;
	lc.phase.last_start_us = 2252003;
	CHECK_EQ_U(phase_grid_take(&lc), 2252003);
	/* A period kept in ns: 5000.4 us, 50 periods between reports. */
	memset(&lc, 0, sizeof(lc));
	lc.phase.period_ns = 5000400;
	lc.phase.last_start_us = 3000000;
	lc.phase.rx_us = 1;
	CHECK_EQ_U(phase_grid_take(&lc), 3000000);
	lc.phase.rx_us = 2;
	lc.phase.last_start_us = 3000000 + 250020;
	CHECK_EQ_U(phase_grid_take(&lc), 3250020);
	/* A new period is not taken in at once: the grid stays until every
	 * report has said it for PHASE_SETTLE_US; then it starts a new grid. */
	lc.phase.rx_us = 3;
	lc.phase.period_ns = 4000000;
	lc.phase.last_start_us = 3700321;
	CHECK_EQ_U(phase_grid_take(&lc), 3250020);
	CHECK_EQ_U(lc.grid.pending_ns, 4000000);
	lc.phase.rx_us = 3 + PHASE_SETTLE_US - 1;
	lc.phase.last_start_us = 3700321 + 4000;
	CHECK_EQ_U(phase_grid_take(&lc), 3250020);
	CHECK_EQ_U(lc.grid.period_ns, 5000400);
	lc.phase.rx_us = 3 + PHASE_SETTLE_US;
	lc.phase.last_start_us = 3700321 + 8000;
	CHECK_EQ_U(phase_grid_take(&lc), 3708321);
	CHECK_EQ_U(lc.grid.period_ns, 4000000);
	CHECK_EQ_U(lc.grid.pending_ns, 0);
	/* A period that alternates by 2 % at every report (a forged PHASE)
	 * never holds: the grid and its period stay, however long. */
	for (unsigned i = 1; i <= 40; i++) {
		lc.phase.rx_us = 3 + PHASE_SETTLE_US + i * 250000u;
		lc.phase.period_ns = i % 2 ? 4080000 : 3920000;
		lc.phase.last_start_us = 3708321 + i * 250000u + i * 1300u;
		CHECK_EQ_U(phase_grid_take(&lc), 3708321);
		CHECK_EQ_U(lc.grid.period_ns, 4000000);
	}
	/* Back at the grid's period: taken in, the wait forgotten. */
	lc.phase.rx_us += 250000;
	lc.phase.period_ns = 4000000;
	lc.phase.last_start_us = 3708321 + 41u * 250000u;
	CHECK_EQ_U(phase_grid_take(&lc), 3708321 + 41u * 250000u);
	CHECK_EQ_U(lc.grid.pending_ns, 0);
}

int main(void)
{
	core_fixture_start();
	test_phase_grid();
	CHECK_DONE();
}

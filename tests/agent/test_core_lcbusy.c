/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_core_lcbusy.c - unit tests of the core's lcbusy.c, on the fake clock
 * and recording hooks of core_fixture.h: launch readings from ACTIVITY and
 * which LCs are launch-bound.
 */
#include "tests/agent/core_fixture.h"
#include "tests/check.h"

#include <string.h>

/* One ACTIVITY from pid's preempt agent (times in ms on its clock). */
static void activity(struct agent *a, struct proc *p, uint64_t launches, double active_ms,
		     double at_ms, uint32_t reserved)
{
	struct gq_activity m;

	memset(&m, 0, sizeof(m));
	m.reserved = reserved;
	m.launches = launches;
	m.active_ns = (uint64_t)(active_ms * 1e6);
	m.at_ns = (uint64_t)(at_ms * 1e6);
	lcbusy_report(a, p, &m);
}

/* Launch readings: the share of the time launches keep a process active,
 * smoothed; an LC at busyLcPercent (50) is launch-bound until it falls 10
 * points under; impossible reports are dropped and counted, a launch
 * racing the library's read (up to one 200 us tail) is not impossible;
 * four seconds without reports forget the reading. */
static void test_launch_readings(void)
{
	struct agent *a = agent_new();
	struct proc *lc = proc_with_peer(a, 1, "lc"), *be = proc_with_peer(a, 2, "be");

	CHECK(lc->busy.percent < 0 && !lc->busy.always);
	activity(a, lc, 1000, 10, 1000, 0); /* the base */
	CHECK(lc->busy.percent < 0);
	activity(a, lc, 11000, 250, 1250, 0); /* 240 of 250 ms: 96 % */
	CHECK(lc->busy.percent > 95.9 && lc->busy.percent < 96.1 && lc->busy.always);
	CHECK(lc->busy.launches_per_s > 39999 && lc->busy.launches_per_s < 40001);
	CHECK_EQ_U(a->n.bad_activity, 0);
	/* A BE reads the same and is never launch-bound. */
	activity(a, be, 0, 0, 1000, 0);
	activity(a, be, 10000, 240, 1250, 0);
	CHECK(be->busy.percent > 95 && !be->busy.always);

	/* Reserved bits: dropped, counted, the reading kept. */
	activity(a, lc, 12000, 490, 1500, 1);
	CHECK_EQ_U(a->n.bad_activity, 1);
	CHECK(lc->busy.always && lc->busy.percent > 95.9);
	/* 0.1 ms more active than elapsed (a racing launch): all of it (an
	 * interval 25 points over the threshold and above the reading weighs
	 * 0.6). */
	activity(a, lc, 12000, 500.1, 1500, 0);
	CHECK_EQ_U(a->n.bad_activity, 1);
	CHECK(lc->busy.percent > 98.3 && lc->busy.percent < 98.5); /* 0.6 * 100 + 0.4 * 96 */
	/* 0.1 ms back (the racing launch's part not added yet): none of it. */
	activity(a, lc, 13000, 500.0, 1750, 0);
	CHECK_EQ_U(a->n.bad_activity, 1);
	CHECK(lc->busy.percent > 68.8 && lc->busy.percent < 68.9); /* 0.7 * 98.4 */
	CHECK(lc->busy.always); /* hysteresis: bound down to 40 % */
	/* The next report counts from the higher value, so nothing is lost
	 * twice: 125 of 250 ms. */
	activity(a, lc, 14000, 625.1, 2000, 0);
	CHECK(lc->busy.percent > 63.2 && lc->busy.percent < 63.3); /* 0.3 * 50 + 0.7 * 68.88 */
	/* 0.3 ms more than elapsed: not one process's counters. Forgotten,
	 * and the runlist is reconsidered. */
	a->dirty = 0;
	activity(a, lc, 15000, 875.4, 2250, 0);
	CHECK_EQ_U(a->n.bad_activity, 2);
	CHECK(lc->busy.percent < 0 && !lc->busy.always && a->dirty);
	/* That report was not a base: the next one is. */
	activity(a, lc, 16000, 1000, 2500, 0);
	activity(a, lc, 26000, 1240, 2750, 0);
	CHECK(lc->busy.always);
	/* Launches or active time going back more than a tail: forgotten. */
	activity(a, lc, 25000, 1300, 3000, 0);
	CHECK_EQ_U(a->n.bad_activity, 3);
	CHECK(!lc->busy.always);
	activity(a, lc, 30000, 1300, 3000, 0);
	activity(a, lc, 31000, 1540, 3250, 0);
	activity(a, lc, 32000, 1539.7, 3500, 0);
	CHECK_EQ_U(a->n.bad_activity, 4);
	/* Falling readings: bound while at or above 40 %, not below. */
	activity(a, lc, 40000, 1600, 3750, 0);
	activity(a, lc, 50000, 1840, 4000, 0); /* 96 % */
	CHECK(lc->busy.always);
	double t = 4000, act = 1840;
	while (lc->busy.percent >= 40.0) {
		CHECK(lc->busy.always);
		t += 250;
		act += 25; /* 10 % */
		activity(a, lc, 50000, act, t, 0);
	}
	CHECK(!lc->busy.always && lc->busy.percent > 30.0);
	/* From 10 %: an interval at 90 % (25 points over, above the reading)
	 * is believed at once (0.6 * 90 + 0.4 * 10 = 58); one at 70 % (a
	 * backlog, a burst) moves the reading as slowly as ever. */
	while (lc->busy.percent > 10.5) {
		t += 250;
		act += 25;
		activity(a, lc, 50000, act, t, 0);
	}
	{
		double before = lc->busy.percent;

		t += 250;
		act += 175; /* 70 % */
		activity(a, lc, 50000, act, t, 0);
		CHECK(!lc->busy.always && lc->busy.percent > 0.3 * 70 + 0.7 * before - 0.01 &&
		      lc->busy.percent < 0.3 * 70 + 0.7 * before + 0.01);
		while (lc->busy.percent > 10.5) {
			t += 250;
			act += 25;
			activity(a, lc, 50000, act, t, 0);
		}
		before = lc->busy.percent;
		t += 250;
		act += 225; /* 90 % */
		activity(a, lc, 50000, act, t, 0);
		CHECK(lc->busy.always && lc->busy.percent > 0.6 * 90 + 0.4 * before - 0.01 &&
		      lc->busy.percent < 0.6 * 90 + 0.4 * before + 0.01);
		/* Falling back, as slowly as ever (0.3): 40 % reached after three
		 * idle-ish reports, not one. */
		t += 250;
		act += 25;
		activity(a, lc, 50000, act, t, 0);
		CHECK(lc->busy.always);
		while (lc->busy.percent >= 40.0) {
			t += 250;
			act += 25;
			activity(a, lc, 50000, act, t, 0);
		}
		CHECK(!lc->busy.always);
	}
	/* A report closer than 100 ms to the last changes nothing and folds
	 * into the next: 50 ms all active, then 200 ms idle, is 20 %. */
	{
		double before = lc->busy.percent;

		activity(a, lc, 50100, act + 50, t + 50, 0);
		CHECK(lc->busy.percent == before);
		activity(a, lc, 50100, act + 50, t + 250, 0);
		CHECK(lc->busy.percent > 0.3 * 20 + 0.7 * before - 0.01 &&
		      lc->busy.percent < 0.3 * 20 + 0.7 * before + 0.01);
	}
	/* An impossible rate is shown as the cap, not as a number no tool
	 * reads as an integer. */
	activity(a, be, 20000, 480, 1500, 0);
	activity(a, be, UINT64_MAX / 2, 480, 1600, 0);
	CHECK(be->busy.launches_per_s > 0.3e9 - 1 && be->busy.launches_per_s <= 0.3e9 + 0.7 * 40000 + 1);
	/* Over a second without a report (a process whose CPU was taken):
	 * the readings stay. Four seconds: unknown. */
	fake_now += 1100000;
	lcbusy_tick(a);
	CHECK(lc->busy.percent >= 0 && be->busy.percent >= 0);
	fake_now += 2900000;
	lcbusy_tick(a);
	CHECK(lc->busy.percent >= 0 && be->busy.percent >= 0);
	fake_now += 100001;
	lcbusy_tick(a);
	CHECK(lc->busy.percent < 0 && be->busy.percent < 0);
	/* A launch-bound LC silent for three seconds stays launch-bound. */
	activity(a, lc, 0, 0, 20000, 0);
	activity(a, lc, 100000, 250, 20250, 0);
	CHECK(lc->busy.always);
	fake_now += 3000000;
	lcbusy_tick(a);
	CHECK(lc->busy.always);
	fake_now += 1100000;
	lcbusy_tick(a);
	CHECK(!lc->busy.always && lc->busy.percent < 0);
	/* busyLcPercent 0: read, never judged. */
	a->cfg->policy.busy_lc_percent = 0;
	activity(a, lc, 0, 0, 10000, 0);
	activity(a, lc, 10000, 250, 10250, 0);
	CHECK(lc->busy.percent > 99 && !lc->busy.always);
	a->cfg->policy.busy_lc_percent = 50;
	lcbusy_tick(a);
	CHECK(lc->busy.always);
	agent_free(a);
}

int main(void)
{
	core_fixture_start();
	test_launch_readings();
	CHECK_DONE();
}

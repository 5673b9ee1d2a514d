/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_timeslice.c - the record of a TSG's timeslice when the
 * application and the library's own threads both set it.
 *
 * The application and the library both set timeslices, and a record that
 * lands after a newer value would make the node agent take a TSG for set
 * while RM holds libcuda's value. A rewritten SET of the application
 * (preempt_ioctl.c) and every timeslice control of the library's threads
 * (a COMMAND or a new TSG's value, preempt_conn.c; a restore,
 * preempt_gate.c) hold pa.ts_lock across the ioctl and its record, so
 * those are recorded in the order RM took them (each side waits for it at
 * most PA_TS_LOCK_WAIT_MS). The application's SET that is not rewritten
 * (no policy yet), or that stopped waiting, is seen only once it returned;
 * each record bumps the TSG's set_seq, and a control of ours that sees it
 * moved does not know which call reached RM last: RM is asked
 * (pa_ts_settle).
 *
 * Owns: pa.ts_lock's waits, the set_seq check and settling a race. Does
 * not own: the tables (preempt_track.c) or issuing the controls that are
 * recorded (their callers).
 */
#include "preempt.h"
#include "preempt_timeslice.h"

static unsigned long pa_ts_races; /* our SET raced the application's */

int pa_ts_lock(void)
{
	struct timespec dl;

	pa_deadline_in(&dl, PA_TS_LOCK_WAIT_MS);
	return pthread_mutex_timedlock(&pa.ts_lock, &dl) == 0;
}

void pa_ts_unlock(int locked)
{
	if (locked)
		pthread_mutex_unlock(&pa.ts_lock);
}

unsigned pa_ts_seq(rm_handle h_client, rm_handle h_tsg)
{
	struct pa_tsg *g;
	unsigned seq = 0;

	pa_lock();
	g = pa_track_tsg_find(&pa.track, h_client, h_tsg);
	if (g != NULL)
		seq = g->set_seq;
	pa_unlock();
	return seq;
}

/* Our SET raced the application's: ask RM and record its answer (reported
 * with the next flush). An application SET recorded after we asked
 * reached RM after our SET, so its value stands. */
static void pa_ts_settle(int fd, rm_handle h_client, rm_handle h_tsg)
{
	struct rm_tsg_timeslice ts = { 0 };
	unsigned seq = pa_ts_seq(h_client, h_tsg);
	rm_u32 err, status = 0;
	rm_u64 elapsed = 0;
	struct pa_tsg *g;
	int wake = 0;

	err = pa_rm_control(fd, h_client, h_tsg, RM_CTRL_TSG_GET_TIMESLICE, &ts, sizeof(ts), &status,
			    &elapsed);
	pa_info("TSG 0x%x of client 0x%x: the application set its timeslice while we did "
		"(%lu so far); RM holds %llu us (err %u, %s)",
		h_tsg, h_client, ++pa_ts_races, (unsigned long long)ts.timesliceUs, err,
		rm_status_name(status));
	if (err != 0 || status != RM_OK)
		return;
	pa_lock();
	g = pa_track_tsg_find(&pa.track, h_client, h_tsg);
	if (g != NULL && g->set_seq == seq)
		pa_track_note_timeslice(&pa.track, h_client, h_tsg, g->app_timeslice_us, 1,
					ts.timesliceUs, pa_emit, &wake);
	pa_unlock();
	pa_wake(wake);
}

void pa_ts_accepted(int fd, rm_handle h_client, rm_handle h_tsg, unsigned seq, rm_u64 value_us,
		    int report)
{
	rm_u32 v = value_us >= GQ_UNKNOWN ? GQ_UNKNOWN - 1 : (rm_u32)value_us;
	struct pa_tsg *g;
	int wake = 0, raced = 0;

	pa_lock();
	g = pa_track_tsg_find(&pa.track, h_client, h_tsg);
	if (g != NULL && g->set_seq != seq)
		raced = 1;
	else if (g != NULL && report)
		pa_track_note_timeslice(&pa.track, h_client, h_tsg, g->app_timeslice_us, 1, v,
					pa_emit, &wake);
	else if (g != NULL)
		g->timeslice_us = v;
	pa_unlock();
	pa_wake(wake);
	if (raced)
		pa_ts_settle(fd, h_client, h_tsg);
}

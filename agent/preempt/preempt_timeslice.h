/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_timeslice.h - keeping the record of a TSG's timeslice in the
 * order RM took the controls, when the application and the library both
 * set it (preempt_timeslice.c).
 */
#ifndef GPUQOS_PREEMPT_TIMESLICE_H
#define GPUQOS_PREEMPT_TIMESLICE_H

#include "abi/rm_abi.h"

/* pa.ts_lock, waited for at most PA_TS_LOCK_WAIT_MS: neither side stalls
 * on a control of the other that does not return; without the lock the
 * race is still seen afterwards (set_seq) and RM asked. Returns 1 if
 * taken; pa_ts_unlock takes that answer. */
#define PA_TS_LOCK_WAIT_MS 50u
int pa_ts_lock(void);
void pa_ts_unlock(int locked);

/* A TSG's set_seq (0 when it is not tracked), taken before a control of
 * the library's thread; then, under pa_ts_lock, pa_ts_accepted records
 * that RM accepted value_us from it (reported now when report, else by
 * the RESULT), or asks RM when an application SET was recorded since. */
unsigned pa_ts_seq(rm_handle h_client, rm_handle h_tsg);
void pa_ts_accepted(int fd, rm_handle h_client, rm_handle h_tsg, unsigned seq, rm_u64 value_us,
		    int report);

#endif /* GPUQOS_PREEMPT_TIMESLICE_H */

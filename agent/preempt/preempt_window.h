/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_window.h - windows around an LC's requests (preempt_window.c).
 */
#ifndef GPUQOS_PREEMPT_WINDOW_H
#define GPUQOS_PREEMPT_WINDOW_H

#include "abi/gq_proto.h"

/* A WINDOW received at received_ns (the library's thread): starts,
 * renews or moves the schedule; one without GQ_WINDOW_F_ON, or one that
 * fails pa_window_bad, ends it (an open window closes at once). */
void pa_window_set(const struct gq_window *w, rm_u64 received_ns);

/* The answer to the WINDOW just taken or refused (WINDOW_STATE): flags
 * (GQ_WINDOW_STATE_F_*) and the counts since the library was loaded. */
void pa_window_state(struct gq_window_state *m, rm_u32 seq, rm_u64 now_ns);

/* The schedule ends now (the connection ended); an open window closes. */
void pa_window_stop(const char *why);

/* In a forked child. */
void pa_window_child_reset(void);

#endif /* GPUQOS_PREEMPT_WINDOW_H */

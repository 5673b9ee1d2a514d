/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tracker.h - the eBPF RM tracer (bpf/, library gpuqos_tsgtrace) inside the
 * node agent: opening it at start (--bpf auto|on|off), dumping the pinned
 * live TSG and channel tables, consuming its events in the one epoll loop,
 * and merging what the kernel saw into the agent's TSG table.
 *
 * Owns: the tracer handle, its loop watch, the kernel's side of every TSG
 * (sources, applied values RM accepted, removal on free and exit), finding
 * processes that only the kernel saw, and verifying preempt-agent claims
 * (a claim the kernel never saw is held for TRACKER_CLAIM_GRACE_MS, then
 * refused). Does not own the TSG table itself (tsg.c), classification
 * (tsg.c, config.c), or what a TSG's settings should be (reconcile.c).
 *
 * Without GPUQOS_HAVE_BPF (the library was not built) the tracker is
 * always off and says why.
 */
#ifndef GPUQOS_AGENT_TRACKER_H
#define GPUQOS_AGENT_TRACKER_H

#include <stdint.h>
#include <sys/types.h>

#include "agent/core/core.h"

struct cJSON;
struct agent;

/* "auto", "on", "off" (also 1/0, true/false, yes/no). 0, or -1. */
int tracker_parse_setting(const char *s, enum tracker_setting *out);
const char *tracker_setting_name(enum tracker_setting s);

/* Opens, dumps and drains the tracer, then watches its ring. Returns -1
 * only when the setting is "on" and it cannot run. */
int tracker_init(struct agent *a);

/* Whether the kernel's view is the authority for TSGs. */
int tracker_active(const struct agent *a);

/* Claims past their grace: re-reads the ring and the table, then refuses
 * what the kernel still never saw. Safe to call at any time. */
void tracker_tick(struct agent *a);

/* Process pid was just attached for its preempt agent's connection: the
 * TSGs the kernel saw it allocate while it was being identified (their
 * events found no process to go to) are taken from the live table, so its
 * claims are confirmed at once, not at the end of their grace. */
void tracker_take_proc(struct agent *a, pid_t pid);

/* The earliest end of a claim's grace (now_us() clock), or 0. */
uint64_t tracker_next_deadline(const struct agent *a);

/* Adds "tracker" to the ctl agent object (docs/ctl.md): its state, and
 * the channels it knows under the agent's TSGs. */
void tracker_json(struct agent *a, struct cJSON *agent_obj);

/* Releases the tracer; the programs stay attached (pinned links), so a
 * restarted agent misses nothing. */
void tracker_stop(struct agent *a);

#endif

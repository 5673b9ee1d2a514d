/* SPDX-License-Identifier: Apache-2.0 */
/*
 * statefile.h - the node agent's state directory (statefile.c): the lock
 * that makes one agent its only user, and when and how
 * <state-dir>/state.json is written. What it holds (overrides, awaited
 * peers) is the core's (state.c, core.h).
 */
#ifndef GPUQOS_AGENT_IO_STATEFILE_H
#define GPUQOS_AGENT_IO_STATEFILE_H

#include <stdint.h>

#include "common/loop.h"

/* A change to what state.json holds is written after at most this long,
 * together with every other change in that time: a burst of preempt
 * agents connecting costs one write, not one per connection. */
#define AGENT_STATE_COALESCE_MS 250u
/* After a failed write, the next try. */
#define AGENT_STATE_RETRY_MS 5000u

struct state_file {
	int lock_fd;            /* <state-dir>/lock, flock()ed; -1 before state_open */
	struct loop_timer timer; /* the coalescing delay */
	int timer_on;           /* the timer was added to the loop */
	int armed;              /* a write is scheduled */
	int loaded;             /* state_load ran: before it, nothing is written */
	char *written;          /* the text state.json holds (ours or found at start) */
	uint64_t writes, write_errors;
};

struct agent;

/* Checks that the state directory is a writable directory on a real file
 * system (not procfs, sysfs, ...) and locks it: a second agent with the
 * same state directory refuses to start, naming the first one's pid. */
int state_open(struct agent *a);
/* Reads state.json into the core (state_parse) and rewrites it without
 * the entries of processes that are gone. */
int state_load(struct agent *a);
/* What state.json holds may have changed: written within
 * AGENT_STATE_COALESCE_MS if it did. Never writes on the caller's path.
 * (agent_hooks.on_state_changed) */
void state_changed(struct agent *a);
/* Writes state.json now if its content changed; 0 when it holds the
 * agent's state afterwards. (agent_hooks.on_state_flush) */
int state_flush(struct agent *a);
/* At exit, after the sockets are removed: the timer and the lock go. The
 * caller flushes first, before the peers are closed (the file keeps them
 * for the next start to wait for). */
void state_close(struct agent *a);

#endif

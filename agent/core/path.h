/* SPDX-License-Identifier: Apache-2.0 */
/*
 * path.h - which control path carries one RM control: in-process (the
 * injected preempt agent issues it on libcuda's own fd; "in-process" in
 * ctl's JSON and the policy file's controlPath) or direct (the node agent
 * itself, on a pidfd_getfd(2) duplicate of that fd).
 *
 * Owns: the pure choice, from the configured mode and what is available,
 * and the sentence saying why nothing can carry it. Does not own: the
 * paths themselves (peer.c, direct.c) nor where the facts come from.
 */
#ifndef GPUQOS_AGENT_PATH_H
#define GPUQOS_AGENT_PATH_H

#include <stdint.h>

#include "agent/core/config.h"

enum path {
	PATH_NONE = 0,
	PATH_IN_PROCESS = 1,
	PATH_DIRECT = 2,
};

struct path_in {
	enum path_mode mode; /* configured for this action */
	enum path_action action;
	int peer;            /* a preempt agent is connected (HELLO seen) */
	int peer_stalled;    /* ... and one of its controls missed a deadline */
	int direct_caps;     /* CAP_SYS_PTRACE (and Yama) allow pidfd_getfd */
	int interleave_caps; /* CAP_SYS_NICE or CAP_SYS_ADMIN in our workers */
	int direct_running;  /* the worker pool started */
	int direct_stalled;  /* too many direct controls lost */
	int fd_known;        /* the fd the TSG's client was allocated on */
};

struct path_choice {
	enum path path;
	int stalled;     /* NONE because a path is stalled, not unavailable */
	const char *why; /* NONE: static sentence; else NULL */
};

/* Pure. auto: interleave goes direct when it can (a non-root workload
 * cannot set it itself: the RM wants CAP_SYS_NICE in the calling task),
 * else through the preempt agent; every other action goes through the
 * preempt agent when it is connected and not stalled, else direct. */
struct path_choice path_select(const struct path_in *in);

/* The action an op belongs to (GET_TIMESLICE goes with timeslice). */
enum path_action op_action(uint32_t op);

/* "in-process", "direct", "none". */
const char *path_name(enum path p);

#endif

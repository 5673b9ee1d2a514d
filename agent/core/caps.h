/* SPDX-License-Identifier: Apache-2.0 */
/*
 * caps.h - which Linux capability each privileged action of the node agent
 * needs, said in one place (docs/privileges.md is the prose version), and
 * what the agent holds: its effective set, read once at start.
 *
 * Owns: the action -> capability table and the sentence that names a
 * missing capability; all pure. Reading the effective set and the Yama
 * ptrace scope is the adapters' (agent/io/capsread.c, caps_read in io.h).
 * Does not own: deciding what to do when one is missing (path.c, the
 * callers), nor dropping capabilities.
 *
 * Capabilities are per thread on Linux: the RM checks CAP_SYS_NICE in the
 * thread that issues SET_INTERLEAVE. The direct path's worker threads are
 * created by the main thread after caps_read() and inherit its set, so the
 * set read here is the set the controls run with.
 */
#ifndef GPUQOS_AGENT_CAPS_H
#define GPUQOS_AGENT_CAPS_H

#include <stddef.h>
#include <stdint.h>

enum caps_action {
	CAPS_DIRECT = 0,     /* pidfd_getfd(2) of another process's fd */
	CAPS_INTERLEAVE = 1, /* SET_INTERLEAVE_LEVEL issued by the agent itself */
	CAPS_PROC_FD = 2,    /* readlink/stat /proc/<pid>/fd/N of other users */
	CAPS_ENVIRON = 3,    /* read /proc/<pid>/environ of other users */
	CAPS_BPF = 4,        /* load and attach the eBPF tracker */
	CAPS_NACTIONS = 5,
};

/* One row: every capability in `all` and at least one in `any` (when any
 * is non-zero). Bits are 1ull << CAP_*. */
struct caps_need {
	enum caps_action action;
	const char *name; /* key in the ctl "capabilities" object */
	const char *what; /* the action in words */
	uint64_t all;
	uint64_t any;
};

struct caps {
	int known;        /* capget succeeded */
	uint64_t eff;     /* effective set of the thread that read it */
	int ptrace_scope; /* kernel.yama.ptrace_scope, -1 without Yama */
};

/* The table, in enum order. */
const struct caps_need *caps_table(size_t *n);

/* Pure: whether c allows action a. Yama scope 3 forbids pidfd_getfd to
 * everyone, whatever the capabilities. */
int caps_allows(const struct caps *c, enum caps_action a);

/* Pure: "" when allowed, else what is missing in words, e.g.
 * "CAP_SYS_PTRACE" or "CAP_SYS_NICE or CAP_SYS_ADMIN". Returns buf. */
const char *caps_missing(const struct caps *c, enum caps_action a, char *buf, size_t n);

/* "CAP_SYS_PTRACE" for 19; "CAP_<n>" for numbers it does not name. */
const char *caps_name(unsigned cap, char *buf, size_t n);

#endif

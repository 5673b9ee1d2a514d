/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h - the standalone policy file of the node agent: one versioned
 * structure, loaded and validated in one place (docs/policy.md).
 *
 * Owns: the file format, its limits and error messages, and classifying a
 * process by its cgroup, executable and `gpuqos run` class. Does not own:
 * watching or reloading the file, reading /proc, nor the Kubernetes side
 * (there a pod's annotation decides the class; only its default for pods
 * without a valid annotation is read here).
 */
#ifndef GPUQOS_AGENT_CONFIG_H
#define GPUQOS_AGENT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "agent/core/memory.h"
#include "agent/core/policy.h"

#define CONFIG_VERSION 1

enum config_match {
	MATCH_CGROUP = 1, /* pattern against the cgroup v2 path */
	MATCH_EXE = 2,    /* pattern against /proc/<pid>/exe */
};

/* fnmatch(3) glob, flags 0: `*` also matches `/`. */
struct config_rule {
	enum config_match kind;
	char pattern[256];
	enum qos_class cls;
};

#define CONFIG_MAX_RULES 64

/* Limits of the agent's own timings (ms). */
#define AGENT_CONTROL_DEADLINE_MIN_MS 1u
#define AGENT_CONTROL_DEADLINE_MAX_MS 60000u
#define AGENT_RECONCILE_INTERVAL_MIN_MS 10u
#define AGENT_RECONCILE_INTERVAL_MAX_MS 60000u
/* verifyIntervalS: 0 turns the read-backs off; at most a day. */
#define AGENT_VERIFY_INTERVAL_MAX_S 86400u

/* Which control path carries an action (docs/policy.md, "controlPath"):
 * auto lets path.c choose; agent and direct force one. */
enum path_mode {
	PATH_MODE_AUTO = 0,
	PATH_MODE_IN_PROCESS = 1,
	PATH_MODE_DIRECT = 2,
};

/* The actions a path is chosen for. GET_TIMESLICE goes with timeslice. */
enum path_action {
	ACTION_TIMESLICE = 0,
	ACTION_INTERLEAVE = 1,
	ACTION_PREEMPT = 2,
	NACTIONS = 3,
};

/* Largest policy file read; a real one is a few KiB. */
#define CONFIG_MAX_BYTES (1024 * 1024)

struct agent_config {
	int version;
	enum qos_class default_class;
	int trust_run_class; /* believe GPUQOS_RUN_CLASS recorded by `gpuqos run` */
	struct config_rule rules[CONFIG_MAX_RULES];
	size_t nrules;
	struct policy_config policy;
	uint32_t control_deadline_ms;   /* one RM control, any path */
	uint32_t reconcile_interval_ms; /* full reconcile pass */
	uint32_t verify_interval_s;     /* read a managed TSG back this often; 0: never */
	enum path_mode control_path[NACTIONS]; /* by enum path_action */
	/* Kubernetes mode: the class of a GPU pod without a valid gpu.qos
	 * annotation ("kubernetes": {"defaultClass": ...}). */
	enum qos_class k8s_default_class;
	/* Video-memory budgets ("memory", docs/policy.md "Memory"). */
	struct mem_config memory;
	char path[4096];                /* where it was loaded from; "" if parsed */
};

/* Everything the file may leave out; zeroes the whole struct first. */
void config_defaults(struct agent_config *c);

/* The policy file at path, whose len bytes of text (NUL after them) its
 * reader (agent/io/configfile.c) read: 0 on success. On any error: -1, err
 * holds one sentence naming the file, the field and what is wrong, and
 * *out is left untouched. */
int config_parse_file(const char *path, const char *text, size_t len, struct agent_config *out,
		      char *err, size_t errlen);

/* The same from a NUL-terminated text; errors name "policy text". */
int config_parse(const char *json_text, struct agent_config *out, char *err, size_t errlen);

/* Where a process's class came from (ctl's and the annotations'
 * classSource). */
enum class_source {
	CLS_SRC_DEFAULT = 0,    /* "default": nothing else decided */
	CLS_SRC_OVERRIDE,       /* "override": gpuqosctl set-class */
	CLS_SRC_GPUQOS_RUN,     /* "gpuqos-run": GPUQOS_RUN_CLASS, trusted */
	CLS_SRC_RULE,           /* "rule": a rule of the policy file */
	CLS_SRC_ANNOTATION,     /* "annotation": its pod's gpu.qos */
	CLS_SRC_NO_POD,         /* "no-pod": Kubernetes mode, in no pod */
	CLS_SRC_POD_UNKNOWN,    /* "pod-unknown": its pod is not known (yet) */
};
const char *class_source_name(enum class_source s);

/* The class of a process: the `gpuqos run` class if trusted and valid, else
 * the first matching rule, else the default. cgroup, exe and run_class may
 * be NULL (unknown). *source (if source) becomes CLS_SRC_GPUQOS_RUN,
 * CLS_SRC_RULE or CLS_SRC_DEFAULT. */
enum qos_class config_classify(const struct agent_config *c, const char *cgroup, const char *exe,
				 const char *run_class, enum class_source *source);

/* "auto", "in-process", "direct"; "timeslice", "interleave", "preempt". */
const char *path_mode_name(enum path_mode m);
const char *action_name(enum path_action a);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent.h - the node agent's state: processes, preempt-agent peers, TSGs,
 * in-flight commands, ctl connections, counters. Each subsystem file owns
 * the functions over one of these; this header only declares them.
 *
 * Desired state (class, policy output) and observed state (what the
 * eBPF tracker saw RM accept, what the preempt agent reports, and what
 * direct controls set) are kept apart in struct tsg; so are the two control paths' bookkeeping
 * (struct peer for the preempt agent, struct direct for the direct path).
 */
#ifndef GPUQOS_AGENT_AGENT_H
#define GPUQOS_AGENT_AGENT_H

#include <stdint.h>
#include <sys/types.h>

#include "abi/gq_proto.h"
#include "agent/caps.h"
#include "agent/config.h"
#include "agent/direct.h"
#include "agent/loop.h"
#include "agent/path.h"
#include "agent/policy.h"
#include "agent/tracker.h"

#define GQ_AGENT_VERSION "0.1.0"
#define GQ_DEFAULT_CTL_SOCKET "/run/gpuqos/ctl.sock"
#define GQ_DEFAULT_STATE_DIR "/run/gpuqos"
#define GQ_DEFAULT_NVIDIACTL "/dev/nvidiactl"

#define GQ_CMDS_PER_TICK 16       /* per peer: rate limit of reconcile */
#define GQ_DIRECT_PER_TICK 16     /* direct path, all processes together */
#define GQ_BACKOFF_MIN_MS 100u
#define GQ_BACKOFF_MAX_MS 10000u
/* P reconnects with backoff up to 2 s plus jitter (docs/protocol.md). */
#define GQ_RESTART_GRACE_MS 3000u
#define GQ_IL_NONE (-2)           /* no refused interleave level recorded */

struct peer;
struct ctl_conn;
struct kmode;

/* One host process that ever talked to us, kept across reconnects so a
 * class survives a dropped connection. */
struct proc {
	struct proc *next;
	pid_t pid;
	uint64_t starttime; /* /proc/<pid>/stat field 22: detects pid reuse */
	char comm[GQ_COMM_LEN + 1];
	char exe[1024];
	char cgroup[1024];
	char run_class[64]; /* GPUQOS_RUN_CLASS from its environment, or "" */
	enum gq_class cls;
	/* standalone: "override" | "gpuqos-run" | "rule" | "default";
	 * Kubernetes: "override" | "annotation" | "default" | "no-pod" |
	 * "pod-unknown" (kubemode.c) */
	const char *cls_source;
	struct peer *peer;      /* NULL while disconnected */
	/* From /proc/<pid>/cgroup (agent/kubenode/cgroup.h): "" when the
	 * process is in no pod. */
	char pod_uid[40];
	char container_id[72];
	int nopod_logged; /* "not in a pod" said once */
};

struct peer {
	struct peer *next;
	struct loop_watch w;
	pid_t pid; /* SO_PEERCRED: the only identity we trust */
	struct proc *proc;
	int hello;       /* HELLO seen on this connection */
	int syncing;     /* between HELLO and SYNCED */
	uint32_t gen;    /* sync generation of this connection's HELLO */
	int stalled;     /* a command missed its deadline */
	int broken;      /* a send failed: closed after this batch */
	uint32_t send_seq;
	unsigned sent_this_tick;
	int policy_valid; /* policy_gr/copy were sent */
	uint32_t policy_gr, policy_copy;
};

struct tsg {
	struct tsg *next;
	pid_t pid;
	rm_handle h_client, h_tsg, h_device;
	uint32_t gpu, engine, fd;
	uint32_t gen; /* sync generation of its last report */
	unsigned sources; /* GQ_SRC_*: who saw it; freed when none does */
	/* A preempt agent's report the tracker has not confirmed: held
	 * (never controlled) until then, refused after it (now_us clock). */
	uint64_t unverified_until;
	/* observed: what the tracker saw RM accept (the authority when it
	 * runs), what the preempt agent reports, or what a direct control set
	 * (the preempt agent does not see those) */
	uint32_t applied_ts, app_ts, applied_il; /* GQ_UNKNOWN if unknown */
	uint32_t rep_ts, rep_il; /* the preempt agent's last report of them */
	/* desired, from the last reconcile */
	uint32_t desired_ts;
	int32_t desired_il;
	const char *reason;
	/* control */
	enum gq_path last_path; /* path of the last control, GQ_PATH_NONE before */
	enum gq_path action_path[GQ_NACTIONS]; /* ... of the last one per action */
	const char *blocked;    /* why no path can carry its next control, or NULL */
	int blocked_stalled;    /* ... because a path is stalled */
	unsigned inflight;
	uint64_t backoff_until;
	uint32_t backoff_ms;
	int32_t il_refused; /* level refused for lack of CAP_SYS_NICE, or GQ_IL_NONE */
	int has_last;
	uint32_t last_op, last_status, last_errno;
	int last_timeout, last_failed;
	uint64_t last_elapsed_us;
	char error[128];
};

struct cmd {
	struct cmd *next;
	uint32_t seq;
	enum gq_path path;
	struct peer *peer; /* agent path only */
	pid_t pid;
	rm_handle h_client, h_tsg;
	uint32_t op;
	uint64_t arg;
	uint64_t deadline; /* now_us() clock */
	int timed_out;     /* kept to recognise a late RESULT */
	struct ctl_conn *ctl; /* waiting ctl request, or NULL */
};

struct counters {
	uint64_t peers_accepted, malformed, refused_tsg, unknown_result, unknown_tsg_gone;
	uint64_t commands, results, failures, timeouts, config_reloads, config_errors;
};

struct options {
	int standalone;
	const char *node_name;     /* Kubernetes mode: spec.nodeName of our pods */
	const char *kubeconfig;    /* NULL: in-cluster */
	const char *podres_socket; /* NULL: the kubelet's default */
	const char *sa_dir;        /* in-cluster service-account folder (tests) */
	const char *config;
	const char *socket;
	const char *ctl_socket;
	const char *state_dir;
	const char *nvidiactl;
	enum tracker_setting bpf;
	const char *bpf_pin_dir; /* NULL: the tracer's default */
};

struct agent {
	struct loop loop;
	struct options opt;
	char nvidiactl[4096]; /* canonical path a reported fd must point to */
	char state_path[4096];
	struct gq_config *cfg;
	struct loop_watch sig_w, tick_w, wake_w, listen_w, ctl_w;
	struct proc *procs;
	struct peer *peers, *dead_peers;
	struct tsg *tsgs;
	struct cmd *cmds;
	struct ctl_conn *ctls, *dead_ctls;
	struct state_entry *overrides;
	struct state_entry *expected; /* peers from before a restart, not back yet */
	int exiting;
	uint32_t next_seq, next_gen;
	int dirty; /* something changed: reconcile after this batch */
	uint64_t started_us;
	struct counters n;
	struct caps caps;       /* effective set at start (caps.h) */
	struct direct *direct;  /* NULL when the direct path is off */
	struct loop_watch direct_w;
	char direct_off[160];   /* why it is off, or "" */
	unsigned direct_sent_this_tick;
	struct tracker trk;     /* the eBPF tracker (tracker.h) */
	struct kmode *kube;     /* Kubernetes mode (kubemode.h), NULL standalone */
};

/* procinfo.c */
struct procinfo {
	uint64_t starttime;
	char comm[GQ_COMM_LEN + 1];
	char exe[1024];
	char cgroup[1024];
	char run_class[64];
	char pod_uid[40];      /* "" when in no pod */
	char container_id[72]; /* "" when not in a container */
};
int procinfo_starttime(pid_t pid, uint64_t *starttime);
int procinfo_read(pid_t pid, struct procinfo *pi);
int procinfo_fd_is(pid_t pid, uint32_t fd, const char *path);

/* tsg.c: processes and TSGs */
struct proc *proc_find(struct agent *a, pid_t pid);
struct proc *proc_attach(struct agent *a, pid_t pid, const struct procinfo *pi);
void proc_classify(struct agent *a, struct proc *p);
void proc_reclassify_all(struct agent *a);
void proc_gc(struct agent *a);
struct tsg *tsg_find(struct agent *a, pid_t pid, rm_handle h_client, rm_handle h_tsg);
struct tsg *tsg_new(struct agent *a, pid_t pid, rm_handle h_client, rm_handle h_tsg);
struct tsg *tsg_upsert(struct agent *a, pid_t pid, const struct gq_tsg *m, uint32_t gen);
void tsg_drop(struct agent *a, struct tsg *t);
void tsg_drop_pid(struct agent *a, pid_t pid, int keep_gen, uint32_t gen, unsigned sources);
size_t tsg_count(const struct agent *a, pid_t pid); /* pid 0: all */
uint32_t tsg_baseline(const struct tsg *t);
uint32_t tsg_effective_ts(const struct tsg *t);
int tsg_ts_differs(const struct tsg *t);
uint32_t tsg_effective_il(const struct tsg *t);
int tsg_il_differs(const struct tsg *t);
const char *tsg_state(const struct agent *a, const struct tsg *t);
void proc_free_all(struct agent *a);

/* peer.c */
int mkdir_parents(const char *path, mode_t mode);
int unix_listen(const char *path, int type, mode_t mode);
int peer_listen(struct agent *a);
int peer_send_command(struct agent *a, struct peer *p, struct cmd *c);
int peer_send_policy(struct agent *a, struct peer *p, uint32_t gr, uint32_t copy);
void peer_close(struct agent *a, struct peer *p, const char *why);
void peer_close_broken(struct agent *a);
void peer_reap(struct agent *a);
void peer_free_all(struct agent *a);

/* cmd.c: in-flight commands (both paths) and their deadlines */
struct cmd *cmd_issue(struct agent *a, struct tsg *t, enum gq_path path, uint32_t op, uint64_t arg,
		      struct ctl_conn *ctl);
void cmd_result(struct agent *a, struct peer *p, const struct gq_result *r);
void cmd_direct_result(struct agent *a, const struct direct_res *r);
void cmd_expire(struct agent *a);
void cmd_fail_peer(struct agent *a, struct peer *p);
void cmd_detach_ctl(struct agent *a, struct ctl_conn *c);
uint64_t cmd_next_deadline(const struct agent *a);
void cmd_free_all(struct agent *a);
const char *gq_op_name(uint32_t op);

/* reconcile.c */
void reconcile(struct agent *a);
void reconcile_tick(struct agent *a);
/* The path that would carry action act on t now (path.c decides). */
struct path_choice tsg_path(struct agent *a, const struct tsg *t, enum gq_action act);
/* The POLICY values (timeslices for TSGs it creates next) of peer p. */
void reconcile_peer_policy(struct agent *a, const struct peer *p, uint32_t *gr, uint32_t *copy);
int wake_init(struct agent *a);
void wake_rearm(struct agent *a);
void tick_rearm(struct agent *a);

/* ctl.c */
int ctl_listen(struct agent *a);
/* A command issued for a ctl request finished (or timed out: err_word
 * "timeout"); why is the failure in words, or NULL. */
void ctl_cmd_done(struct agent *a, struct ctl_conn *c, struct cmd *cmd, uint32_t rm_status,
		  uint32_t err, const char *err_word, uint64_t value, uint64_t elapsed_ns,
		  const char *why);
void ctl_reap(struct agent *a);
void ctl_free_all(struct agent *a);

/* state.c: run-time class overrides, persisted */
struct state_entry {
	struct state_entry *next;
	pid_t pid;
	uint64_t starttime;
	enum gq_class cls;
};
int state_load(struct agent *a);
const struct state_entry *state_find(const struct agent *a, pid_t pid, uint64_t starttime);
int state_set(struct agent *a, pid_t pid, uint64_t starttime, int remove, enum gq_class cls);
void state_gc(struct agent *a);
int state_save(const struct agent *a);
void state_peer_synced(struct agent *a, pid_t pid);
int state_holding(struct agent *a, uint64_t now);
void state_free_all(struct agent *a);

#endif

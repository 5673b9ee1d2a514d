/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core.h - the node agent's model, the one header a core file (agent/core/)
 * includes: processes, preempt-agent peers as the model sees them, TSGs,
 * in-flight commands, overrides, counters, limits, the hooks the core
 * calls instead of naming an adapter (struct agent_hooks), and the core's
 * functions. Nothing here names a file descriptor, a thread or the event
 * loop: the adapters (agent/io/) keep those in struct agent_io (io.h).
 *
 * Desired state (class, policy output) and observed state (what the
 * eBPF tracker saw RM accept, what the preempt agent reports, and what
 * direct controls set) are kept apart in struct tsg; so are the two control
 * paths' bookkeeping (struct peer for the preempt agent, the direct path's
 * jobs behind agent_hooks.submit_direct).
 */
#ifndef GPUQOS_AGENT_CORE_CORE_H
#define GPUQOS_AGENT_CORE_CORE_H

#include <stdint.h>
#include <sys/types.h>

#include "abi/gq_proto.h"
#include "agent/core/caps.h"
#include "agent/core/config.h"
#include "agent/core/memory.h"
#include "agent/core/path.h"
#include "agent/core/policy.h"
#include "common/log.h"

/* The core's clock: CLOCK_MONOTONIC in microseconds, the clock of every
 * deadline (clock.c). The wiring installs the loop's now_us() before any
 * core call; the core's unit tests install a fake one. */
uint64_t core_now_us(void);
void core_clock_install(uint64_t (*now_us)(void));

#define AGENT_CMDS_PER_TICK 16       /* per peer: rate limit of reconcile */
#define AGENT_DIRECT_PER_TICK 16     /* direct path, all processes together */
#define AGENT_BACKOFF_MIN_MS 100u
#define AGENT_BACKOFF_MAX_MS 10000u
/* P reconnects with backoff up to 2 s plus jitter (docs/protocol.md). */
#define AGENT_RESTART_GRACE_MS 3000u
/* A TSG we set is read back this long after (then every verifyIntervalS):
 * past libcuda's own SET, which follows the TSG's creation by ~70 ms. */
#define AGENT_VERIFY_SETTLE_MS 1000u
/* A lease's end as the agent counts it: the preempt agent starts its lease
 * when the command arrives and enables a lapsed TSG within one 20 ms retry. */
#define AGENT_GATE_LAPSE_SLACK_US 20000u
/* Renewals answered done while the RM held the TSG's channels enabled
 * before its preempt agent's word on gates is no longer taken (cmd.c). */
#define GATE_UNMADE_MAX 2u
/* Where a TSG was seen (struct tsg.sources). */
#define TSG_SRC_BPF 0x1u   /* the eBPF tracer: RM accepted the allocation */
#define TSG_SRC_PREEMPT 0x2u /* the process's injected preempt agent reported it */
#define TSG_SRC_ALL (TSG_SRC_BPF | TSG_SRC_PREEMPT)

/* A preempt agent reports a TSG after its ioctl returned, and the tracer
 * sent its event before that return, so the kernel's word is normally
 * there first; the grace only covers the two arriving in either order
 * within one loop pass and a slow ring wake-up. */
#define TRACKER_CLAIM_GRACE_MS 1000u
#define IL_REFUSED_NONE (-2)           /* no refused interleave level recorded */
/* A TSG whose timeslice or interleave level someone sets back after a SET
 * of ours took (docs/policy.md, "A process that sets its timeslice back"): the first
 * AGENT_REVERT_FREE such reverts are answered at once (libcuda's own SET
 * after creating a TSG is one); each later one waits before the next SET,
 * AGENT_REVERT_BACKOFF_MIN_MS doubling to AGENT_REVERT_BACKOFF_MAX_MS. A
 * value that held for AGENT_REVERT_QUIET_MS forgets the earlier ones. */
#define AGENT_REVERT_FREE 3u
#define AGENT_REVERT_BACKOFF_MIN_MS 1000u
#define AGENT_REVERT_BACKOFF_MAX_MS 60000u
#define AGENT_REVERT_QUIET_MS 10000u

/* Limits on what one local user can make the agent hold (docs/protocol.md,
 * "Limits"). A CUDA context has 4 TSGs; a process rarely more than a few
 * contexts. Claims are TSGs a preempt agent reported; the tracker's TSGs
 * (RM allocated them) count only toward the total. */
#define AGENT_CLAIMS_PER_PROC 256u
#define AGENT_CLAIMS_PER_UID 1024u
#define AGENT_TSGS_MAX 8192u
/* Buckets of the process and TSG tables (tsg.c: found by pid, and by pid
 * and handles, without a walk of every one). */
#define AGENT_HASH_BUCKETS 1024u
/* Connected preempt agents: each holds one fd of the agent. The total is
 * further held below the fd limit (RLIMIT_NOFILE) minus AGENT_FD_RESERVE.
 * A key is a pod in Kubernetes mode (a process in no pod: its uid), a uid
 * standalone; of each limit an eighth is kept for LCs (peer.c). A refused
 * one is told to wait AGENT_REFUSED_RETRY_MS at least (GQ_REFUSED). */
#define AGENT_PEERS_PER_KEY 256u
/* Pods whose facts the core holds (pod.c), in AGENT_POD_BUCKETS chains. */
#define AGENT_PODS_MAX 16384u
#define AGENT_POD_BUCKETS 4096u
#define AGENT_REFUSED_RETRY_MS 1000u
#define AGENT_PEERS_MAX 768u
#define AGENT_FD_RESERVE 128u
/* Log lines a process can cause: AGENT_PROC_LOG_BURST per window, then
 * counted and reported as suppressed. */
#define AGENT_PROC_LOG_BURST 20u
#define AGENT_PROC_LOG_WINDOW_MS 10000u
/* Controls (SET_TIMESLICE, SET_INTERLEAVE, GATE, UNGATE) reconcile sends
 * for one TSG: at most AGENT_CONTROLS_BURST at once and
 * AGENT_CONTROLS_PER_S a second after, whatever any preempt agent reports
 * (docs/policy.md, "Rotation"). A rotation with short turns or leases
 * raises the rate to what it needs (reconcile.c, controls_per_s). */
#define AGENT_CONTROLS_PER_S 10u
#define AGENT_CONTROLS_BURST 8u

/* Log lines rate-limited per window (tsg.c). */
struct ratelimit {
	uint64_t window_start; /* now_us() clock */
	unsigned lines;
	unsigned long suppressed;
};

/* How many preempt agents and claims one uid has (peer.c, tsg.c). */
struct uid_use {
	struct uid_use *next;
	uid_t uid;
	unsigned peers, claims;
};

/* A preempt agent's report nobody has confirmed yet. With the eBPF
 * tracker, it waits for the kernel (struct tsg.unverified_until);
 * without it, for a GET_TIMESLICE on the claimed handles that RM answers
 * (docs/protocol.md, "Claims"). */
enum tsg_claim {
	TSG_CLAIM_CONFIRMED = 0, /* seen by the tracker, read back, or not a claim */
	TSG_CLAIM_READBACK = 1,  /* waits for a read-back */
	TSG_CLAIM_REFUSED = 2,   /* RM said the handles do not exist: never acted on */
};

struct agent;
struct rot_member;
struct peer;
struct ctl_conn;
struct kmode;

/* PHASE reports the windows' grid is taken from (phase.c). */
#define WINDOW_GRID_SAMPLES 3

/* Why an LC's windows were refused, or that they were given (window.c,
 * window_decide): what reconcile decided, recorded for the faces (ctl,
 * metrics, the pod's state) to render. The names are window_why_name's. */
enum window_why {
	WINDOW_GIVEN = 0,
	WINDOW_WHY_OFF,            /* windows off on the node, nothing asked */
	WINDOW_WHY_ASKED_OFF,      /* its own ask is "off" */
	WINDOW_WHY_UNVERIFIED,     /* no confirmed GR TSG: a claim counts for nobody */
	WINDOW_WHY_PERIOD_UNKNOWN, /* no fresh PHASE */
	WINDOW_WHY_PERIOD_UNSTABLE, /* its period moved and has not held PHASE_SETTLE_US */
	WINDOW_WHY_LAUNCH_BOUND,   /* no gaps to keep the BEs out of */
	WINDOW_WHY_SEVERAL_LC,     /* another LC with a fresh PHASE on its GPU */
	WINDOW_WHY_NO_SPAN,        /* "auto", and no span reported yet */
	WINDOW_WHY_CAP,            /* the window does not fit the cap of its period */
	WINDOW_WHY_NO_BE,          /* no BE beside it takes windows */
	WINDOW_WHY_NO_LC,          /* a BE: no single periodic LC beside it */
	WINDOW_WHY_LC_REFUSED,     /* a BE: the LC beside it has its windows refused */
	WINDOW_WHY_HELD,           /* a BE: its schedule moved and the control bound holds it */
};

/* One process's window decision at the last reconcile (window.c). An LC:
 * the rule it is under (its own ask or the node's), the after given (us,
 * 0 when refused), the cap that applied and why it was refused. A BE:
 * given is its preempt agent's schedule (struct peer.win), lc_pid the LC
 * it is placed around or whose refusal it shares. */
struct window_decision {
	int decided;         /* 0: no decision (neither an LC nor a BE with GR work) */
	enum window_ask ask; /* WINDOW_ASK_OFF, _AUTO or _US: the rule applied */
	int own;             /* the rule is its own ask, not the node's default */
	uint32_t ask_us;     /* WINDOW_ASK_US: the after asked for */
	uint32_t after_us;   /* given: past each due time; 0: refused */
	uint32_t before_us;
	uint32_t cap_percent; /* of its period a window may take */
	uint64_t period_ns;   /* the period decided on (0: none) */
	uint32_t gpu;
	unsigned bes;        /* an LC: BE processes given its windows */
	pid_t lc_pid;        /* a BE: its LC (0: none) */
	enum window_why why;
	/* What was last logged (window.c logs a change once, not per pass). */
	int logged;
	enum window_why logged_why;
	uint32_t logged_after_us;
};

/* One host process that ever talked to us, kept across reconnects so a
 * class survives a dropped connection. */
struct proc {
	struct proc *next;
	struct proc *hnext; /* its bucket of struct agent.proc_hash */
	unsigned ntsgs;     /* TSGs of it in a->tsgs (tsg_new, tsg_free) */
	pid_t pid;
	uint64_t starttime; /* /proc/<pid>/stat field 22: detects pid reuse */
	char comm[GQ_COMM_LEN + 1];
	char exe[1024];
	char cgroup[1024];
	char run_class[64]; /* GPUQOS_RUN_CLASS from its environment, or "" */
	enum qos_class cls;
	/* standalone: "override" | "gpuqos-run" | "rule" | "default";
	 * Kubernetes: "override" | "annotation" | "default" | "no-pod" |
	 * "pod-unknown" (kube_mode.c) */
	enum class_source cls_source;
	struct peer *peer;      /* NULL while disconnected */
	/* From /proc/<pid>/cgroup (agent/kubenode/cgroup.h): "" when the
	 * process is in no pod. */
	char pod_uid[40];
	char container_id[72];
	int nopod_logged; /* "not in a pod" said once */
	struct uid_use *uid; /* of its preempt agent (SO_PEERCRED); NULL if none connected */
	unsigned claims;     /* its TSGs a preempt agent reported */
	struct ratelimit log; /* lines it causes (proc_log) */
	/* reconcile.c, during one pass: the timeslice its counted TSGs want,
	 * per engine kind (GQ_UNKNOWN: none; 0: they disagree), and the GPU
	 * of its confirmed TSGs (GQ_UNKNOWN: none; RECONCILE_GPUS_SEVERAL). */
	uint32_t own_gr, own_copy, own_gpu;
	/* reconcile.c, during one pass: one of its counted GR TSGs is an LC
	 * beside a BE with a wake configured (policy want.wake). */
	int own_wake;
	/* lcbusy.c: its launches, from its preempt agent's ACTIVITY. */
	struct {
		int have_base; /* the counters below hold a report */
		uint64_t base_launches, base_active_ns, base_at_ns; /* library's clock */
		uint64_t heard_us;     /* last report, now_us() clock; 0: none */
		double percent;        /* smoothed launch-active share; < 0: unknown */
		double launches_per_s; /* smoothed; < 0: unknown */
		int always;            /* an LC at or above busyLcPercent: launch-bound */
	} busy;
	/* peer.c: its preempt agent's latest WAKE (how its wakes went). */
	struct {
		int have; /* the fields below hold a report */
		int stopped;
		uint64_t requests, wakes, hits, wasted, beaten, not_issued, stops;
		uint64_t at_ns; /* library's clock */
	} wake;
	/* peer.c: its preempt agent's latest PHASE (when its requests come);
	 * rotate.c changes a turn between two of them. */
	struct {
		int have;
		uint64_t period_us, last_start_us; /* now_us() clock */
		uint64_t period_ns;                /* as reported */
		uint32_t span_us;                  /* its requests' span; 0: none reported */
		uint64_t rx_us;                    /* now_us() when it came */
	} phase;
	/* phase.c: the grid its requests are due on, as the windows place
	 * them: the latest starts of its last PHASE reports (newest first),
	 * the period they were taken at, the PHASE last taken in, and a start
	 * on the grid. */
	struct {
		uint64_t starts_us[WINDOW_GRID_SAMPLES];
		unsigned n;
		uint64_t period_ns, rx_us, anchor_us;
		/* A period over 1 % off the grid's, reported since `since_us`
		 * (every report within 1 % of it): it replaces the grid's only
		 * once it held PHASE_SETTLE_US (0: none pending). */
		uint64_t pending_ns, pending_since_us;
	} grid;
	/* window.c: what reconcile decided of its windows, and the limit on
	 * its window lines (WINDOW_LOG_BURST per AGENT_PROC_LOG_WINDOW_MS,
	 * apart from its other lines: a neighbour that moves its windows
	 * cannot silence what it causes itself). */
	struct window_decision win;
	struct ratelimit win_log;
	/* window.c: with windows.afterUs "auto", the after its windows use
	 * now (us; 0: none yet), and since when a shorter one was asked
	 * (0: not) with the longest of those. */
	uint32_t window_auto_us, window_shrink_us;
	uint64_t window_shrink_since_us;
	/* Its own ask for windows (window.c): from its pod's
	 * gpuqos.io/windows (kube_mode.c); standalone, GPUQOS_RUN_WINDOWS
	 * from its environment as it came ("": none), believed as its
	 * GPUQOS_RUN_CLASS is (trustRunClass). */
	struct window_req win_ask;
	char run_windows[16];
	/* rotate.c: its place in the rotation of each runlist where it had
	 * rotating TSGs (freed with it). */
	struct rot_member *rot;
	/* memory.c: what it holds and may hold per GPU. */
	struct proc_mem mem;
};

/* A BE's window schedule (window.c). */
struct peer_window {
	int on;
	uint32_t gpu;
	uint64_t period_ns;
	uint64_t start_us; /* now_us() clock */
	uint32_t before_us, after_us;
	pid_t lc_pid;     /* whose requests it is placed around */
	uint64_t sent_us; /* when it was last sent or renewed */
	/* When it last started or moved (a grid, period or length the
	 * preempt agent had not run): a move waits WINDOW_MOVE_MIN_US. */
	uint64_t moved_us;
};

/* A connected preempt agent as the model sees it; its socket and watch
 * are peer.c's (struct peer_conn around it). */
struct peer {
	struct peer *next;
	pid_t pid; /* SO_PEERCRED: the only identity we trust */
	struct proc *proc;
	int hello;       /* HELLO seen on this connection */
	int syncing;     /* between HELLO and SYNCED */
	uint32_t gen;    /* sync generation of this connection's HELLO */
	int stalled;     /* a command missed its deadline */
	int broken;      /* a send failed: closed after this batch */
	uint32_t send_seq;
	unsigned sent_this_tick;
	int policy_valid; /* policy_gr/copy/wake were sent */
	uint32_t policy_gr, policy_copy;
	uint32_t policy_wake; /* GQ_WAKE_WORD, 0: none */
	int can_gate; /* its HELLO said GQ_HELLO_F_GATE */
	int wake_stats; /* its HELLO said GQ_HELLO_F_WAKE_STATS */
	int activity;   /* its HELLO said GQ_HELLO_F_ACTIVITY */
	int phase;      /* its HELLO said GQ_HELLO_F_PHASE */
	int can_window; /* its HELLO said GQ_HELLO_F_WINDOW */
	int span;       /* its HELLO said GQ_HELLO_F_SPAN */
	/* window.c: the schedule last sent to it (on 0: none, or ended). */
	struct peer_window win;
	int window_state; /* its HELLO said GQ_HELLO_F_WINDOW_STATE */
	int memory;       /* its HELLO said GQ_HELLO_F_MEMORY */
	/* Its latest WINDOW_STATE (known 0: none on this connection). */
	struct {
		int known, on, refused;
		uint64_t opened, skipped;
		uint64_t rx_us; /* when it came (now_us()) */
	} win_state;
	uint32_t accept_seq; /* accept order: the later of one process's wins */
	/* It took a lease page (LEASE_PAGE_STATE ON): renewals of its leases
	 * are stores there (hooks.renew_leases), not COMMANDs; the latest
	 * stored. */
	int lease_page;
	uint64_t lease_until_us;
};

/* What the RM was last told about a TSG, by anyone: what the tracker saw
 * the RM accept, what the preempt agent reports, or what our own controls
 * set. *_at is when it was told (now_us() clock; for our controls the time
 * they were sent): a report older than the belief never replaces it
 * (tsg_observe_ts). */
struct tsg_observed {
	uint32_t applied_ts, app_ts, applied_il; /* GQ_UNKNOWN if unknown */
	uint64_t ts_at, il_at;
};

/* What the last reconcile wants it set to, and why. */
struct tsg_wanted {
	uint32_t desired_ts;
	int32_t desired_il;
	const char *reason;
	int wake; /* an LC beside a BE whose process should wake it (policy) */
};

/* Our own controls on it: what was last sent, on which path, how it ended,
 * and what holds the next one back. */
struct tsg_sent {
	enum path last_path; /* path of the last control, PATH_NONE before */
	enum path action_path[NACTIONS]; /* ... of the last one per action */
	const char *blocked;    /* why no path can carry its next control, or NULL */
	int blocked_stalled;    /* ... because a path is stalled */
	unsigned inflight;
	uint32_t inflight_op; /* the op of the last command sent */
	/* A pass found it needing a control while one was in flight: its
	 * result calls for a pass, whatever it changed (cmd.c). */
	int waited;
	uint64_t backoff_until;
	uint32_t backoff_ms;
	int32_t il_refused; /* level refused for lack of CAP_SYS_NICE, or IL_REFUSED_NONE */
	int has_last;
	uint32_t last_op, last_status, last_errno;
	int last_timeout, last_failed;
	uint64_t last_elapsed_us;
	char error[128];
	/* The bound on controls sent for it (reconcile.c, control_allowed):
	 * the theoretical arrival time of the generic cell rate algorithm,
	 * and when a control held back by it may go (0: none held). */
	uint64_t bucket_tat, held_until;
};

/* Gating (rotate.c): whether the TSG takes turns with the other BEs of its
 * runlist, whether it should be gated now, and what its preempt agent
 * reported (the flags of its last TSG report, or a RESULT since). */
struct tsg_gate {
	int rotate;             /* the last reconcile put it in a rotation */
	int want;               /* it should be gated now */
	/* Its preempt agent says its channels are disabled (`said`); `gated`
	 * follows that word only while the RM holds off every channel the
	 * eBPF tracker saw under it (struct tsg_kchans, tsg_gate_note). */
	int said;
	int gated;
	int no_gate;            /* its preempt agent cannot gate it (or has not said) */
	/* GATEs its preempt agent answered done, the TSG already said gated,
	 * while the RM held a channel the tracker saw under it enabled (reset
	 * by one answered with every channel off); at GATE_UNMADE_MAX its
	 * word is not taken again: `unmade` set, it leaves every rotation for
	 * good (rotate_gateable). */
	unsigned unmade_run;
	int unmade;
	int leased;             /* its preempt agent holds a rotation lease on it */
	/* A GATE was sent since the last UNGATE: the UNGATE that ends it
	 * skips the control bound (tsg_control_allowed); one more does not. */
	int ungate_owed;
	/* When `rotate` last changed (now_us(); 0: never): it enters a
	 * rotation again only rotate_dwell_us() later (reconcile.c), whatever
	 * its neighbours or its own preempt agent report meanwhile. */
	uint64_t rotate_since;
	int change_held; /* its entry into a rotation waits for the dwell */
	/* Its process's place in the rotation (rotate.c), set by every
	 * rotate_plan; NULL while it does not rotate. */
	struct rot_member *member;
	uint64_t last_turn;     /* when its process's last turn began (rotate.c) */
	uint64_t renewed;       /* when the last GATE (or renewal) was sent */
	/* When its preempt agent ends the gate by itself at the latest: the
	 * last lease-bearing command's send time, plus its lease, plus
	 * AGENT_GATE_LAPSE_SLACK_US (0: no lease sent). */
	uint64_t lapse_by;
	/* How long it has been held off, from its preempt agent's word
	 * (tsg_gate_note): in a rotation of n BEs, n - 1 turns at a time. */
	uint64_t since;         /* now_us() when it was last said gated; 0: not gated */
	uint64_t count;         /* times it became gated */
	uint64_t total_us;      /* time gated, closed periods */
	uint64_t longest_us;    /* the longest closed period */
};

/* One process's place in the rotation of one runlist (rotate.c): all its
 * rotating TSGs there take one turn together. Kept in its struct proc
 * (freed with it), so leaving and coming back does not reset what it was
 * served. */
struct rot_member {
	struct rot_member *next;
	struct proc *proc;
	uint32_t gpu, engine;
	unsigned tsgs;        /* its rotating TSGs in the last rotate_plan; 0: out */
	int active;           /* in the rotation at the last rotate_plan */
	/* Its turns so far, as the agent planned them (us): the least served
	 * goes next; ties go to the one queued first (queued: a sequence
	 * number taken when it joined or its last turn ended). */
	uint64_t served_us, queued;
	uint64_t turn_start;  /* now_us(): when its turn began (0: not its turn) */
	/* Its turn was held past turn_start + the period until this moment, for
	 * the change to fit in an LC's gap between requests; 0: not held. */
	uint64_t turn_end;
	uint64_t last_turn;   /* when its last turn began */
	/* The longest time it waited between two turns of its own while in
	 * the rotation, the current wait included (the agent's plan). */
	uint64_t waiting_since, longest_wait_us;
};

/* The settings a process can set back behind the agent (tsg_revert_wait). */
enum tsg_setting { TSG_TIMESLICE, TSG_INTERLEAVE, TSG_NSETTINGS };

/* Reverts of one setting (tsg_revert_wait): the value and time of our
 * last SET the RM took (set_value GQ_UNKNOWN: none since the last
 * revert), the reverts since a value last held AGENT_REVERT_QUIET_MS, the
 * wait the next one beyond the free ones gets, and no SET before `until`. */
struct tsg_revert {
	uint32_t set_value, backoff_ms;
	uint64_t set_at, until, recent, total;
};

/* Where a TSG's settings stand, as ctl, annotations and metrics show it. */
enum tsg_state {
	TSG_CONVERGED = 0, /* what the policy wants is what the RM was last told */
	TSG_PENDING,       /* a control in flight, or a difference not sent yet */
	TSG_FAILED,        /* the last control failed, or no path can carry it */
	TSG_STALLED,       /* the only path for its next control is stalled */
	TSG_UNMANAGED,     /* its process's class is unmanaged */
	TSG_UNVERIFIED,    /* a claim nobody confirmed yet */
	TSG_REFUSED,       /* a claim the RM says does not exist */
};

/* What reconcile decided for a TSG and what the RM holds of it, recorded
 * at the end of every pass (record.c) for the faces (the pod's
 * gpuqos.io/state and Events, gpuqosctl, /metrics) to render: they never
 * ask the core's decision functions again. Compared whole (memcmp): a
 * record is built on zeroed memory. */
enum record_problem {
	RECORD_PROBLEM_NONE = 0,
	RECORD_PROBLEM_CAPABILITY, /* a capability is missing for its next control */
	RECORD_PROBLEM_REFUSED,    /* the RM refused its last control */
};
struct tsg_record {
	enum qos_class cls; /* its process's */
	enum class_source cls_source;
	uint32_t gpu;
	uint32_t ts;          /* the timeslice the RM holds, as last confirmed (tsg_effective_ts) */
	uint32_t ts_applied;  /* ... as told by anyone (GQ_UNKNOWN: nobody yet, the driver's default) */
	uint32_t ts_desired;  /* GQ_UNKNOWN: none */
	uint32_t il;          /* the interleave level the RM holds (tsg_effective_il) */
	uint32_t il_applied;  /* GQ_UNKNOWN: nobody set it yet */
	int32_t il_desired;   /* -1: the policy sets none */
	enum path path;       /* that carried (or, before any control, would carry) its timeslice */
	enum tsg_state state;
	int counted;          /* confirmed: counts for its neighbours */
	int rotating;
	/* Its process's: launch-bound, the wake lead its POLICY asked for,
	 * and its window decision (proc.win) as far as a face shows it. */
	int launch_bound;
	uint32_t wake_lead_us;
	int win_decided;
	enum window_why win_why;
	enum window_ask win_ask;
	uint32_t win_ask_us, win_after_us;
	enum record_problem problem;
	char problem_text[128]; /* tsg_sent.error at the time */
};

/* A record that changed in this batch, for the faces to publish (record.c):
 * a TSG (h_tsg != 0) whose record changed or that is gone, or a process
 * that came or went (h_tsg 0), with the pod it is in. */
struct record_change {
	pid_t pid;
	rm_handle h_client, h_tsg;
	int gone;
	char pod_uid[40];
};

/* Records changed since the faces last published, in the order they
 * changed, each once; past RECORD_CHANGES_MAX, `overflow` says every
 * record is to be taken as changed. */
#define RECORD_CHANGES_MAX 1024u
struct record_queue {
	struct record_change v[RECORD_CHANGES_MAX];
	size_t n;
	int overflow;
	uint64_t batch; /* a TSG is queued in this batch when its rec_queued is batch + 1 */
};

/* The channels the eBPF tracker saw allocated under a TSG (the first
 * TSG_KCHANS_MAX), and which of them the RM holds disabled: the
 * DISABLE_CHANNELS calls it saw the RM accept; after an agent restart,
 * from the tracer's pinned channel table. None known (no tracker, or
 * channels made before the tracer ran): a gate is its preempt agent's
 * word. */
#define TSG_KCHANS_MAX 8u
struct tsg_kchans {
	rm_handle h[TSG_KCHANS_MAX];
	unsigned n;
	uint32_t off; /* bit i: h[i] disabled */
};

struct tsg {
	struct tsg *next;
	struct tsg *hnext; /* its bucket of struct agent.tsg_hash */
	pid_t pid;
	struct proc *proc; /* its process: freed only after its TSGs */
	rm_handle h_client, h_tsg, h_device;
	uint32_t gpu, engine, fd;
	uint32_t gen; /* sync generation of its last report */
	unsigned sources; /* TSG_SRC_*: who saw it; freed when none does */
	/* A preempt agent's report the tracker has not confirmed: held
	 * (never controlled) until then, refused after it (now_us clock). */
	uint64_t unverified_until;
	enum tsg_claim claim;   /* without the tracker: see enum tsg_claim */
	int readback_direct_failed; /* the direct path could not read it back */
	struct uid_use *charged; /* the uid its claim counts for, or NULL */
	struct tsg_observed obs;
	struct tsg_wanted want;
	struct tsg_sent sent;
	struct tsg_gate gate;
	struct tsg_kchans kch;
	/* Read-backs that hold the belief against the RM (verifyIntervalS):
	 * when the next is due (now_us(); 0: none), when the last answered,
	 * and how many found the RM holding another value. */
	struct {
		uint64_t due, at, mismatches;
	} verify;
	struct tsg_revert revert[TSG_NSETTINGS];
	struct tsg_record rec; /* the last pass's record (record.c) */
	uint64_t rec_queued;   /* struct record_queue.batch + 1 while queued */
};

/* What a reconcile pass reads of a TSG that reports and results change
 * (tsg_inputs_of): an event that leaves it as it was (a lease renewal's
 * RESULT, the TSG report that repeats the state) needs no pass. */
struct tsg_inputs {
	rm_handle h_device;
	uint32_t gpu, engine, fd, gen, sources;
	uint32_t applied_ts, app_ts, applied_il;
	int said, gated, no_gate, leased;
	int claim, unverified, last_failed, has_error;
	int32_t il_refused;
	uint64_t backoff_until;
};

struct cmd {
	struct cmd *next;
	uint32_t seq;
	enum path path;
	struct peer *peer; /* in-process path only */
	pid_t pid;
	rm_handle h_client, h_tsg;
	uint32_t op;
	uint64_t arg;
	uint64_t sent;     /* now_us() clock: RM was told no earlier */
	uint64_t deadline; /* now_us() clock */
	int timed_out;     /* kept to recognise a late RESULT */
	struct ctl_conn *ctl; /* waiting ctl request, or NULL */
};

/* One finished control (or its end without an answer), from either path. */
struct cmd_outcome {
	uint32_t rm_status, err;
	uint64_t value, elapsed_ns;
	const char *why;      /* direct path: the failure in words, or NULL */
	const char *err_word; /* "timeout" when the deadline passed, else NULL */
};

/* What the core (tsg.c, cmd.c, reconcile.c, state.c) asks of the parts
 * above it. The wiring (hooks.c, hooks_install) installs them at start; the core never
 * calls an adapter by name, so it links without them (gpuqos_core). A NULL
 * hook is a part that is not there. */
struct agent_hooks {
	/* Send c on its path: a COMMAND to its peer, a job of the direct
	 * path. 0, or -1 with errno. */
	int (*submit_in_process)(struct agent *a, struct cmd *c);
	int (*submit_direct)(struct agent *a, const struct tsg *t, struct cmd *c);
	/* The direct path gives up c: 0 it was still queued (no result will
	 * come), 1 a worker is in it, -1 it just finished. */
	int (*expire_direct)(struct agent *a, const struct cmd *c);
	int (*direct_stalled)(const struct agent *a);
	/* A command a ctl request waits for ended. */
	void (*cmd_done)(struct agent *a, struct ctl_conn *ctl, struct cmd *c,
			 const struct cmd_outcome *o);
	int (*send_policy)(struct agent *a, struct peer *p, uint32_t gr, uint32_t copy,
			   uint32_t wake);
	/* Send p's preempt agent the budget of e (memory.c): a MEMORY
	 * with e->limit and e->total; 0, or -1. */
	int (*send_memory)(struct agent *a, struct peer *p, const struct mem_gpu *e);
	/* Process p was refused an allocation for the first time (memory.c):
	 * Kubernetes mode tells its pod. NULL: nobody to tell. */
	void (*mem_refused)(struct agent *a, struct proc *p, const struct mem_gpu *e);
	/* Every lease p holds from us runs until until_us (its lease page,
	 * docs/protocol.md "Lease page"); only for p->lease_page. */
	void (*renew_leases)(struct agent *a, struct peer *p, uint64_t until_us);
	/* Send p the schedule in p->win (window.c); 0, or -1. */
	int (*send_window)(struct agent *a, struct peer *p);
	/* The eBPF tracker runs: the kernel, not a read-back, confirms claims. */
	int (*kernel_confirms)(const struct agent *a);
	/* After every reconcile: re-arm timers (the faces publish the
	 * records after the batch, not here). */
	void (*after_reconcile)(struct agent *a);
	/* Every control that ended: its result, or its deadline passing
	 * (o->err_word "timeout"); t NULL when its TSG is gone (metrics). */
	void (*control_ended)(struct agent *a, const struct tsg *t, const struct cmd *c,
			      const struct cmd_outcome *o);
	/* Process pid still runs and started at starttime (/proc/<pid>/stat
	 * field 22): neither gone nor a reused pid. NULL: taken as running. */
	int (*proc_alive)(pid_t pid, uint64_t starttime);
	/* What state.json holds may have changed: written within
	 * AGENT_STATE_COALESCE_MS (statefile.c). NULL: nothing is persisted. */
	void (*on_state_changed)(struct agent *a);
	/* Write state.json now if its text changed: 0 when it holds the
	 * agent's state afterwards (set-class answers "persisted"). */
	int (*on_state_flush)(struct agent *a);
};

struct counters {
	uint64_t peers_accepted, malformed, refused_tsg, unknown_result, unknown_tsg_gone;
	uint64_t bad_activity; /* ACTIVITY reports ignored as inconsistent */
	uint64_t bad_wake;     /* WAKE reports ignored as inconsistent */
	uint64_t bad_phase;    /* PHASE reports ignored (unasked, out of range, another clock) */
	uint64_t turns;        /* rotation turns begun (rotate.c) */
	uint64_t turns_in_gap; /* ... of them, held until the change fit in an LC's gap */
	/* controls held back by the per-TSG bound (reconcile.c, AGENT_CONTROLS_PER_S) */
	uint64_t controls_held;
	/* entries of a TSG into a rotation held back by the dwell */
	uint64_t rotation_changes_held;
	uint64_t windows_sent;  /* WINDOW schedules sent or renewed (window.c) */
	uint64_t windows_ended; /* ... and ended by a WINDOW without its on flag */
	/* refused by a limit (AGENT_PEERS_*, AGENT_CLAIMS_*, AGENT_TSGS_MAX); claims RM
	 * said do not exist; log lines suppressed by the per-process limit */
	uint64_t peers_refused, claims_refused_limit, claims_refused_readback, log_suppressed;
	uint64_t commands, results, failures, timeouts, config_reloads, config_errors;
	uint64_t verify_reads, verify_mismatches; /* read-backs of the belief; RM disagreed */
	uint64_t reverts; /* settings set back by someone else after a SET of ours took */
	uint64_t bad_mem_usage; /* MEM_USAGE reports dropped (memory.c) */
	uint64_t memory_sent;   /* MEMORY budgets sent */
	uint64_t passes;        /* reconcile passes (reconcile.c) */
	uint64_t page_renewals; /* leases renewed through a lease page, not a COMMAND */
};


enum tracker_setting {
	TRACKER_AUTO = 0, /* use it when it can be opened, say why not otherwise */
	TRACKER_ON = 1,   /* refuse to start without it */
	TRACKER_OFF = 2,
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

/* The eBPF tracker's state as ctl and metrics read it (its functions and
 * its watch: agent/io/tracker.h, tracker.c). */
struct tsgtrace;
/* A channel the tracker saw allocated (and disabled or enabled since)
 * under a TSG the table did not hold yet: its process was still being
 * read. Applied when the TSG comes (so is the live channel table's
 * entry, read again with the TSG's). */
#define TRACKER_CHANS_PENDING 256u
struct tracker_chan {
	pid_t pid; /* 0: a free slot */
	rm_handle h_client, h_tsg, h_chan;
	int off;
};

struct tracker {
	struct tracker_chan pending[TRACKER_CHANS_PENDING];
	unsigned pending_next; /* the slot taken next when none is free */
	enum tracker_setting setting;
	const char *pin_dir;   /* as configured; NULL: the library's default */
	struct tsgtrace *tt;   /* NULL while off */
	char off[384];         /* why it is off, or "" */
	unsigned inherited;    /* TSGTRACE_INHERITED_* of the open */
	uint64_t events;       /* events consumed */
	uint64_t refused_claims;
	uint64_t ignored;      /* TSGs on another device than the control device */
};

struct agent_io;
struct state_file;

/* Where classes come from: the policy file's rules (standalone), or each
 * process's pod (Kubernetes), whose facts the adapter pushes in (pod.c). */
enum agent_mode { AGENT_MODE_STANDALONE, AGENT_MODE_KUBE };

/* What a pod's annotations say, parsed once when the pod changes
 * (kube_mode.c) and pushed in with pod_set. */
struct pod_facts {
	enum qos_class cls;           /* gpu.qos, or the node's default class */
	enum class_source cls_source; /* CLS_SRC_ANNOTATION or CLS_SRC_DEFAULT */
	int cls_invalid;              /* gpu.qos there but no class, or annotations not a map */
	struct window_req windows;    /* gpuqos.io/windows (WINDOW_ASK_NONE: none or invalid) */
	int windows_invalid;
	uint64_t memory;              /* gpuqos.io/gpu-memory, bytes per GPU (0: none or invalid) */
	int memory_invalid;
};

struct pod_entry;
struct pod_table {
	struct pod_entry *bucket[AGENT_POD_BUCKETS];
	size_t n;
};

struct agent {
	struct agent_io *io;   /* the adapters' fds, watches and timers (io.h) */
	struct options opt;
	char nvidiactl[4096]; /* canonical path a reported fd must point to */
	char state_path[4096];
	struct agent_config *cfg;
	struct proc *procs;
	struct peer *peers, *dead_peers;
	struct tsg *tsgs;
	size_t ntsgs;            /* in the table, all sources */
	struct uid_use *uids;
	struct proc *proc_hash[AGENT_HASH_BUCKETS]; /* a->procs by pid (tsg.c) */
	struct tsg *tsg_hash[AGENT_HASH_BUCKETS];   /* a->tsgs by pid and handles */
	unsigned npeers, peers_max; /* connected; the limit in force */
	unsigned npeers_broken;     /* of them, a send failed: closed after the batch */
	uint32_t peer_accepts; /* connections accepted: each peer's accept_seq */
	struct ratelimit refuse_log; /* peers refused by a limit */
	int spare_fd;            /* closed to accept and drop a peer at EMFILE */
	struct cmd *cmds;
	uint64_t rot_seq;       /* the last rot_member.queued handed out (rotate.c) */
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
	char direct_off[160];   /* why it is off, or "" */
	unsigned direct_sent_this_tick;
	unsigned readback_sent_this_tick; /* claims read back on the direct path */
	struct tracker trk;     /* the eBPF tracker (agent/io/tracker.h) */
	struct agent_hooks hooks; /* installed by hooks.c (hooks_install) */
	struct kmode *kube;     /* Kubernetes mode's adapter (kube_mode.h), NULL standalone */
	enum agent_mode mode;
	struct pod_table pods;  /* Kubernetes mode: each pod's facts (pod.c) */
	struct record_queue changes; /* records changed since the last publishing (record.c) */
	struct mem_gpu_size gpu_mem[MEM_GPU_MAX]; /* each GPU's video memory (memory.c) */
	struct mem_gpu_held gpu_held[MEM_GPU_MAX]; /* ... and what others hold there (memory.c) */
};

/* What /proc says of a process (read by agent/io/procinfo.c), as a
 * process is attached with it (proc_attach). */
struct procinfo {
	uint64_t starttime;
	char comm[GQ_COMM_LEN + 1];
	char exe[1024];
	char cgroup[1024];
	char run_class[64];
	char run_windows[16];  /* GPUQOS_RUN_WINDOWS, or "" */
	char pod_uid[40];      /* "" when in no pod */
	char container_id[72]; /* "" when not in a container */
};

/* tsg.c: processes and TSGs */
/* The per-TSG control bound (AGENT_CONTROLS_BURST at once, then
 * AGENT_CONTROLS_PER_S a second or what a rotation needs): 1 if one more
 * control op of t may go now, else 0 (held, counted). An UNGATE ending a
 * gate whose GATE was counted goes at once. */
int tsg_control_allowed(struct agent *a, struct tsg *t, uint32_t op, uint64_t now);
/* One control op of t went: counted against the bound. */
void tsg_control_charge(struct agent *a, struct tsg *t, uint32_t op, uint64_t now);
/* The op a WINDOW that starts or moves a schedule counts as (window.c):
 * no RM op of the protocol's. */
#define AGENT_CONTROL_WINDOW 0u
struct proc *proc_find(struct agent *a, pid_t pid);
struct proc *proc_attach(struct agent *a, pid_t pid, const struct procinfo *pi);
void proc_classify(struct agent *a, struct proc *p);
void proc_reclassify_all(struct agent *a);

/* pod.c (tsg.c: pod_reclassify): each pod's facts, Kubernetes mode. pod_set: 1 if they changed
 * (or are new), 0 if not, -1 with errno EDQUOT past AGENT_PODS_MAX,
 * EINVAL for a bad uid, ENOMEM. pod_forget: 1 if it was known. Neither
 * reclassifies: pod_reclassify does, for one pod (uid NULL: every
 * process), and says how many processes changed class; name (may be
 * NULL) goes in the log line. */
const struct pod_facts *pod_find(const struct agent *a, const char *uid);
int pod_set(struct agent *a, const char *uid, const struct pod_facts *f);
int pod_forget(struct agent *a, const char *uid);
unsigned pod_reclassify(struct agent *a, const char *uid, const char *name);
void pods_free(struct agent *a);
void proc_gc(struct agent *a);
struct tsg *tsg_find(struct agent *a, pid_t pid, rm_handle h_client, rm_handle h_tsg);
/* NULL with errno EDQUOT past AGENT_TSGS_MAX, or ENOMEM. */
struct tsg *tsg_new(struct agent *a, struct proc *p, rm_handle h_client, rm_handle h_tsg);
/* t's inputs to a pass; tsg_inputs_same: 1 when two are alike. */
void tsg_inputs_of(const struct tsg *t, struct tsg_inputs *in);
int tsg_inputs_same(const struct tsg_inputs *x, const struct tsg_inputs *y);
/* NULL with errno EDQUOT when a limit refuses a new claim, ENOMEM.
 * Marks the agent dirty only when the report changed what a pass reads. */
struct tsg *tsg_upsert(struct agent *a, struct proc *p, const struct gq_tsg *m, uint32_t gen);
/* The RM was told this value at `at` (now_us clock): the belief follows
 * whoever told it last. */
void tsg_observe_ts(struct tsg *t, uint32_t us, uint64_t at);
void tsg_observe_il(struct tsg *t, uint32_t level, uint64_t at);
/* Not confirmed by the tracker or a read-back (or refused): never acted
 * on, counts for no neighbour. */
int tsg_unverified(const struct tsg *t);
struct uid_use *uid_use_get(struct agent *a, uid_t uid); /* NULL: out of memory */
void uid_use_free_all(struct agent *a);
/* A log line caused by what process p (or its preempt agent) did: at most
 * AGENT_PROC_LOG_BURST per AGENT_PROC_LOG_WINDOW_MS, the rest counted. */
void proc_log(struct agent *a, struct proc *p, enum log_level lv, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* 1 if a line may be logged now; *suppressed: lines dropped before it. */
int ratelimit_allow(struct ratelimit *r, uint64_t now, unsigned burst, uint64_t window_us,
		    unsigned long *suppressed);
void tsg_drop(struct agent *a, struct tsg *t);
void tsg_drop_pid(struct agent *a, pid_t pid, int keep_gen, uint32_t gen, unsigned sources);
size_t tsg_count(struct agent *a, pid_t pid); /* pid 0: all */
uint32_t tsg_baseline(const struct tsg *t);
uint32_t tsg_effective_ts(const struct tsg *t);
int tsg_ts_differs(const struct tsg *t);
/* Setting `which` of t differs from the desired one (tsg_ts_differs,
 * tsg_il_differs): counts a revert when a SET of ours to that very value
 * had taken, and says whether the SET that answers it must wait (1) or
 * may go now (0). */
int tsg_revert_wait(struct agent *a, struct tsg *t, enum tsg_setting which, uint64_t now);
/* A SET of `which` to v took: having to set v again is a revert. */
void tsg_revert_arm(struct tsg *t, enum tsg_setting which, uint32_t v);
uint32_t tsg_effective_il(const struct tsg *t);
int tsg_il_differs(const struct tsg *t);
/* It is gated and should not be, or the other way round. */
int tsg_gate_differs(const struct tsg *t);
/* Its preempt agent says it is (or is not) gated now: keeps gate.gated and
 * the time it was held off. */
void tsg_gate_note(struct tsg *t, int gated, uint64_t now);
/* The RM holds every channel the tracker saw under t disabled (1 also
 * when it saw none: then there is only the preempt agent's word). */
int tsg_kchans_off(const struct tsg *t);
/* The eBPF tracker saw channel h allocated under t, freed, or disabled
 * (off 1) or enabled by a DISABLE_CHANNELS the RM accepted; the last
 * returns 0 when h is none of t's. Each keeps gate.gated as above. */
void tsg_channel_seen(struct tsg *t, rm_handle h, uint64_t now);
void tsg_channel_gone(struct tsg *t, rm_handle h, uint64_t now);
int tsg_channel_state(struct tsg *t, rm_handle h, int off, uint64_t now);
/* Time gated in all, and its longest period, the current one included. */
uint64_t tsg_gated_total_us(const struct tsg *t, uint64_t now);
uint64_t tsg_gated_longest_us(const struct tsg *t, uint64_t now);
enum tsg_state tsg_state_of(const struct tsg *t);
const char *tsg_state_name(enum tsg_state s);
/* The engine's name as the ctl and the metrics show it: GR0, COPY2,
 * ENGINE_0x1f for one that is neither. */
void tsg_engine_name(uint32_t engine, char *buf, size_t n);
/* tsg_state_name(tsg_state_of(t)) */
const char *tsg_state(const struct agent *a, const struct tsg *t);
void proc_free_all(struct agent *a);
/* The facts path.c chooses from, for action act on t. */
struct path_in tsg_path_facts(struct agent *a, const struct tsg *t, enum path_action act);
/* The path that would carry action act on t now (path.c decides). */
struct path_choice tsg_path(struct agent *a, const struct tsg *t, enum path_action act);
/* Process pid still runs and started at starttime (agent_hooks.proc_alive;
 * without the hook, taken as running). Inline: tsg.c and state.c both ask,
 * neither owns the other. */
static inline int proc_alive(const struct agent *a, pid_t pid, uint64_t starttime)
{
	return !a->hooks.proc_alive || a->hooks.proc_alive(pid, starttime);
}

/* The wake lead (us) the last POLICY sent to p's preempt agent asked for;
 * 0: none, or no POLICY sent. */
uint32_t proc_wake_lead_us(const struct proc *p);

/* cmd.c: in-flight commands (both paths) and their deadlines */
struct cmd *cmd_issue(struct agent *a, struct tsg *t, enum path path, uint32_t op, uint64_t arg,
		      struct ctl_conn *ctl);
void cmd_result(struct agent *a, struct peer *p, const struct gq_result *r);
/* The direct path's job seq ended with o (o->why: its failure in words). */
void cmd_direct_result(struct agent *a, uint32_t seq, const struct cmd_outcome *o);
void cmd_expire(struct agent *a);
void cmd_fail_peer(struct agent *a, struct peer *p);
void cmd_detach_ctl(struct agent *a, struct ctl_conn *c);
uint64_t cmd_next_deadline(const struct agent *a);
void cmd_free_all(struct agent *a);
const char *gq_op_name(uint32_t op);


/* record.c: the decisions recorded for the faces */
/* Record every TSG's decision (the end of each reconcile pass); one that
 * changed is queued in a->changes (changes_tsg). */
void record_pass(struct agent *a);

/* changes.c: the records changed since the faces last published */
/* t's record changed (gone 0; queued once a batch), or t is about to be
 * freed (gone 1; only if it was ever recorded). */
void changes_tsg(struct agent *a, struct tsg *t, int gone);
/* Process p came or went: its pod's process count changed. */
void changes_proc(struct agent *a, const struct proc *p);
/* The faces published a->changes: an empty queue for the next batch. */
void changes_clear(struct agent *a);

/* reconcile.c */
void reconcile(struct agent *a);
/* A new tick: every rate limit starts again. */
void reconcile_new_tick(struct agent *a);
/* The earliest command deadline, backoff end or end of the restart grace
 * (now_us clock), or 0: when reconcile wants to run again. */
uint64_t reconcile_next_deadline(const struct agent *a);


/* rotate.c */
/* Its preempt agent can gate it now (connected, said GQ_HELLO_F_GATE, not
 * stalled, reported the TSG gateable, never said it gated the TSG while
 * the RM held it schedulable, and the TSG is confirmed). */
int rotate_gateable(const struct tsg *t);
/* Set every TSG's gate.want from gate.rotate and the turns (now_us clock):
 * the rotating TSGs of one process on one runlist take one turn together;
 * the process served least goes next (docs/policy.md, "Rotation"). */
void rotate_plan(struct agent *a, uint64_t now);
/* How long after its membership changed a TSG may enter a rotation
 * (again): ROTATE_DWELL_MIN_MS, or two turns where they are longer. */
#define ROTATE_DWELL_MIN_MS 1000u
uint64_t rotate_dwell_us(const struct agent *a);
/* Processes in the rotation of runlist (gpu, engine) at the last
 * rotate_plan (0: no rotation there). */
unsigned rotate_processes(const struct agent *a, uint32_t gpu, uint32_t engine);
/* The longest wait of t's process between two of its turns on t's runlist
 * as rotate.c planned them, the current one included (0: never rotated). */
uint64_t rotate_wait_longest_us(const struct tsg *t, uint64_t now);

/* A gated TSG's lease needs renewing (`early`: may be renewed, in a pass
 * that renews one anyway). rotate_renewing: 1 when some rotating TSG's
 * renewal is due, so the pass renews early ones with it. */
int rotate_renew_due(const struct agent *a, const struct tsg *t, uint64_t now, int early);
int rotate_renewing(const struct agent *a, uint64_t now);
/* The first point offset_us after one of an LC's request starts (every
 * period_us from last_us) at or after end; all now_us() clock. */
uint64_t rotate_gap_point(uint64_t end, uint64_t period_us, uint64_t last_us, uint64_t offset_us);
/* How long a turn's change keeps the RM busy: GATE (disable 0.8-1.2 ms,
 * then preempt 0.3-0.4 ms) in one BE's process while UNGATE (enable
 * 0.4-0.6 ms) runs in the next's, plus the messages (docs/perf-log). A
 * placed change begins this long, and the LC's wake lead, before the LC's
 * next predicted request. */
#define ROTATE_CHANGE_US 1500u
/* ... and not sooner than this after a request's start, by when a short
 * request has ended: a period shorter than the change, the lead and this
 * (2.6 ms) leaves no gap to place it in. A micro LC every 2 ms, its
 * changes placed 400 us after its starts, did worse than unplaced on one
 * machine (docs/perf-log, run 7 of the afternoon). */
#define ROTATE_CHANGE_MIN_OFFSET_US 1000u
/* When the next turn ends or a gate needs renewing, or 0. */
uint64_t rotate_next_deadline(const struct agent *a);

/* phase.c: when an LC's requests come */
/* A PHASE older than this is not used: no turn change is placed by it,
 * no window around it. */
#define PHASE_FRESH_US 1000000u
/* A new period (over 1 % off the grid's) replaces the grid's only after
 * every report has agreed on it this long: a PHASE that alternates its
 * period neither resets the grid nor moves the windows at each report. */
#define PHASE_SETTLE_US 1000000u
/* The process's last PHASE came at most PHASE_FRESH_US ago. */
int phase_fresh(const struct proc *p, uint64_t now);
/* The one LC process with a confirmed TSG on gpu whose PHASE is fresh
 * (a claim nobody confirmed counts for no other process); NULL when
 * there is none or there are several. */
struct proc *phase_lc(const struct agent *a, uint32_t gpu, uint64_t now);
/* Take the LC's latest PHASE into its grid (the median of the last
 * WINDOW_GRID_SAMPLES starts, placed on the grid's period; a period over
 * 1 % off starts a new grid once it held PHASE_SETTLE_US, and until then
 * its reports are not taken in). Changes lc->grid; returns a start on
 * the grid (lc->grid.anchor_us). */
uint64_t phase_grid_take(struct proc *lc);

/* window.c */
/* A schedule is renewed this often and lapses in the preempt agent after
 * WINDOW_LEASE_MS without one. */
#define WINDOW_LEASE_MS 1000u
#define WINDOW_RENEW_US (WINDOW_LEASE_MS * 1000u / 4u)
/* A schedule that started or moved is not moved again sooner than this
 * (a renewal of the one the preempt agent runs goes meanwhile): a
 * preempt agent opens a window at once when a moved grid puts one due,
 * so each move can cost the BE one window more. */
#define WINDOW_MOVE_MIN_US 1000000u
/* Decide every LC's and BE's windows (before rotate_plan, every
 * reconcile): records proc.win, sizes "auto" windows, takes each
 * periodic LC's PHASE into its grid, and logs a decision that changed. */
void window_decide(struct agent *a, uint64_t now);
/* Send, renew or end each BE preempt agent's window schedule as
 * window_decide decided (after rotate_plan, every reconcile); a start or
 * a move counts as a control of each of the BE's GR TSGs there
 * (tsg_control_take). */
void window_plan(struct agent *a, uint64_t now);
/* When the next renewal is due, or 0. */
uint64_t window_next_deadline(const struct agent *a);
/* Whether p's preempt agent holds the window schedule it was sent: 1 or
 * 0 as its latest WINDOW_STATE said, -1 without a schedule, without an
 * answer, or with one older than WINDOW_LEASE_MS (a library that stopped
 * answering has stopped renewing too: its schedule has lapsed). */
int peer_window_held(const struct peer *p, uint64_t now);
/* The decision's reason as ctl, metrics and the pod's state name it,
 * and in words (log lines, gpuqosctl show). */
const char *window_why_name(enum window_why why);
const char *window_why_text(enum window_why why);
/* A rotation's turn change around such an LC begins this long after its
 * window ends (the BE's enable, 0.35-0.5 ms, done), not just ahead of the
 * next request, where it would meet the next window's disable in the RM. */
#define WINDOW_CHANGE_AFTER_US 500u

/* memory.c: video-memory budgets (docs/policy.md, "Memory") */
/* A new connection of p: its reports and what it was sent start again. */
void memory_hello(struct agent *a, struct peer *p);
/* A MEM_USAGE: kept, or dropped and counted (nothing changes) when it is
 * not asked for, out of bounds or goes back. */
void memory_report(struct agent *a, struct peer *p, const struct gq_mem_usage *m);
/* Every reconcile: each process's budget per GPU, and a MEMORY to each
 * peer that counts memory where its budget changed. */
void memory_plan(struct agent *a);
/* The budget a pod (or a process in none) gets on a GPU by its
 * annotation or its class's default; GQ_MEM_UNLIMITED: none. */
uint64_t memory_pod_budget(const struct agent *a, const struct proc *p);
/* The reserve kept for LCs on a GPU of `total` bytes (0: unknown). */
uint64_t memory_lc_reserve(const struct agent *a, uint64_t total);
/* The GPU table's fact: device instance gpu has `total` bytes of video
 * memory (0: listed, its size unknown). listed 0 forgets it. Marks the
 * agent dirty when it changed. */
void memory_gpu_size(struct agent *a, uint32_t gpu, int listed, uint64_t total);
/* The LC reserve in force on gpu: 0 when the policy has none or the
 * GPU's size is not known (then none is applied). */
uint64_t memory_lc_reserve_on(const struct agent *a, uint32_t gpu);
/* The GPU-process reader's fact: the RM counts procs[0..n) on device
 * instance gpu (a GPU not read this time is not pushed: its last reading
 * stays). Marks the agent dirty when the BEs' part there changes with it.
 * -1 (logged once, nothing changes) for a reading that cannot be the
 * RM's: a GPU out of range, more than MEM_RM_PROCS_MAX processes, a pid
 * twice or a count past 1Pi. */
int memory_gpu_procs(struct agent *a, uint32_t gpu, const struct mem_rm_proc *procs, size_t n);
/* Why the memory of p (NULL: a pid the agent does not know) is not
 * counted by its preempt agent, or NULL when it is: then only its
 * MEM_USAGE counts, and the RM's count of it not. */
const char *memory_uncounted_why(const struct proc *p);

/* lcbusy.c */
/* A process's ACTIVITY report: checked, smoothed, judged. Marks the agent
 * dirty when an LC starts or stops being launch-bound. */
void lcbusy_report(struct agent *a, struct proc *p, const struct gq_activity *m);
/* Forget readings that stopped coming; judge again (class, threshold). */
void lcbusy_tick(struct agent *a);

/* state.c: run-time class overrides and the peers awaited after a
 * restart (the model); agent/io/statefile.c writes them to state.json. */
struct state_entry {
	struct state_entry *next;
	pid_t pid;
	uint64_t starttime;
	enum qos_class cls;
};
const struct state_entry *state_find(const struct agent *a, pid_t pid, uint64_t starttime);
int state_set(struct agent *a, pid_t pid, uint64_t starttime, int remove, enum qos_class cls);
void state_gc(struct agent *a);
void state_peer_synced(struct agent *a, pid_t pid);
/* While earlier peers are awaited after a restart: 1 (commands wait).
 * Once the grace is over, forgets the peers that did not come back (and
 * says so) and returns 0. */
int state_grace_advance(struct agent *a, uint64_t now);
void state_free_all(struct agent *a);
/* state.json's text for what the agent holds now (malloc'd), or NULL. */
char *state_serialize(struct agent *a);
/* Takes overrides and awaited peers from state.json's text, dropping
 * those whose process is gone (path names the file in log lines). 0, or
 * -1 when the text is not a gpuqos state file. */
int state_parse(struct agent *a, const char *text, const char *path);

#endif

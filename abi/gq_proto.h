/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gq_proto.h - the wire protocol between the injected preempt agent
 * (libgpuqos-preempt.so, "P") and the node agent (gpuqos-agent, "A").
 *
 * Owns: message layouts, numbers and the one validator both ends use.
 * Does not own: sockets or state. docs/protocol.md is the prose version;
 * keep the two in step and bump GQ_PROTO_VERSION on any layout change.
 *
 * Transport: AF_UNIX SOCK_SEQPACKET, one message per datagram, host byte
 * order (both ends run on the same machine). The node agent identifies a
 * peer by SO_PEERCRED only; nothing a peer says about itself is trusted.
 */
#ifndef GPUQOS_GQ_PROTO_H
#define GPUQOS_GQ_PROTO_H

#include "rm_abi.h"

#define GQ_PROTO_MAGIC 0x534f5147u /* "GQOS" in memory on little endian */
#define GQ_PROTO_VERSION 1u
#define GQ_MSG_MAX 256u /* no message is larger; receivers read this much */

/* Default socket path; GPUQOS_SOCKET overrides it in the preempt agent,
 * --socket in the node agent. Its directory is the one the device plugin
 * mounts into every GPU container: it holds this socket and nothing else. */
#define GQ_DEFAULT_SOCKET_DIR "/run/gpuqos"
#define GQ_DEFAULT_SOCKET GQ_DEFAULT_SOCKET_DIR "/agent.sock"

enum gq_type {
	GQ_HELLO = 1,    /* P->A: first message on every connection */
	GQ_POLICY = 2,   /* A->P: desired timeslices for TSGs libcuda creates */
	GQ_TSG = 3,      /* P->A: a TSG exists / changed (upsert) */
	GQ_TSG_GONE = 4, /* P->A: a TSG was freed (or its client or fd) */
	GQ_COMMAND = 5,  /* A->P: issue one RM control on libcuda's own fd */
	GQ_RESULT = 6,   /* P->A: the outcome of one COMMAND */
	GQ_SYNCED = 7,   /* P->A: every live TSG has been reported since HELLO */
	GQ_ACTIVITY = 8, /* P->A: the process's GPU launches so far */
	GQ_WAKE = 9,     /* P->A: how the process's wakes went so far */
	GQ_PHASE = 10,   /* P->A: the period and last start of its requests */
	GQ_WINDOW = 11,  /* A->P: keep this BE off the GPU around an LC's requests */
	GQ_WINDOW_STATE = 12, /* P->A: the schedule it runs, after each WINDOW */
	GQ_REFUSED = 13,  /* A->P: not admitted; the connection closes after it */
	GQ_MEMORY = 14,   /* A->P: the process's video-memory budget on one GPU */
	GQ_MEM_USAGE = 15, /* P->A: the video memory it holds and was refused, one GPU */
	GQ_LEASE_PAGE = 16, /* A->P: a page A renews P's leases in (its fd attached) */
	GQ_LEASE_PAGE_STATE = 17, /* P->A: it took the page, or refused it */
};
#define GQ_TYPE_MAX GQ_LEASE_PAGE_STATE

struct gq_hdr {
	rm_u32 magic;
	rm_u16 version;
	rm_u16 type;   /* enum gq_type */
	rm_u32 length; /* whole message in bytes; equals the datagram size */
	rm_u32 seq;    /* sender's counter; a COMMAND's seq is its id */
};
_Static_assert(sizeof(struct gq_hdr) == 16, "gq_hdr");

#define GQ_COMM_LEN 16

struct gq_hello {
	struct gq_hdr hdr;
	rm_u32 pid;         /* what the process thinks its pid is: logged only */
	rm_u32 flags;       /* GQ_HELLO_F_* */
	rm_u32 lib_version; /* GQ_PROTO_VERSION of the library */
	rm_u32 ntsg;        /* TSGs that will follow before GQ_SYNCED */
	char comm[GQ_COMM_LEN];
};
_Static_assert(sizeof(struct gq_hello) == 48, "gq_hello");
#define GQ_HELLO_F_RECONNECT 0x1u /* not the first connection of this process */
/* The library executes GATE and UNGATE and enforces their lease itself
 * (docs/protocol.md, "Gating"). A never gates a peer without it. */
#define GQ_HELLO_F_GATE 0x2u
/* The library counts the process's GPU launches and sends ACTIVITY when a
 * POLICY asks for it (GQ_POLICY_F_ACTIVITY). */
#define GQ_HELLO_F_ACTIVITY 0x4u
/* The library sends WAKE when a POLICY asks for it (GQ_POLICY_F_WAKE_STATS). */
#define GQ_HELLO_F_WAKE_STATS 0x8u
/* The library sends PHASE when a POLICY asks for it (GQ_POLICY_F_PHASE). */
#define GQ_HELLO_F_PHASE 0x10u
/* The library runs WINDOW schedules and ends them by itself (docs/protocol.md,
 * "Windows"). A never sends WINDOW to a peer without it. */
#define GQ_HELLO_F_WINDOW 0x20u
/* The library measures its requests' span and puts it in PHASE when a
 * POLICY asks for it (GQ_POLICY_F_SPAN; docs/protocol.md, "Phase"). */
#define GQ_HELLO_F_SPAN 0x40u
/* The library answers a WINDOW that carries GQ_WINDOW_F_STATE with
 * WINDOW_STATE (docs/protocol.md, "Windows"). */
#define GQ_HELLO_F_WINDOW_STATE 0x80u
/* The library accounts the process's video memory, enforces MEMORY and
 * sends MEM_USAGE (docs/protocol.md, "Memory"). A never sends MEMORY to a
 * peer without it. */
#define GQ_HELLO_F_MEMORY 0x100u
/* P takes a LEASE_PAGE: A may renew its leases there instead of by
 * COMMAND (docs/protocol.md, "Lease page"). */
#define GQ_HELLO_F_LEASE_PAGE 0x200u

struct gq_policy {
	struct gq_hdr hdr;
	rm_u32 gr_timeslice_us;   /* 0: leave libcuda's value alone */
	rm_u32 copy_timeslice_us; /* 0: leave libcuda's value alone */
	rm_u32 flags;             /* GQ_POLICY_F_*; other bits reserved, 0 */
	rm_u32 wake;              /* with GQ_POLICY_F_WAKE: GQ_WAKE_LEAD / GQ_WAKE_HOLD; else 0 */
};
_Static_assert(sizeof(struct gq_policy) == 32, "gq_policy");
/* Send ACTIVITY every GQ_ACTIVITY_PERIOD_MS while this connection lasts
 * (a library without GQ_HELLO_F_ACTIVITY ignores the bit). */
#define GQ_POLICY_F_ACTIVITY 0x1u
/* Wake this LC's context ahead of its periodic requests (docs/policy.md,
 * "Waking a periodic LC"): `wake` holds the lead (1..GQ_WAKE_MAX_US) in
 * its low 16 bits and the hold (0..GQ_WAKE_MAX_US) in its high 16. Without
 * the bit, no wakes (unless the workload's own environment asks). */
#define GQ_POLICY_F_WAKE 0x2u
/* Send WAKE with each ACTIVITY period while this connection lasts, once
 * the process has had wakes asked of it and its counts changed (a library
 * without GQ_HELLO_F_WAKE_STATS ignores the bit; A sets it only for one
 * with the flag, as an older A would close on the unknown type). */
#define GQ_POLICY_F_WAKE_STATS 0x4u
/* Send PHASE with each WAKE while the wake's prediction has a period
 * (docs/protocol.md, "Phase"). A library without GQ_HELLO_F_PHASE ignores
 * the bit; A sets it only for one whose HELLO has it. */
#define GQ_POLICY_F_PHASE 0x8u
/* Put the requests' span in PHASE (GQ_PHASE_F_SPAN). A library without
 * GQ_HELLO_F_SPAN ignores the bit; A sets it only for one whose HELLO has
 * it, as an older A drops a PHASE with flags. */
#define GQ_POLICY_F_SPAN 0x10u
#define GQ_WAKE_MAX_US 1000u
#define GQ_WAKE_WORD(lead_us, hold_us) ((rm_u32)(lead_us) | ((rm_u32)(hold_us) << 16))
#define GQ_WAKE_LEAD(word) ((word) & 0xffffu)
#define GQ_WAKE_HOLD(word) ((word) >> 16)

#define GQ_UNKNOWN 0xffffffffu

struct gq_tsg {
	struct gq_hdr hdr;
	rm_handle h_client;
	rm_handle h_tsg;
	rm_handle h_device;
	rm_u32 device_instance; /* GQ_UNKNOWN if the device was not seen */
	rm_u32 engine_type;     /* NV2080_ENGINE_TYPE_* from the TSG's alloc */
	rm_u32 fd;              /* libcuda's fd that owns the client */
	rm_u32 timeslice_us;    /* last value RM accepted, GQ_UNKNOWN if none */
	rm_u32 app_timeslice_us; /* last value the app/libcuda asked for, or GQ_UNKNOWN */
	rm_u32 interleave;      /* last level RM accepted, GQ_UNKNOWN if none */
	rm_u32 flags;           /* GQ_TSG_F_* */
};
_Static_assert(sizeof(struct gq_tsg) == 56, "gq_tsg");
_Static_assert(__builtin_offsetof(struct gq_tsg, h_client) == 16, "gq_tsg.h_client");
/* The TSG's channels are disabled by a GATE whose lease has not lapsed. */
#define GQ_TSG_F_GATED 0x1u
/* The library cannot gate this TSG: no subdevice or channels seen, or
 * more channels than one DISABLE_CHANNELS names. */
#define GQ_TSG_F_NO_GATE 0x2u
/* The TSG is in a rotation: a GATE, or an UNGATE with a lease, holds it
 * until the lease lapses; then the library enables it and puts back the
 * timeslice the application chose. */
#define GQ_TSG_F_LEASED 0x4u

struct gq_tsg_gone {
	struct gq_hdr hdr;
	rm_handle h_client;
	rm_handle h_tsg;
};
_Static_assert(sizeof(struct gq_tsg_gone) == 24, "gq_tsg_gone");

enum gq_op {
	GQ_OP_SET_TIMESLICE = 1, /* arg: microseconds */
	GQ_OP_GET_TIMESLICE = 2, /* arg: unused; result value: microseconds */
	GQ_OP_SET_INTERLEAVE = 3, /* arg: RM_INTERLEAVE_* */
	GQ_OP_PREEMPT = 4,       /* arg: bit 0 = wait for completion */
	GQ_OP_GATE = 5,   /* arg: lease in ms; disable the TSG's channels, then preempt it */
	/* arg: a lease in ms (its turn in the rotation: enabled, and held
	 * like a gate), or 0 (it leaves the rotation: enabled, no lease) */
	GQ_OP_UNGATE = 6,
};
#define GQ_OP_MAX GQ_OP_UNGATE
/* A lease (GATE or UNGATE) lasts at most this long without renewal. */
#define GQ_GATE_LEASE_MAX_MS 10000u

struct gq_command {
	struct gq_hdr hdr; /* hdr.seq: command id, echoed in the result */
	rm_u32 op;         /* enum gq_op */
	rm_handle h_client;
	rm_handle h_tsg;
	rm_u32 deadline_us; /* not started within this budget: not issued */
	rm_u64 arg RM_ALIGN8;
};
_Static_assert(sizeof(struct gq_command) == 40, "gq_command");
_Static_assert(__builtin_offsetof(struct gq_command, arg) == 32, "gq_command.arg");

/* err values beyond errno: the command was not issued. */
#define GQ_ERR_UNKNOWN_TSG 10001 /* no such TSG in this process */
#define GQ_ERR_EXPIRED 10002     /* its deadline passed before it started */
#define GQ_ERR_BAD_OP 10003      /* op or arg out of range */
#define GQ_ERR_NOT_GATEABLE 10004 /* GATE: channels or subdevice unknown */

struct gq_result {
	struct gq_hdr hdr; /* hdr.seq: the command id */
	rm_u32 op;
	rm_handle h_client;
	rm_handle h_tsg;
	rm_u32 rm_status;  /* the RM's status word (valid when err == 0) */
	rm_u32 err;        /* errno of ioctl(), GQ_ERR_*, or 0 */
	rm_u32 reserved;
	rm_u64 value RM_ALIGN8;      /* GET_TIMESLICE read-back, else the arg */
	rm_u64 elapsed_ns RM_ALIGN8; /* time spent in ioctl() */
};
_Static_assert(sizeof(struct gq_result) == 56, "gq_result");

struct gq_synced {
	struct gq_hdr hdr;
	rm_u32 ntsg; /* TSGs reported since HELLO */
	rm_u32 reserved;
};
_Static_assert(sizeof(struct gq_synced) == 24, "gq_synced");

/* The process's GPU work submissions (kernel and graph launches through
 * libcuda's entry points) since the library was loaded. A launch keeps the
 * process "active" until GQ_ACTIVITY_TAIL_US after it (about one channel
 * switch): active_ns is the length of the union of those intervals, so
 * active_ns / elapsed is the share of the time in which the process's
 * launches keep the GPU switching to it. Counters only grow; at_ns is the
 * library's CLOCK_MONOTONIC when it read them. */
struct gq_activity {
	struct gq_hdr hdr;
	rm_u32 flags; /* reserved, 0 */
	rm_u32 reserved;
	rm_u64 launches RM_ALIGN8;  /* launch calls seen */
	rm_u64 bursts RM_ALIGN8;    /* launches more than the tail after the one before */
	rm_u64 active_ns RM_ALIGN8; /* see above */
	rm_u64 at_ns RM_ALIGN8;
};
_Static_assert(sizeof(struct gq_activity) == 56, "gq_activity");
#define GQ_ACTIVITY_PERIOD_MS 250u
#define GQ_ACTIVITY_TAIL_US 200u

/* The wake's own counts since the library was loaded (docs/policy.md,
 * "Waking a periodic LC"; docs/protocol.md, "Wake"): requests it saw while
 * a wake was asked, wakes it issued and how the next request judged each
 * (a hit, wasted, beaten by the request), wakes it did not issue because
 * its thread ran late or libcuda failed, and the stops of its judging.
 * Counters only grow. hits + wasted + beaten <= wakes, wakes <= requests
 * + 1 and not_issued <= requests + 1 (a wake is for the request to come). */
struct gq_wake {
	struct gq_hdr hdr;
	rm_u32 flags; /* GQ_WAKE_F_*; other bits reserved, 0 */
	rm_u32 reserved;
	rm_u64 requests RM_ALIGN8;
	rm_u64 wakes RM_ALIGN8;
	rm_u64 hits RM_ALIGN8;
	rm_u64 wasted RM_ALIGN8;
	rm_u64 beaten RM_ALIGN8;
	rm_u64 not_issued RM_ALIGN8;
	rm_u64 stops RM_ALIGN8;
	rm_u64 at_ns RM_ALIGN8; /* the library's CLOCK_MONOTONIC when it read them */
};
_Static_assert(sizeof(struct gq_wake) == 88, "gq_wake");
/* The judging has stopped the wakes for now (wasted ones came too often). */
#define GQ_WAKE_F_STOPPED 0x1u

/* When the process's requests come (docs/protocol.md, "Phase"): the period
 * its wake predicts from (the median of its last intervals) and the start
 * of its latest request, on the library's CLOCK_MONOTONIC, as read at
 * at_ns. The node agent changes a rotation's turn in a gap between two
 * requests of an LC it knows this of. With GQ_PHASE_F_SPAN, span_us is
 * how long after its due time a request is over: the 99th percentile,
 * over its last requests, of the time from the grid point the request was
 * due on to the first wait for GPU work that returned done after its
 * launches (windows sized by it, "auto" in docs/policy.md). */
struct gq_phase {
	struct gq_hdr hdr;
	rm_u32 flags;   /* GQ_PHASE_F_*; other bits 0 */
	rm_u32 span_us; /* with GQ_PHASE_F_SPAN: 1 .. the period; else 0 */
	rm_u64 period_ns RM_ALIGN8;
	rm_u64 last_start_ns RM_ALIGN8;
	rm_u64 at_ns RM_ALIGN8;
};
_Static_assert(sizeof(struct gq_phase) == 48, "gq_phase");
/* span_us holds a span (only where GQ_POLICY_F_SPAN asked for it). */
#define GQ_PHASE_F_SPAN 0x1u
#define GQ_PHASE_PERIOD_MIN_NS 1000000ull    /* 1 ms */
#define GQ_PHASE_PERIOD_MAX_NS 1000000000ull /* 1 s */
/* A latest start older than this at at_ns is no phase: A drops such a
 * report, and P does not send one (its wakes were off meanwhile). */
#define GQ_PHASE_STALE_NS 2000000000ull /* 2 s */

/* Keep this BE process's GR TSGs on one GPU off the GPU around each
 * request of a periodic LC (docs/protocol.md, "Windows"): from before_us
 * ahead of each predicted start (start_ns + k * period_ns, on A's
 * CLOCK_MONOTONIC) to after_us past it, the library disables the TSGs'
 * channels and preempts them, then enables them again. The schedule ends
 * lease_ms after the message unless renewed, at once without
 * GQ_WINDOW_F_ON, and when the connection ends. */
struct gq_window {
	struct gq_hdr hdr;
	rm_u32 flags;           /* GQ_WINDOW_F_*; other bits reserved, 0 */
	rm_u32 device_instance; /* the GPU whose TSGs it applies to */
	rm_u64 period_ns RM_ALIGN8;
	rm_u64 start_ns RM_ALIGN8; /* one predicted request start */
	rm_u64 sent_ns RM_ALIGN8;  /* A's CLOCK_MONOTONIC when it sent this */
	rm_u32 before_us;
	rm_u32 after_us;
	rm_u32 lease_ms;
	rm_u32 reserved; /* 0 */
};
_Static_assert(sizeof(struct gq_window) == 64, "gq_window");
#define GQ_WINDOW_F_ON 0x1u
/* Answer with WINDOW_STATE. A sets it only for a library whose HELLO has
 * GQ_HELLO_F_WINDOW_STATE: an older one ends the schedule on a reserved
 * bit. */
#define GQ_WINDOW_F_STATE 0x2u

/* The library's answer to a WINDOW with GQ_WINDOW_F_STATE, once it has
 * taken or refused it: whether a schedule runs now, and its windows so far
 * (since the library was loaded). */
struct gq_window_state {
	struct gq_hdr hdr;
	rm_u32 flags;    /* GQ_WINDOW_STATE_F_*; other bits reserved, 0 */
	rm_u32 reserved; /* 0 */
	rm_u64 opened RM_ALIGN8;  /* windows it took its TSGs off for */
	rm_u64 skipped RM_ALIGN8; /* windows it came to too late to open */
	rm_u64 at_ns RM_ALIGN8;   /* the library's CLOCK_MONOTONIC */
};
_Static_assert(sizeof(struct gq_window_state) == 48, "gq_window_state");
/* A schedule runs: the WINDOW answered was taken (with GQ_WINDOW_F_ON). */
#define GQ_WINDOW_STATE_F_ON 0x1u
/* The WINDOW answered was refused (docs/protocol.md, "Windows"): no
 * schedule runs. */
#define GQ_WINDOW_STATE_F_REFUSED 0x2u
/* Limits the library enforces (a WINDOW outside them ends the schedule):
 * the window opens at most GQ_WINDOW_BEFORE_MAX_US ahead of a start and
 * ends at most GQ_WINDOW_AFTER_MAX_US past it, and keeps the BE on at
 * least GQ_WINDOW_ON_MIN_PERCENT of each period. */
#define GQ_WINDOW_BEFORE_MAX_US 10000u
#define GQ_WINDOW_AFTER_MAX_US 100000u
#define GQ_WINDOW_ON_MIN_PERCENT 10u
#define GQ_WINDOW_LEASE_MAX_MS 2000u
/* sent_ns further than this from the library's own clock: not the same
 * CLOCK_MONOTONIC, or the message waited too long to place windows by. */
#define GQ_WINDOW_CLOCK_SLACK_NS 50000000ull
/* start_ns further than this from the library's clock: not a start. */
#define GQ_WINDOW_START_SLACK_NS 10000000000ull

/* A did not admit this connection (docs/protocol.md, "Admission"): it
 * closes right after this message, before or instead of POLICY. P tries
 * again no sooner than retry_after_ms, and backs off further (doubling)
 * while refusals continue; a P that predates the type ignores it as
 * unknown and sees only the close. */
struct gq_refused {
	struct gq_hdr hdr;
	rm_u32 reason;         /* GQ_REFUSED_*: for P's log only */
	rm_u32 retry_after_ms; /* 0: P's own backoff alone */
};
_Static_assert(sizeof(struct gq_refused) == 24, "gq_refused");
#define GQ_REFUSED_FULL 1u   /* A holds as many connections as it takes */
#define GQ_REFUSED_SHARE 2u  /* its pod (Kubernetes) or uid (standalone) holds its share */
#define GQ_REFUSED_UNREAD 3u /* A could not read its process's /proc now */
/* P waits at most this long between refused attempts, whatever A asks. */
#define GQ_REFUSED_RETRY_MAX_MS 30000u

/* The budget of video memory (classes NV01_MEMORY_LOCAL_USER) this
 * process may hold on one GPU, the library's own allocations before the
 * budget came included (docs/protocol.md, "Memory"). An allocation that
 * would take the process past `limit` is answered NV_ERR_NO_MEMORY by the
 * library, without reaching the RM; the FB-info answers the process sees
 * report `limit` as the GPU's memory and what is left of it as free. A new
 * MEMORY for the same device replaces the last; GQ_MEM_UNLIMITED lifts it.
 * Memory already held is never taken back: a limit below `used` refuses
 * every new allocation until frees bring the process under it. */
struct gq_memory {
	struct gq_hdr hdr;
	rm_u32 device_instance; /* the RM's device instance (NV0080 deviceId) */
	rm_u32 flags;           /* GQ_MEMORY_F_*; other bits reserved, 0 */
	rm_u64 limit;           /* bytes, or GQ_MEM_UNLIMITED */
	rm_u64 reported_total;  /* bytes the FB info reports as the GPU's (0: the RM's own) */
};
_Static_assert(sizeof(struct gq_memory) == 40, "gq_memory");
#define GQ_MEM_UNLIMITED (~(rm_u64)0)
/* The budget is what the process sees as the GPU's memory: rewrite the
 * FB-info answers (HEAP_SIZE, TOTAL_RAM_SIZE, HEAP_FREE, ...). */
#define GQ_MEMORY_F_REPORT 0x1u

/* What the process holds on one GPU, sent when it changed, at most every
 * GQ_MEM_USAGE_PERIOD_MS, and at once after the first refusal of each
 * budget. Counts never go back within a connection. */
struct gq_mem_usage {
	struct gq_hdr hdr;
	rm_u32 device_instance;
	rm_u32 flags;    /* reserved, 0 */
	rm_u64 used;     /* bytes of live video-memory allocations the library counted */
	rm_u64 peak;     /* the most `used` has been */
	rm_u64 limit;    /* the budget it enforces now, or GQ_MEM_UNLIMITED */
	rm_u64 refused;  /* allocations it answered NV_ERR_NO_MEMORY */
	rm_u64 refused_bytes; /* their sizes, summed */
	rm_u64 unknown;  /* allocations passed through uncounted (parameters it could not read) */
};
_Static_assert(sizeof(struct gq_mem_usage) == 72, "gq_mem_usage");
#define GQ_MEM_USAGE_PERIOD_MS 100u

/* A page of shared memory through which A renews every lease it gave P
 * (docs/protocol.md, "Lease page"): a memfd of GQ_LEASE_PAGE_SIZE bytes,
 * sealed so that it cannot shrink or grow and P cannot write it, sent as
 * the SCM_RIGHTS payload of GQ_LEASE_PAGE. A stores `until_ns` (its
 * CLOCK_MONOTONIC) where it would have sent a renewal; when one of P's
 * leases ends, P first extends every lease it holds from this connection
 * to `until_ns` if that is later (at most GQ_GATE_LEASE_MAX_MS from P's
 * clock). A that stops storing (hung, stopped) lets the leases end as if it
 * had stopped sending renewals. */
struct gq_lease_word {
	rm_u32 magic;   /* GQ_LEASE_PAGE_MAGIC */
	rm_u32 version; /* GQ_PROTO_VERSION */
	rm_u64 until_ns; /* 0: nothing renewed yet */
};
#define GQ_LEASE_PAGE_MAGIC 0x5345414cu /* "LEAS" in memory on little endian */
#define GQ_LEASE_PAGE_SIZE 4096u

struct gq_lease_page {
	struct gq_hdr hdr;
	rm_u32 flags;    /* reserved, 0 */
	rm_u32 size;     /* GQ_LEASE_PAGE_SIZE */
	rm_u64 sent_ns;  /* A's CLOCK_MONOTONIC when it sent this */
};
_Static_assert(sizeof(struct gq_lease_page) == 32, "gq_lease_page");

struct gq_lease_page_state {
	struct gq_hdr hdr;
	rm_u32 flags;    /* GQ_LEASE_PAGE_F_ON, or 0: refused (P's log says why) */
	rm_u32 reserved; /* 0 */
};
_Static_assert(sizeof(struct gq_lease_page_state) == 24, "gq_lease_page_state");
#define GQ_LEASE_PAGE_F_ON 0x1u

/* Exact size of each message type; 0 for unknown types. */
static inline rm_u32 gq_msg_size(rm_u32 type)
{
	switch (type) {
	case GQ_HELLO:
		return sizeof(struct gq_hello);
	case GQ_POLICY:
		return sizeof(struct gq_policy);
	case GQ_TSG:
		return sizeof(struct gq_tsg);
	case GQ_TSG_GONE:
		return sizeof(struct gq_tsg_gone);
	case GQ_COMMAND:
		return sizeof(struct gq_command);
	case GQ_RESULT:
		return sizeof(struct gq_result);
	case GQ_SYNCED:
		return sizeof(struct gq_synced);
	case GQ_ACTIVITY:
		return sizeof(struct gq_activity);
	case GQ_WAKE:
		return sizeof(struct gq_wake);
	case GQ_PHASE:
		return sizeof(struct gq_phase);
	case GQ_WINDOW:
		return sizeof(struct gq_window);
	case GQ_WINDOW_STATE:
		return sizeof(struct gq_window_state);
	case GQ_REFUSED:
		return sizeof(struct gq_refused);
	case GQ_MEMORY:
		return sizeof(struct gq_memory);
	case GQ_MEM_USAGE:
		return sizeof(struct gq_mem_usage);
	case GQ_LEASE_PAGE:
		return sizeof(struct gq_lease_page);
	case GQ_LEASE_PAGE_STATE:
		return sizeof(struct gq_lease_page_state);
	default:
		return 0;
	}
}

enum gq_check {
	GQ_CHECK_OK = 0,
	GQ_CHECK_SHORT,   /* fewer bytes than a header */
	GQ_CHECK_MAGIC,   /* not our protocol */
	GQ_CHECK_VERSION, /* another protocol version */
	GQ_CHECK_TYPE,    /* unknown message type */
	GQ_CHECK_LENGTH,  /* length field disagrees with type or datagram */
};

/* Validate one received datagram of n bytes. Every receiver calls this
 * before looking at anything past the header. */
static inline enum gq_check gq_msg_check(const void *buf, unsigned long n)
{
	const struct gq_hdr *h = (const struct gq_hdr *)buf;
	rm_u32 want;

	if (n < sizeof(struct gq_hdr))
		return GQ_CHECK_SHORT;
	if (h->magic != GQ_PROTO_MAGIC)
		return GQ_CHECK_MAGIC;
	if (h->version != GQ_PROTO_VERSION)
		return GQ_CHECK_VERSION;
	want = gq_msg_size(h->type);
	if (want == 0)
		return GQ_CHECK_TYPE;
	if (h->length != want || n != want)
		return GQ_CHECK_LENGTH;
	return GQ_CHECK_OK;
}

static inline const char *gq_check_name(enum gq_check c)
{
	switch (c) {
	case GQ_CHECK_OK:
		return "ok";
	case GQ_CHECK_SHORT:
		return "shorter than a header";
	case GQ_CHECK_MAGIC:
		return "bad magic";
	case GQ_CHECK_VERSION:
		return "unsupported protocol version";
	case GQ_CHECK_TYPE:
		return "unknown message type";
	case GQ_CHECK_LENGTH:
		return "length does not match type";
	}
	return "?";
}

static inline void gq_hdr_init(struct gq_hdr *h, enum gq_type type, rm_u32 seq)
{
	h->magic = GQ_PROTO_MAGIC;
	h->version = GQ_PROTO_VERSION;
	h->type = (rm_u16)type;
	h->length = gq_msg_size(type);
	h->seq = seq;
}

#endif /* GPUQOS_GQ_PROTO_H */

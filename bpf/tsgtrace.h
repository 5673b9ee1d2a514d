/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tsgtrace.h - the contract between the gpuqos RM tracer's BPF programs
 * (tsgtrace.bpf.c) and user space (tsgtrace.c): the event record sent
 * through the ring buffer, the keys and values of the pinned live tables,
 * the drop counters and the layout version that guards the pins.
 *
 * Owns: layouts and numbers. Does not own: any logic. It compiles both after
 * vmlinux.h (BPF side) and with <linux/types.h> (user space).
 *
 * Any change to a layout below must bump TT_LAYOUT_VERSION: the maps are
 * pinned and outlive the programs, so an agent of another build must see
 * that it cannot reuse them (tsgtrace.c then recreates them, with a log).
 * A version that only adds maps may name the one before it
 * TT_LAYOUT_VERSION_UPGRADABLE: its pins are kept (the added maps start
 * empty); an older build still recreates this one's.
 */
#ifndef GPUQOS_TSGTRACE_H
#define GPUQOS_TSGTRACE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define TT_LAYOUT_VERSION 3u
/* Pins of this older layout are kept and upgraded in place: version 3
 * only added maps (tt_channels, tt_tsg_chans, tt_starts), every map of
 * version 2 is alike. An agent upgraded on a busy node keeps its tables
 * (it only does not know the channels made before). */
#define TT_LAYOUT_VERSION_UPGRADABLE 2u
#define TT_COMM_LEN 16

/* Map capacities. A TSG costs ~80 bytes in kernel memory; 16384 TSGs is
 * 4096 CUDA contexts on one node, far above what a node runs. */
#define TT_MAX_TSGS 16384
#define TT_MAX_CHANNELS 32768 /* two per TSG on average */
#define TT_MAX_CLIENTS 4096
#define TT_MAX_DEVICES 8192
#define TT_MAX_PROCS 4096
#define TT_MAX_INFLIGHT 8192
#define TT_RINGBUF_BYTES (1u << 20) /* ~10000 events */

/* deviceId / engineType when the tracer could not learn it. */
#define TT_UNKNOWN 0xffffffffu

enum tt_event_type {
	TT_EV_CLIENT = 1,     /* client allocated: hObject = client handle */
	TT_EV_DEVICE = 2,     /* device allocated: device_id = instance */
	TT_EV_TSG = 3,        /* TSG allocated: engine_type, device_id, hParent = device */
	TT_EV_CHANNEL = 4,    /* GPFIFO channel allocated: hParent = TSG (or device) */
	TT_EV_FREE = 5,       /* object freed: hObject = freed, hClass = what it was */
	TT_EV_TIMESLICE = 6,  /* SET_TIMESLICE accepted on a TSG: value = us */
	TT_EV_INTERLEAVE = 7, /* SET_INTERLEAVE_LEVEL accepted on a TSG: value = level */
	TT_EV_EXIT = 8,       /* last thread of a tgid that had RM clients exited */
	/* DISABLE_CHANNELS accepted: one event per channel it named, hObject =
	 * the channel, hClient = its client, value = bDisable (1 off, 0 on). */
	TT_EV_CHANNEL_STATE = 9,
	TT_EV_MAX
};

/* Flags of an event. */
#define TT_F_XFER 0x1u    /* the call came through the NV_ESC_IOCTL_XFER_CMD wrapper */
#define TT_F_FOREIGN 0x2u /* issued by another tgid than the client's owner */

/* One ring buffer record. Fixed size; user space checks the size. */
struct tt_event {
	__u64 ts_ns;     /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 cgroup_id; /* cgroup v2 inode of the calling task */
	__u64 value;     /* timeslice us, interleave level, TSGs removed at exit */
	__u32 type;      /* enum tt_event_type */
	__u32 tgid;      /* caller's process */
	__u32 tid;       /* caller's thread */
	__s32 fd;        /* the fd the call was made on (-1 for EXIT) */
	__u32 hClient;
	__u32 hParent;
	__u32 hObject;
	__u32 hClass;      /* allocated class; for FREE the freed object's class if known */
	__u32 status;      /* RM status (0 unless the report_failures knob is set) */
	__u32 engine_type; /* TSG and channel events (TT_UNKNOWN if not learnt) */
	__u32 device_id;   /* DEVICE, TSG and channel events (TT_UNKNOWN if not learnt) */
	__u32 owner_tgid;  /* tgid that allocated hClient (0 if unknown) */
	__u32 call;        /* enum rm_call_kind of the (inner) call */
	__u32 flags;       /* TT_F_* */
	char comm[TT_COMM_LEN];
};
_Static_assert(sizeof(struct tt_event) == 96, "tt_event layout");
_Static_assert(__builtin_offsetof(struct tt_event, type) == 24, "tt_event.type");
_Static_assert(__builtin_offsetof(struct tt_event, hClient) == 40, "tt_event.hClient");
_Static_assert(__builtin_offsetof(struct tt_event, comm) == 80, "tt_event.comm");

/* Key of the live TSG and device tables: an object of a client of a process. */
struct tt_obj_key {
	__u32 tgid;
	__u32 hClient;
	__u32 handle;
};
_Static_assert(sizeof(struct tt_obj_key) == 12, "tt_obj_key layout");

/* Flags of a live TSG. */
#define TT_TSG_TIMESLICE_SET 0x1u  /* timeslice_us is a value RM accepted */
#define TT_TSG_INTERLEAVE_SET 0x2u /* interleave is a value RM accepted */

struct tt_tsg_val {
	__u64 cgroup_id;
	__u64 created_ns;   /* CLOCK_MONOTONIC */
	__u64 timeslice_us; /* last SET_TIMESLICE RM accepted (see flags) */
	__s32 fd;           /* fd the TSG was allocated on, in tgid */
	__u32 hDevice;      /* the TSG's parent */
	__u32 device_id;    /* device instance, TT_UNKNOWN if the device was not seen */
	__u32 engine_type;
	__u32 interleave; /* last SET_INTERLEAVE_LEVEL RM accepted (see flags) */
	__u32 flags;      /* TT_TSG_* */
};
_Static_assert(sizeof(struct tt_tsg_val) == 48, "tt_tsg_val layout");

/* A GPFIFO channel allocated under a live TSG, keyed like the TSG
 * ({owner tgid, hClient, hChannel}): which TSG it belongs to, and whether
 * the RM holds it disabled (the last DISABLE_CHANNELS it accepted).
 * tt_tsg_chans counts them per TSG (key: the TSG's), so that a TSG's free
 * walks the channel table only when it has some left (libcuda frees a
 * TSG's channels before the TSG). */
struct tt_chan_val {
	__u64 created_ns; /* CLOCK_MONOTONIC */
	__u32 hTsg;       /* its parent TSG */
	__u32 hDevice;    /* the TSG's parent device */
	__u32 hClass;     /* the channel's GPFIFO class */
	__u32 off;        /* 1: disabled by the last DISABLE_CHANNELS RM accepted; 0: enabled */
};
_Static_assert(sizeof(struct tt_chan_val) == 24, "tt_chan_val layout");

struct tt_dev_val {
	__u64 cgroup_id;
	__s32 fd;
	__u32 device_id;
};
_Static_assert(sizeof(struct tt_dev_val) == 16, "tt_dev_val layout");

struct tt_client_key {
	__u32 tgid;
	__u32 hClient;
};
_Static_assert(sizeof(struct tt_client_key) == 8, "tt_client_key layout");

struct tt_client_val {
	__u64 cgroup_id;
	__u64 created_ns;
	__s32 fd;
	__u32 hClass;
	/* Devices and TSGs ever inserted under this client. A client free
	 * sweeps the tables (a walk of every bucket, ~80 us) only when it is
	 * non-zero: libcuda frees short-lived clients that own nothing. */
	__u32 children;
	__u32 pad;
};
_Static_assert(sizeof(struct tt_client_val) == 32, "tt_client_val layout");

/* Per process that has at least one live client: lets the exit handler
 * skip every process that never touched the RM without a table walk.
 * tt_starts holds its start beside (tgid -> its leader's start_boottime,
 * ns since boot; /proc/<tgid>/stat field 22 is the same in clock ticks),
 * for a restarted reader to tell a reused tgid from the process. */
struct tt_proc_val {
	__u32 clients;
	__u32 pad;
};

/* An ioctl in flight, keyed by pid_tgid between enter and exit. */
struct tt_inflight {
	__u64 params; /* user pointer to the parameter block (inner one for XFER) */
	__s32 fd;
	__u32 call;  /* enum rm_call_kind */
	__u32 flags; /* TT_F_XFER */
	__u32 pad;
};
_Static_assert(sizeof(struct tt_inflight) == 24, "tt_inflight layout");

/* Pinned alongside the tables: a restarted agent of another build must not
 * reuse maps whose sizes happen to match but whose meaning changed. */
struct tt_meta {
	__u32 layout_version;
	__u32 event_size;
};

/* Counters, per CPU. The first group are drops: something the tracer
 * could not see or could not record. */
enum tt_counter {
	TT_CNT_RINGBUF_FULL = 0, /* event lost: ring buffer full (no consumer?) */
	TT_CNT_READ_FAULT,       /* RM call lost: parameter block unreadable */
	TT_CNT_ALLOC_PARAMS_FAULT, /* pAllocParms / control params unreadable */
	TT_CNT_INFLIGHT_FULL,    /* RM call lost: enter could not be recorded */
	TT_CNT_LIVE_FULL,        /* live table insert failed (map full) */
	TT_CNT_DROP_MAX,
	/* Not drops: what was seen. */
	TT_CNT_RM_CALLS = TT_CNT_DROP_MAX, /* RM ioctls decoded at enter */
	TT_CNT_EVENTS,                     /* events sent */
	TT_CNT_XFER_OTHER,                 /* XFER wrappers around calls we do not decode */
	TT_CNT_MAX
};

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_track.h - what the preempt agent knows about the RM objects of its
 * process: clients (and the fd that created them), devices, TSGs, and the
 * decision to replace libcuda's SET_TIMESLICE value.
 *
 * Owns: bounded tables, decoding of completed RM calls into table changes,
 * the rewrite decision. Does not own: locking, ioctl(), sockets, threads.
 * Nothing here makes a system call, so it is unit-tested directly; the
 * caller holds its lock around every function that takes a struct pa_track.
 */
#ifndef GPUQOS_PREEMPT_TRACK_H
#define GPUQOS_PREEMPT_TRACK_H

#include "abi/gq_proto.h"
#include "abi/rm_abi.h"

/* A process has a handful of contexts, each with 4 TSGs; these bounds leave
 * room for many. Overflow means "not tracked" and a counter, never a crash. */
#define PA_MAX_CLIENTS 64
#define PA_MAX_DEVICES 256
#define PA_MAX_TSGS 1024

struct pa_client {
	int used;
	int fd;
	rm_handle h;
};

struct pa_device {
	int used;
	rm_handle h_client;
	rm_handle h;
	rm_u32 instance;       /* NV0080_ALLOC_PARAMETERS.deviceId */
	rm_handle h_subdevice; /* the first subdevice under it, 0 if none seen */
};

/* Channels of one TSG the library can name in a DISABLE_CHANNELS. A CUDA
 * context's GR TSG has 8 on an H100 and an H200; a TSG with more than
 * this cannot be gated (every channel must be disabled, or none). */
#define PA_TSG_MAX_CHANS 32

struct pa_tsg {
	int used;
	int fd; /* the fd that owns the client: controls must go there */
	rm_handle h_client;
	rm_handle h;
	rm_handle h_device;
	rm_u32 device_instance;  /* GQ_UNKNOWN if the device was not seen */
	rm_u32 engine_type;      /* GQ_UNKNOWN if the alloc had no params */
	rm_u32 timeslice_us;     /* last value RM accepted, or GQ_UNKNOWN */
	rm_u32 app_timeslice_us; /* last value the application asked for */
	rm_u32 interleave;       /* last level RM accepted, or GQ_UNKNOWN */
	/* Bumped by every SET_TIMESLICE or SET_INTERLEAVE recorded: the
	 * library's thread compares it across a control of its own to learn
	 * whether an application call was recorded meanwhile. */
	unsigned set_seq;
	rm_handle h_subdevice;   /* of the TSG's device, 0 if not seen yet */
	unsigned nchans;
	int chans_overflow;      /* a channel was not recorded: never gate */
	rm_handle chans[PA_TSG_MAX_CHANS];
	/* Gating (preempt_gate.c): channels disabled (gated), and in a
	 * rotation until lease_end_ns (leased). */
	int gated;
	int leased;
	rm_u64 lease_end_ns;
	/* A window (preempt_window.c) disabled its channels: off until the
	 * window ends, and then on unless gated. */
	int windowed;
};

struct pa_track_counters {
	unsigned long client_overflow;
	unsigned long device_overflow;
	unsigned long tsg_overflow;
};

struct pa_track {
	/* *_hi: one past the highest slot ever used, so scans stay short. */
	unsigned client_hi, device_hi, tsg_hi;
	unsigned ntsg;
	struct pa_track_counters ctr;
	struct pa_client clients[PA_MAX_CLIENTS];
	struct pa_device devices[PA_MAX_DEVICES];
	struct pa_tsg tsgs[PA_MAX_TSGS];
};

/* A TSG appeared or changed (upsert), or went away. */
enum pa_event_type {
	PA_EV_TSG = 1,
	PA_EV_TSG_GONE = 2,
	PA_EV_TSG_APPLY = 3, /* agent thread: set a new TSG to value_us */
};

struct pa_event {
	enum pa_event_type type;
	struct pa_tsg tsg;
	rm_u32 value_us;   /* PA_EV_TSG_APPLY only */
	unsigned long seq; /* PA_EV_TSG_APPLY only: for the waiting thread */
};

typedef void pa_emit_fn(void *ctx, const struct pa_event *ev);

/* One RM call, unwrapped from its XFER wrapper if it had one. */
struct pa_call {
	enum rm_call_kind kind; /* ALLOC21, ALLOC64, CONTROL or FREE */
	void *block;            /* the parameter block of that kind */
	int xfer;               /* it came inside NV_ESC_IOCTL_XFER_CMD */
	struct rm_xfer *outer;  /* the wrapper, when xfer */
};

/* Unwrap the argument of an ioctl of kind `kind`. Returns 0 and fills c
 * for a call gpuqos decodes, -1 otherwise (including NULL pointers). */
int pa_unwrap(enum rm_call_kind kind, void *arg, struct pa_call *c);

/* The RM status word of a decoded call (read it after the call). */
rm_u32 pa_call_status(const struct pa_call *c);

/* Whether a completed, successful call can change the tables. Reads only
 * the call's block, never the tables: callers skip their lock when 0. */
int pa_track_wants(const struct pa_call *c);

/* Whether an ioctl of kind with arg that returned ret is to be applied:
 * it succeeded (ret 0 and RM status 0) and it can change the tables.
 * Fills c. Called after the call: a failed call is never tracked. */
int pa_track_should_apply(enum rm_call_kind kind, void *arg, int ret, struct pa_call *c);

#define PA_APPLY_NEW_CLIENT 0x1u

/* Apply a completed call issued on fd. The caller has checked that ioctl()
 * returned 0 and the RM status is 0. Emits TSG / TSG_GONE events. Returns
 * PA_APPLY_* bits. */
unsigned pa_track_apply(struct pa_track *t, int fd, const struct pa_call *c, pa_emit_fn *emit,
			void *ctx);

void pa_track_init(struct pa_track *t);
struct pa_tsg *pa_track_tsg_find(struct pa_track *t, rm_handle h_client, rm_handle h);
/* The device instance of device h_device, or of the device whose first
 * subdevice is h_subdevice, under h_client; GQ_UNKNOWN if not seen. */
rm_u32 pa_track_device_instance(struct pa_track *t, rm_handle h_client, rm_handle h_device);
rm_u32 pa_track_subdevice_instance(const struct pa_track *t, rm_handle h_client,
				   rm_handle h_subdevice);

/* Record the outcome of a SET_TIMESLICE on a TSG: app_us is what the
 * application asked for; accepted says whether RM took rm_us. Emits an
 * upsert when the TSG is tracked. */
void pa_track_note_timeslice(struct pa_track *t, rm_handle h_client, rm_handle h, rm_u64 app_us,
			     int accepted, rm_u64 rm_us, pa_emit_fn *emit, void *ctx);

/* Drop every client created on fd (with its devices and TSGs) and every
 * TSG owned through fd; the fd is being closed. */
void pa_track_close_fd(struct pa_track *t, int fd, pa_emit_fn *emit, void *ctx);

/* Whether any client or TSG is owned through fd. */
int pa_track_fd_in_use(const struct pa_track *t, int fd);

/* Copy every live TSG into out (at most max); returns how many. */
unsigned pa_track_snapshot(const struct pa_track *t, struct pa_tsg *out, unsigned max);

/* GQ_TSG_F_* of a TSG as the library reports it. */
rm_u32 pa_tsg_flags(const struct pa_tsg *g);

/* Fill the DISABLE_CHANNELS parameters that disable (or enable) every
 * channel of g. Returns 0, or GQ_ERR_NOT_GATEABLE when g has no subdevice
 * or channels the library knows all of. */
rm_u32 pa_gate_params(const struct pa_tsg *g, int disable, struct rm_disable_channels *out);

/* The timeslice policy asks for on a TSG of this engine type: gr_us for
 * graphics/compute engines, copy_us for copy engines, 0 (leave) otherwise. */
rm_u32 pa_policy_value(rm_u32 engine_type, rm_u32 gr_us, rm_u32 copy_us);

/* The rewrite of one SET_TIMESLICE, decided before it is issued. */
struct pa_rewrite {
	rm_handle h_client;
	rm_handle h_tsg;
	rm_u64 app_us;  /* what the application asked for */
	rm_u32 value_us; /* what gpuqos issues instead */
};

/* Decide whether call c (not yet issued) is a SET_TIMESLICE on a tracked
 * TSG that policy wants at another value. Returns 1 and fills rw if so. */
int pa_rewrite_plan(struct pa_track *t, const struct pa_call *c, rm_u32 gr_us, rm_u32 copy_us,
		    struct pa_rewrite *rw);

/* Whether c is a well-formed SET_TIMESLICE control (cheap; no tables). */
int pa_call_is_set_timeslice(const struct pa_call *c);

#endif /* GPUQOS_PREEMPT_TRACK_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tsgtrace_api.h - the user-space face of gpuqos's RM tracer: load and
 * attach the BPF programs (or re-use the ones already attached), read the
 * event ring without blocking, dump the pinned live TSG and channel
 * tables, read the drop counters.
 *
 * Owns: the API the node agent and gpuqos-tsgtrace use. Does not own: the
 * event loop (the caller polls tsgtrace_fd()), what a TSG means for policy.
 *
 * No threads, no blocking calls after tsgtrace_open(). Not thread-safe:
 * one tracer is used from one event loop.
 */
#ifndef GPUQOS_TSGTRACE_API_H
#define GPUQOS_TSGTRACE_API_H

#include <stdbool.h>
#include <stddef.h>

#include "bpf/tsgtrace.h"

#define TSGTRACE_DEFAULT_PIN_DIR "/sys/fs/bpf/gpuqos"

enum tsgtrace_mode {
	TSGTRACE_MODE_AUTO = 0,   /* tracepoint if tracefs shows sys_enter_ioctl, else tp_btf */
	TSGTRACE_MODE_TRACEPOINT, /* syscalls/sys_{enter,exit}_ioctl: needs tracefs mounted */
	TSGTRACE_MODE_TP_BTF,     /* tp_btf/sys_{enter,exit}: no tracefs, sees every syscall */
};

struct tsgtrace_opts {
	const char *pin_dir;     /* NULL: TSGTRACE_DEFAULT_PIN_DIR; must be on bpffs */
	unsigned int target_tgid; /* trace only this process; 0: all */
	enum tsgtrace_mode mode;
	/* false (the default): the links are pinned too, so the programs stay
	 * attached after tsgtrace_close() or a crash, and a restarted agent
	 * loses nothing. true: tsgtrace_close() detaches (removes the link
	 * pins); the tables stay pinned but miss what happens until the next
	 * open. */
	bool detach_on_close;
	/* Open the pinned tables only: nothing is loaded or attached, there is
	 * no ring (tsgtrace_fd() is -1). For inspection tools. */
	bool dump_only;
	bool report_failures;      /* also send calls the RM refused (status != 0) */
	bool test_verifier_reject; /* tests only: make the verifier refuse the programs */
	/* Tests only: the ring's size in bytes (a power of two, at least a
	 * page) instead of TT_RINGBUF_BYTES, to fill it with a few events.
	 * 0: the default. Pins of another size are recreated. */
	unsigned int test_ring_bytes;
	/* Informational lines (pins recreated, mode chosen). NULL: stderr. */
	void (*log)(void *ctx, const char *line);
	void *log_ctx;
};

struct tsgtrace;

/* Returns NULL on failure with a message in err (the verifier's last
 * lines if it refused a program). Needs CAP_BPF+CAP_PERFMON (or root), and
 * CAP_SYS_ADMIN to mount bpffs when it is missing. */
struct tsgtrace *tsgtrace_open(const struct tsgtrace_opts *o, char *err, size_t errlen);

/* The ring buffer's epoll fd: readable when events are waiting. */
int tsgtrace_fd(const struct tsgtrace *t);

/* Return 0 to go on; a negative value stops consume/dump and is returned. */
typedef int (*tsgtrace_event_fn)(void *ctx, const struct tt_event *ev);
typedef int (*tsgtrace_tsg_fn)(void *ctx, const struct tt_obj_key *key,
			       const struct tt_tsg_val *val);
typedef int (*tsgtrace_chan_fn)(void *ctx, const struct tt_obj_key *key,
				const struct tt_chan_val *val);
typedef int (*tsgtrace_client_fn)(void *ctx, const struct tt_client_key *key,
				  const struct tt_client_val *val);

/* Deliver every waiting event; never blocks. Returns the number delivered
 * or a negative errno / callback value. */
int tsgtrace_consume(struct tsgtrace *t, tsgtrace_event_fn fn, void *ctx);

/* Walk the pinned live tables. Returns the number of entries visited or a
 * negative errno / callback value. A walk concurrent with updates may miss
 * or repeat an entry (a hash map property); events fill the gap. Each
 * visits at most its table's capacity (TT_MAX_*). tsgtrace_dump: TSGs;
 * tsgtrace_dump_channels: the channels under them, each with its TSG and
 * whether the RM holds it disabled. */
int tsgtrace_dump(struct tsgtrace *t, tsgtrace_tsg_fn fn, void *ctx);
int tsgtrace_dump_channels(struct tsgtrace *t, tsgtrace_chan_fn fn, void *ctx);
int tsgtrace_dump_clients(struct tsgtrace *t, tsgtrace_client_fn fn, void *ctx);

struct tsgtrace_counters {
	unsigned long long v[TT_CNT_MAX]; /* enum tt_counter, summed over CPUs */
	unsigned long long bad_records;   /* ring records of an unexpected size */
};
int tsgtrace_counters(const struct tsgtrace *t, struct tsgtrace_counters *c);
const char *tsgtrace_counter_name(unsigned int which);

/* "tracepoint", "tp_btf", or "none" (dump_only). */
const char *tsgtrace_attach_mode(const struct tsgtrace *t);

/* What this open found under the pin directory. */
#define TSGTRACE_INHERITED_TABLES 0x1u /* live tables re-used */
#define TSGTRACE_INHERITED_LINKS 0x2u  /* programs were attached: no gap */
#define TSGTRACE_RECREATED 0x4u        /* pins of another layout were removed */
unsigned int tsgtrace_inherited(const struct tsgtrace *t);

/* Release this process's handles. Pins stay; with detach_on_close the
 * link pins are removed first, which detaches the programs. */
void tsgtrace_close(struct tsgtrace *t);

/* Remove every pin under pin_dir (detaches the programs, frees the tables
 * once nobody holds them). 0 or -errno. */
int tsgtrace_unpin(const char *pin_dir, char *err, size_t errlen);

#endif

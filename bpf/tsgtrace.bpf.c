// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * tsgtrace.bpf.c - gpuqos's kernel-side tracer of NVIDIA RM ioctls.
 *
 * Owns: decoding RM allocs, frees and the TSG scheduling controls at the
 * ioctl syscall boundary, the live tables of clients, devices, TSGs and
 * their channels per process (pinned by user space, so they outlive an
 * agent restart), the event ring and the drop counters. Does not own: attaching, pinning, or
 * deciding anything about a TSG (tsgtrace.c and the node agent do).
 *
 * Two program sets, one object: the syscall tracepoints (need tracefs; fire
 * only for ioctl) and tp_btf raw syscall hooks (no tracefs; fire for every
 * syscall and filter on the ioctl number). User space autoloads one set.
 * Both sets share every map, including the in-flight map, so while an old
 * and a new set are both attached (an agent restart) a call is reported once.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "abi/rm_abi.h"
#include "bpf/tsgtrace.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The syscall number, still in the user registers at sys_exit. */
#if defined(__TARGET_ARCH_x86)
#define TT_SYSCALL_NR(regs) ((regs)->orig_ax) /* tp_btf: a direct, BTF-checked load */
#elif defined(__TARGET_ARCH_arm64)
#define TT_SYSCALL_NR(regs) ((regs)->syscallno)
#else
#error "gpuqos tsgtrace: set __TARGET_ARCH_x86 or __TARGET_ARCH_arm64"
#endif

/* Knobs, set by user space before load. */
const volatile __u32 targ_tgid = 0;       /* only this process; 0 = all */
const volatile __u32 ioctl_nr = 16;       /* __NR_ioctl of the target arch (tp_btf set) */
const volatile bool report_failures = false; /* also send calls RM refused (debugging) */
/* Test-only: makes the verifier reject the program, to exercise the
 * verifier-log path. A known-false constant is pruned before verification. */
const volatile bool test_verifier_reject = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TT_MAX_INFLIGHT);
	__type(key, __u64);
	__type(value, struct tt_inflight);
} tt_inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TT_MAX_TSGS);
	__type(key, struct tt_obj_key);
	__type(value, struct tt_tsg_val);
} tt_tsgs SEC(".maps");

/* Channels under a live TSG, and the state the RM holds them in. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TT_MAX_CHANNELS);
	__type(key, struct tt_obj_key);
	__type(value, struct tt_chan_val);
} tt_channels SEC(".maps");

/* TSG (its tt_tsgs key) -> channels of it in tt_channels. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TT_MAX_TSGS);
	__type(key, struct tt_obj_key);
	__type(value, __u32);
} tt_tsg_chans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TT_MAX_DEVICES);
	__type(key, struct tt_obj_key);
	__type(value, struct tt_dev_val);
} tt_devices SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TT_MAX_CLIENTS);
	__type(key, struct tt_client_key);
	__type(value, struct tt_client_val);
} tt_clients SEC(".maps");

/* Client handle -> owning tgid: a control may come from another process
 * (the agent's pidfd_getfd duplicate), and must update the owner's entry.
 * RM client handles are unique across the RM. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TT_MAX_CLIENTS);
	__type(key, __u32);
	__type(value, __u32);
} tt_owners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TT_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct tt_proc_val);
} tt_procs SEC(".maps");

/* tgid -> when it started (its leader's start_boottime), beside tt_procs. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TT_MAX_PROCS);
	__type(key, __u32);
	__type(value, __u64);
} tt_starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, TT_RINGBUF_BYTES);
} tt_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TT_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} tt_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tt_meta);
} tt_meta SEC(".maps");

/* Scratch for the unbounded-read test knob (never read otherwise). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tt_scratch SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&tt_counters, &which);

	if (c)
		*c += 1; /* per-CPU: no atomics needed */
}

/* ------------------------------------------------------------------ */
/* Enter: classify by exact request value, remember the block pointer. */
/* ------------------------------------------------------------------ */

static __always_inline int on_enter(int fd, __u64 request, __u64 arg)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct tt_inflight in = {};
	enum rm_call_kind kind;

	kind = rm_call_kind_of(request);
	if (kind == RM_CALL_NONE || arg == 0)
		return 0;
	if (targ_tgid && (__u32)(id >> 32) != targ_tgid)
		return 0;

	if (test_verifier_reject) {
		/* Deliberately unbounded: the verifier must refuse it. */
		__u32 zero = 0;
		__u64 *n = bpf_map_lookup_elem(&tt_scratch, &zero);
		char buf[16];

		if (n)
			bpf_probe_read_user(buf, *n, (void *)arg);
	}

	in.fd = fd;
	in.params = arg;
	if (kind == RM_CALL_XFER) {
		struct rm_xfer x;

		/* Bounded: exactly the 16-byte wrapper. */
		if (bpf_probe_read_user(&x, sizeof(x), (void *)arg)) {
			count(TT_CNT_READ_FAULT);
			return 0;
		}
		kind = rm_xfer_kind(&x);
		if (kind == RM_CALL_NONE || x.ptr == 0) {
			count(TT_CNT_XFER_OTHER);
			return 0;
		}
		in.params = x.ptr;
		in.flags = TT_F_XFER;
	}
	in.call = kind;
	count(TT_CNT_RM_CALLS);
	if (bpf_map_update_elem(&tt_inflight, &id, &in, BPF_ANY))
		count(TT_CNT_INFLIGHT_FULL);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Exit helpers                                                        */
/* ------------------------------------------------------------------ */

/* Largest parameter block decoded (NVOS64). */
#define TT_BLOCK_MAX 48
union tt_block {
	struct rm_alloc64_params a64;
	struct rm_alloc21_params a21;
	struct rm_control_params ctl;
	struct rm_free_params fr;
	__u8 raw[TT_BLOCK_MAX];
};
_Static_assert(sizeof(union tt_block) == TT_BLOCK_MAX, "block buffer");

/* Read n bytes of user memory into dst (of capacity cap). The size is
 * clamped and the same variable re-checked right before the read, the
 * form the verifier accepts. */
static __always_inline int read_user_clamped(void *dst, __u32 cap, __u32 n, __u64 src)
{
	if (n > cap)
		n = cap;
	if (n == 0 || n > TT_BLOCK_MAX)
		return -1;
	return bpf_probe_read_user(dst, n, (const void *)src);
}

static __always_inline struct tt_event *ev_reserve(__u32 type, const struct tt_inflight *in,
						   __u64 id)
{
	struct tt_event *ev = bpf_ringbuf_reserve(&tt_events, sizeof(*ev), 0);

	if (!ev) {
		count(TT_CNT_RINGBUF_FULL);
		return NULL;
	}
	__builtin_memset(ev, 0, sizeof(*ev));
	ev->ts_ns = bpf_ktime_get_ns();
	ev->cgroup_id = bpf_get_current_cgroup_id();
	ev->type = type;
	ev->tgid = id >> 32;
	ev->tid = (__u32)id;
	ev->fd = in ? in->fd : -1;
	ev->call = in ? in->call : 0;
	ev->flags = in ? in->flags : 0;
	ev->engine_type = TT_UNKNOWN;
	ev->device_id = TT_UNKNOWN;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	return ev;
}

static __always_inline void ev_submit(struct tt_event *ev)
{
	bpf_ringbuf_submit(ev, 0);
	count(TT_CNT_EVENTS);
}

/* The same record built on the stack, for a handler that must update the
 * live tables whether or not the ring has room: sent last, by copy. */
static __always_inline void ev_init(struct tt_event *ev, __u32 type, const struct tt_inflight *in,
				    __u64 id)
{
	__builtin_memset(ev, 0, sizeof(*ev));
	ev->ts_ns = bpf_ktime_get_ns();
	ev->cgroup_id = bpf_get_current_cgroup_id();
	ev->type = type;
	ev->tgid = id >> 32;
	ev->tid = (__u32)id;
	ev->fd = in->fd;
	ev->call = in->call;
	ev->flags = in->flags;
	ev->engine_type = TT_UNKNOWN;
	ev->device_id = TT_UNKNOWN;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
}

static __always_inline void ev_output(struct tt_event *ev)
{
	if (bpf_ringbuf_output(&tt_events, ev, sizeof(*ev), 0))
		count(TT_CNT_RINGBUF_FULL);
	else
		count(TT_CNT_EVENTS);
}

/* When the calling process started (its leader's start_boottime), for a
 * reader after a restart to tell a reused tgid from the process. */
static __always_inline __u64 leader_start_ns(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();

	if (!bpf_core_field_exists(task->start_boottime))
		return 0;
	return BPF_CORE_READ(task, group_leader, start_boottime);
}

/* Owner of a client: the caller if it allocated it, else whoever did. */
static __always_inline __u32 client_owner(__u32 tgid, __u32 hClient)
{
	struct tt_client_key ck = { .tgid = tgid, .hClient = hClient };
	__u32 *owner;

	if (bpf_map_lookup_elem(&tt_clients, &ck))
		return tgid;
	owner = bpf_map_lookup_elem(&tt_owners, &hClient);
	return owner ? *owner : 0;
}

/* bpf_for_each_map_elem callback context: delete what matches. A zero
 * field matches anything (handles and tgids are never 0). */
struct sweep_ctx {
	__u32 tgid;
	__u32 hClient;
	__u32 hDevice; /* TSGs and channels: match the (TSG's) parent device */
	__u32 hTsg;    /* channels only: match the parent TSG */
	__u32 removed; /* TSGs removed */
};

/* An object of the sweep's tgid (and client, and device if it names them). */
static __always_inline bool sweep_matches(const struct sweep_ctx *c, const struct tt_obj_key *key,
					  __u32 hDevice)
{
	return key->tgid == c->tgid && (!c->hClient || key->hClient == c->hClient) &&
	       (!c->hDevice || hDevice == c->hDevice);
}

/* The TSG's channel count goes with it; the channels are swept by the
 * caller's own walk of tt_channels. */
static long sweep_tsg(struct bpf_map *map, struct tt_obj_key *key, struct tt_tsg_val *val,
		      struct sweep_ctx *c)
{
	if (!sweep_matches(c, key, val->hDevice))
		return 0;
	bpf_map_delete_elem(&tt_tsg_chans, key);
	if (bpf_map_delete_elem(map, key) == 0)
		c->removed++;
	return 0;
}

static long sweep_chan(struct bpf_map *map, struct tt_obj_key *key, struct tt_chan_val *val,
		       struct sweep_ctx *c)
{
	if (sweep_matches(c, key, val->hDevice) && (!c->hTsg || val->hTsg == c->hTsg))
		bpf_map_delete_elem(map, key);
	return 0;
}

static long sweep_dev(struct bpf_map *map, struct tt_obj_key *key, struct tt_dev_val *val,
		      struct sweep_ctx *c)
{
	if (key->tgid != c->tgid)
		return 0;
	if (c->hClient && key->hClient != c->hClient)
		return 0;
	bpf_map_delete_elem(map, key);
	return 0;
}

static long sweep_client(struct bpf_map *map, struct tt_client_key *key,
			 struct tt_client_val *val, struct sweep_ctx *c)
{
	__u32 h = key->hClient;
	__u32 *owner;

	if (key->tgid != c->tgid)
		return 0;
	owner = bpf_map_lookup_elem(&tt_owners, &h);
	if (owner && *owner == c->tgid)
		bpf_map_delete_elem(&tt_owners, &h);
	bpf_map_delete_elem(map, key);
	return 0;
}

/* A device or TSG was inserted under this client: its free must sweep. */
static __always_inline void client_child_add(__u32 tgid, __u32 hClient)
{
	struct tt_client_key ck = { .tgid = tgid, .hClient = hClient };
	struct tt_client_val *cv = bpf_map_lookup_elem(&tt_clients, &ck);

	if (cv)
		__sync_fetch_and_add(&cv->children, 1);
}

static __always_inline void proc_client_add(__u32 tgid)
{
	struct tt_proc_val *p = bpf_map_lookup_elem(&tt_procs, &tgid);
	struct tt_proc_val init = { .clients = 1 };
	__u64 start;

	if (p) {
		__sync_fetch_and_add(&p->clients, 1);
		return;
	}
	/* The caller is the process itself: its start is the tgid's. */
	start = leader_start_ns();
	if (start)
		bpf_map_update_elem(&tt_starts, &tgid, &start, BPF_ANY);
	if (bpf_map_update_elem(&tt_procs, &tgid, &init, BPF_NOEXIST) == -17 /* EEXIST */) {
		p = bpf_map_lookup_elem(&tt_procs, &tgid);
		if (p)
			__sync_fetch_and_add(&p->clients, 1);
	}
}

/* ------------------------------------------------------------------ */
/* Exit: decode what RM did                                            */
/* ------------------------------------------------------------------ */

/* One more channel of the TSG {tgid, hClient, hTsg} in tt_channels. */
static __always_inline void tsg_chans_add(__u32 tgid, __u32 hClient, __u32 hTsg)
{
	struct tt_obj_key k = { .tgid = tgid, .hClient = hClient, .handle = hTsg };
	__u32 one = 1, *n = bpf_map_lookup_elem(&tt_tsg_chans, &k);

	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	if (bpf_map_update_elem(&tt_tsg_chans, &k, &one, BPF_NOEXIST) == -17 /* EEXIST */) {
		n = bpf_map_lookup_elem(&tt_tsg_chans, &k);
		if (n)
			__sync_fetch_and_add(n, 1);
	}
}

static __always_inline void on_alloc(const struct tt_inflight *in, const union tt_block *b,
				     __u64 id)
{
	struct rm_alloc_view v;
	struct tt_event e, *ev = &e;
	struct tt_tsg_val *parent_tsg = NULL;
	__u32 tgid = id >> 32;
	__u32 type, psize;
	__u64 cg;

	if (rm_alloc_view_of((enum rm_call_kind)in->call, b, &v))
		return;
	if (v.status != RM_OK && !report_failures)
		return;
	if (rm_class_is_client(v.hClass))
		type = TT_EV_CLIENT;
	else if (v.hClass == RM_CLASS_DEVICE)
		type = TT_EV_DEVICE;
	else if (v.hClass == RM_CLASS_TSG)
		type = TT_EV_TSG;
	else if (rm_class_is_channel(v.hClass))
		type = TT_EV_CHANNEL;
	else
		return;

	/* Built on the stack and sent last: a full ring loses the event,
	 * never the table entry (a restarted agent reads the tables). */
	ev_init(ev, type, in, id);
	cg = ev->cgroup_id;
	ev->hClass = v.hClass;
	ev->status = v.status;
	ev->hParent = v.hObjectParent;
	ev->hObject = v.hObjectNew;
	/* A client's own handle is its hRoot once allocated. */
	ev->hClient = type == TT_EV_CLIENT ? v.hObjectNew : v.hRoot;
	psize = rm_alloc_params_size(&v);

	if (type == TT_EV_DEVICE && psize >= sizeof(__u32)) {
		__u32 dev;

		if (bpf_probe_read_user(&dev, sizeof(dev), (const void *)v.pAllocParms) == 0)
			ev->device_id = dev;
		else
			count(TT_CNT_ALLOC_PARAMS_FAULT);
	} else if (type == TT_EV_TSG &&
		   psize >= __builtin_offsetof(struct rm_tsg_alloc, engineType) + sizeof(__u32)) {
		__u32 eng;

		if (bpf_probe_read_user(&eng, sizeof(eng),
					(const void *)(v.pAllocParms +
						       __builtin_offsetof(struct rm_tsg_alloc,
									  engineType))) == 0)
			ev->engine_type = eng;
		else
			count(TT_CNT_ALLOC_PARAMS_FAULT);
	}

	ev->owner_tgid = type == TT_EV_CLIENT ? tgid : client_owner(tgid, ev->hClient);
	if (ev->owner_tgid && ev->owner_tgid != tgid)
		ev->flags |= TT_F_FOREIGN;

	if (type == TT_EV_TSG || type == TT_EV_CHANNEL) {
		/* A TSG's parent is its device; a channel's is its TSG. */
		struct tt_obj_key pk = { .tgid = ev->owner_tgid, .hClient = ev->hClient,
					 .handle = ev->hParent };

		if (type == TT_EV_TSG) {
			struct tt_dev_val *d = bpf_map_lookup_elem(&tt_devices, &pk);

			if (d)
				ev->device_id = d->device_id;
		} else {
			parent_tsg = bpf_map_lookup_elem(&tt_tsgs, &pk);
			if (parent_tsg) {
				ev->device_id = parent_tsg->device_id;
				ev->engine_type = parent_tsg->engine_type;
			}
		}
	}

	if (v.status != RM_OK) {
		ev_output(ev);
		return;
	}

	/* The live tables. Insert failures mean a full map: counted. */
	if (type == TT_EV_CLIENT) {
		struct tt_client_key ck = { .tgid = tgid, .hClient = v.hObjectNew };
		struct tt_client_val cv = { .cgroup_id = cg, .created_ns = ev->ts_ns, .fd = in->fd,
					    .hClass = v.hClass };

		if (bpf_map_update_elem(&tt_clients, &ck, &cv, BPF_ANY) ||
		    bpf_map_update_elem(&tt_owners, &ck.hClient, &ck.tgid, BPF_ANY))
			count(TT_CNT_LIVE_FULL);
		else
			proc_client_add(tgid);
	} else if (type == TT_EV_DEVICE && ev->owner_tgid) {
		struct tt_obj_key k = { .tgid = ev->owner_tgid, .hClient = ev->hClient,
					.handle = v.hObjectNew };
		struct tt_dev_val dv = { .cgroup_id = cg, .fd = in->fd, .device_id = ev->device_id };

		if (bpf_map_update_elem(&tt_devices, &k, &dv, BPF_ANY))
			count(TT_CNT_LIVE_FULL);
		else
			client_child_add(ev->owner_tgid, ev->hClient);
	} else if (type == TT_EV_TSG && ev->owner_tgid) {
		struct tt_obj_key k = { .tgid = ev->owner_tgid, .hClient = ev->hClient,
					.handle = v.hObjectNew };
		struct tt_tsg_val tv = { .cgroup_id = cg, .created_ns = ev->ts_ns, .fd = in->fd,
					 .hDevice = v.hObjectParent, .device_id = ev->device_id,
					 .engine_type = ev->engine_type };

		if (bpf_map_update_elem(&tt_tsgs, &k, &tv, BPF_ANY))
			count(TT_CNT_LIVE_FULL);
		else
			client_child_add(ev->owner_tgid, ev->hClient);
	} else if (type == TT_EV_CHANNEL && parent_tsg) {
		/* Only channels of a TSG the table holds: the agent gates TSGs. */
		struct tt_obj_key k = { .tgid = ev->owner_tgid, .hClient = ev->hClient,
					.handle = v.hObjectNew };
		struct tt_chan_val chv = { .created_ns = ev->ts_ns, .hTsg = v.hObjectParent,
					   .hDevice = parent_tsg->hDevice, .hClass = v.hClass };

		if (bpf_map_update_elem(&tt_channels, &k, &chv, BPF_ANY))
			count(TT_CNT_LIVE_FULL);
		else
			tsg_chans_add(ev->owner_tgid, ev->hClient, v.hObjectParent);
	}
	ev_output(ev);
}

/* A channel freed on its own: its entry goes, and its TSG counts one
 * channel less (so that the TSG's free need not sweep). */
static __always_inline int chan_free(const struct tt_obj_key *k, __u32 *cls)
{
	struct tt_chan_val *ch = bpf_map_lookup_elem(&tt_channels, k);
	struct tt_obj_key tk = { .tgid = k->tgid, .hClient = k->hClient };
	__u32 *n;

	if (!ch)
		return -1;
	tk.handle = ch->hTsg;
	*cls = ch->hClass;
	if (bpf_map_delete_elem(&tt_channels, k) != 0)
		return -1;
	n = bpf_map_lookup_elem(&tt_tsg_chans, &tk);
	if (n && *n)
		__sync_fetch_and_add(n, -1);
	return 0;
}

static __always_inline void on_free(const struct tt_inflight *in, const union tt_block *b,
				    __u64 id)
{
	const struct rm_free_params *f = &b->fr;
	struct tt_event *ev;
	__u32 tgid = id >> 32;
	__u32 owner, cls = TT_UNKNOWN;

	if (f->status != RM_OK && !report_failures)
		return;
	owner = client_owner(tgid, f->hRoot);
	if (f->status == RM_OK && owner) {
		struct tt_obj_key k = { .tgid = owner, .hClient = f->hRoot, .handle = f->hObjectOld };
		struct sweep_ctx c = { .tgid = owner, .hClient = f->hRoot };

		if (f->hObjectOld == f->hRoot) {
			/* The client and everything under it. */
			struct tt_client_key ck = { .tgid = owner, .hClient = f->hRoot };
			struct tt_client_val *cv = bpf_map_lookup_elem(&tt_clients, &ck);
			struct tt_proc_val *p;

			cls = RM_CLASS_ROOT_CLIENT;
			if (!cv || cv->children) {
				bpf_for_each_map_elem(&tt_channels, sweep_chan, &c, 0);
				bpf_for_each_map_elem(&tt_tsgs, sweep_tsg, &c, 0);
				bpf_for_each_map_elem(&tt_devices, sweep_dev, &c, 0);
			}
			if (bpf_map_delete_elem(&tt_clients, &ck) == 0) {
				p = bpf_map_lookup_elem(&tt_procs, &owner);
				if (p && p->clients)
					/* clang 14 has no BPF atomic sub */
					__sync_fetch_and_add(&p->clients, -1);
			}
			bpf_map_delete_elem(&tt_owners, &ck.hClient);
		} else if (bpf_map_delete_elem(&tt_tsgs, &k) == 0) {
			/* RM frees a TSG's channels with it. */
			__u32 *n = bpf_map_lookup_elem(&tt_tsg_chans, &k);

			cls = RM_CLASS_TSG;
			if (n && *n) {
				c.hTsg = f->hObjectOld;
				bpf_for_each_map_elem(&tt_channels, sweep_chan, &c, 0);
			}
			bpf_map_delete_elem(&tt_tsg_chans, &k);
		} else if (chan_free(&k, &cls) == 0) {
			/* cls: the channel's class */
		} else if (bpf_map_delete_elem(&tt_devices, &k) == 0) {
			/* RM frees a device's TSGs (and their channels) with it. */
			cls = RM_CLASS_DEVICE;
			c.hDevice = f->hObjectOld;
			bpf_for_each_map_elem(&tt_channels, sweep_chan, &c, 0);
			bpf_for_each_map_elem(&tt_tsgs, sweep_tsg, &c, 0);
		}
	}
	ev = ev_reserve(TT_EV_FREE, in, id);
	if (!ev)
		return;
	ev->hClient = f->hRoot;
	ev->hParent = f->hObjectParent;
	ev->hObject = f->hObjectOld;
	ev->hClass = cls;
	ev->status = f->status;
	ev->owner_tgid = owner;
	if (owner && owner != tgid)
		ev->flags |= TT_F_FOREIGN;
	ev_submit(ev);
}

/* DISABLE_CHANNELS (a subdevice control: the channels name their own
 * clients): one event per channel, so that the agent can tell which
 * TSG's channels the RM holds off (a BE's gate, verified). */
static __always_inline void on_disable(const struct tt_inflight *in,
				       const struct rm_control_params *p, __u64 id)
{
	const __u8 *u = (const __u8 *)(unsigned long)p->params;
	struct tt_event *ev;
	__u32 n = 0, cl, ch, owner;
	__u8 off = 0;

	if (p->status != RM_OK || p->paramsSize < sizeof(struct rm_disable_channels) ||
	    p->params == 0)
		return;
	if (bpf_probe_read_user(&off, sizeof(off), u) ||
	    bpf_probe_read_user(&n, sizeof(n),
				u + __builtin_offsetof(struct rm_disable_channels, numChannels))) {
		count(TT_CNT_ALLOC_PARAMS_FAULT);
		return;
	}
	for (__u32 i = 0; i < RM_DISABLE_CHANNELS_MAX; i++) {
		if (i >= n)
			break;
		if (bpf_probe_read_user(&cl, sizeof(cl),
					u + __builtin_offsetof(struct rm_disable_channels, hClientList) +
						i * sizeof(__u32)) ||
		    bpf_probe_read_user(&ch, sizeof(ch),
					u + __builtin_offsetof(struct rm_disable_channels, hChannelList) +
						i * sizeof(__u32))) {
			count(TT_CNT_ALLOC_PARAMS_FAULT);
			return;
		}
		owner = client_owner(id >> 32, cl);
		if (owner) {
			/* The table first: a full ring must not lose the state. */
			struct tt_obj_key k = { .tgid = owner, .hClient = cl, .handle = ch };
			struct tt_chan_val *cv = bpf_map_lookup_elem(&tt_channels, &k);

			if (cv)
				cv->off = off != 0;
		}
		ev = ev_reserve(TT_EV_CHANNEL_STATE, in, id);
		if (!ev)
			continue;
		ev->hClient = cl;
		ev->hParent = p->hObject;
		ev->hObject = ch;
		ev->status = p->status;
		ev->value = off != 0;
		ev->owner_tgid = owner;
		if (ev->owner_tgid && ev->owner_tgid != (__u32)(id >> 32))
			ev->flags |= TT_F_FOREIGN;
		ev_submit(ev);
	}
}

static __always_inline void on_control(const struct tt_inflight *in, const union tt_block *b,
				       __u64 id)
{
	const struct rm_control_params *p = &b->ctl;
	struct tt_tsg_val *tsg;
	struct tt_obj_key k;
	struct tt_event *ev;
	__u32 tgid = id >> 32;
	__u32 type, need;
	__u64 value = 0;

	if (p->cmd == RM_CTRL_TSG_SET_TIMESLICE) {
		type = TT_EV_TIMESLICE;
		need = sizeof(struct rm_tsg_timeslice);
	} else if (p->cmd == RM_CTRL_TSG_SET_INTERLEAVE) {
		type = TT_EV_INTERLEAVE;
		need = sizeof(struct rm_tsg_interleave);
	} else {
		if (p->cmd == RM_CTRL_FIFO_DISABLE_CHANNELS)
			on_disable(in, p, id);
		return;
	}
	if (p->status != RM_OK && !report_failures)
		return;
	if (p->paramsSize < need || p->params == 0)
		return;
	if (type == TT_EV_TIMESLICE) {
		struct rm_tsg_timeslice ts;

		if (bpf_probe_read_user(&ts, sizeof(ts), (const void *)p->params)) {
			count(TT_CNT_ALLOC_PARAMS_FAULT);
			return;
		}
		value = ts.timesliceUs;
	} else {
		struct rm_tsg_interleave il;

		if (bpf_probe_read_user(&il, sizeof(il), (const void *)p->params)) {
			count(TT_CNT_ALLOC_PARAMS_FAULT);
			return;
		}
		value = il.tsgInterleaveLevel;
	}

	k.tgid = client_owner(tgid, p->hClient);
	k.hClient = p->hClient;
	k.handle = p->hObject;
	tsg = k.tgid ? bpf_map_lookup_elem(&tt_tsgs, &k) : NULL;
	if (tsg && p->status == RM_OK) {
		/* Racy against a concurrent SET on another CPU, as the RM
		 * itself is: the last writer wins in both. */
		if (type == TT_EV_TIMESLICE) {
			tsg->timeslice_us = value;
			tsg->flags |= TT_TSG_TIMESLICE_SET;
		} else {
			tsg->interleave = (__u32)value;
			tsg->flags |= TT_TSG_INTERLEAVE_SET;
		}
	}

	ev = ev_reserve(type, in, id);
	if (!ev)
		return;
	ev->hClient = p->hClient;
	ev->hObject = p->hObject;
	ev->hClass = RM_CLASS_TSG;
	ev->status = p->status;
	ev->value = value;
	ev->owner_tgid = k.tgid;
	if (k.tgid && k.tgid != tgid)
		ev->flags |= TT_F_FOREIGN;
	if (tsg) {
		ev->hParent = tsg->hDevice;
		ev->engine_type = tsg->engine_type;
		ev->device_id = tsg->device_id;
	}
	ev_submit(ev);
}

static __always_inline int on_exit(long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct tt_inflight *pin, in;
	union tt_block b;
	__u32 size;

	pin = bpf_map_lookup_elem(&tt_inflight, &id);
	if (!pin)
		return 0;
	in = *pin;
	/* Always delete, whatever happens next. */
	bpf_map_delete_elem(&tt_inflight, &id);
	if (ret != 0)
		return 0; /* the ioctl itself failed: RM never ran */

	size = rm_params_size((enum rm_call_kind)in.call);
	__builtin_memset(&b, 0, sizeof(b));
	if (read_user_clamped(&b, sizeof(b), size, in.params)) {
		count(TT_CNT_READ_FAULT);
		return 0;
	}
	switch (in.call) {
	case RM_CALL_ALLOC64:
	case RM_CALL_ALLOC21:
		on_alloc(&in, &b, id);
		break;
	case RM_CALL_FREE:
		on_free(&in, &b, id);
		break;
	case RM_CALL_CONTROL:
		on_control(&in, &b, id);
		break;
	default:
		break;
	}
	return 0;
}

/* Process exit: the last thread of a group that had RM clients. RM frees
 * the clients when the file closes; the tables forget them now. */
static __always_inline int on_task_exit(struct task_struct *task)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct sweep_ctx c = { .tgid = tgid };
	struct tt_event *ev;
	int live;

	/* A thread killed mid-ioctl leaves no enter behind. */
	bpf_map_delete_elem(&tt_inflight, &id);
	if (!bpf_map_lookup_elem(&tt_procs, &tgid))
		return 0;
	/* Not "is the leader": a leader may pthread_exit() while its other
	 * threads keep using the GPU. signal->live reaches 0 on the last. */
	live = BPF_CORE_READ(task, signal, live.counter);
	if (live != 0)
		return 0;

	bpf_for_each_map_elem(&tt_channels, sweep_chan, &c, 0);
	bpf_for_each_map_elem(&tt_tsgs, sweep_tsg, &c, 0);
	bpf_for_each_map_elem(&tt_devices, sweep_dev, &c, 0);
	bpf_for_each_map_elem(&tt_clients, sweep_client, &c, 0);
	bpf_map_delete_elem(&tt_procs, &tgid);
	bpf_map_delete_elem(&tt_starts, &tgid);

	ev = ev_reserve(TT_EV_EXIT, NULL, id);
	if (!ev)
		return 0;
	ev->value = c.removed;
	ev_submit(ev);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Set 1: syscall tracepoints (tracefs)                                */
/* ------------------------------------------------------------------ */

SEC("tracepoint/syscalls/sys_enter_ioctl")
int tp_enter_ioctl(struct trace_event_raw_sys_enter *ctx)
{
	return on_enter((int)ctx->args[0], ctx->args[1], ctx->args[2]);
}

SEC("tracepoint/syscalls/sys_exit_ioctl")
int tp_exit_ioctl(struct trace_event_raw_sys_exit *ctx)
{
	return on_exit(ctx->ret);
}

SEC("tracepoint/sched/sched_process_exit")
int tp_process_exit(void *ctx)
{
	return on_task_exit((struct task_struct *)bpf_get_current_task());
}

/* ------------------------------------------------------------------ */
/* Set 2: tp_btf raw syscall hooks (no tracefs)                        */
/* ------------------------------------------------------------------ */

SEC("tp_btf/sys_enter")
int BPF_PROG(btf_sys_enter, struct pt_regs *regs, long nr)
{
	if (nr != ioctl_nr)
		return 0;
	return on_enter((int)PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs),
			PT_REGS_PARM3_CORE_SYSCALL(regs));
}

SEC("tp_btf/sys_exit")
int BPF_PROG(btf_sys_exit, struct pt_regs *regs, long ret)
{
	if (TT_SYSCALL_NR(regs) != ioctl_nr)
		return 0;
	return on_exit(ret);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(btf_process_exit, struct task_struct *task)
{
	return on_task_exit(task);
}

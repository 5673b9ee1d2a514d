/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_launch.c - counting the process's GPU launches: the node agent
 * needs to know whether an LC launches so often that the GPU switches to
 * it all the time (docs/policy.md, "Launch-bound LCs").
 *
 * Owns: the interposed dlsym(), the wrappers of libcuda's launch entry
 * points, of its event records (not launches: when a request's first one
 * came, for the wake's judging, preempt_wake_pred.c), of its waits for
 * GPU work (when a request ended, for its span, the same file) and of
 * cuGetProcAddress, and the counters (struct gq_activity).
 * Does not own: sending them (preempt_conn.c), finding libcuda's own
 * functions (preempt_cuda.c).
 *
 * How CUDA reaches the launch entry points: the runtime (cudart, static or
 * shared) dlopen()s libcuda and asks dlsym(handle, "cuGetProcAddress_v2")
 * (or "cuGetProcAddress"), then gets every driver function through it. An
 * LD_PRELOAD symbol is never found by a dlsym on another library's handle,
 * so the library interposes dlsym itself: a lookup of cuGetProcAddress or
 * of a launch function returns a wrapper that counts and calls the real
 * function; the wrapped cuGetProcAddress wraps the launch functions it
 * hands out (per-thread-stream variants included). Every other lookup goes
 * to the real dlsym with the caller's return address intact (a jump, not a
 * call), so dlsym(RTLD_NEXT, ...) keeps meaning "after the caller". That
 * needs a few instructions of assembly, written for x86-64 and AArch64;
 * elsewhere dlsym is not interposed and launches are not counted.
 * Programs linked with -lcuda call the launch functions by name: those are
 * exported too, and find the real ones with dlsym(RTLD_NEXT).
 *
 * A launch costs one clock read and three atomic operations. Wrappers are
 * a fixed set of functions, each bound to one real entry point the first
 * time it is handed out; when a set is used up, the real function is
 * handed out unwrapped (a launch function counted as missed, logged once).
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "preempt.h"
#include "preempt_cuda.h"
#include "preempt_launch.h"
#include "preempt_libc.h"
#include "preempt_wake.h"

#define PA_EXPORT __attribute__((visibility("default")))

typedef int pa_cures; /* CUresult: 0 is CUDA_SUCCESS */
#define PA_CUDA_ERROR_NOT_INITIALIZED 3

/* ---- the counters ---- */

static _Atomic rm_u64 pa_launches, pa_bursts, pa_active_ns, pa_last_ns;
static _Atomic unsigned long pa_missed;
/* When the first CUDA event was recorded after the latest burst had ended
 * (0: none since): the request's first GPU operation, if a launch follows
 * (the wake's judging, preempt_wake_pred.c). */
static _Atomic rm_u64 pa_first_op_ns;
/* When a wait for GPU work (a synchronize, or a query that said done)
 * first returned done after the latest launch: the end of the request
 * those launches made, for its span (preempt_wake_pred.c). */
static _Atomic rm_u64 pa_done_ns;

static void pa_launch_note(void)
{
	const rm_u64 tail = (rm_u64)GQ_ACTIVITY_TAIL_US * 1000u;
	rm_u64 now = pa_now_ns();
	rm_u64 prev = atomic_exchange_explicit(&pa_last_ns, now, memory_order_relaxed);

	atomic_fetch_add_explicit(&pa_launches, 1, memory_order_relaxed);
	if (prev == 0 || now < prev || now - prev > tail) {
		/* A new burst: its first launch keeps the process active for
		 * one tail. (A racing thread's older clock reading counts as
		 * a new burst too: rare, and it only adds one tail.) */
		atomic_fetch_add_explicit(&pa_bursts, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&pa_active_ns, tail, memory_order_relaxed);
		/* (A first_op left from before wakes were turned off lies far
		 * from any later wake: the judging ignores it.) */
		if (pa_wake_wanted()) {
			rm_u64 done = atomic_load_explicit(&pa_done_ns, memory_order_relaxed);

			pa_wake_request(now,
					atomic_exchange_explicit(&pa_first_op_ns, 0,
								 memory_order_relaxed),
					prev && done > prev ? done : 0);
		}
	} else {
		/* Within the last launch's tail: the tail now ends a gap later. */
		atomic_fetch_add_explicit(&pa_active_ns, now - prev, memory_order_relaxed);
	}
}

/* A CUDA event recorded: not a launch (no activity), but GPU work of the
 * request that may follow. Only the first one after a burst ended counts,
 * and only while wakes are wanted. */
static void pa_gpu_op_note(void)
{
	const rm_u64 tail = (rm_u64)GQ_ACTIVITY_TAIL_US * 1000u;
	rm_u64 now, last, none = 0;

	if (!pa_wake_wanted())
		return;
	now = pa_now_ns();
	last = atomic_load_explicit(&pa_last_ns, memory_order_relaxed);
	if (last && now > last && now - last > tail)
		atomic_compare_exchange_strong_explicit(&pa_first_op_ns, &none, now,
							memory_order_relaxed, memory_order_relaxed);
}

/* A wait for GPU work returned r: the first one that says done after the
 * latest launch marks the end of that launch's request. A wait already
 * seen since the latest launch reads no clock (applications spin on
 * cuEventQuery). */
static void pa_wait_note(pa_cures r)
{
	rm_u64 last, done, now;

	if (r != 0 || !pa_wake_wanted())
		return;
	last = atomic_load_explicit(&pa_last_ns, memory_order_relaxed);
	done = atomic_load_explicit(&pa_done_ns, memory_order_relaxed);
	if (!last || done > last)
		return;
	now = pa_now_ns();
	if (now > last)
		atomic_compare_exchange_strong_explicit(&pa_done_ns, &done, now,
							memory_order_relaxed, memory_order_relaxed);
}

void pa_launch_read(struct pa_launch_counts *c)
{
	const rm_u64 tail = (rm_u64)GQ_ACTIVITY_TAIL_US * 1000u;
	rm_u64 last;

	c->launches = atomic_load_explicit(&pa_launches, memory_order_relaxed);
	c->bursts = atomic_load_explicit(&pa_bursts, memory_order_relaxed);
	c->active_ns = atomic_load_explicit(&pa_active_ns, memory_order_relaxed);
	last = atomic_load_explicit(&pa_last_ns, memory_order_relaxed);
	/* The clock after the counters: every launch they count happened
	 * before at_ns (read first, a launch racing the read was counted past
	 * it, and a report claimed more active time than time passed). */
	c->at_ns = pa_now_ns();
	/* active_ns already holds the whole tail of the latest launch, which
	 * may still be running: count only what has passed by at_ns. A launch
	 * that swapped pa_last_ns but has not added its part yet makes this
	 * take off up to one tail too much: the node agent allows for it
	 * (docs/protocol.md, "Activity"). */
	if (last && last <= c->at_ns && c->at_ns - last < tail) {
		rm_u64 ahead = tail - (c->at_ns - last);

		c->active_ns = c->active_ns > ahead ? c->active_ns - ahead : 0;
	}
	c->missed = atomic_load_explicit(&pa_missed, memory_order_relaxed);
}

void pa_launch_child_reset(void)
{
	/* A forked child is another process: its launches start from 0. */
	atomic_store(&pa_launches, 0);
	atomic_store(&pa_bursts, 0);
	atomic_store(&pa_active_ns, 0);
	atomic_store(&pa_last_ns, 0);
	atomic_store(&pa_missed, 0);
	atomic_store(&pa_first_op_ns, 0);
	atomic_store(&pa_done_ns, 0);
}

/* ---- wrappers ---- */

/* The entry points wrapped, by their argument lists. */
enum pa_kind {
	PA_K_LAUNCH,   /* cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shm, stream, params, extra) */
	PA_K_COOP,     /* cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shm, stream, params) */
	PA_K_EX,       /* cuLaunchKernelEx(config, f, params, extra) */
	PA_K_GRAPH,    /* cuGraphLaunch(exec, stream) */
	/* cuEventRecord(event, stream) and cuEventRecordWithFlags(event,
	 * stream, flags): the flags register is passed along, unread where
	 * the function takes two. Not launches: pa_gpu_op_note. */
	PA_K_EVREC,
	PA_K_GPA,      /* cuGetProcAddress(_v2)(symbol, pfn, version, flags[, status]) */
	/* cuCtxDestroy(ctx), cuDevicePrimaryCtxRelease(dev), cuDevicePrimaryCtxReset(dev):
	 * a context goes away (preempt_wake.c must stop using it first). The
	 * one argument is passed along in its register unread. */
	PA_K_CTXGONE,
	/* cuCtxSynchronize(), cuStreamSynchronize(stream),
	 * cuEventSynchronize(event); and cuEventQuery(event),
	 * cuStreamQuery(stream): waits for GPU work, two kinds for the slots
	 * their per-thread-stream variants take. The one argument is passed
	 * along in its register (unread where there is none); the result
	 * goes to pa_wait_note. */
	PA_K_SYNC,
	PA_K_QUERY,
	PA_K_COUNT,
};

#define PA_SLOTS 4 /* wrappers of each kind: real entry points seen per kind */

static _Atomic(void *) pa_slot_real[PA_K_COUNT][PA_SLOTS];

#define PA_REAL(k, i) atomic_load_explicit(&pa_slot_real[k][i], memory_order_acquire)

typedef pa_cures (*pa_launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
				 unsigned, unsigned, void *, void **, void **);
typedef pa_cures (*pa_coop_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
			       unsigned, unsigned, void *, void **);
typedef pa_cures (*pa_ex_fn)(const void *, void *, void **, void **);
typedef pa_cures (*pa_graph_fn)(void *, void *);
typedef pa_cures (*pa_evrec_fn)(void *, void *, unsigned);
/* Both cuGetProcAddress versions go through the five-argument form: the
 * first takes four, and the fifth register is passed along unread. */
typedef pa_cures (*pa_gpa_fn)(const char *, void **, int, unsigned long long, void *);
typedef pa_cures (*pa_ctxgone_fn)(unsigned long);
typedef pa_cures (*pa_wait_fn)(void *);

static void *pa_wrap(enum pa_kind k, void *real);

#define PA_LAUNCH_W(i)                                                                         \
	static pa_cures pa_launch_w##i(void *f, unsigned gx, unsigned gy, unsigned gz,         \
				       unsigned bx, unsigned by, unsigned bz, unsigned shm,    \
				       void *st, void **params, void **extra)                  \
	{                                                                                      \
		pa_launch_note();                                                              \
		return ((pa_launch_fn)PA_REAL(PA_K_LAUNCH, i))(f, gx, gy, gz, bx, by, bz, shm, \
							       st, params, extra);             \
	}
#define PA_COOP_W(i)                                                                          \
	static pa_cures pa_coop_w##i(void *f, unsigned gx, unsigned gy, unsigned gz,          \
				     unsigned bx, unsigned by, unsigned bz, unsigned shm,     \
				     void *st, void **params)                                 \
	{                                                                                     \
		pa_launch_note();                                                             \
		return ((pa_coop_fn)PA_REAL(PA_K_COOP, i))(f, gx, gy, gz, bx, by, bz, shm, st, \
							   params);                            \
	}
#define PA_EX_W(i)                                                                     \
	static pa_cures pa_ex_w##i(const void *cfg, void *f, void **params, void **extra) \
	{                                                                              \
		pa_launch_note();                                                      \
		return ((pa_ex_fn)PA_REAL(PA_K_EX, i))(cfg, f, params, extra);         \
	}
#define PA_GRAPH_W(i)                                                     \
	static pa_cures pa_graph_w##i(void *exec, void *st)               \
	{                                                                 \
		pa_launch_note();                                         \
		return ((pa_graph_fn)PA_REAL(PA_K_GRAPH, i))(exec, st);   \
	}
#define PA_EVREC_W(i)                                                        \
	static pa_cures pa_evrec_w##i(void *ev, void *st, unsigned flags)   \
	{                                                                   \
		pa_gpu_op_note();                                           \
		return ((pa_evrec_fn)PA_REAL(PA_K_EVREC, i))(ev, st, flags); \
	}
#define PA_GPA_W(i)                                                                        \
	static pa_cures pa_gpa_w##i(const char *sym, void **pfn, int ver,                 \
				    unsigned long long flags, void *status)               \
	{                                                                                  \
		pa_cures r = ((pa_gpa_fn)PA_REAL(PA_K_GPA, i))(sym, pfn, ver, flags, status); \
		if (r == 0 && pfn && *pfn)                                                 \
			*pfn = pa_launch_wrap_gpa(sym, *pfn);                               \
		return r;                                                                  \
	}

#define PA_CTXGONE_W(i)                                                    \
	static pa_cures pa_ctxgone_w##i(unsigned long arg)                \
	{                                                                  \
		pa_wake_ctx_gone();                                        \
		return ((pa_ctxgone_fn)PA_REAL(PA_K_CTXGONE, i))(arg);     \
	}

#define PA_WAIT_W(k, pfx, i)                                   \
	static pa_cures pfx##i(void *arg)                      \
	{                                                      \
		pa_cures r = ((pa_wait_fn)PA_REAL(k, i))(arg); \
		pa_wait_note(r);                               \
		return r;                                      \
	}
#define PA_SYNC_W(i) PA_WAIT_W(PA_K_SYNC, pa_sync_w, i)
#define PA_QUERY_W(i) PA_WAIT_W(PA_K_QUERY, pa_query_w, i)

static void *pa_launch_wrap_gpa(const char *sym, void *real);

#define PA_FOUR(M) M(0) M(1) M(2) M(3)
PA_FOUR(PA_LAUNCH_W)
PA_FOUR(PA_COOP_W)
PA_FOUR(PA_EX_W)
PA_FOUR(PA_GRAPH_W)
PA_FOUR(PA_EVREC_W)
PA_FOUR(PA_GPA_W)
PA_FOUR(PA_CTXGONE_W)
PA_FOUR(PA_SYNC_W)
PA_FOUR(PA_QUERY_W)

_Static_assert(PA_SLOTS == 4, "one wrapper function per slot");

/* Wrapper i of kind k, as a plain pointer (what dlsym and pfn hold). */
static void *pa_wrapper(enum pa_kind k, unsigned i)
{
#define PA_PTRS(pfx) { (void *)pfx##0, (void *)pfx##1, (void *)pfx##2, (void *)pfx##3 }
	static void *const w[PA_K_COUNT][PA_SLOTS] = {
		[PA_K_LAUNCH] = PA_PTRS(pa_launch_w), [PA_K_COOP] = PA_PTRS(pa_coop_w),
		[PA_K_EX] = PA_PTRS(pa_ex_w),         [PA_K_GRAPH] = PA_PTRS(pa_graph_w),
		[PA_K_EVREC] = PA_PTRS(pa_evrec_w),
		[PA_K_GPA] = PA_PTRS(pa_gpa_w),       [PA_K_CTXGONE] = PA_PTRS(pa_ctxgone_w),
		[PA_K_SYNC] = PA_PTRS(pa_sync_w),     [PA_K_QUERY] = PA_PTRS(pa_query_w),
	};
#undef PA_PTRS
	return w[k][i];
}

/* The wrapper bound to real (binding a free slot if needed), or real
 * itself if every slot of its kind is bound to another function. */
static void *pa_wrap(enum pa_kind k, void *real)
{
	if (!real || pa_is_ours(real))
		return real;
	for (unsigned i = 0; i < PA_SLOTS; i++) {
		void *cur = PA_REAL(k, i);

		if (cur == real)
			return pa_wrapper(k, i);
		if (!cur) {
			void *expect = NULL;

			if (atomic_compare_exchange_strong(&pa_slot_real[k][i], &expect, real) ||
			    expect == real)
				return pa_wrapper(k, i);
		}
	}
	if (k == PA_K_EVREC || k == PA_K_SYNC || k == PA_K_QUERY)
		return real; /* the judging misses some events, the spans some ends */
	if (k == PA_K_CTXGONE) {
		/* A context could go away unseen: the wake thread must not
		 * keep one. */
		pa_wake_disable("more context teardown entry points than the library can watch");
		return real;
	}
	if (atomic_fetch_add(&pa_missed, 1) == 0)
		pa_info("more than %d %s entry points handed out: the rest are not counted",
			PA_SLOTS, k == PA_K_GPA ? "cuGetProcAddress" : "launch");
	return real;
}

/* Names, as dlsym and cuGetProcAddress see them. cuGetProcAddress takes
 * the base name and picks the per-thread-stream variant by its flags. */
static int pa_kind_of(const char *name, int with_suffixes, enum pa_kind *k)
{
	static const struct {
		const char *name;
		enum pa_kind kind;
	} names[] = {
		{ "cuLaunchKernel", PA_K_LAUNCH },
		{ "cuLaunchCooperativeKernel", PA_K_COOP },
		{ "cuLaunchKernelEx", PA_K_EX },
		{ "cuGraphLaunch", PA_K_GRAPH },
		{ "cuEventRecord", PA_K_EVREC },
		{ "cuEventRecordWithFlags", PA_K_EVREC },
		{ "cuGetProcAddress", PA_K_GPA },
		{ "cuCtxDestroy", PA_K_CTXGONE },
		{ "cuDevicePrimaryCtxRelease", PA_K_CTXGONE },
		{ "cuDevicePrimaryCtxReset", PA_K_CTXGONE },
		{ "cuCtxSynchronize", PA_K_SYNC },
		{ "cuStreamSynchronize", PA_K_SYNC },
		{ "cuEventSynchronize", PA_K_SYNC },
		{ "cuEventQuery", PA_K_QUERY },
		{ "cuStreamQuery", PA_K_QUERY },
	};
	size_t n;

	if (!name || name[0] != 'c' || name[1] != 'u')
		return 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		n = strlen(names[i].name);
		if (strncmp(name, names[i].name, n) != 0)
			continue;
		if (name[n] == '\0' ||
		    (with_suffixes && names[i].kind != PA_K_GPA && names[i].kind != PA_K_CTXGONE &&
		     strcmp(name + n, "_ptsz") == 0) ||
		    (with_suffixes && (names[i].kind == PA_K_GPA || names[i].kind == PA_K_CTXGONE) &&
		     strcmp(name + n, "_v2") == 0)) {
			*k = names[i].kind;
			return 1;
		}
	}
	return 0;
}

static void *pa_launch_wrap_gpa(const char *sym, void *real)
{
	enum pa_kind k;

	if (!pa_kind_of(sym, 0, &k))
		return real;
	return pa_wrap(k, real);
}

/* ---- dlsym ---- */

/* dlsym for a name the library wraps: the real lookup, then the wrapper.
 * The lookup is made from here, so dlsym(RTLD_NEXT, name) for these names
 * means "after this library" (documented limit). */
static void *pa_dlsym_wrapped(void *handle, const char *name)
{
	pa_dlsym_fn real = pa_real_dlsym();
	enum pa_kind k;
	void *p;

	if (!real)
		return NULL;
	p = real(handle, name);
	if (!p || !pa_kind_of(name, 1, &k))
		return p;
	/* Found this library's export (RTLD_DEFAULT, or a handle whose scope
	 * has it): hand it out only where a real definition exists, so a
	 * process without libcuda still finds no launch function. */
	if (pa_is_ours(p))
		return k != PA_K_GPA && pa_cuda_sym(name) ? p : NULL;
	return pa_wrap(k, p);
}

/* Called by the dlsym entry with its two arguments: which function the
 * entry jumps to with those same arguments and return address. */
__attribute__((used)) static void *pa_dlsym_pick(void *handle, const char *name)
{
	enum pa_kind k;

	(void)handle;
	/* Under another C library nothing is wrapped (preempt_libc.c). */
	if (pa_libc_is_glibc() && pa_kind_of(name, 1, &k))
		return (void *)pa_dlsym_wrapped;
	return (void *)pa_real_dlsym();
}

/* The exported dlsym: save the arguments, ask pa_dlsym_pick, restore them
 * and the stack, jump. A NULL pick (no real dlsym found at all) jumps to
 * pa_dlsym_none, which returns NULL. */
__attribute__((used)) static void *pa_dlsym_none(void *handle, const char *name)
{
	(void)handle;
	(void)name;
	return NULL;
}

#if defined(__x86_64__)
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
#if defined(__CET__)
	"\tendbr64\n"
#endif
	"\tpushq %rdi\n"
	"\tpushq %rsi\n"
	"\tsubq $8, %rsp\n"
	"\tcall pa_dlsym_pick\n"
	"\taddq $8, %rsp\n"
	"\tpopq %rsi\n"
	"\tpopq %rdi\n"
	"\ttestq %rax, %rax\n"
	"\tjz 1f\n"
	"\tjmp *%rax\n"
	"1:\tjmp pa_dlsym_none\n"
	".size dlsym, .-dlsym\n");
#define PA_HAVE_DLSYM 1
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, %function\n"
	"dlsym:\n"
	"\tstp x29, x30, [sp, #-32]!\n"
	"\tmov x29, sp\n"
	"\tstp x0, x1, [sp, #16]\n"
	"\tbl pa_dlsym_pick\n"
	"\tmov x16, x0\n"
	"\tldp x0, x1, [sp, #16]\n"
	"\tldp x29, x30, [sp], #32\n"
	"\tcbz x16, 1f\n"
	"\tbr x16\n"
	"1:\tb pa_dlsym_none\n"
	".size dlsym, .-dlsym\n");
#define PA_HAVE_DLSYM 1
#else
#define PA_HAVE_DLSYM 0
#endif
/* pa_launch_counting (preempt_cuda.c) says whether this entry exists. */
_Static_assert(PA_HAVE_DLSYM == PA_DLSYM_INTERPOSED, "PA_DLSYM_INTERPOSED out of step");

/* ---- the launch functions by name (programs linked with -lcuda) ---- */

/* The real definition of an exported name, looked up once into *next;
 * NULL while libcuda is not loaded. */
static void *pa_next_of(_Atomic(void *) *next, const char *name)
{
	void *p = atomic_load_explicit(next, memory_order_acquire);

	if (!p) {
		p = pa_cuda_sym(name);
		if (p)
			atomic_store_explicit(next, p, memory_order_release);
	}
	return p;
}

/* name, exported: hook() then the next definition of name. */
#define PA_BYNAME_HOOK(name, fn_t, params, args, hook)               \
	PA_EXPORT pa_cures name params                               \
	{                                                            \
		static _Atomic(void *) next;                         \
		void *p = pa_next_of(&next, #name);                  \
		if (!p)                                              \
			return PA_CUDA_ERROR_NOT_INITIALIZED;        \
		hook();                                              \
		return ((fn_t)p)args;                                \
	}
#define PA_BYNAME(name, fn_t, params, args) PA_BYNAME_HOOK(name, fn_t, params, args, pa_launch_note)

#define PA_LAUNCH_PARAMS                                                                    \
	(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
	 unsigned shm, void *st, void **params, void **extra)
#define PA_LAUNCH_ARGS (f, gx, gy, gz, bx, by, bz, shm, st, params, extra)
#define PA_COOP_PARAMS                                                                      \
	(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
	 unsigned shm, void *st, void **params)
#define PA_COOP_ARGS (f, gx, gy, gz, bx, by, bz, shm, st, params)

PA_BYNAME(cuLaunchKernel, pa_launch_fn, PA_LAUNCH_PARAMS, PA_LAUNCH_ARGS)
PA_BYNAME(cuLaunchKernel_ptsz, pa_launch_fn, PA_LAUNCH_PARAMS, PA_LAUNCH_ARGS)
PA_BYNAME(cuLaunchCooperativeKernel, pa_coop_fn, PA_COOP_PARAMS, PA_COOP_ARGS)
PA_BYNAME(cuLaunchCooperativeKernel_ptsz, pa_coop_fn, PA_COOP_PARAMS, PA_COOP_ARGS)
PA_BYNAME(cuLaunchKernelEx, pa_ex_fn,
	  (const void *cfg, void *f, void **params, void **extra), (cfg, f, params, extra))
PA_BYNAME(cuLaunchKernelEx_ptsz, pa_ex_fn,
	  (const void *cfg, void *f, void **params, void **extra), (cfg, f, params, extra))
PA_BYNAME(cuGraphLaunch, pa_graph_fn, (void *exec, void *st), (exec, st))
PA_BYNAME(cuGraphLaunch_ptsz, pa_graph_fn, (void *exec, void *st), (exec, st))

/* The CUDA event records (the wake's judging, pa_gpu_op_note). */
typedef pa_cures (*pa_evrec2_fn)(void *, void *);
PA_BYNAME_HOOK(cuEventRecord, pa_evrec2_fn, (void *ev, void *st), (ev, st), pa_gpu_op_note)
PA_BYNAME_HOOK(cuEventRecord_ptsz, pa_evrec2_fn, (void *ev, void *st), (ev, st), pa_gpu_op_note)
PA_BYNAME_HOOK(cuEventRecordWithFlags, pa_evrec_fn, (void *ev, void *st, unsigned flags),
	       (ev, st, flags), pa_gpu_op_note)
PA_BYNAME_HOOK(cuEventRecordWithFlags_ptsz, pa_evrec_fn, (void *ev, void *st, unsigned flags),
	       (ev, st, flags), pa_gpu_op_note)

/* The context teardown functions, for the wake thread (preempt_wake.c). */
#define PA_CTXGONE_BYNAME(name) \
	PA_BYNAME_HOOK(name, pa_ctxgone_fn, (unsigned long arg), (arg), pa_wake_ctx_gone)

PA_CTXGONE_BYNAME(cuCtxDestroy)
PA_CTXGONE_BYNAME(cuCtxDestroy_v2)
PA_CTXGONE_BYNAME(cuDevicePrimaryCtxRelease)
PA_CTXGONE_BYNAME(cuDevicePrimaryCtxRelease_v2)
PA_CTXGONE_BYNAME(cuDevicePrimaryCtxReset)
PA_CTXGONE_BYNAME(cuDevicePrimaryCtxReset_v2)

/* The waits for GPU work (a request's end, pa_wait_note). */
#define PA_WAIT_BYNAME(name)                                   \
	PA_EXPORT pa_cures name(void *arg)                     \
	{                                                      \
		static _Atomic(void *) next;                   \
		void *p = pa_next_of(&next, #name);            \
		pa_cures r;                                    \
		if (!p)                                        \
			return PA_CUDA_ERROR_NOT_INITIALIZED;  \
		r = ((pa_wait_fn)p)(arg);                      \
		pa_wait_note(r);                               \
		return r;                                      \
	}

PA_WAIT_BYNAME(cuCtxSynchronize)
PA_WAIT_BYNAME(cuStreamSynchronize)
PA_WAIT_BYNAME(cuStreamSynchronize_ptsz)
PA_WAIT_BYNAME(cuEventSynchronize)
PA_WAIT_BYNAME(cuEventQuery)
PA_WAIT_BYNAME(cuStreamQuery)
PA_WAIT_BYNAME(cuStreamQuery_ptsz)

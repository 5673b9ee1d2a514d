/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_wake.c - waking a periodic LC's context one switch ahead of its
 * next request.
 *
 * Behind a busy BE, every LC request pays the GPU's switch from the BE's
 * context to its own, about 200 us, before its first kernel starts. An
 * empty kernel submitted ~100 us before the request starts that switch
 * early and hides about half of it; submitted more than a switch ahead it
 * is lose-lose (the context comes in, finds nothing, and leaves again)
 * (docs/perf-log, "Starting the switch early"). This file does that for LCs
 * whose requests arrive at a steady period: it learns the period from the
 * starts of the process's launch bursts (preempt_wake_pred.c) and, from a
 * thread of its own, launches one empty kernel on a stream of its own in
 * the application's context `lead` before the next start; with a hold, it
 * launches it again every PA_WAKE_TRAIN_NS, spinning in between, until the
 * request's first launch or the hold past the predicted start. A wake that
 * turned out wasted (the request came too late) counts against further
 * ones (PA_WAKE_MISS_LIMIT); while they are held, the wakes that would
 * have been are judged too, and calm ones end the hold (PA_WAKE_RESUME).
 *
 * Owns: the wake thread, its module, function and stream, and the context
 * it saw the requests in. Does not own: counting launches
 * (preempt_launch.c, which calls pa_wake_request at each burst's first
 * launch), finding libcuda's functions (preempt_cuda.c). Off unless the
 * workload's environment sets GPUQOS_WAKE_LEAD_US, or the node agent's
 * POLICY asks (its policy file's `wake`, for an LC whose BEs it cut
 * short); where the environment sets it, POLICY is not followed: the
 * application knows best whether its requests come at a steady period
 * (docs/policy.md, "Waking a periodic LC").
 *
 * Safety: the thread calls libcuda only with `cuda_lock` held, and the
 * wrappers of cuCtxDestroy / cuDevicePrimaryCtxRelease / cuDevicePrimaryCtxReset
 * take it (pa_wake_ctx_gone) before the context goes, as does an atexit
 * handler before libcuda's own teardown. The thread's stream is
 * non-blocking (no implicit synchronisation with the legacy default stream)
 * and the thread's stream capture mode is relaxed, so an application
 * capturing a graph in another thread is not disturbed. Any failed call
 * turns wakes off for the process.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "preempt.h"
#include "preempt_cuda.h"
#include "preempt_wake.h"
#include "preempt_wake_sass.h"

typedef int (*cu_ctx_get_fn)(void **ctx);
typedef int (*cu_ctx_set_fn)(void *ctx);
typedef int (*cu_mod_load_fn)(void **mod, const void *image);
typedef int (*cu_mod_fn_fn)(void **fn, void *mod, const char *name);
typedef int (*cu_stream_fn)(void **stream, unsigned flags);
typedef int (*cu_capmode_fn)(int *mode);
typedef int (*cu_launch_fn)(void *f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			    unsigned, void *st, void **params, void **extra);

#define CU_STREAM_NON_BLOCKING 0x1u
#define CU_STREAM_CAPTURE_MODE_RELAXED 2

/* The thread sleeps until this long before its target, then reads the
 * clock until the target: a timer alone wakes 5-60 us late. */
#define PA_WAKE_SPIN_NS 60000ull
/* Failed CUDA calls before wakes stop for good. */
#define PA_WAKE_FAIL_MAX 3

/* Any GPU can JIT this: an empty kernel. pa_wake_sass holds the same as
 * machine code (scripts/gen-wake-sass.sh); the PTX is for a GPU it lacks.
 * Not one that spins until the request comes: a request queued behind a
 * running kernel of its own context waited for that kernel to end and
 * then paid a switch again (docs/perf-log, "Keeping the woken context in"). */
static const char pa_wake_ptx[] = ".version 6.0\n"
				  ".target sm_50\n"
				  ".address_size 64\n"
				  ".visible .entry gpuqos_wake()\n"
				  "{\n"
				  "\tret;\n"
				  "}\n";

static struct {
	/* Held briefly by application threads (pa_wake_request) and the
	 * thread; never across a libcuda call. */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct pa_wake_pred pred;
	void *ctx; /* the context the latest request was launched in */
	/* gpuqos_request_hint: a wake due at hint_at (0: none) for the
	 * request after start hint_seq; taken, and issued. */
	rm_u64 hint_at, hint_seq;
	unsigned long hints, hint_wakes;

	/* Held by the thread around every libcuda call, and by whoever
	 * makes a context go away. */
	pthread_mutex_t cuda_lock;
	void *set_ctx, *fn, *stream; /* what the thread set up, for set_ctx */
	_Atomic int dead; /* no libcuda call any more (exit, failures) */
	int failures;

	struct {
		cu_ctx_set_fn ctx_set;
		cu_mod_load_fn mod_load;
		cu_mod_fn_fn mod_fn;
		cu_stream_fn stream_create;
		cu_capmode_fn capmode;
		cu_launch_fn launch;
	} cu;
} pw = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
	.cuda_lock = PTHREAD_MUTEX_INITIALIZER,
};

static _Atomic unsigned pw_lead_us;
static _Atomic int pw_thread_started;
static _Atomic(cu_ctx_get_fn) pw_ctx_get;
static _Atomic unsigned pw_hold_us;
/* GPUQOS_WAKE_LEAD_US is set: the environment decides, not POLICY. Set
 * once in pa_wake_init. */
static int pw_env_owned;

int pa_wake_wanted(void)
{
	return atomic_load_explicit(&pw_lead_us, memory_order_relaxed) != 0;
}

void pa_wake_request(rm_u64 now, rm_u64 first_op, rm_u64 done)
{
	cu_ctx_get_fn get = atomic_load_explicit(&pw_ctx_get, memory_order_acquire);
	void *ctx = NULL;

	if (get && get(&ctx) != 0)
		ctx = NULL;
	pthread_mutex_lock(&pw.lock);
	if (ctx != pw.ctx) {
		/* Another context: its requests have their own period. */
		pw.ctx = ctx;
		pa_wake_pred_forget(&pw.pred);
	}
	pa_wake_pred_start(&pw.pred, now, first_op, done);
	pthread_cond_signal(&pw.cv);
	pthread_mutex_unlock(&pw.lock);
}

#define PA_EXPORT __attribute__((visibility("default")))

/* The request hint (docs/policy.md, "Waking a periodic LC": "A request
 * that says it comes"): declared here, not in a header, as frameworks find
 * it with dlsym(RTLD_DEFAULT, "gpuqos_request_hint") only when the library
 * is loaded. */
PA_EXPORT int gpuqos_request_hint(unsigned gpu_in_us);

PA_EXPORT int gpuqos_request_hint(unsigned gpu_in_us)
{
	rm_u64 now = pa_now_ns(), lead = (rm_u64)atomic_load(&pw_lead_us) * 1000u, in;

	if (lead == 0 || atomic_load(&pw.dead))
		return -1;
	in = (rm_u64)(gpu_in_us > PA_WAKE_HINT_MAX_US ? PA_WAKE_HINT_MAX_US : gpu_in_us) * 1000u;
	pthread_mutex_lock(&pw.lock);
	pw.hint_at = in > lead ? now + in - lead : now;
	pw.hint_seq = pw.pred.seq;
	pw.hints++;
	pthread_cond_signal(&pw.cv);
	pthread_mutex_unlock(&pw.lock);
	return 0;
}

void pa_wake_ctx_gone(void)
{
	if (!atomic_load(&pw_thread_started))
		return;
	pthread_mutex_lock(&pw.cuda_lock);
	pw.set_ctx = NULL;
	pw.fn = NULL;
	pw.stream = NULL;
	pthread_mutex_unlock(&pw.cuda_lock);
	pthread_mutex_lock(&pw.lock);
	pw.ctx = NULL;
	pa_wake_pred_forget(&pw.pred);
	pthread_mutex_unlock(&pw.lock);
}

int pa_wake_counts(struct pa_wake_counts *c)
{
	rm_u32 spans[PA_SPAN_HIST];
	unsigned nspans;

	if (!atomic_load(&pw_thread_started))
		return 0;
	pthread_mutex_lock(&pw.lock);
	c->requests = pw.pred.seq;
	c->wakes = pw.pred.wakes;
	c->hits = pw.pred.hits;
	c->wasted = pw.pred.wasted;
	c->beaten = pw.pred.early;
	c->not_issued = pw.pred.skipped;
	c->stops = pw.pred.stops;
	c->stopped = pw.pred.hold != 0;
	c->period_ns = pw.pred.last ? pw.pred.period : 0;
	c->last_start_ns = pw.pred.last;
	/* (A request's first launch takes this lock: only copy here.) */
	nspans = pa_wake_pred_spans(&pw.pred, spans);
	pthread_mutex_unlock(&pw.lock);
	c->span_us = pa_span_percentile(spans, nspans);
	c->at_ns = pa_now_ns();
	return 1;
}

static void pw_atexit(void)
{
	pthread_mutex_lock(&pw.cuda_lock);
	pw.dead = 1;
	pthread_mutex_unlock(&pw.cuda_lock);
	pthread_mutex_lock(&pw.lock);
	pa_info("wake: %llu requests, %llu wakes: %llu hit, %llu wasted (%llu of them: kernels "
		"long after the request's first operation), %llu beaten by the request; %llu not "
		"issued (late or failed); %llu stops, %llu of them ended early; %llu spans "
		"measured, the latest 99th percentile %u us",
		(unsigned long long)pw.pred.seq, (unsigned long long)pw.pred.wakes,
		(unsigned long long)pw.pred.hits, (unsigned long long)pw.pred.wasted,
		(unsigned long long)pw.pred.split, (unsigned long long)pw.pred.early,
		(unsigned long long)pw.pred.skipped, (unsigned long long)pw.pred.stops,
		(unsigned long long)pw.pred.resumes, (unsigned long long)pw.pred.spans,
		pa_wake_pred_span(&pw.pred));
	if (pw.hints)
		pa_info("wake: %lu request hints, %lu of their wakes issued", pw.hints,
			pw.hint_wakes);
	pthread_cond_signal(&pw.cv);
	pthread_mutex_unlock(&pw.lock);
}

static int pw_resolve(void)
{
	void *get = pa_cuda_sym("cuCtxGetCurrent");

	pw.cu.ctx_set = (cu_ctx_set_fn)pa_cuda_sym("cuCtxSetCurrent");
	pw.cu.mod_load = (cu_mod_load_fn)pa_cuda_sym("cuModuleLoadData");
	pw.cu.mod_fn = (cu_mod_fn_fn)pa_cuda_sym("cuModuleGetFunction");
	pw.cu.stream_create = (cu_stream_fn)pa_cuda_sym("cuStreamCreate");
	pw.cu.capmode = (cu_capmode_fn)pa_cuda_sym("cuThreadExchangeStreamCaptureMode");
	pw.cu.launch = (cu_launch_fn)pa_cuda_sym("cuLaunchKernel");
	if (!get || !pw.cu.ctx_set || !pw.cu.mod_load || !pw.cu.mod_fn || !pw.cu.stream_create ||
	    !pw.cu.capmode || !pw.cu.launch)
		return -1;
	atomic_store_explicit(&pw_ctx_get, (cu_ctx_get_fn)get, memory_order_release);
	return 0;
}

/* Under cuda_lock: the function and stream of the thread in ctx. */
static int pw_setup(void *ctx)
{
	void *mod = NULL, *fn = NULL, *st = NULL;
	int mode = CU_STREAM_CAPTURE_MODE_RELAXED, r;

	if (pw.set_ctx == ctx && pw.fn)
		return 0;
	pw.set_ctx = NULL;
	r = pw.cu.ctx_set(ctx);
	if (r == 0)
		r = pw.cu.capmode(&mode);
	/* Machine code first: the PTX needs libcuda's JIT compiler, and every
	 * launch of the process waits for it. With an empty JIT cache (a fresh
	 * machine or container) the first wake's JIT held the LC's launch
	 * 98 ms on an H200, 17 ms with the compiler's files in memory
	 * (docs/perf-log/2026-11-28-first-start.md). */
	if (r == 0 && (r = pw.cu.mod_load(&mod, pa_wake_sass)) != 0) {
		pa_info("wake: no machine code for this GPU (CUDA error %d): compiling the PTX", r);
		r = pw.cu.mod_load(&mod, pa_wake_ptx);
	}
	if (r == 0)
		r = pw.cu.mod_fn(&fn, mod, "gpuqos_wake");
	if (r == 0)
		r = pw.cu.stream_create(&st, CU_STREAM_NON_BLOCKING);
	if (r != 0) {
		pa_info("wake: setting up in context %p failed (CUDA error %d)", ctx, r);
		return -1;
	}
	/* The module and stream live as long as the context. */
	pw.set_ctx = ctx;
	pw.fn = fn;
	pw.stream = st;
	pa_info("wake: set up in context %p", ctx);
	return 0;
}

static void pw_sleep_until(rm_u64 t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000u),
			       .tv_nsec = (long)(t % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Issue the wake for start `seq` (aimed at target) if nothing changed
 * meanwhile. 1: issued; 0: stale; -1: failed. */
static int pw_issue(rm_u64 seq, void *ctx)
{
	int r = 0, stale;

	pthread_mutex_lock(&pw.cuda_lock);
	pthread_mutex_lock(&pw.lock);
	stale = pw.pred.seq != seq || pw.ctx != ctx || !ctx;
	pthread_mutex_unlock(&pw.lock);
	if (!stale && !pw.dead) {
		if (pw_setup(ctx) != 0)
			r = -1;
		else {
			r = pw.cu.launch(pw.fn, 1, 1, 1, 32, 1, 1, 0, pw.stream, NULL, NULL);
			if (r != 0)
				pa_info("wake: launch failed (CUDA error %d)", r);
			r = r == 0 ? 1 : -1;
		}
		if (r < 0) {
			pw.set_ctx = NULL;
			pw.fn = NULL;
			if (++pw.failures >= PA_WAKE_FAIL_MAX) {
				pa_info("wake: %d failures; no more wakes in this process",
					pw.failures);
				atomic_store(&pw_lead_us, 0);
				atomic_store(&pw.dead, 1);
			}
		}
	}
	pthread_mutex_unlock(&pw.cuda_lock);
	return r;
}

/* With a hold: the empty kernel again every PA_WAKE_TRAIN_NS after the
 * wake until the request's first launch (pw_issue finds the start moved
 * on) or `end`, the start the wake was aimed at plus the hold. */
static void pw_train(rm_u64 seq, void *ctx, rm_u64 end)
{
	rm_u64 next = pa_now_ns() + PA_WAKE_TRAIN_NS;

	for (; next <= end; next += PA_WAKE_TRAIN_NS) {
		while (pa_now_ns() < next)
			;
		if (pw_issue(seq, ctx) <= 0)
			return;
	}
}

static void *wake_thread_main(void *arg)
{
	(void)arg;
	/* Timer slack: the default 50 us would eat most of the lead. */
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	/* libcuda is loaded once a launch went through a wrapper. */
	pthread_mutex_lock(&pw.lock);
	while (!pw.pred.seq && !pw.dead)
		pthread_cond_wait(&pw.cv, &pw.lock);
	pthread_mutex_unlock(&pw.lock);
	if (pw.dead)
		return NULL;
	/* Registered once a request was seen: libcuda was loaded and
	 * initialised before it, so its own exit handlers are registered
	 * already and this one runs before them. */
	if (atexit(pw_atexit) != 0)
		pa_info("wake: atexit failed");
	if (pw_resolve() != 0) {
		pa_wake_disable("libcuda lacks a function it needs");
		return NULL;
	}
	for (;;) {
		rm_u64 lead, target, seq, now;
		void *ctx;
		int r, hinted = 0;

		pthread_mutex_lock(&pw.lock);
		for (;;) {
			lead = (rm_u64)atomic_load(&pw_lead_us) * 1000u;
			target = pa_wake_pred_target(&pw.pred, lead);
			/* A hint for the next request wins over a later prediction;
			 * one a request's launch overtook is dropped. */
			if (pw.hint_at && pw.hint_seq != pw.pred.seq)
				pw.hint_at = 0;
			if (pw.hint_at && (!target || pw.hint_at < target)) {
				target = pw.hint_at;
				pw.hint_at = 0;
				hinted = 1;
			}
			if (target || pw.dead)
				break;
			pthread_cond_wait(&pw.cv, &pw.lock);
		}
		seq = pw.pred.seq;
		ctx = pw.ctx;
		pthread_mutex_unlock(&pw.lock);
		if (pw.dead)
			return NULL;

		now = pa_now_ns();
		if (target > now + PA_WAKE_SPIN_NS)
			pw_sleep_until(target - PA_WAKE_SPIN_NS);
		while ((now = pa_now_ns()) < target)
			;
		/* Too late to start the switch ahead of the request: skip. */
		r = now - target <= lead / 2 ? pw_issue(seq, ctx) : 0;
		pthread_mutex_lock(&pw.lock);
		if (hinted)
			pw.hint_wakes += r > 0; /* not the predictor's to judge */
		else if (pw.pred.seq == seq)
			pa_wake_pred_woken(&pw.pred, r > 0 ? now : 0);
		else if (r > 0)
			pa_wake_pred_overtaken(&pw.pred);
		pthread_mutex_unlock(&pw.lock);
		if (r > 0 && atomic_load(&pw_hold_us))
			pw_train(seq, ctx, target + lead + (rm_u64)atomic_load(&pw_hold_us) * 1000u);
	}
}

static void pw_spawn(void)
{
	if (atomic_exchange(&pw_thread_started, 1))
		return;
	/* The default stack: the thread runs libcuda's PTX compiler. */
	if (pa_thread_spawn(wake_thread_main, "gpuqos-wake", 0) != 0) {
		pa_info("wake: pthread_create: %m; no wakes");
		atomic_store(&pw_lead_us, 0);
		atomic_store(&pw.dead, 1);
	}
}

void pa_wake_disable(const char *why)
{
	/* For good: a later POLICY does not turn wakes on again. */
	if (atomic_exchange(&pw_lead_us, 0))
		pa_info("wake: off: %s", why);
	if (atomic_load(&pw.dead))
		return;
	pthread_mutex_lock(&pw.cuda_lock);
	atomic_store(&pw.dead, 1);
	pthread_mutex_unlock(&pw.cuda_lock);
	pthread_mutex_lock(&pw.lock);
	pthread_cond_signal(&pw.cv);
	pthread_mutex_unlock(&pw.lock);
}

/* One of the two settings: 0..PA_WAKE_LEAD_MAX_US, else 0 and a log line. */
static unsigned pw_env_us(const char *name)
{
	const char *v = getenv(name);
	char *end;
	unsigned long us;

	if (v == NULL || *v == '\0')
		return 0;
	errno = 0;
	us = strtoul(v, &end, 10);
	if (errno || end == v || *end != '\0' || us > PA_WAKE_LEAD_MAX_US) {
		pa_info("%s=%s is not a whole number of microseconds in 0..%u; using 0", name, v,
			PA_WAKE_LEAD_MAX_US);
		return 0;
	}
	return (unsigned)us;
}

void pa_wake_init(void)
{
	const char *env = getenv("GPUQOS_WAKE_LEAD_US");
	unsigned lead = pw_env_us("GPUQOS_WAKE_LEAD_US");
	const char *stops = getenv("GPUQOS_WAKE_STOPS");

	pw_env_owned = env != NULL && *env != '\0';
	atomic_store(&pw_hold_us, pw_env_us("GPUQOS_WAKE_HOLD_US"));
	/* An experiment's setting (docs/policy.md): wasted wakes are still
	 * counted, but never stop the next ones. */
	if (stops && strcmp(stops, "0") == 0) {
		pw.pred.keep_waking = 1;
		pa_info("wake: GPUQOS_WAKE_STOPS=0: wasted wakes stop nothing");
	}
	if (!lead)
		return;
	if (!pa_launch_counting()) {
		pa_info("wake: launches are not seen on this architecture; no wakes");
		return;
	}
	atomic_store(&pw_lead_us, lead);
	pa_debug("wake: lead %u us, hold %u us", lead, atomic_load(&pw_hold_us));
	pw_spawn();
}

void pa_wake_policy(unsigned lead_us, unsigned hold_us)
{
	static int said_unseen;
	unsigned old;

	if (pw_env_owned || atomic_load(&pw.dead))
		return;
	if (lead_us && !pa_launch_counting()) {
		if (!said_unseen)
			pa_info("wake: launches are not seen on this architecture; no wakes");
		said_unseen = 1;
		return;
	}
	atomic_store(&pw_hold_us, hold_us);
	old = atomic_exchange(&pw_lead_us, lead_us);
	if (old == lead_us)
		return;
	if (lead_us)
		pa_info("wake: lead %u us, hold %u us (the node agent's policy)", lead_us, hold_us);
	else
		pa_info("wake: off (the node agent's policy)");
	if (!lead_us)
		return;
	pw_spawn();
	/* A thread waiting for a target recomputes it with the new lead. */
	pthread_mutex_lock(&pw.lock);
	pthread_cond_signal(&pw.cv);
	pthread_mutex_unlock(&pw.lock);
}

void pa_wake_child_reset(void)
{
	/* No thread here, and the parent's context is not usable. */
	pthread_mutex_init(&pw.lock, NULL);
	pthread_cond_init(&pw.cv, NULL);
	pthread_mutex_init(&pw.cuda_lock, NULL);
	pa_wake_pred_reset(&pw.pred);
	pw.ctx = NULL;
	pw.set_ctx = NULL;
	pw.fn = NULL;
	pw.stream = NULL;
	pw.failures = 0;
	pw.hint_at = 0;
	pw.hints = 0;
	pw.hint_wakes = 0;
	atomic_store(&pw.dead, 0);
	atomic_store(&pw_thread_started, 0);
	/* CUDA is not usable in a forked child; one that starts it afresh
	 * and is exec'd gets the settings again from its environment. */
	atomic_store(&pw_lead_us, 0);
}

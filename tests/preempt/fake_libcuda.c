/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_libcuda.c - a stand-in for libcuda.so.1 with only what the CUDA
 * runtime uses to reach the launch functions: cuGetProcAddress (both
 * versions, the per-thread-stream flag included) and the launch entry
 * points themselves, which count the calls whose arguments arrived intact
 * (and cuEventRecord, counted apart), and the waits for GPU work, where
 * each launch "runs" for a time the test sets.
 *
 * Owns: the table of names and the argument check, and FAKE_CUDA_LOG: with
 * it set (a path), one line per application launch, wake launch and event
 * record ("A", "W", "E" and CLOCK_MONOTONIC ns), in the order they came,
 * so that a test can check what followed what (the workload adds its own
 * lines through fake_cuda_log). Does not own: any GPU work. Tests load it
 * the way cudart does (dlopen, then dlsym on the handle), with
 * libgpuqos-preempt.so preloaded.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_NOT_FOUND = 500 };
#define PTDS_FLAG 0x2ull /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */

/* What rm_workload passes to every launch. */
#define ARG_F ((void *)0xf00d)
#define ARG_STREAM ((void *)0x5eed)
#define ARG_PARAMS ((void **)0xa11)
#define ARG_EXTRA ((void **)0xe47)

static unsigned long calls_ok, calls_bad, calls_other, events_ok, events_bad;

/* 0, 1: launches with intact and damaged arguments; 2: other calls; 3, 4:
 * event records with intact and damaged arguments. */
EXPORT unsigned long fake_cuda_calls(int which)
{
	switch (which) {
	case 0:
		return calls_ok;
	case 1:
		return calls_bad;
	case 3:
		return events_ok;
	case 4:
		return events_bad;
	default:
		return calls_other;
	}
}

static int note(int ok)
{
	if (ok)
		calls_ok++;
	else
		calls_bad++;
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static int dims_ok(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
		   unsigned shm)
{
	return gx == 1 && gy == 2 && gz == 3 && bx == 4 && by == 5 && bz == 6 && shm == 7;
}

/* ---- what the preempt agent's wake thread uses (preempt_wake.c) ---- */

#define FAKE_CTX ((void *)0xc7c7)
#define FAKE_MOD ((void *)0x30d)
#define FAKE_WAKE_FN ((void *)0xa4e)
/* The wake thread's stream: 0x57 in the low byte, the context's
 * generation above it (a destroyed context's streams are stale). */
#define FAKE_WAKE_STREAM_TAG 0x57ul

static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long wakes, wakes_bad, wake_ctx_ok, wakes_stale, ctx_gen, wakes_new_ctx;
static unsigned long long last_wake_ns;
/* For each launch on the application's stream that followed a wake: how
 * long after the wake it came, in us (a bounded list). */
#define LEADS_MAX 4096
static unsigned leads[LEADS_MAX];
static unsigned long nleads;
static __thread void *cur_ctx;

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* FAKE_CUDA_LOG's file, opened at the first line (-2: not yet); -1:
 * none (unset, or a write failed). */
static int log_fd = -2;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

/* One line, whole, in one write (O_APPEND). */
EXPORT void fake_cuda_log(const char *line);
EXPORT void fake_cuda_log(const char *line)
{
	size_t n = strlen(line);

	pthread_mutex_lock(&log_lock);
	if (log_fd == -2) {
		const char *path = getenv("FAKE_CUDA_LOG");

		log_fd = path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
	}
	if (log_fd >= 0 && write(log_fd, line, n) != (ssize_t)n)
		log_fd = -1;
	pthread_mutex_unlock(&log_lock);
}

/* At exit, after the preempt library's own exit handler (which stops its
 * wake thread and says what it counted): the wake launches and the
 * requests woken, as fake_cuda_wakes(0) and (6) would say. */
__attribute__((destructor)) static void log_counts(void)
{
	char line[64];

	if (!getenv("FAKE_CUDA_LOG"))
		return;
	pthread_mutex_lock(&wake_lock);
	snprintf(line, sizeof(line), "C %lu %lu\n", wakes, nleads);
	pthread_mutex_unlock(&wake_lock);
	fake_cuda_log(line);
}

static void log_event(char what, unsigned long long t)
{
	char line[40];

	snprintf(line, sizeof(line), "%c %llu\n", what, t);
	fake_cuda_log(line);
}

EXPORT int cuCtxGetCurrent(void **ctx);
EXPORT int cuCtxGetCurrent(void **ctx)
{
	/* The application's threads run in FAKE_CTX once they launched. */
	*ctx = FAKE_CTX;
	return CUDA_SUCCESS;
}

EXPORT int cuCtxSetCurrent(void *ctx);
EXPORT int cuCtxSetCurrent(void *ctx)
{
	cur_ctx = ctx;
	return CUDA_SUCCESS;
}

EXPORT int cuThreadExchangeStreamCaptureMode(int *mode);
EXPORT int cuThreadExchangeStreamCaptureMode(int *mode)
{
	return mode && *mode == 2 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuModuleLoadData(void **mod, const void *image);
EXPORT int cuModuleLoadData(void **mod, const void *image)
{
	if (!image || !strstr((const char *)image, ".entry gpuqos_wake()"))
		return CUDA_ERROR_INVALID_VALUE;
	*mod = FAKE_MOD;
	return CUDA_SUCCESS;
}

EXPORT int cuModuleGetFunction(void **fn, void *mod, const char *name);
EXPORT int cuModuleGetFunction(void **fn, void *mod, const char *name)
{
	if (mod != FAKE_MOD || strcmp(name, "gpuqos_wake") != 0)
		return CUDA_ERROR_NOT_FOUND;
	*fn = FAKE_WAKE_FN;
	return CUDA_SUCCESS;
}

EXPORT int cuStreamCreate(void **st, unsigned flags);
EXPORT int cuStreamCreate(void **st, unsigned flags)
{
	if (flags != 1) /* CU_STREAM_NON_BLOCKING */
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&wake_lock);
	*st = (void *)((ctx_gen << 8) | FAKE_WAKE_STREAM_TAG);
	pthread_mutex_unlock(&wake_lock);
	return CUDA_SUCCESS;
}

/* The application's context goes away (and, as the primary context, comes
 * back at its next use): whatever was created in it is stale. */
static int ctx_gone(void)
{
	pthread_mutex_lock(&wake_lock);
	ctx_gen++;
	pthread_mutex_unlock(&wake_lock);
	return CUDA_SUCCESS;
}

EXPORT int cuCtxDestroy(void *ctx);
EXPORT int cuCtxDestroy(void *ctx)
{
	return ctx == FAKE_CTX ? ctx_gone() : CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuCtxDestroy_v2(void *ctx);
EXPORT int cuCtxDestroy_v2(void *ctx)
{
	return ctx == FAKE_CTX ? ctx_gone() : CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuDevicePrimaryCtxReset_v2(int dev);
EXPORT int cuDevicePrimaryCtxReset_v2(int dev)
{
	return dev == 0 ? ctx_gone() : CUDA_ERROR_INVALID_VALUE;
}

/* wake launches (a hold's train included), wakes with wrong arguments,
 * wakes from a thread whose current context was the application's, and
 * the leads seen, from the first wake launch since the application's
 * latest launch to its next one (p: 0 min, 1 median, 2 max, 3 count: the
 * requests woken; 7: wakes on a stale stream; 8: wakes in a context that
 * came back after one went away). */
EXPORT unsigned long fake_cuda_wakes(int which);
EXPORT unsigned long fake_cuda_wakes(int which)
{
	unsigned s[LEADS_MAX], t;
	unsigned long n, i, j, r = 0;

	pthread_mutex_lock(&wake_lock);
	n = nleads < LEADS_MAX ? nleads : LEADS_MAX;
	memcpy(s, leads, n * sizeof(s[0]));
	if (which == 0)
		r = wakes;
	else if (which == 1)
		r = wakes_bad;
	else if (which == 2)
		r = wake_ctx_ok;
	else if (which == 7)
		r = wakes_stale;
	else if (which == 8)
		r = wakes_new_ctx;
	pthread_mutex_unlock(&wake_lock);
	if (which < 3 || which >= 7)
		return r;
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && s[j - 1] > s[j]; j--) {
			t = s[j];
			s[j] = s[j - 1];
			s[j - 1] = t;
		}
	if (which == 6)
		return n;
	if (!n)
		return 0;
	return which == 3 ? s[0] : which == 4 ? s[n / 2] : s[n - 1];
}

static int wake_launch(void *f, unsigned gx, unsigned bx, void *st, void **params)
{
	unsigned long long t;

	pthread_mutex_lock(&wake_lock);
	if ((unsigned long)st >> 8 != ctx_gen) {
		wakes_stale++;
		pthread_mutex_unlock(&wake_lock);
		return 400; /* CUDA_ERROR_INVALID_HANDLE */
	}
	if (f == FAKE_WAKE_FN && gx == 1 && bx >= 1 && !params)
		wakes++;
	else
		wakes_bad++;
	wake_ctx_ok += cur_ctx == FAKE_CTX;
	wakes_new_ctx += ctx_gen > 0;
	/* The lead is the first launch's (a hold adds a train after it). */
	t = now_ns();
	if (!last_wake_ns)
		last_wake_ns = t;
	/* (Under wake_lock: the log's order is the order launches came.) */
	log_event('W', t);
	pthread_mutex_unlock(&wake_lock);
	return CUDA_SUCCESS;
}

/* The waits for GPU work: the application's latest launch "runs" for
 * busy_us (fake_cuda_busy); a synchronize returns when it is over, a
 * query says CUDA_ERROR_NOT_READY until then. */
#define CUDA_ERROR_NOT_READY 600
static unsigned long long app_launch_ns, busy_ns;

EXPORT void fake_cuda_busy(unsigned us);
EXPORT void fake_cuda_busy(unsigned us)
{
	pthread_mutex_lock(&wake_lock);
	busy_ns = (unsigned long long)us * 1000u;
	pthread_mutex_unlock(&wake_lock);
}

static unsigned long long work_end_ns(void)
{
	unsigned long long e;

	pthread_mutex_lock(&wake_lock);
	e = app_launch_ns + busy_ns;
	pthread_mutex_unlock(&wake_lock);
	return e;
}

static int wait_sync(void)
{
	unsigned long long e = work_end_ns();
	struct timespec ts = { (time_t)(e / 1000000000ull), (long)(e % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
		;
	return CUDA_SUCCESS;
}

static int wait_query(void)
{
	return now_ns() < work_end_ns() ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

EXPORT int cuCtxSynchronize(void);
EXPORT int cuCtxSynchronize(void)
{
	return wait_sync();
}

EXPORT int cuStreamSynchronize(void *st);
EXPORT int cuStreamSynchronize(void *st)
{
	return st == ARG_STREAM ? wait_sync() : CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuStreamSynchronize_ptsz(void *st);
EXPORT int cuStreamSynchronize_ptsz(void *st)
{
	return st == ARG_STREAM ? wait_sync() : CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuEventSynchronize(void *ev);
EXPORT int cuEventSynchronize(void *ev)
{
	return ev == (void *)0xe7e7 ? wait_sync() : CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuEventQuery(void *ev);
EXPORT int cuEventQuery(void *ev)
{
	return ev == (void *)0xe7e7 ? wait_query() : CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuStreamQuery(void *st);
EXPORT int cuStreamQuery(void *st)
{
	return st == ARG_STREAM ? wait_query() : CUDA_ERROR_INVALID_VALUE;
}

static void app_launch_seen(void)
{
	pthread_mutex_lock(&wake_lock);
	app_launch_ns = now_ns();
	if (last_wake_ns && nleads < LEADS_MAX)
		leads[nleads++] = (unsigned)((app_launch_ns - last_wake_ns) / 1000u);
	last_wake_ns = 0;
	log_event('A', app_launch_ns);
	pthread_mutex_unlock(&wake_lock);
}

/* Shared by both variants without a call through this library's PLT
 * (which the preloaded library's export of the same name would answer). */
static int launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
		  unsigned bz, unsigned shm, void *st, void **params, void **extra)
{
	if (((unsigned long)st & 0xfful) == FAKE_WAKE_STREAM_TAG)
		return wake_launch(f, gx, bx, st, params);
	app_launch_seen();
	return note(f == ARG_F && dims_ok(gx, gy, gz, bx, by, bz, shm) && st == ARG_STREAM &&
		    params == ARG_PARAMS && extra == ARG_EXTRA);
}

EXPORT int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
			  unsigned bz, unsigned shm, void *st, void **params, void **extra);
EXPORT int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
			  unsigned bz, unsigned shm, void *st, void **params, void **extra)
{
	return launch(f, gx, gy, gz, bx, by, bz, shm, st, params, extra);
}

EXPORT int cuLaunchKernel_ptsz(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			       unsigned by, unsigned bz, unsigned shm, void *st, void **params,
			       void **extra);
EXPORT int cuLaunchKernel_ptsz(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			       unsigned by, unsigned bz, unsigned shm, void *st, void **params,
			       void **extra)
{
	return launch(f, gx, gy, gz, bx, by, bz, shm, st, params, extra);
}

EXPORT int cuLaunchCooperativeKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
				     unsigned by, unsigned bz, unsigned shm, void *st,
				     void **params);
EXPORT int cuLaunchCooperativeKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
				     unsigned by, unsigned bz, unsigned shm, void *st,
				     void **params)
{
	return note(f == ARG_F && dims_ok(gx, gy, gz, bx, by, bz, shm) && st == ARG_STREAM &&
		    params == ARG_PARAMS);
}

EXPORT int cuLaunchKernelEx(const void *cfg, void *f, void **params, void **extra);
EXPORT int cuLaunchKernelEx(const void *cfg, void *f, void **params, void **extra)
{
	return note(cfg == (const void *)0xc0f && f == ARG_F && params == ARG_PARAMS &&
		    extra == ARG_EXTRA);
}

EXPORT int cuGraphLaunch(void *exec, void *st);
EXPORT int cuGraphLaunch(void *exec, void *st)
{
	return note(exec == (void *)0x6a && st == ARG_STREAM);
}

/* What rm_workload passes to every event record. */
#define ARG_EVENT ((void *)0xe7e7)

EXPORT int cuEventRecord(void *ev, void *st);
EXPORT int cuEventRecord(void *ev, void *st)
{
	int ok = ev == ARG_EVENT && st == ARG_STREAM;

	log_event('E', now_ns());
	if (ok)
		events_ok++;
	else
		events_bad++;
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuMemAlloc(void **p, unsigned long size);
EXPORT int cuMemAlloc(void **p, unsigned long size)
{
	calls_other++;
	*p = NULL;
	return size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Found by dlsym(RTLD_NEXT) only if "next" is computed from the wrong
 * object (see fake_next_check). */
EXPORT int fake_probe(void);
EXPORT int fake_probe(void)
{
	return 42;
}

/* 1 if dlsym(RTLD_NEXT, "fake_probe") called from here looks after this
 * library (and finds nothing), as it must. */
EXPORT int fake_next_check(void);
EXPORT int fake_next_check(void)
{
	return dlsym(RTLD_NEXT, "fake_probe") == NULL;
}

EXPORT int cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags);
EXPORT int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags,
			       int *status);

static void *lookup(const char *sym, int ver, unsigned long long flags)
{
	int ptds = (flags & PTDS_FLAG) != 0;

	if (strcmp(sym, "cuLaunchKernel") == 0)
		return ptds ? (void *)cuLaunchKernel_ptsz : (void *)cuLaunchKernel;
	if (strcmp(sym, "cuLaunchCooperativeKernel") == 0)
		return (void *)cuLaunchCooperativeKernel;
	if (strcmp(sym, "cuLaunchKernelEx") == 0)
		return (void *)cuLaunchKernelEx;
	if (strcmp(sym, "cuGraphLaunch") == 0)
		return (void *)cuGraphLaunch;
	if (strcmp(sym, "cuEventRecord") == 0)
		return (void *)cuEventRecord;
	if (strcmp(sym, "cuCtxDestroy") == 0)
		return (void *)cuCtxDestroy_v2;
	if (strcmp(sym, "cuCtxGetCurrent") == 0)
		return (void *)cuCtxGetCurrent;
	if (strcmp(sym, "cuMemAlloc") == 0)
		return (void *)cuMemAlloc;
	if (strcmp(sym, "cuStreamSynchronize") == 0)
		return ptds ? (void *)cuStreamSynchronize_ptsz : (void *)cuStreamSynchronize;
	if (strcmp(sym, "cuCtxSynchronize") == 0)
		return (void *)cuCtxSynchronize;
	if (strcmp(sym, "cuEventSynchronize") == 0)
		return (void *)cuEventSynchronize;
	if (strcmp(sym, "cuEventQuery") == 0)
		return (void *)cuEventQuery;
	if (strcmp(sym, "cuStreamQuery") == 0)
		return (void *)cuStreamQuery;
	if (strcmp(sym, "cuGetProcAddress") == 0)
		return ver >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress;
	return NULL;
}

int cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags)
{
	if (!sym || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = lookup(sym, ver, flags);
	return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags,
			int *status)
{
	int r;

	if (!sym || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = lookup(sym, ver, flags);
	r = *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;

	if (status)
		*status = r == CUDA_SUCCESS ? 0 : 1;
	return r;
}

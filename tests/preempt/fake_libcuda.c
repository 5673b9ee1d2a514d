/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_libcuda.c - a stand-in for libcuda.so.1 with only what the CUDA
 * runtime uses to reach the launch functions: cuGetProcAddress (both
 * versions, the per-thread-stream flag included) and the launch entry
 * points themselves, which count the calls whose arguments arrived intact.
 *
 * Owns: the table of names and the argument check. Does not own: any GPU
 * work. Tests load it the way cudart does (dlopen, then dlsym on the
 * handle), with libgpuqos-preempt.so preloaded.
 */
#include <dlfcn.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_NOT_FOUND = 500 };
#define PTDS_FLAG 0x2ull /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */

/* What rm_workload passes to every launch. */
#define ARG_F ((void *)0xf00d)
#define ARG_STREAM ((void *)0x5eed)
#define ARG_PARAMS ((void **)0xa11)
#define ARG_EXTRA ((void **)0xe47)

static unsigned long calls_ok, calls_bad, calls_other;

EXPORT unsigned long fake_cuda_calls(int which)
{
	return which == 0 ? calls_ok : which == 1 ? calls_bad : calls_other;
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

/* Shared by both variants without a call through this library's PLT
 * (which the preloaded library's export of the same name would answer). */
static int launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
		  unsigned bz, unsigned shm, void *st, void **params, void **extra)
{
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
	if (strcmp(sym, "cuMemAlloc") == 0)
		return (void *)cuMemAlloc;
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

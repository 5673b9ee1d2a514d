/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_cuda.h - finding libcuda's own functions from inside the
 * library (preempt_cuda.c): for the launch wrappers (preempt_launch.c)
 * and the wake thread (preempt_wake.c).
 */
#ifndef GPUQOS_PREEMPT_CUDA_H
#define GPUQOS_PREEMPT_CUDA_H

/* Whether the library interposes dlsym on this architecture (the entry
 * is a few instructions of assembly, preempt_launch.c); elsewhere
 * launches are not counted. */
#if defined(__x86_64__) || defined(__aarch64__)
#define PA_DLSYM_INTERPOSED 1
#else
#define PA_DLSYM_INTERPOSED 0
#endif

typedef void *(*pa_dlsym_fn)(void *, const char *);

/* libc's dlsym (not the library's interposed one), or NULL: none found. */
pa_dlsym_fn pa_real_dlsym(void);

/* Whether p is one of this library's own functions (a wrapper, or an
 * exported launch function found by a dlsym(RTLD_DEFAULT)). */
int pa_is_ours(void *p);

/* libcuda's own definition of name, or NULL. */
void *pa_cuda_sym(const char *name);

/* Whether launches reach the counters here (PA_DLSYM_INTERPOSED). */
int pa_launch_counting(void);

#endif /* GPUQOS_PREEMPT_CUDA_H */

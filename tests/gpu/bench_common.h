// SPDX-License-Identifier: Apache-2.0
//
// bench_common.h - helpers shared by the gpuqos GPU benchmark workloads
// (lc_micro.cu, be_fill.cu): CUDA error checking, the monotonic clock,
// ready/start files, percentiles and a small argument parser.
#ifndef GPUQOS_BENCH_COMMON_H
#define GPUQOS_BENCH_COMMON_H

#include <cuda_runtime.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// Every CUDA runtime call goes through CK(): on failure it prints the call,
// where it was made and the error string, and exits.
#define CK(call)                                                               \
	do {                                                                   \
		cudaError_t ck_err_ = (call);                                  \
		if (ck_err_ != cudaSuccess) {                                  \
			fprintf(stderr, "%s:%d: %s failed: %s (%s)\n",         \
				__FILE__, __LINE__, #call,                     \
				cudaGetErrorString(ck_err_),                   \
				cudaGetErrorName(ck_err_));                    \
			exit(2);                                               \
		}                                                              \
	} while (0)

// Check the launch itself (bad configuration) right after <<<>>>.
#define CK_LAUNCH() CK(cudaGetLastError())

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// Wall-clock seconds (CLOCK_REALTIME), to line a window up with the node
// agent's log and the suite's samples.
static inline double unix_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

// Sleep until the absolute CLOCK_MONOTONIC time t (ns); returns at once if
// t has passed.
static inline void sleep_until_ns(uint64_t t)
{
	struct timespec ts;
	ts.tv_sec = (time_t)(t / 1000000000ull);
	ts.tv_nsec = (long)(t % 1000000000ull);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static inline void touch_file(const char *path)
{
	if (!path)
		return;
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "cannot create %s: %s\n", path, strerror(errno));
		exit(2);
	}
	close(fd);
}

static inline int file_exists(const char *path)
{
	return path && access(path, F_OK) == 0;
}

static inline int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

// Nearest-rank percentile of a sorted array (p in 0..100). lc_torch.py uses
// the same definition so that the two workloads' numbers compare.
static inline uint64_t percentile_sorted(const uint64_t *v, size_t n, double p)
{
	if (n == 0)
		return 0;
	size_t rank = (size_t)((p / 100.0) * (double)n + 0.999999999);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

// Argument parsing: "--name value" pairs and "--flag" switches.
static inline int arg_is(const char *a, const char *name)
{
	return strcmp(a, name) == 0;
}

static inline const char *arg_value(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc) {
		fprintf(stderr, "%s needs a value\n", argv[*i]);
		exit(2);
	}
	return argv[++*i];
}

static inline double arg_double(int argc, char **argv, int *i)
{
	const char *name = argv[*i];
	const char *s = arg_value(argc, argv, i);
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end) {
		fprintf(stderr, "%s: not a number: %s\n", name, s);
		exit(2);
	}
	return v;
}

#endif // GPUQOS_BENCH_COMMON_H

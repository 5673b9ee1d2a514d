// SPDX-License-Identifier: Apache-2.0
//
// ctx_bench.cu - CUDA context creation time, for measuring what the eBPF
// tracer adds to it (a context creation is a few hundred RM ioctls, four
// TSGs among them). Creates and destroys the primary context N times and
// prints one JSON line with the median and p90 in microseconds.
//
// Usage: ctx_bench [--iters 20]
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#define CK(call)                                                                    \
	do {                                                                        \
		CUresult r_ = (call);                                               \
		if (r_ != CUDA_SUCCESS) {                                           \
			const char *s_ = "?";                                       \
			cuGetErrorString(r_, &s_);                                  \
			fprintf(stderr, "ctx_bench: %s: %s\n", #call, s_);          \
			exit(1);                                                    \
		}                                                                   \
	} while (0)

static double now_us()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	int iters = 20;
	for (int i = 1; i + 1 < argc; i += 2)
		if (!strcmp(argv[i], "--iters"))
			iters = atoi(argv[i + 1]);
	CK(cuInit(0));
	CUdevice dev;
	CK(cuDeviceGet(&dev, 0));
	std::vector<double> t;
	for (int i = 0; i < iters + 1; i++) {
		CUcontext ctx;
		double t0 = now_us();
		CK(cuDevicePrimaryCtxRetain(&ctx, dev));
		CK(cuCtxSetCurrent(ctx));
		CK(cuCtxSynchronize());
		double t1 = now_us();
		CK(cuCtxSetCurrent(nullptr));
		CK(cuDevicePrimaryCtxRelease(dev));
		CK(cuDevicePrimaryCtxReset(dev));
		if (i > 0) // the first one also loads the module state: not counted
			t.push_back(t1 - t0);
	}
	std::vector<double> sorted = t;
	std::sort(sorted.begin(), sorted.end());
	printf("{\"workload\":\"ctx_bench\",\"iters\":%d,\"p50_us\":%.0f,\"p90_us\":%.0f,\"min_us\":%.0f,"
	       "\"samples_us\":[",
	       iters, sorted[sorted.size() / 2], sorted[(sorted.size() * 9) / 10], sorted[0]);
	for (size_t i = 0; i < t.size(); i++)
		printf("%s%.0f", i ? "," : "", t[i]);
	printf("]}\n");
	return 0;
}

// SPDX-License-Identifier: Apache-2.0
// mem_probe.cu - what each way of taking GPU memory asks the RM for.
//
// Run under the preempt library's trace (GPUQOS_TRACE, docs/trace.md); each
// phase prints "phase NAME T0 T1" (CLOCK_MONOTONIC ns) on stdout so the
// trace's records can be told apart by phase (mem_probe_report.py). Phases:
// context creation, cudaMemGetInfo, cudaMalloc of 256 MiB and 1 MiB and
// their frees, cuMemCreate + cuMemMap of 64 MiB (VMM), cudaMallocAsync of
// 64 MiB from the default pool, cudaMallocManaged of 64 MiB, pinned host
// memory (cudaHostAlloc), and cudaMalloc until it fails (the RM's answer
// at the GPU's end, and what CUDA reports).
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

#define PHASE(name, body)                                                            \
	do {                                                                         \
		unsigned long long t0_ = now_ns();                                   \
		body;                                                                \
		printf("phase %s %llu %llu\n", name, t0_, now_ns());                 \
		fflush(stdout);                                                      \
	} while (0)

int main(int argc, char **argv)
{
	size_t fr = 0, tot = 0;
	void *p = NULL, *q = NULL, *h = NULL;
	cudaError_t e = cudaSuccess;
	int fill = argc > 1 && strcmp(argv[1], "--fill") == 0;

	if (argc > 2 && strcmp(argv[1], "--loop") == 0) {
		/* Allocation-heavy: N x (cudaMalloc 2 MiB, cudaFree), the mean. */
		long n = atol(argv[2]);
		unsigned long long t0;

		cudaFree(0);
		t0 = now_ns();
		for (long i = 0; i < n; i++) {
			if (cudaMalloc(&p, 2u << 20) != cudaSuccess)
				return 1;
			cudaFree(p);
		}
		printf("loop %ld ns_per_pair %.0f\n", n, (double)(now_ns() - t0) / (double)(n > 0 ? n : 1));
		return 0;
	}

	PHASE("context", cudaFree(0));
	PHASE("meminfo", e = cudaMemGetInfo(&fr, &tot));
	printf("meminfo %s free %zu total %zu\n", cudaGetErrorName(e), fr, tot);
	PHASE("malloc256m", e = cudaMalloc(&p, 256u << 20));
	printf("malloc256m %s\n", cudaGetErrorName(e));
	PHASE("free256m", cudaFree(p));
	PHASE("malloc1m", e = cudaMalloc(&p, 1u << 20));
	PHASE("free1m", cudaFree(p));
	{
		CUmemGenericAllocationHandle gh;
		CUmemAllocationProp prop;
		CUdeviceptr va = 0;
		size_t gran = 0, sz = 64u << 20;
		CUresult r;

		memset(&prop, 0, sizeof(prop));
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = 0;
		cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
		PHASE("vmm_create", r = cuMemCreate(&gh, sz, &prop, 0));
		printf("vmm_create %d gran %zu\n", (int)r, gran);
		PHASE("vmm_map", {
			cuMemAddressReserve(&va, sz, 0, 0, 0);
			cuMemMap(va, sz, 0, gh, 0);
		});
		PHASE("vmm_release", {
			cuMemUnmap(va, sz);
			cuMemAddressFree(va, sz);
			cuMemRelease(gh);
		});
	}
	PHASE("async64m", {
		e = cudaMallocAsync(&q, 64u << 20, 0);
		cudaStreamSynchronize(0);
	});
	printf("async64m %s\n", cudaGetErrorName(e));
	PHASE("asyncfree", {
		cudaFreeAsync(q, 0);
		cudaStreamSynchronize(0);
		cudaMemPool_t pool;
		cudaDeviceGetDefaultMemPool(&pool, 0);
		cudaMemPoolTrimTo(pool, 0);
	});
	PHASE("managed64m", e = cudaMallocManaged(&p, 64u << 20, cudaMemAttachGlobal));
	printf("managed64m %s\n", cudaGetErrorName(e));
	PHASE("managedfree", cudaFree(p));
	PHASE("hostalloc64m", e = cudaHostAlloc(&h, 64u << 20, cudaHostAllocDefault));
	PHASE("hostfree", cudaFreeHost(h));
	if (fill) {
		size_t n = 0;
		void *blocks[4096];

		PHASE("fill", {
			for (; n < 4096; n++)
				if ((e = cudaMalloc(&blocks[n], 1u << 30)) != cudaSuccess)
					break;
		});
		printf("fill %zu GiB then %s\n", n, cudaGetErrorName(e));
		PHASE("fill_meminfo", cudaMemGetInfo(&fr, &tot));
		printf("fill_meminfo free %zu total %zu\n", fr, tot);
		e = cudaMalloc(&p, 1u << 20);
		printf("after_fill malloc1m %s\n", cudaGetErrorName(e));
		if (e == cudaSuccess)
			cudaFree(p);
		PHASE("fill_free", {
			for (size_t i = 0; i < n; i++)
				cudaFree(blocks[i]);
		});
	}
	return 0;
}

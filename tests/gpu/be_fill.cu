// SPDX-License-Identifier: Apache-2.0
//
// be_fill - the best-effort (BE) workload of the gpuqos benchmarks.
//
// It keeps every SM busy: each kernel has grid = SM count x the resident
// blocks per SM that the occupancy API reports, and every thread runs a fixed
// number of FMA iterations (a fixed amount of work, not a wall-clock spin, so
// that time taken away from the BE shows up as fewer kernels per second).
// Kernels run back to back, --inflight of them queued (default 2: the GPU
// never waits for the host; 1: the host waits for each kernel before
// launching the next, so the BE's queue is briefly empty between kernels).
//
// Unless --iters is given, the iteration count is calibrated at start so one
// kernel runs about --kernel-ms alone. Scripts comparing runs should take the
// "iters" that a first run reports and pass it to the later ones: then
// kernels/s compare directly.
//
// After the first kernel completes --ready-file is created. The timed window
// starts when the host sees --start-file (at once without it) and ends after
// --duration-s; kernels keep running (untimed) while waiting for the start
// file. Completions are polled, so the window ends on time even when the
// BE's channels are disabled by an experiment (tests/gpu/rm_probe.c).
//
// Output: one JSON line on stdout:
//   {"workload":"be_fill","kernels":..,"kernels_per_s":..,"duration_s":..,...}
// with the longest wait between two completions in the window (max_gap_ms,
// and when it ended, max_gap_at_s from the window's start) and every wait
// of at least --long-gap-ms (long_gaps: [end s, length ms], the first 32;
// long_gaps_total counts them all), so a stall can be matched with what
// happened at that moment; start_unix is the window's start in wall-clock
// seconds, to line it up with the node agent's log.

#include "bench_common.h"

#define FILL_THREADS 256

// Four independent FMA chains per thread. The result is stored so the
// compiler keeps the work.
__global__ void __launch_bounds__(FILL_THREADS)
fill_kernel(unsigned int iters, float *out)
{
	float a = threadIdx.x * 1e-3f;
	float b = a + 1.0f, c = a + 2.0f, d = a + 3.0f;
	const float m = 0.9999999f, k = 1e-7f;
#pragma unroll 8
	for (unsigned int i = 0; i < iters; i++) {
		a = fmaf(a, m, k);
		b = fmaf(b, m, k);
		c = fmaf(c, m, k);
		d = fmaf(d, m, k);
	}
	out[blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d;
}

struct options {
	double duration_s = 10;
	double kernel_ms = 10;
	unsigned long long iters = 0; // 0: calibrate
	int inflight = 2;
	const char *ready_file = nullptr;
	const char *start_file = nullptr;
	double start_timeout_s = 300;
	double long_gap_ms = 300;
};

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [--duration-s 10] [--kernel-ms 10] [--iters N] [--inflight 1|2]\n"
		"          [--ready-file PATH] [--start-file PATH] [--start-timeout-s 300]\n"
		"          [--long-gap-ms 300]\n",
		prog);
	exit(2);
}

static options parse(int argc, char **argv)
{
	options o;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (arg_is(a, "--duration-s"))
			o.duration_s = arg_double(argc, argv, &i);
		else if (arg_is(a, "--kernel-ms"))
			o.kernel_ms = arg_double(argc, argv, &i);
		else if (arg_is(a, "--iters"))
			o.iters = (unsigned long long)arg_double(argc, argv, &i);
		else if (arg_is(a, "--inflight"))
			o.inflight = (int)arg_double(argc, argv, &i);
		else if (arg_is(a, "--ready-file"))
			o.ready_file = arg_value(argc, argv, &i);
		else if (arg_is(a, "--start-file"))
			o.start_file = arg_value(argc, argv, &i);
		else if (arg_is(a, "--start-timeout-s"))
			o.start_timeout_s = arg_double(argc, argv, &i);
		else if (arg_is(a, "--long-gap-ms"))
			o.long_gap_ms = arg_double(argc, argv, &i);
		else
			usage(argv[0]);
	}
	if (o.duration_s <= 0 || o.kernel_ms <= 0 || o.iters > 0xffffffffull ||
	    o.inflight < 1 || o.inflight > 2 || o.long_gap_ms <= 0)
		usage(argv[0]);
	return o;
}

// Waits between completions in the timed window.
#define GAPS_KEPT 32
struct gaps {
	uint64_t long_ns;	// a wait this long is listed
	uint64_t max, max_end; // the longest, and when it ended (ns since start)
	uint64_t end[GAPS_KEPT], len[GAPS_KEPT];
	unsigned kept, total;
};

static void gap_note(gaps *g, uint64_t t_start, uint64_t from, uint64_t to)
{
	uint64_t len = to - from;
	if (len > g->max) {
		g->max = len;
		g->max_end = to - t_start;
	}
	if (len < g->long_ns)
		return;
	g->total++;
	if (g->kept < GAPS_KEPT) {
		g->end[g->kept] = to - t_start;
		g->len[g->kept] = len;
		g->kept++;
	}
}

struct be {
	cudaStream_t stream;
	int grid;
	float *out;
};

static void launch(const be &w, unsigned int iters)
{
	fill_kernel<<<w.grid, FILL_THREADS, 0, w.stream>>>(iters, w.out);
	CK_LAUNCH();
}

// Median duration in ms of `reps` kernels of `iters` iterations, timed alone
// with CUDA events.
static double time_kernel_ms(const be &w, unsigned int iters, int reps)
{
	float ms[9];
	if (reps > 9)
		reps = 9;
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	for (int i = 0; i < reps; i++) {
		CK(cudaEventRecord(a, w.stream));
		launch(w, iters);
		CK(cudaEventRecord(b, w.stream));
		CK(cudaEventSynchronize(b));
		CK(cudaEventElapsedTime(&ms[i], a, b));
	}
	for (int i = 1; i < reps; i++)
		for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
			float t = ms[j];
			ms[j] = ms[j - 1];
			ms[j - 1] = t;
		}
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	return ms[reps / 2];
}

static unsigned int calibrate(const be &w, double target_ms)
{
	double it = 20000;
	// Grow until one kernel takes at least 1 ms, then scale to the target;
	// run ~0.5 s of kernels in between so the clocks have risen, and scale
	// once more.
	double ms = time_kernel_ms(w, (unsigned int)it, 1);
	while (ms < 1.0 && it < 1e9) {
		it *= 4;
		ms = time_kernel_ms(w, (unsigned int)it, 1);
	}
	it *= target_ms / ms;
	uint64_t warm_end = now_ns() + 500000000ull;
	while (now_ns() < warm_end) {
		launch(w, (unsigned int)(it / 10) + 1);
		CK(cudaStreamSynchronize(w.stream));
	}
	ms = time_kernel_ms(w, (unsigned int)it, 3);
	it *= target_ms / ms;
	if (it > 4e9)
		it = 4e9;
	return (unsigned int)it;
}

int main(int argc, char **argv)
{
	options o = parse(argc, argv);
	be w;

	CK(cudaSetDevice(0));
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	int per_sm = 0;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fill_kernel, FILL_THREADS, 0));
	if (per_sm < 1)
		per_sm = 1;
	w.grid = prop.multiProcessorCount * per_sm;
	CK(cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking));
	CK(cudaMalloc(&w.out, sizeof(float) * (size_t)w.grid * FILL_THREADS));

	unsigned int iters = o.iters ? (unsigned int)o.iters : calibrate(w, o.kernel_ms);
	double kernel_ms_alone = o.iters ? -1.0 : time_kernel_ms(w, iters, 3);

	cudaEvent_t ev[2];
	CK(cudaEventCreateWithFlags(&ev[0], cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&ev[1], cudaEventDisableTiming));

	const uint64_t dur = (uint64_t)(o.duration_s * 1e9);
	const uint64_t give_up = now_ns() + (uint64_t)(o.start_timeout_s * 1e9);
	bool ready = false, timing = false;
	uint64_t t_start = 0, t_last = 0, count = 0;
	double start_unix = 0;
	// Waits between two completions in the window (or from its start to
	// the first, or from the last to its end): how long the BE was stalled,
	// e.g. gated by gpuqos's rotation.
	gaps g = {};
	g.long_ns = (uint64_t)(o.long_gap_ms * 1e6);
	for (uint64_t i = 0;; i++) {
		launch(w, iters);
		CK(cudaEventRecord(ev[i & 1], w.stream));
		if (o.inflight == 2 && i == 0)
			continue;
		// Kernel i-1 (inflight 2) or i (inflight 1). Polled, not
		// synchronised: a BE whose channels another tool has disabled
		// must still end its window on time (it then reports what it
		// completed, possibly 0).
		cudaEvent_t wait = ev[(o.inflight == 2 ? i - 1 : i) & 1];
		const bool was_timing = timing;
		bool done = false, over = false;
		while (!done) {
			cudaError_t e = cudaEventQuery(wait);
			if (e == cudaSuccess)
				done = true;
			else if (e != cudaErrorNotReady)
				CK(e);
			uint64_t t = now_ns();
			if (!timing && ready && (!o.start_file || file_exists(o.start_file))) {
				timing = true;
				t_start = t_last = t;
				start_unix = unix_s();
			}
			if (timing && t - t_start >= dur) {
				gap_note(&g, t_start, t_last, t);
				t_last = t;
				over = true;
				break;
			}
			if (!done)
				sleep_until_ns(t + 50000);
		}
		if (over)
			break;
		uint64_t t = now_ns();
		if (!ready) {
			touch_file(o.ready_file);
			ready = true;
		}
		if (was_timing) { // a completion inside the window
			count++;
			gap_note(&g, t_start, t_last, t);
			t_last = t;
		}
		if (!timing && t > give_up) {
			fprintf(stderr, "be_fill: start file %s did not appear\n", o.start_file);
			return 3;
		}
	}

	double secs = (t_last - t_start) / 1e9;
	double kps = secs > 0 ? (double)count / secs : 0.0;
	printf("{\"workload\":\"be_fill\",\"kernels\":%llu,\"kernels_per_s\":%.2f,"
	       "\"duration_s\":%.3f,\"iters\":%u,\"kernel_ms_alone\":%.3f,"
	       "\"kernel_ms_mean\":%.3f,\"grid\":%d,\"block\":%d,\"blocks_per_sm\":%d,"
	       "\"sms\":%d,\"inflight\":%d,\"start_unix\":%.3f,\"max_gap_ms\":%.3f,"
	       "\"max_gap_at_s\":%.3f,"
	       "\"long_gaps_total\":%u,\"long_gaps\":[",
	       (unsigned long long)count, kps, secs, iters, kernel_ms_alone,
	       kps > 0 ? 1000.0 / kps : 0.0, w.grid, FILL_THREADS, per_sm,
	       prop.multiProcessorCount, o.inflight, start_unix, g.max / 1e6, g.max_end / 1e9, g.total);
	for (unsigned k = 0; k < g.kept; k++)
		printf("%s[%.3f,%.3f]", k ? "," : "", g.end[k] / 1e9, g.len[k] / 1e6);
	printf("],\"device\":\"%s\"}\n", prop.name);
	fflush(stdout);
	// No teardown: kernels may still be queued on channels that another
	// tool keeps disabled, and waiting for them would never end. The
	// driver frees everything when the process exits.
	_exit(0);
}

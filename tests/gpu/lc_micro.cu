// SPDX-License-Identifier: Apache-2.0
//
// lc_micro - the latency-critical (LC) micro workload of the gpuqos
// benchmarks.
//
// One short kernel (a spin on the GPU's %globaltimer, on a small grid) is
// launched at a fixed period. The spin is calibrated at start so that the
// kernel lasts --kernel-us as CUDA events time it alone (the events see
// launch and drain cost on top of the spin, a few µs); --no-calibrate spins
// exactly --kernel-us instead. For each request the host reads
// CLOCK_MONOTONIC, launches (a plain launch, or one CUDA graph holding the
// launch with --graph), waits until the work is complete and reads the clock
// again: latency = completion - launch, as the host sees it.
//
// Waiting: by default the host spins on cudaEventQuery() of an event recorded
// after the launch (lowest noise); --wait sync uses cudaStreamSynchronize().
//
// Schedule: request i is due at t0 + i * period (absolute). If the previous
// request completes after that time, the request starts at once and is
// counted as late. Measurement stops at t0 + --duration-s.
//
// Before measuring, the same request pattern runs for --warmup-s; then
// --ready-file is created, and if --start-file is given the warmup pattern
// keeps running until that file exists, so that a script can start several
// workloads' measurements together.
//
// Experiments (docs/perf-log, "switch cost"):
//   --arrival poisson   exponential gaps of mean --period-us instead of a
//                       fixed period (seeded, --seed)
//   --pre wake|copy|memset|hold [--pre-lead-us L]
//                       before each request, put a tiny operation on the
//                       same stream: an empty 1-block kernel (wake), a
//                       4-byte host-to-device copy (copy engine), a 4-byte
//                       cudaMemsetAsync, or a 1-block kernel that spins
//                       until the host has submitted the request (hold:
//                       keeps the LC's TSG on the GPU from the pre-op on;
//                       it gives up after L + 5000 us); L us before the
//                       request's submit (0: just before it, inside the
//                       timed request)
//   --pre latch [--latch-max-us M]
//                       a kernel on a second stream that spins, from L us
//                       before the request, until the request's own stream
//                       writes its sequence number into device memory
//                       (cuStreamWriteValue32 just before the request's
//                       launch), or at most M us (default L + 500): the LC's
//                       context has work from the latch until the request's
//                       kernel is queued behind the write, with no idle gap
//   --pre waitv         from L us ahead, on a second stream, an empty kernel
//                       and then a stream wait (cuStreamWaitValue32, GEQ)
//                       for the number the request's own stream writes just
//                       before its kernel: the context's channels have a
//                       method pending from the wake to the request
//   --pre gate          the same wait on the request's own stream: from L us
//                       ahead an empty kernel and a wait on mapped host
//                       memory; the request's kernel queues behind it and
//                       the host writes the number after launching it
//   --pre wake2|hold2|train [--train-us T]
//                       the same on a second stream (a channel of its own
//                       in the same context): wake2 an empty kernel, hold2
//                       the spinning kernel, train an empty kernel every
//                       T us (default 20) from L us before the request
//                       until it is submitted
//   --slack-ns N        the thread's timer slack (prctl PR_SET_TIMERSLACK;
//                       Linux's default is 50000 ns: a sleep ends up to
//                       50 us after its due time, as other timers fall)
//   --busy-wait-us N    sleep only until N us before each due time, then
//                       spin on the clock: the request is submitted on
//                       time whatever the host's wakeup latency (sets the
//                       timer slack to 1 ns unless --slack-ns is given)
//   --trace FILE        one line per measured request: its index, when it was
//                       due and when it was submitted (ns after the
//                       measurement began), its latency and the kernel's
//                       run time on the GPU (ns; 0 where not stamped),
//                       when the launch call returned, and the kernel's
//                       start minus the submit (%globaltimer against
//                       CLOCK_REALTIME: a steady offset within a run); a
//                       header line gives the start on CLOCK_MONOTONIC
//   GPU timestamps: block 0 of the kernel writes %globaltimer at its start
//   and end into mapped host memory. gpu_run = end - start (how long the
//   kernel ran), outside = latency - gpu_run (submit to start plus end to
//   host notice: the switch cost shows up here). Both need no clock offset.
//   start_gt_us = %globaltimer at start - CLOCK_REALTIME at submit is only
//   meaningful where the driver keeps %globaltimer on host time.
//
// Output: one JSON line on stdout, e.g.
//   {"workload":"lc_micro","n":5000,"p50_us":37.1,...,"late":0,...}

#include "bench_common.h"

#include <cuda.h>
#include <math.h>
#include <sys/prctl.h>

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

__device__ __forceinline__ uint64_t global_timer_ns(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// Every thread spins until ns nanoseconds of wall time have passed since its
// block started. The store never happens (t is never 0); it only keeps the
// loop from being optimised away.
__global__ void spin_kernel(uint64_t ns, unsigned int *sink, volatile uint64_t *stamp)
{
	uint64_t start = global_timer_ns();
	if (blockIdx.x == 0 && threadIdx.x == 0)
		stamp[0] = start;
	uint64_t t;
	do {
		t = global_timer_ns();
	} while (t - start < ns);
	if (t == 0)
		sink[blockIdx.x] = threadIdx.x;
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		stamp[1] = t;
		__threadfence_system();
	}
}

// Spins until *flag has reached seq (a stream write of the request's) or
// until max_ns of %globaltimer have passed.
__global__ void latch_kernel(volatile unsigned int *flag, unsigned int seq, uint64_t max_ns)
{
	uint64_t start = global_timer_ns();
	while ((int)(*flag - seq) < 0 && global_timer_ns() - start < max_ns)
		;
}

__global__ void wake_kernel(void)
{
}

// Spins until the host sets *flag or until the %globaltimer deadline.
__global__ void hold_kernel(volatile unsigned int *flag, uint64_t max_ns)
{
	uint64_t start = global_timer_ns();
	while (*flag == 0 && global_timer_ns() - start < max_ns)
		;
}

struct options {
	double period_us = 2000;
	double duration_s = 10;
	double kernel_us = 35;
	double warmup_s = 1;
	int blocks = 4;
	int threads = 128;
	bool graph = false;
	bool wait_spin = true;
	bool calibrate = true;
	const char *ready_file = nullptr;
	const char *start_file = nullptr;
	const char *trace_file = nullptr;
	double start_timeout_s = 300;
	bool poisson = false;
	unsigned seed = 1;
	int pre = 0; // PRE_*
	double pre_lead_us = 0;
	double train_us = 20; // --pre train: one empty kernel this often until the request
	double latch_max_us = -1; // --pre latch: the latch's longest spin (-1: lead + 500)
	double busy_wait_us = 0;
	long slack_ns = -1; // -1: leave the thread's timer slack
};

enum { PRE_NONE, PRE_WAKE, PRE_COPY, PRE_MEMSET, PRE_HOLD, PRE_WAKE2, PRE_HOLD2, PRE_TRAIN,
       PRE_LATCH, PRE_WAITV, PRE_GATE };

// A CUDA driver call (--pre latch's stream write), checked as CK() does.
#define CU(call)                                                               \
	do {                                                                   \
		CUresult cu_err_ = (call);                                     \
		if (cu_err_ != CUDA_SUCCESS) {                                 \
			const char *cu_name_ = "?";                            \
			cuGetErrorName(cu_err_, &cu_name_);                    \
			fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__,    \
				__LINE__, #call, cu_name_);                    \
			exit(2);                                               \
		}                                                              \
	} while (0)

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [--period-us 2000] [--duration-s 10] [--kernel-us 35]\n"
		"          [--warmup-s 1] [--blocks 4] [--threads 128] [--graph]\n"
		"          [--wait spin|sync] [--no-calibrate] [--ready-file PATH]\n"
		"          [--start-file PATH] [--start-timeout-s 300]\n"
		"          [--arrival fixed|poisson] [--seed N]\n"
		"          [--pre none|wake|copy|memset|hold|wake2|hold2|train|latch|waitv|gate]\n"
		"          [--pre-lead-us 0] [--train-us 20]\n"
		"          [--slack-ns N] [--busy-wait-us 0] [--trace FILE]\n",
		prog);
	exit(2);
}

static options parse(int argc, char **argv)
{
	options o;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (arg_is(a, "--period-us"))
			o.period_us = arg_double(argc, argv, &i);
		else if (arg_is(a, "--duration-s"))
			o.duration_s = arg_double(argc, argv, &i);
		else if (arg_is(a, "--kernel-us"))
			o.kernel_us = arg_double(argc, argv, &i);
		else if (arg_is(a, "--warmup-s"))
			o.warmup_s = arg_double(argc, argv, &i);
		else if (arg_is(a, "--blocks"))
			o.blocks = (int)arg_double(argc, argv, &i);
		else if (arg_is(a, "--threads"))
			o.threads = (int)arg_double(argc, argv, &i);
		else if (arg_is(a, "--graph"))
			o.graph = true;
		else if (arg_is(a, "--no-calibrate"))
			o.calibrate = false;
		else if (arg_is(a, "--wait")) {
			const char *w = arg_value(argc, argv, &i);
			if (strcmp(w, "spin") == 0)
				o.wait_spin = true;
			else if (strcmp(w, "sync") == 0)
				o.wait_spin = false;
			else
				usage(argv[0]);
		} else if (arg_is(a, "--ready-file"))
			o.ready_file = arg_value(argc, argv, &i);
		else if (arg_is(a, "--start-file"))
			o.start_file = arg_value(argc, argv, &i);
		else if (arg_is(a, "--trace"))
			o.trace_file = arg_value(argc, argv, &i);
		else if (arg_is(a, "--start-timeout-s"))
			o.start_timeout_s = arg_double(argc, argv, &i);
		else if (arg_is(a, "--seed"))
			o.seed = (unsigned)arg_double(argc, argv, &i);
		else if (arg_is(a, "--busy-wait-us"))
			o.busy_wait_us = arg_double(argc, argv, &i);
		else if (arg_is(a, "--slack-ns"))
			o.slack_ns = (long)arg_double(argc, argv, &i);
		else if (arg_is(a, "--pre-lead-us"))
			o.pre_lead_us = arg_double(argc, argv, &i);
		else if (arg_is(a, "--train-us"))
			o.train_us = arg_double(argc, argv, &i);
		else if (arg_is(a, "--latch-max-us"))
			o.latch_max_us = arg_double(argc, argv, &i);
		else if (arg_is(a, "--arrival")) {
			const char *v = arg_value(argc, argv, &i);
			if (strcmp(v, "fixed") == 0)
				o.poisson = false;
			else if (strcmp(v, "poisson") == 0)
				o.poisson = true;
			else
				usage(argv[0]);
		} else if (arg_is(a, "--pre")) {
			const char *v = arg_value(argc, argv, &i);
			if (strcmp(v, "none") == 0)
				o.pre = PRE_NONE;
			else if (strcmp(v, "wake") == 0)
				o.pre = PRE_WAKE;
			else if (strcmp(v, "copy") == 0)
				o.pre = PRE_COPY;
			else if (strcmp(v, "memset") == 0)
				o.pre = PRE_MEMSET;
			else if (strcmp(v, "hold") == 0)
				o.pre = PRE_HOLD;
			else if (strcmp(v, "wake2") == 0)
				o.pre = PRE_WAKE2;
			else if (strcmp(v, "hold2") == 0)
				o.pre = PRE_HOLD2;
			else if (strcmp(v, "train") == 0)
				o.pre = PRE_TRAIN;
			else if (strcmp(v, "latch") == 0)
				o.pre = PRE_LATCH;
			else if (strcmp(v, "waitv") == 0)
				o.pre = PRE_WAITV;
			else if (strcmp(v, "gate") == 0)
				o.pre = PRE_GATE;
			else
				usage(argv[0]);
		} else
			usage(argv[0]);
	}
	if (o.period_us <= 0 || o.duration_s <= 0 || o.kernel_us < 0 ||
	    o.warmup_s < 0 || o.blocks < 1 || o.threads < 1 || o.threads > 1024 ||
	    o.pre_lead_us < 0 || o.pre_lead_us > o.period_us || o.busy_wait_us < 0 ||
	    o.train_us < 5 || o.train_us > o.period_us ||
	    o.busy_wait_us > o.period_us || o.slack_ns < -1 || o.slack_ns > 1000000000L)
		usage(argv[0]);
	if (o.latch_max_us < 0)
		o.latch_max_us = o.pre_lead_us + 500;
	if (o.latch_max_us > 1e6)
		usage(argv[0]);
	if (o.busy_wait_us > 0 && o.slack_ns < 0)
		o.slack_ns = 1;
	return o;
}

// Until the absolute CLOCK_MONOTONIC time t (ns): a sleep, then with
// --busy-wait-us a spin on the clock for the last stretch.
static void wait_until_ns(const options &o, uint64_t t)
{
	const uint64_t busy = (uint64_t)(o.busy_wait_us * 1000.0);
	if (busy == 0) {
		sleep_until_ns(t);
		return;
	}
	if (t > busy)
		sleep_until_ns(t - busy);
	while (now_ns() < t)
		;
}

struct lc {
	options o;
	cudaStream_t stream;
	cudaStream_t side; // --pre wake2, hold2, train: a stream (channel) of its own
	cudaEvent_t done;
	cudaGraphExec_t exec = nullptr;
	unsigned int *sink;
	uint64_t kernel_ns;
	volatile uint64_t *stamp; // mapped host memory: [0] start, [1] end (%globaltimer)
	uint64_t *stamp_dev;
	unsigned int *pre_host; // pinned source of the 4-byte copy
	volatile unsigned int *hold_flag; // mapped: set by the host after the submit
	unsigned int *hold_flag_dev;
	unsigned int *latch_flag; // device memory: the request's stream writes latch_seq
	unsigned int latch_seq = 0;
	volatile unsigned int *gate_flag; // mapped: --pre gate's number, written by the host
	unsigned int *gate_flag_dev;
	bool latch_armed = false; // a latch was launched for the coming request
	uint64_t submit_rt;      // CLOCK_REALTIME at the last submit
	uint64_t call_done;      // CLOCK_MONOTONIC when the last submit's calls returned
};

// Values per traced request (--trace).
#define TRACE_COLS 6

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// The tiny operation of --pre, on the LC's stream.
static void pre_op(lc &w)
{
	switch (w.o.pre) {
	case PRE_WAKE:
		wake_kernel<<<1, 32, 0, w.stream>>>();
		CK_LAUNCH();
		break;
	case PRE_COPY:
		CK(cudaMemcpyAsync(w.sink, w.pre_host, sizeof(unsigned int), cudaMemcpyHostToDevice,
				   w.stream));
		break;
	case PRE_MEMSET:
		CK(cudaMemsetAsync(w.sink, 0, sizeof(unsigned int), w.stream));
		break;
	case PRE_HOLD:
	case PRE_HOLD2:
		*w.hold_flag = 0;
		hold_kernel<<<1, 32, 0, w.o.pre == PRE_HOLD ? w.stream : w.side>>>(
			w.hold_flag_dev, (uint64_t)(w.o.pre_lead_us * 1000.0) + 5000000ull);
		CK_LAUNCH();
		break;
	case PRE_WAKE2:
	case PRE_TRAIN:
		wake_kernel<<<1, 32, 0, w.side>>>();
		CK_LAUNCH();
		break;
	case PRE_LATCH:
		w.latch_seq++;
		latch_kernel<<<1, 32, 0, w.side>>>(w.latch_flag, w.latch_seq,
						    (uint64_t)(w.o.latch_max_us * 1000.0));
		CK_LAUNCH();
		w.latch_armed = true;
		break;
	case PRE_WAITV:
		w.latch_seq++;
		wake_kernel<<<1, 32, 0, w.side>>>();
		CK_LAUNCH();
		CU(cuStreamWaitValue32((CUstream)w.side, (CUdeviceptr)w.latch_flag, w.latch_seq,
				       CU_STREAM_WAIT_VALUE_GEQ));
		w.latch_armed = true;
		break;
	case PRE_GATE:
		w.latch_seq++;
		wake_kernel<<<1, 32, 0, w.stream>>>();
		CK_LAUNCH();
		CU(cuStreamWaitValue32((CUstream)w.stream, (CUdeviceptr)w.gate_flag_dev, w.latch_seq,
				       CU_STREAM_WAIT_VALUE_GEQ));
		break;
	default:
		break;
	}
}

static void launch(lc &w)
{
	if (w.exec) {
		CK(cudaGraphLaunch(w.exec, w.stream));
	} else {
		spin_kernel<<<w.o.blocks, w.o.threads, 0, w.stream>>>(w.kernel_ns, w.sink,
								     w.stamp_dev);
		CK_LAUNCH();
	}
}

// One request: launch, wait for completion. Returns the completion time;
// *start receives the launch time.
static uint64_t request(lc &w, uint64_t *start)
{
	w.stamp[0] = w.stamp[1] = 0;
	w.submit_rt = realtime_ns();
	uint64_t t0 = now_ns();
	if (w.o.pre != PRE_NONE && w.o.pre_lead_us == 0)
		pre_op(w);
	if (w.latch_armed) {
		CU(cuStreamWriteValue32((CUstream)w.stream, (CUdeviceptr)w.latch_flag, w.latch_seq,
					CU_STREAM_WRITE_VALUE_DEFAULT));
		w.latch_armed = false;
	}
	launch(w);
	w.call_done = now_ns();
	if (w.o.pre == PRE_HOLD || w.o.pre == PRE_HOLD2)
		*w.hold_flag = 1;
	if (w.o.pre == PRE_GATE)
		*w.gate_flag = w.latch_seq;
	if (w.o.wait_spin) {
		CK(cudaEventRecord(w.done, w.stream));
		cudaError_t e;
		while ((e = cudaEventQuery(w.done)) == cudaErrorNotReady)
			;
		CK(e);
	} else {
		CK(cudaStreamSynchronize(w.stream));
	}
	*start = t0;
	return now_ns();
}

// Kernel duration on the GPU, alone, by CUDA events (median of 21).
static double measure_kernel_us(lc &w)
{
	const int reps = 21;
	float ms[reps];
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	for (int i = 0; i < reps; i++) {
		CK(cudaEventRecord(a, w.stream));
		launch(w);
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
	return ms[reps / 2] * 1000.0;
}

int main(int argc, char **argv)
{
	lc w;
	w.o = parse(argc, argv);
	const options &o = w.o;
	w.kernel_ns = (uint64_t)(o.kernel_us * 1000.0);
	if (o.slack_ns >= 0 && prctl(PR_SET_TIMERSLACK, (unsigned long)o.slack_ns, 0UL, 0UL, 0UL) != 0) {
		fprintf(stderr, "lc_micro: PR_SET_TIMERSLACK %ld: %s\n", o.slack_ns, strerror(errno));
		return 2;
	}

	CK(cudaSetDevice(0));
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	CK(cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&w.side, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&w.done, cudaEventDisableTiming));
	CK(cudaMalloc(&w.sink, sizeof(unsigned int) * (size_t)o.blocks));
	CK(cudaMalloc(&w.latch_flag, sizeof(unsigned int)));
	CK(cudaMemset(w.latch_flag, 0, sizeof(unsigned int)));
	unsigned int *gate_host;
	CK(cudaHostAlloc(&gate_host, sizeof(unsigned int), cudaHostAllocMapped));
	*gate_host = 0;
	w.gate_flag = gate_host;
	CK(cudaHostGetDevicePointer(&w.gate_flag_dev, gate_host, 0));
	uint64_t *stamp_host;
	CK(cudaHostAlloc(&stamp_host, 2 * sizeof(uint64_t), cudaHostAllocMapped));
	w.stamp = stamp_host;
	CK(cudaHostGetDevicePointer(&w.stamp_dev, stamp_host, 0));
	CK(cudaHostAlloc(&w.pre_host, sizeof(unsigned int), cudaHostAllocDefault));
	*w.pre_host = 0;
	unsigned int *flag_host;
	CK(cudaHostAlloc(&flag_host, sizeof(unsigned int), cudaHostAllocMapped));
	*flag_host = 1;
	w.hold_flag = flag_host;
	CK(cudaHostGetDevicePointer(&w.hold_flag_dev, flag_host, 0));
	srand48(o.seed);

	if (o.calibrate) {
		// The event-timed duration is the spin plus a fixed cost: take the
		// cost off the spin (twice, the second time with warm clocks).
		const double target_ns = o.kernel_us * 1000.0;
		for (int round = 0; round < 2; round++) {
			double cost_ns = measure_kernel_us(w) * 1000.0 - (double)w.kernel_ns;
			double spin = target_ns - cost_ns;
			w.kernel_ns = spin > 0 ? (uint64_t)spin : 0;
		}
	}

	if (o.graph) {
		cudaGraph_t g;
		CK(cudaStreamBeginCapture(w.stream, cudaStreamCaptureModeThreadLocal));
		spin_kernel<<<o.blocks, o.threads, 0, w.stream>>>(w.kernel_ns, w.sink, w.stamp_dev);
		CK_LAUNCH();
		CK(cudaStreamEndCapture(w.stream, &g));
		CK(cudaGraphInstantiate(&w.exec, g, 0));
		CK(cudaGraphDestroy(g));
		CK(cudaGraphUpload(w.exec, w.stream));
	}
	CK(cudaStreamSynchronize(w.stream));
	double kernel_us_measured = measure_kernel_us(w);

	const uint64_t period = (uint64_t)(o.period_us * 1000.0);
	uint64_t s, t;

	// Warmup with the same pattern; then ready; then wait for the start file.
	uint64_t next = now_ns();
	const uint64_t warm_end = next + (uint64_t)(o.warmup_s * 1e9);
	const uint64_t give_up = warm_end + (uint64_t)(o.start_timeout_s * 1e9);
	bool ready = false;
	for (;;) {
		wait_until_ns(o, next);
		t = request(w, &s);
		next += period;
		if (t > next)
			next = t; // no backlog during warmup
		if (!ready && t >= warm_end) {
			touch_file(o.ready_file);
			ready = true;
		}
		if (ready && (!o.start_file || file_exists(o.start_file)))
			break;
		if (t > give_up) {
			fprintf(stderr, "lc_micro: start file %s did not appear\n", o.start_file);
			return 3;
		}
	}

	// Measurement.
	size_t cap = (size_t)(o.duration_s * 1e6 / o.period_us) * (o.poisson ? 4 : 1) + 16;
	uint64_t *lat = (uint64_t *)malloc(cap * sizeof(uint64_t));
	uint64_t *run = (uint64_t *)malloc(cap * sizeof(uint64_t));
	uint64_t *outside = (uint64_t *)malloc(cap * sizeof(uint64_t));
	int64_t *start_gt = (int64_t *)malloc(cap * sizeof(int64_t));
	// due, submit, latency, run, launch call returned, kernel start - submit
	uint64_t *tr = (uint64_t *)calloc(cap * TRACE_COLS, sizeof(uint64_t));
	size_t nstamp = 0;
	if (!lat || !run || !outside || !start_gt || !tr) {
		perror("malloc");
		return 2;
	}
	size_t n = 0;
	uint64_t late = 0;
	const uint64_t t_start = now_ns();
	const uint64_t t_end = t_start + (uint64_t)(o.duration_s * 1e9);
	uint64_t prev_done = 0;
	next = t_start;
	const uint64_t lead = (uint64_t)(o.pre_lead_us * 1000.0);
	while (next < t_end && n < cap) {
		if (prev_done > next) {
			late++; // previous request ran past this one's slot
			if (lead)
				pre_op(w);
		} else {
			if (lead) {
				wait_until_ns(o, next - lead);
				pre_op(w);
				// A train: an empty kernel every train_us until the request.
				const uint64_t step = (uint64_t)(o.train_us * 1000.0);
				for (uint64_t at = next - lead + step; o.pre == PRE_TRAIN && at < next;
				     at += step) {
					wait_until_ns(o, at);
					pre_op(w);
				}
			}
			wait_until_ns(o, next);
		}
		t = request(w, &s);
		lat[n] = t - s;
		uint64_t *trn = tr + TRACE_COLS * n;
		trn[0] = next - t_start;
		trn[1] = s - t_start;
		trn[2] = t - s;
		trn[4] = w.call_done - t_start;
		uint64_t g0 = w.stamp[0], g1 = w.stamp[1];
		if (g0)
			trn[5] = g0 - w.submit_rt; // two's complement: printed signed
		if (g0 && g1 >= g0 && g1 - g0 <= t - s) {
			trn[3] = g1 - g0;
			run[nstamp] = g1 - g0;
			outside[nstamp] = (t - s) - (g1 - g0);
			start_gt[nstamp] = (int64_t)(g0 - w.submit_rt);
			nstamp++;
		}
		n++;
		prev_done = t;
		if (o.poisson) {
			double u = drand48();
			next += (uint64_t)(-log(1.0 - u) * (double)period);
		} else {
			next += period;
		}
		if (t >= t_end)
			break;
	}
	const uint64_t t_stop = now_ns();
	if (o.trace_file) {
		FILE *f = fopen(o.trace_file, "w");
		if (!f) {
			fprintf(stderr, "lc_micro: cannot write %s: %s\n", o.trace_file, strerror(errno));
			return 2;
		}
		// Times are ns after t_start (CLOCK_MONOTONIC, given here, to line
		// requests up with other processes' logs). kstart_ns: the kernel's
		// %globaltimer start minus the submit's CLOCK_REALTIME; its offset
		// is unknown but steady within a run, so a late kernel shows as a
		// large value and a late completion notice does not.
		fprintf(f, "# t_start_mono_ns %llu\n", (unsigned long long)t_start);
		fprintf(f, "# i due_ns submit_ns latency_ns gpu_run_ns call_ns kstart_ns\n");
		for (size_t i = 0; i < n; i++) {
			const uint64_t *ti = tr + TRACE_COLS * i;
			fprintf(f, "%zu %llu %llu %llu %llu %llu %lld\n", i, (unsigned long long)ti[0],
				(unsigned long long)ti[1], (unsigned long long)ti[2],
				(unsigned long long)ti[3], (unsigned long long)ti[4],
				(long long)(int64_t)ti[5]);
		}
		if (fclose(f) != 0) {
			fprintf(stderr, "lc_micro: cannot write %s\n", o.trace_file);
			return 2;
		}
	}

	// Lag: how long after its due time each request was submitted; "late":
	// more than 60 us past the median lag (the wake's judging gives a
	// request 150 us after a wake issued 100 us ahead of it).
	uint64_t *lag = (uint64_t *)malloc((n ? n : 1) * sizeof(uint64_t));
	if (!lag) {
		perror("malloc");
		return 2;
	}
	for (size_t i = 0; i < n; i++)
		lag[i] = tr[4 * i + 1] > tr[4 * i] ? tr[4 * i + 1] - tr[4 * i] : 0;
	qsort(lag, n, sizeof(uint64_t), cmp_u64);
	const double lag_p50 = percentile_sorted(lag, n, 50);
	size_t lag_late = 0;
	for (size_t i = 0; i < n; i++)
		lag_late += (double)lag[i] > lag_p50 + 60000.0;
	free(lag);

	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += (double)lat[i];
	qsort(lat, n, sizeof(uint64_t), cmp_u64);
	qsort(run, nstamp, sizeof(uint64_t), cmp_u64);
	qsort(outside, nstamp, sizeof(uint64_t), cmp_u64);
	// start_gt may be negative (clock offset): sort as signed.
	qsort(start_gt, nstamp, sizeof(int64_t), cmp_i64);
	const char *pre_names[] = {"none", "wake", "copy", "memset", "hold", "wake2", "hold2", "train",
				   "latch", "waitv", "gate"};

	printf("{\"workload\":\"lc_micro\",\"n\":%zu,\"p10_us\":%.1f,\"p25_us\":%.1f,"
	       "\"p75_us\":%.1f,\"p999_us\":%.1f,\"run_p50_us\":%.1f,\"run_p99_us\":%.1f,"
	       "\"outside_p10_us\":%.1f,\"outside_p50_us\":%.1f,\"outside_p90_us\":%.1f,"
	       "\"outside_p99_us\":%.1f,\"start_gt_p1_us\":%.1f,\"start_gt_p50_us\":%.1f,"
	       "\"stamped\":%zu,\"arrival\":\"%s\",\"pre\":\"%s\",\"pre_lead_us\":%.0f,"
	       "\"busy_wait_us\":%.0f,\"slack_ns\":%ld,\"lag_p50_us\":%.1f,\"lag_late_pct\":%.2f,",
	       n, percentile_sorted(lat, n, 10) / 1e3, percentile_sorted(lat, n, 25) / 1e3,
	       percentile_sorted(lat, n, 75) / 1e3, percentile_sorted(lat, n, 99.9) / 1e3,
	       percentile_sorted(run, nstamp, 50) / 1e3, percentile_sorted(run, nstamp, 99) / 1e3,
	       percentile_sorted(outside, nstamp, 10) / 1e3,
	       percentile_sorted(outside, nstamp, 50) / 1e3,
	       percentile_sorted(outside, nstamp, 90) / 1e3,
	       percentile_sorted(outside, nstamp, 99) / 1e3,
	       nstamp ? start_gt[(nstamp - 1) / 100] / 1e3 : 0.0,
	       nstamp ? start_gt[(nstamp - 1) / 2] / 1e3 : 0.0, nstamp,
	       o.poisson ? "poisson" : "fixed", pre_names[o.pre], o.pre_lead_us, o.busy_wait_us,
	       o.slack_ns, lag_p50 / 1e3, n ? 100.0 * (double)lag_late / (double)n : 0.0);
	printf("\"p50_us\":%.1f,\"p90_us\":%.1f,"
	       "\"p99_us\":%.1f,\"max_us\":%.1f,\"mean_us\":%.1f,\"late\":%llu,"
	       "\"period_us\":%.0f,\"kernel_us\":%.1f,\"kernel_us_measured\":%.1f,"
	       "\"spin_us\":%.1f,\"blocks\":%d,\"threads\":%d,\"graph\":%s,\"wait\":\"%s\","
	       "\"duration_s\":%.3f,\"device\":\"%s\"}\n",
	       percentile_sorted(lat, n, 50) / 1e3, percentile_sorted(lat, n, 90) / 1e3,
	       percentile_sorted(lat, n, 99) / 1e3, n ? lat[n - 1] / 1e3 : 0.0,
	       n ? sum / (double)n / 1e3 : 0.0, (unsigned long long)late, o.period_us,
	       o.kernel_us, kernel_us_measured, w.kernel_ns / 1e3, o.blocks, o.threads,
	       o.graph ? "true" : "false", o.wait_spin ? "spin" : "sync",
	       (t_stop - t_start) / 1e9, prop.name);
	fflush(stdout);

	free(lat);
	free(run);
	free(outside);
	free(start_gt);
	free(tr);
	if (w.exec)
		CK(cudaGraphExecDestroy(w.exec));
	CK(cudaFree(w.sink));
	CK(cudaEventDestroy(w.done));
	CK(cudaStreamDestroy(w.stream));
	return 0;
}

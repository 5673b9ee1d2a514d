/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rm_workload.c - a test program that talks to the RM the way libcuda does,
 * one step per line read from stdin, so a test can interleave its steps
 * with what it tells the preempt agent.
 *
 * Owns: issuing allocs, controls and frees in every form (NVOS21, NVOS64,
 * NVOS54, the XFER wrapper) and printing exactly one line of results per
 * step on stdout. Does not own: the RM (libfake_rm.so or a GPU) or any
 * gpuqos logic. Its stdout must be byte-identical with and without the
 * preempt agent, so it prints no fds or pids.
 *
 * Usage: rm_workload CTL_PATH < steps
 *   open                       open CTL_PATH (the fake control device)
 *   client FORM                allocate a client (FORM: 21 64 x21 x64)
 *   device CLIENT ID FORM      NV01_DEVICE_0 with deviceId ID
 *   tsg DEVICE ENGINE FORM     a channel group with engineType ENGINE
 *   settime TSG US FORM        SET_TIMESLICE as libcuda does (FORM: 54 x54)
 *   gettime TSG                GET_TIMESLICE
 *   interleave TSG LEVEL       SET_INTERLEAVE_LEVEL
 *   subdevice DEVICE           NV20_SUBDEVICE_0 under device DEVICE
 *   channel TSG                a GPFIFO channel (0xc86f) in channel group TSG
 *   chanstate CHANNEL          fake_rm's state of channel CHANNEL (the Nth made)
 *   chantime CHANNEL           when fake_rm last disabled it (CLOCK_MONOTONIC ns)
 *   chanoff CHANNEL            how long fake_rm has held it off in all, and when (ns)
 *   free tsg|device|client|channel N FORM   (FORM: 00 x00)
 *   other | nonrm | close | exit
 *   closefds                   close every fd from 3 to 1023 but CTL_PATH's,
 *                              as daemons do; prints how many were open
 *   fork FLAGFILE              child: client, device 1, tsg 1, then waits
 *                              for FLAGFILE to exist and exits 0
 *   wait                       wait for the child
 *   probe                      whether dlsym(RTLD_DEFAULT) finds launch functions
 *   launch LIB N GAP_US        load LIB (tests/preempt/fake_libcuda.c) as the
 *                              CUDA runtime loads libcuda: dlopen, then
 *                              dlsym(handle, "cuGetProcAddress_v2"); through
 *                              it cuLaunchKernel N times GAP_US apart, then
 *                              once each: its per-thread-stream variant,
 *                              cuLaunchCooperativeKernel, cuLaunchKernelEx,
 *                              cuGraphLaunch through cuGetProcAddress itself,
 *                              cuLaunchKernel found by dlsym on the handle and
 *                              on RTLD_DEFAULT, cuMemAlloc (not
 *                              a launch); prints LIB's counts of launches with
 *                              intact arguments and whether dlsym(RTLD_NEXT)
 *                              called in LIB still looked after LIB
 *   periodic LIB N PERIOD_US [poisson SEED | destroy K | event GAP_US | hint GAP_US]
 *                              cuLaunchKernel N times, one every PERIOD_US
 *                              (absolute times), or with exponential gaps of
 *                              that mean (poisson), or destroying the
 *                              context every K launches (alternately
 *                              cuCtxDestroy through cuGetProcAddress and
 *                              cuDevicePrimaryCtxReset_v2 through dlsym), or
 *                              each launch GAP_US after a cuEventRecord
 *                              (through cuGetProcAddress) made on time, or
 *                              with Poisson gaps (seed 7), each launch
 *                              GAP_US after gpuqos_request_hint(GAP_US)
 *                              (dlsym(RTLD_DEFAULT); none: "periodic failed");
 *                              prints LIB's count of the preempt agent's
 *                              wake launches, those on a destroyed
 *                              context's stream, and how long after a wake
 *                              the next launch came (min, median, max us),
 *                              its count of event records and of wakes in
 *                              a context that came back; each
 *                              request also goes to LIB's log
 *                              (FAKE_CUDA_LOG): "S DUE NOW" before it (the
 *                              time it was due on, and the clock), "V NOW"
 *                              before its event record, "L NOW" after its
 *                              launch returned
 *   waits LIB N PERIOD_US BUSY_US stream|ctx|query
 *                              cuLaunchKernel N times, one every PERIOD_US,
 *                              each taking BUSY_US in LIB's clock, then
 *                              waited for by cuStreamSynchronize (its
 *                              per-thread-stream variant), cuCtxSynchronize
 *                              or cuEventQuery spun on; logged as
 *                              periodic's, and "R NOW" once the wait said
 *                              done
 *   launchtime LIB N           the same cuLaunchKernel N times back to back;
 *                              prints the mean time of one call (the cost of
 *                              the library's launch wrapper, run with and
 *                              without it: tests/preempt/launch_bench.sh)
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi/rm_abi.h"

#define W_MAX 64
/* Put in every status word before a call: the RM (or whoever answers in its
 * place) must overwrite it. */
#define W_STATUS_UNSET 0xeeu

static const char *ctl_path;
static int ctl = -1;
static rm_handle clients[W_MAX], devices[W_MAX], dev_client[W_MAX];
static rm_handle tsgs[W_MAX], tsg_client[W_MAX];
static rm_handle chans[W_MAX], chan_client[W_MAX];
static int nclient, ndevice, ntsg, nchan;
static rm_handle next_handle = 0x5e000000u;
static pid_t child = -1;

static rm_u64 ptr(const void *p)
{
	return (rm_u64)(uintptr_t)p;
}

/* Issue a decoded call directly, or wrapped in an XFER when xfer. */
static int rm_call(unsigned long request, unsigned esc, void *block, unsigned size, int xfer)
{
	struct rm_xfer x = { .cmd = esc, .size = size, .ptr = ptr(block) };

	return xfer ? ioctl(ctl, RM_IOCTL_XFER, &x) : ioctl(ctl, request, block);
}

/* Returns the RM status; *ret gets ioctl()'s result. */
static rm_u32 rm_alloc(const char *form, rm_handle root, rm_handle parent, rm_handle *h,
		       rm_u32 cls, void *params, rm_u32 size, int *ret)
{
	int xfer = form[0] == 'x';

	if (strcmp(form + xfer, "64") == 0) {
		struct rm_alloc64_params p = { .hRoot = root, .hObjectParent = parent,
					       .hObjectNew = *h, .hClass = cls,
					       .pAllocParms = ptr(params), .paramsSize = size,
					       .status = W_STATUS_UNSET };

		*ret = rm_call(RM_IOCTL_ALLOC64, RM_ESC_ALLOC, &p, sizeof(p), xfer);
		*h = p.hObjectNew;
		return p.status;
	}
	struct rm_alloc21_params p = { .hRoot = root, .hObjectParent = parent, .hObjectNew = *h,
				       .hClass = cls, .pAllocParms = ptr(params),
				       .paramsSize = size, .status = W_STATUS_UNSET };

	*ret = rm_call(RM_IOCTL_ALLOC21, RM_ESC_ALLOC, &p, sizeof(p), xfer);
	*h = p.hObjectNew;
	return p.status;
}

static rm_u32 rm_control(int xfer, rm_handle client, rm_handle obj, rm_u32 cmd, void *params,
			 rm_u32 size, int *ret)
{
	struct rm_control_params p = { .hClient = client, .hObject = obj, .cmd = cmd,
				       .params = ptr(params), .paramsSize = size,
				       .status = W_STATUS_UNSET };

	*ret = rm_call(RM_IOCTL_CONTROL, RM_ESC_CONTROL, &p, sizeof(p), xfer);
	return p.status;
}

static int idx(const char *s, int n)
{
	int i = atoi(s);

	if (i < 0 || i >= n) {
		printf("bad index %s\n", s);
		exit(2);
	}
	return i;
}

static void do_client(const char *form)
{
	rm_handle h = 0;
	int ret;
	rm_u32 st = rm_alloc(form, 0, 0, &h, RM_CLASS_ROOT_CLIENT, NULL, 0, &ret);

	if (ret == 0 && st == 0)
		clients[nclient++] = h;
	printf("client h=0x%x ret=%d status=0x%x\n", h, ret, st);
}

static void do_device(int c, rm_u32 id, const char *form)
{
	struct rm_device_alloc a = { .deviceId = id };
	rm_handle h = next_handle++;
	int ret;
	rm_u32 st = rm_alloc(form, clients[c], clients[c], &h, RM_CLASS_DEVICE, &a, sizeof(a), &ret);

	if (ret == 0 && st == 0) {
		dev_client[ndevice] = clients[c];
		devices[ndevice++] = h;
	}
	printf("device h=0x%x ret=%d status=0x%x\n", h, ret, st);
}

static void do_tsg(int d, rm_u32 engine, const char *form)
{
	struct rm_tsg_alloc a = { .engineType = engine };
	rm_handle h = next_handle++;
	int ret;
	rm_u32 st = rm_alloc(form, dev_client[d], devices[d], &h, RM_CLASS_TSG, &a, sizeof(a), &ret);

	if (ret == 0 && st == 0) {
		tsg_client[ntsg] = dev_client[d];
		tsgs[ntsg++] = h;
	}
	printf("tsg h=0x%x engine=%u ret=%d status=0x%x\n", h, engine, ret, st);
}

static void do_subdevice(int d)
{
	rm_handle h = next_handle++;
	int ret;
	rm_u32 st = rm_alloc("64", dev_client[d], devices[d], &h, RM_CLASS_SUBDEVICE, NULL, 0, &ret);

	printf("subdevice h=0x%x ret=%d status=0x%x\n", h, ret, st);
}

static void do_channel(int t)
{
	rm_handle h = next_handle++;
	int ret;
	rm_u32 st = rm_alloc("64", tsg_client[t], tsgs[t], &h, RM_CLASS_HOPPER_GPFIFO, NULL, 0, &ret);

	if (ret == 0 && st == 0 && nchan < W_MAX) {
		chan_client[nchan] = tsg_client[t];
		chans[nchan++] = h;
	}
	printf("channel h=0x%x ret=%d status=0x%x\n", h, ret, st);
}

/* Asks libfake_rm.so (preloaded) how it holds a channel. */
static void do_chanstate(int c)
{
	int (*state)(rm_handle, rm_handle) =
		(int (*)(rm_handle, rm_handle))dlsym(RTLD_DEFAULT, "fake_rm_channel_state");
	int v = state ? state(chan_client[c], chans[c]) : -2;

	if (v < 0)
		printf("chanstate unknown %d\n", v);
	else
		printf("chanstate disabled=%d disables=%d enables=%d\n", v % 2, (v % 2000) / 2,
		       v / 2000);
}

static void do_chanoff(int c)
{
	unsigned long long (*off)(rm_handle, rm_handle, unsigned long long *) =
		(unsigned long long (*)(rm_handle, rm_handle, unsigned long long *))dlsym(
			RTLD_DEFAULT, "fake_rm_channel_off_ns");
	unsigned long long now = 0, v = off ? off(chan_client[c], chans[c], &now) : 0ull;

	printf("chanoff ns=%llu now=%llu\n", v, now);
}

static void do_chantime(int c)
{
	unsigned long long (*at)(rm_handle, rm_handle) = (unsigned long long (*)(
		rm_handle, rm_handle))dlsym(RTLD_DEFAULT, "fake_rm_channel_disabled_at");

	printf("chantime ns=%llu\n", at ? at(chan_client[c], chans[c]) : 0ull);
}

static void do_settime(int t, rm_u64 us, const char *form)
{
	struct rm_tsg_timeslice ts = { .timesliceUs = us };
	int ret;
	rm_u32 st = rm_control(form[0] == 'x', tsg_client[t], tsgs[t], RM_CTRL_TSG_SET_TIMESLICE,
			       &ts, sizeof(ts), &ret);

	/* params_after shows the application's memory was left alone. */
	printf("settime t%d ret=%d status=0x%x params_after=%llu\n", t, ret, st,
	       (unsigned long long)ts.timesliceUs);
}

static void do_gettime(int t)
{
	struct rm_tsg_timeslice ts = { 0 };
	int ret;
	rm_u32 st = rm_control(0, tsg_client[t], tsgs[t], RM_CTRL_TSG_GET_TIMESLICE, &ts,
			       sizeof(ts), &ret);

	printf("gettime t%d ret=%d status=0x%x us=%llu\n", t, ret, st,
	       (unsigned long long)ts.timesliceUs);
}

static void do_interleave(int t, rm_u32 level)
{
	struct rm_tsg_interleave il = { .tsgInterleaveLevel = level };
	int ret;
	rm_u32 st = rm_control(0, tsg_client[t], tsgs[t], RM_CTRL_TSG_SET_INTERLEAVE, &il,
			       sizeof(il), &ret);

	printf("interleave t%d ret=%d status=0x%x\n", t, ret, st);
}

static void do_free(const char *what, const char *n, const char *form)
{
	struct rm_free_params p = { .status = W_STATUS_UNSET };
	int ret, i;

	if (strcmp(what, "client") == 0) {
		i = idx(n, nclient);
		p.hRoot = p.hObjectParent = p.hObjectOld = clients[i];
	} else if (strcmp(what, "device") == 0) {
		i = idx(n, ndevice);
		p.hRoot = p.hObjectParent = dev_client[i];
		p.hObjectOld = devices[i];
	} else if (strcmp(what, "channel") == 0) {
		i = idx(n, nchan);
		p.hRoot = chan_client[i];
		p.hObjectOld = chans[i];
	} else {
		i = idx(n, ntsg);
		p.hRoot = tsg_client[i];
		p.hObjectOld = tsgs[i];
	}
	ret = rm_call(RM_IOCTL_FREE, RM_ESC_FREE, &p, sizeof(p), form[0] == 'x');
	printf("free %s %d ret=%d status=0x%x\n", what, i, ret, p.status);
}

static void do_other(void)
{
	rm_u64 v = 0;
	/* An 'F' ioctl the preempt agent does not decode. */
	int ret = ioctl(ctl, RM_IOWR(0x57, sizeof(v)), &v);

	printf("other ret=%d errno=%d\n", ret, ret == 0 ? 0 : errno);
}

static void do_nonrm(void)
{
	int n = -1;
	int ret = ioctl(ctl, FIONREAD, &n);

	printf("nonrm ret=%d n=%d\n", ret, n);
}

static void do_closefds(void)
{
	int n = 0;

	for (int fd = 3; fd < 1024; fd++)
		if (fd != ctl && close(fd) == 0)
			n++;
	printf("closefds closed=%d\n", n);
}

static void child_main(const char *flag)
{
	struct timespec ms = { .tv_nsec = 5000000 };
	struct stat st;

	next_handle = 0x7c000000u;
	fflush(stdout);
	/* The child's lines would interleave with the parent's: silence them. */
	if (freopen("/dev/null", "w", stdout) == NULL)
		_exit(4);
	do_client("64");
	do_device(nclient - 1, 1, "64");
	do_tsg(ndevice - 1, 1, "64");
	for (int i = 0; i < 2000; i++) {
		if (stat(flag, &st) == 0)
			_exit(ntsg > 0 ? 0 : 5);
		nanosleep(&ms, NULL);
	}
	_exit(3);
}

static void do_fork(const char *flag)
{
	fflush(stdout);
	child = fork();
	if (child == 0)
		child_main(flag);
	printf("fork %s\n", child > 0 ? "ok" : "failed");
}

static void do_wait(void)
{
	int status = 0;

	if (child <= 0 || waitpid(child, &status, 0) != child) {
		printf("wait failed\n");
		return;
	}
	printf("child exit=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128);
}

typedef int (*w_gpa_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*w_gpa1_fn)(const char *, void **, int, unsigned long long);
typedef int (*w_launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, void *, void **, void **);
typedef int (*w_coop_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			 unsigned, void *, void **);
typedef int (*w_ex_fn)(const void *, void *, void **, void **);
typedef int (*w_graph_fn)(void *, void *);
typedef int (*w_alloc_fn)(void **, unsigned long);
typedef unsigned long (*w_count_fn)(int);
typedef int (*w_check_fn)(void);

#define W_F ((void *)0xf00d)
#define W_ST ((void *)0x5eed)
#define W_PARAMS ((void **)0xa11)
#define W_EXTRA ((void **)0xe47)

static void *w_gpa(w_gpa_fn gpa, const char *sym, int ver, unsigned long long flags)
{
	void *f = NULL;
	int st = -1;

	if (gpa(sym, &f, ver, flags, &st) != 0 || st != 0)
		return NULL;
	return f;
}

static void do_launch(const char *lib, unsigned long n, unsigned long gap_us)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	struct timespec gap = { .tv_sec = (time_t)(gap_us / 1000000u),
				.tv_nsec = (long)(gap_us % 1000000u) * 1000 };
	w_gpa_fn gpa, gpa_self;
	w_launch_fn lk, lk_ptsz, lk_dlsym, lk_default;
	w_coop_fn coop;
	w_ex_fn ex;
	w_graph_fn graph;
	w_alloc_fn alloc;
	w_count_fn count;
	w_check_fn next_check;
	void *mem;
	int bad = 0;

	if (!h) {
		printf("launch failed: dlopen\n");
		return;
	}
	gpa = (w_gpa_fn)dlsym(h, "cuGetProcAddress_v2");
	count = (w_count_fn)dlsym(h, "fake_cuda_calls");
	next_check = (w_check_fn)dlsym(h, "fake_next_check");
	lk_dlsym = (w_launch_fn)dlsym(h, "cuLaunchKernel");
	/* What a program linked with -lcuda calls: the first definition. */
	lk_default = (w_launch_fn)dlsym(RTLD_DEFAULT, "cuLaunchKernel");
	if (!gpa || !count || !next_check || !lk_dlsym || !lk_default) {
		printf("launch failed: dlsym\n");
		return;
	}
	lk = (w_launch_fn)w_gpa(gpa, "cuLaunchKernel", 12000, 0);
	lk_ptsz = (w_launch_fn)w_gpa(gpa, "cuLaunchKernel", 12000, 2);
	coop = (w_coop_fn)w_gpa(gpa, "cuLaunchCooperativeKernel", 12000, 0);
	ex = (w_ex_fn)w_gpa(gpa, "cuLaunchKernelEx", 12000, 0);
	gpa_self = (w_gpa_fn)w_gpa(gpa, "cuGetProcAddress", 12000, 0);
	alloc = (w_alloc_fn)w_gpa(gpa, "cuMemAlloc", 12000, 0);
	if (!lk || !lk_ptsz || !coop || !ex || !gpa_self || !alloc) {
		printf("launch failed: cuGetProcAddress\n");
		return;
	}
	graph = (w_graph_fn)w_gpa(gpa_self, "cuGraphLaunch", 12000, 0);
	if (!graph) {
		printf("launch failed: cuGetProcAddress(cuGraphLaunch)\n");
		return;
	}
	for (unsigned long i = 0; i < n; i++) {
		bad |= lk(W_F, 1, 2, 3, 4, 5, 6, 7, W_ST, W_PARAMS, W_EXTRA);
		if (gap_us && i + 1 < n)
			nanosleep(&gap, NULL);
	}
	bad |= lk_ptsz(W_F, 1, 2, 3, 4, 5, 6, 7, W_ST, W_PARAMS, W_EXTRA);
	bad |= coop(W_F, 1, 2, 3, 4, 5, 6, 7, W_ST, W_PARAMS);
	bad |= ex((const void *)0xc0f, W_F, W_PARAMS, W_EXTRA);
	bad |= graph((void *)0x6a, W_ST);
	bad |= lk_dlsym(W_F, 1, 2, 3, 4, 5, 6, 7, W_ST, W_PARAMS, W_EXTRA);
	bad |= lk_default(W_F, 1, 2, 3, 4, 5, 6, 7, W_ST, W_PARAMS, W_EXTRA);
	bad |= alloc(&mem, 64);
	printf("launch ok=%lu bad=%lu other=%lu status=%s rtld_next=%s\n", count(0), count(1),
	       count(2), bad ? "error" : "ok", next_check() ? "ok" : "wrong");
}

typedef int (*w_destroy_fn)(void *);
typedef int (*w_reset_fn)(int);
typedef void (*w_log_fn)(const char *);

static unsigned long long w_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static unsigned long long w_ns(const struct timespec *t)
{
	return (unsigned long long)t->tv_sec * 1000000000ull + (unsigned long long)t->tv_nsec;
}

/* One line to the fake's log: what, and one or two times. */
static void w_log(w_log_fn log, char what, unsigned long long a, unsigned long long b)
{
	char line[64];

	if (b)
		snprintf(line, sizeof(line), "%c %llu %llu\n", what, a, b);
	else
		snprintf(line, sizeof(line), "%c %llu\n", what, a);
	log(line);
}

typedef int (*w_evrec_fn)(void *, void *);

typedef int (*w_hint_fn)(unsigned);

static void do_periodic(const char *lib, unsigned long n, unsigned long period_us, int poisson,
			unsigned seed, unsigned long destroy_every, long event_gap_us,
			long hint_gap_us)
{
	w_hint_fn hint = hint_gap_us >= 0 ? (w_hint_fn)dlsym(RTLD_DEFAULT, "gpuqos_request_hint")
					  : NULL;
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	w_gpa_fn gpa = h ? (w_gpa_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
	w_launch_fn lk = gpa ? (w_launch_fn)w_gpa(gpa, "cuLaunchKernel", 12000, 0) : NULL;
	w_evrec_fn evrec = gpa ? (w_evrec_fn)w_gpa(gpa, "cuEventRecord", 12000, 0) : NULL;
	w_count_fn calls = h ? (w_count_fn)dlsym(h, "fake_cuda_calls") : NULL;
	w_destroy_fn destroy = gpa ? (w_destroy_fn)w_gpa(gpa, "cuCtxDestroy", 12000, 0) : NULL;
	w_reset_fn reset = h ? (w_reset_fn)dlsym(h, "cuDevicePrimaryCtxReset_v2") : NULL;
	w_count_fn wakes = h ? (w_count_fn)dlsym(h, "fake_cuda_wakes") : NULL;
	w_log_fn wlog = h ? (w_log_fn)dlsym(h, "fake_cuda_log") : NULL;
	struct timespec t;
	int bad = 0;

	if (!lk || !wakes || !destroy || !reset || !evrec || !calls || !wlog ||
	    (hint_gap_us >= 0 && !hint)) {
		printf("periodic failed: lookup\n");
		return;
	}
	srand(seed);
	clock_gettime(CLOCK_MONOTONIC, &t);
	for (unsigned long i = 0; i < n; i++) {
		double gap = (double)period_us;

		w_log(wlog, 'S', w_ns(&t), w_now());
		if (event_gap_us >= 0) {
			struct timespec d = { 0, event_gap_us * 1000L };

			w_log(wlog, 'V', w_now(), 0);
			bad |= evrec((void *)0xe7e7, W_ST);
			while (nanosleep(&d, &d) != 0 && errno == EINTR)
				;
		}
		if (hint) {
			struct timespec d = { 0, hint_gap_us * 1000L };

			(void)hint((unsigned)hint_gap_us);
			while (nanosleep(&d, &d) != 0 && errno == EINTR)
				;
		}
		bad |= lk(W_F, 1, 2, 3, 4, 5, 6, 7, W_ST, W_PARAMS, W_EXTRA);
		w_log(wlog, 'L', w_now(), 0);
		if (destroy_every && i % destroy_every == destroy_every - 1)
			bad |= (i / destroy_every) % 2 ? reset(0) : destroy((void *)0xc7c7);
		if (poisson)
			gap = -log(1.0 - (double)rand() / ((double)RAND_MAX + 1.0)) * (double)period_us;
		t.tv_nsec += (long)(gap * 1000.0);
		t.tv_sec += t.tv_nsec / 1000000000L;
		t.tv_nsec %= 1000000000L;
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
			;
	}
	printf("periodic status=%s wakes=%lu bad=%lu in_ctx=%lu stale=%lu leads=%lu min=%lu "
	       "median=%lu max=%lu events=%lu renewed=%lu\n",
	       bad || calls(4) ? "error" : "ok", wakes(0), wakes(1), wakes(2), wakes(7), wakes(6),
	       wakes(3), wakes(4), wakes(5), calls(3), wakes(8));
}

typedef int (*w_wait_fn)(void *);
typedef void (*w_busy_fn)(unsigned);

/* One launch every period_us, each "running" busy_us in the fake, then
 * waited for: "stream" (cuStreamSynchronize, its per-thread-stream
 * variant, through cuGetProcAddress), "ctx" (cuCtxSynchronize by dlsym on
 * the handle) or "query" (cuEventQuery through cuGetProcAddress, spun on
 * until it says done). */
static void do_waits(const char *lib, unsigned long n, unsigned long period_us,
		     unsigned long busy_us, const char *how)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	w_gpa_fn gpa = h ? (w_gpa_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
	w_launch_fn lk = gpa ? (w_launch_fn)w_gpa(gpa, "cuLaunchKernel", 12000, 0) : NULL;
	w_busy_fn busy = h ? (w_busy_fn)dlsym(h, "fake_cuda_busy") : NULL;
	w_log_fn wlog = h ? (w_log_fn)dlsym(h, "fake_cuda_log") : NULL;
	w_wait_fn wait = NULL;
	void *arg = W_ST;
	int query = strcmp(how, "query") == 0, bad = 0;
	unsigned long spins = 0;
	struct timespec t;

	if (gpa && strcmp(how, "stream") == 0)
		wait = (w_wait_fn)w_gpa(gpa, "cuStreamSynchronize", 12000, 2);
	else if (h && strcmp(how, "ctx") == 0)
		wait = (w_wait_fn)dlsym(h, "cuCtxSynchronize");
	else if (gpa && query) {
		wait = (w_wait_fn)w_gpa(gpa, "cuEventQuery", 12000, 0);
		arg = (void *)0xe7e7;
	}
	if (!lk || !busy || !wait || !wlog) {
		printf("waits failed: lookup\n");
		return;
	}
	busy((unsigned)busy_us);
	clock_gettime(CLOCK_MONOTONIC, &t);
	for (unsigned long i = 0; i < n; i++) {
		int r;

		w_log(wlog, 'S', w_ns(&t), w_now());
		bad |= lk(W_F, 1, 2, 3, 4, 5, 6, 7, W_ST, W_PARAMS, W_EXTRA);
		w_log(wlog, 'L', w_now(), 0);
		while ((r = wait(arg)) == 600 && query)
			spins++;
		w_log(wlog, 'R', w_now(), 0);
		bad |= r;
		t.tv_nsec += (long)period_us * 1000L;
		t.tv_sec += t.tv_nsec / 1000000000L;
		t.tv_nsec %= 1000000000L;
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
			;
	}
	printf("waits status=%s spins=%lu\n", bad ? "error" : "ok", spins);
}

static void do_launchtime(const char *lib, unsigned long n)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	w_gpa_fn gpa = h ? (w_gpa_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
	w_launch_fn lk = gpa ? (w_launch_fn)w_gpa(gpa, "cuLaunchKernel", 12000, 0) : NULL;
	struct timespec t0, t1;
	double ns;
	int bad = 0;

	if (!lk || n == 0) {
		printf("launchtime failed\n");
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned long i = 0; i < n; i++)
		bad |= lk(W_F, 1, 2, 3, 4, 5, 6, 7, W_ST, W_PARAMS, W_EXTRA);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
	printf("launchtime n=%lu ns_per_launch=%.2f status=%s\n", n, ns / (double)n,
	       bad ? "error" : "ok");
}

static void step(int argc, char **a)
{
	const char *cmd = a[0];

	if (strcmp(cmd, "open") == 0) {
		ctl = open(ctl_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		printf("open %s\n", ctl >= 0 ? "ok" : "failed");
	} else if (strcmp(cmd, "client") == 0 && argc == 2) {
		do_client(a[1]);
	} else if (strcmp(cmd, "device") == 0 && argc == 4) {
		do_device(idx(a[1], nclient), (rm_u32)atoi(a[2]), a[3]);
	} else if (strcmp(cmd, "tsg") == 0 && argc == 4) {
		do_tsg(idx(a[1], ndevice), (rm_u32)atoi(a[2]), a[3]);
	} else if (strcmp(cmd, "settime") == 0 && argc == 4) {
		do_settime(idx(a[1], ntsg), strtoull(a[2], NULL, 0), a[3]);
	} else if (strcmp(cmd, "subdevice") == 0 && argc == 2) {
		do_subdevice(idx(a[1], ndevice));
	} else if (strcmp(cmd, "channel") == 0 && argc == 2) {
		do_channel(idx(a[1], ntsg));
	} else if (strcmp(cmd, "chanstate") == 0 && argc == 2) {
		do_chanstate(idx(a[1], nchan));
	} else if (strcmp(cmd, "chanoff") == 0 && argc == 2) {
		do_chanoff(idx(a[1], nchan));
	} else if (strcmp(cmd, "chantime") == 0 && argc == 2) {
		do_chantime(idx(a[1], nchan));
	} else if (strcmp(cmd, "gettime") == 0 && argc == 2) {
		do_gettime(idx(a[1], ntsg));
	} else if (strcmp(cmd, "interleave") == 0 && argc == 3) {
		do_interleave(idx(a[1], ntsg), (rm_u32)atoi(a[2]));
	} else if (strcmp(cmd, "free") == 0 && argc == 4) {
		do_free(a[1], a[2], a[3]);
	} else if (strcmp(cmd, "other") == 0) {
		do_other();
	} else if (strcmp(cmd, "nonrm") == 0) {
		do_nonrm();
	} else if (strcmp(cmd, "closefds") == 0) {
		do_closefds();
	} else if (strcmp(cmd, "close") == 0) {
		printf("close ret=%d\n", close(ctl));
	} else if (strcmp(cmd, "fork") == 0 && argc == 2) {
		do_fork(a[1]);
	} else if (strcmp(cmd, "wait") == 0) {
		do_wait();
	} else if (strcmp(cmd, "probe") == 0) {
		/* What a program that looks for the CUDA driver finds. */
		printf("probe cuLaunchKernel=%s cuLaunchKernel_ptsz=%s\n",
		       dlsym(RTLD_DEFAULT, "cuLaunchKernel") ? "found" : "none",
		       dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz") ? "found" : "none");
	} else if (strcmp(cmd, "launch") == 0 && argc == 4) {
		do_launch(a[1], strtoul(a[2], NULL, 0), strtoul(a[3], NULL, 0));
	} else if (strcmp(cmd, "periodic") == 0 &&
		   (argc == 4 || (argc == 6 && (strcmp(a[4], "poisson") == 0 ||
						 strcmp(a[4], "destroy") == 0 ||
						 strcmp(a[4], "event") == 0 ||
						 strcmp(a[4], "hint") == 0)))) {
		int p = argc == 6 && strcmp(a[4], "poisson") == 0;
		int ev = argc == 6 && strcmp(a[4], "event") == 0;
		int hi = argc == 6 && strcmp(a[4], "hint") == 0;
		unsigned long k = argc == 6 ? strtoul(a[5], NULL, 0) : 0;

		do_periodic(a[1], strtoul(a[2], NULL, 0), strtoul(a[3], NULL, 0), p || hi,
			    p ? (unsigned)k : 7, p || ev || hi ? 0 : k,
			    ev && k < 1000000 ? (long)k : -1, hi && k < 1000000 ? (long)k : -1);
	} else if (strcmp(cmd, "waits") == 0 && argc == 6) {
		do_waits(a[1], strtoul(a[2], NULL, 0), strtoul(a[3], NULL, 0),
			 strtoul(a[4], NULL, 0), a[5]);
	} else if (strcmp(cmd, "launchtime") == 0 && argc == 3) {
		do_launchtime(a[1], strtoul(a[2], NULL, 0));
	} else if (strcmp(cmd, "exit") == 0) {
		exit(0);
	} else {
		printf("unknown step %s\n", cmd);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	char line[256];

	if (argc != 2) {
		fprintf(stderr, "usage: %s CTL_PATH < steps\n", argv[0]);
		return 2;
	}
	ctl_path = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin) != NULL) {
		char *a[8];
		int n = 0;

		for (char *t = strtok(line, " \t\n"); t != NULL && n < 8; t = strtok(NULL, " \t\n"))
			a[n++] = t;
		if (n > 0)
			step(n, a);
	}
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rm_probe.c - an experiment library for the GPU benchmarks (LD_PRELOAD),
 * not part of gpuqos. It lets one CUDA process set its own GR TSG's
 * scheduling from inside, without the node agent, so that the benchmark can
 * try settings the agent's policy does not offer (one short BE among long
 * ones, interleave set before the runlist is built, channel-disable rotation).
 *
 * Owns: learning the process's GR TSG, its channels and its subdevice from
 * the RM ioctls libcuda makes; issuing controls on libcuda's own file
 * descriptor (the RM accepts a control only there); a rotation thread.
 * Does not own: anything gpuqos does in production (no protocol, no agent).
 *
 * Environment (all optional; nothing set = the library only watches):
 *   GQP_TIMESLICE_US=N   set the GR TSG's timeslice to N once settled, and
 *                        rewrite libcuda's own later SET_TIMESLICE to N
 *   GQP_REAPPLY_MS=N     set that timeslice (and the interleave level, if
 *                        GQP_INTERLEAVE is given) again every N ms (a
 *                        process that keeps setting its own back)
 *   GQP_INTERLEAVE=0|1|2 set the GR TSG's interleave level (LOW/MEDIUM/HIGH)
 *   GQP_EARLY=1          apply timeslice/interleave right after the TSG's
 *                        allocation returns, before libcuda schedules it
 *                        (the runlist is then built with them)
 *   GQP_REBUILD=1        after applying, disable and re-enable the TSG's
 *                        channels once (forces the runlist to be rebuilt)
 *   GQP_ROT_N, GQP_ROT_I, GQP_ROT_PERIOD_MS
 *                        rotation: this process is schedulable only in
 *                        slots s = floor(CLOCK_MONOTONIC / period) with
 *                        s mod N == I; otherwise its GR channels are
 *                        disabled (DISABLE_CHANNELS, then PREEMPT)
 *   GQP_WIN_PERIOD_US=P, GQP_WIN_OFF_US=A, GQP_WIN_LEN_US=L
 *                        windows: the process's GR channels are disabled
 *                        (DISABLE_CHANNELS, then PREEMPT) from A to A + L
 *                        us into every P us of CLOCK_MONOTONIC, enabled
 *                        otherwise (a BE kept off the GPU around each
 *                        request of an LC aligned to the same clock)
 *   GQP_ROT_STATIC=1     no rotation: I == 0 stays enabled, others stay
 *                        disabled for the whole run
 *   GQP_ROT_START_FILE=P rotation (or the static disable) begins once file
 *                        P exists, so that a process disabled by it has
 *                        got ready first
 *   GQP_ONLY_SCHED=1     bOnlyDisableScheduling in DISABLE_CHANNELS
 *   GQP_NO_PREEMPT=1     no PREEMPT after a disable
 *   GQP_SETTLE_MS=N      wait N ms after the last channel allocation before
 *                        acting (default 500)
 *   GQP_COMPUTE_PREEMPT=wfi|cta|cilp
 *                        the compute preemption mode libcuda asks for its
 *                        channels when it creates the context
 *                        (NV2080_CTRL_CMD_GR_SET_CTXSW_PREEMPTION_MODE) is
 *                        replaced by this one; every such request is
 *                        logged with its status either way
 *   GQP_CTXSW_STATS_MS=N every N ms once settled, the GR TSG's context-switch
 *                        counts (NV2080_CTRL_CMD_GR_GET_CTXSW_STATS: saves,
 *                        restores, and saves by kind: WFI, CTA, CILP)
 * Writes one line per setting, a failed control, the cumulative timings
 * after every enable while rotating and at exit to stderr, prefixed
 * "rm_probe:". Channels are enabled again at exit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "abi/rm_abi.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/*
 * NV2080_CTRL_CMD_FIFO_DISABLE_CHANNELS and its parameters (ctrl2080fifo.h,
 * driver 580). abi/rm_abi.h does not define them; they live here because
 * only this probe uses them.
 */
#define PROBE_CTRL_FIFO_DISABLE_CHANNELS 0x2080110bu
#define PROBE_DISABLE_MAX 64

struct probe_disable_channels {
	rm_u8 bDisable;
	rm_u32 numChannels;
	rm_u8 bOnlyDisableScheduling;
	rm_u8 bRewindGpPut;
	rm_u64 pRunlistPreemptEvent RM_ALIGN8; /* must be NULL from user space */
	rm_handle hClientList[PROBE_DISABLE_MAX];
	rm_handle hChannelList[PROBE_DISABLE_MAX];
};
_Static_assert(sizeof(struct probe_disable_channels) == 536, "DISABLE_CHANNELS is 536 bytes");
_Static_assert(RM_OFFSETOF(struct probe_disable_channels, hClientList) == 24, "hClientList");

/*
 * NV2080_CTRL_CMD_GR_SET_CTXSW_PREEMPTION_MODE and _GET_CTXSW_STATS
 * (ctrl2080gr.h, driver 580), on the subdevice. Compute modes: WFI 0 (wait
 * for the running work to finish), CTA 1 (at a thread-block boundary),
 * CILP 2 (at an instruction, saving every SM's state).
 */
#define PROBE_CTRL_GR_SET_CTXSW_PREEMPTION_MODE 0x20801210u
#define PROBE_CTRL_GR_GET_CTXSW_STATS 0x20801215u
#define PROBE_PREEMPT_FLAG_CILP_SET 0x1u

struct probe_gr_route {
	rm_u32 flags;
	rm_u64 route RM_ALIGN8;
};

struct probe_preemption_mode {
	rm_u32 flags;
	rm_handle hChannel;
	rm_u32 gfxpPreemptMode;
	rm_u32 cilpPreemptMode;
	struct probe_gr_route grRouteInfo;
};
_Static_assert(sizeof(struct probe_preemption_mode) == 32, "SET_CTXSW_PREEMPTION_MODE is 32 bytes");

struct probe_ctxsw_stats {
	rm_handle hChannel; /* the TSG's handle for a channel in a TSG */
	rm_u32 flags;       /* bit 0: reset the counts */
	rm_u32 saveCnt, restoreCnt, wfiSaveCnt, ctaSaveCnt, cilpSaveCnt, gfxpSaveCnt;
};
_Static_assert(sizeof(struct probe_ctxsw_stats) == 32, "GET_CTXSW_STATS is 32 bytes");

#define MAX_SUBDEV 16
#define MAX_STATS 4096

typedef int (*ioctl_fn)(int, unsigned long, ...);

static struct {
	pthread_mutex_t lock;
	ioctl_fn real;
	int fd;                   /* libcuda's fd that created the GR TSG's client */
	rm_handle client, tsg;    /* the first GR TSG */
	rm_handle chans[PROBE_DISABLE_MAX];
	unsigned nchans;
	rm_handle sub_client[MAX_SUBDEV], sub_obj[MAX_SUBDEV];
	unsigned nsub;
	uint64_t last_alloc_ns;
	long timeslice_us;        /* -1: leave */
	long interleave;          /* -1: leave */
	int early, rebuild, only_sched, no_preempt, rot_static;
	long rot_n, rot_i, rot_period_ms, settle_ms;
	long win_period_us, win_off_us, win_len_us; /* GQP_WIN_*: 0 period: none */
	long compute_preempt;     /* -1: leave libcuda's */
	long stats_ms;            /* 0: no context-switch counts */
	long reapply_ms;          /* 0: the timeslice is set once */
	unsigned reapplied, reapply_failed;
	const char *rot_start_file;
	volatile int stop;
	int disabled;
	pthread_t thread;
	int thread_started;
	unsigned n_dis, n_en, n_pre;
	uint32_t dis_us[MAX_STATS], en_us[MAX_STATS], pre_us[MAX_STATS];
	unsigned rm_errors;
} P = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .timeslice_us = -1, .interleave = -1,
     .compute_preempt = -1};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static long env_long(const char *name, long dflt)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return dflt;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end) {
		fprintf(stderr, "rm_probe: %s=%s is not a number; ignored\n", name, s);
		return dflt;
	}
	return v;
}

/* One RM control on libcuda's fd, timed. Returns the RM status (or 0xffff
 * when the ioctl itself failed). */
static rm_u32 control(rm_handle obj, rm_u32 cmd, void *params, rm_u32 size, uint32_t *us)
{
	struct rm_control_params c = {.hClient = P.client, .hObject = obj, .cmd = cmd,
				      .params = (rm_u64)(uintptr_t)params, .paramsSize = size};
	uint64_t t0 = mono_ns();
	int rc = P.real(P.fd, RM_IOCTL_CONTROL, &c);
	uint64_t dt = (mono_ns() - t0) / 1000;
	if (us)
		*us = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
	rm_u32 st = rc < 0 ? 0xffffu : c.status;
	if (st != RM_OK)
		P.rm_errors++;
	return st;
}

static rm_handle subdevice_of_client(void)
{
	for (unsigned i = 0; i < P.nsub; i++)
		if (P.sub_client[i] == P.client)
			return P.sub_obj[i];
	return 0;
}

static rm_u32 set_channels(int disable, uint32_t *us)
{
	struct probe_disable_channels d;
	memset(&d, 0, sizeof(d));
	d.bDisable = (rm_u8)!!disable;
	d.bOnlyDisableScheduling = (rm_u8)P.only_sched;
	d.numChannels = P.nchans;
	for (unsigned i = 0; i < P.nchans; i++) {
		d.hClientList[i] = P.client;
		d.hChannelList[i] = P.chans[i];
	}
	return control(subdevice_of_client(), PROBE_CTRL_FIFO_DISABLE_CHANNELS, &d, sizeof(d), us);
}

static void record(uint32_t *arr, unsigned *n, uint32_t v)
{
	if (*n < MAX_STATS)
		arr[*n] = v;
	(*n)++;
}

/* Disable (then preempt) or enable this process's GR channels. Caller holds
 * the lock. */
static void switch_state(int disable)
{
	uint32_t us = 0;
	rm_u32 st = set_channels(disable, &us);
	if (st != RM_OK) {
		fprintf(stderr, "rm_probe: pid %d %s channels: status 0x%x\n", getpid(),
			disable ? "disable" : "enable", st);
		return;
	}
	P.disabled = disable;
	if (!disable) {
		record(P.en_us, &P.n_en, us);
		return;
	}
	record(P.dis_us, &P.n_dis, us);
	if (!P.no_preempt) {
		struct rm_tsg_preempt pr = {.bWait = 1, .bManualTimeout = 1, .timeoutUs = 100000};
		st = control(P.tsg, RM_CTRL_TSG_PREEMPT, &pr, sizeof(pr), &us);
		if (st == RM_OK)
			record(P.pre_us, &P.n_pre, us);
		else
			fprintf(stderr, "rm_probe: pid %d preempt: status 0x%x\n", getpid(), st);
	}
}

/* Timeslice and interleave on the GR TSG; caller holds the lock. */
static void apply_settings(const char *when)
{
	uint32_t us;
	if (P.timeslice_us >= 0) {
		struct rm_tsg_timeslice t = {.timesliceUs = (rm_u64)P.timeslice_us};
		rm_u32 st = control(P.tsg, RM_CTRL_TSG_SET_TIMESLICE, &t, sizeof(t), &us);
		fprintf(stderr, "rm_probe: pid %d %s SET_TIMESLICE %ld us: status 0x%x, %u us\n",
			getpid(), when, P.timeslice_us, st, us);
	}
	if (P.interleave >= 0) {
		struct rm_tsg_interleave il = {.tsgInterleaveLevel = (rm_u32)P.interleave};
		rm_u32 st = control(P.tsg, RM_CTRL_TSG_SET_INTERLEAVE, &il, sizeof(il), &us);
		fprintf(stderr, "rm_probe: pid %d %s SET_INTERLEAVE %ld: status 0x%x, %u us\n",
			getpid(), when, P.interleave, st, us);
	}
}

/* The GR TSG's context-switch counts; caller holds the lock. */
static void ctxsw_stats(void)
{
	struct probe_ctxsw_stats s;
	uint32_t us;

	memset(&s, 0, sizeof(s));
	s.hChannel = P.tsg;
	rm_u32 st = control(subdevice_of_client(), PROBE_CTRL_GR_GET_CTXSW_STATS, &s, sizeof(s), &us);
	if (st != RM_OK) {
		fprintf(stderr, "rm_probe: pid %d GET_CTXSW_STATS: status 0x%x\n", getpid(), st);
		return;
	}
	fprintf(stderr,
		"rm_probe: pid %d ctxsw: saves %u restores %u wfi %u cta %u cilp %u gfxp %u (%u us)\n",
		getpid(), s.saveCnt, s.restoreCnt, s.wfiSaveCnt, s.ctaSaveCnt, s.cilpSaveCnt,
		s.gfxpSaveCnt, us);
}

static int slot_enabled(uint64_t now)
{
	if (P.rot_static)
		return P.rot_i == 0;
	uint64_t slot = now / ((uint64_t)P.rot_period_ms * 1000000ull);
	return (long)(slot % (uint64_t)P.rot_n) == P.rot_i;
}

/* Windows (GQP_WIN_*): whether `now` is outside every window, and when
 * the current window or gap ends. */
static int win_enabled(uint64_t now, uint64_t *until)
{
	uint64_t per = (uint64_t)P.win_period_us * 1000u, off = (uint64_t)P.win_off_us * 1000u;
	uint64_t len = (uint64_t)P.win_len_us * 1000u;
	uint64_t base = now < off ? 0 : (now - off) / per * per + off;
	uint64_t in = now - base;

	if (now < off) {
		*until = off;
		return 1;
	}
	if (in < len) {
		*until = base + len;
		return 0;
	}
	*until = base + per;
	return 1;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void summary(const char *what, uint32_t *v, unsigned n);

static void *probe_thread(void *arg)
{
	(void)arg;
	/* Settle: the GR TSG and its channels exist and nothing was allocated
	 * for settle_ms (libcuda's own SET_TIMESLICE comes ~70 ms after). */
	for (;;) {
		if (P.stop)
			return NULL;
		pthread_mutex_lock(&P.lock);
		int settled = P.tsg && P.nchans && subdevice_of_client() &&
			      mono_ns() - P.last_alloc_ns > (uint64_t)P.settle_ms * 1000000ull;
		pthread_mutex_unlock(&P.lock);
		if (settled)
			break;
		sleep_ms(10);
	}
	pthread_mutex_lock(&P.lock);
	fprintf(stderr, "rm_probe: pid %d GR TSG 0x%x client 0x%x subdevice 0x%x, %u channels\n",
		getpid(), P.tsg, P.client, subdevice_of_client(), P.nchans);
	apply_settings("settled");
	if (P.rebuild) {
		switch_state(1);
		switch_state(0);
		fprintf(stderr, "rm_probe: pid %d runlist rebuilt (disable+enable)\n", getpid());
	}
	if (P.stats_ms > 0)
		ctxsw_stats();
	pthread_mutex_unlock(&P.lock);
	while (P.rot_n <= 0 && P.win_period_us <= 0 && P.reapply_ms > 0 &&
	       (P.timeslice_us >= 0 || P.interleave >= 0) && !P.stop) {
		struct rm_tsg_timeslice t = {.timesliceUs = (rm_u64)P.timeslice_us};
		struct rm_tsg_interleave il = {.tsgInterleaveLevel = (rm_u32)P.interleave};
		uint32_t us;

		sleep_ms(P.reapply_ms);
		pthread_mutex_lock(&P.lock);
		if (P.timeslice_us >= 0 &&
		    control(P.tsg, RM_CTRL_TSG_SET_TIMESLICE, &t, sizeof(t), &us) != RM_OK)
			P.reapply_failed++;
		if (P.interleave >= 0 &&
		    control(P.tsg, RM_CTRL_TSG_SET_INTERLEAVE, &il, sizeof(il), &us) != RM_OK)
			P.reapply_failed++;
		/* Workloads may _exit(): the count is printed as it goes. */
		if (++P.reapplied % 100 == 0)
			fprintf(stderr, "rm_probe: pid %d timeslice %ld us, interleave %ld set again: "
				"%u times, %u failed\n", getpid(), P.timeslice_us, P.interleave,
				P.reapplied, P.reapply_failed);
		pthread_mutex_unlock(&P.lock);
	}
	if (P.rot_n <= 0 && P.win_period_us <= 0) {
		/* Workloads may _exit(): the counts are printed as they go. */
		while (P.stats_ms > 0 && !P.stop) {
			sleep_ms(P.stats_ms);
			pthread_mutex_lock(&P.lock);
			ctxsw_stats();
			pthread_mutex_unlock(&P.lock);
		}
		return NULL;
	}
	while (P.rot_start_file && !P.stop && access(P.rot_start_file, F_OK) != 0)
		sleep_ms(5);
	while (!P.stop) {
		uint64_t now = mono_ns(), until = 0;
		int want = P.win_period_us > 0 ? win_enabled(now, &until) : slot_enabled(now);
		pthread_mutex_lock(&P.lock);
		if (!P.stop && want == P.disabled) {
			switch_state(!want);
			/* Workloads may _exit() and skip the destructor, and a
			 * short window holds only a few slots (4 BEs rotated
			 * every 100 ms: 7 enables in 3 s): report the cumulative
			 * timings at every enable; the last report counts. */
			if (!P.disabled) {
				summary("disable", P.dis_us, P.n_dis);
				summary("preempt", P.pre_us, P.n_pre);
				summary("enable", P.en_us, P.n_en);
			}
		}
		pthread_mutex_unlock(&P.lock);
		if (P.rot_static) {
			sleep_ms(20);
			continue;
		}
		uint64_t per = (uint64_t)P.rot_period_ms * 1000000ull;
		uint64_t next = P.win_period_us > 0 ? until : (now / per + 1) * per;
		struct timespec ts = {.tv_sec = (time_t)(next / 1000000000ull),
				      .tv_nsec = (long)(next % 1000000000ull)};
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static void summary(const char *what, uint32_t *v, unsigned n)
{
	unsigned k = n < MAX_STATS ? n : MAX_STATS;
	if (!k)
		return;
	uint32_t sorted[MAX_STATS];
	memcpy(sorted, v, k * sizeof(*v));
	qsort(sorted, k, sizeof(*sorted), cmp_u32);
	v = sorted;
	fprintf(stderr, "rm_probe: pid %d %s: n %u p50 %u us p99 %u us max %u us\n", getpid(), what,
		n, v[k / 2], v[(k * 99) / 100], v[k - 1]);
}

__attribute__((constructor)) static void probe_init(void)
{
	P.real = (ioctl_fn)dlsym(RTLD_NEXT, "ioctl");
	P.timeslice_us = env_long("GQP_TIMESLICE_US", -1);
	P.interleave = env_long("GQP_INTERLEAVE", -1);
	P.early = (int)env_long("GQP_EARLY", 0);
	P.rebuild = (int)env_long("GQP_REBUILD", 0);
	P.only_sched = (int)env_long("GQP_ONLY_SCHED", 0);
	P.no_preempt = (int)env_long("GQP_NO_PREEMPT", 0);
	P.rot_static = (int)env_long("GQP_ROT_STATIC", 0);
	P.rot_n = env_long("GQP_ROT_N", 0);
	P.rot_i = env_long("GQP_ROT_I", 0);
	P.rot_period_ms = env_long("GQP_ROT_PERIOD_MS", 100);
	P.win_period_us = env_long("GQP_WIN_PERIOD_US", 0);
	P.win_off_us = env_long("GQP_WIN_OFF_US", 0);
	P.win_len_us = env_long("GQP_WIN_LEN_US", 0);
	P.settle_ms = env_long("GQP_SETTLE_MS", 500);
	P.rot_start_file = getenv("GQP_ROT_START_FILE");
	P.stats_ms = env_long("GQP_CTXSW_STATS_MS", 0);
	P.reapply_ms = env_long("GQP_REAPPLY_MS", 0);
	if (P.reapply_ms < 0)
		P.reapply_ms = 0;
	const char *cp = getenv("GQP_COMPUTE_PREEMPT");
	if (cp && *cp) {
		if (!strcmp(cp, "wfi"))
			P.compute_preempt = 0;
		else if (!strcmp(cp, "cta"))
			P.compute_preempt = 1;
		else if (!strcmp(cp, "cilp"))
			P.compute_preempt = 2;
		else
			fprintf(stderr, "rm_probe: GQP_COMPUTE_PREEMPT=%s is not wfi, cta or cilp; "
					"ignored\n", cp);
	}
	if (P.stats_ms < 0)
		P.stats_ms = 0;
	if (P.interleave > 2 || P.rot_n < 0 || P.rot_n > 64 || P.rot_i < 0 ||
	    (P.rot_n && P.rot_i >= P.rot_n) || P.rot_period_ms < 1 || P.settle_ms < 0 ||
	    P.win_period_us < 0 || P.win_period_us > 10000000 ||
	    (P.win_period_us && (P.rot_n || P.win_off_us < 0 || P.win_off_us >= P.win_period_us ||
				 P.win_len_us <= 0 || P.win_len_us >= P.win_period_us))) {
		fprintf(stderr, "rm_probe: bad GQP_* settings; the probe only watches\n");
		P.interleave = P.timeslice_us = -1;
		P.rot_n = 0;
		P.win_period_us = 0;
	}
	int act = P.timeslice_us >= 0 || P.interleave >= 0 || P.rebuild || P.rot_n > 0 ||
		  P.win_period_us > 0 || P.stats_ms > 0;
	if (P.real && act && pthread_create(&P.thread, NULL, probe_thread, NULL) == 0)
		P.thread_started = 1;
}

__attribute__((destructor)) static void probe_fini(void)
{
	P.stop = 1;
	pthread_mutex_lock(&P.lock);
	if (P.disabled)
		switch_state(0);
	pthread_mutex_unlock(&P.lock);
	summary("disable", P.dis_us, P.n_dis);
	summary("preempt", P.pre_us, P.n_pre);
	summary("enable", P.en_us, P.n_en);
	if (P.rm_errors)
		fprintf(stderr, "rm_probe: pid %d %u controls failed\n", getpid(), P.rm_errors);
}

/* What an allocation that succeeded tells us. Caller holds the lock. */
static void note_alloc(int fd, rm_handle root, rm_handle parent, rm_handle obj, rm_u32 cls,
		       const void *params, rm_u32 psize)
{
	P.last_alloc_ns = mono_ns();
	if (cls == RM_CLASS_SUBDEVICE && P.nsub < MAX_SUBDEV) {
		P.sub_client[P.nsub] = root;
		P.sub_obj[P.nsub++] = obj;
	} else if (cls == RM_CLASS_TSG && !P.tsg && params) {
		/* libcuda passes paramsSize 0: the RM takes the size from the class. */
		(void)psize;
		const struct rm_tsg_alloc *t = params;
		if (rm_engine_is_gr(t->engineType)) {
			P.fd = fd;
			P.client = root;
			P.tsg = obj;
			if (P.early)
				apply_settings("early");
		}
	} else if (rm_class_is_channel(cls) && P.tsg && parent == P.tsg &&
		   root == P.client && P.nchans < PROBE_DISABLE_MAX) {
		P.chans[P.nchans++] = obj;
	}
}

/* libcuda's compute preemption mode request: ours instead, when set.
 * Returns the request when it is one, to log with its status. */
static struct probe_preemption_mode *rewrite_preemption(struct rm_control_params *c)
{
	if (c->cmd != PROBE_CTRL_GR_SET_CTXSW_PREEMPTION_MODE ||
	    c->paramsSize != sizeof(struct probe_preemption_mode) || !c->params)
		return NULL;
	struct probe_preemption_mode *m = (struct probe_preemption_mode *)(uintptr_t)c->params;
	fprintf(stderr, "rm_probe: pid %d libcuda SET_CTXSW_PREEMPTION_MODE channel 0x%x flags 0x%x "
			"gfxp %u compute %u%s\n", getpid(), m->hChannel, m->flags, m->gfxpPreemptMode,
		m->cilpPreemptMode, P.compute_preempt >= 0 ? " (replaced)" : "");
	if (P.compute_preempt >= 0) {
		m->flags |= PROBE_PREEMPT_FLAG_CILP_SET;
		m->cilpPreemptMode = (rm_u32)P.compute_preempt;
	}
	return m;
}

/* A control on the way in: libcuda's own SET_TIMESLICE on our TSG gets our
 * value. Caller holds the lock. */
static void rewrite_control(struct rm_control_params *c)
{
	if (P.timeslice_us < 0 || !P.tsg || c->hObject != P.tsg || c->hClient != P.client ||
	    c->cmd != RM_CTRL_TSG_SET_TIMESLICE || c->paramsSize != sizeof(struct rm_tsg_timeslice) ||
	    !c->params)
		return;
	struct rm_tsg_timeslice *t = (struct rm_tsg_timeslice *)(uintptr_t)c->params;
	fprintf(stderr, "rm_probe: pid %d libcuda SET_TIMESLICE %llu us -> %ld us\n", getpid(),
		(unsigned long long)t->timesliceUs, P.timeslice_us);
	t->timesliceUs = (rm_u64)P.timeslice_us;
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	if (!P.real) {
		P.real = (ioctl_fn)dlsym(RTLD_NEXT, "ioctl");
		if (!P.real) {
			errno = ENOSYS;
			return -1;
		}
	}
	rm_u32 r = (rm_u32)req;
	struct probe_preemption_mode *pm = NULL;
	if (r == RM_IOCTL_CONTROL && arg) {
		pthread_mutex_lock(&P.lock);
		rewrite_control(arg);
		pm = rewrite_preemption(arg);
		pthread_mutex_unlock(&P.lock);
	}
	int rc = P.real(fd, req, arg);
	if (pm)
		fprintf(stderr, "rm_probe: pid %d SET_CTXSW_PREEMPTION_MODE compute %u: rc %d status 0x%x\n",
			getpid(), pm->cilpPreemptMode, rc, ((struct rm_control_params *)arg)->status);
	if (rc != 0 || !arg)
		return rc;
	if (r == RM_IOCTL_ALLOC64) {
		const struct rm_alloc64_params *a = arg;
		if (a->status == RM_OK) {
			pthread_mutex_lock(&P.lock);
			note_alloc(fd, a->hRoot, a->hObjectParent, a->hObjectNew, a->hClass,
				   (const void *)(uintptr_t)a->pAllocParms, a->paramsSize);
			pthread_mutex_unlock(&P.lock);
		}
	} else if (r == RM_IOCTL_ALLOC21) {
		const struct rm_alloc21_params *a = arg;
		if (a->status == RM_OK) {
			pthread_mutex_lock(&P.lock);
			note_alloc(fd, a->hRoot, a->hObjectParent, a->hObjectNew, a->hClass,
				   (const void *)(uintptr_t)a->pAllocParms, a->paramsSize);
			pthread_mutex_unlock(&P.lock);
		}
	}
	return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakecuda.c - a libcuda-like workload for gpuqos tests: opens the control
 * device and, per CUDA context, makes the RM calls libcuda makes (client,
 * device, subdevice, four TSGs with a channel each, libcuda's own
 * SET_TIMESLICE 2048 on the compute TSG), then holds, reads back and frees.
 *
 * Owns: only the workload. It calls ioctl() through libc, never syscall(),
 * so the preempt agent's LD_PRELOAD interposer sees every call. Does not
 * own: any notion of gpuqos; the --dev override exists for tests only.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi/rm_abi.h"

#define FC_MAX_CONTEXTS 64
#define FC_TSGS 4
#define FC_HANDLE_BASE 0x5c000000u /* libcuda-style client-chosen handles */
#define FC_LIBCUDA_TIMESLICE_US 2048u

static const rm_u32 fc_engine_types[FC_TSGS] = { 1, 11, 12, 13 };

enum fc_form { FC_FORM_64, FC_FORM_21, FC_FORM_XFER };
enum fc_set_when { FC_SET_AFTER_GR, FC_SET_AT_END, FC_SET_NEVER };

struct fc_opts {
	const char *dev;
	unsigned gpu;
	unsigned contexts;
	enum fc_form form;
	enum fc_set_when set_when;
	unsigned set_delay_ms;
	double hold_s;
	unsigned poll_ms;
	/* While holding, launch through LIBCUDA (tests/preempt/fake_libcuda.c,
	 * reached as the CUDA runtime does) every this many us (0: without
	 * pause, standing for a launch-bound LC); -1: never. */
	const char *libcuda;
	long launch_every_us;
	int fork;
	int exit_without_free;
	int print_state;
	const char *wait_file;
	/* Before holding: video-memory allocations of these sizes (MiB, comma
	 * separated) under the first context's device, each reported on
	 * stdout, then the FB info; freed with the client. */
	const char *alloc_mib;
	const char *alloc_wait; /* the allocations wait until this file exists */
};

struct fc_tsg {
	rm_handle handle, channel;
	rm_u32 engine_type;
	rm_u64 readback;
	rm_u32 readback_status;
};

struct fc_context {
	rm_handle client, device, subdevice;
	struct fc_tsg tsg[FC_TSGS];
};

struct fc {
	struct fc_opts o;
	int fd;
	struct fc_context ctx[FC_MAX_CONTEXTS];
	unsigned nctx;
	unsigned long polls, poll_failures;
};

static volatile sig_atomic_t fc_stop;

static void fc_on_signal(int sig)
{
	(void)sig;
	fc_stop = 1;
}

static void fc_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fc_die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "fakecuda[%d]: ", (int)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* ---------------- RM calls ---------------- */

/* Issue one escape, wrapped in XFER when asked. Returns 0 or errno. */
static int fc_escape(struct fc *f, unsigned long request, rm_u32 nr, void *block, rm_u32 size)
{
	int r;

	if (f->o.form == FC_FORM_XFER) {
		struct rm_xfer x = { .cmd = nr, .size = size, .ptr = (rm_u64)(uintptr_t)block };
		r = ioctl(f->fd, RM_IOCTL_XFER, &x);
	} else {
		r = ioctl(f->fd, request, block);
	}
	return r < 0 ? errno : 0;
}

/* Allocate; on failure exits with a message naming what failed. */
static rm_handle fc_alloc(struct fc *f, const char *what, rm_handle root, rm_handle parent,
			  rm_handle hnew, rm_u32 cls, void *params, rm_u32 size)
{
	rm_u32 status;
	int err;

	if (f->o.form == FC_FORM_21) {
		struct rm_alloc21_params p = { .hRoot = root, .hObjectParent = parent,
					       .hObjectNew = hnew, .hClass = cls,
					       .pAllocParms = (rm_u64)(uintptr_t)params,
					       .paramsSize = size };
		err = fc_escape(f, RM_IOCTL_ALLOC21, RM_ESC_ALLOC, &p, sizeof(p));
		status = p.status;
		hnew = p.hObjectNew;
	} else {
		struct rm_alloc64_params p = { .hRoot = root, .hObjectParent = parent,
					       .hObjectNew = hnew, .hClass = cls,
					       .pAllocParms = (rm_u64)(uintptr_t)params,
					       .paramsSize = size };
		err = fc_escape(f, RM_IOCTL_ALLOC64, RM_ESC_ALLOC, &p, sizeof(p));
		status = p.status;
		hnew = p.hObjectNew;
	}
	if (err)
		fc_die("alloc %s (class 0x%04x) under 0x%08x of client 0x%08x: ioctl failed: %s",
		       what, cls, parent, root, strerror(err));
	if (status != RM_OK)
		fc_die("alloc %s (class 0x%04x) under 0x%08x of client 0x%08x: status 0x%02x %s",
		       what, cls, parent, root, status, rm_status_name(status));
	return hnew;
}

/* A control; returns the RM status, or exits if the ioctl itself fails. */
static rm_u32 fc_control(struct fc *f, rm_handle client, rm_handle object, rm_u32 cmd,
			 void *params, rm_u32 size)
{
	struct rm_control_params p = { .hClient = client, .hObject = object, .cmd = cmd,
				       .params = (rm_u64)(uintptr_t)params, .paramsSize = size };
	int err = fc_escape(f, RM_IOCTL_CONTROL, RM_ESC_CONTROL, &p, sizeof(p));
	if (err)
		fc_die("control 0x%08x on 0x%08x of client 0x%08x: ioctl failed: %s", cmd, object,
		       client, strerror(err));
	return p.status;
}

static void fc_free_client(struct fc *f, rm_handle client)
{
	struct rm_free_params p = { .hRoot = client, .hObjectParent = 0, .hObjectOld = client };
	int err = fc_escape(f, RM_IOCTL_FREE, RM_ESC_FREE, &p, sizeof(p));
	if (err)
		fc_die("free client 0x%08x: ioctl failed: %s", client, strerror(err));
	if (p.status != RM_OK)
		fc_die("free client 0x%08x: status 0x%02x %s", client, p.status,
		       rm_status_name(p.status));
}

static void fc_set_libcuda_timeslice(struct fc *f, const struct fc_context *c)
{
	struct rm_tsg_timeslice ts = { .timesliceUs = FC_LIBCUDA_TIMESLICE_US };

	if (f->o.set_delay_ms) {
		struct timespec d = { f->o.set_delay_ms / 1000, (long)(f->o.set_delay_ms % 1000) * 1000000 };
		nanosleep(&d, NULL);
	}
	rm_u32 st = fc_control(f, c->client, c->tsg[0].handle, RM_CTRL_TSG_SET_TIMESLICE, &ts,
			       sizeof(ts));
	if (st != RM_OK)
		fc_die("SET_TIMESLICE %u on TSG 0x%08x of client 0x%08x: status 0x%02x %s",
		       FC_LIBCUDA_TIMESLICE_US, c->tsg[0].handle, c->client, st, rm_status_name(st));
}

/* ---------------- one CUDA context ---------------- */

static void fc_make_tsg(struct fc *f, struct fc_context *c, unsigned i, rm_handle base)
{
	struct rm_tsg_alloc tp = { .engineType = fc_engine_types[i] };
	char what[48];

	snprintf(what, sizeof(what), "TSG engineType %u", fc_engine_types[i]);
	c->tsg[i].engine_type = fc_engine_types[i];
	c->tsg[i].handle = fc_alloc(f, what, c->client, c->device, base + 0x10 + i, RM_CLASS_TSG,
				    &tp, sizeof(tp));
	/* libcuda sets the compute TSG's timeslice right after creating it. */
	if (i == 0 && f->o.set_when == FC_SET_AFTER_GR)
		fc_set_libcuda_timeslice(f, c);
	snprintf(what, sizeof(what), "channel of TSG engineType %u", fc_engine_types[i]);
	/* Channel parameters are not modelled; libcuda's are large and opaque. */
	c->tsg[i].channel = fc_alloc(f, what, c->client, c->tsg[i].handle, base + 0x20 + i,
				     RM_CLASS_HOPPER_GPFIFO, NULL, 0);
}

static void fc_make_context(struct fc *f, struct fc_context *c, unsigned index)
{
	struct rm_device_alloc dp = { .deviceId = f->o.gpu };
	rm_u32 subdevice_id = 0;
	rm_handle base = FC_HANDLE_BASE | (index << 8);

	c->client = fc_alloc(f, "client", 0, 0, 0, RM_CLASS_ROOT_CLIENT, NULL, 0);
	c->device = fc_alloc(f, "device", c->client, c->client, base + 1, RM_CLASS_DEVICE, &dp,
			     sizeof(dp));
	c->subdevice = fc_alloc(f, "subdevice", c->client, c->device, base + 2,
				RM_CLASS_SUBDEVICE, &subdevice_id, sizeof(subdevice_id));
	for (unsigned i = 0; i < FC_TSGS; i++)
		fc_make_tsg(f, c, i, base);
	if (f->o.set_when == FC_SET_AT_END)
		fc_set_libcuda_timeslice(f, c);
}

/* GET_TIMESLICE on every TSG; remembers the last value and status. */
static void fc_read_back(struct fc *f)
{
	for (unsigned k = 0; k < f->nctx; k++) {
		struct fc_context *c = &f->ctx[k];
		for (unsigned i = 0; i < FC_TSGS; i++) {
			struct rm_tsg_timeslice ts = { 0 };
			rm_u32 st = fc_control(f, c->client, c->tsg[i].handle,
					       RM_CTRL_TSG_GET_TIMESLICE, &ts, sizeof(ts));
			c->tsg[i].readback_status = st;
			if (st == RM_OK)
				c->tsg[i].readback = ts.timesliceUs;
			else if (f->poll_failures++ == 0)
				fprintf(stderr, "fakecuda[%d]: GET_TIMESLICE on TSG 0x%08x of client "
					"0x%08x: status 0x%02x %s\n", (int)getpid(), c->tsg[i].handle,
					c->client, st, rm_status_name(st));
		}
	}
	f->polls++;
}

static double fc_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef int (*fc_gpa_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*fc_launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			    unsigned, void *, void **, void **);

/* cuLaunchKernel as cudart finds it: dlopen, dlsym(cuGetProcAddress_v2). */
static fc_launch_fn fc_launcher(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	fc_gpa_fn gpa;
	void *f = NULL;
	int st = -1;

	if (!h)
		fc_die("dlopen %s: %s", lib, dlerror());
	gpa = (fc_gpa_fn)dlsym(h, "cuGetProcAddress_v2");
	if (!gpa || gpa("cuLaunchKernel", &f, 12000, 0, &st) != 0 || !f)
		fc_die("%s: no cuLaunchKernel through cuGetProcAddress_v2", lib);
	return (fc_launch_fn)f;
}

static void fc_launch(fc_launch_fn launch)
{
	/* The arguments fake_libcuda.c checks. */
	if (launch((void *)0xf00d, 1, 2, 3, 4, 5, 6, 7, (void *)0x5eed, (void **)0xa11,
		   (void **)0xe47) != 0)
		fc_die("cuLaunchKernel failed");
}

/* Stay alive for --hold seconds and/or until --wait-file exists. */
static void fc_hold(struct fc *f)
{
	double end = fc_now_s() + f->o.hold_s;
	double next_poll = fc_now_s();
	fc_launch_fn launch = f->o.launch_every_us >= 0 ? fc_launcher(f->o.libcuda) : NULL;
	struct stat st;

	while (!fc_stop) {
		if (f->o.wait_file && stat(f->o.wait_file, &st) == 0)
			break;
		if (!f->o.wait_file && fc_now_s() >= end)
			break;
		if (f->o.wait_file && f->o.hold_s > 0 && fc_now_s() >= end)
			break;
		if (f->o.poll_ms && fc_now_s() >= next_poll) {
			fc_read_back(f);
			next_poll = fc_now_s() + f->o.poll_ms / 1000.0;
		}
		if (launch) {
			fc_launch(launch);
			if (f->o.launch_every_us == 0)
				continue;
			struct timespec g = { f->o.launch_every_us / 1000000,
					      f->o.launch_every_us % 1000000 * 1000 };
			nanosleep(&g, NULL);
			continue;
		}
		/* Idle like a process waiting on its GPU: a file to watch or a
		 * read-back to make is looked at every 5 ms, a plain hold sleeps
		 * to its end (a signal cuts the sleep short), so hundreds of
		 * holders leave the machine to the agent under test. */
		double left = end - fc_now_s(), step = 0.005;

		if (!f->o.wait_file && !f->o.poll_ms && left > step)
			step = left < 1.0 ? left : 1.0;
		struct timespec d = { (time_t)step, (long)((step - (double)(time_t)step) * 1e9) };
		nanosleep(&d, NULL);
	}
}

static void fc_print_state(struct fc *f)
{
	printf("{\"pid\":%d,\"polls\":%lu,\"poll_failures\":%lu,\"contexts\":[", (int)getpid(),
	       f->polls, f->poll_failures);
	for (unsigned k = 0; k < f->nctx; k++) {
		const struct fc_context *c = &f->ctx[k];
		printf("%s{\"client\":\"0x%08x\",\"device\":\"0x%08x\",\"subdevice\":\"0x%08x\","
		       "\"tsgs\":[", k ? "," : "", c->client, c->device, c->subdevice);
		for (unsigned i = 0; i < FC_TSGS; i++)
			printf("%s{\"handle\":\"0x%08x\",\"channel\":\"0x%08x\",\"engineType\":%u,"
			       "\"timesliceUs\":%llu,\"status\":\"0x%02x\"}", i ? "," : "",
			       c->tsg[i].handle, c->tsg[i].channel, c->tsg[i].engine_type,
			       (unsigned long long)c->tsg[i].readback, c->tsg[i].readback_status);
		printf("]}");
	}
	printf("]}\n");
	fflush(stdout);
}

/* ---------------- command line ---------------- */

static void fc_usage(FILE *out)
{
	fprintf(out,
		"usage: fakecuda [--dev PATH] [--gpu N] [--contexts N] [--form 64|21|xfer]\n"
		"                [--libcuda-set gr|end|none] [--set-delay-ms N] [--hold SECONDS]\n"
		"                [--libcuda PATH --launch-every-us N]\n"
		"                [--poll-ms N] [--wait-file PATH] [--fork] [--exit-without-free]\n"
		"                [--print-state] [--alloc-mib MIB[,MIB...] [--alloc-wait PATH]]\n"
		"The device defaults to $GPUQOS_NVIDIACTL, else /dev/nvidiactl.\n");
}

static unsigned fc_uint(const char *opt, const char *v, unsigned max)
{
	char *end;
	if (!v || !*v || *v == '-')
		fc_die("%s needs a number", opt);
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (errno || *end || n > max)
		fc_die("%s %s: not a number up to %u", opt, v, max);
	return (unsigned)n;
}

static int fc_flag(struct fc_opts *o, const char *a)
{
	if (strcmp(a, "--fork") == 0)
		o->fork = 1;
	else if (strcmp(a, "--exit-without-free") == 0)
		o->exit_without_free = 1;
	else if (strcmp(a, "--print-state") == 0)
		o->print_state = 1;
	else
		return 0;
	return 1;
}

static void fc_value(struct fc_opts *o, const char *a, const char *v)
{
	if (!v)
		fc_die("%s needs a value", a);
	if (strcmp(a, "--dev") == 0)
		o->dev = v;
	else if (strcmp(a, "--gpu") == 0)
		o->gpu = fc_uint(a, v, 1023);
	else if (strcmp(a, "--contexts") == 0)
		o->contexts = fc_uint(a, v, FC_MAX_CONTEXTS);
	else if (strcmp(a, "--set-delay-ms") == 0)
		o->set_delay_ms = fc_uint(a, v, 600000);
	else if (strcmp(a, "--poll-ms") == 0)
		o->poll_ms = fc_uint(a, v, 3600000);
	else if (strcmp(a, "--wait-file") == 0)
		o->wait_file = v;
	else if (strcmp(a, "--alloc-mib") == 0)
		o->alloc_mib = v;
	else if (strcmp(a, "--alloc-wait") == 0)
		o->alloc_wait = v;
	else if (strcmp(a, "--libcuda") == 0)
		o->libcuda = v;
	else if (strcmp(a, "--launch-every-us") == 0)
		o->launch_every_us = fc_uint(a, v, 10000000);
	else if (strcmp(a, "--hold") == 0) {
		char *end;
		o->hold_s = strtod(v, &end);
		if (*end || o->hold_s < 0)
			fc_die("--hold %s: not a number of seconds", v);
	} else if (strcmp(a, "--form") == 0) {
		if (strcmp(v, "64") == 0)
			o->form = FC_FORM_64;
		else if (strcmp(v, "21") == 0)
			o->form = FC_FORM_21;
		else if (strcmp(v, "xfer") == 0)
			o->form = FC_FORM_XFER;
		else
			fc_die("--form %s: want 64, 21 or xfer", v);
	} else if (strcmp(a, "--libcuda-set") == 0) {
		if (strcmp(v, "gr") == 0)
			o->set_when = FC_SET_AFTER_GR;
		else if (strcmp(v, "end") == 0)
			o->set_when = FC_SET_AT_END;
		else if (strcmp(v, "none") == 0)
			o->set_when = FC_SET_NEVER;
		else
			fc_die("--libcuda-set %s: want gr, end or none", v);
	} else {
		fc_usage(stderr);
		exit(2);
	}
}

static void fc_parse(int argc, char **argv, struct fc_opts *o)
{
	const char *env = getenv("GPUQOS_NVIDIACTL");

	*o = (struct fc_opts){ .dev = env && *env ? env : "/dev/nvidiactl", .contexts = 1,
			       .launch_every_us = -1 };
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0) {
			fc_usage(stdout);
			exit(0);
		}
		if (fc_flag(o, argv[i]))
			continue;
		fc_value(o, argv[i], i + 1 < argc ? argv[i + 1] : NULL);
		i++;
	}
	if ((o->launch_every_us >= 0) != (o->libcuda != NULL))
		fc_die("--libcuda and --launch-every-us go together");
}

/* Allocate video memory as libcuda does (NV01_MEMORY_LOCAL_USER under
 * the device, paramsSize 0) for every size of --alloc-mib, printing
 * "alloc MIB STATUS" per allocation (a refusal is a result, not an exit),
 * then "fbinfo HEAP_SIZE_KIB HEAP_FREE_KIB TOTAL_RAM_KIB STATUS" from
 * FB_GET_INFO_V2 on the subdevice. */
static void fc_alloc_memory(struct fc *f, const struct fc_context *c)
{
	char list[256], *save = NULL;
	rm_handle h = FC_HANDLE_BASE + 0x1000u;
	struct rm_fb_info_v2 fb;
	rm_u32 st;

	if (strlen(f->o.alloc_mib) >= sizeof(list))
		fc_die("--alloc-mib: list too long");
	for (double end = fc_now_s() + 20; f->o.alloc_wait;) {
		struct stat sb;
		struct timespec ts = { 0, 10000000 };

		if (stat(f->o.alloc_wait, &sb) == 0)
			break;
		if (fc_now_s() >= end || fc_stop)
			fc_die("--alloc-wait %s: not there after 20 s", f->o.alloc_wait);
		nanosleep(&ts, NULL);
	}
	strcpy(list, f->o.alloc_mib);
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		struct rm_memory_alloc m = { .size = (rm_u64)fc_uint("--alloc-mib", t, 1u << 24) << 20 };
		struct rm_alloc64_params p = { .hRoot = c->client, .hObjectParent = c->device,
					       .hObjectNew = h++, .hClass = RM_CLASS_MEMORY_LOCAL_USER,
					       .pAllocParms = (rm_u64)(uintptr_t)&m };
		int err = fc_escape(f, RM_IOCTL_ALLOC64, RM_ESC_ALLOC, &p, sizeof(p));

		if (err)
			fc_die("alloc memory: ioctl failed: %s", strerror(err));
		printf("alloc %s %s\n", t, rm_status_name(p.status));
	}
	memset(&fb, 0, sizeof(fb));
	fb.fbInfoListSize = 3;
	fb.fbInfoList[0].index = RM_FB_INFO_HEAP_SIZE;
	fb.fbInfoList[1].index = RM_FB_INFO_HEAP_FREE;
	fb.fbInfoList[2].index = RM_FB_INFO_TOTAL_RAM_SIZE;
	st = fc_control(f, c->client, c->subdevice, RM_CTRL_FB_GET_INFO_V2, &fb, sizeof(fb));
	printf("fbinfo %u %u %u %s\n", fb.fbInfoList[0].data, fb.fbInfoList[1].data,
	       fb.fbInfoList[2].data, rm_status_name(st));
	fflush(stdout);
}

/* ---------------- main ---------------- */

static int fc_run(struct fc *f)
{
	f->fd = open(f->o.dev, O_RDWR | O_CLOEXEC);
	if (f->fd < 0)
		fc_die("open %s: %s", f->o.dev, strerror(errno));
	for (f->nctx = 0; f->nctx < f->o.contexts; f->nctx++)
		fc_make_context(f, &f->ctx[f->nctx], f->nctx);
	if (f->o.alloc_mib && f->nctx > 0)
		fc_alloc_memory(f, &f->ctx[0]);
	fc_hold(f);
	fc_read_back(f);
	if (f->o.print_state)
		fc_print_state(f);
	if (f->o.exit_without_free)
		return 0; /* exit closes the fd: release frees it all */
	for (unsigned k = 0; k < f->nctx; k++)
		fc_free_client(f, f->ctx[k].client);
	if (close(f->fd) != 0)
		fc_die("close %s: %s", f->o.dev, strerror(errno));
	return 0;
}

int main(int argc, char **argv)
{
	static struct fc f;
	struct sigaction sa = { .sa_handler = fc_on_signal };
	pid_t child = 0;

	fc_parse(argc, argv, &f.o);
	if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
		fc_die("sigaction: %s", strerror(errno));
	/* Fork before opening: the child is a second CUDA process with its own
	 * open file description, clients and TSGs. */
	if (f.o.fork) {
		fflush(stdout);
		pid_t parent = getpid();

		child = fork();
		if (child < 0)
			fc_die("fork: %s", strerror(errno));
		/* The child never outlives its parent: a test that kills the
		 * process it started must not leave a second one running. */
		if (child == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent))
			_exit(1);
	}
	fc_run(&f);
	if (child > 0) {
		int status;
		if (waitpid(child, &status, 0) < 0)
			fc_die("waitpid %d: %s", (int)child, strerror(errno));
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fc_die("forked child %d failed (wait status 0x%x)", (int)child, status);
	}
	return 0;
}

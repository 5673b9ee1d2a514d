/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_rm.c - libfake_rm.so, a stand-in for the NVIDIA resource manager in
 * preempt-agent tests on machines without a GPU. Preloaded after
 * libgpuqos-preempt.so, it is the "real" ioctl that library finds.
 *
 * Owns: an in-process emulation of RM alloc/control/free (both alloc
 * forms, the XFER wrapper) for fds opened on a file whose name ends in
 * "fake-nvidiactl". Every other ioctl goes to libc untouched. It emulates
 * what gpuqos relies on (docs/rm-facts.md): generated client handles from
 * 0xc1d00000, status 0x23 for an unknown client or a control on another
 * fd than the client's, per-TSG timeslice (default 1024, at most 1 s) read back by GET,
 * SET_INTERLEAVE refused with 0x1b unless FAKE_RM_ALLOW_NICE=1,
 * GET_INTERLEAVE 0x56, DISABLE_CHANNELS on a subdevice for the caller's
 * own channels (fake_rm_channel_disabled() tells a test a channel's
 * state). FAKE_RM_SLOW_SET=US:MS holds the answer to a SET_TIMESLICE of US
 * microseconds for MS ms after RM took it, so a test can land another
 * call in between. Does not own: anything a real GPU does.
 * Never sanitized: it is preloaded into test programs.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "abi/rm_abi.h"

#define FAKE_MAX_OBJECTS 4096
#define FAKE_MARKER "fake-nvidiactl"
#define FAKE_MAX_TIMESLICE_US 1000000u

struct fake_object {
	int used;
	int fd; /* clients only: the fd that created them */
	rm_handle h_client;
	rm_handle h;
	rm_handle h_parent;
	rm_u32 cls;
	rm_u64 timeslice_us;
	int disabled; /* channels: DISABLE_CHANNELS */
	unsigned disables, enables;
	unsigned long long disabled_at_ns; /* CLOCK_MONOTONIC of the last disable */
	/* Time off: closed intervals summed, and when the open one began
	 * (the first disable of a disabled channel; 0: enabled). */
	unsigned long long off_ns, off_since_ns;
};

typedef int (*ioctl_fn)(int, unsigned long, ...);

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_object fake_objs[FAKE_MAX_OBJECTS];
static rm_handle fake_next_client = RM_CLIENT_HANDLE_BASE;

static int fake_is_ctl(int fd)
{
	char link[64], target[512];
	size_t m = strlen(FAKE_MARKER);
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < (ssize_t)m)
		return 0;
	target[n] = '\0';
	return strcmp(target + n - (ssize_t)m, FAKE_MARKER) == 0;
}

static struct fake_object *fake_find(rm_handle h_client, rm_handle h)
{
	for (int i = 0; i < FAKE_MAX_OBJECTS; i++)
		if (fake_objs[i].used && fake_objs[i].h_client == h_client && fake_objs[i].h == h)
			return &fake_objs[i];
	return NULL;
}

static struct fake_object *fake_new(void)
{
	for (int i = 0; i < FAKE_MAX_OBJECTS; i++)
		if (!fake_objs[i].used) {
			memset(&fake_objs[i], 0, sizeof(fake_objs[i]));
			fake_objs[i].used = 1;
			return &fake_objs[i];
		}
	return NULL;
}

/* The client, if it exists and was created on fd. */
static struct fake_object *fake_client(int fd, rm_handle h)
{
	struct fake_object *c = fake_find(h, h);

	return c != NULL && c->fd == fd ? c : NULL;
}

static rm_u32 fake_alloc(int fd, struct rm_alloc_view *v)
{
	struct fake_object *o, *parent;

	if (rm_class_is_client(v->hClass)) {
		rm_handle h = v->hObjectNew != 0 ? v->hObjectNew : fake_next_client++;

		if (fake_find(h, h) != NULL || (o = fake_new()) == NULL)
			return RM_ERR_INVALID_OBJECT_NEW;
		o->fd = fd;
		o->h_client = o->h = o->h_parent = h;
		o->cls = v->hClass;
		v->hObjectNew = h;
		return RM_OK;
	}
	if (fake_client(fd, v->hRoot) == NULL)
		return RM_ERR_INVALID_CLIENT;
	parent = fake_find(v->hRoot, v->hObjectParent);
	if (parent == NULL || (v->hClass == RM_CLASS_TSG && parent->cls != RM_CLASS_DEVICE))
		return RM_ERR_INVALID_OBJECT_PARENT;
	if (v->hClass == RM_CLASS_TSG && (v->pAllocParms == 0 || v->paramsSize < 16))
		return RM_ERR_INVALID_PARAM_STRUCT;
	if (v->hObjectNew == 0 || fake_find(v->hRoot, v->hObjectNew) != NULL)
		return RM_ERR_INVALID_OBJECT_NEW;
	if ((o = fake_new()) == NULL)
		return RM_ERR_INVALID_OBJECT_NEW;
	o->h_client = v->hRoot;
	o->h = v->hObjectNew;
	o->h_parent = v->hObjectParent;
	o->cls = v->hClass;
	o->timeslice_us = RM_DEFAULT_TIMESLICE_COPY_US;
	return RM_OK;
}

static void fake_alloc_block(int fd, enum rm_call_kind k, void *block)
{
	struct rm_alloc_view v;
	rm_u32 status;

	rm_alloc_view_of(k, block, &v);
	status = fake_alloc(fd, &v);
	if (k == RM_CALL_ALLOC64) {
		((struct rm_alloc64_params *)block)->hObjectNew = v.hObjectNew;
		((struct rm_alloc64_params *)block)->status = status;
	} else {
		((struct rm_alloc21_params *)block)->hObjectNew = v.hObjectNew;
		((struct rm_alloc21_params *)block)->status = status;
	}
}

/* Frees h of client and, as RM does, everything below it. */
static void fake_free_tree(rm_handle h_client, rm_handle h)
{
	for (int i = 0; i < FAKE_MAX_OBJECTS; i++) {
		struct fake_object *o = &fake_objs[i];

		if (o->used && o->h_client == h_client && o->h_parent == h && o->h != h)
			fake_free_tree(h_client, o->h);
	}
	for (int i = 0; i < FAKE_MAX_OBJECTS; i++)
		if (fake_objs[i].used && fake_objs[i].h_client == h_client && fake_objs[i].h == h)
			fake_objs[i].used = 0;
}

static void fake_free(int fd, struct rm_free_params *p)
{
	if (fake_client(fd, p->hRoot) == NULL) {
		p->status = RM_ERR_INVALID_CLIENT;
		return;
	}
	if (fake_find(p->hRoot, p->hObjectOld) == NULL) {
		p->status = RM_ERR_INVALID_OBJECT_HANDLE;
		return;
	}
	if (p->hObjectOld == p->hRoot) {
		for (int i = 0; i < FAKE_MAX_OBJECTS; i++)
			if (fake_objs[i].used && fake_objs[i].h_client == p->hRoot)
				fake_objs[i].used = 0;
	} else {
		fake_free_tree(p->hRoot, p->hObjectOld);
	}
	p->status = RM_OK;
}

static rm_u32 fake_tsg_control(struct fake_object *tsg, rm_u32 cmd, void *params)
{
	const char *nice = getenv("FAKE_RM_ALLOW_NICE");
	struct rm_tsg_interleave *il = params;
	struct rm_tsg_timeslice *ts = params;

	switch (cmd) {
	case RM_CTRL_TSG_SET_TIMESLICE:
		/* Beyond anything measured: lets tests see a refusal. */
		if (ts->timesliceUs > FAKE_MAX_TIMESLICE_US)
			return RM_ERR_INVALID_ARGUMENT;
		tsg->timeslice_us = ts->timesliceUs;
		return RM_OK;
	case RM_CTRL_TSG_GET_TIMESLICE:
		ts->timesliceUs = tsg->timeslice_us;
		return RM_OK;
	case RM_CTRL_TSG_PREEMPT:
		return RM_OK;
	case RM_CTRL_TSG_SET_INTERLEAVE:
		if (il->tsgInterleaveLevel > RM_INTERLEAVE_HIGH)
			return RM_ERR_INVALID_ARGUMENT;
		return nice != NULL && strcmp(nice, "1") == 0 ? RM_OK
							       : RM_ERR_INSUFFICIENT_PERMISSIONS;
	default:
		return RM_ERR_NOT_SUPPORTED;
	}
}

static unsigned long long fake_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* NV2080_CTRL_CMD_FIFO_DISABLE_CHANNELS: every named channel must be one
 * of the caller's; a refused call changes nothing. */
static rm_u32 fake_disable_channels(int fd, const struct rm_disable_channels *d)
{
	if (d->pRunlistPreemptEvent != 0)
		return RM_ERR_INSUFFICIENT_PERMISSIONS;
	if (d->numChannels > RM_DISABLE_CHANNELS_MAX)
		return RM_ERR_INVALID_ARGUMENT;
	for (rm_u32 i = 0; i < d->numChannels; i++) {
		struct fake_object *ch = fake_find(d->hClientList[i], d->hChannelList[i]);

		if (fake_client(fd, d->hClientList[i]) == NULL)
			return RM_ERR_INVALID_CLIENT;
		if (ch == NULL || !rm_class_is_channel(ch->cls))
			return RM_ERR_INVALID_OBJECT_HANDLE;
	}
	for (rm_u32 i = 0; i < d->numChannels; i++) {
		struct fake_object *ch = fake_find(d->hClientList[i], d->hChannelList[i]);

		unsigned long long t = fake_now_ns();

		if (d->bDisable && !ch->disabled)
			ch->off_since_ns = t;
		else if (!d->bDisable && ch->disabled)
			ch->off_ns += t - ch->off_since_ns;
		ch->disabled = d->bDisable != 0;
		if (d->bDisable) {
			ch->disabled_at_ns = t;
			ch->disables++;
		}
		else
			ch->enables++;
	}
	return RM_OK;
}

/* For tests: -1 unknown channel, else disabled (0/1) + 2 * disables +
 * 2000 * enables (counts below 1000). */
__attribute__((visibility("default"))) int fake_rm_channel_state(rm_handle h_client, rm_handle h);
int fake_rm_channel_state(rm_handle h_client, rm_handle h)
{
	struct fake_object *ch;
	int v = -1;

	pthread_mutex_lock(&fake_lock);
	ch = fake_find(h_client, h);
	if (ch != NULL && rm_class_is_channel(ch->cls))
		v = ch->disabled + 2 * (int)ch->disables + 2000 * (int)ch->enables;
	pthread_mutex_unlock(&fake_lock);
	return v;
}

/* For tests: CLOCK_MONOTONIC (ns) of the channel's last disable, 0 if
 * none or unknown. */
__attribute__((visibility("default"))) unsigned long long
fake_rm_channel_disabled_at(rm_handle h_client, rm_handle h);
unsigned long long fake_rm_channel_disabled_at(rm_handle h_client, rm_handle h)
{
	struct fake_object *ch;
	unsigned long long v = 0;

	pthread_mutex_lock(&fake_lock);
	ch = fake_find(h_client, h);
	if (ch != NULL && rm_class_is_channel(ch->cls))
		v = ch->disabled_at_ns;
	pthread_mutex_unlock(&fake_lock);
	return v;
}

/* For tests: how long the channel has been off in all (ns), the interval
 * open now included up to *now_ns (CLOCK_MONOTONIC, read under the same
 * lock); 0 if unknown. */
__attribute__((visibility("default"))) unsigned long long
fake_rm_channel_off_ns(rm_handle h_client, rm_handle h, unsigned long long *now_ns);
unsigned long long fake_rm_channel_off_ns(rm_handle h_client, rm_handle h,
					  unsigned long long *now_ns)
{
	struct fake_object *ch;
	unsigned long long v = 0;

	pthread_mutex_lock(&fake_lock);
	*now_ns = fake_now_ns();
	ch = fake_find(h_client, h);
	if (ch != NULL && rm_class_is_channel(ch->cls))
		v = ch->off_ns + (ch->disabled ? *now_ns - ch->off_since_ns : 0);
	pthread_mutex_unlock(&fake_lock);
	return v;
}

static void fake_control(int fd, struct rm_control_params *p)
{
	struct fake_object *o;
	rm_u32 want = rm_tsg_ctrl_params_size(p->cmd);

	if (fake_client(fd, p->hClient) == NULL) {
		p->status = RM_ERR_INVALID_CLIENT;
		return;
	}
	o = fake_find(p->hClient, p->hObject);
	if (o == NULL) {
		p->status = RM_ERR_INVALID_OBJECT_HANDLE;
		return;
	}
	if (p->cmd == RM_CTRL_FIFO_DISABLE_CHANNELS) {
		if (o->cls != RM_CLASS_SUBDEVICE)
			p->status = RM_ERR_NOT_SUPPORTED;
		else if (p->paramsSize != sizeof(struct rm_disable_channels) || p->params == 0)
			p->status = RM_ERR_INVALID_PARAM_STRUCT;
		else
			p->status = fake_disable_channels(fd, (void *)(uintptr_t)p->params);
		return;
	}
	if (o->cls != RM_CLASS_TSG || want == 0) {
		p->status = RM_ERR_NOT_SUPPORTED;
		return;
	}
	if (p->paramsSize != want || p->params == 0) {
		p->status = RM_ERR_INVALID_PARAM_STRUCT;
		return;
	}
	p->status = fake_tsg_control(o, p->cmd, (void *)(uintptr_t)p->params);
}

/* FAKE_RM_SLOW_SET: after a SET_TIMESLICE RM took, outside the lock. */
static void fake_slow_set(const struct rm_control_params *p)
{
	const char *env = getenv("FAKE_RM_SLOW_SET");
	unsigned long long us = 0;
	unsigned ms = 0;
	const struct rm_tsg_timeslice *ts = (const void *)(uintptr_t)p->params;

	if (env == NULL || p->cmd != RM_CTRL_TSG_SET_TIMESLICE || p->status != RM_OK ||
	    sscanf(env, "%llu:%u", &us, &ms) != 2 || ts->timesliceUs != us)
		return;
	nanosleep(&(struct timespec){ ms / 1000, (long)(ms % 1000) * 1000000L }, NULL);
}

static int fake_rm(int fd, enum rm_call_kind k, void *arg)
{
	if (arg == NULL) {
		errno = EFAULT;
		return -1;
	}
	if (k == RM_CALL_XFER) {
		struct rm_xfer *x = arg;

		k = rm_xfer_kind(x);
		arg = (void *)(uintptr_t)x->ptr;
		if (k == RM_CALL_NONE || arg == NULL) {
			errno = EINVAL;
			return -1;
		}
	}
	pthread_mutex_lock(&fake_lock);
	if (k == RM_CALL_ALLOC21 || k == RM_CALL_ALLOC64)
		fake_alloc_block(fd, k, arg);
	else if (k == RM_CALL_CONTROL)
		fake_control(fd, arg);
	else
		fake_free(fd, arg);
	pthread_mutex_unlock(&fake_lock);
	if (k == RM_CALL_CONTROL)
		fake_slow_set(arg);
	return 0;
}

int ioctl(int fd, unsigned long request, ...)
{
	static ioctl_fn next;
	enum rm_call_kind k = rm_call_kind_of(request);
	va_list ap;
	void *arg;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (next == NULL)
		next = (ioctl_fn)dlsym(RTLD_NEXT, "ioctl");
	if (k != RM_CALL_NONE && fake_is_ctl(fd))
		return fake_rm(fd, k, arg);
	return next(fd, request, arg);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_ioctl.c - the interposed ioctl() and close() of
 * libgpuqos-preempt.so, the library's initialisation and fork handling.
 *
 * Owns: finding the next ioctl/close (and handing them to preempt_core.c
 * for the library's own calls), the SET_TIMESLICE rewrite on libcuda's
 * path, feeding completed RM calls to the tables, waiting for the first
 * POLICY, and resetting everything in a forked child. Does not own: the
 * shared state and the emit path (preempt_core.c), the tables' logic
 * (preempt_track.c), the node-agent connection (preempt_conn.c), the
 * timeslice record (preempt_timeslice.c), the trace file
 * (preempt_trace.c).
 *
 * The fast path: an ioctl that is not an RM call costs a compare and a
 * tail call, with no lock and no system call of ours.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "preempt.h"
#include "preempt_conn.h"
#include "preempt_launch.h"
#include "preempt_libc.h"
#include "preempt_timeslice.h"
#include "preempt_trace.h"
#include "preempt_wake.h"

#define PA_EXPORT __attribute__((visibility("default")))

/* The next ioctl and close, for the interposed symbols themselves (the
 * library's own calls take preempt_core.c's copies): read on every call,
 * so one load here and no call into another file. */
static _Atomic pa_ioctl_fn pa_ioctl_next;
static _Atomic pa_close_fn pa_close_next;
static pthread_once_t pa_once = PTHREAD_ONCE_INIT;

/* ---- initialisation ---- */

static void pa_config_socket(void)
{
	const char *path = getenv("GPUQOS_SOCKET");

	if (path == NULL || *path == '\0')
		path = GQ_DEFAULT_SOCKET;
	pa.addr.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(pa.addr.sun_path)) {
		pa_info("socket path too long, not connecting: %s", path);
		return;
	}
	memcpy(pa.addr.sun_path, path, strlen(path) + 1);
	pa.addr_ok = 1;
}

/* GPUQOS_POLICY_WAIT_MS: how long a TSG creation may wait for the node
 * agent's first POLICY (0 disables the wait; capped at 1 s). */
static void pa_config_policy_wait(void)
{
	const char *v = getenv("GPUQOS_POLICY_WAIT_MS");
	char *end;
	unsigned long ms;

	if (v == NULL || *v == '\0')
		return;
	ms = strtoul(v, &end, 10);
	if (*end != '\0' || ms > 1000) {
		pa_info("GPUQOS_POLICY_WAIT_MS=%s is not 0..1000; keeping %u", v, pa.policy_wait_ms);
		return;
	}
	pa.policy_wait_ms = (unsigned)ms;
}

/* A TSG was just created while the connection to the node agent is being
 * made: give the agent a bounded moment to send POLICY, so that libcuda's
 * SET_TIMESLICE, which follows at once, is rewritten and the TSG never runs
 * a workload at the wrong value. Never waits when no agent answered, and
 * only once per connection if the agent is late (then the agent's own
 * commands correct the value). */
static void pa_await_policy(void)
{
	struct timespec dl;

	if (atomic_load(&pa.policy_phase) != PA_POLICY_PENDING || pa.policy_wait_ms == 0)
		return;
	pa_deadline_in(&dl, pa.policy_wait_ms);
	pa_lock();
	while (atomic_load(&pa.policy_phase) == PA_POLICY_PENDING) {
		if (pthread_cond_timedwait(&pa.policy_cv, &pa.lock, &dl) == ETIMEDOUT) {
			atomic_store(&pa.policy_phase, PA_POLICY_DOWN);
			pa_info("no POLICY from the node agent within %u ms; not waiting again",
				pa.policy_wait_ms);
			break;
		}
	}
	pa_unlock();
}

static void pa_fork_prepare(void);
static void pa_fork_parent(void);
static void pa_fork_child(void);

/* GPUQOS_PREEMPT_DISABLE=1: the container opted out (docs/device-plugin.md);
 * or the process runs on a C library other than glibc (preempt_libc.c).
 * RM calls then pass straight through, no thread is started and the node
 * agent is never contacted. Written once in pa_init, before the release
 * store that publishes initialisation. */
static int pa_disabled;

/* glibc's own registration behind pthread_atfork (which glibc links in
 * statically, calling this): weak, since only glibc has it. */
extern void *__dso_handle;
extern int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
			     void *dso) __attribute__((weak));

static void pa_init(void)
{
	pa_ioctl_fn io = (pa_ioctl_fn)dlsym(RTLD_NEXT, "ioctl");
	pa_close_fn cl = (pa_close_fn)dlsym(RTLD_NEXT, "close");
	const char *trace = getenv("GPUQOS_TRACE");
	const char *off = getenv("GPUQOS_PREEMPT_DISABLE");
	int rc;

	pa_log_init();
	pa_real_set(io, cl);
	atomic_store(&pa_close_next, pa_real_close_fn());
	pa_disabled = off != NULL && strcmp(off, "1") == 0;
	if (!pa_libc_is_glibc()) {
		pa_disabled = 1;
		pa_info("not glibc: not taking part");
	} else if (pa_disabled) {
		pa_info("GPUQOS_PREEMPT_DISABLE=1: not taking part");
	} else {
		pa_config_socket();
	}
	pa_config_policy_wait();
	if (!pa_disabled)
		pa_wake_init();
	if (trace != NULL && *trace != '\0' && pa_libc_is_glibc())
		pa_trace_init(trace);
	rc = __register_atfork ? __register_atfork(pa_fork_prepare, pa_fork_parent, pa_fork_child,
						   __dso_handle)
			       : 0;
	if (rc != 0) {
		errno = rc;
		pa_info("pthread_atfork: %m; forked children will not be tracked");
	}
	if (io == NULL)
		pa_info("dlsym(ioctl) found nothing; calling the kernel directly");
	/* Last: a non-NULL ioctl pointer means initialisation is complete. */
	atomic_store_explicit(&pa_ioctl_next, pa_real_ioctl(), memory_order_release);
	pa_debug("loaded; agent socket %s", pa.addr_ok ? pa.addr.sun_path : "(none)");
}

__attribute__((constructor)) static void pa_constructor(void)
{
	pthread_once(&pa_once, pa_init);
}

/* ---- the next ioctl and close ---- */

static pa_ioctl_fn pa_next_ioctl(void)
{
	pa_ioctl_fn f = atomic_load_explicit(&pa_ioctl_next, memory_order_acquire);

	if (__builtin_expect(f != NULL, 1))
		return f;
	/* Called before our constructor (another library's constructor). */
	pthread_once(&pa_once, pa_init);
	return atomic_load_explicit(&pa_ioctl_next, memory_order_acquire);
}

static pa_close_fn pa_next_close(void)
{
	pa_close_fn f = atomic_load_explicit(&pa_close_next, memory_order_relaxed);

	if (__builtin_expect(f != NULL, 1))
		return f;
	pa_next_ioctl();
	return atomic_load_explicit(&pa_close_next, memory_order_relaxed);
}

/* ---- the fd map ---- */

static int pa_fd_marked(int fd)
{
	if (fd < 0)
		return 0;
	if (atomic_load_explicit(&pa.fd_creating, memory_order_relaxed))
		return 1;
	if (fd >= PA_FDMAP_BITS)
		return atomic_load_explicit(&pa.fd_big, memory_order_relaxed);
	return (atomic_load_explicit(&pa.fdmap[fd / 64], memory_order_relaxed) >> (fd % 64)) & 1;
}

/* The policy's timeslice for a TSG on this engine; 0: leave it. */
static rm_u32 pa_policy_for(rm_u32 engine_type)
{
	if (rm_engine_is_gr(engine_type))
		return atomic_load(&pa.policy_gr_us);
	if (rm_engine_is_copy(engine_type))
		return atomic_load(&pa.policy_copy_us);
	return 0;
}

/* Set a TSG libcuda just created to the policy's timeslice before any work
 * can run on it. On driver 580 libcuda issues no SET_TIMESLICE of its own
 * (the TSG starts at the RM's default), so there may be no call to rewrite.
 * The agent thread issues the control; this thread waits for it at most
 * policy_wait_ms, so a control that does not return never holds the
 * application for longer than that. */
static void pa_apply_new_tsg(rm_handle h_client, rm_handle h_tsg)
{
	struct pa_event ev;
	struct pa_tsg *g;
	struct timespec dl;
	unsigned long seq;
	int wake = 0;

	memset(&ev, 0, sizeof(ev));
	pa_lock();
	g = pa_track_tsg_find(&pa.track, h_client, h_tsg);
	if (g == NULL || !pa.connected || pa.policy_wait_ms == 0 || pa_policy_for(g->engine_type) == 0) {
		pa_unlock();
		return;
	}
	ev.type = PA_EV_TSG_APPLY;
	ev.tsg = *g;
	ev.value_us = pa_policy_for(g->engine_type);
	ev.seq = seq = ++pa.apply_seq;
	pa_emit(&wake, &ev);
	pa_unlock();
	pa_wake(wake);
	pa_deadline_in(&dl, pa.policy_wait_ms);
	pa_lock();
	while (pa.apply_done < seq && pa.connected)
		if (pthread_cond_timedwait(&pa.policy_cv, &pa.lock, &dl) == ETIMEDOUT)
			break;
	pa_unlock();
}

/* ---- video memory (docs/protocol.md, "Memory") ---- */

/* Copies n bytes of the application's memory at src before the kernel has
 * looked at them: a bad pointer is an error here (the RM then answers the
 * call as it would), never a fault in the application. */
static int pa_peek(void *dst, const void *src, size_t n)
{
	struct iovec l = { .iov_base = dst, .iov_len = n };
	struct iovec r = { .iov_base = (void *)(uintptr_t)src, .iov_len = n };
	int saved = errno;
	long got = syscall(SYS_process_vm_readv, (long)getpid(), &l, 1L, &r, 1L, 0L);

	errno = saved;
	return got == (long)n ? 0 : -1;
}

static int pa_poke(void *dst, const void *src, size_t n)
{
	struct iovec l = { .iov_base = (void *)(uintptr_t)src, .iov_len = n };
	struct iovec r = { .iov_base = dst, .iov_len = n };
	int saved = errno;
	long put = syscall(SYS_process_vm_writev, (long)getpid(), &l, 1L, &r, 1L, 0L);

	errno = saved;
	return put == (long)n ? 0 : -1;
}

static void *pa_user_ptr(rm_u64 p)
{
	return (void *)(uintptr_t)p;
}

/* The device instance of an allocation's parent: a device, or a subdevice. */
static rm_u32 pa_mem_instance(rm_handle h_client, rm_handle h_parent)
{
	rm_u32 inst = pa_track_device_instance(&pa.track, h_client, h_parent);

	return inst != GQ_UNKNOWN ? inst : pa_track_subdevice_instance(&pa.track, h_client, h_parent);
}

/* Before a video-memory allocation, under a budget: 1 if the library
 * answers it NV_ERR_NO_MEMORY itself (the RM never sees it), 0 to issue
 * it. Reads the application's block and parameters with pa_peek: any that
 * cannot be read go to the RM, which answers them. */
static int pa_mem_refused(enum rm_call_kind kind, void *arg)
{
	union {
		struct rm_alloc21_params a21;
		struct rm_alloc64_params a64;
	} blk;
	struct rm_memory_alloc mp;
	struct rm_alloc_view v;
	rm_u32 status = RM_ERR_NO_MEMORY, inst;
	size_t n = kind == RM_CALL_ALLOC64 ? sizeof(blk.a64) : sizeof(blk.a21);
	int refuse, wake;

	if (pa_peek(&blk, arg, n) != 0 || rm_alloc_view_of(kind, &blk, &v) != 0 ||
	    v.hClass != RM_CLASS_MEMORY_LOCAL_USER || v.pAllocParms == 0 ||
	    (v.paramsSize != 0 && v.paramsSize < sizeof(mp)) ||
	    pa_peek(&mp, (const void *)(uintptr_t)v.pAllocParms, sizeof(mp)) != 0 ||
	    (mp.flags & RM_MEMORY_FLAGS_VIRTUAL))
		return 0;
	pa_lock();
	inst = pa_mem_instance(v.hRoot, v.hObjectParent);
	refuse = pa_mem_refuse(&pa.mem, inst, mp.size);
	wake = refuse && pa_mem_wake();
	pa_unlock();
	pa_wake(wake);
	if (!refuse)
		return 0;
	if (pa_poke((char *)arg + rm_status_offset(kind), &status, sizeof(status)) != 0)
		return 0;
	pa_debug("video memory: %llu bytes on device %u refused (budget)",
		 (unsigned long long)mp.size, inst);
	return 1;
}

/* After a successful call: count a video-memory allocation or free, and
 * rewrite an FB-info answer under a budget that asks. The kernel has read
 * and written these buffers, so they are the application's own. */
static void pa_mem_after(int fd, const struct pa_call *c)
{
	const struct rm_control_params *ctl = c->block;
	const struct rm_free_params *fr = c->block;
	struct rm_alloc_view v;
	int wake = 0;

	if (c->kind == RM_CALL_FREE) {
		pa_lock();
		if (pa.mem.live != 0) {
			pa_mem_freed(&pa.mem, fr->hRoot, fr->hObjectOld);
			wake = pa_mem_wake();
		}
		pa_unlock();
	} else if (c->kind == RM_CALL_CONTROL) {
		rm_u32 n;

		if (ctl->cmd != RM_CTRL_FB_GET_INFO_V2 || ctl->params == 0 || ctl->paramsSize < 4 ||
		    !__atomic_load_n(&pa.mem.any_limit, __ATOMIC_RELAXED))
			return;
		memcpy(&n, pa_user_ptr(ctl->params), sizeof(n));
		if (n > (ctl->paramsSize - 4u) / sizeof(struct rm_fb_info))
			n = (ctl->paramsSize - 4u) / sizeof(struct rm_fb_info);
		pa_lock();
		pa_mem_fb_rewrite(&pa.mem, pa_track_subdevice_instance(&pa.track, ctl->hClient, ctl->hObject),
				  (struct rm_fb_info *)((char *)pa_user_ptr(ctl->params) + 4), n);
		pa_unlock();
	} else if (rm_alloc_view_of(c->kind, c->block, &v) == 0 &&
		   v.hClass == RM_CLASS_MEMORY_LOCAL_USER) {
		struct rm_memory_alloc mp;
		int readable = v.pAllocParms != 0 && (v.paramsSize == 0 || v.paramsSize >= sizeof(mp));

		if (readable)
			memcpy(&mp, pa_user_ptr(v.pAllocParms), sizeof(mp));
		if (readable && (mp.flags & RM_MEMORY_FLAGS_VIRTUAL))
			return;
		pa_lock();
		if (readable)
			pa_mem_added(&pa.mem, fd, v.hRoot, v.hObjectParent, v.hObjectNew,
				     pa_mem_instance(v.hRoot, v.hObjectParent), mp.size);
		else
			pa_mem_unknown(&pa.mem, pa_mem_instance(v.hRoot, v.hObjectParent));
		pa_fd_mark(fd);
		wake = pa_mem_wake();
		pa_unlock();
	}
	pa_wake(wake);
}

/* ---- completed calls ---- */

static void pa_after(int fd, enum rm_call_kind kind, void *arg)
{
	struct pa_call c;
	unsigned r;
	int wake = 0;

	if (pa_unwrap(kind, arg, &c) == 0 && pa_call_status(&c) == RM_OK)
		pa_mem_after(fd, &c);
	if (!pa_track_should_apply(kind, arg, 0, &c))
		return;
	pa_lock();
	r = pa_track_apply(&pa.track, fd, &c, pa_emit, &wake);
	if (c.kind == RM_CALL_ALLOC21 || c.kind == RM_CALL_ALLOC64)
		pa_fd_mark(fd);
	pa_unlock();
	pa_wake(wake);
	if (r & PA_APPLY_NEW_CLIENT)
		pa_conn_start();
	if (c.kind == RM_CALL_ALLOC21 || c.kind == RM_CALL_ALLOC64) {
		struct rm_alloc_view v;

		if (rm_alloc_view_of(c.kind, c.block, &v) == 0 && v.hClass == RM_CLASS_TSG) {
			pa_await_policy();
			pa_apply_new_tsg(v.hRoot, v.hObjectNew);
		}
	}
}

/* ---- the SET_TIMESLICE rewrite ---- */

static int pa_policy_active(void)
{
	return atomic_load_explicit(&pa.policy_gr_us, memory_order_relaxed) != 0 ||
	       atomic_load_explicit(&pa.policy_copy_us, memory_order_relaxed) != 0;
}

/* Read only when a policy is set: without one, no application memory is
 * read before the kernel has validated it. */
static int pa_rewrite_wanted(enum rm_call_kind kind, void *arg, struct pa_call *c,
			     struct pa_rewrite *rw)
{
	rm_u32 gr, copy;
	int r;

	if (kind != RM_CALL_CONTROL && kind != RM_CALL_XFER)
		return 0;
	if (!pa_policy_active() || pa_unwrap(kind, arg, c) != 0 || !pa_call_is_set_timeslice(c))
		return 0;
	gr = atomic_load_explicit(&pa.policy_gr_us, memory_order_relaxed);
	copy = atomic_load_explicit(&pa.policy_copy_us, memory_order_relaxed);
	pa_lock();
	r = pa_rewrite_plan(&pa.track, c, gr, copy, rw);
	pa_unlock();
	return r;
}

/* Issue the application's SET_TIMESLICE with the policy's value, from
 * local copies: the application's parameters are never modified, only its
 * status word receives RM's answer. */
static int pa_rewrite_issue(pa_ioctl_fn real, int fd, unsigned long request,
			    const struct pa_call *c, const struct pa_rewrite *rw)
{
	struct rm_control_params *app = c->block;
	struct rm_control_params ctl = *app;
	struct rm_tsg_timeslice ts = { .timesliceUs = rw->value_us };
	struct rm_xfer x;
	int ret, err, wake = 0;

	ctl.params = (rm_u64)(uintptr_t)&ts;
	if (c->xfer) {
		x = *c->outer;
		x.ptr = (rm_u64)(uintptr_t)&ctl;
		ret = real(fd, request, &x);
	} else {
		ret = real(fd, request, &ctl);
	}
	err = errno;
	if (ret == 0)
		app->status = ctl.status;
	pa_debug("SET_TIMESLICE client 0x%x tsg 0x%x: %llu us asked, %u us issued: %s", rw->h_client,
		 rw->h_tsg, (unsigned long long)rw->app_us, rw->value_us,
		 ret == 0 ? rm_status_name(ctl.status) : "ioctl failed");
	pa_lock();
	pa_track_note_timeslice(&pa.track, rw->h_client, rw->h_tsg, rw->app_us,
				ret == 0 && ctl.status == RM_OK, rw->value_us, pa_emit, &wake);
	pa_unlock();
	pa_wake(wake);
	errno = err;
	return ret;
}

/* ---- the interposed symbols ---- */

static int pa_rm_ioctl(int fd, unsigned long request, enum rm_call_kind kind, void *arg)
{
	pa_ioctl_fn real = pa_next_ioctl();
	struct pa_trace_call *tc = NULL;
	struct pa_rewrite rw;
	struct pa_call c;
	int ret, err;

	if (pa_trace_on)
		tc = pa_trace_begin(fd, request, kind, arg);
	if (pa_rewrite_wanted(kind, arg, &c, &rw)) {
		int locked = pa_ts_lock();

		ret = pa_rewrite_issue(real, fd, request, &c, &rw);
		err = errno;
		pa_ts_unlock(locked);
	} else if ((kind == RM_CALL_ALLOC21 || kind == RM_CALL_ALLOC64) &&
		   __atomic_load_n(&pa.mem.any_limit, __ATOMIC_RELAXED) && pa_mem_refused(kind, arg)) {
		ret = 0;
		err = errno;
	} else {
		ret = real(fd, request, arg);
		err = errno;
		if (ret == 0)
			pa_after(fd, kind, arg);
	}
	if (tc != NULL)
		pa_trace_end(tc, ret, ret == 0 ? 0 : err);
	errno = err;
	return ret;
}

PA_EXPORT int ioctl(int fd, unsigned long request, ...)
{
	enum rm_call_kind kind = rm_call_kind_of(request);
	pa_ioctl_fn real;
	va_list ap;
	void *arg;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (__builtin_expect(kind == RM_CALL_NONE, 1)) {
		/* Trace mode records other 'F' ioctls too; the flag is read
		 * only for them. */
		if (__builtin_expect(RM_IOC_TYPE(request) == RM_IOCTL_MAGIC, 0) && pa_trace_on)
			return pa_rm_ioctl(fd, request, kind, arg);
		return pa_next_ioctl()(fd, request, arg);
	}
	real = pa_next_ioctl(); /* initialises, so pa_disabled is set */
	if (__builtin_expect(pa_disabled, 0))
		return real(fd, request, arg);
	return pa_rm_ioctl(fd, request, kind, arg);
}

static int pa_close_slow(int fd)
{
	int wake = 0;

	/* Our own fds do not exist for the application: closing one (say, in
	 * a close-every-fd loop) gets what it would get without gpuqos. */
	if (fd == atomic_load(&pa.evfd) || fd == atomic_load(&pa.sock) ||
	    fd == atomic_load(&pa.tmpfd) || pa_trace_owns(fd)) {
		errno = EBADF;
		return -1;
	}
	pa_lock();
	pa_track_close_fd(&pa.track, fd, pa_emit, &wake);
	if (pa.mem.live != 0) {
		pa_mem_close_fd(&pa.mem, fd);
		wake |= pa_mem_wake();
	}
	pa_fd_unmark(fd);
	pa_unlock();
	pa_wake(wake);
	return pa_next_close()(fd);
}

PA_EXPORT int close(int fd)
{
	if (__builtin_expect(!pa_fd_marked(fd), 1))
		return pa_next_close()(fd);
	return pa_close_slow(fd);
}

/* ---- fork ---- */

/* Hold the lock across fork() so the child never inherits it taken. */
static void pa_fork_prepare(void)
{
	pa_lock();
}

static void pa_fork_parent(void)
{
	pa_unlock();
}

/* The child has no agent thread, and the parent's TSGs are not its own:
 * start from nothing and start again on the child's own RM activity. */
static void pa_fork_child(void)
{
	pthread_mutex_init(&pa.lock, NULL);
	/* Not held across fork(): the library's thread may hold it for one
	 * RM control, which must not hold up a fork. It guards no data, only
	 * the order of controls, and the child has no such thread. */
	pthread_mutex_init(&pa.ts_lock, NULL);
	pthread_cond_init(&pa.policy_cv, NULL);
	atomic_store(&pa.policy_phase, PA_POLICY_IDLE);
	pa.apply_seq = 0;
	pa.apply_done = 0;
	pa_track_init(&pa.track);
	pa_mem_reset(&pa.mem);
	pa.mem_on = 0;
	pa.mem_wake_pending = 0;
	pa.qhead = 0;
	pa.qlen = 0;
	pa.q_overflow = 0;
	pa.connected = 0;
	pa.wake_pending = 0;
	atomic_store(&pa.policy_gr_us, 0);
	atomic_store(&pa.policy_copy_us, 0);
	for (int i = 0; i < PA_FDMAP_WORDS; i++)
		atomic_store(&pa.fdmap[i], 0);
	atomic_store(&pa.fd_big, 0);
	pa_conn_child_reset();
	pa_trace_child_reset();
	pa_launch_child_reset();
	pa_wake_child_reset();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_core.c - what every part of libgpuqos-preempt.so shares: the
 * state (struct pa_state), its lock and fd map, the emit path from the
 * tables to the library's thread, the real ioctl/close for the library's
 * own calls, creating the library's threads, and the one RM control call
 * all of them issue.
 *
 * Owns: the above, and nothing that decides anything. Does not own: the
 * interposed symbols and the initialisation (preempt_ioctl.c), the tables'
 * logic (preempt_track.c), the connection (preempt_conn.c). Calls nothing
 * of the library but the tables and the log, so every feature file can
 * call it without making a cycle.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preempt.h"

struct pa_state pa = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.ts_lock = PTHREAD_MUTEX_INITIALIZER,
	.policy_cv = PTHREAD_COND_INITIALIZER,
	.policy_wait_ms = PA_POLICY_WAIT_MS_DEFAULT,
	.evfd = -1,
	.sock = -1,
	.tmpfd = -1,
};

/* ---- the real functions ---- */

static _Atomic pa_ioctl_fn pa_own_ioctl;
static _Atomic pa_close_fn pa_own_close;

/* Used only if dlsym cannot find the next definition: the application
 * must keep working, so go to the kernel directly. */
static int pa_sys_ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	return (int)syscall(SYS_ioctl, fd, request, arg);
}

static int pa_sys_close(int fd)
{
	return (int)syscall(SYS_close, fd);
}

void pa_real_set(pa_ioctl_fn io, pa_close_fn cl)
{
	atomic_store(&pa_own_ioctl, io != NULL ? io : pa_sys_ioctl);
	atomic_store(&pa_own_close, cl != NULL ? cl : pa_sys_close);
}

pa_ioctl_fn pa_real_ioctl(void)
{
	pa_ioctl_fn f = atomic_load_explicit(&pa_own_ioctl, memory_order_relaxed);

	return f != NULL ? f : pa_sys_ioctl;
}

pa_close_fn pa_real_close_fn(void)
{
	pa_close_fn f = atomic_load_explicit(&pa_own_close, memory_order_relaxed);

	return f != NULL ? f : pa_sys_close;
}

int pa_real_close(int fd)
{
	return pa_real_close_fn()(fd);
}

/* ---- the lock, the fd map, the queue ---- */

void pa_lock(void)
{
	pthread_mutex_lock(&pa.lock);
}

void pa_unlock(void)
{
	pthread_mutex_unlock(&pa.lock);
}

void pa_fd_mark(int fd)
{
	if (fd < 0)
		return;
	if (fd >= PA_FDMAP_BITS) {
		atomic_store(&pa.fd_big, 1);
		return;
	}
	atomic_fetch_or(&pa.fdmap[fd / 64], 1ul << (fd % 64));
}

void pa_fd_unmark(int fd)
{
	if (fd < 0 || fd >= PA_FDMAP_BITS || pa_track_fd_in_use(&pa.track, fd))
		return;
	atomic_fetch_and(&pa.fdmap[fd / 64], ~(1ul << (fd % 64)));
}

/* The lock is held across the creating system call (socket(), eventfd(),
 * open()); none of them blocks. */
void pa_own_fd_begin(void)
{
	pa_lock();
	atomic_store(&pa.fd_creating, 1);
}

void pa_own_fd_end(int fd)
{
	pa_fd_mark(fd);
	atomic_store(&pa.fd_creating, 0);
	pa_unlock();
}

void pa_emit(void *ctx, const struct pa_event *ev)
{
	int *wake = ctx;

	/* While disconnected, the greeting's snapshot will carry the state. */
	if (!pa.connected)
		return;
	if (pa.qlen == PA_QUEUE_LEN) {
		pa.q_overflow = 1;
		pa.ctr_queue_overflow++;
	} else {
		pa.queue[(pa.qhead + pa.qlen) % PA_QUEUE_LEN] = *ev;
		pa.qlen++;
	}
	if (!pa.wake_pending) {
		pa.wake_pending = 1;
		*wake = 1;
	}
}

int pa_mem_wake(void)
{
	if (!pa.connected || !pa.mem_on || pa.mem_wake_pending)
		return 0;
	pa.mem_wake_pending = 1;
	return 1;
}

void pa_wake(int wake)
{
	rm_u64 one = 1;
	int saved = errno;
	int efd;

	if (!wake)
		return;
	efd = atomic_load(&pa.evfd);
	/* EAGAIN means the counter is already non-zero: the thread will wake. */
	if (efd >= 0 && write(efd, &one, sizeof(one)) != sizeof(one))
		pa_debug("eventfd write: %m");
	errno = saved;
}

/* ---- the policy's phase ---- */

void pa_deadline_in(struct timespec *dl, unsigned ms)
{
	if (clock_gettime(CLOCK_REALTIME, dl) != 0) {
		dl->tv_sec = 0;
		dl->tv_nsec = 0;
	}
	dl->tv_sec += ms / 1000;
	dl->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl->tv_nsec >= 1000000000L) {
		dl->tv_sec++;
		dl->tv_nsec -= 1000000000L;
	}
}

void pa_policy_phase_set(enum pa_policy_phase ph)
{
	pa_lock();
	atomic_store(&pa.policy_phase, ph);
	pthread_cond_broadcast(&pa.policy_cv);
	pa_unlock();
}

/* ---- the library's threads ---- */

int pa_thread_spawn(void *(*fn)(void *), const char *name, size_t stack)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t th;
	int rc;

	if (pthread_attr_init(&attr) != 0)
		return -1;
	rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (rc == 0 && stack)
		rc = pthread_attr_setstacksize(&attr, stack);
	/* Created with every signal blocked, so no signal meant for the
	 * application is ever delivered to it, not even before it runs. */
	sigfillset(&all);
	if (rc == 0)
		rc = pthread_sigmask(SIG_SETMASK, &all, &old);
	if (rc == 0) {
		rc = pthread_create(&th, &attr, fn, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		errno = rc;
		return -1;
	}
	/* Names the thread in ps and /proc; failing to is harmless. */
	if (pthread_setname_np(th, name) != 0)
		pa_debug("could not name the %s thread", name);
	return 0;
}

/* ---- the library's own RM control ---- */

rm_u32 pa_rm_control(int fd, rm_handle h_client, rm_handle h_object, rm_u32 cmd, void *params,
		     rm_u32 size, rm_u32 *status, rm_u64 *elapsed_ns)
{
	struct rm_control_params p;
	rm_u64 t0 = pa_now_ns();
	int ret, err;

	memset(&p, 0, sizeof(p));
	p.hClient = h_client;
	p.hObject = h_object;
	p.cmd = cmd;
	p.params = (rm_u64)(uintptr_t)params;
	p.paramsSize = size;
	ret = pa_real_ioctl()(fd, RM_IOCTL_CONTROL, &p);
	err = errno;
	*elapsed_ns += pa_now_ns() - t0;
	*status = p.status;
	if (ret != 0)
		return err != 0 ? (rm_u32)err : EIO;
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt.h - the core every part of libgpuqos-preempt.so builds on: the
 * shared state (the lock, the tables, the event queue, the policy, the
 * fds the library owns), the emit path from the tables to the library's
 * thread, the real ioctl/close, thread creation, the library's own RM
 * control, logging and the clock.
 *
 * Owns: declarations only. preempt_core.c defines the state and the calls
 * above; preempt_log.c logging and the clock. The features (the interposed
 * ioctl, the connection, gates, windows, wakes, launch counting, the
 * trace) each have a header of their own and call down into these, never
 * back into one another in a cycle (tests/preempt/test_preempt_file_graph.py).
 * Nothing in here is exported from the library.
 */
#ifndef GPUQOS_PREEMPT_H
#define GPUQOS_PREEMPT_H

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <sys/un.h>
#include <time.h>

#include "abi/gq_proto.h"
#include "preempt_mem.h"
#include "preempt_track.h"

typedef int (*pa_ioctl_fn)(int fd, unsigned long request, ...);
typedef int (*pa_close_fn)(int fd);

/* Events queued by application threads for the agent thread. When it
 * overflows, the thread reconnects and re-reports everything. */
#define PA_QUEUE_LEN 256

/* fds below this are looked up in a bitmap by close(); above, close()
 * takes the slow path once anything is tracked there. */
#define PA_FDMAP_BITS 1024
#define PA_FDMAP_WORDS (PA_FDMAP_BITS / 64)

struct pa_state {
	/* Held only briefly by any thread: never across I/O or an ioctl. */
	pthread_mutex_t lock;
	/* Held across one timeslice control and its record (taken before
	 * lock, through pa_ts_lock): by the library's thread, and by an
	 * application thread whose SET_TIMESLICE is rewritten
	 * (preempt_timeslice.c says why). */
	pthread_mutex_t ts_lock;
	struct pa_track track;
	struct pa_mem mem; /* video memory (preempt_mem.h); under lock */
	int mem_on;        /* the connection's agent takes MEM_USAGE; under lock */
	int mem_wake_pending; /* the thread was woken for a memory report; under lock */
	struct pa_event queue[PA_QUEUE_LEN];
	unsigned qhead, qlen;
	int q_overflow;   /* events were lost: the thread must resync */
	int connected;    /* events are queued only while connected */
	int wake_pending; /* the eventfd has been written since the last drain */
	unsigned long ctr_queue_overflow;

	/* Set once at initialisation. */
	struct sockaddr_un addr;
	int addr_ok;

	/* Signalled (under lock) when policy_phase leaves PA_POLICY_PENDING. */
	pthread_cond_t policy_cv;
	unsigned policy_wait_ms; /* GPUQOS_POLICY_WAIT_MS; set once at init */
	unsigned long apply_seq, apply_done; /* PA_EV_TSG_APPLY issued / done */

	/* Read without the lock. */
	_Atomic int policy_phase; /* enum pa_policy_phase */
	_Atomic rm_u32 policy_gr_us;
	_Atomic rm_u32 policy_copy_us;
	_Atomic int thread_started;
	_Atomic int evfd; /* the agent thread's wake-up eventfd, or -1 */
	_Atomic int sock; /* the connection to the node agent, or -1 */
	_Atomic int tmpfd; /* a file the agent thread has open briefly, or -1 */
	_Atomic unsigned long fdmap[PA_FDMAP_WORDS];
	_Atomic int fd_big;      /* something is tracked on an fd >= PA_FDMAP_BITS */
	_Atomic int fd_creating; /* the library is creating one of its fds */
};

/* Where the first POLICY of a connection stands. Only PENDING makes an
 * application thread wait (bounded) after creating a TSG. */
enum pa_policy_phase {
	PA_POLICY_IDLE = 0,    /* no connection attempt yet */
	PA_POLICY_PENDING = 1, /* connecting, or connected and POLICY not in */
	PA_POLICY_READY = 2,   /* POLICY received on this connection */
	PA_POLICY_DOWN = 3,    /* no agent, or it was late once: never wait */
};
#define PA_POLICY_WAIT_MS_DEFAULT 50u

extern struct pa_state pa;

/* ---- preempt_core.c ---- */

/* Set the phase and wake application threads waiting for POLICY. */
void pa_policy_phase_set(enum pa_policy_phase ph);

/* The next ioctl/close after this library (the kernel's own calls where
 * none was found), for the library's own calls: set once by the
 * initialisation (pa_real_set), before the library has a thread or an fd.
 * The interposed ioctl() and close() keep their own copies (preempt_ioctl.c:
 * its hot path). */
void pa_real_set(pa_ioctl_fn io, pa_close_fn cl);
pa_ioctl_fn pa_real_ioctl(void);
pa_close_fn pa_real_close_fn(void);
int pa_real_close(int fd);

void pa_lock(void);
void pa_unlock(void);
void pa_fd_mark(int fd);   /* close(fd) must take the slow path; under lock */
void pa_fd_unmark(int fd); /* under lock */
/* Around the creation of one of the library's own fds: close() in other
 * threads waits, so it never closes the new fd before it is marked. */
void pa_own_fd_begin(void);
void pa_own_fd_end(int fd);
void pa_emit(void *ctx, const struct pa_event *ev); /* a pa_emit_fn; ctx: int *wake */
void pa_wake(int wake);    /* after unlocking: tell the thread about new events */
/* Under lock, after the memory counts changed: whether to wake the thread
 * (pa_wake) so that it reports them. */
int pa_mem_wake(void);

/* An absolute CLOCK_REALTIME deadline ms from now, for condition waits. */
void pa_deadline_in(struct timespec *dl, unsigned ms);

/* A detached thread of the library, created with every signal blocked,
 * named `name`; stack 0: the default size. -1 with errno on failure. */
int pa_thread_spawn(void *(*fn)(void *), const char *name, size_t stack);

/* One RM control on fd with the real ioctl (the library's own call, not
 * libcuda's: never tracked or rewritten). Returns 0 or the ioctl's errno;
 * *status gets the RM's status word, *elapsed_ns grows by the time spent. */
rm_u32 pa_rm_control(int fd, rm_handle h_client, rm_handle h_object, rm_u32 cmd, void *params,
		     rm_u32 size, rm_u32 *status, rm_u64 *elapsed_ns);

/* ---- preempt_log.c ---- */
enum pa_log_level {
	PA_LOG_OFF = 0,
	PA_LOG_INFO = 1,
	PA_LOG_DEBUG = 2,
};
extern int pa_log_level;
void pa_log_init(void);
void pa_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define pa_info(...) pa_log(PA_LOG_INFO, __VA_ARGS__)
#define pa_debug(...) pa_log(PA_LOG_DEBUG, __VA_ARGS__)

/* CLOCK_MONOTONIC in nanoseconds. */
rm_u64 pa_now_ns(void);

#endif /* GPUQOS_PREEMPT_H */

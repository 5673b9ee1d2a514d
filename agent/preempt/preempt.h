/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt.h - the state the parts of libgpuqos-preempt.so share: the lock,
 * the tables, the event queue, the policy, and the fds the library owns.
 *
 * Owns: declarations only. preempt_ioctl.c defines the state and the
 * interposed symbols; preempt_conn.c the thread that talks to the node
 * agent; preempt_trace.c the trace file; preempt_log.c stderr logging.
 * Nothing in here is exported from the library.
 */
#ifndef GPUQOS_PREEMPT_H
#define GPUQOS_PREEMPT_H

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <sys/un.h>

#include "abi/gq_proto.h"
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
	 * (preempt_conn.c says why). */
	pthread_mutex_t ts_lock;
	struct pa_track track;
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

/* Set the phase and wake application threads waiting for POLICY. */
void pa_policy_phase_set(enum pa_policy_phase ph);

/* preempt_ioctl.c */
pa_ioctl_fn pa_real_ioctl(void);
int pa_real_close(int fd);
void pa_fd_mark(int fd);   /* close(fd) must take the slow path; under lock */
void pa_fd_unmark(int fd); /* under lock */
/* Around the creation of one of the library's own fds: close() in other
 * threads waits, so it never closes the new fd before it is marked. */
void pa_own_fd_begin(void);
void pa_own_fd_end(int fd);
void pa_emit(void *ctx, const struct pa_event *ev); /* a pa_emit_fn; ctx: int *wake */
void pa_wake(int wake);    /* after unlocking: tell the thread about new events */
/* ts_lock, waited for at most PA_TS_LOCK_WAIT_MS: neither side stalls on
 * a control of the other that does not return; without the lock the race
 * is still seen afterwards (set_seq) and RM asked. Returns 1 if taken;
 * pa_ts_unlock takes that answer. */
#define PA_TS_LOCK_WAIT_MS 50u
int pa_ts_lock(void);
void pa_ts_unlock(int locked);
void pa_lock(void);
void pa_unlock(void);

/* preempt_conn.c */
void pa_conn_start(void);       /* idempotent; on the first RM client */
/* A TSG's set_seq (0 when it is not tracked), taken before a control of
 * the library's thread; then, under pa_ts_lock, pa_ts_accepted records
 * that RM accepted value_us from it (reported now when report, else by
 * the RESULT), or asks RM when an application SET was recorded since. */
unsigned pa_ts_seq(rm_handle h_client, rm_handle h_tsg);
void pa_ts_accepted(int fd, rm_handle h_client, rm_handle h_tsg, unsigned seq, rm_u64 value_us,
		    int report);
void pa_conn_child_reset(void); /* in a forked child: forget thread and fds */
/* A detached thread of the library, created with every signal blocked,
 * named `name`; stack 0: the default size. -1 with errno on failure. */
int pa_thread_spawn(void *(*fn)(void *), const char *name, size_t stack);

/* preempt_launch.c: libcuda's own definition of name, or NULL. */
void *pa_cuda_sym(const char *name);

/* preempt_trace.c */
extern int pa_trace_on;
struct pa_trace_call;
void pa_trace_init(const char *path_template);
void pa_trace_child_reset(void);
int pa_trace_owns(int fd);
struct pa_trace_call *pa_trace_begin(int fd, unsigned long request, enum rm_call_kind kind,
				     void *arg);
void pa_trace_end(struct pa_trace_call *tc, int ret, int err);

/* preempt_log.c */
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

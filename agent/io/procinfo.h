/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procinfo.h - reading another process's /proc files off the event loop.
 *
 * /proc/<pid>/environ sleeps on the target's mm (its mmap lock, its exec);
 * /proc/<pid>/cgroup on the cgroup lock. A process can hold those for as
 * long as it likes (a page fault on a FUSE file that never answers, an
 * exec stopped half way), so procinfo_read runs on worker
 * threads (a common/workq.h pool, as the direct path's) with a deadline,
 * and the answer comes back to the loop through the pool's eventfd. Owns
 * the requests and their deadline; does not own the threads (workq.c),
 * what the facts mean (tsg.c) nor what waits for them (the caller's done
 * function).
 *
 * Threads: every function here runs on the loop thread; the workers only
 * run procinfo_read.
 */
#ifndef GPUQOS_AGENT_PROCINFO_H
#define GPUQOS_AGENT_PROCINFO_H

#include <stdint.h>
#include <sys/types.h>

#include "agent/core/core.h"

#define PROCINFO_WORKERS 2
/* Workers left inside a read past its deadline are replaced, up to this
 * many at once; past it reads fail at once until some return. */
#define PROCINFO_MAX_LOST 8
#define PROCINFO_QUEUE_MAX 256
/* Workers the reads of one uid (one pod in Kubernetes mode) may hold at
 * once, stuck ones included: more wait in the queue (common/workq.h,
 * workq_job_key), so a process that holds its /proc leaves the other
 * workers to other users and pods. */
#define PROCINFO_PER_KEY 1
/* A /proc read takes microseconds; one this late is held by its process. */
#define PROCINFO_DEADLINE_MS 2000u

/* The synchronous readers (any thread). 0, or -1 with errno. */
int procinfo_starttime(pid_t pid, uint64_t *starttime);
int procinfo_read(pid_t pid, struct procinfo *pi);
int procinfo_fd_is(pid_t pid, uint32_t fd, const char *path);
/* agent_hooks.proc_alive: pid runs and started at starttime. */
int procinfo_alive(pid_t pid, uint64_t starttime);

/* On the loop thread, once: pi holds the facts, or pi is NULL and why says
 * in words why there are none (the process is gone, its /proc did not
 * answer within PROCINFO_DEADLINE_MS, the agent is exiting). */
typedef void (*procinfo_done_fn)(struct agent *a, pid_t pid, const struct procinfo *pi,
				 const char *why, void *arg);

int procinfo_async_start(struct agent *a);
/* Queues a read of pid's facts. 0: done will run (never from inside this
 * call). -1: it will not, errno EAGAIN (queue full), EPIPE (every worker
 * is stuck) or EBUSY (a read of pid is stuck: none until it returns); the
 * caller decides what to do without the facts. */
int procinfo_read_async(struct agent *a, pid_t pid, procinfo_done_fn done, void *arg);
/* Why procinfo_read_async refused, in words, from its errno. */
const char *procinfo_refusal(int err);
/* 1 when a read of pid for done (NULL: for anyone) is queued or running:
 * the caller need not ask again. */
int procinfo_pending(const struct agent *a, pid_t pid, procinfo_done_fn done);
/* Every pending read gets done(pi NULL, "agent exiting"); workers stuck in
 * a read are left to finish on their own. */
void procinfo_async_stop(struct agent *a);

struct procinfo_stats {
	unsigned workers, busy, queued, stuck;
	uint64_t reads, timeouts, refused;
};
void procinfo_get_stats(const struct agent *a, struct procinfo_stats *s);

#endif

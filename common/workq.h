/* SPDX-License-Identifier: Apache-2.0 */
/*
 * workq.h - a bounded job queue and a few worker threads that run jobs
 * that may block (an RM control, a /proc read) off the event loop, with
 * finished jobs handed back through one eventfd the loop watches. Owns the
 * threads, the queue, and counting workers lost inside a job whose
 * deadline passed (replaced, up to max_lost at once; past that the queue
 * refuses work until some return), and how many workers one key's jobs
 * may hold (workq_job_key). Does not own deadlines (the caller
 * keeps them and calls workq_expire) nor what a job does or means.
 *
 * Threads: every function here runs on the loop thread (workers inherit
 * its capabilities); the workers only call the run function.
 */
#ifndef GPUQOS_COMMON_WORKQ_H
#define GPUQOS_COMMON_WORKQ_H

#include <stddef.h>

struct workq;

/* Embedded in the caller's job; the queue links it. */
struct workq_job {
	struct workq_job *next; /* private */
	int late; /* its deadline passed while a worker was inside it */
	/* private: its queue, the key workq_job_key gave it, and whether it
	 * goes back to the queue to wait for its key */
	struct workq *q;
	unsigned long long key;
	int keyed, held;
};

struct workq_cfg {
	const char *name; /* in log lines */
	unsigned workers, max_lost, queue_max;
	void (*run)(struct workq_job *j, void *ctx); /* on a worker */
	void *ctx;
	/* Frees a job the caller will never take back (queued or finished at
	 * workq_stop, or finished by a worker after it); any thread. */
	void (*free_job)(struct workq_job *j);
	/* Workers one key may hold at once, lost ones included (0: no bound;
	 * see workq_job_key). */
	unsigned per_key;
};

struct workq_stats {
	unsigned workers; /* live workers not counted lost */
	unsigned busy;    /* of those, inside a job */
	unsigned queued;
	unsigned stuck;   /* lost workers still inside a job */
	int stalled;      /* stuck > max_lost: no new work accepted */
	unsigned long long lost, done, late;
};

/* Starts cfg->workers threads (cfg is copied). NULL with errno. */
struct workq *workq_start(const struct workq_cfg *cfg);
/* Readable when finished jobs wait for workq_take (watch it with loop_add). */
int workq_fd(const struct workq *q);
/* Queues j. 0, or -1 with errno EAGAIN (queue full) or EPIPE (stalled or
 * stopping). Never blocks. */
int workq_submit(struct workq *q, struct workq_job *j);
/* Moves up to max finished jobs to out (oldest finished first), drains
 * the eventfd and replaces workers that left. A job with late set was
 * given up on by workq_expire and is the caller's again only to free. */
size_t workq_take(struct workq *q, struct workq_job **out, size_t max);
/* The deadline of the job match() picks passed. 0: it was still queued and
 * is dropped (*dropped, the caller's again); 1: a worker is inside it
 * (that worker is counted lost and replaced, or the queue stalls; the job
 * comes back late through workq_take); -1: no such job queued or running
 * (it finished meanwhile: workq_take has it). */
int workq_expire(struct workq *q, int (*match)(const struct workq_job *j, const void *key),
		 const void *key, struct workq_job **dropped);
/* On a worker, inside run(j): j's key (a user, a pod: whoever one
 * blocking job may speak for). 0: go on, this worker now counts for the
 * key; -1: cfg.per_key workers already hold it, so run must return at once
 * and j goes back to the head of the queue, taken again only once one of
 * them returns (or dropped there when its deadline passes: workq_expire).
 * One key's stuck jobs thus hold at most per_key workers and never the
 * others' turn. */
int workq_job_key(struct workq_job *j, unsigned long long key);
void workq_get_stats(struct workq *q, struct workq_stats *s);
/* Its `stalled` alone, without a walk of the workers (asked per TSG). */
int workq_stalled(struct workq *q);
/* Stops idle workers (waiting for them), frees the queued and finished
 * jobs with free_job and closes the eventfd; never waits for a worker
 * inside a job: the last one to leave frees the rest. Returns how many
 * workers were inside a job (what their run function uses must outlive
 * them). */
unsigned workq_stop(struct workq *q);

#endif

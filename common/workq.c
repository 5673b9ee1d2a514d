/* SPDX-License-Identifier: Apache-2.0 */
/*
 * workq.c - the worker pool of workq.h: a FIFO of jobs, detached worker
 * threads, a finished list handed to the loop through an eventfd, and the
 * count of workers lost inside a job past its deadline. The memory is
 * reference counted (the loop's reference and one per thread) because a
 * worker stuck in a job may outlive workq_stop.
 */
#include "common/workq.h"
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct worker {
	struct worker *next;
	struct workq *q;
	struct workq_job *job; /* the one it is inside, or NULL */
	int lost;              /* counted lost: leaves after its job returns */
};

struct workq {
	pthread_mutex_t mu;
	pthread_cond_t work, gone;
	struct workq_cfg cfg;
	int efd; /* -1 once stopped: workers no longer write it */
	int stop, stalled;
	unsigned active, stuck, queued, refs;
	unsigned long long lost_total, done, late;
	struct workq_job *qhead, *qtail, *fhead, *ftail;
	struct worker *workers; /* every live thread */
};

static void free_list(struct workq *q, struct workq_job *j)
{
	while (j) {
		struct workq_job *next = j->next;

		q->cfg.free_job(j);
		j = next;
	}
}

/* Drops one reference; the last frees q. Called without q->mu. */
static void unref(struct workq *q)
{
	int last;

	pthread_mutex_lock(&q->mu);
	last = --q->refs == 0;
	pthread_mutex_unlock(&q->mu);
	if (!last)
		return;
	free_list(q, q->qhead);
	free_list(q, q->fhead);
	pthread_cond_destroy(&q->work);
	pthread_cond_destroy(&q->gone);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

/* With q->mu held. */
static void wake_loop(struct workq *q)
{
	uint64_t one = 1;

	/* Only EAGAIN (counter saturated) can fail here: the loop wakes anyway. */
	if (q->efd >= 0 && write(q->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("%s: eventfd write: %s", q->cfg.name, strerror(errno));
}

/* With q->mu held: j is finished, for the loop (or freed after stop). */
static void finish(struct workq *q, struct workq_job *j)
{
	q->done++;
	if (j->late)
		q->late++;
	if (q->stop) {
		q->cfg.free_job(j);
		return;
	}
	j->next = NULL;
	if (q->ftail)
		q->ftail->next = j;
	else
		q->fhead = j;
	q->ftail = j;
	wake_loop(q);
}

static void unlink_worker(struct workq *q, struct worker *w)
{
	for (struct worker **wp = &q->workers; *wp; wp = &(*wp)->next) {
		if (*wp == w) {
			*wp = w->next;
			return;
		}
	}
}

/* With q->mu held: workers inside a job of key, lost ones included,
 * other than skip's. */
static unsigned key_load(const struct workq *q, unsigned long long key, const struct workq_job *skip)
{
	unsigned n = 0;

	for (const struct worker *w = q->workers; w; w = w->next)
		n += w->job && w->job != skip && w->job->keyed && w->job->key == key;
	return n;
}

/* With q->mu held: unlinks and returns the oldest queued job a worker may
 * take (one without a key, or whose key has room), or NULL. */
static struct workq_job *take_next(struct workq *q)
{
	for (struct workq_job **pp = &q->qhead, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
		struct workq_job *j = *pp;

		if (j->keyed && q->cfg.per_key && key_load(q, j->key, NULL) >= q->cfg.per_key)
			continue;
		*pp = j->next;
		if (q->qtail == j)
			q->qtail = prev;
		q->queued--;
		j->next = NULL;
		return j;
	}
	return NULL;
}

/* With q->mu held: j goes back first in line, to wait for its key. */
static void requeue(struct workq *q, struct workq_job *j)
{
	j->held = 0;
	j->next = q->qhead;
	q->qhead = j;
	if (!q->qtail)
		q->qtail = j;
	q->queued++;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct workq *q = w->q;
	sigset_t all;

	/* Signals belong to the loop's signalfd, never to a worker. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&q->mu);
	while (!q->stop) {
		struct workq_job *j = take_next(q);

		if (!j) {
			pthread_cond_wait(&q->work, &q->mu);
			continue;
		}
		w->job = j;
		pthread_mutex_unlock(&q->mu);
		q->cfg.run(j, q->cfg.ctx);
		pthread_mutex_lock(&q->mu);
		w->job = NULL;
		if (j->keyed)
			pthread_cond_broadcast(&q->work); /* its key has room again */
		if (j->held && !j->late && !q->stop && !w->lost) {
			requeue(q, j);
			continue;
		}
		finish(q, j);
		if (w->lost) {
			/* Its replacement already runs: this one leaves. */
			q->stuck--;
			if (q->stalled && q->stuck <= q->cfg.max_lost)
				q->stalled = 0;
			break;
		}
	}
	if (!w->lost)
		q->active--;
	unlink_worker(q, w);
	pthread_cond_broadcast(&q->gone);
	wake_loop(q); /* so the loop replaces it */
	pthread_mutex_unlock(&q->mu);
	free(w);
	unref(q);
	return NULL;
}

/* With q->mu held, on the loop thread (workers inherit its capabilities). */
static int spawn(struct workq *q)
{
	struct worker *w = calloc(1, sizeof(*w));
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	if (!w)
		return -1;
	w->q = q;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &attr, worker_main, w);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		log_error("%s: pthread_create: %s", q->cfg.name, strerror(rc));
		free(w);
		errno = rc;
		return -1;
	}
	w->next = q->workers;
	q->workers = w;
	q->active++;
	q->refs++;
	return 0;
}

/* With q->mu held: back to cfg.workers live workers unless stalled. */
static void refill(struct workq *q)
{
	while (!q->stop && !q->stalled && q->active < q->cfg.workers)
		if (spawn(q) != 0)
			return;
}

struct workq *workq_start(const struct workq_cfg *cfg)
{
	struct workq *q;

	if (cfg->workers == 0) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->cfg = *cfg;
	q->refs = 1;
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->efd < 0) {
		free(q);
		return NULL;
	}
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->work, NULL);
	pthread_cond_init(&q->gone, NULL);
	pthread_mutex_lock(&q->mu);
	refill(q);
	pthread_mutex_unlock(&q->mu);
	if (q->active < cfg->workers) {
		int e = errno;

		workq_stop(q);
		errno = e ? e : EAGAIN;
		return NULL;
	}
	return q;
}

int workq_fd(const struct workq *q)
{
	return q->efd;
}

int workq_submit(struct workq *q, struct workq_job *j)
{
	pthread_mutex_lock(&q->mu);
	if (q->stalled || q->stop || q->active == 0 || q->queued >= q->cfg.queue_max) {
		errno = q->queued >= q->cfg.queue_max && !q->stalled && !q->stop && q->active
			? EAGAIN : EPIPE;
		pthread_mutex_unlock(&q->mu);
		return -1;
	}
	j->next = NULL;
	j->late = 0;
	j->q = q;
	j->key = 0;
	j->keyed = 0;
	j->held = 0;
	if (q->qtail)
		q->qtail->next = j;
	else
		q->qhead = j;
	q->qtail = j;
	q->queued++;
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->mu);
	return 0;
}

size_t workq_take(struct workq *q, struct workq_job **out, size_t max)
{
	uint64_t v;
	size_t n = 0;

	if (read(q->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("%s: eventfd read: %s", q->cfg.name, strerror(errno));
	pthread_mutex_lock(&q->mu);
	while (n < max && q->fhead) {
		struct workq_job *j = q->fhead;

		q->fhead = j->next;
		if (!q->fhead)
			q->ftail = NULL;
		j->next = NULL;
		out[n++] = j;
	}
	if (q->fhead)
		wake_loop(q); /* more than max: come back */
	refill(q);
	pthread_mutex_unlock(&q->mu);
	return n;
}

int workq_expire(struct workq *q, int (*match)(const struct workq_job *j, const void *key),
		 const void *key, struct workq_job **dropped)
{
	int ret = -1;

	*dropped = NULL;
	pthread_mutex_lock(&q->mu);
	for (struct workq_job **pp = &q->qhead, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
		struct workq_job *j = *pp;

		if (!match(j, key))
			continue;
		*pp = j->next;
		if (q->qtail == j)
			q->qtail = prev;
		q->queued--;
		j->next = NULL;
		*dropped = j;
		pthread_mutex_unlock(&q->mu);
		return 0;
	}
	for (struct worker *w = q->workers; w; w = w->next) {
		if (w->lost || !w->job || !match(w->job, key))
			continue;
		w->job->late = 1;
		w->lost = 1;
		q->active--;
		q->stuck++;
		q->lost_total++;
		if (q->stuck > q->cfg.max_lost)
			q->stalled = 1;
		refill(q);
		ret = 1;
		break;
	}
	pthread_mutex_unlock(&q->mu);
	return ret;
}

int workq_job_key(struct workq_job *j, unsigned long long key)
{
	struct workq *q = j->q;
	int rc = 0;

	pthread_mutex_lock(&q->mu);
	j->key = key;
	j->keyed = 1;
	if (q->cfg.per_key && key_load(q, key, j) >= q->cfg.per_key) {
		j->held = 1;
		rc = -1;
	}
	pthread_mutex_unlock(&q->mu);
	return rc;
}

void workq_get_stats(struct workq *q, struct workq_stats *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_lock(&q->mu);
	for (const struct worker *w = q->workers; w; w = w->next) {
		if (!w->lost) {
			s->workers++;
			s->busy += w->job != NULL;
		}
	}
	s->queued = q->queued;
	s->stuck = q->stuck;
	s->stalled = q->stalled;
	s->lost = q->lost_total;
	s->done = q->done;
	s->late = q->late;
	pthread_mutex_unlock(&q->mu);
}

int workq_stalled(struct workq *q)
{
	int stalled;

	pthread_mutex_lock(&q->mu);
	stalled = q->stalled;
	pthread_mutex_unlock(&q->mu);
	return stalled;
}

unsigned workq_stop(struct workq *q)
{
	struct workq_job *queued, *finished;
	unsigned inside = 0;

	if (!q)
		return 0;
	pthread_mutex_lock(&q->mu);
	q->stop = 1;
	pthread_cond_broadcast(&q->work);
	for (;;) {
		unsigned idle = 0;

		inside = 0;
		for (const struct worker *w = q->workers; w; w = w->next) {
			idle += !w->job;
			inside += w->job != NULL;
		}
		if (!idle)
			break;
		pthread_cond_wait(&q->gone, &q->mu);
	}
	queued = q->qhead;
	finished = q->fhead;
	q->qhead = q->qtail = q->fhead = q->ftail = NULL;
	q->queued = 0;
	close(q->efd);
	q->efd = -1;
	pthread_mutex_unlock(&q->mu);
	free_list(q, queued);
	free_list(q, finished);
	unref(q);
	return inside;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * direct.c - the direct control path (direct.h): one RM control on another
 * process's TSG through a pidfd_getfd(2) duplicate of its control-device
 * fd, run by a small pool of worker threads so the event loop never
 * blocks. Owns the duplicate's whole life (it is closed right after the
 * ioctl: while open it would keep the process's RM client, its TSGs and
 * memory alive after the process exits), the queue, and counting workers
 * lost inside a control. Does not own deadlines (cmd.c) or what a result
 * means for a TSG (cmd.c).
 */
#include "agent/io/direct.h"
#include "abi/rm_plan.h"
#include "agent/io/io.h"
#include "agent/io/direct.h"
#include "agent/io/procinfo.h"
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* ---- the control ---- */

__attribute__((format(printf, 4, 5))) static void res_fail(struct direct_res *res,
							   const struct direct_req *r, int err,
							   const char *fmt, ...)
{
	va_list ap;
	int n;

	res->err = err ? (uint32_t)err : EIO;
	n = snprintf(res->why, sizeof(res->why), "pid %d fd %u TSG 0x%x: ", (int)r->pid, r->fd,
		     r->h_tsg);
	if (n < 0 || (size_t)n >= sizeof(res->why))
		return;
	va_start(ap, fmt);
	vsnprintf(res->why + n, sizeof(res->why) - (size_t)n, fmt, ap);
	va_end(ap);
}

/* The duplicate must be the configured control device, and the very file
 * the process holds at that fd (not one it opened after a close). */
static int check_dup(int dup, const char *nvidiactl, const struct direct_req *r,
		     struct direct_res *res)
{
	char link[64], target[4096];
	struct stat ds, ps;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", dup);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0) {
		res_fail(res, r, errno, "readlink of the duplicate: %s", strerror(errno));
		return -1;
	}
	target[n] = '\0';
	if (strcmp(target, nvidiactl) != 0) {
		res_fail(res, r, EBADF, "the fd is %.80s, not the control device %.60s", target,
			 nvidiactl);
		return -1;
	}
	snprintf(link, sizeof(link), "/proc/%d/fd/%u", (int)r->pid, r->fd);
	if (fstat(dup, &ds) != 0 || stat(link, &ps) != 0) {
		res_fail(res, r, errno, "stat of the fd: %s", strerror(errno));
		return -1;
	}
	if (ds.st_dev != ps.st_dev || ds.st_ino != ps.st_ino) {
		res_fail(res, r, EBADF, "the fd changed while it was duplicated");
		return -1;
	}
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* pidfd_open between two reads of the start time: if both match the one
 * recorded with the TSG, the pidfd is that process and not a reuse. */
static int open_pidfd(const struct direct_req *r, struct direct_res *res)
{
	uint64_t st = 0;
	int pidfd;

	if (procinfo_starttime(r->pid, &st) != 0 || st != r->starttime) {
		res_fail(res, r, ESRCH, "the process exited or its pid was reused");
		return -1;
	}
	pidfd = (int)syscall(SYS_pidfd_open, r->pid, 0);
	if (pidfd < 0) {
		res_fail(res, r, errno, "pidfd_open: %s", strerror(errno));
		return -1;
	}
	if (procinfo_starttime(r->pid, &st) != 0 || st != r->starttime) {
		close(pidfd);
		res_fail(res, r, ESRCH, "the pid was reused while its pidfd was opened");
		return -1;
	}
	return pidfd;
}

static int dup_fd(const struct direct_req *r, struct direct_res *res)
{
	int pidfd = open_pidfd(r, res), dup, e;

	if (pidfd < 0)
		return -1;
	dup = (int)syscall(SYS_pidfd_getfd, pidfd, (int)r->fd, 0);
	e = errno;
	close(pidfd);
	if (dup >= 0)
		return dup;
	res_fail(res, r, e, "pidfd_getfd: %s%s", strerror(e),
		 e == EPERM ? " (needs CAP_SYS_PTRACE and ptrace access to the process)" : "");
	return -1;
}

void direct_control(const char *nvidiactl, const struct direct_req *r, struct direct_res *res)
{
	struct rm_control_params p;
	struct rm_plan plan; /* the control the preempt library issues for a COMMAND */
	uint64_t t0;
	int dup, ret, e;

	memset(res, 0, sizeof(*res));
	res->seq = r->seq;
	if (rm_plan_of(r->op, r->arg, &plan) != 0) {
		res_fail(res, r, GQ_ERR_BAD_OP, "op %u arg %llu out of range", r->op,
			 (unsigned long long)r->arg);
		return;
	}
	dup = dup_fd(r, res);
	if (dup < 0)
		return;
	if (check_dup(dup, nvidiactl, r, res) != 0) {
		close(dup);
		return;
	}
	memset(&p, 0, sizeof(p));
	p.hClient = r->h_client;
	p.hObject = r->h_tsg;
	p.cmd = plan.cmd;
	p.params = (rm_u64)(uintptr_t)&plan.params;
	p.paramsSize = plan.params_size;
	t0 = now_ns();
	ret = ioctl(dup, RM_IOCTL_CONTROL, &p);
	e = errno;
	res->elapsed_ns = now_ns() - t0;
	/* At once: the duplicate keeps the client alive past the process. */
	if (close(dup) != 0)
		log_warn("pid %d fd %u: close of the duplicate: %s", (int)r->pid, r->fd, strerror(errno));
	if (ret != 0) {
		res_fail(res, r, e, "ioctl RM control 0x%x: %s", plan.cmd, strerror(e));
		return;
	}
	res->rm_status = p.status;
	if (p.status != RM_OK)
		snprintf(res->why, sizeof(res->why), "pid %d fd %u TSG 0x%x: RM control 0x%x: %s (0x%x)",
			 (int)r->pid, r->fd, r->h_tsg, plan.cmd, rm_status_name(p.status), p.status);
	res->value = rm_plan_value(r->op, r->arg, &plan);
}

/* ---- the worker pool ---- */

struct job {
	struct job *next;
	struct direct_req req;
	struct direct_res res;
	int abandoned; /* its deadline passed while a worker was inside it */
};

struct worker {
	struct direct *d;
	pthread_t th;
	int used;   /* a thread exists (running or not yet joined) */
	int exited; /* it returned: join it */
	int lost;   /* counted lost: leaves after its control returns */
	struct job *job; /* the control it is inside, or NULL */
};

struct direct {
	pthread_mutex_t mu;
	pthread_cond_t work, gone;
	char nvidiactl[4096];
	int efd;
	int stop, stalled;
	unsigned nworkers, max_lost, nslots, active, stuck, queued;
	uint64_t lost_total, done, late;
	struct job *qhead, *qtail, *finished;
	struct worker *slots;
};

static void wake_loop(struct direct *d)
{
	uint64_t one = 1;

	/* Only EAGAIN (counter saturated) can fail here: the loop wakes anyway. */
	if (write(d->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("direct path: eventfd write: %s", strerror(errno));
}

/* Called with d->mu held; returns with it held. */
static void worker_finish(struct direct *d, struct worker *w, struct job *job)
{
	w->job = NULL;
	job->res.late = job->abandoned;
	job->next = d->finished;
	d->finished = job;
	d->done++;
	if (job->abandoned)
		d->late++;
	wake_loop(d);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct direct *d = w->d;
	sigset_t all;

	/* Signals belong to the loop's signalfd, never to a worker. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&d->mu);
	while (!d->stop) {
		struct job *job;

		if (!d->qhead) {
			pthread_cond_wait(&d->work, &d->mu);
			continue;
		}
		job = d->qhead;
		d->qhead = job->next;
		if (!d->qhead)
			d->qtail = NULL;
		d->queued--;
		w->job = job;
		pthread_mutex_unlock(&d->mu);
		direct_control(d->nvidiactl, &job->req, &job->res);
		pthread_mutex_lock(&d->mu);
		worker_finish(d, w, job);
		if (w->lost) {
			/* Its replacement already runs: this one leaves. */
			d->stuck--;
			if (d->stalled && d->stuck <= d->max_lost)
				d->stalled = 0;
			break;
		}
	}
	w->exited = 1;
	pthread_cond_broadcast(&d->gone);
	wake_loop(d); /* so the loop joins it */
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* With d->mu held. Workers inherit the creating thread's capabilities,
 * which is why only the loop thread calls this. */
static int spawn(struct direct *d)
{
	for (unsigned i = 0; i < d->nslots; i++) {
		struct worker *w = &d->slots[i];
		int rc;

		if (w->used)
			continue;
		memset(w, 0, sizeof(*w));
		w->d = d;
		rc = pthread_create(&w->th, NULL, worker_main, w);
		if (rc != 0) {
			log_error("direct path: pthread_create: %s", strerror(rc));
			return -1;
		}
		w->used = 1;
		d->active++;
		return 0;
	}
	return -1;
}

/* With d->mu held: back to nworkers live workers unless stalled. */
static void refill(struct direct *d)
{
	while (!d->stop && !d->stalled && d->active < d->nworkers)
		if (spawn(d) != 0)
			return;
}

struct direct *direct_start(const char *nvidiactl, unsigned workers, unsigned max_lost, char *err,
			    size_t errlen)
{
	struct direct *d = calloc(1, sizeof(*d));

	if (!d || workers == 0) {
		snprintf(err, errlen, "direct path: %s", d ? "no workers" : "out of memory");
		free(d);
		return NULL;
	}
	snprintf(d->nvidiactl, sizeof(d->nvidiactl), "%s", nvidiactl);
	d->nworkers = workers;
	d->max_lost = max_lost;
	d->nslots = workers + max_lost;
	d->slots = calloc(d->nslots, sizeof(*d->slots));
	d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!d->slots || d->efd < 0) {
		snprintf(err, errlen, "direct path: %s", d->slots ? strerror(errno) : "out of memory");
		if (d->efd >= 0)
			close(d->efd);
		free(d->slots);
		free(d);
		return NULL;
	}
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->work, NULL);
	pthread_cond_init(&d->gone, NULL);
	pthread_mutex_lock(&d->mu);
	refill(d);
	pthread_mutex_unlock(&d->mu);
	if (d->active == 0) {
		snprintf(err, errlen, "direct path: no worker thread could be started");
		direct_stop(d);
		return NULL;
	}
	return d;
}

int direct_fd(const struct direct *d)
{
	return d->efd;
}

int direct_submit(struct direct *d, const struct direct_req *r)
{
	struct job *job;

	pthread_mutex_lock(&d->mu);
	if (d->stalled || d->stop || d->queued >= DIRECT_QUEUE_MAX) {
		errno = d->queued >= DIRECT_QUEUE_MAX && !d->stalled ? EAGAIN : EPIPE;
		pthread_mutex_unlock(&d->mu);
		return -1;
	}
	job = calloc(1, sizeof(*job));
	if (!job) {
		pthread_mutex_unlock(&d->mu);
		errno = EAGAIN;
		return -1;
	}
	job->req = *r;
	if (d->qtail)
		d->qtail->next = job;
	else
		d->qhead = job;
	d->qtail = job;
	d->queued++;
	pthread_cond_signal(&d->work);
	pthread_mutex_unlock(&d->mu);
	return 0;
}

/* With d->mu held: collects workers that returned, for joining outside
 * the lock. Returns how many were put in ths. */
static unsigned collect_exited(struct direct *d, pthread_t *ths)
{
	unsigned n = 0;

	for (unsigned i = 0; i < d->nslots; i++) {
		struct worker *w = &d->slots[i];

		if (!w->used || !w->exited)
			continue;
		ths[n++] = w->th;
		if (!w->lost)
			d->active--; /* left on stop, or never counted lost */
		w->used = 0;
	}
	return n;
}

static void join_all(pthread_t *ths, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int rc = pthread_join(ths[i], NULL);

		if (rc != 0)
			log_warn("direct path: pthread_join: %s", strerror(rc));
	}
}

size_t direct_take(struct direct *d, struct direct_res *out, size_t max)
{
	pthread_t ths[DIRECT_WORKERS + DIRECT_MAX_LOST + 8];
	uint64_t v;
	size_t n = 0;
	unsigned nj;

	if (read(d->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("direct path: eventfd read: %s", strerror(errno));
	pthread_mutex_lock(&d->mu);
	while (n < max && d->finished) {
		struct job *job = d->finished;

		d->finished = job->next;
		out[n++] = job->res;
		free(job);
	}
	if (d->finished)
		wake_loop(d); /* more than max: come back */
	nj = d->nslots <= sizeof(ths) / sizeof(ths[0]) ? collect_exited(d, ths) : 0;
	refill(d);
	pthread_mutex_unlock(&d->mu);
	join_all(ths, nj);
	return n;
}

int direct_expire(struct direct *d, uint32_t seq)
{
	int ret = -1;

	pthread_mutex_lock(&d->mu);
	for (struct job **pp = &d->qhead, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
		struct job *job = *pp;

		if (job->req.seq != seq)
			continue;
		*pp = job->next;
		if (d->qtail == job)
			d->qtail = prev;
		d->queued--;
		free(job);
		pthread_mutex_unlock(&d->mu);
		return 0;
	}
	for (unsigned i = 0; i < d->nslots; i++) {
		struct worker *w = &d->slots[i];

		if (!w->used || w->lost || !w->job || w->job->req.seq != seq)
			continue;
		w->job->abandoned = 1;
		w->lost = 1;
		d->active--;
		d->stuck++;
		d->lost_total++;
		if (d->stuck > d->max_lost)
			d->stalled = 1;
		refill(d);
		ret = 1;
		break;
	}
	pthread_mutex_unlock(&d->mu);
	return ret;
}

int direct_is_stalled(struct direct *d)
{
	int stalled;

	pthread_mutex_lock(&d->mu);
	stalled = d->stalled;
	pthread_mutex_unlock(&d->mu);
	return stalled;
}

void direct_get_stats(struct direct *d, struct direct_stats *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_lock(&d->mu);
	for (unsigned i = 0; i < d->nslots; i++) {
		const struct worker *w = &d->slots[i];

		if (w->used && !w->lost && !w->exited) {
			s->workers++;
			s->busy += w->job != NULL;
		}
	}
	s->queued = d->queued;
	s->stuck = d->stuck;
	s->max_lost = d->max_lost;
	s->stalled = d->stalled;
	s->lost = d->lost_total;
	s->done = d->done;
	s->late = d->late;
	pthread_mutex_unlock(&d->mu);
}

static void free_jobs(struct job *j)
{
	while (j) {
		struct job *next = j->next;

		free(j);
		j = next;
	}
}

void direct_stop(struct direct *d)
{
	pthread_t ths[DIRECT_WORKERS + DIRECT_MAX_LOST + 8];
	unsigned nj = 0, inside = 0;

	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	d->stop = 1;
	pthread_cond_broadcast(&d->work);
	for (;;) {
		unsigned idle = 0;

		inside = 0;
		for (unsigned i = 0; i < d->nslots; i++) {
			const struct worker *w = &d->slots[i];

			idle += w->used && !w->exited && !w->job;
			inside += w->used && !w->exited && w->job;
		}
		if (!idle)
			break;
		pthread_cond_wait(&d->gone, &d->mu);
	}
	if (d->nslots <= sizeof(ths) / sizeof(ths[0]))
		nj = collect_exited(d, ths);
	pthread_mutex_unlock(&d->mu);
	join_all(ths, nj);
	if (inside) {
		/* Never wait for a control: the process exits around them, and
		 * they keep d (deliberately not freed). */
		log_warn("direct path: %u worker(s) still inside an RM control at exit", inside);
		return;
	}
	free_jobs(d->qhead);
	free_jobs(d->finished);
	pthread_cond_destroy(&d->work);
	pthread_cond_destroy(&d->gone);
	pthread_mutex_destroy(&d->mu);
	close(d->efd);
	free(d->slots);
	free(d);
}

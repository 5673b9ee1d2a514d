/* SPDX-License-Identifier: Apache-2.0 */
/*
 * direct.c - the direct control path (direct.h): one RM control on another
 * process's TSG through a pidfd_getfd(2) duplicate of its control-device
 * fd, run on a common/workq.h worker pool so the event loop never
 * blocks. Owns the duplicate's whole life (it is closed right after the
 * ioctl: while open it would keep the process's RM client, its TSGs and
 * memory alive after the process exits) and the controls' jobs; the pool
 * owns the threads and counting workers lost inside a control. Does not
 * own deadlines (cmd.c) or what a result means for a TSG (cmd.c).
 */
#include "agent/io/direct.h"
#include "abi/rm_plan.h"
#include "agent/io/io.h"
#include "agent/io/procinfo.h"
#include "common/log.h"
#include "common/workq.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* ---- the worker pool (common/workq.h) ---- */

struct job {
	struct workq_job j; /* first: a workq_job is a job */
	struct direct_req req;
	struct direct_res res;
};

struct direct {
	char nvidiactl[4096];
	unsigned max_lost;
	struct workq *q;
};

static struct job *job_of(struct workq_job *j)
{
	return (struct job *)(void *)j;
}

static void run_job(struct workq_job *j, void *ctx)
{
	struct direct *d = ctx;
	struct job *job = job_of(j);

	direct_control(d->nvidiactl, &job->req, &job->res);
}

static void free_job(struct workq_job *j)
{
	free(job_of(j));
}

struct direct *direct_start(const char *nvidiactl, unsigned workers, unsigned max_lost, char *err,
			    size_t errlen)
{
	struct direct *d = calloc(1, sizeof(*d));
	struct workq_cfg cfg = { "direct path", workers, max_lost, DIRECT_QUEUE_MAX, run_job, d,
				 free_job, 0 };

	if (!d || workers == 0) {
		snprintf(err, errlen, "direct path: %s", d ? "no workers" : "out of memory");
		free(d);
		return NULL;
	}
	snprintf(d->nvidiactl, sizeof(d->nvidiactl), "%s", nvidiactl);
	d->max_lost = max_lost;
	d->q = workq_start(&cfg);
	if (!d->q) {
		snprintf(err, errlen, "direct path: no worker thread could be started: %s",
			 strerror(errno));
		free(d);
		return NULL;
	}
	return d;
}

int direct_fd(const struct direct *d)
{
	return workq_fd(d->q);
}

int direct_submit(struct direct *d, const struct direct_req *r)
{
	struct job *job = calloc(1, sizeof(*job));

	if (!job) {
		errno = EAGAIN;
		return -1;
	}
	job->req = *r;
	if (workq_submit(d->q, &job->j) != 0) {
		int e = errno;

		free(job);
		errno = e;
		return -1;
	}
	return 0;
}

size_t direct_take(struct direct *d, struct direct_res *out, size_t max)
{
	struct workq_job *js[32];
	size_t n = 0;

	while (n < max) {
		size_t want = max - n < 32 ? max - n : 32, got = workq_take(d->q, js, want);

		for (size_t i = 0; i < got; i++) {
			struct job *job = job_of(js[i]);

			job->res.late = js[i]->late;
			out[n++] = job->res;
			free(job);
		}
		if (got < want)
			break;
	}
	return n;
}

static int seq_is(const struct workq_job *j, const void *key)
{
	return ((const struct job *)(const void *)j)->req.seq == *(const uint32_t *)key;
}

int direct_expire(struct direct *d, uint32_t seq)
{
	struct workq_job *dropped;
	int ret = workq_expire(d->q, seq_is, &seq, &dropped);

	free(dropped ? job_of(dropped) : NULL);
	return ret;
}

int direct_is_stalled(struct direct *d)
{
	return workq_stalled(d->q);
}

void direct_get_stats(struct direct *d, struct direct_stats *s)
{
	struct workq_stats ws;

	memset(s, 0, sizeof(*s));
	workq_get_stats(d->q, &ws);
	s->workers = ws.workers;
	s->busy = ws.busy;
	s->queued = ws.queued;
	s->stuck = ws.stuck;
	s->max_lost = d->max_lost;
	s->stalled = ws.stalled;
	s->lost = ws.lost;
	s->done = ws.done;
	s->late = ws.late;
}

void direct_stop(struct direct *d)
{
	unsigned inside;

	if (!d)
		return;
	inside = workq_stop(d->q);
	if (inside) {
		/* Never wait for a control: the process exits around them, and
		 * they read d->nvidiactl (deliberately not freed). */
		log_warn("direct path: %u worker(s) still inside an RM control at exit", inside);
		return;
	}
	free(d);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procinfo.c - facts about a host process read from /proc/<pid>: start
 * time, comm, exe, cgroup path (and the pod UID and container id it
 * names), GPUQOS_RUN_CLASS and GPUQOS_RUN_WINDOWS, and where an fd points;
 * and the worker threads
 * that read them off the event loop with a deadline (procinfo.h), because
 * a process can hold its /proc files for as long as it likes. Does not
 * decide what the facts mean (tsg.c classifies).
 */
#include "agent/io/procinfo.h"
#include "agent/io/io.h"
#include "common/fileio.h"
#include "common/cgroup.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define ENVIRON_MAX (1u << 20)

/* stat: "pid (comm) state ppid ..."; comm may hold spaces and ')', so
 * fields are counted from the last ')'. starttime is field 22. */
static int parse_stat(const char *s, uint64_t *starttime, char *comm, size_t commlen)
{
	const char *open = strchr(s, '('), *close = strrchr(s, ')');
	const char *p;
	int field = 3;

	if (!open || !close || close < open)
		return -1;
	if (comm) {
		size_t n = (size_t)(close - open - 1);

		if (n >= commlen)
			n = commlen - 1;
		memcpy(comm, open + 1, n);
		comm[n] = '\0';
	}
	p = close + 2;
	while (field < 22 && (p = strchr(p, ' ')) != NULL) {
		p++;
		field++;
	}
	if (!p)
		return -1;
	*starttime = strtoull(p, NULL, 10);
	return 0;
}

int procinfo_starttime(pid_t pid, uint64_t *starttime)
{
	char path[64], *s;
	size_t len;
	int rc;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	s = fileio_read_head(path, 4096, &len);
	if (!s)
		return -1;
	rc = parse_stat(s, starttime, NULL, 0);
	free(s);
	return rc;
}

/* The pod and container of a process, from the same text the cgroup
 * path came from (cgroup.h parses every spelling and refuses ambiguity). */
static void cgroup_identity(const char *text, size_t len, struct procinfo *pi)
{
	struct cgroup_info ci;

	if (cgroup_parse(text, len, &ci) < CGROUP_POD_ONLY)
		return;
	snprintf(pi->pod_uid, sizeof(pi->pod_uid), "%s", ci.pod_uid);
	if (ci.kind == CGROUP_CONTAINER)
		snprintf(pi->container_id, sizeof(pi->container_id), "%s", ci.container_id);
}

/* cgroup v2 has one "0::/path" line; on v1 (or hybrid hosts without the
 * process in the v2 tree) the first line's path is as good as any. */
static void read_cgroup(pid_t pid, struct procinfo *pi)
{
	char path[64], *s, *line, *save = NULL, *first = NULL;
	char *out = pi->cgroup;
	size_t len, outlen = sizeof(pi->cgroup);

	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	s = fileio_read_head(path, CGROUP_TEXT_MAX, &len);
	if (!s)
		return;
	cgroup_identity(s, len, pi);
	for (line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!first)
			first = line;
		if (strncmp(line, "0::", 3) == 0) {
			snprintf(out, outlen, "%s", line + 3);
			free(s);
			return;
		}
	}
	if (first) {
		char *p = strchr(first, ':');

		p = p ? strchr(p + 1, ':') : NULL;
		snprintf(out, outlen, "%s", p ? p + 1 : "");
	}
	free(s);
}

/* What `gpuqos run` recorded: GPUQOS_RUN_CLASS and GPUQOS_RUN_WINDOWS
 * (the last of each, as getenv() in the process would not promise). */
static void read_run_env(pid_t pid, struct procinfo *pi)
{
	static const char cls[] = "GPUQOS_RUN_CLASS=", win[] = "GPUQOS_RUN_WINDOWS=";
	char path[64], *s;
	size_t len, i = 0;

	pi->run_class[0] = '\0';
	pi->run_windows[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	s = fileio_read_head(path, ENVIRON_MAX, &len);
	if (!s)
		return;
	while (i < len) {
		const char *e = s + i;
		size_t elen = strnlen(e, len - i);

		if (strncmp(e, cls, sizeof(cls) - 1) == 0)
			snprintf(pi->run_class, sizeof(pi->run_class), "%s", e + sizeof(cls) - 1);
		else if (strncmp(e, win, sizeof(win) - 1) == 0)
			snprintf(pi->run_windows, sizeof(pi->run_windows), "%s", e + sizeof(win) - 1);
		i += elen + 1;
	}
	free(s);
}

int procinfo_read(pid_t pid, struct procinfo *pi)
{
	char path[64], *s;
	size_t len;
	ssize_t n;
	int rc;

	memset(pi, 0, sizeof(*pi));
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	s = fileio_read_head(path, 4096, &len);
	if (!s)
		return -1;
	rc = parse_stat(s, &pi->starttime, pi->comm, sizeof(pi->comm));
	free(s);
	if (rc != 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, pi->exe, sizeof(pi->exe) - 1);
	pi->exe[n > 0 ? n : 0] = '\0';
	read_cgroup(pid, pi);
	read_run_env(pid, pi);
	return 0;
}

int procinfo_alive(pid_t pid, uint64_t starttime)
{
	uint64_t st;

	return procinfo_starttime(pid, &st) == 0 && st == starttime;
}

int procinfo_fd_is(pid_t pid, uint32_t fd, const char *want)
{
	char path[64], target[4096];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%u", (int)pid, fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = '\0';
	return strcmp(target, want) == 0;
}

/* ---- off the loop (procinfo.h) ---- */

enum pi_state { PI_QUEUED, PI_RUNNING, PI_DONE, PI_EXPIRED };

struct pi_req {
	struct pi_req *next;
	pid_t pid;
	procinfo_done_fn done;
	void *arg;
	uint64_t deadline; /* now_us() clock */
	enum pi_state state;
	struct pi_worker *worker; /* while PI_RUNNING */
	int ok, err;
	struct procinfo pi;
};

struct pi_worker {
	struct procinfo_pool *pool;
	int lost; /* past a deadline: it exits once its read returns */
};

/* Shared with the workers under mu: reqs, the counts, stopping, refs. */
struct procinfo_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct pi_req *reqs; /* queued, running and done, oldest first */
	unsigned queued, workers, busy, stuck;
	int stopping;
	unsigned refs; /* the loop's, and one per live thread: the last frees */
	int efd;
	struct loop_watch ev_w; /* the loop's own */
	struct loop_timer timer;
	int timer_armed;
	uint64_t reads, timeouts, refused;
};

static void pi_pool_unref(struct procinfo_pool *pp)
{
	int last;

	pthread_mutex_lock(&pp->mu);
	last = --pp->refs == 0;
	pthread_mutex_unlock(&pp->mu);
	if (!last)
		return;
	for (struct pi_req *r = pp->reqs, *next; r; r = next) {
		next = r->next;
		free(r);
	}
	pthread_cond_destroy(&pp->cv);
	pthread_mutex_destroy(&pp->mu);
	free(pp);
}

static struct pi_req *pi_first_queued(struct procinfo_pool *pp)
{
	for (struct pi_req *r = pp->reqs; r; r = r->next)
		if (r->state == PI_QUEUED)
			return r;
	return NULL;
}

static void pi_unlink(struct procinfo_pool *pp, struct pi_req *r)
{
	for (struct pi_req **rp = &pp->reqs; *rp; rp = &(*rp)->next) {
		if (*rp == r) {
			*rp = r->next;
			return;
		}
	}
}

static void *pi_worker_main(void *arg)
{
	struct pi_worker *w = arg;
	struct procinfo_pool *pp = w->pool;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&pp->mu);
	for (;;) {
		struct pi_req *r;
		uint64_t one = 1;
		int ok, err;

		while (!pp->stopping && !(r = pi_first_queued(pp)))
			pthread_cond_wait(&pp->cv, &pp->mu);
		if (pp->stopping)
			break;
		r->state = PI_RUNNING;
		r->worker = w;
		pp->queued--;
		pp->busy++;
		pthread_mutex_unlock(&pp->mu);
		ok = procinfo_read(r->pid, &r->pi) == 0;
		err = errno;
		pthread_mutex_lock(&pp->mu);
		pp->busy--;
		if (r->state == PI_EXPIRED) {
			free(r); /* the loop answered it already and let go of it */
		} else {
			r->state = PI_DONE;
			r->ok = ok;
			r->err = err;
			if (write(pp->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
				log_warn("procinfo: eventfd: %s", strerror(errno));
		}
		if (w->lost) {
			pp->stuck--;
			break;
		}
	}
	if (!w->lost)
		pp->workers--;
	pthread_mutex_unlock(&pp->mu);
	free(w);
	pi_pool_unref(pp);
	return NULL;
}

/* Under mu. */
static int pi_spawn(struct procinfo_pool *pp)
{
	struct pi_worker *w = calloc(1, sizeof(*w));
	pthread_t th;

	if (!w)
		return -1;
	w->pool = pp;
	pp->refs++;
	pp->workers++;
	if (pthread_create(&th, NULL, pi_worker_main, w) != 0) {
		pp->refs--;
		pp->workers--;
		free(w);
		return -1;
	}
	pthread_detach(th);
	return 0;
}

static void pi_arm(struct procinfo_pool *pp, uint64_t at)
{
	loop_timer_at(&pp->timer, at);
	pp->timer_armed = at != 0;
}

/* Under mu: the earliest deadline of what is still waiting, or 0. */
static uint64_t pi_next_deadline(struct procinfo_pool *pp)
{
	uint64_t next = 0;

	for (struct pi_req *r = pp->reqs; r; r = r->next)
		if ((r->state == PI_QUEUED || r->state == PI_RUNNING) && (!next || r->deadline < next))
			next = r->deadline;
	return next;
}

static void pi_answer(struct agent *a, struct pi_req *r, const char *why)
{
	char buf[160];

	if (r->state == PI_DONE && r->ok) {
		r->done(a, r->pid, &r->pi, NULL, r->arg);
		return;
	}
	if (!why) {
		snprintf(buf, sizeof(buf), "reading /proc/%d: %s", (int)r->pid, strerror(r->err));
		why = buf;
	}
	r->done(a, r->pid, NULL, why, r->arg);
}

static void on_pi_done(struct loop_watch *w, uint32_t events)
{
	struct agent *a = w->ctx;
	struct procinfo_pool *pp = a->io->pi_pool;
	struct pi_req *done = NULL, **tail = &done;
	uint64_t n;

	(void)events;
	if (read(w->fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn("procinfo: eventfd: %s", strerror(errno));
	pthread_mutex_lock(&pp->mu);
	for (struct pi_req **rp = &pp->reqs; *rp;) {
		struct pi_req *r = *rp;

		if (r->state != PI_DONE) {
			rp = &r->next;
			continue;
		}
		*rp = r->next;
		r->next = NULL;
		*tail = r;
		tail = &r->next;
	}
	pthread_mutex_unlock(&pp->mu);
	while (done) {
		struct pi_req *r = done;

		done = r->next;
		pp->reads++;
		pi_answer(a, r, NULL);
		free(r);
	}
}

/* Under mu: takes r from the pool for the loop to answer. A running one
 * stays the worker's to free; that worker is lost and replaced. */
static struct pi_req *pi_take(struct procinfo_pool *pp, struct pi_req *r)
{
	struct pi_req *copy;

	pi_unlink(pp, r);
	if (r->state == PI_QUEUED) {
		pp->queued--;
		return r;
	}
	/* Not a copy of all of r: the worker is writing r->pi right now. */
	copy = calloc(1, sizeof(*copy));
	if (copy) {
		copy->pid = r->pid;
		copy->done = r->done;
		copy->arg = r->arg;
		copy->state = PI_EXPIRED;
	}
	r->state = PI_EXPIRED;
	r->worker->lost = 1;
	pp->workers--;
	pp->stuck++;
	if (pp->stuck <= PROCINFO_MAX_LOST && !pp->stopping && pi_spawn(pp) != 0)
		log_error("procinfo: cannot start a worker: %s", strerror(errno));
	return copy;
}

static void on_pi_timer(struct loop_timer *timer)
{
	struct agent *a = timer->ctx;
	struct procinfo_pool *pp = a->io->pi_pool;
	struct pi_req *late = NULL;
	uint64_t now = now_us(), next;
	char why[160];

	pthread_mutex_lock(&pp->mu);
	for (struct pi_req *r = pp->reqs, *next_r; r; r = next_r) {
		struct pi_req *t;

		next_r = r->next;
		if ((r->state != PI_QUEUED && r->state != PI_RUNNING) || r->deadline > now)
			continue;
		t = pi_take(pp, r);
		if (t) {
			t->next = late;
			late = t;
		}
	}
	next = pi_next_deadline(pp);
	pthread_mutex_unlock(&pp->mu);
	pp->timer_armed = 0;
	if (next)
		pi_arm(pp, next);
	while (late) {
		struct pi_req *r = late;

		late = r->next;
		pp->timeouts++;
		snprintf(why, sizeof(why), "/proc/%d did not answer within %u ms (the process holds it)",
			 (int)r->pid, PROCINFO_DEADLINE_MS);
		r->state = PI_EXPIRED;
		pi_answer(a, r, why);
		free(r);
	}
}

int procinfo_read_async(struct agent *a, pid_t pid, procinfo_done_fn done, void *arg)
{
	struct procinfo_pool *pp = a->io->pi_pool;
	struct pi_req *r;

	if (!pp) {
		errno = EPIPE;
		return -1;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -1;
	r->pid = pid;
	r->done = done;
	r->arg = arg;
	r->deadline = now_us() + PROCINFO_DEADLINE_MS * 1000ull;
	pthread_mutex_lock(&pp->mu);
	if (pp->queued >= PROCINFO_QUEUE_MAX || pp->workers == 0) {
		errno = pp->workers == 0 ? EPIPE : EAGAIN;
		pp->refused++;
		pthread_mutex_unlock(&pp->mu);
		free(r);
		return -1;
	}
	/* Oldest first: appended. */
	{
		struct pi_req **rp = &pp->reqs;

		while (*rp)
			rp = &(*rp)->next;
		*rp = r;
	}
	pp->queued++;
	pthread_cond_signal(&pp->cv);
	pthread_mutex_unlock(&pp->mu);
	if (!pp->timer_armed)
		pi_arm(pp, r->deadline);
	return 0;
}

int procinfo_async_start(struct agent *a)
{
	struct procinfo_pool *pp = calloc(1, sizeof(*pp));

	if (!pp)
		return -1;
	pthread_mutex_init(&pp->mu, NULL);
	pthread_cond_init(&pp->cv, NULL);
	pp->refs = 1;
	pp->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	pp->timer.w.fd = -1;
	a->io->pi_pool = pp;
	if (pp->efd < 0) {
		log_error("procinfo: eventfd: %s", strerror(errno));
		return -1;
	}
	pp->ev_w.fd = pp->efd;
	pp->ev_w.fn = on_pi_done;
	pp->ev_w.ctx = a;
	if (loop_add(&a->io->loop, &pp->ev_w, EPOLLIN) != 0 ||
	    loop_timer_add(&a->io->loop, &pp->timer, "procinfo", on_pi_timer, a) != 0)
		return -1;
	pthread_mutex_lock(&pp->mu);
	for (unsigned i = 0; i < PROCINFO_WORKERS; i++) {
		if (pi_spawn(pp) != 0) {
			pthread_mutex_unlock(&pp->mu);
			log_error("procinfo: cannot start a worker: %s", strerror(errno));
			return -1;
		}
	}
	pthread_mutex_unlock(&pp->mu);
	return 0;
}

void procinfo_async_stop(struct agent *a)
{
	struct procinfo_pool *pp = a->io->pi_pool;
	struct pi_req *left = NULL;

	if (!pp)
		return;
	a->io->pi_pool = NULL;
	pthread_mutex_lock(&pp->mu);
	pp->stopping = 1;
	while (pp->reqs) {
		struct pi_req *r = pp->reqs, *t;

		if (r->state == PI_DONE) {
			pi_unlink(pp, r);
			t = r;
		} else {
			t = pi_take(pp, r);
		}
		if (t) {
			t->next = left;
			left = t;
		}
	}
	pthread_cond_broadcast(&pp->cv);
	pthread_mutex_unlock(&pp->mu);
	while (left) {
		struct pi_req *r = left;

		left = r->next;
		r->state = PI_EXPIRED;
		pi_answer(a, r, "the agent is exiting");
		free(r);
	}
	if (pp->ev_w.fd >= 0)
		loop_del(&a->io->loop, &pp->ev_w);
	loop_timer_del(&pp->timer);
	/* Workers write the eventfd only for a request still pending: none is. */
	close(pp->efd);
	pi_pool_unref(pp);
}

int procinfo_pending(const struct agent *a, pid_t pid, procinfo_done_fn done)
{
	struct procinfo_pool *pp = a->io->pi_pool;
	int found = 0;

	if (!pp)
		return 0;
	pthread_mutex_lock(&pp->mu);
	for (struct pi_req *r = pp->reqs; r && !found; r = r->next)
		found = r->pid == pid && (!done || r->done == done) &&
			(r->state == PI_QUEUED || r->state == PI_RUNNING);
	pthread_mutex_unlock(&pp->mu);
	return found;
}

void procinfo_get_stats(const struct agent *a, struct procinfo_stats *s)
{
	struct procinfo_pool *pp = a->io->pi_pool;

	memset(s, 0, sizeof(*s));
	if (!pp)
		return;
	pthread_mutex_lock(&pp->mu);
	s->workers = pp->workers;
	s->busy = pp->busy;
	s->queued = pp->queued;
	s->stuck = pp->stuck;
	pthread_mutex_unlock(&pp->mu);
	s->reads = pp->reads;
	s->timeouts = pp->timeouts;
	s->refused = pp->refused;
}

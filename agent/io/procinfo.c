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
#include "common/procstat.h"
#include "common/log.h"
#include "common/workq.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define ENVIRON_MAX (1u << 20)

int procinfo_starttime(pid_t pid, uint64_t *starttime)
{
	return procstat_starttime(pid, starttime);
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

/* Everything but the environment: stat, exe and cgroup, none of which
 * waits on the process's memory map (environ does). */
static int procinfo_read_ids(pid_t pid, struct procinfo *pi)
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
	rc = procstat_parse(s, &pi->starttime, pi->comm, sizeof(pi->comm));
	free(s);
	if (rc != 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, pi->exe, sizeof(pi->exe) - 1);
	pi->exe[n > 0 ? n : 0] = '\0';
	read_cgroup(pid, pi);
	return 0;
}

int procinfo_read(pid_t pid, struct procinfo *pi)
{
	if (procinfo_read_ids(pid, pi) != 0)
		return -1;
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

/* ---- off the loop (procinfo.h), on a common/workq.h pool ---- */

/* A read asked for. The loop thread alone touches everything but pi, ok
 * and err, which the worker writes and the loop reads once the pool
 * hands the job back. */
struct pi_req {
	struct workq_job j; /* first: a workq_job is a request */
	struct pi_req *next; /* pending, oldest first */
	pid_t pid;
	procinfo_done_fn done;
	void *arg;
	uint64_t deadline; /* now_us() clock */
	int finished; /* the pool handed it back: answer with its result */
	int ok, err;
	/* Worker side: its ids are read (pi but the environment), the key
	 * they give (its pod's or its uid's, key_pod says which), and held:
	 * it waits in the queue for its key (read by the loop only once the
	 * pool dropped it from the queue). */
	int have_ids, key_pod, held;
	unsigned long long key;
	struct pi_req *stuck_next; /* in pool.stuck while a worker is inside it late */
	struct procinfo pi;
};

struct procinfo_pool {
	struct workq *q;
	int by_pod; /* Kubernetes mode: reads are keyed by pod, not uid (pi_key) */
	struct pi_req *reqs; /* pending (queued or running), oldest first */
	/* Answered when their deadline passed, a worker still inside: their
	 * processes get no other read until it returns. */
	struct pi_req *stuck;
	struct loop_watch ev_w; /* the loop's own, on the pool's eventfd */
	struct loop_timer timer;
	int timer_armed;
	uint64_t reads, timeouts, refused;
};

static struct pi_req *req_of(struct workq_job *j)
{
	return (struct pi_req *)(void *)j;
}

/* The effective uid in /proc/<pid>/status (its files' owner is root for
 * a process that made itself undumpable); 2^32 - 1 when unreadable. */
static unsigned long long proc_euid(pid_t pid)
{
	char path[64], *s, *u;
	unsigned long long uid = 0xffffffffull;
	unsigned real, eff;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	s = fileio_read_head(path, 4096, NULL);
	if (!s)
		return uid;
	u = strstr(s, "\nUid:");
	if (u && sscanf(u + 5, "%u %u", &real, &eff) == 2)
		uid = eff;
	free(s);
	return uid;
}

/* Whom a read speaks for: its pod in Kubernetes mode (a process in no pod:
 * its uid), its uid standalone. The two kinds never meet (top bit). */
static unsigned long long pi_key(const struct procinfo_pool *pp, struct pi_req *r)
{
	unsigned long long h = 1469598103934665603ull; /* FNV-1a */

	if (pp->by_pod && r->pi.pod_uid[0]) {
		for (const char *c = r->pi.pod_uid; *c; c++)
			h = (h ^ (unsigned char)*c) * 1099511628211ull;
		r->key_pod = 1;
		return h & ~(1ull << 63);
	}
	r->key_pod = 0;
	return (1ull << 63) | proc_euid(r->pid);
}

/* On a worker. The environment waits on the process's memory map, which
 * it can hold for ever: read only while its key holds no other worker
 * (PROCINFO_PER_KEY), so one user's or pod's stuck reads leave the other
 * workers to everyone else. */
static void pi_run(struct workq_job *j, void *ctx)
{
	struct pi_req *r = req_of(j);

	r->held = 0;
	if (!r->have_ids) {
		r->ok = procinfo_read_ids(r->pid, &r->pi) == 0;
		r->err = errno;
		if (!r->ok)
			return;
		r->have_ids = 1;
		r->key = pi_key(ctx, r);
	}
	if (workq_job_key(j, r->key) != 0) {
		r->held = 1;
		return;
	}
	read_run_env(r->pid, &r->pi);
}

static void pi_free(struct workq_job *j)
{
	free(req_of(j));
}

static void pi_unlink(struct procinfo_pool *pp, struct pi_req *r)
{
	for (struct pi_req **rp = &pp->reqs; *rp; rp = &(*rp)->next) {
		if (*rp == r) {
			*rp = r->next;
			r->next = NULL;
			return;
		}
	}
}

static void pi_arm(struct procinfo_pool *pp, uint64_t at)
{
	loop_timer_at(&pp->timer, at);
	pp->timer_armed = at != 0;
}

/* The earliest deadline of what is still waiting, or 0. */
static uint64_t pi_next_deadline(struct procinfo_pool *pp)
{
	uint64_t next = 0;

	for (struct pi_req *r = pp->reqs; r; r = r->next)
		if (!r->finished && (!next || r->deadline < next))
			next = r->deadline;
	return next;
}

/* why: the answer without facts; NULL answers with what the worker read. */
static void pi_answer(struct agent *a, struct pi_req *r, const char *why)
{
	char buf[160];

	if (!why && r->ok) {
		r->done(a, r->pid, &r->pi, NULL, r->arg);
		return;
	}
	if (!why) {
		snprintf(buf, sizeof(buf), "reading /proc/%d: %s", (int)r->pid, strerror(r->err));
		why = buf;
	}
	r->done(a, r->pid, NULL, why, r->arg);
}

/* Takes what the workers finished and answers it. */
static void pi_deliver(struct agent *a)
{
	struct procinfo_pool *pp = a->io->pi_pool;
	struct pi_req *done = NULL, **tail = &done;
	struct workq_job *js[32];
	size_t n;

	do {
		n = workq_take(pp->q, js, sizeof(js) / sizeof(js[0]));
		for (size_t i = 0; i < n; i++) {
			struct pi_req *r = req_of(js[i]);

			if (!js[i]->late) {
				r->finished = 1;
				continue;
			}
			/* Answered when its deadline passed; its process may be
			 * read again. */
			for (struct pi_req **sp = &pp->stuck; *sp; sp = &(*sp)->stuck_next)
				if (*sp == r) {
					*sp = r->stuck_next;
					break;
				}
			free(r);
		}
	} while (n == sizeof(js) / sizeof(js[0]));
	/* Answered in the order asked; done functions may ask again. */
	for (struct pi_req **rp = &pp->reqs; *rp;) {
		struct pi_req *r = *rp;

		if (!r->finished) {
			rp = &r->next;
			continue;
		}
		*rp = r->next;
		r->next = NULL;
		*tail = r;
		tail = &r->next;
	}
	while (done) {
		struct pi_req *r = done;

		done = r->next;
		pp->reads++;
		pi_answer(a, r, NULL);
		free(r);
	}
}

static void on_pi_done(struct loop_watch *w, uint32_t events)
{
	(void)events;
	pi_deliver(w->ctx);
}

static int pi_is(const struct workq_job *j, const void *key)
{
	return (const void *)j == key;
}

static void on_pi_timer(struct loop_timer *timer)
{
	struct agent *a = timer->ctx;
	struct procinfo_pool *pp = a->io->pi_pool;
	struct pi_req *late = NULL;
	uint64_t now = now_us(), next;
	char why[160];

	/* What finished before its deadline is answered with its facts. */
	pi_deliver(a);
	for (struct pi_req *r = pp->reqs, *next_r; r; r = next_r) {
		struct workq_job *dropped;
		int rc;

		next_r = r->next;
		if (r->finished || r->deadline > now)
			continue;
		/* 0: dropped from the queue, ours to free; 1: a worker is inside
		 * it (lost and replaced) and frees it through on_pi_done; -1:
		 * it finished meanwhile and on_pi_done answers it. */
		rc = workq_expire(pp->q, pi_is, r, &dropped);
		if (rc < 0)
			continue;
		pi_unlink(pp, r);
		r->finished = rc == 0; /* here: free after answering */
		if (rc == 1) {
			r->stuck_next = pp->stuck;
			pp->stuck = r;
		}
		r->next = late;
		late = r;
	}
	next = pi_next_deadline(pp);
	pp->timer_armed = 0;
	if (next)
		pi_arm(pp, next);
	while (late) {
		struct pi_req *r = late;
		int mine = r->finished;

		late = r->next;
		pp->timeouts++;
		/* held is the worker's, but a job dropped from the queue
		 * (mine) has no worker any more. */
		if (mine && r->held)
			snprintf(why, sizeof(why), "/proc/%d not read within %u ms: a read for its %s "
				 "is stuck", (int)r->pid, PROCINFO_DEADLINE_MS,
				 r->key_pod ? "pod" : "uid");
		else
			snprintf(why, sizeof(why), "/proc/%d did not answer within %u ms (the process "
				 "holds it)", (int)r->pid, PROCINFO_DEADLINE_MS);
		pi_answer(a, r, why);
		if (mine)
			free(r);
	}
}

int procinfo_read_async(struct agent *a, pid_t pid, procinfo_done_fn done, void *arg)
{
	struct procinfo_pool *pp = a->io->pi_pool;
	struct pi_req *r, **rp;

	if (!pp || !pp->q) {
		errno = EPIPE;
		return -1;
	}
	for (const struct pi_req *st = pp->stuck; st; st = st->stuck_next) {
		if (st->pid == pid) {
			pp->refused++;
			errno = EBUSY;
			return -1;
		}
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -1;
	r->pid = pid;
	r->done = done;
	r->arg = arg;
	r->deadline = now_us() + PROCINFO_DEADLINE_MS * 1000ull;
	if (workq_submit(pp->q, &r->j) != 0) {
		int e = errno;

		pp->refused++;
		free(r);
		errno = e;
		return -1;
	}
	/* Oldest first: appended. */
	for (rp = &pp->reqs; *rp; rp = &(*rp)->next)
		;
	*rp = r;
	if (!pp->timer_armed)
		pi_arm(pp, r->deadline);
	return 0;
}

const char *procinfo_refusal(int err)
{
	switch (err) {
	case EPIPE:
		return "every reader is stuck";
	case EBUSY:
		return "an earlier read of it is stuck";
	default:
		return "too many waiting";
	}
}

int procinfo_async_start(struct agent *a)
{
	struct procinfo_pool *pp = calloc(1, sizeof(*pp));
	struct workq_cfg cfg = { "procinfo", PROCINFO_WORKERS, PROCINFO_MAX_LOST, PROCINFO_QUEUE_MAX,
				 pi_run, pp, pi_free, PROCINFO_PER_KEY };

	if (!pp)
		return -1;
	pp->by_pod = !a->opt.standalone;
	pp->timer.w.fd = -1;
	pp->ev_w.fd = -1;
	a->io->pi_pool = pp;
	pp->q = workq_start(&cfg);
	if (!pp->q) {
		log_error("procinfo: cannot start the workers: %s", strerror(errno));
		return -1;
	}
	pp->ev_w.fn = on_pi_done;
	pp->ev_w.ctx = a;
	if (loop_timer_add(&a->io->loop, &pp->timer, "procinfo", on_pi_timer, a) != 0)
		return -1;
	pp->ev_w.fd = workq_fd(pp->q);
	if (loop_add(&a->io->loop, &pp->ev_w, EPOLLIN) != 0) {
		pp->ev_w.fd = -1;
		return -1;
	}
	return 0;
}

void procinfo_async_stop(struct agent *a)
{
	struct procinfo_pool *pp = a->io->pi_pool;
	struct pi_req *left;

	if (!pp)
		return;
	a->io->pi_pool = NULL;
	left = pp->reqs;
	pp->reqs = NULL;
	pp->stuck = NULL; /* the pool's: freed by their workers */
	/* Every pending request is still the pool's (queued or running):
	 * answered here, freed by workq_stop or by its worker. */
	while (left) {
		struct pi_req *r = left;

		left = r->next;
		pi_answer(a, r, "the agent is exiting");
	}
	if (pp->ev_w.fd >= 0)
		loop_del(&a->io->loop, &pp->ev_w);
	loop_timer_del(&pp->timer);
	workq_stop(pp->q); /* closes the eventfd; never waits for a stuck read */
	free(pp);
}

int procinfo_pending(const struct agent *a, pid_t pid, procinfo_done_fn done)
{
	const struct procinfo_pool *pp = a->io->pi_pool;

	if (!pp)
		return 0;
	for (const struct pi_req *r = pp->reqs; r; r = r->next)
		if (r->pid == pid && (!done || r->done == done) && !r->finished)
			return 1;
	return 0;
}

void procinfo_get_stats(const struct agent *a, struct procinfo_stats *s)
{
	struct procinfo_pool *pp = a->io->pi_pool;
	struct workq_stats ws;

	memset(s, 0, sizeof(*s));
	if (!pp || !pp->q)
		return;
	workq_get_stats(pp->q, &ws);
	s->workers = ws.workers;
	s->busy = ws.busy;
	s->queued = ws.queued;
	s->stuck = ws.stuck;
	s->reads = pp->reads;
	s->timeouts = pp->timeouts;
	s->refused = pp->refused;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuinfo.c - device instance -> GPU UUID and PCI bus id (gpuinfo.h).
 *
 * Owns: the worker thread that runs the query (common/rmgpus.c), the
 * deadline around it, and the agent's copy of the table. Does not own the TSG table or the ctl socket; it
 * answers lookups and builds JSON for them. Controls and layouts:
 * docs/gpuinfo.md.
 */
#include "agent/io/gpuinfo.h"
#include "agent/core/core.h"
#include "common/log.h"
#include "common/loop.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void add_str_or_null(cJSON *o, const char *k, const char *v)
{
	if (v[0])
		cJSON_AddStringToObject(o, k, v);
	else
		cJSON_AddNullToObject(o, k);
}

cJSON *gpuinfo_table_json(const struct gpuinfo_table *t)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr && i < t->n; i++) {
		const struct gpuinfo_gpu *g = &t->gpus[i];
		cJSON *o = cJSON_CreateObject();
		char id[16];

		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			cJSON_Delete(arr);
			return NULL;
		}
		snprintf(id, sizeof(id), "0x%x", g->gpu_id);
		cJSON_AddNumberToObject(o, "deviceInstance", g->device_instance);
		cJSON_AddNumberToObject(o, "subDeviceInstance", g->subdevice_instance);
		cJSON_AddStringToObject(o, "gpuId", id);
		add_str_or_null(o, "uuid", g->uuid);
		add_str_or_null(o, "pciBusId", g->pci_bus_id);
		if (g->status)
			cJSON_AddStringToObject(o, "error", gpuinfo_status_name(g->status));
		if (g->fb_heap_bytes)
			cJSON_AddNumberToObject(o, "memoryBytes", (double)g->fb_heap_bytes);
		else
			cJSON_AddNullToObject(o, "memoryBytes");
		if (g->fb_error[0])
			cJSON_AddStringToObject(o, "memoryError", g->fb_error);
	}
	return arr;
}

/* ---- running it off the loop ---- */

/* One query in flight. The worker and the loop each hold a reference;
 * the last one frees it, so a worker stuck in the RM past the agent's
 * interest (or its exit) cleans up after itself. */
struct gpuinfo_job {
	pthread_mutex_t mu;
	int refs;
	int done;
	int efd; /* written once the table is filled */
	char dev[4096];
	struct gpuinfo_table table;
};

static struct {
	struct agent *agent; /* told each GPU's memory size (memory_gpu_size) */
	struct loop *loop;
	char dev[4096];
	struct loop_watch job_w;   /* the running job's eventfd */
	struct loop_timer timer; /* its deadline, or the next retry */
	struct gpuinfo_job *job;   /* the running query, or NULL */
	uint64_t job_started_us;
	int job_late;      /* it passed its deadline and is still inside the RM */
	int again;         /* asked for while one ran: run once more after it */
	struct gpuinfo_table table;
	unsigned generation; /* tables taken (gpuinfo_generation) */
	char last_error[256];
	uint64_t last_unknown_us;
} g = { .job_w = { .fd = -1 }, .timer = { .w = { .fd = -1 } } };

static void job_put(struct gpuinfo_job *j)
{
	int last;

	pthread_mutex_lock(&j->mu);
	last = --j->refs == 0;
	pthread_mutex_unlock(&j->mu);
	if (!last)
		return;
	if (j->efd >= 0)
		close(j->efd);
	pthread_mutex_destroy(&j->mu);
	free(j);
}

static void *job_main(void *arg)
{
	struct gpuinfo_job *j = arg;
	uint64_t one = 1;

	(void)gpuinfo_query(j->dev, GPUINFO_Q_MEMORY, &j->table); /* the result says how it went */
	pthread_mutex_lock(&j->mu);
	j->done = 1;
	/* Under the lock: the loop's reference (and the eventfd) cannot go
	 * between the check and the write. */
	if (j->refs == 2 && write(j->efd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		j->done = -1; /* only EAGAIN is possible: the loop wakes anyway */
	pthread_mutex_unlock(&j->mu);
	job_put(j);
	return NULL;
}

/* 0 ms disarms. */
static void timer_arm(uint32_t ms)
{
	if (g.timer.w.fd >= 0)
		loop_timer_after(&g.timer, (uint64_t)ms * 1000u);
}

static void on_job(struct loop_watch *w, uint32_t events);

static struct gpuinfo_job *job_new(void)
{
	struct gpuinfo_job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	if (pthread_mutex_init(&j->mu, NULL) != 0) {
		free(j);
		return NULL;
	}
	j->refs = 2;
	snprintf(j->dev, sizeof(j->dev), "%s", g.dev);
	j->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (j->efd < 0) {
		j->refs = 1;
		job_put(j);
		return NULL;
	}
	return j;
}

/* A detached worker with every signal blocked: signals are the loop's. */
static int job_spawn(struct gpuinfo_job *j)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	if ((rc = pthread_attr_init(&attr)) != 0)
		return rc;
	if ((rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED)) == 0) {
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		rc = pthread_create(&th, &attr, job_main, j);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_attr_destroy(&attr);
	return rc;
}

static void start_query(const char *why)
{
	struct gpuinfo_job *j;
	int rc;

	if (g.job) {
		g.again = 1;
		return;
	}
	j = job_new();
	if (!j) {
		log_error("GPU table: cannot start a query (%s): out of memory or fds", why);
		timer_arm(GPUINFO_RETRY_MS);
		return;
	}
	g.job_w.fd = j->efd;
	g.job_w.fn = on_job;
	g.job_w.ctx = NULL;
	if (loop_add(g.loop, &g.job_w, EPOLLIN) != 0) {
		g.job_w.fd = -1;
		j->refs = 1;
		job_put(j);
		timer_arm(GPUINFO_RETRY_MS);
		return;
	}
	if ((rc = job_spawn(j)) != 0) {
		log_error("GPU table: cannot start the query thread (%s): %s", why, strerror(rc));
		loop_del(g.loop, &g.job_w);
		j->refs = 1;
		job_put(j);
		timer_arm(GPUINFO_RETRY_MS);
		return;
	}
	g.job = j;
	g.job_late = 0;
	g.job_started_us = now_us();
	log_debug("GPU table: querying %s (%s)", g.dev, why);
	timer_arm(GPUINFO_QUERY_TIMEOUT_MS);
}

/* A failure is logged once as an error; the same one again only at debug
 * (no driver on this node would otherwise log every retry). */
static void log_failure(const char *error)
{
	if (strcmp(error, g.last_error) == 0) {
		log_debug("GPU table: still failing: %s", error);
		return;
	}
	snprintf(g.last_error, sizeof(g.last_error), "%s", error);
	log_error("GPU table: %s; UUIDs of GPUs not listed stay unknown", error);
}

/* The core's facts of each GPU's video memory from a complete list: a
 * GPU no longer listed is forgotten. */
static void push_sizes(const struct gpuinfo_table *t)
{
	if (!g.agent)
		return;
	for (uint32_t gpu = 0; gpu < MEM_GPU_MAX; gpu++) {
		const struct gpuinfo_gpu *x = gpuinfo_table_find(t, gpu);

		memory_gpu_size(g.agent, gpu, x != NULL, x ? x->fb_heap_bytes : 0);
	}
}

/* A complete list replaces the table; a failed one keeps what was known
 * (device instances do not change while the driver stays loaded). */
static void apply(const struct gpuinfo_table *t, uint64_t took_us)
{
	if (t->listed) {
		g.table = *t;
		g.generation++;
		for (size_t i = 0; i < t->n; i++) {
			const struct gpuinfo_gpu *x = &t->gpus[i];
			log_info("GPU device instance %u: %s, PCI %s, gpuId 0x%x, video memory %llu MiB",
				 x->device_instance, x->uuid[0] ? x->uuid : "UUID unknown",
				 x->pci_bus_id[0] ? x->pci_bus_id : "unknown", x->gpu_id,
				 (unsigned long long)(x->fb_heap_bytes >> 20));
			if (!x->fb_heap_bytes)
				log_warn("GPU device instance %u: its video-memory size is not known "
					 "(%s): no LC reserve is kept on it",
					 x->device_instance, x->fb_error[0] ? x->fb_error : "no answer");
		}
		push_sizes(t);
		log_info("GPU table: %zu GPU(s) from %s in %llu us", t->n, g.dev,
			 (unsigned long long)took_us);
	}
	if (t->error[0]) {
		log_failure(t->error);
		timer_arm(GPUINFO_RETRY_MS);
	} else {
		g.last_error[0] = '\0';
	}
}

/* Take the finished job's table; the caller saw its eventfd fire (or
 * polled it at start-up). 0 if it was done. */
static int take_job(void)
{
	struct gpuinfo_job *j = g.job;
	uint64_t v;
	int done;

	pthread_mutex_lock(&j->mu);
	done = j->done;
	pthread_mutex_unlock(&j->mu);
	if (!done)
		return -1;
	if (read(j->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("GPU table: eventfd read: %s", strerror(errno));
	if (g.job_late)
		log_warn("GPU table: the query given up on answered after %llu ms",
			 (unsigned long long)((now_us() - g.job_started_us) / 1000u));
	timer_arm(0);
	/* The worker is done with the table: it set done under the lock. */
	apply(&j->table, now_us() - g.job_started_us);
	loop_del(g.loop, &g.job_w);
	g.job = NULL;
	job_put(j);
	if (g.again) {
		g.again = 0;
		start_query("asked for while the last one ran");
	}
	return 0;
}

static void on_job(struct loop_watch *w, uint32_t events)
{
	(void)w;
	(void)events;
	if (g.job)
		(void)take_job(); /* not done yet: a spurious wake-up */
}

/* The deadline of a running query, or the retry after a failure. A query
 * past its deadline is left to finish (one stuck worker at most): a new
 * one would only get stuck behind the same RM call. */
static void on_timer(struct loop_timer *t)
{
	(void)t;
	if (g.job && !g.job_late) {
		g.job_late = 1;
		log_error("GPU table: no answer from %s within %u ms (an RM control is blocking); "
			  "UUIDs stay as they are; trying again in %u s", g.dev,
			  GPUINFO_QUERY_TIMEOUT_MS, GPUINFO_RETRY_MS / 1000u);
		timer_arm(GPUINFO_RETRY_MS);
	} else if (g.job) {
		log_warn("GPU table: the query is still blocked after %llu s",
			 (unsigned long long)((now_us() - g.job_started_us) / 1000000u));
		timer_arm(GPUINFO_RETRY_MS);
	} else {
		start_query("retry");
	}
}

/* The one bounded wait: the first answer before the loop serves. */
static void wait_first(void)
{
	struct pollfd p = { .fd = g.job->efd, .events = POLLIN };
	uint64_t deadline = now_us() + GPUINFO_QUERY_TIMEOUT_MS * 1000ull;

	for (;;) {
		uint64_t now = now_us();
		int r;

		if (now >= deadline)
			return; /* the timer reports it and the loop takes it later */
		r = poll(&p, 1, (int)((deadline - now + 999) / 1000));
		if (r < 0 && errno != EINTR) {
			log_warn("GPU table: poll: %s", strerror(errno));
			return;
		}
		if (r > 0 && take_job() == 0)
			return;
	}
}

int gpuinfo_init(struct agent *a, struct loop *loop, const char *dev)
{
	g.agent = a;
	g.loop = loop;
	snprintf(g.dev, sizeof(g.dev), "%s", dev);
	if (loop_timer_add(loop, &g.timer, "GPU table", on_timer, NULL) != 0)
		return -1;
	start_query("start-up");
	if (g.job)
		wait_first();
	return 0;
}

void gpuinfo_refresh(const char *why)
{
	if (g.loop)
		start_query(why);
}

void gpuinfo_note_device(uint32_t device_instance)
{
	uint64_t now = now_us();

	if (!g.loop || gpuinfo_uuid(device_instance))
		return;
	if (g.last_unknown_us && now - g.last_unknown_us < GPUINFO_UNKNOWN_MIN_MS * 1000ull)
		return;
	g.last_unknown_us = now;
	log_debug("GPU table: device instance %u has no UUID yet: querying again", device_instance);
	start_query("unknown device instance");
}

unsigned gpuinfo_generation(void)
{
	return g.generation;
}

size_t gpuinfo_instances(uint32_t *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < g.table.n && n < max; i++)
		out[n++] = g.table.gpus[i].device_instance;
	return n;
}

const char *gpuinfo_uuid(uint32_t device_instance)
{
	const struct gpuinfo_gpu *x = gpuinfo_table_find(&g.table, device_instance);

	return x && x->uuid[0] ? x->uuid : NULL;
}

cJSON *gpuinfo_json(void)
{
	return gpuinfo_table_json(&g.table);
}

const char *gpuinfo_error(void)
{
	return g.last_error[0] ? g.last_error : NULL;
}

void gpuinfo_fini(void)
{
	if (!g.loop)
		return;
	if (g.job) {
		loop_del(g.loop, &g.job_w);
		job_put(g.job); /* a worker inside the RM frees it when it returns */
		g.job = NULL;
	}
	loop_timer_del(&g.timer);
	g.loop = NULL;
	g.agent = NULL;
}

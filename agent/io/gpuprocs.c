/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuprocs.c - the RM's count of each process's video memory per GPU
 * (gpuprocs.h), read every GPUPROCS_INTERVAL_MS on one worker.
 *
 * Owns: the worker (common/workq.c, one thread, one job at a time), the
 * timer, and the latest reading, whose GPUs read are pushed into the
 * core as facts (memory_gpu_procs). A reading stuck inside the RM is left
 * to finish and logged once: no second one is started behind it.
 */
#include "agent/io/gpuprocs.h"
#include "agent/core/core.h"
#include "agent/io/gpuinfo.h"
#include "common/log.h"
#include "common/loop.h"
#include "common/workq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

struct gp_job {
	struct workq_job j; /* first: a workq_job is a job */
	char dev[4096];
	uint32_t self;
	size_t n;
	uint32_t instances[RM_GPU_MAX_ATTACHED];
	int rc;
	struct gpuprocs_table table;
};

_Static_assert(GPUPROCS_PER_GPU_MAX <= MEM_RM_PROCS_MAX, "the core keeps every process read");

static struct {
	struct agent *agent; /* told each GPU's reading (memory_gpu_procs) */
	struct loop *loop;
	char dev[4096];
	struct workq *q;
	struct loop_watch done_w; /* the queue's eventfd */
	struct loop_timer timer;
	int busy;             /* a job is queued or inside the RM */
	uint64_t started_us;  /* ... since then */
	int late_said;
	int have;             /* table holds a reading */
	struct gpuprocs_table table;
	char last_error[256];
} g = { .done_w = { .fd = -1 }, .timer = { .w = { .fd = -1 } } };

static void gp_run(struct workq_job *j, void *ctx)
{
	struct gp_job *x = (struct gp_job *)j;

	(void)ctx;
	x->rc = gpuprocs_query(x->dev, x->instances, x->n, x->self, &x->table);
}

static void gp_free(struct workq_job *j)
{
	free(j);
}

/* A reading's failures, once each until they change: a node without a
 * driver or a GPU that refuses the controls would log every few seconds. */
static void say_failures(const struct gp_job *x)
{
	char now[256] = "";

	if (x->rc != 0) {
		snprintf(now, sizeof(now), "%s", x->table.error);
	} else {
		for (size_t i = 0; i < x->table.n && !now[0]; i++)
			if (!x->table.gpus[i].read)
				snprintf(now, sizeof(now), "GPU %u: %.200s",
					 x->table.gpus[i].device_instance, x->table.gpus[i].error);
	}
	if (strcmp(now, g.last_error) == 0)
		return;
	snprintf(g.last_error, sizeof(g.last_error), "%s", now);
	if (now[0])
		log_warn("GPU processes: cannot read what the RM counts per process (%s); the "
			 "memory of processes without the preempt agent is not shown",
			 now);
	else
		log_info("GPU processes: read from the RM again");
}

/* The core's facts: each GPU read this time; a GPU not read keeps its
 * last reading there. */
static void push_readings(const struct gpuprocs_table *t)
{
	struct mem_rm_proc procs[GPUPROCS_PER_GPU_MAX];

	for (size_t i = 0; g.agent && i < t->n; i++) {
		const struct gpuprocs_gpu *x = &t->gpus[i];

		if (!x->read)
			continue;
		for (size_t k = 0; k < x->n; k++)
			procs[k] = (struct mem_rm_proc){ x->procs[k].pid, x->procs[k].used_bytes };
		(void)memory_gpu_procs(g.agent, x->device_instance, procs, x->n);
	}
}

static void take(struct gp_job *x)
{
	say_failures(x);
	if (x->rc == 0) {
		g.table = x->table;
		g.have = 1;
		push_readings(&x->table);
	}
}

static void on_done(struct loop_watch *w, uint32_t events)
{
	struct workq_job *js[4];
	size_t n;

	(void)w;
	(void)events;
	if (!g.q)
		return;
	n = workq_take(g.q, js, sizeof(js) / sizeof(js[0]));
	for (size_t i = 0; i < n; i++) {
		take((struct gp_job *)js[i]);
		gp_free(js[i]);
		g.busy = 0;
	}
}

static void on_timer(struct loop_timer *t)
{
	struct gp_job *x;

	(void)t;
	if (g.busy) {
		if (!g.late_said && now_us() - g.started_us >= GPUPROCS_LATE_MS * 1000ull) {
			g.late_said = 1;
			log_warn("GPU processes: a reading has been inside the RM for %u s; none "
				 "starts until it returns",
				 GPUPROCS_LATE_MS / 1000u);
		}
		return;
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return;
	x->n = gpuinfo_instances(x->instances, RM_GPU_MAX_ATTACHED);
	if (x->n == 0) {
		free(x); /* no GPU listed yet */
		return;
	}
	snprintf(x->dev, sizeof(x->dev), "%s", g.dev);
	x->self = (uint32_t)getpid();
	if (workq_submit(g.q, &x->j) != 0) {
		free(x);
		return;
	}
	g.busy = 1;
	g.late_said = 0;
	g.started_us = now_us();
}

int gpuprocs_init(struct agent *a, struct loop *loop, const char *dev)
{
	struct workq_cfg cfg = { "GPU processes", 1, 1, 1, gp_run, NULL, gp_free, 0 };

	g.agent = a;
	g.loop = loop;
	snprintf(g.dev, sizeof(g.dev), "%s", dev);
	g.q = workq_start(&cfg);
	if (!g.q) {
		log_error("GPU processes: cannot start the worker: %s", strerror(errno));
		return -1;
	}
	g.done_w.fd = workq_fd(g.q);
	g.done_w.fn = on_done;
	if (loop_add(loop, &g.done_w, EPOLLIN) != 0) {
		g.done_w.fd = -1;
		return -1;
	}
	if (loop_timer_add(loop, &g.timer, "GPU processes", on_timer, NULL) != 0 ||
	    loop_timer_every(&g.timer, GPUPROCS_INTERVAL_MS * 1000ull) != 0)
		return -1;
	return 0;
}

const struct gpuprocs_gpu *gpuprocs_gpu(uint32_t gpu)
{
	if (!g.have)
		return NULL;
	for (size_t i = 0; i < g.table.n; i++)
		if (g.table.gpus[i].device_instance == gpu)
			return &g.table.gpus[i];
	return NULL;
}

void gpuprocs_fini(void)
{
	if (!g.loop)
		return;
	if (g.done_w.fd >= 0)
		loop_del(g.loop, &g.done_w);
	g.done_w.fd = -1;
	loop_timer_del(&g.timer);
	if (g.q)
		workq_stop(g.q); /* a worker inside the RM frees its job */
	g.q = NULL;
	g.loop = NULL;
	g.agent = NULL;
	g.have = 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cron.c - the wiring between the agent's core (tsg.c, cmd.c,
 * reconcile.c, state.c: gpuqos_core) and its adapters (peer.c, ctl.c,
 * direct.c, tracker.c, kube_mode.c): the hooks the core calls instead of
 * naming an adapter (struct agent_hooks), and the two timers: the periodic
 * tick (rate limits start again, garbage collection, a full reconcile),
 * the wake-up at the next deadline the core or the tracker has, and the
 * pass after every batch of events (reconcile what changed, free what was
 * closed, publish). Does not own any decision; main.c starts the parts in
 * order and runs the loop.
 */
#include "agent/agent.h"
#include "agent/io/gpuinfo.h"
#include "agent/io/kube_mode.h"
#include "agent/io/metrics.h"
#include "common/log.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

/* ---- the hooks ---- */

static int submit_in_process(struct agent *a, struct cmd *c)
{
	return peer_send_command(a, c->peer, c);
}

static int submit_direct(struct agent *a, const struct tsg *t, struct cmd *c)
{
	struct direct_req r;

	if (!a->direct) {
		errno = EPIPE;
		return -1;
	}
	memset(&r, 0, sizeof(r));
	r.seq = c->seq;
	r.pid = t->pid;
	r.starttime = t->proc->starttime; /* the pid-reuse guard */
	r.fd = t->fd;
	r.h_client = t->h_client;
	r.h_tsg = t->h_tsg;
	r.op = c->op;
	r.arg = c->arg;
	return direct_submit(a->direct, &r);
}

static int expire_direct(struct agent *a, const struct cmd *c)
{
	return a->direct ? direct_expire(a->direct, c->seq) : -1;
}

static int direct_stalled(const struct agent *a)
{
	return a->direct && direct_is_stalled(a->direct);
}

static void cmd_done(struct agent *a, struct ctl_conn *ctl, struct cmd *c,
		     const struct cmd_outcome *o)
{
	ctl_cmd_done(a, ctl, c, o->rm_status, o->err, o->err_word, o->value, o->elapsed_ns, o->why);
}

static void after_reconcile(struct agent *a)
{
	if (a->kube)
		kmode_publish(a); /* the pods' annotations follow what was just decided */
	wake_rearm(a);
}

static void hooks_install(struct agent *a)
{
	a->hooks = (struct agent_hooks){
		.submit_in_process = submit_in_process,
		.submit_direct = submit_direct,
		.expire_direct = expire_direct,
		.direct_stalled = direct_stalled,
		.cmd_done = cmd_done,
		.send_policy = peer_send_policy,
		.send_window = peer_send_window,
		/* Kubernetes mode started before: the pod's annotation, never
		 * the process, says its class. */
		.classify = a->kube ? kmode_classify : NULL,
		.kernel_confirms = tracker_active,
		.after_reconcile = after_reconcile,
		.control_ended = metrics_control_ended,
	};
}

/* ---- after every batch of events ---- */

/* A TSG on a device instance the GPU table lacks asks for a new query
 * (gpuinfo.c rate-limits it). */
static void gpuinfo_check_tsgs(struct agent *a)
{
	for (struct tsg *t = a->tsgs; t; t = t->next)
		if (t->gpu != GQ_UNKNOWN && !gpuinfo_uuid(t->gpu))
			gpuinfo_note_device(t->gpu);
}

/* After every batch of events: close peers whose send failed, reconcile
 * what changed, then free what was closed (no event can point at it now). */
static void after_batch(void *arg)
{
	struct agent *a = arg;

	if (a->dirty)
		gpuinfo_check_tsgs(a);
	for (int i = 0; i < 4; i++) {
		peer_close_broken(a);
		if (!a->dirty)
			break;
		reconcile(a);
	}
	peer_close_broken(a);
	peer_reap(a);
	ctl_reap(a);
	kmode_reap(a);
	metrics_publish(a); /* what this batch changed, for the next scrape */
}

/* ---- the timers ---- */

static void on_wake(struct loop_watch *w, uint32_t events)
{
	struct agent *a = w->ctx;
	uint64_t expirations;

	(void)events;
	if (read(w->fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
		log_warn("timerfd read: %s", strerror(errno));
	cmd_expire(a);
	tracker_tick(a);
	a->dirty = 1; /* a backoff or a claim's grace may have ended */
}

static void on_tick(struct loop_watch *w, uint32_t events)
{
	struct agent *a = w->ctx;
	uint64_t expirations;

	(void)events;
	if (read(w->fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
		log_warn("timerfd read: %s", strerror(errno));
	reconcile_new_tick(a);
	tracker_tick(a);
	proc_gc(a);
	state_gc(a);
	kmode_tick(a);
	lcbusy_tick(a);
	reconcile(a);
}

static int timer_watch(struct agent *a, struct loop_watch *w, loop_fn fn)
{
	w->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (w->fd < 0) {
		log_error("timerfd_create: %s", strerror(errno));
		return -1;
	}
	w->fn = fn;
	w->ctx = a;
	return loop_add(&a->loop, w, EPOLLIN);
}

static void us_to_ts(uint64_t us, struct timespec *ts)
{
	ts->tv_sec = (time_t)(us / 1000000u);
	ts->tv_nsec = (long)(us % 1000000u) * 1000;
}

/* Also installs the hooks: main.c calls it after Kubernetes mode and the
 * direct path started, before any peer or tracker event. */
int wake_init(struct agent *a)
{
	hooks_install(a);
	a->loop.after_batch = after_batch;
	a->loop.after_arg = a;
	if (timer_watch(a, &a->wake_w, on_wake) != 0 || timer_watch(a, &a->tick_w, on_tick) != 0)
		return -1;
	tick_rearm(a);
	return 0;
}

/* Arms the wake-up at the earliest deadline, so that none waits for the
 * next tick. */
void wake_rearm(struct agent *a)
{
	uint64_t next = reconcile_next_deadline(a), now = now_us(), claim = tracker_next_deadline(a);
	struct itimerspec its;

	if (claim && (next == 0 || claim < next))
		next = claim;
	memset(&its, 0, sizeof(its));
	if (next)
		us_to_ts(next > now ? next : now + 1, &its.it_value);
	if (timerfd_settime(a->wake_w.fd, TFD_TIMER_ABSTIME, &its, NULL) != 0)
		log_warn("timerfd_settime (wake): %s", strerror(errno));
}

/* The tick follows the config's interval (also after a reload). */
void tick_rearm(struct agent *a)
{
	struct itimerspec its;
	uint64_t iv = (uint64_t)(a->cfg->reconcile_interval_ms ? a->cfg->reconcile_interval_ms : 1000) * 1000u;

	memset(&its, 0, sizeof(its));
	us_to_ts(iv, &its.it_interval);
	us_to_ts(iv, &its.it_value);
	if (timerfd_settime(a->tick_w.fd, 0, &its, NULL) != 0)
		log_warn("timerfd_settime (tick): %s", strerror(errno));
}

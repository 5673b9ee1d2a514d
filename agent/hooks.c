/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hooks.c - the wiring between the agent's core (agent/core: gpuqos_core)
 * and its adapters (agent/io): the hooks the core calls instead of naming
 * an adapter (struct agent_hooks), the two loop timers - the periodic tick
 * (rate limits start again, garbage collection, a full reconcile) and the
 * wake-up at the next deadline the core or the tracker has - and the loop's
 * posts, run after every batch of events in this order: reconcile what
 * changed, free what was closed, publish the records that changed. Does not own any decision;
 * main.c starts the parts in order and runs the loop.
 */
#include "agent/agent.h"
#include "agent/io/gpuinfo.h"
#include "agent/io/kube_mode.h"
#include "agent/io/metrics.h"
#include "common/log.h"

#include <errno.h>
#include <string.h>

/* Reconcile passes after one batch of events, at most. A pass can end what
 * it started: a send that fails marks its peer broken (closed before the
 * next pass, its commands failed), and a control that fails at once marks
 * the agent dirty; the next pass then moves those TSGs to another path or
 * backs them off. Two passes settle one such failure, the rest is room for
 * a failure in the pass after. The bound keeps a batch where every pass
 * breaks something from holding the loop; what it leaves dirty is
 * reconciled by the next batch, at the latest the next tick. */
#define RECONCILE_PASSES_MAX 4

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
	hooks_wake_rearm(a);
}

static void hooks_fill(struct agent *a)
{
	a->hooks = (struct agent_hooks){
		.submit_in_process = submit_in_process,
		.submit_direct = submit_direct,
		.expire_direct = expire_direct,
		.direct_stalled = direct_stalled,
		.cmd_done = cmd_done,
		.send_policy = peer_send_policy,
		.send_window = peer_send_window,
		.send_memory = peer_send_memory,
		.renew_leases = peer_renew_leases,
		.mem_refused = kmode_mem_refused,
		/* Kubernetes mode started before: the pod's annotation, never
		 * the process, says its class. */
		.kernel_confirms = tracker_active,
		.after_reconcile = after_reconcile,
		.control_ended = metrics_control_ended,
		.proc_alive = procinfo_alive,
		.on_state_changed = state_changed,
		.on_state_flush = state_flush,
	};
}

/* ---- after every batch of events (loop posts, in this order) ---- */

/* A TSG on a device instance the GPU table lacks asks for a new query
 * (gpuinfo.c rate-limits it). */
static void gpuinfo_check_tsgs(struct agent *a)
{
	for (struct tsg *t = a->tsgs; t; t = t->next)
		if (t->gpu != GQ_UNKNOWN && !gpuinfo_uuid(t->gpu))
			gpuinfo_note_device(t->gpu);
}

/* Close peers whose send failed, reconcile what changed. */
static void post_reconcile(void *arg)
{
	struct agent *a = arg;

	if (a->dirty)
		gpuinfo_check_tsgs(a);
	for (int i = 0; i < RECONCILE_PASSES_MAX; i++) {
		peer_close_broken(a);
		if (!a->dirty)
			break;
		reconcile(a);
	}
	peer_close_broken(a);
}

/* Free what was closed in this batch: no event can point at it now. */
static void post_reap(void *arg)
{
	struct agent *a = arg;

	peer_reap(a);
	ctl_reap(a);
	kmode_reap(a);
}

/* Once a batch, what it changed: the pods whose records changed get
 * their annotations (only those), the metrics their next snapshot; then
 * the queue of changed records starts empty for the next batch. */
static void post_publish(void *arg)
{
	struct agent *a = arg;

	if (a->kube)
		kmode_publish(a);
	metrics_publish(a);
	changes_clear(a);
}

/* ---- the timers ---- */

static void on_wake_timer(struct loop_timer *t)
{
	struct agent *a = t->ctx;

	cmd_expire(a);
	tracker_tick(a);
	a->dirty = 1; /* a backoff or a claim's grace may have ended */
}

static void on_tick_timer(struct loop_timer *t)
{
	struct agent *a = t->ctx;

	reconcile_new_tick(a);
	tracker_tick(a);
	proc_gc(a);
	state_gc(a);
	kmode_tick(a);
	lcbusy_tick(a);
	reconcile(a);
}

int hooks_install(struct agent *a)
{
	struct agent_io *io = a->io;

	hooks_fill(a);
	loop_post_add(&io->loop, &io->post_reconcile, post_reconcile, a);
	loop_post_add(&io->loop, &io->post_reap, post_reap, a);
	loop_post_add(&io->loop, &io->post_publish, post_publish, a);
	if (loop_timer_add(&io->loop, &io->wake, "wake-up", on_wake_timer, a) != 0 ||
	    loop_timer_add(&io->loop, &io->tick, "tick", on_tick_timer, a) != 0)
		return -1;
	hooks_tick_rearm(a);
	return 0;
}

/* Arms the wake-up at the earliest deadline, so that none waits for the
 * next tick. */
void hooks_wake_rearm(struct agent *a)
{
	uint64_t next = reconcile_next_deadline(a), claim = tracker_next_deadline(a);

	if (claim && (next == 0 || claim < next))
		next = claim;
	loop_timer_at(&a->io->wake, next);
}

void hooks_tick_rearm(struct agent *a)
{
	unsigned ms = a->cfg->reconcile_interval_ms ? a->cfg->reconcile_interval_ms : 1000;

	loop_timer_every(&a->io->tick, (uint64_t)ms * 1000u);
}

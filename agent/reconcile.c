/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reconcile.c - makes observed TSG settings match desired ones: runs the
 * policy over every known TSG, sends the commands that close the gap
 * (rate-limited, one in flight per TSG, none during backoff, each on the
 * path path.c chooses) and keeps each peer's POLICY current. Safe to run at any time; a
 * second run with nothing changed sends nothing. Also owns the two timers:
 * the periodic tick and the wake-up for the next deadline or backoff end.
 * Does not own the policy itself (policy.c) or the wire (peer.c).
 */
#include "agent/agent.h"
#include "agent/kubemode.h"
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

static long policy_inputs(struct agent *a, struct policy_tsg_in **inp, struct policy_tsg_out **outp);

static void run_policy(struct agent *a)
{
	struct policy_tsg_in *in;
	struct policy_tsg_out *out;
	long n = policy_inputs(a, &in, &out);
	size_t i = 0;

	if (n < 0) {
		log_error("reconcile: out of memory for the policy input");
		return;
	}
	policy_decide(&a->cfg->policy, in, (size_t)n, out);
	for (struct tsg *t = a->tsgs; t; t = t->next, i++) {
		if (t->desired_il != out[i].interleave)
			t->il_refused = GQ_IL_NONE; /* a new level deserves a new try */
		t->desired_ts = out[i].timeslice_us;
		t->desired_il = out[i].interleave;
		t->reason = out[i].reason ? out[i].reason : "";
		if (t->gpu == GQ_UNKNOWN)
			t->reason = "GPU (device instance) unknown: left alone";
		if (t->unverified_until)
			t->reason = "reported by its preempt agent, not seen by the eBPF tracker yet: held";
	}
	free(in);
	free(out);
}

struct path_choice tsg_path(struct agent *a, const struct tsg *t, enum gq_action act)
{
	const struct proc *p = proc_find(a, t->pid);
	const struct peer *peer = p ? p->peer : NULL;
	struct path_in in = {
		.mode = a->cfg->control_path[act],
		.action = act,
		.peer = peer && peer->hello && !peer->broken,
		.peer_stalled = peer && peer->stalled,
		.direct_caps = caps_allows(&a->caps, CAPS_DIRECT),
		.interleave_caps = caps_allows(&a->caps, CAPS_INTERLEAVE),
		.direct_running = a->direct != NULL,
		.direct_stalled = a->direct && direct_is_stalled(a->direct),
		/* The pid-reuse guard needs the start time, kept with the proc. */
		.fd_known = t->fd != GQ_UNKNOWN && p != NULL,
	};

	return path_select(&in);
}

/* No path can carry t's next control: say why once, show it on the TSG. */
static void tsg_block(struct tsg *t, uint32_t op, const struct path_choice *ch)
{
	if (t->blocked != ch->why)
		log_warn("pid %d: %s on TSG 0x%x not sent: %s", (int)t->pid, gq_op_name(op),
			 t->h_tsg, ch->why);
	t->blocked = ch->why;
	t->blocked_stalled = ch->stalled;
	snprintf(t->error, sizeof(t->error), "%s: %s", gq_op_name(op), ch->why);
}

/* The rate limit of the chosen path; 1 if one more may be sent now. */
static int path_budget(struct agent *a, const struct tsg *t, enum gq_path path)
{
	struct proc *p = proc_find(a, t->pid);

	if (path == GQ_PATH_DIRECT)
		return a->direct_sent_this_tick < GQ_DIRECT_PER_TICK;
	return p && p->peer && p->peer->sent_this_tick < GQ_CMDS_PER_TICK;
}

/* Sends at most one command for t; returns 1 if one was sent. */
static int reconcile_tsg(struct agent *a, struct tsg *t, uint64_t now)
{
	struct proc *p = proc_find(a, t->pid);
	struct path_choice ch;
	uint32_t op;
	uint64_t arg;

	if (!p || t->inflight || t->backoff_until > now || t->unverified_until)
		return 0; /* an unverified claim is never acted on */
	if (p->cls == GQ_CLASS_UNMANAGED && t->applied_ts == GQ_UNKNOWN)
		return 0; /* never touched by anyone: leave it alone */
	if (tsg_ts_differs(t)) {
		op = GQ_OP_SET_TIMESLICE;
		arg = t->desired_ts;
	} else if (tsg_il_differs(t)) {
		op = GQ_OP_SET_INTERLEAVE;
		arg = (uint64_t)t->desired_il;
	} else {
		if (t->blocked)
			t->error[0] = '\0';
		t->blocked = NULL;
		return 0;
	}
	ch = tsg_path(a, t, gq_op_action(op));
	if (ch.path == GQ_PATH_NONE) {
		tsg_block(t, op, &ch);
		return 0;
	}
	t->blocked = NULL;
	if (!path_budget(a, t, ch.path) || !cmd_issue(a, t, ch.path, op, arg, NULL))
		return 0;
	if (ch.path == GQ_PATH_DIRECT)
		a->direct_sent_this_tick++;
	else
		p->peer->sent_this_tick++;
	return 1;
}

/* The policy input of every known TSG, with one spare slot at the end for
 * a hypothetical TSG (see peer_policy). Returns the count, or -1. */
static long policy_inputs(struct agent *a, struct policy_tsg_in **inp, struct policy_tsg_out **outp)
{
	size_t n = 0, i = 0;

	for (struct tsg *t = a->tsgs; t; t = t->next)
		n++;
	*inp = calloc(n + 1, sizeof(**inp));
	*outp = calloc(n + 1, sizeof(**outp));
	if (!*inp || !*outp) {
		free(*inp);
		free(*outp);
		return -1;
	}
	/* Without its GPU a TSG could be paired with neighbours on another GPU:
	 * leave it alone and let it count for no runlist. */
	for (struct tsg *t = a->tsgs; t; t = t->next, i++) {
		const struct proc *p = proc_find(a, t->pid);

		(*inp)[i].gpu = t->gpu;
		(*inp)[i].engine_type = t->engine;
		/* A claim the tracker has not confirmed must not move its
		 * neighbours either. */
		(*inp)[i].cls = p && t->gpu != GQ_UNKNOWN && !t->unverified_until ? p->cls
										    : GQ_CLASS_UNMANAGED;
		(*inp)[i].baseline_timeslice_us = tsg_baseline(t);
	}
	return (long)n;
}

/* What a TSG of engine `engine` that process p creates next should start
 * at, so the preempt agent can rewrite libcuda's own SET_TIMESLICE and the
 * TSG never runs at the wrong value: the policy's answer for one more such
 * TSG beside the current ones. Asked for every GPU the process already
 * uses (every known GPU if none yet); 0 ("leave libcuda's value") when the
 * answer is the baseline or the GPUs disagree. */
static uint32_t peer_policy_for(const struct agent *a, const struct proc *p, struct policy_tsg_in *in,
				struct policy_tsg_out *out, size_t n, uint32_t engine, uint32_t baseline)
{
	uint32_t answer = GQ_UNKNOWN;
	int own = 0;

	for (const struct tsg *t = a->tsgs; t; t = t->next)
		own |= t->pid == p->pid && t->gpu != GQ_UNKNOWN;
	for (const struct tsg *g = a->tsgs; g; g = g->next) {
		int seen = 0;

		if (g->gpu == GQ_UNKNOWN || (own && g->pid != p->pid))
			continue;
		for (const struct tsg *e = a->tsgs; e != g; e = e->next)
			seen |= e->gpu == g->gpu && (!own || e->pid == p->pid);
		if (seen)
			continue; /* this GPU was asked already */
		in[n] = (struct policy_tsg_in){.gpu = g->gpu, .engine_type = engine, .cls = p->cls,
					       .baseline_timeslice_us = baseline};
		policy_decide(&a->cfg->policy, in, n + 1, out);
		if (answer != GQ_UNKNOWN && answer != out[n].timeslice_us)
			return 0;
		answer = out[n].timeslice_us;
	}
	return answer == GQ_UNKNOWN || answer == baseline ? 0 : answer;
}

void reconcile_peer_policy(struct agent *a, const struct peer *p, uint32_t *gr, uint32_t *copy)
{
	struct policy_tsg_in *in;
	struct policy_tsg_out *out;
	long n;

	*gr = 0;
	*copy = 0;
	if (!p->proc || p->proc->cls == GQ_CLASS_UNMANAGED)
		return;
	n = policy_inputs(a, &in, &out);
	if (n < 0) {
		log_error("reconcile: out of memory computing the POLICY of pid %d", (int)p->pid);
		return;
	}
	*gr = peer_policy_for(a, p->proc, in, out, (size_t)n, RM_ENGINE_GR0, RM_DEFAULT_TIMESLICE_GR_US);
	*copy = peer_policy_for(a, p->proc, in, out, (size_t)n, RM_ENGINE_COPY0 + 2,
				RM_DEFAULT_TIMESLICE_COPY_US);
	free(in);
	free(out);
}

void reconcile(struct agent *a)
{
	uint64_t now = now_us();
	unsigned sent = 0;

	a->dirty = 0;
	run_policy(a);
	for (struct tsg *t = a->tsgs; t && !state_holding(a, now); t = t->next)
		sent += (unsigned)reconcile_tsg(a, t, now);
	for (struct peer *p = a->peers; p; p = p->next) {
		uint32_t gr, copy;

		if (!p->hello)
			continue;
		reconcile_peer_policy(a, p, &gr, &copy);
		if (!p->policy_valid || gr != p->policy_gr || copy != p->policy_copy)
			peer_send_policy(a, p, gr, copy);
	}
	if (sent)
		log_debug("reconcile: %u command(s) sent", sent);
	if (a->kube)
		kmode_publish(a); /* the pods' annotations follow what was just decided */
	wake_rearm(a);
}

void reconcile_tick(struct agent *a)
{
	for (struct peer *p = a->peers; p; p = p->next)
		p->sent_this_tick = 0;
	a->direct_sent_this_tick = 0;
	tracker_tick(a);
	proc_gc(a);
	state_gc(a);
	kmode_tick(a);
	reconcile(a);
}

/* ---- timers ---- */

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
	reconcile_tick(a);
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

int wake_init(struct agent *a)
{
	struct itimerspec its;
	uint64_t iv = (uint64_t)(a->cfg->reconcile_interval_ms ? a->cfg->reconcile_interval_ms : 1000) * 1000u;

	if (timer_watch(a, &a->wake_w, on_wake) != 0 || timer_watch(a, &a->tick_w, on_tick) != 0)
		return -1;
	memset(&its, 0, sizeof(its));
	us_to_ts(iv, &its.it_interval);
	us_to_ts(iv, &its.it_value);
	if (timerfd_settime(a->tick_w.fd, 0, &its, NULL) != 0) {
		log_error("timerfd_settime (tick): %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Arms the wake-up at the earliest command deadline or backoff end, so
 * neither waits for the next tick. */
void wake_rearm(struct agent *a)
{
	uint64_t next = cmd_next_deadline(a), now = now_us(), claim = tracker_next_deadline(a);
	struct itimerspec its;

	if (claim && (next == 0 || claim < next))
		next = claim;
	for (const struct tsg *t = a->tsgs; t; t = t->next)
		if (t->backoff_until > now && (next == 0 || t->backoff_until < next))
			next = t->backoff_until;
	if (a->expected) {
		uint64_t grace_end = a->started_us + GQ_RESTART_GRACE_MS * 1000ull;

		if (next == 0 || grace_end < next)
			next = grace_end;
	}
	memset(&its, 0, sizeof(its));
	if (next)
		us_to_ts(next > now ? next : now + 1, &its.it_value);
	if (timerfd_settime(a->wake_w.fd, TFD_TIMER_ABSTIME, &its, NULL) != 0)
		log_warn("timerfd_settime (wake): %s", strerror(errno));
}

/* The tick follows the config's interval after a reload. */
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

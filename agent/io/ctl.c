/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl.c - the JSON control socket (docs/ctl.md): one request per stream
 * connection, one answer, close. preempt and get-timeslice are answered
 * when every command they issued has a result or passed its deadline; the
 * loop never waits for them. A connection has CTL_IDLE_MS to send its
 * request and again to take its answer, and at most CTL_CONN_MAX are open
 * at once: a client that connects and stalls holds nothing for long. Does
 * not own the state it shows or changes.
 */
#include "agent/io/ctl.h"
#include "agent/io/jsonnum.h"
#include "agent/io/direct.h"
#include "agent/io/io.h"
#include "agent/io/peer.h"
#include "agent/io/tracker.h"
#include "agent/io/gpuinfo.h"
#include "agent/io/kube_mode.h"
#include "agent/io/memview.h"
#include "agent/io/procinfo.h"
#include "common/log.h"
#include "common/utf8.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define CTL_REQ_MAX 4096
/* gpuqosctl sends its request at once and reads the answer at once; a
 * client slower than this is gone or hostile. */
#define CTL_IDLE_MS 10000u
/* More than any operator runs at once; each costs two fds. */
#define CTL_CONN_MAX 32u

enum ctl_phase { CTL_READ, CTL_WAIT, CTL_WRITE, CTL_DRAIN };

#define CTL_DRAIN_MAX (1u << 20)

struct ctl_conn {
	struct ctl_conn *next;
	struct loop_watch w;
	struct loop_timer timer; /* CTL_IDLE_MS for the request, then the answer */
	enum ctl_phase phase;
	char in[CTL_REQ_MAX + 1];
	size_t inlen;
	char *out;
	size_t outlen, outoff;
	size_t drained;
	cJSON *results; /* while waiting for commands */
	unsigned pending;
};

/* Connections refused by CTL_CONN_MAX, closed by CTL_IDLE_MS (shown in
 * the agent's counters). */
static uint64_t ctl_refused, ctl_timeouts;

static void ctl_close(struct agent *a, struct ctl_conn *c)
{
	if (c->w.dead)
		return;
	cmd_detach_ctl(a, c);
	loop_close(&a->io->loop, &c->w);
	loop_timer_del(&c->timer);
	for (struct ctl_conn **pp = &a->ctls; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	c->next = a->dead_ctls;
	a->dead_ctls = c;
}

void ctl_reap(struct agent *a)
{
	while (a->dead_ctls) {
		struct ctl_conn *c = a->dead_ctls;

		a->dead_ctls = c->next;
		cJSON_Delete(c->results);
		free(c->out);
		free(c);
	}
}

void ctl_free_all(struct agent *a)
{
	while (a->ctls)
		ctl_close(a, a->ctls);
	ctl_reap(a);
}

static void ctl_drain(struct agent *a, struct ctl_conn *c)
{
	char scratch[4096];

	for (;;) {
		ssize_t n = recv(c->w.fd, scratch, sizeof(scratch), MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		c->drained += n > 0 ? (size_t)n : 0;
		if (n <= 0 || c->drained > CTL_DRAIN_MAX) {
			ctl_close(a, c);
			return;
		}
	}
}

static void ctl_flush(struct agent *a, struct ctl_conn *c)
{
	while (c->outoff < c->outlen) {
		ssize_t n = send(c->w.fd, c->out + c->outoff, c->outlen - c->outoff,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return; /* EPOLLOUT brings us back */
		if (n <= 0) {
			log_debug("ctl: client went away: %s", strerror(errno));
			ctl_close(a, c);
			return;
		}
		c->outoff += (size_t)n;
	}
	/* Closing with unread request bytes (an oversized request) would reset
	 * the connection before the client reads the answer: end our side and
	 * discard what still comes until the client closes. */
	if (shutdown(c->w.fd, SHUT_WR) != 0 || loop_mod(&a->io->loop, &c->w, EPOLLIN | EPOLLRDHUP) != 0) {
		ctl_close(a, c);
		return;
	}
	c->phase = CTL_DRAIN;
	ctl_drain(a, c);
}

/* 0 ms disarms. */
static void ctl_arm(struct agent *a, struct ctl_conn *c, unsigned ms)
{
	if (loop_timer_after(&c->timer, (uint64_t)ms * 1000u) != 0)
		ctl_close(a, c);
}

static void on_ctl_timer(struct loop_timer *t)
{
	struct ctl_conn *c = (struct ctl_conn *)((char *)t - offsetof(struct ctl_conn, timer));
	struct agent *a = t->ctx;

	ctl_timeouts++;
	log_debug("ctl: connection closed: idle for %u ms", CTL_IDLE_MS);
	ctl_close(a, c);
}

/* Takes ownership of answer. */
static void ctl_answer(struct agent *a, struct ctl_conn *c, cJSON *answer)
{
	utf8_json_sanitize(answer); /* names from /proc are any bytes */
	char *s = answer ? cJSON_PrintUnformatted(answer) : NULL;

	cJSON_Delete(answer);
	if (!s) {
		log_error("ctl: cannot format an answer: out of memory");
		ctl_close(a, c);
		return;
	}
	c->outlen = strlen(s) + 1;
	c->out = malloc(c->outlen);
	if (!c->out) {
		free(s);
		ctl_close(a, c);
		return;
	}
	memcpy(c->out, s, c->outlen - 1);
	c->out[c->outlen - 1] = '\n';
	free(s);
	c->phase = CTL_WRITE;
	if (loop_mod(&a->io->loop, &c->w, EPOLLOUT) != 0) {
		ctl_close(a, c);
		return;
	}
	/* The client has as long again to take the answer and close. */
	ctl_arm(a, c, CTL_IDLE_MS);
	if (!c->w.dead)
		ctl_flush(a, c);
}

static void ctl_error(struct agent *a, struct ctl_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void ctl_error(struct agent *a, struct ctl_conn *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	cJSON *o = cJSON_CreateObject();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (o) {
		cJSON_AddFalseToObject(o, "ok");
		cJSON_AddStringToObject(o, "error", msg);
	}
	ctl_answer(a, c, o);
}

/* ---- the view ---- */

static void add_hex(cJSON *o, const char *k, uint32_t v)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "0x%x", v);
	cJSON_AddStringToObject(o, k, buf);
}

static void add_u32_or_null(cJSON *o, const char *k, uint32_t v)
{
	if (v == GQ_UNKNOWN)
		cJSON_AddNullToObject(o, k);
	else
		json_add_num(o, k, v);
}

/* How often a setting was set back after a SET of ours took, and how long
 * the next SET still waits (docs/policy.md). */
static void add_reverts(cJSON *o, const struct tsg_revert *r, uint64_t now)
{
	json_add_num(o, "reverts", (double)r->total);
	json_add_num(o, "revertWaitMs", r->until > now ? (double)((r->until - now) / 1000u) : 0);
}

static void tsg_add_last(cJSON *o, const struct tsg *t)
{
	if (!t->sent.has_last) {
		cJSON_AddNullToObject(o, "lastOp");
		cJSON_AddNullToObject(o, "lastStatus");
		cJSON_AddNullToObject(o, "lastStatusName");
		cJSON_AddNullToObject(o, "lastErrno");
		cJSON_AddNullToObject(o, "lastElapsedUs");
		return;
	}
	cJSON_AddStringToObject(o, "lastOp", gq_op_name(t->sent.last_op));
	json_add_num(o, "lastStatus", t->sent.last_status);
	cJSON_AddStringToObject(o, "lastStatusName", rm_status_name(t->sent.last_status));
	if (t->sent.last_timeout)
		cJSON_AddStringToObject(o, "lastErrno", "timeout");
	else
		json_add_num(o, "lastErrno", t->sent.last_errno);
	json_add_num(o, "lastElapsedUs", (double)t->sent.last_elapsed_us);
}

/* "in-process" or "direct"; null before any control went that way. */
static void add_path(cJSON *o, const char *k, enum path p)
{
	if (p == PATH_NONE)
		cJSON_AddNullToObject(o, k);
	else
		cJSON_AddStringToObject(o, k, path_name(p));
}

/* Who saw the TSG: ["bpf"] (the eBPF tracker), ["preempt"] (its preempt
 * agent reported it) or ["bpf","preempt"]. */
static void add_sources(cJSON *o, unsigned sources)
{
	cJSON *arr = cJSON_AddArrayToObject(o, "sources");

	if (arr && (sources & TSG_SRC_BPF))
		cJSON_AddItemToArray(arr, cJSON_CreateString("bpf"));
	if (arr && (sources & TSG_SRC_PREEMPT))
		cJSON_AddItemToArray(arr, cJSON_CreateString("preempt"));
}

static cJSON *tsg_json(struct agent *a, const struct tsg *t)
{
	const struct proc *p = proc_find(a, t->pid);
	const struct tsg_record *r = &t->rec;
	cJSON *o = cJSON_CreateObject(), *ts, *il, *paths, *gate;
	uint64_t now = now_us();
	char eng[24];

	if (!o)
		return NULL;
	tsg_engine_name(t->engine, eng, sizeof(eng));
	json_add_num(o, "pid", t->pid);
	cJSON_AddStringToObject(o, "comm", p ? p->comm : "");
	add_u32_or_null(o, "gpu", t->gpu);
	if (gpuinfo_uuid(t->gpu)) /* the GPU of its device instance (gpuinfo.c) */
		cJSON_AddStringToObject(o, "gpuUuid", gpuinfo_uuid(t->gpu));
	else
		cJSON_AddNullToObject(o, "gpuUuid");
	json_add_num(o, "engine", t->engine);
	cJSON_AddStringToObject(o, "engineName", eng);
	add_hex(o, "client", t->h_client);
	add_hex(o, "tsg", t->h_tsg);
	add_sources(o, t->sources);
	/* What the last reconcile pass recorded (record.c), not the model:
	 * the class its settings follow and what the RM holds. */
	cJSON_AddStringToObject(o, "class", class_name(r->cls));
	cJSON_AddStringToObject(o, "classSource", class_source_name(r->cls_source));
	ts = cJSON_AddObjectToObject(o, "timeslice");
	if (ts) {
		add_u32_or_null(ts, "desired", r->ts_desired);
		add_u32_or_null(ts, "applied", r->ts_applied);
		json_add_num(ts, "baseline", tsg_baseline(t));
		/* The last read-back that held "applied" against the RM: how
		 * long ago (null: none yet), and how many found it wrong. */
		if (t->verify.at)
			json_add_num(ts, "verifiedMsAgo",
						(double)((now - t->verify.at) / 1000u));
		else
			cJSON_AddNullToObject(ts, "verifiedMsAgo");
		json_add_num(ts, "verifyMismatches", (double)t->verify.mismatches);
		add_reverts(ts, &t->revert[TSG_TIMESLICE], now);
	}
	il = cJSON_AddObjectToObject(o, "interleave");
	if (il) {
		add_u32_or_null(il, "desired", r->il_desired < 0 ? GQ_UNKNOWN : (uint32_t)r->il_desired);
		add_u32_or_null(il, "applied", r->il_applied);
		add_reverts(il, &t->revert[TSG_INTERLEAVE], now);
	}
	gate = cJSON_AddObjectToObject(o, "gate");
	if (gate) {
		/* "desired": gated now or not; "applied": what its preempt
		 * agent last said; "rotating": it takes turns with other BEs. */
		cJSON_AddBoolToObject(gate, "rotating", t->gate.rotate);
		cJSON_AddBoolToObject(gate, "desired", t->gate.want);
		cJSON_AddBoolToObject(gate, "applied", t->gate.gated);
		cJSON_AddBoolToObject(gate, "possible", rotate_gateable(t));
		/* Processes taking turns in its rotation (its own included; 0:
		 * not rotating): it waits at most this minus one turns. */
		json_add_num(gate, "processes",
					t->gate.member ? rotate_processes(a, t->gpu, t->engine) : 0);
		/* Its process's longest wait between two of its turns as the
		 * agent planned them, the current one included (no preempt
		 * agent's word in it); longestMs below is what it reported. */
		json_add_num(gate, "waitLongestMs",
					(double)(rotate_wait_longest_us(t, now) / 1000u));
		/* How long it has been held off (n - 1 turns at a time in a
		 * rotation of n BEs). */
		json_add_num(gate, "count", (double)t->gate.count);
		json_add_num(gate, "gatedMs", (double)(tsg_gated_total_us(t, now) / 1000u));
		json_add_num(gate, "longestMs",
					(double)(tsg_gated_longest_us(t, now) / 1000u));
	}
	add_path(o, "path", t->sent.last_path);
	paths = cJSON_AddObjectToObject(o, "paths");
	for (int i = 0; paths && i < NACTIONS; i++)
		add_path(paths, action_name((enum path_action)i), t->sent.action_path[i]);
	tsg_add_last(o, t);
	cJSON_AddStringToObject(o, "state", tsg_state_name(r->state));
	cJSON_AddStringToObject(o, "reason", t->want.reason ? t->want.reason : "");
	if (t->sent.error[0])
		cJSON_AddStringToObject(o, "error", t->sent.error);
	else
		cJSON_AddNullToObject(o, "error");
	return o;
}

/* How its wakes went, as its preempt agent last said (WAKE); null until a
 * report. */
static void wake_json(const struct proc *p, cJSON *o)
{
	cJSON *w;

	if (!p->wake.have) {
		cJSON_AddNullToObject(o, "wake");
		return;
	}
	w = cJSON_AddObjectToObject(o, "wake");
	if (!w)
		return;
	json_add_num(w, "requests", (double)p->wake.requests);
	json_add_num(w, "wakes", (double)p->wake.wakes);
	json_add_num(w, "hits", (double)p->wake.hits);
	json_add_num(w, "wasted", (double)p->wake.wasted);
	json_add_num(w, "beaten", (double)p->wake.beaten);
	json_add_num(w, "notIssued", (double)p->wake.not_issued);
	json_add_num(w, "stops", (double)p->wake.stops);
	cJSON_AddBoolToObject(w, "stopped", p->wake.stopped);
}

/* When its requests come, as its preempt agent last said (PHASE): the
 * period, how long before this answer the latest one started, and how
 * long past its due time a request is over (null where the report has no
 * span); null without a report, or one older than a rotation would use. */
static void phase_json(const struct proc *p, cJSON *o)
{
	uint64_t now = now_us();
	cJSON *ph;

	if (!phase_fresh(p, now)) {
		cJSON_AddNullToObject(o, "phase");
		return;
	}
	ph = cJSON_AddObjectToObject(o, "phase");
	if (!ph)
		return;
	json_add_num(ph, "periodUs", (double)p->phase.period_us);
	json_add_num(ph, "lastStartAgoUs",
				p->phase.last_start_us <= now ? (double)(now - p->phase.last_start_us)
							      : 0.0);
	if (p->phase.span_us)
		json_add_num(ph, "spanUs", (double)p->phase.span_us);
	else
		cJSON_AddNullToObject(ph, "spanUs");
}

/* The window schedule last sent to its preempt agent and not ended
 * (window.c), or null; with whether its preempt agent runs it, as its
 * latest WINDOW_STATE says (null: a library that does not answer, no
 * answer yet, or none within the lease; docs/ctl.md). */
static void window_json(const struct proc *p, cJSON *o)
{
	const struct peer_window *w = p->peer ? &p->peer->win : NULL;
	cJSON *j;

	if (!w || !w->on) {
		cJSON_AddNullToObject(o, "window");
		return;
	}
	j = cJSON_AddObjectToObject(o, "window");
	if (!j)
		return;
	json_add_num(j, "gpu", (double)w->gpu);
	json_add_num(j, "periodUs", (double)(w->period_ns / 1000u));
	json_add_num(j, "beforeUs", (double)w->before_us);
	json_add_num(j, "afterUs", (double)w->after_us);
	json_add_num(j, "lcPid", (double)w->lc_pid);
	if (peer_window_held(p->peer, now_us()) >= 0) {
		cJSON_AddBoolToObject(j, "held", p->peer->win_state.on);
		json_add_num(j, "windowsOpened", (double)p->peer->win_state.opened);
		json_add_num(j, "windowsSkipped", (double)p->peer->win_state.skipped);
	} else {
		cJSON_AddNullToObject(j, "held");
		cJSON_AddNullToObject(j, "windowsOpened");
		cJSON_AddNullToObject(j, "windowsSkipped");
	}
}

/* What the last reconcile decided of its windows (window.c,
 * proc.win), as recorded: null for a process with no decision or with
 * windows off on the node and none asked (docs/ctl.md). */
static void windows_json(const struct proc *p, cJSON *o)
{
	const struct window_decision *d = &p->win;
	cJSON *j;

	if (!d->decided || d->why == WINDOW_WHY_OFF || d->why == WINDOW_WHY_NO_LC) {
		cJSON_AddNullToObject(o, "windows");
		return;
	}
	j = cJSON_AddObjectToObject(o, "windows");
	if (!j)
		return;
	cJSON_AddBoolToObject(j, "given", d->why == WINDOW_GIVEN);
	if (d->why == WINDOW_GIVEN) {
		cJSON_AddNullToObject(j, "refused");
		cJSON_AddNullToObject(j, "reason");
	} else {
		cJSON_AddStringToObject(j, "refused", window_why_name(d->why));
		cJSON_AddStringToObject(j, "reason", window_why_text(d->why));
	}
	if (p->cls == CLASS_LC) {
		if (d->ask == WINDOW_ASK_AUTO)
			cJSON_AddStringToObject(j, "ask", "auto");
		else if (d->ask == WINDOW_ASK_US)
			json_add_num(j, "ask", (double)d->ask_us);
		else
			cJSON_AddStringToObject(j, "ask", "off");
		cJSON_AddBoolToObject(j, "ownAsk", d->own);
		json_add_num(j, "capPercent", (double)d->cap_percent);
		json_add_num(j, "bes", (double)d->bes);
	}
	if (d->after_us)
		json_add_num(j, "afterUs", (double)d->after_us);
	else
		cJSON_AddNullToObject(j, "afterUs");
	if (d->period_ns)
		json_add_num(j, "periodUs", (double)(d->period_ns / 1000u));
	else
		cJSON_AddNullToObject(j, "periodUs");
	if (d->lc_pid)
		json_add_num(j, "lcPid", (double)d->lc_pid);
}

static cJSON *proc_json(struct agent *a, const struct proc *p)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	json_add_num(o, "pid", p->pid);
	cJSON_AddStringToObject(o, "comm", p->comm);
	cJSON_AddStringToObject(o, "exe", p->exe);
	cJSON_AddStringToObject(o, "cgroup", p->cgroup);
	cJSON_AddStringToObject(o, "class", class_name(p->cls));
	cJSON_AddStringToObject(o, "classSource", class_source_name(p->cls_source));
	cJSON_AddBoolToObject(o, "connected", p->peer != NULL);
	/* Its launches (lcbusy.c), null until two reports. */
	if (p->busy.percent >= 0) {
		json_add_num(o, "launchActivePercent",
					(double)(int)(p->busy.percent + 0.5));
		json_add_num(o, "launchesPerSecond",
					(double)(int64_t)(p->busy.launches_per_s + 0.5));
	} else {
		cJSON_AddNullToObject(o, "launchActivePercent");
		cJSON_AddNullToObject(o, "launchesPerSecond");
	}
	cJSON_AddBoolToObject(o, "launchBound", p->busy.always);
	json_add_num(o, "wakeLeadUs", (double)proc_wake_lead_us(p));
	wake_json(p, o);
	phase_json(p, o);
	window_json(p, o);
	windows_json(p, o);
	json_add_num(o, "tsgs", (double)tsg_count(a, p->pid));
	kmode_proc_json(a, p, o);
	memview_proc_json(a, p, o);
	return o;
}

static cJSON *counters_json(const struct counters *n)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	json_add_num(o, "peersAccepted", (double)n->peers_accepted);
	json_add_num(o, "malformed", (double)n->malformed);
	json_add_num(o, "refusedTsgs", (double)n->refused_tsg);
	json_add_num(o, "unknownResults", (double)n->unknown_result);
	json_add_num(o, "unknownTsgGone", (double)n->unknown_tsg_gone);
	json_add_num(o, "badActivity", (double)n->bad_activity);
	json_add_num(o, "badWake", (double)n->bad_wake);
	json_add_num(o, "badPhase", (double)n->bad_phase);
	json_add_num(o, "turns", (double)n->turns);
	json_add_num(o, "turnsInGap", (double)n->turns_in_gap);
	json_add_num(o, "controlsHeld", (double)n->controls_held);
	json_add_num(o, "rotationChangesHeld", (double)n->rotation_changes_held);
	json_add_num(o, "windowsSent", (double)n->windows_sent);
	json_add_num(o, "windowsEnded", (double)n->windows_ended);
	json_add_num(o, "commands", (double)n->commands);
	json_add_num(o, "results", (double)n->results);
	json_add_num(o, "reconcilePasses", (double)n->passes);
	json_add_num(o, "pageRenewals", (double)n->page_renewals);
	json_add_num(o, "failures", (double)n->failures);
	json_add_num(o, "timeouts", (double)n->timeouts);
	json_add_num(o, "configReloads", (double)n->config_reloads);
	json_add_num(o, "configErrors", (double)n->config_errors);
	json_add_num(o, "verifyReads", (double)n->verify_reads);
	json_add_num(o, "verifyMismatches", (double)n->verify_mismatches);
	json_add_num(o, "reverts", (double)n->reverts);
	json_add_num(o, "badMemUsage", (double)n->bad_mem_usage);
	json_add_num(o, "memorySent", (double)n->memory_sent);
	json_add_num(o, "peersRefused", (double)n->peers_refused);
	json_add_num(o, "claimsRefusedLimit", (double)n->claims_refused_limit);
	json_add_num(o, "claimsRefusedReadback", (double)n->claims_refused_readback);
	json_add_num(o, "logSuppressed", (double)n->log_suppressed);
	return o;
}

/* /proc reads off the loop (procinfo.h). */
static void procinfo_json(const struct agent *a, cJSON *o)
{
	cJSON *p = cJSON_AddObjectToObject(o, "procinfo");
	struct procinfo_stats st;

	if (!p)
		return;
	procinfo_get_stats(a, &st);
	json_add_num(p, "workers", st.workers);
	json_add_num(p, "busy", st.busy);
	json_add_num(p, "queued", st.queued);
	json_add_num(p, "stuck", st.stuck);
	json_add_num(p, "reads", (double)st.reads);
	json_add_num(p, "timeouts", (double)st.timeouts);
	json_add_num(p, "refused", (double)st.refused);
}

static void files_json(const struct agent *a, cJSON *counters)
{
	if (!counters)
		return;
	json_add_num(counters, "stateWrites", (double)a->io->sf.writes);
	json_add_num(counters, "stateWriteErrors", (double)a->io->sf.write_errors);
	json_add_num(counters, "ctlRefused", (double)ctl_refused);
	json_add_num(counters, "ctlTimeouts", (double)ctl_timeouts);
}

/* Every action of the capability table: allowed or not, and what is
 * missing in words for those that are not. */
static void caps_json(struct agent *a, cJSON *o)
{
	cJSON *allowed = cJSON_AddObjectToObject(o, "capabilities");
	cJSON *missing = cJSON_AddObjectToObject(o, "capabilitiesMissing");
	const struct caps_need *tab;
	size_t n;

	if (!allowed || !missing)
		return;
	tab = caps_table(&n);
	for (size_t i = 0; i < n; i++) {
		char why[128];

		cJSON_AddBoolToObject(allowed, tab[i].name, caps_allows(&a->caps, tab[i].action));
		if (caps_missing(&a->caps, tab[i].action, why, sizeof(why))[0])
			cJSON_AddStringToObject(missing, tab[i].name, why);
	}
}

static void direct_json(struct agent *a, cJSON *o)
{
	cJSON *d = cJSON_AddObjectToObject(o, "direct"), *cp;
	struct direct_stats st;

	if (!d)
		return;
	cJSON_AddBoolToObject(d, "running", a->direct != NULL);
	if (a->direct_off[0])
		cJSON_AddStringToObject(d, "off", a->direct_off);
	else
		cJSON_AddNullToObject(d, "off");
	if (a->direct) {
		direct_get_stats(a->direct, &st);
		json_add_num(d, "workers", st.workers);
		json_add_num(d, "busy", st.busy);
		json_add_num(d, "queued", st.queued);
		json_add_num(d, "stuck", st.stuck);
		json_add_num(d, "lost", (double)st.lost);
		json_add_num(d, "maxLost", st.max_lost);
		json_add_num(d, "late", (double)st.late);
		cJSON_AddBoolToObject(d, "stalled", st.stalled);
	}
	cp = cJSON_AddObjectToObject(o, "controlPath");
	for (int i = 0; cp && i < NACTIONS; i++)
		cJSON_AddStringToObject(cp, action_name((enum path_action)i),
					path_mode_name(a->cfg->control_path[i]));
}

static cJSON *agent_json(struct agent *a)
{
	cJSON *o = cJSON_CreateObject(), *counters, *gpus;
	size_t npeers = 0, ntsgs = 0;

	if (!o)
		return NULL;
	for (struct peer *p = a->peers; p; p = p->next)
		npeers++;
	for (struct tsg *t = a->tsgs; t; t = t->next)
		ntsgs++;
	cJSON_AddStringToObject(o, "version", GPUQOS_VERSION);
	cJSON_AddStringToObject(o, "mode", a->kube ? "kubernetes" : "standalone");
	json_add_num(o, "pid", getpid());
	json_add_num(o, "uptimeS", (double)((now_us() - a->started_us) / 1000000u));
	json_add_num(o, "peers", (double)npeers);
	json_add_num(o, "tsgs", (double)ntsgs);
	if (a->cfg->path[0])
		cJSON_AddStringToObject(o, "config", a->cfg->path);
	else
		cJSON_AddNullToObject(o, "config");
	counters = counters_json(&a->n);
	files_json(a, counters);
	cJSON_AddItemToObject(o, "counters", counters);
	caps_json(a, o);
	direct_json(a, o);
	procinfo_json(a, o);
	tracker_json(a, o);
	if (a->kube)
		kmode_json(a, o);
	gpus = gpuinfo_json();
	memview_gpus_json(a, gpus);
	cJSON_AddItemToObject(o, "gpus", gpus);
	if (gpuinfo_error())
		cJSON_AddStringToObject(o, "gpusError", gpuinfo_error());
	else
		cJSON_AddNullToObject(o, "gpusError");
	return o;
}

/* The agent object alone: what `gpuqosctl status` shows, without the
 * cost of every TSG and process. */
static cJSON *status_json(struct agent *a)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddTrueToObject(o, "ok");
	cJSON_AddItemToObject(o, "agent", agent_json(a));
	return o;
}

/* pid 0: everything. */
static cJSON *view_json(struct agent *a, pid_t pid)
{
	cJSON *o = cJSON_CreateObject(), *tsgs, *procs;

	if (!o)
		return NULL;
	cJSON_AddTrueToObject(o, "ok");
	cJSON_AddItemToObject(o, "agent", agent_json(a));
	tsgs = cJSON_AddArrayToObject(o, "tsgs");
	procs = cJSON_AddArrayToObject(o, "processes");
	if (!tsgs || !procs) {
		cJSON_Delete(o);
		return NULL;
	}
	for (struct tsg *t = a->tsgs; t; t = t->next)
		if (!pid || t->pid == pid)
			cJSON_AddItemToArray(tsgs, tsg_json(a, t));
	for (struct proc *p = a->procs; p; p = p->next)
		if (!pid || p->pid == pid)
			cJSON_AddItemToArray(procs, proc_json(a, p));
	memview_uncapped_json(a, o, pid);
	return o;
}

/* ---- requests ---- */

static int get_pid(const cJSON *req, pid_t *pid)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(req, "pid");

	if (!cJSON_IsNumber(j) || j->valuedouble < 1 || j->valuedouble > 4194304 ||
	    j->valuedouble != (double)(int)j->valuedouble)
		return -1;
	*pid = (pid_t)j->valuedouble;
	return 0;
}

static void do_show(struct agent *a, struct ctl_conn *c, const cJSON *req)
{
	pid_t pid;

	if (get_pid(req, &pid) != 0) {
		ctl_error(a, c, "show: \"pid\" must be a positive integer");
		return;
	}
	if (!proc_find(a, pid)) {
		ctl_error(a, c, "show: pid %d is not known to the agent", (int)pid);
		return;
	}
	ctl_answer(a, c, view_json(a, pid));
}

static void do_set_class(struct agent *a, struct ctl_conn *c, const cJSON *req)
{
	const cJSON *cls = cJSON_GetObjectItemCaseSensitive(req, "class");
	enum qos_class k = CLASS_UNMANAGED;
	int remove;
	uint64_t st;
	struct proc *p;
	pid_t pid;
	cJSON *o;

	if (get_pid(req, &pid) != 0 || !cJSON_IsString(cls)) {
		ctl_error(a, c, "set-class: needs \"pid\" (integer) and \"class\" (string)");
		return;
	}
	remove = strcmp(cls->valuestring, "auto") == 0;
	if (!remove && class_parse(cls->valuestring, &k) != 0) {
		ctl_error(a, c, "set-class: class \"%.64s\" is not latency-critical, best-effort, "
				"unmanaged or auto", cls->valuestring);
		return;
	}
	if (procinfo_starttime(pid, &st) != 0) {
		ctl_error(a, c, "set-class: pid %d: no such process", (int)pid);
		return;
	}
	if (state_set(a, pid, st, remove, k) != 0) {
		ctl_error(a, c, "set-class: pid %d: cannot write %s", (int)pid, a->state_path);
		return;
	}
	p = proc_find(a, pid);
	if (p && p->starttime == st) {
		proc_classify(a, p);
		a->dirty = 1;
	}
	log_info("pid %d: class override %s", (int)pid, remove ? "removed" : class_name(k));
	o = cJSON_CreateObject();
	if (o) {
		cJSON_AddTrueToObject(o, "ok");
		json_add_num(o, "pid", pid);
		cJSON_AddStringToObject(o, "class",
					p && remove ? class_name(p->cls) : remove ? "auto" : class_name(k));
	}
	ctl_answer(a, c, o);
}

static void ctl_finish_wait(struct agent *a, struct ctl_conn *c)
{
	cJSON *o = cJSON_CreateObject();

	if (o) {
		cJSON_AddTrueToObject(o, "ok");
		cJSON_AddItemToObject(o, "results", c->results);
	} else {
		cJSON_Delete(c->results);
	}
	c->results = NULL;
	ctl_answer(a, c, o);
}

void ctl_cmd_done(struct agent *a, struct ctl_conn *c, struct cmd *cmd, uint32_t rm_status,
		  uint32_t err, const char *err_word, uint64_t value, uint64_t elapsed_ns,
		  const char *why)
{
	cJSON *o = cJSON_CreateObject();

	if (o) {
		add_hex(o, "tsg", cmd->h_tsg);
		cJSON_AddStringToObject(o, "op", gq_op_name(cmd->op));
		cJSON_AddStringToObject(o, "path", path_name(cmd->path));
		if (why && why[0])
			cJSON_AddStringToObject(o, "error", why);
		json_add_num(o, "rmStatus", rm_status);
		cJSON_AddStringToObject(o, "rmStatusName", rm_status_name(rm_status));
		if (err_word)
			cJSON_AddStringToObject(o, "errno", err_word);
		else
			json_add_num(o, "errno", err);
		if (err_word || err)
			cJSON_AddNullToObject(o, "value"); /* the control did not run */
		else
			json_add_num(o, "value", (double)value);
		json_add_num(o, "elapsedUs", (double)(elapsed_ns / 1000u));
		cJSON_AddItemToArray(c->results, o);
	}
	cmd->ctl = NULL;
	if (c->pending && --c->pending == 0)
		ctl_finish_wait(a, c);
}

/* A TSG no path can reach gets a result of its own saying why. */
static void ctl_unreachable(struct ctl_conn *c, const struct tsg *t, uint32_t op, const char *why)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return;
	add_hex(o, "tsg", t->h_tsg);
	cJSON_AddStringToObject(o, "op", gq_op_name(op));
	cJSON_AddStringToObject(o, "path", "none");
	cJSON_AddStringToObject(o, "error", why);
	json_add_num(o, "rmStatus", 0);
	cJSON_AddStringToObject(o, "rmStatusName", rm_status_name(0));
	cJSON_AddStringToObject(o, "errno", "unavailable");
	cJSON_AddNullToObject(o, "value");
	json_add_num(o, "elapsedUs", 0);
	cJSON_AddItemToArray(c->results, o);
}

static int cmd_applies(const struct tsg *t, pid_t pid, uint32_t op)
{
	/* An unverified claim gets no control, whoever asks. */
	return t->pid == pid && !t->unverified_until &&
	       (op != GQ_OP_PREEMPT || rm_engine_is_gr(t->engine));
}

/* NULL when at least one of the pid's TSGs (or none exists) can be
 * reached; else why the first could not. */
static const char *unreachable_why(struct agent *a, pid_t pid, uint32_t op)
{
	const char *why = NULL;

	for (struct tsg *t = a->tsgs; t; t = t->next) {
		struct path_choice ch;

		if (!cmd_applies(t, pid, op))
			continue;
		ch = tsg_path(a, t, op_action(op));
		if (ch.path != PATH_NONE)
			return NULL;
		if (!why)
			why = ch.why;
	}
	return why;
}

/* preempt (GR TSGs only) and get-timeslice (every TSG): one command per
 * TSG, each on the path path.c chooses for the action. */
static void do_commands(struct agent *a, struct ctl_conn *c, const cJSON *req, uint32_t op)
{
	const char *name = op == GQ_OP_PREEMPT ? "preempt" : "get-timeslice";
	const cJSON *wait = cJSON_GetObjectItemCaseSensitive(req, "wait");
	uint64_t arg = op == GQ_OP_PREEMPT && !cJSON_IsFalse(wait) ? 1 : 0;
	const char *why;
	struct proc *p;
	pid_t pid;

	if (get_pid(req, &pid) != 0 || (wait && !cJSON_IsBool(wait))) {
		ctl_error(a, c, "%s: needs \"pid\" (integer)%s", name,
			  op == GQ_OP_PREEMPT ? " and optional \"wait\" (bool)" : "");
		return;
	}
	p = proc_find(a, pid);
	if (!p) {
		ctl_error(a, c, "%s: pid %d is not known to the agent", name, (int)pid);
		return;
	}
	why = unreachable_why(a, pid, op);
	if (why) {
		ctl_error(a, c, "%s: pid %d: %s", name, (int)pid, why);
		return;
	}
	c->results = cJSON_CreateArray();
	if (!c->results) {
		ctl_error(a, c, "%s: out of memory", name);
		return;
	}
	c->phase = CTL_WAIT;
	c->pending = 1; /* held until every command is out */
	for (struct tsg *t = a->tsgs; t; t = t->next) {
		struct path_choice ch;

		if (!cmd_applies(t, pid, op))
			continue;
		ch = tsg_path(a, t, op_action(op));
		if (ch.path == PATH_NONE)
			ctl_unreachable(c, t, op, ch.why);
		else if (cmd_issue(a, t, ch.path, op, arg, c))
			c->pending++;
		else
			ctl_unreachable(c, t, op, "not sent: the path's queue is full");
	}
	a->dirty = 1; /* the pass after this batch re-arms the wake timer for their deadlines */
	if (--c->pending == 0)
		ctl_finish_wait(a, c);
}

static void ctl_dispatch(struct agent *a, struct ctl_conn *c, const cJSON *req)
{
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(req, "cmd");

	if (!cJSON_IsObject(req) || !cJSON_IsString(cmd)) {
		ctl_error(a, c, "request: not an object with a \"cmd\" string");
		return;
	}
	if (strcmp(cmd->valuestring, "list") == 0)
		ctl_answer(a, c, view_json(a, 0));
	else if (strcmp(cmd->valuestring, "status") == 0)
		ctl_answer(a, c, status_json(a));
	else if (strcmp(cmd->valuestring, "show") == 0)
		do_show(a, c, req);
	else if (strcmp(cmd->valuestring, "set-class") == 0)
		do_set_class(a, c, req);
	else if (strcmp(cmd->valuestring, "preempt") == 0)
		do_commands(a, c, req, GQ_OP_PREEMPT);
	else if (strcmp(cmd->valuestring, "get-timeslice") == 0)
		do_commands(a, c, req, GQ_OP_GET_TIMESLICE);
	else
		ctl_error(a, c, "request: unknown cmd \"%.64s\"", cmd->valuestring);
}

static void ctl_request(struct agent *a, struct ctl_conn *c)
{
	cJSON *req;

	c->in[c->inlen] = '\0';
	/* Stop reading: one request per connection. While its commands run
	 * their own deadlines bound it. */
	if (loop_mod(&a->io->loop, &c->w, 0) != 0) {
		ctl_close(a, c);
		return;
	}
	ctl_arm(a, c, 0);
	if (c->w.dead)
		return;
	req = cJSON_ParseWithLength(c->in, c->inlen);
	if (!req) {
		ctl_error(a, c, "request: not valid JSON");
		return;
	}
	ctl_dispatch(a, c, req);
	cJSON_Delete(req);
}

static void ctl_read(struct agent *a, struct ctl_conn *c)
{
	for (;;) {
		char *nl;
		ssize_t n = recv(c->w.fd, c->in + c->inlen, CTL_REQ_MAX + 1 - c->inlen, MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0) {
			ctl_close(a, c);
			return;
		}
		if (n == 0) { /* the client shut down its side: take what came */
			if (c->inlen == 0)
				ctl_close(a, c);
			else
				ctl_request(a, c);
			return;
		}
		nl = memchr(c->in + c->inlen, '\n', (size_t)n);
		c->inlen += (size_t)n;
		if (nl) {
			c->inlen = (size_t)(nl - c->in);
			ctl_request(a, c);
			return;
		}
		if (c->inlen > CTL_REQ_MAX) {
			c->inlen = 0;
			ctl_error(a, c, "request: larger than %d bytes", CTL_REQ_MAX);
			return;
		}
	}
}

static void on_ctl_conn(struct loop_watch *w, uint32_t events)
{
	struct ctl_conn *c = (struct ctl_conn *)((char *)w - offsetof(struct ctl_conn, w));
	struct agent *a = w->ctx;

	if (c->phase == CTL_READ && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		ctl_read(a, c);
	else if (c->phase == CTL_WRITE && (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
		ctl_flush(a, c);
	else if (c->phase == CTL_DRAIN)
		ctl_drain(a, c);
	else if (events & (EPOLLHUP | EPOLLERR))
		ctl_close(a, c); /* gave up waiting for preempt/get-timeslice */
}

/* One connection too many: told why in one non-blocking send (a fresh
 * socket's buffer takes it), then closed. The others are untouched. */
static void ctl_refuse(int fd)
{
	char msg[128];
	int n = snprintf(msg, sizeof(msg),
			 "{\"ok\":false,\"error\":\"too many control connections (%u open)\"}\n",
			 CTL_CONN_MAX);

	if (send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n)
		log_debug("ctl: refusal not sent: %s", strerror(errno));
	close(fd);
	if (ctl_refused++ == 0 || ctl_refused % 1000 == 0)
		log_warn("ctl: %u connections open: refusing more (%llu refused so far)",
			 CTL_CONN_MAX, (unsigned long long)ctl_refused);
}

static unsigned ctl_open_count(const struct agent *a)
{
	unsigned n = 0;

	for (const struct ctl_conn *c = a->ctls; c; c = c->next)
		n++;
	return n;
}

static void ctl_accept_one(struct agent *a, int fd)
{
	struct ctl_conn *c;

	if (ctl_open_count(a) >= CTL_CONN_MAX) {
		ctl_refuse(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->w.fd = fd;
	c->w.fn = on_ctl_conn;
	c->w.ctx = a;
	/* Added in this batch: no event of this batch can point at them, so
	 * a failure frees c at once. */
	if (loop_timer_add(&a->io->loop, &c->timer, "ctl", on_ctl_timer, a) != 0) {
		close(fd);
		free(c);
		return;
	}
	if (loop_add(&a->io->loop, &c->w, EPOLLIN | EPOLLRDHUP) != 0) {
		loop_timer_del(&c->timer);
		close(fd);
		free(c);
		return;
	}
	c->next = a->ctls;
	a->ctls = c;
	ctl_arm(a, c, CTL_IDLE_MS);
}

static void on_ctl_listen(struct loop_watch *w, uint32_t events)
{
	struct agent *a = w->ctx;

	(void)events;
	for (;;) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_warn("accept on %s: %s", a->opt.ctl_socket, strerror(errno));
			return;
		}
		ctl_accept_one(a, fd);
	}
}

int ctl_listen(struct agent *a)
{
	int fd = unix_listen(a->opt.ctl_socket, SOCK_STREAM, 0600);

	if (fd < 0)
		return -1;
	a->io->ctl_w.fd = fd;
	a->io->ctl_w.fn = on_ctl_listen;
	a->io->ctl_w.ctx = a;
	if (loop_add(&a->io->loop, &a->io->ctl_w, EPOLLIN) != 0)
		return -1;
	log_info("ctl: listening on %s", a->opt.ctl_socket);
	return 0;
}

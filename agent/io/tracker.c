/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tracker.c - the eBPF RM tracer in the node agent (tracker.h): open,
 * dump, consume in the loop, and the kernel's side of the TSG table.
 *
 * Owns: turning tracer events and live-table entries into TSGs and their
 * channels (idempotent, one handler for both: the dump and the ring
 * overlap, and a restarted agent sees both again),
 * the processes only the kernel saw, removal on FREE and EXIT, the values
 * RM accepted, and refusing preempt-agent claims the kernel never saw.
 * Does not own the table's data structure (tsg.c), the policy or the
 * paths; the tracer's programs and pins belong to bpf/.
 */
#include "agent/io/io.h"
#include "agent/io/jsonnum.h"
#include "agent/io/tracker.h"
#include "agent/io/procinfo.h"
#include "common/log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#ifdef GPUQOS_HAVE_BPF
#include "bpf/tsgtrace_api.h"
#endif

int tracker_parse_setting(const char *s, enum tracker_setting *out)
{
	static const struct {
		const char *name;
		enum tracker_setting v;
	} names[] = {
		{ "auto", TRACKER_AUTO }, { "on", TRACKER_ON },	  { "1", TRACKER_ON },
		{ "true", TRACKER_ON },	  { "yes", TRACKER_ON },  { "off", TRACKER_OFF },
		{ "0", TRACKER_OFF },	  { "false", TRACKER_OFF }, { "no", TRACKER_OFF },
	};

	for (size_t i = 0; s && i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcasecmp(s, names[i].name) == 0) {
			*out = names[i].v;
			return 0;
		}
	}
	return -1;
}

const char *tracker_setting_name(enum tracker_setting s)
{
	return s == TRACKER_ON ? "on" : s == TRACKER_OFF ? "off" : "auto";
}

int tracker_active(const struct agent *a)
{
	return a->trk.tt != NULL;
}

uint64_t tracker_next_deadline(const struct agent *a)
{
	uint64_t next = 0;

	for (const struct tsg *t = a->tsgs; t; t = t->next)
		if (t->unverified_until && (next == 0 || t->unverified_until < next))
			next = t->unverified_until;
	return next;
}

/* The channels the tracker knows under the agent's TSGs (struct
 * tsg_kchans), and how many of them the RM holds disabled. */
static void channels_json(const struct agent *a, cJSON *o)
{
	unsigned known = 0, off = 0;

	for (const struct tsg *t = a->tsgs; t; t = t->next) {
		known += t->kch.n;
		off += (unsigned)__builtin_popcount(t->kch.off);
	}
	json_add_num(o, "channels", known);
	json_add_num(o, "channelsDisabled", off);
}

#ifdef GPUQOS_HAVE_BPF

/* ---- the kernel's side of one TSG ---- */

/* One TSG as the kernel saw it, from an event or the live table. */
struct seen {
	pid_t pid;
	rm_handle h_client, h_tsg, h_device;
	uint32_t gpu, engine;
	int32_t fd;
	int ts_set, il_set;
	uint32_t ts, il;
	uint64_t at; /* when RM accepted ts/il, or when the table was read */
};

static void tracker_dump(struct agent *a);

/* ---- procinfo hook: a process met for the first time is read off the
 * loop (procinfo.h); once its facts arrive it gets an entry (and a class)
 * like a connecting peer's, and its TSGs are taken from the live table. */
static void tracker_identified(struct agent *a, pid_t pid, const struct procinfo *pi,
			       const char *why, void *arg)
{
	struct proc *p;

	(void)arg;
	if (!pi) {
		log_debug("pid %d: not tracked: %s", (int)pid, why); /* exited: its EXIT follows */
		return;
	}
	if (!a->trk.tt)
		return;
	p = proc_attach(a, pid, pi);
	if (!p)
		return;
	log_info("pid %d (%s): found by the eBPF tracker, class %s (%s)", (int)pid, p->comm,
		 class_name(p->cls), class_source_name(p->cls_source));
	tracker_dump(a);
	a->dirty = 1;
}
/* ---- end of the procinfo hook */

/* The process owning a TSG the kernel saw, when the agent knows it; a pid
 * whose start time changed is a new process. NULL: not ours to manage
 * (another device than the control device, e.g. a second simulator, or
 * gone), or not known yet (tracker_identified takes it from there). */
static struct proc *tracked_proc(struct agent *a, pid_t pid, int32_t fd)
{
	struct proc *p = proc_find(a, pid);
	uint64_t st;

	if (pid <= 0 || pid == getpid())
		return NULL;
	if (fd < 0 || !procinfo_fd_is(pid, (uint32_t)fd, a->nvidiactl)) {
		a->trk.ignored++;
		log_debug("pid %d: TSG on fd %d ignored: not %s (or gone)", (int)pid, (int)fd,
			  a->nvidiactl);
		return NULL;
	}
	if (p && (p->peer || (procinfo_starttime(pid, &st) == 0 && st == p->starttime)))
		return p;
	/* A read for its preempt agent's connection is as good: that one
	 * attaches the process and takes its TSGs from the live table
	 * (tracker_take_proc), so its claims find them confirmed. */
	if (!procinfo_pending(a, pid, NULL) &&
	    procinfo_read_async(a, pid, tracker_identified, NULL) != 0)
		log_warn("pid %d: not tracked now: its /proc cannot be read (%s)", (int)pid,
			 procinfo_refusal(errno));
	return NULL;
}

/* The channels kept for t's TSG while it was not in the table. */
static void chans_apply(struct agent *a, struct tsg *t)
{
	uint64_t now = now_us();

	for (unsigned i = 0; i < TRACKER_CHANS_PENDING; i++) {
		struct tracker_chan *c = &a->trk.pending[i];

		if (c->pid != t->pid || c->h_client != t->h_client || c->h_tsg != t->h_tsg)
			continue;
		tsg_channel_seen(t, c->h_chan, now);
		(void)tsg_channel_state(t, c->h_chan, c->off, now);
		c->pid = 0;
	}
}

/* The pending channel (pid, client, channel), or NULL. */
static struct tracker_chan *chan_pending(struct agent *a, pid_t pid, rm_handle client,
					 rm_handle chan)
{
	for (unsigned i = 0; i < TRACKER_CHANS_PENDING; i++) {
		struct tracker_chan *c = &a->trk.pending[i];

		if (c->pid == pid && c->h_client == client && c->h_chan == chan)
			return c;
	}
	return NULL;
}

/* Kept until its TSG comes: a free slot, else the oldest taken (bounded;
 * a channel lost so is one whose gate is its preempt agent's word). */
static void chan_keep(struct agent *a, pid_t pid, rm_handle client, rm_handle tsg, rm_handle chan)
{
	struct tracker_chan *c = chan_pending(a, pid, client, chan);

	for (unsigned i = 0; !c && i < TRACKER_CHANS_PENDING; i++)
		if (a->trk.pending[i].pid == 0)
			c = &a->trk.pending[i];
	if (!c) {
		c = &a->trk.pending[a->trk.pending_next];
		a->trk.pending_next = (a->trk.pending_next + 1u) % TRACKER_CHANS_PENDING;
	}
	*c = (struct tracker_chan){ .pid = pid, .h_client = client, .h_tsg = tsg, .h_chan = chan };
}

/* Every pending channel of pid (of its client, unless client is 0) goes. */
static void chans_forget(struct agent *a, pid_t pid, rm_handle client)
{
	for (unsigned i = 0; i < TRACKER_CHANS_PENDING; i++) {
		struct tracker_chan *c = &a->trk.pending[i];

		if (c->pid == pid && (client == 0 || c->h_client == client))
			c->pid = 0;
	}
}

static void tsg_seen(struct agent *a, const struct seen *s)
{
	struct tsg *t = tsg_find(a, s->pid, s->h_client, s->h_tsg);

	if (!t) {
		struct proc *p = tracked_proc(a, s->pid, s->fd);

		if (!p)
			return;
		t = tsg_new(a, p, s->h_client, s->h_tsg);
		if (!t) {
			proc_log(a, p, LOG_LEVEL_ERROR, "pid %d: TSG 0x%x not tracked: %s", (int)s->pid,
				 s->h_tsg, errno == EDQUOT ? "the agent holds AGENT_TSGS_MAX TSGs"
							   : "out of memory");
			return;
		}
		log_debug("pid %d: TSG 0x%x/0x%x engine %u from the eBPF tracker", (int)s->pid,
			  s->h_client, s->h_tsg, s->engine);
	}
	if (t->unverified_until)
		log_debug("pid %d: TSG 0x%x confirmed by the eBPF tracker", (int)s->pid, s->h_tsg);
	t->unverified_until = 0;
	t->claim = TSG_CLAIM_CONFIRMED;
	t->sources |= TSG_SRC_BPF;
	t->h_device = s->h_device;
	/* Fill in what the preempt agent did not know. */
	if (t->gpu == GQ_UNKNOWN && s->gpu != TT_UNKNOWN)
		t->gpu = s->gpu;
	if (t->engine == GQ_UNKNOWN && s->engine != TT_UNKNOWN)
		t->engine = s->engine;
	if (t->fd == GQ_UNKNOWN && s->fd >= 0)
		t->fd = (uint32_t)s->fd;
	if (s->ts_set)
		tsg_observe_ts(t, s->ts, s->at);
	else if (t->engine != GQ_UNKNOWN && rm_engine_is_copy(t->engine))
		/* The kernel saw the alloc and no SET since: the RM holds what
		 * it gives every copy TSG at creation (docs/rm-facts.md). As of
		 * the creation, so any later telling by anyone wins; without
		 * this a restarted agent forgot what it knew before. */
		tsg_observe_ts(t, RM_DEFAULT_TIMESLICE_COPY_US, 1);
	if (s->il_set)
		tsg_observe_il(t, s->il, s->at);
	chans_apply(a, t);
	a->dirty = 1;
}

static int on_live_tsg(void *ctx, const struct tt_obj_key *k, const struct tt_tsg_val *v)
{
	struct seen s = {
		.pid = (pid_t)k->tgid, .h_client = k->hClient, .h_tsg = k->handle,
		.h_device = v->hDevice, .gpu = v->device_id, .engine = v->engine_type, .fd = v->fd,
		.ts_set = !!(v->flags & TT_TSG_TIMESLICE_SET), .ts = (uint32_t)v->timeslice_us,
		.il_set = !!(v->flags & TT_TSG_INTERLEAVE_SET), .il = v->interleave,
		.at = now_us(), /* the table holds the latest values: as of now */
	};

	tsg_seen(ctx, &s);
	return 0;
}

/* tracker_take_proc's dump: the live table's entries of one process. */
struct live_of {
	struct agent *a;
	pid_t pid;
};

static int on_live_tsg_of(void *ctx, const struct tt_obj_key *k, const struct tt_tsg_val *v)
{
	const struct live_of *o = ctx;

	return (pid_t)k->tgid == o->pid ? on_live_tsg(o->a, k, v) : 0;
}

void tracker_take_proc(struct agent *a, pid_t pid)
{
	struct live_of o = { a, pid };
	int n;

	if (!a->trk.tt)
		return;
	n = tsgtrace_dump(a->trk.tt, on_live_tsg_of, &o);
	if (n < 0)
		log_warn("eBPF tracker: reading the live TSG table for pid %d: %s", (int)pid,
			 strerror(-n));
}

/* The process whose client the call named: the live tables key objects
 * by the client's owner, which the agent's own direct controls are not. */
static pid_t ev_owner(const struct tt_event *ev)
{
	return ev->owner_tgid ? (pid_t)ev->owner_tgid : (pid_t)ev->tgid;
}

static void on_tsg_event(struct agent *a, const struct tt_event *ev)
{
	struct seen s = {
		.pid = ev_owner(ev), .h_client = ev->hClient, .h_tsg = ev->hObject,
		.h_device = ev->hParent, .gpu = ev->device_id, .engine = ev->engine_type,
		.fd = ev->fd,
	};

	tsg_seen(a, &s);
}

/* Drops the TSGs of (pid, client) that match: the TSG itself, every TSG
 * under a freed device, or all of them when the client went. */
static void drop_under(struct agent *a, pid_t pid, rm_handle client, rm_handle obj, int what)
{
	struct tsg *t = a->tsgs;

	while (t) {
		struct tsg *next = t->next;

		if (t->pid == pid && t->h_client == client &&
		    (what == 2 || ((what & 1) && t->h_tsg == obj) || ((what & 4) && t->h_device == obj)))
			tsg_drop(a, t);
		t = next;
	}
}

/* A channel the kernel saw under (pid, client, tsg): its TSG's gate is
 * checked against it from now on (tsg_channel_seen). From its alloc event
 * (off -1: a new channel is enabled), or from the live channel table (off:
 * how the RM holds it now, 1 disabled). A TSG the table does not hold yet
 * keeps an event's channel until it comes (chan_keep); not a table
 * entry's: the table is walked again once that TSG is (tracker_dump). */
static void chan_seen(struct agent *a, pid_t pid, rm_handle client, rm_handle tsg,
		      rm_handle chan, int off, int keep)
{
	struct tsg *t = tsg_find(a, pid, client, tsg);
	uint64_t now = now_us();

	if (!t) {
		if (keep)
			chan_keep(a, pid, client, tsg, chan);
		return;
	}
	tsg_channel_seen(t, chan, now);
	if (off >= 0 && tsg_channel_state(t, chan, off, now))
		a->dirty = 1;
}

static void on_channel_event(struct agent *a, const struct tt_event *ev)
{
	if (ev->status == RM_OK)
		chan_seen(a, ev_owner(ev), ev->hClient, ev->hParent, ev->hObject, -1, 1);
}

/* A channel of the pinned table: made before this agent started (or while
 * its events waited in the ring), in the state the RM holds it. */
static int on_live_chan(void *ctx, const struct tt_obj_key *k, const struct tt_chan_val *v)
{
	if (k->tgid == 0 || k->tgid > (uint32_t)INT_MAX || !k->hClient || !k->handle || !v->hTsg ||
	    v->off > 1) {
		log_debug("eBPF tracker: channel entry %u/0x%x/0x%x (TSG 0x%x, off %u) ignored: "
			  "not one the tracer writes", k->tgid, k->hClient, k->handle, v->hTsg, v->off);
		return 0;
	}
	chan_seen(ctx, (pid_t)k->tgid, k->hClient, v->hTsg, k->handle, (int)v->off, 0);
	return 0;
}

/* A DISABLE_CHANNELS the RM accepted, for one channel: the channel's TSG
 * is held off (or back on) as the RM holds it. */
static void on_channel_state(struct agent *a, const struct tt_event *ev)
{
	struct tracker_chan *c;
	uint64_t now = now_us();

	for (struct tsg *t = a->tsgs; t; t = t->next) {
		if (t->pid == ev_owner(ev) && t->h_client == ev->hClient &&
		    tsg_channel_state(t, ev->hObject, ev->value != 0, now)) {
			a->dirty = 1;
			return;
		}
	}
	c = chan_pending(a, ev_owner(ev), ev->hClient, ev->hObject);
	if (c)
		c->off = ev->value != 0;
}

static void channel_gone(struct agent *a, const struct tt_event *ev)
{
	struct tracker_chan *c = chan_pending(a, ev_owner(ev), ev->hClient, ev->hObject);
	uint64_t now = now_us();

	if (c)
		c->pid = 0;
	for (struct tsg *t = a->tsgs; t; t = t->next)
		if (t->pid == ev_owner(ev) && t->h_client == ev->hClient)
			tsg_channel_gone(t, ev->hObject, now);
}

static void on_free_event(struct agent *a, const struct tt_event *ev)
{
	uint32_t cls = ev->hClass;
	int what;

	if (rm_class_is_channel(cls) || cls == TT_UNKNOWN)
		channel_gone(a, ev);
	if (ev->hObject == ev->hClient || rm_class_is_client(cls)) {
		chans_forget(a, ev_owner(ev), ev->hClient);
		what = 2; /* the client */
	} else if (cls == RM_CLASS_TSG)
		what = 1;
	else if (cls == RM_CLASS_DEVICE)
		what = 4;
	else if (cls == TT_UNKNOWN)
		what = 1 | 4;
	else
		return; /* a channel or anything else: no TSG goes with it */
	drop_under(a, ev_owner(ev), ev->hClient, ev->hObject, what);
}

/* A control another process issued on the client (our direct path) names
 * the owner; should the owner table be wrong (client handles reused by
 * several simulators), a unique match on the handles is the same TSG. */
static struct tsg *set_target(struct agent *a, const struct tt_event *ev)
{
	struct tsg *t = tsg_find(a, ev_owner(ev), ev->hClient, ev->hObject), *only = NULL;

	if (t || !(ev->flags & TT_F_FOREIGN))
		return t;
	for (t = a->tsgs; t; t = t->next) {
		if (t->h_client != ev->hClient || t->h_tsg != ev->hObject)
			continue;
		if (only)
			return NULL;
		only = t;
	}
	return only;
}

static void on_set_event(struct agent *a, const struct tt_event *ev)
{
	struct tsg *t = set_target(a, ev);

	if (!t)
		return;
	/* The kernel's own clock of the call: a RESULT of an earlier control
	 * read after this event does not overwrite it. */
	if (ev->type == TT_EV_INTERLEAVE) {
		tsg_observe_il(t, (uint32_t)ev->value, ev->ts_ns / 1000u);
	} else {
		tsg_observe_ts(t, (uint32_t)ev->value, ev->ts_ns / 1000u);
		/* Without a preempt agent the process's own SET is what the
		 * application asked for: the baseline to restore. */
		if (!(ev->flags & TT_F_FOREIGN) && !(t->sources & TSG_SRC_PREEMPT))
			t->obs.app_ts = (uint32_t)ev->value;
	}
	a->dirty = 1;
}

static int on_event(void *ctx, const struct tt_event *ev)
{
	struct agent *a = ctx;

	a->trk.events++;
	switch (ev->type) {
	case TT_EV_TSG:
		on_tsg_event(a, ev);
		break;
	case TT_EV_FREE:
		on_free_event(a, ev);
		break;
	case TT_EV_TIMESLICE:
	case TT_EV_INTERLEAVE:
		on_set_event(a, ev);
		break;
	case TT_EV_EXIT:
		chans_forget(a, (pid_t)ev->tgid, 0);
		tsg_drop_pid(a, (pid_t)ev->tgid, 0, 0, TSG_SRC_ALL);
		break;
	case TT_EV_CHANNEL:
		on_channel_event(a, ev);
		break;
	case TT_EV_CHANNEL_STATE:
		on_channel_state(a, ev);
		break;
	default:
		break; /* clients, devices: the TSG events carry what we need */
	}
	return 0;
}

/* ---- the tracer's life ---- */

static void tracker_consume(struct agent *a)
{
	int n = tsgtrace_consume(a->trk.tt, on_event, a);

	if (n < 0)
		log_warn("eBPF tracker: reading the ring: %s", strerror(-n));
}

/* The live tables: TSGs, then the channels under those the agent holds. */
static void tracker_dump(struct agent *a)
{
	int n = tsgtrace_dump(a->trk.tt, on_live_tsg, a);

	if (n < 0)
		log_warn("eBPF tracker: reading the live TSG table: %s", strerror(-n));
	n = tsgtrace_dump_channels(a->trk.tt, on_live_chan, a);
	if (n < 0)
		log_warn("eBPF tracker: reading the live channel table: %s", strerror(-n));
}

static void on_ring(struct loop_watch *w, uint32_t events)
{
	(void)events;
	tracker_consume(w->ctx);
}

static void on_tracer_log(void *ctx, const char *line)
{
	(void)ctx;
	log_info("eBPF tracker: %s", line);
}

/* 0 with the tracer running, else -1 with trk.off saying why. */
static int tracker_open(struct agent *a)
{
	struct tsgtrace_opts o = { .pin_dir = a->trk.pin_dir, .log = on_tracer_log };
	char err[2048], missing[128];

	if (!caps_allows(&a->caps, CAPS_BPF)) {
		snprintf(a->trk.off, sizeof(a->trk.off), "the eBPF tracker needs %s",
			 caps_missing(&a->caps, CAPS_BPF, missing, sizeof(missing)));
		return -1;
	}
	a->trk.tt = tsgtrace_open(&o, err, sizeof(err));
	if (!a->trk.tt) {
		snprintf(a->trk.off, sizeof(a->trk.off), "the eBPF tracker cannot be opened: %.300s", err);
		return -1;
	}
	a->trk.inherited = tsgtrace_inherited(a->trk.tt);
	a->io->trk_w.fd = tsgtrace_fd(a->trk.tt);
	a->io->trk_w.fn = on_ring;
	a->io->trk_w.ctx = a;
	return 0;
}

int tracker_init(struct agent *a)
{
	a->io->trk_w.fd = -1;
	if (a->trk.setting == TRACKER_OFF) {
		snprintf(a->trk.off, sizeof(a->trk.off), "off (--bpf off)");
		log_info("eBPF tracker: off; TSGs come from preempt agents only");
		return 0;
	}
	if (tracker_open(a) != 0) {
		log_warn("%s%s", a->trk.off,
			 a->trk.setting == TRACKER_ON ? "" : "; TSGs come from preempt agents only");
		return a->trk.setting == TRACKER_ON ? -1 : 0;
	}
	/* The table first (TSGs from before we started), then what waits in
	 * the ring: records already there raise no wake-up, so drain before
	 * the first wait. */
	tracker_dump(a);
	tracker_consume(a);
	if (loop_add(&a->io->loop, &a->io->trk_w, EPOLLIN) != 0)
		return -1;
	log_info("eBPF tracker: %s, pins %s%s, %u TSG(s) known", tsgtrace_attach_mode(a->trk.tt),
		 a->trk.pin_dir ? a->trk.pin_dir : TSGTRACE_DEFAULT_PIN_DIR,
		 (a->trk.inherited & TSGTRACE_INHERITED_LINKS) ? ", programs were attached (no gap)"
		 : (a->trk.inherited & TSGTRACE_INHERITED_TABLES) ? ", tables re-used"
								    : "",
		 (unsigned)tsg_count(a, 0));
	return 0;
}

void tracker_stop(struct agent *a)
{
	if (!a->trk.tt)
		return;
	loop_del(&a->io->loop, &a->io->trk_w);
	tsgtrace_close(a->trk.tt);
	a->trk.tt = NULL;
}

void tracker_tick(struct agent *a)
{
	uint64_t now = now_us(), next = tracker_next_deadline(a);
	struct tsg *t;

	if (!a->trk.tt || next == 0 || next > now)
		return;
	/* A full ring drops events but the table is still exact: look again
	 * before calling anyone a liar. */
	tracker_consume(a);
	tracker_dump(a);
	t = a->tsgs;
	while (t) {
		struct tsg *n = t->next;

		if (t->unverified_until && t->unverified_until <= now) {
			a->trk.refused_claims++;
			proc_log(a, t->proc, LOG_LEVEL_WARN,
				 "pid %d: preempt agent's TSG 0x%x/0x%x refused: the eBPF tracker never "
				 "saw pid %d allocate it", (int)t->pid, t->h_client, t->h_tsg, (int)t->pid);
			tsg_drop(a, t);
		}
		t = n;
	}
}

static void counters_json(struct agent *a, cJSON *o)
{
	struct tsgtrace_counters c;
	cJSON *cn;

	if (tsgtrace_counters(a->trk.tt, &c) != 0) {
		cJSON_AddNullToObject(o, "counters");
		return;
	}
	cn = cJSON_AddObjectToObject(o, "counters");
	for (unsigned i = 0; cn && i < TT_CNT_MAX; i++)
		json_add_num(cn, tsgtrace_counter_name(i), (double)c.v[i]);
	if (cn)
		json_add_num(cn, "bad_records", (double)c.bad_records);
}

void tracker_json(struct agent *a, cJSON *agent_obj)
{
	cJSON *o = cJSON_AddObjectToObject(agent_obj, "tracker"), *inh;

	if (!o)
		return;
	cJSON_AddStringToObject(o, "setting", tracker_setting_name(a->trk.setting));
	cJSON_AddStringToObject(o, "mode", a->trk.tt ? tsgtrace_attach_mode(a->trk.tt) : "off");
	if (a->trk.off[0])
		cJSON_AddStringToObject(o, "off", a->trk.off);
	else
		cJSON_AddNullToObject(o, "off");
	cJSON_AddStringToObject(o, "pinDir", a->trk.pin_dir ? a->trk.pin_dir : TSGTRACE_DEFAULT_PIN_DIR);
	inh = cJSON_AddObjectToObject(o, "inherited");
	if (inh) {
		cJSON_AddBoolToObject(inh, "tables", !!(a->trk.inherited & TSGTRACE_INHERITED_TABLES));
		cJSON_AddBoolToObject(inh, "links", !!(a->trk.inherited & TSGTRACE_INHERITED_LINKS));
		cJSON_AddBoolToObject(inh, "recreated", !!(a->trk.inherited & TSGTRACE_RECREATED));
	}
	json_add_num(o, "events", (double)a->trk.events);
	json_add_num(o, "refusedClaims", (double)a->trk.refused_claims);
	json_add_num(o, "ignoredTsgs", (double)a->trk.ignored);
	channels_json(a, o);
	if (a->trk.tt)
		counters_json(a, o);
	else
		cJSON_AddNullToObject(o, "counters");
}

#else /* !GPUQOS_HAVE_BPF */

int tracker_init(struct agent *a)
{
	a->io->trk_w.fd = -1;
	snprintf(a->trk.off, sizeof(a->trk.off), "%s",
		 a->trk.setting == TRACKER_OFF ? "off (--bpf off)"
					       : "this gpuqos-agent was built without the eBPF tracker");
	if (a->trk.setting == TRACKER_ON) {
		log_error("--bpf on: %s", a->trk.off);
		return -1;
	}
	log_info("eBPF tracker: %s; TSGs come from preempt agents only", a->trk.off);
	return 0;
}

void tracker_stop(struct agent *a)
{
	(void)a;
}

void tracker_tick(struct agent *a)
{
	(void)a;
}

void tracker_take_proc(struct agent *a, pid_t pid)
{
	(void)a;
	(void)pid;
}

void tracker_json(struct agent *a, cJSON *agent_obj)
{
	cJSON *o = cJSON_AddObjectToObject(agent_obj, "tracker");

	if (!o)
		return;
	cJSON_AddStringToObject(o, "setting", tracker_setting_name(a->trk.setting));
	cJSON_AddStringToObject(o, "mode", "off");
	cJSON_AddStringToObject(o, "off", a->trk.off);
	if (a->trk.pin_dir)
		cJSON_AddStringToObject(o, "pinDir", a->trk.pin_dir);
	else
		cJSON_AddNullToObject(o, "pinDir");
	cJSON_AddNullToObject(o, "inherited");
	json_add_num(o, "events", 0);
	json_add_num(o, "refusedClaims", 0);
	json_add_num(o, "ignoredTsgs", 0);
	channels_json(a, o);
	cJSON_AddNullToObject(o, "counters");
}

#endif

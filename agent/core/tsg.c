/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tsg.c - the tables of processes and TSGs: lookup, upsert, drop, and a
 * process's class (override > config rules, or > its pod's annotation in
 * Kubernetes mode, kube_mode.c). A TSG lives while one of its
 * sources (the eBPF tracker, the preempt agent) holds it. Also owns the
 * limits on claims (AGENT_CLAIMS_*, AGENT_TSGS_MAX), what the agent believes
 * the RM holds (tsg_observe_*) and the per-process log limit. Does not own
 * sockets, the tracker's events (tracker.c) or the decision of what a
 * TSG's settings should be (reconcile.c, policy.c).
 */
#include "agent/core/core.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ratelimit_allow(struct ratelimit *r, uint64_t now, unsigned burst, uint64_t window_us,
		    unsigned long *suppressed)
{
	*suppressed = 0;
	if (now - r->window_start >= window_us || r->window_start == 0) {
		*suppressed = r->suppressed;
		r->window_start = now ? now : 1;
		r->lines = 0;
		r->suppressed = 0;
	}
	if (r->lines >= burst) {
		r->suppressed++;
		return 0;
	}
	r->lines++;
	return 1;
}

void proc_log(struct agent *a, struct proc *p, enum log_level lv, const char *fmt, ...)
{
	unsigned long dropped;
	char line[512];
	va_list ap;

	if (!ratelimit_allow(&p->log, core_now_us(), AGENT_PROC_LOG_BURST, AGENT_PROC_LOG_WINDOW_MS * 1000ull,
			     &dropped)) {
		a->n.log_suppressed++;
		return;
	}
	if (dropped)
		log_warn("pid %d: %lu log line(s) it caused were suppressed (limit %u per %u s)",
			 (int)p->pid, dropped, AGENT_PROC_LOG_BURST, AGENT_PROC_LOG_WINDOW_MS / 1000u);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_line(lv, "%s", line);
}

/* Lines suppressed since the last one was written: said as p goes. */
static void proc_log_flush(struct proc *p)
{
	if (p->log.suppressed)
		log_warn("pid %d: %lu log line(s) it caused were suppressed (limit %u per %u s)",
			 (int)p->pid, p->log.suppressed, AGENT_PROC_LOG_BURST,
			 AGENT_PROC_LOG_WINDOW_MS / 1000u);
	p->log.suppressed = 0;
}

struct uid_use *uid_use_get(struct agent *a, uid_t uid)
{
	struct uid_use *u;

	for (u = a->uids; u; u = u->next)
		if (u->uid == uid)
			return u;
	/* Bounded: a new entry needs a connected peer of that uid, and peers
	 * are bounded (AGENT_PEERS_MAX). */
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->uid = uid;
	u->next = a->uids;
	a->uids = u;
	return u;
}

void uid_use_free_all(struct agent *a)
{
	while (a->uids) {
		struct uid_use *u = a->uids;

		a->uids = u->next;
		free(u);
	}
}

static unsigned proc_bucket(pid_t pid)
{
	return ((uint32_t)pid * 2654435761u) >> 22; /* 10 bits: AGENT_HASH_BUCKETS */
}

static unsigned tsg_bucket(pid_t pid, rm_handle h_client, rm_handle h_tsg)
{
	uint32_t k = (uint32_t)pid * 2654435761u ^ h_client * 2246822519u ^ h_tsg * 3266489917u;

	return (k ^ k >> 16) & (AGENT_HASH_BUCKETS - 1u);
}

_Static_assert(AGENT_HASH_BUCKETS == 1024u, "proc_bucket takes 10 bits");

struct proc *proc_find(struct agent *a, pid_t pid)
{
	for (struct proc *p = a->proc_hash[proc_bucket(pid)]; p; p = p->hnext)
		if (p->pid == pid)
			return p;
	return NULL;
}

/* Kubernetes mode's class of p: its pod's, never what the process says. */
static void proc_classify_from_pod(struct agent *a, struct proc *p)
{
	const struct pod_facts *f;

	p->win_ask.ask = WINDOW_ASK_NONE;
	p->win_ask.after_us = 0;
	if (!p->pod_uid[0]) {
		if (!p->nopod_logged)
			log_info("pid %d (%s): in no Kubernetes pod (cgroup %s): unmanaged", (int)p->pid,
				 p->comm, p->cgroup[0] ? p->cgroup : "?");
		p->nopod_logged = 1;
		p->cls = CLASS_UNMANAGED;
		p->cls_source = CLS_SRC_NO_POD;
		return;
	}
	f = pod_find(a, p->pod_uid);
	if (!f) {
		/* Not listed yet, or gone: leave its TSGs alone until it is. */
		p->cls = CLASS_UNMANAGED;
		p->cls_source = CLS_SRC_POD_UNKNOWN;
		return;
	}
	p->cls = f->cls;
	p->cls_source = f->cls_source;
	p->win_ask = f->windows;
}

unsigned pod_reclassify(struct agent *a, const char *uid, const char *name)
{
	unsigned changed = 0;

	for (struct proc *p = a->procs; p; p = p->next) {
		enum qos_class before = p->cls;

		if (uid && strcmp(p->pod_uid, uid) != 0)
			continue;
		proc_classify(a, p);
		if (p->cls != before) {
			changed++;
			log_info("pid %d (%s): class %s -> %s (%s%s%s)", (int)p->pid, p->comm,
				 class_name(before), class_name(p->cls), class_source_name(p->cls_source),
				 name ? ", pod " : "", name ? name : "");
		}
	}
	a->dirty = 1; /* reconcile in this batch: within the second */
	return changed;
}

void proc_classify(struct agent *a, struct proc *p)
{
	const struct state_entry *o = state_find(a, p->pid, p->starttime);
	const char *run_class = a->cfg->trust_run_class && p->run_class[0] ? p->run_class : NULL;
	enum class_source source = CLS_SRC_DEFAULT;

	if (o) {
		p->cls = o->cls;
		p->cls_source = CLS_SRC_OVERRIDE;
		return;
	}
	if (a->mode == AGENT_MODE_KUBE) {
		proc_classify_from_pod(a, p); /* the pod's annotation, never the process */
		return;
	}
	p->cls = config_classify(a->cfg, p->cgroup, p->exe, run_class, &source);
	p->cls_source = source;
}

void proc_reclassify_all(struct agent *a)
{
	for (struct proc *p = a->procs; p; p = p->next)
		proc_classify(a, p);
	a->dirty = 1;
}

/* A connecting process: refresh its facts. A different start time means
 * the pid was reused, so whatever we knew belongs to a dead process. */
struct proc *proc_attach(struct agent *a, pid_t pid, const struct procinfo *pi)
{
	struct proc *p = proc_find(a, pid);

	if (p && p->starttime != pi->starttime) {
		log_info("pid %d: start time changed, forgetting the old process", (int)pid);
		tsg_drop_pid(a, pid, 0, 0, TSG_SRC_ALL);
	}
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return NULL;
		p->pid = pid;
		p->busy.percent = -1.0; /* no launch report yet (lcbusy.c) */
		p->busy.launches_per_s = -1.0;
		p->next = a->procs;
		a->procs = p;
		p->hnext = a->proc_hash[proc_bucket(pid)];
		a->proc_hash[proc_bucket(pid)] = p;
	}
	p->starttime = pi->starttime;
	memcpy(p->comm, pi->comm, sizeof(p->comm));
	memcpy(p->exe, pi->exe, sizeof(p->exe));
	memcpy(p->cgroup, pi->cgroup, sizeof(p->cgroup));
	memcpy(p->run_class, pi->run_class, sizeof(p->run_class));
	memcpy(p->run_windows, pi->run_windows, sizeof(p->run_windows));
	memcpy(p->pod_uid, pi->pod_uid, sizeof(p->pod_uid));
	memcpy(p->container_id, pi->container_id, sizeof(p->container_id));
	proc_classify(a, p);
	changes_proc(a, p); /* its pod's process count */
	return p;
}

/* A process and its places in rotations (rotate.c made them; its TSGs,
 * which point at them, are gone first); off a->procs already. */
static void proc_free(struct agent *a, struct proc *p)
{
	for (struct proc **pp = &a->proc_hash[proc_bucket(p->pid)]; *pp; pp = &(*pp)->hnext)
		if (*pp == p) {
			*pp = p->hnext;
			break;
		}
	while (p->rot) {
		struct rot_member *m = p->rot;

		p->rot = m->next;
		free(m);
	}
	free(p);
}

/* Forget disconnected processes that exited (or whose pid was reused). */
void proc_gc(struct agent *a)
{
	struct proc **pp = &a->procs;

	while (*pp) {
		struct proc *p = *pp;

		if (!p->peer && !proc_alive(a, p->pid, p->starttime)) {
			log_debug("pid %d (%s) exited", (int)p->pid, p->comm);
			proc_log_flush(p);
			tsg_drop_pid(a, p->pid, 0, 0, TSG_SRC_ALL);
			changes_proc(a, p);
			*pp = p->next;
			proc_free(a, p);
			continue;
		}
		pp = &p->next;
	}
}

struct tsg *tsg_find(struct agent *a, pid_t pid, rm_handle h_client, rm_handle h_tsg)
{
	for (struct tsg *t = a->tsg_hash[tsg_bucket(pid, h_client, h_tsg)]; t; t = t->hnext)
		if (t->pid == pid && t->h_client == h_client && t->h_tsg == h_tsg)
			return t;
	return NULL;
}

/* A TSG nobody has described yet: every observed value unknown. */
struct tsg *tsg_new(struct agent *a, struct proc *p, rm_handle h_client, rm_handle h_tsg)
{
	struct tsg *t;

	if (a->ntsgs >= AGENT_TSGS_MAX) {
		errno = EDQUOT;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	t->pid = p->pid;
	t->proc = p;
	p->ntsgs++;
	t->h_client = h_client;
	t->h_tsg = h_tsg;
	t->gpu = t->engine = t->fd = GQ_UNKNOWN;
	t->obs.applied_ts = t->obs.app_ts = t->obs.applied_il = GQ_UNKNOWN;
	t->want.desired_ts = GQ_UNKNOWN;
	t->revert[TSG_TIMESLICE].set_value = t->revert[TSG_INTERLEAVE].set_value = GQ_UNKNOWN;
	t->want.desired_il = POLICY_INTERLEAVE_LEAVE;
	t->sent.il_refused = IL_REFUSED_NONE;
	/* Only its preempt agent's report can say it can be gated: a TSG the
	 * eBPF tracker saw first may have no channels yet. */
	t->gate.no_gate = 1;
	t->want.reason = "not reconciled yet";
	/* Nothing decided yet, as the faces show it until the first pass
	 * records it (record.c). */
	t->rec.cls = p->cls;
	t->rec.cls_source = p->cls_source;
	t->rec.gpu = t->rec.ts = t->rec.ts_applied = t->rec.ts_desired = GQ_UNKNOWN;
	t->rec.il = t->rec.il_applied = GQ_UNKNOWN;
	t->rec.il_desired = POLICY_INTERLEAVE_LEAVE;
	t->rec.path = PATH_NONE;
	t->rec.state = TSG_PENDING;
	t->next = a->tsgs;
	a->tsgs = t;
	t->hnext = a->tsg_hash[tsg_bucket(t->pid, h_client, h_tsg)];
	a->tsg_hash[tsg_bucket(t->pid, h_client, h_tsg)] = t;
	a->ntsgs++;
	a->dirty = 1;
	return t;
}

/* The TSG is no longer a preempt agent's claim: it stops counting toward
 * its process's and uid's limits. */
static void tsg_uncharge(struct tsg *t)
{
	if (!t->charged)
		return;
	t->charged->claims--;
	t->proc->claims--;
	t->charged = NULL;
}

/* Off a->tsgs already. */
static void tsg_free(struct agent *a, struct tsg *t)
{
	for (struct tsg **pp = &a->tsg_hash[tsg_bucket(t->pid, t->h_client, t->h_tsg)]; *pp;
	     pp = &(*pp)->hnext)
		if (*pp == t) {
			*pp = t->hnext;
			break;
		}
	changes_tsg(a, t, 1);
	tsg_uncharge(t);
	t->proc->ntsgs--;
	a->ntsgs--;
	free(t);
	a->dirty = 1;
}

void tsg_observe_ts(struct tsg *t, uint32_t us, uint64_t at)
{
	if (at < t->obs.ts_at)
		return; /* someone told the RM something else since */
	t->obs.applied_ts = us;
	t->obs.ts_at = at;
}

void tsg_observe_il(struct tsg *t, uint32_t level, uint64_t at)
{
	if (at < t->obs.il_at)
		return;
	t->obs.applied_il = level;
	t->obs.il_at = at;
}

int tsg_unverified(const struct tsg *t)
{
	return t->unverified_until != 0 || t->claim != TSG_CLAIM_CONFIRMED;
}

void tsg_inputs_of(const struct tsg *t, struct tsg_inputs *in)
{
	memset(in, 0, sizeof(*in)); /* compared with memcmp: no stray padding */
	in->h_device = t->h_device;
	in->gpu = t->gpu;
	in->engine = t->engine;
	in->fd = t->fd;
	in->gen = t->gen;
	in->sources = t->sources;
	in->applied_ts = t->obs.applied_ts;
	in->app_ts = t->obs.app_ts;
	in->applied_il = t->obs.applied_il;
	in->said = t->gate.said;
	in->gated = t->gate.gated;
	in->no_gate = t->gate.no_gate;
	in->leased = t->gate.leased;
	in->claim = (int)t->claim;
	in->unverified = t->unverified_until != 0;
	in->last_failed = t->sent.last_failed;
	in->has_error = t->sent.error[0] != '\0';
	in->il_refused = t->sent.il_refused;
	in->backoff_until = t->sent.backoff_until;
}

int tsg_inputs_same(const struct tsg_inputs *x, const struct tsg_inputs *y)
{
	return memcmp(x, y, sizeof(*x)) == 0;
}

/* A TSG p's preempt agent reports for the first time, within the limits. */
static struct tsg *tsg_claim_new(struct agent *a, struct proc *p, const struct gq_tsg *m)
{
	struct tsg *t;

	if (p->claims >= AGENT_CLAIMS_PER_PROC || (p->uid && p->uid->claims >= AGENT_CLAIMS_PER_UID)) {
		errno = EDQUOT;
		return NULL;
	}
	t = tsg_new(a, p, m->h_client, m->h_tsg);
	if (!t)
		return NULL;
	if (p->uid) {
		t->charged = p->uid;
		p->uid->claims++;
		p->claims++;
	}
	if (a->hooks.kernel_confirms && a->hooks.kernel_confirms(a)) {
		t->unverified_until = core_now_us() + TRACKER_CLAIM_GRACE_MS * 1000ull;
		log_debug("pid %d: TSG 0x%x/0x%x held until the eBPF tracker confirms it",
			  (int)p->pid, m->h_client, m->h_tsg);
	} else {
		/* Nothing but its word says it exists: read it back first. */
		t->claim = TSG_CLAIM_READBACK;
	}
	return t;
}

/* A preempt agent's report. With the tracker running, the kernel is the
 * authority: a TSG it has not seen is held unverified (tracker.c refuses
 * it after the grace), and the values RM accepted come from its events.
 * Without it, the report is what the RM was last told through the
 * process's own ioctls, as of now: newer than anything older we believe. */
struct tsg *tsg_upsert(struct agent *a, struct proc *p, const struct gq_tsg *m, uint32_t gen)
{
	struct tsg *t = tsg_find(a, p->pid, m->h_client, m->h_tsg);
	uint64_t now = core_now_us();
	struct tsg_inputs before, after;
	int kernel;

	if (!t) {
		t = tsg_claim_new(a, p, m); /* new: dirty (tsg_new) */
		if (!t)
			return NULL;
	}
	tsg_inputs_of(t, &before);
	kernel = (t->sources & TSG_SRC_BPF) != 0;
	t->sources |= TSG_SRC_PREEMPT;
	t->h_device = m->h_device;
	if (!kernel || m->device_instance != GQ_UNKNOWN)
		t->gpu = m->device_instance;
	if (!kernel || m->engine_type != GQ_UNKNOWN)
		t->engine = m->engine_type;
	if (!kernel || t->fd == GQ_UNKNOWN)
		t->fd = m->fd;
	/* "Unknown" only says the preempt agent saw no SET: what our direct
	 * controls set since stands. */
	if (!kernel && m->timeslice_us != GQ_UNKNOWN)
		tsg_observe_ts(t, m->timeslice_us, now);
	if (!kernel && m->interleave != GQ_UNKNOWN)
		tsg_observe_il(t, m->interleave, now);
	t->obs.app_ts = m->app_timeslice_us;
	/* Only its preempt agent gates it, so only it knows. */
	tsg_gate_note(t, (m->flags & GQ_TSG_F_GATED) != 0, now);
	t->gate.no_gate = (m->flags & GQ_TSG_F_NO_GATE) != 0;
	t->gate.leased = (m->flags & GQ_TSG_F_LEASED) != 0;
	t->gen = gen;
	tsg_inputs_of(t, &after);
	if (!tsg_inputs_same(&before, &after))
		a->dirty = 1;
	return t;
}

void tsg_drop(struct agent *a, struct tsg *t)
{
	for (struct tsg **pp = &a->tsgs; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			tsg_free(a, t);
			return;
		}
	}
}

/* Withdraws `sources` from the pid's TSGs (with keep_gen, only from those
 * not re-reported in generation gen: SYNCED says they no longer exist)
 * and drops each TSG no source holds any more. A preempt agent going away
 * thus leaves the TSGs the tracker still sees. */
void tsg_drop_pid(struct agent *a, pid_t pid, int keep_gen, uint32_t gen, unsigned sources)
{
	struct tsg **pp = &a->tsgs;

	while (*pp) {
		struct tsg *t = *pp;

		if (t->pid == pid && !(keep_gen && t->gen == gen) && (t->sources & sources)) {
			t->sources &= ~sources;
			if (!(t->sources & TSG_SRC_PREEMPT))
				tsg_uncharge(t);
			if (t->sources) {
				pp = &t->next;
				continue;
			}
			*pp = t->next;
			tsg_free(a, t);
			continue;
		}
		pp = &t->next;
	}
}

size_t tsg_count(struct agent *a, pid_t pid)
{
	const struct proc *p;

	if (!pid)
		return a->ntsgs;
	p = proc_find(a, pid);
	return p ? p->ntsgs : 0;
}

/* What the application (libcuda) asked for; the driver default when the
 * preempt agent never saw it ask. */
uint32_t tsg_baseline(const struct tsg *t)
{
	if (t->obs.app_ts != GQ_UNKNOWN)
		return t->obs.app_ts;
	return rm_engine_is_gr(t->engine) ? RM_DEFAULT_TIMESLICE_GR_US : RM_DEFAULT_TIMESLICE_COPY_US;
}

uint32_t tsg_effective_ts(const struct tsg *t)
{
	/* Never set by anyone: the TSG runs at the driver's default. */
	return t->obs.applied_ts != GQ_UNKNOWN ? t->obs.applied_ts : tsg_baseline(t);
}

int tsg_ts_differs(const struct tsg *t)
{
	return t->want.desired_ts != GQ_UNKNOWN && t->want.desired_ts != tsg_effective_ts(t);
}

void tsg_revert_arm(struct tsg *t, enum tsg_setting which, uint32_t v)
{
	t->revert[which].set_value = v;
	t->revert[which].set_at = core_now_us();
}

int tsg_revert_wait(struct agent *a, struct tsg *t, enum tsg_setting which, uint64_t now)
{
	struct tsg_revert *r = &t->revert[which];
	int ts = which == TSG_TIMESLICE;
	uint32_t want = ts ? t->want.desired_ts : (uint32_t)t->want.desired_il;
	uint32_t held = ts ? tsg_effective_ts(t) : tsg_effective_il(t);

	if (r->set_value != GQ_UNKNOWN && r->set_value == want) {
		/* Our SET of this very value took and the value is gone: a
		 * revert, counted once (the next SET that takes arms it again). */
		r->set_value = GQ_UNKNOWN;
		if (now - r->set_at >= AGENT_REVERT_QUIET_MS * 1000ull) {
			r->recent = 0; /* it held: no fight */
			r->backoff_ms = 0;
		}
		r->recent++;
		r->total++;
		a->n.reverts++;
		if (r->recent > AGENT_REVERT_FREE) {
			r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2u : AGENT_REVERT_BACKOFF_MIN_MS;
			if (r->backoff_ms > AGENT_REVERT_BACKOFF_MAX_MS)
				r->backoff_ms = AGENT_REVERT_BACKOFF_MAX_MS;
			r->until = now + r->backoff_ms * 1000ull;
			snprintf(t->sent.error, sizeof(t->sent.error),
				 "%s set back to %u%s %" PRIu64 " times; next SET in %u ms",
				 ts ? "timeslice" : "interleave level", held, ts ? " us" : "", r->recent,
				 r->backoff_ms);
			proc_log(a, t->proc, LOG_LEVEL_WARN,
				 "pid %d: TSG 0x%x: its %s was set back to %u%s after ours took "
				 "(%" PRIu64 " times); setting %u%s again in %u ms", (int)t->pid, t->h_tsg,
				 ts ? "timeslice" : "interleave level", held, ts ? " us" : "", r->recent,
				 want, ts ? " us" : "", r->backoff_ms);
		}
	}
	if (r->until <= now) {
		r->until = 0;
		return 0;
	}
	return 1;
}

/* The level cannot be read back (GET_INTERLEAVE_LEVEL is not exported), but
 * the preempt agent reports every level RM accepted on the TSG, so "none"
 * means RM's own starting level. */
uint32_t tsg_effective_il(const struct tsg *t)
{
	return t->obs.applied_il != GQ_UNKNOWN ? t->obs.applied_il : POLICY_INTERLEAVE_DRIVER_DEFAULT;
}

int tsg_il_differs(const struct tsg *t)
{
	return t->want.desired_il >= 0 && t->want.desired_il != t->sent.il_refused &&
	       tsg_effective_il(t) != (uint32_t)t->want.desired_il;
}

int tsg_gate_differs(const struct tsg *t)
{
	return t->gate.want != t->gate.gated;
}

/* When a gate believed in at `now` ended at the latest: a leased gate's
 * preempt agent enables the TSG by itself once the lease of the last
 * renewal runs out, so an agent that hears of it late (it was stopped, or
 * its loop was) does not count the time it was away as gated. */
static uint64_t gate_end_bound(const struct tsg *t, uint64_t now)
{
	if (!t->gate.leased || !t->gate.lapse_by || now <= t->gate.lapse_by)
		return now;
	return t->gate.lapse_by > t->gate.since ? t->gate.lapse_by : t->gate.since;
}

int tsg_kchans_off(const struct tsg *t)
{
	return t->kch.n == 0 || t->kch.off == (1u << t->kch.n) - 1u;
}

/* gate.gated from the word and the channels; the time held off with it. */
static void gate_update(struct tsg *t, uint64_t now)
{
	int gated = t->gate.said && tsg_kchans_off(t);

	if (!gated)
		now = gate_end_bound(t, now);
	if (gated && !t->gate.gated) {
		t->gate.since = now;
		t->gate.count++;
	} else if (!gated && t->gate.gated && t->gate.since) {
		uint64_t d = now > t->gate.since ? now - t->gate.since : 0;

		t->gate.total_us += d;
		if (d > t->gate.longest_us)
			t->gate.longest_us = d;
		t->gate.since = 0;
	}
	t->gate.gated = gated;
}

void tsg_gate_note(struct tsg *t, int gated, uint64_t now)
{
	t->gate.said = gated != 0;
	gate_update(t, now);
}

static int kchan_index(const struct tsg *t, rm_handle h)
{
	for (unsigned i = 0; i < t->kch.n; i++)
		if (t->kch.h[i] == h)
			return (int)i;
	return -1;
}

void tsg_channel_seen(struct tsg *t, rm_handle h, uint64_t now)
{
	if (kchan_index(t, h) >= 0 || t->kch.n == TSG_KCHANS_MAX)
		return;
	t->kch.h[t->kch.n++] = h; /* a new channel is enabled */
	gate_update(t, now);
}

void tsg_channel_gone(struct tsg *t, rm_handle h, uint64_t now)
{
	int i = kchan_index(t, h);
	uint32_t low;

	if (i < 0)
		return;
	/* Keep the bits in step with the handles moved down. */
	low = t->kch.off & ((1u << i) - 1u);
	t->kch.off = low | ((t->kch.off >> 1) & ~((1u << i) - 1u));
	memmove(&t->kch.h[i], &t->kch.h[i + 1], (t->kch.n - (unsigned)i - 1u) * sizeof(t->kch.h[0]));
	t->kch.n--;
	gate_update(t, now);
}

int tsg_channel_state(struct tsg *t, rm_handle h, int off, uint64_t now)
{
	int i = kchan_index(t, h);

	if (i < 0)
		return 0;
	if (off)
		t->kch.off |= 1u << i;
	else
		t->kch.off &= ~(1u << i);
	gate_update(t, now);
	return 1;
}

static uint64_t gated_now_us(const struct tsg *t, uint64_t now)
{
	now = gate_end_bound(t, now);
	return t->gate.gated && t->gate.since && now > t->gate.since ? now - t->gate.since : 0;
}

uint64_t tsg_gated_total_us(const struct tsg *t, uint64_t now)
{
	return t->gate.total_us + gated_now_us(t, now);
}

uint64_t tsg_gated_longest_us(const struct tsg *t, uint64_t now)
{
	uint64_t cur = gated_now_us(t, now);

	return cur > t->gate.longest_us ? cur : t->gate.longest_us;
}

enum tsg_state tsg_state_of(const struct tsg *t)
{
	/* A rotating BE changes gates every period: a gate on its way is its
	 * steady state, not "pending" (and a pod's annotation must not flip
	 * with every turn). A gate that failed is a failure. */
	int gate_op = t->sent.inflight_op == GQ_OP_GATE || t->sent.inflight_op == GQ_OP_UNGATE;
	/* A read-back on its way changes nothing either (reconcile_verify):
	 * what it finds decides, once it answers. */
	int read_op = t->sent.inflight_op == GQ_OP_GET_TIMESLICE;
	int gate_failed = tsg_gate_differs(t) && t->sent.last_failed &&
			  (t->sent.last_op == GQ_OP_GATE || t->sent.last_op == GQ_OP_UNGATE);
	int differs = tsg_ts_differs(t) || tsg_il_differs(t);

	if (t->claim == TSG_CLAIM_REFUSED)
		return TSG_REFUSED;
	/* An unmanaged process's claims are not read back: they count for
	 * nothing either way. */
	if (t->unverified_until ||
	    (t->claim == TSG_CLAIM_READBACK && t->proc->cls != CLASS_UNMANAGED))
		return TSG_UNVERIFIED;
	if (t->sent.blocked && t->sent.blocked_stalled)
		return TSG_STALLED;
	if (t->sent.inflight && !gate_op && !read_op)
		return TSG_PENDING;
	if (t->proc->cls == CLASS_UNMANAGED)
		return TSG_UNMANAGED;
	if (gate_failed)
		return TSG_FAILED;
	if (differs && (t->sent.last_failed || t->sent.last_timeout || t->sent.blocked))
		return TSG_FAILED;
	if (t->want.desired_il >= 0 && t->want.desired_il == t->sent.il_refused)
		return TSG_FAILED;
	return differs ? TSG_PENDING : TSG_CONVERGED;
}

void tsg_engine_name(uint32_t engine, char *buf, size_t n)
{
	if (rm_engine_is_gr(engine))
		snprintf(buf, n, "GR%u", engine - RM_ENGINE_GR0);
	else if (rm_engine_is_copy(engine))
		snprintf(buf, n, "COPY%u", engine - RM_ENGINE_COPY0);
	else
		snprintf(buf, n, "ENGINE_0x%x", engine);
}

const char *tsg_state_name(enum tsg_state s)
{
	switch (s) {
	case TSG_CONVERGED:
		return "converged";
	case TSG_PENDING:
		return "pending";
	case TSG_FAILED:
		return "failed";
	case TSG_STALLED:
		return "stalled";
	case TSG_UNMANAGED:
		return "unmanaged";
	case TSG_UNVERIFIED:
		return "unverified";
	case TSG_REFUSED:
		return "refused";
	}
	return "?";
}

const char *tsg_state(const struct agent *a, const struct tsg *t)
{
	(void)a;
	return tsg_state_name(tsg_state_of(t));
}

void proc_free_all(struct agent *a)
{
	while (a->tsgs) {
		struct tsg *t = a->tsgs;

		a->tsgs = t->next;
		tsg_free(a, t);
	}
	while (a->procs) {
		struct proc *p = a->procs;

		a->procs = p->next;
		proc_log_flush(p);
		proc_free(a, p);
	}
	uid_use_free_all(a);
}

uint32_t proc_wake_lead_us(const struct proc *p)
{
	return p && p->peer && p->peer->policy_valid ? GQ_WAKE_LEAD(p->peer->policy_wake) : 0;
}

/* The facts path.c chooses from, for action act on t. */
struct path_in tsg_path_facts(struct agent *a, const struct tsg *t, enum path_action act)
{
	const struct peer *peer = t->proc->peer;

	return (struct path_in){
		.mode = a->cfg->control_path[act],
		.action = act,
		.peer = peer && peer->hello && !peer->broken,
		.peer_stalled = peer && peer->stalled,
		.direct_caps = caps_allows(&a->caps, CAPS_DIRECT),
		.interleave_caps = caps_allows(&a->caps, CAPS_INTERLEAVE),
		.direct_running = a->direct != NULL,
		.direct_stalled = a->hooks.direct_stalled && a->hooks.direct_stalled(a),
		.fd_known = t->fd != GQ_UNKNOWN,
	};
}

struct path_choice tsg_path(struct agent *a, const struct tsg *t, enum path_action act)
{
	struct path_in in = tsg_path_facts(a, t, act);

	return path_select(&in);
}

/* The time between two controls one TSG may get: AGENT_CONTROLS_PER_S
 * a second, or what its rotation needs where turns or leases are short
 * (one GATE, UNGATE or renewal per turn or quarter lease, whichever is
 * shorter) and two to spare. */
static uint64_t control_interval_us(const struct agent *a)
{
	const struct policy_config *cfg = &a->cfg->policy;
	uint64_t step_ms = cfg->gate_lease_ms / 4u, rate = AGENT_CONTROLS_PER_S;

	if (cfg->rotate_period_ms < step_ms)
		step_ms = cfg->rotate_period_ms;
	if (step_ms && (1000u + step_ms - 1u) / step_ms + 2u > rate)
		rate = (1000u + step_ms - 1u) / step_ms + 2u;
	return 1000000u / rate;
}

/* The bound on controls per TSG (a generic cell rate algorithm: at most
 * AGENT_CONTROLS_BURST at once, then one per control_interval_us), so no
 * preempt agent's reports, however they flip, make the agent flood
 * another process. Read-backs change nothing and are not counted. An
 * UNGATE that ends a gate whose GATE was counted goes at once (counted):
 * the bound never keeps a BE gated; a BE that says it is gated when no
 * GATE was sent gets its UNGATEs within the bound. */
int tsg_control_allowed(struct agent *a, struct tsg *t, uint32_t op, uint64_t now)
{
	uint64_t iv = control_interval_us(a), slack = (AGENT_CONTROLS_BURST - 1u) * iv;

	if (op == GQ_OP_GET_TIMESLICE)
		return 1;
	if (t->sent.bucket_tat > now + slack &&
	    !(op == GQ_OP_UNGATE && t->gate.gated && t->gate.ungate_owed)) {
		a->n.controls_held += t->sent.held_until == 0;
		t->sent.held_until = t->sent.bucket_tat - slack;
		return 0;
	}
	return 1;
}

void tsg_control_charge(struct agent *a, struct tsg *t, uint32_t op, uint64_t now)
{
	if (op == GQ_OP_GET_TIMESLICE)
		return;
	if (op == GQ_OP_GATE)
		t->gate.ungate_owed = 1;
	else if (op == GQ_OP_UNGATE)
		t->gate.ungate_owed = 0;
	t->sent.bucket_tat = (t->sent.bucket_tat > now ? t->sent.bucket_tat : now) +
			     control_interval_us(a);
	t->sent.held_until = 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - Prometheus metrics, /healthz and /readyz of the node agent
 * (docs/metrics.md). The loop copies what it needs out of the agent's
 * tables in one function (collect), renders the text exposition from the
 * copy and publishes it as an immutable, reference-counted buffer; the
 * HTTP server (libmicrohttpd's own thread) serves whichever buffer is
 * current and reads nothing else but three atomics. /healthz and /readyz
 * have a listener of their own besides (--health-address), whose thread
 * reads those atomics alone: clients that hold every slot of the metrics
 * port cannot fail the kubelet's probes. Does not own the tables it reads
 * or the values in them.
 */
#include "agent/io/metrics.h"

#include "agent/io/gpuinfo.h"
#include "agent/io/io.h"
#include "agent/io/kube_mode.h"
#include "agent/io/memview.h"
#include "agent/io/tracker.h"
#include "common/httpd.h"
#include "common/log.h"
#include "common/utf8.h"
#ifdef GPUQOS_HAVE_BPF
#include "bpf/tsgtrace_api.h"
#endif

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define MT_BUCKETS 1024u
#define MT_OUTCOMES 8u      /* distinct (op, status) counted per TSG */
#define MT_STALL_MIN_US 10000000ull /* /healthz: the loop silent this long */
#define MT_PATHS 3                  /* enum path */
#define MT_DROPS 8

/* ---- the published snapshot ---- */

struct snap {
	atomic_uint refs;
	size_t len;
	char text[];
};

static void snap_unref(void *p)
{
	struct snap *s = p;

	if (s && atomic_fetch_sub(&s->refs, 1) == 1)
		free(s);
}

/* ---- what the metrics keep per TSG ---- */

struct moutcome {
	uint32_t op;
	char status[40];
	uint64_t n;
};

struct mtsg {
	struct mtsg *next;
	pid_t pid;
	uint32_t client, tsg;
	double created;             /* unix seconds: the agent first held it */
	uint64_t unconverged_since; /* now_us() clock, 0 while converged */
	uint64_t preemptions;
	struct moutcome out[MT_OUTCOMES];
	unsigned nout;
	uint64_t other; /* outcomes past MT_OUTCOMES distinct ones */
	unsigned seen;  /* the render pass that last saw its TSG */
};

static const double lat_bounds[] = { 50e-6,  100e-6, 150e-6, 200e-6, 250e-6, 300e-6,
				     350e-6, 400e-6, 450e-6, 500e-6, 750e-6, 1e-3,
				     2.5e-3, 5e-3,   10e-3,  100e-3, 1.0 };
#define NLAT (sizeof(lat_bounds) / sizeof(lat_bounds[0]))

struct mhist {
	uint64_t b[NLAT + 1]; /* per bucket, not cumulative; the last is +Inf */
	uint64_t count;
	double sum;
};

enum { READY = 0, NOT_SYNCED = 1, NO_TRACKER = 2 };

static struct {
	char address[256];
	char health_address[256];
	struct httpd *d;
	struct httpd *health;
	pthread_mutex_t mu;   /* guards cur: held for the swap or a reference */
	struct snap *cur;
	atomic_int ready;     /* READY or why not */
	_Atomic uint64_t loop_us;  /* last loop pass (now_us) */
	_Atomic uint64_t stall_us; /* /healthz fails past this */
	/* the loop's side */
	double start_wall;
	uint64_t last_render_us;
	uint64_t render_gap_us; /* grows with the table: rendering stays under 5 % */
	unsigned pass;
	struct mtsg *bucket[MT_BUCKETS];
	struct mhist lat[MT_PATHS];
	uint64_t timeouts[MT_PATHS];
} M = { .address = METRICS_DEFAULT_ADDRESS,
	.health_address = METRICS_DEFAULT_HEALTH_ADDRESS,
	.mu = PTHREAD_MUTEX_INITIALIZER };

/* ---- a growing text buffer ---- */

struct mbuf {
	char *p;
	size_t len, cap;
	int oom;
	int fixed; /* p is not ours to grow */
};

static void __attribute__((format(printf, 2, 3))) bput(struct mbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = 1;
			return;
		}
		if (b->p && (size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		if (b->fixed) {
			b->oom = 1;
			return;
		}
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
}

static void bput_bytes(void *b, const char *p, size_t n)
{
	bput(b, "%.*s", (int)n, p);
}

/* A label value in the exposition format's escapes, as valid UTF-8 (a
 * process name is any bytes, and one invalid value fails the whole
 * scrape); "" values are left out (Prometheus treats an empty label as an
 * absent one). */
static void blabel(struct mbuf *b, int *first, const char *name, const char *v)
{
	if (!v || !*v)
		return;
	bput(b, "%s%s=\"", *first ? "" : ",", name);
	*first = 0;
	utf8_prom_label(v, bput_bytes, b);
	bput(b, "\"");
}

static void bfamily(struct mbuf *b, const char *name, const char *type, const char *help)
{
	bput(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* ---- the side table ---- */

static unsigned mt_hash(pid_t pid, uint32_t client, uint32_t tsg)
{
	uint32_t h = (uint32_t)pid * 2654435761u ^ client * 2246822519u ^ tsg * 3266489917u;

	return (h ^ (h >> 15)) % MT_BUCKETS;
}

static double wall_now(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct mtsg *mt_get(pid_t pid, uint32_t client, uint32_t tsg)
{
	unsigned h = mt_hash(pid, client, tsg);
	struct mtsg *m;

	for (m = M.bucket[h]; m; m = m->next)
		if (m->pid == pid && m->client == client && m->tsg == tsg)
			return m;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->pid = pid;
	m->client = client;
	m->tsg = tsg;
	m->created = wall_now();
	m->seen = M.pass;
	m->next = M.bucket[h];
	M.bucket[h] = m;
	return m;
}

/* TSGs the last pass did not see are gone: so are their series. */
static void mt_sweep(void)
{
	for (unsigned i = 0; i < MT_BUCKETS; i++) {
		struct mtsg **pp = &M.bucket[i];

		while (*pp) {
			struct mtsg *m = *pp;

			if (m->seen == M.pass) {
				pp = &m->next;
				continue;
			}
			*pp = m->next;
			free(m);
		}
	}
}

static void mt_free_all(void)
{
	M.pass++;
	mt_sweep();
}

/* ---- control outcomes (the control_ended hook) ---- */

static void outcome_status(uint32_t rm_status, uint32_t err, int timed_out, char *out, size_t n)
{
	const char *name;

	if (timed_out)
		snprintf(out, n, "timeout");
	else if (err == GQ_ERR_UNKNOWN_TSG)
		snprintf(out, n, "unknown_tsg");
	else if (err == GQ_ERR_EXPIRED)
		snprintf(out, n, "expired");
	else if (err == GQ_ERR_BAD_OP)
		snprintf(out, n, "bad_op");
	else if (err)
		snprintf(out, n, "%s", (name = strerrorname_np((int)err)) ? name : "errno");
	else if (strcmp((name = rm_status_name(rm_status)), "NV_ERR_(unknown)") == 0)
		snprintf(out, n, "NV_STATUS_0x%x", rm_status);
	else
		snprintf(out, n, "%s", name);
}

static void hist_observe(struct mhist *h, double v)
{
	size_t i = 0;

	while (i < NLAT && v > lat_bounds[i])
		i++;
	h->b[i]++;
	h->count++;
	h->sum += v;
}

static void control_ended(const struct tsg *t, uint32_t op, int path, uint32_t rm_status,
			  uint32_t err, int timed_out, uint64_t elapsed_ns)
{
	struct mtsg *m;
	char st[40];
	unsigned i;

	if (path < 0 || path >= MT_PATHS)
		path = 0;
	if (timed_out)
		M.timeouts[path]++;
	else if (!err)
		hist_observe(&M.lat[path], (double)elapsed_ns / 1e9);
	if (!t || !(m = mt_get(t->pid, t->h_client, t->h_tsg)))
		return;
	outcome_status(rm_status, err, timed_out, st, sizeof(st));
	if (op == GQ_OP_PREEMPT && !timed_out && !err && rm_status == RM_OK)
		m->preemptions++;
	for (i = 0; i < m->nout; i++)
		if (m->out[i].op == op && strcmp(m->out[i].status, st) == 0)
			break;
	if (i == m->nout && m->nout == MT_OUTCOMES) {
		m->other++;
		return;
	}
	if (i == m->nout) {
		m->out[i].op = op;
		snprintf(m->out[i].status, sizeof(m->out[i].status), "%s", st);
		m->nout++;
	}
	m->out[i].n++;
}

void metrics_control_ended(struct agent *a, const struct tsg *t, const struct cmd *c,
			   const struct cmd_outcome *o)
{
	(void)a;
	if (!M.d)
		return;
	control_ended(t, c->op, (int)c->path, o->rm_status, o->err,
		      o->err_word && strcmp(o->err_word, "timeout") == 0, o->elapsed_ns);
}

/* ---- collect: the only reader of the agent's tables ---- */

struct mrow {
	pid_t pid;
	uint32_t client, tsg, gpu, engine;
	uint32_t ts_applied, ts_desired, il_applied;
	int32_t il_desired;
	enum qos_class cls;
	int counted, converged, rotating, gated;
	uint64_t gates, gated_us, gated_longest_us;
	/* Its process's launches (lcbusy.c): share 0..1, -1 unknown; 0/1. */
	double launch_active;
	int launch_bound;
	uint32_t wake_lead_us; /* the wake its preempt agent was asked for, 0: none */
	uint32_t span_us;         /* its process's request span (a fresh PHASE); GQ_UNKNOWN: none */
	uint32_t window_after_us; /* the window schedule asked of its process; GQ_UNKNOWN: none */
	uint32_t window_held;     /* its preempt agent's answer (0/1); GQ_UNKNOWN: none or none yet */
	/* Its process's window decision (proc.win, window.c): the after
	 * given (GQ_UNKNOWN: none), or why they were refused (NULL: not). */
	uint32_t windows_given_us;
	const char *windows_refused;
	const struct proc *proc; /* its process's WAKE counts (wake.have), or NULL */
	const char *ns, *pod, *container, *pod_uid, *uuid, *path, *comm;
	char engine_name[24];
	char id[640]; /* its identity labels, rendered */
	struct mtsg *m;
};

struct mdrop {
	const char *reason;
	uint64_t n;
};

#define MT_ROTATIONS 64

struct magent {
	const char *mode;
	unsigned npeers;
	struct counters n;
	int bpf_attached;
	uint64_t bpf_events, bpf_ignored, bpf_rm_calls;
	struct mdrop drops[MT_DROPS];
	size_t ndrops;
	int kube, kube_synced;
	struct kube_stats ks;
	size_t kube_pods;
	/* Processes in each runlist's rotation (rotate.c; the first
	 * MT_ROTATIONS runlists with one). */
	struct {
		uint32_t gpu, engine;
		unsigned procs;
	} rot[MT_ROTATIONS];
	size_t nrot;
};

/* One more process in the rotation of m's runlist. */
static void rot_count(struct magent *g, const struct rot_member *m)
{
	size_t i = 0;

	while (i < g->nrot && (g->rot[i].gpu != m->gpu || g->rot[i].engine != m->engine))
		i++;
	if (i == g->nrot && g->nrot < MT_ROTATIONS) {
		g->rot[i].gpu = m->gpu;
		g->rot[i].engine = m->engine;
		g->rot[i].procs = 0;
		g->nrot++;
	}
	if (i < g->nrot)
		g->rot[i].procs++;
}

static void collect_agent(struct agent *a, struct magent *g)
{
	memset(g, 0, sizeof(*g));
	g->mode = a->opt.standalone ? "standalone" : "kubernetes";
	g->npeers = a->npeers;
	g->n = a->n;
	g->bpf_attached = tracker_active(a);
	g->bpf_events = a->trk.events;
	g->bpf_ignored = a->trk.ignored;
	for (const struct proc *p = a->procs; p; p = p->next)
		for (const struct rot_member *m = p->rot; m; m = m->next)
			if (m->active)
				rot_count(g, m);
#ifdef GPUQOS_HAVE_BPF
	struct tsgtrace_counters c;

	if (a->trk.tt && tsgtrace_counters(a->trk.tt, &c) == 0) {
		for (unsigned i = 0; i < TT_CNT_DROP_MAX && g->ndrops < MT_DROPS; i++)
			g->drops[g->ndrops++] = (struct mdrop){ tsgtrace_counter_name(i), c.v[i] };
		g->bpf_rm_calls = c.v[TT_CNT_RM_CALLS];
	}
#endif
	if (a->kube) {
		g->kube = 1;
		g->kube_synced = kube_client_synced(a->kube->client);
		kube_client_stats(a->kube->client, &g->ks);
		g->kube_pods = kube_client_pod_count(a->kube->client);
	}
}

static void row_id(struct mrow *r)
{
	struct mbuf b = { r->id, 0, sizeof(r->id), 0, 1 };
	char pid[16], client[16], tsg[16];
	int first = 1;

	snprintf(pid, sizeof(pid), "%d", (int)r->pid);
	snprintf(client, sizeof(client), "0x%x", r->client);
	snprintf(tsg, sizeof(tsg), "0x%x", r->tsg);
	blabel(&b, &first, "pid", pid);
	blabel(&b, &first, "client", client);
	blabel(&b, &first, "tsg", tsg);
	blabel(&b, &first, "namespace", r->ns);
	blabel(&b, &first, "pod", r->pod);
	blabel(&b, &first, "container", r->container);
	/* A cut id would be worse than none: fall back to the handles. */
	if (b.oom)
		snprintf(r->id, sizeof(r->id), "pid=\"%d\",client=\"0x%x\",tsg=\"0x%x\"", (int)r->pid,
			 r->client, r->tsg);
}

/* Every field of struct agent, proc and tsg the metrics read is read
 * here, into rows[] (room for a->ntsgs) and *g. A TSG's decisions are
 * its record (record.c): what the last reconcile pass decided and what
 * the RM holds, not the model. */
static size_t collect(struct agent *a, struct mrow *rows, size_t max, struct magent *g,
		      uint64_t now)
{
	size_t n = 0;

	collect_agent(a, g);
	for (const struct tsg *t = a->tsgs; t && n < max; t = t->next) {
		const struct proc *p = t->proc;
		const struct tsg_record *rec = &t->rec;
		struct mrow *r = &rows[n++];

		memset(r, 0, sizeof(*r));
		r->pid = t->pid;
		r->client = t->h_client;
		r->tsg = t->h_tsg;
		r->gpu = rec->gpu;
		r->engine = t->engine;
		tsg_engine_name(t->engine, r->engine_name, sizeof(r->engine_name));
		r->ts_applied = rec->ts_applied;
		r->ts_desired = rec->ts_desired;
		r->il_applied = rec->il_applied;
		r->il_desired = rec->il_desired;
		r->cls = rec->cls;
		r->counted = rec->counted;
		r->converged = rec->state == TSG_CONVERGED;
		r->rotating = rec->rotating;
		r->gated = t->gate.gated;
		r->gates = t->gate.count;
		r->gated_us = tsg_gated_total_us(t, now);
		r->gated_longest_us = tsg_gated_longest_us(t, now);
		r->launch_active = p && p->busy.percent >= 0 ? p->busy.percent / 100.0 : -1.0;
		r->launch_bound = rec->launch_bound;
		r->wake_lead_us = rec->wake_lead_us;
		r->span_us = p && phase_fresh(p, now) && p->phase.span_us ? p->phase.span_us
									     : GQ_UNKNOWN;
		r->window_after_us =
			p && p->peer && p->peer->win.on ? p->peer->win.after_us : GQ_UNKNOWN;
		r->window_held = p && peer_window_held(p->peer, now) >= 0
					 ? (uint32_t)p->peer->win_state.on
					 : GQ_UNKNOWN;
		r->windows_given_us = GQ_UNKNOWN;
		r->windows_refused = NULL;
		if (rec->win_decided && rm_engine_is_gr(t->engine)) {
			if (rec->win_why == WINDOW_GIVEN)
				r->windows_given_us = rec->win_after_us;
			else if (rec->win_why != WINDOW_WHY_OFF && rec->win_why != WINDOW_WHY_NO_LC)
				r->windows_refused = window_why_name(rec->win_why);
		}
		r->proc = p && p->wake.have ? p : NULL;
		r->pod_uid = p ? p->pod_uid : "";
		r->comm = p ? p->comm : "";
		r->uuid = rec->gpu != GQ_UNKNOWN ? gpuinfo_uuid(rec->gpu) : NULL;
		r->path = path_name(rec->path);
		kmode_proc_pod(a, p, &r->ns, &r->pod, &r->container);
		row_id(r);
	}
	return n;
}

/* ---- rendering ---- */

static void render_tsg_info(struct mbuf *b, const struct mrow *rows, size_t n)
{
	char gpu[16];

	bfamily(b, "gpuqos_tsg_info", "gauge",
		"A TSG the agent holds (value 1), with its process, pod, GPU, engine, class and "
		"control path.");
	for (size_t i = 0; i < n; i++) {
		const struct mrow *r = &rows[i];
		int first = 0;

		snprintf(gpu, sizeof(gpu), "%u", r->gpu);
		bput(b, "gpuqos_tsg_info{%s", r->id);
		blabel(b, &first, "pod_uid", r->pod_uid);
		blabel(b, &first, "gpu", r->gpu != GQ_UNKNOWN ? gpu : NULL);
		blabel(b, &first, "UUID", r->uuid);
		blabel(b, &first, "engine", r->engine_name);
		blabel(b, &first, "class", class_name(r->cls));
		blabel(b, &first, "control_path", r->path);
		blabel(b, &first, "comm", r->comm);
		bput(b, "} 1\n");
	}
}

/* One gauge per TSG from a u32 field (GQ_UNKNOWN: no sample). */
static void render_tsg_u32(struct mbuf *b, const struct mrow *rows, size_t n, const char *name,
			   const char *help, size_t off, double scale)
{
	bfamily(b, name, "gauge", help);
	for (size_t i = 0; i < n; i++) {
		uint32_t v = *(const uint32_t *)((const char *)&rows[i] + off);

		if (v != GQ_UNKNOWN)
			bput(b, "%s{%s} %.9g\n", name, rows[i].id, (double)v * scale);
	}
}

static void render_tsg_controls(struct mbuf *b, const struct mrow *rows, size_t n)
{
	bfamily(b, "gpuqos_tsg_controls_total", "counter",
		"Controls on the TSG that finished, by operation and outcome (an RM status "
		"name such as NV_OK, timeout, or the executor's error).");
	for (size_t i = 0; i < n; i++) {
		const struct mtsg *m = rows[i].m;

		for (unsigned k = 0; m && k < m->nout; k++)
			bput(b, "gpuqos_tsg_controls_total{%s,op=\"%s\",status=\"%s\"} %llu\n", rows[i].id,
			     gq_op_name(m->out[k].op), m->out[k].status, (unsigned long long)m->out[k].n);
		if (m && m->other)
			bput(b, "gpuqos_tsg_controls_total{%s,op=\"other\",status=\"other\"} %llu\n",
			     rows[i].id, (unsigned long long)m->other);
	}
	bfamily(b, "gpuqos_tsg_preemptions_total", "counter",
		"PREEMPT controls the RM accepted on the TSG.");
	for (size_t i = 0; i < n; i++)
		if (rows[i].m)
			bput(b, "gpuqos_tsg_preemptions_total{%s} %llu\n", rows[i].id,
			     (unsigned long long)rows[i].m->preemptions);
	bfamily(b, "gpuqos_tsg_created_timestamp_seconds", "gauge",
		"When the agent first held the TSG (Unix time, within a render interval).");
	for (size_t i = 0; i < n; i++)
		if (rows[i].m)
			bput(b, "gpuqos_tsg_created_timestamp_seconds{%s} %.3f\n", rows[i].id,
			     rows[i].m->created);
	bfamily(b, "gpuqos_tsg_converged", "gauge",
		"1 when the RM holds the TSG's desired settings, else 0.");
	for (size_t i = 0; i < n; i++)
		bput(b, "gpuqos_tsg_converged{%s} %d\n", rows[i].id, rows[i].converged);
	bfamily(b, "gpuqos_tsg_rotating", "gauge",
		"1 when the TSG takes turns with the other BEs of its runlist, else 0.");
	for (size_t i = 0; i < n; i++)
		bput(b, "gpuqos_tsg_rotating{%s} %d\n", rows[i].id, rows[i].rotating);
	bfamily(b, "gpuqos_tsg_gated", "gauge",
		"1 when its preempt agent reports the TSG's channels disabled (and, with the eBPF "
		"tracker, the RM holds them disabled), else 0.");
	for (size_t i = 0; i < n; i++)
		bput(b, "gpuqos_tsg_gated{%s} %d\n", rows[i].id, rows[i].gated);
	bfamily(b, "gpuqos_tsg_gates_total", "counter",
		"Times its preempt agent reported the TSG's channels disabled (rotation turns away).");
	for (size_t i = 0; i < n; i++)
		bput(b, "gpuqos_tsg_gates_total{%s} %llu\n", rows[i].id,
		     (unsigned long long)rows[i].gates);
	bfamily(b, "gpuqos_tsg_gated_seconds_total", "counter",
		"Time the TSG's channels were disabled, as its preempt agent reported.");
	for (size_t i = 0; i < n; i++)
		bput(b, "gpuqos_tsg_gated_seconds_total{%s} %.6f\n", rows[i].id,
		     (double)rows[i].gated_us / 1e6);
	bfamily(b, "gpuqos_tsg_gated_longest_seconds", "gauge",
		"The longest time the TSG's channels stayed disabled at once, the current period "
		"included (in a rotation of n BEs: n - 1 turns).");
	for (size_t i = 0; i < n; i++)
		bput(b, "gpuqos_tsg_gated_longest_seconds{%s} %.6f\n", rows[i].id,
		     (double)rows[i].gated_longest_us / 1e6);
}

static uint64_t wake_requests(const struct proc *p)
{
	return p->wake.requests;
}

static uint64_t wake_not_issued(const struct proc *p)
{
	return p->wake.not_issued;
}

static uint64_t wake_stopped(const struct proc *p)
{
	return (uint64_t)p->wake.stopped;
}

/* One family of its process's wake counts, on every TSG of a process that
 * reported them. */
static void wake_family(struct mbuf *b, const char *name, const char *type, const char *help,
			const struct mrow *rows, size_t n, uint64_t (*get)(const struct proc *))
{
	bfamily(b, name, type, help);
	for (size_t i = 0; i < n; i++)
		if (rows[i].proc)
			bput(b, "%s{%s} %llu\n", name, rows[i].id,
			     (unsigned long long)get(rows[i].proc));
}

/* How its process's wakes went, from its preempt agent's WAKE (the same on
 * every TSG of the process); absent until the process reported. */
static void render_wakes(struct mbuf *b, const struct mrow *rows, size_t n)
{
	static const char *const judged[] = { "hit", "wasted", "beaten" };

	wake_family(b, "gpuqos_tsg_wake_requests_total", "counter",
		    "Periodic-request starts its process's preempt agent saw while a wake was asked.",
		    rows, n, wake_requests);
	bfamily(b, "gpuqos_tsg_wakes_total", "counter",
		"Wakes its process's preempt agent issued and judged by the next request: hit (it "
		"came within the reach), wasted (later), beaten (before the wake).");
	for (size_t i = 0; i < n; i++) {
		const struct proc *p = rows[i].proc;
		uint64_t v[3];

		if (!p)
			continue;
		v[0] = p->wake.hits;
		v[1] = p->wake.wasted;
		v[2] = p->wake.beaten;
		for (size_t k = 0; k < 3; k++)
			bput(b, "gpuqos_tsg_wakes_total{%s,result=\"%s\"} %llu\n", rows[i].id,
			     judged[k], (unsigned long long)v[k]);
	}
	wake_family(b, "gpuqos_tsg_wakes_not_issued_total", "counter",
		    "Wakes its process's preempt agent did not issue: its thread ran more than half a "
		    "lead late, or libcuda failed.",
		    rows, n, wake_not_issued);
	wake_family(b, "gpuqos_tsg_wake_stopped", "gauge",
		    "1 while its process's wakes are stopped by their own judging (too many wasted).",
		    rows, n, wake_stopped);
}

static void render_tsg_launches(struct mbuf *b, const struct mrow *rows, size_t n)
{
	bfamily(b, "gpuqos_tsg_launch_active_ratio", "gauge",
		"Share of the time its process's own GPU launches keep it active (smoothed), "
		"from its preempt agent; absent when unknown.");
	for (size_t i = 0; i < n; i++)
		if (rows[i].launch_active >= 0)
			bput(b, "gpuqos_tsg_launch_active_ratio{%s} %.3f\n", rows[i].id,
			     rows[i].launch_active);
	bfamily(b, "gpuqos_tsg_launch_bound", "gauge",
		"1 when its process is a launch-bound LC (its runlist is left at the driver's "
		"values), else 0.");
	for (size_t i = 0; i < n; i++)
		bput(b, "gpuqos_tsg_launch_bound{%s} %d\n", rows[i].id, rows[i].launch_bound);
	bfamily(b, "gpuqos_tsg_wake_lead_seconds", "gauge",
		"How far ahead of its periodic requests the node agent asked its process's preempt "
		"agent to wake its context (an LC beside a BE); 0: no wake asked.");
	for (size_t i = 0; i < n; i++)
		bput(b, "gpuqos_tsg_wake_lead_seconds{%s} %.6f\n", rows[i].id,
		     rows[i].wake_lead_us / 1e6);
	render_tsg_u32(b, rows, n, "gpuqos_tsg_request_span_seconds",
		       "How long after its due time its process's periodic request is over: the 99th "
		       "percentile of its last 128, from its preempt agent's PHASE; absent without one.",
		       offsetof(struct mrow, span_us), 1e-6);
	render_tsg_u32(b, rows, n, "gpuqos_tsg_window_after_seconds",
		       "A BE kept off its GPU around each request of the periodic LC beside it: how long "
		       "after each request's start its preempt agent was asked to keep it off; absent "
		       "without windows.",
		       offsetof(struct mrow, window_after_us), 1e-6);
	render_tsg_u32(b, rows, n, "gpuqos_tsg_window_held",
		       "1 when the BE's preempt agent says it runs the window schedule it was sent, 0 "
		       "when it refused or could not start it; absent without windows or an answer.",
		       offsetof(struct mrow, window_held), 1.0);
	render_tsg_u32(b, rows, n, "gpuqos_tsg_windows_given_after_seconds",
		       "The windows the last reconcile gave its process (a GR TSG of an LC, or of a "
		       "BE placed around one): how long past each due time; absent unless given.",
		       offsetof(struct mrow, windows_given_us), 1e-6);
	bfamily(b, "gpuqos_tsg_windows_refused", "gauge",
		"1 with the reason when the last reconcile refused its process's windows (a GR "
		"TSG; reasons in docs/metrics.md: cap, periodUnknown, noBe, ...); absent when given "
		"or off.");
	for (size_t i = 0; i < n; i++)
		if (rows[i].windows_refused)
			bput(b, "gpuqos_tsg_windows_refused{%s,reason=\"%s\"} 1\n", rows[i].id,
			     rows[i].windows_refused);
	render_wakes(b, rows, n);
}

static void render_tsgs(struct mbuf *b, const struct mrow *rows, size_t n)
{
	render_tsg_info(b, rows, n);
	render_tsg_u32(b, rows, n, "gpuqos_tsg_timeslice_applied_seconds",
		       "The timeslice the RM was last told for the TSG, by anyone.",
		       offsetof(struct mrow, ts_applied), 1e-6);
	render_tsg_u32(b, rows, n, "gpuqos_tsg_timeslice_desired_seconds",
		       "The timeslice the policy wants for the TSG.", offsetof(struct mrow, ts_desired),
		       1e-6);
	render_tsg_u32(b, rows, n, "gpuqos_tsg_interleave_level",
		       "The interleave level the RM was last told (0 low, 1 medium, 2 high).",
		       offsetof(struct mrow, il_applied), 1);
	bfamily(b, "gpuqos_tsg_interleave_level_desired", "gauge",
		"The interleave level the policy wants, when it sets one.");
	for (size_t i = 0; i < n; i++)
		if (rows[i].il_desired >= 0)
			bput(b, "gpuqos_tsg_interleave_level_desired{%s} %d\n", rows[i].id,
			     (int)rows[i].il_desired);
	render_tsg_controls(b, rows, n);
	render_tsg_launches(b, rows, n);
}

/* ---- per GPU ---- */

#define NCLASS 3 /* enum qos_class */

struct mgpu {
	uint32_t gpu;
	const char *uuid;
	size_t tsgs[NCLASS], procs[NCLASS], pods[NCLASS];
	int shared; /* an LC and a BE TSG on one runlist */
};

static int cmp_u32(uint32_t a, uint32_t b)
{
	return a < b ? -1 : a > b;
}

/* Order: GPU, class, pid, then engine: distinct pids and runlists are
 * runs of equal keys. */
static int cmp_rows(const void *x, const void *y)
{
	const struct mrow *a = *(const struct mrow *const *)x, *b = *(const struct mrow *const *)y;
	int c;

	if ((c = cmp_u32(a->gpu, b->gpu)) || (c = cmp_u32(a->cls, b->cls)) ||
	    (c = cmp_u32((uint32_t)a->pid, (uint32_t)b->pid)))
		return c;
	return cmp_u32(a->engine, b->engine);
}

static struct mgpu *gpu_slot(struct mgpu *g, size_t *ng, const struct mrow *r)
{
	if (!*ng || g[*ng - 1].gpu != r->gpu) {
		memset(&g[*ng], 0, sizeof(g[0]));
		g[*ng].gpu = r->gpu;
		g[*ng].uuid = r->uuid;
		(*ng)++;
	}
	return &g[*ng - 1];
}

/* Whether rows[i..] of one GPU hold an LC and a BE TSG on one runlist
 * (engine type; NV2080 engine types are below 128). */
static int gpu_shared(struct mrow **s, size_t n, size_t i)
{
	uint64_t lc[2] = { 0, 0 }, be[2] = { 0, 0 };

	for (size_t j = i; j < n && s[j]->gpu == s[i]->gpu; j++) {
		uint32_t e = s[j]->engine;

		if (!s[j]->counted || e >= 128)
			continue;
		if (s[j]->cls == CLASS_LC)
			lc[e / 64] |= 1ull << (e % 64);
		else if (s[j]->cls == CLASS_BE)
			be[e / 64] |= 1ull << (e % 64);
	}
	return (lc[0] & be[0]) || (lc[1] & be[1]);
}

static int cmp_str(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Distinct pod UIDs among s[from..to). */
static size_t pods_of(struct mrow **s, size_t from, size_t to)
{
	const char **u = calloc(to - from, sizeof(*u));
	size_t m = 0, n = 0;

	if (!u)
		return 0;
	for (size_t i = from; i < to; i++)
		if (s[i]->pod_uid[0])
			u[m++] = s[i]->pod_uid;
	qsort(u, m, sizeof(*u), cmp_str);
	for (size_t i = 0; i < m; i++)
		n += i == 0 || strcmp(u[i], u[i - 1]) != 0;
	free(u);
	return n;
}

static size_t gpus_of(struct mrow **s, size_t n, struct mgpu *g)
{
	size_t ng = 0;

	for (size_t i = 0; i < n;) {
		struct mgpu *x = gpu_slot(g, &ng, s[i]);
		size_t j = i;

		if (i == 0 || s[i - 1]->gpu != s[i]->gpu)
			x->shared = gpu_shared(s, n, i);
		while (j < n && s[j]->gpu == s[i]->gpu && s[j]->cls == s[i]->cls)
			j++;
		/* s[i..j): one GPU and class, sorted by pid. */
		for (size_t k = i; k < j; k++) {
			x->tsgs[s[i]->cls]++;
			x->procs[s[i]->cls] += k == i || s[k]->pid != s[k - 1]->pid;
		}
		x->pods[s[i]->cls] = pods_of(s, i, j);
		i = j;
	}
	return ng;
}

static void render_gpu_family(struct mbuf *b, const struct mgpu *g, size_t ng, const char *name,
			      const char *help, size_t off)
{
	char gpu[16];

	bfamily(b, name, "gauge", help);
	for (size_t i = 0; i < ng; i++) {
		const size_t *v = (const size_t *)((const char *)&g[i] + off);

		for (int c = 0; c < NCLASS; c++) {
			int first = 1;

			if (!v[c])
				continue;
			snprintf(gpu, sizeof(gpu), "%u", g[i].gpu);
			bput(b, "%s{", name);
			blabel(b, &first, "gpu", g[i].gpu != GQ_UNKNOWN ? gpu : NULL);
			blabel(b, &first, "UUID", g[i].uuid);
			blabel(b, &first, "class", class_name((enum qos_class)c));
			bput(b, "} %zu\n", v[c]);
		}
	}
}

static void render_gpus(struct mbuf *b, struct mrow *rows, size_t n, int kube)
{
	struct mrow **s = calloc(n ? n : 1, sizeof(*s));
	struct mgpu *g = calloc(n ? n : 1, sizeof(*g));
	size_t ng = 0;
	char gpu[16];

	if (!s || !g) {
		b->oom = 1;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		s[i] = &rows[i];
	qsort(s, n, sizeof(*s), cmp_rows);
	ng = gpus_of(s, n, g);
	render_gpu_family(b, g, ng, "gpuqos_gpu_tsgs", "TSGs on the GPU, by class.",
			  offsetof(struct mgpu, tsgs));
	render_gpu_family(b, g, ng, "gpuqos_gpu_processes", "Processes with TSGs on the GPU, by class.",
			  offsetof(struct mgpu, procs));
	if (kube)
		render_gpu_family(b, g, ng, "gpuqos_gpu_pods", "Pods with TSGs on the GPU, by class.",
				  offsetof(struct mgpu, pods));
	bfamily(b, "gpuqos_gpu_lc_shares_runlist_with_be", "gauge",
		"1 when a latency-critical and a best-effort TSG share a runlist (engine) of the GPU.");
	for (size_t i = 0; i < ng; i++) {
		int first = 1;

		snprintf(gpu, sizeof(gpu), "%u", g[i].gpu);
		bput(b, "gpuqos_gpu_lc_shares_runlist_with_be{");
		blabel(b, &first, "gpu", g[i].gpu != GQ_UNKNOWN ? gpu : NULL);
		blabel(b, &first, "UUID", g[i].uuid);
		bput(b, "} %d\n", g[i].shared);
	}
out:
	free(s);
	free(g);
}

/* ---- the agent's health ---- */

static void counter(struct mbuf *b, const char *name, const char *help, uint64_t v)
{
	bfamily(b, name, "counter", help);
	bput(b, "%s %llu\n", name, (unsigned long long)v);
}

static void gauge(struct mbuf *b, const char *name, const char *help, double v)
{
	bfamily(b, name, "gauge", help);
	bput(b, "%s %.9g\n", name, v);
}

static void render_latency(struct mbuf *b)
{
	bfamily(b, "gpuqos_control_duration_seconds", "histogram",
		"How long finished controls took in the RM, by control path (timeouts are not "
		"in it: gpuqos_control_timeouts_total).");
	for (int p = 1; p < MT_PATHS; p++) {
		const struct mhist *h = &M.lat[p];
		const char *path = path_name((enum path)p);
		uint64_t cum = 0;

		for (size_t i = 0; i < NLAT; i++) {
			cum += h->b[i];
			bput(b, "gpuqos_control_duration_seconds_bucket{path=\"%s\",le=\"%g\"} %llu\n",
			     path, lat_bounds[i], (unsigned long long)cum);
		}
		bput(b, "gpuqos_control_duration_seconds_bucket{path=\"%s\",le=\"+Inf\"} %llu\n", path,
		     (unsigned long long)h->count);
		bput(b, "gpuqos_control_duration_seconds_sum{path=\"%s\"} %.9g\n", path, h->sum);
		bput(b, "gpuqos_control_duration_seconds_count{path=\"%s\"} %llu\n", path,
		     (unsigned long long)h->count);
	}
	bfamily(b, "gpuqos_control_timeouts_total", "counter",
		"Controls that passed their deadline, by control path.");
	for (int p = 1; p < MT_PATHS; p++)
		bput(b, "gpuqos_control_timeouts_total{path=\"%s\"} %llu\n",
		     path_name((enum path)p), (unsigned long long)M.timeouts[p]);
}

static void render_bpf(struct mbuf *b, const struct magent *g)
{
	gauge(b, "gpuqos_bpf_attached", "1 when the eBPF tracker is attached.", g->bpf_attached);
	counter(b, "gpuqos_bpf_events_total", "Tracker events the agent consumed.", g->bpf_events);
	counter(b, "gpuqos_bpf_rm_calls_total", "NVIDIA RM calls the tracker decoded.",
		g->bpf_rm_calls);
	counter(b, "gpuqos_bpf_ignored_tsgs_total",
		"TSGs the tracker saw on another device than the agent's control device.",
		g->bpf_ignored);
	bfamily(b, "gpuqos_bpf_dropped_total", "counter",
		"What the tracker could not see or record, by reason (only while it is attached).");
	for (size_t i = 0; i < g->ndrops; i++)
		bput(b, "gpuqos_bpf_dropped_total{reason=\"%s\"} %llu\n", g->drops[i].reason,
		     (unsigned long long)g->drops[i].n);
}

static void render_kube(struct mbuf *b, const struct magent *g)
{
	if (!g->kube)
		return;
	gauge(b, "gpuqos_kube_synced", "1 once a full list of this node's pods was applied.",
	      g->kube_synced);
	gauge(b, "gpuqos_kube_pods", "Pods of this node in the agent's cache.", (double)g->kube_pods);
	counter(b, "gpuqos_kube_watch_restarts_total",
		"Pod watches started again after the first (server timeouts, cuts, errors).",
		g->ks.watches ? g->ks.watches - 1 : 0);
	counter(b, "gpuqos_kube_relists_total",
		"Pod lists after the watch's version was unusable (410, 504 too large, ...).",
		g->ks.relists);
	counter(b, "gpuqos_kube_request_errors_total", "API requests that failed, of any kind.",
		g->ks.errors);
	counter(b, "gpuqos_kube_patches_total", "Annotation PATCHes sent.", g->ks.patches_sent);
	counter(b, "gpuqos_kube_patch_refused_total",
		"Annotation PATCHes the API server refused for good (403, 422): not sent again "
		"until the values change.", g->ks.patches_refused);
	counter(b, "gpuqos_kube_events_total", "Events the API server accepted.", g->ks.events_sent);
}

static void render_agent(struct mbuf *b, const struct magent *g, size_t ntsgs, double lag,
			 size_t unconverged)
{
	bfamily(b, "gpuqos_agent_info", "gauge", "The agent's version and mode (value 1).");
	bput(b, "gpuqos_agent_info{version=\"%s\",mode=\"%s\"} 1\n", GPUQOS_VERSION, g->mode);
	bfamily(b, "gpuqos_agent_start_time_seconds", "gauge", "When the agent started (Unix time).");
	bput(b, "gpuqos_agent_start_time_seconds %.3f\n", M.start_wall);
	gauge(b, "gpuqos_peers_connected", "Preempt agents connected.", g->npeers);
	gauge(b, "gpuqos_tsgs", "TSGs the agent holds.", (double)ntsgs);
	gauge(b, "gpuqos_tsgs_unconverged", "TSGs whose settings the RM does not hold yet.",
	      (double)unconverged);
	gauge(b, "gpuqos_reconcile_lag_seconds",
	      "How long the longest-unconverged TSG has been so (0 when all are converged).", lag);
	counter(b, "gpuqos_controls_sent_total", "Controls sent, on either path.", g->n.commands);
	counter(b, "gpuqos_reconcile_passes_total",
		"Reconcile passes: the agent's decisions made again after a change or a deadline.",
		g->n.passes);
	counter(b, "gpuqos_control_failures_total", "Controls that returned an error.",
		g->n.failures);
	counter(b, "gpuqos_peers_refused_total", "Preempt agents refused by a limit.",
		g->n.peers_refused);
	bfamily(b, "gpuqos_claims_refused_total", "counter",
		"TSG claims of preempt agents refused, by reason.");
	bput(b, "gpuqos_claims_refused_total{reason=\"limit\"} %llu\n",
	     (unsigned long long)g->n.claims_refused_limit);
	bput(b, "gpuqos_claims_refused_total{reason=\"readback\"} %llu\n",
	     (unsigned long long)g->n.claims_refused_readback);
	counter(b, "gpuqos_malformed_messages_total", "Malformed preempt-agent messages.",
		g->n.malformed);
	counter(b, "gpuqos_activity_reports_dropped_total",
		"Launch reports (ACTIVITY) dropped as impossible: reserved bits, counters going "
		"back, more active time than time passed.",
		g->n.bad_activity);
	counter(b, "gpuqos_wake_reports_dropped_total",
		"Wake reports (WAKE) dropped as impossible: reserved bits, more wakes judged or not "
		"issued than there could be, counts going back.",
		g->n.bad_wake);
	counter(b, "gpuqos_rotation_turns_total", "Rotation turns begun (one BE made schedulable).",
		g->n.turns);
	counter(b, "gpuqos_rotation_turns_in_gap_total",
		"Rotation turns whose change was held until it fit in an LC's gap between requests.",
		g->n.turns_in_gap);
	bfamily(b, "gpuqos_rotation_processes", "gauge",
		"Processes taking turns in the rotation of a runlist (one turn each, whatever its "
		"TSG count): a BE waits at most this minus one turns at a time.");
	for (size_t i = 0; i < g->nrot; i++) {
		char eng[24];

		tsg_engine_name(g->rot[i].engine, eng, sizeof(eng));
		bput(b, "gpuqos_rotation_processes{gpu=\"%u\",engine=\"%s\"} %u\n", g->rot[i].gpu,
		     eng, g->rot[i].procs);
	}
	counter(b, "gpuqos_controls_held_total",
		"Controls held back by the bound on controls per TSG (10 a second, 8 at once, "
		"more where short turns need them).",
		g->n.controls_held);
	counter(b, "gpuqos_rotation_changes_held_total",
		"Entries of a TSG into a rotation held back by the dwell (1 s, or two turns).",
		g->n.rotation_changes_held);
	counter(b, "gpuqos_windows_sent_total",
		"Window schedules sent or renewed to BE preempt agents (keeping the BE off around "
		"an LC's requests).",
		g->n.windows_sent);
	counter(b, "gpuqos_windows_ended_total",
		"Window schedules ended by the node agent (no single periodic LC, or windows "
		"turned off).",
		g->n.windows_ended);
	counter(b, "gpuqos_phase_reports_dropped_total",
		"Request phase reports (PHASE) dropped: not asked for, reserved bits, a span out of "
		"range, a period out of range, a start after the report or stale, or a clock that "
		"is not the agent's.",
		g->n.bad_phase);
	counter(b, "gpuqos_log_lines_suppressed_total", "Log lines dropped by the per-process limit.",
		g->n.log_suppressed);
	counter(b, "gpuqos_config_reloads_total", "Configuration reloads (SIGHUP) that took effect.",
		g->n.config_reloads);
	counter(b, "gpuqos_config_errors_total", "Configuration reloads refused as invalid.",
		g->n.config_errors);
	counter(b, "gpuqos_verify_reads_total",
		"Read-backs of a managed TSG's timeslice that held the agent's belief against the RM.",
		g->n.verify_reads);
	counter(b, "gpuqos_verify_mismatches_total",
		"Read-backs that found the RM holding another timeslice than the agent believed "
		"(each one set again).",
		g->n.verify_mismatches);
	counter(b, "gpuqos_reverts_total",
		"Timeslices and interleave levels set back by someone else after a SET of the agent "
		"took; past three in a row each next SET waits longer.",
		g->n.reverts);
}

/* ---- one snapshot ---- */

/* Binds rows to their side-table entries; returns the reconcile lag. */
static double track_rows(struct mrow *rows, size_t n, uint64_t now, size_t *unconverged)
{
	uint64_t oldest = 0;

	*unconverged = 0;
	M.pass++;
	for (size_t i = 0; i < n; i++) {
		struct mtsg *m = mt_get(rows[i].pid, rows[i].client, rows[i].tsg);

		rows[i].m = m;
		if (!m)
			continue;
		m->seen = M.pass;
		if (rows[i].converged) {
			m->unconverged_since = 0;
			continue;
		}
		(*unconverged)++;
		if (!m->unconverged_since)
			m->unconverged_since = now;
		if (!oldest || m->unconverged_since < oldest)
			oldest = m->unconverged_since;
	}
	mt_sweep();
	return oldest ? (double)(now - oldest) / 1e6 : 0;
}

static struct snap *render(struct agent *a, uint64_t now)
{
	struct mrow *rows = calloc(a->ntsgs ? a->ntsgs : 1, sizeof(*rows));
	struct mbuf b = { 0 };
	struct magent g;
	struct snap *s = NULL;
	size_t n, unconverged;
	double lag;

	if (!rows)
		return NULL;
	n = collect(a, rows, a->ntsgs, &g, now);
	lag = track_rows(rows, n, now, &unconverged);
	render_tsgs(&b, rows, n);
	render_gpus(&b, rows, n, g.kube);
	render_agent(&b, &g, n, lag, unconverged);
	render_latency(&b);
	render_bpf(&b, &g);
	render_kube(&b, &g);
	memview_metrics(a, bput_bytes, &b);
	free(rows);
	if (!b.oom && (s = malloc(sizeof(*s) + b.len + 1))) {
		atomic_init(&s->refs, 1);
		s->len = b.len;
		memcpy(s->text, b.p, b.len);
		s->text[b.len] = '\0';
	}
	free(b.p);
	return s;
}

static int readiness(struct agent *a)
{
	if (a->kube && !kube_client_synced(a->kube->client))
		return NOT_SYNCED;
	if (!tracker_active(a) && a->opt.bpf != TRACKER_OFF)
		return NO_TRACKER;
	return READY;
}

void metrics_publish(struct agent *a)
{
	uint64_t now = now_us(), iv;
	struct snap *s, *old;

	if (!M.d && !M.health)
		return;
	iv = (uint64_t)(a->cfg->reconcile_interval_ms ? a->cfg->reconcile_interval_ms : 1000) * 1000u;
	atomic_store(&M.stall_us, iv * 5 > MT_STALL_MIN_US ? iv * 5 : MT_STALL_MIN_US);
	atomic_store(&M.loop_us, now);
	atomic_store(&M.ready, readiness(a));
	if (!M.d)
		return;
	if (M.cur && now - M.last_render_us < M.render_gap_us)
		return;
	M.last_render_us = now;
	s = render(a, now);
	M.render_gap_us = (now_us() - now) * 20;
	if (M.render_gap_us < METRICS_RENDER_MS * 1000ull)
		M.render_gap_us = METRICS_RENDER_MS * 1000ull;
	if (!s) {
		log_warn("metrics: out of memory rendering; serving the previous snapshot");
		return;
	}
	pthread_mutex_lock(&M.mu);
	old = M.cur;
	if (old && old->len == s->len && memcmp(old->text, s->text, s->len) == 0) {
		pthread_mutex_unlock(&M.mu);
		snap_unref(s); /* nothing changed */
		return;
	}
	M.cur = s;
	pthread_mutex_unlock(&M.mu);
	snap_unref(old);
}

/* ---- HTTP (libmicrohttpd's threads: M.cur and the atomics only; the
 * health listener's thread the atomics alone) ---- */

static enum MHD_Result reply_metrics(struct MHD_Connection *conn)
{
	struct MHD_Response *r;
	struct snap *s;
	enum MHD_Result rc;

	pthread_mutex_lock(&M.mu);
	s = M.cur;
	if (s)
		atomic_fetch_add(&s->refs, 1);
	pthread_mutex_unlock(&M.mu);
	if (!s)
		return httpd_reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "no snapshot yet\n");
	r = MHD_create_response_from_buffer_with_free_callback_cls(s->len, s->text, snap_unref, s);
	if (!r) {
		snap_unref(s);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	rc = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result reply_health(struct MHD_Connection *conn)
{
	uint64_t seen = atomic_load(&M.loop_us), now = now_us();

	if (now - seen > atomic_load(&M.stall_us))
		return httpd_reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "the event loop is stalled\n");
	return httpd_reply_text(conn, MHD_HTTP_OK, "ok\n");
}

static enum MHD_Result reply_ready(struct MHD_Connection *conn)
{
	switch (atomic_load(&M.ready)) {
	case READY:
		return httpd_reply_text(conn, MHD_HTTP_OK, "ready\n");
	case NOT_SYNCED:
		return httpd_reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
				  "the pod watch has not listed this node's pods yet\n");
	default:
		return httpd_reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
				  "the eBPF tracker is not attached (and not turned off)\n");
	}
}

/* The metrics port keeps answering the probes' paths for what probes it
 * already; the health listener is the one that stays free. */
static const struct httpd_route routes[] = {
	{ "/metrics", reply_metrics },
	{ "/healthz", reply_health },
	{ "/readyz", reply_ready },
	{ NULL, NULL },
};

static const struct httpd_route health_routes[] = {
	{ "/healthz", reply_health },
	{ "/readyz", reply_ready },
	{ NULL, NULL },
};
/* ---- start and stop ---- */

void metrics_set_address(const char *addr)
{
	snprintf(M.address, sizeof(M.address), "%s", addr ? addr : "");
}

void metrics_set_health_address(const char *addr)
{
	snprintf(M.health_address, sizeof(M.health_address), "%s", addr ? addr : "");
}

int metrics_start(struct agent *a)
{
	M.start_wall = wall_now() - (double)(now_us() - a->started_us) / 1e6;
	atomic_store(&M.loop_us, now_us());
	atomic_store(&M.stall_us, MT_STALL_MIN_US);
	atomic_store(&M.ready, NOT_SYNCED);
	const struct httpd_listener l[] = {
		{ "metrics", M.address, routes, &httpd_metrics_limits },
		{ "health", M.health_address, health_routes, &httpd_health_limits },
	};
	struct httpd *h[2];
	char err[300];

	if (httpd_listen(l, 2, h, err, sizeof(err)) != 0) {
		log_error("%s", err);
		return -1;
	}
	M.d = h[0];
	M.health = h[1];
	return 0;
}

void metrics_stop(void)
{
	httpd_stop(M.health);
	httpd_stop(M.d); /* joins its threads: no scrape runs after */
	M.d = M.health = NULL;
	snap_unref(M.cur);
	M.cur = NULL;
	mt_free_all();
}

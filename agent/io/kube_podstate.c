/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_podstate.c - what the agent writes back on each pod in Kubernetes mode:
 * gpuqos.io/class and gpuqos.io/state while the pod has TSGs, removed once
 * its last one is gone, and the Events an operator must see
 * (InvalidQoSClass, InvalidWindows, ControlRefused, CapabilityMissing).
 * Once a batch, for the pods whose records changed (struct agent.changes)
 * or whose cached copy did, it renders the records the core keeps
 * (record.c) and nothing else of the model; the API client sends only
 * what differs from the pod it has cached, so a batch with nothing new
 * sends nothing, before or after an API server restart or a re-list. The
 * state JSON therefore holds no clock and nothing else that moves by itself.
 * Does not own classes (kube_mode.c) or the client (agent/kube).
 */
#include "agent/io/io.h"
#include "agent/io/gpuinfo.h"
#include "agent/io/kube_mode.h"
#include "common/log.h"
#include "common/utf8.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SET_MAX 16

/* ---- per-pod memory ---- */

static size_t kpod_bucket(const struct kmode *k, const char *uid)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (; *uid; uid++)
		h = (h ^ (unsigned char)*uid) * 1099511628211ull;
	return (size_t)h & (k->pod_buckets - 1);
}

static struct kpod *kpod_find(const struct kmode *k, const char *uid)
{
	if (!k->pod_buckets)
		return NULL;
	for (struct kpod *p = k->pods[kpod_bucket(k, uid)]; p; p = p->next)
		if (strcmp(p->uid, uid) == 0)
			return p;
	return NULL;
}

/* Keeps the chains short: a bucket per pod, doubled as pods come. */
static int kpod_grow(struct kmode *k)
{
	size_t old = k->pod_buckets, cap = old ? old * 2 : 64;
	struct kpod **b = calloc(cap, sizeof(*b)), **ob = k->pods;

	if (!b)
		return -1;
	k->pods = b;
	k->pod_buckets = cap;
	for (size_t i = 0; i < old; i++) {
		while (ob[i]) {
			struct kpod *p = ob[i];
			size_t j = kpod_bucket(k, p->uid);

			ob[i] = p->next;
			p->next = b[j];
			b[j] = p;
		}
	}
	free(ob);
	return 0;
}

/* The pod's memory, made if there is none yet; NULL at the bound (or
 * out of memory): its problems are then told again, and the API client's
 * de-duplication keeps the repeats from reaching the server. */
static struct kpod *kpod_get(struct kmode *k, const char *uid)
{
	struct kpod *p = kpod_find(k, uid);
	size_t b;

	if (p)
		return p;
	if (k->npods >= KUBE_MAX_PODS_DEFAULT) {
		if (!k->pods_full_logged)
			log_warn("kubernetes: remembering %zu pods' problems already; pod %s's are "
				 "not remembered", k->npods, uid);
		k->pods_full_logged = 1;
		return NULL;
	}
	if (k->npods >= k->pod_buckets && kpod_grow(k) != 0)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	snprintf(p->uid, sizeof(p->uid), "%s", uid);
	b = kpod_bucket(k, uid);
	p->next = k->pods[b];
	k->pods[b] = p;
	k->npods++;
	return p;
}

void kmode_forget_pod(struct agent *a, const char *uid)
{
	struct kmode *k = a->kube;

	if (!k->pod_buckets)
		return;
	for (struct kpod **pp = &k->pods[kpod_bucket(k, uid)]; *pp; pp = &(*pp)->next) {
		if (strcmp((*pp)->uid, uid) == 0) {
			struct kpod *p = *pp;

			*pp = p->next;
			free(p);
			k->npods--;
			return;
		}
	}
}

void kmode_free_pods(struct kmode *k)
{
	for (size_t i = 0; i < k->pod_buckets; i++) {
		while (k->pods[i]) {
			struct kpod *p = k->pods[i];

			k->pods[i] = p->next;
			free(p);
		}
	}
	free(k->pods);
	k->pods = NULL;
	k->pod_buckets = k->npods = 0;
}

/* ---- Events ---- */

/* One Event per distinct note per pod: last[] remembers the note sent
 * (the client also drops repeats within its de-duplication window). */
static void pod_event(struct agent *a, const char *uid, char *last, size_t lastlen,
		      const char *reason, const char *action, const char *note)
{
	size_t n = strlen(note);

	if (strncmp(last, note, lastlen - 1) == 0)
		return;
	/* Only a prefix is remembered: enough to tell notes apart. */
	if (n >= lastlen)
		n = lastlen - 1;
	memcpy(last, note, n);
	last[n] = '\0';
	if (kube_client_event(a->kube->client, uid, KUBE_EVENT_WARNING, reason, action, note) < 0)
		log_warn("kubernetes: %s Event for pod %s not queued", reason, uid);
}

/* An invalid gpu.qos as a note names it: its JSON text (a string in
 * quotes, a number bare), or the annotations that are not a map. *what
 * is what the pod's memory keeps to tell one mistake from the next. */
static void invalid_note(struct agent *a, const struct kube_pod *pod, char *note, size_t len,
			 char *what, size_t what_len)
{
	const cJSON *raw = cJSON_GetObjectItemCaseSensitive(pod->annotations, KMODE_QOS_ANNOTATION);
	const char *dflt = class_name(a->cfg->k8s_default_class);
	char *json = raw ? cJSON_PrintUnformatted(raw) : NULL;

	if (pod->annotations_malformed || !json) {
		snprintf(what, what_len, "(annotations)");
		snprintf(note, len, "metadata.annotations is not a map, so %s cannot be read; the pod "
			 "gets the default class %s", KMODE_QOS_ANNOTATION, dflt);
	} else {
		snprintf(what, what_len, "%.*s", (int)what_len - 1, json);
		snprintf(note, len, "%s: %.66s is not \"%s\" or \"%s\"; the pod gets the default "
			 "class %s", KMODE_QOS_ANNOTATION, json, KMODE_QOS_LC, KMODE_QOS_BE, dflt);
	}
	free(json);
}

static void note_class(struct agent *a, const struct kube_pod *pod, const struct pod_facts *f)
{
	char note[320], what[sizeof(((struct kpod *)0)->invalid)];
	struct kpod *kp;

	if (!f->cls_invalid) {
		kp = kpod_find(a->kube, pod->uid);
		if (kp)
			kp->invalid[0] = '\0'; /* a later mistake is told again */
		return;
	}
	invalid_note(a, pod, note, sizeof(note), what, sizeof(what));
	kp = kpod_get(a->kube, pod->uid);
	if (kp && strcmp(kp->invalid, what) == 0)
		return;
	if (kp)
		snprintf(kp->invalid, sizeof(kp->invalid), "%s", what);
	log_warn("pod %s/%s: %s", pod->namespace, pod->name, note);
	if (kube_client_event(a->kube->client, pod->uid, KUBE_EVENT_WARNING, "InvalidQoSClass",
			      "Classify", note) < 0)
		log_warn("kubernetes: InvalidQoSClass Event for pod %s/%s not queued", pod->namespace,
			 pod->name);
}

/* The node's default windows, as a refused gpuqos.io/windows leaves them. */
static const char *default_windows(const struct agent *a, char *buf, size_t len)
{
	const struct policy_config *cfg = &a->cfg->policy;

	if (cfg->window_after_auto)
		return "\"auto\"";
	if (!cfg->window_after_us)
		return "off";
	snprintf(buf, len, "%u us after each request", cfg->window_after_us);
	return buf;
}

/* An invalid gpuqos.io/windows: one InvalidWindows Event per value, as
 * an invalid gpu.qos gets; the pod keeps the node's default. */
static void note_windows(struct agent *a, const struct kube_pod *pod, const struct pod_facts *f)
{
	const cJSON *raw = cJSON_GetObjectItemCaseSensitive(pod->annotations,
							    KMODE_WINDOWS_ANNOTATION);
	char note[320], dflt[64], what[sizeof(((struct kpod *)0)->bad_windows)], *json;
	struct kpod *kp;

	if (!f->windows_invalid) {
		kp = kpod_find(a->kube, pod->uid);
		if (kp)
			kp->bad_windows[0] = '\0';
		return;
	}
	json = cJSON_PrintUnformatted(raw); /* quoted and escaped: control characters show */
	snprintf(what, sizeof(what), "%.*s", (int)sizeof(what) - 1, json ? json : "?");
	free(json);
	kp = kpod_get(a->kube, pod->uid);
	if (kp && strcmp(kp->bad_windows, what) == 0)
		return;
	if (kp)
		snprintf(kp->bad_windows, sizeof(kp->bad_windows), "%s", what);
	snprintf(note, sizeof(note), "%s: %.66s is not \"auto\", \"off\" or a number of us (0 .. %u); "
		 "the pod gets the node's default windows (%s)", KMODE_WINDOWS_ANNOTATION, what,
		 POLICY_WINDOW_AFTER_MAX_US, default_windows(a, dflt, sizeof(dflt)));
	log_warn("pod %s/%s: %s", pod->namespace, pod->name, note);
	if (kube_client_event(a->kube->client, pod->uid, KUBE_EVENT_WARNING, "InvalidWindows",
			      "Classify", note) < 0)
		log_warn("kubernetes: InvalidWindows Event for pod %s/%s not queued", pod->namespace,
			 pod->name);
}

/* An invalid gpuqos.io/gpu-memory: one InvalidGPUMemory Event per value;
 * the pod gets its class's default budget. */
static void note_memory(struct agent *a, const struct kube_pod *pod, const struct pod_facts *f)
{
	const cJSON *raw = cJSON_GetObjectItemCaseSensitive(pod->annotations,
							    KMODE_MEMORY_ANNOTATION);
	char note[400], why[160], dflt[32], what[sizeof(((struct kpod *)0)->bad_memory)], *json;
	uint64_t bytes = 0, budget;
	struct kpod *kp;

	if (!f->memory_invalid) {
		kp = kpod_find(a->kube, pod->uid);
		if (kp)
			kp->bad_memory[0] = '\0';
		return;
	}
	json = cJSON_PrintUnformatted(raw);
	snprintf(what, sizeof(what), "%.*s", (int)sizeof(what) - 1, json ? json : "?");
	free(json);
	kp = kpod_get(a->kube, pod->uid);
	if (kp && strcmp(kp->bad_memory, what) == 0)
		return;
	if (kp)
		snprintf(kp->bad_memory, sizeof(kp->bad_memory), "%s", what);
	if (!cJSON_IsString(raw))
		snprintf(why, sizeof(why), "is not a string");
	else if (quantity_parse(raw->valuestring, &bytes, why, sizeof(why)) == 0)
		why[0] = '\0';
	budget = (unsigned)f->cls < 3 ? a->cfg->memory.default_budget[f->cls] : GQ_MEM_UNLIMITED;
	quantity_format(budget, dflt, sizeof(dflt));
	snprintf(note, sizeof(note), "%s: %.66s %s; the pod gets its class's default budget (%s)",
		 KMODE_MEMORY_ANNOTATION, what, why, dflt);
	log_warn("pod %s/%s: %s", pod->namespace, pod->name, note);
	if (kube_client_event(a->kube->client, pod->uid, KUBE_EVENT_WARNING, "InvalidGPUMemory",
			      "Budget", note) < 0)
		log_warn("kubernetes: InvalidGPUMemory Event for pod %s/%s not queued",
			 pod->namespace, pod->name);
}

void kmode_note_annotation(struct agent *a, const struct kube_pod *pod, const struct pod_facts *f)
{
	note_class(a, pod, f);
	note_windows(a, pod, f);
	note_memory(a, pod, f);
}

void kmode_mem_refused(struct agent *a, struct proc *p, const struct mem_gpu *e)
{
	char note[320], lim[32], used[32];
	struct kpod *kp;

	if (!a->kube || !p->pod_uid[0] || !(kp = kpod_get(a->kube, p->pod_uid)) ||
	    kp->mem_refused_said)
		return;
	kp->mem_refused_said = 1;
	quantity_format(e->enforced, lim, sizeof(lim));
	quantity_format(e->used, used, sizeof(used));
	snprintf(note, sizeof(note),
		 "pid %d (%.16s): a video-memory allocation on GPU %u was refused at its budget "
		 "(%s held, budget %s)",
		 (int)p->pid, p->comm, e->gpu, used, lim);
	if (kube_client_event(a->kube->client, p->pod_uid, KUBE_EVENT_WARNING, "GPUMemoryRefused",
			      "Allocate", note) < 0)
		log_warn("kubernetes: GPUMemoryRefused Event for pod %s not queued", p->pod_uid);
}

/* A TSG's problem an operator must see, as recorded (record.c): which
 * capability is missing, or what RM refused. */
static void tsg_events(struct agent *a, const char *uid, struct kpod *kp, const struct tsg *t)
{
	const struct tsg_record *r = &t->rec;
	char note[200];

	if (r->problem == RECORD_PROBLEM_CAPABILITY) {
		snprintf(note, sizeof(note), "%s", r->problem_text);
		pod_event(a, uid, kp->capmiss, sizeof(kp->capmiss), "CapabilityMissing", "Control",
			  note);
	} else if (r->problem == RECORD_PROBLEM_REFUSED) {
		snprintf(note, sizeof(note), "TSG control refused: %s", r->problem_text);
		pod_event(a, uid, kp->refused, sizeof(kp->refused), "ControlRefused", "Control", note);
	}
}

/* ---- gpuqos.io/state ---- */

/* Sorted sets of small size: enough for the TSGs of one pod; more values
 * than SET_MAX are not listed (the count is). */
struct uset {
	uint32_t v[SET_MAX];
	size_t n;
};

static void uset_add(struct uset *s, uint32_t v)
{
	size_t i = 0;

	while (i < s->n && s->v[i] < v)
		i++;
	if ((i < s->n && s->v[i] == v) || s->n == SET_MAX)
		return;
	memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(s->v[0]));
	s->v[i] = v;
	s->n++;
}

static cJSON *uset_json(const struct uset *s)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr && i < s->n; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNumber(s->v[i]));
	return arr;
}

struct pod_sum {
	/* Processes; of them with an override, launch-bound, woken (as their
	 * TSGs' records say: override, launch_bound, woken for the process
	 * being summed). */
	size_t procs, tsgs, overrides, launch_bounds, wakes;
	int override, launch_bound, woken;
	struct uset gpus, gr, copy, il;
	unsigned paths; /* bit per enum path */
	int pending, failed;
	/* Its first LC TSG's record of its process's window decision
	 * (proc.win), rendered as it is; NULL: none to show. */
	const struct tsg_record *windows;
};

/* Everything read of a TSG is its record (record.c): what the last
 * reconcile pass decided and what the RM holds. */
static void sum_tsg(struct pod_sum *s, const struct tsg *t)
{
	const struct tsg_record *r = &t->rec;

	s->tsgs++;
	if (r->gpu != GQ_UNKNOWN)
		uset_add(&s->gpus, r->gpu);
	if (rm_engine_is_gr(t->engine))
		uset_add(&s->gr, r->ts);
	else if (rm_engine_is_copy(t->engine))
		uset_add(&s->copy, r->ts);
	if (r->il_desired >= 0)
		uset_add(&s->il, r->il);
	s->paths |= 1u << r->path;
	if (r->state == TSG_FAILED || r->state == TSG_STALLED)
		s->failed = 1;
	else if (r->state == TSG_PENDING || r->state == TSG_UNVERIFIED)
		s->pending = 1;
	if (r->cls_source == CLS_SRC_OVERRIDE)
		s->override = 1;
	if (r->launch_bound)
		s->launch_bound = 1;
	if (r->wake_lead_us)
		s->woken = 1;
	if (r->cls == CLASS_LC && !s->windows && r->win_decided && r->win_why != WINDOW_WHY_OFF)
		s->windows = r;
}

static void sum_pod(struct agent *a, const char *uid, struct pod_sum *s)
{
	memset(s, 0, sizeof(*s));
	for (const struct proc *p = a->procs; p; p = p->next) {
		if (strcmp(p->pod_uid, uid) != 0)
			continue;
		s->procs++;
		s->override = s->launch_bound = s->woken = 0;
		for (const struct tsg *t = a->tsgs; t; t = t->next)
			if (t->pid == p->pid && t->rec_queued)
				sum_tsg(s, t);
		s->overrides += s->override;
		s->launch_bounds += s->launch_bound;
		s->wakes += s->woken;
	}
}

static void add_gpus(cJSON *o, const struct pod_sum *s)
{
	cJSON *arr = cJSON_AddArrayToObject(o, "gpus");
	char buf[32];

	for (size_t i = 0; arr && i < s->gpus.n; i++) {
		const char *uuid = gpuinfo_uuid(s->gpus.v[i]);

		/* Without its UUID (yet), the device instance still tells GPUs apart. */
		snprintf(buf, sizeof(buf), "instance-%u", s->gpus.v[i]);
		cJSON_AddItemToArray(arr, cJSON_CreateString(uuid ? uuid : buf));
	}
}

static void add_paths(cJSON *o, unsigned paths)
{
	char buf[64] = "";

	for (int p = PATH_IN_PROCESS; p <= PATH_DIRECT; p++)
		if (paths & (1u << p))
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", buf[0] ? "," : "",
				 path_name((enum path)p));
	cJSON_AddStringToObject(o, "controlPath", buf[0] ? buf : "none");
}

static void add_windows(cJSON *o, const struct tsg_record *d)
{
	cJSON *w = cJSON_AddObjectToObject(o, "windows");

	if (!w)
		return;
	if (d->win_ask == WINDOW_ASK_AUTO)
		cJSON_AddStringToObject(w, "ask", "auto");
	else if (d->win_ask == WINDOW_ASK_US)
		cJSON_AddNumberToObject(w, "ask", (double)d->win_ask_us);
	else
		cJSON_AddStringToObject(w, "ask", "off");
	if (d->win_why == WINDOW_GIVEN)
		cJSON_AddNumberToObject(w, "afterUs", (double)d->win_after_us);
	else
		cJSON_AddStringToObject(w, "refused", window_why_name(d->win_why));
}

/* Compact JSON, keys in a fixed order, so equal states compare equal. */
static char *state_json(const struct pod_sum *s, enum class_source source)
{
	cJSON *o = cJSON_CreateObject(), *ts;
	char *out = NULL;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "classSource", class_source_name(source));
	cJSON_AddNumberToObject(o, "processes", (double)s->procs);
	cJSON_AddNumberToObject(o, "tsgs", (double)s->tsgs);
	add_gpus(o, s);
	ts = cJSON_AddObjectToObject(o, "timesliceUs");
	if (ts) {
		cJSON_AddItemToObject(ts, "gr", uset_json(&s->gr));
		cJSON_AddItemToObject(ts, "copy", uset_json(&s->copy));
	}
	if (s->il.n) /* only when the policy sets a level */
		cJSON_AddItemToObject(o, "interleave", uset_json(&s->il));
	add_paths(o, s->paths);
	if (s->overrides)
		cJSON_AddNumberToObject(o, "overrides", (double)s->overrides);
	if (s->launch_bounds) /* its runlists are at the driver's values */
		cJSON_AddNumberToObject(o, "launchBound", (double)s->launch_bounds);
	if (s->wakes) /* asked to wake ahead of their periodic requests */
		cJSON_AddNumberToObject(o, "wake", (double)s->wakes);
	/* Its LCs' windows, asked or the node's, as decided: given (after
	 * us) or refused (why); absent where windows are off and none asked. */
	if (s->windows)
		add_windows(o, s->windows);
	cJSON_AddStringToObject(o, "state", s->failed ? "failed" : s->pending ? "pending" : "converged");
	utf8_json_sanitize(o); /* an annotation value is valid UTF-8 */
	out = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return out;
}

/* ---- one pod, every pass ---- */

static void annotate(struct agent *a, const char *uid, const char *key, const char *value)
{
	if (kube_client_annotate(a->kube->client, uid, key, value) < 0)
		log_warn("kubernetes: annotation %s of pod %s not queued", key, uid);
}

/* A pod without TSGs of ours whose annotations may not be removed yet
 * (the restart grace) is visited by the full pass at the grace's end.
 * -1: out of memory (the next batch publishes every pod). */
static int publish_pod(struct agent *a, const struct kube_pod *pod, int may_remove)
{
	const struct pod_facts *f;
	struct pod_sum s;
	enum class_source source;
	char uid[40], cls[32], *state;
	struct kpod *kp;

	snprintf(uid, sizeof(uid), "%s", pod->uid); /* pod is invalid after a client call */
	sum_pod(a, uid, &s);
	if (!s.tsgs) {
		/* The last GPU process went: nothing of ours stays behind. After
		 * a restart, only once its processes had time to come back. */
		if (!may_remove)
			return 0;
		annotate(a, uid, KMODE_KEY_CLASS, NULL);
		annotate(a, uid, KMODE_KEY_STATE, NULL);
		return 0;
	}
	/* The class the core holds for the pod (its facts, pod.c). */
	f = pod_find(a, uid);
	source = f ? f->cls_source : CLS_SRC_POD_UNKNOWN;
	snprintf(cls, sizeof(cls), "%s", class_name(f ? f->cls : CLASS_UNMANAGED));
	state = state_json(&s, source);
	if (!state) {
		log_error("kubernetes: out of memory formatting the state of pod %s", uid);
		return -1;
	}
	annotate(a, uid, KMODE_KEY_CLASS, cls);
	annotate(a, uid, KMODE_KEY_STATE, state);
	free(state);
	kp = kpod_get(a->kube, uid);
	for (const struct proc *p = a->procs; kp && p; p = p->next)
		for (const struct tsg *t = a->tsgs; strcmp(p->pod_uid, uid) == 0 && t; t = t->next)
			if (t->pid == p->pid)
				tsg_events(a, uid, kp, t);
	return 0;
}

/* ---- which pods a pass visits ---- */

struct uidset {
	char (*v)[40];
	size_t n, cap;
};

static int uidset_add(struct uidset *u, const char *uid)
{
	if (!uid || !*uid)
		return 0;
	if (u->n == u->cap) {
		size_t cap = u->cap ? u->cap * 2 : 64;
		char(*v)[40] = realloc(u->v, cap * sizeof(*v));

		if (!v)
			return -1;
		u->v = v;
		u->cap = cap;
	}
	snprintf(u->v[u->n++], sizeof(u->v[0]), "%s", uid);
	return 0;
}

static int uid_cmp(const void *x, const void *y)
{
	return strcmp((const char *)x, (const char *)y);
}

static void uidset_unique(struct uidset *u)
{
	size_t k = 0;

	if (!u->n)
		return;
	qsort(u->v, u->n, sizeof(u->v[0]), uid_cmp);
	for (size_t i = 1; i < u->n; i++)
		if (strcmp(u->v[i], u->v[k]) != 0)
			memcpy(u->v[++k], u->v[i], sizeof(u->v[0]));
	u->n = k + 1;
}

/* Every cached pod (a full pass, also when more records changed in one
 * batch than the core queues), else the pods whose records changed in
 * this batch (a->changes: a TSG's decision, a TSG or a process that came
 * or went) and those the client changed since k->published_gen. A call
 * into the client may apply a finished request and change its cache: the
 * pass walks a copy of the uids, looking each pod up afresh. */
static int publish_set(struct agent *a, int all, struct uidset *u)
{
	struct kmode *k = a->kube;
	struct kube_client *c = k->client;
	const char **changed = NULL;
	size_t n;
	int rc = 0;

	if (all || a->changes.overflow) {
		n = kube_client_pod_count(c);
		for (size_t i = 0; i < n && rc == 0; i++) {
			const struct kube_pod *pod = kube_client_pod_at(c, i);

			rc = uidset_add(u, pod ? pod->uid : NULL);
		}
		return rc;
	}
	for (size_t i = 0; i < a->changes.n && rc == 0; i++)
		rc = uidset_add(u, a->changes.v[i].pod_uid);
	n = kube_client_changed(c, k->published_gen, NULL, 0);
	if (n && rc == 0) {
		changed = calloc(n, sizeof(*changed));
		if (!changed)
			return -1;
		n = kube_client_changed(c, k->published_gen, changed, n);
		for (size_t i = 0; i < n && rc == 0; i++)
			rc = uidset_add(u, changed[i]);
		free(changed);
	}
	return rc;
}

void kmode_publish(struct agent *a)
{
	struct kmode *k = a->kube;
	struct kube_client *c = k->client;
	struct uidset u = { 0 };
	uint64_t gen, now = now_us();
	int may_remove, all, retry = 0;

	if (!kube_client_synced(c) || !kube_client_pod_count(c))
		return; /* classes are not known yet: nothing true to write */
	may_remove = !a->expected && now >= a->started_us + AGENT_RESTART_GRACE_MS * 1000ull;
	if (may_remove && !k->grace_over) {
		k->grace_over = 1; /* annotations a restart left behind may go now */
		k->publish_all = 1;
	}
	if (gpuinfo_generation() != k->gpuinfo_gen) {
		k->gpuinfo_gen = gpuinfo_generation(); /* UUIDs may be known now */
		k->publish_all = 1;
	}
	all = k->publish_all;
	gen = kube_client_change_gen(c);
	if (publish_set(a, all, &u) != 0) {
		log_error("kubernetes: out of memory publishing pod state");
		free(u.v);
		k->publish_all = 1; /* what changed is not lost: every pod next batch */
		return;
	}
	uidset_unique(&u);
	if (u.n)
		log_debug("kubernetes: publishing %zu pod(s)%s", u.n, all ? " (all)" : "");
	for (size_t i = 0; i < u.n; i++) {
		const struct kube_pod *pod = kube_client_pod(c, u.v[i]);

		if (pod && publish_pod(a, pod, may_remove) != 0)
			retry = 1;
	}
	free(u.v);
	k->published_gen = gen;
	k->publish_all = retry;
	k->publish_passes++;
	k->published_pods += u.n;
}

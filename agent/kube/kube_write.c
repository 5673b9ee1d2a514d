/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_write.c - everything the agent writes to the API server: merge
 * patches of pod annotations (sent only when a value differs from what
 * the pod has or is about to have, coalesced per pod: what one pass of
 * the caller queues leaves in one PATCH, one in flight per pod) and
 * events.k8s.io/v1 Events (de-duplicated), each behind its own token
 * bucket. Does not own what the annotations or events say.
 */
#include "agent/kube/kube_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"

#define KUBE_EVENT_RETRIES 3
/* API limits of events.k8s.io/v1 (note 1 kB; reason, action 128). */
#define KUBE_NOTE_MAX 1024
#define KUBE_REASON_MAX 128

void kube_bucket_init(struct kube_bucket *b, double qps, unsigned burst, uint64_t now)
{
	b->qps = qps;
	b->burst = burst;
	b->tokens = burst;
	b->last_ms = now;
}

static void bucket_refill(struct kube_bucket *b, uint64_t now)
{
	if (now > b->last_ms) {
		b->tokens += b->qps * (double)(now - b->last_ms) / 1000.0;
		if (b->tokens > b->burst)
			b->tokens = b->burst;
		b->last_ms = now;
	}
}

int kube_bucket_take(struct kube_bucket *b, uint64_t now)
{
	bucket_refill(b, now);
	if (b->tokens < 1.0)
		return 0;
	b->tokens -= 1.0;
	return 1;
}

uint64_t kube_bucket_next_ms(const struct kube_bucket *b, uint64_t now)
{
	double missing = 1.0 - b->tokens;

	if (missing <= 0)
		return now;
	return now + (uint64_t)(missing * 1000.0 / b->qps) + 1;
}

static void due_min(uint64_t *due, uint64_t t)
{
	if (!*due || t < *due)
		*due = t;
}

/* ---- annotations ---- */

/* What the annotation will be once queued work lands: pending (unless
 * skip_pending), then in flight, then written (answer not cached), then
 * the cached pod. Sets *queued to 0 if none of the first three has it. */
static const cJSON *planned_value(const struct kube_pod_entry *e, const char *key,
				  int skip_pending, int *queued)
{
	const cJSON *v = skip_pending ? NULL : cJSON_GetObjectItemCaseSensitive(e->pending, key);

	if (!v)
		v = cJSON_GetObjectItemCaseSensitive(e->inflight, key);
	if (!v)
		v = cJSON_GetObjectItemCaseSensitive(e->written, key);
	*queued = v != NULL;
	return v;
}

static int same_value(const cJSON *planned, int queued, const struct kube_pod *pod,
		      const char *key, const char *value)
{
	const char *have = queued ? (cJSON_IsString(planned) ? planned->valuestring : NULL)
				  : kube_pod_annotation(pod, key);

	if (!have || !value)
		return !have && !value;
	return strcmp(have, value) == 0;
}

/* Whether pending value v of key is what the pod will hold without it. */
static int pending_moot(const struct kube_pod_entry *e, const cJSON *v)
{
	int queued;
	const cJSON *base = planned_value(e, v->string, 1, &queued);

	return same_value(base, queued, &e->pod, v->string,
			  cJSON_IsString(v) ? v->valuestring : NULL);
}

/* Pending values that went back to what the pod holds (or will hold once
 * the PATCH in flight lands) would send nothing new: they go. */
static void drop_moot(struct kube_pod_entry *e)
{
	cJSON *v = e->pending ? e->pending->child : NULL, *next;

	for (; v; v = next) {
		next = v->next;
		if (pending_moot(e, v))
			cJSON_Delete(cJSON_DetachItemViaPointer(e->pending, v));
	}
}

/* 1: the server refused exactly this value of key; -1: it refused
 * another; 0: nothing of key was refused. */
static int refused_value(const struct kube_pod_entry *e, const char *key, const char *value)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(e->refused, key);

	if (!r)
		return 0;
	if (!value || !cJSON_IsString(r))
		return !value && cJSON_IsNull(r) ? 1 : -1;
	return strcmp(r->valuestring, value) == 0 ? 1 : -1;
}

int kube_write_annotate(struct kube_client *c, const char *uid, const char *key,
			const char *value)
{
	struct kube_pod_entry *e = uid ? kube_pods_find(c, uid) : NULL;
	const cJSON *planned;
	cJSON *v;
	int queued;

	if (!e || !key || !*key)
		return -1;
	if (!kube_pods_keeps(c, key)) {
		/* The cache would never show it written: every call would PATCH. */
		log_error("kube: annotation %s is not one the client keeps (annotation_keys)", key);
		return -1;
	}
	planned = planned_value(e, key, 0, &queued);
	if (same_value(planned, queued, &e->pod, key, value)) {
		c->st.patches_unchanged++;
		return 1;
	}
	/* Back to what the pod holds without the value queued: unqueue it. */
	planned = planned_value(e, key, 1, &queued);
	if (cJSON_GetObjectItemCaseSensitive(e->pending, key) &&
	    same_value(planned, queued, &e->pod, key, value)) {
		cJSON_DeleteItemFromObjectCaseSensitive(e->pending, key);
		c->st.patches_unchanged++;
		return 1;
	}
	switch (refused_value(e, key, value)) {
	case 1:
		/* Refused as it is: asking again changes nothing. */
		cJSON_DeleteItemFromObjectCaseSensitive(e->pending, key);
		c->st.patches_withheld++;
		return 2;
	case -1:
		/* Another value than the one refused: it may pass. */
		cJSON_DeleteItemFromObjectCaseSensitive(e->refused, key);
		break;
	}
	if (!e->pending && !(e->pending = cJSON_CreateObject()))
		goto oom;
	v = value ? cJSON_CreateString(value) : cJSON_CreateNull();
	if (!v)
		goto oom;
	cJSON_DeleteItemFromObjectCaseSensitive(e->pending, key);
	if (!cJSON_AddItemToObject(e->pending, key, v)) {
		cJSON_Delete(v);
		goto oom;
	}
	return 0;
oom:
	log_error("kube: out of memory queueing annotation %s of pod %s/%s", key,
		  e->pod.namespace, e->pod.name);
	return -1;
}

static char *patch_body(const struct kube_pod_entry *e, cJSON *annotations)
{
	cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "metadata");
	char *s = NULL;

	/* metadata.uid makes the server refuse (409) a patch meant for an
	 * older pod of the same name. */
	if (meta && cJSON_AddStringToObject(meta, "uid", e->pod.uid) &&
	    cJSON_AddItemReferenceToObject(meta, "annotations", annotations))
		s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	return s;
}

static char *pod_url(struct kube_client *c, const struct kube_pod *p)
{
	char *ns = kube_escape(c, p->namespace), *name = kube_escape(c, p->name), *url = NULL;

	if (ns && name)
		url = kube_strdup_printf("%s/api/v1/namespaces/%s/pods/%s?fieldManager=gpuqos-agent",
					 c->cfg->server, ns, name);
	free(ns);
	free(name);
	return url;
}

static int send_patch(struct kube_client *c, struct kube_pod_entry *e)
{
	struct kube_req *r = kube_req_new(c, KUBE_REQ_PATCH, pod_url(c, &e->pod));

	if (!r)
		return -1;
	r->body = patch_body(e, e->pending);
	r->uid = strdup(e->pod.uid);
	if (!r->body || !r->uid ||
	    kube_req_start(r, "PATCH", "application/merge-patch+json") != 0) {
		kube_req_free(r);
		return -1;
	}
	e->inflight = e->pending;
	e->pending = NULL;
	c->st.patches_sent++;
	return 0;
}

static void patch_step(struct kube_client *c, uint64_t now, uint64_t *due)
{
	size_t n = c->n_pods;

	for (size_t k = 0; k < n; k++) {
		size_t i = (c->patch_cursor + k) % n;
		struct kube_pod_entry *e = c->pods[i];

		if (!e->pending || e->inflight)
			continue;
		/* A requeued value may be moot by now (a newer one put it back). */
		drop_moot(e);
		if (!e->pending->child)
			continue;
		if (e->patch_due_ms > now) {
			due_min(due, e->patch_due_ms);
			continue;
		}
		if (!kube_bucket_take(&c->patch_tb, now)) {
			due_min(due, kube_bucket_next_ms(&c->patch_tb, now));
			/* Start here next time, so no pod starves. */
			c->patch_cursor = i;
			return;
		}
		if (send_patch(c, e) != 0) {
			log_error("kube: could not start the PATCH of pod %s/%s; retrying",
				  e->pod.namespace, e->pod.name);
			e->patch_due_ms = now + kube_backoff_ms(c, ++e->patch_failures);
			due_min(due, e->patch_due_ms);
		}
	}
}

/* Moves every value of *from into *into, where a value already in *into
 * wins (newer: queued later) unless from_wins. *from is NULL after. */
static void merge_values(cJSON **into, cJSON **from, int from_wins)
{
	cJSON *v;

	if (!*into) {
		*into = *from;
		*from = NULL;
		return;
	}
	while (*from && (v = (*from)->child)) {
		cJSON_DetachItemViaPointer(*from, v);
		if (cJSON_GetObjectItemCaseSensitive(*into, v->string)) {
			if (!from_wins) {
				cJSON_Delete(v);
				continue;
			}
			cJSON_DeleteItemFromObjectCaseSensitive(*into, v->string);
		}
		cJSON_AddItemToObject(*into, v->string, v);
	}
	/* Emptied, it must go: a non-NULL inflight holds the pod's PATCHes. */
	cJSON_Delete(*from);
	*from = NULL;
}

/* Puts a failed patch's values back unless a newer value was queued. */
static void requeue_patch(struct kube_client *c, struct kube_pod_entry *e,
			  const struct kube_req *r)
{
	merge_values(&e->pending, &e->inflight, 0);
	e->patch_failures++;
	e->patch_due_ms = kube_now_ms() + kube_retry_ms(c, e->patch_failures, r->retry_after_ms);
}

/* The PATCH was applied but its answer cannot be cached: the values
 * count as the pod's until the watch brings its next version, so that
 * they are not sent again and again meanwhile. */
static void answer_not_cached(struct kube_client *c, struct kube_pod_entry *e,
			      const struct kube_req *r)
{
	if (r->resp_over) {
		c->st.patch_answers_too_large++;
		log_warn("kube: pod %s/%s: the PATCH answer is %zu bytes, over the limit of %zu "
			 "for one pod: not cached; the watch will bring the pod", e->pod.namespace,
			 e->pod.name, r->resp_total, c->o.max_object_bytes);
	} else {
		log_warn("kube: pod %s/%s: the PATCH answer (%zu bytes) is not a pod: not cached",
			 e->pod.namespace, e->pod.name, r->resp_total);
	}
	merge_values(&e->written, &e->inflight, 1);
}

static int retryable(CURLcode rc, long status)
{
	return rc != CURLE_OK || status == 401 || status == 429 || status >= 500;
}

static int event_queue(struct kube_client *c, struct kube_pod_entry *e, enum kube_event_type type,
		       const char *reason, const char *action, const char *note);

/* "k1, k2" of a patch's values, cut to fit. */
static void patch_keys(const cJSON *values, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (const cJSON *v = values ? values->child : NULL; v && n + 1 < len; v = v->next) {
		int w = snprintf(out + n, len - n, "%s%s", n ? ", " : "", v->string);

		if (w < 0)
			break;
		n += (size_t)w < len - n ? (size_t)w : len - n - 1;
	}
}

/* A final refusal (403 from RBAC or an admission policy, 422, 404, 409):
 * the values are kept as refused, so the next pass asking for the same
 * ones sends nothing; one log line and one Event say so. */
static void patch_refused(struct kube_client *c, struct kube_pod_entry *e, const char *why)
{
	char keys[256], note[1024];

	c->st.patches_refused++;
	patch_keys(e->inflight, keys, sizeof(keys));
	log_warn("kube: pod %s/%s: %s; annotations %s not sent again until their values change",
		 e->pod.namespace, e->pod.name, why, keys);
	/* Bounded: an Event's note is short, the server's reason may not be. */
	snprintf(note, sizeof(note), "The API server refused annotations %s of this pod: %.700s",
		 keys, why);
	merge_values(&e->refused, &e->inflight, 1);
	if (event_queue(c, e, KUBE_EVENT_WARNING, "AnnotationRefused", "Annotate", note) < 0)
		log_warn("kube: AnnotationRefused Event for pod %s/%s not queued", e->pod.namespace,
			 e->pod.name);
}

void kube_patch_done(struct kube_req *r, CURLcode rc, long status)
{
	struct kube_client *c = r->c;
	struct kube_pod_entry *e = kube_pods_find(c, r->uid);
	char why[1024];
	cJSON *pod;

	if (!e)
		return; /* deleted meanwhile: nothing left to annotate */
	if (rc == CURLE_OK && status >= 200 && status < 300) {
		e->patch_failures = 0;
		/* The answer is the patched pod: cache it now (unless the
		 * watch brought a later version) so an annotate of the same
		 * value right after sends nothing. */
		pod = r->resp_over ? NULL : kube_json_parse(r->resp.p, r->resp.len);
		if (pod && kube_pods_apply_answer(c, pod, e->list_gen) == 0) {
			cJSON_Delete(e->inflight);
			e->inflight = NULL;
		} else {
			answer_not_cached(c, e, r);
		}
		cJSON_Delete(pod);
		return;
	}
	kube_describe_failure(r, rc, status, why, sizeof(why));
	if (retryable(rc, status)) {
		log_warn("kube: annotating pod %s/%s: %s; retrying", e->pod.namespace, e->pod.name,
			 why);
		requeue_patch(c, e, r);
		return;
	}
	patch_refused(c, e, why);
}

/* ---- events ---- */

static uint64_t event_hash(const char *uid, const char *reason, const char *note)
{
	const char *parts[] = { uid, reason, note };
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (size_t i = 0; i < 3; i++) {
		for (const char *s = parts[i]; *s; s++)
			h = (h ^ (unsigned char)*s) * 1099511628211ull;
		h = (h ^ 0xff) * 1099511628211ull; /* separator */
	}
	return h;
}

/* Whether the pod had this Event within event_dedup_s; if not, it is
 * remembered in the pod's slot that is free, expired or else oldest. */
static int event_is_duplicate(struct kube_client *c, struct kube_pod_entry *e, uint64_t h,
			      uint64_t now)
{
	uint64_t window = (uint64_t)c->o.event_dedup_s * 1000u;
	struct kube_dedup *slot = &e->dedup[0];

	for (size_t i = 0; i < KUBE_DEDUP_SLOTS; i++) {
		struct kube_dedup *d = &e->dedup[i];

		if (d->at_ms && d->hash == h && now - d->at_ms < window)
			return 1;
		if (d->at_ms < slot->at_ms)
			slot = d;
	}
	slot->hash = h;
	slot->at_ms = now ? now : 1;
	return 0;
}

static int event_fill(struct kube_event_item *it, const struct kube_pod *p,
		      enum kube_event_type type, const char *reason, const char *action,
		      const char *note)
{
	it->type = type;
	it->uid = strdup(p->uid);
	it->name = strdup(p->name);
	it->namespace = strdup(p->namespace);
	it->reason = strndup(reason, KUBE_REASON_MAX);
	it->action = strndup(action, KUBE_REASON_MAX);
	it->note = strndup(note ? note : "", KUBE_NOTE_MAX);
	if (it->uid && it->name && it->namespace && it->reason && it->action && it->note)
		return 0;
	kube_event_item_free(it);
	return -1;
}

static void owe_append(struct kube_client *c, struct kube_pod_entry *e)
{
	e->owed_next = NULL;
	if (c->owed_tail)
		c->owed_tail->owed_next = e;
	else
		c->owed_head = e;
	c->owed_tail = e;
}

/* One Event per pod waits outside the queue: a newer one replaces it, so
 * what is owed stays bounded by the pods and says the pod's latest. */
static int event_owe(struct kube_client *c, struct kube_pod_entry *e, enum kube_event_type type,
		     const char *reason, const char *action, const char *note)
{
	struct kube_event_item it = { 0 };

	if (event_fill(&it, &e->pod, type, reason, action, note) != 0) {
		log_error("kube: out of memory keeping event %s", reason);
		return -1;
	}
	if (e->owed) {
		c->st.events_suppressed++;
		log_warn("kube: event queue full; event %s for pod %s/%s replaces %s, not yet sent",
			 reason, e->pod.namespace, e->pod.name, e->owed->reason);
		kube_event_item_free(e->owed);
		*e->owed = it;
		return 0;
	}
	e->owed = malloc(sizeof(*e->owed));
	if (!e->owed) {
		kube_event_item_free(&it);
		log_error("kube: out of memory keeping event %s", reason);
		return -1;
	}
	*e->owed = it;
	owe_append(c, e);
	return 0;
}

/* Moves owed Events into the queue while it has room, oldest first. */
static void owed_refill(struct kube_client *c)
{
	while (c->owed_head && c->ev_len < KUBE_EVENT_QUEUE) {
		struct kube_pod_entry *e = c->owed_head;

		c->owed_head = e->owed_next;
		if (!c->owed_head)
			c->owed_tail = NULL;
		e->owed_next = NULL;
		c->events[(c->ev_head + c->ev_len) % KUBE_EVENT_QUEUE] = *e->owed;
		c->ev_len++;
		free(e->owed);
		e->owed = NULL;
	}
}

int kube_write_event(struct kube_client *c, const char *uid, enum kube_event_type type,
		     const char *reason, const char *action, const char *note)
{
	struct kube_pod_entry *e = uid ? kube_pods_find(c, uid) : NULL;

	if (!e || !reason || !*reason || !action || !*action)
		return -1;
	return event_queue(c, e, type, reason, action, note);
}

static int event_queue(struct kube_client *c, struct kube_pod_entry *e, enum kube_event_type type,
		       const char *reason, const char *action, const char *note)
{
	struct kube_event_item *it;

	if (event_is_duplicate(c, e, event_hash(e->pod.uid, reason, note ? note : ""),
			       kube_now_ms())) {
		c->st.events_suppressed++;
		return 1;
	}
	/* A full queue (or Events already owed, which go first): the pod is
	 * owed this one, queued as soon as there is room. */
	if (c->ev_len == KUBE_EVENT_QUEUE || c->owed_head)
		return event_owe(c, e, type, reason, action, note);
	it = &c->events[(c->ev_head + c->ev_len) % KUBE_EVENT_QUEUE];
	if (event_fill(it, &e->pod, type, reason, action, note) != 0) {
		log_error("kube: out of memory queueing event %s", reason);
		return -1;
	}
	c->ev_len++;
	return 0;
}

/* MicroTime: RFC 3339 with microseconds, UTC. */
static void micro_time(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;

	if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || !gmtime_r(&ts.tv_sec, &tm)) {
		snprintf(buf, len, "1970-01-01T00:00:00.000000Z");
		return;
	}
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}

static char *event_body(struct kube_client *c, const struct kube_event_item *it)
{
	cJSON *root = cJSON_CreateObject(), *meta, *reg;
	char when[96], name[254];
	char *s = NULL;

	/* "<regarding>.<hash of pod UID, reason and note in hex>", where
	 * client-go puts the time: the same Event posted again (after an
	 * agent restart, or past the de-duplication memory) has the same
	 * name, and the server refuses it as existing (409) for as long as
	 * it keeps the first (the API server's event TTL, 1 h by default). */
	snprintf(name, sizeof(name), "%.*s.%016llx", 253 - 17, it->name,
		 (unsigned long long)event_hash(it->uid, it->reason, it->note));
	micro_time(when, sizeof(when));
	meta = cJSON_AddObjectToObject(root, "metadata");
	reg = cJSON_AddObjectToObject(root, "regarding");
	if (!meta || !reg || !cJSON_AddStringToObject(root, "apiVersion", "events.k8s.io/v1") ||
	    !cJSON_AddStringToObject(root, "kind", "Event") ||
	    !cJSON_AddStringToObject(meta, "name", name) ||
	    !cJSON_AddStringToObject(meta, "namespace", it->namespace) ||
	    !cJSON_AddStringToObject(root, "eventTime", when) ||
	    !cJSON_AddStringToObject(root, "reportingController", KUBE_CONTROLLER) ||
	    !cJSON_AddStringToObject(root, "reportingInstance", c->node) ||
	    !cJSON_AddStringToObject(root, "action", it->action) ||
	    !cJSON_AddStringToObject(root, "reason", it->reason) ||
	    !cJSON_AddStringToObject(root, "note", it->note) ||
	    !cJSON_AddStringToObject(root, "type",
				     it->type == KUBE_EVENT_WARNING ? "Warning" : "Normal") ||
	    !cJSON_AddStringToObject(reg, "apiVersion", "v1") ||
	    !cJSON_AddStringToObject(reg, "kind", "Pod") ||
	    !cJSON_AddStringToObject(reg, "namespace", it->namespace) ||
	    !cJSON_AddStringToObject(reg, "name", it->name) ||
	    !cJSON_AddStringToObject(reg, "uid", it->uid))
		goto out;
	s = cJSON_PrintUnformatted(root);
out:
	cJSON_Delete(root);
	return s;
}

static int send_event(struct kube_client *c, struct kube_event_item *it)
{
	char *ns = kube_escape(c, it->namespace);
	struct kube_req *r;

	if (!ns)
		return -1;
	r = kube_req_new(c, KUBE_REQ_EVENT,
			 kube_strdup_printf("%s/apis/events.k8s.io/v1/namespaces/%s/events",
					    c->cfg->server, ns));
	free(ns);
	if (!r)
		return -1;
	r->body = event_body(c, it);
	if (!r->body || kube_req_start(r, "POST", "application/json") != 0) {
		kube_req_free(r);
		return -1;
	}
	/* The request carries the item until it is answered. */
	r->ev = *it;
	memset(it, 0, sizeof(*it));
	return 0;
}

static void event_step(struct kube_client *c, uint64_t now, uint64_t *due)
{
	for (owed_refill(c); c->ev_len; owed_refill(c)) {
		struct kube_event_item *it = &c->events[c->ev_head];

		if (!kube_pods_find(c, it->uid)) {
			/* The pod went while its Event waited: it costs no token
			 * and does not hold up the Events of pods still there. */
			c->st.events_dropped++;
			kube_event_item_free(it);
			c->ev_head = (c->ev_head + 1) % KUBE_EVENT_QUEUE;
			c->ev_len--;
			continue;
		}
		if (it->due_ms > now) {
			due_min(due, it->due_ms);
			return;
		}
		if (!kube_bucket_take(&c->event_tb, now)) {
			due_min(due, kube_bucket_next_ms(&c->event_tb, now));
			return;
		}
		if (send_event(c, it) != 0) {
			log_error("kube: could not start posting event %s; dropping it", it->reason);
			kube_event_item_free(it);
		}
		c->ev_head = (c->ev_head + 1) % KUBE_EVENT_QUEUE;
		c->ev_len--;
	}
}

static void event_requeue(struct kube_client *c, struct kube_event_item *it,
			  unsigned retry_after_ms)
{
	struct kube_pod_entry *e;
	struct kube_event_item *slot;

	if (c->ev_len == KUBE_EVENT_QUEUE) {
		/* Owed to its pod, unless a newer Event already is. */
		e = kube_pods_find(c, it->uid);
		if (!e || e->owed || !(e->owed = malloc(sizeof(*e->owed)))) {
			c->st.events_suppressed++;
			kube_event_item_free(it);
			return;
		}
		*e->owed = *it;
		memset(it, 0, sizeof(*it));
		e->owed->failures++;
		e->owed->due_ms = kube_now_ms() + kube_retry_ms(c, e->owed->failures, retry_after_ms);
		owe_append(c, e);
		return;
	}
	c->ev_head = (c->ev_head + KUBE_EVENT_QUEUE - 1) % KUBE_EVENT_QUEUE;
	slot = &c->events[c->ev_head];
	*slot = *it;
	memset(it, 0, sizeof(*it));
	slot->failures++;
	slot->due_ms = kube_now_ms() + kube_retry_ms(c, slot->failures, retry_after_ms);
	c->ev_len++;
}

void kube_event_done(struct kube_req *r, CURLcode rc, long status)
{
	struct kube_client *c = r->c;
	char why[1024];

	if (rc == CURLE_OK && status >= 200 && status < 300) {
		c->st.events_sent++;
		kube_event_item_free(&r->ev);
		return;
	}
	if (rc == CURLE_OK && status == 409) {
		/* Its name says it is this very Event: the pod has it. */
		c->st.events_existing++;
		log_debug("kube: event %s for pod %s/%s was posted before", r->ev.reason,
			  r->ev.namespace, r->ev.name);
		kube_event_item_free(&r->ev);
		return;
	}
	kube_describe_failure(r, rc, status, why, sizeof(why));
	if (retryable(rc, status) && r->ev.failures + 1 < KUBE_EVENT_RETRIES) {
		log_warn("kube: event %s for pod %s/%s: %s; retrying", r->ev.reason,
			 r->ev.namespace, r->ev.name, why);
		event_requeue(c, &r->ev, r->retry_after_ms);
		return;
	}
	log_error("kube: event %s for pod %s/%s: %s; dropped", r->ev.reason, r->ev.namespace,
		  r->ev.name, why);
	kube_event_item_free(&r->ev);
}

void kube_write_step(struct kube_client *c, uint64_t now, uint64_t *next_due)
{
	patch_step(c, now, next_due);
	event_step(c, now, next_due);
}

void kube_write_free_all(struct kube_client *c)
{
	for (size_t i = 0; i < KUBE_EVENT_QUEUE; i++)
		kube_event_item_free(&c->events[i]);
	c->ev_len = 0;
}

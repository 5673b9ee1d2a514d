/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_pods.c - the cache of this node's pods (uid -> name, namespace,
 * node, phase, annotations, container ids), the change callbacks and the
 * list of what changed. Pods sit in an array (for iteration) indexed by
 * a uid hash table, so no lookup depends on how many pods a server that
 * ignored the fieldSelector sent. Does not own how objects arrive
 * (kube_sync.c) or pending annotation writes (kube_write.c).
 */
#include "agent/kube/kube_internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"

static void pod_clear(struct kube_pod *p)
{
	free(p->uid);
	free(p->name);
	free(p->namespace);
	free(p->node);
	free(p->phase);
	free(p->resource_version);
	cJSON_Delete(p->annotations);
	for (size_t i = 0; i < p->n_container_ids; i++) {
		free(p->container_ids[i]);
		free(p->container_names[i]);
	}
	free(p->container_ids);
	free(p->container_names);
	memset(p, 0, sizeof(*p));
}

static int add_container_ids(struct kube_pod *p, const cJSON *statuses)
{
	const cJSON *st;

	cJSON_ArrayForEach(st, statuses) {
		const char *id = kube_json_str(st, "containerID", NULL), *sep;
		const char *name = kube_json_str(st, "name", NULL);
		size_t i = p->n_container_ids;
		char **n;

		if (!id || !*id)
			continue; /* not started yet */
		sep = strstr(id, "://");
		n = realloc(p->container_ids, (i + 1) * sizeof(*n));
		if (!n)
			return -1;
		p->container_ids = n;
		n = realloc(p->container_names, (i + 1) * sizeof(*n));
		if (!n)
			return -1;
		p->container_names = n;
		p->container_ids[i] = strdup(sep ? sep + 3 : id);
		p->container_names[i] = strdup(name ? name : "");
		if (!p->container_ids[i] || !p->container_names[i]) {
			free(p->container_ids[i]);
			free(p->container_names[i]);
			return -1;
		}
		p->n_container_ids++;
	}
	return 0;
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

int kube_pods_keeps(const struct kube_client *c, const char *key)
{
	if (!c->o.annotation_keys)
		return 1;
	for (const char *const *k = c->o.annotation_keys; *k; k++)
		if (strcmp(*k, key) == 0)
			return 1;
	return 0;
}

/* The annotations the client keeps: those named in annotation_keys, each
 * value over KUBE_MAX_ANNOTATION as a note of its length (what a class or
 * a windows ask can never be, so the pod reads as having a wrong one).
 * Megabytes of other annotations on thousands of pods cost nothing. */
static cJSON *kept_annotations(const struct kube_client *c, const cJSON *ann)
{
	cJSON *out = cJSON_CreateObject(), *v;
	const cJSON *a;
	char note[96];

	if (!out || !cJSON_IsObject(ann))
		return out;
	cJSON_ArrayForEach(a, ann) {
		if (!a->string || !kube_pods_keeps(c, a->string))
			continue;
		if (cJSON_IsString(a) && strlen(a->valuestring) > KUBE_MAX_ANNOTATION) {
			snprintf(note, sizeof(note), "(a value of %zu bytes, over the %u read)",
				 strlen(a->valuestring), KUBE_MAX_ANNOTATION);
			v = cJSON_CreateString(note);
		} else {
			v = cJSON_Duplicate(a, 1);
		}
		if (!v || !cJSON_AddItemToObject(out, a->string, v)) {
			cJSON_Delete(v);
			cJSON_Delete(out);
			return NULL;
		}
	}
	return out;
}

/* Fills p from a Pod object; -1 on a missing uid or no memory. */
static int pod_parse(const struct kube_client *c, struct kube_pod *p, const cJSON *obj)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(obj, "status");
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
	const char *uid = kube_json_str(meta, "uid", NULL);

	memset(p, 0, sizeof(*p));
	if (!uid || !*uid)
		return -1;
	p->uid = strdup(uid);
	p->name = dup_or_empty(kube_json_str(meta, "name", NULL));
	p->namespace = dup_or_empty(kube_json_str(meta, "namespace", NULL));
	p->node = dup_or_empty(kube_json_str(obj, "spec", "nodeName"));
	p->phase = dup_or_empty(kube_json_str(status, "phase", NULL));
	p->resource_version = dup_or_empty(kube_json_str(meta, "resourceVersion", NULL));
	p->terminating = cJSON_GetObjectItemCaseSensitive(meta, "deletionTimestamp") != NULL;
	p->annotations = kept_annotations(c, ann);
	p->annotations_malformed = ann && !cJSON_IsNull(ann) && !cJSON_IsObject(ann);
	if (!p->uid || !p->name || !p->namespace || !p->node || !p->phase ||
	    !p->resource_version || !p->annotations ||
	    add_container_ids(p, cJSON_GetObjectItemCaseSensitive(status, "initContainerStatuses")) ||
	    add_container_ids(p, cJSON_GetObjectItemCaseSensitive(status, "containerStatuses")) ||
	    add_container_ids(p, cJSON_GetObjectItemCaseSensitive(status,
								  "ephemeralContainerStatuses"))) {
		pod_clear(p);
		return -1;
	}
	return 0;
}

/* Whether anything the agent acts on differs (not every status churn). */
static int pod_differs(const struct kube_pod *a, const struct kube_pod *b)
{
	if (strcmp(a->phase, b->phase) || strcmp(a->node, b->node) ||
	    a->terminating != b->terminating || a->n_container_ids != b->n_container_ids ||
	    a->annotations_malformed != b->annotations_malformed ||
	    !cJSON_Compare(a->annotations, b->annotations, 1))
		return 1;
	for (size_t i = 0; i < a->n_container_ids; i++)
		if (strcmp(a->container_ids[i], b->container_ids[i]))
			return 1;
	return 0;
}

/* ---- the uid index ---- */

static uint64_t uid_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* The slot that holds uid, or the empty one where it would go. */
static size_t idx_slot(const struct kube_client *c, const char *uid)
{
	size_t mask = c->idx_cap - 1, i = (size_t)uid_hash(uid) & mask;

	while (c->idx[i] && strcmp(c->idx[i]->pod.uid, uid) != 0)
		i = (i + 1) & mask;
	return i;
}

/* Keeps the index at most half full for one more pod. */
static int idx_reserve(struct kube_client *c)
{
	struct kube_pod_entry **old = c->idx;
	size_t old_cap = c->idx_cap, cap = old_cap ? old_cap : 64;

	while ((c->n_pods + 1) * 2 > cap)
		cap *= 2;
	if (cap == old_cap)
		return 0;
	c->idx = calloc(cap, sizeof(*c->idx));
	if (!c->idx) {
		c->idx = old;
		return -1;
	}
	c->idx_cap = cap;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i])
			c->idx[idx_slot(c, old[i]->pod.uid)] = old[i];
	free(old);
	return 0;
}

/* Linear probing without tombstones: after the hole, every entry of the
 * same run whose home slot the hole would cut off from it moves up. */
static void idx_remove(struct kube_client *c, const char *uid)
{
	size_t mask = c->idx_cap - 1, i = idx_slot(c, uid), j = i, home;

	if (!c->idx[i])
		return;
	c->idx[i] = NULL;
	for (;;) {
		j = (j + 1) & mask;
		if (!c->idx[j])
			return;
		home = (size_t)uid_hash(c->idx[j]->pod.uid) & mask;
		/* Still reachable from its home when that lies in (i, j]. */
		if (i < j ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		c->idx[i] = c->idx[j];
		c->idx[j] = NULL;
		i = j;
	}
}

struct kube_pod_entry *kube_pods_find(const struct kube_client *c, const char *uid)
{
	return c->idx_cap ? c->idx[idx_slot(c, uid)] : NULL;
}

/* ---- what changed ---- */

static void changed_unlink(struct kube_client *c, struct kube_pod_entry *e)
{
	if (e->newer)
		e->newer->older = e->older;
	else if (c->changed == e)
		c->changed = e->older;
	if (e->older)
		e->older->newer = e->newer;
	e->newer = e->older = NULL;
}

/* The pod changed as the agent sees it: the next generation, and first
 * in the list, which stays ordered by change_gen. */
static void changed_touch(struct kube_client *c, struct kube_pod_entry *e)
{
	changed_unlink(c, e);
	e->pod.change_gen = ++c->change_gen;
	e->older = c->changed;
	if (c->changed)
		c->changed->newer = e;
	c->changed = e;
}

uint64_t kube_client_change_gen(const struct kube_client *c)
{
	return c->change_gen;
}

size_t kube_client_changed(const struct kube_client *c, uint64_t since, const char **uids,
			   size_t max)
{
	size_t n = 0;

	for (const struct kube_pod_entry *e = c->changed; e && e->pod.change_gen > since;
	     e = e->older) {
		if (n < max)
			uids[n] = e->pod.uid;
		n++;
	}
	return n;
}

/* ---- entries ---- */

static struct kube_pod_entry *pods_insert(struct kube_client *c, struct kube_pod *p)
{
	struct kube_pod_entry *e;

	if (idx_reserve(c) != 0)
		return NULL;
	if (c->n_pods == c->cap_pods) {
		size_t cap = c->cap_pods ? c->cap_pods * 2 : 32;
		struct kube_pod_entry **n = realloc(c->pods, cap * sizeof(*n));

		if (!n)
			return NULL;
		c->pods = n;
		c->cap_pods = cap;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->pod = *p;
	e->at = c->n_pods;
	c->pods[c->n_pods++] = e;
	c->idx[idx_slot(c, e->pod.uid)] = e;
	changed_touch(c, e);
	return e;
}

/* Pending annotation writes that the pod now already has are moot. */
static void drop_satisfied(struct kube_pod_entry *e)
{
	cJSON *v = e->pending ? e->pending->child : NULL, *next;

	for (; v; v = next) {
		const char *have = kube_pod_annotation(&e->pod, v->string);

		next = v->next;
		if ((cJSON_IsNull(v) && !have) ||
		    (cJSON_IsString(v) && have && strcmp(have, v->valuestring) == 0))
			cJSON_Delete(cJSON_DetachItemViaPointer(e->pending, v));
	}
}

static int rv_decimal(const char *s)
{
	if (!*s || (s[0] == '0' && s[1]))
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

/* How resourceVersion a stands to b: -1 older, 0 the same, 1 newer, 2
 * unknown. The API calls them opaque strings that only the server may
 * order. What every etcd-backed API server issues, though, is etcd's
 * revision: one counter of the whole cluster, written as a decimal
 * integer without leading zeros. Two such strings from one server are
 * ordered as numbers: the longer is newer, of equal length the greater
 * one (of any length, without overflow). Anything else is not compared:
 * equal strings are the same version, other pairs are unknown. */
static int rv_order(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int d;

	if (strcmp(a, b) == 0)
		return 0;
	if (!rv_decimal(a) || !rv_decimal(b))
		return 2;
	if (la != lb)
		return la > lb ? 1 : -1;
	d = strcmp(a, b);
	return d > 0 ? 1 : -1;
}

/* A PATCH's answer is the pod as it was when that PATCH ran. The watch may
 * already have delivered a later version (another writer changed the pod
 * meanwhile): caching the answer then would bring old annotations back. */
int kube_pods_apply_answer(struct kube_client *c, const cJSON *obj, unsigned gen)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *uid = cJSON_GetObjectItemCaseSensitive(meta, "uid");
	const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
	struct kube_pod_entry *e;

	if (!cJSON_IsString(uid) || !cJSON_IsString(rv))
		return -1;
	e = kube_pods_find(c, uid->valuestring);
	if (!e || rv_order(rv->valuestring, e->pod.resource_version) != 1)
		return 0;
	return kube_pods_apply(c, obj, gen, 0);
}

static void remove_at(struct kube_client *c, size_t i);

/* A pod of another node: never cached, never told. The fieldSelector
 * asks the server for this node's pods alone; one that ignores it would
 * otherwise fill the cache (and the agent's work) with the cluster's. */
static void not_ours(struct kube_client *c, struct kube_pod *p)
{
	struct kube_pod_entry *e = kube_pods_find(c, p->uid);

	if (!c->foreign_logged) {
		log_warn("kube: the API server sent pod %s/%s of node \"%s\" when asked for the pods "
			 "of node %s: ignoring pods of other nodes", p->namespace, p->name, p->node,
			 c->node);
		c->foreign_logged = 1;
	}
	/* Cached as ours once (its node can only be set, never moved): as
	 * good as deleted here. */
	if (e)
		remove_at(c, e->at);
	pod_clear(p);
}

int kube_pods_apply(struct kube_client *c, const cJSON *obj, unsigned gen, int replace)
{
	struct kube_pod p, old;
	struct kube_pod_entry *e;
	int changed;

	if (pod_parse(c, &p, obj) != 0) {
		log_warn("kube: ignoring a pod without metadata.uid (or out of memory)");
		return -1;
	}
	if (strcmp(p.node, c->node) != 0) {
		not_ours(c, &p);
		return 0;
	}
	e = kube_pods_find(c, p.uid);
	if (!e && c->n_pods >= c->o.max_pods) {
		c->st.pods_refused++;
		if (!c->full_logged)
			log_error("kube: node %s has more than %zu pods: pod %s/%s and later ones are "
				  "not cached (their processes stay unmanaged)", c->node,
				  c->o.max_pods, p.namespace, p.name);
		c->full_logged = 1;
		pod_clear(&p);
		return -1;
	}
	if (!e) {
		e = pods_insert(c, &p);
		if (!e) {
			log_error("kube: out of memory caching pod %s/%s", p.namespace, p.name);
			pod_clear(&p);
			return -1;
		}
		e->list_gen = gen;
		if (c->o.on_pod)
			c->o.on_pod(c->o.cb_arg, KUBE_POD_ADDED, &e->pod);
		return 0;
	}
	e->list_gen = gen;
	/* Seen already (a re-list, or our PATCH's answer), or older than
	 * what is cached: a watch that lags behind a PATCH answer, a list
	 * served from a stale cache. The cache never goes back. */
	if (replace ? rv_order(p.resource_version, e->pod.resource_version) == 0
		    : rv_order(p.resource_version, e->pod.resource_version) <= 0) {
		pod_clear(&p);
		return 0;
	}
	changed = pod_differs(&p, &e->pod);
	/* Keep the uid string: callers may hold it as long as the pod lives. */
	free(p.uid);
	p.uid = e->pod.uid;
	e->pod.uid = NULL;
	p.change_gen = e->pod.change_gen;
	old = e->pod;
	e->pod = p;
	pod_clear(&old);
	/* A newer version says what the pod holds now, also of the values
	 * a PATCH wrote without an answer we could cache. */
	cJSON_Delete(e->written);
	e->written = NULL;
	drop_satisfied(e);
	if (changed)
		changed_touch(c, e);
	if (changed && c->o.on_pod)
		c->o.on_pod(c->o.cb_arg, KUBE_POD_UPDATED, &e->pod);
	return 0;
}

/* The pod goes: so does the Event it was owed. */
static void owed_drop(struct kube_client *c, struct kube_pod_entry *e)
{
	struct kube_pod_entry *prev = NULL;

	if (!e->owed)
		return;
	for (struct kube_pod_entry *o = c->owed_head; o; prev = o, o = o->owed_next) {
		if (o != e)
			continue;
		if (prev)
			prev->owed_next = e->owed_next;
		else
			c->owed_head = e->owed_next;
		if (c->owed_tail == e)
			c->owed_tail = prev;
		break;
	}
	e->owed_next = NULL;
	kube_event_item_free(e->owed);
	free(e->owed);
	e->owed = NULL;
}

static void remove_at(struct kube_client *c, size_t i)
{
	struct kube_pod_entry *e = c->pods[i];

	if (c->o.on_pod)
		c->o.on_pod(c->o.cb_arg, KUBE_POD_DELETED, &e->pod);
	/* The callback may not add pods, so index i is still e. */
	idx_remove(c, e->pod.uid);
	changed_unlink(c, e);
	owed_drop(c, e);
	c->pods[i] = c->pods[--c->n_pods];
	c->pods[i]->at = i;
	pod_clear(&e->pod);
	cJSON_Delete(e->pending);
	cJSON_Delete(e->inflight);
	cJSON_Delete(e->written);
	cJSON_Delete(e->refused);
	free(e);
}

void kube_pods_delete(struct kube_client *c, const cJSON *obj)
{
	const char *uid = kube_json_str(obj, "metadata", "uid");
	struct kube_pod_entry *e = uid ? kube_pods_find(c, uid) : NULL;

	if (e)
		remove_at(c, e->at);
}

void kube_pods_sweep(struct kube_client *c, unsigned gen)
{
	/* Pods the list did not return were deleted while we were not
	 * watching: tell the caller, as a watch would have. */
	for (size_t i = c->n_pods; i-- > 0;)
		if (c->pods[i]->list_gen != gen)
			remove_at(c, i);
}

void kube_pods_free_all(struct kube_client *c)
{
	for (size_t i = 0; i < c->n_pods; i++) {
		owed_drop(c, c->pods[i]);
		pod_clear(&c->pods[i]->pod);
		cJSON_Delete(c->pods[i]->pending);
		cJSON_Delete(c->pods[i]->inflight);
		cJSON_Delete(c->pods[i]->written);
		cJSON_Delete(c->pods[i]->refused);
		free(c->pods[i]);
	}
	free(c->pods);
	c->pods = NULL;
	c->n_pods = c->cap_pods = 0;
	free(c->idx);
	c->idx = NULL;
	c->idx_cap = 0;
	c->changed = NULL;
}

const struct kube_pod *kube_client_pod(const struct kube_client *c, const char *uid)
{
	const struct kube_pod_entry *e = kube_pods_find(c, uid);

	return e ? &e->pod : NULL;
}

size_t kube_client_pod_count(const struct kube_client *c)
{
	return c->n_pods;
}

const struct kube_pod *kube_client_pod_at(const struct kube_client *c, size_t i)
{
	return i < c->n_pods ? &c->pods[i]->pod : NULL;
}

const char *kube_pod_annotation(const struct kube_pod *pod, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(pod->annotations, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

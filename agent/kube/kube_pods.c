/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_pods.c - the cache of this node's pods (uid -> name, namespace,
 * node, phase, annotations, container ids) and the change callbacks. A
 * node runs at most a few hundred pods, so a flat array searched in order
 * is the simplest structure that is fast enough. Does not own how objects
 * arrive (kube_sync.c) or pending annotation writes (kube_write.c).
 */
#include "agent/kube/kube_internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"

const char *kube_json_str(const cJSON *obj, const char *a, const char *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);

	if (b)
		v = cJSON_GetObjectItemCaseSensitive(v, b);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

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

/* Fills p from a Pod object; -1 on a missing uid or no memory. */
static int pod_parse(struct kube_pod *p, const cJSON *obj)
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
	p->annotations = cJSON_IsObject(ann) ? cJSON_Duplicate(ann, 1) : cJSON_CreateObject();
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

struct kube_pod_entry *kube_pods_find(const struct kube_client *c, const char *uid)
{
	for (size_t i = 0; i < c->n_pods; i++)
		if (strcmp(c->pods[i]->pod.uid, uid) == 0)
			return c->pods[i];
	return NULL;
}

static struct kube_pod_entry *pods_insert(struct kube_client *c, struct kube_pod *p)
{
	struct kube_pod_entry *e;

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
	c->pods[c->n_pods++] = e;
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

/* Whether resourceVersion a is newer than b. Kubernetes calls them opaque,
 * but every etcd-backed API server issues increasing decimal integers; when
 * either is not one, nothing is known to be newer. */
static int rv_newer(const char *a, const char *b)
{
	char *ea, *eb;
	unsigned long long x, y;

	if (!a || !b || !*a || !*b)
		return 0;
	x = strtoull(a, &ea, 10);
	y = strtoull(b, &eb, 10);
	return *ea == '\0' && *eb == '\0' && x > y;
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
	if (!e || !rv_newer(rv->valuestring, e->pod.resource_version))
		return 0;
	return kube_pods_apply(c, obj, gen);
}

int kube_pods_apply(struct kube_client *c, const cJSON *obj, unsigned gen)
{
	struct kube_pod p, old;
	struct kube_pod_entry *e;
	int changed;

	if (pod_parse(&p, obj) != 0) {
		log_warn("kube: ignoring a pod without metadata.uid (or out of memory)");
		return -1;
	}
	e = kube_pods_find(c, p.uid);
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
	if (strcmp(p.resource_version, e->pod.resource_version) == 0) {
		pod_clear(&p); /* seen already (a re-list, or our PATCH's answer) */
		return 0;
	}
	changed = pod_differs(&p, &e->pod);
	/* Keep the uid string: callers may hold it as long as the pod lives. */
	free(p.uid);
	p.uid = e->pod.uid;
	e->pod.uid = NULL;
	old = e->pod;
	e->pod = p;
	pod_clear(&old);
	/* A newer version says what the pod holds now, also of the values
	 * a PATCH wrote without an answer we could cache. */
	cJSON_Delete(e->written);
	e->written = NULL;
	drop_satisfied(e);
	if (changed && c->o.on_pod)
		c->o.on_pod(c->o.cb_arg, KUBE_POD_UPDATED, &e->pod);
	return 0;
}

static void remove_at(struct kube_client *c, size_t i)
{
	struct kube_pod_entry *e = c->pods[i];

	if (c->o.on_pod)
		c->o.on_pod(c->o.cb_arg, KUBE_POD_DELETED, &e->pod);
	/* The callback may not add pods, so index i is still e. */
	c->pods[i] = c->pods[--c->n_pods];
	pod_clear(&e->pod);
	cJSON_Delete(e->pending);
	cJSON_Delete(e->inflight);
	cJSON_Delete(e->written);
	free(e);
}

void kube_pods_delete(struct kube_client *c, const cJSON *obj)
{
	const char *uid = kube_json_str(obj, "metadata", "uid");

	for (size_t i = 0; uid && i < c->n_pods; i++) {
		if (strcmp(c->pods[i]->pod.uid, uid) == 0) {
			remove_at(c, i);
			return;
		}
	}
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
		pod_clear(&c->pods[i]->pod);
		cJSON_Delete(c->pods[i]->pending);
		cJSON_Delete(c->pods[i]->inflight);
		cJSON_Delete(c->pods[i]->written);
		free(c->pods[i]);
	}
	free(c->pods);
	c->pods = NULL;
	c->n_pods = c->cap_pods = 0;
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

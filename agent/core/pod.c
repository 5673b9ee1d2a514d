/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pod.c - what the agent knows of each pod of its node, as Kubernetes mode
 * pushes it in: the class its gpu.qos annotation gives and the windows its
 * gpuqos.io/windows asks for, each parsed once by the adapter when the pod
 * changes (kube_mode.c) and handed over as typed facts. In Kubernetes mode
 * processes are classified from here; the core never asks an adapter for
 * a fact.
 *
 * Owns: the pod table (hashed by pod UID, at most AGENT_PODS_MAX pods).
 * Does not own: classifying processes from it (tsg.c), parsing annotations
 * (kube_mode.c), what is written back to the pod (kube_podstate.c), the
 * pod list (agent/kube).
 */
#include "agent/core/core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct pod_entry {
	char uid[40];
	struct pod_facts f;
	struct pod_entry *next;
};

static size_t pod_bucket(const char *uid)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (const unsigned char *s = (const unsigned char *)uid; *s; s++)
		h = (h ^ *s) * 16777619u;
	return h % AGENT_POD_BUCKETS;
}

static struct pod_entry **pod_slot(const struct agent *a, const char *uid)
{
	struct pod_entry **pp = (struct pod_entry **)&a->pods.bucket[pod_bucket(uid)];

	while (*pp && strcmp((*pp)->uid, uid) != 0)
		pp = &(*pp)->next;
	return pp;
}

const struct pod_facts *pod_find(const struct agent *a, const char *uid)
{
	struct pod_entry *e;

	if (!uid || !*uid)
		return NULL;
	e = *pod_slot(a, uid);
	return e ? &e->f : NULL;
}

static int facts_equal(const struct pod_facts *x, const struct pod_facts *y)
{
	return x->cls == y->cls && x->cls_source == y->cls_source &&
	       x->cls_invalid == y->cls_invalid && x->windows.ask == y->windows.ask &&
	       x->windows.after_us == y->windows.after_us && x->windows_invalid == y->windows_invalid &&
	       x->memory == y->memory && x->memory_invalid == y->memory_invalid;
}

int pod_set(struct agent *a, const char *uid, const struct pod_facts *f)
{
	struct pod_entry **pp, *e;

	if (!uid || !*uid || strlen(uid) >= sizeof(e->uid)) {
		errno = EINVAL;
		return -1;
	}
	pp = pod_slot(a, uid);
	if (*pp) {
		if (facts_equal(&(*pp)->f, f))
			return 0;
		(*pp)->f = *f;
		return 1;
	}
	if (a->pods.n >= AGENT_PODS_MAX) {
		errno = EDQUOT;
		return -1;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -1;
	memcpy(e->uid, uid, strlen(uid) + 1);
	e->f = *f;
	*pp = e;
	a->pods.n++;
	return 1;
}

int pod_forget(struct agent *a, const char *uid)
{
	struct pod_entry **pp, *e;

	if (!uid || !*uid)
		return 0;
	pp = pod_slot(a, uid);
	e = *pp;
	if (!e)
		return 0;
	*pp = e->next;
	free(e);
	a->pods.n--;
	return 1;
}

void pods_free(struct agent *a)
{
	for (size_t i = 0; i < AGENT_POD_BUCKETS; i++) {
		while (a->pods.bucket[i]) {
			struct pod_entry *e = a->pods.bucket[i];

			a->pods.bucket[i] = e->next;
			free(e);
		}
	}
	a->pods.n = 0;
}

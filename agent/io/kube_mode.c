/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_mode.c - Kubernetes mode: drives the API client (agent/kube) and
 * the kubelet pod-resources client (agent/kubenode) from the one loop,
 * parses each pod's gpu.qos and gpuqos.io/windows once when the pod
 * changes and pushes them into the core as facts (pod_set, agent/core/
 * pod.c, which classifies the pod's processes from them), and shows it
 * all in the ctl view. Does not
 * own the annotations and Events written back (kube_podstate.c), the policy
 * or the TSG table; the TSG table never depends on the API server, so an
 * outage only delays class changes.
 */
#include "agent/io/io.h"
#include "agent/io/jsonnum.h"
#include "agent/io/kube_mode.h"
#include "agent/kubenode/podres.h"
#include "common/log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/* ---- classification ---- */

int kmode_pod_class(const struct agent *a, const struct kube_pod *pod, enum class_source *source,
		    int *invalid)
{
	const cJSON *raw = cJSON_GetObjectItemCaseSensitive(pod->annotations, KMODE_QOS_ANNOTATION);
	const char *v = cJSON_IsString(raw) ? raw->valuestring : NULL;

	if (invalid)
		*invalid = 0;
	*source = CLS_SRC_ANNOTATION;
	if (v && strcmp(v, KMODE_QOS_LC) == 0)
		return CLASS_LC;
	if (v && strcmp(v, KMODE_QOS_BE) == 0)
		return CLASS_BE;
	/* Any other value, also one that is not a string, and annotations
	 * that are not a map at all, are a mistake, not an absence. */
	if ((raw || pod->annotations_malformed) && invalid)
		*invalid = 1;
	*source = CLS_SRC_DEFAULT;
	return (int)a->cfg->k8s_default_class;
}

int kmode_pod_windows(const struct kube_pod *pod, struct window_req *out)
{
	const cJSON *raw = cJSON_GetObjectItemCaseSensitive(pod->annotations,
							    KMODE_WINDOWS_ANNOTATION);

	out->ask = WINDOW_ASK_NONE;
	out->after_us = 0;
	if (!raw)
		return 0;
	/* A NUL in the value reached here as U+FFFD (kube_json_mend), so
	 * "auto\u0000junk" is refused like any other junk. */
	if (cJSON_IsString(raw) && policy_window_ask_parse(raw->valuestring, out) == 0)
		return 0;
	out->ask = WINDOW_ASK_NONE;
	out->after_us = 0;
	return 1;
}

int kmode_pod_memory(const struct kube_pod *pod, uint64_t *bytes)
{
	const cJSON *raw = cJSON_GetObjectItemCaseSensitive(pod->annotations,
							    KMODE_MEMORY_ANNOTATION);
	char why[160];

	*bytes = 0;
	if (!raw)
		return 0;
	if (cJSON_IsString(raw) && quantity_parse(raw->valuestring, bytes, why, sizeof(why)) == 0)
		return 0;
	*bytes = 0;
	return 1;
}

void kmode_pod_facts(const struct agent *a, const struct kube_pod *pod, struct pod_facts *f)
{
	memset(f, 0, sizeof(*f));
	f->cls = (enum qos_class)kmode_pod_class(a, pod, &f->cls_source, &f->cls_invalid);
	f->windows_invalid = kmode_pod_windows(pod, &f->windows);
	f->memory_invalid = kmode_pod_memory(pod, &f->memory);
}

static void on_pod(void *arg, enum kube_pod_change change, const struct kube_pod *pod)
{
	struct agent *a = arg;
	struct pod_facts f;
	char name[320];

	snprintf(name, sizeof(name), "%s/%s", pod->namespace, pod->name);
	if (change == KUBE_POD_DELETED) {
		kmode_forget_pod(a, pod->uid);
		if (pod_forget(a, pod->uid))
			a->kube->class_changes += pod_reclassify(a, pod->uid, name);
		return;
	}
	/* The pod's annotations, parsed here once, go into the core as facts. */
	kmode_pod_facts(a, pod, &f);
	kmode_note_annotation(a, pod, &f);
	switch (pod_set(a, pod->uid, &f)) {
	case 1:
		a->kube->class_changes += pod_reclassify(a, pod->uid, name);
		a->dirty = 1; /* its budget may have changed (memory.c) */
		break;
	case 0:
		break;
	default:
		if (ratelimit_allow(&a->kube->pods_full_log, now_us(), 1, 60000000u, NULL))
			log_warn("kubernetes: pod %s not taken in: %s (at most %u pods); its processes "
				 "stay unmanaged", name, errno == EDQUOT ? "too many pods" : strerror(errno),
				 AGENT_PODS_MAX);
		break;
	}
}

static void on_synced(void *arg)
{
	struct agent *a = arg;

	if (!a->kube->synced_us) {
		a->kube->synced_us = now_us();
		log_info("kubernetes: %zu pod(s) of this node listed", kube_client_pod_count(a->kube->client));
	}
	a->kube->publish_all = 1; /* a list may have brought what a watch missed */
	a->kube->class_changes += pod_reclassify(a, NULL, NULL);
}

/* ---- the API client's fds and timer ---- */

static unsigned io_bits(uint32_t events)
{
	unsigned b = 0;

	if (events & (EPOLLERR | EPOLLHUP))
		return KUBE_IO_IN | KUBE_IO_OUT;
	if (events & EPOLLIN)
		b |= KUBE_IO_IN;
	if (events & EPOLLOUT)
		b |= KUBE_IO_OUT;
	return b;
}

static void on_kfd(struct loop_watch *w, uint32_t events)
{
	struct kfd *f = w->ctx;

	kube_client_on_fd(f->a->kube->client, w->fd, io_bits(events));
}

static struct kfd *kfd_find(struct kmode *k, int fd)
{
	for (struct kfd *f = k->fds; f; f = f->next)
		if (f->w.fd == fd)
			return f;
	return NULL;
}

/* libcurl closes its fds itself: a loop_del, never a close. */
static void kfd_drop(struct agent *a, struct kfd *f)
{
	struct kmode *k = a->kube;

	loop_del(&a->io->loop, &f->w);
	for (struct kfd **pp = &k->fds; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	}
	f->next = k->dead_fds; /* its events of this batch are skipped */
	k->dead_fds = f;
}

static int io_watch_fd(void *arg, int fd, unsigned events)
{
	struct agent *a = arg;
	struct kfd *f = kfd_find(a->kube, fd);
	uint32_t ev = (events & KUBE_IO_IN ? EPOLLIN : 0) | (events & KUBE_IO_OUT ? EPOLLOUT : 0);

	if (!events) {
		if (f)
			kfd_drop(a, f);
		return 0;
	}
	if (f)
		return loop_mod(&a->io->loop, &f->w, ev);
	f = calloc(1, sizeof(*f));
	if (!f) {
		log_error("kubernetes: out of memory watching fd %d", fd);
		return -1;
	}
	f->a = a;
	f->w.fd = fd;
	f->w.fn = on_kfd;
	f->w.ctx = f;
	if (loop_add(&a->io->loop, &f->w, ev) != 0) {
		free(f);
		return -1;
	}
	f->next = a->kube->fds;
	a->kube->fds = f;
	return 0;
}

static int io_arm_timer(void *arg, long delay_ms)
{
	struct agent *a = arg;

	if (delay_ms < 0)
		return loop_timer_disarm(&a->kube->timer);
	/* 0: on the next turn of the loop (1 us: a 0 would disarm it) */
	return loop_timer_after(&a->kube->timer, delay_ms ? (uint64_t)delay_ms * 1000u : 1u);
}

static void on_kube_timer(struct loop_timer *t)
{
	struct agent *a = t->ctx;

	kube_client_on_timer(a->kube->client);
}

void kmode_reap(struct agent *a)
{
	struct kmode *k = a->kube;

	while (k && k->dead_fds) {
		struct kfd *f = k->dead_fds;

		k->dead_fds = f->next;
		free(f);
	}
}

/* ---- start and stop ---- */

static int kube_config_load(struct agent *a)
{
	char err[512];
	int rc;

	if (a->opt.kubeconfig)
		rc = kube_config_kubeconfig(&a->kube->cfg, a->opt.kubeconfig, NULL, err, sizeof(err));
	else
		rc = kube_config_in_cluster(&a->kube->cfg, a->opt.sa_dir, err, sizeof(err));
	if (rc != 0) {
		log_error("kubernetes: %s%s: %s", a->opt.kubeconfig ? "kubeconfig " : "in-cluster configuration",
			  a->opt.kubeconfig ? a->opt.kubeconfig : "", err);
		return -1;
	}
	log_info("kubernetes: API server %s (%s), node %s", a->kube->cfg.server,
		 a->opt.kubeconfig ? a->opt.kubeconfig : "in cluster", a->opt.node_name);
	return 0;
}

/* The annotations the agent reads or writes: all the API client keeps of
 * a pod's, however many other (and however large) a pod carries. */
static const char *const kept_annotations[] = {
	KMODE_QOS_ANNOTATION, KMODE_WINDOWS_ANNOTATION, KMODE_MEMORY_ANNOTATION, KMODE_KEY_CLASS,
	KMODE_KEY_STATE, NULL,
};

static int kube_client_init(struct agent *a)
{
	struct kmode *k = a->kube;
	struct kube_client_opts o = {
		.node = a->opt.node_name,
		.io = { .watch_fd = io_watch_fd, .arm_timer = io_arm_timer, .arg = a },
		.on_pod = on_pod,
		.on_synced = on_synced,
		.cb_arg = a,
		.annotation_keys = kept_annotations,
	};

	if (loop_timer_add(&a->io->loop, &k->timer, "kubernetes", on_kube_timer, a) != 0)
		return -1;
	k->client = kube_client_new(&k->cfg, &o);
	if (!k->client)
		return -1;
	/* An unreachable server is no reason to stop: the client retries,
	 * and TSGs are handled as soon as their pods are known. */
	if (kube_client_start(k->client) != 0) {
		log_error("kubernetes: the API client did not start");
		return -1;
	}
	return 0;
}

int kmode_start(struct agent *a)
{
	a->kube = calloc(1, sizeof(*a->kube));
	if (!a->kube) {
		log_error("kubernetes: out of memory");
		return -1;
	}
	a->kube->timer.w.fd = a->kube->podres_w.fd = a->kube->inotify_w.fd = -1;
	a->mode = AGENT_MODE_KUBE;
	if (a->cfg->nrules || a->cfg->default_class != CLASS_UNMANAGED)
		log_info("kubernetes: the policy file's rules and defaultClass are not used; "
			 "a pod's gpu.qos annotation decides (default %s)",
			 class_name(a->cfg->k8s_default_class));
	if (kube_config_load(a) != 0 || kube_client_init(a) != 0)
		return -1;
	return kmode_podres_start(a);
}

void kmode_stop(struct agent *a)
{
	struct kmode *k = a->kube;

	if (!k)
		return;
	kmode_podres_stop(a);
	/* The client may still give its fds back through watch_fd. */
	kube_client_free(k->client);
	while (k->fds)
		kfd_drop(a, k->fds);
	kmode_reap(a);
	loop_timer_del(&k->timer);
	kube_config_free(&k->cfg);
	kmode_free_pods(k);
	free(k);
	a->kube = NULL;
	pods_free(a);
}

/* ---- the ctl view ---- */

static void stats_json(const struct kmode *k, cJSON *o)
{
	struct kube_stats st;
	cJSON *s = cJSON_AddObjectToObject(o, "stats");

	if (!s)
		return;
	kube_client_stats(k->client, &st);
	json_add_num(s, "lists", (double)st.lists);
	json_add_num(s, "relists", (double)st.relists);
	json_add_num(s, "watches", (double)st.watches);
	json_add_num(s, "watchEvents", (double)st.watch_events);
	json_add_num(s, "unauthorized", (double)st.unauthorized);
	json_add_num(s, "errors", (double)st.errors);
	json_add_num(s, "patchesSent", (double)st.patches_sent);
	json_add_num(s, "patchesUnchanged", (double)st.patches_unchanged);
	json_add_num(s, "patchAnswersTooLarge", (double)st.patch_answers_too_large);
	json_add_num(s, "patchesRefused", (double)st.patches_refused);
	json_add_num(s, "patchesWithheld", (double)st.patches_withheld);
	json_add_num(s, "eventsSent", (double)st.events_sent);
	json_add_num(s, "eventsSuppressed", (double)st.events_suppressed);
	json_add_num(s, "eventsExisting", (double)st.events_existing);
	json_add_num(s, "eventsDropped", (double)st.events_dropped);
	json_add_num(s, "podsRefused", (double)st.pods_refused);
	json_add_num(s, "listsTooLarge", (double)st.lists_too_large);
	json_add_num(s, "noPodsWarnings", (double)st.no_pods_warnings);
}

void kmode_json(struct agent *a, cJSON *agent_obj)
{
	struct kmode *k = a->kube;
	cJSON *o = cJSON_AddObjectToObject(agent_obj, "kubernetes");

	if (!o || !k)
		return;
	cJSON_AddStringToObject(o, "node", a->opt.node_name);
	cJSON_AddStringToObject(o, "server", k->cfg.server);
	cJSON_AddBoolToObject(o, "synced", kube_client_synced(k->client));
	json_add_num(o, "pods", (double)kube_client_pod_count(k->client));
	cJSON_AddStringToObject(o, "resourceVersion", kube_client_resource_version(k->client));
	cJSON_AddStringToObject(o, "defaultClass", class_name(a->cfg->k8s_default_class));
	json_add_num(o, "classChanges", (double)k->class_changes);
	json_add_num(o, "publishPasses", (double)k->publish_passes);
	json_add_num(o, "publishedPods", (double)k->published_pods);
	stats_json(k, o);
	kmode_podres_json(a, o);
}

static void add_str_or_null(cJSON *o, const char *key, const char *v)
{
	if (v && *v)
		cJSON_AddStringToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

void kmode_proc_json(struct agent *a, const struct proc *p, cJSON *o)
{
	const struct kube_pod *pod;

	if (!a->kube)
		return;
	pod = p->pod_uid[0] ? kube_client_pod(a->kube->client, p->pod_uid) : NULL;
	add_str_or_null(o, "podUid", p->pod_uid);
	add_str_or_null(o, "podNamespace", pod ? pod->namespace : NULL);
	add_str_or_null(o, "podName", pod ? pod->name : NULL);
	add_str_or_null(o, "containerId", p->container_id);
	kmode_podres_devices(a, pod, o);
}

void kmode_proc_pod(struct agent *a, const struct proc *p, const char **ns, const char **name,
		    const char **container)
{
	const struct kube_pod *pod = NULL;

	*ns = *name = *container = "";
	if (a->kube && p && p->pod_uid[0])
		pod = kube_client_pod(a->kube->client, p->pod_uid);
	if (!pod)
		return;
	*ns = pod->namespace;
	*name = pod->name;
	for (size_t i = 0; i < pod->n_container_ids; i++)
		if (strcmp(pod->container_ids[i], p->container_id) == 0)
			*container = pod->container_names[i];
}

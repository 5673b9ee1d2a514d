/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_podres.c - the kubelet's pod-resources client (agent/kubenode/podres.h)
 * in the agent's loop: its result and inotify fds, a List every reconcile
 * tick when the rate limit allows (and at once when the kubelet's socket
 * is recreated), and the last good answer for the ctl view (which devices
 * the device plugin gave each pod). Fail open: an absent kubelet is logged
 * once per distinct error and changes nothing else. Does not own classes,
 * TSGs or the API server (kube_mode.c). Built without gRPC it says so.
 */
#include "agent/io/io.h"
#include "agent/io/kube_mode.h"
#include "agent/kubenode/podres.h"
#include "common/log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#ifdef GPUQOS_HAVE_PODRES

static void podres_note_error(struct kmode *k, const char *why)
{
	k->podres_errors++;
	if (strcmp(k->podres_error, why) != 0)
		log_warn("kubelet: %s (the last good answer is kept)", why);
	snprintf(k->podres_error, sizeof(k->podres_error), "%s", why);
}

static void on_podres_result(struct loop_watch *w, uint32_t events)
{
	struct agent *a = w->ctx;
	struct kmode *k = a->kube;
	struct podres_result r;

	(void)events;
	while (podres_take(k->podres, &r) == 1) {
		if (r.err != PODRES_OK) {
			podres_note_error(k, r.why);
			podres_list_free(&r.list);
			continue;
		}
		if (k->podres_error[0])
			log_info("kubelet: pod-resources List works again");
		k->podres_error[0] = '\0';
		k->podres_lists++;
		podres_list_free(k->devices);
		*(struct podres_list *)k->devices = r.list;
	}
}

static void on_podres_inotify(struct loop_watch *w, uint32_t events)
{
	struct agent *a = w->ctx;
	unsigned what;

	(void)events;
	what = podres_on_inotify(a->kube->podres);
	if ((what & PODRES_SOCKET_CREATED) && podres_request(a->kube->podres, now_us(), 1) != 0 &&
	    errno != EBUSY && errno != EAGAIN)
		log_warn("kubelet: pod-resources List not started: %s", strerror(errno));
}

static int podres_watch(struct agent *a, struct loop_watch *w, int fd, loop_fn fn)
{
	w->fd = fd;
	w->fn = fn;
	w->ctx = a;
	return loop_add(&a->io->loop, w, EPOLLIN);
}

int kmode_podres_start(struct agent *a)
{
	struct kmode *k = a->kube;
	struct podres_config cfg = { .socket_path = a->opt.podres_socket };
	char err[256];

	k->devices = calloc(1, sizeof(struct podres_list));
	if (!k->devices)
		return -1;
	k->podres = podres_start(&cfg, err, sizeof(err));
	if (!k->podres) {
		/* The agent's job does not depend on it: say so and go on. */
		podres_note_error(k, err);
		return 0;
	}
	if (podres_watch(a, &k->podres_w, podres_result_fd(k->podres), on_podres_result) != 0 ||
	    podres_watch(a, &k->inotify_w, podres_inotify_fd(k->podres), on_podres_inotify) != 0)
		return -1;
	if (podres_request(k->podres, now_us(), 1) != 0)
		log_warn("kubelet: first pod-resources List not started: %s", strerror(errno));
	return 0;
}

void kmode_podres_stop(struct agent *a)
{
	struct kmode *k = a->kube;

	if (k->podres) {
		/* The fds belong to podres: out of the loop first. */
		loop_del(&a->io->loop, &k->podres_w);
		loop_del(&a->io->loop, &k->inotify_w);
		podres_stop(k->podres);
		k->podres = NULL;
	}
	if (k->devices)
		podres_list_free(k->devices);
	free(k->devices);
	k->devices = NULL;
}

void kmode_tick(struct agent *a)
{
	struct kmode *k = a->kube;

	/* EAGAIN (rate limit) and EBUSY (one in flight) are the normal case. */
	if (k && k->podres && podres_request(k->podres, now_us(), 0) != 0 && errno != EAGAIN &&
	    errno != EBUSY)
		log_warn("kubelet: pod-resources List not started: %s", strerror(errno));
}

void kmode_podres_devices(const struct agent *a, const struct kube_pod *pod, cJSON *o)
{
	const struct podres_list *l = a->kube->devices;
	cJSON *arr;

	if (!pod || !l || !a->kube->podres_lists) { /* no answer yet */
		cJSON_AddNullToObject(o, "podDevices");
		return;
	}
	arr = cJSON_AddArrayToObject(o, "podDevices");
	for (size_t i = 0; arr && i < l->n; i++) {
		const struct podres_row *r = &l->rows[i];

		if (strcmp(r->namespace_, pod->namespace) != 0 || strcmp(r->pod, pod->name) != 0)
			continue;
		for (size_t j = 0; j < r->n_ids; j++)
			cJSON_AddItemToArray(arr, cJSON_CreateString(r->device_ids[j]));
	}
}

#else /* built without gRPC: no pod-resources client */

int kmode_podres_start(struct agent *a)
{
	snprintf(a->kube->podres_error, sizeof(a->kube->podres_error),
		 "built without the pod-resources client (gRPC missing)");
	log_warn("kubelet: %s", a->kube->podres_error);
	return 0;
}

void kmode_podres_stop(struct agent *a)
{
	(void)a;
}

void kmode_tick(struct agent *a)
{
	(void)a;
}

void kmode_podres_devices(const struct agent *a, const struct kube_pod *pod, cJSON *o)
{
	(void)a;
	(void)pod;
	cJSON_AddNullToObject(o, "podDevices");
}

#endif

void kmode_podres_json(const struct agent *a, cJSON *o)
{
	const struct kmode *k = a->kube;
	cJSON *p = cJSON_AddObjectToObject(o, "podResources");

	if (!p)
		return;
	cJSON_AddStringToObject(p, "socket", a->opt.podres_socket ? a->opt.podres_socket
								 : PODRES_DEFAULT_SOCKET);
	cJSON_AddBoolToObject(p, "running", k->podres != NULL);
	cJSON_AddNumberToObject(p, "lists", (double)k->podres_lists);
	cJSON_AddNumberToObject(p, "errors", (double)k->podres_errors);
	if (k->podres_error[0])
		cJSON_AddStringToObject(p, "error", k->podres_error);
	else
		cJSON_AddNullToObject(p, "error");
}

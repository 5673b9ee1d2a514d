/* SPDX-License-Identifier: Apache-2.0 */
/*
 * health.c - NVML XID events -> device health (health.h).
 *
 * NVML's event API only waits with a timeout, so the thread wakes every
 * WAIT_MS to see whether it should stop; nothing else runs on it.
 */
#include "plugin/health.h"
#include "common/log.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAIT_MS 500
#define NVML_SUCCESS 0
#define NVML_ERROR_TIMEOUT 10
#define NVML_EVENT_XID 0x8ull /* nvmlEventTypeXidCriticalError */

typedef void *nvml_dev;
typedef void *nvml_set;
struct nvml_event { /* nvmlEventData_t */
	nvml_dev device;
	unsigned long long type, data;
	unsigned gpu_instance, compute_instance;
};

struct phealth {
	void *lib;
	int (*init)(void);
	int (*shutdown)(void);
	int (*by_uuid)(const char *, nvml_dev *);
	int (*set_create)(nvml_set *);
	int (*register_events)(nvml_dev, unsigned long long, nvml_set);
	int (*wait)(nvml_set, struct nvml_event *, unsigned);
	int (*set_free)(nvml_set);
	nvml_set set;
	nvml_dev dev[PDEV_MAX_GPUS];
	struct pshared *sh;
	pthread_t th;
	atomic_int stop;
};

int phealth_xid_ignored(unsigned long long xid)
{
	static const unsigned long long ignored[] = { 13, 31, 43, 45, 68, 109 };

	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		if (xid == ignored[i])
			return 1;
	return 0;
}

static void on_event(struct phealth *h, const struct nvml_event *ev)
{
	pthread_mutex_lock(&h->sh->mu);
	for (size_t i = 0; i < h->sh->gpus.n; i++) {
		struct pgpu *g = &h->sh->gpus.gpu[i];
		if (!h->dev[i] || h->dev[i] != ev->device)
			continue;
		if (phealth_xid_ignored(ev->data)) {
			log_info("GPU %s: XID %llu (ignored: an application's own fault)", g->uuid,
				 ev->data);
		} else if (g->healthy) {
			log_warn("GPU %s: XID %llu: marked Unhealthy", g->uuid, ev->data);
			g->healthy = 0;
			h->sh->gen++;
		}
	}
	pthread_mutex_unlock(&h->sh->mu);
}

static void *health_main(void *arg)
{
	struct phealth *h = arg;
	struct nvml_event ev;

	struct timespec pause = { WAIT_MS / 1000, (WAIT_MS % 1000) * 1000000L };
	int failing = 0;

	while (!atomic_load(&h->stop)) {
		int rc = h->wait(h->set, &ev, WAIT_MS);
		if (rc == NVML_SUCCESS && (ev.type & NVML_EVENT_XID))
			on_event(h, &ev);
		if (rc != NVML_SUCCESS && rc != NVML_ERROR_TIMEOUT) {
			/* an error that returns at once must not spin this thread */
			if (!failing++)
				log_warn("health: nvmlEventSetWait failed (%d); retrying", rc);
			nanosleep(&pause, NULL);
		} else {
			failing = 0;
		}
	}
	return NULL;
}

static int load(struct phealth *h, const char *lib)
{
	h->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h->lib) {
		log_info("health: %s not loadable (%s): no XID health events", lib, dlerror());
		return -1;
	}
	*(void **)&h->init = dlsym(h->lib, "nvmlInit_v2");
	*(void **)&h->shutdown = dlsym(h->lib, "nvmlShutdown");
	*(void **)&h->by_uuid = dlsym(h->lib, "nvmlDeviceGetHandleByUUID");
	*(void **)&h->set_create = dlsym(h->lib, "nvmlEventSetCreate");
	*(void **)&h->register_events = dlsym(h->lib, "nvmlDeviceRegisterEvents");
	*(void **)&h->wait = dlsym(h->lib, "nvmlEventSetWait_v2");
	*(void **)&h->set_free = dlsym(h->lib, "nvmlEventSetFree");
	if (!h->init || !h->shutdown || !h->by_uuid || !h->set_create || !h->register_events ||
	    !h->wait || !h->set_free) {
		log_warn("health: %s lacks an NVML event function: no XID health events", lib);
		return -1;
	}
	if (h->init() != NVML_SUCCESS) {
		log_warn("health: nvmlInit failed: no XID health events");
		h->init = NULL;
		return -1;
	}
	return 0;
}

static void unload(struct phealth *h)
{
	if (h->set)
		h->set_free(h->set);
	if (h->init)
		h->shutdown();
	if (h->lib)
		dlclose(h->lib);
	free(h);
}

struct phealth *phealth_start(const char *lib, struct pshared *sh)
{
	struct phealth *h;
	sigset_t all, old;
	int rc;

	if (!lib[0] || strcmp(lib, "none") == 0)
		return NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->sh = sh;
	if (load(h, lib) < 0 || h->set_create(&h->set) != NVML_SUCCESS) {
		unload(h);
		return NULL;
	}
	pthread_mutex_lock(&sh->mu);
	for (size_t i = 0; i < sh->gpus.n; i++) {
		if (h->by_uuid(sh->gpus.gpu[i].uuid, &h->dev[i]) != NVML_SUCCESS ||
		    h->register_events(h->dev[i], NVML_EVENT_XID, h->set) != NVML_SUCCESS)
			log_warn("GPU %s: no XID events from NVML", sh->gpus.gpu[i].uuid);
	}
	pthread_mutex_unlock(&sh->mu);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&h->th, NULL, health_main, h);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		unload(h);
		return NULL;
	}
	log_info("health: watching XID events through %s", lib);
	return h;
}

void phealth_stop(struct phealth *h)
{
	if (!h)
		return;
	atomic_store(&h->stop, 1);
	pthread_join(h->th, NULL);
	unload(h);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * health.c - NVML XID events and lost GPUs -> device health (health.h).
 *
 * NVML's event API only waits with a timeout, so the thread wakes every
 * WAIT_MS to see whether it should stop; nothing else runs on it.
 *
 * A wait that says a GPU is gone (GPU_IS_LOST, RESET_REQUIRED) does not
 * say which: every GPU is asked (nvmlDeviceGetMemoryInfo, which goes to
 * the GPU) and those that answer the same are marked lost; when none can
 * be told, all are. A lost GPU is Healthy again once the wait no longer
 * says so and the GPU answers that query again. A critical XID stays.
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
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_RESET_REQUIRED 16
#define NVML_EVENT_XID 0x8ull /* nvmlEventTypeXidCriticalError */

typedef void *nvml_dev;
typedef void *nvml_set;
struct nvml_event { /* nvmlEventData_t */
	nvml_dev device;
	unsigned long long type, data;
	unsigned gpu_instance, compute_instance;
};
struct nvml_memory { /* nvmlMemory_t */
	unsigned long long total, free, used;
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
	int (*memory)(nvml_dev, struct nvml_memory *); /* NULL: none to ask */
	nvml_set set;
	nvml_dev dev[PDEV_MAX_GPUS];
	/* why a GPU is Unhealthy: a critical XID (for good), lost (until it
	 * answers again); both only on this thread */
	unsigned char xid_bad[PDEV_MAX_GPUS], lost[PDEV_MAX_GPUS];
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

/* 1 when an NVML status says the GPU is gone. */
static int gone(int rc)
{
	return rc == NVML_ERROR_GPU_IS_LOST || rc == NVML_ERROR_RESET_REQUIRED;
}

/* Healthy = neither a critical XID nor lost; a change is a new generation
 * (every stream then gets the whole list once). Under sh->mu. */
static void set_health(struct phealth *h, size_t i)
{
	struct pgpu *g = &h->sh->gpus.gpu[i];
	int healthy = !h->xid_bad[i] && !h->lost[i];

	if (g->healthy != healthy) {
		g->healthy = healthy;
		h->sh->gen++;
	}
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
		} else if (!h->xid_bad[i]) {
			log_warn("GPU %s: XID %llu: marked Unhealthy", g->uuid, ev->data);
			h->xid_bad[i] = 1;
			set_health(h, i);
		}
	}
	pthread_mutex_unlock(&h->sh->mu);
}

/* What NVML says of GPU i now: 0 it answers, else the NVML status. The
 * handle is looked up again when it was never had (lost at start). */
static int ask(struct phealth *h, size_t i, const char *uuid)
{
	struct nvml_memory m;
	int rc;

	if (!h->dev[i]) {
		rc = h->by_uuid(uuid, &h->dev[i]);
		if (rc != NVML_SUCCESS) {
			h->dev[i] = NULL;
			return rc;
		}
		if (h->register_events(h->dev[i], NVML_EVENT_XID, h->set) != NVML_SUCCESS)
			log_warn("GPU %s: no XID events from NVML", uuid);
	}
	return h->memory ? h->memory(h->dev[i], &m) : NVML_SUCCESS;
}

/* NVML's answer for every GPU, asked outside the table's lock (a lost
 * GPU may be slow to answer; the servers read the table meanwhile). The
 * UUIDs and their number never change after discovery. */
static void ask_all(struct phealth *h, int *rc)
{
	for (size_t i = 0; i < h->sh->gpus.n; i++)
		rc[i] = ask(h, i, h->sh->gpus.gpu[i].uuid);
}

/* The wait said a GPU is gone (rc): mark the ones that say so too, or
 * all when none does. */
static void on_lost(struct phealth *h, int rc)
{
	int said[PDEV_MAX_GPUS], told = 0;

	ask_all(h, said);
	for (size_t i = 0; i < h->sh->gpus.n; i++)
		told |= gone(said[i]);
	pthread_mutex_lock(&h->sh->mu);
	for (size_t i = 0; i < h->sh->gpus.n; i++) {
		if (h->lost[i] || (told && !gone(said[i])))
			continue;
		if (told)
			log_warn("GPU %s: lost (NVML %d): marked Unhealthy", h->sh->gpus.gpu[i].uuid,
				 said[i]);
		else
			log_warn("GPU %s: NVML says a GPU is lost (%d) and cannot tell which: "
				 "marked Unhealthy",
				 h->sh->gpus.gpu[i].uuid, rc);
		h->lost[i] = 1;
		set_health(h, i);
	}
	pthread_mutex_unlock(&h->sh->mu);
}

/* The wait no longer says a GPU is gone: the lost ones that answer are
 * back. */
static void recheck_lost(struct phealth *h)
{
	int said[PDEV_MAX_GPUS];

	ask_all(h, said);
	pthread_mutex_lock(&h->sh->mu);
	for (size_t i = 0; i < h->sh->gpus.n; i++) {
		if (!h->lost[i] || said[i] != NVML_SUCCESS)
			continue;
		log_info("GPU %s: answers NVML again: no longer lost%s", h->sh->gpus.gpu[i].uuid,
			 h->xid_bad[i] ? " (Unhealthy still: a critical XID)" : "");
		h->lost[i] = 0;
		set_health(h, i);
	}
	pthread_mutex_unlock(&h->sh->mu);
}

static int lost_any(const struct phealth *h)
{
	for (size_t i = 0; i < PDEV_MAX_GPUS; i++)
		if (h->lost[i])
			return 1;
	return 0;
}

static void *health_main(void *arg)
{
	struct phealth *h = arg;
	struct nvml_event ev;

	struct timespec pause = { WAIT_MS / 1000, (WAIT_MS % 1000) * 1000000L };
	int failing = 0, any_lost = lost_any(h);

	while (!atomic_load(&h->stop)) {
		int rc = h->wait(h->set, &ev, WAIT_MS);
		if (rc == NVML_SUCCESS && (ev.type & NVML_EVENT_XID))
			on_event(h, &ev);
		if (gone(rc)) {
			on_lost(h, rc);
			any_lost = 1;
		} else if (any_lost && (rc == NVML_SUCCESS || rc == NVML_ERROR_TIMEOUT)) {
			recheck_lost(h);
			any_lost = lost_any(h);
		}
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
	*(void **)&h->memory = dlsym(h->lib, "nvmlDeviceGetMemoryInfo");
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

/* Every GPU's handle and its XID events; one NVML calls lost already is
 * Unhealthy from the start. */
static void watch_gpus(struct phealth *h)
{
	struct pshared *sh = h->sh;

	pthread_mutex_lock(&sh->mu);
	for (size_t i = 0; i < sh->gpus.n; i++) {
		int rc = h->by_uuid(sh->gpus.gpu[i].uuid, &h->dev[i]);
		if (rc != NVML_SUCCESS)
			h->dev[i] = NULL;
		if (gone(rc)) {
			/* looked up again by ask() until it answers */
			log_warn("GPU %s: lost (NVML %d): marked Unhealthy", sh->gpus.gpu[i].uuid, rc);
			h->lost[i] = 1;
			set_health(h, i);
		} else if (rc != NVML_SUCCESS ||
			   h->register_events(h->dev[i], NVML_EVENT_XID, h->set) != NVML_SUCCESS) {
			log_warn("GPU %s: no XID events from NVML", sh->gpus.gpu[i].uuid);
		}
	}
	pthread_mutex_unlock(&sh->mu);
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
	watch_gpus(h);
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

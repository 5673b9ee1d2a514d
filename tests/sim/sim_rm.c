/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_rm.c - the simulated resource manager (see sim_rm.h).
 *
 * Owns: files, clients, objects and every RM status decided from them.
 * Does not own: anything that touches a caller's memory or the clock.
 * Scale is a few hundred objects, so plain arrays and linear scans keep
 * it obviously right; one mutex serialises every call like the RM's API
 * lock does.
 */
#include "sim_rm.h"
#include "sim_gpu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SIM_TIMESLICE_MAX_US 1000000u /* the largest value measured as accepted */
#define SIM_TSG_INITIAL_TIMESLICE_US 1024u
#define SIM_ENGINE_TYPE_LAST 0x40u /* engine types at or above are invalid */

struct sim_obj {
	rm_handle handle;
	rm_handle parent; /* the client handle for objects directly under it */
	rm_u32 cls;
	rm_u32 device_id;   /* devices */
	rm_u32 engine_type; /* TSGs */
	rm_u64 timeslice_us;
	rm_u32 interleave;
	int interleave_set;
	rm_u64 timeslice_sets;
	rm_u64 preempts;
	rm_u64 preempt_waits;
	int gpfifo_enabled;
	rm_u64 gpfifo_schedules;
	/* Channels: DISABLE_CHANNELS. */
	int disabled;
	int only_scheduling; /* bOnlyDisableScheduling of the last call */
	rm_u64 disables, enables;
	uint64_t disabled_since_us;
	/* Video memory (NV01_MEMORY_LOCAL_USER): bytes taken on GPU fb_gpu. */
	rm_u64 fb_bytes;
	rm_u32 fb_gpu;
};

struct sim_client {
	rm_handle handle;
	rm_u32 cls;
	uint64_t fh; /* the open file description that allocated it */
	struct sim_obj *objs;
	size_t nobjs, capobjs;
	rm_handle next_generated;
};

struct sim_file {
	uint64_t id;
	pid_t opener;
};

struct sim_rm {
	pthread_mutex_t lock;
	unsigned gpus;
	struct sim_client *clients;
	size_t nclients, capclients;
	struct sim_file *files;
	size_t nfiles, capfiles;
	uint64_t next_file;
	rm_handle next_client;
	rm_handle client_lo, client_hi; /* generated client handles: [lo, hi) */
	rm_u64 fb_total;  /* each GPU's video memory */
	rm_u64 *fb_used;  /* per GPU */
};

/* Grow an array of elem-sized items to hold one more; -1 on ENOMEM. */
static int sim_grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	void *p = realloc(*arr, ncap * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = ncap;
	return 0;
}

struct sim_rm *sim_rm_new(unsigned gpus)
{
	struct sim_rm *rm = calloc(1, sizeof(*rm));
	if (!rm)
		return NULL;
	if (pthread_mutex_init(&rm->lock, NULL) != 0) {
		free(rm);
		return NULL;
	}
	rm->gpus = gpus;
	rm->fb_total = SIM_FB_TOTAL_DEFAULT;
	rm->fb_used = calloc(gpus ? gpus : 1, sizeof(*rm->fb_used));
	if (!rm->fb_used) {
		pthread_mutex_destroy(&rm->lock);
		free(rm);
		return NULL;
	}
	rm->next_file = 1;
	rm->next_client = RM_CLIENT_HANDLE_BASE;
	rm->client_lo = RM_CLIENT_HANDLE_BASE;
	rm->client_hi = RM_CLIENT_HANDLE_BASE + 0x100000u;
	return rm;
}

void sim_rm_set_client_range(struct sim_rm *rm, rm_handle lo, rm_handle hi)
{
	pthread_mutex_lock(&rm->lock);
	rm->client_lo = lo;
	rm->client_hi = hi;
	rm->next_client = lo;
	pthread_mutex_unlock(&rm->lock);
}

void sim_rm_set_fb_total(struct sim_rm *rm, rm_u64 bytes)
{
	pthread_mutex_lock(&rm->lock);
	rm->fb_total = bytes;
	pthread_mutex_unlock(&rm->lock);
}

/* An object is gone: the video memory it held is free again. */
static void sim_obj_gone(struct sim_rm *rm, const struct sim_obj *o)
{
	if (o->fb_bytes && o->fb_gpu < rm->gpus)
		rm->fb_used[o->fb_gpu] -= o->fb_bytes;
}

static void sim_client_clear(struct sim_rm *rm, struct sim_client *cl)
{
	for (size_t i = 0; i < cl->nobjs; i++)
		sim_obj_gone(rm, &cl->objs[i]);
	free(cl->objs);
	cl->objs = NULL;
	cl->nobjs = cl->capobjs = 0;
}

void sim_rm_destroy(struct sim_rm *rm)
{
	if (!rm)
		return;
	for (size_t i = 0; i < rm->nclients; i++)
		sim_client_clear(rm, &rm->clients[i]);
	free(rm->clients);
	free(rm->files);
	free(rm->fb_used);
	pthread_mutex_destroy(&rm->lock);
	free(rm);
}

/* ---------------- lookups (lock held) ---------------- */

static struct sim_client *sim_find_client(struct sim_rm *rm, rm_handle h)
{
	for (size_t i = 0; i < rm->nclients; i++)
		if (rm->clients[i].handle == h)
			return &rm->clients[i];
	return NULL;
}

static struct sim_obj *sim_find_obj(struct sim_client *cl, rm_handle h)
{
	for (size_t i = 0; i < cl->nobjs; i++)
		if (cl->objs[i].handle == h)
			return &cl->objs[i];
	return NULL;
}

/* The ownership rule measured on the real driver: a client is usable only
 * through the open file description that allocated it (0x23 otherwise). */
static struct sim_client *sim_owned_client(struct sim_rm *rm, const struct sim_call *c,
					   rm_handle h)
{
	struct sim_client *cl = sim_find_client(rm, h);
	return (cl && cl->fh == c->fh) ? cl : NULL;
}

static int sim_handle_in_use(struct sim_client *cl, rm_handle h)
{
	return h == cl->handle || sim_find_obj(cl, h) != NULL;
}

/* ---------------- files ---------------- */

uint64_t sim_rm_file_open(struct sim_rm *rm, pid_t opener)
{
	uint64_t id = 0;

	pthread_mutex_lock(&rm->lock);
	if (sim_grow((void **)&rm->files, &rm->capfiles, rm->nfiles, sizeof(*rm->files)) == 0) {
		id = rm->next_file++;
		rm->files[rm->nfiles++] = (struct sim_file){ .id = id, .opener = opener };
	}
	pthread_mutex_unlock(&rm->lock);
	return id;
}

static void sim_remove_client_at(struct sim_rm *rm, size_t i)
{
	sim_client_clear(rm, &rm->clients[i]);
	memmove(&rm->clients[i], &rm->clients[i + 1],
		(rm->nclients - i - 1) * sizeof(*rm->clients));
	rm->nclients--;
}

void sim_rm_file_release(struct sim_rm *rm, uint64_t fh)
{
	pthread_mutex_lock(&rm->lock);
	for (size_t i = rm->nclients; i-- > 0;)
		if (rm->clients[i].fh == fh)
			sim_remove_client_at(rm, i);
	for (size_t i = 0; i < rm->nfiles; i++) {
		if (rm->files[i].id != fh)
			continue;
		memmove(&rm->files[i], &rm->files[i + 1],
			(rm->nfiles - i - 1) * sizeof(*rm->files));
		rm->nfiles--;
		break;
	}
	pthread_mutex_unlock(&rm->lock);
}

/* ---------------- alloc ---------------- */

rm_u32 sim_rm_alloc_params_len(rm_u32 cls, rm_u32 paramsSize)
{
	if (cls == RM_CLASS_DEVICE)
		return sizeof(struct rm_device_alloc);
	if (cls == RM_CLASS_TSG)
		return sizeof(struct rm_tsg_alloc);
	if (cls == RM_CLASS_MEMORY_LOCAL_USER && paramsSize == 0)
		return sizeof(struct rm_memory_alloc);
	return paramsSize;
}

static rm_u32 sim_alloc_client(struct sim_rm *rm, const struct sim_call *c,
			       struct rm_alloc_view *v)
{
	rm_handle h = v->hObjectNew;

	if (h == 0) {
		/* Generated like the real RM: upward from 0xc1d00000 (or the
		 * start of this simulator's range), skipping handles in use. */
		for (unsigned tries = 0; tries < 0x100000u; tries++) {
			h = rm->next_client++;
			if (rm->next_client >= rm->client_hi || rm->next_client < rm->client_lo)
				rm->next_client = rm->client_lo;
			if (!sim_find_client(rm, h))
				break;
			h = 0;
		}
		if (h == 0)
			return RM_ERR_INVALID_OBJECT_NEW;
	} else if (sim_find_client(rm, h)) {
		return RM_ERR_INVALID_OBJECT_NEW;
	}
	if (sim_grow((void **)&rm->clients, &rm->capclients, rm->nclients, sizeof(*rm->clients)))
		return RM_ERR_INVALID_OBJECT_NEW;
	rm->clients[rm->nclients++] = (struct sim_client){
		.handle = h, .cls = v->hClass, .fh = c->fh,
		.next_generated = SIM_OBJECT_HANDLE_BASE,
	};
	v->hObjectNew = h;
	return RM_OK;
}

/* Which classes a parent of class pcls may hold; 0 = any parent will do. */
static int sim_parent_ok(rm_u32 cls, rm_u32 pcls, int parent_is_client)
{
	switch (cls) {
	case RM_CLASS_DEVICE:
		return parent_is_client;
	case RM_CLASS_SUBDEVICE:
	case RM_CLASS_TSG:
		return !parent_is_client && pcls == RM_CLASS_DEVICE;
	case RM_CLASS_MEMORY_LOCAL_USER:
		return !parent_is_client && (pcls == RM_CLASS_DEVICE || pcls == RM_CLASS_SUBDEVICE);
	default:
		if (rm_class_is_channel(cls))
			return !parent_is_client && (pcls == RM_CLASS_TSG || pcls == RM_CLASS_DEVICE);
		return 1;
	}
}

/* Class-specific construction from the allocation parameters. */
static rm_u32 sim_construct(struct sim_rm *rm, struct sim_obj *o, const void *ap, size_t aplen)
{
	if (o->cls == RM_CLASS_DEVICE) {
		struct rm_device_alloc d;
		if (!ap || aplen < sizeof(d))
			return RM_ERR_INVALID_ARGUMENT;
		memcpy(&d, ap, sizeof(d));
		if (d.deviceId >= rm->gpus)
			return RM_ERR_INVALID_ARGUMENT;
		o->device_id = d.deviceId;
	} else if (o->cls == RM_CLASS_TSG) {
		struct rm_tsg_alloc t;
		if (!ap || aplen < sizeof(t))
			return RM_ERR_INVALID_ARGUMENT;
		memcpy(&t, ap, sizeof(t));
		if (t.engineType >= SIM_ENGINE_TYPE_LAST)
			return RM_ERR_INVALID_ARGUMENT;
		o->engine_type = t.engineType ? t.engineType : RM_ENGINE_GR0;
		o->timeslice_us = SIM_TSG_INITIAL_TIMESLICE_US;
		o->interleave = RM_INTERLEAVE_MEDIUM;
	}
	return RM_OK;
}

/* Video memory: the size asked (NV_MEMORY_ALLOCATION_PARAMS.size, taken
 * exactly: the simulator does not round) on the GPU of the parent device
 * or subdevice, or NV_ERR_NO_MEMORY when that GPU has less left, as the
 * RM answers when its heap cannot hold it. A virtual allocation takes
 * nothing. Recorded in o; counted once the object exists. */
static rm_u32 sim_take_fb(struct sim_rm *rm, struct sim_client *cl, const struct sim_obj *parent,
			  struct sim_obj *o, const void *ap, size_t aplen)
{
	const struct sim_obj *dev = parent;
	struct rm_memory_alloc m;

	if (!ap)
		return RM_OK; /* a replayed trace without its parameters: takes nothing */
	if (aplen < sizeof(m))
		return RM_ERR_INVALID_ARGUMENT;
	memcpy(&m, ap, sizeof(m));
	if (m.flags & RM_MEMORY_FLAGS_VIRTUAL)
		return RM_OK;
	if (m.size == 0)
		return RM_ERR_INVALID_ARGUMENT;
	if (dev && dev->cls == RM_CLASS_SUBDEVICE)
		dev = sim_find_obj(cl, dev->parent);
	if (!dev || dev->device_id >= rm->gpus)
		return RM_ERR_INVALID_OBJECT_PARENT;
	if (m.size > rm->fb_total - rm->fb_used[dev->device_id])
		return RM_ERR_NO_MEMORY;
	o->fb_bytes = m.size;
	o->fb_gpu = dev->device_id;
	return RM_OK;
}

static rm_handle sim_generate_handle(struct sim_client *cl)
{
	for (unsigned tries = 0; tries < 0x100000u; tries++) {
		rm_handle h = cl->next_generated++;
		if (!sim_handle_in_use(cl, h))
			return h;
	}
	return 0;
}

static rm_u32 sim_alloc_object(struct sim_rm *rm, struct sim_client *cl,
			       struct rm_alloc_view *v, const void *ap, size_t aplen)
{
	int parent_is_client = v->hObjectParent == cl->handle;
	struct sim_obj *parent = parent_is_client ? NULL : sim_find_obj(cl, v->hObjectParent);

	if (!parent_is_client && !parent)
		return RM_ERR_INVALID_OBJECT_PARENT;
	if (!sim_parent_ok(v->hClass, parent ? parent->cls : cl->cls, parent_is_client))
		return RM_ERR_INVALID_OBJECT_PARENT;
	rm_handle h = v->hObjectNew ? v->hObjectNew : sim_generate_handle(cl);
	if (h == 0 || sim_handle_in_use(cl, h))
		return RM_ERR_INVALID_OBJECT_NEW;

	struct sim_obj o = { .handle = h, .parent = v->hObjectParent, .cls = v->hClass };
	rm_u32 st = sim_construct(rm, &o, ap, aplen);
	if (st == RM_OK && o.cls == RM_CLASS_MEMORY_LOCAL_USER)
		st = sim_take_fb(rm, cl, parent, &o, ap, aplen);
	if (st != RM_OK)
		return st;
	if (sim_grow((void **)&cl->objs, &cl->capobjs, cl->nobjs, sizeof(*cl->objs)))
		return RM_ERR_INVALID_OBJECT_NEW;
	cl->objs[cl->nobjs++] = o;
	if (o.fb_bytes)
		rm->fb_used[o.fb_gpu] += o.fb_bytes;
	v->hObjectNew = h;
	return RM_OK;
}

rm_u32 sim_rm_alloc(struct sim_rm *rm, const struct sim_call *c, struct rm_alloc_view *v,
		    const void *ap, size_t aplen)
{
	rm_u32 st;

	pthread_mutex_lock(&rm->lock);
	if (rm_class_is_client(v->hClass)) {
		st = sim_alloc_client(rm, c, v);
	} else {
		struct sim_client *cl = sim_owned_client(rm, c, v->hRoot);
		st = cl ? sim_alloc_object(rm, cl, v, ap, aplen) : RM_ERR_INVALID_CLIENT;
	}
	pthread_mutex_unlock(&rm->lock);
	return st;
}

/* ---------------- free ---------------- */

/* Remove h and, repeatedly, every object whose parent is gone. */
static void sim_free_subtree(struct sim_rm *rm, struct sim_client *cl, rm_handle h)
{
	size_t w = 0;
	for (size_t i = 0; i < cl->nobjs; i++)
		if (cl->objs[i].handle != h)
			cl->objs[w++] = cl->objs[i];
		else
			sim_obj_gone(rm, &cl->objs[i]);
	cl->nobjs = w;

	for (int changed = 1; changed;) {
		changed = 0;
		w = 0;
		for (size_t i = 0; i < cl->nobjs; i++) {
			struct sim_obj *o = &cl->objs[i];
			if (o->parent == cl->handle || sim_find_obj(cl, o->parent)) {
				cl->objs[w++] = *o;
			} else {
				sim_obj_gone(rm, o);
				changed = 1;
			}
		}
		cl->nobjs = w;
	}
}

rm_u32 sim_rm_free(struct sim_rm *rm, const struct sim_call *c, const struct rm_free_params *p)
{
	rm_u32 st = RM_OK;

	pthread_mutex_lock(&rm->lock);
	struct sim_client *cl = sim_owned_client(rm, c, p->hRoot);
	if (!cl)
		st = RM_ERR_INVALID_CLIENT;
	else if (p->hObjectOld == p->hRoot)
		sim_remove_client_at(rm, (size_t)(cl - rm->clients));
	else if (sim_find_obj(cl, p->hObjectOld))
		sim_free_subtree(rm, cl, p->hObjectOld);
	/* An unknown object in a valid client is NV_OK: the RM's resource
	 * server runs in compatibility mode, and libcuda 580 frees its
	 * device handle before allocating it (fixture traces, seq 18). */
	pthread_mutex_unlock(&rm->lock);
	return st;
}

/* ---------------- controls ---------------- */

static rm_u32 sim_tsg_control(struct sim_obj *t, const struct sim_call *c, rm_u32 cmd,
			      void *params)
{
	switch (cmd) {
	case RM_CTRL_TSG_SET_TIMESLICE: {
		struct rm_tsg_timeslice *p = params;
		if (p->timesliceUs > SIM_TIMESLICE_MAX_US)
			return RM_ERR_INVALID_ARGUMENT;
		t->timeslice_us = p->timesliceUs;
		t->timeslice_sets++;
		return RM_OK;
	}
	case RM_CTRL_TSG_GET_TIMESLICE: {
		struct rm_tsg_timeslice *p = params;
		p->timesliceUs = t->timeslice_us;
		return RM_OK;
	}
	case RM_CTRL_TSG_SET_INTERLEAVE: {
		struct rm_tsg_interleave *p = params;
		if (!c->privileged)
			return RM_ERR_INSUFFICIENT_PERMISSIONS;
		if (p->tsgInterleaveLevel > RM_INTERLEAVE_HIGH)
			return RM_ERR_INVALID_ARGUMENT;
		t->interleave = p->tsgInterleaveLevel;
		t->interleave_set = 1;
		return RM_OK;
	}
	case RM_CTRL_TSG_PREEMPT: {
		struct rm_tsg_preempt *p = params;
		t->preempts++;
		if (p->bWait)
			t->preempt_waits++;
		return RM_OK;
	}
	case RM_CTRL_TSG_GPFIFO_SCHEDULE: {
		struct rm_tsg_gpfifo_schedule *p = params;
		t->gpfifo_enabled = p->bEnable != 0;
		t->gpfifo_schedules++;
		return RM_OK;
	}
	default:
		return RM_OK; /* other a06c controls replay as no-ops */
	}
}

/* NV2080_CTRL_CMD_FIFO_DISABLE_CHANNELS on a subdevice. The event pointer
 * is refused as open-gpu-kernel-modules refuses it from a user client.
 * Each entry must name a channel of a client the caller owns (RM forwards
 * the list to GSP unchecked; whether GSP refuses a foreign client was not
 * measured: 0x23 and 0x33 are our choice). A refused call changes nothing
 * (also our choice). */
static rm_u32 sim_disable_channels(struct sim_rm *rm, const struct sim_call *c,
				   const struct rm_disable_channels *d)
{
	struct sim_obj *ch[RM_DISABLE_CHANNELS_MAX];

	if (d->pRunlistPreemptEvent != 0)
		return RM_ERR_INSUFFICIENT_PERMISSIONS;
	if (d->numChannels > RM_DISABLE_CHANNELS_MAX)
		return RM_ERR_INVALID_ARGUMENT;
	for (rm_u32 i = 0; i < d->numChannels; i++) {
		struct sim_client *cl = sim_owned_client(rm, c, d->hClientList[i]);

		if (!cl)
			return RM_ERR_INVALID_CLIENT;
		ch[i] = sim_find_obj(cl, d->hChannelList[i]);
		if (!ch[i] || !rm_class_is_channel(ch[i]->cls))
			return RM_ERR_INVALID_OBJECT_HANDLE;
	}
	for (rm_u32 i = 0; i < d->numChannels; i++) {
		if (d->bDisable && !ch[i]->disabled)
			ch[i]->disabled_since_us = c->t_us;
		ch[i]->disabled = d->bDisable != 0;
		ch[i]->only_scheduling = d->bOnlyDisableScheduling != 0;
		if (d->bDisable)
			ch[i]->disables++;
		else
			ch[i]->enables++;
	}
	return RM_OK;
}

/* Bit i set when some client holds a device of instance i: the IN_USE
 * flag of GET_ID_INFO_V2. */
static uint64_t sim_devices_in_use(const struct sim_rm *rm)
{
	uint64_t m = 0;

	for (size_t i = 0; i < rm->nclients; i++)
		for (size_t j = 0; j < rm->clients[i].nobjs; j++) {
			const struct sim_obj *o = &rm->clients[i].objs[j];
			if (o->cls == RM_CLASS_DEVICE && o->device_id < 64)
				m |= 1ull << o->device_id;
		}
	return m;
}

/* The device instance a subdevice belongs to (its parent device's). */
static unsigned sim_subdevice_instance(struct sim_client *cl, const struct sim_obj *sub)
{
	const struct sim_obj *d = sim_find_obj(cl, sub->parent);
	return d ? d->device_id : 0;
}

/* FB_GET_INFO_V2: the sizes of GPU gpu in KiB, as the RM answers them; an
 * index not modelled answers 0. A list longer than the structure holds is
 * the RM's NV_ERR_INVALID_ARGUMENT. */
static rm_u32 sim_fb_info(struct sim_rm *rm, unsigned gpu, struct rm_fb_info_v2 *p)
{
	rm_u64 total = rm->fb_total, used = gpu < rm->gpus ? rm->fb_used[gpu] : 0;

	if (p->fbInfoListSize > sizeof(p->fbInfoList) / sizeof(p->fbInfoList[0]))
		return RM_ERR_INVALID_ARGUMENT;
	for (rm_u32 i = 0; i < p->fbInfoListSize; i++) {
		struct rm_fb_info *e = &p->fbInfoList[i];

		switch (e->index) {
		case RM_FB_INFO_RAM_SIZE:
		case RM_FB_INFO_TOTAL_RAM_SIZE:
		case RM_FB_INFO_HEAP_SIZE:
		case RM_FB_INFO_MAPPABLE_HEAP_SIZE:
		case RM_FB_INFO_USABLE_RAM_SIZE:
			e->data = (rm_u32)(total >> 10);
			break;
		case RM_FB_INFO_HEAP_FREE:
		case RM_FB_INFO_LARGEST_FREE_REGION_SIZE_KB:
			e->data = (rm_u32)((total - used) >> 10);
			break;
		default:
			e->data = 0;
			break;
		}
	}
	return RM_OK;
}

/* The process an RM client belongs to: the opener of the file it was
 * allocated on (the RM keeps the allocating process; a file opened and
 * used by one process, as every workload here does, is the same). */
static pid_t sim_client_pid(const struct sim_rm *rm, const struct sim_client *cl)
{
	for (size_t i = 0; i < rm->nfiles; i++)
		if (rm->files[i].id == cl->fh)
			return rm->files[i].opener;
	return 0;
}

/* Whether cl holds a device of instance gpu (and, cls not 0, an object
 * of class cls). */
static int sim_client_on_gpu(const struct sim_client *cl, unsigned gpu, rm_u32 cls)
{
	int dev = 0, has = !cls;

	for (size_t j = 0; j < cl->nobjs; j++) {
		dev |= cl->objs[j].cls == RM_CLASS_DEVICE && cl->objs[j].device_id == gpu;
		has |= cls && cl->objs[j].cls == cls;
	}
	return dev && has;
}

/* NV2080_CTRL_CMD_GPU_GET_PIDS: as gpuGetProcWithObject, the distinct
 * pids of the clients with a device on the GPU (id NV20_SUBDEVICE_0) or
 * also an object of class id (any other id), in client order, at most
 * 950. A vGPU guest query lists none; another idType is refused. */
static rm_u32 sim_get_pids(const struct sim_rm *rm, unsigned gpu, struct rm_gpu_get_pids *p)
{
	rm_u32 n = 0;

	if (p->idType == RM_GPU_GET_PIDS_ID_TYPE_VGPU_GUEST) {
		p->pidTblCount = 0;
		return RM_OK;
	}
	if (p->idType != RM_GPU_GET_PIDS_ID_TYPE_CLASS)
		return RM_ERR_INVALID_ARGUMENT;
	for (size_t i = 0; i < rm->nclients && n < RM_GPU_GET_PIDS_MAX; i++) {
		const struct sim_client *cl = &rm->clients[i];
		pid_t pid = sim_client_pid(rm, cl);
		rm_u32 k = 0;

		if (pid <= 0 ||
		    !sim_client_on_gpu(cl, gpu, p->id == RM_CLASS_SUBDEVICE ? 0 : p->id))
			continue;
		while (k < n && p->pidTbl[k] != (rm_u32)pid)
			k++;
		if (k == n)
			p->pidTbl[n++] = (rm_u32)pid;
	}
	p->pidTblCount = n;
	return RM_OK;
}

/* NV2080_CTRL_CMD_GPU_GET_PID_INFO: per entry, the video memory
 * (NV01_MEMORY_LOCAL_USER) all of its pid's clients hold on the GPU, as
 * memPrivate (the simulator has no duplicated memory); no MIG, so no
 * partition. A count of 0 or past 200 is refused; an entry of another
 * index or pid 0 gets NV_ERR_INVALID_ARGUMENT as its result. */
static rm_u32 sim_get_pid_info(const struct sim_rm *rm, unsigned gpu,
			       struct rm_gpu_get_pid_info *p)
{
	if (p->pidInfoListCount == 0 || p->pidInfoListCount > RM_GPU_GET_PID_INFO_MAX)
		return RM_ERR_INVALID_ARGUMENT;
	for (rm_u32 i = 0; i < p->pidInfoListCount; i++) {
		struct rm_gpu_pid_info *e = &p->pidInfoList[i];

		e->computeInstanceId = e->gpuInstanceId = RM_PARTITIONID_INVALID;
		if (e->index != RM_GPU_PID_INFO_VIDEO_MEMORY_USAGE || e->pid == 0) {
			e->result = RM_ERR_INVALID_ARGUMENT;
			continue;
		}
		memset(&e->data, 0, sizeof(e->data));
		for (size_t c = 0; c < rm->nclients; c++) {
			const struct sim_client *cl = &rm->clients[c];

			if (sim_client_pid(rm, cl) != (pid_t)e->pid)
				continue;
			for (size_t j = 0; j < cl->nobjs; j++)
				if (cl->objs[j].cls == RM_CLASS_MEMORY_LOCAL_USER &&
				    cl->objs[j].fb_gpu == gpu)
					e->data.memPrivate += cl->objs[j].fb_bytes;
		}
		e->result = RM_OK;
	}
	return RM_OK;
}

/* Whether cmd is a method of o's class among those modelled: TSG controls
 * on TSGs, the GPU identity controls on the client, GET_GID_INFO on a
 * subdevice. Other commands exist everywhere (so traces replay). */
static int sim_method_exists(rm_u32 cmd, const struct sim_obj *o)
{
	if (cmd == RM_CTRL_TSG_GET_INTERLEAVE)
		return 0;
	if ((cmd >> 16) == RM_CLASS_TSG)
		return o && o->cls == RM_CLASS_TSG;
	if (sim_gpu_is_client_ctrl(cmd))
		return o == NULL;
	if (cmd == RM_CTRL_SUBDEVICE_GET_GID_INFO || cmd == RM_CTRL_FIFO_DISABLE_CHANNELS ||
	    cmd == RM_CTRL_FB_GET_INFO_V2 || cmd == RM_CTRL_GPU_GET_PIDS ||
	    cmd == RM_CTRL_GPU_GET_PID_INFO)
		return o && o->cls == RM_CLASS_SUBDEVICE;
	return 1;
}

/* Checks in the order the RM makes them: client, object, method exists,
 * parameter size; then an injected failure stands in for the method. */
static rm_u32 sim_control_locked(struct sim_rm *rm, const struct sim_call *c,
				 rm_handle hClient, rm_handle hObject, rm_u32 cmd, void *params,
				 rm_u32 size, const struct sim_ctrl_inject *inj)
{
	struct sim_client *cl = sim_owned_client(rm, c, hClient);
	if (!cl)
		return RM_ERR_INVALID_CLIENT;
	struct sim_obj *o = hObject == hClient ? NULL : sim_find_obj(cl, hObject);
	if (hObject != hClient && !o)
		return RM_ERR_INVALID_OBJECT_HANDLE;

	if (inj->unsupported || !sim_method_exists(cmd, o))
		return RM_ERR_NOT_SUPPORTED;
	rm_u32 want = (cmd >> 16) == RM_CLASS_TSG          ? rm_tsg_ctrl_params_size(cmd)
		      : cmd == RM_CTRL_FIFO_DISABLE_CHANNELS ? sizeof(struct rm_disable_channels)
		      : cmd == RM_CTRL_FB_GET_INFO_V2        ? sizeof(struct rm_fb_info_v2)
		      : cmd == RM_CTRL_GPU_GET_PIDS          ? sizeof(struct rm_gpu_get_pids)
		      : cmd == RM_CTRL_GPU_GET_PID_INFO      ? sizeof(struct rm_gpu_get_pid_info)
							     : sim_gpu_ctrl_params_size(cmd);
	if (want && (size != want || !params))
		return RM_ERR_INVALID_PARAM_STRUCT;
	if (inj->fail)
		return inj->fail_status;
	if (o && o->cls == RM_CLASS_TSG)
		return sim_tsg_control(o, c, cmd, params);
	if (!o && sim_gpu_is_client_ctrl(cmd))
		return sim_gpu_client_control(rm->gpus, sim_devices_in_use(rm), cmd, params);
	if (cmd == RM_CTRL_SUBDEVICE_GET_GID_INFO)
		return sim_gpu_gid_info(sim_subdevice_instance(cl, o), params);
	if (cmd == RM_CTRL_FIFO_DISABLE_CHANNELS)
		return sim_disable_channels(rm, c, params);
	if (cmd == RM_CTRL_FB_GET_INFO_V2)
		return sim_fb_info(rm, sim_subdevice_instance(cl, o), params);
	if (cmd == RM_CTRL_GPU_GET_PIDS)
		return sim_get_pids(rm, sim_subdevice_instance(cl, o), params);
	if (cmd == RM_CTRL_GPU_GET_PID_INFO)
		return sim_get_pid_info(rm, sim_subdevice_instance(cl, o), params);
	return RM_OK;
}

rm_u32 sim_rm_control(struct sim_rm *rm, const struct sim_call *c, rm_handle hClient,
		      rm_handle hObject, rm_u32 cmd, void *params, rm_u32 size,
		      const struct sim_ctrl_inject *inj)
{
	/* NVXXXX_CTRL_CMD_NULL succeeds before anything is looked up. */
	if (cmd == 0)
		return RM_OK;
	pthread_mutex_lock(&rm->lock);
	rm_u32 st = sim_control_locked(rm, c, hClient, hObject, cmd, params, size, inj);
	pthread_mutex_unlock(&rm->lock);
	return st;
}

/* ---------------- state view ---------------- */

static void sim_json_files(struct sim_rm *rm, struct sim_buf *b)
{
	sim_buf_printf(b, "\"files\":[");
	for (size_t i = 0; i < rm->nfiles; i++) {
		const struct sim_file *f = &rm->files[i];
		sim_buf_printf(b, "%s{\"fh\":%llu,\"opener_pid\":%d,\"clients\":[", i ? "," : "",
			       (unsigned long long)f->id, (int)f->opener);
		int n = 0;
		for (size_t j = 0; j < rm->nclients; j++)
			if (rm->clients[j].fh == f->id)
				sim_buf_printf(b, "%s\"0x%08x\"", n++ ? "," : "",
					       rm->clients[j].handle);
		sim_buf_printf(b, "]}");
	}
	sim_buf_printf(b, "]");
}

/* How many channels under TSG t are disabled now. */
static unsigned sim_tsg_disabled(const struct sim_client *cl, const struct sim_obj *t)
{
	unsigned n = 0;

	for (size_t j = 0; j < cl->nobjs; j++)
		n += rm_class_is_channel(cl->objs[j].cls) && cl->objs[j].parent == t->handle &&
		     cl->objs[j].disabled;
	return n;
}

static void sim_json_tsg(const struct sim_client *cl, const struct sim_obj *o, struct sim_buf *b)
{
	sim_buf_printf(b,
		       "{\"handle\":\"0x%08x\",\"client\":\"0x%08x\",\"device\":\"0x%08x\","
		       "\"engineType\":%u,\"timeslice_us\":%llu,\"timeslice_sets\":%llu,"
		       "\"interleave\":%u,\"interleave_set\":%s,\"preempts\":%llu,"
		       "\"preempt_waits\":%llu,\"gpfifo_enabled\":%s,\"gpfifo_schedules\":%llu,"
		       "\"channels_disabled\":%u}",
		       o->handle, cl->handle, o->parent, o->engine_type,
		       (unsigned long long)o->timeslice_us, (unsigned long long)o->timeslice_sets,
		       o->interleave, o->interleave_set ? "true" : "false",
		       (unsigned long long)o->preempts, (unsigned long long)o->preempt_waits,
		       o->gpfifo_enabled ? "true" : "false",
		       (unsigned long long)o->gpfifo_schedules, sim_tsg_disabled(cl, o));
}

static void sim_json_channel(const struct sim_obj *o, struct sim_buf *b)
{
	sim_buf_printf(b, ",\"enabled\":%s,\"disables\":%llu,\"enables\":%llu,"
		       "\"onlyScheduling\":%s,\"disabled_since_us\":",
		       o->disabled ? "false" : "true", (unsigned long long)o->disables,
		       (unsigned long long)o->enables, o->only_scheduling ? "true" : "false");
	if (o->disabled)
		sim_buf_printf(b, "%llu", (unsigned long long)o->disabled_since_us);
	else
		sim_buf_printf(b, "null");
}

/* One JSON array of the objects of every client that pass keep(). */
static void sim_json_objects(struct sim_rm *rm, struct sim_buf *b, const char *name,
			     int (*keep)(rm_u32 cls))
{
	int n = 0;
	sim_buf_printf(b, ",\"%s\":[", name);
	for (size_t i = 0; i < rm->nclients; i++) {
		const struct sim_client *cl = &rm->clients[i];
		for (size_t j = 0; j < cl->nobjs; j++) {
			const struct sim_obj *o = &cl->objs[j];
			if (!keep(o->cls))
				continue;
			sim_buf_printf(b, "%s", n++ ? "," : "");
			if (o->cls == RM_CLASS_TSG) {
				sim_json_tsg(cl, o, b);
				continue;
			}
			sim_buf_printf(b, "{\"handle\":\"0x%08x\",\"client\":\"0x%08x\","
				       "\"parent\":\"0x%08x\",\"class\":\"0x%04x\"",
				       o->handle, cl->handle, o->parent, o->cls);
			if (o->cls == RM_CLASS_DEVICE)
				sim_buf_printf(b, ",\"deviceId\":%u", o->device_id);
			if (o->cls == RM_CLASS_MEMORY_LOCAL_USER)
				sim_buf_printf(b, ",\"gpu\":%u,\"bytes\":%llu", o->fb_gpu,
					       (unsigned long long)o->fb_bytes);
			if (rm_class_is_channel(o->cls))
				sim_json_channel(o, b);
			sim_buf_printf(b, "}");
		}
	}
	sim_buf_printf(b, "]");
}

static int sim_is_device(rm_u32 cls) { return cls == RM_CLASS_DEVICE; }
static int sim_is_subdevice(rm_u32 cls) { return cls == RM_CLASS_SUBDEVICE; }
static int sim_is_tsg(rm_u32 cls) { return cls == RM_CLASS_TSG; }
static int sim_is_channel(rm_u32 cls) { return rm_class_is_channel(cls); }
static int sim_is_other(rm_u32 cls)
{
	return !sim_is_device(cls) && !sim_is_subdevice(cls) && !sim_is_tsg(cls) &&
	       !sim_is_channel(cls);
}

void sim_rm_state_json(struct sim_rm *rm, struct sim_buf *b, uint64_t t_us)
{
	pthread_mutex_lock(&rm->lock);
	sim_buf_printf(b, "{\"t_us\":%llu,\"gpus\":%u", (unsigned long long)t_us, rm->gpus);
	sim_gpu_state_json(rm->gpus, b);
	sim_buf_printf(b, ",\"fb\":{\"totalBytes\":%llu,\"usedBytes\":[",
		       (unsigned long long)rm->fb_total);
	for (unsigned g = 0; g < rm->gpus; g++)
		sim_buf_printf(b, "%s%llu", g ? "," : "", (unsigned long long)rm->fb_used[g]);
	sim_buf_printf(b, "]},");
	sim_json_files(rm, b);
	sim_buf_printf(b, ",\"clients\":[");
	for (size_t i = 0; i < rm->nclients; i++)
		sim_buf_printf(b, "%s{\"handle\":\"0x%08x\",\"class\":\"0x%04x\",\"fh\":%llu,"
			       "\"objects\":%zu}", i ? "," : "", rm->clients[i].handle,
			       rm->clients[i].cls, (unsigned long long)rm->clients[i].fh,
			       rm->clients[i].nobjs);
	sim_buf_printf(b, "]");
	sim_json_objects(rm, b, "devices", sim_is_device);
	sim_json_objects(rm, b, "subdevices", sim_is_subdevice);
	sim_json_objects(rm, b, "tsgs", sim_is_tsg);
	sim_json_objects(rm, b, "channels", sim_is_channel);
	sim_json_objects(rm, b, "others", sim_is_other);
	sim_buf_printf(b, "}\n");
	pthread_mutex_unlock(&rm->lock);
}

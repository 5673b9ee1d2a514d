/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_mem.c - the process's video memory per GPU (preempt_mem.h).
 *
 * The table is keyed by (client, handle), linear probing with
 * backward-shift deletion, so no tombstones build up in a process that
 * allocates and frees for days. Frees of a client or of a device scan it;
 * they are rare (a context's end).
 */
#include <stdlib.h>
#include <string.h>

#include "preempt_mem.h"

void pa_mem_init(struct pa_mem *m)
{
	memset(m, 0, sizeof(*m));
}

void pa_mem_reset(struct pa_mem *m)
{
	free(m->tab);
	pa_mem_init(m);
}

static struct pa_mem_gpu *gpu_find(struct pa_mem *m, rm_u32 instance)
{
	for (unsigned i = 0; i < PA_MEM_GPUS; i++)
		if (m->gpu[i].used && m->gpu[i].instance == instance)
			return &m->gpu[i];
	return NULL;
}

static struct pa_mem_gpu *gpu_get(struct pa_mem *m, rm_u32 instance)
{
	struct pa_mem_gpu *g = gpu_find(m, instance);

	if (g != NULL || instance == GQ_UNKNOWN)
		return g;
	for (unsigned i = 0; i < PA_MEM_GPUS; i++) {
		g = &m->gpu[i];
		if (g->used)
			continue;
		memset(g, 0, sizeof(*g));
		g->used = 1;
		g->instance = instance;
		g->limit = GQ_MEM_UNLIMITED;
		return g;
	}
	m->unknown_gpu++;
	return NULL;
}

static unsigned slot_of(rm_handle h_client, rm_handle h)
{
	rm_u64 k = ((rm_u64)h_client << 32 | h) * 0x9e3779b97f4a7c15ull;

	return (unsigned)(k >> 40) & (PA_MEM_SLOTS - 1u);
}

static struct pa_mem_alloc *tab_find(struct pa_mem *m, rm_handle h_client, rm_handle h)
{
	if (m->tab == NULL || h == 0)
		return NULL;
	for (unsigned i = slot_of(h_client, h), n = 0; n < PA_MEM_SLOTS;
	     i = (i + 1u) & (PA_MEM_SLOTS - 1u), n++) {
		struct pa_mem_alloc *a = &m->tab[i];

		if (a->h == 0)
			return NULL;
		if (a->h == h && a->h_client == h_client)
			return a;
	}
	return NULL;
}

/* Empties slot a and shifts the entries after it that probed past it. */
static void tab_remove(struct pa_mem *m, struct pa_mem_alloc *a)
{
	unsigned hole = (unsigned)(a - m->tab);
	struct pa_mem_gpu *g = &m->gpu[a->gpu];

	g->used_bytes = g->used_bytes >= a->size ? g->used_bytes - a->size : 0;
	g->dirty = 1;
	m->live--;
	for (unsigned i = (hole + 1u) & (PA_MEM_SLOTS - 1u);; i = (i + 1u) & (PA_MEM_SLOTS - 1u)) {
		struct pa_mem_alloc *e = &m->tab[i];
		unsigned home;

		if (e->h == 0)
			break;
		home = slot_of(e->h_client, e->h);
		/* e may move into the hole unless its home lies after the hole,
		 * up to i (cyclically). */
		if (((i - home) & (PA_MEM_SLOTS - 1u)) >= ((i - hole) & (PA_MEM_SLOTS - 1u))) {
			m->tab[hole] = *e;
			hole = i;
		}
	}
	memset(&m->tab[hole], 0, sizeof(m->tab[hole]));
}

int pa_mem_refuse(struct pa_mem *m, rm_u32 instance, rm_u64 size)
{
	struct pa_mem_gpu *g = gpu_find(m, instance);

	if (g == NULL || g->limit == GQ_MEM_UNLIMITED)
		return 0;
	if (g->used_bytes <= g->limit && size <= g->limit - g->used_bytes)
		return 0;
	g->refused++;
	g->refused_bytes += size;
	g->dirty = 1;
	if (!g->refused_under) {
		g->refused_under = 1;
		g->urgent = 1;
	}
	return 1;
}

void pa_mem_unknown(struct pa_mem *m, rm_u32 instance)
{
	struct pa_mem_gpu *g = gpu_get(m, instance);

	if (g == NULL)
		return;
	g->unknown++;
	g->dirty = 1;
}

void pa_mem_added(struct pa_mem *m, int fd, rm_handle h_client, rm_handle h_parent, rm_handle h,
		  rm_u32 instance, rm_u64 size)
{
	struct pa_mem_gpu *g = gpu_get(m, instance);
	struct pa_mem_alloc *a;
	unsigned i;

	if (g == NULL)
		return;
	if (h == 0 || m->live >= PA_MEM_MAX_LIVE || tab_find(m, h_client, h) != NULL) {
		/* No room, or a handle the RM would not give twice: counted
		 * as unknown rather than twice or wrongly. */
		g->unknown++;
		g->dirty = 1;
		return;
	}
	if (m->tab == NULL && (m->tab = calloc(PA_MEM_SLOTS, sizeof(*m->tab))) == NULL) {
		g->unknown++;
		g->dirty = 1;
		return;
	}
	for (i = slot_of(h_client, h); m->tab[i].h != 0; i = (i + 1u) & (PA_MEM_SLOTS - 1u))
		;
	a = &m->tab[i];
	a->h_client = h_client;
	a->h = h;
	a->h_parent = h_parent;
	a->fd = fd;
	a->gpu = (unsigned)(g - m->gpu);
	a->size = size;
	m->live++;
	g->used_bytes += size;
	if (g->used_bytes > g->peak)
		g->peak = g->used_bytes;
	g->dirty = 1;
}

/* Removes every allocation match() picks; the table shifts under the scan,
 * so a slot is looked at again after a removal. */
static void remove_where(struct pa_mem *m, int (*match)(const struct pa_mem_alloc *a, rm_handle c,
							rm_handle h, int fd),
			 rm_handle c, rm_handle h, int fd)
{
	if (m->tab == NULL || m->live == 0)
		return;
	for (unsigned i = 0; i < PA_MEM_SLOTS;) {
		struct pa_mem_alloc *a = &m->tab[i];

		if (a->h != 0 && match(a, c, h, fd))
			tab_remove(m, a);
		else
			i++;
	}
}

static int under_object(const struct pa_mem_alloc *a, rm_handle c, rm_handle h, int fd)
{
	(void)fd;
	return a->h_client == c && (h == c || a->h_parent == h);
}

static int on_fd(const struct pa_mem_alloc *a, rm_handle c, rm_handle h, int fd)
{
	(void)c;
	(void)h;
	return a->fd == fd;
}

void pa_mem_freed(struct pa_mem *m, rm_handle h_client, rm_handle h)
{
	struct pa_mem_alloc *a = tab_find(m, h_client, h);

	if (a != NULL) {
		tab_remove(m, a);
		return;
	}
	remove_where(m, under_object, h_client, h, -1);
}

void pa_mem_close_fd(struct pa_mem *m, int fd)
{
	remove_where(m, on_fd, 0, 0, fd);
}

int pa_mem_set_limit(struct pa_mem *m, const struct gq_memory *msg)
{
	struct pa_mem_gpu *g;

	if ((msg->flags & ~GQ_MEMORY_F_REPORT) != 0 || msg->device_instance == GQ_UNKNOWN)
		return -1;
	g = gpu_get(m, msg->device_instance);
	if (g == NULL)
		return -1;
	if (g->limit != msg->limit)
		g->refused_under = 0;
	g->limit = msg->limit;
	g->limit_flags = msg->flags;
	g->reported_total = msg->reported_total;
	g->dirty = 1;
	m->any_limit = 0;
	for (unsigned i = 0; i < PA_MEM_GPUS; i++)
		if (m->gpu[i].used && m->gpu[i].limit != GQ_MEM_UNLIMITED)
			m->any_limit = 1;
	return 0;
}

static rm_u32 min_kib(rm_u32 rm, rm_u64 bytes)
{
	rm_u64 kib = bytes / 1024u;

	return kib < rm ? (rm_u32)kib : rm;
}

unsigned pa_mem_fb_rewrite(struct pa_mem *m, rm_u32 instance, struct rm_fb_info *list, rm_u32 n)
{
	struct pa_mem_gpu *g = gpu_find(m, instance);
	rm_u64 total, left;
	unsigned changed = 0;

	if (g == NULL || g->limit == GQ_MEM_UNLIMITED || !(g->limit_flags & GQ_MEMORY_F_REPORT))
		return 0;
	total = g->reported_total != 0 ? g->reported_total : g->limit;
	left = g->used_bytes < g->limit ? g->limit - g->used_bytes : 0;
	for (rm_u32 i = 0; i < n; i++) {
		rm_u32 v = list[i].data;

		switch (list[i].index) {
		case RM_FB_INFO_RAM_SIZE:
		case RM_FB_INFO_TOTAL_RAM_SIZE:
		case RM_FB_INFO_HEAP_SIZE:
		case RM_FB_INFO_MAPPABLE_HEAP_SIZE:
		case RM_FB_INFO_USABLE_RAM_SIZE:
			v = min_kib(v, total);
			break;
		case RM_FB_INFO_HEAP_FREE:
		case RM_FB_INFO_LARGEST_FREE_REGION_SIZE_KB:
			v = min_kib(v, left);
			break;
		default:
			break;
		}
		if (v != list[i].data) {
			list[i].data = v;
			changed++;
		}
	}
	return changed;
}

void pa_mem_mark_all(struct pa_mem *m)
{
	for (unsigned i = 0; i < PA_MEM_GPUS; i++)
		if (m->gpu[i].used)
			m->gpu[i].dirty = m->gpu[i].urgent = 1;
}

int pa_mem_take_report(struct pa_mem *m, rm_u64 now_ns, struct gq_mem_usage *out, int *next_ms)
{
	const rm_u64 period = (rm_u64)GQ_MEM_USAGE_PERIOD_MS * 1000000u;
	struct pa_mem_gpu *pick = NULL;

	*next_ms = -1;
	for (unsigned i = 0; i < PA_MEM_GPUS; i++) {
		struct pa_mem_gpu *g = &m->gpu[i];
		rm_u64 due;

		if (!g->used || !g->dirty)
			continue;
		due = g->sent_ns + period;
		if (g->urgent || g->sent_ns == 0 || now_ns >= due) {
			if (pick == NULL)
				pick = g;
			continue;
		}
		if (*next_ms < 0 || (int)((due - now_ns + 999999u) / 1000000u) < *next_ms)
			*next_ms = (int)((due - now_ns + 999999u) / 1000000u);
	}
	if (pick == NULL)
		return 0;
	memset((char *)out + sizeof(out->hdr), 0, sizeof(*out) - sizeof(out->hdr));
	out->device_instance = pick->instance;
	out->used = pick->used_bytes;
	out->peak = pick->peak;
	out->limit = pick->limit;
	out->refused = pick->refused;
	out->refused_bytes = pick->refused_bytes;
	out->unknown = pick->unknown;
	pick->dirty = 0;
	pick->urgent = 0;
	pick->sent_ns = now_ns != 0 ? now_ns : 1;
	*next_ms = 0; /* maybe more: ask again */
	return 1;
}

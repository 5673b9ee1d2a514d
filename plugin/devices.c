/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devices.c - the device plugin's answers as pure functions (devices.h).
 * No I/O: what the host holds (GPUs, health, the installed library) comes in
 * as arguments, so every answer is testable without a kubelet or a GPU.
 */
#include "plugin/devices.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the arena ---- */

static void *keep(struct parena *a, void *p)
{
	if (!p) {
		a->oom = 1;
		return NULL;
	}
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		void **np = realloc(a->p, cap * sizeof(*np));
		if (!np) {
			free(p);
			a->oom = 1;
			return NULL;
		}
		a->p = np;
		a->cap = cap;
	}
	a->p[a->n++] = p;
	return p;
}

static void *azalloc(struct parena *a, size_t n)
{
	return keep(a, calloc(1, n ? n : 1));
}

static char *astrdup(struct parena *a, const char *s)
{
	return keep(a, strdup(s));
}

void parena_free(struct parena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->p[i]);
	free(a->p);
	memset(a, 0, sizeof(*a));
}

/* ---- ids ---- */

size_t pres_from_config(const struct plugin_config *c, struct presource out[2])
{
	if (c->mode == PCFG_INJECT) {
		out[0] = (struct presource){ PRES_INJECT, c->inject_resource, 0, c->inject_devices };
		return 1;
	}
	out[0] = (struct presource){ PRES_BE, c->resource, c->replicas, 0 };
	if (!c->lc_replicas)
		return 1;
	out[1] = (struct presource){ PRES_LC, c->lc_resource, c->lc_replicas, 0 };
	return 2;
}

static size_t n_devices(const struct presource *r, const struct pgpus *g)
{
	return r->kind == PRES_INJECT ? r->count : g->n * r->per_gpu;
}

/* Device i of r: its id, and its GPU (-1 for inject). */
static int device_at(const struct presource *r, const struct pgpus *g, size_t i, char *id,
		     size_t len)
{
	if (r->kind == PRES_INJECT) {
		snprintf(id, len, "qos-%zu", i);
		return -1;
	}
	snprintf(id, len, "%s::%zu", g->gpu[i / r->per_gpu].uuid, i % r->per_gpu);
	return (int)(i / r->per_gpu);
}

int pdev_id_gpu(const struct presource *r, const struct pgpus *g, const char *id)
{
	const char *sep;
	char *end;
	unsigned long n;

	if (r->kind == PRES_INJECT) {
		if (strncmp(id, "qos-", 4) != 0 || id[4] < '0' || id[4] > '9' ||
		    (id[4] == '0' && id[5]))
			return -1;
		n = strtoul(id + 4, &end, 10);
		return *end || n >= r->count ? -1 : 0;
	}
	sep = strstr(id, "::");
	if (!sep || sep[2] < '0' || sep[2] > '9' || (sep[2] == '0' && sep[3]))
		return -1;
	n = strtoul(sep + 2, &end, 10);
	if (*end || n >= r->per_gpu)
		return -1;
	for (size_t i = 0; i < g->n; i++)
		if (strlen(g->gpu[i].uuid) == (size_t)(sep - id) &&
		    strncmp(g->gpu[i].uuid, id, (size_t)(sep - id)) == 0)
			return (int)i;
	return -1;
}

V1beta1__ListAndWatchResponse *pdev_list(const struct presource *r, const struct pgpus *g,
					 struct parena *a)
{
	V1beta1__ListAndWatchResponse *m = azalloc(a, sizeof(*m));
	size_t n = n_devices(r, g);

	if (!m)
		return NULL;
	v1beta1__list_and_watch_response__init(m);
	m->devices = azalloc(a, n * sizeof(*m->devices));
	for (size_t i = 0; m->devices && i < n; i++) {
		V1beta1__Device *d = azalloc(a, sizeof(*d));
		char id[PDEV_ID_MAX];
		int gi = device_at(r, g, i, id, sizeof(id));

		if (!d)
			break;
		v1beta1__device__init(d);
		d->id = astrdup(a, id);
		d->health = (char *)(gi < 0 || g->gpu[gi].healthy ? "Healthy" : "Unhealthy");
		if (gi >= 0 && g->gpu[gi].numa >= 0) {
			V1beta1__TopologyInfo *t = azalloc(a, sizeof(*t));
			V1beta1__NUMANode *nn = azalloc(a, sizeof(*nn));
			V1beta1__NUMANode **nodes = azalloc(a, sizeof(*nodes));
			if (t && nn && nodes) {
				v1beta1__topology_info__init(t);
				v1beta1__numanode__init(nn);
				nn->id = g->gpu[gi].numa;
				nodes[0] = nn;
				t->nodes = nodes;
				t->n_nodes = 1;
				d->topology = t;
			}
		}
		m->devices[m->n_devices++] = d;
	}
	return a->oom ? NULL : m;
}

/* ---- request checks ---- */

__attribute__((format(printf, 3, 4))) static void say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

/* Printable and bounded, for error messages naming a hostile id. */
static const char *shown(const char *id, char *buf, size_t len)
{
	size_t i;

	for (i = 0; id[i] && i + 4 < len; i++)
		buf[i] = (id[i] >= 0x20 && id[i] < 0x7f) ? id[i] : '?';
	buf[i] = '\0';
	if (id[i])
		strcpy(buf + i, "...");
	return buf;
}

static int find_str(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return (int)i;
	return -1;
}

/* Every id known and each once; what = "Allocate" etc. for the message. */
static int check_ids(const struct presource *r, const struct pgpus *g, char *const *ids, size_t n,
		     const char *what, char *why, size_t whylen)
{
	char b[80];

	for (size_t i = 0; i < n; i++) {
		if (pdev_id_gpu(r, g, ids[i]) < 0) {
			say(why, whylen, "%s: unknown device id \"%s\" for %s", what,
			    shown(ids[i], b, sizeof(b)), r->name);
			return -1;
		}
		if (find_str(ids, i, ids[i]) >= 0) {
			say(why, whylen, "%s: device id \"%s\" given twice", what,
			    shown(ids[i], b, sizeof(b)));
			return -1;
		}
	}
	return 0;
}

/* ---- Allocate ---- */

static void add_env(struct parena *a, V1beta1__ContainerAllocateResponse *c, const char *k,
		    const char *v)
{
	V1beta1__ContainerAllocateResponse__EnvsEntry *e = azalloc(a, sizeof(*e));

	if (!e)
		return;
	v1beta1__container_allocate_response__envs_entry__init(e);
	e->key = astrdup(a, k);
	e->value = astrdup(a, v);
	c->envs[c->n_envs++] = e;
}

static void add_mount(struct parena *a, V1beta1__ContainerAllocateResponse *c, const char *ctr,
		      const char *host)
{
	V1beta1__Mount *m = azalloc(a, sizeof(*m));

	if (!m)
		return;
	v1beta1__mount__init(m);
	m->container_path = astrdup(a, ctr);
	m->host_path = astrdup(a, host);
	m->read_only = 1;
	c->mounts[c->n_mounts++] = m;
}

static void add_dev(struct parena *a, V1beta1__ContainerAllocateResponse *c, const char *path)
{
	V1beta1__DeviceSpec *d = azalloc(a, sizeof(*d));

	if (!d)
		return;
	v1beta1__device_spec__init(d);
	d->container_path = astrdup(a, path);
	d->host_path = astrdup(a, path);
	d->permissions = astrdup(a, "rw");
	c->devices[c->n_devices++] = d;
}

static void add_cdi(struct parena *a, V1beta1__ContainerAllocateResponse *c, const char *uuid)
{
	V1beta1__CDIDevice *d = azalloc(a, sizeof(*d));
	char name[PDEV_UUID_MAX + 32];

	if (!d)
		return;
	v1beta1__cdidevice__init(d);
	snprintf(name, sizeof(name), "nvidia.com/gpu=%s", uuid);
	d->name = astrdup(a, name);
	c->cdi_devices[c->n_cdi_devices++] = d;
}

/* A comma-separated join; NULL when out of memory. */
static char *join(struct parena *a, const char *const *v, size_t n)
{
	size_t len = 1;
	char *s;

	for (size_t i = 0; i < n; i++)
		len += strlen(v[i]) + 1;
	s = azalloc(a, len);
	for (size_t i = 0; s && i < n; i++) {
		if (i)
			strcat(s, ",");
		strcat(s, v[i]);
	}
	return s;
}

/* The GPUs a container sees: NVIDIA_VISIBLE_DEVICES, CDI names or device nodes. */
static void visibility(const struct plugin_config *cfg, const struct pgpus *g, const int *gpus,
		       size_t ng, struct parena *a, V1beta1__ContainerAllocateResponse *c)
{
	const char *uu[PDEV_MAX_GPUS];
	char path[64];

	for (size_t i = 0; i < ng; i++)
		uu[i] = g->gpu[gpus[i]].uuid;
	switch (cfg->visibility) {
	case PCFG_VIS_ENVVAR:
		add_env(a, c, "NVIDIA_VISIBLE_DEVICES", join(a, uu, ng) ?: "");
		break;
	case PCFG_VIS_CDI:
		for (size_t i = 0; i < ng; i++)
			add_cdi(a, c, uu[i]);
		break;
	case PCFG_VIS_DEVICES:
		add_dev(a, c, "/dev/nvidiactl");
		add_dev(a, c, "/dev/nvidia-uvm");
		add_dev(a, c, "/dev/nvidia-uvm-tools");
		for (size_t i = 0; i < ng; i++) {
			snprintf(path, sizeof(path), "/dev/nvidia%d", g->gpu[gpus[i]].minor);
			add_dev(a, c, path);
		}
		break;
	}
}

/* The preempt agent and what lets the node agent join the process to its
 * allocation. Without an installed library the container runs without
 * the agent (fail open); the node agent still sees it through eBPF. */
static void injection(const struct plugin_config *cfg, const struct presource *r,
		      const struct pinject *inj, const V1beta1__ContainerAllocateRequest *q,
		      struct parena *a, V1beta1__ContainerAllocateResponse *c)
{
	char path[PATH_MAX + 32];

	add_env(a, c, "GPUQOS_RESOURCE", r->name);
	add_env(a, c, "GPUQOS_ALLOCATION",
		join(a, (const char *const *)q->devices_ids, q->n_devices_ids) ?: "");
	if (cfg->injection == PCFG_INJ_NONE)
		return;
	add_mount(a, c, PDEV_CONTAINER_SOCKET_DIR, cfg->node_agent_socket_dir);
	if (!inj->lib_dir)
		return;
	add_mount(a, c, PDEV_CONTAINER_LIB_DIR, inj->lib_dir);
	if (cfg->injection == PCFG_INJ_LD_SO_PRELOAD && inj->have_ld_so_preload) {
		snprintf(path, sizeof(path), "%s/ld.so.preload", inj->lib_dir);
		add_mount(a, c, "/etc/ld.so.preload", path);
	} else {
		add_env(a, c, "LD_PRELOAD", PDEV_CONTAINER_LIB);
	}
}

/* Room for everything one container can get. */
static int container_init(struct parena *a, V1beta1__ContainerAllocateResponse *c, size_t ngpus)
{
	v1beta1__container_allocate_response__init(c);
	c->envs = azalloc(a, 8 * sizeof(*c->envs));
	c->mounts = azalloc(a, 4 * sizeof(*c->mounts));
	c->devices = azalloc(a, (ngpus + 3) * sizeof(*c->devices));
	c->cdi_devices = azalloc(a, (ngpus + 1) * sizeof(*c->cdi_devices));
	return a->oom ? -1 : 0;
}

struct id_at {
	const char *id;
	size_t container;
};

static int by_id(const void *a, const void *b)
{
	const struct id_at *x = a, *y = b;
	int c = strcmp(x->id, y->id);

	if (c)
		return c;
	return (x->container > y->container) - (x->container < y->container);
}

/* A device goes to one container: the same id in two containers of one
 * request would give both the same share. Sorted, so a request of
 * PDEV_MAX_IDS ids costs n log n, not n^2. */
static int check_across(const V1beta1__AllocateRequest *req, size_t total, char *why,
			size_t whylen)
{
	struct id_at all[PDEV_MAX_IDS];
	size_t n = 0;
	char b[80];

	for (size_t i = 0; i < req->n_container_requests; i++)
		for (size_t k = 0; k < req->container_requests[i]->n_devices_ids && n < total; k++)
			all[n++] = (struct id_at){ req->container_requests[i]->devices_ids[k], i };
	qsort(all, n, sizeof(all[0]), by_id);
	for (size_t i = 1; i < n; i++)
		if (strcmp(all[i - 1].id, all[i].id) == 0) {
			say(why, whylen,
			    "Allocate: device id \"%s\" given to container requests %zu and %zu",
			    shown(all[i].id, b, sizeof(b)), all[i - 1].container, all[i].container);
			return -1;
		}
	return 0;
}

static int check_allocate(const struct presource *r, const struct pgpus *g,
			  const V1beta1__AllocateRequest *req, char *why, size_t whylen)
{
	size_t total = 0;

	if (!req->n_container_requests) {
		say(why, whylen, "Allocate: no container requests");
		return -1;
	}
	if (req->n_container_requests > PDEV_MAX_CONTAINERS) {
		say(why, whylen, "Allocate: %zu container requests (at most %d)",
		    req->n_container_requests, PDEV_MAX_CONTAINERS);
		return -1;
	}
	for (size_t i = 0; i < req->n_container_requests; i++) {
		const V1beta1__ContainerAllocateRequest *q = req->container_requests[i];
		total += q->n_devices_ids;
		if (!q->n_devices_ids) {
			say(why, whylen, "Allocate: container request %zu has no device ids", i);
			return -1;
		}
		if (total > PDEV_MAX_IDS) {
			say(why, whylen, "Allocate: more than %d device ids", PDEV_MAX_IDS);
			return -1;
		}
		if (check_ids(r, g, q->devices_ids, q->n_devices_ids, "Allocate", why, whylen) < 0)
			return -1;
	}
	return check_across(req, total, why, whylen);
}

V1beta1__AllocateResponse *pdev_allocate(const struct plugin_config *cfg, const struct presource *r,
					 const struct pgpus *g, const struct pinject *inj,
					 const V1beta1__AllocateRequest *req, struct parena *a,
					 char *why, size_t whylen)
{
	V1beta1__AllocateResponse *resp;

	if (check_allocate(r, g, req, why, whylen) < 0)
		return NULL;
	resp = azalloc(a, sizeof(*resp));
	if (!resp)
		goto oom;
	v1beta1__allocate_response__init(resp);
	resp->container_responses = azalloc(a, req->n_container_requests * sizeof(void *));
	for (size_t i = 0; resp->container_responses && i < req->n_container_requests; i++) {
		const V1beta1__ContainerAllocateRequest *q = req->container_requests[i];
		V1beta1__ContainerAllocateResponse *c = azalloc(a, sizeof(*c));
		int gpus[PDEV_MAX_GPUS];
		size_t ng = 0;

		if (!c || container_init(a, c, g->n) < 0)
			goto oom;
		for (size_t k = 0; r->kind != PRES_INJECT && k < q->n_devices_ids; k++) {
			int gi = pdev_id_gpu(r, g, q->devices_ids[k]);
			size_t j;
			for (j = 0; j < ng && gpus[j] != gi; j++)
				;
			if (j == ng)
				gpus[ng++] = gi;
		}
		if (r->kind != PRES_INJECT)
			visibility(cfg, g, gpus, ng, a, c);
		injection(cfg, r, inj, q, a, c);
		resp->container_responses[resp->n_container_responses++] = c;
	}
	if (!a->oom)
		return resp;
oom:
	say(why, whylen, "Allocate: out of memory");
	return NULL;
}

/* ---- GetPreferredAllocation ---- */

/* Per GPU, from one container request: free shares, shares picked. */
struct gpu_load {
	unsigned avail, picked;
};

/* Better candidate GPU for the next share: spread fills the emptiest GPU
 * and avoids stacking one allocation; pack fills the fullest. LC shares
 * go first to a GPU whose LC shares are all free (no LC work there). */
static int better(const struct plugin_config *cfg, const struct presource *r,
		  const struct gpu_load *l, int x, int y)
{
	if (y < 0)
		return 1;
	if (r->kind == PRES_LC) {
		int fx = l[x].avail + l[x].picked == r->per_gpu;
		int fy = l[y].avail + l[y].picked == r->per_gpu;
		if (fx != fy)
			return fx;
	}
	if (cfg->preferred == PCFG_PREF_SPREAD) {
		if (l[x].picked != l[y].picked)
			return l[x].picked < l[y].picked;
		return l[x].avail > l[y].avail;
	}
	if ((l[x].picked > 0) != (l[y].picked > 0))
		return l[x].picked > 0;
	return l[x].avail < l[y].avail;
}

static int prefer_one(const struct plugin_config *cfg, const struct presource *r,
		      const struct pgpus *g, const V1beta1__ContainerPreferredAllocationRequest *q,
		      struct parena *a, V1beta1__ContainerPreferredAllocationResponse *out, char *why,
		      size_t whylen)
{
	struct gpu_load l[PDEV_MAX_GPUS];
	char *used;
	size_t want = (size_t)q->allocation_size;
	char b[80];

	if (check_ids(r, g, q->available_deviceids, q->n_available_deviceids,
		      "GetPreferredAllocation", why, whylen) < 0 ||
	    check_ids(r, g, q->must_include_deviceids, q->n_must_include_deviceids,
		      "GetPreferredAllocation", why, whylen) < 0)
		return -1;
	if (q->allocation_size <= 0 || want > q->n_available_deviceids ||
	    want < q->n_must_include_deviceids) {
		say(why, whylen,
		    "GetPreferredAllocation: allocation_size %d with %zu available and %zu required ids",
		    q->allocation_size, q->n_available_deviceids, q->n_must_include_deviceids);
		return -1;
	}
	memset(l, 0, sizeof(l));
	used = azalloc(a, q->n_available_deviceids);
	out->deviceids = azalloc(a, want * sizeof(char *));
	if (!used || !out->deviceids)
		return -1;
	for (size_t i = 0; i < q->n_available_deviceids; i++)
		l[pdev_id_gpu(r, g, q->available_deviceids[i])].avail++;
	for (size_t i = 0; i < q->n_must_include_deviceids; i++) {
		int k = find_str(q->available_deviceids, q->n_available_deviceids,
				 q->must_include_deviceids[i]);
		int gi = pdev_id_gpu(r, g, q->must_include_deviceids[i]);
		if (k < 0) {
			say(why, whylen, "GetPreferredAllocation: required id \"%s\" is not available",
			    shown(q->must_include_deviceids[i], b, sizeof(b)));
			return -1;
		}
		used[k] = 1;
		l[gi].avail--;
		l[gi].picked++;
		out->deviceids[out->n_deviceids++] = q->must_include_deviceids[i];
	}
	while (out->n_deviceids < want) {
		int best = -1, bg = -1;
		for (size_t i = 0; i < q->n_available_deviceids; i++) {
			int gi = pdev_id_gpu(r, g, q->available_deviceids[i]);
			if (!used[i] && (bg < 0 || (gi != bg && better(cfg, r, l, gi, bg)))) {
				best = (int)i;
				bg = gi;
			}
		}
		used[best] = 1;
		l[bg].avail--;
		l[bg].picked++;
		out->deviceids[out->n_deviceids++] = q->available_deviceids[best];
	}
	return 0;
}

V1beta1__PreferredAllocationResponse *
pdev_preferred(const struct plugin_config *cfg, const struct presource *r, const struct pgpus *g,
	       const V1beta1__PreferredAllocationRequest *req, struct parena *a, char *why,
	       size_t whylen)
{
	V1beta1__PreferredAllocationResponse *resp;

	if (!req->n_container_requests || req->n_container_requests > PDEV_MAX_CONTAINERS) {
		say(why, whylen, "GetPreferredAllocation: %zu container requests (want 1 to %d)",
		    req->n_container_requests, PDEV_MAX_CONTAINERS);
		return NULL;
	}
	resp = azalloc(a, sizeof(*resp));
	if (!resp)
		goto oom;
	v1beta1__preferred_allocation_response__init(resp);
	resp->container_responses = azalloc(a, req->n_container_requests * sizeof(void *));
	if (!resp->container_responses)
		goto oom;
	for (size_t i = 0; i < req->n_container_requests; i++) {
		const V1beta1__ContainerPreferredAllocationRequest *q = req->container_requests[i];
		V1beta1__ContainerPreferredAllocationResponse *c = azalloc(a, sizeof(*c));

		if (!c)
			goto oom;
		v1beta1__container_preferred_allocation_response__init(c);
		if (q->n_available_deviceids > PDEV_MAX_IDS) {
			say(why, whylen, "GetPreferredAllocation: more than %d device ids", PDEV_MAX_IDS);
			return NULL;
		}
		if (prefer_one(cfg, r, g, q, a, c, why, whylen) < 0) {
			if (a->oom)
				goto oom;
			return NULL;
		}
		resp->container_responses[resp->n_container_responses++] = c;
	}
	return resp;
oom:
	say(why, whylen, "GetPreferredAllocation: out of memory");
	return NULL;
}

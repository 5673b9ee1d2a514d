/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memview.c - renders each process's video memory (struct proc_mem,
 * memory.c) for the ctl answers and /metrics. Reads the agent's tables
 * on the loop thread; owns no state.
 */
#include "agent/io/memview.h"
#include "agent/io/jsonnum.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/core/core.h"
#include "agent/io/gpuinfo.h"
#include "agent/io/gpuprocs.h"
#include "agent/io/kube_mode.h"
#include "common/utf8.h"

static void add_bytes(cJSON *o, const char *k, uint64_t v)
{
	if (v == GQ_MEM_UNLIMITED)
		cJSON_AddNullToObject(o, k);
	else
		json_add_num(o, k, (double)v);
}

/* What the processes of p's pod (p alone outside one) hold on gpu. */
static uint64_t pod_used(const struct agent *a, const struct proc *p, uint32_t gpu)
{
	uint64_t used = 0;

	for (const struct proc *q = a->procs; q; q = q->next) {
		if (q != p && !(a->mode == AGENT_MODE_KUBE && p->pod_uid[0] &&
				strcmp(q->pod_uid, p->pod_uid) == 0))
			continue;
		for (unsigned i = 0; i < q->mem.n; i++)
			if (q->mem.g[i].gpu == gpu)
				used += q->mem.g[i].used;
	}
	return used;
}

void memview_proc_json(struct agent *a, const struct proc *p, cJSON *o)
{
	cJSON *arr = cJSON_AddArrayToObject(o, "memory");

	if (!arr)
		return;
	for (unsigned i = 0; i < p->mem.n; i++) {
		const struct mem_gpu *e = &p->mem.g[i];
		const char *uuid = gpuinfo_uuid(e->gpu);
		cJSON *g = cJSON_CreateObject();

		if (!g || !cJSON_AddItemToArray(arr, g)) {
			cJSON_Delete(g);
			return;
		}
		json_add_num(g, "gpu", e->gpu);
		if (uuid)
			cJSON_AddStringToObject(g, "uuid", uuid);
		else
			cJSON_AddNullToObject(g, "uuid");
		cJSON_AddBoolToObject(g, "reported", e->reported);
		json_add_num(g, "usedBytes", (double)e->used);
		json_add_num(g, "peakBytes", (double)e->peak);
		add_bytes(g, "limitBytes", e->limit);
		add_bytes(g, "enforcedBytes", e->enforced);
		add_bytes(g, "podLimitBytes", e->pod_limit);
		json_add_num(g, "podUsedBytes", (double)pod_used(a, p, e->gpu));
		if (e->total)
			json_add_num(g, "reportedTotalBytes", (double)e->total);
		else
			cJSON_AddNullToObject(g, "reportedTotalBytes");
		json_add_num(g, "refused", (double)e->refused);
		json_add_num(g, "refusedBytes", (double)e->refused_bytes);
		json_add_num(g, "unknown", (double)e->unknown);
	}
}

void memview_gpus_json(struct agent *a, cJSON *gpus)
{
	cJSON *g;

	cJSON_ArrayForEach(g, gpus)
	{
		const cJSON *di = cJSON_GetObjectItemCaseSensitive(g, "deviceInstance");
		const struct gpuprocs_gpu *rm;
		const struct mem_gpu_held *h;
		uint64_t reserve;
		uint32_t gpu;

		if (!cJSON_IsNumber(di) || di->valuedouble < 0 || di->valuedouble >= MEM_GPU_MAX)
			continue;
		gpu = (uint32_t)di->valuedouble;
		h = &a->gpu_held[gpu];
		reserve = memory_lc_reserve_on(a, gpu);
		if (reserve)
			json_add_num(g, "lcReserveBytes", (double)reserve);
		else
			cJSON_AddNullToObject(g, "lcReserveBytes");
		json_add_num(g, "lcUsedBytes", (double)h->lc_used);
		if (h->read)
			json_add_num(g, "uncappedBytes", (double)h->uncapped);
		else
			cJSON_AddNullToObject(g, "uncappedBytes");
		add_bytes(g, "bePartBytes", h->be_part);
		rm = gpuprocs_gpu(gpu);
		if (rm && !rm->read)
			cJSON_AddStringToObject(g, "processesError", rm->error);
	}
}

/* The core's last reading of gpu (memory_gpu_procs), NULL when none. */
static const struct mem_gpu_held *held(const struct agent *a, uint32_t gpu)
{
	return gpu < MEM_GPU_MAX && a->gpu_held[gpu].read ? &a->gpu_held[gpu] : NULL;
}

void memview_uncapped_json(struct agent *a, cJSON *o, pid_t only)
{
	cJSON *arr = cJSON_AddArrayToObject(o, "uncappedMemory");
	uint32_t gpus[RM_GPU_MAX_ATTACHED];
	size_t n = gpuinfo_instances(gpus, RM_GPU_MAX_ATTACHED);

	for (size_t i = 0; arr && i < n; i++) {
		const struct mem_gpu_held *rm = held(a, gpus[i]);

		for (unsigned k = 0; rm && k < rm->n; k++) {
			struct proc *p = proc_find(a, (pid_t)rm->procs[k].pid);
			const char *why = memory_uncounted_why(p), *uuid;
			cJSON *r;

			if (!why || (only && (pid_t)rm->procs[k].pid != only))
				continue;
			r = cJSON_CreateObject();
			if (!r || !cJSON_AddItemToArray(arr, r)) {
				cJSON_Delete(r);
				return;
			}
			uuid = gpuinfo_uuid(gpus[i]);
			json_add_num(r, "gpu", gpus[i]);
			if (uuid)
				cJSON_AddStringToObject(r, "uuid", uuid);
			else
				cJSON_AddNullToObject(r, "uuid");
			json_add_num(r, "pid", rm->procs[k].pid);
			json_add_num(r, "usedBytes", (double)rm->procs[k].used);
			cJSON_AddStringToObject(r, "why", why);
			if (p && p->comm[0])
				cJSON_AddStringToObject(r, "comm", p->comm);
		}
	}
}

/* ---- /metrics ---- */

struct mout {
	void (*put)(void *ctx, const char *s, size_t n);
	void *ctx;
};

static void __attribute__((format(printf, 2, 3))) mput(struct mout *m, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		m->put(m->ctx, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static void mlabel(struct mout *m, const char *name, const char *v)
{
	if (!v || !*v)
		return;
	mput(m, ",%s=\"", name);
	utf8_prom_label(v, m->put, m->ctx);
	m->put(m->ctx, "\"", 1);
}

/* dcgm-exporter's names: gpu, UUID, Hostname, namespace, pod, container. */
static void mlabels(struct agent *a, struct mout *m, const struct proc *p,
		    const struct mem_gpu *e, const char *host)
{
	const char *ns = "", *pod = "", *ctr = "";

	kmode_proc_pod(a, p, &ns, &pod, &ctr);
	mput(m, "{gpu=\"%u\",pid=\"%d\"", e->gpu, (int)p->pid);
	mlabel(m, "UUID", gpuinfo_uuid(e->gpu));
	mlabel(m, "Hostname", host);
	mlabel(m, "namespace", ns);
	mlabel(m, "pod", pod);
	mlabel(m, "container", ctr);
	mlabel(m, "class", class_name(p->cls));
	m->put(m->ctx, "}", 1);
}

enum mfield { MF_USED, MF_LIMIT, MF_REFUSED, MF_REFUSED_BYTES, MF_UNKNOWN };

static void family(struct agent *a, struct mout *m, const char *name, const char *type,
		   const char *help, enum mfield f, const char *host)
{
	mput(m, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
	for (const struct proc *p = a->procs; p; p = p->next) {
		for (unsigned i = 0; i < p->mem.n; i++) {
			const struct mem_gpu *e = &p->mem.g[i];
			uint64_t v = f == MF_USED	     ? e->used
				     : f == MF_LIMIT	     ? e->limit
				     : f == MF_REFUSED       ? e->refused
				     : f == MF_REFUSED_BYTES ? e->refused_bytes
							     : e->unknown;

			/* No budget: no sample (Prometheus has no infinity to compare). */
			if (f == MF_LIMIT && v == GQ_MEM_UNLIMITED)
				continue;
			mput(m, "%s", name);
			mlabels(a, m, p, e, host);
			mput(m, " %llu\n", (unsigned long long)v);
		}
	}
}

/* The RM's count of each process on each GPU whose memory no preempt
 * agent counts: used, not capped. Labels as the per-process families,
 * the pod's where the agent knows the process. */
static void uncapped_family(struct agent *a, struct mout *m, const char *host)
{
	static const char name[] = "gpuqos_memory_uncapped_used_bytes";
	uint32_t gpus[RM_GPU_MAX_ATTACHED];
	size_t n = gpuinfo_instances(gpus, RM_GPU_MAX_ATTACHED);

	mput(m, "# HELP %s %s\n# TYPE %s gauge\n", name,
	     "Video memory the RM counts for a process on a GPU that no preempt agent counts "
	     "(none, or one without memory budgets): used, not capped.",
	     name);
	for (size_t i = 0; i < n; i++) {
		const struct mem_gpu_held *rm = held(a, gpus[i]);

		for (unsigned k = 0; rm && k < rm->n; k++) {
			const char *ns = "", *pod = "", *ctr = "";
			struct proc *p = proc_find(a, (pid_t)rm->procs[k].pid);

			if (!memory_uncounted_why(p))
				continue;
			if (p)
				kmode_proc_pod(a, p, &ns, &pod, &ctr);
			mput(m, "%s{gpu=\"%u\",pid=\"%u\"", name, gpus[i], rm->procs[k].pid);
			mlabel(m, "UUID", gpuinfo_uuid(gpus[i]));
			mlabel(m, "Hostname", host);
			mlabel(m, "namespace", ns);
			mlabel(m, "pod", pod);
			mlabel(m, "container", ctr);
			if (p)
				mlabel(m, "class", class_name(p->cls));
			mput(m, "} %llu\n", (unsigned long long)rm->procs[k].used);
		}
	}
}

/* Per GPU of the table: its size where the RM said it, and the LC
 * reserve kept there (0: none, or its size is not known). */
static void gpu_families(struct agent *a, struct mout *m, const char *host)
{
	for (int f = 0; f < 2; f++) {
		const char *name = f ? "gpuqos_memory_lc_reserve_bytes" : "gpuqos_memory_gpu_total_bytes";

		mput(m, "# HELP %s %s\n# TYPE %s gauge\n", name,
		     f ? "The video memory kept free for LCs on a GPU (0: the policy keeps none, or "
			 "the GPU's size is not known and none is kept)."
		       : "A GPU's video memory as the RM reports its heap (FB_GET_INFO_V2); no "
			 "sample when the RM did not say.",
		     name);
		for (uint32_t gpu = 0; gpu < MEM_GPU_MAX; gpu++) {
			const struct mem_gpu_size *s = &a->gpu_mem[gpu];

			if (!s->listed || (!f && !s->total))
				continue;
			mput(m, "%s{gpu=\"%u\"", name, gpu);
			mlabel(m, "UUID", gpuinfo_uuid(gpu));
			mlabel(m, "Hostname", host);
			mput(m, "} %llu\n",
			     (unsigned long long)(f ? memory_lc_reserve_on(a, gpu) : s->total));
		}
	}
}

void memview_metrics(struct agent *a, void (*put)(void *ctx, const char *s, size_t n), void *ctx)
{
	struct mout m = { put, ctx };
	char host[256] = "";

	if (a->opt.node_name && *a->opt.node_name)
		snprintf(host, sizeof(host), "%s", a->opt.node_name);
	else if (gethostname(host, sizeof(host) - 1) != 0)
		host[0] = '\0';
	family(a, &m, "gpuqos_memory_used_bytes", "gauge",
	       "Video memory a process holds on a GPU, as its preempt agent counts it (what it "
	       "allocated itself; managed memory is not counted).",
	       MF_USED, host);
	family(a, &m, "gpuqos_memory_limit_bytes", "gauge",
	       "The budget the agent gives a process on a GPU (its pod's budget shared by the "
	       "pod's processes, and for a BE its part of what the LC reserve leaves).",
	       MF_LIMIT, host);
	family(a, &m, "gpuqos_memory_refused_total", "counter",
	       "Video-memory allocations of a process refused at its budget.", MF_REFUSED, host);
	family(a, &m, "gpuqos_memory_refused_bytes_total", "counter",
	       "The sizes of the refused allocations, summed.", MF_REFUSED_BYTES, host);
	family(a, &m, "gpuqos_memory_unknown_total", "counter",
	       "Video-memory allocations passed through uncounted (parameters the preempt agent "
	       "could not read).",
	       MF_UNKNOWN, host);
	gpu_families(a, &m, host);
	uncapped_family(a, &m, host);
	mput(&m, "# HELP gpuqos_memory_reports_dropped_total %s\n"
		 "# TYPE gpuqos_memory_reports_dropped_total counter\n"
		 "gpuqos_memory_reports_dropped_total %llu\n",
	     "Memory reports (MEM_USAGE) dropped: not asked for, reserved bits, out of bounds, "
	     "counts going back.",
	     (unsigned long long)a->n.bad_mem_usage);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memory.c - each process's video-memory budget per GPU, from its pod's
 * budget (gpuqos.io/gpu-memory or its class's default) and the LC reserve
 * of the policy file (docs/policy.md, "Memory"), and the checks on what
 * the preempt agents report they hold (MEM_USAGE).
 *
 * Owns: struct proc_mem, the budget arithmetic and when a MEMORY goes,
 * and the copy of the RM's last count of each process per GPU it is
 * computed from (struct mem_gpu_held).
 * Does not own: counting, refusing or the FB-info answers (the preempt
 * agent), the socket (agent_hooks.send_memory), reading the GPU's size
 * or its processes (the GPU table and the GPU-process reader push them
 * in: memory_gpu_size, memory_gpu_procs) or rendering (ctl, metrics).
 *
 * Memory is never taken back: a budget below what a process holds only
 * refuses its next allocations until it frees. Each plan is computed
 * afresh from the policy, the pods' facts and the latest reports, so a
 * restarted agent arrives at the same budgets once its peers reported.
 */
#include "agent/core/core.h"

#include <string.h>

/* Counts shown as JSON numbers stay whole up to 2^53. */
#define MEM_COUNT_MAX (1ull << 53)

static struct mem_gpu *mem_entry(struct proc *p, uint32_t gpu, int create)
{
	struct proc_mem *m = &p->mem;

	for (unsigned i = 0; i < m->n; i++)
		if (m->g[i].gpu == gpu)
			return &m->g[i];
	if (!create || m->n >= MEM_GPUS_PER_PROC || gpu >= MEM_GPU_MAX)
		return NULL;
	memset(&m->g[m->n], 0, sizeof(m->g[m->n]));
	m->g[m->n].gpu = gpu;
	m->g[m->n].limit = m->g[m->n].pod_limit = m->g[m->n].enforced = GQ_MEM_UNLIMITED;
	return &m->g[m->n++];
}

void memory_hello(struct agent *a, struct peer *p)
{
	struct proc_mem *m = &p->proc->mem;

	(void)a;
	m->greeted = 0;
	for (unsigned i = 0; i < m->n; i++) {
		m->g[i].reported = 0;
		m->g[i].sent = 0;
	}
}

/* Why a MEM_USAGE cannot be one library's counts, or NULL. prev: the
 * report before it on this connection for that GPU, or NULL. */
static const char *mem_usage_bad(const struct gq_mem_usage *m, const struct mem_gpu *prev)
{
	if (m->flags != 0)
		return "reserved bits set";
	if (m->device_instance >= MEM_GPU_MAX)
		return "device instance out of range";
	if (m->peak > QUANTITY_MAX || m->used > m->peak)
		return "used beyond its peak, or a peak beyond 1Pi";
	if (m->limit != GQ_MEM_UNLIMITED && m->limit > QUANTITY_MAX)
		return "a limit beyond 1Pi";
	if (m->refused > MEM_COUNT_MAX || m->refused_bytes > MEM_COUNT_MAX ||
	    m->unknown > MEM_COUNT_MAX)
		return "counts beyond 2^53";
	/* Each refused allocation asked for one byte at least. */
	if (m->refused_bytes < m->refused)
		return "fewer bytes refused than refusals";
	if (prev && prev->reported &&
	    (m->peak < prev->peak || m->refused < prev->refused ||
	     m->refused_bytes < prev->refused_bytes || m->unknown < prev->unknown))
		return "counts went back";
	return NULL;
}

void memory_report(struct agent *a, struct peer *p, const struct gq_mem_usage *m)
{
	struct proc *pr = p->proc;
	struct mem_gpu *e = NULL;
	const char *why;

	if (!p->memory) {
		why = "not asked for (no MEMORY in its HELLO)";
	} else {
		why = mem_usage_bad(m, mem_entry(pr, m->device_instance, 0));
		if (!why) {
			e = mem_entry(pr, m->device_instance, 1);
			if (!e)
				why = "on more GPUs than the agent keeps for one process";
		}
	}
	if (why) {
		a->n.bad_mem_usage++;
		proc_log(a, pr, LOG_LEVEL_WARN, "pid %d: MEM_USAGE ignored: %s", (int)p->pid, why);
		return;
	}
	e->reported = 1;
	e->used = m->used;
	e->peak = m->peak;
	e->enforced = m->limit;
	e->refused = m->refused;
	e->refused_bytes = m->refused_bytes;
	e->unknown = m->unknown;
	if (m->refused && !pr->mem.refusal_said) {
		char lim[32];

		pr->mem.refusal_said = 1;
		quantity_format(m->limit, lim, sizeof(lim));
		proc_log(a, pr, LOG_LEVEL_WARN,
			 "pid %d (%s): a video-memory allocation on GPU %u was refused: it holds "
			 "%llu bytes of a budget of %s",
			 (int)p->pid, pr->comm, m->device_instance, (unsigned long long)m->used, lim);
		if (a->hooks.mem_refused)
			a->hooks.mem_refused(a, pr, e);
	}
	a->dirty = 1;
}

uint64_t memory_pod_budget(const struct agent *a, const struct proc *p)
{
	if (a->mode == AGENT_MODE_KUBE && p->pod_uid[0]) {
		const struct pod_facts *f = pod_find(a, p->pod_uid);

		if (f && f->memory)
			return f->memory;
	}
	if ((unsigned)p->cls < sizeof(a->cfg->memory.default_budget) / sizeof(uint64_t))
		return a->cfg->memory.default_budget[p->cls];
	return GQ_MEM_UNLIMITED;
}

uint64_t memory_lc_reserve(const struct agent *a, uint64_t total)
{
	const struct mem_config *m = &a->cfg->memory;

	if (m->lc_reserve_percent)
		return total / 100u * m->lc_reserve_percent + total % 100u * m->lc_reserve_percent / 100u;
	return m->lc_reserve;
}

void memory_gpu_size(struct agent *a, uint32_t gpu, int listed, uint64_t total)
{
	struct mem_gpu_size *g;

	if (gpu >= MEM_GPU_MAX)
		return;
	g = &a->gpu_mem[gpu];
	if (!listed)
		total = 0;
	if (g->listed == !!listed && g->total == total)
		return;
	if (!listed) { /* its processes are read again once it is listed again */
		a->gpu_held[gpu].read = 0;
		a->gpu_held[gpu].n = 0;
	}
	g->listed = !!listed;
	g->total = total;
	if (total)
		g->said = 0; /* unknown again later: said again */
	a->dirty = 1;
}

uint64_t memory_lc_reserve_on(const struct agent *a, uint32_t gpu)
{
	if (gpu >= MEM_GPU_MAX || !a->gpu_mem[gpu].total)
		return 0;
	return memory_lc_reserve(a, a->gpu_mem[gpu].total);
}

/* Processes sharing a pod's budget: the same pod in Kubernetes mode,
 * else only the process itself. */
static int same_pod(const struct agent *a, const struct proc *x, const struct proc *y)
{
	if (x == y)
		return 1;
	return a->mode == AGENT_MODE_KUBE && x->pod_uid[0] && strcmp(x->pod_uid, y->pod_uid) == 0;
}

const char *memory_uncounted_why(const struct proc *p)
{
	if (!p || !p->peer || p->peer->broken)
		return "no preempt agent";
	if (!p->peer->memory)
		return "its preempt agent does not count memory";
	return NULL;
}

/* What a GPU holds: by the LCs' and the BEs' reports, and by the
 * processes no preempt agent counts. */
struct mem_sums {
	uint64_t lc_used, be_used, uncapped;
	unsigned bes;
};

/* sums[gpu] for every GPU, each process counted once there: one whose
 * preempt agent counts memory by its reports (the RM's count of it is
 * not added); any other by the RM's last reading of the GPU (uncapped,
 * whatever its class), or, where the GPU has had none, by the reports
 * left from a connection that ended, as the class it is. */
static void mem_count(struct agent *a, struct mem_sums sums[MEM_GPU_MAX])
{
	memset(sums, 0, sizeof(*sums) * MEM_GPU_MAX);
	for (const struct proc *p = a->procs; p; p = p->next) {
		int counted = !memory_uncounted_why(p);

		for (unsigned i = 0; i < p->mem.n; i++) {
			const struct mem_gpu *e = &p->mem.g[i];
			struct mem_sums *s = &sums[e->gpu];

			if (!counted && a->gpu_held[e->gpu].read)
				continue;
			if (p->cls == CLASS_LC) {
				s->lc_used += e->used;
			} else if (p->cls == CLASS_BE) {
				s->be_used += e->used;
				s->bes++;
			}
		}
	}
	for (uint32_t gpu = 0; gpu < MEM_GPU_MAX; gpu++) {
		const struct mem_gpu_held *h = &a->gpu_held[gpu];

		for (unsigned k = 0; h->read && k < h->n; k++)
			if (memory_uncounted_why(proc_find(a, (pid_t)h->procs[k].pid)))
				sums[gpu].uncapped += h->procs[k].used;
	}
}

/* What the BEs may hold together on gpu: its memory less the LC reserve,
 * what the LCs hold and what the processes no preempt agent counts hold,
 * floored at 0; GQ_MEM_UNLIMITED where no reserve is kept. */
static uint64_t mem_be_part(const struct agent *a, uint32_t gpu, const struct mem_sums *s)
{
	uint64_t total = a->gpu_mem[gpu].total, reserve = memory_lc_reserve(a, total), keep;

	if (!reserve || !total)
		return GQ_MEM_UNLIMITED;
	keep = reserve + s->lc_used + s->uncapped;
	return total > keep ? total - keep : 0;
}

int memory_gpu_procs(struct agent *a, uint32_t gpu, const struct mem_rm_proc *procs, size_t n)
{
	struct mem_sums sums[MEM_GPU_MAX];
	struct mem_gpu_held *h;
	const char *why = NULL;

	if (gpu >= MEM_GPU_MAX)
		return -1; /* kept for no such device instance, as its size */
	h = &a->gpu_held[gpu];
	if (n > MEM_RM_PROCS_MAX)
		why = "more processes than the agent keeps per GPU";
	for (size_t i = 0; i < n && !why; i++) {
		if (procs[i].pid == 0 || procs[i].pid > INT32_MAX)
			why = "a pid out of range";
		else if (procs[i].used > QUANTITY_MAX)
			why = "a count past 1Pi";
		for (size_t k = 0; k < i && !why; k++)
			if (procs[k].pid == procs[i].pid)
				why = "a pid listed twice";
	}
	if (why) {
		if (!h->bad_said)
			log_warn("memory: GPU %u: the RM's count per process ignored (%s); the "
				 "last one stays counted",
				 gpu, why);
		h->bad_said = 1;
		return -1;
	}
	h->bad_said = 0;
	h->read = 1;
	h->n = (unsigned)n;
	if (n)
		memcpy(h->procs, procs, n * sizeof(*procs));
	mem_count(a, sums);
	h->uncapped = sums[gpu].uncapped; /* shown at once, as the reading */
	/* A pass only where the BEs' part moves. */
	if (mem_be_part(a, gpu, &sums[gpu]) != h->be_part)
		a->dirty = 1;
	return 0;
}

/* e of p: its pod's budget shared by the pod's processes there (each
 * may grow by an equal part of what the pod has left), and for a BE the
 * BEs' part of the GPU shared the same way. The sum of the limits of a
 * pod (of all BEs) never passes its budget (their part) while they hold
 * less; past it, each keeps only what it holds. */
static void mem_limit(struct agent *a, struct proc *p, struct mem_gpu *e,
		      const struct mem_sums *s, uint64_t part)
{
	uint64_t budget = memory_pod_budget(a, p), limit = GQ_MEM_UNLIMITED, shown = 0;

	e->pod_limit = budget;
	if (budget != GQ_MEM_UNLIMITED) {
		uint64_t used = 0;
		unsigned n = 0;

		for (const struct proc *q = a->procs; q; q = q->next) {
			const struct mem_gpu *f;

			if (!same_pod(a, p, q))
				continue;
			for (unsigned i = 0; i < q->mem.n; i++) {
				f = &q->mem.g[i];
				if (f->gpu == e->gpu) {
					used += f->used;
					n++;
				}
			}
		}
		limit = e->used + (used < budget ? (budget - used) / (n ? n : 1) : 0);
		shown = budget;
	}
	if (p->cls == CLASS_BE && part != GQ_MEM_UNLIMITED) {
		uint64_t be_limit =
			e->used + (s->be_used < part ? (part - s->be_used) / (s->bes ? s->bes : 1) : 0);

		if (be_limit < limit)
			limit = be_limit;
		if (!shown || part < shown)
			shown = part;
	}
	e->limit = limit;
	e->total = limit == GQ_MEM_UNLIMITED ? 0 : shown;
}

void memory_plan(struct agent *a)
{
	struct mem_sums sums[MEM_GPU_MAX];

	/* A process that counts memory and has a TSG on a GPU gets its
	 * budget there before its first report. */
	for (const struct tsg *t = a->tsgs; t; t = t->next)
		if (t->proc && t->proc->peer && t->proc->peer->memory && t->gpu != GQ_UNKNOWN &&
		    !tsg_unverified(t))
			(void)mem_entry(t->proc, t->gpu, 1);
	/* Its preempt agent reports nothing before a first MEMORY: one that
	 * knows of no GPU yet is sent its budget on GPU 0. */
	for (struct proc *p = a->procs; p; p = p->next)
		if (p->peer && p->peer->hello && p->peer->memory && !p->mem.greeted && !p->mem.n)
			(void)mem_entry(p, 0, 1);
	mem_count(a, sums);
	for (uint32_t gpu = 0; gpu < MEM_GPU_MAX; gpu++) {
		struct mem_gpu_held *h = &a->gpu_held[gpu];

		h->lc_used = sums[gpu].lc_used;
		h->uncapped = sums[gpu].uncapped;
		h->be_part = mem_be_part(a, gpu, &sums[gpu]);
	}
	for (struct proc *p = a->procs; p; p = p->next) {
		struct peer *peer = p->peer;

		for (unsigned i = 0; i < p->mem.n; i++) {
			struct mem_gpu *e = &p->mem.g[i];
			struct mem_gpu_size *size = &a->gpu_mem[e->gpu];

			if (!size->total && memory_lc_reserve(a, 1ull << 40) && p->cls == CLASS_BE &&
			    !size->said) {
				size->said = 1;
				log_warn("memory: GPU %u's video-memory size is not known (%s): "
					 "no LC reserve is kept there",
					 e->gpu, size->listed ? "the RM did not answer FB_GET_INFO_V2"
							      : "not in the GPU table");
			}
			mem_limit(a, p, e, &sums[e->gpu], a->gpu_held[e->gpu].be_part);
			if (!peer || !peer->hello || !peer->memory || peer->broken)
				continue;
			if (p->mem.greeted &&
			    (e->sent ? e->sent_limit == e->limit && e->sent_total == e->total
				     : e->limit == GQ_MEM_UNLIMITED && e->enforced == GQ_MEM_UNLIMITED))
				continue;
			if (!a->hooks.send_memory || a->hooks.send_memory(a, peer, e) != 0)
				continue;
			e->sent = 1;
			p->mem.greeted = 1;
			e->sent_limit = e->limit;
			e->sent_total = e->total;
			a->n.memory_sent++;
		}
	}
}

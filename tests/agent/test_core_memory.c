/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_core_memory.c - unit tests of the core's memory.c, on the fake clock
 * and recording hooks of core_fixture.h: video-memory budgets per pod and
 * GPU, the LC reserve, and the checks on MEM_USAGE.
 */
#include "tests/agent/core_fixture.h"
#include "tests/check.h"

#include <string.h>
#include <stdio.h>

/* Budgets sent, by pid (1..7) and GPU 0: the last MEMORY of each. */
static uint64_t mem_limit_sent[8], mem_total_sent[8];
static unsigned mem_sends[8];

static int send_memory(struct agent *a, struct peer *p, const struct mem_gpu *e)
{
	(void)a;
	if (p->pid >= 1 && p->pid < 8 && e->gpu == 0) {
		mem_limit_sent[p->pid] = e->limit;
		mem_total_sent[p->pid] = e->total;
		mem_sends[p->pid]++;
	}
	return 0;
}

static void usage(struct agent *a, struct proc *p, uint64_t used, uint64_t refused)
{
	struct gq_mem_usage m;

	memset(&m, 0, sizeof(m));
	m.used = used;
	m.peak = used;
	m.limit = GQ_MEM_UNLIMITED;
	m.refused = refused;
	m.refused_bytes = refused;
	memory_report(a, p->peer, &m);
}

#define GI (1ull << 30)

/* Budgets (docs/policy.md, "Memory"): a pod's budget shared by its
 * processes on a GPU so their limits never sum past it; the LC reserve
 * keeps the BEs together out of total - reserve - what LCs hold; a BE
 * over its new budget after an LC came keeps what it holds and gets no
 * more; a peer without the MEMORY flag is never sent one; bad reports
 * change nothing. */
static void test_memory(void)
{
	struct agent *a = agent_new();
	struct proc *b1 = proc_with_peer(a, 1, "best-effort");
	struct proc *b2 = proc_with_peer(a, 2, "best-effort");
	struct proc *b3 = proc_with_peer(a, 3, "best-effort");
	struct proc *old = proc_with_peer(a, 5, "best-effort");
	struct pod_facts f = { .cls = CLASS_BE, .cls_source = CLS_SRC_ANNOTATION, .memory = 8 * GI };
	struct proc *lc;
	uint64_t before;

	memset(mem_sends, 0, sizeof(mem_sends));
	a->hooks.send_memory = send_memory;
	memory_gpu_size(a, 0, 1, 80 * GI);
	a->mode = AGENT_MODE_KUBE;
	a->cfg->memory.default_budget[CLASS_BE] = 4 * GI;
	a->cfg->memory.default_budget[CLASS_LC] = 20 * GI;
	/* b1 and b2 share pod "p12" (8Gi by its annotation); b3 is alone in
	 * "p3" with the class default; old's library does not count memory. */
	snprintf(b1->pod_uid, sizeof(b1->pod_uid), "p12");
	snprintf(b2->pod_uid, sizeof(b2->pod_uid), "p12");
	snprintf(b3->pod_uid, sizeof(b3->pod_uid), "p3");
	snprintf(old->pod_uid, sizeof(old->pod_uid), "p5");
	CHECK_EQ_U(pod_set(a, "p12", &f), 1);
	f.memory = 0;
	CHECK_EQ_U(pod_set(a, "p3", &f), 1);
	CHECK_EQ_U(pod_set(a, "p5", &f), 1);
	pod_reclassify(a, NULL, NULL);
	CHECK(b1->cls == CLASS_BE && b3->cls == CLASS_BE);
	b1->peer->memory = b2->peer->memory = b3->peer->memory = 1;
	usage(a, b1, 1 * GI, 0);
	usage(a, b2, 3 * GI, 0);
	usage(a, b3, 1 * GI, 0);
	usage(a, old, 1 * GI, 0); /* unasked: dropped, counted */
	CHECK_EQ_U(a->n.bad_mem_usage, 1);
	CHECK_EQ_U(old->mem.n, 0);
	reconcile(a);
	/* The pod's 4Gi left, half each: 1+2 and 3+2, together 8Gi. */
	CHECK_EQ_U(mem_limit_sent[1], 3 * GI);
	CHECK_EQ_U(mem_limit_sent[2], 5 * GI);
	CHECK_EQ_U(mem_total_sent[1], 8 * GI); /* its FB info shows the pod's budget */
	CHECK_EQ_U(mem_limit_sent[3], 4 * GI);
	CHECK_EQ_U(mem_sends[5], 0);
	/* The same plan again sends nothing. */
	reconcile(a);
	CHECK_EQ_U(mem_sends[1], 1);
	CHECK_EQ_U(mem_sends[3], 1);
	/* b2 grew to 6Gi: 1Gi left for the pod, shared. */
	usage(a, b2, 6 * GI, 0);
	reconcile(a);
	CHECK_EQ_U(mem_limit_sent[1] + mem_limit_sent[2], 8 * GI);
	CHECK_EQ_U(mem_limit_sent[1], 1 * GI + GI / 2);

	/* Bad reports: dropped, counted, nothing changes. */
	before = b3->mem.g[0].used;
	{
		struct gq_mem_usage m;
		const struct {
			uint32_t dev, flags;
			uint64_t used, peak, refused, refused_bytes;
		} bad[] = {
			{ 0, 2, 2 * GI, 2 * GI, 0, 0 },           /* reserved flag */
			{ 0, 0, 3 * GI, 2 * GI, 0, 0 },           /* used past its peak */
			{ 0, 0, 2 * GI, (1ull << 50) + 1, 0, 0 }, /* a peak past 1Pi */
			{ 0, 0, 2 * GI, 2 * GI, 5, 4 },           /* fewer bytes than refusals */
			{ 0, 0, GI / 2, GI / 2, 0, 0 },           /* its peak went back */
			{ 32, 0, GI, GI, 0, 0 },                  /* no such device instance */
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			memset(&m, 0, sizeof(m));
			m.device_instance = bad[i].dev;
			m.flags = bad[i].flags;
			m.used = bad[i].used;
			m.peak = bad[i].peak;
			m.limit = GQ_MEM_UNLIMITED;
			m.refused = bad[i].refused;
			m.refused_bytes = bad[i].refused_bytes;
			memory_report(a, b3->peer, &m);
			CHECK_EQ_U(a->n.bad_mem_usage, 2 + i);
		}
		CHECK_EQ_U(b3->mem.n, 1);
		CHECK_EQ_U(b3->mem.g[0].used, before);
		CHECK_EQ_U(b3->mem.g[0].peak, before);
	}

	/* The LC reserve: 60Gi of 80 kept for LCs. The BEs hold 8Gi, so
	 * together they may reach 20Gi: each gets a third of the 12Gi left,
	 * within its pod's budget. */
	a->cfg->memory.lc_reserve = 60 * GI;
	reconcile(a);
	CHECK_EQ_U(mem_limit_sent[3], 4 * GI); /* 1 + 4 = 5 > its pod's 4 */
	CHECK_EQ_U(mem_limit_sent[1], 1 * GI + GI / 2);
	/* An LC arrives and takes 15Gi: the BEs may now reach 5Gi together
	 * and hold 8: each keeps what it holds and gets no more. */
	lc = proc_with_peer(a, 4, "latency-critical");
	snprintf(lc->pod_uid, sizeof(lc->pod_uid), "p4");
	f.cls = CLASS_LC;
	CHECK_EQ_U(pod_set(a, "p4", &f), 1);
	pod_reclassify(a, "p4", NULL);
	lc->peer->memory = 1;
	usage(a, lc, 15 * GI, 0);
	reconcile(a);
	CHECK_EQ_U(mem_limit_sent[1], 1 * GI);
	CHECK_EQ_U(mem_limit_sent[2], 6 * GI);
	CHECK_EQ_U(mem_limit_sent[3], 1 * GI);
	/* Its FB info: the least of its pod's budget and what the BEs may
	 * hold together. */
	CHECK_EQ_U(mem_total_sent[3], 4 * GI);
	CHECK_EQ_U(mem_total_sent[1], 5 * GI);
	/* The LC is held only by its own budget (20Gi, its class default). */
	CHECK_EQ_U(mem_limit_sent[4], 20 * GI);
	/* A percent reserve: 25 % of 80Gi. */
	a->cfg->memory.lc_reserve = 0;
	a->cfg->memory.lc_reserve_percent = 25;
	CHECK_EQ_U(memory_lc_reserve(a, 80 * GI), 20 * GI);
	/* A refusal is kept, once said. */
	usage(a, b3, 1 * GI, 2);
	CHECK_EQ_U(b3->mem.g[0].refused, 2);
	CHECK(b3->mem.refusal_said);
	/* A new connection: what was sent is sent again. */
	before = mem_sends[3];
	memory_hello(a, b3->peer);
	reconcile(a);
	CHECK_EQ_U(mem_sends[3], before + 1);
	agent_free(a);
}

/* The GPU's size is a fact the GPU table pushes in: unknown, the BEs get
 * only their pods' budgets (no reserve) and the reserve in force is 0;
 * known, the BEs are held to total - reserve; a GPU dropped from the
 * table is unknown again. */
static void test_memory_gpu_size(void)
{
	struct agent *a = agent_new();
	struct proc *b = proc_with_peer(a, 1, "best-effort");
	unsigned sends;

	memset(mem_sends, 0, sizeof(mem_sends));
	a->hooks.send_memory = send_memory;
	a->cfg->memory.default_budget[CLASS_BE] = 4 * GI;
	a->cfg->memory.lc_reserve = 7 * GI;
	b->peer->memory = 1;
	usage(a, b, 1 * GI, 0);
	reconcile(a);
	CHECK_EQ_U(mem_limit_sent[1], 4 * GI); /* no size: its pod's budget alone */
	CHECK_EQ_U(memory_lc_reserve_on(a, 0), 0);
	CHECK(a->gpu_mem[0].said);
	/* Listed, but the RM did not say its size: still no reserve. */
	a->dirty = 0;
	memory_gpu_size(a, 0, 1, 0);
	CHECK(a->dirty && a->gpu_mem[0].listed);
	reconcile(a);
	CHECK_EQ_U(mem_limit_sent[1], 4 * GI);
	/* 10Gi: the BEs together may hold 3Gi; it holds 1, so 3 in all. */
	memory_gpu_size(a, 0, 1, 10 * GI);
	CHECK(!a->gpu_mem[0].said);
	CHECK_EQ_U(memory_lc_reserve_on(a, 0), 7 * GI);
	reconcile(a);
	CHECK_EQ_U(mem_limit_sent[1], 3 * GI);
	CHECK_EQ_U(mem_total_sent[1], 3 * GI);
	/* The same fact again changes nothing and sends nothing. */
	sends = mem_sends[1];
	a->dirty = 0;
	memory_gpu_size(a, 0, 1, 10 * GI);
	CHECK(!a->dirty);
	reconcile(a);
	CHECK_EQ_U(mem_sends[1], sends);
	/* A percent of it: 50 % of 10Gi leaves 5Gi to the BEs, capped by the
	 * pod's 4Gi. */
	a->cfg->memory.lc_reserve = 0;
	a->cfg->memory.lc_reserve_percent = 50;
	reconcile(a);
	CHECK_EQ_U(memory_lc_reserve_on(a, 0), 5 * GI);
	CHECK_EQ_U(mem_limit_sent[1], 4 * GI);
	/* Gone from the table: unknown, no reserve; out-of-range ignored. */
	memory_gpu_size(a, 0, 0, 10 * GI);
	CHECK(!a->gpu_mem[0].listed && !a->gpu_mem[0].total);
	CHECK_EQ_U(memory_lc_reserve_on(a, 0), 0);
	memory_gpu_size(a, MEM_GPU_MAX, 1, GI);
	CHECK_EQ_U(memory_lc_reserve_on(a, MEM_GPU_MAX), 0);
	agent_free(a);
}

/* The RM's count of the processes no preempt agent counts (a fact,
 * memory_gpu_procs) is kept free like the LCs' memory: the BEs together
 * may hold total - reserve - what the LCs hold - what those hold,
 * floored at 0. A process whose preempt agent counts memory is counted
 * by its reports alone (the RM's count of it, its context beside, is not
 * added); an LC without one is counted as uncapped. A reading that moves
 * the BEs' part marks the agent dirty and its budget is sent again; one
 * that leaves it (the same sum, or still past the GPU) does not; a
 * reading that cannot be the RM's changes nothing. */
static void test_memory_uncapped(void)
{
	struct agent *a = agent_new();
	struct proc *be = proc_with_peer(a, 1, "best-effort");
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");
	struct proc *bare_lc = proc_with_peer(a, 3, "latency-critical");
	struct mem_rm_proc rm[MEM_RM_PROCS_MAX + 1] = {
		{ 1, 3 * GI }, { 100, 12 * GI }, { 3, 4 * GI }, { 2, 11 * GI }
	};
	unsigned sends;

	memset(mem_sends, 0, sizeof(mem_sends));
	a->hooks.send_memory = send_memory;
	memory_gpu_size(a, 0, 1, 80 * GI);
	a->cfg->memory.lc_reserve = 40 * GI;
	be->peer->memory = lc->peer->memory = 1; /* bare_lc's does not count memory */
	usage(a, be, 2 * GI, 0);
	usage(a, lc, 10 * GI, 0);
	reconcile(a);
	/* No reading yet: 80 - 40 - 10. */
	CHECK_EQ_U(mem_limit_sent[1], 30 * GI);
	CHECK_EQ_U(a->gpu_held[0].be_part, 30 * GI);
	CHECK(!a->gpu_held[0].read);

	/* pid 100 (unknown to the agent) holds 12Gi, bare_lc 4Gi. */
	a->dirty = 0;
	CHECK_EQ_U(memory_gpu_procs(a, 0, rm, 4), 0);
	CHECK(a->dirty);
	CHECK_EQ_U(a->gpu_held[0].uncapped, 16 * GI);
	reconcile(a);
	CHECK_EQ_U(mem_limit_sent[1], 14 * GI);
	CHECK_EQ_U(mem_total_sent[1], 14 * GI);
	CHECK_EQ_U(a->gpu_held[0].be_part, 14 * GI);
	CHECK_EQ_U(a->gpu_held[0].lc_used, 10 * GI);

	/* The same sum from other processes: no pass, nothing sent. */
	sends = mem_sends[1];
	rm[1].pid = 101;
	a->dirty = 0;
	CHECK_EQ_U(memory_gpu_procs(a, 0, rm, 4), 0);
	CHECK(!a->dirty);
	reconcile(a);
	CHECK_EQ_U(mem_sends[1], sends);

	/* Readings that cannot be the RM's: refused, nothing changes. */
	{
		struct mem_rm_proc keep = rm[2];
		const struct {
			uint32_t gpu, pid;
			uint64_t used;
			size_t n;
		} bad[] = {
			{ 0, 101, 4 * GI, 4 },                 /* pid 101 twice */
			{ 0, 0, 4 * GI, 4 },                   /* pid 0 */
			{ 0, 0x80000000u, 4 * GI, 4 },         /* past any pid */
			{ 0, 3, (1ull << 50) + 1, 4 },         /* a count past 1Pi */
			{ 0, 3, 4 * GI, MEM_RM_PROCS_MAX + 1 }, /* more than are kept */
			{ MEM_GPU_MAX, 3, 1 * GI, 4 },         /* no such GPU */
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			rm[2] = (struct mem_rm_proc){ bad[i].pid, bad[i].used };
			for (size_t k = 4; k < bad[i].n; k++)
				rm[k] = (struct mem_rm_proc){ (uint32_t)(1000 + k), 0 };
			a->dirty = 0;
			CHECK(memory_gpu_procs(a, bad[i].gpu, rm, bad[i].n) == -1);
			CHECK(!a->dirty);
			CHECK_EQ_U(a->gpu_held[0].n, 4);
			CHECK_EQ_U(a->gpu_held[0].procs[2].used, 4 * GI);
			CHECK_EQ_U(a->gpu_held[0].uncapped, 16 * GI);
		}
		rm[2] = keep;
	}

	/* Past what the GPU leaves: the part is 0 and the BE keeps what it
	 * holds; more past it moves nothing. */
	rm[1].used = 40 * GI;
	CHECK_EQ_U(memory_gpu_procs(a, 0, rm, 4), 0);
	reconcile(a);
	CHECK_EQ_U(a->gpu_held[0].be_part, 0);
	CHECK_EQ_U(mem_limit_sent[1], 2 * GI);
	rm[1].used = 50 * GI;
	a->dirty = 0;
	CHECK_EQ_U(memory_gpu_procs(a, 0, rm, 4), 0);
	CHECK(!a->dirty);

	/* pid 101 ended: the next reading gives its memory back to the BE. */
	rm[1] = rm[3];
	CHECK_EQ_U(memory_gpu_procs(a, 0, rm, 3), 0);
	CHECK(a->dirty);
	reconcile(a);
	CHECK_EQ_U(a->gpu_held[0].uncapped, 4 * GI);
	CHECK_EQ_U(mem_limit_sent[1], 26 * GI);

	/* bare_lc's preempt agent counts memory now: its report counts, its
	 * RM count no more (not twice); its connection broken: the other way. */
	bare_lc->peer->memory = 1;
	usage(a, bare_lc, 4 * GI, 0);
	reconcile(a);
	CHECK_EQ_U(a->gpu_held[0].uncapped, 0);
	CHECK_EQ_U(a->gpu_held[0].lc_used, 14 * GI);
	CHECK_EQ_U(a->gpu_held[0].be_part, 26 * GI);
	bare_lc->peer->broken = 1;
	a->dirty = 1;
	reconcile(a);
	CHECK_EQ_U(a->gpu_held[0].uncapped, 4 * GI);
	CHECK_EQ_U(a->gpu_held[0].lc_used, 10 * GI);
	CHECK_EQ_U(mem_limit_sent[1], 26 * GI);

	/* The GPU gone from the table: its reading with it. */
	memory_gpu_size(a, 0, 0, 0);
	CHECK(!a->gpu_held[0].read && a->gpu_held[0].n == 0);
	agent_free(a);
}

int main(void)
{
	core_fixture_start();
	test_memory();
	test_memory_gpu_size();
	test_memory_uncapped();
	CHECK_DONE();
}

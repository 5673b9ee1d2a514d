/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_preempt_mem.c - the preempt library's video-memory accounting
 * (agent/preempt/preempt_mem.h): counts per GPU across allocations and
 * frees (of the allocation, its device, its client, its fd), the budget's
 * refusal and what it counts, a budget below what is held, the FB-info
 * rewrite, the reports and their pacing, and the table's bound.
 */
#include "agent/preempt/preempt_mem.h"
#include "tests/check.h"

#include <string.h>

#define MIB (1024ull * 1024ull)
#define C1 0xc1d00001u
#define C2 0xc1d00002u
#define DEV 0x5c000001u

static struct gq_memory budget(rm_u32 inst, rm_u64 limit, rm_u32 flags)
{
	struct gq_memory m;

	memset(&m, 0, sizeof(m));
	m.device_instance = inst;
	m.limit = limit;
	m.flags = flags;
	return m;
}

static int report(struct pa_mem *m, rm_u64 now, struct gq_mem_usage *u)
{
	int next;

	return pa_mem_take_report(m, now, u, &next);
}

int main(void)
{
	static struct pa_mem m;
	struct gq_memory b;
	struct gq_mem_usage u;
	struct rm_fb_info fb[4] = { { RM_FB_INFO_HEAP_SIZE, 80u << 20 },
				    { RM_FB_INFO_HEAP_FREE, 79u << 20 },
				    { 0x0bu, 6016 },
				    { RM_FB_INFO_TOTAL_RAM_SIZE, 81u << 20 } };
	int next;

	pa_mem_init(&m);
	/* No budget: every allocation goes, and is counted per GPU. */
	CHECK(!pa_mem_refuse(&m, 0, 1ull << 40));
	pa_mem_added(&m, 3, C1, DEV, 0xcaf00001u, 0, 256 * MIB);
	pa_mem_added(&m, 3, C1, DEV, 0xcaf00002u, 0, 2 * MIB);
	pa_mem_added(&m, 4, C2, DEV, 0xcaf00001u, 1, 64 * MIB);
	CHECK_EQ_U(m.live, 3);
	CHECK(report(&m, 1000, &u) == 1);
	CHECK_EQ_U(u.device_instance, 0);
	CHECK_EQ_U(u.used, 258 * MIB);
	CHECK(u.limit == GQ_MEM_UNLIMITED);
	CHECK(report(&m, 1000, &u) == 1 && u.device_instance == 1 && u.used == 64 * MIB);
	CHECK(report(&m, 1000, &u) == 0);
	/* The same handle twice is not counted twice. */
	pa_mem_added(&m, 3, C1, DEV, 0xcaf00002u, 0, 2 * MIB);
	CHECK_EQ_U(m.gpu[0].used_bytes, 258 * MIB);
	CHECK_EQ_U(m.gpu[0].unknown, 1);

	/* A budget of 300 MiB on GPU 0: 40 MiB more go, 50 MiB do not. */
	b = budget(0, 300 * MIB, GQ_MEMORY_F_REPORT);
	CHECK(pa_mem_set_limit(&m, &b) == 0);
	CHECK(m.any_limit);
	CHECK(!pa_mem_refuse(&m, 0, 42 * MIB));
	CHECK(pa_mem_refuse(&m, 0, 43 * MIB));
	CHECK(!pa_mem_refuse(&m, 1, 1ull << 40)); /* another GPU: no budget */
	CHECK_EQ_U(m.gpu[0].refused, 1);
	CHECK_EQ_U(m.gpu[0].refused_bytes, 43 * MIB);
	/* The first refusal under a budget is reported at once, the next ones
	 * with the period. */
	CHECK(report(&m, 2000, &u) == 1 && u.refused == 1 && u.limit == 300 * MIB);
	CHECK(pa_mem_refuse(&m, 0, 43 * MIB));
	CHECK(report(&m, 3000, &u) == 0);
	CHECK(pa_mem_take_report(&m, 3000, &u, &next) == 0 && next > 0 &&
	      next <= (int)GQ_MEM_USAGE_PERIOD_MS);
	CHECK(report(&m, 2000 + GQ_MEM_USAGE_PERIOD_MS * 1000000ull, &u) == 1 && u.refused == 2);

	/* FB info under REPORT: totals at most the budget, free what is left
	 * of it; an index it does not know untouched. */
	CHECK_EQ_U(pa_mem_fb_rewrite(&m, 0, fb, 4), 3);
	CHECK_EQ_U(fb[0].data, 300u * 1024u);
	CHECK_EQ_U(fb[1].data, 42u * 1024u);
	CHECK_EQ_U(fb[2].data, 6016);
	CHECK_EQ_U(fb[3].data, 300u * 1024u);
	CHECK_EQ_U(pa_mem_fb_rewrite(&m, 1, fb, 4), 0); /* no budget there */
	b = budget(0, 300 * MIB, 0);
	CHECK(pa_mem_set_limit(&m, &b) == 0);
	fb[0].data = 80u << 20;
	CHECK_EQ_U(pa_mem_fb_rewrite(&m, 0, fb, 1), 0); /* budget without REPORT */

	/* Frees: the allocation, then a client's all. */
	pa_mem_freed(&m, C1, 0xcaf00001u);
	CHECK_EQ_U(m.gpu[0].used_bytes, 2 * MIB);
	pa_mem_freed(&m, C1, 0xcaf09999u); /* not an allocation: nothing */
	CHECK_EQ_U(m.gpu[0].used_bytes, 2 * MIB);
	pa_mem_freed(&m, C1, C1);
	CHECK_EQ_U(m.gpu[0].used_bytes, 0);
	CHECK_EQ_U(m.gpu[1].used_bytes, 64 * MIB); /* C2's stays */
	/* A device's free takes what it parents; a close what its fd made. */
	pa_mem_added(&m, 5, C1, DEV, 0xcaf00010u, 0, 10 * MIB);
	pa_mem_added(&m, 5, C1, DEV + 1, 0xcaf00011u, 0, 20 * MIB);
	pa_mem_freed(&m, C1, DEV);
	CHECK_EQ_U(m.gpu[0].used_bytes, 20 * MIB);
	pa_mem_close_fd(&m, 5);
	pa_mem_close_fd(&m, 4);
	CHECK_EQ_U(m.gpu[0].used_bytes, 0);
	CHECK_EQ_U(m.gpu[1].used_bytes, 0);
	CHECK_EQ_U(m.live, 0);
	CHECK_EQ_U(m.gpu[0].peak, 300 * MIB - 42 * MIB);

	/* A budget below what is held refuses everything until frees. */
	pa_mem_added(&m, 3, C1, DEV, 0xcaf00020u, 0, 100 * MIB);
	b = budget(0, 50 * MIB, 0);
	CHECK(pa_mem_set_limit(&m, &b) == 0);
	CHECK(pa_mem_refuse(&m, 0, 1));
	pa_mem_freed(&m, C1, 0xcaf00020u);
	CHECK(!pa_mem_refuse(&m, 0, 50 * MIB));
	CHECK(pa_mem_refuse(&m, 0, 50 * MIB + 1));
	/* Lifting it: nothing checked any more. */
	b = budget(0, GQ_MEM_UNLIMITED, 0);
	CHECK(pa_mem_set_limit(&m, &b) == 0);
	CHECK(!m.any_limit);
	/* Bad MEMORY: reserved flags, unknown device. */
	b = budget(0, MIB, 0x80);
	CHECK(pa_mem_set_limit(&m, &b) == -1);
	b = budget(GQ_UNKNOWN, MIB, 0);
	CHECK(pa_mem_set_limit(&m, &b) == -1);
	CHECK(!m.any_limit);

	/* The table's bound: beyond it allocations pass, counted unknown,
	 * and every counted one is still found and freed (probe chains
	 * survive the deletions). */
	for (rm_u32 i = 0; i < PA_MEM_MAX_LIVE + 10; i++)
		pa_mem_added(&m, 3, C1 + (i & 7), DEV, 0xcaf10000u + i, 2, 1);
	CHECK_EQ_U(m.live, PA_MEM_MAX_LIVE);
	CHECK_EQ_U(m.gpu[2].used_bytes, PA_MEM_MAX_LIVE);
	CHECK_EQ_U(m.gpu[2].unknown, 10);
	for (rm_u32 i = 0; i < PA_MEM_MAX_LIVE; i += 2)
		pa_mem_freed(&m, C1 + (i & 7), 0xcaf10000u + i);
	CHECK_EQ_U(m.live, PA_MEM_MAX_LIVE / 2);
	for (rm_u32 i = 1; i < PA_MEM_MAX_LIVE; i += 2)
		pa_mem_freed(&m, C1 + (i & 7), 0xcaf10000u + i);
	CHECK_EQ_U(m.live, 0);
	CHECK_EQ_U(m.gpu[2].used_bytes, 0);
	/* More GPUs than slots: counted nowhere, never a crash. */
	for (rm_u32 i = 0; i < PA_MEM_GPUS + 2; i++)
		pa_mem_added(&m, 3, C2, DEV, 0xcaf20000u + i, 100 + i, 1);
	CHECK(m.unknown_gpu >= 1);
	pa_mem_reset(&m);
	CHECK(m.tab == NULL && m.live == 0);
	CHECK_DONE();
}

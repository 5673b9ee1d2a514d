/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_memory.c - checks and shows a process's video memory per GPU as the
 * agent answers it (docs/ctl.md, "memory"). Presentation only.
 */
#include "agent/cli/ctl_memory.h"

#include <string.h>

#include "common/quantity.h"

int memv_parse(struct jerr *e, const cJSON *o, const char *where, struct memv *v)
{
	const cJSON *arr, *g;
	char w[96];
	long long tmp;

	memset(v, 0, sizeof(*v));
	if (j_arr(e, o, where, "memory", J_ANY, &arr) <= 0)
		return e->msg[0] ? -1 : 0;
	cJSON_ArrayForEach(g, arr)
	{
		struct memv_gpu *m;

		if (v->n >= MEMV_GPUS)
			break;
		m = &v->g[v->n];
		snprintf(w, sizeof(w), "%s.memory[%d]", where, v->n);
		if (!cJSON_IsObject(g)) {
			j_fail(e, "%s: not an object", w);
			return -1;
		}
		j_int(e, g, w, "gpu", J_REQ, &m->gpu);
		j_int(e, g, w, "usedBytes", J_REQ, &m->used);
		m->has_limit = j_int(e, g, w, "limitBytes", J_NULL, &m->limit) > 0;
		m->has_pod_limit = j_int(e, g, w, "podLimitBytes", J_ANY, &m->pod_limit) > 0;
		j_int(e, g, w, "podUsedBytes", J_ANY, &m->pod_used);
		j_int(e, g, w, "refused", J_REQ, &m->refused);
		j_int(e, g, w, "refusedBytes", J_REQ, &m->refused_bytes);
		j_int(e, g, w, "unknown", J_ANY, &m->unknown);
		j_bool(e, g, w, "reported", J_ANY, &m->reported);
		if (j_int(e, g, w, "peakBytes", J_ANY, &tmp) < 0 || e->msg[0])
			return -1;
		v->n++;
	}
	return 0;
}

static void size_text(char *buf, size_t n, long long v)
{
	quantity_format(v < 0 ? 0 : (uint64_t)v, buf, n);
}

void memv_show(FILE *out, const struct memv *v,
	       void (*detail)(FILE *out, const char *name, const char *value))
{
	for (int i = 0; i < v->n; i++) {
		const struct memv_gpu *m = &v->g[i];
		char used[32], lim[32], pu[32], pl[32], rb[32], buf[384];
		int k;

		size_text(used, sizeof(used), m->used);
		if (m->has_limit)
			size_text(lim, sizeof(lim), m->limit);
		else
			snprintf(lim, sizeof(lim), "no budget");
		size_text(pu, sizeof(pu), m->pod_used);
		if (m->has_pod_limit)
			size_text(pl, sizeof(pl), m->pod_limit);
		else
			snprintf(pl, sizeof(pl), "no budget");
		size_text(rb, sizeof(rb), m->refused_bytes);
		k = snprintf(buf, sizeof(buf), "GPU %lld: %s used of %s (its pod: %s of %s)", m->gpu,
			     used, lim, pu, pl);
		if (k > 0 && (size_t)k < sizeof(buf) && m->refused)
			k += snprintf(buf + k, sizeof(buf) - (size_t)k,
				      "; %lld allocations refused (%s)", m->refused, rb);
		if (k > 0 && (size_t)k < sizeof(buf) && m->unknown)
			snprintf(buf + k, sizeof(buf) - (size_t)k, "; %lld passed uncounted",
				 m->unknown);
		detail(out, "memory", buf);
	}
}

int memv_uncapped_table(struct jerr *e, const cJSON *ans, struct table *t)
{
	static const char *const head[] = { "GPU", "PID", "COMM", "USED", "NOT CAPPED: WHY" };
	const cJSON *arr, *r;
	int i = 0;

	if (table_init(t, 5, head) != 0) {
		j_fail(e, "out of memory");
		return -1;
	}
	if (j_arr(e, ans, "answer", "uncappedMemory", J_ANY, &arr) <= 0)
		return e->msg[0] ? (table_free(t), -1) : 0;
	cJSON_ArrayForEach(r, arr)
	{
		long long gpu = 0, pid = 0, used = 0;
		const char *why = NULL, *comm = NULL, *cells[5];
		char w[48], g[24], p[24], u[32];

		snprintf(w, sizeof(w), "uncappedMemory[%d]", i++);
		if (!cJSON_IsObject(r)) {
			j_fail(e, "%s: not an object", w);
			break;
		}
		j_int(e, r, w, "gpu", J_REQ, &gpu);
		j_int(e, r, w, "pid", J_REQ, &pid);
		j_int(e, r, w, "usedBytes", J_REQ, &used);
		j_str(e, r, w, "why", J_REQ, &why);
		j_str(e, r, w, "comm", J_ANY, &comm);
		if (e->msg[0])
			break;
		snprintf(g, sizeof(g), "%lld", gpu);
		snprintf(p, sizeof(p), "%lld", pid);
		size_text(u, sizeof(u), used);
		cells[0] = g;
		cells[1] = p;
		cells[2] = comm ? comm : "-";
		cells[3] = u;
		cells[4] = why;
		if (table_add(t, cells) != 0) {
			j_fail(e, "out of memory");
			break;
		}
	}
	if (e->msg[0]) {
		table_free(t);
		return -1;
	}
	return 0;
}

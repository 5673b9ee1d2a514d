/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_render.c - what gpuqosctl prints for each answer of docs/ctl.md.
 *
 * Members a table column shows are required (null allowed where the
 * contract says a value can be unknown); members only `show` prints are
 * optional, but a wrong type is still an error. Every answer is checked
 * completely before the first byte is printed. Owns the presentation, not
 * the transport or the command line.
 */
#include "agent/cli/ctl_render.h"

#include <stdlib.h>
#include <string.h>

#include "agent/cli/cli_table.h"
#include "agent/cli/ctl_memory.h"

struct oint {
	int has;
	long long v;
};

struct tsg_view {
	long long pid;
	struct oint gpu;
	const char *comm, *engine, *cls, *path, *state, *status_name;
	struct jerrno err;
	struct oint ts_desired, ts_applied, ts_baseline, il_desired, il_applied;
	/* shown by `show` only */
	const char *class_source, *client, *tsg, *reason, *last_op;
	struct oint last_status, elapsed;
	int has_gate, rotating, gate_desired, gate_applied;
	struct oint gates, gated_ms, gated_longest_ms; /* agents since 2026-11-25 */
	struct oint verified_ago, verify_mismatches;   /* agents since 2026-11-26 */
	struct oint ts_reverts, ts_revert_wait, il_reverts, il_revert_wait; /* ... 11-26 */
};

struct proc_view {
	long long pid, ntsg;
	const char *comm, *exe, *cgroup, *cls, *class_source;
	int connected, has_connected;
	struct oint launch_pct, launch_rate; /* its launch reading, when known */
	int launch_bound;
	struct oint wake_lead; /* the wake its preempt agent was asked for (µs) */
	/* How its wakes went (agents since 2026-11-26; null until reported). */
	int has_wake, wake_stopped;
	struct oint wake_requests, wakes, wake_hits, wake_wasted, wake_beaten, wake_not_issued,
		wake_stops;
	/* When its requests come (agents since 2026-11-26; null without). */
	int has_phase;
	struct oint phase_period, phase_ago, phase_span;
	/* The window schedule it runs (a BE; agents since 2026-11-26). */
	int has_window;
	struct oint win_gpu, win_period, win_before, win_after, win_lc;
	int win_held_known, win_held;
	struct oint win_opened, win_skipped;
	/* The windows decided for it (agents since 2026-12-07; null without). */
	int has_windows, windows_given;
	const char *windows_refused, *windows_reason;
	struct oint windows_after;
	struct memv mem; /* its video memory (agents since 2026-12-07) */
};

#define CELL 64
#define NUM 24 /* a long long in decimal, sign and NUL included */
#define NTSGCOL 10

static int oint_get(struct jerr *e, const cJSON *o, const char *w, const char *k,
		    int flags, struct oint *v)
{
	int r = j_int(e, o, w, k, flags, &v->v);

	v->has = r > 0;
	return r;
}

const char *ctl_errno_text(long long err, char *buf, size_t len)
{
	/* The preempt agent's own codes (docs/protocol.md, RESULT.err). */
	switch (err) {
	case 10001: return "unknown TSG";
	case 10002: return "deadline expired before the control started";
	case 10003: return "bad op or argument";
	}
	if (err > 0 && err < 4096)
		snprintf(buf, len, "%s", strerror((int)err));
	else
		snprintf(buf, len, "errno %lld", err);
	return buf;
}

static int is_object(struct jerr *e, const cJSON *o, const char *where)
{
	if (cJSON_IsObject(o))
		return 1;
	j_fail(e, "%s is not an object", where);
	return 0;
}

static void parse_tsg_nested(struct jerr *e, const cJSON *o, const char *w,
			     struct tsg_view *v)
{
	const cJSON *ts, *il, *gate;
	char w2[80];

	if (j_obj(e, o, w, "timeslice", J_REQ, &ts) > 0) {
		snprintf(w2, sizeof(w2), "%s.timeslice", w);
		oint_get(e, ts, w2, "desired", J_NULL, &v->ts_desired);
		oint_get(e, ts, w2, "applied", J_NULL, &v->ts_applied);
		oint_get(e, ts, w2, "baseline", J_ANY, &v->ts_baseline);
		oint_get(e, ts, w2, "verifiedMsAgo", J_ANY, &v->verified_ago);
		oint_get(e, ts, w2, "verifyMismatches", J_ANY, &v->verify_mismatches);
		oint_get(e, ts, w2, "reverts", J_ANY, &v->ts_reverts);
		oint_get(e, ts, w2, "revertWaitMs", J_ANY, &v->ts_revert_wait);
	}
	if (j_obj(e, o, w, "interleave", J_REQ, &il) > 0) {
		snprintf(w2, sizeof(w2), "%s.interleave", w);
		oint_get(e, il, w2, "desired", J_NULL, &v->il_desired);
		oint_get(e, il, w2, "applied", J_NULL, &v->il_applied);
		oint_get(e, il, w2, "reverts", J_ANY, &v->il_reverts);
		oint_get(e, il, w2, "revertWaitMs", J_ANY, &v->il_revert_wait);
	}
	/* Agents before rotation have no "gate". */
	if (j_obj(e, o, w, "gate", J_ANY, &gate) > 0) {
		snprintf(w2, sizeof(w2), "%s.gate", w);
		v->has_gate = j_bool(e, gate, w2, "rotating", J_REQ, &v->rotating) > 0;
		j_bool(e, gate, w2, "desired", J_REQ, &v->gate_desired);
		j_bool(e, gate, w2, "applied", J_REQ, &v->gate_applied);
		oint_get(e, gate, w2, "count", J_ANY, &v->gates);
		oint_get(e, gate, w2, "gatedMs", J_ANY, &v->gated_ms);
		oint_get(e, gate, w2, "longestMs", J_ANY, &v->gated_longest_ms);
	}
}

static int parse_tsg(struct jerr *e, const cJSON *o, const char *w, struct tsg_view *v)
{
	memset(v, 0, sizeof(*v));
	if (!is_object(e, o, w))
		return -1;
	j_int(e, o, w, "pid", J_REQ, &v->pid);
	j_str(e, o, w, "comm", J_REQ, &v->comm);
	/* The agent may not know the GPU yet (docs/ctl.md does not say). */
	oint_get(e, o, w, "gpu", J_NULL, &v->gpu);
	j_str(e, o, w, "engineName", J_REQ, &v->engine);
	j_str(e, o, w, "class", J_NULL, &v->cls);
	j_str(e, o, w, "path", J_NULL, &v->path);
	j_str(e, o, w, "state", J_REQ, &v->state);
	/* Before its first control a TSG has no last result. */
	j_str(e, o, w, "lastStatusName", J_NULL, &v->status_name);
	j_errno(e, o, w, "lastErrno", J_NULL, &v->err);
	parse_tsg_nested(e, o, w, v);
	j_str(e, o, w, "classSource", J_ANY, &v->class_source);
	j_str(e, o, w, "client", J_ANY, &v->client);
	j_str(e, o, w, "tsg", J_ANY, &v->tsg);
	j_str(e, o, w, "reason", J_ANY, &v->reason);
	j_str(e, o, w, "lastOp", J_ANY, &v->last_op);
	oint_get(e, o, w, "lastStatus", J_ANY, &v->last_status);
	oint_get(e, o, w, "lastElapsedUs", J_ANY, &v->elapsed);
	return e->msg[0] ? -1 : 0;
}

static int parse_proc(struct jerr *e, const cJSON *o, const char *w, struct proc_view *v)
{
	const cJSON *wake, *phase, *win, *wins;
	char w2[80];

	memset(v, 0, sizeof(*v));
	if (!is_object(e, o, w))
		return -1;
	j_int(e, o, w, "pid", J_REQ, &v->pid);
	j_str(e, o, w, "comm", J_REQ, &v->comm);
	j_int(e, o, w, "tsgs", J_REQ, &v->ntsg);
	j_str(e, o, w, "exe", J_ANY, &v->exe);
	j_str(e, o, w, "cgroup", J_ANY, &v->cgroup);
	j_str(e, o, w, "class", J_ANY, &v->cls);
	j_str(e, o, w, "classSource", J_ANY, &v->class_source);
	v->has_connected = j_bool(e, o, w, "connected", J_ANY, &v->connected) > 0;
	oint_get(e, o, w, "launchActivePercent", J_ANY, &v->launch_pct);
	oint_get(e, o, w, "launchesPerSecond", J_ANY, &v->launch_rate);
	j_bool(e, o, w, "launchBound", J_ANY, &v->launch_bound);
	oint_get(e, o, w, "wakeLeadUs", J_ANY, &v->wake_lead);
	if (j_obj(e, o, w, "wake", J_ANY, &wake) > 0) {
		snprintf(w2, sizeof(w2), "%s.wake", w);
		v->has_wake = 1;
		oint_get(e, wake, w2, "requests", J_REQ, &v->wake_requests);
		oint_get(e, wake, w2, "wakes", J_REQ, &v->wakes);
		oint_get(e, wake, w2, "hits", J_REQ, &v->wake_hits);
		oint_get(e, wake, w2, "wasted", J_REQ, &v->wake_wasted);
		oint_get(e, wake, w2, "beaten", J_REQ, &v->wake_beaten);
		oint_get(e, wake, w2, "notIssued", J_REQ, &v->wake_not_issued);
		oint_get(e, wake, w2, "stops", J_REQ, &v->wake_stops);
		j_bool(e, wake, w2, "stopped", J_REQ, &v->wake_stopped);
	}
	if (j_obj(e, o, w, "phase", J_ANY, &phase) > 0) {
		snprintf(w2, sizeof(w2), "%s.phase", w);
		v->has_phase = 1;
		oint_get(e, phase, w2, "periodUs", J_REQ, &v->phase_period);
		oint_get(e, phase, w2, "lastStartAgoUs", J_REQ, &v->phase_ago);
		oint_get(e, phase, w2, "spanUs", J_ANY, &v->phase_span);
	}
	if (j_obj(e, o, w, "window", J_ANY, &win) > 0) {
		snprintf(w2, sizeof(w2), "%s.window", w);
		v->has_window = 1;
		oint_get(e, win, w2, "gpu", J_REQ, &v->win_gpu);
		oint_get(e, win, w2, "periodUs", J_REQ, &v->win_period);
		oint_get(e, win, w2, "beforeUs", J_REQ, &v->win_before);
		oint_get(e, win, w2, "afterUs", J_REQ, &v->win_after);
		oint_get(e, win, w2, "lcPid", J_REQ, &v->win_lc);
		v->win_held_known = j_bool(e, win, w2, "held", J_ANY, &v->win_held) > 0;
		oint_get(e, win, w2, "windowsOpened", J_ANY, &v->win_opened);
		oint_get(e, win, w2, "windowsSkipped", J_ANY, &v->win_skipped);
	}
	if (j_obj(e, o, w, "windows", J_ANY, &wins) > 0) {
		snprintf(w2, sizeof(w2), "%s.windows", w);
		v->has_windows = 1;
		j_bool(e, wins, w2, "given", J_REQ, &v->windows_given);
		j_str(e, wins, w2, "refused", J_ANY, &v->windows_refused);
		j_str(e, wins, w2, "reason", J_ANY, &v->windows_reason);
		oint_get(e, wins, w2, "afterUs", J_ANY, &v->windows_after);
	}
	memv_parse(e, o, w, &v->mem);
	return e->msg[0] ? -1 : 0;
}

static const char *class_short(const char *cls)
{
	if (!cls || strcmp(cls, "unmanaged") == 0)
		return "-";
	if (strcmp(cls, "latency-critical") == 0)
		return "LC";
	if (strcmp(cls, "best-effort") == 0)
		return "BE";
	return cls; /* a class this gpuqosctl does not know yet: show it */
}

static const char *level_name(const struct oint *l, const char *absent, char *buf, size_t len)
{
	static const char *const names[] = { "LOW", "MEDIUM", "HIGH" };

	if (!l->has)
		return absent;
	if (l->v >= 0 && l->v <= 2)
		return names[l->v];
	snprintf(buf, len, "%lld", l->v);
	return buf;
}

static void fmt_oint(char *buf, size_t len, const struct oint *v, const char *absent)
{
	if (v->has)
		snprintf(buf, len, "%lld", v->v);
	else
		snprintf(buf, len, "%s", absent);
}

static const char *status_text(const struct tsg_view *v, char *buf, size_t len)
{
	if (v->err.timeout)
		return "timeout";
	if (v->err.present && v->err.num != 0)
		return ctl_errno_text(v->err.num, buf, len);
	if (v->status_name)
		return v->status_name;
	if (v->last_status.has) {
		snprintf(buf, len, "0x%llx", (unsigned long long)v->last_status.v);
		return buf;
	}
	return "-";
}

static int tsg_row(struct table *t, const struct tsg_view *v)
{
	char pid[CELL], gpu[CELL], ts[CELL], il[CELL], st[CELL];
	char a[NUM], d[NUM], la[16], ld[16];
	const char *cells[NTSGCOL];

	snprintf(pid, sizeof(pid), "%lld", v->pid);
	fmt_oint(gpu, sizeof(gpu), &v->gpu, "?");
	fmt_oint(a, sizeof(a), &v->ts_applied, "?");
	fmt_oint(d, sizeof(d), &v->ts_desired, "-");
	snprintf(ts, sizeof(ts), "%s/%s", a, d);
	if (!v->il_applied.has && !v->il_desired.has)
		snprintf(il, sizeof(il), "-");
	else
		snprintf(il, sizeof(il), "%s/%s", level_name(&v->il_applied, "?", la, sizeof(la)),
			 level_name(&v->il_desired, "-", ld, sizeof(ld)));
	cells[0] = pid;
	cells[1] = v->comm;
	cells[2] = gpu;
	cells[3] = v->engine;
	cells[4] = class_short(v->cls);
	cells[5] = ts;
	cells[6] = il;
	cells[7] = v->path ? v->path : "-";
	cells[8] = status_text(v, st, sizeof(st));
	cells[9] = v->state;
	return table_add(t, cells);
}

/* Checks every TSG and fills t; on error t is freed. */
static int tsg_table(struct jerr *e, const cJSON *tsgs, struct table *t)
{
	static const char *const head[NTSGCOL] = {
		"PID", "COMM", "GPU", "ENGINE", "CLASS", "TIMESLICE",
		"INTERLEAVE", "PATH", "STATUS", "STATE",
	};
	const cJSON *it;
	struct tsg_view v;
	char w[32];
	int i = 0;

	if (table_init(t, NTSGCOL, head) != 0)
		j_fail(e, "out of memory");
	cJSON_ArrayForEach(it, tsgs) {
		snprintf(w, sizeof(w), "tsgs[%d]", i++);
		if (e->msg[0] || parse_tsg(e, it, w, &v) != 0 || tsg_row(t, &v) != 0) {
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

/* Processes; with only_idle, just those without TSGs. On error t is freed. */
static int proc_table(struct jerr *e, const cJSON *procs, int only_idle, struct table *t)
{
	static const char *const head[] = { "PID", "COMM", "CLASS", "SOURCE", "CONNECTED", "EXE" };
	const cJSON *it;
	struct proc_view v;
	char w[32], pid[CELL];
	int i = 0;

	if (table_init(t, 6, head) != 0)
		j_fail(e, "out of memory");
	cJSON_ArrayForEach(it, procs) {
		const char *cells[6];

		snprintf(w, sizeof(w), "processes[%d]", i++);
		if (e->msg[0] || parse_proc(e, it, w, &v) != 0)
			break;
		if (only_idle && v.ntsg != 0)
			continue;
		snprintf(pid, sizeof(pid), "%lld", v.pid);
		cells[0] = pid;
		cells[1] = v.comm;
		cells[2] = class_short(v.cls);
		cells[3] = v.class_source;
		cells[4] = !v.has_connected ? "-" : v.connected ? "yes" : "no";
		cells[5] = v.exe;
		if (table_add(t, cells) != 0)
			j_fail(e, "out of memory");
	}
	if (e->msg[0]) {
		table_free(t);
		return -1;
	}
	return 0;
}

/* Both tables of an answer of the list/show shape; on error neither is kept. */
static int list_tables(struct jerr *e, const cJSON *ans, int only_idle,
		       struct table *tt, struct table *pt)
{
	const cJSON *tsgs, *procs;

	if (j_arr(e, ans, "answer", "tsgs", J_REQ, &tsgs) < 0 ||
	    j_arr(e, ans, "answer", "processes", J_REQ, &procs) < 0)
		return -1;
	if (tsg_table(e, tsgs, tt) != 0)
		return -1;
	if (proc_table(e, procs, only_idle, pt) != 0) {
		table_free(tt);
		return -1;
	}
	return 0;
}

int render_list(const cJSON *ans, FILE *out, struct jerr *e)
{
	struct table tt, pt, ut;

	if (list_tables(e, ans, 1, &tt, &pt) != 0)
		return -1;
	if (memv_uncapped_table(e, ans, &ut) != 0) {
		table_free(&tt);
		table_free(&pt);
		return -1;
	}
	if (tt.nrows > 1)
		table_print(&tt, out);
	else
		fprintf(out, "no TSGs\n");
	if (pt.nrows > 1) {
		fprintf(out, "\nprocesses without TSGs:\n");
		table_print(&pt, out);
	}
	if (ut.nrows > 1) {
		fprintf(out, "\nvideo memory used, not capped (the RM's count):\n");
		table_print(&ut, out);
	}
	table_free(&tt);
	table_free(&pt);
	table_free(&ut);
	return 0;
}

static void detail(FILE *out, const char *name, const char *value)
{
	fprintf(out, "  %-14s ", name);
	put_safe(out, value ? value : "-");
	fputc('\n', out);
}

/* A setting set back after the agent's SET took (agents since
 * 2026-11-26): shown once it happened. */
static void show_reverts(FILE *out, const char *what, const struct oint *n, const struct oint *wait)
{
	char buf[128], a[NUM], w[NUM];

	if (!n->has || n->v <= 0)
		return;
	fmt_oint(a, sizeof(a), n, "?");
	fmt_oint(w, sizeof(w), wait, "?");
	if (wait->has && wait->v > 0)
		snprintf(buf, sizeof(buf), "%s %s times; next SET in %s ms", what, a, w);
	else
		snprintf(buf, sizeof(buf), "%s %s times", what, a);
	detail(out, "set back", buf);
}

static void show_tsg_detail(FILE *out, const struct tsg_view *v)
{
	char buf[256], a[NUM], d[NUM], b[NUM], st[CELL], la[16], ld[16];

	fprintf(out, "\nTSG ");
	put_safe(out, v->tsg ? v->tsg : "?");
	fprintf(out, " of pid %lld (", v->pid);
	put_safe(out, v->comm);
	fmt_oint(a, sizeof(a), &v->gpu, "?");
	fprintf(out, "), GPU %s ", a);
	put_safe(out, v->engine);
	fprintf(out, ", client ");
	put_safe(out, v->client ? v->client : "?");
	fputc('\n', out);
	snprintf(buf, sizeof(buf), "%s (from %s)", v->cls ? v->cls : "-",
		 v->class_source ? v->class_source : "?");
	detail(out, "class", buf);
	detail(out, "state", v->state);
	detail(out, "reason", v->reason);
	if (v->has_gate && (v->rotating || v->gate_applied))
		detail(out, "rotation",
		       !v->rotating      ? "out of it, channels still disabled"
		       : v->gate_applied ? (v->gate_desired ? "gated: another BE's turn"
							: "gated, its turn next")
		       : v->gate_desired ? "its turn is over, gate on its way"
					 : "its turn: schedulable");
	fmt_oint(a, sizeof(a), &v->ts_applied, "?");
	fmt_oint(d, sizeof(d), &v->ts_desired, "-");
	fmt_oint(b, sizeof(b), &v->ts_baseline, "?");
	snprintf(buf, sizeof(buf), "applied %s, desired %s, baseline %s (µs)", a, d, b);
	detail(out, "timeslice", buf);
	/* The agent's read-backs of "applied" (agents since 2026-11-26). */
	if (v->verify_mismatches.has) {
		fmt_oint(b, sizeof(b), &v->verify_mismatches, "?");
		if (v->verified_ago.has) {
			fmt_oint(a, sizeof(a), &v->verified_ago, "?");
			snprintf(buf, sizeof(buf), "%s ms ago; %s found the RM holding another value",
				 a, b);
		} else {
			snprintf(buf, sizeof(buf), "not yet; %s found the RM holding another value", b);
		}
		detail(out, "read back", buf);
	}
	snprintf(buf, sizeof(buf), "applied %s, desired %s",
		 level_name(&v->il_applied, "?", la, sizeof(la)),
		 level_name(&v->il_desired, "-", ld, sizeof(ld)));
	detail(out, "interleave", buf);
	show_reverts(out, "timeslice", &v->ts_reverts, &v->ts_revert_wait);
	show_reverts(out, "interleave", &v->il_reverts, &v->il_revert_wait);
	/* How long rotation held it off (agents since 2026-11-25 say). */
	if (v->gates.has && v->gates.v > 0) {
		fmt_oint(a, sizeof(a), &v->gates, "?");
		fmt_oint(d, sizeof(d), &v->gated_ms, "?");
		fmt_oint(b, sizeof(b), &v->gated_longest_ms, "?");
		snprintf(buf, sizeof(buf), "%s times, %s ms in all, longest %s ms", a, d, b);
		detail(out, "gated", buf);
	}
	detail(out, "control path", v->path);
	fmt_oint(a, sizeof(a), &v->elapsed, "?");
	snprintf(buf, sizeof(buf), "%s: %s, %s µs", v->last_op ? v->last_op : "-",
		 status_text(v, st, sizeof(st)), a);
	detail(out, "last control", v->last_op ? buf : "none yet");
}

static void show_proc_detail(FILE *out, const struct proc_view *v)
{
	char buf[384];

	fprintf(out, "\nprocess %lld (", v->pid);
	put_safe(out, v->comm);
	fprintf(out, ")\n");
	detail(out, "exe", v->exe);
	detail(out, "cgroup", v->cgroup);
	snprintf(buf, sizeof(buf), "%s (from %s)", v->cls ? v->cls : "-",
		 v->class_source ? v->class_source : "?");
	detail(out, "class", buf);
	detail(out, "preempt agent", !v->has_connected ? "?" :
	       v->connected ? "connected" : "not connected");
	snprintf(buf, sizeof(buf), "%lld", v->ntsg);
	detail(out, "TSGs", buf);
	if (v->launch_pct.has && v->launch_rate.has)
		snprintf(buf, sizeof(buf), "active %lld %% of the time, %lld/s%s", v->launch_pct.v,
			 v->launch_rate.v, v->launch_bound ? ": launch-bound" : "");
	else
		snprintf(buf, sizeof(buf), "not known");
	detail(out, "launches", buf);
	/* Older agents send no such key. */
	if (v->wake_lead.has) {
		if (v->wake_lead.v > 0)
			snprintf(buf, sizeof(buf), "asked for, %lld µs ahead of its requests",
				 v->wake_lead.v);
		else
			snprintf(buf, sizeof(buf), "none asked");
		detail(out, "wake", buf);
	}
	if (v->has_wake) {
		char r[NUM], n[NUM], h[NUM], x[NUM], b[NUM], ni[NUM], st[NUM];

		fmt_oint(r, sizeof(r), &v->wake_requests, "?");
		fmt_oint(n, sizeof(n), &v->wakes, "?");
		fmt_oint(h, sizeof(h), &v->wake_hits, "?");
		fmt_oint(x, sizeof(x), &v->wake_wasted, "?");
		fmt_oint(b, sizeof(b), &v->wake_beaten, "?");
		fmt_oint(ni, sizeof(ni), &v->wake_not_issued, "?");
		fmt_oint(st, sizeof(st), &v->wake_stops, "?");
		snprintf(buf, sizeof(buf),
			 "%s of %s requests woken: %s hit, %s wasted, %s beaten; %s not issued; "
			 "%s stops%s",
			 n, r, h, x, b, ni, st, v->wake_stopped ? ", stopped now" : "");
		detail(out, "wakes", buf);
	}
	if (v->has_phase) {
		char per[NUM], ago[NUM];

		fmt_oint(per, sizeof(per), &v->phase_period, "?");
		fmt_oint(ago, sizeof(ago), &v->phase_ago, "?");
		if (v->phase_span.has)
			snprintf(buf, sizeof(buf),
				 "a request every %s µs, the latest %s µs ago; over %lld µs after "
				 "its due time (99th percentile)",
				 per, ago, v->phase_span.v);
		else
			snprintf(buf, sizeof(buf), "a request every %s µs, the latest %s µs ago", per,
				 ago);
		detail(out, "phase", buf);
	}
	if (v->has_window) {
		char g[NUM], per[NUM], bf[NUM], af[NUM], lc[NUM], op[NUM], sk[NUM], held[96];

		fmt_oint(g, sizeof(g), &v->win_gpu, "?");
		fmt_oint(per, sizeof(per), &v->win_period, "?");
		fmt_oint(bf, sizeof(bf), &v->win_before, "?");
		fmt_oint(af, sizeof(af), &v->win_after, "?");
		fmt_oint(lc, sizeof(lc), &v->win_lc, "?");
		fmt_oint(op, sizeof(op), &v->win_opened, "?");
		fmt_oint(sk, sizeof(sk), &v->win_skipped, "?");
		if (!v->win_held_known)
			snprintf(held, sizeof(held), "not confirmed by its preempt agent");
		else if (v->win_held)
			snprintf(held, sizeof(held), "held (%s windows opened, %s skipped)", op, sk);
		else
			snprintf(held, sizeof(held), "NOT held: its preempt agent refused or ended it");
		snprintf(buf, sizeof(buf),
			 "asked to be off GPU %s from %s µs before to %s µs after each request of "
			 "LC pid %s (every %s µs); %s",
			 g, bf, af, lc, per, held);
		detail(out, "window", buf);
	}
	if (v->has_windows) {
		if (v->windows_given && v->windows_after.has)
			snprintf(buf, sizeof(buf), "given: %lld µs after each request",
				 v->windows_after.v);
		else if (v->windows_given)
			snprintf(buf, sizeof(buf), "given");
		else
			snprintf(buf, sizeof(buf), "refused (%s): %s",
				 v->windows_refused ? v->windows_refused : "?",
				 v->windows_reason ? v->windows_reason : "?");
		detail(out, "windows", buf);
	}
	memv_show(out, &v->mem, detail);
}

int render_show(const cJSON *ans, long long pid, FILE *out, struct jerr *e)
{
	struct table tt, pt;
	struct tsg_view tv;
	struct proc_view pv;
	const cJSON *it;

	if (list_tables(e, ans, 0, &tt, &pt) != 0)
		return -1;
	if (tt.nrows > 1)
		table_print(&tt, out);
	else
		fprintf(out, "pid %lld: no TSGs\n", pid);
	/* Checked by list_tables: parsing again cannot fail. */
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(ans, "tsgs"))
		if (parse_tsg(e, it, "tsg", &tv) == 0)
			show_tsg_detail(out, &tv);
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(ans, "processes"))
		if (parse_proc(e, it, "process", &pv) == 0)
			show_proc_detail(out, &pv);
	table_free(&tt);
	table_free(&pt);
	return 0;
}

static int result_row(struct jerr *e, const cJSON *o, const char *w, struct table *t)
{
	const char *tsg = NULL, *op = NULL, *name = NULL, *cells[6];
	struct oint status = { 0 }, value = { 0 }, elapsed = { 0 };
	struct jerrno err;
	char st[CELL], val[CELL], el[CELL], en[160], words[128];

	if (!is_object(e, o, w))
		return -1;
	j_str(e, o, w, "tsg", J_REQ, &tsg);
	j_str(e, o, w, "op", J_REQ, &op);
	oint_get(e, o, w, "rmStatus", J_NULL, &status);
	j_str(e, o, w, "rmStatusName", J_NULL, &name);
	j_errno(e, o, w, "errno", J_REQ, &err);
	oint_get(e, o, w, "value", J_NULL, &value);
	oint_get(e, o, w, "elapsedUs", J_NULL, &elapsed);
	if (e->msg[0])
		return -1;
	if (name)
		snprintf(st, sizeof(st), "%s", name);
	else
		fmt_oint(st, sizeof(st), &status, "-");
	fmt_oint(val, sizeof(val), &value, "-");
	fmt_oint(el, sizeof(el), &elapsed, "-");
	if (err.timeout)
		snprintf(en, sizeof(en), "timeout");
	else if (err.num == 0)
		snprintf(en, sizeof(en), "0");
	else
		snprintf(en, sizeof(en), "%lld (%s)", err.num,
			 ctl_errno_text(err.num, words, sizeof(words)));
	cells[0] = tsg;
	cells[1] = op;
	cells[2] = st;
	cells[3] = val;
	cells[4] = el;
	cells[5] = en;
	if (table_add(t, cells) != 0)
		j_fail(e, "out of memory");
	return e->msg[0] ? -1 : 0;
}

int render_results(const cJSON *ans, long long pid, FILE *out, struct jerr *e)
{
	static const char *const head[] = { "TSG", "OP", "STATUS", "VALUE", "ELAPSED_US", "ERRNO" };
	const cJSON *results, *it;
	struct table t;
	char w[32];
	int i = 0;

	if (j_arr(e, ans, "answer", "results", J_REQ, &results) < 0)
		return -1;
	if (table_init(&t, 6, head) != 0)
		j_fail(e, "out of memory");
	cJSON_ArrayForEach(it, results) {
		snprintf(w, sizeof(w), "results[%d]", i++);
		if (e->msg[0] || result_row(e, it, w, &t) != 0)
			break;
	}
	if (!e->msg[0]) {
		if (t.nrows > 1)
			table_print(&t, out);
		else
			fprintf(out, "pid %lld: no TSGs to act on\n", pid);
	}
	table_free(&t);
	return e->msg[0] ? -1 : 0;
}

int render_status(const cJSON *ans, FILE *out, struct jerr *e)
{
	const char *w = "answer.agent", *version = NULL, *mode = NULL, *config = NULL;
	long long pid = 0, uptime = 0, peers = 0, tsgs = 0;
	const cJSON *a;

	if (j_obj(e, ans, "answer", "agent", J_REQ, &a) < 0)
		return -1;
	j_str(e, a, w, "version", J_REQ, &version);
	j_str(e, a, w, "mode", J_REQ, &mode);
	j_int(e, a, w, "pid", J_REQ, &pid);
	j_int(e, a, w, "uptimeS", J_REQ, &uptime);
	j_int(e, a, w, "peers", J_REQ, &peers);
	j_int(e, a, w, "tsgs", J_REQ, &tsgs);
	j_str(e, a, w, "config", J_ANY, &config);
	if (e->msg[0])
		return -1;
	fprintf(out, "version  ");
	put_safe(out, version);
	fprintf(out, "\nmode     ");
	put_safe(out, mode);
	fprintf(out, "\npid      %lld\nuptime   %lld s\npeers    %lld\ntsgs     %lld\nconfig   ",
		pid, uptime, peers, tsgs);
	put_safe(out, config ? config : "-");
	fputc('\n', out);
	return 0;
}

int render_set_class(const cJSON *ans, FILE *out, struct jerr *e)
{
	const char *cls = NULL;
	long long pid = 0;

	j_int(e, ans, "answer", "pid", J_REQ, &pid);
	j_str(e, ans, "answer", "class", J_REQ, &cls);
	if (e->msg[0])
		return -1;
	fprintf(out, "pid %lld: class ", pid);
	put_safe(out, cls);
	fputc('\n', out);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wake_replay.c - the wake's predictor and judging (preempt_wake_pred.c)
 * replayed over an LC's recorded requests: how many would be woken, hit,
 * wasted or beaten under the library's rule, with the wake issued exactly
 * at its target (no thread late). A benchmark on demand, not a test of
 * numbers: tests/preempt/test_wake_replay.py checks that it runs and adds
 * up.
 *
 * Input: a trace of lc_micro or lc_models.py (tests/gpu/README.md, --trace):
 * lines "i due_ns submit_ns latency_ns ..." after '#' header lines. The
 * request's start is column --col (2, the submit; 5 for lc_models.py, when
 * the submit call returned, nearer its graph launch).
 *
 *   wake_replay [--col N] [--lead-us L] [--each 1] TRACE...
 *
 * Prints one line per trace: requests, woken (share), hit, wasted (share of
 * requests), beaten, stops. With --each 1, first one line per request:
 * its index in the trace and what its wake was (hit, wasted, beaten;
 * held: wakes were stopped; none: no period agreed, or the first).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/preempt/preempt_wake.h"

static struct pa_wake_pred P;

static int parse_u(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || end == s || *end || *out > max || s[0] == '-' ? -1 : 0;
}

/* The start column of one trace line into *t; 0: taken, 1: not a request
 * line, -1: malformed. */
static int line_start(char *line, unsigned col, unsigned long long *t)
{
	char *save = NULL, *tok = strtok_r(line, " \t\n", &save);

	if (!tok || tok[0] == '#')
		return 1;
	for (unsigned i = 0; i < col; i++)
		if (!(tok = strtok_r(NULL, " \t\n", &save)))
			return -1;
	return parse_u(tok, ~0ull >> 1, t) ? -1 : 0;
}

/* What the wake of the start just fed was, from the counts before it. */
static const char *what(rm_u64 hits, rm_u64 wasted, rm_u64 early, int held)
{
	if (P.hits > hits)
		return "hit";
	if (P.wasted > wasted)
		return "wasted";
	if (P.early > early)
		return "beaten";
	return held ? "held" : "none";
}

static int replay(const char *path, unsigned col, rm_u64 lead, int each)
{
	FILE *f = fopen(path, "r");
	char line[512];
	unsigned long long t, n = 0, lineno = 0;
	rm_u64 off = 0;

	if (!f) {
		fprintf(stderr, "wake_replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	pa_wake_pred_reset(&P);
	while (fgets(line, sizeof(line), f)) {
		int r;

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			fprintf(stderr, "wake_replay: %s:%llu: line longer than %zu bytes\n", path,
				lineno, sizeof(line) - 2);
			fclose(f);
			return -1;
		}
		r = line_start(line, col, &t);
		if (r > 0)
			continue;
		if (r < 0) {
			fprintf(stderr, "wake_replay: %s:%llu: no number in column %u\n", path,
				lineno, col);
			fclose(f);
			return -1;
		}
		/* Traces start at 0; the predictor takes 0 for "none". */
		if (!n)
			off = 1000000000ull - t;
		t += off;
		/* The wake the library's thread would issue for this start:
		 * exactly at its target, if the target is before the start;
		 * one the start beat is recorded as the thread would. */
		{
			rm_u64 target = pa_wake_pred_target(&P, lead), hits, wasted, early;
			int held = P.hold != 0;

			if (target && target <= t)
				pa_wake_pred_woken(&P, target);
			hits = P.hits;
			wasted = P.wasted;
			early = P.early;
			pa_wake_pred_start(&P, t, 0, 0);
			if (each)
				printf("%llu %s\n", n, what(hits, wasted, early, held));
		}
		n++;
	}
	fclose(f);
	if (n < 2) {
		fprintf(stderr, "wake_replay: %s: fewer than two requests\n", path);
		return -1;
	}
	printf("%s: %llu requests, woken %.3f: %llu hit, %llu wasted (%.4f of the requests), "
	       "%llu beaten; %llu stops\n",
	       path, n, (double)(P.hits + P.wasted) / (double)(n - 1),
	       (unsigned long long)P.hits, (unsigned long long)P.wasted,
	       (double)P.wasted / (double)(n - 1), (unsigned long long)P.early,
	       (unsigned long long)P.stops);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long long col = 2, lead_us = 100, each = 0;
	int i = 1, bad = 0;

	for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i += 2) {
		if (i + 1 >= argc)
			break;
		if (!strcmp(argv[i], "--col") && !parse_u(argv[i + 1], 16, &col) && col > 0)
			continue;
		if (!strcmp(argv[i], "--each") && !parse_u(argv[i + 1], 1, &each))
			continue;
		if (!strcmp(argv[i], "--lead-us") && !parse_u(argv[i + 1], PA_WAKE_LEAD_MAX_US, &lead_us) &&
		    lead_us > 0)
			continue;
		fprintf(stderr, "wake_replay: bad option %s %s\n", argv[i], argv[i + 1]);
		return 2;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: wake_replay [--col 1..16] [--lead-us 1..%u] [--each 0|1] TRACE...\n",
			PA_WAKE_LEAD_MAX_US);
		return 2;
	}
	for (; i < argc; i++)
		bad |= replay(argv[i], (unsigned)col, lead_us * 1000ull, (int)each) != 0;
	return bad;
}

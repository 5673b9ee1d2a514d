#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""wake_cliff.py - a micro LC's latency against how late each request came
compared with where a wake aims (docs/perf-log, "Where a wake's tail comes
from").

Reads lc_micro and lc_models --trace files (suite.py's trace-*.txt). For each request the
offset is its submit time minus the previous submit plus the median of the
last eight intervals: the start the preempt agent's predictor expects, so a
wake with lead L was issued L before offset 0. Prints, per 10 us of offset,
how many requests came there and their latency percentiles.

With --summary, one line per trace instead: how the requests came (the
offset's p1 and p99, how many came later than the wake's reach allows,
--late-us), how many were slow (--slow-us), and whether slow ones come in
runs: P(slow | the previous one slow) against the share of slow ones. Runs
are what a stop of the wakes leaves (docs/perf-log, "Where the H200's wake
tail comes from").

The wake's own rule over the same traces (what it would have woken, hit
and wasted): tests/preempt/wake_replay.c, which runs the library's code.
With --by-wake WAKE_REPLAY (that program, built with the tests), each
trace's requests are grouped by what the rule made of their wake (hit,
wasted, beaten; held: wakes stopped; none: no period agreed), with each
group's latency percentiles and how many were over --slow-us: where a
row's slow requests come from. The replay sees only the trace's window,
not the warm-up before it, so its first requests are "none".

Usage: wake_cliff.py TRACE... [--bin-us 10] [--summary [--late-us 50] [--slow-us 230]]
                     [--by-wake WAKE_REPLAY [--col 2] [--slow-us 230]]
"""
import argparse
import subprocess
from collections import defaultdict


def load(path):
    rows = []
    with open(path) as f:
        for ln in f:
            if ln.startswith("#") or not ln.strip():
                continue
            # lc_micro's five columns; lc_models adds a sixth
            _, due, submit, latency = map(int, ln.split()[:4])
            rows.append((due, submit, latency))
    return rows


def pct(sorted_vals, p):
    return sorted_vals[min(len(sorted_vals) - 1, int(p / 100 * (len(sorted_vals) - 1) + 0.5))]


def offsets(r):
    """(offset us, latency us) of every request after the first nine."""
    out = []
    for i in range(9, len(r)):
        ivs = sorted(r[j][1] - r[j - 1][1] for j in range(i - 8, i))
        expected = r[i - 1][1] + ivs[4]
        out.append(((r[i][1] - expected) / 1e3, r[i][2] / 1e3))
    return out


def summary(path, rows, late_us, slow_us):
    offs = sorted(o for o, _ in rows)
    late = sum(1 for o, _ in rows if o > late_us)
    slow = [lat >= slow_us for _, lat in rows]
    nslow = sum(slow)
    after = sum(1 for a, b in zip(slow, slow[1:]) if a and b)
    cond = f"{after / nslow:.2f}" if nslow else "–"
    print(f"{path}: {len(rows)} requests; offset p1 {pct(offs, 1):.0f} / p99 {pct(offs, 99):.0f} us; "
          f"later than {late_us} us: {late} ({100 * late / len(rows):.1f} %); "
          f"slow (>= {slow_us} us): {nslow} ({100 * nslow / len(rows):.1f} %); "
          f"P(slow | previous slow) {cond}")


def by_wake(path, exe, col, slow_us):
    """The requests of one trace grouped by their wake (wake_replay --each)."""
    r = subprocess.run([exe, "--each", "1", "--col", str(col), path], capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"{exe}: {r.stderr.strip()}")
    what = dict(ln.split()[:2] for ln in r.stdout.splitlines() if ln[:1].isdigit())
    groups = defaultdict(list)
    lat = [latency / 1e3 for _, _, latency in load(path)]
    for i, v in enumerate(lat):
        groups[what.get(str(i), "none")].append(v)
    allv = sorted(lat)
    print(f"{path}: {len(lat)} requests, p50 {pct(allv, 50):.0f} / p99 {pct(allv, 99):.0f} us, "
          f"{sum(v > slow_us for v in lat)} over {slow_us:.0f} us\n"
          f"| wake | requests | latency p50 / p90 / p99 / max us | over {slow_us:.0f} us |\n"
          f"| --- | --- | --- | --- |")
    for k in ("hit", "beaten", "wasted", "held", "none"):
        v = sorted(groups.get(k, []))
        if v:
            print(f"| {k} | {len(v)} ({100 * len(v) / len(lat):.1f} %) | {pct(v, 50):.0f} / "
                  f"{pct(v, 90):.0f} / {pct(v, 99):.0f} / {v[-1]:.0f} | "
                  f"{sum(x > slow_us for x in v)} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--bin-us", type=int, default=10)
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--late-us", type=float, default=50.0)
    ap.add_argument("--slow-us", type=float, default=230.0)
    ap.add_argument("--by-wake", metavar="WAKE_REPLAY")
    ap.add_argument("--col", type=int, default=2,
                    help="with --by-wake: the start column (5 for lc_models.py's traces)")
    a = ap.parse_args()
    for path in a.traces:
        if a.by_wake:
            by_wake(path, a.by_wake, a.col, a.slow_us)
            continue
        rows = offsets(load(path))
        if not rows:
            print(f"{path}: fewer than ten requests")
            continue
        if a.summary:
            summary(path, rows, a.late_us, a.slow_us)
            continue
        bins = defaultdict(list)
        for off_us, lat_us in rows:
            bins[int(off_us // a.bin_us) * a.bin_us].append(lat_us)
        print(f"{path}\n| offset us | requests | latency p10 / p50 / p90 / max us |\n| --- | --- | --- |")
        for k in sorted(bins):
            v = sorted(bins[k])
            print(f"| {k} .. {k + a.bin_us} | {len(v)} | {pct(v, 10):.0f} / {pct(v, 50):.0f} / "
                  f"{pct(v, 90):.0f} / {v[-1]:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""wake_cliff.py - a micro LC's latency against how late each request came
compared with where a wake aims (docs/PERF.md, "Where a wake's tail comes
from").

Reads lc_micro --trace files (suite.py's trace-*.txt). For each request the
offset is its submit time minus the previous submit plus the median of the
last eight intervals: the start the preempt agent's predictor expects, so a
wake with lead L was issued L before offset 0. Prints, per 10 us of offset,
how many requests came there and their latency percentiles.

Usage: wake_cliff.py TRACE... [--bin-us 10]
"""
import argparse
from collections import defaultdict


def load(path):
    rows = []
    with open(path) as f:
        for ln in f:
            if ln.startswith("#") or not ln.strip():
                continue
            _, due, submit, latency, _ = map(int, ln.split())
            rows.append((due, submit, latency))
    return rows


def pct(sorted_vals, p):
    return sorted_vals[min(len(sorted_vals) - 1, int(p / 100 * (len(sorted_vals) - 1) + 0.5))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--bin-us", type=int, default=10)
    a = ap.parse_args()
    for path in a.traces:
        r = load(path)
        bins = defaultdict(list)
        for i in range(9, len(r)):
            ivs = sorted(r[j][1] - r[j - 1][1] for j in range(i - 8, i))
            expected = r[i - 1][1] + ivs[4]
            off_us = (r[i][1] - expected) / 1e3
            bins[int(off_us // a.bin_us) * a.bin_us].append(r[i][2] / 1e3)
        print(f"{path}\n| offset us | requests | latency p10 / p50 / p90 / max us |\n| --- | --- | --- |")
        for k in sorted(bins):
            v = sorted(bins[k])
            print(f"| {k} .. {k + a.bin_us} | {len(v)} | {pct(v, 10):.0f} / {pct(v, 50):.0f} / "
                  f"{pct(v, 90):.0f} / {v[-1]:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

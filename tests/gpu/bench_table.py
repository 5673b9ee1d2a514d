# SPDX-License-Identifier: Apache-2.0
"""bench_table - print the markdown table of a gpuqos bench.jsonl.

Usage: python3 bench_table.py bench.jsonl

Rows: one per (LC workload, scenario) in the order they ran, plus the BE
alone baseline. "BE vs alone" is the BE's kernels/s over be_fill alone;
"p99 vs alone" is the LC p99 over the same workload's "alone" p99.
"""

import json
import sys


def fmt(v, nd=0):
    if v is None:
        return "–"
    return f"{v:.{nd}f}"


def main(path):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    recs.append(json.loads(line))
                except json.JSONDecodeError:
                    pass

    meta = next((r for r in recs if r.get("scenario") == "meta"), None)
    be_alone = next((r for r in recs if r.get("scenario") == "be_alone"), None)
    be_base = be_alone["kernels_per_s"] if be_alone else None

    rows = []  # (workload, scenario) in order of first appearance
    lc, be = {}, {}
    for r in recs:
        sc, w = r.get("scenario"), r.get("lc_workload")
        if sc in ("meta", "be_alone"):
            continue
        key = (w, sc)
        if key not in rows:
            rows.append(key)
        if r.get("workload") == "be_fill":
            be[key] = r
        else:
            lc[key] = r

    if meta:
        print(f"GPU {meta.get('gpu')}, driver {meta.get('driver')}, "
              f"{meta.get('date')}, {meta.get('duration_s')} s per run")
        print()
    print("| workload | scenario | LC p50 µs | LC p99 µs | BE kernels/s "
          "| BE vs alone % | LC p99 vs alone | late / n |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    if be_alone:
        print(f"| be_fill | alone | – | – | {fmt(be_base, 1)} | 100 | – | – |")
    for w, sc in rows:
        l, b = lc.get((w, sc)), be.get((w, sc))
        alone = lc.get((w, "alone"))
        p50 = l.get("p50_us") if l else None
        p99 = l.get("p99_us") if l else None
        kps = b.get("kernels_per_s") if b else None
        pct = 100.0 * kps / be_base if kps is not None and be_base else None
        ratio = None
        if l and alone and alone.get("p99_us"):
            ratio = p99 / alone["p99_us"]
        late = f"{l['late']} / {l['n']}" if l else "–"
        ratio_s = f"{ratio:.2f}×" if ratio is not None else "–"
        print(f"| {w} | {sc} | {fmt(p50)} | {fmt(p99)} | {fmt(kps, 1)} "
              f"| {fmt(pct)} | {ratio_s} | {late} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))

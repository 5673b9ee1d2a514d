#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""fresh_starts.py - is `applied` what the RM holds, start after start?

N times over: a fresh node agent (new state directory), one BE (`be_fill`)
and one LC (`lc_micro`) under `gpuqos run`; once the agent says every TSG
of both is converged, read GET_TIMESLICE back from the RM through the BE's
own file descriptor and compare it with the agent's `applied` value for
the BE's GR TSG (and every other TSG of both processes that the agent claims a value for). A start whose
read-back differs, or that never converges, fails.

Prints one line per start and a summary table last; exit 0 only if every
start matched. Usage:
  fresh_starts.py --build BUILD --bin CUDA_BIN --out OUTDIR [--starts 20]
"""
import argparse
import json
import os
import sys
import time

import proof  # beside it: the same agent/workload launcher as the proof


def tsg_view(stack, pid):
    lst = stack.ctl("show", str(pid))
    applied = {t["tsg"]: (t["engine"], t["timeslice"]["applied"]) for t in proof.tsgs_of(lst, pid)}
    res = stack.ctl("get-timeslice", str(pid))
    read = {r["tsg"]: r.get("value") for r in res.get("results", []) if r.get("rmStatus") == 0}
    return applied, read


def one_start(stack, binp, i, config):
    stack.start_agent(config, "start%02d" % i)
    be = stack.run("be", [binp + "/be_fill", "--duration-s", "30"], "be%02d" % i)
    time.sleep(0.5)
    lc = stack.run("lc", [binp + "/lc_micro", "--period-us", "2000", "--duration-s", "30"], "lc%02d" % i)
    t0 = time.monotonic()
    lst = proof.wait_until(
        lambda: (lambda l: l if proof.converged(l, [be.pid, lc.pid]) else None)(stack.ctl("list")), 40)
    conv_s = time.monotonic() - t0
    # Give libcuda's own late SET_TIMESLICE (~70 ms after the GR TSG) and
    # anything else in flight time to land before reading back.
    time.sleep(1.0)
    row = {"start": i, "converged": bool(lst), "converge_s": round(conv_s, 2)}
    ok = bool(lst)
    for pid, name in ((be.pid, "be"), (lc.pid, "lc")):
        applied, read = tsg_view(stack, pid)
        # applied null = the agent claims nothing (a copy TSG it never
        # controlled keeps the RM's default); only a claim can be wrong.
        mism = {h: (a, read.get(h)) for h, (e, a) in applied.items() if a is not None and read.get(h) != a}
        gr = [(h, a) for h, (e, a) in applied.items() if e == 1]
        row[name + "_gr_applied"] = gr[0][1] if gr else None
        row[name + "_gr_read"] = read.get(gr[0][0]) if gr else None
        row[name + "_tsgs"] = len(applied)
        row[name + "_mismatch"] = mism
        ok = ok and len(applied) == 4 and not mism
    row["ok"] = ok
    for p in (be, lc):
        p.kill()
        p.wait()
    stack.stop_agent()
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--config", default=None)
    a = ap.parse_args()
    binp = proof.prepare(a.build, a.bin, a.out)
    stack = proof.Stack(a.build, a.out)
    rows = []
    for i in range(a.starts):
        proof.shutil.rmtree(proof.WORK + "/state", ignore_errors=True)
        row = one_start(stack, binp, i, a.config)
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(os.path.join(a.out, "fresh_starts.json"), "w") as f:
        json.dump(rows, f, indent=1)
    good = sum(r["ok"] for r in rows)
    print("\n| starts | read-back == applied on every TSG | BE GR applied values | LC GR applied values |")
    print("| --- | --- | --- | --- |")
    print("| %d | %d | %s | %s |" % (len(rows), good,
                                     sorted(set(r["be_gr_applied"] for r in rows), key=str),
                                     sorted(set(r["lc_gr_applied"] for r in rows), key=str)))
    return 0 if good == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tracer_check.py - the eBPF RM tracer on a real NVIDIA GPU.

  1. cost: CUDA context creation time (ctx_bench) and RM ioctl latency
     (rm_latency) with the tracer detached and attached, alternating
     off/on/off/on so drift shows;
  2. agreement: the tracer's pinned live-TSG table equals the preempt
     agent's view (gpuqosctl list) for a plain CUDA program and PyTorch;
  3. direct path (when the agent has one): a CUDA process WITHOUT the
     preempt agent is found through the tracer and gets its timeslice,
     interleave and preempt through pidfd_getfd; values read back.

Prints PASS/FAIL rows and a cost table last.
Usage: tracer_check.py --build BUILD --bin CUDA_BIN --out OUT [--python PY]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import proof  # (beside it) shares the stack helpers
from gpuqos_test.proc import as_nobody
from proof import WORK, Stack, check, tsgs_of, wait_until

PIN_COST = "/sys/fs/bpf/gpuqos-cost"
PIN = "/sys/fs/bpf/gpuqos"
ROUNDS = int(os.environ.get("COST_ROUNDS", "8"))       # off/on pairs
CTX_ITERS = int(os.environ.get("COST_CTX_ITERS", "12"))  # creations per round


def tracer(build, pin, out_path):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "lib"))
    p = subprocess.Popen([os.path.join(build, "bpf/gpuqos-tsgtrace"), "--pin-dir", pin],
                         stdout=open(out_path, "w"), stderr=subprocess.STDOUT, env=env)
    ok = wait_until(lambda: '"ready"' in open(out_path).read() or p.poll() is not None, 30)
    return p if ok and p.poll() is None else None


def tsgtrace_cmd(build, *args):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "lib"))
    return subprocess.run([os.path.join(build, "bpf/gpuqos-tsgtrace")] + list(args),
                          capture_output=True, text=True, env=env, timeout=60)


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    for line in p.stdout.splitlines()[::-1]:
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("%s: no result (%s)" % (cmd[0], p.stderr[-300:]))


def phase_cost(build, binp, out):
    rows = {"off": [], "on": []}
    for rnd, mode in enumerate(("off", "on") * ROUNDS):
        tp = None
        if mode == "on":
            tp = tracer(build, PIN_COST, os.path.join(out, "cost-tracer-%d.log" % rnd))
            if tp is None:
                check("tracer attaches for the cost run", False, open(os.path.join(out, "cost-tracer-%d.log" % rnd)).read()[-300:])
                return None
        ctx = run_json([binp + "/ctx_bench", "--iters", str(CTX_ITERS)])
        lat = run_json([binp + "/rm_latency", "--iters", "20000"])
        rows[mode].append((ctx, lat))
        if tp:
            tp.send_signal(signal.SIGINT)
            tp.wait(10)
            tsgtrace_cmd(build, "--pin-dir", PIN_COST, "--unpin")
    summary = {}
    for mode in rows:
        pooled = [x for r in rows[mode] for x in r[0]["samples_us"]]
        summary[mode] = {
            "ctx_pooled_p50_us": statistics.median(pooled),
            "ctx_samples": len(pooled),
            "ctx_p50_us": statistics.median(r[0]["p50_us"] for r in rows[mode]),
            "ctx_min_us": min(r[0]["min_us"] for r in rows[mode]),
            "null_control_p50_ns": statistics.median(r[1]["null_control_p50_ns"] for r in rows[mode]),
            "client_alloc_free_p50_ns": statistics.median(r[1]["client_alloc_free_p50_ns"] for r in rows[mode]),
        }
    json.dump({"rounds": rows, "summary": summary}, open(os.path.join(out, "cost.json"), "w"), indent=1)
    off, on = summary["off"], summary["on"]
    # Each "on" round against the "off" round just before it: drift of the
    # machine (clocks, other tenants) cancels within a pair.
    pairs = [(b[0]["p50_us"] - a[0]["p50_us"]) / a[0]["p50_us"] * 100
             for a, b in zip(rows["off"], rows["on"])]
    summary["paired_median_pct"] = statistics.median(pairs)
    summary["paired_pct"] = pairs
    added = (on["ctx_pooled_p50_us"] - off["ctx_pooled_p50_us"]) / off["ctx_pooled_p50_us"] * 100
    added_min = (on["ctx_min_us"] - off["ctx_min_us"]) / off["ctx_min_us"] * 100
    check("tracer adds < 1 % to CUDA context creation", added < 1.0 and summary["paired_median_pct"] < 1.0,
          "pooled p50 %.0f us off, %.0f us on (%+.2f %%, %d+%d creations); paired median %+.2f %%; "
          "min %.0f / %.0f us (%+.2f %%)" % (
              off["ctx_pooled_p50_us"], on["ctx_pooled_p50_us"], added, off["ctx_samples"], on["ctx_samples"],
              summary["paired_median_pct"], off["ctx_min_us"], on["ctx_min_us"], added_min))
    return summary


def bpf_dump(build):
    p = tsgtrace_cmd(build, "--pin-dir", PIN, "--dump")
    return [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{") and '"kind":"tsg"' in x]


def phase_agree(stack, build, binp, pyexe, out):
    # The agent's own tracker consumes the event ring; the table is read
    # with a dump-only open, which consumes nothing.
    stack.start_agent(None, "tracer")
    be = stack.run("be", [binp + "/be_fill", "--duration-s", "120"], "t-be")
    lc = stack.run("lc", [binp + "/lc_micro", "--period-us", "2000", "--duration-s", "120"], "t-lc")
    torch_p = stack.run("lc", [pyexe, proof.HERE + "/lc_torch.py", "--mode", "graph", "--period-ms", "5",
                               "--duration-s", "120"], "t-torch")
    pids = [be.pid, lc.pid, torch_p.pid]
    wait_until(lambda: all(len(tsgs_of(stack.ctl("list"), p)) >= 4 for p in pids), 120)
    time.sleep(2)
    lst = stack.ctl("list")
    dump = bpf_dump(build)
    json.dump({"list": lst, "bpf": dump}, open(os.path.join(out, "agree.json"), "w"), indent=1)
    tr = lst.get("agent", {}).get("tracker", {})
    check("agent runs its tracker", tr.get("mode") in ("tracepoint", "tp_btf"), json.dumps(tr)[:200])
    for pid, name in zip(pids, ("be_fill", "lc_micro", "PyTorch ResNet-50")):
        a = sorted((int(t["client"], 16), int(t["tsg"], 16), t["engine"], t["gpu"]) for t in tsgs_of(lst, pid))
        b = sorted((int(t["client"], 16), int(t["tsg"], 16), t["engineType"], t["deviceId"])
                   for t in dump if t["tgid"] == pid)
        both = all(sorted(t.get("sources", [])) == ["bpf", "preempt"] for t in tsgs_of(lst, pid))
        check("%s: tracer table == preempt agent's table" % name, a == b and len(a) >= 4 and both,
              "%d TSGs listed (seen by both: %s), %d in the kernel table" % (len(a), both, len(b)))
        ts_a = {int(t["tsg"], 16): t["timeslice"]["applied"] for t in tsgs_of(lst, pid)}
        ts_b = {int(t["tsg"], 16): t["timesliceUs"] for t in dump if t["tgid"] == pid}
        check("%s: RM-accepted timeslices agree (tracer vs agent)" % name,
              all(ts_b.get(k) in (v, None) for k, v in ts_a.items()),
              "agent %s / tracer %s" % (sorted(ts_a.values(), key=str), sorted(ts_b.values(), key=str)))
    ctrs = tr.get("counters", {})
    drops = {k: v for k, v in ctrs.items() if k in ("ringbuf_full", "read_fault", "params_fault",
                                                  "inflight_full", "live_table_full") and v}
    check("tracer dropped nothing under CUDA + PyTorch", not drops and tr.get("refusedClaims", 0) == 0,
          "drops %s, refused claims %s" % (drops, tr.get("refusedClaims")))
    return [be, lc, torch_p]


def bare(stack, cmd, tag, nonroot=False):
    """A CUDA process WITHOUT the preempt agent; its class from the
    environment, as `gpuqos run` would have recorded it."""
    env = dict(os.environ, GPUQOS_RUN_CLASS="best-effort")
    env.pop("LD_PRELOAD", None)
    return subprocess.Popen(cmd, env=env, preexec_fn=as_nobody if nonroot else None, cwd=WORK,
                            stdout=open(os.path.join(stack.out, "wl-%s.log" % tag), "w"),
                            stderr=subprocess.STDOUT)


def phase_direct(stack, build, binp, out):
    """Processes with no preempt agent, found by the tracker and controlled
    through pidfd_getfd: timeslice and preempt read back, interleave as
    the RM accepted it (seen by the tracer), also for a non-root process."""
    stack.stop_agent()
    stack.start_agent(proof.HERE + "/proof-policy.json", "direct")
    lc = stack.run("lc", [binp + "/lc_micro", "--period-us", "2000", "--duration-s", "90"], "d-lc")
    be = bare(stack, [binp + "/be_fill", "--duration-s", "90"], "d-be")
    nr = bare(stack, [binp + "/lc_micro", "--period-us", "5000", "--duration-s", "90"], "d-nonroot",
              nonroot=True)
    procs = [lc, be, nr]

    def settled():
        lst = stack.ctl("list")
        for pid in (be.pid, nr.pid):
            ts = tsgs_of(lst, pid)
            gr = [t for t in ts if t.get("engine") == 1]
            if len(ts) < 4 or not gr or gr[0].get("state") != "converged":
                return None
        return lst
    lst = wait_until(settled, 60) or stack.ctl("list")
    dump = bpf_dump(build)
    json.dump({"list": lst, "bpf": dump}, open(os.path.join(out, "direct.json"), "w"), indent=1)
    for pid, name in ((be.pid, "bare BE be_fill (root)"), (nr.pid, "bare BE lc_micro (non-root)")):
        ts = tsgs_of(lst, pid)
        gr = [t for t in ts if t.get("engine") == 1]
        check("%s: found by the tracker alone (4 TSGs, sources bpf)" % name,
              len(ts) == 4 and all(t.get("sources") == ["bpf"] for t in ts),
              "engines %s" % sorted(t.get("engine") for t in ts))
        if not gr:
            continue
        g = gr[0]
        want = g["timeslice"]["desired"]
        res = stack.ctl("get-timeslice", str(pid))
        got = {r["tsg"]: r for r in res.get("results", [])}
        r = got.get(g["tsg"], {})
        check("%s: timeslice set through the direct path and read back" % name,
              r.get("value") == want and r.get("path") == "direct" and want != 2048,
              "desired %s, GET_TIMESLICE %s via %s (%s us)" % (want, r.get("value"), r.get("path"), r.get("elapsedUs")))
        k = [t for t in dump if t["tgid"] == pid and int(t["tsg"], 16) == int(g["tsg"], 16)]
        il = k[0].get("interleave") if k else None
        check("%s: interleave LOW accepted by the RM through the direct path" % name,
              il == 0 and g.get("interleave", {}).get("applied") == 0,
              "kernel table %s, agent %s, last %s %s" % (il, g.get("interleave"), g.get("lastOp"), g.get("lastStatusName")))
        pr = stack.ctl("preempt", str(pid))
        rs = pr.get("results", [])
        check("%s: PREEMPT through the direct path" % name,
              bool(rs) and all(x.get("rmStatus") == 0 and x.get("path") == "direct" for x in rs),
              "; ".join("%s %s via %s %sus" % (x.get("tsg"), x.get("rmStatusName"), x.get("path"), x.get("elapsedUs")) for x in rs))
    return procs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    if not os.path.exists("/sys/kernel/tracing/events") and not os.path.exists("/sys/kernel/debug/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "tracefs", "/sys/kernel/tracing"])
    binp = proof.prepare(a.build, a.bin, a.out)
    stack = Stack(a.build, a.out)
    procs = []
    summary = None
    try:
        summary = phase_cost(a.build, binp, a.out)
        if os.environ.get("TRACER_ONLY_COST"):
            raise SystemExit(report(summary))
        procs = phase_agree(stack, a.build, binp, a.python, a.out)
        for p in procs:
            p.kill()
        procs += phase_direct(stack, a.build, binp, a.out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        stack.stop_agent()
        tsgtrace_cmd(a.build, "--pin-dir", PIN, "--unpin")
    return report(summary)


def report(summary):
    rc = proof.print_results()
    if summary:
        print("\n| tracer | context creation pooled p50 us | min us | null control p50 ns | client alloc+free p50 ns |")
        print("| --- | --- | --- | --- | --- |")
        for mode in ("off", "on"):
            s = summary[mode]
            print("| %s | %.0f | %.0f | %.0f | %.0f |" % (mode, s["ctx_pooled_p50_us"], s["ctx_min_us"],
                                                         s["null_control_p50_ns"], s["client_alloc_free_p50_ns"]))
        print("paired round differences %%: %s" % ", ".join("%+.1f" % x for x in summary["paired_pct"]))
    return rc


if __name__ == "__main__":
    sys.exit(main())

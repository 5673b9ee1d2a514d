#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""mem_cap_check.py --lib SO --probe BIN --out DIR - the preempt library's
video-memory budget on a real GPU (docs/protocol.md, "Memory").

A minimal node agent on a socket of its own answers each HELLO with an
empty POLICY and a MEMORY of --budget-gib for device instance 0 (with the
FB-info rewrite), and records every MEM_USAGE. Then, each with the library
preloaded:
  * mem_probe --fill: 1 GiB cudaMallocs until one fails; the fill must stop
    at the budget with cudaErrorMemoryAllocation, the process go on (a
    1 MiB allocation after it, its frees, exit 0), and cudaMemGetInfo show
    the budget as the total;
  * mem_probe_torch.py --fill: PyTorch's allocator refused at the budget
    (OutOfMemoryError), mem_get_info's total the budget;
  * mem_probe --loop N with no library, the library and no agent, and the
    library under a budget: the cost of the accounting on an
    allocation-heavy loop.
Prints one line per check and a table; writes DIR/mem-cap.json.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from gpuqos_test import gq_proto  # noqa: E402
from gpuqos_test.mini_agent import MiniAgent  # noqa: E402


def run(cmd, env, timeout=240):
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


def field(out, key):
    for line in out.splitlines():
        if line.startswith(key + " "):
            return line.split()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-gib", type=float, default=8.0)
    ap.add_argument("--loop", type=int, default=20000)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    budget = int(a.budget_gib * (1 << 30))
    sock = "/tmp/gpuqos-memcap-%d.sock" % os.getpid()
    agent = MiniAgent(sock, budget)
    base = dict(os.environ)
    capped = dict(base, LD_PRELOAD=a.lib, GPUQOS_SOCKET=sock, GPUQOS_LOG="info")
    res, checks = {"budget": budget}, []

    def check(name, ok, detail):
        checks.append((name, bool(ok), detail))
        print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)

    rc, out, _ = run([a.probe, "--fill"], capped)
    res["probe_fill"] = out[-4000:]
    fill, mi, after = field(out, "fill"), field(out, "fill_meminfo"), field(out, "after_fill")
    first = field(out, "meminfo")
    gib = int(fill[1]) if fill else -1
    check("cudaMalloc refused at the budget", fill and fill[-1] == "cudaErrorMemoryAllocation"
          and gib <= a.budget_gib, "%s GiB then %s" % (gib, fill[-1] if fill else "?"))
    check("the process goes on", rc == 0 and after is not None, "exit %d, after: %s" % (rc, after))
    check("cudaMemGetInfo shows the budget", first and int(first[5]) <= budget,
          "total %s free %s (budget %d)" % (first[5] if first else "?", first[3] if first else "?",
                                           budget))
    res["meminfo"] = first
    res["fill_meminfo"] = mi
    usage = agent.of(gq_proto.MEM_USAGE)
    check("MEM_USAGE reports the refusal", [u for u in usage if u["refused"] > 0],
          "%d reports, last %r" % (len(usage), usage[-1] if usage else None))
    rc, out, _ = run([sys.executable, os.path.join(HERE, "mem_probe_torch.py"), "--fill"], capped)
    res["torch_fill"] = out[-4000:]
    fill, mi = field(out, "fill"), field(out, "meminfo")
    check("PyTorch refused at the budget", rc == 0 and fill and int(fill[1]) <= a.budget_gib,
          "exit %d, %s" % (rc, " ".join(fill) if fill else out[-300:]))
    check("torch.cuda.mem_get_info shows the budget", mi and int(mi[4]) <= budget,
          "total %s" % (mi[4] if mi else "?"))
    loops = {}
    for name, env in (("none", base), ("library, no agent", dict(base, LD_PRELOAD=a.lib,
                                                                GPUQOS_SOCKET="/nonexistent")),
                      ("library, budget", capped)):
        best = None
        for _ in range(3):
            rc, out, _ = run([a.probe, "--loop", str(a.loop)], env)
            f = field(out, "loop")
            if rc == 0 and f:
                v = float(f[3])
                best = v if best is None else min(best, v)
        loops[name] = best
    res["loop_ns_per_pair"] = loops
    print("| loop (cudaMalloc 2 MiB + cudaFree) | ns per pair, best of 3 |")
    print("| --- | --- |")
    for k, v in loops.items():
        print("| %s | %s |" % (k, "%.0f" % v if v else "failed"))
    if loops.get("none") and loops.get("library, budget"):
        print("cost under a budget: %+.2f %%" % (100.0 * (loops["library, budget"] / loops["none"] - 1)))
    res["checks"] = checks
    res["usage"] = agent.of(gq_proto.MEM_USAGE)[-20:]
    with open(os.path.join(a.out, "mem-cap.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())

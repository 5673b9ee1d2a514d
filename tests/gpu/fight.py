#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""fight.py - a BE that keeps setting its own GR TSG's timeslice back to
2048 us (rm_probe.so after the preempt agent in LD_PRELOAD, so its SETs
reach the RM unseen by the preempt agent: GQP_TIMESLICE_US,
GQP_REAPPLY_MS) beside a micro LC, under the node agent's default policy:
how often the agent sets it again, second by second (docs/policy.md, "A
process that sets its timeslice back"). With --what interleave the BE sets
its interleave level to HIGH instead (GQP_INTERLEAVE=2) under a policy
whose BE level is LOW. The eBPF tracker must run (as root) for the agent
to see those SETs.

Usage: fight.py --bin DIR --build DIR --out DIR [--seconds 20] [--every-ms 50]
                [--what timeslice|interleave]
(run from the repository root on a GPU machine; tests/gpu/README.md).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import soak  # beside it: its parser and gpuqosctl --json
import suite  # beside it: the suite's runner (commands, agent, environment)


def main():
    ap = soak.gpu_args(__doc__)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--every-ms", type=int, default=50)
    ap.add_argument("--what", choices=("timeslice", "interleave"), default="timeslice")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    r = suite.Runner(argparse.Namespace(bin=a.bin, build=a.build, out=a.out, duration_s=0,
                                        clocks=False))
    il = a.what == "interleave"
    if not r.ensure_agent("interleave_be" if il else "default"):
        return 1
    env = dict(os.environ, **r.gq_env())
    run = [os.path.join(a.build, "agent/cli/gpuqos"), "run", "--class"]
    total = a.seconds + 15
    be_env = dict(env, LD_PRELOAD=os.path.join(a.bin, "rm_probe.so"),
                  GQP_REAPPLY_MS=str(a.every_ms), GQP_SETTLE_MS="300",
                  **({"GQP_INTERLEAVE": "2"} if il else {"GQP_TIMESLICE_US": "2048"}))
    procs = []
    for tag, cmd, e in (("be", run + ["be", "--"] + r.be_cmd("fill", total, ()), be_env),
                        ("lc", run + ["lc", "--"] + r.lc_cmd("micro", total), env)):
        procs.append(subprocess.Popen(cmd, env=e, stdout=open(os.path.join(a.out, tag + ".out"), "w"),
                                      stderr=open(os.path.join(a.out, tag + ".err"), "w")))
    be_pid = procs[0].pid
    rows = []
    t0 = time.monotonic()
    try:
        for s in range(a.seconds + 1):
            time.sleep(max(0.0, t0 + s - time.monotonic()))
            j = soak.ctl_json(r, "list") or {}
            g = [t for t in j.get("tsgs", []) if t.get("pid") == be_pid and t.get("engineName") == "GR0"]
            c = (j.get("agent") or {}).get("counters") or {}
            ts = (g[0].get(a.what) or {}) if g else {}
            rows.append({"s": s, "state": g[0].get("state") if g else None,
                         "desired": ts.get("desired"), "applied": ts.get("applied"),
                         "reverts": ts.get("reverts"), "wait_ms": ts.get("revertWaitMs"),
                         "commands": c.get("commands"), "reverts_all": c.get("reverts"),
                         "error": g[0].get("error") if g else None})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        r.close()
    with open(os.path.join(a.out, "fight.json"), "w") as f:
        json.dump({"environment": suite.environment(), "every_ms": a.every_ms, "what": a.what,
                   "rows": rows}, f,
                  indent=1)
    try:
        with open(os.path.join(a.out, "be.err"), errors="replace") as f:
            probe = [ln.strip() for ln in f if ln.startswith("rm_probe:")]
    except OSError:
        probe = []
    unit = "" if il else " us"
    print(f"\n{a.what}:\n| s | state | desired / applied{unit} | reverts | next SET in ms | agent's commands |")
    print("| --- | --- | --- | --- | --- | --- |")
    for x in rows:
        print(f"| {x['s']} | {x['state']} | {x['desired']} / {x['applied']} | {x['reverts']} | "
              f"{x['wait_ms']} | {x['commands']} |")
    print("\n" + "\n".join(probe[-4:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

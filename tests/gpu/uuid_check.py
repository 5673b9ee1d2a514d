#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""uuid_check.py - TSG -> GPU mapping on a machine with two or more GPUs.

Runs the node agent and three CUDA processes under `gpuqos run`: a BE on
GPU 0, an LC and a BE on GPU 1 (CUDA_VISIBLE_DEVICES, PCI bus order). Checks
that every TSG's gpuUuid is the UUID nvidia-smi reports for the GPU the
process used, that the agent's GPU table matches nvidia-smi, and that the
policy groups per GPU: the LC on GPU 1 shortens the BE on GPU 1 only.
Usage: uuid_check.py --build BUILD --bin CUDA_BIN --out OUT
"""
import argparse
import json
import os
import subprocess
import sys

import proof  # beside it
from proof import Stack, check, tsgs_of, wait_until


def smi_gpus():
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout
    rows = [[x.strip() for x in line.split(",")] for line in out.splitlines() if line.strip()]
    return [{"index": int(r[0]), "uuid": r[1], "bus": r[2]} for r in rows]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    gpus = smi_gpus()
    print("nvidia-smi:", json.dumps(gpus))
    if len(gpus) < 2:
        print("needs two GPUs")
        return 2
    binp = proof.prepare(a.build, a.bin, a.out)
    stack = Stack(a.build, a.out)
    stack.env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    procs = []
    try:
        stack.start_agent(None, "uuid")
        runs = [("be", "0", "be0"), ("be", "1", "be1"), ("lc", "1", "lc1")]
        for cls, dev, tag in runs:
            stack.env["CUDA_VISIBLE_DEVICES"] = dev
            procs.append(stack.run(cls, [binp + "/lc_micro", "--period-us", "5000", "--duration-s", "60"], tag))
        pids = [p.pid for p in procs]

        def ready():
            lst = stack.ctl("list")
            ok = all(len(tsgs_of(lst, p)) == 4 and all(t.get("state") in ("converged", "unmanaged")
                                                       for t in tsgs_of(lst, p)) for p in pids)
            return lst if ok else None
        lst = wait_until(ready, 60) or stack.ctl("list")
        json.dump({"smi": gpus, "list": lst}, open(os.path.join(a.out, "uuid.json"), "w"), indent=1)
        table = {g.get("deviceInstance"): g for g in lst.get("agent", {}).get("gpus", [])}
        smi_uuids = sorted(g["uuid"] for g in gpus)
        check("agent's GPU table holds nvidia-smi's UUIDs",
              sorted(g.get("uuid") for g in table.values()) == smi_uuids,
              "agent %s" % json.dumps(list(table.values()))[:300])
        for (cls, dev, tag), pid in zip(runs, pids):
            ts = tsgs_of(lst, pid)
            want = gpus[int(dev)]["uuid"]
            got = sorted({t.get("gpuUuid") for t in ts})
            check("%s (CUDA_VISIBLE_DEVICES=%s): every TSG's gpuUuid is that GPU's" % (tag, dev),
                  len(ts) == 4 and got == [want],
                  "device instance %s -> %s, nvidia-smi %s" % (sorted({t.get("gpu") for t in ts}), got, want))
        gr = {tag: [t for t in tsgs_of(lst, pid) if t.get("engine") == 1] for (_, _, tag), pid in zip(runs, pids)}
        ts = {k: (v[0]["timeslice"]["applied"] if v else None) for k, v in gr.items()}
        check("policy per GPU: LC on GPU 1 shortens the BE on GPU 1, not the BE on GPU 0",
              ts.get("be1") == 50 and ts.get("be0") in (None, 2048) and ts.get("lc1") == 100000,
              "GR timeslices applied: %s" % ts)
        res = stack.ctl("get-timeslice", str(pids[1]))
        vals = [r.get("value") for r in res.get("results", []) if r.get("rmStatus") == 0]
        check("BE on GPU 1 reads back 50 us from the RM", 50 in vals, "read back %s" % vals)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        stack.stop_agent()
    return proof.print_results()


if __name__ == "__main__":
    sys.exit(main())

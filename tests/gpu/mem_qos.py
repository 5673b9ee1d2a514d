#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""mem_qos.py --build DIR --out DIR - video-memory QoS of the real node
agent on a real GPU (docs/policy.md, "Memory").

The bundle's agent runs standalone with
  "memory": {"lcReserve": RESERVE, "defaults": {"best-effort": BE_DEFAULT}}
and every process below runs under `gpuqos run --class ...`:
  1. a serving LC (mem_worker.py --serve) holding --lc-gib, which later
     grows by --grow-gib;
  2. a BE that allocates 1 GiB at a time until it is refused
     (mem_worker.py --fill): it must stop at GPU - reserve - what the LCs
     hold, see that as its total (torch.cuda.mem_get_info), and keep
     working;
  3. while the BE holds all it got, a new LC starts and allocates
     --new-lc-gib: its start and allocations must succeed, as must the
     first LC's growth;
  4. a training BE (be_train.py) alone, without gpuqos and then under a
     --train-budget budget: steps per second side by side.
Prints PASS/FAIL per check and a table; writes DIR/mem-qos.json with every
worker's events and the agent's `gpuqosctl list --json` at each step.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 1 << 30


class Worker:
    def __init__(self, name, cmd, env, out):
        self.name = name
        self.log = open(os.path.join(out, f"{name}.out"), "w+")
        self.p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                  stderr=open(os.path.join(out, f"{name}.err"), "w"), text=True)
        self.events = []

    def wait_event(self, names, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            line = self.p.stdout.readline()
            if not line:
                break
            self.log.write(line)
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            self.events.append(ev)
            if ev.get("ev") in names:
                return ev
        return None

    def finish(self, timeout):
        ev = self.wait_event(("end",), timeout)
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return ev


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reserve-gib", type=int, default=16)
    ap.add_argument("--be-default-gib", type=int, default=200)
    ap.add_argument("--lc-gib", type=int, default=4)
    ap.add_argument("--grow-gib", type=int, default=2)
    ap.add_argument("--new-lc-gib", type=int, default=10)
    ap.add_argument("--train-budget-gib", type=int, default=16)
    ap.add_argument("--train-s", type=float, default=10.0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="gq-memqos-")
    os.chmod(tmp, 0o755)
    genv = {"GPUQOS_SOCKET": os.path.join(tmp, "agent.sock"),
            "GPUQOS_CTL_SOCKET": os.path.join(tmp, "ctl.sock"),
            "GPUQOS_PREEMPT_LIB": os.path.join(build, "agent/preempt/libgpuqos-preempt.so")}
    lenv = dict(os.environ, **genv, LD_LIBRARY_PATH=os.path.join(build, "lib"))
    res = {"snapshots": {}, "workers": {}}
    checks = []

    def check(name, ok, detail):
        checks.append((name, bool(ok), detail))
        print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)

    def ctl_list(tag):
        r = subprocess.run([os.path.join(build, "agent/cli/gpuqosctl"), "--json", "list"],
                           env=lenv, capture_output=True, text=True, timeout=10)
        try:
            j = json.loads(r.stdout)
        except ValueError:
            j = {"error": r.stdout[-500:] + r.stderr[-500:]}
        res["snapshots"][tag] = j
        return j

    def proc_mem(j, pid):
        for p in j.get("processes", []) if isinstance(j, dict) else []:
            if p.get("pid") == pid:
                m = p.get("memory") or []
                return m[0] if m else None
        return None

    def start_agent(be_default_gib, tag):
        pol = {"version": 1, "defaultClass": "unmanaged", "trustRunClass": True,
               "memory": {"lcReserve": f"{a.reserve_gib}Gi",
                          "defaults": {"best-effort": f"{be_default_gib}Gi"}}}
        pfile = os.path.join(tmp, f"policy-{tag}.json")
        with open(pfile, "w") as f:
            json.dump(pol, f)
        log = open(os.path.join(a.out, f"agent-{tag}.log"), "w")
        p = subprocess.Popen([os.path.join(build, "agent/gpuqos-agent"), "--standalone",
                              "--config", pfile, "--state-dir", os.path.join(tmp, "state-" + tag),
                              "--log-level", "info"], env=lenv, stdout=log, stderr=log)
        for _ in range(200):
            if os.path.exists(genv["GPUQOS_SOCKET"]):
                break
            time.sleep(0.05)
        return p

    def stop(p):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for s in ("GPUQOS_SOCKET", "GPUQOS_CTL_SOCKET"):
            try:
                os.unlink(genv[s])
            except OSError:
                pass

    def run_as(cls, args):
        return [os.path.join(build, "agent/cli/gpuqos"), "run", "--class", cls, "--",
                sys.executable] + args

    worker = os.path.join(HERE, "mem_worker.py")
    agent = start_agent(a.be_default_gib, "reserve")
    try:
        j = ctl_list("start")
        gpus = j.get("agent", {}).get("gpus", []) if isinstance(j, dict) else []
        total = gpus[0].get("memoryBytes") if gpus else None
        res["gpu_memory_bytes"] = total
        check("the agent knows the GPU's memory", total, "memoryBytes %s, gpus %s" % (total, gpus))
        lc = Worker("lc1", run_as("latency-critical", [worker, "--hold-gib", str(a.lc_gib),
                                                       "--serve", "--duration-s", "60",
                                                       "--grow-gib", str(a.grow_gib),
                                                       "--grow-at-s", "40"]), lenv, a.out)
        ev = lc.wait_event(("held", "hold_refused"), 120)
        check("the serving LC holds its memory", ev and ev["ev"] == "held", str(ev))
        time.sleep(1.0)  # its MEM_USAGE reaches the agent (at most every 100 ms)
        ctl_list("lc1")
        be = Worker("be_fill", run_as("best-effort", [worker, "--fill", "--duration-s", "40"]),
                    lenv, a.out)
        ev = be.wait_event(("filled", "hold_refused"), 180)
        j = ctl_list("be_filled")
        mem = proc_mem(j, be.p.pid) or {}
        res["be_filled"] = ev
        # What the BE may hold: GPU - reserve - the LCs' holdings (their
        # contexts included, as the agent counts them), read back from the
        # agent's own view for the exact figure.
        lim = mem.get("limitBytes") or mem.get("budgetBytes")
        got = ev.get("gib") if ev else None
        check("the BE is refused at its part", ev and ev.get("error") == "OutOfMemoryError"
              and total and got is not None
              and got * GIB <= total - a.reserve_gib * GIB - a.lc_gib * GIB,
              "filled %s GiB then %s; GPU %.1f GiB, reserve %d, LC %d; the agent's view %s"
              % (got, ev.get("error") if ev else "?", (total or 0) / GIB, a.reserve_gib,
                 a.lc_gib, mem))
        check("the capped BE's total is its part", ev and lim and ev.get("total") <= lim + GIB,
              "mem_get_info total %s, the agent's limit %s" % (ev.get("total") if ev else "?", lim))
        check("the BE keeps working after the refusal", ev and ev.get("works_after"), str(ev))
        lc2 = Worker("lc2", run_as("latency-critical", [worker, "--hold-gib",
                                                        str(a.new_lc_gib), "--duration-s", "8"]),
                     lenv, a.out)
        ev2 = lc2.wait_event(("held", "hold_refused"), 120)
        check("a new LC starts and allocates beside the full BE", ev2 and ev2["ev"] == "held",
              str(ev2))
        ctl_list("lc2")
        smi = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True)
        res["nvidia_smi_full"] = smi.stdout.strip()
        end2 = lc2.finish(60)
        ev3 = lc.wait_event(("grew", "grow_refused"), 90)
        check("the first LC grows beside the full BE", ev3 and ev3["ev"] == "grew", str(ev3))
        ctl_list("lc1_grew")
        endb = be.finish(60)
        endl = lc.finish(60)
        res["workers"] = {"lc1": lc.events, "be_fill": be.events, "lc2": lc2.events}
        check("every worker exited 0", all(w.p.returncode == 0 for w in (lc, be, lc2)),
              "lc1 %s be %s lc2 %s" % (lc.p.returncode, be.p.returncode, lc2.p.returncode))
        res["lc1_serving"] = endl
        res["be_end"], res["lc2_end"] = endb, end2
    finally:
        stop(agent)
    # Training: plain, then under a budget.
    train = os.path.join(HERE, "be_train.py")
    rates = {}
    for tag in ("plain", "budget"):
        cmd = [sys.executable, train, "--duration-s", str(a.train_s)]
        env = dict(os.environ)
        ag = None
        if tag == "budget":
            ag = start_agent(a.train_budget_gib, "train")
            cmd = run_as("best-effort", [train, "--duration-s", str(a.train_s)])
            env = lenv
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        if ag:
            res["snapshots"]["train"] = None
            stop(ag)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        r = json.loads(line[-1]) if line else {"error": p.stdout[-300:] + p.stderr[-300:]}
        rates[tag] = r
    res["train"] = rates
    sp = rates.get("plain", {}).get("steps_per_s")
    sb = rates.get("budget", {}).get("steps_per_s")
    check("a training BE under a budget trains", sp and sb, "plain %s, budget %s" % (sp, sb))
    print()
    print("| what | result |")
    print("| --- | --- |")
    for name, ok, detail in checks:
        print("| %s | %s: %s |" % (name, "PASS" if ok else "FAIL", detail[:160]))
    if sp and sb:
        print("| training steps/s, plain / %d GiB budget | %.2f / %.2f (%+.1f %%) |"
              % (a.train_budget_gib, sp, sb, 100.0 * (sb / sp - 1)))
    if res.get("lc1_serving"):
        e = res["lc1_serving"]
        print("| serving LC matmul p50 / p99 / max us | %s / %s / %s |"
              % (e.get("p50_us"), e.get("p99_us"), e.get("max_us")))
    res["checks"] = checks
    with open(os.path.join(a.out, "mem-qos.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())

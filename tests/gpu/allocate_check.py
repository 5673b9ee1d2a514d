#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""allocate_check.py - an Allocate answer on a real GPU, applied by hand.

The node agent installs the preempt agent into a versioned host directory
(`gpuqos-agent --install-preempt-lib`), the device plugin (shares mode)
discovers the GPUs from the RM and registers with the grpc-go test kubelet
(tests/plugin/kubelet, a static binary built on the development machine),
which asks Allocate for one LC share. The answer is applied the way a
container runtime would, without one: a private mount namespace with
exactly its read-only mounts, exactly its environment; the devices it
names are the host's own. A CUDA LC workload (`lc_micro`) runs in it beside
a BE (`be_fill` under `gpuqos run --class be`). Checks: the preempt agent
loaded from the versioned mount and registered, the agent set the LC's and
the BE's TSGs by the policy, and GET_TIMESLICE read back from the RM
equals what the agent says it applied.

Usage: allocate_check.py --build BUILD --bin CUDA_BIN --kubelet KUBELET --out OUTDIR
"""
import argparse
import json
import os
import subprocess
import sys
import time

import proof  # beside it

W = "/tmp/gpuqos-alloc"


def kubelet_cmd(k, **c):
    k.stdin.write(json.dumps(c) + "\n")
    k.stdin.flush()
    return json.loads(k.stdout.readline())


def by_hand(resp, argv, log):
    """Runs argv with exactly resp's mounts and environment."""
    script = ["set -e"]
    for m in resp["mounts"]:
        cp, hp = m["container_path"], m["host_path"]
        kind = "-d" if os.path.isdir(hp) else "-f"
        script.append("[ -e %s ] || { [ %s = -d ] && mkdir -p %s || { mkdir -p $(dirname %s); : > %s; }; }"
                      % (cp, kind, cp, cp, cp))
        script.append("mount --bind %s %s" % (hp, cp))
        if m.get("read_only"):
            script.append("mount -o remount,bind,ro %s" % cp)
    for d in resp["devices"]:
        script.append("[ -e %s ]" % d["container_path"])
    script.append('exec "$@"')
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    env.update(resp["envs"])
    env["GPUQOS_LOG"] = "debug"
    return subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", "\n".join(script),
                             "sh"] + argv, env=env, stdout=log, stderr=subprocess.STDOUT)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--kubelet", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    binp = proof.prepare(a.build, a.bin, a.out)
    subprocess.run(["rm", "-rf", W])
    for d in ("dp", "lib", "run"):
        os.makedirs(os.path.join(W, d))
    os.chmod(W + "/run", 0o755)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(a.build, "lib"))
    agent_bin = os.path.join(a.build, "agent/gpuqos-agent")
    r = subprocess.run([agent_bin, "--install-preempt-lib",
                        os.path.join(a.build, "agent/preempt/libgpuqos-preempt.so"),
                        "--preempt-lib-dir", W + "/lib"], env=env, capture_output=True, text=True)
    proof.check("agent installs the preempt agent into a versioned directory",
                r.returncode == 0 and os.path.islink(W + "/lib/current"),
                (r.stdout + r.stderr).strip()[-200:] + " current -> %s" % (
                    os.readlink(W + "/lib/current") if os.path.islink(W + "/lib/current") else None))
    stack = proof.Stack(a.build, a.out)
    # The node agent's socket where the plugin mounts it from.
    stack.env["GPUQOS_SOCKET"] = W + "/run/agent.sock"
    stack.tool_env["GPUQOS_SOCKET"] = W + "/run/agent.sock"
    log = open(os.path.join(a.out, "agent.log"), "w")
    agent = subprocess.Popen([agent_bin, "--standalone", "--socket", W + "/run/agent.sock",
                              "--ctl-socket", proof.WORK + "/ctl.sock", "--state-dir", W + "/state",
                              "--log-level", "debug"], env=stack.tool_env, stdout=log, stderr=subprocess.STDOUT)
    stack.agent = agent
    plog = open(os.path.join(a.out, "plugin.log"), "w")
    plugin = subprocess.Popen([os.path.join(a.build, "plugin/gpuqos-device-plugin"), "--mode", "shares",
                               "--device-plugin-dir", W + "/dp", "--node-agent-socket-dir", W + "/run",
                               "--preempt-lib-dir", W + "/lib", "--log-level", "debug"],
                              env=env, stdout=plog, stderr=subprocess.STDOUT)
    k = subprocess.Popen([a.kubelet, "-dir", W + "/dp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=open(os.path.join(a.out, "kubelet.log"), "w"), text=True)
    procs = [plugin, k]
    try:
        reg = kubelet_cmd(k, op="wait_register", n=2, timeout_ms=20000)
        proof.check("plugin registers its two resources", reg.get("ok"), json.dumps(reg)[:300])
        lc_ep = [g["endpoint"] for g in reg.get("regs", []) if g["resource"].endswith("-lc")]
        ws = kubelet_cmd(k, op="watch", endpoint=lc_ep[0]) if lc_ep else {}
        devs = ws.get("devices", [])
        proof.check("LC shares listed from the RM's GPUs", bool(devs), json.dumps(devs)[:300])
        alloc = kubelet_cmd(k, op="allocate", endpoint=lc_ep[0] if lc_ep else "",
                            containers=[[devs[0]["id"]]] if devs else [[]])
        json.dump(alloc, open(os.path.join(a.out, "allocate.json"), "w"), indent=1)
        proof.check("Allocate answers", alloc.get("ok"), json.dumps(alloc)[:600])
        resp = alloc["containers"][0]
        be = stack.run("be", [binp + "/be_fill", "--duration-s", "40"], "be")
        time.sleep(1)
        lc_env = dict(resp)
        lc_env["envs"] = dict(resp["envs"], GPUQOS_RUN_CLASS="lc")
        lc = by_hand(lc_env, [binp + "/lc_micro", "--period-us", "2000", "--duration-s", "30"],
                     open(os.path.join(a.out, "wl-lc.log"), "w"))
        procs += [be, lc]
        time.sleep(1)
        # The workload is the shell's exec'ed child: same pid.
        lst = proof.wait_until(
            lambda: (lambda l: l if proof.converged(l, [be.pid, lc.pid]) else None)(stack.ctl("list")), 40)
        lst = lst or stack.ctl("list")
        json.dump(lst, open(os.path.join(a.out, "list.json"), "w"), indent=1)
        maps = open("/proc/%d/maps" % lc.pid).read() if lc.poll() is None else ""
        proof.check("preempt agent mapped from the versioned mount in the LC",
                    "/libgpuqos-preempt.so" in maps and "current" not in maps,
                    repr(sorted({l.split()[-1] for l in maps.splitlines() if "preempt" in l})))
        lct = proof.tsgs_of(lst, lc.pid)
        # Without the tracker every TSG comes from the preempt agent's
        # report; with it, the preempt agent's source is listed beside "bpf".
        reported = [t for t in lct if any(s != "bpf" for s in t.get("sources", []))]
        proof.check("LC's preempt agent registered and reported its 4 TSGs",
                    len(lct) == 4 and len(reported) == 4,
                    "%d TSGs, sources %s, class %s" % (len(lct), sorted({s for t in lct for s in t.get("sources", [])}),
                                                        sorted({t.get("class") for t in lct})))
        proof.readback_matches(stack, lc.pid, "LC (Allocate environment): GET_TIMESLICE == desired")
        proof.readback_matches(stack, be.pid, "BE: GET_TIMESLICE == desired")
        lgr = [t for t in lct if t["engine"] == 1]
        bgr = [t for t in proof.tsgs_of(lst, be.pid) if t["engine"] == 1]
        if lgr and bgr:
            proof.check("policy: LC lengthened, BE shortened",
                        bgr[0]["timeslice"]["applied"] < 2048 < lgr[0]["timeslice"]["applied"],
                        "LC %s us, BE %s us" % (lgr[0]["timeslice"]["applied"], bgr[0]["timeslice"]["applied"]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        stack.stop_agent()
    return proof.print_results()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench_dense_node.py - what the node agent in Kubernetes mode costs on a
dense node: N pods of its own node in the test API server (a few with GPU
processes, the rest idle), optionally M pods of other nodes served anyway
by a server that ignores the fieldSelector. Once the cache is synced and
the GPU pods' state annotations converged, it measures for --seconds the
agent's CPU (utime+stime from /proc/PID/stat, as % of one core), its own
publishing counters and RSS, then the wall time of --calls runs of
`gpuqosctl status` (the agent itself; the answer is the `list` answer).
The last thing printed is a markdown table: what, value, goal.

A benchmark (ctest label `bench`): it prints numbers and asserts no
timing. What it asserts cannot depend on speed: every pod of the node is
cached and no pod of another node is, the GPU pods' state annotations
converge with their class, the idle pods get no gpuqos.io/ annotation, a
publishing pass visits no idle pod, and every `gpuqosctl status` answers
with this agent's pid.

Usage: bench_dense_node.py --build BUILD [--pods 500] [--foreign 2000]
       [--gpu-pods 4] [--lc-every 2] [--seconds 10] [--calls 50] [--log-level info]
       [--agent agent/gpuqos-agent]
(needs root and /dev/fuse; exit 77 = skipped, with a reason)
"""
import argparse
import math
import os
import signal
import subprocess
import sys
import time

from gpuqos_test import SKIP, Failure, run_main, wait_for
from gpuqos_test import check as expect
from gpuqos_test.kube import NODE, NS, KubeNode, converged

CLK_TCK = os.sysconf("SC_CLK_TCK")
CLASSES = ("latency-critical", "best-effort")
GRACE_S = 3  # AGENT_RESTART_GRACE_MS (agent/core/core.h), in whole seconds


def cpu_seconds(pid):
    """utime + stime of pid, in seconds (fields 14 and 15 of its stat,
    counted after the parenthesised command name)."""
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise Failure("no %s in /proc/%d/status" % (key, pid))


def pct(sorted_xs, p):
    """Nearest-rank percentile."""
    return sorted_xs[max(0, math.ceil(p / 100.0 * len(sorted_xs)) - 1)]


def idle_pod(name, node, i):
    """A running pod with one container and nothing on the GPU."""
    return {"metadata": {"name": name, "namespace": NS, "uid": "%s-%08d" % (name[:5], i),
                         "annotations": {"example.com/team": "t%d" % (i % 7)}},
            "spec": {"nodeName": node, "containers": [{"name": "main"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "main", "containerID": "containerd://%064x" % (i + 1)}]}}


def cls_of(a, i):
    """GPU pod i's class (an index of CLASSES): one in --lc-every is LC."""
    return 0 if i % a.lc_every == 0 else 1


def setup(node, a):
    """The pods, the agent and the GPU workloads; returns the GPU pods'
    names once every pod is cached and their state converged."""
    if a.foreign:
        with node.st.lock:
            node.st.ignore_field_selector = True
        for i in range(a.foreign):
            node.st.upsert(idle_pod("other-%d" % i, "node-%d" % (2 + i % 50), 100000 + i))
    gpu = ["gpu-%d" % i for i in range(a.gpu_pods)]
    for i, name in enumerate(gpu):
        node.add_pod(name, CLASSES[cls_of(a, i)])
    for i in range(a.pods - a.gpu_pods):
        node.st.upsert(idle_pod("idle-%d" % i, NODE, i))
    node.start_kube_agent(extra=["--log-level", a.log_level], agent=a.agent)
    # Held well past the measurement; close() kills them.
    hold = str(a.seconds * 4 + 300)
    for i, name in enumerate(gpu):
        node.in_pod(name, ("lc", "be")[cls_of(a, i)], args=("--hold", hold))
    wait_for(lambda: node.kube_view()["synced"] and node.kube_view()["pods"] >= a.pods,
             timeout=60, what="every pod of the node cached")
    if gpu:
        wait_for(lambda: converged(node, *gpu), timeout=60, what="the GPU pods' state converged")
    # The first pass after the agent's restart grace visits every cached
    # pod (annotations a restart left behind may go then): steady state
    # starts with the pass after the grace.
    wait_for(lambda: node.ctl("list")["agent"]["uptimeS"] > GRACE_S, timeout=60,
             step=0.2, what="the agent's restart grace over")
    p0 = node.kube_view()["publishPasses"]
    wait_for(lambda: node.kube_view()["publishPasses"] > p0, timeout=60,
             what="a publishing pass after the grace")
    return gpu


def check_behaviour(node, a, gpu):
    view = node.kube_view()
    expect(view["synced"] and view["pods"] == a.pods,
           "the cache holds the node's %d pods and no other: %r" % (a.pods, view["pods"]))
    for i, name in enumerate(gpu):
        ann = node.ann(name)
        expect(ann.get("gpuqos.io/class") == CLASSES[cls_of(a, i)], "%s's class: %r" % (name, ann))
    with node.st.lock:
        marked = [k[1] for k, p in node.st.pods.items() if k[1] not in gpu and any(
            x.startswith("gpuqos.io/") for x in p["metadata"].get("annotations", {}))]
    expect(not marked, "no idle or foreign pod annotated: %r" % marked[:5])
    if a.foreign:
        with open(node.agent_logs[-1]) as f:
            expect("ignoring pods of other nodes" in f.read(),
                   "the agent saw the other nodes' pods (the server ignored the fieldSelector)")


def measure_loop(node, a):
    pid = node.agent.pid
    n0 = node.ctl("status")["agent"]["counters"]
    v0, c0, t0 = node.kube_view(), cpu_seconds(pid), time.monotonic()
    time.sleep(a.seconds)
    v1, c1, t1 = node.kube_view(), cpu_seconds(pid), time.monotonic()
    n1 = node.ctl("status")["agent"]["counters"]
    passes = v1["publishPasses"] - v0["publishPasses"]
    visited = v1["publishedPods"] - v0["publishedPods"]
    # What kube_publish proves pass by pass, over the whole window here:
    # a pass visits the GPU pods, never the idle ones.
    expect(visited <= a.gpu_pods * passes,
           "%d pods visited in %d passes: idle pods published" % (visited, passes))
    return {"cpu": 100.0 * (c1 - c0) / (t1 - t0), "passes": passes, "window": t1 - t0,
            "visited": visited, "patches": v1["stats"]["patchesSent"] - v0["stats"]["patchesSent"],
            "reconciles": n1["reconcilePasses"] - n0["reconcilePasses"],
            "commands": n1["commands"] - n0["commands"],
            "rss": status_kib(pid, "VmRSS"), "hwm": status_kib(pid, "VmHWM")}


def measure_ctl(node, a, what):
    """--calls runs of `gpuqosctl status` (what "status"), or of
    `gpuqosctl --json list` (the whole view: every TSG and process)."""
    pid = node.agent.pid
    ctl = node.bin("agent/cli/gpuqosctl")
    cmd = [ctl, "status"] if what == "status" else [ctl, "--json", "list"]
    lat = []
    c0 = cpu_seconds(pid)
    for _ in range(a.calls):
        t = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, env=node.env, timeout=20)
        lat.append(1000.0 * (time.monotonic() - t))
        shown = ("pid      %d\n" % pid) if what == "status" else ('"pid":%d,' % pid)
        expect(p.returncode == 0 and shown in p.stdout,
               "gpuqosctl %s: exit %d, %r %r" % (what, p.returncode, p.stdout[:300], p.stderr))
    cpu_ms = 1000.0 * (cpu_seconds(pid) - c0) / a.calls
    lat.sort()
    return {"p50": pct(lat, 50), "p99": pct(lat, 99), "max": lat[-1], "cpu_ms": cpu_ms}


def report(a, loop, ctl, lst, load):
    per_pass = loop["visited"] / loop["passes"] if loop["passes"] else 0.0
    print("load average before / after: %s / %s" % load)
    print("measured %.1f s: %d publishing passes, %d pods visited, %d PATCHes"
          % (loop["window"], loop["passes"], loop["visited"], loop["patches"]))
    print()
    print("| what | value | goal |")
    print("|---|---|---|")
    print("| pods of this node cached | %d (%d with GPU processes) | all |" % (a.pods, a.gpu_pods))
    print("| pods of other nodes served / cached | %d / 0 | none cached |" % a.foreign)
    print("| agent CPU, steady state (%.0f s) | %.2f %% of a core | < 10 %% |"
          % (loop["window"], loop["cpu"]))
    print("| publishing passes | %.1f /s, %.2f pods a pass | GPU pods only (%d) |"
          % (loop["passes"] / loop["window"], per_pass, a.gpu_pods))
    print("| reconcile passes, controls sent | %.1f /s, %.1f /s | - |"
          % (loop["reconciles"] / loop["window"], loop["commands"] / loop["window"]))
    print("| `gpuqosctl status` wall time, %d calls | p50 %.1f ms, p99 %.1f ms, max %.1f ms | < 50 ms |"
          % (a.calls, ctl["p50"], ctl["p99"], ctl["max"]))
    print("| agent CPU per `status` call | %.2f ms | - |" % ctl["cpu_ms"])
    print("| `gpuqosctl --json list` wall time, %d calls | p50 %.1f ms, p99 %.1f ms, max %.1f ms | - |"
          % (a.calls, lst["p50"], lst["p99"], lst["max"]))
    print("| agent CPU per `list` call | %.2f ms | - |" % lst["cpu_ms"])
    print("| agent RSS (peak) | %.1f MiB (%.1f MiB) | - |" % (loop["rss"] / 1024.0, loop["hwm"] / 1024.0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--pods", type=int, default=500, help="pods of this node (default 500)")
    ap.add_argument("--foreign", type=int, default=0,
                    help="pods of other nodes, served although the agent asks for its own (default 0)")
    ap.add_argument("--gpu-pods", type=int, default=4, help="of --pods, those running a GPU process")
    ap.add_argument("--seconds", type=float, default=10.0, help="measurement window (default 10)")
    ap.add_argument("--calls", type=int, default=50, help="gpuqosctl status calls (default 50)")
    ap.add_argument("--lc-every", type=int, default=2,
                    help="one GPU pod in this many is LC, the rest BE (default 2)")
    ap.add_argument("--agent", default="agent/gpuqos-agent",
                    help="the agent binary below BUILD (agent/gpuqos-agent-plain: no sanitizers)")
    ap.add_argument("--log-level", default="info", help="the agent's (default info, the chart's)")
    a = ap.parse_args()
    if not 0 <= a.gpu_pods <= a.pods or a.calls < 1 or a.lc_every < 1 or a.seconds <= 0 or a.foreign < 0:
        ap.error("need 0 <= --gpu-pods <= --pods, --calls >= 1, --seconds > 0, --foreign >= 0")
    if os.geteuid() != 0:
        print("SKIP: the simulator's FUSE mount and pod cgroups need root")
        return SKIP
    if not os.path.exists("/dev/fuse"):
        print("SKIP: /dev/fuse is missing")
        return SKIP
    load0 = "%.2f %.2f %.2f" % os.getloadavg()
    node = KubeNode(os.path.abspath(a.build))
    try:
        gpu = setup(node, a)
        check_behaviour(node, a, gpu)
        loop = measure_loop(node, a)
        ctl = measure_ctl(node, a, "status")
        lst = measure_ctl(node, a, "list")
        check_behaviour(node, a, gpu)
    except Failure:
        node.dump()
        raise
    finally:
        node.close()
    report(a, loop, ctl, lst, (load0, "%.2f %.2f %.2f" % os.getloadavg()))
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    run_main(main)

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench_field.py - two of issue-style field numbers on the simulator, in
Kubernetes mode (the test API server, pod cgroups), printed, not asserted
beyond the outcome:

  peers: --peers root processes connected to the node agent, spread over
         --pods BE pods (each a preempt agent's connection that never
         reports a TSG), beside two LC pods running fakecuda under the real
         preempt library. Prints how many connected and were refused, and
         whether (and how soon) each LC's GR TSG reached the LC timeslice
         (100000 us) in the simulator (one BE pod also runs fakecuda: an
         LC alone keeps libcuda's value). Outcome asserted: every LC gets it.
  list:  --list-pods pods of this node, each with a --pad byte annotation
         (100 x 1 MB: a 100 MB pod list), and one LC pod with a workload.
         Prints the agent's peak RSS (VmHWM) against the chart's memory
         limit (256 MiB), the re-lists and list errors it counted, and
         whether the LC got its timeslice. Outcome asserted: the agent
         still controls (the LC at 100000) and is alive.

Usage: bench_field.py --build BUILD peers [--peers 500] [--pods 10]
       bench_field.py --build BUILD list [--list-pods 100] [--pad 1000000]
(needs root and /dev/fuse; exit 77 = skipped, with a reason)
"""
import argparse
import os
import signal
import socket
import sys
import time

from gpuqos_test import SKIP, Failure, run_main, wait_for
from gpuqos_test import check as expect
from gpuqos_test.kube import NODE, KubeNode
from gpuqos_test.node import gr_timeslice

CHART_LIMIT_KIB = 256 * 1024  # charts/gpuqos values: the agent's memory limit


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise Failure("no %s in /proc/%d/status" % (key, pid))


def connector(node, procs):
    """A forked root process in the cgroup procs, connected to the agent's
    socket and holding the connection; returns its pid once connected."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(node.sock)
        os.write(w, b"x")
        time.sleep(600)
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    os.close(r)
    return pid


def lc_time(node, pids, t0):
    wait_for(lambda: all(gr_timeslice(node, p) == [100000] for p in pids), timeout=120,
             what="every LC at 100000 in the simulator")
    return time.monotonic() - t0


def bench_peers(node, a):
    for i in range(a.pods):
        node.add_pod("be-%d" % i, "best-effort")
    node.add_pod("lc-0", "latency-critical")
    node.add_pod("lc-1", "latency-critical")
    node.start_kube_agent(extra=["--log-level", "info"])
    wait_for(lambda: node.kube_view()["synced"] and node.kube_view()["pods"] >= a.pods + 2,
             timeout=60, what="every pod cached")
    kids = []
    try:
        t0 = time.monotonic()
        for i in range(a.peers):
            kids.append(connector(node, os.path.join(node.pods["be-%d" % (i % a.pods)][2],
                                                     "cgroup.procs")))
        t_conn = time.monotonic() - t0
        t1 = time.monotonic()
        lcs = [node.in_pod("lc-%d" % i, "lc", args=("--hold", "300")) for i in range(2)]
        node.in_pod("be-0", "be", args=("--hold", "300"))  # an LC alone keeps libcuda's value
        took = lc_time(node, [p.pid for p in lcs], t1)
        procs = node.ctl("list")["processes"]
        connected = sum(1 for p in procs if p["connected"])
        refused = node.ctl("list")["agent"]["counters"].get("peersRefused")
        agent_cpu = cpu_seconds(node.agent.pid)
        print("peers: %d root connections over %d BE pods in %.1f s; %d connected, %s refused; "
              "both LCs at 100000 %.2f s after they started; agent CPU %.2f s in all, RSS %d KiB"
              % (a.peers, a.pods, t_conn, connected, refused, took, agent_cpu,
                 status_kib(node.agent.pid, "VmRSS")))
    finally:
        for k in kids:
            os.kill(k, signal.SIGKILL)
            os.waitpid(k, 0)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def bench_list(node, a):
    node.add_pod("lc", "latency-critical")
    node.st.bulk({"count": a.list_pods, "node": NODE, "pad": a.pad, "prefix": "big"})
    t0 = time.monotonic()
    node.start_kube_agent(extra=["--log-level", "info"])
    lc = node.in_pod("lc", "lc", args=("--hold", "300"))
    node.add_pod("be", "best-effort")
    node.in_pod("be", "be", args=("--hold", "300"))  # an LC alone keeps libcuda's value
    took = lc_time(node, [lc.pid], t0)
    time.sleep(2)
    expect(node.agent.poll() is None, "the agent is alive")
    view = node.kube_view()
    hwm, rss = status_kib(node.agent.pid, "VmHWM"), status_kib(node.agent.pid, "VmRSS")
    log = open(node.agent_logs[-1]).read()
    lines = [ln for ln in log.splitlines() if "list" in ln and ("too large" in ln or "bound" in ln
                                                              or "refused" in ln)]
    print("list: %d pods x %d B (%.0f MB); LC at 100000 %.2f s after start; agent peak RSS "
          "%d KiB (%.0f %% of the chart's 256 MiB), now %d KiB; synced %s, pods cached %s; "
          "stats %r; %d log line(s) about the list%s"
          % (a.list_pods, a.pad, a.list_pods * a.pad / 1e6, took, hwm, 100.0 * hwm / CHART_LIMIT_KIB,
             rss, view.get("synced"), view.get("pods"), view.get("stats"), len(lines),
             (": " + lines[0][:300]) if lines else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("what", choices=("peers", "list"))
    ap.add_argument("--peers", type=int, default=500)
    ap.add_argument("--pods", type=int, default=10)
    ap.add_argument("--list-pods", type=int, default=100)
    ap.add_argument("--pad", type=int, default=1000000)
    a = ap.parse_args()
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("SKIP: the simulator's FUSE mount and pod cgroups need root and /dev/fuse")
        return SKIP
    node = KubeNode(os.path.abspath(a.build))
    try:
        (bench_peers if a.what == "peers" else bench_list)(node, a)
    except Failure:
        node.dump()
        raise
    finally:
        node.close()
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    run_main(main)

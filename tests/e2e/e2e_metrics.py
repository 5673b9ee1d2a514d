#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""e2e_metrics.py - the node agent's metrics as an operator uses them.

  standalone_metrics  the agent in standalone mode (no pods): /metrics passes
                      promtool, exports docs/metrics.md's families but the
                      Kubernetes ones, and a real Prometheus answers the
                      documented by-process query with the simulator's LC
                      and BE GR timeslices, by class and pid, then a
                      launch-bound LC's readings.
  kube_dashboard      every query of deploy/grafana/gpuqos-dashboard.json
                      (the `expr` of every panel target, Grafana's variables
                      filled in as Grafana would) returns data from a real
                      Prometheus scraping the agent in Kubernetes mode with
                      an LC and a BE pod, after a class flip and one RM
                      failure injected in the simulator.

Root, /dev/fuse and Debian's prometheus (skip 77 otherwise); the dashboard
scenario also needs the cgroup v2 tree, like e2e.kube_*.

Usage: e2e_metrics.py --build BUILD SCENARIO
"""
import json
import math
import os
import re
import signal
import subprocess
import sys

# The test library (tests/lib, PYTHONPATH from ctest); the metrics helpers
# are e2e_kube.py's, beside this file.
from e2e_kube import Prometheus, families, free_port, http_get, reference_names
from gpuqos_test import Failure, wait_for
from gpuqos_test import check as expect
from gpuqos_test.kube import KubeNode
from gpuqos_test.node import EAGER, Node, gr_timeslice, run_scenario

HERE = os.path.dirname(os.path.abspath(__file__))

DASHBOARD = os.path.join(HERE, "..", "..", "deploy", "grafana", "gpuqos-dashboard.json")
# Families only Kubernetes mode exports (docs/metrics.md, "Reference").
KUBE_ONLY = re.compile(r"^gpuqos_(gpu_pods|kube_.*)$")


def lint(text):
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    expect(p.returncode == 0, "promtool check metrics: rc %d\n%s%s" % (p.returncode, p.stdout, p.stderr))


def by_class(samples):
    out = {}
    for labels, v in samples:
        out.setdefault(labels.get("class"), []).append((int(labels["pid"]), v))
    return {k: sorted(v) for k, v in out.items()}


def t_standalone_metrics(node):
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    prom = Prometheus(node.dir, "127.0.0.1:%d" % port)
    try:
        node.start_agent(extra=["--metrics-address", "127.0.0.1:%d" % port])
        be = node.workload("be", ["--hold", "60"])
        lc = node.workload("lc", ["--hold", "60"])
        wait_for(lambda: gr_timeslice(node, lc.pid) == [100000] and gr_timeslice(node, be.pid) == [50],
                 what="simulator: LC 100000 / BE 50")
        text = wait_for(lambda: (lambda t: 'pid="%d"' % lc.pid in t and t)(http_get(base + "/metrics")[1]),
                        what="the LC's TSGs in /metrics")
        lint(text)
        got = families(text)
        doc = {n for n in reference_names() if not KUBE_ONLY.match(n)}
        expect(got == doc, "standalone /metrics and docs/metrics.md differ: only exported %r, only documented %r"
               % (sorted(got - doc), sorted(doc - got)))
        expect('pod="' not in text and 'namespace="' not in text, "no pod labels in standalone mode")
        expect('gpuqos_agent_info{version="' in text and 'mode="standalone"' in text, "agent_info mode")
        expect(http_get(base + "/readyz")[0] == 200, "/readyz in standalone mode with --bpf off")
        # docs/metrics.md's standalone query: by process, with comm and class.
        q = ('gpuqos_tsg_timeslice_applied_seconds * on(pid, client, tsg) group_left(comm, class, engine) '
             'gpuqos_tsg_info{engine="GR0"}')
        want = {"latency-critical": [(lc.pid, 0.1)], "best-effort": [(be.pid, 0.00005)]}
        wait_for(lambda: by_class(prom.query(q)) == want, timeout=30,
                 what="PromQL: the GR TSGs by class and pid (last %r)" % (by_class(prom.query(q)),))
        comms = {s[0]["comm"] for s in prom.query(q)}
        expect(comms == {"e2e-fakecuda"}, "comm of the workloads: %r" % comms)
        # Copy TSGs keep 1024 us; every TSG of the BE is there.
        be_all = sorted(v for _, v in prom.query('gpuqos_tsg_timeslice_applied_seconds{pid="%d"}' % be.pid))
        expect(be_all == [0.00005, 0.001024, 0.001024, 0.001024], "the BE's four TSGs: %r" % be_all)
        # The LC beside the BE is asked to wake (the default 100 us), the BE never.
        wait_for(lambda: sorted(v for _, v in prom.query('gpuqos_tsg_wake_lead_seconds{pid="%d"}'
                                                         % lc.pid)) == [0.0001] * 4,
                 timeout=30, what="PromQL: the LC's wake lead")
        expect(sorted(v for _, v in prom.query('gpuqos_tsg_wake_lead_seconds{pid="%d"}' % be.pid))
               == [0.0] * 4, "the BE's wake lead")
        # The LC's preempt agent reports how its wakes went (WAKE): it
        # launches nothing, so no request yet, nothing stopped. The BE was
        # never asked to wake: no such series.
        wait_for(lambda: sorted(v for _, v in prom.query('gpuqos_tsg_wake_requests_total{pid="%d"}'
                                                         % lc.pid)) == [0] * 4,
                 timeout=30, what="PromQL: the LC's wake counts")
        expect(sorted(v for _, v in prom.query('gpuqos_tsg_wakes_total{pid="%d",result="hit"}'
                                               % lc.pid)) == [0] * 4
               and sorted(v for _, v in prom.query('gpuqos_tsg_wake_stopped{pid="%d"}' % lc.pid))
               == [0] * 4, "the LC's wakes: %r" % prom.query('{__name__=~"gpuqos_tsg_wake.*",pid="%d"}'
                                                              % lc.pid))
        expect(prom.query('gpuqos_tsg_wake_requests_total{pid="%d"}' % be.pid) == [],
               "the BE has no wake counts")
        # A launch-bound LC: its readings, and the LC before it, in Prometheus.
        lib = node.bin("tests/preempt/fake-libcuda/libcuda.so.1")
        eager = node.workload("lc", ["--hold", "60", "--libcuda", lib, "--launch-every-us", "0"],
                              prefix=EAGER)
        wait_for(lambda: gr_timeslice(node, be.pid) == [2048] and gr_timeslice(node, lc.pid) == [2048],
                 timeout=10, what="the runlist at baseline beside a launch-bound LC")

        def values(expr):
            return sorted(v for _, v in prom.query(expr))
        wait_for(lambda: values('gpuqos_tsg_launch_bound{pid="%d"}' % eager.pid) == [1, 1, 1, 1],
                 timeout=30, what="PromQL: the launch-bound LC's four TSGs")
        # A launch-bound runlist is at the driver's values: nobody is woken.
        wait_for(lambda: values('gpuqos_tsg_wake_lead_seconds{pid="%d"}' % lc.pid) == [0] * 4,
                 timeout=30, what="PromQL: no wake beside a launch-bound LC")
        ratio = values('gpuqos_tsg_launch_active_ratio{pid="%d"}' % eager.pid)
        # Launch-bound means at least busyLcPercent (50 %, less its 10 % of
        # hysteresis once judged); how far above depends on the CPU its loop gets.
        expect(len(ratio) == 4 and min(ratio) >= 0.4 and max(ratio) <= 1.0,
               "its launch-active ratio: %r" % ratio)
        # The first LC launches nothing: read as 0, not launch-bound.
        expect(values('gpuqos_tsg_launch_bound{pid="%d"}' % lc.pid) == [0, 0, 0, 0]
               and values('gpuqos_tsg_launch_active_ratio{pid="%d"}' % lc.pid) == [0, 0, 0, 0],
               "the idle LC: %r" % prom.query('{__name__=~"gpuqos_tsg_launch_.*",pid="%d"}' % lc.pid))
    finally:
        prom.stop()


# --------------------------------------------------------------------------
# The Grafana dashboard
# --------------------------------------------------------------------------

# What Grafana puts for the dashboard's variables: every node agent, and a
# rate window long enough for the test's one-second scrapes.
VARIABLES = {"$instance": ".*", "$__rate_interval": "1m"}


def dashboard_queries():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    out = []
    for p in dash["panels"]:
        for p2 in [p] + p.get("panels", []):
            for t in p2.get("targets", []):
                expect(t.get("expr"), "panel %r: a target without expr" % p2["title"])
                out.append((p2["title"], t["refId"], t["expr"]))
    expect(len(out) >= 10, "the dashboard's queries: %r" % out)
    return out


def fill(expr):
    for k, v in VARIABLES.items():
        expr = expr.replace(k, v)
    left = re.findall(r"\$\{?\w+", expr)
    expect(not left, "a variable the test does not know: %r in %s" % (left, expr))
    return expr


def has_data(prom, expr):
    """An instant query's result holds at least one finite number."""
    return any(not math.isnan(v) for _, v in prom.query(expr))


def t_kube_dashboard(node):
    queries = dashboard_queries()
    port = free_port()
    prom = Prometheus(node.dir, "127.0.0.1:%d" % port)
    try:
        node.add_pod("lc", "latency-critical")
        node.add_pod("be", "best-effort")
        # Budgets and a reserve, so that the memory panels have lines.
        node.start_kube_agent(config={"version": 1, "memory": {
                                  "lcReserve": "10%",
                                  "defaults": {"best-effort": "1Gi", "latency-critical": "4Gi"}}},
                              extra=["--metrics-address", "127.0.0.1:%d" % port])
        lc = node.in_pod("lc", "lc")
        be = node.in_pod("be", "be")
        wait_for(lambda: gr_timeslice(node, lc.pid) == [100000] and gr_timeslice(node, be.pid) == [50],
                 what="simulator: LC 100000 / BE 50")
        wait_for(lambda: prom.query("gpuqos_agent_info"), timeout=30, what="Prometheus' first sample")
        # Controls inside the rate window, one of them refused by the RM
        # (NV_ERR_INVALID_ARGUMENT on the next SET_TIMESLICE), so that the
        # latency, rate and failure panels have something to show.
        node.sim_control("fail 0xa06c0103 0x1f 1")
        node.set_annotation("lc", "gpu.qos", "best-effort")
        wait_for(lambda: gr_timeslice(node, be.pid) == [2048], what="the flip to best-effort")
        node.set_annotation("lc", "gpu.qos", "latency-critical")
        wait_for(lambda: gr_timeslice(node, lc.pid) == [100000] and gr_timeslice(node, be.pid) == [50],
                 what="flipped back")
        wait_for(lambda: prom.query('gpuqos_tsg_controls_total{status!="NV_OK"}'), timeout=30,
                 what="the injected RM failure in Prometheus")
        missing = []
        for title, ref, expr in queries:
            q = fill(expr)
            try:
                wait_for(lambda: has_data(prom, q), timeout=20, what=q)
            except Failure:
                missing.append("%s (%s): %s -> %r" % (title, ref, q, prom.query(q)))
        expect(not missing, "dashboard queries without data:\n" + "\n".join(missing))
        print("every one of the dashboard's %d queries returned data" % len(queries))
    finally:
        prom.stop()


SCENARIOS = {"standalone_metrics": (t_standalone_metrics, Node),
             "kube_dashboard": (t_kube_dashboard, KubeNode)}


def main():
    # run_scenario parses the arguments; the node kind follows the scenario.
    make = SCENARIOS.get(sys.argv[-1], (None, Node))[1]
    return run_scenario({k: v[0] for k, v in SCENARIOS.items()}, make,
                        "the simulator's FUSE mount" + (" and pod cgroups" if make is not Node else ""))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())

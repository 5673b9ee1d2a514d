#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""e2e_kube.py - end-to-end tests of the node agent in Kubernetes mode.

Real parts, as in e2e.py (whose Node it reuses): the FUSE GPU simulator, the
real node agent (here without --standalone), the preempt agent injected by
`gpuqos run`, fakecuda workloads and gpuqosctl. The API server is
tests/kube/fake_apiserver.py (the one proven with real kubectl), run in this
process so a test can restart it with its state. Each workload runs in a pod
cgroup made on this host's cgroup v2 tree (kubepods.slice/.../
cri-containerd-<id>.scope), so the agent finds its pod the way it does on a
real node: /proc/<pid>/cgroup -> pod UID -> the cached pod's annotation.
Settings are read from the simulator, annotations and Events from the API
server, never from what the agent believes.

Usage: e2e_kube.py --build BUILD SCENARIO   (exit 77 = skipped, with a reason)
"""
import copy
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

# The test library (tests/lib, PYTHONPATH from ctest): the node harness is
# gpuqos_test.node, its Kubernetes mode gpuqos_test.kube.
from gpuqos_test import Skip, wait_for
from gpuqos_test import check as expect
from gpuqos_test.kube import NODE, NS, KubeNode, converged
from gpuqos_test.node import EAGER, agent_tsgs, gr_timeslice, proc_row, run_scenario

HERE = os.path.dirname(os.path.abspath(__file__))

def table(node):
    """Every TSG the agent holds, with the value the simulator holds for it."""
    return sorted((t["pid"], t["client"], t["tsg"], t["engine"], t["timeslice"]["applied"])
                  for t in agent_tsgs(node))


def quiet_patches(node, settle=1.0):
    """Waits until no PATCH came for `settle` seconds; returns the count."""
    def calm():
        p = node.requests("patch")
        return not p or time.monotonic() - p[-1]["t"] >= settle
    wait_for(calm, timeout=15, what="PATCHes to settle")
    return len(node.requests("patch"))


# --------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------


def fake_peer_in_pod(node, name, out):
    """tests/agent/fake_peer.py as a process of pod name's container."""
    procs = os.path.join(node.pods[name][2], "cgroup.procs")
    peer = os.path.join(HERE, "..", "agent", "fake_peer.py")
    p = subprocess.Popen(["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, "/usr/bin/python3",
                          peer, node.sock, node.dev], stdin=subprocess.PIPE,
                         stdout=open(out, "w"), env=node.env)
    node.procs.append(p)
    return p


def peer_events(out):
    with open(out) as f:
        return [json.loads(line) for line in f if line.strip()]


def t_kube_admission(node):
    """Admission is keyed by pod in Kubernetes mode (docs/protocol.md,
    "Admission"): with 224 connections of one BE pod's processes (the
    share a BE pod may take of the 256 a pod), the next of that pod is
    told REFUSED (SHARE), and one of another pod, same uid (root), is
    admitted. Keyed by uid, the second pod's would have been refused."""
    from gpuqos_test.gq_proto import REFUSED_SHARE
    node.add_pod("a", "best-effort")
    node.add_pod("b", "best-effort")
    node.start_kube_agent()
    wait_for(lambda: node.kube_view()["synced"] and node.kube_view()["pods"] >= 2,
             what="both pods cached")
    procs_a = os.path.join(node.pods["a"][2], "cgroup.procs")
    kids = []
    try:
        for _ in range(224):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                with open(procs_a, "w") as f:
                    f.write(str(os.getpid()))
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.connect(node.sock)
                os.write(w, b"x")
                time.sleep(120)
                os._exit(0)
            os.close(w)
            os.read(r, 1)
            os.close(r)
            kids.append(pid)
        wait_for(lambda: len([p for p in node.ctl("list")["processes"] if p["connected"]]) == 224,
                 timeout=60, what="224 of pod a connected")
        out_a, out_b = os.path.join(node.dir, "peer-a.out"), os.path.join(node.dir, "peer-b.out")
        pa = fake_peer_in_pod(node, "a", out_a)
        wait_for(lambda: [e for e in peer_events(out_a) if e["ev"] in ("refused", "policy")],
                 timeout=30, what="pod a's next peer answered")
        ev = [e for e in peer_events(out_a) if e["ev"] in ("refused", "policy")][0]
        expect(ev["ev"] == "refused" and ev["reason"] == REFUSED_SHARE,
               "pod a's 225th refused for its pod's share: %r" % ev)
        pb = fake_peer_in_pod(node, "b", out_b)
        wait_for(lambda: [e for e in peer_events(out_b) if e["ev"] in ("refused", "policy")],
                 timeout=30, what="pod b's peer answered")
        evs = [e for e in peer_events(out_b) if e["ev"] in ("refused", "policy")]
        expect(evs[0]["ev"] == "policy", "pod b's peer admitted beside pod a's 224: %r" % evs)
        log = open(node.agent_logs[-1]).read()
        expect("pod %s has 224 preempt agents connected, the limit per pod for class best-effort"
               % node.pods["a"][0] in log, "the refusal names the pod")
        for p in (pa, pb):
            p.kill()
            p.wait()
    finally:
        for k in kids:
            os.kill(k, signal.SIGKILL)
            os.waitpid(k, 0)


def t_kube_classes(node):
    """The pod's annotation decides (not what the process claims); the pod
    gets gpuqos.io/class and gpuqos.io/state; a flip at run time moves the
    settings within the pass after its watch event; an invalid value gets the default and one
    Event; a process in no pod is unmanaged; the last exit removes the
    annotations."""
    node.add_pod("lc", "latency-critical")
    node.add_pod("be", "best-effort")
    # busyLcPercent 25, not the default 50: the eager pod below launches
    # without pause only while it gets the CPU, and a loaded 2-core machine
    # gives it less (the threshold itself is agent.core_lcbusy's).
    node.start_kube_agent(config={"version": 1, "busyLcPercent": 25})
    # Each claims the other class through gpuqos run: the claim is ignored.
    lc = node.in_pod("lc", "be")
    be = node.in_pod("be", "lc")
    wait_for(lambda: gr_timeslice(node, lc.pid) == [100000] and gr_timeslice(node, be.pid) == [50],
             what="simulator: LC 100000 / BE 50 on the GR TSGs")
    row = proc_row(node, lc.pid)
    expect(row["class"] == "latency-critical" and row["classSource"] == "annotation"
           and row["podName"] == "lc" and row["podNamespace"] == NS
           and row["podUid"] == node.pods["lc"][0] and row["containerId"] == node.pods["lc"][1],
           "ctl shows the pod and the annotation as source: %r" % row)
    sts = wait_for(lambda: converged(node, "lc", "be"), what="state annotations converged")
    expect(node.ann("lc")["gpuqos.io/class"] == "latency-critical", repr(node.ann("lc")))
    expect(node.ann("be")["gpuqos.io/class"] == "best-effort", repr(node.ann("be")))
    for s, ts in zip(sts, (100000, 50)):
        expect(s["tsgs"] == 4 and s["processes"] == 1 and s["timesliceUs"] == {"gr": [ts], "copy": [1024]}
               and len(s["gpus"]) == 1 and s["controlPath"] == "in-process"
               and s["classSource"] == "annotation", "state annotation: %r" % s)
    gpu = node.ctl("list")["agent"]["gpus"]
    expect(not gpu or sts[0]["gpus"][0] in json.dumps(gpu), "gpus are the RM's UUIDs: %r / %r" % (sts, gpu))

    # A second LC, then the first flips to best-effort: one LC, two BEs.
    node.add_pod("lc2", "latency-critical")
    lc2 = node.in_pod("lc2", "lc")
    wait_for(lambda: gr_timeslice(node, lc2.pid) == [100000] and gr_timeslice(node, be.pid) == [50]
             and gr_timeslice(node, lc.pid) == [100000], what="two LCs and one BE")
    wait_for(lambda: converged(node, "lc", "be", "lc2"), what="converged before the flip")
    # Each LC beside the BE is asked to wake; the BE's state says nothing of it.
    wait_for(lambda: (node.gq_state("lc2") or {}).get("wake") == 1
             and (node.gq_state("lc") or {}).get("wake") == 1, what="the LCs' wake in their state")
    expect("wake" not in (node.gq_state("be") or {}), "the BE: %r" % node.gq_state("be"))
    t0 = time.monotonic()
    node.set_annotation("lc", "gpu.qos", "best-effort")
    # Two BEs beside an LC, both gateable: they take turns at 50.
    wait_for(lambda: gr_timeslice(node, lc.pid) == [50] and gr_timeslice(node, be.pid) == [50],
             timeout=5, step=0.01, what="the two BEs rotating after the flip")
    took = time.monotonic() - t0
    # The promise: a flip reaches the GPU in the pass after its watch event
    # (milliseconds here); 3 s is that with room for a loaded 2-core machine.
    expect(took < 3.0, "settings followed the flip in %.3f s (must be within 3 s)" % took)
    expect(gr_timeslice(node, lc2.pid) == [100000], "the remaining LC keeps 100000")
    wait_for(lambda: node.ann("lc").get("gpuqos.io/class") == "best-effort"
             and (node.gq_state("lc") or {}).get("timesliceUs", {}).get("gr") == [50]
             and (node.gq_state("lc") or {}).get("state") == "converged", timeout=5,
             what="the flipped pod's annotations follow")
    expect(proc_row(node, lc.pid)["classSource"] == "annotation", "still from the annotation")

    # gpuqosctl set-class still wins over the annotation, and says so.
    r = node.ctl("set-class", str(lc.pid), "lc")
    expect(r.get("ok"), repr(r))
    wait_for(lambda: gr_timeslice(node, lc.pid) == [100000], what="override applied")
    expect(proc_row(node, lc.pid)["classSource"] == "override", "override shown")
    wait_for(lambda: (node.gq_state("lc") or {}).get("overrides") == 1, what="override in the state")
    node.ctl("set-class", str(lc.pid), "auto")
    wait_for(lambda: gr_timeslice(node, lc.pid) == [50] and proc_row(node, lc.pid)["classSource"] == "annotation",
             what="back to the annotation")

    # A launch-bound LC: its pod's state says so, and its runlist (the other
    # LC and both BEs) runs at the driver's values until it goes.
    node.add_pod("eager", "latency-critical")
    lib = node.bin("tests/preempt/fake-libcuda/libcuda.so.1")
    eager = node.in_pod("eager", "lc", args=("--hold", "60", "--libcuda", lib, "--launch-every-us", "0"),
                        prefix=EAGER)
    wait_for(lambda: (node.gq_state("eager") or {}).get("launchBound") == 1
             and (node.gq_state("eager") or {}).get("timesliceUs", {}).get("gr") == [2048]
             and (node.gq_state("eager") or {}).get("state") == "converged", timeout=10,
             what="the launch-bound pod's state")
    # The eager pod's state is written in the pass that restores its
    # runlist's controls; the simulator holds them once they are answered.
    wait_for(lambda: gr_timeslice(node, lc2.pid) == [2048] and gr_timeslice(node, be.pid) == [2048]
             and gr_timeslice(node, lc.pid) == [2048], timeout=10, what="its runlist at baseline")
    expect("launchBound" not in (node.gq_state("lc2") or {}), "the other LC: %r" % node.gq_state("lc2"))
    # The runlist at the driver's values: no LC is asked to wake.
    wait_for(lambda: "wake" not in (node.gq_state("lc2") or {}), what="no wake beside it")
    eager.kill()
    eager.wait()
    wait_for(lambda: gr_timeslice(node, lc2.pid) == [100000] and gr_timeslice(node, be.pid) == [50]
             and gr_timeslice(node, lc.pid) == [50], timeout=10, what="back once it left")

    # An invalid value: the default class, one Warning Event.
    node.add_pod("odd", "ultra-fast")
    odd = node.in_pod("odd", "lc")
    wait_for(lambda: (proc_row(node, odd.pid) or {}).get("classSource") == "default", what="odd classified")
    expect(proc_row(node, odd.pid)["class"] == "best-effort", "the default class is best-effort")
    wait_for(lambda: node.events("InvalidQoSClass"), what="an InvalidQoSClass Event")
    ev = node.events("InvalidQoSClass")[0]
    expect(ev["type"] == "Warning" and ev["regarding"]["uid"] == node.pods["odd"][0]
           and "ultra-fast" in ev["note"], "the Event names the pod and the value: %r" % ev)
    wait_for(lambda: node.ann("odd").get("gpuqos.io/class") == "best-effort", what="odd annotated")
    node.set_annotation("odd", "unrelated", "x")  # the pod changes, the value does not
    time.sleep(1.0)
    expect(len(node.events("InvalidQoSClass")) == 1, "one Event per pod and value: %r" % node.events())

    # gpu.qos as a number, annotations as a list (only a non-conforming API
    # server sends these): invalid like any other value, not "absent".
    node.add_pod("num", 1)
    node.add_pod("listann")
    with node.st.lock:
        pod = copy.deepcopy(node.st.pods[(NS, "listann")])
        pod["metadata"]["annotations"] = ["gpu.qos", "latency-critical"]
        node.st.upsert(pod)
    num = node.in_pod("num", "lc")
    wait_for(lambda: (proc_row(node, num.pid) or {}).get("classSource") == "default", what="num classified")
    expect(proc_row(node, num.pid)["class"] == "best-effort", "a number gets the default class")
    wait_for(lambda: len(node.events("InvalidQoSClass")) == 3, what="InvalidQoSClass for a number and a list")
    notes = {e["regarding"]["uid"]: e["note"] for e in node.events("InvalidQoSClass")}
    expect("gpu.qos: 1 is not" in notes.get(node.pods["num"][0], ""), "the number's Event: %r" % notes)
    expect("metadata.annotations is not a map" in notes.get(node.pods["listann"][0], ""),
           "the list's Event: %r" % notes)
    log = open(node.agent_logs[-1]).read()
    expect("pod default/num: gpu.qos: 1 is not" in log and "pod default/listann: metadata.annotations" in log,
           "both logged")

    # A GPU process in no pod: unmanaged, and it moves no one.
    stray = node.workload("lc", ["--hold", "60"])
    wait_for(lambda: len(agent_tsgs(node, stray.pid)) == 4, what="the stray process's TSGs")
    expect(proc_row(node, stray.pid)["class"] == "unmanaged"
           and proc_row(node, stray.pid)["classSource"] == "no-pod", repr(proc_row(node, stray.pid)))
    expect(gr_timeslice(node, stray.pid) == [2048], "stray left at libcuda's value")

    # The pod's last GPU process exits: its gpuqos.io/ annotations go.
    odd.kill()
    odd.wait()
    wait_for(lambda: not [k for k in node.ann("odd") if k.startswith("gpuqos.io/")],
             what="gpuqos.io/ annotations removed after the last exit")
    expect(node.ann("odd").get("gpu.qos") == "ultra-fast", "the user's annotation stays")
    expect(node.events("CapabilityMissing") == [] and node.events("ControlRefused") == [],
           "no spurious Events: %r" % node.events())


def t_kube_outage(node):
    """API server restart, 410 Gone as an HTTP status and as an ERROR event,
    token rotation: the TSG table and the settings stay, the agent lists
    again where it must, and unchanged annotations are not patched again.
    Then a flip still works (and is patched: the count does move)."""
    node.add_pod("lc", "latency-critical")
    node.add_pod("be", "best-effort")
    node.start_kube_agent()
    lc = node.in_pod("lc", "lc")
    be = node.in_pod("be", "be")
    wait_for(lambda: gr_timeslice(node, lc.pid) == [100000] and gr_timeslice(node, be.pid) == [50],
             what="LC 100000 / BE 50")
    wait_for(lambda: converged(node, "lc", "be"), what="annotations converged")
    base_table = table(node)
    expect(len(base_table) == 8, "8 TSGs: %r" % base_table)
    patches = quiet_patches(node)

    def recovered(since, what, kinds=("watch",)):
        # A request of each kind answered 200 after the step.
        wait_for(lambda: all(any(r["status"] == 200 for r in node.requests(k, since)) for k in kinds),
                 timeout=20, what="the agent to %s" % what)

    def unchanged(what):
        time.sleep(1.0)  # a wrong PATCH would go out at once (burst 10)
        expect(table(node) == base_table, "%s: TSG table changed:\n%r\n%r" % (what, base_table, table(node)))
        expect(gr_timeslice(node, lc.pid) == [100000] and gr_timeslice(node, be.pid) == [50],
               "%s: settings changed" % what)
        got = len(node.requests("patch"))
        expect(got == patches, "%s: %d PATCH(es) of unchanged annotations: %r"
               % (what, got - patches, node.requests("patch")[patches:]))

    # 1. The API server restarts.
    mark = node.nreq()
    node.restart_api()
    recovered(mark, "watch again after the restart")
    unchanged("API server restart")

    # 2. 410 as an HTTP status: the cluster moves on (a pod of another
    # node, which this node's watch does not see), history is compacted
    # past the agent's resourceVersion, and the stream is cut.
    # The baseline comes first: a watch still reconnecting from step 1 can
    # meet the compacted history (410, a re-list) before the drop.
    mark = node.nreq()
    relists = node.kube_view()["stats"]["relists"]
    node.post("gone_mode", "http")
    node.st.upsert({"metadata": {"name": "elsewhere", "namespace": NS},
                    "spec": {"nodeName": "other-node", "containers": [{"name": "main"}]}})
    node.post("compact")
    node.post("drop")
    wait_for(lambda: any(r["status"] == 410 for r in node.requests("watch", mark)), what="a 410 answer")
    recovered(mark, "list and watch again after 410 (HTTP)", ("list", "watch"))
    wait_for(lambda: node.kube_view()["stats"]["relists"] > relists, what="a re-list counted")
    unchanged("410 as HTTP status")

    # 3. 410 as an ERROR event inside a 200 stream.
    node.post("gone_mode", "event")
    mark = node.nreq()
    relists = node.kube_view()["stats"]["relists"]
    node.post("expire")
    wait_for(lambda: node.kube_view()["stats"]["relists"] > relists, what="a re-list after the ERROR event")
    recovered(mark, "list and watch again after 410 (ERROR event)", ("list", "watch"))
    unchanged("410 as ERROR event")

    # 4. The token rotates: the old one is refused from now on.
    new = "t1-" + secrets.token_hex(8)
    node.write_token(new)
    with node.st.lock:
        node.st.token = new
    node.token = new
    mark = node.nreq()
    node.post("drop")
    wait_for(lambda: any(r["status"] == 401 for r in node.requests(None, mark)), what="a 401 for the old token")
    recovered(mark, "watch with the new token")
    expect(all(r["auth"] == "Bearer " + new for r in node.requests(None, mark) if r["status"] == 200),
           "answered requests carry the new token")
    expect(node.kube_view()["stats"]["unauthorized"] >= 1, "401 counted")
    unchanged("token rotation")

    # Still live: a flip reaches the TSGs and the annotations (new PATCHes),
    # even when the flip's first PATCH fails slowly (a hanging API server)
    # while the pod's next state queues behind it.
    with node.st.lock:
        node.st.faults.append({"kind": "patch", "status": 503, "count": 1, "delay": 0.5})
    node.set_annotation("lc", "gpu.qos", "best-effort")
    wait_for(lambda: gr_timeslice(node, lc.pid) == [2048] and gr_timeslice(node, be.pid) == [2048],
             timeout=5, what="both BE, no LC: baseline")
    wait_for(lambda: any(r["status"] == 503 for r in node.requests("patch")),
             what="the injected PATCH failure")
    wait_for(lambda: node.ann("lc").get("gpuqos.io/class") == "best-effort"
             and all((node.gq_state(n) or {}).get("timesliceUs", {}).get("gr") == [2048]
                     and (node.gq_state(n) or {}).get("state") == "converged" for n in ("lc", "be")),
             what="class and state annotations follow after a failed PATCH")
    expect(len(node.requests("patch")) > patches, "the changed annotation was patched")


def t_kube_valgrind(node):
    """The agent in Kubernetes mode under valgrind (the build without
    sanitizers): pods listed and watched, annotations patched, an invalid
    class and its Event, a flip, an API server restart; clean exit with no
    definite leak."""
    import shutil
    vg = shutil.which("valgrind")
    if not vg:
        raise Skip("valgrind is not installed")
    if not os.path.exists(node.bin("agent/gpuqos-agent-plain")):
        raise Skip("gpuqos-agent-plain is built only with GPUQOS_SANITIZE=ON and tests")
    log = os.path.join(node.dir, "valgrind.log")
    node.add_pod("lc", "latency-critical")
    node.add_pod("be", "best-effort")
    node.add_pod("odd", "fastest")
    node.start_kube_agent(agent="agent/gpuqos-agent-plain",
                          prefix=[vg, "--leak-check=full", "--errors-for-leak-kinds=definite",
                                  "--error-exitcode=99", "--log-file=" + log])
    lc = node.in_pod("lc", "lc")
    node.in_pod("be", "be")
    node.in_pod("odd", "be")
    wait_for(lambda: gr_timeslice(node, lc.pid) == [100000], timeout=60, what="LC applied under valgrind")
    wait_for(lambda: node.ann("lc").get("gpuqos.io/class") == "latency-critical", timeout=60,
             what="annotations patched under valgrind")
    node.set_annotation("lc", "gpu.qos", "best-effort")
    wait_for(lambda: gr_timeslice(node, lc.pid) != [100000], timeout=30, what="the flip under valgrind")
    lists = node.kube_view()["stats"]["lists"] + node.kube_view()["stats"]["relists"]
    node.restart_api(down_s=0.5)
    time.sleep(2)  # let the client notice the cut and reconnect under valgrind
    wait_for(lambda: node.kube_view().get("synced") and
             node.kube_view()["stats"]["lists"] + node.kube_view()["stats"]["relists"] >= lists,
             timeout=60, what="synced after the API server restart")
    node.agent.send_signal(signal.SIGTERM)
    rc = node.agent.wait(60)
    node.agent = None
    with open(log) as f:
        text = f.read()
    expect("definitely lost: 0 bytes" in text or "no leaks are possible" in text,
           "valgrind: no definite leak\n" + text[-3000:])
    expect(rc == 0, "clean exit under valgrind (rc %s)\n%s" % (rc, text[-3000:]))


# --------------------------------------------------------------------------
# Metrics: the agent's /metrics scraped by a real Prometheus
# --------------------------------------------------------------------------

REFERENCE = os.path.join(HERE, "..", "..", "docs", "metrics.md")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, method="GET"):
    try:
        req = urllib.request.Request(url, method=method, data=b"x" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


class Prometheus:
    """Debian's prometheus scraping one target every second."""

    def __init__(self, workdir, target):
        self.bin = shutil.which("prometheus")
        if not self.bin or not shutil.which("promtool"):
            raise Skip("prometheus and promtool are not installed (Debian package prometheus)")
        self.dir = os.path.join(workdir, "prometheus")
        os.makedirs(self.dir)
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                    "scrape_configs:\n- job_name: gpuqos\n"
                    "  static_configs: [{targets: ['%s']}]\n" % target)
        self.port = free_port()
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen([self.bin, "--config.file=" + cfg,
                                      "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
                                      "--web.listen-address=127.0.0.1:%d" % self.port],
                                     stdout=self.log, stderr=self.log)

    def query(self, expr):
        """The instant vector of a PromQL query: [(labels, value)]."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (self.port, urllib.parse.urlencode({"query": expr}))
        code, body = http_get(url)
        if code != 200:
            return []
        return [(r["metric"], float(r["value"][1])) for r in json.loads(body)["data"]["result"]]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def families(text):
    return {m.group(1) for m in re.finditer(r"^# TYPE (\S+) ", text, re.M)}


def reference_names():
    """The metric names docs/metrics.md lists in the node agent's tables
    (the device plugin's section comes after them)."""
    with open(REFERENCE) as f:
        text = f.read().split("\n## The device plugin", 1)[0]
    return set(re.findall(r"^\| `(gpuqos_[a-z_]+)` \|", text, re.M))


def by_pod(samples):
    out = {}
    for labels, v in samples:
        out.setdefault(labels.get("pod"), []).append(v)
    return {k: sorted(v) for k, v in out.items()}


def t_kube_metrics(node):
    """/metrics, /healthz, /readyz; the text passes promtool; its metric
    names are exactly docs/metrics.md's; a real Prometheus scraping the
    agent answers PromQL by pod with the simulator's timeslices, and a
    workload's series go once it exits."""
    port = free_port()
    prom = Prometheus(node.dir, "127.0.0.1:%d" % port)
    try:
        metrics_scenario(node, prom, "http://127.0.0.1:%d" % port)
    finally:
        prom.stop()


def metrics_scenario(node, prom, base):
    node.add_pod("lc", "latency-critical")
    node.add_pod("be", "best-effort")
    node.start_kube_agent(extra=["--metrics-address", base[len("http://"):]])
    wait_for(lambda: http_get(base + "/readyz")[0] == 200, what="/readyz once the pods are listed")
    expect(http_get(base + "/healthz") == (200, "ok\n"), "/healthz: %r" % (http_get(base + "/healthz"),))
    expect(http_get(base + "/nope") == (404, "not found: try /metrics, /healthz, /readyz\n"),
           "404 elsewhere, naming the paths: %r" % (http_get(base + "/nope"),))
    expect(http_get(base + "/metrics", "POST") == (405, "GET only\n"), "POST refused")
    expect(http_get(base + "/readyz", "HEAD")[0] == 200, "HEAD answered")
    lc = node.in_pod("lc", "lc")
    be = node.in_pod("be", "be")
    wait_for(lambda: gr_timeslice(node, lc.pid) == [100000] and gr_timeslice(node, be.pid) == [50],
             what="simulator: LC 100000 / BE 50")

    # What the agent serves: lint-clean, and documented name for name.
    text = wait_for(lambda: (lambda t: 'pod="be"' in t and t)(http_get(base + "/metrics")[1]),
                    what="the BE's TSGs in /metrics")
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    expect(lint.returncode == 0, "promtool check metrics: rc %d\n%s%s" % (lint.returncode, lint.stdout, lint.stderr))
    got, doc = families(text), reference_names()
    expect(got == doc, "docs/metrics.md and /metrics differ: only exported %r, only documented %r"
           % (sorted(got - doc), sorted(doc - got)))
    expect('container="main"' in text and 'UUID="GPU-' in text, "pod labels and GPU UUIDs:\n" + text[:2000])

    # Prometheus: per pod, the GR TSG at its class's timeslice, the copy
    # TSGs at 1024 us.
    gr = ('gpuqos_tsg_timeslice_applied_seconds * on(pid, client, tsg) group_left(class, engine) '
          'gpuqos_tsg_info{engine="GR0"}')
    want = {"lc": [0.1], "be": [0.00005]}
    got = wait_for(lambda: (lambda r: r == want and r)(by_pod(prom.query(gr))), timeout=30,
                   what="PromQL: the GR TSGs by pod (last %r)" % (by_pod(prom.query(gr)),))
    classes = {s[0]["pod"]: s[0]["class"] for s in prom.query(gr)}
    expect(classes == {"lc": "latency-critical", "be": "best-effort"}, "classes: %r" % classes)
    be_all = by_pod(prom.query('gpuqos_tsg_timeslice_applied_seconds{pod="be"}'))
    expect(be_all == {"be": [0.00005, 0.001024, 0.001024, 0.001024]}, "the BE's four TSGs: %r" % be_all)
    shared = prom.query("gpuqos_gpu_lc_shares_runlist_with_be")
    expect(shared and all(v == 1 for _, v in shared), "LC and BE share the GR runlist: %r" % shared)

    # Scrapers that connect and never send a request, more than the server
    # takes: the agent's loop does not notice (a flip still lands, ctl
    # answers), and /metrics serves again once they go.
    host, port = base[len("http://"):].rsplit(":", 1)
    stuck = [socket.create_connection((host, int(port))) for _ in range(40)]
    try:
        node.set_annotation("lc", "gpu.qos", "best-effort")
        wait_for(lambda: gr_timeslice(node, lc.pid) == [2048] and gr_timeslice(node, be.pid) == [2048],
                 timeout=5, what="a flip while scrapers hang")
        expect(len(node.ctl("list")["processes"]) >= 2, "ctl answers while scrapers hang")
    finally:
        for c in stuck:
            c.close()
    node.set_annotation("lc", "gpu.qos", "latency-critical")
    wait_for(lambda: gr_timeslice(node, lc.pid) == [100000] and gr_timeslice(node, be.pid) == [50],
             timeout=5, what="flipped back")
    wait_for(lambda: http_get(base + "/metrics")[0] == 200, what="/metrics after the stuck scrapers")

    # The BE exits: its series go (Prometheus marks them stale at once).
    be.kill()
    be.wait()
    wait_for(lambda: not prom.query('gpuqos_tsg_info{pod="be"}'), timeout=30,
             what="the BE's series gone after it exits")
    expect(len(prom.query('gpuqos_tsg_info{pod="lc"}')) == 4, "the LC's four TSGs stay")
    wait_for(lambda: all(v == 0 for _, v in prom.query("gpuqos_gpu_lc_shares_runlist_with_be")),
             timeout=30, what="no LC shares a runlist with a BE any more")


def t_kube_publish(node):
    """A dense node: 300 pods of this node that run nothing on the GPU, one
    LC and one BE that do. Once the state is written and nothing changes,
    a publishing pass (one per batch of events) visits no pod: only pods
    whose records changed, or that the watch changed, are visited; the
    agent's own counts of passes and pods visited say so. A pod that
    changes is visited once, and a GPU pod whose process left is visited
    (its annotations go), then no more."""
    node.add_pod("lc", "latency-critical")
    node.add_pod("be", "best-effort")
    for i in range(300):
        node.st.upsert({"metadata": {"name": "idle-%d" % i, "namespace": NS, "uid": "idle-%05d" % i,
                                     "annotations": {}},
                        "spec": {"nodeName": NODE, "containers": [{"name": "main"}]},
                        "status": {"phase": "Running"}})
    node.start_kube_agent()
    lc = node.in_pod("lc", "lc")
    be = node.in_pod("be", "be")
    wait_for(lambda: converged(node, "lc", "be"), timeout=30, what="the GPU pods' state written")
    wait_for(lambda: node.kube_view()["pods"] == 302, what="every pod of the node cached")

    def counts():
        v = node.kube_view()
        return v["publishPasses"], v["publishedPods"]

    def per_pass(seconds):
        p0, n0 = counts()
        wait_for(lambda: counts()[0] >= p0 + 5, timeout=seconds, what="five publishing passes")
        p1, n1 = counts()
        return (n1 - n0) / (p1 - p0)

    # Nothing changed: no pod visited, GPU pods included (before this,
    # every reconcile pass visited both GPU pods, and earlier all 302).
    visited = per_pass(30)
    expect(visited == 0.0, "an unchanged node: no pod visited: %.1f pods a pass" % visited)
    # A change on an idle pod brings it into the next pass, once (a change
    # of an annotation the agent reads: the API client keeps no other).
    p0, n0 = counts()
    node.set_annotation("idle-7", "gpu.qos", "best-effort")
    wait_for(lambda: counts()[0] >= p0 + 5, timeout=30, what="five passes after a change")
    p1, n1 = counts()
    expect(n1 - n0 == 1, "the changed pod visited once: %d pods in %d passes" % (n1 - n0, p1 - p0))
    # The BE leaves: its pod is visited (annotations removed), then no pod.
    be.kill()
    be.wait()
    wait_for(lambda: "gpuqos.io/state" not in node.ann("be"), timeout=30, what="the BE pod's annotations removed")
    # The LC's settings follow (no BE beside it any more); then it is quiet.
    wait_for(lambda: per_pass(30) == 0.0, timeout=90, what="no pod visited once the BE's went")
    lc.kill()
    lc.wait()


def t_kube_windows(node):
    """gpuqos.io/windows on an LC pod (docs/kubernetes.md): a number of µs
    turns windows on for that LC alone, the node default being off: the
    BE's preempt agent gets a WINDOW around the LC's requests and says it
    holds it, and the LC pod's gpuqos.io/state shows the windows; "off"
    ends them; an invalid value (here with a NUL) is the node default (no
    windows) and one InvalidWindows Event naming it, however often the pod
    changes; a valid value after it is taken again. A value whose window
    does not fit the pods' 30 % (1850 µs after 1200 before, at 10 ms) is
    refused: no WINDOW, and the decision (refused, "cap") in the pod's
    state, gpuqosctl's list and /metrics."""
    node.add_pod("lc", "latency-critical")
    node.add_pod("be", "best-effort")
    node.set_annotation("lc", "gpuqos.io/windows", "1500")
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    node.start_kube_agent(config={"version": 1}, extra=["--metrics-address", base[len("http://"):]])
    lib = node.bin("tests/preempt/fake-libcuda/libcuda.so.1")
    # Requests every 10 ms: its preempt agent reports their phase. 1200 µs
    # before and 1500 after is 27 % of the period, within the pods' 30 %.
    lc = node.in_pod("lc", "lc", args=("--hold", "60", "--libcuda", lib, "--launch-every-us", "10000"),
                     prefix=EAGER)
    be = node.in_pod("be", "be")

    def win():
        return (proc_row(node, be.pid) or {}).get("window")

    w = wait_for(lambda: (win() or {}).get("held") and win(), timeout=30,
                 what="the BE holding a window around the LC's requests")
    expect(w["lcPid"] == lc.pid and w["afterUs"] == 1500 and w["beforeUs"] == 1200,
           "the pod's 1500 µs: %r" % w)
    expect((proc_row(node, lc.pid) or {}).get("window") is None, "the LC gets none itself")
    wait_for(lambda: (node.gq_state("lc") or {}).get("windows") == {"ask": 1500, "afterUs": 1500},
             what="the LC pod's state")
    expect("windows" not in (node.gq_state("be") or {}), "the BE's state: %r" % node.gq_state("be"))
    expect((proc_row(node, lc.pid) or {}).get("windows", {}).get("given") is True,
           "ctl: given %r" % proc_row(node, lc.pid))

    # 1850: over the cap. Refused, with the reason, on every face.
    node.set_annotation("lc", "gpuqos.io/windows", "1850")
    wait_for(lambda: win() is None, timeout=10, what="the BE's window ended by the cap")
    wait_for(lambda: (node.gq_state("lc") or {}).get("windows") == {"ask": 1850, "refused": "cap"},
             what="the LC pod's state: refused by the cap")
    row = (proc_row(node, lc.pid) or {}).get("windows") or {}
    expect(row.get("given") is False and row.get("refused") == "cap" and row.get("ask") == 1850
           and row.get("capPercent") == 30 and row.get("afterUs") is None, "ctl: refused %r" % row)
    # /metrics renders once a render interval.
    text = wait_for(lambda: (lambda r: r[0] == 200 and re.search(
        r'^gpuqos_tsg_windows_refused\{[^}]*pod="lc"[^}]*reason="cap"\} 1$', r[1], re.M) and r[1])(
            http_get(base + "/metrics")), what="/metrics: refused by the cap")
    expect(not re.search(r'^gpuqos_tsg_windows_given_after_seconds\{[^}]*pod="lc"', text, re.M),
           "/metrics: none given")

    # "off": the schedule ends, and no other is sent.
    node.set_annotation("lc", "gpuqos.io/windows", "1500")
    wait_for(lambda: (win() or {}).get("held"), timeout=30, what="the window back at 1500")
    node.set_annotation("lc", "gpuqos.io/windows", "off")
    wait_for(lambda: win() is None, timeout=10, what="the BE's window ended")
    wait_for(lambda: (node.gq_state("lc") or {}).get("windows") == {"ask": "off", "refused": "askedOff"},
             what="state: asked off")
    sent = node.ctl("list")["agent"]["counters"]["windowsSent"]
    time.sleep(1.0)  # four renewals' time
    expect(win() is None and node.ctl("list")["agent"]["counters"]["windowsSent"] == sent,
           "nothing sent while off: %r" % win())

    # Invalid: the default (off), one Event naming the value.
    node.set_annotation("lc", "gpuqos.io/windows", "auto\x00junk")
    wait_for(lambda: node.events("InvalidWindows"), what="an InvalidWindows Event")
    ev = node.events("InvalidWindows")[0]
    expect(ev["type"] == "Warning" and ev["regarding"]["uid"] == node.pods["lc"][0]
           and "gpuqos.io/windows" in ev["note"] and "junk" in ev["note"]
           and "default windows (off)" in ev["note"], "the Event names the pod and value: %r" % ev)
    node.set_annotation("lc", "unrelated", "x")  # the pod changes, the value does not
    time.sleep(1.0)
    expect(len(node.events("InvalidWindows")) == 1, "one Event per pod and value: %r"
           % node.events("InvalidWindows"))
    expect(win() is None and "windows" not in node.gq_state("lc"), "invalid: no windows %r" % win())
    expect(node.ann("lc").get("gpuqos.io/class") == "latency-critical", "the class is untouched")
    expect(node.events("InvalidQoSClass") == [], "no InvalidQoSClass: %r" % node.events())

    # A valid value again: windows again.
    node.set_annotation("lc", "gpuqos.io/windows", "1400")
    wait_for(lambda: (win() or {}).get("afterUs") == 1400, timeout=30, what="the window back at 1400")
    wait_for(lambda: (node.gq_state("lc") or {}).get("windows", {}).get("afterUs") == 1400,
             what="state 1400")
    expect(len(node.events("InvalidWindows")) == 1, "no further Event: %r" % node.events("InvalidWindows"))
    lc.kill()
    be.kill()
    lc.wait()
    be.wait()


def t_kube_memory(node):
    """gpuqos.io/gpu-memory (docs/kubernetes.md): a pod's annotation is its
    processes' video-memory budget per GPU, sent by the agent to the real
    preempt agent (gpuqosctl list: limitBytes, podLimitBytes); a pod
    without one gets its class's default from the policy file; a value that
    is not a size gets that default and one InvalidGPUMemory Event naming
    it, however often the pod changes; a valid value after it is taken."""
    node.add_pod("a", "best-effort")
    node.add_pod("b", "best-effort")
    node.set_annotation("a", "gpuqos.io/gpu-memory", "2Gi")
    node.set_annotation("b", "gpuqos.io/gpu-memory", "16GB")
    node.start_kube_agent(config={"version": 1, "memory": {"defaults": {"best-effort": "1Gi"}}})
    pa = node.in_pod("a", "be")
    pb = node.in_pod("b", "be")

    def limit(pid):
        rows = (proc_row(node, pid) or {}).get("memory") or []
        return (rows[0].get("limitBytes"), rows[0].get("podLimitBytes")) if rows else None

    gi = 1 << 30
    wait_for(lambda: limit(pa.pid) == (2 * gi, 2 * gi), timeout=30, what="pod a's 2Gi budget")
    wait_for(lambda: limit(pb.pid) == (gi, gi), timeout=30, what="pod b's class default (1Gi)")
    wait_for(lambda: node.events("InvalidGPUMemory"), what="an InvalidGPUMemory Event")
    ev = node.events("InvalidGPUMemory")[0]
    expect(ev["type"] == "Warning" and ev["regarding"]["uid"] == node.pods["b"][0]
           and "16GB" in ev["note"] and "unknown suffix" in ev["note"]
           and "default budget (1Gi)" in ev["note"], "the Event names the pod and value: %r" % ev)
    node.set_annotation("b", "unrelated", "x")  # the pod changes, the value does not
    time.sleep(1.0)
    expect(len(node.events("InvalidGPUMemory")) == 1, "one Event per pod and value: %r"
           % node.events("InvalidGPUMemory"))
    expect(not node.events("InvalidGPUMemory") or
           all(e["regarding"]["uid"] != node.pods["a"][0] for e in node.events("InvalidGPUMemory")),
           "no Event for the valid pod")
    node.set_annotation("b", "gpuqos.io/gpu-memory", "3Gi")
    wait_for(lambda: limit(pb.pid) == (3 * gi, 3 * gi), timeout=30, what="pod b's 3Gi")
    expect(len(node.events("InvalidGPUMemory")) == 1, "no further Event")
    for p in (pa, pb):
        p.kill()
        p.wait()


SCENARIOS = {"kube_classes": t_kube_classes, "kube_admission": t_kube_admission, "kube_outage": t_kube_outage,
             "kube_valgrind": t_kube_valgrind, "kube_metrics": t_kube_metrics,
             "kube_publish": t_kube_publish, "kube_windows": t_kube_windows,
             "kube_memory": t_kube_memory}


def main():
    return run_scenario(SCENARIOS, KubeNode, "the simulator's FUSE mount and pod cgroups")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_plugin_e2e.py - an Allocate response, applied by a real container runtime.

The device plugin (shares mode) serves the grpc-go test kubelet; the test
asks Allocate for an LC share and starts a `crun` container with exactly
the environment, mounts and devices of the answer, plus what the test
stands in for: the root filesystem (read-only binds of the host's /usr,
/lib, ...), the GPU the NVIDIA runtime would add for NVIDIA_VISIBLE_DEVICES
(here the simulator's nvidiactl, at the path the node agent knows), the
workload binary, and a gate directory. The container waits at the gate
until the test has moved it into its pod's container cgroup
(kubepods.slice/.../cri-containerd-<id>.scope on the host's cgroup v2
tree, as a kubelet would have it), then runs the fake CUDA workload. Checks,
from the simulator and the node agent (Kubernetes mode, the test API
server): the preempt agent loaded from the versioned mount and registered
over the mounted socket directory, the agent mapped the process to the pod
through its cgroup, and the pod's gpu.qos annotation reached the simulated
TSG.

Usage: test_plugin_e2e.py --build BUILD --kubelet-build SCRIPT:OUTDIR SCENARIO
(exit 77 = skipped, with a reason)
"""
import argparse
import json
import os
import subprocess
import sys
import time

# The test library (tests/lib, PYTHONPATH from ctest); the test kubelet is
# test_plugin.py's, beside this file.
from gpuqos_test import SKIP, Skip, wait_for
from gpuqos_test import check as expect
from gpuqos_test import oci
from gpuqos_test.kube import NODE, KubeNode, converged
from gpuqos_test.node import gr_timeslice, proc_row, run_scenario
from test_plugin import Kubelet

LC_US, BE_US = 100000, 50  # the default policy's timeslices, LC beside a BE (docs/policy.md)


class PluginNode(KubeNode):
    """A KubeNode with the device plugin and the test kubelet."""

    def __init__(self, build, kubelet_bin):
        why = oci.why_not()
        if why:
            raise Skip(why)
        super().__init__(build)
        self.plugin = None
        self.kubelet = None
        self.container = None
        self.dp = os.path.join(self.dir, "dp")
        self.lib = os.path.join(self.dir, "lib")
        os.makedirs(self.dp)
        self.kubelet = Kubelet(kubelet_bin, self.dp, open(os.path.join(self.dir, "kubelet.log"), "w"))

    def start_plugin(self):
        subprocess.run([self.bin("agent/gpuqos-agent"), "--install-preempt-lib",
                        self.bin("agent/preempt/libgpuqos-preempt.so"), "--preempt-lib-dir", self.lib],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log = open(os.path.join(self.dir, "plugin.log"), "w")
        self.plugin = subprocess.Popen(
            [self.bin("plugin/gpuqos-device-plugin"), "--mode", "shares", "--device-plugin-dir", self.dp,
             "--preempt-lib-dir", self.lib, "--node-agent-socket-dir", self.dir,
             "--nvidiactl", self.dev, "--nvml-lib", "none", "--log-level", "debug"],
            stdout=subprocess.DEVNULL, stderr=log, env=self.env)
        r = self.kubelet.cmd(op="wait_register", n=2, timeout_ms=10000)
        expect(r["ok"], "the plugin registered: %r" % r)

    def close(self):
        try:
            if self.container:
                self.container.stop()
            if self.plugin and self.plugin.poll() is None:
                self.plugin.terminate()
                self.plugin.wait(20)
            if self.kubelet:
                self.kubelet.close()
        finally:
            super().close()

    def dump(self):
        super().dump()
        for name in ("plugin.log", "kubelet.log"):
            p = os.path.join(self.dir, name)
            if os.path.exists(p):
                sys.stderr.write("---- %s\n%s\n" % (name, open(p).read()[-4000:]))
        if self.container:
            sys.stderr.write("---- container\n%s\n" % self.container.text()[-4000:])


def container_from(node, resp, name, args, standins):
    """The OCI container of one ContainerAllocateResponse."""
    mounts, links = oci.host_root_mounts()
    for m in resp["mounts"]:
        mounts.append(oci.bind(m["host_path"], m["container_path"], ro=m["read_only"]))
    for d in resp["devices"]:
        mounts.append(oci.bind(d["host_path"], d["container_path"]))
    expect(not resp["cdi"], "no CDI devices in envvar mode: %r" % resp["cdi"])
    env = dict(resp["envs"], PATH="/usr/sbin:/usr/bin:/sbin:/bin")
    return oci.Container(node.dir, name, args, env, mounts + standins, [], links=links)


def container_pid(cid, timeout=10):
    def pid():
        p = subprocess.run(["crun", "state", cid], capture_output=True, text=True)
        if p.returncode != 0:
            return None
        st = json.loads(p.stdout)
        return st.get("pid") if st.get("status") == "running" else None
    return wait_for(pid, timeout=timeout, what="the container running")


def start_agent(node):
    """The node agent in Kubernetes mode, with the eBPF tracker when this
    host can run it (Kubernetes mode had not run with it before)."""
    mode = ["--node-name", NODE, "--kubeconfig", node.kubeconfig,
            "--pod-resources-socket", os.path.join(node.dir, "kubelet", "kubelet.sock")]
    try:
        node.start_agent(bpf=True, mode=mode)
        return True
    except Skip as e:
        print("note: without the eBPF tracker:", e)
        node.start_agent(bpf=False, mode=mode)
        return False


def t_crun(node):
    uid = node.add_pod("lc", "latency-critical")
    tracker = start_agent(node)
    node.start_plugin()
    u = node.sim_state()["attached_gpus"][0]["uuid"]
    a = node.kubelet.cmd(op="allocate", endpoint="gpuqos.io_gpu-lc.sock", containers=[[u + "::0"]])
    expect(a["ok"], "Allocate: %r" % a)
    resp = a["containers"][0]
    expect(resp["envs"].get("NVIDIA_VISIBLE_DEVICES") == u, "the GPU by UUID: %r" % resp["envs"])
    gate = os.path.join(node.dir, "gate")
    os.makedirs(gate)
    work = node.bin("tests/e2e/e2e-fakecuda")
    standins = [oci.bind(node.dev, node.dev),  # what the NVIDIA runtime adds for the UUID
                oci.bind(os.path.dirname(work), os.path.dirname(work), ro=True),
                oci.bind(gate, "/gate", ro=True)]
    args = ["/bin/sh", "-c", 'while [ ! -e /gate/go ]; do sleep 0.05; done; exec "$0" "$@"',
            work, "--dev", node.dev, "--hold", "60"]
    node.container = container_from(node, resp, "lc", args, standins).start()
    pid = container_pid(node.container.id)
    with open(os.path.join(node.pods["lc"][2], "cgroup.procs"), "w") as f:
        f.write(str(pid))
    open(os.path.join(gate, "go"), "w").close()

    # The policy shortens a BE only beside an LC: a BE pod on the host
    # makes the LC class visible in the simulator.
    node.add_pod("be", "best-effort")
    be = node.in_pod("be", "be")
    wait_for(lambda: gr_timeslice(node, pid) == [LC_US] and gr_timeslice(node, be.pid) == [BE_US],
             timeout=20, what="simulator: LC %d on the container's GR TSG, BE %d beside it" % (LC_US, BE_US))
    row = proc_row(node, pid)
    expect(row and row["podUid"] == uid and row["podName"] == "lc"
           and row["containerId"] == node.pods["lc"][1]
           and row["class"] == "latency-critical" and row["classSource"] == "annotation"
           and row["connected"],
           "the process, its preempt agent connected, is mapped to its pod through its cgroup: %r" % row)
    with open("/proc/%d/maps" % pid) as f:
        maps = f.read()
    expect("/opt/gpuqos/lib/libgpuqos-preempt.so" in maps,
           "the preempt agent is loaded from the mounted versioned directory")
    st = wait_for(lambda: (converged(node, "lc") or [{}])[0].get("tsgs") == 4
                  and node.gq_state("lc"), timeout=15, what="the pod's state annotation, 4 TSGs")
    # With the tracker on, it may see the TSGs before the preempt agent
    # connects and the direct path sets them first: "in-process,direct".
    expect("in-process" in st["controlPath"].split(","),
           "the preempt agent registered with the node agent and carried controls: %r" % st)
    if tracker:
        # The two sources report independently: wait until both have
        # told the agent of every TSG (the order is the scheduler's).
        def both_saw():
            tsgs = [t for t in node.ctl("list")["tsgs"] if t["pid"] == pid]
            if len(tsgs) == 4 and all(sorted(t["sources"]) == ["bpf", "preempt"] for t in tsgs):
                return tsgs
            return None
        wait_for(both_saw, timeout=15,
                 what="the eBPF tracker and the preempt agent both saw the container's 4 TSGs")


SCENARIOS = {"crun": t_crun}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--kubelet-build", required=True)
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    a = ap.parse_args()
    script, out = a.kubelet_build.split(":", 1)
    rc = subprocess.run(["sh", script, out]).returncode
    if rc:
        return SKIP if rc == SKIP else 1
    kubelet_bin = os.path.join(out, "kubelet")
    sys.argv = [sys.argv[0], "--build", a.build, a.scenario]
    return run_scenario(SCENARIOS, lambda build: PluginNode(build, kubelet_bin),
                        "the simulator, pod cgroups and crun")


if __name__ == "__main__":
    sys.exit(main())

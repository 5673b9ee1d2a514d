#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gpuqos-device-plugin against the grpc-go test kubelet (tests/plugin/kubelet).

Each scenario starts a fresh kubelet and plugin in a temporary device-plugin
directory; `shares` scenarios also mount the GPU simulator with two GPUs
(root and /dev/fuse, else skipped with 77). Expected values come from the
simulator's own state file and the test's fixtures, never from the plugin.

usage: test_plugin.py --build BUILD_DIR --kubelet KUBELET_BIN SCENARIO
"""
import argparse
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from gpuqos_test import SKIP, Skip, check, run_main
from gpuqos_test.sim import Sim


class Kubelet:
    """The test kubelet: one JSON command per line, one answer per line."""

    def __init__(self, binary, dpdir, log):
        self.p = subprocess.Popen([binary, "-dir", dpdir], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=log, text=True)

    def cmd(self, **c):
        self.p.stdin.write(json.dumps(c) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        check(line, "the test kubelet exited")
        return json.loads(line)

    def close(self):
        try:
            self.p.stdin.write('{"op":"quit"}\n')
            self.p.stdin.flush()
            self.p.wait(timeout=10)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()


class Env:
    def __init__(self, args, sim_gpus=0):
        self.args = args
        self.dir = tempfile.mkdtemp(prefix="gpuqos-plugin-")
        self.dp = os.path.join(self.dir, "dp")
        self.lib = os.path.join(self.dir, "lib")
        self.agentdir = os.path.join(self.dir, "run")
        os.makedirs(self.dp)
        os.makedirs(self.agentdir)
        self.sim_mnt = None
        self.plugin = None
        self.gpus = []
        self.events = os.path.join(self.dir, "nvml-events")
        open(self.events, "w").close()
        if sim_gpus:
            self.start_sim(sim_gpus)
        self.kubelet = Kubelet(args.kubelet, self.dp, open(os.path.join(self.dir, "kubelet.log"), "w"))

    def bin(self, rel):
        return os.path.join(self.args.build, rel)

    def start_sim(self, n):
        if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
            raise Skip("the simulator needs root and /dev/fuse")
        if not os.path.exists(self.bin("tests/sim/gpuqos-sim")):
            raise Skip("the simulator was not built (GPUQOS_SIM=OFF)")
        self.sim = Sim(self.bin("tests/sim"), gpus=n).__enter__()
        self.sim_mnt = self.sim.mnt
        with open(os.path.join(self.sim_mnt, "state")) as f:
            self.gpus = json.load(f)["attached_gpus"]
        # sysfs and procfs fixtures: GPU 0 on NUMA node 1 with minor 5,
        # GPU 1 without NUMA affinity and without a driver procfs entry.
        self.sysfs = os.path.join(self.dir, "sys")
        self.procfs = os.path.join(self.dir, "proc")
        for i, g in enumerate(self.gpus):
            bus = "0000" + g["pciBusId"][8:]
            d = os.path.join(self.sysfs, "bus/pci/devices", bus)
            os.makedirs(d)
            with open(os.path.join(d, "numa_node"), "w") as f:
                f.write("1\n" if i == 0 else "-1\n")
            if i == 0:
                d = os.path.join(self.procfs, "driver/nvidia/gpus", bus)
                os.makedirs(d)
                with open(os.path.join(d, "information"), "w") as f:
                    f.write("Model: \t\t SIM\nIRQ:   \t\t 42\nDevice Minor: \t 5\n")

    def install(self, src):
        """As the node agent's init container does; the unit-test binary's
        copy of the installer when the agent is not built."""
        agent = self.bin("agent/gpuqos-agent")
        if os.path.exists(agent):
            cmd = [agent, "--install-preempt-lib", src, "--preempt-lib-dir", self.lib]
        else:
            cmd = [self.bin("tests/plugin/test_plugin_unit"), "install", src, self.lib, "0.1.0"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return os.path.join(self.lib, os.readlink(os.path.join(self.lib, "current")))

    def install_lib(self):
        return self.install(self.bin("agent/preempt/libgpuqos-preempt.so"))

    def start_plugin(self, config=None, extra=(), plain=False, prefix=(), env_extra=None):
        cmd = list(prefix) + [self.bin("plugin/gpuqos-device-plugin-plain" if plain
                                       else "plugin/gpuqos-device-plugin"),
                              "--device-plugin-dir", self.dp, "--preempt-lib-dir", self.lib,
                              "--node-agent-socket-dir", self.agentdir, "--log-level", "debug"]
        if config is not None:
            path = os.path.join(self.dir, "config.json")
            with open(path, "w") as f:
                json.dump(config, f)
            cmd += ["--config", path]
        if self.sim_mnt:
            cmd += ["--nvidiactl", os.path.join(self.sim_mnt, "nvidiactl"),
                    "--sysfs-root", self.sysfs, "--procfs-root", self.procfs,
                    "--nvml-lib", self.bin("tests/plugin/libfake_nvml.so")]
        # The metrics endpoint's default port is one per host: only the
        # scenarios that scrape it ask for one.
        if "--metrics-address" not in extra and "GPUQOS_PLUGIN_METRICS_ADDRESS" not in (env_extra or {}):
            cmd += ["--metrics-address", "off"]
        cmd += list(extra)
        env = dict(os.environ, FAKE_NVML_EVENTS=self.events, **(env_extra or {}))
        self.plugin_log = os.path.join(self.dir, "plugin.log")
        self.plugin = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env,
                                       stderr=open(self.plugin_log, "a"))
        return self.plugin

    def stop_plugin(self, sig=signal.SIGTERM):
        if self.plugin and self.plugin.poll() is None:
            self.plugin.send_signal(sig)
            rc = self.plugin.wait(timeout=20)
            self.plugin = None
            return rc
        return None

    def close(self, ok):
        self.stop_plugin()
        self.kubelet.close()
        if self.sim_mnt:
            self.sim.__exit__(None, None, None)
        if not ok:
            for name in ("plugin.log", "kubelet.log"):
                p = os.path.join(self.dir, name)
                if os.path.exists(p):
                    sys.stderr.write("---- %s\n%s" % (name, open(p).read()[-6000:]))
        shutil.rmtree(self.dir, ignore_errors=True)


def register(env, n, timeout_ms=10000):
    r = env.kubelet.cmd(op="wait_register", n=n, timeout_ms=timeout_ms)
    check(r["ok"], "expected %d registrations, got %s" % (n, r))
    return sorted(r["regs"], key=lambda x: x["resource"])


def ids(resp):
    return [d["id"] for d in resp["devices"]]


SHARES = {"version": 1, "mode": "shares", "replicas": 4, "lcReplicas": 1}
INJECT = {"version": 1, "mode": "inject", "injectDevices": 100}
BE, LC, QOS = "gpuqos.io_gpu.sock", "gpuqos.io_gpu-lc.sock", "gpuqos.io_qos.sock"


def t_inject(env):
    libdir = env.install_lib()
    env.start_plugin(INJECT)
    regs = register(env, 1)
    check(regs[0]["resource"] == "gpuqos.io/qos" and regs[0]["endpoint"] == QOS
          and regs[0]["version"] == "v1beta1", "registration %s" % regs)
    o = env.kubelet.cmd(op="options", endpoint=QOS)
    check(o["ok"] and not o["preferred"] and not o["prestart"], "options %s" % o)
    w = env.kubelet.cmd(op="watch", endpoint=QOS)
    check(ids(w) == ["qos-%d" % i for i in range(100)], "inject ids %s" % ids(w)[:5])
    check(all(d["health"] == "Healthy" and d["numa"] == [] for d in w["devices"]), "health")
    a = env.kubelet.cmd(op="allocate", endpoint=QOS, containers=[["qos-1"], ["qos-2", "qos-7"]])
    check(a["ok"] and len(a["containers"]) == 2, "allocate %s" % a)
    for c, want in zip(a["containers"], ["qos-1", "qos-2,qos-7"]):
        check(c["envs"] == {"GPUQOS_ALLOCATION": want, "GPUQOS_RESOURCE": "gpuqos.io/qos",
                            "LD_PRELOAD": "/opt/gpuqos/lib/libgpuqos-preempt.so"},
              "envs %s" % c["envs"])
        check(c["devices"] == [] and c["cdi"] == [], "inject mode gives no GPU: %s" % c)
        mounts = sorted((m["container_path"], m["host_path"], m["read_only"]) for m in c["mounts"])
        check(mounts == [("/opt/gpuqos/lib", libdir, True), ("/run/gpuqos", env.agentdir, True)],
              "mounts %s" % mounts)
    # A new library switches `current`; the answer names the new version
    # directory while the old one stays as it was.
    old = libdir
    src = os.path.join(env.dir, "libgpuqos-preempt.so")
    shutil.copy(env.bin("agent/preempt/libgpuqos-preempt.so"), src)
    with open(src, "ab") as f:
        f.write(b"\0new version")
    env.install(src)
    a = env.kubelet.cmd(op="allocate", endpoint=QOS, containers=[["qos-3"]])
    new = [m["host_path"] for m in a["containers"][0]["mounts"] if m["container_path"] == "/opt/gpuqos/lib"]
    check(new and new[0] != old and os.path.isfile(os.path.join(old, "libgpuqos-preempt.so")),
          "after a new install: %s (old %s)" % (new, old))


def t_inject_ld_so_preload(env):
    libdir = env.install_lib()
    env.start_plugin(dict(INJECT, injection="ld-so-preload"))
    register(env, 1)
    a = env.kubelet.cmd(op="allocate", endpoint=QOS, containers=[["qos-0"]])
    c = a["containers"][0]
    check("LD_PRELOAD" not in c["envs"], "no LD_PRELOAD with ld-so-preload: %s" % c["envs"])
    m = [m for m in c["mounts"] if m["container_path"] == "/etc/ld.so.preload"]
    check(m and m[0]["host_path"] == os.path.join(libdir, "ld.so.preload") and m[0]["read_only"],
          "ld.so.preload mount %s" % c["mounts"])
    with open(m[0]["host_path"]) as f:
        check(f.read() == "/opt/gpuqos/lib/libgpuqos-preempt.so\n", "ld.so.preload content")


def t_no_lib(env):
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ctl.bind(os.path.join(env.agentdir, "ctl.sock"))
    env.start_plugin(INJECT)
    register(env, 1)
    a = env.kubelet.cmd(op="allocate", endpoint=QOS, containers=[["qos-0"]])
    c = a["containers"][0]
    check(a["ok"] and "LD_PRELOAD" not in c["envs"] and
          [m["container_path"] for m in c["mounts"]] == ["/run/gpuqos"],
          "without an installed library the container runs without it: %s" % c)
    log = open(env.plugin_log).read()
    check("ctl.sock: a socket other than agent.sock" in log, "the exposed ctl socket is reported")
    ctl.close()


def sim_ids(env, per):
    return ["%s::%d" % (g["uuid"], n) for g in env.gpus for n in range(per)]


def t_shares(env):
    env.install_lib()
    env.start_plugin(SHARES)
    regs = register(env, 2)
    check([(r["resource"], r["endpoint"], r["preferred"]) for r in regs] ==
          [("gpuqos.io/gpu", BE, True), ("gpuqos.io/gpu-lc", LC, True)], "registrations %s" % regs)
    for ep in (BE, LC):
        o = env.kubelet.cmd(op="options", endpoint=ep)
        check(o["ok"] and o["preferred"] and not o["prestart"], "options %s" % o)
    w = env.kubelet.cmd(op="watch", endpoint=BE)
    check(ids(w) == sim_ids(env, 4), "BE ids %s" % ids(w))
    check([d["numa"] for d in w["devices"]] == [[1]] * 4 + [[]] * 4, "NUMA %s" % w["devices"])
    lw = env.kubelet.cmd(op="watch", endpoint=LC)
    check(ids(lw) == sim_ids(env, 1), "LC ids %s" % ids(lw))
    u0, u1 = env.gpus[0]["uuid"], env.gpus[1]["uuid"]
    a = env.kubelet.cmd(op="allocate", endpoint=BE,
                        containers=[[u0 + "::0"], [u1 + "::2"], [u0 + "::1", u1 + "::3"]])
    check(a["ok"], "allocate %s" % a)
    vis = [c["envs"].get("NVIDIA_VISIBLE_DEVICES") for c in a["containers"]]
    check(vis == [u0, u1, u0 + "," + u1], "NVIDIA_VISIBLE_DEVICES %s" % vis)
    check(a["containers"][2]["envs"]["GPUQOS_ALLOCATION"] == u0 + "::1," + u1 + "::3", "allocation env")
    a = env.kubelet.cmd(op="allocate", endpoint=LC, containers=[[u1 + "::0"]])
    check(a["ok"] and a["containers"][0]["envs"]["GPUQOS_RESOURCE"] == "gpuqos.io/gpu-lc", "LC %s" % a)
    # a BE id is not an LC id
    a = env.kubelet.cmd(op="allocate", endpoint=LC, containers=[[u1 + "::1"]])
    check(not a["ok"] and a["code"] == 3 and "unknown device id" in a["error"], "LC bad id %s" % a)


def t_visibility(env):
    u0, u1 = env.gpus[0]["uuid"], env.gpus[1]["uuid"]
    env.start_plugin(dict(SHARES, visibility="cdi"))
    register(env, 2)
    a = env.kubelet.cmd(op="allocate", endpoint=BE, containers=[[u0 + "::0", u1 + "::0"]])
    c = a["containers"][0]
    check(c["cdi"] == ["nvidia.com/gpu=" + u0, "nvidia.com/gpu=" + u1] and
          "NVIDIA_VISIBLE_DEVICES" not in c["envs"] and c["devices"] == [], "cdi %s" % c)
    env.stop_plugin()
    env.kubelet.cmd(op="disconnect")
    env.start_plugin(dict(SHARES, visibility="devices"))
    register(env, 2)
    a = env.kubelet.cmd(op="allocate", endpoint=BE, containers=[[u0 + "::0", u1 + "::0"]])
    c = a["containers"][0]
    # GPU 0's minor is in the procfs fixture (5); GPU 1 has none: its device instance
    want = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia5", "/dev/nvidia1"]
    check([d["host_path"] for d in c["devices"]] == want and
          all(d["container_path"] == d["host_path"] and d["permissions"] == "rw" for d in c["devices"]),
          "devices %s" % c["devices"])


def t_health(env):
    env.start_plugin(SHARES)
    register(env, 2)
    u0, u1 = env.gpus[0]["uuid"], env.gpus[1]["uuid"]
    w = env.kubelet.cmd(op="watch", endpoint=BE)
    lw = env.kubelet.cmd(op="watch", endpoint=LC)
    check(all(d["health"] == "Healthy" for d in w["devices"]), "all healthy at start")
    with open(env.events, "a") as f:  # ignored XIDs: no change
        for x in (13, 31, 43, 45, 68, 109):
            f.write("%s %d\n" % (u1, x))
    n = env.kubelet.cmd(op="next", stream=w["stream"], timeout_ms=1500)
    check(not n["ok"] and n["error"] == "timeout", "an ignored XID changed the list: %s" % n)
    with open(env.events, "a") as f:
        f.write("%s 79\n" % u1)
    for s in (w, lw):
        n = env.kubelet.cmd(op="next", stream=s["stream"], timeout_ms=5000)
        check(n["ok"], "no update after XID 79: %s" % n)
        bad = sorted(d["id"] for d in n["devices"] if d["health"] == "Unhealthy")
        check(bad == sorted(i for i in ids(s) if i.startswith(u1)), "unhealthy %s" % bad)
        check(ids(n) == ids(s), "the full list every time")


def t_preferred(env):
    u0, u1 = env.gpus[0]["uuid"], env.gpus[1]["uuid"]
    env.start_plugin(SHARES)
    register(env, 2)
    every = sim_ids(env, 4)
    p = env.kubelet.cmd(op="preferred", endpoint=BE, requests=[{"available": every, "must": [], "size": 2}])
    check(p["ok"] and sorted(x.split("::")[0] for x in p["containers"][0]) == [u0, u1], "spread %s" % p)
    # GPU 0 busier (one share left): spread picks GPU 1 first
    avail = [u0 + "::3"] + [u1 + "::%d" % i for i in range(4)]
    p = env.kubelet.cmd(op="preferred", endpoint=BE, requests=[{"available": avail, "must": [], "size": 1}])
    check(p["containers"][0][0].startswith(u1), "spread to the emptier GPU %s" % p)
    p = env.kubelet.cmd(op="preferred", endpoint=BE,
                        requests=[{"available": avail, "must": [u1 + "::2"], "size": 2}])
    check(p["containers"][0][0] == u1 + "::2" and len(set(p["containers"][0])) == 2, "must include %s" % p)
    # LC with lcReplicas 2: GPU 0 already hosts LC work (::0 taken)
    env.stop_plugin()
    env.kubelet.cmd(op="disconnect")
    env.start_plugin(dict(SHARES, lcReplicas=2, preferredAllocation="pack"))
    register(env, 2)
    p = env.kubelet.cmd(op="preferred", endpoint=LC, requests=[
        {"available": [u0 + "::1", u1 + "::0", u1 + "::1"], "must": [], "size": 1}])
    check(p["ok"] and p["containers"][0] == [u1 + "::0"], "LC avoids a GPU with LC work %s" % p)
    # pack: BE fills the fuller GPU
    p = env.kubelet.cmd(op="preferred", endpoint=BE, requests=[{"available": avail, "must": [], "size": 1}])
    check(p["containers"][0] == [u0 + "::3"], "pack %s" % p)
    p = env.kubelet.cmd(op="preferred", endpoint=BE, requests=[{"available": every, "must": [], "size": 3}])
    check(len({x.split("::")[0] for x in p["containers"][0]}) == 1, "pack keeps one GPU %s" % p)
    p = env.kubelet.cmd(op="preferred", endpoint=BE, requests=[{"available": every[:2], "must": [], "size": 3}])
    check(not p["ok"] and p["code"] == 3, "size over available %s" % p)


def t_bad_input(env):
    env.install_lib()
    env.start_plugin(INJECT)
    register(env, 1)
    w = env.kubelet.cmd(op="watch", endpoint=QOS)
    cases = [
        ([["qos-1", "qos-1"]], "given twice"),
        ([["qos-100"]], "unknown device id"),
        ([["qos-01"]], "unknown device id"),
        ([["GPU-x::0"]], "unknown device id"),
        ([], "no container requests"),
        ([[]], "no device ids"),
    ]
    for containers, want in cases:
        a = env.kubelet.cmd(op="allocate", endpoint=QOS, containers=containers)
        check(not a["ok"] and a["code"] == 3 and want in a["error"], "%s: %s" % (containers, a))
    raw = [
        (b"\x0a\xff\xff\xff\x0f\x01", 3, "malformed"),
        (b"\x0a" * (2 << 20), 8, "larger than max"),
    ]
    for data, code, want in raw:
        a = env.kubelet.cmd(op="raw", endpoint=QOS, method="/v1beta1.DevicePlugin/Allocate",
                            data=base64.b64encode(data).decode())
        check(not a["ok"] and a["code"] == code and want in a["error"], "raw: %s" % a)
    a = env.kubelet.cmd(op="raw", endpoint=QOS, method="/v1beta1.DevicePlugin/Nope", data="")
    check(not a["ok"] and a["code"] == 12, "unknown method %s" % a)
    # a stream nobody reads does not hold up the others
    for _ in range(3):
        check(env.kubelet.cmd(op="stall", endpoint=QOS)["ok"], "stall")
    a = env.kubelet.cmd(op="allocate", endpoint=QOS, containers=[["qos-5"]])
    check(a["ok"], "Allocate after bad input and stalled streams: %s" % a)
    n = env.kubelet.cmd(op="next", stream=w["stream"], timeout_ms=500)
    check(not n["ok"] and n["error"] == "timeout", "bad input changed the device list: %s" % n)
    # streams are limited (8 per resource: the kubelet's + 3 stalled + 4): a
    # new one is refused, the kubelet's (the first after its registration)
    # stays
    for _ in range(4):
        check(env.kubelet.cmd(op="stall", endpoint=QOS)["ok"], "stall")
    x = env.kubelet.cmd(op="watch", endpoint=QOS)
    check(not x["ok"] and x.get("end") and x["code"] == 8, "a new stream at the limit refused: %s" % x)
    n = env.kubelet.cmd(op="next", stream=w["stream"], timeout_ms=500)
    check(not n["ok"] and n["error"] == "timeout", "the kubelet's stream stays open: %s" % n)
    a = env.kubelet.cmd(op="allocate", endpoint=QOS, containers=[["qos-6"]])
    check(a["ok"], "Allocate at the stream limit: %s" % a)
    check(env.plugin.poll() is None, "the plugin died")


def t_slot_thief(env):
    """A client on the plugin's socket that opens every ListAndWatch slot
    neither ends the kubelet's stream (the first after its registration;
    the kubelet does not open another) nor keeps a restarted kubelet out:
    it gets the 7 other slots, its next stream is refused, another reader's
    too, and the kubelet's stream stays open."""
    env.start_plugin(INJECT)
    register(env, 1)
    w = env.kubelet.cmd(op="watch", endpoint=QOS)
    check(w["ok"] and ids(w) == ["qos-%d" % i for i in range(100)], "the kubelet's stream: %s" % w)
    thief = [env.kubelet.cmd(op="stall", endpoint=QOS) for _ in range(8)]
    check(all(t["ok"] for t in thief[:7]), "the thief holds the 7 other slots: %s" % thief)
    r = env.kubelet.cmd(op="stall_result", stream=thief[7]["stream"], timeout_ms=10000)
    check(not r["ok"] and r.get("code") == 8 and r.get("messages") == 0,
          "the thief's 8th stream refused: %s" % r)
    x = env.kubelet.cmd(op="watch", endpoint=QOS)
    check(not x["ok"] and x.get("end") and x["code"] == 8, "a reading thief refused too: %s" % x)
    r = env.kubelet.cmd(op="stall_result", stream=thief[0]["stream"], timeout_ms=300)
    check(r.get("error") == "open", "the thief's first stream stays: %s" % r)
    n = env.kubelet.cmd(op="next", stream=w["stream"], timeout_ms=500)
    check(not n["ok"] and n["error"] == "timeout", "the kubelet's stream stays open: %s" % n)
    log = open(env.plugin_log).read()
    check("the limit; a new one refused" in log and "(the kubelet's, after its registration)" in log,
          "logged")
    # and after a kubelet restart the new kubelet registers and watches
    restart_check(env, (QOS,), {QOS: ids(w)})


def t_allocate_across(env):
    """One device id in two containers of one Allocate is refused, naming
    it; the same ids in one container each pass."""
    env.start_plugin(INJECT)
    register(env, 1)
    a = env.kubelet.cmd(op="allocate", endpoint=QOS, containers=[["qos-1", "qos-2"], ["qos-3", "qos-1"]])
    check(not a["ok"] and a["code"] == 3 and
          'device id "qos-1" given to container requests 0 and 1' in a["error"], "dup across: %s" % a)
    a = env.kubelet.cmd(op="allocate", endpoint=QOS, containers=[["qos-1", "qos-2"], ["qos-3"]])
    check(a["ok"] and len(a["containers"]) == 2, "distinct ids: %s" % a)


MAX_CALLS = 128  # plugin/server.h PSERVER_MAX_CALLS


def t_call_bound(env):
    """Calls that never send their request hold at most MAX_CALLS: more are
    answered RESOURCE_EXHAUSTED at once (and counted); the kubelet's own
    stream still opens; once they go, calls are answered again."""
    env.start_plugin(INJECT)
    register(env, 1)
    extra = 5
    p = env.kubelet.cmd(op="pending", endpoint=QOS, n=MAX_CALLS + extra, refused=extra, timeout_ms=30000)
    check(p["ok"] and p["refused"] == extra and p["other"] == [],
          "%d calls over the bound refused at once: %s" % (extra, p))
    a = env.kubelet.cmd(op="allocate", endpoint=QOS, containers=[["qos-1"]])
    check(not a["ok"] and a["code"] == 8 and "%d calls already in flight" % MAX_CALLS in a["error"]
          and "(%d refused so far)" % (extra + 1) in a["error"], "over the bound: %s" % a)
    w = env.kubelet.cmd(op="watch", endpoint=QOS)
    check(w["ok"], "ListAndWatch is not one of the bounded calls: %s" % w)
    check(env.kubelet.cmd(op="release")["ok"], "release")
    deadline = time.monotonic() + 15
    while True:  # the plugin sees the cancellations a moment later
        a = env.kubelet.cmd(op="allocate", endpoint=QOS, containers=[["qos-1"]])
        if a["ok"] or time.monotonic() > deadline:
            break
        check(a["code"] == 8, "only refused while the calls go: %s" % a)
        time.sleep(0.1)
    check(a["ok"], "answered again once the calls went: %s" % a)
    check(env.plugin.poll() is None, "the plugin died")


def t_stall(env):
    """A kubelet that never reads its stream: with 32 GPUs and 64 shares
    each the list (~120 KB) outgrows the reader's 64 KB window, the send
    never completes, and the stream is ended after the stall time; every
    other call goes on meanwhile."""
    env.start_plugin(dict(SHARES, replicas=64), env_extra={"GPUQOS_PLUGIN_STREAM_STALL_MS": "1500"})
    register(env, 2)
    st = env.kubelet.cmd(op="stall", endpoint=BE)
    check(st["ok"], "stall %s" % st)
    w = env.kubelet.cmd(op="watch", endpoint=BE)
    check(w["ok"] and len(w["devices"]) == 32 * 64, "a reading kubelet gets the list: %d" % len(w.get("devices", [])))
    a = env.kubelet.cmd(op="allocate", endpoint=BE, containers=[[w["devices"][0]["id"]]])
    check(a["ok"], "Allocate beside a stalled stream: %s" % a)
    time.sleep(2.5)
    r = env.kubelet.cmd(op="stall_result", stream=st["stream"], timeout_ms=5000)
    # Cut in the middle of a message, the stream cannot carry a status:
    # the reader sees it reset; the plugin's log says why.
    check(not r["ok"] and r.get("code") not in (None, 0) and r.get("error") != "open"
          and r.get("messages") == 0, "the unread stream is ended: %s" % r)
    n = env.kubelet.cmd(op="next", stream=w["stream"], timeout_ms=300)
    check(not n["ok"] and n["error"] == "timeout", "the reading stream stays open: %s" % n)
    check("read nothing for 1500 ms" in open(env.plugin_log).read(), "logged")


def t_coalesce(env):
    """Changes while a send is in flight are coalesced: the first list is
    larger than the reader's window, so its send stays in flight until the
    reader reads; two health changes meanwhile become one next message
    with both, not two."""
    env.start_plugin(dict(SHARES, replicas=64))
    register(env, 2)
    st = env.kubelet.cmd(op="stall", endpoint=BE)
    check(st["ok"], "stall %s" % st)
    time.sleep(0.5)
    u0, u1 = env.gpus[0]["uuid"], env.gpus[1]["uuid"]
    for n, u in enumerate((u0, u1), 1):
        with open(env.events, "a") as f:
            f.write("%s 79\n" % u)
        deadline = time.monotonic() + 10  # each its own generation
        while open(env.plugin_log).read().count("marked Unhealthy") < n and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # and a few of the servers' ticks
    check(open(env.plugin_log).read().count("marked Unhealthy") == 2, "both changes applied before the read")
    r = env.kubelet.cmd(op="stall_read", stream=st["stream"], timeout_ms=1500)
    msgs = r["messages"]
    check(len(msgs) == 2, "one list, then one coalesced update: %s" %
          [(m["devices"], len(m["unhealthy"])) for m in msgs])
    check(msgs[0]["unhealthy"] == [], "the first list was the one in flight")
    bad = sorted({i.split("::")[0] for i in msgs[1]["unhealthy"]})
    check(bad == sorted([u0, u1]) and len(msgs[1]["unhealthy"]) == 128, "both changes in one: %s" % bad)


def restart_check(env, eps, per_ep_ids):
    t = env.kubelet.cmd(op="restart")
    check(t["ok"], "restart %s" % t)
    regs = register(env, len(eps))
    late = max(r["at_ms"] for r in regs) - t["at_ms"]
    check(late < 2000, "re-registered %d ms after the kubelet restart" % late)
    for ep in eps:
        w = env.kubelet.cmd(op="watch", endpoint=ep)
        check(ids(w) == per_ep_ids[ep], "ids after restart differ on %s" % ep)


def t_kubelet_restart(env):
    env.start_plugin(SHARES)
    register(env, 2)
    before = {ep: ids(env.kubelet.cmd(op="watch", endpoint=ep)) for ep in (BE, LC)}
    for _ in range(2):
        restart_check(env, (BE, LC), before)
    os.kill(env.plugin.pid, signal.SIGHUP)
    regs = register(env, 2)
    check(len(regs) == 2, "SIGHUP re-registers")


def t_plugin_restart(env):
    env.start_plugin(INJECT)
    register(env, 1)
    w = env.kubelet.cmd(op="watch", endpoint=QOS)
    check(env.stop_plugin(signal.SIGKILL) == -signal.SIGKILL, "killed")
    n = env.kubelet.cmd(op="next", stream=w["stream"], timeout_ms=5000)
    check(not n["ok"] and n.get("end"), "the stream ends with the plugin: %s" % n)
    env.kubelet.cmd(op="disconnect")
    env.start_plugin(INJECT)  # a stale socket file is replaced
    register(env, 1)
    w2 = env.kubelet.cmd(op="watch", endpoint=QOS)
    check(ids(w2) == ids(w), "same ids after a plugin restart")
    check(env.stop_plugin(signal.SIGTERM) == 0, "clean exit on SIGTERM")
    check(not os.path.exists(os.path.join(env.dp, QOS)), "socket removed at exit")


def t_late_kubelet(env):
    """The plugin serves before any kubelet is there and registers as soon
    as kubelet.sock appears."""
    check(env.kubelet.cmd(op="stop")["ok"], "kubelet stopped")
    env.start_plugin(INJECT)
    sock = os.path.join(env.dp, QOS)
    deadline = time.monotonic() + 10
    while not os.path.exists(sock) and time.monotonic() < deadline:
        time.sleep(0.05)
    check(os.path.exists(sock), "the plugin serves without a kubelet")
    r = env.kubelet.cmd(op="wait_register", n=1, timeout_ms=700)
    check(not r["ok"], "no registration without a kubelet: %s" % r)
    t = env.kubelet.cmd(op="restart")
    regs = register(env, 1)
    check(regs[0]["at_ms"] - t["at_ms"] < 2000, "registered %d ms after the kubelet came"
          % (regs[0]["at_ms"] - t["at_ms"]))
    check(env.plugin.poll() is None, "still running")


def t_config(env):
    cases = [
        ({"version": 2}, "version 2 not supported"),
        ({"mode": "shares"}, "\"version\""),
        ({"version": 1, "replicas": 0}, "\"replicas\" must be an integer from 1 to 64"),
        ({"version": 1, "replicas": 2.5}, "\"replicas\""),
        ({"version": 1, "color": "red"}, "unknown key \"color\""),
        ({"version": 1, "visibility": "magic"}, "want one of envvar, cdi, devices"),
        ({"version": 1, "resourceName": "nodomain"}, "want \"domain/name\""),
        ({"version": 1, "resourceName": "kubernetes.io/gpu"}, "reserved"),
        ({"version": 1, "resourceName": "a/b", "lcResourceName": "a/b"}, "both"),
    ]
    for cfg, want in cases:
        path = os.path.join(env.dir, "bad.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        p = subprocess.run([env.bin("plugin/gpuqos-device-plugin"), "--config", path,
                            "--device-plugin-dir", env.dp], capture_output=True, text=True, timeout=10)
        check(p.returncode == 2 and want in p.stderr, "%s: rc %d %s" % (cfg, p.returncode, p.stderr))
    p = subprocess.run([env.bin("plugin/gpuqos-device-plugin"), "--help"], capture_output=True, text=True)
    check(p.returncode == 0 and "--device-plugin-dir" in p.stdout, "--help")
    # flags win over the environment
    p = subprocess.run([env.bin("plugin/gpuqos-device-plugin"), "--mode", "bogus"],
                       capture_output=True, text=True, env=dict(os.environ, GPUQOS_PLUGIN_MODE="inject"))
    check(p.returncode == 2 and "--mode \"bogus\"" in p.stderr, "flag over env: %s" % p.stderr)
    p = subprocess.run([env.bin("plugin/gpuqos-device-plugin")], capture_output=True, text=True,
                       env=dict(os.environ, GPUQOS_PLUGIN_MODE="bogus"))
    check(p.returncode == 2 and "GPUQOS_PLUGIN_MODE" in p.stderr, "env checked: %s" % p.stderr)


def registering_reason(env):
    """Why the cycle that made the last registration ran, from the log (the
    kubelet hears of a registration before the plugin logs it)."""
    deadline = time.monotonic() + 10
    while True:
        log = open(env.plugin_log).read()
        j = log.rfind("starting the plugin servers (")
        if j >= 0 and "registered with the kubelet" in log[j:]:
            return log[j:].split("(", 1)[1].split(")", 1)[0]
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


# A registration that follows the directory, not the backoff of a failed
# start (the plugin is not restarted either: one process throughout).
DIR_REASONS = ("the device-plugin directory appeared", "the kubelet (re)started")
# The product says 5 s; a loaded test machine gets 15.
DIR_MS = 15000


def dir_back(env):
    """The directory (and a kubelet in it) comes back: the plugin registers
    because it saw that."""
    os.makedirs(env.dp)
    t = env.kubelet.cmd(op="restart")
    check(t["ok"], "kubelet restart %s" % t)
    regs = register(env, 1, DIR_MS)
    check(regs[0]["at_ms"] - t["at_ms"] < DIR_MS, "registered %d ms after the directory came back"
          % (regs[0]["at_ms"] - t["at_ms"]))
    check(registering_reason(env) in DIR_REASONS,
          "registered by %r, not by the directory" % registering_reason(env))
    check(env.plugin.poll() is None and open(env.plugin_log).read().count("gpuqos-device-plugin: mode") == 1,
          "one plugin process throughout")
    w = env.kubelet.cmd(op="watch", endpoint=QOS)
    check(w["ok"] and len(w["devices"]) == 100, "watch after the directory came back: %s" % w.get("error"))


def t_late_dir(env):
    """A booting node: the plugin starts before the device-plugin directory
    exists and registers once it appears with a kubelet in it."""
    check(env.kubelet.cmd(op="stop")["ok"], "kubelet stopped")
    shutil.rmtree(env.dp)
    env.start_plugin(INJECT)
    deadline = time.monotonic() + 10
    while "gpuqos-device-plugin: mode" not in open(env.plugin_log).read() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.5)  # running a while without the directory
    dir_back(env)


def t_dir_recreate(env):
    """A kubelet reinstall: the directory is deleted (with every socket in
    it) and made again; the plugin registers again, twice over."""
    env.start_plugin(INJECT)
    register(env, 1)
    for _ in range(2):
        check(env.kubelet.cmd(op="stop")["ok"], "kubelet stopped")
        shutil.rmtree(env.dp)
        time.sleep(1.5)  # the plugin sees it go
        dir_back(env)
        env.kubelet.cmd(op="disconnect")


def t_gpu_lost(env):
    """NVML says a GPU is lost: its devices go Unhealthy on every stream
    (all devices when NVML cannot tell which GPU), Healthy again once it
    answers; a critical XID stays."""
    env.start_plugin(SHARES)
    register(env, 2)
    u0, u1 = env.gpus[0]["uuid"], env.gpus[1]["uuid"]
    streams = [env.kubelet.cmd(op="watch", endpoint=ep) for ep in (BE, LC)]
    check(all(d["health"] == "Healthy" for s in streams for d in s["devices"]), "all healthy at start")

    def step(line, bad_gpus, what):
        with open(env.events, "a") as f:
            f.write(line + "\n")
        for s in streams:
            n = env.kubelet.cmd(op="next", stream=s["stream"], timeout_ms=10000)
            check(n["ok"], "%s: no update: %s" % (what, n))
            check(ids(n) == ids(s), "%s: the full list every time" % what)
            bad = sorted(d["id"] for d in n["devices"] if d["health"] != "Healthy")
            check(bad == sorted(i for i in ids(s) if i.split("::")[0] in bad_gpus),
                  "%s: unhealthy %s" % (what, bad))

    step("lost " + u1, [u1], "GPU 1 lost")
    check("GPU %s: lost (NVML 15): marked Unhealthy" % u1 in open(env.plugin_log).read(), "logged")
    step("found " + u1, [], "GPU 1 back")
    step("lost *", [u0, u1], "a GPU lost, which one unknown")
    step("found *", [], "all back")
    step("%s 79" % u0, [u0], "XID 79 on GPU 0")
    step("lost *", [u0, u1], "lost after an XID")
    step("found *", [u0], "back, but the XID stays")


def valgrind_run(env, config, exercise):
    if not shutil.which("valgrind"):
        raise Skip("valgrind not installed")
    if not os.path.exists(env.bin("plugin/gpuqos-device-plugin-plain")):
        raise Skip("no plain build (configure with GPUQOS_SANITIZE=ON)")
    env.install_lib()
    vlog = os.path.join(env.dir, "valgrind.log")
    port = free_port()  # the metrics server's thread and scrapes under valgrind too
    env.start_plugin(config, plain=True, extra=["--metrics-address", "127.0.0.1:%d" % port],
                     prefix=["valgrind", "--leak-check=full", "--log-file=" + vlog])
    exercise()
    for path in ("/metrics", "/healthz", "/nope"):
        status, text = http_get("http://127.0.0.1:%d%s" % (port, path))
        check(status in (200, 404) and (path != "/metrics" or "gpuqos_device_plugin_devices{" in text),
              "scrape %s under valgrind: %d %s" % (path, status, text[:300]))
    env.kubelet.cmd(op="restart")
    register(env, len(regs_of(config)), VALGRIND_MS)
    check(env.stop_plugin() == 0, "clean exit")
    text = open(vlog).read()
    check("definitely lost: 0 bytes" in text or "no leaks are possible" in text,
          "valgrind: %s" % text[-3000:])
    for bad in ("Invalid read", "Invalid write", "uninitialised", "Invalid free"):
        check(bad not in text, "valgrind: %s: %s" % (bad, text[-3000:]))


def regs_of(config):
    return [QOS] if config["mode"] == "inject" else [BE, LC]


# valgrind runs the plugin tens of times slower, on a loaded 2-core machine.
VALGRIND_MS = 60000


def t_valgrind(env):
    def exercise():
        register(env, 1, VALGRIND_MS)
        w = env.kubelet.cmd(op="watch", endpoint=QOS)
        check(w["ok"], "watch under valgrind")
        check(env.kubelet.cmd(op="allocate", endpoint=QOS, containers=[["qos-1"], ["qos-2"]])["ok"],
              "allocate")
        env.kubelet.cmd(op="allocate", endpoint=QOS, containers=[["qos-1", "qos-1"]])
        env.kubelet.cmd(op="raw", endpoint=QOS, method="/v1beta1.DevicePlugin/Allocate",
                        data=base64.b64encode(b"\x0a\xff\xff\xff\x0f\x01").decode())
    valgrind_run(env, INJECT, exercise)


def t_valgrind_shares(env):
    """Discovery, the NVML health thread, a health change on open streams,
    GetPreferredAllocation."""
    def exercise():
        register(env, 2, VALGRIND_MS)
        w = env.kubelet.cmd(op="watch", endpoint=BE)
        check(w["ok"], "watch under valgrind")
        with open(env.events, "a") as f:
            f.write("%s 79\n" % env.gpus[0]["uuid"])
        n = env.kubelet.cmd(op="next", stream=w["stream"], timeout_ms=VALGRIND_MS)
        check(n["ok"], "health change under valgrind: %s" % n)
        p = env.kubelet.cmd(op="preferred", endpoint=BE,
                            requests=[{"available": ids(w), "must": [], "size": 2}])
        check(p["ok"], "preferred under valgrind")
        check(env.kubelet.cmd(op="allocate", endpoint=BE, containers=[ids(w)[:2]])["ok"], "allocate")
    valgrind_run(env, SHARES, exercise)


# --------------------------------------------------------------------------
# Metrics: the plugin's own /metrics (docs/metrics.md, "The device plugin")
# --------------------------------------------------------------------------

METRICS_DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "metrics.md")


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


def samples(text):
    """{(name, frozenset(labels)): value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$', line)
        check(m, "not a sample line: %r" % line)
        labels = frozenset(re.findall(r'([a-zA-Z_]+)="([^"]*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def plugin_doc_names():
    """The names of docs/metrics.md's device-plugin section."""
    with open(METRICS_DOC) as f:
        text = f.read()
    check("\n## The device plugin" in text, "docs/metrics.md has no device-plugin section")
    section = text.split("\n## The device plugin", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(gpuqos_[a-z_]+)` \|", section, re.M))


def t_metrics(env):
    """Registrations (ok, failed, re-registrations), allocations (ok and
    refused), ListAndWatch streams and devices by health, as a scrape
    shows them; promtool-clean; names exactly the documented ones."""
    if not shutil.which("promtool"):
        raise Skip("promtool is not installed (Debian package prometheus)")
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    env.install_lib()
    env.start_plugin(SHARES, env_extra={"GPUQOS_PLUGIN_METRICS_ADDRESS": "127.0.0.1:%d" % port})
    register(env, 2)

    def metric(name, **labels):
        return samples(http_get(base + "/metrics")[1]).get((name, frozenset(labels.items())))

    def wait_metric(name, want, timeout=15, **labels):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if metric(name, **labels) == want:
                return
            time.sleep(0.1)
        check(False, "%s%r: %r, want %r" % (name, labels, metric(name, **labels), want))

    RES, LCR = "gpuqos.io/gpu", "gpuqos.io/gpu-lc"
    w = env.kubelet.cmd(op="watch", endpoint=BE)
    env.kubelet.cmd(op="watch", endpoint=LC)
    u0, u1 = env.gpus[0]["uuid"], env.gpus[1]["uuid"]
    check(env.kubelet.cmd(op="allocate", endpoint=BE, containers=[[u0 + "::0"], [u1 + "::1"]])["ok"], "allocate")
    check(env.kubelet.cmd(op="allocate", endpoint=BE, containers=[[u0 + "::2"]])["ok"], "allocate")
    check(not env.kubelet.cmd(op="allocate", endpoint=LC, containers=[[u1 + "::1"]])["ok"], "a BE id on LC")

    status, text = http_get(base + "/metrics")
    check(status == 200, "/metrics: %d %s" % (status, text[:200]))
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    check(lint.returncode == 0, "promtool check metrics: rc %d\n%s%s" % (lint.returncode, lint.stdout, lint.stderr))
    got = {m.group(1) for m in re.finditer(r"^# TYPE (\S+) ", text, re.M)}
    doc = plugin_doc_names()
    check(got == doc, "docs/metrics.md and /metrics differ: only exported %r, only documented %r"
          % (sorted(got - doc), sorted(doc - got)))
    check(http_get(base + "/healthz") == (200, "ok\n"), "/healthz")
    check(http_get(base + "/nope") == (404, "not found: try /metrics, /healthz\n"),
          "404 elsewhere, naming the paths: %r" % (http_get(base + "/nope"),))
    check(http_get(base + "/metrics", "POST") == (405, "GET only\n"), "POST refused")
    check(http_get(base + "/healthz", "HEAD")[0] == 200, "HEAD answered")
    want = {
        ("gpuqos_device_plugin_info", (("mode", "shares"), ("version", "0.1.0"))): 1,
        ("gpuqos_device_plugin_registrations_total", (("resource", RES), ("result", "ok"))): 1,
        ("gpuqos_device_plugin_registrations_total", (("resource", LCR), ("result", "ok"))): 1,
        ("gpuqos_device_plugin_registrations_total", (("resource", RES), ("result", "failed"))): 0,
        ("gpuqos_device_plugin_reregistrations_total", (("resource", RES),)): 0,
        ("gpuqos_device_plugin_registered", (("resource", LCR),)): 1,
        ("gpuqos_device_plugin_allocations_total", (("resource", RES), ("result", "ok"))): 2,
        ("gpuqos_device_plugin_allocations_total", (("resource", RES), ("result", "refused"))): 0,
        ("gpuqos_device_plugin_allocations_total", (("resource", LCR), ("result", "ok"))): 0,
        ("gpuqos_device_plugin_allocations_total", (("resource", LCR), ("result", "refused"))): 1,
        ("gpuqos_device_plugin_list_and_watch_streams", (("resource", RES),)): 1,
        ("gpuqos_device_plugin_devices", (("health", "Healthy"), ("resource", RES))): 8,
        ("gpuqos_device_plugin_devices", (("health", "Unhealthy"), ("resource", RES))): 0,
        ("gpuqos_device_plugin_devices", (("health", "Healthy"), ("resource", LCR))): 2,
    }
    have = samples(text)
    for (name, labels), v in want.items():
        check(have.get((name, frozenset(labels))) == v,
              "%s%r: %r, want %r" % (name, dict(labels), have.get((name, frozenset(labels))), v))

    # A GPU goes unhealthy: its shares count as Unhealthy, as ListAndWatch says.
    with open(env.events, "a") as f:
        f.write("%s 79\n" % u1)
    check(env.kubelet.cmd(op="next", stream=w["stream"], timeout_ms=5000)["ok"], "update after XID 79")
    wait_metric("gpuqos_device_plugin_devices", 4, resource=RES, health="Unhealthy")
    wait_metric("gpuqos_device_plugin_devices", 1, resource=LCR, health="Healthy")

    # The kubelet restarts: a re-registration each, the old streams gone.
    check(env.kubelet.cmd(op="restart")["ok"], "kubelet restart")
    register(env, 2)
    wait_metric("gpuqos_device_plugin_reregistrations_total", 1, resource=RES)
    wait_metric("gpuqos_device_plugin_registrations_total", 2, resource=LCR, result="ok")
    wait_metric("gpuqos_device_plugin_list_and_watch_streams", 0, resource=RES)

    # A kubelet socket nobody accepts on: registrations fail and say so.
    check(env.kubelet.cmd(op="stop")["ok"], "kubelet stop")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        dead.bind(os.path.join(env.dp, "kubelet.sock"))
        wait_metric("gpuqos_device_plugin_registrations_total", 1, timeout=30, resource=RES, result="failed")
        check(metric("gpuqos_device_plugin_registered", resource=RES) == 0, "not registered after a failure")
    finally:
        dead.close()
    check(env.plugin.poll() is None, "the plugin died")


def t_metrics_flags(env):
    """A metrics address that cannot be parsed stops the start (exit 2,
    named); off serves nothing."""
    p = env.start_plugin(INJECT, extra=["--metrics-address", "nowhere"])
    rc = p.wait(timeout=30)
    log = open(env.plugin_log).read()
    check(rc == 2 and 'metrics address "nowhere"' in log, "bad address: rc %r, log %s" % (rc, log[-500:]))
    port = free_port()
    env.start_plugin(INJECT, extra=["--metrics-address", "off"],
                     env_extra={"GPUQOS_PLUGIN_METRICS_ADDRESS": "127.0.0.1:%d" % port})
    register(env, 1)
    check(http_get("http://127.0.0.1:%d/metrics" % port)[0] == 0, "the flag wins over the environment")


SCENARIOS = {
    "metrics": (t_metrics, 2), "metrics_flags": (t_metrics_flags, 0),
    "inject": (t_inject, 0), "inject_ld_so_preload": (t_inject_ld_so_preload, 0),
    "no_lib": (t_no_lib, 0), "shares": (t_shares, 2), "visibility": (t_visibility, 2),
    "health": (t_health, 2), "preferred": (t_preferred, 2), "bad_input": (t_bad_input, 0),
    "kubelet_restart": (t_kubelet_restart, 2), "plugin_restart": (t_plugin_restart, 0),
    "config": (t_config, 0), "valgrind": (t_valgrind, 0), "late_kubelet": (t_late_kubelet, 0),
    "valgrind_shares": (t_valgrind_shares, 2), "stall": (t_stall, 32),
    "coalesce": (t_coalesce, 32), "slot_thief": (t_slot_thief, 0),
    "allocate_across": (t_allocate_across, 0), "call_bound": (t_call_bound, 0),
    "late_dir": (t_late_dir, 0), "dir_recreate": (t_dir_recreate, 0), "gpu_lost": (t_gpu_lost, 2),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--kubelet-build", required=True, help="build_kubelet.sh and its output dir")
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    args = ap.parse_args()
    script, out = args.kubelet_build.split(":", 1)
    rc = subprocess.run(["sh", script, out]).returncode
    if rc:
        return SKIP if rc == SKIP else 1
    args.kubelet = os.path.join(out, "kubelet")
    fn, gpus = SCENARIOS[args.scenario]
    env = None
    ok = False
    try:
        env = Env(args, gpus)
        fn(env)
        ok = True
    except Skip:
        ok = True
        raise
    finally:
        if env:
            env.close(ok)
    print("PASS", args.scenario)
    return 0


if __name__ == "__main__":
    run_main(main)

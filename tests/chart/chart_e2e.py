# SPDX-License-Identifier: Apache-2.0
"""chart_e2e.py - the chart's rendered containers, started as a kubelet would.

The DaemonSet that `helm template` renders is read, not re-typed: each
container's command and args (with Kubernetes' $(VAR) expansion), its env
(values and the downward API's spec.nodeName / metadata.namespace), its
volume mounts (a hostPath becomes a folder of the test standing for that
host path; a configMap becomes its files; readOnly and HostToContainer are
kept; a projected service-account volume becomes the token, ca.crt and
namespace files the kubelet writes) and its securityContext (capabilities,
no_new_privs, a read-only root, and seccompProfile RuntimeDefault as
containerd's default profile for the container's capabilities:
runtime-default-seccomp.json) are turned into an OCI bundle and
started with crun (gpuqos_test.oci) on a root of read-only binds of the
host's /usr, with the build installed by `cmake --install` at /usr/local
(where the image has it). What the kubelet and the NVIDIA runtime add is
added the same way: KUBERNETES_SERVICE_HOST/PORT and, where the pod does
not turn automounting off, the service-account folder in every container
(in-cluster configuration, against tests/kube/fake_apiserver.py over TLS),
and /dev/nvidiactl (here the GPU simulator's).

A flag the binary does not know, a wrong path or a missing capability makes
the container exit or the workloads go unmanaged, and the test fails.
The chart's --install-preempt-lib init container runs first and must leave
the image's preempt library as `current`; the metrics port is scraped for
the LC pod's timeslice.
"""
import json
import os
import platform
import re
import secrets
import shutil
import subprocess
import time

from gpuqos_test import Skip, oci, wait_for
from gpuqos_test import apiserver
from gpuqos_test import check as expect
from gpuqos_test import kube as e2e_kube
from gpuqos_test.node import gr_timeslice

NS = "gpuqos-system"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SECCOMP_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime-default-seccomp.json")
LC_US, BE_US = 90000, 60  # not the defaults: they must come from the chart's ConfigMap


def install(build, stage):
    """cmake --install of the build under test into stage (prefix /usr/local)."""
    p = subprocess.run(["cmake", "--install", build, "--prefix", "/usr/local"],
                       env=dict(os.environ, DESTDIR=stage), capture_output=True, text=True)
    expect(p.returncode == 0, "cmake --install %s: %s%s" % (build, p.stdout[-1500:], p.stderr[-1500:]))
    return os.path.join(stage, "usr", "local")


def runtime_default_seccomp(caps):
    """The OCI seccomp profile containerd gives a container with these
    capabilities (bounding set) for seccompProfile RuntimeDefault."""
    if platform.machine() != "x86_64":
        raise Skip("the RuntimeDefault seccomp profile is modelled for x86_64 only")
    with open(SECCOMP_DATA) as f:
        d = json.load(f)
    allow = lambda names, **kw: dict({"names": sorted(names), "action": "SCMP_ACT_ALLOW"}, **kw)
    rules = [allow(d["allow"])]
    rules += [allow([r["name"]], args=r["args"]) for r in d["allowWithArgs"]]
    rules += [allow(d["byCapability"][c]) for c in caps if c in d["byCapability"]]
    if "CAP_SYS_ADMIN" not in caps:
        w = d["withoutSysAdmin"]
        rules.append(allow(["clone"], args=[{"index": 0, "value": w["cloneMaskedFlags"], "valueTwo": 0,
                                              "op": "SCMP_CMP_MASKED_EQ"}]))
        rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": w["clone3Errno"]})
    return {"defaultAction": d["defaultAction"], "architectures": d["architectures"], "syscalls": rules}


def seccomp_mode(container):
    """The Seccomp: line of the container's first process (2: a filter)."""
    pid = container.init_pid()
    expect(pid, "%s: no process" % container.id)
    with open("/proc/%d/status" % pid) as f:
        return [line.split()[1] for line in f if line.startswith("Seccomp:")][0]


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Pod:
    """The rendered pod's volumes on this host, and its containers as OCI bundles."""

    def __init__(self, node, ds, local, api_port):
        self.node = node
        self.spec = ds["spec"]["template"]["spec"]
        self.local = local
        self.hostroot = os.path.join(node.dir, "host")
        self.volumes = {v["name"]: v for v in self.spec["volumes"]}
        self.api_port = api_port
        self.sa = os.path.join(node.dir, "serviceaccount")
        os.makedirs(self.sa, exist_ok=True)
        with open(os.path.join(self.sa, "token"), "w") as f:
            f.write(node.token)
        shutil.copy(node.cert, os.path.join(self.sa, "ca.crt"))
        with open(os.path.join(self.sa, "namespace"), "w") as f:
            f.write(NS)

    def host(self, path):
        """The test's folder standing for host path `path`."""
        p = os.path.join(self.hostroot, path.lstrip("/"))
        os.makedirs(p, exist_ok=True)
        return p

    def mount(self, m):
        vol = self.volumes[m["name"]]
        ro = bool(m.get("readOnly"))
        prop = {"HostToContainer": "rslave", "Bidirectional": "rshared"}.get(m.get("mountPropagation"))
        if "hostPath" in vol:
            return oci.bind(self.host(vol["hostPath"]["path"]), m["mountPath"], ro, prop)
        if "projected" in vol:
            return oci.bind(self.projected(m["name"], vol["projected"]), m["mountPath"], True)
        if "configMap" in vol:
            cm = self.node.configmaps[vol["configMap"]["name"]]
            d = os.path.join(self.node.dir, "configmap-" + m["name"])
            if not os.path.isdir(d):
                os.makedirs(d)
                for k, v in cm["data"].items():
                    with open(os.path.join(d, k), "w") as f:
                        f.write(v)
            return oci.bind(d, m["mountPath"], True)
        raise AssertionError("volume kind the test does not model: %r" % vol)

    def projected(self, name, proj):
        """The files the kubelet writes for a projected volume: the sources
        a service-account token volume has, each checked, nothing else."""
        d = os.path.join(self.node.dir, "projected-" + name)
        if os.path.isdir(d):
            return d
        os.makedirs(d)
        for src in proj["sources"]:
            if "serviceAccountToken" in src:
                t = src["serviceAccountToken"]
                expect("audience" not in t, "%s: a token for another audience than the API server" % name)
                shutil.copy(self.sa + "/token", os.path.join(d, t["path"]))
            elif "configMap" in src and src["configMap"]["name"] == "kube-root-ca.crt":
                # The cluster's CA, as the kube-root-ca.crt ConfigMap of every
                # namespace carries it.
                for item in src["configMap"]["items"]:
                    expect(item["key"] == "ca.crt", "%s: kube-root-ca.crt has no key %s" % (name, item["key"]))
                    shutil.copy(self.sa + "/ca.crt", os.path.join(d, item["path"]))
            elif "downwardAPI" in src:
                for item in src["downwardAPI"]["items"]:
                    expect(item["fieldRef"]["fieldPath"] == "metadata.namespace",
                           "%s: downward API field not modelled: %r" % (name, item))
                    with open(os.path.join(d, item["path"]), "w") as f:
                        f.write(NS)
            else:
                raise AssertionError("projected source the test does not model: %r" % src)
        return d

    def seccomp(self, c, caps):
        """The container's seccomp profile: its own seccompProfile, else the
        pod's; RuntimeDefault as containerd has it; none when privileged or
        unset (the kubelet's default, Unconfined)."""
        sc = c.get("securityContext", {})
        prof = sc.get("seccompProfile") or self.spec.get("securityContext", {}).get("seccompProfile")
        if sc.get("privileged") or not prof or prof["type"] == "Unconfined":
            return None
        expect(prof["type"] == "RuntimeDefault", "seccompProfile %r: not modelled by the test" % prof)
        return runtime_default_seccomp(caps)

    def env(self, c):
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOSTNAME": "gpuqos-test",
               # What the kubelet gives every container.
               "KUBERNETES_SERVICE_HOST": "127.0.0.1",
               "KUBERNETES_SERVICE_PORT": str(self.api_port)}
        fields = {"spec.nodeName": e2e_kube.NODE, "metadata.namespace": NS}
        for e in c.get("env", []):
            if "value" in e:
                env[e["name"]] = oci.expand(e["value"], env)
            else:
                ref = e["valueFrom"]["fieldRef"]["fieldPath"]
                expect(ref in fields, "env %s from %s: not modelled by the test" % (e["name"], ref))
                env[e["name"]] = fields[ref]
        # The sanitized build's runtime, not the chart's business.
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
        return env

    def container(self, name, extra_mounts=()):
        cs = {c["name"]: c for c in self.spec.get("initContainers", []) + self.spec["containers"]}
        c = cs[name]
        env = self.env(c)
        args = [oci.expand(a, env) for a in c.get("command", []) + c.get("args", [])]
        mounts, links = oci.host_root_mounts()
        mounts = [m for m in mounts if m["destination"] != "/etc"]  # the image has its own /etc
        mounts.append(oci.bind(self.local, "/usr/local", True))
        mounts += [self.mount(m) for m in c.get("volumeMounts", [])]
        if self.spec.get("automountServiceAccountToken", True):
            mounts.append(oci.bind(self.sa, "/var/run/secrets/kubernetes.io/serviceaccount", True))
        mounts += list(extra_mounts)
        sc = c.get("securityContext", {})
        expect(sc.get("runAsUser", 0) == 0, "the test models root containers only")
        caps = oci.capabilities(sc)
        ctr = oci.Container(self.node.dir, name, args, env, mounts, caps, links=links,
                            readonly=bool(sc.get("readOnlyRootFilesystem")),
                            no_new_privs=not sc.get("allowPrivilegeEscalation", True), tmp=False)
        ctr.seccomp = self.seccomp(c, caps)
        if ctr.seccomp:
            ctr.cfg["linux"]["seccomp"] = ctr.seccomp
            ctr.write()
        return ctr


class ChartNode(e2e_kube.KubeNode):
    """KubeNode with its API server over TLS (in-cluster configuration)."""

    def __init__(self, build):
        super().__init__(build)
        self.cert = os.path.join(self.dir, "apiserver.crt")
        key = os.path.join(self.dir, "apiserver.key")
        r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                            "-subj", "/CN=kubernetes", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", key, "-out", self.cert], capture_output=True)
        if r.returncode != 0:
            raise Skip("openssl could not make a certificate: %r" % r.stderr[-200:])
        state = self.api.state
        self.api.stop()
        srv = apiserver.Server(0, self.token, self.cert, key)
        srv.state = state
        self.api = srv.start()
        self.containers = []
        self.configmaps = {}

    def close(self):
        for c in self.containers:
            c.stop()
        super().close()


def run(build, which, render):
    """Failure or Skip (gpuqos_test's) say how it went."""
    why = oci.why_not()
    if why:
        raise Skip(why)
    if not os.path.exists("/dev/fuse"):
        raise Skip("no /dev/fuse (the GPU simulator)")
    if not shutil.which("openssl"):
        raise Skip("openssl is not installed")
    node = ChartNode(build)
    try:
        (agent_scenario if which == "agent" else plugin_scenario)(node, build, render)
    except Exception:
        for c in node.containers:
            print("---- container %s log (tail)\n%s" % (c.id, c.text()[-3000:]))
        raise
    finally:
        oci.close_after(node.close)


def prepare(node, build, render, values):
    local = install(build, os.path.join(node.dir, "stage"))
    port = free_port()
    # The probes' own ports, free ones: tests beside this one use the defaults.
    node.health_port, node.plugin_health_port = free_port(), free_port()
    # host.nvidiactl: the simulator's path, so that a workload's fd (opened on
    # this host) reads back as the agent's --nvidiactl.
    vals = ["--set", "agent.bpf=off,metrics.port=%d,host.nvidiactl=%s" % (port, node.dev),
            "--set", "health.port=%d,health.devicePluginPort=%d" % (node.health_port, node.plugin_health_port),
            "--set", "policy.timeslices.lcUs=%d,policy.timeslices.beUs=%d" % (LC_US, BE_US)] + values
    # The eBPF tracker stays off: it would attach to every process on this
    # host; tests/e2e checks it with a pin folder of its own.
    objs = render(node.dir, vals)
    for o in objs:
        if o["kind"] == "ConfigMap":
            node.configmaps[o["metadata"]["name"]] = o
    ds = [o for o in objs if o["kind"] == "DaemonSet"][0]
    pod = Pod(node, ds, local, node.api.server_address[1])
    return pod, port


def nvidiactl(node, pod):
    """What the NVIDIA runtime gives the containers: here the simulator, at
    the path host.nvidiactl names."""
    return oci.bind(node.dev, node.dev)


def agent_scenario(node, build, render):
    # The whole pod is rendered; chart.e2e_plugin starts the plugin's container.
    pod, port = prepare(node, build, render, [])
    spec = pod.spec
    inits = [c["name"] for c in spec.get("initContainers", [])]
    if inits:
        c = pod.container("install-preempt-lib")
        node.containers.append(c)
        rc, out = c.run(60)
        expect(rc == 0, "init container install-preempt-lib: exit %r\n%s" % (rc, out[-2000:]))
        lib_dir = pod.host([v for v in spec["volumes"] if v["name"] == "preempt-lib"][0]["hostPath"]["path"])
        cur = os.path.join(lib_dir, "current", "libgpuqos-preempt.so")
        with open(cur, "rb") as a, open(os.path.join(pod.local, "lib", "gpuqos", "libgpuqos-preempt.so"), "rb") as b:
            expect(a.read() == b.read(), "the installed preempt library is the image's")
    agent = pod.container("gpuqos-agent", [nvidiactl(node, pod)])
    node.containers.append(agent)
    args = agent_args(spec)
    sock = flag_value(args, "--socket", "/run/gpuqos/agent.sock")
    ctl = flag_value(args, "--ctl-socket", "/run/gpuqos/ctl.sock")
    # The workloads and gpuqosctl on the host reach the agent through the
    # host folders the chart mounts.
    node.sock = pod.host(os.path.dirname(sock)) + "/" + os.path.basename(sock)
    node.ctl_sock = pod.host(os.path.dirname(ctl)) + "/" + os.path.basename(ctl)
    node.env.update({"GPUQOS_SOCKET": node.sock, "GPUQOS_CTL_SOCKET": node.ctl_sock})
    node.add_pod("lc", "latency-critical")
    node.add_pod("be", "best-effort")
    agent.start()
    wait_for(lambda: not agent.running() or node.ctl_ready(), timeout=30, what="the agent's ctl socket")
    expect(agent.running(), "the agent container exited: %s" % agent.text()[-3000:])
    # All that follows runs under the chart's seccomp profile, with the API
    # token of the agent's own projected volume.
    expect(agent.seccomp and seccomp_mode(agent) == "2",
           "the agent runs under the RuntimeDefault seccomp filter (Seccomp: 2)")
    expect([m for m in agent.cfg["mounts"] if m["destination"] == SA_DIR],
           "the agent container has the service-account token at %s" % SA_DIR)
    lc = node.in_pod("lc", "be")
    be = node.in_pod("be", "lc")
    wait_for(lambda: gr_timeslice(node, lc.pid) == [LC_US] and gr_timeslice(node, be.pid) == [BE_US],
             timeout=30, what="simulator: LC %d / BE %d us from the chart's policy" % (LC_US, BE_US))
    # The annotation follows the simulator by one PATCH: an LC that was
    # alone for a moment was converged at its baseline first.
    def lc_converged():
        st = e2e_kube.converged(node, "lc", "be")
        return st if st and st[0]["timesliceUs"]["gr"] == [LC_US] else None
    wait_for(lc_converged, timeout=30,
             what="gpuqos.io/state annotations converged, the LC's at %d us (in-cluster API access)" % LC_US)
    # The chart's metrics port: the series of the LC pod, health, readiness.
    expect("--metrics-address=:%d" % port in args, "the chart serves metrics on metrics.port: %r" % args)
    lc_ts = wait_for(lambda: [line for line in scrape(port, "/metrics").splitlines()
                              if line.startswith("gpuqos_tsg_timeslice_applied_seconds{") and 'pod="lc"' in line
                              and abs(float(line.rsplit(" ", 1)[1]) - LC_US / 1e6) < 1e-9],
                     timeout=15, what="the LC pod's timeslice on the chart's metrics port")
    # The kubelet's probes go to the health port, where the chart points them.
    for path in ("/healthz", "/readyz"):
        scrape(node.health_port, path)
    print("metrics: %s" % lc_ts[0])
    expect(agent.running(), "the agent container is still running")
    print("agent container (%s) ran the chart's command; LC %d / BE %d us reached the simulated GPU"
          % (" ".join(agent_args(spec)[:1]), LC_US, BE_US))


def scrape(port, path):
    import urllib.request
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
        expect(r.status == 200, "%s: HTTP %d" % (path, r.status))
        return r.read().decode()


def flag_value(args, flag, default):
    """The value the agent takes for flag (its default when not given)."""
    vals = [a.split("=", 1)[1] for a in args if a.startswith(flag + "=")]
    return vals[-1] if vals else default


def agent_args(spec):
    c = [c for c in spec["containers"] if c["name"] == "gpuqos-agent"][0]
    return c.get("command", []) + c.get("args", [])


class Kubelet:
    """tests/plugin's grpc-go test kubelet: one JSON command per line."""

    def __init__(self, build, dpdir, log):
        out = os.path.join(build, "tests", "chart", "kubelet")
        rc = subprocess.run(["sh", os.path.join(SRC, "tests", "plugin", "build_kubelet.sh"), out]).returncode
        if rc == 77:
            raise Skip("the test kubelet cannot be built here (tests/plugin/build_kubelet.sh)")
        expect(rc == 0, "building the test kubelet failed")
        self.p = subprocess.Popen([os.path.join(out, "kubelet"), "-dir", dpdir], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=log, text=True)

    def cmd(self, **c):
        self.p.stdin.write(json.dumps(c) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        expect(line, "the test kubelet exited")
        return json.loads(line)

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def gpu_fixtures(node, root):
    """/sys and /proc entries of the simulator's GPU, as a GPU node has them."""
    with open(os.path.join(node.mnt, "state")) as f:
        gpus = json.load(f)["attached_gpus"]
    for g in gpus:
        bus = "0000" + g["pciBusId"][8:]
        d = os.path.join(root, "sys/bus/pci/devices", bus)
        os.makedirs(d)
        with open(os.path.join(d, "numa_node"), "w") as f:
            f.write("0\n")
        d = os.path.join(root, "proc/driver/nvidia/gpus", bus)
        os.makedirs(d)
        with open(os.path.join(d, "information"), "w") as f:
            f.write("Model: \t\t SIM\nDevice Minor: \t 0\n")
    return gpus


def plugin_scenario(node, build, render):
    """The plugin container registers the chart's resources with a kubelet
    through the chart's device-plugin folder and advertises the chart's
    share counts."""
    if not os.path.exists(os.path.join(build, "plugin", "gpuqos-device-plugin")):
        raise Skip("gpuqos-device-plugin is not built (plugin/): nothing to start")
    fixtures = os.path.join(node.dir, "gpu-fixtures")
    gpus = gpu_fixtures(node, fixtures)
    want = {"shares": {"gpuqos.io/gpu": 3 * len(gpus), "gpuqos.io/gpu-lc": 2 * len(gpus)},
            "inject": {"gpuqos.io/qos": 7}}
    for mode in ("shares", "inject"):
        mport = free_port()
        pod, _ = prepare(node, build, render, ["--set", "devicePlugin.mode=%s,devicePlugin.replicas=3,"
                                               "devicePlugin.lcReplicas=2,devicePlugin.injectDevices=7,"
                                               "metrics.devicePluginPort=%d" % (mode, mport)])
        dp = [v for v in pod.spec["volumes"] if v["name"] == "device-plugins"][0]["hostPath"]["path"]
        kubelet = Kubelet(build, pod.host(dp), open(os.path.join(node.dir, "kubelet-%s.log" % mode), "w"))
        # The node's hardware, where the NVIDIA runtime and the host would
        # have it: the simulator, and /sys, /proc entries for its GPU.
        c = pod.container("gpuqos-device-plugin", [nvidiactl(node, pod), oci.bind(fixtures, fixtures, True)])
        c.id += "-" + mode
        for k, v in (("GPUQOS_SYSFS_ROOT", fixtures + "/sys"), ("GPUQOS_PROCFS_ROOT", fixtures + "/proc"),
                     ("GPUQOS_NVML_LIB", "none")):
            c.env_extra(k, v)
        node.containers.append(c)
        expect(not [m for m in c.cfg["mounts"] if m["destination"].startswith("/var/run/secrets")],
               "the device plugin container gets no API credentials: %r" % c.cfg["mounts"])
        try:
            c.start()
            r = kubelet.cmd(op="wait_register", n=len(want[mode]), timeout_ms=20000)
            expect(r.get("ok"), "%s mode: registrations %r\n%s" % (mode, r, c.text()[-2000:]))
            expect(c.seccomp and seccomp_mode(c) == "2",
                   "the device plugin runs under the RuntimeDefault seccomp filter (Seccomp: 2)")
            got = {}
            for reg in r["regs"]:
                w = kubelet.cmd(op="watch", endpoint=reg["endpoint"])
                got[reg["resource"]] = len(w.get("devices", []))
            expect(got == want[mode], "%s mode: advertised %r, the chart says %r" % (mode, got, want[mode]))
            # The chart's plugin metrics port: what it just advertised.
            devs = {}
            for line in scrape(mport, "/metrics").splitlines():
                m = re.match(r'gpuqos_device_plugin_devices\{resource="([^"]+)",health="Healthy"\} (\d+)$', line)
                if m:
                    devs[m.group(1)] = int(m.group(2))
            expect(devs == want[mode], "%s mode: metrics on metrics.devicePluginPort say %r" % (mode, devs))
        finally:
            c.stop()
            kubelet.close()
        print("device plugin container (%s mode) registered %r with the kubelet; its metrics agree" % (mode, got))

# SPDX-License-Identifier: Apache-2.0
"""kube - a simulated node in Kubernetes mode (gpuqos_test.node's Node plus
the test API server, gpuqos_test.apiserver, in this process so a test can
restart it with its state) for the suites that run the node agent against
pods: tests/e2e (e2e_kube.py, e2e_metrics.py), tests/plugin, tests/chart.
Each workload runs in a pod cgroup made on this host's cgroup v2 tree
(kubepods.slice/.../cri-containerd-<id>.scope), so the agent finds its pod
the way it does on a real node: /proc/<pid>/cgroup -> pod UID -> the
cached pod's annotation.

    node = KubeNode(build); node.add_pod("lc", "latency-critical")
    node.start_kube_agent(); p = node.in_pod("lc", "lc")
    wait_for(lambda: converged(node, "lc"))
"""
import copy
import json
import os
import secrets
import time
import uuid

from gpuqos_test import Skip, cgroup2_root
from gpuqos_test import apiserver
from gpuqos_test.node import Node

NODE = "gpu-node-1"
NS = "default"
CG_V2 = cgroup2_root()
CG_PARENT = "kubepods.slice/kubepods-besteffort.slice"


class KubeNode(Node):
    """A simulated node plus an API server and pod cgroups."""

    def __init__(self, build):
        self.api = None
        self.cgroups = []
        if not CG_V2 or not os.path.exists(os.path.join(CG_V2, "cgroup.procs")):
            raise Skip("no cgroup v2 tree: cgroup2 is mounted neither at /sys/fs/cgroup nor at "
                       "/sys/fs/cgroup/unified (/proc/self/mountinfo)")
        # The QoS-level parents are left as found: removed at the end only
        # if this test made them (and nothing else uses them by then).
        self.parents = [d for d in (os.path.join(CG_V2, CG_PARENT), os.path.join(CG_V2, "kubepods.slice"))
                        if not os.path.isdir(d)]
        super().__init__(build)
        self.token_file = os.path.join(self.dir, "token")
        self.token = "t0-" + secrets.token_hex(8)
        self.write_token(self.token)
        self.api = apiserver.Server(0, self.token).start()
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            # The C client sends a bearer token over plain http too (kubectl
            # would not); tokenFile so that rotation is a file change.
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                       "clusters": [{"name": "k", "cluster": {"server": self.api.url}}],
                       "users": [{"name": "u", "user": {"tokenFile": self.token_file}}],
                       "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}, f)
        self.pods = {}  # name -> (uid, container id, cgroup dir)

    def write_token(self, tok):
        with open(self.token_file + ".tmp", "w") as f:
            f.write(tok + "\n")
        os.rename(self.token_file + ".tmp", self.token_file)

    @property
    def st(self):
        return self.api.state

    # ---- pods and their cgroups ----

    def add_pod(self, name, qos=None):
        uid = str(uuid.uuid4())
        cid = secrets.token_hex(32)
        pod_cg = os.path.join(CG_V2, CG_PARENT, "kubepods-besteffort-pod%s.slice" % uid.replace("-", "_"))
        cg = os.path.join(pod_cg, "cri-containerd-%s.scope" % cid)
        os.makedirs(cg)
        self.cgroups += [pod_cg, cg]
        ann = {"gpu.qos": qos} if qos is not None else {}
        self.st.upsert({"metadata": {"name": name, "namespace": NS, "uid": uid, "annotations": ann},
                        "spec": {"nodeName": NODE, "containers": [{"name": "main"}]},
                        "status": {"phase": "Running", "containerStatuses": [
                            {"name": "main", "containerID": "containerd://" + cid}]}})
        self.pods[name] = (uid, cid, cg)
        return uid

    def set_annotation(self, name, key, value):
        with self.st.lock:
            pod = copy.deepcopy(self.st.pods[(NS, name)])
            ann = pod["metadata"].setdefault("annotations", {})
            if value is None:
                ann.pop(key, None)
            else:
                ann[key] = value
            self.st.upsert(pod)

    def pod(self, name):
        with self.st.lock:
            return copy.deepcopy(self.st.pods[(NS, name)])

    def ann(self, name):
        return self.pod(name)["metadata"].get("annotations", {})

    def gq_state(self, name):
        s = self.ann(name).get("gpuqos.io/state")
        return json.loads(s) if s else None

    def in_pod(self, name, cls, args=("--hold", "60"), prefix=()):
        """fakecuda under `gpuqos run --class cls` (after prefix, which
        must exec), moved into the pod's container cgroup before it opens
        the device (exec keeps the pid)."""
        procs = os.path.join(self.pods[name][2], "cgroup.procs")
        return self.workload(cls, list(args),
                             prefix=["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', procs]
                             + list(prefix))

    # ---- the API server ----

    def requests(self, kind=None, since=0):
        with self.st.lock:
            return [r for r in self.st.requests[since:] if kind is None or r["kind"] == kind]

    def nreq(self):
        with self.st.lock:
            return len(self.st.requests)

    def events(self, reason=None):
        with self.st.lock:
            return [e for e in self.st.events if reason is None or e["reason"] == reason]

    def restart_api(self, down_s=1.5):
        """The API server goes away and comes back on the same port with
        the same data (etcd survives): live watches are cut."""
        port = self.api.server_address[1]
        state = self.api.state
        self.api.crash()
        time.sleep(down_s)
        with state.lock:
            state.watchers = set()
        srv = apiserver.Server(port, self.token)
        srv.state = state
        self.api = srv.start()

    def post(self, path, arg=None):
        """A /_test/ control, in process."""
        st = self.st
        with st.lock:
            if path == "compact":
                st.compact()
            elif path == "gone_mode":
                st.gone_mode = arg
            else:
                st.broadcast(path)

    def start_kube_agent(self, config=None, extra=(), prefix=(), agent="agent/gpuqos-agent"):
        self.start_agent(config=config, bpf=False, prefix=prefix, agent=agent,
                         mode=["--node-name", NODE, "--kubeconfig", self.kubeconfig,
                               "--pod-resources-socket", os.path.join(self.dir, "kubelet", "kubelet.sock")],
                         extra=extra)

    def kube_view(self):
        return self.ctl("list")["agent"]["kubernetes"]

    def close(self):
        try:
            super().close()
        finally:
            if self.api:
                self.api.stop()
            for cg in reversed(self.cgroups):
                for _ in range(50):
                    try:
                        os.rmdir(cg)
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.1)  # its last process is still exiting
            for d in self.parents:
                try:
                    os.rmdir(d)
                except OSError:
                    pass


def converged(node, *names):
    """Every named pod's state annotation says converged for whole CUDA
    contexts (4 TSGs each): the state covers the TSGs the agent knows, and
    a context's copy TSGs are reported a moment after its GR TSG."""
    sts = [node.gq_state(n) for n in names]
    return all(s and s["state"] == "converged" and s.get("tsgs", 0) >= 4 and s["tsgs"] % 4 == 0
               for s in sts) and sts

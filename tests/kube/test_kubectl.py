#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_kubectl.py SCENARIO - proves fake_apiserver.py faithful by driving
it with the real kubectl: get (plain list and Table columns), get -w
(chunked watch lines), annotate (GET + merge PATCH, then get -o json shows
it) and bearer-token checks. Over TLS with a CA made by openssl at test
time, because kubectl does not send a bearer token over plain http.
Each run gets a fresh HOME (kubectl caches discovery there). Exits 77 with
a reason when kubectl or openssl is missing. Does not test agent/kube.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # keep the source tree clean
from gpuqos_test import TEST_TOOLS, Failure, Skip, check, find_tool, run_main  # noqa: E402
from gpuqos_test import apiserver as fake_apiserver  # noqa: E402

TOKEN = "kubectl-token"
KUBECTL = None  # main: find_tool("kubectl")


class Env:
    def __init__(self, tmp):
        self.tmp = tmp
        cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                            "-days", "2", "-subj", "/CN=fake-apiserver", "-addext",
                            "subjectAltName=IP:127.0.0.1,DNS:localhost",
                            "-keyout", key, "-out", cert], capture_output=True)
        if r.returncode != 0:
            raise Skip("openssl could not make a certificate: " + r.stderr.decode()[-200:])
        self.srv = fake_apiserver.Server(0, TOKEN, cert, key).start()
        self.cert = cert
        self.home = os.path.join(tmp, "home")
        os.mkdir(self.home)

    def kubectl_cmd(self, *args, token=TOKEN):
        return [KUBECTL, "--server", self.srv.url, "--certificate-authority", self.cert,
                "--token", token, "--request-timeout", "20s"] + list(args)

    def kubectl(self, *args, token=TOKEN, check=True):
        env = dict(os.environ, HOME=self.home)
        env.pop("KUBECONFIG", None)
        r = subprocess.run(self.kubectl_cmd(*args, token=token), capture_output=True,
                           text=True, env=env, timeout=60)
        print("$ kubectl %s -> %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
        if check and r.returncode != 0:
            raise Failure("kubectl %s failed" % " ".join(args))
        return r

    def pod(self, name, node="node-a", phase="Running", annotations=None):
        return self.srv.state.upsert({
            "metadata": {"name": name, "namespace": "default",
                         "annotations": annotations or {}},
            "spec": {"nodeName": node, "containers": [{"name": "main"}]},
            "status": {"phase": phase, "containerStatuses": [
                {"name": "main", "ready": phase == "Running", "restartCount": 0,
                 "containerID": "containerd://" + name}]}})


def t_get(env):
    env.pod("alpha")
    env.pod("beta", node="node-b", phase="Pending")
    r = env.kubectl("get", "pods")
    lines = r.stdout.strip().splitlines()
    check(lines[0].split()[:5] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
          "get prints the Table's columns")
    check(any(l.split()[:3] == ["alpha", "1/1", "Running"] for l in lines), "alpha row")
    check(any(l.split()[:3] == ["beta", "0/1", "Pending"] for l in lines), "beta row")
    r = env.kubectl("get", "pods", "--field-selector", "spec.nodeName=node-a", "-o", "name")
    check(r.stdout.split() == ["pod/alpha"], "fieldSelector spec.nodeName filters the list")
    r = env.kubectl("get", "pods", "--chunk-size", "1", "-o", "name")
    check(r.stdout.split() == ["pod/alpha", "pod/beta"], "limit/continue pages join up")
    r = env.kubectl("get", "pods", "-o", "json")
    items = json.loads(r.stdout)["items"]
    check(sorted(i["metadata"]["name"] for i in items) == ["alpha", "beta"], "plain List")
    r = env.kubectl("get", "pod", "missing", check=False)
    check(r.returncode != 0 and "NotFound" in r.stderr or "not found" in r.stderr,
          "a missing pod is NotFound")


def t_watch(env):
    env.pod("alpha")
    envv = dict(os.environ, HOME=env.home)
    p = subprocess.Popen(env.kubectl_cmd("get", "pods", "-w", "-o", "name"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=envv)
    try:
        first = p.stdout.readline().strip()
        check(first == "pod/alpha", "watch starts with the list")
        deadline = time.time() + 10
        while len(env.srv.state.watchers) != 1 and time.time() < deadline:
            time.sleep(0.05)
        check(len(env.srv.state.watchers) == 1, "kubectl opened a watch")
        env.pod("gamma", phase="Pending")
        check(p.stdout.readline().strip() == "pod/gamma", "ADDED arrives as a line")
        env.pod("alpha", phase="Succeeded")
        check(p.stdout.readline().strip() == "pod/alpha", "MODIFIED arrives")
        env.srv.state.delete("default", "gamma")
        check(p.stdout.readline().strip() == "pod/gamma", "DELETED arrives")
    finally:
        p.kill()
        p.wait()
    reqs = [r for r in env.srv.state.requests if r["kind"] == "watch"]
    check(reqs and reqs[0]["rv"] not in (None, "", "0"),
          "kubectl watched from the list's resourceVersion (%s)" % (reqs and reqs[0]["rv"]))
    # The Table form of the same watch (what a plain `get -w` prints).
    p = subprocess.Popen(env.kubectl_cmd("get", "pods", "-w"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=envv)
    try:
        check(p.stdout.readline().split()[:3] == ["NAME", "READY", "STATUS"], "Table header")
        check(p.stdout.readline().split()[0] == "alpha", "Table row")
        deadline = time.time() + 10
        while len(env.srv.state.watchers) != 1 and time.time() < deadline:
            time.sleep(0.05)
        env.pod("delta", phase="Running")
        check(p.stdout.readline().split()[:3] == ["delta", "1/1", "Running"],
              "watch event as a Table row")
    finally:
        p.kill()
        p.wait()


def t_annotate(env):
    env.pod("alpha", annotations={"gpuqos.io/class": "batch"})
    env.kubectl("annotate", "pod", "alpha", "gpuqos.io/tsgs=3")
    r = env.kubectl("get", "pod", "alpha", "-o", "json")
    ann = json.loads(r.stdout)["metadata"]["annotations"]
    check(ann == {"gpuqos.io/class": "batch", "gpuqos.io/tsgs": "3"}, "annotation added")
    r = env.kubectl("annotate", "pod", "alpha", "gpuqos.io/class=latency", check=False)
    check(r.returncode != 0, "annotate refuses to overwrite without --overwrite")
    env.kubectl("annotate", "--overwrite", "pod", "alpha", "gpuqos.io/class=latency")
    env.kubectl("annotate", "pod", "alpha", "gpuqos.io/tsgs-")
    r = env.kubectl("get", "pod", "alpha", "-o", "json")
    ann = json.loads(r.stdout)["metadata"]["annotations"]
    check(ann == {"gpuqos.io/class": "latency"}, "overwrite and removal (merge-patch null)")
    patches = [r for r in env.srv.state.requests if r["kind"] == "patch"]
    check(len(patches) == 3 and all("fieldManager=kubectl-annotate" in r["path"]
                                    for r in patches), "annotate sent merge PATCHes")


def t_auth(env):
    env.pod("alpha")
    r = env.kubectl("get", "pods", token="wrong", check=False)
    check(r.returncode != 0 and "Unauthorized" in r.stderr or "logged in" in r.stderr,
          "a wrong token is refused with 401")
    env.srv.state.token = "rotated"
    r = env.kubectl("get", "pods", check=False)
    check(r.returncode != 0, "the old token stops working after rotation")
    r = env.kubectl("get", "pods", "-o", "name", token="rotated")
    check(r.stdout.split() == ["pod/alpha"], "the rotated token works")


SCENARIOS = {"get": t_get, "watch": t_watch, "annotate": t_annotate, "auth": t_auth}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        print("usage: test_kubectl.py {%s}" % ",".join(SCENARIOS))
        return 2
    global KUBECTL
    KUBECTL = find_tool("kubectl")
    if not KUBECTL:
        raise Skip("kubectl is neither under %s/bin nor on PATH (it is not a Debian package: "
                   "scripts/install-test-tools.sh installs it)" % TEST_TOOLS)
    if not shutil.which("openssl"):
        raise Skip("openssl is not installed")
    with tempfile.TemporaryDirectory(prefix="gpuqos-kubectl.") as tmp:
        env = Env(tmp)
        try:
            v = env.kubectl("version", "-o", "json")
            ver = json.loads(v.stdout)
            print("kubectl client %s, server %s" % (ver["clientVersion"]["gitVersion"],
                                                   ver["serverVersion"]["gitVersion"]))
            SCENARIOS[sys.argv[1]](env)
        finally:
            env.srv.stop()
    print("ok")
    return 0


if __name__ == "__main__":
    run_main(main)

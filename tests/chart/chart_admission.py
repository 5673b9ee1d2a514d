# SPDX-License-Identifier: Apache-2.0
"""chart_admission - the chart's admission policies evaluated (test_chart.py's
`admission` scenario): their CEL run by a CEL evaluator (npm
@marcbachmann/cel-js, through vap_eval.mjs) on the requests the agent's
token can send, as the API server would. What the agent writes
(agent/kube/kube_write.c: a merge PATCH of gpuqos.io/class and
gpuqos.io/state, with metadata.uid; an events.k8s.io/v1 Event about one pod,
reported as gpuqos.io/node-agent of its node) is allowed; everything else
the same token could send is denied: another pod's or node's, the pod's own
gpuqos.io/windows ask or any other annotation, its spec, status, labels,
another manager's managedFields entry, an Event about something else or as
someone else. Other users are not matched at all."""
import copy
import json
import os
import subprocess

from gpuqos_test import Failure as Fail

NODE = "gpu-node-1"
POD_RES = {"group": "", "version": "v1", "resource": "pods"}
EVENT_RES = {"group": "events.k8s.io", "version": "v1", "resource": "events"}


def agent_user(sa, node=NODE):
    u = {"username": sa, "groups": ["system:serviceaccounts", "system:authenticated"]}
    if node is not None:
        u["extra"] = {"authentication.kubernetes.io/node-name": [node]}
    return u


def old_pod():
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "serve", "namespace": "ml", "uid": "0e4d5f1c-7a1b-4c2d-9e3f-1a2b3c4d5e6f",
        "resourceVersion": "41", "generation": 1, "creationTimestamp": "2026-12-07T10:00:00Z",
        "labels": {"app": "serve"},
        "annotations": {"gpu.qos": "latency-critical", "gpuqos.io/windows": "auto",
                        "gpuqos.io/class": "best-effort", "team": "vision"},
        "managedFields": [
            {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
             "time": "2026-12-07T10:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:annotations": {"f:gpu.qos": {}, "f:gpuqos.io/windows": {}}}}},
            {"manager": "gpuqos-agent", "operation": "Update", "apiVersion": "v1",
             "time": "2026-12-07T10:00:05Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:annotations": {"f:gpuqos.io/class": {}}}}}]},
        "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "serve:1"}]},
        "status": {"phase": "Running"}}


def patched(change):
    """The pod after the server applied a write: change(new) edits a copy;
    the agent's own managedFields entry is refreshed as the server does."""
    new = copy.deepcopy(old_pod())
    new["metadata"]["resourceVersion"] = "42"
    for m in new["metadata"]["managedFields"]:
        if m["manager"] == "gpuqos-agent":
            m["time"] = "2026-12-07T10:01:00Z"
    change(new)
    return new


def ann(key, value):
    def f(p):
        if value is None:
            p["metadata"]["annotations"].pop(key, None)
        else:
            p["metadata"]["annotations"][key] = value
    return f


def both(*fs):
    def f(p):
        for g in fs:
            g(p)
    return f


def event(**over):
    e = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
         "metadata": {"name": "serve.17a2b3c4d5e6f", "namespace": "ml"},
         "eventTime": "2026-12-07T10:01:00.000000Z", "reportingController": "gpuqos.io/node-agent",
         "reportingInstance": NODE, "action": "Classify", "reason": "InvalidQoSClass",
         "note": "gpu.qos: bad", "type": "Warning",
         "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "ml", "name": "serve",
                       "uid": "0e4d5f1c-7a1b-4c2d-9e3f-1a2b3c4d5e6f"}}
    for k, v in over.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return e


def pod_cases(sa):
    """(name, user, new pod, allowed?) for the pod policy (None: not
    matched)."""
    yield "set gpuqos.io/class", agent_user(sa), patched(ann("gpuqos.io/class", "latency-critical")), True
    yield "set class and state", agent_user(sa), patched(both(ann("gpuqos.io/class", "latency-critical"),
                                                             ann("gpuqos.io/state", '{"state":"converged"}'))), True
    yield "remove gpuqos.io/class", agent_user(sa), patched(ann("gpuqos.io/class", None)), True
    yield "set the pod's own gpuqos.io/windows", agent_user(sa), patched(ann("gpuqos.io/windows", "1800")), False
    yield "remove the pod's own gpuqos.io/windows", agent_user(sa), patched(ann("gpuqos.io/windows", None)), False
    yield "add another gpuqos.io/ key", agent_user(sa), patched(ann("gpuqos.io/priority", "1")), False
    yield "change gpu.qos", agent_user(sa), patched(ann("gpu.qos", "best-effort")), False
    yield "remove another annotation", agent_user(sa), patched(ann("team", None)), False

    def wipe(p):
        p["metadata"]["managedFields"] = [m for m in p["metadata"]["managedFields"]
                                          if m["manager"] == "gpuqos-agent"]
    yield "wipe managedFields", agent_user(sa), patched(both(wipe, ann("gpuqos.io/class", "x"))), False

    def no_mf(p):
        del p["metadata"]["managedFields"]
    yield "drop managedFields", agent_user(sa), patched(no_mf), False

    def rewrite(p):
        p["metadata"]["managedFields"][0]["fieldsV1"] = {}
    yield "rewrite another manager's entry", agent_user(sa), patched(rewrite), False

    def claim(p):
        p["metadata"]["managedFields"].append({"manager": "helm", "operation": "Update", "apiVersion": "v1",
                                               "time": "2026-12-07T10:01:00Z", "fieldsType": "FieldsV1",
                                               "fieldsV1": {}})
    yield "add an entry for another manager", agent_user(sa), patched(claim), False

    def label(p):
        p["metadata"]["labels"]["app"] = "x"
    yield "change a label", agent_user(sa), patched(label), False

    def spec(p):
        p["spec"]["containers"][0]["image"] = "evil:1"
    yield "change the spec", agent_user(sa), patched(spec), False

    def status(p):
        p["status"]["phase"] = "Failed"
    yield "change the status", agent_user(sa), patched(status), False
    yield "a pod of another node", agent_user(sa, "gpu-node-2"), \
        patched(ann("gpuqos.io/class", "latency-critical")), False
    yield "another user, anything", {"username": "system:serviceaccount:ml:deployer"}, patched(label), None


def event_cases(sa):
    yield "the agent's Event", agent_user(sa), event(), True
    yield "as another controller", agent_user(sa), event(reportingController="kubelet"), False
    yield "as another node", agent_user(sa), event(reportingInstance="gpu-node-2"), False
    yield "about a node", agent_user(sa), event(regarding={"apiVersion": "v1", "kind": "Node",
                                                            "name": NODE}), False
    yield "about a pod of another namespace", agent_user(sa), \
        event(regarding={"apiVersion": "v1", "kind": "Pod", "namespace": "kube-system", "name": "x"}), False
    yield "with a related object", agent_user(sa), \
        event(related={"apiVersion": "v1", "kind": "Secret", "namespace": "ml", "name": "s"}), False
    yield "another user's Event", {"username": "system:node:" + NODE}, event(reportingController="x"), None


def evaluate(tools_node_modules, here, policy, cases):
    p = subprocess.run(["node", os.path.join(here, "vap_eval.mjs")], input=json.dumps(
        {"policy": policy, "cases": cases}), capture_output=True, text=True, timeout=120,
        env=dict(os.environ, NODE_PATH=tools_node_modules))
    if p.returncode != 0:
        raise Fail("vap_eval.mjs: exit %d\n%s%s" % (p.returncode, p.stdout, p.stderr))
    return [json.loads(ln) for ln in p.stdout.splitlines()]


def run(objs, sa, node_modules, here, require_node=True):
    vaps = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"}
    pods = [v for n, v in vaps.items() if n.endswith("-pod-annotations")]
    events = [v for n, v in vaps.items() if n.endswith("-events")]
    if len(pods) != 1 or len(events) != 1 or len(vaps) != 2:
        raise Fail("admission policies: %r" % sorted(vaps))
    checked = 0
    for policy, gen, res, op in ((pods[0], pod_cases, POD_RES, "UPDATE"),
                                 (events[0], event_cases, EVENT_RES, "CREATE")):
        table = list(gen(sa))
        if require_node:
            # A token without the node name: denied whatever it sends.
            name, _, obj, _ = table[0]
            table.append(("%s, no node name" % name, agent_user(sa, None), obj, False))
        cases = [{"name": n, "operation": op, "resource": res, "request": {"userInfo": u},
                  "object": obj, "oldObject": old_pod() if op == "UPDATE" else None}
                 for n, u, obj, _ in table]
        for (name, _, _, want), got in zip(table, evaluate(node_modules, here, policy, cases)):
            if want is None:
                ok = not got["matched"]
            else:
                ok = got["matched"] and got["allowed"] == want and \
                    all(not d.startswith("error:") for d in got["denied"])
            if not ok:
                raise Fail("%s: %s: want %s, got %s" % (policy["metadata"]["name"], name,
                                                        {None: "not matched", True: "allowed",
                                                         False: "denied"}[want], got))
            checked += 1
            print("%s: %s: %s" % (policy["metadata"]["name"], name,
                                  "not matched" if want is None else
                                  "allowed" if want else "denied (%s)" % "; ".join(got["denied"])))
    return checked

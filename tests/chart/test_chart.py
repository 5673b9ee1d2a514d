#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_chart.py - checks charts/gpuqos with the real tools.

Scenarios (exit 77 = skipped, with the reason):
  lint        helm lint --strict, default values and each mode
  render      helm template for the default values, each plugin mode, the
              monitors and privileged; every object validated against the
              Kubernetes OpenAPI schema (and the prometheus-operator CRD
              schemas), and what the chart promises checked on the objects:
              host paths, capabilities, seccomp, the API token in the agent
              container alone, RBAC, the admission policies' shape, the
              NetworkPolicy, the policy and plugin files; values the schema
              must refuse are refused
  install_doc every chart value docs/install.md names exists in values.yaml
  admission   the admission policies' CEL evaluated on the agent's writes
              and on the ones they must deny (chart_admission.py)
  policy      the chart refuses exactly the policies the agent refuses
              (chart_policy.py)
  policy_memory  the same for the memory section's cases alone (quick)
  e2e_agent   the rendered DaemonSet's node agent container (its command,
              args, environment, mounts, capabilities, the API token of its
              projected volume, and RuntimeDefault as containerd's seccomp
              profile, checked to be in force) started with crun
              on the GPU simulator, in-cluster against the test API server
              over TLS; LC and BE pods get the chart's policy on the
              simulated GPU
  e2e_plugin  the same for the device plugin container, which gets no API
              token (skips while gpuqos-device-plugin is not built)

helm, kubectl and the validators come from scripts/install-test-tools.sh
($GPUQOS_TEST_TOOLS, default /opt/gpuqos-test-tools).

Usage: test_chart.py --build BUILD SCENARIO
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The test library (tests/lib, PYTHONPATH from ctest): Fail and expect
# are its Failure and check, so failures of the e2e parts are caught too.
from gpuqos_test import TEST_TOOLS, Skip, run_main
from gpuqos_test import Failure as Fail
from gpuqos_test import check as expect

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
CHART = os.path.join(SRC, "charts", "gpuqos")
TOOLS = TEST_TOOLS
HELM = os.path.join(TOOLS, "bin", "helm")
NODE_MODULES = os.path.join(TOOLS, "node", "node_modules")

AGENT_CAPS = {"BPF", "PERFMON", "SYS_PTRACE", "SYS_NICE"}
CONTRACT_PLUGIN_KEYS = {"version", "mode", "resourceName", "lcResourceName", "replicas", "lcReplicas",
                        "visibility", "injection", "preferredAllocation", "injectResourceName",
                        "injectDevices"}

# Values sets rendered by `render` (and linted by `lint`).
CASES = {
    "default": [],
    "shares": ["--set", "devicePlugin.mode=shares"],
    "inject": ["--set", "devicePlugin.mode=inject,devicePlugin.injection=ld-so-preload"],
    "monitors": ["--set", "metrics.serviceMonitor.enabled=true,metrics.podMonitor.enabled=true"],
    "privileged": ["--set", "privileged=true"],
    "agent-only": ["--set", "devicePlugin.enabled=false,metrics.enabled=false"],
    "grafana": ["--set", "grafana.dashboard.enabled=true,grafana.dashboard.namespace=monitoring"],
    "winauto": ["--set", "policy.windows.afterUs=auto"],
    "no-policies": ["--set", "admissionPolicy.enabled=false,networkPolicy.enabled=false"],
    "node-name-optional": ["--set", "admissionPolicy.requireNodeName=false"],
    "own-sa": ["--set", "serviceAccount.name=qos-agent,namespaceOverride=qos"],
}
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
NODE_NAME = "request.userInfo.extra['authentication.kubernetes.io/node-name']"
# ObjectMeta fields the policy need not hold: annotations (checked key by
# key), managedFields (rewritten by the server on every write),
# resourceVersion (the server's concurrency token).
META_FREE = {"annotations", "managedFields", "resourceVersion"}
DASHBOARD = os.path.join(SRC, "deploy", "grafana", "gpuqos-dashboard.json")


def tools_or_skip():
    if not os.access(HELM, os.X_OK):
        raise Skip("helm not found at %s: run scripts/install-test-tools.sh (needs node, npm and "
                   "the npm registry)" % HELM)
    if not os.path.isdir(os.path.join(NODE_MODULES, "kubernetes-models")) or not shutil.which("node"):
        raise Skip("the validators are not installed under %s: run scripts/install-test-tools.sh"
                   % NODE_MODULES)


def helm(*args, check=True):
    p = subprocess.run([HELM] + list(args), capture_output=True, text=True, timeout=120)
    if check and p.returncode != 0:
        raise Fail("helm %s: exit %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def render(tmp, name, values):
    """helm template -> validated objects (list of dicts)."""
    out = os.path.join(tmp, name + ".yaml")
    with open(out, "w") as f:
        f.write(helm("template", "gpuqos", CHART, "--namespace", "gpuqos-system", *values).stdout)
    js = os.path.join(tmp, name + ".json")
    p = subprocess.run(["node", os.path.join(HERE, "validate.js"), "--json", js, out],
                       capture_output=True, text=True, env=dict(os.environ, NODE_PATH=NODE_MODULES),
                       timeout=120)
    expect(p.returncode == 0, "%s: schema validation failed:\n%s%s" % (name, p.stdout, p.stderr))
    with open(js) as f:
        return json.load(f)


def one(objs, kind):
    found = [o for o in objs if o["kind"] == kind]
    expect(len(found) == 1, "expected one %s, got %d" % (kind, len(found)))
    return found[0]


def containers(ds):
    spec = ds["spec"]["template"]["spec"]
    return {c["name"]: c for c in spec.get("initContainers", []) + spec["containers"]}


# --------------------------------------------------------------------------


def t_lint(args):
    tools_or_skip()
    for name, values in CASES.items():
        p = helm("lint", "--strict", CHART, *values)
        print("lint %s: %s" % (name, p.stdout.strip().splitlines()[-1]))


def object_meta_fields():
    """ObjectMeta's fields, from the validators' typings of the API."""
    with open(os.path.join(NODE_MODULES, "@kubernetes-models", "apimachinery", "apis", "meta", "v1",
                           "ObjectMeta.d.ts")) as f:
        fields = set(re.findall(r'^\s+"([A-Za-z]+)"\?:', f.read(), re.M))
    expect({"name", "labels", "annotations", "ownerReferences"} <= fields, "ObjectMeta fields: %r" % fields)
    return fields


def balanced(expr):
    """Quotes closed and brackets balanced outside them: what a CEL parser
    would refuse first."""
    depth, quote = [], None
    for ch in expr:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth.append(")]}"["([{".index(ch)])
        elif ch in ")]}":
            if not depth or depth.pop() != ch:
                return False
    return not depth and quote is None


def check_admission_policy(objs, user, require_node=True):
    """The pods ValidatingAdmissionPolicy and its binding: what they match
    and what each expression names (the `admission` scenario evaluates
    their CEL, and the Events policy's, on requests)."""
    vap = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"
           and o["metadata"]["name"].endswith("-pod-annotations")]
    expect(len(vap) == 1, "one pods admission policy: %r" % vap)
    vap = vap[0]
    binding = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding"
               and o["spec"].get("policyName") == vap["metadata"]["name"]]
    expect(len(binding) == 1, "one binding of %s" % vap["metadata"]["name"])
    binding = binding[0]
    expect(vap["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1", "VAP version")
    spec = vap["spec"]
    expect(binding["spec"] == {"policyName": vap["metadata"]["name"], "validationActions": ["Deny"]},
           "the binding enforces the policy: %r" % binding["spec"])
    expect(spec["failurePolicy"] == "Fail", "the policy fails closed")
    expect(spec["matchConstraints"] == {"resourceRules": [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods", "pods/*"]}]},
        "the policy matches pod updates (PATCH included): %r" % spec["matchConstraints"])
    expect(spec["matchConditions"] == [{"name": "gpuqos-agent",
                                        "expression": 'request.userInfo.username == "%s"' % user}],
           "the policy applies to the agent's service account %s alone: %r" % (user, spec["matchConditions"]))
    var = {v["name"]: " ".join(v["expression"].split()) for v in spec["variables"]}
    val = [" ".join(v["expression"].split()) for v in spec["validations"]]
    for e in list(var.values()) + val + [v["messageExpression"] for v in spec["validations"]
                                         if "messageExpression" in v]:
        expect(balanced(e), "unbalanced expression: %s" % e)
        expect(not re.search(r"\b(self|oldSelf)\b", e), "%s: self is a CRD rule's variable, not a VAP's" % e)
    expect(all(v.get("reason") == "Forbidden" and (v.get("message") or v.get("messageExpression"))
               for v in spec["validations"]), "every validation says why")
    expect(var["nodeName"] == "has(request.userInfo.extra) && 'authentication.kubernetes.io/node-name' in "
           "request.userInfo.extra && size(%s) == 1 ? %s[0] : ''" % (NODE_NAME, NODE_NAME),
           "nodeName: the node of the request's token: %s" % var["nodeName"])
    for old in ("old", "new"):
        o = "oldObject" if old == "old" else "object"
        expect(var[old + "Annotations"] == "has(%s.metadata.annotations) ? %s.metadata.annotations : {}" % (o, o),
               "%sAnnotations: %s" % (old, var[old + "Annotations"]))
    expect(("variables.nodeName != ''" in val) == require_node,
           "missing node name denied: %s (requireNodeName %s)" % (val, require_node))
    expect("variables.nodeName == '' || (has(oldObject.spec.nodeName) && oldObject.spec.nodeName == "
           "variables.nodeName)" in val, "only pods of the token's node: %s" % val)
    expect("object.spec == oldObject.spec" in val, "spec unchanged")
    expect("has(object.status) == has(oldObject.status) && (!has(object.status) || object.status == "
           "oldObject.status)" in val, "status unchanged")
    # Metadata: every ObjectMeta field but META_FREE compared, each as
    # object.metadata.F against oldObject.metadata.F.
    meta = [e for e in val if e.startswith("(has(object.metadata.labels)")]
    expect(len(meta) == 1, "one metadata validation: %s" % val)
    compared = set(re.findall(r"\bobject\.metadata\.([A-Za-z]+) == oldObject\.metadata\.\1\b", meta[0]))
    compared |= set(re.findall(r"\(has\(object\.metadata\.([A-Za-z]+)\) \? object\.metadata\.\1 : (?:\{\}|\[\])\) =="
                               r" \(has\(oldObject\.metadata\.\1\) \? oldObject\.metadata\.\1 : (?:\{\}|\[\])\)",
                               meta[0]))
    want = object_meta_fields() - META_FREE
    expect(compared == want, "metadata compared: %r; ObjectMeta has %r besides %r"
           % (sorted(compared), sorted(want), sorted(META_FREE)))
    expect(len(val) == (7 if require_node else 6), "validations: %s" % val)


def check_default(objs):
    kinds = sorted(o["kind"] for o in objs)
    expect(kinds == ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "NetworkPolicy", "Service",
                     "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy",
                     "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding"],
           "default objects: %r" % kinds)
    ds = one(objs, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    expect(pod.get("hostPID") is True, "hostPID")
    expect(pod.get("priorityClassName") == "system-node-critical", "priorityClassName")
    expect(not pod.get("hostNetwork") and not pod.get("hostIPC"), "no host network or IPC")
    expect(pod.get("securityContext", {}).get("seccompProfile") == {"type": "RuntimeDefault"},
           "the pod's seccomp profile: %r" % pod.get("securityContext"))
    # The token: no automount, a projected volume as the kubelet makes it,
    # mounted into the agent's container alone.
    expect(pod.get("automountServiceAccountToken") is False, "automountServiceAccountToken: false")
    api = [v for v in pod["volumes"] if v["name"] == "kube-api-access"]
    expect(len(api) == 1 and api[0].get("projected") == {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]},
           "the kube-api-access volume is the kubelet's: %r" % api)
    cs = containers(ds)
    expect(sorted(cs) == ["gpuqos-agent", "gpuqos-device-plugin", "install-preempt-lib"],
           "containers: %r" % sorted(cs))
    for name, c in cs.items():
        sc = c["securityContext"]
        expect(sc.get("privileged") is False and sc.get("allowPrivilegeEscalation") is False,
               "%s: not privileged, no escalation: %r" % (name, sc))
        expect(sc["capabilities"].get("drop") == ["ALL"], "%s drops ALL" % name)
        want = AGENT_CAPS if name == "gpuqos-agent" else set()
        expect(set(sc["capabilities"].get("add", [])) == want,
               "%s: capabilities %r, want %r" % (name, sc["capabilities"].get("add"), sorted(want)))
        expect(sc.get("readOnlyRootFilesystem") is True, "%s: read-only root" % name)
        expect(sc.get("seccompProfile", {"type": "RuntimeDefault"}) == {"type": "RuntimeDefault"},
               "%s keeps the pod's seccomp profile" % name)
        tokens = [m for m in c.get("volumeMounts", []) if m["name"] == "kube-api-access"
                  or m["mountPath"].startswith("/var/run/secrets")]
        expect(tokens == ([{"name": "kube-api-access", "mountPath": SA_DIR, "readOnly": True}]
                          if name == "gpuqos-agent" else []),
               "%s: API credentials %r (the agent's alone)" % (name, tokens))
    paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    expect(paths == {"socket-dir": "/run/gpuqos", "state-dir": "/run/gpuqos-agent",
                     "preempt-lib": "/var/lib/gpuqos/lib",
                     "pod-resources": "/var/lib/kubelet/pod-resources",
                     "device-plugins": "/var/lib/kubelet/device-plugins",
                     "bpffs": "/sys/fs/bpf", "tracefs": "/sys/kernel/tracing"},
           "host paths: %r" % paths)
    mounts = {n: {m["name"]: m for m in c.get("volumeMounts", [])} for n, c in cs.items()}
    expect(set(mounts["gpuqos-agent"]) == {"kube-api-access", "config", "socket-dir", "state-dir",
                                            "pod-resources", "bpffs", "tracefs"},
           "agent mounts %r" % mounts["gpuqos-agent"])
    expect(mounts["gpuqos-agent"]["pod-resources"].get("readOnly") is True, "pod-resources read only")
    expect(mounts["gpuqos-agent"]["bpffs"].get("mountPropagation") == "HostToContainer", "bpffs propagation")
    expect(set(mounts["gpuqos-device-plugin"]) == {"config", "device-plugins", "socket-dir", "preempt-lib"},
           "plugin mounts %r" % mounts["gpuqos-device-plugin"])
    expect(all(m.get("readOnly") for k, m in mounts["gpuqos-device-plugin"].items() if k != "device-plugins"),
           "the plugin writes only the device-plugin folder")
    # Every volume mounted somewhere mounts at its host path (the plugin hands
    # host paths to the kubelet).
    for n, ms in mounts.items():
        for m in ms.values():
            if m["name"] in paths:
                expect(m["mountPath"] == paths[m["name"]], "%s mounts %s at %s" % (n, m["name"], m["mountPath"]))
    role = one(objs, "ClusterRole")
    rules = sorted((tuple(r["apiGroups"]), tuple(r["resources"]), tuple(sorted(r["verbs"]))) for r in role["rules"])
    # What agent/kube calls: a list and watch of pods, a PATCH of one, a
    # POST of an Event; no pod get, no nodes.
    expect(rules == [(("",), ("pods",), ("list", "patch", "watch")),
                     (("events.k8s.io",), ("events",), ("create",))], "RBAC rules: %r" % rules)
    sa = one(objs, "ServiceAccount")["metadata"]["name"]
    binding = one(objs, "ClusterRoleBinding")
    expect(binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": "gpuqos-system"}]
           and binding["roleRef"]["name"] == role["metadata"]["name"], "binding: %r" % binding)
    expect(pod["serviceAccountName"] == sa, "the pod runs as the chart's service account")
    check_admission_policy(objs, "system:serviceaccount:gpuqos-system:" + sa)
    np = one(objs, "NetworkPolicy")["spec"]
    expect(np == {"podSelector": ds["spec"]["selector"], "policyTypes": ["Ingress"],
                  "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {
                      "kubernetes.io/metadata.name": "monitoring"}},
                      "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}],
                      "ports": [{"port": 9402, "protocol": "TCP"}, {"port": 9403, "protocol": "TCP"}]}]},
           "NetworkPolicy: the metrics ports, from Prometheus in monitoring alone: %r" % np)
    cm = one(objs, "ConfigMap")["data"]
    policy = json.loads(cm["policy.json"])
    with open(os.path.join(SRC, "deploy", "gpuqos-policy.example.json")) as f:
        example = json.load(f)
    for k in ("version", "timeslices", "severalBe", "allowUnsafeSeveralBe", "interleave",
              "manageCopyEngines", "controlDeadlineMs", "reconcileIntervalMs", "rotation",
              "busyLcPercent", "wake", "windows", "verifyIntervalS"):
        expect(policy[k] == example[k], "policy %s: %r, the documented default is %r" % (k, policy[k], example[k]))
    expect(policy["kubernetes"] == {"defaultClass": "best-effort"} and policy["controlPath"] == "auto",
           "policy: %r" % policy)
    plugin = json.loads(cm["plugin.json"])
    expect(set(plugin) == CONTRACT_PLUGIN_KEYS and plugin["version"] == 1 and plugin["mode"] == "shares",
           "plugin config keys: %r" % sorted(plugin))
    svc = one(objs, "Service")
    expect([(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] ==
           [("metrics", 9402, "metrics"), ("plugin-metrics", 9403, "plugin-metrics")],
           "service ports (agent and device plugin): %r" % svc["spec"]["ports"])
    plugin_c = cs["gpuqos-device-plugin"]
    expect("--metrics-address=:9403" in plugin_c["args"] and
           plugin_c.get("ports", [None])[0] == {"name": "plugin-metrics", "containerPort": 9403, "protocol": "TCP"},
           "the device plugin serves its metrics on metrics.devicePluginPort: %r" % plugin_c)
    # The probes have ports of their own, which neither the Service nor the
    # NetworkPolicy opens: slow clients of the metrics ports cannot starve them.
    agent_c = cs["gpuqos-agent"]
    for c, arg, port, probes in ((agent_c, "--health-address=:9404", ("health", 9404), ("livenessProbe", "readinessProbe")),
                                 (plugin_c, "--health-address=:9405", ("plugin-health", 9405), ("livenessProbe",))):
        expect(arg in c["args"] and {"name": port[0], "containerPort": port[1], "protocol": "TCP"} in c["ports"],
               "%s: the health listener on its own port: %r" % (c["name"], c))
        for pr in probes:
            expect(c[pr]["httpGet"]["port"] == port[0] and c[pr]["timeoutSeconds"] == 1,
                   "%s: %s on the health port: %r" % (c["name"], pr, c.get(pr)))
    opened = [p.get("port") for r in np.get("ingress", []) for p in r.get("ports", [])]
    expect(9404 not in opened and 9405 not in opened and "health" not in opened,
           "the NetworkPolicy opens no health port: %r" % opened)


def check_dashboard(objs):
    """grafana.dashboard.enabled: deploy/grafana's dashboard, unchanged, in a
    ConfigMap with the sidecar's label (the chart's copy is the same file)."""
    with open(DASHBOARD, "rb") as f:
        want = f.read()
    with open(os.path.join(CHART, "dashboards", "gpuqos-dashboard.json"), "rb") as f:
        expect(f.read() == want, "charts/gpuqos/dashboards/gpuqos-dashboard.json differs from %s" % DASHBOARD)
    cms = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")]
    expect(len(cms) == 1, "one dashboard ConfigMap: %r" % [o["metadata"]["name"] for o in objs])
    cm = cms[0]
    expect(cm["metadata"]["labels"].get("grafana_dashboard") == "1" and cm["metadata"]["namespace"] == "monitoring",
           "dashboard ConfigMap metadata: %r" % cm["metadata"])
    expect(json.loads(cm["data"]["gpuqos-dashboard.json"]) == json.loads(want), "the dashboard in the ConfigMap")


def t_render(args):
    tools_or_skip()
    with tempfile.TemporaryDirectory(prefix="gpuqos-chart-") as tmp:
        out = {name: render(tmp, name, values) for name, values in CASES.items()}
        check_default(out["default"])
        cs = containers(one(out["inject"], "DaemonSet"))
        expect("--mode=inject" in cs["gpuqos-device-plugin"]["args"], "inject mode on the plugin's command line")
        plugin = json.loads(one(out["inject"], "ConfigMap")["data"]["plugin.json"])
        expect(plugin["mode"] == "inject" and plugin["injection"] == "ld-so-preload", "inject config %r" % plugin)
        mons = sorted(o["kind"] for o in out["monitors"] if o["apiVersion"] == "monitoring.coreos.com/v1")
        expect(mons == ["PodMonitor", "ServiceMonitor"], "monitors: %r" % mons)
        for o in out["monitors"]:
            if o["apiVersion"] == "monitoring.coreos.com/v1":
                eps = o["spec"].get("endpoints") or o["spec"].get("podMetricsEndpoints")
                expect([e["port"] for e in eps] == ["metrics", "plugin-metrics"] and
                       all(e["honorLabels"] is True and e["path"] == "/metrics" for e in eps),
                       "%s scrapes the agent and the device plugin: %r" % (o["kind"], eps))
        for c in containers(one(out["privileged"], "DaemonSet")).values():
            expect(c["securityContext"].get("privileged") is True, "privileged=true: %s" % c["name"])
        cs = containers(one(out["agent-only"], "DaemonSet"))
        # Without metrics, only the probes' port stays.
        expect(sorted(cs) == ["gpuqos-agent"] and "--metrics-address=off" in cs["gpuqos-agent"]["args"]
               and [p["name"] for p in cs["gpuqos-agent"]["ports"]] == ["health"],
               "agent only, no metrics: %r" % cs)
        expect(not [o for o in out["agent-only"] if o["kind"] == "Service"], "no Service without metrics")
        np = one(out["agent-only"], "NetworkPolicy")["spec"]
        expect(np["policyTypes"] == ["Ingress"] and np["ingress"] == [],
               "without metrics nothing may connect: %r" % np)
        kinds = {o["kind"] for o in out["no-policies"]}
        expect(not kinds & {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "NetworkPolicy"},
               "admissionPolicy and networkPolicy off: %r" % kinds)
        check_admission_policy(out["node-name-optional"], "system:serviceaccount:gpuqos-system:gpuqos",
                               require_node=False)
        check_admission_policy(out["own-sa"], "system:serviceaccount:qos:qos-agent")
        sc = one(out["privileged"], "DaemonSet")["spec"]["template"]["spec"].get("securityContext")
        expect(sc == {"seccompProfile": {"type": "RuntimeDefault"}}, "privileged: pod securityContext %r" % sc)
        vols = sorted(v["name"] for v in one(out["agent-only"], "DaemonSet")["spec"]["template"]["spec"]["volumes"])
        expect(vols == ["bpffs", "config", "kube-api-access", "pod-resources", "socket-dir", "state-dir", "tracefs"],
               "the agent alone mounts only what it uses: %r" % vols)
        # Values the schema (or the chart) must refuse, each with its reason.
        for bad, why in ((["--set", "devicePlugin.replicas=65"], "less than or equal to 64"),
                         (["--set", "devicePlugin.mode=exclusive"], "devicePlugin.mode"),
                         (["--set", "policy.timeslices.severalBeUs=200"],
                          "policy.timeslices.severalBeUs: Must be greater than or equal to 500"),
                         (["--set", "policy.timeslices.lcUs=40"], "below policy.timeslices.beUs"),
                         (["--set", "policy.wake.holdUs=100,policy.wake.leadUs=0"], "policy.wake.leadUs"),
                         (["--set", "policy.rotation.leaseMs=400"], "below twice policy.rotation.periodMs"),
                         (["--set", "policy.windows.afterUs=automatic"], "policy.windows.afterUs"),
                         (["--set", "policy.timeslice.beUs=20"], "policy"),
                         (["--set", "devicePlugin.resourceName=kubernetes.io/gpu"], "resourceName"),
                         (["--set", "host.socketDir=run/gpuqos"], "socketDir"),
                         (["--set", "metrics.serviceMonitor.enabled=true,metrics.service.enabled=false"],
                          "needs metrics.enabled and metrics.service.enabled"),
                         (["--set-json", "networkPolicy.metricsFrom=[]"], "metricsFrom"),
                         (["--set-json", "networkPolicy.metricsFrom=[{}]"], "metricsFrom"),
                         (["--kube-version", "1.29.0"], "admissionPolicy.enabled needs Kubernetes 1.30")):
            p = helm("template", "gpuqos", CHART, *bad, check=False)
            expect(p.returncode != 0 and why in p.stderr, "%s: must be refused naming %r, got %d %s"
                   % (bad, why, p.returncode, p.stderr[-300:]))
        win = json.loads(one(out["winauto"], "ConfigMap")["data"]["policy.json"])["windows"]
        expect(win == {"beforeUs": 1200, "afterUs": "auto", "maxOffPercent": 50,
                       "podMaxOffPercent": 30},
               "windows.afterUs=auto renders as the string: %r" % win)
        check_dashboard(out["grafana"])
        print("rendered and valid: %s" % ", ".join("%s (%d objects)" % (k, len(v)) for k, v in out.items()))


# --------------------------------------------------------------------------
# install_doc: every value docs/install.md names exists in values.yaml


def values_paths():
    """Every key path of values.yaml (via helm show values -> JSON by node)."""
    tools_or_skip()
    p = subprocess.run(["node", "-e", """
const YAML = require("yaml"), fs = require("fs");
const out = [], maps = [];
(function walk(o, pre) {
  for (const [k, v] of Object.entries(o)) {
    out.push(pre + k);
    if (v && typeof v === "object" && !Array.isArray(v)) {
      if (!Object.keys(v).length) maps.push(pre + k);  // free-form: labels, nodeSelector
      walk(v, pre + k + ".");
    }
  }
})(YAML.parse(fs.readFileSync(process.argv[1], "utf8")), "");
console.log(JSON.stringify([out, maps]));""", os.path.join(CHART, "values.yaml")],
                       capture_output=True, text=True, env=dict(os.environ, NODE_PATH=NODE_MODULES))
    expect(p.returncode == 0, "values.yaml: " + p.stderr)
    paths, maps = json.loads(p.stdout)
    return set(paths), set(maps)


def known(ref, paths, maps):
    """ref is a value of the chart, or a key inside one of its free-form maps."""
    ref = re.sub(r"\[\d+\]", "", ref)
    parts = ref.split(".")
    return ref in paths or any(".".join(parts[:i]) in maps for i in range(1, len(parts)))


def doc_value_refs(text):
    """Value paths the guide names: --set/--set-string/--set-json a.b=...,
    and `values: a.b` / `a.b` inside backquotes marked as values."""
    refs = set()
    for m in re.finditer(r"--set(?:-string|-json)?[ =]'?([^\s']+)", text):
        for part in m.group(1).split(","):
            if "=" in part:
                refs.add(part.split("=", 1)[0])
    # `values.yaml` keys written as `<key.path>` in the guide's tables.
    for m in re.finditer(r"`(\.Values\.)?([a-z][A-Za-z0-9]*(?:\.[a-zA-Z][A-Za-z0-9]*)+)`", text):
        if FILE_NAME.search(m.group(2)):
            continue  # `kubelet.sock`, `policy.json`: files, not values
        if m.group(1) or m.group(2).split(".")[0] in TOP_KEYS:
            refs.add(m.group(2))
    return refs


TOP_KEYS = set()
FILE_NAME = re.compile(r"\.(sock|json|so|md|ya?ml|txt|c|h|py)$")


def t_install_doc(args):
    global TOP_KEYS
    paths, maps = values_paths()
    TOP_KEYS = {p.split(".")[0] for p in paths}
    with open(os.path.join(SRC, "docs", "install.md")) as f:
        text = f.read()
    refs = doc_value_refs(text)
    expect(len(refs) >= 10, "the guide names only %d values: %r (is the check reading it?)" % (len(refs), refs))
    missing = sorted(r for r in refs if not known(r, paths, maps))
    expect(not missing, "docs/install.md names values the chart does not have: %s" % ", ".join(missing))
    # The check itself must see a value that does not exist.
    wrong = {r for r in doc_value_refs("helm install x --set devicePlugin.replicaz=3,nodeSelector.a=b "
                                       "and `metrics.servicemonitor.enabled`") if not known(r, paths, maps)}
    expect(wrong == {"devicePlugin.replicaz", "metrics.servicemonitor.enabled"},
           "the check misses a wrong value name: %r" % wrong)
    print("docs/install.md names %d chart values, all in values.yaml" % len(refs))


# --------------------------------------------------------------------------
# e2e: the rendered containers started with crun


def e2e(args, which):
    import chart_e2e  # noqa: E402  (this folder's: gpuqos_test and the crun containers)
    tools_or_skip()
    chart_e2e.run(args.build, which, lambda tmp, vals: render(tmp, "e2e", vals))


def t_admission(args):
    import chart_admission  # noqa: E402  (this folder's)
    tools_or_skip()
    if not os.path.isdir(os.path.join(NODE_MODULES, "@marcbachmann", "cel-js")):
        raise Skip("the CEL evaluator is not installed under %s: run scripts/install-test-tools.sh"
                   % NODE_MODULES)
    n = 0
    with tempfile.TemporaryDirectory(prefix="gpuqos-chart-vap.") as tmp:
        for case, sa, node in (("default", "system:serviceaccount:gpuqos-system:gpuqos", True),
                               ("node-name-optional", "system:serviceaccount:gpuqos-system:gpuqos", False),
                               ("own-sa", "system:serviceaccount:qos:qos-agent", True)):
            n += chart_admission.run(render(tmp, case, CASES[case]), sa, NODE_MODULES, HERE, node)
    print("%d admission requests evaluated" % n)


def policy_cases(args, memory_only):
    import chart_policy  # noqa: E402  (this folder's)
    tools_or_skip()
    agent = os.path.join(args.build, "agent", "gpuqos-agent")
    if not os.access(agent, os.X_OK):
        raise Fail("no %s: build the gpuqos-agent target" % agent)
    with tempfile.TemporaryDirectory(prefix="gpuqos-chart-policy.") as tmp:
        if memory_only:
            chart_policy.run_memory(HELM, CHART, agent, tmp)
        else:
            chart_policy.run(HELM, CHART, os.path.join(CHART, "values.schema.json"), agent, tmp)


def t_policy(args):
    policy_cases(args, False)


def t_policy_memory(args):
    policy_cases(args, True)


SCENARIOS = {"lint": t_lint, "render": t_render, "install_doc": t_install_doc, "policy": t_policy,
             "policy_memory": t_policy_memory,
             "admission": t_admission,
             "e2e_agent": lambda a: e2e(a, "agent"), "e2e_plugin": lambda a: e2e(a, "plugin")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    args = ap.parse_args()
    SCENARIOS[args.scenario](args)
    print("ok")
    return 0


if __name__ == "__main__":
    run_main(main)

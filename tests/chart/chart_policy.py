# SPDX-License-Identifier: Apache-2.0
"""chart_policy - the chart refuses exactly the policies the node agent
refuses (test_chart.py's `policy` scenario). For each set of policy values
the chart's verdict (helm template: values.schema.json and the templates'
checks) is compared with the agent's own (gpuqos-agent --check-config) on
the file those values stand for: the chart's default policy file with the
values set in it (policy.defaultClass is the file's kubernetes.defaultClass;
every other value keeps its path). Where helm accepts, the file it renders
must be that very file, and the agent must accept it; where helm refuses,
the agent must refuse the file too, and helm's message must name the field.

The values: every policy leaf of values.schema.json at and past each of its
bounds, each enum's values and a wrong one, booleans, the wrong type, the
fields that must agree with each other, and random mixes of all of those
(a fixed seed, so a failure repeats)."""
import copy
import json
import os
import random
import re
import subprocess

from gpuqos_test import Failure as Fail

CASES_MIXED = 24

# The memory section (docs/policy.md, "Memory"): sizes at and past 1Mi and
# 1Pi in each unit, what the quantity grammar refuses, percents, and the
# section's shape.
MEMORY_SIZES = ["1Mi", "1023Ki", "1024Ki", "1048576", "1048575", "1Pi", "1024Ti", "1025Ti",
                "1125899906842624", "1125899906842625", "1P", "2P", "1125899906842k",
                "1125899906843k", "16Gi", "16GB", "1.5Gi", "016Gi", "16 Gi", "0", "", "Gi",
                "99999999999999999Gi", 1048576, 1048575, 1125899906842624, 2.5, True]
MEMORY_PERCENTS = ["20%", "1%", "100%", "0%", "101%", "007%", "5 %", "%", "16Gi%", "-5%", "50.5%"]
MEMORY_NAMES = ["lcReserve", "best-effort", "latency-critical", "defaults", "memory"]


def memory_cases():
    out = [{"memory": {}}, {"memory": "16Gi"}, {"memory": {"defaults": "8Gi"}},
           {"memory": {"defaults": {"unmanaged": "1Gi"}}}, {"memory": {"reserve": "1Gi"}},
           {"memory": {"lcReserve": "16Gi",
                       "defaults": {"best-effort": "8Gi", "latency-critical": "40Gi"}}}]
    out += [{"memory": {"lcReserve": v}} for v in MEMORY_SIZES + MEMORY_PERCENTS]
    out += [{"memory": {"defaults": {"best-effort": v}}} for v in MEMORY_SIZES + ["20%"]]
    out += [{"memory": {"defaults": {"latency-critical": v}}} for v in ("40Gi", "1048575")]
    return out


def leaves(schema, path=()):
    """(path, schema) of every leaf under policy in values.schema.json."""
    if schema.get("type") == "object" and "properties" in schema:
        for k, sub in schema["properties"].items():
            yield from leaves(sub, path + (k,))
    else:
        yield path, schema


def values_for(leaf):
    """Values to try for one leaf: at and past its bounds, its enum and a
    stranger, the wrong types."""
    out = []
    alts = leaf.get("oneOf", [leaf])
    for alt in alts:
        t = alt.get("type")
        if t == "integer":
            lo, hi = alt.get("minimum"), alt.get("maximum")
            for v in (lo, hi):
                if v is not None:
                    out += [v - 1, v, v + 1]
            out += [0, 1, 4294967296, 2.5]
        elif t == "boolean":
            out += [True, False, "true", 1]
        elif t == "string" or "enum" in alt:
            out += list(alt.get("enum", [])) + ["not-a-value", 7]
        elif "const" in alt:
            out += [alt["const"], alt["const"].upper()]
        elif t == "object":
            for k, sub in alt.get("properties", {}).items():
                for v in sub.get("enum", [])[:2] + ["nope"]:
                    out.append({k: v})
            out.append({"unknown": "auto"})
    seen, uniq = set(), []
    for v in out:
        key = json.dumps(v, sort_keys=True)
        if key not in seen:
            seen.add(key)
            uniq.append(v)
    return uniq


def nested(path, value):
    d = value
    for k in reversed(path):
        d = {k: d}
    return d


def merge(base, over):
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def file_for(default_file, policy_values):
    """The policy file these values stand for."""
    vals = copy.deepcopy(policy_values)
    want = copy.deepcopy(default_file)
    if "defaultClass" in vals:
        want["kubernetes"] = dict(want.get("kubernetes", {}), defaultClass=vals.pop("defaultClass"))
    # A dict into a dict, anything else replaces (controlPath: a string or
    # an object, whole).
    want = merge(want, vals)
    return want


def rendered_policy(yaml_text):
    """policy.json out of the rendered ConfigMap (a block scalar)."""
    lines = yaml_text.splitlines()
    for i, ln in enumerate(lines):
        m = re.match(r"^(\s*)policy\.json: \|-?$", ln)
        if m:
            body, indent = [], None
            for nxt in lines[i + 1:]:
                if nxt.strip() and indent is None:
                    indent = len(nxt) - len(nxt.lstrip())
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) < indent:
                    break
                body.append(nxt[indent:] if indent else nxt)
            return json.loads("\n".join(body))
    raise Fail("no policy.json in the rendered ConfigMap:\n" + yaml_text)


class Judge:
    def __init__(self, helm, chart, agent, tmp):
        self.helm, self.chart, self.agent, self.tmp = helm, chart, agent, tmp
        self.n = 0

    def chart_verdict(self, policy_values):
        vf = os.path.join(self.tmp, "values-%d.json" % self.n)
        with open(vf, "w") as f:
            json.dump({"policy": policy_values}, f)
        p = subprocess.run([self.helm, "template", "gpuqos", self.chart, "--namespace", "gpuqos-system",
                            "-f", vf, "--show-only", "templates/configmap.yaml"],
                           capture_output=True, text=True, timeout=120)
        return p.returncode == 0, (rendered_policy(p.stdout) if p.returncode == 0 else p.stderr)

    def agent_verdict(self, file_obj):
        pf = os.path.join(self.tmp, "policy-%d.json" % self.n)
        with open(pf, "w") as f:
            json.dump(file_obj, f)
        p = subprocess.run([self.agent, "--check-config", pf], capture_output=True, text=True, timeout=60)
        if p.returncode not in (0, 1) or "Sanitizer" in p.stderr:
            raise Fail("gpuqos-agent --check-config %s: exit %d\n%s%s" % (pf, p.returncode, p.stdout, p.stderr))
        return p.returncode == 0, (p.stdout + p.stderr).strip()

    def agree(self, default_file, policy_values, names):
        self.n += 1
        helm_ok, helm_out = self.chart_verdict(policy_values)
        want = file_for(default_file, policy_values)
        agent_ok, agent_out = self.agent_verdict(want)
        what = "policy values %s" % json.dumps(policy_values, sort_keys=True)
        if helm_ok != agent_ok:
            raise Fail("%s: the chart %s, the agent %s: %s" % (
                what, "accepts" if helm_ok else "refuses", "accepts" if agent_ok else "refuses",
                agent_out if not agent_ok else helm_out.strip()))
        if helm_ok:
            if helm_out != want:
                raise Fail("%s: the chart renders %s, not the file the values stand for %s"
                           % (what, json.dumps(helm_out, sort_keys=True), json.dumps(want, sort_keys=True)))
        elif not any(n in helm_out for n in names):
            raise Fail("%s: helm refuses without naming %s:\n%s" % (what, " or ".join(names), helm_out))
        return helm_ok


def run(helm, chart, schema_path, agent, tmp):
    with open(schema_path) as f:
        schema = json.load(f)["properties"]["policy"]
    judge = Judge(helm, chart, agent, tmp)
    ok, default_file = judge.chart_verdict({})
    if not ok:
        raise Fail("the chart's defaults do not render: %s" % default_file)
    ok, out = judge.agent_verdict(default_file)
    if not ok:
        raise Fail("the agent refuses the chart's default policy: %s" % out)
    pools = {}
    for path, leaf in leaves(schema):
        pools[path] = values_for(leaf)
    accepted = refused = 0
    for path, pool in pools.items():
        for v in pool:
            if judge.agree(default_file, nested(path, v), [path[-1]]):
                accepted += 1
            else:
                refused += 1
    # Fields that must agree with each other.
    pairs = [
        {"timeslices": {"lcUs": 50, "beUs": 50}}, {"timeslices": {"lcUs": 49, "beUs": 50}},
        {"timeslices": {"lcUs": 100000, "beUs": 100001}},
        {"wake": {"leadUs": 0, "holdUs": 1}}, {"wake": {"leadUs": 1, "holdUs": 1000}},
        {"wake": {"leadUs": 0, "holdUs": 0}},
        {"timeslices": {"severalBeUs": 499}, "allowUnsafeSeveralBe": True},
        {"timeslices": {"severalBeUs": 499}, "allowUnsafeSeveralBe": False},
        {"timeslices": {"severalBeUs": 500}, "allowUnsafeSeveralBe": False},
        {"rotation": {"periodMs": 250, "leaseMs": 499}}, {"rotation": {"periodMs": 250, "leaseMs": 500}},
        {"rotation": {"periodMs": 5000, "leaseMs": 10000}}, {"rotation": {"periodMs": 5001, "leaseMs": 10000}},
        {"windows": {"afterUs": "auto", "maxOffPercent": 90}},
    ]
    for p in pairs:
        names = [k for sub in p.values() if isinstance(sub, dict) for k in sub] + list(p)
        if judge.agree(default_file, p, names):
            accepted += 1
        else:
            refused += 1
    for p in memory_cases():
        if judge.agree(default_file, p, MEMORY_NAMES):
            accepted += 1
        else:
            refused += 1
    # Random mixes of two to four leaves (a fixed seed: a failure repeats).
    rng = random.Random(38)
    paths = sorted(pools)
    for _ in range(CASES_MIXED):
        vals = {}
        chosen = rng.sample(paths, rng.randint(2, 4))
        for path in chosen:
            vals = merge(vals, nested(path, rng.choice(pools[path])))
        if judge.agree(default_file, vals, [p[-1] for p in chosen] + ["policy"]):
            accepted += 1
        else:
            refused += 1
    if not accepted or not refused:
        raise Fail("the cases did not cover both verdicts: %d accepted, %d refused" % (accepted, refused))
    print("chart and agent agree on %d policies: %d accepted, %d refused" % (accepted + refused, accepted,
                                                                             refused))


def run_memory(helm, chart, agent, tmp):
    """memory_cases() alone (test_chart.py's `policy_memory` scenario)."""
    judge = Judge(helm, chart, agent, tmp)
    ok, default_file = judge.chart_verdict({})
    if not ok:
        raise Fail("the chart's defaults do not render: %s" % default_file)
    verdicts = [judge.agree(default_file, p, MEMORY_NAMES) for p in memory_cases()]
    if all(verdicts) or not any(verdicts):
        raise Fail("the memory cases did not cover both verdicts: %r" % verdicts)
    print("chart and agent agree on %d memory sections: %d accepted" % (len(verdicts), sum(verdicts)))

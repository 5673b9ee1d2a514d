#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_file_graph.py OBJECT... - the node agent's files keep their layers
(docs/architecture.md) and call each other in no cycle.

Builds the graph "file A calls a function defined in file B" from the
symbols of the objects (one `nm -A` over all of them) and fails when
  * a strongly connected component of the agent's files holds more than
    one file, unless it is a pair named in ONE_MODULE (one module in two
    files), or holds more than MAX_CYCLE files at all;
  * a call crosses a layer the wrong way:
      core/        may call core/ and CORE_COMMON only
      io/          may call core/, io/, common/, bpf/, kube/, kubenode/
      main, hooks  (the wiring) may call anything
      core/, io/   never call the wiring
      common/      calls common/ only
Each object's name is its path below CMakeFiles/<target>.dir/, with the
target's folder for the libraries: core/tsg, io/peer, main, common/loop,
kube/kube_client.
"""
import re
import sys

# The test library (tests/lib, PYTHONPATH from ctest).
from gpuqos_test import filegraph

MAX_CYCLE = 2
# Kubernetes mode: classification (kube_mode.c) and what it writes back on
# the pods (kube_podstate.c) are one module in two files.
ONE_MODULE = {("io/kube_mode", "io/kube_podstate")}
# The core's only way out: log lines, and valid UTF-8 in what it prints.
CORE_COMMON = {"common/log", "common/utf8"}
WIRING = {"main", "hooks"}
# What the graph must at least hold, so that a wrong argument list or a
# renamed object cannot pass.
EXPECTED = {"core/tsg", "core/cmd", "core/reconcile", "core/state", "core/clock", "io/peer",
            "io/ctl", "io/procinfo", "io/statefile", "main", "hooks", "common/loop",
            "common/log"}
# The folder a library target's objects belong to.
TARGET_FOLDER = {"gpuqos_kube": "kube", "gpuqos_kubenode": "kubenode",
                 "gpuqos_tsgtrace": "bpf"}


def file_name(obj):
    """core/tsg for .../CMakeFiles/gpuqos_core.dir/core/tsg.c.o"""
    m = re.search(r"CMakeFiles/([^/]+)\.dir/(.*)\.c\.o$", obj)
    if not m:
        return None
    target, rest = m.group(1), m.group(2)
    while rest.startswith("__/"):
        rest = rest[3:]
    if rest.startswith("common/") or target not in TARGET_FOLDER:
        return rest
    return TARGET_FOLDER[target] + "/" + rest


def graph(objs):
    return filegraph.graph(objs, file_name)


def layer(name):
    if name in WIRING:
        return "wiring"
    return name.split("/", 1)[0] if "/" in name else "other"


def allowed(src, dst):
    ls, ld = layer(src), layer(dst)
    if ls == "core":
        return ld == "core" or dst in CORE_COMMON
    if ls == "io":
        return ld in ("core", "io", "common", "bpf", "kube", "kubenode")
    if ls == "common":
        return ld == "common"
    return True


def agent_file(name):
    return layer(name) in ("core", "io", "wiring")


def main():
    g, why = graph(sys.argv[1:])
    missing = EXPECTED - set(g)
    if missing:
        print("FAIL: objects missing from the graph: %s" % sorted(missing))
        return 1
    fail = []
    comps = [c for c in filegraph.sccs(g) if len(c) > 1 and any(agent_file(n) for n in c)]
    largest = max((len(c) for c in comps), default=1)
    print("%d files; largest cycle: %d file(s); cycles: %s" % (len(g), largest, comps))
    for c in comps:
        if len(c) > MAX_CYCLE or tuple(c) not in ONE_MODULE:
            edges = ["%s -> %s (%s)" % (a, b, why[(a, b)]) for a in c for b in sorted(g[a])
                     if b in c]
            fail.append("files that call each other: %s: %s" % (c, "; ".join(edges)))
    for src in sorted(g):
        for dst in sorted(g[src]):
            if not allowed(src, dst):
                fail.append("%s may not call %s (%s)" % (src, dst, why[(src, dst)]))
    for f in fail:
        print("FAIL: " + f)
    if fail:
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_file_graph.py LIBRARY - the files of agent/kube call each other in
no cycle of more than two files.

Builds the graph "file A calls a function defined in file B" from the
symbols of the library's objects (one `nm -A` of the archive) and fails
when a strongly connected component holds more than MAX_CYCLE files: the
shared helpers live below everything (kube_util.c, kube_req.c), so only
the transport and the writes it completes may call each other.
"""
import collections
import subprocess
import sys

MAX_CYCLE = 2
# What the graph must at least hold, so that an empty or renamed archive
# cannot pass.
EXPECTED = {"kube_client", "kube_config", "kube_pods", "kube_req", "kube_sync", "kube_util",
            "kube_write", "kube_yaml"}


def graph(lib):
    out = subprocess.run(["nm", "-A", lib], capture_output=True, text=True, check=True).stdout
    defs, undefs, files = {}, collections.defaultdict(set), set()
    for line in out.splitlines():
        # "lib.a:kube_client.c.o:0000000000000000 T kube_client_new"
        where, _, sym = line.rpartition(":")
        obj = where.rsplit(":", 1)[-1]
        if not obj.endswith(".o"):
            continue
        name = obj[:-len(".c.o")] if obj.endswith(".c.o") else obj[:-len(".o")]
        files.add(name)
        f = sym.split()
        if len(f) == 3 and f[1] in "TDBRW":
            defs[f[2]] = name
        elif len(f) == 2 and f[0] == "U":
            undefs[name].add(f[1])
    g = {n: set() for n in files}
    for name, syms in undefs.items():
        for s in syms:
            if s in defs and defs[s] != name:
                g[name].add(defs[s])
    return g


def sccs(g):
    """Tarjan's strongly connected components."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def main():
    if len(sys.argv) != 2:
        print("usage: test_file_graph.py LIBRARY")
        return 2
    g = graph(sys.argv[1])
    missing = EXPECTED - set(g)
    if missing:
        print("FAIL: objects missing from %s: %s" % (sys.argv[1], sorted(missing)))
        return 1
    for a in sorted(g):
        print("%s -> %s" % (a, " ".join(sorted(g[a])) or "-"))
    comps = [c for c in sccs(g) if len(c) > 1]
    print("cycles: %s" % (comps or "none"))
    big = [c for c in comps if len(c) > MAX_CYCLE]
    if big:
        print("FAIL: more than %d files call each other: %s" % (MAX_CYCLE, big))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

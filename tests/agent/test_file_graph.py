#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_file_graph.py OBJDIR... - the node agent's files call each other
without cycles (docs/architecture.md: edges point down only).

Builds the graph "file A calls a function defined in file B" from the
symbols of the agent's object files (nm) and fails on any cycle except the
pairs named in ONE_MODULE (one module split over two files).
"""
import collections
import glob
import os
import subprocess
import sys

# Kubernetes mode: classification (kube_mode.c) and what it writes back on
# the pods (kube_podstate.c) are one module in two files.
ONE_MODULE = {("kube_mode", "kube_podstate")}


def graph(objdirs):
    defs, undefs = {}, collections.defaultdict(set)
    for d in objdirs:
        for o in glob.glob(os.path.join(d, "**", "*.c.o"), recursive=True):
            name = os.path.basename(o)[:-len(".c.o")]
            out = subprocess.run(["nm", "-g", o], capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                f = line.split()
                if len(f) == 3 and f[1] in "TDBRW":
                    defs[f[2]] = name
                elif len(f) == 2 and f[0] == "U":
                    undefs[name].add(f[1])
    g = collections.defaultdict(set)
    for name, syms in undefs.items():
        for s in syms:
            if s in defs and defs[s] != name:
                g[name].add(defs[s])
    return g, set(defs.values())


def reaches(g, a, b):
    seen, todo = set(), [a]
    while todo:
        v = todo.pop()
        if v == b:
            return True
        if v not in seen:
            seen.add(v)
            todo.extend(g[v])
    return False


def main():
    g, files = graph(sys.argv[1:])
    if len(files) < 10:
        print("FAIL: only %d object files found in %s" % (len(files), sys.argv[1:]))
        return 1
    cycles = sorted({tuple(sorted((a, b))) for a in list(g) for b in g[a] if reaches(g, b, a)})
    bad = [c for c in cycles if c not in ONE_MODULE]
    print("%d files; edges in cycles: %s" % (len(files), cycles))
    if bad:
        print("FAIL: files that call each other (an upward call?): %s" % bad)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

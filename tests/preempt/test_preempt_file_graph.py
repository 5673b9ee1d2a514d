#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_preempt_file_graph.py OBJDIR - the files of libgpuqos-preempt.so
call each other without cycles: the shared state and the calls every part
makes (preempt_core.c) sit below the features, and no feature calls back
into one that calls it.

Builds the graph "file A uses a function or variable defined in file B"
from the symbols of the library's object files (nm), finds its strongly
connected components, and fails on any component of more than one file
except those named in ONE_MODULE (one module split over two files; none
today).
"""
import glob
import os
import subprocess
import sys

ONE_MODULE = set()

# Files that must be among the objects: a build folder that lost one (or a
# wrong OBJDIR) must not pass with a smaller graph.
EXPECTED = {"preempt_core", "preempt_ioctl", "preempt_conn", "preempt_gate", "preempt_launch",
            "preempt_wake", "preempt_window", "preempt_track", "preempt_msg", "preempt_log"}


def graph(objdir):
    objs = sorted(glob.glob(os.path.join(objdir, "**", "*.c.o"), recursive=True))
    if not objs:
        return {}
    defs, undefs = {}, {os.path.basename(o)[:-len(".c.o")]: set() for o in objs}
    # One nm for every object: each line "path.c.o:[value] type symbol".
    out = subprocess.run(["nm", "-g", "-A"] + objs, capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        path, sep, rest = line.partition(".c.o:")
        if not sep:
            continue
        name = os.path.basename(path)
        f = rest.split()
        if len(f) == 3 and f[1] in "TDBRWVC":
            defs[f[2]] = name
        elif len(f) == 2 and f[0] == "U":
            undefs[name].add(f[1])
    g = {name: set() for name in undefs}
    for name, syms in undefs.items():
        for s in syms:
            if s in defs and defs[s] != name:
                g[name].add(defs[s])
    return g


def components(g):
    """Tarjan's strongly connected components, each a sorted tuple."""
    index, low, on, stack, out = {}, {}, set(), [], []

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
            out.append(tuple(sorted(comp)))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def main():
    if len(sys.argv) != 2:
        print("usage: test_preempt_file_graph.py OBJDIR")
        return 2
    g = graph(sys.argv[1])
    missing = EXPECTED - set(g)
    if missing:
        print("FAIL: object files missing in %s: %s" % (sys.argv[1], sorted(missing)))
        return 1
    comps = components(g)
    cycles = sorted((c for c in comps if len(c) > 1), key=len, reverse=True)
    largest = max(len(c) for c in comps)
    print("%d files, %d edges; largest cycle: %d file(s); cycles: %s" %
          (len(g), sum(len(e) for e in g.values()), largest if cycles else 0, cycles))
    for v in sorted(g):
        print("  %s -> %s" % (v, ", ".join(sorted(g[v])) or "-"))
    bad = [c for c in cycles if not (len(c) == 2 and c in ONE_MODULE)]
    if bad:
        print("FAIL: files that call each other: %s" % bad)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

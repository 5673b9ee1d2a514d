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
import sys

# The test library (tests/lib, PYTHONPATH from ctest).
from gpuqos_test import filegraph

ONE_MODULE = set()

# Files that must be among the objects: a build folder that lost one (or a
# wrong OBJDIR) must not pass with a smaller graph.
EXPECTED = {"preempt_core", "preempt_ioctl", "preempt_conn", "preempt_gate", "preempt_launch",
            "preempt_wake", "preempt_window", "preempt_track", "preempt_msg", "preempt_log"}


def graph(objdir):
    objs = sorted(glob.glob(os.path.join(objdir, "**", "*.c.o"), recursive=True))
    if not objs:
        return {}
    g, _ = filegraph.graph(objs, lambda o: os.path.basename(o)[:-len(".c.o")])
    return g


def main():
    if len(sys.argv) != 2:
        print("usage: test_preempt_file_graph.py OBJDIR")
        return 2
    g = graph(sys.argv[1])
    missing = EXPECTED - set(g)
    if missing:
        print("FAIL: object files missing in %s: %s" % (sys.argv[1], sorted(missing)))
        return 1
    comps = [tuple(c) for c in filegraph.sccs(g)]
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

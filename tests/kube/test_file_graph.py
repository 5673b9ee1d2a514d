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
import sys

# The test library (tests/lib, PYTHONPATH from ctest).
from gpuqos_test import filegraph

MAX_CYCLE = 2
# What the graph must at least hold, so that an empty or renamed archive
# cannot pass.
EXPECTED = {"kube_client", "kube_config", "kube_pods", "kube_req", "kube_sync", "kube_util",
            "kube_write", "kube_yaml"}


def file_name(obj):
    """kube_client for lib.a:kube_client.c.o"""
    obj = obj.rsplit(":", 1)[-1]
    return obj[:-len(".c.o")] if obj.endswith(".c.o") else None


def main():
    if len(sys.argv) != 2:
        print("usage: test_file_graph.py LIBRARY")
        return 2
    g, _ = filegraph.graph([sys.argv[1]], file_name)
    missing = EXPECTED - set(g)
    if missing:
        print("FAIL: objects missing from %s: %s" % (sys.argv[1], sorted(missing)))
        return 1
    for a in sorted(g):
        print("%s -> %s" % (a, " ".join(sorted(g[a])) or "-"))
    comps = [c for c in filegraph.sccs(g) if len(c) > 1]
    print("cycles: %s" % (comps or "none"))
    big = [c for c in comps if len(c) > MAX_CYCLE]
    if big:
        print("FAIL: more than %d files call each other: %s" % (MAX_CYCLE, big))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

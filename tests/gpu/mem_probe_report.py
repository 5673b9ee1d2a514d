#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""mem_probe_report.py OUT TRACE... - mem_probe's RM calls by phase.

OUT is mem_probe's stdout ("phase NAME T0 T1" lines); each TRACE a
GPUQOS_TRACE file of the same process (docs/trace.md). Prints, per phase,
each alloc's class with its parameter size and status, and the controls'
commands with their count and statuses; a record between phases is shown
under the phase that started before it.
"""
import collections
import json
import struct
import sys

FB_GET_INFO_V2 = "0x20801303"
MEMORY_CLASSES = ("0x3e", "0x40")


def mem_params(r):
    """(flags, attr, size asked, size given) of a memory class alloc whose
    NV_MEMORY_ALLOCATION_PARAMS the trace kept, else None."""
    b, o = bytes.fromhex(r.get("params", "")), bytes.fromhex(r.get("paramsOut", ""))
    if r.get("hClass") not in MEMORY_CLASSES or len(b) < 72:
        return None
    given = struct.unpack_from("<Q", o, 64)[0] if len(o) >= 72 else None
    flags = struct.unpack_from("<I", b, 8)[0]
    attr, attr2 = struct.unpack_from("<II", b, 24)
    return ("type %d flags 0x%x attr 0x%x attr2 0x%x" % (struct.unpack_from("<I", b, 4)[0], flags, attr, attr2),
            struct.unpack_from("<Q", b, 64)[0], given)


def fb_info(r):
    """The FB_GET_INFO_V2 (index, data) pairs answered."""
    o = bytes.fromhex(r.get("paramsOut", ""))
    if len(o) < 4:
        return ()
    n = min(struct.unpack_from("<I", o)[0], (len(o) - 4) // 8)
    return tuple(struct.unpack_from("<II", o, 4 + 8 * i) for i in range(n))


def main():
    phases = []
    with open(sys.argv[1]) as f:
        for line in f:
            w = line.split()
            if len(w) == 4 and w[0] == "phase":
                phases.append((w[1], int(w[2]), int(w[3])))
            elif w:
                print("# " + line.rstrip())
    recs = []
    for t in sys.argv[2:]:
        with open(t) as f:
            recs += [json.loads(line) for line in f if line.strip()]
    recs.sort(key=lambda r: r["tNs"])
    by = collections.OrderedDict((p[0], []) for p in phases)
    for r in recs:
        name = None
        for p in phases:
            if r["tNs"] >= p[1]:
                name = p[0]
        if name is not None:
            by[name].append(r)
    for name, rs in by.items():
        allocs = collections.Counter()
        ctrls = collections.Counter()
        frees = collections.Counter()
        for r in rs:
            if r["kind"] == "alloc":
                mp = mem_params(r)
                detail = "%s size %s -> %s" % mp if mp else "params %s" % r.get("paramsSize")
                allocs[(r.get("hClass"), detail, r.get("status"))] += 1
            elif r["kind"] == "control":
                extra = " %s" % (fb_info(r),) if r.get("cmd") == FB_GET_INFO_V2 else ""
                ctrls[(r.get("cmd") + extra, r.get("status"))] += 1
            elif r["kind"] == "free":
                frees[r.get("status")] += 1
        print("## %s: %d RM calls" % (name, len(rs)))
        for (cls, size, st), n in sorted(allocs.items(), key=str):
            print("  alloc class %s %s status %s x%d" % (cls, size, st, n))
        for (cmd, st), n in sorted(ctrls.items(), key=str):
            print("  control %s status %s x%d" % (cmd, st, n))
        for st, n in frees.items():
            print("  free status %s x%d" % (st, n))


if __name__ == "__main__":
    main()

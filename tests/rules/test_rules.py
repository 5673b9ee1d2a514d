#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_rules.py - the folder rules of docs/architecture.md, checked on what
the compiler read and what the linker joins.

  test_rules.py check ROOT BUILD --unit NAME OBJECT... [--unit NAME OBJECT...]
  test_rules.py selftest

`check` reads, for every object, the compiler's dependency file beside it
(OBJECT.d: the source and every header it read, directly or through other
headers) and, per link unit (a program or library and every object it
links), which file uses a symbol another defines (`nm -A`). It fails when
  * a file includes or calls into a folder its row of the table may not
    use (MAY_USE below), the layers of the node agent included: the core
    never reaches io or the wiring, io never reaches the wiring;
  * a core file calls the C library for anything but memory, strings,
    formatting, sorting and errno (CORE_LIBC): no file descriptor, thread,
    timer or clock;
  * files call each other (a cycle of the link graph), but for a pair
    named in ONE_MODULE;
  * an object has no dependency file, or a file in EXPECTED is missing (a
    wrong argument list must not pass with a smaller graph).
`selftest` runs the same checks on made-up graphs holding each kind of break
and fails unless each is found.
"""
import collections
import os
import sys

# The test library (tests/lib, PYTHONPATH from ctest).
from gpuqos_test import filegraph

# The node agent's wiring: a folder of its own inside agent/.
WIRING = {"agent/main.c", "agent/hooks.c", "agent/agent.h"}
CORE_COMMON = ["common/log.", "common/utf8.", "common/quantity."]
# docs/architecture.md, "Folders": what a file of each folder may include
# and call, as path prefixes below the source tree. The longest folder
# that holds a file is its folder; a file of none (tests) is not checked.
MAY_USE = {
    "agent/core/": ["agent/core/", "abi/"] + CORE_COMMON,
    "agent/io/": ["agent/core/", "agent/io/", "common/", "abi/", "bpf/", "agent/kube/",
                  "agent/kubenode/"],
    "wiring": ["agent/", "common/", "abi/", "bpf/"],
    # Injected into every workload: libc and pthreads, nothing of common/.
    "agent/preempt/": ["agent/preempt/", "abi/"],
    "agent/cli/": ["agent/cli/", "abi/", "common/"],
    "agent/kube/": ["agent/kube/", "common/"],
    "agent/kubenode/": ["agent/kubenode/", "common/"],
    "plugin/": ["plugin/", "common/", "abi/"],
    "common/": ["common/", "abi/"],
    "abi/": ["abi/"],
    "bpf/": ["bpf/", "abi/", "common/"],
}
# What the core may call in the C library: memory, strings, formatting,
# sorting, glob matching, errno. No fd, thread, timer or clock (the clock
# is core_now_us(), installed by the wiring).
CORE_LIBC = {
    "malloc", "calloc", "realloc", "free", "strdup", "strndup",
    "memset", "memcpy", "memmove", "memcmp", "memchr",
    "strlen", "strnlen", "strcmp", "strncmp", "strchr", "strrchr", "strstr", "strspn",
    "strcspn", "strtol", "strtoul", "strtoll", "strtoull", "strtod",
    "snprintf", "vsnprintf", "sscanf", "qsort", "bsearch", "fnmatch", "strerror", "abort",
    "__errno_location", "__assert_fail", "__stack_chk_fail", "__ctype_b_loc",
    "__ctype_tolower_loc", "__ctype_toupper_loc",
}
# Symbols the compiler's instrumentation adds.
INSTRUMENTATION = ("__asan_", "__ubsan_", "__sanitizer_", "__tsan_", "__gcov_")
# Pairs of files that are one module in two files and may call each other.
ONE_MODULE = {
    # Kubernetes mode: classification and what it writes back on the pods.
    ("agent/io/kube_mode.c", "agent/io/kube_podstate.c"),
}
# What the graphs must at least hold.
EXPECTED = {"agent/core/tsg.c", "agent/core/reconcile.c", "agent/core/config.c",
            "agent/io/peer.c", "agent/io/ctl.c", "agent/main.c", "agent/hooks.c",
            "agent/kube/kube_client.c", "agent/kubenode/podres.c", "agent/cli/gpuqos.c",
            "agent/cli/gpuqosctl.c", "agent/preempt/preempt_ioctl.c", "common/loop.c",
            "common/log.c"}


def folder(path):
    if path in WIRING:
        return "wiring"
    best = None
    for f in MAY_USE:
        if f != "wiring" and path.startswith(f) and (best is None or len(f) > len(best)):
            best = f
    return best


def may_use(src, dst):
    """Generated files (the build's protobuf code) and tests are no folder's."""
    f = folder(src)
    return f is None or folder(dst) is None or any(dst.startswith(p) or dst == p for p in MAY_USE[f])


def check_includes(reads, root=None):
    """reads: {source: set of headers it read}. The breaks, as lines."""
    fail = []
    for src in sorted(reads):
        for h in sorted(reads[src]):
            if folder(h) is not None and not may_use(src, h):
                chain = filegraph.include_chain(root, src, h, reads[src]) if root else [src, h]
                fail.append("%s (%s) may not include %s (%s): %s" %
                            (src, folder(src), h, folder(h), " -> ".join(chain)))
    return fail


def check_links(g, why, outside):
    fail = []
    for src in sorted(g):
        for dst in sorted(g[src]):
            if not may_use(src, dst):
                fail.append("%s (%s) may not call %s (%s): %s" %
                            (src, folder(src), dst, folder(dst), why[(src, dst)]))
    for src in sorted(outside):
        if folder(src) != "agent/core/":
            continue
        bad = sorted(s for s in outside[src]
                     if s not in CORE_LIBC and not s.startswith("cJSON_") and
                     not s.startswith(INSTRUMENTATION))
        if bad:
            fail.append("%s (the core) may not call %s: no fd, thread, timer or clock in the "
                        "core" % (src, ", ".join(bad)))
    for c in filegraph.sccs(g):
        if len(c) > 1 and not (len(c) == 2 and tuple(c) in ONE_MODULE):
            edges = ["%s -> %s (%s)" % (a, b, why[(a, b)]) for a in c for b in sorted(g[a])
                     if b in c]
            fail.append("files that call each other: %s" % "; ".join(edges))
    return fail


def read_units(args):
    units, name = collections.OrderedDict(), None
    for a in args:
        if a == "--unit":
            name = ""
        elif name == "":
            name = a
            units.setdefault(name, [])
        elif name is None:
            raise SystemExit("usage: objects before the first --unit NAME")
        elif a:
            units[name].append(a)
    return units


def check(root, build, units):
    root, build = os.path.realpath(root), os.path.realpath(build)
    reads, source_of, fail = collections.defaultdict(set), {}, []
    for objs in units.values():
        for o in objs:
            if o in source_of:
                continue
            try:
                src, headers = filegraph.depfile(o)
            except (OSError, ValueError) as e:
                fail.append("no dependency file for %s (%s): the rules need the compiler's "
                            "-MD files (CMake's Makefile generator writes them)" % (o, e))
                continue
            rel = filegraph.in_tree(src, root, [build])
            source_of[o] = rel or src
            for h in headers:
                hr = filegraph.in_tree(h, root, [build])
                if rel and hr and hr != rel:
                    reads[rel].add(hr)
    if fail:
        return fail, 0, 0
    g, why, outside = {}, {}, collections.defaultdict(set)
    for objs in units.values():
        ug, uwhy, uout = filegraph.links(objs, lambda o: source_of[o])
        for n, e in ug.items():
            g.setdefault(n, set()).update(e)
        why.update(uwhy)
        for n, s in uout.items():
            outside[n].update(s)
    missing = EXPECTED - set(g)
    if missing:
        fail.append("files missing from the objects: %s" % sorted(missing))
    fail += check_includes(reads, root)
    fail += check_links(g, why, outside)
    return fail, len(g), sum(len(r) for r in reads.values())


def selftest():
    """Each kind of break, made up, must be found; a graph without one must
    pass."""
    ok_reads = {"agent/io/peer.c": {"agent/io/io.h", "agent/core/core.h", "abi/gq_proto.h"},
                "agent/core/tsg.c": {"agent/core/core.h", "common/log.h"}}
    ok_g = {"agent/io/peer.c": {"agent/core/tsg.c", "common/log.c"},
            "agent/core/tsg.c": {"common/log.c"}, "common/log.c": set(),
            "agent/io/kube_mode.c": {"agent/io/kube_podstate.c"},
            "agent/io/kube_podstate.c": {"agent/io/kube_mode.c"}}
    ok_why = {(a, b): "sym" for a in ok_g for b in ok_g[a]}
    ok_out = {"agent/core/tsg.c": {"memcpy", "snprintf", "cJSON_Parse", "__asan_init"}}
    cases = [
        ("io includes the wiring", {"agent/io/metrics.c": {"agent/agent.h"}}, None),
        ("cli includes the core", {"agent/cli/gpuqos.c": {"agent/core/policy.h"}}, None),
        ("core includes io", {"agent/core/tsg.c": {"agent/io/io.h"}}, None),
        ("plugin includes agent", {"plugin/main.c": {"agent/core/core.h"}}, None),
        ("common includes a program", {"common/loop.c": {"agent/io/io.h"}}, None),
        ("kube includes io", {"agent/kube/kube_pods.c": {"agent/io/kube_mode.h"}}, None),
        ("core calls io", None, ({"agent/core/tsg.c": {"agent/io/peer.c"}}, {})),
        ("io calls the wiring", None, ({"agent/io/ctl.c": {"agent/hooks.c"}}, {})),
        ("core opens a file", None, ({"agent/core/config.c": set()},
                                     {"agent/core/config.c": {"open", "read", "memcpy"}})),
        ("core reads the clock", None, ({"agent/core/cmd.c": set()},
                                        {"agent/core/cmd.c": {"clock_gettime"}})),
        ("a cycle", None, ({"agent/kube/kube_pods.c": {"agent/kube/kube_sync.c"},
                            "agent/kube/kube_sync.c": {"agent/kube/kube_pods.c"}}, {})),
        ("a cycle of three", None, ({"agent/io/a.c": {"agent/io/b.c"},
                                     "agent/io/b.c": {"agent/io/c.c"},
                                     "agent/io/c.c": {"agent/io/a.c"}}, {})),
    ]
    bad = []
    if check_includes(ok_reads) or check_links(ok_g, ok_why, ok_out):
        bad.append("a graph without a break fails: %s" %
                   (check_includes(ok_reads) + check_links(ok_g, ok_why, ok_out)))
    for what, reads, link in cases:
        if reads is not None:
            found = check_includes(reads)
        else:
            g, out = link
            found = check_links(g, {(a, b): "sym" for a in g for b in g[a]}, out)
        print("%s: %s" % (what, found))
        if not found:
            bad.append("not found: " + what)
    for b in bad:
        print("FAIL: " + b)
    return 1 if bad else 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "selftest":
        return selftest()
    if len(sys.argv) < 6 or sys.argv[1] != "check":
        print(__doc__)
        return 2
    fail, nfiles, nreads = check(sys.argv[2], sys.argv[3], read_units(sys.argv[4:]))
    print("%d files linked, %d header reads" % (nfiles, nreads))
    for f in fail:
        print("FAIL: " + f)
    if fail:
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

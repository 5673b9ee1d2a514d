# SPDX-License-Identifier: Apache-2.0
"""filegraph - which source file includes and calls which, from what the
compiler and the linker see.

rules.folders (tests/rules) builds two graphs over the repository's
source files:
  * includes: from each object's dependency file, the `.o.d` the compiler
    writes beside it (-MD, CMake's Makefile generator): every header the
    source reads, directly or through another header;
  * links: "file A uses a function or variable defined in file B", from
    one `nm -A` over the objects that are linked together (one program or
    library), since two programs may each define a symbol of one name.
Files are named by their path below the source tree (agent/io/peer.c),
taken from the dependency file, never guessed from the object's name.
"""
import collections
import os
import re
import subprocess

DEFINED = "TDBRWVC"


def depfile(obj):
    """(source, [headers]) of an object, as absolute paths, from obj + '.d'.
    Relative paths in it are relative to the folder the compiler ran in:
    the target's binary folder, the part of obj before /CMakeFiles/."""
    path = obj + ".d"
    with open(path) as f:
        text = f.read()
    _, sep, rest = text.partition(":")
    if not sep:
        raise ValueError("%s: not a dependency file" % path)
    cwd = obj.split("/CMakeFiles/", 1)[0] if "/CMakeFiles/" in obj else os.path.dirname(obj)
    names = rest.replace("\\\n", " ").split()
    # A rule with no prerequisites ends the first (-MP): "x.h:".
    names = [n for n in names if not n.endswith(":")]
    full = [os.path.normpath(n if os.path.isabs(n) else os.path.join(cwd, n)) for n in names]
    if not full:
        raise ValueError("%s: names no source" % path)
    return full[0], full[1:]


def in_tree(path, root, build_dirs):
    """path relative to root, or None for a system or generated header."""
    if any(path == b or path.startswith(b + "/") for b in build_dirs):
        return None
    rel = os.path.relpath(path, root)
    return None if rel.startswith("../") else rel


def _normal(sym):
    """The C library's name for a symbol: __snprintf_chk and
    __isoc99_sscanf are snprintf and sscanf."""
    m = re.match(r"^__isoc\d+_(.*)$", sym)
    if m:
        return m.group(1)
    m = re.match(r"^__(.*)_chk$", sym)
    return m.group(1) if m else sym


def links(objs, source_of):
    """One `nm -A` over objs (one link unit). source_of(object path) names
    the object's file. Returns the graph {file: set of files it uses}, one
    symbol for each edge, and {file: set of symbols it uses that no object
    here defines} (the C library's and other libraries')."""
    out = subprocess.run(["nm", "-A"] + list(objs), capture_output=True, text=True,
                         check=True).stdout
    defs, undefs, files = {}, collections.defaultdict(set), set()
    for line in out.splitlines():
        # "x.c.o:0000000000000000 T name" or "x.c.o:                 U name"
        where, sep, sym = line.partition(".o:")
        if not sep:
            continue
        name = source_of(where + ".o")
        files.add(name)
        f = sym.split()
        if len(f) == 3 and f[1] in DEFINED:
            defs[f[2]] = name
        elif len(f) == 2 and f[0] == "U":
            undefs[name].add(f[1])
    g = {n: set() for n in files}
    why, outside = {}, collections.defaultdict(set)
    for name, syms in undefs.items():
        for s in sorted(syms):
            if s not in defs:
                outside[name].add(_normal(s))
            elif defs[s] != name:
                g[name].add(defs[s])
                why.setdefault((name, defs[s]), s)
    return g, why, outside


_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def include_chain(root, src, header, reads):
    """How src comes to read header: the shortest chain of quoted includes
    through the files it reads (paths relative to root), or [src, header]
    when the sources cannot tell."""
    reads = set(reads)
    prev, todo = {src: None}, collections.deque([src])
    while todo:
        f = todo.popleft()
        if f == header:
            chain = []
            while f:
                chain.append(f)
                f = prev[f]
            return chain[::-1]
        try:
            with open(os.path.join(root, f), errors="replace") as fh:
                names = _INCLUDE.findall(fh.read())
        except OSError:
            continue
        for n in names:
            for cand in (n, os.path.normpath(os.path.join(os.path.dirname(f), n))):
                if cand in reads and cand not in prev:
                    prev[cand] = f
                    todo.append(cand)
    return [src, header]


def sccs(g):
    """Tarjan's strongly connected components (iterative), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out

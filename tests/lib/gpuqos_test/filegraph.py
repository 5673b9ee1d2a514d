# SPDX-License-Identifier: Apache-2.0
"""filegraph - which source file calls which, from the objects' symbols.

The *.file_graph tests (agent, API client, preempt library) build the
graph "file A uses a function or variable defined in file B" from one
`nm -A` over a component's objects (or its archive) and look for strongly
connected components: files that call each other. Each test names its
files (name_of) and its own rules; the graph and the components are here.
"""
import collections
import subprocess

DEFINED = "TDBRWVC"


def graph(paths, name_of):
    """One `nm -A` over paths (objects or archives). name_of(object path)
    gives a file's name, or None to leave that object out. Returns the
    graph {name: set of names it calls} and, for each edge, one symbol that
    makes it."""
    out = subprocess.run(["nm", "-A"] + list(paths), capture_output=True, text=True,
                         check=True).stdout
    defs, undefs, files = {}, collections.defaultdict(set), set()
    for line in out.splitlines():
        # "x.c.o:0000000000000000 T name", or "lib.a:x.c.o:... U name"
        where, sep, sym = line.partition(".o:")
        if not sep:
            continue
        name = name_of(where + ".o")
        if name is None:
            continue
        files.add(name)
        f = sym.split()
        if len(f) == 3 and f[1] in DEFINED:
            defs[f[2]] = name
        elif len(f) == 2 and f[0] == "U":
            undefs[name].add(f[1])
    g = {n: set() for n in files}
    why = {}
    for name, syms in undefs.items():
        for s in sorted(syms):
            if s in defs and defs[s] != name:
                g[name].add(defs[s])
                why.setdefault((name, defs[s]), s)
    return g, why


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
                    work.append((w, iter(sorted(g[w]))))
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

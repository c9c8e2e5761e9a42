#!/usr/bin/env python3
"""check-layers -- the library's calls point only down the declared layer order.

    check-layers.py BUILD_DIR SOURCE_ROOT [--graph]

Reads the objects of libtutti and of libtutti_ddp (nm: each object's undefined symbols
against the symbols another object defines), maps every object to its source file through
BUILD_DIR/compile_commands.json, and the file to its layer through SOURCE_ROOT/lib/LAYERS
(one folder per line, lowest first; ddp/LAYERS for ddp/). Fails, naming caller, callee and
both files, on

  - a call from a folder to a folder above it (or to one LAYERS does not list);
  - a cycle of files that spans two folders;
  - a cycle of more than 3 files anywhere.

--graph also prints every folder-to-folder edge with its count. --reverse checks against
the declared order upside down, which must fail (the suite's proof that the check can).
"""
import json
import os
import subprocess
import sys
from collections import defaultdict


def read_layers(path):
    order = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                order.append(line.rstrip("/"))
    return order


def folder_of(src, order):
    """The longest listed folder containing src (a path relative to the source root)."""
    best = None
    for name in order:
        if src == name or src.startswith(name + "/"):
            if best is None or len(name) > len(best):
                best = name
    return best


def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRVWGSiu" and kind not in "vw":
            defined.add(name)
    return defined, undefined


def sccs(nodes, edges):
    """Tarjan's strongly connected components (iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
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


def check(build, root, prefix_of_target, layers_file, graph, reverse=False):
    order = read_layers(os.path.join(root, layers_file))
    if reverse:
        order.reverse()
    rank = {name: i for i, name in enumerate(order)}
    db = json.load(open(os.path.join(build, "compile_commands.json")))
    files = {}  # source (relative to root) -> object path
    for entry in db:
        out = entry["output"]
        if not any(out.startswith(p) for p in prefix_of_target):
            continue
        src = os.path.relpath(os.path.join(entry["directory"], entry["file"]), root)
        files[src] = os.path.join(build, out)
    if not files:
        print(f"check-layers: no objects for {prefix_of_target} in compile_commands.json")
        return 1
    defs, undefs = {}, {}
    for src, obj in files.items():
        if not os.path.exists(obj):
            print(f"check-layers: {obj} not built")
            return 1
        d, u = symbols(obj)
        undefs[src] = u
        for s in d:
            defs.setdefault(s, src)
    edges = defaultdict(set)
    why = {}
    for src, u in undefs.items():
        for s in sorted(u):
            dst = defs.get(s)
            if dst and dst != src:
                edges[src].add(dst)
                why.setdefault((src, dst), s)
    bad = 0
    folder_edges = defaultdict(int)
    for src in sorted(files):
        a = folder_of(src, order)
        if a is None:
            print(f"UNLISTED {src}: its folder is not in {layers_file}")
            bad += 1
            continue
        for dst in sorted(edges[src]):
            b = folder_of(dst, order)
            folder_edges[(a, b)] += 1
            if b is None or rank[b] > rank[a]:
                print(f"UP    {src} ({a}) calls {why[(src, dst)]} in {dst} ({b}), "
                      f"a folder above it in {layers_file}")
                bad += 1
    for comp in sccs(sorted(files), edges):
        if len(comp) < 2:
            continue
        folders = sorted({folder_of(f, order) or "?" for f in comp})
        if len(folders) > 1 or len(comp) > 3:
            what = "spans folders " + ", ".join(folders) if len(folders) > 1 else \
                f"has {len(comp)} files"
            print(f"CYCLE {what}: " + " ".join(comp))
            inside = set(comp)
            for f in comp:
                for g in sorted(edges[f] & inside):
                    print(f"        {f} -> {g} ({why[(f, g)]})")
            bad += 1
    if graph:
        for (a, b), n in sorted(folder_edges.items(), key=lambda e: (rank.get(e[0][0], 99),
                                                                      rank.get(e[0][1], 99))):
            print(f"  {a} -> {b}: {n}")
    print(f"check-layers: {len(files)} files of {layers_file}'s folders, "
          f"{sum(len(e) for e in edges.values())} file-to-file calls, {bad} problem(s)")
    return 1 if bad else 0


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    graph = "--graph" in sys.argv
    reverse = "--reverse" in sys.argv
    if len(args) != 2:
        print(__doc__)
        return 2
    build, root = args
    rc = check(build, root, ["libtutti_base.a.p/", "libtutti_kernels.a.p/"],
               "lib/LAYERS", graph, reverse)
    if not reverse:
        rc |= check(build, root, ["ddp/libtutti_ddp"], "ddp/LAYERS", graph)
    return rc


if __name__ == "__main__":
    sys.exit(main())

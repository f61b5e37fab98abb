#!/usr/bin/env python3
"""Prints the file-level module graph of src/ (which file uses which, from `crate::`/`super::`
paths) and any import cycles. Usage: python3 scripts/modgraph.py [--edges]"""
import os, re, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

def module_of(path):
    rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    if rel == ["main"]:
        return "main"
    if rel[-1] in ("mod", "lib"):
        rel = rel[:-1]
    return "::".join(rel) or "crate"

files = {}
for d, _, names in os.walk(ROOT):
    for n in names:
        if n.endswith(".rs"):
            p = os.path.join(d, n)
            files[module_of(p)] = p
mods = set(files)

def resolve(cur, path, is_dir):
    parts = path.split("::")
    if parts[0] == "crate":
        base, parts = [], parts[1:]
    elif parts[0] in ("super", "self"):
        base = cur.split("::") if cur != "crate" else []
        while parts and parts[0] == "super":
            base = base[:-1]
            parts = parts[1:]
        if parts and parts[0] == "self":
            parts = parts[1:]
    else:
        # A path relative to the current module (`use heuristics::rank` inside `learning`).
        base = cur.split("::") if cur != "crate" else []
        if "::".join(base + parts[:1]) not in mods:
            return None
    best = None
    for i in range(len(parts) + 1):
        cand = "::".join(base + parts[:i]) or "crate"
        if cand in mods:
            best = cand
    return best

edges = {m: set() for m in mods}
pat = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super|self|[a-z_][a-z0-9_]*)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
group = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super|[a-z_][a-z0-9_]*)(?:::[a-z_][a-z0-9_]*)*)::\{([^}]*)\}")
for m, p in files.items():
    is_dir = True
    src = open(p).read()
    src = src.split("#[cfg(test)]")[0]
    code = " ".join(l.split("//")[0] for l in src.splitlines() if not l.strip().startswith("//"))
    # Flatten nested use groups: `a::{b::{c, d}, e}` -> `a::b::c, a::b::d, a::e` (one level deep).
    nested = re.compile(r"([A-Za-z_][A-Za-z0-9_:]*)::\{([^{}]*)\}")
    while True:
        flat = nested.sub(lambda g: ", ".join(g.group(1) + "::" + i.strip() for i in g.group(2).split(",") if i.strip()), code)
        if flat == code:
            break
        code = flat
    for s in [code]:
        for g in group.finditer(s):
            for item in g.group(2).split(","):
                item = item.strip().split(" as ")[0].split("::{")[0]
                if item:
                    t = resolve(m, g.group(1) + "::" + item, is_dir)
                    if t and t != m:
                        edges[m].add(t)
        for path in pat.findall(s):
            t = resolve(m, path, is_dir)
            if t and t != m and t != "crate":
                edges[m].add(t)
    edges[m] = {t for t in edges[m] if t != "crate"}

if "--edges" in sys.argv:
    for m in sorted(edges):
        print(f"{m} -> {', '.join(sorted(edges[m])) or '-'}")

# cycles: strongly connected components (Tarjan)
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
def strong(v):
    index[v] = low[v] = counter[0]; counter[0] += 1
    stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in index:
            strong(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1:
            sccs.append(sorted(comp))
sys.setrecursionlimit(10000)
for v in sorted(edges):
    if v not in index:
        strong(v)
print(f"{len(mods)} files, {sum(len(e) for e in edges.values())} edges, {len(sccs)} import cycle(s)")
for c in sccs:
    print("  cycle:", " <-> ".join(c))
sys.exit(1 if sccs else 0)

#!/usr/bin/env python3
"""Checks that src/ imports one way: down the layers declared in src/lib.rs, and never in a cycle.

The layer order lives in ONE place, the numbered list in the `//!` doc of src/lib.rs, which this
script parses (`//! 1. [`texts`], [`config`], ...`; a line that says "the binary" is main.rs).
Every top-level module must appear in exactly one layer. A file may import from its own layer
and the layers below it; an import into a higher layer fails, naming the file, line, path and
both layers. Within a layer, imports must not form a cycle (checked per file, Tarjan).

Whole files are read, `#[cfg(test)]` modules included: a test that reaches up a layer is an
edge like any other. Comments and string literals are blanked first; `super::` inside an inline
`mod tests { ... }` is resolved against the file's own module. The crate root (lib.rs) stands
outside the layers: it declares them, and re-exports the runtime's entry points (`run`,
`start`); `runtime` is the layer that starts and stops everything, below `ops` and the binary.

Usage: python3 scripts/modgraph.py [--edges]   (exit 1 on any violation)"""
import os
import re
import sys

sys.dont_write_bytecode = True
from rust_text import attributed_test, blank  # noqa: E402 (after the line above)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def module_of(path):
    rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    if rel == ["main"]:
        return "main"
    if rel[-1] in ("mod", "lib"):
        rel = rel[:-1]
    return "::".join(rel) or "crate"


def segments(clean):
    """(start, end, inline module path, test) for each stretch of the file between `mod x {`
    and its closing brace, so `super::` in a test module resolves against the right module;
    `test` is the path of the enclosing `#[cfg(test)]` inline module, or None."""
    opens = {}
    for m in re.finditer(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{", clean):
        opens[m.end() - 1] = (m.group(1), attributed_test(clean, m.start()))
    out, stack, depth, start = [], [], 0, 0

    def here():
        path = tuple(s[0] for s in stack)
        tests = [i for i, s in enumerate(stack) if s[2]]
        return path, (path[:tests[0] + 1] if tests else None)

    for i, ch in enumerate(clean):
        if ch == "{":
            if i in opens:
                out.append((start, i) + here())
                stack.append((opens[i][0], depth, opens[i][1]))
                start = i + 1
            depth += 1
        elif ch == "}":
            depth -= 1
            if stack and stack[-1][1] == depth:
                out.append((start, i) + here())
                stack.pop()
                start = i + 1
    out.append((start, len(clean)) + here())
    return out


def expand_use(tree):
    """`a::{b::{c, d}, e as f, self}` -> [`a::b::c`, `a::b::d`, `a::e`, `a`]."""
    tree = re.sub(r"\s+", " ", re.sub(r"\s*([{},]|::)\s*", r"\1", tree)).strip()

    def split_top(t):
        parts, depth, cur = [], 0, ""
        for ch in t:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        return [p for p in parts + [cur] if p]

    def go(item):
        k = item.find("{")
        if k < 0:
            return [item.split(" as ")[0]]
        prefix, inner = item[:k], item[k + 1:item.rindex("}")]
        out = []
        for sub in split_top(inner):
            for p in go(sub):
                out.append(prefix.rstrip(":") if p == "self" else prefix + p)
        return out

    return go(tree)


files = {}
for d, _, names in os.walk(ROOT):
    for name in names:
        if name.endswith(".rs"):
            p = os.path.join(d, name)
            files[module_of(p)] = p
mods = set(files)


def resolve(cur, path):
    """The file-level module a path names, or None when it names nothing in src/."""
    parts = path.split("::")
    if parts[0] in ("crate", "heurist"):
        base, parts = [], parts[1:]
    elif parts[0] in ("super", "self"):
        base = list(cur)
        while parts and parts[0] == "super":
            base, parts = base[:-1], parts[1:]
        if parts and parts[0] == "self":
            parts = parts[1:]
    else:
        # A path relative to the current module (`use heuristics::rank` inside `learning`).
        base = list(cur)
        if "::".join(base + parts[:1]) not in mods:
            return None
    best = None
    for i in range(len(parts) + 1):
        cand = "::".join(base + parts[:i]) or "crate"
        if cand in mods:
            best = cand
    return best


USE = re.compile(r"\buse\s+([^;]*);")
PATH = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super|self|[a-z_][a-z0-9_]*)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")

# edges[a][b] = (line, path) of the first place `a` names `b`. A `#[cfg(test)]` inline module
# is a node of its own (`store::learning::tests`): nothing imports it, so it cannot close a
# cycle, but its imports are checked against the layers like the file's.
edges = {m: {} for m in mods}
file_of = dict(files)
for m, p in files.items():
    with open(p, encoding="utf-8") as f:
        clean = blank(f.read())
    own = m.split("::") if m != "crate" else []
    for start, end, inline, test in segments(clean):
        seg = clean[start:end]
        cur = own + list(inline)
        node = "::".join(own + list(test)) if test else m
        edges.setdefault(node, {})
        file_of[node] = p
        found = []
        for u in USE.finditer(seg):
            found += [(start + u.start(), path) for path in expand_use(u.group(1))]
        rest = USE.sub(lambda u: " " * len(u.group(0)), seg)
        found += [(start + x.start(), x.group(1)) for x in PATH.finditer(rest)]
        for offset, path in found:
            t = resolve(cur, path)
            if t and t != m and t != "crate" and t not in edges[node]:
                edges[node][t] = (clean.count("\n", 0, offset) + 1, path)


def read_layers():
    """The numbered layer list of lib.rs's `//!` doc: [[module, ...], ...], bottom first."""
    layers = []
    with open(os.path.join(ROOT, "lib.rs"), encoding="utf-8") as f:
        for line in f:
            item = re.match(r"//!\s+\d+\.\s+(.*)", line)
            if item:
                names = re.findall(r"\[`([a-z_][a-z0-9_]*)`\]", item.group(1))
                if "the binary" in item.group(1):
                    names.append("main")
                layers.append(names)
    return layers


def top(module):
    return module.split("::")[0]


problems = []
layers = read_layers()
layer_of = {}
for i, names in enumerate(layers):
    for name in names:
        if name in layer_of:
            problems.append(f"src/lib.rs: `{name}` is declared in layers {layer_of[name] + 1} and {i + 1}")
        layer_of[name] = i
tops = {top(m) for m in mods if m != "crate"}
for name in sorted(tops - set(layer_of)):
    problems.append(f"src/lib.rs: module `{name}` is in no layer; add it to the numbered list in the `//!` doc")
for name in sorted(set(layer_of) - tops):
    problems.append(f"src/lib.rs: layer list names `{name}`, which is not a module in src/")


def describe(i):
    return f"layer {i + 1} ({', '.join(layers[i])})"


if "--edges" in sys.argv:
    for m in sorted(edges):
        print(f"{m} -> {', '.join(sorted(edges[m])) or '-'}")

for m in sorted(edges):
    if m == "crate" or top(m) not in layer_of:
        continue
    for t, (line, path) in sorted(edges[m].items()):
        if top(t) in layer_of and layer_of[top(t)] > layer_of[top(m)]:
            rel = os.path.relpath(file_of[m], os.path.join(ROOT, ".."))
            problems.append(
                f"{rel}:{line}: `{path}` imports upward: `{m}` is in {describe(layer_of[top(m)])}, "
                f"`{t}` in {describe(layer_of[top(t)])}")

# cycles: strongly connected components (Tarjan)
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]


def strong(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges[v]:
        if w not in index:
            strong(w)
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
        if len(comp) > 1:
            sccs.append(sorted(comp))


sys.setrecursionlimit(10000)
for v in sorted(edges):
    if v not in index:
        strong(v)
for c in sccs:
    problems.append("import cycle: " + " <-> ".join(c))

print(f"{len(mods)} files, {sum(len(e) for e in edges.values())} edges, {len(layers)} layers, "
      f"{len(problems)} problem(s)")
for problem in problems:
    print("  " + problem)
sys.exit(1 if problems else 0)

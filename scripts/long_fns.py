#!/usr/bin/env python3
"""Lists the functions of src/ longer than a limit (80 lines unless `--max N`), test code left
out: `#[cfg(test)]` modules, inline or in a file of their own, and `#[cfg(test)]` functions.

A function's length runs from its `fn` line to its closing brace, comments and blank lines
included (what a reader scrolls through; clippy's `too_many_lines` counts only code lines, so
this is the stricter count). Exits 1 when any function is over the limit.

Usage: python3 scripts/long_fns.py [--max N]"""
import os
import re
import sys

sys.dont_write_bytecode = True
from rust_text import attributed_test, blank  # noqa: E402 (after the line above)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
LIMIT = int(sys.argv[sys.argv.index("--max") + 1]) if "--max" in sys.argv else 80


def closing(clean, open_at):
    """The offset of the brace that closes the one at `open_at`."""
    depth = 0
    for i in range(open_at, len(clean)):
        if clean[i] == "{":
            depth += 1
        elif clean[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(clean) - 1


def test_files(sources):
    """Files that are test modules of their own (`#[cfg(test)] mod fixtures;` in the parent)."""
    out = set()
    for path, clean in sources.items():
        for m in re.finditer(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;", clean):
            if attributed_test(clean, m.start()):
                base = os.path.dirname(path)
                if os.path.basename(path) not in ("mod.rs", "lib.rs", "main.rs"):
                    base = path[:-3]
                out |= {os.path.join(base, m.group(1) + ".rs"), os.path.join(base, m.group(1), "mod.rs")}
    return out


def long_functions(path, clean):
    """(line, name, length) of each function over the limit outside test code."""
    skipped = []
    for m in re.finditer(r"\b(mod|fn)\s+[A-Za-z_][A-Za-z0-9_]*[^;{]*\{", clean):
        if attributed_test(clean, m.start()):
            skipped.append((m.end() - 1, closing(clean, m.end() - 1)))
    out = []
    for m in re.finditer(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)[^;{]*([;{])", clean):
        if m.group(2) == ";" or any(a <= m.start() <= b for a, b in skipped):
            continue
        first = clean.count("\n", 0, m.start()) + 1
        last = clean.count("\n", 0, closing(clean, m.end() - 1)) + 1
        if last - first + 1 > LIMIT:
            out.append((first, m.group(1), last - first + 1))
    return out


sources = {}
for d, _, names in os.walk(ROOT):
    for name in names:
        if name.endswith(".rs"):
            path = os.path.join(d, name)
            with open(path, encoding="utf-8") as f:
                sources[path] = blank(f.read())
tests = test_files(sources)
found = []
for path in sorted(set(sources) - tests):
    for line, name, length in long_functions(path, sources[path]):
        found.append(f"{os.path.relpath(path, os.path.join(ROOT, '..'))}:{line}: fn {name}: {length} lines")
print(f"{len(found)} function(s) over {LIMIT} lines in src/ (test code left out)")
for line in found:
    print("  " + line)
sys.exit(1 if found else 0)

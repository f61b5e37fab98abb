#!/usr/bin/env python3
"""The house's size and naming limits (issue 36), checked on src/:

- no production file over 600 lines, no mod.rs over 300: a file's production part is what
  comes before its first top-level `#[cfg(test)]` module; files that are test-only modules
  (declared under `#[cfg(test)]`, such as `tests.rs` and `testing.rs`) are not production;
- no type name (struct, enum, union, trait, type alias) defined twice in production code:
  a newcomer who greps a type finds one.

Prints what breaks a limit and exits 1; prints a one-line summary otherwise.
"""

import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from rust_text import blank  # noqa: E402 (after the line above)

ROOT = pathlib.Path(__file__).resolve().parent.parent / "src"
MAX_FILE = 600
MAX_MOD = 300

TEST_GATE = re.compile(r"^#\[cfg\(test\)\]\s*$")
MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z0-9_]+)\s*([;{])")
# A type's definition: a struct, enum, union or trait anywhere (a function may define one), a
# type alias at the top level only (indented, `type X` is an impl's or trait's associated type).
TYPE_DEF = re.compile(
    r"^(?:\s*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?(struct|enum|union|trait)"
    r"|(?:pub(?:\([^)]*\))?\s+)?(type))\s+([A-Z][A-Za-z0-9_]*)"
)


def module_dir(path: pathlib.Path) -> pathlib.Path:
    """Where the files of `path`'s child modules live."""
    if path.name in ("mod.rs", "lib.rs", "main.rs"):
        return path.parent
    return path.parent / path.stem


def production_lines(lines: list[str]) -> list[str]:
    """The lines outside the file's top-level `#[cfg(test)]` module blocks (comments and
    strings already blanked: rustfmt closes a top-level block with a `}` in column 0)."""
    kept: list[str] = []
    n = 0
    while n < len(lines):
        line = lines[n]
        if TEST_GATE.match(line):
            k = n + 1
            while k < len(lines) and not lines[k].strip():
                k += 1
            decl = MOD_DECL.match(lines[k]) if k < len(lines) else None
            if decl and decl.group(2) == "{" and not lines[k].startswith(" "):
                end = k
                while end < len(lines) and lines[end].rstrip() != "}":
                    end += 1
                n = end + 1
                continue
        kept.append(line)
        n += 1
    return kept


def test_only_files(files: list[pathlib.Path]) -> set[pathlib.Path]:
    """Files of modules declared under `#[cfg(test)]`, and everything under them."""
    gated: set[pathlib.Path] = set()
    for path in files:
        lines = path.read_text().splitlines()
        for n, line in enumerate(lines):
            decl = MOD_DECL.match(line)
            if not decl or decl.group(2) != ";":
                continue
            attrs = []
            k = n - 1
            while k >= 0 and lines[k].strip().startswith(("#[", "///", "//")):
                attrs.append(lines[k].strip())
                k -= 1
            if "#[cfg(test)]" in attrs:
                base = module_dir(path) / decl.group(1)
                gated.add(base.with_suffix(".rs"))
                gated.add(base / "mod.rs")
                gated.update(p for p in files if base in p.parents)
    return gated


def main() -> int:
    files = sorted(ROOT.rglob("*.rs"))
    tests = test_only_files(files) & set(files)
    problems = []
    defined: dict[str, list[str]] = {}
    biggest = (0, "")
    for path in files:
        if path in tests:
            continue
        rel = path.relative_to(ROOT.parent)
        lines = production_lines(blank(path.read_text()).splitlines())
        limit = MAX_MOD if path.name == "mod.rs" else MAX_FILE
        if len(lines) > limit:
            problems.append(f"{rel}: {len(lines)} production lines (at most {limit})")
        biggest = max(biggest, (len(lines), str(rel)))
        for n, line in enumerate(lines, 1):
            found = TYPE_DEF.match(line)
            if found:
                defined.setdefault(found.group(3), []).append(f"{rel}:{n}")
    for name, places in sorted(defined.items()):
        if len(places) > 1:
            problems.append(f"type {name} defined {len(places)} times: {', '.join(places)}")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(
        f"house: {len(files) - len(tests)} production files, none over {MAX_FILE} lines "
        f"(mod.rs {MAX_MOD}; the longest {biggest[1]}, {biggest[0]}); "
        f"{len(defined)} type names, each defined once"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

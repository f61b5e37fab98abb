"""Reading Rust source as text, for the checks in scripts/ (modgraph.py, long_fns.py)."""
import re


def blank(src):
    """The source with comments, strings and char literals replaced by spaces (newlines and
    offsets kept), so braces and paths inside them are not read as code."""
    out = list(src)
    n = len(src)

    def fill(a, b):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    raw = re.compile(r'b?r(#*)"')
    char = re.compile(r"b?'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'")
    i = 0
    while i < n:
        ident_before = i > 0 and (src[i - 1].isalnum() or src[i - 1] == "_")
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            fill(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 0, i
            while j < n:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                    if depth == 0:
                        break
                else:
                    j += 1
            fill(i, j)
            i = j
        elif not ident_before and raw.match(src, i):
            m = raw.match(src, i)
            end = src.find('"' + m.group(1), m.end())
            end = n if end < 0 else end + 1 + len(m.group(1))
            fill(i, end)
            i = end
        elif src[i] == '"' or (not ident_before and src.startswith('b"', i)):
            j = i + (2 if src[i] == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            fill(i, j + 1)
            i = j + 1
        elif (src[i] == "'" or (not ident_before and src.startswith("b'", i))) and char.match(src, i):
            end = char.match(src, i).end()
            fill(i, end)
            i = end
        else:
            i += 1
    return "".join(out)


def attributed_test(clean, pos):
    """Whether the item starting at `pos` (its `mod`/`fn` keyword, after any visibility) carries
    `#[cfg(test)]` among the attributes right before it."""
    attrs = re.search(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|const|unsafe)\s+)*$", clean[max(0, pos - 600):pos])
    return "#[cfg(test)]" in re.sub(r"\s+", "", attrs.group(1))

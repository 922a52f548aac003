#!/usr/bin/env python3
"""check_tree.py — the architecture rules docs/architecture.md states, checked on the tree.

The tree is the architecture diagram only while these hold, so ctest runs this (test "tree"):
  1. each folder of src/ and loaders/ includes only the folders below it in the table
     (docs/architecture.md "Which folder may include which"), and names internal headers by
     folder ("io/io.h"), so an #include says which stage it reaches into;
  2. tools/ and datasets/ include only the public headers (include/) and their own; the one
     exception, tools/internal/, says why in its README;
  3. no source file of the library, the tools or the generator is over 700 lines;
  4. every atomic operation in src/ and loaders/ names its memory order (the *_explicit forms),
     as the DESIGN comments that give each order's reason assume;
  5. no Python function of the binding (python/ringfeed/) or of tools/*.py is over 150 lines.
Prints every violation with file and line and exits 1, or prints a summary and exits 0.
"""
import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)

# folder -> folders it may include (besides itself). Mirrors docs/architecture.md.
ALLOWED = {
    "base": set(),
    "plan": {"base"},
    "loaders": {"base"},
    "decode": {"base"},
    "io": {"base", "loaders"},
    "backend": {"base", "decode", "loaders"},
    "authoring": {"base", "decode", "loaders", "io", "backend"},
    "pipeline": {"base", "plan", "loaders", "decode", "io", "backend"},
}
PUBLIC = {"ringfeed.h", "ringfeed_shards.h"}
MAX_LINES = 700
MAX_PY_FUNCTION_LINES = 150
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
BARE_ATOMIC = re.compile(
    r"\batomic_(load|store|exchange|fetch_[a-z]+|compare_exchange_(?:weak|strong))\s*\(")


def sources(*dirs, exts=(".c", ".h", ".cu")):
    for d in dirs:
        for p in sorted((ROOT / d).rglob("*")):
            if p.suffix in exts and p.is_file():
                yield p


def folder_of(p):
    rel = p.relative_to(ROOT).parts
    return rel[1] if rel[0] == "src" else rel[0]


def check_layers(bad):
    for p in sources("src", "loaders"):
        me = folder_of(p)
        if me not in ALLOWED:
            bad.append(f"{p.relative_to(ROOT)}: folder {me}/ is not in the layer table")
            continue
        for n, line in enumerate(p.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) in PUBLIC:
                continue
            inc = m.group(1)
            if "/" not in inc:
                bad.append(f"{p.relative_to(ROOT)}:{n}: \"{inc}\" does not name its folder")
                continue
            to = inc.split("/")[0]
            if to != me and to not in ALLOWED.get(me, set()):
                bad.append(f"{p.relative_to(ROOT)}:{n}: {me}/ may not include {inc} "
                           f"({me}/ may include: {', '.join(sorted(ALLOWED[me])) or 'nothing'})")


def check_public_only(bad):
    for p in sources("tools", "datasets"):
        if "internal" in p.relative_to(ROOT).parts:
            continue
        own = {q.name for q in p.parent.glob("*.h")}
        for n, line in enumerate(p.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if m and m.group(1) not in PUBLIC and m.group(1) not in own:
                bad.append(f"{p.relative_to(ROOT)}:{n}: includes {m.group(1)}, not a public "
                           "header (tools/internal/ is the place for code that needs internals)")


def check_lengths(bad):
    for p in sources("src", "loaders", "tools", "datasets", "python/ringfeed"):
        n = len(p.read_text().splitlines())
        if n > MAX_LINES:
            bad.append(f"{p.relative_to(ROOT)}: {n} lines (at most {MAX_LINES}: split it by job)")


def check_atomics(bad):
    for p in sources("src", "loaders"):
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if BARE_ATOMIC.search(line):
                bad.append(f"{p.relative_to(ROOT)}:{n}: atomic operation without a memory "
                           "order (use the _explicit form and say why in a comment)")


def check_python_functions(bad):
    files = sorted((ROOT / "python" / "ringfeed").glob("*.py"))
    files += sorted((ROOT / "tools").glob("*.py"))
    for p in files:
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                n = node.end_lineno - first + 1
                if n > MAX_PY_FUNCTION_LINES:
                    bad.append(f"{p.relative_to(ROOT)}:{node.lineno}: {node.name}() is {n} lines "
                               f"(at most {MAX_PY_FUNCTION_LINES}: split it)")


def main():
    bad = []
    check_layers(bad)
    check_public_only(bad)
    check_lengths(bad)
    check_atomics(bad)
    check_python_functions(bad)
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} violation(s) of the tree's rules (docs/architecture.md)")
        return 1
    n = sum(1 for _ in sources("src", "loaders"))
    print(f"tree ok: {n} files in {len(ALLOWED)} folders follow the layer table; tools/ and "
          f"datasets/ use public headers; no file over {MAX_LINES} lines; atomics explicit; no "
          f"Python function over {MAX_PY_FUNCTION_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())

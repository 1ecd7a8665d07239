"""The import graph of the s2sad package, read from the source (no module is imported): prints
its import circles, the imports placed inside functions, and the modules over 600 lines and
classes over 400. Exits 1 if there is a circle.

Every `import` and `from ... import` of an s2sad module counts, at the top of a module or inside
a function (an import inside a function that closes a circle is still a circle). `from . import
x` counts as an import of module `x` where `x` is one, else of the package. Importing a module
also runs its packages' `__init__`, which is not counted (every module would be in a circle
through `s2sad/__init__.py`).

    python scripts/import_graph.py [--ignore-lazy-in MODULE ...]

`--ignore-lazy-in` leaves out the imports inside functions of the modules named (for a module
being redrawn elsewhere, until its own circles are gone).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "s2sad"
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 400


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every module of the package (a package by its __init__.py)."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_package(name: str, known: dict[str, Path]) -> bool:
    return known[name].name == "__init__.py"


def imports(name: str, path: Path, known: dict[str, Path]):
    """(imported module, line, whether inside a function) for each import of a package module."""
    tree = ast.parse(path.read_text(), str(path))
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside |= {id(n) for n in ast.walk(node) if n is not node}
    base = name if _is_package(name, known) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        lazy = id(node) in inside
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name, node.lineno, lazy
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                parts = parts[: len(parts) - node.level + 1]
                target = ".".join(parts + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target not in known:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub if sub in known else target), node.lineno, lazy


def graph(known: dict[str, Path], ignore_lazy_in=()) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for target, _, lazy in imports(name, path, known):
            if target != name and not (lazy and name in ignore_lazy_in):
                edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def oversized(known: dict[str, Path]) -> list[str]:
    """Modules over MAX_MODULE_LINES lines and classes over MAX_CLASS_LINES."""
    out = []
    for name, path in known.items():
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            out.append(f"module {name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    out.append(f"class {name}.{node.name}: {size} lines")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ignore-lazy-in", nargs="*", default=[], metavar="MODULE")
    args = parser.parse_args(argv)
    known = modules()
    found = cycles(graph(known, set(args.ignore_lazy_in)))
    for component in found:
        print("circle:", " <-> ".join(component))
    for name, path in known.items():
        for target, line, lazy in imports(name, path, known):
            if lazy:
                print(f"import inside a function: {path.relative_to(ROOT)}:{line} -> {target}")
    for line in oversized(known):
        print("oversized:", line)
    if not found:
        print("no import circles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

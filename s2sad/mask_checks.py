"""A boolean mask's shape checked in jitted code: Numba's `x[m]` with a mask shorter than the
axis takes its first elements where NumPy raises IndexError. Where bounds checks are on
(jit.BOUNDSCHECK and code that indexes, pipeline/bounds.py), each subscript by names outside
loops (`x[m]`, `x[i, m]`, `y[m] = v`) becomes `x[mask_fits(x, axis, m)]` in the text Numba
compiles, line for line; `mask_fits` (rules/indexing.py) is `m` itself, compiled away, for any
index but a boolean array. Loops' subscripts (fusion's, a user's loop) are left as they are.
"""

from __future__ import annotations

import ast


def with_mask_checks(source: str) -> str:
    """`source` with the subscripts of its top-level functions' statements outside loops by a
    name checked by `mask_fits`, line for line."""
    tree = ast.parse(source)
    lines = source.encode().splitlines(keepends=True)  # (ast's columns count bytes)
    edits = []
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            for node in _subscripts(fn.body):
                edits += _edits(node)
    for line, col, text in sorted(edits, reverse=True):
        lines[line - 1] = lines[line - 1][:col] + text.encode() + lines[line - 1][col:]
    return b"".join(lines).decode()


def _subscripts(body: list) -> list:
    found = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            found += [n for n in ast.walk(stmt.test) if isinstance(n, ast.Subscript)]
            found += _subscripts(stmt.body) + _subscripts(stmt.orelse)
        elif not isinstance(stmt, (ast.For, ast.While, ast.FunctionDef, ast.With, ast.Try)):
            found += [n for n in ast.walk(stmt) if isinstance(n, ast.Subscript)]
    return found


def _edits(node: ast.Subscript) -> list:
    """(line, byte column, text) insertions making each name in `node`'s index `mask_fits(x,
    axis, name)`, where the array `x` is a name and the index names its axes one by one."""
    if not isinstance(node.value, ast.Name):
        return []
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if not all(isinstance(i, (ast.Name, ast.Slice)) for i in items):
        return []  # (`None`, `...`, an expression: axes not counted here)
    edits = []
    for axis, item in enumerate(items):
        if isinstance(item, ast.Name):
            edits.append((item.lineno, item.col_offset, f"mask_fits({node.value.id}, {axis}, "))
            edits.append((item.end_lineno, item.end_col_offset, ")"))
    return edits

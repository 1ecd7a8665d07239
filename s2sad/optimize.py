"""Stage 5: optimize. Adjoint code built one rule at a time is full of copies (`dy_mul = dy_add`,
`dy_new = dy`); a reader should not have to follow them. Two rewrites, both local to one block
of statements and both checked against every assignment in the function:

- a copy `b = a` right after `a = b`, with neither changed in between, is dropped;
- a copy `a = b` whose name is assigned nowhere else and read only later in the same block is
  forwarded: its reads become `b`, provided `b` does not change before the last of them.
"""

from __future__ import annotations

import ast
from collections import Counter


def _assigned(node) -> list[str]:
    names = []
    for n in ast.walk(node) if isinstance(node, ast.AST) else []:
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.append(n.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            names.append(n.target.id)
    return names


def _reads(node) -> Counter:
    return Counter(
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    )


def _is_copy(stmt) -> tuple[str, str] | None:
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Name)
    ):
        return stmt.targets[0].id, stmt.value.id
    return None


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def visit_Name(self, node):
        if node.id == self.old and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Name(self.new, ast.Load()), node)
        return node


def optimize(stmts: list, protected: set[str]) -> list:
    """`stmts` with redundant copies removed; names in `protected` are never removed."""
    module = ast.Module(stmts, [])
    while True:
        counts = Counter(_assigned(module))
        reads = _reads(module)
        if not _pass(module.body, counts, reads, protected):
            return module.body


def _pass(block: list, counts: Counter, reads: Counter, protected: set[str]) -> bool:
    for i, stmt in enumerate(block):
        copy = _is_copy(stmt)
        if copy is not None and _try(block, i, copy, counts, reads, protected):
            return True
        for field in ("body", "orelse"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and _pass(inner, counts, reads, protected):
                return True
    return False


def _try(block, i, copy, counts, reads, protected) -> bool:
    a, b = copy
    if a == b:
        del block[i]
        return True
    rest = block[i + 1 :]
    # a later `b = a` with neither changed in between is redundant
    for j, stmt in enumerate(rest):
        back = _is_copy(stmt)
        if back == (b, a) and b not in protected:
            del block[i + 1 + j]
            return True
        if a in _assigned(stmt) or b in _assigned(stmt):
            break
    if a in protected or counts[a] != 1:
        return False
    uses = [j for j, stmt in enumerate(rest) if _reads(stmt)[a]]
    if not uses or sum(_reads(stmt)[a] for stmt in rest) != reads[a]:
        return False  # read elsewhere (another block) or never
    last = uses[-1]
    for stmt in rest[:last]:
        if b in _assigned(stmt):
            return False
    if b in _assigned(rest[last]) and not isinstance(rest[last], ast.Assign):
        return False  # inside a loop or branch, b may change before a is read
    for j in range(last + 1):
        block[i + 1 + j] = _Rename(a, b).visit(block[i + 1 + j])
    del block[i]
    return True

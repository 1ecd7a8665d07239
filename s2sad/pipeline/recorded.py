"""Which names a block inside a loop records on the tape (tape.py pushes them at the block's end
and pops them where the reversed block starts), and the starting values a `break` needs for
them. Consumes normalized blocks with their annotations (ir.py); produces name lists and
statements."""

from __future__ import annotations

import ast

from .. import ir
from .names import names_mentioned, names_stored
from .nodes import load_name


def owned(block: list[ast.stmt]) -> list[str]:
    """Names a block assigns at its own level, in order (not loop-carried copies or counters)."""
    names: dict[str, None] = {}
    for stmt in block:
        if isinstance(stmt, ast.Assign) and not ir.is_end_copy(stmt) and not ir.is_counter(stmt):
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    names.setdefault(t.id)
                elif isinstance(t, ast.Tuple):
                    for e in t.elts:
                        names.setdefault(e.id)
        elif isinstance(stmt, ast.If):
            for n in ir.merged(stmt):
                names.setdefault(n)
            # a name its branches assign under one name (both `y = ...`, no merge made), or on
            # one path only, that the block reads outside the `if`: the block's own too, so
            # that its value comes back where the reversed block starts, before those reads
            others = names_mentioned([s for s in block if s is not stmt])
            for n in names_stored(stmt.body + stmt.orelse):
                if n in others:
                    names.setdefault(n)
        elif isinstance(stmt, (ast.For, ast.While)):
            for n in ir.liveout(stmt):
                names.setdefault(n)
    return list(names)


def bound_for_breaks(body: list[ast.stmt], recorded: dict) -> list[ast.stmt]:
    """A `break` pushes every value its loop body records, some perhaps not yet assigned on
    its path (a carried value's next one, made after the break): in the first iteration that
    name would be unbound. Such a name starts as the carried value it replaces (`s_1 = s`,
    of its type); what the break pushes for it is read by no statement that ran."""
    inner = [n for s in body for n in walk_skipping_loops(s)]
    if not any(isinstance(n, ast.Break) for n in inner):
        return []
    mine = set(recorded.get(id(body), []))
    starts: dict[str, str] = {}
    for node in inner:
        if ir.is_end_copy(node) and isinstance(node.value, ast.Name) and node.value.id in mine:
            starts.setdefault(node.value.id, node.targets[0].id)
    return [ast.Assign([ast.Name(n, ast.Store())], load_name(t)) for n, t in starts.items()]


def walk_skipping_loops(node: ast.AST):
    """`node` and what it holds, not looking into loops (whose breaks are their own)."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.For, ast.While)):
            yield from walk_skipping_loops(child)

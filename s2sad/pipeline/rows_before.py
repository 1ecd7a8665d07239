"""Tapes of rows made before their loop, for the fused jitted code: where a value a loop records
in rows (row_tapes.py) is an array a fused run writes into a buffer made before the loop
(hoist.py: `reused(x_buffer, ...)`, `snapshot_into(x_buffer, ...)`), its rows are made before
the loop too, shaped like that buffer, instead of at the first push.

    x_buffer = np.empty(...)                  x_buffer = np.empty(...)
    for t in range(n):                        x_tape = rows_like(x_buffer, n)
        x = reused(x_buffer, ...)             for t in range(n):
        ...                                       x = reused(x_buffer, ...)
        if t_taped == 0:                          ...
            x_tape = row_tape(x, n)               push_row(x_tape, t_taped, x)
        push_row(x_tape, t_taped, x)

A tape assigned in the loop is a value Numba carries from one iteration to the next, which it
keeps and releases at each push; one made before it is not (the jitted LSTM: 0.5 ms of 4.5). The
buffer's shape and dtype are a guess (the names the allocation reads at the loop's entry): a
value that does not fit raises in `push_row` (another shape or dtype), and the call runs in the
code without fused loops, which keeps lists, as a value of a shape that changes does. The pass
runs after hoist.py; it consumes and produces statement lists."""

from __future__ import annotations

import ast
import copy

from ..astcopy import walk_nodes
from .nodes import assigned_name, call_of, load_name

_INTO_BUFFER = frozenset({"reused", "reused_zeros", "snapshot_into"})


def rows_before(block: list) -> list:
    """`block` (a function's statements) with the tapes of rows that can be made before their
    outermost loop made there (a group's rows take every iteration of the loops around it)."""
    out: list = []
    for stmt in block:
        if isinstance(stmt, ast.If):
            stmt = copy.copy(stmt)
            stmt.body, stmt.orelse = rows_before(stmt.body), rows_before(stmt.orelse)
        elif isinstance(stmt, ast.For):
            stmt = _copied(stmt)
            out += _made_before(stmt, {assigned_name(s) for s in out} - {None})
        out.append(stmt)
    return out


def _copied(stmt):
    """`stmt` with each loop and `if` in it copied, and their blocks (rewritten in place)."""
    if not isinstance(stmt, (ast.For, ast.While, ast.If)):
        return stmt
    stmt = copy.copy(stmt)
    stmt.body = [_copied(s) for s in stmt.body]
    stmt.orelse = [_copied(s) for s in stmt.orelse]
    return stmt


def _made_before(loop: ast.For, before: set) -> list:
    """The rows of `loop`'s groups that can be made before it (the group's `if count == 0:`
    rewritten in place, in copies of the blocks holding it); `before`: the names the statements
    before the loop in its block bind (its buffers among them)."""
    buffers = _buffers_of(loop, before)
    made = []
    for block, k, test in _makes(loop):
        trips = [s for s in test.body if not _row_make(s)]
        kept, moved = [], []
        for s in test.body:
            if _row_make(s) and s.value.func.id == "shape_rows":
                moved.append(s)  # (rows of integers: known before the loop)
            elif _row_make(s):
                value = s.value.args[0]
                buffer = None
                if isinstance(value, ast.Name) and s.value.func.id == "row_tape":
                    buffer = buffers.get(value.id)
                if buffer is None:
                    kept.append(s)
                else:
                    rows = call_of("rows_like", load_name(buffer), s.value.args[1])
                    moved.append(ast.copy_location(ast.Assign(s.targets, rows), s))
        if not moved:
            continue
        made[:0] = trips + moved  # (groups visited last first: made in their order)
        # (the trip count, bound before the loop, serves the rows still made at the first push)
        kept = [s for s in kept if s not in trips]
        if kept:
            block[k] = copy.copy(test)
            block[k].body = kept
        else:
            del block[k]
    return made


def _makes(loop: ast.For) -> list:
    """(block, index, `if count == 0:`) for each group of rows made at their first push in
    `loop`, at any depth."""
    found = []

    def walk(block: list) -> None:
        for k, stmt in enumerate(block):
            if _first_push_test(stmt):
                found.append((block, k, stmt))
            elif isinstance(stmt, (ast.For, ast.While, ast.If)):
                walk(stmt.body)
                walk(stmt.orelse)

    walk(loop.body)
    return found[::-1]  # (the last first: deleting one leaves the others' indices)


def _first_push_test(stmt) -> bool:
    """`if x_taped == 0:` around `x_tape = row_tape(x, trips)` (row_tapes.py)."""
    return (
        isinstance(stmt, ast.If)
        and not stmt.orelse
        and isinstance(stmt.test, ast.Compare)
        and isinstance(stmt.test.left, ast.Name)
        and isinstance(stmt.test.ops[0], ast.Eq)
        and any(_row_make(s) for s in stmt.body)
    )


def _row_make(stmt) -> bool:
    return (
        isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id in ("row_tape", "shape_rows", "view_rows")
    )


def _buffers_of(loop: ast.For, before: set) -> dict[str, str]:
    """{x: x_buffer} for the names `loop` assigns from one buffer made before it and from no
    other (`x = reused(x_buffer, ...)`; other assignments, a fused run's `else:`, are
    ignored: the buffer's shape is a guess that push_row checks)."""
    found: dict[str, set] = {}
    for node in walk_nodes(loop):
        name = assigned_name(node)
        value = getattr(node, "value", None)
        if (
            name is not None
            and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in _INTO_BUFFER
            and value.args
            and isinstance(value.args[0], ast.Name)
        ):
            found.setdefault(name, set()).add(value.args[0].id)
    return {
        name: next(iter(buffers))
        for name, buffers in found.items()
        if len(buffers) == 1 and buffers <= before
    }

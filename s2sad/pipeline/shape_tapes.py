"""Tapes for Numba of values the adjoint reads only for their shape and dtype: the tape pass
keeps a stand-in of each (`shape_stub`) on a list; for the jitted transform, such a list
becomes calls of helpers (rules/tapes.py) whose Numba forms keep nothing for a scalar and an
array's shape as integers. A jitted stencil records two scalars a point that way, and the
list's append and pop cost about as much as the point's own arithmetic.

    x_tape = []                    ->  x_tape = shape_tape()
    x_tape.append(shape_stub(x))   ->  shape_push(x_tape, x)
    x = x_tape.pop()               ->  x = shape_pop(x_tape, x)

Where every push of a tape provably records one shape, that of an expression `w` of the
parameters (fixed_shapes.py: `y` carried with the shape of `x`, `z = x[1:] * y[:-1]`), the
tape is made `like` it, and compiled it is that shape: the push does nothing and the pop makes
a stand-in of it. An RK4 step over an array state pushed 21 such shapes; the pushes' calls, not
the lists, were their cost (a push that only compared the shape with `w`'s cost as much).

    x_tape = []                    ->  x_tape = shape_tape(w)

A tape read in any other way stays a list. The pass runs after lowering, on the jitted
transform only; it consumes and produces statement lists."""

from __future__ import annotations

import ast

from ..astcopy import clone
from .fixed_shapes import fixed_shape_witnesses
from .nodes import call_of, load_name


def shape_only_tapes(
    inits: list[ast.stmt], blocks: list[list[ast.stmt]], params=(), rank=lambda node: None
) -> tuple[list[ast.stmt], list[list[ast.stmt]]]:
    """`inits` (the tapes' `x_tape = []`) and the statement lists `blocks` (the primal first,
    of parameters `params`, its names' ranks told by `rank`), with each tape that only ever
    holds `shape_stub(x)` of one name `x`, popped back into `x`, rewritten."""
    names: dict[str, set] = {s.targets[0].id: set() for s in inits}
    uses = dict.fromkeys(names, 0)
    plain = dict.fromkeys(names, 0)
    for block in blocks:
        for node in ast.walk(ast.Module(block, [])):
            if isinstance(node, ast.Name) and node.id in uses:
                uses[node.id] += 1
            for found in (_pushed(node, names), _popped(node, names)):
                if found is not None:
                    tape, name = found
                    plain[tape] += 1
                    names[tape].add(name)
    kept = {t for t, x in names.items() if uses[t] == plain[t] and len(x) == 1 and None not in x}
    recorded = {t: next(iter(names[t])) for t in kept}
    fixed = fixed_shape_witnesses(blocks[0], sum(blocks[1:], []), recorded, params, rank)
    new_inits = [
        (
            _copied(ast.Assign(s.targets, _made(s.targets[0].id, fixed)), s)
            if s.targets[0].id in kept
            else s
        )
        for s in inits
    ]
    return new_inits, [_rewritten(block, kept) for block in blocks]


def _made(tape: str, fixed: dict) -> ast.Call:
    """A shape tape's making: `shape_tape()`, or `shape_tape(w)` for one of `w`'s shape
    (`shape_tape(k, y0)`: of their broadcast's)."""
    return call_of("shape_tape", *(clone(w) for w in fixed.get(tape, ())))


def _pushed(node, tapes) -> tuple[str, str | None] | None:
    """(tape, x) for a statement `tape.append(shape_stub(x))`, (tape, None) for another push
    onto a tape, else None."""
    if not isinstance(node, ast.Expr):
        return None
    tape = _list_call(node.value, "append", 1, tapes)
    if tape is None:
        return None
    value = node.value.args[0]
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "shape_stub"
        and len(value.args) == 1
        and isinstance(value.args[0], ast.Name)
        and not value.keywords
    ):
        return tape, value.args[0].id
    return tape, None


def _popped(node, tapes) -> tuple[str, str | None] | None:
    """(tape, x) for a statement `x = tape.pop()`, (tape, None) for another target."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return None
    tape = _list_call(node.value, "pop", 0, tapes)
    if tape is None:
        return None
    target = node.targets[0]
    return tape, target.id if isinstance(target, ast.Name) else None


def _list_call(call, method: str, n_args: int, tapes) -> str | None:
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == method
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id in tapes
        and len(call.args) == n_args
        and not call.keywords
    ):
        return call.func.value.id
    return None


def _rewritten(block: list[ast.stmt], kept: set[str]) -> list[ast.stmt]:
    out = []
    for stmt in block:
        pushed, popped = _pushed(stmt, kept), _popped(stmt, kept)
        if pushed is not None:
            tape, name = pushed
            call = call_of("shape_push", load_name(tape), load_name(name))
            stmt = _copied(ast.Expr(call), stmt)
        elif popped is not None:
            tape, name = popped
            call = call_of("shape_pop", load_name(tape), load_name(name))
            stmt = _copied(ast.Assign(stmt.targets, call), stmt)
        elif isinstance(stmt, (ast.If, ast.For, ast.While)):
            stmt.body = _rewritten(stmt.body, kept)
            stmt.orelse = _rewritten(stmt.orelse, kept)
        out.append(stmt)
    return out


def _copied(new: ast.stmt, old: ast.stmt) -> ast.stmt:
    """`new` in place of `old`, with its origin and the marks the stages left on it."""
    for key, value in vars(old).items():
        if key not in old._fields and key not in old._attributes:
            setattr(new, key, value)
    return ast.copy_location(new, old)

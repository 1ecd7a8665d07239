"""Writes into a fresh array whose overwritten elements no adjoint reads (part of the reverse pass).

The adjoint of `z[index] = v` gives v the cotangent `dz[index]`, then zeroes `dz[index]`: the old
elements of `z` it overwrote get nothing. For that it makes `dz` an array of its own (a copy) and
copies `dz[index]` before zeroing it. In

    z = np.zeros_like(y)       # D: an array of constants, `z` bound nowhere else
    z[0] = x[0]
    z[1:] = x[1:] * y[:-1]     # W
    return z

(gradbench's RK4 right-hand side, four times a step) what W overwrote are zeros from D, and
between D and W `z` is only written, at elements W does not write (`z[0]`): no adjoint reads
`dz[1:]` after W's. W's adjoint then reads `dz[1:]` as it is: no copy, no array of its own, no
zeroing (three passes over memory and two arrays of the step's size, each time).

Taken: W writes `z[index]` in the block where `z` is bound once, in the whole function, by D, an
array of zeros, ones or garbage (`np.zeros_like(y)`, `np.empty(n)`: nothing differentiable);
between D and W the block mentions `z` only in writes `z[other] = u` whose `other` names
elements apart from `index` (constant integers and slices, compared axis by axis), and neither
W's value nor those writes' values read `z`; nothing before D or outside the block mentions `z`.
The reverse pass also asks that `dz` not own its array (then nothing writes into it in place)."""

from __future__ import annotations

import ast

from .. import ir
from ..astcopy import walk_nodes

_CONSTANT_ARRAYS = {"zeros", "zeros_like", "empty", "empty_like", "ones", "ones_like"}


def unread_writes(stmts: list[ast.stmt]) -> set[int]:
    """The ids of the subscript writes of `stmts` (a function's normalized primal) whose
    overwritten elements no adjoint reads (see the module docstring)."""
    bound: dict[str, int] = {}
    for node in walk_nodes(ast.Module(list(stmts), [])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound[node.id] = bound.get(node.id, 0) + 1
    found: set[int] = set()
    for block in _blocks(stmts):
        for k, stmt in enumerate(block):
            name = _constant_array(stmt)
            if name is None or bound.get(name) != 1 or _mentions_outside(stmts, block, k, name):
                continue
            written: list = []  # the indices written since D
            for later in block[k + 1 :]:
                if not any(isinstance(n, ast.Name) and n.id == name for n in walk_nodes(later)):
                    continue
                index = _write_into(later, name)
                if index is None:
                    break  # a read of z, or anything else mentioning it: stop here
                if all(_apart(index, earlier) for earlier in written):
                    found.add(id(later))
                written.append(index)
    return found


def _blocks(stmts: list[ast.stmt]):
    yield stmts
    for stmt in stmts:
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            yield from _blocks(stmt.body)
            yield from _blocks(stmt.orelse)


def _constant_array(stmt) -> str | None:
    """`z` of `z = np.zeros_like(y)` (an array nothing differentiable flows into), else None."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    target, value = stmt.targets[0], stmt.value
    if not (isinstance(target, ast.Name) and isinstance(value, ast.Call)):
        return None
    callee = ir.callee(value.func)
    module = getattr(callee, "__module__", None) or ""
    if getattr(callee, "__name__", None) not in _CONSTANT_ARRAYS or not module.startswith("numpy"):
        return None
    return target.id


def _mentions_outside(stmts, block: list, k: int, name: str) -> bool:
    """Whether `name` is mentioned anywhere but in `block[k:]`."""
    inside = {id(n) for stmt in block[k:] for n in walk_nodes(stmt)}
    return any(
        isinstance(n, ast.Name) and n.id == name and id(n) not in inside
        for n in walk_nodes(ast.Module(list(stmts), []))
    )


def _write_into(stmt, name: str):
    """The index items of `name[index] = value` where `value` does not read `name`, else None."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    target = stmt.targets[0]
    if not (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Name)
        and target.value.id == name
    ):
        return None
    mentioned = [stmt.value, target.slice]
    if any(isinstance(n, ast.Name) and n.id == name for m in mentioned for n in walk_nodes(m)):
        return None
    return target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]


def _apart(a: list, b: list) -> bool:
    """Whether two basic indices of one array name no element in common: along some axis (every
    item up to it a constant integer or slice), their items are apart."""
    for x, y in zip(a, b):  # (item k indexes axis k: no None, no Ellipsis, no arrays)
        rx, ry = _range(x), _range(y)
        if rx is None or ry is None:
            return False
        if _disjoint(rx, ry):
            return True
    return False


def _range(item):
    """(start, stop) of the positions an index item names, counted from the front where both are
    >= 0 or from the back where both are < 0 (None: open), or None where not constant."""
    k = _int(item)
    if k is not None:
        return (k, k + 1 if k != -1 else None)
    if not isinstance(item, ast.Slice) or (item.step is not None and _int(item.step) != 1):
        return None
    lower = 0 if item.lower is None else _int(item.lower)
    upper = None if item.upper is None else _int(item.upper)
    if lower is None or (item.upper is not None and upper is None):
        return None
    return (lower, upper)


def _disjoint(a: tuple, b: tuple) -> bool:
    """Two ranges, each bound an integer from the front (>= 0), from the back (< 0) or open."""
    (a0, a1), (b0, b1) = a, b
    return _before(a1, b0) or _before(b1, a0)


def _before(stop, start) -> bool:
    """Whether every position below `stop` lies below every position from `start` on, for any
    length of the axis: both counted from the same end."""
    if stop is None:
        return False
    if start >= 0 and stop > 0:  # (a stop of 0 counts from the front too: nothing below it)
        return stop <= start
    if start < 0 and stop < 0:
        return stop <= start
    return stop == 0


def _int(node):
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    return None


# Zeros overwritten before they are read. In `z = np.zeros_like(y); z[0] = a; z[1:] = b` the
# zeros are never read: `np.empty_like(y)` makes the same values without a pass over memory.
# Compiled code alone takes it (pipeline/fusion), where that pass was a fifth of the RK4 step's.
_ZEROS = {"np.zeros": "np.empty", "np.zeros_like": "np.empty_like"}


def overwritten_zeros(block: list[ast.stmt]) -> set[int]:
    """The ids of the statements `z = np.zeros_like(y)` or `z = np.zeros(shape)` of `block`
    (emitted code: `np` is NumPy) after which, before anything leaves the block or mentions `z`
    otherwise, writes `z[index] = v` (`v` and `index` not reading `z`) cover every element of
    `z`: along its first axis, slices of step 1 and integers whose bounds follow one another
    from 0 to the end, every other axis whole, whatever the array's length."""
    found: set[int] = set()
    for k, stmt in enumerate(block):
        if _zeros_call(stmt) is None:
            continue
        name, pieces = stmt.targets[0].id, []
        for later in block[k + 1 :]:
            if not isinstance(later, (ast.Assign, ast.AugAssign, ast.Expr)):
                break  # a loop, a branch, a return: it may leave the block with z unwritten
            if not any(isinstance(n, ast.Name) and n.id == name for n in walk_nodes(later)):
                continue
            if _index_check(later):
                continue  # (`check_index(0, len(z))`, bounds.py: z's length alone)
            index = _write_into(later, name)
            piece = _range(index[0]) if index else None
            if piece is None or not all(_whole(i) for i in index[1:]):
                break
            pieces.append(piece)
            if _cover(pieces):
                found.add(id(stmt))
                break
    return found


def _index_check(stmt) -> bool:
    """A `check_index(...)` statement, which reads an array's length, none of its elements."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return isinstance(call, ast.Call) and getattr(call.func, "id", None) == "check_index"


def emptied(stmt: ast.Assign) -> ast.Assign:
    """`z = np.empty_like(y)` for `z = np.zeros_like(y)` (and `np.empty` for `np.zeros`)."""
    call = _zeros_call(stmt)
    module, name = _ZEROS[f"np.{call.func.attr}"].split(".")
    func = ast.Attribute(ast.Name(module, ast.Load()), name, ast.Load())
    new = ast.Assign(stmt.targets, ast.Call(func, call.args, call.keywords))
    return ir.copy_origin(new, stmt)


def _zeros_call(stmt):
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    value = stmt.value
    if not (isinstance(stmt.targets[0], ast.Name) and isinstance(value, ast.Call)):
        return None
    func = value.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return None
    return value if f"{func.value.id}.{func.attr}" in _ZEROS else None


def _whole(item) -> bool:
    return isinstance(item, ast.Slice) and item.lower is item.upper is item.step is None


def _cover(pieces: list) -> bool:
    """Whether ranges (`_range`'s) chain from position 0 to the open end, each starting where
    one before it stops (as written: from the front, or from the back, for any length)."""
    position, left = 0, list(pieces)
    while left:
        nxt = next((p for p in left if p[0] == position and p[1] != position), None)
        if nxt is None:
            return False
        if nxt[1] is None:
            return True
        position = nxt[1]
        left.remove(nxt)
    return False

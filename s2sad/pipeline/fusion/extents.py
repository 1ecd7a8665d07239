"""The lengths of the arrays' axes, symbolically, where slices of one array make them provably
different: `u` is (n, m), `u[1:, :]` is (n - 1, m), `u[:, :-1]` is (n, m - 1). A run keeps to
one shape: a statement over `u[1:, :]` does not join a run over `u`, whose guard would then
send every call to the unfused branch (a fused loop that never runs).

An axis is `(root, removed)`: a length of the program's (`(name, axis)` of an array this code
does not assign, or a fresh token where unknown) less `removed` elements. Two axes are
provably different where their roots are the same and what they remove differs (an empty axis
aside, which only costs a run split in two). Anything else may be equal: no claim is made."""

from __future__ import annotations

import ast
import itertools

from ...astcopy import walk_nodes
from ..nodes import assigned_name
from .scatters import scatter_of
from .shapes import _SAME_SHAPE, constant_int
from .syntax import SHAPE_ONLY, names_in, text_of, written_in_place

_fresh = itertools.count()


def extents(nodes, rank) -> dict[str, tuple]:
    """Each name assigned once, at the top level or in a loop body, -> its axes, where known."""
    found: dict[str, tuple] = {}
    counts: dict[str, int] = {}
    assigns = [
        n
        for node in nodes
        for n in walk_nodes(node)
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
    ]
    for n in assigns:
        counts[n.targets[0].id] = counts.get(n.targets[0].id, 0) + 1
    for n in assigns:
        name = n.targets[0].id
        if counts[name] == 1:
            axes = axes_of(n.value, found, rank, counts)
            if axes is not None:
                found[name] = axes
    return found


def axes_of(node, found: dict, rank, assigned=()):
    """`node`'s axes, given those of the names (`found`), or None."""
    if isinstance(node, ast.Name):
        if node.id in found:
            return found[node.id]
        r = rank(node)
        if node.id in assigned or not isinstance(r, int):
            return None
        return tuple(((node.id, k), 0) for k in range(r))  # an array this code takes as given
    if isinstance(node, ast.Subscript):
        return _sliced(node, found, rank, assigned)
    name = text_of(getattr(node, "func", None))
    if isinstance(node, ast.Call) and name in SHAPE_ONLY | {"getitem_vjp"} and len(node.args) > 1:
        return axes_of(node.args[1], found, rank, assigned)  # of its second argument's shape
    if isinstance(node, ast.Call) and name in _SAME_SHAPE and len(node.args) == 1:
        return axes_of(node.args[0], found, rank, assigned)
    if isinstance(node, ast.UnaryOp):
        return axes_of(node.operand, found, rank, assigned)
    if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult):
        operands = [node.left, node.right]
    elif isinstance(node, ast.Call) and (name in _SAME_SHAPE or name == "np.where"):
        operands = list(node.args)
    else:
        return None
    r = rank(node)
    if not isinstance(r, int):
        return None
    for o in operands:  # the first operand of the result's rank (broadcasting aside)
        if rank(o) == r:
            return axes_of(o, found, rank, assigned)
    return None


def differ(a: tuple, b: tuple) -> bool:
    """Whether two shapes of one rank are provably different (an axis from one root, less
    different numbers of elements)."""
    return len(a) == len(b) and any(x[0] == y[0] and x[1] != y[1] for x, y in zip(a, b))


def _sliced(node: ast.Subscript, found, rank, assigned):
    """A basic slice of an array whose axes are known: `u[1:, :-1]`, or with `slice(...)`."""
    base = axes_of(node.value, found, rank, assigned)
    if base is None:
        return None
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if len(items) > len(base):
        return None
    out = []
    for axis, item in zip(base, items):
        bounds = _bounds(item)
        if bounds is None:
            return None
        lower, upper, step = bounds
        if step != 1 or lower < 0 or (upper is not None and upper >= 0):
            out.append((("slice", next(_fresh)), 0))  # a length of its own
        else:  # `lower:` or `lower:-e`: the axis less lower + e elements
            out.append((axis[0], axis[1] + lower - (upper if upper is not None else 0)))
    return tuple(out) + tuple(base[len(items) :])


def _bounds(item):
    """(start, stop or None, step) of a slice with constant bounds, or None."""
    if isinstance(item, ast.Slice):
        parts = [item.lower, item.upper, item.step]
    elif (
        isinstance(item, ast.Call)
        and text_of(item.func) == "slice"
        and len(item.args) == 3
        and not item.keywords
    ):
        parts = list(item.args)
    else:
        return None
    values = []
    for part, default in zip(parts, (0, None, 1)):
        if part is None or (isinstance(part, ast.Constant) and part.value is None):
            values.append(default)
        else:
            value = constant_int(part)
            if value is None:
                return None
            values.append(value)
    return tuple(values)


def over(stmt, rank, found: dict):
    """The axes a statement computes over, where known (not a view's: moved above a run)."""
    if assigned_name(stmt) is None or isinstance(stmt.value, ast.Subscript):
        return None
    value, scatter = stmt.value, scatter_of(stmt, rank)
    if scatter is not None:
        value = scatter.value
    elif text_of(getattr(value, "func", None)) in ("np.sum", "sum_over") and value.args:
        value = value.args[0]
    return axes_of(value, found, rank)


def moved_up(stmts: list, refused, take) -> list:
    """The statements after `refused` that `take` (the run's) accepted, to run before it and
    those between: plain assignments to names, among plain assignments, reading nothing the
    statements they pass assign and assigning nothing those read. One the run does not take
    stays where it is, and is passed like `refused`: what reads its name stays after it. Nothing
    moves past a statement that writes into an array (`t = Q.sort()`, `out=`): what it writes
    may be read through any view."""
    skipped = [refused]
    found = []
    for stmt in stmts[:32]:
        if not all(_plain(s) for s in skipped) or written_in_place(skipped[-1:]):
            break
        if _plain(stmt):
            mine = {stmt.targets[0].id}
            theirs = {s.targets[0].id for s in skipped}
            if (
                not (names_in([stmt.value]) & theirs)
                and not any(mine & names_in([s]) for s in skipped)
                and take(stmt)
            ):
                found.append(stmt)
                continue
        skipped.append(stmt)
    return found


def _plain(stmt) -> bool:
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    )

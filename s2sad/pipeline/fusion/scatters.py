"""Scatters in a fused run: the adjoint of basic slices (`u[1:, :-1]`) adds each slice's
cotangent into the gradient of the array sliced, `du = getitem_vjp(g, u, index)` and then
`add_at(du, index, h)` for the other slices of `u`. Each is a pass over memory of its own; in a
run over the slices' shape they join the loop nest instead: `du` is zeroed once above it and
each iteration adds into the elements its slices cover (`du[i0 + 1, i1] += h_i`), one pass.

Only slices along every axis (no integers, arrays or new axes), with numbers for bounds and
steps, and only into an array the run itself zeroed (its `getitem_vjp`): no statement of the run
reads it, so the order of the additions is the only change (each element's are summed in the
order of the iterations that reach it). The guard checks the dtype of the array sliced and that
each slice has the run's shape (`u[:-1, 1:].shape == c.shape`), so the positions written are
those of the slice. The loops run serially: builds on threads are not fused.

A store into slices of an array (`z[1:] = t`, the primal of `z[1:] = x[1:] * y[:-1]`) joins a
run over the slices' shape too: each iteration writes the element its slices cover
(`z[i0 + 1] = t_i`), where Numba would make `t` and copy it through its generic slice
assignment. Only where no statement of the run before it reads anything that may share memory
with `z`, and none after it does (so no iteration reads an element another wrote); the guard
checks `z`'s dtype and the slices' shape as for scatters."""

from __future__ import annotations

import ast
from typing import NamedTuple

from ...astcopy import clone
from .remat import reaching
from .row_adds import sharing
from .shapes import constant_int, shape_of, size
from .syntax import called, load, store, text_of


class Scatter(NamedTuple):
    target: str  # the array added into (`du`)
    source: str | None  # the array sliced (`u`) where the statement makes `du`; None: add_at
    slices: tuple  # (lower, upper, step) of each axis, None where omitted
    value: ast.expr  # the cotangent added (`g`)


def scatter_of(stmt, rank) -> Scatter | None:
    """`du = getitem_vjp(g, u, index)` or `add_at(du, index, g)` with `index` slices along
    every axis of an array of known rank (the trailing ones may be omitted); else None."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, call = stmt.targets[0], stmt.value
        if not (isinstance(target, ast.Name) and called(call, "getitem_vjp", 3)):
            return None
        g, source, index = call.args
        if not isinstance(source, ast.Name):
            return None
        target, source = target.id, source.id
    elif isinstance(stmt, ast.Expr) and called(stmt.value, "add_at", 3):
        array, index, g = stmt.value.args
        if not isinstance(array, ast.Name):
            return None
        target, source = array.id, None
    else:
        return None
    r = rank(load(target))
    slices = _slices(index, r) if isinstance(r, int) and r >= 1 else None
    if slices is None or not isinstance(g, ast.Name):
        return None
    return Scatter(target, source, slices, g)


def store_of(stmt, rank) -> Scatter | None:
    """`z[1:] = t` (a name `t`), slices along every axis of an array `z` of known rank (the
    trailing ones may be omitted); else None. Its `source` is `z`, whose shape the slices cut."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    target, value = stmt.targets[0], stmt.value
    if not (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Name)
        and isinstance(value, ast.Name)
    ):
        return None
    r = rank(load(target.value.id))
    slices = _slices(target.slice, r) if isinstance(r, int) and r >= 1 else None
    if slices is None:
        return None
    return Scatter(target.value.id, target.value.id, slices, value)


def takes_slices(run, stmt) -> bool | None:
    """Whether `run` takes `stmt`, a scatter or a store into slices; None where it is neither."""
    scatter = scatter_of(stmt, run.f.rank)
    if scatter is not None:
        return takes_scatter(run, stmt, scatter)
    stored = store_of(stmt, run.f.rank)
    return None if stored is None else takes_store(run, stmt, stored)


def copied_into(nodes, written: set[str], rank_of) -> dict:
    """Each name -> the names that may share its memory (row_adds.sharing), where a write into
    elements of an array of known rank (`z[1:] = t`: a NumPy array, not a list) copies values."""
    arrays = {n for n in written if isinstance(rank_of(load(n)), int) and rank_of(load(n)) >= 1}
    return sharing(nodes, arrays)


def takes_store(run, stmt, found: Scatter) -> bool:
    """Whether `run` takes the store `found` (`stmt`), of a value of the run's shape into an
    array nothing the run has read or assigned may share memory with; it does if so, and then
    takes nothing more that may."""
    z = found.target
    if run.units or run.f.rank(load(z)) != run.rank or z in run.sliced:
        return False
    if not all(run._scalar(p) for axis in found.slices for p in axis if p is not None):
        return False
    shared = reaching({z}, run.f.copied_into)
    if shared & (run.mentioned | set(run.assigned) | set(run.inputs) | run.sums):
        return False
    elements = run._elementwise(found.value)
    if elements is None or not run._agree(elements[1]):
        return False
    run.stores[id(stmt)] = found
    run.added_into |= shared
    return run._add(stmt, "store", z, *elements)


def _slices(index, rank: int):
    """The (lower, upper, step) of each axis of `slice(1, None, None)` or a tuple of them."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    if len(items) > rank:
        return None
    parts = []
    for item in items:
        if isinstance(item, ast.Slice):  # `z[1:]`, as a store's target is written
            parts.append(
                tuple(None if _is_none(p) else p for p in (item.lower, item.upper, item.step))
            )
            continue
        if not (
            isinstance(item, ast.Call)
            and text_of(item.func) == "slice"
            and 1 <= len(item.args) <= 3
            and not item.keywords
        ):
            return None
        args = list(item.args)
        if len(args) == 1:  # slice(stop)
            args = [ast.Constant(None)] + args
        args += [ast.Constant(None)] * (3 - len(args))
        parts.append(tuple(None if _is_none(a) else a for a in args))
    return tuple(parts) + ((None, None, None),) * (rank - len(items))


def _is_none(node) -> bool:
    return node is None or isinstance(node, ast.Constant) and node.value is None


def takes_scatter(run, stmt, scatter: Scatter) -> bool:
    """Whether `run` takes `du = getitem_vjp(g, u, index)` (`du` zeroed, then added into) or a
    later `add_at(du, index, g)` into that `du`, `g` of the run's shape; it does if so."""
    target, source = scatter.target, scatter.source
    if source is None:  # added into: only an array this run made
        source = run.sliced.get(target)
        if source is None:
            return False
    elif target in run.mentioned or source in run.assigned or source in run.sums:
        return False
    if run.f.rank(load(source)) != run.rank or target in run.inputs:
        return False
    bounds = [p for axis in scatter.slices for p in axis if p is not None]
    if not all(run._scalar(p) for p in bounds):
        return False
    found = run._elementwise(scatter.value)
    if found is None or not run._agree(found[1]):
        return False
    run.sliced[target] = source
    run.scatters[id(stmt)] = scatter
    return run._add(stmt, "scatter", target, *found)


def with_slices_checked(test: ast.expr, run, maps: dict, sizes: dict, dtype: str) -> ast.expr:
    """A run's guard `test` and the checks of its scatters: the arrays sliced have the float
    dtype of the run's array `dtype`, and each slice has the run's shape
    (`u[:-1, 1:].shape == c.shape`)."""
    anchor = next((n for n, m in maps.items() if m == run.full()), None)
    shape = shape_of(sizes, run.rank)
    if anchor is not None:
        shape = ast.Attribute(load(anchor), "shape", ast.Load())
    stored = [s.target for s in run.stores.values()]
    sliced = [load(s) for s in dict.fromkeys([dtype, *run.sliced.values(), *stored])]
    checks = test.values if isinstance(test, ast.BoolOp) else [test]
    checks = checks + [ast.Call(load("float_arrays"), sliced, [])]
    seen = set()
    for scatter in [*run.scatters.values(), *run.stores.values()]:
        subscript = view(scatter.source or run.sliced[scatter.target], scatter.slices)
        if ast.dump(subscript) not in seen:
            seen.add(ast.dump(subscript))
            whole = ast.Attribute(subscript, "shape", ast.Load())
            checks.append(ast.Compare(whole, [ast.Eq()], [clone(shape)]))
    return ast.BoolOp(ast.And(), checks)


def view(source: str, slices: tuple) -> ast.expr:
    """`u[:-1, 1:]`: the slice of `source` written as a subscript."""
    while len(slices) > 1 and slices[-1] == (None, None, None):  # `u[1:]`, not `u[1:, :]`
        slices = slices[:-1]
    items = [ast.Slice(*(clone(p) if p is not None else None for p in axis)) for axis in slices]
    item = items[0] if len(items) == 1 else ast.Tuple(items, ast.Load())
    return ast.Subscript(load(source), item, ast.Load())


def position(scatter: Scatter, source: str, index: list, fresh) -> tuple[list, ast.expr]:
    """(the statements computing the slices' starts, hoisted above the loops; the element of
    the array added into that a loop iteration reaches). `index` holds each axis's loop index
    (None: an axis of length 1, index 0)."""
    hoisted, items = [], []
    for k, ((lower, upper, step), i) in enumerate(zip(scatter.slices, index)):
        by = 1 if step is None else constant_int(step)
        low = 0 if lower is None else constant_int(lower)
        if by is not None and by > 0 and low is not None and low >= 0:
            start = ast.Constant(low)  # (the slice is not empty where the loop runs)
        elif by is not None and by < 0 and lower is None:
            start = ast.BinOp(size(source, k), ast.Sub(), ast.Constant(1))
        else:
            name = fresh(f"{scatter.target}_start{k}")
            parts = [
                clone(p) if p is not None else ast.Constant(None) for p in (lower, upper, step)
            ]
            indices = ast.Attribute(ast.Call(load("slice"), parts, []), "indices", ast.Load())
            first = ast.Subscript(
                ast.Call(indices, [size(source, k)], []), ast.Constant(0), ast.Load()
            )
            hoisted.append(ast.Assign([store(name)], first))
            start = load(name)
        if i is None:
            stride = None
        elif by is None:  # a step known at run time
            stride = ast.BinOp(clone(step), ast.Mult(), load(i))
        else:
            stride = (
                load(i) if abs(by) == 1 else ast.BinOp(ast.Constant(abs(by)), ast.Mult(), load(i))
            )
        items.append(_plus(start, stride, by))
    item = items[0] if len(items) == 1 else ast.Tuple(items, ast.Load())
    return hoisted, ast.Subscript(load(scatter.target), item, ast.Store())


def _plus(start: ast.expr, stride, by) -> ast.expr:
    """`start + stride` (`start - stride` for a constant negative step), a 0 left out."""
    if stride is None:
        return start
    negative = by is not None and by < 0
    if not negative and isinstance(start, ast.Constant) and start.value == 0:
        return stride
    if negative or by is None:
        return ast.BinOp(start, ast.Sub() if negative else ast.Add(), stride)
    return ast.BinOp(stride, ast.Add(), start)  # `i0 + 1`

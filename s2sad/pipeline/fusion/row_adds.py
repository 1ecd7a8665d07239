"""Adds into rows a run takes: `add_at(a, index, v)` of a value `v` the run computes, into a view of
`a` of the run's shape (`a[j]`, `a[k, slice(lo, hi, None)]`: what the adjoint of a row read
makes; `a[:, slice(2, 3, None)]` or `a[:, None]`, a column, in a run over an axis of length 1)
adds each element where the run computes it (`a_view[i0] += v_i`), so that `v` need not
be stored. The view is taken above the run (the guard checks its shape and dtype too); the
unfused branch keeps the `add_at`. The run then reads nothing that may share memory with `a`."""

from __future__ import annotations

import ast

from ...astcopy import clone
from .remat import assignment_links, reaching
from .syntax import SHAPE_ONLY, assign, load, names_in, origin, text_of


def took_row_add(run, stmt) -> bool:
    """Whether `run` took `stmt` as an add into a row (then added to its entries)."""
    found = row_add(run, stmt)
    if found is None:
        return False
    run._pending = None
    view_stmt, view, value, shared = found
    run.hoisted.append(view_stmt)
    run.maps[view] = run.full()
    run.row_adds[id(stmt)] = (view, value)
    run.added_into |= shared
    return run._add(stmt, "row_add", view, [], [view])


def row_add(run, stmt):
    """(the view's statement, its name, `v`, the names sharing memory with `a`) where `stmt` is
    such an add that `run` can take, else None."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    if text_of(call.func) != "add_at" or len(call.args) != 3 or call.keywords:
        return None
    a, index, v = call.args
    if not (isinstance(a, ast.Name) and isinstance(v, ast.Name) and v.id in run.assigned):
        return None
    if names_in([index, v]) & run.added_into:
        return None
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    taken, new = 0, 0  # axes taken at one index; new axes of length 1 (`dw[:, None]`)
    for item in items:
        if isinstance(item, ast.Call) and text_of(item.func) == "slice" and not item.keywords:
            if not all(_none(p) or run._scalar(p) for p in item.args):
                return None
        elif _none(item):
            new += 1
        elif run._scalar(item):
            taken += 1
        else:
            return None
    rank = run.f.rank(load(a.id))
    if not isinstance(rank, int) or len(items) - new > rank or rank - taken + new != run.rank:
        return None
    shared = reaching({a.id}, run.f.shares)
    if shared & ((run.mentioned - run.added_into) | set(run.assigned)):
        return None  # read by the run before (adds into the same array are taken)
    view = run.f.fresh(f"{a.id}_view")
    run.f.known[view] = run.rank
    statement = origin(assign(view, ast.Subscript(load(a.id), clone(index), ast.Load())), stmt)
    return statement, view, v.id, shared


def sharing(nodes, arrays=frozenset()) -> dict:
    """Each name -> the names assigned from it that may share its memory (as remat.view_links,
    but an array a call makes afresh shares none: `zeros_like(x)`, `x[j].copy()`; nor does a
    value written into elements of one of `arrays`, NumPy arrays)."""
    return assignment_links(nodes, _roots, arrays)


def _roots(value) -> set[str]:
    if isinstance(value, ast.Call):
        method = value.func.attr if isinstance(value.func, ast.Attribute) else None
        if method == "copy" or text_of(value.func) in _FRESH:
            return set()
        if text_of(value.func) in SHAPE_ONLY | _OF_FIRST and value.args:
            return _roots(value.args[0])  # `unbroadcast(g, x)` is `g` or a sum of it, never `x`
        found = _roots(value.func.value) if method else set()
        return found | set().union(*(_roots(a) for a in value.args))
    if isinstance(value, ast.Attribute) and value.attr in ("dtype", "shape", "ndim", "size"):
        return set()  # (`widened_by(dy, w.dtype)`: no array's memory)
    if isinstance(value, (ast.Subscript, ast.Attribute, ast.Starred)):
        return _roots(value.value)
    if isinstance(value, ast.Name):
        return {value.id}
    if isinstance(value, (ast.Tuple, ast.List, ast.IfExp)):
        return set().union(*(_roots(e) for e in ast.iter_child_nodes(value)))
    return set()


# calls whose result is a new array, never a view of their arguments: NumPy's and s2sad's helpers
_FRESH = {
    f"np.{name}"
    for name in "zeros zeros_like empty empty_like ones ones_like full full_like copy".split()
} | {
    "zeros_like",
    "sum_zeros_like",
    "snapshot",
    "as_accumulator",
    "batched_accumulator",
    "getitem_vjp",  # zeros the cotangent's array and adds into it
}
# s2sad's helpers whose result is their first argument or a copy of it (in another dtype, a
# piece of it), never a view of the others: `in_dtype_of(dx, x)` reads `x` for its dtype alone
_OF_FIRST = frozenset({"in_dtype_of", "widened_by", "concatenate_vjp"})


def _none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None

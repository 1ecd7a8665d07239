"""Means written as sums, so that runs fold them in as they fold sums.

A run folds in `np.sum` and `expand_reduced`, and stops at `mean_over` and `mean_vjp`, helpers
it does not see into: a loss `np.mean(np.tanh(x * y))` stored its whole `tanh` to take the mean
after the loop, and its adjoint built a full cotangent array. Written

    m_sum = sum_over(t, None, False)       # an accumulator of the run computing t
    m = per_count(m_sum, t, None)          # after that run
    ...
    dm_per = per_count(dm, t, None)        # a number
    dt = expand_reduced(dm_per, t)         # folded in: dm_per everywhere

the sum is added up in the loop computing `t` (or, where a jitted grad reads the mean for its
kind alone, not computed at all), and the cotangent is a number the next run reads. Means
over one axis (`axis=k`, `keepdims`) become the sums over an axis and the broadcasts a run
accumulates and reads through index maps. `per_count` divides in the sum's dtype, as NumPy's
mean of float32 does (its Numba form rounds the float64 sum to float32 and divides, as the
unfused `mean_over` does). A pair no run takes a part of (the mean of an argument, or of a
sum over an axis a run is still accumulating) is written as the one statement it was again,
once the runs are gathered (`rejoined`). It consumes and produces statement lists (the
originals untouched).
"""

from __future__ import annotations

import ast

from ...astcopy import clone
from ..names import fresh_in
from ..nodes import assigned_name
from .shapes import constant_int
from .syntax import assign, bodies_mapped, called, load, origin, text_of


def means_apart(stmts: list, rank_of, taken: set[str], made: dict, split: dict) -> list:
    """`stmts` with each `m = mean_over(t, axis, keepdims)` and `dt = mean_vjp(g, t, ...)` of
    arrays by name over all axes or one written as a sum, or a broadcast, and `per_count`; the
    names made taken from `taken` and entered in `made` with their ranks, and `split` told, by
    the id of each pair's second statement, (the first, the original)."""
    out: list = []
    for stmt in stmts:
        if isinstance(stmt, (ast.For, ast.While, ast.If)):
            out.append(
                bodies_mapped(stmt, lambda body: means_apart(body, rank_of, taken, made, split))
            )
            continue
        target = assigned_name(stmt)
        parts = _mean(stmt.value) or _mean_vjp(stmt.value) if target else None
        forward = parts is not None and text_of(stmt.value.func) == "mean_over"
        # the rank of the name made: the mean's, or the cotangent's before its broadcast
        rank = rank_of(stmt.targets[0] if forward else parts[0]) if parts else None
        if not isinstance(rank, int) or not isinstance(rank_of(load(parts[1])), int):
            out.append(stmt)
            continue
        value, over, axis, keep = (clone(p) if isinstance(p, ast.AST) else p for p in parts)
        name = fresh_in(taken, f"{target}_sum" if forward else f"{target}_per")
        if forward:
            first = ast.Call(load("sum_over"), [value, axis, keep], [])
            last = _per_count(load(name), over, clone(axis))
        else:
            first = _per_count(value, over, clone(axis))
            keywords = [] if _absent(axis) else [ast.keyword("axis", axis)]
            keywords += [ast.keyword("keepdims", keep)] if keep.value else []
            last = ast.Call(load("expand_reduced"), [load(name), load(over)], keywords)
        made[name] = rank
        out.append(origin(ast.copy_location(assign(name, first), stmt), stmt))
        out.append(origin(ast.copy_location(assign(target, last), stmt), stmt))
        split[id(out[-1])] = (out[-2], stmt)
    return out


def rejoined(items: list, split: dict) -> list:
    """Gathered statements (runs, loops and branches as `Fuser.gather` gives them) with each
    pair `means_apart` made that no run took a part of written as the one original statement
    again: a mean of an array no run computes, a cotangent no run reads."""
    out: list = []
    for item in map(_alone, items):
        if isinstance(item, tuple):  # a loop or branch, its bodies gathered
            stmt, body, orelse = item
            out.append((stmt, rejoined(body, split), rejoined(orelse, split)))
        elif id(item) in split and out and out[-1] is split[id(item)][0]:
            out[-1] = split[id(item)][1]
        else:
            out.append(item)
    return out


def _alone(item):
    """The one statement of a run that does not fuse (it emits the statement as it is), else
    the item."""
    fuses = getattr(item, "fuses", None)
    if fuses is not None and len(item.stmts) == 1 and not fuses():
        return item.stmts[0]
    return item


def _per_count(value: ast.expr, over: str, axis: ast.expr) -> ast.Call:
    return ast.Call(load("per_count"), [value, load(over), axis], [])


def _mean(value):
    """(t, t's name, axis, keepdims) of `mean_over(t, axis, keepdims)` as the lowering writes
    it, `t` a name and `axis` None or a number; else None."""
    if not (called(value, "mean_over", 3) and isinstance(value.args[0], ast.Name)):
        return None
    t, axis, keep = value.args
    return _checked(t, t.id, axis, keep)


def _mean_vjp(value):
    """(g, x's name, axis, keepdims) of `mean_vjp(g, x[, axis=k][, keepdims=b])` as the rule
    writes it, `x` a name and `g` a name or a number; else None."""
    if not (
        isinstance(value, ast.Call)
        and text_of(value.func) == "mean_vjp"
        and len(value.args) == 2
        and isinstance(value.args[1], ast.Name)
        and isinstance(value.args[0], (ast.Name, ast.Constant))
    ):
        return None
    options = {k.arg: k.value for k in value.keywords}
    if None in options or not set(options) <= {"axis", "keepdims"}:
        return None
    axis = options.get("axis", ast.Constant(None))
    keep = options.get("keepdims", ast.Constant(False))
    return _checked(value.args[0], value.args[1].id, axis, keep)


def _checked(value, over: str, axis, keep):
    """The parts, where `axis` is None or a number and `keepdims` a constant bool (over all
    axes, not kept: a tuple of axes, or all axes kept, is left to the helpers)."""
    if not (isinstance(keep, ast.Constant) and isinstance(keep.value, bool)):
        return None
    if _absent(axis):
        return None if keep.value else (value, over, ast.Constant(None), keep)
    if constant_int(axis) is None:
        return None
    return value, over, axis, keep


def _absent(axis) -> bool:
    return isinstance(axis, ast.Constant) and axis.value is None

"""Scatters as gathers, and views read through the array they view: two forms of a fused run
that let LLVM vectorise its loops.

A view `c = u[:-1, 1:]` of a C-contiguous `u` is an array of layout "A" to Numba, whose element
reads LLVM does not vectorise; `u[i0, i1 + 1]` it does. So a run reads such a view through the
array viewed, where the view is a basic slice with steps of 1 and constant starts of an array the
function never rebinds (its element `i` is `u`'s element `start + i`, the guard having checked
the view's shape).

A run whose only products are the slices added into a gradient (scatters.py: the stencil's
`du[i0, i1 + 1] += ddh_i`, `du[i0 + 1, i1] += ddv_i`, `du[i0, i1] += dc_i`) adds into one
element of `du` from several iterations, which no vector loop may do. Written as a gather, each
element of `du` is computed once, as the sum of the cotangents of the slices that cover it, each
computed at its own shifted position (`j - start`):

    du = np.empty(u.shape)
    for j0 in range(u.shape[0]):
        if 1 <= j0 < c.shape[0]:                    # rows every slice covers
            for j1 in range(1, c.shape[1]):         # elements every slice covers
                ... du_j = <slice 1's at j - start1>; du_j += <slice 2's at j - start2> ...
                du[j0, j1] = du_j
        for e in range(<the elements of the row left>):   # the frame: each term if covered
            j1 = e + skip if e >= 1 else e
            ...

The terms are added in the order of the original statements, so the numbers are Python mode's
(`getitem_vjp`, then each `add_at`). Only slices with steps of 1 and constant starts, into an
array the run zeroed itself (its `getitem_vjp`), in a run that stores nothing else."""

from __future__ import annotations

import ast
from collections import Counter

from ...astcopy import clone
from .shapes import constant_int, size
from .syntax import assign, load, origin, store


def base_views(nodes, rank) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Each view `v = u[1:, :-1]` that a fused run may read as `u[i0 + 1, i1]`: v -> (u, the
    start along each axis). `v` is assigned once, `u` never (a parameter or global: it names
    one array throughout), every axis a slice with a step of 1 and a constant start >= 0."""
    stores: Counter = Counter()
    candidates = []
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                stores[n.id] += 1
            if (
                isinstance(n, ast.Assign)
                and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name)
                and isinstance(n.value, ast.Subscript)
                and isinstance(n.value.value, ast.Name)
            ):
                candidates.append((n.targets[0].id, n.value))
    views = {}
    for name, value in candidates:
        base = value.value.id
        r = rank(value.value)
        items = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
        if stores[name] != 1 or stores[base] or not isinstance(r, int) or len(items) > r:
            continue
        starts = [_start(item) for item in items] + [0] * (r - len(items))
        if all(s is not None for s in starts):
            views[name] = (base, tuple(starts))
    return views


def _start(item):
    """The start of a slice `lo:hi` (step 1, `lo` a constant >= 0, or absent); else None."""
    if not isinstance(item, ast.Slice):
        return None
    if item.step is not None and constant_int(item.step) != 1:
        return None
    start = 0 if item.lower is None else constant_int(item.lower)
    return start if start is not None and start >= 0 else None


def shifted(index: ast.expr, by: int) -> ast.expr:
    """`index + by`, `index - |by|` or `index`."""
    if by == 0:
        return index
    return ast.BinOp(index, ast.Add() if by > 0 else ast.Sub(), ast.Constant(abs(by)))


def gather_starts(emitter) -> list | None:
    """The start along each axis of each scatter of the run, in order, where the run can be a
    gather (see the module's docstring); else None."""
    run = emitter.run
    if not run.scatters or run.stores or run.units or emitter.live:
        return None
    if any(kind not in ("element", "alias", "scatter") for _, kind in run.entries):
        return None
    scatters = [run.scatters[id(s)] for s, kind in run.entries if kind == "scatter"]
    if len({s.target for s in scatters}) != 1 or scatters[0].source is None:
        return None
    starts = []
    for scatter in scatters:
        axes = [_start(ast.Slice(*axis)) for axis in scatter.slices]
        if any(a is None for a in axes):
            return None
        starts.append(tuple(axes))
    return starts


class _Shift(ast.NodeTransformer):
    """A loop body's element reads at the run's index `i` moved to `j - start`."""

    def __init__(self, index: list[str], gathered: list[str], starts: tuple):
        self.axis = {name: k for k, name in enumerate(index)}
        self.gathered, self.starts = gathered, starts

    def visit_Name(self, node):
        k = self.axis.get(node.id)
        if k is None:
            return node
        return shifted(load(self.gathered[k]), -self.starts[k])

    def visit_BinOp(self, node):  # `i1 + 1` -> `j1 + 1 - 1` -> `j1`
        k = self.axis.get(getattr(node.left, "id", None))
        by = constant_int(node.right)
        if k is None or by is None or not isinstance(node.op, (ast.Add, ast.Sub)):
            return self.generic_visit(node)
        by = by if isinstance(node.op, ast.Add) else -by
        return shifted(load(self.gathered[k]), by - self.starts[k])


def gathered(emitter, head: list, body: list, starts: list) -> list:
    """The run as a gather (module docstring): `head` with the zeroed gradient made empty, then
    the loops over the gradient's shape. `body` is the scattering loop body."""
    run, f = emitter.run, emitter.f
    scatter_ids = [id(s) for s, kind in run.entries if kind == "scatter"]
    target = run.scatters[scatter_ids[0]].target
    source = run.sliced[target]
    adds = [s for s in body if isinstance(s, ast.AugAssign) and _into(s, target)]
    chain = [s for s in body if s not in adds]
    rank = run.rank
    index = f.indices(rank)  # the scattering loops' own
    j = f.indices(rank, "j")
    total = f.fresh(f"{target}_j")
    out = []
    for stmt in head:
        if isinstance(stmt, ast.Assign) and stmt.targets[0].id == target:
            empty = ast.Call(  # (in the zeros' dtype, the run's)
                ast.Attribute(load("np"), "empty", ast.Load()), list(stmt.value.args), []
            )
            stmt = origin(assign(target, empty), stmt)
        out.append(stmt)

    def term(k: int, first: bool, covered: bool) -> list:
        """Scatter k's cotangent at `j - start`, added to the element's total."""
        shift = _Shift(index, j, starts[k])
        value = shift.visit(clone(adds[k].value))
        needed = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
        kept = []
        for stmt in reversed(chain):
            if stmt.targets[0].id in needed:
                kept.append(stmt)
                needed |= {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
        lines = [shift.visit(clone(s)) for s in reversed(kept)]
        if first:
            added = assign(total, value)
        else:
            added = ast.AugAssign(store(total), ast.Add(), value)
        lines.append(origin(added, adds[k]))
        if covered:
            return lines
        inside = [
            ast.Compare(
                ast.Constant(0),
                [ast.LtE(), ast.Lt()],
                [shifted(load(j[a]), -starts[k][a]), clone(emitter.sizes[a])],
            )
            for a in range(rank)
        ]
        test = inside[0] if rank == 1 else ast.BoolOp(ast.And(), inside)
        return [ast.If(test, lines, [])]

    def element(covered: bool) -> list:
        lines = [] if covered else [assign(total, ast.Constant(0.0))]
        for k in range(len(adds)):
            lines += term(k, covered and k == 0, covered)
        item = ast.Tuple([load(name) for name in j], ast.Load()) if rank > 1 else load(j[0])
        return lines + [ast.Assign([ast.Subscript(load(target), item, ast.Store())], load(total))]

    # the part every slice covers, along each axis: [the largest start, the smallest end)
    lows = [max(s[a] for s in starts) for a in range(rank)]
    highs = [shifted(clone(emitter.sizes[a]), min(s[a] for s in starts)) for a in range(rank)]
    last = rank - 1
    skip = f.fresh("skip")
    e = f.fresh("e")
    width = ast.Call(
        load("max"),
        [ast.BinOp(clone(highs[last]), ast.Sub(), ast.Constant(lows[last])), ast.Constant(0)],
        [],
    )
    inner = [
        ast.For(
            store(j[last]),
            ast.Call(load("range"), [ast.Constant(lows[last]), clone(highs[last])], []),
            element(True),
            [],
        ),
        assign(skip, width),
    ]
    frame_index = assign(
        j[last],
        ast.IfExp(
            ast.Compare(load(e), [ast.GtE()], [ast.Constant(lows[last])]),
            ast.BinOp(load(e), ast.Add(), load(skip)),
            load(e),
        ),
    )
    frame = ast.For(
        store(e),
        ast.Call(load("range"), [ast.BinOp(size(source, last), ast.Sub(), load(skip))], []),
        [frame_index] + element(False),
        [],
    )
    if rank == 1:
        nest = inner + [frame]
    else:
        rows = [
            ast.Compare(ast.Constant(lows[a]), [ast.LtE(), ast.Lt()], [load(j[a]), clone(highs[a])])
            for a in range(last)
        ]
        test = rows[0] if len(rows) == 1 else ast.BoolOp(ast.And(), rows)
        nest = [ast.If(test, inner, [assign(skip, ast.Constant(0))]), frame]
        for a in reversed(range(last)):
            iterate = ast.Call(load("range"), [size(source, a)], [])
            nest = [ast.For(store(j[a]), iterate, nest, [])]
    return out + nest


def _into(stmt: ast.AugAssign, target: str) -> bool:
    return (
        isinstance(stmt.target, ast.Subscript) and getattr(stmt.target.value, "id", None) == target
    )

"""The user's indices checked in jitted code (jit only). Code that reads or writes by an integer
or an index array (`x[k]`, `y[i + 1] = v`, `x[idx]`: `indexes_by_integers`) may index out of
range, where Python raises IndexError and unchecked compiled code reads or writes past the
array. Numba's `boundscheck=True` checks every index of a function, fusion's loops too (proven
in range by their guards): 25% of GMM d=2's jitted gradient, whose one index is a gather.
So `index_checks` places a `check_index(i, len(x))` statement (rules/indexing.py) before
each statement with an index of the user's not proven in range: an index array is checked once
(its least and greatest entries), an integer in a loop over the indexed array's own length is
proven (index_ranges.py), and the adjoint's or a tangent's access that mirrors a primal one
checked before it needs none (unless a name in the index was written into since: `j[0] = 10`
between two `x[j[0]]`). A boolean mask gets none here: numba_forms.py's `mask_fits` checks
every mask, also where this falls back (Numba's checks do not check a mask's length). Where a
check cannot be placed (an index evaluated maybe, or
again: in a `while` test, a conditional expression; an array of unknown rank), the function is
compiled with Numba's checks as before (`numba_checks`). Consumes the lowered statements before
fusion (the primal and the adjoint, or the tangent code); under S2SAD_BOUNDSCHECK=0 the driver
places none (nor Numba's, nor numba_forms.py's mask checks).

Code that only slices and calls NumPy (a stencil of slices) needs no check: slices are
clipped, never out of range.
"""

from __future__ import annotations

import ast
import copy
import os

from .. import ir
from ..astcopy import clone
from .index_ranges import Ranges, bound_names, loop_bounds

# The generated code checks the user's indices it cannot prove in range (`check_index`
# statements), or where it could not place them Numba checks each index of the function
# (`boundscheck=True`), and numba_forms.py its boolean masks' shapes; S2SAD_BOUNDSCHECK=0
# makes code without any (the driver places none). Read once, as `bounds.BOUNDSCHECK` where it
# is used (a benchmark sets it to compare); the transform caches' keys hold it, and the
# emitted text says which, so code with and without checks never share a module.
BOUNDSCHECK = os.environ.get("S2SAD_BOUNDSCHECK") != "0"


def indexes_by_integers(stmts: list) -> bool:
    """Whether any subscript in `stmts` has an index other than slices (an integer, an
    expression, a name that may hold an index array), leaving out `a.shape[k]`, which Numba
    types as a tuple's item."""
    for stmt in stmts:
        for node in ast.walk(stmt) if isinstance(stmt, ast.AST) else ():
            if not isinstance(node, ast.Subscript):
                continue
            if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
                continue
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if not all(_slice_or_axis(i) for i in items):
                return True
    return False


def _slice_or_axis(item: ast.expr) -> bool:
    """A slice (clipped to the axis), `None` or `...`: nothing that can be out of range."""
    return isinstance(item, ast.Slice) or (
        isinstance(item, ast.Constant) and (item.value is None or item.value is Ellipsis)
    )


def checked(groups, rank_of, kind_of, primal_of, given, batched) -> tuple:
    """`groups` (jitted statement lists) with a check before each index not proven in range
    (`index_checks`), whether they index by integers, and whether Numba must check them instead
    (an index the checks could not place)."""
    indexed = indexes_by_integers([s for g in groups for s in g])
    numba_checks = indexed and BOUNDSCHECK  # (S2SAD_BOUNDSCHECK=0: no checks)
    if numba_checks and not batched:
        groups, numba_checks = index_checks(groups, rank_of, kind_of, primal_of, given)
    return groups, indexed, numba_checks


def reverse_checked(primal, adjoint, plain, rerun, shapes, adjoint_ranks, bound, batched):
    """`checked` of a reverse-mode build: the primal and adjoint statements, and a re-running
    pullback's value function (`plain`, checked where `rerun`); None ranks: NumPy mode, which
    NumPy checks."""
    if adjoint_ranks is None:
        return primal, adjoint.stmts, plain, False, False
    groups, indexed, numba_checks = checked(
        [primal, adjoint.stmts], adjoint_ranks, shapes.kind, adjoint.primal_of, bound, batched
    )
    if rerun:
        [plain], plain_indexed, unplaced = checked(
            [plain], shapes.of, shapes.kind, {}, bound, batched
        )
        indexed, numba_checks = indexed or plain_indexed, numba_checks or unplaced
    return groups[0], groups[1], plain, indexed, numba_checks


# ------------------------------------------------------------------------- explicit checks


def index_checks(groups: list, rank_of, kind_of, primal_of: dict, params=()) -> tuple:
    """`groups` (the statement lists of one function, in the order they run: a primal, then
    its adjoint; or a tangent code, one list) with a `check_index(i, len(x))` statement
    before each statement whose index of an array is not proven in range (index_ranges.py),
    and whether that failed somewhere (an index this cannot place: then `groups` as they are,
    which Numba's `boundscheck=True` checks whole). An access of a derivative array (`dy[i]`,
    `primal_of` names its primal) or any access in a later group (the adjoint) needs none where
    the same index of the primal array was checked or proven before it: the adjoint mirrors
    the primal's accesses, which ran first."""
    ranges = Ranges([s for g in groups for s in g], primal_of, params, rank_of)
    checks = _Checks(ranges, rank_of, kind_of, primal_of)
    out = []
    try:
        for group in groups:
            out.append(checks.block(group, {}))
            checks.mirrored |= checks.seen
    except _Unplaced:
        return groups, True
    return out, False


class _Unplaced(Exception):
    """An index the explicit checks cannot place (the function keeps Numba's)."""


class _Checks:
    def __init__(self, ranges: Ranges, rank_of, kind_of, primal_of: dict):
        self.ranges, self.rank_of, self.kind_of = ranges, rank_of, kind_of
        self.primal_of = primal_of
        self.seen: set = set()  # (primal array, index, axis) checked or proven
        # those checked before, in this block or one around it, by names not bound or written
        # into since (a tangent's `x_dot[k]` follows its primal's `x[k]`): key -> the index's
        # names
        self.scope: dict = {}
        self.mirrored: set = set()  # those of the groups before (the primal's, for the adjoint)

    def block(self, stmts: list, loops: dict) -> list:
        out = []
        for stmt in stmts:
            if not isinstance(stmt, ast.AST):
                out.append(stmt)
                continue
            own, bodies = _parts(stmt)
            for node in own:
                out += [ir.copy_origin(g, stmt) for g in self.guards(node, stmt, loops)]
            bound = {n for node in ast.walk(stmt) for n in bound_names(node)}
            changed = bound | _changed(stmt, self.rank_of)
            outer = self.scope = {
                k: v for k, v in self.scope.items() if k[0] not in bound and not v & changed
            }
            local = self.ranges.local = {
                k: v
                for k, v in self.ranges.local.items()
                if k not in bound and not _operands(v) & changed
            }
            if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                if len(stmt.targets) == 1 and not _operands(stmt.value) & bound:
                    local[stmt.targets[0].id] = stmt.value  # (the index form of its value)
            if bodies:  # (a copy of the statement where a body changed)
                original, stmt = stmt, copy.copy(stmt)
                inner = (
                    loop_bounds(stmt, self.ranges, loops) if isinstance(stmt, ast.For) else loops
                )
                for field in bodies:
                    body = getattr(stmt, field)
                    if field == "handlers":
                        handlers = [copy.copy(h) for h in body]
                        for h in handlers:
                            h.body = self.block(h.body, loops)
                            self.scope, self.ranges.local = outer, dict(local)
                        setattr(stmt, field, handlers)
                    else:
                        setattr(stmt, field, self.block(body, inner if field == "body" else loops))
                    self.scope = outer  # (a block's checks may not have run, or ran before)
                    self.ranges.local = dict(local)  # (nor its bindings)
                if all(_same(getattr(stmt, f), getattr(original, f)) for f in bodies):
                    stmt = original
            out.append(stmt)
        return out

    def guards(self, node: ast.AST, stmt: ast.stmt, loops: dict) -> list:
        """The checks `node` (a part of `stmt` it evaluates once) needs, innermost first."""
        out = []
        for sub, conditional in _subscripts(node, False):
            items = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
            if all(_slice_or_axis(i) for i in items):
                continue
            if conditional or isinstance(stmt, ast.While) or not isinstance(sub.value, ast.Name):
                raise _Unplaced  # (evaluated maybe, or again: no check before the statement)
            if isinstance(sub.ctx, ast.Store) and _unpacked(stmt):
                raise _Unplaced  # (`i, x[i] = ...`: the index bound by the statement itself)
            out += self.subscript(sub, items, loops)
        return out

    def subscript(self, sub: ast.Subscript, items: list, loops: dict) -> list:
        array = sub.value.id
        rank = self.rank_of(sub.value)
        if not isinstance(rank, int) or rank < 1:
            raise _Unplaced  # (a list, a tuple, a value of unknown kind)
        primal = self.primal_of.get(array, array)
        out, axis = [], 0
        for k, item in enumerate(items):
            if isinstance(item, ast.Slice):
                axis += 1
                continue
            if isinstance(item, ast.Constant) and item.value is None:
                continue
            if isinstance(item, ast.Constant) and item.value is Ellipsis:
                raise _Unplaced
            if not _pure(item):
                raise _Unplaced
            key = (primal, ast.unparse(item), axis)
            mirror = key in self.mirrored or key in self.scope
            width = self.rank_of(item)
            kind = self.kind_of(item)
            if width == 0:
                width = 1
                if not mirror and not self.ranges.in_range(item, array, axis, loops):
                    if not self.implied(key, array):
                        out.append(_check(item, array, axis))
            elif kind == "b":  # a mask: numba_forms.py's mask_fits checks it, in loops too
                mixed = not all(isinstance(i, (ast.Name, ast.Slice)) for i in items)
                if mixed and width != 1:
                    raise _Unplaced  # (`x[M, 0]`, M of two axes: Numba's checks)
            else:
                width = 1 if (width == 1 or kind in ("i", "u")) else None
                if not mirror:
                    out.append(_check(item, array, axis))
            self.seen.add(key)
            self.scope[key] = {n.id for n in ast.walk(item) if isinstance(n, ast.Name)}
            rest = [
                i for i in items[k + 1 :] if not (isinstance(i, ast.Constant) and i.value is None)
            ]
            if width is None and rest:
                raise _Unplaced  # (an array of unknown kind and rank: its axes not counted)
            axis += width or 0
        return out

    def implied(self, key: tuple, array: str) -> bool:
        """Whether the same index was checked before, in this block or one around it, against
        an axis the prover shows is of `array`'s length (`y = np.zeros_like(x)`, `y = x`)."""
        _, index, axis = key
        length = self.ranges.shape(array, axis)
        return length is not None and any(
            (i, a) == (index, axis) and self.ranges.shape(p, a) == length for p, i, a in self.scope
        )


def _changed(stmt: ast.stmt, rank_of) -> set:
    """The names of arrays (or of values of unknown kind) `stmt` may write into without binding
    them: a subscript's or an attribute's store (`j[0] = 10`, `j[0] += 1`), a method's call
    (`j.sort()`), an argument of any call but `len` and the like (`np.copyto(j, k)`, `out=j`).
    An index read from one may differ after it (break-it review: `x[j[0]]` taken as checked
    across `j[0] = 10`)."""
    names = set()
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(node.ctx, ast.Load):
            names |= _names(node.value)
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                names |= _names(node.func.value)
            elif isinstance(node.func, ast.Name) and node.func.id in _PURE_CALLS:
                continue
            for arg in node.args + [k.value for k in node.keywords]:
                names |= _names(arg)
    return {n for n in names if rank_of(ast.Name(n, ast.Load())) != 0}


def _names(node: ast.AST) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _operands(node: ast.AST) -> set:
    """The names `node` reads, other than the functions it calls (`np` of `np.zeros(m)`)."""
    funcs = {id(n) for c in ast.walk(node) if isinstance(c, ast.Call) for n in ast.walk(c.func)}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in funcs}


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _check(item: ast.expr, array: str, axis: int) -> ast.stmt:
    """`check_index(item, len(array))`, or `array.shape[axis]` past the first axis (a tuple,
    which rank inference may count as an array, has only the one)."""
    if axis == 0:
        length = ast.Call(ast.Name("len", ast.Load()), [ast.Name(array, ast.Load())], [])
    else:
        shape = ast.Attribute(ast.Name(array, ast.Load()), "shape", ast.Load())
        length = ast.Subscript(shape, ast.Constant(axis), ast.Load())
    call = ast.Call(ast.Name("check_index", ast.Load()), [clone(item), length], [])
    return ast.Expr(call)


def _parts(stmt: ast.stmt) -> tuple[list, list]:
    """(what `stmt` itself evaluates, once; the fields holding its nested statements)."""
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        if indexes_by_integers([stmt.target]):
            raise _Unplaced  # (`for x[i] in ...`: written at each step)
        return [stmt.iter], ["body", "orelse"]
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test], ["body", "orelse"]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return list(stmt.items), ["body"]
    if isinstance(stmt, ast.Try):
        return [], ["body", "handlers", "orelse", "finalbody"]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        if indexes_by_integers(stmt.body):
            raise _Unplaced  # (a nested function's indices)
        return [], []
    return [stmt], []


def _subscripts(node: ast.AST, conditional: bool):
    """(subscript, whether it may not be evaluated) under `node`, inner ones first, as Python
    evaluates them."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
        if node.value.attr == "shape":  # (`x.shape[k]`: a tuple's item)
            return
    if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        conditional = True
    for field, child in ast.iter_fields(node):
        later = conditional or (
            (isinstance(node, ast.IfExp) and field != "test")
            or (isinstance(node, ast.BoolOp) and field == "values")
            or (isinstance(node, ast.Compare) and field == "comparators" and len(node.ops) > 1)
        )
        for c in child if isinstance(child, list) else [child]:
            if isinstance(c, ast.AST):
                yield from _subscripts(c, later)
    if isinstance(node, ast.Subscript):
        yield node, conditional


def _unpacked(stmt: ast.stmt) -> bool:
    """An assignment to several targets, or to a tuple of them."""
    targets = getattr(stmt, "targets", None) or [getattr(stmt, "target", None)]
    return len(targets) > 1 or any(isinstance(t, (ast.Tuple, ast.List)) for t in targets)


_PURE_CALLS = {"len", "int", "min", "max", "abs"}


def _pure(item: ast.expr) -> bool:
    """An index that evaluates again to the same value, with no effect (a check reads it): a
    list of numbers as its array too (`np.array([True, False, True])`, pipeline/lower.py)."""
    if (
        isinstance(item, ast.Call)
        and ast.unparse(item.func) == "np.array"
        and len(item.args) == 1
        and isinstance(item.args[0], ast.List)
        and all(isinstance(e, ast.Constant) for e in item.args[0].elts)
    ):
        return True
    for node in ast.walk(item):
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in _PURE_CALLS):
                return False
        elif not isinstance(
            node,
            (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Attribute)
            + (ast.Tuple, ast.Slice, ast.expr_context, ast.operator, ast.unaryop)
            + (ast.Compare, ast.cmpop),
        ):
            return False
    return True

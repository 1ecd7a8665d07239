"""The adjoint's pieces of a cotangent written as views before runs are gathered, so that runs
read them and know their axes of length 1.

`concatenate_vjp(g, [a, b, c], 2, axis=1)` is already a view of `g` (in NumPy and in Numba),
made by a call whose result's shape fusion cannot see: the runs around it break, and a piece of
an axis of length 1 (`u1 * P2 - u2 * P1` of `(n, 1)`) is not known to be one. Written as the
slice it is, `g[:, a.shape[1] : a.shape[1] + b.shape[1]]` (bounds from the pieces' lengths
along the axis: 1 where proven, as of `x[:, None]`, else `b.shape[1]`), it is a view runs read in
place, and its axis of length 1 is known: proven, or guessed (`b = x[:, 2:3]`) and checked by the
guards of the runs that read it. The slice itself is outside any guard, and the fallback reads it
too: a guessed length there (`b` is empty where `x` has two columns) cut wrong slices.

`getitem_vjp(g, x, (slice(None, None, None), None))`, the cotangent of `x[:, None]`, zeroes an
array of `x`'s shape and adds `g` into it: every element once. It is `g[:, 0]`, a view, where
nothing that may share memory with it (what it views included) is written into, and no output
of the function may be it: the rewrite is taken only then. Both are statements of the fused code
alone; the unfused code, its fallback, keeps the calls.

A slice of an array nothing writes into, read inside arithmetic (`v_mul / mass[1:-1]`, the
adjoint's `dv_div / mass[1:-1]`: the rules keep an operand that needs no cotangent as the user
wrote it), is named first (`mass_view = mass[1:-1]`), as the slices the normalizer names are:
a run reads a named view in place, where the subscript inside the expression ended it."""

from __future__ import annotations

import ast
import copy

from ..names import fresh_in
from .remat import reaching
from .row_adds import sharing
from .shapes import constant_int, unit_axes
from .syntax import UFUNCS, assign, called, load, names_in, origin, text_of, written_in_place


def viewed(blocks: list[list], rank_of, reads: list) -> list[list]:
    """`blocks` (statement lists) with the pieces of cotangents above written as views, in
    copies of the statements changed."""
    nodes = [s for b in blocks for s in b if isinstance(s, ast.AST)] + list(reads)
    units = unit_axes(nodes, rank_of, proven=True)
    links = sharing(nodes)
    kept = written_in_place(nodes) | names_in(reads)  # no view may reach these
    return [_block(b, rank_of, units, links, kept) for b in blocks]


def _block(stmts: list, rank_of, units: dict, links: dict, kept: set) -> list:
    out = []
    for stmt in stmts:
        if isinstance(stmt, (ast.For, ast.While, ast.If)):
            stmt = copy.copy(stmt)
            stmt.body = _block(stmt.body, rank_of, units, links, kept)
            stmt.orelse = _block(stmt.orelse, rank_of, units, links, kept)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            value = _concatenated_piece(stmt.value, rank_of, units)
            if value is None:
                value = _new_axes_removed(stmt, rank_of, links, kept)
            if value is not None:
                stmt = origin(ast.Assign([copy.copy(stmt.targets[0])], value), stmt)
        out.append(stmt)
    return out


def _concatenated_piece(value, rank_of, units: dict):
    """`g[:, lo:hi]` for `concatenate_vjp(g, [a, b, ...], k, axis=j)`, the pieces names and `k`
    and `j` numbers; else None."""
    if not (isinstance(value, ast.Call) and text_of(value.func) == "concatenate_vjp"):
        return None
    if any(k.arg != "axis" for k in value.keywords):
        return None
    args = list(value.args) + [k.value for k in value.keywords]
    if len(args) == 3:
        args.append(ast.Constant(0))  # NumPy's default axis
    if len(args) != 4:
        return None
    g, pieces, k, axis = args
    k, axis, rank = constant_int(k), constant_int(axis), rank_of(g)
    if not (isinstance(g, ast.Name) and isinstance(pieces, (ast.List, ast.Tuple))):
        return None
    if k is None or axis is None or not isinstance(rank, int) or not -rank <= axis < rank:
        return None
    axis %= rank
    if not 0 <= k < len(pieces.elts) or not all(isinstance(p, ast.Name) for p in pieces.elts):
        return None
    if any(rank_of(p) != rank for p in pieces.elts[: k + 1]):
        return None
    lengths = [_length(p.id, axis, units) for p in pieces.elts[: k + 1]]
    lower, own = _total(lengths[:k]), lengths[k]
    if isinstance(lower, ast.Constant) and isinstance(own, ast.Constant):
        upper = ast.Constant(lower.value + own.value)
    elif isinstance(lower, ast.Constant) and lower.value == 0:
        upper = own
    else:  # `lo : lo + b.shape[1]`, as fusion/shapes reads the length of the slice
        upper = ast.BinOp(lower, ast.Add(), own)
    if isinstance(lower, ast.Constant) and lower.value == 0:
        lower = None
    items = [ast.Slice() for _ in range(axis)] + [ast.Slice(lower, upper)]
    index = items[0] if len(items) == 1 else ast.Tuple(items, ast.Load())
    return ast.Subscript(load(g.id), index, ast.Load())


def _length(name: str, axis: int, units: dict) -> ast.expr:
    if axis in units.get(name, frozenset()):
        return ast.Constant(1)
    shape = ast.Attribute(load(name), "shape", ast.Load())
    return ast.Subscript(shape, ast.Constant(axis), ast.Load())


def _total(lengths: list) -> ast.expr:
    """The sum of `lengths`, its numbers added up (first, as `a.shape[1] + 2`)."""
    number = sum(n.value for n in lengths if isinstance(n, ast.Constant))
    total = None
    for n in lengths:
        if not isinstance(n, ast.Constant):
            total = n if total is None else ast.BinOp(total, ast.Add(), n)
    if total is None:
        return ast.Constant(number)
    return total if number == 0 else ast.BinOp(total, ast.Add(), ast.Constant(number))


def _new_axes_removed(stmt: ast.Assign, rank_of, links: dict, kept: set):
    """`g[:, 0]` for `dx = getitem_vjp(g, x, (slice(None, None, None), None))` (whole slices
    and new axes alone, one new axis at least), where nothing sharing memory with `dx` or `g`
    is written into or returned; else None."""
    value, target = stmt.value, stmt.targets[0]
    if not (called(value, "getitem_vjp", 3) and isinstance(target, ast.Name)):
        return None
    g, x, index = value.args
    if not isinstance(g, ast.Name):
        return None
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    new = [isinstance(i, ast.Constant) and i.value is None for i in items]
    whole = [_whole(i) for i in items]
    rank, wanted = rank_of(g), rank_of(x)
    if not any(new) or not all(a or b for a, b in zip(new, whole)):
        return None
    if not isinstance(rank, int) or not isinstance(wanted, int):
        return None
    if len(items) > rank or rank - sum(new) != wanted:
        return None
    shared = reaching({target.id, g.id}, links)
    if shared & kept:
        return None
    out = [ast.Constant(0) if n else ast.Slice() for n in new]
    item = out[0] if len(out) == 1 else ast.Tuple(out, ast.Load())
    return ast.Subscript(load(g.id), item, ast.Load())


def _whole(node) -> bool:
    """`slice(None, None, None)`, as the adjoint writes `:`."""
    return (
        isinstance(node, ast.Call)
        and text_of(node.func) == "slice"
        and not node.keywords
        and all(isinstance(a, ast.Constant) and a.value is None for a in node.args)
    )


def slices_named(blocks: list[list], rank_of, reads: list, taken: set[str], ranks: dict):
    """`blocks` with each basic slice of an array nothing writes into that arithmetic reads as an
    operand (`v / mass[1:-1]`) named by a statement before its own (`mass_view = mass[1:-1]`),
    in copies of the statements changed; `ranks` gets the new names' ranks."""
    nodes = [s for b in blocks for s in b if isinstance(s, ast.AST)] + list(reads)
    naming = _Naming(rank_of, written_in_place(nodes), taken)

    def block(stmts: list) -> list:
        out = []
        for stmt in stmts:
            if isinstance(stmt, (ast.For, ast.While, ast.If)):
                stmt = copy.copy(stmt)
                stmt.body, stmt.orelse = block(stmt.body), block(stmt.orelse)
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                naming.named = []
                value = naming.within(stmt.value)
                for name, view in naming.named:
                    ranks[name] = rank_of(view.value)
                    out.append(origin(assign(name, view), stmt))
                if value is not stmt.value:
                    stmt = origin(ast.Assign([copy.copy(stmt.targets[0])], value), stmt)
            out.append(stmt)
        return out

    return [block(b) for b in blocks]


class _Naming:
    """Slices that are operands of arithmetic, replaced by fresh names (`named`: (name, the
    slice)) in copies of the nodes on the way to them (the unfused code keeps the original)."""

    def __init__(self, rank_of, written: set[str], taken: set[str]):
        self.rank_of, self.written, self.taken, self.named = rank_of, written, taken, []

    def within(self, node):
        """`node`, its operands of arithmetic that are such slices named."""
        fields = ()
        if isinstance(node, ast.BinOp):
            fields = ("left", "right")
        elif isinstance(node, ast.UnaryOp):
            fields = ("operand",)
        if fields:
            parts = {f: self._named(self.within(getattr(node, f))) for f in fields}
        elif isinstance(node, ast.Call) and not node.keywords:
            operands = text_of(node.func) in UFUNCS
            args = [self.within(a) for a in node.args]
            parts = {"args": [self._named(a) if operands else a for a in args]}
        else:
            return node
        if all(parts[f] is getattr(node, f) for f in fields) and (
            fields or all(a is b for a, b in zip(parts["args"], node.args))
        ):
            return node
        node = copy.copy(node)
        for field, part in parts.items():
            setattr(node, field, part)
        return node

    def _named(self, node):
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
            return node
        base = node.value.id
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        rank = self.rank_of(node.value)
        if base in self.written or not isinstance(rank, int) or len(items) != rank:
            return node
        for item in items:
            if not isinstance(item, ast.Slice):
                return node
            bounds = (item.lower, item.upper, item.step)
            if not all(b is None or constant_int(b) is not None for b in bounds):
                return node
        name = fresh_in(self.taken, f"{base}_view")
        self.named.append((name, node))
        return load(name)

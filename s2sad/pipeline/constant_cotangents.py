"""Optimize stage, NumPy mode: cotangents that are one number everywhere. The cotangent of a full
sum or mean (`expand_reduced(g, x)`, `mean_vjp(g, x)` of a number `g`) is a read-only view of one
value over `x`'s shape, and so is what an `unbroadcast` or arithmetic with numbers makes of it.
NumPy, asked for `dt * 0.25`, would still sweep a fresh array to write one number into each
element; here the arithmetic is done on the number and the result is a view again:

    dstencil_pow = dstencil_mul5 * 0.25
->  dstencil_pow = expand_reduced(constant_value(dstencil_mul5) * 0.25, dstencil_mul5)

and a power of two multiplying the product of such a constant and an array (`2 * (dt * dh)`,
the square's adjoint) joins the number:

    ddh = 2 * (dstencil_mul2 * dh)
->  ddh_const = expand_reduced(2 * constant_value(dstencil_mul2), dstencil_mul2)
    ddh = ddh_const * dh

`constant_value(v)` is one element of `v`, a NumPy number of `v`'s dtype, whose arithmetic NumPy
computes as an array's (NEP 50's promotions, the same operation on each element), so the first
rewrite gives the numbers and dtype of the statement it replaces, bit for bit; the second
multiplies by the power of two first, exact away from overflow and subnormal numbers. A number
folded is inlined where it is read again, while nothing it reads is rebound; a view that nothing
reads any more is dropped. Top-level statements only, in order (a loop or branch ends what is
known of the names it assigns); for the user's own NumPy-mode gradients, like buffer reuse
(pipeline/driver.py runs it before pipeline/reuse.py, which then reads the views as operands)."""

from __future__ import annotations

import ast
import math
from collections import Counter

from .. import ir
from ..astcopy import clone, walk_nodes
from .fusion.syntax import written_in_place
from .names import fresh_in
from .nodes import assigned_name

_SOURCES = ("expand_reduced", "mean_vjp")  # of a number over all of x: one value everywhere
_FOLDED = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_VIEW, _VALUE = "expand_reduced", "constant_value"


def fold_constant_cotangents(blocks: list[list], rank_of, keep: set[str], primal_of: dict):
    """`blocks` (the primal, then the adjoint: top-level statements in order) with arithmetic on
    constant cotangents done on their number (module docstring). `rank_of(expr)`: its rank or
    None; `keep`: names to keep (outputs, gradients); `primal_of`: each adjoint name's primal,
    given an entry for each view made here (its shape is its witness's)."""
    flat = [s for block in blocks for s in block]
    if not all(isinstance(s, ast.AST) for s in flat):
        return blocks
    folder = _Folder(rank_of, {n.id for s in flat for n in walk_nodes(s) if _is_name(n)})
    folder.written = _written(flat)
    out_blocks = []
    for block in blocks:
        out = []
        for stmt in block:
            out += folder.statement(stmt)
        out_blocks.append(out)
    for name, witness in folder.views.items():
        primal_of.setdefault(name, primal_of.get(witness, witness))
    return _without_unread(out_blocks, folder.made, keep)


def _is_name(node) -> bool:
    return isinstance(node, ast.Name)


def _call(node, names) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in names
        and not node.keywords
    )


def _power_of_two(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    if not isinstance(node, ast.Constant) or type(node.value) not in (int, float):
        return False
    return node.value != 0 and math.isfinite(node.value) and math.frexp(node.value)[0] == 0.5


class _Folder:
    def __init__(self, rank_of, taken: set[str]):
        self.rank_of = rank_of
        self.taken = taken
        # a name whose value is one number everywhere -> (that number, a name of its shape)
        self.known: dict[str, tuple[ast.expr, str]] = {}
        self.readers: dict[str, set[str]] = {}  # a name -> the known names whose entry reads it
        self.views: dict[str, str] = {}  # each view made here -> its witness
        self.extra: list = []  # views a statement's operands need, made before it
        self.made: set[int] = set()  # the statements making views
        self.written: set[str] = set()  # arrays written into: each keeps an array of its own

    def statement(self, stmt) -> list:
        target = assigned_name(stmt)
        for name in written_in_place([stmt]):  # (`x[i] = v`, `x += g`, `out=x`, `add_at(x, ...)`)
            self.forget(name)
        if target is None or not isinstance(stmt, ast.Assign):
            for name in {n.id for n in walk_nodes(stmt) if _is_name(n) and _stored(n)}:
                self.forget(name)
            return [stmt]
        value = stmt.value
        if self._source(value) or (
            _call(value, ("unbroadcast",))
            and len(value.args) == 2
            and _is_name(value.args[0])
            and value.args[0].id in self.known
        ):
            self.forget(target)
            self.know(target, (self._value_of(target), target))
            return [stmt]
        if _is_name(value) and value.id in self.known and value.id != target:
            found = self.known[value.id]
            self.forget(target)
            self.know(target, found)
            return [stmt]
        self.extra = []
        folded, info = self.fold(value, target)
        made = [ir.copy_origin(s, stmt) for s in self.extra]
        self.forget(target)
        if info is not None and not _is_name(folded) and target not in self.written:
            number, witness = info
            new = ir.copy_origin(ast.Assign([stmt.targets[0]], self._view(number, witness)), stmt)
            if witness == target or any(_is_name(n) and n.id == target for n in walk_nodes(number)):
                number, witness = self._value_of(target), target  # (`g = g * 0.5`: the new g)
            self.know(target, (number, witness))
            self.views[target] = witness
            self.made.add(id(new))
            return made + [new]
        if not made:
            return [stmt]
        return made + [ir.copy_origin(ast.Assign([stmt.targets[0]], folded), stmt)]

    def know(self, name: str, info: tuple) -> None:
        """`name` is one number everywhere: `info` (its number, its witness)."""
        self.known[name] = info
        number, witness = info
        for read in {witness} | {n.id for n in walk_nodes(number) if _is_name(n)}:
            self.readers.setdefault(read, set()).add(name)

    def forget(self, name: str) -> None:
        """`name` rebound or written: nothing known of it, nor of what was known through it
        (found through `readers`, so each statement costs what it names, not what is known)."""
        self.known.pop(name, None)
        for other in self.readers.pop(name, ()):
            info = self.known.get(other)
            if info is not None and (
                info[1] == name or any(_is_name(n) and n.id == name for n in walk_nodes(info[0]))
            ):
                del self.known[other]

    def _source(self, value) -> bool:
        return (
            _call(value, _SOURCES)
            and len(value.args) == 2
            and self.rank_of(value.args[0]) == 0
            and isinstance(self.rank_of(value.args[1]), int)
            and self.rank_of(value.args[1]) >= 1
        )

    def _value_of(self, name: str) -> ast.expr:
        return ast.Call(ast.Name(_VALUE, ast.Load()), [ast.Name(name, ast.Load())], [])

    def _view(self, number, witness: str) -> ast.expr:
        return ast.Call(ast.Name(_VIEW, ast.Load()), [number, ast.Name(witness, ast.Load())], [])

    def _number(self, node) -> bool:
        return self.rank_of(node) == 0 and not any(
            _is_name(n) and n.id in self.known for n in walk_nodes(node)
        )

    def fold(self, node, target: str):
        """(the node rewritten, (its number, its witness) where it is one number everywhere)."""
        if _is_name(node):
            return node, self.known.get(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand, info = self.fold(node.operand, target)
            if info is not None:
                return node, (ast.UnaryOp(ast.USub(), clone(info[0])), info[1])
            return ast.UnaryOp(ast.USub(), operand), None
        if isinstance(node, ast.BinOp) and isinstance(node.op, _FOLDED):
            joined = self._power_joined(node, target) if isinstance(node.op, ast.Mult) else None
            if joined is not None:
                return joined, None
            left, left_info = self.fold(node.left, target)
            right, right_info = self.fold(node.right, target)
            if left_info is not None and self._number(node.right):
                number = ast.BinOp(clone(left_info[0]), node.op, clone(node.right))
                return node, (number, left_info[1])
            if right_info is not None and self._number(node.left):
                number = ast.BinOp(clone(node.left), node.op, clone(right_info[0]))
                return node, (number, right_info[1])
            left = self.materialized(left, left_info, target)
            right = self.materialized(right, right_info, target)
            return ast.BinOp(left, node.op, right), None
        return node, None

    def _power_joined(self, node: ast.BinOp, target: str):
        """`c * (v * x)` or `(v * x) * c`, `c` a power of two and `v` one number everywhere, as
        `v2 * x` with `v2` the view of `c` times v's number; else None."""
        for power, product in ((node.left, node.right), (node.right, node.left)):
            if not _power_of_two(power) or not isinstance(product, ast.BinOp):
                continue
            if not isinstance(product.op, ast.Mult):
                continue
            for k, (mine, other) in enumerate(
                ((product.left, product.right), (product.right, product.left))
            ):
                info = self.known.get(mine.id) if _is_name(mine) else None
                if info is None or self.rank_of(other) in (0, None):
                    continue
                number = ast.BinOp(clone(power), ast.Mult(), clone(info[0]))
                view = self.materialized(mine, (number, info[1]), target, force=True)
                other, _ = self.fold(other, target)
                other = self.materialized(other, None, target)
                return (
                    ast.BinOp(view, ast.Mult(), other)
                    if k == 0
                    else ast.BinOp(other, ast.Mult(), view)
                )
        return None

    def materialized(self, node, info, target: str, force: bool = False):
        """`node` as an operand: a view made before the statement where it was folded."""
        if info is None or (_is_name(node) and not force):
            return node
        name = self._fresh(f"{target}_const")
        view = ast.Assign([ast.Name(name, ast.Store())], self._view(*info))
        self.extra.append(view)
        self.made.add(id(view))
        self.know(name, info)
        self.views[name] = info[1]
        return ast.Name(name, ast.Load())

    def _fresh(self, name: str) -> str:
        return fresh_in(self.taken, name)


def _written(flat: list) -> set[str]:
    """The names arrays are written into through (`dx += g`, `dx[1:] += g`, `out=dx`), and the
    names copied into them: a statement binding one keeps making an array of its own."""
    written = written_in_place(flat)
    copies = [
        (s.targets[0].id, s.value.id)
        for s in _walk_all(flat)
        if isinstance(s, ast.Assign) and assigned_name(s) and _is_name(s.value)
    ]
    grown = True
    while grown:
        grown = False
        for target, source in copies:
            if target in written and source not in written:
                written.add(source)
                grown = True
    return written


def _walk_all(stmts: list):
    """Every node of `stmts`."""
    for stmt in stmts:
        yield from walk_nodes(stmt)


def _stored(node) -> bool:
    return isinstance(node.ctx, (ast.Store, ast.Del))


def _without_unread(blocks: list[list], made: set[int], keep: set[str]) -> list[list]:
    """`blocks` without the views made here that nothing reads (one folded into the next)."""
    while True:
        loads = Counter(
            n.id
            for block in blocks
            for s in block
            for n in walk_nodes(s)
            if _is_name(n) and isinstance(n.ctx, ast.Load)
        )
        dead = {
            id(s)
            for block in blocks
            for s in block
            if id(s) in made and assigned_name(s) not in keep and not loads[assigned_name(s)]
        }
        if not dead:
            return blocks
        blocks = [[s for s in block if id(s) not in dead] for block in blocks]

"""Rank inference: the number of dimensions of each value, where the arguments' ranks decide it.

The transform is specialized on the ranks of the arguments (a Python float and a 0-d array are
rank 0, an array its `ndim`), and on the dtype kind of integer and boolean arrays, which index:
`a[:, idx]` has `a.ndim - 1 + idx.ndim` axes for an integer `idx`, `a.ndim - idx.ndim + 1` for
a boolean one. Knowing that a value is a scalar lets the adjoint skip
`unbroadcast` for it, so a scalar loop records only what its rules read, not shapes. A value
whose rank the analysis cannot tell is `None`, and the generic code stays. `adjoint_rank` reads
an adjoint expression's rank off its primal's (for lowering to Numba).
"""

from __future__ import annotations

import ast
import math

import numpy as np

from .. import ir, rules, runtime

from ..astcopy import clone, walk_nodes
from ..rules.helpers import RUNTIME, SHAPED_LIKE
from ..rules.elementwise import astype, item_of
from .classify import BINOPS, METHODS, UNARYOPS, dtype_kind, given_dtype, kind_letter

_REDUCTIONS = {np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin, np.var, np.std}
_SCALAR_CALLS = {float, int, len, item_of}
_LIKE = {
    np.zeros_like,
    np.ones_like,
    np.empty_like,
    np.full_like,
    np.copy,
    np.asarray,
    np.array,
    runtime.snapshot,
}
_FROM_SHAPE = {np.zeros, np.ones, np.empty, np.full}
_BOTTOM = object()  # not assigned yet


# the constants of NumPy and math that are numbers (as generated code spells them)
_NUMBERS = {f"{m}.{c}" for m in ("np", "math") for c in ("pi", "e", "inf", "nan", "tau")}
_NUMBERS.add("np.euler_gamma")


def rank_of_argument(value):
    """The rank the transform is specialized on: an int (None for what is not a number or an
    array), and for an integer or boolean array the pair (rank, `kind_letter`): "b" indexes as a
    mask, "i" and "u" (uint64) as integers."""
    if isinstance(value, (float, int, np.generic)):
        return 0
    if isinstance(value, np.ndarray):
        kind = kind_letter(value.dtype)
        return value.ndim if kind is None else (value.ndim, kind)
    return None


def _join(a, b):
    if a is _BOTTOM:
        return b
    if b is _BOTTOM:
        return a
    return a if a == b else None


class Ranks:
    def __init__(self, params: dict[str, object], indices: set[str]):
        """`params`: each parameter's `rank_of_argument`."""
        self.rank: dict[str, object] = {
            n: r[0] if isinstance(r, tuple) else r for n, r in params.items()
        }
        # names of integer or boolean arrays -> "i", "u" or "b" (rank_of_argument), where every
        # assignment says so (the arguments' from the key: never a guess)
        self.kinds: dict[str, object] = {n: r[1] for n, r in params.items() if isinstance(r, tuple)}
        self.indices = indices
        self.ints: dict[str, bool] = {}  # names every assignment of which is an int
        # list name -> the rank of every value appended to it: the values a gradient's tapes
        # give back (`v = v_tape.pop()`), which the code `hessian` reads has in loops
        self.elements: dict[str, object] = {}
        self.lists: set[str] = set()  # names of lists of arrays (np.split's pieces)

    def get(self, name: str):
        if name in self.indices:
            return 0
        value = self.rank.get(name, _BOTTOM)
        return None if value is _BOTTOM else value

    def of(self, node: ast.expr):
        """The rank of an expression, or None if unknown."""
        if isinstance(node, ast.Constant):
            return 0 if isinstance(node.value, (int, float, bool)) else None
        if isinstance(node, ast.Name):
            if node.id in self.indices:
                return 0
            return self.get(node.id)
        if isinstance(node, ast.UnaryOp):
            return 0 if isinstance(node.op, ast.Not) else self.of(node.operand)
        if isinstance(node, (ast.BinOp, ast.Compare)):
            operands = (
                [node.left, node.right]
                if isinstance(node, ast.BinOp)
                else [node.left] + node.comparators
            )
            ranks = [self.of(o) for o in operands]
            if any(r is None for r in ranks):
                return None
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                a, b = ranks
                if a == 1 and b == 1:
                    return 0
                return b - 1 if a == 1 else a - 1 if b == 1 else max(a, b)
            return max(ranks)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Attribute):
            if node.attr in ("ndim", "size"):
                return 0
            if ast.unparse(node) in _NUMBERS:  # np.pi: a number, as a literal is
                return 0
            if node.attr == "shape":
                return 1  # a tuple of ints: x.shape[0] is an int
            return self.of(node.value) if node.attr in ("T", "real", "imag") else None
        if isinstance(node, ast.Call):
            return self.call(node)
        return None

    def subscript(self, node: ast.Subscript):
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            return 0  # x.shape[k]
        base = self.of(node.value)
        if base is None:
            return None
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        rank, advanced = base, []  # the ranks the index arrays broadcast to
        for item in items:
            if isinstance(item, ast.Slice):
                continue
            if isinstance(item, ast.Constant) and item.value is None:
                rank += 1
            elif isinstance(item, ast.Constant) and item.value is Ellipsis:
                continue
            elif self._is_int(item):
                rank -= 1
            else:  # an index array: an integer one takes an axis, a boolean one its rank
                r, kind = self.of(item), self.kind(item)
                if not isinstance(r, int) or kind is None or (kind == "b" and r == 0):
                    return None
                rank -= r if kind == "b" else 1
                advanced.append(1 if kind == "b" else r)
            if rank < 0:
                return None
        return rank + max(advanced, default=0)

    def kind(self, node: ast.expr):
        """ "b", "i" or "u" (uint64) for a boolean or integer array (or an element of one), where
        known."""
        if isinstance(node, ast.Name):
            value = self.kinds.get(node.id)
            return value if isinstance(value, str) else None
        if isinstance(node, ast.Compare):
            return "b"
        if isinstance(node, ast.Subscript):
            return self.kind(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            return self.kind(node.operand)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            kind = self.kind(node.operand)
            return kind if kind in ("i", "u") else None  # (NumPy refuses -mask)
        if isinstance(node, ast.BinOp) and isinstance(node.op, _INT_OPS):
            return _arithmetic_kind(self, node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            kinds = {self.kind(node.left), self.kind(node.right)}
            return "b" if kinds == {"b"} else None
        if isinstance(node, ast.Call) and ir.callee(node.func) is np.arange:  # of ints: ints
            ints = node.args and not node.keywords and all(self._is_int(a) for a in node.args)
            return "i" if ints else None
        if isinstance(node, ast.Call) and ir.callee(node.func) in _KIND_KEEPING:
            return _arithmetic_kind(self, node)
        if isinstance(node, ast.Call) and ir.callee(node.func) in _POSITIONS:
            return "i"
        if isinstance(node, ast.Call):
            return self._made_kind(node)
        return None

    def _made_kind(self, node: ast.Call):
        """The kind of an array made in the dtype it is given (`np.zeros(n, dtype=int)`,
        `a.astype(bool)`, `dtype=idx.dtype`) or in that of the array it copies (`np.zeros_like(idx)`,
        `idx.copy()`): where a store into it truncates, the store has no derivative."""
        callee, args, dtype = call_parts(node)
        if dtype is not None and callee not in _LIKE | _FROM_SHAPE | {astype}:
            return None
        if isinstance(dtype, ast.Attribute) and dtype.attr == "dtype":  # dtype=idx.dtype
            return self.kind(dtype.value)
        if dtype is not None:
            return dtype_kind(dtype)
        if callee in _LIKE and args:
            return self.kind(args[0])
        return None

    def _is_int(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, int) and not isinstance(node.value, bool)
        if isinstance(node, ast.Name):
            return node.id in self.indices or self.ints.get(node.id, False)
        if isinstance(node, ast.BinOp):
            return not isinstance(node.op, ast.Div) and (
                self._is_int(node.left) and self._is_int(node.right)
            )
        if isinstance(node, ast.UnaryOp):
            return isinstance(node.op, (ast.USub, ast.UAdd)) and self._is_int(node.operand)
        if isinstance(node, ast.Attribute):
            return node.attr in ("ndim", "size")
        if isinstance(node, ast.Subscript):  # x.shape[k]
            shape = node.value
            return isinstance(shape, ast.Attribute) and shape.attr == "shape"
        if isinstance(node, ast.Call):
            callee = ir.callee(node.func)
            return callee in (len, int)
        return False

    def call(self, node: ast.Call):
        callee = ir.callee(node.func)
        args = list(node.args)
        if callee is None and isinstance(node.func, ast.Attribute):
            callee = METHODS.get(node.func.attr)
            args = [node.func.value] + args
        if callee is None:
            return None
        if (
            callee in _SCALAR_CALLS
            or getattr(callee, "__module__", None) == "math"
            or (getattr(callee, "__self__", None) is math)
        ):
            return 0
        keywords = {k.arg: k.value for k in node.keywords}
        if callee in _LIKE and args:
            return self.of(args[0])
        like = _shaped_like(callee)  # s2sad's own helpers in gradient code (`hessian` reads it)
        if like is not None and len(args) > like:
            return self.of(args[like])
        if callee is runtime.grad_seed:
            return 0
        if callee in (np.eye, np.identity):
            return 2
        if callee is np.arange:  # of numbers alone: a vector
            return 1
        if callee is np.linspace and len(args) >= 2:  # of numbers, a vector; of arrays, more
            ends = [self.of(a) for a in args[:2]]
            return 1 if ends == [0, 0] else None
        if callee in (np.sort, np.argsort) and args:  # along an axis; flattened for axis=None
            axis = keywords.get("axis", args[1] if len(args) > 1 else None)
            flat = isinstance(axis, ast.Constant) and axis.value is None
            return 1 if flat else (self.of(args[0]) if axis is None or self._is_int(axis) else None)
        if callee in _FROM_SHAPE and args:
            return self.shape_rank(args[0])
        if callee in _REDUCTIONS:
            return self.reduction(args, keywords)
        if callee is np.concatenate and args and isinstance(args[0], (ast.List, ast.Tuple)):
            ranks = {self.of(e) for e in args[0].elts}  # of one rank, joined along an axis
            axis = keywords.get("axis", args[1] if len(args) > 1 else None)
            if isinstance(axis, ast.Constant) and axis.value is None:
                return 1
            rank = ranks.pop() if len(ranks) == 1 else None
            return rank if isinstance(rank, int) and rank >= 1 else None
        if callee is runtime.concatenate_vjp and len(args) > 2:
            pieces, k = args[1], args[2]  # the cotangent of piece k: that piece's rank
            if isinstance(pieces, (ast.List, ast.Tuple)) and isinstance(k, ast.Constant):
                if isinstance(k.value, int) and 0 <= k.value < len(pieces.elts):
                    return self.of(pieces.elts[k.value])
            return None
        if callee is np.stack and args and isinstance(args[0], (ast.List, ast.Tuple)):
            ranks = [self.of(e) for e in args[0].elts]  # of equal shapes, one axis more
            return None if not ranks or None in ranks else max(ranks) + 1
        if callee in (np.dot, np.matmul, np.outer) and len(args) == 2:
            a, b = self.of(args[0]), self.of(args[1])
            if a is None or b is None:
                return None
            if callee is np.outer:
                return 2
            if callee is np.dot and 0 in (a, b):
                return max(a, b)
            if callee is np.matmul and 0 in (a, b):
                return None  # an error in NumPy
            if callee is np.matmul and max(a, b) > 2:
                return max(a, b) if min(a, b) > 1 else max(a, b) - 1
            return max(a + b - 2, 0)
        if (
            callee in BINOPS.values()
            or callee in UNARYOPS.values()
            or isinstance(callee, np.ufunc)
            or callee in (np.where, np.clip)
            or rules.is_nondiff(callee)
        ):
            if isinstance(callee, np.ufunc) or callee in (np.where, np.clip):
                ranks = [self.of(a) for a in args + list(keywords.values())]
                return None if any(r is None for r in ranks) else max(ranks, default=0)
        if getattr(callee, "__name__", "") == "stop_gradient" and args:
            return self.of(args[0])
        return None

    def shape_rank(self, shape: ast.expr):
        """The rank of an array made with this shape argument."""
        if isinstance(shape, ast.Tuple):
            return len(shape.elts)
        if isinstance(shape, ast.Attribute) and shape.attr == "shape":
            return self.of(shape.value)
        if self._is_int(shape) or self.of(shape) == 0:
            return 1
        return None

    def reduction(self, args, keywords):
        if not args:
            return None
        base = self.of(args[0])
        axis = keywords.get("axis", args[1] if len(args) > 1 else ast.Constant(None))
        keepdims = keywords.get("keepdims", ast.Constant(False))
        if not isinstance(keepdims, ast.Constant):
            return None
        if isinstance(axis, ast.Constant) and axis.value is None and not keepdims.value:
            return 0  # (of any rank: a loop's `s += np.sum(x[i])` in a module `emit` writes)
        if base is None:
            return None
        if keepdims.value:
            return base
        if isinstance(axis, (ast.Constant, ast.UnaryOp)):
            return base - 1
        if isinstance(axis, ast.Tuple):
            return base - len(axis.elts)
        return None

    # ------------------------------------------------------------------ fixpoint over the code
    def infer(self, stmts: list[ast.stmt]) -> None:
        # ints start optimistic (every assigned name) and only lose members: the greatest
        # fixpoint, so a loop counter `pos = pos + 1` stays an int
        self.ints = {
            n.id: True
            for n in walk_nodes(ast.Module(stmts, []))
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        for _ in range(20):  # loop-carried names settle in a few rounds
            before = (dict(self.rank), dict(self.ints), dict(self.elements), dict(self.kinds))
            self._next_ints: dict[str, bool] = {}
            self._block(stmts)
            self.ints = self._next_ints
            if before == (self.rank, self.ints, self.elements, self.kinds):
                return

    def _block(self, stmts):
        for stmt in stmts:
            if isinstance(stmt, (ast.If, ast.While)):
                self._block(stmt.body)
                self._block(stmt.orelse)
            elif isinstance(stmt, ast.For):
                self._block(stmt.body)
            elif isinstance(stmt, ast.Expr):
                lst, item = _list_method(stmt.value, "append", 1)
                if lst is not None:
                    rank = self.of(item[0])
                    self.elements[lst] = _join(self.elements.get(lst, _BOTTOM), rank)
            elif isinstance(stmt, ast.Assign):
                target = stmt.targets[0]
                popped, _ = _list_method(stmt.value, "pop", 0)
                if isinstance(target, ast.Name) and popped is not None:
                    value = self.elements.get(popped, _BOTTOM)  # (nothing appended yet: bottom)
                    self.rank[target.id] = _join(self.rank.get(target.id, _BOTTOM), value)
                    self.kinds[target.id] = None
                    self._next_ints[target.id] = False
                elif isinstance(target, ast.Name):
                    if self._is_list(stmt.value):
                        self.lists.add(target.id)
                    value = self.of(stmt.value)
                    self.rank[target.id] = _join(self.rank.get(target.id, _BOTTOM), value)
                    kind = self.kind(stmt.value)
                    self.kinds[target.id] = _join(self.kinds.get(target.id, _BOTTOM), kind)
                    is_int = self._is_int(stmt.value)
                    self._next_ints[target.id] = self._next_ints.get(target.id, True) and is_int
                elif isinstance(target, ast.Tuple):
                    value = stmt.value  # n, d = x.shape: ints
                    sizes = isinstance(value, ast.Attribute) and value.attr == "shape"
                    for e in target.elts:
                        self.rank[e.id] = _join(self.rank.get(e.id, _BOTTOM), 0) if sizes else None
                        self.kinds[e.id] = None
                        self._next_ints[e.id] = self._next_ints.get(e.id, True) and sizes

    def _is_list(self, value: ast.expr) -> bool:
        """A list of arrays (np.split's pieces), a slice of one, or another name for one."""
        if isinstance(value, ast.Call):
            return id(ir.callee(value.func)) in rules.registry.LIST_VALUED
        if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice):
            value = value.value
        return isinstance(value, ast.Name) and value.id in self.lists


def call_parts(node: ast.Call) -> tuple:
    """(the function, its positional arguments, the dtype it is given or None) of a call: a
    method's array its first argument (`x.astype(t)` as `astype(x, t)`, dtype `t`)."""
    callee, args = ir.callee(node.func), list(node.args)
    if callee is None and isinstance(node.func, ast.Attribute):
        callee, args = METHODS.get(node.func.attr), [node.func.value] + args
    return callee, args, given_dtype(callee, args, {k.arg: k.value for k in node.keywords})


# the operators and functions that give integers of integers (and of booleans with them): a store
# into their result truncates as one into an argument does
_INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)
_KIND_KEEPING = {abs, np.abs, np.minimum, np.maximum}
# the operators whose Python int operand NumPy computes in an integer array's dtype, as
# compiled code does (pipeline/promotions.py)
WEAK_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
# positions, int64 whatever they are of: a store into `y = np.argsort(k)` truncates
_POSITIONS = {np.argsort, np.argmax, np.argmin}


def _arithmetic_kind(ranks: Ranks, node: ast.BinOp | ast.Call):
    """ "i" for integer arithmetic on integer or boolean arrays (True + 1 is 2), "u" for that on
    uint64 ones with no other integer, "b" for `np.abs`, `np.minimum`, `np.maximum` of
    booleans alone, else None: an operand that may be a float (a float literal, a float array, a
    number of unknown type), a true division, or a power whose exponent is not a non-negative
    integer literal makes the result's kind unknown."""
    if isinstance(node, ast.Call):
        operands = list(node.args) if not node.keywords else []
        if len(operands) != (1 if ir.callee(node.func) in (abs, np.abs) else 2):
            return None
    else:
        operands = [node.left, node.right]
        exponent = node.right
        if isinstance(node.op, ast.Pow) and not (
            isinstance(exponent, ast.Constant) and ranks._is_int(exponent) and exponent.value >= 0
        ):
            return None
    kinds = [ranks.kind(o) for o in operands]
    if not any(kinds) or not all(
        k is not None or ranks._is_int(o) for k, o in zip(kinds, operands)
    ):
        return None  # (of numbers alone, Python's: not an array's)
    if set(kinds) == {"b"}:  # True + True is True in NumPy, an error in `-`: bool only where kept
        return "b" if isinstance(node, ast.Call) else None
    if "u" in kinds:  # uint64 with an int64 gives float64, with a Python int uint64 (NEP 50;
        # compiled code casts the int, `weak_int`: promotions.py, in these operators alone)
        weak = isinstance(node, ast.BinOp) and isinstance(node.op, WEAK_OPS)
        return "u" if set(kinds) <= {"u", "b"} | ({None} if weak else set()) else None
    return "i"


def _list_method(value: ast.expr, method: str, arity: int):
    """(list name, arguments) for `lst.<method>(...)` with `arity` arguments, else (None, None)."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == method
        and isinstance(value.func.value, ast.Name)
        and len(value.args) == arity
        and not value.keywords
    ):
        return value.func.value.id, value.args
    return None, None


def _shaped_like(callee):
    """The position of the argument whose shape a helper's result has (`x` of `mean_vjp(g, x)`,
    declared where it is registered: rules/helpers.py), or None."""
    name = getattr(callee, "__name__", None)
    return SHAPED_LIKE.get(name) if RUNTIME.get(name) is callee else None


def infer_ranks(stmts: list[ast.stmt], params: dict[str, int | None]) -> Ranks:
    indices = set()
    for node in walk_nodes(ast.Module(stmts, [])):
        if isinstance(node, ast.For):
            indices.add(node.target.id)
    ranks = Ranks(params, indices)
    ranks.infer(stmts)
    return ranks


def scalar_output_ranks(stmts: list[ast.stmt], params: dict, output: str) -> Ranks:
    """`infer_ranks` for a gradient, whose output is a number: `grad_seed` refuses any other
    value before the adjoint runs. A name of unknown rank the output is made of by arithmetic
    (`SCALE` in `k * s + SCALE * m`, data read from the function's scope) is then a number too,
    as broadcasting never lowers a rank: the adjoint sums nothing into a number (`np.sum(g)`)."""
    ranks = infer_ranks(stmts, params)
    assigned: dict[str, int] = {}
    for node in walk_nodes(ast.Module(stmts, [])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned[node.id] = assigned.get(node.id, 0) + 1
    values = {  # the names assigned once, at the top level, by arithmetic
        s.targets[0].id: s.value
        for s in stmts
        if isinstance(s, ast.Assign)
        and isinstance(s.targets[0], ast.Name)
        and assigned[s.targets[0].id] == 1
    }
    numbers, todo = set(), [output]
    while todo:
        name = todo.pop()
        if name in numbers or ranks.get(name) is not None or name in ranks.indices:
            continue
        numbers.add(name)
        if name in values:
            todo += _arithmetic_names(values[name])
    given = {n: 0 for n in numbers if n not in assigned and n not in params}
    return infer_ranks(stmts, {**params, **given}) if given else ranks


def _arithmetic_names(node) -> list[str]:
    """The names `node` combines by arithmetic alone (`+ - * / **`, unary minus): its rank is
    the greatest of theirs."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult):
        return _arithmetic_names(node.left) + _arithmetic_names(node.right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _arithmetic_names(node.operand)
    return []


def integer_arrays(shapes) -> frozenset[str]:
    """The names known to be integer or boolean arrays (the arguments', from the key): fusion
    reads them in a float run's dtype where NumPy keeps it (pipeline/fusion/dtypes.py)."""
    return frozenset(n for n, kind in shapes.kinds.items() if isinstance(kind, str))


def adjoint_rank(shapes, primal_of: dict):
    """The rank of an expression over adjoint names (`dx[i]`): that of the same expression over
    their primals (`x[i]`)."""

    class Primal(ast.NodeTransformer):
        def visit_Name(self, node):
            return ast.Name(primal_of.get(node.id, node.id), ast.Load())

    return lambda node: shapes.of(Primal().visit(clone(node)))


def drop_number_checks(stmts: list, shapes) -> None:
    """Undo `x_1 = in_place(x_add, x, "add")` (normalize/statements.py) where `x_1` is of rank 0:
    `x` is then a number Python rebinds (or a 0-d array, of a shape the update cannot change),
    and `x_add = x + v` binds `x_1` itself (a number a loop sums into: a call an iteration
    saved in Python). One element `y[i] += v` stores `y_add` as Python's `y[i] = y[i] + v` does,
    which NumPy truncates into `y`'s dtype: `in_place_kind` is dropped there too."""
    for node in list(walk_nodes(ast.Module(stmts, []))):
        for field in ("body", "orelse"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                block[:] = _numbers_rebound(block, shapes)


def _numbers_rebound(block: list, shapes) -> list:
    out = []
    for k, stmt in enumerate(block):
        call = stmt.value if isinstance(stmt, ast.Assign) else None
        helper = ir.callee(call.func) if isinstance(call, ast.Call) else None
        if helper not in (RUNTIME["in_place"], RUNTIME["in_place_kind"]):
            out.append(stmt)
            continue
        new, target = call.args[0], stmt.targets[0].id
        before = out[-1] if out else None
        computed = (
            isinstance(new, ast.Name)
            and isinstance(before, ast.Assign)
            and isinstance(before.targets[0], ast.Name)
            and before.targets[0].id == new.id
        )
        if shapes.of(new) != 0 or not computed:
            out.append(stmt)
        elif helper is RUNTIME["in_place"]:  # `x_1 = x + v`
            before.targets[0] = ast.Name(target, ast.Store())
            if ir.is_classified(before):
                ir.op(before).target = target
        else:  # `y[i] = y_add`: the store after it reads `y_add`
            after = block[k + 1]
            after.value = ast.Name(new.id, ast.Load())
            op = ir.op(after)
            op.operands = [(p, i, new.id if n == target else n) for p, i, n in op.operands]
            op.reads = op.reads - {target} | {new.id}
    return out

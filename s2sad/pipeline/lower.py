"""Lowering for Numba, the stage between optimization and emission in a jitted transform: it
decides branches on constant conditions before differentiation (Numba types a tape by its
pushes), copies what a tape saves in the forms Numba has, and rewrites the generated statements
into calls Numba compiles (and compiles fast). It consumes and produces statement lists."""

from __future__ import annotations

import ast

import numpy as np

from .. import ir
from ..rules.helpers import RUNTIME
from .classify import given_dtype
from .nodes import NOT_CONSTANT, constant_value, index_expr
from .promotions import in_numpy_dtypes


def jit_copy(node: ast.expr, rank) -> ast.expr:
    """A copy of what `node` reads, for Numba, whose floats have no `.copy()`: an element needs
    none, an array is copied, and where the rank is unknown `snapshot` decides when compiled."""
    if rank == 0:
        return node
    if rank is None:
        return ast.Call(ast.Name("snapshot", ast.Load()), [node], [])
    return ast.Call(ast.Attribute(node, "copy", ast.Load()), [], [])


def drop_constant_branches(stmts: list) -> list:
    """Statements with each branch on a condition of constants replaced by the branch taken.

    Numba drops the branch a constant condition never takes before it types the code: the
    primal compiles even when that branch does not. The gradient's tapes are typed by their
    pushes, and a tape pushed only in a dropped branch would have no type; so the jitted
    transform decides these branches itself, before it differentiates. A `print` of an
    f-string with values in it (which Numba does not compile) is dropped, and an f-string a
    `raise` gives becomes its text as written."""
    counts: dict[str, int] = {}
    values: dict[str, ast.expr] = {}
    for node in ast.walk(ast.Module(list(stmts), [])):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        counts[n.id] = counts.get(n.id, 0) + 1
                        values[n.id] = node.value
        elif isinstance(node, ast.For):
            for n in ast.walk(node.target):
                if isinstance(n, ast.Name):
                    counts[n.id] = counts.get(n.id, 0) + 2

    def decided(test: ast.expr):
        if isinstance(test, ast.Name) and counts.get(test.id) == 1:
            test = values[test.id]
        value = constant_value(test)
        return None if value is NOT_CONSTANT else bool(value)  # else left to Numba

    def block(body: list) -> list:
        out = []
        for stmt in body:
            if isinstance(stmt, ast.If):
                taken = decided(stmt.test)
                if taken is not None:
                    out += block(stmt.body if taken else stmt.orelse)
                    continue
                stmt.body, stmt.orelse = block(stmt.body), block(stmt.orelse)
            elif isinstance(stmt, (ast.For, ast.While)):
                stmt.body = block(stmt.body)
            elif _unformattable_print(stmt):
                continue  # print(f"{x:.3f}"): Numba formats no values into strings
            elif isinstance(stmt, ast.Raise):  # its message as the text the user wrote
                for n in ast.walk(stmt):
                    if isinstance(n, ast.Call):
                        n.args = [_as_text(a) for a in n.args]
            out.append(stmt)
        return out

    return block(list(stmts))


def _unformattable_print(stmt) -> bool:
    """`print(...)` of an f-string with a value in it (other formatting, `.format` or `%`, is
    left to Numba, which refuses it: the transform then runs in Python)."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "print"
        and any(isinstance(n, ast.FormattedValue) for n in ast.walk(call))
    )


def _as_text(node: ast.expr) -> ast.expr:
    """An f-string as the constant text the user wrote (`"got {x.ndim}"`); else `node`."""
    if not isinstance(node, ast.JoinedStr):
        return node
    parts = []
    for v in node.values:
        if isinstance(v, ast.Constant):
            parts.append(str(v.value))
        else:
            parts.append("{" + ast.unparse(v.value) + "}")
    return ast.copy_location(ast.Constant("".join(parts)), node)


def lower_for_numba(
    stmts: list, rank_of=lambda node: None, kind_of=lambda node: None, int_of=lambda node: False
) -> list:
    """Adjoint statements in forms Numba compiles, and compiles fast: a reshape back to an
    input's shape copies a strided cotangent first (`reshape_like`); `np.add.at` and additions
    into more than one element (`d[i, :] += g`) become `add_at`; `np.array(x)` is `np.copy(x)`,
    `np.stack` of numbers `np.array` and of a list of arrays `np.stack` of a tuple (so are
    `np.concatenate`'s, `np.hstack`'s, `np.vstack`'s, `np.dstack`'s, `np.column_stack`'s and
    their adjoint `joined_vjp`'s), reductions Numba lacks (`np.max` over an axis, `keepdims`) the helpers
    `max_over`, `min_over`, `prod_over`, `mean_over` and `sum_over` (rules/folds.py; sums and
    means everywhere, which add float32 in float64 there as NumPy's pairwise sums keep), the
    trace over the last two axes `trace_last`, `np.where` of numbers a conditional expression,
    and `np.partition`/`np.argpartition` calls into NumPy's (`numpy_partition`: Numba's put
    the other elements in another order). The cotangents of two vectors' product are written
    out (`g * b` for `dot_vjp_lhs(g, a, b)`): Numba makes one loop and one array of
    `g * z + g * z`, the two cotangents of `np.dot(z, z)`, where the helpers made three arrays.
    A `while True:` loop tests `forever()`, which Numba does not fold (folded, it miscompiles
    some loops left by a `break`). `rank_of` gives the rank of an expression where known,
    `kind_of` whether it is a boolean or integer array ("b", "i"), `int_of` whether it is a
    Python int. Arithmetic of integer arrays with Python ints or floats computes in NumPy's
    dtypes (`weak_int`, `promoted`: promotions.py)."""

    class Lower(ast.NodeTransformer):
        def visit_AugAssign(self, node: ast.AugAssign) -> ast.stmt:
            # d[index] += g: add_at picks an element store or an in-place add into the view
            # by the index's type (Numba's own slice assignment compiles slowly)
            self.generic_visit(node)
            if (
                isinstance(node.target, ast.Subscript)
                and isinstance(node.op, ast.Add)
                and rank_of(node.target) != 0
            ):
                index = node.target.slice
                if isinstance(index, ast.Slice) or (
                    isinstance(index, ast.Tuple)
                    and any(isinstance(e, ast.Slice) for e in index.elts)
                ):
                    index = index_expr(index)
                name = "add_masked" if _by_mask(node.target, rank_of) else "add_at"
                call = ast.Call(
                    ast.Name(name, ast.Load()), [node.target.value, index, node.value], []
                )
                new = ast.Expr(call)
                ir.copy_origin(new, node)
                return new
            return node

        def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
            self.generic_visit(node)
            node.slice = _listed_index(node.slice)
            if isinstance(node.slice, ast.Constant) and node.slice.value is Ellipsis:
                node.slice = _ellipsis_tuple(node.slice)  # `h[...]`: Numba lowers `h[...,]`
            elif _by_mask(node, rank_of) and isinstance(node.ctx, ast.Load):
                return ast.Call(ast.Name("masked", ast.Load()), [node.value, node.slice], [])
            elif _by_arrays(node, rank_of, kind_of) and isinstance(node.ctx, ast.Load):
                args = [node.value, index_expr(node.slice)]  # (refused, naming the line)
                return ast.Call(ast.Name("indexed_by_arrays", ast.Load()), args, [])
            return node

        def visit_Assign(self, node: ast.Assign) -> ast.stmt:
            self.generic_visit(node)
            target = node.targets[0]
            if len(node.targets) == 1 and _by_mask(target, rank_of):
                # y[M] = v of a mask of several axes: Numba's setitem fails (an AssertionError)
                args = [target.value, target.slice, node.value]
                new = ast.Expr(ast.Call(ast.Name("set_masked", ast.Load()), args, []))
                ir.copy_origin(new, node)
                return new
            return node

        def visit_While(self, node: ast.While) -> ast.stmt:
            self.generic_visit(node)
            test = constant_value(node.test)
            if test is not NOT_CONSTANT and test:
                # Numba 0.68 miscompiles some `while True:` loops left by a `break` (the values
                # assigned before the break, numba#5267-like): a call it cannot fold is safe
                node.test = ast.Call(ast.Name("forever", ast.Load()), [], [])
            return node

        def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
            self.generic_visit(node)
            negative = _negative_int(node.right)
            if isinstance(node.op, ast.Pow) and negative is not None:
                # x ** -1: Numba raises ZeroDivisionError at x = 0 for an integer exponent;
                # NumPy (and Numba's float power) give inf, as Python mode does
                node.right = ast.Constant(float(negative))
            if isinstance(node.op, ast.MatMult) and not all(
                rank_of(a) in (1, 2) for a in (node.left, node.right)
            ):  # a stack of matrices, or maybe one: Numba's `@` takes none
                return ast.Call(ast.Name("matmul_stacks", ast.Load()), [node.left, node.right], [])
            return in_numpy_dtypes(node, rank_of, kind_of, int_of)

        def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
            self.generic_visit(node)
            return in_numpy_dtypes(node, rank_of, kind_of, int_of)

        def visit_Call(self, node: ast.Call) -> ast.expr:
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id in RUNTIME:
                for k in node.keywords:  # a reduction's adjoint over `axis=(k,)`
                    k.value = _one_axis(k.value) if k.arg == "axis" else k.value
                node.args = [  # an index `...` (getitem_vjp(g, h, ...)) as `(...,)`
                    _ellipsis_tuple(a) if isinstance(a, ast.Constant) and a.value is Ellipsis else a
                    for a in node.args
                ]
            text = ast.unparse(node.func)
            _numpy_dtype(node, text)
            if text in _INDEXED and len(node.args) > _INDEXED[text]:
                at = _INDEXED[text]  # (the adjoint of `x[[True, False, True]]`: as the read)
                node.args[at] = _listed_index(node.args[at])
            if (
                text == "np.reshape"
                and len(node.args) == 2
                and isinstance(node.args[1], ast.Call)
                and ast.unparse(node.args[1].func) == "np.shape"
                and not node.keywords
            ):
                return ast.Call(
                    ast.Name("reshape_like", ast.Load()), [node.args[0], node.args[1].args[0]], []
                )
            if (
                text == "np.broadcast_to"
                and len(node.args) == 2
                and isinstance(node.args[1], ast.Call)
                and ast.unparse(node.args[1].func) == "np.shape"
                and not node.keywords
            ):  # (Numba's fails for the shape of a number, `()`)
                return ast.Call(
                    ast.Name("broadcast_like", ast.Load()), [node.args[0], node.args[1].args[0]], []
                )
            if text == "np.add.at":
                node.func = ast.Name("add_at", ast.Load())
            if ast.unparse(node.func) == "add_at" and len(node.args) == 3:
                if _by_mask(ast.Subscript(node.args[0], node.args[1], ast.Load()), rank_of):
                    node.func = ast.Name("add_masked", ast.Load())  # (as `d[M] += g`, above)
            if text == "np.linspace":
                ends = _linspace_ends(node)
                if ends is not None:
                    return ends
            if text in ("np.partition", "np.argpartition"):  # Numba's orders differ from NumPy's
                node.func = ast.Name(f"numpy_{text[3:]}", ast.Load())
            if (
                text == "np.array"
                and len(node.args) == 1
                and not node.keywords
                and not isinstance(node.args[0], (ast.List, ast.Tuple, ast.Constant))
                and rank_of(node.args[0]) != 0
            ):  # of an array (a name, or a tangent `x_dot * s` to own): Numba copies none so
                node.func = ast.parse("np.copy", mode="eval").body
            if (
                text == "np.array"
                and len(node.args) == 1
                and isinstance(node.args[0], (ast.List, ast.Tuple))
                and not node.args[0].elts
                and all(k.arg == "dtype" for k in node.keywords)
            ):  # empty (`out = np.array([])`, then np.append): Numba cannot type its elements
                node.func = ast.parse("np.zeros", mode="eval").body
                node.args = [ast.Constant(0)]
            if (
                text == "np.stack"
                and len(node.args) == 1
                and isinstance(node.args[0], ast.List)
                and not node.keywords
                and all(rank_of(e) == 0 for e in node.args[0].elts)
            ):  # of numbers (np.array([a, b]) of the user's code): Numba stacks only arrays
                node.func = ast.parse("np.array", mode="eval").body
            elif (
                text == "np.stack"
                and node.args
                and isinstance(node.args[0], ast.List)
                and all(k.arg == "axis" for k in node.keywords)
                and any(rank_of(e) in (0, None) for e in node.args[0].elts)
            ):  # of operands whose ranks are not all known: numbers or arrays, told by types
                node.func = ast.Name("stack_operands", ast.Load())
                node.args[0] = ast.Tuple(node.args[0].elts, ast.Load())
            elif text in _JOINS_OF_TUPLES and node.args and isinstance(node.args[0], ast.List):
                # of arrays (or of values of ranks not known here, a loop's): Numba takes them
                # as a tuple, as NumPy does; a list it refuses
                node.args[0] = ast.Tuple(node.args[0].elts, ast.Load())
            if text in _AT_LEAST and node.args and isinstance(node.args[0], ast.Tuple):
                # operands of several ranks (or ranks not known here): Numba's joins take one
                pieces = node.args[0].elts
                ranks = {rank_of(e) for e in pieces}
                if len(ranks) > 1 or None in ranks:
                    at_least = ast.parse(f"np.atleast_{_AT_LEAST[text]}d", mode="eval").body
                    node.args[0].elts = [ast.Call(at_least, [e], []) for e in pieces]
            if text == "joined_vjp" and len(node.args) > 1 and isinstance(node.args[1], ast.List):
                node.args[1] = ast.Tuple(node.args[1].elts, ast.Load())  # (hstack's adjoint)
            if (
                text == "np.where"
                and len(node.args) == 3
                and not node.keywords
                and all(rank_of(a) == 0 for a in node.args)
            ):  # of numbers: Numba's np.where would give a 0-d array
                return ast.IfExp(node.args[0], node.args[1], node.args[2])
            if text == "np.matmul" and len(node.args) == 2 and not node.keywords:
                if not all(rank_of(a) in (1, 2) for a in node.args):
                    node.func = ast.Name("matmul_stacks", ast.Load())  # Numba: no stacks
            other = _VECTOR_PRODUCTS.get(text)
            if (
                other is not None
                and len(node.args) == 3
                and not node.keywords
                and rank_of(node.args[1]) == rank_of(node.args[2]) == 1
            ):
                return ast.BinOp(node.args[0], ast.Mult(), node.args[other])
            if text == "np.linalg.norm":
                lowered = _lowered_norm(node)
                if lowered is not None:
                    return lowered
            function = _as_function(node, rank_of)
            lowered = _lowered_reduction(
                ast.unparse(function.func), function, rank_of, function is not node
            )
            if lowered is not None:
                return lowered
            keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
            if text == "np.trace" and keywords == {"axis1": "-2", "axis2": "-1"}:
                return ast.Call(ast.Name("trace_last", ast.Load()), node.args, [])
            return in_numpy_dtypes(node, rank_of, kind_of, int_of)

    lower = Lower()
    return [lower.visit(stmt) if isinstance(stmt, ast.AST) else stmt for stmt in stmts]


def _by_mask(node, rank_of) -> bool:
    """Whether `node` is a subscript by one array of two or more axes (`y[M]`): a boolean mask
    there (the helpers `masked`, `set_masked` tell it from an integer array when compiled)."""
    if not isinstance(node, ast.Subscript) or isinstance(node.slice, (ast.Tuple, ast.Slice)):
        return False
    rank = rank_of(node.slice)
    return rank is not None and rank >= 2


# the helpers taking an index, and its position among their arguments
_INDEXED = {"getitem_vjp": 2, "add_at": 1, "scatter_added": 1}


def _listed_index(index: ast.expr) -> ast.expr:
    """An index written as a list of bools (`x[[True, False, True]]`, a mask, as NumPy reads
    it) as the array NumPy makes of it, `np.array([...])`: Numba indexes by no list. Any other
    index as it is: a list of integers keeps the forms that give a store's repeated indices
    their last write's cotangent (`y[[0, 0, 1]] = x`: x[0] gets none)."""
    if not (isinstance(index, ast.List) and index.elts):
        return index
    if not all(isinstance(e, ast.Constant) and type(e.value) is bool for e in index.elts):
        return index
    return ast.Call(ast.parse("np.array", mode="eval").body, [index], [])


def _linspace_ends(node: ast.Call) -> ast.expr | None:
    """`np.linspace(a, b, n, endpoint=e)` as `linspace_ends(a, b, n, e)` (Numba's np.linspace
    takes no `endpoint`); None for any other call, or one Numba has."""
    given = dict(zip(("start", "stop", "num", "endpoint"), node.args))
    for k in node.keywords:
        if k.arg in given or k.arg not in ("num", "endpoint"):
            return None  # (retstep=, dtype=, axis=: left to Numba)
        given[k.arg] = k.value
    if "endpoint" not in given or len(node.args) > 4 or "stop" not in given:
        return None
    num = given.get("num", ast.Constant(50))
    args = [given["start"], given["stop"], num, given["endpoint"]]
    return ast.Call(ast.Name("linspace_ends", ast.Load()), args, [])


def _by_arrays(node, rank_of, kind_of) -> bool:
    """Whether `node` is a subscript whose index Numba cannot lower: a boolean mask beside
    another array (`x[m, idx]`), or one of two or more axes beside another item (`x[M, 0]`).
    (Integer arrays of any rank, several of them too, and a mask of one axis beside integers
    and slices it lowers.)"""
    if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Tuple):
        return False
    items = [i for i in node.slice.elts if not isinstance(i, (ast.Slice, ast.Constant))]
    arrays = [(rank_of(i), kind_of(i)) for i in items]
    arrays = [(r, k) for r, k in arrays if isinstance(r, int) and r >= 1]
    masks = [r for r, k in arrays if k == "b"]
    return bool(masks) and (len(arrays) >= 2 or max(masks) >= 2)


def _ellipsis_tuple(node: ast.expr) -> ast.expr:
    return ast.copy_location(ast.Tuple([node], ast.Load()), node)


def _negative_int(node: ast.expr) -> int | None:
    """The value of an expression of constants that is a negative integer (`-1`, or a rule's
    `-2 - (-2 != 0)`), else None."""
    value = constant_value(node)
    return value if type(value) is int and value < 0 else None


# joins whose list of operands Numba takes only as a tuple (np.stack's of numbers is np.array)
_JOINS_OF_TUPLES = (
    "np.stack",
    "np.concatenate",
    "np.hstack",
    "np.vstack",
    "np.dstack",
    "np.column_stack",
)

# joins whose operands NumPy gives a rank first (np.atleast_2d, 3d): Numba's need them of one
_AT_LEAST = {"np.vstack": 2, "np.row_stack": 2, "np.dstack": 3}

# a product's cotangent helper -> the operand that multiplies `g` where both are vectors
_VECTOR_PRODUCTS = {"dot_vjp_lhs": 2, "dot_vjp_rhs": 1, "matmul_vjp_lhs": 2, "matmul_vjp_rhs": 1}

# np.<name> -> (the helper jitted code calls instead, whether Numba has it over one axis)
_REDUCTIONS = {
    "np.max": ("max_over", False),
    "np.amax": ("max_over", False),
    "np.min": ("min_over", False),
    "np.amin": ("min_over", False),
    "np.prod": ("prod_over", False),
    "np.mean": ("mean_over", False),
    "np.sum": ("sum_over", True),
    "np.var": ("var_over", False),
    "np.std": ("std_over", False),
}
_SPREADS = ("var_over", "std_over")  # which take `ddof`


# Python's types as dtypes, as NumPy reads them (`int` is int64): Numba's np.full and
# np.identity ignore them (`np.full(3, 1.5, int)` gave floats, and a wrong gradient), and its
# np.zeros, np.ones, np.empty, np.eye and the `_like`s refuse them
_PYTHON_DTYPES = {t.__name__: np.dtype(t).type.__name__ for t in (int, float, complex)}
_PYTHON_DTYPES["bool"] = "bool_"


def _numpy_dtype(node: ast.Call, text: str) -> None:
    """A NumPy call's dtype spelled as a Python type (`np.full(n, v, int)`, `dtype=bool`) spelled
    as NumPy's (`np.int64`), which Numba reads as NumPy does."""
    callee = getattr(np, text[3:], None) if text.startswith("np.") else None
    if callee is None:
        return
    dtype = given_dtype(callee, node.args, {k.arg: k.value for k in node.keywords})
    if not (isinstance(dtype, ast.Name) and dtype.id in _PYTHON_DTYPES):
        return
    spelled = ast.Attribute(ast.Name("np", ast.Load()), _PYTHON_DTYPES[dtype.id], ast.Load())
    for k in node.keywords:
        k.value = spelled if k.value is dtype else k.value
    node.args = [spelled if a is dtype else a for a in node.args]


def _one_axis(axis: ast.expr) -> ast.expr:
    """`axis=(k,)` as `k`, one axis as NumPy reads either (Numba's reductions and the Numba
    forms of their helpers take an int); any other axis as it is."""
    if isinstance(axis, ast.Tuple) and len(axis.elts) == 1 and _int(axis.elts[0]) is not None:
        return axis.elts[0]
    return axis


def _int(node: ast.expr) -> int | None:
    """The int `node` writes (`1`, `-1`), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _int(node.operand)
        return None if value is None else -value
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _as_function(node: ast.Call, rank_of) -> ast.Call:
    """A reduction method of an array (`x.mean(axis=0)`, `x.sum(0, keepdims=True)`) as the
    NumPy function it is (`np.mean(x, axis=0)`), so it is lowered as that is; any other call as
    it is. Of a value of unknown rank too (a module `s2sad emit` writes knows no argument's):
    compiled, only an array has these methods; a function the resolver knows (`math.prod`)
    is no method."""
    func = node.func
    if (
        isinstance(func, ast.Attribute)
        and f"np.{func.attr}" in _REDUCTIONS
        and not (isinstance(func.value, ast.Name) and func.value.id in ("np", "numpy"))
        and (rank_of(func.value) is not None or ir.callee(func) is None)
    ):
        np_func = ast.Attribute(ast.Name("np", ast.Load()), func.attr, ast.Load())
        return ast.Call(np_func, [func.value, *node.args], node.keywords)
    return node


def _lowered_norm(node: ast.Call) -> ast.expr | None:
    """`np.linalg.norm(x, axis=k, keepdims=...)` (the 2-norm, `ord` None) as `norm_over(x, k,
    keepdims)`: Numba's takes no axis. None for any other norm."""
    given = dict(zip(("x", "ord", "axis", "keepdims"), node.args))
    for k in node.keywords:
        if k.arg in given or k.arg not in ("ord", "axis", "keepdims"):
            return None
        given[k.arg] = k.value
    axis = _one_axis(given.get("axis", ast.Constant(None)))
    ord = given.get("ord", ast.Constant(None))
    if "x" not in given or _int(axis) is None:
        return None
    if not (isinstance(ord, ast.Constant) and ord.value is None):
        return None
    keep = given.get("keepdims", ast.Constant(False))
    return ast.Call(ast.Name("norm_over", ast.Load()), [given["x"], axis, keep], [])


def _lowered_reduction(text: str, node: ast.Call, rank_of, method=False) -> ast.expr | None:
    """`np.max(x, axis=1, keepdims=True)` as `max_over(x, 1, True)`, for the reductions over an
    axis or with `keepdims` that Numba lacks; None for any other call, or one Numba has
    (`method`: `node` stands for a method call, `x.max()`, which Numba lacks for a number)."""
    if text not in _REDUCTIONS or len(node.args) > 3:
        return None
    name, has_axis = _REDUCTIONS[text]
    given = dict(zip(("a", "axis", "dtype"), node.args))
    takes = ("a", "axis", "keepdims", "dtype") + (("ddof",) if name in _SPREADS else ())
    for k in node.keywords:
        if k.arg not in takes or k.arg in given:
            return None  # out=, initial=, where=: left to Numba
        given[k.arg] = k.value
    dtype = given.pop("dtype", ast.Constant(None))
    if not (isinstance(dtype, ast.Constant) and dtype.value is None):
        if name not in _EXACT or "a" not in given or ast.unparse(dtype) not in _FLOATS:
            return None  # np.prod(a, dtype=...), an integer dtype=: left to Numba
        # Numba's np.sum ignores a narrower dtype= and its np.mean takes none: `a` cast first
        given["a"] = ast.Call(ast.Name("summed_in", ast.Load()), [given["a"], dtype], [])
    axis = _one_axis(given.get("axis", ast.Constant(None)))
    keep = given.get("keepdims", ast.Constant(False))
    ddof = given.get("ddof", ast.Constant(0))
    no_axis = isinstance(axis, ast.Constant) and axis.value is None
    plain = isinstance(keep, ast.Constant) and keep.value is False
    plain = plain and isinstance(ddof, ast.Constant) and ddof.value == 0
    if "a" not in given:
        return None
    # (of a number, or a value of unknown rank, a module `s2sad emit` writes: maybe a number,
    # which Numba's reductions and methods refuse and the helpers' forms take)
    known = rank_of(given["a"]) not in (None, 0)
    if plain and (no_axis or has_axis) and name not in _EXACT and known:
        if not (no_axis and name in _LANED):
            return None
    if plain and no_axis and rank_of(given["a"]) == 0 and name in _EXACT and not method:
        # of a number: nothing to add up (`summed_in(x, dtype)`'s rank is unknown here: a
        # number cast, summed as a number; Numba's np.sum takes a number, not its method)
        return None
    if plain and name in _EXACT and not (no_axis or type(constant_value(axis)) is int):
        return None  # a tuple of axes, or one known only when compiled: left to Numba
    spread = [ddof] if name in _SPREADS else []
    return ast.Call(ast.Name(name, ast.Load()), [given["a"], axis, keep, *spread], [])


# the float dtypes a sum's or mean's `dtype=` may name, as written (others are left to Numba)
_FLOATS = frozenset(
    f"{prefix}{name}"
    for prefix in ("np.", "numpy.")
    for name in ("float32", "float64", "single", "double")
) | {"float", "'float32'", "'float64'", "'f4'", "'f8'"}

# the reductions lowered even where Numba has them: its sums of float32 add in float32, one
# element after another, where NumPy's add pairwise (rules/folds.py adds them in float64)
_EXACT = ("sum_over", "mean_over")
# and the whole max and min, which Numba's compare one element after another (folds.py: in lanes)
_LANED = ("max_over", "min_over")

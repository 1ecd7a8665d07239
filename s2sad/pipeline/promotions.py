"""Arithmetic written so Numba computes in NumPy 2's result dtypes (lower.py, jit only).

A Python int meeting an integer array is weak in NumPy (NEP 50): `u * 200` of a uint8 `u` is
uint8 and wraps, `u + 1` of a uint64 one stays uint64; Numba computes both in int64 (float64).
Such an int is written `weak_int(200, u)`, which compiled code casts to the arrays' dtype
(rules/promotion.py). A float array or number meeting an integer array (`x * idx`) is written
`promoted(x, idx)`: NumPy computes a float32 `x` with an int64 `idx` in float64, where Numba's
ufuncs keep float32. Both are the identity in Python and where the dtypes agree already
(float64 with int64: the common case). Fused loops read `promoted(x, idx)` as `x` (their guard
`kept_dtype` holds only where NumPy keeps `x`'s dtype); a `weak_int` keeps its statement out of
them, as an element of a uint8 array times an int is an int64 in Numba, never wrapped. An
integer operation inside a larger expression is computed apart, `integers(u - weak_int(3, u))
* x`: Numba's one loop over an array expression would compute it on elements in int64. An
integer operation on elements of such arrays is cast back to their dtype, `int_in_dtype(u[2] *
weak_int(200, u), u)`: Numba computes numbers of 8 to 32 bits in int64, and never wraps. A
number of a type not known here (an argument `n`, a Python int or a NumPy one) is
`promoted(n, u)` too, which compiled code refuses where its type would decide the dtype.
"""

from __future__ import annotations

import ast
import copy

from .nodes import call_of, load_name as load
from .ranks import WEAK_OPS as _WEAK

_ARITHMETIC = _WEAK + (ast.Div, ast.Pow)

# NumPy's functions of two operands that promote as the operators do: `np.maximum(u, 3)` of a
# uint8 `u` is uint8, `np.maximum(x, idx)` of a float32 `x` and an int64 `idx` float64
_WEAK_CALLS = {
    f"np.{name}": name not in ("divide", "true_divide", "power", "arctan2", "hypot")
    for name in (
        "maximum minimum fmax fmin add subtract multiply floor_divide remainder divide "
        "true_divide power arctan2 hypot"
    ).split()
}


def dtype_kinds(shapes, norm):
    """`shapes.kind`, and "?" for an array whose dtype ranks.py does not follow and that is not
    certainly of floats (`c = m.sum(axis=0)` of an integer `m`, an argument of a module `s2sad
    emit` writes): an operand passed to `promoted` and `weak_int` as integer arrays are, whose
    compiled forms read its dtype (a float one changes nothing)."""
    unknown = {
        name
        for name in set(shapes.rank) | set(norm.params)
        if name not in norm.floats
        and shapes.get(name) != 0
        and not isinstance(shapes.kinds.get(name), str)
        and not shapes.ints.get(name)
        and name not in shapes.indices | shapes.lists
    }

    def kind(node):
        known = shapes.kind(node)
        base = node
        while isinstance(base, ast.Subscript):
            base = base.value
        if known is None and isinstance(base, ast.Name) and base.id in unknown:
            return "?"
        return known

    return kind


def in_numpy_dtypes(node: ast.expr, rank_of, kind_of, int_of) -> ast.expr:
    """`node` (its operands lowered already) with its Python int operand `weak_int(n, u)` where
    the other is an integer array, its float operand `promoted(x, idx)` where the other is
    integers computed from integer arrays, and an integer operation among its operands
    `integers(...)`. `kind_of` tells integer arrays ("i", "u"), masks ("b") and their elements;
    `int_of`, Python ints (literals, loop indices, `len`, shapes)."""
    rank_of = _through_helpers(rank_of)
    number = rank_of(node) == 0
    if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC):
        operands = [node.left, node.right]
        weak = isinstance(node.op, _WEAK) or (
            isinstance(node.op, ast.Pow) and _natural(node.right)  # (`u ** 2`, as ranks.py)
        )
    elif isinstance(node, ast.Call) and len(node.args) == 2 and not node.keywords:
        weak = _WEAK_CALLS.get(ast.unparse(node.func))
        if weak is None:
            return node
        operands = list(node.args)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _number_in_dtype(node, number, kind_of, int_of)  # (`-u[0]`: 254 of a uint8 2)
    else:
        return node
    operands = [_apart(o, rank_of, kind_of, int_of) for o in operands]
    for k, operand in enumerate(operands):
        other = operands[1 - k]
        arrays = _integer_arrays(other, kind_of, int_of)
        if not arrays:
            continue
        if weak and int_of(operand):
            operands[k] = call_of("weak_int", operand, *arrays)
        elif (
            _unknown_or_floats(operand, kind_of, int_of)
            and not _number(operand)
            and all(rank_of(a) for a in arrays if kind_of(a) == "?")  # (no number: an int's
        ):  # dtype would be its type's, where NumPy keeps float32 for a Python int)
            operands[k] = call_of("promoted", operand, *arrays)
    if isinstance(node, ast.BinOp):
        node.left, node.right = operands
    else:
        node.args = operands
    return _number_in_dtype(node, number, kind_of, int_of) if weak else node


def _number_in_dtype(node, number: bool, kind_of, int_of) -> ast.expr:
    """`int_in_dtype(node, *arrays)` for integer arithmetic on elements of integer arrays
    (`u[2] * weak_int(200, u)`): NumPy computes a uint8 element times a Python int in uint8,
    wrapping, where Numba widens numbers to int64; compiled, the result is cast back, at each
    operation (a `//` or `%` of the wrapped value differs from that of the wide one)."""
    if not number:
        return node
    arrays = _integer_arrays(node, kind_of, int_of)
    if not arrays:
        return node
    if _ring(node):  # (`+ - *` of wrapped numbers wrap as their wide ones: one cast, outside)
        same = [ast.unparse(a) for a in arrays]
        for field in ("left", "right", "operand"):
            inner = getattr(node, field, None)
            if (
                isinstance(inner, ast.Call)
                and ast.unparse(inner.func) == "int_in_dtype"
                and [ast.unparse(a) for a in inner.args[1:]] == same
                and _ring(inner.args[0])
            ):
                setattr(node, field, inner.args[0])
    return call_of("int_in_dtype", node, *arrays)


def _ring(node) -> bool:
    """`+`, `-`, `*`, a natural power or a sign: in an integer dtype, the wide result cast to it
    (mod 2**bits), whatever the operands' wide values were."""
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd))
    return isinstance(node, ast.BinOp) and (
        isinstance(node.op, (ast.Add, ast.Sub, ast.Mult))
        or (isinstance(node.op, ast.Pow) and _natural(node.right))
    )


_HELPERS = ("weak_int", "promoted", "integers", "int_in_dtype")


def _through_helpers(rank_of):
    """`rank_of` reading this pass's helpers as their first argument (the operands below a node
    are rewritten before it: `int_in_dtype(u[0] * 2, u) + 1` is a number as `u[0] * 2 + 1` is)."""

    class Unwrap(ast.NodeTransformer):
        def visit_Call(self, node):
            self.generic_visit(node)
            return node.args[0] if _helper_call(node) else node

    def rank(node):
        if not any(_helper_call(n) for n in ast.walk(node)):
            return rank_of(node)
        return rank_of(Unwrap().visit(copy.deepcopy(node)))

    return rank


def _helper_call(node) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _HELPERS
        and bool(node.args)
    )


def _unknown_or_floats(operand, kind_of, int_of) -> bool:
    """Whether `operand` is not known to be integers: floats, or arrays of dtypes not followed
    ("?": `f * c` of two such is `promoted(f, c) * promoted(c, f)`, each cast where the other
    widens it)."""
    names = _integers(operand, kind_of, int_of)
    return names is None or (
        bool(names) and all(kind_of(load(n)) == "?" for n in names) and not int_of(operand)
    )


def _apart(operand, rank_of, kind_of, int_of) -> ast.expr:
    """`integers(operand)` for an integer operation on arrays, else `operand`."""
    if isinstance(operand, ast.Call) and _WEAK_CALLS.get(ast.unparse(operand.func)) is None:
        return operand  # (`weak_int(3, u)`, `integers(...)`: nothing Numba's loop would widen)
    if (
        isinstance(operand, (ast.BinOp, ast.UnaryOp, ast.Call))
        and _integer_arrays(operand, kind_of, int_of)
        and rank_of(operand) != 0
    ):
        return call_of("integers", operand)
    return operand


def _integer_arrays(node, kind_of, int_of) -> list | None:
    """The integer and boolean arrays an integer value `node` is computed from, read for their
    dtypes (None where `node` is not known to be integers, [] for a Python int); one of them at
    least is an integer array, or it is no value an array's dtype decides."""
    found = _integers(node, kind_of, int_of)
    if found is None:
        return None
    names = list(dict.fromkeys(found))
    arrays = any(kind_of(load(n)) in ("i", "u", "?") for n in names)
    return [load(n) for n in names] if arrays else []


def _integers(node, kind_of, int_of) -> list | None:
    called = ast.unparse(node.func) if isinstance(node, ast.Call) else None
    if called == "weak_int" or int_of(node):
        return []
    if called in ("integers", "int_in_dtype"):
        return _integers(node.args[0], kind_of, int_of)
    if isinstance(node, ast.BinOp) and (
        isinstance(node.op, _WEAK) or (isinstance(node.op, ast.Pow) and _natural(node.right))
    ):
        operands = [node.left, node.right]
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operands = [node.operand]
    elif _WEAK_CALLS.get(called) and len(node.args) == 2 and not node.keywords:
        operands = node.args  # (`np.maximum(u, weak_int(3, u))`)
    else:
        operands = None
    if operands is not None:
        found = [_integers(o, kind_of, int_of) for o in operands]
        return None if None in found else [n for names in found for n in names]
    if kind_of(node) not in ("i", "u", "b", "?"):
        return None
    base = node
    while isinstance(base, ast.Subscript):  # (an element of one: its array's dtype)
        base = base.value
    if isinstance(base, ast.Name):
        return [base.id]
    names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]  # (`np.abs(u)`)
    return [n for n in names if kind_of(load(n)) in ("i", "u", "b", "?")]


def _natural(node) -> bool:
    """A non-negative int literal (or its `weak_int`): an exponent integer arrays keep their
    dtype under."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "weak_int" and node.args:
        node = node.args[0]
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 0


def _number(node) -> bool:
    """A Python number written in the code: weak in NumPy too, as Numba reads it."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant)

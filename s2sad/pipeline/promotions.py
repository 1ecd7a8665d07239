"""Arithmetic written so Numba computes in NumPy 2's result dtypes (lower.py, jit only).

A Python int meeting an integer array is weak in NumPy (NEP 50): `u * 200` of a uint8 `u` is
uint8 and wraps, `u + 1` of a uint64 one stays uint64; Numba computes both in int64 (float64).
Such an int is written `weak_int(200, u)`, which compiled code casts to the arrays' dtype
(rules/promotion.py). A float array or number meeting an integer array (`x * idx`) is written
`promoted(x, idx)`: NumPy computes a float32 `x` with an int64 `idx` in float64, where Numba's
ufuncs keep float32. Both are the identity in Python and where the dtypes agree already
(float64 with int64: the common case). Fused loops read `promoted(x, idx)` as `x` (their guard
`kept_dtype` holds only where NumPy keeps `x`'s dtype); a `weak_int` keeps its statement out of
them, as an element of a uint8 array times an int is an int64 in Numba, never wrapped.
"""

from __future__ import annotations

import ast

_WEAK = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_ARITHMETIC = _WEAK + (ast.Div, ast.Pow)


def in_numpy_dtypes(node: ast.BinOp, rank_of, kind_of, int_of) -> ast.BinOp:
    """`node` (its operands lowered already) with its Python int operand `weak_int(n, u)` where
    the other is an integer array, or its float operand `promoted(x, idx)` where the other is
    integers computed from integer arrays. `kind_of` tells integer arrays ("i", "u"), masks
    ("b") and their elements; `int_of`, Python ints (literals, loop indices, `len`, shapes)."""
    if not isinstance(node.op, _ARITHMETIC):
        return node
    for side in ("left", "right"):
        operand = getattr(node, side)
        if (
            isinstance(operand, (ast.BinOp, ast.UnaryOp))
            and _integer_arrays(operand, kind_of, int_of)
            and rank_of(operand) != 0
        ):
            setattr(node, side, ast.Call(load("integers"), [operand], []))
    for side, other in (("left", node.right), ("right", node.left)):
        operand = getattr(node, side)
        arrays = _integer_arrays(other, kind_of, int_of)
        if not arrays:
            continue
        if isinstance(node.op, _WEAK) and int_of(operand) and rank_of(other) != 0:
            setattr(node, side, ast.Call(load("weak_int"), [operand] + arrays, []))
        elif (
            _integer_arrays(operand, kind_of, int_of) is None
            and not _number(operand)
            and not rank_of(operand) == rank_of(other) == 0  # (Numba's numbers promote so)
        ):
            setattr(node, side, ast.Call(load("promoted"), [operand] + arrays, []))
    return node


def _integer_arrays(node, kind_of, int_of) -> list | None:
    """The integer and boolean arrays an integer value `node` is computed from, read for their
    dtypes (None where `node` is not known to be integers, [] for a Python int); one of them at
    least is an integer array, or it is no value an array's dtype decides."""
    found = _integers(node, kind_of, int_of)
    if found is None:
        return None
    names = list(dict.fromkeys(found))
    return [load(n) for n in names] if any(kind_of(load(n)) in ("i", "u") for n in names) else []


def _integers(node, kind_of, int_of) -> list | None:
    weak = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    if (weak and node.func.id == "weak_int") or int_of(node):
        return []
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "integers"
    ):
        return _integers(node.args[0], kind_of, int_of)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _WEAK):
        left, right = _integers(node.left, kind_of, int_of), _integers(node.right, kind_of, int_of)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _integers(node.operand, kind_of, int_of)
    if kind_of(node) not in ("i", "u", "b"):
        return None
    base = node
    while isinstance(base, ast.Subscript):  # (an element of one: its array's dtype)
        base = base.value
    if isinstance(base, ast.Name):
        return [base.id]
    names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]  # (`np.abs(u)`)
    return [n for n in names if kind_of(load(n)) in ("i", "u", "b")]


def _number(node) -> bool:
    """A Python number written in the code: weak in NumPy too, as Numba reads it."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant)


def load(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())

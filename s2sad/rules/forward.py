"""Tangent (JVP) rules for forward mode, by kind, so that most come from what is already known:

- elementwise: the VJP template itself, with the tangent in place of `g` and no `unbroadcast`
  (elementwise products commute with the transpose);
- linear: the same call applied to the tangent (`np.sum(x_dot, axis=1)`, `x_dot[i]`);
- multilinear: the sum over arguments of the call with that one argument's tangent;
- reduction: the VJP weights for a cotangent of ones, contracted with the tangent;
- explicit templates over the arguments, `ans` and `t` (the tangent of the argument).

Runtime helpers appear here too, so that s2sad's own generated gradients can be differentiated
again (Hessians are forward mode over reverse mode).
"""

from __future__ import annotations

import ast
import inspect
import math

import numpy as np

from .. import runtime as rt
from .indexing import getitem
from .registry import VJP, Rule

FORWARD: dict[int, tuple] = {}  # id(function) -> (kind, parameters, extra)
_ALIVE: list[object] = []


def _put(func, entry) -> None:
    FORWARD[id(func)] = entry
    _ALIVE.append(func)


def linear(func, *params: str) -> None:
    _put(func, ("linear", params, None))


def multilinear(func, *params: str) -> None:
    _put(func, ("multilinear", params, None))


def reduction(func, param: str) -> None:
    _put(func, ("reduction", (param,), None))


def explicit(func, **templates: str) -> None:
    """Tangent templates over the parameters, `ans`, `t` (the argument's tangent) and `elt` (its
    position in a list argument): none of those placeholders may be a parameter."""
    signature = signature_of(func)
    clash = {"t", "elt"} & set(signature.parameters if signature is not None else ())
    if clash:
        raise ValueError(f"tangent rule of {func!r}: parameter {clash.pop()} is a placeholder")
    _put(
        func,
        (
            "explicit",
            tuple(templates),
            {k: ast.parse(v, mode="eval").body for k, v in templates.items()},
        ),
    )


def kind_of(func):
    """The forward rule of `func`: an entry above, or ("elementwise", ...) from its VJP rule."""
    entry = FORWARD.get(id(func))
    if entry is not None:
        return entry
    rule = VJP.get(id(func))
    if rule is not None and rule.elementwise:
        return ("elementwise", tuple(rule.templates), None)
    return None


def signature_of(func) -> inspect.Signature | None:
    rule = VJP.get(id(func))
    if rule is not None:
        return rule.signature
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


# elementwise rules whose VJP template is also their tangent rule
for _f in (
    np.where,
    np.clip,
    np.copy,
    np.asarray,
    np.array,
    float,
    np.mod,
    math.log,
    math.atan2,
    math.hypot,
    math.pow,
):
    VJP[id(_f)].elementwise = True
for _f in (math.log, math.atan2, math.hypot, math.pow):  # on Python floats
    VJP[id(_f)].elementwise = True
# the math module's functions of two floats: their templates are the partial derivatives
for _f in (math.log, math.atan2, math.hypot, math.pow):
    VJP[id(_f)].elementwise = True

# linear maps: the tangent goes through the same call
for _f in (
    np.sum,
    np.mean,
    np.reshape,
    np.ravel,
    np.squeeze,
    np.expand_dims,
    np.transpose,
    np.swapaxes,
    np.moveaxis,
    np.trace,
    np.cumsum,
    np.diff,
    np.diagonal,
    np.roll,
):
    linear(_f, "a")
for _f in (np.tril, np.triu, np.flip):
    linear(_f, "m")
linear(np.diag, "v")
linear(np.concatenate, "arrays")
linear(np.stack, "arrays")
linear(np.broadcast_to, "array")
linear(getitem, "x")
for _f in (np.full, np.full_like):  # the fill value's tangent everywhere, 0 in integers
    explicit(_f, fill_value="np.broadcast_to(t, np.shape(ans)) * inexact(ans)")

# multilinear maps: one term per argument that carries a tangent
multilinear(np.matmul, "x1", "x2")
multilinear(np.dot, "a", "b")
multilinear(np.outer, "a", "b")
multilinear(np.einsum, "operands")

# reductions that are not linear: weights from the VJP rule, contracted with the tangent
for _f in (np.prod, np.max, np.min, np.amax, np.amin, np.var, np.std):
    reduction(_f, "a")
reduction(np.linalg.norm, "x")

explicit(np.cumprod, a="cumprod_jvp(t, a, axis=axis)")
explicit(np.linalg.inv, a="-ans @ t @ ans")
explicit(np.linalg.solve, a="solve_jvp_a(t, a, b, ans)", b="np.linalg.solve(a, t)")
explicit(rt.scatter_added, a="t", values="scatter_added(np.zeros_like(ans), index, t)")
explicit(np.linalg.det, a="ans * np.trace(np.linalg.solve(a, t), axis1=-2, axis2=-1)")

# s2sad's runtime helpers, for forward mode over generated gradient code
for _f, _p in (
    (rt.unbroadcast, "g"),
    (rt.expand_reduced, "g"),
    (rt.mean_vjp, "g"),
    (rt.getitem_vjp, "g"),
    (rt.last_written, "g"),
    (rt.concatenate_vjp, "g"),
    (rt.stack_vjp, "g"),
    (rt.trace_vjp, "g"),
    (rt.extremum_vjp, "g"),
    (rt.as_accumulator, "dx"),
    (rt.cumsum_vjp, "g"),
    (rt.diff_vjp, "g"),
    (rt.diagonal_vjp, "g"),
    (rt.diag_vjp, "g"),
):
    linear(_f, _p)
multilinear(rt.matmul_vjp_lhs, "g", "b")
multilinear(rt.matmul_vjp_rhs, "g", "a")
multilinear(rt.dot_vjp_lhs, "g", "b")
multilinear(rt.dot_vjp_rhs, "g", "a")
multilinear(rt.outer_vjp_lhs, "g", "b")
multilinear(rt.outer_vjp_rhs, "g", "a")
multilinear(rt.var_vjp, "g", "x")  # the centred x is linear in x
# helpers linear in the cotangent, not in the primal values they read (templates in runtime.py;
# `elt` is an operand's position in a list argument)
explicit(rt.inv_vjp, g="inv_vjp(t, ans)", ans="inv_vjp_jvp(t, g, ans)")
explicit(rt.det_vjp, g="det_vjp(t, a, ans)", a="det_vjp_jvp(t, g, a, ans)", ans="det_vjp(g, a, t)")
explicit(rt.solve_vjp_b, g="solve_vjp_b(t, a, b)", a="solve_vjp_b_jvp(t, g, a, b)")
explicit(
    rt.solve_vjp_a,
    g="solve_vjp_a(t, a, b, ans)",
    a="solve_vjp_a_jvp(t, g, a, b, ans)",
    ans="solve_outer(solve_vjp_b_unreduced(g, a, b), t, a, b)",
)
_NORM = "ord=ord, axis=axis, keepdims=keepdims"
explicit(
    rt.norm_vjp,
    g=f"norm_vjp(t, x, ans, {_NORM})",
    x=f"norm_vjp_jvp_x(t, g, x, ans, {_NORM})",
    ans=f"norm_vjp_jvp_ans(t, g, x, ans, {_NORM})",
)
explicit(
    rt.prod_vjp,  # ans is read for nothing but its shape
    g="prod_vjp(t, x, ans, axis=axis, keepdims=keepdims)",
    x="prod_vjp_jvp(t, g, x, ans, axis=axis, keepdims=keepdims)",
)
_STD = "axis=axis, ddof=ddof, keepdims=keepdims"
explicit(
    rt.std_vjp,
    g=f"std_vjp(t, x, ans, {_STD})",
    x=f"std_vjp_jvp_x(t, g, x, ans, {_STD})",
    ans=f"std_vjp_jvp_ans(t, g, x, ans, {_STD})",
)
explicit(
    rt.einsum_vjp,
    g="einsum_vjp(t, subscripts, operands, k)",
    operands="einsum_vjp_jvp(t, g, subscripts, operands, k, elt)",
)

__all__ = ["FORWARD", "kind_of", "signature_of", "Rule"]

# runtime helpers whose results are piecewise constant or constant: no tangent
from .registry import nondiff  # noqa: E402

nondiff(
    rt.zeros_like,
    rt.grad_seed,
    rt.even_split,
    rt.clip_passes,
    rt.solve_reads_vectors,
    rt.inexact,
)

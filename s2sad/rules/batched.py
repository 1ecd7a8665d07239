"""Batched rules: what the one-sweep Jacobian emits for each rule (see `s2sad/batched.py`).

Reverse mode instantiates a rule's template with a cotangent `g` that has one extra leading axis.
Elementwise templates (`g * np.cos(x)`) stay as they are: broadcasting aligns on the right. Calls
to runtime helpers become calls to their batched counterparts (`HELPERS`), and a rule whose plain
template calls NumPy on `g` itself has a batched template (`batched_vjp`). Anything else, a user's
rule above all, is applied row by row (`stack_rows`), which is slower but right: `batch_adjoint`
returns None for it.

Forward mode applies linear and multilinear functions to a batched tangent through `LINEAR` and
`MULTILINEAR`: batched counterparts of the NumPy functions, with NumPy's own signatures.
"""

from __future__ import annotations

import ast

import numpy as np

from .. import runtime as rt
from .indexing import getitem
from .registry import VJP
from .shape import inverse_axes

# runtime helper -> its batched counterpart (same arguments)
HELPERS = {
    "unbroadcast": "batched_unbroadcast",
    "expand_reduced": "batched_expand_reduced",
    "mean_vjp": "batched_mean_vjp",
    "prod_vjp": "batched_prod_vjp",
    "extremum_vjp": "batched_extremum_vjp",
    "var_vjp": "batched_var_vjp",
    "std_vjp": "batched_std_vjp",
    "norm_vjp": "batched_norm_vjp",
    "matmul_vjp_lhs": "batched_matmul_vjp_lhs",
    "matmul_vjp_rhs": "batched_matmul_vjp_rhs",
    "dot_vjp_lhs": "batched_dot_vjp_lhs",
    "dot_vjp_rhs": "batched_dot_vjp_rhs",
    "outer_vjp_lhs": "batched_outer_vjp_lhs",
    "outer_vjp_rhs": "batched_outer_vjp_rhs",
    "einsum_vjp": "batched_einsum_vjp",
    "trace_vjp": "batched_trace_vjp",
    "solve_vjp_a": "batched_solve_vjp_a",
    "solve_vjp_b": "batched_solve_vjp_b",
    "concatenate_vjp": "batched_concatenate_vjp",
    "stack_vjp": "batched_stack_vjp",
    "getitem_vjp": "batched_getitem_vjp",
}
# runtime helpers that are already right for a batched cotangent (elementwise in it, or linear
# algebra that broadcasts over leading axes)
BATCH_SAFE = {
    "last_written",
    "pow_vjp_exponent",
    "inv_vjp",
    "det_vjp",
    "cumsum_vjp",
    "cumprod_vjp",
    "diff_vjp",
    "diagonal_vjp",
    "diag_vjp",
}
# NumPy functions that act elementwise on a batched cotangent, or on its last two axes
_ELEMENTWISE_NP = {"where", "tril", "triu"}


def batched_vjp(func, **templates: str) -> None:
    """Give `func`'s rule templates for a batched cotangent (where the plain one calls NumPy on
    `g` itself)."""
    VJP[id(func)].batched_templates.update(
        {
            k: ast.parse(v, mode="eval").body if isinstance(v, str) else v
            for k, v in templates.items()
        }
    )


batched_vjp(rt.scatter_added, values="batched_unbroadcast(g[batched_index(g, index)], values)")


def _transpose_batched(args: dict) -> str:
    axes = args["axes"]
    if isinstance(axes, ast.Constant) and axes.value is None:
        return "batched_transpose(g)"
    return f"batched_transpose(g, {inverse_axes(axes)})"


for _f in (np.reshape, np.ravel):
    batched_vjp(_f, a="batched_reshape(g, np.shape(a), order=order)")
for _f in (np.squeeze, np.expand_dims):
    batched_vjp(_f, a="batched_reshape(g, np.shape(a))")
batched_vjp(np.transpose, a=_transpose_batched)
batched_vjp(np.swapaxes, a="batched_swapaxes(g, axis1, axis2)")
batched_vjp(np.moveaxis, a="batched_moveaxis(g, destination, source)")
batched_vjp(np.flip, m="batched_flip(g, axis=axis)")
batched_vjp(np.roll, a="batched_roll(g, np.negative(shift), axis=axis)")


def _is_g(node, g: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == g for n in ast.walk(node))


def _safe_call(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id.startswith("batched_") or func.id in BATCH_SAFE
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "np"
    ):
        return func.attr in _ELEMENTWISE_NP or isinstance(getattr(np, func.attr, None), np.ufunc)
    return False


class _Rename(ast.NodeTransformer):
    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in HELPERS:
            node.func = ast.Name(HELPERS[node.func.id], ast.Load())
        return node


def rename_helpers(expr: ast.expr) -> ast.expr:
    """`expr` calling the batched counterparts of the runtime helpers it calls."""
    return _Rename().visit(expr)


def batch_adjoint(expr: ast.expr, g: str) -> ast.expr | None:
    """`expr` (a template instantiated with the batched cotangent `g`) with its helpers renamed to
    their batched counterparts, or None when some operation on `g` has no batched form (then
    the caller applies the plain template row by row)."""
    expr = _Rename().visit(expr)
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            touches = any(_is_g(a, g) for a in node.args) or any(
                _is_g(k.value, g) for k in node.keywords
            )
            if touches and not _safe_call(node.func):
                return None
        elif isinstance(node, (ast.Subscript, ast.Attribute, ast.IfExp)) and _is_g(node, g):
            return None  # indexing or an attribute of g, or a branch that may drop it
    return expr


# ----------------------------------------------------------------------------- forward mode

# function -> batched counterpart taking the batched tangent where the function takes the value
LINEAR = {
    np.sum: "batched_sum",
    np.mean: "batched_mean",
    np.reshape: "batched_reshape",
    np.ravel: "batched_ravel",
    np.squeeze: "batched_squeeze",
    np.expand_dims: "batched_expand_dims",
    np.transpose: "batched_transpose",
    np.swapaxes: "batched_swapaxes",
    np.moveaxis: "batched_moveaxis",
    np.trace: "batched_trace",
    np.concatenate: "batched_concatenate",
    np.stack: "batched_stack",
    np.broadcast_to: "batched_broadcast_to",
    np.cumsum: "batched_cumsum",
    np.diff: "batched_diff",
    np.diagonal: "batched_diagonal",
    np.diag: "batched_diag",
    np.tril: "batched_tril",
    np.triu: "batched_triu",
    np.flip: "batched_flip",
    np.roll: "batched_roll",
    getitem: None,  # a subscript: `x_dot[:, index]`
}
# multilinear function -> batched counterpart with an argument naming the batched operand
MULTILINEAR = {
    np.matmul: "batched_matmul",
    np.dot: "batched_dot",
    np.outer: "batched_outer",
    np.einsum: "batched_einsum",
}
# explicit tangent templates that change with a batched tangent `t`
EXPLICIT = {
    np.linalg.solve: {
        "a": "batched_solve_jvp_a(t, a, b, ans)",
        "b": "batched_solve_jvp_b(t, a, b, ans)",
    },
    rt.scatter_added: {"a": "t", "values": "batched_scattered(t, index, a)"},
    np.full: {"fill_value": "batched_broadcast_to(t, np.shape(ans)) * inexact(ans)"},
    np.full_like: {"fill_value": "batched_broadcast_to(t, np.shape(ans)) * inexact(ans)"},
    # runtime helpers (second derivatives); those left out take a batched t as they are
    rt.solve_vjp_b: {
        "g": "batched_solve_vjp_b(t, a, b)",
        "a": "batched_solve_vjp_b_jvp(t, g, a, b)",
    },
    rt.solve_vjp_a: {
        "g": "batched_solve_vjp_a(t, a, b, ans)",
        "a": "batched_solve_vjp_a_jvp(t, g, a, b, ans)",
        "ans": "batched_solve_outer(solve_vjp_b_unreduced(g, a, b), t, a, b)",
    },
    rt.norm_vjp: {
        "g": "batched_norm_vjp(t, x, ans, ord=ord, axis=axis, keepdims=keepdims)",
        "ans": "batched_norm_vjp_jvp_ans(t, g, x, ans, ord=ord, axis=axis, keepdims=keepdims)",
    },
    rt.prod_vjp: {"g": "batched_prod_vjp(t, x, ans, axis=axis, keepdims=keepdims)"},
    rt.std_vjp: {
        "g": "batched_std_vjp(t, x, ans, axis=axis, ddof=ddof, keepdims=keepdims)",
        "x": "batched_std_vjp_jvp_x(t, g, x, ans, axis=axis, ddof=ddof, keepdims=keepdims)",
        "ans": "batched_std_vjp_jvp_ans(t, g, x, ans, axis=axis, ddof=ddof, keepdims=keepdims)",
    },
    rt.einsum_vjp: {
        "g": "batched_einsum_vjp(t, subscripts, operands, k)",
        "operands": "batched_einsum_vjp_jvp(t, g, subscripts, operands, k, elt)",
    },
}
EXPLICIT = {
    id(f): {k: ast.parse(v, mode="eval").body for k, v in d.items()} for f, d in EXPLICIT.items()
}
_ALIVE = list(LINEAR) + list(MULTILINEAR)
LINEAR = {id(f): name for f, name in LINEAR.items()}
MULTILINEAR = {id(f): name for f, name in MULTILINEAR.items()}

__all__ = ["HELPERS", "BATCH_SAFE", "batch_adjoint", "LINEAR", "MULTILINEAR", "EXPLICIT"]

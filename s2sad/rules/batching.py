"""Adjoint templates for a batched cotangent (the one-sweep Jacobian, `s2sad.jacobian`).

Reverse mode instantiates a rule's template with a cotangent `g` that has one extra leading axis.
Elementwise templates (`g * np.cos(x)`) stay as they are: broadcasting aligns on the right. Calls
to helpers become calls to their batched counterparts (`@batched_of`, rules/helpers.py), and a
rule whose plain template calls NumPy on `g` itself has batched templates (`defvjp(batched=)`).
Anything else, a user's rule above all, is applied row by row (`stack_rows`), which is slower but
right: `batch_adjoint` returns None for it. Forward mode's batched forms are in the op entries
(registry.LINEAR, MULTILINEAR, EXPLICIT).
"""

from __future__ import annotations

import ast

import numpy as np

from .helpers import BATCH_SAFE, BATCHED_NAME

# NumPy functions that act elementwise on a batched cotangent, or on its last two axes
_ELEMENTWISE_NP = {"where", "tril", "triu"}


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


class _RenameHelpers(ast.NodeTransformer):
    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in BATCHED_NAME:
            node.func = ast.Name(BATCHED_NAME[node.func.id], ast.Load())
        return node


def rename_helpers(expr: ast.expr) -> ast.expr:
    """`expr` calling the batched counterparts of the helpers it calls."""
    return _RenameHelpers().visit(expr)


def batch_adjoint(expr: ast.expr, g: str) -> ast.expr | None:
    """`expr` (a template instantiated with the batched cotangent `g`) with its helpers renamed to
    their batched counterparts, or None when some operation on `g` has no batched form (then
    the caller applies the plain template row by row)."""
    expr = _RenameHelpers().visit(expr)
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

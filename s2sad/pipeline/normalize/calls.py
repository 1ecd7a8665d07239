"""Which calls normalization inlines: the user's own functions (module-level, nested `def`s,
lambdas), not NumPy's, s2sad's, nor any function with a rule. Read by the flattener (to inline)
and by the memory tracker (an inlined call's result is followed through the inlined body).
"""

from __future__ import annotations

import ast
import inspect

import numpy as np

from ... import rules


def inlinable(func: ast.expr, resolver, local_names, local_funcs: dict):
    """The user function (or local def/lambda node) a call of `func` refers to, if s2sad inlines
    it; else None."""
    if isinstance(func, ast.Name) and func.id in local_funcs:
        return local_funcs[func.id]
    if isinstance(func, ast.Name) and func.id in local_names:
        return None
    if not isinstance(func, (ast.Name, ast.Attribute)):
        return None
    obj = resolver.resolve(func)
    if not inspect.isfunction(obj) or rules.lookup(obj) is not None or rules.is_nondiff(obj):
        return None
    module = getattr(obj, "__module__", "") or ""
    if module.split(".")[0] in ("numpy", "s2sad", "math"):
        return None
    return obj


def array_literals(callee, args: list[ast.expr], keywords: list[ast.keyword]) -> set[int]:
    """The list or tuple literals among a call's arguments that the callee's rule reads as one
    array (`np.mean([a, b])`: a NumPy function's parameter that does not take a list of arrays,
    as np.asarray reads it), by id. A user's rule gets the literal as it is."""
    rule = rules.lookup(callee) if callee is not None else None
    numpy = isinstance(callee, np.ufunc) or (getattr(callee, "__module__", "") or "").startswith(
        "numpy"
    )
    if rule is None or not numpy:
        return set()
    try:
        bound = rule.signature.bind(*args, **{k.arg: k.value for k in keywords if k.arg})
    except TypeError:
        return set()
    return {
        id(v)
        for p, v in bound.arguments.items()
        if p not in rule.seq and isinstance(v, (ast.List, ast.Tuple))
    }

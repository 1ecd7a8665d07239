"""Which calls normalization inlines: the user's own functions (module-level, nested `def`s,
lambdas), not NumPy's, s2sad's, nor any function with a rule. Read by the flattener (to inline)
and by the memory tracker (an inlined call's result is followed through the inlined body).
"""

from __future__ import annotations

import ast
import inspect

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

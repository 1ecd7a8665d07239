"""Which calls normalization inlines: the user's own functions (module-level, nested `def`s,
lambdas), not NumPy's, s2sad's, an installed library's, nor any function with a rule. Read by the
flattener (to inline) and by the memory tracker (an inlined call's result is followed through the
inlined body). A helper that returns a function it defines (a factory) is refused by name.
"""

from __future__ import annotations

import ast
import inspect
import types

import numpy as np

from ... import rules
from ...errors import S2SADError, UnsupportedSyntaxError
from ..libraries import is_library_code
from ..parse import parse_function


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
    call = getattr(type(obj), "__call__", None)
    if (
        not inspect.isroutine(obj)
        and inspect.isfunction(call)
        and not isinstance(obj, type)
        and rules.lookup(obj) is None
        and (call.__module__ or "").split(".")[0] not in ("numpy", "s2sad")
        and not is_library_code(call)
    ):
        obj = obj.__call__  # an object of the user's called like a function (`layer(x)`)
    if inspect.ismethod(obj) and rules.lookup(obj) is None:
        method = obj  # a method of the user's object (`model.loss(x)`) or a classmethod: its
        obj = obj.__func__  # function, inlined with `self` (`cls`) bound to it (inline.py)
        module = (getattr(obj, "__module__", "") or "").split(".")[0]
        if not inspect.isfunction(obj) or is_library_code(obj) or module in ("numpy", "s2sad"):
            return None
        return method if not rules.is_nondiff(obj) else None
    if not inspect.isfunction(obj) or rules.lookup(obj) is not None or rules.is_nondiff(obj):
        return None
    module = getattr(obj, "__module__", "") or ""
    if module.split(".")[0] in ("numpy", "s2sad", "math") or is_library_code(obj):
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


def refuse_factory(parsed, target, node: ast.Call) -> None:
    """Refuse a call of a helper that returns a function it defines (a factory's closure):
    s2sad inlines helpers' values, not functions made inside them."""
    made = returned_function(target)
    if made is None:
        return
    name = getattr(target, "__name__", "the helper")
    what = "a lambda" if made == "lambda" else f"the function `{made}`"
    raise parsed.error(
        UnsupportedSyntaxError,
        f"s2sad cannot yet differentiate through `{name}(...)`: it returns {what} it "
        "defines (a closure made by a factory)",
        node,
        hint=f"define that function inside the differentiated function instead (a nested "
        f"`def` or a lambda reading the values `{name}` would close over), or pass it in "
        "as an argument (then what it closes over is not differentiated)",
    )


def returned_function(func) -> str | None:
    """The name of a function `func` defines (a nested `def` or a lambda) and returns, or None
    (a global function only: its code holds the nested one's)."""
    code = getattr(func, "__code__", None)
    if code is None or not any(isinstance(c, types.CodeType) for c in code.co_consts):
        return None
    try:
        tree = parse_function(func).tree
    except S2SADError:
        return None
    own: list[ast.AST] = []  # the nodes of func's own body, not of the functions in it
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        own.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    made = {n.name for n in own if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    made |= {
        t.id
        for n in own
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Lambda)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    for node in own:
        if isinstance(node, ast.Return) and node.value is not None:
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for value in values:
                if isinstance(value, ast.Lambda):
                    return "lambda"
                if isinstance(value, ast.Name) and value.id in made:
                    return value.id
    return None

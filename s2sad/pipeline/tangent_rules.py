"""How a call's tangent rule reads its arguments, for forward mode (tangent.py): which names'
tangents reach its value, the instantiated explicit templates, and the batched forms helpers
already have for a batched cotangent."""

from __future__ import annotations

import ast

from .. import ir, runtime
from ..astcopy import clone
from .names import names_mentioned
from .nodes import load_name
from ..rules.helpers import BATCH_SAFE, BATCHED_NAME, RUNTIME
from ..rules.registry import kind_of, signature_of


def tuple_cotangent(op, kind: str, param: str, value, seq) -> bool:
    """Whether `value` is a tuple result's cotangent `(dw, dv)` (pipeline/reverse.py) passed as
    the `g` of its rule's helper (eigh_vjp), not a tuple of operands."""
    return (
        kind == "explicit"
        and param == "g"
        and param not in seq
        and isinstance(value, ast.Tuple)
        and getattr(op.func, "__name__", "").endswith("_vjp")
    )


def explicit_term(template, args: dict, target: str, t: ast.expr, k: int) -> ast.expr:
    """An explicit tangent template instantiated: the call's arguments (defaults it left out
    spelled as constants), `ans` (the result, unless the function has a parameter of that name,
    as runtime helpers do), `t` (the tangent) and `elt` (the position of the operand in a list
    argument)."""
    mapping = {}
    for n, v in args.items():
        if isinstance(v, ast.AST):
            mapping[n] = clone(v)
        elif v is None or isinstance(v, (bool, int, float, str)):
            mapping[n] = ast.Constant(v)
    if "ans" not in args:
        mapping["ans"] = load_name(target)
    mapping["t"] = t
    mapping["elt"] = ast.Constant(k)
    return ReplaceNames(mapping).visit(clone(template))


class ReplaceNames(ast.NodeTransformer):
    """Each name in `mapping` becomes a copy of the expression it maps to."""

    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Name(self, node):
        return clone(self.mapping[node.id]) if node.id in self.mapping else node


def cotangent_form(func, param: str) -> str | None:
    """The name of a helper's form for a batched cotangent (its `@batched_of`, or the helper
    itself where it is batch-safe), if `param` is the cotangent it is linear in: that form is
    then also right for a batched tangent of `param`."""
    name = getattr(func, "__name__", None)
    if RUNTIME.get(name) is not func:
        return None
    signature = signature_of(func)
    if signature is None or next(iter(signature.parameters), None) != param:
        return None
    return BATCHED_NAME.get(name) or (name if name in BATCH_SAFE else None)


def tangent_reads(op) -> set[str]:
    """The names whose tangents reach `op`'s value: those passed to the parameters its tangent
    rule follows. The rest carry none (`expand_reduced(g, x)` reads `x` for its shape only), so
    a value computed from them alone has a zero tangent and needs no tangent statement. Kept:
    what the rule cannot place (a receiver, a call that does not bind) and the arguments it has
    no rule for, which forward mode refuses by name."""
    entry = kind_of(op.func) if op.func is not None else None
    signature = signature_of(op.func) if entry is not None else None
    if signature is None:
        return op.reads
    try:
        bound = signature.bind(*op.args, **op.keywords)
    except TypeError:
        return op.reads
    placed, followed = set(), set()
    for param, value in bound.arguments.items():
        nodes = value if isinstance(value, (tuple, list)) else [value]
        if isinstance(value, dict):
            nodes = list(value.values())
        names = names_mentioned([n for n in nodes if isinstance(n, ast.AST)])
        placed |= names
        if param in entry[1]:
            followed |= names
    fixed = set().union(*op.fixed.values()) if op.fixed else set()
    return op.reads & (followed | fixed) | (op.reads - placed)


def ranked(op, rank) -> bool:
    """Whether every name `op` passes is an array or a number of known rank (not a tuple
    result, whose batched tangent has its own form: rules/decomposition_tangents.py)."""
    values = list(op.args) + list(op.keywords.values())
    return all(rank(v) is not None for v in values if isinstance(v, ast.Name))


def copies_written(value, expr, dots: set) -> bool:
    """Whether `t = snapshot(y)`, `snapshot(y.T)` (a copy of an array written in place later:
    generated gradient code) has a tangent `expr` reading `y_dot` itself or a view of it
    (`batched_transpose(y_dot)`), one of the written arrays' tangents `dots`, which the write's
    tangent would change before `t_dot` is read: its tangent must be a copy too."""
    if not (isinstance(value, ast.Call) and ir.callee(value.func) is runtime.snapshot):
        return False
    if isinstance(expr, ast.Call) and getattr(expr.func, "id", "") == "snapshot":
        return False
    return bool(names_mentioned([expr]) & dots)

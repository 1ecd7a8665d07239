"""Writes into integer and boolean arrays, whose dtype the arguments' kinds in the transform's
key decide (ranks.py): NumPy truncates a value stored into one, and refuses to update one in
place with floats. s2sad rewrites `x += v` as `x_1 = in_place(x + v, x)`, which raises NumPy's
error when it runs; where the kinds tell it, such an update is refused here, before the call,
and a store's derivative, zero, is made
so before activity analysis. A store into an array not certainly of floats either (a helper's
result, `np.cumsum(idx)`, `idx * n` of an int `n`) has its derivative weighed at run time by
`inexact(y)`: 1.0 for floats, 0.0 where NumPy truncates.
"""

from __future__ import annotations

import ast

import numpy as np

from .. import ir
from ..astcopy import clone, walk_nodes
from ..rules.helpers import RUNTIME
from ..errors import UnsupportedSyntaxError
from .classify import spelled_dtype, ufunc_name
from .ranks import _BOTTOM, _LIKE, Ranks, _join, call_parts, infer_ranks


def drop_truncating_stores(stmts: list[ast.stmt], params: dict, ops: list, wrt) -> None:
    """A store into an integer or boolean array (`y[i] = v` with `y = np.zeros_like(idx)`)
    truncates `v`: piecewise constant, its derivative is zero. Such a store is made one of a
    constant, so neither the adjoint nor the tangent reads through it. A store into an array
    whose dtype is not known here, neither integers nor certainly floats, is marked
    `weighed`: the reverse and tangent passes multiply its derivative by `inexact(y)`."""
    stores = [op for op in ops if op.kind == "setitem" and op.operands]
    if stores:
        kinds = infer_ranks(stmts, params).kinds
        floats = certain_floats(stmts, params, wrt)
        for op in stores:
            if isinstance(kinds.get(op.target), str):
                op.operands.clear()
            elif op.target not in floats:
                op.weighed = True


def certain_floats(stmts: list[ast.stmt], params: dict, wrt) -> set[str]:
    """The names every assignment of which certainly holds floats (or complex numbers): the
    largest such set, so a loop's `y = y * 2` of a float `y` stays one. A parameter counts where
    differentiated (input_checks.py refuses integers there) or an array the key says has no
    integer or boolean kind; a name bound any other way than `name = value` counts nowhere."""
    nodes = list(walk_nodes(ast.Module(stmts, [])))
    assigns = [
        (n.targets[0].id, n)
        for n in nodes
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
    ]
    named = {id(stmt.targets[0]) for _, stmt in assigns}
    other = {
        n.id
        for n in nodes
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and id(n) not in named
    }
    given = {
        n for n, r in params.items() if isinstance(r, int) and not isinstance(r, bool) and r > 0
    }
    floats = (set(wrt) | given | {name for name, _ in assigns}) - other
    while True:
        wrong = {name for name, stmt in assigns if not _float_value(stmt, stmt.value, floats)}
        if not wrong & floats:
            return floats
        floats -= wrong


_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.MatMult, ast.Pow, ast.Mod, ast.FloorDiv)
# arrays made in float64 where no dtype is given (s2sad's `zeros_like` in code s2sad made:
# a cotangent, float64 at least)
_MADE = {np.zeros, np.ones, np.empty, np.eye, np.identity, np.linspace}
_MADE |= {RUNTIME["zeros_like"], RUNTIME["sum_zeros_like"]}


def _float_value(stmt, value: ast.expr, floats: set[str]) -> bool:
    """Whether `value` certainly holds floats, given the names of `floats` do: NumPy's result
    type of a float with anything (`idx * 1.0`, `x / 1`, `np.where(m, x, 0)`), an array made
    with no dtype or a float one, a copy of a float array."""

    def floating(node) -> bool:
        if isinstance(node, (ast.List, ast.Tuple)):
            return any(floating(e) for e in node.elts)
        return _float_value(None, node, floats)

    if isinstance(value, ast.Constant):
        return isinstance(value.value, (float, complex))
    if isinstance(value, ast.Name):
        return value.id in floats
    if isinstance(value, ast.BinOp):
        if isinstance(value.op, ast.Div):
            return True
        return isinstance(value.op, _ARITHMETIC) and (floating(value.left) or floating(value.right))
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, (ast.USub, ast.UAdd)):
        return floating(value.operand)
    if isinstance(value, ast.Subscript):  # an element or a part of a float array
        return floating(value.value)
    if not isinstance(value, ast.Call):
        return False
    callee, args, dtype = call_parts(value)
    if dtype is not None:
        if isinstance(dtype, ast.Attribute) and dtype.attr == "dtype":  # dtype=x.dtype
            return floating(dtype.value)
        spelled = spelled_dtype(dtype)
        return spelled is not None and spelled.kind in "fc"
    if callee in _MADE:
        return True
    if callee is np.full:
        return len(args) > 1 and floating(args[1])
    if callee in _LIKE:  # the dtype of the array it is like
        return bool(args) and floating(args[0])
    op = ir.op(stmt) if stmt is not None and ir.is_classified(stmt) else None
    if op is None or op.kind != "rule":
        return False
    bound = op.bound
    return any(floating(bound.args[p]) for p in op.bound.rule.differentiable(bound))


def refuse_float_updates(parsed, params: dict, wrt) -> tuple:
    """`x += v` (or `-=`, `*=`, `/=`, ...) on an integer or boolean array `x` with a float `v`
    raises NumPy's UFuncTypeError (casting rule 'same_kind'); s2sad's `x = x + v` would run
    and give floats, so it is refused with NumPy's reason. `v` counts as a float where it
    certainly is one: a float literal in it, a float array argument or an element or slice of
    one, a parameter differentiated (input_checks.py refuses an int there), or a true division.
    A number parameter not differentiated may be an int or a float: the key ranks both 0 (a
    key telling them apart would transform `f(x, 2)` and `f(x, 2.0)` twice), so this returns
    (its name as the user wrote it, the refusal's fields) for each, checked at each call
    (`refuse_float_numbers`)."""
    updates = [
        n
        for n in walk_nodes(parsed.tree)
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
    ]
    if not updates:
        return ()
    kinds = _kinds(parsed.tree, params, getattr(parsed.func, "__globals__", {}))
    checked = []
    for node in updates:
        kind = kinds.get(node.target.id)
        if not isinstance(kind, str):
            continue
        if isinstance(node.op, ast.Div) or _floats(node.value, params, set(wrt)):
            raise _float_update(parsed, node, kind)
        error = _float_update(parsed, node, kind)
        fields = {k: getattr(error, k) for k in ("what", "file", "line", "source", "hint")}
        for name in _numbers(node.value, params):
            checked.append((parsed.original.get(name, name), fields))
    return tuple(checked)


def _float_update(parsed, node: ast.AugAssign, kind: str) -> UnsupportedSyntaxError:
    name = node.target.id
    dtype = "bool" if kind == "b" else "an integer dtype"
    return parsed.error(
        UnsupportedSyntaxError,
        f"`{parsed.text_of(node)}` updates `{name}`, an array of {dtype}, in place with "
        f"floats: NumPy raises UFuncTypeError here (cannot cast ufunc "
        f"'{ufunc_name(type(node.op))}' output from float64 to {dtype} "
        "with casting rule 'same_kind')",
        node,
        hint=f"make `{name}` a float array (`{name} = {name}.astype(float)`), or write "
        f"`{name} = {ast.unparse(ast.BinOp(node.target, node.op, node.value))}` for "
        "a new float array",
    )


class FloatNumberError(UnsupportedSyntaxError):
    """refuse_float_numbers' refusal, made at a call: the code made without the arguments'
    ranks (s2sad.hessian's second try) knows no integer array to refuse it, so a caller that
    tries that code after a refusal re-raises this one instead."""


def refuse_float_numbers(checked: tuple, arguments: dict) -> None:
    """Raise refuse_float_updates' refusal where a number it returned is a float this call
    (an int, a bool stays accepted, as NumPy accepts it)."""
    for name, fields in checked:
        value = arguments.get(name)
        if isinstance(value, (float, complex, np.inexact)) or (
            isinstance(value, np.ndarray) and value.dtype.kind in "fc"
        ):
            raise FloatNumberError(**fields)


def _floats(node: ast.expr, params: dict, wrt: set[str]) -> bool:
    """Whether `node` certainly has a float dtype (see refuse_float_updates)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (float, complex))
    if isinstance(node, ast.Name):  # an array argument with no integer or boolean kind
        rank = params.get(node.id)
        array = isinstance(rank, int) and not isinstance(rank, bool) and rank > 0
        return array or node.id in wrt
    if isinstance(node, ast.Subscript):  # an element or a view of one (`x[0]`, `x[1:]`)
        return _floats(node.value, params, wrt)
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Div):
            return True
        return _floats(node.left, params, wrt) or _floats(node.right, params, wrt)
    if isinstance(node, ast.UnaryOp):
        return _floats(node.operand, params, wrt)
    return False


def _numbers(node: ast.expr, params: dict) -> set[str]:
    """The number parameters (rank 0, an int or a float) whose kind `node`'s arithmetic
    takes: a float among them makes `node` a float."""
    if isinstance(node, ast.Name):
        return {node.id} if params.get(node.id) == 0 else set()
    if isinstance(node, ast.BinOp):
        return _numbers(node.left, params) | _numbers(node.right, params)
    if isinstance(node, ast.UnaryOp):
        return _numbers(node.operand, params)
    return set()


def _kinds(tree: ast.FunctionDef, params: dict, scope: dict) -> dict:
    """The kinds of the arrays the user's code binds by `name = value` (ranks.py's, read
    before normalization, which rewrites `x += v` as an assignment of unknown kind): a name
    bound any other way (a loop's target, unpacking) has none."""
    ranks, other = Ranks(params, set()), set()
    local = set(params) | {
        n.id for n in walk_nodes(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    scope = {k: v for k, v in scope.items() if k not in local}  # (a parameter named as a global)
    assigns, updated = [], {id(n.target) for n in walk_nodes(tree) if isinstance(n, ast.AugAssign)}
    for n in walk_nodes(tree):
        if id(n) in updated:
            continue  # (an update in place keeps the dtype; an assignment is read above)
        elif (
            isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
        ):
            assigns.append((n.targets[0].id, _resolved(n.value, scope)))
            updated.add(id(n.targets[0]))
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            other.add(n.id)
    for _ in range(len(assigns) + 1):  # a name bound from another settles in a round
        kinds = {k: v for k, v in ranks.kinds.items() if k in params}
        for name, value in assigns:
            kinds[name] = (
                None if name in other else _join(kinds.get(name, _BOTTOM), ranks.kind(value))
            )
        if kinds == ranks.kinds:
            break
        ranks.kinds = kinds
    return ranks.kinds


def _resolved(value: ast.expr, scope: dict) -> ast.expr:
    """A copy of `value` whose calls of a module's functions (`np.zeros_like`) know them, as
    normalization's would: the user's tree is left as it is."""
    value = clone(value)
    for n in walk_nodes(value):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            base = n.func.value
            if isinstance(base, ast.Name) and base.id in scope:
                func = getattr(scope[base.id], n.func.attr, None)
                if func is not None and not isinstance(scope[base.id], type):
                    ir.set_callee(n.func, func)
    return value

"""Writes into integer and boolean arrays, whose dtype the arguments' kinds in the transform's
key decide (ranks.py): NumPy truncates a value stored into one, and refuses to update one in
place with floats. s2sad rewrites `x += v` as `x = x + v`, which would promote instead, so
such an update is refused here as NumPy refuses it, and a store's derivative, zero, is made
so before activity analysis. An array whose kind is unknown is taken for a float one.
"""

from __future__ import annotations

import ast

from .. import ir
from ..astcopy import clone, walk_nodes
from ..errors import UnsupportedSyntaxError
from .ranks import _BOTTOM, Ranks, _join, infer_ranks

_CAST_NAMES = {
    ast.Add: "add",
    ast.Sub: "subtract",
    ast.Mult: "multiply",
    ast.Div: "divide",
    ast.FloorDiv: "floor_divide",
    ast.Mod: "remainder",
    ast.Pow: "power",
}


def drop_truncating_stores(stmts: list[ast.stmt], params: dict, ops: list) -> None:
    """A store into an integer or boolean array (`y[i] = v` with `y = np.zeros_like(idx)`)
    truncates `v`: piecewise constant, its derivative is zero. Such a store is made one of a
    constant, so neither the adjoint nor the tangent reads through it."""
    stores = [op for op in ops if op.kind == "setitem" and op.operands]
    if stores:
        kinds = infer_ranks(stmts, params).kinds
        for op in stores:
            if isinstance(kinds.get(op.target), str):
                op.operands.clear()


def refuse_float_updates(parsed, params: dict) -> None:
    """`x += v` (or `-=`, `*=`, `/=`, ...) on an integer or boolean array `x` with a float `v`
    raises NumPy's UFuncTypeError (casting rule 'same_kind'); s2sad's `x = x + v` would run
    and give floats, so it is refused with NumPy's reason. `v` counts as a float where it
    certainly is one: a float literal in it, a float array argument or an element or slice of
    one, or a true division."""
    updates = [
        n
        for n in walk_nodes(parsed.tree)
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
    ]
    if not updates:
        return
    kinds = _kinds(parsed.tree, params, getattr(parsed.func, "__globals__", {}))
    for node in updates:
        kind = kinds.get(node.target.id)
        if isinstance(kind, str) and (isinstance(node.op, ast.Div) or _floats(node.value, params)):
            name = node.target.id
            dtype = "bool" if kind == "b" else "an integer dtype"
            raise parsed.error(
                UnsupportedSyntaxError,
                f"`{parsed.text_of(node)}` updates `{name}`, an array of {dtype}, in place with "
                f"floats: NumPy raises UFuncTypeError here (cannot cast ufunc "
                f"'{_CAST_NAMES.get(type(node.op), 'add')}' output from float64 to {dtype} "
                "with casting rule 'same_kind')",
                node,
                hint=f"make `{name}` a float array (`{name} = {name}.astype(float)`), or write "
                f"`{name} = {ast.unparse(ast.BinOp(node.target, node.op, node.value))}` for "
                "a new float array",
            )


def _floats(node: ast.expr, params: dict) -> bool:
    """Whether `node` certainly has a float dtype (see refuse_float_updates)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (float, complex))
    if isinstance(node, ast.Name):  # an array argument with no integer or boolean kind
        rank = params.get(node.id)
        return isinstance(rank, int) and not isinstance(rank, bool) and rank > 0
    if isinstance(node, ast.Subscript):  # an element or a view of one (`x[0]`, `x[1:]`)
        return _floats(node.value, params)
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Div):
            return True
        return _floats(node.left, params) or _floats(node.right, params)
    if isinstance(node, ast.UnaryOp):
        return _floats(node.operand, params)
    return False


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

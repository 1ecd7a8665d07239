"""Optimize stage, NumPy mode: a matrix product's right cotangent summed over the columns its
operand was broadcast along, summed before the product. GMM's `Qx = Q @ (x.T - mu[:, :, None])`
gives `mu`'s cotangent as a (K, d, n) product `Q.T @ dQx` summed over its n columns; the sum
commutes with the product, so one column is multiplied instead of n:

    dcentred = matmul_vjp_rhs(dQx, Q, centred)
    dcentred_item = -unbroadcast(dcentred, centred_item)
->  dcentred_item = -matmul_vjp_rhs_to(dQx, Q, centred, centred_item)

(`matmul_vjp_rhs_to`, rules/products.py, checks at each call that `y` has one column, else it
is the two calls.) Only where the product's cotangent is made once, at the top level, and read
once, by that unbroadcast, with nothing in between writing its operands. The numbers agree with
the product-then-sum's within rounding (a sum of n products against a product of a sum), so,
like buffer reuse, this is for the user's own NumPy-mode gradients, not for code s2sad
differentiates again or compares with its jitted form: pipeline/driver.py runs it with reuse."""

from __future__ import annotations

import ast
from collections import Counter

from ..astcopy import walk_nodes
from .nodes import assigned_name

_PRODUCT, _SUM, _FUSED = "matmul_vjp_rhs", "unbroadcast", "matmul_vjp_rhs_to"


def sum_first(blocks: list[list]) -> list[list]:
    """`blocks` (the primal, then the adjoint: top-level statements, in order) with each
    product's cotangent that only an unbroadcast reads made by `matmul_vjp_rhs_to` there."""
    flat = [s for block in blocks for s in block]
    if not all(isinstance(s, ast.AST) for s in flat):
        return blocks
    loads, stores = Counter(), Counter()
    for stmt in flat:
        for node in walk_nodes(stmt):
            if isinstance(node, ast.Name):
                (loads if isinstance(node.ctx, ast.Load) else stores)[node.id] += 1
    dropped: set[int] = set()
    for i, stmt in enumerate(flat):
        name = assigned_name(stmt)
        if name is None or not _call_of(stmt.value, _PRODUCT, 3) or loads[name] != 1:
            continue
        if stores[name] != 1:
            continue
        operands = {a.id for a in stmt.value.args if isinstance(a, ast.Name)}
        if len(operands) != 3:
            continue
        for later in flat[i + 1 :]:
            use = _unbroadcast_of(later, name)
            if use is not None:
                fused = ast.Call(ast.Name(_FUSED, ast.Load()), [*stmt.value.args, use.args[1]], [])
                use.func, use.args = fused.func, fused.args
                dropped.add(id(stmt))
                break
            if name in _mentioned(later) or operands & _written(later):
                break
    out, start = [], 0
    for block in blocks:
        out.append([s for s in flat[start : start + len(block)] if id(s) not in dropped])
        start += len(block)
    return out


def _call_of(node, func: str, nargs: int) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == func
        and len(node.args) == nargs
        and not node.keywords
    )


def _unbroadcast_of(stmt, name: str) -> ast.Call | None:
    """The call `unbroadcast(name, y)` in `stmt`, where it is the statement's only mention of
    `name` (`y` a name)."""
    for node in walk_nodes(stmt):
        if (
            _call_of(node, _SUM, 2)
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == name
            and isinstance(node.args[1], ast.Name)
        ):
            return node
    return None


def _mentioned(stmt) -> set[str]:
    return {n.id for n in walk_nodes(stmt) if isinstance(n, ast.Name)}


def _written(stmt) -> set[str]:
    """The names a statement binds or writes into (`t[i] = v`, `t += v`), and any name in a
    compound statement (a loop or branch: treated as writing all it mentions)."""
    if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
        return _mentioned(stmt)
    if isinstance(stmt, ast.Expr):
        return _mentioned(stmt)  # a call such as add_at(t, i, v) may write into its arguments
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    out = set()
    for target in targets:
        out |= _mentioned(target)
    return out

"""In-place accumulation for Numba: a matrix-vector product's matrix cotangent (an outer
product) that the adjoint makes only to add into an array at an index is added there as it is
made, with no array of its own:

    dQ_k = matmul_vjp_lhs(dz, Q_k, v)        ->  add_outer_at(dQs, k, dz, v)
    ...
    add_at(dQs, k, dQ_k)

(`matmul_vjp_rhs(g, v, M)` likewise, as `add_outer_at(dM, idx, v, g)`). The addition moves up
to where the cotangent was made, so the statements between must not mention the array or
assign a name its index reads; the cotangent must be read nowhere else. The GMM's loop over
points and components made a d x d array per pair this way. Runs on the jitted adjoint after
lowering (not on builds with threads, whose additions go to per-thread rows); it consumes and
produces statement lists."""

from __future__ import annotations

import ast
from collections import Counter

from ..astcopy import walk_nodes
from .names import names_mentioned
from .nodes import assigned_name

# helper -> (the matrix operand, the vector operand, which of (g, vector) comes first)
_OUTER = {"matmul_vjp_lhs": (1, 2, ("g", "b")), "matmul_vjp_rhs": (2, 1, ("a", "g"))}


def accumulate_in_place(stmts: list, rank_of, keep=frozenset()) -> list:
    """`stmts` with each outer-product cotangent added into its array where it is made (not
    one named in `keep`: the gradients returned, names read after the sweep)."""
    loads = Counter(
        n.id
        for n in walk_nodes(ast.Module(stmts, []))
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    )
    stores = Counter(
        n.id
        for n in walk_nodes(ast.Module(stmts, []))
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    )
    return _block(
        stmts, rank_of, lambda name: loads[name] == 1 and stores[name] == 1 and name not in keep
    )


def _block(stmts: list, rank_of, once) -> list:
    out = list(stmts)
    i = 0
    while i < len(out):
        stmt = out[i]
        if isinstance(stmt, (ast.For, ast.While, ast.If)):
            stmt.body = _block(stmt.body, rank_of, once)
            stmt.orelse = _block(stmt.orelse, rank_of, once)
        factors = _outer_factors(stmt, rank_of)
        if factors is not None and once(stmt.targets[0].id):
            j = _added_at(out, i, stmt.targets[0].id)
            if j is not None:
                target, index = out[j].value.args[:2]
                call = ast.Call(ast.Name("add_outer_at", ast.Load()), [target, index, *factors], [])
                new = ast.copy_location(ast.Expr(call), stmt)
                for key, value in vars(stmt).items():  # its origin and marks
                    if key not in stmt._fields and key not in stmt._attributes:
                        setattr(new, key, value)
                out[i] = new
                del out[j]
        i += 1
    return out


def _outer_factors(stmt, rank_of) -> list | None:
    """(u, v) where `stmt` is `X = matmul_vjp_lhs(g, A, b)` with A a matrix and b a vector
    (u, v = g, b), or `X = matmul_vjp_rhs(g, a, B)` (u, v = a, g); else None."""
    if not (
        assigned_name(stmt) is not None
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id in _OUTER
        and len(stmt.value.args) == 3
        and not stmt.value.keywords
        and all(isinstance(a, ast.Name) for a in stmt.value.args)
    ):
        return None
    matrix, vector, order = _OUTER[stmt.value.func.id]
    args = dict(zip(("g", "a", "b"), stmt.value.args))
    if rank_of(stmt.value.args[matrix]) != 2 or rank_of(stmt.value.args[vector]) != 1:
        return None
    return [args[k] for k in order]


def _added_at(stmts: list, i: int, name: str) -> int | None:
    """The position of `add_at(D, index, name)` after `stmts[i]` in the same block, where the
    statements between mention no D and assign no name the index reads; else None."""
    for j in range(i + 1, len(stmts)):
        stmt = stmts[j]
        if _is_add_at(stmt, name):
            target, index = stmt.value.args[:2]
            if not _simple_index(index):
                return None
            between = stmts[i + 1 : j]
            if target.id in names_mentioned(between):
                return None
            written = {
                n.id
                for s in between
                for n in walk_nodes(s)
                if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
            }
            if written & names_mentioned([index]):
                return None
            return j
    return None


def _is_add_at(stmt, name: str) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id == "add_at"
        and len(stmt.value.args) == 3
        and isinstance(stmt.value.args[0], ast.Name)
        and isinstance(stmt.value.args[2], ast.Name)
        and stmt.value.args[2].id == name
    )


def _simple_index(index) -> bool:
    """An index of names, constants, arithmetic and slices: its value cannot change unless a
    name in it is assigned."""
    for node in walk_nodes(index):
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id == "slice"
        ):
            return False
        if isinstance(node, (ast.Subscript, ast.Attribute)):
            return False
    return True

"""In-place accumulation for Numba: a matrix-vector product's matrix cotangent (an outer
product) that the adjoint makes only to add into an array at an index is added there as it is
made, with no array of its own:

    dQ_k = matmul_vjp_lhs(dz, Q_k, v)        ->  add_outer_at(dQs, k, dz, v)
    ...
    add_at(dQs, k, dQ_k)

(`matmul_vjp_rhs(g, v, M)` likewise, as `add_outer_at(dM, idx, v, g)`). The addition moves up
to where the cotangent was made, so the statements between must not mention the array or
assign a name its index reads; the cotangent must be read nowhere else. The GMM's loop over
points and components made a d x d array per pair this way.

A max's or min's cotangent over a whole array, added to a cotangent the adjoint made
(`dx = dx + extremum_vjp(da, x, a)`), is added into it in place (`dx = extremum_added(dx, da,
x, a)`, rules/accumulate.py): nonzero at the extremum alone, it made two arrays of `x`'s size
and the sum a third (lse's gradient). Taken only at the top level of the adjoint, where `dx`
holds an array made there by arithmetic (`dz = g * e; dx = dz`: nothing else's memory), which
the statements between only copy by name or read into numbers, and which no other name holding
it is read after (`dz`, nor a returned gradient).

Runs on the jitted adjoint after lowering (not on builds with threads, whose additions go to
per-thread rows); it consumes and produces statement lists."""

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


def extrema_in_place(stmts: list, rank_of, keep=frozenset()) -> list:
    """`stmts` with each top-level `dx = dx + extremum_vjp(g, x, a)` whose `dx` owns its array
    (see the module docstring; not one named in `keep` but `dx`) written `dx = extremum_added(dx,
    g, x, a)`."""
    out = list(stmts)
    for e, stmt in enumerate(out):
        call = _extremum_sum(stmt, rank_of)
        if call is None:
            continue
        d = stmt.targets[0].id
        sharing = _owners(out, e, d, rank_of)
        if sharing is None:
            continue
        others = sharing - {d}
        if others & (names_mentioned(out[e + 1 :]) | set(keep)):
            continue  # another name of the array is read after: it must not change
        new = ast.Assign(
            [ast.Name(d, ast.Store())],
            ast.Call(ast.Name("extremum_added", ast.Load()), [ast.Name(d, ast.Load())] + call, []),
        )
        out[e] = _copied(new, stmt)
    return out


def _extremum_sum(stmt, rank_of) -> list | None:
    """[g, x, a] where `stmt` is `d = d + extremum_vjp(g, x, a)` (either order) of names, `g`
    and `a` numbers and `d` of `x`'s rank; else None."""
    name = assigned_name(stmt)
    value = stmt.value if name is not None else None
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return None
    for d, call in ((value.left, value.right), (value.right, value.left)):
        if not (isinstance(d, ast.Name) and d.id == name and isinstance(call, ast.Call)):
            continue
        if not (
            isinstance(call.func, ast.Name)
            and call.func.id == "extremum_vjp"
            and len(call.args) == 3
            and not call.keywords
            and all(isinstance(a, ast.Name) for a in call.args)
        ):
            continue
        g, x, a = call.args
        rank = rank_of(x)
        if rank_of(g) == 0 and rank_of(a) == 0 and isinstance(rank, int) and rank >= 1:
            if rank_of(d) == rank:
                return list(call.args)
    return None


def _owners(stmts: list, e: int, d: str, rank_of) -> set[str] | None:
    """The names holding the array `d` holds at `stmts[e]`, where it was made at the top level
    by arithmetic (a new array: never a view, nor an argument) and the statements since only
    copied it by name (`dx = dz`, `dx = in_dtype_of(dz, x)`) or read numbers from it; else
    None."""
    current, k = d, e - 1
    while k >= 0:  # back along the copies to where the array was made
        stmt = stmts[k]
        if current in names_mentioned([stmt]) and not isinstance(stmt, ast.Assign):
            return None
        if assigned_name(stmt) == current:
            copied = _copy_of(stmt.value)
            if copied is not None:
                current = copied
            elif _made_new(stmt.value) and rank_of(stmt.targets[0]) == rank_of(
                ast.Name(d, ast.Load())
            ):
                break
            else:
                return None
        k -= 1
    if k < 0:
        return None
    sharing = {current}
    for stmt in stmts[k + 1 : e]:  # forward: every name of the array, every read of it
        mentioned = names_mentioned([stmt]) & sharing
        name = assigned_name(stmt)
        if name is not None and _copy_of(stmt.value) in sharing:
            sharing.add(name)
        elif name is not None and name in sharing and not mentioned - {name}:
            sharing.discard(name)  # bound to something else, read from nothing of the array
        elif mentioned and not (name is not None and _number_of(stmt, sharing, rank_of)):
            return None
    return sharing if d in sharing else None


def _copy_of(value) -> str | None:
    """The name `value` copies by name: `z`, or `in_dtype_of(z, x)` (z itself where of x's
    dtype, else a new array)."""
    if isinstance(value, ast.Name):
        return value.id
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "in_dtype_of"
        and value.args
        and isinstance(value.args[0], ast.Name)
    ):
        return value.args[0].id
    return None


def _made_new(value) -> bool:
    """Arithmetic making an array (in NumPy and Numba, a new one: no operand's memory)."""
    if isinstance(value, ast.BinOp):
        return not isinstance(value.op, ast.MatMult)
    return isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub)


def _number_of(stmt, sharing: set[str], rank_of) -> bool:
    """Whether `stmt` reads the array only into a number (`s = sum_over(dz, None, False)`):
    assigned a rank-0 value, the array read by name as a call's argument, never subscripted."""
    if rank_of(stmt.targets[0]) != 0 or stmt.targets[0].id in sharing:
        return False
    for node in walk_nodes(stmt.value):
        if isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.value, ast.Name):
            if node.value.id in sharing and not (
                isinstance(node, ast.Attribute) and node.attr in ("shape", "ndim", "dtype")
            ):
                return False
    called = {id(a) for n in walk_nodes(stmt.value) if isinstance(n, ast.Call) for a in n.args}
    return all(
        id(n) in called
        for n in walk_nodes(stmt.value)
        if isinstance(n, ast.Name) and n.id in sharing
    )


def _copied(new: ast.stmt, old: ast.stmt) -> ast.stmt:
    """`new` in place of `old`, with its origin and the marks the stages left on it."""
    for key, value in vars(old).items():
        if key not in old._fields and key not in old._attributes:
            setattr(new, key, value)
    return ast.copy_location(new, old)


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

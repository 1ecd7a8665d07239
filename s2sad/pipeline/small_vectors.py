"""Optimize stage, NumPy mode: the Python costs of small state vectors read and built element
by element (an ODE's `np.array([y[1], -omega**2 * y[0]])`, whose gradient was 12x its primal).

The cotangents of several element reads of one array are added into one array. An RK4 step
reads `y[0]`, `y[1]`, `y[1]` of a 2-vector; each read's adjoint made an array of zeros and a
sum's array:

    dy5 = getitem_vjp(drhs_item3, y5, 0)
    dy5 = dy5 + getitem_vjp(drhs_item2, y5, 1)
->  dy5 = getitem_added(dy5, drhs_item2, y5, 1)

(`getitem_added`, rules/element_adds.py, adds into `dy5` where it is a float array of y5's
shape and dtype at each call, else is the sum.) Only where the name's value was made by a
statement before it in the block, `getitem_vjp` or `getitem_added`, and nothing between them
mentions it, so no other name holds that array.

A vector of numbers the normalizer stacks (`np.stack([a, b])`, each of rank 0) is made by
`np.array([a, b])` as the user wrote it: the same array and dtype, at a tenth of np.stack's
Python cost. Like buffer reuse, both are for the user's own NumPy-mode gradients:
pipeline/driver.py runs them with reuse."""

from __future__ import annotations

import ast

from ..astcopy import walk_nodes

_READ, _ADDED = "getitem_vjp", "getitem_added"


def small_vectors(primal: list, adjoint: list, rank_of) -> list:
    """The adjoint with element reads' cotangents added into one array; the primal's stacks of
    numbers made by np.array, in place."""
    numbers_arrayed(primal, rank_of)
    return scatter_adds(adjoint)


def numbers_arrayed(block: list, rank_of) -> None:
    """Write each `t = np.stack([a, b, ...])` of numbers in `block` (nested blocks too) as
    `np.array([a, b, ...])`."""
    for node in walk_nodes(ast.Module(block, [])):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and _is_np(node.value.func, "stack")
            and len(node.value.args) == 1
            and not node.value.keywords
            and isinstance(node.value.args[0], (ast.List, ast.Tuple))
            and node.value.args[0].elts
            and all(rank_of(e) == 0 for e in node.value.args[0].elts)
        ):
            node.value.func = ast.Attribute(ast.Name("np", ast.Load()), "array", ast.Load())


def _is_np(func, attr: str) -> bool:
    return (
        isinstance(func, ast.Attribute)
        and func.attr == attr
        and isinstance(func.value, ast.Name)
        and func.value.id == "np"
    )


def scatter_adds(block: list) -> list:
    """`block` with each sum of a fresh element-read cotangent and another read's written as
    `getitem_added`, in loops' and branches' bodies too."""
    made: set[str] = set()  # names bound to a fresh array no statement since mentioned
    out = []
    for stmt in block:
        for field_ in ("body", "orelse"):
            inner = getattr(stmt, field_, None)
            if isinstance(inner, list) and inner and isinstance(stmt, (ast.For, ast.While, ast.If)):
                setattr(stmt, field_, scatter_adds(inner))
        name, call = _sum_of_read(stmt)
        if name is not None and name in made:  # (rewritten in place: its annotations stay)
            stmt.value = ast.copy_location(_call(_ADDED, [name, *call.args]), stmt.value)
        mentioned = {n.id for n in walk_nodes(stmt) if isinstance(n, ast.Name)}
        made -= mentioned
        fresh = _fresh(stmt)
        if fresh is not None:
            made.add(fresh)
        out.append(stmt)
    return out


def _call(func: str, args: list) -> ast.Call:
    return ast.Call(
        ast.Name(func, ast.Load()),
        [ast.Name(a, ast.Load()) if isinstance(a, str) else a for a in args],
        [],
    )


def _named_call(node, funcs: tuple) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in funcs
        and not node.keywords
    )


def _fresh(stmt) -> str | None:
    """The name `stmt` binds to an array a read's cotangent helper made (`d = getitem_vjp(...)`)
    where its arguments do not mention it."""
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and _named_call(stmt.value, (_READ, _ADDED))
    ):
        name = stmt.targets[0].id
        args = stmt.value.args[1:] if stmt.value.func.id == _ADDED else stmt.value.args
        if not any(isinstance(n, ast.Name) and n.id == name for a in args for n in walk_nodes(a)):
            return name
    return None


def _sum_of_read(stmt) -> tuple[str | None, ast.Call | None]:
    """(`d`, the call) for `d = d + getitem_vjp(g, x, k)` whose call does not mention `d`."""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.BinOp)
        and isinstance(stmt.value.op, ast.Add)
        and isinstance(stmt.value.left, ast.Name)
        and stmt.value.left.id == stmt.targets[0].id
        and _named_call(stmt.value.right, (_READ,))
        and len(stmt.value.right.args) == 3
    ):
        return None, None
    name, call = stmt.targets[0].id, stmt.value.right
    if any(isinstance(n, ast.Name) and n.id == name for n in walk_nodes(call)):
        return None, None
    return name, call

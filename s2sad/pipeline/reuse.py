"""Optimize stage, NumPy mode: buffer reuse. An elementwise statement writes its result into the
array of a temporary that has died, `c = np.add(a, b, out=spare(t, a, b))`, instead of
allocating and sweeping a fresh one (a large gradient then stays in memory it already touched).

Only the user's own `grad` and `value_and_grad` get it (the transform cache's `reuse` flag): the
Hessian and the compose rules run forward mode over gradient code, which refuses `out=`, and
transform it without reuse.

What a statement `c = <elementwise>` taking the array of `t` needs, proven here:
- `t` is bound once in the function, at its top level, by arithmetic, a float ufunc, a product or
  a reduction: an array of its own that no other name shares;
- every read of `t`'s elements is an operand of arithmetic, a float ufunc, a comparison, a
  product or a reduction, or a write into `t`: none makes a view or a second name of it. Any other
  read (`v = t`, `t[1:]`, `t.T`, a helper's argument, a loop or branch mentioning it, the values
  returned) leaves `t` alone;
- the statement comes at or after the last of those reads (an operand there is safe: a ufunc
  reads each element before it writes that one), and reads after it of `t`'s shape and dtype
  only (`unbroadcast(g, t)`) still see them;
- the statement is at the function's top level, not in a loop or branch, its operands are names
  and numbers, and its result has `t`'s rank.
Checked at each call by `spare` (rules/common.py): `t` is a float array owning its memory and
large enough to be worth it, and the result has exactly its shape and dtype; else `out=None`,
a fresh array as without reuse.
"""

from __future__ import annotations

import ast

import numpy as np

from .. import ir
from ..astcopy import walk_nodes
from .shape_reads import shape_only_reads

_OPERATORS = {
    ast.Add: "add",
    ast.Sub: "subtract",
    ast.Mult: "multiply",
    ast.Div: "divide",
    ast.Pow: "power",
}
# ufuncs that take floats of one dtype to that dtype, elementwise
_UFUNCS = frozenset(
    "add subtract multiply divide true_divide power negative positive absolute abs fabs square "
    "sqrt cbrt reciprocal exp exp2 expm1 log log2 log10 log1p sin cos tan arcsin arccos arctan "
    "arctan2 sinh cosh tanh arcsinh arccosh arctanh hypot maximum minimum fmax fmin logaddexp "
    "logaddexp2 sign copysign deg2rad rad2deg".split()
)
# functions whose result shares memory with none of their positional arguments
_FRESH = frozenset("sum mean prod max min amax amin dot matmul vdot inner outer".split())
_SAFE, _SHAPE, _UNSAFE = "safe", "shape", "unsafe"
_GUARD = "spare"


def reuse_buffers(blocks: list[list], rank_of, keep: set[str], primal_of: dict) -> list[list]:
    """`blocks`: the function's top-level statements, in the order they run (the primal, then
    the adjoint), with what the function returns read after them; `rank_of(expr)`: its rank, or
    None; `keep`: names never reused (parameters, outputs, gradients, the seed); `primal_of`:
    each adjoint name's primal, whose shape it has. Returns the blocks with elementwise
    statements writing into dying temporaries' arrays."""
    flat = [s for block in blocks for s in block]
    if not all(isinstance(s, ast.AST) for s in flat):
        return blocks
    free_at = _buffers(flat, keep)
    shape = _shape_keys(flat, rank_of, primal_of)
    ready: dict[int, list[str]] = {}  # rank -> buffers free now, the latest freed last
    by_index: dict[int, list[str]] = {}
    for name, index in free_at.items():
        by_index.setdefault(index, []).append(name)
    rewritten = {}
    for i, stmt in enumerate(flat):
        for name in by_index.get(i, ()):
            rank = rank_of(ast.Name(name, ast.Load()))
            if rank:
                ready.setdefault(rank, []).append(name)
        if not _rewritable(stmt):
            continue
        rank = rank_of(stmt.targets[0]) or rank_of(stmt.value)
        pool = ready.get(rank) if rank else None
        if not pool:
            continue
        operands = _operands(stmt.value)
        # one known to have the result's shape, else an operand dying here (likely to), else
        # the latest freed
        want = shape(stmt.targets[0].id)
        buffer = next((b for b in reversed(pool) if shape(b) == want), None)
        buffer = buffer or next((b for b in reversed(pool) if b in operands), pool[-1])
        pool.remove(buffer)
        rewritten[id(stmt)] = _with_out(stmt, buffer, operands)
    out, start = [], 0
    for block in blocks:
        out.append([rewritten.get(id(s), s) for s in flat[start : start + len(block)]])
        start += len(block)
    return out


def _buffers(flat: list, keep: set[str]) -> dict[str, int]:
    """The temporaries whose arrays may be reused, each with the index of the first statement
    that may take it."""
    shape_ids = shape_only_reads(flat)
    defined: dict[str, int] = {}
    bindings: dict[str, int] = {}
    last: dict[str, int] = {}
    refused: set[str] = set(keep)
    for i, stmt in enumerate(flat):
        for name, kind in _mentions(stmt, shape_ids):
            if kind == "bind":
                bindings[name] = bindings.get(name, 0) + 1
                if _fresh_definition(stmt):
                    defined[name] = i
                else:
                    refused.add(name)
            elif kind == _UNSAFE or name not in defined:
                refused.add(name)
            elif kind == _SAFE:
                last[name] = i
    return {
        name: max(last.get(name, i), i + 1)
        for name, i in defined.items()
        if name not in refused and bindings[name] == 1
    }


def _shape_keys(flat: list, rank_of, primal_of: dict):
    """A function giving each name a key shared by names known to have one shape: an adjoint
    has its primal's, and an elementwise result that of its operands of its own rank, where
    those share one key (others broadcast into it). A hint for choosing a buffer: `spare`
    checks the shape at each call."""
    same: dict[str, str] = {}

    def key(name: str) -> str:
        seen = set()
        while name not in seen:
            seen.add(name)
            name = same.get(name) or primal_of.get(name) or name
        return name

    for stmt in flat:
        if not _rewritable(stmt):
            continue
        rank = rank_of(stmt.value)
        operands = _operands(stmt.value)
        ranks = [rank_of(ast.Name(n, ast.Load())) for n in operands]
        if rank is None or None in ranks:
            continue
        keys = {key(n) for n, r in zip(operands, ranks) if r == rank}
        if len(keys) == 1:
            same[stmt.targets[0].id] = keys.pop()
    return key


def _mentions(stmt, shape_ids):
    """(name, kind) for each name the top-level statement mentions: "bind" (its target), "safe"
    (an operand of arithmetic, a ufunc or a reduction, or written into), "shape" (read for its
    shape and dtype only) or "unsafe"."""
    if not isinstance(stmt, (ast.Assign, ast.AugAssign)):
        return [(n.id, _UNSAFE) for n in walk_nodes(stmt) if isinstance(n, ast.Name)]
    parent = {}
    for node in walk_nodes(stmt):
        for child in ast.iter_child_nodes(node):
            parent[id(child)] = node
    found = []
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    for node in walk_nodes(stmt):
        if not isinstance(node, ast.Name):
            continue
        if isinstance(node.ctx, ast.Store):
            if isinstance(stmt, ast.AugAssign):
                found.append((node.id, _SAFE))  # `t += g`: written in place
            else:
                single = len(targets) == 1 and targets[0] is node
                found.append((node.id, "bind" if single else _UNSAFE))
        elif id(node) in shape_ids:
            found.append((node.id, _SHAPE))
        elif _written(node, parent, targets):
            found.append((node.id, _SAFE))  # `t[i] = v`, `t[i] += v`
        else:
            found.append((node.id, _SAFE if _operand(node, parent, stmt) else _UNSAFE))
    return found


def _written(node, parent, targets) -> bool:
    """`node` is the array a subscript target writes into."""
    up = parent.get(id(node))
    while isinstance(up, ast.Subscript) and up.value is node:
        if up in targets:
            return True
        node, up = up, parent.get(id(up))
    return False


def _operand(node, parent, stmt) -> bool:
    """`node` is read only as an operand of operations that make new arrays, up to the value
    the statement assigns."""
    child, up = node, parent.get(id(node))
    if up is stmt:  # `a[i] = t`, `a += t` copy its elements; `v = t` makes a second name
        return isinstance(stmt, ast.AugAssign) or all(
            isinstance(t, ast.Subscript) for t in stmt.targets
        )
    while up is not stmt:
        if isinstance(up, ast.Call):
            if child not in up.args[: _inputs(up)]:
                return False  # (a positional `out`, a keyword, the function)
        elif not isinstance(up, (ast.BinOp, ast.Compare)) and not (
            isinstance(up, ast.UnaryOp) and isinstance(up.op, ast.USub)
        ):
            return False
        child, up = up, parent.get(id(up))
    return child is stmt.value


def _np_name(call: ast.Call) -> str | None:
    func = call.func
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "np"
        and not any(isinstance(a, ast.Starred) for a in call.args)
    ):
        return func.attr
    return None


def _inputs(call: ast.Call) -> int:
    """How many leading positional arguments of `call` are inputs of a float ufunc or of a
    function making a fresh array (`_FRESH`); 0 for any other call, or one passing `out=`."""
    name = _np_name(call)
    if any(k.arg == "out" or k.arg is None for k in call.keywords):
        return 0
    if name in _UFUNCS:
        return getattr(np, name).nin
    return 2 if name in _FRESH else 0  # np.sum(a, axis), np.dot(a, b): no `out` among them


def _ufunc(node) -> str | None:
    """The float ufunc `node` calls with positional operands only."""
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    name = _np_name(node)
    if name not in _UFUNCS or getattr(np, name).nin != len(node.args):
        return None
    return name


def _elementwise(node) -> bool:
    """Arithmetic and float ufuncs over names and numbers."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float)
    if isinstance(node, ast.BinOp):
        return type(node.op) in _OPERATORS and _elementwise(node.left) and _elementwise(node.right)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.USub) and _elementwise(node.operand)
    return _ufunc(node) is not None and all(_elementwise(a) for a in node.args)


def _fresh_definition(stmt) -> bool:
    """`t = <value>` makes an array no other name holds: elementwise, a product or a reduction."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return False
    value = stmt.value
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.MatMult):
        return True
    if isinstance(value, ast.Call) and _np_name(value) in _FRESH:
        return _inputs(value) >= len(value.args)
    return _rewritable(stmt)


def _rewritable(stmt) -> bool:
    """`c = <one operation over elementwise operands>`, which takes `out=`."""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    ):
        return False
    value = stmt.value
    return isinstance(value, (ast.BinOp, ast.UnaryOp, ast.Call)) and _elementwise(value)


def _operands(value) -> list[str]:
    """The names an elementwise expression reads, once each, in order."""
    names: list[str] = []
    todo = [value]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name):
            if node.id not in names:
                names.append(node.id)
        elif isinstance(node, ast.BinOp):
            todo += [node.right, node.left]
        elif isinstance(node, ast.UnaryOp):
            todo.append(node.operand)
        elif isinstance(node, ast.Call):
            todo += reversed(node.args)
    return names


def _with_out(stmt: ast.Assign, buffer: str, operands: list[str]) -> ast.Assign:
    """`c = np.op(a, b, out=spare(t, a, b))` for `c = a op b`."""
    value = stmt.value
    guard = ast.Call(
        ast.Name(_GUARD, ast.Load()), [ast.Name(n, ast.Load()) for n in [buffer] + operands], []
    )
    out = [ast.keyword("out", guard)]
    if isinstance(value, ast.BinOp):
        func, args = _OPERATORS[type(value.op)], [value.left, value.right]
    elif isinstance(value, ast.UnaryOp):
        func, args = "negative", [value.operand]
    else:
        func, args = value.func.attr, list(value.args)
    call = ast.Call(ast.Attribute(ast.Name("np", ast.Load()), func, ast.Load()), args, out)
    new = ast.Assign([ast.Name(stmt.targets[0].id, ast.Store())], call)
    return ir.copy_origin(new, stmt)

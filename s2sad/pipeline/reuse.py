"""Optimize stage, NumPy mode: buffer reuse. An elementwise statement writes its result into the
array of a temporary that has died, `c = np.add(a, b, out=spare(t, a, b))`, instead of
allocating and sweeping a fresh one (a large gradient then stays in memory it already touched).

Only the user's own `grad`, `value_and_grad` and `vjp` get it (the transform cache's `reuse`
flag): the Hessian and the compose rules run forward mode over gradient code, which refuses
`out=`, and transform it without reuse. A pullback closure gets it only for the arrays its own
adjoint makes (pipeline/driver.py keeps the primal's names out of it).

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
from .nodes import assigned_name
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
_BIND, _SAFE, _SHAPE, _UNSAFE = "bind", "safe", "shape", "unsafe"
_KIND = {True: _SAFE, False: _UNSAFE}
_GUARD = "spare"
_LOOK = 32  # how many of the latest freed buffers a statement considers


def reuse_buffers(blocks: list[list], rank_of, keep: set[str], primal_of: dict) -> list[list]:
    """`blocks`: the function's top-level statements, in the order they run (the primal, then
    the adjoint), with what the function returns read after them; `rank_of(expr)`: its rank, or
    None; `keep`: names never reused (parameters, outputs, gradients, the seed); `primal_of`:
    each adjoint name's primal, whose shape it has. Returns the blocks with elementwise
    statements writing into dying temporaries' arrays."""
    flat = [s for block in blocks for s in block]
    if not all(isinstance(s, ast.AST) for s in flat):
        return blocks
    ranks: dict[str, int | None] = {}

    def rank(name: str) -> int | None:
        if name not in ranks:
            ranks[name] = rank_of(ast.Name(name, ast.Load()))
        return ranks[name]

    rewritable = {id(s) for s in flat if _rewritable(s)}
    free_at = _buffers(flat, keep, rank, rewritable)
    shape = _shape_keys(flat, rank, primal_of, rewritable)
    ready: dict[int, list[str]] = {}  # rank -> buffers free now, the latest freed last
    by_index: dict[int, list[str]] = {}
    for name, index in free_at.items():
        by_index.setdefault(index, []).append(name)
    rewritten = {}
    for i, stmt in enumerate(flat):
        for name in by_index.get(i, ()):
            if rank(name):
                ready.setdefault(rank(name), []).append(name)
        if id(stmt) not in rewritable:
            continue
        pool = ready.get(rank(stmt.targets[0].id) or rank_of(stmt.value))
        if not pool:
            continue
        operands = _operands(stmt.value)
        # of the latest freed (a bounded look, for long functions), one known to have the
        # result's shape, else an operand dying here (likely to), else the latest
        want, recent = shape(stmt.targets[0].id), pool[: -_LOOK - 1 : -1]
        buffer = next((b for b in recent if shape(b) == want), None)
        buffer = buffer or next((b for b in recent if b in operands), pool[-1])
        pool.remove(buffer)
        rewritten[id(stmt)] = _split(stmt, buffer, rank) or [_with_out(stmt, buffer, operands)]
    out, start = [], 0
    for block in blocks:
        out.append([r for s in flat[start : start + len(block)] for r in rewritten.get(id(s), [s])])
        start += len(block)
    return out


def _buffers(flat: list, keep: set[str], rank, rewritable: set[int]) -> dict[str, int]:
    """The temporaries whose arrays may be reused, each with the index of the first statement
    that may take it."""
    shape_ids = shape_only_reads(flat)
    defined: dict[str, int] = {}
    bindings: dict[str, int] = {}
    last: dict[str, int] = {}
    refused: set[str] = set(keep)
    for i, stmt in enumerate(flat):
        for name, kind in _mentions(stmt, shape_ids, rank):
            if kind == _BIND:
                bindings[name] = bindings.get(name, 0) + 1
                if id(stmt) in rewritable or _fresh_definition(stmt):
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


def _shape_keys(flat: list, rank, primal_of: dict, rewritable: set[int]):
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
        if id(stmt) not in rewritable:
            continue
        target = stmt.targets[0].id
        operands = _operands(stmt.value)
        if rank(target) is None or any(rank(n) is None for n in operands):
            continue
        keys = {key(n) for n in operands if rank(n) == rank(target)}
        if len(keys) == 1:
            same[target] = keys.pop()
    return key


def _mentions(stmt, shape_ids: set[int], rank) -> list[tuple[str, str]]:
    """(name, kind) for each name the top-level statement mentions: "bind" (its target), "safe"
    (an operand of arithmetic, a ufunc, a comparison, a product or a reduction, or written
    into), "shape" (read for its shape and dtype only) or "unsafe"."""
    if not isinstance(stmt, (ast.Assign, ast.AugAssign)):
        return [(n.id, _UNSAFE) for n in walk_nodes(stmt) if isinstance(n, ast.Name)]
    found: list[tuple[str, str]] = []
    todo: list[tuple[ast.AST, bool]] = []  # (node, read only by an operation making an array)
    if isinstance(stmt, ast.Assign):
        single = assigned_name(stmt) is not None
        for target in stmt.targets:
            _target(target, _BIND if single else _UNSAFE, found, todo)
        todo.append((stmt.value, False))  # `v = t` makes a second name
    else:
        _target(stmt.target, _SAFE, found, todo)  # `t += g`: written in place
        base = _base(stmt.target)  # `a += t` adds its elements into an array `a`
        todo.append((stmt.value, isinstance(base, ast.Name) and bool(rank(base.id))))
    while todo:
        node, operand = todo.pop()
        if isinstance(node, ast.Name):
            found.append((node.id, _SHAPE if id(node) in shape_ids else _KIND[operand]))
        elif isinstance(node, (ast.BinOp, ast.Compare)) or (
            isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
        ):
            todo += [(child, True) for child in ast.iter_child_nodes(node)]
        elif isinstance(node, ast.Call) and _inputs(node):
            inputs = _inputs(node)  # (not a positional `out`, a keyword, the function)
            todo += [(a, i < inputs) for i, a in enumerate(node.args)]
            todo += [(k.value, False) for k in node.keywords] + [(node.func, False)]
        else:
            todo += [(child, False) for child in ast.iter_child_nodes(node)]
    return found


def _target(target, kind: str, found: list, todo: list) -> None:
    """The names an assignment's target mentions: a name bound (`kind`), an array written
    into (`t[i] = v`: safe; `a[i] = t` may make a list or an object array hold `t` itself),
    anything else unsafe."""
    if isinstance(target, ast.Name):
        found.append((target.id, kind))
        return
    if not isinstance(target, ast.Subscript):
        found += [(n.id, _UNSAFE) for n in walk_nodes(target) if isinstance(n, ast.Name)]
        return
    while isinstance(target, ast.Subscript):
        todo.append((target.slice, False))
        target = target.value
    if isinstance(target, ast.Name):
        found.append((target.id, _SAFE))
    else:
        todo.append((target, False))


def _base(target: ast.expr) -> ast.expr:
    """The array a target writes into: `a` of `a`, `a[i]` and `a[i][j]`."""
    while isinstance(target, ast.Subscript):
        target = target.value
    return target


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
    if assigned_name(stmt) is None:
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


def _split(stmt: ast.Assign, buffer: str, rank) -> list | None:
    """`c = np.multiply(a, b, out=spare(t, a, b))` then `c = np.multiply(2, c, out=spare(c, c))`
    for `c = 2 * (a * b)`: an operation nested in the statement's, over an array of the result's
    rank, writes into the buffer too, and the outer one into that result (both checked by
    `spare`), where the nested one would have made a fresh array. Only where nothing outside
    the nested operation reads the buffer (it is written before the outer operation reads its
    other operands) and the statement does not read its own target; else None."""
    target, value = stmt.targets[0].id, stmt.value
    if isinstance(value, ast.BinOp):
        args = [value.left, value.right]
    elif isinstance(value, ast.UnaryOp):
        args = [value.operand]
    else:
        args = list(value.args)
    mentioned = [n.id for n in walk_nodes(value) if isinstance(n, ast.Name)]
    if target in mentioned or not isinstance(rank(target), int) or not rank(target):
        return None
    for k, arg in enumerate(args):
        if not isinstance(arg, (ast.BinOp, ast.UnaryOp, ast.Call)):
            continue
        inside = [n.id for n in walk_nodes(arg) if isinstance(n, ast.Name)]
        if mentioned.count(buffer) != inside.count(buffer):
            continue  # the buffer is read after the nested operation would write it
        if not any(rank(n) == rank(target) for n in inside):
            continue  # (a number, or an array that broadcasts into the result)
        nested = ir.copy_origin(ast.Assign([ast.Name(target, ast.Store())], arg), stmt)
        args[k] = ast.Name(target, ast.Load())
        if isinstance(value, ast.BinOp):
            outer = ast.BinOp(args[0], value.op, args[1])
        elif isinstance(value, ast.UnaryOp):
            outer = ast.UnaryOp(value.op, args[0])
        else:
            outer = ast.Call(value.func, args, [])
        outer = ir.copy_origin(ast.Assign([ast.Name(target, ast.Store())], outer), stmt)
        # an operation nested in the nested one goes first, into the buffer too (the tanh
        # adjoint's `g * (1 - h**2)`: `h**2`, then `1 - c`, then `g * c`, no fresh array)
        inner = _split(nested, buffer, rank) or [_with_out(nested, buffer, _operands(arg))]
        return inner + [_with_out(outer, target, _operands(outer.value))]
    return None


def _with_out(stmt: ast.Assign, buffer: str, operands: list[str]) -> ast.Assign:
    """`c = np.op(a, b, out=spare(t, a, b))` for `c = a op b`."""
    value = stmt.value
    guard = ast.Call(
        ast.Name(_GUARD, ast.Load()), [ast.Name(n, ast.Load()) for n in [buffer] + operands], []
    )
    out = [ast.keyword("out", guard)]
    if _squared(value):  # `x ** 2` is np.square(x), as NumPy's operator computes it
        func, args = "square", [value.left]
    elif isinstance(value, ast.BinOp):
        func, args = _OPERATORS[type(value.op)], [value.left, value.right]
    elif isinstance(value, ast.UnaryOp):
        func, args = "negative", [value.operand]
    else:
        func, args = value.func.attr, list(value.args)
    call = ast.Call(ast.Attribute(ast.Name("np", ast.Load()), func, ast.Load()), args, out)
    new = ast.Assign([ast.Name(stmt.targets[0].id, ast.Store())], call)
    return ir.copy_origin(new, stmt)


def _squared(value) -> bool:
    """`x ** 2`, which NumPy's operator computes as np.square(x) (np.power is slower)."""
    return (
        isinstance(value, ast.BinOp)
        and isinstance(value.op, ast.Pow)
        and isinstance(value.right, ast.Constant)
        and type(value.right.value) in (int, float)
        and value.right.value == 2
    )

"""Errors on threads (`parallel=True`): Numba loses an exception raised inside a `prange`
loop (the loop goes on, its result wrong), so a loop runs on threads only where what it may
raise is raised serially, before the threads start.

What a jitted loop body may raise, and how each is handled:
- index out of range: s2sad's own checks (bounds.py); a loop holding one stays serial
  (independence.py);
- shapes that do not match (`@`, `np.dot`, broadcasting in `+ - * /` and the ufuncs, a row
  stored into `out[i]`): where each operand's shape is the same in every iteration (a
  loop-invariant array, `x[i]`, a slice with loop-invariant bounds), the first iteration runs
  alone before the others go on threads (`first_alone`), and raises NumPy's error as the serial
  build does; a shape that changes with the index (`x[:i]`, `np.zeros(i)`, `x[x > 0]`, a
  `reshape` by values of the iteration) keeps the loop serial (`value_errors`);
- values: `np.linalg` (a singular matrix, one not positive definite), and a power whose
  exponent is not a constant (Numba's `0.0 ** j`, j an integer below 0, raises
  ZeroDivisionError where NumPy gives inf) keep the loop serial;
- division by zero raises nothing: builds use Numba's `error_model="numpy"` (a float gives
  inf or nan, an integer 0), so no check is needed.
"""

from __future__ import annotations

import ast

from .. import ir
from ..astcopy import clone, walk_nodes
from .names import assigned, names_mentioned
from .nodes import constant_value

# calls whose result's shape is given by their arguments' values
_SHAPED_BY_VALUES = {"zeros", "ones", "empty", "full", "arange", "linspace", "eye", "identity"}
_SHAPED_BY_VALUES |= {"reshape", "broadcast_to", "tile", "repeat", "resize", "pooled_zeros"}


def value_errors(body: list, index: str, rank_of=lambda node: None) -> str | None:
    """Why an error `body` may raise in some iteration but not in the first one could be lost
    on threads (a string), or None where each of its errors shows in every iteration alike.
    `rank_of`: a node's rank where known (an array index, `x[mask]`, may select a number of
    elements its values give)."""
    varying = assigned(body) | {index}
    for node in walk_nodes(ast.Module(body, [])):
        if isinstance(node, ast.Call):
            text = ast.unparse(node.func)
            if "linalg" in text:
                return (
                    f"`{ast.unparse(node)}` may raise on the values of one iteration, and "
                    "Numba's threads lose the error"
                )
            name = node.func.attr if isinstance(node.func, ast.Attribute) else text
            if name in _SHAPED_BY_VALUES and _mentions(node.args + node.keywords, varying):
                return _changing(node)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            power = constant_value(node.right)
            if not (isinstance(power, float) or (type(power) is int and power >= 0)):
                return (  # Numba's 0.0 ** j, j an integer below 0, raises ZeroDivisionError
                    f"`{ast.unparse(node)}` may raise on the values of one iteration (0 to a "
                    "negative integer power), and Numba's threads lose the error"
                )
        elif isinstance(node, ast.Subscript):
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            for part in parts:
                if isinstance(part, ast.Slice) and _mentions([part], varying):
                    return _changing(node)
                if isinstance(part, ast.Compare) or (
                    isinstance(part, ast.Name) and (rank_of(part) or 0) > 0
                ):
                    return _changing(node)
    return None


def array_valued(body: list, rank_of) -> bool:
    """Whether `body` computes with arrays (a name it assigns, or a value it stores, is not
    known to be a number): then shapes may not match, and the first iteration runs alone."""
    for node in walk_nodes(ast.Module(body, [])):
        if isinstance(node, ast.Assign):
            values = [node.value] if isinstance(node.targets[0], ast.Subscript) else []
            names = [t for t in node.targets if isinstance(t, ast.Name)]
            if any(rank_of(e) != 0 for e in names + values):
                return True
    return False


def first_alone(loop, body: list, bounds: list) -> ast.If:
    """`if a < b: i = a; <body>`, the first iteration of `loop` (over range(a, b), `bounds`),
    to run before the rest goes on threads; `body`: a copy of the loop's body taken before it
    was rewritten for threads (its sums plain additions, as serial code has them)."""
    index = loop.target.id
    start = bounds[0] if len(bounds) == 2 else ast.Constant(0)
    test = ast.Compare(clone(bounds[-1]), [ast.Gt()], [clone(start)])
    first = ast.Assign([ast.Name(index, ast.Store())], clone(start))
    block = ast.If(test, [first] + body, [])
    for s in (block, first):
        ir.copy_origin(s, loop)
    value = constant_value(start)
    if type(value) is int:
        second = ast.Constant(value + 1)
    else:
        second = ast.BinOp(clone(start), ast.Add(), ast.Constant(1))
    loop.iter.args = [second, clone(bounds[-1])]
    return block


def _mentions(nodes: list, names: set) -> bool:
    return any(names_mentioned([n]) & names for n in nodes)


def _changing(node: ast.expr) -> str:
    return (
        f"the shape of `{ast.unparse(node)}` changes from one iteration to the next, and Numba's "
        "threads lose an error it raises"
    )


__all__ = ["array_valued", "first_alone", "value_errors"]

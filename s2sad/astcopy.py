"""`clone`: `copy.deepcopy` for syntax trees, without its generic machinery (reduce, reconstruct,
a dispatch per value), which costs several times the copy itself. The transform copies rule
templates and operands for every rule it applies."""

from __future__ import annotations

import ast
import copy
import types

_ATOMIC = frozenset({str, int, float, bool, complex, bytes, type(None), type(Ellipsis)})


def clone(tree):
    """A deep copy of `tree`, as `copy.deepcopy(tree)` makes it: every node's attributes (its
    fields, positions and any set on it) copied, shared nodes shared in the copy too; values
    other than nodes, lists and constants are left to `copy.deepcopy`."""
    return _clone(tree, {})


def _clone(x, memo: dict):
    cls = type(x)
    if cls in _ATOMIC:
        return x
    y = memo.get(id(x))
    if y is not None:
        return y
    if isinstance(x, ast.AST):
        y = cls.__new__(cls)
        memo[id(x)] = y
        state = y.__dict__
        for k, v in x.__dict__.items():
            state[k] = _clone(v, memo)
        return y
    if cls is list:
        y = []
        memo[id(x)] = y
        for v in x:
            y.append(_clone(v, memo))
        return y
    if cls is types.ModuleType:
        return x
    try:
        return copy.deepcopy(x, memo)
    except TypeError:  # an object recorded on a node that holds a module (a checkpointed loop's
        return x  # callee): the same object, as a module is


def walk_nodes(tree):
    """Every node of `tree` in the order `ast.walk` gives them (breadth first, each node's
    children read just before it is yielded), about three times faster: `ast.walk` runs two
    generators per node, and the passes walk the whole function a few dozen times."""
    todo = [tree]
    AST = ast.AST
    for node in todo:  # the list grows as it is read
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, AST):
                todo.append(value)
            elif isinstance(value, list):
                todo.extend([v for v in value if isinstance(v, AST)])
        yield node

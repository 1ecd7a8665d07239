"""Which reads of a name ask only for its shape and dtype, not its elements: the tape pass
keeps no copy of a value read only so (a `shape_stub`), and undoes no write into it.

A read is one when it is a helper's parameter declared `shape_only` (rules/helpers.py: the `x`
of `unbroadcast(g, x)`, `getitem_vjp(g, x, i)`, ...), the argument of `np.shape`, `np.ndim` or
`np.zeros_like`, or the object of `.shape`, `.ndim`, `.dtype` or `.size`."""

from __future__ import annotations

import ast

from ..astcopy import walk_nodes
from ..rules.helpers import SHAPE_ONLY
from .names import names_read

_SHAPE_FUNCTIONS = {"shape", "ndim", "zeros_like"}  # np.shape(x): x's elements are not read
_SHAPE_ATTRIBUTES = {"shape", "ndim", "dtype", "size"}


def value_reads(stmts) -> set[str]:
    """The names the statements read for their elements: every name `names_read` gives, less
    those read only for their shape or dtype (`unbroadcast(g, x)`, `np.shape(x)`, `x.ndim`).
    A tape keeps no copy of those, and a write into them need not be undone."""
    return names_read(stmts, skip=shape_only_reads(stmts))


def shape_only_reads(stmts) -> set[int]:
    """The ids of the Name nodes (and other operands) the statements read only for their shape
    and dtype (see value_reads)."""
    shape_only = set()
    for node in walk_nodes(ast.Module([s for s in stmts if isinstance(s, ast.AST)], [])):
        if isinstance(node, ast.Attribute) and node.attr in _SHAPE_ATTRIBUTES:
            shape_only.add(id(node.value))
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in SHAPE_ONLY:
            for position, param in SHAPE_ONLY[func.id]:
                if position < len(node.args):
                    shape_only.add(id(node.args[position]))
                shape_only |= {id(k.value) for k in node.keywords if k.arg == param}
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "np"
            and func.attr in _SHAPE_FUNCTIONS
            and node.args
        ):
            shape_only.add(id(node.args[0]))
    return shape_only

"""Which jitted functions need Numba's index checks (jit only): those whose code, before fusion,
reads or writes by an integer or an index array (`x[k]`, `y[i + 1] = v`, `x[idx]`), the user's
indexing, which may be out of range. Consumes the lowered statements (the primal and the
adjoint, or the tangent code), produces a bool; jit.py compiles the function with
`boundscheck=True` where it is True, so an index out of range raises IndexError as in Python
mode instead of reading past the array.

Code that only slices and calls NumPy (a stencil of slices) needs no check: slices are
clipped, never out of range, and the loops fusion writes index within the shapes their guards
checked. Numba checks every index of a function it checks, so a function with any index of the
user's has fusion's loops checked too: 0-5% of k-means' jitted Hessian-vector product, whose one
index is a gather (benchmarks/boundscheck_side_by_side.py).
"""

from __future__ import annotations

import ast
import os

# Numba checks the indices of the functions that index (and numba_forms.py their boolean masks'
# shapes); S2SAD_BOUNDSCHECK=0 compiles without the checks. (Read once: the emitted text and a
# module's text say which, so the two never share a module.)
BOUNDSCHECK = os.environ.get("S2SAD_BOUNDSCHECK") != "0"


def indexes_by_integers(stmts: list) -> bool:
    """Whether any subscript in `stmts` has an index other than slices (an integer, an
    expression, a name that may hold an index array), leaving out `a.shape[k]`, which Numba
    types as a tuple's item."""
    for stmt in stmts:
        for node in ast.walk(stmt) if isinstance(stmt, ast.AST) else ():
            if not isinstance(node, ast.Subscript):
                continue
            if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
                continue
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if not all(_slice_or_axis(i) for i in items):
                return True
    return False


def _slice_or_axis(item: ast.expr) -> bool:
    """A slice (clipped to the axis), `None` or `...`: nothing that can be out of range."""
    return isinstance(item, ast.Slice) or (
        isinstance(item, ast.Constant) and (item.value is None or item.value is Ellipsis)
    )

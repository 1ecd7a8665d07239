"""Cotangents added into an array as they are made, for jitted loops: a matrix-vector product's
matrix cotangent is an outer product, made only to be added into its matrix's cotangent at an
index (`add_at(dQs, k, matmul_vjp_lhs(dz, Q[k], v))`, pipeline/accumulate.py). Numba makes a
new array for it on every iteration; `add_outer_at` adds the products into the rows in place.
"""

import typing

import numpy as np

from .common import _array, _has_array, _integer, add_at
from .helpers import helper, numba_of

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types


@helper(nondiff=True)
def add_outer_at(a, index, u, v):
    """`a[index] += np.outer(u, v)`, repeated indices adding up (as add_at)."""
    add_at(a, index, np.outer(u, v))


@numba_of(add_outer_at)
def _add_outer_at(a, index, u, v):
    items = index.types if isinstance(index, types.BaseTuple) else (index,)
    if (
        not _array(a)
        or _has_array(index)
        or not all(_integer(t) for t in items)
        or a.ndim - len(items) != 2
    ):
        return lambda a, index, u, v: add_at(a, index, np.expand_dims(u, 1) * v)

    def rows(a, index, u, v):
        view = a[index]
        if view.shape[0] != u.shape[0] or view.shape[1] != v.shape[0]:  # broadcast: add_at's
            add_at(a, index, np.expand_dims(u, 1) * v)
            return
        for p in range(u.shape[0]):
            for q in range(v.shape[0]):
                view[p, q] += u[p] * v[q]

    return rows

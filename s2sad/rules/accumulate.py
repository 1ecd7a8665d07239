"""Cotangents added into an array as they are made, for jitted loops: a matrix-vector product's
matrix cotangent is an outer product, made only to be added into its matrix's cotangent at an
index (`add_at(dQs, k, matmul_vjp_lhs(dz, Q[k], v))`, pipeline/accumulate.py). Numba makes a
new array for it on every iteration; `add_outer_at` adds the products into the rows in place.
Likewise a max's or min's cotangent, nonzero where the extremum is (one element, in most
calls), added into the array it joins (`extremum_added`), not made full size.
"""

import typing

import numpy as np

from .common import _array, _has_array, _integer, add_at
from .helpers import helper, numba_of
from .reductions import extremum_vjp

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


@helper(nondiff=True)
def extremum_added(d, g, x, ans):
    """`d + extremum_vjp(g, x, ans)` (max or min over all of `x`): the cotangent `g` shared
    evenly among the elements equal to `ans`. Compiled, it is added into `d` where `d` has
    `x`'s shape, in place: the jitted adjoint calls it only on an array no other name it
    reads later shares (pipeline/accumulate.py), and the share is one element in most calls,
    where `extremum_vjp` made a full array of it and the sum another."""
    return d + extremum_vjp(g, x, ans)


@numba_of(extremum_added)
def _extremum_added(d, g, x, ans):
    if not (_array(d) and _array(x)) or _array(g) or _array(ans) or d.ndim != x.ndim:
        return lambda d, g, x, ans: d + extremum_vjp(g, x, ans)

    def impl(d, g, x, ans):
        if d.shape != x.shape:  # d broadcast against x: never in a gradient; as NumPy would
            return (d + extremum_vjp(g, x, ans)).astype(d.dtype)
        count = 0
        for i in np.ndindex(x.shape):
            if x[i] == ans:
                count += 1
        if count == 0:  # ans a NaN: g * 0 / 0 everywhere, as extremum_vjp's
            for i in np.ndindex(x.shape):
                d[i] += np.nan
        elif np.isfinite(g):  # the elements not equal to ans get g * 0 / count: zeros
            share = g / count
            for i in np.ndindex(x.shape):
                if x[i] == ans:
                    d[i] += share
        else:  # inf * 0: NaN at the other elements
            for i in np.ndindex(x.shape):
                d[i] += g / count if x[i] == ans else np.nan
        return d

    return impl

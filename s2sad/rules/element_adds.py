"""NumPy mode's sum of several element reads' cotangents (`getitem_added`, for
pipeline/small_vectors.py): added into one array. Plain NumPy form only: jitted code adds its
reads' cotangents into their array (`add_at`) and never calls it."""

import numpy as np

from .helpers import helper
from .indexing import getitem_vjp


@helper(nondiff=True)
def getitem_added(dx, g, x, index):
    """`dx + getitem_vjp(g, x, index)`, the cotangent of one more element read `x[k]` (an RK4
    step's `y[0]`, `y[1]`), added into `dx` where `dx` is a float array of x's shape and dtype
    that the sum keeps, made for this (small_vectors.py proves nothing else holds it): no array
    of zeros and no sum's array per read."""
    if (
        type(dx) is np.ndarray
        and type(index) is int
        and type(x) is np.ndarray
        and dx.shape == x.shape
        and dx.dtype.kind == "f"
        and x.dtype == dx.dtype
        and (
            type(g) is dx.dtype.type
            or (type(g) is float and dx.dtype.itemsize == 8)
            or (type(g) is np.ndarray and g.dtype == dx.dtype)
        )
    ):
        dx[index] += g
        return dx
    return dx + getitem_vjp(g, x, index)

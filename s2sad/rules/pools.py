"""Jitted code's large temporaries taken from a call's workspace (s2sad/workspace.py): each
helper here is an allocation of generated code (`np.empty`, `np.zeros`, a stack product, an
array's arithmetic) with a workspace and a slot number in front. Where the compiled function
was handed a workspace, an array of POOLED_BYTES or more is a view of the slot's region of the
workspace's arena when it is large enough (laid out for the previous call's arrays); else, and
in Python, the fresh array the allocation made. Every form records the slot's size in bytes, so
that the Python side can lay out regions that fit for the next call.

Why: glibc gives a block over 32 MB back to the kernel when it is freed, so each call's large
arrays come as fresh pages that the kernel faults in and zeroes (GMM d=64 K=200 n=2000: four
(K, d, n) arrays, 205 MB each, about half of the jitted gradient's time).
"""

import typing

import numpy as np

from .common import _array
from .helpers import helper, numba_jitable, numba_of, type_test
from .matrix_products import _mm_stacks_into
from .products import matmul_stacks, matmul_vjp_rhs
from .tapes import row_tape, rows_like, view_rows

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types
    from numba.np.numpy_support import as_dtype

# a smaller array comes from malloc's free lists (memory already touched) at no fault's cost
POOLED_BYTES = 1 << 20


@type_test
def _no_workspace(t):
    """A call without a workspace: the parameter's default (None), or None passed."""
    return isinstance(t, (types.NoneType, types.Omitted))


@type_test
def _item_bytes(dtype):
    """The size of an element of `dtype` (a Numba DType, or a NumPy scalar type as `np.float64`);
    None for another (Python's `float`): the allocation then makes a fresh array."""
    if isinstance(dtype, types.DType):
        return as_dtype(dtype.dtype).itemsize
    if isinstance(dtype, types.NumberClass):
        return as_dtype(dtype.instance_type).itemsize
    return None


@type_test
def _shape(t):
    """A length, or a tuple of lengths with at least one (0-d arrays are small)."""
    if isinstance(t, types.UniTuple):
        return t.count > 0 and isinstance(t.dtype, types.Integer)
    return isinstance(t, types.Integer)


@numba_jitable
def _slot_view(workspace, slot, shape, dtype, item_bytes):
    """An empty array of `shape` (a tuple) and `dtype` in slot `slot`'s region of `workspace`
    (its table: bytes asked, region starts, region sizes; its arena), or a fresh one where the
    region is too small or the array small."""
    table, arena = workspace
    nbytes = item_bytes
    for n in shape:
        nbytes *= n
    table[0, slot] = nbytes
    if nbytes >= POOLED_BYTES and nbytes <= table[2, slot]:
        start = table[1, slot]
        return arena[start : start + nbytes].view(dtype).reshape(shape)
    return np.empty(shape, dtype)


@numba_jitable
def _first_slot_view(workspace, slot, shape, dtype, item_bytes):
    """`_slot_view`, the first time the call asks the slot; a fresh array after that (a tape of
    rows made again in one call, once its rows are popped: a row popped before, a view, may
    still be read, so the region is not handed out twice)."""
    if workspace[0][0, slot] != 0:
        return np.empty(shape, dtype)
    return _slot_view(workspace, slot, shape, dtype, item_bytes)


@helper(nondiff=True)
def pooled(workspace, slot, shape, dtype):
    """`np.empty(shape, dtype)`, in a slot of the call's workspace."""
    return np.empty(shape, dtype)


@numba_of(pooled)
def _pooled(workspace, slot, shape, dtype):
    size = _item_bytes(dtype)
    if _no_workspace(workspace) or size is None or not _shape(shape):
        return lambda workspace, slot, shape, dtype: np.empty(shape, dtype)
    if isinstance(shape, types.Integer):
        return lambda workspace, slot, shape, dtype: _slot_view(
            workspace, slot, (shape,), dtype, size
        )
    return lambda workspace, slot, shape, dtype: _slot_view(workspace, slot, shape, dtype, size)


@helper(nondiff=True)
def pooled_zeros(workspace, slot, shape, dtype):
    """`np.zeros(shape, dtype)`, in a slot of the call's workspace (set to zero: its buffer holds
    the previous call's numbers)."""
    return np.zeros(shape, dtype)


@numba_of(pooled_zeros)
def _pooled_zeros(workspace, slot, shape, dtype):
    if _no_workspace(workspace):
        return lambda workspace, slot, shape, dtype: np.zeros(shape, dtype)

    def zeroed(workspace, slot, shape, dtype):
        out = pooled(workspace, slot, shape, dtype)
        out[...] = 0
        return out

    return zeroed


@type_test
def _stacks(*arrays):
    """Three-axis arrays of one float dtype: the stack products a workspace holds."""
    return all(_array(a) and a.ndim == 3 for a in arrays) and len({a.dtype for a in arrays}) == 1


@helper(nondiff=True)
def pooled_matmul(workspace, slot, a, b):
    """`matmul_stacks(a, b)`, its product in a slot of the call's workspace where `a` and `b`
    are stacks of one length and dtype."""
    return matmul_stacks(a, b)


@numba_of(pooled_matmul)
def _pooled_matmul(workspace, slot, a, b):
    if _no_workspace(workspace) or not _stacks(a, b):
        return lambda workspace, slot, a, b: matmul_stacks(a, b)

    def product(workspace, slot, a, b):
        if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
            return matmul_stacks(a, b)  # (broadcast stacks, or its error)
        out = pooled(workspace, slot, (a.shape[0], a.shape[1], b.shape[2]), a.dtype)
        return _mm_stacks_into(a, b, 0, out)

    return product


@helper(nondiff=True)
def pooled_matmul_vjp_rhs(workspace, slot, g, a, b):
    """`matmul_vjp_rhs(g, a, b)`, in a slot of the call's workspace where the three are stacks
    of one length and dtype (so that the product has b's shape: nothing to unbroadcast)."""
    return matmul_vjp_rhs(g, a, b)


@numba_of(pooled_matmul_vjp_rhs)
def _pooled_matmul_vjp_rhs(workspace, slot, g, a, b):
    if _no_workspace(workspace) or not _stacks(g, a, b):
        return lambda workspace, slot, g, a, b: matmul_vjp_rhs(g, a, b)

    def product(workspace, slot, g, a, b):
        shape = (a.shape[0], a.shape[2], g.shape[2])
        if g.shape[0] != a.shape[0] or g.shape[1] != a.shape[1] or shape != b.shape:
            return matmul_vjp_rhs(g, a, b)
        return _mm_stacks_into(a, g, 2, pooled(workspace, slot, shape, a.dtype))

    return product


@type_test
def _like_floats(workspace, a, b):
    """A workspace, and float arrays (not 0-d) of one dtype: what an arithmetic's slot holds."""
    same = _array(a) and _array(b) and a.dtype == b.dtype and isinstance(a.dtype, types.Float)
    return same and a.ndim > 0 and b.ndim > 0 and not _no_workspace(workspace)


@helper(nondiff=True)
def pooled_subtract(workspace, slot, a, b):
    """`a - b`, in a slot of the call's workspace where both are float arrays of one dtype."""
    return a - b


@numba_of(pooled_subtract)
def _pooled_subtract(workspace, slot, a, b):
    if not _like_floats(workspace, a, b):
        return lambda workspace, slot, a, b: a - b

    def subtracted(workspace, slot, a, b):
        out = pooled(workspace, slot, np.broadcast_shapes(a.shape, b.shape), a.dtype)
        np.subtract(a, b, out)
        return out

    return subtracted


@helper(nondiff=True)
def pooled_add(workspace, slot, a, b):
    """`a + b`, in a slot of the call's workspace where both are float arrays of one dtype."""
    return a + b


@numba_of(pooled_add)
def _pooled_add(workspace, slot, a, b):
    if not _like_floats(workspace, a, b):
        return lambda workspace, slot, a, b: a + b

    def added(workspace, slot, a, b):
        out = pooled(workspace, slot, np.broadcast_shapes(a.shape, b.shape), a.dtype)
        np.add(a, b, out)
        return out

    return added


@helper(nondiff=True)
def pooled_multiply(workspace, slot, a, b):
    """`a * b`, in a slot of the call's workspace where both are float arrays of one dtype."""
    return a * b


@numba_of(pooled_multiply)
def _pooled_multiply(workspace, slot, a, b):
    if not _like_floats(workspace, a, b):
        return lambda workspace, slot, a, b: a * b

    def multiplied(workspace, slot, a, b):
        out = pooled(workspace, slot, np.broadcast_shapes(a.shape, b.shape), a.dtype)
        np.multiply(a, b, out)
        return out

    return multiplied


@helper(nondiff=True)
def pooled_divide(workspace, slot, a, b):
    """`a / b`, in a slot of the call's workspace where both are float arrays of one dtype."""
    return a / b


@numba_of(pooled_divide)
def _pooled_divide(workspace, slot, a, b):
    if not _like_floats(workspace, a, b):
        return lambda workspace, slot, a, b: a / b

    def divided(workspace, slot, a, b):
        out = pooled(workspace, slot, np.broadcast_shapes(a.shape, b.shape), a.dtype)
        np.divide(a, b, out)
        return out

    return divided


@helper(nondiff=True)
def pooled_row_tape(workspace, slot, x, capacity):
    """`row_tape(x, capacity)` (rules/tapes.py), its rows in a slot of the call's workspace.
    A loop's tape of rows holds every step's values at once (the RK4 ODE at n=1e5: four tapes
    of 80 MB), which a fresh array takes as fresh pages at each call."""
    return []


@numba_of(pooled_row_tape)
def _pooled_row_tape(workspace, slot, x, capacity):
    if _no_workspace(workspace) or not isinstance(x, (types.Array, types.Number)):
        return lambda workspace, slot, x, capacity: row_tape(x, capacity)
    if isinstance(x, types.Array):
        size, dtype = as_dtype(x.dtype).itemsize, as_dtype(x.dtype)
        return lambda workspace, slot, x, capacity: _first_slot_view(
            workspace, slot, (capacity,) + x.shape, dtype, size
        )
    size, dtype = as_dtype(x).itemsize, as_dtype(x)
    return lambda workspace, slot, x, capacity: _first_slot_view(
        workspace, slot, (capacity,), dtype, size
    )


@helper(nondiff=True)
def pooled_rows_like(workspace, slot, buffer, capacity):
    """`rows_like(buffer, capacity)` (rules/tapes.py), its rows in a slot of the call's
    workspace."""
    return []


@numba_of(pooled_rows_like)
def _pooled_rows_like(workspace, slot, buffer, capacity):
    if _no_workspace(workspace) or not isinstance(buffer, types.Array):
        return lambda workspace, slot, buffer, capacity: rows_like(buffer, capacity)
    size, dtype = as_dtype(buffer.dtype).itemsize, as_dtype(buffer.dtype)
    return lambda workspace, slot, buffer, capacity: _first_slot_view(
        workspace, slot, (capacity,) + buffer.shape, dtype, size
    )


@helper(nondiff=True)
def pooled_view_rows(workspace, slot, x, capacity):
    """`view_rows(x, capacity)` (rules/tapes.py): with a workspace, rows in a slot of it, each
    view's elements copied into its row (the RK4 ODE at n=1e5: 4 x 800 KB a step, where the
    list kept the 800 KB arrays each step made, fresh pages at each call: 110 of its 360 ms);
    without one, the list of the views themselves (at n=1000 rows made afresh, 3.2 MB a call,
    took twice the list's time)."""
    return []


@numba_of(pooled_view_rows)
def _pooled_view_rows(workspace, slot, x, capacity):
    if _no_workspace(workspace) or not isinstance(x, types.Array):
        return lambda workspace, slot, x, capacity: view_rows(x, capacity)
    return _pooled_row_tape(workspace, slot, x, capacity)

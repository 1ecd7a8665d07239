"""The tests compiled code makes before a fused loop nest or a lowered loop (pipeline/fusion,
pipeline/lower.py): whether the fused loops may stand for the array statements they replace,
and the test of a `while True:` that Numba cannot fold. In Python (the fallback of a jitted
function) the array statements run: the guards are False there. Also the arrays a fused run in a
loop writes into, and the copies it snapshots, made once before the loop (`reused`,
`snapshot_into`, pipeline/hoist.py).
"""

import typing

import numpy as np

from .common import _array
from .helpers import helper, numba_of, type_test

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import literal_unroll, types
    from numba.np.numpy_support import as_dtype


@type_test
def _one_float_dtype(arrays):
    """Whether the Numba types `arrays` are arrays of one dtype, float32 or float64: the fused
    loops allocate their arrays in it and compute their elements from it (and cast what the
    statements they replace would widen, `in_dtype_of`). Other dtypes, or several, fail to
    type: jit.py then compiles the code unfused for those arguments, keeping NumPy's
    promotions (an integer array's values are float64 there)."""
    if not all(_array(t) for t in arrays):
        return False
    dtypes = {t.dtype for t in arrays}
    return len(dtypes) == 1 and dtypes <= {types.float32, types.float64}


@helper(nondiff=True)
def fusible(*arrays):
    """Whether a fused loop nest (pipeline/fuse.py) may stand for the array statements it
    replaces: in compiled code, when the arrays are of one shape. Python runs the array
    statements, which are faster there than a loop over elements: here it is False."""
    return False


@numba_of(fusible)
def _fusible(*arrays):
    if not _one_float_dtype(arrays):
        return None
    if len({t.ndim for t in arrays}) != 1:
        return None
    if len(arrays) == 1:
        return lambda *arrays: True
    if len(arrays) == 2:  # (fused code compares each array with the first: pipeline/fusion)
        return lambda *arrays: arrays[0].shape == arrays[1].shape

    def same_shape(*arrays):
        shape = arrays[0].shape
        same = True
        for a in literal_unroll(arrays):
            same = same and a.shape == shape
        return same

    return same_shape


@helper(nondiff=True)
def forever():
    """The test of a `while True:` loop in compiled code (pipeline/lower.py): Numba miscompiles
    some loops whose test it can fold."""
    return True


@numba_of(forever)
def _forever():
    return lambda: True


@helper(nondiff=True)
def check_range(*bounds):
    """TypeError where a `range` bound is not an integer (`range(n)` of n = 3.0), as Python
    raises: Numba's range takes a float, truncated (pipeline/numba_forms.py asks it before each
    loop over a range of values the function is given)."""
    range(*bounds)


@numba_of(check_range)
def _check_range(*bounds):
    if all(isinstance(b, (types.Integer, types.Boolean)) for b in bounds):
        return lambda *bounds: None

    def refused(*bounds):
        raise TypeError("'float' object cannot be interpreted as an integer")

    return refused


@helper(nondiff=True)
def float_arrays(*arrays):
    """Whether a fused loop nest broadcasting arrays across ranks (pipeline/fusion) may stand
    for the array statements it replaces, with the shape comparisons that follow it: in
    compiled code, when the arrays are float32, or float64, all of one dtype. Python runs the
    array statements: False."""
    return False


@numba_of(float_arrays)
def _float_arrays(*arrays):
    if not _one_float_dtype(arrays):
        return None
    return lambda *arrays: True


@helper(nondiff=True)
def kept_dtype(source, *arrays):
    """Whether NumPy computes with `arrays` in the float dtype of the array `source` (arrays of
    that dtype, or integer or boolean ones of fewer bits): a fused run reads them as it reads
    its float arrays, after `float_arrays` (pipeline/fusion/dtypes.py). Python runs the array
    statements: False."""
    return False


@numba_of(kept_dtype)
def _kept_dtype(source, *arrays):
    if not _one_float_dtype((source,)) or not all(_array(t) for t in arrays):
        return None
    dtype = as_dtype(source.dtype)
    if any(np.result_type(dtype, as_dtype(t.dtype)) != dtype for t in arrays):
        return None
    return lambda source, *arrays: True


@helper(nondiff=True)
def widened_by(v, *dtypes):
    """`v`, a value a loop carries, in the widest float dtype of it and `dtypes` (those of the
    arrays its step reads, or the numbers themselves): compiled, a float32 value a float64 one
    meets is float64 after a step, as in NumPy, and the loop carries it so from the start
    (pipeline/carried.py). NumPy widens it itself: `v` as it is."""
    return v


@numba_of(widened_by)
def _widened_by(v, *dtypes):
    floats = [t if isinstance(t, types.Float) else getattr(t, "dtype", None) for t in dtypes]
    floats = [t for t in floats if isinstance(t, types.Float)]  # (a number: its own type)
    have = v.dtype if _array(v) else v
    if not isinstance(have, types.Float) or not floats:
        return lambda v, *dtypes: v
    wide = max(floats + [have], key=lambda t: t.bitwidth)
    if wide.bitwidth <= have.bitwidth:
        return lambda v, *dtypes: v
    dtype = as_dtype(wide)
    if not _array(v):
        cast = dtype.type
        return lambda v, *dtypes: cast(v)
    return lambda v, *dtypes: v.astype(dtype)


@helper(nondiff=True)
def as_number(v):
    """`v`, a number a loop carries, as a number: compiled, a 0-d array (`s = np.zeros(())`, or
    a 0-d input) is a number after the first `s = s + x`, and Numba gives a name one type
    (pipeline/lower.py). NumPy's arithmetic makes the same number of it: `v` as it is."""
    return v


@numba_of(as_number)
def _as_number(v):
    if _array(v) and v.ndim == 0:
        return lambda v: v[()]
    return lambda v: v


@helper(nondiff=True)
def reused(buffer, shape, dtype):
    """The array a fused run in a loop writes every element of, made once before the loop
    (pipeline/hoist.py): `buffer` where it has `shape` and `dtype`, else a fresh array (a shape
    that changes from one iteration to the next costs what it did before, never a wrong value).
    Python never runs a fused branch: a fresh array."""
    return np.empty(shape, dtype)


@numba_of(reused)
def _reused(buffer, shape, dtype):
    if not _same_kind(buffer, shape, dtype):
        return None

    def fits(buffer, shape, dtype):
        if buffer.shape == shape:
            return buffer
        return np.empty(shape, buffer.dtype)

    return fits


@helper(nondiff=True)
def reused_zeros(buffer, shape, dtype):
    """`reused`, its elements set to zero: the array a fused run adds into (scatters.py)."""
    return np.zeros(shape, dtype)


@numba_of(reused_zeros)
def _reused_zeros(buffer, shape, dtype):
    if not _same_kind(buffer, shape, dtype):
        return None

    def zeroed(buffer, shape, dtype):
        if buffer.shape == shape:
            buffer[...] = 0
            return buffer
        return np.zeros(shape, buffer.dtype)

    return zeroed


@helper(nondiff=True, shaped_like="v")
def snapshot_into(buffer, v):
    """`snapshot(v)` in a loop, made once before the loop (pipeline/hoist.py): `v`'s elements
    copied into `buffer` where it has `v`'s shape and dtype, else a fresh copy. Python: a copy."""
    return v.copy() if isinstance(v, np.ndarray) else v


@numba_of(snapshot_into)
def _snapshot_into(buffer, v):
    if not _array(v):
        return lambda buffer, v: v
    if not (
        _array(buffer)
        and buffer.layout == "C"
        and buffer.dtype == v.dtype
        and buffer.ndim == v.ndim
    ):
        return lambda buffer, v: v.copy()  # (a guess of another kind: the plain copy)

    def into(buffer, v):
        if buffer.shape == v.shape:
            buffer[...] = v
            return buffer
        return v.copy()

    return into


@type_test
def _same_kind(buffer, shape, dtype):
    """Whether `buffer` is a contiguous array of `dtype` (a Numba DType) with as many axes as
    `shape` has: else the fused branch fails to type and jit.py compiles the code unfused."""
    if not _array(buffer) or buffer.layout != "C" or not isinstance(dtype, types.DType):
        return False
    axes = len(shape) if isinstance(shape, types.BaseTuple) else 1
    return dtype.dtype == buffer.dtype and axes == buffer.ndim

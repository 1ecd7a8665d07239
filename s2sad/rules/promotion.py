"""NumPy 2's result dtypes in compiled code, where Numba's differ (pipeline/promotions.py writes
the calls). A Python int meeting an integer array is "weak" in NumPy (NEP 50): `u * 200` of a
uint8 `u` is uint8, wrapping mod 256, and `u - 3` wraps; Numba reads the int as an int64 and
computes in int64 (in float64 for a uint64 array). A float32 array meeting an int32 or int64
array computes in float64 in NumPy; Numba's ufuncs pick their float32 loop. Both change the
numbers, not only their dtype. In Python each helper is its argument as it is: NumPy's own
promotions already give the dtype there.
"""

import typing

import numpy as np

from .common import _array
from .helpers import helper, numba_of, type_test
from .registry import linear

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types
    from numba.core.errors import TypingError
    from numba.np.numpy_support import as_dtype


# the start of `promoted`'s refusal, which numba_failures.py reads back
INT_NUMBER_MEETS = "an int number of unknown type meets a"


@helper(nondiff=True)
def weak_int(n, *arrays):
    """The Python int `n` in the integer dtype NumPy computes in where it meets `arrays` (`u *
    weak_int(200, u)`): compiled, `n` in the arrays' dtype where that is an integer dtype other
    than int64, and OverflowError where `n` is out of its range, as NumPy raises."""
    return n


@numba_of(weak_int)
def _weak_int(n, *arrays):
    dtype = _int_dtype(arrays)
    if not isinstance(n, types.Integer) or dtype is None or dtype == np.int64:
        return lambda n, *arrays: n  # (int64's arithmetic is Numba's; a mask's, bool + 1, too)
    info = np.iinfo(dtype)
    low, high = int(info.min), min(int(info.max), int(np.iinfo(np.int64).max))
    cast = dtype.type
    message = f"Python integer out of bounds for {dtype}"

    def weak(n, *arrays):
        if n < low or n > high:
            raise OverflowError(message)
        return cast(n)

    return weak


@helper(jvp=linear("v"), shaped_like="v")
def promoted(v, *others):
    """`v`, a float array or number that meets integer arrays or numbers `others` in arithmetic
    (`promoted(x, idx) * idx`), in NumPy's result dtype of them: compiled, a float32 `v` beside
    an int32, int64 or uint64 one is cast to float64, which NumPy computes in and Numba's
    float32 loop would not. Anything else is `v` as it is."""
    return v


@numba_of(promoted)
def _promoted(v, *others):
    have = v.dtype if _array(v) else v
    dtypes = [t.dtype if _array(t) else types.unliteral(t) for t in others]
    if isinstance(v, types.Integer) and all(isinstance(t, types.Integer) for t in dtypes):
        return _int_number(v, dtypes)  # (an integer array: NumPy's promotion is Numba's)
    if not isinstance(have, types.Float) or not all(
        isinstance(t, (types.Integer, types.Boolean, types.Float)) for t in dtypes
    ):
        return lambda v, *others: v
    want = np.result_type(as_dtype(have), *[as_dtype(t) for t in dtypes])
    if want == as_dtype(have) or want.kind != "f":
        return lambda v, *others: v
    if _array(v):
        return lambda v, *others: v.astype(want)
    cast = want.type
    return lambda v, *others: cast(v)


@helper(nondiff=True, shaped_like="v")
def integers(v):
    """The integer array `v` (`integers(u - weak_int(3, u)) * x`), computed apart from the
    expression around it: Numba's rewrite of a whole array expression into one loop computes
    its integer operations on elements in int64 (uint64), where NumPy wraps a uint8 `u - 3`.
    On its own, the operation stores into an array of NumPy's dtype, which wraps it."""
    return v


@numba_of(integers)
def _integers(v):
    return lambda v: v


@helper(nondiff=True)
def int_in_dtype(n, *arrays):
    """The int number `n` computed from elements of the integer `arrays` (`int_in_dtype(u[2] *
    weak_int(200, u), u)`), in NumPy's dtype of them: compiled, cast back to it (Numba computes
    numbers of 8, 16 and 32 bits in int64), so a uint8 product wraps mod 256 as NumPy's does."""
    return n


@numba_of(int_in_dtype)
def _int_in_dtype(n, *arrays):
    dtype = _int_dtype(arrays)
    if not isinstance(n, types.Integer) or dtype is None or as_dtype(n) == dtype:
        return lambda n, *arrays: n  # (a mask's element plus 1 is an int64, as Numba's)
    cast = dtype.type
    return lambda n, *arrays: cast(n)


@type_test
def _int_dtype(arrays):
    """NumPy's integer dtype of the Numba types of integer arrays and numbers (`y // 7` of a
    uint64 `y = u[2] * 3`), None where it is none (a mask's, a float's)."""
    dtypes = [a.dtype if _array(a) else types.unliteral(a) for a in arrays]
    if not all(isinstance(t, (types.Integer, types.Boolean)) for t in dtypes):
        return None
    dtype = np.result_type(*[as_dtype(t) for t in dtypes])
    return dtype if dtype.kind in "iu" else None


@type_test
def _int_number(v, dtypes):
    """`promoted(n, u)` of an int number `n` whose type s2sad does not know (an argument): a
    Python int is weak in NumPy (`u * n` of a uint8 `u` is uint8), a NumPy int64 is not (int64),
    and compiled code computes both in int64. Refused as the code compiles unless the arrays are
    int64 (or masks: `m * n` is int64 either way)."""
    kept = np.result_type(*[as_dtype(t) for t in dtypes])
    if kept == np.int64 or kept.kind == "b":
        return lambda v, *others: v
    raise TypingError(
        f"{INT_NUMBER_MEETS} {kept} array in arithmetic: NumPy computes in {kept} where the "
        "number is a Python int and by its dtype where it is a NumPy integer, compiled code in "
        "int64; it cannot tell them apart"
    )

"""The reductions Numba lacks, or sums less exactly than NumPy, as helpers jitted code calls in
their place (pipeline/lower.py rewrites `np.max(x, axis=1, keepdims=True)` into
`max_over(x, 1, True)` and `np.sum(x)` into `sum_over(x, None, False)`): max, min and prod over
an axis, mean and sum whole or over an axis, var and std over an axis or with `ddof`, and any of
them with `keepdims` (integer sums too). Each NumPy form is
the call it replaces; each Numba form loops over the reduced axis moved to the front. Sums of
float32 add in float64 and round once: Numba's own add in float32, one element after another,
where NumPy's add pairwise (a million float32 numbers would lose three or four digits).
"""

import typing

import numpy as np

from .common import _absent, _array, _integer
from .helpers import helper, numba_jitable, numba_of, type_test

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types
    from numba.cpython.unsafe.tuple import tuple_setitem
    from numba.np.numpy_support import as_dtype


@helper
def max_over(a, axis=None, keepdims=False):
    return np.max(a, axis=axis, keepdims=keepdims)


@helper
def min_over(a, axis=None, keepdims=False):
    return np.min(a, axis=axis, keepdims=keepdims)


@helper
def prod_over(a, axis=None, keepdims=False):
    return np.prod(a, axis=axis, keepdims=keepdims)


@helper
def sum_over(a, axis=None, keepdims=False):
    return np.sum(a, axis=axis, keepdims=keepdims)


@helper
def mean_over(a, axis=None, keepdims=False):
    return np.mean(a, axis=axis, keepdims=keepdims)


@helper
def var_over(a, axis=None, keepdims=False, ddof=0):
    return np.var(a, axis=axis, keepdims=keepdims, ddof=ddof)


@helper
def std_over(a, axis=None, keepdims=False, ddof=0):
    return np.std(a, axis=axis, keepdims=keepdims, ddof=ddof)


@numba_jitable
def _to_front(a, axis):
    """`a` (a view) with axis `axis` (non-negative) first, the others in their order."""
    perm = a.shape
    perm = tuple_setitem(perm, 0, axis)
    j = 1
    for i in range(a.ndim):
        if i != axis:
            perm = tuple_setitem(perm, j, i)
            j += 1
    return np.transpose(a, perm)


_MAX, _MIN, _PROD, _SUM = 0, 1, 2, 3  # the folds `_fold` makes


@numba_jitable
def _added64(a):
    """The sum of `a`'s elements (a float32 array's), added in float64."""
    total = 0.0
    for e in a.flat:
        total += e
    return total


@helper
def _total(a):
    """The sum of every element of `a` in its dtype (its Numba form adds float32 in float64)."""
    return np.sum(a)


@numba_of(_total)
def _total_impl(a):
    if _array(a) and a.dtype == types.float32:
        return lambda a: np.float32(_added64(a))
    return lambda a: np.sum(a)


# Numba's np.max and np.min compare one element after another, a loop LLVM does not vectorise
# (7x NumPy's time on a million float64): these keep 32 running extrema, one per lane
_LANES = 32


@type_test
def _laned(a):
    """Whether `a`'s whole max and min go by lanes: a float array, a vector or contiguous."""
    return isinstance(a.dtype, types.Float) and (a.ndim == 1 or a.layout == "C")


@numba_jitable
def _lanes_extreme(v, largest):
    """np.max (`largest`) or np.min of a float vector: NaN spreads, an empty one raises NumPy's
    error."""
    if v.shape[0] == 0:
        return np.max(v) if largest else np.min(v)
    lanes = np.full(_LANES, v[0])
    nan = np.zeros(_LANES, np.bool_)
    end = v.shape[0] - v.shape[0] % _LANES
    for start in range(0, end, _LANES):
        for k in range(_LANES):
            x = v[start + k]
            beyond = x > lanes[k] if largest else x < lanes[k]
            lanes[k] = x if beyond else lanes[k]
            nan[k] |= x != x
    best = lanes[0]
    for k in range(_LANES):
        beyond = lanes[k] > best if largest else lanes[k] < best
        best = lanes[k] if beyond else best
    for i in range(end, v.shape[0]):
        beyond = v[i] > best if largest else v[i] < best
        best = v[i] if beyond else best
        nan[0] |= v[i] != v[i]
    return _first_nan(v, best) if nan.any() or best != best else best


@numba_jitable
def _first_nan(v, best):
    """A NaN of `v` (as np.max gives: of `v`'s dtype), where it has one; else `best`."""
    for i in range(v.shape[0]):
        if v[i] != v[i]:
            return v[i]
    return best


@numba_jitable
def _whole(v, kind):
    if kind == _MAX:
        return np.max(v)  # NaN spreads, as in np.max
    if kind == _MIN:
        return np.min(v)
    if kind == _PROD:
        return np.prod(v)
    return _total(v)


@numba_jitable
def _fold(a, axis, kind):
    """`a` reduced over its axis `axis` by the fold `kind` (one of _MAX, _MIN, _PROD, _SUM)."""
    ax = axis if axis >= 0 else axis + a.ndim
    if ax < 0 or ax >= a.ndim:
        raise np.exceptions.AxisError(axis, a.ndim)  # NumPy's error and message
    if a.shape[ax] == 0:  # nothing to fold: the identity, where the fold has one (as NumPy)
        if kind == _SUM:
            return np.zeros(_to_front(a, ax).shape[1:], a.dtype)
        if kind == _PROD:
            return np.ones(_to_front(a, ax).shape[1:], a.dtype)
        raise ValueError("zero-size array to reduction operation which has no identity")
    if ax == a.ndim - 1:  # the last axis: one contiguous row per result
        rows = np.ascontiguousarray(a).reshape((-1, a.shape[ax]))
        out = np.empty(rows.shape[0], dtype=a.dtype)
        for r in range(rows.shape[0]):
            out[r] = _whole(rows[r], kind)
        return out.reshape(a.shape[:-1])
    t = _to_front(a, ax)  # else whole slices, combined elementwise
    out = t[0].copy()
    for k in range(1, t.shape[0]):
        if kind == _MAX:
            np.maximum(out, t[k], out)
        elif kind == _MIN:
            np.minimum(out, t[k], out)
        elif kind == _PROD:
            out *= t[k]
        else:
            out += t[k]
    return out


@numba_jitable
def _ones(a):
    """The shape of `a` with every length 1 (a whole reduction's kept dimensions)."""
    shape = a.shape
    for i in range(a.ndim):
        shape = tuple_setitem(shape, i, 1)
    return shape


@numba_jitable
def _kept(out, a, axis):
    """`out`, reduced over axis `axis` of `a`, with that axis kept with length 1."""
    return out.reshape(tuple_setitem(a.shape, axis if axis >= 0 else axis + a.ndim, 1))


@numba_jitable
def _front(a, axis):
    return _to_front(a, axis if axis >= 0 else axis + a.ndim)


@type_test
def _reduce_how(a, axis, keepdims, float_only=False):
    """How a lowered reduction of these Numba types goes: "whole" (every element), "kept"
    (every element, dimensions kept), "axis", "kept axis" (one int axis), or None (a tuple of
    axes, `keepdims` not known when compiling, or an integer product or mean, which NumPy
    widens: left to Numba's refusal)."""
    if _absent(keepdims, False):
        keep = False
    elif isinstance(keepdims, types.BooleanLiteral):
        keep = keepdims.literal_value
    else:
        return None
    if not _array(a) or (float_only and not isinstance(a.dtype, (types.Float, types.Complex))):
        return None
    outside = isinstance(axis, types.IntegerLiteral) and axis.literal_value not in (0, -1)
    if _absent(axis) or (a.ndim == 1 and _integer(axis) and not outside):
        return "kept" if keep else "whole"
    if _integer(axis):
        return "kept axis" if keep else "axis"
    return None


@type_test
def _whole_plain(axis, keepdims):
    """No axis and no `keepdims` (left out, or given as None and False)."""
    keep = isinstance(keepdims, types.BooleanLiteral) and keepdims.literal_value is False
    return _absent(axis) and (keep or _absent(keepdims, False))


@type_test
def _extreme_over(a, axis, keepdims, largest):
    """The Numba form of max_over (`largest`) or min_over for these types."""
    if not _array(a) and _whole_plain(axis, keepdims):  # a number (of unknown rank when written)
        return lambda a, axis=None, keepdims=False: a
    how, kind = _reduce_how(a, axis, keepdims), _MAX if largest else _MIN
    if how == "whole" and _laned(a):
        if a.ndim == 1:
            return lambda a, axis=None, keepdims=False: _lanes_extreme(a, largest)
        return lambda a, axis=None, keepdims=False: _lanes_extreme(a.reshape(-1), largest)
    if how == "whole":
        return lambda a, axis=None, keepdims=False: np.max(a) if largest else np.min(a)
    if how == "kept":
        return lambda a, axis=None, keepdims=False: np.full(
            _ones(a), np.max(a) if largest else np.min(a)
        )
    if how == "axis":
        return lambda a, axis=None, keepdims=False: _fold(a, axis, kind)
    if how == "kept axis":
        return lambda a, axis=None, keepdims=False: _kept(_fold(a, axis, kind), a, axis)
    return None


@numba_of(max_over)
def _max_over(a, axis=None, keepdims=False):
    return _extreme_over(a, axis, keepdims, True)


@numba_of(min_over)
def _min_over(a, axis=None, keepdims=False):
    return _extreme_over(a, axis, keepdims, False)


@numba_of(prod_over)
def _prod_over(a, axis=None, keepdims=False):
    if not _array(a) and _whole_plain(axis, keepdims):  # a number (of unknown rank when written)
        return lambda a, axis=None, keepdims=False: a
    how = _reduce_how(a, axis, keepdims, float_only=True)
    if how == "whole":
        return lambda a, axis=None, keepdims=False: np.prod(a)
    if how == "kept":
        return lambda a, axis=None, keepdims=False: np.full(_ones(a), np.prod(a))
    if how == "axis":
        return lambda a, axis=None, keepdims=False: _fold(a, axis, _PROD)
    if how == "kept axis":
        return lambda a, axis=None, keepdims=False: _kept(_fold(a, axis, _PROD), a, axis)
    return None


@numba_of(sum_over)
def _sum_over(a, axis=None, keepdims=False):
    how = _reduce_how(a, axis, keepdims)
    if how is not None and not isinstance(a.dtype, (types.Float, types.Complex)):
        # integers and booleans: Numba's own sums, which widen them as NumPy does
        if how == "whole":
            return lambda a, axis=None, keepdims=False: np.sum(a)
        if how == "axis":
            return lambda a, axis=None, keepdims=False: np.sum(a, axis=axis)
        if how == "kept":
            return lambda a, axis=None, keepdims=False: np.full(_ones(a), np.sum(a))
        if how == "kept axis":
            return lambda a, axis=None, keepdims=False: _kept(np.sum(a, axis=axis), a, axis)
        return None
    if not _array(a) and _whole_plain(axis, keepdims):  # a number
        return lambda a, axis=None, keepdims=False: np.sum(a)
    if how == "whole":
        return lambda a, axis=None, keepdims=False: _total(a)
    if how == "kept":
        return lambda a, axis=None, keepdims=False: np.full(_ones(a), _total(a))
    if how == "axis":
        return lambda a, axis=None, keepdims=False: _fold(a, axis, _SUM)
    if how == "kept axis":
        return lambda a, axis=None, keepdims=False: _kept(_fold(a, axis, _SUM), a, axis)
    return None


@numba_jitable
def _fold_mean(a, axis):
    out = _fold(a, axis, _SUM)
    out /= a.shape[
        axis if axis >= 0 else axis + a.ndim
    ]  # in place: float32 stays float32, as in np.mean
    return out


@numba_jitable
def _mean32(a):
    """The mean of a float32 array, its sum added in float64 and rounded to float32 before the
    division, as NumPy divides its float32 sum (which overflows to inf as NumPy's does)."""
    return np.float32(np.float32(_added64(a)) / a.size)


@numba_of(mean_over)
def _mean_over(a, axis=None, keepdims=False):
    numbers = not _array(a) or not isinstance(a.dtype, (types.Float, types.Complex))
    if numbers and _whole_plain(axis, keepdims):
        return lambda a, axis=None, keepdims=False: np.mean(a)  # a number, or integers
    how = _reduce_how(a, axis, keepdims, float_only=True)
    if how in ("whole", "kept") and a.dtype == types.float32:
        if how == "whole":
            return lambda a, axis=None, keepdims=False: _mean32(a)
        return lambda a, axis=None, keepdims=False: np.full(_ones(a), _mean32(a))
    if how == "whole":
        return lambda a, axis=None, keepdims=False: np.mean(a)
    if how == "kept":
        return lambda a, axis=None, keepdims=False: np.full(_ones(a), np.mean(a))
    if how == "axis":
        return lambda a, axis=None, keepdims=False: _fold_mean(a, axis)
    if how == "kept axis":
        return lambda a, axis=None, keepdims=False: _kept(_fold_mean(a, axis), a, axis)
    return None


@numba_jitable
def _squares_all(a):
    """The sum of the squared deviations of `a`'s elements from their mean, in float64."""
    mean = _added64(a) / a.size
    total = 0.0
    for e in a.flat:
        total += (e - mean) * (e - mean)
    return total


@numba_jitable
def _spread(total, count):
    """A variance from its sum of squares, NumPy's at no degrees of freedom (nan, or inf)."""
    if count <= 0:
        return np.inf if total > 0 else np.nan
    return total / count


@numba_jitable
def _fold_var(a, axis, ddof):
    mean = _kept(_fold_mean(a, axis), a, axis)  # (raises NumPy's AxisError for a bad axis)
    centered = a - mean
    out = _fold(centered * centered, axis, _SUM)
    count = a.shape[axis if axis >= 0 else axis + a.ndim] - ddof
    for i in range(out.size):  # (one by one: Numba's float division by 0 raises)
        out.flat[i] = _spread(out.flat[i], count)
    return out


@numba_jitable
def _var_all(a, ddof):
    return _spread(_squares_all(a), a.size - ddof)


@numba_jitable
def _std_all(a, ddof):
    return np.sqrt(_var_all(a, ddof))


@numba_jitable
def _fold_std(a, axis, ddof):
    return np.sqrt(_fold_var(a, axis, ddof))


@type_test
def _spread_how(a, axis, keepdims, ddof):
    """`_reduce_how` for var and std (floats only: NumPy's of integers are float64), with a
    `ddof` that is an int."""
    return _reduce_how(a, axis, keepdims, True) if _absent(ddof, 0) or _integer(ddof) else None


@type_test
def _number_spread(a):
    """The variance (and std) of a number `a` in its float type (float64 for an integer)."""
    cast = as_dtype(a if isinstance(a, types.Float) else types.float64).type
    return lambda a, axis=None, keepdims=False, ddof=0: cast(_spread(0.0, 1 - ddof))


@numba_of(var_over)
def _var_over(a, axis=None, keepdims=False, ddof=0):
    if not _array(a) and _whole_plain(axis, keepdims):  # a number: no spread (nan at ddof 1)
        return _number_spread(a)
    how = _spread_how(a, axis, keepdims, ddof)
    if how == "whole" and a.dtype == types.float32:  # added in float64, rounded once
        return lambda a, axis=None, keepdims=False, ddof=0: np.float32(_var_all(a, ddof))
    if how == "whole":
        return lambda a, axis=None, keepdims=False, ddof=0: _var_all(a, ddof)
    if how == "kept":
        return lambda a, axis=None, keepdims=False, ddof=0: np.full(
            _ones(a), _var_all(a, ddof), a.dtype
        )
    if how == "axis":
        return lambda a, axis=None, keepdims=False, ddof=0: _fold_var(a, axis, ddof)
    if how == "kept axis":
        return lambda a, axis=None, keepdims=False, ddof=0: _kept(_fold_var(a, axis, ddof), a, axis)
    return None


@numba_of(std_over)
def _std_over(a, axis=None, keepdims=False, ddof=0):
    if not _array(a) and _whole_plain(axis, keepdims):  # a number: no spread (nan at ddof 1)
        return _number_spread(a)
    how = _spread_how(a, axis, keepdims, ddof)
    if how == "whole" and a.dtype == types.float32:
        return lambda a, axis=None, keepdims=False, ddof=0: np.float32(_std_all(a, ddof))
    if how == "whole":
        return lambda a, axis=None, keepdims=False, ddof=0: _std_all(a, ddof)
    if how == "kept":
        return lambda a, axis=None, keepdims=False, ddof=0: np.full(
            _ones(a), _std_all(a, ddof), a.dtype
        )
    if how == "axis":
        return lambda a, axis=None, keepdims=False, ddof=0: _fold_std(a, axis, ddof)
    if how == "kept axis":
        return lambda a, axis=None, keepdims=False, ddof=0: _kept(_fold_std(a, axis, ddof), a, axis)
    return None


@helper
def norm_over(a, axis=None, keepdims=False):
    """np.linalg.norm's 2-norm of the vectors along `axis` (jitted code calls this where the
    function calls `np.linalg.norm(x, axis=k)`: Numba's takes no axis)."""
    return np.linalg.norm(a, axis=axis, keepdims=keepdims)


@numba_of(norm_over)
def _norm_over(a, axis=None, keepdims=False):
    how = _reduce_how(a, axis, keepdims)
    if how is None or not isinstance(a.dtype, types.Float):
        return None
    if how == "whole":
        return lambda a, axis=None, keepdims=False: np.sqrt(_total(a * a))
    if how == "kept":
        return lambda a, axis=None, keepdims=False: np.full(_ones(a), np.sqrt(_total(a * a)))
    if how == "axis":
        return lambda a, axis=None, keepdims=False: np.sqrt(_fold(a * a, axis, _SUM))
    return lambda a, axis=None, keepdims=False: _kept(np.sqrt(_fold(a * a, axis, _SUM)), a, axis)


@helper
def summed_in(a, dtype):
    """`a` in the dtype a sum or mean is asked to add in (`np.sum(a, dtype=np.float32)`, which
    jitted code lowers to `sum_over(summed_in(a, np.float32), None, False)`: Numba's np.sum
    ignores a narrower `dtype=`, and its np.mean takes none)."""
    return np.asarray(a, dtype=dtype)


@type_test
def _float_named(dtype):
    """The float dtype a `dtype=` argument names (`np.float32`, `"float32"`, `x.dtype`), else
    None (an integer, bool or complex dtype: left unlowered, or a string not yet literal)."""
    if isinstance(dtype, types.NumberClass):
        dtype = dtype.instance_type
    elif isinstance(dtype, types.DType):
        dtype = dtype.dtype
    elif isinstance(dtype, types.StringLiteral):
        try:
            named = np.dtype(dtype.literal_value)
        except TypeError:
            return None
        dtype = {np.float32: types.float32, np.float64: types.float64}.get(named.type)
    return dtype if isinstance(dtype, types.Float) else None


@numba_of(summed_in)
def _summed_in(a, dtype):
    want = _float_named(dtype)
    if want is None:
        return None
    cast = as_dtype(want)
    if _array(a):
        return lambda a, dtype: a.astype(cast)
    return lambda a, dtype: cast.type(a)

"""Rules of `x op= v` (the normalizer writes `x_1 = in_place(x op v, x, "add")`, and
`in_place_kind` before a store `y[i] = ...`, pipeline/normalize/statements.py): NumPy's in-place
ufuncs keep the array's shape and dtype, or raise, and these do the same in both modes."""

import typing

import numpy as np

from .common import _array
from .helpers import helper, numba_jitable, numba_of, type_test
from .registry import defvjp, linear

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types
    from numba.np.numpy_support import as_dtype


@helper(nondiff=True)
def refuse_other_kind(new, old, ufunc: str):
    """Raise NumPy's UFuncTypeError where `old op= v` could not store its result `new` into
    `old` (casting rule 'same_kind': int16 into uint8, floats into integers): NumPy's own,
    raised by the ufunc on empty arrays of those dtypes."""
    have = np.result_type(new)
    if have != old.dtype and not np.can_cast(have, old.dtype, "same_kind"):
        func = getattr(np, ufunc)
        func(*[np.zeros(0, have)] * func.nin, out=np.empty(0, old.dtype))


@helper(shape_only=("old",), shaped_like="new")
def in_place(new, old, ufunc="add"):
    """What `old op= v` leaves in the array `old`: `new = old op v` in `old`'s shape and dtype,
    as NumPy's in-place ufuncs store it (the normalizer rewrites `x op= v` as
    `x_1 = in_place(x op v, x)`, pipeline/normalize/statements.py). A float32 `x += v` of a
    float64 `v` computes in float64 and rounds to float32; an int8 one wraps. Where broadcasting
    would give `old` another shape, or the dtype is not of `old`'s kind, it raises NumPy's error.
    A number `old` is rebound, as in Python: `new` as it is."""
    if type(new) is np.ndarray and type(old) is np.ndarray and new.dtype == old.dtype:
        if new.shape == old.shape:
            return new  # (the common case, checked first: no copy)
    elif not isinstance(old, np.ndarray):
        return new
    if np.shape(new) != old.shape:
        old_shape, new_shape = (str(tuple(s)).replace(" ", "") for s in (old.shape, np.shape(new)))
        raise ValueError(
            f"non-broadcastable output operand with shape {old_shape} doesn't match the "
            f"broadcast shape {new_shape}"
        )
    if type(new) is np.ndarray and new.dtype == old.dtype:
        return new
    refuse_other_kind(new, old, ufunc)
    return np.asarray(new).astype(old.dtype, copy=False)


@helper(shape_only=("old",), shaped_like="new")
def in_place_kind(new, old, ufunc="add"):
    """`new`, checked as `y[index] op= v` stores it into the array `old` (its elements cast to
    `old`'s dtype by the store): NumPy raises UFuncTypeError where the dtype is not of `old`'s
    kind. One element (`y[i] += v`) is Python's `y[i] = y[i] + v`, which NumPy truncates."""
    if type(new) is np.ndarray and type(old) is np.ndarray and new.dtype == old.dtype:
        return new  # (the common case, checked first)
    if np.ndim(new) and isinstance(old, np.ndarray):
        refuse_other_kind(new, old, ufunc)
    return new


defvjp(in_place, "new, old, ufunc='add'", new="g", inert=("old", "ufunc"), jvp=linear("new"))
defvjp(in_place_kind, "new, old, ufunc='add'", new="g", inert=("old", "ufunc"), jvp=linear("new"))


@type_test
def _cast_refusal(new, old, ufunc):
    """NumPy's message where `new`'s dtype is not of `old`'s kind (Numba types), else None."""
    have, want = as_dtype(new.dtype if _array(new) else new), as_dtype(old.dtype)
    if have == want or np.can_cast(have, want, "same_kind"):
        return None
    name = ufunc.literal_value if isinstance(ufunc, types.StringLiteral) else "add"
    return (
        f"Cannot cast ufunc {name!r} output from {have!r} to {want!r} with casting rule "
        "'same_kind'"
    )


@numba_of(in_place)
def _in_place(new, old, ufunc="add"):
    if not isinstance(ufunc, (types.StringLiteral, types.Omitted)):
        return None  # (Numba asks again with the string's value, which the message names)
    if not _array(old):
        return lambda new, old, ufunc="add": new  # (a number `new`: `old` is a 0-d array)
    if not _array(new):
        return lambda new, old, ufunc="add": np.asarray(new).astype(old.dtype)
    refusal = _cast_refusal(new, old, ufunc)
    if refusal is not None:

        def refused(new, old, ufunc="add"):
            if old.size >= 0:  # (a test Numba does not fold: the value after it is typed)
                raise TypeError(refusal)
            return old

        return refused
    if new.ndim != old.ndim:

        def wider(new, old, ufunc="add"):
            if old.size >= 0:
                raise ValueError(
                    "non-broadcastable output operand: an in-place update would change the "
                    "array's rank"
                )
            return old

        return wider

    def same(new, old, ufunc="add"):
        _check_shape(new, old)
        return new

    def cast(new, old, ufunc="add"):
        _check_shape(new, old)
        return new.astype(old.dtype)

    return same if new.dtype == old.dtype else cast


@numba_jitable
def _check_shape(new, old):
    if new.shape != old.shape:  # (Numba raises with a constant message only)
        raise ValueError(
            "non-broadcastable output operand: an in-place update would change the array's shape"
        )


@numba_of(in_place_kind)
def _in_place_kind(new, old, ufunc="add"):
    if not isinstance(ufunc, (types.StringLiteral, types.Omitted)):
        return None  # (as `_in_place`)
    refusal = _cast_refusal(new, old, ufunc) if _array(new) and _array(old) else None
    if refusal is None:
        return lambda new, old, ufunc="add": new

    def refused(new, old, ufunc="add"):
        if old.size >= 0:  # (as `_in_place`'s)
            raise TypeError(refusal)
        return new

    return refused

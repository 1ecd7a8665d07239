"""Jitted results in the dtypes Python mode gives them: Numba types a Python float as float64,
so float32 meeting one (`e = 0.0` then `e + r2`, `x * 1.5`) comes back float64 where NumPy 2
keeps float32. transformed.py learns Python mode's dtypes once per kind of arguments and casts
what the compiled code returned to them with these."""

import numpy as np

NARROW = (np.float32, np.float16)


def kind_of(value):
    """What fixes a value's dtype in NumPy's promotions: its type, and its dtype if it has one."""
    return type(value), getattr(value, "dtype", None)


def any_dtype(values, dtypes) -> bool:
    """Whether any array or NumPy number among `values` (tuples looked into) has one of `dtypes`."""
    for v in values:
        if isinstance(v, tuple) and any_dtype(v, dtypes):
            return True
        if isinstance(v, (np.ndarray, np.generic)) and v.dtype.type in dtypes:
            return True
    return False


def dtypes_of(value):
    """The dtype of each array or NumPy number in `value` (tuples looked into), else None."""
    if isinstance(value, tuple):
        return tuple(dtypes_of(v) for v in value)
    return value.dtype if isinstance(value, (np.ndarray, np.generic)) else None


def cast_to(value, dtype):
    """`value` with the float `dtype` Python mode gave it (a tuple: each part with its own)."""
    if isinstance(value, tuple):
        return tuple(cast_to(v, d) for v, d in zip(value, dtype))
    if dtype is None or not isinstance(value, (np.ndarray, np.generic)) or value.dtype == dtype:
        return value
    if not (np.issubdtype(dtype, np.floating) and np.issubdtype(value.dtype, np.floating)):
        return value
    return value.astype(dtype) if isinstance(value, np.ndarray) else dtype.type(value)

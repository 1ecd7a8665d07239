"""The checks every transform makes of its arguments and results before any generated code runs
or returns: floats only (an integer, a bool or an ndarray subclass refused by name), no complex
value reaching a real derivative, `parallel` only with `jit`."""

from __future__ import annotations

import numbers

import numpy as np

from .errors import NonDifferentiableInputError, S2SADError


def check_parallel(parallel, jit) -> None:
    """`parallel=True` runs loops on Numba's threads: it needs `jit`."""
    if parallel not in (False, True):
        raise ValueError(f"parallel must be False or True, not {parallel!r}")
    if parallel and not jit:
        raise S2SADError(
            "parallel=True runs loops on Numba's threads, so it needs jit=True (or 'strict')",
            hint="pass jit=True as well, or leave parallel out",
        )


def check_input(name: str, value) -> None:
    if (type(value) is np.ndarray and value.dtype.kind == "f") or type(value) is float:
        return  # the common case, without NumPy's type tests
    if isinstance(value, (bool, np.bool_)) or (
        isinstance(value, numbers.Integral) and not isinstance(value, np.ndarray)
    ):
        raise NonDifferentiableInputError(
            f"argument '{name}' is an integer ({value!r}); gradients exist only for floats",
            hint=f"pass {name} as a float, e.g. {float(value)!r}, or leave it out of wrt",
        )
    if isinstance(value, np.ndarray) and type(value) is not np.ndarray:
        kind = f"{type(value).__module__}.{type(value).__qualname__}"
        raise NonDifferentiableInputError(
            f"argument '{name}' is a {kind}, a subclass of np.ndarray whose operations differ "
            "from NumPy's on plain arrays (masks, matrix products, units); s2sad differentiates "
            "plain arrays",
            hint=f"pass np.asarray({name}) (for a masked array, apply its mask in the function)",
        )
    dtype = (
        np.result_type(value)
        if isinstance(value, (np.ndarray, np.generic, float))
        else np.asarray(value).dtype
    )
    if not np.issubdtype(dtype, np.floating):
        raise NonDifferentiableInputError(
            f"argument '{name}' has dtype {dtype}; gradients exist only for real floats",
            hint=f"convert it first, e.g. {name}.astype(float), or leave it out of wrt",
        )


def refuse_complex(value, what: str) -> None:
    """A complex value the transform did not see (written into a complex array): an error,
    never a derivative with its imaginary half dropped."""
    if np.iscomplexobj(value):
        raise S2SADError(
            f"a complex value reached the {what}; s2sad does not differentiate complex values yet",
            hint="keep the differentiated path real, or give the function a rule with "
            "s2sad.register_vjp",
        )

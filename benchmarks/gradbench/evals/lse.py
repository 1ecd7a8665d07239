"""gradbench `lse`: log-sum-exp of a vector, with the max-shift trick, and its gradient.

Functions: `primal` (a float) and `gradient` (a list as long as `x`).
"""

from __future__ import annotations

import numba
import numpy as np

import s2sad


def lse(x):
    """log(sum(exp(x))), shifted by the largest element so that no exp overflows."""
    a = np.max(x)
    return a + np.log(np.sum(np.exp(x - a)))


def prepare(function: str, input: dict, jit: bool):
    x = np.asarray(input["x"], dtype=np.float64)
    if function == "primal":
        primal = numba.njit(lse) if jit else lse
        run = lambda: primal(x)  # noqa: E731
    elif function == "gradient":
        gradient = s2sad.grad(lse, jit=jit)
        run = lambda: gradient(x)  # noqa: E731
    else:
        raise ValueError(f"lse has no function {function!r}")
    run()  # warm up: transform, compile
    return run


def output(function: str, result):
    if function == "primal":
        return float(result)
    return np.asarray(result, dtype=np.float64).tolist()

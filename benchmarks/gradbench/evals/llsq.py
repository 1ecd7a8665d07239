"""gradbench `llsq`: a linear least-squares objective (cmpad's llsq_obj) and its gradient.

    y(x) = 1/2 sum_i (s_i - sum_j x_j t_i**j)**2,   t_i = -1 + 2 i / (n - 1),   s_i = sign(t_i)

Functions: `primal` (a float) and `gradient` (a list as long as `x`), for inputs `x` (m
coefficients) and `n` (the number of sample points).
"""

from __future__ import annotations

import numba
import numpy as np

import s2sad


def llsq(x, n):
    """Half the squared residual of the polynomial with coefficients `x` fitted to sign(t)."""
    t = -1.0 + np.arange(n) * 2.0 / (n - 1)
    residual = np.sign(t)
    for j in range(x.shape[0]):
        residual = residual - x[j] * t**j
    return 0.5 * np.sum(residual**2)


def prepare(function: str, input: dict, jit: bool):
    x = np.asarray(input["x"], dtype=np.float64)
    n = int(input["n"])
    if function == "primal":
        primal = numba.njit(llsq) if jit else llsq
        run = lambda: primal(x, n)  # noqa: E731
    elif function == "gradient":
        gradient = s2sad.grad(llsq, wrt="x", jit=jit)
        run = lambda: gradient(x, n)  # noqa: E731
    else:
        raise ValueError(f"llsq has no function {function!r}")
    run()  # warm up: the transform, and Numba's compile under jit
    return run


def output(function: str, result):
    if function == "primal":
        return float(result)
    return np.asarray(result, dtype=np.float64).tolist()

"""Loops, branches and in-place writes: the code JAX cannot reverse-differentiate as written."""

import math

import numpy as np

EMIT = {
    "smooth": {"wrt": ["x", "a"]},
    "euler": {"wrt": ["y0", "k"]},
    "newton_sqrt": {"wrt": ["a"]},
}


def smooth(x, a):
    """Exponential smoothing that only follows rises, written element by element."""
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        if x[i] > y[i - 1]:
            y[i] = a * y[i - 1] + (1 - a) * x[i]
        else:
            y[i] = y[i - 1]
    return np.sum(y**2)


def euler(y0, k, n):
    """Explicit Euler steps of y' = -k y + sin(y)."""
    y = y0
    dt = 0.01
    for i in range(n):
        y = y + dt * (-k * y + math.sin(y))
    return y


def newton_sqrt(a):
    """Newton's iteration for sqrt(a), run until it converges."""
    x = a
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


def inputs(rng):
    """Arguments for each function in EMIT, for tests and the CLI docs."""
    return {
        "smooth": (rng.normal(size=8), 0.7),
        "euler": (0.3, 0.8, 1000),
        "newton_sqrt": (2.0,),
    }

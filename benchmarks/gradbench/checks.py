"""Independent checks of the tool's outputs at gradbench's default sizes (timings.py), where a
reference costs little: `check(eval, function, input, output)` says "ok", "WRONG (why)" or
"-" (no check here: the tests check those evals against central differences, on small inputs).

The references are written without s2sad: closed forms (hello; lse: the softmax; llsq: the
residual against the Vandermonde matrix; det: np.linalg.det and the cofactor matrix; kmeans:
the cost by direct distances, and J / H = C_j - the mean of C_j's points), the values gradbench's
particle and saddle evals expect, and for ode central differences of the primal along a random
direction, compared with the gradient's dot product with it. The tolerances are far tighter than
gradbench's own validation (|a - b| / max(|a| + |b|, 1) <= 1e-4, after ADBench).
"""

from __future__ import annotations

import numpy as np

from .evals import ode

PARTICLE = 0.2071918746486116  # what gradbench's particle eval expects for w = 0
SADDLE = [8.246324826140356e-06] * 4  # ... and its saddle eval for start (1, 1)


def check(name: str, function: str, input, output) -> str:
    if name == "ode":
        return ode_check(function, input, np.asarray(output, dtype=np.float64))
    reference = REFERENCES.get(name)
    if reference is None:
        return "-"
    expected, rtol, atol = reference(function, input)
    return compare(np.asarray(output, dtype=np.float64), expected, rtol, atol)


def compare(got, expected, rtol: float, atol: float) -> str:
    if got.shape != np.shape(expected):
        return f"WRONG (shape {got.shape}, expected {np.shape(expected)})"
    if np.allclose(got, expected, rtol=rtol, atol=atol):
        return "ok"
    return f"WRONG (max |error| {np.max(np.abs(got - expected)):.3g})"


def hello(function, x):
    return (x * x if function == "square" else 2.0 * x), 1e-15, 0.0


def lse(function, input):
    x = np.asarray(input["x"])
    shifted = np.exp(x - x.max())
    if function == "primal":
        return x.max() + np.log(shifted.sum()), 1e-12, 0.0
    # atol: the max's term of the gradient is 1 - sum(softmax) at the largest entry, zero in
    # exact arithmetic and a rounding error of the sum in floating point (1e-14 at n = 1280000
    # under jit, whose sum runs in order where NumPy's sums pairwise)
    return shifted / shifted.sum(), 1e-10, 1e-12


def llsq(function, input):
    x, n = np.asarray(input["x"]), int(input["n"])
    t = -1.0 + np.arange(n) * 2.0 / (n - 1)
    powers = t[:, None] ** np.arange(x.shape[0])[None, :]  # (n, m)
    residual = np.sign(t) - powers @ x
    if function == "primal":
        return 0.5 * residual @ residual, 1e-10, 0.0
    return -(powers.T @ residual), 1e-9, 1e-9


def det(function, input):
    ell = int(input["ell"])
    M = np.asarray(input["A"]).reshape(ell, ell)
    value = np.linalg.det(M)
    if function == "primal":
        return value, 1e-9, 1e-12
    return (value * np.linalg.inv(M).T).ravel(), 1e-7, 1e-10


def kmeans(function, input):
    points, centroids = np.asarray(input["points"]), np.asarray(input["centroids"])
    k = centroids.shape[0]
    nearest = np.empty(points.shape[0], dtype=np.int64)
    best = np.empty(points.shape[0])
    for start in range(0, points.shape[0], 1024):  # direct differences, a block at a time
        block = points[start : start + 1024]
        squares = np.sum((block[:, None, :] - centroids[None, :, :]) ** 2, axis=2)
        nearest[start : start + 1024] = np.argmin(squares, axis=1)
        best[start : start + 1024] = np.min(squares, axis=1)
    if function == "cost":
        return best.sum(), 1e-10, 0.0
    counts = np.bincount(nearest, minlength=k)[:, None]
    sums = np.zeros_like(centroids)
    np.add.at(sums, nearest, points)
    return centroids - sums / counts, 1e-9, 1e-12


def particle(function, input):
    return PARTICLE, 1e-9, 0.0


def saddle(function, input):
    return SADDLE, 1e-6, 1e-12


def ode_check(function, input, got) -> str:
    x, s = np.asarray(input["x"]), int(input["s"])
    if function == "primal":
        return "-"
    direction = np.random.default_rng(0).standard_normal(x.shape)
    h = 1e-6
    slope = (ode.ode_last(x + h * direction, s) - ode.ode_last(x - h * direction, s)) / (2 * h)
    if got.shape != x.shape:
        return f"WRONG (shape {got.shape}, expected {x.shape})"
    return compare(got @ direction, slope, 1e-6, 1e-9)


REFERENCES = {
    "hello": hello,
    "lse": lse,
    "llsq": llsq,
    "det": det,
    "kmeans": kmeans,
    "particle": particle,
    "saddle": saddle,
}

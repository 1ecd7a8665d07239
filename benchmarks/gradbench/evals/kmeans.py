"""gradbench `kmeans`: the k-means cost and one Newton direction for the centroids.

    cost(P, C) = sum_i min_j |P_i - C_j|^2

Functions: `cost` (a float) and `dir`, the gradient J of the cost with respect to the centroids
divided elementwise by the Hessian's diagonal H (the Hessian is diagonal, so J H^-1 is J / H),
as a list of k rows of d numbers. H is the Hessian-vector product with a vector of ones: forward
mode (s2sad.jvp) applied to the gradient code s2sad.grad writes (forward over reverse).

jit=True changes nothing here (Numba cannot compile np.min over an axis), so the tool's jit mode
runs the NumPy code.
"""

from __future__ import annotations

import numpy as np

import s2sad


def cost(points, centroids):
    """Sum over the points of the squared distance to the nearest centroid."""
    # |p - c|^2 = |p|^2 + |c|^2 - 2 p.c for every pair at once: an (n, k) matrix
    p2 = np.sum(points**2, axis=1)
    c2 = np.sum(centroids**2, axis=1)
    dists = p2[:, None] + c2[None, :] - 2.0 * (points @ centroids.T)
    return np.sum(np.min(dists, axis=1))


def gradient_code(transformed, *args):
    """The function s2sad generated for `transformed` (specialized on these arguments), and
    the values of the user's data it takes after them: plain Python that s2sad can read again
    (s2sad cannot yet transform a call to a transformed function, issue #15)."""
    compiled, data = transformed.prepared(transformed._bind(args, {}))
    return compiled.functions[compiled.name], data


def prepare(function: str, input: dict, jit: bool):
    points = np.asarray(input["points"], dtype=np.float64)
    centroids = np.asarray(input["centroids"], dtype=np.float64)
    if function == "cost":
        run = lambda: cost(points, centroids)  # noqa: E731
    elif function == "dir":
        generated, data = gradient_code(s2sad.grad(cost, wrt="centroids"), points, centroids)
        # forward over the gradient code; NumPy mode in both modes: Numba has no
        # np.min(..., axis=), and jit=True would warn and run this same Python code
        hvp = s2sad.jvp(generated, wrt=1)
        ones = np.ones_like(centroids)

        def run():
            j, h = hvp(points, centroids, *data, tangent=ones)
            return j / h

    else:
        raise ValueError(f"kmeans has no function {function!r}")
    run()  # warm up: the transforms, and Numba's compile under jit
    return run


def output(function: str, result):
    if function == "cost":
        return float(result)
    return np.asarray(result, dtype=np.float64).tolist()

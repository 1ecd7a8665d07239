"""gradbench `kmeans`: the k-means cost and one Newton direction for the centroids.

    cost(P, C) = sum_i min_j |P_i - C_j|^2

Functions: `cost` (a float) and `dir`, the gradient J of the cost with respect to the centroids
divided elementwise by the Hessian's diagonal H, as a list of k rows of d numbers.

The Hessian is diagonal in the centroids' coordinates (each point's term moves only its nearest
centroid's own coordinates, quadratically), so its diagonal is the Hessian-vector product with
a vector of ones: forward mode (s2sad.jvp) over the gradient code s2sad.grad writes (forward
over reverse), one sweep, no dense Hessian. gradbench's own tools take the same route: its JAX
tool (python/gradbench/gradbench/tools/jax/kmeans.py) takes `jax.jvp` of `jax.grad` of the cost
along ones, its PyTorch one (python/gradbench/gradbench/pytorch/kmeans.py)
`torch.autograd.functional.vhp` with ones.

The cost is written with each point's nearest centroid by index: `nearest` is an integer array
(np.argmin, which s2sad does not differentiate through), the cost the squared distances to
those centroids. Its value and its derivatives are those of the min over all pairs (at a point
with no tie, which centroid is nearest does not change under a small step), but the arrays the
derivatives keep and sweep are (n, d), where the min over an (n, k) distance matrix keeps and
sweeps (n, k) ones: at gradbench's largest default size (k = 1000, n = 100000) each of those
is 800 MB, and forward over reverse needed a dozen. `nearest` computes the distances a block of
points at a time. Both transforms compile under jit=True.
"""

from __future__ import annotations

import numpy as np

import s2sad

FUNCTIONS = ("cost", "dir")
BLOCK = 4096  # points per block of the distance matrix: BLOCK x k distances at a time


def nearest(points, centroids):
    """The index of each point's nearest centroid (|p - c|^2 = |p|^2 + |c|^2 - 2 p.c, and |p|^2
    is the same for every centroid), computed a block of points at a time."""
    c2 = np.sum(centroids**2, axis=1)
    n = points.shape[0]
    out = np.zeros(n, dtype=np.int64)
    for start in range(0, n, BLOCK):
        block = points[start : start + BLOCK]
        dists = c2[None, :] - 2.0 * (block @ centroids.T)
        out[start : start + BLOCK] = np.argmin(dists, axis=1)
    return out


def cost(points, centroids):
    """Sum over the points of the squared distance to the nearest centroid."""
    diff = points - centroids[nearest(points, centroids)]
    return np.sum(diff**2)


def gradient_and_hvp(points, centroids, jit: bool):
    """`(v) -> (J, H v)` at these points and centroids: J the cost's gradient with respect to
    the centroids, H v its Hessian-vector product, by one forward-mode sweep over the gradient
    code (forward over reverse).

    Transforms do not compose yet (issue #15: `s2sad.jvp(s2sad.grad(cost, wrt="centroids"),
    wrt="centroids")`), so this reaches s2sad's internals for the generated gradient code (its
    `prepared` specialization and `compiled.functions`): plain Python that s2sad.jvp reads like
    any function. This function is the one place to switch to the composed public API."""
    gradient = s2sad.grad(cost, wrt="centroids")
    compiled, data = gradient.prepared(gradient._bind((points, centroids), {}))
    generated = compiled.functions[compiled.name]
    hvp = s2sad.jvp(generated, wrt=1, jit=jit)
    return lambda v: hvp(points, centroids, *data, tangent=v)


def prepare(function: str, input: dict, jit: bool):
    points = np.asarray(input["points"], dtype=np.float64)
    centroids = np.asarray(input["centroids"], dtype=np.float64)
    if function == "cost":
        run = lambda: cost(points, centroids)  # noqa: E731
    elif function == "dir":
        both = gradient_and_hvp(points, centroids, jit)
        ones = np.ones_like(centroids)

        def run():
            j, h = both(ones)  # H ones = the diagonal, H being diagonal
            return j / h

    else:
        raise ValueError(f"kmeans has no function {function!r}")
    run()  # warm up: the transforms, and Numba's compile under jit
    return run


def output(function: str, result):
    if function == "cost":
        return float(result)
    return np.asarray(result, dtype=np.float64).tolist()

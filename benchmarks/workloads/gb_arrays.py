"""gradbench's array evals, side by side with the peers: `lse`, `llsq`, `det`, `ode` (gradients)
and `kmeans` (a Newton direction: gradient over Hessian diagonal).

s2sad differentiates the gradbench tool's own NumPy code (benchmarks/gradbench/evals/): the
objective each case times is that module's function, and the s2sad row is what the tool times
for the eval's derivative. The peers run the same algorithm, written for each framework:

- `lse`: log(sum(exp(x - max x))) + max x, gradient in x (n);
- `llsq`: 1/2 |sign(t) - sum_j x_j t^j|^2 over n sample points, a loop over the m
  coefficients, gradient in x (m);
- `det`: the determinant by expansion by minors, run level by level over all branches at once
  (the eval's formulation: ell! products of ell factors), gradient in A (ell^2);
- `ode`: the last component of y(2) for y' = (x_0, x_1 y_0, ..., x_{n-1} y_{n-2}), y(0) = 0,
  by s steps of classic Runge-Kutta over the whole state array; gradient in x. JAX runs the
  steps with lax.fori_loop, the others with a Python loop;
- `kmeans`: J / H for the centroids, J the gradient of sum_i min_j |P_i - C_j|^2 and H the
  Hessian's diagonal (Hessian-vector product with ones). s2sad: forward mode over the code its
  reverse mode generates (the eval's `dir`), the cost written with each point's nearest centroid
  by index (np.argmin), so that the derivatives sweep (n, d) arrays; the peers as gradbench's
  own JAX and PyTorch tools write it, a min over the (n, k) all-pairs distance matrix, and
  JAX: jvp of grad, jitted; PyTorch: torch.func.jvp of torch.func.grad; autograd: reverse over
  reverse (the gradient of sum(J)).

Sizes are among gradbench's defaults (the smaller ones with --quick; with the full run, the
largest default of each). All cases compile under Numba, so they also get the jit table (the
tool's --jit).
"""

from __future__ import annotations

import functools
import types

import numpy as np

from benchmarks.gradbench.evals import det as det_eval
from benchmarks.gradbench.evals import kmeans as kmeans_eval
from benchmarks.gradbench.evals import llsq as llsq_eval
from benchmarks.gradbench.evals import lse as lse_eval
from benchmarks.gradbench.evals import ode as ode_eval

from .common import Case, rng_for

SIZES = {
    "smoke": {"lse": [4], "llsq": [(5, 7)], "det": [4], "ode": [(5, 3)], "kmeans": [(3, 12, 2)]},
    "quick": {
        "lse": [10000],
        "llsq": [(128, 1024)],
        "det": [7],
        "ode": [(1000, 100)],
        "kmeans": [(100, 10000, 8)],
    },
    "full": {  # a middle size and the largest of gradbench's defaults
        "lse": [10000, 1280000],
        "llsq": [(128, 1024), (128, 16392)],
        "det": [7, 11],
        "ode": [(1000, 100), (100000, 100)],
        "kmeans": [(100, 10000, 8), (1000, 100000, 16)],
    },
}
# autograd's reverse over reverse keeps many (n, k) matrices: 800 MB each at n = 100000
KMEANS_AUTOGRAD_N = 10000


# ----------------------------------------------------------------------------- inputs


def lse_inputs(n: int) -> dict:
    return {"x": rng_for("lse", {"n": n}).random(n)}


def llsq_inputs(m: int, n: int) -> dict:
    return {"x": rng_for("llsq", {"m": m, "n": n}).random(m), "n": n}


def det_inputs(ell: int) -> dict:
    return {"A": rng_for("det", {"ell": ell}).random(ell * ell), "ell": ell}


def ode_inputs(n: int, s: int) -> dict:
    return {"x": rng_for("ode", {"n": n, "s": s}).random(n), "s": s}


def kmeans_inputs(k: int, n: int, d: int) -> dict:
    points = rng_for("kmeans", {"k": k, "n": n, "d": d}).random((n, d))
    return {"points": points, "centroids": points[-k:].copy()}  # no cluster is empty


# ----------------------------------------------------------------------------- generic peers


def llsq_samples(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The sample points t and the targets sign(t): constants, computed in NumPy."""
    t = -1.0 + np.arange(n) * 2.0 / (n - 1)
    return t, np.sign(t)


def det_plan(ell: int) -> tuple[list, np.ndarray, np.ndarray]:
    """The index structure of the level-by-level expansion (it depends on ell alone): for each
    level k < ell - 2, the signs and each term's free columns (an index array), then the
    columns of the 2 x 2 minors left. Mirrors the eval's `det`, computed once in NumPy."""
    free = np.arange(ell).reshape(1, ell)
    levels = []
    for k in range(ell - 2):
        m = ell - k
        levels.append(((-1.0) ** np.arange(m), free))
        position = np.arange(m - 1)
        keep = position[None, :] + (position[None, :] >= np.arange(m)[:, None])
        free = free[:, keep].reshape(-1, m - 1)
    return levels, free[:, 0], free[:, 1]


def make_det(plan):
    """det(A, ell) for an array module; `plan` is det_plan(ell) in that module's arrays."""
    levels, c0, c1 = plan

    def det(A, ell):
        M = A.reshape((ell, ell))
        terms = None
        for k, (signs, free) in enumerate(levels):
            branch = signs * M[k][free]
            terms = (branch if terms is None else terms[:, None] * branch).reshape(-1)
        first, second = M[ell - 2], M[ell - 1]
        minors = first[c0] * second[c1] - first[c1] * second[c0]
        return (minors if terms is None else terms * minors).sum()

    return det


def make_array_peers(xp, const, cat):
    """lse, llsq and ode for a NumPy-like module `xp` (jax.numpy, autograd.numpy, torch):
    `const` turns a NumPy constant into that module's array, `cat` concatenates a list."""

    def lse(x):
        a = xp.max(x)
        return a + xp.log(xp.sum(xp.exp(x - a)))

    def llsq(x, n):
        t, target = llsq_samples(n)
        t, residual = const(t), const(target)
        for j in range(x.shape[0]):
            residual = residual - x[j] * t**j
        return 0.5 * xp.sum(residual**2)

    def rhs(x, y):
        return cat([x[:1], x[1:] * y[:-1]])

    def rk4(x, y, h):
        k1 = rhs(x, y)
        k2 = rhs(x, y + h / 2 * k1)
        k3 = rhs(x, y + h / 2 * k2)
        k4 = rhs(x, y + h * k3)
        return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

    def ode(x, s):
        h = 2.0 / s
        y = x * 0.0
        for _ in range(s):
            y = rk4(x, y, h)
        return y[-1]

    return {"lse": lse, "llsq": llsq, "ode": ode, "rk4": rk4}


def _jax():
    import jax.numpy as jnp

    return make_array_peers(jnp, jnp.asarray, jnp.concatenate)


def _torch():
    import torch

    return make_array_peers(torch, torch.tensor, torch.cat)


def _autograd():
    import autograd.numpy as anp

    return make_array_peers(anp, lambda a: a, anp.concatenate)


def jax_ode():
    """The RK4 steps in a lax.fori_loop: one traced step, not s unrolled ones."""
    from jax import lax

    rk4 = _jax()["rk4"]

    def ode(x, s):
        h = 2.0 / s
        return lax.fori_loop(0, s, lambda i, y: rk4(x, y, h), x * 0.0)[-1]

    return ode


def njit_chain(module, names: tuple[str, ...]):
    """numba.njit of `module`'s function names[-1], whose helpers names[:-1] (in the order they
    call each other) are plain Python functions Numba cannot call: each is compiled with its
    helpers' compiled versions in its globals (s2sad's jit inlines them instead)."""

    def build(f, inputs: dict):
        import numba

        compiled = {}
        for name in names:
            fn = getattr(module, name)
            scope = {**fn.__globals__, **compiled}
            # (cached on disk, as builders.build_numba_primal)
            compiled[name] = numba.njit(types.FunctionType(fn.__code__, scope, name), cache=True)
        args = list(inputs.values())
        return lambda: compiled[names[-1]](*args)

    return build


njit_ode = njit_chain(ode_eval, ("ode_rhs", "ode_solve", "ode_last"))
njit_kmeans = njit_chain(kmeans_eval, ("nearest", "cost"))


@functools.cache
def _det_for(ell: int, framework: str):
    """The peer's det for this ell, its index plan built once (outside the timed calls)."""
    levels, c0, c1 = det_plan(ell)
    if framework == "torch":
        import torch

        levels = [(torch.tensor(s), torch.tensor(f)) for s, f in levels]
        c0, c1 = torch.tensor(c0), torch.tensor(c1)
    return make_det((levels, c0, c1))


def det_factory(framework: str):
    def factory():
        return lambda A, ell: _det_for(ell, framework)(A, ell)

    return factory


# ----------------------------------------------------------------------------- kmeans


def kmeans_torch():
    import torch

    def cost(points, centroids):
        p2 = torch.sum(points**2, dim=1)
        c2 = torch.sum(centroids**2, dim=1)
        dists = p2[:, None] + c2[None, :] - 2.0 * (points @ centroids.T)
        return torch.sum(torch.amin(dists, dim=1))

    return cost


def kmeans_generic(xp):
    def cost(points, centroids):
        p2 = xp.sum(points**2, axis=1)
        c2 = xp.sum(centroids**2, axis=1)
        dists = p2[:, None] + c2[None, :] - 2.0 * (points @ centroids.T)
        return xp.sum(xp.min(dists, axis=1))

    return cost


def kmeans_jax():
    import jax.numpy as jnp

    return kmeans_generic(jnp)


def kmeans_autograd():
    import autograd.numpy as anp

    return kmeans_generic(anp)


def _one(result):
    return (np.asarray(result, dtype=np.float64),)


def build_s2sad_kmeans(f, inputs: dict, wrt, jit: bool = False):
    """The eval's `dir`: prepare() transforms (grad, then jvp over the generated gradient code,
    compiled under jit) and runs it once; it is called at the row's first call, so that the
    first call includes the transforms. The probe, which the runner times with empty caches,
    does the two transforms alone (without Numba's compile)."""
    prepared = []

    def run():
        if not prepared:
            prepared.append(kmeans_eval.prepare("dir", inputs, jit))
        return prepared[0]()

    def probe():
        both = kmeans_eval.gradient_and_hvp(inputs["points"], inputs["centroids"], False)
        both(np.ones_like(inputs["centroids"]))

    return run, _one, probe


def build_s2sad_kmeans_jit(f, inputs: dict, wrt):
    return build_s2sad_kmeans(f, inputs, wrt, jit=True)


def build_jax_kmeans(f, inputs: dict, wrt):
    import jax
    import jax.numpy as jnp

    gradient = jax.grad(f, argnums=1)

    @jax.jit
    def direction(points, centroids):
        J, H = jax.jvp(lambda c: gradient(points, c), (centroids,), (jnp.ones_like(centroids),))
        return J / H

    points, centroids = (jnp.asarray(v) for v in inputs.values())
    return (lambda: jax.block_until_ready(direction(points, centroids))), _one


def build_torch_kmeans(f, inputs: dict, wrt):
    import torch
    from torch.func import grad, jvp

    points, centroids = (torch.tensor(v) for v in inputs.values())
    gradient = grad(f, argnums=1)
    ones = torch.ones_like(centroids)

    def run():
        with torch.no_grad():
            J, H = jvp(lambda c: gradient(points, c), (centroids,), (ones,))
            return J / H

    return run, lambda r: _one(r.numpy())


def build_autograd_kmeans(f, inputs: dict, wrt):
    import autograd.numpy as anp
    from autograd import grad

    gradient = grad(f, 1)
    diagonal = grad(lambda p, c: anp.sum(gradient(p, c)), 1)  # H 1 = d(sum J)/dC
    points, centroids = inputs.values()
    return (lambda: gradient(points, centroids) / diagonal(points, centroids)), _one


# ----------------------------------------------------------------------------- cases


def _peers(name: str) -> dict:
    return {
        "jax": lambda: _jax()[name],
        "torch": lambda: _torch()[name],
        "autograd": lambda: _autograd()[name],
    }


def cases(mode: str) -> list[Case]:
    sizes = SIZES[mode]
    out = []

    def add(workload, size, make_inputs, numpy_f, wrt, peers, **extra):
        out.append(
            Case(
                workload=workload,
                family="gradbench",
                size=size,
                make_inputs=make_inputs,
                numpy_f=numpy_f,
                wrt=wrt,
                peers=peers,
                **extra,
            )
        )

    for n in sizes["lse"]:
        add("lse", {"n": n}, lse_inputs, lse_eval.lse, ("x",), _peers("lse"), jit=True, quick=False)
    for m, n in sizes["llsq"]:
        add(
            "llsq",
            {"m": m, "n": n},
            llsq_inputs,
            llsq_eval.llsq,
            ("x",),
            _peers("llsq"),
            jit=True,
            quick=False,
        )
    det_peers = {p: det_factory(p) for p in ("jax", "torch", "autograd")}
    for ell in sizes["det"]:
        add("det", {"ell": ell}, det_inputs, det_eval.det, ("A",), det_peers, jit=True, quick=False)
    ode_peers = {**_peers("ode"), "jax": jax_ode}
    for n, s in sizes["ode"]:
        add(
            "ode",
            {"n": n, "s": s},
            ode_inputs,
            ode_eval.ode_last,
            ("x",),
            ode_peers,
            jit=True,
            parallel=True,
            build={"numba-primal": njit_ode},
            notes=["RK4 over the state array; JAX: lax.fori_loop over the steps"],
        )
    for k, n, d in sizes["kmeans"]:
        reduced = {"autograd": {"k": k, "n": KMEANS_AUTOGRAD_N, "d": d}}
        add(
            "kmeans",
            {"k": k, "n": n, "d": d},
            kmeans_inputs,
            kmeans_eval.cost,
            ("centroids",),
            {"jax": kmeans_jax, "torch": kmeans_torch, "autograd": kmeans_autograd},
            jit=True,
            build={
                "s2sad": build_s2sad_kmeans,
                "s2sad-jit": build_s2sad_kmeans_jit,
                "numba-primal": njit_kmeans,
                "jax": build_jax_kmeans,
                "torch": build_torch_kmeans,
                "autograd": build_autograd_kmeans,
            },
            reduced=reduced if n > KMEANS_AUTOGRAD_N else {},
            notes=[
                (
                    "J / diag(H) for the centroids (the eval's dir), not a gradient: s2sad jvp over"
                    " its grad code, the cost by each point's nearest centroid (np.argmin); the"
                    " peers' cost a min over the (n, k) distances, as gradbench's tools write it:"
                    " JAX jvp(grad); torch.func jvp(grad); autograd grad(sum(grad))"
                )
            ],
        )
    return out

"""Gaussian mixture model log-likelihood with a Wishart prior (ADBench's "GMM" objective).

Parameters of a K-component mixture in d dimensions:

- `alphas` (K,): unnormalised log mixture weights, w = softmax(alphas);
- `means` (K, d): the component means mu_k;
- `icf` (K, d + d(d-1)/2): each component's inverse-covariance factor Q_k, a lower-triangular
  matrix with diagonal exp(q_k) (q_k = icf[k, :d]) and strictly-lower entries icf[k, d:] in
  row-major order (the order of np.tril_indices(d, -1)), so that Sigma_k^-1 = Q_k^T Q_k.

With data x (n, d), the objective is

    sum_i logsumexp_k( alphas_k + sum(q_k) - 0.5 |Q_k (x_i - mu_k)|^2 )
      - n logsumexp(alphas)
      + sum_k [ 0.5 gamma^2 (|exp(q_k)|^2 + |L_k|_F^2) - m sum(q_k) ]
      + const

where L_k is the strictly-lower part of Q_k and the last sum is the Wishart-prior term with
parameters (gamma, m). `const` gathers the terms without parameters,
-n d/2 log(2 pi) - K (n' d (log gamma - log(2)/2) - log Gamma_d(n'/2)) with n' = d + m + 1;
it is computed once from the sizes (`wishart_const`) and passed in, as it has no gradient.

The vectorised version builds all Q_k at once: the strictly-lower entries get a zero column
appended and are gathered with a constant (d, d) integer index array (`tril_index`) whose
diagonal and upper entries point at that zero; the data are centred as a (K, d, n) array and
multiplied by the Q_k with one batched matmul. The loop version computes the same number with
plain Python loops and in-place writes, as a hand-written reference would.
"""

from __future__ import annotations

import math

import numpy

import s2sad

from .common import Case, rng_for

# (d, K, n): ADBench-like sizes; the largest runs only without --quick
SIZES_QUICK = [(2, 5, 1000), (10, 25, 1000)]
SIZES_FULL = SIZES_QUICK + [(64, 200, 10000)]
SIZES_SMOKE = [(3, 4, 6)]


# ----------------------------------------------------------------------------- inputs


def tril_index(d: int) -> numpy.ndarray:
    """(d, d) int array: position of Q[r, c] in the strictly-lower entries, or P (the appended
    zero) on and above the diagonal."""
    n_lower = d * (d - 1) // 2
    index = numpy.full((d, d), n_lower, dtype=numpy.int64)
    rows, cols = numpy.tril_indices(d, -1)
    index[rows, cols] = numpy.arange(n_lower)
    return index


def wishart_const(d: int, K: int, n: int, gamma: float, m: float) -> float:
    n_prime = d + m + 1
    log_mgamma = 0.25 * d * (d - 1) * math.log(math.pi) + sum(
        math.lgamma(0.5 * n_prime + 0.5 * (1 - j)) for j in range(1, d + 1)
    )
    c = n_prime * d * (math.log(gamma) - 0.5 * math.log(2.0)) - log_mgamma
    return -0.5 * n * d * math.log(2 * math.pi) - K * c


def make_inputs(d: int, K: int, n: int) -> dict:
    rng = rng_for("gmm", {"d": d, "K": K, "n": n})
    gamma, m = 1.0, 0.0
    return {
        "alphas": rng.normal(size=K),
        "means": rng.uniform(size=(K, d)),
        "icf": rng.normal(scale=0.3, size=(K, d + d * (d - 1) // 2)),
        "x": rng.uniform(size=(n, d)),
        "tril_index": tril_index(d),
        "eye": numpy.eye(d),
        "gamma": gamma,
        "m": m,
        "const": wishart_const(d, K, n, gamma, m),
    }


def make_loop_inputs(d: int, K: int, n: int) -> dict:
    full = make_inputs(d, K, n)
    return {k: full[k] for k in ("alphas", "means", "icf", "x", "gamma", "m", "const")}


# ----------------------------------------------------------------------------- NumPy / autograd


def make_numpy(np, stop_gradient):
    """The vectorised objective for a NumPy-like module (numpy, or autograd.numpy)."""

    def gmm_objective(alphas, means, icf, x, tril_index, eye, gamma, m, const):
        n, d = x.shape
        K = alphas.shape[0]
        q = icf[:, :d]
        lower = icf[:, d:]
        # Q_k = diag(exp(q_k)) + L_k, all K at once: (K, d, d)
        padded = np.concatenate([lower, np.zeros((K, 1))], axis=1)
        Q = np.exp(q)[:, :, None] * eye + padded[:, tril_index]
        # Q_k (x_i - mu_k) for every component and point: (K, d, n)
        centred = x.T[None, :, :] - means[:, :, None]
        Qx = Q @ centred
        # log of weight * density for each (k, i), without the shared constants: (K, n)
        log_terms = (alphas + np.sum(q, axis=1))[:, None] - 0.5 * np.sum(Qx**2, axis=1)
        shift = stop_gradient(np.max(log_terms, axis=0, keepdims=True))
        lse = np.log(np.sum(np.exp(log_terms - shift), axis=0)) + shift[0]
        alpha_shift = stop_gradient(np.max(alphas))
        lse_alphas = np.log(np.sum(np.exp(alphas - alpha_shift))) + alpha_shift
        prior = 0.5 * gamma**2 * (np.sum(np.exp(q) ** 2) + np.sum(lower**2)) - m * np.sum(q)
        return np.sum(lse) - n * lse_alphas + prior + const

    return gmm_objective


gmm_objective = make_numpy(numpy, s2sad.stop_gradient)


def _identity(x):
    return x


def autograd_factory():
    import autograd.numpy as anp

    # autograd has no stop_gradient; the shift's gradient contributions cancel exactly
    return make_numpy(anp, _identity)


def gmm_loops(alphas, means, icf, x, gamma, m, const):
    """The same objective with plain Python loops over components, points and matrix entries,
    filling arrays element by element, as a hand-written reference would."""
    n, d = x.shape
    K = alphas.shape[0]
    Qs = numpy.zeros((K, d, d))
    sum_qs = numpy.zeros(K)
    for k in range(K):
        pos = d
        for r in range(d):
            Qs[k, r, r] = numpy.exp(icf[k, r])
            for c in range(r):
                Qs[k, r, c] = icf[k, pos]
                pos += 1
        sum_qs[k] = numpy.sum(icf[k, :d])
    total = 0.0
    terms = numpy.zeros(K)
    for i in range(n):
        for k in range(K):
            z = Qs[k] @ (x[i] - means[k])
            terms[k] = alphas[k] + sum_qs[k] - 0.5 * numpy.dot(z, z)
        top = numpy.max(terms)
        total = total + numpy.log(numpy.sum(numpy.exp(terms - top))) + top
    top = numpy.max(alphas)
    lse_alphas = numpy.log(numpy.sum(numpy.exp(alphas - top))) + top
    prior = 0.0
    for k in range(K):
        sq = numpy.sum(numpy.exp(icf[k, :d]) ** 2) + numpy.sum(icf[k, d:] ** 2)
        prior = prior + 0.5 * gamma**2 * sq - m * sum_qs[k]
    return total - n * lse_alphas + prior + const


# ----------------------------------------------------------------------------- JAX, PyTorch


def jax_factory():
    import jax.numpy as jnp
    from jax import lax

    def gmm_objective(alphas, means, icf, x, tril_index, eye, gamma, m, const):
        n, d = x.shape
        K = alphas.shape[0]
        q = icf[:, :d]
        lower = icf[:, d:]
        padded = jnp.concatenate([lower, jnp.zeros((K, 1))], axis=1)
        Q = jnp.exp(q)[:, :, None] * eye + padded[:, tril_index]
        centred = x.T[None, :, :] - means[:, :, None]
        Qx = Q @ centred
        log_terms = (alphas + jnp.sum(q, axis=1))[:, None] - 0.5 * jnp.sum(Qx**2, axis=1)
        shift = lax.stop_gradient(jnp.max(log_terms, axis=0, keepdims=True))
        lse = jnp.log(jnp.sum(jnp.exp(log_terms - shift), axis=0)) + shift[0]
        alpha_shift = lax.stop_gradient(jnp.max(alphas))
        lse_alphas = jnp.log(jnp.sum(jnp.exp(alphas - alpha_shift))) + alpha_shift
        prior = 0.5 * gamma**2 * (jnp.sum(jnp.exp(q) ** 2) + jnp.sum(lower**2)) - m * jnp.sum(q)
        return jnp.sum(lse) - n * lse_alphas + prior + const

    return gmm_objective


def torch_factory():
    import torch

    def gmm_objective(alphas, means, icf, x, tril_index, eye, gamma, m, const):
        n, d = x.shape
        K = alphas.shape[0]
        q = icf[:, :d]
        lower = icf[:, d:]
        padded = torch.cat([lower, torch.zeros((K, 1), dtype=icf.dtype)], dim=1)
        Q = torch.exp(q)[:, :, None] * eye + padded[:, tril_index]
        centred = x.T[None, :, :] - means[:, :, None]
        Qx = Q @ centred
        log_terms = (alphas + torch.sum(q, dim=1))[:, None] - 0.5 * torch.sum(Qx**2, dim=1)
        shift = torch.amax(log_terms, dim=0, keepdim=True).detach()
        lse = torch.log(torch.sum(torch.exp(log_terms - shift), dim=0)) + shift[0]
        alpha_shift = torch.amax(alphas).detach()
        lse_alphas = torch.log(torch.sum(torch.exp(alphas - alpha_shift))) + alpha_shift
        prior = 0.5 * gamma**2 * (
            torch.sum(torch.exp(q) ** 2) + torch.sum(lower**2)
        ) - m * torch.sum(q)
        return torch.sum(lse) - n * lse_alphas + prior + const

    return gmm_objective


# ----------------------------------------------------------------------------- cases

WRT = ("alphas", "means", "icf")
LOOP_NA = "n/a: loop version is for s2sad only (peers run the vectorised one)"


def cases(mode: str) -> list[Case]:
    sizes = {"smoke": SIZES_SMOKE, "quick": SIZES_QUICK, "full": SIZES_FULL}[mode]
    out = []
    for d, K, n in sizes:
        out.append(
            Case(
                workload="gmm",
                family="gmm",
                size={"d": d, "K": K, "n": n},
                make_inputs=make_inputs,
                numpy_f=gmm_objective,
                wrt=WRT,
                peers={"jax": jax_factory, "torch": torch_factory, "autograd": autograd_factory},
            )
        )
    for d, K, n in sizes[:1] if mode == "quick" else sizes:
        if d * K * n > 10**6:
            continue  # minutes of interpreted loops for the primal alone
        out.append(
            Case(
                workload="gmm-loops",
                family="gmm",
                size={"d": d, "K": K, "n": n},
                make_inputs=make_loop_inputs,
                numpy_f=gmm_loops,
                wrt=WRT,
                peers={p: LOOP_NA for p in ("jax", "torch", "autograd")},
                notes=["Python loops and element writes; not at the largest size (slow primal)"],
                check_peers={
                    "jax": jax_factory,
                    "torch": torch_factory,
                    "autograd": autograd_factory,
                },
                check_make_inputs=make_inputs,  # checked against the vectorised objective
                jit=True,
                parallel=True,
            )
        )
    return out

"""gradbench's `gmm` eval (ADBench's Gaussian mixture model with a Wishart prior).

Input: `d`, `k`, `n`, `alpha` (k), `means` (k, d), `icf` (k, d + d(d-1)/2), `x` (n, d),
`gamma`, `m`. Row `icf[k]` holds component k's inverse-covariance factor Q_k: exp(icf[k, :d]) on
the diagonal, and the strictly-lower entries icf[k, d:] column by column (Q[1, 0], Q[2, 0], ...,
Q[d-1, 0], Q[2, 1], ...). `objective` is the log-posterior (a float); `jacobian` its gradient
with respect to alpha, means and icf, flattened row by row and concatenated (a list). An input
with `mu`, `q` (k, d) and `l` (k, d(d-1)/2, the same column order) in place of `means` and `icf`
is read too.

The objective is ADBench's, which gradbench validates against: the mixture's log-likelihood plus
0.5 gamma^2 |Q_k|_F^2 - m sum(q_k) minus the Wishart normalizer for each component, which is
the log-likelihood MINUS the log Wishart density of each precision Q_k^T Q_k (not plus).
"""

from __future__ import annotations

import math

import numpy as np

import s2sad

FUNCTIONS = ("objective", "jacobian")


def log_normalizer(n, d, K, gamma, m):
    """The terms without parameters: the Gaussians' -n d/2 log(2 pi) and the Wishart prior's
    normalizer, K (log Gamma_d(n'/2) - n' d log(gamma / sqrt 2)) with n' = d + m + 1."""
    n_prime = d + m + 1
    log_gamma_d = 0.25 * d * (d - 1) * math.log(math.pi)
    for j in range(1, d + 1):
        log_gamma_d = log_gamma_d + math.lgamma(0.5 * n_prime + 0.5 * (1 - j))
    wishart = n_prime * d * (math.log(gamma) - 0.5 * math.log(2.0)) - log_gamma_d
    return -0.5 * n * d * math.log(2 * math.pi) - K * wishart


def gmm_objective(alpha, means, icf, x, gamma, m):
    n, d = x.shape
    K = alpha.shape[0]
    q = icf[:, :d]
    sum_qs = np.sum(q, axis=1)
    terms = np.zeros((n, K))  # log(weight_k * density_k(x_i)) up to the shared constants
    for k in range(K):
        Q = np.diag(np.exp(q[k]))
        pos = d
        for j in range(d - 1):  # the strictly-lower part, column by column
            Q[j + 1 :, j] = icf[k, pos : pos + d - 1 - j]
            pos = pos + d - 1 - j
        z = (x - means[k]) @ Q.T
        terms[:, k] = alpha[k] + sum_qs[k] - 0.5 * np.sum(z * z, axis=1)
    top = s2sad.stop_gradient(np.max(terms, axis=1, keepdims=True))
    lse = np.log(np.sum(np.exp(terms - top), axis=1)) + top[:, 0]
    alpha_top = s2sad.stop_gradient(np.max(alpha))
    lse_alpha = np.log(np.sum(np.exp(alpha - alpha_top))) + alpha_top
    prior = 0.5 * gamma * gamma * (np.sum(np.exp(q) ** 2) + np.sum(icf[:, d:] ** 2))
    prior = prior - m * np.sum(sum_qs)
    return np.sum(lse) - n * lse_alpha + prior + log_normalizer(n, d, K, gamma, m)


def parse(input: dict) -> tuple:
    """(alpha, means, icf, x, gamma, m) as arrays and numbers."""
    alpha = np.asarray(input["alpha"], dtype=np.float64)
    means = np.asarray(input["means"] if "means" in input else input["mu"], dtype=np.float64)
    if "icf" in input:
        icf = np.asarray(input["icf"], dtype=np.float64)
    else:  # q and l given apart
        icf = np.hstack([np.asarray(input["q"], float), np.asarray(input["l"], float)])
    icf = icf.reshape(alpha.shape[0], -1)
    x = np.asarray(input["x"], dtype=np.float64)
    return alpha, means, icf, x, float(input["gamma"]), float(input["m"])


def prepare(function: str, input: dict, jit: bool):
    args = parse(input)
    if function == "objective":
        return lambda: gmm_objective(*args)
    if function == "jacobian":
        grad = s2sad.grad(gmm_objective, wrt=("alpha", "means", "icf"), jit=jit)
        grad(*args)  # transform (and compile) before the timed runs
        return lambda: grad(*args)
    raise ValueError(f"the gmm eval has no function {function!r}")


def output(function: str, result):
    if function == "objective":
        return float(result)
    return np.concatenate([np.ravel(g) for g in result]).tolist()

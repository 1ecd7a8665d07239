"""Functions for the differential tests against JAX (tests/test_oracle_jax.py).

Plain NumPy, written as users write it. test_oracle_jax.py loads this file a second time with
`numpy` replaced by `jax.numpy` and compares `jax.grad`/`jax.jacrev`/`jax.jvp` with s2sad. Only
what JAX can run goes here: no in-place writes (JAX arrays are immutable); Python control flow
on data is fine, since `jax.grad` without `jit` sees concrete values.

CORPUS maps a name to (function, arguments maker, wrt).
"""

import numpy as np


def logsumexp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def softmax_cross_entropy(w, x, labels):
    logits = x @ w
    logits = logits - np.max(logits, axis=1, keepdims=True)
    logp = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    return -np.mean(np.sum(logp * labels, axis=1))


def mlp_loss(w1, b1, w2, b2, x, y):
    h = np.tanh(x @ w1 + b1)
    out = h @ w2 + b2
    return np.mean((out - y) ** 2)


def batched_matmul(a, b):
    return np.sum(np.sin(a @ b))


def broadcast_mix(x, y, s):
    return np.sum(x * y + s / (1.0 + y**2) - np.exp(-x) * s)


def quadratic_form(x, a):
    return x @ (a @ x) * 0.5


def reductions(x):
    return np.sum(np.mean(x, axis=0) ** 2) + np.sum(np.std(x, axis=1)) + np.prod(x[0])


def norms(x):
    return np.linalg.norm(x) + np.sum(np.linalg.norm(x, axis=1))


def linalg_ops(a, b):
    return np.sum(np.linalg.solve(a, b)) + np.log(np.abs(np.linalg.det(a))) + np.trace(a @ a)


def shapes(x):
    y = np.reshape(x, (3, 4)).T
    z = np.concatenate([y, y**2], axis=1)
    s = np.stack([z, np.cos(z)], axis=0)
    return np.sum(np.transpose(s, (2, 0, 1)) * np.arange(48.0).reshape(6, 2, 4) / 48.0)


def einsum_contract(a, b):
    return np.einsum("ij,jk->ik", a, b)


def indexing(x):
    return np.sum(x[1:, ::2] ** 2) + x[0, 1] * x[2, 0] + np.sum(x[np.array([0, 2, 2]), 1])


def where_clip(x):
    return np.sum(np.where(x > 0.1, x**2, np.sin(x)) + np.clip(x, -0.5, 0.5))


def euler(k, x0):
    x = x0
    v = 0.0
    dt = 0.01
    for i in range(200):
        a = -k * x - 0.1 * v
        v = v + dt * a
        x = x + dt * v
    return x


def branches(x):
    total = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0:
            total = total + x[i] ** 2
        elif x[i] > -0.5:
            total = total + np.sin(x[i])
        else:
            total = total - x[i]
    return total


def newton_sqrt(a):
    x = a
    steps = 0
    while steps < 30 and np.abs(x * x - a) > 1e-12:
        x = 0.5 * (x + a / x)
        steps += 1
    return x


def _helper(u, v):
    return np.tanh(u) * v


def helper_calls(x, y):
    return np.sum(_helper(x, y) + _helper(y, x) ** 2)


def vector_output(x, w):
    return np.tanh(w @ x) * np.sum(x)


def rnn(w, h0, xs):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(w @ h + xs[t])
    return np.sum(h**2)


def _rng(seed):
    return np.random.default_rng(seed)


def _spd(n, seed):
    m = _rng(seed).normal(size=(n, n))
    return m @ m.T + n * np.eye(n)


CORPUS = {
    "logsumexp": (logsumexp, lambda r: [r.normal(size=7)], 0),
    "softmax_cross_entropy": (
        softmax_cross_entropy,
        lambda r: [r.normal(size=(4, 3)), r.normal(size=(5, 4)), np.eye(3)[[0, 2, 1, 1, 0]]],
        (0, 1),
    ),
    "mlp_loss": (
        mlp_loss,
        lambda r: [
            r.normal(size=(3, 8)) * 0.5,
            r.normal(size=8) * 0.1,
            r.normal(size=(8, 2)) * 0.5,
            r.normal(size=2) * 0.1,
            r.normal(size=(6, 3)),
            r.normal(size=(6, 2)),
        ],
        (0, 1, 2, 3),
    ),
    "batched_matmul": (
        batched_matmul,
        lambda r: [r.normal(size=(2, 1, 3, 4)), r.normal(size=(3, 4, 2))],
        (0, 1),
    ),
    "broadcast_mix": (
        broadcast_mix,
        lambda r: [r.normal(size=(4, 1, 3)), r.normal(size=(5, 1)), float(r.normal())],
        (0, 1, 2),
    ),
    "quadratic_form": (quadratic_form, lambda r: [r.normal(size=4), _spd(4, 1)], (0, 1)),
    "reductions": (reductions, lambda r: [r.uniform(0.5, 1.5, size=(3, 4))], 0),
    "norms": (norms, lambda r: [r.normal(size=(3, 4))], 0),
    "linalg_ops": (linalg_ops, lambda r: [_spd(3, 2), r.normal(size=(3, 2))], (0, 1)),
    "shapes": (shapes, lambda r: [r.normal(size=12)], 0),
    "einsum_contract": (
        einsum_contract,
        lambda r: [r.normal(size=(2, 3)), r.normal(size=(3, 4))],
        (0, 1),
    ),
    "indexing": (indexing, lambda r: [r.normal(size=(3, 4))], 0),
    "where_clip": (where_clip, lambda r: [r.uniform(-1.0, 1.0, size=(4, 5))], 0),
    "euler": (euler, lambda r: [2.0, 1.0], (0, 1)),
    "branches": (branches, lambda r: [np.array([0.7, -0.2, -0.9, 0.3, -0.4])], 0),
    "newton_sqrt": (newton_sqrt, lambda r: [2.5], 0),
    "helper_calls": (helper_calls, lambda r: [r.normal(size=4), r.normal(size=4)], (0, 1)),
    "vector_output": (vector_output, lambda r: [r.normal(size=3), r.normal(size=(4, 3))], (0, 1)),
    "rnn": (
        rnn,
        lambda r: [r.normal(size=(4, 4)) * 0.4, r.normal(size=4), r.normal(size=(6, 4))],
        (0, 1, 2),
    ),
}

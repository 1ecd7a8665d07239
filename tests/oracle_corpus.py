"""Functions for the differential tests against JAX (tests/test_oracle_jax.py).

Plain NumPy, written as users write it. test_oracle_jax.py loads this file a second time with
`numpy` replaced by `jax.numpy` and compares `jax.grad`/`jax.jacrev`/`jax.jvp` with s2sad. Only
what JAX can run goes here: no in-place writes (JAX arrays are immutable); Python control flow
on data is fine, since `jax.grad` without `jit` sees concrete values.

CORPUS maps a name to (function, arguments maker, wrt).
"""

import numpy as np

try:  # SciPy is optional: without it the scipy.special case is left out
    from scipy import special
except ImportError:  # pragma: no cover
    special = None


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


# ----------------------------------------------------------------------------- #14's ops
# (functions of eigen/singular vectors are invariant to each vector's sign, which LAPACK and
# JAX may pick differently)


def stacking(x, y):
    a = np.vstack([x, y])[:3] + np.hstack([x, y])[:, :4]
    b = np.dstack([x, y])[..., 1] + np.column_stack([x[:, 0], y[:, 1]])[:, :1]
    c = np.append(x, y, axis=0)[1:4] * np.repeat(x, 2, axis=1)[:, ::2]
    d = np.tile(y, (1, 2))[:, 1:5] + np.flipud(x) - np.fliplr(y) + np.rot90(x, 2)
    return np.sum(a * b) + np.sum(c**2) + np.sum(np.sin(d)) + np.sum(np.atleast_2d(x[0]) ** 3)


def padding(x):
    ramp = np.arange(36.0).reshape(6, 6)
    pads = ((1, 2), (2, 1))
    return (
        np.sum(np.pad(x, pads, mode="constant", constant_values=0.5) ** 2 * ramp)
        + np.sum(np.pad(x, pads, mode="edge") ** 2 * ramp)
        + np.sum(np.pad(x, pads, mode="reflect") ** 2 * ramp)
        + np.sum(np.pad(x, pads, mode="symmetric") ** 2 * ramp)
        + np.sum(np.pad(x, pads, mode="wrap") ** 2 * ramp)
    )


def splitting(x):
    a, b = np.split(x, 2, axis=1)
    c, d, e = np.array_split(x, 3, axis=0)
    return np.sum(a * b) + np.sum(c**2) - np.sum(d * e[:, ::-1][:, :1]) + np.sum(np.hsplit(x, 4)[1])


def filling(x, s):
    ends = np.sin(np.linspace(s, x[0], 4, axis=1)) + np.linspace(x[1], 2.0, 4, endpoint=False).T
    return np.sum(np.full((2, 3), s) * x) + np.sum(np.full_like(x, s) ** 2) + np.sum(ends**2)


def selection(x, i):
    a = np.sort(x, axis=1)[:, ::2] * np.take(x, i, axis=0)[:, :3]
    b = np.take_along_axis(x, np.argsort(x, axis=0), axis=0)
    c = np.median(x, axis=0) + np.percentile(x, 30.0, axis=1)[0] + np.quantile(x, 0.75)
    d = np.select([x > 0.5, x < -0.5], [x**2, np.sin(x)], default=x)
    return np.sum(a**2) + np.sum(b * d) + np.sum(c**3) + np.ptp(x, axis=1) @ np.arange(3.0)


def nan_statistics(x, w):
    y = np.where(x > 1.2, np.nan, x)
    return (
        np.nansum(y**2)
        + np.nanmean(y, axis=0) @ w[:4]
        + np.nanmax(y)
        + np.nanmin(y, axis=1)[1]
        + np.sum(np.nan_to_num(np.log(x - 0.2)))
        + np.average(x, axis=1, weights=w[:4]) @ w[2:]
    )


def decompositions(a, m):
    s = a @ a.T + 3 * np.eye(3)
    low = np.linalg.cholesky(s)
    w, v = np.linalg.eigh(s)
    sign, logdet = np.linalg.slogdet(s)
    vals = np.linalg.svd(m, compute_uv=False)
    u, sv, vt = np.linalg.svd(m, full_matrices=False)
    q, r = np.linalg.qr(m)
    return (
        np.sum(low**2)
        + np.sum(w * (v[0] ** 2))
        + np.sum(np.linalg.eigvalsh(s) ** 2)
        + logdet
        + np.sum(vals**3)
        + np.sum((u * sv) @ vt * m)
        + np.sum(q @ r * m)
        + np.sum(np.abs(r))
    )


def solvers(a, b):
    x, res, rank, sv = np.linalg.lstsq(a, b, rcond=None)
    p = np.linalg.pinv(a)
    return np.sum(x**2) + np.sum(res) + np.sum(p**3) + np.sum(np.linalg.matrix_power(a.T @ a, 3))


def products(a, b, c):
    return (
        np.sum(np.tensordot(a, b, axes=([1], [0])) ** 2)
        + np.inner(a[0], b[:, 1])
        + np.vdot(a, a)
        + np.sum(np.kron(a[:, :2], c[:2, :2]))
        + np.sum(np.cross(a[:, :3], c[:2]))
        + np.sum(np.linalg.multi_dot([a, b, c]))
        + np.sum(np.einsum("...ij,jk->...ik", a, b) ** 2)
        + np.einsum("ij,ij", a, a)
    )


def elementwise(x, y):
    return np.sum(
        np.deg2rad(x) * np.rad2deg(y)
        + np.sinc(x)
        + np.arccosh(2.0 + x**2)
        + np.fmax(x, y)
        - np.fmin(x, y)
        + np.logaddexp2(x, y)
        + np.float_power(np.abs(y) + 1.0, x)
        + np.heaviside(x, 0.5) * y
        + np.fmod(x + 3.0, 1.3) * y
        + np.remainder(y, 0.7) * x
    )


def special_functions(x, y):
    p = special.expit(x)
    return (
        np.sum(special.gammaln(y) + special.digamma(y) + special.polygamma(1, y))
        + np.sum(special.erf(x) * special.erfc(x) + special.erfinv(0.9 * np.tanh(x)))
        + np.sum(special.logit(p) * p)
        + special.logsumexp(x)
        + np.sum(special.softmax(x) * y)
        + np.sum(special.log_softmax(x) * y)
        + np.sum(special.xlogy(y, y + 1.0))
        + np.sum(special.xlog1py(y, x**2))
        + np.sum(special.betaln(y, y + 0.5))
    )


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
    "stacking": (stacking, lambda r: [r.normal(size=(3, 4)), r.normal(size=(3, 4))], (0, 1)),
    "padding": (padding, lambda r: [r.normal(size=(3, 3))], 0),
    "splitting": (splitting, lambda r: [r.normal(size=(3, 4))], 0),
    "filling": (filling, lambda r: [r.normal(size=(2, 3)), float(r.normal())], (0, 1)),
    "selection": (selection, lambda r: [r.normal(size=(3, 5)), np.array([2, 0, 1])], 0),
    "nan_statistics": (
        nan_statistics,
        lambda r: [r.uniform(0.3, 1.5, size=(3, 4)), r.uniform(0.5, 1.5, size=5)],
        (0, 1),
    ),
    "decompositions": (
        decompositions,
        lambda r: [r.normal(size=(3, 3)), r.normal(size=(4, 3))],
        (0, 1),
    ),
    "solvers": (solvers, lambda r: [r.normal(size=(4, 3)), r.normal(size=4)], (0, 1)),
    "products": (
        products,
        lambda r: [r.normal(size=(2, 3)), r.normal(size=(3, 4)), r.normal(size=(4, 3))],
        (0, 1, 2),
    ),
    "elementwise": (
        elementwise,
        lambda r: [r.uniform(-1.0, 1.0, size=5), r.uniform(-1.0, 1.0, size=5)],
        (0, 1),
    ),
    "special_functions": (
        special_functions,
        lambda r: [r.normal(size=4), r.uniform(0.5, 2.0, size=4)],
        (0, 1),
    ),
}
if special is None:  # pragma: no cover
    del CORPUS["special_functions"]

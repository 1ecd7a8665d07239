"""Linear algebra breadth (#14): tensordot, inner, vdot, kron, cross, multi_dot, matrix_power
(rules/contractions.py) and the decompositions (rules/decompositions.py): pullbacks and tangents
against central differences on random shapes (hypothesis), exact values, both Jacobian modes
batched against per-basis, Hessians, refusals and the jitted forms."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import s2sad
from conftest import check_jvp, check_vjp, rand
from test_jacobian_batched import check

HYP = settings(
    max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def fd_hessian(f, x, eps=1e-5):
    """Central differences of s2sad's gradient, shaped x.shape + x.shape."""
    grad = s2sad.grad(f)
    H = np.zeros((x.size, x.size))
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        e = e.reshape(x.shape)
        H[:, k] = np.ravel(grad(x + e) - grad(x - e)) / (2 * eps)
    return H.reshape(x.shape + x.shape)


def r(*shape, seed=0):
    return rand(*shape, seed=seed)


def spd(n, seed=0, batch=()):
    """A symmetric positive definite matrix (or stack), well conditioned."""
    a = rand(*batch, n, n, seed=seed)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def well_conditioned(n, seed=0, batch=()):
    return rand(*batch, n, n, seed=seed, low=-0.5, high=0.5) + n * np.eye(n)


# ----------------------------------------------------------------------------- the functions


def tensordot_default(a, b):
    return np.tensordot(a, b)


def tensordot_axes(a, b, axes):
    return np.tensordot(a, b, axes=axes)


def tensordot_square(a):
    return np.sum(np.tensordot(a, a * a, axes=1) ** 2)


def inner(a, b):
    return np.inner(a, b)


def vdot(a, b):
    return np.vdot(a, b)


def vdot_self(a):
    return np.vdot(a, np.sin(a))


def kron(a, b):
    return np.kron(a, b)


def kron_self(a):
    return np.sum(np.kron(a, a) ** 2)


def cross(a, b):
    return np.cross(a, b)


def cross_axis(a, b, axis):
    return np.cross(a, b, axis=axis)


def cross_axes(a, b):
    return np.cross(a, b, axisa=0, axisb=-1, axisc=0)


def cross_self(a):
    return np.sum(np.cross(a, a**2) ** 2)


def multi_dot3(a, b, c):
    return np.linalg.multi_dot([a, b, c])


def multi_dot4(a, b, c, d):
    return np.linalg.multi_dot([a, b, c, d])


def multi_dot_self(a):
    return np.sum(np.linalg.multi_dot([a, a, np.cos(a)]) ** 2)


def matrix_power(a, n):
    return np.linalg.matrix_power(a, n)


def matrix_power_cube(a):
    return np.sum(np.linalg.matrix_power(a, 3) ** 2)


def matrix_power_inv(a):
    return np.sum(np.sin(np.linalg.matrix_power(a, -2)))


# ----------------------------------------------------------------------------- products

PRODUCTS = [
    (tensordot_default, (r(3, 4, 5, seed=1), r(4, 5, 2, seed=2)), (0, 1)),
    (tensordot_axes, (r(3, 4, seed=1), r(4, 2, seed=2), 1), (0, 1)),
    (tensordot_axes, (r(3, 4, 2, seed=1), r(2, 5, 3, seed=2), ([0, 2], [2, 0])), (0, 1)),
    (tensordot_axes, (r(3, seed=1), r(2, seed=2), 0), (0, 1)),
    (tensordot_axes, (r(2, 3, seed=1), r(3, 2, seed=2), ([1, 0], [0, 1])), (0, 1)),
    (tensordot_square, (r(3, 3, seed=3),), 0),
    (inner, (r(4, seed=1), r(4, seed=2)), (0, 1)),
    (inner, (r(2, 4, seed=1), r(3, 4, seed=2)), (0, 1)),
    (inner, (r(2, 3, 4, seed=1), r(4, seed=2)), (0, 1)),
    (inner, (r(2, 3, seed=1), np.float64(1.5)), (0, 1)),
    (vdot, (r(2, 3, seed=1), r(3, 2, seed=2)), (0, 1)),
    (vdot, (r(4, seed=1), r(4, seed=2)), (0, 1)),
    (vdot_self, (r(2, 2, seed=3),), 0),
    (kron, (r(2, 3, seed=1), r(3, 2, seed=2)), (0, 1)),
    (kron, (r(3, seed=1), r(2, 2, seed=2)), (0, 1)),
    (kron, (r(2, 1, 2, seed=1), r(3, 2, seed=2)), (0, 1)),
    (kron_self, (r(2, 2, seed=3),), 0),
    (cross, (r(3, seed=1), r(3, seed=2)), (0, 1)),
    (cross, (r(4, 3, seed=1), r(3, seed=2)), (0, 1)),
    (cross, (r(2, 1, 3, seed=1), r(4, 3, seed=2)), (0, 1)),
    (cross_axis, (r(3, 4, seed=1), r(3, 4, seed=2), 0), (0, 1)),
    (cross_axes, (r(3, 4, seed=1), r(4, 3, seed=2)), (0, 1)),
    (cross_self, (r(2, 3, seed=3),), 0),
    (multi_dot3, (r(2, 3, seed=1), r(3, 4, seed=2), r(4, 2, seed=3)), (0, 1, 2)),
    (multi_dot3, (r(3, seed=1), r(3, 4, seed=2), r(4, 2, seed=3)), (0, 1, 2)),
    (multi_dot3, (r(2, 3, seed=1), r(3, 4, seed=2), r(4, seed=3)), (0, 1, 2)),
    (multi_dot3, (r(3, seed=1), r(3, 4, seed=2), r(4, seed=3)), (0, 1, 2)),
    (multi_dot4, (r(2, 3, seed=1), r(3, 4, seed=2), r(4, 2, seed=3), r(2, 3, seed=4)), (0, 3)),
    (multi_dot_self, (r(3, 3, seed=3) * 0.5,), 0),
    (matrix_power, (r(3, 3, seed=1), 3), 0),
    (matrix_power, (r(2, 3, 3, seed=1), 2), 0),
    (matrix_power, (well_conditioned(3, seed=1), -2), 0),
    (matrix_power, (r(3, 3, seed=1), 0), 0),
    (matrix_power, (r(3, 3, seed=1), 1), 0),
    (matrix_power_cube, (r(3, 3, seed=3),), 0),
    (matrix_power_inv, (well_conditioned(2, seed=3),), 0),
]
PRODUCT_IDS = [f"{f.__name__}-{i}" for i, (f, _, _) in enumerate(PRODUCTS)]


@pytest.mark.parametrize("f,args,wrt", PRODUCTS, ids=PRODUCT_IDS)
def test_products_vjp_and_jvp(f, args, wrt):
    check_vjp(f, args, wrt=wrt)
    check_jvp(f, args, wrt=wrt)


@pytest.mark.parametrize("f,args,wrt", PRODUCTS, ids=PRODUCT_IDS)
def test_products_jacobian_batched_matches_per_basis(f, args, wrt):
    check(f, *args, wrt=wrt)


@pytest.mark.parametrize(
    "f,x",
    [
        (tensordot_square, r(3, 3, seed=3)),
        (vdot_self, r(2, 2, seed=3)),
        (kron_self, r(2, 2, seed=3)),
        (cross_self, r(2, 3, seed=3)),
        (multi_dot_self, r(3, 3, seed=3) * 0.5),
        (matrix_power_cube, r(3, 3, seed=3)),
        (matrix_power_inv, well_conditioned(2, seed=3)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_products_hessian(f, x):
    H = s2sad.hessian(f)(x)
    np.testing.assert_allclose(H, fd_hessian(f, x), rtol=1e-5, atol=1e-5)


def test_exact_values():
    a, b = r(3, seed=1), r(3, seed=2)
    g = r(3, seed=3)
    _, pullback = s2sad.vjp(cross, wrt=(0, 1))(a, b)
    ga, gb = pullback(g)
    np.testing.assert_allclose(ga, np.cross(b, g), rtol=1e-14)
    np.testing.assert_allclose(gb, np.cross(g, a), rtol=1e-14)
    m = r(3, 3, seed=4)
    G = r(3, 3, seed=5)
    _, pullback = s2sad.vjp(matrix_power, wrt=0)(m, 2)
    np.testing.assert_allclose(pullback(G), G @ m.T + m.T @ G, rtol=1e-13)
    _, pullback = s2sad.vjp(vdot, wrt=(0, 1))(a, b)
    np.testing.assert_allclose(pullback(2.0), (2 * b, 2 * a), rtol=1e-14)


def lambda_free_cross2(a):
    return np.sum(np.cross(a, np.array([[1.0, 2.0, 3.0]])[:, :2][0]))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_cross_of_2_vectors_is_refused_at_call_time():
    with pytest.raises(ValueError, match="3-vectors only"):
        s2sad.grad(lambda_free_cross2)(r(2, seed=1))


@HYP
@given(
    lead=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    inner_=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    trail=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    seed=st.integers(0, 1000),
)
def test_tensordot_random_shapes(lead, inner_, trail, seed):
    a = r(*lead, *inner_, seed=seed)
    b = r(*inner_, *trail, seed=seed + 1)
    args = (a, b, len(inner_))
    check_vjp(tensordot_axes, args, wrt=(0, 1), seed=seed)
    check_jvp(tensordot_axes, args, wrt=(0, 1), seed=seed)


@HYP
@given(
    shape_a=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    shape_b=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    seed=st.integers(0, 1000),
)
def test_kron_random_shapes(shape_a, shape_b, seed):
    args = (r(*shape_a, seed=seed), r(*shape_b, seed=seed + 1))
    check_vjp(kron, args, wrt=(0, 1), seed=seed)
    check_jvp(kron, args, wrt=(0, 1), seed=seed)


@HYP
@given(
    batch=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    n=st.integers(1, 4),
    power=st.integers(-3, 4),
    seed=st.integers(0, 1000),
)
def test_matrix_power_random(batch, n, power, seed):
    a = well_conditioned(n, seed=seed, batch=tuple(batch)) / n
    check_vjp(matrix_power, (a, power), seed=seed)
    check_jvp(matrix_power, (a, power), seed=seed)


@HYP
@given(
    dims=st.lists(st.integers(1, 4), min_size=4, max_size=5),
    first_vector=st.booleans(),
    last_vector=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_multi_dot_random(dims, first_vector, last_vector, seed):
    shapes = [(dims[i], dims[i + 1]) for i in range(len(dims) - 1)]
    if first_vector:
        shapes[0] = shapes[0][1:]
    if last_vector:
        shapes[-1] = shapes[-1][:1]
    arrays = [r(*s, seed=seed + i) for i, s in enumerate(shapes)]
    f = {3: multi_dot3, 4: multi_dot4}[len(arrays)]
    wrt = tuple(range(len(arrays)))
    check_vjp(f, arrays, wrt=wrt, seed=seed)
    check_jvp(f, arrays, wrt=wrt, seed=seed)


# ----------------------------------------------------------------------------- decompositions


def cholesky(a):
    return np.linalg.cholesky(a)


def cholesky_upper(a):
    return np.linalg.cholesky(a, upper=True)


def cholesky_logdet(a):
    """log det of an SPD matrix through its Cholesky factor."""
    low = np.linalg.cholesky(a)
    return 2.0 * np.sum(np.log(np.diagonal(low, axis1=-2, axis2=-1)))


def cholesky_sym(x):
    return np.sum(np.linalg.cholesky(x @ x.T + 3.0 * np.eye(3)) ** 3)


def slogdet_log(a):
    sign, logdet = np.linalg.slogdet(a)
    return logdet


def slogdet_both(a):
    sign, logdet = np.linalg.slogdet(a)
    return sign * logdet**2


def slogdet_indexed(a):
    return np.linalg.slogdet(a)[1] * 3.0


def slogdet_sum(a):
    sign, logdet = np.linalg.slogdet(a @ a.T + np.eye(3))
    return np.sum(logdet**2) + np.sum(sign)


def eigh_values(a):
    w, v = np.linalg.eigh(a)
    return w


def eigh_vectors(a):
    w, v = np.linalg.eigh(a)
    return np.sum(v**2 * np.arange(np.shape(a)[-1]), axis=-1) + w


def eigh_quadratic(a):
    """sum_i w_i^2 (v_i . c)^2: invariant to each eigenvector's sign."""
    w, v = np.linalg.eigh(a, UPLO="U")
    c = np.arange(1.0, np.shape(a)[-1] + 1.0)
    return np.sum(w**2 * (c @ v) ** 2)


def eigh_sym(x):
    w, v = np.linalg.eigh(x + x.T)
    return np.sum(w * (v[0] ** 2))


def lstsq_x(a, b):
    return np.linalg.lstsq(a, b, rcond=None)[0]


def lstsq_all(a, b):
    x, residuals, rank, s = np.linalg.lstsq(a, b, rcond=None)
    return np.sum(x**2) + np.sum(residuals) * 0.5 + np.sum(s**2) * rank


def eigvalsh(a):
    return np.linalg.eigvalsh(a)


def eigvalsh_upper(a):
    return np.linalg.eigvalsh(a, UPLO="U")


def eigvalsh_cubes(x):
    return np.sum(np.linalg.eigvalsh(x + x.T) ** 3)


def singular_values(a):
    return np.linalg.svd(a, compute_uv=False)


def singular_values_reduced(a):
    return np.linalg.svd(a, full_matrices=False, compute_uv=False)


def nuclear(a):
    return np.sum(np.linalg.svd(a, compute_uv=False) ** 2)


def singular_cubes(a):
    return np.sum(np.linalg.svd(a, compute_uv=False) ** 3 * np.arange(1.0, 1.0 + min(a.shape)))


def pinv(a):
    return np.linalg.pinv(a)


def pinv_rcond(a):
    return np.linalg.pinv(a, rcond=1e-10)


def pinv_square(a):
    return np.sum(np.linalg.pinv(a) ** 2)


def qr_r(a):
    return np.linalg.qr(a, mode="r")


def qr_r_square(a):
    return np.sum(np.linalg.qr(a, mode="r") ** 2)


def qr_both(a):
    q, r = np.linalg.qr(a)
    return np.sum(np.sin(q)) + np.sum(r**3)


def qr_q(a):
    q, r = np.linalg.qr(a)
    return q


def qr_complete(a):
    q, r = np.linalg.qr(a, mode="complete")
    return np.sum(r**2) + np.sum(q[..., :, :1] ** 3)


def qr_complete_all(a):
    q, r = np.linalg.qr(a, mode="complete")
    return np.sum(q**3)


def qr_r_weighted(a):
    return np.sum(np.sin(np.linalg.qr(a, mode="r")))


def svd_full(a):
    u, s, vt = np.linalg.svd(a)
    return s


def svd_vectors(a):
    """Invariant to each singular vector pair's sign."""
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    return np.sum(u**4) + np.sum(vt**4 * s[..., :, None]) + np.sum(s**3)


def svd_vectors_full(a):
    u, s, vt = np.linalg.svd(a)
    return np.sum(u**4) + np.sum(s * vt[:, 0] ** 2)


def svd_u_only(a):
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    return u**2


def spread(n, batch=(), seed=0):
    """A symmetric matrix (or stack) with well separated eigenvalues."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=batch + (n, n)))
    w = np.arange(1, n + 1) * 1.5 - n + rng.uniform(-0.2, 0.2, size=batch + (n,))
    return (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)


def rect(m, n, batch=(), seed=0):
    """A rectangular matrix (or stack) with well separated nonzero singular values."""
    rng = np.random.default_rng(seed)
    k = min(m, n)
    u, _ = np.linalg.qr(rng.normal(size=batch + (m, k)))
    v, _ = np.linalg.qr(rng.normal(size=batch + (n, k)))
    s = np.arange(k, 0, -1) + 0.5 + rng.uniform(-0.2, 0.2, size=batch + (k,))
    return (u * s[..., None, :]) @ np.swapaxes(v, -1, -2)


DECOMPOSITIONS = [
    (eigh_values, (spread(3, seed=1),)),
    (eigh_values, (spread(3, batch=(2,), seed=2),)),
    (eigh_vectors, (spread(3, seed=3),)),
    (eigh_vectors, (spread(2, batch=(2,), seed=4),)),
    (eigh_quadratic, (spread(4, seed=5),)),
    (eigh_sym, (r(3, 3, seed=6),)),
    (slogdet_log, (well_conditioned(3, seed=1),)),
    (slogdet_log, (well_conditioned(2, seed=2, batch=(2, 3)),)),
    (slogdet_both, (-well_conditioned(3, seed=3),)),
    (slogdet_indexed, (well_conditioned(3, seed=4, batch=(2,)),)),
    (slogdet_sum, (r(3, 3, seed=5),)),
    (cholesky, (spd(3, seed=1),)),
    (cholesky, (spd(2, seed=2, batch=(2,)),)),
    (cholesky_upper, (spd(3, seed=1),)),
    (cholesky_logdet, (spd(3, seed=4),)),
    (cholesky_sym, (r(3, 3, seed=5),)),
    (eigvalsh, (spread(3, seed=1),)),
    (eigvalsh, (spread(3, batch=(2,), seed=2),)),
    (eigvalsh_upper, (spread(4, seed=3),)),
    (eigvalsh_cubes, (r(3, 3, seed=6),)),
    (singular_values, (rect(3, 2, seed=1),)),
    (singular_values, (rect(2, 4, seed=2),)),
    (singular_values_reduced, (rect(3, 3, batch=(2,), seed=3),)),
    (nuclear, (rect(2, 3, seed=4),)),
    (pinv, (rect(3, 2, seed=1),)),
    (pinv, (rect(2, 4, seed=2),)),
    (pinv, (rect(3, 3, batch=(2,), seed=3),)),
    (pinv_rcond, (rect(2, 3, seed=4),)),
    (pinv_square, (rect(3, 2, seed=5),)),
    (svd_full, (rect(3, 3, seed=1),)),
    (svd_vectors, (rect(3, 2, seed=2),)),
    (svd_vectors, (rect(2, 4, seed=3),)),
    (svd_vectors, (rect(3, 3, batch=(2,), seed=4),)),
    (svd_vectors_full, (rect(3, 3, seed=5),)),
    (svd_u_only, (rect(4, 2, seed=6),)),
    (qr_both, (rect(4, 2, seed=1),)),
    (qr_both, (rect(3, 3, seed=2),)),
    (qr_both, (rect(4, 3, batch=(2,), seed=3),)),
    (qr_both, (rect(3, 3, batch=(2,), seed=4),)),
    (qr_q, (rect(3, 2, seed=5),)),
    (qr_complete, (rect(3, 3, seed=6),)),
    (qr_r, (rect(3, 2, seed=1),)),
    (qr_r, (rect(3, 3, seed=2),)),
    (qr_r, (rect(4, 2, batch=(2,), seed=3),)),
    (qr_r_square, (rect(3, 2, seed=4),)),
]
DECOMPOSITION_IDS = [f"{f.__name__}-{i}" for i, (f, _) in enumerate(DECOMPOSITIONS)]


LSTSQ = [
    (lstsq_x, (rect(4, 2, seed=1), r(4, seed=2))),
    (lstsq_x, (rect(4, 3, seed=3), r(4, 2, seed=4))),
    (lstsq_x, (rect(3, 3, seed=5), r(3, seed=6))),
    (lstsq_all, (rect(5, 2, seed=7), r(5, seed=8))),
    (lstsq_all, (rect(4, 2, seed=9), r(4, 3, seed=10))),
    (lstsq_all, (rect(3, 3, seed=11), r(3, seed=12))),
]


@pytest.mark.parametrize(
    "f,args", LSTSQ, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(LSTSQ)]
)
def test_lstsq(f, args):
    check_vjp(f, args, wrt=(0, 1))
    check_jvp(f, args, wrt=(0, 1))
    check(f, *args, wrt=(0, 1))


def test_lstsq_rank_deficient_is_refused():
    a = np.outer([1.0, 2.0, 3.0], [1.0, -1.0])
    with pytest.raises(ValueError, match="full column rank"):
        s2sad.vjp(lstsq_x)(a, np.ones(3))[1](np.ones(2))


@pytest.mark.parametrize("f,args", DECOMPOSITIONS, ids=DECOMPOSITION_IDS)
def test_decompositions_vjp_and_jvp(f, args):
    check_vjp(f, args)
    check_jvp(f, args)


@pytest.mark.parametrize("f,args", DECOMPOSITIONS, ids=DECOMPOSITION_IDS)
def test_decompositions_jacobian_batched_matches_per_basis(f, args):
    check(f, *args)


@pytest.mark.parametrize(
    "f,x",
    [
        (slogdet_both, -well_conditioned(3, seed=3)),
        (slogdet_sum, r(3, 3, seed=5)),
        (cholesky_logdet, spd(3, seed=4)),
        (cholesky_sym, r(3, 3, seed=5)),
        (eigvalsh_cubes, r(3, 3, seed=6)),
        (pinv_square, rect(3, 2, seed=5)),
        (nuclear, rect(2, 3, seed=4)),
        (nuclear, rect(3, 2, seed=5)),
        (singular_cubes, rect(3, 3, seed=6)),
        (singular_cubes, rect(4, 2, seed=7)),
        (qr_r_square, rect(3, 2, seed=4)),
        (qr_r_weighted, rect(3, 3, seed=8)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_decompositions_hessian(f, x):
    H = s2sad.hessian(f)(x)
    np.testing.assert_allclose(H, fd_hessian(f, x), rtol=1e-5, atol=1e-5)


def test_decompositions_exact_values():
    """log det through cholesky: the gradient is inv(a) on the lower triangle NumPy reads
    (off-diagonal entries doubled: each stands for both of its symmetric pair)."""
    a = spd(3, seed=7)
    g = s2sad.grad(cholesky_logdet)(a)
    inv = np.linalg.inv(a)
    np.testing.assert_allclose(g, np.tril(2 * inv, -1) + np.diag(np.diag(inv)), rtol=1e-12)
    w = np.array([1.0, 2.0, 5.0])
    q, _ = np.linalg.qr(rand(3, 3, seed=8))
    _, pullback = s2sad.vjp(eigvalsh)((q * w) @ q.T)
    gw = pullback(np.ones(3))  # the trace's gradient: the identity
    np.testing.assert_allclose(gw, np.eye(3), atol=1e-12)
    x = rect(3, 2, seed=9)
    np.testing.assert_allclose(s2sad.grad(nuclear)(x), 2 * x, rtol=1e-12)


def test_repeated_eigenvalues_refuse_the_second_derivative():
    x = np.diag([1.0, 1.0, 2.0]) / 2  # x + x.T has the eigenvalue 1 twice
    with pytest.raises(ValueError, match="eigenvalues repeat"):
        s2sad.hessian(eigvalsh_cubes)(x)
    # the first derivative of a symmetric function of the eigenvalues is exact there
    np.testing.assert_allclose(s2sad.grad(eigvalsh_cubes)(x), 6 * np.diag([1.0, 1.0, 4.0]))


def test_repeated_or_vanishing_singular_values_refuse_the_second_derivative():
    with pytest.raises(ValueError, match="repeat"):
        s2sad.hessian(singular_cubes)(np.diag([2.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match="vanishes"):
        s2sad.hessian(singular_cubes)(np.diag([3.0, 2.0, 0.0]))


def test_rank_deficient_pinv_is_refused():
    a = np.outer([1.0, 2.0, 3.0], [1.0, -1.0])
    with pytest.raises(ValueError, match="rank-deficient"):
        s2sad.grad(pinv_square)(a)
    with pytest.raises(ValueError, match="rank-deficient"):
        s2sad.jvp(pinv)(a, tangent=np.ones((3, 2)))


def test_wide_or_rank_deficient_qr_is_refused():
    with pytest.raises(ValueError, match="at least as many rows"):
        s2sad.grad(qr_r_square)(rect(2, 3))
    with pytest.raises(ValueError, match="rank-deficient"):
        s2sad.grad(qr_r_square)(np.outer([1.0, 2.0, 3.0], [1.0, -1.0]))


def qr_raw(a):
    h, tau = np.linalg.qr(a, mode="raw")
    return np.sum(h)


def test_qr_refusals():
    with pytest.raises(s2sad.NoRuleError, match="mode"):
        s2sad.grad(qr_raw)(rect(3, 2))
    a = rect(4, 2, seed=7)  # mode='complete': Q's columns beyond n are any basis
    check_vjp(qr_complete, (a,))  # (its first column is fine in reverse mode)
    with pytest.raises(ValueError, match="mode='reduced'"):
        s2sad.jvp(qr_complete)(a, tangent=np.ones((4, 2)))
    with pytest.raises(ValueError, match="beyond"):
        s2sad.grad(qr_complete_all)(a)


def test_svd_refusals():
    """The vectors of full_matrices=True beyond min(m, n) are any basis of the complement;
    repeated singular values leave the vectors undefined; hermitian=True has no rule."""
    with pytest.raises(ValueError, match="full_matrices=False"):
        s2sad.grad(svd_vectors_full)(rect(3, 2))
    with pytest.raises(ValueError, match="full_matrices=False"):
        s2sad.jvp(svd_vectors_full)(rect(3, 2), tangent=np.ones((3, 2)))
    with pytest.raises(ValueError, match="repeat"):
        s2sad.grad(svd_vectors)(np.diag([2.0, 2.0, 1.0]))
    _, pullback = s2sad.vjp(svd_full)(np.diag([2.0, 2.0, 1.0]))  # the values alone: defined
    np.testing.assert_allclose(pullback(np.ones(3)), np.eye(3), atol=1e-12)
    a = rect(3, 2, seed=1)  # full_matrices=True, not square: reverse mode only
    _, pullback = s2sad.vjp(svd_full)(a)
    np.testing.assert_allclose(pullback(np.ones(2)), s2sad.grad(nuclear_norm)(a), atol=1e-12)
    with pytest.raises(ValueError, match="full_matrices=False"):
        s2sad.jvp(svd_full)(a, tangent=np.ones((3, 2)))
    with pytest.raises(s2sad.NoRuleError, match="hermitian"):
        s2sad.grad(svd_hermitian)(spd(3))


def nuclear_norm(a):
    return np.sum(np.linalg.svd(a, compute_uv=False))


def svd_hermitian(a):
    return np.sum(np.linalg.svd(a, compute_uv=False, hermitian=True))


@HYP
@given(
    batch=st.lists(st.integers(1, 2), min_size=0, max_size=1),
    n=st.integers(1, 4),
    upper=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_cholesky_random(batch, n, upper, seed):
    a = spd(n, seed=seed, batch=tuple(batch))
    f = cholesky_upper if upper else cholesky
    check_vjp(f, (a,), seed=seed)
    check_jvp(f, (a,), seed=seed)


@HYP
@given(
    batch=st.lists(st.integers(1, 2), min_size=0, max_size=1),
    n=st.integers(1, 4),
    seed=st.integers(0, 1000),
)
def test_eigvalsh_random(batch, n, seed):
    a = spread(n, batch=tuple(batch), seed=seed)
    check_vjp(eigvalsh, (a,), seed=seed)
    check_jvp(eigvalsh, (a,), seed=seed)


@HYP
@given(
    batch=st.lists(st.integers(1, 2), min_size=0, max_size=1),
    m=st.integers(1, 4),
    n=st.integers(1, 4),
    seed=st.integers(0, 1000),
)
def test_singular_values_and_pinv_random(batch, m, n, seed):
    a = rect(m, n, batch=tuple(batch), seed=seed)
    for f in (singular_values, pinv, svd_vectors) + ((qr_r,) if m >= n else ()):
        check_vjp(f, (a,), seed=seed)
        check_jvp(f, (a,), seed=seed)


# ----------------------------------------------------------------------------- jit


def cross_sum(a, b):
    return np.sum(np.cross(a, b) ** 2)


def kron_sum(a, b):
    return np.sum(np.kron(a, b) ** 2)


def kron_plain(a, b):
    return np.sum(np.kron(a, b))


def matrix_power_plain(a):
    return np.sum(np.linalg.matrix_power(a, 3))


def cholesky_square(a):
    return np.sum(np.linalg.cholesky(a) ** 2)


def cholesky_plain(a):
    return np.sum(np.linalg.cholesky(a))


def eigvalsh_plain(a):
    return np.sum(np.linalg.eigvalsh(a) * np.arange(3.0))


def pinv_plain(a):
    return np.sum(np.linalg.pinv(a))


JIT = [
    (vdot, (r(4, seed=1), r(4, seed=2)), (0, 1)),
    (cross_sum, (r(3, seed=1), r(3, seed=2)), (0, 1)),
    (cross_sum, (r(4, 3, seed=1), r(3, seed=2)), (0, 1)),  # rows of 3-vectors, broadcast
    (kron_sum, (r(2, 3, seed=1), r(3, 2, seed=2)), (0, 1)),
    (kron_plain, (r(3, seed=1), r(2, 2, seed=2)), (0, 1)),
    (matrix_power_plain, (well_conditioned(3, seed=3),), 0),
    (matrix_power_inv, (well_conditioned(2, seed=3),), 0),
    (cholesky_plain, (spd(3, seed=2),), 0),
    (eigvalsh_plain, (spread(3, seed=1),), 0),
    (pinv_plain, (rect(2, 3, seed=5),), 0),
]
# functions of tuple results (tests/test_jit_corpus.py compiles their derivatives)
TUPLE_RESULTS = [
    (slogdet_both, (-well_conditioned(3, seed=3),)),
    (eigh_sym, (r(3, 3, seed=6),)),
    (svd_vectors, (rect(3, 2, seed=2),)),
    (qr_both, (rect(4, 2, seed=1),)),
    (lstsq_all, (rect(5, 2, seed=7), r(5, seed=8))),
]

# tests/test_jit_corpus.py compiles every case of JIT; here a sample, to keep this file quick
JIT_SAMPLE = [c for c in JIT if c[0] in (cross_sum, matrix_power_plain, cholesky_plain)]
JIT_IDS = [f.__name__ for f, _, _ in JIT_SAMPLE]


@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")
@pytest.mark.parametrize("mode", ["grad", "jvp"])
@pytest.mark.parametrize("f,args,wrt", JIT_SAMPLE, ids=JIT_IDS)
def test_jitted_forms_compile_and_agree(f, args, wrt, mode):
    if mode == "grad":
        jitted = s2sad.grad(f, wrt=wrt, jit="strict")(*args)
        plain = s2sad.grad(f, wrt=wrt)(*args)
    else:
        tangent = tuple(r(*np.shape(args[i]), seed=9 + i) for i in np.atleast_1d(wrt))
        tangent = tangent if isinstance(wrt, tuple) else tangent[0]
        jitted = s2sad.jvp(f, wrt=wrt, jit="strict")(*args, tangent=tangent)
        plain = s2sad.jvp(f, wrt=wrt)(*args, tangent=tangent)
    pairs = zip(jitted, plain) if isinstance(wrt, tuple) and mode == "grad" else [(jitted, plain)]
    for got, want in pairs:
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- einsum


def einsum2(spec, a, b):
    return np.einsum(spec, a, b)


def einsum1(spec, a):
    return np.einsum(spec, a)


def einsum_sublist(a, b):
    return np.einsum(a, [0, 1, 2], b, [0, 2, 3], [0, 1, 3])


def einsum_sublist_implicit(a, b):
    return np.einsum(a, [Ellipsis, 1], b, [1])


def einsum_sublist_transpose(x):
    """Once refused (tests/test_trust_refusals.py): a differentiated first array of the sublist
    form."""
    return np.sum(np.einsum(x, [0, 1], [1, 0]) * np.arange(4.0).reshape(2, 2))


def einsum_sublist_self(a):
    return np.sum(np.einsum(a, [0, 1], a, [1, 2]) ** 2)


def einsum_ellipsis_self(a):
    return np.sum(np.einsum("...ij,...jk->...ik", a, np.sin(a)) ** 2)


EINSUM = [
    (einsum2, ("...ij,...jk->...ik", r(2, 3, 4, seed=1), r(2, 4, 2, seed=2)), (1, 2)),
    (einsum2, ("...ij,...jk->...ik", r(1, 3, 4, seed=1), r(5, 4, 2, seed=2)), (1, 2)),
    (einsum2, ("...ij,jk", r(2, 3, 4, seed=1), r(4, 2, seed=2)), (1, 2)),
    (einsum2, ("i...,i...->...", r(3, 2, seed=1), r(3, 1, seed=2)), (1, 2)),
    (einsum2, ("...i,...i", r(2, 3, seed=1), r(3, seed=2)), (1, 2)),
    (einsum1, ("...ii->...i", r(2, 3, 3, seed=1)), 1),
    (einsum1, ("i...->...", r(3, 2, 2, seed=1)), 1),
    (einsum1, ("...", r(2, 3, seed=1)), 1),
    (einsum2, ("zij,zjk->zik", r(1, 3, 4, seed=1), r(5, 4, 2, seed=2)), (1, 2)),
    (einsum_sublist, (r(2, 3, 4, seed=1), r(2, 4, 2, seed=2)), (0, 1)),
    (einsum_sublist_implicit, (r(2, 3, seed=1), r(3, seed=2)), (0, 1)),
    (einsum_sublist_self, (r(3, 3, seed=3),), 0),
    (einsum_sublist_transpose, (r(2, 2, seed=3),), 0),
    (einsum_ellipsis_self, (r(2, 2, 2, seed=3),), 0),
]
EINSUM_IDS = [f"{f.__name__}-{i}" for i, (f, _, _) in enumerate(EINSUM)]


@pytest.mark.parametrize("f,args,wrt", EINSUM, ids=EINSUM_IDS)
def test_einsum_vjp_and_jvp(f, args, wrt):
    assert np.shape(f(*args)) == np.shape(f(*args))
    check_vjp(f, args, wrt=wrt)
    check_jvp(f, args, wrt=wrt)


@pytest.mark.parametrize("f,args,wrt", EINSUM, ids=EINSUM_IDS)
def test_einsum_jacobian_batched_matches_per_basis(f, args, wrt):
    check(f, *args, wrt=wrt)


@pytest.mark.parametrize("f", [einsum_sublist_self, einsum_ellipsis_self])
def test_einsum_hessian(f):
    x = r(3, 3, seed=3) if f is einsum_sublist_self else r(2, 2, 2, seed=3)
    np.testing.assert_allclose(s2sad.hessian(f)(x), fd_hessian(f, x), rtol=1e-5, atol=1e-5)


@HYP
@given(
    batch_a=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    batch_b=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    n=st.integers(1, 3),
    seed=st.integers(0, 1000),
)
def test_einsum_ellipsis_random_broadcasting(batch_a, batch_b, n, seed):
    batch_b = [1 if i < len(batch_a) and seed % 2 else s for i, s in enumerate(batch_b)]
    try:
        np.broadcast_shapes(tuple(batch_a), tuple(batch_b))
    except ValueError:
        return
    args = ("...ij,...j->...i", r(*batch_a, 2, n, seed=seed), r(*batch_b, n, seed=seed + 1))
    check_vjp(einsum2, args, wrt=(1, 2), seed=seed)
    check_jvp(einsum2, args, wrt=(1, 2), seed=seed)


@HYP
@given(
    lead_a=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    lead_b=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    axis=st.integers(-1, 0),
    seed=st.integers(0, 1000),
)
def test_cross_random_broadcasting_and_axes(lead_a, lead_b, axis, seed):
    lead_b = [1 if seed % 2 else s for s in lead_b]
    try:
        np.broadcast_shapes(tuple(lead_a), tuple(lead_b))
    except ValueError:
        return
    a, b = r(*lead_a, 3, seed=seed), r(*lead_b, 3, seed=seed + 1)
    if axis == 0:
        a, b = np.moveaxis(a, -1, 0), np.moveaxis(b, -1, 0)
    args = (a, b, axis)
    check_vjp(cross_axis, args, wrt=(0, 1), seed=seed)
    check_jvp(cross_axis, args, wrt=(0, 1), seed=seed)


@HYP
@given(
    shape_a=st.lists(st.integers(1, 3), min_size=0, max_size=3),
    shape_b=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    seed=st.integers(0, 1000),
)
def test_inner_and_vdot_random(shape_a, shape_b, seed):
    if shape_a and shape_b:
        shape_b[-1] = shape_a[-1]
    a, b = r(*shape_a, seed=seed), r(*shape_b, seed=seed + 1)
    check_vjp(inner, (a, b), wrt=(0, 1), seed=seed)
    check_jvp(inner, (a, b), wrt=(0, 1), seed=seed)
    c = r(*reversed(shape_a), seed=seed + 2)
    if np.ndim(a) == 0:
        return  # np.vdot of 0-d arrays is a product: covered by the fixed cases
    check_vjp(vdot, (a, c), wrt=(0, 1), seed=seed)
    check_jvp(vdot, (a, c), wrt=(0, 1), seed=seed)


# ----------------------------------------------------------------------------- slogdet


def test_slogdet_exact_values_and_signs():
    a = -well_conditioned(3, seed=11)  # a negative determinant
    np.testing.assert_allclose(s2sad.grad(slogdet_log)(a), np.linalg.inv(a).T, rtol=1e-12)
    _, tangent = s2sad.jvp(slogdet_log)(a, tangent=np.eye(3))
    np.testing.assert_allclose(tangent, np.trace(np.linalg.inv(a)), rtol=1e-12)


@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")
def test_slogdet_under_jit_compiles():
    """Numba compiles the cotangent of np.linalg.slogdet's (sign, logabsdet) pair, carried as
    one adjoint per part: jit="strict" gives inv(a)^T, with no fallback."""
    a = well_conditioned(3, seed=12)
    g = s2sad.grad(slogdet_log, jit="strict")(a)
    np.testing.assert_allclose(g, np.linalg.inv(a).T, rtol=1e-12)


@HYP
@given(m=st.integers(1, 5), n=st.integers(1, 4), k=st.integers(0, 2), seed=st.integers(0, 1000))
def test_lstsq_random(m, n, k, seed):
    if m < n:
        m, n = n, m
    b = r(m, seed=seed) if k == 0 else r(m, k, seed=seed)
    for f in (lstsq_x, lstsq_all):
        check_vjp(f, (rect(m, n, seed=seed), b), wrt=(0, 1), seed=seed)
        check_jvp(f, (rect(m, n, seed=seed), b), wrt=(0, 1), seed=seed)


@HYP
@given(
    batch=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    n=st.integers(1, 4),
    seed=st.integers(0, 1000),
)
def test_slogdet_random(batch, n, seed):
    a = well_conditioned(n, seed=seed, batch=tuple(batch)) * (-1) ** seed
    for f in (slogdet_log, slogdet_both):
        check_vjp(f, (a,), seed=seed)
        check_jvp(f, (a,), seed=seed)


# ----------------------------------------------------------------------------- s2sad emit


@pytest.mark.parametrize(
    "name, args",
    [
        ("tensordot_square", (r(3, 3, seed=3),)),
        ("kron_self", (r(2, 2, seed=3),)),
        ("cross_self", (r(2, 3, seed=3),)),
        ("multi_dot_self", (r(3, 3, seed=3) * 0.5,)),
        ("matrix_power_inv", (well_conditioned(2, seed=3),)),
        ("einsum_sublist_self", (r(3, 3, seed=3),)),
        ("einsum_ellipsis_self", (r(2, 2, 2, seed=3),)),
        ("cholesky_logdet", (spd(3, seed=4),)),
        ("slogdet_sum", (r(3, 3, seed=5),)),
        ("eigvalsh_cubes", (r(3, 3, seed=6),)),
        ("eigh_sym", (r(3, 3, seed=6),)),
        ("lstsq_all", (rect(5, 2, seed=7), r(5, seed=8))),
        ("svd_vectors", (rect(3, 2, seed=2),)),
        ("qr_both", (rect(4, 2, seed=1),)),
        ("nuclear", (rect(2, 3, seed=4),)),
        ("pinv_square", (rect(3, 2, seed=5),)),
        ("qr_r_square", (rect(3, 2, seed=4),)),
    ],
)
def test_emitted_standalone_modules_run(name, args, tmp_path):
    """`s2sad emit` copies the helpers into a module that needs only NumPy."""
    from s2sad import cli

    text = cli.emit_text(f"{__file__}:{name}", [], "grad")
    path = tmp_path / f"emitted_{name}.py"
    path.write_text(text)
    namespace = {"__name__": f"emitted_{name}"}
    exec(compile(text, str(path), "exec"), namespace)
    expected = s2sad.grad(globals()[name])(*args)  # (with respect to the first argument)
    np.testing.assert_allclose(namespace[f"grad_{name}"](*args), expected, rtol=1e-12)


# ----------------------------------------------------------------------------- eigh


def test_eigh_repeated_eigenvalues():
    """The eigenvalues alone differentiate at a repeated eigenvalue; the eigenvectors do not
    (they are not unique there): a clear error, never inf."""
    a = np.diag([1.0, 1.0, 2.0])
    np.testing.assert_allclose(s2sad.grad(lambda_free_eigh_trace)(a), np.eye(3), atol=1e-12)
    with pytest.raises(ValueError, match="eigenvalues repeat"):
        s2sad.vjp(eigh_vectors)(a)[1](np.ones(3))
    with pytest.raises(ValueError, match="eigenvalues repeat"):
        s2sad.jvp(eigh_values)(a, tangent=np.eye(3))


def lambda_free_eigh_trace(a):
    w, v = np.linalg.eigh(a)
    return np.sum(w)


def test_eigh_exact_values():
    a = spread(3, seed=13)
    w, v = np.linalg.eigh(a)
    _, pullback = s2sad.vjp(eigh_values)(a)
    gw = np.array([1.0, -2.0, 0.5])
    m = (v * gw) @ v.T
    np.testing.assert_allclose(pullback(gw), np.tril(2 * m, -1) + np.diag(np.diag(m)), atol=1e-12)

"""np.linspace in its end points (rules/elementwise.py), in every mode; and higher derivatives:
Hessians through eigh's, svd's and qr's vectors and lstsq (rules/decomposition_tangents.py),
through a differentiated exponent and the nan-reductions, against central differences of s2sad's
gradient; np.sinc's third derivative (the tangent of the helper a Hessian calls) against central
differences; helpers' own tangent rules (polyval_tangent's in x, cumprod_vjp's), copies of
arrays gradient code writes later, np.select's list of choices."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import s2sad
from conftest import check_jvp, check_vjp, rand
from s2sad.rules.mathfuncs import sinc_curvature, sinc_third
from s2sad.rules.numerical import polyval_tangent
from test_jacobian_batched import check
import test_fuzz_regressions as fz

HYP = settings(
    max_examples=12, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def fd_hessian(f, x, *rest, eps=1e-5):
    """Central differences of s2sad's gradient, shaped x.shape + x.shape."""
    grad = s2sad.grad(f)
    H = np.zeros((x.size, x.size))
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        e = e.reshape(x.shape)
        H[:, k] = np.ravel(grad(x + e, *rest) - grad(x - e, *rest)) / (2 * eps)
    return H.reshape(x.shape + x.shape)


# ----------------------------------------------------------------------------- linspace


def samples(a, b, num, endpoint, axis):
    return np.sin(np.linspace(a, b, num, endpoint=endpoint, axis=axis)) * 2.0


def samples_sum(a, b):
    return np.sum(np.linspace(a, b, 7) ** 3)


def samples_open(a, b):
    return np.cos(np.linspace(a, 2.0 * b, 4, endpoint=False)) + b


def samples_hessian(a):
    return np.sum(np.linspace(a, a**2, 5, axis=-1) ** 3)


@HYP
@given(
    shapes=st.tuples(array_shapes(min_dims=0, max_dims=2, max_side=3), st.booleans()),
    num=st.integers(1, 5),
    endpoint=st.booleans(),
    data=st.data(),
)
def test_random_linspaces(shapes, num, endpoint, data):
    """Start and stop of broadcasting shapes, any num, both endpoints, any axis."""
    shape, scalar_stop = shapes
    a = rand(*shape, seed=num) if shape else 0.3
    b = 1.7 if scalar_stop else rand(*shape, seed=num + 1) + 2.0
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    args = (a, b, num, endpoint, axis)
    check_vjp(samples, args, wrt=(0, 1))
    check_jvp(samples, args, wrt=(0, 1))


@pytest.mark.parametrize(
    "f,args", [(samples_sum, (0.3, 1.9)), (samples_open, (rand(2, 3), rand(3, seed=1)))]
)
def test_linspace_jacobian_batched_matches_per_basis(f, args):
    check_vjp(f, args, wrt=(0, 1))
    check_jvp(f, args, wrt=(0, 1))
    check(f, *args, wrt=(0, 1))


def test_linspace_exact_values_and_hessian():
    """Sample i is start (1 - i/(n-1)) + stop i/(n-1): the gradient of their sum is (n/2, n/2),
    and of the samples of endpoint=False (1 - i/n, i/n)."""
    g = s2sad.grad(lambda_free_sum, wrt=(0, 1))(0.5, 2.0)
    np.testing.assert_allclose(g, (2.5, 2.5), rtol=1e-14)
    _, pullback = s2sad.vjp(lambda_free_open, wrt=(0, 1))(0.5, 2.0)
    np.testing.assert_allclose(pullback(np.array([1.0, 0, 0, 0])), (1.0, 0.0), atol=1e-15)
    np.testing.assert_allclose(pullback(np.array([0, 0, 0, 1.0])), (0.25, 0.75), atol=1e-15)
    x = rand(2, 3, seed=4)
    np.testing.assert_allclose(
        s2sad.hessian(samples_hessian)(x), fd_hessian(samples_hessian, x), rtol=1e-6, atol=1e-6
    )


def lambda_free_sum(a, b):
    return np.sum(np.linspace(a, b, 5))


def lambda_free_open(a, b):
    return np.linspace(a, b, 4, endpoint=False)


def integer_samples(a):
    return np.sum(np.linspace(a, 10.0, 4, dtype=np.int64) * a)


def with_step(a):
    y, step = np.linspace(a, 2.0, 5, retstep=True)
    return np.sum(y) * step


def test_linspace_integers_and_retstep():
    """Integer samples carry no derivative (only the product's own `a`); retstep=True is
    refused at the user's line."""
    a = 1.5
    assert s2sad.grad(integer_samples)(a) == np.sum(np.linspace(a, 10.0, 4, dtype=np.int64))
    with pytest.raises(s2sad.NoRuleError, match="retstep"):
        s2sad.grad(with_step)(a)


# ----------------------------------------------------------------------------- decompositions
# Hessians through eigh's vectors, svd's and qr's vectors and lstsq: functions invariant to each
# eigen/singular vector's sign (LAPACK picks one), at random matrices with distinct spectra.

C3 = np.array([1.0, -2.0, 0.5])


def spread(n, seed=0, batch=()):
    """A symmetric matrix (or stack) with well separated eigenvalues 1, 3, 5, ..."""
    q, _ = np.linalg.qr(rand(*batch, n, n, seed=seed))
    return (q * (1.0 + 2.0 * np.arange(n))) @ np.swapaxes(q, -1, -2) + 0.1 * rand(
        *batch, n, n, seed=seed + 1
    )


def eigh_vectors(a):
    w, v = np.linalg.eigh(a)
    return np.sum(np.sin(w) * (C3 @ v) ** 2) + np.sum(v**4)


def eigh_upper(a):
    w, v = np.linalg.eigh(a + a.T, UPLO="U")
    return np.sum(w**3) + np.sum(v[:, 0] ** 2 * C3)


def eigh_stacked(a):
    w, v = np.linalg.eigh(a)
    return np.sum(v**4 * np.expand_dims(w, -2))


def eigh_values_of_pair(a):
    """The eigenvalues from eigh's pair: no cotangent reaches the vectors (its Hessian raised
    a matmul ValueError)."""
    w, v = np.linalg.eigh(a)
    return np.sum(np.sin(w) * C3[: np.shape(w)[-1]])


def svd_vectors(a):
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    scaled = u * np.expand_dims(s, -2) ** 2
    return np.sum(u**4) + np.sum(np.cos(vt**2)) + np.sum((scaled @ vt) ** 2)


def svd_square(a):
    u, s, vt = np.linalg.svd(a)
    return np.sum(u[:, :2] ** 4) + np.sum((u * np.sqrt(s)) @ vt)


def qr_vectors(a):
    q, r = np.linalg.qr(a)
    return np.sum(q**3) + np.sum(np.sin(q) * r[..., :1, :])


def qr_complete(a):
    q, r = np.linalg.qr(a, mode="complete")
    return np.sum(q**3) + np.sum(r**2)


B4 = rand(4, seed=9)
B42 = rand(4, 2, seed=10)
A42 = rand(4, 2, seed=11) + np.eye(4, 2)


def lstsq_in_a(a):
    x, res, rank, s = np.linalg.lstsq(a, B4, rcond=None)
    return np.sum(x**3) + np.sum(res**2) + np.sum(s**3)


def lstsq_in_a_matrix(a):
    x, res, rank, s = np.linalg.lstsq(a, B42, rcond=None)
    return np.sum(np.sin(x)) + np.sum(res * np.array([1.0, 3.0]))


def lstsq_in_b(b):
    x, res, rank, s = np.linalg.lstsq(A42, b, rcond=None)
    return np.sum(x**3) + np.sum(res**2)


def lstsq_in_both(a):
    x, res, rank, s = np.linalg.lstsq(a, a[:, 0] ** 2, rcond=None)
    return np.sum(x**3) + np.sum(res)


HESSIANS = [
    (eigh_vectors, spread(3, seed=1)),
    (eigh_vectors, np.triu(spread(3, seed=2))),
    (eigh_upper, rand(3, 3, seed=3)),
    (eigh_stacked, spread(3, seed=4, batch=(2,))),
    (eigh_values_of_pair, spread(3, seed=5)),
    (eigh_values_of_pair, spread(3, seed=6, batch=(2,))),
    (svd_vectors, rand(3, 2, seed=1)),
    (svd_vectors, rand(2, 3, seed=2)),
    (svd_vectors, rand(2, 3, 2, seed=3)),
    (svd_square, rand(3, 3, seed=4)),
    (qr_vectors, rand(4, 3, seed=1)),
    (qr_vectors, rand(2, 3, 2, seed=2)),
    (qr_complete, rand(3, 3, seed=3)),
    (lstsq_in_a, rand(4, 2, seed=1)),
    (lstsq_in_a_matrix, rand(4, 2, seed=2)),
    (lstsq_in_b, rand(4, seed=3)),
    (lstsq_in_both, rand(4, 2, seed=4)),
]


def case_id(case):
    f, x = case
    return f"{f.__name__}-{'x'.join(map(str, x.shape))}"


@pytest.mark.parametrize("f,x", HESSIANS, ids=map(case_id, HESSIANS))
def test_decomposition_hessians_match_finite_differences_of_the_gradient(f, x):
    H = s2sad.hessian(f)(x)
    assert H.shape == x.shape + x.shape and H.dtype == np.float64
    np.testing.assert_allclose(H, fd_hessian(f, x), rtol=1e-5, atol=1e-6)
    flat = H.reshape(x.size, x.size)
    np.testing.assert_allclose(flat, flat.T, rtol=1e-9, atol=1e-9)  # a Hessian is symmetric


@pytest.mark.parametrize(
    "f,x", [HESSIANS[i] for i in (0, 7, 10, 14)], ids=[case_id(HESSIANS[i]) for i in (0, 7, 10, 14)]
)
def test_per_basis_hessians_agree_with_the_one_sweep(f, x):
    np.testing.assert_allclose(
        s2sad.hessian(f, batched=False)(x), s2sad.hessian(f)(x), rtol=1e-12, atol=1e-12
    )


@HYP
@given(n=st.integers(2, 4), extra=st.integers(0, 2), seed=st.integers(0, 10_000))
def test_random_eigh_and_svd_hessians(n, extra, seed):
    """Random sizes and matrices with distinct spectra: eigh's and svd's Hessians."""
    a = spread(n, seed=seed)
    np.testing.assert_allclose(
        s2sad.hessian(eigh_stacked)(a), fd_hessian(eigh_stacked, a), rtol=1e-5, atol=1e-6
    )
    b = rand(n + extra, n, seed=seed) + np.eye(n + extra, n)
    singular = np.sort(np.linalg.svd(b, compute_uv=False))
    # close singular values make finite differences of the vectors' gradient inaccurate
    assume(singular[0] > 0.2 and np.min(np.diff(singular)) > 0.2)
    np.testing.assert_allclose(
        s2sad.hessian(svd_vectors)(b), fd_hessian(svd_vectors, b), rtol=1e-5, atol=1e-6
    )


def test_undefined_second_derivatives_are_refused():
    """Repeated eigenvalues or singular values, a rank-deficient qr, and svd's vectors of
    full_matrices=True for a non-square matrix: clear errors, never inf."""
    with pytest.raises(ValueError, match="eigenvalues repeat"):
        s2sad.hessian(eigh_vectors)(np.diag([1.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="repeat"):
        s2sad.hessian(svd_vectors)(np.diag([2.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match="rank-deficient"):
        s2sad.hessian(qr_vectors)(np.outer([1.0, 2.0, 3.0, 4.0], [1.0, -1.0, 2.0]))
    with pytest.raises(ValueError, match="full_matrices=False"):
        s2sad.hessian(svd_square)(rand(3, 2))
    with pytest.raises(ValueError, match="full column rank"):
        s2sad.hessian(lstsq_in_a)(np.outer([1.0, 2.0, 3.0, 4.0], [1.0, -1.0]))


# ----------------------------------------------------------------------------- third order
# s2sad nests no transforms (a Hessian is the deepest it takes), so a third derivative is the
# tangent of the helpers a Hessian's code calls: forward mode on a function calling them.


def sinc_second(x):
    return sinc_curvature(x) * np.cos(x)


def sinc_fourth(x):
    return sinc_third(x)


def test_sinc_third_derivative():
    """The tangent of np.sinc's second derivative is its third, the series near 0 and the closed
    form beyond agreeing with central differences (and continuous where they meet)."""
    x = np.array([0.0, 1e-3, -0.1, 0.158, 0.16, 0.7, -2.3])
    t = rand(7, seed=3)
    _, tangent = s2sad.jvp(sinc_second)(x, tangent=t)
    h = 1e-5
    fd = (sinc_second(x + h * t) - sinc_second(x - h * t)) / (2 * h)
    np.testing.assert_allclose(tangent, fd, rtol=1e-7, atol=1e-8)
    assert sinc_third(0.0) == 0.0
    # sinc'''(x) = pi^3 S'''(pi x), S(y) = sin(y) / y; by Leibniz's rule
    # S''' = -cos(y) / y + 3 sin(y) / y^2 + 6 cos(y) / y^3 - 6 sin(y) / y^4
    y = 1.3 * np.pi
    exact = -np.cos(y) / y + 3 * np.sin(y) / y**2 + 6 * np.cos(y) / y**3 - 6 * np.sin(y) / y**4
    np.testing.assert_allclose(sinc_third(1.3), exact * np.pi**3, rtol=1e-13)
    with pytest.raises(s2sad.NoRuleError, match="sinc_third"):
        s2sad.jvp(sinc_fourth)(x, tangent=t)


# ----------------------------------------------------------------------------- found by the oracle


def nan_skipping(x):
    y = np.where(x > 1.2, np.nan, x)
    return np.nansum(y**2) + np.nanmean(y * 3.0, axis=0) @ C3[:2] + np.nanmax(np.sin(y))


def test_nan_reductions_skip_the_tangents_of_nans():
    """An op on a NaN gives it a NaN tangent (2 * nan * t): the nan-reductions skip it as they
    skip the NaN, in jvp and Hessians (they gave NaN)."""
    x = np.array([[0.4, 1.3], [0.9, 0.5], [1.4, 1.1]])
    check_jvp(nan_skipping, (x,))
    H = s2sad.hessian(nan_skipping)(x)
    assert np.all(np.isfinite(H))
    np.testing.assert_allclose(H, fd_hessian(nan_skipping, x), rtol=1e-6, atol=1e-6)


def powers(x):
    return np.sum(np.float_power(x[0], x[1]) + x[1] ** x[0] + 2.0 ** x[0])


def test_hessians_through_a_differentiated_exponent():
    """x ** y in y: its cotangent helper has a tangent rule now (Hessians refused it)."""
    x = np.array([[0.7, 1.3, 2.0], [1.5, 0.5, 0.8]])
    H = s2sad.hessian(powers)(x)
    assert np.all(np.isfinite(H))
    np.testing.assert_allclose(H, fd_hessian(powers, x), rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- helpers' own rules
# Forward mode takes the tangent of a helper's parameter its rule does not name as zero: a rule
# must name every parameter the helper varies with smoothly (scripts/helper_tangent_audit.py).


def coefficients_tangent(c, x):
    return polyval_tangent(c, x) * 2.0


def test_polyval_tangent_varies_with_x():
    """polyval_tangent(c, x), np.polyval's tangent in its coefficients, is a polynomial in x:
    its rule was linear in c alone, so its tangent in x was silently zero."""
    c, x = np.array([0.3, -1.2, 0.7, 2.0]), np.array([0.4, -0.9, 1.3])
    check_jvp(coefficients_tangent, (c, x), wrt=1)
    check_jvp(coefficients_tangent, (c, x), wrt=(0, 1))
    tx = np.array([0.2, 0.5, -0.3])
    _, dout = s2sad.jvp(coefficients_tangent, wrt=1)(c, x, tangent=tx)
    np.testing.assert_allclose(dout, 2.0 * np.polyval(np.polyder(c), x) * tx, rtol=1e-12)


# ----------------------------------------------------------------------------- copies of views
# Gradient code copies a read of an array it writes in place later (`t = snapshot(y.T)`); the
# forward mode of a Hessian gave `t` the tangent `y_dot` itself (or a view of it), which the
# write's tangent then changed before it was read: Hessians silently off (1 where it is 2).


@pytest.mark.parametrize(
    "f",
    [
        fz.second_name_for_array,
        fz.named_transposed_view,
        fz.transposed_read_before_write,
        fz.write_reads_transposed_view,
    ],
)
@pytest.mark.parametrize("batched", [True, False])
def test_hessians_of_copies_of_arrays_written_later(f, batched):
    x = np.array([[0.2, -0.3], [0.5, 0.1]])
    H = s2sad.hessian(f, batched=batched)(x)
    np.testing.assert_allclose(H, fd_hessian(f, x), rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- cumprod


def cumprod_flat(x):
    return np.sum(np.sin(np.cumprod(x)) * np.arange(1.0, 1.0 + np.size(x)))


def cumprod_rows(x):
    return np.sum(np.cumprod(x, axis=-1) ** 3) + np.sum(np.cos(np.cumprod(x * x, axis=0)))


@pytest.mark.parametrize(
    "f,x",
    [
        (cumprod_flat, rand(5, seed=1, low=-1.5, high=1.5)),
        (cumprod_flat, np.array([[0.5, 0.0, 2.0], [-1.0, 0.7, 1.2]])),  # a zero: exact there
        (cumprod_rows, rand(2, 3, seed=2, low=-1.5, high=1.5)),
        (cumprod_rows, rand(2, 2, 3, seed=3, low=-1.5, high=1.5)),
    ],
)
@pytest.mark.parametrize("batched", [True, False])
def test_cumprod_hessians(f, x, batched):
    """cumprod_vjp has a tangent rule (Hessians through np.cumprod were refused)."""
    H = s2sad.hessian(f, batched=batched)(x)
    np.testing.assert_allclose(H, fd_hessian(f, x), rtol=1e-6, atol=1e-6)


def selected(x):
    return np.sum(np.sin(np.select([x > 0.0, x < -0.5], [x, x**2], default=x**3)))


def test_select_hessian_and_its_gradient_code():
    """np.select's cotangent reads `x`, not `[x, x_pow][0]` (forward mode refused that)."""
    x = np.array([0.3, -0.9, 0.1, -0.2])
    np.testing.assert_allclose(s2sad.hessian(selected)(x), fd_hessian(selected, x), atol=1e-6)
    assert "][0]" not in s2sad.source(s2sad.grad(selected), x)

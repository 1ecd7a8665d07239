"""Numerical routines, NaN-skipping statistics, covariances, vectors and positional builders
(rules/numerical.py, nanstats.py, vectors.py, arrays.py): np.polyval, np.interp, np.trapezoid,
np.convolve, np.correlate, np.cumulative_sum, np.ediff1d, np.nanvar, np.nanstd, np.nanprod,
np.nanmedian, np.nanquantile, np.nanpercentile, np.nancumsum, np.nancumprod, np.cov,
np.corrcoef, np.copysign, np.ldexp, np.vecdot, np.linalg.vector_norm, np.linalg.matrix_norm,
np.meshgrid, np.insert, np.delete and the index builders. Pullbacks and tangents against
finite differences (random shapes and axes from hypothesis), exact values, batched Jacobians
against per-basis ones, Hessians, the jitted forms (in tests/test_jit_corpus.py), and the calls
the rules refuse."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import s2sad
from conftest import check_jvp, check_vjp, rand
from test_jacobian_batched import check

# np.trapezoid, np.cumulative_sum, np.vecdot and np.linalg's vector_norm and matrix_norm
pytestmark = pytest.mark.skipif(not hasattr(np, "vecdot"), reason="functions of NumPy 2")

XP = np.array([0.0, 0.5, 1.2, 2.0])
XS = np.array([-0.3, 0.2, 0.7, 1.5, 2.4, 1.9])  # left of, inside and right of the knots


def with_nans(*shape, seed=0):
    """Random values with NaNs at the corners (0, ..., 0) and (1, ..., 1) (one NaN for a
    vector): no slice along an axis is all NaN."""
    x = rand(*shape, seed=seed)
    x[(1,) * len(shape)] = np.nan
    if len(shape) > 1:
        x[(0,) * len(shape)] = np.nan
    return x


# ----------------------------------------------------------------------------- functions


def polyval(p, x):
    return np.polyval(p, x)


def polyval_sq(p, x):
    return np.sum(np.polyval(p, x) ** 2)


def interp(x, fp):
    return np.interp(x, XP, fp)


def interp_edges(x, fp, left, right):
    return np.interp(x, XP, fp, left=left, right=right)


def interp_sq(x, fp):
    return np.sum(np.interp(x, XP, fp) ** 2 * x)


def trapezoid(y, x, axis):
    return np.trapezoid(y, x, axis=axis)


def trapezoid_dx(y):
    return np.trapezoid(y, dx=0.3, axis=0)


def trapezoid_1d(y, x):
    return np.trapezoid(y, x)


def trapezoid_sq(y, x):
    return np.sum(np.trapezoid(y * y, x, axis=0) ** 2)


def convolve(a, v, mode):
    return np.convolve(a, v, mode)


def correlate(a, v, mode):
    return np.correlate(a, v, mode)


def convolve_sq(a, v):
    return np.sum(np.convolve(a, v, "same") ** 2) + np.sum(np.correlate(a, v * v, "full") ** 2)


def cumulative_sum(x, axis, initial):
    return np.cumulative_sum(x, axis=axis, include_initial=initial)


def ediff1d(x):
    return np.ediff1d(x)


def ediff1d_ends(x, begin, end):
    return np.ediff1d(x, to_end=end, to_begin=begin)


def nanvar(x, axis, ddof, keepdims):
    return np.nanvar(x, axis=axis, ddof=ddof, keepdims=keepdims)


def nanstd(x, axis, ddof, keepdims):
    return np.nanstd(x, axis=axis, ddof=ddof, keepdims=keepdims)


def nanprod(x, axis, keepdims):
    return np.nanprod(x, axis=axis, keepdims=keepdims)


def nanmedian(x, axis, keepdims):
    return np.nanmedian(x, axis=axis, keepdims=keepdims)


def nanquantile(x, axis):
    return np.nanquantile(x, np.array([0.2, 0.75]), axis=axis)


def nanpercentile(x):
    return np.nanpercentile(x, 40.0, axis=0, keepdims=True)


def nancumsum(x, axis):
    return np.nancumsum(x, axis=axis)


def nancumprod(x, axis):
    return np.nancumprod(x, axis=axis)


def nan_stats_sq(x):
    return np.nanstd(x) ** 2 + np.sum(np.nanvar(x, axis=0) ** 2) + np.nanprod(x) ** 2


def cov(m, rowvar, bias, ddof):
    return np.cov(m, rowvar=rowvar, bias=bias, ddof=ddof)


def corrcoef(m, rowvar):
    return np.corrcoef(m, rowvar=rowvar)


def cov_sq(m):
    return np.sum(np.cov(m) ** 2)


def copysign(x, y):
    return np.copysign(x, y) * x


def ldexp(x):
    return np.ldexp(x, np.array([1, -2, 3]))


def vecdot(x, y, axis):
    return np.vecdot(x, y, axis=axis)


def vecdot_sq(x):
    return np.sum(np.vecdot(x, x * x))


def vector_norm(x, axis, keepdims, order):
    return np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=order)


def matrix_norm(x, keepdims, order):
    return np.linalg.matrix_norm(x, keepdims=keepdims, ord=order)


def norms_sq(x):
    return np.sum(np.linalg.vector_norm(x, ord=3, axis=1)) ** 2 + np.linalg.matrix_norm(x) ** 3


def meshgrid(x, y):
    a, b = np.meshgrid(x, y)
    return a * b**2


def meshgrid_ij(x, y, z, sparse):
    a, b, c = np.meshgrid(x, y, z, indexing="ij", sparse=sparse)
    return a * b + c


def delete(x, obj, axis):
    return np.delete(x, obj, axis=axis)


def insert(x, obj, v, axis):
    return np.insert(x, obj, v, axis=axis)


def lower_triangle(x):
    i, j = np.tril_indices(3)
    k, m = np.diag_indices(3)
    return np.sum(x[i, j] ** 2) + np.sum(x[k, m]) * np.sum(np.indices((3, 3))[0] * x)


# ----------------------------------------------------------------------------- fixed cases

P4 = rand(4, seed=1)
A5, V3 = rand(5, seed=2), rand(3, seed=3)
Y43, X4 = rand(4, 3, seed=4), np.sort(rand(4, seed=5))
NAN = with_nans(3, 5, seed=6)
M35 = rand(3, 5, seed=7)

CASES = [  # (function, args, wrt)
    (polyval, (P4, rand(2, 3)), (0, 1)),
    (polyval, (P4, 0.4), (0, 1)),
    (interp, (XS, rand(4)), (0, 1)),
    (interp, (XS.reshape(2, 3), rand(4)), (0, 1)),
    (interp_edges, (XS, rand(4), 0.3, -0.2), (0, 1, 2, 3)),
    (trapezoid, (Y43, X4, 0), (0, 1)),
    (trapezoid, (Y43, rand(4, 3, seed=8), 0), (0, 1)),
    (trapezoid, (Y43, rand(3, seed=8), -1), (0, 1)),
    (trapezoid_dx, (Y43,), 0),
    (trapezoid_1d, (rand(5), np.sort(rand(5, seed=1))), (0, 1)),
    (convolve, (A5, V3, "full"), (0, 1)),
    (convolve, (V3, A5, "same"), (0, 1)),
    (correlate, (A5, V3, "valid"), (0, 1)),
    (correlate, (rand(2), A5, "same"), (0, 1)),
    (cumulative_sum, (Y43, 1, False), 0),
    (cumulative_sum, (A5, None, True), 0),
    (ediff1d, (Y43,), 0),
    (ediff1d_ends, (Y43, 0.5, rand(2)), (0, 1, 2)),
    (nanvar, (NAN, 1, 0, False), 0),
    (nanstd, (NAN, None, 1, False), 0),
    (nanprod, (NAN, 0, True), 0),
    (nanmedian, (NAN, 1, False), 0),
    (nanquantile, (NAN, 0), 0),
    (nanpercentile, (NAN,), 0),
    (nancumsum, (NAN, None), 0),
    (nancumprod, (NAN, 1), 0),
    (cov, (M35, True, False, None), 0),
    (cov, (M35, False, True, None), 0),
    (cov, (A5, True, False, 0), 0),
    (corrcoef, (M35, True), 0),
    (corrcoef, (rand(5, 3), False), 0),
    (copysign, (rand(2, 3), rand(3, seed=1)), (0, 1)),
    (ldexp, (rand(2, 3),), 0),
    (vecdot, (rand(2, 3), rand(3, seed=1), -1), (0, 1)),
    (vecdot, (rand(3, 1, 4), rand(3, 2, 1, seed=1), 0), (0, 1)),
    (vector_norm, (rand(2, 3, 4), None, False, 2), 0),
    (vector_norm, (rand(2, 3, 4), (0, 2), True, 3), 0),
    (vector_norm, (rand(2, 3, 4), 1, False, 1), 0),
    (matrix_norm, (rand(2, 3, 4), False, "fro"), 0),
    (matrix_norm, (rand(3, 4), True, "nuc"), 0),
    (meshgrid, (V3, rand(4)), (0, 1)),
    (meshgrid_ij, (V3, rand(4), rand(2), False), (0, 1, 2)),
    (meshgrid_ij, (V3, rand(4), rand(2), True), (0, 1, 2)),
    (delete, (rand(2, 3), [0, 2], None), 0),
    (delete, (rand(2, 3), 1, 1), 0),
    (insert, (rand(2, 3), 1, rand(2), None), (0, 2)),
    (insert, (rand(2, 3), [0, 2], rand(2, 1), 1), (0, 2)),
    (lower_triangle, (rand(3, 3),), 0),
    (insert, (rand(6), -2, 0.7, None), (0, 2)),
]
IDS = [f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize("f,args,wrt", CASES, ids=IDS)
def test_vjp_and_jvp(f, args, wrt):
    check_vjp(f, args, wrt)
    check_jvp(f, args, wrt)


@pytest.mark.parametrize("f,args,wrt", CASES[::3], ids=IDS[::3])
def test_jacobian_batched_matches_per_basis(f, args, wrt):
    check(f, *args, wrt=wrt)


# ----------------------------------------------------------------------------- exact values


def test_polyval_and_interp_exact():
    x = np.array([-1.0, 0.5, 2.0])
    # d/dx (x^2 + 2x + 3) = 2x + 2; d/dp = (x^2, x, 1) summed
    _, pullback = s2sad.vjp(polyval, wrt=(0, 1))(np.array([1.0, 2.0, 3.0]), x)
    dp, dx = pullback(np.ones(3))
    np.testing.assert_allclose(dx, 2 * x + 2)
    np.testing.assert_allclose(dp, [np.sum(x**2), np.sum(x), 3.0])
    fp = np.array([0.0, 1.0, 1.7, -0.7])
    dx = s2sad.vjp(interp, wrt=0)(XS, fp)[1](np.ones(6))
    # slopes 2, 1, -3 inside; 0 outside the knots
    np.testing.assert_allclose(dx, [0.0, 2.0, 1.0, -3.0, 0.0, -3.0])
    dfp = s2sad.vjp(interp, wrt=1)(XS, fp)[1](np.ones(6))
    np.testing.assert_allclose(
        dfp, [1 + 0.6, 0.4 + 5 / 7, 2 / 7 + 0.625 + 0.125, 0.375 + 1 + 0.875]
    )


def test_trapezoid_and_convolution_weights():
    y = rand(5)
    np.testing.assert_allclose(
        s2sad.grad(trapezoid_1d)(y, np.arange(5.0) ** 2), [0.5, 2.0, 4.0, 6.0, 3.5]
    )
    np.testing.assert_allclose(
        s2sad.vjp(trapezoid_dx)(y[:, None])[1](np.ones(1))[:, 0],
        0.3 * np.array([0.5, 1, 1, 1, 0.5]),
    )
    a, v = np.array([1.0, 2.0, 3.0]), np.array([1.0, -1.0])
    _, pullback = s2sad.vjp(convolve, wrt=(0, 1))(a, v, "full")
    da, dv = pullback(np.array([1.0, 0.0, 0.0, 0.0]))
    np.testing.assert_allclose(da, [1.0, 0.0, 0.0])
    np.testing.assert_allclose(dv, [1.0, 0.0])


def test_nan_entries_get_zero_and_degenerate_slices_give_zeros():
    x = np.array([[0.5, np.nan, 2.0], [np.nan, np.nan, 1.0]])
    g = s2sad.vjp(nanvar, wrt=0)(x, 1, 0, False)[1](np.ones(2))
    np.testing.assert_allclose(g, [[-0.75, 0.0, 0.75], [0.0, 0.0, 0.0]])
    g = s2sad.vjp(nanstd, wrt=0)(x, 1, 1, False)[1](np.ones(2))  # one value, ddof 1: zeros
    assert np.all(g[1] == 0) and np.all(np.isfinite(g))
    g = s2sad.vjp(nanprod, wrt=0)(x, None, False)[1](1.0)
    np.testing.assert_allclose(g, [[2.0, 0.0, 0.5], [0.0, 0.0, 1.0]])
    g = s2sad.vjp(nanmedian, wrt=0)(x, 1, False)[1](np.ones(2))
    np.testing.assert_allclose(g, [[0.5, 0.0, 0.5], [0.0, 0.0, 1.0]])
    g = s2sad.vjp(nancumprod, wrt=0)(x, 1)[1](np.ones((2, 3)))
    np.testing.assert_allclose(g, [[1 + 1 + 2, 0.0, 0.5], [0.0, 0.0, 1.0]])


def test_copysign_ldexp_and_vecdot_exact():
    x, y = np.array([1.5, -2.0, 0.5, -0.5]), np.array([-1.0, -1.0, 0.0, -0.0])
    g = s2sad.vjp(lambda_copysign, wrt=(0, 1))(x, y)[1](np.ones(4))
    np.testing.assert_array_equal(g[0], [-1.0, 1.0, 1.0, 1.0])  # -0.0 is negative
    np.testing.assert_array_equal(g[1], [0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(s2sad.grad(ldexp_sum)(np.ones(3)), [2.0, 0.25, 8.0])
    np.testing.assert_allclose(s2sad.grad(vecdot_sq)(np.array([[1.0, 2.0]])), [[3.0, 12.0]])


def lambda_copysign(x, y):
    return np.copysign(x, y)


def ldexp_sum(x):
    return np.sum(ldexp(x))


def test_cov_and_corrcoef_exact():
    m = np.array([[1.0, 2.0, 4.0], [0.0, 1.0, -1.0]])
    # d sum(cov) / dm = 2 * (sum over rows of centered) / (n - 1)
    centered = m - m.mean(axis=1, keepdims=True)
    g = s2sad.vjp(cov, wrt=0)(m, True, False, None)[1](np.ones((2, 2)))
    np.testing.assert_allclose(g, 2 * centered.sum(axis=0) / 2 * np.ones((2, 1)))
    g = s2sad.vjp(corrcoef, wrt=0)(m, True)[1](np.eye(2))  # the diagonal is 1: no derivative
    np.testing.assert_allclose(g, 0.0, atol=1e-12)


HESSIANS = [
    (polyval_sq, (P4, rand(2, 3)), 0),
    (polyval_sq, (P4, rand(3)), 1),
    (interp_sq, (XS, rand(4)), 0),
    (interp_sq, (XS, rand(4)), 1),
    (trapezoid_sq, (Y43, X4), 0),
    (trapezoid_sq, (Y43, X4), 1),
    (trapezoid_sq, (Y43, rand(4, 3, seed=9)), 1),
    (convolve_sq, (A5, V3), 0),
    (convolve_sq, (A5, V3), 1),
    (nan_stats_sq, (with_nans(3, 4, seed=2),), 0),
    (cov_sq, (M35,), 0),
    (vecdot_sq, (rand(2, 3),), 0),
    (norms_sq, (rand(3, 4),), 0),
]


@pytest.mark.parametrize("f,args,wrt", HESSIANS, ids=[f"{c[0].__name__}-{c[2]}" for c in HESSIANS])
def test_hessian_matches_finite_differences_of_the_gradient(f, args, wrt):
    H = s2sad.hessian(f, wrt=wrt)(*args)
    x = args[wrt]
    grad = s2sad.grad(f, wrt=wrt)
    expected = np.zeros((x.size, x.size))
    for k in range(x.size):
        step = np.zeros(x.size)
        step[k] = 1e-5
        moved = [
            [a if i != wrt else x + s.reshape(x.shape) for i, a in enumerate(args)]
            for s in (step, -step)
        ]
        expected[:, k] = ((grad(*moved[0]) - grad(*moved[1])) / 2e-5).reshape(-1)
    H = np.nan_to_num(H.reshape(x.size, x.size))  # rows and columns of NaN inputs
    np.testing.assert_allclose(H, np.nan_to_num(expected), atol=1e-5)


def corrcoef_cube(m):
    return np.sum(np.corrcoef(m) ** 3)


def test_second_derivatives_without_a_rule_are_refused_at_the_users_line():
    """np.corrcoef's cotangent has no tangent rule: its Hessian is refused, naming the line,
    never a silent zero."""
    with pytest.raises(s2sad.NoRuleError, match="corrcoef_vjp") as info:
        s2sad.hessian(corrcoef_cube)(M35)
    assert "test_rules_breadth_numerical.py" in str(info.value)


# ----------------------------------------------------------------------------- jit


def vector_routines(x, fp, v):
    """np.interp, np.convolve, np.correlate, np.ediff1d, np.delete, np.insert, np.copysign and
    np.ldexp of vectors: one function, compiled once per mode."""
    total = np.sum(np.interp(x, XP, fp) ** 2) + np.sum(np.correlate(x, v) ** 2)
    total += np.sum(np.convolve(x, v) * np.convolve(x, v, "valid")[0])
    total += np.sum(np.ediff1d(x) ** 2) + np.sum(np.delete(x, 1) ** 2)
    total += np.sum(np.insert(x, -2, v[0]) ** 2 * np.arange(7.0))
    return total + np.sum(np.copysign(x, v[1]) * np.ldexp(x, 2))


def statistics(y, x, m, n):
    """np.trapezoid, np.cov, np.corrcoef, np.nanmedian, np.nanvar and np.nanstd."""
    total = np.trapezoid(y, x) ** 2 + np.trapezoid(y * x, dx=0.5)
    total += np.sum(np.cov(m) ** 2) + np.sum(np.cov(m, rowvar=False, ddof=0))
    total += np.sum(np.corrcoef(m, rowvar=False) ** 3) + np.nanmedian(m) ** 2
    return total + np.nanvar(n) + np.nanstd(n) ** 3


STATS = (rand(6, seed=11), np.sort(rand(6, seed=13)), M35, with_nans(6, seed=3))
JITTED = [  # (function, args, wrt, mode): Numba compiles each primal
    (vector_routines, (XS, rand(4), V3), (0, 1, 2), "grad"),
    (vector_routines, (XS, rand(4), V3), (0, 1, 2), "jvp"),
    (statistics, STATS, (0, 1, 2, 3), "grad"),
    (statistics, STATS, (0, 1, 2, 3), "jvp"),
    (cov, (rand(5), True, False, 1), 0, "vjp"),  # one variable: a number's cotangent
    (ediff1d_ends, (rand(4, 3), 0.5, rand(2)), (0, 1, 2), "vjp"),  # a number and an array
]
# JITTED runs in tests/test_jit_corpus.py: each derivative with jit="strict" (no fallback) against
# the Python version, as every corpus case does.


# ----------------------------------------------------------------------------- refusals


def interp_in_xp(x, xp):
    return np.interp(x, xp, np.array([0.0, 1.0, 3.0]))


def interp_periodic(x):
    return np.interp(x, XP, np.array([0.0, 1.0, 3.0, 2.0]), period=2.0)


def trapezoid_in_dx(y, dx):
    return np.trapezoid(y, dx=dx)


def cov_of_two(m, y):
    return np.cov(m, y)


def cov_weighted(m):
    return np.cov(m, aweights=np.array([1.0, 2.0, 1.0]))


@pytest.mark.parametrize(
    "f,args,wrt,says",
    [
        (interp_in_xp, (rand(3), np.array([0.0, 0.5, 1.0])), 1, "xp"),
        (interp_periodic, (rand(3),), 0, "np.interp"),
        (trapezoid_in_dx, (rand(4), 0.5), 1, "dx"),
        (cov_of_two, (rand(3), rand(3, seed=1)), 0, "np.cov"),
        (cov_weighted, (rand(2, 3),), 0, "np.cov"),
    ],
)
def test_calls_outside_the_rules_are_refused_at_the_users_line(f, args, wrt, says):
    """np.interp's knot positions and periodic interpolation, np.trapezoid's dx, np.cov of two
    arrays or with weights have no rule: refused, naming the call and the line."""
    with pytest.raises(s2sad.S2SADError, match=says) as info:
        s2sad.vjp(f, wrt=wrt)(*args)
    assert "test_rules_breadth_numerical.py" in str(info.value)


# ----------------------------------------------------------------------------- hypothesis

HYP = settings(
    max_examples=10, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
SHAPES = array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4)


def both_modes(f, args, wrt, seed):
    check_vjp(f, args, wrt, seed=seed)
    check_jvp(f, args, wrt, seed=seed)


@HYP
@given(shape=SHAPES, seed=st.integers(0, 999), data=st.data())
def test_random_trapezoid(shape, seed, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    y = rand(*shape, seed=seed)
    full = data.draw(st.booleans())
    x = rand(*shape, seed=seed + 1) if full else np.sort(rand(shape[axis], seed=seed + 1))
    both_modes(trapezoid, (y, x, axis), (0, 1), seed)


@HYP
@given(
    n=st.integers(1, 6),
    m=st.integers(1, 6),
    mode=st.sampled_from(["full", "same", "valid"]),
    seed=st.integers(0, 999),
)
def test_random_convolve_and_correlate(n, m, mode, seed):
    a, v = rand(n, seed=seed), rand(m, seed=seed + 1)
    both_modes(convolve, (a, v, mode), (0, 1), seed)
    both_modes(correlate, (a, v, mode), (0, 1), seed)


@HYP
@given(shape=SHAPES, seed=st.integers(0, 999), data=st.data())
def test_random_nan_statistics(shape, seed, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    keepdims = data.draw(st.booleans())
    x = with_nans(*shape, seed=seed)
    enough = x.size >= 4 if axis is None else shape[axis] >= 3  # values left past ddof=1
    ddof = int(enough and data.draw(st.booleans()))
    both_modes(nanvar, (x, axis, ddof, keepdims), 0, seed)
    both_modes(nanstd, (x, axis, 0, keepdims), 0, seed)
    both_modes(nanprod, (x, axis, keepdims), 0, seed)
    both_modes(nanmedian, (x, axis, keepdims), 0, seed)
    both_modes(nancumsum if axis is None or seed % 2 else nancumprod, (x, axis), 0, seed)


@HYP
@given(
    p=st.integers(1, 4),
    n=st.integers(3, 5),
    rowvar=st.booleans(),
    ddof=st.sampled_from([None, 0, 2]),
    seed=st.integers(0, 999),
)
def test_random_cov_and_corrcoef(p, n, rowvar, ddof, seed):
    m = rand(p, n, seed=seed) if rowvar else rand(n, p, seed=seed)
    both_modes(cov, (m, rowvar, False, ddof), 0, seed)
    if p > 1:
        both_modes(corrcoef, (m, rowvar), 0, seed)


@st.composite
def vecdot_operands(draw):
    """Two shapes whose loop axes broadcast, of one length along the summed axis, and that
    axis (NumPy's gufunc rule: an axis of each operand)."""
    shape = draw(SHAPES)
    axis = draw(st.integers(0, len(shape) - 1))
    out, drops = [], []
    for _ in range(2):
        dims = [s if d == axis or draw(st.booleans()) else 1 for d, s in enumerate(shape)]
        drops.append(draw(st.integers(0, axis)))
        out.append(tuple(dims[drops[-1] :]))
    # counted from the end; from the start (each operand's own) where the ranks agree
    positive = drops[0] == drops[1] and draw(st.booleans())
    return out, axis - drops[0] if positive else axis - len(shape)


@HYP
@given(case=vecdot_operands(), seed=st.integers(0, 999), data=st.data())
def test_random_vecdot_and_vector_norm(case, seed, data):
    (sx, sy), axis = case
    x, y = rand(*sx, seed=seed), rand(*sy, seed=seed + 1)
    both_modes(vecdot, (x, y, axis), (0, 1), seed)
    order = data.draw(st.sampled_from([2, 3, 1, np.inf]))
    norm_axis = data.draw(st.one_of(st.none(), st.integers(-np.ndim(x), np.ndim(x) - 1)))
    both_modes(vector_norm, (x + 2.5, norm_axis, data.draw(st.booleans()), order), 0, seed)


@HYP
@given(shape=SHAPES, seed=st.integers(0, 999), data=st.data())
def test_random_cumulative_sum_insert_and_delete(shape, seed, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = rand(*shape, seed=seed)
    both_modes(cumulative_sum, (x, axis, data.draw(st.booleans())), 0, seed)
    obj = data.draw(st.lists(st.integers(0, shape[axis] - 1), min_size=1, max_size=2, unique=True))
    both_modes(delete, (x, obj, axis), 0, seed)
    values = rand(*[1 if d == axis % len(shape) else s for d, s in enumerate(shape)], seed=seed)
    both_modes(insert, (x, obj[:1], values, axis), (0, 2), seed)

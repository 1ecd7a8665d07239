"""Scans (cumsum, cumprod, diff), diagonals (diag, diagonal), triangles (tril, triu), flip and
roll: pullbacks and tangents against finite differences, shapes and dtypes, both Jacobian modes
batched against per-basis, and random shapes and axes from hypothesis."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import s2sad
from conftest import check_jvp, check_vjp, rand
from test_jacobian_batched import check


def r(*shape, seed=0):
    return rand(*shape, seed=seed)


def cumsum_flat(x):
    return np.cumsum(x)


def cumsum_axis(x, axis):
    return np.cumsum(x, axis=axis)


def cumsum_method(x):
    return x.cumsum(axis=0) * x


def cumprod_flat(x):
    return np.cumprod(x)


def cumprod_axis(x, axis):
    return np.cumprod(x, axis=axis)


def cumprod_method(x):
    return x.cumprod(1)


def diff_1(x):
    return np.diff(x)


def diff_n(x, n, axis):
    return np.diff(x, n=n, axis=axis)


def diag_build(v):
    return np.diag(v)


def diag_build_k(v, k):
    return np.diag(v, k)


def diag_read(a, k):
    return np.diag(a, k=k)


def diagonal_fn(a, offset, axis1, axis2):
    return np.diagonal(a, offset, axis1, axis2)


def diagonal_method(a):
    return a.diagonal(1) ** 2


def tril_fn(m, k):
    return np.tril(m, k)


def triu_fn(m, k):
    return np.triu(m, k=k)


def flip_all(m):
    return np.flip(m)


def flip_axis(m, axis):
    return np.flip(m, axis)


def roll_flat(a, shift):
    return np.roll(a, shift)


def roll_axis(a, shift, axis):
    return np.roll(a, shift, axis=axis)


def scan_chain(x):
    return np.sum(np.cumsum(np.flip(np.diff(np.tril(x), axis=0), 1), axis=1) ** 2)


ZEROS = np.array([[0.5, 0.0, -1.5, 2.0], [0.0, 1.2, 0.0, -0.7], [1.1, 0.9, -0.4, 0.3]])

CASES = [
    (cumsum_flat, (r(3, 4),)),
    (cumsum_flat, (r(5),)),
    (cumsum_axis, (r(3, 4, 2), 1)),
    (cumsum_axis, (r(3, 4), -1)),
    (cumsum_method, (r(3, 4),)),
    (cumprod_flat, (r(3, 4),)),
    (cumprod_flat, (ZEROS,)),
    (cumprod_axis, (ZEROS, 1)),
    (cumprod_axis, (r(2, 3, 4), -2)),
    (cumprod_method, (ZEROS,)),
    (diff_1, (r(6),)),
    (diff_n, (r(4, 5), 2, 0)),
    (diff_n, (r(3, 5, 2), 3, -2)),
    (diag_build, (r(4),)),
    (diag_build_k, (r(3), 2)),
    (diag_build_k, (r(3), -1)),
    (diag_read, (r(4, 4), 0)),
    (diag_read, (r(3, 5), 2)),
    (diag_read, (r(5, 3), -1)),
    (diagonal_fn, (r(2, 3, 4), 0, 1, 2)),
    (diagonal_fn, (r(3, 2, 4), -1, 2, 0)),
    (diagonal_method, (r(3, 4),)),
    (tril_fn, (r(3, 4), 0)),
    (tril_fn, (r(2, 3, 3), -1)),
    (tril_fn, (r(4), 1)),
    (triu_fn, (r(4, 3), 1)),
    (triu_fn, (r(3), 0)),
    (flip_all, (r(3, 4),)),
    (flip_axis, (r(3, 4, 2), 1)),
    (flip_axis, (r(3, 4, 2), (0, 2))),
    (roll_flat, (r(3, 4), 5)),
    (roll_axis, (r(3, 4), -1, 1)),
    (roll_axis, (r(3, 4, 2), (1, 2), (0, 1))),
    (scan_chain, (r(4, 4),)),
]
IDS = [f"{f.__name__}-{i}" for i, (f, _) in enumerate(CASES)]


@pytest.mark.parametrize("f,args", CASES, ids=IDS)
def test_vjp_and_jvp(f, args):
    check_vjp(f, args)  # also: each cotangent has its input's shape and dtype
    check_jvp(f, args)


@pytest.mark.parametrize("f,args", CASES, ids=IDS)
def test_jacobian_batched_matches_per_basis(f, args):
    check(f, *args)


def test_cumsum_and_diag_values():
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(s2sad.vjp(cumsum_flat)(x)[1](np.ones(3)), [3.0, 2.0, 1.0])
    g = np.arange(9.0).reshape(3, 3)
    np.testing.assert_array_equal(s2sad.vjp(diag_build)(x)[1](g), [0.0, 4.0, 8.0])


def test_cumprod_at_zeros_is_exact():
    x = np.array([2.0, 0.0, 3.0, 0.0])
    _, pullback = s2sad.vjp(cumprod_flat)(x)
    # d/dx1 of (2, 2 x1, 6 x1, 6 x1 x3) at x = (2, 0, 3, 0): (0, 2, 6, 0)
    np.testing.assert_array_equal(pullback(np.ones(4)), [1.0, 2 + 6 + 0, 0.0, 0.0])
    np.testing.assert_array_equal(pullback(np.array([0.0, 0.0, 0.0, 1.0])), [0, 0, 0, 0])
    np.testing.assert_array_equal(
        s2sad.jvp(cumprod_flat)(x, tangent=np.array([0.0, 1.0, 0.0, 1.0]))[1], [0, 2, 6, 0]
    )


def diff_prepend(x):
    return np.sum(np.diff(x, prepend=0.0))


def test_diff_with_prepend_is_refused():
    with pytest.raises(s2sad.S2SADError, match="np.diff with these arguments"):
        s2sad.grad(diff_prepend)(r(4))


# ----------------------------------------------------------------------------- hypothesis

HYP = settings(
    max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def shape_and_axis(draw, min_dims=1):
    shape = draw(array_shapes(min_dims=min_dims, max_dims=3, min_side=1, max_side=4))
    ndim = len(shape)
    return shape, draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1)))


@pytest.mark.parametrize("f", [cumsum_axis, cumprod_axis, flip_axis], ids=lambda f: f.__name__)
@HYP
@given(case=shape_and_axis(), seed=st.integers(0, 2**32 - 1))
def test_random_axes(f, case, seed):
    shape, axis = case
    x = rand(*shape, seed=seed % 1000)
    out = f(x, axis)
    assert np.shape(out) == np.shape(getattr(np, f.__name__.split("_")[0])(x, axis=axis))
    check_vjp(f, (x, axis), seed=seed)
    check_jvp(f, (x, axis), seed=seed)


@HYP
@given(case=shape_and_axis(), shift=st.integers(-5, 5), seed=st.integers(0, 2**32 - 1))
def test_roll_random_axes(case, shift, seed):
    shape, axis = case
    x = rand(*shape, seed=seed % 1000)
    check_vjp(roll_axis, (x, shift, axis), seed=seed)
    check_jvp(roll_axis, (x, shift, axis), seed=seed)


@HYP
@given(case=shape_and_axis(), n=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_diff_random_axes(case, n, seed):
    shape, axis = case
    axis = -1 if axis is None else axis
    x = rand(*shape, seed=seed % 1000)
    check_vjp(diff_n, (x, n, axis), seed=seed)
    check_jvp(diff_n, (x, n, axis), seed=seed)


@HYP
@given(
    shape=array_shapes(min_dims=2, max_dims=4, min_side=1, max_side=4),
    data=st.data(),
    seed=st.integers(0, 2**32 - 1),
)
def test_diagonal_random_axes(shape, data, seed):
    ndim = len(shape)
    axis1 = data.draw(st.integers(-ndim, ndim - 1))
    axis2 = data.draw(st.integers(-ndim, ndim - 1).filter(lambda a: a % ndim != axis1 % ndim))
    offset = data.draw(st.integers(-shape[axis1] + 1, shape[axis2] - 1))
    x = rand(*shape, seed=seed % 1000)
    check_vjp(diagonal_fn, (x, offset, axis1, axis2), seed=seed)
    check_jvp(diagonal_fn, (x, offset, axis1, axis2), seed=seed)

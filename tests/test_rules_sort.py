"""np.sort: pullbacks and tangents against finite differences (random shapes and axes from
hypothesis), exact values and ties, both Jacobian modes batched against per-basis, Hessians, and
the jitted forms."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import s2sad
from conftest import check_jvp, check_vjp, rand
from test_derivatives import fd_hessian
from test_jacobian_batched import check


def sort_last(x):
    return np.sort(x)


def sort_axis(x, axis):
    return np.sort(x, axis=axis)


def sort_kind(x):
    return np.sort(x, axis=0, kind="stable") * x


def weighted_sorted_cube(x):
    return np.sum(np.sort(x) ** 3 * np.arange(x.size))


def trimmed_mean(x):
    """The mean of all but the smallest and largest value: a sort inside a statistic."""
    s = np.sort(x)
    return np.mean(s[1:-1])


def distinct(*shape, seed=0):
    """Values well apart (finite differences never cross a tie)."""
    n = int(np.prod(shape))
    return np.random.default_rng(seed).permutation(n).reshape(shape) * 0.5 - n / 4


CASES = [
    (sort_last, (distinct(5),)),
    (sort_last, (distinct(3, 4),)),
    (sort_axis, (distinct(3, 4), 0)),
    (sort_axis, (distinct(2, 3, 4), -2)),
    (sort_axis, (distinct(3, 4), None)),
    (sort_kind, (distinct(4, 2),)),
    (weighted_sorted_cube, (distinct(6),)),
    (trimmed_mean, (distinct(7),)),
]
IDS = [f"{f.__name__}-{i}" for i, (f, _) in enumerate(CASES)]


@pytest.mark.parametrize("f,args", CASES, ids=IDS)
def test_vjp_and_jvp(f, args):
    check_vjp(f, args)  # also: each cotangent has its input's shape and dtype
    check_jvp(f, args)


@pytest.mark.parametrize("f,args", CASES, ids=IDS)
def test_jacobian_batched_matches_per_basis(f, args):
    check(f, *args)


def test_cotangent_goes_back_where_each_value_came_from():
    x = np.array([3.0, 1.0, 2.0])
    _, pullback = s2sad.vjp(sort_last)(x)
    np.testing.assert_array_equal(pullback(np.array([10.0, 20.0, 30.0])), [30.0, 10.0, 20.0])
    _, tangent = s2sad.jvp(sort_last)(x, tangent=np.array([10.0, 20.0, 30.0]))
    np.testing.assert_array_equal(tangent, [20.0, 30.0, 10.0])
    m = np.array([[2.0, -1.0], [0.0, 5.0]])
    _, pullback = s2sad.vjp(sort_axis)(m, None)
    np.testing.assert_array_equal(
        pullback(np.array([1.0, 2.0, 3.0, 4.0])), [[3.0, 1.0], [2.0, 4.0]]
    )


def test_ties_follow_the_stable_order():
    """Where values tie, the first in `a` takes the first sorted slot (one subgradient)."""
    x = np.array([1.0, 0.0, 1.0])
    _, pullback = s2sad.vjp(sort_last)(x)
    np.testing.assert_array_equal(pullback(np.array([1.0, 2.0, 3.0])), [2.0, 1.0, 3.0])
    g = s2sad.grad(weighted_sorted_cube)(np.array([2.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 12.0])


def test_hessian_matches_finite_differences_of_the_gradient():
    x = distinct(5, seed=3)
    H = s2sad.hessian(weighted_sorted_cube)(x)
    np.testing.assert_allclose(H, fd_hessian(weighted_sorted_cube, x), atol=1e-6)
    np.testing.assert_allclose(H, np.diag(6 * x * np.argsort(np.argsort(x))), atol=1e-12)


@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_jitted_forms_compile_and_agree(mode):
    """Numba's np.sort takes no axis: on a vector, the gradient and tangent compile as they are."""
    x = distinct(6, seed=1)
    if mode == "grad":
        jitted = s2sad.grad(weighted_sorted_cube, jit="strict")(x)
        plain = s2sad.grad(weighted_sorted_cube)(x)
    else:
        t = rand(6, seed=2)
        jitted = s2sad.jvp(weighted_sorted_cube, jit="strict")(x, tangent=t)
        plain = s2sad.jvp(weighted_sorted_cube)(x, tangent=t)
    np.testing.assert_allclose(jitted, plain, rtol=1e-12)


# ----------------------------------------------------------------------------- hypothesis

HYP = settings(
    max_examples=20, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def shape_and_axis(draw):
    shape = draw(array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    ndim = len(shape)
    return shape, draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1)))


@HYP
@given(case=shape_and_axis(), seed=st.integers(0, 2**32 - 1))
def test_random_shapes_and_axes(case, seed):
    shape, axis = case
    x = distinct(*shape, seed=seed % 1000)
    assert np.shape(sort_axis(x, axis)) == np.shape(np.sort(x, axis=axis))
    check_vjp(sort_axis, (x, axis), seed=seed)
    check_jvp(sort_axis, (x, axis), seed=seed)

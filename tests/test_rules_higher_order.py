"""np.linspace in its end points (rules/elementwise.py), in every mode; and the higher
derivatives through the decompositions and solvers (rules/decompositions.py,
rules/matrix_functions.py) and through np.sinc and np.average: Hessians against central
differences of s2sad's gradient, third derivatives against central differences of its Hessian."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import s2sad
from conftest import check_jvp, check_vjp, rand
from test_jacobian_batched import check

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


def test_linspace_jitted_agrees():
    """Numba compiles np.linspace of scalar end points: the gradient and tangent compile too."""
    numba = pytest.importorskip("numba")
    numba.njit(samples_sum)(0.3, 1.9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jitted = s2sad.grad(samples_sum, wrt=(0, 1), jit="strict")(0.3, 1.9)
        jitted_t = s2sad.jvp(samples_sum, wrt=(0, 1), jit="strict")(0.3, 1.9, tangent=(0.5, -1.0))
    np.testing.assert_allclose(jitted, s2sad.grad(samples_sum, wrt=(0, 1))(0.3, 1.9), rtol=1e-12)
    plain_t = s2sad.jvp(samples_sum, wrt=(0, 1))(0.3, 1.9, tangent=(0.5, -1.0))
    np.testing.assert_allclose(jitted_t, plain_t, rtol=1e-12)

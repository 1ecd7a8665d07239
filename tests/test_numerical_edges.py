"""Numerical edge cases, with the behaviour the README's "Numerical behaviour" section documents.

Kinks get one stated subgradient (the same in reverse and forward mode); singular points give
NumPy's own `inf`/`nan` and warnings, never an exception from s2sad; `nan`/`inf` inputs propagate;
float32 stays float32 through every transform; integer arguments are refused when asked for;
0-d arrays, Python floats and NumPy scalars keep their kind; empty arrays work; and the caller's
arrays (non-contiguous, read-only, or written into by the function) come back untouched.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import s2sad
from conftest import check_grad, check_vjp

# ----------------------------------------------------------------------------- kinks


def total_abs(x):
    return np.sum(np.abs(x))


def total_relu(x):
    return np.sum(np.maximum(x, 0.0))


def total_min_with(x, y):
    return np.sum(np.minimum(x, y))


def largest(x):
    return np.max(x)


def smallest_per_row(x):
    return np.sum(np.min(x, axis=1))


def total_clip(x):
    return np.sum(np.clip(x, -1.0, 1.0))


def builtin_abs(x):
    return abs(x) * 2.0


KINKS = [
    # function, input, documented gradient
    (total_abs, np.array([0.0, 1.0, -2.0]), [0.0, 1.0, -1.0]),  # sign(0) = 0
    (total_relu, np.array([0.0, 1.0, -2.0]), [0.5, 1.0, 0.0]),  # a maximum tie splits evenly
    (largest, np.array([1.0, 3.0, 3.0]), [0.0, 0.5, 0.5]),  # tied maxima share the cotangent
    (smallest_per_row, np.array([[2.0, 2.0, 2.0], [1.0, 0.0, 5.0]]), [[1 / 3] * 3, [0, 1, 0]]),
    (total_clip, np.array([-1.0, 1.0, 2.0, -3.0, 0.0]), [1.0, 1.0, 0.0, 0.0, 1.0]),  # inclusive
    (builtin_abs, 0.0, 0.0),
]


@pytest.mark.parametrize("f, x, expected", KINKS, ids=[k[0].__name__ for k in KINKS])
def test_kinks_take_the_documented_subgradient_in_both_modes(f, x, expected):
    g = s2sad.grad(f)(x)
    np.testing.assert_allclose(g, expected, atol=1e-15)
    # forward mode uses the same convention: the tangent is the gradient contracted with it
    t = np.linspace(0.5, 1.5, np.size(x)).reshape(np.shape(x))
    t = float(t) if isinstance(x, float) else t
    _, dot = s2sad.jvp(f)(x, tangent=t)
    assert dot == pytest.approx(float(np.sum(np.asarray(expected) * t)), abs=1e-14)


def test_minimum_ties_split_between_both_operands():
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([1.0, 5.0, 0.0])
    dx, dy = s2sad.grad(total_min_with, wrt=(0, 1))(x, y)
    np.testing.assert_array_equal(dx, [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(dy, [0.5, 0.0, 1.0])


# ----------------------------------------------------------------------------- singular points


def total_sqrt(x):
    return np.sum(np.sqrt(x))


def total_log(x):
    return np.sum(np.log(x))


def root_of_square(x):
    return np.sum(np.sqrt(x * x))


def fractional_power(x):
    return np.sum(x**0.5)


@pytest.mark.parametrize(
    "f, x, expected",
    [
        (total_sqrt, np.array([0.0, 4.0]), [np.inf, 0.25]),
        (total_log, np.array([0.0, 4.0]), [np.inf, 0.25]),
        (total_log, np.array([-1.0, 2.0]), [-1.0, 0.5]),  # log's value is nan, 1/x is not
        (fractional_power, np.array([0.0, 4.0]), [np.inf, 0.25]),
        (root_of_square, np.array([0.0, -3.0]), [np.nan, -1.0]),  # inf * 0 at the kink
    ],
    ids=["sqrt-at-0", "log-at-0", "log-negative", "power-half-at-0", "sqrt-of-square-at-0"],
)
def test_singular_points_give_numpys_inf_and_nan_with_its_warnings(f, x, expected):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = s2sad.grad(f)(x)
    np.testing.assert_array_equal(g, expected)
    assert all(issubclass(w.category, RuntimeWarning) for w in caught)
    assert caught, "NumPy's own warning should reach the user"


def sin_times(x):
    return np.sum(np.sin(x) * x)


def square_sum(x):
    return np.sum(x * x)


def overflow_on_a_path_not_taken(x, use_it):
    big = np.exp(x * 1000.0)  # inf for x[0] = 1
    if use_it:
        return np.sum(big)
    return np.sum(x**2)


def test_an_overflowed_intermediate_meets_its_zero_cotangent_as_nan():
    """Documented, as in every reverse-mode tool (JAX's `jnp.where` included): the adjoint of
    `big` is 0 where the output does not use it, and 0 * exp(1000) = 0 * inf = nan."""
    with np.errstate(over="ignore", invalid="ignore"):
        g = s2sad.grad(overflow_on_a_path_not_taken)(np.array([1.0, 1e-3]), False)
    assert np.isnan(g[0]) and g[1] == pytest.approx(2e-3)


def test_nan_and_inf_inputs_propagate_without_raising():
    x = np.array([np.nan, np.inf, -np.inf, 1.0])
    with np.errstate(all="ignore"):
        g = s2sad.grad(sin_times)(x)
        assert np.isnan(g[:3]).all() and g[3] == pytest.approx(math.sin(1.0) + math.cos(1.0))
        g = s2sad.grad(square_sum)(x)
        np.testing.assert_array_equal(g, [np.nan, np.inf, -np.inf, 2.0])
        _, dot = s2sad.jvp(square_sum)(x, tangent=np.ones(4))
        assert np.isnan(dot)
        out, pullback = s2sad.vjp(sin_times)(x)
        assert np.isnan(out) and np.isnan(pullback(1.0)[:3]).all()


def test_numpy_error_settings_are_the_users_own():
    """s2sad catches nothing: with np.errstate(divide="raise") NumPy raises where it would."""
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            s2sad.grad(total_log)(np.array([0.0, 1.0]))


# ----------------------------------------------------------------------------- dtypes and kinds


def tanh_matmul(w, x):
    return np.sum(np.tanh(x @ w) ** 2)


def tanh_vector(w, x):
    return np.tanh(x @ w)


def test_float32_stays_float32_through_every_transform():
    w = np.linspace(-0.5, 0.5, 3).astype(np.float32)
    x = np.linspace(-1.0, 1.0, 6).reshape(2, 3).astype(np.float32)
    assert s2sad.grad(tanh_matmul)(w, x).dtype == np.float32
    value, g = s2sad.value_and_grad(tanh_matmul)(w, x)
    assert g.dtype == np.float32
    out, pullback = s2sad.vjp(tanh_vector)(w, x)
    assert pullback(np.ones(2, dtype=np.float32)).dtype == np.float32
    out, dot = s2sad.jvp(tanh_vector)(w, x, tangent=np.ones(3, dtype=np.float32))
    assert dot.dtype == np.float32
    for mode in ("forward", "reverse"):
        jac = s2sad.jacobian(tanh_vector, mode=mode)(w, x)
        assert jac.dtype == np.float32 and jac.shape == (2, 3)
    assert s2sad.hessian(tanh_matmul)(w, x).dtype == np.float32
    # and the numbers are float32-accurate: the middle element cancels to 0 in float64, and to
    # rounding error (about 1e-8 here, by the BLAS kernel's summation order) in float32
    g64 = s2sad.grad(tanh_matmul)(w.astype(float), x.astype(float))
    scale = np.abs(g64).max()
    np.testing.assert_allclose(s2sad.grad(tanh_matmul)(w, x), g64, rtol=1e-5, atol=1e-6 * scale)


def scaled(x, n):
    return np.sum(x) * n


def test_integer_arguments_are_refused_when_asked_for_in_every_transform():
    x = np.ones(2)
    for transform in (s2sad.grad, s2sad.value_and_grad, s2sad.vjp, s2sad.hessian):
        with pytest.raises(s2sad.NonDifferentiableInputError, match="'n' is an integer"):
            transform(scaled, wrt=1)(x, 3)
    with pytest.raises(s2sad.NonDifferentiableInputError, match="'n' is an integer"):
        s2sad.jvp(scaled, wrt=1)(x, 3, tangent=1.0)
    with pytest.raises(s2sad.NonDifferentiableInputError, match="dtype int64"):
        s2sad.jacobian(tanh_vector)(np.array([1, 2, 3]), np.ones((2, 3)))
    with pytest.raises(s2sad.NonDifferentiableInputError, match="dtype bool"):
        s2sad.grad(square_sum)(np.array([True, False]))
    # an integer argument that is not differentiated is just a value
    assert s2sad.grad(scaled)(x, 3).tolist() == [3.0, 3.0]


def cube(x):
    return x * x * x


@pytest.mark.parametrize(
    "x, kind",
    [
        (2.0, float),
        (np.float64(2.0), np.float64),
        (np.float32(2.0), np.float32),
        (np.array(2.0), np.ndarray),
        (np.array(2.0, dtype=np.float32), np.ndarray),
    ],
    ids=["float", "float64", "float32", "0-d", "0-d-float32"],
)
def test_zero_d_arrays_python_floats_and_numpy_scalars_keep_their_kind(x, kind):
    g = s2sad.grad(cube)(x)
    assert type(g) is kind and np.shape(g) == () and np.asarray(g).dtype == np.asarray(x).dtype
    assert g == pytest.approx(12.0)
    out, dot = s2sad.jvp(cube)(x, tangent=np.ones_like(x) if kind is np.ndarray else kind(1.0))
    assert type(dot) is type(out) and dot == pytest.approx(12.0)  # the output's kind


def mean_square(x):
    return np.mean(x * x)


def matmul_sum(x, w):
    return np.sum(x @ w)


def test_empty_arrays():
    g = s2sad.grad(square_sum)(np.zeros(0))
    assert g.shape == (0,) and g.dtype == np.float64
    dx, dw = s2sad.grad(matmul_sum, wrt=(0, 1))(np.zeros((0, 3)), np.ones((3, 2)))
    assert dx.shape == (0, 3) and dw.shape == (3, 2)
    np.testing.assert_array_equal(dw, np.zeros((3, 2)))  # no rows, no contribution
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        g = s2sad.grad(mean_square)(np.zeros((2, 0)))  # mean of nothing is nan, as in NumPy
    assert g.shape == (2, 0)
    jac = s2sad.jacobian(tanh_vector)(np.ones(3), np.zeros((0, 3)))
    assert jac.shape == (0, 3)


# ----------------------------------------------------------------------------- the caller's arrays


def writes_its_argument(a):
    a[0] = a[0] * 3.0
    return np.sum(a * a)


def writes_its_argument_vector(a):
    a[1:] = a[1:] * a[0]
    return a * 2.0


def test_a_function_that_writes_into_its_argument_leaves_the_callers_array_alone():
    expected = np.array([18.0, 4.0, 6.0])  # d/da of 9 a0^2 + a1^2 + a2^2 at (1, 2, 3)
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(s2sad.grad(writes_its_argument)(x), expected)
    np.testing.assert_array_equal(s2sad.value_and_grad(writes_its_argument)(x)[1], expected)
    out, pullback = s2sad.vjp(writes_its_argument)(x)
    assert out == 22.0
    np.testing.assert_array_equal(x, [1.0, 2.0, 3.0])  # the primal ran on a copy
    np.testing.assert_array_equal(pullback(1.0), expected)
    np.testing.assert_array_equal(pullback(2.0), 2 * expected)  # the pullback can be called again
    tangent = np.ones(3)
    _, dot = s2sad.jvp(writes_its_argument)(x, tangent=tangent)
    assert dot == 28.0
    np.testing.assert_array_equal(tangent, np.ones(3))  # tangents are not written either
    np.testing.assert_array_equal(s2sad.jacobian(writes_its_argument)(x), expected)
    np.testing.assert_array_equal(s2sad.jacobian(writes_its_argument, mode="forward")(x), expected)
    np.testing.assert_array_equal(x, [1.0, 2.0, 3.0])
    check_vjp(writes_its_argument_vector, [np.array([0.5, 2.0, 3.0])])


def test_read_only_inputs_are_accepted_even_when_the_function_writes_its_argument():
    x = np.array([1.0, 2.0, 3.0])
    x.setflags(write=False)
    np.testing.assert_array_equal(s2sad.grad(writes_its_argument)(x), [18.0, 4.0, 6.0])
    assert not x.flags.writeable and x.tolist() == [1.0, 2.0, 3.0]


def row_energy(x, w):
    y = x.copy()
    y[0] = y[0] * w
    return np.sum(np.sin(y) * x)


@pytest.mark.parametrize("layout", ["strided", "transposed", "read-only", "fortran"])
def test_non_contiguous_and_read_only_inputs_come_back_untouched(layout):
    base = np.linspace(-1.0, 1.0, 24).reshape(4, 6)
    x = {
        "strided": base[:, ::2],
        "transposed": base[:3, :4].T,
        "read-only": base[:, :3].copy(),
        "fortran": np.asfortranarray(base[:, :3]),
    }[layout]
    if layout == "read-only":
        x.setflags(write=False)
    before, flags = x.copy(), (x.flags.writeable, x.flags.c_contiguous, x.strides)
    w = 0.7
    g = check_grad(row_energy, [x, w], wrt=(0, 1))
    out, pullback = s2sad.vjp(row_energy)(x, w)
    pullback(1.0)
    s2sad.jvp(row_energy)(x, w, tangent=np.ones_like(x))
    s2sad.jacobian(row_energy)(x, w)
    assert (
        np.array_equal(x, before) and (x.flags.writeable, x.flags.c_contiguous, x.strides) == flags
    )
    assert np.array_equal(base, np.linspace(-1.0, 1.0, 24).reshape(4, 6))
    assert g[0].shape == x.shape and g[0].flags.writeable and not np.shares_memory(g[0], x)


def cubed(x):
    return x**3


@pytest.mark.parametrize("x", [np.float32(1.5), np.float64(1.5), 1.5, np.array(1.5, np.float32)])
def test_a_hessian_has_its_arguments_kind(x):
    """A NumPy scalar's Hessian is that scalar type (a float32 one was a 0-d array), a Python
    float's a float, a 0-d array's a 0-d array."""
    h = s2sad.hessian(cubed)(x)
    assert type(h) is (type(x) if not isinstance(x, np.ndarray) else np.ndarray)
    assert np.asarray(h).dtype == np.asarray(x).dtype and np.shape(h) == ()
    assert h == pytest.approx(9.0)

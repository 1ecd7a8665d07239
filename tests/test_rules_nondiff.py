"""Values with no derivative flowing through differentiated code: shapes and sizes, len,
comparisons, integer arguments, constant arrays (np.arange, np.ones, np.zeros, np.eye), argmax and
friends. They must be computed as usual and treated as constants by the adjoint."""

import numpy as np
import pytest

import s2sad
from conftest import check_grad, check_vjp, rand


def r(*shape, seed=0, low=-1.0, high=1.0):
    return rand(*shape, seed=seed, low=low, high=high)


def by_shape(x):
    return np.sum(x) * x.shape[0] + x.shape[1] * np.sum(x**2)


def by_size(x):
    return np.sum(x**2) / x.size


def by_ndim(x):
    return np.sum(x) * x.ndim


def by_len(x):
    return np.sum(x * len(x))


def by_shape_in_call(x):
    n = x.shape[0]
    return np.sum(np.reshape(x, (n, -1)) ** 2) / n


def by_shape_tuple(x):
    rows, cols = x.shape
    return np.sum(x[rows - 1] * cols)


def by_dtype(x):
    return np.sum(x * np.ones(x.shape, dtype=x.dtype))


def by_comparison_mask(x):
    return np.sum((x > 0) * x)


def by_comparison_where(x):
    return np.sum(np.where(x > 0.0, x**2, -x))


def by_comparison_float(x):
    pos = x > 0
    return np.sum(x * pos) + np.sum(pos)


def by_comparison_chain(x):
    inside = (x > -0.5) & (x < 0.5)
    return np.sum(np.where(inside, x, 0.0))


def by_arange(x):
    return np.sum(np.arange(x.shape[-1]) * x)


def by_arange_const(x):
    return np.sum(np.arange(4.0) * x)


def by_ones(x):
    return np.sum(np.ones(3) @ x)


def by_zeros(x):
    return np.sum(x + np.zeros((3, 4)))


def by_eye(x):
    return np.sum((np.eye(3) @ x) * x)


def by_eye_shape(x):
    return np.trace(np.eye(x.shape[0]) * x)


def by_ones_like(x):
    return np.sum(np.ones_like(x) * x**2)


def by_zeros_like(x):
    return np.sum(np.zeros_like(x) + x)


def by_full(x):
    return np.sum(np.full((3, 4), 2.5) * x)


def by_linspace(x):
    return np.sum(np.linspace(0.0, 1.0, 4) * x)


def by_argmax(x):
    return x[np.argmax(x)] + x[np.argmin(x)]


def by_floor_of_value(x):
    k = np.floor(np.sum(x))
    return np.sum(x * k)


def by_int_cast(x):
    n = int(x.shape[0] / 2)
    return np.sum(x[:n])


def by_any_all(x):
    return np.sum(x * np.all(x < 10.0) + x * np.any(x > 10.0))


def by_sign_abs(x):
    return np.sum(np.abs(x) * np.sign(x))


def by_isfinite(x):
    return np.sum(np.where(np.isfinite(x), x, 0.0))


def by_constant_global(x):
    return np.sum(WEIGHTS * x)


WEIGHTS = np.array([[1.0, -2.0, 3.0, 0.5]] * 3)


CASES = [
    (by_shape, (3, 4)),
    (by_size, (3, 4)),
    (by_ndim, (3, 4)),
    (by_len, (3, 4)),
    (by_shape_in_call, (3, 4)),
    (by_shape_tuple, (3, 4)),
    (by_comparison_mask, (3, 4)),
    (by_comparison_where, (3, 4)),
    (by_comparison_float, (3, 4)),
    (by_comparison_chain, (3, 4)),
    (by_arange, (3, 4)),
    (by_arange_const, (3, 4)),
    (by_ones, (3, 4)),
    (by_zeros, (3, 4)),
    (by_eye, (3, 4)),
    (by_eye_shape, (3, 3)),
    (by_ones_like, (3, 4)),
    (by_zeros_like, (3, 4)),
    (by_full, (3, 4)),
    (by_linspace, (3, 4)),
    (by_argmax, (6,)),
    (by_floor_of_value, (3, 4)),
    (by_int_cast, (6,)),
    (by_any_all, (3, 4)),
    (by_sign_abs, (3, 4)),
    (by_isfinite, (3, 4)),
    (by_constant_global, (3, 4)),
]


def _input(f, shape):
    x = r(*shape, seed=1)
    # keep values away from the kinks of comparisons and from an integer sum for floor
    x = np.where(np.abs(x) < 0.05, x + 0.1, x)
    x = np.where(np.abs(np.abs(x) - 0.5) < 0.05, x * 0.8, x)
    if f is by_arange_const:
        x = r(4, seed=1)
    if f is by_floor_of_value:
        x = x + (0.5 - (np.sum(x) % 1.0)) / x.size  # the sum is k + 0.5
    return x


@pytest.mark.parametrize("f,shape", CASES, ids=[f.__name__ for f, _ in CASES])
def test_nondifferentiable_values_are_constants(f, shape):
    check_grad(f, (_input(f, shape),))


def test_static_dtype_attribute():
    check_grad(by_dtype, (r(3, 2),))


# ----------------------------------------------------------------------------- int arguments


def int_power(x, n):
    return np.sum(x**n)


def int_scale(x, n):
    return np.sum(x * n) / n**2


def int_reshape(x, n):
    return np.sum(x.reshape(n, -1) ** 2)


def int_axis(x, n):
    return np.sum(np.sum(x, axis=n) ** 2)


def int_range_mask(x, n):
    return np.sum(x * (np.arange(3) < n))


def int_float_mix(x, n, scale):
    return np.sum(x**n) * scale


def int_repeat(x, n):
    return np.sum(np.ones(n) * np.sum(x))


@pytest.mark.parametrize(
    "f,n",
    [
        (int_power, 2),
        (int_power, 3),
        (int_scale, 4),
        (int_reshape, 2),
        (int_axis, 0),
        (int_axis, 1),
        (int_axis, -1),
        (int_range_mask, 2),
        (int_repeat, 3),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_integer_argument(f, n):
    check_grad(f, (r(4, 3, seed=2, low=0.5, high=1.5), n))


def test_integer_argument_with_float_argument():
    g = check_grad(int_float_mix, (r(4, seed=3, low=0.5, high=1.5), 3, 0.7), wrt=("x", "scale"))
    assert type(g[1]) is float


def test_integer_argument_cannot_be_differentiated():
    with pytest.raises(s2sad.NonDifferentiableInputError):
        s2sad.grad(int_power, wrt=1)(r(3), 2)


def test_int_numpy_argument():
    check_grad(int_power, (r(3, seed=4, low=0.5, high=1.5), np.int64(3)))


# ----------------------------------------------------------------------------- gradient is zero


def only_shape(x):
    return float(x.shape[0]) + 1.0


def only_comparison(x):
    return np.sum(x > 0) * 1.0


def only_argmax(x):
    return np.argmax(x) * 1.0


def only_sign(x):
    return np.sum(np.sign(x))


@pytest.mark.parametrize(
    "f", [only_shape, only_comparison, only_argmax, only_sign], ids=lambda f: f.__name__
)
def test_output_independent_of_input_has_zero_gradient(f):
    x = _input(f, (3, 4))
    g = s2sad.grad(f)(x)
    assert isinstance(g, np.ndarray) and g.shape == x.shape and g.dtype == x.dtype
    np.testing.assert_array_equal(g, np.zeros_like(x))


def test_vjp_through_shape_dependent_code():
    def f(x):
        n = len(x)
        m = x.shape[-1]
        return x.reshape(n * m) * np.arange(n * m)

    check_vjp(f, (r(3, 2),))

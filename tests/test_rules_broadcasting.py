"""Binary elementwise rules under NumPy broadcasting: the cotangent of each operand must be summed
back to exactly that operand's shape. Random shapes come from hypothesis; exact seed examples
pin down known numbers."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import s2sad
from conftest import assert_like_input, check_grad, check_vjp

# ----------------------------------------------------------------------------- the operations


def op_add(a, b):
    return a + b


def op_sub(a, b):
    return a - b


def op_mul(a, b):
    return a * b


def op_div(a, b):
    return a / b


def op_pow(a, b):
    return a**b


def op_maximum(a, b):
    return np.maximum(a, b)


def op_minimum(a, b):
    return np.minimum(a, b)


def op_arctan2(a, b):
    return np.arctan2(a, b)


def op_hypot(a, b):
    return np.hypot(a, b)


def op_where(a, b, mask):
    return np.where(mask, a, b)


def _values(rng, shape, kind):
    if kind == "any":
        return rng.uniform(-2.0, 2.0, size=shape)
    if kind == "positive":
        return rng.uniform(0.5, 2.0, size=shape)
    if kind == "exponent":
        return rng.uniform(-1.5, 1.5, size=shape)
    if kind == "nonzero":
        mag = rng.uniform(0.3, 2.0, size=shape)
        return np.where(rng.random(shape) < 0.5, -mag, mag)
    raise AssertionError(kind)


# name: (function, values of a, values of b, need the broadcast pairs to be untied)
OPS = {
    "add": (op_add, "any", "any", False),
    "sub": (op_sub, "any", "any", False),
    "mul": (op_mul, "any", "any", False),
    "div": (op_div, "any", "nonzero", False),
    "pow": (op_pow, "positive", "exponent", False),
    "maximum": (op_maximum, "any", "any", True),
    "minimum": (op_minimum, "any", "any", True),
    "arctan2": (op_arctan2, "nonzero", "nonzero", False),
    "hypot": (op_hypot, "nonzero", "nonzero", False),
}

SHAPES = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3)
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _as_operand(values, shape):
    return np.asarray(values, dtype=np.float64).reshape(shape)


def _draw_operands(rng, shapes, kind_a, kind_b, untied):
    a_shape, b_shape = shapes.input_shapes
    a = _as_operand(_values(rng, a_shape, kind_a), a_shape)
    for _ in range(100):
        b = _as_operand(_values(rng, b_shape, kind_b), b_shape)
        if not untied or np.min(np.abs(np.subtract(a, b)), initial=np.inf) > 0.05:
            return a, b
    raise AssertionError("could not draw untied operands")  # pragma: no cover


@pytest.mark.parametrize("name", list(OPS))
@SETTINGS
@given(shapes=SHAPES, seed=st.integers(0, 2**32 - 1))
def test_broadcast_binary_vjp(name, shapes, seed):
    f, kind_a, kind_b, untied = OPS[name]
    a, b = _draw_operands(np.random.default_rng(seed), shapes, kind_a, kind_b, untied)
    assert np.shape(f(a, b)) == shapes.result_shape
    cots = check_vjp(f, (a, b), wrt=(0, 1), seed=seed)
    assert cots[0].shape == a.shape and cots[1].shape == b.shape


def sum_add(a, b):
    return np.sum(a + b)


def sum_sub(a, b):
    return np.sum(a - b)


def sum_mul(a, b):
    return np.sum(a * b)


def sum_div(a, b):
    return np.sum(a / b)


def sum_pow(a, b):
    return np.sum(a**b)


def sum_maximum(a, b):
    return np.sum(np.maximum(a, b))


def sum_minimum(a, b):
    return np.sum(np.minimum(a, b))


def sum_arctan2(a, b):
    return np.sum(np.arctan2(a, b))


def sum_hypot(a, b):
    return np.sum(np.hypot(a, b))


SUMMED = {
    "add": sum_add,
    "sub": sum_sub,
    "mul": sum_mul,
    "div": sum_div,
    "pow": sum_pow,
    "maximum": sum_maximum,
    "minimum": sum_minimum,
    "arctan2": sum_arctan2,
    "hypot": sum_hypot,
}


@pytest.mark.parametrize("name", list(OPS))
@SETTINGS
@given(shapes=SHAPES, seed=st.integers(0, 2**32 - 1))
def test_broadcast_binary_grad_of_sum(name, shapes, seed):
    f, kind_a, kind_b, untied = OPS[name]
    a, b = _draw_operands(np.random.default_rng(seed), shapes, kind_a, kind_b, untied)
    check_grad(SUMMED[name], (a, b), wrt=(0, 1))


@SETTINGS
@given(shapes=SHAPES, seed=st.integers(0, 2**32 - 1))
def test_broadcast_where_fixed_mask(shapes, seed):
    rng = np.random.default_rng(seed)
    a, b = _draw_operands(rng, shapes, "any", "any", False)
    mask = rng.random(shapes.result_shape) < 0.5
    cots = check_vjp(op_where, (a, b, mask), wrt=(0, 1), seed=seed)
    assert cots[0].shape == a.shape and cots[1].shape == b.shape


@SETTINGS
@given(
    shapes=mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=4, max_side=3),
    seed=st.integers(0, 2**32 - 1),
)
def test_broadcast_where_broadcast_mask(shapes, seed):
    rng = np.random.default_rng(seed)
    a_shape, b_shape, m_shape = shapes.input_shapes
    a = _as_operand(rng.uniform(-1, 1, a_shape), a_shape)
    b = _as_operand(rng.uniform(-1, 1, b_shape), b_shape)
    mask = np.asarray(rng.random(m_shape) < 0.5).reshape(m_shape)
    check_vjp(op_where, (a, b, mask), wrt=(0, 1), seed=seed)


@pytest.mark.parametrize("name", list(OPS))
@SETTINGS
@given(
    shape=st.sampled_from([(), (1,), (3,), (2, 3), (1, 3, 1), (2, 1, 3, 2)]),
    scalar_first=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_broadcast_python_float_operand(name, shape, scalar_first, seed):
    f, kind_a, kind_b, untied = OPS[name]
    rng = np.random.default_rng(seed)
    for _ in range(100):
        a = _as_operand(_values(rng, shape, kind_a), shape)
        b = _as_operand(_values(rng, shape, kind_b), shape)
        if scalar_first:
            a = float(a.reshape(-1)[0])
        else:
            b = float(b.reshape(-1)[0])
        if not untied or np.min(np.abs(np.subtract(a, b))) > 0.05:
            break
    cots = check_vjp(f, (a, b), wrt=(0, 1), seed=seed)
    scalar = cots[0] if scalar_first else cots[1]
    assert type(scalar) is float


# ----------------------------------------------------------------------------- three operands


def fma(a, b, c):
    return a * b + c


@SETTINGS
@given(
    shapes=mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=4, max_side=3),
    seed=st.integers(0, 2**32 - 1),
)
def test_broadcast_three_operands(shapes, seed):
    rng = np.random.default_rng(seed)
    args = tuple(_as_operand(rng.uniform(-1, 1, s), s) for s in shapes.input_shapes)
    check_vjp(fma, args, wrt=(0, 1, 2), seed=seed)


# ----------------------------------------------------------------------------- seed-003 examples


def sum_of_product(a, b):
    return np.sum(a * b)


def sum_of_quotient(a, b):
    return np.sum(a / b)


def test_seed003_length_one_against_length_four():
    a = np.array([1.0])
    b = np.array([1.0, 2.0, 3.0, 4.0])
    g = s2sad.grad(sum_of_product)(a, b)
    assert isinstance(g, np.ndarray) and g.shape == (1,) and g.dtype == np.float64
    np.testing.assert_array_equal(g, [10.0])
    check_grad(sum_of_product, (a, b), wrt=(0, 1))


def test_seed003_column_against_matrix():
    a = np.array([[1.0], [2.0]])
    b = np.array([[1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.0, 5.0]])
    g = s2sad.grad(sum_of_product)(a, b)
    assert g.shape == (2, 1)
    np.testing.assert_array_equal(g, [[10.0], [14.0]])
    gb = s2sad.grad(sum_of_product, wrt=1)(a, b)
    np.testing.assert_array_equal(gb, np.broadcast_to(a, b.shape))
    check_grad(sum_of_product, (a, b), wrt=(0, 1))


def test_seed003_leading_and_inner_broadcast():
    a = np.array([[[[2.0, 4.0, 6.0, 8.0]]]])
    b = np.array([[[2.0, 4.0, 6.0, 8.0], [3.0, 5.0, 7.0, 9.0]]])
    assert a.shape == (1, 1, 1, 4) and b.shape == (1, 2, 4)
    g = s2sad.grad(sum_of_product)(a, b)
    assert g.shape == (1, 1, 1, 4)
    np.testing.assert_array_equal(g, [[[[5.0, 9.0, 13.0, 17.0]]]])
    gb = s2sad.grad(sum_of_product, wrt=1)(a, b)
    assert gb.shape == (1, 2, 4)
    np.testing.assert_array_equal(gb, [[[2.0, 4.0, 6.0, 8.0], [2.0, 4.0, 6.0, 8.0]]])
    check_grad(sum_of_product, (a, b), wrt=(0, 1))


def test_seed003_python_float_times_array():
    b = np.array([[1.0, 2.0], [3.0, 4.5]])
    g = s2sad.grad(sum_of_product)(2.0, b)
    assert type(g) is float
    assert g == pytest.approx(10.5)
    gb = s2sad.grad(sum_of_product, wrt=1)(2.0, b)
    assert_like_input(gb, b)
    np.testing.assert_array_equal(gb, np.full((2, 2), 2.0))
    check_grad(sum_of_product, (2.0, b), wrt=(0, 1))


def test_seed003_python_float_times_array_on_the_right():
    a = np.array([1.0, -2.0, 3.5])
    g = s2sad.grad(sum_of_product, wrt=1)(a, 3.0)
    assert type(g) is float and g == pytest.approx(2.5)


def test_seed003_division_both_operands():
    a = np.array([[1.0], [2.0]])
    b = np.array([[1.0, 2.0, 4.0], [0.5, 1.0, 2.0]])
    ga, gb = s2sad.grad(sum_of_quotient, wrt=(0, 1))(a, b)
    assert ga.shape == (2, 1) and gb.shape == (2, 3)
    np.testing.assert_allclose(ga, np.sum(1.0 / b, axis=1, keepdims=True))
    np.testing.assert_allclose(gb, -a / b**2)
    check_grad(sum_of_quotient, (a, b), wrt=(0, 1))


def test_seed003_division_by_broadcast_row():
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = np.array([2.0, 4.0, 8.0])
    ga, gb = s2sad.grad(sum_of_quotient, wrt=(0, 1))(a, b)
    np.testing.assert_allclose(ga, np.broadcast_to(1.0 / b, a.shape))
    np.testing.assert_allclose(gb, -np.sum(a, axis=0) / b**2)
    check_grad(sum_of_quotient, (a, b), wrt=(0, 1))


def test_seed003_python_float_divided_by_array():
    b = np.array([1.0, 2.0, 4.0])
    g = s2sad.grad(sum_of_quotient)(3.0, b)
    assert type(g) is float and g == pytest.approx(1.75)
    check_grad(sum_of_quotient, (3.0, b), wrt=(0, 1))

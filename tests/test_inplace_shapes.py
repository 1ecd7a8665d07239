"""`x op= v` keeps the array x's shape, as NumPy's in-place ufuncs do: s2sad rewrites it as
`x_1 = in_place(x op v, x, "add")`, which checks the shape (and keeps the dtype:
test_inplace_dtypes.py), so that it raises NumPy's ValueError where broadcasting would widen x,
rather than differentiate a program NumPy rejects."""

import operator

import numpy as np
import pytest

import s2sad
from conftest import check_grad


def add(x, v):
    x = x.copy()
    x += v
    return np.sum(x * x)


def sub(x, v):
    x = x.copy()
    x -= v
    return np.sum(x * x)


def mul(x, v):
    x = x.copy()
    x *= v
    return np.sum(x * x)


def div(x, v):
    x = x.copy()
    x /= v
    return np.sum(x * x)


def into_slice(x, v):
    x = x.copy()
    x[2:] += v
    return np.sum(x * x)


def number_target(x, v):
    s = 0.5 * x
    s += np.sum(v)
    s *= v
    return np.sum(s * s)


def constant_step(x):
    x = x.copy()
    x *= 0.5
    x += 1
    return np.sum(x * x)


_INPLACE = {add: operator.iadd, sub: operator.isub, mul: operator.imul, div: operator.itruediv}


def _numpy_error(op, x, v) -> str:
    with pytest.raises(ValueError) as numpy:
        op(x.copy(), v)
    return str(numpy.value)


@pytest.mark.parametrize("f", list(_INPLACE))
@pytest.mark.parametrize("shapes", [((1,), (3,)), ((3, 1), (3,)), ((), (2,))])
def test_widening_update_raises_numpys_error(f, shapes):
    x, v = np.ones(shapes[0]), np.arange(1.0, 1.0 + shapes[1][0])
    message = _numpy_error(_INPLACE[f], x, v)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        s2sad.grad(f, wrt=(0, 1))(x, v)


@pytest.mark.parametrize("f", list(_INPLACE))
def test_shape_keeping_update_is_differentiated(f):
    check_grad(f, (np.array([1.5, -0.5, 2.0]), np.array([0.5])), wrt=(0, 1))
    check_grad(f, (np.array([[1.5], [2.5]]), np.array([[0.5], [-1.5]])), wrt=(0, 1))


def test_number_target_takes_the_broadcast_shape():
    # (a float has no in-place form: Python binds s to s * v, as s2sad does)
    check_grad(number_target, (1.5, np.array([0.5, -1.0, 2.0])), wrt=(0, 1))


def test_slice_target_wider_than_the_slice_raises():
    # (NumPy's in-place ufunc says "non-broadcastable output operand", the store s2sad makes of
    # it "could not broadcast": a ValueError about broadcasting either way; jitted, Numba's
    # store raises its own and the call falls back to Python, README "In-place updates")
    x, v = np.ones(3), np.arange(3.0)
    with pytest.raises(ValueError, match="broadcast"):
        s2sad.grad(into_slice, wrt=(0, 1))(x, v)


def summed(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += np.sin(x[i])
    return s


def test_a_constant_step_or_a_number_adds_no_check():
    assert "in_place" not in s2sad.source(s2sad.grad(constant_step))
    assert "in_place" not in s2sad.source(s2sad.grad(summed), np.ones(3))
    check_grad(summed, (np.array([0.5, -1.0]),))
    assert '= in_place(x_add, x_1, "add")' in s2sad.source(s2sad.grad(add, wrt=(0, 1)))


def drifts(x0, v):  # `x += ...` keeps x's shape (else it raises), v another parameter's
    x = x0.copy()
    for _ in range(3):
        x += 0.1 * np.tanh(v)
    return np.sum(x)


def test_jitted_widening_update_raises_and_shape_keeping_one_agrees():
    jitted = s2sad.grad(drifts, wrt=(0, 1), jit="strict")
    x, v = np.array([1.5, -0.5, 2.0]), np.array([0.5, 0.25, -1.0])
    for got, want in zip(jitted(x, v), s2sad.grad(drifts, wrt=(0, 1))(x, v)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    # the check keeps x's shape: its cotangent is dx_new itself, and no tape of x is made (the
    # shape proof, pipeline/fixed_shapes.py, made one of x0's shape)
    assert "x_tape" not in s2sad.source(jitted)
    with pytest.raises(ValueError, match="non-broadcastable output operand"):
        jitted(np.ones(1), np.arange(3.0))
    # a float32 state stays float32, as NumPy's `x += ...` keeps it: the loop compiles (strict)
    x32 = x.astype(np.float32)
    got, want = jitted(x32, v), s2sad.grad(drifts, wrt=(0, 1))(x32, v)
    assert got[0].dtype == want[0].dtype == np.float32 and got[1].dtype == np.float64
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    value = s2sad.value_and_grad(drifts, wrt=(0, 1))(x32, v)[0]
    assert value == drifts(x32, v) and type(value) is np.float32

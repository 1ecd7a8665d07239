"""`x op= v` stores into x, which keeps its dtype, as NumPy's in-place ufuncs do (casting rule
'same_kind'): a float32 x updated with float64 values computes in float64 and rounds to
float32, an int8 one wraps, and a uint8 one updated with int16 values raises UFuncTypeError.
s2sad rewrites the update as `x_1 = in_place(x op v, x, "add")` (`in_place_kind` for
`x[i] op= v`), whose derivative is the identity, as astype's is."""

import re

import numpy as np
import pytest

import s2sad

X = np.array([0.1, 0.2, 0.3, 0.4])


def into_float32(x):
    y = np.zeros(4, np.float32)
    y += x
    return np.sum(y * y)


def slice_into_float32(x):
    y = np.zeros(4, np.float32)
    y[1:] += x[1:] * 3.0
    return np.sum(y * y)


def steps(y0, v):  # a loop carrying a float32 state that float64 values update
    y = y0.copy()
    for _ in range(5):
        y += 0.1 * v * y
    return np.sum(y * y)


def wraps(x, u, k):
    y = u.copy()
    y += k
    return np.sum(y * x)


def slice_wraps(x, u, k):
    y = u.copy()
    y[:2] -= k[:2]
    return np.sum(y * x)


def test_float32_target_stays_float32_and_its_gradient_reads_the_rounded_value():
    g = s2sad.value_and_grad(into_float32)
    value, grad = g(X)
    assert value == into_float32(X) and type(value) is np.float32
    np.testing.assert_array_equal(grad, 2 * X.astype(np.float32).astype(np.float64))
    assert grad.dtype == np.float64
    value, grad = s2sad.value_and_grad(slice_into_float32)(X)
    assert value == slice_into_float32(X) and type(value) is np.float32
    want = 6 * (3.0 * X).astype(np.float32).astype(np.float64) * (np.arange(4) > 0)
    np.testing.assert_allclose(grad, want, rtol=1e-6)  # (the cotangent of y is float32)


def test_float32_loop_state_stays_float32():
    # (jitted: test_inplace_shapes.py's drifts, whose compiled code it reuses)
    y0, v = np.linspace(0.1, 1, 6).astype(np.float32), np.linspace(-1, 1, 6)
    value, (dy0, dv) = s2sad.value_and_grad(steps, wrt=(0, 1))(y0, v)
    assert value == steps(y0, v) and type(value) is np.float32
    assert dy0.dtype == np.float32 and dv.dtype == np.float64
    # the float64 function's gradient, within float32's rounding
    want = s2sad.grad(steps, wrt=(0, 1))(y0.astype(np.float64), v)
    for got, b in zip((dy0, dv), want):
        np.testing.assert_allclose(got, b, rtol=1e-5)


def test_integer_target_wraps_in_its_dtype():
    x = np.array([1.0, 2.0, 3.0])
    u, k = np.array([120, 3, 7], np.int8), np.array([10, 5, 1], np.int64)
    for f in (wraps, slice_wraps):
        value, grad = s2sad.value_and_grad(f)(x, u, k)
        assert value == f(x, u, k)
        y = u.copy()
        y[: 3 if f is wraps else 2] += k[: 3 if f is wraps else 2] * (1 if f is wraps else -1)
        np.testing.assert_array_equal(grad, y.astype(np.float64))


@pytest.mark.parametrize("f", [wraps, slice_wraps])
def test_integer_target_of_another_kind_raises_numpys_error(f):
    x = np.array([1.0, 2.0, 3.0])
    u, k = np.array([250, 3, 7], np.uint8), np.array([10, -5, 1], np.int16)
    with pytest.raises(TypeError) as numpy:
        f(x, u, k)
    with pytest.raises(type(numpy.value), match=re.escape(str(numpy.value))):
        s2sad.grad(f)(x, u, k)

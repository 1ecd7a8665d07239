"""NumPy mode's constant cotangents (s2sad/pipeline/constant_cotangents.py): the cotangent of a
full sum or mean is one number over an array's shape, and arithmetic with numbers on it is done
on that number (`expand_reduced(constant_value(g) * 0.25, g)`), not by sweeping an array. The
numbers must be bit for bit those of the code without the pass (the user's transform against
`Transformed`, which makes code without reuse), and finite differences' too."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from s2sad.rules.buffers import constant_value
from s2sad.transformed import Transformed
from test_jit_fuse import fd_grad


def stencil(u, k):
    c = u[:-1, :-1]
    dv = u[1:, :-1] - c
    dh = u[:-1, 1:] - c
    return np.sum(0.5 * k * (dv * dv + dh * dh) + 0.25 * (c * c - 1.0) ** 2)


def mean_and_sum(x, y):
    """A mean's and a sum's cotangents; `x`'s gradient is written into in place after the
    sum's part (so that one stays an array of its own)."""
    return np.mean((x * y - 1.5) ** 2) + 3.0 * np.sum(x / 2.0)


def broadcast_sum(x, b):
    """The sum's cotangent unbroadcast to `b`'s shape (a sum of it: another number) before
    arithmetic on it."""
    t = x + b
    return np.sum(t * t) * 0.5 - np.sum(-(b * 3.0))


def returned_view(x):
    return np.sum(x * 0.5) / 4.0


def negated(x, k):
    return -np.sum(np.sin(x) * k) - np.mean(x / k)


def python_float_seed(x, k):
    s = math.sqrt(np.sum(x * x) + 1.0)  # a Python float output: its seed is a Python float
    return s * 2.0 + float(np.sum(x * k))


def _pair(f, wrt):
    """The user's transform (with the pass) and the same without it."""
    return s2sad.grad(f, wrt=wrt), Transformed(f, wrt, "grad")


def _check(f, args, wrt):
    folded, plain = _pair(f, wrt)
    got, want = folded(*args), plain(*args)
    got, want = (got, want) if isinstance(wrt, tuple) else ((got,), (want,))
    names = list(f.__code__.co_varnames[: f.__code__.co_argcount])
    for g, w, name in zip(got, want, wrt if isinstance(wrt, tuple) else (wrt,)):
        x = args[names.index(name)]
        assert g.shape == np.shape(x) and g.dtype == np.asarray(x).dtype
        np.testing.assert_array_equal(g, w)
        assert g.flags.writeable  # the caller's to write into
    return got


CASES = [
    (stencil, lambda r: (r.normal(size=(7, 6)), 0.3), ("u",)),
    (mean_and_sum, lambda r: (r.normal(size=(5, 4)), r.normal(size=4)), ("x", "y")),
    (broadcast_sum, lambda r: (r.normal(size=(5, 4)), r.normal(size=4)), ("x", "b")),
    (returned_view, lambda r: (r.normal(size=(3, 4)),), ("x",)),
    (negated, lambda r: (r.normal(size=6), 1.7), ("x",)),
    (python_float_seed, lambda r: (r.normal(size=5), np.float32(0.7)), ("x",)),
]


@pytest.mark.parametrize("f, make, wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_same_numbers_as_without_the_pass_and_finite_differences(f, make, wrt):
    args = make(np.random.default_rng(0))
    got = _check(f, args, wrt)
    names = list(f.__code__.co_varnames[: f.__code__.co_argcount])
    for g, name in zip(got, wrt):
        expected = fd_grad(f, list(args), names.index(name))
        np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-7)


def test_float32_stays_float32_bit_for_bit():
    rng = np.random.default_rng(2)
    u = rng.normal(size=(9, 8)).astype(np.float32)
    _check(stencil, (u, 0.3), ("u",))
    _check(stencil, (u, np.float32(0.3)), ("u",))
    _check(stencil, (u, np.float64(0.3)), ("u",))  # a float64 number widens, as NumPy does


def test_stencil_folds_its_numbers_and_reads_well():
    """The stencil's adjoint: `dstencil_pow` (its number times 0.25) is folded into its one
    reader, the square's `2 * (g * dh)` takes its 2 into the number, and no array is swept to
    scale a constant."""
    u = np.random.default_rng(1).normal(size=(6, 6))
    text = s2sad.source(s2sad.grad(stencil, wrt="u"), u, 0.3)
    adjoint = text.split("# adjoint sweep")[1]
    assert (
        "dstencil_sub_const = expand_reduced(constant_value(dstencil_mul5) * 0.25 * 2, "
        "dstencil_mul5)" in adjoint
    )
    assert "dstencil_add = expand_reduced(constant_value(dstencil_mul3) * (0.5 * k), " in adjoint
    assert "ddh_const = expand_reduced(2 * constant_value(dstencil_mul2), dstencil_mul2)" in adjoint
    assert "dstencil_pow" not in adjoint  # folded into its reader, not made
    assert "np.multiply(2, ddh" not in adjoint and "np.multiply(dstencil_mul5" not in adjoint
    compile(text, "<folded>", "exec")


def test_an_array_written_into_keeps_being_made():
    """`dx` is added into in place after the sum's part: that part stays a fresh array."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(5, 4)), rng.normal(size=4)
    text = s2sad.source(s2sad.grad(mean_and_sum, wrt=("x", "y")), x, y)
    assert "dx = expand_reduced" not in text
    assert "dx +=" in text


def test_jit_and_second_order_code_have_no_folds():
    u = np.random.default_rng(4).normal(size=(5, 5))
    assert "constant_value" not in s2sad.source(s2sad.grad(stencil, wrt="u", jit=True), u, 0.3)
    h = s2sad.hessian(returned_view)(u)
    np.testing.assert_allclose(h, 0.0)


def test_empty_arrays():
    x = np.zeros((0, 3))
    g = _check(returned_view, (x,), ("x",))
    assert g[0].shape == (0, 3)
    assert constant_value(np.zeros((0, 2), np.float32)).dtype == np.float32
    assert constant_value(np.broadcast_to(np.float32(2.5), (3, 2))) == np.float32(2.5)


def _broadcastable(a, b, seed):
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + a
    b = [1] * (rank - len(b)) + b
    b = [y if x == 1 or y == 1 or x == y else 1 for x, y in zip(a, b)]
    rng = np.random.default_rng(seed)
    return rng.normal(size=a), rng.normal(size=b)


def scaled_pair(x, y):
    s = x * y
    return np.sum(s * 2.0 - x) * 0.5 + np.mean((s + y) * 3.0) - np.sum(y / 4.0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([1, 2, 3]), min_size=0, max_size=3),
    st.lists(st.sampled_from([1, 2, 3]), min_size=0, max_size=3),
    st.integers(0, 2**31 - 1),
)
def test_random_broadcast_shapes(a, b, seed):
    """Operands of random broadcastable shapes: a constant cotangent unbroadcast to a smaller
    shape (its sum) and scaled keeps the numbers and the shapes."""
    x, y = _broadcastable(a, b, seed)
    _check(scaled_pair, (x, y), ("x", "y"))

"""NumPy-mode buffer reuse of nested operations (s2sad/pipeline/reuse.py `_split`): in
`c = 2 * (a * b)` the nested product writes into the dying temporary's array too and the outer
one into that result (`c = np.multiply(a, b, out=spare(t, a, b))`, `c = np.multiply(2, c,
out=spare(c, c))`), where it would have made a fresh array. Never where the buffer is read
outside the nested operation (it would be overwritten before the outer one reads it); the
numbers must be those of the code without reuse, whatever the shapes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_jit_fuse import fd_grad
from test_reuse import _pair, _reused, broadcastable, stencil

import s2sad
from s2sad.rules import buffers


@pytest.fixture(autouse=True)
def small_buffers(monkeypatch):
    """Every array takes a buffer, however small (the tests' arrays are)."""
    monkeypatch.setattr(buffers, "SPARE_SIZE", 1)


def test_a_nested_operation_writes_into_the_buffer_then_the_outer_into_it():
    ranks = dict.fromkeys("tuwxyz", 1)
    text = _reused("t = x * y\nw = 2.0 * (t * x)\nz = np.sum(w)", ranks, keep="xyz")
    assert (
        "w = np.multiply(t, x, out=spare(t, t, x))\nw = np.multiply(2.0, w, out=spare(w, w))"
        in (text)
    )


def test_a_buffer_read_outside_the_nested_operation_is_not_written_early():
    ranks = dict.fromkeys("tuwxyz", 1)
    text = _reused("t = x * y\nw = t + x * y\nz = np.sum(w)", ranks, keep="xyz")
    assert "w = np.add(t, x * y, out=spare(t, t, x, y))" in text  # one statement, as before
    text = _reused("t = x * y\nw = (t * x) * t\nz = np.sum(w)", ranks, keep="xyz")
    assert text.count("w = ") == 1


def test_numbers_and_lower_ranks_are_not_split_off():
    ranks = dict(t=2, w=2, x=2, y=2, z=0, b=1, k=0)
    for value in ("t * (2.0 * k)", "t * (b * 2.0)", "t * np.exp(k)"):
        text = _reused(f"t = x * y\nw = {value}\nz = np.sum(w)", ranks, keep="xyzbk")
        assert text.count("w = ") == 1, text


def test_the_stencils_adjoint_makes_no_fresh_array_for_its_products():
    u = np.random.default_rng(1).normal(size=(6, 6))
    g = s2sad.grad(stencil, wrt="u")
    text = s2sad.source(g, u, 0.3)
    assert "dc = np.multiply(dstencil_sub, c, out=spare(dstencil_sub, dstencil_sub, c))" in text
    assert "dc = np.multiply(2, dc, out=spare(dc, dc))" in text
    # (the square's `2 * (g * dh)` of a constant g: the 2 taken into g's number first,
    # pipeline/constant_cotangents.py)
    assert "ddh = np.multiply(ddh_const, dh, out=spare(dh, ddh_const, dh))" in text
    reused, fresh = _pair(stencil, "u")
    np.testing.assert_array_equal(reused(u, 0.3), fresh(u, 0.3))
    np.testing.assert_allclose(reused(u, 0.3), fd_grad(stencil, (u, 0.3), 0), rtol=1e-6)


def nested(x, y):
    s = x * y
    t = 2.0 * (s * x) - np.sin(s * y)
    return np.sum(t * t * x + 3.0 * (y * t))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([1, 2, 3]), min_size=0, max_size=3),
    st.lists(st.sampled_from([1, 2, 3]), min_size=0, max_size=3),
    st.integers(0, 2**31 - 1),
)
def test_random_broadcast_shapes_through_nested_operations(a, b, seed):
    """A nested result of a smaller shape than the outer one never goes into a buffer of the
    outer's shape (`spare` refuses), and the numbers are those of the code without reuse."""
    x, y = broadcastable(a, b, seed)
    reused, fresh = _pair(nested, ("x", "y"))
    got, want = reused(x, y), fresh(x, y)
    for g, w, v in zip(got, want, (x, y)):
        assert g.shape == v.shape and g.dtype == v.dtype
        np.testing.assert_array_equal(g, w)
    if x.size == y.size == 6:
        np.testing.assert_allclose(got[0], fd_grad(nested, (x, y), 0), rtol=1e-5, atol=1e-7)


def test_an_operation_nested_twice_goes_into_the_buffer_first():
    ranks = dict.fromkeys("tuwxyz", 1)
    text = _reused("t = x * y\nw = y * (1 - t**2)\nz = np.sum(w)", ranks, keep="xyz")
    assert (
        "w = np.square(t, out=spare(t, t))\nw = np.subtract(1, w, out=spare(w, w))\n"
        "w = np.multiply(y, w, out=spare(w, y, w))"
    ) in text


def tanh_layer(x, y):
    h = np.tanh(x * y)
    return np.sum(h * x + y)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.sampled_from([1, 2, 3]), min_size=0, max_size=3),
    st.lists(st.sampled_from([1, 2, 3]), min_size=0, max_size=3),
    st.integers(0, 2**31 - 1),
)
def test_the_tanh_adjoint_makes_no_fresh_array_and_keeps_the_numbers(a, b, seed):
    """`dh * (1 - h**2)`: the square, the difference and the product in one buffer (np.square
    is what NumPy's `h**2` computes: the numbers are those of the code without reuse, bit for
    bit), whatever the shapes."""
    x, y = broadcastable(a, b, seed)
    reused, fresh = _pair(tanh_layer, ("x", "y"))
    got, want = reused(x, y), fresh(x, y)
    text = s2sad.source(reused, x, y)
    if np.ndim(x) or np.ndim(y):
        assert "np.square(h, out=spare(" in text, text
    for g, w, v in zip(got, want, (x, y)):
        assert g.shape == v.shape and g.dtype == v.dtype
        np.testing.assert_array_equal(g, w)
    if x.size == y.size == 6:
        np.testing.assert_allclose(got[1], fd_grad(tanh_layer, (x, y), 1), rtol=1e-5, atol=1e-7)

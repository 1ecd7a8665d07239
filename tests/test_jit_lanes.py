"""Elementwise functions as arithmetic LLVM vectorises (s2sad/rules/lanes.py): fused loops
compute `np.tanh` by `tanh_lanes`, which must give NumPy's numbers to within a few units in the
last place, NaN, infinities, signed zeros and subnormals included, keep float32 in float32, and
compile to a loop of vector divisions (the reason it exists)."""

from __future__ import annotations

import numba
import numpy as np
import pytest

import s2sad
from s2sad.numba_helpers import tanh_lanes

from test_jit_fuse import assert_close, fd_grad, fused_ran, rng


@numba.njit(error_model="numpy")  # as jit.py compiles generated code
def tanh_loop(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = tanh_lanes(a[i])
    return out


def ulps(got, expected):
    return np.abs(got - expected) / np.spacing(np.abs(expected))


def test_tanh_lanes_is_numpys_tanh_within_three_units_in_the_last_place():
    # every scale from subnormal to past the clip at 20, and the range reduction's edges
    # (|2x| near multiples of ln 2 / 2)
    scales = [rng(i).uniform(-1, 1, 20000) * 10.0**k for i, k in enumerate(range(-320, 3, 7))]
    edges = (np.arange(1, 120) * np.log(2) / 4)[:, None] + np.array([-1e-12, 0.0, 1e-12])
    x = np.concatenate(scales + [edges.ravel(), -edges.ravel(), rng().uniform(19.9, 20.1, 999)])
    got = tanh_loop(x)
    assert got.dtype == np.float64
    assert ulps(got, np.tanh(x)).max() <= 3


def test_tanh_lanes_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, 1e308, -1e308])
    got = tanh_loop(x)
    np.testing.assert_array_equal(got, np.tanh(x))  # NaN in the same place
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.tanh(x)))


def test_tanh_lanes_keeps_float32():
    x = rng().normal(scale=4.0, size=5000).astype(np.float32)
    got = tanh_loop(x)
    assert got.dtype == np.float32
    assert ulps(got, np.tanh(x)).max() <= 1


def test_a_loop_of_tanh_lanes_is_vectorised(monkeypatch):
    from numba.core import config

    # the tests run at -O0 (conftest.py), which vectorises nothing
    monkeypatch.setattr(config, "OPT", 3)
    loop = numba.njit(error_model="numpy")(tanh_loop.py_func)
    loop(np.ones(3))
    llvm = loop.inspect_llvm(loop.signatures[0])
    assert "fdiv <" in llvm  # a division of a vector of numbers
    assert "@tanh" not in llvm  # no call into the C library's tanh


def layer(x, W, b):
    h = np.tanh(x @ W + b)
    return np.sum(h * h)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_tanh_is_tanh_lanes_and_gives_python_modes_numbers(dtype):
    x, W, b = rng().normal(size=(9, 5)), rng(1).normal(size=(5, 4)), rng(2).normal(size=4)
    x, W, b = (a.astype(dtype) for a in (x, W, b))
    jitted = s2sad.grad(layer, wrt=(1, 2), jit="strict")
    got = jitted(x, W, b)
    assert fused_ran(jitted)
    assert "tanh_lanes(" in s2sad.source(jitted, x, W, b)
    expected = s2sad.grad(layer, wrt=(1, 2))(x, W, b)
    assert all(g.dtype == dtype for g in got)
    assert_close(got, expected, rtol=1e-12 if dtype == np.float64 else 1e-5)
    if dtype == np.float64:
        assert_close(got[0], fd_grad(layer, (x, W, b), 1), rtol=1e-7)
        assert_close(got[1], fd_grad(layer, (x, W, b), 2), rtol=1e-7)

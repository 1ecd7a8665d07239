"""Elementwise functions as arithmetic LLVM vectorises (s2sad/rules/lanes.py): fused loops
compute `np.tanh`, `np.exp` and `np.log` by `tanh_lanes`, `exp_lanes` and `log_lanes`, which
must give NumPy's numbers to within a few units in the last place, NaN, infinities, signed zeros,
subnormals and the overflow and underflow thresholds included, keep float32 in float32, and
compile to loops of vector arithmetic with no call into the C library (the reason they exist)."""

from __future__ import annotations

import re

import numba
import numpy as np
import pytest

import s2sad
from s2sad.numba_helpers import exp_lanes, log_lanes, tanh_lanes

from test_jit_fuse import assert_close, fd_grad, fused_ran, rng


@numba.njit(error_model="numpy")  # as jit.py compiles generated code
def tanh_loop(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = tanh_lanes(a[i])
    return out


@numba.njit(error_model="numpy")
def exp_loop(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = exp_lanes(a[i])
    return out


@numba.njit(error_model="numpy")
def log_loop(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = log_lanes(a[i])
    return out


def ulps(got, expected):
    """Units in the last place of `expected` between the two (0 where both are the same
    infinity, or NaN)."""
    with np.errstate(invalid="ignore"):
        units = np.abs(got - expected) / np.spacing(np.abs(expected))
    same = (got == expected) | (np.isnan(got) & np.isnan(expected))
    return np.where(same, 0.0, units)


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


# every exponent of a float64 result, the edges of exp's reduction (x near multiples of ln(2)/2)
# and the thresholds: e^x overflows above 709.782712893384, is subnormal below -708.39641853226,
# and rounds to 0 below -745.13321910194
EXP_EDGES = [
    709.782712893384,
    np.nextafter(709.782712893384, np.inf),
    -708.3964185322641,
    np.nextafter(-708.3964185322641, -np.inf),
    -745.1332191019411,
    np.nextafter(-745.1332191019411, -np.inf),
    -745.0,
    -744.44007192138126,
    709.8,
    710.0,
    -746.0,
    -1e308,
    1e308,
    1e-300,
    -1e-300,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
]


def exp_arguments():
    edges = (np.arange(-2150, 2050) * np.log(2) / 2)[:, None] + np.array([-1e-9, 0.0, 1e-9])
    return np.concatenate(
        [
            rng().uniform(-746, 710, 200000),
            rng(1).uniform(-1, 1, 50000),
            rng(2).uniform(-746, -708, 20000),
            rng(3).normal(size=10000) * 10.0 ** rng(4).integers(-320, 3, 10000),
            edges.ravel(),
            EXP_EDGES,
        ]
    )


def test_exp_lanes_is_numpys_exp_within_one_unit_in_the_last_place():
    x = exp_arguments()
    got = exp_loop(x)
    assert got.dtype == np.float64
    with np.errstate(over="ignore"):
        assert ulps(got, np.exp(x)).max() <= 1


def test_exp_lanes_special_values_and_thresholds():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan] + EXP_EDGES)
    got = exp_loop(x)
    with np.errstate(over="ignore"):
        expected = np.exp(x)
    np.testing.assert_array_equal(got, expected)  # inf, 0 and NaN in the same places
    assert np.isposinf(got[[2, 7, 14, 15, 18]]).all() and (got[[3, 11, 16, 17]] == 0).all()
    assert np.isfinite(got[6]) and got[6] > 1.797e308  # just below the overflow
    assert got[10] == 5e-324  # the smallest subnormal


def log_arguments():
    exponents = rng(1).integers(-330, 308, 200000).astype(float)
    around_one = 1.0 + rng(2).uniform(-1e-6, 1e-6, 20000)
    # the reduction's edges: m near sqrt(2)/2 and sqrt(2), at many exponents
    edges = np.sqrt(2.0) * 2.0 ** np.arange(-1070, 1020)[:, None]
    edges = np.nextafter(edges, np.array([[-np.inf, np.inf]])).ravel()
    return np.concatenate(
        [
            rng().uniform(0.5, 2.0, 50000) * 10.0 ** exponents[:50000],
            rng(3).uniform(0, 1, 50000) * 10.0 ** exponents[50000:100000],  # subnormals too
            5e-324 * rng(4).integers(1, 2**52, 50000),  # subnormals only
            rng(5).uniform(0, 4, 50000),
            around_one,
            edges,
            [1.0, np.nextafter(1.0, 0), np.nextafter(1.0, 2), np.sqrt(2.0), np.sqrt(0.5)],
        ]
    )


def test_log_lanes_is_numpys_log_within_one_unit_in_the_last_place():
    x = log_arguments()  # zeros too, where 10^exponent underflows
    got = log_loop(x)
    assert got.dtype == np.float64
    with np.errstate(divide="ignore"):
        assert ulps(got, np.log(x)).max() <= 1


def test_log_lanes_special_values():
    tiny, huge = 2.2250738585072014e-308, 1.7976931348623157e308
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -5e-324, 5e-324, 1.0, tiny, huge])
    got = log_loop(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.log(x)
    np.testing.assert_array_equal(got, expected)  # -inf, inf and NaN in the same places
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]), [1, 1, 0, 1, 0, 1, 0])


@pytest.mark.parametrize(
    "loop, ufunc, arguments, numpys_bound",
    # NumPy's own float32 exp and log are within 2.52 and 3.83 units of the exact value (its
    # SIMD kernels' stated bounds), and the lanes round the exact value's float64 lane
    [(exp_loop, np.exp, exp_arguments, 3), (log_loop, np.log, log_arguments, 4)],
)
def test_exp_and_log_lanes_keep_float32_and_round_the_float64_value(
    loop, ufunc, arguments, numpys_bound
):
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        x = arguments().astype(np.float32)
        x = x[np.isfinite(x)]
        rounded = ufunc(x.astype(np.float64)).astype(np.float32)
        got = loop(x)
        assert got.dtype == np.float32
        assert ulps(got, rounded).max() <= 1
        assert ulps(got, ufunc(x)).max() <= numpys_bound
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 88.8, -110.0], "f4")
    with np.errstate(all="ignore"):  # infinities and NaN in the same places (ulps: 0)
        assert ulps(loop(special), ufunc(special)).max() <= numpys_bound


@pytest.mark.parametrize(
    "loop, libm_call",
    [(tanh_loop, "@tanh"), (exp_loop, "@llvm.exp"), (log_loop, "@llvm.log")],
)
def test_a_loop_of_lanes_is_vectorised(monkeypatch, loop, libm_call):
    from numba.core import config

    # the tests run at -O0 (conftest.py), which vectorises nothing
    monkeypatch.setattr(config, "OPT", 3)
    loop = numba.njit(error_model="numpy")(loop.py_func)
    loop(np.ones(3))
    llvm = loop.inspect_llvm(loop.signatures[0])
    assert re.search(r"fmul <\d+ x double>", llvm)  # arithmetic on vectors of numbers
    # no call into the C library (Numba's np.exp is llvm.exp, whose vector form is scalar calls)
    assert libm_call not in llvm


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


def softplus_layer(x, W, b):
    # a log of an exp, and a sigmoid, in one fused loop
    z = x @ W + b
    return np.sum(np.log(1.0 + np.exp(z)) + z / (1.0 + np.exp(-z)))


def logsumexp_rows(x, W):
    # GMM's reduction: a shifted exp summed along an axis, and the log of the sums
    z = x @ W
    shift = s2sad.stop_gradient(np.max(z, axis=1, keepdims=True))
    return np.sum(np.log(np.sum(np.exp(z - shift), axis=1)) + shift[:, 0])


@pytest.mark.parametrize(
    "f, wrt, lanes, dtype",
    [
        (softplus_layer, (1, 2), ("exp_lanes(", "log_lanes("), np.float64),
        (softplus_layer, (1, 2), ("exp_lanes(", "log_lanes("), np.float32),
        (logsumexp_rows, (1,), ("exp_lanes(",), np.float64),
    ],
)
def test_fused_exp_and_log_are_lanes_and_give_python_modes_numbers(f, wrt, lanes, dtype):
    x, W, b = rng().normal(size=(9, 5)), rng(1).normal(size=(5, 4)), rng(2).normal(size=4)
    args = tuple(a.astype(dtype) for a in (x, W, b))[: 2 if f is logsumexp_rows else 3]
    # (value_and_grad: a jitted grad computes no value, the log of softplus's only in it)
    jitted = s2sad.value_and_grad(f, wrt=wrt, jit="strict")
    value, got = jitted(*args)
    got = got if isinstance(got, tuple) else (got,)
    assert fused_ran(jitted)
    assert value == pytest.approx(f(*args), rel=1e-12 if dtype == np.float64 else 1e-5)
    source = s2sad.source(jitted, *args)
    assert all(lane in source for lane in lanes)
    expected = s2sad.grad(f, wrt=wrt)(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert [g.dtype for g in got] == [args[i].dtype for i in wrt]
    assert [g.shape for g in got] == [args[i].shape for i in wrt]
    assert_close(got, expected, rtol=1e-12 if dtype == np.float64 else 1e-5)
    if dtype == np.float64:
        for g, i in zip(got, wrt):
            assert_close(g, fd_grad(f, args, i), rtol=1e-7)

"""Reductions in the jitted adjoint without passes or arrays of their own: a full sum inside
arithmetic on numbers (`da = da - np.sum(g)`) taken apart so the run computing `g` adds it up
(fusion/sums.py); a max's cotangent added into the cotangent it joins in place
(`extremum_added`, pipeline/accumulate.py); the whole max and min in 32 lanes (rules/folds.py);
`t ** j` of a loop's integer in fused loops as products LLVM vectorises (`power_lanes`,
rules/lanes.py); `np.arange` known to be a vector (ranks.py), so loops over it fuse. Each case:
jit equals Python mode, and finite differences, in the inputs' dtypes and shapes."""

from __future__ import annotations

import ast

import numba
import numpy as np
import pytest

import s2sad
from s2sad.numba_helpers import max_over, min_over, power_lanes
from s2sad.pipeline.accumulate import extrema_in_place
from s2sad.pipeline.fusion.sums import sums_apart

from test_jit_fuse import assert_close, fd_grad, fused_ran, in_python, rng


def lse(x):
    a = np.max(x)
    return a + np.log(np.sum(np.exp(x - a)))


def polyfit(x, n):
    t = -1.0 + np.arange(n) * 2.0 / (n - 1)
    residual = np.sign(t)
    for j in range(x.shape[0]):
        residual = residual - x[j] * t**j
    return 0.5 * np.sum(residual**2)


@pytest.fixture(scope="module")
def lse_jit():
    return s2sad.grad(lse, jit="strict")


def test_lse_adds_its_sums_in_the_fused_loop_and_the_max_cotangent_in_place(lse_jit):
    x = rng(1).standard_normal(45)
    got = lse_jit(x)
    assert fused_ran(lse_jit)
    assert_close(got, s2sad.grad(lse)(x))
    assert_close(got, fd_grad(lse, [x], 0), rtol=1e-7)
    assert_close(in_python(lse_jit, x)[1], got)
    source = s2sad.source(lse_jit)
    assert "da_sum_lanes[" in source and "da = da - da_sum" in source, source
    assert "dx = extremum_added(dx, da, x, a)" in source, source
    assert "a = max_over(x, None, False)" in source, source


def test_lse_ties_nans_and_float32_match_python_mode(lse_jit):
    plain = s2sad.grad(lse)
    ties = np.array([0.5, 2.0, -1.0, 2.0, 2.0] * 9)  # the max's cotangent shared by 27
    assert_close(lse_jit(ties), plain(ties))
    nans = ties.copy()
    nans[7] = np.nan  # np.max is NaN: no element equals it, g * 0 / 0 everywhere
    assert np.isnan(plain(nans)).all() and np.isnan(lse_jit(nans)).all()
    x32 = rng(2).standard_normal((4, 9)).astype(np.float32)  # 2-D: the max over all of it
    got, expected = lse_jit(x32), plain(x32)
    assert got.dtype == expected.dtype == np.float32 and got.shape == (4, 9)
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-7)


def test_a_loop_of_integer_powers_over_arange_fuses_and_matches():
    g = s2sad.grad(polyfit, wrt="x", jit="strict")
    x = rng(4).standard_normal(6)
    got = g(x, 37)
    assert fused_ran(g)
    assert_close(got, s2sad.grad(polyfit, wrt="x")(x, 37), rtol=1e-10)
    assert_close(got, fd_grad(lambda x: polyfit(x, 37), [x], 0), rtol=1e-6)
    source = s2sad.source(g)
    assert "power_lanes(t[i0], j)" in source and "and 0 <= j < 256" in source, source
    x = rng(5).standard_normal(300) * 1e-3  # powers past 255: those steps run unfused
    assert_close(g(x, 37), s2sad.grad(polyfit, wrt="x")(x, 37), rtol=1e-10)


@numba.njit(error_model="numpy")  # as jit.py compiles generated code
def powers(a, n):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = power_lanes(a[i], n)
    return out


@numba.njit(error_model="numpy")
def numbas_powers(a, n):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = a[i] ** n
    return out


def test_power_lanes_is_numbas_integer_power_bit_for_bit():
    a = np.concatenate([rng(5).uniform(-3, 3, 100), [0.0, -0.0, 1e300, -1e-300, np.inf, np.nan]])
    for n in (0, 1, 2, 7, 64, 127, 255):  # (the fused run's guard asks 0 <= n < 256)
        np.testing.assert_array_equal(powers(a, n), numbas_powers(a, n))
    small = a[:100].astype(np.float32)
    assert powers(small, 3).dtype == numbas_powers(small, 3).dtype
    np.testing.assert_array_equal(powers(a, 2.5), numbas_powers(a, 2.5))  # a float: as it was


@numba.njit
def extrema(a):
    return max_over(a, None, False), min_over(a, None, False)


@pytest.mark.parametrize("n", [1, 31, 32, 97])
def test_whole_max_and_min_in_lanes_are_numpys(n):
    a = rng(n).standard_normal(n)
    assert extrema(a) == (np.max(a), np.min(a))
    a[n // 2] = np.nan
    assert all(np.isnan(v) for v in extrema(a))
    b = rng(n).standard_normal((3, n)).astype(np.float32)
    got = extrema(b)
    assert got == (np.max(b), np.min(b))  # (float32 in Numba: boxed as Python floats)
    assert extrema(b[:, ::2]) == (np.max(b[:, ::2]), np.min(b[:, ::2]))  # not contiguous
    assert extrema(np.full(n, -np.inf)) == (-np.inf, -np.inf)
    with pytest.raises(ValueError):
        extrema(np.empty(0))


# ----------------------------------------------------------------------------- the passes alone


def _ranks(**ranks):
    return lambda node: ranks.get(node.id) if isinstance(node, ast.Name) else None


def _stmts(text: str) -> list:
    return ast.parse(text).body


RANKS = _ranks(g=1, e=1, dz=1, dx=1, x=1, y=1, a=0, da=0, s=0, w=0)
MADE = "dz = g * e\ndx = dz\ns = sum_over(dz, None, False)\n"
ADDED = "dx = dx + extremum_vjp(da, x, a)\n"


def test_extremum_added_in_place_only_into_an_array_nothing_else_reads_after():
    out = extrema_in_place(_stmts(MADE + ADDED), RANKS, {"dx"})
    assert ast.unparse(out[-1]) == "dx = extremum_added(dx, da, x, a)"
    refused = [
        MADE + ADDED + "y = dz * 2.0",  # the array's other name read after
        MADE + "y = dz\n" + ADDED + "w = sum_over(y, None, False)",  # a third name, read after
        "dz = expand_reduced(g, e)\ndx = dz\n" + ADDED,  # a broadcast view, not a new array
        "dx = g\n" + ADDED,  # not made here: the caller's cotangent
        MADE + "w = dz[0]\n" + ADDED,  # read by subscript: no check what it keeps
        MADE + "for k in range(3):\n    s = s + sum_over(dz, None, False)\n" + ADDED,
    ]
    for text in refused:
        assert "extremum_added" not in ast.unparse(extrema_in_place(_stmts(text), RANKS)), text
    kept = extrema_in_place(_stmts(MADE + ADDED), RANKS, {"dx", "dz"})  # dz returned too
    assert "extremum_added" not in ast.unparse(kept)


def test_sums_taken_out_of_arithmetic_on_numbers():
    text = "da = da - sum_over(dz, None, False) * w\ns = sum_over(dz, None, False)\n"
    made: dict = {}
    out = sums_apart(_stmts(text), RANKS, {"da", "dz", "s", "w"}, made)
    assert [ast.unparse(s) for s in out] == [
        "da_sum = sum_over(dz, None, False)",
        "da = da - da_sum * w",
        "s = sum_over(dz, None, False)",  # already a sum: as it was
    ]
    assert made == {"da_sum": 0}
    left = "y = dz - sum_over(dz, None, False)\nda = f(sum_over(dz, None, False))\n"
    assert [ast.unparse(s) for s in sums_apart(_stmts(left), RANKS, set(), {})] == [
        "y = dz - sum_over(dz, None, False)",  # an array: not a number's arithmetic
        "da = f(sum_over(dz, None, False))",  # inside another call
    ]

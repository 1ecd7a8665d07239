"""Jitted code computes in NumPy 2's dtypes where integer arrays meet Python ints and float
arrays (pipeline/promotions.py, rules/promotion.py): a Python int is weak (NEP 50), so `u * 200`
of a uint8 `u` wraps mod 256 and `u64 + 1` stays uint64, where Numba computes in int64
(float64); a float32 array with an int32 or int64 one computes in float64, where Numba's ufuncs
keep float32. Value, gradient and dtypes equal Python mode's. Few compiles: one call covers
every small integer dtype, two the float32 ones (fused, unfused)."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.jit import JitError, JitFallbackWarning

numba = pytest.importorskip("numba")


def small_ints(x, i8, u8, i16, u16, i32, u32, u64):
    y = u64 + 1  # uint64 in NumPy: the store below truncates
    y[0] = x[0] * 3.0
    s = (u8 * 200) * x + (u8 - 3) * x + (i8 * 100 + 50) * x + (i16 * 300) * x
    s = s + (u16 - 7) * x + (i32 * 3 - 1) * x + (u32 - 5) * x + y * x
    s = s + (i8 // 3) * x + (u8 % 7) * x + (-i16 - 1) * x + (2 - u16) * x
    s = s + (u8**2) * x
    e = u8[3] * 3  # numbers too: a uint8 one (750 wraps to 238), which `//` reads
    s = s + (u8[3] * 200 + e // 7 - u8[0] + i16[0] * 300 + (u64[3] + 1)) * x
    return np.sum(s * s)


def element_times(x, u, n):
    return np.sum(x * (u[2] * 300) * (u[0] * n))


def floats_with_ints(x, a, b, c, d):
    return np.sum(x * a + b * x + x * c + d * x)


def product(x, m):
    c = np.max(m, axis=0)  # a dtype ranks.py does not follow: `promoted` reads it compiled
    return x * m + np.add(x, m) + x * c


def times_200(x, u):
    return np.sum((u * 200) * x)


def times_a_number(x, u, n):
    return np.sum((u * n) * x)


def _ints(dtype, values):
    return np.array(values, dtype=dtype)


def _same(got, want):
    """Equal numbers in equal types and dtypes, each part of a tuple."""
    if isinstance(want, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert type(got) is type(want) and np.result_type(got) == np.result_type(want)
    # (float32: fused loops add in another order than NumPy, within float32's rounding)
    rtol = 1e-6 if np.result_type(want) == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)


def test_small_integer_arrays_with_python_ints_wrap_as_numpys():
    x = np.array([0.3, 0.7, 1.1, -0.4])
    ints = (
        _ints(np.int8, [2, 3, -1, 100]),
        _ints(np.uint8, [2, 3, 1, 250]),
        _ints(np.int16, [200, 3, -1, 120]),
        _ints(np.uint16, [2, 3, 1, 9]),
        _ints(np.int32, [2**30, 3, -1, 7]),
        _ints(np.uint32, [2, 3, 1, 9]),
        _ints(np.uint64, [1, 2, 3, 2**40]),
    )
    args = (x,) + ints
    with np.errstate(over="ignore"):
        want = s2sad.value_and_grad(small_ints)(*args)
        got = s2sad.value_and_grad(small_ints, jit="strict")(*args)
    _same(got, want)
    numba_like = small_ints(x, *(a.astype(np.int64) for a in ints[:-1]), ints[-1])
    assert not np.isclose(want[0], numba_like)  # (the wrapped numbers differ from int64's)


def test_elements_out_of_range_or_meeting_an_int_of_unknown_type_are_told_as_numpy():
    """`u[2] * 300` of a uint8 `u` raises NumPy's OverflowError (a `weak_int`, as for arrays);
    `u[0] * n` of an int argument `n` is refused, as `u * n` is (NumPy's dtype is uint8 for a
    Python int, int64 for a NumPy one)."""
    x, u = np.array([0.3, 0.7, 1.1]), _ints(np.uint8, [2, 30, 250])
    with pytest.raises(OverflowError, match="300 out of bounds for uint8"):
        s2sad.value_and_grad(element_times)(x, u, 200)
    jitted = s2sad.value_and_grad(element_times, jit="strict")
    assert "u[2] * weak_int(300, u)" in s2sad.source(jitted, x, u, 200)
    with pytest.raises(JitError, match=r"uint8 array.*line \d+ \(`return np.sum\(x \* \(u\[2\]"):
        jitted(x, u, 200)


def test_emitted_jit_module_computes_in_numpys_dtypes():
    """A module `s2sad emit --jit` writes knows no argument's dtype: `u * 200` is written with
    `weak_int(200, u)` all the same, which casts 200 to a uint8 `u`'s dtype when it compiles."""
    from s2sad import cli

    text = cli.emit_text(f"{__file__}:times_200", ["x"], "value_and_grad", jit=True)
    assert "u * weak_int(200, u)" in text and "def weak_int(" in text


def test_float32_with_integer_arrays_promotes_as_numpy():
    x = (np.arange(6, dtype=np.float32) * 0.1 + 0.05).reshape(2, 3)
    narrow = (np.int8, np.uint8, np.int16, np.uint16)  # float32 stays float32 (fused code)
    wide = (np.int32, np.uint32, np.int64, np.uint64)  # float64
    for dtypes, kept in ((narrow, np.float32), (wide, np.float64)):
        ints = [np.full((2, 3), 100001 % np.iinfo(t).max, dtype=t) for t in dtypes]
        want = s2sad.value_and_grad(floats_with_ints)(x, *ints)
        jitted = s2sad.value_and_grad(floats_with_ints, jit="strict")
        got = jitted(x, *ints)
        assert np.result_type(want[0]) == kept and want[1].dtype == np.float32
        _same(got, want)
        assert bool(jitted.compiled.jitted.failed) == (kept == np.float64)  # (fused: float32)
    m = np.array([[1, 2, 3], [4, 5, 100001]])
    g = np.ones((2, 3), np.float32)
    want = s2sad.vjp(product)(x, m)
    got = s2sad.vjp(product, jit="strict")(x, m)
    assert want[0].dtype == np.float64
    _same(got[0], want[0])
    _same(got[1](g), want[1](g))


def test_a_python_int_out_of_an_arrays_range_raises_as_numpy():
    """`u * 200` of an int8 array: NumPy raises OverflowError, where Numba would wrap 200."""
    x, u = np.array([0.3, 0.7, 1.1]), _ints(np.int8, [1, 2, 3])
    for jit in (False, "strict"):
        with pytest.raises(OverflowError, match="out of bounds for int8"):
            s2sad.value_and_grad(times_200, jit=jit)(x, u)


def test_an_int_number_of_unknown_type_meeting_a_uint8_array_is_refused():
    """`u * n` of an int argument `n`: NumPy's dtype is uint8 for a Python int and int64 for a
    NumPy one; compiled code cannot tell them apart, so it refuses, naming the line (jit=True
    runs the Python version, with Python mode's numbers)."""
    x, u = np.array([0.3, 0.7, 1.1]), _ints(np.uint8, [2, 30, 250])
    want = s2sad.value_and_grad(times_a_number)(x, u, 200)
    with pytest.raises(JitError, match=r"uint8 array.*line \d+ \(`return np.sum\(\(u \* n\)"):
        s2sad.value_and_grad(times_a_number, jit="strict")(x, u, 200)
    with pytest.warns(JitFallbackWarning, match="int number of unknown type"):
        _same(s2sad.value_and_grad(times_a_number, jit=True)(x, u, 200), want)

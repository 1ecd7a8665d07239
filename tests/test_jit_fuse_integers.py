"""Integer arrays in fused runs (pipeline/fusion/dtypes.py): an integer argument, or a value
computed from one (`m.sum(axis=0, keepdims=True)`), is read by a run of float arrays where NumPy
keeps the run's dtype meeting it (`kept_dtype`, checked as the code compiles) and every value the
run computes from it also reads a float array; a value of integers alone keeps the guard failing,
so the unfused code computes it with NumPy's integer arithmetic."""

from __future__ import annotations

import re

import numpy as np
import pytest

import s2sad
from guard_verdicts import guard_verdicts
from test_jit_fuse import fd_grad

pytest.importorskip("numba")


def weighted_by_counts(x, m):
    c = m.sum(axis=0, keepdims=True)
    y = np.tanh(x) * c + x * m
    return np.sum(y * y)


def squared_counts(x, m):
    t = m * m  # integers alone: int8 wraps around, as NumPy computes it
    return np.sum(x * t)


def _failed(verdicts) -> list[str]:
    return [line.strip() for line, passed in verdicts if not passed]


def test_an_integer_argument_and_its_sums_join_a_broadcasting_run(monkeypatch):
    rng = np.random.default_rng(0)
    x, m = rng.normal(size=(4, 3)), rng.integers(-3, 4, (4, 3))
    jitted = s2sad.grad(weighted_by_counts, jit="strict")
    source = s2sad.source(jitted, x, m)
    assert re.search(r"kept_dtype\(\w+, (\w+, )*m\b", source) and "float_arrays(m" not in source
    verdicts = guard_verdicts(lambda: jitted(x, m), monkeypatch)
    assert verdicts and _failed(verdicts) == []
    got = jitted(x, m)
    assert not jitted.compiled.jitted.failed  # the fused code compiled, for these dtypes
    np.testing.assert_allclose(got, s2sad.grad(weighted_by_counts)(x, m), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, fd_grad(weighted_by_counts, (x, m), 0), rtol=1e-6, atol=1e-7)
    # float32 meeting int16 stays float32 in NumPy; meeting int64 it is float64: unfused there
    for kind in (np.int16, np.int64):
        x32, mk = x.astype(np.float32), m.astype(kind)
        got = jitted(x32, mk)
        want = s2sad.grad(weighted_by_counts)(x32, mk)
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_a_value_of_integers_alone_keeps_its_integer_arithmetic():
    """`m * m` of int8 wraps around in NumPy: a run allocating it as float would not."""
    x = np.random.default_rng(1).normal(size=5)
    m = np.array([100, -90, 3, 12, 50], dtype=np.int8)
    jitted = s2sad.grad(squared_counts, jit="strict")
    assert not re.search(r"kept_dtype\([^)]*\bm\b", s2sad.source(jitted, x, m))
    with np.errstate(over="ignore"):
        want = s2sad.grad(squared_counts)(x, m)
        got = jitted(x, m)
    np.testing.assert_array_equal(want, (m * m).astype(np.float64))
    np.testing.assert_array_equal(got, want)

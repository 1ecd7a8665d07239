"""Forms jitted code is lowered to where Numba lacks NumPy's (pipeline/lower.py, fusion): integer
arrays in fused runs (pipeline/fusion/dtypes.py: an integer argument, or a value computed from
one, `m.sum(axis=0, keepdims=True)`, is read by a run of float arrays where NumPy keeps the run's
dtype meeting it, `kept_dtype`, checked as the code compiles, and every value the run computes
from it also reads a float array; a value of integers alone keeps the guard failing, so the
unfused code computes it with NumPy's integer arithmetic), joins of operands of several ranks
and numbers appended in a loop. One compile per case: each costs seconds."""

from __future__ import annotations

import re

import numpy as np
import pytest

import s2sad
from guard_verdicts import guard_verdicts
from test_jit_fuse import fd_grad

numba = pytest.importorskip("numba")


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


def test_kept_dtype_is_numpys_promotion():
    """Compiled, `kept_dtype` types where NumPy keeps the float array's dtype meeting the others
    (float32 meeting int64 is float64: it fails to type, and the code runs unfused)."""
    from s2sad.numba_helpers import kept_dtype

    compiled = numba.njit(lambda source, other: kept_dtype(source, other))
    kept = [(np.float64, np.int64), (np.float32, np.int16), (np.float32, np.bool_)]
    for source, other in kept + [(np.float32, np.int64), (np.float32, np.float64)]:
        args = (np.ones(2, source), np.ones(2, other))
        if (source, other) in kept:
            assert compiled(*args) is True
        else:
            with pytest.raises(numba.core.errors.TypingError):
                compiled(*args)


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


def grown(a, b):
    """A vstack of a vector and a matrix in a loop, and numbers appended to `np.array([])`."""
    t = 0.0
    out = np.array([])
    for i in range(2):
        t = t + np.sum(np.vstack([a * (i + 1.0), b]) ** 2)
        out = np.append(out, a[i] * t)
    return t + np.sum(np.sin(out))


def test_joins_of_mixed_ranks_and_numbers_appended_compile():
    """`np.vstack([vector, matrix])` (Numba's takes one rank: each given two axes first),
    `np.append(out, number)` in a loop (the number's cotangent a number) and `np.array([])`
    compile; the gradient is Python mode's and central differences'."""
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=3), rng.normal(size=(2, 3))
    got = s2sad.grad(grown, wrt=(0, 1), jit="strict")(a, b)
    want = s2sad.grad(grown, wrt=(0, 1))(a, b)
    for g, w, x in zip(got, want, (a, b)):
        assert g.shape == x.shape and g.dtype == x.dtype
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    fd = [fd_grad(grown, (a, b), k) for k in (0, 1)]
    for g, f in zip(got, fd):
        np.testing.assert_allclose(g, f, rtol=1e-6, atol=1e-8)


def summed_and_first(u, k):
    v = np.linalg.solve(np.eye(5) * k, u)
    return np.array([np.sum(v), v[0]])  # numbers of ranks not known when lowered


def test_an_array_of_numbers_of_unknown_rank_compiles():
    """`np.array([np.sum(v), v[0]])` is lowered to `np.stack` of operands whose ranks the
    lowering does not know (v is a solve's): `stack_operands` makes a vector of numbers where
    Numba's np.stack takes arrays only; the Jacobian is Python mode's and central differences'
    (forward mode only: reverse mode's primal is the same lowered code, and a compile costs
    seconds)."""
    from s2sad.numba_helpers import stack_operands

    compiled = numba.njit(lambda a, b: stack_operands((a, b)))
    assert compiled(1.5, 2).dtype == np.float64 and list(compiled(1.5, 2)) == [1.5, 2.0]
    np.testing.assert_array_equal(compiled(np.ones(2), np.zeros(2)), [[1, 1], [0, 0]])
    u, k = np.arange(1.0, 6.0), 2.0
    want = s2sad.jacobian(summed_and_first, wrt=(0, 1), mode="reverse")(u, k)
    fd = [fd_grad(lambda u, k: summed_and_first(u, k) @ [1.0, 0.5], (u, k), i) for i in (0, 1)]
    np.testing.assert_allclose(want[0].T @ [1.0, 0.5], fd[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(want[1] @ [1.0, 0.5], fd[1], rtol=1e-6, atol=1e-8)
    got = s2sad.jacobian(summed_and_first, wrt=(0, 1), mode="forward", jit="strict")(u, k)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)

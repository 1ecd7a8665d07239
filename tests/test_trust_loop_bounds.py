"""A `for` loop's iterable is evaluated once, at loop entry: where the body rebinds a name its
`range` bounds (or its array, `enumerate`, `zip`) read, the adjoint, the tangent, the row tapes
and a checkpointed loop iterate over the entry values, not the last ones. Exact values and
central differences in float64, in Python mode and compiled with Numba (both give the same)."""

import numpy as np
import pytest

import s2sad
from s2sad.cli import emit_text

from conftest import check_grad, check_jvp, load_module


def countdown(y, n):
    for t in range(n):
        y = y * 1.5
        n = n - 1
    return y


def start_stop_step(y, a, n, s):
    for t in range(a, n, s):
        y = y * 1.5 + 0.1 * t
        a = a + 5
        n = n - 3
        s = s + 1
    return y


def target_is_bound(y, n):
    for n in range(n):
        y = y * 1.5 + n
    return y


def stop_expression(y, n):
    for t in range(n * 2 - 1):
        y = y * 1.25
        n = n + 1
    return y


def backwards(y, n):
    for t in reversed(range(n)):
        y = y * 1.5 + t
        n = n - 1
    return y


def trimmed(y, n, m):
    for t in reversed(range(n)[:m]):
        y = y * 1.5 + t
        m = m - 1
    return y


def rows_rebound(y, a):
    for v in a:
        y = y * v
        a = a[:-1] * 2.0
    return y


def enumerate_rebound(y, a):
    for i, v in enumerate(a):
        y = y * v + i
        a = a[1:]
    return y


def enumerate_start_rebound(y, a, k):
    for i, v in enumerate(a, start=k):
        y = y * v + i
        k = k + 10
    return y


def zip_rebound(y, a, b):
    for u, v in zip(a, b):
        y = y * u + v
        b = b[1:]
        a = a * 2.0
    return y


def inner_rebound_in_inner(y, m, k):
    for i in range(m):
        kk = k + i
        for j in range(kk):
            y = y * 1.1
            kk = kk - 1
    return y


def inner_rebound_in_outer(y, m, k):
    for i in range(m):
        for j in range(k):
            y = y * 1.1
        k = k + 1
    return y


def inner_rebound_both(y, m, k):
    for i in range(m):
        for j in range(1, k):
            y = y * 1.1 + 0.01 * j
            k = k - 1
        k = k + 3
    return y


def shape_bound(y, x):
    for t in range(x.shape[0]):
        y = y * x[0]
        x = x[1:] * 1.0
    return y


def len_bound(y, x):
    for t in range(1, len(x)):
        y = y * x[-1]
        x = x[:-1]
    return y


def with_break(y, n):
    for t in range(n):
        if y > 10.0:
            break
        y = y * 1.5
        n = n - 1
    return y


def countdown_twice(y, n):
    return countdown(y, n) + countdown(y * 2.0, n + 1)  # inlined twice


def inside_while(y, m, k):
    i = 0
    while i < m:
        for j in range(k):
            y = y * 1.1
            k = k - 1
        k = i + 3
        i = i + 1
    return y


def array_state(x, n):
    s = 0.0
    for t in range(n):
        x = np.sin(x) * 1.5
        s = s + np.sum(x * x)
        n = n - 1
    return s


def rows_into_array(x, n):
    out = np.zeros(n)
    for t in range(n):
        out[t] = x[t] * x[t] * (t + 1.0)
        n = n - 1
    return np.sum(out) + np.sum(x) * n


X = np.array([0.3, -0.7, 1.1, 0.5])
A = np.array([1.1, 0.9, 1.3, 0.7])
B = np.array([0.2, -0.4, 0.6, 0.8])
CASES = [
    (countdown, (2.0, 3), 0, 1.5**3),
    (start_stop_step, (2.0, 1, 9, 2), 0, 1.5**4),
    (target_is_bound, (2.0, 4), 0, 1.5**4),
    (stop_expression, (2.0, 3), 0, 1.25**5),
    (backwards, (2.0, 3), 0, 1.5**3),
    (trimmed, (2.0, 6, 4), 0, 1.5**4),
    (rows_rebound, (2.0, A), 0, np.prod(A)),
    (rows_rebound, (2.0, A), 1, None),
    (enumerate_rebound, (2.0, A), 0, np.prod(A)),
    (enumerate_rebound, (2.0, A), 1, None),
    (enumerate_start_rebound, (2.0, A, 3), 0, np.prod(A)),
    (enumerate_start_rebound, (2.0, A, 3), 1, None),
    (zip_rebound, (2.0, A, B), 0, np.prod(A)),
    (zip_rebound, (2.0, A, B), (1, 2), None),
    (inner_rebound_in_inner, (2.0, 3, 2), 0, 1.1 ** (2 + 3 + 4)),
    (inner_rebound_in_outer, (2.0, 3, 2), 0, 1.1 ** (2 + 3 + 4)),
    (inner_rebound_both, (2.0, 3, 4), 0, None),
    (shape_bound, (2.0, A), 0, np.prod(A)),
    (shape_bound, (2.0, A), 1, None),
    (len_bound, (2.0, A), (0, 1), None),
    (with_break, (2.0, 9), 0, 1.5**4),
    (countdown_twice, (2.0, 3), 0, 1.5**3 + 2.0 * 1.5**4),
    (inside_while, (2.0, 3, 2), 0, 1.1 ** (2 + 3 + 4)),
    (array_state, (X, 3), 0, None),
    (rows_into_array, (X, 3), 0, None),
]
IDS = [f"{f.__name__}-wrt{wrt}" for f, _, wrt, _ in CASES]


@pytest.mark.parametrize("f, args, wrt, exact", CASES, ids=IDS)
def test_python_mode_iterates_over_the_entry_values(f, args, wrt, exact):
    g = check_grad(f, args, wrt)
    if exact is not None:
        assert g == pytest.approx(exact, rel=1e-12)


# a user's `reversed(...)` loop is not compiled by Numba (jit="strict" refuses it: test_jit)
COMPILED = [(c, i) for c, i in zip(CASES, IDS) if c[0] not in (backwards, trimmed)]


@pytest.mark.parametrize(
    "f, args, wrt, exact", [c for c, _ in COMPILED], ids=[i for _, i in COMPILED]
)
def test_jit_gives_the_python_numbers(f, args, wrt, exact):
    expected = s2sad.grad(f, wrt=wrt)(*args)
    for jit in (True, "strict"):
        got = s2sad.grad(f, wrt=wrt, jit=jit)(*args)
        pairs = zip(got, expected) if isinstance(wrt, tuple) else [(got, expected)]
        for a, b in pairs:
            assert np.shape(a) == np.shape(b)
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
        if exact is not None:
            assert got == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("f, args, wrt, exact", CASES, ids=IDS)
def test_forward_mode_iterates_over_the_entry_values(f, args, wrt, exact):
    check_jvp(f, args, wrt)


def test_the_bound_is_bound_once_before_the_loop():
    """The emitted code names the entry value (`n_stop = n`) and both sweeps read it."""
    text = s2sad.source(s2sad.grad(countdown), 2.0, 3)
    assert "n_stop = n\n" in text
    assert text.count("range(n_stop)") == 2
    code = [line for line in text.splitlines() if not line.strip().startswith("#")]
    assert not [line for line in code if "range(n)" in line]


def stepped(y, n):
    for i in s2sad.checkpoint(range(n), snapshots=2):
        y = y * 1.5
        n = n - 1
    return y


@pytest.mark.parametrize("jit", [False, True])
def test_checkpointed_loop_iterates_over_the_entry_values(jit):
    assert s2sad.grad(stepped, jit=jit)(2.0, 5) == pytest.approx(1.5**5, rel=1e-12)
    value, tangent = s2sad.jvp(stepped, jit=jit)(2.0, 5, tangent=1.0)
    assert (value, tangent) == pytest.approx((2.0 * 1.5**5, 1.5**5), rel=1e-12)


def test_emit_jit_iterates_over_the_entry_values(tmp_path):
    source = tmp_path / "bounds.py"
    source.write_text(
        "def countdown(y, n):\n"
        "    for t in range(n):\n"
        "        y = y * 1.5\n"
        "        n = n - 1\n"
        "    return y\n"
    )
    for jit in (False, True):
        text = emit_text(f"{source}:countdown", None, "grad", jit=jit)
        assert "n_stop = n\n" in text
        module = load_module(tmp_path, f"emitted_{jit}", text)
        assert module.grad_countdown(2.0, 3) == pytest.approx(1.5**3, rel=1e-12)

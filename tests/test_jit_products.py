"""Jitted cotangents of products in loops: two vectors' product is written out (`g * b`) so
Numba fuses it with what adds to it, and a matrix-vector product's matrix cotangent is added
into its array in place (`add_outer_at`). Each case: jit equals NumPy mode and finite
differences, in float64 and float32."""

import math

import numpy as np
import pytest

import s2sad
from conftest import _fd
from s2sad.rules.helpers import RUNTIME

numba = pytest.importorskip("numba")

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def mahalanobis(Q, means, x):  # the GMM's inner loop: z = Q[k] @ (x[i] - means[k]), z . z
    total = 0.0
    for i in range(x.shape[0]):
        for k in range(means.shape[0]):
            z = Q[k] @ (x[i] - means[k])
            total = total + np.dot(z, z) + np.sin(z @ means[k])
    return total


def vector_times_matrix(A, v):  # v @ A[j]: the matrix is the right operand
    total = 0.0
    for j in range(A.shape[0]):
        w = np.tanh(v @ A[j])
        total = total + np.dot(w, v[: w.shape[0]])
    return total


def sliced_rows(Q, v):  # Q[k, :2] @ v: the index has a slice (added through add_at)
    total = 0.0
    for k in range(Q.shape[0]):
        total = total + np.sum(np.sin(Q[k, :2] @ v))
    return total


rng = np.random.default_rng(3)
Q = rng.normal(size=(3, 4, 4))
MEANS = rng.normal(size=(3, 4))
XS = rng.normal(size=(5, 4))
A = rng.normal(size=(2, 4, 3))
V = rng.normal(size=4)
CASES = [
    (mahalanobis, (Q, MEANS, XS), (0, 1, 2)),
    (vector_times_matrix, (A, V), (0, 1)),
    (sliced_rows, (Q, V), (0, 1)),
]


@pytest.mark.parametrize("f, args, wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_jitted_products_match_numpy_mode_and_finite_differences(f, args, wrt):
    g = s2sad.grad(f, wrt=wrt, jit="strict")
    jitted = g(*args)
    expected = s2sad.grad(f, wrt=wrt)(*args)
    for k, got, want in zip(wrt, jitted, expected):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
        fd = _fd(lambda *a: float(f(*a)), list(args), k, 1e-6)
        np.testing.assert_allclose(got, fd, rtol=1e-5, atol=1e-7)
    source = s2sad.source(g)
    assert "dot_vjp_lhs" not in source and "dot_vjp_rhs" not in source, source
    assert "add_outer_at(" in source, source
    # float32 in, float32 out, close to the float64 gradient and to Python mode's float32 one:
    # the loop sums `dv` from a float32 zero and float64 cotangents (`total = 0.0`), which
    # compiles only when the sum starts as NumPy's first addition leaves it (sum_zeros_like)
    single = [a.astype(np.float32) for a in args]
    in_python = s2sad.grad(f, wrt=wrt)(*single)
    for got, want, python in zip(g(*single), expected, in_python):
        assert got.dtype == np.float32 and python.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-4)
        np.testing.assert_allclose(got, python, rtol=1e-5, atol=1e-6)


def test_parallel_build_adds_through_its_rows():
    g = s2sad.grad(mahalanobis, wrt=(0, 1, 2), jit="strict", parallel=True)
    for got, want in zip(g(Q, MEANS, XS), s2sad.grad(mahalanobis, wrt=(0, 1, 2))(Q, MEANS, XS)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    # (its loop reads means[k] for k in range(XS.shape[0]), an index s2sad checks: serial, and
    # the source says why; a build on threads would add through per-thread rows instead)
    assert "it checks an index (k)" in s2sad.source(g)


def test_the_python_forms_run_the_jitted_source():
    """jit=True falls back to running the jitted source in Python: add_outer_at's NumPy form."""
    g = s2sad.grad(mahalanobis, wrt=(0, 1, 2), jit="strict")
    g(Q, MEANS, XS)
    namespace = {"np": np, "math": math, **RUNTIME}
    exec(s2sad.source(g), namespace)
    _, grads = namespace["checked_grad_mahalanobis"](Q, MEANS, XS)
    for got, want in zip(grads, s2sad.grad(mahalanobis, wrt=(0, 1, 2))(Q, MEANS, XS)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


def list_times(x):
    return np.sum(np.sin([1.0, 2.0] @ x))


def times_list(x):
    return np.sum(np.sin(x @ [1.0, 2.0]))


def nested_list_times(x):
    return np.sum(np.sin([[1.0, 2.0], [3.0, 0.5]] @ x))


def tuple_times(x):
    return np.sum(np.sin((1.0, 2.0) @ x))


@pytest.mark.parametrize("f", [list_times, times_list, nested_list_times, tuple_times])
def test_a_list_operand_of_matmul_compiles(f):
    """`[1.0, 2.0] @ x`: the list's array in the products' Numba forms (strict: no fallback),
    gradients and tangents as NumPy mode's and finite differences."""
    x = np.random.default_rng(0).normal(size=(2, 2))
    expected = s2sad.grad(f)(x)
    np.testing.assert_allclose(expected, _fd(f, (x,), 0, 1e-6), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(s2sad.grad(f, jit="strict")(x), expected, rtol=1e-12)
    t = np.random.default_rng(1).normal(size=(2, 2))
    out, out_dot = s2sad.jvp(f, jit="strict")(x, tangent=t)
    e_out, e_dot = s2sad.jvp(f)(x, tangent=t)
    assert out == pytest.approx(e_out, rel=1e-12) and out_dot == pytest.approx(e_dot, rel=1e-12)

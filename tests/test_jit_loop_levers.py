"""What makes the jitted gradients of loop code cheap, each against NumPy mode and finite
differences: a small matrix-vector product's cotangent as a loop instead of a BLAS call
(rules/matrix_products.py `_mm`), and a statement that makes several arrays fused on its own
(`dz = g * z + g * z`, pipeline/fusion/runs.py)."""

import numpy as np
import pytest

import s2sad
from benchmarks.workloads import gmm, loops
from conftest import _fd
from s2sad.rules.matrix_products import _mm

numba = pytest.importorskip("numba")

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def _check(f, args, wrt, rtol=1e-12):
    """The jitted gradient equals NumPy mode's and central differences; returns it."""
    g = s2sad.grad(f, wrt=wrt, jit="strict")
    jitted = g(*args)
    expected = s2sad.grad(f, wrt=wrt)(*args)
    for k, got, want in zip(wrt, jitted, expected):
        assert got.shape == np.shape(args[k]) and got.dtype == np.asarray(args[k]).dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-12)
        fd = _fd(lambda *a: float(f(*a)), list(args), k, 1e-6)
        np.testing.assert_allclose(got, fd, rtol=1e-5, atol=1e-7)
    return g


# ----------------------------------------------------------------------------- small matvecs


def matrix_vector(Q, X):  # Q @ x: x's cotangent Q.T @ g, Q's an outer product
    total = 0.0
    for i in range(X.shape[0]):
        total = total + np.sum(np.sin(Q @ X[i]))
    return total


def transposed_matrix(Q, X):  # Q.T @ x: x's cotangent reads Q's rows
    total = 0.0
    for i in range(X.shape[0]):
        total = total + np.sum(np.tanh(Q.T @ X[i]))
    return total


def vector_matrix(Q, Y):  # y @ Q: y's cotangent Q @ g
    total = 0.0
    for i in range(Y.shape[0]):
        total = total + np.sum(np.cos(Y[i] @ Q))
    return total


rng = np.random.default_rng(17)
# 2x2 and 3x5 run the loops, 16x16 is the largest that does (256 elements), 17x17 takes BLAS
SHAPES = [(2, 2), (3, 5), (16, 16), (17, 17)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("f", [matrix_vector, transposed_matrix, vector_matrix])
def test_small_matrix_vector_cotangents_match(f, shape):
    Q = rng.normal(size=shape)
    rows = shape[0] if f is vector_matrix or f is transposed_matrix else shape[1]
    X = rng.normal(size=(3, rows))
    _check(f, (Q, X), (0, 1))
    # a Fortran-ordered matrix walks the other loop
    _check(f, (np.asfortranarray(Q), X), (0, 1))


def test_small_matrix_vector_of_mixed_dtypes():
    """float32 arguments meet float64 cotangents (the seed): the loop sums in the common dtype,
    and the gradients come back float32."""
    Q = rng.normal(size=(3, 4))
    X = rng.normal(size=(2, 4))
    single = (Q.astype(np.float32), X.astype(np.float32))
    got = s2sad.grad(matrix_vector, wrt=(0, 1), jit="strict")(*single)
    want = s2sad.grad(matrix_vector, wrt=(0, 1))(*single)
    double = s2sad.grad(matrix_vector, wrt=(0, 1))(Q, X)
    for a, b, c in zip(got, want, double):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a, c, rtol=2e-3, atol=2e-4)


def test_the_matrix_vector_loop_refuses_mismatched_lengths():
    import s2sad.numba_helpers  # noqa: F401  (registers the Numba forms)

    call = numba.njit(lambda a, b: _mm(a, b))
    np.testing.assert_allclose(call(np.ones((2, 3)), np.ones(3)), [3.0, 3.0])
    with pytest.raises(ValueError, match="do not match"):
        call(np.ones((2, 3)), np.ones(2))


# ----------------------------------------------------------------------------- fusion


def squared_norms(Q, X):  # np.dot(z, z): the adjoint's `dz = g * z + g * z` makes three arrays
    total = 0.0
    for i in range(X.shape[0]):
        z = Q @ X[i]
        total = total + np.dot(z, z)
    return total


def test_one_statement_making_several_arrays_is_fused():
    Q, X = rng.normal(size=(3, 3)), rng.normal(size=(4, 3))
    g = _check(squared_norms, (Q, X), (0, 1))
    source = s2sad.source(g)
    assert "dz[i0] = " in source and "for i0 in range(" in source, source


# ----------------------------------------------------------------------------- the workloads


def test_loop_workloads_small():
    """gmm-loops and stencil-loops, whose speed these paths are for, at small sizes."""
    inputs = gmm.make_loop_inputs(3, 4, 5)
    args = list(inputs.values())
    _check(gmm.gmm_loops, args, (0, 1, 2), rtol=1e-10)
    u = loops.stencil_inputs(6)["u"]
    _check(loops.stencil_loops, (u, 0.7), (0,))

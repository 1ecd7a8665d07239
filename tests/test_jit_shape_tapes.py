"""Jitted tapes of values the adjoint reads only for their shape (pipeline/shape_tapes.py): a
scalar's keep nothing, an array's its shape. Each case: the jitted gradient equals NumPy mode's
and finite differences, and its source records through shape_push (no list of stand-ins).
Scalars go on such tapes where their rank is unknown when s2sad transforms (here: a parameter
that is a tuple), arrays where a loop-carried value's product is read for its shape."""

import math
import re

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


def stencil(u, params):  # nested loops; `energy` is read for its shape alone
    k = params[0]
    n0, n1 = u.shape
    energy = 0.0
    for i in range(n0 - 1):
        for j in range(n1 - 1):
            c = u[i, j]
            dv = u[i + 1, j] - c
            dh = u[i, j + 1] - c
            energy = energy + 0.5 * k * (dv * dv + dh * dh) + 0.25 * (c * c - 1.0) ** 2
    return energy


def recurrent(h0, w, bias):  # `a` is read for its shape, `h` for its values
    h = h0
    total = 0.0
    for t in range(5):
        a = h * w
        h = np.tanh(a + bias)
        total = total + np.sum(h)
    return total


def shrinks(x, c):  # `b**2` has a new shape every step
    h = x
    total = 0.0
    for t in range(3):
        a = h * x[t]
        b = np.tanh(a + c)
        h = b[1:]
        total = total + np.sum(b**2)
    return total


def until_small(x, params):  # a data-dependent trip count
    a = params[0]
    s = 0.0
    v = 1.0
    i = 0
    while v > 0.05:
        v = v * a
        s = s + v * x[i % x.shape[0]] ** 2
        i += 1
    return s


def checkpointed(x, params):
    e = 0.0
    for t in s2sad.checkpoint(range(x.shape[0]), snapshots=2):
        e = e + params[0] * np.sin(x[t]) ** 2
    return e


U = np.random.default_rng(0).normal(size=(6, 5))
X = np.random.default_rng(1).normal(size=7)
H = np.random.default_rng(2).normal(size=4)

CASES = [
    (stencil, (U, (0.7,)), (0,), "energy"),
    (recurrent, (H, H + 1.0, H * 0.5), (0, 1, 2), "a"),
    (shrinks, (X, 0.3), (0, 1), "total_pow"),
    (until_small, (X, (0.8,)), (0,), "s"),
    (checkpointed, (X, (0.7,)), (0,), None),  # its segments' gradients are functions of their own
]


def _check(f, args, wrt, name, **options):
    g = s2sad.grad(f, wrt=wrt, jit="strict", **options)
    jitted = g(*args)
    jitted = jitted if isinstance(jitted, tuple) else (jitted,)
    numpy_mode = s2sad.grad(f, wrt=wrt)(*args)
    numpy_mode = numpy_mode if isinstance(numpy_mode, tuple) else (numpy_mode,)
    for k, got, want in zip(wrt, jitted, numpy_mode):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
        expected = _fd(lambda *a: float(f(*a)), list(args), k, 1e-6)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
    source = s2sad.source(g)
    if name is None:
        return g
    # (a list's helpers, or rows of integers counted with a loop's tapes of rows)
    pushed = rf"shape_push\({name}_tape, {name}\)|push_shape_row\({name}_tape, \w+, {name}\.shape\)"
    popped = rf"{name} = (shape_pop\({name}_tape|pop_shape_row\({name}_tape, \w+), {name}\)"
    assert re.search(pushed, source) and re.search(popped, source), source
    assert ".append(shape_stub(" not in source, source  # (fused runs' stand-ins are stubs)
    return g


@pytest.mark.parametrize("f, args, wrt, name", CASES, ids=[c[0].__name__ for c in CASES])
def test_jitted_shape_tapes_match_numpy_mode_and_finite_differences(f, args, wrt, name):
    _check(f, args, wrt, name)


def test_parallel_build_with_shape_tapes():
    _check(stencil, (U, (0.7,)), (0,), "energy", parallel=True)


def test_float32_scalars_on_shape_tapes():
    g = s2sad.grad(stencil, jit="strict")
    du = g(U.astype(np.float32), (np.float32(0.7),))
    assert du.dtype == np.float32 and "shape_push(" in s2sad.source(g)
    np.testing.assert_allclose(du, s2sad.grad(stencil)(U, (0.7,)), rtol=1e-4, atol=1e-5)


def test_the_python_forms_run_the_jitted_source():
    """jit=True falls back to running the jitted source in Python: the helpers' NumPy forms."""
    for f, args, wrt, name in CASES[:3]:
        g = s2sad.grad(f, wrt=wrt, jit="strict")
        g(*args)
        namespace = {"np": np, "math": math, **RUNTIME}
        exec(s2sad.source(g), namespace)
        _, grads = namespace[f"checked_grad_{f.__name__}"](*args)
        expected = s2sad.grad(f, wrt=wrt)(*args)
        for got, want in zip(grads if len(wrt) > 1 else (grads,), expected):
            np.testing.assert_allclose(got, want, rtol=1e-12)

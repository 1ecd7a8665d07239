"""`jit=True` / `jit="strict"`: Numba-compiled gradients give the Python version's numbers."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

import s2sad
from s2sad.jit import JitError, JitFallbackWarning

numba = pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def euler(y0, k, n):
    y = y0
    for i in range(n):
        y = y + 0.01 * (-k * y + np.sin(y))
    return y


def recurrence(x, a):
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        y[i] = a * y[i - 1] + x[i]
    return np.sum(y * y)


def convolve(x, w):
    total = 0.0
    for i in range(x.shape[0] - w.shape[0] + 1):
        acc = 0.0
        for j in range(w.shape[0]):
            acc = acc + x[i + j] * w[j]
        if acc > 0:
            total = total + acc * acc
        else:
            total = total - 0.5 * acc
    return total


def stops_early(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] ** 2
        if s > 2.0:
            break
    return s


def newton(a):
    x = a
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


X = np.array([0.5, -0.9, 1.2, 0.3, 0.8, -0.1])
CASES = [
    (euler, (0.3, 0.8, 2000), (0, 1)),
    (recurrence, (X, 0.9), (0, 1)),
    (convolve, (X, np.array([0.2, -0.4, 0.7])), (0, 1)),
    (stops_early, (X,), 0),
    (newton, (2.0,), 0),
]


@pytest.mark.parametrize("f, args, wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_jitted_gradient_equals_python_gradient(f, args, wrt):
    numba.njit(f)(*args)  # the primal compiles, so its gradient must too
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)
        jitted = s2sad.grad(f, wrt=wrt, jit="strict")(*args)
    plain = s2sad.grad(f, wrt=wrt)(*args)
    for j, p in zip(
        jitted if isinstance(jitted, tuple) else (jitted,),
        plain if isinstance(plain, tuple) else (plain,),
    ):
        np.testing.assert_allclose(j, p, rtol=1e-12, atol=1e-14)
        assert type(j) is type(p) and np.shape(j) == np.shape(p)


def test_jitted_value_and_grad_and_jvp():
    value, g = s2sad.value_and_grad(recurrence, jit="strict")(X, 0.9)
    assert value == pytest.approx(recurrence(X, 0.9))
    out, tangent = s2sad.jvp(recurrence, jit="strict")(X, 0.9, tangent=np.ones_like(X))
    assert tangent == pytest.approx(float(np.sum(g)))


def mlp(w, x):
    return np.sum(np.tanh(x @ w))


def test_strict_names_what_numba_could_not_compile():
    with pytest.raises(JitError, match="Numba cannot compile value_and_grad_mlp") as info:
        s2sad.grad(mlp, jit="strict")(np.ones((3, 2)), np.ones((4, 3)))
    assert "matmul_vjp" in str(info.value) or "expand_reduced" in str(info.value)


def test_jit_true_falls_back_to_python_with_a_warning():
    with pytest.warns(JitFallbackWarning, match="running the Python version"):
        g = s2sad.grad(mlp, jit=True)(np.ones((3, 2)), np.ones((4, 3)))
    np.testing.assert_allclose(g, s2sad.grad(mlp)(np.ones((3, 2)), np.ones((4, 3))))


def test_jitted_grad_still_refuses_non_scalar_outputs():
    def twice(x):
        return x * 2.0

    with pytest.raises(s2sad.NonScalarOutputError):
        s2sad.grad(twice, jit=True)(X)


def test_jit_is_refused_for_vjp_and_bad_values():
    with pytest.raises(s2sad.S2SADError, match="jit is not available for vjp"):
        s2sad.vjp(euler, jit=True)
    with pytest.raises(ValueError, match="jit must be"):
        s2sad.grad(euler, jit="yes")


def test_compiled_code_is_cached_on_disk(tmp_path):
    code = (
        "import sys; sys.path.insert(0, {root!r}); sys.path.insert(0, {here!r})\n"
        "import s2sad, test_jit\n"
        "print(s2sad.grad(test_jit.euler, jit='strict')(0.3, 0.8, 100))\n"
    ).format(
        root=str(__import__("pathlib").Path(__file__).parent.parent),
        here=str(__import__("pathlib").Path(__file__).parent),
    )
    env = {**__import__("os").environ, "S2SAD_CACHE_DIR": str(tmp_path / "disk")}
    first = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert first.returncode == 0, first.stderr
    index_files = list((tmp_path / "disk").rglob("*.nbi"))
    assert index_files, "Numba wrote no cache index"
    second = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert second.stdout == first.stdout

"""What a tape keeps of a value the adjoint reads only for its shape and dtype (the `x` of
`unbroadcast(g, x)`, `getitem_vjp(g, x, i)`, `np.shape(x)`): a `shape_stub`, an array of that
shape and dtype with no elements of its own, and a write into such an array is not undone.
Each case is checked against finite differences, in Python and jitted, with and without
broadcasting between loop values, and the stub's shape, dtype and read-only flag are checked."""

import re

import numpy as np
import pytest

import s2sad
from conftest import check_grad, check_jvp, check_vjp
from s2sad.rules.common import shape_stub

numba = pytest.importorskip("numba")

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def rhs(x, y):
    z = np.zeros_like(y)
    z[0] = x[0]
    z[1:] = x[1:] * y[:-1]
    return z


def rk4(x, s):
    """gradbench's ode: most loop values are read back only for their shapes."""
    h = 2.0 / s
    y = np.zeros_like(x)
    for _ in range(s):
        k1 = rhs(x, y)
        k2 = rhs(x, y + h / 2 * k1)
        k3 = rhs(x, y + h / 2 * k2)
        k4 = rhs(x, y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return np.sum(y**2)


def broadcast_in_loop(w, b, n):
    """A (3,) bias broadcast against a (4, 3) state: the adjoint sums over the broadcast axis,
    which needs the bias's shape only, every step."""
    h = np.ones((4, 3))
    for _ in range(n):
        pre = h * w + b
        h = np.tanh(pre)
    return np.sum(h**2)


def shape_then_value(x, n):
    """`u` is read for its shape in one adjoint statement and for its values in another."""
    y = x * 1.0
    for _ in range(n):
        u = np.sin(y)
        y = y + u * u
    return np.sum(y)


def rewritten(x, n):
    """A fresh array written in place each step, read afterwards only for its shape."""
    total = 0.0
    for _ in range(n):
        z = np.zeros_like(x)
        z[1:] = x[1:] * x[:-1]
        z[0] = x[0] ** 2
        total = total + np.sum(np.cos(z))
    return total


def test_stub_is_shape_and_dtype_only():
    for dtype in (np.float64, np.float32, np.complex128, np.int64):
        x = np.ones((2, 3, 4096), dtype) if dtype is np.int64 else np.ones((64, 65), dtype)
        s = shape_stub(x)
        assert s.shape == x.shape and s.dtype == x.dtype and s.strides == (0,) * x.ndim
        assert not s.flags.writeable
        assert not np.any(s)
    assert shape_stub(2.5) == 2.5 and type(shape_stub(2.5)) is float
    small = np.ones(5)
    assert shape_stub(small) is small  # holding a small array costs less than a stand-in
    pair = (np.ones(2), np.ones(3))
    assert shape_stub(pair) is pair


def test_rk4_tapes_stubs_not_copies():
    source = s2sad.source(s2sad.grad(rk4))
    pushes = [line.strip() for line in source.splitlines() if ".append(" in line]
    stubbed = [p for p in pushes if "shape_stub(" in p]
    # of about thirty values saved per step, only the four the adjoint multiplies by are copied
    assert len(stubbed) >= 20, pushes
    assert len(pushes) - len(stubbed) <= 6, pushes
    # z is a fresh array read afterwards only for its shape: its overwritten elements are not
    # saved, and so never written back
    assert not re.search(r"\bz\d*_tape\.append\(z\d*\[", source), source
    assert not re.search(r"\bz\d*\[.*\] = z\d*_tape\.pop\(\)", source), source


@pytest.mark.parametrize("jit", [False, "strict"])
def test_rk4(jit):
    x = np.random.default_rng(0).uniform(size=7)
    check_grad(rk4, (x, 12))
    want = s2sad.grad(rk4)(x, 12)
    got = s2sad.grad(rk4, jit=jit)(x, 12)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got.shape == x.shape and got.dtype == x.dtype


@pytest.mark.parametrize("jit", [False, "strict"])
def test_broadcast_in_loop(jit):
    rng = np.random.default_rng(1)
    w, b = rng.normal(size=(4, 3)) * 0.5, rng.normal(size=3)
    check_grad(broadcast_in_loop, (w, b, 5), wrt=(0, 1))
    g = s2sad.grad(broadcast_in_loop, wrt=(0, 1), jit=jit)(w, b, 5)
    want = s2sad.grad(broadcast_in_loop, wrt=(0, 1))(w, b, 5)
    for got, ref, x in zip(g, want, (w, b)):
        np.testing.assert_allclose(got, ref, rtol=1e-12)
        assert got.shape == x.shape


@pytest.mark.parametrize("f", [shape_then_value, rewritten])
@pytest.mark.parametrize("jit", [False, "strict"])
def test_mixed_reads(f, jit):
    x = np.random.default_rng(2).normal(size=5)
    check_grad(f, (x, 4))
    np.testing.assert_allclose(
        s2sad.grad(f, jit=jit)(x, 4), s2sad.grad(f)(x, 4), rtol=1e-12, atol=1e-14
    )


def test_vjp_jvp_and_float32():
    x = np.random.default_rng(3).uniform(size=6)
    check_vjp(rk4, (x, 8))
    check_jvp(rk4, (x, 8))
    x32 = x.astype(np.float32)
    g = s2sad.grad(rk4)(x32, 8)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, s2sad.grad(rk4)(x, 8), rtol=1e-4)


def test_hessian_through_stubbed_tapes():
    x = np.random.default_rng(4).uniform(size=4)
    h = s2sad.hessian(broadcast_in_loop, wrt="b")(np.full((4, 3), 0.3), x[:3], 3)
    g = s2sad.grad(broadcast_in_loop, wrt="b")
    eps = 1e-6
    fd = np.stack(
        [
            (
                g(np.full((4, 3), 0.3), x[:3] + eps * e, 3)
                - g(np.full((4, 3), 0.3), x[:3] - eps * e, 3)
            )
            / (2 * eps)
            for e in np.eye(3)
        ],
        axis=-1,
    )
    np.testing.assert_allclose(h, fd, rtol=1e-5, atol=1e-7)


def index_read_for_size(x, n, width):
    """`idx` is read in the adjoint for its size alone, and as the index of a write whose
    cotangent is zeroed and whose overwritten elements come back: it must stay on the tape
    whole (found by the break-it review of shape stubs)."""
    y = x * 1.0
    t = 0.0
    for k in range(n):
        idx = np.arange(k, width * n, n)
        s = np.sum(y[: idx.size] ** 2)
        y[idx] = 0.0
        t = t + s
    return t + np.sum(y * 3.0)


def mask_read_for_shape(x, n):
    y = x * 1.0
    t = 0.0
    for k in range(n):
        mask = y > 0.1 * k
        t = t + np.sum(y[: mask.shape[0] // 2] ** 2)
        y[mask] = 0.0
        y = y * 1.5
    return t + np.sum(y * 3.0)


@pytest.mark.parametrize("width", [5, 4096])
@pytest.mark.parametrize("jit", [False, "strict"])
def test_an_index_of_a_write_is_taped_whole(width, jit):
    x = np.random.default_rng(5).normal(size=2 * width) * 0.3
    v = np.random.default_rng(6).normal(size=x.shape)
    g = s2sad.grad(index_read_for_size, jit=jit)(x, 2, width)
    eps = 1e-6
    fd = (
        index_read_for_size(x + eps * v, 2, width) - index_read_for_size(x - eps * v, 2, width)
    ) / (2 * eps)
    np.testing.assert_allclose(g @ v, fd, rtol=1e-6)


@pytest.mark.parametrize("size", [10, 5000])
@pytest.mark.parametrize("jit", [False, "strict"])
def test_a_mask_of_a_write_is_taped_whole(size, jit):
    x = np.random.default_rng(7).normal(size=size)
    v = np.random.default_rng(8).normal(size=size)
    g = s2sad.grad(mask_read_for_shape, jit=jit)(x, 3)
    eps = 1e-7
    fd = (mask_read_for_shape(x + eps * v, 3) - mask_read_for_shape(x - eps * v, 3)) / (2 * eps)
    np.testing.assert_allclose(g @ v, fd, rtol=1e-5)

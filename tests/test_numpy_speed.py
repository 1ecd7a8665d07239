"""NumPy mode's cheaper adjoints give the same numbers: contractions through BLAS (einsum_vjp
with a path), a product of a value with itself doubled once, the sign of a subtraction's
cotangent applied after its sum, and slices of an array added into its adjoint in place."""

import numpy as np
import pytest

import s2sad
from conftest import check_vjp


def _fd_grad(f, x, eps=1e-6):
    out = np.zeros_like(x)
    flat = out.reshape(-1)
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = eps
        e = e.reshape(x.shape)
        flat[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return out


# ----------------------------------------------------------------------------- einsum through BLAS


def test_einsum_matrix_product_large_enough_for_blas():
    rng = np.random.default_rng(0)
    a, b, w = rng.normal(size=(60, 50)), rng.normal(size=(50, 40)), rng.normal(size=(60, 40))

    def f(a, b, w):
        return np.sum(w * np.einsum("ij,jk->ik", a, b))

    da, db = s2sad.grad(f, wrt=("a", "b"))(a, b, w)
    np.testing.assert_allclose(da, w @ b.T, rtol=1e-12)
    np.testing.assert_allclose(db, a.T @ w, rtol=1e-12)


def test_einsum_diagonal_large_enough_for_a_path():
    rng = np.random.default_rng(7)
    a, b, w = rng.normal(size=(400, 400)), rng.normal(size=(400, 300)), rng.normal(size=300)

    def f(a, b, w):
        return np.sum(w * np.einsum("ii,ij->j", a, b))

    da, db = s2sad.grad(f, wrt=("a", "b"))(a, b, w)
    np.testing.assert_allclose(da, np.diag(b @ w), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(db, np.diag(a)[:, None] * w, rtol=1e-12)


@pytest.mark.parametrize(
    "spec, shapes",
    [
        ("bij,bjk->bik", [(3, 30, 40), (3, 40, 30)]),  # a batch of products
        ("ij,jk,kl->il", [(20, 20), (20, 20), (20, 15)]),  # three operands: a path
    ],
)
def test_einsum_large_contractions_match_finite_differences(spec, shapes):
    rng = np.random.default_rng(1)
    ops = [rng.normal(size=s) for s in shapes]

    if len(ops) == 2:

        def f(x, y):
            return np.einsum(spec, x, y)

    else:

        def f(x, y, z):
            return np.einsum(spec, x, y, z)

    for k in range(len(ops)):
        check_vjp(f, ops, wrt=k)


# ----------------------------------------------------------------------------- x * x, a - b


def test_square_by_product_is_doubled_once():
    rng = np.random.default_rng(2)
    x, w = rng.normal(size=(7, 5)), rng.normal(size=(7, 5))

    def f(x, w):
        y = x * x
        return np.sum(w * y)

    g = s2sad.grad(f)
    np.testing.assert_array_equal(g(x, w), 2 * (w * x))
    src = s2sad.source(g, x, w)
    # (written into a dead temporary's array where one fits, the product first: reuse.py)
    doubled = "dx = 2 * (dy * x)" in src or "dx = np.multiply(2, dx, out=spare(dx, dx))" in src
    assert doubled and "unbroadcast(dy * x" not in src


def test_subtraction_broadcast_sums_before_the_sign():
    rng = np.random.default_rng(3)
    x, m = rng.normal(size=(4, 3, 6)), rng.normal(size=(4, 3, 1))

    def f(x, m):
        c = x - m
        return np.sum(c**3)

    g = s2sad.grad(f, wrt=("x", "m"))
    dx, dm = g(x, m)
    np.testing.assert_allclose(dm, -np.sum(3 * (x - m) ** 2, axis=2, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(dx, 3 * (x - m) ** 2, rtol=1e-12)
    assert "-unbroadcast(dc, m)" in s2sad.source(g, x, m)


# ----------------------------------------------------------------------------- slices in place


def stencil(u, k):
    c = u[:-1, :-1]
    dv = u[1:, :-1] - c
    dh = u[:-1, 1:] - c
    return np.sum(0.5 * k * (dv * dv + dh * dh) + 0.25 * (c * c - 1.0) ** 2)


def test_slices_add_into_the_adjoint_in_place():
    rng = np.random.default_rng(4)
    u = rng.normal(size=(6, 5))
    before = u.copy()
    g = s2sad.grad(stencil)
    du = g(u, 0.7)
    np.testing.assert_allclose(du, _fd_grad(lambda v: stencil(v, 0.7), u), rtol=1e-7, atol=1e-8)
    np.testing.assert_array_equal(u, before)  # the input is never written
    src = s2sad.source(g, u, 0.7)
    assert "du[1:, :-1] += ddv_item" in src and "du[:-1, :-1] += dc" in src
    assert "dc -= unbroadcast(ddv, c)" in src
    # every call returns an array of its own
    again = g(u, 0.7)
    assert again is not du and not np.shares_memory(again, du)
    np.testing.assert_array_equal(again, du)


def loop_slices(u):
    total = 0.0
    for i in range(3):
        v = u * (i + 1.0)
        total = total + np.sum(v[1:] * v[:-1]) + np.sum(v[:, 1:] ** 3)
    return total + np.sum(u[2:, 0])


def test_slices_in_place_inside_a_loop_and_with_an_integer():
    rng = np.random.default_rng(5)
    u = rng.normal(size=(5, 4))
    du = s2sad.grad(loop_slices)(u)
    np.testing.assert_allclose(du, _fd_grad(loop_slices, u), rtol=1e-7, atol=1e-7)


def test_slice_cotangent_passed_through_is_not_written():
    """The first slice's cotangent is the seed itself (a sum's broadcast); adding the second
    slice in place must write only into the fresh adjoint of u."""
    rng = np.random.default_rng(6)
    u = rng.normal(size=(4, 4))

    def f(u):
        a = u[1:, :]
        b = u[:-1, :]
        return np.sum(a) + np.sum(b * b)

    du = s2sad.grad(f)(u)
    expected = np.zeros_like(u)
    expected[1:, :] += 1.0
    expected[:-1, :] += 2 * u[:-1, :]
    np.testing.assert_array_equal(du, expected)


def test_float32_slices_keep_float32():
    u = np.linspace(-1, 1, 30, dtype=np.float32).reshape(6, 5)
    du = s2sad.grad(stencil)(u, 0.7)
    assert du.dtype == np.float32 and du.shape == u.shape
    np.testing.assert_allclose(du, s2sad.grad(stencil)(u.astype(np.float64), 0.7), rtol=1e-5)


def test_in_place_only_into_arrays_made_for_the_adjoint():
    """`a = y + x` hands the same cotangent to y and x (no copy): adding into x's adjoint in
    place would change y's. Only adjoints computed by an arithmetic statement are updated."""
    rng = np.random.default_rng(8)
    x, w = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))

    def f(x, w):
        c = x[:, :1] * 2.0
        y = x * w
        a = y + x
        return np.sum(a * a) + np.sum(c)

    g = s2sad.grad(f)
    da = 2 * (x * w + x)
    expected = da * w + da
    expected[:, :1] += 2.0
    np.testing.assert_allclose(g(x, w), expected, rtol=1e-13)
    src = s2sad.source(g, x, w)
    assert "dx = dy" in src or "dx = unbroadcast(da, x)" in src  # x's adjoint is y's at first
    assert "dx = dx + unbroadcast(dy * w, x)" in src  # so the next one makes a new array
    assert "dx[:, :1] += " in src  # which the slice then adds into


def test_in_place_in_straight_code_matches_finite_differences_with_float32():
    def f(x, m):
        c = x - m
        d = c * c - x
        e = d[1:] - c[:-1]
        return np.sum(e * x[1:]) + np.sum(d)

    rng = np.random.default_rng(9)
    x, m = rng.normal(size=(5, 4)), rng.normal(size=(1, 4))
    check_vjp(f, [x, m], wrt=(0, 1))
    g32 = s2sad.grad(f, wrt=("x", "m"))(x.astype(np.float32), m.astype(np.float32))
    g64 = s2sad.grad(f, wrt=("x", "m"))(x, m)
    for a, b in zip(g32, g64):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)

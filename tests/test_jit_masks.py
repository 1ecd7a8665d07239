"""Masks of several axes and `...` under jit: Numba's own `a[M]` fails (an AssertionError) for a
boolean mask of more than one axis and `h[...]` has no lowering, so jitted code reads, writes
and adds by them through s2sad's helpers (`masked`, `set_masked`, `add_masked`; `h[...,]`).
One compiled gradient covers them all, against Python mode and finite differences."""

import numpy as np
import pytest

import s2sad


def masks(x, w):
    y = x * 1.0
    M = w > 0.3
    y[M] = x[M] ** 2 + w[M]
    y[M] += np.sin(x[M])
    L = w[:, :, 0] > 0.4
    y[L] = y[L] * 3.0
    z = y[...] * x[..., 0:1] + np.sum(x[L] ** 2)
    return np.sum(z * z)


def _fd(f, x, w, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up, w) - f(down, w)) / (2 * eps)
    return g


RNG = np.random.default_rng(7)
X, W = RNG.random((3, 4, 2)), RNG.random((3, 4, 2))


def test_masks_of_several_axes_and_ellipses_compile_with_pythons_numbers():
    python = s2sad.grad(masks, wrt=("x", "w"))(X, W)
    jitted = s2sad.grad(masks, wrt=("x", "w"), jit="strict")
    compiled = jitted(X, W)
    assert np.allclose(python[0], _fd(masks, X, W), rtol=1e-6, atol=1e-6)
    for p, j, like in zip(python, compiled, (X, W)):
        assert j.shape == like.shape and j.dtype == like.dtype
        np.testing.assert_allclose(j, p, rtol=1e-12, atol=1e-12)
    source = s2sad.source(jitted, X, W)
    assert "set_masked(y, M, " in source and "add_masked(" in source
    assert "masked(x, L)" in source and "y[...,]" in source and "(...,))" in source


def test_a_mask_of_another_shape_raises_numpys_index_error_compiled_too():
    with pytest.raises(IndexError, match="boolean index did not match"):
        s2sad.grad(masks, wrt=("x", "w"))(X, W[:, :3])
    numba = pytest.importorskip("numba")
    from s2sad.numba_helpers import masked, set_masked

    read = numba.njit(lambda a, m: masked(a, m))
    write = numba.njit(lambda a, m: set_masked(a, m, 1.0))
    np.testing.assert_array_equal(read(X, W > 0.5), X[W > 0.5])
    with pytest.raises(IndexError, match="boolean index did not match"):
        read(X, W[:, :3] > 0.5)
    with pytest.raises(IndexError, match="boolean index did not match"):
        write(X.copy(), W[:, :3, 0] > 0.5)
    # an integer index array of two axes goes through them too, compiled without Numba's
    # checks: its entries are checked as NumPy checks them (negative ones from the end)
    rows = np.array([[0, -1], [1, 2]])
    np.testing.assert_array_equal(read(X, rows), X[rows])
    for bad in (np.array([[0, 1], [len(X), 2]]), np.array([[0, -len(X) - 1], [1, 2]])):
        with pytest.raises(IndexError):
            read(X, bad)
        with pytest.raises(IndexError):
            write(X.copy(), bad)


def last_axes(x, m):
    y = x * 1.0
    y[..., m, 0] = 0.0
    return np.sum(x[..., m] ** 2) + np.sum(y * x)


def test_a_mask_after_an_ellipsis_is_checked_from_the_back():
    m = np.array([True, False, True, True])
    source = s2sad.source(s2sad.grad(last_axes, jit=True), np.ones((2, 4, 4)), m)
    assert "x[..., mask_fits(x, -1, m)]" in source and "y[..., mask_fits(y, -2, m), 0]" in source
    numba = pytest.importorskip("numba")
    from s2sad.numba_helpers import mask_fits

    fits = numba.njit(lambda a, axis, m: mask_fits(a, axis, m))
    np.testing.assert_array_equal(fits(X, -1, m[:2]), m[:2])  # X's last axis has 2
    np.testing.assert_array_equal(fits(X, -2, m), m)  # the axis before it, 4
    for axis, mask in ((-1, m[:3]), (-2, m[:2]), (-1, np.ones((4, 3), bool))):
        with pytest.raises(IndexError, match="boolean index did not match"):
            fits(X, axis, mask)

"""A value stored into an integer or boolean array is truncated (NumPy's cast): piecewise
constant, so no derivative flows through the store. Each store form is checked against central
finite differences of the primal, in reverse and forward mode, and in jitted code once."""

import numpy as np
import pytest

import s2sad

K = np.array([0.5, 1.3, 2.7, 0.8])
IDX = np.array([3, 1, 2, 2])


def loop_store(k, idx):  # the new user's case: an integer buffer filled in a loop
    y = np.zeros_like(idx)
    for i in range(idx.shape[0]):
        y[i] = k[i] * idx[i]
    return np.sum(y * k)


def stores_outside_loops(k, idx):
    y = idx.copy()
    y[0:2] = k[0:2] * 3.0
    y[idx > 2] = k[1] * 2.0
    y[idx[1:3]] = k[2:] * 1.5
    y[2] = k[3] * 4.0
    return np.sum(y * k) + np.sum(k * k)


def matrix_store(k, idx):
    y = np.zeros((2, 2), dtype=int)
    for i in range(2):
        for j in range(2):
            y[i, j] = k[2 * i + j] * idx[i + j]
    return np.sum(y @ k[:2]) * k[3]


def bool_store(k, idx):
    flags = np.zeros(4, dtype=bool)
    for i in range(4):
        flags[i] = k[i] - 1.0
    return np.sum(flags * k) + np.sum(np.where(flags, k * k, k))


def dtype_of_an_argument(k, idx):
    y = np.ones(4, dtype=idx.dtype)
    y[1:] = k[1:] * 2.7
    return np.sum(y * k)


# buffers made by arithmetic on integers keep an integer dtype (ranks.py follows the kind)
def times_one(k, idx):  # the user's spelling: `y = x0 * 1`
    y = idx * 1
    for i in range(idx.shape[0]):
        y[i] = k[i] * idx[i]
    return np.sum(y * k)


def sum_of_integers(k, idx):
    y = idx + np.arange(4)
    y[1:] = k[1:] * 2.7
    return np.sum(y * k)


def negated(k, idx):
    y = -idx
    y[1:] = k[1:] * 2.7
    return np.sum(y * k)


def affine(k, idx):
    y = 2 * idx - 1
    y[1:] = k[1:] * 2.7
    return np.sum(y * k)


def halved(k, idx):
    y = idx // 2
    y[1:] = k[1:] * 2.7
    return np.sum(y * k)


def mixed(k, idx):  # np.abs, np.maximum, a power and a mask: integers (True + 1 is 2)
    y = np.maximum(np.abs(idx - 3), 1) ** 2 % 5 + (idx > 2)
    y[1:] = k[1:] * 2.7
    return np.sum(y * k)


def unsigned(k, idx):
    y = idx.astype(np.uint64) + (idx > 2)
    y[1:] = k[1:] * 2.7
    return np.sum(y * k)


def unsigned_with_signed(k, idx):  # uint64 and int64 give float64 (and in Numba)
    y = idx.astype(np.uint64) + idx
    y[1:] = k[1:] * 2.7
    return np.sum(y * k)


def positions(k, idx):  # np.argsort's int64 positions, whatever they are of
    y = np.argsort(k)
    y[0] = k[1] * 5.0
    return np.sum(y * k)


def times_float(k, idx):  # floats: the store has its derivative
    y = idx * 1.0
    y[1:] = k[1:] * 2.7
    return np.sum(y * k)


def divided_by_one(k, idx):
    y = idx / 1
    for i in range(idx.shape[0]):
        y[i] = k[i] * idx[i]
    return np.sum(y * k)


# dtypes s2sad does not follow: the store's derivative is weighed by `inexact(y)` at run time
def _made_elsewhere(x0):
    return x0 * 1


def helper_result(k, idx):
    y = _made_elsewhere(idx)
    for i in range(idx.shape[0]):
        y[i] = k[i] * idx[i]
    return np.sum(y * k)


def where_of_integers(k, idx):
    y = np.where(idx > 1, idx, 0)
    y[1:] = k[1:] * 2.7
    return np.sum(y * k)


def cumsum_of_integers(k, idx):
    y = np.cumsum(idx)
    y[1:] = k[1:] * 2.7
    return np.sum(y * k)


def concatenated_integers(k, idx):
    y = np.concatenate([idx[:2], idx[2:]])
    y[1:] = k[1:] * 2.7
    return np.sum(y * k)


def _central(f, k, idx=IDX):
    eps = 1e-6
    return np.array([(f(k + eps * e, idx) - f(k - eps * e, idx)) / (2 * eps) for e in np.eye(4)])


@pytest.mark.parametrize(
    "f",
    [
        loop_store,
        stores_outside_loops,
        matrix_store,
        bool_store,
        dtype_of_an_argument,
        times_one,
        sum_of_integers,
        negated,
        affine,
        halved,
        mixed,
        unsigned,
        positions,
    ],
)
def test_store_into_integers_carries_no_derivative(f):
    _check_against_central_differences(f)


@pytest.mark.parametrize(
    "f", [helper_result, where_of_integers, cumsum_of_integers, concatenated_integers]
)
def test_store_into_integers_of_a_dtype_known_at_run_time(f):
    _check_against_central_differences(f)
    assert "* inexact(y)" in s2sad.source(s2sad.grad(f), K, IDX)
    floats = IDX.astype(float)  # the same code on floats: the store has its derivative
    np.testing.assert_allclose(
        s2sad.grad(f)(K, floats), _central(f, K, floats), rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("f", [where_of_integers, cumsum_of_integers, concatenated_integers])
@pytest.mark.parametrize("jit", [False, True])
def test_a_weighed_store_takes_its_cotangent_without_copies_or_a_dead_zeroing(f, jit):
    """`dy[1:] * inexact(y)` is a new array, made before dy[1:] is zeroed: no copy of the view
    under it (`dy[1:].copy()`, `snapshot(dy[1:])`); nothing reads dy afterwards, so neither the
    zeroing nor the `dy = as_accumulator(dy, y)` made for it is there (it was). The numbers:
    test_store_into_integers_of_a_dtype_known_at_run_time."""
    src = s2sad.source(s2sad.grad(f, jit=jit), K, IDX)
    # (jitted code may name the view first, `dy_view = dy[1:]`, so that a fused run reads it)
    named = "dy_view = dy[1:]" in src
    assert f"unbroadcast({'dy_view' if named else 'dy[1:]'} * inexact(y), y_mul)" in src
    assert "dy[1:].copy()" not in src and "snapshot(dy" not in src
    assert "as_accumulator(dy" not in src and "dy[1:] = 0.0" not in src


def scaled_by_an_argument(k, idx, n):
    y = idx * n
    y[1:] = k[1:] * 2.7
    return np.sum(y * k)


@pytest.mark.parametrize("n", [2, 2.0])
def test_store_into_a_buffer_an_int_or_float_argument_scales(n):
    def f(k, idx):
        return scaled_by_an_argument(k, idx, n)

    np.testing.assert_allclose(
        s2sad.grad(scaled_by_an_argument)(K, IDX, n), _central(f, K), atol=1e-6
    )


@pytest.mark.parametrize("f", [times_float, divided_by_one, unsigned_with_signed])
def test_store_into_floats_made_of_integers_keeps_its_derivative(f):
    _check_against_central_differences(f)
    assert "dy" in s2sad.source(s2sad.grad(f), K, IDX)  # the store's adjoint reads it


def _check_against_central_differences(f):
    expected = _central(f, K)
    value, g = s2sad.value_and_grad(f)(K, IDX)
    assert value == f(K, IDX)
    np.testing.assert_allclose(g, expected, atol=1e-6)
    assert g.dtype == K.dtype
    t = np.array([0.3, -1.1, 0.7, 2.0])
    _, tangent = s2sad.jvp(f)(K, IDX, tangent=t)
    np.testing.assert_allclose(tangent, expected @ t, atol=1e-6)


def test_store_into_integers_leaves_no_adjoint_in_the_source():
    source = s2sad.source(s2sad.grad(loop_store), K, IDX)
    assert "dy" not in source and "for i in reversed" not in source, source
    # a float buffer still has its store's adjoint
    assert "dy_mul = dy[i]" in s2sad.source(s2sad.grad(loop_store), K, IDX.astype(float))


def test_store_into_integers_jitted():
    g = s2sad.grad(loop_store, jit=True)(K, IDX)
    np.testing.assert_allclose(g, _central(loop_store, K), atol=1e-6)


def float_update(k, idx):
    x = idx.copy()
    for _ in range(2):
        x += 0.1 * k * x  # NumPy: UFuncTypeError (same_kind casting)
    return np.sum(x**2)


def divided(k, idx):
    x = np.zeros_like(idx)
    x /= 2
    return np.sum(x * k)


def element_update(k, idx):
    x = idx.copy()
    x += k[0]  # an element of a float array: UFuncTypeError as a float literal
    return np.sum(x * k)


def shadowing(k, IDX):  # a parameter named as a global array: its `.copy()` is the argument's
    x = IDX.copy()
    x += k[0]
    return np.sum(x * k)


def integer_update(k, idx):
    x = idx.copy()
    x += idx  # integers into integers: NumPy runs it
    return np.sum(x * k)


@pytest.mark.parametrize("f", [float_update, divided, element_update, shadowing])
@pytest.mark.parametrize("jit", [False, True])
def test_float_update_of_integers_raises_as_numpy_does(f, jit):
    with pytest.raises(TypeError):
        f(K, IDX)
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=r"UFuncTypeError.*same_kind") as err:
        s2sad.value_and_grad(f, jit=jit)(K, IDX)
    assert "test_integer_stores.py" in str(err.value) and "astype(float)" in str(err.value)


def scalar_update(k, idx):
    x = idx.copy()
    x += k  # k differentiated, so a float: UFuncTypeError as a float literal
    return np.sum(x * k)


def test_float_number_update_of_integers_raises_as_numpy_does():
    with pytest.raises(TypeError):
        scalar_update(0.3, IDX)
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=r"`x \+= k`.*same_kind"):
        s2sad.grad(scalar_update)(0.3, IDX)


def scaled_update(w, k, idx):
    x = idx.copy()
    x += k  # an int `k`, not differentiated: NumPy runs it
    return np.sum(x * w)


def test_int_number_update_of_integers_is_kept():
    g = s2sad.grad(scaled_update)(K, 2, IDX)
    np.testing.assert_allclose(g, IDX + 2)


def test_float_number_not_differentiated_is_refused_at_the_call_that_passes_it():
    grad = s2sad.grad(scaled_update)  # (the key ranks 2 and 0.3 alike: one transform)
    np.testing.assert_allclose(grad(K, 2, IDX), IDX + 2)
    for k in (0.3, np.float32(0.3), np.array(0.3)):
        with pytest.raises(TypeError):
            scaled_update(K, k, IDX)
        with pytest.raises(s2sad.UnsupportedSyntaxError, match=r"`x \+= k`.*same_kind"):
            grad(K, k, IDX)
    np.testing.assert_allclose(grad(K, np.int32(3), IDX), IDX + 3)
    np.testing.assert_allclose(grad(K, 0.3, IDX * 1.0), IDX + 0.3)  # a float array: kept
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="same_kind"):  # (not its 2nd try)
        s2sad.hessian(scaled_update)(K, 0.3, IDX)


def test_updates_that_numpy_runs_are_kept():
    np.testing.assert_allclose(s2sad.grad(integer_update)(K, IDX), 2 * IDX)
    floats = IDX.astype(float)  # a float array: updated as before
    g = s2sad.grad(float_update)(K, floats)
    np.testing.assert_allclose(g, _central(float_update, K, floats), rtol=1e-6)

"""The Numba forms jitted code calls where Numba lacks NumPy's (pipeline/lower.py rewrites the
calls): reductions over an axis or with `keepdims` (`max_over`, `min_over`, `prod_over`,
`mean_over`, `sum_over`), their adjoints, `np.concatenate` of a list, `@` of stacks. Each gives
NumPy's numbers, dtypes and shapes, and a jitted gradient the Python version's. One compile per
test: each costs seconds."""

import warnings

import numpy as np
import pytest

import s2sad
from conftest import check_vjp

numba = pytest.importorskip("numba")

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def test_lowered_reductions_give_numpys_values_dtypes_and_shapes():
    from s2sad.numba_helpers import max_over, mean_over, min_over, prod_over, sum_over

    def reductions(x, v):
        return (
            max_over(x, 1, True),
            max_over(x, -1, False),
            min_over(x, 0, False),
            min_over(x, None, True),
            prod_over(x, 2, True),
            prod_over(x, -3, False),
            mean_over(x, 1, False),
            mean_over(x, 0, True),
            sum_over(x, 2, True),
            sum_over(x, None, True),
            max_over(v, 0, False),  # a vector over its axis: a number, as in NumPy
            min_over(v, 0, True),
        )

    numpy = lambda x, v: (
        np.max(x, axis=1, keepdims=True),
        np.max(x, axis=-1),
        np.min(x, axis=0),
        np.min(x, keepdims=True),
        np.prod(x, axis=2, keepdims=True),
        np.prod(x, axis=-3),
        np.mean(x, axis=1),
        np.mean(x, axis=0, keepdims=True),
        np.sum(x, axis=2, keepdims=True),
        np.sum(x, keepdims=True),
        np.max(v, axis=0),
        np.min(v, axis=0, keepdims=True),
    )
    compiled = numba.njit(error_model="numpy")(reductions)  # as jit.py compiles gradients
    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32):
        x = rng.standard_normal((3, 4, 5)).astype(dtype)
        x[1, 2, 3] = np.nan  # spreads through max and min, as in NumPy
        v = rng.standard_normal(6).astype(dtype)
        for got, want in zip(compiled(x, v), numpy(x, v)):
            assert np.shape(got) == np.shape(want)
            if np.ndim(want):  # (Numba hands a number back as a Python float)
                assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == np.float32 else 1e-14)
        # the same helpers' NumPy forms (what a fallback runs) are NumPy's calls
        for got, want in zip(reductions(x, v), numpy(x, v)):
            np.testing.assert_array_equal(got, want)


def axis_reductions(x, w):
    m = np.max(x, axis=1, keepdims=True)  # ties below share the cotangent
    n = np.min(x, axis=0)
    p = np.prod(x, axis=-1)
    q = np.mean(x * w, axis=0, keepdims=True)
    s = np.sum(x, axis=1, keepdims=True)
    c = np.concatenate([x, x * w, m], axis=1)
    return np.sum(m * s) + np.sum(n**2) + np.sum(p) + np.sum(q * x) + np.sum(c**2)


def test_axis_reductions_and_concatenate_compile_and_match_python_mode():
    rng = np.random.default_rng(1)
    x = np.round(rng.standard_normal((4, 5)), 1)
    x[2, 1] = x[2, 3] = 3.0  # a tie for row 2's max
    w = rng.standard_normal(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", s2sad.jit.JitFallbackWarning)
        value, grads = s2sad.value_and_grad(axis_reductions, wrt=(0, 1), jit="strict")(x, w)
    want_value, want = s2sad.value_and_grad(axis_reductions, wrt=(0, 1))(x, w)
    assert value == pytest.approx(want_value, rel=1e-13)
    for g, h in zip(grads, want):
        assert g.shape == h.shape and g.dtype == h.dtype
        np.testing.assert_allclose(g, h, rtol=1e-12, atol=1e-12)
    text = s2sad.source(s2sad.grad(axis_reductions, wrt=(0, 1), jit="strict"), x, w)
    assert "max_over(x, 1, True)" in text and "np.concatenate((x," in text
    # away from the tie, the Python mode is right by central differences
    x[2, 1] = 2.5
    check_vjp(axis_reductions, (x, w), wrt=(0, 1))


def stacked(A, B, C):
    return np.sum((A @ B) ** 2) + np.sum(np.tanh(A @ C)) + np.sum(np.matmul(C.T, B[1:3]))


def test_matmul_of_stacks_compiles_and_matches_python_mode():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((4, 3, 3))
    B = rng.standard_normal((4, 3, 5))
    C = rng.standard_normal((3, 5))
    got = s2sad.grad(stacked, wrt=(0, 1, 2), jit="strict")(A, B, C)
    want = s2sad.grad(stacked, wrt=(0, 1, 2))(A, B, C)
    for g, h in zip(got, want):
        assert g.shape == h.shape
        np.testing.assert_allclose(g, h, rtol=1e-12, atol=1e-12)


def negative_powers(x):
    return np.sum(x**-1) + np.sum(x**-2) + np.sum(np.exp(x) ** -3)


def test_a_negative_integer_power_of_zero_is_inf_as_in_python_mode():
    # Numba raises ZeroDivisionError for 0.0 ** -1 with an integer exponent; NumPy gives inf
    x = np.array([0.0, 2.0, -1.5])
    with np.errstate(divide="ignore", invalid="ignore"):
        want = s2sad.value_and_grad(negative_powers)(x)
        got = s2sad.value_and_grad(negative_powers, jit="strict")(x)
    np.testing.assert_allclose(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1])
    assert np.isinf(got[1][0])
    y = np.array([0.5, 2.0, -1.5])
    np.testing.assert_allclose(
        s2sad.grad(negative_powers, jit="strict")(y), s2sad.grad(negative_powers)(y), rtol=1e-13
    )


def slices_energy(u, k):
    c = u[:-1, :-1]
    dv = u[1:, :-1] - c
    dh = u[:-1, 1:] - c
    return np.sum(0.5 * k * (dv * dv + dh * dh) + 0.25 * (c * c - 1.0) ** 2)


def test_slice_cotangents_add_into_one_array_in_place():
    # the first slice's cotangent makes du (an array of zeros of its own); the others add into
    # it (add_at), not into a fresh array each (du = du + getitem_vjp(...))
    u = np.random.default_rng(3).normal(size=(7, 6))
    g = s2sad.grad(slices_energy, wrt="u", jit="strict")
    np.testing.assert_allclose(g(u, 0.7), s2sad.grad(slices_energy, wrt="u")(u, 0.7), rtol=1e-13)
    text = s2sad.source(g)
    assert text.count("du = getitem_vjp(") == 1 and "du = du + getitem_vjp(" not in text
    assert text.count("add_at(du, ") == 2


def joined_twice(x):
    return np.sum(np.concatenate((x, x)) ** 2)


def joined_list(x, y):
    return np.sum(np.concatenate([x, y * 2.0]) ** 2)


@pytest.mark.parametrize("f, args", [(joined_twice, 1), (joined_list, 2)])
def test_concatenate_with_its_axis_left_out_compiles(f, args):
    # the omitted axis reaches the Numba form of concatenate_vjp as Python's 0, not a type
    xs = [np.array([0.5, -1.2, 0.3]), np.array([2.0, 0.1])][:args]
    wrt = tuple(range(args))
    got = s2sad.grad(f, wrt=wrt, jit="strict")(*xs)
    want = s2sad.grad(f, wrt=wrt)(*xs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    np.testing.assert_allclose(want[0], 4 * xs[0] if args == 1 else 2 * xs[0], rtol=1e-12)


def summed_empty_rows(x, k):
    return np.sum(np.sum(x[k:k], axis=0) * x[0])


def averaged_empty_rows(x, k):
    return np.sum(np.mean(x[k:k], axis=0) * x[0])


def beyond_the_axes(x):
    return np.sum(np.max(x, axis=-3) * x[0])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("f", [summed_empty_rows, averaged_empty_rows])
def test_a_fold_over_an_empty_axis_gives_numpys_identity_not_memory_past_the_array(f):
    x = np.arange(12.0).reshape(4, 3) + 1
    want_value, want_grad = s2sad.value_and_grad(f)(x, 2)
    value, grad = s2sad.value_and_grad(f, jit="strict")(x, 2)
    np.testing.assert_array_equal(value, want_value)  # 0.0, or nan for the mean
    np.testing.assert_array_equal(grad, want_grad)


def test_a_fold_over_an_axis_the_array_lacks_raises():
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(np.exceptions.AxisError):
        s2sad.grad(beyond_the_axes)(x)
    with pytest.raises(np.exceptions.AxisError, match="out of bounds"):
        s2sad.grad(beyond_the_axes, jit="strict")(x)


def test_var_std_and_integer_sums_give_numpys_values_dtypes_and_shapes():
    from s2sad.numba_helpers import std_over, sum_over, var_over

    def spreads(x, m):
        return (
            var_over(x, 1, False, 0),
            var_over(x, -1, True, 1),
            std_over(x, 0, True, 0),
            std_over(x, None, False, 1),
            var_over(x, None, True, 0),
            sum_over(m, 0, True),  # integers kept: Numba's sums, NumPy's dtype
            sum_over(m, None, True),
            std_over(x[:1], 0, False, 1),  # no degrees of freedom left: nan, as NumPy's
        )

    numpy = lambda x, m: (
        np.var(x, axis=1),
        np.var(x, axis=-1, keepdims=True, ddof=1),
        np.std(x, axis=0, keepdims=True),
        np.std(x, ddof=1),
        np.var(x, keepdims=True),
        np.sum(m, axis=0, keepdims=True),
        np.sum(m, keepdims=True),
        np.std(x[:1], axis=0, ddof=1),
    )
    compiled = numba.njit(error_model="numpy")(spreads)
    rng = np.random.default_rng(2)
    m = rng.integers(-5, 5, (3, 4))
    for dtype in (np.float64, np.float32):
        x = rng.standard_normal((3, 4)).astype(dtype) + 2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            wanted = numpy(x, m)
        for got, want in zip(compiled(x, m), wanted):
            assert np.shape(got) == np.shape(want)
            if np.ndim(want):
                assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=3e-6 if dtype == np.float32 else 1e-13)


def reduction_methods(x, m):
    a = x.mean(axis=0) * x.sum(axis=1, keepdims=True)
    b = x.max(axis=1) + x.min(axis=0, keepdims=True).T[:, 0] @ np.ones((x.shape[1], 4))
    c = x.prod(axis=0) * x.std(axis=-1, keepdims=True, ddof=1)
    d = x.var(axis=1) + np.var(x, axis=0, keepdims=True)[0, :4] + np.std(x, ddof=1)
    e = np.sum(x * m.sum(axis=0, keepdims=True)) * np.sum(m, axis=1, keepdims=True)
    f = np.linalg.norm(x, axis=-1, keepdims=True) * x  # (norm_over: Numba's takes no axis)
    return np.sum(a**2) + np.sum(b * d) + np.sum(c) + np.sum(e) + np.sum(f)


def test_reduction_methods_var_std_and_integer_sums_compile_and_match_python_mode():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 5)) + 2.0
    m = rng.integers(-3, 4, (4, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", s2sad.jit.JitFallbackWarning)
        value, grad = s2sad.value_and_grad(reduction_methods, jit="strict")(x, m)
    want_value, want = s2sad.value_and_grad(reduction_methods)(x, m)
    assert value == pytest.approx(want_value, rel=1e-13)
    assert grad.shape == want.shape and grad.dtype == want.dtype
    np.testing.assert_allclose(grad, want, rtol=1e-12, atol=1e-12)
    text = s2sad.source(s2sad.grad(reduction_methods, jit="strict"), x, m)
    assert "mean_over(x, 0, False)" in text and "std_over(x, -1, True, 1)" in text
    assert "norm_over(x, -1, True)" in text
    check_vjp(reduction_methods, (x, m))


def outer_of_literals(x):  # Numba compiles np.outer of a list literal: the adjoint takes it too
    return np.sum(np.outer(x, [0.3, 1.2]) ** 2) + np.sum(np.outer([2.0, -1.0], x) * x)


def test_the_outer_product_of_a_list_literal_compiles_and_matches_python_mode():
    x = np.array([0.5, -0.7, 1.1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", s2sad.jit.JitFallbackWarning)
        got = s2sad.grad(outer_of_literals, jit="strict")(x)
    np.testing.assert_allclose(got, s2sad.grad(outer_of_literals)(x), rtol=1e-13)
    check_vjp(outer_of_literals, (x,))


def numbers_and_constants(t):
    return (t + np.pi) + (np.pi - t) * (t + np.e) + t * np.pi


def test_a_tangent_beside_numpys_constants_compiles_for_a_number_and_a_0d_array():
    """`t + np.pi`'s tangent is `t_dot`: np.pi is a number (its rank was unknown, and the tangent
    `np.broadcast_to(t_dot, np.shape(s))` with shape `()` crashed Numba: "list index out of
    range"). A number and a 0-d array, as Python mode gives it and against the derivative."""
    jvp = s2sad.jvp(numbers_and_constants, jit="strict")
    assert "broadcast" not in s2sad.source(jvp)
    for t in (1.5, np.array(1.5)):
        value, tangent = jvp(t, tangent=1.0)
        want = s2sad.jvp(numbers_and_constants)(t, tangent=1.0)
        np.testing.assert_allclose([value, tangent], want, rtol=1e-14)
        np.testing.assert_allclose(tangent, 1 - (t + np.e) + (np.pi - t) + np.pi, rtol=1e-14)
        assert np.shape(tangent) == ()


def test_broadcast_like_the_numba_form_of_an_elementwise_tangents_broadcast():
    """What jitted code calls for `np.broadcast_to(t, np.shape(x))` (the tangent of `t + c` where
    c's rank is not known, as in an emitted module): NumPy's values for a number and arrays."""
    from s2sad.numba_helpers import broadcast_like

    forms = numba.njit(error_model="numpy")(
        lambda t, x, v, m: (
            broadcast_like(t, x),
            broadcast_like(t, m),
            broadcast_like(v, m),
            broadcast_like(t, np.zeros(())),
        )
    )
    number, full, rows, zero_d = forms(2.0, 3.0, np.arange(3.0), np.ones((2, 3)))
    assert number == 2.0 and zero_d == 2.0
    np.testing.assert_array_equal(full, np.full((2, 3), 2.0))
    np.testing.assert_array_equal(rows, np.broadcast_to(np.arange(3.0), (2, 3)))

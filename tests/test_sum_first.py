"""NumPy mode sums a matrix product's right cotangent over the columns its operand was broadcast
along before the product (pipeline/sum_first.py, `matmul_vjp_rhs_to`): GMM's `Q @ (x.T - mu)`.
The numbers agree with the product-then-sum's within rounding, with finite differences and with
jitted code; the rewrite is left out where the cotangent is read twice or its operands change."""

from __future__ import annotations

import ast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from s2sad.pipeline.sum_first import sum_first
from s2sad.rules.common import unbroadcast
from s2sad.rules.products import matmul_vjp_rhs, matmul_vjp_rhs_to
from s2sad.transformed import Transformed
from test_jit_fuse import fd_grad


def centred_products(Q, mu, x):
    centred = x.T[None, :, :] - mu[:, :, None]
    return np.sum(np.tanh(Q @ centred))


def both_centred(Q, mu, x):
    centred = x.T[None, :, :] - mu[:, :, None]
    return np.sum(np.tanh(Q @ centred))


def _inputs(K=3, d=2, n=7, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(K, d, d)), rng.normal(size=(K, d)), rng.normal(size=(n, d))


def test_the_cotangent_of_mu_sums_first_and_matches():
    Q, mu, x = _inputs()
    g = s2sad.grad(centred_products, wrt=("Q", "mu"))
    dQ, dmu = g(Q, mu, x)
    text = s2sad.source(g, Q, mu, x)
    assert "matmul_vjp_rhs_to(" in text and "matmul_vjp_rhs(" not in text
    fresh = Transformed(centred_products, ("Q", "mu"), "grad")  # no reuse: the product, then sum
    assert "matmul_vjp_rhs_to(" not in s2sad.source(fresh, Q, mu, x)
    want_Q, want_mu = fresh(Q, mu, x)
    np.testing.assert_array_equal(dQ, want_Q)
    np.testing.assert_allclose(dmu, want_mu, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(dmu, fd_grad(centred_products, (Q, mu, x), 1), rtol=1e-6)
    jitted = s2sad.grad(centred_products, wrt=("Q", "mu"), jit=True)
    for a, b in zip(jitted(Q, mu, x), (dQ, dmu)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    assert dmu.shape == mu.shape and dmu.dtype == mu.dtype


def test_float32_stays_float32():
    Q, mu, x = (v.astype(np.float32) for v in _inputs(seed=3))
    dmu = s2sad.grad(centred_products, wrt="mu")(Q, mu, x)
    (want,) = Transformed(centred_products, ("mu",), "grad")(Q, mu, x)
    assert dmu.dtype == np.float32
    np.testing.assert_allclose(dmu, want, rtol=1e-5, atol=1e-6)


def test_a_cotangent_read_twice_is_the_product():
    """With x differentiated too, the product's cotangent feeds both unbroadcasts: kept whole."""
    Q, mu, x = _inputs(seed=1)
    g = s2sad.grad(both_centred, wrt=("mu", "x"))
    assert "matmul_vjp_rhs_to(" not in s2sad.source(g, Q, mu, x)
    dmu, dx = g(Q, mu, x)
    np.testing.assert_allclose(dmu, fd_grad(both_centred, (Q, mu, x), 1), rtol=1e-6)
    np.testing.assert_allclose(dx, fd_grad(both_centred, (Q, mu, x), 2), rtol=1e-6)


def _pass(text: str) -> str:
    (block,) = sum_first([ast.parse(text).body])
    return "\n".join(ast.unparse(s) for s in block)


def test_the_pass_fuses_only_a_single_read_with_its_operands_unchanged():
    fused = _pass("d = matmul_vjp_rhs(g, a, b)\nc = 2\ndy = -unbroadcast(d, y)")
    assert fused == "c = 2\ndy = -matmul_vjp_rhs_to(g, a, b, y)"
    for between in ("g += 1", "a[0] = 1", "add_at(b, 0, 1)", "g = h"):
        text = f"d = matmul_vjp_rhs(g, a, b)\n{between}\ndy = unbroadcast(d, y)"
        assert "matmul_vjp_rhs_to" not in _pass(text), between
    twice = "d = matmul_vjp_rhs(g, a, b)\ndy = unbroadcast(d, y)\ndz = unbroadcast(d, z)"
    assert "matmul_vjp_rhs_to" not in _pass(twice)
    summed = "d = matmul_vjp_rhs(g, a, b)\ndy = np.sum(d)"
    assert "matmul_vjp_rhs_to" not in _pass(summed)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(1, 3), min_size=0, max_size=2),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 4),
    st.data(),
)
def test_matmul_vjp_rhs_to_is_the_product_then_the_sum(batch, p, m, n, data):
    """`b` broadcast from any `y` (its last axis of length 1 or n, leading axes dropped or of
    length 1), `a` with or without the batch axes: the same cotangent of `y`."""
    rng = np.random.default_rng(len(batch) + 10 * n)
    b_shape = (*batch, m, n)
    y_shape = [data.draw(st.sampled_from([1, k])) for k in b_shape]
    y_shape = tuple(y_shape[data.draw(st.integers(0, len(batch))) :])
    a = rng.normal(size=(*(batch if data.draw(st.booleans()) else ()), p, m))
    y = rng.normal(size=y_shape)
    b = np.broadcast_to(y, b_shape) + 0.0
    g = rng.normal(size=np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (p, n))
    got = matmul_vjp_rhs_to(g, a, b, y)
    want = unbroadcast(matmul_vjp_rhs(g, a, b), y)
    assert got.shape == y.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shapes", [((4,), (4, 3), (3,)), ((2, 4), (4,), (4,))])
def test_matmul_vjp_rhs_to_of_vectors_is_the_product_then_the_sum(shapes):
    rng = np.random.default_rng(2)
    a_shape, b_shape, y_shape = shapes
    a, b, y = (rng.normal(size=s) for s in shapes)
    g = rng.normal(size=np.shape(a @ b))
    np.testing.assert_allclose(
        matmul_vjp_rhs_to(g, a, b, y), unbroadcast(matmul_vjp_rhs(g, a, b), y), rtol=1e-12
    )

"""Index arrays in the rank analysis (s2sad/pipeline/ranks.py): an integer or boolean array
argument's dtype kind is part of the transform's key with its rank, so `a[:, idx]` has a known
rank (`a.ndim - 1 + idx.ndim` for an integer `idx`, `a.ndim - idx.ndim + 1` for a boolean one)
and what follows from it fuses in jitted code (GMM's `padded[:, tril_index]`); a call with an
index of another kind or rank gets its own transform. Also the Numba forms GMM's gradient
spends its time in: `unbroadcast` summing over any axes, and products of stacks of matrices."""

from __future__ import annotations

import ast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from s2sad.pipeline.ranks import infer_ranks, rank_of_argument
from s2sad.rules.common import unbroadcast

from test_jit_fuse import assert_close, fd_grad, fused_ran, rng

numba = pytest.importorskip("numba")
pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


# ----------------------------------------------------------------------------- the rank rule


@st.composite
def _indexings(draw):
    """An array of sides 3 and an index of slices, None, ints, `...` and integer or boolean
    arrays (of sides 3, the boolean ones with three True entries, so that all broadcast)."""
    base = draw(st.integers(0, 4))
    items, values, params = [], {}, {}
    for k in range(draw(st.integers(1, 4))):
        item = draw(st.sampled_from(["slice", "none", "int", "ints", "bools", "ellipsis"]))
        if item == "ellipsis" and "..." in items:
            continue
        if item in ("ints", "bools"):
            r = draw(st.integers(0 if item == "ints" else 1, 3))
            name = f"i{k}"
            if item == "ints":
                value = np.full((3,) * r, draw(st.integers(0, 2)))
            else:
                value = np.zeros(3**r, dtype=bool)
                value[[0, 1, 2] if r == 1 else [0, 4, 8]] = True
                value = value.reshape((3,) * r)
            values[name], params[name] = value, rank_of_argument(value)
            items.append(name)
        else:
            items.append({"slice": ":", "none": "None", "int": "1", "ellipsis": "..."}[item])
    return base, items, values, params


@settings(max_examples=200, deadline=None)
@given(_indexings())
def test_the_rank_of_an_array_index_is_numpys(case):
    base, items, values, params = case
    a = np.zeros((3,) * base)
    text = f"y = a[{', '.join(items)}]"
    try:
        expected = eval(text.split(" = ")[1], {"a": a, **values}).ndim
    except IndexError:
        return  # too many indices: an error in NumPy, whatever the analysis says
    ranks = infer_ranks(ast.parse(text).body, {"a": base, **params})
    assert ranks.get("y") == expected, text


def test_an_index_of_unknown_kind_leaves_the_rank_unknown():
    """A rank-1 value that is not known to be an array of integers or booleans may be a tuple
    (`x.shape`: a multi-axis index); a 0-d boolean array adds an axis: both stay unknown."""
    body = ast.parse("s = b.shape\ny = a[s]\nz = a[m]\nw = a[:, c]").body
    params = {"a": 2, "b": 2, "m": rank_of_argument(np.array(True)), "c": 1}
    ranks = infer_ranks(body, params)
    assert ranks.get("y") is None and ranks.get("z") is None and ranks.get("w") is None
    assert rank_of_argument(np.zeros(3)) == 1 and rank_of_argument(np.zeros(3, int)) == (1, "i")


def test_masks_made_in_the_function_are_boolean():
    body = ast.parse("m = x > 0.0\nk = ~m & (y < 1.0)\nz = a[k]\nt = a[:, idx[0]]").body
    ranks = infer_ranks(body, {"a": 3, "x": 2, "y": 2, "idx": (3, "i")})
    assert ranks.get("z") == 2 and ranks.get("t") == 4


# ----------------------------------------------------------------------------- one function,
# indices of other kinds and ranks: each call its own transform, the right numbers


def gather(a, idx):
    t = a[:, idx]
    u = np.tanh(t) * t + 0.5 * t
    return np.sum(u * u)


A = rng().normal(size=(3, 4, 5))
INDICES = [
    np.array([0, 2, 3]),  # (3, 3, 5)
    np.array([True, False, True, True]),  # (3, 3, 5)
    np.array([[0, 1], [3, 3]]),  # (3, 2, 2, 5)
    np.eye(4, 5, dtype=bool),  # (3, 4)
    np.array([[0, 1], [3, 3]], dtype=np.uint8),  # (3, 2, 2, 5)
]


@pytest.mark.parametrize("jit", [False, True])
def test_an_index_of_another_kind_or_rank_is_never_served_stale_code(jit):
    """(Numba compiles no 2-D mask after a slice, `a[:, mask]`: that one runs in Python.)"""
    g = s2sad.value_and_grad(gather, jit=jit)
    transforms = []
    for order in (INDICES, INDICES[::-1]):
        for idx in order:
            value, grad = g(A, idx)
            e_value, e_grad = s2sad.value_and_grad(gather)(A, idx)
            assert value == pytest.approx(gather(A, idx), rel=1e-12)
            assert value == pytest.approx(e_value, rel=1e-12)
            assert grad.shape == A.shape and grad.dtype == A.dtype
            assert_close(grad, e_grad, rtol=1e-10)
            np.testing.assert_allclose(grad, fd_grad(gather, (A, idx), 0), rtol=1e-6, atol=1e-7)
            transforms.append(g.compiled)
            if jit and not (idx.dtype == bool and idx.ndim == 2):
                assert fused_ran(g)
                rank = A.ndim - 1 + idx.ndim if idx.dtype != bool else A.ndim - idx.ndim + 1
                source = s2sad.source(g, A, idx)
                assert f"for i{rank - 1} in range(" in source
                assert f"for i{rank} in range(" not in source
    # one transform per kind and rank (unsigned integers index as signed ones do)
    assert len({id(c) for c in transforms}) == len(INDICES) - 1


def lower_gather(icf, x, tril_index):
    """GMM's inverse-covariance factors built by a 2-D integer index, and what follows."""
    K, d = icf.shape[0], x.shape[1]
    lower = icf[:, d:]
    padded = np.concatenate([lower, np.zeros((K, 1))], axis=1)
    Q = np.exp(icf[:, :d])[:, :, None] * np.eye(d) + padded[:, tril_index]
    centred = x.T[None, :, :] - icf[:, :d, None]
    Qx = Q @ centred
    terms = np.sum(icf[:, :d], axis=1)[:, None] - 0.5 * np.sum(Qx**2, axis=1)
    return np.sum(np.exp(terms) * terms)


def _tril_index(d):
    index = np.full((d, d), d * (d - 1) // 2)
    rows, cols = np.tril_indices(d, -1)
    index[rows, cols] = np.arange(d * (d - 1) // 2)
    return index


def test_what_follows_a_two_dimensional_integer_index_fuses():
    d, K = 3, 2
    args = (rng().normal(scale=0.3, size=(K, d + 3)), rng(1).normal(size=(4, d)), _tril_index(d))
    g = s2sad.value_and_grad(lower_gather, jit="strict")
    value, grad = g(*args)
    assert fused_ran(g)
    source = s2sad.source(g, *args)
    assert "Qx[i0, i1, i2] ** 2" in source  # the sum over Qx's axis 1, in a loop nest
    assert "dQx[i0, i1, i2] = " in source  # and its cotangent
    e_value, e_grad = s2sad.value_and_grad(lower_gather)(*args)
    assert value == pytest.approx(e_value, rel=1e-12)
    assert_close(grad, e_grad, rtol=1e-10)
    np.testing.assert_allclose(grad, fd_grad(lower_gather, args, 0), rtol=1e-6, atol=1e-7)


# ----------------------------------------------------------------------------- Numba forms


@numba.njit(error_model="numpy")  # as jit.py compiles gradients (their helpers' code)
def _jitted_unbroadcast(g, x):
    return unbroadcast(g, x)


@st.composite
def _broadcasts(draw):
    """(g, x): x of rank 0 to 3 with axes of length 1, g its broadcast with leading axes."""
    rank = draw(st.integers(0, 3))
    full = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    x_shape = tuple(draw(st.sampled_from([n, 1])) for n in full)
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=3 - rank)))
    return rng(len(full)).normal(size=lead + tuple(full)), np.zeros(x_shape)


@settings(max_examples=15, deadline=None)
@given(_broadcasts())
def test_jitted_unbroadcast_sums_as_numpy_does(pair):
    g, x = pair
    got = _jitted_unbroadcast(g, x)
    assert np.shape(got) == x.shape
    np.testing.assert_allclose(got, unbroadcast(g, x), rtol=1e-12, atol=1e-12)


def test_jitted_unbroadcast_of_a_strided_cotangent():
    g = np.swapaxes(rng().normal(size=(2, 5, 3)), 0, 2)  # (3, 5, 2), not contiguous
    for x in (np.zeros((5, 1)), np.zeros((3, 1, 2)), np.zeros((1, 5, 1))):
        np.testing.assert_allclose(_jitted_unbroadcast(g, x), unbroadcast(g, x), rtol=1e-12)


def stacks(A, B, C):
    return np.sum(np.sin(A @ B)) + np.sum((C @ A) ** 2)


@pytest.mark.parametrize(
    "shapes, dtypes",
    [
        (((3, 4, 5), (5, 2), (4, 4)), (np.float64,) * 3),  # a stack times matrices
        (((4, 5), (3, 5, 2), (3, 4, 4)), (np.float32, np.float64, np.float64)),  # the other way
    ],
)
def test_products_of_stacks_match_python_mode(shapes, dtypes):
    args = [rng(k).normal(size=s).astype(t) for k, (s, t) in enumerate(zip(shapes, dtypes))]
    args[0] = np.swapaxes(np.swapaxes(args[0], -1, -2).copy(), -1, -2)  # strided matrices
    got = s2sad.grad(stacks, wrt=(0, 1, 2), jit="strict")(*args)
    want = s2sad.grad(stacks, wrt=(0, 1, 2))(*args)
    tol = 1e-5 if np.float32 in dtypes else 1e-12
    for g, h, a in zip(got, want, args):
        assert g.shape == h.shape == a.shape and g.dtype == h.dtype
        np.testing.assert_allclose(g, h, rtol=tol, atol=tol)

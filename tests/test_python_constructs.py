"""Python as people write it inside a differentiated function (issue 15): `enumerate(zip(...))`,
dict literals, `raise`/`assert`, the walrus, `with np.errstate(...)`, `print`, `try`, functions
passed as arguments, tuples of subscripts as targets, `return` inside a loop, a helper's tuple
result indexed, recursion of a fixed depth. Each is checked against central differences in
reverse mode (vjp), forward mode (jvp) and the batched Jacobian; the jitted forms are in
tests/test_jit_corpus.py's corpus. What s2sad refuses is refused at the user's line."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from conftest import check_jvp, check_vjp
from test_jacobian_batched import check

X = np.array([0.3, -0.5, 0.7, 0.9])
W = np.array([1.1, -0.4, 0.2, 0.6])


def all_modes(f, args, wrt=0):
    """vjp and jvp against central differences, and the batched Jacobian in both modes."""
    check_vjp(f, args, wrt)
    check_jvp(f, args, wrt)
    check(f, *args, wrt=wrt)


# ----------------------------------------------------------------------------- enumerate, zip


def weighted(x, w):
    s = 0.0
    for i, (a, b) in enumerate(zip(x, w)):
        s = s + i * a * np.sin(b)
    return s


def counted_from_one(x, w):
    s = 0.0
    for k, (a, b) in enumerate(zip(x, w), start=1):
        s = s + a * b / k
    for k, a in enumerate(x, 2):
        s = s + k * a * a
    return s


def zipped_rows(A, w):
    out = np.zeros(A.shape[1])
    for row, (c, d) in zip(A, zip(w, w[::-1])):
        out = out + row * c * d
    return out


@pytest.mark.parametrize("f", [weighted, counted_from_one])
def test_enumerate_of_zip(f):
    all_modes(f, (X, W), (0, 1))


def test_enumerate_of_zip_values():
    expected = sum(i * a * np.sin(b) for i, (a, b) in enumerate(zip(X, W)))
    assert s2sad.grad(weighted)(X, W).shape == X.shape
    np.testing.assert_allclose(weighted(X, W), expected)
    np.testing.assert_allclose(s2sad.grad(weighted)(X, W), np.arange(4) * np.sin(W))


def test_zip_of_a_zip_and_rows():
    A = np.arange(12.0).reshape(4, 3) / 10
    all_modes(zipped_rows, (A, W), (0, 1))


def test_enumerate_of_zip_reads_well():
    text = s2sad.source(s2sad.grad(weighted), X, W)
    assert "for i in range(min(len(x), len(w))):" in text
    assert "a = x[i]" in text and "b = w[i]" in text


# ----------------------------------------------------------------------------- tuple targets


def cell(a, b):
    return a * b, a + np.sin(b)


def tuple_of_items(x):
    s = np.zeros(4)
    (s[0], s[1]) = cell(x[0], x[1])
    s[2], s[3] = x[2], x[0] * x[3]
    return np.sum(s * s)


def swaps_in_a_loop(x):
    s = np.zeros((3, 2))
    for i in range(3):
        s[i], s[(i + 1) % 3] = s[(i + 1) % 3] + x[i], np.sin(x[i]) * s[i]
    t = np.zeros(2)
    t[0], u = x[1:3]
    t[1], t[0] = t[0] * u, t[1]
    return np.sum(s * s) + np.sum(t) * u


@pytest.mark.parametrize("f", [tuple_of_items, swaps_in_a_loop])
def test_tuple_of_subscripts_as_a_target(f):
    all_modes(f, (X,))


# ----------------------------------------------------------------------------- helper()[k]


def second_of_cell(x):
    return cell(x, x * 2)[1] * 3 + cell(x, x)[-2]


def test_indexing_a_helpers_tuple_result():
    all_modes(second_of_cell, (X,))
    text = s2sad.source(s2sad.vjp(second_of_cell), X)
    assert "(cell_result" not in text  # no tuple is built to be indexed


def indexed_by_a_variable(x, k):
    return cell(x, x)[k]


def test_a_helpers_tuple_indexed_by_a_variable_is_refused_at_its_line():
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="only by a constant integer") as info:
        s2sad.vjp(indexed_by_a_variable)(X, 1)
    assert info.value.line == indexed_by_a_variable.__code__.co_firstlineno + 1

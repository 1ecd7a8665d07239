"""Runs keep to one shape (s2sad/pipeline/fusion/extents.py): statements over `u[1:, :]` and
over `u[:, 1:]` are not fused into one loop nest whose guard could never pass, so each fused
loop runs; statements of one shape further on are moved up to join their run."""

import ast
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from s2sad.pipeline.fusion.extents import Extents

pytest.importorskip("numba")
pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")

from test_jit_fuse import fd_grad, rng  # noqa: E402


def energy(u, k):
    dx = u[1:, :] - u[:-1, :]
    dy = u[:, 1:] - u[:, :-1]
    return 0.5 * k * (np.sum(dx * dx) + np.sum(dy * dy)) + np.sum(u**4)


def guards(transformed, *args):
    """(what the generated function returns run by Python, each fused guard's verdict): a
    False is a run sent to its unfused branch."""
    function = transformed.compiled.function
    namespace = function.__globals__
    kept, verdicts = namespace["fusible"], []

    def fusible(*arrays):
        verdicts.append(all(a.shape == arrays[0].shape for a in arrays))
        return verdicts[-1]

    namespace["fusible"] = fusible
    try:
        return function(*args), verdicts
    finally:
        namespace["fusible"] = kept


def test_differences_along_two_axes_fuse_apart_and_every_loop_runs():
    u = rng().normal(size=(9, 7))
    jitted = s2sad.grad(energy, jit="strict")
    got = jitted(u, 0.7)
    np.testing.assert_allclose(got, s2sad.grad(energy)(u, 0.7), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, fd_grad(energy, (u, 0.7), 0), rtol=1e-6, atol=1e-7)
    (_, du), verdicts = guards(jitted, u, 0.7)
    np.testing.assert_allclose(du, got, rtol=1e-12, atol=1e-12)
    assert verdicts and all(verdicts)
    source = s2sad.source(jitted)
    # each difference computed inside the loop that sums its square, none stored
    unfused = source.split("else:")[1]  # (its subtraction in a workspace slot: numba_forms.py)
    assert re.search(
        r"dx = (dx_item - dx_item2|pooled_subtract\(workspace, \d+, dx_item, dx_item2\))", unfused
    )
    assert source.count("for i0 in range(") >= 4


def slice_terms(u, w):
    a = np.tanh(u[1:, :] * w) - u[:-1, :]
    b = u[:, 2:] * u[:, :-2]
    c = u[1:, 1:] - u[:-1, :-1]
    s = np.sum(a * a) + np.sum(np.sin(b)) + np.sum(c**3)
    return s + np.sum(u * u)


@settings(max_examples=8, deadline=None)
@given(st.integers(2, 6), st.integers(3, 7), st.floats(0.3, 1.5))
def test_random_shapes_of_several_slices(n, m, w):
    u = np.random.default_rng(n * 10 + m).normal(size=(n, m))
    jitted = s2sad.grad(slice_terms, wrt=(0, 1), jit="strict")
    got = jitted(u, w)
    expected = s2sad.grad(slice_terms, wrt=(0, 1))(u, w)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-11, atol=1e-12)
    (_, (du, dw)), verdicts = guards(jitted, u, w)
    np.testing.assert_allclose(du, expected[0], rtol=1e-11, atol=1e-12)
    assert all(verdicts)


def _extents(code: str, ranks: dict) -> Extents:
    """The extents of the statements `code` (their names' ranks in `ranks`)."""

    def rank(n):
        if isinstance(n, ast.Name):
            return ranks.get(n.id)
        if isinstance(n, ast.Constant):
            return 0 if isinstance(n.value, int) else None
        if isinstance(n, ast.Subscript):
            items = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
            dropped = sum(not isinstance(i, ast.Slice) and rank(i) == 0 for i in items)
            added = sum(isinstance(i, ast.Constant) and i.value is None for i in items)
            base = rank(n.value)
            return None if base is None else base - dropped + added
        return max((rank(o) for o in ast.iter_child_nodes(n) if rank(o) is not None), default=None)

    return Extents(ast.parse(code).body, rank)


def _axes(text: str, ranks: dict, code: str = ""):
    extents = _extents(code, ranks)
    return extents, extents.axes_of(ast.parse(text, mode="eval").body)


def test_extents_of_slices():
    ranks = {"u": 2, "v": 2}
    e, u = _axes("u", ranks)
    assert e.apart(e.axes_of(_expr("u[1:, :]")), e.axes_of(_expr("u[:-1, 1:]")))
    assert not e.apart(e.axes_of(_expr("u[1:, :]")), e.axes_of(_expr("u[:-1, :] * 2.0")))
    assert e.apart(u, e.axes_of(_expr("u[slice(None, -1, None), :]")))
    assert e.apart(e.axes_of(_expr("u[:0, :]")), e.axes_of(_expr("u[:-1, :]")))
    steps = e.axes_of(_expr("u[::2, :]"))  # a length of its own: equal to itself alone
    assert e.apart(steps, u) and not e.apart(steps, e.axes_of(_expr("u[::2, :]")))
    # slices whose bounds are known only when the code runs: their lengths, as linear forms
    lengths = {"b": 0, "d": 0, "main": 2}
    e, _ = _axes("main", lengths)
    rows = [
        e.axes_of(_expr(t)) for t in ("main[0, :b]", "main[1, b:2 * b]", "main[0, 2 * b:3 * b]")
    ]
    assert not any(e.apart(rows[0], r) for r in rows[1:])
    assert e.apart(e.axes_of(_expr("main[0, :d]")), e.axes_of(_expr("main[0, d:]")))  # d, n - d
    assert e.apart(e.axes_of(_expr("main[0, :d]")), rows[0])


def test_extents_of_arrays_nothing_relates_are_apart():
    """Two arrays this code takes as given are of one length only where it combines them
    (NumPy's broadcasting requires it): the components and the data points of GMM are not."""
    ranks = {"u": 2, "v": 2, "w": 1, "x": 2, "m": 2, "q": 2, "s": 0, "y": 1}
    ranks.update(t=2, z=2, r=1, y2=1, g=2)
    e, u = _axes("u", ranks, "t = u * v\nz = x @ m\nr = sum_over(z, 0, False)\ny2 = y + r\n")
    assert not e.apart(u, e.axes_of(_expr("v")))  # combined by `u * v`
    assert not e.apart(u, e.axes_of(_expr("t")))
    assert e.apart(u, e.axes_of(_expr("x")))  # nothing relates them
    assert e.apart(e.axes_of(_expr("w")), e.axes_of(_expr("y")))
    # `x @ m`: x's columns are m's rows; `r`, its sum over rows, has m's columns, as y
    assert not e.apart(e.axes_of(_expr("x[0]")), e.axes_of(_expr("m[:, 0]")))
    assert not e.apart(e.axes_of(_expr("y")), e.axes_of(_expr("m[0]")))
    assert not e.apart(e.axes_of(_expr("y2")), e.axes_of(_expr("m[0]")))
    # the shape of a rule's result is declared with it: `mean_vjp(g, x)` has x's
    e, _ = _axes("q", ranks, "g = mean_vjp(s, q)\n")
    assert not e.apart(e.axes_of(_expr("g")), e.axes_of(_expr("q")))
    assert e.apart(e.axes_of(_expr("g")), e.axes_of(_expr("q[1:]")))


def _expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def matrix_between(u, P):
    a = np.sin(u) * 2.0
    v = np.cos(u[1:]) * 3.0  # another shape: the run of `a` ends here
    c = P @ u  # no elementwise statement: the run does not take it
    b = a * c + u  # of the run's shape, but it reads `c`: it must stay after it
    return np.sum(b) + np.sum(v)


def test_a_statement_moved_up_never_passes_one_it_reads():
    u, P = rng().normal(size=6), rng().normal(size=(6, 6))
    jitted = s2sad.grad(matrix_between, wrt=(0, 1), jit="strict")
    got = jitted(u, P)
    want = s2sad.grad(matrix_between, wrt=(0, 1))(u, P)
    for g, w, k in zip(got, want, (0, 1)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g, fd_grad(matrix_between, (u, P), k), rtol=1e-6, atol=1e-7)
    # the fused code itself, run by Python: a name read before its statement would raise
    (_, grads), verdicts = guards(jitted, u, P)
    for g, w in zip(grads, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    assert verdicts and all(verdicts)


def sorted_between(u, Q):
    a = np.sin(u) * 2.0
    v = np.cos(u[1:]) * 3.0  # another shape: the run of `a` ends here
    t = Q.sort()  # noqa: F841  (sorts the data in place; t is None)
    c = Q * 2.0  # of the run's shape, data only: it must read Q sorted, after the sort
    b = a * c + u
    return np.sum(b * b) + np.sum(v)


@pytest.mark.parametrize("jit", [True, "strict"])
def test_nothing_moves_up_past_a_write_in_place(jit):
    u, Q = np.array([0.3, -0.2, 0.5, 0.1]), np.array([3.0, 1.0, 2.0, 0.5])
    value, grad = s2sad.value_and_grad(sorted_between, jit=jit)(u, Q.copy())
    want_value, want_grad = s2sad.value_and_grad(sorted_between)(u, Q.copy())
    assert value == pytest.approx(sorted_between(u.copy(), Q.copy()), rel=1e-14)
    assert value == pytest.approx(want_value, rel=1e-14)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, fd_grad(sorted_between, (u, Q), 0), rtol=1e-6, atol=1e-7)

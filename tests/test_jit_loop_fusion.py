"""Loop bodies of jitted gradients (issue #17's LSTM): rows of a parameter matrix taken at a
loop's index (`w[k, :n]`) join the fused runs as views computed above them; the adjoint's adds
into such rows (`add_at(dw, (k, slice(...)), v)`) join them too, added element by element; a
value recorded for its shape alone (`shape_push`) is not stored by a run; a tape push of a fresh
snapshot copies it once; a run's guard compares each array with the first, two at a time. Each must give Python mode's numbers and finite differences', with breaks,
branches, rows written in place and shapes that change from one iteration to the next."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from test_jit_fuse import fd_grad, fused_ran, in_python
from test_jit_fuse_slices import in_python as fused_in_python

from s2sad.transform_cache import transform

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.workloads import lstm  # noqa: E402


def gates(w, h0, xs):
    """A small LSTM-like recurrence: rows of `w` at the loop's index, a state row written in
    place and read back, the row's old value recorded."""
    n = xs.shape[1]
    h = h0.copy()
    total = 0.0
    for t in range(xs.shape[0]):
        k = t % 2
        g = 1.0 / (1.0 + np.exp(-(xs[t] * w[k, :n] + w[k + 2, :n])))
        c = np.tanh(h[k] * w[k, n:] + w[k + 2, n:])
        h[k] = h[k] * g + (1.0 - g) * c
        total = total + np.sum(h[k] * xs[t])
    return total


def gates_break(w, h0, xs):
    """A break in the body: the iterations after it record nothing."""
    n = xs.shape[1]
    h = h0.copy()
    total = 0.0
    for t in range(xs.shape[0]):
        g = np.tanh(xs[t] * w[0, :n] + w[1, :n])
        if np.sum(g) > 2.5:
            break
        h[0] = h[0] * g + w[1, n:]
        total = total + np.sum(h[0] * h[0])
    return total


def gates_branch(w, h0, xs):
    """A branch in the body choosing which row's gates apply."""
    n = xs.shape[1]
    h = h0.copy()
    total = 0.0
    for t in range(xs.shape[0]):
        if xs[t, 0] > 0.5:
            g = 1.0 / (1.0 + np.exp(-(xs[t] * w[0, :n] + w[1, :n])))
        else:
            g = np.tanh(xs[t] * w[1, :n] - w[0, :n])
        h[0] = h[0] * g + xs[t] * w[0, n:]
        total = total + np.sum(np.sin(h[0]))
    return total


def gates_growing(w, xs):
    """Rows whose length grows with the loop's index: each iteration's arrays have their own
    shape (the runs' guards see one shape within an iteration)."""
    total = 0.0
    for t in range(xs.shape[0]):
        m = t + 1
        u = np.tanh(xs[t, :m] * w[t, :m] + w[t + 1, :m])
        total = total + np.sum(u * u * xs[t, :m])
    return total


def _args(seed=0, steps=7, n=5):
    r = np.random.default_rng(seed)
    return (
        r.normal(scale=0.5, size=(4, 2 * n)),
        r.normal(scale=0.5, size=(2, n)),
        r.uniform(size=(steps, n)),
    )


def _check(f, args, wrt):
    jitted = s2sad.grad(f, wrt=wrt, jit="strict")
    got = jitted(*args)
    assert fused_ran(jitted)
    expected = s2sad.grad(f, wrt=wrt)(*args)
    got, expected = (got, expected) if isinstance(wrt, tuple) else ((got,), (expected,))
    for g, e, i in zip(got, expected, wrt if isinstance(wrt, tuple) else (wrt,)):
        assert g.shape == args[i].shape and g.dtype == args[i].dtype
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(g, fd_grad(f, args, i), rtol=1e-6, atol=1e-8)
    return jitted


def test_rows_at_the_loops_index_join_the_fused_run():
    args = _args()
    jitted = _check(gates, args, (0, 1))
    source = s2sad.source(jitted, *args)
    # the row views come first, and the product reading them is inside the run
    assert "if fusible(c_item, c_item2) and fusible(c_item, c_item3):" in source
    assert "c_mul_i = c_item[i0] * c_item2[i0]" in source


def test_break_branch_and_shapes_changing_across_iterations():
    w, h0, xs = _args(1)
    _check(gates_break, (w, h0, xs), (0, 1))
    _check(gates_branch, (w, h0, xs), (0, 1))
    r = np.random.default_rng(2)
    _check(gates_growing, (r.normal(size=(8, 7)), r.uniform(size=(6, 7))), 0)


def test_a_value_recorded_for_its_shape_is_not_stored():
    args = _args()
    jitted = s2sad.grad(gates, wrt=(0, 1), jit="strict")
    jitted(*args)
    source = s2sad.source(jitted, *args)
    # `c_mul` is recorded for its shape alone: the fused branch names an array of its shape
    assert re.search(r"push_shape_row\(c_mul_tape, \w+, c_mul\.shape\)", source)  # (in rows)
    assert "c_mul = np.empty(" not in source and "c_mul = pooled(" not in source
    guard = "if fusible(c_item, c_item2) and fusible(c_item, c_item3):"
    fused_branch = source.split(guard)[1].split("else:")[0]
    assert "c_mul = shape_stub(c)\n" in fused_branch  # a stand-in of its shape (3bb8ffd)
    # the fused code, run by Python with its guards true, gives the same numbers
    expected = s2sad.grad(gates, wrt=(0, 1))(*args)
    for g, e in zip(in_python(jitted, *args)[1], expected):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-13)


def test_a_fresh_snapshot_is_recorded_without_a_second_copy():
    args = _args()
    jitted = s2sad.grad(gates, wrt=(0, 1))
    jitted(*args)
    source = s2sad.source(jitted, *args)
    # `c_item = snapshot(h[k])` is a copy of its own, which nothing writes into
    assert "c_item = snapshot(h[k])" in source
    assert "c_item_tape.append(c_item)" in source


def test_float32_inputs_take_the_unfused_statements():
    w, h0, xs = (a.astype(np.float32) for a in _args(3))
    got = s2sad.grad(gates, wrt=(0, 1), jit="strict")(w, h0, xs)
    expected = s2sad.grad(gates, wrt=(0, 1))(w, h0, xs)
    for g, e, a in zip(got, expected, (w, h0)):
        assert g.dtype == a.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-6)


def rows_broadcast(w, x):
    """A row of `w` at the loop's index broadcast against a matrix."""
    total = 0.0
    for k in range(w.shape[0]):
        u = np.tanh(x * w[k, :] + 0.5)
        total = total + np.sum(u * x)
    return total


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 3), st.integers(0, 2**16))
def test_random_shapes_of_rows_broadcast_against_matrices(m, n, rows, seed):
    r = np.random.default_rng(seed)
    w, x = r.normal(size=(rows, n)), r.normal(size=(m, n))
    got = s2sad.grad(rows_broadcast, wrt=(0, 1), jit="strict")(w, x)
    expected = s2sad.grad(rows_broadcast, wrt=(0, 1))(w, x)
    for g, e, i in zip(got, expected, (0, 1)):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(g, fd_grad(rows_broadcast, (w, x), i), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("layers,steps", [(2, 5), (3, 4)])
def test_the_lstm_workload(layers, steps):
    x = lstm.make_inputs(layers, steps)
    args = tuple(x.values())
    jitted = s2sad.grad(lstm.lstm_objective, wrt=lstm.WRT, jit="strict")
    got = jitted(**x)
    assert fused_ran(jitted)
    expected = s2sad.grad(lstm.lstm_objective, wrt=lstm.WRT)(**x)
    for g, e, i in zip(got, expected, (0, 1)):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)
        fd = fd_grad(lstm.lstm_objective, args, i)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


def test_the_adjoints_adds_into_rows_join_the_fused_run():
    x = lstm.make_inputs(2, 4)
    jitted = s2sad.grad(lstm.lstm_objective, wrt=lstm.WRT, jit="strict")
    jitted(**x)
    source = s2sad.source(jitted, **x)
    # the adds into the rows of the weights' gradient happen where the values are computed
    assert "dmain_params_view = dmain_params[B, slice(3 * b, None, None)]" in source
    assert "dmain_params_view[i0] += dchange_add_i" in source
    assert "dchange_item3 = np.empty(" not in source and "dchange_item3 = pooled(" not in source
    # the unfused branch keeps the adds as they were
    assert "add_at(dmain_params, (B, slice(3 * b, None, None)), dchange_item3)" in source
    expected = s2sad.grad(lstm.lstm_objective, wrt=lstm.WRT)(**x)
    for g, e in zip(in_python(jitted, *x.values())[1], expected):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)


def reads_what_it_adds_into(w, xs):
    """The row of `w` read in the body is also the row the adjoint adds into: `dw` is read by no
    run it adds into (its adds stay where they were where a read follows)."""
    total = 0.0
    for t in range(xs.shape[0]):
        u = np.tanh(xs[t] * w[0, :] + w[1, :])
        v = u * w[0, :] + np.sin(w[1, :]) * u
        total = total + np.sum(v * xs[t])
    return total


def test_adds_into_a_row_read_again_give_python_modes_numbers():
    r = np.random.default_rng(4)
    _check(reads_what_it_adds_into, (r.normal(size=(2, 6)), r.uniform(size=(5, 6))), (0, 1))


def rk(y0, k):
    """A state's step reading `-k`, the same array at every step, which the adjoint reads."""
    y = y0
    for i in range(3):
        a = -k * y + np.sin(y)
        y = y + 0.1 * a
    return np.sum(y * y)


def test_a_value_every_iteration_computes_alike_is_recomputed_not_stored():
    compiled = transform(rk, ("y0", "k"), "grad", (("y0", 1), ("k", 1)), True)
    fused = compiled.code.split("else:")[0]  # the primal's fused branch
    assert "a_neg = np.empty" not in fused and "a_neg[i0] =" not in fused
    assert "* -k[i0]" in compiled.code.split("# adjoint sweep:")[1]
    r = np.random.default_rng(5)
    args = (r.normal(size=5), r.uniform(0.5, 1.5, 5))
    got, _ = fused_in_python(compiled, *args)
    want = s2sad.grad(rk, wrt=(0, 1))(*args)
    for k, g, w in zip((0, 1), got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
        np.testing.assert_allclose(g, fd_grad(rk, args, k), rtol=1e-6)

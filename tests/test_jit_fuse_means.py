"""Means fold into fused runs as sums do (pipeline/fusion/means.py): `np.mean` of a whole array
or over an axis, in the primal and the adjoint, with Python mode's numbers in float64 and
float32 and NumPy's over empty arrays. One function, compiled once."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import s2sad
from s2sad.rules.reductions import per_count
from test_jit_fuse import fd_grad, fused_ran

pytest.importorskip("numba")
pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


def means(x, y):
    m = np.mean(np.tanh(x * y))
    c = np.mean(x * y, axis=0, keepdims=True)
    return m + np.mean(np.mean(np.sin(x) - c, axis=-1) ** 2)


_GRAD = s2sad.grad(means, jit="strict")


def test_means_fold_into_the_runs_computing_their_arrays():
    """No `mean_over`, no `mean_vjp` left (the mean's full cotangent array was built, and its
    array stored for the mean after the loop); the output, read for its kind alone, is not
    summed; `tanh` is not stored, recomputed by the adjoint's loop."""
    x = np.ones((3, 2))
    source = s2sad.source(_GRAD, x, x)
    assert "mean_over" not in source and "mean_vjp" not in source
    assert "m_tanh[i0, i1] =" not in source and "m_tanh = shape_stub(x)" in source
    assert "m_sum = in_dtype_of(0.0, x)" in source
    assert "dm_tanh_per = per_count(dmeans, m_tanh, None)" in source
    assert "dm_mul_i = dm_tanh_per * (1 - tanh_lanes(" in source
    assert "c_sum[0, i1] += c_mul_i" in source  # over an axis, kept: accumulated
    assert "dx[i0, i1] + dc_mul_per[0, i1] * y[i0, i1]" in source  # and read back along it


def test_folded_means_give_python_modes_numbers():
    """The value (summed in the loop, where it is read) and the gradient in float32 as Python
    mode's (and near float64's, which finite differences check); over no elements nan, as
    NumPy's mean (with its warning), and an empty gradient. One compile."""
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    jitted = s2sad.value_and_grad(means, jit="strict")
    value, got = jitted(x32, y32)
    assert fused_ran(jitted) and value.dtype == got.dtype == np.float32
    want_value, want = s2sad.value_and_grad(means)(x32, y32)
    np.testing.assert_allclose(value, want_value, rtol=2e-6)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    exact = s2sad.grad(means)(x, y)
    np.testing.assert_allclose(exact, fd_grad(means, (x, y), 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for shape in ((0, 4), (3, 0)):
            empty = np.zeros(shape, np.float32)
            value, got = jitted(empty, empty)
            assert np.isnan(value) and got.shape == shape and got.dtype == np.float32


def test_per_count_divides_in_the_sums_dtype():
    x = np.ones((4, 5), np.float32)
    assert per_count(np.float32(2.0), x, None) == np.float32(0.1)
    assert per_count(np.float32(2.0), x, None).dtype == np.float32
    np.testing.assert_array_equal(per_count(np.full(5, 2.0), x, 0), np.full(5, 0.5))
    with np.errstate(all="raise"):
        assert np.isnan(per_count(0.0, np.ones((0, 3)), None))

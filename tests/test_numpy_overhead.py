"""NumPy mode's per-call costs cut for small gradients give the same results: `expand_reduced`'s
view built directly (np.broadcast_to's, in everything but its Python cost), `grad_seed`'s
float case, the call's bind and return checks (a gradient that is an argument, or shares its
memory, still comes back a copy), and `spare` taking the arrays of a 200 x 200 stencil."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from s2sad.errors import NonScalarOutputError
from s2sad.rules import buffers, common
from s2sad.rules.buffers import spare
from s2sad.rules.common import _axes, expand_reduced, grad_seed
from s2sad.transformed import Transformed


def _reference(g, x, axis=None, keepdims=False):
    """expand_reduced as np.expand_dims and np.broadcast_to compute it."""
    if not keepdims and axis is not None:
        g = np.expand_dims(g, _axes(axis, np.ndim(x)))
    return np.broadcast_to(g, np.shape(x))


def _same(got, want):
    assert type(got) is type(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert not got.flags.writeable  # a cotangent nothing may write into, as broadcast_to's


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=0, max_size=4),
    st.data(),
    st.sampled_from([np.float64, np.float32, np.complex128, np.int64]),
    st.booleans(),
)
def test_expand_reduced_is_broadcast_to(shape, data, dtype, strided):
    """Every reduction's cotangent: over all axes, some axes (negative ones too), or with its
    axes kept; of each dtype, contiguous or not (the view is built for contiguous floats)."""
    x = np.zeros(shape)
    nd = len(shape)
    how = data.draw(st.sampled_from(["all", "axes", "keepdims"]))
    if how == "all":
        axis, keepdims, g_shape = None, False, ()
    elif how == "keepdims" or nd == 0:
        axis = data.draw(st.sets(st.integers(0, max(nd - 1, 0)))) if nd else set()
        axis, keepdims = tuple(sorted(axis)), True
        g_shape = tuple(1 if i in axis else n for i, n in enumerate(shape))
        axis = axis or None
    else:
        axes = sorted(data.draw(st.sets(st.integers(0, nd - 1), min_size=1)))
        axis = axes[0] - nd if len(axes) == 1 and data.draw(st.booleans()) else tuple(axes)
        keepdims = False
        g_shape = tuple(n for i, n in enumerate(shape) if i not in axes)
    g = (np.arange(int(np.prod(g_shape)) * 2) + 1.5).astype(dtype)
    g = g[::2] if strided else g[: g.size // 2]
    g = g.reshape(g_shape)
    _same(expand_reduced(g, x, axis, keepdims), _reference(g, x, axis, keepdims))


@pytest.mark.parametrize("g", [np.float64(2.5), np.float32(2.5), 2.5, np.asarray(2.5)])
def test_expand_reduced_of_a_number(g):
    x = np.zeros((3, 4), np.float32)
    _same(expand_reduced(g, x), _reference(g, x))


def test_expand_reduced_view_reads_its_cotangent():
    """The view is of the reduced cotangent (its base), and a mismatch raises NumPy's error."""
    g = np.arange(4.0)
    view = expand_reduced(g, np.zeros((3, 4)), axis=0)
    assert view.base is g and np.shares_memory(view, g)
    with pytest.raises(ValueError):
        expand_reduced(np.ones(5), np.zeros((3, 4)), axis=0)
    with pytest.raises(ValueError):
        _reference(np.ones(5), np.zeros((3, 4)), axis=0)


def test_grad_seed_keeps_the_outputs_type():
    for out in (2.0, np.float64(2.0), np.float32(2.0), np.asarray(2.0)):
        seed = grad_seed(out)
        want = np.ones_like(out)[()] if isinstance(out, np.ndarray) else type(out)(1)
        assert type(seed) is type(want) and seed == 1
    for out in (2, np.ones(3), np.int64(2)):
        with pytest.raises(NonScalarOutputError):
            grad_seed(out)


# ----------------------------------------------------------------------------- the call's checks


def _mul(x, y):
    return np.sum(x * y)


def _mul_view(x, y):
    return np.sum(x * y[:3])


@pytest.mark.parametrize("reuse", [False, True])
def test_a_gradient_that_is_an_argument_comes_back_a_copy(reuse):
    x, y = np.arange(3.0), np.arange(3.0) + 1
    dx, dy = Transformed(_mul, ("x", "y"), "grad", reuse=reuse)(x, y)
    np.testing.assert_array_equal(dx, y)
    np.testing.assert_array_equal(dy, x)
    assert not np.shares_memory(dx, y) and not np.shares_memory(dy, x)
    dx[0] = 99.0  # the caller's y is its own
    assert y[0] == 1.0


def test_a_gradient_sharing_an_arguments_memory_comes_back_a_copy():
    x, y = np.arange(3.0), np.arange(5.0) + 1
    dx = s2sad.grad(_mul_view, wrt="x")(x, y)
    np.testing.assert_array_equal(dx, y[:3])
    assert not np.shares_memory(dx, y)


def test_gradients_sharing_memory_with_each_other_come_back_apart():
    def f(x, y):
        return np.sum(np.sin(x + y))

    x, y = np.arange(3.0), np.arange(3.0) / 2
    dx, dy = s2sad.grad(f, wrt=("x", "y"))(x, y)
    np.testing.assert_allclose(dx, np.cos(x + y), rtol=1e-15)
    np.testing.assert_array_equal(dx, dy)
    assert not np.shares_memory(dx, dy)


def test_positional_and_keyword_calls_agree():
    x, y = np.arange(3.0), np.arange(3.0) + 1
    g = s2sad.grad(_mul, wrt=("x", "y"))
    for got in (g(x, y=y), g(x=x, y=y), g(y=y, x=x)):
        for a, b in zip(got, g(x, y)):
            np.testing.assert_array_equal(a, b)


def test_float32_input_float64_gradient_comes_back_float32():
    def f(x, w):
        return np.sum(x * w)

    x, w = np.arange(3, dtype=np.float32), np.arange(3.0) + 0.1
    dx = s2sad.grad(f, wrt="x")(x, w)
    assert dx.dtype == np.float32
    np.testing.assert_allclose(dx, w.astype(np.float32))


# ----------------------------------------------------------------------------- spare's threshold


def test_spare_takes_a_stencils_arrays_at_n_200():
    """At 200 x 200 (40,000 elements) a fresh array is new pages from the kernel once glibc has
    given a call's temporaries back, so the buffers are reused from there up."""
    t = np.zeros((199, 199))
    assert spare(t, np.ones((199, 199)), 2.0) is t
    assert spare(np.zeros(100), np.ones(100)) is None  # malloc's free lists serve these
    assert 100 < buffers.SPARE_SIZE <= 199 * 199


def _unbroadcast_reference(g, x):
    """unbroadcast as np.sum over the broadcast axes computes it."""
    shape = np.shape(x)
    lead = np.ndim(g) - len(shape)
    if lead > 0:
        g = np.sum(g, axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and np.shape(g)[i] != 1)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    return np.reshape(g, shape)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=0, max_size=4),
    st.lists(st.booleans(), min_size=4, max_size=4),
    st.integers(0, 2),
    st.sampled_from([np.float64, np.float32]),
    st.booleans(),
)
def test_unbroadcast_sums_what_broadcasting_spread(shape, ones, lead, dtype, view):
    """A cotangent of a broadcast result, with leading axes and axes of length 1 in `x`, summed
    back to `x`'s shape: the same numbers, in the same order of summation, as np.sum gives."""
    x_shape = tuple(1 if one else n for n, one in zip(shape, ones))
    g_shape = (3,) * lead + tuple(shape)
    x = np.zeros(x_shape, dtype)
    g = np.random.default_rng(len(g_shape)).normal(size=g_shape).astype(dtype)
    if view:  # a broadcast cotangent (expand_reduced's)
        g = np.broadcast_to(g[..., :1], g_shape) if g_shape else g
    got, want = common.unbroadcast(g, x), _unbroadcast_reference(g, x)
    assert got.shape == x.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)

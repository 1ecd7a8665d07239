"""`pullback.stacked(seeds)`: many seeds pulled back from one point, each gradient with a new
first axis of rows. Jitted, where the adjoint reads no tape and the inputs differentiated are
arrays, one compiled call (`vjp_f_rows`) runs the forward sweep once and the adjoint once per
row; elsewhere one pullback per row. Either way the rows must be the pullbacks' own numbers (and
finite differences'), shaped and typed as the inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from s2sad.errors import SeedShapeError

from test_jit_fuse import fd_grad, rng
from test_jit_vjp_value import ba_like_inputs, broadcast, columns


def looped(x, n):
    for i in range(n):
        x = np.sin(x) * x
    return x * 2.0


def written(x):
    y = x * 2.0
    y[0] = np.sin(x[1])
    return y * x


def scaled(x, a):
    return np.tanh(x) * a


def pair(x):
    return x * 2.0, np.sin(x)


def tree_input(p):
    return p["a"] * np.sin(p["b"])


def assert_rows(stacked, pullback, seeds, inputs, rtol=1e-13):
    """Row k of each stacked gradient is pullback(seeds[k]), shaped and typed as its input."""
    stacked = stacked if isinstance(stacked, tuple) else (stacked,)
    for k, seed in enumerate(seeds):
        each = pullback(seed)
        each = each if isinstance(each, tuple) else (each,)
        for rows, g, x in zip(stacked, each, inputs):
            assert rows.shape == (len(seeds),) + np.shape(x)
            assert rows.dtype == np.result_type(np.asarray(x).dtype, np.float32)
            np.testing.assert_allclose(rows[k], g, rtol=rtol, atol=rtol)


def unit_seeds(out):
    """One seed per column of a (p, m) output: column r of every row (BA's seeds)."""
    seeds = np.zeros((out.shape[1],) + out.shape)
    for r in range(out.shape[1]):
        seeds[r, :, r] = 1.0
    return seeds


def test_jitted_rows_are_one_compiled_call_with_the_pullbacks_numbers():
    args = ba_like_inputs(6)
    jitted = s2sad.vjp(columns, wrt=(0, 1, 2), jit="strict")
    out, pullback = jitted(*args)
    assert pullback.rows is not None
    assert "def vjp_columns_rows(" in s2sad.source(jitted, *args)
    seeds = np.concatenate([unit_seeds(out), rng(4).normal(size=(2,) + out.shape)])
    stacked = pullback.stacked(seeds)
    assert_rows(stacked, pullback, seeds, args, rtol=1e-14)
    _, python_pullback = s2sad.vjp(columns, wrt=(0, 1, 2))(*args)
    assert_rows(stacked, python_pullback, seeds, args, rtol=1e-12)
    assert_rows(python_pullback.stacked(seeds), python_pullback, seeds, args)

    def projected(*a):
        return np.sum(columns(*a) * seeds[-1])

    for k in range(3):
        np.testing.assert_allclose(
            stacked[k][-1], fd_grad(projected, args, k), rtol=1e-6, atol=1e-7
        )


def test_rows_belong_to_the_point_of_the_call():
    # (a small function of one differentiated array: the compiled rows of `columns` are the
    # test above's, and compiling them again for wrt=1 cost 10 s)
    x, y = rng().normal(size=(3, 4)), rng(1).normal(size=(3, 4))
    jitted = s2sad.vjp(broadcast, wrt=0, jit="strict")
    out, pullback = jitted(x, y)
    assert pullback.rows is not None
    seeds = unit_seeds(out)
    expected = pullback.stacked(seeds)
    assert isinstance(expected, np.ndarray) and expected.shape == (4, 3, 4)
    assert_rows(expected, pullback, seeds, (x,), rtol=1e-14)
    x[:] = y[:] = 0.0  # the caller changes its arrays after vjp: the pullback reads its copies
    np.testing.assert_array_equal(pullback.stacked(seeds), expected)
    seeds[:] = 0.0  # nor do the seeds change between calls
    assert not np.any(pullback.stacked(seeds))


def test_zero_rows_and_float32_inputs():
    x = rng().normal(size=(3, 4))
    out, pullback = s2sad.vjp(broadcast, wrt=(0, 1), jit="strict")(x, x + 1.0)
    empty = pullback.stacked(np.zeros((0, 3, 4)))
    assert [g.shape for g in empty] == [(0, 3, 4), (0, 3, 4)]
    x32 = x.astype(np.float32)
    out, pullback = s2sad.vjp(broadcast, wrt=(0, 1), jit="strict")(x32, x32 + 1.0)
    seeds = rng(1).normal(size=(2, 3, 4)).astype(np.float32)
    assert_rows(pullback.stacked(seeds), pullback, seeds, (x32, x32), rtol=1e-6)


@pytest.mark.parametrize("jit", [False, "strict"])
def test_tapes_in_place_writes_and_numbers_take_a_pullback_per_row(jit):
    x = rng().normal(size=5)
    seeds = rng(1).normal(size=(3, 5))
    out, pullback = s2sad.vjp(looped, wrt=0, jit=jit)(x, 3)
    assert pullback.rows is None  # the adjoint pops a tape
    assert_rows(pullback.stacked(seeds), pullback, seeds, (x,))
    np.testing.assert_allclose(
        pullback.stacked(seeds)[1],
        fd_grad(lambda x: np.sum(looped(x, 3) * seeds[1]), (x,), 0),
        rtol=1e-6,
        atol=1e-9,
    )
    out, pullback = s2sad.vjp(written, wrt=0, jit=jit)(x)
    assert_rows(pullback.stacked(seeds), pullback, seeds, (x,))
    np.testing.assert_allclose(
        pullback.stacked(seeds)[2],
        fd_grad(lambda x: np.sum(written(x.copy()) * seeds[2]), (x,), 0),
        rtol=1e-6,
        atol=1e-9,
    )
    out, pullback = s2sad.vjp(scaled, wrt=(0, 1), jit=jit)(x, 0.7)
    assert pullback.rows is None  # a number differentiated
    gx, ga = pullback.stacked(seeds)
    assert gx.shape == (3, 5) and ga.shape == (3,)
    assert_rows((gx, ga), pullback, seeds, (x, 0.7))


def test_refusals_name_what_stacked_takes():
    x = rng().normal(size=4)
    _, pullback = s2sad.vjp(pair)(x)
    with pytest.raises(SeedShapeError, match="one output array"):
        pullback.stacked(np.zeros((2, 4)))
    _, pullback = s2sad.vjp(broadcast, wrt=(0, 1))(x, x)
    with pytest.raises(SeedShapeError, match=r"\(rows,\) \+ \(4,\)"):
        pullback.stacked(np.zeros(4))
    with pytest.raises(SeedShapeError, match=r"\(rows,\) \+ \(4,\)"):
        pullback.stacked(np.zeros((2, 5)))
    _, pullback = s2sad.vjp(tree_input)({"a": x, "b": x})
    with pytest.raises(SeedShapeError, match="not trees"):
        pullback.stacked(np.zeros((2, 4)))


# shapes of one rank that broadcast against each other: the compiled rows take the original
# statements
_SHAPES = st.tuples(st.integers(1, 4), st.integers(1, 4)).flatmap(
    lambda s: st.tuples(
        st.just(s), st.tuples(st.sampled_from([1, s[0]]), st.sampled_from([1, s[1]]))
    )
)


@settings(max_examples=20, deadline=None)
@given(_SHAPES, st.integers(0, 3))
def test_broadcasting_shapes_give_python_modes_rows(shapes, n_rows):
    x_shape, y_shape = shapes
    x, y = rng().normal(size=x_shape), rng(1).normal(size=y_shape)
    out, pullback = s2sad.vjp(broadcast, wrt=(0, 1), jit="strict")(x, y)
    assert pullback.rows is not None
    _, python_pullback = s2sad.vjp(broadcast, wrt=(0, 1))(x, y)
    seeds = rng(2).normal(size=(n_rows,) + out.shape)
    assert_rows(pullback.stacked(seeds), python_pullback, seeds, (x, y), rtol=1e-12)

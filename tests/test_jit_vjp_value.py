"""The value function of a jitted vjp (`vjp_f`, whose pullback is the re-running sweep
`vjp_f_sweep`) is fused as the sweep's primal is: BA's residuals over columns of a (p, 11)
array, read one column at a time, cost 2.5x less fused. Its numbers must be Python mode's (and
NumPy's own), for shapes that fuse and for shapes that broadcast (the original statements), and
the pullback's too."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad

from test_jit_fuse import fd_grad, fused_ran, rng
from test_jit_fuse_ranks import Counted


def columns(cams, X, w):
    """BA's shape of code: columns of a wide array against a (p, 3) one, sums with keepdims, a
    mask, concatenation."""
    P = X - cams[:, 3:6]
    r = cams[:, 0:3]
    theta2 = np.sum(r * r, axis=1)
    big = theta2 > 0.05
    theta = np.sqrt(np.where(big, theta2, 1.0))
    u = r / theta[:, None]
    t = np.cos(theta)[:, None] * np.sum(u * P, axis=1, keepdims=True)
    Y = np.where(big[:, None], P * cams[:, 6:7] + u * t, P)
    proj = -Y[:, 0:2] / Y[:, 2:3]
    err = w[:, None] * (cams[:, 6:7] * proj + cams[:, 7:9])
    return np.concatenate([err, (1.0 - w * w)[:, None]], axis=1)


def broadcast(x, y):
    a = x * y + np.sin(x)
    return a * a - y


def ba_like_inputs(p, seed=0):
    g = rng(seed)
    cams = g.normal(size=(p, 9)) * 0.3
    cams[:, 5] += 4.0  # depth well away from zero
    return cams, g.normal(size=(p, 3)) * 0.3, 0.8 + 0.1 * g.normal(size=p)


def test_the_value_function_is_fused_and_gives_numpys_numbers():
    args = ba_like_inputs(7)
    jitted = s2sad.vjp(columns, wrt=(0, 1, 2), jit="strict")
    out, pullback = jitted(*args)
    expected_out, expected_pullback = s2sad.vjp(columns, wrt=(0, 1, 2))(*args)
    np.testing.assert_allclose(out, columns(*args), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(out, expected_out, rtol=1e-13, atol=1e-13)
    assert fused_ran(jitted)
    value = s2sad.source(jitted, *args).split("\n\n\ndef ")[0]  # vjp_columns, not its sweep
    assert "def vjp_columns(" in value and "_sweep(" not in value.split('"""')[2]
    assert "if float_arrays(" in value and "for i0 in range(" in value
    seed = rng(3).normal(size=out.shape)
    got = pullback(seed)
    for g, e, x in zip(got, expected_pullback(seed), args):
        assert g.shape == x.shape and g.dtype == x.dtype
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)

    def projected(*a):
        return np.sum(columns(*a) * seed)

    for k in range(3):
        np.testing.assert_allclose(got[k], fd_grad(projected, args, k), rtol=1e-6, atol=1e-7)


def test_the_value_functions_loops_run_by_python_give_numpys_numbers():
    """The fused loops' logic apart from Numba: the value function run by Python with its
    dtype guards true, so that the shape comparisons decide (and, for the same arrays, false:
    the original statements)."""
    args = ba_like_inputs(5, seed=1)
    jitted = s2sad.vjp(columns, wrt=(0, 1, 2), jit="strict")
    jitted(*args)
    value_function = jitted.compiled.functions["vjp_columns"]
    with Counted(value_function.__globals__) as counted:
        fused = value_function(*args)
    assert counted.calls == 0  # every sum and broadcast in the loops
    np.testing.assert_allclose(fused, columns(*args), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(value_function(*args), columns(*args), rtol=1e-13, atol=1e-13)


# shapes of one rank that broadcast against each other: the guard fails, the original statements
_SHAPES = st.tuples(st.integers(1, 4), st.integers(1, 4)).flatmap(
    lambda s: st.tuples(
        st.just(s), st.tuples(st.sampled_from([1, s[0]]), st.sampled_from([1, s[1]]))
    )
)


@settings(max_examples=20, deadline=None)
@given(_SHAPES)
def test_broadcasting_shapes_give_numpys_value_and_python_modes_pullback(shapes):
    x_shape, y_shape = shapes
    x, y = rng().normal(size=x_shape), rng(1).normal(size=y_shape)
    out, pullback = s2sad.vjp(broadcast, wrt=(0, 1), jit="strict")(x, y)
    expected_out, expected_pullback = s2sad.vjp(broadcast, wrt=(0, 1))(x, y)
    assert out.shape == expected_out.shape == np.broadcast_shapes(x_shape, y_shape)
    np.testing.assert_allclose(out, broadcast(x, y), rtol=1e-13, atol=1e-13)
    seed = rng(2).normal(size=out.shape)
    for g, e, a in zip(pullback(seed), expected_pullback(seed), (x, y)):
        assert g.shape == a.shape
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)

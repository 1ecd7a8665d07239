"""What Numba compiles for a fused gradient in the process (s2sad/fused_guards.py): the fused
branches alone, each guard's `else:` a `raise ShapesNotFused()`, so that Numba does not compile
the original array statements (most of a fused gradient's machine code and compile time) for
calls that seldom take them; a call whose arrays broadcast runs the code with those branches,
compiled then, with Python mode's numbers. `s2sad.source` and `s2sad emit --jit` keep both branches.
"""

from __future__ import annotations

import ast

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from s2sad.fused_guards import fused_only

from test_jit_fuse import chain, fd_grad


def scaled_in_place(x, y):
    x *= 2.0  # on the generated code's own copy: a call run again sees the caller's x
    a = np.tanh(x * y)
    return np.sum(a * a + x)


def _guards(tree) -> list[ast.If]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.If)
        and any(
            isinstance(c, ast.Call) and getattr(c.func, "id", "") in ("fusible", "float_arrays")
            for c in ast.walk(n.test)
        )
    ]


def _compiled_text(transformed) -> str:
    """The text of the module Numba compiled for the transform's last call."""
    namespace = transformed.compiled.jitted.namespace
    with open(namespace["__file__"], encoding="utf-8") as f:
        return f.read()


def test_numba_compiles_the_fused_branches_alone():
    x, y = np.linspace(0.1, 1.0, 12).reshape(3, 4), np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    g = s2sad.grad(chain, wrt=(0, 1), jit="strict")
    g(x, y, 0.3)
    shown = _guards(ast.parse(s2sad.source(g)))
    compiled = _guards(ast.parse(_compiled_text(g)))
    assert shown and len(compiled) == len(shown)
    for guard in compiled:  # each else a raise, nothing else
        [stmt] = guard.orelse
        assert isinstance(stmt, ast.Raise) and ast.unparse(stmt.exc) == "ShapesNotFused()"
    for guard in shown:  # what s2sad.source shows keeps the original statements
        assert any(isinstance(s, ast.Assign) for s in guard.orelse)


def test_fused_only_keeps_the_rest_of_the_text():
    text = (
        "def f(a, b):\n"
        "    # line 2: c = a * b\n"
        "    if fusible(a, b):\n"
        "        c = np.empty(a.shape, a.dtype)\n"
        "        if fusible(c):\n"
        "            d = c\n"
        "        else:\n"
        "            d = c + 1.0\n"
        "    else:\n"
        "        # line 2: c = a * b\n"
        "        c = a * b\n"
        "        d = c\n"
        "    if b > 0:\n"
        "        d = d * 2.0\n"
        "    else:\n"
        "        d = -d\n"
        "    return d  # the value\n"
    )
    assert fused_only(text) == (
        "def f(a, b):\n"
        "    # line 2: c = a * b\n"
        "    if fusible(a, b):\n"
        "        c = np.empty(a.shape, a.dtype)\n"
        "        if fusible(c):\n"
        "            d = c\n"
        "        else:\n"
        "            raise ShapesNotFused()\n"
        "    else:\n"
        "        raise ShapesNotFused()\n"
        "    if b > 0:\n"
        "        d = d * 2.0\n"
        "    else:\n"
        "        d = -d\n"
        "    return d  # the value\n"
    )


_SHAPES = st.tuples(st.integers(1, 4), st.integers(2, 4)).flatmap(
    lambda s: st.tuples(st.just(s), st.tuples(st.sampled_from([1, s[0]]), st.just(1)))
)


@settings(max_examples=10, deadline=None)
@given(_SHAPES)
def test_calls_switching_between_fused_and_broadcast_shapes(shapes):
    """One shape fused, another broadcasting (the code with `else:` branches, remembered for those
    shapes),
    then the first again: each call Python mode's numbers, of its inputs' shapes."""
    x_shape, y_shape = shapes
    rng = np.random.default_rng(sum(x_shape) + sum(y_shape))
    x, y = rng.normal(size=x_shape), rng.normal(size=y_shape)
    same = rng.normal(size=x_shape)
    g = s2sad.grad(chain, wrt=(0, 1), jit="strict")
    plain = s2sad.grad(chain, wrt=(0, 1))
    for args in ((x, same, 0.3), (x, y, 0.3), (x, same, 0.3), (x, y, 0.3)):
        got, expected = g(*args), plain(*args)
        for a, e, arg in zip(got, expected, args):
            assert a.shape == arg.shape and a.dtype == arg.dtype
            np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12)
        code = g.compiled.jitted
        ran = code.ran(g.compiled.name, args)
        assert ran is (code if args[1].shape == args[0].shape else code.branched)


def test_a_call_run_again_with_the_branches_sees_the_callers_arguments():
    x, y = np.linspace(0.1, 1.2, 12).reshape(3, 4), np.linspace(-1.0, 1.0, 3).reshape(3, 1)
    kept = x.copy()
    g = s2sad.grad(scaled_in_place, wrt=(0, 1), jit="strict")
    gx, gy = g(x, y)
    np.testing.assert_array_equal(x, kept)
    ran = g.compiled.jitted.ran(g.compiled.name, (x, y))
    assert ran is not None and ran is g.compiled.jitted.branched
    ex, ey = s2sad.grad(scaled_in_place, wrt=(0, 1))(x, y)
    np.testing.assert_allclose(gx, ex, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gy, ey, rtol=1e-12, atol=1e-12)

    def f(x, y):  # (the NumPy function doubles the caller's x)
        return scaled_in_place(x.copy(), y)

    np.testing.assert_allclose(gx, fd_grad(f, (x, y), 0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gy, fd_grad(f, (x, y), 1), rtol=1e-6, atol=1e-7)

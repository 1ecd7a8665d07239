"""Scatters in fused runs (s2sad/pipeline/fusion/scatters.py): the cotangents of basic slices
of one array (`u[1:, :-1]`, `u[:-1, 1:]`, `u[::-2]`) are added into its gradient inside the
loop nest that computes them, `du` zeroed once, instead of one pass per slice. The fused code
must give Python mode's numbers (and finite differences') for any slices, steps and shapes,
empty and length-1 axes included, and its guard must send other shapes to the original code."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_jit_fuse import fd_grad, fused_ran, rng, stencil

import s2sad
from s2sad.transform_cache import transform


def reversed_pair(x, w):
    a = x[:0:-1]
    b = x[-2::-1]
    return np.sum(a * b * w + np.sin(a))


def strided(x, s, t):
    a = x[s : s + 3 * t : t]
    b = x[s + 2 * t : s - 1 : -t]
    return np.sum(a * a * b)


def three_d(u, w):
    a = u[1:, :, ::2]
    b = u[:-1, ::-1, 1::2]
    return np.sum(a * b * w + a)


def thin(u, w):
    a = u[:, 2:3]
    b = u[:, 0:1]
    return np.sum(a * b * w)


def in_loop(u, n):
    s = 0.0
    for i in range(n):
        c = u[:-1, 1:]
        d = u[1:, :-1] - c
        s = s + np.sum(d * d * c)
        u = u * 0.9 + 0.1
    return s


def rows(u):
    return np.sum(u[1:] * u[:-1] * u[:-1])


def two_shapes(u):
    a = u[1:, :]
    b = u[:, 1:]
    return np.sum(a * a) + np.sum(np.cos(b))


class Unfused:
    """The jitted transform's code run by Python with its dtype guards true, so that the shape
    comparisons decide; counts the scatters left to the helpers (none where the loop took them)."""

    def __init__(self, compiled):
        self.namespace, self.calls, self.kept = compiled.function.__globals__, 0, {}

    def __enter__(self):
        for name in ("getitem_vjp", "add_at"):
            self.kept[name] = original = self.namespace[name]
            self.namespace[name] = self.counting(original)
        for name in ("fusible", "float_arrays"):
            self.kept[name] = self.namespace[name]
        self.namespace["fusible"] = lambda *a: all(b.shape == a[0].shape for b in a)
        self.namespace["float_arrays"] = lambda *a: True
        return self

    def counting(self, original):
        def call(*args):
            self.calls += 1
            return original(*args)

        return call

    def __exit__(self, *exc):
        self.namespace.update(self.kept)


def in_python(compiled, *args):
    """(what the fused code returns run by Python, how many scatters it left to helpers)."""
    with Unfused(compiled) as counted:
        return compiled.function(*args), counted.calls


def test_the_stencils_three_slices_add_into_its_gradient_in_one_loop():
    u = rng().normal(size=(9, 7))
    jitted = s2sad.grad(stencil, wrt="u", jit="strict")
    got = jitted(u, 0.7)
    assert fused_ran(jitted)
    expected = s2sad.grad(stencil, wrt="u")(u, 0.7)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, fd_grad(stencil, (u, 0.7), 0), rtol=1e-6, atol=1e-7)
    source = s2sad.source(jitted)
    fused = source[: source.index("    else:\n        # line", source.index("dstencil ="))]
    # (gathered: each element of du once, from the cotangents at shifted positions)
    assert re.search(r"du = (np\.empty\(|pooled\(workspace, \d+, )u\.shape, ", fused)
    assert "du[j0, j1] = du_j" in fused
    assert "u[:-1, 1:].shape == c.shape" in fused  # each slice has the loop's shape
    assert "getitem_vjp" not in fused and "add_at" not in fused
    compiled = transform(stencil, ("u",), "grad", (("u", 2), ("k", 0)), True)
    du, calls = in_python(compiled, u, 0.7)
    np.testing.assert_allclose(du, expected, rtol=1e-12, atol=1e-12)
    assert calls == 0


@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (2, 5), (6, 1)])
def test_the_stencil_on_empty_and_thin_arrays(shape):
    u = rng().normal(size=shape)
    got = s2sad.grad(stencil, wrt="u", jit="strict")(u, 0.7)
    assert got.shape == u.shape and got.dtype == np.float64
    np.testing.assert_allclose(got, s2sad.grad(stencil, wrt="u")(u, 0.7), rtol=1e-12, atol=0)


def test_negative_steps_and_runtime_bounds():
    x, w = rng().normal(size=7), rng(1).normal(size=6)
    jitted = s2sad.grad(reversed_pair, wrt="x", jit="strict")
    got = jitted(x, w)
    assert fused_ran(jitted)
    np.testing.assert_allclose(got, s2sad.grad(reversed_pair, wrt="x")(x, w), rtol=1e-12)
    np.testing.assert_allclose(got, fd_grad(reversed_pair, (x, w), 0), rtol=1e-6, atol=1e-7)
    source = s2sad.source(jitted)
    assert "dx[x.shape[0] - 1 - i0] += " in source  # x[:0:-1]
    assert "dx_start0 = slice(-2, None, -1).indices(x.shape[0])[0]" in source  # x[-2::-1]
    y = rng(2).normal(size=12)
    jitted = s2sad.grad(strided, wrt="x", jit="strict")
    for s, t in ((1, 1), (2, 2), (3, 2), (1, 3)):
        got = jitted(y, s, t)
        np.testing.assert_allclose(got, s2sad.grad(strided, wrt="x")(y, s, t), rtol=1e-12)
        np.testing.assert_allclose(got, fd_grad(strided, (y, s, t), 0), rtol=1e-6, atol=1e-7)
    assert fused_ran(jitted) and "slice(s, s + 3 * t, t).indices(x.shape[0])" in s2sad.source(
        jitted
    )


@pytest.mark.parametrize("f, shapes", [(three_d, [(4, 5, 6), (3, 5, 3)]), (thin, [(4, 5), (4, 1)])])
def test_steps_reversed_axes_and_axes_of_length_one(f, shapes):
    u, w = rng().normal(size=shapes[0]), rng(1).normal(size=shapes[1])
    jitted = s2sad.grad(f, wrt="u", jit="strict")
    got = jitted(u, w)
    assert fused_ran(jitted)
    np.testing.assert_allclose(got, s2sad.grad(f, wrt="u")(u, w), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, fd_grad(f, (u, w), 0), rtol=1e-6, atol=1e-7)
    assert re.search(
        r"du = (np\.zeros\(|pooled_zeros\(workspace, \d+, )u\.shape, ", s2sad.source(jitted)
    )


def test_a_loop_adding_into_its_carried_gradient_keeps_its_add_at():
    """`add_at(du, ...)` into the gradient a loop carries (not made by the run) stays as it was."""
    u = rng().normal(size=(5, 6))
    jitted = s2sad.grad(in_loop, wrt="u", jit="strict")
    got = jitted(u, 3)
    np.testing.assert_allclose(got, s2sad.grad(in_loop, wrt="u")(u, 3), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, fd_grad(in_loop, (u, 3), 0), rtol=1e-6, atol=1e-7)
    assert "add_at(du, " in s2sad.source(jitted)


def test_slices_of_two_shapes_are_not_joined():
    u = rng().normal(size=(4, 5))
    jitted = s2sad.grad(two_shapes, wrt="u", jit="strict")
    np.testing.assert_allclose(
        jitted(u), s2sad.grad(two_shapes, wrt="u")(u), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(jitted(u), fd_grad(two_shapes, (u,), 0), rtol=1e-6, atol=1e-7)


def test_a_parallel_build_does_not_fuse_its_scatters():
    """Threads would race on `du[i0 + 1, i1]` and `du[i0, i1]`: builds on threads stay unfused."""
    u = rng().normal(size=(6, 5))
    parallel = s2sad.grad(stencil, wrt="u", jit=True, parallel=True)
    got = parallel(u, 0.7)
    np.testing.assert_allclose(got, s2sad.grad(stencil, wrt="u")(u, 0.7), rtol=1e-12, atol=1e-12)
    assert "du[i0 + 1, i1]" not in s2sad.source(parallel)


def test_slices_of_the_leading_axis_alone():
    """`u[1:]` of a matrix: its index `slice(1, None, None)` names one axis of two."""
    u = rng().normal(size=(5, 3))
    compiled = transform(rows, ("u",), "grad", (("u", 2),), True)
    got, calls = in_python(compiled, u)
    np.testing.assert_allclose(got, s2sad.grad(rows, wrt="u")(u), rtol=1e-12, atol=1e-12)
    assert calls == 0 and "du[j0, j1] = du_j" in compiled.source
    assert "u[1:].shape == " in compiled.source


# ----------------------------------------------------------------------------- random slices


def _length(n: int, part: tuple) -> int:
    return len(range(n)[slice(*part)])


@st.composite
def _axis(draw, n: int):
    """Two slices of an axis of length `n` of one length (overlapping, reversed or not), as
    source text and as (start, stop, step)."""
    step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
    lower = draw(st.sampled_from([None, 0, 1, 2, -1, -2, -n - 2, n + 1]))
    upper = draw(st.sampled_from([None, 0, 1, 3, -1, -3, n + 2]))
    first = (lower, upper, step)
    length = _length(n, first)
    candidates = []
    for by in (1, 2, -1, -2):
        for start in range(n):
            last = start + (length - 1) * by
            if length == 0 or 0 <= last < n:
                stop = start + length * by
                if by < 0 and stop < 0:
                    stop -= n  # (past index 0 going down, not counted from the end)
                candidates.append((start, stop, by))
    second = draw(st.sampled_from(candidates)) if candidates else first
    assert _length(n, second) == length
    return first, second


def _text(part: tuple) -> str:
    lower, upper, step = ("" if p is None else str(p) for p in part)
    return f"{lower}:{upper}" + (f":{step}" if step else "")


@st.composite
def _cases(draw):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(0, 5 if rank < 3 else 3)) for _ in range(rank))
    axes = [draw(_axis(n)) for n in shape]
    first = ", ".join(_text(a[0]) for a in axes)
    second = ", ".join(_text(a[1]) for a in axes)
    # a slice known to have length 1 (`u[2:3]`) is read by broadcasting: another loop shape
    unit = any(_unit(part) for axis in axes for part in axis)
    return shape, first, second, unit


def _unit(part: tuple) -> bool:
    lower, upper, step = part
    if step not in (None, 1):
        return False
    if lower == -1 and upper is None:
        return True
    lower = 0 if lower is None else lower
    return upper is not None and upper - lower == 1 and (lower >= 0 or upper < 0)


def fused_in_python(tmp_path_factory, name: str, text: str, shape: tuple):
    """The fused code of `f(u)` in the module `text`, run by Python at a random `u` of `shape`,
    checked against Python mode's gradient. Returns (how many scatters it left to helpers,
    the transform)."""
    from conftest import load_module

    module = load_module(tmp_path_factory.mktemp(name), name, text)
    u = rng().normal(size=shape)
    compiled = transform(module.f, ("u",), "grad", (("u", len(shape)),), True)
    got, calls = in_python(compiled, u)
    expected = s2sad.grad(module.f, wrt="u")(u)
    assert got.shape == u.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    return calls, compiled


@settings(max_examples=40, deadline=None)
@given(_cases())
def test_random_slices_scattered_in_the_loop_give_python_modes_gradient(tmp_path_factory, case):
    shape, first, second, unit = case
    text = (
        "import numpy as np\n\n\ndef f(u):\n"
        f"    a = u[{first}]\n    b = u[{second}]\n"
        "    return np.sum(a * b + np.sin(a) * a)\n"
    )
    calls, _ = fused_in_python(tmp_path_factory, "slices_case", text, shape)
    if not unit:
        assert calls == 0  # both slices' cotangents added in the loop

"""Fused runs in the forms LLVM vectorises (s2sad/pipeline/fusion/gather.py), and the jitted
grad that leaves out the value: the adjoint's slice scatters written as a gather (each element
of the gradient computed once, from the cotangents at shifted positions, the frame of elements
some slice misses taken separately), views read through the array they view (`u[j0, j1 - 1]`
for `c[j0, j1 - 1]` of `c = u[:-1, :-1]`), and `grad(jit=True)` returning `output_kind(value)`,
so Numba drops the code computing the value. Each must give Python mode's numbers, and finite
differences', for any shapes, starts and stops, empty and length-1 axes included."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_jit_fuse import fd_grad, fused_ran, rng, stencil
from test_jit_fuse_slices import fused_in_python, in_python

import s2sad
from s2sad.transform_cache import transform


def five_point(u, k):
    """A five-point stencil: slices with starts 0, 1 and 2 along both axes."""
    c = u[1:-1, 1:-1]
    lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c
    return np.sum(k * lap * lap + c * c * c)


def rebound(u):
    """`u` rebound after its view is taken: the view is not read through `u`."""
    c = u[1:]
    u = u * 2.0
    return np.sum(c * c * u[:-1])


def integer_output(x):
    return np.sum(x > 0.0)


@pytest.mark.parametrize("shape", [(9, 7), (3, 3), (2, 2), (1, 4), (4, 1), (0, 3), (3, 0)])
def test_the_stencils_gradient_is_gathered(shape):
    u = rng().normal(size=shape)
    jitted = s2sad.grad(stencil, wrt="u", jit="strict")
    got = jitted(u, 0.7)
    expected = s2sad.grad(stencil, wrt="u")(u, 0.7)
    assert got.shape == u.shape and got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    if u.size:
        np.testing.assert_allclose(got, fd_grad(stencil, (u, 0.7), 0), rtol=1e-6, atol=1e-7)
    assert fused_ran(jitted)
    compiled = transform(stencil, ("u",), "grad", (("u", 2), ("k", 0)), True)
    du, calls = in_python(compiled, u, 0.7)  # the gather's logic, run by Python
    np.testing.assert_allclose(du, expected, rtol=1e-12, atol=1e-12)
    assert calls == 0


def test_the_gather_reads_the_array_viewed_and_adds_nothing_into_the_gradient():
    source = s2sad.source(
        s2sad.grad(stencil, wrt="u", jit="strict"), rng().normal(size=(5, 4)), 0.7
    )
    adjoint = source.split("# adjoint sweep")[1].split("    else:\n        # line")[0]
    assert re.search(r"du = (np\.empty\(|pooled\(workspace, \d+, )u\.shape, ", adjoint)
    assert "du[j0, j1] = du_j" in adjoint
    assert "for j1 in range(1, c.shape[1]):" in adjoint  # every slice covers these
    assert "u[j0, j1 - 1]" in adjoint and "u[j0 - 1, j1]" in adjoint  # ddh, ddv shifted
    assert "c[" not in adjoint and "dv_item[" not in adjoint  # views read through u
    assert "du[" not in adjoint.replace("du[j0, j1] = du_j", "")  # one write per element


def test_arrays_of_other_layouts_are_read_through_their_strides():
    """A transposed or strided `u`: Numba compiles the reads `u[j0, j1 - 1]` for its layout."""
    base = rng().normal(size=(9, 12))
    jitted = s2sad.grad(stencil, wrt="u", jit="strict")
    for u in (base.T, base[::2, 1::3]):
        got = jitted(u, 0.7)
        assert fused_ran(jitted) and got.shape == u.shape
        np.testing.assert_allclose(
            got, s2sad.grad(stencil, wrt="u")(u, 0.7), rtol=1e-12, atol=1e-12
        )


def test_a_five_point_stencil_with_starts_of_two():
    u = rng().normal(size=(6, 7))
    jitted = s2sad.grad(five_point, wrt="u", jit="strict")
    got = jitted(u, 0.3)
    assert fused_ran(jitted) and "du[j0, j1] = du_j" in s2sad.source(jitted)
    np.testing.assert_allclose(got, s2sad.grad(five_point, wrt="u")(u, 0.3), rtol=1e-12)
    np.testing.assert_allclose(got, fd_grad(five_point, (u, 0.3), 0), rtol=1e-6, atol=1e-7)


def test_a_view_of_a_rebound_array_is_read_as_the_view():
    u = rng().normal(size=7)
    jitted = s2sad.grad(rebound, wrt="u", jit="strict")
    got = jitted(u)
    np.testing.assert_allclose(got, s2sad.grad(rebound, wrt="u")(u), rtol=1e-12)
    np.testing.assert_allclose(got, fd_grad(rebound, (u,), 0), rtol=1e-6, atol=1e-7)
    assert "c[i0]" in s2sad.source(jitted)  # not `u[i0 + 1]`: u names another array there


def test_a_jitted_grad_returns_the_outputs_kind_not_its_value():
    jitted = s2sad.grad(stencil, wrt="u", jit="strict")
    u = rng().normal(size=(5, 6))
    jitted(u, 0.7)
    assert "return output_kind(stencil), in_dtype_of(du, u)" in s2sad.source(jitted)
    both = s2sad.value_and_grad(stencil, wrt="u", jit="strict")
    value, grad = both(u, 0.7)
    assert value == pytest.approx(stencil(u, 0.7), rel=1e-12)
    # the value's sum over two axes: one per column (vectorised), added up after the loops
    fused = s2sad.source(both).split("else:")[0]
    assert "stencil_columns[i1] += stencil_add2_i" in fused
    assert "stencil = np.sum(stencil_columns)" in fused
    # grad reads the value for its kind alone: no loop computes it
    fused = code_of(s2sad.source(jitted).split("# adjoint sweep")[0].split("else:")[0])
    assert "stencil = in_dtype_of(0.0, dv_item)" in fused
    assert "for i0" not in fused and "np.sum" not in fused
    np.testing.assert_allclose(grad, jitted(u, 0.7), rtol=1e-12, atol=1e-12)
    with pytest.raises(s2sad.NonScalarOutputError):
        s2sad.grad(integer_output, jit=True)(u)


@pytest.mark.parametrize("shape", [(5, 6), (2, 1), (1, 3), (0, 4), (4, 0), (3, 2, 4), (6,)])
def test_a_fused_sums_columns_give_python_modes_value(shape):
    """The fused value's sum, per column over two axes or more (one accumulator over one),
    run by Python: the value within rounding of NumPy's, empty and length-1 axes too."""
    u = rng().normal(size=shape)
    x = rng(1).normal(size=shape)
    compiled = transform(
        squares, ("u",), "value_and_grad", (("u", len(shape)), ("x", len(shape))), True
    )
    (value, grad), _ = in_python(compiled, u, x)
    assert value == pytest.approx(squares(u, x), rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(grad, s2sad.grad(squares)(u, x), rtol=1e-12, atol=1e-12)
    fused = compiled.source.split("else:")[0]
    assert ("squares_columns" in fused) == (len(shape) > 1)
    assert ("squares_lanes" in fused) == (len(shape) == 1)


@pytest.mark.parametrize("f", ["squares", "tripled", "squared_total"])
@pytest.mark.parametrize("shape", [(5, 6), (7,), (0, 3)])
def test_a_jitted_grads_sum_read_for_its_kind_alone_is_not_computed(f, shape):
    """grad(jit=True) returns the output's kind, not its value: a fused sum that only it reads
    (itself the output, or through arithmetic making it) is a number of its kind, no loop or
    columns computing it; one the adjoint reads is summed. The gradient, run by Python, is
    Python mode's and finite differences'."""
    f = globals()[f]
    u, x = rng().normal(size=shape), rng(1).normal(size=shape)
    ranks = (("u", len(shape)), ("x", len(shape)))
    compiled = transform(f, ("u",), "checked_grad", ranks, True)
    (kind, grad), _ = in_python(compiled, u, x)
    assert isinstance(kind, float)
    np.testing.assert_allclose(grad, s2sad.grad(f)(u, x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, fd_grad(f, (u, x), 0), rtol=1e-6, atol=1e-6)
    fused = code_of(compiled.source.split("# adjoint sweep")[0].split("else:")[0])
    computed = f is squared_total
    assert ("for i0" in fused) == computed
    assert ("+=" in fused) == computed
    assert ("in_dtype_of(0.0, u)" in fused) != computed


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 70])
def test_a_fused_one_loop_sum_in_lanes_gives_python_modes_value_and_gradient(n):
    """One loop's full sum in 32 lanes over whole blocks, then the elements after them: every
    element added once (lengths around a block's), the gradient Python mode's and finite
    differences'."""
    u, x = rng().normal(size=n), rng(1).normal(size=n)
    compiled = transform(squares, ("u",), "value_and_grad", (("u", 1), ("x", 1)), True)
    (value, grad), _ = in_python(compiled, u, x)
    assert value == pytest.approx(squares(u, x), rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(grad, s2sad.grad(squares)(u, x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, fd_grad(squares, (u, x), 0), rtol=1e-6, atol=1e-6)
    assert "squares_lanes[i0 - i0_start] += " in compiled.source
    assert "for i0 in range(i0_start, i0_start + 32):" in compiled.source


def test_a_sum_in_lanes_is_closer_to_the_exact_sum_than_one_accumulator():
    """Lanes of 1/32 of the elements each: an error within a few of NumPy's pairwise sum's,
    below one accumulator's (math.fsum the exact sum)."""
    t = rng(2).random(20_000) * 1e3 + 1e6
    ones = np.ones_like(t)
    compiled = transform(total, ("t",), "value_and_grad", (("t", 1), ("w", 1)), True)
    (value, _), _ = in_python(compiled, t, ones)
    exact = math.fsum(t)
    running = 0.0
    for v in t:
        running += v
    assert abs(value - exact) < abs(running - exact)
    assert abs(value - exact) <= 4 * max(abs(np.sum(t) - exact), np.spacing(exact))


def total(t, w):
    return np.sum(t * w)


def squares(u, x):
    return np.sum(u * u * x + np.sin(u))


def code_of(source: str) -> str:
    """`source` without its comments (which quote the user's lines)."""
    return "\n".join(line for line in source.splitlines() if not line.strip().startswith("#"))


def tripled(u, x):
    s = np.sum(u * u * x + np.sin(u))
    return -(3.0 * s - 1.0) / 2.0


def squared_total(u, x):
    s = np.sum(u * x)
    return s * s - s


@st.composite
def _cases(draw):
    """Two to three slices of one shape with steps of 1 and starts >= 0 (the gather's), as
    source text, over an array of rank 1 to 3."""
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(0, 6 if rank < 3 else 4)) for _ in range(rank))
    count = draw(st.integers(2, 3))
    lengths = [draw(st.integers(0, n)) for n in shape]
    texts = []
    for _ in range(count):
        parts = []
        for n, length in zip(shape, lengths):
            start = draw(st.integers(0, n - length))
            end = start + length
            stop = end - n if draw(st.booleans()) and end < n else end  # from the end
            parts.append(f"{start or ''}:{'' if stop == n else stop}")
        texts.append(", ".join(parts))
    return shape, texts, lengths


@settings(max_examples=40, deadline=None)
@given(_cases())
def test_random_slices_gathered_give_python_modes_gradient(tmp_path_factory, case):
    shape, texts, lengths = case
    reads = "\n".join(f"    s{k} = u[{t}]" for k, t in enumerate(texts))
    terms = " + ".join(f"s{k} * s{(k + 1) % len(texts)} * {k + 1}.0" for k in range(len(texts)))
    text = f"import numpy as np\n\n\ndef f(u):\n{reads}\n    return np.sum({terms} + np.sin(s0))\n"
    calls, compiled = fused_in_python(tmp_path_factory, "gather_case", text, shape)
    if 1 not in lengths:  # (a slice `u[2:3]` is read by broadcasting: another loop shape)
        assert calls == 0 and "du_j = 0.0" in compiled.source

"""Fusion in jitted code (s2sad/pipeline/fusion): runs of elementwise statements become one loop
nest behind a `fusible(...)` guard, the original statements in its `else`. The fused code must
give Python mode's numbers (and finite differences'), keep the dtypes of Python mode, take the
original path where shapes broadcast, and leave alone what it cannot fuse."""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from s2sad.pipeline.fusion import fuse
from test_control_flow import recur

G = np.linspace(0.5, 1.5, 6)  # a global array: data, whose rank the transform does not know


def chain(x, y, s):
    a = np.tanh(x * y) + s
    b = a * a - np.exp(-y) / (1.0 + y * y)
    return np.sum(b * x + np.maximum(a, 0.1))


def stencil(u, k):
    c = u[:-1, :-1]
    dv = u[1:, :-1] - c
    dh = u[:-1, 1:] - c
    return np.sum(0.5 * k * (dv * dv + dh * dh) + 0.25 * (c * c - 1.0) ** 2)


def looped(x, w, n):
    for i in range(n):
        t = x * w
        x = np.tanh(t) + 0.5 * x
    return np.sum(x * x)


def written(x, y):
    z = x * y + 1.0
    a = z
    b = a * 2.0 + z
    w = z * np.sin(z)
    w[0] = 0.0
    return np.sum(w * x) + np.sum(a * b)


def written_after(x, y):
    d = x - y
    e = d * d + x
    s = np.sum(e * y)
    x[0] = 10.0  # the loops after must not recompute d and e from this x
    return s + np.sum(x * y)


def with_global(x):
    t = x * G
    u = np.tanh(t) * G
    return np.sum(u * u)


def mixed(x, m):
    return np.sum(x * m + np.sin(x) * m)


def fd_grad(f, args, index, eps=1e-6):
    """Central differences of f with respect to argument `index` (a float64 array)."""
    x = np.array(args[index], dtype=float)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        a = list(args)
        a[index] = up
        hi = f(*a)
        a[index] = down
        g[i] = (hi - f(*a)) / (2 * eps)
    return g


def fused_ran(transformed) -> bool:
    """Whether the last call ran the fused code Numba compiled (not the unfused code it falls
    back to where it cannot type the fused one)."""
    jitted = transformed.compiled.jitted
    return jitted is not None and jitted.unfused is None and not jitted.failed


def in_python(transformed, *args):
    """The jitted transform's code run by Python with its guards true where the arrays share a
    shape: the fused loops' logic checked apart from Numba (which reads a name left unassigned
    as garbage where Python raises). Returns what the generated function returns."""
    function = transformed.compiled.function
    namespace = function.__globals__
    kept = namespace["fusible"]
    namespace["fusible"] = lambda *a: all(b.shape == a[0].shape for b in a)
    try:
        return function(*args)
    finally:
        namespace["fusible"] = kept


def assert_close(got, expected, rtol=1e-12):
    if isinstance(expected, tuple):
        for g, e in zip(got, expected):
            assert_close(g, e, rtol)
    else:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol)


def rng(seed=0):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("shape", [(7,), (4, 5), (2, 3, 4)])
def test_fused_chains_give_python_modes_numbers(shape):
    x, y = rng().normal(size=shape), rng(1).normal(size=shape)
    jitted = s2sad.grad(chain, wrt=(0, 1), jit="strict")
    gx, gy = jitted(x, y, 0.3)
    assert fused_ran(jitted)
    ex, ey = s2sad.grad(chain, wrt=(0, 1))(x, y, 0.3)
    np.testing.assert_allclose(gx, ex, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gy, ey, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gx, fd_grad(chain, (x, y, 0.3), 0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gy, fd_grad(chain, (x, y, 0.3), 1), rtol=1e-6, atol=1e-7)
    assert_close(in_python(jitted, x, y, 0.3)[1], (ex, ey))
    source = s2sad.source(jitted)
    assert "if fusible(" in source and "for i0 in range(" in source
    assert f"for i{len(shape) - 1} in range(" in source


def test_fused_vjp_and_jvp_give_python_modes_numbers():
    x, y = rng().normal(size=(3, 4)), rng(1).normal(size=(3, 4))
    out, pullback = s2sad.vjp(chain, wrt=(0, 1), jit="strict")(x, y, 0.3)
    expected_out, expected_pullback = s2sad.vjp(chain, wrt=(0, 1))(x, y, 0.3)
    np.testing.assert_allclose(out, expected_out, rtol=1e-12)
    for got, expected in zip(pullback(2.0), expected_pullback(2.0)):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    tx, ty = rng(2).normal(size=(3, 4)), rng(3).normal(size=(3, 4))
    jvp = s2sad.jvp(chain, wrt=(0, 1), jit="strict")
    value, tangent = jvp(x, y, 0.3, tangent=(tx, ty))
    assert fused_ran(jvp) and "if fusible(" in s2sad.source(jvp)
    expected = s2sad.jvp(chain, wrt=(0, 1))(x, y, 0.3, tangent=(tx, ty))
    np.testing.assert_allclose(value, expected[0], rtol=1e-12)
    np.testing.assert_allclose(tangent, expected[1], rtol=1e-10, atol=1e-12)


# shapes of one rank that broadcast against each other (the guard fails: the original path)
_SHAPES = st.tuples(st.integers(1, 4), st.integers(1, 4)).flatmap(
    lambda s: st.tuples(
        st.just(s), st.tuples(st.sampled_from([1, s[0]]), st.sampled_from([1, s[1]]))
    )
)


@settings(max_examples=25, deadline=None)
@given(_SHAPES)
def test_broadcasting_inputs_take_the_original_statements(shapes):
    x_shape, y_shape = shapes
    x, y = rng().normal(size=x_shape), rng(1).normal(size=y_shape)
    jitted = s2sad.grad(chain, wrt=(0, 1), jit="strict")
    gx, gy = jitted(x, y, 0.3)
    ex, ey = s2sad.grad(chain, wrt=(0, 1))(x, y, 0.3)
    assert gx.shape == x.shape and gy.shape == y.shape
    np.testing.assert_allclose(gx, ex, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gy, ey, rtol=1e-12, atol=1e-12)
    assert fused_ran(jitted)
    code = jitted.compiled.jitted
    # the fused loops where the shapes agree; else the code with the `else:` branches
    # (fused_guards.py)
    ran = code.ran(jitted.compiled.name, (x, y, 0.3))
    assert ran is (code if x.shape == y.shape else code.branched) and ran is not None
    assert_close(in_python(jitted, x, y, 0.3)[1], (ex, ey))


def test_views_and_non_contiguous_inputs():
    base = rng().normal(size=(9, 12))
    x, y = base[::2, ::3], np.asfortranarray(rng(1).normal(size=(5, 4)))
    jitted = s2sad.grad(chain, wrt=(0, 1), jit="strict")
    for got, expected in zip(jitted(x, y, 0.3), s2sad.grad(chain, wrt=(0, 1))(x, y, 0.3)):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert fused_ran(jitted)
    u = rng(2).normal(size=(13, 11))
    jitted = s2sad.grad(stencil, wrt="u", jit="strict")
    np.testing.assert_allclose(jitted(u, 0.7), s2sad.grad(stencil, wrt="u")(u, 0.7), rtol=1e-12)
    np.testing.assert_allclose(jitted(u, 0.7), fd_grad(stencil, (u, 0.7), 0), rtol=1e-6)
    assert fused_ran(jitted)
    assert_close(in_python(jitted, u, 0.7)[1], s2sad.grad(stencil, wrt="u")(u, 0.7))


def test_float32_inputs_keep_python_modes_dtypes():
    x = rng().normal(size=(3, 4)).astype(np.float32)
    y = rng(1).normal(size=(3, 4)).astype(np.float32)
    jitted = s2sad.value_and_grad(chain, wrt=(0, 1), jit="strict")
    value, (gx, gy) = jitted(x, y, 0.3)
    # the statements between the two runs (`np.maximum`'s tie weights, `even_split`) make
    # float32 arrays in compiled code, which the adjoint's float32 run reads: fused on the first
    # compile (float64 weights made them float64, and the code was compiled again unfused)
    assert fused_ran(jitted)
    e_value, (ex, ey) = s2sad.value_and_grad(chain, wrt=(0, 1))(x, y, 0.3)
    assert gx.dtype == ex.dtype == np.float32 and gy.dtype == np.float32
    assert value == pytest.approx(e_value, rel=1e-5)
    np.testing.assert_allclose(gx, ex, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gy, ey, rtol=1e-5, atol=1e-5)


def test_integer_and_zero_size_and_zero_d_inputs():
    x, m = rng().normal(size=5), np.arange(5)
    got = s2sad.grad(mixed, wrt="x", jit="strict")(x, m)
    np.testing.assert_allclose(got, s2sad.grad(mixed, wrt="x")(x, m), rtol=1e-12)
    empty = np.zeros((0, 3))
    jitted = s2sad.grad(chain, wrt=(0, 1), jit="strict")
    for got, expected in zip(jitted(empty, empty, 0.3), (empty, empty)):
        assert got.shape == expected.shape
    x, y = rng().normal(size=4), rng(1).normal(size=4)
    got = s2sad.grad(chain, wrt=(0, 1), jit="strict")(x, y, np.array(0.3))
    expected = s2sad.grad(chain, wrt=(0, 1))(x, y, np.array(0.3))
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_chains_in_loop_bodies_with_tapes():
    x, w = rng().normal(size=6), rng(1).normal(size=6)
    jitted = s2sad.grad(looped, wrt=(0, 1), jit="strict")
    gx, gw = jitted(x, w, 4)
    assert "if fusible(" in s2sad.source(jitted)
    assert fused_ran(jitted)
    ex, ew = s2sad.grad(looped, wrt=(0, 1))(x, w, 4)
    np.testing.assert_allclose(gx, ex, rtol=1e-12)
    np.testing.assert_allclose(gw, ew, rtol=1e-12)
    np.testing.assert_allclose(gw, fd_grad(looped, (x, w, 4), 1), rtol=1e-6)
    assert_close(in_python(jitted, x, w, 4)[1], (ex, ew))


def test_chains_feeding_in_place_writes_and_aliases():
    x, y = rng().normal(size=5), rng(1).normal(size=5)
    jitted = s2sad.value_and_grad(written, wrt=(0, 1), jit="strict")
    value, (gx, gy) = jitted(x, y)
    e_value, (ex, ey) = s2sad.value_and_grad(written, wrt=(0, 1))(x, y)
    assert value == pytest.approx(e_value, rel=1e-12) == written(x.copy(), y.copy())
    np.testing.assert_allclose(gx, ex, rtol=1e-12)
    np.testing.assert_allclose(gy, ey, rtol=1e-12)
    np.testing.assert_allclose(gx, fd_grad(written, (x, y), 0), rtol=1e-6)
    assert fused_ran(jitted) and "if fusible(" in s2sad.source(jitted)
    assert_close(in_python(jitted, x, y), (e_value, (ex, ey)))


def test_values_are_not_recomputed_from_arrays_written_in_place():
    x, y = rng().normal(size=6), rng(1).normal(size=6)
    jitted = s2sad.grad(written_after, wrt=(0, 1), jit="strict")
    got = jitted(x, y)
    expected = s2sad.grad(written_after, wrt=(0, 1))(x, y)
    assert_close(got, expected)
    assert_close(in_python(jitted, x, y)[1], expected)
    np.testing.assert_allclose(got[0], fd_grad(written_after, (x, y), 0), rtol=1e-6)
    source = s2sad.source(jitted)
    assert "if fusible(" in source  # stored, not recomputed
    assert re.search(r"\bd = (np\.empty\(|pooled\(workspace, )", source)


def test_the_stencils_loops_recompute_rather_than_store():
    """The stencil's primal stores nothing, and computes no sum (a jitted grad reads the value
    for its kind alone); the adjoint's loop recomputes the differences it reads instead of the
    primal storing them."""
    jitted = s2sad.grad(stencil, wrt="u", jit="strict")
    jitted(rng().normal(size=(5, 5)), 0.5)
    source = s2sad.source(jitted)
    primal, adjoint = source.split("# adjoint sweep")
    fused_primal = primal.split("if fusible(")[1].split("else:")[0]
    assert "np.empty(" not in fused_primal and "pooled(" not in fused_primal
    assert "for i0" not in fused_primal
    assert "np.sum(" in primal.split("else:")[1]  # the original statements, unfused
    # (one guard, its pairs of arrays on lines of their own)
    assert len(re.findall(r"if \(?\s*fusible\(", adjoint)) == 1 and "for j1" in adjoint


def test_unfusable_code_is_left_alone():
    jitted = s2sad.grad(with_global, jit="strict")
    x = rng().normal(size=6)
    np.testing.assert_allclose(jitted(x), s2sad.grad(with_global)(x), rtol=1e-12)
    assert "fusible" not in s2sad.source(jitted)  # the global's rank is unknown

    def single(x, y):
        return np.sum(x * y)

    assert "fusible" not in s2sad.source(s2sad.grad(single, wrt=(0, 1), jit="strict"))


# random chains, their fused code run by Python (Numba compiles none of them: the loops' logic)
_UNARY = ["np.tanh({})", "np.sin({})", "({} * {})", "np.exp(0.1 * {})", "-{}", "np.abs({})"]
_BINARY = [
    "{} + {}",
    "{} - {}",
    "{} * {}",
    "{} / (1.0 + {} ** 2)",
    "np.maximum({}, {})",
    "np.where({0} > {1}, {0}, 0.5 * {1})",
]


@st.composite
def _chains(draw):
    names, lines = ["x", "y"], []
    for k in range(draw(st.integers(2, 6))):
        a = draw(st.sampled_from(names))
        if draw(st.booleans()):
            b = draw(st.sampled_from(names + ["s", "2.0"]))
            expr = draw(st.sampled_from(_BINARY)).format(a, b)
        else:
            expr = draw(st.sampled_from(_UNARY)).format(a, a)
        lines.append(f"    t{k} = {expr}")
        names.append(f"t{k}")
    out = draw(st.sampled_from(names[2:]))
    tail = "np.sum({} * x)" if draw(st.booleans()) else "np.sum({}) + np.sum(x * {})"
    return (
        "import numpy as np\n\n\ndef chain(x, y, s):\n"
        + "\n".join(lines)
        + f"\n    return {tail.format(out, out)}\n"
    )


@settings(max_examples=40, deadline=None)
@given(_chains(), st.sampled_from([(5,), (3, 4), (2, 1, 3)]))
def test_random_chains_fused_give_python_modes_gradient(tmp_path_factory, text, shape):
    from conftest import load_module
    from s2sad.transform_cache import transform

    module = load_module(tmp_path_factory.mktemp("chains"), "fused_chain", text)
    x, y = rng().normal(size=shape), rng(1).normal(size=shape)
    ranks = (("x", len(shape)), ("y", len(shape)), ("s", 0))
    compiled = transform(module.chain, ("x", "y"), "grad", ranks, True)

    class Jitted:  # what in_python reads
        pass

    Jitted.compiled = compiled
    got = in_python(Jitted, x, y, 0.3)  # (the gradients: "grad" has no value)
    assert_close(got, s2sad.grad(module.chain, wrt=(0, 1))(x, y, 0.3), rtol=1e-10)


def recomputed_then_aliased(x):
    """`y` is read only by a later fused run, as `v = y`, and `v` is read after that run: the
    array itself is named, so it is stored, not recomputed (found by the break-it review: the
    fused code read `y` unassigned)."""
    y = np.sin(x * x)
    m = x > 0.0
    v = y
    return np.sum(v * v) + np.sum(np.where(m, x, 0.0))


@pytest.mark.parametrize("shape", [(1,), (6,), (3, 4)])
def test_an_alias_of_a_value_a_later_run_reads_is_stored(shape):
    x = np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape)
    want = s2sad.grad(recomputed_then_aliased)(x)
    np.testing.assert_allclose(s2sad.grad(recomputed_then_aliased, jit="strict")(x), want)
    out, pullback = s2sad.vjp(recomputed_then_aliased, jit="strict")(x)
    np.testing.assert_allclose(pullback(1.0), want)


def test_a_name_the_run_rebinds_twice_stays_in_one_loop():
    """`dt = dt + a * b` then `dt = dt + c * b`, `dt` made before the run (an adjoint's two
    contributions): one loop, reading the first `dt` while writing a new array."""
    text = "dt = g[:, 0]\ndt = dt + a * b\ndt = dt + np.sin(dt) * b\nout = dt * a\n"
    stmts = ast.parse(text).body
    ranks = {"g": 2, "dt": 1, "a": 1, "b": 1, "out": 1}

    def rank_of(node):
        return ranks.get(node.id) if isinstance(node, ast.Name) else None

    reads = [ast.Name("out", ast.Load()), ast.Name("dt", ast.Load())]
    [fused] = fuse([stmts], rank_of, reads, set(ranks) | {"np"})
    source = ast.unparse(ast.fix_missing_locations(ast.Module(fused, [])))
    assert source.count("for i0 in") == 1 and "dt_out" in source
    g, a, b = rng().normal(size=(5, 2)), rng(1).normal(size=5), rng(2).normal(size=5)
    helpers = {"np": np, "fusible": lambda *x: True, "in_dtype_of": lambda v, x: v}
    space = dict(helpers, g=g, a=a, b=b)
    exec(source, space)
    plain = dict(helpers, g=g, a=a, b=b)
    exec(text, plain)
    for name in ("out", "dt"):
        np.testing.assert_allclose(space[name], plain[name], rtol=1e-15)
    np.testing.assert_array_equal(g, rng().normal(size=(5, 2)))  # `g` left as it was


def test_a_runs_casts_sit_under_its_unfused_branchs_line():
    """`dy = in_dtype_of(dy, y)`, closing a run's unfused branch, is of that branch's last line
    (under its `# line` comment), not of the run's last statement, left after the branches
    (`da = 0.0`, of the loop's line): no comment of its own naming another line."""
    text = s2sad.source(s2sad.grad(recur, wrt=(0, 1), jit=True), np.ones(4), 0.5)
    lines = text.splitlines()
    casts = [k for k, line in enumerate(lines) if re.match(r"\s*(\w+) = in_dtype_of\(\1,", line)]
    assert casts and all(not lines[k - 1].strip().startswith("#") for k in casts), text

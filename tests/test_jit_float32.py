"""float32 under Numba: gradients (and tangents) have their inputs' dtype in every mode (Python,
jit=True, jit="strict", modules `s2sad emit` writes, with and without --jit), values keep the
dtype Python mode gives, and fused loops (pipeline/fusion) run for float32 arrays with Python
mode's numbers within float32 rounding (their sums accumulated in float64)."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from s2sad.cli import emit_text

MODES = [False, True, "strict"]


def energy2d(u, k):
    c = u[:-1, :-1]
    dv = u[1:, :-1] - c
    dh = u[:-1, 1:] - c
    return np.sum(0.5 * k * (dv * dv + dh * dh) + 0.25 * (c * c - 1.0) ** 2)


def layer(x, W, b):
    h = np.tanh(x @ W + b)
    return np.sum(h * h)


def field(u, k):
    return np.tanh(k * u) * u + 0.5 * u


def gated(u, w):
    return np.tanh(u * w) * u


def weighted(u, w):
    d = u[1:] - u[:-1]
    return np.sum(w * d * d + np.sin(u[1:]))


def rng(seed=0):
    return np.random.default_rng(seed)


def fused_ran(transformed) -> bool:
    """Whether the last call ran the fused code Numba compiled, not its unfused fallback."""
    jitted = transformed.compiled.jitted
    return jitted is not None and jitted.unfused is None and not jitted.failed


def fused_ran_for(transformed, *args) -> bool:
    """Whether a call with `args` (the generated function's: no data) runs the fused code,
    though calls with other kinds of arguments took the unfused code."""
    jitted = transformed.compiled.jitted
    return jitted.ran(transformed.compiled.name, args) is jitted


def fd_grad(f, args, index, eps=1e-6):
    """Central differences in float64 of f in argument `index`, every array argument cast to
    float64."""
    args = [np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) else a for a in args]
    x = args[index]
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (
            f(*args[:index], up, *args[index + 1 :]) - f(*args[:index], down, *args[index + 1 :])
        ) / (2 * eps)
    return g


def close32(got, expected, scale=None):
    """Equal within float32 rounding, relative to the largest magnitude."""
    scale = np.max(np.abs(expected)) if scale is None else scale
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * max(scale, 1.0))


def energy_args(n=12):
    return rng().normal(size=(n, n)).astype(np.float32), 0.7


def layer_args():
    x = rng().normal(size=(9, 4)).astype(np.float32)
    W = rng(1).normal(size=(4, 3)).astype(np.float32)
    b = rng(2).normal(size=3).astype(np.float32)
    return x, W, b


# ----------------------------------------------------------------------------- s2sad's modes


@pytest.mark.parametrize("jit", MODES)
@pytest.mark.parametrize("case", ["energy2d", "layer"])
def test_gradients_and_values_keep_float32_in_every_mode(case, jit):
    f, args, wrt = {
        "energy2d": (energy2d, energy_args(), "u"),
        "layer": (layer, layer_args(), ("x", "W", "b")),
    }[case]
    expected_value, expected = s2sad.value_and_grad(f, wrt=wrt)(*args)
    assert np.asarray(expected_value).dtype == np.float32
    value, grads = s2sad.value_and_grad(f, wrt=wrt, jit=jit)(*args)
    assert type(value) is type(expected_value) and value.dtype == np.float32
    close32(value, expected_value)
    grads = grads if isinstance(grads, tuple) else (grads,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for g, e, a in zip(grads, expected, args):
        assert g.dtype == e.dtype == np.float32 and g.shape == a.shape
        close32(g, e)
    g = s2sad.grad(f, wrt=wrt, jit=jit)(*args)
    for g, a in zip(g if isinstance(g, tuple) else (g,), args):
        assert g.dtype == np.float32
    out, pullback = s2sad.vjp(f, wrt=wrt, jit=jit)(*args)
    assert np.asarray(out).dtype == np.float32
    for g in pullback(np.float32(1.0)) if isinstance(wrt, tuple) else [pullback(np.float32(1.0))]:
        assert g.dtype == np.float32
    tangents = tuple(np.ones_like(a) for a in args[: len(grads)])
    out, out_dot = s2sad.jvp(f, wrt=wrt, jit=jit)(
        *args, tangent=tangents if isinstance(wrt, tuple) else tangents[0]
    )
    assert np.asarray(out).dtype == np.asarray(out_dot).dtype == np.float32


@pytest.mark.parametrize("jit", MODES)
def test_an_array_output_keeps_float32_in_vjp_and_jvp(jit):
    u = rng().normal(size=(5, 4)).astype(np.float32)
    out, pullback = s2sad.vjp(field, wrt="u", jit=jit)(u, 0.3)
    seed = rng(1).normal(size=u.shape).astype(np.float32)
    g = pullback(seed)
    assert out.dtype == g.dtype == np.float32
    e_out, e_pullback = s2sad.vjp(field, wrt="u")(u, 0.3)
    close32(out, e_out)
    close32(g, e_pullback(seed))
    out, out_dot = s2sad.jvp(field, wrt="u", jit=jit)(u, 0.3, tangent=seed)
    assert out.dtype == out_dot.dtype == np.float32
    close32(out_dot, s2sad.jvp(field, wrt="u")(u, 0.3, tangent=seed)[1])


def carried_sum(x):
    s = 0.0
    for i in range(3):
        s = s + np.sum(x) * 0.5
    return s


def scaled_by(x, a):
    return x * a


def widened_inside(x):
    return x * 1.5 + np.zeros(x.shape)


@pytest.mark.parametrize("jit", [True, "strict"])
@pytest.mark.parametrize("f", [carried_sum, scaled_by, widened_inside])
def test_jitted_tangents_have_python_modes_dtype(f, jit):
    """A Python float meeting float32 values: Numba computes float64, NumPy keeps float32; the
    jitted jvp's value and tangent come back in Python mode's dtypes (float64 where the function
    itself widens, `widened_inside`), with its numbers."""
    x = rng().normal(size=4).astype(np.float32)
    t = rng(1).normal(size=4).astype(np.float32)
    args = (x, 1.5) if f is scaled_by else (x,)
    e_out, e_dot = s2sad.jvp(f)(*args, tangent=t)
    out, out_dot = s2sad.jvp(f, jit=jit)(*args, tangent=t)
    assert type(out) is type(e_out) and type(out_dot) is type(e_dot)
    assert out.dtype == e_out.dtype and out_dot.dtype == e_dot.dtype
    close32(out, e_out)
    close32(out_dot, e_dot)
    out, out_dot = s2sad.jvp(f, jit=jit)(*args, tangent=t)  # the dtypes learnt, kept
    assert out_dot.dtype == e_dot.dtype


# ----------------------------------------------------------------------------- fused float32


@pytest.mark.parametrize("k", [0.7, np.float32(0.7)])
def test_the_stencil_fuses_in_float32(k):
    u, _ = energy_args(15)
    jitted = s2sad.value_and_grad(energy2d, jit="strict")
    value, g = jitted(u, k)
    assert fused_ran(jitted)  # a Python float k no longer widens the run's arrays
    source = s2sad.source(jitted, u, k)
    assert re.search(r"du = (np\.empty\(|pooled\(workspace, \d+, )u\.shape, c\.dtype\)", source)
    assert "in_dtype_of(energy2d, " in source
    e_value, e_g = s2sad.value_and_grad(energy2d)(u, k)
    assert value.dtype == e_value.dtype == g.dtype == np.float32
    close32(value, e_value)
    close32(g, e_g)
    close32(g, fd_grad(energy2d, (u, float(k)), 0))


def test_a_large_float32_sum_is_as_accurate_as_numpys():
    u = rng(3).normal(size=(400, 500)).astype(np.float32)
    jitted = s2sad.value_and_grad(energy2d, jit="strict")
    value, _ = jitted(u, 0.7)
    assert fused_ran(jitted)
    exact = energy2d(u.astype(np.float64), 0.7)
    numpy_value = energy2d(u, 0.7)  # NumPy's pairwise float32 sum
    # accumulated in float64, then rounded once: within float32 rounding of the exact sum
    assert abs(value - exact) <= 2 * np.finfo(np.float32).eps * abs(exact)
    assert abs(value - numpy_value) <= 1e-5 * abs(exact)


def test_axis_sums_and_broadcasts_fuse_in_float32():
    args = layer_args()
    jitted = s2sad.value_and_grad(layer, wrt=(0, 1, 2), jit="strict")
    value, grads = jitted(*args)
    assert fused_ran(jitted)
    assert "float_arrays(" in s2sad.source(jitted, *args)
    e_value, e_grads = s2sad.value_and_grad(layer, wrt=(0, 1, 2))(*args)
    assert value.dtype == np.float32
    for k, (g, e) in enumerate(zip(grads, e_grads)):
        assert g.dtype == np.float32 and g.shape == args[k].shape
        close32(g, e)
        close32(g, fd_grad(layer, args, k))


@settings(max_examples=5, deadline=None)
@given(
    rows=st.integers(1, 5),
    cols=st.integers(1, 5),
    kind=st.sampled_from(["row", "column", "full", "scalar"]),
)
def test_float32_broadcasting_shapes_give_python_modes_numbers(rows, cols, kind):
    x = rng().normal(size=(rows, cols)).astype(np.float32)
    shape = {"row": (cols,), "column": (rows, 1), "full": (rows, cols), "scalar": ()}[kind]
    b = rng(1).normal(size=shape).astype(np.float32)

    def f(x, b):
        t = np.tanh(x * b + 0.5) * x
        return np.sum(t * t - b)

    got_value, got = s2sad.value_and_grad(f, wrt=(0, 1), jit="strict")(x, b)
    value, expected = s2sad.value_and_grad(f, wrt=(0, 1))(x, b)
    assert np.asarray(got_value).dtype == np.asarray(value).dtype == np.float32
    close32(got_value, value)
    for g, e, a in zip(got, expected, (x, b)):
        assert g.dtype == np.float32 and g.shape == a.shape
        close32(g, e)


def test_mixed_float32_and_float64_arguments():
    u = rng().normal(size=20).astype(np.float32)
    w = rng(1).uniform(0.5, 1.5, size=19)  # float64
    for jit in MODES:
        transformed = s2sad.value_and_grad(weighted, wrt=(0, 1), jit=jit)
        value, (gu, gw) = transformed(u, w)
        # a run over float32 and float64 arrays: Numba compiles the code unfused for these
        assert not fused_ran(transformed)
        e_value, (eu, ew) = s2sad.value_and_grad(weighted, wrt=(0, 1))(u, w)
        assert gu.dtype == np.float32 and gw.dtype == np.float64
        assert np.asarray(value).dtype == np.asarray(e_value).dtype == np.float64
        close32(gu, eu)
        # w's gradient is float64 math on float32 values: Python mode's to float64 precision
        np.testing.assert_allclose(gw, ew, rtol=1e-12, atol=1e-12)
        close32(gu, fd_grad(weighted, (u, w), 0))
        if jit:  # (the same code fuses where both are float64, or both float32)
            for args in [(u.astype(np.float64), w), (u, w.astype(np.float32))]:
                transformed(*args)
                assert fused_ran_for(transformed, *args)
            assert not fused_ran_for(transformed, u, w)


# ----------------------------------------------------------------------------- emitted modules


def load_emitted(tmp_path, name: str, mode: str, wrt, jit: bool):
    """The function a module `s2sad emit` writes, imported from a file in `tmp_path`."""
    text = emit_text(f"{__file__}:{name}", list(wrt), mode, jit=jit)
    module_name = f"emitted_{name}_{mode}_{int(jit)}"
    path = tmp_path / f"{module_name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, getattr(module, f"{mode}_{name}")


@pytest.mark.parametrize("jit", [False, True])
def test_emitted_gradients_have_their_inputs_dtype(tmp_path, jit):
    args = layer_args()
    wrt = ("x", "W", "b")
    e_value, expected = s2sad.value_and_grad(layer, wrt=(0, 1, 2))(*args)
    _, grad = load_emitted(tmp_path, "layer", "grad", wrt, jit)
    _, value_and_grad = load_emitted(tmp_path, "layer", "value_and_grad", wrt, jit)
    module, vjp = load_emitted(tmp_path, "layer", "vjp", wrt, jit)
    if jit:  # (Numba compiles no closures: the pullback is a function of its own)
        value, pulled = vjp(*args), module.vjp_layer_sweep(*args, np.float32(1.0))
    else:
        value, pullback = vjp(*args)
        pulled = pullback(np.float32(1.0))
    value2, grads2 = value_and_grad(*args)
    for grads in (grad(*args), grads2, pulled):
        for g, e, a in zip(grads, expected, args):
            assert g.dtype == a.dtype == np.float32 and g.shape == a.shape
            close32(g, e)
    for v in (value, value2):
        # Numba returns a float32 number as a Python float: its value is a float32's
        assert np.asarray(v).dtype == np.float32 or np.float32(v) == v
        close32(v, e_value)
    u, w, t = (rng(k).normal(size=(5, 4)).astype(np.float32) for k in range(3))
    _, jvp = load_emitted(tmp_path, "gated", "jvp", ("u",), jit)
    out, out_dot = jvp(u, w, t)
    assert out.dtype == out_dot.dtype == np.float32
    close32(out_dot, s2sad.jvp(gated, wrt="u")(u, w, tangent=t)[1])
    if not jit:  # (jitted, a Python float meeting float32 arrays widens the value: README)
        _, jvp = load_emitted(tmp_path, "field", "jvp", ("u",), jit)
        out, out_dot = jvp(u, 0.3, t)
        assert out_dot.dtype == out.dtype == np.float32
        close32(out_dot, s2sad.jvp(field, wrt="u")(u, 0.3, tangent=t)[1])


def test_emitted_jit_stencil_returns_float32_gradients(tmp_path):
    u, k = energy_args()
    _, grad = load_emitted(tmp_path, "energy2d", "grad", ("u",), True)
    g = grad(u, k)
    assert g.dtype == np.float32  # Numba widened the adjoint (0.5 * k): cast once, returned
    close32(g, s2sad.grad(energy2d)(u, k))
    g64 = grad(u.astype(np.float64), k)
    assert g64.dtype == np.float64
    np.testing.assert_allclose(g64, s2sad.grad(energy2d)(u.astype(np.float64), k), rtol=1e-12)


def sum_of_float64(u, w):
    s = np.sum(w * w)  # a float64 number: NumPy keeps float64 where it meets float32
    return np.sum(u * s) * 1e-40


def scaled(u, k):
    return np.sum((k * u) ** 2) * 1e-60


@pytest.mark.parametrize("jit", [True, "strict"])
def test_float64_numbers_meeting_float32_arrays_stay_float64(jit):
    """A float64 array or np.float64 beside float32 arrays runs the unfused code: Numba types
    np.float64 as a Python float, which a fused float32 run would compute in float32 (inf
    here, where NumPy's float64 gives 6.0)."""
    u, w = np.ones(3, np.float32), np.full(2, 1e20)
    value, (du, dw) = s2sad.value_and_grad(sum_of_float64, wrt=(0, 1), jit=jit)(u, w)
    expected, (eu, ew) = s2sad.value_and_grad(sum_of_float64, wrt=(0, 1))(u, w)
    assert value == pytest.approx(float(expected), rel=1e-12) and np.isfinite(value)
    np.testing.assert_allclose(dw, ew, rtol=1e-12)
    assert du.dtype == np.float32 and dw.dtype == np.float64
    u = np.full(4, 1e30, np.float32)
    for k in (np.float64(1e10), np.array(1e10)):
        value, (du, dk) = s2sad.value_and_grad(scaled, wrt=(0, 1), jit=jit)(u, k)
        expected, (eu, ek) = s2sad.value_and_grad(scaled, wrt=(0, 1))(u, k)
        assert value == pytest.approx(float(expected), rel=1e-12)
        assert float(dk) == pytest.approx(float(ek), rel=1e-12)


def pair_energy(pos, eps, rc2):
    """Lennard-Jones-like: a float64 accumulator (`e = 0.0`) a float32 loop adds into, Python
    floats meeting float32 numbers (`4.0 * eps`): Numba's value is float64, NumPy's float32."""
    e = 0.0
    for i in range(pos.shape[0]):
        for j in range(i + 1, pos.shape[0]):
            d = pos[i] - pos[j]
            r2 = np.sum(d * d)
            if r2 < rc2:
                e = e + 4.0 * eps * (1.0 / r2**3 - 1.0 / r2**6 * 0.5)
    return e


def test_a_jitted_value_and_grad_has_python_modes_dtypes():
    """value_and_grad's value of float32 inputs is float32 in every mode, as Python mode's
    (learnt once per kind of arguments from the function, so a function widening to float64
    itself keeps its float64 value), its gradient float32."""
    pos = (1.1 * np.arange(12.0).reshape(4, 3) % 2.3 + rng().normal(size=(4, 3)) * 0.1).astype(
        np.float32
    )
    e_value, e_g = s2sad.value_and_grad(pair_energy)(pos, 1.0, 6.25)
    assert type(e_value) is np.float32 and e_g.dtype == np.float32
    for jit in (True, "strict"):
        transformed = s2sad.value_and_grad(pair_energy, jit=jit)
        for _ in range(2):  # the first call learns the dtype, the second runs the plan
            value, g = transformed(pos, 1.0, 6.25)
            # the sum the loops scatter pos's cotangents into (`dpos[j]`) is float32 beside the
            # run's float32 arrays: the fused code compiled, no unfused code after it
            assert fused_ran(transformed)
            assert type(value) is np.float32 and g.dtype == np.float32
            close32(value, e_value)
            close32(g, e_g)


def bumped(x):
    x[0] = x[0] + 1.0  # (written into: Python mode and jit work on a copy of the caller's x)
    e = 0.0
    for i in range(x.shape[0]):
        e = e + x[i] * x[i]
    return e


def test_learning_the_values_dtype_leaves_the_callers_arrays_alone():
    """The run that learns Python mode's dtype of a jitted value works on copies: a function
    writing into its argument had written the caller's float32 array (break-it review)."""
    x = np.array([1.0, 2.0, 3.0], np.float32)
    expected = s2sad.value_and_grad(bumped)(x.copy())
    transformed = s2sad.value_and_grad(bumped, jit=True)
    for _ in range(2):
        value, g = transformed(x)
        np.testing.assert_array_equal(x, [1.0, 2.0, 3.0])
        assert type(value) is np.float32
        close32(value, expected[0])
        close32(g, expected[1])


class Settings:
    """An argument `copy.deepcopy` refuses (as one holding a lock or a generator does)."""

    def __init__(self, scale):
        self.scale = scale

    def __deepcopy__(self, memo):
        raise TypeError("cannot deepcopy Settings")


def scaled_squares(x, settings):
    e = 0.0  # (Numba's value float64, Python mode's float32)
    return e + np.sum(x * x) * settings.scale


def test_the_values_dtype_is_learnt_where_an_argument_refuses_deepcopy():
    """The run that learns Python mode's dtype of a jitted value, where an argument cannot be
    deep-copied, runs the Python-mode code on copies of the arrays it takes: the value came back
    float64 (the run raised and Numba's dtype was kept)."""
    x = np.array([1.0, 2.0, 3.0], np.float32)
    settings = Settings(np.float32(0.5))
    e_value, e_g = s2sad.value_and_grad(scaled_squares)(x, settings)
    assert type(e_value) is np.float32
    value, g = s2sad.value_and_grad(scaled_squares, jit="strict")(x, settings)
    assert type(value) is np.float32 and g.dtype == np.float32
    close32(value, e_value)
    close32(g, e_g)

"""Types and dtypes through every transform and mode (Python, jit=True, jit="strict", modules
`s2sad emit --jit` writes): a gradient, tangent or Jacobian has its input's type, shape and
dtype (float32 and float64 arrays, 0-d arrays, NumPy scalars, Python floats), a value the type
NumPy mode gives it, and jitted float32 sums add as exactly as NumPy's pairwise ones. Also: a
loop's float32 cotangent keeps its dtype in compiled code, a loop value Numba widens is refused
by name, and a wrong keyword argument is named as Python names it."""

from __future__ import annotations

import importlib.util
import inspect
import warnings

import numpy as np
import pytest

import s2sad
from s2sad.cli import emit_text
from s2sad.jit import JitError, JitFallbackWarning
from test_jit_float32 import fused_ran

MODES = [False, True, "strict"]

KINDS = {
    "float32 array": lambda: np.linspace(0.1, 0.9, 4, dtype=np.float32),
    "float64 array": lambda: np.linspace(0.1, 0.9, 4),
    "float32 0-d": lambda: np.array(0.3, dtype=np.float32),
    "np.float32": lambda: np.float32(0.3),
    "np.float64": lambda: np.float64(0.3),
    "Python float": lambda: 0.3,
}


def total(x, flag):  # no Python number meets x: every mode keeps float32 (README: values)
    return np.sum(np.sin(x) * x) if flag else np.sum(x * x)


def field(x, flag):
    return np.sin(x) * x if flag else x * x


def scaled(x, n):  # compiled, float32 meeting these is float64: the gradient is still x's
    return np.sum(np.sin(x) * x * 0.5) * n


def same_kind(got, like, what):
    """`got` has exactly the type, dtype and shape of `like`."""
    assert type(got) is type(like), f"{what}: {type(got).__name__} for {type(like).__name__}"
    assert np.shape(got) == np.shape(like), what
    if isinstance(like, (np.ndarray, np.generic)):
        assert got.dtype == like.dtype, f"{what}: {got.dtype} for {like.dtype}"


def tolerance(x) -> float:
    return 1e-5 if np.result_type(x) == np.float32 else 1e-12


@pytest.mark.parametrize("jit", MODES)
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_transform_keeps_the_inputs_type_and_numpy_modes_value_type(kind, jit):
    x, n = KINDS[kind](), True  # (a bool beside it, outside wrt)
    rtol = tolerance(x)
    value, grad = s2sad.value_and_grad(total, jit=jit)(x, n)
    e_value, e_grad = s2sad.value_and_grad(total)(x, n)
    same_kind(value, e_value, "value")
    same_kind(grad, x, "value_and_grad")
    np.testing.assert_allclose(grad, e_grad, rtol=rtol)
    np.testing.assert_allclose(value, e_value, rtol=rtol)
    same_kind(s2sad.grad(total, jit=jit)(x, n), x, "grad")
    out, pullback = s2sad.vjp(field, jit=jit)(x, n)
    e_out = field(x, n)
    same_kind(out, e_out, "vjp's value")
    pulled = pullback(np.ones_like(e_out))
    same_kind(pulled, x, "pullback")
    np.testing.assert_allclose(pulled, np.cos(x) * x + np.sin(x), rtol=rtol)
    out, tangent = s2sad.jvp(field, jit=jit)(x, n, tangent=np.ones_like(x))
    same_kind(out, e_out, "jvp's value")
    same_kind(tangent, e_out, "jvp's tangent")
    jac = s2sad.jacobian(field, jit=jit)(x, n)
    assert np.shape(jac) == np.shape(x) * 2 and np.result_type(jac) == np.result_type(x)
    if not jit:  # (hessian takes no jit)
        hess = s2sad.hessian(total)(x, n)
        assert np.shape(hess) == np.shape(x) * 2 and np.result_type(hess) == np.result_type(x)


@pytest.mark.parametrize("jit", MODES)
@pytest.mark.parametrize("kind", ["float32 array", "np.float32"])
def test_a_gradient_numba_widens_comes_back_in_the_inputs_dtype(kind, jit):
    x = KINDS[kind]()
    grad = s2sad.grad(scaled, jit=jit)(x, 3)
    same_kind(grad, x, "grad")
    np.testing.assert_allclose(grad, s2sad.grad(scaled)(x, 3), rtol=1e-5)


def rebinding(v, A):  # the parameter is rebound in a loop: its gradient is still v's dtype
    s = 0.0
    for k in range(A.shape[0]):
        v = np.tanh(A[k] @ v)
        s = s + np.sum(v * v)
    return s


def load_emitted(tmp_path, name: str, mode: str, wrt):
    text = emit_text(f"{__file__}:{name}", list(wrt), mode, jit=True)
    path = tmp_path / f"dtypes_{name}_{mode}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, f"{mode}_{name}")


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    """`emitted(name, mode, wrt)`: the function of an `s2sad emit --jit` module, each module
    written and imported once for the file: its Numba functions compile once per kind of
    arguments, not again in each parametrized test (an emitted module's forms are its own)."""
    directory, loaded = tmp_path_factory.mktemp("emitted"), {}

    def get(name: str, mode: str, wrt):
        if (name, mode) not in loaded:
            loaded[name, mode] = load_emitted(directory, name, mode, wrt)
        return loaded[name, mode]

    return get


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_rebound_parameters_gradient_keeps_its_dtype_jitted_and_emitted(emitted, dtype):
    rng = np.random.default_rng(0)
    v, A = rng.normal(size=4).astype(dtype), rng.normal(size=(3, 4, 4)).astype(dtype)
    expected = s2sad.grad(rebinding, wrt=("v", "A"))(v, A)
    grad = emitted("rebinding", "grad", ("v", "A"))
    jitted = s2sad.grad(rebinding, wrt=("v", "A"), jit="strict")
    for got in (grad(v, A), jitted(v, A)):
        for g, e, a in zip(got, expected, (v, A)):
            same_kind(g, a, "gradient")
            np.testing.assert_allclose(g, e, rtol=tolerance(a), atol=tolerance(a))
    # the sum of v's cotangents, which a fused run reads, starts in v's dtype (a float64 one
    # failed to type beside float32 arrays, and the function compiled again unfused); dA's,
    # which no run reads, starts in float64 (pipeline/fusion/accumulators.py)
    assert fused_ran(jitted)
    source = s2sad.source(jitted, v, A)
    assert "dv = zeros_like(v)" in source and "dA = sum_zeros_like(A)" in source


# ----------------------------------------------------------------------------- float32 sums


def unfused_sums(u):  # sums over two shapes, a strided slice: Numba's own sum would add in f32
    return np.sum((u[1:] - u[:-1]) ** 2) + np.sum(u[::3] ** 3)


def strided_mean(u):
    return np.mean(u[::2] ** 2)


def row_sums(u):
    return np.sum(np.sum(u[:, ::2], axis=1) ** 2)


@pytest.mark.parametrize(
    "f, shape", [(unfused_sums, 300_000), (strided_mean, 1_000_000), (row_sums, (2, 300_000))]
)
def test_jitted_float32_sums_are_as_exact_as_numpys(f, shape):
    u = np.random.default_rng(1).uniform(0.5, 1.5, size=shape).astype(np.float32)
    truth = f(u.astype(np.float64))
    value, grad = s2sad.value_and_grad(f, jit="strict")(u)
    e_value, e_grad = s2sad.value_and_grad(f)(u)
    assert value.dtype == grad.dtype == np.float32
    assert abs(value - truth) / truth < 1e-6  # Numba's float32 sum: about 1e-4 here
    assert abs(e_value - truth) / truth < 1e-6
    np.testing.assert_allclose(grad, e_grad, rtol=1e-5, atol=1e-6 * np.max(np.abs(e_grad)))


# ----------------------------------------------------------------------------- loops


def stepped(y0, A, h, n):  # the user keeps the state float32; its cotangent must stay so too
    y = y0
    for _ in range(n):
        y = (y + h / 6.0 * np.tanh(A @ y)).astype(y0.dtype)
    return np.sum(y**2)


def widened(y0, w, h, n):
    y = y0
    for _ in range(n):
        y = y + h / 6.0 * w * np.tanh(y)
    return np.sum(y**2)


def test_a_loops_float32_cotangent_keeps_its_dtype_in_compiled_code():
    rng = np.random.default_rng(2)
    y0, A = rng.random(6).astype(np.float32), rng.random((6, 6)).astype(np.float32)
    expected = s2sad.grad(stepped, wrt=("y0", "A"))(y0, A, 0.1, 5)
    got = s2sad.grad(stepped, wrt=("y0", "A"), jit="strict")(y0, A, 0.1, 5)
    for g, e in zip(got, expected):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=1e-5)


def test_a_loop_value_numba_widens_is_refused_by_name_and_line():
    rng = np.random.default_rng(3)
    y0, w = rng.random(5).astype(np.float32), rng.random(5)  # NumPy widens y too
    with pytest.raises(JitError) as err:
        s2sad.grad(widened, jit="strict")(y0, w, 0.1, 3)
    text = str(err.value)
    assert "'y' is float32 as the loop at test_dtypes.py line" in text
    assert "starts and float64 after a step at line" in text and "astype(y0.dtype)" in text
    with pytest.warns(JitFallbackWarning, match="'y' is float32"):
        got = s2sad.grad(widened, jit=True)(y0, w, 0.1, 3)
    np.testing.assert_allclose(got, s2sad.grad(widened)(y0, w, 0.1, 3), rtol=1e-12)


# ----------------------------------------------------------------------------- arguments


def residual(p, obs, scale=2.0):
    return scale * np.sin(p) - obs


TRANSFORMS = {
    "grad": lambda jit: s2sad.grad(lambda p, obs, scale=2.0: np.sum(residual(p, obs)), jit=jit),
    "vjp": lambda jit: s2sad.vjp(residual, jit=jit),
    "jvp": lambda jit: (lambda *a, **k: s2sad.jvp(residual, jit=jit)(*a, tangent=a[0], **k)),
    "jacobian": lambda jit: s2sad.jacobian(residual, jit=jit),
}


@pytest.mark.parametrize("jit", MODES)
@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_a_wrong_keyword_is_named_as_python_names_it(transform, jit):
    f = TRANSFORMS[transform](jit)
    p, obs = np.arange(3.0), np.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitFallbackWarning)
        for _ in range(20 if transform == "jacobian" else 1):  # (jitted: faster after 16)
            f(p, obs)
    for call in (lambda: f(p, obs, wrong=1), lambda: f(p, wrong=1)):
        with pytest.raises(TypeError, match="got an unexpected keyword argument 'wrong'"):
            call()


# ----------------------------------------------------------------------------- mixed dtypes


def kept_float32(y0, w, n):  # the state kept float32; its cotangent meets a float64 array
    y = y0
    for _ in range(n):
        y = (y * w).astype(np.float32)
    return np.sum(y * y)


def kept_float32_product(y0, A, n):
    y = y0
    for _ in range(n):
        y = np.tanh(A @ y.astype(A.dtype)).astype(y0.dtype)
    return np.sum(y * y)


@pytest.mark.parametrize(
    "f, other, scale, rtol",
    [  # (a float32 cotangent's first step's products with float32 arrays are float32 in Python)
        (kept_float32, lambda r: np.full(5, 1e15), 1e-30, 1e-7),  # past float32's range
        (kept_float32_product, lambda r: r.normal(size=(5, 5)), 1.0, 1e-12),  # was 5e-8 off
    ],
)
def test_a_loops_cotangent_a_float64_array_meets_is_carried_in_float64_as_in_python(
    f, other, scale, rtol
):
    rng = np.random.default_rng(4)
    y0, w = (rng.uniform(0.5, 1.5, 5) * scale).astype(np.float32), other(rng)
    with np.errstate(over="ignore"):
        expected = s2sad.grad(f, wrt=("y0", 1))(y0, w, 3)
        got = s2sad.grad(f, wrt=("y0", 1), jit="strict")(y0, w, 3)
    assert np.all(np.isfinite(expected[1]))
    for g, e in zip(got, expected):
        same_kind(g, e, "gradient")
        np.testing.assert_allclose(g, e, rtol=rtol)


def mean_norm(x, w):
    return np.sqrt(np.mean(np.sin(x) * w + x * x))


def sum_norm(x):
    return np.sqrt(np.sum(x * x))


def axis_means(x):
    return np.sum(np.sqrt(np.mean(x * x, axis=1)))


@pytest.mark.parametrize("jit", [True, "strict"])
@pytest.mark.parametrize(
    "f, shape", [(mean_norm, 4), (sum_norm, 4), (axis_means, (2, 4)), (axis_means, (2, 1))]
)
def test_a_float32_sum_that_overflows_in_numpy_overflows_jitted(f, shape, jit):
    x = np.full(shape, 1.5e19, np.float32)  # x * x fits float32; the sum does not
    args = (x, np.ones(shape, np.float32)) if f is mean_norm else (x,)
    with np.errstate(over="ignore"):
        e_value, e_grad = s2sad.value_and_grad(f)(*args)
        value, grad = s2sad.value_and_grad(f, jit=jit)(*args)
    same_kind(value, e_value, "value")
    np.testing.assert_array_equal(value, e_value)
    np.testing.assert_array_equal(grad, e_grad)


def sum32(x):
    return np.sum(x * x, dtype=np.float32)


def sum64(x):
    return np.sum(x * x, dtype=np.float64)


def mean32(x):
    return np.mean(x * x, dtype=np.float32)


def mean64(x):
    return np.mean(x * x, dtype="float64")


def axis_sum32(x):
    return np.sum(np.sum(x * x, axis=0, dtype=np.float32))


def method_sum32(x):
    return (x * x).sum(dtype=np.float32)


def keyword_sum32(x):
    return np.sum(a=x * x, dtype="float32")


def counted(x):  # an integer dtype= is Numba's own
    return np.sum(x * x) + np.sum(x > 0.5, dtype=np.int32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "f", [sum32, sum64, mean32, mean64, axis_sum32, method_sum32, keyword_sum32, counted]
)
def test_a_reductions_dtype_is_honoured_jitted(f, dtype):
    x = np.linspace(0.1, 0.9, 6, dtype=dtype).reshape(2, 3)
    e_value, e_grad = s2sad.value_and_grad(f)(x)
    value, grad = s2sad.value_and_grad(f, jit="strict")(x)
    same_kind(value, e_value, "value")
    same_kind(grad, x, "gradient")
    np.testing.assert_allclose(value, e_value, rtol=1e-6)
    np.testing.assert_allclose(grad, e_grad, rtol=1e-6)


def accumulated(x, n):  # a 0-d input carried by a loop
    s = x
    for _ in range(n):
        s = s + x * np.sin(s)
    return s


def zero_d_state(x, n):
    s = np.zeros(())
    for _ in range(n):
        s = s + np.sum(x * x)
    return s


SCALARS = {k: KINDS[k] for k in ("float32 0-d", "np.float32", "np.float64", "Python float")}
SCALARS["float64 0-d"] = lambda: np.array(0.3)


@pytest.mark.parametrize("kind", list(SCALARS))
def test_a_loop_over_a_0d_value_compiles_and_emitted_modules_return_grads_kinds(emitted, kind):
    x = SCALARS[kind]()
    expected = s2sad.grad(accumulated)(x, 3)
    grad = emitted("accumulated", "grad", ("x",))
    strict = s2sad.grad(accumulated, jit="strict")(x, 3)
    sweep = emitted("accumulated", "vjp", ("x",)).__globals__
    pulled = sweep["vjp_accumulated_sweep"](x, 3, np.ones((), np.result_type(x))[()])
    for got in (strict, grad(x, 3), pulled):
        same_kind(got, x, "gradient")
        np.testing.assert_allclose(got, expected, rtol=tolerance(x))
    out, tangent = s2sad.jvp(accumulated, jit="strict")(x, 3, tangent=x)
    e_out, e_tangent = s2sad.jvp(accumulated)(x, 3, tangent=x)
    same_kind(out, e_out, "jvp's value")
    same_kind(tangent, e_tangent, "jvp's tangent")
    np.testing.assert_allclose(tangent, e_tangent, rtol=tolerance(x))
    value, grad = emitted("total", "value_and_grad", ("x",))(x, False)
    e_value, e_grad = s2sad.value_and_grad(total, jit=True)(x, False)
    same_kind(value, e_value, "value")
    same_kind(grad, x, "value_and_grad's gradient")
    v = np.linspace(0.1, 0.9, 3)
    np.testing.assert_allclose(
        s2sad.grad(zero_d_state, jit="strict")(v, 2), s2sad.grad(zero_d_state)(v, 2)
    )


def product_in_loop(y0, A, n):
    y = y0
    for _ in range(n):
        y = np.tanh(A @ y)
    return np.sum(y * y)


@pytest.mark.parametrize("narrow", ["y0", "A"])
def test_a_product_of_float32_and_float64_is_refused_by_name(narrow):
    rng = np.random.default_rng(5)
    y0, A = rng.random(3), rng.random((3, 3))
    y0, A = (y0.astype(np.float32), A) if narrow == "y0" else (y0, A.astype(np.float32))
    with pytest.raises(JitError) as err:
        s2sad.grad(product_in_loop, jit="strict")(y0, A, 2)
    text = str(err.value)
    assert "a matrix product of a float" in text and "test_dtypes.py line" in text
    assert "(`y = np.tanh(A @ y)`)" in text and "_impl" not in text
    assert "A.astype(y.dtype) @ y" in text


def scaled_layer(W, V, x, s):
    h = np.tanh(W @ x) * s
    y = V @ h
    return np.sum(y * y)


def test_a_product_numba_widened_says_so_not_that_numpy_computes_float64():
    """float32 arrays and the Python float `s`: NumPy keeps `h` float32, Numba widens it, and
    its products refuse `V @ h`; the refusal says that (not that NumPy computes in float64),
    names the line, and its hint's forms compile to Python mode's numbers."""
    rng = np.random.default_rng(0)
    W, V, x = (rng.normal(size=n).astype(np.float32) for n in ((3, 3), (2, 3), 3))
    with pytest.raises(JitError) as err:
        s2sad.grad(scaled_layer, wrt="s", jit="strict")(W, V, x, 0.7)
    text = str(err.value)
    line = inspect.getsourcelines(scaled_layer)[1] + 2
    assert "one compiled code widened to float64" in text and "NumPy 2 keeps float32" in text
    assert f"test_dtypes.py line {line} (`y = V @ h`)" in text, text
    assert "NumPy computes it in float64" not in text and "pass the number as np.float32" in text
    given = np.float32(0.7)
    got = s2sad.grad(scaled_layer, wrt="s", jit="strict")(W, V, x, given)
    expected = s2sad.grad(scaled_layer, wrt="s")(W, V, x, given)
    same_kind(got, given, "gradient")
    np.testing.assert_allclose(got, expected, rtol=tolerance(W))


# ----------------------------------------------------------------------------- carried numbers


def halves(x, a):  # s is float32 in NumPy (0.5 is a Python float); Numba widens s * 0.5
    s = np.sum(x * x) * a
    for _ in range(2):
        s = s + np.sum(x) * 0.5
    return s


def widened_number(x, a, c):  # c a float64 number: s is float64 after a step in NumPy too
    s = np.sum(x * x) * a
    for _ in range(2):
        s = s + np.sum(x) * c
    return s * s


def halved_cotangent(x, a):  # the adjoint's loop carries ds, a float32 number, as ds * 0.5
    s = np.sum(x * x) * a
    for _ in range(2):
        s = s * 0.5 + np.sum(x * s)
    return s


@pytest.mark.parametrize(
    "f, c", [(halves, ()), (halved_cotangent, ()), (widened_number, (np.float64(0.3),))]
)
def test_a_loops_float32_number_is_carried_as_python_carries_it(f, c):
    x, a = np.array([0.1, -0.4, 0.9], np.float32), np.float32(2.0)
    wrt = ("x", "a") + (("c",) if c else ())
    expected = s2sad.value_and_grad(f, wrt=wrt)(x, a, *c)
    jitted = s2sad.value_and_grad(f, wrt=wrt, jit="strict")
    got = jitted(x, a, *c)
    # the loop's sum of x's cotangents in float32: the fused code compiled (c, a np.float64,
    # runs the unfused code, as NumPy widens there: jit.py)
    assert fused_ran(jitted) == (not c)
    same_kind(got[0], expected[0], "value")
    np.testing.assert_allclose(got[0], expected[0], rtol=tolerance(expected[0]))
    for g, e in zip(got[1], expected[1]):
        same_kind(g, e, "gradient")
        np.testing.assert_allclose(g, e, rtol=1e-6)
    tangent = (x, a) + c
    expected = s2sad.jvp(f, wrt=wrt)(x, a, *c, tangent=tangent)
    got = s2sad.jvp(f, wrt=wrt, jit="strict")(x, a, *c, tangent=tangent)
    for g, e in zip(got, expected):  # (forward mode: the value and its tangent)
        same_kind(g, e, "jvp")
        np.testing.assert_allclose(g, e, rtol=tolerance(e))

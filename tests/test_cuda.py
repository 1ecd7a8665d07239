"""`target="cuda"`: elementwise gradient and tangent kernels (on Numba's simulator without a GPU)."""

import importlib.util
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import s2sad

pytest.importorskip("numba")


def softplus(x):
    if x > 20.0:
        return x
    return math.log1p(math.exp(x))


def lorentz(x, y):
    r = np.sqrt(x * x + y * y)
    if r < 1.0:
        return np.sin(r) * x
    return np.cos(r) / r + y * x


def smooth_abs(x, eps):
    if abs(x) > eps:
        return abs(x)
    return 0.5 * (x * x / eps + eps)


def piecewise(x):
    if x < -1.0:
        y = -x * x
    elif x < 1.0:
        y = np.tanh(x) * 3.0
    else:
        y = np.exp(-x) + x
    return y * 2.0


def gaussian_mix(x, mu, s):
    a = np.exp(-((x - mu) ** 2) / (2 * s * s))
    b = 0.5 * np.exp(-((x + mu) ** 2) / (2 * s * s))
    return np.log(a + b + 1e-3)


def clamp_power(x, p):
    base = x if x > 0.1 else 0.1
    return base**p


X = np.linspace(-2.5, 24.0, 11)
CASES = [
    (softplus, (X,), 0),
    (lorentz, (np.linspace(-1.5, 1.5, 7), np.linspace(-1.0, 0.8, 7)), (0, 1)),
    (smooth_abs, (np.linspace(-1.0, 1.0, 9), 0.3), 0),
    (piecewise, (np.linspace(-2.0, 2.0, 9),), 0),
    (gaussian_mix, (np.linspace(-2.0, 2.0, 9), 0.7, 0.4), (0, 1, 2)),
    (clamp_power, (np.linspace(-0.5, 2.0, 9), 2.5), (0, 1)),
]


def _elementwise_cpu(f, args, wrt):
    arrays = np.broadcast_arrays(*[np.asarray(a, dtype=float) for a in args])
    g = s2sad.grad(f, wrt=wrt)
    out = [g(*[float(a.flat[i]) for a in arrays]) for i in range(arrays[0].size)]
    return (
        np.array(out).T.reshape((-1,) + arrays[0].shape)
        if isinstance(wrt, tuple)
        else np.array(out).reshape(arrays[0].shape)
    )


@pytest.mark.parametrize("f, args, wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_cuda_gradient_kernel_matches_cpu(f, args, wrt):
    got = s2sad.grad(f, wrt=wrt, target="cuda")(*args)
    expected = _elementwise_cpu(f, args, wrt)
    np.testing.assert_allclose(np.array(got), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("f, args, wrt", CASES[:4], ids=[c[0].__name__ for c in CASES[:4]])
def test_cuda_jvp_kernel_matches_gradient(f, args, wrt):
    first = wrt if isinstance(wrt, int) else wrt[0]
    arrays = np.broadcast_arrays(*[np.asarray(a, dtype=float) for a in args])
    value, tangent = s2sad.jvp(f, wrt=first, target="cuda")(*args, tangent=np.ones_like(arrays[0]))
    np.testing.assert_allclose(value, np.vectorize(f)(*args), rtol=1e-12)
    grads = _elementwise_cpu(f, args, first)
    np.testing.assert_allclose(tangent, grads, rtol=1e-12, atol=1e-12)


def test_cuda_source_is_a_device_function_and_kernel():
    src = s2sad.source(s2sad.grad(lorentz, wrt=(0, 1), target="cuda"))
    assert "grad_lorentz = cuda.jit(device=True)(grad_lorentz_py)" in src
    assert "def grad_lorentz_kernel(x, y, out0, out1):" in src
    assert "math.sqrt(" in src and "np.sqrt(" not in src


def loop_with_tape(x):
    s = x
    for i in range(3):
        s = math.sin(s) * x
    return s


def test_cuda_refuses_adjoints_that_need_a_tape():
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="tape"):
        s2sad.grad(loop_with_tape, target="cuda")(np.ones(3))


def test_unknown_target_is_refused():
    with pytest.raises(ValueError, match="target must be"):
        s2sad.grad(softplus, target="tpu")


def test_cuda_kernel_keeps_device_arrays_on_the_device():
    from numba import cuda

    x, y = np.linspace(-1.5, 1.5, 12).reshape(3, 4), np.linspace(-1.0, 0.8, 12).reshape(3, 4)
    g = s2sad.grad(lorentz, wrt=(0, 1), target="cuda")
    gx, gy = g(cuda.to_device(x), cuda.to_device(y))
    assert cuda.devicearray.is_cuda_ndarray(gx) and gx.shape == (3, 4)
    hx, hy = g(x, y)
    np.testing.assert_allclose(gx.copy_to_host(), hx, rtol=1e-14)
    np.testing.assert_allclose(gy.copy_to_host(), hy, rtol=1e-14)
    # a scalar beside device arrays is spread over them, as NumPy broadcasting would
    value, tangent = s2sad.jvp(gaussian_mix, wrt=0, target="cuda")(
        cuda.to_device(x), 0.7, 0.4, tangent=cuda.to_device(np.ones_like(x))
    )
    np.testing.assert_allclose(value.copy_to_host(), np.vectorize(gaussian_mix)(x, 0.7, 0.4))
    np.testing.assert_allclose(
        tangent.copy_to_host(),
        s2sad.grad(gaussian_mix, target="cuda")(x, 0.7, 0.4),
        rtol=1e-12,
    )


def test_cuda_kernel_refuses_mixed_device_inputs():
    from numba import cuda

    g = s2sad.grad(lorentz, wrt=(0, 1), target="cuda")
    with pytest.raises(ValueError, match="broadcast them on the device"):
        g(cuda.to_device(np.ones(3)), cuda.to_device(np.ones(4)))
    with pytest.raises(ValueError, match="NumPy array for 'y'"):
        g(cuda.to_device(np.ones(3)), np.ones(3))


ELEMENTWISE = [
    *(
        f"np.{name}(x) * x"
        for name in "exp log log1p expm1 exp2 log2 log10 sqrt square reciprocal abs fabs sin cos "
        "tan arcsin arccos arctan arcsinh arctanh sinh cosh tanh deg2rad rad2deg sign".split()
    ),
    "np.arccosh(x + 1.5) * x",
    "np.power(x, 3.0) + np.power(2.5, x)",
    "np.maximum(x, 0.45) + np.minimum(x, 0.45) + np.fmax(x, 0.2) + np.fmin(x, 0.2)",
    "np.arctan2(x, 0.3) + np.hypot(x, 0.3) + np.logaddexp(x, 0.2)",
    "max(x, 0.45) * min(x, 0.2)",
    "np.where(x > 0.4, x, 2 * x)",
]


@pytest.fixture(scope="module")
def elementwise_module(tmp_path_factory):
    """One function per expression, in a file, so that s2sad can read their source."""
    path = tmp_path_factory.mktemp("cuda_elementwise") / "cuda_elementwise.py"
    lines = ["import numpy as np", ""]
    for k, expr in enumerate(ELEMENTWISE + ["np.cbrt(x) * x", "np.clip(x, 0.1, 0.5)"]):
        lines += [f"def f{k}(x):", f"    return {expr}", ""]
    path.write_text("\n".join(lines))
    spec = importlib.util.spec_from_file_location("cuda_elementwise", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("k", range(len(ELEMENTWISE)), ids=ELEMENTWISE)
def test_cuda_kernel_of_each_scalar_function(elementwise_module, k):
    """Device code spells NumPy's functions with math's (or a helper): Numba's CUDA target does
    not compile np.exp on a scalar, which the simulator runs as Python would."""
    f = getattr(elementwise_module, f"f{k}")
    x = np.array([0.15, 0.2, 0.45, 0.6, 0.9])
    g = s2sad.grad(f, target="cuda")
    source = s2sad.source(g)
    kept = ("np.maximum(", "np.minimum(", "np.fmax(", "np.fmin(")
    body = source[source.index("def grad_f") :]
    for kept_call in kept:
        body = body.replace(kept_call, "")
    assert "np." not in body.replace("np_", "")
    got = g(x)
    expected = [s2sad.grad(f)(float(v)) for v in x]
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)


def test_cuda_refuses_numpy_functions_it_cannot_compile(elementwise_module):
    for k in (len(ELEMENTWISE), len(ELEMENTWISE) + 1):
        f = getattr(elementwise_module, f"f{k}")
        with pytest.raises(
            s2sad.UnsupportedSyntaxError, match=r"cuda_elementwise\.py:\d+: .*no CUDA device form"
        ):
            s2sad.grad(f, target="cuda")(np.ones(3))


def test_cuda_kernel_writes_into_out():
    from numba import cuda

    x, y = np.linspace(-1.5, 1.5, 6), np.linspace(-1.0, 0.8, 6)
    g = s2sad.grad(lorentz, wrt=(0, 1), target="cuda")
    expected = g(x, y)
    gx, gy = cuda.device_array(6), cuda.device_array(6)
    got = g(cuda.to_device(x), cuda.to_device(y), out=(gx, gy))
    assert got[0] is gx and got[1] is gy
    np.testing.assert_allclose(gx.copy_to_host(), expected[0], rtol=1e-14)
    np.testing.assert_allclose(gy.copy_to_host(), expected[1], rtol=1e-14)
    hx, hy = np.empty(6), np.empty(6)
    assert g(x, y, out=(hx, hy))[0] is hx
    np.testing.assert_allclose(hy, expected[1], rtol=1e-14)
    with pytest.raises(ValueError, match="needs 2 arrays"):
        g(x, y, out=hx)
    with pytest.raises(ValueError, match="C-contiguous float64 of shape"):
        g(x, y, out=(np.empty(5), np.empty(5)))
    with pytest.raises(TypeError, match="takes device arrays"):
        g(cuda.to_device(x), cuda.to_device(y), out=(hx, hy))


@settings(max_examples=15, deadline=None)
@given(
    hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
    st.booleans(),
)
def test_cuda_kernel_broadcasts_as_numpy(shapes, scalar_y):
    """NumPy arrays of any broadcastable shapes (or a Python float) give the gradient of each
    broadcast element, in the broadcast shape."""
    rng = np.random.default_rng(len(shapes.input_shapes[0]))
    x = rng.uniform(-1.5, 1.5, shapes.input_shapes[0])
    y = 0.35 if scalar_y else rng.uniform(-1.5, 1.5, shapes.input_shapes[1])
    gx, gy = s2sad.grad(lorentz, wrt=(0, 1), target="cuda")(x, y)
    bx, by = np.broadcast_arrays(x, y)
    assert gx.shape == gy.shape == bx.shape
    expected = _elementwise_cpu(lorentz, (bx, by), (0, 1)) if bx.size else np.zeros((2,) + bx.shape)
    np.testing.assert_allclose(gx, expected[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gy, expected[1], rtol=1e-12, atol=1e-12)


def uses_helper_names(x, np_square, np_logaddexp):
    return np.square(x) * np_square + np.logaddexp(x, np_logaddexp)


def signed(x):
    return np.sign(x) * x


def test_cuda_user_names_like_device_helpers_and_odd_inputs():
    """A user's names like the device helpers' are renamed; sign(NaN) is NaN; complex inputs
    are refused; float32 inputs give float32 results; a jvp takes one tangent per input."""
    x = np.array([0.3, 0.6, 1.2])
    g = s2sad.grad(uses_helper_names, wrt=(0, 1, 2), target="cuda")
    got = g(x, 2.0, 0.5)
    for k, v in enumerate(x):
        cpu = s2sad.grad(uses_helper_names, wrt=(0, 1, 2))(float(v), 2.0, 0.5)
        np.testing.assert_allclose([r[k] for r in got], cpu, rtol=1e-12)
    value, tangent = s2sad.jvp(signed, target="cuda")(np.array([np.nan, -2.0]), tangent=1.0)
    assert np.isnan(value[0]) and value[1] == 2.0 and tangent[1] == -1.0
    with pytest.raises(s2sad.NonDifferentiableInputError, match="complex"):
        g(x + 1j, 2.0, 0.5)
    gx, gs, gl = g(x.astype(np.float32), 2.0, np.float32(0.5))
    assert (gx.dtype, gs.dtype, gl.dtype) == (np.float32, np.float64, np.float32)
    value, tangent = s2sad.jvp(signed, target="cuda")(x.astype(np.float32), tangent=np.float32(1))
    assert value.dtype == tangent.dtype == np.float32
    with pytest.raises(TypeError, match="takes 1 tangent"):
        s2sad.jvp(signed, target="cuda")(x, tangent=(x, x))


def test_cuda_out_overlapping_an_input_is_refused():
    from numba import cuda

    x = np.linspace(-1.0, 1.0, 4)
    g = s2sad.grad(lorentz, wrt=(0, 1), target="cuda")
    buf = cuda.to_device(np.concatenate([x, [0.0]]))
    other = cuda.device_array(4)
    with pytest.raises(ValueError, match="overlaps an input without being it"):
        g(buf[0:4], cuda.to_device(x), out=(buf[1:5], other))
    with pytest.raises(ValueError, match="share memory"):
        g(cuda.to_device(x), cuda.to_device(x), out=(other, other))
    expected = g(x, x)
    xd, yd = cuda.to_device(x), cuda.to_device(x)
    gx, gy = g(xd, yd, out=(xd, yd))  # each thread reads its element before writing it
    np.testing.assert_allclose(gx.copy_to_host(), expected[0], rtol=1e-14)
    np.testing.assert_allclose(gy.copy_to_host(), expected[1], rtol=1e-14)


def test_cuda_refusals_name_the_line():
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=r"test_cuda\.py:\d+: .*records values"):
        s2sad.grad(loop_with_tape, target="cuda")(np.ones(3))

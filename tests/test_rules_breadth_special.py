"""scipy.special: pullbacks and tangents against finite differences (random shapes and axes from
hypothesis), exact values, both Jacobian modes batched against per-basis, Hessians, the
refusals (return_sign, a larger b, a library function with no rule), jit's fallback, and SciPy
staying optional (`import s2sad` neither needs nor imports it)."""

import math
import subprocess
import sys
import types
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

sc = pytest.importorskip("scipy.special")
import scipy.linalg  # noqa: E402
from scipy import special  # noqa: E402
from scipy.special import log_softmax, logsumexp, softmax  # noqa: E402

import s2sad  # noqa: E402
from conftest import check_grad, check_jvp, check_vjp  # noqa: E402
from s2sad.errors import NoRuleError  # noqa: E402
from s2sad.jit import JitError, JitFallbackWarning  # noqa: E402
from test_jacobian_batched import check  # noqa: E402

RNG = np.random.default_rng(20261124)


def positive(*shape):
    return RNG.uniform(0.5, 3.0, size=shape)


def normal(*shape):
    return RNG.normal(size=shape)


def inside(*shape):
    return RNG.uniform(-0.9, 0.9, size=shape)


def unit(*shape):
    return RNG.uniform(0.1, 0.9, size=shape)


# ----------------------------------------------------------------------------- the functions


def gammaln_of(x):
    return sc.gammaln(x) * x


def digamma_of(x):
    return sc.digamma(x) ** 2


def polygamma_of(x):
    return sc.polygamma(1, x) + sc.polygamma(2, x)


def polygamma_orders(x, n):
    return sc.polygamma(n, x)


def erf_of(x):
    return sc.erf(x) * sc.erfc(0.5 * x)


def erfinv_of(x):
    return sc.erfinv(x) ** 2


def expit_of(x):
    return sc.expit(x) * x


def logit_of(x):
    return sc.logit(x) ** 2


def xlogy_of(x, y):
    return sc.xlogy(x, y)


def xlog1py_of(x, y):
    return sc.xlog1py(x, y)


def betaln_of(a, b):
    return sc.betaln(a, b)


def lse(x, axis, keepdims):
    return logsumexp(x, axis=axis, keepdims=keepdims)


def lse_weighted(x, b, axis):
    return logsumexp(x, axis=axis, b=b)


def softmax_of(x, axis):
    return softmax(x, axis=axis)


def log_softmax_of(x, axis):
    return log_softmax(x, axis=axis)


def entropy(p):
    """-sum p log p of the softmax of `p`, a typical use: xlogy inside a reduction."""
    q = softmax(p)
    return -np.sum(sc.xlogy(q, q))


def scalar_gammaln(x):
    return sc.gammaln(x) + sc.erf(x) + sc.polygamma(1, x)


def cross_entropy(logits, labels):
    return -np.sum(labels * log_softmax(logits, axis=-1))


def lse_scalar(x):
    return logsumexp(x)


UNARY = [
    (gammaln_of, positive),
    (digamma_of, positive),
    (polygamma_of, positive),
    (erf_of, normal),
    (erfinv_of, inside),
    (expit_of, normal),
    (logit_of, unit),
]
BINARY = [(xlogy_of, positive), (xlog1py_of, positive), (betaln_of, positive)]


@pytest.mark.parametrize("f,draw", UNARY, ids=[f.__name__ for f, _ in UNARY])
def test_unary_vjp_jvp_and_jacobians(f, draw):
    x = draw(2, 3)
    check_vjp(f, (x,))
    check_jvp(f, (x,))
    check(f, x)


@pytest.mark.parametrize("f,draw", BINARY, ids=[f.__name__ for f, _ in BINARY])
@pytest.mark.parametrize("wrt", [0, 1, (0, 1)])
def test_binary_vjp_jvp_and_jacobians_with_broadcasting(f, draw, wrt):
    x, y = draw(2, 3), draw(3)
    check_vjp(f, (x, y), wrt=wrt)
    check_jvp(f, (x, y), wrt=wrt)
    check(f, x, y, wrt=wrt)


def test_polygamma_orders_array_and_python_floats():
    x = positive(4)
    check_vjp(polygamma_orders, (x, np.array([0, 1, 2, 3])))
    check_jvp(polygamma_orders, (x, 3))
    check_grad(scalar_gammaln, (1.7,))  # a Python float's gradient is a Python float
    g = s2sad.grad(scalar_gammaln)(1.7)
    erf = 2 / math.sqrt(math.pi) * math.exp(-(1.7**2))
    assert g == pytest.approx(sc.digamma(1.7) + erf + sc.polygamma(2, 1.7), rel=1e-14)


def test_exact_values():
    x = np.array([0.3, 1.0, 2.5])
    np.testing.assert_allclose(s2sad.grad(lambda_free_gammaln)(x), sc.digamma(x), rtol=1e-14)
    np.testing.assert_allclose(
        s2sad.grad(lambda_free_erfinv)(np.array([0.0, 0.5])),
        math.sqrt(math.pi) / 2 * np.exp(sc.erfinv([0.0, 0.5]) ** 2),
        rtol=1e-14,
    )
    s = sc.expit(x)
    np.testing.assert_allclose(s2sad.grad(lambda_free_expit)(x), s * (1 - s), rtol=1e-14)
    w = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(s2sad.grad(lse_scalar)(w), softmax(w), rtol=1e-14)


def lambda_free_gammaln(x):
    return np.sum(sc.gammaln(x))


def lambda_free_erfinv(x):
    return np.sum(sc.erfinv(x))


def lambda_free_expit(x):
    return np.sum(sc.expit(x))


def test_xlogy_at_zero_is_finite():
    """xlogy(0, y) is 0 for every y: its derivative in y is 0 there (never 0/0), in x log y."""
    x, y = np.array([0.0, 0.0, 2.0]), np.array([0.0, 3.0, 4.0])
    _, pullback = s2sad.vjp(xlogy_of, wrt=1)(x, y)
    np.testing.assert_array_equal(pullback(np.ones(3)), [0.0, 0.0, 0.5])
    _, pullback = s2sad.vjp(xlog1py_of, wrt=1)(x, np.array([-1.0, 3.0, 1.0]))
    np.testing.assert_array_equal(pullback(np.ones(3)), [0.0, 0.0, 1.0])
    p = np.array([0.0, 0.25, 0.75])
    _, pullback = s2sad.vjp(xlogy_of, wrt=0)(p, np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(pullback(np.ones(3)), np.log([1.0, 2.0, 3.0]))


def test_logsumexp_is_stable_and_its_weights_are_a_softmax():
    x = np.array([1000.0, 1000.0, -1000.0])
    g = s2sad.grad(lse_scalar)(x)
    np.testing.assert_allclose(g, [0.5, 0.5, 0.0], atol=1e-300)
    assert s2sad.grad(lse_scalar)(np.array([-np.inf, 0.0]))[0] == 0.0
    everything_empty = s2sad.grad(lse_scalar)(np.array([-np.inf, -np.inf]))
    np.testing.assert_array_equal(everything_empty, [0.0, 0.0])  # not nan


def test_entropy_and_cross_entropy():
    p = normal(5)
    check_grad(entropy, (p,))
    logits, labels = normal(3, 4), np.eye(4)[[0, 2, 3]]
    g = check_grad(cross_entropy, (logits, labels))
    np.testing.assert_allclose(g, softmax(logits, axis=-1) - labels, atol=1e-12)


def spelled_in_full(x):
    return scipy.special.logsumexp(x) + np.sum(special.expit(x))


def test_every_spelling_of_the_module_finds_the_rules():
    x = normal(4)
    g = check_grad(spelled_in_full, (x,))
    s = sc.expit(x)
    np.testing.assert_allclose(g, softmax(x) + s * (1 - s), rtol=1e-12)


def test_the_rules_load_when_the_user_imports_scipy_after_s2sad(tmp_path):
    (tmp_path / "late.py").write_text(
        "import numpy as np\nimport scipy.special\n\n"
        "def f(x):\n    return np.sum(scipy.special.gammaln(x))\n"
    )
    code = (
        "import sys, numpy as np, s2sad\n"
        "from s2sad.rules.registry import VERSION\n"
        "assert 'scipy.special' not in sys.modules\n"
        "before = VERSION[0]\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import late\n"
        "print(s2sad.grad(late.f)(np.array([1.0, 2.0])), VERSION[0] == before)\n"
    )
    # the transforms made before stay valid: no function of the module could be met before it
    assert _run(code).split() == ["[-0.57721566", "0.42278434]", "True"]


# ----------------------------------------------------------------------------- Hessians


def _fd_hessian(f, x, eps=1e-5):
    grad = s2sad.grad(f)
    H = np.zeros(x.shape + x.shape)
    for idx in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[idx] = eps
        H[(...,) + idx] = (grad(x + e) - grad(x - e)) / (2 * eps)
    return H


def hessian_gammaln(x):
    return np.sum(sc.gammaln(x) * x)


def hessian_digamma(x):
    return np.sum(sc.digamma(x) ** 2 + sc.polygamma(1, x))


def hessian_erf(x):
    return np.sum(sc.erf(x) * sc.erfc(x) + sc.erfinv(0.5 * np.tanh(x)))


def hessian_logistic(x):
    return np.sum(sc.logit(0.25 + 0.5 * sc.expit(x)) ** 2)


def hessian_lse(x):
    return np.sum(logsumexp(x, axis=1) ** 2) + logsumexp(x, b=np.arange(1.0, 5.0))


def hessian_softmax(x):
    return np.sum(softmax(x, axis=0) * np.arange(4.0)) + np.sum(log_softmax(x) ** 2)


def hessian_binary(x):
    return np.sum(sc.xlogy(x, x + 2) + sc.xlog1py(x**2, x) + sc.betaln(x, x**2 + 1))


HESSIANS = [
    (hessian_gammaln, positive),
    (hessian_digamma, positive),
    (hessian_erf, inside),
    (hessian_logistic, normal),
    (hessian_lse, normal),
    (hessian_softmax, normal),
    (hessian_binary, positive),
]


@pytest.mark.parametrize("f,draw", HESSIANS, ids=[f.__name__ for f, _ in HESSIANS])
def test_hessian_matches_finite_differences_of_the_gradient(f, draw):
    x = draw(3, 4)
    expected = _fd_hessian(f, x)
    np.testing.assert_allclose(s2sad.hessian(f)(x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s2sad.hessian(f, batched=False)(x), expected, rtol=1e-5, atol=1e-6)


def hessian_in_b(b):
    return logsumexp(np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]]), axis=1, b=b) @ np.ones(2)


def test_hessian_of_logsumexp_in_its_weights():
    b = positive(3)
    np.testing.assert_allclose(
        s2sad.hessian(hessian_in_b)(b), _fd_hessian(hessian_in_b, b), atol=1e-6
    )


# ----------------------------------------------------------------------------- dtypes


def test_float32_gradients_stay_float32():
    x = positive(4).astype(np.float32)
    for f in (hessian_gammaln, hessian_erf, hessian_softmax):
        g = s2sad.grad(f)(x * np.float32(0.3))
        assert g.dtype == np.float32 and g.shape == x.shape


# ----------------------------------------------------------------------------- refusals


def lse_signed(x):
    value, sign = logsumexp(x, return_sign=True)
    return value * sign


def lse_wide_b(x):
    return logsumexp(x, b=np.ones((2, 3)))


def zeta_of(x):
    return np.sum(sc.zeta(x, 1.0))


def expm_of(x):
    return np.sum(scipy.linalg.expm(x))


def expm_of_constant(x):
    return np.sum(scipy.linalg.expm(np.eye(2)) * x)


def test_return_sign_is_refused():
    with pytest.raises(NoRuleError, match="return_sign"):
        s2sad.grad(lse_signed)(normal(3))


def test_b_larger_than_a_is_refused_clearly():
    with pytest.raises(ValueError, match="b of shape \\(2, 3\\) larger than a's \\(3,\\)"):
        s2sad.grad(lse_wide_b)(normal(3))


@pytest.mark.parametrize(
    "f,x,name", [(zeta_of, positive(3) + 1, "sc.zeta"), (expm_of, normal(2, 2), "expm")]
)
def test_a_library_function_without_a_rule_is_refused_at_the_users_line(f, x, name):
    """Never inlined (its source is SciPy's): named at the user's line, with the way out."""
    with pytest.raises(NoRuleError) as info:
        s2sad.grad(f)(x)
    message = str(info.value)
    assert name in message and __file__ in message and "site-packages" not in message
    assert "register_vjp" in message


def test_a_library_function_of_constants_runs():
    x = normal(2, 2)
    np.testing.assert_allclose(s2sad.grad(expm_of_constant)(x), scipy.linalg.expm(np.eye(2)))


# ----------------------------------------------------------------------------- jit, SciPy optional


def test_jit_falls_back_with_a_warning():
    """Numba has no scipy.special: the gradient runs in Python, and says so."""
    x = positive(4)
    with pytest.warns(JitFallbackWarning):
        g = s2sad.grad(hessian_gammaln, jit=True)(x)
    np.testing.assert_allclose(g, s2sad.grad(hessian_gammaln)(x), rtol=1e-14)
    with pytest.raises(JitError, match="logsumexp"):
        s2sad.grad(lse_scalar, jit="strict")(x)


def _run(code):
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout


def test_import_s2sad_does_not_import_scipy():
    assert _run("import sys, s2sad; print('scipy' in sys.modules)").strip() == "False"


def test_s2sad_works_without_scipy(tmp_path):
    (tmp_path / "plain.py").write_text("import numpy as np\n\ndef f(x):\n    return np.sum(x**2)\n")
    code = (
        "import sys; sys.modules['scipy'] = None\n"  # `import scipy` raises ImportError
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import numpy as np, s2sad, plain\n"
        "print(s2sad.grad(plain.f)(np.ones(2)), 'scipy' in sys.modules)\n"
    )
    assert _run(code).strip() == "[2. 2.] True"  # the blocking None entry, never imported


@pytest.mark.parametrize("name", ["lse_scalar", "hessian_binary", "hessian_softmax"])
def test_emitted_module_imports_scipys_functions(name, tmp_path):
    """`s2sad emit`: SciPy's functions are imported by name (never copied from SciPy's source),
    the helpers calling SciPy import it themselves; the module gives grad's numbers."""
    out = tmp_path / f"{name}_grad.py"
    subprocess.run(
        [sys.executable, "-m", "s2sad", "emit", f"{__file__}:{name}", "-o", str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    text = out.read_text()
    assert "import s2sad" not in text and "from s2sad" not in text
    namespace = {"__name__": "emitted"}
    exec(compile(text, str(out), "exec"), namespace)
    x = positive(3, 4)
    expected = s2sad.grad(globals()[name])(x)
    np.testing.assert_allclose(namespace[f"grad_{name}"](x), expected, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- hypothesis

HYP = settings(
    max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def shape_and_axis(draw, tuples=True):
    shape = draw(array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    ndim = len(shape)
    single = st.integers(-ndim, ndim - 1)
    options = [st.none(), single]
    if tuples:
        options.append(
            st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple)
        )
    return shape, draw(st.one_of(*options))


@HYP
@given(case=shape_and_axis(), keepdims=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_logsumexp_random_shapes_and_axes(case, keepdims, seed):
    shape, axis = case
    x = np.random.default_rng(seed).normal(size=shape) * 3
    check_vjp(lse, (x, axis, keepdims), seed=seed)
    check_jvp(lse, (x, axis, keepdims), seed=seed)


@HYP
@given(case=shape_and_axis(tuples=False), seed=st.integers(0, 2**32 - 1))
def test_logsumexp_weights_random_shapes(case, seed):
    shape, axis = case
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    b = rng.uniform(0.5, 2.0, size=shape[rng.integers(0, len(shape) + 1) :])
    for wrt in (0, 1, (0, 1)):
        check_vjp(lse_weighted, (x, b, axis), wrt=wrt, seed=seed)
        check_jvp(lse_weighted, (x, b, axis), wrt=wrt, seed=seed)
    check(lse_weighted, x, b, axis, wrt=(0, 1))  # b's batched tangent is lifted to a's rank


@HYP
@given(case=shape_and_axis(), seed=st.integers(0, 2**32 - 1))
def test_softmaxes_random_shapes_and_axes(case, seed):
    shape, axis = case
    x = np.random.default_rng(seed).normal(size=shape) * 2
    for f in (softmax_of, log_softmax_of):
        check_vjp(f, (x, axis), seed=seed)
        check_jvp(f, (x, axis), seed=seed)


@HYP
@given(
    shape=array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4),
    index=st.integers(0, len(UNARY) - 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_unary_random_shapes(shape, index, seed):
    f, _ = UNARY[index]
    low, high = {positive: (0.5, 3.0), inside: (-0.9, 0.9), unit: (0.1, 0.9)}.get(
        UNARY[index][1], (-2.0, 2.0)
    )
    x = np.random.default_rng(seed).uniform(low, high, size=shape)
    check_vjp(f, (x,), seed=seed)
    check_jvp(f, (x,), seed=seed)


@HYP
@given(
    shapes=st.sampled_from([((3,), (2, 3)), ((2, 1), (1, 4)), ((), (3,)), ((2, 3), (2, 3))]),
    index=st.integers(0, len(BINARY) - 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_binary_random_shapes(shapes, index, seed):
    f, _ = BINARY[index]
    rng = np.random.default_rng(seed)
    x, y = (rng.uniform(0.5, 3.0, size=s) for s in shapes)
    check_vjp(f, (x, y), wrt=(0, 1), seed=seed)
    check_jvp(f, (x, y), wrt=(0, 1), seed=seed)


@HYP
@given(case=shape_and_axis(), seed=st.integers(0, 2**32 - 1))
def test_logsumexp_jacobians_random_axes(case, seed):
    shape, axis = case
    x = np.random.default_rng(seed).normal(size=shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0/0 or exp overflow along the way
        check(lse, x, axis, True)
        check(softmax_of, x, axis)
        check(log_softmax_of, x, axis)


def test_a_rule_registered_before_the_lazy_rules_load_stays_the_users(monkeypatch):
    """`register_vjp(f, rule)` before s2sad's own rules for f's module were loaded (they load at
    the first look-up after the module is imported): the user's rule must not be replaced."""
    from s2sad.rules import registry

    lazy = types.ModuleType("s2sad_lazy_probe")

    def twice(x):
        return 2.0 * x

    lazy.twice = twice
    monkeypatch.setitem(sys.modules, lazy.__name__, lazy)

    @registry.on_import(lazy.__name__)
    def _rules():
        registry.unary(twice, "g * 2.0")

    s2sad.register_vjp(twice, lambda dy, y, x: dy * 100.0)

    def loss(x):
        return np.sum(twice(x))

    assert registry._ON_IMPORT  # the module's own rules load at the transform's look-ups
    np.testing.assert_array_equal(s2sad.grad(loss)(np.array([0.5, 1.0])), [100.0, 100.0])
    assert lazy.__name__ not in registry._ON_IMPORT

"""Elementwise breadth (#14): deg2rad rad2deg radians degrees sinc arccosh fabs fmax fmin
logaddexp2 float_power fmod heaviside, the builtins sum/min/max, math.erf erfc gamma lgamma (and
the polygamma helper their derivatives use), .astype, np.real/imag/conj, np.asarray(dtype=) and
np.nan_to_num: pullbacks and tangents against central differences (random shapes from hypothesis),
exact values at the corner cases, batched Jacobians, Hessians and the jitted forms."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import s2sad
from conftest import check_jvp, check_vjp, rand
from s2sad.errors import NoRuleError
from s2sad.rules.mathfuncs import polygamma_real, sinc_curvature, sinc_slope
from test_derivatives import fd_hessian
from test_jacobian_batched import check


def angles(x):
    return np.sum(np.deg2rad(x) * np.rad2deg(x) + np.radians(x) ** 2 + np.degrees(x))


def sinc_of(x):
    return np.sinc(x)


def sinc_sum(x):
    return np.sum(np.sinc(x) ** 2)


def arccosh_of(x):
    return np.arccosh(x)


def fabs_of(x):
    return np.fabs(x) * x


def fmax_of(x, y):
    return np.fmax(x, y)


def fmin_of(x, y):
    return np.fmin(x, y)


def logaddexp2_of(x, y):
    return np.logaddexp2(x, y)


def float_power_of(x, y):
    return np.float_power(x, y)


def float_power_const(x):
    return np.float_power(x, 3) + np.float_power(x, 0) + np.float_power(x, 1)


def fmod_of(x, y):
    return np.fmod(x, y)


def heaviside_of(x, h):
    return np.heaviside(x, h) * x


def sum_list(x, y):
    return sum([x, 2.0 * y, x * y], 1.5)


def sum_list_start(x):
    return sum([x[0], x[1] ** 2], start=x[2]) + sum((x[0], 2.0 * x[2]))


def sum_array(x):
    return sum(x) * 2.0


def sum_squares(x):
    return sum(x**2)


def max_of(x):
    return max(x[0], x[1], 0.25) * min([x[1], x[2]])


def max_scalars(a, b):
    return max(a, b) + min(a, 2.0 * b)


def special(x):
    return math.erf(x) * math.erfc(0.5 * x) + math.gamma(x) + math.lgamma(x)


def more_math(x, y):
    a = math.asinh(x) + math.acosh(x + 1.5) + math.atanh(0.5 * x) + math.log2(x) * math.log10(x)
    return a * math.radians(y) + math.degrees(x) + math.fmod(3.0 * x, y)


def more_math_jit(x, y):  # Numba has no math.fmod
    a = math.asinh(x) + math.acosh(x + 1.5) + math.atanh(0.5 * x) + math.log2(x) * math.log10(x)
    return a * math.radians(y) + math.degrees(x)


def lgamma_of(x):
    return math.lgamma(x)


def gamma_of(x):
    return math.gamma(x)


def conversions(x):
    y = x.astype(np.float64) + np.asarray(x, dtype=float) * np.real(x)
    return y * np.conj(x) + np.imag(x) + x.conj() + np.conjugate(x)


def conversions_jit(x):
    y = x.astype(np.float64) + np.asarray(x, dtype=np.float64) * np.real(x)
    return y * np.conj(x) + np.imag(x) + x.conj() + np.conjugate(x)


def astype_float32(x):
    return np.sum(x.astype(np.float32) ** 2)


def astype_int(x):
    return np.sum(x.astype(np.int64) * x + x.astype(bool))


def nan_to_num_of(x):
    return np.nan_to_num(x * x, posinf=5.0) * x


CASES = [
    (angles, (rand(3, 2),)),
    (sinc_of, (np.array([0.0, 0.1, -0.13, 0.2, 1.0, 2.5, -3.7]),)),
    (sinc_sum, (rand(4, 3, seed=2, low=-2, high=2),)),
    (arccosh_of, (rand(5, low=1.1, high=4.0),)),
    (fabs_of, (rand(2, 3),)),
    (fmax_of, (rand(3, 4), rand(4, seed=1))),
    (fmin_of, (rand(3, 4), rand(3, 1, seed=1))),
    (fmax_of, (np.array([1.0, np.nan, -2.0, np.nan]), np.array([np.nan, 0.5, -3.0, 2.0]))),
    (fmin_of, (0.3, 0.7)),
    (fmax_of, (np.float64(0.3), 0.7)),
    (logaddexp2_of, (rand(3, 4), rand(4, seed=1))),
    (float_power_of, (rand(3, 2, low=0.5, high=2.0), rand(2, seed=1))),
    (float_power_const, (rand(4),)),
    (fmod_of, (rand(3, 4, low=-3, high=3), rand(4, seed=1, low=0.4, high=1.0))),
    (heaviside_of, (np.array([0.0, 1.0, -2.0, 0.0]), np.array([0.3, 0.7, 0.1, 0.2]))),
    (sum_list, (rand(3), rand(2, 3, seed=1))),
    (sum_list_start, (rand(3),)),
    (sum_array, (rand(4, 3),)),
    (sum_squares, (rand(5),)),
    (max_of, (np.array([0.3, -1.2, 0.9]),)),
    (max_scalars, (0.7, -0.2)),
    (special, (1.7,)),
    (special, (0.3,)),
    (lgamma_of, (-2.4,)),
    (more_math, (0.7, 0.45)),
    (gamma_of, (-0.6,)),
    (conversions, (rand(3, 2),)),
    (nan_to_num_of, (rand(4),)),
]
IDS = [f"{f.__name__}-{i}" for i, (f, _) in enumerate(CASES)]


def _wrt(args):
    return tuple(range(len(args))) if len(args) > 1 else 0


@pytest.mark.parametrize("f,args", CASES, ids=IDS)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_vjp_and_jvp(f, args):
    if f is fmax_of and np.isnan(args[0]).any():
        return  # finite differences of NaN: the exact values are checked below
    if f is heaviside_of:  # a step: finite differences cross it; values below
        return
    check_vjp(f, args, wrt=_wrt(args))
    check_jvp(f, args, wrt=_wrt(args))


@pytest.mark.parametrize("f,args", CASES, ids=IDS)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_jacobian_batched_matches_per_basis(f, args):
    if f is heaviside_of or f is fmax_of and np.isnan(args[0]).any():
        return
    check(f, *args, wrt=_wrt(args))


# ----------------------------------------------------------------------------- exact values


def test_sinc_at_zero_first_and_second_derivative_exact():
    x = np.array([0.0, 1e-9, 0.5])
    _, pullback = s2sad.vjp(sinc_of)(x)
    g = pullback(np.ones(3))
    assert g[0] == 0.0 and abs(g[1] + np.pi**2 / 3 * 1e-9) < 1e-20
    H = s2sad.hessian(sinc_sum)(np.array([0.0]))
    # (sinc^2)'' at 0 = 2 sinc'' sinc + 2 sinc'^2 = -2 pi^2 / 3
    assert abs(H[0, 0] + 2 * np.pi**2 / 3) < 1e-13
    assert abs(sinc_curvature(0.0) + np.pi**2 / 3) < 1e-15
    assert sinc_slope(0.0) == 0.0 and isinstance(sinc_slope(0.5), float)


@pytest.mark.parametrize("x", [0.0, 1e-7, 0.1, 0.15915, 0.16, 1.0, 2.5, -3.3, 40.0])
def test_sinc_helpers_against_finite_differences(x):
    h = 1e-5
    fd1 = (np.sinc(x + h) - np.sinc(x - h)) / (2 * h)
    fd2 = (sinc_slope(x + h) - sinc_slope(x - h)) / (2 * h)
    assert abs(sinc_slope(x) - fd1) < 1e-9
    assert abs(sinc_curvature(x) - fd2) < 1e-8
    assert sinc_slope(np.float32(x)).dtype == np.float32


def test_fmax_fmin_give_the_gradient_to_the_operand_that_is_not_nan():
    x = np.array([1.0, np.nan, -2.0, np.nan, 3.0])
    y = np.array([np.nan, 0.5, -3.0, np.nan, 3.0])
    _, pullback = s2sad.vjp(fmax_of, wrt=(0, 1))(x, y)
    gx, gy = pullback(np.ones(5))
    np.testing.assert_array_equal(gx, [1.0, 0.0, 1.0, 0.0, 0.5])
    np.testing.assert_array_equal(gy, [0.0, 1.0, 0.0, 0.0, 0.5])
    _, pullback = s2sad.vjp(fmin_of, wrt=(0, 1))(x, y)
    gx, gy = pullback(np.ones(5))
    np.testing.assert_array_equal(gx, [1.0, 0.0, 0.0, 0.0, 0.5])
    np.testing.assert_array_equal(gy, [0.0, 1.0, 1.0, 0.0, 0.5])
    _, t = s2sad.jvp(fmax_of, wrt=(0, 1))(x, y, tangent=(np.ones(5), 10 * np.ones(5)))
    np.testing.assert_array_equal(t, [1.0, 10.0, 1.0, 0.0, 5.5])


def test_heaviside_derivative_is_in_x2_where_x1_is_zero():
    x = np.array([0.0, 1.0, -2.0, 0.0])
    h = np.array([0.3, 0.7, 0.1, 0.2])
    _, pullback = s2sad.vjp(heaviside_of, wrt=(0, 1))(x, h)
    gx, gh = pullback(np.ones(4))
    np.testing.assert_array_equal(gh, [0.0, 0.0, 0.0, 0.0])  # x * (x == 0) is 0 everywhere
    np.testing.assert_array_equal(gx, np.heaviside(x, h))
    g = s2sad.grad(lambda_heaviside, wrt=1)(x, h)
    np.testing.assert_array_equal(g, [1.0, 0.0, 0.0, 1.0])


def lambda_heaviside(x, h):
    return np.sum(np.heaviside(x, h))


def test_fmod_quotient_is_taken_from_the_result():
    """fmod(1.0, 0.1) = 0.0999...: the quotient is 9 (trunc(1.0 / 0.1) would say 10)."""
    g = s2sad.grad(fmod_sum, wrt=1)(np.array([1.0, -7.5, 7.5]), np.array([0.1, 2.0, -2.0]))
    np.testing.assert_array_equal(g, [-9.0, 3.0, 3.0])


def fmod_sum(x, y):
    return np.sum(np.fmod(x, y))


def test_float_power_exponent_zero_and_one_at_zero():
    g = s2sad.grad(lambda_float_power)(np.array([0.0, 2.0]))
    np.testing.assert_array_equal(g, [1.0, 12.0 + 1.0])  # x ** 3, x ** 0, x ** 1
    _, pullback = s2sad.vjp(float_power_of, wrt=1)(np.array([0.0, 2.0]), np.array([1.0, 2.0]))
    np.testing.assert_allclose(pullback(np.ones(2)), [0.0, 4 * np.log(2)])  # 0 where x <= 0


def lambda_float_power(x):
    return np.sum(np.float_power(x, 3) + np.float_power(x, 0) + np.float_power(x, 1))


def test_arccosh_at_one_is_infinite_as_arcsin_at_one():
    with np.errstate(divide="ignore"):
        g = s2sad.grad(lambda_arccosh)(np.array([1.0, 2.0]))
    assert g[0] == np.inf and abs(g[1] - 1 / np.sqrt(3)) < 1e-15


def lambda_arccosh(x):
    return np.sum(np.arccosh(x))


def test_max_min_ties_share_evenly():
    g = s2sad.grad(max_of)(np.array([0.5, 0.5, 2.0]))
    np.testing.assert_array_equal(g, [0.25, 0.25 + 0.5, 0.0])
    assert s2sad.grad(max_scalars, wrt=(0, 1))(1.0, 1.0) == (1.5, 0.5 + 0.0)


def test_gamma_lgamma_derivatives_are_digamma():
    euler = 0.5772156649015329
    assert abs(s2sad.grad(gamma_of)(1.0) + euler) < 1e-15
    assert abs(s2sad.grad(lgamma_of)(2.0) - (1 - euler)) < 1e-15
    assert abs(s2sad.grad(lgamma_of)(0.5) - (-euler - 2 * math.log(2))) < 1e-14
    # lgamma'' = trigamma: pi^2 / 6 at 1
    assert abs(s2sad.hessian(lgamma_of)(1.0) - math.pi**2 / 6) < 1e-14


def test_polygamma_matches_scipy():
    special_ = pytest.importorskip("scipy.special")
    xs = np.concatenate([np.linspace(-9.7, 30, 211), [1e-3, 0.5, 1, 100.5, 1e5, -50.25]])
    for n in range(4):
        expected = special_.polygamma(n, xs)
        np.testing.assert_allclose(polygamma_real(n, xs), expected, rtol=1e-12, atol=1e-12)
    assert math.isnan(polygamma_real(0, -2.0)) and math.isnan(polygamma_real(1, 0.0))
    assert type(polygamma_real(0, 1.5)) is float


def test_casts_pass_the_derivative_and_integer_casts_carry_none():
    x = rand(4)
    g = s2sad.grad(astype_float32)(x)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, 2 * x, rtol=1e-6)
    np.testing.assert_array_equal(s2sad.grad(astype_int)(x), x.astype(np.int64))
    y = np.array([0.5, np.inf, np.nan, -np.inf, -2.0])
    _, pullback = s2sad.vjp(nan_to_num_plain)(y)
    np.testing.assert_array_equal(pullback(np.ones(5)), [3.0, 0.0, 0.0, 0.0, 3.0])


def nan_to_num_plain(x):
    return np.nan_to_num(x, nan=1.0, posinf=5.0, neginf=-5.0) * 3.0


def test_imag_of_a_real_array_has_zero_derivative_and_conj_is_identity():
    x = rand(3)
    _, pullback = s2sad.vjp(conversions)(x)
    g = pullback(np.ones(3))
    np.testing.assert_allclose(g, 3 * x**2 + 2 * x + 2.0, rtol=1e-12)


# ----------------------------------------------------------------------------- refusals


def nan_to_num_in_place(x):
    return np.nan_to_num(x, copy=False)


def sum_with_array_start(x, s):
    return sum(x, s)


def max_with_key(x):
    return max(x[0], x[1], key=abs)


def max_of_a_nested_list(x):
    return max([x[0]], [x[1]])[0]


def max_of_an_array(x):
    return max(x)


def astype_complex(x):
    return np.real(x.astype(np.complex128))


@pytest.mark.parametrize(
    "f,args",
    [
        (nan_to_num_in_place, (rand(3),)),
        (sum_with_array_start, (rand(3, 2), rand(2, seed=1))),
        (max_with_key, (rand(3),)),
        (max_of_a_nested_list, (rand(3),)),
    ],
)
def test_refused_clearly(f, args):
    with pytest.raises(NoRuleError):
        s2sad.vjp(f)(*args)


def imag_of_complex_constant_times(x):
    return np.sum(np.imag(_C * x))


def conj_of_complex_constant_times(x):
    return np.sum(np.real(np.conj(_C * x)))


_C = np.array([1 + 2j, 3j, 1.0])


def test_max_of_one_array_is_refused_when_it_runs():
    with pytest.raises(TypeError, match="two or more numbers"):
        s2sad.grad(max_of_an_array)(rand(3))


def test_float32_inputs_get_float32_gradients():
    x = rand(4).astype(np.float32)
    for f in (sinc_sum, angles, lambda_arccosh):
        g = s2sad.grad(f)(x + (2.1 if f is lambda_arccosh else 0.0))
        assert g.dtype == np.float32 and g.shape == (4,)


def test_complex_values_are_refused():
    """Casts to complex are refused when s2sad reads the function; np.imag, np.real and
    np.conj of a complex value (a complex constant times x) refuse when they run, never
    dropping the imaginary part's derivative."""
    with pytest.raises(s2sad.S2SADError, match="complex"):
        s2sad.vjp(astype_complex)(rand(3))
    for f in (imag_of_complex_constant_times, conj_of_complex_constant_times):
        with pytest.raises(TypeError, match="complex"):
            s2sad.grad(f)(rand(3))


# ----------------------------------------------------------------------------- Hessians


def hess_fn(x):
    return np.sum(
        np.sinc(x) * np.logaddexp2(x, 0.3 * x)
        + np.float_power(x + 2.0, 1.5)
        + np.arccosh(x**2 + 1.5)
        + np.deg2rad(x) ** 2
        + np.fmod(x**2, 0.7)
        + np.fmax(x, 0.1) ** 2
    )


def hess_math(x):
    return math.gamma(x) * math.erf(x) + math.lgamma(x) * math.erfc(x)


def test_hessians_match_finite_differences_of_the_gradient():
    x = np.array([0.0, 0.31, -0.52, 0.93])
    H = s2sad.hessian(hess_fn)(x)
    np.testing.assert_allclose(H, fd_hessian(hess_fn, x), atol=1e-6)
    np.testing.assert_array_equal(s2sad.hessian(sum_squares)(rand(3)), 2 * np.eye(3))
    H = s2sad.hessian(max_of)(np.array([0.3, -1.2, 0.9]))  # here x[0] * x[1]
    np.testing.assert_array_equal(H, [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    h = s2sad.hessian(hess_math)(1.3)
    g = s2sad.grad(hess_math)
    assert abs(h - (g(1.3 + 1e-5) - g(1.3 - 1e-5)) / 2e-5) < 1e-6


# ----------------------------------------------------------------------------- jit

JIT_CASES = [
    (angles, (rand(3, 2),)),
    (sinc_sum, (rand(5, low=-2, high=2),)),
    (fmax_of, (rand(3, 4), rand(4, seed=1))),
    (fmin_of, (np.array([1.0, np.nan, 0.3]), np.array([np.nan, 2.0, 0.3]))),
    (fmax_of, (0.3, 0.7)),
    (logaddexp2_of, (rand(3), rand(3, seed=1))),
    (float_power_of, (rand(3, low=0.5, high=2.0), rand(3, seed=1))),
    (fmod_of, (rand(4, low=-3, high=3), rand(4, seed=1, low=0.4, high=1.0))),
    (arccosh_of, (rand(3, low=1.1, high=3.0),)),
    (fabs_of, (rand(3),)),
    (sum_squares, (rand(4),)),  # Numba's sum of a 2-d array does not compile
    (sum_list, (rand(3), rand(2, 3, seed=1))),
    (max_of, (np.array([0.5, 0.5, 2.0]),)),
    (special, (1.7,)),
    (gamma_of, (-0.6,)),
    (more_math_jit, (0.7, 0.45)),
    (conversions_jit, (rand(3),)),  # Numba's np.asarray takes no dtype=float
    (astype_float32, (rand(3),)),
    (nan_to_num_of, (np.array([0.5, np.inf, 2.0, np.nan]),)),
]


@pytest.mark.parametrize("f,args", JIT_CASES, ids=[f.__name__ for f, _ in JIT_CASES])
@pytest.mark.parametrize("mode", ["vjp", "jvp"])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")
def test_jitted_forms_compile_and_agree(f, args, mode):
    pytest.importorskip("numba")
    wrt = _wrt(args)
    if mode == "vjp":
        out, pullback = s2sad.vjp(f, wrt=wrt)(*args)
        seed = np.ones(np.shape(out)) if np.ndim(out) else 1.0
        plain = pullback(seed)
        jitted = s2sad.vjp(f, wrt=wrt, jit="strict")(*args)[1](seed)
    else:
        ts = tuple(np.ones(np.shape(a)) if np.ndim(a) else 1.0 for a in args)
        t = ts if isinstance(wrt, tuple) else ts[0]
        plain = s2sad.jvp(f, wrt=wrt)(*args, tangent=t)[1]
        jitted = s2sad.jvp(f, wrt=wrt, jit="strict")(*args, tangent=t)[1]
    pairs = zip(plain, jitted) if isinstance(plain, tuple) else [(plain, jitted)]
    for a, b in pairs:
        tol = 1e-6 if np.asarray(a).dtype == np.float32 else 1e-12  # one of them is float32
        np.testing.assert_allclose(a, b, rtol=tol, atol=1e-14)


# ----------------------------------------------------------------------------- hypothesis

HYP = settings(
    max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
BINARY = [fmax_of, fmin_of, logaddexp2_of, float_power_of, fmod_of]


@st.composite
def broadcast_pair(draw):
    shape = draw(array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3))
    cut = draw(st.integers(0, len(shape)))
    other = list(shape[cut:])
    other = [1 if draw(st.booleans()) else n for n in other]
    return shape, tuple(other)


@HYP
@given(pair=broadcast_pair(), which=st.sampled_from(BINARY), seed=st.integers(0, 1000))
def test_binary_on_random_broadcast_shapes(pair, which, seed):
    s1, s2 = pair
    x = np.random.default_rng(seed).uniform(0.5, 2.0, size=s1)
    y = np.random.default_rng(seed + 1).uniform(0.4, 1.7, size=s2)
    if which in (fmax_of, fmin_of):
        y = y + 0.013  # no ties: finite differences see one side
    if which is fmod_of:
        x = x * 3
    args = (x, y)
    check_vjp(which, args, wrt=(0, 1), seed=seed)
    check_jvp(which, args, wrt=(0, 1), seed=seed)


def heaviside_in_x2(x, h):
    return np.heaviside(x, h) * h


@HYP
@given(pair=broadcast_pair(), seed=st.integers(0, 1000))
def test_heaviside_and_nan_to_num_on_random_shapes(pair, seed):
    """heaviside in x2 (x1 with zeros: there x2 is the value), nan_to_num of finite values."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-1, 2, size=pair[0]).astype(float)
    h = rng.uniform(0.1, 0.9, size=pair[1])
    check_vjp(heaviside_in_x2, (x, h), wrt=1, seed=seed)
    check_jvp(heaviside_in_x2, (x, h), wrt=1, seed=seed)
    check_vjp(nan_to_num_of, (h,), seed=seed)
    check_jvp(nan_to_num_of, (h,), seed=seed)


@HYP
@given(shape=array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), seed=st.integers(0, 99))
def test_unary_and_builtin_sum_on_random_shapes(shape, seed):
    x = np.random.default_rng(seed).uniform(-2.0, 2.0, size=shape)
    for f in (angles, sinc_of, fabs_of, sum_array, conversions):
        check_vjp(f, (x,), seed=seed)
        check_jvp(f, (x,), seed=seed)
    check_vjp(arccosh_of, (np.abs(x) + 1.1,), seed=seed)

"""Every elementwise rule against finite differences: arithmetic operators, NumPy ufuncs,
selection (maximum/minimum/where/clip), non-differentiable sign, and the math module."""

import math

import numpy as np
import pytest

import s2sad
from conftest import check_grad, check_vjp, rand

# ----------------------------------------------------------------------------- inputs


def uniform(shape, low, high, seed=0):
    return rand(*shape, seed=seed, low=low, high=high)


def away_from_zero(shape, seed=0, low=0.2, high=1.5):
    """Values with |x| in [low, high) and random signs: safe for abs, sign, relu kinks."""
    rng = np.random.default_rng(seed)
    mag = rng.uniform(low, high, size=shape)
    return np.where(rng.random(shape) < 0.5, -mag, mag).astype(np.float64)


# ----------------------------------------------------------------------------- binary operators


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def div(a, b):
    return a / b


def power(a, b):
    return a**b


# (function, domain of a, domain of b)
BINARY = {
    "add": (add, (-2.0, 2.0), (-2.0, 2.0)),
    "sub": (sub, (-2.0, 2.0), (-2.0, 2.0)),
    "mul": (mul, (-2.0, 2.0), (-2.0, 2.0)),
    "div": (div, (-2.0, 2.0), (0.5, 2.0)),
    "pow": (power, (0.5, 2.0), (-1.5, 1.5)),
}


def _operand(kind, domain, seed):
    low, high = domain
    if kind == "array":
        return uniform((3, 4), low, high, seed)
    if kind == "row":
        return uniform((4,), low, high, seed)
    if kind == "0d":
        return uniform((), low, high, seed)
    if kind == "npscalar":
        return np.float64(uniform((), low, high, seed))
    if kind == "float":
        return float(uniform((), low, high, seed))
    raise AssertionError(kind)


OPERAND_KINDS = [
    ("array", "array"),
    ("array", "row"),
    ("row", "array"),
    ("array", "0d"),
    ("0d", "array"),
    ("array", "npscalar"),
    ("npscalar", "array"),
    ("array", "float"),
    ("float", "array"),
]


@pytest.mark.parametrize("kinds", OPERAND_KINDS, ids=lambda k: f"{k[0]}-{k[1]}")
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_operator_both_active(op, kinds):
    f, dom_a, dom_b = BINARY[op]
    a = _operand(kinds[0], dom_a, seed=1)
    b = _operand(kinds[1], dom_b, seed=2)
    check_vjp(f, (a, b), wrt=(0, 1))


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_operator_one_active(op, which):
    f, dom_a, dom_b = BINARY[op]
    a = _operand("array", dom_a, seed=3)
    b = _operand("array", dom_b, seed=4)
    check_vjp(f, (a, b), wrt=which)


@pytest.mark.parametrize(
    "kinds",
    [("float", "float"), ("npscalar", "npscalar"), ("float", "npscalar"), ("0d", "0d")],
    ids=lambda k: f"{k[0]}-{k[1]}",
)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_operator_scalars(op, kinds):
    f, dom_a, dom_b = BINARY[op]
    a = _operand(kinds[0], dom_a, seed=5)
    b = _operand(kinds[1], dom_b, seed=6)
    check_grad(f, (a, b), wrt=(0, 1))


def test_python_float_operator_gives_python_float():
    def f(a, b):
        return a * b + a / b - b**2.0

    ga, gb = check_grad(f, (1.5, 0.75), wrt=(0, 1))
    assert type(ga) is float and type(gb) is float
    assert ga == pytest.approx(0.75 + 1 / 0.75)
    assert gb == pytest.approx(1.5 - 1.5 / 0.75**2 - 2 * 0.75)


def add_const(x):
    return x + 2.5


def radd_const(x):
    return 2.5 + x


def sub_const(x):
    return x - 2.5


def rsub_const(x):
    return 2.5 - x


def mul_const(x):
    return x * 3.0


def rmul_const(x):
    return 3.0 * x


def div_const(x):
    return x / 4.0


def rdiv_const(x):
    return 4.0 / x


def rpow_const(x):
    return 2.0**x


def int_const_mul(x):
    return 3 * x - 1


@pytest.mark.parametrize(
    "f",
    [
        add_const,
        radd_const,
        sub_const,
        rsub_const,
        mul_const,
        rmul_const,
        div_const,
        rdiv_const,
        rpow_const,
        int_const_mul,
    ],
    ids=lambda f: f.__name__,
)
@pytest.mark.parametrize("kind", ["array", "float", "npscalar"])
def test_binary_operator_with_constant(f, kind):
    x = _operand(kind, (0.5, 2.0), seed=7)
    if kind == "array":
        check_vjp(f, (x,))
    else:
        check_grad(f, (x,))


# ----------------------------------------------------------------------------- powers


def pow2(x):
    return x**2


def pow3(x):
    return x**3


def pow_half(x):
    return x**0.5


def pow_minus_one(x):
    return x**-1


def pow_float2(x):
    return x**2.0


def pow_minus_half(x):
    return x**-0.5


def pow_one(x):
    return x**1


def pow_zero(x):
    return x**0


CONST_POWERS = [pow2, pow3, pow_half, pow_minus_one, pow_float2, pow_minus_half, pow_one, pow_zero]


@pytest.mark.parametrize("f", CONST_POWERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("kind", ["array", "0d", "npscalar", "float"])
def test_constant_exponent(f, kind):
    x = _operand(kind, (0.5, 2.0), seed=8)
    if kind == "array":
        check_vjp(f, (x,))
    else:
        check_grad(f, (x,))


@pytest.mark.parametrize("f", [pow2, pow3, pow_minus_one], ids=lambda f: f.__name__)
def test_integer_exponent_negative_base(f):
    check_vjp(f, (away_from_zero((3, 4), seed=9),))


def test_pow_exact_values():
    g = s2sad.grad(lambda_free_pow_sum)(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(g, [3.0 + 2.0, 12.0 + 4.0, 27.0 + 6.0])


def lambda_free_pow_sum(x):
    return np.sum(x**3) + np.sum(x**2)


def pow_exponent_param(x, n):
    return x**n


@pytest.mark.parametrize("n", [2, 3, -1, 0.5])
def test_exponent_from_non_differentiated_argument(n):
    check_vjp(pow_exponent_param, (uniform((2, 3), 0.5, 2.0), n))


def active_exponent(x, y):
    return x**y


def test_active_exponent_array():
    check_vjp(
        active_exponent, (uniform((2, 3), 0.5, 2.0), uniform((2, 3), -2.0, 2.0, seed=1)), wrt=(0, 1)
    )


def test_active_exponent_only():
    check_vjp(
        active_exponent, (uniform((2, 3), 0.5, 2.0), uniform((2, 3), -2.0, 2.0, seed=1)), wrt=1
    )


def test_active_exponent_python_floats():
    check_grad(active_exponent, (1.7, -0.6), wrt=(0, 1))


def np_power(x, y):
    return np.power(x, y)


def test_np_power():
    check_vjp(np_power, (uniform((2, 3), 0.5, 2.0), uniform((3,), -2.0, 2.0, seed=1)), wrt=(0, 1))


def np_power_const(x):
    return np.power(x, 3)


def test_np_power_constant_exponent():
    check_vjp(np_power_const, (away_from_zero((2, 3)),))


# ----------------------------------------------------------------------------- unary


def neg(x):
    return -x


def pos(x):
    return +x


def test_unary_negative():
    check_vjp(neg, (uniform((3, 4), -1, 1),))
    check_grad(neg, (0.3,))


def test_unary_positive():
    check_vjp(pos, (uniform((3, 4), -1, 1),))


def u_exp(x):
    return np.exp(x)


def u_log(x):
    return np.log(x)


def u_log1p(x):
    return np.log1p(x)


def u_expm1(x):
    return np.expm1(x)


def u_sqrt(x):
    return np.sqrt(x)


def u_square(x):
    return np.square(x)


def u_abs(x):
    return np.abs(x)


def u_absolute(x):
    return np.absolute(x)


def u_builtin_abs(x):
    return abs(x)


def u_sin(x):
    return np.sin(x)


def u_cos(x):
    return np.cos(x)


def u_tan(x):
    return np.tan(x)


def u_arcsin(x):
    return np.arcsin(x)


def u_arccos(x):
    return np.arccos(x)


def u_arctan(x):
    return np.arctan(x)


def u_sinh(x):
    return np.sinh(x)


def u_cosh(x):
    return np.cosh(x)


def u_tanh(x):
    return np.tanh(x)


def u_exp2(x):
    return np.exp2(x)


def u_log2(x):
    return np.log2(x)


def u_log10(x):
    return np.log10(x)


def u_cbrt(x):
    return np.cbrt(x)


def u_reciprocal(x):
    return np.reciprocal(x)


def u_arcsinh(x):
    return np.arcsinh(x)


def u_arctanh(x):
    return np.arctanh(x)


def u_negative(x):
    return np.negative(x)


def u_positive(x):
    return np.positive(x)


def u_copy(x):
    return np.copy(x)


def u_asarray(x):
    return np.asarray(x)


def u_array(x):
    return np.array(x)


def u_method_copy(x):
    return x.copy()


# (function, low, high): domains where each function is smooth
UNARY = [
    (u_exp, -1.5, 1.5),
    (u_log, 0.3, 3.0),
    (u_log1p, -0.5, 2.0),
    (u_expm1, -1.5, 1.5),
    (u_sqrt, 0.3, 3.0),
    (u_square, -2.0, 2.0),
    (u_abs, None, None),
    (u_absolute, None, None),
    (u_builtin_abs, None, None),
    (u_sin, -3.0, 3.0),
    (u_cos, -3.0, 3.0),
    (u_tan, -1.2, 1.2),
    (u_arcsin, -0.9, 0.9),
    (u_arccos, -0.9, 0.9),
    (u_arctan, -3.0, 3.0),
    (u_sinh, -2.0, 2.0),
    (u_cosh, -2.0, 2.0),
    (u_tanh, -2.0, 2.0),
    (u_exp2, -1.5, 1.5),
    (u_log2, 0.3, 3.0),
    (u_log10, 0.3, 3.0),
    (u_cbrt, 0.3, 3.0),
    (u_reciprocal, 0.5, 2.0),
    (u_arcsinh, -2.0, 2.0),
    (u_arctanh, -0.8, 0.8),
    (u_negative, -2.0, 2.0),
    (u_positive, -2.0, 2.0),
    (u_copy, -2.0, 2.0),
    (u_asarray, -2.0, 2.0),
    (u_array, -2.0, 2.0),
    (u_method_copy, -2.0, 2.0),
]


def _unary_input(shape, low, high, seed=0):
    if low is None:
        return away_from_zero(shape, seed=seed)
    return uniform(shape, low, high, seed)


@pytest.mark.parametrize("f,low,high", UNARY, ids=[u[0].__name__[2:] for u in UNARY])
def test_unary_array(f, low, high):
    check_vjp(f, (_unary_input((3, 4), low, high),))


@pytest.mark.parametrize(
    "f,low,high",
    [u for u in UNARY if u[0] is not u_method_copy],
    ids=[u[0].__name__[2:] for u in UNARY if u[0] is not u_method_copy],
)
def test_unary_numpy_scalar(f, low, high):
    x = np.float64(_unary_input((), low, high, seed=2))
    check_grad(f, (x,))


@pytest.mark.parametrize(
    "f,low,high",
    [
        (u_exp, -1, 1),
        (u_log, 0.5, 2),
        (u_sqrt, 0.5, 2),
        (u_sin, -1, 1),
        (u_tanh, -1, 1),
        (u_abs, None, None),
        (u_builtin_abs, None, None),
        (u_arctan, -1, 1),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_unary_python_float(f, low, high):
    x = float(_unary_input((), low, high, seed=3))
    g = check_grad(f, (x,))
    assert type(g) is float


def test_unary_0d_array():
    x = np.array(0.7)
    check_grad(u_sin, (x,))
    check_grad(u_exp, (x,))


def chain(x):
    return np.sum(np.exp(np.sin(x)) * np.log(x**2 + 1.0) / np.sqrt(x + 3.0))


def test_unary_chain():
    check_grad(chain, (uniform((2, 3), -1.0, 1.0),))


# ----------------------------------------------------------------------------- sign


def sign_sum(x):
    return np.sum(np.sign(x))


def sign_times(x):
    return np.sum(np.sign(x) * x)


def test_sign_has_zero_gradient():
    x = away_from_zero((3, 4))
    g = check_grad(sign_sum, (x,))
    np.testing.assert_array_equal(g, np.zeros_like(x))


def test_sign_is_a_constant_factor():
    x = away_from_zero((3, 4), seed=1)
    g = check_grad(sign_times, (x,))
    np.testing.assert_allclose(g, np.sign(x))


def floor_ceil(x):
    return np.sum(np.floor(x) * x + np.ceil(x) + np.round(x))


def test_floor_ceil_round_are_constants():
    x = uniform((3, 4), 0.1, 0.4) + np.arange(12).reshape(3, 4)
    check_grad(floor_ceil, (x,))


# ----------------------------------------------------------------------------- selection


def b_maximum(a, b):
    return np.maximum(a, b)


def b_minimum(a, b):
    return np.minimum(a, b)


def _untied_pair(shape_a, shape_b, seed=0):
    """a and b such that every broadcast pair differs by at least 0.1."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, size=shape_a)
    while True:
        b = rng.uniform(-1, 1, size=shape_b)
        if np.min(np.abs(np.subtract(a, b))) > 0.1:
            return a.astype(np.float64), b.astype(np.float64)


@pytest.mark.parametrize(
    "shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (3,))], ids=str
)
@pytest.mark.parametrize("f", [b_maximum, b_minimum], ids=lambda f: f.__name__)
def test_maximum_minimum(f, shapes):
    a, b = _untied_pair(*shapes)
    check_vjp(f, (a, b), wrt=(0, 1))


def relu(x):
    return np.maximum(x, 0.0)


def relu_left(x):
    return np.maximum(0.0, x)


def clamp_below(x):
    return np.minimum(x, 0.5)


@pytest.mark.parametrize("f", [relu, relu_left, clamp_below], ids=lambda f: f.__name__)
def test_maximum_minimum_with_constant(f):
    x = away_from_zero((3, 4))
    x = np.where(np.abs(x - 0.5) < 0.1, x + 0.3, x)
    check_vjp(f, (x,))


def test_maximum_python_floats():
    check_grad(b_maximum, (0.3, -0.4), wrt=(0, 1))
    check_grad(b_minimum, (0.3, -0.4), wrt=(0, 1))


def where_compare(x, y):
    return np.where(x > 0, x, y)


def where_mask(x, y, mask):
    return np.where(mask, x, y)


def where_const(x, mask):
    return np.where(mask, x, 0.0)


def where_const_left(x, mask):
    return np.where(mask, -1.0, x * 2.0)


def test_where_with_comparison():
    x = away_from_zero((3, 4))
    y = uniform((3, 4), -1, 1, seed=1)
    check_vjp(where_compare, (x, y), wrt=(0, 1))


def test_where_with_mask_argument():
    mask = np.array([[True, False, True, False], [False, False, True, True], [True] * 4])
    check_vjp(
        where_mask, (uniform((3, 4), -1, 1), uniform((3, 4), -1, 1, seed=1), mask), wrt=(0, 1)
    )


def test_where_broadcast_mask_and_operands():
    mask = np.array([True, False, True, False])
    g = check_vjp(
        where_mask, (uniform((3, 1), -1, 1), uniform((4,), -1, 1, seed=1), mask), wrt=(0, 1)
    )
    assert g[0].shape == (3, 1) and g[1].shape == (4,)


def test_where_with_constant_branch():
    mask = np.array([[True, False, True], [False, True, False]])
    check_vjp(where_const, (uniform((2, 3), -1, 1), mask))
    check_vjp(where_const_left, (uniform((2, 3), -1, 1), mask))


def clip_both(x):
    return np.clip(x, -0.5, 0.5)


def clip_keywords(x):
    return np.clip(x, a_min=-0.5, a_max=0.5)


def clip_upper_only(x):
    return np.clip(x, None, 0.5)


def clip_lower_only(x):
    return np.clip(x, -0.5, None)


def clip_upper_keyword(x):
    return np.clip(x, a_min=None, a_max=0.5)


def clip_method(x):
    return x.clip(-0.5, 0.5)


def clip_method_upper_only(x):
    return x.clip(None, 0.5)


def clip_method_max_keyword(x):
    return x.clip(max=0.5)


def clip_method_min_keyword(x):
    return x.clip(min=-0.5)


def clip_numpy2_keywords(x):
    return np.clip(x, min=-0.5, max=0.5)


CLIPS = [
    clip_both,
    clip_keywords,
    clip_upper_only,
    clip_lower_only,
    clip_upper_keyword,
    clip_method,
    clip_method_upper_only,
    clip_method_max_keyword,
    clip_method_min_keyword,
    clip_numpy2_keywords,
]


def _clip_input():
    # values in (-1, 1) kept at least 0.05 away from the bounds +-0.5
    x = uniform((4, 5), -1, 1, seed=11)
    return np.where(np.abs(np.abs(x) - 0.5) < 0.05, x * 0.5, x)


@pytest.mark.parametrize("f", CLIPS, ids=lambda f: f.__name__)
def test_clip(f):
    x = _clip_input()
    assert np.any(x > 0.5) and np.any(x < -0.5) and np.any(np.abs(x) < 0.5)
    check_vjp(f, (x,))


def clip_active_bounds(x, lo, hi):
    return np.clip(x, lo, hi)


def test_clip_active_bounds():
    x = _clip_input()
    lo = np.full((4, 5), -0.5)
    hi = np.array([0.5, 0.6, 0.7, 0.8, 0.9])
    g = check_vjp(clip_active_bounds, (x, lo, hi), wrt=(0, 1, 2))
    assert g[2].shape == (5,)


def test_clip_python_float():
    check_grad(clip_both, (0.3,))
    check_grad(clip_both, (0.7,))


# ----------------------------------------------------------------------------- other binary ufuncs


def b_arctan2(a, b):
    return np.arctan2(a, b)


def b_hypot(a, b):
    return np.hypot(a, b)


def b_logaddexp(a, b):
    return np.logaddexp(a, b)


def b_mod(a, b):
    return np.mod(a, b)


def b_mod_op(a, b):
    return a % b


@pytest.mark.parametrize("f", [b_arctan2, b_hypot, b_logaddexp], ids=lambda f: f.__name__)
def test_smooth_binary_ufunc(f):
    a = away_from_zero((3, 4), seed=1)
    b = away_from_zero((4,), seed=2)
    check_vjp(f, (a, b), wrt=(0, 1))


@pytest.mark.parametrize("f", [b_mod, b_mod_op], ids=lambda f: f.__name__)
def test_mod(f):
    a = np.array([[0.3, 1.4, 2.6], [3.7, -1.2, -2.3]])
    b = np.array([1.1, 1.3, 0.9])
    check_vjp(f, (a, b), wrt=(0, 1))


# ----------------------------------------------------------------------------- math module


def m_sin(x):
    return math.sin(x)


def m_cos(x):
    return math.cos(x)


def m_tan(x):
    return math.tan(x)


def m_exp(x):
    return math.exp(x)


def m_log(x):
    return math.log(x)


def m_sqrt(x):
    return math.sqrt(x)


def m_tanh(x):
    return math.tanh(x)


def m_sinh(x):
    return math.sinh(x)


def m_cosh(x):
    return math.cosh(x)


def m_asin(x):
    return math.asin(x)


def m_acos(x):
    return math.acos(x)


def m_atan(x):
    return math.atan(x)


def m_expm1(x):
    return math.expm1(x)


def m_log1p(x):
    return math.log1p(x)


def m_fabs(x):
    return math.fabs(x)


def m_float(x):
    return float(x)


MATH_UNARY = [
    (m_sin, 0.7),
    (m_cos, 0.7),
    (m_tan, 0.7),
    (m_exp, 0.7),
    (m_log, 1.7),
    (m_sqrt, 1.7),
    (m_tanh, 0.7),
    (m_sinh, 0.7),
    (m_cosh, 0.7),
    (m_asin, 0.4),
    (m_acos, 0.4),
    (m_atan, 0.7),
    (m_expm1, 0.7),
    (m_log1p, 0.7),
    (m_fabs, -0.7),
    (m_fabs, 0.7),
    (m_float, 0.7),
]


@pytest.mark.parametrize("f,x", MATH_UNARY, ids=[f"{f.__name__}({x})" for f, x in MATH_UNARY])
def test_math_unary(f, x):
    g = check_grad(f, (x,))
    assert type(g) is float


def m_log_base(x, base):
    return math.log(x, base)


def m_log_const_base(x):
    return math.log(x, 10.0)


def m_atan2(y, x):
    return math.atan2(y, x)


def m_hypot(x, y):
    return math.hypot(x, y)


def m_pow(x, y):
    return math.pow(x, y)


def m_pow_const(x):
    return math.pow(x, 3.0)


@pytest.mark.parametrize(
    "f,args",
    [
        (m_log_base, (1.7, 3.0)),
        (m_log_base, (0.4, 2.0)),
        (m_atan2, (0.3, -0.8)),
        (m_atan2, (-0.5, 0.4)),
        (m_hypot, (0.3, -0.8)),
        (m_pow, (1.3, 2.5)),
        (m_pow, (0.6, -1.5)),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_math_binary(f, args):
    ga, gb = check_grad(f, args, wrt=(0, 1))
    assert type(ga) is float and type(gb) is float


@pytest.mark.parametrize(
    "f,x",
    [(m_log_const_base, 1.7), (m_pow_const, 1.3), (m_pow_const, -0.8)],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_math_with_constant(f, x):
    check_grad(f, (x,))


def math_mix(x, y):
    return math.sin(x) * math.exp(y) + math.sqrt(x * x + y * y) - math.log(x, 2.0)


def test_math_expression():
    g = check_grad(math_mix, (0.8, -0.3), wrt=(0, 1))
    assert all(type(v) is float for v in g)


def math_with_numpy(x, w):
    return np.sum(w * math.cos(x))


def test_math_scalar_into_numpy():
    g = check_grad(math_with_numpy, (0.4, uniform((3,), -1, 1)), wrt=(0, 1))
    assert type(g[0]) is float


@pytest.mark.parametrize(
    "f, args",
    [(m_log, (1.7,)), (m_atan2, (0.3, -1.2)), (m_hypot, (0.3, -1.2)), (m_pow, (1.3, 0.7))],
)
def test_math_functions_of_two_floats_have_tangents(f, args):
    wrt = tuple(range(len(args)))
    t = tuple(0.1 * (i + 1) for i in range(len(args)))
    _, tangent = s2sad.jvp(f, wrt=wrt)(*args, tangent=t)
    grads = s2sad.grad(f, wrt=wrt)(*args)
    assert tangent == pytest.approx(sum(g * ti for g, ti in zip(grads, t)), rel=1e-12)

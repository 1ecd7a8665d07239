"""Elementwise rules: arithmetic, ufuncs and the math module. Binary rules unbroadcast. Their
tangent rule is their VJP template (ELEMENTWISE); the helpers they call sit above the entries."""

import ast
import math
from typing import TYPE_CHECKING

import numpy as np

from .common import _absent, _array, batched_broadcast_to, inexact
from .helpers import batched_helper, helper, numba_of
from .registry import ELEMENTWISE, binary, defvjp, explicit, linear, nondiff, unary

if TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types
    from numba.np.numpy_support import as_dtype


def _pow_base(args: dict) -> str:
    """x ** c with a numeric constant c folds the exponent: x ** 2 gives g * 2 * x."""
    exponent = args["x2"]
    if isinstance(exponent, ast.UnaryOp) and isinstance(exponent.operand, ast.Constant):
        if isinstance(exponent.op, ast.USub) and type(exponent.operand.value) in (int, float):
            exponent = ast.Constant(-exponent.operand.value)  # x ** -3: folded as x ** 3 is
    if isinstance(exponent, ast.Constant) and isinstance(exponent.value, (int, float)):
        c = exponent.value
        if c == 0:  # x ** 0 is 1 everywhere: never c * x ** -1, infinite (or raising) at 0
            return "0.0 * g"
        if c == 1:
            return "g"
        if c == 2:
            return "g * 2 * x1"
        return f"g * {c!r} * x1 ** {c - 1!r}"
    # where x2 is 0 the exponent is 0 too: x2 * x1 ** 0 is 0, where x2 * x1 ** -1 is 0 * inf
    # (np.not_equal: `x2 != 0` of a list is one bool)
    return "unbroadcast(g * x2 * x1 ** (x2 - np.not_equal(x2, 0)), x1)"


def _math_pow_base(args: dict) -> str:
    """math.pow(x, 0) is 1 everywhere: its derivative is 0, not 0 * x ** -1."""
    exponent = args["y"]
    if isinstance(exponent, ast.Constant) and exponent.value == 0:
        return "0.0 * g"
    if isinstance(exponent, ast.Constant):
        return "g * y * x ** (y - 1)"
    return "g * y * x ** (y - (y != 0))"  # as for np.power


def _clip_bounds(args: dict) -> tuple[str, str]:
    """np.clip takes its bounds as a_min/a_max or (NumPy 2) as min/max."""

    def given(name):
        return not (isinstance(args[name], ast.Constant) and args[name].value is None)

    return ("min" if given("min") else "a_min"), ("max" if given("max") else "a_max")


@helper
def pow_vjp_exponent_dx(t, g, ans, x):
    """The tangent of pow_vjp_exponent(g, ans, x) along `t` for x (ans held): g ans / x where
    x > 0, else 0 (a batch may lead t)."""
    positive = np.asarray(x) > 0
    return g * ans * np.where(positive, t, 0.0) / np.where(positive, x, 1.0)


@helper(
    batch_safe=True,
    jvp=explicit(
        g="pow_vjp_exponent(t, ans, x)",
        ans="pow_vjp_exponent(g, t, x)",
        x="pow_vjp_exponent_dx(t, g, ans, x)",
    ),
)
def pow_vjp_exponent(g, ans, x):
    """d(x**y)/dy = x**y log x, taken as 0 where x <= 0 (the limit used by TensorFlow)."""
    safe = np.where(np.asarray(x) > 0, x, 1)
    return g * ans * np.log(safe)


@numba_of(pow_vjp_exponent)
def _pow_vjp_exponent(g, ans, x):
    if _array(x):
        return lambda g, ans, x: g * ans * np.log(np.where(x > 0, x, 1.0))
    return lambda g, ans, x: g * ans * (math.log(x) if x > 0 else 0.0)


# arithmetic: ast operators map to these ufuncs
binary(np.add, "unbroadcast(g, x1)", "unbroadcast(g, x2)")
# the sign goes on after the sum: unbroadcast may shrink g, and -g would sweep it in full
binary(np.subtract, "unbroadcast(g, x1)", "-unbroadcast(g, x2)")
binary(np.multiply, "unbroadcast(g * x2, x1)", "unbroadcast(g * x1, x2)")
binary(np.divide, "unbroadcast(g / x2, x1)", "-unbroadcast(g * ans / x2, x2)")
binary(np.power, _pow_base, "unbroadcast(pow_vjp_exponent(g, ans, x1), x2)")
binary(np.mod, "unbroadcast(g, x1)", "unbroadcast(-g * np.floor_divide(x1, x2), x2)")
unary(np.negative, "-g")
unary(np.positive, "g")

# exponentials and logarithms
unary(np.exp, "g * ans")
unary(np.exp2, "g * ans * math.log(2.0)")
unary(np.expm1, "g * (ans + 1)")
unary(np.log, "g / x")
unary(np.log2, "g / (x * math.log(2.0))")
unary(np.log10, "g / (x * math.log(10.0))")
unary(np.log1p, "g / (1 + x)")
unary(np.sqrt, "g / (2 * ans)")
unary(np.cbrt, "g / (3 * ans**2)")
unary(np.square, "g * 2 * x")
unary(np.reciprocal, "-g * ans**2")
unary(np.abs, "g * np.sign(x)")
unary(np.fabs, "g * np.sign(x)")  # as np.abs: 0 at 0
binary(
    np.logaddexp, "unbroadcast(g * np.exp(x1 - ans), x1)", "unbroadcast(g * np.exp(x2 - ans), x2)"
)

binary(
    np.logaddexp2,
    "unbroadcast(g * np.exp2(x1 - ans), x1)",
    "unbroadcast(g * np.exp2(x2 - ans), x2)",
)
# float_power is power in float64: the same templates (x ** 0 has derivative 0 at 0)
binary(np.float_power, _pow_base, "unbroadcast(pow_vjp_exponent(g, ans, x1), x2)")
# fmod(x1, x2) = x1 - q * x2 with q = trunc(x1 / x2) an integer: q is taken from the result,
# (x1 - ans) / x2 rounded, as fmod(1.0, 0.1) has q = 9 where trunc(1.0 / 0.1) is 10
binary(np.fmod, "unbroadcast(g, x1)", "unbroadcast(-g * np.rint((x1 - ans) / x2), x2)")
# heaviside(x1, x2) is piecewise constant in x1, and x2 where x1 == 0
defvjp(
    np.heaviside,
    "x1, x2, /",
    inert=("x1",),
    x2="unbroadcast(g * (x1 == 0), x2)",
    jvp=ELEMENTWISE,
)

# trigonometric and hyperbolic
unary(np.sin, "g * np.cos(x)")
unary(np.cos, "-g * np.sin(x)")
unary(np.tan, "g * (1 + ans**2)")
unary(np.arcsin, "g / np.sqrt(1 - x**2)")
unary(np.arccos, "-g / np.sqrt(1 - x**2)")
unary(np.arctan, "g / (1 + x**2)")
unary(np.sinh, "g * np.cosh(x)")
unary(np.cosh, "g * np.sinh(x)")
unary(np.tanh, "g * (1 - ans**2)")
unary(np.arcsinh, "g / np.sqrt(x**2 + 1)")
unary(np.arctanh, "g / (1 - x**2)")
binary(
    np.arctan2,
    "unbroadcast(g * x2 / (np.square(x1) + np.square(x2)), x1)",  # (either may be a list)
    "unbroadcast(-g * x1 / (np.square(x1) + np.square(x2)), x2)",
)
binary(np.hypot, "unbroadcast(g * x1 / ans, x1)", "unbroadcast(g * x2 / ans, x2)")
# infinite at 1, as np.arcsin is at 1; (x - 1) * (x + 1) keeps its digits near 1
unary(np.arccosh, "g / np.sqrt((x - 1) * (x + 1))")
unary(np.deg2rad, "g * (math.pi / 180)")
unary(np.radians, "g * (math.pi / 180)")
unary(np.rad2deg, "g * (180 / math.pi)")
unary(np.degrees, "g * (180 / math.pi)")


@helper(nondiff=True)
def even_split(x1, x2):
    """The weight of `x1` in maximum/minimum: 1 where it wins, 1/2 on a tie."""
    return np.where(x1 == x2, 0.5, 1.0)


@numba_of(even_split)
def _even_split(x1, x2):
    if _array(x1) or _array(x2):
        # in the arrays' float dtype (float64 for integers): NumPy's float64 weights made a
        # float32 cotangent float64 (exactly: they are 1/2 and 1), which no fused float32 run
        # could then read (`np.maximum(a, 0.1)`'s), and the function compiled again unfused
        floats = [t.dtype for t in (x1, x2) if _array(t) and isinstance(t.dtype, types.Float)]
        dtype = as_dtype(max(floats, key=lambda t: t.bitwidth)) if floats else np.dtype(np.float64)
        half, one = dtype.type(0.5), dtype.type(1.0)
        return lambda x1, x2: np.where(x1 == x2, half, one)
    return lambda x1, x2: 0.5 if x1 == x2 else 1.0


# selection: ties in maximum/minimum share the cotangent evenly
binary(
    np.maximum,
    "unbroadcast(g * (x1 >= x2) * even_split(x1, x2), x1)",
    "unbroadcast(g * (x2 >= x1) * even_split(x2, x1), x2)",
)
binary(
    np.minimum,
    "unbroadcast(g * (x1 <= x2) * even_split(x1, x2), x1)",
    "unbroadcast(g * (x2 <= x1) * even_split(x2, x1), x2)",
)


@helper(nondiff=True)
def nan_skip_split(x1, x2, wins):
    """The weight of `x1` in fmax/fmin (`wins`: x1 >= x2, or x1 <= x2): where `x2` is NaN, 1 if
    `x1` is not (the result is x1); else as in maximum/minimum, 1/2 on a tie."""
    return np.where(np.isnan(x2), ~np.isnan(x1), wins * np.where(x1 == x2, 0.5, 1.0))


@numba_of(nan_skip_split)
def _nan_skip_split(x1, x2, wins):
    if _array(x1) or _array(x2):
        return lambda x1, x2, wins: np.where(
            np.isnan(x2), ~np.isnan(x1), wins * np.where(x1 == x2, 0.5, 1.0)
        )

    def scalar(x1, x2, wins):
        if np.isnan(x2):
            return 0.0 if np.isnan(x1) else 1.0
        return (0.5 if x1 == x2 else 1.0) if wins else 0.0

    return scalar


# fmax/fmin skip NaN: the operand that is not NaN gets the cotangent
binary(
    np.fmax,
    "unbroadcast(g * nan_skip_split(x1, x2, x1 >= x2), x1)",
    "unbroadcast(g * nan_skip_split(x2, x1, x2 >= x1), x2)",
)
binary(
    np.fmin,
    "unbroadcast(g * nan_skip_split(x1, x2, x1 <= x2), x1)",
    "unbroadcast(g * nan_skip_split(x2, x1, x2 <= x1), x2)",
)
defvjp(
    np.where,
    "condition, x, y, /",
    inert=("condition",),  # piecewise constant: only its truth counts
    x="unbroadcast(np.where(condition, g, 0.0), x)",
    y="unbroadcast(np.where(condition, 0.0, g), y)",
    jvp=ELEMENTWISE,
)


@helper(nondiff=True)
def clip_passes(a, a_min, a_max):
    """Where np.clip lets `a` through (bounds inclusive, so the gradient is 1 at the bounds)."""
    inside = np.ones(np.shape(a), dtype=bool)
    if a_min is not None:
        inside = inside & (a >= a_min)
    if a_max is not None:
        inside = inside & (a <= a_max)
    return inside


@numba_of(clip_passes)
def _clip_passes(a, a_min, a_max):
    low, high = not _absent(a_min), not _absent(a_max)
    if low and high:
        return lambda a, a_min, a_max: (a >= a_min) & (a <= a_max)
    if low:
        return lambda a, a_min, a_max: a >= a_min
    if high:
        return lambda a, a_min, a_max: a <= a_max
    if _array(a):
        return lambda a, a_min, a_max: np.ones(a.shape, dtype=np.bool_)
    return lambda a, a_min, a_max: True


defvjp(
    np.clip,
    "a, a_min=None, a_max=None, out=None, *, min=None, max=None",
    a=lambda args: "unbroadcast(g * clip_passes(a, {}, {}), a)".format(*_clip_bounds(args)),
    a_min="unbroadcast(g * (a < a_min), a_min)",
    a_max="unbroadcast(g * (a > a_max), a_max)",
    min="unbroadcast(g * (a < min), min)",
    max="unbroadcast(g * (a > max), max)",
    jvp=ELEMENTWISE,
)

# identities and conversions (to an integer or bool dtype: no derivative, pipeline/classify.py)
defvjp(np.copy, "a", a="g", jvp=ELEMENTWISE)
defvjp(
    np.asarray,
    "a, dtype=None, order=None, *, device=None, copy=None, like=None",
    a="g",
    jvp=ELEMENTWISE,
)
defvjp(
    np.asanyarray,
    "a, dtype=None, order=None, *, device=None, copy=None, like=None",
    a="g",
    jvp=ELEMENTWISE,
)
defvjp(
    np.array,
    "object, dtype=None, *, copy=True, order='K', subok=False, ndmin=0, like=None",
    literal={"ndmin": (0,)},  # more dimensions: a reshape this rule does not make
    object="g",
    jvp=ELEMENTWISE,
)


def _astype(x, dtype, /, *, copy=True, device=None):
    """x.astype(dtype): np.astype before NumPy 2.1 (the method's key in the rule table)."""
    return x.astype(dtype, copy=copy)


# x.astype(dtype) (pipeline/classify.py maps the method here): the derivative passes through, in
# the new dtype (to a complex dtype: refused by normalization, as a complex value of a real one)
astype = getattr(np, "astype", _astype)
defvjp(astype, "x, dtype, /, *, copy=True, device=None", x="g", jvp=ELEMENTWISE)
defvjp(float, "x=0.0, /", x="g", jvp=ELEMENTWISE)


def item_of(x, /):
    """`x.item()` (pipeline/classify.py maps the method here): the one number of `x`, as
    float(x) but of a one-element array of any rank too. Its tangent is `x_dot.item()` (a
    number like the value), its cotangent the number broadcast back to `x`'s shape."""
    return x.item()


defvjp(item_of, "x, /", x="g", jvp=linear("x"))
for _float_type in (np.float64, np.float32, np.float16):  # np.float64(x): a cast, as astype
    defvjp(_float_type, "x=0.0, /", x="g", jvp=ELEMENTWISE)
unary(abs, "g * np.sign(x)")


@helper(batch_safe=True, jvp=linear("g"))
def real_only(g, x):
    """`g`, where `x` is real: np.real, np.imag and np.conj are the identity, zero and the
    identity on real values; of a complex one (a complex constant times x) they would drop a
    part of the derivative, so that raises (s2sad does not differentiate complex values yet)."""
    if np.iscomplexobj(x):
        raise TypeError(
            "s2sad does not differentiate complex values yet: np.real, np.imag and np.conj "
            "are differentiated on real values only"
        )
    return g


@numba_of(real_only)
def _real_only(g, x):
    if isinstance(x, types.Complex) or isinstance(getattr(x, "dtype", None), types.Complex):
        return None
    return lambda g, x: g


defvjp(np.real, "val", val="real_only(g, val)", jvp=ELEMENTWISE)
defvjp(np.imag, "val", val="0.0 * real_only(g, val)", jvp=ELEMENTWISE)
unary(np.conjugate, "real_only(g, x)")  # np.conj is np.conjugate
defvjp(np.real_if_close, "a, tol=100", a="real_only(g, a)", jvp=ELEMENTWISE)
# nan_to_num: 1 where x is finite, 0 where a value replaced it; copy=False writes into x
defvjp(
    np.nan_to_num,
    "x, copy=True, nan=0.0, posinf=None, neginf=None",
    literal={"copy": (True,)},
    x="g * np.isfinite(x)",
    jvp=ELEMENTWISE,
)

# the math module on Python floats
unary(math.sin, "g * math.cos(x)")
unary(math.cos, "-g * math.sin(x)")
unary(math.tan, "g * (1 + ans**2)")
unary(math.asin, "g / math.sqrt(1 - x**2)")
unary(math.acos, "-g / math.sqrt(1 - x**2)")
unary(math.atan, "g / (1 + x**2)")
unary(math.sinh, "g * math.cosh(x)")
unary(math.cosh, "g * math.sinh(x)")
unary(math.tanh, "g * (1 - ans**2)")
unary(math.exp, "g * ans")
unary(math.expm1, "g * (ans + 1)")
unary(math.log1p, "g / (1 + x)")
unary(math.sqrt, "g / (2 * ans)")
unary(math.fabs, "g * math.copysign(1.0, x)")
defvjp(
    math.log,
    "x, base=math.e, /",
    x="g / (x * math.log(base))",
    base="-g * ans / (base * math.log(base))",
    jvp=ELEMENTWISE,  # the math module's functions of two floats: partial derivatives
)
defvjp(
    math.atan2,
    "y, x, /",
    y="g * x / (x**2 + y**2)",
    x="-g * y / (x**2 + y**2)",
    jvp=ELEMENTWISE,
)
defvjp(math.hypot, "x, y, /", x="g * x / ans", y="g * y / ans", jvp=ELEMENTWISE)
defvjp(
    math.pow,
    "x, y, /",
    x=_math_pow_base,
    y="g * ans * math.log(x) if x > 0 else 0.0",
    jvp=ELEMENTWISE,
)

nondiff(
    np.sign,
    np.angle,  # of a real value: 0 or pi (differentiated values are never complex)
    np.floor,
    np.ceil,
    np.round,
    np.rint,
    np.trunc,
    np.floor_divide,
    np.isnan,
    np.isinf,
    np.isfinite,
    np.greater,
    np.less,
    np.equal,
    np.not_equal,
    np.greater_equal,
    np.less_equal,
    np.logical_and,
    np.logical_or,
    np.logical_not,
    math.floor,
    math.ceil,
    math.isnan,
    math.isinf,
    round,
    int,
    bool,
    # np.int64(x) and its kin: integers, piecewise constant in x
    *(np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_),
)

# a filled array: the cotangent of the fill value sums what each element received, unless the
# array is of integers (dtype=, or full_like's `a`, read for its shape and dtype only); its tangent
# is the fill value's everywhere, 0 in integers
_FILL_TANGENT = explicit(
    fill_value="np.broadcast_to(t, np.shape(ans)) * inexact(ans)",
    batched={"fill_value": "batched_broadcast_to(t, np.shape(ans)) * inexact(ans)"},
)
defvjp(
    np.full,
    "shape, fill_value, dtype=None, order='C', *, device=None, like=None",
    fill_value="unbroadcast(g, fill_value) * inexact(ans)",
    jvp=_FILL_TANGENT,
)
defvjp(
    np.full_like,
    "a, fill_value, dtype=None, order='K', subok=True, shape=None, *, device=None",
    inert=("a",),
    fill_value="unbroadcast(g, fill_value) * inexact(ans)",
    jvp=_FILL_TANGENT,
)


# np.linspace(start, stop, num): sample i is start (1 - f_i) + stop f_i, f_i = i / (num - 1)
# (endpoint=True) or i / num, the samples along `axis` of the result; retstep=True (a pair) has
# no rule. Integer samples (dtype=) carry no derivative.


@helper(batch_safe=True, jvp=linear("g"))
def linspace_vjp(g, ans, num, which, endpoint=True, axis=0):
    """The cotangent of np.linspace's start (which=0) or stop (1), before unbroadcasting: g
    weighted by each sample's share of that end and summed over the samples' axis (counted from
    the end, so that a batch may lead g)."""
    f = np.linspace(0.0, 1.0, num, endpoint=endpoint)
    ndim = np.ndim(ans)
    moved = np.moveaxis(g, axis % ndim - ndim, -1)
    return (moved @ (f if which else 1.0 - f)) * inexact(ans)


@numba_of(linspace_vjp)
def _linspace_vjp(g, ans, num, which, endpoint=True, axis=0):
    if not (_array(g) and g.ndim == 1):  # one sample axis: `axis` is it
        return None

    def impl(g, ans, num, which, endpoint=True, axis=0):
        total = 0.0
        div = num - 1 if endpoint else num
        for i in range(num):
            f = i / div if div > 0 else 0.0
            total += g[i] * (f if which else 1.0 - f)
        return total

    return impl


@helper(nondiff=True)
def linspace_shares(ans, num, which, endpoint=True, axis=0):
    """Each sample's share of np.linspace's start (which=0) or stop (1), shaped to broadcast
    against its result `ans` (the samples along `axis`), and the axis counted from the start."""
    f = np.linspace(0.0, 1.0, num, endpoint=endpoint)
    ndim = np.ndim(ans)
    shape = [1] * ndim
    shape[axis % ndim] = num
    return np.reshape(f if which else 1.0 - f, shape) * inexact(ans), axis % ndim


@helper
def linspace_jvp(t, ans, num, which, endpoint=True, axis=0):
    """The tangent of np.linspace's result along `t`, the tangent of start (which=0) or stop
    (1): t broadcast to a sample's shape, times each sample's share of that end."""
    shares, ax = linspace_shares(ans, num, which, endpoint, axis)
    sample = np.shape(ans)[:ax] + np.shape(ans)[ax + 1 :]
    return np.expand_dims(np.broadcast_to(t, sample), ax) * shares


@batched_helper
def batched_linspace_jvp(t, ans, num, which, endpoint=True, axis=0):
    shares, ax = linspace_shares(ans, num, which, endpoint, axis)
    sample = np.shape(ans)[:ax] + np.shape(ans)[ax + 1 :]
    return np.expand_dims(batched_broadcast_to(t, sample), ax + 1) * shares


@numba_of(linspace_jvp)
def _linspace_jvp(t, ans, num, which, endpoint=True, axis=0):
    if _array(t):  # scalar end points: one sample axis
        return None

    def impl(t, ans, num, which, endpoint=True, axis=0):
        out = np.empty(num)
        div = num - 1 if endpoint else num
        for i in range(num):
            f = i / div if div > 0 else 0.0
            out[i] = t * (f if which else 1.0 - f)
        return out

    return impl


@helper(nondiff=True)
def linspace_ends(start, stop, num, endpoint):
    """`np.linspace(start, stop, num, endpoint=endpoint)`, in jitted code (pipeline/lower.py):
    Numba's takes no `endpoint`."""
    return np.linspace(start, stop, num, endpoint=endpoint)


@numba_of(linspace_ends)
def _linspace_ends(start, stop, num, endpoint):
    if _array(start) or _array(stop):  # (end points of arrays: Numba's error names this)
        return None

    def impl(start, stop, num, endpoint):  # NumPy's arithmetic, sample by sample
        if num < 0:
            raise ValueError("Number of samples must be non-negative.")
        div = num - 1 if endpoint else num
        delta = stop - start
        step = delta / div if div > 0 else np.nan
        out = np.empty(num)
        for i in range(num):
            if div > 0 and step != 0:
                out[i] = i * step + start
            elif div > 0:
                out[i] = i / div * delta + start
            else:
                out[i] = i * delta + start
        if endpoint and num > 1:
            out[num - 1] = stop
        return out

    return impl


defvjp(
    np.linspace,
    "start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None",
    literal={"retstep": (False,)},
    inert=("num", "endpoint", "dtype", "axis"),
    start="unbroadcast(linspace_vjp(g, ans, num, 0, endpoint=endpoint, axis=axis), start)",
    stop="unbroadcast(linspace_vjp(g, ans, num, 1, endpoint=endpoint, axis=axis), stop)",
    jvp=explicit(
        start="linspace_jvp(t, ans, num, 0, endpoint=endpoint, axis=axis)",
        stop="linspace_jvp(t, ans, num, 1, endpoint=endpoint, axis=axis)",
        batched={
            "start": "batched_linspace_jvp(t, ans, num, 0, endpoint=endpoint, axis=axis)",
            "stop": "batched_linspace_jvp(t, ans, num, 1, endpoint=endpoint, axis=axis)",
        },
    ),
)

# array constructors and shape queries: their values never carry a derivative (np.arange does,
# in its end points and step: no rule yet, so a differentiated one is refused)
nondiff(
    np.ones_like,
    np.zeros_like,
    np.empty_like,
    np.zeros,
    np.ones,
    np.eye,
    np.empty,
    np.shape,
    np.ndim,
    np.size,
    np.isclose,
    np.allclose,
    np.array_equal,
)
# where the factories without a rule signature take a dtype by position, as NumPy reads one
# there (`np.zeros(3, np.int64)` is `dtype=np.int64`; np.arange's C signature takes it after
# `step`): the other calls' dtype parameters are their rules' (pipeline/classify.py, given_dtype)
DTYPE_AT = {np.zeros: 1, np.ones: 1, np.empty: 1, np.zeros_like: 1, np.ones_like: 1}
DTYPE_AT |= {np.empty_like: 1, np.eye: 3, np.identity: 1, np.arange: 3}

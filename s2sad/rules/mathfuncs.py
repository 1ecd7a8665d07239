"""Special functions: np.sinc, the math module's erf, erfc, gamma and lgamma (their derivatives
need the digamma function and its derivatives, the polygamma functions, computed here in float64
so that SciPy stays optional), and the builtins sum, min and max. Helpers sit above the entries."""

import math
from typing import TYPE_CHECKING

import numpy as np

from .common import _array
from .helpers import batched_helper, helper, numba_jitable, numba_of
from .registry import ELEMENTWISE, defvjp, explicit, linear, unary

if TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import literal_unroll

# ----------------------------------------------------------------------------- sinc
# np.sinc(x) = S(pi x) with S(y) = sin(y) / y. Its derivatives: S'(y) = (cos y - S(y)) / y and
# S''(y) = -S(y) - 2 S'(y) / y, which cancel near 0: there |y| < 1/2 takes the Taylor series
# (exact at 0: sinc'(0) = 0, sinc''(0) = -pi^2 / 3); what it leaves out is below 1e-18.

# S'''(y) = -S'(y) - 2 S''(y) / y + 2 S'(y) / y^2 (third derivatives: the tangent of
# sinc_curvature), with the series of S'''(y) / y near 0.
# the coefficients of S'(y) / y, S''(y) and S'''(y) / y in y^2, highest power first (Horner)
_SINC_D1 = tuple((-1) ** k * 2 * k / math.factorial(2 * k + 1) for k in range(8, 0, -1))
_SINC_D2 = tuple(
    (-1) ** k * 2 * k * (2 * k - 1) / math.factorial(2 * k + 1) for k in range(8, 0, -1)
)
_SINC_D3 = tuple(
    (-1) ** k * 2 * k * (2 * k - 1) * (2 * k - 2) / math.factorial(2 * k + 1)
    for k in range(9, 1, -1)
)


@helper  # (also copied into `s2sad emit` modules)
@numba_jitable
def _sinc_series(y2, coefficients):
    total = 0.0 * y2
    for c in coefficients:
        total = total * y2 + c
    return total


@numba_jitable
def _sinc_d1_scalar(x):
    y = np.pi * x
    if abs(y) < 0.5:
        return y * _sinc_series(y * y, _SINC_D1) * np.pi
    return (math.cos(y) - math.sin(y) / y) / y * np.pi


@helper
def _like(out, x):
    """`out` (float64) as `x` is: a Python float for a Python float, else x's float dtype."""
    if isinstance(x, float) and not isinstance(x, np.generic):
        return float(out)
    return np.asarray(out).astype(np.result_type(x, np.float32))[()]  # 0-d: a NumPy scalar


@helper
def _sinc_d(x, order):
    y = np.pi * np.asarray(x, dtype=np.float64)
    near = np.abs(y) < 0.5
    safe = np.where(near, 1.0, y)
    s = np.sin(safe) / safe
    d1 = (np.cos(safe) - s) / safe
    d2 = -s - 2 * d1 / safe
    if order == 1:
        out = np.where(near, y * _sinc_series(y * y, _SINC_D1), d1) * np.pi
    elif order == 2:
        out = np.where(near, _sinc_series(y * y, _SINC_D2), d2) * np.pi**2
    else:
        d3 = -d1 - 2 * d2 / safe + 2 * d1 / safe**2
        out = np.where(near, y * _sinc_series(y * y, _SINC_D3), d3) * np.pi**3
    return _like(out, x)


@helper
def sinc_third(x):
    """The third derivative of np.sinc (0 at 0); it has no tangent rule: forward mode refuses
    a fourth derivative by name."""
    return _sinc_d(x, 3)


@helper(jvp=explicit(x="sinc_third(x) * t"))
def sinc_curvature(x):
    """The second derivative of np.sinc (a third derivative is its tangent); no Numba form
    (only Hessians, never jitted, call it)."""
    return _sinc_d(x, 2)


@helper(jvp=explicit(x="sinc_curvature(x) * t"))
def sinc_slope(x):
    """The derivative of np.sinc (0 at 0)."""
    return _sinc_d(x, 1)


@numba_of(sinc_slope)
def _sinc_slope(x):
    if _array(x):
        return lambda x: _float_map(x, 0, 0)
    return lambda x: _sinc_d1_scalar(x)


unary(np.sinc, "g * sinc_slope(x)")

# ----------------------------------------------------------------------------- polygamma
# psi^(n)(x), the n-th derivative of digamma: x moved up to x >= 12 + n by the recurrence
# psi^(n)(x) = psi^(n)(x + 1) + (-1)^(n+1) n! / x^(n+1), then the asymptotic series
# psi(x) ~ log x - 1/(2x) - sum_k B_2k / (2k x^2k) and, for n >= 1, its n-th derivative. Below
# 0, digamma and trigamma reflect (psi(x) = psi(1 - x) - pi / tan(pi x), psi'(x) = -psi'(1 - x)
# + pi^2 / sin^2(pi x)); higher orders recur upwards. At 0, -1, -2, ... (the poles): NaN.

_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)


@helper  # (also copied into `s2sad emit` modules)
@numba_jitable
def _polygamma_scalar(n, x):
    if x <= 0 and x == math.floor(x):
        return math.nan
    if x < 0 and n == 0:
        return _polygamma_up(0, 1.0 - x) - math.pi / math.tan(math.pi * x)
    if x < 0 and n == 1:
        s = math.sin(math.pi * x)
        return math.pi * math.pi / (s * s) - _polygamma_up(1, 1.0 - x)
    return _polygamma_up(n, x)


@helper  # (also copied into `s2sad emit` modules)
@numba_jitable
def _polygamma_up(n, x):
    sign = 1.0 if n % 2 == 1 else -1.0  # (-1)^(n+1)
    fact = math.gamma(n + 1.0)  # n!
    total = 0.0
    while x < 12.0 + n:
        total += sign * fact / x ** (n + 1)
        x += 1.0
    if n == 0:
        series = math.log(x) - 0.5 / x
    else:
        series = sign * (math.gamma(float(n)) / x**n + fact / (2.0 * x ** (n + 1)))
    k = 1
    for b in _BERNOULLI:
        if n == 0:
            series -= b / (2 * k * x ** (2 * k))
        else:  # the n-th derivative of -B_2k / (2k x^2k): B_2k (2k + n - 1)! / ((2k)! x^(2k+n))
            series += (
                sign * b * math.gamma(2.0 * k + n) / math.gamma(2.0 * k + 1) / x ** (2 * k + n)
            )
        k += 1
    return series + total


@numba_jitable
def _float_map(x, order, which):
    """A jitted helper of one float over an array: which 0 is sinc's derivative, 1 the
    polygamma function of that order."""
    out = np.empty(x.shape, dtype=x.dtype)  # float64 or float32, as the NumPy forms give
    flat = x.ravel()
    for i in range(flat.size):
        if which == 1:
            out.flat[i] = _polygamma_scalar(order, flat[i])
        else:
            out.flat[i] = _sinc_d1_scalar(flat[i])
    return out


@helper(jvp=explicit(x="polygamma_real(n + 1, x) * t"))
def polygamma_real(n, x):
    """psi^(n)(x) in float64 (digamma for n = 0), elementwise."""
    if np.ndim(x) == 0:
        return _like(_polygamma_scalar(n, float(x)), x)
    flat = np.asarray(x, dtype=np.float64).ravel()
    out = np.array([_polygamma_scalar(n, v) for v in flat]).reshape(np.shape(x))
    return _like(out, x)


@numba_of(polygamma_real)
def _polygamma_real(n, x):
    if _array(x):
        return lambda n, x: _float_map(x, n, 1)
    return lambda n, x: _polygamma_scalar(n, x)


# the math module's special functions, on Python floats
unary(math.erf, "g * (2 / math.sqrt(math.pi)) * math.exp(-x * x)")
unary(math.erfc, "-g * (2 / math.sqrt(math.pi)) * math.exp(-x * x)")
unary(math.gamma, "g * ans * polygamma_real(0, x)")
unary(math.lgamma, "g * polygamma_real(0, x)")  # of log|gamma(x)|, below 0 too
unary(math.asinh, "g / math.sqrt(x * x + 1)")
unary(math.acosh, "g / math.sqrt((x - 1) * (x + 1))")  # infinite at 1, as np.arccosh
unary(math.atanh, "g / (1 - x * x)")
unary(math.log2, "g / (x * math.log(2.0))")
unary(math.log10, "g / (x * math.log(10.0))")
unary(math.radians, "g * (math.pi / 180)")
unary(math.degrees, "g * (180 / math.pi)")
defvjp(math.fmod, "x, y, /", x="g", y="-g * round((x - ans) / y)", jvp=ELEMENTWISE)  # as np.fmod

# ----------------------------------------------------------------------------- builtins
# sum([a, b, c]) of a list literal is additions (normalization spells it so); sum(x) of an array
# adds its rows: np.sum(x, axis=0) + start, with start a number constant


@helper(batch_safe=True, jvp=linear("g"))
def builtin_extremum_vjp(g, args, k, ans):
    """The cotangent of argument `k` of the builtin max(*args) or min(*args) of numbers: `g` if
    it is the result, shared evenly among arguments that tie (as np.maximum does)."""
    if len(args) < 2:
        raise TypeError("s2sad differentiates max/min of two or more numbers (np.max: of an array)")
    ties = sum(1 for a in args if a == ans)
    return g * (args[k] == ans) / ties if ties else 0.0 * g


@numba_of(builtin_extremum_vjp)
def _builtin_extremum_vjp(g, args, k, ans):
    if len(args) < 2:
        return None

    def impl(g, args, k, ans):
        ties = 0
        for a in literal_unroll(args):
            ties += a == ans
        return g * (args[k] == ans) / ties if ties else 0.0 * g

    return impl


for _f in (max, min):
    defvjp(
        _f,
        "*args, key=None",
        seq=("args",),
        literal={"key": (None,)},
        args="builtin_extremum_vjp(g, args, k, ans)",
        jvp=ELEMENTWISE,
    )


@batched_helper
def batched_builtin_sum(iterable, start=0):
    """sum(t) for each row of a batched tangent."""
    return np.sum(iterable, axis=1)


defvjp(
    sum,
    "iterable, /, start=0",
    literal={"start": (0,)},
    iterable="expand_reduced(g, iterable, axis=0)",
    jvp=linear("iterable", batched=batched_builtin_sum),
)

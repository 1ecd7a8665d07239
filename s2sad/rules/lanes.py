"""Elementwise functions written as arithmetic that LLVM vectorises, for the loops fused code
runs (pipeline/fusion). Numba computes `np.tanh`, `np.exp` or `np.log` of a number by a call
into the C library, one element at a time, which no loop vectorises (LLVM's vector `llvm.exp`
becomes one call per element without a vector math library): 14, 3.0 and 2.6 ns an element on
the benchmark's machine, where NumPy's own SIMD ufuncs take about 1 ns, so a fused MLP layer ran
slower jitted than in NumPy mode. Written as the polynomials, bit operations and selects below,
a fused loop computes 8 elements at a time (AVX-512), about 1 ns each. Bounds, against NumPy's
float64 functions: tanh 3 units in the last place, exp and log 1; special values exactly
NumPy's. float32 is computed in float64 and rounded, so it is within 1 unit of the exact value
(NumPy's own float32 exp and log are up to 2 and 4 units from it). Python never runs fused
loops: the NumPy form is NumPy's.
"""

import math
import typing

import numpy as np

from .helpers import helper, numba_jitable, numba_of, type_test

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types

# ln 2 in two parts (fdlibm's split): the first with its low 32 bits zero, so that n times it
# is exact for the n below; the second, ln 2 less the first, rounded
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
# 1/k! for k = 2 ... 14: the Taylor series of e^r - 1 beyond r, to within 4e-18 of it for
# |r| <= ln(2)/2
_INVERSE_FACTORIALS = tuple(1.0 / math.factorial(k) for k in range(2, 15))
# 2/(2k+1) for k = 1 ... 10: log((1+s)/(1-s)) = 2s + s (2s^2/3 + 2s^4/5 + ...), to within 3e-17
# of it (relative) for |s| <= 3 - 2 sqrt(2), where log of [sqrt(2)/2, sqrt(2)) takes s
_ATANH_SERIES = tuple(2.0 / (2 * k + 1) for k in range(1, 11))
_LOG2E = 1.4426950408889634  # 1 / ln 2


@type_test
def _in_float64(x, f64, numpys):
    """The form of an elementwise function for a number of type `x`: `f64` of a float64, of a
    float32 too (computed in float64, rounded once: float32 in, float32 out, as NumPy), else
    NumPy's own (`numpys`)."""
    if isinstance(x, types.Float) and x.bitwidth == 64:
        return lambda x: f64(x)
    if isinstance(x, types.Float) and x.bitwidth == 32:
        return lambda x: np.float32(f64(np.float64(x)))
    return lambda x: numpys(x)


@numba_jitable
def _expm1_reduced(r):
    """e^r - 1 for |r| <= ln(2)/2, by its Taylor series to r^14 (within 4e-18 of it there)."""
    c = _INVERSE_FACTORIALS
    p = c[12]
    p = p * r + c[11]
    p = p * r + c[10]
    p = p * r + c[9]
    p = p * r + c[8]
    p = p * r + c[7]
    p = p * r + c[6]
    p = p * r + c[5]
    p = p * r + c[4]
    p = p * r + c[3]
    p = p * r + c[2]
    p = p * r + c[1]
    p = p * r + c[0]
    return (p * r) * r + r


@numba_jitable
def _tanh_float64(x):
    """tanh of a float64 as arithmetic and one division, within 3 units in the last place of
    NumPy's: tanh|x| = m / (m + 2) with m = e^(2|x|) - 1, where |x| is clipped at 20 (tanh is 1
    there to double precision, and m stays finite); NaN passes the clip, as it fails `>`.
    2|x| = n ln 2 + r with |r| <= ln(2)/2, so m = 2^n (e^r - 1) + (2^n - 1), with 2^n exact
    (an integer shift, n <= 58) and e^r - 1 by its Taylor series."""
    t = abs(x)
    t = 20.0 if t > 20.0 else t
    y = t + t
    n = np.floor(y * _LOG2E + 0.5)  # y / ln 2, rounded
    r = (y - n * _LN2_HI) - n * _LN2_LO
    p = _expm1_reduced(r)
    scale = float(np.int64(1) << np.int64(n))
    m = scale * p + (scale - 1.0)
    return math.copysign(m / (m + 2.0), x)


@helper
def tanh_lanes(x):
    """`np.tanh(x)` of one element of a fused loop, in a form whose loop LLVM vectorises."""
    return np.tanh(x)


@numba_of(tanh_lanes)
def _tanh_lanes(x):
    return _in_float64(x, _tanh_float64, np.tanh)


@numba_jitable
def _power_of_two(k):
    """2^k for an integer k with -1022 <= k <= 1023, from its bits."""
    return np.int64((k + 1023) << 52).view(np.float64)


@numba_jitable
def _exp_float64(x):
    """e^x of a float64 as arithmetic, within 1 unit in the last place of NumPy's (subnormal
    results within 1 unit of 2^-1074). x is clipped to [-746, 709.8], past where e^x rounds to 0
    and overflows to inf, so those fall out of the arithmetic; NaN fails both tests, is clipped
    to -746 (an integer conversion of NaN has no defined value) and passes through at the end.
    x = n ln 2 + r with |r| <= ln(2)/2, e^r - 1 by its Taylor series, and 2^n as two powers of
    two from their bits (each in range for the n of a subnormal or overflowing result), so the
    only rounding past 1 + (e^r - 1) is the one to a subnormal."""
    t = x if x > -746.0 else -746.0
    t = t if t < 709.8 else 709.8
    n = np.floor(t * _LOG2E + 0.5)  # x / ln 2, rounded
    r = (t - n * _LN2_HI) - n * _LN2_LO
    k = np.int64(n)
    half = k >> 1
    y = ((1.0 + _expm1_reduced(r)) * _power_of_two(half)) * _power_of_two(k - half)
    return y if x == x else x


@helper
def exp_lanes(x):
    """`np.exp(x)` of one element of a fused loop, in a form whose loop LLVM vectorises."""
    return np.exp(x)


@numba_of(exp_lanes)
def _exp_lanes(x):
    return _in_float64(x, _exp_float64, np.exp)


@numba_jitable
def _log_float64(x):
    """log x of a float64 as arithmetic and one division, within 1 unit in the last place of
    NumPy's. A subnormal x is scaled by 2^54 first. From the bits, x = 2^k m with m in
    [sqrt(2)/2, sqrt(2)); with f = m - 1 and s = f / (2 + f), log m = 2 atanh(s)
    = f - f^2/2 + s (f^2/2 + R), R the series beyond 2s (f - 2s = s f), which keeps the large
    terms exact; k ln 2 is added in fdlibm's two parts. The arithmetic runs on 0, negatives, inf
    and NaN too (their bits give some finite or NaN number, no undefined conversion) and they
    are selected at the end: -inf, NaN, inf, NaN. Selects only, no branch: with a branch for
    the special values (`x >= tiny and x < inf`) the loop ran at 3.6 ns an element, not 0.9."""
    tiny = x < 2.2250738585072014e-308  # subnormal, or 0, negative, -inf
    y = x * 18014398509481984.0 if tiny else x
    bits = np.float64(y).view(np.int64)
    # subtracting the bits of sqrt(2)/2 puts m's range at the bottom of an exponent's
    shifted = bits - np.int64(0x3FE6A09E667F3BCD)
    k = (shifted >> 52) - (54 if tiny else 0)
    m = np.int64((shifted & 0xFFFFFFFFFFFFF) + 0x3FE6A09E667F3BCD).view(np.float64)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    c = _ATANH_SERIES
    p = c[9]
    p = p * z + c[8]
    p = p * z + c[7]
    p = p * z + c[6]
    p = p * z + c[5]
    p = p * z + c[4]
    p = p * z + c[3]
    p = p * z + c[2]
    p = p * z + c[1]
    p = p * z + c[0]
    half_square = 0.5 * f * f
    dk = float(k)
    result = s * (half_square + p * z) + dk * _LN2_LO - half_square + f + dk * _LN2_HI
    result = result if x < math.inf else x  # inf, and NaN
    result = result if x != 0.0 else -math.inf
    return result if x >= 0.0 else math.nan


@helper
def log_lanes(x):
    """`np.log(x)` of one element of a fused loop, in a form whose loop LLVM vectorises."""
    return np.log(x)


@numba_of(log_lanes)
def _log_lanes(x):
    return _in_float64(x, _log_float64, np.log)


@numba_jitable
def _power_by_squares(x, n):
    """x ** n for an integer 0 <= n < 256: Numba's integer power (the same products, in the same
    order: r *= x at each bit of n set, x squared after each), with selects for its branches on
    n's bits, so that a loop over elements vectorises (0.2 ns an element, not 2.8, at n = 64)."""
    r = 1.0
    p = x
    r = r * (p if n & 1 else 1.0)
    p = p * p
    r = r * (p if n & 2 else 1.0)
    p = p * p
    r = r * (p if n & 4 else 1.0)
    p = p * p
    r = r * (p if n & 8 else 1.0)
    p = p * p
    r = r * (p if n & 16 else 1.0)
    p = p * p
    r = r * (p if n & 32 else 1.0)
    p = p * p
    r = r * (p if n & 64 else 1.0)
    p = p * p
    return r * (p if n & 128 else 1.0)


@helper
def power_lanes(x, n):
    """`x ** n` of one element of a fused loop and a number `n` (not a constant: Numba
    unrolls those), in a form whose loop LLVM vectorises where `n` is an integer. The fused
    run's guard checks 0 <= n < 256 first (fusion/runs.py): a branch on it here, per element,
    kept the loop from vectorising (Numba compiles a helper apart, and LLVM did not move the
    branch out of the loop)."""
    return x**n


@numba_of(power_lanes)
def _power_lanes(x, n):
    if isinstance(x, types.Float) and x.bitwidth == 64 and isinstance(n, types.Integer):
        return lambda x, n: _power_by_squares(x, n)
    return lambda x, n: x**n

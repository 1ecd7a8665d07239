"""Elementwise functions written as arithmetic that LLVM vectorises, for the loops fused code
runs (pipeline/fusion). Numba computes `np.tanh` of a number by a call into the C library, one
element at a time, which no loop vectorises: 14 ns an element on the benchmark's machine, where
NumPy's own SIMD tanh takes about 1 ns, so a fused MLP layer ran slower jitted than in NumPy
mode. Written as the polynomial and division below, a fused loop computes 8 elements at a time
(AVX-512), about 1 ns each. Python never runs fused loops: the NumPy form is NumPy's.
"""

import math
import typing

import numpy as np

from .helpers import helper, numba_jitable, numba_of

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types

# ln 2 in two parts (fdlibm's split): the first with its low 32 bits zero, so that n times it
# is exact for the n below; the second, ln 2 less the first, rounded
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
# 1/k! for k = 2 ... 14: the Taylor series of e^r - 1 beyond r, to within 4e-18 of it for
# |r| <= ln(2)/2
_INVERSE_FACTORIALS = tuple(1.0 / math.factorial(k) for k in range(2, 15))


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
    n = np.floor(y * 1.4426950408889634 + 0.5)  # y / ln 2, rounded
    r = (y - n * _LN2_HI) - n * _LN2_LO
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
    p = (p * r) * r + r  # e^r - 1
    scale = float(np.int64(1) << np.int64(n))
    m = scale * p + (scale - 1.0)
    return math.copysign(m / (m + 2.0), x)


@helper
def tanh_lanes(x):
    """`np.tanh(x)` of one element of a fused loop, in a form whose loop LLVM vectorises."""
    return np.tanh(x)


@numba_of(tanh_lanes)
def _tanh_lanes(x):
    if isinstance(x, types.Float) and x.bitwidth == 64:
        return lambda x: _tanh_float64(x)
    if isinstance(x, types.Float) and x.bitwidth == 32:  # float32 in, float32 out, as np.tanh
        return lambda x: np.float32(_tanh_float64(np.float64(x)))
    return lambda x: np.tanh(x)

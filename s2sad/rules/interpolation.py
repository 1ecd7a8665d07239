"""Interpolation: np.interp(x, xp, fp, left, right), differentiable in x, fp, left and right.
Its entry sits below the helpers its templates call (NumPy and Numba forms side by side, as
rules/helpers.py says); the NumPy helpers read leading axes of their cotangent or tangent (and
of fp in interp_slope) as a batch.

Where the derivative is not unique the rule picks one: at a knot, the slope of the segment to
its right (at the last knot, of the one to its left); outside the knots, 0. The knots'
positions `xp` and `period` are refused.
"""

import numpy as np

from .common import _absent, _array
from .helpers import helper, numba_jitable, numba_of
from .registry import defvjp, explicit, linear

# The helpers share one description of where each x falls (_interp_at): its segment (lo, hi), the weight of fp[hi]
# and the segment's width, and whether it lies left or right of the knots.


@numba_jitable
@helper  # the NumPy helpers call it too
def _interp_at(v, xp):
    """Where `v` falls among the knots xp: (lo, hi, weight of fp[hi], width, side), side -1
    left of them, 1 right of them, 0 inside."""
    n = xp.shape[0]
    if v < xp[0]:
        return 0, 0, 0.0, 1.0, -1
    if v > xp[n - 1]:
        return n - 1, n - 1, 0.0, 1.0, 1
    if n == 1:
        return 0, 0, 0.0, 1.0, 0
    lo = np.searchsorted(xp, v, side="right") - 1
    lo = min(max(lo, 0), n - 2)
    width = xp[lo + 1] - xp[lo]
    if width <= 0.0:
        return lo, lo + 1, 0.0, 1.0, 0
    return lo, lo + 1, (v - xp[lo]) / width, width, 0


@helper
def _interp_weights(x, xp, left=None, right=None, slope=False):
    """The matrix W (x.size, len(xp)) with np.interp(x, xp, fp) = W @ fp where `left` and
    `right` are None (where given they take over outside the knots: rows of zeros); with
    `slope`, the matrix of d/dx instead."""
    xp = np.asarray(xp, dtype=np.float64)
    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    weights = np.zeros((flat.size, xp.size))
    for i, v in enumerate(flat):
        lo, hi, w, width, side = _interp_at(v, xp)
        if side == 0:
            weights[i, lo] += -1.0 / width if slope else 1.0 - w
            weights[i, hi] += 1.0 / width if slope else w
        elif not slope and (left if side < 0 else right) is None:
            weights[i, lo] = 1.0
    return weights


@helper(batch_safe=True, jvp=explicit(fp="interp_slope(x, xp, t)"))
def interp_slope(x, xp, fp):
    """d np.interp(x, xp, fp) / dx: the slope of the segment x falls in, 0 outside the knots
    (`fp` may have leading batch axes)."""
    weights = _interp_weights(x, xp, slope=True)
    return np.reshape(np.asarray(fp) @ weights.T, np.shape(fp)[:-1] + np.shape(x))


@numba_of(interp_slope)
def _interp_slope(x, xp, fp):
    if not (_array(x) and _array(fp) and fp.ndim == 1):
        return None

    def impl(x, xp, fp):
        flat = np.ascontiguousarray(x).reshape(-1)
        out = np.zeros(flat.size)
        for i in range(flat.size):
            lo, hi, w, width, side = _interp_at(flat[i], xp)
            if side == 0:
                out[i] = (fp[hi] - fp[lo]) / width
        return out.reshape(x.shape)

    return impl


@helper(
    batch_safe=True,
    jvp=explicit(
        g="interp_fp_vjp(t, x, xp, fp, left, right)",
        x="interp_fp_vjp(g * t, x, xp, fp, left, right, True)",
    ),
)
def interp_fp_vjp(g, x, xp, fp, left=None, right=None, slope=False):
    """The cotangent of np.interp(x, xp, fp, left, right) for fp (with `slope`, that of
    interp_slope(x, xp, fp) * g instead, which is the same linear map's derivative in x)."""
    lead = np.shape(g)[: np.ndim(g) - np.ndim(x)]
    rows = np.reshape(g, lead + (-1,))
    return rows @ _interp_weights(x, xp, left, right, slope)


@numba_of(interp_fp_vjp)
def _interp_fp_vjp(g, x, xp, fp, left=None, right=None, slope=False):
    if not (_array(x) and _array(g) and g.ndim == x.ndim and _absent(left) and _absent(right)):
        return None

    def impl(g, x, xp, fp, left=None, right=None, slope=False):
        flat = np.ascontiguousarray(x).reshape(-1)
        gf = np.ascontiguousarray(g).reshape(-1)
        out = np.zeros(fp.shape[0])
        for i in range(flat.size):
            lo, hi, w, width, side = _interp_at(flat[i], xp)
            if side == 0:
                out[lo] += gf[i] * (-1.0 / width if slope else 1.0 - w)
                out[hi] += gf[i] * (1.0 / width if slope else w)
            elif not slope:
                out[lo] += gf[i]
        return out

    return impl


@helper(batch_safe=True)
def interp_fp_jvp(t, x, xp, left=None, right=None):
    """The tangent of np.interp(x, xp, fp, left, right) along `t` for fp."""
    lead = np.shape(t)[:-1]
    out = np.asarray(t) @ _interp_weights(x, xp, left, right).T
    return np.reshape(out, lead + np.shape(x))


@numba_of(interp_fp_jvp)
def _interp_fp_jvp(t, x, xp, left=None, right=None):
    if not (_array(x) and _array(t) and t.ndim == 1 and _absent(left) and _absent(right)):
        return None

    def impl(t, x, xp, left=None, right=None):
        flat = np.ascontiguousarray(x).reshape(-1)
        out = np.zeros(flat.size)
        for i in range(flat.size):
            lo, hi, w, width, side = _interp_at(flat[i], xp)
            out[i] = t[lo] * (1.0 - w) + t[hi] * w if side == 0 else t[lo]
        return out.reshape(x.shape)

    return impl


@helper
def _beyond(x, xp, side):
    """Where x lies left (side < 0) or right (side > 0) of the knots, as 0.0 and 1.0."""
    xp = np.asarray(xp)
    return np.asarray(x < xp[0] if side < 0 else x > xp[-1], dtype=np.float64)


@helper(batch_safe=True, jvp=linear("g"))
def interp_edge_vjp(g, x, xp, side):
    """The cotangent of np.interp's `left` (side -1) or `right` (side 1): the sum of `g` over
    the x outside the knots on that side."""
    lead = np.ndim(g) - np.ndim(x)
    return np.sum(g * _beyond(x, xp, side), axis=tuple(range(lead, np.ndim(g))))


@helper(batch_safe=True, jvp=linear("t"))
def interp_edge_jvp(t, x, xp, side):
    """The tangent of np.interp along `t` for `left` (side -1) or `right` (side 1)."""
    t = np.reshape(t, np.shape(t) + (1,) * np.ndim(x))
    return t * _beyond(x, xp, side)


_EDGES = "left=left, right=right"
defvjp(
    np.interp,
    "x, xp, fp, left=None, right=None, period=None",
    literal={"period": (None,)},  # (periodic interpolation: not covered)
    x="g * interp_slope(x, xp, fp)",
    fp=f"interp_fp_vjp(g, x, xp, fp, {_EDGES})",
    left="interp_edge_vjp(g, x, xp, -1)",
    right="interp_edge_vjp(g, x, xp, 1)",
    jvp=explicit(
        x="t * interp_slope(x, xp, fp)",
        fp=f"interp_fp_jvp(t, x, xp, {_EDGES})",
        left="interp_edge_jvp(t, x, xp, -1)",
        right="interp_edge_jvp(t, x, xp, 1)",
    ),
)

"""Statistics that skip or weigh elements: np.nansum, np.nanmean, np.nanmax, np.nanmin, np.ptp
and np.average (its weights differentiated too). Each op's entry sits below the helpers its
templates call (NumPy, batched and Numba forms side by side, as rules/helpers.py says); the
order statistics and gathers are in rules/selection.py.

Where a derivative is not unique, the rule picks one documented subgradient, never NaN or inf:
NaN entries of the nan-reductions get a zero cotangent and an all-NaN slice gives zeros;
np.nanmax, np.nanmin and np.ptp share the cotangent evenly among tied extrema, as np.max's rule
does (so np.ptp of a slice of equal values has a zero derivative).
"""

import numpy as np

from .common import _absent, _array, _axes, batched_expand_reduced, expand_reduced
from .helpers import batched_of, helper, numba_of
from .registry import defvjp, explicit, linear, reduction

# ----------------------------------------------------------------------------- skipping NaNs


@helper(jvp=linear("g"))
def nan_vjp(g, x, axis=None, keepdims=False, mean=False):
    """np.nansum (np.nanmean with `mean`): the cotangent of the reduction spread over the
    elements that are not NaN (divided by their count for the mean); NaN entries get zero, and so
    does every entry of an all-NaN slice."""
    counted = ~np.isnan(x)
    if mean:
        count = np.sum(counted, axis=_axes(axis, np.ndim(x)), keepdims=True)
        return expand_reduced(g, x, axis, keepdims) * (counted / np.maximum(count, 1))
    return expand_reduced(g, x, axis, keepdims) * counted


@batched_of(nan_vjp)
def batched_nan_vjp(g, x, axis=None, keepdims=False, mean=False):
    weights = nan_vjp(np.ones(np.shape(g)[1:]), x, axis, keepdims, mean)
    return batched_expand_reduced(g, x, axis, keepdims) * weights


@numba_of(nan_vjp)
def _nan_vjp(g, x, axis=None, keepdims=False, mean=False):
    if not (_array(x) and _absent(axis)):
        return None

    def impl(g, x, axis=None, keepdims=False, mean=False):
        counted = ~np.isnan(x)
        if mean:
            return g * counted / max(np.sum(counted), 1)
        return g * counted

    return impl


@helper(jvp=linear("g"))
def nan_extremum_vjp(g, x, ans, axis=None, keepdims=False):
    """np.nanmax/np.nanmin: the cotangent shared evenly among the elements that attain the
    extremum (NaN never does; an all-NaN slice gives zeros)."""
    hit = np.asarray(x) == expand_reduced(ans, x, axis, keepdims)
    count = np.sum(hit, axis=_axes(axis, np.ndim(x)), keepdims=True)
    return expand_reduced(g, x, axis, keepdims) * (hit / np.maximum(count, 1))


@batched_of(nan_extremum_vjp)
def batched_nan_extremum_vjp(g, x, ans, axis=None, keepdims=False):
    weights = nan_extremum_vjp(np.ones(np.shape(ans)), x, ans, axis, keepdims)
    return batched_expand_reduced(g, x, axis, keepdims) * weights


@numba_of(nan_extremum_vjp)
def _nan_extremum_vjp(g, x, ans, axis=None, keepdims=False):
    if not (_array(x) and _absent(axis)):
        return None

    def impl(g, x, ans, axis=None, keepdims=False):
        hit = x == ans  # ties share the cotangent evenly
        return g * hit / max(np.sum(hit), 1)

    return impl


@helper
def nan_reduction_jvp(t, a, ans, axis=None, keepdims=False, kind="sum"):
    """The tangent of np.nansum, np.nanmean or np.nanmax/np.nanmin (`kind`: "sum", "mean",
    "extremum") along `t`: the cotangent weights times t, with t taken as 0 where `a` is NaN
    (the op that made the NaN may have given it a NaN tangent, which the reduction skips as it
    skips the NaN). A batch may lead t."""
    ones = np.ones(np.shape(ans))
    if kind == "extremum":
        weights = nan_extremum_vjp(ones, a, ans, axis, keepdims)
    else:
        weights = nan_vjp(ones, a, axis, keepdims, kind == "mean")
    lead = np.ndim(t) - np.ndim(a)
    axes = tuple(lead + d for d in _axes(axis, np.ndim(a)))
    return np.sum(np.where(np.isnan(a), 0.0, t) * weights, axis=axes, keepdims=keepdims)


@numba_of(nan_reduction_jvp)
def _nan_reduction_jvp(t, a, ans, axis=None, keepdims=False, kind="sum"):
    if not (_array(t) and _array(a) and _absent(axis) and t.ndim == a.ndim):
        return None

    def impl(t, a, ans, axis=None, keepdims=False, kind="sum"):
        skipped = np.isnan(a)
        if kind == "extremum":
            hit = a == ans
            return np.sum(np.where(hit, t, 0.0)) / max(np.sum(hit), 1)
        total = np.sum(np.where(skipped, 0.0, t))
        return total / max(np.sum(~skipped), 1) if kind == "mean" else total

    return impl


_NAN = "a, axis=None, dtype=None, out=None, keepdims=False"
_NAN_JVP = "nan_reduction_jvp(t, a, ans, axis=axis, keepdims=keepdims, kind={!r})"
defvjp(
    np.nansum,
    _NAN,
    a="nan_vjp(g, a, axis=axis, keepdims=keepdims)",
    jvp=explicit(a=_NAN_JVP.format("sum")),
)
defvjp(
    np.nanmean,
    _NAN,
    a="nan_vjp(g, a, axis=axis, keepdims=keepdims, mean=True)",
    jvp=explicit(a=_NAN_JVP.format("mean")),
)
for _f in (np.nanmax, np.nanmin):
    defvjp(
        _f,
        "a, axis=None, out=None, keepdims=False",
        a="nan_extremum_vjp(g, a, ans, axis=axis, keepdims=keepdims)",
        jvp=explicit(a=_NAN_JVP.format("extremum")),
    )

# ----------------------------------------------------------------------------- ptp


@helper(jvp=linear("g"))
def ptp_vjp(g, x, axis=None, keepdims=False):
    """np.ptp = max - min: np.max's rule minus np.min's (ties shared evenly in each; where every
    value of a slice is equal, the two cancel to zero)."""
    axes = _axes(axis, np.ndim(x))
    weights = 0.0
    for sign, extremum in ((1.0, np.max), (-1.0, np.min)):
        hit = np.asarray(x) == extremum(x, axis=axes, keepdims=True)
        weights = weights + sign * hit / np.sum(hit, axis=axes, keepdims=True)
    return expand_reduced(g, x, axis, keepdims) * weights


@batched_of(ptp_vjp)
def batched_ptp_vjp(g, x, axis=None, keepdims=False):
    weights = ptp_vjp(np.ones(np.shape(g)[1:]), x, axis, keepdims)
    return batched_expand_reduced(g, x, axis, keepdims) * weights


@numba_of(ptp_vjp)
def _ptp_vjp(g, x, axis=None, keepdims=False):
    if not (_array(x) and _absent(axis)):
        return None

    def impl(g, x, axis=None, keepdims=False):
        high = x == np.max(x)
        low = x == np.min(x)
        return g * (high / np.sum(high) - low / np.sum(low))

    return impl


defvjp(
    np.ptp,
    "a, axis=None, out=None, keepdims=False",
    a="ptp_vjp(g, a, axis=axis, keepdims=keepdims)",
    jvp=reduction("a"),
)

# ----------------------------------------------------------------------------- average
# avg = sum(w * a) / sum(w) over the axes, `w` in NumPy's layout (a's shape, or the shape of a
# along `axis`, broadcast). Its helpers take values with leading batch axes in front of the
# shapes they expect (`g`, `t`), so they serve batched sweeps as they are. The cotangent
# helpers have tangent rules of their own in every argument they depend on: Hessians in `a`
# (zero: the average is linear in it) and in the weights differentiate them again.


@helper
def _spread(g, a, axis=None, keepdims=False):
    """`g` (the shape of a reduction over `axis`, after leading batch axes) broadcast over the
    reduced axes: (that, the number of batch axes)."""
    ndim = np.ndim(a)
    axes = _axes(axis, ndim)
    lead = np.ndim(g) - (ndim if keepdims else ndim - len(axes))
    if not keepdims:
        g = np.expand_dims(g, tuple(lead + d for d in axes))
    return np.broadcast_to(g, np.shape(g)[:lead] + np.shape(a)), lead


@helper
def _weights_layout(w, a, axis, lead=0):
    """The weights `w` (after `lead` batch axes) laid out to broadcast against `a`, as
    np.average does (a weight per position along `axis`, or one per element)."""
    w = np.asarray(w)
    inner = np.shape(w)[lead:]
    if inner == np.shape(a):
        return w
    axes = tuple(d % np.ndim(a) for d in (axis if isinstance(axis, tuple) else (axis,)))
    order = tuple(int(d) + lead for d in np.argsort(axes))
    w = np.transpose(w, tuple(range(lead)) + order)
    shape = tuple(s if d in axes else 1 for d, s in enumerate(np.shape(a)))
    return np.reshape(w, np.shape(w)[:lead] + shape)


@helper
def _weights_back(c, w, a, axis, lead=0):
    """`c` (shaped like `a` after `lead` batch axes) summed back to the weights' layout: the
    adjoint of _weights_layout followed by broadcasting."""
    if np.shape(w) == np.shape(a):
        return c
    axes = tuple(d % np.ndim(a) for d in (axis if isinstance(axis, tuple) else (axis,)))
    others = tuple(lead + d for d in range(np.ndim(a)) if d not in axes)
    c = np.sum(c, axis=others)  # lead + the weights' axes in increasing order
    back = tuple(int(d) + lead for d in np.argsort(np.argsort(axes)))
    return np.transpose(c, tuple(range(lead)) + back)


@helper
def _weight_sum(w, a, axis):
    """sum(w) over `axis`, in NumPy's layout, with the reduced axes kept (length 1)."""
    if w is None:
        return np.float64(np.size(a) // max(np.size(np.sum(a, axis=axis)), 1))
    return np.sum(_weights_layout(w, a, axis), axis=axis, keepdims=True)


@helper
def _kept(v, a, axis=None, keepdims=False):
    """A reduction's value `v` with the reduced axes of `a` kept (length 1)."""
    if keepdims or axis is None:
        return np.reshape(v, np.shape(v) if keepdims else (1,) * np.ndim(a))
    return np.expand_dims(v, _axes(axis, np.ndim(a)))


_AVG = "axis=axis, keepdims=keepdims"


@helper(
    batch_safe=True,
    jvp=explicit(
        g=f"average_vjp(t, a, weights, {_AVG})",
        weights=f"average_vjp_dw(t, g, a, weights, {_AVG})",
    ),
)
def average_vjp(g, a, weights=None, axis=None, keepdims=False):
    """The cotangent of np.average(a, axis, weights) for `a`: g * w / sum(w)."""
    spread, _ = _spread(g, a, axis, keepdims)
    if weights is None:
        return spread / _weight_sum(None, a, axis)
    return spread * (_weights_layout(weights, a, axis) / _weight_sum(weights, a, axis))


@helper(batch_safe=True)
def average_vjp_dw(t, g, a, weights, axis=None, keepdims=False):
    """The tangent of average_vjp(g, a, weights) along `t` for the weights."""
    spread, _ = _spread(g, a, axis, keepdims)
    lead = np.ndim(t) - np.ndim(weights)
    tw = _weights_layout(t, a, axis, lead)
    moved = tuple(lead + d for d in _axes(axis, np.ndim(a)))
    total = np.sum(tw, axis=moved, keepdims=True)
    scale = _weight_sum(weights, a, axis)
    return spread * (tw / scale - _weights_layout(weights, a, axis) * total / scale**2)


@helper(
    batch_safe=True,
    jvp=explicit(
        g=f"average_weights_vjp(t, a, weights, ans, {_AVG})",
        a=f"average_weights_vjp_da(t, g, a, weights, {_AVG})",
        ans=f"average_weights_vjp_dans(t, g, a, weights, {_AVG})",
        weights=f"average_weights_vjp_dw(t, g, a, weights, ans, {_AVG})",
    ),
)
def average_weights_vjp(g, a, weights, ans, axis=None, keepdims=False):
    """The cotangent of ans = np.average(a, axis, weights) for the weights:
    g * (a - ans) / sum(w), summed back to the weights' shape."""
    spread, lead = _spread(g, a, axis, keepdims)
    centered = np.subtract(a, _kept(ans, a, axis, keepdims))
    c = spread * centered / _weight_sum(weights, a, axis)
    return _weights_back(c, weights, a, axis, lead)


@helper(batch_safe=True)
def average_weights_vjp_da(t, g, a, weights, axis=None, keepdims=False):
    """The tangent of average_weights_vjp(g, a, weights, ans) along `t` for `a` (ans held)."""
    spread, _ = _spread(g, a, axis, keepdims)
    lead = np.ndim(t) - np.ndim(a)
    return _weights_back(spread * t / _weight_sum(weights, a, axis), weights, a, axis, lead)


@helper(batch_safe=True)
def average_weights_vjp_dans(t, g, a, weights, axis=None, keepdims=False):
    """The tangent of average_weights_vjp(g, a, weights, ans) along `t` for ans."""
    spread, _ = _spread(g, a, axis, keepdims)
    lead = np.ndim(t) - (np.ndim(a) if keepdims else np.ndim(a) - len(_axes(axis, np.ndim(a))))
    tk = _spread(t, a, axis, keepdims)[0]
    c = -spread * tk / _weight_sum(weights, a, axis)
    return _weights_back(c, weights, a, axis, lead)


@helper(batch_safe=True)
def average_weights_vjp_dw(t, g, a, weights, ans, axis=None, keepdims=False):
    """The tangent of average_weights_vjp(g, a, weights, ans) along `t` for the weights."""
    spread, _ = _spread(g, a, axis, keepdims)
    lead = np.ndim(t) - np.ndim(weights)
    moved = tuple(lead + d for d in _axes(axis, np.ndim(a)))
    total = np.sum(_weights_layout(t, a, axis, lead), axis=moved, keepdims=True)
    centered = np.subtract(a, _kept(ans, a, axis, keepdims))
    c = -spread * centered * total / _weight_sum(weights, a, axis) ** 2
    return _weights_back(c, weights, a, axis, lead)


@helper(batch_safe=True)
def average_jvp(t, a, weights=None, axis=None, keepdims=False):
    """The tangent of np.average(a, axis, weights) along `t` for `a`."""
    lead = np.ndim(t) - np.ndim(a)
    moved = tuple(lead + d for d in _axes(axis, np.ndim(a)))
    if weights is None:
        return np.mean(t, axis=moved, keepdims=keepdims)
    w = _weights_layout(weights, a, axis) / _weight_sum(weights, a, axis)
    return np.sum(t * w, axis=moved, keepdims=keepdims)


@helper(batch_safe=True)
def average_weights_jvp(t, a, weights, ans, axis=None, keepdims=False):
    """The tangent of ans = np.average(a, axis, weights) along `t` for the weights."""
    lead = np.ndim(t) - np.ndim(weights)
    moved = tuple(lead + d for d in _axes(axis, np.ndim(a)))
    centered = np.subtract(a, _kept(ans, a, axis, keepdims))
    total = _weights_layout(t, a, axis, lead) * centered / _weight_sum(weights, a, axis)
    return np.sum(total, axis=moved, keepdims=keepdims)


@numba_of(average_vjp)
def _average_vjp(g, a, weights=None, axis=None, keepdims=False):
    if not (_array(a) and _absent(axis) and not _array(g)):
        return None
    if _absent(weights):
        return lambda g, a, weights=None, axis=None, keepdims=False: np.full(a.shape, g / a.size)
    return lambda g, a, weights=None, axis=None, keepdims=False: g * weights / np.sum(weights)


@numba_of(average_weights_vjp)
def _average_weights_vjp(g, a, weights, ans, axis=None, keepdims=False):
    if not (_array(a) and _array(weights) and _absent(axis) and not _array(g)):
        return None
    return lambda g, a, weights, ans, axis=None, keepdims=False: (g * (a - ans) / np.sum(weights))


@numba_of(average_jvp)
def _average_jvp(t, a, weights=None, axis=None, keepdims=False):
    if not (_array(a) and _array(t) and _absent(axis) and t.ndim == a.ndim):
        return None
    if _absent(weights):
        return lambda t, a, weights=None, axis=None, keepdims=False: np.mean(t)
    return lambda t, a, weights=None, axis=None, keepdims=False: (
        np.sum(t * weights) / np.sum(weights)
    )


@numba_of(average_weights_jvp)
def _average_weights_jvp(t, a, weights, ans, axis=None, keepdims=False):
    if not (_array(a) and _array(t) and _absent(axis) and t.ndim == a.ndim):
        return None
    return lambda t, a, weights, ans, axis=None, keepdims=False: (
        np.sum(t * (a - ans)) / np.sum(weights)
    )


defvjp(
    np.average,
    "a, axis=None, weights=None, returned=False, *, keepdims=False",
    literal={"returned": (False,)},  # (the sum of the weights too: not covered)
    a=f"average_vjp(g, a, weights, {_AVG})",
    weights=f"average_weights_vjp(g, a, weights, ans, {_AVG})",
    jvp=explicit(
        a=f"average_jvp(t, a, weights, {_AVG})",
        weights=f"average_weights_jvp(t, a, weights, ans, {_AVG})",
    ),
)

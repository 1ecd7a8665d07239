"""Reductions over `axis` (None, an int or a tuple) with `keepdims`: sum, mean, prod, max/min,
var and std; each op's entry below the helpers its templates call (NumPy, batched and Numba
forms side by side, as rules/helpers.py says). The batched adjoints of the nonlinear reductions
are an elementwise weight times the cotangent broadcast over the reduced axes: the weight is the
unbatched adjoint of a cotangent of ones.
"""

import typing

import numpy as np

from .common import (
    _absent,
    _array,
    _axes,
    _integer,
    _row_axes,
    batched_expand_reduced,
    expand_reduced,
)
from .folds import _SUM, _fold, _fold_mean, _front, _kept
from .helpers import batched_helper, batched_of, helper, numba_of
from .registry import defvjp, explicit, linear, multilinear, nondiff, reduction

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import literal_unroll, types
    from numba.np.numpy_support import as_dtype

_SIG = "a, axis=None, dtype=None, out=None, keepdims=False"
_STD_SIG = "a, axis=None, dtype=None, out=None, ddof=0, keepdims=False"

# ----------------------------------------------------------------------------- sum and mean


@helper
def _count(x, axis):
    shape = np.shape(x)
    return int(np.prod([shape[a] for a in _axes(axis, len(shape))]))


@numba_of(_count)
def _count_impl(x, axis):
    if not _array(x):
        return lambda x, axis: 1
    if _absent(axis):
        return lambda x, axis: x.size
    if _integer(axis):
        return lambda x, axis: x.shape[axis]
    if isinstance(axis, types.BaseTuple):

        def product(x, axis):
            n = 1
            for a in literal_unroll(axis):
                n *= x.shape[a]
            return n

        return product
    return None


@batched_helper
def batched_sum(a, axis=None, dtype=None, out=None, keepdims=False):
    """np.sum of every row; `axis=None` sums each row to a number."""
    return np.sum(a, axis=_row_axes(axis, np.ndim(a) - 1), dtype=dtype, keepdims=keepdims)


defvjp(
    np.sum,
    _SIG,
    a="expand_reduced(g, a, axis=axis, keepdims=keepdims)",
    jvp=linear("a", batched=batched_sum),
)


@helper(jvp=linear("g"), shape_only=("x",), shaped_like="x")
def mean_vjp(g, x, axis=None, keepdims=False):
    """`g` over the count, broadcast back: the division of each number before the broadcast
    (the same numbers, and a view rather than an array swept to write them)."""
    count = _count(x, axis)
    if count:
        return expand_reduced(g / count, x, axis, keepdims)
    return expand_reduced(g, x, axis, keepdims) / count


@batched_of(mean_vjp)
def batched_mean_vjp(g, x, axis=None, keepdims=False):
    return batched_expand_reduced(g, x, axis, keepdims) / _count(x, axis)


@numba_of(mean_vjp)
def _mean_vjp(g, x, axis=None, keepdims=False):
    def impl(g, x, axis=None, keepdims=False):
        return expand_reduced(g, x, axis, keepdims) / _count(x, axis)

    return impl


@batched_helper
def batched_mean(a, axis=None, dtype=None, out=None, keepdims=False):
    """np.mean of every row."""
    return np.mean(a, axis=_row_axes(axis, np.ndim(a) - 1), dtype=dtype, keepdims=keepdims)


defvjp(
    np.mean,
    _SIG,
    a="mean_vjp(g, a, axis=axis, keepdims=keepdims)",
    jvp=linear("a", batched=batched_mean),
)


@helper(shape_only=("x",))
def per_count(s, x, axis=None):
    """`s` over the count of `x`'s elements `axis` reduces, in `s`'s dtype: what jitted fusion
    writes a mean, and a mean's cotangent before its broadcast, as (pipeline/fusion/means.py), so
    that the sum and the broadcast fold into loops. Nan over no elements, as NumPy's mean."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return s / np.asarray(_count(x, axis), np.result_type(s, 1.0))


@numba_of(per_count)
def _per_count(s, x, axis=None):
    if _array(s) and isinstance(s.dtype, (types.Float, types.Complex)):

        def in_place(s, x, axis=None):
            out = s.copy()
            out /= _count(x, axis)  # in place: float32 stays float32, as in np.mean
            return out

        return in_place
    if s in (types.float32, types.complex64):
        cast = as_dtype(s).type
        return lambda s, x, axis=None: cast(s / _count(x, axis))
    return lambda s, x, axis=None: s / _count(x, axis)


# ----------------------------------------------------------------------------- prod


@helper(
    jvp=explicit(  # ans is read for nothing but its shape
        g="prod_vjp(t, x, ans, axis=axis, keepdims=keepdims)",
        x="prod_vjp_jvp(t, g, x, ans, axis=axis, keepdims=keepdims)",
        batched={"g": "batched_prod_vjp(t, x, ans, axis=axis, keepdims=keepdims)"},
    ),
    shaped_like="x",
)
def prod_vjp(g, x, ans, axis=None, keepdims=False):
    """Product of all other elements, exact even where `x` holds zeros."""
    x = np.asarray(x)
    axes = _axes(axis, x.ndim)
    rest = tuple(a for a in range(x.ndim) if a not in axes)
    moved = np.transpose(x, rest + axes)
    flat = moved.reshape(moved.shape[: len(rest)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), dtype=flat.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    others = np.transpose((left * right).reshape(moved.shape), np.argsort(rest + axes))
    return expand_reduced(g, x, axis, keepdims) * others


@batched_of(prod_vjp)
def batched_prod_vjp(g, x, ans, axis=None, keepdims=False):
    weights = prod_vjp(np.ones(np.shape(ans)), x, ans, axis, keepdims)
    return batched_expand_reduced(g, x, axis, keepdims) * weights


@numba_of(prod_vjp)
def _prod_vjp(g, x, ans, axis=None, keepdims=False):
    if not _array(x):
        return lambda g, x, ans, axis=None, keepdims=False: g
    if _integer(axis) and x.ndim > 1:

        def one_axis(g, x, ans, axis=None, keepdims=False):
            # the products before and after each element along the axis (moved first)
            t = _front(x, axis)
            others = np.empty(t.shape, dtype=x.dtype)
            acc = np.ones(t.shape[1:], dtype=x.dtype)
            for k in range(t.shape[0]):
                others[k] = acc
                acc = acc * t[k]
            acc = np.ones(t.shape[1:], dtype=x.dtype)
            for k in range(t.shape[0] - 1, -1, -1):
                others[k] *= acc
                acc = acc * t[k]
            moved = np.moveaxis(others, 0, axis if axis >= 0 else axis + x.ndim)
            return expand_reduced(g, x, axis, keepdims) * moved

        return one_axis
    if not _absent(axis) and not _integer(axis):
        return None

    def impl(g, x, ans, axis=None, keepdims=False):
        # the product of all other elements, exact where x holds zeros
        flat = np.ascontiguousarray(x).reshape(-1)
        others = np.empty(flat.size)
        acc = 1.0
        for i in range(flat.size):
            others[i] = acc
            acc *= flat[i]
        acc = 1.0
        for i in range(flat.size - 1, -1, -1):
            others[i] *= acc
            acc *= flat[i]
        return g * others.reshape(x.shape)

    return impl


@helper
def prod_pairs(x, t, axis=None):
    """For each element i of x, sum over j != i of t_j times the product of x over the group
    without i and j: the tangent of prod_vjp's weights, exact where x holds zeros. `t` may have
    leading axes more than x (a batch)."""
    x = np.asarray(x, dtype=np.result_type(x, np.float32))
    axes = _axes(axis, x.ndim)
    rest = tuple(a for a in range(x.ndim) if a not in axes)
    perm = rest + axes
    moved = np.transpose(x, perm)
    n = int(np.prod([x.shape[a] for a in axes]))
    flat = moved.reshape(moved.shape[: len(rest)] + (n,))
    lead = np.ndim(t) - x.ndim
    tm = np.transpose(t, tuple(range(lead)) + tuple(a + lead for a in perm))
    tflat = tm.reshape(tm.shape[: lead + len(rest)] + (n,))
    # row i of m: x with x_i set to 1, whose "others" products leave out i and j
    eye = np.eye(n, dtype=bool)
    m = np.where(eye, 1.0, flat[..., None, :])
    ones = np.ones(m.shape[:-1] + (1,), dtype=m.dtype)
    left = np.cumprod(np.concatenate([ones, m[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, m[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    pairs = np.where(eye, 0.0, left * right)
    out = np.einsum("...ij,...j->...i", pairs, tflat)
    out = out.reshape(tm.shape)
    back = np.argsort(perm)
    return np.transpose(out, tuple(range(lead)) + tuple(int(a) + lead for a in back))


@helper
def prod_vjp_jvp(t, g, x, ans, axis=None, keepdims=False):
    """The tangent of prod_vjp(g, x, ans, ...) along `t` for x."""
    return expand_reduced(g, x, axis, keepdims) * prod_pairs(x, t, axis)


defvjp(
    np.prod,
    _SIG,
    a="prod_vjp(g, a, ans, axis=axis, keepdims=keepdims)",
    jvp=reduction("a"),
)

# ----------------------------------------------------------------------------- max and min


@helper(jvp=linear("g"), shaped_like="x")
def extremum_vjp(g, x, ans, axis=None, keepdims=False):
    """max/min: the cotangent is shared evenly among the elements that attain the extremum."""
    hit = np.asarray(x) == expand_reduced(ans, x, axis, keepdims)
    count = np.sum(hit, axis=_axes(axis, np.ndim(x)), keepdims=True)
    return expand_reduced(g, x, axis, keepdims) * hit / count


@batched_of(extremum_vjp)
def batched_extremum_vjp(g, x, ans, axis=None, keepdims=False):
    weights = extremum_vjp(np.ones(np.shape(ans)), x, ans, axis, keepdims)
    return batched_expand_reduced(g, x, axis, keepdims) * weights


@numba_of(extremum_vjp)
def _extremum_vjp(g, x, ans, axis=None, keepdims=False):
    if not _array(x):
        return lambda g, x, ans, axis=None, keepdims=False: g
    if _absent(axis) or (x.ndim == 1 and _integer(axis)):

        def impl(g, x, ans, axis=None, keepdims=False):
            hit = x == ans  # ties share the cotangent evenly
            return g * hit / np.sum(hit)

        return impl
    if not _integer(axis):
        return None

    def one_axis(g, x, ans, axis=None, keepdims=False):
        hit = x == expand_reduced(ans, x, axis, keepdims)
        count = _kept(_fold(hit.astype(np.int64), axis, _SUM), x, axis)
        return expand_reduced(g, x, axis, keepdims) * hit / count

    return one_axis


for _f in (np.max, np.min, np.amax, np.amin):
    defvjp(
        _f,
        "a, axis=None, out=None, keepdims=False",
        a="extremum_vjp(g, a, ans, axis=axis, keepdims=keepdims)",
        jvp=reduction("a"),
    )

# ----------------------------------------------------------------------------- var and std


@helper(jvp=multilinear("g", "x"), shaped_like="x")  # the centred x is linear in x
def var_vjp(g, x, axis=None, ddof=0, keepdims=False):
    centered = x - np.mean(x, axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):  # no degrees of freedom left: inf, as np.var itself
        scale = np.float64(2.0) / max(_count(x, axis) - ddof, 0)
    return expand_reduced(g, x, axis, keepdims) * scale * centered


@batched_of(var_vjp)
def batched_var_vjp(g, x, axis=None, ddof=0, keepdims=False):
    ones = np.ones(np.shape(g)[1:])
    return batched_expand_reduced(g, x, axis, keepdims) * var_vjp(ones, x, axis, ddof, keepdims)


@numba_of(var_vjp)
def _var_vjp(g, x, axis=None, ddof=0, keepdims=False):
    if not _array(x):
        return lambda g, x, axis=None, ddof=0, keepdims=False: 0.0 * g
    if _integer(axis) and x.ndim > 1:

        def one_axis(g, x, axis=None, ddof=0, keepdims=False):
            centered = x - _kept(_fold_mean(x, axis), x, axis)
            scale = 2.0 / max(x.shape[axis if axis >= 0 else axis + x.ndim] - ddof, 0)
            return expand_reduced(g, x, axis, keepdims) * scale * centered

        return one_axis
    if not (_absent(axis) or _integer(axis)):  # (of a vector, one axis is every element)
        return None
    if _array(g) and g.ndim > 0:  # kept dimensions

        def kept(g, x, axis=None, ddof=0, keepdims=False):
            gx = expand_reduced(g, x, axis, keepdims)
            return gx * (2.0 / max(x.size - ddof, 0)) * (x - np.mean(x))

        return kept

    def impl(g, x, axis=None, ddof=0, keepdims=False):
        return g * (2.0 / max(x.size - ddof, 0)) * (x - np.mean(x))

    return impl


defvjp(
    np.var,
    _STD_SIG,
    a="var_vjp(g, a, axis=axis, ddof=ddof, keepdims=keepdims)",
    jvp=reduction("a"),
)

_STD = "axis=axis, ddof=ddof, keepdims=keepdims"


@helper(
    jvp=explicit(
        g=f"std_vjp(t, x, ans, {_STD})",
        x=f"std_vjp_jvp_x(t, g, x, ans, {_STD})",
        ans=f"std_vjp_jvp_ans(t, g, x, ans, {_STD})",
        batched={
            "g": f"batched_std_vjp(t, x, ans, {_STD})",
            "x": f"batched_std_vjp_jvp_x(t, g, x, ans, {_STD})",
            "ans": f"batched_std_vjp_jvp_ans(t, g, x, ans, {_STD})",
        },
    ),
    shaped_like="x",
)
def std_vjp(g, x, ans, axis=None, ddof=0, keepdims=False):
    centered = x - np.mean(x, axis=axis, keepdims=True)
    scale = expand_reduced(ans, x, axis, keepdims) * (_count(x, axis) - ddof)
    return expand_reduced(g, x, axis, keepdims) * centered / _nonzero(scale)


@helper
def _nonzero(scale):
    """`scale` with inf for 0: where std is 0 every centered value is 0, so the derivative is 0
    (np.std of one element is constant; at equal elements, 0 as np.abs's is at 0), not 0/0."""
    return np.where(scale == 0, np.inf, scale)


@batched_of(std_vjp)
def batched_std_vjp(g, x, ans, axis=None, ddof=0, keepdims=False):
    weights = std_vjp(np.ones(np.shape(ans)), x, ans, axis, ddof, keepdims)
    return batched_expand_reduced(g, x, axis, keepdims) * weights


@numba_of(std_vjp)
def _std_vjp(g, x, ans, axis=None, ddof=0, keepdims=False):
    if not _array(x):  # a number's std is constant (0, or nan at ddof 1)
        return lambda g, x, ans, axis=None, ddof=0, keepdims=False: 0.0 * g
    if _integer(axis) and x.ndim > 1:

        def one_axis(g, x, ans, axis=None, ddof=0, keepdims=False):
            centered = x - _kept(_fold_mean(x, axis), x, axis)
            n = x.shape[axis if axis >= 0 else axis + x.ndim]
            scale = expand_reduced(ans, x, axis, keepdims) * (n - ddof)
            return (
                expand_reduced(g, x, axis, keepdims)
                * centered
                / np.where(scale == 0, np.inf, scale)
            )

        return one_axis
    if not (_absent(axis) or _integer(axis)):  # (of a vector, one axis is every element)
        return None
    if _array(g) and g.ndim > 0:  # kept dimensions

        def kept(g, x, ans, axis=None, ddof=0, keepdims=False):
            scale = expand_reduced(ans, x, axis, keepdims) * (x.size - ddof)
            gx = expand_reduced(g, x, axis, keepdims)
            return gx * (x - np.mean(x)) / np.where(scale == 0, np.inf, scale)

        return kept

    def impl(g, x, ans, axis=None, ddof=0, keepdims=False):
        scale = ans * (x.size - ddof)  # 0 where every centered value is 0: a zero derivative
        return g * (x - np.mean(x)) / (scale if scale != 0 else np.inf)

    return impl


@helper
def std_vjp_jvp_x(t, g, x, ans, axis=None, ddof=0, keepdims=False):
    """The tangent of std_vjp(g, x, ans, ...) along `t` for x (ans held)."""
    centered = t - np.mean(t, axis=axis, keepdims=True)
    scale = expand_reduced(ans, x, axis, keepdims) * (_count(x, axis) - ddof)
    return expand_reduced(g, x, axis, keepdims) * centered / _nonzero(scale)


@batched_helper
def batched_std_vjp_jvp_x(t, g, x, ans, axis=None, ddof=0, keepdims=False):
    centered = t - np.mean(t, axis=_row_axes(axis, np.ndim(x)), keepdims=True)
    scale = expand_reduced(ans, x, axis, keepdims) * (_count(x, axis) - ddof)
    return expand_reduced(g, x, axis, keepdims) * centered / _nonzero(scale)


@helper
def std_vjp_jvp_ans(t, g, x, ans, axis=None, ddof=0, keepdims=False):
    """The tangent of std_vjp(g, x, ans, ...) along `t` for ans (x held)."""
    ratio = expand_reduced(t / _nonzero(ans), x, axis, keepdims)
    return -std_vjp(g, x, ans, axis, ddof, keepdims) * ratio


@batched_helper
def batched_std_vjp_jvp_ans(t, g, x, ans, axis=None, ddof=0, keepdims=False):
    te = batched_expand_reduced(t / _nonzero(ans), x, axis, keepdims)
    return -std_vjp(g, x, ans, axis, ddof, keepdims) * te


defvjp(
    np.std,
    _STD_SIG,
    a="std_vjp(g, a, ans, axis=axis, ddof=ddof, keepdims=keepdims)",
    jvp=reduction("a"),
)

# integer and boolean results: piecewise constant, a zero derivative almost everywhere
nondiff(
    np.argmax,
    np.argmin,
    np.argsort,
    np.argpartition,
    np.searchsorted,
    np.digitize,
    np.nonzero,
    np.flatnonzero,
    np.argwhere,
    np.count_nonzero,
    np.signbit,
    np.any,
    np.all,
)

"""Numerical routines: np.polyval, np.trapezoid (np.trapz where NumPy has it), np.convolve,
np.correlate, np.cumulative_sum and np.ediff1d (np.interp: rules/interpolation.py). Each op's entry sits below the
helpers its templates call (NumPy, batched and Numba forms side by side, as rules/helpers.py
says). The NumPy helpers read any axes their cotangent or tangent has before the value's own as
a batch (`lead` counts them), so they serve batched sweeps as they are.
np.trapezoid's `dx` is refused (pass `x` to differentiate the spacing).
"""

import numpy as np

from .common import _absent, _array, _shift
from .helpers import batched_helper, helper, numba_of
from .registry import defvjp, explicit, linear
from .scans import cumsum_vjp


@helper
def _reduce_to(c, shape, lead):
    """`c` (`lead` batch axes, then a shape `shape` broadcasts to) summed down to lead + shape."""
    extra = np.ndim(c) - lead - len(shape)
    if extra:
        c = np.sum(c, axis=tuple(range(lead, lead + extra)))
    axes = tuple(lead + d for d, s in enumerate(shape) if s == 1 and np.shape(c)[lead + d] != 1)
    return np.sum(c, axis=axes, keepdims=True) if axes else c


# ----------------------------------------------------------------------------- polyval


@helper(batch_safe=True, jvp=linear("p"))
def poly_derivative(p):
    """The coefficients of the derivative of the polynomial with coefficients `p` (highest
    power first, as np.polyval takes them; leading axes are a batch)."""
    p = np.asarray(p)
    n = np.shape(p)[-1]
    return p[..., :-1] * np.arange(n - 1, 0, -1)


@helper
def _poly_basis(x, n, order=0):
    """The `order`-th derivative of (x**(n-1), ..., x, 1): shape x.shape + (n,)."""
    powers = np.arange(n - 1, -1, -1)
    coef = np.ones(n)
    for k in range(order):
        coef = coef * (powers - k)
    x = np.asarray(x)
    x = x.astype(np.result_type(x, np.float64), copy=False)
    return coef * x[..., None] ** np.maximum(powers - order, 0)


@helper(
    batch_safe=True,
    jvp=explicit(g="poly_moments(t, p, x, order)", x="poly_moments(g * t, p, x, order + 1)"),
)
def poly_moments(g, p, x, order=0):
    """The cotangent of np.polyval(p, x) for `p` (for order=0): the sum over x's elements of `g`
    times (x**(n-1), ..., x, 1), or times the `order`-th derivative of that."""
    n = np.shape(p)[-1]
    lead = np.ndim(g) - np.ndim(x)
    terms = np.asarray(g)[..., None] * _poly_basis(x, n, order)
    return np.sum(terms, axis=tuple(range(lead, lead + np.ndim(x))))


@helper(
    batch_safe=True,
    # np.polyval(c, x) with the coefficients' batch axes leading: linear in c, not in x
    jvp=explicit(c="polyval_tangent(t, x)", x="t * polyval_tangent(poly_derivative(c), x)"),
)
def polyval_tangent(c, x):
    """The tangent of np.polyval(p, x) along `c` for `p` (`c` may have leading batch axes)."""
    n = np.shape(c)[-1]
    lead = np.ndim(c) - 1
    shape = np.shape(c)[:lead] + (1,) * np.ndim(x) + (n,)
    return np.sum(np.reshape(c, shape) * _poly_basis(x, n), axis=-1)


defvjp(
    np.polyval,
    "p, x",
    p="poly_moments(g, p, x)",
    x="g * np.polyval(poly_derivative(p), x)",
    jvp=explicit(p="polyval_tangent(t, x)", x="t * np.polyval(poly_derivative(p), x)"),
)

# ----------------------------------------------------------------------------- trapezoid
# np.trapezoid(y, x, dx, axis) = sum over the axis of d_i (y_i + y_{i+1}) / 2, d the widths
# (np.diff(x) along the axis, or dx): linear in y, and in the widths. `dx` is refused.


@helper
def _widths(y, x, dx, axis):
    """The widths d, laid out to broadcast against y's pairs along `axis`."""
    ndim = np.ndim(y)
    ax = axis % ndim
    if x is None:
        shape = [1] * ndim
        shape[ax] = np.shape(y)[ax] - 1
        return np.full(shape, dx, dtype=np.float64)
    x = np.asarray(x)  # (a list: np.result_type reads a list as a dtype's fields)
    x = x.astype(np.result_type(x, np.float64), copy=False)
    if x.ndim == 1:
        shape = [1] * ndim
        shape[ax] = x.shape[0] - 1
        return np.reshape(np.diff(x), shape)
    return np.diff(x, axis=axis)


@helper
def _pairs_back(e, ax, sign=1.0):
    """The adjoint of pairing y_i + sign * y_{i+1} along axis `ax` of `e`: y_i gets
    e_{i-1} + sign * e_i."""
    pad = list(np.shape(e))
    pad[ax] = 1
    zeros = np.zeros(pad, dtype=np.result_type(e, np.float32))
    return np.concatenate([zeros, e], axis=ax) + sign * np.concatenate([e, zeros], axis=ax)


@helper(
    batch_safe=True,
    jvp=explicit(g="trapezoid_vjp_y(t, y, x, dx, axis)", x="trapezoid_vjp_y(g, y, x, dx, axis, t)"),
)
def trapezoid_vjp_y(g, y, x=None, dx=1.0, axis=-1, xt=None):
    """The cotangent of np.trapezoid(y, x, dx, axis) for y; with `xt`, its derivative in x
    along xt (it is linear in x). `g` and `xt` may have leading batch axes."""
    ax = axis % np.ndim(y)
    lead = np.ndim(g) - (np.ndim(y) - 1)
    if xt is None:
        widths = _widths(y, x, dx, axis)
    else:  # the widths of xt, whose leading axes are a batch
        lead_t = np.ndim(xt) - np.ndim(x)
        widths = np.diff(xt, axis=-1 if np.ndim(x) == 1 else lead_t + ax)
        if np.ndim(x) == 1:
            shape = [1] * np.ndim(y)
            shape[ax] = np.shape(widths)[-1]
            widths = np.reshape(widths, np.shape(widths)[:-1] + tuple(shape))
    e = np.expand_dims(g, lead + ax) * widths / 2
    lead = np.ndim(e) - np.ndim(y)
    return _reduce_to(_pairs_back(e, lead + ax), np.shape(y), lead)


@helper(
    batch_safe=True,
    jvp=explicit(g="trapezoid_vjp_x(t, y, x, axis)", y="trapezoid_vjp_x(g, y, x, axis, t)"),
)
def trapezoid_vjp_x(g, y, x, axis=-1, yt=None):
    """The cotangent of np.trapezoid(y, x, axis=axis) for x: d_i = x_{i+1} - x_i meets
    s_i = (y_i + y_{i+1}) / 2; with `yt`, its derivative in y along yt (it is linear in y).
    `g` and `yt` may have leading batch axes. (A third derivative through `yt` is not
    covered: no API takes one.)"""
    ax = axis % np.ndim(y)
    src = y if yt is None else yt
    lead_s = np.ndim(src) - np.ndim(y)
    moved = np.moveaxis(np.asarray(src), lead_s + ax, -1)
    s = np.moveaxis((moved[..., 1:] + moved[..., :-1]) / 2, -1, lead_s + ax)
    e = np.expand_dims(g, np.ndim(g) - (np.ndim(y) - 1) + ax) * s
    lead = np.ndim(e) - np.ndim(y)
    c = _pairs_back(e, lead + ax, -1.0)  # x_i gets e_{i-1} - e_i
    if np.ndim(x) == 1:
        c = np.moveaxis(c, lead + ax, -1)
        return np.sum(c, axis=tuple(range(lead, np.ndim(c) - 1)))
    return _reduce_to(c, np.shape(x), lead)


@helper(batch_safe=True)
def trapezoid_jvp_y(t, y, x=None, dx=1.0, axis=-1):
    """The tangent of np.trapezoid(y, x, dx, axis) along `t` for y."""
    ax = axis % np.ndim(y) + np.ndim(t) - np.ndim(y)
    t = np.moveaxis(np.asarray(t), ax, -1)
    pairs = np.moveaxis((t[..., 1:] + t[..., :-1]) / 2, -1, ax)
    return np.sum(pairs * _widths(y, x, dx, axis), axis=ax)


@helper(batch_safe=True)
def trapezoid_jvp_x(t, y, x, axis=-1):
    """The tangent of np.trapezoid(y, x, axis=axis) along `t` for x."""
    lead = np.ndim(t) - np.ndim(x)
    ax = axis % np.ndim(y)
    ym = np.moveaxis(np.asarray(y), ax, -1)
    s = np.moveaxis((ym[..., 1:] + ym[..., :-1]) / 2, -1, ax)
    d = np.diff(t, axis=-1 if np.ndim(x) == 1 else lead + ax)
    if np.ndim(x) == 1:
        shape = [1] * np.ndim(y)
        shape[ax] = np.shape(d)[-1]
        d = np.reshape(d, np.shape(d)[:-1] + tuple(shape))
    return np.sum(d * s, axis=lead + ax)


@numba_of(trapezoid_vjp_y)
def _trapezoid_vjp_y(g, y, x=None, dx=1.0, axis=-1, xt=None):
    if not (_array(y) and y.ndim == 1 and not _array(g) and _absent(xt)):
        return None
    if _absent(x):

        def spaced(g, y, x=None, dx=1.0, axis=-1, xt=None):
            out = np.full(y.shape[0], g * dx)
            out[0] *= 0.5
            out[-1] *= 0.5
            return out

        return spaced
    if not (_array(x) and x.ndim == 1):
        return None

    def at(g, y, x=None, dx=1.0, axis=-1, xt=None):
        out = np.zeros(y.shape[0])
        for i in range(y.shape[0] - 1):
            half = g * (x[i + 1] - x[i]) / 2
            out[i] += half
            out[i + 1] += half
        return out

    return at


@numba_of(trapezoid_vjp_x)
def _trapezoid_vjp_x(g, y, x, axis=-1, yt=None):
    if not (_array(y) and y.ndim == 1 and _array(x) and x.ndim == 1 and not _array(g)):
        return None
    if not _absent(yt):
        return None

    def impl(g, y, x, axis=-1, yt=None):
        out = np.zeros(x.shape[0])
        for i in range(x.shape[0] - 1):
            e = g * (y[i] + y[i + 1]) / 2
            out[i] -= e
            out[i + 1] += e
        return out

    return impl


@numba_of(trapezoid_jvp_y)
def _trapezoid_jvp_y(t, y, x=None, dx=1.0, axis=-1):
    if not (_array(t) and t.ndim == 1 and _array(y) and y.ndim == 1):
        return None
    if _absent(x):
        return lambda t, y, x=None, dx=1.0, axis=-1: dx * (np.sum(t) - (t[0] + t[-1]) / 2)

    def at(t, y, x=None, dx=1.0, axis=-1):
        return np.sum((x[1:] - x[:-1]) * (t[1:] + t[:-1])) / 2

    return at


@numba_of(trapezoid_jvp_x)
def _trapezoid_jvp_x(t, y, x, axis=-1):
    if not (_array(t) and t.ndim == 1 and _array(y) and y.ndim == 1):
        return None
    return lambda t, y, x, axis=-1: np.sum((t[1:] - t[:-1]) * (y[1:] + y[:-1])) / 2


_TRAPEZOID = "y, x=None, dx=1.0, axis=-1"
for _f in [getattr(np, _name) for _name in ("trapezoid", "trapz") if hasattr(np, _name)]:
    defvjp(
        _f,
        _TRAPEZOID,
        y="trapezoid_vjp_y(g, y, x, dx, axis)",
        x="trapezoid_vjp_x(g, y, x, axis)",
        jvp=explicit(y="trapezoid_jvp_y(t, y, x, dx, axis)", x="trapezoid_jvp_x(t, y, x, axis)"),
    )

# ----------------------------------------------------------------------------- convolve
# np.convolve(a, v, mode) is a slice of the full convolution, which is bilinear; np.correlate(a,
# v, mode) is the same with v reversed (its 'same' slice starts elsewhere when v is the longer).
# The helpers take vectors with leading batch axes.


@helper(nondiff=True)
def conv_start(n, m, mode, correlate=False):
    """Where np.convolve's (np.correlate's) `mode` slice starts in the full result."""
    if mode == "full":
        return 0
    if mode == "valid":
        return min(n, m) - 1
    return n // 2 if correlate and n < m else (min(n, m) - 1) // 2


@numba_of(conv_start)
def _conv_start(n, m, mode, correlate=False):
    def impl(n, m, mode, correlate=False):
        if mode == "full":
            return 0
        if mode == "valid":
            return min(n, m) - 1
        return n // 2 if correlate and n < m else (min(n, m) - 1) // 2

    return impl


@helper(
    batch_safe=True,
    jvp=explicit(g="conv_vjp(t, a, v, start)", v="conv_vjp(g, a, t, start)"),
)
def conv_vjp(g, a, v, start):
    """The cotangent for `a` of the full convolution of a and v sliced from `start` (the length
    of `g`): a_i gets sum_j g_{i+j} v_j, g padded to the full length."""
    n, m = np.shape(a)[-1], np.shape(v)[-1]
    full = np.zeros(
        np.shape(g)[:-1] + (n + m - 1,), dtype=np.result_type(g, np.asarray(v), np.float32)
    )
    full[..., start : start + np.shape(g)[-1]] = g
    windows = np.lib.stride_tricks.sliding_window_view(full, m, axis=-1)
    return np.matmul(windows, np.asarray(v)[..., None])[..., 0]


@numba_of(conv_vjp)
def _conv_vjp(g, a, v, start):
    if not (_array(g) and g.ndim == 1 and _array(v) and v.ndim == 1):
        return None

    def impl(g, a, v, start):
        n = a.shape[0]
        out = np.zeros(n)
        for k in range(g.shape[0]):
            for j in range(v.shape[0]):
                i = start + k - j
                if 0 <= i < n:
                    out[i] += g[k] * v[j]
        return out

    return impl


@helper(batch_safe=True)
def conv_apply(a, v, start, length):
    """The full convolution of a and v (either may have leading batch axes), from `start` on
    for `length` values."""
    m = np.shape(v)[-1]
    pad = np.zeros(np.shape(a)[:-1] + (m - 1,), dtype=np.result_type(a, np.float32))
    padded = np.concatenate([pad, a, pad], axis=-1)
    windows = np.lib.stride_tricks.sliding_window_view(padded, m, axis=-1)
    full = np.matmul(windows, np.asarray(v)[..., ::-1, None])[..., 0]
    return full[..., start : start + length]


@numba_of(conv_apply)
def _conv_apply(a, v, start, length):
    if not (_array(a) and a.ndim == 1 and _array(v) and v.ndim == 1):
        return None

    def impl(a, v, start, length):
        return np.convolve(a, v)[start : start + length]

    return impl


@helper(
    batch_safe=True,
    jvp=explicit(g="corr_vjp_v(t, a, v, start)", a="corr_vjp_v(g, t, v, start)"),
)
def corr_vjp_v(g, a, v, start):
    """The cotangent for v of np.correlate(a, v) sliced from `start`."""
    return conv_vjp(g, v[::-1], a, start)[..., ::-1]


@numba_of(corr_vjp_v)
def _corr_vjp_v(g, a, v, start):
    if not (_array(g) and g.ndim == 1):
        return None
    return lambda g, a, v, start: conv_vjp(g, v[::-1], a, start)[::-1]


_CONV = "conv_start(np.size(a), np.size(v), mode)"
_CONV_LENGTH = "np.size(ans)"
defvjp(
    np.convolve,
    "a, v, mode='full'",
    a=f"conv_vjp(g, a, v, {_CONV})",
    v=f"conv_vjp(g, v, a, {_CONV})",
    jvp=explicit(
        a=f"conv_apply(t, v, {_CONV}, {_CONV_LENGTH})",
        v=f"conv_apply(a, t, {_CONV}, {_CONV_LENGTH})",
    ),
)
_CORR = "conv_start(np.size(a), np.size(v), mode, True)"
defvjp(
    np.correlate,
    "a, v, mode='valid'",
    a=f"conv_vjp(g, a, v[::-1], {_CORR})",
    v=f"corr_vjp_v(g, a, v, {_CORR})",
    jvp=explicit(
        a=f"conv_apply(t, v[::-1], {_CORR}, {_CONV_LENGTH})",
        v=f"conv_apply(a, t[..., ::-1], {_CORR}, {_CONV_LENGTH})",
    ),
)

# ----------------------------------------------------------------------------- cumulative_sum


@helper(batch_safe=True, jvp=linear("g"))
def cumulative_sum_vjp(g, x, axis=None, include_initial=False):
    """The cotangent of np.cumulative_sum(x, axis, include_initial): np.cumsum's, with the
    initial zero's cotangent dropped."""
    if include_initial:
        ax = (axis or 0) % np.ndim(x) + np.ndim(g) - np.ndim(x)
        g = np.take(g, np.arange(1, np.shape(g)[ax]), axis=ax)
    return cumsum_vjp(g, x, axis=axis)


@batched_helper
def batched_cumulative_sum(x, axis=None, dtype=None, out=None, include_initial=False):
    axis = 1 if axis is None else _shift(axis)
    return np.cumulative_sum(x, axis=axis, include_initial=include_initial)


if hasattr(np, "cumulative_sum"):
    defvjp(
        np.cumulative_sum,
        "x, /, *, axis=None, dtype=None, out=None, include_initial=False",
        x="cumulative_sum_vjp(g, x, axis, include_initial)",
        jvp=linear("x", batched=batched_cumulative_sum),
    )

# ----------------------------------------------------------------------------- ediff1d


@helper
def _ediff1d_layout(ary, to_end=None, to_begin=None):
    """Where each part sits in np.ediff1d's result: (len(to_begin), len(diffs), len(to_end))."""
    return np.size(to_begin) if to_begin is not None else 0, max(np.size(ary) - 1, 0)


@helper(batch_safe=True, jvp=linear("g"))
def ediff1d_vjp(g, ary, part, to_end=None, to_begin=None):
    """The cotangent of np.ediff1d(ary, to_end, to_begin) for `part` ("ary", "to_end" or
    "to_begin"): its slice of `g`, through the differences for ary."""
    begin, diffs = _ediff1d_layout(ary, to_end, to_begin)
    lead = np.shape(g)[:-1]
    if part == "to_begin":
        return np.reshape(g[..., :begin], lead + np.shape(to_begin))
    if part == "to_end":
        return np.reshape(g[..., begin + diffs :], lead + np.shape(to_end))
    core = g[..., begin : begin + diffs]
    out = np.zeros(lead + (np.size(ary),), dtype=np.result_type(g, np.float32))
    out[..., 1:] += core
    out[..., :-1] -= core
    return np.reshape(out, lead + np.shape(ary))


def _ends_count(v):
    """How many entries np.ediff1d puts for `to_begin`/`to_end` (a Numba-only stub)."""
    return None


@numba_of(_ends_count)
def _ends_count_impl(v):
    if _absent(v):
        return lambda v: 0
    if _array(v):
        return lambda v: v.size
    return lambda v: 1  # a number


@numba_of(ediff1d_vjp)
def _ediff1d_vjp(g, ary, part, to_end=None, to_begin=None):
    which = getattr(part, "literal_value", None)  # Numba asks again with the literal string
    if not (_array(g) and g.ndim == 1 and _array(ary) and which is not None):
        return None
    if which == "ary":

        def core(g, ary, part, to_end=None, to_begin=None):
            begin = _ends_count(to_begin)
            out = np.zeros(ary.size)
            for i in range(ary.size - 1):
                out[i + 1] += g[begin + i]
                out[i] -= g[begin + i]
            return out.reshape(ary.shape)

        return core
    if which == "to_begin" and _array(to_begin):
        return lambda g, ary, part, to_end=None, to_begin=None: np.ascontiguousarray(
            g[: to_begin.size]
        ).reshape(to_begin.shape)
    if which == "to_begin" and not _absent(to_begin):  # a number: its one entry
        return lambda g, ary, part, to_end=None, to_begin=None: g[0]

    if which == "to_end" and _array(to_end):

        def entries(g, ary, part, to_end=None, to_begin=None):
            start = _ends_count(to_begin) + ary.size - 1
            return np.ascontiguousarray(g[start : start + to_end.size]).reshape(to_end.shape)

        return entries
    if which == "to_end" and not _absent(to_end):
        return lambda g, ary, part, to_end=None, to_begin=None: g[
            _ends_count(to_begin) + ary.size - 1
        ]
    return None


@helper(batch_safe=True, jvp=linear("t"))
def ediff1d_jvp(t, ary, part, to_end=None, to_begin=None):
    """The tangent of np.ediff1d(ary, to_end, to_begin) along `t` for `part`."""
    begin, diffs = _ediff1d_layout(ary, to_end, to_begin)
    end = np.size(to_end) if to_end is not None else 0
    primal = {"ary": ary, "to_end": to_end, "to_begin": to_begin}[part]
    lead = np.shape(t)[: np.ndim(t) - np.ndim(primal)]
    flat = np.reshape(t, lead + (-1,))
    out = np.zeros(lead + (begin + diffs + end,), dtype=np.result_type(t, np.float32))
    if part == "to_begin":
        out[..., :begin] = flat
    elif part == "to_end":
        out[..., begin + diffs :] = flat
    else:
        out[..., begin : begin + diffs] = np.diff(flat, axis=-1)
    return out


@numba_of(ediff1d_jvp)
def _ediff1d_jvp(t, ary, part, to_end=None, to_begin=None):
    if not (_array(t) and _absent(to_end) and _absent(to_begin)):
        return None
    return lambda t, ary, part, to_end=None, to_begin=None: np.diff(
        np.ascontiguousarray(t).reshape(-1)
    )


_EDIFF = "to_end=to_end, to_begin=to_begin"
defvjp(
    np.ediff1d,
    "ary, to_end=None, to_begin=None",
    ary=f"ediff1d_vjp(g, ary, 'ary', {_EDIFF})",
    to_end=f"ediff1d_vjp(g, ary, 'to_end', {_EDIFF})",
    to_begin=f"ediff1d_vjp(g, ary, 'to_begin', {_EDIFF})",
    jvp=explicit(
        ary=f"ediff1d_jvp(t, ary, 'ary', {_EDIFF})",
        to_end=f"ediff1d_jvp(t, ary, 'to_end', {_EDIFF})",
        to_begin=f"ediff1d_jvp(t, ary, 'to_begin', {_EDIFF})",
    ),
)

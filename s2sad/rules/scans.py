"""Scans along an axis (axis=None: over the flattened array): cumsum, cumprod and diff, each op's
entry below the helpers its templates call (NumPy, batched and Numba forms side by side, as
rules/helpers.py says). The NumPy helpers read any axes `g` has before the value's own as a
batch (their batched forms are the same functions): `lead` counts them. Numba's np.cumsum,
np.cumprod and np.diff take no axis: the Numba forms cover the flattened scans and the
differences of a vector. np.diff's prepend/append are refused.
"""

import numpy as np

from .common import _absent, _array, _shift, reshape_like
from .helpers import batched_helper, helper, numba_jitable, numba_of
from .registry import defvjp, explicit, linear

# ----------------------------------------------------------------------------- cumsum


@helper
def _lead_axis(axis, lead):
    return axis + lead if axis >= 0 else axis


@helper(batch_safe=True, jvp=linear("g"))
def cumsum_vjp(g, a, axis=None):
    """The cotangent of np.cumsum(a, axis): a cumulative sum from the end."""
    lead = np.ndim(g) - (1 if axis is None else np.ndim(a))
    if axis is None:
        flat = np.reshape(g, np.shape(g)[:lead] + (-1,))
        rev = np.cumsum(flat[..., ::-1], axis=-1)[..., ::-1]
        return np.reshape(rev, np.shape(g)[:lead] + np.shape(a))
    ax = _lead_axis(axis, lead)
    return np.flip(np.cumsum(np.flip(g, ax), axis=ax), ax)


@numba_of(cumsum_vjp)
def _cumsum_vjp(g, a, axis=None):
    if not (_array(g) and _absent(axis)):
        return None

    def impl(g, a, axis=None):
        flat = np.ascontiguousarray(g).reshape(-1)
        return reshape_like(np.cumsum(flat[::-1])[::-1], a)

    return impl


@batched_helper
def batched_cumsum(a, axis=None, dtype=None, out=None):
    if axis is None:
        return np.cumsum(np.reshape(a, np.shape(a)[:1] + (-1,)), axis=1)
    return np.cumsum(a, axis=_shift(axis))


defvjp(
    np.cumsum,
    "a, axis=None, dtype=None, out=None",
    a="cumsum_vjp(g, a, axis=axis)",
    jvp=linear("a", batched=batched_cumsum),
)

# ----------------------------------------------------------------------------- cumprod


@helper
def _cumprod_weights(flat):
    """w[..., i, j] = d cumprod(x)_j / d x_i along the last axis: the product of x_0..x_j
    without x_i for j >= i, else 0; exact where x holds zeros."""
    n = flat.shape[-1]
    eye = np.eye(n, dtype=bool)
    w = np.cumprod(np.where(eye, 1.0, flat[..., None, :]), axis=-1)
    return np.where(np.triu(np.ones((n, n), dtype=bool)), w, 0.0)


@helper
def _scan_moved(x, axis):
    """x with the scanned axis last (flattened first when axis is None)."""
    x = np.asarray(x, dtype=np.result_type(x, np.float32))
    return np.reshape(x, (-1,)) if axis is None else np.moveaxis(x, axis, -1)


@numba_jitable
def _cumprod_scan(x, s, forward):
    """forward: sum over i <= j of s_i d cumprod(x)_j / d x_i, for each j (the tangent);
    else: sum over j >= i of s_j times the same, for each i (the cotangent). Exact at zeros."""
    n = x.size
    out = np.zeros(n)
    for i in range(n):
        p = 1.0  # the product of x_0..x_j without x_i
        for k in range(i):
            p *= x[k]
        for j in range(i, n):
            if j > i:
                p *= x[j]
            if forward:
                out[j] += s[i] * p
            else:
                out[i] += s[j] * p
    return out


@helper(
    batch_safe=True, jvp=explicit(g="cumprod_vjp(t, a, axis)", a="cumprod_vjp_jvp(t, g, a, axis)")
)
def cumprod_vjp(g, a, axis=None):
    """The cotangent of np.cumprod(a, axis) (`g` may carry leading batch axes)."""
    lead = np.ndim(g) - (1 if axis is None else np.ndim(a))
    w = _cumprod_weights(_scan_moved(a, axis))
    if axis is None:
        gm = np.reshape(g, np.shape(g)[:lead] + (-1,))
        return np.reshape(np.einsum("...ij,...j->...i", w, gm), np.shape(g)[:lead] + np.shape(a))
    ax = _lead_axis(axis, lead)
    out = np.einsum("...ij,...j->...i", w, np.moveaxis(g, ax, -1))
    return np.moveaxis(out, -1, ax)


@helper
def _scan_last(v, a, axis):
    """`v` (shaped like `a` after leading batch axes) with the scanned axis last (flattened
    after the batch axes when axis is None)."""
    lead = np.ndim(v) - np.ndim(a)
    if axis is None:
        return np.reshape(v, np.shape(v)[:lead] + (-1,))
    return np.moveaxis(v, _lead_axis(axis, lead), -1)


@helper
def cumprod_vjp_jvp(t, g, a, axis=None):
    """The tangent of cumprod_vjp(g, a, axis) = W g along `t` for a, g held: dW_ij is the sum
    over m != i, m <= j, of t_m times the product of a_0..a_j without a_i and a_m (exact at
    zeros). One m at a time: n^2 memory. `t` or `g` may carry leading batch axes."""
    am, tm, gm = _scan_moved(a, axis), _scan_last(t, a, axis), _scan_last(g, a, axis)
    n = am.shape[-1]
    k = np.arange(n)
    out = 0.0
    for m in range(n):
        skip = (k[:, None] == k[None, :]) | (k[None, :] == m)  # [i, k]: a_i and a_m left out
        q = np.cumprod(np.where(skip, 1.0, am[..., None, :]), axis=-1)  # [..., i, j]
        valid = (k[:, None] != m) & (k[None, :] >= np.maximum(k[:, None], m))
        out = out + tm[..., m : m + 1] * np.einsum("...ij,...j->...i", np.where(valid, q, 0.0), gm)
    lead = np.ndim(out) - np.ndim(am)
    if axis is None:
        return np.reshape(out, np.shape(out)[:lead] + np.shape(a))
    return np.moveaxis(out, -1, _lead_axis(axis, lead))


@numba_of(cumprod_vjp)
def _cumprod_vjp(g, a, axis=None):
    if not (_array(g) and _array(a) and _absent(axis)):
        return None

    def impl(g, a, axis=None):
        x = np.ascontiguousarray(a).reshape(-1)
        return reshape_like(_cumprod_scan(x, np.ascontiguousarray(g).reshape(-1), False), a)

    return impl


@helper
def cumprod_jvp(t, a, axis=None):
    """The tangent of np.cumprod(a, axis) along `t` (`t` may carry leading batch axes)."""
    lead = np.ndim(t) - np.ndim(a)
    w = _cumprod_weights(_scan_moved(a, axis))
    if axis is None:
        tm = np.reshape(t, np.shape(t)[:lead] + (-1,))
        return np.einsum("...ij,...i->...j", w, tm)
    ax = _lead_axis(axis, lead)
    out = np.einsum("...ij,...i->...j", w, np.moveaxis(t, ax, -1))
    return np.moveaxis(out, -1, ax)


@numba_of(cumprod_jvp)
def _cumprod_jvp(t, a, axis=None):
    if not (_array(t) and _array(a) and _absent(axis)):
        return None

    def impl(t, a, axis=None):
        x = np.ascontiguousarray(a).reshape(-1)
        return _cumprod_scan(x, np.ascontiguousarray(t).reshape(-1), True)

    return impl


defvjp(
    np.cumprod,
    "a, axis=None, dtype=None, out=None",
    a="cumprod_vjp(g, a, axis=axis)",
    jvp=explicit(a="cumprod_jvp(t, a, axis=axis)"),
)

# ----------------------------------------------------------------------------- diff


@helper(batch_safe=True, jvp=linear("g"))
def diff_vjp(g, a, n=1, axis=-1):
    """The cotangent of np.diff(a, n, axis): each difference sends +g to its right element and
    -g to its left one."""
    ax = _lead_axis(axis, np.ndim(g) - np.ndim(a))
    for _ in range(min(n, np.shape(a)[axis])):  # differences past the length leave it empty
        shape = list(np.shape(g))
        shape[ax] = 1
        pad = np.zeros(shape, dtype=np.result_type(g, np.float32))
        g = np.concatenate([pad, g], axis=ax) - np.concatenate([g, pad], axis=ax)
    return g


@numba_of(diff_vjp)
def _diff_vjp(g, a, n=1, axis=-1):
    if not (_array(a) and a.ndim == 1 and _array(g)):
        return None

    def impl(g, a, n=1, axis=-1):
        out = np.zeros(g.shape[0])
        out[:] = g
        for _ in range(min(n, a.shape[0])):
            m = out.size
            wider = np.zeros(m + 1)
            for i in range(m):
                wider[i + 1] += out[i]
                wider[i] -= out[i]
            out = wider
        return out

    return impl


@batched_helper
def batched_diff(a, n=1, axis=-1):
    return np.diff(a, n, axis=_shift(axis))


defvjp(
    np.diff,
    "a, n=1, axis=-1",
    a="diff_vjp(g, a, n=n, axis=axis)",
    jvp=linear("a", batched=batched_diff),
)

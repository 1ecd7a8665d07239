"""Statistics that skip NaNs, and covariances: np.nanvar, np.nanstd, np.nanprod, np.nanmedian,
np.nanquantile, np.nanpercentile, np.nancumsum, np.nancumprod, np.cov and np.corrcoef. Each op's
entry sits below the helpers its templates call (NumPy, batched and Numba forms side by side, as
rules/helpers.py says).

As for np.nansum (rules/statistics.py), NaN entries get a zero cotangent and an all-NaN slice
gives zeros; so does a slice with no more values than `ddof` (where NumPy returns NaN or inf).
np.nanstd's derivative where it is 0 is 0, as np.std's. np.nanmedian and np.nanquantile follow
np.quantile's linear interpolation over the values that are not NaN. np.cov and np.corrcoef
cover one array of variables (`y`, `fweights` and `aweights` are refused); np.corrcoef is
differentiated without its clipping to [-1, 1] (the clipped values are 1 exactly, on the
diagonal, where the derivative is 0).
"""

import numpy as np

from .common import _absent, _array, _axes, batched_expand_reduced, expand_reduced
from .helpers import batched_of, helper, numba_jitable, numba_of
from .registry import defvjp, explicit, linear, reduction
from .selection import _interpolated, _interpolation, _reduced_last

# ----------------------------------------------------------------------------- nanvar, nanstd


@helper
def _nan_centered(x, axis, ddof, t=None):
    """(x - its NaN-skipping mean, 0 at NaNs; 1 / (count - ddof), 0 where that is not
    positive); with `t` (leading axes a batch), `t` centered over x's counted elements."""
    counted = ~np.isnan(x)
    axes = _axes(axis, np.ndim(x))
    count = np.sum(counted, axis=axes, keepdims=True)
    inverse = np.where(count > ddof, 1.0 / np.maximum(count - ddof, 1), 0.0)
    v = np.where(counted, x, 0.0) if t is None else np.where(counted, t, 0.0)
    lead = np.ndim(v) - np.ndim(x)
    moved = tuple(lead + d for d in axes)
    mean = np.sum(v, axis=moved, keepdims=True) / np.maximum(count, 1)
    return np.where(counted, v - mean, 0.0), inverse


@helper(
    jvp=explicit(
        g="nanvar_vjp(t, x, axis, ddof, keepdims)",
        x="nanvar_vjp(g, x, axis, ddof, keepdims, t)",
        batched={"g": "batched_nanvar_vjp(t, x, axis, ddof, keepdims)"},
    )
)
def nanvar_vjp(g, x, axis=None, ddof=0, keepdims=False, xt=None):
    """The cotangent of np.nanvar(x, axis, ddof=ddof, keepdims=keepdims):
    2 g (x - mean) / (count - ddof) over the counted elements; with `xt`, its derivative in x
    along xt (leading axes of xt a batch)."""
    centered, inverse = _nan_centered(x, axis, ddof, xt)
    return expand_reduced(g, x, axis, keepdims) * (2 * centered * inverse)


@batched_of(nanvar_vjp)
def batched_nanvar_vjp(g, x, axis=None, ddof=0, keepdims=False, xt=None):
    if xt is not None:  # each row of g against each row of xt
        centered, inverse = _nan_centered(x, axis, ddof, xt)
        return batched_expand_reduced(g, x, axis, keepdims) * (2 * centered * inverse)
    weights = nanvar_vjp(np.ones(np.shape(g)[1:]), x, axis, ddof, keepdims)
    return batched_expand_reduced(g, x, axis, keepdims) * weights


@numba_of(nanvar_vjp)
def _nanvar_vjp(g, x, axis=None, ddof=0, keepdims=False, xt=None):
    if not (_array(x) and _absent(axis) and _absent(xt)):
        return None
    if _array(g) and g.ndim > 0:
        return None

    def impl(g, x, axis=None, ddof=0, keepdims=False, xt=None):
        counted = ~np.isnan(x)
        count = np.sum(counted)
        if count <= ddof:
            return np.zeros(x.shape)
        mean = np.sum(np.where(counted, x, 0.0)) / count
        scale = 2 * np.sum(np.asarray(g)) / (count - ddof)  # g: a number, or a 0-d array
        return np.where(counted, scale * (x - mean), 0.0)

    return impl


@helper(jvp=explicit(s="-2 * t * half_inverse(s) ** 2"))
def half_inverse(s):
    """1 / (2 s) where s > 0, else 0: np.std's and np.nanstd's cotangent is np.var's times
    this (0 where the deviation is 0, as np.std's rule says)."""
    s = np.asarray(s, dtype=np.result_type(s, np.float64))
    return np.where(s > 0, 0.5 / np.where(s > 0, s, 1.0), 0.0)


@numba_of(half_inverse)
def _half_inverse(s):
    if _array(s):
        return lambda s: np.where(s > 0, 0.5 / np.where(s > 0, s, 1.0), 0.0)
    return lambda s: 0.5 / s if s > 0 else 0.0


_NANVAR = "a, axis=None, dtype=None, out=None, ddof=0, keepdims=False"
_NANVAR_ONLY = {"where": (None,), "mean": (None,), "correction": (None,)}
_NANVAR_SIG = _NANVAR + ", *, where=None, mean=None, correction=None"
defvjp(
    np.nanvar,
    _NANVAR_SIG,
    literal=_NANVAR_ONLY,
    a="nanvar_vjp(g, a, axis, ddof, keepdims)",
    jvp=reduction("a"),
)
defvjp(
    np.nanstd,
    _NANVAR_SIG,
    literal=_NANVAR_ONLY,
    a="nanvar_vjp(g * half_inverse(ans), a, axis, ddof, keepdims)",
    jvp=reduction("a"),
)

# ----------------------------------------------------------------------------- nanprod, scans
# NaN counts as 1 in np.nanprod and np.nancumprod, as 0 in np.nancumsum: the rules of np.prod,
# np.cumprod and np.cumsum on that array, with zero for the NaN entries.

_ONE = "np.where(np.isnan(a), 1.0, a)"
_COUNTED = "~np.isnan(a)"
defvjp(
    np.nanprod,
    "a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None",
    literal={"initial": (None,), "where": (None,)},
    a=f"prod_vjp(g, {_ONE}, ans, axis=axis, keepdims=keepdims) * {_COUNTED}",
    jvp=reduction("a"),
)
defvjp(
    np.nancumsum,
    "a, axis=None, dtype=None, out=None",
    a=f"cumsum_vjp(g, a, axis=axis) * {_COUNTED}",
    jvp=explicit(
        a=f"np.cumsum(t * {_COUNTED}, axis=axis)",
        batched={"a": f"batched_cumsum(t * {_COUNTED}, axis=axis)"},
    ),
)
defvjp(
    np.nancumprod,
    "a, axis=None, dtype=None, out=None",
    a=f"cumprod_vjp(g, {_ONE}, axis=axis) * {_COUNTED}",
    jvp=explicit(a=f"cumprod_jvp(t * {_COUNTED}, {_ONE}, axis=axis)"),
)

# ----------------------------------------------------------------------------- nanquantile


@helper
def _nan_weights(a, q, axis, scale):
    """For each slice along `axis` (rows of _reduced_last), the weights of its elements in
    np.nanquantile(a, q / scale): shape (rows, q's size, n); the NaNs weigh nothing."""
    flat, perm, kept = _reduced_last(a, axis)
    n = flat.shape[-1]
    rows = flat.reshape(-1, n)
    q = np.asarray(q, dtype=np.float64) / scale
    weights = np.zeros((rows.shape[0], int(q.size), n))
    for r, row in enumerate(rows):
        count = int(np.sum(~np.isnan(row)))
        if count:
            order = np.argsort(row, kind="stable")[:count]  # NaNs sort last
            weights[r][:, order] = _interpolation(count, q).reshape(-1, count)
    return weights, perm, kept, q.shape


@helper(batch_safe=True, jvp=linear("g"))
def nanquantile_vjp(g, a, q, axis=None, keepdims=False, scale=1.0):
    """The cotangent of np.nanquantile(a, q / scale, axis, keepdims=keepdims) (linear
    method): each output's cotangent goes to the two values it interpolates."""
    weights, perm, kept, qshape = _nan_weights(a, q, axis, scale)
    out_ndim = len(qshape) + (np.ndim(a) if keepdims else len(kept))
    lead = np.shape(g)[: np.ndim(g) - out_ndim]
    rows = np.reshape(g, lead + (weights.shape[1], weights.shape[0]))
    out = np.einsum("...qr,rqn->...rn", rows, weights)
    out = out.reshape(lead + kept + tuple(np.shape(a)[d] for d in perm[len(kept) :]))
    back = np.argsort(perm)
    return np.transpose(out, tuple(range(len(lead))) + tuple(int(d) + len(lead) for d in back))


@helper(batch_safe=True, jvp=linear("t"))
def nanquantile_jvp(t, a, q, axis=None, keepdims=False, scale=1.0):
    """The tangent of np.nanquantile(a, q / scale, axis, keepdims=keepdims) along `t`."""
    weights, perm, kept, qshape = _nan_weights(a, q, axis, scale)
    lead = np.shape(t)[: np.ndim(t) - np.ndim(a)]
    moved = np.transpose(t, tuple(range(len(lead))) + tuple(d + len(lead) for d in perm))
    rows = moved.reshape(lead + (weights.shape[0], weights.shape[2]))
    out = np.einsum("...rn,rqn->...qr", rows, weights)
    if keepdims:
        kept = tuple(1 if d in _axes(axis, np.ndim(a)) else m for d, m in enumerate(np.shape(a)))
    return out.reshape(lead + qshape + kept)


@numba_of(nanquantile_vjp)
def _nanquantile_vjp(g, a, q, axis=None, keepdims=False, scale=1.0):
    if not (_array(a) and not _array(q) and not _array(g) and _absent(axis)):
        return None

    def impl(g, a, q, axis=None, keepdims=False, scale=1.0):
        flat = np.ascontiguousarray(a).reshape(-1)
        out = np.zeros(flat.size)
        count = np.sum(~np.isnan(flat))
        if count == 0:
            return out.reshape(a.shape)
        lo, hi, gamma = _interpolated(count, q / scale)
        order = np.argsort(flat, kind="mergesort")  # NaNs last, as NumPy's
        out[order[lo]] += g * (1.0 - gamma)
        out[order[hi]] += g * gamma
        return out.reshape(a.shape)

    return impl


@numba_of(nanquantile_jvp)
def _nanquantile_jvp(t, a, q, axis=None, keepdims=False, scale=1.0):
    if not (_array(a) and _array(t) and not _array(q) and _absent(axis) and t.ndim == a.ndim):
        return None

    def impl(t, a, q, axis=None, keepdims=False, scale=1.0):
        flat = np.ascontiguousarray(a).reshape(-1)
        tf = np.ascontiguousarray(t).reshape(-1)
        count = np.sum(~np.isnan(flat))
        if count == 0:
            return 0.0
        lo, hi, gamma = _interpolated(count, q / scale)
        order = np.argsort(flat, kind="mergesort")
        return tf[order[lo]] * (1.0 - gamma) + tf[order[hi]] * gamma

    return impl


_NANQ = "a, q, axis=None, out=None, overwrite_input=False, method='linear', keepdims=False"
_NANQ_ONLY = {"method": ("linear",), "overwrite_input": (False,), "weights": (None,)}
for _f, _scale in ((np.nanquantile, "1.0"), (np.nanpercentile, "100.0")):
    _tail = f"axis, keepdims, {_scale}"
    defvjp(
        _f,
        _NANQ + ", *, weights=None, interpolation=None",
        literal={**_NANQ_ONLY, "interpolation": (None,)},
        a=f"nanquantile_vjp(g, a, q, {_tail})",
        jvp=explicit(a=f"nanquantile_jvp(t, a, q, {_tail})"),
    )
defvjp(
    np.nanmedian,
    "a, axis=None, out=None, overwrite_input=False, keepdims=False",
    literal={"overwrite_input": (False,)},
    a="nanquantile_vjp(g, a, 0.5, axis, keepdims)",
    jvp=explicit(a="nanquantile_jvp(t, a, 0.5, axis, keepdims)"),
)

# ----------------------------------------------------------------------------- cov, corrcoef
# np.cov(m) = Xc Xc^T / (N - ddof), X the variables as rows (m, or m.T for rowvar=False), Xc
# X centered along its rows; the result squeezed (a 0-d array for one variable).


@helper
def _variables(m, rowvar, lead=0):
    """m (after `lead` batch axes) with the variables as rows, as np.cov lays it out."""
    m = np.asarray(m, dtype=np.result_type(m, np.float64))
    inner = np.shape(m)[lead:]
    x = np.reshape(m, np.shape(m)[:lead] + (1,) * (2 - len(inner)) + inner)
    return x if rowvar or np.shape(x)[-2] == 1 else np.swapaxes(x, -1, -2)


@helper
def _cov_factor(n, bias, ddof):
    return 1.0 / (n - (ddof if ddof is not None else (0 if bias else 1)))


@helper(
    batch_safe=True,
    jvp=explicit(g="cov_vjp(t, m, rowvar, bias, ddof)", m="cov_vjp(g, m, rowvar, bias, ddof, t)"),
)
def cov_vjp(g, m, rowvar=True, bias=False, ddof=None, mt=None):
    """The cotangent of np.cov(m, rowvar=rowvar, bias=bias, ddof=ddof): (G + G^T) Xc / fact;
    with `mt`, its derivative in m along mt (leading axes a batch)."""
    x = _variables(m, rowvar)
    p, n = np.shape(x)
    if mt is not None:
        x = _variables(mt, rowvar, np.ndim(mt) - np.ndim(m))
    centered = x - np.mean(x, axis=-1, keepdims=True)
    lead = np.shape(g)[: np.ndim(g) - (0 if p == 1 else 2)]
    gm = np.reshape(g, lead + (p, p))
    dx = (gm + np.swapaxes(gm, -1, -2)) @ centered * _cov_factor(n, bias, ddof)
    if not rowvar and p > 1:
        dx = np.swapaxes(dx, -1, -2)
    return np.reshape(dx, np.shape(dx)[:-2] + np.shape(m))


@helper(batch_safe=True)
def cov_jvp(t, m, rowvar=True, bias=False, ddof=None, shape=None):
    """The tangent of np.cov(m, ...) along `t` (leading axes a batch), shaped as `shape` after
    them (the result's shape), or (p, p)."""
    x = _variables(m, rowvar)
    p, n = np.shape(x)
    tx = _variables(t, rowvar, np.ndim(t) - np.ndim(m))
    xc = x - np.mean(x, axis=-1, keepdims=True)
    tc = tx - np.mean(tx, axis=-1, keepdims=True)
    dc = tc @ xc.T
    dc = (dc + np.swapaxes(dc, -1, -2)) * _cov_factor(n, bias, ddof)
    return dc if shape is None else np.reshape(dc, np.shape(dc)[:-2] + tuple(shape))


@numba_jitable
def _rows_centered(m, rowvar):
    """m with the variables as rows (a matrix), centered along them."""
    x = np.ascontiguousarray(m) if rowvar else np.ascontiguousarray(m.T)
    out = np.empty(x.shape)
    for i in range(x.shape[0]):
        out[i] = x[i] - np.mean(x[i])
    return out


@numba_of(cov_vjp)
def _cov_vjp(g, m, rowvar=True, bias=False, ddof=None, mt=None):
    if _array(m) and m.ndim == 1 and _absent(mt):  # one variable: a number's cotangent

        def one(g, m, rowvar=True, bias=False, ddof=None, mt=None):
            d = (0 if bias else 1) if ddof is None else ddof
            return 2.0 * np.sum(np.asarray(g)) * (m - np.mean(m)) / (m.size - d)

        return one
    if not (_array(g) and g.ndim == 2 and _array(m) and m.ndim == 2 and _absent(mt)):
        return None

    def impl(g, m, rowvar=True, bias=False, ddof=None, mt=None):
        xc = _rows_centered(m, rowvar)
        d = (0 if bias else 1) if ddof is None else ddof
        dx = (g + g.T) @ xc / (xc.shape[1] - d)
        return dx if rowvar else np.ascontiguousarray(dx.T)

    return impl


@numba_of(cov_jvp)
def _cov_jvp(t, m, rowvar=True, bias=False, ddof=None, shape=None):
    if not (_array(t) and t.ndim == 2 and _array(m) and m.ndim == 2):
        return None

    def impl(t, m, rowvar=True, bias=False, ddof=None, shape=None):
        xc = _rows_centered(m, rowvar)
        tc = _rows_centered(t, rowvar)
        d = (0 if bias else 1) if ddof is None else ddof
        dc = tc @ xc.T
        return (dc + dc.T) / (xc.shape[1] - d)

    return impl


_COV_ONLY = {"y": (None,), "fweights": (None,), "aweights": (None,), "dtype": (None,)}
defvjp(
    np.cov,
    "m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None",
    literal=_COV_ONLY,
    m="cov_vjp(g, m, rowvar, bias, ddof)",
    jvp=explicit(m="cov_jvp(t, m, rowvar, bias, ddof, np.shape(ans))"),
)


@helper
def _correlation(m, rowvar):
    """(the covariance of np.cov(m, rowvar=rowvar) as (p, p), 1 / its deviations)."""
    x = _variables(m, rowvar)
    xc = x - np.mean(x, axis=-1, keepdims=True)
    c = xc @ xc.T / (np.shape(x)[-1] - 1)
    return c, 1.0 / np.sqrt(np.diag(c))


@helper(batch_safe=True)
def corrcoef_vjp(g, x, ans, rowvar=True):
    """The cotangent of R = np.corrcoef(x, rowvar=rowvar), R = C_ij / (s_i s_j) with s the
    deviations: through C, G / (s s^T) less, on the diagonal, (G R + (G R)^T) summed / (2 C_ii)."""
    c, inv = _correlation(x, rowvar)
    p = np.shape(c)[0]
    lead = np.shape(g)[: np.ndim(g) - np.ndim(ans)]
    gm = np.reshape(g, lead + (p, p))
    gr = gm * np.reshape(ans, (p, p))
    diag = -(np.sum(gr, axis=-1) + np.sum(gr, axis=-2)) * inv**2 / 2
    gc = gm * np.outer(inv, inv) + diag[..., None] * np.eye(p)
    return cov_vjp(gc, x, rowvar, False, 1)


@helper(batch_safe=True)
def corrcoef_jvp(t, x, ans, rowvar=True):
    """The tangent of R = np.corrcoef(x, rowvar=rowvar) along `t` (leading axes a batch)."""
    c, inv = _correlation(x, rowvar)
    p = np.shape(c)[0]
    dc = cov_jvp(t, x, rowvar, False, 1)
    rel = np.diagonal(dc, axis1=-2, axis2=-1) * inv**2 / 2
    r = np.reshape(ans, (p, p))
    dr = dc * np.outer(inv, inv) - r * (rel[..., :, None] + rel[..., None, :])
    return np.reshape(dr, np.shape(dr)[:-2] + np.shape(ans))


@numba_of(corrcoef_vjp)
def _corrcoef_vjp(g, x, ans, rowvar=True):
    if not (_array(g) and g.ndim == 2 and _array(x) and x.ndim == 2):
        return None

    def impl(g, x, ans, rowvar=True):
        xc = _rows_centered(x, rowvar)
        inv = 1.0 / np.sqrt(np.sum(xc * xc, axis=1) / (xc.shape[1] - 1))
        gr = g * ans
        diag = -(np.sum(gr, axis=1) + np.sum(gr, axis=0)) * inv**2 / 2
        gc = g * np.outer(inv, inv) + np.diag(diag)
        return cov_vjp(gc, x, rowvar, False, 1)

    return impl


@numba_of(corrcoef_jvp)
def _corrcoef_jvp(t, x, ans, rowvar=True):
    if not (_array(t) and t.ndim == 2 and _array(x) and x.ndim == 2):
        return None

    def impl(t, x, ans, rowvar=True):
        xc = _rows_centered(x, rowvar)
        inv = 1.0 / np.sqrt(np.sum(xc * xc, axis=1) / (xc.shape[1] - 1))
        dc = cov_jvp(t, x, rowvar, False, 1)
        rel = np.diag(dc) * inv**2 / 2
        p = rel.size
        return dc * np.outer(inv, inv) - ans * (rel.reshape((p, 1)) + rel.reshape((1, p)))

    return impl


defvjp(
    np.corrcoef,
    "x, y=None, rowvar=True, bias=None, ddof=None, *, dtype=None",
    literal={"y": (None,), "bias": (None,), "ddof": (None,), "dtype": (None,)},
    x="corrcoef_vjp(g, x, ans, rowvar)",
    jvp=explicit(x="corrcoef_jvp(t, x, ans, rowvar)"),
)

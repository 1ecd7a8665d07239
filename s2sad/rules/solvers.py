"""Matrix functions: inv, solve, det, slogdet and norm, each op's entry below the helpers its
templates call (NumPy, batched and Numba forms side by side, as rules/helpers.py says), with the
tangents of those helpers for Hessians (`*_jvp`: the tangent `t` of one primal argument first).
"""

import typing

import numpy as np

from .common import _absent, _array, _integer, _lift, batched_expand_reduced, batched_unbroadcast
from .common import expand_reduced, unbroadcast
from .helpers import batched_helper, batched_of, helper, numba_of
from .matrix_products import _mm
from .products import _mT, _outer
from .reductions import extremum_vjp
from .registry import defvjp, explicit, reduction

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types
    from numba.np.numpy_support import as_dtype

# ----------------------------------------------------------------------------- inv


@helper(
    batch_safe=True,
    jvp=explicit(g="inv_vjp(t, ans)", ans="inv_vjp_jvp(t, g, ans)"),
)
def inv_vjp(g, ans):
    return -_mT(ans) @ g @ _mT(ans)


@numba_of(inv_vjp)
def _inv_vjp(g, ans):
    return lambda g, ans: -_mm(_mm(ans.T, g), ans.T)


@helper
def inv_vjp_jvp(t, g, ans):
    """The tangent of inv_vjp(g, ans) = -ans^T g ans^T along `t` for ans."""
    return -(_mT(t) @ g @ _mT(ans) + _mT(ans) @ g @ _mT(t))


defvjp(np.linalg.inv, "a", a="inv_vjp(g, ans)", jvp=explicit(a="-ans @ t @ ans"))

# ----------------------------------------------------------------------------- solve


def _solve(a, b):
    return np.linalg.solve(a, b)


@numba_of(_solve)
def _solve_impl(a, b):
    if a.dtype == b.dtype:
        return lambda a, b: np.linalg.solve(np.ascontiguousarray(a), b)
    common = np.promote_types(as_dtype(a.dtype), as_dtype(b.dtype))
    return lambda a, b: np.linalg.solve(a.astype(common), b.astype(common))


@helper(nondiff=True)
def solve_reads_vectors(a, b) -> bool:
    """Whether np.linalg.solve(a, b) takes b as (a stack of) vectors rather than matrices:
    NumPy 2 does only for a 1-D b, NumPy 1 whenever b has one axis fewer than a."""
    if int(np.__version__.split(".")[0]) >= 2:
        return np.ndim(b) == 1
    return np.ndim(b) == np.ndim(a) - 1


@helper
def solve_columns(a, rhs, b):
    """np.linalg.solve(a, rhs) with rhs read the way the forward call read b; the vector case
    goes through explicit columns, so a stack of vectors is never taken for a matrix."""
    if solve_reads_vectors(a, b):
        return np.linalg.solve(a, rhs[..., None])[..., 0]
    return np.linalg.solve(a, rhs)


@helper
def solve_vjp_b_unreduced(g, a, b):
    """The cotangent of b before summing over the axes that broadcasting added to it."""
    return solve_columns(_mT(a), g, b)


@helper(
    jvp=explicit(
        g="solve_vjp_b(t, a, b)",
        a="solve_vjp_b_jvp(t, g, a, b)",
        batched={"g": "batched_solve_vjp_b(t, a, b)", "a": "batched_solve_vjp_b_jvp(t, g, a, b)"},
    )
)
def solve_vjp_b(g, a, b):
    return unbroadcast(solve_vjp_b_unreduced(g, a, b), b)


@batched_of(solve_vjp_b)
def batched_solve_vjp_b(g, a, b):
    # np.linalg.solve broadcasts over the batch axis
    return batched_unbroadcast(solve_vjp_b_unreduced(g, a, b), b)


@numba_of(solve_vjp_b)
def _solve_vjp_b(g, a, b):
    return lambda g, a, b: _solve(a.T, g)


@helper(
    jvp=explicit(
        g="solve_vjp_a(t, a, b, ans)",
        a="solve_vjp_a_jvp(t, g, a, b, ans)",
        ans="solve_outer(solve_vjp_b_unreduced(g, a, b), t, a, b)",
        batched={
            "g": "batched_solve_vjp_a(t, a, b, ans)",
            "a": "batched_solve_vjp_a_jvp(t, g, a, b, ans)",
            "ans": "batched_solve_outer(solve_vjp_b_unreduced(g, a, b), t, a, b)",
        },
    )
)
def solve_vjp_a(g, a, b, ans):
    gb = solve_vjp_b_unreduced(g, a, b)
    if solve_reads_vectors(a, b):
        return unbroadcast(-gb[..., :, None] * ans[..., None, :], a)
    return unbroadcast(-gb @ _mT(ans), a)


@batched_of(solve_vjp_a)
def batched_solve_vjp_a(g, a, b, ans):
    gb = solve_vjp_b_unreduced(g, a, b)
    if solve_reads_vectors(a, b):
        return batched_unbroadcast(-gb[..., :, None] * ans[..., None, :], a)
    return batched_unbroadcast(-gb @ _mT(ans), a)


@numba_of(solve_vjp_a)
def _solve_vjp_a(g, a, b, ans):
    if _array(b) and b.ndim == 1:
        return lambda g, a, b, ans: -_outer(solve_vjp_b(g, a, b), ans)
    return lambda g, a, b, ans: -_mm(solve_vjp_b(g, a, b), ans.T)


@helper
def solve_jvp_a(t, a, b, ans):
    """The tangent of solve(a, b) along t for a: -solve(a, t ans), also for a batched t."""
    if solve_reads_vectors(a, b):
        return -solve_columns(a, (t @ ans[..., None])[..., 0], b)
    return -np.linalg.solve(a, t @ ans)


@numba_of(solve_jvp_a)
def _solve_jvp_a(t, a, b, ans):
    return lambda t, a, b, ans: -_solve(a, _mm(t, ans))


@batched_helper
def batched_solve_jvp_a(t, a, b, ans):
    """The tangent of solve(a, b) along a batched t for a, which may broadcast over fewer
    matrices than the result has."""
    matrices = np.ndim(ans) - (1 if solve_reads_vectors(a, b) else 2)
    return solve_jvp_a(_lift(t, matrices + 2), a, b, ans)


@batched_helper
def batched_solve_jvp_b(t, a, b, ans):
    return solve_columns(a, _lift(t, np.ndim(ans)), b)


@helper
def solve_vjp_b_jvp(t, g, a, b):
    """The tangent of solve_vjp_b(g, a, b) = solve(a^T, g) along `t` for a."""
    gb = solve_vjp_b_unreduced(g, a, b)
    return unbroadcast(solve_jvp_a(_mT(t), _mT(a), b, gb), b)


@batched_helper
def batched_solve_vjp_b_jvp(t, g, a, b):
    gb = solve_vjp_b_unreduced(g, a, b)
    return batched_unbroadcast(batched_solve_jvp_a(_mT(t), _mT(a), b, gb), b)


@helper
def solve_outer(gb, ans, a, b):
    """-gb ans^T (the cotangent of a in solve(a, b)), summed to a's shape."""
    if solve_reads_vectors(a, b):
        return unbroadcast(-gb[..., :, None] * ans[..., None, :], a)
    return unbroadcast(-gb @ _mT(ans), a)


@batched_helper
def batched_solve_outer(gb, ans, a, b):
    """solve_outer with the batch on gb or on ans."""
    if solve_reads_vectors(a, b):
        return batched_unbroadcast(-gb[..., :, None] * ans[..., None, :], a)
    return batched_unbroadcast(-gb @ _mT(ans), a)


@helper
def solve_vjp_a_jvp(t, g, a, b, ans):
    """The tangent of solve_vjp_a(g, a, b, ans) along `t` for a (through solve(a^T, g))."""
    gb = solve_vjp_b_unreduced(g, a, b)
    return solve_outer(solve_jvp_a(_mT(t), _mT(a), b, gb), ans, a, b)


@batched_helper
def batched_solve_vjp_a_jvp(t, g, a, b, ans):
    gb = solve_vjp_b_unreduced(g, a, b)
    return batched_solve_outer(batched_solve_jvp_a(_mT(t), _mT(a), b, gb), ans, a, b)


defvjp(
    np.linalg.solve,
    "a, b",
    a="solve_vjp_a(g, a, b, ans)",
    b="solve_vjp_b(g, a, b)",
    jvp=explicit(
        a="solve_jvp_a(t, a, b, ans)",
        b="np.linalg.solve(a, t)",
        batched={
            "a": "batched_solve_jvp_a(t, a, b, ans)",
            "b": "batched_solve_jvp_b(t, a, b, ans)",
        },
    ),
)

# ----------------------------------------------------------------------------- det


@helper(
    batch_safe=True,
    jvp=explicit(g="det_vjp(t, a, ans)", a="det_vjp_jvp(t, g, a, ans)", ans="det_vjp(g, a, t)"),
)
def det_vjp(g, a, ans):
    scale = np.asarray(g * ans)[..., None, None]
    return scale * _mT(np.linalg.inv(a))


@numba_of(det_vjp)
def _det_vjp(g, a, ans):
    return lambda g, a, ans: (g * ans) * np.linalg.inv(np.ascontiguousarray(a)).T


@helper
def det_vjp_jvp(t, g, a, ans):
    """The tangent of det_vjp(g, a, ans) along `t` for a: d(inv(a)^T) = -(inv(a) t inv(a))^T."""
    ia = np.linalg.inv(a)
    return -np.asarray(g * ans)[..., None, None] * _mT(ia @ t @ ia)


defvjp(
    np.linalg.det,
    "a",
    a="det_vjp(g, a, ans)",
    jvp=explicit(a="ans * np.trace(np.linalg.solve(a, t), axis1=-2, axis2=-1)"),
)

# ----------------------------------------------------------------------------- slogdet


@helper(nondiff=True)
def pair_leading(g, a):
    """How many batch axes lead the cotangent or tangent `g` of np.linalg.slogdet(a)'s pair."""
    return np.ndim(g) - (np.ndim(a) - 2) - 1


@helper(nondiff=True)
def logabsdet_part(g, a):
    """logabsdet's part of the cotangent `g` of np.linalg.slogdet(a)'s pair (see slogdet_vjp)."""
    if isinstance(g, tuple):
        return g[1] if len(g) > 1 and g[1] is not None else np.zeros(np.shape(a)[:-2])
    return g[(slice(None),) * pair_leading(g, a) + (1,)]


@helper(batch_safe=True, jvp=explicit(g="slogdet_vjp(t, a)", a="slogdet_vjp_jvp(t, g, a)"))
def slogdet_vjp(g, a):
    """Cotangent of `a` in (sign, logabsdet) = np.linalg.slogdet(a). The pair's cotangent
    arrives as a tuple of the parts (None for one none reached), or in batched mode as one
    array, the two stacked on the axis after any batch axes (the two have one shape, so s2sad's
    getitem_vjp reads the pair as one array); the sign has no derivative, so only logabsdet's
    counts: it times inv(a)^T."""
    logabsdet = logabsdet_part(g, a)
    return np.asarray(logabsdet)[..., None, None] * _mT(np.linalg.inv(a))


@helper
def slogdet_vjp_jvp(t, g, a):
    """The tangent of slogdet_vjp(g, a) along `t` for a: -g (inv(a) t inv(a))^T."""
    logabsdet = logabsdet_part(g, a)
    inv = np.linalg.inv(a)
    return -np.asarray(logabsdet)[..., None, None] * _mT(inv @ t @ inv)


@helper(batch_safe=True)
def slogdet_jvp(t, a):
    """The tangent of np.linalg.slogdet(a)'s pair along `t`, as one array (see slogdet_vjp):
    zero for the sign, trace(solve(a, t)) for logabsdet."""
    logabsdet = np.trace(np.linalg.solve(a, t), axis1=-2, axis2=-1)
    axis = np.ndim(logabsdet) - (np.ndim(a) - 2)
    return np.stack([np.zeros_like(logabsdet), logabsdet], axis=axis)


defvjp(np.linalg.slogdet, "a", a="slogdet_vjp(g, a)", jvp=explicit(a="slogdet_jvp(t, a)"))

# ----------------------------------------------------------------------------- norm

_NORM = "ord=ord, axis=axis, keepdims=keepdims"


@helper(
    jvp=explicit(
        g=f"norm_vjp(t, x, ans, {_NORM})",
        x=f"norm_vjp_jvp_x(t, g, x, ans, {_NORM})",
        ans=f"norm_vjp_jvp_ans(t, g, x, ans, {_NORM})",
        batched={
            "g": f"batched_norm_vjp(t, x, ans, {_NORM})",
            "ans": f"batched_norm_vjp_jvp_ans(t, g, x, ans, {_NORM})",
        },
    ),
    shaped_like="x",
)
def norm_vjp(g, x, ans, ord=None, axis=None, keepdims=False):
    """np.linalg.norm: vector norms along an axis, matrix norms over two axes."""
    x = np.asarray(x)
    if isinstance(axis, (tuple, list)) and len(axis) == 2:
        return _matrix_norm_vjp(g, x, ans, ord, tuple(a % x.ndim for a in axis), keepdims)
    if axis is None and x.ndim == 2 and ord is not None:
        return _matrix_norm_vjp(g, x, ans, ord, (0, 1), keepdims)
    if isinstance(axis, (tuple, list)):
        axis = axis[0]
    gx = expand_reduced(g, x, axis, keepdims)
    if ord is None or ord == 2:
        return gx * x / expand_reduced(ans, x, axis, keepdims)
    if ord == 1:
        return gx * np.sign(x)
    if ord in (np.inf, -np.inf):
        return extremum_vjp(g, np.abs(x), ans, axis, keepdims) * np.sign(x)
    if ord == 0:
        return np.zeros_like(gx * x)
    scale = expand_reduced(ans, x, axis, keepdims) ** (ord - 1)
    return gx * np.sign(x) * np.abs(x) ** (ord - 1) / scale


@helper
def _matrix_norm_vjp(g, x, ans, ord, axes, keepdims):
    if keepdims:
        g, ans = np.squeeze(g, axis=axes), np.squeeze(ans, axis=axes)
    xm = np.moveaxis(x, axes, (-2, -1))
    gm = np.asarray(g)[..., None, None]
    if ord in (None, "fro"):
        res = gm * xm / np.asarray(ans)[..., None, None]
    elif ord in ("nuc", 2, -2):
        u, _, vt = np.linalg.svd(xm, full_matrices=False)
        if ord == "nuc":
            res = gm * (u @ vt)
        else:
            k = 0 if ord == 2 else -1
            res = gm * (u[..., :, k, None] * vt[..., k, None, :])
    elif ord in (1, -1, np.inf, -np.inf):
        along = -2 if ord in (1, -1) else -1  # 1: column sums, inf: row sums
        sums = np.sum(np.abs(xm), axis=along)
        best = (
            np.max(sums, axis=-1, keepdims=True)
            if ord > 0
            else np.min(sums, axis=-1, keepdims=True)
        )
        hit = sums == best
        share = np.expand_dims(hit / np.sum(hit, axis=-1, keepdims=True), along)
        res = gm * np.sign(xm) * share
    else:
        raise ValueError(f"s2sad has no derivative for np.linalg.norm with ord={ord!r}")
    return np.moveaxis(res, (-2, -1), axes)


@batched_of(norm_vjp)
def batched_norm_vjp(g, x, ans, ord=None, axis=None, keepdims=False):
    weights = norm_vjp(np.ones(np.shape(ans)), x, ans, ord, axis, keepdims)
    return batched_expand_reduced(g, x, axis, keepdims) * weights


@numba_of(norm_vjp)
def _norm_vjp(g, x, ans, ord=None, axis=None, keepdims=False):
    if _array(x) and _integer(axis) and _absent(ord):  # 2-norms of the vectors along an axis

        def along(g, x, ans, ord=None, axis=None, keepdims=False):
            gx = expand_reduced(g, x, axis, keepdims)
            return gx * x / expand_reduced(ans, x, axis, keepdims)

        return along
    if not _array(x) or not _absent(axis):
        return None
    if _absent(ord):  # the 2-norm of a vector, the Frobenius norm of a matrix
        return lambda g, x, ans, ord=None, axis=None, keepdims=False: g * x / ans
    if not isinstance(ord, (types.Number, types.IntegerLiteral)):
        return None
    if x.ndim == 1:

        def vector(g, x, ans, ord=None, axis=None, keepdims=False):
            if ord == 2:
                return g * x / ans
            if ord == 1:
                return g * np.sign(x)
            if ord == np.inf or ord == -np.inf:
                hit = np.abs(x) == ans
                return g * hit * np.sign(x) / np.sum(hit)
            if ord == 0:
                return np.zeros(x.shape)
            return g * np.sign(x) * np.abs(x) ** (ord - 1) / ans ** (ord - 1)

        return vector
    if x.ndim == 2:

        def matrix(g, x, ans, ord=None, axis=None, keepdims=False):
            if ord == 2 or ord == -2:
                u, s, vt = np.linalg.svd(np.ascontiguousarray(x), full_matrices=False)
                k = 0 if ord == 2 else s.size - 1
                return g * _outer(u[:, k], vt[k, :])
            if ord == 1 or ord == -1:  # the largest (smallest) column sum of |x|
                sums = np.sum(np.abs(x), axis=0)
                best = np.max(sums) if ord > 0 else np.min(sums)
                hit = sums == best
                share = hit / np.sum(hit)
                return g * np.sign(x) * share.reshape((1, share.size))
            if ord == np.inf or ord == -np.inf:  # the largest (smallest) row sum of |x|
                sums = np.sum(np.abs(x), axis=1)
                best = np.max(sums) if ord > 0 else np.min(sums)
                hit = sums == best
                share = hit / np.sum(hit)
                return g * np.sign(x) * share.reshape((share.size, 1))
            raise ValueError("s2sad has no derivative for this matrix norm order")

        return matrix
    return None


@helper
def _norm_kind(x, ord, axis):
    """How np.linalg.norm reduced: ("vector", axis, p) with the axes to reduce (a tuple for the
    Frobenius norm), or refused where its second derivative is not one s2sad has."""
    ndim = np.ndim(x)
    matrix = isinstance(axis, (tuple, list)) and len(axis) == 2
    if axis is None and ndim == 2 and ord is not None:
        matrix, axis = True, (0, 1)
    if matrix:
        if ord in (None, "fro"):
            return tuple(axis), 2
        raise ValueError(
            f"s2sad has no second derivative of np.linalg.norm with the matrix ord={ord!r} "
            "(only the Frobenius norm); write the norm out from np.sum and np.sqrt"
        )
    if isinstance(axis, (tuple, list)):
        axis = axis[0]
    return axis, (2 if ord is None else ord)


@helper
def _norm_weight(x, ans, p, axis, keepdims, expand):
    """d norm / dx, the weights norm_vjp gives a cotangent of ones (where it is smooth)."""
    ae = expand(ans, x, axis, keepdims)
    if p == 2:
        return x / ae
    if p in (1, 0, np.inf, -np.inf):
        return None  # piecewise linear or constant: no curvature
    return np.sign(x) * np.abs(x) ** (p - 1) / ae ** (p - 1)


@helper
def norm_vjp_jvp_x(t, g, x, ans, ord=None, axis=None, keepdims=False):
    """The tangent of norm_vjp(g, x, ans, ...) along `t` for x (ans held)."""
    axis, p = _norm_kind(x, ord, axis)
    gx = expand_reduced(g, x, axis, keepdims)
    if p in (1, 0, np.inf, -np.inf):
        return np.zeros_like(gx * t)
    ae = expand_reduced(ans, x, axis, keepdims)
    if p == 2:
        return gx * t / ae
    return gx * (p - 1) * np.abs(x) ** (p - 2) * t / ae ** (p - 1)


@helper
def norm_vjp_jvp_ans(t, g, x, ans, ord=None, axis=None, keepdims=False):
    """The tangent of norm_vjp(g, x, ans, ...) along `t` for ans (x held)."""
    axis, p = _norm_kind(x, ord, axis)
    gx = expand_reduced(g, x, axis, keepdims)
    te = expand_reduced(t, x, axis, keepdims)
    if p in (1, 0, np.inf, -np.inf):
        return np.zeros_like(gx * te)
    ae = expand_reduced(ans, x, axis, keepdims)
    return -(p - 1) * gx * np.sign(x) * np.abs(x) ** (p - 1) * te / ae**p


@batched_helper
def batched_norm_vjp_jvp_ans(t, g, x, ans, ord=None, axis=None, keepdims=False):
    axis, p = _norm_kind(x, ord, axis)
    te = batched_expand_reduced(t, x, axis, keepdims)
    if p in (1, 0, np.inf, -np.inf):
        return np.zeros(np.shape(te), dtype=np.result_type(te, np.float32))
    ae = expand_reduced(ans, x, axis, keepdims)
    gx = expand_reduced(g, x, axis, keepdims)
    return -(p - 1) * gx * np.sign(x) * np.abs(x) ** (p - 1) * te / ae**p


defvjp(
    np.linalg.norm,
    "x, ord=None, axis=None, keepdims=False",
    x="norm_vjp(g, x, ans, ord=ord, axis=axis, keepdims=keepdims)",
    jvp=reduction("x"),
)

"""Second derivatives through the decompositions' vectors and through lstsq: the tangent rules
of the VJP helpers of np.linalg.eigh (values and vectors), np.linalg.svd (its vectors),
np.linalg.qr (its Q) and np.linalg.lstsq, which forward mode applies to the gradient code s2sad
writes (Hessians, jvp of grad). Each is the product rule through the helper's own formula, with
the tangents of the factors the op's tangent rule gives (eigh_jvp, svd_tangents, qr_r_jvp); the
helpers live in rules/decompositions.py and rules/matrix_functions.py, whose size keeps these
here, declared on them below. Every one works with a tangent that has a leading batch axis (the
Hessian's single sweep): the factors are plain, their tangents broadcast over it. Where the
vectors' derivative is undefined (repeated or vanishing eigen/singular values, a
rank-deficient matrix) the helpers raise the first derivative's clear error.
"""

import numpy as np

from .decompositions import (
    eigen_gaps,
    eigh_vjp,
    pair_parts,
    parts_of,
    qr_r_jvp,
    qr_r_vjp_jvp,
    qr_vjp,
    singular_gaps,
    singular_values_vjp_jvp,
    svd_tangents,
    svd_vjp,
    tall_full_rank_qr,
    thin_part,
    triangle_cotangent,
    tuple_part,
)
from .helpers import helper
from .matrix_functions import lstsq_parts, lstsq_vjp
from .products import _mT
from .registry import declare_tangent, explicit


@helper
def _gap_tangent(f, s, ds, squared=False):
    """The tangent of F_ij = 1 / (s_j - s_i) (of s_j^2 - s_i^2 where `squared`) along ds."""
    d = 2 * s * ds if squared else ds
    return -(f**2) * (np.expand_dims(d, -2) - np.expand_dims(d, -1))


@helper
def tuple_rows(t):
    """The tangent of a tuple result's cotangent in the parts' form the VJP helpers read: forward
    mode's batched tangent of it is one row per batch element (an array of objects, a row of
    parts each), which becomes one array of objects whose parts have the batch axis first (0
    where no row has one). A tuple of the parts' tangents (`(dw_dot, dv_dot)`, what forward mode
    passes for a tuple unpacked where it was made) is already that form."""
    if isinstance(t, tuple) or np.asarray(t).dtype != object or np.ndim(t) != 2:
        return t
    parts = []
    for column in np.transpose(t):
        present = [p for p in column if not (np.isscalar(p) and p == 0)]
        if not present:
            parts.append(0)
            continue
        zero = np.zeros(np.shape(present[0]))
        parts.append(np.stack([zero if np.isscalar(p) and p == 0 else p for p in column]))
    return parts_of(*parts)


# ----------------------------------------------------------------------------- eigh


@helper
def eigh_vjp_jvp(t, g, ans, UPLO="L"):
    """The tangent of eigh_vjp(g, ans, UPLO) = V (diag(gw) + F o (V^T gv)) V^T (on the read
    triangle) along `t`, the tangent of the pair ans = (w, V); g held."""
    w, v = ans
    dw, dv = t[0], t[1]
    gw, gv = tuple_part(g, 0), tuple_part(g, 1)
    inner = np.zeros(np.shape(v))
    if gw is not None:
        inner = inner + np.expand_dims(gw, -1) * np.eye(np.shape(w)[-1])
    dm = dv @ inner @ _mT(v) + v @ inner @ _mT(dv)
    if gv is not None:  # (with the eigenvalues' cotangent alone, only V moves)
        f = eigen_gaps(w, "the second derivative of np.linalg.eigh's eigenvectors")
        p = _mT(v) @ gv
        dinner = _gap_tangent(f, w, dw) * p + f * (_mT(dv) @ gv)
        dm = dm + dv @ (f * p) @ _mT(v) + v @ dinner @ _mT(v) + v @ (f * p) @ _mT(dv)
    return triangle_cotangent(dm, UPLO in ("L", "l"))


declare_tangent(
    eigh_vjp,
    explicit(g="eigh_vjp(tuple_rows(t), ans, UPLO)", ans="eigh_vjp_jvp(t, g, ans, UPLO)"),
)

# ----------------------------------------------------------------------------- svd


@helper
def svd_vectors_vjp_jvp(t, g, a, full_matrices=True):
    """The tangent of svd_vjp(g, a, full_matrices) (compute_uv=True: g the cotangent of
    (u, s, vt)) along `t` for a, g held: the product rule through Townsend 2016's formula."""
    gu, gs, gvt = tuple_part(g, 0), tuple_part(g, 1), tuple_part(g, 2)
    what = "the second derivative of np.linalg.svd's singular vectors"
    u, s, vt, du, ds, dv = svd_tangents(t, a, what)
    k = np.shape(s)[-1]
    gu, gvt = thin_part(gu, k, -1, what), thin_part(gvt, k, -2, what)
    out = 0.0 if gs is None else singular_values_vjp_jvp(t, gs, a)
    if gu is None and gvt is None:
        return out + np.zeros(np.shape(du)[:-2] + np.shape(a))
    f = singular_gaps(s, what)
    df = _gap_tangent(f, s, ds, squared=True)
    dvt = _mT(dv)
    row, col = np.expand_dims(s, -2), np.expand_dims(s, -1)
    drow, dcol = np.expand_dims(ds, -2), np.expand_dims(ds, -1)
    inner, dinner, drest = 0.0, 0.0, 0.0
    if gu is not None:
        x = _mT(u) @ gu
        dx = _mT(du) @ gu
        skew, dskew = x - _mT(x), dx - _mT(dx)
        inner = inner + f * skew * row
        dinner = dinner + (df * skew + f * dskew) * row + f * skew * drow
        left = gu - u @ x
        dleft = -(du @ x + u @ dx)
        drest = drest + (dleft / row - left * drow / row**2) @ vt + (left / row) @ dvt
    if gvt is not None:
        gv = _mT(gvt)
        y = vt @ gv
        dy = dvt @ gv
        skew, dskew = y - _mT(y), dy - _mT(dy)
        inner = inner + col * (f * skew)
        dinner = dinner + dcol * (f * skew) + col * (df * skew + f * dskew)
        z = _mT(gv) - _mT(y) @ vt
        dz = -(_mT(dy) @ vt + _mT(y) @ dvt)
        drest = drest + du @ (z / col) + u @ (dz / col - z * dcol / col**2)
    inner = inner + np.zeros(np.shape(f))
    return out + du @ inner @ vt + u @ dinner @ vt + u @ inner @ dvt + drest


@helper
def svd_vjp_jvp(t, g, a, full_matrices=True, compute_uv=True):
    """The tangent of svd_vjp(g, a, full_matrices, compute_uv) along `t` for a, g held."""
    if not compute_uv:
        return singular_values_vjp_jvp(t, g, a)
    return svd_vectors_vjp_jvp(t, g, a, full_matrices)


declare_tangent(
    svd_vjp,
    explicit(
        g="svd_vjp(tuple_rows(t), a, full_matrices, compute_uv)",
        a="svd_vjp_jvp(t, g, a, full_matrices, compute_uv)",
    ),
)

# ----------------------------------------------------------------------------- qr


@helper
def _copyltu(m):
    """tril(m) + tril(m, -1)^T."""
    return np.tril(m) + _mT(np.tril(m, -1))


@helper
def qr_vjp_jvp(t, g, a, ans, mode="reduced"):
    """The tangent of qr_vjp(g, a, ans, mode) along `t` for a, g held: with dR = qr_r_jvp(t, a),
    dQ = (t - Q dR) R^-1 and M = R Rb^T - Qb^T Q, the product rule through
    (Qb + Q copyltu(M)) R^-T."""
    if mode == "r":
        return qr_r_vjp_jvp(t, g, a)
    q, r = tall_full_rank_qr(a)
    n = np.shape(a)[-1]
    rinv = np.linalg.inv(r)
    dr = qr_r_jvp(t, a)
    dq = (t - q @ dr) @ rinv
    gq, gr = pair_parts(g, ans)
    gq = thin_part(gq, n, -1, "the second derivative of np.linalg.qr's Q")
    m, dm = 0.0, 0.0
    if gr is not None:
        grn = _mT(gr[..., :n, :])
        m, dm = r @ grn, dr @ grn
    if gq is not None:
        m, dm = m - _mT(gq) @ q, dm - _mT(gq) @ dq
    m = m + np.zeros(np.shape(r))
    inner = q @ _copyltu(m)
    dinner = dq @ _copyltu(m) + q @ _copyltu(dm)
    total = inner if gq is None else gq + inner
    rinv_t = _mT(rinv)
    return dinner @ rinv_t - total @ rinv_t @ _mT(dr) @ rinv_t


declare_tangent(
    qr_vjp,
    explicit(g="qr_vjp(tuple_rows(t), a, ans, mode)", a="qr_vjp_jvp(t, g, a, ans, mode)"),
)

# ----------------------------------------------------------------------------- lstsq


@helper
def lstsq_vjp_jvp(t, g, a, b, ans, which, wrt):
    """The tangent of lstsq_vjp(g, a, b, ans, which) along `t`, the tangent of a (wrt=0), of b
    (1) or of the tuple ans (2; only x = ans[0] enters), g held: the product rule through
    x's, the residuals' and the singular values' parts of the cotangent."""
    bm, xm, rm, c, vec = lstsq_parts(a, b, ans)
    part, rank = (t[0], np.ndim(ans[0])) if wrt == 2 else (t, 2 if wrt == 0 else np.ndim(b))
    lead = np.shape(part)[: np.ndim(part) - rank]  # a batch may lead t
    dc = dxm = None  # x is held but for wrt=2, inv(a^T a) but for wrt=0
    if wrt == 0:
        dc = -c @ (_mT(t) @ a + _mT(a) @ t) @ c
        drm = -t @ xm
    elif wrt == 1:
        drm = np.expand_dims(t, -1) if vec else t
    else:
        dxm = np.expand_dims(t[0], -1) if vec else t[0]
        drm = -a @ dxm
    gx, gres, gs = tuple_part(g, 0), tuple_part(g, 1), tuple_part(g, 3)
    dgb = dga = 0.0
    if gx is not None:
        gxm = np.expand_dims(gx, -1) if vec else gx
        z = c @ gxm
        dga = drm @ _mT(z)
        if wrt == 0:
            dz = dc @ gxm
            dgb = a @ dz + t @ z
            dga = dga - dgb @ _mT(xm) + rm @ _mT(dz)
        if dxm is not None:
            dga = dga - (a @ z) @ _mT(dxm)
    if gres is not None and np.size(ans[1]):
        weights = 2.0 * np.expand_dims(gres, -2)
        dgb = dgb + drm * weights
        dga = dga - (drm * weights) @ _mT(xm)
        if dxm is not None:
            dga = dga - (rm * weights) @ _mT(dxm)
    if which == 1:
        dgb = dgb + np.zeros(lead + np.shape(bm))
        return dgb[..., 0] if vec else dgb
    if gs is not None and wrt == 0:
        dga = dga + singular_values_vjp_jvp(t, gs, a)
    return dga + np.zeros(lead + np.shape(a))


declare_tangent(
    lstsq_vjp,
    explicit(
        g="lstsq_vjp(tuple_rows(t), a, b, ans, which)",
        a="lstsq_vjp_jvp(t, g, a, b, ans, which, 0)",
        b="lstsq_vjp_jvp(t, g, a, b, ans, which, 1)",
        ans="lstsq_vjp_jvp(t, g, a, b, ans, which, 2)",
    ),
)

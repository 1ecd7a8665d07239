"""Decompositions: cholesky, eigh, eigvalsh, the singular values (svd with compute_uv=False)
and qr's R (mode='r'), each op's entry below the helpers its templates call
(NumPy and Numba forms side by side, as rules/helpers.py says). Every helper works on stacks of
matrices (leading axes) and is right for a cotangent or tangent with a leading batch axis as it
is (`batch_safe`).

NumPy's cholesky, eigh and eigvalsh read one triangle of their argument (cholesky: the lower one,
or the upper with upper=True; eigh: UPLO's), so their derivative is with respect to the elements
of that triangle (the other triangle's derivative is zero), as central differences see it. The
adjoints follow Murray 2016 (cholesky) and Giles 2008 (eigenvalues, pinv); the singular values'
is u_i v_i^T (Townsend 2016). Where the derivative is undefined (a rank-deficient pinv, the
second derivative of eigenvalues that repeat) the helper raises a clear error at call time.
"""

import numpy as np

from .common import _array
from .helpers import batched_helper, helper, numba_jitable, numba_of
from .contractions import _cotangent, _filled, _given_as
from .products import _mT
from .registry import defvjp, explicit


@helper(batch_safe=True)
def triangle_cotangent(m, lower=True):
    """The cotangent of a matrix a function reads one triangle of (as a symmetric matrix), from
    `m`, its cotangent as that symmetric matrix: the read triangle gets m + m^T off the diagonal
    and m's own diagonal; the other triangle nothing. Stacks and a batch lead."""
    s = m + _mT(m)
    off = np.tril(s, -1) if lower else np.triu(s, 1)
    return off + m * np.eye(np.shape(m)[-1])


@numba_jitable
def _triangle_cotangent(m, lower):
    s = m + m.T
    off = np.tril(s, -1) if lower else np.triu(s, 1)
    return off + m * np.eye(m.shape[-1])


@helper(batch_safe=True)
def symmetric_read(t, lower=True):
    """The symmetric matrix a function that reads one triangle of `t` sees."""
    if lower:
        return np.tril(t) + _mT(np.tril(t, -1))
    return np.triu(t) + _mT(np.triu(t, 1))


# ----------------------------------------------------------------------------- cholesky


@helper
def _phi(x):
    """The lower triangle of x with its diagonal halved (Murray 2016's Phi)."""
    return np.tril(x) - 0.5 * x * np.eye(np.shape(x)[-1])


@helper(
    batch_safe=True,
    jvp=explicit(g="cholesky_vjp(t, ans, upper)", ans="cholesky_vjp_jvp(t, g, ans, upper)"),
)
def cholesky_vjp(g, ans, upper=False):
    """Cotangent of `a` in np.linalg.cholesky(a, upper=upper): with L the factor,
    M = L^-T Phi(L^T g) L^-1 on the triangle NumPy reads (Murray 2016)."""
    low, gl = (_mT(ans), _mT(g)) if upper else (ans, g)
    inv = np.linalg.inv(low)
    m = _mT(inv) @ _phi(_mT(low) @ gl) @ inv
    return triangle_cotangent(m, not upper)


@numba_of(cholesky_vjp)
def _cholesky_vjp(g, ans, upper=False):
    if not (_cotangent(g) and _array(ans)) or ans.ndim != 2 or not _given_as(upper, False):
        return None

    def impl(g, ans, upper=False):
        g = _filled(g, ans)
        inv = np.linalg.inv(np.ascontiguousarray(ans))
        x = ans.T @ g
        phi = np.tril(x) - 0.5 * x * np.eye(x.shape[0])
        return _triangle_cotangent(inv.T @ phi @ inv, True)

    return impl


@helper
def cholesky_vjp_jvp(t, g, ans, upper=False):
    """The tangent of cholesky_vjp(g, ans, upper) along `t` for ans (a batch may lead t)."""
    low, gl, dl = (_mT(ans), _mT(g), _mT(t)) if upper else (ans, g, t)
    inv = np.linalg.inv(low)
    dinv = -inv @ dl @ inv
    x = _phi(_mT(low) @ gl)
    dm = _mT(dinv) @ x @ inv + _mT(inv) @ _phi(_mT(dl) @ gl) @ inv + _mT(inv) @ x @ dinv
    return triangle_cotangent(dm, not upper)


@helper(batch_safe=True)
def cholesky_jvp(t, ans, upper=False):
    """The tangent of np.linalg.cholesky(a, upper=upper) along `t`: L Phi(L^-1 T L^-T), with T
    the symmetric matrix the read triangle of t makes."""
    low = _mT(ans) if upper else ans
    inv = np.linalg.inv(low)
    dl = low @ _phi(inv @ symmetric_read(t, not upper) @ _mT(inv))
    return _mT(dl) if upper else dl


@numba_jitable
def _lower_read(t):
    return np.tril(t) + np.tril(t, -1).T


@numba_of(cholesky_jvp)
def _cholesky_jvp(t, ans, upper=False):
    if not (_array(t) and _array(ans)) or t.ndim != 2 or not _given_as(upper, False):
        return None

    def impl(t, ans, upper=False):
        inv = np.linalg.inv(np.ascontiguousarray(ans))
        x = inv @ _lower_read(t) @ np.ascontiguousarray(inv.T)
        return ans @ (np.tril(x) - 0.5 * x * np.eye(x.shape[0]))

    return impl


defvjp(
    np.linalg.cholesky,
    "a, /, *, upper=False",
    a="cholesky_vjp(g, ans, upper=upper)",
    jvp=explicit(a="cholesky_jvp(t, ans, upper=upper)"),
)

# ----------------------------------------------------------------------------- eigvalsh


@helper(nondiff=True)
def distinct_eigenvalues(w, what, kind="eigenvalues"):
    """Refuse eigenvalues (or singular values: `kind`) that repeat, to rounding: `what` is
    undefined there."""
    w = np.asarray(w)
    gaps = np.abs(np.diff(np.sort(w, axis=-1), axis=-1))
    scale = np.max(np.abs(w), axis=-1, keepdims=True) if w.size else 1.0
    if np.any(gaps <= 64 * np.finfo(np.float64).eps * np.maximum(scale, 1e-300)):
        raise ValueError(
            f"{what} is undefined where {kind} repeat (their vectors are not unique there); "
            "s2sad refuses such a matrix rather than return inf"
        )


@helper(
    batch_safe=True,
    jvp=explicit(g="eigvalsh_vjp(t, a, UPLO)", a="eigvalsh_vjp_jvp(t, g, a, UPLO)"),
)
def eigvalsh_vjp(g, a, UPLO="L"):
    """Cotangent of `a` in np.linalg.eigvalsh(a, UPLO): V diag(g) V^T on the triangle NumPy
    reads. Where eigenvalues repeat this is the value for the eigenvectors LAPACK returned (the
    derivative is exact where g is equal across each repeated eigenvalue)."""
    _, v = np.linalg.eigh(a, UPLO)
    return triangle_cotangent((v * np.expand_dims(g, -2)) @ _mT(v), UPLO in ("L", "l"))


@numba_of(eigvalsh_vjp)
def _eigvalsh_vjp(g, a, UPLO="L"):
    if not (_cotangent(g) and _array(a)) or a.ndim != 2 or not _given_as(UPLO, "L"):
        return None

    def impl(g, a, UPLO="L"):
        g = _filled(g, a[0])
        _, v = np.linalg.eigh(np.ascontiguousarray(_lower_read(a)))
        return _triangle_cotangent((v * g.reshape((1, g.size))) @ v.T, True)

    return impl


@helper
def eigvalsh_vjp_jvp(t, g, a, UPLO="L"):
    """The tangent of eigvalsh_vjp(g, a, UPLO) along `t` for a: through the eigenvectors'
    tangent V (F o V^T T V), F_ij = 1 / (w_j - w_i); refused where eigenvalues repeat."""
    lower = UPLO in ("L", "l")
    w, v = np.linalg.eigh(a, UPLO)
    distinct_eigenvalues(w, "the second derivative of np.linalg.eigvalsh")
    diff = np.expand_dims(w, -2) - np.expand_dims(w, -1)  # w_j - w_i
    n = np.shape(w)[-1]
    f = np.where(np.eye(n, dtype=bool), 0.0, 1.0 / np.where(np.eye(n, dtype=bool), 1.0, diff))
    dv = v @ (f * (_mT(v) @ symmetric_read(t, lower) @ v))
    gd = np.expand_dims(g, -2)
    return triangle_cotangent((dv * gd) @ _mT(v) + (v * gd) @ _mT(dv), lower)


@helper(batch_safe=True)
def eigvalsh_jvp(t, a, UPLO="L"):
    """The tangent of np.linalg.eigvalsh(a, UPLO) along `t`: v_i^T T v_i."""
    _, v = np.linalg.eigh(a, UPLO)
    return np.einsum("...ji,...jk,...ki->...i", v, symmetric_read(t, UPLO in ("L", "l")), v)


@numba_of(eigvalsh_jvp)
def _eigvalsh_jvp(t, a, UPLO="L"):
    if not (_array(t) and _array(a)) or a.ndim != 2 or not _given_as(UPLO, "L"):
        return None

    def impl(t, a, UPLO="L"):
        _, v = np.linalg.eigh(np.ascontiguousarray(_lower_read(a)))
        return np.diag(np.ascontiguousarray(v.T) @ _lower_read(t) @ v)

    return impl


defvjp(
    np.linalg.eigvalsh,
    "a, UPLO='L'",
    inert=("UPLO",),
    a="eigvalsh_vjp(g, a, UPLO=UPLO)",
    jvp=explicit(a="eigvalsh_jvp(t, a, UPLO=UPLO)"),
)

# ----------------------------------------------------------------------------- eigh


@helper
def parts_of(*parts):
    """A tuple result's tangent or cotangent: an array of objects, so that `+` adds the parts
    one by one (a tuple's `+` would join them)."""
    out = np.empty(len(parts), dtype=object)
    for i, part in enumerate(parts):
        out[i] = part
    return out


@helper(nondiff=True)
def tuple_part(g, i):
    """Part i of a tuple result's cotangent (a tuple of parts, or an array of objects in batched
    mode), or None where no cotangent reached it."""
    if isinstance(g, tuple):
        return g[i] if i < len(g) else None
    part = g[i]
    return None if np.isscalar(part) and part == 0 else part


@helper(nondiff=True)
def eigen_gaps(w, what):
    """F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it; refused where eigenvalues repeat."""
    distinct_eigenvalues(w, what)
    diff = np.expand_dims(w, -2) - np.expand_dims(w, -1)
    eye = np.eye(np.shape(w)[-1], dtype=bool)
    return np.where(eye, 0.0, 1.0 / np.where(eye, 1.0, diff))


@helper(batch_safe=True)  # its tangent rule: rules/decomposition_tangents.py
def eigh_vjp(g, ans, UPLO="L"):
    """Cotangent of `a` in (w, v) = np.linalg.eigh(a, UPLO) (Giles 2008): from the pair's
    cotangent (`tuple_part`'s; leading batch axes on each part),
    V (diag(gw) + F o (V^T gv)) V^T on the triangle NumPy reads. The eigenvectors' part is
    refused where eigenvalues repeat."""
    w, v = ans
    gw, gv = tuple_part(g, 0), tuple_part(g, 1)
    inner = 0.0
    if gw is not None:
        inner = np.expand_dims(gw, -1) * np.eye(np.shape(w)[-1])
    if gv is not None:
        f = eigen_gaps(w, "the derivative of np.linalg.eigh's eigenvectors")
        inner = inner + f * (_mT(v) @ gv)
    return triangle_cotangent(v @ inner @ _mT(v), UPLO in ("L", "l"))


@helper
def eigh_jvp(t, a, ans, UPLO="L"):
    """The tangent of np.linalg.eigh(a, UPLO)'s pair along `t`: diag(P) and V (F o P), with
    P = V^T T V; refused where eigenvalues repeat (use eigvalsh for the eigenvalues alone)."""
    w, v = ans
    p = _mT(v) @ symmetric_read(t, UPLO in ("L", "l")) @ v
    f = eigen_gaps(w, "the tangent of np.linalg.eigh's eigenvectors")
    return parts_of(np.einsum("...ii->...i", p), v @ (f * p))


class _Rows(tuple):
    """A tuple result's batched tangent: the parts, each with the batch axis first; `t[:, i]`
    (forward mode's row-wise read of element i) is part i, and `+` adds part by part."""

    def __getitem__(self, index):
        if isinstance(index, tuple) and len(index) == 2 and index[0] == slice(None):
            index = index[1]
        return tuple.__getitem__(self, index)

    def __add__(self, other):
        return _Rows(x + y for x, y in zip(self, other))

    __radd__ = __add__


@batched_helper
def batched_eigh_jvp(t, a, ans, UPLO="L"):
    return _Rows(eigh_jvp(t, a, ans, UPLO))


defvjp(
    np.linalg.eigh,
    "a, UPLO='L'",
    inert=("UPLO",),
    a="eigh_vjp(g, ans, UPLO=UPLO)",
    jvp=explicit(
        a="eigh_jvp(t, a, ans, UPLO=UPLO)", batched={"a": "batched_eigh_jvp(t, a, ans, UPLO=UPLO)"}
    ),
)

# ----------------------------------------------------------------------------- singular values


@helper(
    batch_safe=True,
    jvp=explicit(g="singular_values_vjp(t, a)", a="singular_values_vjp_jvp(t, g, a)"),
)
def singular_values_vjp(g, a):
    """Cotangent of `a` in np.linalg.svd(a, compute_uv=False): U diag(g) V^T over the min(m, n)
    singular vectors (Townsend 2016). Where singular values repeat or vanish the derivative is
    undefined; this is the value for the vectors LAPACK returned (a subgradient at zero)."""
    u, _, vt = np.linalg.svd(a, full_matrices=False)
    return (u * np.expand_dims(g, -2)) @ vt


@helper(nondiff=True)
def singular_gaps(s, what):
    """F_ij = 1 / (s_j^2 - s_i^2) off the diagonal, 0 on it; refused where singular values
    repeat or vanish (the singular vectors' derivative is undefined there)."""
    distinct_eigenvalues(s**2, what, "singular values")
    if np.any(s <= np.finfo(np.float64).eps * np.max(s, initial=0.0) * 8):
        raise ValueError(f"{what} is undefined where a singular value vanishes")
    diff = np.expand_dims(s, -2) ** 2 - np.expand_dims(s, -1) ** 2
    eye = np.eye(np.shape(s)[-1], dtype=bool)
    return np.where(eye, 0.0, 1.0 / np.where(eye, 1.0, diff))


@helper
def svd_tangents(t, a, what):
    """The thin SVD of `a` and its tangents along `t` (Townsend 2016): u, s, vt, du, ds, dv."""
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    f = singular_gaps(s, what)
    v, row, col = _mT(vt), np.expand_dims(s, -2), np.expand_dims(s, -1)
    dp = _mT(u) @ t @ v
    du = u @ (f * (dp * row + col * _mT(dp))) + (t @ v - u @ dp) / row
    dv = v @ (f * (col * dp + _mT(dp) * row)) + (_mT(t) @ u - v @ _mT(dp)) / row
    return u, s, vt, du, np.einsum("...ii->...i", dp), dv


@helper
def singular_values_vjp_jvp(t, g, a):
    """The tangent of singular_values_vjp(g, a) = U diag(g) V^T along `t` for a, through the
    singular vectors' tangents; refused where singular values repeat or vanish."""
    u, _, vt, du, _, dv = svd_tangents(t, a, "the second derivative of np.linalg.svd")
    gd = np.expand_dims(g, -2)
    return (du * gd) @ vt + (u * gd) @ _mT(dv)


@helper(batch_safe=True)
def singular_values_jvp(t, a):
    """The tangent of the singular values of `a` along `t`: u_i^T T v_i."""
    u, _, vt = np.linalg.svd(a, full_matrices=False)
    return np.einsum("...ji,...jk,...ik->...i", u, t, vt)


@helper(nondiff=True)
def thin_part(g, k, axis, what):
    """The first k columns (axis -1) or rows (-2) of a full_matrices=True factor's cotangent;
    refused where the others (a basis of the complement, not unique) have one."""
    if g is None:
        return None
    rest = g[..., k:] if axis == -1 else g[..., k:, :]
    if np.any(rest != 0):
        raise ValueError(
            f"{what} is undefined for the columns of full_matrices=True beyond min(m, n) (any "
            "basis of the complement would do); use full_matrices=False"
        )
    return g[..., :k] if axis == -1 else g[..., :k, :]


@helper(batch_safe=True)  # its tangent rule: rules/decomposition_tangents.py
def svd_vjp(g, a, full_matrices=True, compute_uv=True):
    """Cotangent of `a` in np.linalg.svd(a, full_matrices, compute_uv) (Townsend 2016). With
    compute_uv=False `g` is the singular values'; else the cotangent of (u, s, vt) (tuple_part's:
    a tuple, None where none reached; leading batch axes on each part). The vectors' part is
    refused where singular values repeat or vanish."""
    if not compute_uv:
        return singular_values_vjp(g, a)
    gu, gs, gvt = tuple_part(g, 0), tuple_part(g, 1), tuple_part(g, 2)
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    k = np.shape(s)[-1]
    what = "the derivative of np.linalg.svd's singular vectors"
    gu, gvt = thin_part(gu, k, -1, what), thin_part(gvt, k, -2, what)
    out = 0.0 if gs is None else singular_values_vjp(gs, a)
    if gu is None and gvt is None:
        return out + np.zeros(np.shape(a))
    f = singular_gaps(s, what)
    row, col = np.expand_dims(s, -2), np.expand_dims(s, -1)
    inner, rest = 0.0, 0.0
    if gu is not None:
        ut_gu = _mT(u) @ gu
        inner = inner + f * (ut_gu - _mT(ut_gu)) * row
        rest = rest + (gu - u @ ut_gu) / row @ vt
    if gvt is not None:
        gv = _mT(gvt)
        vt_gv = vt @ gv
        inner = inner + col * (f * (vt_gv - _mT(vt_gv)))
        rest = rest + u @ ((_mT(gv) - _mT(vt_gv) @ vt) / col)
    return out + u @ inner @ vt + rest


@helper
def svd_jvp(t, a, full_matrices=True, compute_uv=True):
    """The tangent of np.linalg.svd(a, ...) along `t`: the singular values', or (u, s, vt)'s as
    an array of objects (full_matrices=True only where it is the thin SVD: a square matrix)."""
    if not compute_uv:
        return singular_values_jvp(t, a)
    m, n = np.shape(a)[-2:]
    if full_matrices and m != n:
        raise ValueError(
            "the tangent of np.linalg.svd's vectors with full_matrices=True is undefined for a "
            "non-square matrix (any basis of the complement would do); use full_matrices=False"
        )
    u, s, vt, du, ds, dv = svd_tangents(t, a, "the tangent of np.linalg.svd's singular vectors")
    return parts_of(du, ds, _mT(dv))


@batched_helper
def batched_svd_jvp(t, a, full_matrices=True, compute_uv=True):
    out = svd_jvp(t, a, full_matrices, compute_uv)
    return _Rows(out) if compute_uv else out


defvjp(
    np.linalg.svd,
    "a, full_matrices=True, compute_uv=True, hermitian=False",
    literal={"hermitian": (False,)},
    inert=("full_matrices", "compute_uv"),
    a="svd_vjp(g, a, full_matrices, compute_uv)",
    jvp=explicit(
        a="svd_jvp(t, a, full_matrices, compute_uv)",
        batched={"a": "batched_svd_jvp(t, a, full_matrices, compute_uv)"},
    ),
)

# ----------------------------------------------------------------------------- qr (mode='r')


@helper(nondiff=True)
def tall_full_rank_qr(a):
    """Q and R of np.linalg.qr(a) for a tall (or square) matrix of full rank, else refused."""
    m, n = np.shape(a)[-2:]
    if m < n:
        raise ValueError(
            "s2sad differentiates np.linalg.qr(a, mode='r') for matrices with at least as many "
            "rows as columns only"
        )
    q, r = np.linalg.qr(a)
    diag = np.abs(np.diagonal(r, axis1=-2, axis2=-1))
    if np.any(diag <= max(m, n) * np.finfo(np.float64).eps * np.max(diag, initial=0.0)):
        raise ValueError(
            "np.linalg.qr's derivative is undefined where the matrix is rank-deficient"
        )
    return q, r


@helper(batch_safe=True, jvp=explicit(g="qr_r_vjp(t, a)", a="qr_r_vjp_jvp(t, g, a)"))
def qr_r_vjp(g, a):
    """Cotangent of `a` in R = np.linalg.qr(a, mode='r'): Q H R^-T with G = g R^T and
    H = G - tril(G - G^T, -1) (the QR adjoint with no cotangent for Q)."""
    q, r = tall_full_rank_qr(a)
    gr = g @ _mT(r)
    h = gr - np.tril(gr - _mT(gr), -1)
    return q @ h @ _mT(np.linalg.inv(r))


@helper
def qr_r_vjp_jvp(t, g, a):
    """The tangent of qr_r_vjp(g, a) = Q H R^-T along `t` for a, with dR = qr_r_jvp(t, a) and
    dQ = (t - Q dR) R^-1."""
    q, r = tall_full_rank_qr(a)
    rinv = np.linalg.inv(r)
    dr = qr_r_jvp(t, a)
    dq = (t - q @ dr) @ rinv
    gr, dgr = g @ _mT(r), g @ _mT(dr)
    h = gr - np.tril(gr - _mT(gr), -1)
    dh = dgr - np.tril(dgr - _mT(dgr), -1)
    rinv_t = _mT(rinv)
    return dq @ h @ rinv_t + q @ dh @ rinv_t - q @ h @ rinv_t @ _mT(dr) @ rinv_t


@helper(batch_safe=True)
def qr_r_jvp(t, a):
    """The tangent of R = np.linalg.qr(a, mode='r') along `t`: (C - W) R, with C = Q^T t R^-1
    and W the antisymmetric matrix whose strict lower triangle is C's."""
    q, r = tall_full_rank_qr(a)
    c = _mT(q) @ t @ np.linalg.inv(r)
    low = np.tril(c, -1)
    return (c - low + _mT(low)) @ r


@helper(nondiff=True)
def pair_parts(g, ans):
    """The parts of a tuple result's cotangent: a tuple or an array of objects (tuple_part's), or
    one array with the parts on the axis after any batch axes (parts of one shape, as
    getitem_vjp gives them)."""
    if isinstance(g, tuple) or np.asarray(g).dtype == object:
        return [tuple_part(g, i) for i in range(len(ans))]
    lead = np.ndim(g) - np.ndim(ans[0]) - 1
    return [g[(slice(None),) * lead + (i,)] for i in range(len(ans))]


@helper(batch_safe=True)  # its tangent rule: rules/decomposition_tangents.py
def qr_vjp(g, a, ans, mode="reduced"):
    """Cotangent of `a` in np.linalg.qr(a, mode) of a tall (or square) matrix: with Qb, Rb the
    cotangents of Q and R (Qb zero for mode='r'), M = R Rb^T - Qb^T Q and
    (Qb + Q copyltu(M)) R^-T, copyltu(M) = tril(M) + tril(M, -1)^T."""
    if mode == "r":
        return qr_r_vjp(g, a)
    q, r = tall_full_rank_qr(a)
    n = np.shape(a)[-1]
    gq, gr = pair_parts(g, ans)
    gq = thin_part(gq, n, -1, "the derivative of np.linalg.qr's Q")
    terms = [] if gr is None else [gr[..., :n, :] @ _mT(r)]
    terms += [] if gq is None else [-(_mT(q) @ gq)]
    m = _mT(sum(terms[1:], terms[0]))  # R Rb^T - Qb^T Q
    inner = q @ (np.tril(m) + _mT(np.tril(m, -1)))
    return (inner if gq is None else gq + inner) @ _mT(np.linalg.inv(r))


@helper
def qr_jvp(t, a, mode="reduced", rows=False):
    """The tangent of np.linalg.qr(a, mode) along `t`: dR = qr_r_jvp(t, a) and
    dQ = (t - Q dR) R^-1, as one array or an array of objects like the cotangent (pair_parts);
    `rows`: t has a leading batch axis."""
    dr = qr_r_jvp(t, a)
    if mode == "r":
        return dr
    m, n = np.shape(a)[-2:]
    if mode == "complete" and m != n:
        raise ValueError(
            "the tangent of np.linalg.qr's Q with mode='complete' is undefined for a non-square "
            "matrix (any basis of the complement would do); use mode='reduced'"
        )
    q, r = tall_full_rank_qr(a)
    dq = (t - q @ dr) @ np.linalg.inv(r)
    if m == n:  # Q and R of one shape: one array, the pair after the batch axis
        return np.stack([dq, dr], axis=1 if rows else 0)
    return parts_of(dq, dr)


@batched_helper
def batched_qr_jvp(t, a, mode="reduced"):
    out = qr_jvp(t, a, mode, True)
    return _Rows(out) if np.asarray(out).dtype == object else out


defvjp(
    np.linalg.qr,
    "a, mode='reduced'",
    literal={"mode": ("reduced", "complete", "r")},
    a="qr_vjp(g, a, ans, mode=mode)",
    jvp=explicit(a="qr_jvp(t, a, mode=mode)", batched={"a": "batched_qr_jvp(t, a, mode=mode)"}),
)

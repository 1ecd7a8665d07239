"""np.linalg's tuple results (slogdet, eigh, svd, qr): which calls give one, and the Numba forms
of their rules' helpers (rules/decompositions.py, rules/solvers.py hold the NumPy forms).

The reverse pass carries the cotangent of a tuple result unpacked at once (`w, v =
np.linalg.eigh(a)`) as one adjoint per part, so the rule's helper receives the tuple `(dw, dv)`,
None for a part no cotangent reached (`Rule.parts`, pipeline/reverse.py). A tuple of arrays is
a type Numba compiles; which parts are None is known when Numba types the call. In forward mode
the Numba forms give the tangent of the result as a tuple of the parts' tangents. The forms
cover one matrix (no stacks) with the default arguments; other calls run in Python.
"""

import ast
import typing

import numpy as np

from .common import _array
from .contractions import _given_as
from .decompositions import _lower_read, _triangle_cotangent, eigh_jvp, eigh_vjp, qr_jvp
from .decompositions import qr_vjp, svd_jvp, svd_vjp
from .helpers import numba_jitable, numba_of, type_test
from .registry import lookup
from .solvers import slogdet_jvp, slogdet_vjp

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types  # noqa: F401


def _spelled(args: dict, param: str, values: tuple) -> bool:
    """Whether argument `param` of a bound call is spelled as one of `values`."""
    arg = args.get(param)
    if isinstance(arg, ast.AST) and not isinstance(arg, ast.Constant):
        return False
    return getattr(arg, "value", arg) in values


# function -> (its number of parts, (parameter, the values for which the result is a tuple))
_TUPLES = {
    np.linalg.slogdet: (2, None),
    np.linalg.eigh: (2, None),
    np.linalg.svd: (3, ("compute_uv", (True,))),
    np.linalg.qr: (2, ("mode", ("reduced", "complete"))),
}
for _func, (_n, _when) in _TUPLES.items():
    lookup(_func).parts = lambda args, n=_n, when=_when: (
        n if when is None or _spelled(args, *when) else 0
    )

# ----------------------------------------------------------------------------- the parts


@type_test
def _tuple_of(t, n):
    """A tuple of n values (a tuple result, or its cotangent)."""
    return isinstance(t, types.BaseTuple) and len(t.types) == n


@type_test
def _part_types(t):
    """Each part of a tuple cotangent is an array, a number (a cotangent the same everywhere)
    or None (no cotangent reached it)."""
    return all(isinstance(p, (types.Array, types.Number, types.NoneType)) for p in t.types)


def _part_given(part):
    """Whether a cotangent reached this part (it is not None)."""
    return part is not None


@numba_of(_part_given)
def _part_given_impl(part):
    if isinstance(part, types.NoneType):
        return lambda part: False
    return lambda part: True


def _part_or_zeros(part, like):
    """The part's cotangent as an array shaped like `like` (a number: as one number); zeros
    where none reached it."""
    if part is None:
        return np.zeros_like(like, dtype=np.float64)
    return np.broadcast_to(part, np.shape(like))


@numba_of(_part_or_zeros)
def _part_or_zeros_impl(part, like):
    if isinstance(like, types.Number):
        if isinstance(part, types.NoneType):
            return lambda part, like: 0.0
        return lambda part, like: part
    if isinstance(part, types.NoneType):
        return lambda part, like: np.zeros(like.shape)
    if isinstance(part, types.Number):
        return lambda part, like: np.full(like.shape, part)
    return lambda part, like: part


_EPS = 2.220446049250313e-16  # np.finfo(np.float64).eps


@numba_jitable
def _repeats(w):
    """Whether values of `w` repeat, to rounding (decompositions.distinct_eigenvalues)."""
    if w.size < 2:
        return False
    gaps = np.abs(np.diff(np.sort(w)))
    scale = max(np.max(np.abs(w)), 1e-300)
    return np.any(gaps <= 64 * _EPS * scale)


@numba_jitable
def _gaps(w):
    """F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it (decompositions.eigen_gaps)."""
    n = w.size
    f = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                f[i, j] = 1.0 / (w[j] - w[i])
    return f


# ----------------------------------------------------------------------------- slogdet


@numba_of(slogdet_vjp)
def _slogdet_vjp(g, a):
    if not (_tuple_of(g, 2) and _part_types(g) and _array(a)) or a.ndim != 2:
        return None
    if not isinstance(g.types[1], (types.Number, types.NoneType)):
        return None

    def impl(g, a):
        return _part_or_zeros(g[1], 0.0) * np.linalg.inv(np.ascontiguousarray(a)).T

    return impl


@numba_of(slogdet_jvp)
def _slogdet_jvp(t, a):
    if not (_array(t) and _array(a)) or a.ndim != 2 or t.ndim != 2:
        return None

    def impl(t, a):
        return 0.0, np.trace(np.linalg.solve(np.ascontiguousarray(a), np.ascontiguousarray(t)))

    return impl


# ----------------------------------------------------------------------------- eigh


@numba_of(eigh_vjp)
def _eigh_vjp(g, ans, UPLO="L"):
    if not (_tuple_of(g, 2) and _part_types(g) and _tuple_of(ans, 2)) or not _given_as(UPLO, "L"):
        return None
    if not (_array(ans.types[1]) and ans.types[1].ndim == 2):
        return None

    def impl(g, ans, UPLO="L"):
        w, v = ans
        inner = np.diag(_part_or_zeros(g[0], w))
        if _part_given(g[1]):
            if _repeats(w):
                raise ValueError(
                    "the derivative of np.linalg.eigh's eigenvectors is undefined where "
                    "eigenvalues repeat (their vectors are not unique there); s2sad refuses "
                    "such a matrix rather than return inf"
                )
            inner = inner + _gaps(w) * (np.ascontiguousarray(v.T) @ _part_or_zeros(g[1], v))
        return _triangle_cotangent(v @ inner @ np.ascontiguousarray(v.T), True)

    return impl


@numba_of(eigh_jvp)
def _eigh_jvp(t, a, ans, UPLO="L"):
    if not (_array(t) and _tuple_of(ans, 2)) or t.ndim != 2 or not _given_as(UPLO, "L"):
        return None

    def impl(t, a, ans, UPLO="L"):
        w, v = ans
        p = np.ascontiguousarray(v.T) @ _lower_read(t) @ v
        if _repeats(w):
            raise ValueError(
                "the tangent of np.linalg.eigh's eigenvectors is undefined where eigenvalues "
                "repeat (their vectors are not unique there); s2sad refuses such a matrix "
                "rather than return inf"
            )
        return np.diag(p).copy(), v @ (_gaps(w) * p)

    return impl


# ----------------------------------------------------------------------------- svd


@numba_jitable
def _singular_gaps(s):
    """F_ij = 1 / (s_j^2 - s_i^2) off the diagonal (decompositions.singular_gaps): refused
    where singular values repeat or vanish."""
    if _repeats(s**2):
        raise ValueError(
            "the derivative of np.linalg.svd's singular vectors is undefined where singular "
            "values repeat (their vectors are not unique there); s2sad refuses such a matrix "
            "rather than return inf"
        )
    if s.size and np.any(s <= _EPS * np.max(s) * 8):
        raise ValueError(
            "the derivative of np.linalg.svd's singular vectors is undefined where a "
            "singular value vanishes"
        )
    return _gaps(s**2)


@numba_of(svd_vjp)
def _svd_vjp(g, a, full_matrices=True, compute_uv=True):
    if not (_tuple_of(g, 3) and _part_types(g) and _array(a)) or a.ndim != 2:
        return None
    if not (_given_as(full_matrices, False) and _given_as(compute_uv, True)):
        return None

    def impl(g, a, full_matrices=True, compute_uv=True):
        u, s, vt = np.linalg.svd(np.ascontiguousarray(a), full_matrices=False)
        k = s.size
        row, col = s.reshape((1, k)), s.reshape((k, 1))
        out = (u * _part_or_zeros(g[1], s).reshape((1, k))) @ vt
        if _part_given(g[0]) or _part_given(g[2]):
            f = _singular_gaps(s)
            inner, rest = np.zeros((k, k)), np.zeros(a.shape)
            if _part_given(g[0]):
                gu = _part_or_zeros(g[0], u)
                ut_gu = np.ascontiguousarray(u.T) @ gu
                inner = inner + f * (ut_gu - ut_gu.T) * row
                rest = rest + ((gu - u @ ut_gu) / row) @ vt
            if _part_given(g[2]):
                gvt = _part_or_zeros(g[2], vt)
                vt_gv = vt @ np.ascontiguousarray(gvt.T)
                inner = inner + col * (f * (vt_gv - vt_gv.T))
                rest = rest + u @ ((gvt - np.ascontiguousarray(vt_gv.T) @ vt) / col)
            out = out + u @ inner @ vt + rest
        return out

    return impl


@numba_of(svd_jvp)
def _svd_jvp(t, a, full_matrices=True, compute_uv=True):
    if not (_array(t) and _array(a)) or a.ndim != 2 or t.ndim != 2:
        return None
    if not (_given_as(full_matrices, False) and _given_as(compute_uv, True)):
        return None

    def impl(t, a, full_matrices=True, compute_uv=True):
        u, s, vt = np.linalg.svd(np.ascontiguousarray(a), full_matrices=False)
        f = _singular_gaps(s)
        k = s.size
        v, row, col = np.ascontiguousarray(vt.T), s.reshape((1, k)), s.reshape((k, 1))
        ut = np.ascontiguousarray(u.T)
        t = np.ascontiguousarray(t)
        dp = ut @ t @ v
        dpt = np.ascontiguousarray(dp.T)
        du = u @ (f * (dp * row + col * dpt)) + (t @ v - u @ dp) / row
        dv = v @ (f * (col * dp + dpt * row)) + (np.ascontiguousarray(t.T) @ u - v @ dpt) / row
        return du, np.diag(dp).copy(), np.ascontiguousarray(dv.T)

    return impl


# ----------------------------------------------------------------------------- qr


@numba_jitable
def _full_rank_r(a, r):
    """Refuse a wide or rank-deficient matrix (decompositions.tall_full_rank_qr)."""
    m, n = a.shape
    if m < n:
        raise ValueError(
            "s2sad differentiates np.linalg.qr(a, mode='r') for matrices with at least as "
            "many rows as columns only"
        )
    diag = np.abs(np.diag(r))
    if diag.size and np.any(diag <= max(m, n) * _EPS * np.max(diag)):
        raise ValueError(
            "np.linalg.qr's derivative is undefined where the matrix is rank-deficient"
        )


@numba_of(qr_vjp)
def _qr_vjp(g, a, ans, mode="reduced"):
    if not (_tuple_of(g, 2) and _part_types(g) and _array(a) and _tuple_of(ans, 2)):
        return None
    if a.ndim != 2 or not _given_as(mode, "reduced"):
        return None

    def impl(g, a, ans, mode="reduced"):
        q, r = np.linalg.qr(np.ascontiguousarray(a))
        _full_rank_r(a, r)
        gq, gr = _part_or_zeros(g[0], q), _part_or_zeros(g[1], r)
        m = np.ascontiguousarray((gr @ np.ascontiguousarray(r.T) - q.T @ gq).T)
        inner = q @ (np.tril(m) + np.tril(m, -1).T)
        return (gq + inner) @ np.ascontiguousarray(np.linalg.inv(r).T)

    return impl


@numba_of(qr_jvp)
def _qr_jvp(t, a, mode="reduced", rows=False):
    if not (_array(t) and _array(a)) or a.ndim != 2 or t.ndim != 2:
        return None
    if not (_given_as(mode, "reduced") and _given_as(rows, False)):
        return None

    def impl(t, a, mode="reduced", rows=False):
        q, r = np.linalg.qr(np.ascontiguousarray(a))
        _full_rank_r(a, r)
        rinv = np.linalg.inv(r)
        t = np.ascontiguousarray(t)
        c = np.ascontiguousarray(q.T) @ t @ rinv
        low = np.tril(c, -1)
        dr = (c - low + np.ascontiguousarray(low.T)) @ r
        return (t - q @ dr) @ rinv, dr

    return impl

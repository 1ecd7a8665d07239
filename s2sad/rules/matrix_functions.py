"""Matrix functions: pinv and matrix_power, each op's entry below the helpers its templates call
(NumPy and Numba forms side by side, as rules/helpers.py says). Every helper works on stacks of
matrices (leading axes) and is right for a cotangent or tangent with a leading batch axis as it
is (`batch_safe`). pinv's derivative (Golub and Pereyra 1973) is that of a full-rank matrix;
where the rank is deficient the helper refuses at call time.
"""

import numpy as np

from .common import _absent, _array
from .contractions import _cotangent, _filled
from .decompositions import _Rows, parts_of, singular_values_jvp, singular_values_vjp, tuple_part
from .helpers import batched_helper, helper, numba_jitable, numba_of, type_test
from .products import _mT
from .registry import defvjp, explicit

# ----------------------------------------------------------------------------- pinv


@helper(nondiff=True)
def full_rank(a, rcond=None, rtol=None):
    """Refuse a matrix pinv treats as rank-deficient: its derivative is undefined there."""
    s = np.linalg.svd(a, compute_uv=False)
    cut = rcond if rcond is not None else rtol
    if cut is None:
        cut = max(np.shape(a)[-2:]) * np.finfo(np.float64).eps
    if np.any(s[..., -1:] <= cut * s[..., :1]):
        raise ValueError(
            "np.linalg.pinv's derivative is undefined where the matrix is rank-deficient (a "
            "singular value at or below the cutoff): the pseudo-inverse jumps there"
        )


@helper(
    batch_safe=True,
    jvp=explicit(
        g="pinv_vjp(t, a, ans, rcond, rtol)",
        a="pinv_vjp_jvp_a(t, g, a, ans)",
        ans="pinv_vjp_jvp_ans(t, g, a, ans)",
    ),
)
def pinv_vjp(g, a, ans, rcond=None, rtol=None):
    """Cotangent of `a` in X = np.linalg.pinv(a) (Golub and Pereyra 1973, full rank):
    -X^T G X^T + (I - A X) G^T X X^T + X^T X G^T (I - X A)."""
    full_rank(a, rcond, rtol)
    x, xt, gt = ans, _mT(ans), _mT(g)
    left = np.eye(np.shape(a)[-2]) - a @ x
    right = np.eye(np.shape(a)[-1]) - x @ a
    return -xt @ g @ xt + left @ gt @ x @ xt + xt @ x @ gt @ right


@numba_jitable
def _full_rank(a):
    s = np.linalg.svd(np.ascontiguousarray(a))[1]
    if s[-1] <= max(a.shape) * np.finfo(np.float64).eps * s[0]:
        raise ValueError("pinv's derivative is undefined at a rank-deficient matrix")


@numba_of(pinv_vjp)
def _pinv_vjp(g, a, ans, rcond=None, rtol=None):
    if not (_cotangent(g) and _array(a)) or a.ndim != 2 or not (_absent(rcond) and _absent(rtol)):
        return None

    def impl(g, a, ans, rcond=None, rtol=None):
        g = _filled(g, ans)
        _full_rank(a)
        x = ans
        left = np.eye(a.shape[0]) - a @ x
        right = np.eye(a.shape[1]) - x @ a
        return -x.T @ g @ x.T + left @ g.T @ x @ x.T + x.T @ x @ g.T @ right

    return impl


@helper
def pinv_vjp_jvp_a(t, g, a, ans):
    """The tangent of pinv_vjp(g, a, ans) along `t` for a (ans held)."""
    x, xt, gt = ans, _mT(ans), _mT(g)
    return -(t @ x) @ gt @ x @ xt - xt @ x @ gt @ (x @ t)


@helper
def pinv_vjp_jvp_ans(t, g, a, ans):
    """The tangent of pinv_vjp(g, a, ans) along `t` for ans (a held)."""
    x, xt, gt, st = ans, _mT(ans), _mT(g), _mT(t)
    left = np.eye(np.shape(a)[-2]) - a @ x
    right = np.eye(np.shape(a)[-1]) - x @ a
    return (
        -st @ g @ xt
        - xt @ g @ st
        - (a @ t) @ gt @ x @ xt
        + left @ gt @ (t @ xt + x @ st)
        + (st @ x + xt @ t) @ gt @ right
        - xt @ x @ gt @ (t @ a)
    )


@helper(batch_safe=True)
def pinv_jvp(t, a, ans, rcond=None, rtol=None):
    """The tangent of X = np.linalg.pinv(a) along `t`:
    -X T X + X X^T T^T (I - A X) + (I - X A) T^T X^T X."""
    full_rank(a, rcond, rtol)
    x, xt, tt = ans, _mT(ans), _mT(t)
    left = np.eye(np.shape(a)[-2]) - a @ x
    right = np.eye(np.shape(a)[-1]) - x @ a
    return -x @ t @ x + x @ xt @ tt @ left + right @ tt @ xt @ x


@numba_of(pinv_jvp)
def _pinv_jvp(t, a, ans, rcond=None, rtol=None):
    if not (_array(t) and _array(a)) or a.ndim != 2 or not (_absent(rcond) and _absent(rtol)):
        return None

    def impl(t, a, ans, rcond=None, rtol=None):
        _full_rank(a)
        x, xt, tt = ans, np.ascontiguousarray(ans.T), np.ascontiguousarray(t.T)
        left = np.eye(a.shape[0]) - a @ x
        right = np.eye(a.shape[1]) - x @ a
        return -x @ t @ x + x @ xt @ tt @ left + right @ tt @ xt @ x

    return impl


defvjp(
    np.linalg.pinv,
    "a, rcond=None, hermitian=False, *, rtol=None",
    literal={"hermitian": (False,)},
    inert=("rcond", "rtol"),
    a="pinv_vjp(g, a, ans, rcond, rtol)",
    jvp=explicit(a="pinv_jvp(t, a, ans, rcond, rtol)"),
)


# ----------------------------------------------------------------------------- matrix_power


@helper(nondiff=True)
def power_base(a, n):
    """The matrix raised to |n| in np.linalg.matrix_power(a, n): a, or inv(a) for n < 0."""
    return np.linalg.inv(a) if n < 0 else a


@helper
def power_tangents(b, m, h, s=None):
    """Forward mode through b^m: the tangent of b^m along h, and (with `s`) the second-order
    term along h then s. Leading axes of h and s beyond b's are a batch."""
    x = np.broadcast_to(np.eye(np.shape(b)[-1]), np.shape(b))
    dh = ds = dd = 0.0 * x
    for _ in range(m):
        if s is not None:
            dd = dd @ b + dh @ s + ds @ h
            ds = ds @ b + x @ s
        dh, x = dh @ b + x @ h, x @ b
    return dh if s is None else dd


@helper(
    batch_safe=True,
    jvp=explicit(g="matrix_power_vjp(t, a, n)", a="matrix_power_vjp_jvp(t, g, a, n)"),
)
def matrix_power_vjp(g, a, n):
    """Cotangent of `a` in np.linalg.matrix_power(a, n), stacked matrices too: with b = a (or
    inv(a) for n < 0), d(b^m) = sum_k b^k db b^(m-1-k), whose transpose maps g back."""
    b, m = power_base(a, n), abs(n)
    if m == 0:
        return np.zeros(np.shape(g)[: np.ndim(g) - np.ndim(a)] + np.shape(a))
    gb = np.swapaxes(power_tangents(b, m, np.swapaxes(g, -1, -2)), -1, -2)
    if n > 0:
        return gb
    bt = np.swapaxes(b, -1, -2)
    return -bt @ gb @ bt


@numba_jitable
def _power_tangent(b, m, h):
    """The tangent of b^m along h, for matrices (power_tangents' first form)."""
    x = np.eye(b.shape[0])
    dh = np.zeros(b.shape)
    for _ in range(m):
        dh = dh @ b + x @ h
        x = x @ b
    return dh


@type_test
def _square_matrices(*ts):
    return all(_array(t) and t.ndim == 2 for t in ts)


@numba_of(matrix_power_vjp)
def _matrix_power_vjp(g, a, n):
    if not (_square_matrices(a) and _cotangent(g)):
        return None

    def impl(g, a, n):
        g = _filled(g, a)
        m = abs(n)
        if m == 0:
            return np.zeros(a.shape)
        b = np.linalg.inv(np.ascontiguousarray(a)) if n < 0 else np.ascontiguousarray(a)
        gb = np.ascontiguousarray(_power_tangent(b, m, np.ascontiguousarray(g.T)).T)
        if n > 0:
            return gb
        bt = np.ascontiguousarray(b.T)
        return -(bt @ gb @ bt)

    return impl


@helper
def matrix_power_vjp_jvp(t, g, a, n):
    """The tangent of matrix_power_vjp(g, a, n) along `t` for a (a batch ahead of t's axes)."""
    b, m = power_base(a, n), abs(n)
    if m == 0:
        return np.zeros(np.shape(t)[: np.ndim(t) - np.ndim(a)] + np.shape(g)[-np.ndim(a) :])
    gt = np.swapaxes(g, -1, -2)
    if n > 0:
        return np.swapaxes(power_tangents(b, m, gt, t), -1, -2)
    db = -b @ t @ b  # the tangent of inv(a)
    bt, dbt = np.swapaxes(b, -1, -2), np.swapaxes(db, -1, -2)
    gb = np.swapaxes(power_tangents(b, m, gt), -1, -2)
    dgb = np.swapaxes(power_tangents(b, m, gt, db), -1, -2)
    return -(dbt @ gb @ bt + bt @ dgb @ bt + bt @ gb @ dbt)


@helper(batch_safe=True)
def matrix_power_jvp(t, a, n):
    """The tangent of np.linalg.matrix_power(a, n) along `t` (leading batch axes allowed)."""
    b, m = power_base(a, n), abs(n)
    if m == 0:
        return np.zeros(np.shape(t))
    if n > 0:
        return power_tangents(b, m, t)
    return power_tangents(b, m, -b @ t @ b)


@numba_of(matrix_power_jvp)
def _matrix_power_jvp(t, a, n):
    if not _square_matrices(t, a):
        return None

    def impl(t, a, n):
        m = abs(n)
        if m == 0:
            return np.zeros(a.shape)
        if n > 0:
            return _power_tangent(np.ascontiguousarray(a), m, np.ascontiguousarray(t))
        b = np.linalg.inv(np.ascontiguousarray(a))
        return _power_tangent(b, m, -(b @ np.ascontiguousarray(t) @ b))

    return impl


defvjp(
    np.linalg.matrix_power,
    "a, n",
    inert=("n",),
    a="matrix_power_vjp(g, a, n)",
    jvp=explicit(a="matrix_power_jvp(t, a, n)"),
)

# ----------------------------------------------------------------------------- lstsq


@helper(nondiff=True)
def lstsq_parts(a, b, ans):
    """For (x, residuals, rank, s) = np.linalg.lstsq(a, b): b, x and the residual b - a x as
    matrices (a 1-D b as one column), and inv(a^T a); refused unless a has full column rank."""
    m, n = np.shape(a)
    if m < n or ans[2] < n:
        raise ValueError(
            "s2sad differentiates np.linalg.lstsq where a has full column rank (the solution "
            "is unique there); this a has rank below its number of columns"
        )
    vec = np.ndim(b) == 1
    bm, xm = (np.expand_dims(b, -1), np.expand_dims(ans[0], -1)) if vec else (b, ans[0])
    return bm, xm, bm - a @ xm, np.linalg.inv(_mT(a) @ a), vec


@helper(batch_safe=True)  # its tangent rule: rules/decomposition_tangents.py
def lstsq_vjp(g, a, b, ans, which):
    """Cotangent of `a` (which=0) or `b` (1) in (x, residuals, rank, s) = np.linalg.lstsq(a, b)
    from the cotangent of the tuple (an array of objects, 0 where none reached; leading batch
    axes on each part): through x = inv(a^T a) a^T b, residuals = sum((b - a x)^2) and the
    singular values s of a."""
    bm, xm, rm, c, vec = lstsq_parts(a, b, ans)
    gx, gres, gs = tuple_part(g, 0), tuple_part(g, 1), tuple_part(g, 3)
    gb, ga = 0.0, 0.0
    if gx is not None:
        gxm = np.expand_dims(gx, -1) if vec else gx
        z = c @ gxm
        gb = a @ z
        ga = -gb @ _mT(xm) + rm @ _mT(z)
    if gres is not None and np.size(ans[1]):
        weighted = 2.0 * rm * np.expand_dims(gres, -2)
        gb = gb + weighted
        ga = ga - weighted @ _mT(xm)
    if which == 1:
        gb = gb + np.zeros(np.shape(bm))
        return gb[..., 0] if vec else gb
    if gs is not None:
        ga = ga + singular_values_vjp(gs, a)
    return ga + np.zeros(np.shape(a))


@helper
def lstsq_jvp(t, a, b, ans, which):
    """The tangent of np.linalg.lstsq(a, b)'s tuple along `t` for a (which=0) or b (1): x's,
    the residuals', zero for the rank, and the singular values'."""
    bm, xm, rm, c, vec = lstsq_parts(a, b, ans)
    if which == 0:
        dxm = c @ (-_mT(a) @ (t @ xm) + _mT(t) @ rm)
        drm = -t @ xm - a @ dxm
        ds = singular_values_jvp(t, a)
        lead = np.shape(t)[: np.ndim(t) - 2]
    else:
        tm = np.expand_dims(t, -1) if vec else t
        dxm = c @ _mT(a) @ tm
        drm = tm - a @ dxm
        lead = np.shape(t)[: np.ndim(t) - np.ndim(b)]
        ds = np.zeros(lead + np.shape(ans[3]))
    dres = 2.0 * np.sum(rm * drm, axis=-2)
    if not np.size(ans[1]):
        dres = np.zeros(lead + np.shape(ans[1]))
    dx = dxm[..., 0] if vec else dxm
    return parts_of(dx, dres, np.zeros(lead), ds)


@batched_helper
def batched_lstsq_jvp(t, a, b, ans, which):
    return _Rows(lstsq_jvp(t, a, b, ans, which))


defvjp(
    np.linalg.lstsq,
    "a, b, rcond=None",
    inert=("rcond",),
    a="lstsq_vjp(g, a, b, ans, 0)",
    b="lstsq_vjp(g, a, b, ans, 1)",
    jvp=explicit(
        a="lstsq_jvp(t, a, b, ans, 0)",
        b="lstsq_jvp(t, a, b, ans, 1)",
        batched={
            "a": "batched_lstsq_jvp(t, a, b, ans, 0)",
            "b": "batched_lstsq_jvp(t, a, b, ans, 1)",
        },
    ),
)

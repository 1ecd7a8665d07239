"""Contractions: tensordot, inner, vdot, kron, cross and multi_dot, each op's entry below the
helpers its templates call (NumPy, batched and Numba forms side by side, as rules/helpers.py
says). Most helpers are right for a cotangent or tangent with leading batch axes as they are (an
einsum with `...` in front, or matmul's broadcasting), so they are `batch_safe`.
"""

import typing

import numpy as np

from .common import _absent, _array, _lift, _sum_to
from .helpers import batched_helper, helper, numba_jitable, numba_of, type_test
from .registry import defvjp, explicit

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types  # noqa: F401


@type_test
def _given_as(t, value):
    """Whether a Numba argument type is `value`: left out with that default, or that literal."""
    if isinstance(t, types.Omitted):
        return t.value == value
    if isinstance(t, types.Literal):
        return t.literal_value == value
    if value is None and isinstance(t, types.NoneType):
        return True
    return t is value or (not isinstance(t, types.Type) and t == value)


def _filled(g, like):
    """`g` as an array shaped like `like`: the jitted expand_reduced leaves a cotangent that is
    the same everywhere as one number."""
    return np.broadcast_to(g, np.shape(like))


@numba_of(_filled)
def _filled_impl(g, like):
    if _array(g):
        return lambda g, like: g
    return lambda g, like: np.full(like.shape, g)


@type_test
def _cotangent(g):
    """An array, or one number standing for an array of it (jitted expand_reduced)."""
    return _array(g) or isinstance(g, types.Number)


# ----------------------------------------------------------------------------- tensordot


@helper(nondiff=True)
def tensordot_labels(a_nd, b_nd, axes):
    """np.einsum letters of a, of b and of np.tensordot(a, b, axes)'s result."""
    if isinstance(axes, (int, np.integer)):
        ax_a, ax_b = list(range(a_nd - axes, a_nd)), list(range(axes))
    else:
        ax_a, ax_b = axes
        ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
        ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
    ax_a, ax_b = [i % a_nd for i in ax_a], [j % b_nd for j in ax_b]
    la = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[:a_nd]
    lb = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[a_nd : a_nd + b_nd])
    for i, j in zip(ax_a, ax_b):
        lb[j] = la[i]
    out = [la[i] for i in range(a_nd) if i not in ax_a]
    out += [lb[j] for j in range(b_nd) if j not in ax_b]
    return la, "".join(lb), "".join(out)


@helper(batch_safe=True)
def contract(a, b, axes, which=None):
    """np.tensordot(a, b, axes), where argument `which` (0, 1 or None) may carry leading batch
    axes: they lead the result."""
    la, lb, lo = tensordot_labels(np.ndim(a) - (which == 0), np.ndim(b) - (which == 1), axes)
    if which == 0:
        la = "..." + la
    elif which == 1:
        lb = "..." + lb
    return np.einsum(f"{la},{lb}->...{lo}", a, b)


@helper(
    batch_safe=True,
    jvp=explicit(
        g="tensordot_vjp_lhs(t, a, b, axes)",
        b="tensordot_vjp_lhs(g, a, t, axes)",
        batched={"b": "tensordot_vjp_lhs(g, a, t, axes, 1)"},
    ),
)
def tensordot_vjp_lhs(g, a, b, axes, lead=None):
    """Cotangent of `a` in np.tensordot(a, b, axes); leading axes of `g` are a batch, and so is
    b's first axis where `lead` is 1 (a batched tangent of b)."""
    la, lb, lo = tensordot_labels(np.ndim(a), np.ndim(b) - (lead == 1), axes)
    lb = "..." + lb if lead == 1 else lb
    return np.einsum(f"...{lo},{lb}->...{la}", g, b)


@helper(
    batch_safe=True,
    jvp=explicit(
        g="tensordot_vjp_rhs(t, a, b, axes)",
        a="tensordot_vjp_rhs(g, t, b, axes)",
        batched={"a": "tensordot_vjp_rhs(g, t, b, axes, 0)"},
    ),
)
def tensordot_vjp_rhs(g, a, b, axes, lead=None):
    """Cotangent of `b` in np.tensordot(a, b, axes) (`lead` 0: a batched tangent of a)."""
    la, lb, lo = tensordot_labels(np.ndim(a) - (lead == 0), np.ndim(b), axes)
    la = "..." + la if lead == 0 else la
    return np.einsum(f"...{lo},{la}->...{lb}", g, a)


defvjp(
    np.tensordot,
    "a, b, axes=2",
    a="tensordot_vjp_lhs(g, a, b, axes)",
    b="tensordot_vjp_rhs(g, a, b, axes)",
    jvp=explicit(
        a="contract(t, b, axes)",
        b="contract(a, t, axes)",
        batched={"a": "contract(t, b, axes, 0)", "b": "contract(a, t, axes, 1)"},
    ),
)

# ----------------------------------------------------------------------------- inner


@helper(nondiff=True)
def inner_axes(a, b):
    """np.inner(a, b) as np.tensordot's axes (a scalar operand: a product)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return 0
    return ([np.ndim(a) - 1], [np.ndim(b) - 1])


defvjp(
    np.inner,
    "a, b, /",
    a="tensordot_vjp_lhs(g, a, b, inner_axes(a, b))",
    b="tensordot_vjp_rhs(g, a, b, inner_axes(a, b))",
    jvp=explicit(
        a="contract(t, b, inner_axes(a, b))",
        b="contract(a, t, inner_axes(a, b))",
        batched={
            "a": "contract(t, b, inner_axes(a, b), 0)",
            "b": "contract(a, t, inner_axes(a, b), 1)",
        },
    ),
)

# ----------------------------------------------------------------------------- vdot


@helper(
    batch_safe=True,
    jvp=explicit(
        g="vdot_vjp(t, a, b)", b="vdot_vjp(g, a, t)", batched={"b": "vdot_vjp(g, a, t, 1)"}
    ),
)
def vdot_vjp(g, a, b, lead=None):
    """Cotangent of `a` in np.vdot(a, b) (real): g times b in a's shape. Leading axes of `g` are
    a batch, and so is b's first axis where `lead` is 1."""
    if lead == 1:
        rows = np.shape(b)[:1]
        return np.reshape(g * np.reshape(b, rows + (-1,)), rows + np.shape(a))
    return np.reshape(np.multiply.outer(g, np.ravel(b)), np.shape(g) + np.shape(a))


@numba_of(vdot_vjp)
def _vdot_vjp(g, a, b, lead=None):
    if not (_array(a) and _array(b)) or isinstance(g, types.Array) or not _absent(lead):
        return None
    return lambda g, a, b, lead=None: g * np.ascontiguousarray(b).reshape(a.shape)


@helper(batch_safe=True)
def batched_vdot(t, b):
    """np.vdot(t[i], b) for each row of the batched `t`."""
    return np.reshape(t, (np.shape(t)[0], -1)) @ np.ravel(b)


defvjp(
    np.vdot,
    "a, b, /",
    a="vdot_vjp(g, a, b)",
    b="vdot_vjp(g, b, a)",
    jvp=explicit(
        a="np.vdot(t, b)",
        b="np.vdot(a, t)",
        batched={"a": "batched_vdot(t, b)", "b": "batched_vdot(t, a)"},
    ),
)

# ----------------------------------------------------------------------------- kron


@helper(nondiff=True)
def kron_shapes(a_nd, b_nd, a_shape, b_shape):
    """np.kron's shapes of a and b padded with ones to the same rank, and their letters."""
    nd = max(a_nd, b_nd)
    pa = (1,) * (nd - a_nd) + tuple(a_shape)
    pb = (1,) * (nd - b_nd) + tuple(b_shape)
    la, lb = "abcdefghijklmnopqrstuvwxyz"[:nd], "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:nd]
    both = "".join(x + y for x, y in zip(la, lb))
    return nd, pa, pb, la, lb, both


@helper(
    batch_safe=True,
    jvp=explicit(
        g="kron_vjp_lhs(t, a, b)",
        b="kron_vjp_lhs(g, a, t)",
        batched={"b": "kron_vjp_lhs(g, a, t, 1)"},
    ),
)
def kron_vjp_lhs(g, a, b, lead=None):
    """Cotangent of `a` in np.kron(a, b); leading axes of `g` beyond the result's are a batch,
    and so is b's first axis where `lead` is 1."""
    b_shape = np.shape(b)[1:] if lead == 1 else np.shape(b)
    nd, pa, pb, la, lb, both = kron_shapes(np.ndim(a), len(b_shape), np.shape(a), b_shape)
    rows = np.shape(b)[:1] if lead == 1 else ()
    gr = np.reshape(g, np.shape(g)[: np.ndim(g) - nd] + tuple(n for p in zip(pa, pb) for n in p))
    out = np.einsum(f"...{both},...{lb}->...{la}", gr, np.reshape(b, rows + pb))
    return np.reshape(out, np.shape(out)[: np.ndim(out) - nd] + np.shape(a))


@helper(
    batch_safe=True,
    jvp=explicit(
        g="kron_vjp_rhs(t, a, b)",
        a="kron_vjp_rhs(g, t, b)",
        batched={"a": "kron_vjp_rhs(g, t, b, 0)"},
    ),
)
def kron_vjp_rhs(g, a, b, lead=None):
    """Cotangent of `b` in np.kron(a, b) (`lead` 0: a's first axis is a batch)."""
    a_shape = np.shape(a)[1:] if lead == 0 else np.shape(a)
    nd, pa, pb, la, lb, both = kron_shapes(len(a_shape), np.ndim(b), a_shape, np.shape(b))
    rows = np.shape(a)[:1] if lead == 0 else ()
    gr = np.reshape(g, np.shape(g)[: np.ndim(g) - nd] + tuple(n for p in zip(pa, pb) for n in p))
    out = np.einsum(f"...{both},...{la}->...{lb}", gr, np.reshape(a, rows + pa))
    return np.reshape(out, np.shape(out)[: np.ndim(out) - nd] + np.shape(b))


@numba_jitable
def _kron_back(g, a, b, lhs):
    """The cotangent of a (lhs) or b in np.kron(a, b) of matrices, by loops."""
    p, q = a.shape
    r, s = b.shape
    out = np.zeros((p, q) if lhs else (r, s))
    for i in range(p):
        for j in range(q):
            for k in range(r):
                for m in range(s):
                    if lhs:
                        out[i, j] += g[i * r + k, j * s + m] * b[k, m]
                    else:
                        out[k, m] += g[i * r + k, j * s + m] * a[i, j]
    return out


@numba_jitable
def _as_matrix(x):
    return np.ascontiguousarray(x).reshape((1, x.size)) if x.ndim == 1 else x


@type_test
def _kron_matrices(g, a, b, lead):
    """Whether np.kron's cotangent is of vectors or matrices (what Numba's np.kron takes)."""
    if not (_cotangent(g) and _array(a) and _array(b)) or not _absent(lead):
        return False
    return 1 <= a.ndim <= 2 and 1 <= b.ndim <= 2


@numba_of(kron_vjp_lhs)
def _kron_vjp_lhs(g, a, b, lead=None):
    if not _kron_matrices(g, a, b, lead):
        return None

    def impl(g, a, b, lead=None):
        am, bm = _as_matrix(a), _as_matrix(b)
        like = np.empty((am.shape[0] * bm.shape[0], am.shape[1] * bm.shape[1]))
        gm = np.ascontiguousarray(_filled(g, like)).reshape(like.shape)
        return _kron_back(gm, am, bm, True).reshape(a.shape)

    return impl


@numba_of(kron_vjp_rhs)
def _kron_vjp_rhs(g, a, b, lead=None):
    if not _kron_matrices(g, a, b, lead):
        return None

    def impl(g, a, b, lead=None):
        am, bm = _as_matrix(a), _as_matrix(b)
        like = np.empty((am.shape[0] * bm.shape[0], am.shape[1] * bm.shape[1]))
        gm = np.ascontiguousarray(_filled(g, like)).reshape(like.shape)
        return _kron_back(gm, am, bm, False).reshape(b.shape)

    return impl


@batched_helper
def batched_kron(a, b, which):
    """np.kron(a, b) with one leading batch axis on argument `which`."""
    if which == 0:
        return np.stack([np.kron(row, b) for row in a])
    return np.stack([np.kron(a, row) for row in b])


defvjp(
    np.kron,
    "a, b",
    a="kron_vjp_lhs(g, a, b)",
    b="kron_vjp_rhs(g, a, b)",
    jvp=explicit(
        a="np.kron(t, b)",
        b="np.kron(a, t)",
        batched={"a": "batched_kron(t, b, 0)", "b": "batched_kron(a, t, 1)"},
    ),
)

# ----------------------------------------------------------------------------- cross


@helper(nondiff=True)
def cross_axes(a_nd, b_nd, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """np.cross's axes of a, b and the result, counted from the end (so that leading batch axes
    leave them as they are)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    c_nd = max(a_nd, b_nd)
    return (axisa % a_nd) - a_nd, (axisb % b_nd) - b_nd, (axisc % c_nd) - c_nd


_CROSS = "axisa=axisa, axisb=axisb, axisc=axisc, axis=axis"
_CROSS_ARGS = "axisa=-1, axisb=-1, axisc=-1, axis=None"


@helper
def cross_cotangent(g, a, b, which, lead, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cotangent of operand `which` (0: a, 1: b) of np.cross(a, b, ...) of 3-vectors. Leading
    axes of `g` beyond the result's are a batch, and so is the first axis of operand `lead`
    (a batched tangent of the other operand, for Hessians)."""
    a_nd, b_nd = np.ndim(a) - (lead == 0), np.ndim(b) - (lead == 1)
    ax_a, ax_b, ax_c = cross_axes(a_nd, b_nd, axisa, axisb, axisc, axis)
    c_nd = max(a_nd, b_nd)
    if lead == 0:  # the batch axis first, then the value's axes padded to the result's
        a = np.reshape(a, np.shape(a)[:1] + (1,) * (c_nd - a_nd) + np.shape(a)[1:])
    elif lead == 1:
        b = np.reshape(b, np.shape(b)[:1] + (1,) * (c_nd - b_nd) + np.shape(b)[1:])
    if np.shape(a)[ax_a] != 3 or np.shape(b)[ax_b] != 3:
        raise ValueError(
            "s2sad differentiates np.cross of 3-vectors only (the 2-vector form is deprecated "
            "in NumPy); append a zero component to make them 3-vectors"
        )
    av, bv, gv = np.moveaxis(a, ax_a, -1), np.moveaxis(b, ax_b, -1), np.moveaxis(g, ax_c, -1)
    out = np.cross(bv, gv) if which == 0 else np.cross(gv, av)
    own = np.shape(a)[-a_nd:] if which == 0 else np.shape(b)[-b_nd:]
    shape = np.shape(np.moveaxis(np.empty(own), ax_a if which == 0 else ax_b, -1))
    keep = 1 if lead is not None or np.ndim(g) > c_nd else 0  # a batch axis stays
    extra = np.ndim(out) - keep - len(shape)  # sum what broadcasting added
    if extra:
        out = np.sum(out, axis=tuple(range(keep, keep + extra)))
    ones = tuple(keep + i for i, n in enumerate(shape) if n == 1 and np.shape(out)[keep + i] != 1)
    if ones:
        out = np.sum(out, axis=ones, keepdims=True)
    return np.moveaxis(out, -1, ax_a if which == 0 else ax_b)


@helper(
    batch_safe=True,
    jvp=explicit(
        g=f"cross_vjp_lhs(t, a, b, {_CROSS})",
        b=f"cross_vjp_lhs(g, a, t, {_CROSS})",
        batched={"b": f"cross_vjp_lhs(g, a, t, 1, {_CROSS})"},
    ),
)
def cross_vjp_lhs(g, a, b, lead=None, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cotangent of `a` in np.cross(a, b, ...): cross(b, g)."""
    return cross_cotangent(g, a, b, 0, lead, axisa, axisb, axisc, axis)


@helper(
    batch_safe=True,
    jvp=explicit(
        g=f"cross_vjp_rhs(t, a, b, {_CROSS})",
        a=f"cross_vjp_rhs(g, t, b, {_CROSS})",
        batched={"a": f"cross_vjp_rhs(g, t, b, 0, {_CROSS})"},
    ),
)
def cross_vjp_rhs(g, a, b, lead=None, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cotangent of `b` in np.cross(a, b, ...): cross(g, a)."""
    return cross_cotangent(g, a, b, 1, lead, axisa, axisb, axisc, axis)


@type_test
def _plain_cross(g, a, b, lead, axes):
    """Whether a cross product's cotangent is of arrays of 3-vectors along their last axes,
    broadcasting against each other as Numba's np.cross does."""
    arrays = _array(a) and _array(b) and _cotangent(g)
    return arrays and _last_axes(axes) and _given_as(lead, None)


@type_test
def _last_axes(axes):
    """Whether np.cross's axisa, axisb, axisc and axis are their defaults (the last axes)."""
    return all(_given_as(t, v) for t, v in zip(axes, (-1, -1, -1, None)))


@numba_jitable
def _cross_lhs_cotangent(g, a, b):
    """cross(b, g) summed to a's shape; `g` is an array shaped like the result."""
    out = np.cross(b, g)
    return _sum_to(out, a.shape, out.ndim - a.ndim)


@numba_jitable
def _cross_rhs_cotangent(g, a, b):
    """cross(g, a) summed to b's shape."""
    out = np.cross(g, a)
    return _sum_to(out, b.shape, out.ndim - b.ndim)


@numba_of(cross_vjp_lhs)
def _cross_vjp_lhs(g, a, b, lead=None, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if not _plain_cross(g, a, b, lead, (axisa, axisb, axisc, axis)):
        return None
    if _array(g):
        return lambda g, a, b, lead=None, axisa=-1, axisb=-1, axisc=-1, axis=None: (
            _cross_lhs_cotangent(g, a, b)
        )
    # one number for a cotangent the same everywhere (the jitted expand_reduced)
    return lambda g, a, b, lead=None, axisa=-1, axisb=-1, axisc=-1, axis=None: (
        _cross_lhs_cotangent(np.full(np.cross(a, b).shape, g), a, b)
    )


@numba_of(cross_vjp_rhs)
def _cross_vjp_rhs(g, a, b, lead=None, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if not _plain_cross(g, a, b, lead, (axisa, axisb, axisc, axis)):
        return None
    if _array(g):
        return lambda g, a, b, lead=None, axisa=-1, axisb=-1, axisc=-1, axis=None: (
            _cross_rhs_cotangent(g, a, b)
        )
    return lambda g, a, b, lead=None, axisa=-1, axisb=-1, axisc=-1, axis=None: (
        _cross_rhs_cotangent(np.full(np.cross(a, b).shape, g), a, b)
    )


@helper
def crossed(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """np.cross(a, b, ...) (tangent templates call it: Numba's np.cross takes no axes)."""
    return np.cross(a, b, axisa=axisa, axisb=axisb, axisc=axisc, axis=axis)


@numba_of(crossed)
def _crossed(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if not (_array(a) and _array(b) and _last_axes((axisa, axisb, axisc, axis))):
        return None
    return lambda a, b, axisa=-1, axisb=-1, axisc=-1, axis=None: np.cross(a, b)


@batched_helper
def batched_cross(a, b, which, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """np.cross(a, b, ...) with one leading batch axis on argument `which`."""
    a_nd, b_nd = np.ndim(a) - (which == 0), np.ndim(b) - (which == 1)
    ax_a, ax_b, ax_c = cross_axes(a_nd, b_nd, axisa, axisb, axisc, axis)
    if which == 0:
        a = _lift(a, max(a_nd, b_nd))
    else:
        b = _lift(b, max(a_nd, b_nd))
    return np.cross(a, b, axisa=ax_a, axisb=ax_b, axisc=ax_c)


defvjp(
    np.cross,
    f"a, b, {_CROSS_ARGS}",
    a=f"cross_vjp_lhs(g, a, b, {_CROSS})",
    b=f"cross_vjp_rhs(g, a, b, {_CROSS})",
    jvp=explicit(
        a=f"crossed(t, b, {_CROSS})",
        b=f"crossed(a, t, {_CROSS})",
        batched={
            "a": f"batched_cross(t, b, 0, {_CROSS})",
            "b": f"batched_cross(a, t, 1, {_CROSS})",
        },
    ),
)


# ----------------------------------------------------------------------------- multi_dot


@helper
def chain_cotangent(g, arrays, k, lead=None):
    """Cotangent of arrays[k] in np.linalg.multi_dot(arrays): L^T G R^T, with L and R the
    products left and right of it (a 1-D first or last array is a row or a column). Leading
    axes of `g` are a batch, and so is the first axis of arrays[lead] (a batched tangent)."""
    nds = [np.ndim(x) - (i == lead) for i, x in enumerate(arrays)]
    mats = list(arrays)
    if nds[0] == 1:
        mats[0] = np.expand_dims(mats[0], -2)
    if nds[-1] == 1:
        mats[-1] = np.expand_dims(mats[-1], -1)
    if nds[0] == 1:
        g = np.expand_dims(g, -2 if nds[-1] == 2 else -1)
    if nds[-1] == 1:
        g = np.expand_dims(g, -1)
    res = g
    if k > 0:
        left = mats[0]
        for m in mats[1:k]:
            left = left @ m
        res = np.swapaxes(left, -1, -2) @ res
    if k < len(mats) - 1:
        right = mats[k + 1]
        for m in mats[k + 2 :]:
            right = right @ m
        res = res @ np.swapaxes(right, -1, -2)
    if nds[k] == 1:
        res = res[..., 0, :] if k == 0 else res[..., :, 0]
    return res


@helper(
    batch_safe=True,
    jvp=explicit(
        g="multi_dot_vjp(t, arrays, k)",
        arrays="multi_dot_vjp_jvp(t, g, arrays, k, elt)",
        batched={"arrays": "multi_dot_vjp_jvp(t, g, arrays, k, elt, 1)"},
    ),
)
def multi_dot_vjp(g, arrays, k):
    """Cotangent of arrays[k] in np.linalg.multi_dot(arrays); leading axes of `g` are a batch."""
    return chain_cotangent(g, arrays, k)


@helper
def multi_dot_vjp_jvp(t, g, arrays, k, which, batch=0):
    """The tangent of multi_dot_vjp(g, arrays, k) along `t` for arrays[which] (with `batch`
    leading axes): linear in every array but arrays[k], which it does not read."""
    if which == k:
        return np.zeros(np.shape(t)[:batch] + np.shape(arrays[k]), dtype=np.result_type(t, 1.0))
    arrays = list(arrays)
    arrays[which] = t
    return chain_cotangent(g, arrays, k, which if batch else None)


@helper(batch_safe=True)
def multi_dot_jvp(t, arrays, k):
    """The tangent of np.linalg.multi_dot(arrays) along `t` for arrays[k]; leading axes of `t`
    beyond arrays[k]'s are a batch."""
    nds = [np.ndim(x) for x in arrays]
    mats = list(arrays)
    mats[k] = t
    if nds[0] == 1:
        mats[0] = np.expand_dims(mats[0], -2)
    if nds[-1] == 1:
        mats[-1] = np.expand_dims(mats[-1], -1)
    out = mats[0]
    for m in mats[1:]:
        out = out @ m
    if nds[-1] == 1:
        out = out[..., 0]
    if nds[0] == 1:
        out = out[..., 0, :] if nds[-1] == 2 else out[..., 0]
    return out


defvjp(
    np.linalg.multi_dot,
    "arrays, *, out=None",
    seq=("arrays",),
    arrays="multi_dot_vjp(g, arrays, k)",
    jvp=explicit(arrays="multi_dot_jvp(t, arrays, elt)"),
)

"""Elementwise and vector operations NumPy 2 added or real code calls: np.copysign, np.ldexp,
np.vecdot, np.linalg.vector_norm and np.linalg.matrix_norm, and the index builders whose
results carry no derivative (np.indices, np.tril_indices, np.triu_indices, np.diag_indices and
their `_from` forms). Each op's entry sits below the helpers its templates call (NumPy and
batched forms side by side, as rules/helpers.py says).

np.copysign(x1, x2) is |x1| with x2's sign: its derivative in x1 is +1 where the signs of x1 and
x2 agree (the sign bit: -0.0 counts as negative) and -1 where they differ; in x2 it is 0.
np.ldexp(x1, x2) = x1 * 2**x2 with x2 an integer: no derivative in x2. np.linalg.matrix_norm
is np.linalg.norm over the last two axes (the same rule); np.linalg.vector_norm treats every
reduced axis as one vector, with np.linalg.norm's subgradients (ties of the max norm share).
"""

import numpy as np

from .common import _axes, batched_expand_reduced, expand_reduced
from .helpers import batched_of, helper
from .registry import ELEMENTWISE, defvjp, explicit, nondiff, reduction

# ----------------------------------------------------------------------------- copysign, ldexp

defvjp(
    np.copysign,
    "x1, x2, /",
    inert=("x2",),  # piecewise constant in x2
    x1="unbroadcast(g * np.copysign(1.0, x1) * np.copysign(1.0, x2), x1)",
    jvp=ELEMENTWISE,
)
defvjp(
    np.ldexp,
    "x1, x2, /",
    inert=("x2",),  # an integer exponent
    x1="unbroadcast(g * np.ldexp(1.0, x2), x1)",
    jvp=ELEMENTWISE,
)

# ----------------------------------------------------------------------------- vecdot


@helper
def _core_last(v, ndim_v, axis, n_out):
    """`v` (of `ndim_v` axes after leading batch axes) with its core axis (`axis`, its own) moved
    last and size-1 loop axes put in front of its own, so that they number `n_out`."""
    lead = np.ndim(v) - ndim_v
    moved = np.moveaxis(v, lead + axis % ndim_v, -1)
    shape = np.shape(moved)
    return np.reshape(moved, shape[:lead] + (1,) * (n_out - ndim_v + 1) + shape[lead:])


@helper(
    batch_safe=True,
    jvp=explicit(
        g="vecdot_vjp(t, x, other, axis, ndim_other)",
        other="vecdot_vjp(g, x, t, axis, ndim_other)",
    ),
)
def vecdot_vjp(g, x, other, axis, ndim_other):
    """The cotangent of np.vecdot(x, other, axis=axis) for x (real values): g times `other`
    along its core axis, summed to x's shape. `axis` is each operand's own (NumPy's gufunc
    rule); `g` and `other` (of `ndim_other` axes) may have leading batch axes."""
    nx = np.ndim(x)
    n_out = max(nx, ndim_other) - 1
    c = np.expand_dims(g, -1) * _core_last(other, ndim_other, axis, n_out)
    lead = np.ndim(c) - 1 - n_out
    extra = n_out - (nx - 1)  # loop axes x does not have
    if extra:
        c = np.sum(c, axis=tuple(range(lead, lead + extra)))
    loop = [s for d, s in enumerate(np.shape(x)) if d != axis % nx]
    ones = tuple(lead + d for d, s in enumerate(loop) if s == 1 and np.shape(c)[lead + d] != 1)
    if ones:
        c = np.sum(c, axis=ones, keepdims=True)
    return np.moveaxis(c, -1, lead + axis % nx)


@helper(batch_safe=True)
def vecdot_jvp(t, x, other, axis, ndim_other):
    """The tangent of np.vecdot(x, other, axis=axis) along `t` for x (leading axes of `t` and
    `other` a batch)."""
    n_out = max(np.ndim(x), ndim_other) - 1
    tm = _core_last(t, np.ndim(x), axis, n_out)
    return np.sum(tm * _core_last(other, ndim_other, axis, n_out), axis=-1)


if hasattr(np, "vecdot"):  # NumPy 2
    defvjp(
        np.vecdot,
        "x1, x2, /, *, axis=-1",
        x1="vecdot_vjp(g, x1, x2, axis, np.ndim(x2))",
        x2="vecdot_vjp(g, x2, x1, axis, np.ndim(x1))",
        jvp=explicit(
            x1="vecdot_jvp(t, x1, x2, axis, np.ndim(x2))",
            x2="vecdot_jvp(t, x2, x1, axis, np.ndim(x1))",
        ),
    )

# ----------------------------------------------------------------------------- vector_norm
# ||x||_p over the reduced axes (all of them for axis=None, flattened), with np.linalg.norm's
# subgradients: sign(x) for p=1, ties of |x| sharing for p=+-inf, 0 for p=0.


@helper
def _unreduce(v, x, axis, keepdims):
    """`v` (the shape of a reduction of x over `axis`, after leading batch axes) with the
    reduced axes put back as length 1, to broadcast against x."""
    ndim = np.ndim(x)
    axes = _axes(axis, ndim)
    if keepdims:
        return v
    lead = np.ndim(v) - (ndim - len(axes))
    return np.expand_dims(v, tuple(lead + d for d in axes))


@helper
def _vector_norm_weights(x, ans, axis, keepdims, ord):
    """d ||x||_ord / dx over the reduced axes (a subgradient where it is not smooth)."""
    x = np.asarray(x, dtype=np.result_type(x, np.float64))
    norm = _unreduce(ans, x, axis, keepdims)
    if ord in (np.inf, -np.inf):
        hit = np.abs(x) == norm
        return np.sign(x) * hit / np.sum(hit, axis=_axes(axis, x.ndim), keepdims=True)
    if ord == 0:
        return np.zeros(x.shape)
    if ord == 1:
        return np.sign(x)
    safe = np.where(norm > 0, norm, 1.0)
    return np.where(norm > 0, np.sign(x) * (np.abs(x) / safe) ** (ord - 1), 0.0)


@helper(
    jvp=explicit(
        g="vector_norm_vjp(t, x, ans, axis, keepdims, ord)",
        x="vector_norm_vjp_jvp(t, g, x, ans, axis, keepdims, ord, False)",
        ans="vector_norm_vjp_jvp(t, g, x, ans, axis, keepdims, ord, True)",
        batched={"g": "batched_vector_norm_vjp(t, x, ans, axis, keepdims, ord)"},
    )
)
def vector_norm_vjp(g, x, ans, axis=None, keepdims=False, ord=2):
    """The cotangent of np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)."""
    return expand_reduced(g, x, axis, keepdims) * _vector_norm_weights(x, ans, axis, keepdims, ord)


@batched_of(vector_norm_vjp)
def batched_vector_norm_vjp(g, x, ans, axis=None, keepdims=False, ord=2):
    weights = _vector_norm_weights(x, ans, axis, keepdims, ord)
    return batched_expand_reduced(g, x, axis, keepdims) * weights


@helper(batch_safe=True)
def vector_norm_vjp_jvp(t, g, x, ans, axis=None, keepdims=False, ord=2, of_ans=False):
    """The tangent of vector_norm_vjp(g, x, ans, ...) along `t` for x (for ans with `of_ans`);
    `t` may have leading batch axes. Zero for the piecewise linear norms (1, inf, 0)."""
    x = np.asarray(x, dtype=np.result_type(x, np.float64))
    gx = _unreduce(g, x, axis, keepdims)
    norm = _unreduce(ans, x, axis, keepdims)
    if ord in (1, 0, np.inf, -np.inf):
        return np.zeros(np.shape(gx * (_unreduce(t, x, axis, keepdims) if of_ans else t) * x))
    safe = np.where(norm > 0, norm, 1.0)
    ax = np.abs(x)
    if of_ans:
        tn = _unreduce(t, x, axis, keepdims)
        d = -(ord - 1) * np.sign(x) * ax ** (ord - 1) / safe**ord * tn
    else:
        d = (ord - 1) * ax ** (ord - 2) / safe ** (ord - 1) * t if ord != 1 else 0.0 * t
    return np.where(norm > 0, gx * d, 0.0)


if hasattr(np.linalg, "vector_norm"):  # NumPy 2
    defvjp(
        np.linalg.vector_norm,
        "x, /, *, axis=None, keepdims=False, ord=2",
        x="vector_norm_vjp(g, x, ans, axis, keepdims, ord)",
        jvp=reduction("x"),
    )
    # np.linalg.norm over the last two axes: its rule (rules/solvers.py)
    defvjp(
        np.linalg.matrix_norm,
        "x, /, *, keepdims=False, ord='fro'",
        x="norm_vjp(g, x, ans, ord=ord, axis=(-2, -1), keepdims=keepdims)",
        jvp=explicit(  # the weights of a cotangent of ones, times t, summed over the matrices
            x="np.sum(norm_vjp(np.ones(np.shape(ans)), x, ans, ord=ord, axis=(-2, -1), "
            "keepdims=keepdims) * t, axis=(-2, -1), keepdims=keepdims)"
        ),
    )

# ----------------------------------------------------------------------------- index builders

nondiff(
    np.indices,
    np.tril_indices,
    np.triu_indices,
    np.diag_indices,
    np.tril_indices_from,
    np.triu_indices_from,
    np.diag_indices_from,
    np.mask_indices,
)

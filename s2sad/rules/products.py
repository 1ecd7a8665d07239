"""Products: matmul, dot, outer, einsum and trace, each op's entry below the helpers its
templates call (NumPy, batched and Numba forms side by side, as rules/helpers.py says). Batched
matmul transposes only the last two axes and sums broadcast batches. Numba's matmul and dot take
vectors and matrices (no stacks), so their Numba forms cover those four cases.
"""

import typing

import numpy as np

from .common import _array, _flat, _lift, _shift, batched_unbroadcast, reshape_like, unbroadcast
from .helpers import batched_helper, batched_of, helper, numba_jitable, numba_of, type_test
from .matrix_products import _mm, _mm_stacks
from .registry import defvjp, explicit, linear, multilinear

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types

# ----------------------------------------------------------------------------- matmul


@helper
def _mT(a):
    return np.swapaxes(a, -1, -2)


@helper
def matmul_stacks(a, b):
    """`a @ b` in jitted code where an operand may be a stack of matrices (pipeline/lower.py)."""
    return np.matmul(a, b)


@type_test
def _sequence(t):
    """A list or tuple of numbers written as an operand (`[1.0, 2.0] @ x`)."""
    return isinstance(t, (types.List, types.BaseTuple))


@numba_of(matmul_stacks)
def _matmul_stacks(a, b):
    if _sequence(a) or _sequence(b):
        return lambda a, b: _mm(np.asarray(a), np.asarray(b))
    return lambda a, b: _mm(a, b)


@numba_jitable
def _outer(a, b):
    """The outer product of two vectors (np.outer compiles slowly in Numba)."""
    return np.expand_dims(a, 1) * b


@helper(jvp=multilinear("g", "b"))
def matmul_vjp_lhs(g, a, b):
    """Cotangent of `a` in `a @ b`: batched, 1-D operands as in np.matmul."""
    a_nd, b_nd = np.ndim(a), np.ndim(b)
    if a_nd == 1 and b_nd == 1:  # (np.multiply: `b` may be a list, `g` a NumPy number)
        return np.multiply(g, b)
    if a_nd <= 2 and b_nd <= 2:  # no batch axes: plain products, nothing to unbroadcast
        # np.transpose, not .T: an operand the user passes as a nested list works in the primal
        return np.outer(g, b) if b_nd == 1 else (b @ g if a_nd == 1 else g @ np.transpose(b))
    if b_nd == 1:
        return unbroadcast(np.expand_dims(g, -1) * b, a)
    if a_nd == 1:
        return unbroadcast(np.squeeze(b @ np.expand_dims(g, -1), -1), a)
    return unbroadcast(g @ _mT(b), a)


@batched_of(matmul_vjp_lhs)
def batched_matmul_vjp_lhs(g, a, b):
    """Cotangent of `a` in `a @ b`, for each row of `g`."""
    a_nd, b_nd = np.ndim(a), np.ndim(b)
    if a_nd == 1 and b_nd == 1:
        return np.expand_dims(g, -1) * b
    if b_nd == 1:
        return batched_unbroadcast(np.expand_dims(g, -1) * b, a)
    if a_nd == 1:
        return batched_unbroadcast(np.squeeze(b @ np.expand_dims(g, -1), -1), a)
    return batched_unbroadcast(g @ _mT(b), a)


@numba_of(matmul_vjp_lhs)
def _matmul_vjp_lhs(g, a, b):
    if _sequence(a) or _sequence(b):  # (a list operand: its array)
        return lambda g, a, b: matmul_vjp_lhs(g, np.asarray(a), np.asarray(b))
    if not (_array(a) and _array(b)):
        return None
    if a.ndim > 2 or b.ndim > 2:  # stacks of matrices
        if a.ndim == 1 or b.ndim == 1:
            return None
        if g.dtype == b.dtype and g.ndim == 3:
            return lambda g, a, b: unbroadcast(_mm_stacks(g, b, 1), a)
        return lambda g, a, b: unbroadcast(_mm(g, np.swapaxes(b, -1, -2)), a)
    if a.ndim == 1 and b.ndim == 1:
        return lambda g, a, b: g * b
    if b.ndim == 1:
        return lambda g, a, b: _outer(g, b)
    if a.ndim == 1:
        return lambda g, a, b: _mm(b, g)
    return lambda g, a, b: _mm(g, b.T)


@helper(jvp=multilinear("g", "a"))
def matmul_vjp_rhs(g, a, b):
    """Cotangent of `b` in `a @ b`: batched, 1-D operands as in np.matmul."""
    a_nd, b_nd = np.ndim(a), np.ndim(b)
    if a_nd == 1 and b_nd == 1:
        return np.multiply(g, a)
    if a_nd <= 2 and b_nd <= 2:
        return np.outer(a, g) if a_nd == 1 else np.transpose(a) @ g
    if a_nd == 1:
        return unbroadcast(np.expand_dims(a, -1) * np.expand_dims(g, -2), b)
    if b_nd == 1:
        return unbroadcast(np.squeeze(_mT(a) @ np.expand_dims(g, -1), -1), b)
    return unbroadcast(_mT(a) @ g, b)


@helper(jvp=multilinear("g", "a"))
def matmul_vjp_rhs_to(g, a, b, y):
    """`unbroadcast(matmul_vjp_rhs(g, a, b), y)`, for NumPy mode's own gradients
    (pipeline/sum_first.py): where `y` has one column, `b` made from it by broadcasting along
    its last axis (GMM's `x - mu`), the columns of `g` are summed first (those of `a.T @ g` are
    `a.T` times g's: the sum commutes with the product), one column multiplied, not all."""
    if np.ndim(a) >= 2 and np.ndim(b) >= 2 and np.ndim(y) >= 1 and np.shape(y)[-1] == 1:
        return unbroadcast(_mT(a) @ np.sum(g, axis=-1, keepdims=True), y)
    return unbroadcast(matmul_vjp_rhs(g, a, b), y)


@batched_of(matmul_vjp_rhs)
def batched_matmul_vjp_rhs(g, a, b):
    """Cotangent of `b` in `a @ b`, for each row of `g`."""
    a_nd, b_nd = np.ndim(a), np.ndim(b)
    if a_nd == 1 and b_nd == 1:
        return np.expand_dims(g, -1) * a
    if a_nd == 1:
        return batched_unbroadcast(np.expand_dims(a, -1) * np.expand_dims(g, -2), b)
    if b_nd == 1:
        return batched_unbroadcast(np.squeeze(_mT(a) @ np.expand_dims(g, -1), -1), b)
    return batched_unbroadcast(_mT(a) @ g, b)


@numba_of(matmul_vjp_rhs)
def _matmul_vjp_rhs(g, a, b):
    if _sequence(a) or _sequence(b):  # (a list operand: its array)
        return lambda g, a, b: matmul_vjp_rhs(g, np.asarray(a), np.asarray(b))
    if not (_array(a) and _array(b)):
        return None
    if a.ndim > 2 or b.ndim > 2:  # stacks of matrices
        if a.ndim == 1 or b.ndim == 1:
            return None
        if a.dtype == g.dtype and g.ndim == 3:
            return lambda g, a, b: unbroadcast(_mm_stacks(a, g, 2), b)
        return lambda g, a, b: unbroadcast(_mm(np.swapaxes(a, -1, -2), g), b)
    if a.ndim == 1 and b.ndim == 1:
        return lambda g, a, b: g * a
    if a.ndim == 1:
        return lambda g, a, b: _outer(a, g)
    return lambda g, a, b: _mm(a.T, g)


@batched_helper
def batched_matmul(a, b, which):
    """`a @ b` with the batch on argument `which` (0 or 1)."""
    if which == 0:
        t, rank = a, np.ndim(a) - 1
        if np.ndim(b) == 1:
            return t @ b
        if rank == 1:  # a vector times a matrix: the batch rows form a matrix
            return np.moveaxis(t @ b, -2, 0)
        return _lift(t, np.ndim(b)) @ b
    t, rank = b, np.ndim(b) - 1
    if rank == 1:
        return np.moveaxis(a @ np.moveaxis(t, 0, -1), -1, 0)
    if np.ndim(a) == 1:
        return a @ t
    return a @ _lift(t, np.ndim(a))


defvjp(
    np.matmul,
    "x1, x2, /",
    x1="matmul_vjp_lhs(g, x1, x2)",
    x2="matmul_vjp_rhs(g, x1, x2)",
    jvp=multilinear("x1", "x2", batched=batched_matmul),
)

# ----------------------------------------------------------------------------- dot and outer


@helper(jvp=multilinear("g", "b"))
def dot_vjp_lhs(g, a, b):
    """Cotangent of `a` in np.dot(a, b) (sum over a's last and b's second-to-last axis)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(g * b, a)
    if np.ndim(a) <= 2 and np.ndim(b) <= 2:  # np.dot is np.matmul here
        return matmul_vjp_lhs(g, a, b)
    b_axis = 0 if np.ndim(b) == 1 else np.ndim(b) - 2
    b_rest = [i for i in range(np.ndim(b)) if i != b_axis]
    g_rest = list(range(np.ndim(a) - 1, np.ndim(g)))
    return np.tensordot(g, b, axes=(g_rest, b_rest))


@batched_of(dot_vjp_lhs)
def batched_dot_vjp_lhs(g, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return batched_unbroadcast(g * b, a)
    b_axis = 0 if np.ndim(b) == 1 else np.ndim(b) - 2
    b_rest = [i for i in range(np.ndim(b)) if i != b_axis]
    g_rest = list(range(np.ndim(a), np.ndim(g)))  # after the batch and a's leading axes
    return np.tensordot(g, b, axes=(g_rest, b_rest))


@numba_of(dot_vjp_lhs)
def _dot_vjp_lhs(g, a, b):
    if not _array(a) or not _array(b):
        return lambda g, a, b: unbroadcast(g * b, a)
    return lambda g, a, b: matmul_vjp_lhs(g, a, b)


@helper(jvp=multilinear("g", "a"))
def dot_vjp_rhs(g, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(g * a, b)
    if np.ndim(a) <= 2 and np.ndim(b) <= 2:
        return matmul_vjp_rhs(g, a, b)
    a_lead = list(range(np.ndim(a) - 1))
    out = np.tensordot(a, g, axes=(a_lead, a_lead))  # (k,) + b.shape without b_axis
    if np.ndim(b) == 1:
        return out
    return np.moveaxis(out, 0, np.ndim(b) - 2)


@batched_of(dot_vjp_rhs)
def batched_dot_vjp_rhs(g, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return batched_unbroadcast(g * a, b)
    a_lead = list(range(np.ndim(a) - 1))
    out = np.tensordot(a, g, axes=(a_lead, [i + 1 for i in a_lead]))  # (k, B) + b's other axes
    out = np.moveaxis(out, 1, 0)
    if np.ndim(b) == 1:
        return out
    return np.moveaxis(out, 1, np.ndim(b) - 1)


@numba_of(dot_vjp_rhs)
def _dot_vjp_rhs(g, a, b):
    if not _array(a) or not _array(b):
        return lambda g, a, b: unbroadcast(g * a, b)
    return lambda g, a, b: matmul_vjp_rhs(g, a, b)


@batched_helper
def batched_dot(a, b, which):
    """np.dot(a, b) with the batch on argument `which`."""
    if which == 0:
        t, other, rank = a, b, np.ndim(a) - 1
        if rank == 0 or np.ndim(other) == 0:
            return _lift(t, np.ndim(other)) * other
        return np.dot(t, other)
    t, other, rank = b, a, np.ndim(b) - 1
    if rank == 0 or np.ndim(other) == 0:
        return other * _lift(t, np.ndim(other))
    b_axis = 0 if rank == 1 else rank - 2
    out = np.tensordot(other, t, axes=([np.ndim(other) - 1], [b_axis + 1]))
    return np.moveaxis(out, np.ndim(other) - 1, 0)


defvjp(
    np.dot,
    "a, b, out=None",
    a="dot_vjp_lhs(g, a, b)",
    b="dot_vjp_rhs(g, a, b)",
    jvp=multilinear("a", "b", batched=batched_dot),
)


@helper(jvp=multilinear("g", "b"))
def outer_vjp_lhs(g, a, b):
    return np.reshape(g @ np.ravel(b), np.shape(a))


@batched_of(outer_vjp_lhs)
def batched_outer_vjp_lhs(g, a, b):
    return np.reshape(g @ np.ravel(b), np.shape(g)[:1] + np.shape(a))


@numba_of(outer_vjp_lhs)
def _outer_vjp_lhs(g, a, b):
    if _array(a):
        return lambda g, a, b: reshape_like(_mm(g, _flat(b)), a)
    return lambda g, a, b: np.sum(_mm(g, _flat(b)))


@helper(jvp=multilinear("g", "a"))
def outer_vjp_rhs(g, a, b):
    return np.reshape(np.ravel(a) @ g, np.shape(b))


@batched_of(outer_vjp_rhs)
def batched_outer_vjp_rhs(g, a, b):
    return np.reshape(np.ravel(a) @ g, np.shape(g)[:1] + np.shape(b))


@numba_of(outer_vjp_rhs)
def _outer_vjp_rhs(g, a, b):
    if _array(b):
        return lambda g, a, b: reshape_like(_mm(_flat(a), g), b)
    return lambda g, a, b: np.sum(_mm(_flat(a), g))


@batched_helper
def batched_outer(a, b, which):
    """np.outer(a, b) with the batch on argument `which`."""
    if which == 0:
        rows = np.reshape(a, np.shape(a)[:1] + (-1,))
        return rows[:, :, None] * np.ravel(b)
    rows = np.reshape(b, np.shape(b)[:1] + (-1,))
    return np.ravel(a)[:, None] * rows[:, None, :]


defvjp(
    np.outer,
    "a, b, out=None",
    a="outer_vjp_lhs(g, a, b)",
    b="outer_vjp_rhs(g, a, b)",
    jvp=multilinear("a", "b", batched=batched_outer),
)

# ----------------------------------------------------------------------------- einsum

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"  # einsum's subscript letters


@helper
def einsum_parts(subscripts):
    """The letters of each input and of the output of np.einsum(subscripts, ...), the implicit
    output (the letters that occur once, sorted) spelled out."""
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        ins, out = subscripts.split("->")
        return ins.split(","), out
    ins = subscripts.split(",")
    letters = "".join(ins).replace(".", "")
    singles = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return ins, ("..." if any("..." in s for s in ins) else "") + singles


@helper(nondiff=True)
def einsum_explicit(subscripts, operands, k=0, lead=0):
    """np.einsum's call spelled out: the letters of each array and of the output, with '...'
    replaced by letters (right-aligned, as NumPy broadcasts) and sublists by letters; its arrays;
    and the position among them of operand `k` (the sublist form counts `k` in `operands`, -1
    for the array first), whose `lead` leading axes (a batch) are not its own."""
    if isinstance(subscripts, str):
        arrays, text = list(operands), subscripts.replace(" ", "")
    else:  # op0, sub0, op1, sub1, ..., [sub_out]
        args = [subscripts] + list(operands)
        pairs = args[: len(args) - len(args) % 2]
        arrays, subs = pairs[0::2], pairs[1::2]
        if len(args) % 2:
            out = args[-1]
        else:  # the implicit output: '...' first, then the labels used once, in order
            flat = [i for sub in subs for i in sub if i is not Ellipsis]
            out = [Ellipsis] * any(Ellipsis in sub for sub in subs)
            out += sorted(i for i in set(flat) if flat.count(i) == 1)

        def spell(sub):
            return "".join("..." if i is Ellipsis else _LETTERS[i] for i in sub)

        text = ",".join(spell(sub) for sub in subs) + "->" + spell(out)
        k = (k + 1) // 2
    ins, out = einsum_parts(text)
    if "..." in text:
        free = [c for c in _LETTERS if c not in text]
        dims = [
            np.ndim(x) - (lead if i == k else 0) - len(s.replace("...", "")) if "..." in s else 0
            for i, (s, x) in enumerate(zip(ins, arrays))
        ]
        n = max(dims)
        ell = "".join(free[:n])
        ins = [s.replace("...", ell[n - d :]) for s, d in zip(ins, dims)]
        out = out.replace("...", ell)
    return ins, out, arrays, k


@helper
def einsum_cotangent(g, ins, out, arrays, k, batch=False):
    """The cotangent of arrays[k] in np.einsum of explicit letters (einsum_explicit), at the
    sizes its letters broadcast to (the caller sums them back to its shape); `batch`: `g` has a
    leading batch axis."""
    sizes = {}
    for s, x in zip(ins, arrays):
        for c, n in zip(s, np.shape(x)):
            sizes[c] = max(sizes.get(c, 1), n)
    target = ins[k]
    z = next(c for c in _LETTERS if c not in "".join(ins) + out) if batch else ""
    others = [s for i, s in enumerate(ins) if i != k]
    other_ops = [op for i, op in enumerate(arrays) if i != k]
    available = set(out).union(*others) if others else set(out)
    unique = "".join(dict.fromkeys(c for c in target if c in available))
    # a product large enough that BLAS beats einsum's own loops by more than the path search
    # costs (about 20 µs) goes through np.tensordot where it is a matrix product
    work = np.prod([n for n in sizes.values()], dtype=float) * (np.shape(g)[0] if batch else 1)
    spec = ",".join([z + out] + others) + "->" + z + unique
    res = np.einsum(spec, g, *other_ops, optimize="greedy" if work > 1e5 else False)
    # letters summed only inside operand k: broadcast the cotangent over them
    full = "".join(dict.fromkeys(target))
    for c in full:
        if c not in unique:
            res = np.expand_dims(res, -1)
            unique += c
    rows = np.shape(res)[:1] if batch else ()
    res = np.broadcast_to(res, rows + tuple(sizes[c] for c in unique))
    res = np.transpose(res, list(range(len(rows))) + [unique.index(c) + len(rows) for c in full])
    if len(full) == len(target):
        return np.array(res)
    # repeated letters (a diagonal such as 'ii'): place the values on that diagonal
    shape = tuple(sizes[c] for c in target)
    grid = np.indices(shape)
    on_diag = np.ones(shape, dtype=bool)
    first = {}
    for pos, c in enumerate(target):
        if c in first:
            on_diag &= grid[pos] == grid[first[c]]
        else:
            first[c] = pos
    index = (slice(None),) * len(rows) + tuple(grid[first[c]] for c in full)
    return np.where(on_diag, res[index], 0.0)


_EINSUM_JVP = explicit(
    g="einsum_vjp(t, subscripts, operands, k)",
    subscripts="einsum_vjp_jvp(t, g, subscripts, operands, k, -1)",
    operands="einsum_vjp_jvp(t, g, subscripts, operands, k, elt)",
    batched={
        "g": "batched_einsum_vjp(t, subscripts, operands, k)",
        "subscripts": "batched_einsum_vjp_jvp(t, g, subscripts, operands, k, -1)",
        "operands": "batched_einsum_vjp_jvp(t, g, subscripts, operands, k, elt)",
    },
)


@helper(jvp=_EINSUM_JVP)
def einsum_vjp(g, subscripts, operands, k):
    """Cotangent of operand `k` of np.einsum(subscripts, *operands): `...` and the sublist form
    (`k` counts in `operands`; -1: the first array) too; broadcast axes are summed back."""
    ins, out, arrays, k = einsum_explicit(subscripts, operands, k)
    return unbroadcast(einsum_cotangent(g, ins, out, arrays, k), arrays[k])


@batched_of(einsum_vjp)
def batched_einsum_vjp(g, subscripts, operands, k):
    """Cotangent of operand `k` of np.einsum(subscripts, *operands), for each row of `g`."""
    ins, out, arrays, k = einsum_explicit(subscripts, operands, k)
    return batched_unbroadcast(einsum_cotangent(g, ins, out, arrays, k, True), arrays[k])


@helper
def einsum_vjp_jvp(t, g, subscripts, operands, k, which):
    """The tangent of einsum_vjp(g, subscripts, operands, k) along `t` for operand `which` (-1:
    the first array of the sublist form): the cotangent of operand k is linear in every other
    operand and does not read operand k."""
    if which == k:
        own = subscripts if k == -1 else operands[k]
        return np.zeros(np.shape(own), dtype=np.result_type(t, np.float32))
    operands = list(operands)
    if which == -1:
        subscripts = t
    else:
        operands[which] = t
    return einsum_vjp(g, subscripts, operands, k)


@batched_helper
def batched_einsum_vjp_jvp(t, g, subscripts, operands, k, which):
    return np.stack([einsum_vjp_jvp(row, g, subscripts, operands, k, which) for row in t])


@batched_helper
def batched_einsum(subscripts, *operands, which=0):
    """np.einsum with the batch on operand `which` (in the sublist form: 0 is the first array,
    else a position in `operands`): one more letter for the batch axis."""
    ins, out, arrays, k = einsum_explicit(subscripts, operands, which, lead=1)
    z = next(c for c in _LETTERS if c not in "".join(ins) + out)
    ins[k] = z + ins[k]
    return np.einsum(",".join(ins) + "->" + z + out, *arrays)


defvjp(
    np.einsum,
    "subscripts, /, *operands",
    seq=("operands",),
    subscripts="einsum_vjp(g, subscripts, operands, -1)",
    operands="einsum_vjp(g, subscripts, operands, k)",
    jvp=multilinear("subscripts", "operands", batched=batched_einsum),
)

# ----------------------------------------------------------------------------- trace


@helper(jvp=linear("g"))
def trace_vjp(g, a, offset=0, axis1=0, axis2=1):
    shape = np.shape(a)
    eye = np.eye(shape[axis1], shape[axis2], k=offset)
    rest = [n for i, n in enumerate(shape) if i not in (axis1 % len(shape), axis2 % len(shape))]
    full = np.reshape(g, tuple(rest) + (1, 1)) * eye
    return np.moveaxis(full, (-2, -1), (axis1, axis2))


@batched_of(trace_vjp)
def batched_trace_vjp(g, a, offset=0, axis1=0, axis2=1):
    shape = np.shape(a)
    axis1, axis2 = axis1 % len(shape), axis2 % len(shape)
    eye = np.eye(shape[axis1], shape[axis2], k=offset)
    rest = tuple(n for i, n in enumerate(shape) if i not in (axis1, axis2))
    full = np.reshape(g, np.shape(g)[:1] + rest + (1, 1)) * eye
    return np.moveaxis(full, (-2, -1), (axis1 + 1, axis2 + 1))


@numba_of(trace_vjp)
def _trace_vjp(g, a, offset=0, axis1=0, axis2=1):
    if not _array(a) or a.ndim != 2:
        return None

    def impl(g, a, offset=0, axis1=0, axis2=1):
        out = np.zeros(a.shape)
        for i in range(a.shape[0]):
            j = i + offset
            if 0 <= j < a.shape[1]:
                out[i, j] = g
        if axis1 % 2 == 1 and axis2 % 2 == 0:  # the trace of the transpose
            return out.T.copy()
        return out

    return impl


@helper
def trace_last(a):
    """The trace over the last two axes (of each matrix in a stack)."""
    return np.trace(a, axis1=-2, axis2=-1)


@numba_of(trace_last)
def _trace_last(a):
    if _array(a) and a.ndim == 2:  # Numba's np.trace takes no axes: matrices only
        return lambda a: np.trace(a)
    return None


@batched_helper
def batched_trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return np.trace(a, offset, _shift(axis1), _shift(axis2), dtype)


defvjp(
    np.trace,
    "a, offset=0, axis1=0, axis2=1, dtype=None, out=None",
    a="trace_vjp(g, a, offset=offset, axis1=axis1, axis2=axis2)",
    jvp=linear("a", batched=batched_trace),
)

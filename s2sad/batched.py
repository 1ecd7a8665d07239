"""Helpers that batched generated code calls: the one-sweep Jacobian (`s2sad.jacobian`).

In batched code every cotangent (reverse mode) or tangent (forward mode) carries one extra leading
axis, the batch: row `b` is the derivative along basis direction `b`. Primal values never do. Each
helper here is the batched counterpart of a helper in `runtime.py`, or of a NumPy function applied
to a tangent, with the same arguments: it reads axis 0 of the cotangent or tangent as the batch
and the axes after it as the value's own axes. An axis argument therefore moves up by one (a
negative axis counts from the end and stays).

Elementwise arithmetic needs no counterpart: NumPy broadcasting aligns shapes on the right, so
`g * np.cos(x)` is right for a batched `g` as long as `g` has the full shape `(B,) + x.shape`.
Like `runtime.py`, these are plain NumPy functions.
"""

import string

import numpy as np

from .runtime import (
    _axes,
    _count,
    _is_basic,
    _mT,
    _norm_kind,
    _nonzero,
    einsum_parts,
    einsum_vjp_jvp,
    expand_reduced,
    extremum_vjp,
    norm_vjp,
    prod_vjp,
    solve_columns,
    solve_jvp_a,
    solve_reads_vectors,
    solve_vjp_b_unreduced,
    std_vjp,
    var_vjp,
)

# ----------------------------------------------------------------------------- the batch axis


def _shift(axis):
    """An axis (or tuple of axes) of a value, as an axis of its batched counterpart."""
    if isinstance(axis, (tuple, list)):
        return tuple(_shift(a) for a in axis)
    return axis + 1 if axis >= 0 else axis


def _lift(t, ndim):
    """`t` with size-1 axes inserted after the batch axis, so its value part has `ndim` axes."""
    missing = ndim - (np.ndim(t) - 1)
    if missing <= 0:
        return t
    t = np.asarray(t)
    return np.reshape(t, t.shape[:1] + (1,) * missing + t.shape[1:])


def batched_lift(t, like):
    """`t` with as many value axes as `like` has axes: broadcasts against `like` row by row."""
    return _lift(t, np.ndim(like))


def batched_zeros(batch, x):
    """A zero cotangent or tangent: `batch` rows shaped like `x`.

    `x` may be a function giving the value (`lambda: v`) where `v` may be unassigned, a name a
    loop assigns that the loop may never have reached; its adjoint is then never read."""
    if callable(x):
        try:
            x = x()
        except NameError:
            return 0.0
    dtype = np.result_type(x, np.float32) if isinstance(x, (np.ndarray, np.generic)) else float
    return np.zeros((batch,) + np.shape(x), dtype=dtype)


def batched_accumulator(dx, x):
    """A fresh array holding the batched `dx`, safe to update in place."""
    out = np.zeros(np.shape(dx)[:1] + np.shape(x), dtype=np.result_type(dx, x, np.float32))
    out += dx
    return out


def stack_rows(rows):
    """One row per batch element, from a rule applied row by row (a tuple of stacks for a rule
    giving several cotangents)."""
    if isinstance(rows[0], tuple):
        return tuple(np.stack([np.asarray(r[k]) for r in rows]) for k in range(len(rows[0])))
    return np.stack([np.asarray(r) for r in rows])


# ----------------------------------------------------------------------------- broadcasting


def batched_unbroadcast(g, x):
    """Sum each row of `g` down to the shape of `x`, undoing NumPy broadcasting; never sums the
    batch axis."""
    shape = np.shape(x)
    inner = np.shape(g)[1:]
    if inner == shape:
        return g
    if len(inner) < len(shape):
        g = _lift(g, len(shape))
        return np.broadcast_to(g, np.shape(g)[:1] + shape)
    lead = len(inner) - len(shape)
    if lead > 0:
        g = np.sum(g, axis=tuple(range(1, lead + 1)))
    axes = tuple(i + 1 for i, n in enumerate(shape) if n == 1 and np.shape(g)[i + 1] != 1)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    return np.reshape(g, np.shape(g)[:1] + shape)


def batched_broadcast_to(array, shape, subok=False):
    """np.broadcast_to on every row."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    t = _lift(array, len(shape))
    return np.broadcast_to(t, np.shape(t)[:1] + shape)


# ----------------------------------------------------------------------------- reductions


def batched_sum(a, axis=None, dtype=None, out=None, keepdims=False):
    """np.sum of every row; `axis=None` sums each row to a number."""
    ndim = np.ndim(a) - 1
    axes = tuple(n + 1 for n in _axes(axis, ndim))
    return np.sum(a, axis=axes, dtype=dtype, keepdims=keepdims)


def batched_mean(a, axis=None, dtype=None, out=None, keepdims=False):
    """np.mean of every row."""
    ndim = np.ndim(a) - 1
    axes = tuple(n + 1 for n in _axes(axis, ndim))
    return np.mean(a, axis=axes, dtype=dtype, keepdims=keepdims)


def batched_expand_reduced(g, x, axis=None, keepdims=False):
    """Broadcast each row of a reduction's cotangent back over the reduced axes of `x`."""
    g = np.asarray(g)
    if not keepdims:
        g = np.expand_dims(g, tuple(a + 1 for a in _axes(axis, np.ndim(x))))
    return np.broadcast_to(g, g.shape[:1] + np.shape(x))


def batched_mean_vjp(g, x, axis=None, keepdims=False):
    return batched_expand_reduced(g, x, axis, keepdims) / _count(x, axis)


# The adjoint of these reductions is an elementwise weight times the cotangent broadcast over the
# reduced axes: the weight is the unbatched adjoint of a cotangent of ones.


def batched_prod_vjp(g, x, ans, axis=None, keepdims=False):
    weights = prod_vjp(np.ones(np.shape(ans)), x, ans, axis, keepdims)
    return batched_expand_reduced(g, x, axis, keepdims) * weights


def batched_extremum_vjp(g, x, ans, axis=None, keepdims=False):
    weights = extremum_vjp(np.ones(np.shape(ans)), x, ans, axis, keepdims)
    return batched_expand_reduced(g, x, axis, keepdims) * weights


def batched_var_vjp(g, x, axis=None, ddof=0, keepdims=False):
    ones = np.ones(np.shape(g)[1:])
    return batched_expand_reduced(g, x, axis, keepdims) * var_vjp(ones, x, axis, ddof, keepdims)


def batched_std_vjp(g, x, ans, axis=None, ddof=0, keepdims=False):
    weights = std_vjp(np.ones(np.shape(ans)), x, ans, axis, ddof, keepdims)
    return batched_expand_reduced(g, x, axis, keepdims) * weights


def batched_norm_vjp(g, x, ans, ord=None, axis=None, keepdims=False):
    weights = norm_vjp(np.ones(np.shape(ans)), x, ans, ord, axis, keepdims)
    return batched_expand_reduced(g, x, axis, keepdims) * weights


# ----------------------------------------------------------------------------- linear algebra


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


def batched_dot_vjp_lhs(g, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return batched_unbroadcast(g * b, a)
    b_axis = 0 if np.ndim(b) == 1 else np.ndim(b) - 2
    b_rest = [i for i in range(np.ndim(b)) if i != b_axis]
    g_rest = list(range(np.ndim(a), np.ndim(g)))  # after the batch and a's leading axes
    return np.tensordot(g, b, axes=(g_rest, b_rest))


def batched_dot_vjp_rhs(g, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return batched_unbroadcast(g * a, b)
    a_lead = list(range(np.ndim(a) - 1))
    out = np.tensordot(a, g, axes=(a_lead, [i + 1 for i in a_lead]))  # (k, B) + b's other axes
    out = np.moveaxis(out, 1, 0)
    if np.ndim(b) == 1:
        return out
    return np.moveaxis(out, 1, np.ndim(b) - 1)


def batched_outer_vjp_lhs(g, a, b):
    return np.reshape(g @ np.ravel(b), np.shape(g)[:1] + np.shape(a))


def batched_outer_vjp_rhs(g, a, b):
    return np.reshape(np.ravel(a) @ g, np.shape(g)[:1] + np.shape(b))


def _batch_letter(subscripts):
    return next(c for c in string.ascii_letters if c not in subscripts)


def batched_einsum_vjp(g, subscripts, operands, k):
    """Cotangent of operand `k` of np.einsum(subscripts, *operands), for each row of `g`."""
    if "..." in subscripts:
        raise ValueError("s2sad's einsum derivative does not support '...' in subscripts")
    ins, out = einsum_parts(subscripts)
    z = _batch_letter(subscripts)
    target = ins[k]
    others = [s for i, s in enumerate(ins) if i != k]
    other_ops = [op for i, op in enumerate(operands) if i != k]
    available = set(out).union(*others) if others else set(out)
    unique = "".join(dict.fromkeys(c for c in target if c in available))
    res = np.einsum(",".join([z + out] + others) + "->" + z + unique, g, *other_ops)
    sizes = dict(zip(target, np.shape(operands[k])))
    full = "".join(dict.fromkeys(target))
    for c in full:  # letters summed only inside operand k: broadcast over them
        if c not in unique:
            res = np.expand_dims(res, -1)
            unique += c
    res = np.broadcast_to(res, res.shape[:1] + tuple(sizes[c] for c in unique))
    res = np.transpose(res, [0] + [unique.index(c) + 1 for c in full])
    if len(full) == len(target):
        return np.array(res)
    grid = np.indices(np.shape(operands[k]))  # a repeated letter: place values on the diagonal
    on_diag = np.ones(np.shape(operands[k]), dtype=bool)
    first = {}
    for pos, c in enumerate(target):
        if c in first:
            on_diag &= grid[pos] == grid[first[c]]
        else:
            first[c] = pos
    index = (slice(None),) + tuple(grid[first[c]] for c in full)
    return np.where(on_diag, res[index], 0.0)


def batched_trace_vjp(g, a, offset=0, axis1=0, axis2=1):
    shape = np.shape(a)
    axis1, axis2 = axis1 % len(shape), axis2 % len(shape)
    eye = np.eye(shape[axis1], shape[axis2], k=offset)
    rest = tuple(n for i, n in enumerate(shape) if i not in (axis1, axis2))
    full = np.reshape(g, np.shape(g)[:1] + rest + (1, 1)) * eye
    return np.moveaxis(full, (-2, -1), (axis1 + 1, axis2 + 1))


def batched_solve_vjp_b(g, a, b):
    # np.linalg.solve broadcasts over the batch axis
    return batched_unbroadcast(solve_vjp_b_unreduced(g, a, b), b)


def batched_solve_vjp_a(g, a, b, ans):
    gb = solve_vjp_b_unreduced(g, a, b)
    if solve_reads_vectors(a, b):
        return batched_unbroadcast(-gb[..., :, None] * ans[..., None, :], a)
    return batched_unbroadcast(-gb @ _mT(ans), a)


# ----------------------------------------------------------------------------- shape


def batched_reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """np.reshape of every row."""
    shape = newshape if shape is None else shape
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    rows = np.shape(a)[:1]
    if order == "F":  # the batch as the slowest axis in Fortran order
        moved = np.moveaxis(np.asarray(a), 0, -1)
        return np.moveaxis(np.reshape(moved, shape + rows, order="F"), -1, 0)
    return np.reshape(a, rows + shape)


def batched_ravel(a, order="C"):
    return batched_reshape(a, -1, order)


def batched_squeeze(a, axis=None):
    if axis is None:
        shape = np.shape(a)
        return np.reshape(a, shape[:1] + tuple(n for n in shape[1:] if n != 1))
    return np.squeeze(a, axis=_shift(axis))


def batched_expand_dims(a, axis):
    return np.expand_dims(a, _shift(axis))


def batched_transpose(a, axes=None):
    """np.transpose of every row."""
    ndim = np.ndim(a) - 1
    if axes is None:
        return np.transpose(a, (0,) + tuple(range(ndim, 0, -1)))
    return np.transpose(a, (0,) + tuple(int(n) % ndim + 1 for n in axes))


def batched_swapaxes(a, axis1, axis2):
    return np.swapaxes(a, _shift(axis1), _shift(axis2))


def batched_moveaxis(a, source, destination):
    return np.moveaxis(a, _shift(source), _shift(destination))


def batched_trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return np.trace(a, offset, _shift(axis1), _shift(axis2), dtype)


def batched_concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    if axis is None:
        return np.concatenate([np.reshape(t, np.shape(t)[:1] + (-1,)) for t in arrays], axis=1)
    return np.concatenate(arrays, axis=_shift(axis))


def batched_stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    return np.stack(arrays, axis=_shift(axis))


def batched_concatenate_vjp(g, arrays, k, axis=0):
    """The rows of np.concatenate's cotangent that belong to input `k`."""
    if axis is None:
        start = sum(np.size(a) for a in arrays[:k])
        piece = g[:, start : start + np.size(arrays[k])]
        return np.reshape(piece, np.shape(g)[:1] + np.shape(arrays[k]))
    axis = axis % np.ndim(arrays[k])
    start = sum(np.shape(a)[axis] for a in arrays[:k])
    index = [slice(None)] * np.ndim(g)
    index[axis + 1] = slice(start, start + np.shape(arrays[k])[axis])
    return g[tuple(index)]


def batched_stack_vjp(g, k, axis=0):
    """The rows of np.stack's cotangent that belong to input `k`."""
    return np.moveaxis(g, axis % (np.ndim(g) - 1) + 1, 1)[:, k]


# ----------------------------------------------------------------------------- indexing


def batched_index(g, index):
    """The index that applies `index` to every row of `g`.

    `(slice(None),) + index` does, except where NumPy moves the axes of advanced indices to the
    front (integer arrays separated by a slice): the batch then becomes an advanced index too."""
    items = index if isinstance(index, tuple) else (index,)

    def advanced(i):
        return not (i is None or i is Ellipsis or isinstance(i, slice))

    where = [p for p, i in enumerate(items) if advanced(i)]
    arrays = any(not isinstance(items[p], (int, np.integer)) for p in where)
    if not arrays or where == list(range(where[0], where[-1] + 1)):
        return (slice(None),) + items
    expanded = []
    for i in items:
        if advanced(i) and np.asarray(i).dtype == bool:
            expanded.extend(np.nonzero(i))
        else:
            expanded.append(i)
    shape = np.broadcast_shapes(*(np.shape(i) for i in expanded if advanced(i)))
    rows = np.arange(np.shape(g)[0]).reshape((-1,) + (1,) * len(shape))
    return (rows,) + tuple(expanded)


def batched_add_at(dx, index, g):
    """np.add.at on every row: repeated indices add up."""
    np.add.at(dx, batched_index(dx, index), g)


def batched_getitem_vjp(g, x, index):
    """Scatter each row of the cotangent of `x[index]` back; repeated integer indices add up."""
    dx = np.zeros(np.shape(g)[:1] + np.shape(x), dtype=np.result_type(g, np.float32))
    if _is_basic(index):
        dx[(slice(None),) + (index if isinstance(index, tuple) else (index,))] += g
    else:
        np.add.at(dx, batched_index(dx, index), g)
    return dx


# ----------------------------------------------------------------------------- forward mode
# Tangents of multilinear operations: `which` names the argument that carries the batch.


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


def batched_outer(a, b, which):
    """np.outer(a, b) with the batch on argument `which`."""
    if which == 0:
        rows = np.reshape(a, np.shape(a)[:1] + (-1,))
        return rows[:, :, None] * np.ravel(b)
    rows = np.reshape(b, np.shape(b)[:1] + (-1,))
    return np.ravel(a)[:, None] * rows[:, None, :]


def batched_einsum(subscripts, *operands, which=0):
    """np.einsum with the batch on operand `which`: one more letter for the batch axis."""
    ins, out = einsum_parts(subscripts)
    z = _batch_letter(subscripts)
    ins[which] = z + ins[which]
    return np.einsum(",".join(ins) + "->" + z + out, *operands)


def batched_solve_jvp_a(t, a, b, ans):
    """The tangent of solve(a, b) along a batched t for a, which may broadcast over fewer
    matrices than the result has."""
    matrices = np.ndim(ans) - (1 if solve_reads_vectors(a, b) else 2)
    return solve_jvp_a(_lift(t, matrices + 2), a, b, ans)


def batched_solve_jvp_b(t, a, b, ans):
    return solve_columns(a, _lift(t, np.ndim(ans)), b)


def batched_scattered(t, index, like):
    """The tangent of scatter_added(like, index, values) along a batched tangent `t` of values:
    each row of `t` added at `index` into zeros shaped like `like`."""
    out = np.zeros(np.shape(t)[:1] + np.shape(like), dtype=np.result_type(t, like))
    batched_add_at(out, index, _lift(t, np.ndim(np.asarray(like)[index])))
    return out


# ----------------------------------------------------------------------------- second derivatives
# Tangents of runtime helpers along a batched tangent `t` of one of their primal arguments (the
# cotangent `g` they are given is a primal value here), where runtime.py's form is not batch-safe.


def batched_solve_outer(gb, ans, a, b):
    """solve_outer with the batch on gb or on ans."""
    if solve_reads_vectors(a, b):
        return batched_unbroadcast(-gb[..., :, None] * ans[..., None, :], a)
    return batched_unbroadcast(-gb @ _mT(ans), a)


def batched_solve_vjp_b_jvp(t, g, a, b):
    gb = solve_vjp_b_unreduced(g, a, b)
    return batched_unbroadcast(batched_solve_jvp_a(_mT(t), _mT(a), b, gb), b)


def batched_solve_vjp_a_jvp(t, g, a, b, ans):
    gb = solve_vjp_b_unreduced(g, a, b)
    return batched_solve_outer(batched_solve_jvp_a(_mT(t), _mT(a), b, gb), ans, a, b)


def batched_norm_vjp_jvp_ans(t, g, x, ans, ord=None, axis=None, keepdims=False):
    axis, p = _norm_kind(x, ord, axis)
    te = batched_expand_reduced(t, x, axis, keepdims)
    if p in (1, 0, np.inf, -np.inf):
        return np.zeros(np.shape(te), dtype=np.result_type(te, np.float32))
    ae = expand_reduced(ans, x, axis, keepdims)
    gx = expand_reduced(g, x, axis, keepdims)
    return -(p - 1) * gx * np.sign(x) * np.abs(x) ** (p - 1) * te / ae**p


def batched_std_vjp_jvp_x(t, g, x, ans, axis=None, ddof=0, keepdims=False):
    axes = tuple(n + 1 for n in _axes(axis, np.ndim(x)))
    centered = t - np.mean(t, axis=axes, keepdims=True)
    scale = expand_reduced(ans, x, axis, keepdims) * (_count(x, axis) - ddof)
    return expand_reduced(g, x, axis, keepdims) * centered / _nonzero(scale)


def batched_std_vjp_jvp_ans(t, g, x, ans, axis=None, ddof=0, keepdims=False):
    te = batched_expand_reduced(t / _nonzero(ans), x, axis, keepdims)
    return -std_vjp(g, x, ans, axis, ddof, keepdims) * te


def batched_einsum_vjp_jvp(t, g, subscripts, operands, k, which):
    return np.stack([einsum_vjp_jvp(row, g, subscripts, operands, k, which) for row in t])


# ----------------------------------------------------------------------------- scans and layout
# runtime.py's helpers for these read the batch from the rank of the cotangent


def batched_cumsum(a, axis=None, dtype=None, out=None):
    if axis is None:
        return np.cumsum(np.reshape(a, np.shape(a)[:1] + (-1,)), axis=1)
    return np.cumsum(a, axis=_shift(axis))


def batched_diff(a, n=1, axis=-1):
    return np.diff(a, n, axis=_shift(axis))


def batched_diagonal(a, offset=0, axis1=0, axis2=1):
    return np.diagonal(a, offset, _shift(axis1), _shift(axis2))


def batched_diag(v, k=0):
    if np.ndim(v) == 3:  # rows of matrices: their diagonals
        return np.array(np.diagonal(v, k, axis1=1, axis2=2))
    n = np.shape(v)[1] + abs(k)
    out = np.zeros((np.shape(v)[0], n, n), dtype=np.result_type(v, np.float32))
    i = np.arange(np.shape(v)[1])
    out[:, i + max(0, -k), i + max(0, k)] = v
    return out


def batched_tril(m, k=0):
    if np.ndim(m) == 2:  # rows of vectors: np.tril repeats a vector down the rows
        m = np.broadcast_to(m[:, None, :], np.shape(m)[:1] + np.shape(m)[1:] * 2)
    return np.tril(m, k)


def batched_triu(m, k=0):
    if np.ndim(m) == 2:
        m = np.broadcast_to(m[:, None, :], np.shape(m)[:1] + np.shape(m)[1:] * 2)
    return np.triu(m, k)


def batched_flip(m, axis=None):
    if axis is None:
        return np.flip(m, tuple(range(1, np.ndim(m))))
    return np.flip(m, _shift(axis))


def batched_roll(a, shift, axis=None):
    if axis is None:
        flat = np.reshape(a, np.shape(a)[:1] + (-1,))
        return np.reshape(np.roll(flat, shift, axis=1), np.shape(a))
    return np.roll(a, shift, _shift(axis))

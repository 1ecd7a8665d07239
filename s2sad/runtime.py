"""Helpers that generated adjoint code calls.

They are plain NumPy functions with no dependency on the rest of s2sad, so the CLI can copy their
source into a standalone module. Each takes the upstream cotangent `g` first, then the primal values
it needs, and returns a contribution with the primal's exact shape.
"""

import numpy as np

try:
    from s2sad.errors import NonScalarOutputError
except ImportError:  # inside a standalone module written by `s2sad emit`
    NonScalarOutputError = ValueError


def unbroadcast(g, x):
    """Sum `g` down to the shape of `x`, undoing NumPy broadcasting."""
    if type(g) is np.ndarray and type(x) is np.ndarray and g.shape == x.shape:
        return g  # the common case, without np.shape's dispatch
    shape = np.shape(x)
    if np.shape(g) == shape:
        return g
    lead = np.ndim(g) - len(shape)
    if lead > 0:
        g = np.sum(g, axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and np.shape(g)[i] != 1)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    return np.reshape(g, shape)


def grad_seed(out):
    """The seed 1 for a scalar output; anything else is refused."""
    if np.ndim(out) != 0 or not np.issubdtype(np.result_type(out), np.inexact):
        raise NonScalarOutputError(
            f"grad needs a function with a scalar float output, got shape {np.shape(out)} "
            f"and dtype {np.result_type(out)}; use s2sad.vjp for a seeded product or "
            "s2sad.jacobian for the full derivative"
        )
    return np.ones_like(out)[()] if isinstance(out, np.ndarray) else type(out)(1)


def inexact(x):
    """1.0 for a float value, 0.0 for integers and booleans: the weight of a derivative reaching
    a value whose dtype another argument chose (np.full_like(a, v) with an integer `a` is
    piecewise constant in v)."""
    return 1.0 if np.issubdtype(np.result_type(x), np.inexact) else 0.0


def as_accumulator(dx, x):
    """A fresh array shaped like `x` holding `dx`, safe to update in place."""
    out = np.zeros(np.shape(x), dtype=np.result_type(dx, x, np.float32))
    out += dx
    return out


def snapshot(v):
    """The value of a read from an array the function later writes into (a view would change)."""
    return v.copy() if isinstance(v, np.ndarray) else v


def stop_gradient(x):
    """Identity on values; no cotangent flows back through it."""
    return x


def zeros_like(x):
    """A zero cotangent with the shape and dtype of `x` (a Python float stays a float)."""
    if isinstance(x, (float, int)):
        return 0.0
    return np.zeros(np.shape(x), dtype=np.result_type(x, np.float32))


def reshape_like(g, x):
    """`g` in the shape of `x` (the adjoint of a reshape; jitted code calls it, since Numba
    reshapes only contiguous arrays)."""
    return np.reshape(g, np.shape(x))


def add_at(a, index, values):
    """`a[index] += values` with repeated indices adding up (np.add.at, which Numba lacks)."""
    np.add.at(a, index, values)


# ----------------------------------------------------------------------------- reductions


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(sorted(a % ndim for a in axis))
    return (axis % ndim,)


def expand_reduced(g, x, axis=None, keepdims=False):
    """Broadcast the cotangent of a reduction back over the reduced axes of `x`."""
    if not keepdims and axis is not None:
        g = np.expand_dims(g, _axes(axis, np.ndim(x)))
    return np.broadcast_to(g, np.shape(x))


def _count(x, axis):
    shape = np.shape(x)
    return int(np.prod([shape[a] for a in _axes(axis, len(shape))]))


def mean_vjp(g, x, axis=None, keepdims=False):
    return expand_reduced(g, x, axis, keepdims) / _count(x, axis)


def prod_vjp(g, x, ans, axis=None, keepdims=False):
    """Product of all other elements, exact even where `x` holds zeros."""
    x = np.asarray(x)
    axes = _axes(axis, x.ndim)
    rest = tuple(a for a in range(x.ndim) if a not in axes)
    moved = np.transpose(x, rest + axes)
    flat = moved.reshape(moved.shape[: len(rest)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), dtype=flat.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    others = np.transpose((left * right).reshape(moved.shape), np.argsort(rest + axes))
    return expand_reduced(g, x, axis, keepdims) * others


def extremum_vjp(g, x, ans, axis=None, keepdims=False):
    """max/min: the cotangent is shared evenly among the elements that attain the extremum."""
    hit = np.asarray(x) == expand_reduced(ans, x, axis, keepdims)
    count = np.sum(hit, axis=_axes(axis, np.ndim(x)), keepdims=True)
    return expand_reduced(g, x, axis, keepdims) * hit / count


def var_vjp(g, x, axis=None, ddof=0, keepdims=False):
    centered = x - np.mean(x, axis=axis, keepdims=True)
    return expand_reduced(g, x, axis, keepdims) * (2.0 / (_count(x, axis) - ddof)) * centered


def std_vjp(g, x, ans, axis=None, ddof=0, keepdims=False):
    centered = x - np.mean(x, axis=axis, keepdims=True)
    scale = expand_reduced(ans, x, axis, keepdims) * (_count(x, axis) - ddof)
    return expand_reduced(g, x, axis, keepdims) * centered / _nonzero(scale)


def _nonzero(scale):
    """`scale` with inf for 0: where std is 0 every centered value is 0, so the derivative is 0
    (np.std of one element is constant; at equal elements, 0 as np.abs's is at 0), not 0/0."""
    return np.where(scale == 0, np.inf, scale)


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


# ----------------------------------------------------------------------------- elementwise


def pow_vjp_exponent(g, ans, x):
    """d(x**y)/dy = x**y log x, taken as 0 where x <= 0 (the limit used by TensorFlow)."""
    safe = np.where(np.asarray(x) > 0, x, 1)
    return g * ans * np.log(safe)


def even_split(x1, x2):
    """The weight of `x1` in maximum/minimum: 1 where it wins, 1/2 on a tie."""
    return np.where(x1 == x2, 0.5, 1.0)


def clip_passes(a, a_min, a_max):
    """Where np.clip lets `a` through (bounds inclusive, so the gradient is 1 at the bounds)."""
    inside = np.ones(np.shape(a), dtype=bool)
    if a_min is not None:
        inside = inside & (a >= a_min)
    if a_max is not None:
        inside = inside & (a <= a_max)
    return inside


# ----------------------------------------------------------------------------- linear algebra


def _mT(a):
    return np.swapaxes(a, -1, -2)


def matmul_vjp_lhs(g, a, b):
    """Cotangent of `a` in `a @ b`: batched, 1-D operands as in np.matmul."""
    a_nd, b_nd = np.ndim(a), np.ndim(b)
    if a_nd == 1 and b_nd == 1:
        return g * b
    if a_nd <= 2 and b_nd <= 2:  # no batch axes: plain products, nothing to unbroadcast
        return np.outer(g, b) if b_nd == 1 else (b @ g if a_nd == 1 else g @ b.T)
    if b_nd == 1:
        return unbroadcast(np.expand_dims(g, -1) * b, a)
    if a_nd == 1:
        return unbroadcast(np.squeeze(b @ np.expand_dims(g, -1), -1), a)
    return unbroadcast(g @ _mT(b), a)


def matmul_vjp_rhs(g, a, b):
    """Cotangent of `b` in `a @ b`: batched, 1-D operands as in np.matmul."""
    a_nd, b_nd = np.ndim(a), np.ndim(b)
    if a_nd == 1 and b_nd == 1:
        return g * a
    if a_nd <= 2 and b_nd <= 2:
        return np.outer(a, g) if a_nd == 1 else a.T @ g
    if a_nd == 1:
        return unbroadcast(np.expand_dims(a, -1) * np.expand_dims(g, -2), b)
    if b_nd == 1:
        return unbroadcast(np.squeeze(_mT(a) @ np.expand_dims(g, -1), -1), b)
    return unbroadcast(_mT(a) @ g, b)


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


def outer_vjp_lhs(g, a, b):
    return np.reshape(g @ np.ravel(b), np.shape(a))


def outer_vjp_rhs(g, a, b):
    return np.reshape(np.ravel(a) @ g, np.shape(b))


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


def einsum_vjp(g, subscripts, operands, k):
    """Cotangent of operand `k` of np.einsum(subscripts, *operands)."""
    if "..." in subscripts:
        raise ValueError("s2sad's einsum derivative does not support '...' in subscripts")
    ins, out = einsum_parts(subscripts)
    target = ins[k]
    others = [s for i, s in enumerate(ins) if i != k]
    other_ops = [op for i, op in enumerate(operands) if i != k]
    available = set(out).union(*others) if others else set(out)
    unique = "".join(dict.fromkeys(c for c in target if c in available))
    res = np.einsum(",".join([out] + others) + "->" + unique, g, *other_ops)
    sizes = dict(zip(target, np.shape(operands[k])))
    # letters summed only inside operand k: broadcast the cotangent over them
    full = "".join(dict.fromkeys(target))
    for c in full:
        if c not in unique:
            res = np.expand_dims(res, -1)
            unique += c
    res = np.broadcast_to(res, [sizes[c] for c in unique])
    res = np.transpose(res, [unique.index(c) for c in full])
    if len(full) == len(target):
        return np.array(res)
    # repeated letters (a diagonal such as 'ii'): place the values on that diagonal
    grid = np.indices(np.shape(operands[k]))
    on_diag = np.ones(np.shape(operands[k]), dtype=bool)
    first = {}
    for pos, c in enumerate(target):
        if c in first:
            on_diag &= grid[pos] == grid[first[c]]
        else:
            first[c] = pos
    index = tuple(grid[first[c]] for c in full)
    return np.where(on_diag, res[index], 0.0)


def trace_vjp(g, a, offset=0, axis1=0, axis2=1):
    shape = np.shape(a)
    eye = np.eye(shape[axis1], shape[axis2], k=offset)
    rest = [n for i, n in enumerate(shape) if i not in (axis1 % len(shape), axis2 % len(shape))]
    full = np.reshape(g, tuple(rest) + (1, 1)) * eye
    return np.moveaxis(full, (-2, -1), (axis1, axis2))


def trace_last(a):
    """The trace over the last two axes (of each matrix in a stack)."""
    return np.trace(a, axis1=-2, axis2=-1)


def inv_vjp(g, ans):
    return -_mT(ans) @ g @ _mT(ans)


def solve_reads_vectors(a, b) -> bool:
    """Whether np.linalg.solve(a, b) takes b as (a stack of) vectors rather than matrices:
    NumPy 2 does only for a 1-D b, NumPy 1 whenever b has one axis fewer than a."""
    if int(np.__version__.split(".")[0]) >= 2:
        return np.ndim(b) == 1
    return np.ndim(b) == np.ndim(a) - 1


def solve_columns(a, rhs, b):
    """np.linalg.solve(a, rhs) with rhs read the way the forward call read b; the vector case
    goes through explicit columns, so a stack of vectors is never taken for a matrix."""
    if solve_reads_vectors(a, b):
        return np.linalg.solve(a, rhs[..., None])[..., 0]
    return np.linalg.solve(a, rhs)


def solve_vjp_b_unreduced(g, a, b):
    """The cotangent of b before summing over the axes that broadcasting added to it."""
    return solve_columns(_mT(a), g, b)


def solve_vjp_b(g, a, b):
    return unbroadcast(solve_vjp_b_unreduced(g, a, b), b)


def solve_vjp_a(g, a, b, ans):
    gb = solve_vjp_b_unreduced(g, a, b)
    if solve_reads_vectors(a, b):
        return unbroadcast(-gb[..., :, None] * ans[..., None, :], a)
    return unbroadcast(-gb @ _mT(ans), a)


def solve_jvp_a(t, a, b, ans):
    """The tangent of solve(a, b) along t for a: -solve(a, t ans), also for a batched t."""
    if solve_reads_vectors(a, b):
        return -solve_columns(a, (t @ ans[..., None])[..., 0], b)
    return -np.linalg.solve(a, t @ ans)


def det_vjp(g, a, ans):
    scale = np.asarray(g * ans)[..., None, None]
    return scale * _mT(np.linalg.inv(a))


# ----------------------------------------------------------------------------- shape


def concatenate_vjp(g, arrays, k, axis=0):
    """The piece of np.concatenate's cotangent that belongs to input `k`."""
    if axis is None:
        start = sum(np.size(a) for a in arrays[:k])
        return np.reshape(g[start : start + np.size(arrays[k])], np.shape(arrays[k]))
    start = sum(np.shape(a)[axis] for a in arrays[:k])
    index = [slice(None)] * np.ndim(g)
    index[axis] = slice(start, start + np.shape(arrays[k])[axis])
    return g[tuple(index)]


def stack_vjp(g, k, axis=0):
    """The slice of np.stack's cotangent that belongs to input `k`."""
    return np.moveaxis(g, axis, 0)[k]


# ----------------------------------------------------------------------------- indexing


def _is_basic(index):
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, (slice, int, np.integer)) for i in items)


def last_written(g, y, index):
    """The part of the cotangent `dy[index]` that reaches `v` in `y[index] = v`. An integer-array
    index may name an element more than once; NumPy keeps the last write, so only the last one
    gets that element's cotangent and the earlier ones get zero. `g` may carry leading batch
    axes in front of `y[index]`'s shape."""
    if _is_basic(index) or (isinstance(index, np.ndarray) and index.dtype == bool):
        return g  # (no element named twice)
    picked = np.arange(np.size(y)).reshape(np.shape(y))[index]
    flat = picked.reshape(-1)[::-1]
    _, first = np.unique(flat, return_index=True)  # the last write of each element
    if first.size == flat.size:
        return g
    keep = np.zeros(flat.size, dtype=bool)
    keep[flat.size - 1 - first] = True
    return np.where(keep.reshape(picked.shape), g, np.zeros((), np.result_type(g)))


def scatter_added(a, index, values):
    """A copy of `a` with `values` added at `index`, repeated indices adding up: what
    `np.add.at(a, index, values)` leaves in `a`, as a value (a rule can take it)."""
    out = np.array(a, copy=True)
    np.add.at(out, index, values)
    return out


def getitem_vjp(g, x, index):
    """Scatter the cotangent of `x[index]` back; repeated integer indices add up."""
    dx = np.zeros(np.shape(x), dtype=np.result_type(g, x, np.float32))
    if _is_basic(index):
        dx[index] += g
    else:
        np.add.at(dx, index, g)
    return dx


# ----------------------------------------------------------------------------- second derivatives
# Tangents of the helpers above in their primal arguments, for forward mode over generated
# gradient code (Hessians). Each takes the tangent `t` of one argument first. Where a batched
# tangent (a leading batch axis on `t`) needs other code, batched.py has a counterpart.


def inv_vjp_jvp(t, g, ans):
    """The tangent of inv_vjp(g, ans) = -ans^T g ans^T along `t` for ans."""
    return -(_mT(t) @ g @ _mT(ans) + _mT(ans) @ g @ _mT(t))


def det_vjp_jvp(t, g, a, ans):
    """The tangent of det_vjp(g, a, ans) along `t` for a: d(inv(a)^T) = -(inv(a) t inv(a))^T."""
    ia = np.linalg.inv(a)
    return -np.asarray(g * ans)[..., None, None] * _mT(ia @ t @ ia)


def solve_vjp_b_jvp(t, g, a, b):
    """The tangent of solve_vjp_b(g, a, b) = solve(a^T, g) along `t` for a."""
    gb = solve_vjp_b_unreduced(g, a, b)
    return unbroadcast(solve_jvp_a(_mT(t), _mT(a), b, gb), b)


def solve_outer(gb, ans, a, b):
    """-gb ans^T (the cotangent of a in solve(a, b)), summed to a's shape."""
    if solve_reads_vectors(a, b):
        return unbroadcast(-gb[..., :, None] * ans[..., None, :], a)
    return unbroadcast(-gb @ _mT(ans), a)


def solve_vjp_a_jvp(t, g, a, b, ans):
    """The tangent of solve_vjp_a(g, a, b, ans) along `t` for a (through solve(a^T, g))."""
    gb = solve_vjp_b_unreduced(g, a, b)
    return solve_outer(solve_jvp_a(_mT(t), _mT(a), b, gb), ans, a, b)


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


def _norm_weight(x, ans, p, axis, keepdims, expand):
    """d norm / dx, the weights norm_vjp gives a cotangent of ones (where it is smooth)."""
    ae = expand(ans, x, axis, keepdims)
    if p == 2:
        return x / ae
    if p in (1, 0, np.inf, -np.inf):
        return None  # piecewise linear or constant: no curvature
    return np.sign(x) * np.abs(x) ** (p - 1) / ae ** (p - 1)


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


def norm_vjp_jvp_ans(t, g, x, ans, ord=None, axis=None, keepdims=False):
    """The tangent of norm_vjp(g, x, ans, ...) along `t` for ans (x held)."""
    axis, p = _norm_kind(x, ord, axis)
    gx = expand_reduced(g, x, axis, keepdims)
    te = expand_reduced(t, x, axis, keepdims)
    if p in (1, 0, np.inf, -np.inf):
        return np.zeros_like(gx * te)
    ae = expand_reduced(ans, x, axis, keepdims)
    return -(p - 1) * gx * np.sign(x) * np.abs(x) ** (p - 1) * te / ae**p


def prod_pairs(x, t, axis=None):
    """For each element i of x, sum over j != i of t_j times the product of x over the group
    without i and j: the tangent of prod_vjp's weights, exact where x holds zeros. `t` may have
    leading axes more than x (a batch)."""
    x = np.asarray(x, dtype=np.result_type(x, np.float32))
    axes = _axes(axis, x.ndim)
    rest = tuple(a for a in range(x.ndim) if a not in axes)
    perm = rest + axes
    moved = np.transpose(x, perm)
    n = int(np.prod([x.shape[a] for a in axes]))
    flat = moved.reshape(moved.shape[: len(rest)] + (n,))
    lead = np.ndim(t) - x.ndim
    tm = np.transpose(t, tuple(range(lead)) + tuple(a + lead for a in perm))
    tflat = tm.reshape(tm.shape[: lead + len(rest)] + (n,))
    # row i of m: x with x_i set to 1, whose "others" products leave out i and j
    eye = np.eye(n, dtype=bool)
    m = np.where(eye, 1.0, flat[..., None, :])
    ones = np.ones(m.shape[:-1] + (1,), dtype=m.dtype)
    left = np.cumprod(np.concatenate([ones, m[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, m[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    pairs = np.where(eye, 0.0, left * right)
    out = np.einsum("...ij,...j->...i", pairs, tflat)
    out = out.reshape(tm.shape)
    back = np.argsort(perm)
    return np.transpose(out, tuple(range(lead)) + tuple(int(a) + lead for a in back))


def prod_vjp_jvp(t, g, x, ans, axis=None, keepdims=False):
    """The tangent of prod_vjp(g, x, ans, ...) along `t` for x."""
    return expand_reduced(g, x, axis, keepdims) * prod_pairs(x, t, axis)


def std_vjp_jvp_x(t, g, x, ans, axis=None, ddof=0, keepdims=False):
    """The tangent of std_vjp(g, x, ans, ...) along `t` for x (ans held)."""
    centered = t - np.mean(t, axis=axis, keepdims=True)
    scale = expand_reduced(ans, x, axis, keepdims) * (_count(x, axis) - ddof)
    return expand_reduced(g, x, axis, keepdims) * centered / _nonzero(scale)


def std_vjp_jvp_ans(t, g, x, ans, axis=None, ddof=0, keepdims=False):
    """The tangent of std_vjp(g, x, ans, ...) along `t` for ans (x held)."""
    ratio = expand_reduced(t / _nonzero(ans), x, axis, keepdims)
    return -std_vjp(g, x, ans, axis, ddof, keepdims) * ratio


def einsum_vjp_jvp(t, g, subscripts, operands, k, which):
    """The tangent of einsum_vjp(g, subscripts, operands, k) along `t` for operand `which`: the
    cotangent of operand k is linear in every other operand and does not read operand k."""
    if which == k:
        return np.zeros(np.shape(operands[k]), dtype=np.result_type(t, np.float32))
    operands = list(operands)
    operands[which] = t
    return einsum_vjp(g, subscripts, operands, k)


# ----------------------------------------------------------------------------- scans and layout
# These read any axes `g` has before the value's own as a batch (their batched forms are the
# same functions): `lead` counts them.


def _lead_axis(axis, lead):
    return axis + lead if axis >= 0 else axis


def cumsum_vjp(g, a, axis=None):
    """The cotangent of np.cumsum(a, axis): a cumulative sum from the end."""
    lead = np.ndim(g) - (1 if axis is None else np.ndim(a))
    if axis is None:
        flat = np.reshape(g, np.shape(g)[:lead] + (-1,))
        rev = np.cumsum(flat[..., ::-1], axis=-1)[..., ::-1]
        return np.reshape(rev, np.shape(g)[:lead] + np.shape(a))
    ax = _lead_axis(axis, lead)
    return np.flip(np.cumsum(np.flip(g, ax), axis=ax), ax)


def _cumprod_weights(flat):
    """w[..., i, j] = d cumprod(x)_j / d x_i along the last axis: the product of x_0..x_j
    without x_i for j >= i, else 0; exact where x holds zeros."""
    n = flat.shape[-1]
    eye = np.eye(n, dtype=bool)
    w = np.cumprod(np.where(eye, 1.0, flat[..., None, :]), axis=-1)
    return np.where(np.triu(np.ones((n, n), dtype=bool)), w, 0.0)


def _scan_moved(x, axis):
    """x with the scanned axis last (flattened first when axis is None)."""
    x = np.asarray(x, dtype=np.result_type(x, np.float32))
    return np.reshape(x, (-1,)) if axis is None else np.moveaxis(x, axis, -1)


def cumprod_vjp(g, a, axis=None):
    """The cotangent of np.cumprod(a, axis) (`g` may carry leading batch axes)."""
    lead = np.ndim(g) - (1 if axis is None else np.ndim(a))
    w = _cumprod_weights(_scan_moved(a, axis))
    if axis is None:
        gm = np.reshape(g, np.shape(g)[:lead] + (-1,))
        return np.reshape(np.einsum("...ij,...j->...i", w, gm), np.shape(g)[:lead] + np.shape(a))
    ax = _lead_axis(axis, lead)
    out = np.einsum("...ij,...j->...i", w, np.moveaxis(g, ax, -1))
    return np.moveaxis(out, -1, ax)


def cumprod_jvp(t, a, axis=None):
    """The tangent of np.cumprod(a, axis) along `t` (`t` may carry leading batch axes)."""
    lead = np.ndim(t) - np.ndim(a)
    w = _cumprod_weights(_scan_moved(a, axis))
    if axis is None:
        tm = np.reshape(t, np.shape(t)[:lead] + (-1,))
        return np.einsum("...ij,...i->...j", w, tm)
    ax = _lead_axis(axis, lead)
    out = np.einsum("...ij,...i->...j", w, np.moveaxis(t, ax, -1))
    return np.moveaxis(out, -1, ax)


def diff_vjp(g, a, n=1, axis=-1):
    """The cotangent of np.diff(a, n, axis): each difference sends +g to its right element and
    -g to its left one."""
    ax = _lead_axis(axis, np.ndim(g) - np.ndim(a))
    for _ in range(min(n, np.shape(a)[axis])):  # differences past the length leave it empty
        shape = list(np.shape(g))
        shape[ax] = 1
        pad = np.zeros(shape, dtype=np.result_type(g, np.float32))
        g = np.concatenate([pad, g], axis=ax) - np.concatenate([g, pad], axis=ax)
    return g


def diagonal_vjp(g, a, offset=0, axis1=0, axis2=1):
    """The cotangent of np.diagonal(a, offset, axis1, axis2): `g` placed on that diagonal."""
    shape = np.shape(a)
    lead = np.ndim(g) - (len(shape) - 1)
    a1, a2 = axis1 % len(shape), axis2 % len(shape)
    size = np.shape(g)[-1]
    rows = np.arange(size) + max(0, -offset)
    cols = np.arange(size) + max(0, offset)
    full = np.zeros(np.shape(g)[:-1] + (shape[a1], shape[a2]), dtype=np.result_type(g, np.float32))
    full[..., rows, cols] = g
    return np.moveaxis(full, (-2, -1), (a1 + lead, a2 + lead))


def diag_vjp(g, v, k=0):
    """The cotangent of np.diag(v, k): the diagonal read back (1-D v), or placed (2-D v)."""
    if np.ndim(v) == 1:
        return np.array(np.diagonal(g, k, axis1=-2, axis2=-1))
    return diagonal_vjp(g, v, k, 0, 1)
